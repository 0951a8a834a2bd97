"""Hypothesis strategies for random hierarchical layouts (small: size <= 512)."""

from __future__ import annotations

import math

from hypothesis import strategies as st

from nvatom.layout import Layout, flatten_to_tuple, product, unflatten

LEAVES = (1, 2, 3, 4, 6, 8)
MAX_SIZE = 512


@st.composite
def shapes(draw: st.DrawFn, max_size: int = MAX_SIZE, max_depth: int = 2) -> object:
    """A hierarchical shape of depth <= max_depth and size <= max_size."""

    def go(depth: int, budget: int) -> object:
        if depth == 0 or draw(st.integers(0, 9)) < 4:
            return draw(st.sampled_from([v for v in LEAVES if v <= max(budget, 1)]))
        n = draw(st.integers(1, 3))
        out = []
        for _ in range(n):
            v = go(depth - 1, budget)
            out.append(v)
            budget = max(1, budget // product(v))
        return tuple(out)

    return go(max_depth, max_size)


def _with_leaf_strides(shape: object, strides: list[int]) -> object:
    return unflatten(tuple(strides), shape) if isinstance(shape, tuple) else strides[0]


@st.composite
def compact_layouts(draw: st.DrawFn, max_size: int = MAX_SIZE) -> Layout:
    """Bijective layouts onto [0, size): a random order of the leaves, compact."""
    s = draw(shapes(max_size=max_size))
    leaves = flatten_to_tuple(s)
    order = draw(st.permutations(range(len(leaves))))
    strides = [0] * len(leaves)
    cur = 1
    for i in order:
        strides[i] = cur if leaves[i] != 1 else 0
        cur *= leaves[i]
    return Layout(s, _with_leaf_strides(s, strides))


@st.composite
def layouts(draw: st.DrawFn, max_size: int = MAX_SIZE) -> Layout:
    """Any layout: compact, compact with scaled/padded strides, or arbitrary strides."""
    kind = draw(st.integers(0, 2))
    if kind == 0:
        return draw(compact_layouts(max_size))
    s = draw(shapes(max_size=max_size))
    leaves = flatten_to_tuple(s)
    if kind == 1:
        # A compact order with some gaps between modes: injective, not onto.
        order = draw(st.permutations(range(len(leaves))))
        strides = [0] * len(leaves)
        cur = 1
        for i in order:
            strides[i] = cur
            cur *= leaves[i] * draw(st.sampled_from((1, 1, 2, 3)))
    else:
        strides = [draw(st.sampled_from((0, 1, 2, 3, 4, 8, 16))) for _ in leaves]
    return Layout(s, _with_leaf_strides(s, strides))


@st.composite
def tiles_of(draw: st.DrawFn, n: int) -> tuple[Layout, Layout]:
    """(C, T): C a compact layout of size n with a random leaf order, T a selection of C's
    leaves -- a tile that divides [0, n) evenly (so complement(T, n) completes it)."""
    factors = []
    m = n
    for p in (2, 3):
        while m % p == 0:
            factors.append(p)
            m //= p
    if m > 1:
        factors.append(m)
    # Group prime factors into leaves.
    leaves = []
    i = 0
    while i < len(factors):
        k = draw(st.integers(1, min(3, len(factors) - i)))
        leaves.append(math.prod(factors[i:i + k]))
        i += k
    if not leaves:
        leaves = [1]
    order = draw(st.permutations(range(len(leaves))))
    strides = [0] * len(leaves)
    cur = 1
    for j in order:
        strides[j] = cur
        cur *= leaves[j]
    keep = draw(st.lists(st.booleans(), min_size=len(leaves), max_size=len(leaves)))
    sel = [j for j in range(len(leaves)) if keep[j]] or [0]
    tile = Layout(tuple(leaves[j] for j in sel), tuple(strides[j] for j in sel))
    return Layout(tuple(leaves), tuple(strides)), tile
