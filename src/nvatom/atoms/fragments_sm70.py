"""SM70 ``mma.sync.aligned.m8n8k4`` (f16 inputs): the quad-pair fragments.

A warp executing m8n8k4 computes *four independent* 8x8x4 products, one per quad-pair: lanes
0-3 with 16-19, 4-7 with 20-23, 8-11 with 24-27 and 12-15 with 28-31 (PTX ISA "Matrix
Fragments for mma.m8n8k4 with .f16 floating point type").  As in CuTe (``mma_traits_sm70
.hpp``), the atom is one such product and its thread mode covers the eight threads of one
quad-pair: thread ``t`` in ``[0, 8)`` is lane ``t % 4 + 16 * (t // 4)`` of the first quad-pair
(:func:`m8n8k4_thr_id`, CuTe's ``SM70_QuadPair`` ``(4,2):(1,16)``), and quad-pair ``q`` adds
``4 * q``.  :func:`m8n8k4_warp_fragment` gives the same fragments indexed by all 32 lanes.

The ISA formulas, per lane of a quad-pair (``hi`` = lane >= 16):

* A row-major: (row, col) = (lane % 4 + 4 hi, i); column-major: (i + 4 hi, lane % 4);
* B row-major: (row, col) = (lane % 4, i + 4 hi); column-major: (i, lane % 4 + 4 hi);
* C/D .f16 (c0..c7): (lane % 4 + 4 hi, i);
* C/D .f32 (c0..c7): row = (lane & 1) + (i & 2) + 4 hi, col = (i & 4) + (lane & 2) + (i & 1).

Codomains follow CuTe: A as (M, K) = (8, 4), B as (N, K) = (8, 4), C as (M, N) = (8, 8), all
column-major.  Registers: A and B are two ``.b32`` (f16x2) each, C/D eight ``.f32`` or four
``.f16x2`` (PTX ISA "Matrix Fragments for mma.m8n8k4 with .f16 floating point type").
"""

from __future__ import annotations

from collections.abc import Callable

from nvatom.atoms.fragments import FragmentError, layout_from_function
from nvatom.layout import Layout

__all__ = [
    "QUAD_PAIRS",
    "m8n8k4_fragment",
    "m8n8k4_lane",
    "m8n8k4_quad_pair",
    "m8n8k4_thr_id",
    "m8n8k4_warp_fragment",
]

M, N, K = 8, 8, 4
QUAD_PAIRS = 4  # independent 8x8x4 products per warp


def m8n8k4_thr_id() -> Layout:
    """Quad-pair thread index ``t`` in ``[0, 8)`` -> lane of quad-pair 0: ``(4,2):(1,16)``."""
    return Layout((4, 2), (1, 16))


def m8n8k4_lane(t: int, quad_pair: int = 0) -> int:
    """The lane that plays thread ``t`` of the given quad-pair."""
    if not (0 <= t < 8 and 0 <= quad_pair < QUAD_PAIRS):
        raise FragmentError(f"m8n8k4: no thread {t} of quad-pair {quad_pair}")
    return int(m8n8k4_thr_id()(t)) + 4 * quad_pair


def m8n8k4_quad_pair(lane: int) -> tuple[int, int]:
    """(quad-pair, thread in the quad-pair) of a lane: the inverse of :func:`m8n8k4_lane`."""
    if not 0 <= lane < 32:
        raise FragmentError(f"m8n8k4: lane {lane} is not in [0, 32)")
    return (lane // 4) % 4, lane % 4 + 4 * (lane // 16)


def _check(operand: str, alayout: str, blayout: str, ctype: str) -> str:
    op = "C" if operand.upper() == "D" else operand.upper()
    if op not in ("A", "B", "C"):
        raise FragmentError(f"m8n8k4: unknown operand '{operand}' (expected A, B, C or D)")
    if alayout not in ("row", "col") or blayout not in ("row", "col"):
        raise FragmentError(f"m8n8k4: layouts must be row or col, got .{alayout}.{blayout}")
    if op == "C" and ctype not in ("f16", "f32"):
        raise FragmentError(f"m8n8k4: accumulator type must be f16 or f32, got {ctype}")
    return op


def _isa_rowcol(op: str, alayout: str, blayout: str, ctype: str
                ) -> Callable[[int, int], tuple[int, int]]:
    """(lane, i) -> (row, col) of the ISA's formula, for lanes of quad-pair 0."""

    def hi(lane: int) -> int:
        return 1 if lane >= 16 else 0

    if op == "A":
        if alayout == "row":
            return lambda lane, i: (lane % 4 + 4 * hi(lane), i)
        return lambda lane, i: (i % 4 + 4 * hi(lane), lane % 4)
    if op == "B":
        if blayout == "row":
            return lambda lane, i: (lane % 4, i + 4 * hi(lane))
        return lambda lane, i: (i, lane % 4 + 4 * hi(lane))
    if ctype == "f16":
        return lambda lane, i: (lane % 4 + 4 * hi(lane), i)
    return lambda lane, i: ((lane & 1) + (i & 2) + 4 * hi(lane), (i & 4) + (lane & 2) + (i & 1))


def _index(op: str, rowcol: tuple[int, int]) -> int:
    """Column-major index into the CuTe codomain of the operand."""
    row, col = rowcol
    if op == "A":  # A is M x K: (m, k)
        return row + M * col
    if op == "B":  # the ISA's B is K x N (row = k, col = n); CuTe's codomain is (N, K)
        return col + N * row
    return row + M * col


def _shapes(op: str, ctype: str) -> tuple[object, object]:
    """Thread and value modes: one mode per address bit where the formula needs it."""
    if op == "C" and ctype == "f32":
        return (2, 2, 2), (2, 2, 2)
    return (4, 2), (8 if op == "C" else 4)


def m8n8k4_fragment(operand: str, alayout: str, blayout: str, ctype: str) -> Layout:
    """(quad-pair thread, value) -> element of one 8x8x4 product, derived from the ISA formula.

    ``operand`` is A, B or C (D shares C's fragment); ``ctype`` the accumulator type.  The
    thread mode has 8 threads; :func:`m8n8k4_thr_id` maps them to lanes.
    """
    op = _check(operand, alayout, blayout, ctype)
    rowcol = _isa_rowcol(op, alayout, blayout, ctype)
    thr, val = _shapes(op, ctype)
    thr_id = m8n8k4_thr_id()

    def fn(t: int, i: int) -> int:
        return _index(op, rowcol(int(thr_id(t)), i))

    what = f"m8n8k4.{alayout}.{blayout} {op}" + (f" .{ctype}" if op == "C" else "")
    return layout_from_function(thr, val, fn, what)


def m8n8k4_warp_fragment(operand: str, alayout: str, blayout: str, ctype: str) -> Layout:
    """(lane, value) -> element of the lane's *own* quad-pair product, for all 32 lanes.

    Lane bits 2-3 (the quad-pair) have stride 0: the four products use the same fragment
    layout, each on its own tile.
    """
    op = _check(operand, alayout, blayout, ctype)
    rowcol = _isa_rowcol(op, alayout, blayout, ctype)
    _, val = _shapes(op, ctype)
    thr = (2, 2, 4, 2) if (op == "C" and ctype == "f32") else (4, 4, 2)

    def fn(lane: int, i: int) -> int:
        return _index(op, rowcol(lane % 4 + 16 * (lane // 16), i))

    what = f"m8n8k4.{alayout}.{blayout} {op} (warp)"
    return layout_from_function(thr, val, fn, what)
