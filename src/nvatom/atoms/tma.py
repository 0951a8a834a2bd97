"""TMA atoms (the spec's TMA chapter): mode enums, the partition result record, the partition
verifier.

The spec's three mode enums are kept with their names and values as the textual contract;
each member maps to the real PTX qualifier (docs/spec-deviations.md, "TMA lowering").  Where the
spec's name is not a real
PTX mode it says so:

* load ``TWO_CTA`` is ``.tile`` plus the ``.cta_group::2`` qualifier (sm_100a), not a mode;
* load ``W_MULTICAST`` / ``W128_MULTICAST`` are the im2col modes ``.im2col::w`` /
  ``.im2col::w::128`` and have nothing to do with multicast (multicast is the orthogonal
  ``.multicast::cluster`` modifier with a 16-bit CTA mask);
* store ``IM2COL`` is ``.im2col_no_offs``; store ``IM2COL_W`` / ``IM2COL_W128`` do not exist
  (ptxas: ``Illegal modifier '.im2col::w'``), so the verifier cannot build their tensor type;
* the real modes ``.tile::gather4``, ``.im2col`` (load) and ``.tile::scatter4`` (store) have
  no spec enum value.

Operands are layout *types*: a :class:`~nvatom.layout.Layout`, a
:class:`~nvatom.layout.ComposedLayout`, or a :class:`LayoutType` whose shape and stride may
hold dynamic integers (names) and scaled-basis elements (:class:`E`), which the CuTe layout
algebra cannot hold.  The CTA V-map maps tile coordinates onto GMEM modes through scaled
bases, as CuTe's ``make_tma_copy`` builds it.

Besides the verifier (docs/tma.md):

* :data:`TMA_INSTRS`, the tensor-copy forms of ``cp.async.bulk.tensor`` /
  ``cp.reduce.async.bulk.tensor`` (direction x mode: ranks, coordinate and im2col-offset
  counts, multicast, gating feature) from which :mod:`nvatom.ptx.tma_emit` spells;
* :data:`REDUCE_TYPES`, the element types each reduction is defined on (PTX ISA
  "cp.reduce.async.bulk.tensor", corrected by the GPU for INT64 bitwise reductions);
* the atoms ``atom.non_exec_tiled_tma_load/store/reduce`` (:class:`NonExecTmaAtom`) and
  ``atom.make_exec_tma`` (:class:`ExecTmaAtom`: mbarrier, :class:`CacheMode`, CTA mask);
* the descriptor-mutation rule (:func:`tma_update`): base pointer, dimension extents and
  non-leading strides only, as ``tensormap.replace.tile.{global_address, global_dim,
  global_stride}`` (PTX ISA "tensormap.replace").
"""

from __future__ import annotations

import dataclasses
import enum
from dataclasses import dataclass
from typing import Any

from nvatom import diagnostics as D
from nvatom.arch import Target, Tier, feature, target
from nvatom.atoms.copy import CopyContract
from nvatom.atoms.interfaces import (
    AsyncCopyAtom,
    AtomVerificationError,
    CopyAtom,
    PrefetchAtom,
    TmaAtom,
)
from nvatom.atoms.records import atom_record
from nvatom.layout import ComposedLayout, Layout
from nvatom.layout.swizzle import Swizzle
from nvatom.tables.swizzles import SMEM_SWIZZLES, smem_swizzle_of

# -- the partition verifier's diagnostics (the spec's TMA chapter), byte for byte; values follow the
#    "got " prefixes, joined as "A, B, and C"
# The diagnostics live in the catalogue (nvatom.diagnostics).
TMA_INVALID_OPERAND_TYPES = D.TMA_INVALID_OPERAND_TYPES
TMA_INVALID_SMEM_LAYOUT_TYPE = D.TMA_INVALID_SMEM_LAYOUT_TYPE
TMA_UNSUPPORTED_GMEM_LAYOUT = D.TMA_UNSUPPORTED_GMEM_LAYOUT
TMA_INTEGER_STRIDES = D.TMA_INTEGER_STRIDES
TMA_SMEM_SWIZZLE = D.TMA_SMEM_SWIZZLE
TMA_STATIC_SMEM_VMAP = D.TMA_STATIC_SMEM_VMAP
TMA_SHAPE_EQUIVALENCE = D.TMA_SHAPE_EQUIVALENCE
TMA_G_BASIS = D.TMA_G_BASIS
TMA_INVALID_TMA_LAYOUT = D.TMA_INVALID_TMA_LAYOUT
TMA_TENSOR_TYPE = D.TMA_TENSOR_TYPE
TMA_MISSING_NUM_MULTICAST = D.TMA_MISSING_NUM_MULTICAST
TMA_NUM_MULTICAST_OF = D.TMA_NUM_MULTICAST_OF

__all__ = [
    "PARTITION_CHECKS",
    "REDUCE_TYPES",
    "SWIZZLE_BYTES",
    "TENSORMAP_FIELDS",
    "TENSORMAP_SPACES",
    "TMA_INSTRS",
    "CacheMode",
    "E",
    "ExecTmaAtom",
    "ExecTmaLoadAtom",
    "LayoutType",
    "MBarrier",
    "NonExecTmaAtom",
    "PrefetchTmaDesc",
    "TmaAtomBody",
    "TmaCopyUse",
    "TmaFlags",
    "TmaInstr",
    "TmaKind",
    "TmaLoadMode",
    "TmaPartitionResult",
    "TmaPrefetchUse",
    "TmaReduceKind",
    "TmaStoreMode",
    "TmaTensorType",
    "TmaUpdate",
    "TmaUpdateKind",
    "check_reduce_type",
    "make_exec_tma",
    "non_exec_tiled_tma_load",
    "non_exec_tiled_tma_reduce",
    "non_exec_tiled_tma_store",
    "partition_instr",
    "partition_ptx_mode",
    "ptx_qualifiers",
    "reduce_op",
    "tma_instr",
    "tma_update",
    "type_text",
    "verify_tma_partition",
]


class TmaLoadMode(enum.IntEnum):
    TMA_LOAD_NO_MULTICAST = 0  # real: .tile
    TMA_LOAD_TWO_CTA = 1  # real: .tile with .cta_group::2 (sm_100a), not a mode
    TMA_LOAD_W_MULTICAST = 2  # real: .im2col::w (not multicast)
    TMA_LOAD_W128_MULTICAST = 3  # real: .im2col::w::128 (not multicast)
    # ours, not the specification's (docs/spec-deviations.md#tma-mode-enums): the real PTX
    # modes no spec value names
    TMA_LOAD_IM2COL = 4  # real: .im2col (rank - 2 16-bit offsets; sm_90)
    TMA_LOAD_GATHER4 = 5  # real: .tile::gather4 (2-d map, four rows; sm_100a family)


class TmaStoreMode(enum.IntEnum):
    TMA_STORE_TILED = 0  # real: .tile
    TMA_STORE_IM2COL = 1  # real: .im2col_no_offs (ptxas: sm_90 too)
    TMA_STORE_IM2COL_W = 2  # not a PTX store mode
    TMA_STORE_IM2COL_W128 = 3  # not a PTX store mode
    # ours (docs/spec-deviations.md#tma-mode-enums)
    TMA_STORE_SCATTER4 = 4  # real: .tile::scatter4 (2-d map, four rows; sm_100a family)


class TmaReduceKind(enum.IntEnum):
    TMA_REDUCE_ADD = 0
    TMA_REDUCE_MIN = 1
    TMA_REDUCE_MAX = 2
    TMA_REDUCE_INC = 3
    TMA_REDUCE_DEC = 4
    TMA_REDUCE_AND = 5
    TMA_REDUCE_OR = 6
    TMA_REDUCE_XOR = 7


class TmaKind(enum.Enum):
    LOAD = "tma_load"
    STORE = "tma_store"
    REDUCE = "tma_reduce"


_MODE_ENUM = {TmaKind.LOAD: TmaLoadMode, TmaKind.STORE: TmaStoreMode,
              TmaKind.REDUCE: TmaReduceKind}

_LOAD_PTX: dict[TmaLoadMode, tuple[str, ...]] = {
    TmaLoadMode.TMA_LOAD_NO_MULTICAST: (".tile",),
    TmaLoadMode.TMA_LOAD_TWO_CTA: (".tile", ".cta_group::2"),
    TmaLoadMode.TMA_LOAD_W_MULTICAST: (".im2col::w",),
    TmaLoadMode.TMA_LOAD_W128_MULTICAST: (".im2col::w::128",),
    TmaLoadMode.TMA_LOAD_IM2COL: (".im2col",),
    TmaLoadMode.TMA_LOAD_GATHER4: (".tile::gather4",),
}
_STORE_PTX: dict[TmaStoreMode, tuple[str, ...] | None] = {
    TmaStoreMode.TMA_STORE_TILED: (".tile",),
    TmaStoreMode.TMA_STORE_IM2COL: (".im2col_no_offs",),
    TmaStoreMode.TMA_STORE_IM2COL_W: None,
    TmaStoreMode.TMA_STORE_IM2COL_W128: None,
    TmaStoreMode.TMA_STORE_SCATTER4: (".tile::scatter4",),
}
#: the real PTX modes that no spec enum value names (docs/spec-deviations.md, "TMA lowering");
#: nvatom names them with its own values after the specification's (TMA_LOAD_IM2COL = 4,
#: TMA_LOAD_GATHER4 = 5, TMA_STORE_SCATTER4 = 4)
UNNAMED_LOAD_MODES = (".tile::gather4", ".im2col")
UNNAMED_STORE_MODES = (".tile::scatter4",)
#: the specification's own enum values (the rest are nvatom's extension)
SPEC_LOAD_MODES = tuple(TmaLoadMode)[:4]
SPEC_STORE_MODES = tuple(TmaStoreMode)[:4]
#: the four-row modes: a 2-d map whose box is one row; the tile holds four rows
FOUR_ROW_MODES = (TmaLoadMode.TMA_LOAD_GATHER4, TmaStoreMode.TMA_STORE_SCATTER4)


def ptx_qualifiers(mode: TmaLoadMode | TmaStoreMode | TmaReduceKind) -> tuple[str, ...] | None:
    """The real PTX qualifiers of a spec mode; ``None`` where the spec's mode is not PTX.

    A reduce kind gives its ``.OP`` (``cp.reduce.async.bulk.tensor….OP.tile.bulk_group``).
    """
    if isinstance(mode, TmaLoadMode):
        return _LOAD_PTX[mode]
    if isinstance(mode, TmaStoreMode):
        return _STORE_PTX[mode]
    if isinstance(mode, TmaReduceKind):
        return ("." + mode.name.removeprefix("TMA_REDUCE_").lower(),)
    raise TypeError(f"not a TMA mode: {mode!r}")


class TmaFlags(enum.IntFlag):
    """The 16-bit flags word (the spec's TMA chapter); bit positions are a software contract."""

    MULTICAST = 1 << 0
    IM2COL = 1 << 1
    IM2COL_W = 1 << 2
    IM2COL_W128 = 1 << 3
    TWO_CTA = 1 << 4
    SPARSE = 1 << 5
    STATIC_SMEM = 1 << 6
    STATIC_VMAP = 1 << 7
    GMEM_INT_STRIDE = 1 << 8
    SMEM_INT_STRIDE = 1 << 9
    SHAPE_EQUIV = 1 << 10
    G_BASIS_OK = 1 << 11
    S2T_DESCRIPTOR = 1 << 12
    PREFETCH_ELIGIBLE = 1 << 13
    # bits 14 and 15 are reserved


#: bits 6-11: the predicates the partition verifier ran (steps 4-8), folded into the word so
#: that the executable-atom builder (:func:`make_exec_tma`) reads them instead of re-running
#: them (the spec: "lets the executable-atom builder skip the equivalent predicates")
PARTITION_CHECKS = (TmaFlags.STATIC_SMEM | TmaFlags.STATIC_VMAP | TmaFlags.GMEM_INT_STRIDE
                    | TmaFlags.SMEM_INT_STRIDE | TmaFlags.SHAPE_EQUIV | TmaFlags.G_BASIS_OK)


# -- layout types with dynamic and scaled-basis elements
@dataclass(frozen=True)
class E:
    """A scaled-basis stride element ``scale@mode`` (CuTe's ``ScaledBasis``): not an integer."""

    mode: int
    scale: int = 1

    def __str__(self) -> str:
        return f"{self.scale}@{self.mode}"


@dataclass(frozen=True)
class LayoutType:
    """A ``!cute.layout`` type whose elements may be ints, dynamic ints (names) or :class:`E`.

    ``shape``/``stride`` of ``None`` are unknown and print as ``...``.
    """

    shape: Any = None
    stride: Any = None

    @property
    def rank(self) -> int | None:
        if self.shape is None:
            return None
        return len(self.shape) if isinstance(self.shape, tuple) else 1


def _tup(x: Any) -> str:
    if isinstance(x, tuple):
        return "(" + ",".join(_tup(v) for v in x) + ")"
    return str(x)


def type_text(x: Any) -> str:
    """How the verifier prints an operand type."""
    if isinstance(x, LayoutType):
        if x.shape is None:
            return "!cute.layout<...>"
        stride = "..." if x.stride is None else _tup(x.stride)
        sep = "," if x.stride is None else ":"
        return f"!cute.layout<{_tup(x.shape)}{sep}{stride}>"
    if isinstance(x, Layout):
        return f"!cute.layout<{x}>"
    if isinstance(x, ComposedLayout):
        return f"!cute.composed_layout<{x}>"
    if isinstance(x, Swizzle):
        return f"!cute.swizzle<{x}>"
    return repr(x)


def _got(*xs: Any) -> str:
    t = [type_text(x) for x in xs]
    return t[0] if len(t) == 1 else ", ".join(t[:-1]) + ", and " + t[-1]


def _leaves(x: Any) -> list[Any]:
    if isinstance(x, tuple):
        return [v for e in x for v in _leaves(e)]
    return [x]


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _rank(x: Any) -> int | None:
    if isinstance(x, (Layout, ComposedLayout, LayoutType)):
        return x.rank
    return None


def _shape_stride(x: Any) -> tuple[Any, Any]:
    """Shape and stride of a layout type (a composed layout's outer layout)."""
    if isinstance(x, ComposedLayout):
        x = x.outer
    return x.shape, x.stride


def _static(x: Any) -> bool:
    if isinstance(x, (Layout, ComposedLayout)):
        return True
    if x.shape is None or x.stride is None:
        return False
    return all(_is_int(v) or isinstance(v, E) for v in _leaves((x.shape, x.stride)))


def _mode_sizes(shape: Any) -> tuple[Any, ...]:
    modes = shape if isinstance(shape, tuple) else (shape,)
    out = []
    for m in modes:
        n: Any = 1
        for v in _leaves(m):
            n = n * v if _is_int(v) and _is_int(n) else None
        out.append(n)
    return tuple(out)


def _size(x: Any) -> int:
    n = 1
    for v in _mode_sizes(_shape_stride(x)[0]):
        n *= v
    return n


# -- the swizzles the TMA unit can write: Sw<B,4,3>, B = 0 (none), 1 (32B), 2 (64B), 3 (128B)
#: Swizzle bits B -> the span in bytes (None: no swizzle), read off the one swizzle table.
SWIZZLE_BYTES: dict[int, int | None] = {s.swizzle.bits: s.nbytes or None for s in SMEM_SWIZZLES}
# the result record's swizzle_mode (the specification's TMA chapter): 0 none, 2 128B, 3 32B/64B
_SWIZZLE_FIELD = {0: 0, 1: 3, 2: 3, 3: 2}
# element widths a tensor map can carry (8/16/32/64; 4 and 6 in sm_100's packed types)
_ELEMENT_BITS = (4, 6, 8, 16, 32, 64)
_MAX_BOX = 256
#: a CTA mask is 16 bits: at most 16 CTAs (a non-portable cluster size) receive a multicast
MAX_MULTICAST = 16
# the specification's step-11 pairing: modes 0 and 2 are "non-multicast", 1 and 3 multicast
# (nvatom's own modes im2col and gather4 take the non-multicast rule: a count is optional)
_NON_MULTICAST_LOAD = (TmaLoadMode.TMA_LOAD_NO_MULTICAST, TmaLoadMode.TMA_LOAD_W_MULTICAST,
                       TmaLoadMode.TMA_LOAD_IM2COL, TmaLoadMode.TMA_LOAD_GATHER4)


@dataclass(frozen=True)
class TmaTensorType:
    """The TMA tensor type: descriptor rank, element width, box and G-basis per GMEM mode."""

    kind: TmaKind
    mode: TmaLoadMode | TmaStoreMode | TmaReduceKind
    element_bits: int
    box: tuple[int, ...]


@dataclass(frozen=True)
class TmaAtomBody:
    """The non-exec atom body the executable-atom builder binds."""

    kind: TmaKind
    mode: TmaLoadMode | TmaStoreMode | TmaReduceKind
    smem: Any
    gmem: Any
    cta_v_map: Any
    num_multicast: int


@dataclass(frozen=True)
class TmaPartitionResult:
    """The specification's 24-byte record, one per partitioned tile (fields at +0x00 … +0x10)."""

    tma_tensor_type: TmaTensorType  # +0x00
    tile_element_count: int  # +0x08, uint32: size(smem) * num_multicast
    flags: TmaFlags  # +0x0C, uint16
    swizzle_mode: int  # +0x0E, uint8: 0 none, 2 128B, 3 32B/64B
    rank: int  # +0x0F, uint8: descriptor rank 1..5
    non_exec_atom_body: TmaAtomBody  # +0x10

    def has(self, flag: TmaFlags) -> bool:
        """Is every bit of ``flag`` set in the flags word?"""
        return self.flags & flag == flag

    def with_flags(self, flag: TmaFlags) -> TmaPartitionResult:
        """The record with ``flag``'s bits added (the IR sets SPARSE and S2T_DESCRIPTOR from
        the uses of a load's destination: ``nvatom.ir.ops_tma.derive_tma_flags``)."""
        return dataclasses.replace(self, flags=TmaFlags(self.flags | flag))


def partition_ptx_mode(r: TmaPartitionResult) -> str:
    """The PTX mode qualifier of a partitioned tile's transfers (``.tile``, ``.im2col::w``,
    ...; reductions are ``.tile``): a fact of the mode alone, not of the element width."""
    mode = r.tma_tensor_type.mode
    q = ptx_qualifiers(mode)
    if q is None or isinstance(mode, TmaReduceKind):
        return ".tile"
    return q[0]


def partition_instr(r: TmaPartitionResult) -> TmaInstr:
    """The tensor-copy form (:data:`TMA_INSTRS`) a partitioned tile's transfers issue."""
    return tma_instr(_DIRECTION[r.tma_tensor_type.kind], partition_ptx_mode(r))


def _fail(msg: str) -> AtomVerificationError:
    return AtomVerificationError(msg)


def _g_basis(gmem_rank: int, vmap: Any) -> tuple[int, ...] | None:
    """Box extent per GMEM mode from the V-map's scaled bases; None if it is no basis map."""
    shape, stride = _shape_stride(vmap)
    box = [1] * gmem_rank
    for s, d in zip(_leaves(shape), _leaves(stride), strict=True):
        if s == 1:
            continue
        if not isinstance(d, E) or not 0 <= d.mode < gmem_rank or d.scale < 1:
            return None
        box[d.mode] += (s - 1) * d.scale
    return tuple(box)


def verify_tma_partition(
    kind: TmaKind,
    mode: TmaLoadMode | TmaStoreMode | TmaReduceKind,
    smem: Any,
    gmem: Any,
    cta_v_map: Any,
    *,
    element_bits: int = 16,
    num_multicast: int | None = None,
    sparse: bool = False,
    s2t_descriptor: bool = False,
) -> TmaPartitionResult:
    """The specification's eleven-step partition verifier, in the spec's order.

    Raises :class:`AtomVerificationError` with the step's diagnostic; ``TypeError`` when
    ``mode`` is not of ``kind``'s enum (a caller bug, not a verifier outcome).
    """
    if not isinstance(mode, _MODE_ENUM[kind]):
        raise TypeError(f"{kind.value} takes a {_MODE_ENUM[kind].__name__}, got {mode!r}")
    layoutish = (Layout, ComposedLayout, LayoutType, Swizzle)
    # 1. type gate on the trio: layout-family types, SMEM/GMEM rank 1..5 (the TMA cap)
    ranks_ok = all(r is None or 1 <= r <= 5 for r in (_rank(smem), _rank(gmem)))
    if not all(isinstance(x, layoutish) for x in (smem, gmem, cta_v_map)) or not ranks_ok:
        raise _fail(TMA_INVALID_OPERAND_TYPES + _got(smem, gmem, cta_v_map))
    # 2. SMEM layout kind
    if not isinstance(smem, (Layout, ComposedLayout, LayoutType)):
        raise _fail(TMA_INVALID_SMEM_LAYOUT_TYPE + _got(smem))
    # 3. GMEM layout kind: a plain layout
    if not isinstance(gmem, (Layout, LayoutType)) or gmem.shape is None:
        raise _fail(TMA_UNSUPPORTED_GMEM_LAYOUT + _got(gmem))
    # 4. integer strides (static or dynamic; no scaled bases); static GMEM strides other
    #    than the unit one must be multiples of 16 bytes
    g_stride = _leaves(gmem.stride) if gmem.stride is not None else []
    s_stride = _leaves(_shape_stride(smem)[1]) if _shape_stride(smem)[1] is not None else []
    gmem_ok = all(
        isinstance(d, str) or (_is_int(d) and (d in (0, 1) or d * element_bits % 128 == 0))
        for d in g_stride
    )
    smem_ok = all(isinstance(d, str) or _is_int(d) for d in s_stride)
    if not (gmem_ok and smem_ok):
        raise _fail(TMA_INTEGER_STRIDES + _got(gmem, smem))
    # 5. SMEM is a swizzle layout the TMA unit writes: Sw<B,4,3> on byte offsets, or the
    #    same swizzle on element offsets as nvatom.atoms.smem.smem_layout builds it
    #    (Sw<3,3,3> for SW128 of 16-bit elements); either way B picks the mode
    sw = smem.inner if isinstance(smem, ComposedLayout) else None
    byte_form = isinstance(sw, Swizzle) and (sw.base, sw.shift) == (4, 3)
    elem_form = (isinstance(sw, Swizzle) and _is_int(element_bits) and element_bits >= 8
                 and element_bits & (element_bits - 1) == 0
                 and smem_swizzle_of(smem, element_bits) is not None)
    if not ((byte_form or elem_form) and sw.bits in SWIZZLE_BYTES):  # type: ignore[union-attr]
        raise _fail(TMA_SMEM_SWIZZLE + _got(smem))
    # 6. SMEM layout and CTA V-map static (a ComposedLayout is always static)
    if not (_static(smem) and isinstance(cta_v_map, (Layout, LayoutType))
            and _static(cta_v_map)):
        raise _fail(TMA_STATIC_SMEM_VMAP + _got(smem, cta_v_map))
    # 7. top-level shape equivalence
    if _mode_sizes(smem.shape) != _mode_sizes(cta_v_map.shape):
        raise _fail(TMA_SHAPE_EQUIVALENCE + _got(smem, cta_v_map))
    # 8. G-basis: each V-map leaf walks one GMEM mode by a scaled basis
    rank = gmem.rank
    box = _g_basis(rank, cta_v_map)
    if box is None:
        raise _fail(TMA_G_BASIS + _got(gmem, cta_v_map))
    # 9. the TMA layout: box <= 256 per mode, inner box a multiple of 16 bytes and within
    #    the swizzle span, unit leading GMEM stride, im2col needs rank >= 3
    tma_layout = LayoutType(box, tuple(E(k) for k in range(rank)))
    lead = _leaves(gmem.stride)[0] if gmem.stride is not None else None
    inner_bits = box[0] * element_bits
    span = SWIZZLE_BYTES[sw.bits]
    im2col = (kind is TmaKind.LOAD and mode in (TmaLoadMode.TMA_LOAD_W_MULTICAST,
                                                TmaLoadMode.TMA_LOAD_W128_MULTICAST,
                                                TmaLoadMode.TMA_LOAD_IM2COL)) or (
        kind is TmaKind.STORE and mode in (TmaStoreMode.TMA_STORE_IM2COL,
                                          TmaStoreMode.TMA_STORE_IM2COL_W,
                                          TmaStoreMode.TMA_STORE_IM2COL_W128))
    # gather4/scatter4 (nvatom's modes): a 2-d map; the tile is four rows of the box's row
    four_rows = any(mode is m for m in FOUR_ROW_MODES)  # identity: the enums' ints overlap
    if (max(box) > _MAX_BOX or inner_bits % 128
            or (span is not None and inner_bits > span * 8)
            or lead not in (1, None) or isinstance(lead, str)
            or (im2col and rank < 3) or (four_rows and (rank != 2 or box[1] != 4))):
        raise _fail(TMA_INVALID_TMA_LAYOUT + _got(tma_layout))
    # 10. the TMA tensor type
    mc = 1 if num_multicast is None or kind is not TmaKind.LOAD else num_multicast
    count = _size(smem) * max(mc, 1)
    if (element_bits not in _ELEMENT_BITS or count >= 1 << 32
            or (kind is TmaKind.STORE and _STORE_PTX[mode] is None)):  # type: ignore[index]
        raise _fail(TMA_TENSOR_TYPE)
    ty = TmaTensorType(kind, mode, element_bits, box)
    # 11. multicast count (load only).  Settled against ptxas and the GPU
    # (docs/spec-deviations.md, "TMA step 11"): multicast is the `.multicast::cluster`
    # modifier, orthogonal to the load mode, and a `.tile` load multicast to clusters of 2 and
    # 4 delivers the tile to every CTA (tests/gpu/test_tma_gpu.py).  So modes 0 and 2 keep
    # the spec's default of 1 and its "got num_multicast of N" diagnostic for a count outside
    # the cluster's 1..16 CTAs, but accept a real fan-out 2..16; modes 1 and 3 still need an
    # explicit count ("missing or invalid num_multicast ...").
    if kind is TmaKind.LOAD:
        if mode in _NON_MULTICAST_LOAD:
            if num_multicast is not None and not (
                    _is_int(num_multicast) and 1 <= num_multicast <= MAX_MULTICAST):
                raise _fail(TMA_NUM_MULTICAST_OF + str(num_multicast))
        elif not (_is_int(num_multicast)
                  and 1 <= num_multicast <= MAX_MULTICAST):  # type: ignore[operator]
            raise _fail(TMA_MISSING_NUM_MULTICAST)
    flags = PARTITION_CHECKS
    if mc > 1:
        flags |= TmaFlags.MULTICAST
    if im2col:
        flags |= TmaFlags.IM2COL
    if mode in (TmaLoadMode.TMA_LOAD_W_MULTICAST,) and kind is TmaKind.LOAD:
        flags |= TmaFlags.IM2COL_W
    if mode in (TmaLoadMode.TMA_LOAD_W128_MULTICAST,) and kind is TmaKind.LOAD:
        flags |= TmaFlags.IM2COL_W128
    if kind is TmaKind.LOAD and mode is TmaLoadMode.TMA_LOAD_TWO_CTA:
        flags |= TmaFlags.TWO_CTA
    if sparse:
        flags |= TmaFlags.SPARSE
    if s2t_descriptor:
        flags |= TmaFlags.S2T_DESCRIPTOR
    if _static(gmem):
        flags |= TmaFlags.PREFETCH_ELIGIBLE
    body = TmaAtomBody(kind, mode, smem, gmem, cta_v_map, mc)
    return TmaPartitionResult(ty, count, flags, _SWIZZLE_FIELD[sw.bits], rank, body)


# =========================================================================== instruction table
@dataclass(frozen=True)
class TmaInstr:
    """One PTX tensor-copy form: direction x mode (docs/spec-deviations.md, "TMA lowering";
    assembled in
    tests/ptx/test_tma_emit.py on every target of its feature, rejected elsewhere).

    ``ranks`` are the legal ``.Nd``; ``coords`` the number of 32-bit coordinates for a rank
    (``None``: the rank itself); ``offsets`` the number of 16-bit im2col operands for a rank;
    ``multicast`` whether ``.multicast::cluster`` may follow; ``feature`` the
    :mod:`nvatom.arch` feature gating it (the sm_100-family modes of ptxas 13.0 follow
    exactly the ``tcgen05`` rule: sm_100a/f, sm_103a/f, sm_110a/f, not sm_100 or sm_12x).
    """

    direction: str  # "load", "store", "reduce"
    mode: str  # PTX qualifier: ".tile", ".im2col", ...
    ranks: tuple[int, ...]
    feature: str
    multicast: bool = False
    coords_of: tuple[tuple[int, int], ...] = ()  # (rank, coordinates) overrides
    offsets_of: str = ""  # "rank-2" (im2col), "2" (im2col::w wHalo, wOffset), "" none

    def coords(self, rank: int) -> int:
        return dict(self.coords_of).get(rank, rank)

    def offsets(self, rank: int) -> int:
        return {"": 0, "rank-2": rank - 2, "2": 2}[self.offsets_of]

    def available_on(self, t: Any) -> bool:
        return target(t).supports(self.feature)


_R15, _R35 = (1, 2, 3, 4, 5), (3, 4, 5)
#: every tensor-copy form of cp.async.bulk.tensor / cp.reduce.async.bulk.tensor
TMA_INSTRS: dict[tuple[str, str], TmaInstr] = {
    (i.direction, i.mode): i
    for i in (
        TmaInstr("load", ".tile", _R15, "tma", multicast=True),
        TmaInstr("load", ".im2col", _R35, "tma", multicast=True, offsets_of="rank-2"),
        TmaInstr("load", ".im2col::w", _R35, "tcgen05", multicast=True, offsets_of="2"),
        TmaInstr("load", ".im2col::w::128", _R35, "tcgen05", multicast=True, offsets_of="2"),
        TmaInstr("load", ".tile::gather4", (2,), "tcgen05", multicast=True,
                 coords_of=((2, 5),)),
        TmaInstr("store", ".tile", _R15, "tma"),
        TmaInstr("store", ".im2col_no_offs", _R35, "tma"),
        TmaInstr("store", ".tile::scatter4", (2,), "tcgen05", coords_of=((2, 5),)),
        TmaInstr("reduce", ".tile", _R15, "tma"),
        TmaInstr("reduce", ".im2col_no_offs", _R35, "tma"),
    )
}
#: ``.cta_group::2`` (the spec's TWO_CTA load) has the same family rule as the sm_100 modes
CTA_GROUP_FEATURE = "tcgen05"


def tma_instr(direction: str, mode: str) -> TmaInstr:
    try:
        return TMA_INSTRS[(direction, mode)]
    except KeyError:
        modes = ", ".join(m for d, m in TMA_INSTRS if d == direction) or "none"
        raise AtomVerificationError(
            f"TMA {direction} has no mode '{mode}' (PTX modes: {modes})"
        ) from None


#: PTX ISA "cp.reduce.async.bulk.tensor": the element types (of the tensor map) each
#: reduction is defined on.  The ISA's .b32/.b64 for and/or/xor: .b32 takes an INT32 or UINT32
#: map, but .b64 only UINT64 - with an INT64 map and/or/xor stop the kernel with
#: cudaErrorIllegalInstruction on an H100 (min/max take INT64 fine; tests/gpu/test_tma_gpu.py).
REDUCE_TYPES: dict[TmaReduceKind, tuple[str, ...]] = {
    TmaReduceKind.TMA_REDUCE_ADD: ("uint32", "int32", "uint64", "float32", "float16",
                                   "bfloat16"),
    TmaReduceKind.TMA_REDUCE_MIN: ("uint32", "int32", "uint64", "int64", "float16", "bfloat16"),
    TmaReduceKind.TMA_REDUCE_MAX: ("uint32", "int32", "uint64", "int64", "float16", "bfloat16"),
    TmaReduceKind.TMA_REDUCE_INC: ("uint32",),
    TmaReduceKind.TMA_REDUCE_DEC: ("uint32",),
    TmaReduceKind.TMA_REDUCE_AND: ("uint32", "int32", "uint64"),
    TmaReduceKind.TMA_REDUCE_OR: ("uint32", "int32", "uint64"),
    TmaReduceKind.TMA_REDUCE_XOR: ("uint32", "int32", "uint64"),
}


# PTX element-type spellings -> the tensor map's CUtensorMapDataType names
_PTX_TO_MAP_TYPE = {"u32": "uint32", "s32": "int32", "u64": "uint64", "s64": "int64",
                    "f32": "float32", "f16": "float16", "bf16": "bfloat16", "f64": "float64",
                    "u8": "uint8", "u16": "uint16"}


def reduce_op(kind: TmaReduceKind | str) -> TmaReduceKind:
    """A reduce kind from its enum, its PTX name ("add") or its spec name."""
    if isinstance(kind, TmaReduceKind):
        return kind
    key = str(kind).lower().removeprefix(".").removeprefix("tma_reduce_")
    for k in TmaReduceKind:
        if k.name.removeprefix("TMA_REDUCE_").lower() == key:
            return k
    names = ", ".join(k.name.removeprefix("TMA_REDUCE_").lower() for k in TmaReduceKind)
    raise AtomVerificationError(f"TMA reduction '{kind}' is not one of {names}")


def check_reduce_type(kind: TmaReduceKind | str, data_type: Any) -> None:
    """Raise unless the reduction is defined on the tensor map's element type: a
    ``CUtensorMapDataType`` name ("uint32", a :class:`~nvatom.descriptors.tma.TmaDataType`)
    or a PTX type ("u32")."""
    k = reduce_op(kind)
    name = str(getattr(data_type, "name", data_type)).lower()
    dt = _PTX_TO_MAP_TYPE.get(name, name)
    legal = REDUCE_TYPES[k]
    if dt not in legal:
        op = k.name.removeprefix("TMA_REDUCE_").lower()
        raise AtomVerificationError(D.TMA_REDUCE_TYPE.format(op, dt, ", ".join(legal)))


# =========================================================================== atoms
_NON_EXEC_MNEMONIC = {TmaKind.LOAD: "atom.non_exec_tiled_tma_load",
                      TmaKind.STORE: "atom.non_exec_tiled_tma_store",
                      TmaKind.REDUCE: "atom.non_exec_tiled_tma_reduce"}


_DIRECTION = {TmaKind.LOAD: "load", TmaKind.STORE: "store", TmaKind.REDUCE: "reduce"}
#: where the shared-memory side of each transfer sits: (source, destination)
_SPACES = {TmaKind.LOAD: ("gmem", "smem"), TmaKind.STORE: ("smem", "gmem"),
           TmaKind.REDUCE: ("smem", "gmem")}
#: where a tensor map may live for ``prefetch[.param|.const].tensormap`` (PTX ISA
#: "prefetch"): a kernel parameter, constant memory, or a generic address (global memory)
TENSORMAP_SPACES = ("param", "const", "global")


@dataclass(frozen=True)
class TmaCopyUse:
    """What the surrounding code feeds an executable TMA atom (the spec's ``lower_tma_load`` /
    ``lower_tma_store``): the memory spaces of source and destination (the tensor map's side
    is ``gmem``) and the number of tensor coordinates (``None``: not checked)."""

    src: str
    dst: str
    coords: int | None = None


@dataclass(frozen=True)
class TmaPrefetchUse:
    """A descriptor prefetch: the state space the tensor map lives in (:data:`TENSORMAP_SPACES`)."""

    space: str = "param"


def _check_target(name: str, mnemonic: str, features: tuple[str, ...], t: Target) -> None:
    """The registry record's rule, then each feature the transfer's PTX needs."""
    why = atom_record(mnemonic).rejection(t, name)
    if why is not None:
        raise AtomVerificationError(why)
    for f in features:
        if not feature(f).available_on(t):
            ff = feature(f)
            raise AtomVerificationError(
                f"atom '{name}' is not available on {t.name}: it needs {ff.description} "
                f"({ff.rule})")


def _check_prefetch(name: str, mnemonic: str, t: Any, use: Any) -> None:
    _check_target(name, mnemonic, ("tma",), target(t))
    if not isinstance(use, TmaPrefetchUse):
        raise AtomVerificationError(f"'{name}' verifies a TmaPrefetchUse, got {use!r}")
    if use.space not in TENSORMAP_SPACES:
        raise AtomVerificationError(
            f"'{name}' prefetches a tensor map in {', '.join(TENSORMAP_SPACES)} space, but got "
            f"{use.space}")


@dataclass(frozen=True)
class NonExecTmaAtom(TmaAtom):
    """A partition-verified TMA atom (``atom.non_exec_tiled_tma_*``), not yet bound to an
    mbarrier or a cache mode: the verifier's result plus what lowering needs.

    Registry interfaces (the specification's registry): ``TmaAtom`` only -- it is no copy atom until
    ``atom.make_exec_tma`` binds it, so the interface dispatcher does not verify it.
    """

    partition: TmaPartitionResult
    element_bits: int

    @property
    def kind(self) -> TmaKind:
        return self.partition.tma_tensor_type.kind

    @property
    def mode(self) -> TmaLoadMode | TmaStoreMode | TmaReduceKind:
        return self.partition.tma_tensor_type.mode

    @property
    def mnemonic(self) -> str:
        return _NON_EXEC_MNEMONIC[self.kind]

    @property
    def rank(self) -> int:
        return self.partition.rank

    @property
    def box(self) -> tuple[int, ...]:
        return self.partition.tma_tensor_type.box

    @property
    def num_multicast(self) -> int:
        return self.partition.non_exec_atom_body.num_multicast

    @property
    def flags(self) -> TmaFlags:
        """The partition's flags word (:class:`TmaFlags`)."""
        return self.partition.flags

    @property
    def sparse(self) -> bool:
        """The tile is sparse metadata (flags bit 5)."""
        return self.partition.has(TmaFlags.SPARSE)

    @property
    def s2t_descriptor(self) -> bool:
        """The tile is the shared-memory source of a ``tcgen05.cp`` (flags bit 12)."""
        return self.partition.has(TmaFlags.S2T_DESCRIPTOR)

    @property
    def tx_bytes(self) -> int:
        """Bytes one transfer writes into one CTA's shared memory: what the barrier of each
        receiving CTA must expect (``mbarrier.arrive.expect_tx``)."""
        return _size(self.partition.non_exec_atom_body.smem) * self.element_bits // 8

    @property
    def ptx_mode(self) -> str:
        """The PTX mode qualifier (``.tile``, ``.im2col::w``, ...)."""
        return partition_ptx_mode(self.partition)

    @property
    def instr(self) -> TmaInstr:
        """The tensor-copy form this atom issues (:data:`TMA_INSTRS`)."""
        return partition_instr(self.partition)

    @property
    def features(self) -> tuple[str, ...]:
        """The :mod:`nvatom.arch` features its PTX needs (the mode's, and ``.cta_group::2``'s
        for the spec's TWO_CTA load)."""
        fs = [self.instr.feature]
        if self.partition.has(TmaFlags.TWO_CTA):  # the spec's TWO_CTA load: .cta_group::2
            fs.append(CTA_GROUP_FEATURE)
        return tuple(dict.fromkeys(fs))

    def available_on(self, t: Target | str) -> bool:
        tt = target(t)
        return all(feature(f).available_on(tt) for f in self.features)

    def contract(self) -> Any:
        """The spec's ``CopyAtomContract`` of the transfer: descriptor-driven, asynchronous;
        loads prefetch (``atom.tma_load`` is the registry's PrefetchAtom).  ``value_bits`` is
        what the one issuing thread moves: the whole box."""
        src, dst = _SPACES[self.kind]
        return CopyContract(Tier.SM90, (src,), (dst,), self.tx_bytes * 8, True,
                            uses_tma_descriptor=True,
                            supports_prefetch=self.kind is TmaKind.LOAD)


def non_exec_tiled_tma_load(mode: TmaLoadMode, smem: Any, gmem: Any, cta_v_map: Any, *,
                            element_bits: int = 16, num_multicast: int | None = None,
                            sparse: bool = False,
                            s2t_descriptor: bool = False) -> NonExecTmaAtom:
    """``atom.non_exec_tiled_tma_load``: run the partition verifier (steps 1-11).  ``sparse``:
    the tile is sparse metadata; ``s2t_descriptor``: it is the source of a ``tcgen05.cp``
    (flags bits 5 and 12)."""
    r = verify_tma_partition(TmaKind.LOAD, mode, smem, gmem, cta_v_map,
                             element_bits=element_bits, num_multicast=num_multicast,
                             sparse=sparse, s2t_descriptor=s2t_descriptor)
    return NonExecTmaAtom(r, element_bits)


def non_exec_tiled_tma_store(mode: TmaStoreMode, smem: Any, gmem: Any, cta_v_map: Any, *,
                             element_bits: int = 16) -> NonExecTmaAtom:
    """``atom.non_exec_tiled_tma_store`` (steps 1-10; a store never multicasts)."""
    r = verify_tma_partition(TmaKind.STORE, mode, smem, gmem, cta_v_map,
                             element_bits=element_bits)
    return NonExecTmaAtom(r, element_bits)


def non_exec_tiled_tma_reduce(kind: TmaReduceKind | str, smem: Any, gmem: Any, cta_v_map: Any,
                              *, element_bits: int = 16,
                              data_type: Any = None) -> NonExecTmaAtom:
    """``atom.non_exec_tiled_tma_reduce``; with ``data_type`` (the tensor map's element type)
    the reduction must be defined on it (:data:`REDUCE_TYPES`)."""
    k = reduce_op(kind)
    if data_type is not None:
        check_reduce_type(k, data_type)
    r = verify_tma_partition(TmaKind.REDUCE, k, smem, gmem, cta_v_map,
                             element_bits=element_bits)
    return NonExecTmaAtom(r, element_bits)


class CacheMode(enum.Enum):
    """The L2 eviction hint an executable TMA atom carries (``.L2::cache_hint`` with a policy
    from ``createpolicy.fractional.L2::<priority>``); NONE emits no hint."""

    NONE = ""
    EVICT_NORMAL = "evict_normal"
    EVICT_FIRST = "evict_first"
    EVICT_LAST = "evict_last"
    EVICT_UNCHANGED = "evict_unchanged"


@dataclass(frozen=True)
class MBarrier:
    """An mbarrier operand: where it lives (``smem`` for every TMA load) and its symbol."""

    symbol: str = "mbar"
    memory_space: str = "smem"
    offset: int = 0


@dataclass(frozen=True)
class ExecTmaAtom(CopyAtom, TmaAtom, AsyncCopyAtom):
    """``atom.make_exec_tma``'s result: a non-exec atom bound to runtime state.

    ``atom.tma_store`` / ``atom.tma_reduce`` (the specification: CopyAtom, TmaAtom, AsyncCopyAtom);
    loads are :class:`ExecTmaLoadAtom`, which adds PrefetchAtom.  :meth:`verify_instance`
    checks a :class:`TmaCopyUse` (our wording; the specification has no strings for these):
    the registry record and the mode's features on the target, the memory spaces
    (``gmem -> smem`` for a load, ``smem -> gmem`` otherwise: the specification's ``lower_tma_*``
    require the shared-memory side), and the coordinate count (the descriptor's rank).
    """

    atom: NonExecTmaAtom
    barrier: MBarrier | None
    cache_mode: CacheMode
    multicast_mask: int | None

    @property
    def mnemonic(self) -> str:
        return "atom." + self.atom.kind.value

    @property
    def name(self) -> str:
        return f"{self.mnemonic}<{self.atom.rank}d{self.atom.ptx_mode}>"

    @property
    def tx_bytes(self) -> int:
        return self.atom.tx_bytes

    @property
    def flags(self) -> TmaFlags:
        """The partition's flags word, echoed for the lowering and prefetch logic."""
        return self.atom.flags

    @property
    def sparse(self) -> bool:
        return self.atom.sparse

    @property
    def s2t_descriptor(self) -> bool:
        return self.atom.s2t_descriptor

    def available_on(self, t: Target | str) -> bool:
        return atom_record(self.mnemonic).allowed_on(t) and self.atom.available_on(t)

    def contract(self) -> Any:
        return self.atom.contract()

    def verify_instance(self, target_: Any, use: Any) -> None:
        t = target(target_)
        _check_target(self.name, self.mnemonic, self.atom.features, t)
        if not isinstance(use, TmaCopyUse):
            raise AtomVerificationError(f"'{self.name}' verifies a TmaCopyUse, got {use!r}")
        src, dst = _SPACES[self.atom.kind]
        if (use.src, use.dst) != (src, dst):
            raise AtomVerificationError(
                f"'{self.name}' copies {src} -> {dst}, but got src: {use.src}, dst: {use.dst}")
        want = self.atom.instr.coords(self.atom.rank)
        if use.coords is not None and use.coords != want:
            raise AtomVerificationError(
                f"'{self.name}' takes {want} tensor coordinates (descriptor rank "
                f"{self.atom.rank}), but got {use.coords}")


@dataclass(frozen=True)
class ExecTmaLoadAtom(ExecTmaAtom, PrefetchAtom):
    """``atom.tma_load``: also a PrefetchAtom (the spec: "the SM90+ TMA load atom is the only
    positive hit"): :meth:`verify_prefetch` checks a :class:`TmaPrefetchUse`."""

    def verify_prefetch(self, target_: Any, use: Any) -> None:
        _check_prefetch(self.name, self.mnemonic, target_, use)


@dataclass(frozen=True)
class PrefetchTmaDesc(PrefetchAtom):
    """``prefetch_tma_desc`` (the spec's TMA chapter): bring a tensor map into the descriptor cache
    before a
    transfer (``prefetch[.param|.const].tensormap``; PTX ISA "prefetch")."""

    mnemonic = "prefetch_tma_desc"

    @property
    def name(self) -> str:
        return self.mnemonic

    def available_on(self, t: Target | str) -> bool:
        return atom_record(self.mnemonic).allowed_on(t)

    def verify_prefetch(self, target_: Any, use: Any) -> None:
        _check_prefetch(self.name, self.mnemonic, target_, use)


def make_exec_tma(atom: NonExecTmaAtom, barrier: MBarrier | None = None,
                  cache_mode: CacheMode = CacheMode.NONE,
                  multicast_mask: int | None = None) -> ExecTmaAtom:
    """``atom.make_exec_tma``: bind an mbarrier (loads: required, in shared memory), a cache
    mode and, for a multicast load, the 16-bit CTA mask (its population must equal the
    atom's ``num_multicast``).  Stores and reductions complete through bulk groups: they
    take neither a barrier nor a mask."""
    if not isinstance(atom, NonExecTmaAtom):
        raise AtomVerificationError(
            f"make_exec_tma needs a verified non-exec TMA atom, got {type(atom).__name__}")
    if not isinstance(cache_mode, CacheMode):
        raise AtomVerificationError(f"cache mode {cache_mode!r} is not a CacheMode")
    # the flags word stands for the partition verifier's predicates (bits 6-11): the builder
    # reads them rather than re-running steps 4-8
    missing = TmaFlags(PARTITION_CHECKS & ~atom.partition.flags)
    if missing:
        raise AtomVerificationError(
            f"make_exec_tma needs a partition that passed the partition verifier; its flags "
            f"word {int(atom.partition.flags):#06x} lacks "
            + ", ".join(f.name.lower() for f in TmaFlags if f & missing))  # type: ignore
    if atom.kind is not TmaKind.LOAD and atom.partition.flags & (
            TmaFlags.MULTICAST | TmaFlags.TWO_CTA | TmaFlags.S2T_DESCRIPTOR):
        raise AtomVerificationError(
            f"a TMA {atom.kind.name.lower()} partition cannot carry load flags: "
            + ", ".join(f.name.lower() for f in (TmaFlags.MULTICAST, TmaFlags.TWO_CTA,
                                                  TmaFlags.S2T_DESCRIPTOR)
                        if f & atom.partition.flags))
    if atom.kind is TmaKind.LOAD:
        if barrier is None or barrier.memory_space != "smem":
            where = "none" if barrier is None else barrier.memory_space
            raise AtomVerificationError(
                f"a TMA load completes on an mbarrier in shared memory, got {where}")
        n = atom.num_multicast
        if multicast_mask is None:
            if atom.partition.has(TmaFlags.MULTICAST):
                raise AtomVerificationError(
                    f"the atom multicasts to {n} CTAs but no CTA mask was bound")
        elif not (_is_int(multicast_mask) and 0 < multicast_mask < 1 << MAX_MULTICAST
                  and multicast_mask.bit_count() == n):
            raise AtomVerificationError(
                f"CTA mask {multicast_mask!r} must be a 16-bit mask with {n} bits set "
                f"(num_multicast = {n})")
    else:
        if barrier is not None or multicast_mask is not None:
            raise AtomVerificationError(
                f"a TMA {atom.kind.name.lower()} completes through bulk groups and never "
                "multicasts: bind neither an mbarrier nor a CTA mask")
    cls = ExecTmaLoadAtom if atom.kind is TmaKind.LOAD else ExecTmaAtom
    return cls(atom, barrier, cache_mode, multicast_mask)


# =========================================================================== mutation
class TmaUpdateKind(enum.Enum):
    """The spec's three device-mutable descriptor fields and their ``tensormap.replace``
    field qualifier (PTX ISA "tensormap.replace")."""

    BASE_POINTER = "global_address"
    DIM = "global_dim"
    STRIDE = "global_stride"


# every field ``tensormap.replace`` can write (docs/spec-deviations.md, "TMA lowering"); only the
# first three are
#: device-mutable in the spec's contract, which nvatom keeps.
TENSORMAP_FIELDS = ("global_address", "global_dim", "global_stride", "rank", "box_dim",
                    "element_stride", "elemtype", "interleave_layout", "swizzle_mode",
                    "swizzle_atomicity", "fill_mode")
_UPDATE_ALIASES = {"base": TmaUpdateKind.BASE_POINTER, "base_pointer": TmaUpdateKind.BASE_POINTER,
                   "global_address": TmaUpdateKind.BASE_POINTER, "dim": TmaUpdateKind.DIM,
                   "global_dim": TmaUpdateKind.DIM, "stride": TmaUpdateKind.STRIDE,
                   "global_stride": TmaUpdateKind.STRIDE}


@dataclass(frozen=True)
class TmaUpdate:
    """One device-side descriptor update: ``axis`` is the tensor dimension (innermost 0) for
    DIM and STRIDE; ``value`` an address, extent or byte stride (or a register)."""

    kind: TmaUpdateKind
    axis: int | None
    value: Any

    @property
    def ptx_field(self) -> str:
        return self.kind.value

    @property
    def ordinal(self) -> int | None:
        """The ``ord`` immediate of ``tensormap.replace``: the dimension for global_dim; for
        global_stride the index among the map's ``rank - 1`` stored strides (axis - 1)."""
        if self.kind is TmaUpdateKind.DIM:
            return self.axis
        if self.kind is TmaUpdateKind.STRIDE:
            return None if self.axis is None else self.axis - 1
        return None


def tma_update(field: str | TmaUpdateKind, value: Any, axis: int | None = None, *,
               rank: int = 5) -> TmaUpdate:
    """Check a device-side descriptor update against the spec's mutation rule: only the base
    pointer, a dimension extent, or a non-leading stride; anything else fails with
    "TMA descriptor field is not device-mutable" (a rank, swizzle, element type, box,
    multicast count or mode change, and the implicit leading stride)."""
    kind = field if isinstance(field, TmaUpdateKind) else _UPDATE_ALIASES.get(str(field))
    if kind is None:
        raise AtomVerificationError(f"{D.TMA_FIELD_NOT_MUTABLE}: {field}")
    if kind is TmaUpdateKind.BASE_POINTER:
        if axis is not None:
            raise AtomVerificationError(f"the base pointer takes no axis, got axis {axis}")
        if _is_int(value) and value % 16:
            raise AtomVerificationError(f"base pointer {value:#x} is not 16-byte aligned")
        return TmaUpdate(kind, None, value)
    if not (_is_int(axis) and 0 <= axis < rank):  # type: ignore[operator]
        raise AtomVerificationError(
            f"{kind.value}: axis {axis!r} is not a dimension of a rank-{rank} map")
    if kind is TmaUpdateKind.STRIDE:
        if axis == 0:
            raise AtomVerificationError(f"{D.TMA_FIELD_NOT_MUTABLE}: leading stride")
        # 0 is a broadcast dimension: the driver encodes it (descriptors/tma.py) and the
        # GPU reads it (tests/gpu/test_tma_stride0_gpu.py); the field is the same on the device.
        if _is_int(value) and (value % 16 or not 0 <= value < 1 << 40):
            raise AtomVerificationError(
                f"global stride {value} bytes is not a multiple of 16 in 0..2^40 - 16")
    if kind is TmaUpdateKind.DIM and _is_int(value) and not 1 <= value <= 1 << 32:
        raise AtomVerificationError(f"global dim {value} is out of range (1..2^32)")
    return TmaUpdate(kind, axis, value)
