"""An executable CPU model of SM100 ``tcgen05.mma`` and ``tcgen05.ld/st``.

What it models, and from which text (none of it reuses nvatom's encoders; it reads the words
the way the PTX ISA says the hardware does):

* **Shared memory** (:class:`Smem`): a byte array indexed by the 18-bit shared-window address.
* **The shared-memory descriptor as read** (:func:`read_matrix`): the PTX ISA "Shared Memory
  Matrix Layout" canonical forms, written as address arithmetic on core matrices (8 rows x
  16 bytes) with LBO, SBO and the start address decoded straight from the 64-bit word, then
  the swizzle applied to the *absolute* byte address: bits [4, 4+B) ^= bits [7, 7+B) with
  B = 1, 2, 3 for 32/64/128-byte swizzling.  K-major (row r, K byte c)::

      INTERLEAVE  start + (r%8)*16 + (r//8)*SBO + (c//16)*LBO + c%16
      SWxx (W B)  start + (r%8)*W  + (r//8)*SBO + c                      (c < W)

  MN-major (MN byte m, K row k)::

      INTERLEAVE  start + m%16 + (m//16)*SBO + (k%8)*16 + (k//8)*LBO
      SWxx (W B)  start + m%W  + (m//W)*LBO  + (k%8)*W  + (k//8)*SBO

* **The instruction descriptor**: decoded field by field (:func:`nvatom.descriptors.umma.
  decode_idesc`, whose table tests/descriptors/test_umma_desc.py checks against CUTLASS's
  C bit-fields): types, majors, negation, M, N, saturation, sparsity.
* **Tensor memory** (:class:`Tmem`): 128 lanes x 512 columns of 32-bit cells; address
  ``lane << 16 | column``.  D of an M = 128, cta_group::1 MMA sits at lanes 0..127 (row m in
  lane m) and columns ``col(taddr) + n`` (PTX ISA data-path layout for M = 128), as f32 or s32
  bit patterns.
* **tcgen05.mma**: D = A x B (+ D if enable-input-d; D scaled by 2^-scale_input_d), with
  A = M x K and B = N x K (both as the descriptor/TMEM read them), negation, per-block scale
  factors (``sfa[m, k // vec] * sfb[n, k // vec]``, decoded UE8M0/UE4M3) and 2:4 (1:2 for
  tf32) sparse A with its metadata given as kept-element positions.  Products are summed in
  float64 and rounded once to f32 (the hardware's f32 accumulation order is unspecified, so
  the model is exact up to that rounding); integer MMAs are exact, wrapped or (saturate)
  clamped to s32.
* **tcgen05.ld/st**: through the (thread, value) layouts of :mod:`nvatom.atoms.tmem` (checked
  against CUTLASS), one warp at the warp's base address.

Not modelled (clear errors): M = 64 / cta_group::2 / .ws data-path layouts, f16 accumulators
in TMEM, FP6/FP4 in 8-bit containers (kind::f8f6f4 / mxf8f6f4 with e2m3, e3m2, e2m1), the
TMEM layouts of sparse metadata and scale factors (given here as arrays), base_offset != 0,
the absolute LBO mode and the 128B-with-32B-atom swizzle.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from nvatom.atoms.tmem import COLUMNS, LANES, TmemCopyAtom
from nvatom.descriptors.umma import decode_idesc
from nvatom.dtypes import decode, dtype, encode
from nvatom.errors import NvatomError

__all__ = ["RefError", "Smem", "Tmem", "mma", "read_matrix", "tmem_load", "tmem_store"]


class RefError(NvatomError):
    """Something the reference model does not model, or an impossible input."""


SMEM_BYTES = 1 << 18
_SW_BITS = {0: 0, 6: 1, 4: 2, 2: 3}  # SM100 layout-type code -> swizzle B (bytes 16 << B)


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


def _desc_fields(word: int) -> tuple[int, int, int, int]:
    """(start, LBO, SBO, swizzle B) read from a 64-bit SM100 descriptor word."""
    if (word >> 46) & 0b111 != 0b001:
        raise RefError(f"descriptor {word:#018x}: bits 46-48 must be 0b001")
    if (word >> 49) & 7 or (word >> 52) & 1:
        raise RefError(f"descriptor {word:#018x}: base_offset / absolute LBO mode not modelled")
    code = word >> 61
    if code not in _SW_BITS:
        raise RefError(f"descriptor {word:#018x}: layout type {code} not modelled")
    m14 = (1 << 14) - 1
    return (word & m14) << 4, ((word >> 16) & m14) << 4, ((word >> 32) & m14) << 4, \
        _SW_BITS[code]


def _swizzle(addr: np.ndarray, b: int) -> np.ndarray:
    if b == 0:
        return addr
    mask = ((1 << b) - 1)
    return addr ^ (((addr >> 7) & mask) << 4)


def matrix_addresses(word: int, rows: int, kbytes: int, major: str,
                     element_bits: int) -> np.ndarray:
    """Byte address of each (row, K byte) of the operand tile a descriptor describes.

    For MN-major, the (MN byte, K row) form is computed and transposed to (row, K byte), with
    ``element_bits`` telling how MN bytes group into rows."""
    start, lbo, sbo, b = _desc_fields(word)
    w = 16 << b if b else 16
    if major == "K":
        r = np.arange(rows)[:, None]
        c = np.arange(kbytes)[None, :]
        if b == 0:
            a = start + (r % 8) * 16 + (r // 8) * sbo + (c // 16) * lbo + c % 16
        else:
            if kbytes > w:
                raise RefError(f"a K-major {w}-byte swizzled K-block holds {w} bytes of K, "
                               f"not {kbytes}")
            a = start + (r % 8) * w + (r // 8) * sbo + c
        return _swizzle(a, b)
    if major != "MN":
        raise RefError(f"major is 'K' or 'MN', got {major!r}")
    if element_bits < 8:
        raise RefError("MN-major sub-byte operands are not modelled")
    eb = element_bits // 8
    kk = kbytes // eb  # K rows
    m = np.arange(rows * eb)[:, None]  # MN byte
    k = np.arange(kk)[None, :]
    if b == 0:
        a = start + m % 16 + (m // 16) * sbo + (k % 8) * 16 + (k // 8) * lbo
    else:
        a = start + m % w + (m // w) * lbo + (k % 8) * w + (k // 8) * sbo
    a = _swizzle(a, b)  # (MN byte, K row)
    # -> (row, K byte): element (row, k) occupies MN bytes row*eb .. row*eb+eb-1 of K row k
    out = np.empty((rows, kk * eb), np.int64)
    for j in range(eb):
        out[:, j::eb] = a[j::eb, :]
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
            raise RefError("4-bit operands are K-major")
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


def _values(codes: np.ndarray, t: str) -> np.ndarray:
    return decode(t, codes).astype(np.float64 if dtype(t).kind == "float" else np.int64)


def _bits_of(kind: str, name: str) -> int:
    if kind in ("mxf4", "mxf4nvf4"):
        return 4
    if name in ("e2m3", "e3m2", "e2m1"):
        raise RefError(f"{name} in an 8-bit container (kind::{kind}) is not modelled")
    return dtype(name).storage_bits


def mma(tmem: Tmem, smem: Smem, *, kind: str, d_taddr: int, a: int | tuple[str, int],
        b_desc: int, idesc: int, enable_input_d: bool, scale_input_d: int = 0,
        sfa: np.ndarray | None = None, sfb: np.ndarray | None = None,
        sparse_meta: np.ndarray | None = None, cta_group: int = 1) -> np.ndarray:
    """Execute one ``tcgen05.mma`` on the model; returns the new D (M x N, float64/int64).

    ``a`` is a descriptor word, or ``("tmem", taddr)`` for A in tensor memory (row m in lane
    m, 32-bit columns holding K-major elements packed low first).  ``sfa``/``sfb`` are scale
    codes (M x K/vec, N x K/vec); ``sparse_meta`` gives, for each kept A element (M x K/2),
    its position inside its group of 4 (2 for tf32)."""
    d = decode_idesc(idesc, kind)
    if cta_group != 1 or d.m != 128:
        raise RefError(f"only cta_group::1 M = 128 is modelled, got cta_group::{cta_group} "
                       f"M = {d.m}")
    from nvatom.atoms.sm100 import KINDS

    kspec = KINDS[kind]
    k = kspec.k_dense * (2 if d.sparse else 1)
    abits, bbits = _bits_of(kind, d.a.name), _bits_of(kind, d.b.name)
    ka = k // 2 if d.sparse else k
    if isinstance(a, tuple):
        if d.a_major != "K":
            raise RefError("A in tensor memory is K-major")
        lane0, col0 = Tmem.split(a[1])
        per = 32 // abits
        cols = -(-ka // per)
        cells = tmem.cells[lane0:lane0 + d.m, col0:col0 + cols].astype(np.uint64)
        a_codes = np.zeros((d.m, ka), np.uint64)
        for j in range(ka):
            a_codes[:, j] = (cells[:, j // per] >> np.uint64(abits * (j % per))) & \
                np.uint64((1 << abits) - 1)
    else:
        a_codes = read_matrix(smem, a, d.m, ka, abits, d.a_major)
    b_codes = read_matrix(smem, b_desc, d.n, k, bbits, d.b_major)
    av, bv = _values(a_codes, d.a.name), _values(b_codes, d.b.name)
    if d.sparse:
        group = 2 if kind == "tf32" else 4
        if sparse_meta is None or sparse_meta.shape != (d.m, ka):
            raise RefError(f"sparse A needs metadata of shape {(d.m, ka)}")
        full = np.zeros((d.m, k), av.dtype)
        grp = np.arange(ka)[None, :] // (group // 2)
        pos = grp * group + sparse_meta
        if np.any(sparse_meta >= group) or np.any(
                np.diff(sparse_meta.reshape(d.m, -1, group // 2), axis=2) <= 0):
            raise RefError("sparse metadata must name increasing positions inside each group")
        np.put_along_axis(full, pos.astype(np.int64), av, axis=1)
        av = full
    if d.a_negate:
        av = -av
    if d.b_negate:
        bv = -bv
    if kspec.block_scaled:
        assert d.sf is not None
        if sfa is None or sfb is None:
            raise RefError("block-scaled MMA needs sfa and sfb")
        vec = k // sfa.shape[1]
        if sfa.shape != (d.m, k // vec) or sfb.shape != (d.n, k // vec):
            raise RefError(f"scale shapes {sfa.shape}, {sfb.shape} do not tile K = {k}")
        sa = np.repeat(_values(sfa, d.sf.name), vec, axis=1)
        sb = np.repeat(_values(sfb, d.sf.name), vec, axis=1)
        av, bv = av * sa, bv * sb
    prod = av @ bv.T  # (M, N), exact in float64 for these widths and K
    lane0, col0 = Tmem.split(d_taddr)
    if lane0 != 0 or col0 + d.n > COLUMNS:
        raise RefError(f"D at {d_taddr:#x} does not hold {d.m} x {d.n}")
    view = tmem.cells[0:d.m, col0:col0 + d.n]
    assert d.d is not None
    if d.d.name == "s32":
        acc = prod.astype(np.int64)
        if enable_input_d:
            acc = acc + view.view(np.int32).astype(np.int64)
        if d.saturate:
            acc = np.clip(acc, -(1 << 31), (1 << 31) - 1)
        out = (acc & 0xFFFFFFFF).astype(np.uint32)
        view[...] = out
        return out.view(np.int32).astype(np.int64)
    if d.d.name != "f32":
        raise RefError(f"{d.d.name} accumulators in TMEM are not modelled")
    acc = prod
    if enable_input_d:
        acc = acc + view.view(np.float32).astype(np.float64) * 2.0 ** -scale_input_d
    view[...] = encode("f32", acc).astype(np.uint32)
    return view.view(np.float32).astype(np.float64)


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
