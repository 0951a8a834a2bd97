"""SM90 warpgroup MMA fragments: the PTX ISA's thread/element formulas as CuTe layouts.

A ``wgmma.mma_async`` is executed by a warpgroup of 128 threads, four warps; warp ``w`` of
the warpgroup (``w = thread // 32``) owns rows ``16w .. 16w + 15`` of D (64 x N) and, for the
``rs`` forms, of A (64 x K).  Inside a warp the PTX ISA ("Asynchronous Warpgroup Level
Matrix Fragment": "Register Fragments" for D and for A) uses the m16n8 pattern of
``mma.sync``, with ``groupID = laneid >> 2`` and ``threadID_in_group = laneid % 4``:

* D (M=64 x N): element ``d_i`` at row ``16w + groupID + 8 * ((i // 2) % 2)`` and column
  ``8 * (i // 4) + 2 * threadID_in_group + i % 2``; N/2 elements a thread (for f16
  accumulators two of them share a ``.f16x2`` register: register ``r`` holds ``d_2r`` low,
  ``d_2r+1`` high).
* A (M=64 x K, ``rs`` only): four ``.b32`` registers of ``p = 32 / bits`` K-consecutive
  elements; register ``r`` covers row ``16w + groupID + 8 * (r % 2)`` and columns
  ``4p * (r // 2) + p * threadID_in_group + [0, p)`` (K = 8p = 256 / bits).

:func:`layout_from_function` derives the (thread, value) layouts from these formulas; the
codomains follow CuTe's MMA_Traits: D as ``m + 64 * n``, A as ``m + 64 * k`` (column-major).
For 16-bit A the result is CUTLASS's ``ALayout_64x16 = ((4,8,4),(2,2,2)):((128,1,16),
(64,8,512))`` and the accumulator is ``CLayout_64xN = ((4,8,4),(2,2,N/8)):((128,1,16),
(64,8,512))`` (include/cute/atom/mma_traits_sm90_gmma.hpp); tests/atoms/test_wgmma_fragments.py
checks both against those known answers.
"""

from __future__ import annotations

import functools

from nvatom.atoms.fragments import FragmentError, layout_from_function
from nvatom.atoms.sm90 import M, WgmmaForm
from nvatom.layout import Layout, size

__all__ = [
    "WARPGROUP",
    "a_coord",
    "a_layout",
    "accumulator_coord",
    "accumulator_layout",
    "register_values",
    "wgmma_tv_layout",
]

WARPGROUP = 128
# thread = threadID_in_group + 4 * groupID + 32 * warp
_THR = (4, 8, 4)


def _split_thread(t: int) -> tuple[int, int, int]:
    if not 0 <= t < WARPGROUP:
        raise FragmentError(f"thread {t} is not in a 128-thread warpgroup")
    return t % 4, (t // 4) % 8, t // 32


def accumulator_coord(n: int, thread: int, i: int) -> tuple[int, int]:
    """(row, col) of accumulator element ``d_i`` of ``thread`` (PTX ISA formula)."""
    if n % 8 or not 8 <= n <= 256:
        raise FragmentError(f"wgmma N = {n} is not a multiple of 8 in 8..256")
    if not 0 <= i < n // 2:
        raise FragmentError(f"m64n{n}: accumulator element {i} is not in 0..{n // 2 - 1}")
    tig, g, w = _split_thread(thread)
    return 16 * w + g + 8 * ((i // 2) % 2), 8 * (i // 4) + 2 * tig + i % 2


@functools.cache
def accumulator_layout(n: int) -> Layout:
    """(thread, value) -> ``m + 64 * n`` of D (64 x N): CUTLASS's CLayout_64xN."""

    def f(t: int, i: int) -> int:
        row, col = accumulator_coord(n, t, i)
        return row + M * col

    return layout_from_function(_THR, (2, 2, n // 8) if n > 8 else (2, 2), f, f"m64n{n} D")


def _per_reg(bits: int) -> int:
    if bits not in (1, 4, 8, 16, 32):
        raise FragmentError(f"no wgmma A fragment for {bits}-bit elements")
    return 32 // bits


def a_coord(bits: int, thread: int, i: int) -> tuple[int, int]:
    """(row, col) of A element ``i`` of ``thread`` for an ``rs`` form of ``bits``-bit A
    (element ``i`` is bits ``(i % p) * bits`` of register ``i // p``)."""
    p = _per_reg(bits)
    if not 0 <= i < 4 * p:
        raise FragmentError(f"{bits}-bit A: element {i} is not in 0..{4 * p - 1}")
    tig, g, w = _split_thread(thread)
    r, j = i // p, i % p
    return 16 * w + g + 8 * (r % 2), 4 * p * (r // 2) + p * tig + j


@functools.cache
def a_layout(bits: int) -> Layout:
    """(thread, value) -> ``m + 64 * k`` of the ``rs`` A operand (64 x 256/bits):
    CUTLASS's ALayout_64x16 for 16-bit A."""
    p = _per_reg(bits)

    def f(t: int, i: int) -> int:
        row, col = a_coord(bits, t, i)
        return row + M * col

    val = (p, 2, 2) if p > 1 else (2, 2)
    return layout_from_function(_THR, val, f, f"wgmma {bits}-bit A")


def wgmma_tv_layout(form: WgmmaForm, operand: str) -> Layout:
    """The (thread, value) layout of a register operand of ``form``: D/C for every form, A
    for ``rs`` forms.  Shared-memory operands have none (they are read by descriptor)."""
    op = operand.upper()
    if op in ("C", "D"):
        return accumulator_layout(form.n)
    if op == "A" and form.a_source == "rs":
        return a_layout(form.a.pack_bits)
    if op in ("A", "B"):
        raise FragmentError(f"{form.name}: operand {op} is read from shared memory through a "
                            "descriptor; it has no register fragment")
    raise FragmentError(f"{form.name}: unknown operand '{operand}' (A, B, C or D)")


def register_values(form: WgmmaForm, operand: str) -> int:
    """Values of the operand packed in one register: 1 for f32/s32 D, 2 for f16 D,
    ``32 / bits`` for A."""
    op = operand.upper()
    layout = wgmma_tv_layout(form, op)
    per = size(layout[1]) // form.registers(op)
    if per * form.registers(op) != size(layout[1]):  # pragma: no cover
        raise FragmentError(f"{form.name}: {op} values do not fill its registers")
    return per
