"""An executable CPU model of SM100 ``tcgen05.mma`` and ``tcgen05.ld/st``.

What it models, and from which text (none of it reuses nvatom's encoders; it reads the words
the way the PTX ISA says the hardware does):

* **Shared memory** (:class:`Smem`): a byte array indexed by the 18-bit shared-window address.
* **The shared-memory descriptor as read** (:func:`read_matrix`): the PTX ISA "Canonical
  Layouts" of the descriptor's swizzle mode and major-ness (the one table,
  :data:`nvatom.atoms.smem.UMMA_SMEM_CANONICAL`), instantiated with LBO, SBO and the start
  address decoded straight from the 64-bit word, then the mode's swizzle applied to the
  *absolute* byte address: bits [M, M+B) ^= bits [M+S, M+S+B) of ``Sw<B,M,S>`` (16-byte units
  with B = 1, 2, 3 for 32/64/128-byte swizzling; 32-byte units, B = 2, for the 128-byte
  swizzle with 32-byte atomicity, layout type 1).  K-major (row r, K byte c)::

      INTERLEAVE  start + (r%8)*16 + (r//8)*SBO + (c//16)*LBO + c%16
      SWxx (W B)  start + (r%8)*W  + (r//8)*SBO + c                      (c < W)

  MN-major (MN element m, K row k, T elements per 16 bytes)::

      INTERLEAVE  start + m%T + (m//T)*SBO + (k%8)*T + (k//8)*LBO        (in elements)
      SWxx (W B)  start + m%(W/16*T) + (m//(W/16*T))*LBO + (k%8)*W + (k//8)*SBO
      SW128_32B   start + m%(8T) + (m//(8T))*LBO + (k%4)*128 + (k//4)*SBO  (tf32 only)

  tf32 MN-major operands exist only with SW128_32B, and only they take it (else RefError).
* **The instruction descriptor**: decoded field by field (:func:`nvatom.descriptors.umma.
  decode_idesc`, whose table tests/descriptors/test_umma_desc.py checks against CUTLASS's
  C bit-fields): types, majors, negation, M, N, saturation, sparsity.
* **Tensor memory** (:class:`Tmem`): 128 lanes x 512 columns of 32-bit cells; address
  ``lane << 16 | column``.  One ``Tmem`` and one ``Smem`` per CTA.
* **Data-path layouts** (PTX ISA 9.7.16.10.5, :func:`layout_id`, :func:`d_lanes_columns`):
  where D's rows and columns sit in each CTA's TMEM for Layouts A (M 256, cta_group::2),
  B (M 128, cta_group::2, dense), D (M 128), E (M 64 .ws), F (M 64, half the data path, lane
  alignment 0 or 16) and G (M 32 .ws): the layouts of
  :data:`nvatom.atoms.sm100.DATAPATH_LAYOUTS` (the same table the verifier and ``nvatom frag``
  read; A in TMEM through :func:`nvatom.atoms.sm100.a_tmem_layout`, scale factors through
  :func:`nvatom.atoms.sm100.sf_tmem_layout`).  The ISA draws these as figures; the row/column
  placement is cross-checked against CUTLASS's ``tmem_frg`` atoms in the tests.  Layout C
  (M 128, cta_group::2, sparse A) is F's organization per CTA (the ISA's table).
* **tcgen05.mma**: D = A x B (+ D if enable-input-d; D scaled by 2^-scale_input_d), with
  A = M x K and B = N x K (both as the descriptor/TMEM read them), negation, per-block scale
  factors and structured-sparse A (1:2 tf32, 2:4, 4:8 in pairs for mxf4/mxf4nvf4; ISA
  9.7.16.10.8) with its metadata read from TMEM or given as kept-element positions.
  ``cta_group::2`` runs on a CTA pair: each CTA's shared memory holds its half of A's rows
  and of B's N rows behind the same descriptors, and each CTA's TMEM receives its half of
  D's rows.  A in TMEM sits in the lanes that hold the same D row (duplicated for B, E, G).
  Products are summed in float64 and rounded once to the D type (the hardware's
  accumulation order is unspecified, so the model is exact up to that rounding); integer
  MMAs are exact, wrapped or (saturate) clamped to s32.  f32/s32 D fill a TMEM word; an f16
  D is one element in the low 16 bits of each word (ISA 9.7.16.10.4.1).
* **Scale factors** (:func:`read_scale_factors`): from TMEM addresses with the idesc's
  scale-factor ids (byte / half-word / word sub-columns for 1X / 2X / 4X, ISA 9.7.16.10.7.2),
  duplicated over the 32-lane partitions (CUTLASS ``tmem_sf_frg``: 4x1, or 2x2 for the SFB of
  Layout B), row r in lane r % 32 and column r // 32; each CTA of a pair holds its rows' SFA
  and all of SFB; or as arrays.  :func:`tmem_copy_32x128b_warpx4` models the
  ``tcgen05.cp .32x128b.warpx4`` that puts the 4x1 form there.
* **Sparse metadata in TMEM** (:func:`read_sparse_meta`, :func:`store_sparse_meta`, ISA
  9.7.16.10.8.4): a 4-bit code per chunk of K (two 2-bit indices, of elements for 2:4 and of
  pairs for 4:8 in pairs), placed as CUTLASS's ``tmem_e_frg`` (the ISA draws it as figures)
  (``tmem_e_frg_ws`` for .ws) for 128 rows per CTA (M = 128, also .ws; M = 256
  cta_group::2) and .ws M = 64 / 32 (repeated over the lane blocks) of kind::f16, i8,
  f8f6f4, mxf8f6f4, mxf4 and mxf4nvf4, sparsity selector 0.
* **tcgen05.ld/st**: through the (thread, value) layouts of :mod:`nvatom.atoms.tmem` (checked
  against CUTLASS), one warp at the warp's base address.

* **FP6/FP4 operands of kind::f8f6f4 / mxf8f6f4 in shared memory**
  (:func:`read_padded_matrix`, :func:`write_padded_matrix`): the padded-packed container of
  PTX ISA 9.7.16.10.4.4 ("contiguously packed along with padding") = the layout TMA's
  ``.b4x16_p64`` / ``.b6x16_p32`` (ISA 5.5.1.1.1; CUDA driver API
  ``CU_TENSOR_MAP_DATA_TYPE_16U4_ALIGN16B`` / ``16U6_ALIGN16B``: 8-byte gaps after every 8
  bytes of packed 4-bit values, 4-byte gaps after every 12 bytes of 6-bit values) writes:
  every 16 consecutive elements (along the operand's contiguous dimension: K for K-major,
  M or N for MN-major, which PTX ISA Table 49 allows for both kinds) fill one 16-byte
  unit, their 64 / 96 bits first, element i at bits b*i .. b*i+b-1 of the little-endian
  data, then 8 / 4 bytes of padding that the MMA ignores.  The canonical layout and the
  descriptor arithmetic are those of 8-bit elements (one byte of address per element; CUTLASS
  maps e2m1/e2m3/e3m2 of the F8F6F4 kinds to ``float_*_unpacksmem_t``
  (``sm1xx_kernel_input_element_to_mma_input_element``, gemm/collective/builders/
  sm1xx_common.inl), loads them with those TMA formats (``to_CUtensorMapDataType``,
  cute/arch/copy_sm90_desc.hpp) into smem allocated as ``uint8_t`` per element (the SM100
  collectives' ``SmemAllocTypeA/B``: ``sizeof_bits < 8`` -> ``uint8_t``)).  The bit order
  follows CUTLASS's packed sub-byte storage (element i at bit offset b*i), which TMA copies
  as is.  Not checked on a device.

Not modelled (clear errors): FP6/FP4 A of kind::f8f6f4 / mxf8f6f4 in tensor memory
(8-bit containers, ISA 9.7.16.10.4.3, bit positions only in figures); sparse metadata in
TMEM for tf32, for M = 64 without .ws (Layout F) and for sparsity selectors other than 0 (it
can be given as an array instead); the K = 96 form of mxf4/mxf4nvf4 (idesc k_size); the
``.ws`` zero-column mask and disable-output-lane; base_offset != 0 and the absolute LBO mode.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import numpy as np

from nvatom.atoms import sm100 as _sm100
from nvatom.atoms.sm100 import KINDS, UmmaError, legal_mn
from nvatom.atoms.smem import (
    UMMA_SMEM_SWIZZLES,
    SmemError,
    SmemSwizzle,
    umma_canonical_layout,
    umma_swizzles_for,
)
from nvatom.atoms.tmem import COLUMNS, LANES, TmemCopyAtom
from nvatom.descriptors.umma import SM100_LAYOUT_TYPE, decode_idesc
from nvatom.dtypes import decode, dtype, encode
from nvatom.errors import NvatomError
from nvatom.layout import ComposedLayout, Layout, flatten

__all__ = ["PADDED_DATA_BYTES", "RefError", "Smem", "Tmem", "d_lanes_columns",
           "decode_sparse_meta", "encode_sparse_meta", "layout_id", "mma", "read_matrix",
           "read_padded_matrix", "read_scale_factors", "read_sparse_meta", "sparse_meta_cells",
           "sparse_meta_words", "store_sparse_meta", "tmem_copy_32x128b_warpx4", "tmem_load",
           "tmem_store", "write_padded_matrix"]


class RefError(NvatomError):
    """Something the reference model does not model, or an impossible input."""


SMEM_BYTES = 1 << 18
#: SM100 layout-type code (bits 61-63) -> swizzle mode (nvatom.descriptors.umma's table, read
#: as the PTX ISA's Table 40: 0 none, 1 128-byte with 32-byte atomicity, 2 128B, 4 64B, 6 32B)
_MODE_OF_CODE: dict[int, SmemSwizzle] = {
    SM100_LAYOUT_TYPE[sw.name]: sw for sw in UMMA_SMEM_SWIZZLES}


@dataclasses.dataclass
class Smem:
    """Shared memory: bytes at shared-window addresses 0 .. 2^18 - 1."""

    data: np.ndarray = dataclasses.field(
        default_factory=lambda: np.zeros(SMEM_BYTES, np.uint8))

    def write(self, addr: int, raw: np.ndarray) -> None:
        b = np.ascontiguousarray(raw).view(np.uint8).ravel()
        self.data[addr:addr + b.size] = b


@dataclasses.dataclass
class Tmem:
    """Tensor memory of one CTA: cells[lane, column] (uint32)."""

    cells: np.ndarray = dataclasses.field(
        default_factory=lambda: np.zeros((LANES, COLUMNS), np.uint32))

    @staticmethod
    def split(taddr: int) -> tuple[int, int]:
        lane, col = taddr >> 16, taddr & 0xFFFF
        if lane >= LANES or col >= COLUMNS:
            raise RefError(f"TMEM address {taddr:#x} is outside {LANES} lanes x {COLUMNS} "
                           "columns")
        return lane, col


def _desc_fields(word: int) -> tuple[int, int, int, SmemSwizzle]:
    """(start, LBO, SBO, swizzle mode) read from a 64-bit SM100 descriptor word."""
    if (word >> 46) & 0b111 != 0b001:
        raise RefError(f"descriptor {word:#018x}: bits 46-48 must be 0b001")
    if (word >> 49) & 7 or (word >> 52) & 1:
        raise RefError(f"descriptor {word:#018x}: base_offset / absolute LBO mode not modelled")
    code = word >> 61
    if code not in _MODE_OF_CODE:
        raise RefError(f"descriptor {word:#018x}: layout type {code} is unassigned")
    m14 = (1 << 14) - 1
    return (word & m14) << 4, ((word >> 16) & m14) << 4, ((word >> 32) & m14) << 4, \
        _MODE_OF_CODE[code]


def _swizzle(addr: np.ndarray, sw: SmemSwizzle) -> np.ndarray:
    """The mode's swizzle ``Sw<B,M,S>`` on absolute byte addresses: bits [M, M+B) ^= bits
    [M+S, M+S+B) (16-byte units of 128-byte lines; 32-byte units for SW128_32B)."""
    z = sw.swizzle
    if z.bits == 0:
        return addr
    mask = (1 << z.bits) - 1
    return addr ^ (((addr >> (z.base + z.shift)) & mask) << z.base)


def _eval2(layout: Layout, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """A rank-2 Layout evaluated at integer arrays of row and column coordinates (each mode's
    coordinate split colexicographically over its flat shape; the last digit unbounded)."""
    out = np.zeros(np.broadcast(rows, cols).shape, np.int64)
    for mode, c in ((layout[0], rows), (layout[1], cols)):
        fl = flatten(mode)
        shapes = fl.shape if isinstance(fl.shape, tuple) else (fl.shape,)
        strides = fl.stride if isinstance(fl.stride, tuple) else (fl.stride,)
        rest = np.asarray(c, np.int64)
        for i, (sh, st) in enumerate(zip(shapes, strides, strict=True)):
            digit = rest if i == len(shapes) - 1 else rest % sh
            out = out + digit * st
            rest = rest // sh
    return out


def matrix_addresses(word: int, rows: int, kbytes: int, major: str,
                     element_bits: int) -> np.ndarray:
    """Byte address of each (row, K byte) of the operand tile a descriptor describes: the PTX
    ISA's canonical layout of the descriptor's swizzle mode and major-ness
    (nvatom.atoms.smem.UMMA_SMEM_CANONICAL, instantiated with the word's LBO and SBO), from the
    start address, then the mode's swizzle on the absolute address.

    K-major tiles are read as bytes (T = 16: the address does not depend on the element
    width).  For MN-major, the (MN element, K row) form is computed in elements of
    ``element_bits`` and transposed to (row, K byte).  tf32 (32-bit) MN-major operands need
    the 128-byte swizzle with 32-byte atomicity, which no other operand takes."""
    start, lbo, sbo, sw = _desc_fields(word)
    if major not in ("K", "MN"):
        raise RefError(f"major is 'K' or 'MN', got {major!r}")
    if major == "MN" and element_bits < 8:
        raise RefError("MN-major sub-byte operands are not modelled")
    e = 8 if major == "K" else element_bits
    try:
        legal = umma_swizzles_for(major, e if major == "MN" else 8)
    except SmemError as err:
        raise RefError(str(err)) from None
    if sw not in legal:
        raise RefError(f"a {major}-major operand of {element_bits}-bit elements is read with "
                       f"the swizzle modes {', '.join(x.name for x in legal)}; the descriptor "
                       f"{word:#018x} has {sw.name}"
                       + (" (tf32 MN-major exists only with the 128-byte swizzle of 32-byte "
                          "atomicity)" if major == "MN" and element_bits == 32 else ""))
    eb = e // 8
    if major == "K" and sw.nbytes and kbytes > sw.row_bytes:
        raise RefError(f"a K-major {sw.row_bytes}-byte swizzled K-block holds {sw.row_bytes} "
                       f"bytes of K, not {kbytes}")
    kk = kbytes // eb
    lay = umma_canonical_layout(major, sw, e, rows, kk, lbo // eb, sbo // eb)
    outer = lay.outer if isinstance(lay, ComposedLayout) else lay
    off = _eval2(outer, np.arange(rows)[:, None], np.arange(kk)[None, :])  # elements
    if major == "K":
        return _swizzle(start + off, sw)
    out = np.empty((rows, kk * eb), np.int64)
    for j in range(eb):  # element (row, k) occupies bytes j of its eb
        out[:, j::eb] = _swizzle(start + off * eb + j, sw)
    return out


def read_matrix(smem: Smem, word: int, rows: int, k: int, element_bits: int,
                major: str = "K") -> np.ndarray:
    """The (rows x k) element codes an operand descriptor makes the tensor core read
    (``element_bits`` 4 packed two per byte low nibble first, 8, 16 or 32)."""
    if element_bits not in (4, 8, 16, 32):
        raise RefError(f"element width {element_bits} is not modelled")
    kbytes = k * element_bits // 8
    if element_bits == 4:
        if major != "K":
            raise RefError("packed 4-bit operands are K-major (PTX ISA Table 49: no transpose for "
                           "kind::mxf4 / mxf4nvf4)")
        addr = matrix_addresses(word, rows, kbytes, "K", 8)
        byte = smem.data[addr]
        out = np.empty((rows, k), np.uint64)
        out[:, 0::2] = byte & 0xF
        out[:, 1::2] = byte >> 4
        return out
    eb = element_bits // 8
    addr = matrix_addresses(word, rows, kbytes, major, element_bits)
    raw = smem.data[addr].astype(np.uint64)  # (rows, kbytes)
    out = np.zeros((rows, k), np.uint64)
    for j in range(eb):
        out |= raw[:, j::eb] << np.uint64(8 * j)
    return out


#: Element bits -> data bytes of each 16-byte unit of the padded-packed shared-memory format of
#: FP4/FP6 in kind::f8f6f4 / mxf8f6f4 (PTX ISA 9.7.16.10.4.4 and 5.5.1.1.1 ``.b4x16_p64`` /
#: ``.b6x16_p32``; CUDA driver API ``16U4_ALIGN16B`` / ``16U6_ALIGN16B``): 16 elements, then
#: 8 / 4 bytes of padding.
PADDED_DATA_BYTES = {4: 8, 6: 12}
_SUBBYTE_F8F6F4 = {"e2m1": 4, "e2m3": 6, "e3m2": 6}


def _padded_bits(word: int, rows: int, k: int, element_bits: int,
                 major: str) -> tuple[np.ndarray, np.ndarray]:
    """(byte address, bit) of each bit of each element of a padded-packed operand tile:
    arrays (rows, k, element_bits).  The descriptor places the tile as one byte per element;
    the element at such an address a is number p = a % 16 of the 16-byte unit a - p (the
    swizzles permute whole 16-byte units), whose data holds it at bits b p .. b p + b - 1."""
    if element_bits not in PADDED_DATA_BYTES:
        raise RefError(f"the padded-packed format holds 4- or 6-bit elements, not "
                       f"{element_bits}-bit ones")
    # K- or MN-major: the descriptor's 8-bit canonical layout puts 16 consecutive elements of
    # the contiguous dimension (K, or M/N for MN-major) in one 16-byte unit, which is what the
    # padded format packs (TMA's .b4x16_p64 / .b6x16_p32 pack along the inner dimension)
    addr = matrix_addresses(word, rows, k, major, 8)
    p = addr % 16
    pos = (p * element_bits)[..., None] + np.arange(element_bits)  # data bit of each bit
    return (addr - p)[..., None] + pos // 8, pos % 8


def read_padded_matrix(smem: Smem, word: int, rows: int, k: int, element_bits: int,
                       major: str = "K") -> np.ndarray:
    """The (rows x k) FP4/FP6 codes (``element_bits`` 4 or 6) a kind::f8f6f4 / mxf8f6f4
    operand descriptor makes the tensor core read from the padded-packed format
    (:data:`PADDED_DATA_BYTES`); the padding bytes are not read."""
    byte, bit = _padded_bits(word, rows, k, element_bits, major)
    bits = (smem.data[byte] >> bit.astype(np.uint8)) & 1
    weights = np.uint64(1) << np.arange(element_bits, dtype=np.uint64)
    return (bits.astype(np.uint64) * weights).sum(axis=-1).astype(np.uint64)


def write_padded_matrix(smem: Smem, word: int, codes: np.ndarray, element_bits: int,
                        major: str = "K") -> None:
    """Write (rows x k) FP4/FP6 codes where the descriptor ``word`` places them, in the
    padded-packed format (what TMA's ``.b4x16_p64`` / ``.b6x16_p32`` load leaves in shared
    memory); padding bytes are left as they are."""
    codes = np.asarray(codes)
    if codes.ndim != 2:
        raise RefError(f"codes must be a (rows x k) array, got shape {codes.shape}")
    if np.any(codes < 0) or np.any(codes >> element_bits):
        raise RefError(f"codes must be {element_bits}-bit values")
    rows, k = codes.shape
    byte, bit = _padded_bits(word, rows, k, element_bits, major)
    vals = (codes.astype(np.uint64)[..., None] >> np.arange(element_bits, dtype=np.uint64)) & 1
    flat_b, flat_s = byte.ravel(), bit.ravel().astype(np.uint8)
    data = smem.data
    np.bitwise_and.at(data, flat_b, ~(np.uint8(1) << flat_s))
    np.bitwise_or.at(data, flat_b, (vals.ravel().astype(np.uint8) << flat_s))


def _values(codes: np.ndarray, t: str) -> np.ndarray:
    return decode(t, codes).astype(np.float64 if dtype(t).kind == "float" else np.int64)


def _bits_of(kind: str, name: str) -> int:
    """Element width in the operand's shared-memory form (6 / 4: padded-packed)."""
    if kind in ("mxf4", "mxf4nvf4"):
        return 4
    if name in _SUBBYTE_F8F6F4:
        return _SUBBYTE_F8F6F4[name]
    return dtype(name).storage_bits


def _read_smem(smem: Smem, word: int, rows: int, k: int, bits: int, major: str,
               kind: str) -> np.ndarray:
    if kind in ("f8f6f4", "mxf8f6f4") and bits in PADDED_DATA_BYTES:
        return read_padded_matrix(smem, word, rows, k, bits, major)
    return read_matrix(smem, word, rows, k, bits, major)


# ---------------------------------------------------------------------------- data path layouts
def layout_id(m: int, cta_group: int, sparse: bool, ws: bool) -> str:
    """The ISA's data-path layout (A..G) of a tcgen05.mma (nvatom.atoms.sm100.layout_id)."""
    try:
        return _sm100.layout_id(m, cta_group, sparse, ws)
    except _sm100.UmmaError as e:
        raise RefError(str(e)) from None


def _lane_alignments(lid: str) -> tuple[int, ...]:
    return _sm100.DATAPATH_LAYOUTS[lid][1]


def d_lanes_columns(m: int, n: int, cta_group: int = 1, sparse: bool = False,
                    ws: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """(lane, column) offsets, each (M / cta_group) x N, of D's elements in one CTA's TMEM,
    relative to the D address, for row r of that CTA's share of M and column n: the layout
    :func:`nvatom.atoms.sm100.d_tmem_layout` (the data-path layouts of PTX ISA 9.7.16.10.5,
    :data:`nvatom.atoms.sm100.DATAPATH_LAYOUTS`) evaluated."""
    lid = layout_id(m, cta_group, sparse, ws)
    try:
        lay = _sm100.d_tmem_layout(m, n, cta_group, sparse, ws)
    except _sm100.UmmaError as e:
        raise RefError(f"data-path layout {lid}: {e}") from None
    off = _eval2(lay, np.arange(m // cta_group)[:, None], np.arange(n)[None, :])
    return off >> 16, off & 0xFFFF


def _d_cells(tmem: Tmem, d_taddr: int, m: int, n: int, cta_group: int, sparse: bool,
             ws: bool) -> tuple[np.ndarray, np.ndarray]:
    lid = layout_id(m, cta_group, sparse, ws)
    lane0, col0 = Tmem.split(d_taddr)
    if lane0 not in _lane_alignments(lid):
        raise RefError(f"D at {d_taddr:#x}: layout {lid} takes lane alignment "
                       f"{' or '.join(map(str, _lane_alignments(lid)))}, got lane {lane0}")
    lanes, cols = d_lanes_columns(m, n, cta_group, sparse, ws)
    lanes, cols = lanes + lane0, cols + col0
    if cols.max() >= COLUMNS:
        raise RefError(f"D at {d_taddr:#x} ({m} x {n}, layout {lid}) runs past column "
                       f"{COLUMNS - 1}")
    return lanes, cols


# ---------------------------------------------------------------------------- scale factors
def read_scale_factors(tmem: Tmem, taddr: int, rows: int, count: int, sf_id: int,
                       datapath: str = "4x1") -> np.ndarray:
    """The (rows x count) scale-factor codes tcgen05.mma reads from TMEM at ``taddr``.

    PTX ISA 9.7.16.10.7.2/3 ("Scale Factor A/B ID"): each TMEM word holds four 1-byte scale
    factors; ``count`` = 1 (scale_vec::1X) takes the byte ``sf_id`` (0..3), 2 (2X) the two
    bytes from the half-word ``sf_id`` (0 or 2), 4 (4X) all four (``sf_id`` 0).  The scale
    factors "need to be duplicated to all 32 lane partitions".  Placement: the layout
    :func:`nvatom.atoms.sm100.sf_tmem_layout` and its copies
    (:data:`nvatom.atoms.sm100.SF_DATAPATHS`; CUTLASS ``tmem_sf_frg``, which the ISA's figures
    draw):

    * ``"4x1"`` (SFA of every layout; SFB of Layouts A and D): row (or B column) r in lane
      r % 32 of each of the four 32-lane partitions, column ``col(taddr) + r // 32``;
    * ``"2x2"`` (SFB of Layout B, the 2-CTA M = 128 MMA): the first half of the rows in
      partitions 0 and 1, the second half in partitions 2 and 3 (as D's N halves): row r of
      half h = r // (rows/2) in lane (r % 32) + 64 h (+ 32), column
      ``col(taddr) + (r % (rows/2)) // 32``.

    The model reads every copy and raises if they differ."""
    lane0, col0 = Tmem.split(taddr)
    legal = {1: (0, 1, 2, 3), 2: (0, 2), 4: (0,)}
    if count not in legal:
        raise RefError(f"{count} scale factors per row per MMA: 1, 2 or 4 are modelled "
                       "(block32 with K = 96, three per row, is not)")
    if sf_id not in legal[count]:
        raise RefError(f"scale-factor id {sf_id} with {count} scale factor(s) per row: "
                       f"legal ids {legal[count]}")
    if lane0 != 0:
        raise RefError(f"scale factors at {taddr:#x}: lane field must be 0, got {lane0}")
    try:
        lay = _sm100.sf_tmem_layout(rows, count, datapath)
    except _sm100.UmmaError as e:
        raise RefError(str(e)) from None
    copies = _sm100.SF_DATAPATHS[datapath][0]
    off = _eval2(lay, np.arange(rows), np.zeros(rows, np.int64))
    lanes, cols = off >> 16, (off & 0xFFFF) + col0
    if cols.max() >= COLUMNS:
        raise RefError(f"scale factors at {taddr:#x} for {rows} rows run past the last column")
    # every copy of the block of lanes the rows use (whole 32-lane partitions) must agree
    ncols = int(cols.max()) - col0 + 1
    for p0 in sorted({int(x) // 32 for x in lanes}):
        group = tuple(p0 + c // 32 for c in copies)
        block = [tmem.cells[32 * p:32 * p + 32, col0:col0 + ncols] for p in group]
        if any(np.any(b != block[0]) for b in block[1:]):
            raise RefError(f"scale factors at {taddr:#x} are not duplicated over the 32-lane "
                           f"partitions {group} (PTX ISA 9.7.16.10.7, {datapath} data path)")
    words = tmem.cells[lanes, cols].astype(np.uint64)
    out = np.zeros((rows, count), np.uint64)
    for j in range(count):
        out[:, j] = (words >> np.uint64(8 * (sf_id + j))) & np.uint64(0xFF)
    return out


def tmem_copy_32x128b_warpx4(tmem: Tmem, smem: Smem, taddr: int, desc: int) -> None:
    """``tcgen05.cp.cta_group::1.32x128b.warpx4 [taddr], s-desc``: 32 rows of 16 bytes read
    through the shared-memory descriptor (K-major canonical layout), written to columns
    ``col(taddr) .. +3`` of lanes ``r`` of each of the four 32-lane partitions (PTX ISA
    "tcgen05.cp": ``.warpx4`` multicasts the 32 lanes to the four warps' lane quarters)."""
    lane0, col0 = Tmem.split(taddr)
    if lane0 != 0:
        raise RefError(f".32x128b.warpx4 writes all four lane partitions: lane must be 0, "
                       f"got {lane0}")
    raw = read_matrix(smem, desc, 32, 16, 8, "K").astype(np.uint32)  # (32 rows, 16 bytes)
    words = raw[:, 0::4] | raw[:, 1::4] << 8 | raw[:, 2::4] << 16 | raw[:, 3::4] << 24
    for p in range(4):
        tmem.cells[32 * p:32 * p + 32, col0:col0 + 4] = words


# ---------------------------------------------------------------------------- sparse metadata
#: K elements per 4-bit metadata code (PTX ISA 9.7.16.10.8): 2:4 chunks of 4 (two 2-bit
#: indices, first kept element in bits 0-1) and 4:8-in-pairs chunks of 8 (two 2-bit pair
#: indices).  tf32 (1:2) is not modelled in TMEM.
_META_CHUNK = {"f16": 4, "f8f6f4": 4, "mxf8f6f4": 4, "i8": 4, "mxf4": 8, "mxf4nvf4": 8}


def sparse_meta_cells(kind: str, rows: int, k: int) -> tuple[np.ndarray, np.ndarray,
                                                               np.ndarray]:
    """(lane, column, bit) of each 4-bit metadata code (rows x K/chunk) of one CTA's rows,
    relative to the metadata TMEM address, sparsity selector 0 (``rows`` 128, or 64 / 32 for
    .ws, whose copies :func:`read_sparse_meta` adds).

    PTX ISA 9.7.16.10.8.4 ("Sparsity selector", M = 128 / 256) draws the layout as figures;
    the placement here is CUTLASS's ``tmem_e_frg`` (mma_traits_sm100), read as lane = virtual
    address % 128 and bit = metadata bit index (virtual address // 128):

    * kind::f16 (K 32, 32 bits per row): code j of row r in lane
      (r % 8) + 8 (j // 4) + 16 (r // 16), bit 16 ((r // 8) % 2) + 4 (j % 4), column 0;
    * 8-bit kinds (K 64) and mxf4/mxf4nvf4 (K 128), 64 bits per row: row r in lane r, code j
      in column j // 8, bit 4 (j % 8).

    ``.ws`` M = 64 / 32 (CUTLASS ``tmem_e_frg_ws``): the same placement of the M rows,
    repeated at lanes + 64 / + 32 q (as D's Layouts E and G spread each row over those
    lanes)."""
    if kind not in _META_CHUNK:
        raise RefError(f"sparse metadata in TMEM for kind::{kind} is not modelled (tf32 1:2: "
                       "the ISA gives its layout only as a figure)")
    if rows not in (32, 64, 128):
        raise RefError(f"sparse metadata in TMEM is modelled for 128 rows per CTA (M = 128 "
                       f"cta_group::1, M = 256 cta_group::2) and .ws M = 32 / 64, got {rows}")
    codes = k // _META_CHUNK[kind]
    r = np.arange(rows)[:, None] + np.zeros((1, codes), np.int64)
    j = np.arange(codes)[None, :] + np.zeros((rows, 1), np.int64)
    if kind == "f16":
        return (r % 8) + 8 * (j // 4) + 16 * (r // 16), 0 * j, 16 * ((r // 8) % 2) + 4 * (j % 4)
    return r, j // 8, 4 * (j % 8)


def encode_sparse_meta(kind: str, positions: np.ndarray) -> np.ndarray:
    """Kept-element positions (rows x K/2, as :func:`mma`'s array form) -> 4-bit codes
    (rows x K/chunk): two 2-bit indices per code, the first kept element's in bits 0-1 (as
    the mma.sp metadata of PTX ISA 9.7.14.6, e.g. 0xD keeps elements 1 and 3); for
    mxf4/mxf4nvf4 the indices are of the kept pairs (position // 2)."""
    if kind not in _META_CHUNK:
        raise RefError(f"sparse metadata in TMEM for kind::{kind} is not modelled")
    pos = np.asarray(positions, np.int64)
    if kind in ("mxf4", "mxf4nvf4") and (np.any(pos[:, 0::2] % 2) or
                                         np.any(pos[:, 1::2] != pos[:, 0::2] + 1)):
        raise RefError(f"kind::{kind} sparsity is 4:8 in pairs: kept positions come as "
                       "aligned pairs (2j, 2j + 1)")
    idx = pos[:, 0::2] // 2 if kind in ("mxf4", "mxf4nvf4") else pos
    lo, hi = idx[:, 0::2], idx[:, 1::2]
    if np.any(idx < 0) or np.any(idx > 3):
        raise RefError("sparse metadata indices are 2-bit (0..3)")
    return (lo | hi << 2).astype(np.uint32)


def decode_sparse_meta(kind: str, codes: np.ndarray) -> np.ndarray:
    """Inverse of :func:`encode_sparse_meta`: 4-bit codes -> kept positions (rows x K/2)."""
    c = np.asarray(codes, np.int64)
    idx = np.empty((c.shape[0], 2 * c.shape[1]), np.int64)
    idx[:, 0::2], idx[:, 1::2] = c & 3, (c >> 2) & 3
    if kind not in ("mxf4", "mxf4nvf4"):
        return idx
    pos = np.empty((c.shape[0], 2 * idx.shape[1]), np.int64)
    pos[:, 0::2], pos[:, 1::2] = 2 * idx, 2 * idx + 1
    return pos


def sparse_meta_words(kind: str, positions: np.ndarray) -> np.ndarray:
    """The (128 lanes x columns) uint32 words that hold the metadata of 128 rows (or of the
    32 / 64 rows of a .ws MMA, repeated over the lane blocks) given as kept positions
    (rows x K/2), in the layout :func:`sparse_meta_cells` gives."""
    codes = encode_sparse_meta(kind, positions)
    rows = codes.shape[0]
    lane, col, bit = sparse_meta_cells(kind, rows, codes.shape[1] * _META_CHUNK[kind])
    words = np.zeros((rows, int(col.max()) + 1), np.uint64)
    np.add.at(words, (lane, col), codes.astype(np.uint64) << bit.astype(np.uint64))
    return np.tile(words, (LANES // rows, 1)).astype(np.uint32)  # .ws: copies per lane block


def store_sparse_meta(tmem: Tmem, taddr: int, kind: str, positions: np.ndarray) -> None:
    """Place metadata (128 rows, or .ws 64 / 32 rows and their lane-block copies) at
    ``taddr`` the way a kernel does: four warps, each a
    ``tcgen05.st.sync.aligned.32x32b.xN`` (thread t of warp w -> lane 32 w + t, register i ->
    column i) at ``taddr + (32 w << 16)``."""
    words = sparse_meta_words(kind, positions)
    atom = TmemCopyAtom("store", "32x32b", words.shape[1])
    for w in range(4):
        tmem_store(tmem, atom, taddr + ((32 * w) << 16), words[32 * w:32 * w + 32])


def read_sparse_meta(tmem: Tmem, taddr: int, kind: str, rows: int, k: int,
                     selector: int = 0, ws: bool = False) -> np.ndarray:
    """Kept positions (rows x K/2) tcgen05.mma.sp reads from the metadata at ``taddr``
    (``rows`` per CTA: 128, or 64 / 32 with ``ws``, whose lane-block copies must agree)."""
    if rows != LANES and not ws:
        raise RefError(f"sparse metadata in TMEM for {rows} rows without .ws (Layout F) is "
                       "not modelled: CUTLASS's tmem_e_frg is M = 128 only")
    if selector != 0:
        raise RefError(f"sparsity selector {selector} is not modelled (the ISA gives the "
                       "selected sub-columns only as figures; selector 0 is)")
    lane0, col0 = Tmem.split(taddr)
    if lane0 != 0:
        raise RefError(f"sparse metadata at {taddr:#x}: lane field must be 0, got {lane0}")
    lane, col, bit = sparse_meta_cells(kind, rows, k)
    if col0 + col.max() >= COLUMNS:
        raise RefError(f"sparse metadata at {taddr:#x} runs past column {COLUMNS - 1}")
    words = tmem.cells[lane, col0 + col].astype(np.uint64)
    for q in range(1, LANES // rows):
        if np.any(tmem.cells[lane + rows * q, col0 + col] != words):
            raise RefError(f"sparse metadata at {taddr:#x}: .ws M = {rows} needs the copy in "
                           f"lanes {rows * q}.. to equal lanes 0..{rows - 1}")
    return decode_sparse_meta(kind, (words >> bit.astype(np.uint64)) & np.uint64(0xF))


# ---------------------------------------------------------------------------- the MMA
def _pair(x: Any, what: str, cta_group: int) -> list[Any]:
    if cta_group == 1:
        if isinstance(x, (list, tuple)):
            if len(x) != 1:
                raise RefError(f"cta_group::1 takes one {what}, got {len(x)}")
            return list(x)
        return [x]
    if not isinstance(x, (list, tuple)) or len(x) != 2:
        raise RefError(f"cta_group::2 takes a pair of {what} (the CTA pair: even rank first)")
    return list(x)


def _read_a_tmem(tmem: Tmem, taddr: int, ka: int, abits: int, m: int, n: int, cta_group: int,
                 sparse: bool, ws: bool) -> np.ndarray:
    """A (rows of this CTA x ka codes) from TMEM, through
    :func:`nvatom.atoms.sm100.a_tmem_layout`: row r in the lane D's row r has (Layouts A, D and
    F: one lane; B and E: also + 64, CUTLASS allocates A of the 2-CTA M = 128 MMA
    "Duplicated"; G: + 32 q, :func:`nvatom.atoms.sm100.tmem_copies`), K packed low element
    first, 32 / abits to a column.  The copies must agree (else RefError)."""
    lid = layout_id(m, cta_group, sparse, ws)
    lane0, col0 = Tmem.split(taddr)
    if lane0 not in _lane_alignments(lid):
        raise RefError(f"A at {taddr:#x}: layout {lid} takes lane alignment "
                       f"{' or '.join(map(str, _lane_alignments(lid)))}, got lane {lane0}")
    try:
        lay = _sm100.a_tmem_layout(m, n, ka, abits, cta_group, sparse, ws)
        copies = _sm100.tmem_copies(m, n, cta_group, sparse, ws)
    except _sm100.UmmaError as e:
        raise RefError(f"A in TMEM, layout {lid}: {e}") from None
    rows = m // cta_group
    off = _eval2(lay, np.arange(rows)[:, None], np.arange(ka)[None, :])
    lanes, cols = (off >> 16) + lane0, (off & 0xFFFF) + col0
    cells = np.stack([tmem.cells[lanes + (c >> 16), cols] for c in copies])
    if np.any(cells != cells[0:1]):
        first = [int(lanes[0, 0]) + (c >> 16) for c in copies]
        raise RefError(f"A at {taddr:#x}: layout {lid} needs each A row in lanes "
                       f"{first} (+ row) to hold the same values")
    words = cells[0].astype(np.uint64)
    per = 32 // abits
    shift = (abits * (np.arange(ka) % per)).astype(np.uint64)[None, :]
    return (words >> shift) & np.uint64((1 << abits) - 1)


def mma(tmem: Tmem | Sequence[Tmem], smem: Smem | Sequence[Smem], *, kind: str, d_taddr: int,
        a: int | tuple[str, int], b_desc: int, idesc: int, enable_input_d: bool,
        scale_input_d: int = 0, sfa: np.ndarray | int | None = None,
        sfb: np.ndarray | int | None = None, sparse_meta: np.ndarray | int | None = None,
        cta_group: int = 1, ws: bool = False, scale_vec: str | None = None) -> np.ndarray:
    """Execute one ``tcgen05.mma`` on the model; returns the new D (M x N, float64/int64).

    ``a`` is a descriptor word, or ``("tmem", taddr)`` for A in tensor memory (rows in the
    lanes of D's data-path layout, 32-bit columns holding K-major elements packed low first).
    ``sfa``/``sfb`` are TMEM addresses of the scale factors (read as
    :func:`read_scale_factors` describes, with the idesc's scale-factor ids), or the scale
    codes as arrays (M x K/vec, N x K/vec).  ``scale_vec`` is the instruction's scale-vector
    qualifier (``scale_vec::NX`` / ``blockN``; it fixes the scale factors per row read from
    TMEM; default: the kind's only one, 4X for mxf4nvf4 with ue4m3).  ``sparse_meta`` is the
    metadata's TMEM address (read as :func:`read_sparse_meta` describes, with the idesc's
    sparsity selector; each CTA of a pair holds its own rows'), or an array giving, for each
    kept A element (M x K/2), its position inside its group of 4 (2 for tf32, 8 for
    mxf4/mxf4nvf4, whose kept positions come in aligned pairs).

    ``cta_group=2``: ``tmem`` and ``smem`` are the CTA pair's (even rank first).  The same
    descriptors and addresses are applied in each CTA: CTA c's shared memory holds A rows
    c M/2 .. and B rows (N) c N/2 ..; D rows c M/2 .. land in CTA c's TMEM."""
    d = decode_idesc(idesc, kind)
    tmems, smems = _pair(tmem, "Tmem", cta_group), _pair(smem, "Smem", cta_group)

    if (d.m, d.n) not in legal_mn(kind, cta_group, d.sparse, ws):
        raise RefError(f"M x N = {d.m} x {d.n} is not a kind::{kind} cta_group::{cta_group}"
                       f"{' .ws' if ws else ''}{' sparse' if d.sparse else ''} shape")
    lid = layout_id(d.m, cta_group, d.sparse, ws)
    kspec = KINDS[kind]
    if kspec.block_scaled and d.k_size:
        raise RefError("the K = 96 form (idesc k_size = 1) is not modelled")
    if not d.sparse and sparse_meta is not None:
        raise RefError("the idesc is dense (sparsity bit 2 clear): no sparse metadata")
    if not kspec.block_scaled and (sfa is not None or sfb is not None):
        raise RefError(f"kind::{kind} is not block-scaled and takes no scale factors")
    k = kspec.k_dense * (2 if d.sparse else 1)
    abits, bbits = _bits_of(kind, d.a.name), _bits_of(kind, d.b.name)
    ka = k // 2 if d.sparse else k
    mc, nc = d.m // cta_group, d.n // cta_group
    d_cells = [_d_cells(t, d_taddr, d.m, d.n, cta_group, d.sparse, ws) for t in tmems]
    if kspec.block_scaled:
        sfa_c, sfb_c = _scale_codes(tmems, sfa, sfb, d, k, cta_group, scale_vec, lid)
    a_parts, b_parts = [], []
    for c in range(cta_group):
        if isinstance(a, tuple):
            if d.a_major != "K":
                raise RefError("A in tensor memory is K-major")
            if kind in ("f8f6f4", "mxf8f6f4") and d.a.name in _SUBBYTE_F8F6F4:
                raise RefError(f"{d.a.name} A in tensor memory (kind::{kind}, 8-bit "
                               "containers) is not modelled: the PTX ISA gives the container "
                               "bit positions only as figures (9.7.16.10.4.3)")
            a_parts.append(_read_a_tmem(tmems[c], a[1], ka, abits, d.m, d.n, cta_group,
                                        d.sparse, ws))
        else:
            a_parts.append(_read_smem(smems[c], a, mc, ka, abits, d.a_major, kind))
        b_parts.append(_read_smem(smems[c], b_desc, nc, k, bbits, d.b_major, kind))
    a_codes, b_codes = np.concatenate(a_parts), np.concatenate(b_parts)
    av, bv = _values(a_codes, d.a.name), _values(b_codes, d.b.name)
    if d.sparse:
        # PTX ISA 9.7.16.10.8: tf32 1:2; f16/f8f6f4/mxf8f6f4/i8 2:4; mxf4/mxf4nvf4 4:8 in
        # pairs (two 2-wide sub-chunks of each 8-wide chunk are kept whole)
        group = {"tf32": 2, "mxf4": 8, "mxf4nvf4": 8}.get(kind, 4)
        if isinstance(sparse_meta, (int, np.integer)):
            sparse_meta = np.concatenate([read_sparse_meta(t, int(sparse_meta), kind, mc, k,
                                                            d.sparse_id2, ws) for t in tmems])
        if sparse_meta is None or sparse_meta.shape != (d.m, ka):
            raise RefError(f"sparse A needs metadata of shape {(d.m, ka)}")
        full = np.zeros((d.m, k), av.dtype)
        grp = np.arange(ka)[None, :] // (group // 2)
        pos = grp * group + sparse_meta
        if np.any(sparse_meta < 0) or np.any(sparse_meta >= group) or np.any(
                np.diff(sparse_meta.reshape(d.m, -1, group // 2), axis=2) <= 0):
            raise RefError("sparse metadata must name increasing positions inside each group "
                           f"of {group}")
        if group == 8 and (np.any(sparse_meta[:, 0::2] % 2) or
                           np.any(sparse_meta[:, 1::2] != sparse_meta[:, 0::2] + 1)):
            raise RefError(f"kind::{kind} sparsity is 4:8 in pairs: kept positions come as "
                           "aligned pairs (2j, 2j + 1)")
        np.put_along_axis(full, pos.astype(np.int64), av, axis=1)
        av = full
    if d.a_negate:
        av = -av
    if d.b_negate:
        bv = -bv
    b_scaled = [bv] * cta_group
    if kspec.block_scaled:
        assert d.sf is not None
        vec = k // sfa_c.shape[1]
        av = av * np.repeat(_values(sfa_c, d.sf.name), vec, axis=1)
        b_scaled = [bv * np.repeat(_values(x, d.sf.name), vec, axis=1) for x in sfb_c]
    # (M, N), exact in float64 for these widths and K; CTA c's rows use its own SFB
    prod = np.concatenate([av[c * mc:(c + 1) * mc] @ b_scaled[c].T for c in range(cta_group)])
    assert d.d is not None
    out = np.empty_like(prod, dtype=np.int64 if d.d.name == "s32" else np.float64)
    for c in range(cta_group):
        lanes, cols = d_cells[c]
        rows = slice(c * mc, (c + 1) * mc)
        out[rows] = _accumulate(tmems[c], lanes, cols, prod[rows], d.d.name, enable_input_d,
                                scale_input_d, d.saturate)
    return out


def _scale_codes(tmems: list[Tmem], sfa: Any, sfb: Any, d: Any, k: int, cta_group: int,
                 scale_vec: str | None, lid: str) -> tuple[np.ndarray, list[np.ndarray]]:
    """(SFA codes M x count, [SFB codes N x count of each CTA])."""
    if sfa is None or sfb is None:
        raise RefError("block-scaled MMA needs sfa and sfb")
    if isinstance(sfa, np.ndarray) and isinstance(sfb, np.ndarray):
        vec = k // sfa.shape[1] if sfa.ndim == 2 and sfa.shape[1] else 0
        if not vec or sfa.shape != (d.m, k // vec) or sfb.shape != (d.n, k // vec):
            raise RefError(f"scale shapes {sfa.shape}, {sfb.shape} do not tile K = {k}")
        return sfa, [sfb] * cta_group
    if isinstance(sfa, np.ndarray) or isinstance(sfb, np.ndarray):
        raise RefError("give sfa and sfb both as TMEM addresses or both as arrays")
    # scale factors per row per MMA: the scale-vector qualifier's (PTX ISA Table 54)

    if scale_vec is not None:
        try:
            count = KINDS[d.kind].scale_count(scale_vec)
        except UmmaError as e:
            raise RefError(str(e)) from None
    else:
        count = {"mxf8f6f4": 1, "mxf4": 2}.get(d.kind, 4 if d.sf.name == "ue4m3" else 0)
    if count == 0:
        raise RefError("kind::mxf4nvf4 with ue8m0 scales is 2X or 4X: pass scale_vec")
    # each CTA holds the SFA of its own rows and the SFB of all N (cta_group::2: CUTLASS
    # tmem_sf_frg, "ScaleFactorDuplicated2by2" for Layout B's SFB)
    mc = d.m // cta_group
    sfa_c = np.concatenate([read_scale_factors(t, sfa, mc, count, d.a_sf_id) for t in tmems])
    sfb_c = [read_scale_factors(t, sfb, d.n, count, d.b_sf_id, "2x2" if lid == "B" else "4x1")
             for t in tmems]
    return sfa_c, sfb_c


def _accumulate(tmem: Tmem, lanes: np.ndarray, cols: np.ndarray, prod: np.ndarray, dname: str,
                enable_input_d: bool, scale_input_d: int, saturate: bool) -> np.ndarray:
    cells = tmem.cells[lanes, cols]
    if dname == "s32":
        acc = prod.astype(np.int64)
        if enable_input_d:
            acc = acc + cells.view(np.int32).astype(np.int64)
        if saturate:
            acc = np.clip(acc, -(1 << 31), (1 << 31) - 1)
        word = (acc & 0xFFFFFFFF).astype(np.uint32)
        tmem.cells[lanes, cols] = word
        return word.view(np.int32).astype(np.int64)
    acc = prod
    if dname == "f32":
        if enable_input_d:
            acc = acc + cells.view(np.float32).astype(np.float64) * 2.0 ** -scale_input_d
        word = encode("f32", acc).astype(np.uint32)
        tmem.cells[lanes, cols] = word
        return word.view(np.float32).astype(np.float64)
    if dname == "f16":  # PTX ISA 9.7.16.10.4.1: one f16 in the low 16 bits of each word
        if enable_input_d:
            old = decode("f16", (cells & 0xFFFF).astype(np.uint64)).astype(np.float64)
            acc = acc + old * 2.0 ** -scale_input_d
        half = encode("f16", acc).astype(np.uint32) & 0xFFFF
        tmem.cells[lanes, cols] = half
        return decode("f16", half.astype(np.uint64)).astype(np.float64)
    raise RefError(f"{dname} accumulators are not a tcgen05 D type")


def tmem_load(tmem: Tmem, atom: TmemCopyAtom, taddr: int) -> np.ndarray:
    """Registers (32 threads x registers, uint32) one warp's ``tcgen05.ld`` returns."""
    lane0, col0 = Tmem.split(taddr)
    regs = np.zeros((32, atom.registers), np.uint32)
    for t in range(32):
        for r in range(atom.registers):
            if atom.pack16:
                word = 0
                for h in (0, 1):
                    ln, c = atom.coords(t, 2 * r + h)
                    word |= (int(tmem.cells[lane0 + ln, col0 + c]) & 0xFFFF) << (16 * h)
                regs[t, r] = word
            else:
                ln, c = atom.coords(t, r)
                regs[t, r] = tmem.cells[lane0 + ln, col0 + c]
    return regs


def tmem_store(tmem: Tmem, atom: TmemCopyAtom, taddr: int, regs: np.ndarray) -> None:
    """One warp's ``tcgen05.st`` of ``regs`` (32 x registers)."""
    lane0, col0 = Tmem.split(taddr)
    if regs.shape != (32, atom.registers):
        raise RefError(f"{atom.name} stores {atom.registers} registers per thread")
    for t in range(32):
        for r in range(atom.registers):
            if atom.pack16:
                for h in (0, 1):
                    ln, c = atom.coords(t, 2 * r + h)
                    tmem.cells[lane0 + ln, col0 + c] = (int(regs[t, r]) >> (16 * h)) & 0xFFFF
            else:
                ln, c = atom.coords(t, r)
                tmem.cells[lane0 + ln, col0 + c] = regs[t, r]
