"""Copy atoms without TMA: ``atom.universal_copy``, ``atom.ldsm``, ``atom.stsm`` and
``atom.simt_async_copy`` (the specification's "Copy Atom Operand-Layout Contracts").

Each atom is a row of a table, and everything else is derived from that row:

* :class:`UniversalCopy`: one ``ld``/``st`` of 8 to 128 bits per thread between registers and
  ``.global``/``.shared``/``.local`` memory, spelled as one of the vector accesses of
  :data:`ACCESSES` (``.b32``, ``.v2.b64``, ``.v4.b32``, ...).  :func:`vectorize_copy` picks or
  checks the vector width a pair of value layouts allows (CuTe's ``max_common_vector``).
* :class:`MatrixCopy`: ``ldmatrix`` (``atom.ldsm``) and ``stmatrix`` (``atom.stsm``), one row
  per instruction form, generated from the families of :data:`MATRIX_FAMILIES`.  Their
  (thread, value) layouts come from the PTX ISA's fragment description of each
  :class:`MatrixShape` through :func:`nvatom.atoms.fragments.layout_from_function`; nothing is
  typed in.  :func:`ldsm_matches_mma` checks, with the layout algebra, that a matrix load
  produces exactly a consuming MMA atom's operand fragment, and :func:`row_addresses` gives
  the smem row each lane must point at.
* :class:`SimtAsyncCopy`: ``cp.async`` of 4, 8 or 16 bytes from global to shared memory with
  a :class:`CachePolicy` (``.ca``/``.cg``, L2 prefetch size, ``.L2::cache_hint``) and optional
  zero fill (``src-size`` or the ``ignore-src`` predicate); it is also an
  :class:`~nvatom.atoms.interfaces.AsyncCopyAtom` (commit/wait groups).

Layout conventions follow CuTe's ``Copy_Traits`` (cute/atom/copy_traits_sm75.hpp, _sm90,
_sm100): ``src_layout(1)``/``dst_layout(1)`` map (thread, bit) to a bit of a *reference*
space, here the matrices as they sit in shared memory, stacked, each 16-byte row after the
previous (``(matrix * rows + row) * cols + col`` in elements).  ``src_layout()`` without an
argument uses the atom's own element width; ``src_layout(n)`` views it as ``n``-bit elements
(CuTe's ``upcast``).

Sources: PTX ISA "ld", "st", "ldmatrix", "stmatrix", "cp.async", "cp.async.commit_group",
"cp.async.wait_group"; every form and qualifier re-checked with ptxas 13.0 and 12.9
(tests/atoms/test_copy_ptxas.py).  The diagnostics of this module that are not the
specification's are our own wording (see docs/copy-atoms.md).
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import itertools
import re
from collections.abc import Callable
from typing import Any

from nvatom import diagnostics as D
from nvatom.arch import Feature, PtxVersion, Target, Tier, feature, target
from nvatom.atoms.fragments import layout_from_function
from nvatom.atoms.interfaces import AsyncCopyAtom, AtomVerificationError, CopyAtom
from nvatom.atoms.mma import Alias, MmaForm
from nvatom.atoms.register_mma import mma_form
from nvatom.atoms.verify import OperandUse
from nvatom.dtypes import DType, dtype
from nvatom.errors import LayoutError, NvatomError, lookup
from nvatom.layout import (
    ComposedLayout,
    Layout,
    Swizzle,
    coalesce,
    composition,
    layouts_equivalent,
    max_common_vector,
    right_inverse,
    size,
    upcast,
    zipped_divide,
)

__all__ = [
    "ACCESSES",
    "ASYNC_COPIES",
    "COPY_ATOMS",
    "MATRIX_COPIES",
    "MATRIX_FAMILIES",
    "MATRIX_FORMATS",
    "MATRIX_SHAPES",
    "UNIVERSAL_COPIES",
    "CachePolicy",
    "CopyAtomError",
    "CopyContract",
    "CopyUse",
    "MatrixCopy",
    "MatrixFamily",
    "MatrixFormat",
    "MatrixShape",
    "SimtAsyncCopy",
    "UniversalCopy",
    "VectorAccess",
    "check_swizzled_rows",
    "copy_atom",
    "copy_atoms",
    "default_cache_policy",
    "element_bits",
    "ldsm_matches_mma",
    "row_addresses",
    "stsm_matches_mma",
    "swizzle_too_fine",
    "swizzle_unit",
    "vectorize_copy",
]

class CopyAtomError(NvatomError):
    """An inconsistent copy table row, an unknown copy atom, or a question it cannot answer."""


# --------------------------------------------------------------------------- residencies

RMEM, SMEM, GMEM, LMEM = "rmem", "smem", "gmem", "lmem"
#: PTX state space of each memory residency a copy atom can touch.
STATE_SPACE = {GMEM: "global", SMEM: "shared", LMEM: "local"}
_MEMORIES = (RMEM, GMEM, SMEM, LMEM)

WARP = 32
ROW_BITS = 128  # one ldmatrix/stmatrix row: 16 bytes, one lane's address

def _feature(name: str) -> Feature:
    return feature(name)


# --------------------------------------------------------------------------- element widths

_BIT_TYPE = re.compile(r"[bsuf](8|16|32|64|128)")


def element_bits(t: object) -> int:
    """Bits one element occupies in memory: a DType's packed width (e2m1: 4, e2m3: 8), or the
    width of a PTX bit/integer type name that nvatom.dtypes does not list (b16, u32, ...)."""
    if isinstance(t, DType):
        return t.pack_bits
    name = str(t)
    try:
        return dtype(name).pack_bits
    except NvatomError:
        m = _BIT_TYPE.fullmatch(name)
        if m:
            return int(m.group(1))
        raise CopyAtomError(f"unknown element type '{name}'") from None


def _encoding_bits(t: object) -> int:
    if isinstance(t, DType):
        return t.encoding_bits
    try:
        return dtype(str(t)).encoding_bits
    except NvatomError:
        return element_bits(t)


def _type_name(t: object) -> str:
    return getattr(t, "name", None) or str(t)


# --------------------------------------------------------------------------- layout helpers


def _pow2_shape(n: int) -> int | tuple[int, ...]:
    """``n`` as binary digits: (2, 2, ..., 2); 1 stays 1."""
    if n < 1 or n & (n - 1):
        raise CopyAtomError(f"{n} is not a power of two")
    k = n.bit_length() - 1
    return 1 if k == 0 else (2 if k == 1 else (2,) * k)


def _derive(nthr: int, nval: int, fn: Callable[[int, int], int], what: str) -> Layout:
    """The (thread, value) layout equal to ``fn`` on [0, nthr) x [0, nval), each mode
    coalesced.  Every formula here is linear in the binary digits of thread and value, which
    layout_from_function checks at every point."""
    lay = layout_from_function(_pow2_shape(nthr), _pow2_shape(nval), fn, what)
    return coalesce(lay, (1, 1))


def _flat(t: object) -> list[int]:
    if isinstance(t, tuple):
        return [x for e in t for x in _flat(e)]
    return [int(t)]  # type: ignore[call-overload]


def _in_units(bits_layout: Layout, bits: int, what: str) -> Layout:
    """A (thread, bit) layout viewed as ``bits``-bit elements (CuTe upcast)."""
    if bits == 1:
        return bits_layout
    try:
        return coalesce(upcast(bits_layout, bits), (1, 1))
    except NvatomError as e:
        raise CopyAtomError(f"{what}: cannot view it as {bits}-bit elements ({e})") from None


# --------------------------------------------------------------------------- common base


@dataclasses.dataclass(frozen=True)
class CopyContract:
    """The specification's ``CopyAtomContract``: what the registry promises about a copy atom."""

    min_tier: Tier | None
    source: tuple[str, ...]
    destination: tuple[str, ...]
    value_bits: int  # bits one thread moves with one instruction
    is_async: bool
    uses_tma_descriptor: bool = False
    supports_prefetch: bool = False


@dataclasses.dataclass(frozen=True)
class CopyUse:
    """What the surrounding code feeds a copy atom: source and destination operands, each
    with element type, residency and (optionally) a layout.

    For the matrix copies a layout is the (thread, value) layout of that side, compared with
    the atom's; for the universal and async copies it is the layout of the values being copied
    (logical index -> memory offset), which must allow the atom's vector width
    (:func:`vectorize_copy`).
    """

    src: OperandUse
    dst: OperandUse


class _CopyBase(CopyAtom):
    """Availability, target checks and the verification ladder shared by every copy atom."""

    mnemonic: str
    tier: Tier | None
    min_ptx: PtxVersion
    feature: str | None
    name: str  # provided by each subclass

    # ---------------------------------------------------------------- availability
    def available_on(self, t: Target | str) -> bool:
        tt = target(t)
        if self.tier is not None and tt.tier < self.tier:
            return False
        return self.feature is None or _feature(self.feature).available_on(tt)

    def ptx_version_for(self, t: Target | str) -> PtxVersion:
        return max(self.min_ptx, target(t).min_ptx)

    # ---------------------------------------------------------------- contract
    # the residencies read and written and the bits moved: provided by each subclass
    sources: tuple[str, ...]
    destinations: tuple[str, ...]
    value_bits: int

    def contract(self) -> CopyContract:
        return CopyContract(self.tier, self.sources, self.destinations, self.value_bits,
                            isinstance(self, AsyncCopyAtom))

    # ---------------------------------------------------------------- verification
    def verify_instance(self, target_: Target | str, use: object) -> None:
        """Target tier and feature, residencies, element widths, layouts (in this order)."""
        if not isinstance(use, CopyUse):
            raise AtomVerificationError(f"'{self.name}' verifies a CopyUse, got {use!r}")
        self._verify_target(target(target_))
        src, dst = use.src, use.dst
        if src.residency not in self.sources or dst.residency not in self.destinations:
            raise AtomVerificationError(D.COPY_RESIDENCY.format(
                self.name, "|".join(self.sources), "|".join(self.destinations), src, dst))
        self._verify_elements(src, dst)
        self._verify_layouts(src, dst)

    def _verify_target(self, t: Target) -> None:
        if self.tier is not None and t.tier < self.tier:
            raise AtomVerificationError(
                D.COPY_TIER.format(self.name, self.tier.name, t.name, t.tier.name))
        if self.feature is not None and not _feature(self.feature).available_on(t):
            f = _feature(self.feature)
            raise AtomVerificationError(
                D.COPY_FEATURE.format(self.name, t.name, f.description, f.rule))

    def _verify_elements(self, src: OperandUse, dst: OperandUse) -> None:
        if element_bits(src.element_type) != element_bits(dst.element_type):
            raise AtomVerificationError(D.COPY_ELEMENT_MISMATCH.format(
                self.name, _type_name(src.element_type), _type_name(dst.element_type)))
        self._check_element(src.element_type)

    def _check_element(self, t: object) -> None:
        raise NotImplementedError

    def _verify_layouts(self, src: OperandUse, dst: OperandUse) -> None:
        raise NotImplementedError


def _width_error(name: str, what: str, t: object) -> AtomVerificationError:
    return AtomVerificationError(
        D.COPY_ELEMENT_WIDTH.format(name, what, _type_name(t), element_bits(t)))


# =========================================================================== vectorisation

#: Bits one thread can move with one ld/st/cp.async vector access (up to 128; the 256-bit
#: ld/st of sm_100 is not a universal copy).
VECTOR_BITS = (8, 16, 32, 64, 128)


def _unit_run(layout: Any) -> int:
    """How many elements sit contiguously from offset 0 (1 when no stride is 1): the size of
    the layout's right inverse.  Of a swizzled layout, at most the swizzle's unit (the
    aligned blocks it moves whole, :func:`swizzle_unit`), where the algebra has no right
    inverse to give (a swizzle finer than the layout's run)."""
    try:
        return size(right_inverse(layout))
    except LayoutError:
        if not (isinstance(layout, ComposedLayout) and isinstance(layout.inner, Swizzle)):
            raise
        return min(_unit_run(layout.outer), swizzle_unit(layout.inner))


def swizzle_unit(sw: Swizzle) -> int:
    """The elements in the smallest aligned block ``sw`` moves whole: the lowest bit it reads
    or writes (``swizzle_code``); an access of ``n`` elements, contiguous and ``n``-aligned
    before the swizzle, stays so after it iff ``n`` divides this (docs/ir.md, "swizzled
    shared memory")."""
    code = sw.swizzle_code
    return code & -code if code else 1 << 62


def swizzle_too_fine(name: str, layout: Any, vector: int, element_bits: int) -> None:
    """Raise the specification's "cannot vectorize copy" diagnostic, saying why, when
    ``layout`` is a swizzled one whose swizzle permutes units smaller than one access of
    ``vector`` elements of ``element_bits`` (an ldmatrix row, a vector ld/st/cp.async):
    the bytes of one access would not stay contiguous."""
    if not (isinstance(layout, ComposedLayout) and isinstance(layout.inner, Swizzle)):
        return
    unit = swizzle_unit(layout.inner)
    if unit % vector:
        raise AtomVerificationError(D.SWIZZLE_TOO_FINE.format(
            name, vector, layout.inner, unit, element_bits, vector * element_bits // 8))


def vectorize_copy(
    src_layout: Any,
    dst_layout: Any,
    element_bits: int,
    max_bits: int = 128,
    *,
    vector: int | None = None,
    name: str = "atom.universal_copy",
) -> int:
    """The vector width (in elements) of a copy between two value layouts.

    The layouts map a logical element index to a memory offset (static ``Layout`` or swizzled
    ``ComposedLayout``).  ``v`` consecutive logical elements move as one vector when they are
    contiguous in both, i.e. when ``v`` divides ``max_common_vector(src, dst)``.

    * ``vector=None``: the widest power-of-two ``v`` with that property and
      ``v * element_bits <= max_bits`` (1 when nothing vectorises).
    * ``vector=v``: check that width and return it.  A width that no access has (``v *
      element_bits`` not 8/16/32/64/128 bits, or above ``max_bits``) fails with our own
      message.  Otherwise, when ``v`` does not divide the common vector: if either layout
      lacks a run of ``v`` contiguous elements from offset 0 (the size of its right inverse is
      not a multiple of ``v``; no stride 1 at all counts as a run of 1), the copy fails with the
      specification's "(static strides must be 1)"; if both have such runs but over different
      logical elements (e.g. a column-major source and a row-major destination), with
      "(static strides must match)".
    """
    common = max_common_vector(src_layout, dst_layout)
    if vector is None:
        v = 1
        while common % (2 * v) == 0 and 2 * v * element_bits <= max_bits:
            v *= 2
        return v
    legal = [b for b in VECTOR_BITS if b <= max_bits]
    bits = vector * element_bits
    if vector < 1 or bits not in legal:
        raise AtomVerificationError(D.VECTOR_WIDTH.format(
            name, vector, bits, ", ".join(map(str, legal)) + " bits"))
    if common % vector == 0:
        return vector
    for lay in (src_layout, dst_layout):
        swizzle_too_fine(name, lay, vector, element_bits)
    if _unit_run(src_layout) % vector or _unit_run(dst_layout) % vector:
        raise AtomVerificationError(D.VECTORIZE_STRIDES_ONE.format(name, vector))
    raise AtomVerificationError(D.VECTORIZE_STRIDES_MATCH.format(name, vector))


# =========================================================================== universal copy


@dataclasses.dataclass(frozen=True)
class VectorAccess:
    """One ld/st spelling: ``.v{vec}.b{elem}`` (``.b{elem}`` when ``vec`` is 1)."""

    vec: int
    elem: int  # bits of one vector element
    min_ptx: PtxVersion = (1, 0)  # ld/st predate every target: the target's minimum binds

    def __post_init__(self) -> None:
        if self.vec not in (1, 2, 4) or self.elem not in (8, 16, 32, 64) or \
                self.bits not in VECTOR_BITS:
            raise CopyAtomError(f"no ld/st vector access .v{self.vec}.b{self.elem}")

    @property
    def bits(self) -> int:
        return self.vec * self.elem

    @property
    def suffix(self) -> str:
        """``.v4.b32``, ``.b16``, ..."""
        return (f".v{self.vec}" if self.vec > 1 else "") + f".b{self.elem}"

    @property
    def register_type(self) -> str:
        """PTX register type of one vector element (8-bit elements travel in 16-bit
        registers, as nvcc emits them)."""
        return f"b{max(self.elem, 16)}"


#: Every vector access of 8..128 bits; for each width the first listed is the one
#: :class:`UniversalCopy` uses unless told otherwise (scalar up to 64 bits; 128 bits as
#: .v4.b32, the four .b32 registers MMA fragments use).
ACCESSES: tuple[VectorAccess, ...] = tuple(
    VectorAccess(v, e)
    for bits in VECTOR_BITS
    for v, e in sorted(((v, e) for v in (1, 2, 4) for e in (8, 16, 32, 64) if v * e == bits),
                       key=lambda ve: (ve[0] != 1 and ve != (4, 32), -ve[1]))
)


def _default_access(bits: int) -> VectorAccess:
    for a in ACCESSES:
        if a.bits == bits:
            return a
    raise CopyAtomError(f"no universal copy of {bits} bits (one of {VECTOR_BITS})")


class _ThreadVectorCopy:
    """One thread moves ``bits`` contiguous bits (CuTe's UniversalCopy and SM80_CP_ASYNC
    traits): the layouts, element check and vector verification both families share.
    Subclasses provide ``bits`` and ``name``."""

    def src_layout(self, bits: int | None = None) -> Layout:
        """(thread, value) -> bit: one thread, ``self.bits`` contiguous bits."""
        return _in_units(Layout((1, self.bits), (0, 1)), bits or 1,  # type: ignore[attr-defined]
                         self.name)  # type: ignore[attr-defined]

    def dst_layout(self, bits: int | None = None) -> Layout:
        return self.src_layout(bits)

    def _check_element(self, t: object) -> None:
        b = element_bits(t)
        if self.bits % b:
            raise _width_error(self.name, f"{self.bits}-bit vectors of whole elements", t)

    def _verify_layouts(self, src: OperandUse, dst: OperandUse) -> None:
        _verify_vector(self.name, self.bits, src, dst)

    @property
    def value_bits(self) -> int:
        return self.bits  # type: ignore[attr-defined]


@dataclasses.dataclass(frozen=True)
class UniversalCopy(_ThreadVectorCopy, _CopyBase):
    """``atom.universal_copy<bits>``: one ld/st of ``bits`` per thread, any residency pair."""

    bits: int
    access: VectorAccess | None = None  # None: the default spelling of the width

    mnemonic = "atom.universal_copy"
    tier = None
    feature = None
    sources = destinations = _MEMORIES
    min_ptx = Alias("access.min_ptx")  # the PTX version of its ld/st spelling

    def __post_init__(self) -> None:
        if self.access is None:
            object.__setattr__(self, "access", _default_access(self.bits))
        if self.vector_access.bits != self.bits:
            raise CopyAtomError(
                f"access {self.vector_access.suffix} does not move {self.bits} bits")

    @property
    def vector_access(self) -> VectorAccess:
        assert self.access is not None
        return self.access

    @property
    def name(self) -> str:  # type: ignore[override]
        base = f"{self.mnemonic}<{self.bits}>"
        return base if self.vector_access == _default_access(self.bits) else \
            base + self.vector_access.suffix

    def ld_opcode(self, residency: str) -> str:
        return f"ld.{_space(residency)}{self.vector_access.suffix}"

    def st_opcode(self, residency: str) -> str:
        return f"st.{_space(residency)}{self.vector_access.suffix}"



def _space(residency: str) -> str:
    return lookup(STATE_SPACE, residency, lambda: CopyAtomError(
        f"no ld/st state space for residency '{residency}' (one of {', '.join(STATE_SPACE)})"))


def _verify_vector(name: str, bits: int, src: OperandUse, dst: OperandUse) -> None:
    if src.layout is None or dst.layout is None:
        return
    eb = element_bits(src.element_type)
    vectorize_copy(src.layout, dst.layout, eb, bits, vector=bits // eb, name=name)


UNIVERSAL_COPIES: tuple[UniversalCopy, ...] = tuple(UniversalCopy(a.bits, a) for a in ACCESSES)


# =========================================================================== ldmatrix / stmatrix


@dataclasses.dataclass(frozen=True)
class MatrixFormat:
    """The element spelling of a matrix copy: ``.b16``, ``.b8`` or a decompressing
    ``.b8x16.b{6,4}x16_p{32,64}`` (16 packed 6-/4-bit elements plus padding per 16-byte row,
    each widened into the low bits of its own byte in the registers)."""

    spelling: str
    mem_bits: int  # bits of one element in shared memory
    reg_bits: int  # bits of its container in the registers

    @property
    def decompresses(self) -> bool:
        return self.mem_bits != self.reg_bits


B16 = MatrixFormat("b16", 16, 16)
B8 = MatrixFormat("b8", 8, 8)
B6X16_P32 = MatrixFormat("b8x16.b6x16_p32", 6, 8)
B4X16_P64 = MatrixFormat("b8x16.b4x16_p64", 4, 8)
MATRIX_FORMATS = (B16, B8, B6X16_P32, B4X16_P64)


# Each fragment function is the PTX ISA's per-lane rule for one register matrix (the matrix as
# the registers see it; .trans transposes it in shared memory): lane t, register i of a matrix,
# element k of the register (k = 0 in the low bits) -> (row, column).  g = t / 4, q = t % 4.
# Sources: PTX ISA "Warp-level matrix load instruction: ldmatrix" and "Warp-level matrix store
# instruction: stmatrix" (figure numbers of ISA 9.0).  These rules describe the bare
# instruction: a library that rearranges registers after it (CUTLASS's SM100_U8x8_LDSM_T and
# SM100_U8x16_LDSM_T) has a different layout, which is not this atom's (docs/copy-atoms.md).


def _m8n8(t: int, i: int, k: int) -> tuple[int, int]:
    # ldmatrix/stmatrix .m8n8 .b16 (Figures 104 and 107): "a group of four threads loads an
    # entire row"; lane t holds elements 2q and 2q + 1 of row g.
    return t // 4, 2 * (t % 4) + k


def _m16n16(t: int, i: int, k: int) -> tuple[int, int]:
    # ldmatrix .m16n16 (Figure 105): "each thread loads 4 consecutive columns across 2 rows",
    # "in each register four 8-bit elements are loaded": register i holds columns 4q .. 4q + 3
    # of row g + 8 i.
    return t // 4 + 8 * i, 4 * (t % 4) + k


def _m8n16(t: int, i: int, k: int) -> tuple[int, int]:
    # ldmatrix .m8n16 (Figure 106): "each thread loads 4 consecutive columns" of row g.
    return t // 4, 4 * (t % 4) + k


def _m16n8(t: int, i: int, k: int) -> tuple[int, int]:
    # stmatrix .m16n8 (the figure after Figure 107): "each of the 32 threads provides four
    # elements" e0..e3 per matrix, e0/e1 in row g and e2/e3 in row g + 8, columns 2q and
    # 2q + 1 (the m16n8 accumulator pattern).
    return t // 4 + 8 * (k // 2), 2 * (t % 4) + k % 2


@dataclasses.dataclass(frozen=True)
class MatrixShape:
    """``.mXnY``: the m x n matrix as the *registers* see it and where each lane's elements
    sit in it.  Without ``.trans`` shared memory holds this matrix row by row; with it, its
    transpose.  Either way every smem row is 16 bytes and one lane supplies its address."""

    name: str
    m: int
    n: int
    regs: int  # 32-bit registers per matrix and lane
    fragment: Callable[[int, int, int], tuple[int, int]]  # (lane, register, element) -> (r, c)


M8N8 = MatrixShape("m8n8", 8, 8, 1, _m8n8)
M16N16 = MatrixShape("m16n16", 16, 16, 2, _m16n16)
M8N16 = MatrixShape("m8n16", 8, 16, 1, _m8n16)
M16N8 = MatrixShape("m16n8", 16, 8, 1, _m16n8)
MATRIX_SHAPES = (M8N8, M16N16, M8N16, M16N8)


@dataclasses.dataclass(frozen=True)
class MatrixFamily:
    """One row of the matrix-copy table: an instruction and shape with its legal counts,
    transpositions and formats, the tier and PTX version that first have it, and its
    nvatom.arch feature."""

    op: str  # "ldmatrix" | "stmatrix"
    shape: MatrixShape
    nums: tuple[int, ...]
    trans: tuple[bool, ...]
    formats: tuple[MatrixFormat, ...]
    tier: Tier
    min_ptx: PtxVersion
    feature: str

    @property
    def mnemonic(self) -> str:
        return {"ldmatrix": "atom.ldsm", "stmatrix": "atom.stsm"}[self.op]


#: ptxas 13.0: the m8n8 .b16 forms on sm_75 (ldmatrix, 6.5) and sm_90 (stmatrix, 7.8); the
#: 8-bit forms only on sm_100+/sm_110+/sm_120+ 'a'/'f' targets (8.6).  .m16n16 takes .x1/.x2
#: and needs .trans; .m8n16 refuses .trans; stmatrix .m16n8 needs .trans.
MATRIX_FAMILIES: tuple[MatrixFamily, ...] = (
    MatrixFamily("ldmatrix", M8N8, (1, 2, 4), (False, True), (B16,), Tier.SM75, (6, 5),
                 "ldmatrix"),
    MatrixFamily("ldmatrix", M16N16, (1, 2), (True,), (B8, B6X16_P32, B4X16_P64), Tier.SM100,
                 (8, 6), "ldmatrix.b8"),
    MatrixFamily("ldmatrix", M8N16, (1, 2, 4), (False,), (B6X16_P32, B4X16_P64), Tier.SM100,
                 (8, 6), "ldmatrix.b8"),
    MatrixFamily("stmatrix", M8N8, (1, 2, 4), (False, True), (B16,), Tier.SM90, (7, 8),
                 "stmatrix"),
    MatrixFamily("stmatrix", M16N8, (1, 2, 4), (True,), (B8,), Tier.SM100, (8, 6),
                 "stmatrix.b8"),
)


@dataclasses.dataclass(frozen=True)
class MatrixCopy(_CopyBase):
    """One ldmatrix/stmatrix instruction form (``atom.ldsm<m8n8.x4.trans>``, ...)."""

    family: MatrixFamily
    num: int
    trans: bool
    fmt: MatrixFormat

    def __post_init__(self) -> None:
        f = self.family
        problems = []
        if self.num not in f.nums:
            problems.append(f".x{self.num}")
        if self.trans not in f.trans:
            problems.append(".trans" if self.trans else "no .trans")
        if self.fmt not in f.formats:
            problems.append(f".{self.fmt.spelling}")
        if self.cols * self.fmt.reg_bits != ROW_BITS:
            problems.append(f"rows of {self.cols} x {self.fmt.reg_bits} bits")
        if self.shape.regs * WARP * 32 != self.shape.m * self.shape.n * self.fmt.reg_bits:
            problems.append("registers do not hold the matrix")
        _feature(f.feature)
        if problems:
            raise CopyAtomError(f"bad matrix copy row {f.op}.{f.shape.name}: "
                                f"{', '.join(problems)}")

    # ---------------------------------------------------------------- table fields
    op = Alias("family.op")
    shape = Alias("family.shape")
    mnemonic = Alias("family.mnemonic")
    tier = Alias("family.tier")
    min_ptx = Alias("family.min_ptx")
    feature = Alias("family.feature")

    # ---------------------------------------------------------------- naming
    @property
    def qualifiers(self) -> str:
        """``m8n8.x4.trans`` (the ``.b16`` of the SM75/SM90 forms is left out, as the
        specification spells them), ``m16n16.x2.trans.b8``."""
        q = f"{self.shape.name}.x{self.num}" + (".trans" if self.trans else "")
        return q if self.fmt == B16 else f"{q}.{self.fmt.spelling}"

    @property
    def name(self) -> str:  # type: ignore[override]
        return f"{self.mnemonic}<{self.qualifiers}>"

    @property
    def opcode(self) -> str:
        trans = ".trans" if self.trans else ""
        return (f"{self.op}.sync.aligned.{self.shape.name}.x{self.num}{trans}.shared."
                f"{self.fmt.spelling}")

    # ---------------------------------------------------------------- geometry
    @property
    def rows(self) -> int:
        """Rows of one matrix in shared memory (lanes supplying addresses per matrix)."""
        return self.shape.n if self.trans else self.shape.m

    @property
    def cols(self) -> int:
        """Elements of one smem row."""
        return self.shape.m if self.trans else self.shape.n

    @property
    def registers(self) -> int:
        """32-bit registers per lane."""
        return self.num * self.shape.regs

    @property
    def address_lanes(self) -> int:
        """Lanes whose address is used: lane ``l`` points at row ``l % rows`` of matrix
        ``l // rows``; the others' addresses are ignored."""
        return self.num * self.rows

    @property
    def elements_per_lane(self) -> int:
        return self.registers * 32 // self.fmt.reg_bits

    @property
    def register_side(self) -> str:
        return "dst" if self.op == "ldmatrix" else "src"

    @property
    def sources(self) -> tuple[str, ...]:
        return (SMEM,) if self.op == "ldmatrix" else (RMEM,)

    @property
    def destinations(self) -> tuple[str, ...]:
        return (RMEM,) if self.op == "ldmatrix" else (SMEM,)

    @property
    def value_bits(self) -> int:
        return self.registers * 32

    def element(self, lane: int, value: int) -> tuple[int, int, int]:
        """(matrix, smem row, smem column) of element ``value`` of ``lane``'s registers
        (values in register order, element 0 in the low bits)."""
        per_reg = 32 // self.fmt.reg_bits
        reg, k = divmod(value, per_reg)
        j, i = divmod(reg, self.shape.regs)
        r, c = self.shape.fragment(lane, i, k)
        return (j, c, r) if self.trans else (j, r, c)

    # ---------------------------------------------------------------- layouts
    def _ref_bit(self, j: int, r: int, c: int) -> int:
        return ((j * self.rows + r) * self.cols + c) * self.fmt.reg_bits

    def register_layout(self, bits: int | None = None) -> Layout:
        """(lane, value) -> reference element: the registers' side (dst of ldmatrix, src of
        stmatrix).  ``bits=1``: (lane, register bit) as CUTLASS writes it."""
        return _in_units(_register_bits(self), bits or self.fmt.reg_bits, self.name)

    def smem_layout(self, bits: int | None = None) -> Layout:
        """(lane, value) -> reference element: lane ``l`` addresses one 16-byte row, its
        values are that row's elements; lanes past :attr:`address_lanes` repeat (stride 0)."""
        return _in_units(_smem_bits(self), bits or self.fmt.reg_bits, self.name)

    def src_layout(self, bits: int | None = None) -> Layout:
        return self.smem_layout(bits) if self.op == "ldmatrix" else self.register_layout(bits)

    def dst_layout(self, bits: int | None = None) -> Layout:
        return self.register_layout(bits) if self.op == "ldmatrix" else self.smem_layout(bits)

    # ---------------------------------------------------------------- verification
    def element_rule(self) -> str:
        """Which elements the form moves, in words (used by the verifier's message)."""
        if self.fmt.decompresses:
            return f"{self.fmt.mem_bits}-bit elements"
        if self.trans:
            return f"{self.fmt.reg_bits}-bit elements (.trans moves {self.fmt.reg_bits}-bit units)"
        return "elements of 1, 2, 4, 8, 16 or 32 bits (none may straddle a register)"

    def _check_element(self, t: object) -> None:
        b = element_bits(t)
        if self.fmt.decompresses:
            ok = _encoding_bits(t) == self.fmt.mem_bits
        elif self.trans:
            ok = b == self.fmt.reg_bits
        else:
            ok = b <= 32 and 32 % b == 0
        if not ok:
            raise _width_error(self.name, self.element_rule(), t)

    def _verify_layouts(self, src: OperandUse, dst: OperandUse) -> None:
        for side, op in (("src", src), ("dst", dst)):
            if op.layout is None:
                continue
            eb = self.fmt.reg_bits if self.fmt.decompresses else element_bits(op.element_type)
            want = self.src_layout(eb) if side == "src" else self.dst_layout(eb)
            if isinstance(op.layout, ComposedLayout) or not layouts_equivalent(op.layout, want):
                raise AtomVerificationError(D.COPY_LAYOUT.format(self.name, side, want, op.layout))


def check_swizzled_rows(atom: MatrixCopy, use: OperandUse, side: str) -> OperandUse:
    """An ldmatrix/stmatrix smem operand ``Sw<B,M,S> o off o (lane, value)``: lane ``l``
    supplies the address of the row ``Sw(off + layout(l, 0))`` (the hardware takes any row
    address per lane), so only the value mode must be the atom's: one row of elements in
    order.  Checked here (the IR's ``atom.copy`` and the kernel layer's ``copy`` both call
    it); returns the use with the layout left out for :meth:`verify_instance` (the caller
    checks that the swizzle keeps each 16-byte row contiguous: the IR's verifier with
    :func:`swizzle_too_fine`, the kernel layer per access).  Other uses pass unchanged."""
    lay = use.layout
    if not (isinstance(lay, ComposedLayout) and isinstance(lay.inner, Swizzle)
            and use.residency == "smem"):
        return use
    want = atom.smem_layout(element_bits(use.element_type))
    outer = lay.outer
    if outer.rank != 2 or size(outer[0]) != size(want[0]) \
            or not layouts_equivalent(outer[1], want[1]):
        raise AtomVerificationError(
            f"'{atom.name}' takes a swizzled {side} Sw o offset o (lane, value) with "
            f"{size(want[0])} lanes and the values one row {want[1]}, but got {lay}")
    return OperandUse(use.element_type, use.residency, None)


@functools.cache
def _register_bits(atom: MatrixCopy) -> Layout:
    w = atom.fmt.reg_bits

    def fn(t: int, v: int) -> int:
        value, b = divmod(v, w)
        return atom._ref_bit(*atom.element(t, value)) + b

    return _derive(WARP, atom.registers * 32, fn, f"{atom.name} registers")


@functools.cache
def _smem_bits(atom: MatrixCopy) -> Layout:
    lanes = atom.address_lanes
    return _derive(WARP, ROW_BITS, lambda t, v: (t % lanes) * ROW_BITS + v, f"{atom.name} smem")


MATRIX_COPIES: tuple[MatrixCopy, ...] = tuple(
    MatrixCopy(f, num, trans, fmt)
    for f in MATRIX_FAMILIES
    for num, trans, fmt in itertools.product(f.nums, f.trans, f.formats)
)


# ---------------------------------------------------------------- feeding an MMA


def _operand_tile(form: MmaForm, op: str) -> tuple[int, int, str, str]:
    """(rows, cols, row-dim name, col-dim name) of the operand's tile in the MMA atom's
    codomain orientation: A is M x K, B is N x K, C and D are M x N."""
    m, n, k = form.shape
    if op == "A":
        return m, (k // 2 if form.is_sparse else k), "M", "K"
    if op == "B":
        return n, k, "N", "K"
    if op in ("C", "D"):
        return m, n, "M", "N"
    raise CopyAtomError(f"unknown MMA operand '{op}' (A, B, C or D)")


def _tile_memory(form: MmaForm, op: str, major: str) -> Layout:
    """Tile coordinate (column-major ``r + rows * c``) -> element offset in shared memory,
    ``major`` naming the contiguous dimension ("K", "M", "N"; "MN" is the non-K one)."""
    rows, cols, rname, cname = _operand_tile(form, op)
    if major == "MN":
        major = rname if cname == "K" else major
    if major == cname:
        return Layout((rows, cols), (cols, 1))
    if major == rname:
        return Layout((rows, cols), (1, rows))
    raise CopyAtomError(f"operand {op} of {form.name} is {rname} x {cname}: major must be "
                        f"{cname} or {rname}, not '{major}'")


def _resolve_form(form: MmaForm | str) -> MmaForm:
    if isinstance(form, str):
        return mma_form(form)
    return form


def _need_major(fn: str, major: str | None) -> str:
    """``major`` of :func:`ldsm_matches_mma` and its kin, which has no default: the storage
    order that suits an atom flips with ``.trans``, so a default would answer a question the
    caller did not ask (issue 28)."""
    if major is None:
        raise CopyAtomError(f"{fn}() needs major=: the operand tile's contiguous dimension "
                            "in shared memory ('K' for K-major, 'MN' for M-major A / N-major "
                            "B, or the dimension's name: 'M', 'N'; C/D: 'N' row-major or "
                            "'M'); it has no default because the order an ldmatrix/stmatrix "
                            "form suits flips with .trans")
    return major


@functools.lru_cache(maxsize=512)  # pure; kernels ask it once per tile and K step
def _placement(atom: MatrixCopy, form: MmaForm | str, operand: str,
               major: str) -> tuple[Layout, int] | None:
    """Reference bit -> smem bit of the operand tile when the matrix copy's registers are the
    MMA fragment, with its element width; None when the fragments differ in size.

    MMA side: (lane, fragment bit) -> smem bit, from the tile's memory layout composed with
    ``form.tv_layout(op)`` (values pack into registers low bits first, so fragment bit
    ``i * w + b`` is register bit ``32 * r + b'`` of the copy).  Composing it with the right
    inverse of the copy's register layout gives where each reference bit must come from.
    """
    f = _resolve_form(form)
    op = operand.upper()
    mem = composition(_tile_memory(f, op, major), f.tv_layout(op))
    w = f.operand_type(op).pack_bits
    nthr, nval = size(mem[0]), size(mem[1])
    if nthr != WARP or nval * w != atom.registers * 32:
        return None
    mma_bits = layout_from_function(_pow2_shape(nthr), _pow2_shape(nval * w),
                                    lambda t, vb: mem(t, vb // w) * w + vb % w,
                                    f"{f.name} {op} bits")
    return composition(mma_bits, right_inverse(atom.register_layout(1))), w


def _rows_contiguous(placement: Layout) -> bool:
    """Every 128-bit reference row lands on 128 contiguous, 16-byte aligned smem bits."""
    tiles = zipped_divide(placement, Layout(ROW_BITS, 1))
    row, starts = tiles[0], tiles[1]
    if not layouts_equivalent(row, Layout(ROW_BITS, 1)):
        return False
    return all(d % ROW_BITS == 0 for s, d in zip(_flat(starts.shape), _flat(starts.stride),
                                                 strict=True) if s > 1)


def _matches(atom: MatrixCopy, form: MmaForm | str, operand: str, major: str) -> bool:
    p = _placement(atom, form, operand, major)
    return p is not None and _rows_contiguous(p[0])


def ldsm_matches_mma(atom: MatrixCopy, form: MmaForm | str, operand: str,
                     major: str | None = None) -> bool:
    """Does ``atom`` (an ldmatrix form) load exactly ``form``'s fragment of ``operand`` from
    a tile stored ``major``-contiguous in shared memory, given the right row addresses?

    ``major`` (required, by position or keyword) names the tile's contiguous dimension: "K"
    (K-major) or "MN" (M-major A, N-major B), as everywhere in nvatom, or the dimension by
    name (A: "K" or "M", B: "K" or "N", C/D: "N" or "M").  It has no default: without
    ``.trans`` an ldmatrix suits a K-major tile, with it an MN-major one, so a default would
    flip with the atom (leaving it out is a :class:`CopyAtomError` saying so).  True when
    every 16-byte row the instruction reads is 16 contiguous, aligned bytes of the tile;
    :func:`row_addresses` then says which.
    """
    if atom.op != "ldmatrix":
        raise CopyAtomError(f"{atom.name} is not an ldmatrix form")
    return _matches(atom, form, operand, _need_major("ldsm_matches_mma", major))


def stsm_matches_mma(atom: MatrixCopy, form: MmaForm | str, operand: str,
                     major: str | None = None) -> bool:
    """:func:`ldsm_matches_mma` for stmatrix: does the fragment (typically C/D) store with it?
    ``major`` is required as there."""
    if atom.op != "stmatrix":
        raise CopyAtomError(f"{atom.name} is not an stmatrix form")
    return _matches(atom, form, operand, _need_major("stsm_matches_mma", major))


def row_addresses(atom: MatrixCopy, form: MmaForm | str, operand: str,
                  major: str | None = None) -> Layout:
    """lane -> element offset (within the operand's tile) that lane must pass as its row
    address, for the lanes whose address the instruction reads (:attr:`address_lanes`).

    e.g. ``atom.ldsm<m8n8.x4>`` and the A operand of m16n8k16 f16 in a K-major 16 x 16 tile:
    ``(16,2):(16,8)``, i.e. lane ``l`` points at row ``l % 16``, column ``8 * (l // 16)``.
    Raises when the copy does not produce the fragment (:func:`ldsm_matches_mma`, whose
    ``major`` this requires too).
    """
    major = _need_major("row_addresses", major)
    p = _placement(atom, form, operand, major)
    if p is None or not _rows_contiguous(p[0]):
        name = _resolve_form(form).name
        raise CopyAtomError(f"{atom.name} does not move operand {operand} of {name} "
                            f"({major}-major)")
    placement, w = p
    return _derive(atom.address_lanes, 1, lambda t, v: placement(t * ROW_BITS) // w,
                   f"{atom.name} row addresses")[0]


# =========================================================================== cp.async

#: cp-size in bytes each cache operator accepts (ptxas 13.0: ".cg" says "expected to be 16").
CP_ASYNC_SIZES = {"ca": (4, 8, 16), "cg": (16,)}
#: .L2 prefetch sizes in bytes.
PREFETCH_SIZES = (64, 128, 256)
#: PTX ISA version each optional part of cp.async needs (measured with ptxas on sm_80).
CP_ASYNC_BASE_PTX: PtxVersion = (7, 0)
CP_ASYNC_QUALIFIER_PTX: dict[str, PtxVersion] = {
    "L2::64B": (7, 4), "L2::128B": (7, 4), "L2::256B": (7, 4), "L2::cache_hint": (7, 4),
    "ignore_src": (7, 5),
}
#: Zero-fill operands: none, ``src-size`` (a 32-bit register or immediate; bytes past it are
#: zero) or ``ignore-src`` (a predicate; true copies zeros).
FILLS = (None, "src_size", "ignore_src")
#: cp.async.wait_group takes an immediate; ptxas does not range-check it (even -1 assembles),
#: we require N >= 0.
COMMIT_GROUP = "cp.async.commit_group"
WAIT_GROUP = "cp.async.wait_group"
WAIT_ALL = "cp.async.wait_all"


@dataclasses.dataclass(frozen=True)
class CachePolicy:
    """How a cp.async treats the caches: ``.ca`` (L1 and L2) or ``.cg`` (L2 only), an
    optional L2 prefetch of 64/128/256 bytes, and whether a 64-bit ``createpolicy`` operand
    (``.L2::cache_hint``) goes with it.  All are performance hints (PTX ISA)."""

    cache: str = "ca"
    prefetch: int | None = None  # bytes
    cache_hint: bool = False

    def __post_init__(self) -> None:
        if self.cache not in CP_ASYNC_SIZES:
            raise CopyAtomError(f"cache operator '.{self.cache}' (one of .ca, .cg)")
        if self.prefetch is not None and self.prefetch not in PREFETCH_SIZES:
            raise CopyAtomError(f"L2 prefetch size {self.prefetch} B (one of {PREFETCH_SIZES})")

    @property
    def qualifiers(self) -> tuple[str, ...]:
        """Qualifiers after ``.global`` in the ISA's order (cache hint, then prefetch)."""
        q = ("L2::cache_hint",) if self.cache_hint else ()
        return q + ((f"L2::{self.prefetch}B",) if self.prefetch else ())

    @property
    def min_ptx(self) -> PtxVersion:
        return max([CP_ASYNC_BASE_PTX, *(CP_ASYNC_QUALIFIER_PTX[q] for q in self.qualifiers)])


def default_cache_policy(nbytes: int) -> CachePolicy:
    """Our choice (the spec's; docs/spec-deviations.md, "Copy atoms"): ``.cg`` for 16 bytes, ``.ca``
    for 4 and 8.
    It is a choice, not a hardware rule: ``.ca`` with 16 bytes is legal too."""
    return CachePolicy("cg" if nbytes == 16 else "ca")


@dataclasses.dataclass(frozen=True)
class SimtAsyncCopy(_ThreadVectorCopy, _CopyBase, AsyncCopyAtom):
    """``atom.simt_async_copy<N>``: ``cp.async`` of N bytes per thread, global -> shared."""

    nbytes: int
    policy: CachePolicy | None = None  # None: default_cache_policy(nbytes)
    fill: str | None = None  # None, "src_size" or "ignore_src" (zero fill)

    mnemonic = "atom.simt_async_copy"
    tier = Tier.SM80
    feature = "cp.async"
    sources = (GMEM,)
    destinations = (SMEM,)

    def __post_init__(self) -> None:
        if self.policy is None:
            object.__setattr__(self, "policy", default_cache_policy(self.nbytes))
        if self.nbytes not in CP_ASYNC_SIZES[self.cache_policy.cache]:
            raise CopyAtomError(
                f"cp.async.{self.cache_policy.cache} copies "
                f"{' or '.join(map(str, CP_ASYNC_SIZES[self.cache_policy.cache]))} bytes, "
                f"not {self.nbytes}")
        if self.fill not in FILLS:
            raise CopyAtomError(f"zero fill '{self.fill}' (one of {FILLS})")

    @property
    def cache_policy(self) -> CachePolicy:
        assert self.policy is not None
        return self.policy

    @property
    def min_ptx(self) -> PtxVersion:  # type: ignore[override]
        fill = CP_ASYNC_QUALIFIER_PTX.get(self.fill or "", CP_ASYNC_BASE_PTX)
        return max(self.cache_policy.min_ptx, fill)

    @property
    def bits(self) -> int:
        return 8 * self.nbytes

    @property
    def name(self) -> str:  # type: ignore[override]
        p = self.cache_policy
        parts = [f"{self.mnemonic}<{self.nbytes}>"]
        if p.cache != default_cache_policy(self.nbytes).cache:
            parts.append(p.cache)
        parts += list(p.qualifiers)
        if self.fill:
            parts.append(self.fill)
        return ".".join(parts)

    @property
    def opcode(self) -> str:
        q = "".join(f".{x}" for x in self.cache_policy.qualifiers)
        return f"cp.async.{self.cache_policy.cache}.shared.global{q}"

    def operands(self, dst: str, src: str, fill: str | None = None,
                 cache_policy: str | None = None) -> list[str]:
        """``[dst], [src], N[, src-size | ignore-src][, cache-policy]`` as strings."""
        ops = [f"[{dst}]", f"[{src}]", str(self.nbytes)]
        if (fill is None) != (self.fill is None):
            raise CopyAtomError(f"{self.name}: the zero-fill operand is "
                                f"{'required' if self.fill else 'not taken'}")
        if fill is not None:
            ops.append(fill)
        if (cache_policy is None) == self.cache_policy.cache_hint:
            raise CopyAtomError(f"{self.name}: the cache-policy operand is "
                                f"{'required' if self.cache_policy.cache_hint else 'not taken'}")
        if cache_policy is not None:
            ops.append(cache_policy)
        return ops



ASYNC_COPIES: tuple[SimtAsyncCopy, ...] = tuple(
    SimtAsyncCopy(n, CachePolicy(cache, pf, hint), fill)
    for cache, sizes in CP_ASYNC_SIZES.items()
    for n in sizes
    for pf, hint, fill in itertools.product((None, *PREFETCH_SIZES), (False, True), FILLS)
)


# =========================================================================== lookup

COPY_ATOMS: tuple[_CopyBase, ...] = (*UNIVERSAL_COPIES, *MATRIX_COPIES, *ASYNC_COPIES)


@functools.cache
def _by_name() -> dict[str, _CopyBase]:
    out: dict[str, _CopyBase] = {}
    for a in COPY_ATOMS:
        if a.name in out:
            raise CopyAtomError(f"two copy atoms named {a.name}")
        out[a.name] = a
    return out


def copy_atom(name: str) -> _CopyBase:
    """Resolve a copy atom name (``atom.ldsm<m8n8.x4.trans>``, ``atom.universal_copy<128>``,
    ``atom.simt_async_copy<16>``, ``atom.simt_async_copy<16>.ca.L2::128B.src_size``, ...);
    the specification's ``atom.ldsm<m8n8>`` means ``.x1``."""
    key = name.strip()
    # The specification's table writes the one-matrix form without ".x1": atom.ldsm<m8n8>.
    key = re.sub(r"^(atom\.(?:ldsm|stsm)<m\d+n\d+)(?=[.>])(?!\.x\d)", r"\1.x1", key)
    try:
        return _by_name()[key]
    except KeyError:
        near = difflib.get_close_matches(key, list(_by_name()), n=3, cutoff=0.6)
        hint = f"; nearest: {', '.join(near)}" if near else ""
        raise CopyAtomError(f"unknown copy atom '{key}'{hint}") from None


def copy_atoms(target_: Target | str | None = None, *, mnemonic: str | None = None
               ) -> list[_CopyBase]:
    """Copy atoms, filtered by target availability and mnemonic (``atom.ldsm``, ...)."""
    t = target(target_) if target_ is not None else None
    return [a for a in COPY_ATOMS
            if (t is None or a.available_on(t)) and (mnemonic is None or a.mnemonic == mnemonic)]


_by_name()  # names are unique (raises at import otherwise)
