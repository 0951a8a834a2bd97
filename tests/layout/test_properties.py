"""Property tests: the algebraic laws of CuTe's layout operations on random layouts."""

from __future__ import annotations

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from nvatom.errors import LayoutError
from nvatom.layout import (
    ComposedLayout,
    Layout,
    Swizzle,
    _,
    blocked_product,
    coalesce,
    compact_col_major,
    compatible,
    complement,
    composition,
    cosize,
    crd2idx,
    downcast,
    filter,
    flatten_to_tuple,
    idx2crd,
    layouts_equivalent,
    left_inverse,
    logical_divide,
    logical_product,
    make_layout,
    parse_layout,
    raked_product,
    right_inverse,
    size,
    slice_and_offset,
    upcast,
    zipped_divide,
)

from ._strategies import compact_layouts, layouts, shapes, tiles_of

SETTINGS = settings(max_examples=150, deadline=None)


def values(lay: Layout) -> list[int]:
    return [lay(i) for i in range(size(lay))]


@SETTINGS
@given(layouts(), layouts(max_size=64))
def test_exact_composition_is_function_composition(a: Layout, b: Layout) -> None:
    try:
        r = composition(a, b, exact=True)
    except LayoutError:
        return
    assert size(r) == size(b)
    assert compatible(b.shape, r.shape)
    for i in range(size(b)):
        assert r(i) == a(b(i))
    # Hierarchical coordinates of b are coordinates of r.
    assert r(idx2crd(size(b) - 1, b.shape)) == a(b(size(b) - 1))


@SETTINGS
@given(layouts(), layouts(max_size=64))
def test_composition_keeps_the_domain(a: Layout, b: Layout) -> None:
    """CuTe's (possibly padded) composition: never a wrong-size result."""
    try:
        r = composition(a, b)
    except LayoutError:
        return
    assert size(r) == size(b)
    assert compatible(b.shape, r.shape)
    try:
        exact = composition(a, b, exact=True)
    except LayoutError:
        return
    assert r == exact


@SETTINGS
@given(layouts(max_size=128), st.sampled_from([1, 7, 64, 128, 256, 1000]))
def test_complement_disjoint_and_ordered(lay: Layout, m: int) -> None:
    try:
        c = complement(lay, m)
    except LayoutError:
        return
    image = set(values(lay))
    cv = values(c)
    assert all(x < y for x, y in itertools.pairwise(cv))
    assert all(v not in image for v in cv[1:])
    # cosize((lay, c)) >= m holds only when the strides of lay chain by divisibility (CuTe
    # divides with truncation); test_complement_completes_a_tile covers that case.


@SETTINGS
@given(st.sampled_from([8, 12, 24, 36, 48, 64, 96, 128, 144, 256]).flatmap(tiles_of))
def test_complement_completes_a_tile(ct: tuple[Layout, Layout]) -> None:
    compact, tile = ct
    m = size(compact)
    full = make_layout(tile, complement(tile, m))
    assert size(full) == m
    assert sorted(values(full)) == list(range(m))


@SETTINGS
@given(layouts())
def test_right_inverse(lay: Layout) -> None:
    r = right_inverse(lay)
    for i in range(size(r)):
        assert lay(r(i)) == i
    comp = composition(lay, r)
    assert all(comp(i) == i for i in range(size(r)))


@SETTINGS
@given(compact_layouts())
def test_right_inverse_of_bijection_is_full(lay: Layout) -> None:
    r = right_inverse(lay)
    assert size(r) == size(lay)
    assert layouts_equivalent(composition(lay, r), Layout(size(lay)))


@SETTINGS
@given(st.sampled_from([8, 12, 24, 36, 48, 64, 96, 128, 144, 256]).flatmap(tiles_of))
def test_left_inverse_of_injective(ct: tuple[Layout, Layout]) -> None:
    _compact, tile = ct
    inv = left_inverse(tile)
    for i in range(size(tile)):
        assert inv(tile(i)) == i


@SETTINGS
@given(layouts())
def test_left_inverse_when_defined(lay: Layout) -> None:
    try:
        inv = left_inverse(lay)
    except LayoutError:
        return
    for i in range(size(lay)):
        assert inv(lay(i)) == i


@SETTINGS
@given(layouts(), layouts(max_size=32))
def test_logical_divide_structure(a: Layout, t: Layout) -> None:
    try:
        r = logical_divide(a, t)
    except LayoutError:
        return
    assert r.rank == 2
    assert compatible(t.shape, r[0].shape)
    assert r[0] == composition(a, t)
    assert zipped_divide(a, t) == r


@SETTINGS
@given(layouts(max_size=256), st.data())
def test_logical_divide_even_tile_permutes(a: Layout, data: st.DataObject) -> None:
    _compact, tile = data.draw(tiles_of(size(a)))
    try:
        r = logical_divide(a, tile)
    except LayoutError:
        return
    # CuTe 4.2 completes the tile against shape(coalesce(a)), mode by mode, and composes with
    # padding where a stride does not divide a mode; when neither happens, the divide is a
    # permutation of a's values.
    assert size(r) >= size(a)
    full = make_layout(tile, complement(tile, coalesce(a).shape))
    try:
        exact = composition(a, full, exact=True)
    except LayoutError:
        return
    assert exact == r
    if size(r) == size(a):
        assert sorted(values(r)) == sorted(values(a))


@SETTINGS
@given(layouts(max_size=64), layouts(max_size=16))
def test_logical_product(a: Layout, b: Layout) -> None:
    try:
        r = logical_product(a, b)
    except LayoutError:
        return
    assert r.rank == 2
    assert r[0] == a
    assert compatible(b.shape, r[1].shape)
    assert size(r) == size(a) * size(b)


@SETTINGS
@given(compact_layouts(max_size=32), compact_layouts(max_size=16))
def test_blocked_raked_products(a: Layout, b: Layout) -> None:
    blocked = blocked_product(a, b)
    raked = raked_product(a, b)
    logical = logical_product(a, b)
    assert size(blocked) == size(raked) == size(a) * size(b)
    assert sorted(values(blocked)) == sorted(values(logical)) == sorted(values(raked))


@SETTINGS
@given(layouts())
def test_coalesce(lay: Layout) -> None:
    c = coalesce(lay)
    assert size(c) == size(lay)
    assert c.depth <= 1
    assert values(c) == values(lay)
    shapes_ = flatten_to_tuple(c.shape)
    strides = flatten_to_tuple(c.stride)
    if shapes_ != (1,):
        assert 1 not in shapes_
    for k in range(len(shapes_) - 1):
        assert shapes_[k] * strides[k] != strides[k + 1]  # nothing left to merge
    assert layouts_equivalent(c, lay)


@SETTINGS
@given(layouts())
def test_filter(lay: Layout) -> None:
    f = filter(lay)
    assert set(values(f)) == set(values(lay))
    if f != Layout(1, 0):
        assert 0 not in flatten_to_tuple(f.stride)
        assert 1 not in flatten_to_tuple(f.shape)


@SETTINGS
@given(layouts())
def test_cosize_is_max_plus_one(lay: Layout) -> None:
    assert cosize(lay) == max(values(lay)) + 1


@SETTINGS
@given(layouts())
def test_print_parse_round_trip(lay: Layout) -> None:
    assert parse_layout(str(lay)) == lay
    assert eval(repr(lay), {"Layout": Layout}) == lay


@SETTINGS
@given(layouts(max_size=64), st.sampled_from([(3, 4, 3), (2, 0, 3), (1, 2, -2), (3, 3, 3)]),
       st.integers(0, 63))
def test_composed_round_trip(lay: Layout, bms: tuple[int, int, int], off: int) -> None:
    cl = ComposedLayout(Swizzle(*bms), off, lay)
    assert parse_layout(str(cl)) == cl
    assert eval(repr(cl), {"ComposedLayout": ComposedLayout}) == cl


@SETTINGS
@given(st.integers(0, 4), st.integers(0, 5), st.integers(-6, 6))
def test_swizzle_involution_and_bijection(b: int, m: int, s: int) -> None:
    if abs(s) < b:
        return
    sw = Swizzle(b, m, s)
    n = 1 << (b + m + abs(s))
    images = [sw(x) for x in range(n)]
    assert sorted(images) == list(range(n))
    assert all(sw(sw(x)) == x for x in range(2 * n))


@SETTINGS
@given(layouts(), st.data())
def test_slice_and_offset(lay: Layout, data: st.DataObject) -> None:
    def coord(s: object) -> object:
        if isinstance(s, tuple):
            return tuple(coord(v) for v in s)
        return data.draw(st.one_of(st.just(_), st.integers(0, s - 1)))  # type: ignore[operator]

    c = coord(lay.shape)
    sub, off = slice_and_offset(c, lay)

    for j in range(size(sub)):
        sub_crd = idx2crd(j, sub.shape) if isinstance(sub.shape, tuple) else j
        leaves = list(flatten_to_tuple(sub_crd)) if isinstance(sub_crd, tuple) else [sub_crd]
        # Expand sub's leaf coordinates into the wildcards in order.
        full = _expand(c, lay.shape, leaves)
        assert sub(j) + off == lay(full)


def _expand(c: object, s: object, leaves: list[int]) -> object:
    if isinstance(c, tuple):
        return tuple(_expand(x, y, leaves) for x, y in zip(c, s, strict=True))  # type: ignore[arg-type]
    if c is _:
        n = len(flatten_to_tuple(s)) if isinstance(s, tuple) else 1  # type: ignore[arg-type]
        taken = [leaves.pop(0) for _i in range(n)]
        if isinstance(s, tuple):
            return crd2idx(_unflat(taken, s), s)
        return taken[0]
    return c


def _unflat(vals: list[int], s: object) -> object:
    it = iter(vals)

    def go(t: object) -> object:
        if isinstance(t, tuple):
            return tuple(go(v) for v in t)
        return next(it)

    return go(s)


@SETTINGS
@given(shapes())
def test_idx2crd_crd2idx_round_trip(s: object) -> None:
    d = compact_col_major(s)  # type: ignore[arg-type]
    for i in range(size(s)):  # type: ignore[arg-type]
        c = idx2crd(i, s)  # type: ignore[arg-type]
        assert crd2idx(c, s) == i  # type: ignore[arg-type]
        assert crd2idx(c, s, d) == i  # type: ignore[arg-type]


@SETTINGS
@given(compact_layouts(max_size=256), st.sampled_from([2, 4]))
def test_upcast_then_downcast(lay: Layout, n: int) -> None:
    try:
        up = upcast(lay, n)
    except LayoutError:
        return
    if 1 not in flatten_to_tuple(up.stride):
        return
    down = downcast(up, n)
    if size(down) == size(lay):
        assert layouts_equivalent(down, lay)
