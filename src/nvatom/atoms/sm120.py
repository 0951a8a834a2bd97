"""SM120/SM121 (consumer Blackwell) warp MMA: block-scaled ``SM120.mma_bs`` and the unscaled
``kind::f8f6f4`` forms (``sm120.mma`` / ``sm120.sparse_mma``).

Source: PTX ISA "Warp Level Matrix Multiply-Accumulate Instructions: mma" (``.kind``,
``.block_scale``, ``.scale_vec_size``, ``.stype``), "Block Scaling for mma.sync" (Tables 35-37)
and "mma.sp"; every form re-checked by ptxas 13.0 (tests/atoms/test_sm120_ptxas.py).

The lattice, as ptxas has it (docs/spec-deviations.md, "SM120"; docs/sm120.md):

====================  =====  ======  ========================  =================  ===========
kind                  K      sparse  A/B types                 scale_vec, stype   vec_size
====================  =====  ======  ========================  =================  ===========
kind::mxf8f6f4        32     64      e4m3 e5m2 e3m2 e2m3 e2m1  1X ue8m0           K (32 / 64)
kind::mxf4            64     128     e2m1                      2X ue8m0           K/2
kind::mxf4nvf4        64     128     e2m1                      2X ue8m0, 4X ue4m3 K/2, K/4
kind::f8f6f4 (no SF)  32     64      e4m3 e5m2 e3m2 e2m3 e2m1  --                 --
====================  =====  ======  ========================  =================  ===========

M = 16, N = 8; A row, B col.  Block-scaled forms accumulate in f32 only; ``kind::f8f6f4``
in f32 or f16 (D and C alike).  Sparse forms exist only as ``mma.sp::ordered_metadata``
(plain ``.sp`` is rejected) with sparsity selector 0.  At K = 32 (and sparse K = 64) FP6/FP4
elements sit one per 8-bit container (A 4 registers, B 2/4); mxf4* pack two e2m1 per byte.
ptxas 13.0 rejects ``mxf4nvf4 .scale_vec::4X .ue8m0`` although PTX ISA Table 36 lists it.
Targets: sm_120a, sm_120f, sm_121a, sm_121f (feature ``mma.block_scale`` / ``mma.f8f6f4``).

**API for the IR (docs/ir.md).**  :class:`MmaBsForm` is one ``SM120.mma_bs`` atom, a frozen
dataclass whose first nine fields are the specification's attributes, in its order:
``a_type, b_type, byte_id_a, byte_id_b, sf_type, shape_MNK, thread_id_a, thread_id_b,
vec_size``.  Those nine fix the instruction: sparsity follows from (K, vec_size), and the only
choice they leave (kind::mxf4 or kind::mxf4nvf4 for 2X ue8m0 at K = 64/128, the same
computation) is the optional tenth field ``kind`` (default: kind::mxf4).

* :func:`mma_bs_forms` lists every form with selectors 0 (:meth:`MmaBsForm.with_selectors`
  and :meth:`MmaBsForm.selector_choices` give the rest); :func:`f8f6f4_forms` the unscaled
  ones; :func:`forms` both.
* :func:`sm120_form` resolves an atom name (``SM120.mma_bs....``, ``sm120.mma....``),
  :func:`mma_bs_form` only block-scaled names.
* :func:`verify_sm120_mma_bs` checks the nine attributes (plus ``kind``, and a target when
  given) and returns the form, or raises :class:`~nvatom.atoms.interfaces.
  AtomVerificationError` naming the rejected combination (texts in nvatom.diagnostics).
* ``form.verify_instance(target, MmaBsUse(...))`` checks a use (:func:`verify_mma_bs_use`:
  registers only, the form's scale type, canonical layouts, no SM100-only options).
* ``form.tv_layout(op)`` for A, B, C, D, SFA, SFB; ``form.scale_sources("SFA")`` gives the
  (lane, byte) of every scale factor for the form's selectors (nvatom.atoms.fragments_sm120).

Atom names (docs/atom-names.md)::

    SM120.mma_bs.<shape>[.ordered_metadata].<kind>.<X>X.f32.<atype>.<btype>.f32.<stype>
        [.sfa_b<byte-id-a>t<thread-id-a>.sfb_b<byte-id-b>t<thread-id-b>]
    sm120.mma.m16n8k32.<dtype>.<atype>.<btype>.<ctype>
    sm120.sparse_mma.m16n8k64.ordered_metadata.<dtype>.<atype>.<btype>.<ctype>

e.g. ``SM120.mma_bs.m16n8k64.mxf4nvf4.4X.f32.e2m1.e2m1.f32.ue4m3``; the selector suffix is
written only when a selector is not 0.  The uppercase ``SM`` is the specification's textual
contract (the specification's registry) and is kept wherever the name is printed.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import itertools
import re
from types import SimpleNamespace
from typing import Any

from nvatom import diagnostics as D
from nvatom.arch import Target, Tier, feature, target
from nvatom.atoms import fragments, fragments_sm120
from nvatom.atoms.frag_view import FragmentView, warp_fragment_view
from nvatom.atoms.interfaces import (
    AtomVerificationError,
    BlockScaleAtom,
    MmaAtom,
    SparseMetadataAtom,
)
from nvatom.atoms.mma import Alias, FeatureGated, MmaForm, MnkShaped, SparseMmaForm
from nvatom.atoms.sparse import MetadataLayout, metadata_layout
from nvatom.atoms.verify import OperandUse, check_target_and_shape
from nvatom.dtypes import DType, dtype
from nvatom.errors import NvatomError
from nvatom.layout import ComposedLayout, Layout, layouts_equivalent, size

__all__ = [
    "F8F6F4_FORMS",
    "KINDS",
    "MMA_BS",
    "MMA_BS_FORMS",
    "F8F6F4Form",
    "MmaBsForm",
    "MmaBsUse",
    "Sm120FormError",
    "SparseF8F6F4Form",
    "SparseMmaBsForm",
    "UnknownSm120AtomError",
    "f8f6f4_forms",
    "forms",
    "is_sm120_name",
    "mma_bs_form",
    "mma_bs_forms",
    "sm120_form",
    "verify_mma_bs_use",
    "verify_sm120_mma_bs",
]

#: The specification's mnemonic, uppercase ``SM`` included (the specification's registry).
MMA_BS = "SM120.mma_bs"
F8F6F4 = "sm120.mma"
SPARSE_F8F6F4 = "sm120.sparse_mma"

F32, F16 = dtype("f32"), dtype("f16")
FP8F6F4 = tuple(dtype(n) for n in ("e4m3", "e5m2", "e3m2", "e2m3", "e2m1"))
E2M1 = dtype("e2m1")
UE8M0, UE4M3 = dtype("ue8m0"), dtype("ue4m3")
M, N = 16, 8
PTX = (8, 7)  # every form: 'mma with block scale' / 'mma with FP6/FP4' require 8.7
ORDERED = "sp::ordered_metadata"


class Sm120FormError(NvatomError):
    """An inconsistent SM120 table row, or a question a form cannot answer."""


@dataclasses.dataclass(frozen=True)
class Kind:
    """One ``.kind`` of the block-scaled mma: its shapes, element types and scale vectors."""

    name: str
    k: int  # dense K; the sparse form has 2 * k
    ab_types: tuple[DType, ...]
    scale_vecs: tuple[tuple[int, DType], ...]  # (X, stype) pairs ptxas accepts
    element_bits: int  # bits one A/B element takes in a register (8: container, 4: packed)


KINDS: dict[str, Kind] = {
    k.name: k
    for k in (
        Kind("mxf8f6f4", 32, FP8F6F4, ((1, UE8M0),), 8),
        Kind("mxf4", 64, (E2M1,), ((2, UE8M0),), 4),
        # PTX ISA Table 36 also lists 4X with ue8m0; ptxas 13.0 rejects it ("Illegal modifier
        # '.scale_vec::4X' for instruction 'mma' with type '.ue8m0'").
        Kind("mxf4nvf4", 64, (E2M1,), ((2, UE8M0), (4, UE4M3)), 4),
    )
}


def _family_text() -> str:
    return "; ".join(
        f"kind::{k.name} K={k.k} (sparse {2 * k.k}) "
        + ", ".join(f"{x}X {s.name}" for x, s in k.scale_vecs)
        + " A/B " + "/".join(t.name for t in k.ab_types)
        for k in KINDS.values()
    )


def _reject(detail: str) -> AtomVerificationError:
    return AtomVerificationError(D.SM120_NO_FAMILY.format(detail, _family_text()))


def _infer_kind(a: DType, b: DType, sf: DType, k: int, vec: int) -> str:
    """The kind the attributes name: K 32 (sparse 64 at vec 64) is mxf8f6f4; at K 64/128
    4X or ue4m3 is mxf4nvf4 (NVFP4), otherwise mxf4 (MXFP4)."""
    if k == 32 or (k, vec) == (64, 64) or k not in (64, 128):
        return "mxf8f6f4"
    if sf == UE4M3 or (vec > 0 and k == 4 * vec):
        return "mxf4nvf4"
    return "mxf4"


def _check_combination(a: DType, b: DType, sf: DType, shape: tuple[int, int, int], vec: int,
                       kind: str) -> tuple[Kind, bool, int]:
    """(kind, sparse, X) of a legal combination; raises naming the rejected one."""
    combo = (f"shape_MNK={tuple(shape)}, a_type={a.name}, b_type={b.name}, sf_type={sf.name}, "
             f"vec_size={vec}, kind::{kind}")
    if kind not in KINDS:
        raise _reject(combo + f" (unknown kind '{kind}')")
    kd = KINDS[kind]
    m, n, k = shape
    if (m, n) != (M, N) or k not in (kd.k, 2 * kd.k):
        raise _reject(combo + f" (kind::{kind} is m16n8k{kd.k}, sparse m16n8k{2 * kd.k})")
    sparse = k == 2 * kd.k
    if vec <= 0 or k % vec:
        raise _reject(combo + f" (vec_size must divide K={k})")
    x = k // vec
    legal_x = dict(kd.scale_vecs)
    if x not in legal_x:
        raise _reject(combo + f" (scale_vec::{x}X; kind::{kind} takes "
                      + ", ".join(f"{xx}X" for xx in legal_x) + ")")
    if sf != legal_x[x]:
        raise _reject(combo + f" (scale_vec::{x}X takes sf_type {legal_x[x].name})")
    for slot, t in (("a_type", a), ("b_type", b)):
        if t not in kd.ab_types:
            raise _reject(combo + f" ({slot} {t.name} is not one of "
                          + "/".join(x.name for x in kd.ab_types) + ")")
    return kd, sparse, x


@dataclasses.dataclass(frozen=True)
class MmaBsForm(MnkShaped, FeatureGated, MmaAtom, BlockScaleAtom):
    """One ``SM120.mma_bs`` atom: the specification's nine attributes (first nine fields, in
    its order) and the optional ``kind``.  Checks itself on construction."""

    a_type: DType
    b_type: DType
    byte_id_a: int
    byte_id_b: int
    sf_type: DType
    shape_MNK: tuple[int, int, int]
    thread_id_a: int
    thread_id_b: int
    vec_size: int
    kind: str | None = None  # None: inferred (kind::mxf4 for 2X ue8m0 at K = 64/128)

    mnemonic = MMA_BS
    tier = Tier.SM120
    min_ptx = PTX
    d = F32
    c = F32
    alayout = "row"
    blayout = "col"

    def __new__(cls, *args: Any, **kwargs: Any) -> MmaBsForm:
        # The nine attributes decide sparsity; a sparse atom is a SparseMmaBsForm so that
        # isinstance(atom, SparseMetadataAtom) answers as for every sparse MMA.
        if cls is MmaBsForm:
            shape = kwargs.get("shape_MNK", args[5] if len(args) > 5 else None)
            vec = kwargs.get("vec_size", args[8] if len(args) > 8 else None)
            if _sparse_attrs(shape, vec):
                cls = SparseMmaBsForm
        return super().__new__(cls)

    def __post_init__(self) -> None:
        for f in ("a_type", "b_type", "sf_type"):
            object.__setattr__(self, f, dtype(getattr(self, f)))
        object.__setattr__(self, "shape_MNK", tuple(int(x) for x in self.shape_MNK))
        if len(self.shape_MNK) != 3:
            raise _reject(f"shape_MNK={self.shape_MNK} (three extents M, N, K)")
        if self.kind is None:
            object.__setattr__(self, "kind", _infer_kind(self.a_type, self.b_type,
                                                         self.sf_type, self.shape_MNK[2],
                                                         self.vec_size))
        _check_combination(self.a_type, self.b_type, self.sf_type, self.shape_MNK,
                           self.vec_size, self.kind_name)
        if isinstance(self, SparseMmaBsForm) != self.is_sparse:
            raise Sm120FormError(f"{self.name}: construct SM120.mma_bs atoms as MmaBsForm "
                                 "(the attributes decide dense or sparse)")
        x = self.scale_vec
        for which, bid, tid in (("a", self.byte_id_a, self.thread_id_a),
                                ("b", self.byte_id_b, self.thread_id_b)):
            legal_b = fragments_sm120.BYTE_IDS[x]
            legal_t = fragments_sm120.THREAD_IDS["SF" + which.upper()]
            if bid not in legal_b:
                raise AtomVerificationError(D.SM120_SELECTOR.format(
                    f"byte_id_{which}", bid, f"scale_vec::{x}X", _choices(legal_b)))
            if tid not in legal_t:
                raise AtomVerificationError(D.SM120_SELECTOR.format(
                    f"thread_id_{which}", tid, "SM120.mma_bs", _choices(legal_t)))

    # ------------------------------------------------------------------ derived facts
    @property
    def feature(self) -> str:  # type: ignore[override]
        """sm_120f/sm_121f lack the sparse kind::mxf4* forms ("Feature '.kind::mxf4 with .sp
        modifier' not supported on .target 'sm_120f'"); everything else is 'a' or 'f'."""
        if self.is_sparse and self.kind_name != "mxf8f6f4":
            return "mma.block_scale.mxf4.sp"
        return "mma.block_scale"

    @property
    def kind_name(self) -> str:
        return self.kind or ""

    m = Alias("shape_MNK", 0)
    n = Alias("shape_MNK", 1)
    k = Alias("shape_MNK", 2)
    a = Alias("a_type")
    b = Alias("b_type")

    @property
    def scale_vec(self) -> int:
        """X of ``.scale_vec::XX``: scale factors per row of A / column of B."""
        return self.k // self.vec_size

    @property
    def is_sparse(self) -> bool:
        return self.k == 2 * KINDS[self.kind_name].k

    @property
    def sparse(self) -> str | None:
        return ORDERED if self.is_sparse else None

    @property
    def selectors(self) -> tuple[int, ...]:
        """Legal sparsity-selector immediates (sparse forms: ptxas accepts only 0)."""
        return (0,) if self.is_sparse else ()

    @property
    def element_bits_ab(self) -> int:
        return KINDS[self.kind_name].element_bits

    @property
    def scale_selectors(self) -> tuple[int, int, int, int]:
        return (self.byte_id_a, self.thread_id_a, self.byte_id_b, self.thread_id_b)

    def with_selectors(self, byte_id_a: int = 0, thread_id_a: int = 0, byte_id_b: int = 0,
                       thread_id_b: int = 0) -> MmaBsForm:
        return dataclasses.replace(self, byte_id_a=byte_id_a, thread_id_a=thread_id_a,
                                   byte_id_b=byte_id_b, thread_id_b=thread_id_b)

    def selector_choices(self) -> list[MmaBsForm]:
        """This form with every legal (byte-id, thread-id) tuple of A and B."""
        x = self.scale_vec
        bids = fragments_sm120.BYTE_IDS[x]
        return [self.with_selectors(ba, ta, bb, tb) for ba, ta, bb, tb in itertools.product(
            bids, fragments_sm120.THREAD_IDS["SFA"], bids, fragments_sm120.THREAD_IDS["SFB"])]

    @property
    def base(self) -> MmaBsForm:
        """The same form with every selector 0 (the table row)."""
        return self.with_selectors()

    # ------------------------------------------------------------------ naming
    @property
    def name(self) -> str:
        parts = [MMA_BS, self.shape_str]
        if self.is_sparse:
            parts.append("ordered_metadata")
        parts += [self.kind_name, f"{self.scale_vec}X", "f32", self.a_type.name,
                  self.b_type.name, "f32", self.sf_type.name]
        if any(self.scale_selectors):
            parts += [f"sfa_b{self.byte_id_a}t{self.thread_id_a}",
                      f"sfb_b{self.byte_id_b}t{self.thread_id_b}"]
        return ".".join(parts)

    @property
    def opcode(self) -> str:
        """The PTX opcode, e.g. ``mma.sync.aligned.m16n8k32.row.col.kind::mxf8f6f4.block_scale
        .scale_vec::1X.f32.e4m3.e4m3.f32.ue8m0``."""
        head = "mma" if not self.is_sparse else f"mma.{ORDERED}"
        return ".".join([head, "sync", "aligned", self.shape_str, "row", "col",
                         f"kind::{self.kind_name}", "block_scale",
                         f"scale_vec::{self.scale_vec}X", "f32", self.a_type.name,
                         self.b_type.name, "f32", self.sf_type.name])

    def attributes(self) -> dict[str, Any]:
        """The nine specification attributes (and ``kind``), e.g. for an IR type."""
        return {
            "a_type": self.a_type.name, "b_type": self.b_type.name,
            "byte_id_a": self.byte_id_a, "byte_id_b": self.byte_id_b,
            "sf_type": self.sf_type.name, "shape_MNK": self.shape_MNK,
            "thread_id_a": self.thread_id_a, "thread_id_b": self.thread_id_b,
            "vec_size": self.vec_size, "kind": self.kind_name,
        }

    # ------------------------------------------------------------------ fragments
    def operand_type(self, operand: str) -> DType:
        op = operand.upper()
        types = {"A": self.a_type, "B": self.b_type, "C": F32, "D": F32, "SFA": self.sf_type,
                 "SFB": self.sf_type}
        if op not in types:
            raise Sm120FormError(f"{self.name}: unknown operand '{operand}' "
                                 "(A, B, C, D, SFA or SFB)")
        return types[op]

    def element_bits(self, operand: str) -> int:
        """Bits one element takes in its register: A/B 8 (containers) or 4 (packed e2m1)."""
        op = operand.upper()
        if op in ("A", "B"):
            return self.element_bits_ab
        self.operand_type(op)
        return 8 if op in ("SFA", "SFB") else 32

    def picture(self, operand: str) -> FragmentView:
        """Operand A, B, C or D's fragment picture (Jupyter shows it; ``.svg`` is the SVG)."""
        return warp_fragment_view(self, operand, self.tv_layout(operand))

    def tv_layout(self, operand: str) -> Layout:
        """(lane, value) -> element of A (M x K, sparse: M x K/2), B (N x K), C/D (M x N), or
        of the scale matrices (SFA: M x X, SFB: N x X), column-major."""
        return _bs_tv_layout(self, operand.upper())

    def values(self, operand: str) -> int:
        return size(self.tv_layout(operand)[1])

    def registers(self, operand: str) -> int:
        op = operand.upper()
        if op in ("SFA", "SFB"):
            return 1
        return self.values(op) * self.element_bits(op) // 32

    def register_type(self, operand: str) -> str:
        return "f32" if operand.upper() in ("C", "D") else "b32"

    def scale_sources(self, operand: str) -> tuple[fragments_sm120.ScaleSource, ...]:
        """Which (lane, byte) of the scale register holds each scale factor, for this form's
        selectors (:func:`nvatom.atoms.fragments_sm120.scale_sources`)."""
        which = operand.upper()
        if which not in ("SFA", "SFB", "A", "B"):
            raise Sm120FormError(f"{self.name}: '{operand}' is not a scale operand")
        a_side = which in ("SFA", "A")
        return fragments_sm120.scale_sources(
            "SFA" if a_side else "SFB", self.scale_vec,
            self.byte_id_a if a_side else self.byte_id_b,
            self.thread_id_a if a_side else self.thread_id_b)

    def metadata_layout(self, selector: int = 0) -> MetadataLayout:
        """Sparse forms: which lane's metadata nibble describes which chunk of A (the PTX
        ISA's sparse-metadata rules for the container width; CUTLASS's SM120 sparse ELayout
        agrees lane by lane; not measured on SM120)."""
        if not self.is_sparse:
            raise Sm120FormError(f"{self.name} is dense: it has no metadata")
        return _metadata_layout(self.name, self.k, self.element_bits_ab, selector)

    # ------------------------------------------------------------------ verification
    def verify_instance(self, target_: Target | str, use: object) -> None:
        """The specification's ``verify_sm120_block_scaled`` (see :func:`verify_mma_bs_use`)."""
        verify_mma_bs_use(self, target_, use)  # type: ignore[arg-type]

    def instruction(self, d: str, a: str, b: str, c: str, sfa: str, sfb: str,
                    e: str | None = None, f: int | None = None) -> str:
        """The instruction text with operand vectors/registers already formatted; the scale
        selectors are this form's immediates."""
        ops = [d, a, b, c]
        if self.is_sparse:
            if e is None:
                raise Sm120FormError(f"{self.name}: a sparse form needs the metadata register")
            sel = 0 if f is None else f
            if sel not in self.selectors:
                raise Sm120FormError(f"{self.name}: sparsity selector {sel} is not legal "
                                     f"(ptxas accepts {self.selectors})")
            ops += [e, str(sel)]
        elif e is not None or f is not None:
            raise Sm120FormError(f"{self.name} is dense: it takes no metadata or selector")
        ops += [sfa, f"{{{self.byte_id_a}, {self.thread_id_a}}}",
                sfb, f"{{{self.byte_id_b}, {self.thread_id_b}}}"]
        return f"{self.opcode} {', '.join(ops)};"


class SparseMmaBsForm(MmaBsForm, SparseMetadataAtom):
    """A sparse ``SM120.mma_bs`` atom (``mma.sp::ordered_metadata``): K = 64 mxf8f6f4 or
    K = 128 mxf4/mxf4nvf4.  Construct it through :class:`MmaBsForm`."""


def _sparse_attrs(shape: Any, vec: Any) -> bool:
    try:
        k = int(tuple(shape)[2])
        return (k, int(vec)) in ((64, 64), (128, 64), (128, 32))
    except (TypeError, ValueError, IndexError):
        return False


def _choices(vals: tuple[int, ...]) -> str:
    return ", ".join(map(str, vals))


@functools.cache
def _bs_tv_layout(form: MmaBsForm, op: str) -> Layout:
    if op in ("SFA", "SFB"):
        return fragments_sm120.scale_tv_layout(op, form.scale_vec)
    if op not in ("A", "B", "C", "D"):
        raise Sm120FormError(f"{form.name}: unknown operand '{op}' (A, B, C, D, SFA or SFB)")
    if op in ("C", "D"):
        return fragments.rowcol_fragment("C", M, N, form.k, 32)
    k = form.k // 2 if (form.is_sparse and op == "A") else form.k
    return fragments.rowcol_fragment(op, M, N, k, form.element_bits_ab)


@functools.cache
def _metadata_layout(name: str, k: int, bits: int, selector: int) -> MetadataLayout:
    # The sparse rules depend on the element's width in the register: 8-bit containers
    # prune 2:4, packed e2m1 4:8 in pairs (as s4/u4), so the container width stands in for
    # the type here.
    view = SimpleNamespace(name=name, k=k, is_sparse=True, sparse=ORDERED, selectors=(0,),
                           a=SimpleNamespace(name=f"b{bits}", storage_bits=bits))
    return metadata_layout(view, selector)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- kind::f8f6f4


class _F8F6F4Mixin:
    """kind::f8f6f4: FP8/FP6/FP4 in 8-bit containers, spelled with its ``.kind``."""

    @property
    def opcode(self) -> str:
        base = MmaForm.opcode.fget(self)  # type: ignore[attr-defined]
        shape = self.shape_str  # type: ignore[attr-defined]
        return base.replace(f".{shape}.row.col.", f".{shape}.row.col.kind::f8f6f4.", 1)

    def element_bits(self, operand: str) -> int:
        op = operand.upper()
        return 8 if op in ("A", "B") else self.operand_type(op).pack_bits  # type: ignore

    def tv_layout(self, operand: str) -> Layout:
        op = operand.upper()
        if op not in ("A", "B", "C", "D"):
            raise Sm120FormError(f"{self.name}: unknown operand '{operand}' "  # type: ignore
                                 "(A, B, C or D)")
        if op in ("C", "D"):
            return fragments.rowcol_fragment("C", M, N, self.k, 32)  # type: ignore
        sparse_a = self.is_sparse and op == "A"  # type: ignore[attr-defined]
        return fragments.rowcol_fragment(op, M, N, self.k // 2 if sparse_a else self.k, 8)  # type: ignore

    def registers(self, operand: str) -> int:
        op = operand.upper()
        if op in ("A", "B"):
            return self.values(op) * 8 // 32  # type: ignore[attr-defined]
        return MmaForm.registers(self, op)  # type: ignore[arg-type]


@dataclasses.dataclass(frozen=True)
class F8F6F4Form(_F8F6F4Mixin, MmaForm):
    """Dense ``mma.sync...kind::f8f6f4`` (no scale factors)."""


@dataclasses.dataclass(frozen=True)
class SparseF8F6F4Form(_F8F6F4Mixin, SparseMmaForm):
    """``mma.sp::ordered_metadata...kind::f8f6f4`` m16n8k64."""

    def metadata_layout(self, selector: int = 0) -> MetadataLayout:
        return _metadata_layout(self.name, self.k, 8, selector)


def _f8f6f4_table() -> tuple[MmaForm, ...]:
    out: list[MmaForm] = []
    for (a, b), acc in itertools.product(itertools.product(FP8F6F4, repeat=2), (F32, F16)):
        # With e4m3/e5m2 alone, kind::f8f6f4 is an FP8 mma that ptxas also takes on the
        # sm_100/sm_110 'a'/'f' targets (PTX 8.6); FP6/FP4 need SM120 and PTX 8.7.
        # Sparse with f16 accumulation stays SM120-only ("'mma with with F16 accumulator and
        # F8 floating point type' not supported on .target 'sm_100a'").
        fp8 = {a.name, b.name} <= {"e4m3", "e5m2"}
        # FP8 with f16 accumulation needs 8.7 wherever it runs (as on sm_89; docs/spec-deviations.md
        # "Register MMA").
        dense = ((8, 6) if acc == F32 else PTX, "mma.f8f6f4.fp8") if fp8 else \
            (PTX, "mma.f8f6f4")
        sparse = ((8, 6), "mma.f8f6f4.fp8") if fp8 and acc == F32 else (PTX, "mma.f8f6f4")
        out.append(F8F6F4Form(F8F6F4, Tier.SM120, M, N, 32, acc, a, b, acc, *dense))
        out.append(SparseF8F6F4Form(SPARSE_F8F6F4, Tier.SM120, M, N, 64, acc, a, b, acc,
                                    *sparse, sparse=ORDERED, selectors=(0,)))
    return tuple(out)


def _mma_bs_table() -> tuple[MmaBsForm, ...]:
    out = []
    for kd in KINDS.values():
        for sparse, (x, sf) in itertools.product((False, True), kd.scale_vecs):
            k = kd.k * (2 if sparse else 1)
            for a, b in itertools.product(kd.ab_types, repeat=2):
                out.append(MmaBsForm(a, b, 0, 0, sf, (M, N, k), 0, 0, k // x, kd.name))
    return tuple(out)


MMA_BS_FORMS: tuple[MmaBsForm, ...] = _mma_bs_table()
F8F6F4_FORMS: tuple[MmaForm, ...] = _f8f6f4_table()


def mma_bs_forms(target_: Target | str | None = None) -> list[MmaBsForm]:
    """Every ``SM120.mma_bs`` form with selectors 0 (available on ``target_`` if given)."""
    return [f for f in MMA_BS_FORMS if target_ is None or f.available_on(target_)]


def f8f6f4_forms(target_: Target | str | None = None) -> list[MmaForm]:
    """The unscaled ``kind::f8f6f4`` forms (``sm120.mma``, ``sm120.sparse_mma``)."""
    return [f for f in F8F6F4_FORMS if target_ is None or f.available_on(target_)]


def forms(target_: Target | str | None = None) -> list[MmaBsForm | MmaForm]:
    return [*mma_bs_forms(target_), *f8f6f4_forms(target_)]


@functools.cache
def _by_name() -> dict[str, MmaBsForm | MmaForm]:
    table: dict[str, MmaBsForm | MmaForm] = {}
    for f in (*MMA_BS_FORMS, *F8F6F4_FORMS):
        if f.name in table:
            raise Sm120FormError(f"the SM120 table defines {f.name} twice")
        table[f.name] = f
    return table


_SEL_RE = re.compile(  # numbers of at most 9 digits (int() of 4,300+ digits raises)
    r"^(?P<base>.*)\.sfa_b(?P<ba>\d{1,9})t(?P<ta>\d{1,9})\.sfb_b(?P<bb>\d{1,9})t(?P<tb>\d{1,9})$")


class UnknownSm120AtomError(NvatomError):
    """A name that is not an SM120 atom (the message lists the nearest names)."""


def sm120_form(name: str) -> MmaBsForm | MmaForm:
    """Resolve ``SM120.mma_bs...`` (with an optional selector suffix) or ``sm120.mma...``."""
    key = name.strip()
    m = _SEL_RE.match(key)
    base = m.group("base") if m else key
    form = _by_name().get(base)
    if form is None:
        near = difflib.get_close_matches(base, list(_by_name()), n=3, cutoff=0.6)
        hint = f"; nearest: {', '.join(near)}" if near else "; see 'nvatom atoms --sm120'"
        raise UnknownSm120AtomError(f"unknown SM120 atom '{key}'{hint}")
    if m:
        if not isinstance(form, MmaBsForm):
            raise UnknownSm120AtomError(f"'{key}': only SM120.mma_bs atoms take scale selectors")
        return form.with_selectors(int(m.group("ba")), int(m.group("ta")), int(m.group("bb")),
                                   int(m.group("tb")))
    return form


def mma_bs_form(name: str) -> MmaBsForm:
    form = sm120_form(name)
    if not isinstance(form, MmaBsForm):
        raise UnknownSm120AtomError(f"'{name}' is not an {MMA_BS} atom")
    return form


def verify_sm120_mma_bs(
    *,
    a_type: DType | str,
    b_type: DType | str,
    byte_id_a: int,
    byte_id_b: int,
    sf_type: DType | str,
    shape_MNK: tuple[int, int, int],
    thread_id_a: int,
    thread_id_b: int,
    vec_size: int,
    kind: str | None = None,
    target_: Target | str | None = None,
) -> MmaBsForm:
    """The form these attributes name, or :class:`AtomVerificationError` naming the rejected
    combination.  With ``target_``, the target must have the SM120 block-scaled mma."""
    try:
        types = [dtype(t) for t in (a_type, b_type, sf_type)]
    except NvatomError as err:
        raise AtomVerificationError(D.SM120_NO_FAMILY.format(str(err), _family_text())) \
            from None
    form = MmaBsForm(types[0], types[1], byte_id_a, byte_id_b, types[2], tuple(shape_MNK),
                     thread_id_a, thread_id_b, vec_size, kind)
    if target_ is not None:
        t = target(target_)
        if not form.available_on(t):
            f = feature(form.feature)
            raise AtomVerificationError(D.SM120_TARGET.format(MMA_BS, t.name, f.rule))
    return form


def is_sm120_name(name: str) -> bool:
    return name.strip().startswith((MMA_BS + ".", F8F6F4 + ".", SPARSE_F8F6F4 + "."))




# --------------------------------------------------------------------------- use verifier


@dataclasses.dataclass(frozen=True)
class MmaBsUse:
    """What surrounding code feeds an ``SM120.mma_bs`` atom.

    Operands as in :class:`nvatom.atoms.verify.MmaUse`; ``scale_a`` / ``scale_b`` are the two
    scale-factor operands.  The remaining fields are SM100 ``tcgen05.mma`` options that the
    SM120 contract excludes (the specification: no CTA group, collector, weight-stationary mode,
    scale-input accumulator or tensor-memory destination); any of them set is an error.
    """

    a: Any
    b: Any
    c: Any
    d: Any = None
    scale_a: Any = None
    scale_b: Any = None
    metadata: Any = None
    selector: int | None = None
    shape: tuple[int, int, int] | None = None
    cta_group: int | None = None
    collector: str | None = None
    weight_stationary: bool = False
    scale_input_d: int | None = None

    @classmethod
    def canonical(cls, form: MmaBsForm, *, with_layouts: bool = True) -> MmaBsUse:
        """The use a correct caller makes of ``form`` (every check passes)."""
        def op(name: str) -> OperandUse:
            lay = form.tv_layout(name) if with_layouts else None
            return OperandUse(form.operand_type(name).name, "rmem", lay)

        meta = OperandUse("u32", "rmem") if form.is_sparse else None
        return cls(op("A"), op("B"), op("C"), op("D"), op("SFA"), op("SFB"), meta,
                   0 if form.is_sparse else None, form.shape)


def verify_mma_bs_use(form: MmaBsForm, target_: Target | str, use: MmaBsUse) -> None:
    """The specification's ``verify_sm120_block_scaled`` with the ISA's corrections, stopping at the
    first failure: target and shape; no SM100-only option; A, B, D in registers; element
    types A, B, C, D (f32 accumulator only); two register scale operands of the form's
    ``sf_type`` (ue8m0, or ue4m3 for 4X: docs/spec-deviations.md, "SM120"); static layouts equal to
    the canonical
    ones (scale layouts included); sparse forms: metadata register and selector 0."""

    t = target(target_)
    check_target_and_shape(form, t, use)  # type: ignore[arg-type]
    for what, bad in (("cta group", use.cta_group is not None),
                      ("collector", use.collector is not None),
                      ("weight-stationary mode", use.weight_stationary),
                      ("scale-input accumulator", use.scale_input_d is not None)):
        if bad:
            raise AtomVerificationError(D.SM120_NO_TCGEN05.format(what))
    a, b, c = use.a, use.b, use.c
    d = use.d if use.d is not None else OperandUse(c.element_type, "rmem")
    if any(isinstance(x.layout, ComposedLayout) for x in (a, b, d)):
        raise AtomVerificationError(
            D.COMPOSED_LAYOUT + D.COMPOSED_LAYOUT_ABD.format(a.layout, b.layout, d.layout))
    if any(x.residency != "rmem" for x in (a, b, d)):
        if d.residency == "tmem":
            raise AtomVerificationError(D.SM120_NO_TCGEN05.format("tensor-memory destination"))
        raise AtomVerificationError(f"{D.RMEM_INPUTS}{a}, B: {b}, D: {d}")
    for slot, got, want in (("a", a, form.a_type), ("b", b, form.b_type), ("c", c, F32),
                            ("c", d, F32)):
        if got.dtype != want:
            raise AtomVerificationError(D.OPERAND_ELEMENT_TYPE.format(slot, want.name,
                                                                      got.dtype.name))
    sa, sb = use.scale_a, use.scale_b
    if sa is None or sb is None or any(
            s.residency != "rmem" or s.dtype != form.sf_type for s in (sa, sb)):
        raise AtomVerificationError(D.SM120_SCALE_OPERANDS.format(form.sf_type.name, sa, sb))
    for name, op in (("A", a), ("B", b), ("C", c), ("D", d), ("SFA", sa), ("SFB", sb)):
        if op.layout is None:
            continue
        if not isinstance(op.layout, Layout):
            raise AtomVerificationError(f"{D.STATIC_LAYOUT} {op.layout!r}")
        want_layout = form.tv_layout(name)
        if not layouts_equivalent(op.layout, want_layout):
            raise AtomVerificationError(
                f"{D.MMA_ATOM_LAYOUT}{want_layout} for operand {name}, but got {op.layout}")
    if form.is_sparse:
        meta = use.metadata
        if meta is None:
            raise AtomVerificationError(f"atom '{form.name}' expects a sparse metadata operand")
        if meta.residency != "rmem" or meta.type_name not in ("u32", "b32", "i32", "s32"):
            raise AtomVerificationError(f"atom '{form.name}' expects the metadata in one 32-bit "
                                        f"register, but got {meta}")
        if use.selector not in form.selectors:
            raise AtomVerificationError(f"atom '{form.name}': sparsity selector {use.selector} "
                                        "out of range [0..0]")
    elif use.metadata is not None or use.selector is not None:
        raise AtomVerificationError(f"atom '{form.name}' is dense and takes no metadata or "
                                    "selector")


