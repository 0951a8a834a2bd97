"""An executable CPU model of SM90 ``wgmma.mma_async`` (every form of :mod:`nvatom.atoms.sm90`).

What the instruction sees, and so what the model takes (PTX ISA "Asynchronous Warpgroup
Level Matrix Multiply-Accumulate: wgmma.mma_async", "Asynchronous Warpgroup Level Matrix
Shared Memory Layout", "Matrix Descriptor Format", "Register Fragments"):

* **D** (and the accumulator input): the 128 threads' registers, ``np.uint32[128, N/2]``
  (f32, s32) or ``[128, N/4]`` (f16x2), read and written through the accumulator layout of
  :mod:`nvatom.atoms.wgmma_fragments` (value ``i`` of a thread in register ``i // p``, slot
  ``i % p``, p = 1 or 2).
* **A** of an ``rs`` form: the 128 threads' four ``.b32`` registers (``np.uint32[128, 4]``)
  through the wgmma A fragment (``a_layout(bits)``), element ``j`` of a register at bits
  ``[j * bits, (j + 1) * bits)``.
* **A** of an ``ss`` form and **B**: a 64-bit shared-memory descriptor and the bytes of
  shared memory (``np.uint8[...]``, index = shared-window byte address).  The descriptor is
  decoded field by field (:func:`nvatom.descriptors.wgmma.decode`); the operand's K-block
  (32 bytes of K) is read through the canonical layout of that descriptor
  (:func:`nvatom.descriptors.wgmma.canonical_wgmma_layout`, the canonical forms of
  CUTLASS's ``GMMA::Layout_*`` atoms: core matrices of 8 rows x 16 bytes, LBO and SBO
  between them), K-major or, with the transpose immediate (``tnspA`` / ``tnspB`` = 1,
  f16/bf16 only), MN-major.  The swizzle
  mode of the descriptor (:data:`nvatom.atoms.smem.SMEM_SWIZZLES`) is applied to the
  *absolute* byte address ``start + offset`` (bits [4, 4+B) ^= bits [7, 7+B)), which is
  what lets a K step inside a swizzle atom be a plain start-address advance.  A non-zero
  base offset is not modelled (RefError).  b1 operands are bytes of eight K elements, the
  lowest K index in the least significant bit.
* **scale-d** (``False``: D = A x B; ``True``: D = A x B + D), **imm-scale-a/b** (1 or -1:
  A or B negated; f16/bf16/tf32/FP8 forms) and **imm-trans-a/b** (0 or 1).

Arithmetic: integer forms exactly (int64), then ``.satfinite`` clamps to s32 and the other
forms wrap; b1 ``.and.popc`` exactly; floating forms in float64, rounded once to the D type
(the hardware's accumulation order and internal precision are unspecified: the model is
within :func:`error_bound` of it, and equal to it when every partial sum is exact, e.g. for
small integer inputs).  tf32's 13 low bits are ignored.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np

from nvatom.atoms.sm90 import WgmmaForm
from nvatom.atoms.wgmma_fragments import WARPGROUP, a_layout, accumulator_layout
from nvatom.descriptors.wgmma import canonical_wgmma_layout, decode
from nvatom.errors import NvatomError
from nvatom.layout import ComposedLayout, Layout, composition
from nvatom.ref.mma import INT32_MAX, INT32_MIN, codes_to_values, layout_table, values_to_codes

__all__ = ["WgmmaRefError", "decode_a", "decode_d", "encode_a", "encode_d", "error_bound",
           "layout_bits", "read_operand", "reference_d", "wgmma", "write_operand"]

M = 64
K_BYTES = 32  # one wgmma K-block: 256 bits of K


class WgmmaRefError(NvatomError):
    """Registers, descriptors or immediates the form does not take, or something the model
    does not model."""


# --------------------------------------------------------------------------- registers


def layout_bits(form: WgmmaForm) -> int:
    """Width of one shared-memory layout element: the storage width, bytes for b1."""
    return max(8, form.a.pack_bits)


@functools.cache
def _reg_map(kind: str, arg: int) -> tuple[np.ndarray, ...]:
    """(thread, register, slot, row, col) of every value of the D (``arg`` = N, 32-bit or
    16-bit values by ``kind``) or A (``arg`` = bits) fragment."""
    if kind.startswith("D"):
        layout, per = accumulator_layout(arg), (2 if kind == "D16" else 1)
    else:
        layout, per = a_layout(arg), 32 // arg
    idx = layout_table(layout)
    t, v = np.indices(idx.shape)
    t, v, i = t.ravel(), v.ravel(), idx.ravel()
    return t, v // per, v % per, i % M, i // M


def _d_map(form: WgmmaForm) -> tuple[np.ndarray, ...]:
    return _reg_map("D16" if form.d.name == "f16" else "D32", form.n)


def _check_words(form: WgmmaForm, op: str, words: Any) -> np.ndarray:
    w = np.asarray(words)
    want = (WARPGROUP, form.registers(op))
    if w.shape != want or w.dtype.kind not in "iu":
        raise WgmmaRefError(f"{form.name}: {op} is {want[1]} .b32 register(s) per thread: "
                            f"integer words of shape {want}, not {w.dtype} {w.shape}")
    if w.size and (int(w.min()) < 0 or int(w.max()) > 0xFFFFFFFF):
        raise WgmmaRefError(f"{form.name}: register words of {op} must be 32-bit unsigned")
    return w.astype(np.uint64)


def _decode(words: np.ndarray, maps: tuple[np.ndarray, ...], width: int, t: Any,
            shape: tuple[int, int]) -> np.ndarray:
    thr, reg, slot, row, col = maps
    codes = (words[thr, reg] >> (slot * width).astype(np.uint64)) & np.uint64((1 << width) - 1)
    out = np.zeros(shape, dtype=np.int64 if t.is_int else np.float64)
    out[row, col] = codes_to_values(t, codes)
    return out


def _encode(values: np.ndarray, maps: tuple[np.ndarray, ...], width: int, t: Any,
            nregs: int) -> np.ndarray:
    thr, reg, slot, row, col = maps
    codes = values_to_codes(t, values[row, col])
    words = np.zeros((WARPGROUP, nregs), dtype=np.uint64)
    np.bitwise_or.at(words, (thr, reg), codes << (slot * width).astype(np.uint64))
    return words.astype(np.uint32)


def decode_d(form: WgmmaForm, words: Any) -> np.ndarray:
    """The 64 x N accumulator tile the 128 threads' D registers hold (float64 / int64)."""
    w = _check_words(form, "D", words)
    width = 16 if form.d.name == "f16" else 32
    return _decode(w, _d_map(form), width, form.d, (M, form.n))


def encode_d(form: WgmmaForm, tile: Any) -> np.ndarray:
    """The 128 threads' D registers holding the 64 x N tile."""
    arr = np.asarray(tile)
    if arr.shape != (M, form.n):
        raise WgmmaRefError(f"{form.name}: D is {M} x {form.n}, not {arr.shape}")
    width = 16 if form.d.name == "f16" else 32
    return _encode(arr, _d_map(form), width, form.d, form.registers("D"))


def _require_rs(form: WgmmaForm) -> None:
    if form.a_source != "rs":
        raise WgmmaRefError(f"{form.name}: A is read from shared memory (ss); it has no "
                            "register fragment")


def decode_a(form: WgmmaForm, words: Any) -> np.ndarray:
    """The 64 x K A tile an ``rs`` form's 128 x 4 A registers hold."""
    _require_rs(form)
    w = _check_words(form, "A", words)
    bits = form.a.pack_bits
    return _decode(w, _reg_map("A", bits), bits, form.a, (M, form.k))


def encode_a(form: WgmmaForm, tile: Any) -> np.ndarray:
    """The 128 threads' A registers of an ``rs`` form holding the 64 x K tile."""
    _require_rs(form)
    arr = np.asarray(tile)
    if arr.shape != (M, form.k):
        raise WgmmaRefError(f"{form.name}: A is {M} x {form.k}, not {arr.shape}")
    bits = form.a.pack_bits
    return _encode(arr, _reg_map("A", bits), bits, form.a, 4)


# --------------------------------------------------------------------------- shared memory


@functools.lru_cache(maxsize=1024)
def _offsets(word: int, lbits: int, major: str, rows: int) -> tuple[np.ndarray, int]:
    """(byte address of every (row, K element) of the K-block, element bytes) for a
    descriptor word: canonical layout offsets from the start address, then the swizzle on
    the absolute address."""
    try:
        desc = decode(word)
    except NvatomError as e:
        raise WgmmaRefError(f"descriptor {word:#018x}: {e}") from None
    if desc.base_offset:
        raise WgmmaRefError(f"descriptor {word:#018x}: base_offset {desc.base_offset} is not "
                            "modelled")
    lay = canonical_wgmma_layout(desc, lbits, major, rows)
    outer = lay.outer if isinstance(lay, ComposedLayout) else lay
    kb = 8 * K_BYTES // lbits
    flat = composition(outer, (Layout(rows, 1), Layout(kb, 1)))
    esize = lbits // 8
    off = layout_table(flat) * esize
    addr = desc.start_address + off
    sw = desc.layout_type.swizzle
    if sw.bits:
        addr = addr ^ ((addr & sw.yyy_msk) >> sw.shift)
    return addr, esize


def _operand_addresses(form: WgmmaForm, word: int, rows: int, trans: int
                       ) -> tuple[np.ndarray, int]:
    major = "MN" if trans else "K"
    try:
        return _offsets(int(word), layout_bits(form), major, rows)
    except WgmmaRefError:
        raise
    except NvatomError as e:
        raise WgmmaRefError(f"{form.name}: descriptor {int(word):#018x} cannot describe a "
                            f"{major}-major operand of {rows} rows: {e}") from None


def read_operand(form: WgmmaForm, op: str, smem: np.ndarray, word: int, trans: int = 0
                 ) -> np.ndarray:
    """The operand (A: 64 x K, B: N x K) the descriptor ``word`` describes in the
    shared-memory bytes ``smem`` (K-major, or MN-major with ``trans``), decoded (float64, or
    int64 for integer and b1 types)."""
    op = op.upper()
    if op not in ("A", "B"):
        raise WgmmaRefError(f"{form.name}: only A and B are read from shared memory, not {op}")
    t, rows = (form.a, M) if op == "A" else (form.b, form.n)
    return _read(form, t, smem, word, rows, trans)


def _read(form: WgmmaForm, t: Any, smem: np.ndarray, word: int, rows: int, trans: int
          ) -> np.ndarray:
    mem = np.asarray(smem)
    if mem.dtype != np.uint8 or mem.ndim != 1:
        raise WgmmaRefError(f"shared memory is a 1-D uint8 byte array, not {mem.dtype} "
                            f"{mem.shape}")
    addr, esize = _operand_addresses(form, word, rows, trans)
    top = int(addr.max()) + esize
    if int(addr.min()) < 0 or top > mem.size:
        raise WgmmaRefError(f"{form.name}: descriptor {int(word):#018x} reads bytes up to "
                            f"{top}, beyond the {mem.size} bytes of shared memory given")
    codes = np.zeros(addr.shape, dtype=np.uint64)
    for j in range(esize):
        codes |= mem[addr + j].astype(np.uint64) << np.uint64(8 * j)
    if t.name == "b1":
        bits = (codes[:, :, None] >> np.arange(8, dtype=np.uint64)) & np.uint64(1)
        return bits.reshape(rows, -1).astype(np.int64)
    return codes_to_values(t, codes)


def write_operand(form: WgmmaForm, op: str, smem: np.ndarray, word: int, tile: Any,
                  trans: int = 0) -> None:
    """Store the operand tile (A 64 x K or B N x K) into ``smem`` where the descriptor
    ``word`` makes the instruction read it (the inverse of :func:`read_operand`)."""
    op = op.upper()
    t = form.a if op == "A" else form.b
    arr = np.asarray(tile)
    rows = M if op == "A" else form.n
    if arr.shape != (rows, form.k):
        raise WgmmaRefError(f"{form.name}: {op} is {rows} x {form.k}, not {arr.shape}")
    addr, esize = _operand_addresses(form, word, rows, trans)
    if t.name == "b1":
        bits = arr.astype(np.uint64).reshape(rows, -1, 8)
        codes = (bits << np.arange(8, dtype=np.uint64)).sum(axis=2).astype(np.uint64)
    else:
        codes = values_to_codes(t, arr)
    for j in range(esize):
        smem[addr + j] = ((codes >> np.uint64(8 * j)) & np.uint64(0xFF)).astype(np.uint8)


# --------------------------------------------------------------------------- the instruction


def _immediates(form: WgmmaForm, scale_a: int, scale_b: int, trans_a: int, trans_b: int
                ) -> None:
    given = {"scale_a": scale_a, "scale_b": scale_b, "trans_a": trans_a, "trans_b": trans_b}
    for what, v in given.items():
        legal = (1, -1) if what.startswith("scale") else (0, 1)
        if v not in legal:
            raise WgmmaRefError(f"{form.name}: {what} must be {legal[0]} or {legal[1]}, got {v!r}")
        default = 1 if what.startswith("scale") else 0
        if v != default and what not in form.immediates:
            raise WgmmaRefError(f"{form.name} takes no {what} immediate (it takes "
                                f"{', '.join(form.immediates) or 'none'})")


def reference_d(form: WgmmaForm, a: np.ndarray, b: np.ndarray, c: np.ndarray | None
                ) -> np.ndarray:
    """A (64 x K) x B (N x K)^T [+ C]: int64 clamped or wrapped to s32, popc for b1, float64
    (unrounded) otherwise."""
    if form.bop is not None:
        d = (a.astype(np.int64)[:, None, :] & b.astype(np.int64)[None, :, :]).sum(axis=2)
    elif form.d.is_int:
        d = a.astype(np.int64) @ b.astype(np.int64).T
    else:
        d = a.astype(np.float64) @ b.astype(np.float64).T
    if c is not None:
        d = d + c
    if form.d.is_int:
        d = np.clip(d, INT32_MIN, INT32_MAX) if form.satfinite else \
            (d - INT32_MIN) % 2**32 + INT32_MIN
    return d


def operands(form: WgmmaForm, a: Any, b_desc: int, smem: np.ndarray | None, *,
             scale_a: int = 1, scale_b: int = 1, trans_a: int = 0, trans_b: int = 0
             ) -> tuple[np.ndarray, np.ndarray]:
    """The decoded A (64 x K) and B (N x K) the instruction multiplies, negations applied."""
    _immediates(form, scale_a, scale_b, trans_a, trans_b)
    if form.a_source == "rs":
        if trans_a:  # pragma: no cover - _immediates rejects it
            raise WgmmaRefError(f"{form.name}: an rs form has no trans-a")
        at = decode_a(form, a)
    else:
        if smem is None:
            raise WgmmaRefError(f"{form.name}: an ss form reads A from shared memory: give it")
        if not isinstance(a, (int, np.integer)):
            raise WgmmaRefError(f"{form.name}: A of an ss form is a 64-bit descriptor word")
        at = _read(form, form.a, smem, int(a), M, trans_a)
    if smem is None:
        raise WgmmaRefError(f"{form.name}: B is read from shared memory: give it")
    bt = _read(form, form.b, smem, int(b_desc), form.n, trans_b)
    return at * scale_a, bt * scale_b


def wgmma(form: WgmmaForm, d: Any, a: Any, b_desc: int, smem: np.ndarray | None, *,
          scale_d: bool = True, scale_a: int = 1, scale_b: int = 1, trans_a: int = 0,
          trans_b: int = 0) -> np.ndarray:
    """The 128 threads' D registers after one ``wgmma.mma_async`` of ``form``.

    ``d``: the D registers before (read when ``scale_d``; may be None otherwise); ``a``: the
    A descriptor word (``ss``) or ``np.uint32[128, 4]`` (``rs``); ``b_desc``: B's
    descriptor word; ``smem``: the shared-memory bytes (``np.uint8``, indexed by shared
    address) both descriptors point into."""
    at, bt = operands(form, a, b_desc, smem, scale_a=scale_a, scale_b=scale_b,
                      trans_a=trans_a, trans_b=trans_b)
    c = decode_d(form, d) if scale_d else None
    return encode_d(form, reference_d(form, at, bt, c))


def error_bound(form: WgmmaForm, a: np.ndarray, b: np.ndarray, c: np.ndarray | None
                ) -> np.ndarray:
    """Largest |D_hardware - D_model| per element of D for decoded A, B (and C when scale-d):
    0 for integer and b1 forms; for floats ``tol * (sum_k |a b| + |c|)`` plus one unit in the
    last place of D, ``tol`` = 2^-8 for f16 accumulation, 2^-10 for FP8 into f32 (Hopper's
    FP8 accumulation keeps fewer bits than f32) and 2^-20 otherwise (the tolerances of
    tests/gpu/test_wgmma_gpu.py, measured on an H100)."""
    if form.d.is_int:
        return np.zeros((M, form.n))
    mag = np.abs(a) @ np.abs(b).T + (0 if c is None else np.abs(c))
    if form.d.name == "f16":
        tol, mant = 2.0**-8, 10
    else:
        tol, mant = (2.0**-10 if form.family == "fp8" else 2.0**-20), 23
    d = np.abs(reference_d(form, a, b, c))
    ulp = np.exp2(np.floor(np.log2(np.maximum(d, math.ldexp(1.0, -1000))))) * 2.0**-mant
    return tol * mag + ulp
