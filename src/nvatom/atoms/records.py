"""The atom kinds: one :class:`AtomRecord` per atom mnemonic, with its target rule.

:data:`ATOMS` holds one record per atom mnemonic (``atom.universal_fma``, ``sm80.mma``, ...):
its minimum tier, the interfaces it implements and its residency contract, after the
specification's "Atom TypeID Registry" table.  Target verification rejects an atom whose
kind is not allowed on the target.  This module imports no atom table, so every atom module
and verifier may read it; the families that resolve names and list atoms are
:mod:`nvatom.atoms.registry`.
"""

from __future__ import annotations

import dataclasses
import difflib

from nvatom.arch import Target, Tier, feature, target
from nvatom.errors import NvatomError

__all__ = ["ATOMS", "AtomRecord", "UnknownAtomError", "atom_record"]


class UnknownAtomError(NvatomError):
    """An atom name that is not in the registry (the message lists the nearest names)."""


@dataclasses.dataclass(frozen=True)
class AtomRecord:
    """One atom kind of the registry (the specification's "Atom TypeID Registry").

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
        AtomRecord("sm70.mma", Tier.SM70, ("MmaAtom",), "A, B, D in rmem", feature="mma.m8n8k4",
                   note="the specification serves it by the NVVM-intrinsic path; nvatom's IR "
                   "spells it !cute_nvgpu.sm70.mma<...> (docs/spec-deviations.md)"),
        AtomRecord("sm75.mma", Tier.SM75, ("MmaAtom",), "A, B, D in rmem", feature="mma.m16n8k8",
                   note="the specification serves it by the NVVM-intrinsic path; nvatom's IR "
                   "spells it !cute_nvgpu.sm75.mma<...> (docs/spec-deviations.md)"),
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
                   "(docs/spec-deviations.md)", feature="mma.fp8"),
        AtomRecord("SM120.mma_bs", Tier.SM120, ("MmaAtom", "BlockScaleAtom"),
                   "A, B, D in rmem; two scale-factor operands (one per A, B) in rmem",
                   note="forms in nvatom.atoms.sm120; sparse forms also SparseMetadataAtom",
                   feature="mma.block_scale"),
        AtomRecord("sm120.mma", Tier.SM120, ("MmaAtom",), "A, B, D in rmem; kind::f8f6f4",
                   note="not in the specification's registry: unscaled FP8/FP6/FP4 mma.sync "
                   "of sm_120a/f (nvatom.atoms.sm120); its FP8-only forms also assemble on the "
                   "sm_100/sm_110 a/f targets", feature="mma.f8f6f4.fp8"),
        AtomRecord("sm120.sparse_mma", Tier.SM120, ("MmaAtom", "SparseMetadataAtom"),
                   "A, B, D in rmem; kind::f8f6f4; metadata operand alongside A",
                   note="not in the specification's registry (nvatom.atoms.sm120); FP8-only "
                   "forms as sm120.mma", feature="mma.f8f6f4.fp8"),
        # TMA (the specification's registry and TMA family; nvatom.atoms.tma, docs/tma.md)
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
