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

from nvatom.arch import Target, Tier, feature, target
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
    """One atom kind of the registry (seed 004 "Atom TypeID Registry").

    ``min_tier`` is the specification's "Min tier" column; ``feature`` names the
    :mod:`nvatom.arch` feature rule the kind's instructions need, which is what decides where
    the kind is allowed (:meth:`allowed_on`): the tier order alone would admit ``sm90.mma``
    (wgmma, ``sm_90a`` only) on plain ``sm_90`` and the tcgen05 atoms on ``sm_120a``.  The
    rules are ptxas's (tests/test_arch.py), and tests/atoms/test_verify.py assembles one
    instruction of every record on every target against :meth:`allowed_on`.
    """

    mnemonic: str
    min_tier: Tier | None  # None: all tiers
    interfaces: tuple[str, ...]
    residency: str
    dialect_mnemonic: bool = True  # False: no cute_nvgpu spelling (intrinsic path)
    note: str = ""
    feature: str | None = None  # nvatom.arch feature; None: every target of min_tier and up

    def __post_init__(self) -> None:
        if self.feature is not None:
            feature(self.feature)  # raises on an unknown feature name

    def allowed_on(self, t: Target | str) -> bool:
        """Does the target have this atom kind?  The feature rule where the record names one
        (exact about ``a``/``f`` suffixes and majors), else the tier order."""
        tt = target(t)
        if self.feature is not None:
            return feature(self.feature).available_on(tt)
        return self.min_tier is None or tt.tier >= self.min_tier

    def rejection(self, t: Target | str, name: str | None = None) -> str | None:
        """Why an atom of this kind (``name``, default the mnemonic) is not allowed on ``t``,
        or None: "atom 'X' needs tier T, but target Y is tier U" below the minimum tier,
        else "atom 'X' is not available on Y: it needs <feature> (<rule>)"."""
        tt = target(t)
        if self.allowed_on(tt):
            return None
        what = name or self.mnemonic
        if self.min_tier is not None and tt.tier < self.min_tier:
            return (f"atom '{what}' needs tier {self.min_tier.label}, but target {tt.name} is "
                    f"tier {tt.tier.label}")
        f = feature(self.feature or "")
        return f"atom '{what}' is not available on {tt.name}: it needs {f.description} ({f.rule})"


ATOMS: dict[str, AtomRecord] = {
    r.mnemonic: r
    for r in (
        AtomRecord("atom.universal_fma", None, ("MmaAtom",), "A, B, D in rmem"),
        AtomRecord("sm70.mma", Tier.SM70, ("MmaAtom",), "A, B, D in rmem",
                   dialect_mnemonic=False, feature="mma.m8n8k4",
                   note="served by the universal/NVVM-intrinsic path (llvm.nvvm.mma.*)"),
        AtomRecord("sm75.mma", Tier.SM75, ("MmaAtom",), "A, B, D in rmem",
                   dialect_mnemonic=False, feature="mma.m16n8k8",
                   note="served by the universal/NVVM-intrinsic path (llvm.nvvm.mma.*)"),
        AtomRecord("sm80.mma", Tier.SM80, ("MmaAtom",),
                   "A, B, D in rmem; one element type per operand", feature="mma.sm80"),
        AtomRecord("sm80.sparse_mma", Tier.SM80, ("MmaAtom", "SparseMetadataAtom"),
                   "A, B, D in rmem; metadata operand alongside A", feature="mma.sp"),
        AtomRecord("sm89.mma", Tier.SM89, ("MmaAtom",), "A, B, D in rmem; FP8 element types",
                   feature="mma.fp8"),
        AtomRecord("atom.universal_copy", None, ("CopyAtom",),
                   "any source-destination pair the target supports"),
        AtomRecord("atom.ldsm", Tier.SM75, ("CopyAtom",),
                   "src=smem, dst=rmem, shape in LDSM matrix", feature="ldmatrix"),
        AtomRecord("atom.stsm", Tier.SM90, ("CopyAtom",),
                   "src=rmem, dst=smem, shape in STSM matrix", feature="stmatrix"),
        AtomRecord("atom.simt_async_copy", Tier.SM80, ("CopyAtom", "AsyncCopyAtom"),
                   "cp.async gmem -> smem", feature="cp.async"),
        AtomRecord("sm90.mma", Tier.SM90, ("MmaAtom", "SmemDescriptorAtom"),
                   "A in rmem or smem_desc_view; B in smem_desc_view; D in rmem",
                   note="forms in nvatom.atoms.sm90; wgmma is sm_90a only", feature="wgmma"),
        AtomRecord("sm100.mma", Tier.SM100, ("MmaAtom", "TmemAtom", "SmemDescriptorAtom"),
                   "A in memref(tmem)/smem_desc_view; B in smem_desc_view; D in memref (tmem)",
                   note="forms and atoms in nvatom.atoms.sm100; also serves sm_110a/f",
                   feature="tcgen05"),
        AtomRecord("sm100.mma_sp", Tier.SM100, ("MmaAtom", "TmemAtom", "SparseMetadataAtom"),
                   "UMMA contract + structurally-sparse A and metadata in tmem",
                   feature="tcgen05"),
        AtomRecord("sm100.mma_bs", Tier.SM100, ("MmaAtom", "TmemAtom", "BlockScaleAtom"),
                   "UMMA contract + scale-factor operands in tmem", feature="tcgen05"),
        AtomRecord("sm100.mma_bs_sp", Tier.SM100,
                   ("MmaAtom", "TmemAtom", "BlockScaleAtom", "SparseMetadataAtom"),
                   "UMMA block-scale + sparsity", feature="tcgen05"),
        AtomRecord("atom.tmem_load", Tier.SM100, ("CopyAtom",), "src=tmem, dst=rmem",
                   note="tcgen05.ld; nvatom.atoms.tmem", feature="tcgen05"),
        AtomRecord("atom.tmem_store", Tier.SM100, ("CopyAtom",), "src=rmem, dst=tmem",
                   note="tcgen05.st; nvatom.atoms.tmem", feature="tcgen05"),
        AtomRecord("atom.s2t_copy", Tier.SM100, ("CopyAtom", "AsyncCopyAtom"),
                   "src=smem, dst=tmem", note="tcgen05.cp; nvatom.atoms.tmem",
                   feature="tcgen05"),
        AtomRecord("sm89.sparse_mma", Tier.SM89, ("MmaAtom", "SparseMetadataAtom"),
                   "A, B, D in rmem; metadata operand alongside A",
                   note="not in the specification's registry: ptxas has sparse FP8 on sm_89 "
                   "(ERRATA 1a)", feature="mma.fp8"),
        AtomRecord("SM120.mma_bs", Tier.SM120, ("MmaAtom", "BlockScaleAtom"),
                   "A, B, D in rmem; two scale-factor operands (one per A, B) in rmem",
                   note="forms in nvatom.atoms.sm120; sparse forms also SparseMetadataAtom",
                   feature="mma.block_scale"),
        AtomRecord("sm120.mma", Tier.SM120, ("MmaAtom",), "A, B, D in rmem; kind::f8f6f4",
                   dialect_mnemonic=False,
                   note="not in the specification's registry: unscaled FP8/FP6/FP4 mma.sync "
                   "of sm_120a/f (nvatom.atoms.sm120); its FP8-only forms also assemble on the "
                   "sm_100/sm_110 a/f targets", feature="mma.f8f6f4.fp8"),
        AtomRecord("sm120.sparse_mma", Tier.SM120, ("MmaAtom", "SparseMetadataAtom"),
                   "A, B, D in rmem; kind::f8f6f4; metadata operand alongside A",
                   dialect_mnemonic=False,
                   note="not in the specification's registry (nvatom.atoms.sm120); FP8-only "
                   "forms as sm120.mma", feature="mma.f8f6f4.fp8"),
        # TMA (seed 004 registry, seed 001 family; nvatom.atoms.tma, docs/tma.md)
        AtomRecord("atom.tma_load", Tier.SM90,
                   ("CopyAtom", "TmaAtom", "PrefetchAtom", "AsyncCopyAtom"),
                   "gmem (tensor map) -> smem; completes on an smem mbarrier", feature="tma"),
        AtomRecord("atom.tma_store", Tier.SM90, ("CopyAtom", "TmaAtom", "AsyncCopyAtom"),
                   "smem -> gmem (tensor map); completes through bulk groups", feature="tma"),
        AtomRecord("atom.tma_reduce", Tier.SM90, ("CopyAtom", "TmaAtom", "AsyncCopyAtom"),
                   "smem -> reduce into gmem (tensor map); bulk groups", feature="tma"),
        *(AtomRecord(f"atom.non_exec_tiled_tma_{d}", Tier.SM90, ("TmaAtom",),
                     "partition-verified; no mbarrier or cache binding yet", feature="tma")
          for d in ("load", "store", "reduce")),
        AtomRecord("atom.make_exec_tma", Tier.SM90, ("TmaAtom",),
                   "binds a non-exec TMA atom to an smem mbarrier, cache mode, CTA mask",
                   feature="tma"),
        AtomRecord("prefetch_tma_desc", Tier.SM90, ("PrefetchAtom",),
                   "tensor map in param/const/global space", feature="tma"),
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
    from nvatom.atoms import sm120  # SM120 forms live in their own table (docs/sm120.md)

    if sm120.is_sm120_name(key):
        return sm120.sm120_form(key)  # type: ignore[return-value]
    near = difflib.get_close_matches(key, list(_by_name()), n=3, cutoff=0.6)
    hint = f"; nearest: {', '.join(near)}" if near else "; see 'nvatom atoms' for the list"
    raise UnknownAtomError(f"unknown MMA atom '{key}'{hint}")


def _tier(tier: Tier | str) -> Tier:
    if isinstance(tier, Tier):
        return tier
    try:
        return Tier[str(tier).upper()]
    except KeyError:
        raise NvatomError(f"unknown tier '{tier}' (one of {', '.join(Tier.__members__)})") \
            from None


def check_shape_in_lattice(
    tier: Tier | str, mnk: tuple[int, int, int], a: DType | str, b: DType | str,
    c: DType | str,
    *,
    sparse: bool = False,
) -> bool:
    """Seed 000's lattice gate: is there a (dense, or with ``sparse`` a sparse) form of this
    tier with this shape and element types?  Every tier reads its own table:

    * SM70-SM89: the register-MMA forms of that tier (``sm80.mma``, ``sm89.mma``, ...);
    * SM90: the WGMMA forms (``nvatom.atoms.sm90``: M = 64, K = 256 / bits, the ISA's N);
    * SM100 and SM110: the UMMA atoms (``nvatom.atoms.sm100``: the PTX ISA's kind x M x N
      table, K from the kind, doubled when sparse); SM110 targets run the SM100 atoms
      (tcgen05 on sm_110a/f, docs/spec-deviations.md);
    * SM120: the block-scaled and ``kind::f8f6f4`` forms (``nvatom.atoms.sm120``).
    """
    t = _tier(tier)
    shape = tuple(mnk)
    ta, tb, tc = dtype(a), dtype(b), dtype(c)
    if t == Tier.SM90:
        from nvatom.atoms import sm90

        return not sparse and any(f.shape == shape and (f.a, f.b, f.d) == (ta, tb, tc)
                                  for f in sm90.FORMS)
    if t in (Tier.SM100, Tier.SM110):
        from nvatom.atoms import sm100

        if len(shape) != 3:
            return False
        m, n, k = shape
        return any(u.k == k and u.sparse == sparse
                   for u in sm100.umma_atoms(a=ta, b=tb, d=tc, m=m, n=n))
    return any(
        f.tier == t and f.shape == shape and (f.a, f.b, f.c) == (ta, tb, tc)
        and f.is_sparse == sparse
        for f in (*_all_forms(), *_sm120_forms())
    )


def _sm120_forms() -> tuple:  # type: ignore[type-arg]
    from nvatom.atoms import sm120  # SM120 block-scaled and kind::f8f6f4 forms

    return (*sm120.MMA_BS_FORMS, *sm120.F8F6F4_FORMS)
