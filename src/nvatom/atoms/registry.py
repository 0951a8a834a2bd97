"""The atom registry: every atom kind and every register MMA form, queryable as data.

Two levels, as in the specification's "Atom TypeID Registry" (seed 004):

* :data:`ATOMS`: one :class:`AtomRecord` per atom mnemonic (``atom.universal_fma``,
  ``sm80.mma``, ...), with its minimum tier, the interfaces it implements and its residency
  contract.  Target verification rejects an atom whose tier exceeds the target.
* the forms of each register-MMA family (one per PTX instruction form), collected from the
  tier tables ``sm70`` ... ``sm89``; :func:`mma_forms` filters them by target and types and
  :func:`mma_form` resolves an atom name, suggesting the nearest legal names on a miss.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools

from nvatom.arch import Target, Tier, target
from nvatom.atoms import sm70, sm75, sm80, sm89
from nvatom.atoms.mma import MmaForm
from nvatom.dtypes import DType, dtype
from nvatom.errors import NvatomError

__all__ = [
    "ATOMS",
    "AtomRecord",
    "UnknownAtomError",
    "atom_record",
    "check_shape_in_lattice",
    "mma_form",
    "mma_forms",
]


class UnknownAtomError(NvatomError):
    """An atom name that is not in the registry (the message lists the nearest names)."""


@dataclasses.dataclass(frozen=True)
class AtomRecord:
    """One atom kind of the registry (seed 004 "Atom TypeID Registry")."""

    mnemonic: str
    min_tier: Tier | None  # None: all tiers
    interfaces: tuple[str, ...]
    residency: str
    dialect_mnemonic: bool = True  # False: no cute_nvgpu spelling (intrinsic path)
    note: str = ""

    def allowed_on(self, t: Target | str) -> bool:
        return self.min_tier is None or target(t).tier >= self.min_tier


ATOMS: dict[str, AtomRecord] = {
    r.mnemonic: r
    for r in (
        AtomRecord("atom.universal_fma", None, ("MmaAtom",), "A, B, D in rmem"),
        AtomRecord("sm70.mma", Tier.SM70, ("MmaAtom",), "A, B, D in rmem",
                   dialect_mnemonic=False,
                   note="served by the universal/NVVM-intrinsic path (llvm.nvvm.mma.*)"),
        AtomRecord("sm75.mma", Tier.SM75, ("MmaAtom",), "A, B, D in rmem",
                   dialect_mnemonic=False,
                   note="served by the universal/NVVM-intrinsic path (llvm.nvvm.mma.*)"),
        AtomRecord("sm80.mma", Tier.SM80, ("MmaAtom",),
                   "A, B, D in rmem; one element type per operand"),
        AtomRecord("sm80.sparse_mma", Tier.SM80, ("MmaAtom", "SparseMetadataAtom"),
                   "A, B, D in rmem; metadata operand alongside A"),
        AtomRecord("sm89.mma", Tier.SM89, ("MmaAtom",), "A, B, D in rmem; FP8 element types"),
        AtomRecord("atom.universal_copy", None, ("CopyAtom",),
                   "any source-destination pair the target supports"),
        AtomRecord("atom.ldsm", Tier.SM75, ("CopyAtom",),
                   "src=smem, dst=rmem, shape in LDSM matrix"),
        AtomRecord("atom.stsm", Tier.SM90, ("CopyAtom",),
                   "src=rmem, dst=smem, shape in STSM matrix"),
        AtomRecord("atom.simt_async_copy", Tier.SM80, ("CopyAtom", "AsyncCopyAtom"),
                   "cp.async gmem -> smem"),
        AtomRecord("sm90.mma", Tier.SM90, ("MmaAtom", "SmemDescriptorAtom"),
                   "A in rmem or smem_desc_view; B in smem_desc_view; D in rmem",
                   note="forms in nvatom.atoms.sm90 (issue 5: table and verifier so far)"),
        AtomRecord("sm89.sparse_mma", Tier.SM89, ("MmaAtom", "SparseMetadataAtom"),
                   "A, B, D in rmem; metadata operand alongside A",
                   note="not in the specification's registry: ptxas has sparse FP8 on sm_89 "
                   "(ERRATA 1a)"),
    )
}


def atom_record(mnemonic: str) -> AtomRecord:
    try:
        return ATOMS[mnemonic]
    except KeyError:
        near = difflib.get_close_matches(mnemonic, list(ATOMS), n=3, cutoff=0.4)
        raise UnknownAtomError(
            f"unknown atom '{mnemonic}'" + (f"; did you mean {', '.join(near)}?" if near else "")
        ) from None


@functools.cache
def _all_forms() -> tuple[MmaForm, ...]:
    forms = sm70.FORMS + sm75.FORMS + sm80.FORMS + sm89.FORMS
    names = [f.name for f in forms]
    dup = {n for n in names if names.count(n) > 1}
    if dup:
        raise NvatomError(f"MMA tables define these names twice: {sorted(dup)}")
    return forms


@functools.cache
def _by_name() -> dict[str, MmaForm]:
    return {f.name: f for f in _all_forms()}


def _as_dtype(t: DType | str | None) -> DType | None:
    return None if t is None else dtype(t)


def mma_forms(
    target_: Target | str | None = None,
    *,
    a: DType | str | None = None,
    b: DType | str | None = None,
    acc: DType | str | None = None,
    shape: tuple[int, int, int] | None = None,
    mnemonic: str | None = None,
) -> list[MmaForm]:
    """Register MMA forms, filtered by target availability, element types, shape, family."""
    ta, tb, tc = _as_dtype(a), _as_dtype(b), _as_dtype(acc)
    t = target(target_) if target_ is not None else None
    out = []
    for f in _all_forms():
        if t is not None and not f.available_on(t):
            continue
        if (ta is not None and f.a != ta) or (tb is not None and f.b != tb):
            continue
        if tc is not None and f.c != tc:
            continue
        if shape is not None and f.shape != tuple(shape):
            continue
        if mnemonic is not None and f.mnemonic != mnemonic:
            continue
        out.append(f)
    return out


def mma_form(name: str) -> MmaForm:
    """Resolve an atom name like ``sm80.mma.m16n8k16.f32.bf16.bf16.f32``."""
    key = name.strip()
    try:
        return _by_name()[key]
    except KeyError:
        pass
    near = difflib.get_close_matches(key, list(_by_name()), n=3, cutoff=0.6)
    hint = f"; nearest: {', '.join(near)}" if near else "; see 'nvatom atoms' for the list"
    raise UnknownAtomError(f"unknown MMA atom '{key}'{hint}")


def check_shape_in_lattice(
    tier: Tier | str, mnk: tuple[int, int, int], a: DType | str, b: DType | str,
    c: DType | str,
    *,
    sparse: bool = False,
) -> bool:
    """Seed 000's lattice gate: is there a (dense, or with ``sparse`` a sparse) form of this
    tier with this shape and element types?"""
    if isinstance(tier, str):
        try:
            tier = Tier[tier.upper()]
        except KeyError:
            raise NvatomError(f"unknown tier '{tier}' (one of {', '.join(Tier.__members__)})") \
                from None
    ta, tb, tc = dtype(a), dtype(b), dtype(c)
    return any(
        f.tier == tier and f.shape == tuple(mnk) and (f.a, f.b, f.c) == (ta, tb, tc)
        and f.is_sparse == sparse
        for f in _all_forms()
    )
