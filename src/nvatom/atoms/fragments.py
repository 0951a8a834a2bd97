"""Warp-level MMA fragments: the PTX ISA's lane/element formulas, turned into CuTe layouts.

The PTX ISA describes each mma.sync operand as a formula: lane ``%laneid`` holds elements
``a0, a1, ...`` at (row, col) given by ``groupID = laneid >> 2``, ``threadID_in_group =
laneid % 4`` and the element index (sections "Matrix Fragments for mma.m16n8k*" and
"mma.m8n8k*").  Every m16n8k* and m8n8k{16,32,128} form follows one pattern, parametrised by
the element width:

* a 32-bit register holds ``p = 32 / bits`` consecutive K elements (one element for f64);
* A (M x K): register ``r`` covers row ``groupID + 8 * rh`` and columns
  ``kb * 4p + threadID_in_group * p + [0, p)``, with ``rh`` the fastest register index when
  M = 16 and ``kb`` the K block;
* B (K x N): rows ``kb * 4p + threadID_in_group * p + [0, p)``, column ``groupID``;
* C/D (M x N): element ``c_i`` at row ``groupID + 8 * (i // 2)``, column
  ``threadID_in_group * 2 + i % 2``.

:func:`layout_from_function` turns such a formula into a CuTe (thread, value) layout by
reading the function at unit coordinates of a chosen domain shape and then checking every
point, so layouts are *derived*, never typed in, and a formula that is not a layout fails
loudly.  Layout codomains follow CuTe's MMA_Traits: A as (M, K), B as (N, K) and C as (M, N),
column-major (``m + M * k``).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable

from nvatom.errors import NvatomError
from nvatom.layout import Layout

__all__ = [
    "FragmentError",
    "Operand",
    "layout_from_function",
    "rowcol_fragment",
]

Operand = str  # "A", "B", "C" (C and D share a fragment)


class FragmentError(NvatomError):
    """A fragment formula that is not a layout, or an operand that does not exist."""


def _flat(t: object) -> list[int]:
    if isinstance(t, tuple):
        return [x for e in t for x in _flat(e)]
    return [int(t)]  # type: ignore[call-overload]


def _unflatten(flat: list[int], like: object) -> object:
    it = iter(flat)

    def build(t: object) -> object:
        if isinstance(t, tuple):
            return tuple(build(e) for e in t)
        return next(it)

    return build(like)


def layout_from_function(
    thr_shape: object, val_shape: object, fn: Callable[[int, int], int], what: str = "fragment"
) -> Layout:
    """The layout ``(thr_shape, val_shape) -> int`` equal to ``fn(thread, value)`` everywhere.

    Strides are read at unit coordinates of each flattened mode; then every (thread, value)
    is checked.  Raises FragmentError when ``fn`` is not of that form.
    """
    shape = (thr_shape, val_shape)
    sizes = _flat(shape)
    nthr = math.prod(_flat(thr_shape))
    strides: list[int] = []
    for j, s in enumerate(sizes):
        if s == 1:
            strides.append(0)
            continue
        unit = math.prod(sizes[:j])  # colexicographic index of the unit coordinate
        t, v = (unit, 0) if unit < nthr else (0, unit // nthr)
        strides.append(fn(t, v) - fn(0, 0))
    if fn(0, 0) != 0:
        raise FragmentError(f"{what}: element (thread 0, value 0) is at {fn(0, 0)}, not 0")
    layout = Layout(shape, _unflatten(strides, shape))
    nval = math.prod(_flat(val_shape))
    for t, v in itertools.product(range(nthr), range(nval)):
        if layout(t, v) != fn(t, v):
            raise FragmentError(
                f"{what}: the formula is not a layout of shape {shape}: thread {t}, value {v} "
                f"is at {fn(t, v)}, the layout {layout} gives {layout(t, v)}"
            )
    return layout


def _modes(*sizes: int) -> int | tuple[int, ...]:
    """A value-mode shape with the size-1 factors left out (CuTe writes (2,2), not (1,2,2))."""
    kept = tuple(s for s in sizes if s != 1)
    if not kept:
        return 1
    return kept[0] if len(kept) == 1 else kept


def _per_reg(bits: int) -> int:
    """Elements per 32-bit register (f64 takes a register pair for one element)."""
    return max(1, 32 // bits)


def rowcol_fragment(operand: Operand, m: int, n: int, k: int, bits: int) -> Layout:
    """(lane, value) -> tile index for the m16n8k*/m8n8k{16,32,128}/m8n8k4.f64 family."""
    if m not in (8, 16) or n != 8:
        raise FragmentError(f"no row/col fragment formula for m{m}n{n}k{k}")
    p = _per_reg(bits)
    rhalves = m // 8
    thr = (4, 8)  # (threadID_in_group, groupID): lane = tig + 4 * groupID

    def lane(t: int) -> tuple[int, int]:
        return t % 4, t // 4

    if operand == "A":
        if k % (4 * p):
            raise FragmentError(f"m{m}n{n}k{k}: K is not a multiple of 4 x {p} for {bits}-bit A")
        kblocks = k // (4 * p)

        def fa(t: int, i: int) -> int:
            tig, g = lane(t)
            j, rest = i % p, i // p
            rh, kb = rest % rhalves, rest // rhalves
            row, col = g + 8 * rh, kb * 4 * p + tig * p + j
            return row + m * col

        return layout_from_function(thr, _modes(p, rhalves, kblocks), fa, f"m{m}n{n}k{k} A")
    if operand == "B":
        kblocks = k // (4 * p)

        def fb(t: int, i: int) -> int:
            tig, g = lane(t)
            j, kb = i % p, i // p
            krow, col = kb * 4 * p + tig * p + j, g
            return col + n * krow

        return layout_from_function(thr, _modes(p, kblocks), fb, f"m{m}n{n}k{k} B")
    if operand in ("C", "D"):

        def fc(t: int, i: int) -> int:
            tig, g = lane(t)
            row, col = g + 8 * (i // 2), tig * 2 + i % 2
            return row + m * col

        return layout_from_function(thr, _modes(2, rhalves), fc, f"m{m}n{n}k{k} C")
    raise FragmentError(f"unknown operand '{operand}' (expected A, B, C or D)")
