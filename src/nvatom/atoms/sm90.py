"""SM90 (Hopper) warpgroup MMA: ``sm90.mma``, one record per ``wgmma.mma_async`` form.

A warpgroup (four warps, 128 threads) computes D (64 x N) += A (64 x K) * B (K x N).  B is
always read through a 64-bit shared-memory descriptor; A either through a descriptor too
(``ss``) or from four ``.b32`` registers per thread (``rs``, K-major).  D lives in registers:
N/2 per thread for 32-bit accumulators, N/4 ``.b32`` (``f16x2``) for f16.  The scale-d
predicate chooses D = A*B + D or D = A*B.

The lattice (docs/spec-deviations.md, "SM90 WGMMA"; every form re-checked by ptxas in
tests/atoms/test_wgmma_ptxas.py): M = 64 only, K = 256 / element bits; f16, bf16, tf32 and
FP8 take N = 8..256 step 8; s8/u8 and b1 take N = 8, 16, 24, then 32..256 step 16; no 4-bit
integers.  Immediates: f16/bf16 take scale-a, scale-b, trans-a (``ss`` only), trans-b; tf32
and FP8 only the scales (they are K-major); integer and b1 forms none.  Mixed s8 x u8 needs
PTX 8.4; b1 has ``.and.popc`` only.

Atom names read ``sm90.mma.m64n<N>k<K>.<ss|rs>[.satfinite].<dtype>.<atype>.<btype>[.and.popc]``
(the accumulator is D itself, so no C type is spelled), e.g. ``sm90.mma.m64n128k16.ss.f32.f16.f16``.

Source: PTX ISA "Asynchronous Warpgroup Level Matrix Multiply-Accumulate: wgmma.mma_async".
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Sequence
from typing import Any

from nvatom.arch import PtxVersion, Target, feature, target
from nvatom.atoms.interfaces import AtomVerificationError, MmaAtom, SmemDescriptorAtom
from nvatom.atoms.mma import FeatureGated, MnkShaped
from nvatom.atoms.verify import check_target_and_shape
from nvatom.diagnostics import (
    WGMMA_B1_TYPES,
    WGMMA_FP8_TYPES,
    WGMMA_INT4_TYPES,
    WGMMA_INT8_TYPES,
)
from nvatom.dtypes import DType, dtype
from nvatom.errors import NvatomError, lookup

__all__ = [
    "FORMS",
    "WGMMA_B1_TYPES",
    "WGMMA_FP8_TYPES",
    "WGMMA_INT4_TYPES",
    "WGMMA_INT8_TYPES",
    "WgmmaForm",
    "WgmmaFormError",
    "wgmma_form",
]

# The specification's WGMMA operand-type diagnostics ("GMMA K" verifier), byte for byte, are
# in the catalogue (nvatom.diagnostics); WGMMA_*_TYPES, imported above, are re-exported
# here for the verifier's callers.


class WgmmaFormError(NvatomError):
    """An inconsistent WGMMA table row, or an instruction the form cannot spell."""


F16, BF16, TF32, F32, S32, B1 = (dtype(n) for n in ("f16", "bf16", "tf32", "f32", "s32", "b1"))
FP8 = (dtype("e4m3"), dtype("e5m2"))
INT8 = (dtype("s8"), dtype("u8"))
INT4 = (dtype("s4"), dtype("u4"))

M = 64
N_FLOAT = tuple(range(8, 257, 8))
N_INT = (8, 16, 24, *range(32, 257, 16))  # ptxas: N = 40, 56, ..., 248 are illegal shapes
SOURCES = ("ss", "rs")
IMMEDIATES = ("scale_a", "scale_b", "trans_a", "trans_b")


@dataclasses.dataclass(frozen=True)
class WgmmaForm(MnkShaped, FeatureGated, MmaAtom, SmemDescriptorAtom):
    """One wgmma.mma_async instruction form (dense)."""

    n: int
    k: int
    d: DType
    a: DType
    b: DType
    a_source: str  # "ss": A by descriptor; "rs": A in registers
    satfinite: bool = False
    bop: str | None = None  # "and.popc" for b1, else None
    min_ptx: PtxVersion = (8, 0)
    feature: str = "wgmma"
    mnemonic: str = "sm90.mma"
    m: int = M

    def __post_init__(self) -> None:
        problems = []
        if self.m != M:
            problems.append(f"M = {self.m} (WGMMA has M = 64 only)")
        if self.a_source not in SOURCES:
            problems.append(f"A source '{self.a_source}'")
        bits = self.a.pack_bits
        if self.a.pack_bits != self.b.pack_bits or self.k * bits != 256:
            problems.append(f"K = {self.k} for {self.a.name} x {self.b.name} (K = 256/bits)")
        if self.n % 8 or not 8 <= self.n <= 256:
            problems.append(f"N = {self.n}")
        if (self.bop is not None) != (self.a.name == "b1") or self.bop not in (None, "and.popc"):
            problems.append(f"bop {self.bop} (b1 forms, and only they, take .and.popc)")
        if self.satfinite and self.a not in INT8:
            problems.append(".satfinite on a non-integer form")
        if self.d not in (F16, F32, S32):
            problems.append(f"accumulator {self.d.name}")
        feature(self.feature)  # raises on an unknown feature
        if problems:
            raise WgmmaFormError(f"bad WGMMA table row {self.name}: {'; '.join(problems)}")

    # ------------------------------------------------------------------ naming
    @property
    def c(self) -> DType:
        """The accumulator input: WGMMA accumulates into D in place."""
        return self.d

    def _types(self) -> list[str]:
        parts = ["satfinite"] if self.satfinite else []
        parts += [self.d.name, self.a.name, self.b.name]
        return parts + ([self.bop] if self.bop else [])

    @property
    def name(self) -> str:
        return ".".join([self.mnemonic, self.shape_str, self.a_source, *self._types()])

    @property
    def opcode(self) -> str:
        """E.g. ``wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16``."""
        return ".".join(["wgmma.mma_async.sync.aligned", self.shape_str, *self._types()])

    @property
    def family(self) -> str:
        """f16, bf16, tf32, fp8, int8 or b1: the rows of docs/spec-deviations.md, "SM90 WGMMA"."""
        if self.a in FP8:
            return "fp8"
        if self.a in INT8:
            return "int8"
        return self.a.name

    @property
    def mixed_integer(self) -> bool:
        return self.a in INT8 and self.a != self.b

    # ------------------------------------------------------------------ operands
    def registers(self, operand: str) -> int:
        """Registers per thread of the warpgroup: D N/2 (32-bit) or N/4 (f16x2), A 4 (rs),
        descriptors 1 (.b64)."""
        op = operand.upper()
        if op in ("C", "D"):
            return self.n * self.m * self.d.pack_bits // (128 * 32)
        if op == "A" and self.a_source == "rs":
            return self.m * self.k * self.a.pack_bits // (128 * 32)
        if op in ("A", "B"):
            return 1
        raise WgmmaFormError(f"{self.name}: no operand '{operand}'")

    def register_type(self, operand: str) -> str:
        op = operand.upper()
        if op in ("C", "D"):
            return "f32" if self.d == F32 else "b32"
        if op == "A" and self.a_source == "rs":
            return "b32"
        if op in ("A", "B"):
            return "b64"  # a shared-memory matrix descriptor
        raise WgmmaFormError(f"{self.name}: no operand '{operand}'")

    @property
    def immediates(self) -> tuple[str, ...]:
        """The immediate operands after scale-d, in order (subset of IMMEDIATES)."""
        if self.family in ("f16", "bf16"):
            return IMMEDIATES if self.a_source == "ss" else ("scale_a", "scale_b", "trans_b")
        if self.family in ("tf32", "fp8"):
            return ("scale_a", "scale_b")
        return ()

    def instruction(self, d: str | Sequence[str], a: str | Sequence[str], b_desc: str,
                    scale_d: str, *imm: int | str) -> str:
        """``opcode d, a, b-desc, scale-d[, imm...];``; vectors given as register lists are
        checked against the form's counts."""
        if len(imm) != len(self.immediates):
            raise WgmmaFormError(f"{self.name} takes {len(self.immediates)} immediates "
                                 f"({', '.join(self.immediates) or 'none'}), got {len(imm)}")
        for what, v in zip(self.immediates, imm, strict=True):
            legal = ("1", "-1") if what.startswith("scale") else ("0", "1")
            if str(v) not in legal:
                raise WgmmaFormError(f"{self.name}: {what} must be {' or '.join(legal)}, "
                                     f"got {v}")
        ops = [self._vector("D", d), self._vector("A", a) if self.a_source == "rs" else
               self._scalar("A", a), b_desc, scale_d, *(str(v) for v in imm)]
        return f"{self.opcode} {', '.join(ops)};"

    def _vector(self, op: str, regs: str | Sequence[str]) -> str:
        if isinstance(regs, str):
            return regs
        if len(regs) != self.registers(op):
            raise WgmmaFormError(f"{self.name}: {op} takes {self.registers(op)} registers, "
                                 f"got {len(regs)}")
        return "{" + ", ".join(regs) + "}"

    def _scalar(self, op: str, reg: str | Sequence[str]) -> str:
        if not isinstance(reg, str):
            raise WgmmaFormError(f"{self.name}: {op} is a 64-bit descriptor, not a vector")
        return reg

    # ------------------------------------------------------------------ verification
    def verify_instance(self, target_: Target | str, use: Any) -> None:
        """Check a use (nvatom.atoms.verify.MmaUse): target, shape, type pairs, residency."""
        _verify(self, target(target_), use)


def _fail(msg: str) -> None:
    raise AtomVerificationError(msg)


def _pair_diagnostic(a: DType, b: DType, d: DType) -> str | None:
    """The specification's dedicated diagnostic for an unsupported (A, B, D) combination, if any."""
    ab = (a, b)
    if any(t in INT4 for t in ab):
        # WGMMA has no 4-bit integers (docs/spec-deviations.md, "SM90 WGMMA")
        return WGMMA_INT4_TYPES
    if any(t in INT8 for t in ab) and (not all(t in INT8 for t in ab) or d != S32):
        return WGMMA_INT8_TYPES
    if B1 in ab and (ab != (B1, B1) or d != S32):
        return WGMMA_B1_TYPES
    if any(t in FP8 for t in ab) and not all(t in FP8 for t in ab):
        return WGMMA_FP8_TYPES
    return None


def _verify(form: WgmmaForm, t: Target, use: Any) -> None:
    check_target_and_shape(form, t, use)
    a, b, d = use.a.dtype, use.b.dtype, use.d_.dtype
    msg = _pair_diagnostic(a, b, d)
    if msg is not None:
        _fail(msg)
    for slot, want, got in (("a", form.a, a), ("b", form.b, b), ("c", form.d, d)):
        if want != got:
            _fail(f"expects operand {slot} with element type {want.name}, but get {got.name}.")
    a_res = "smem_desc_view" if form.a_source == "ss" else "rmem"
    for slot, want, got in (("A", a_res, use.a.residency), ("B", "smem_desc_view",
                                                           use.b.residency),
                            ("D", "rmem", use.d_.residency)):
        if got != want:
            _fail(f"atom '{form.name}' expects {slot} in {want}, but got {got}")


# ---------------------------------------------------------------------- the table
# (family, A/B type pairs, accumulators, N lattice, satfinite choices, bop, min PTX)
_FAMILIES = (
    ("f16", ((F16, F16),), (F16, F32), N_FLOAT, (False,), None, (8, 0)),
    ("bf16", ((BF16, BF16),), (F32,), N_FLOAT, (False,), None, (8, 0)),
    ("tf32", ((TF32, TF32),), (F32,), N_FLOAT, (False,), None, (8, 0)),
    ("fp8", tuple(itertools.product(FP8, repeat=2)), (F16, F32), N_FLOAT, (False,), None, (8, 0)),
    ("int8", tuple((a, a) for a in INT8), (S32,), N_INT, (False, True), None, (8, 0)),
    ("int8-mixed", tuple((a, b) for a, b in itertools.product(INT8, repeat=2) if a != b),
     (S32,), N_INT, (False, True), None, (8, 4)),
    ("b1", ((B1, B1),), (S32,), N_INT, (False,), "and.popc", (8, 0)),
)


def _forms() -> tuple[WgmmaForm, ...]:
    out = []
    for _fam, pairs, accs, ns, sats, bop, ptx in _FAMILIES:
        for (a, b), d, n, sat, src in itertools.product(pairs, accs, ns, sats, SOURCES):
            out.append(WgmmaForm(n, 256 // a.pack_bits, d, a, b, src, sat, bop, ptx))
    return tuple(out)


FORMS: tuple[WgmmaForm, ...] = _forms()
_BY_NAME = {f.name: f for f in FORMS}


def wgmma_form(name: str) -> WgmmaForm:
    """Resolve an atom name like ``sm90.mma.m64n128k16.ss.f32.f16.f16``."""
    return lookup(_BY_NAME, name.strip(), lambda: WgmmaFormError(f"unknown WGMMA atom '{name}'"))
