"""CPU reference of the SM120 block-scaled MMA: D = (A * scale_A) @ (B * scale_B) + C.

Source: PTX ISA "Block Scaling for mma.sync" (row ``m`` of A is cut into ``X = K / vec_size``
blocks of ``vec_size`` elements, block ``j`` scaled by ``scale_A[m, j]``; column ``n`` of B by
``scale_B[j, n]``), "mma" (element containers, precision) and "Alternate Floating-Point Data
Formats" (the codecs, in :mod:`nvatom.dtypes`).

Two levels:

* :func:`block_scaled_mma` works on matrices of element *codes* (A M x K, B K x N, scale_A
  M x X, scale_B X x N; C as float32) and returns float32 D.  Each block's dot product is
  exact (float64: every e2m1/e3m2/e2m3/e4m3/e5m2 product and a 64-term sum of them fit the
  53-bit mantissa), scaled by the two scale factors (ue8m0: a power of two; ue4m3: a 4-bit
  mantissa, so still exact), then accumulated with C in float32, block by block.  The PTX
  ISA promises f32 accumulation "with at least single precision" but not an order, so tests
  that compare with hardware use data whose sums are exact in float32.
* :func:`pack_operand`, :func:`pack_scales` and :func:`emulate` work on the 32 lanes'
  registers, through the atom's layouts (``form.tv_layout``, ``form.scale_sources``): what a
  kernel such as :func:`nvatom.ptx.sm120_emit.build_mma_bs_test_module` loads, and what the
  instruction computes from it.  Element containers follow the ISA: kind::mxf8f6f4 puts one
  element per byte, e2m1 in bits 5..2 and e3m2/e2m3 in bits 5..0; kind::mxf4/mxf4nvf4 pack
  two e2m1 per byte, element 0 in the low nibble.  Lanes whose scale register the selectors
  do not read get a decoy byte, so a wrong lane or byte model changes the result.

Dense forms only at the register level (sparse A needs its metadata; pass the dense A with
zeros to :func:`block_scaled_mma` instead).  Nothing here ran against an SM120 GPU.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from nvatom.dtypes import DType, decode, dtype
from nvatom.errors import NvatomError

if TYPE_CHECKING:
    from nvatom.atoms.sm120 import MmaBsForm

__all__ = [
    "BlockScaleError",
    "block_scaled_mma",
    "container_codes",
    "emulate",
    "pack_operand",
    "pack_scales",
    "unpack_accumulator",
]

WARP = 32


class BlockScaleError(NvatomError):
    """Operands whose shapes or codes do not fit the block-scaled product asked for."""


def _codes(name: str, x: np.ndarray, shape: tuple[int, int]) -> np.ndarray:
    arr = np.asarray(x)
    if arr.shape != shape:
        raise BlockScaleError(f"{name} must be {shape[0]} x {shape[1]}, not {arr.shape}")
    return arr


def block_scaled_mma(
    a: np.ndarray, b: np.ndarray, c: np.ndarray, scale_a: np.ndarray, scale_b: np.ndarray,
    *, a_type: DType | str, b_type: DType | str, sf_type: DType | str, vec_size: int,
) -> np.ndarray:
    """D (float32, M x N) from codes: A M x K, B K x N, scale_A M x K/vec, scale_B K/vec x N."""
    at, bt, st = dtype(a_type), dtype(b_type), dtype(sf_type)
    a_arr = np.asarray(a)
    if a_arr.ndim != 2:
        raise BlockScaleError(f"A must be a matrix, not of shape {a_arr.shape}")
    m, k = a_arr.shape
    b_arr = np.asarray(b)
    if b_arr.ndim != 2 or b_arr.shape[0] != k:
        raise BlockScaleError(f"B must be {k} x N, not {b_arr.shape}")
    n = b_arr.shape[1]
    if vec_size <= 0 or k % vec_size:
        raise BlockScaleError(f"vec_size {vec_size} does not divide K = {k}")
    x = k // vec_size
    sa = decode(st, _codes("scale_A", scale_a, (m, x))).astype(np.float64)
    sb = decode(st, _codes("scale_B", scale_b, (x, n))).astype(np.float64)
    av = decode(at, a_arr).astype(np.float64)
    bv = decode(bt, b_arr).astype(np.float64)
    d = np.asarray(_codes("C", c, (m, n)), dtype=np.float32).copy()
    with np.errstate(invalid="ignore", over="ignore"):
        for j in range(x):
            blk = slice(j * vec_size, (j + 1) * vec_size)
            dot = av[:, blk] @ bv[blk, :]  # exact
            d = (d + (dot * sa[:, j:j + 1] * sb[j:j + 1, :]).astype(np.float32)
                 ).astype(np.float32)
    return d


# --------------------------------------------------------------------------- registers


def container_codes(form: MmaBsForm, op: str, codes: np.ndarray) -> np.ndarray:
    """Element codes as they sit in their register field: e2m1 shifted to bits 5..2 in
    kind::mxf8f6f4's 8-bit containers, every other code unchanged."""
    t = form.operand_type(op)
    arr = np.asarray(codes).astype(np.uint32)
    if t.name == "e2m1" and form.element_bits(op) == 8:
        return arr << 2
    return arr


def _field(form: MmaBsForm, op: str, raw: np.ndarray) -> np.ndarray:
    """Inverse of :func:`container_codes` for one field value."""
    t = form.operand_type(op)
    if t.name == "e2m1" and form.element_bits(op) == 8:
        return (raw >> 2) & 0xF
    return raw & ((1 << t.storage_bits) - 1 if form.element_bits(op) == 8 else 0xF)


def _tile(form: MmaBsForm, op: str) -> tuple[int, int]:
    if op == "A":
        return form.m, form.k // 2 if form.is_sparse else form.k
    if op == "B":
        return form.n, form.k
    return form.m, form.n


def pack_operand(form: MmaBsForm, op: str, tile: np.ndarray) -> np.ndarray:
    """uint32[32, registers]: the lanes' registers for operand A (codes, M x K), B (codes,
    given as K x N like the product) or C (float32 M x N, raw bits)."""
    op = op.upper()
    rows, cols = _tile(form, op)
    arr = np.asarray(tile)
    if op == "B":
        arr = _codes("B", arr, (cols, rows)).T  # the atom's codomain is (N, K)
    elif op in ("A", "C"):
        arr = _codes(op, arr, (rows, cols))
    else:
        raise BlockScaleError(f"pack_operand: operand A, B or C, not '{op}'")
    flat = arr.reshape(-1, order="F")  # column-major index r + rows * c, as the layouts
    tv = form.tv_layout(op)
    nregs = form.registers(op)
    out = np.zeros((WARP, nregs), dtype=np.uint32)
    if op == "C":
        bits = np.asarray(flat, dtype=np.float32).view(np.uint32)
        for lane in range(WARP):
            for v in range(nregs):
                out[lane, v] = bits[int(tv(lane, v))]
        return out
    width = form.element_bits(op)
    per_reg = 32 // width
    fields = container_codes(form, op, flat)
    for lane in range(WARP):
        for v in range(nregs * per_reg):
            r, slot = divmod(v, per_reg)
            out[lane, r] |= np.uint32(int(fields[int(tv(lane, v))]) << (slot * width))
    return out


def pack_scales(form: MmaBsForm, op: str, scales: np.ndarray, *,
                rng: np.random.Generator | None = None) -> np.ndarray:
    """uint32[32]: every lane's scale register for SFA (codes M x X) or SFB (codes X x N),
    per the form's byte-id/thread-id; bytes the instruction does not read hold random valid
    codes (with ``rng``) or 0x7f (ue8m0 2**0 / ue4m3 NaN)."""
    which = op.upper()
    x = form.scale_vec
    shape = (form.m, x) if which == "SFA" else (x, form.n)
    arr = _codes(which, scales, shape).astype(np.uint32)
    if rng is not None:  # decoys are valid codes of the scale type (NaN excluded)
        top = (1 << form.sf_type.code_bits) - 1
        decoy = rng.integers(0, top, size=(WARP, 4), dtype=np.uint32)
        words = (decoy << np.array([0, 8, 16, 24], dtype=np.uint32)).sum(
            axis=1, dtype=np.uint64).astype(np.uint32)
    else:
        words = np.full(WARP, 0x7F7F7F7F, dtype=np.uint32)
    for s in form.scale_sources(which):
        code = arr[s.mn, s.block] if which == "SFA" else arr[s.block, s.mn]
        mask = np.uint32(0xFF << (8 * s.byte))
        words[s.lane] = (words[s.lane] & ~mask) | np.uint32(int(code) << (8 * s.byte))
    return words


def _unpack(form: MmaBsForm, op: str, regs: np.ndarray) -> np.ndarray:
    rows, cols = _tile(form, op)
    tv = form.tv_layout(op)
    width = form.element_bits(op)
    per_reg = 32 // width
    flat = np.full(rows * cols, -1, dtype=np.int64)
    for lane in range(WARP):
        for v in range(form.registers(op) * per_reg):
            r, slot = divmod(v, per_reg)
            raw = (int(regs[lane, r]) >> (slot * width)) & ((1 << width) - 1)
            flat[int(tv(lane, v))] = int(_field(form, op, np.uint32(raw)))
    if (flat < 0).any():
        raise BlockScaleError(f"{form.name}: the {op} fragments do not cover the tile")
    return flat.reshape((rows, cols), order="F")


def _unpack_scales(form: MmaBsForm, op: str, words: np.ndarray) -> np.ndarray:
    x = form.scale_vec
    out = np.zeros((form.m, x) if op == "SFA" else (x, form.n), dtype=np.uint32)
    for s in form.scale_sources(op):
        code = (int(words[s.lane]) >> (8 * s.byte)) & 0xFF
        if op == "SFA":
            out[s.mn, s.block] = code
        else:
            out[s.block, s.mn] = code
    return out


def unpack_accumulator(form: MmaBsForm, regs: np.ndarray) -> np.ndarray:
    """float32 M x N from the lanes' D (or C) registers (uint32 or float32 [32, 4])."""
    tv = form.tv_layout("D")
    bits = np.asarray(regs).view(np.uint32) if np.asarray(regs).dtype == np.float32 \
        else np.asarray(regs, dtype=np.uint32)
    flat = np.zeros(form.m * form.n, dtype=np.uint32)
    for lane in range(WARP):
        for v in range(form.registers("D")):
            flat[int(tv(lane, v))] = bits[lane, v]
    return flat.view(np.float32).reshape((form.m, form.n), order="F")


def emulate(form: MmaBsForm, a_regs: np.ndarray, b_regs: np.ndarray, c_regs: np.ndarray,
            sfa: np.ndarray, sfb: np.ndarray) -> np.ndarray:
    """What one warp's instruction computes: float32 D registers [32, 4] from the lanes'
    A, B, C registers and scale words, reading only what the layouts and selectors name."""
    if form.is_sparse:
        raise BlockScaleError(f"{form.name}: the register-level emulation covers dense forms; "
                              "use block_scaled_mma with the dense A")
    a = _unpack(form, "A", np.asarray(a_regs))
    b = _unpack(form, "B", np.asarray(b_regs)).T
    c = unpack_accumulator(form, c_regs)
    d = block_scaled_mma(a, b, c, _unpack_scales(form, "SFA", sfa),
                         _unpack_scales(form, "SFB", sfb), a_type=form.a_type,
                         b_type=form.b_type, sf_type=form.sf_type, vec_size=form.vec_size)
    out = np.zeros((WARP, form.registers("D")), dtype=np.float32)
    tv = form.tv_layout("D")
    flat = d.reshape(-1, order="F")
    for lane in range(WARP):
        for v in range(form.registers("D")):
            out[lane, v] = flat[int(tv(lane, v))]
    return out
