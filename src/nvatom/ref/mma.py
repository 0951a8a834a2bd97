"""An executable CPU model of the register MMAs ``mma.sync`` / ``mma.sp`` (SM70 to SM89).

The model works on what the instruction sees: the 32-bit registers of the 32 lanes of a warp
(64-bit registers for f64 operands).  :func:`mma` takes the A, B and C register words of
every lane (and, for sparse forms, every lane's metadata register and the sparsity
selector) and returns every lane's D register words.  Nothing in it is specific to a test
kernel or a memory layout: the registers are read through the form's own fragment layouts
(``form.tv_layout(op)``: :mod:`nvatom.atoms.fragments`, :mod:`nvatom.atoms.fragments_sm70`
for the m8n8k4 quad-pairs), sparse A is expanded through the metadata layout of
:mod:`nvatom.atoms.sparse`, and element codes are decoded by :mod:`nvatom.dtypes`.

Register words: ``np.uint32[32, registers]`` (``np.uint64`` for f64 operands); register
``r`` of a lane holds the lane's values ``r * p .. r * p + p - 1`` (``p = 32 / bits``
elements, element ``j`` at bits ``[j * bits, (j + 1) * bits)``, the PTX ISA's "fragment
elements low to high"; one value for f32/s32/tf32/f64).  Tiles are in the atom's
orientation, as :mod:`nvatom.atoms.mma` defines them: A M x K (sparse: the compressed
M x K/2), B N x K, C/D M x N, with a leading axis of ``products`` (4 for m8n8k4, whose warp
computes one independent 8x8x4 product per quad-pair; 1 otherwise).

Arithmetic (PTX ISA "Warp Level Matrix Multiply-Accumulate Instructions: mma", "mma.sp"):

* integer forms: D = C + A x B exactly (int64), then ``.satfinite`` clamps to the s32 range
  and the other forms wrap modulo 2^32.  The hardware's order of accumulation is not
  specified; the clamp of the exact sum equals the hardware's result whenever no partial
  sum leaves the s32 range in the other direction (e.g. every product of one sign);
* b1: D = C + popc(a_row XOR b_col) (``.xor.popc``) or popc(a_row AND b_col) (``.and.popc``),
  exact;
* floating forms: every product and the sum are computed in float64 and rounded once
  (round-to-nearest-even) to the D type.  Products of f16/bf16/tf32/e4m3/e5m2 inputs are
  exact in float64; the float64 sum is exact when the partial sums fit 53 bits (always for
  the "exact" inputs of the GPU comparison: small integers).  The hardware accumulates in
  an unspecified order with its own internal precision, so for general inputs the model is
  only within :func:`error_bound` of it;
* tf32 registers: the low 13 bits of the 32-bit word are not part of the format (PTX ISA
  "Alternate Floating-Point Data Formats"); the model ignores them (not checked on a device:
  the GPU comparison draws them zero);
* sparse forms: the metadata nibbles that the selector names pick, for each chunk of each
  row, the dense columns of A's kept values (:func:`nvatom.atoms.sparse.decompress`); the
  other columns are zero.  Invalid nibbles raise.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np

from nvatom import dtypes
from nvatom.atoms import fragments_sm70, sparse
from nvatom.atoms.mma import MmaForm
from nvatom.errors import NvatomError
from nvatom.layout import Layout, size

__all__ = ["MmaRefError", "codes_to_values", "decode_operand", "encode_operand", "error_bound",
           "layout_table", "mma", "products", "reference_d", "tile_shape", "values_to_codes",
           "word_dtype"]

LANES = 32
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1


class MmaRefError(NvatomError):
    """Register words or tiles that do not fit the form, or something the model does not
    model."""


# --------------------------------------------------------------------------- fragments


def _flatten(t: Any) -> list[int]:
    return [x for e in t for x in _flatten(e)] if isinstance(t, tuple) else [int(t)]


def layout_table(layout: Layout) -> np.ndarray:
    """``layout(x, y)`` for every coordinate of a rank-2 layout, as an int64 array
    (size(mode 0) x size(mode 1)): each mode evaluated at its 1-D coordinate through its
    flattened (colexicographic) shape and stride."""
    cols = []
    for i in (0, 1):
        mode = layout[i]
        shapes, strides = _flatten(mode.shape), _flatten(mode.stride)
        x = np.arange(math.prod(shapes), dtype=np.int64)
        off = np.zeros_like(x)
        for s, d in zip(shapes, strides, strict=True):
            off += (x % s) * d
            x //= s
        cols.append(off)
    return cols[0][:, None] + cols[1][None, :]



def products(form: MmaForm) -> int:
    """Independent products one warp computes: 4 for m8n8k4 (one per quad-pair), else 1."""
    return LANES // size(form.tv_layout("A")[0])


def tile_shape(form: MmaForm, op: str) -> tuple[int, int, int]:
    """(products, rows, cols) of operand ``op`` in the atom's orientation."""
    op = op.upper()
    p = products(form)
    if op == "A":
        return p, form.m, form.k // 2 if form.is_sparse else form.k
    if op == "B":
        return p, form.n, form.k
    if op in ("C", "D"):
        return p, form.m, form.n
    raise MmaRefError(f"{form.name}: unknown operand '{op}' (A, B, C or D)")


def word_dtype(form: MmaForm, op: str) -> type[np.unsignedinteger[Any]]:
    """np.uint64 for f64 operands (64-bit registers), np.uint32 otherwise."""
    return np.uint64 if form.operand_type(op).name == "f64" else np.uint32


def _per_reg(form: MmaForm, op: str) -> int:
    t = form.operand_type(op)
    if t.name == "f64":
        return 1
    return max(1, 32 // t.pack_bits)


def _lane_of(form: MmaForm, thread: int, product: int) -> int:
    if products(form) == 1:
        return thread

    return fragments_sm70.m8n8k4_lane(thread, product)


@functools.cache
def _element_map(form: MmaForm, op: str) -> tuple[np.ndarray, ...]:
    """Index arrays (lane, register, slot, product, row, col) over every element of the
    operand's tiles: value ``v`` of thread ``t`` is ``tv_layout(op)(t, v)`` = ``row + rows *
    col``; it sits in register ``v // p``, slot ``v % p``."""
    op = op.upper()
    layout = form.tv_layout(op)
    nthr, nval = size(layout[0]), size(layout[1])
    per = _per_reg(form, op)
    if nval != form.registers(op) * per:
        raise MmaRefError(f"{form.name}: {op} has {nval} values per lane, not "
                          f"{form.registers(op)} registers of {per}")
    nprod, rows, cols = tile_shape(form, op)
    idx = layout_table(layout)
    out: list[list[int]] = [[], [], [], [], [], []]
    for q in range(nprod):
        for t in range(nthr):
            lane = _lane_of(form, t, q)
            for v in range(nval):
                i = int(idx[t, v])
                for lst, x in zip(out, (lane, v // per, v % per, q, i % rows, i // rows),
                                  strict=True):
                    lst.append(x)
    arrays = tuple(np.array(x, dtype=np.int64) for x in out)
    seen = set(zip(*(a.tolist() for a in arrays[3:]), strict=True))
    if len(seen) != rows * cols * nprod:  # pragma: no cover - the fragments are bijective
        raise MmaRefError(f"{form.name}: the {op} fragment does not cover its tile once")
    return arrays


def _check_words(form: MmaForm, op: str, words: Any) -> np.ndarray:
    w = np.asarray(words)
    want = (LANES, form.registers(op))
    if w.shape != want:
        raise MmaRefError(f"{form.name}: operand {op} is {want[1]} register(s) per lane, i.e. "
                          f"words of shape {want}, not {w.shape}")
    if w.dtype.kind not in "iu":
        raise MmaRefError(f"{form.name}: register words of {op} must be integers, not {w.dtype}")
    bits = 64 if word_dtype(form, op) is np.uint64 else 32
    if w.size and (int(w.min()) < 0 or int(w.max()) >= 1 << bits):
        raise MmaRefError(f"{form.name}: register words of {op} must be {bits}-bit unsigned")
    return w.astype(np.uint64)


def codes_to_values(t: dtypes.DType, codes: np.ndarray) -> np.ndarray:
    """Decoded values of codes (uint64): float64 for floats, int64 for integers (s32
    sign-extended); tf32's 13 low bits are ignored."""
    name = t.name
    if name == "f64":
        return codes.astype(np.uint64).view(np.float64).copy()
    if name == "f32":
        return codes.astype(np.uint32).view(np.float32).astype(np.float64)
    if name == "s32":
        return codes.astype(np.uint32).view(np.int32).astype(np.int64)
    if name == "tf32":
        codes = codes & np.uint64(~((1 << t.low_pad_bits) - 1) & 0xFFFFFFFF)
    vals = dtypes.decode(t, codes.astype(t.numpy_storage))
    return vals.astype(np.int64) if t.is_int else vals.astype(np.float64)


def values_to_codes(t: dtypes.DType, values: np.ndarray) -> np.ndarray:
    """Codes (uint64) of values in type ``t``: f32/f64 as IEEE bits, s32 as two's complement,
    other types by :func:`nvatom.dtypes.encode` (round to nearest even)."""
    name = t.name
    v = np.asarray(values)
    if name == "f64":
        return np.asarray(v, dtype=np.float64).view(np.uint64).astype(np.uint64)
    if name == "f32":
        return np.asarray(v, dtype=np.float32).view(np.uint32).astype(np.uint64)
    if name == "s32":
        return (np.asarray(v, dtype=np.int64) & 0xFFFFFFFF).astype(np.uint64)
    return dtypes.encode(t, v).astype(np.uint64)


def decode_operand(form: MmaForm, op: str, words: Any) -> np.ndarray:
    """The operand tiles (products, rows, cols) the registers hold, decoded (float64, or
    int64 for integer and b1 types)."""
    op = op.upper()
    w = _check_words(form, op, words)
    t = form.operand_type(op)
    lane, reg, slot, q, row, col = _element_map(form, op)
    width = 64 if t.name == "f64" else (32 if _per_reg(form, op) == 1 else t.pack_bits)
    mask = np.uint64((1 << width) - 1)
    codes = (w[lane, reg] >> (slot * width).astype(np.uint64)) & mask
    out = np.zeros(tile_shape(form, op), dtype=np.int64 if t.is_int else np.float64)
    out[q, row, col] = codes_to_values(t, codes)
    return out


def encode_operand(form: MmaForm, op: str, tiles: Any) -> np.ndarray:
    """The register words of every lane holding ``tiles`` (products, rows, cols; a 2-D
    tile is taken as the one product of a warp-wide form).  Values must be representable
    (floats are rounded to nearest by :func:`nvatom.dtypes.encode`)."""
    op = op.upper()
    arr = np.asarray(tiles)
    shape = tile_shape(form, op)
    if arr.ndim == 2 and shape[0] == 1:
        arr = arr[None]
    if arr.shape != shape:
        raise MmaRefError(f"{form.name}: operand {op} tiles have shape {shape}, not {arr.shape}")
    t = form.operand_type(op)
    lane, reg, slot, q, row, col = _element_map(form, op)
    width = 64 if t.name == "f64" else (32 if _per_reg(form, op) == 1 else t.pack_bits)
    codes = values_to_codes(t, arr[q, row, col])
    words = np.zeros((LANES, form.registers(op)), dtype=np.uint64)
    np.bitwise_or.at(words, (lane, reg), codes << (slot * width).astype(np.uint64))
    return words.astype(word_dtype(form, op))


# --------------------------------------------------------------------------- arithmetic


def _dense_a(form: MmaForm, a_words: Any, e: Any, selector: int | None) -> np.ndarray:
    a = decode_operand(form, "A", a_words)
    if not form.is_sparse:
        if e is not None or selector is not None:
            raise MmaRefError(f"{form.name} is dense: it takes no metadata or selector")
        return a

    if e is None:
        raise MmaRefError(f"{form.name}: a sparse form needs the 32 metadata words")
    sel = form.selectors[0] if selector is None else selector
    words = np.asarray(e)
    if words.shape != (LANES,):
        raise MmaRefError(f"{form.name}: metadata is one .b32 word per lane (32), not shape "
                          f"{words.shape}")
    return sparse.decompress(form, a[0], words, sel)[None]


def reference_d(form: MmaForm, a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """D tiles of decoded (dense) A (P, M, K), B (P, N, K), C (P, M, N), before rounding:
    int64 for integer/b1 forms (clamped or wrapped to s32), float64 otherwise."""
    if form.bop is not None:
        ai, bi = a.astype(np.int64)[:, :, None, :], b.astype(np.int64)[:, None, :, :]
        bits = (ai ^ bi) if form.bop == "xor.popc" else (ai & bi)
        return _s32(form, c.astype(np.int64) + bits.sum(axis=3))
    if form.d.is_int:
        d = c.astype(np.int64) + np.einsum("pmk,pnk->pmn", a.astype(np.int64),
                                           b.astype(np.int64))
        return _s32(form, d)
    return c.astype(np.float64) + np.einsum("pmk,pnk->pmn", a.astype(np.float64),
                                            b.astype(np.float64))


def _s32(form: MmaForm, d: np.ndarray) -> np.ndarray:
    if form.satfinite:
        return np.clip(d, INT32_MIN, INT32_MAX)
    return (d - INT32_MIN) % 2**32 + INT32_MIN


def mma(form: MmaForm, a: Any, b: Any, c: Any, e: Any = None,
        selector: int | None = None) -> np.ndarray:
    """Every lane's D registers after ``form``'s instruction with these A, B, C registers
    (``np.uint32[32, registers]``, uint64 for f64), metadata words ``e`` (sparse forms,
    ``np.uint32[32]``) and sparsity selector (default: the form's first)."""
    a_dense = _dense_a(form, a, e, selector)
    bt = decode_operand(form, "B", b)
    ct = decode_operand(form, "C", c)
    d = reference_d(form, a_dense, bt, ct)
    return encode_operand(form, "D", d)


def error_bound(form: MmaForm, a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """Largest |D_hardware - D_model| the model allows, per element of D, for decoded dense
    A (P, M, K), B (P, N, K), C (P, M, N): zero for integer and b1 forms; for floats
    ``tol * (sum_k |a_mk b_nk| + |c_mn|)`` plus one unit in the last place of D, with ``tol``
    2^-46 for f64, 2^-20 for f32 and 2^-8 for f16 accumulation (the hardware's accumulation
    error as measured on an H100 by tests/gpu/test_mma_gpu.py: below 2^-50, 2^-23, 2^-10)."""
    if form.d.is_int:
        return np.zeros(tile_shape(form, "D"))
    mag = np.abs(c) + np.einsum("pmk,pnk->pmn", np.abs(a), np.abs(b))
    tol = {"f64": 2.0**-46, "f32": 2.0**-20, "f16": 2.0**-8}[form.d.name]
    mant = {"f64": 52, "f32": 23, "f16": 10}[form.d.name]
    d = np.abs(reference_d(form, a, b, c))
    ulp = np.exp2(np.floor(np.log2(np.maximum(d, math.ldexp(1.0, -1000))))) * 2.0**-mant
    return tol * mag + ulp
