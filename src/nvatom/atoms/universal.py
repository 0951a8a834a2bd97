"""``atom.universal_fma``: the all-tier scalar MMA atom (D = A * B + C, one thread, one value).

Its contract (the spec's registry): A, B and D in registers, and all MMA operands of one element
type.
"""

from __future__ import annotations

import dataclasses

from nvatom import diagnostics as D
from nvatom.arch import Target
from nvatom.atoms.interfaces import AtomVerificationError, MmaAtom
from nvatom.atoms.verify import MmaUse
from nvatom.dtypes import DType, dtype
from nvatom.layout import Layout

__all__ = ["UniversalFma"]


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

    def verify_instance(self, target: Target | str, use: object) -> None:
        assert isinstance(use, MmaUse)
        a, b, c, d = use.a, use.b, use.c, use.d_
        if any(x.residency != "rmem" for x in (a, b, d)):
            raise AtomVerificationError(f"{D.RMEM_INPUTS}{a}, B: {b}, D: {d}")
        t = self.element_type.name
        if any(x.type_name != t for x in (a, b, c, d)):
            raise AtomVerificationError(
                f"{D.ALL_OPERANDS_ELEMENT_TYPE} {t}, but got A: {a.type_name}, "
                f"B: {b.type_name}, C: {c.type_name}, D: {d.type_name}"
            )
