"""``atom.universal_fma``: the all-tier scalar MMA atom (D = A * B + C, one thread, one value).

Its contract (the spec's registry): A, B and D in registers, and all MMA operands of one element
type.  :data:`SCALAR_FMA` says which PTX instruction computes it for each element type (PTX ISA,
"Floating-Point Instructions: fma", "Half Precision Floating-Point Instructions: fma",
"Integer Arithmetic Instructions: mad"): one value per thread sits in the low bits of one
register (``nvatom.ir.lower``), so 16-bit floats use the ``x2`` form (the low half is the
value) and 8- and 4-bit integers ``mad.lo.s32``/``.u32`` (the low bits of the result are the
wrapped value; the bits above are unspecified).  Element types without a scalar PTX FMA
(the FP8/FP6/FP4 and scale-factor types, b1) are rejected at verification.
"""

from __future__ import annotations

import dataclasses

from nvatom import diagnostics as D
from nvatom.arch import Target
from nvatom.arch import target as _target
from nvatom.atoms.interfaces import AtomVerificationError, MmaAtom
from nvatom.atoms.verify import MmaUse
from nvatom.dtypes import DType, dtype
from nvatom.layout import Layout

__all__ = ["SCALAR_FMA", "UniversalFma"]

#: element type -> (PTX instruction on the value's register, minimum SM): the scalar FMA
SCALAR_FMA: dict[str, tuple[str, int]] = {
    "f64": ("fma.rn.f64", 70), "f32": ("fma.rn.f32", 70), "tf32": ("fma.rn.f32", 70),
    "f16": ("fma.rn.f16x2", 70), "bf16": ("fma.rn.bf16x2", 80),
    "s32": ("mad.lo.s32", 70), "s8": ("mad.lo.s32", 70), "s4": ("mad.lo.s32", 70),
    "u8": ("mad.lo.u32", 70), "u4": ("mad.lo.u32", 70),
}


@dataclasses.dataclass(frozen=True)
class UniversalFma(MmaAtom):
    element_type: DType

    mnemonic = "atom.universal_fma"

    @classmethod
    def of(cls, t: DType | str) -> UniversalFma:
        return cls(dtype(t))

    @property
    def shape_mnk(self) -> tuple[int, int, int]:
        return (1, 1, 1)

    @property
    def name(self) -> str:
        return f"{self.mnemonic}.{self.element_type.name}"

    def tv_layout(self, operand: str) -> Layout:
        return Layout((1, 1), (0, 0))  # one thread holds the one value

    @property
    def instruction(self) -> str:
        """The PTX instruction computing D = A * B + C (:data:`SCALAR_FMA`)."""
        return SCALAR_FMA[self.element_type.name][0]

    def verify_instance(self, target: Target | str, use: object) -> None:
        assert isinstance(use, MmaUse)
        t_ = _target(target)
        fma = SCALAR_FMA.get(self.element_type.name)
        if fma is None:
            raise AtomVerificationError(
                f"atom '{self.name}' has no scalar PTX fma/mad for {self.element_type.name} "
                f"(element types: {', '.join(SCALAR_FMA)})")
        if t_.cc < fma[1]:
            raise AtomVerificationError(
                f"atom '{self.name}' is not available on {t_.name}: {fma[0]} needs "
                f"sm_{fma[1]} or later")
        a, b, c, d = use.a, use.b, use.c, use.d_
        if any(x.residency != "rmem" for x in (a, b, d)):
            raise AtomVerificationError(f"{D.RMEM_INPUTS}{a}, B: {b}, D: {d}")
        t = self.element_type.name
        if any(x.type_name != t for x in (a, b, c, d)):
            raise AtomVerificationError(
                f"{D.ALL_OPERANDS_ELEMENT_TYPE} {t}, but got A: {a.type_name}, "
                f"B: {b.type_name}, C: {c.type_name}, D: {d.type_name}"
            )
