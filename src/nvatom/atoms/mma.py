"""Register MMA forms (mma.sync / mma.sp): one record per PTX instruction form.

An :class:`MmaForm` is a row of a tier table (``sm70.py`` ... ``sm89.py``): shape, the four
element types, operand majors (m8n8k4 only), ``.satfinite``, the single-bit operation, the
sparsity variant, the minimum PTX ISA version and the arch feature that gates it.  Everything
else is derived from that row: the atom name, the PTX opcode, the (thread, value) layouts
(:mod:`nvatom.atoms.fragments`), register counts and types, and target availability.

Atom names (docs/atom-names.md) read ``<mnemonic>.<shape>[.<alayout>.<blayout>][.satfinite]
[.ordered_metadata].<dtype>.<atype>.<btype>.<ctype>[.<bop>]``, e.g.
``sm80.mma.m16n8k16.f32.bf16.bf16.f32`` or ``sm70.mma.m8n8k4.row.col.f32.f16.f16.f32``.

Source: PTX ISA "Warp Level Matrix Multiply-Accumulate Instructions: mma" and "mma.sp", with
every form re-checked by ptxas (tests/atoms/test_mma_ptxas.py).
"""

from __future__ import annotations

import dataclasses
import functools
import math
import operator
from typing import Any

from nvatom.arch import PtxVersion, Target, Tier, feature, target
from nvatom.atoms import fragments, fragments_sm70, sparse
from nvatom.atoms.frag_view import FragmentView, warp_fragment_view
from nvatom.atoms.interfaces import MmaAtom, SparseMetadataAtom
from nvatom.atoms.sparse import MetadataLayout
from nvatom.atoms.verify import verify_register_mma
from nvatom.dtypes import DType
from nvatom.errors import NvatomError
from nvatom.layout import Layout, size

__all__ = ["Alias", "FeatureGated", "MmaForm", "MmaFormError", "MnkShaped", "SparseMmaForm"]


class MmaFormError(NvatomError):
    """An inconsistent MMA table row, or a question the form cannot answer."""


_BOPS = ("xor.popc", "and.popc")
_SPARSE = ("sp", "sp::ordered_metadata")


class Alias:
    """A read-only attribute that is another one of the record: ``Alias("a_type")`` reads
    ``self.a_type``, ``Alias("family.op")`` ``self.family.op`` and ``Alias("shape_MNK", 0)``
    ``self.shape_MNK[0]``; how an atom record offers the interface's names over its own
    fields (the specification's, or its table row's)."""

    def __init__(self, path: str, index: int | None = None) -> None:
        self.path, self.index = path, index
        self._get = operator.attrgetter(path)

    def __get__(self, obj: Any, objtype: type | None = None) -> Any:
        if obj is None:
            return self
        v = self._get(obj)
        return v if self.index is None else v[self.index]


class MnkShaped:
    """(M, N, K) accessors shared by every MMA form record (register MMA, WGMMA, ...);
    subclasses provide the ``m``, ``n`` and ``k`` fields."""

    @property
    def shape(self) -> tuple[int, int, int]:
        return (self.m, self.n, self.k)  # type: ignore[attr-defined]

    @property
    def shape_mnk(self) -> tuple[int, int, int]:
        return self.shape

    @property
    def shape_str(self) -> str:
        return f"m{self.m}n{self.n}k{self.k}"  # type: ignore[attr-defined]


class FeatureGated:
    """Target availability of a form gated by one :mod:`nvatom.arch` feature, shared by the
    MMA form records (register MMA, SM120, WGMMA); subclasses provide ``feature`` and
    ``min_ptx``."""

    def available_on(self, t: Target | str) -> bool:
        return feature(self.feature).available_on(target(t))  # type: ignore[attr-defined]

    def ptx_version_for(self, t: Target | str) -> PtxVersion:
        """The PTX ISA version to write: the form's minimum or the target's, whichever is
        newer."""
        return max(self.min_ptx, target(t).min_ptx)  # type: ignore[attr-defined]


@dataclasses.dataclass(frozen=True)
class MmaForm(MnkShaped, FeatureGated, MmaAtom):
    """One mma.sync instruction form (sparse forms are :class:`SparseMmaForm`)."""

    mnemonic: str  # atom family: "sm70.mma", "sm75.mma", "sm80.mma", "sm80.sparse_mma", ...
    tier: Tier
    m: int
    n: int
    k: int
    d: DType
    a: DType
    b: DType
    c: DType
    min_ptx: PtxVersion
    feature: str  # nvatom.arch feature that must be available on the target
    alayout: str = "row"
    blayout: str = "col"
    satfinite: bool = False
    bop: str | None = None
    sparse: str | None = None
    selectors: tuple[int, ...] = ()  # legal sparsity-selector immediates (sparse forms)

    def __post_init__(self) -> None:
        problems = []
        if self.alayout not in ("row", "col") or self.blayout not in ("row", "col"):
            problems.append(f"layouts .{self.alayout}.{self.blayout}")
        if self.bop is not None and self.bop not in _BOPS:
            problems.append(f"bop {self.bop}")
        if self.sparse is not None and self.sparse not in _SPARSE:
            problems.append(f"sparse variant {self.sparse}")
        if (self.sparse is None) != (not self.selectors):
            problems.append("selectors go with sparse forms only")
        if (self.bop is not None) != (self.a.name == "b1"):
            problems.append("a b1 form needs a bop, and only b1 forms have one")
        if (self.sparse is not None) != isinstance(self, SparseMetadataAtom):
            problems.append("sparse rows are SparseMmaForm records, dense rows MmaForm")
        feature(self.feature)  # raises on an unknown feature
        if problems:
            raise MmaFormError(f"bad MMA table row {self.name}: {'; '.join(problems)}")

    # ------------------------------------------------------------------ naming
    @property
    def is_sparse(self) -> bool:
        return self.sparse is not None

    @property
    def name(self) -> str:
        parts = [self.mnemonic, self.shape_str]
        if self.shape_str == "m8n8k4" and self.a.name == "f16":
            parts += [self.alayout, self.blayout]
        if self.satfinite:
            parts.append("satfinite")
        if self.sparse == "sp::ordered_metadata":
            parts.append("ordered_metadata")
        parts += [self.d.name, self.a.name, self.b.name, self.c.name]
        if self.bop:
            parts.append(self.bop)
        return ".".join(parts)

    @property
    def opcode(self) -> str:
        """The PTX opcode with every qualifier, e.g. mma.sync.aligned.m16n8k16.row.col..."""
        head = "mma" if self.sparse is None else f"mma.{self.sparse}"
        parts = [head, "sync", "aligned", self.shape_str, self.alayout, self.blayout]
        if self.satfinite:
            parts.append("satfinite")
        parts += [self.d.name, self.a.name, self.b.name, self.c.name]
        if self.bop:
            parts.append(self.bop)
        return ".".join(parts)

    # ------------------------------------------------------------------ fragments
    def picture(self, operand: str) -> FragmentView:
        """The operand's fragment picture (Jupyter shows it; ``.svg`` is the SVG)."""
        return warp_fragment_view(self, operand, self.tv_layout(operand))

    def tv_layout(self, operand: str) -> Layout:
        """(lane, value) -> element of A (M x K), B (N x K) or C/D (M x N), column-major.

        For sparse forms A is the compressed M x K/2 operand.
        """
        return _tv_layout(self, operand.upper())

    def values(self, operand: str) -> int:
        """Elements each lane holds of the operand."""
        # The value mode: 32 lanes for most forms, a quad-pair of 8 threads for m8n8k4.
        return size(self.tv_layout(operand)[1])

    def operand_type(self, operand: str) -> DType:
        op = operand.upper() if isinstance(operand, str) else operand
        types = {"A": self.a, "B": self.b, "C": self.c, "D": self.d}
        if op not in types:
            raise MmaFormError(f"{self.name} has no operand {operand!r} (A, B, C or D)")
        return types[op]

    def registers(self, operand: str) -> int:
        """PTX registers in the operand's vector ({a0, a1, ...})."""
        t = self.operand_type(operand)
        if t.name == "f64":
            return self.values(operand)
        return math.ceil(self.values(operand) * _bits(t) / 32)

    def register_type(self, operand: str) -> str:
        """PTX register type used for the operand's registers."""
        t = self.operand_type(operand)
        if t.name in ("f32", "f64"):
            return t.name
        return "b32"

    # ------------------------------------------------------------------ verification
    def verify_instance(self, target: Target | str, use: object) -> None:
        """The SM70-SM89 register-MMA verifier (nvatom.atoms.verify)."""
        verify_register_mma(self, target, use)  # type: ignore[arg-type]

    def instruction(self, d: str, a: str, b: str, c: str, e: str | None = None,
                    f: int | str | None = None) -> str:
        """The instruction text with operand vectors/registers already formatted."""
        ops = [d, a, b, c]
        if self.is_sparse:
            if e is None or f is None:
                raise MmaFormError(f"{self.name}: a sparse form needs metadata and selector")
            ops += [e, str(f)]
        return f"{self.opcode} {', '.join(ops)};"


@dataclasses.dataclass(frozen=True)
class SparseMmaForm(MmaForm, SparseMetadataAtom):
    """A structured-sparse mma.sp / mma.sp::ordered_metadata form."""

    def metadata_layout(self, selector: int = 0) -> MetadataLayout:
        """Which lane's metadata nibble describes which chunk of A (nvatom.atoms.sparse)."""
        return sparse.metadata_layout(self, selector)


def _bits(t: DType) -> int:
    """Bits an element occupies inside a register (sub-byte types are packed)."""
    return t.pack_bits


@functools.cache
def _tv_layout(form: MmaForm, operand: str) -> Layout:
    if operand not in ("A", "B", "C", "D"):
        raise MmaFormError(f"{form.name}: unknown operand '{operand}' (A, B, C or D)")
    if form.shape_str == "m8n8k4" and form.a.name == "f16":
        # The accumulator fragment depends on its own type: D may be f32 with C f16.
        acc = form.d.name if operand == "D" else form.c.name
        return fragments_sm70.m8n8k4_fragment("C" if operand == "D" else operand,
                                              form.alayout, form.blayout, acc)
    if operand == "D":
        operand = "C"
    k = form.k // 2 if (form.is_sparse and operand == "A") else form.k
    bits = {"A": form.a, "B": form.b, "C": form.c}[operand]
    return fragments.rowcol_fragment(operand, form.m, form.n, k, _bits(bits) if operand != "C"
                                     else 32)

