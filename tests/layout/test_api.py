"""The Layout object, int-tuple helpers and CuTe notation.

Sources: [lay] media/docs/cute/01_layout.md; [hpp] include/cute/{int_tuple,stride,layout}.hpp
comments and definitions; [ops] media/docs/cute/02_layout_operations.md.
"""

from __future__ import annotations

import pickle

import pytest

import nvatom.layout as L
from nvatom.layout import (
    Layout,
    LayoutLeft,
    LayoutRight,
    _,
    append,
    compact_col_major,
    compact_row_major,
    compatible,
    congruent,
    cosize,
    crd2idx,
    depth,
    dice_layout,
    flatten,
    get,
    group,
    idx2crd,
    make_layout,
    nullspace,
    parse_int_tuple,
    parse_layout,
    prefix_product,
    prepend,
    rank,
    select,
    size,
    slice,
    suffix_product,
    take,
    weakly_compatible,
    weakly_congruent,
)

P = parse_layout


def test_rank_depth_size_of_int_tuples() -> None:
    # [lay] "IntTuple": an int has rank 1 and depth 0; (3,(6,2),8) nests one level.
    assert (rank(6), depth(6), size(6)) == (1, 0, 6)
    assert (rank((2,)), depth((2,)), size((2,))) == (1, 1, 2)
    assert (rank((4, 3)), depth((4, 3)), size((4, 3))) == (2, 1, 12)
    assert (rank((3, (6, 2), 8)), depth((3, (6, 2), 8)), size((3, (6, 2), 8))) == (3, 2, 288)


def test_layout_queries() -> None:
    lay = Layout(((4, 8), (2, 2, 2)), ((32, 1), (16, 8, 128)))
    assert (lay.rank, lay.depth, lay.size(), lay.cosize()) == (2, 2, 256, 256)
    assert (rank(lay), depth(lay), size(lay), cosize(lay)) == (2, 2, 256, 256)
    assert lay[0] == Layout((4, 8), (32, 1))
    assert lay[1, 2] == Layout(2, 128)
    assert get(lay, 0, 1) == Layout(8, 1)
    assert [m for m in lay] == [lay[0], lay[1]]
    assert P("8:1")[0] == P("8:1")  # get<0> of a scalar layout is itself [hpp int_tuple]


def test_compact_strides() -> None:
    # [hpp stride.hpp] compact_major: a static size-1 mode gets stride 0.
    assert compact_col_major((4, (1, 3))) == (1, (0, 4))
    assert compact_row_major((4, (1, 3))) == (3, (0, 1))
    assert make_layout((4, 1)) == P("(4,1):(1,0)")
    assert make_layout(1) == P("1:0")
    assert Layout(8) == P("8:1")
    assert prefix_product((2, (3, 4), 5)) == (1, (2, 6), 24)
    assert suffix_product((2, (3, 4), 5)) == (60, (20, 5), 1)
    assert LayoutRight((4, 8)) == Layout((4, 8), (8, 1))
    assert LayoutLeft((4, 8)) == Layout((4, 8), (1, 4))
    assert make_layout((4, 8), LayoutRight) == make_layout((4, 8), order=(1, 0))


def test_congruence_and_compatibility() -> None:
    # [hpp int_tuple.hpp] definitions.
    assert congruent((4, (2, 2)), (1, (5, 6)))
    assert not congruent((4, (2, 2)), (1, 5))
    assert weakly_congruent(4, (2, (2, 2)))
    assert weakly_congruent((4, 8), (2, (2, 2)))
    assert not weakly_congruent((4, (2, 2)), (2, 8))
    assert compatible(8, (2, 4))
    assert compatible((4, 8), (4, (2, 4)))
    assert not compatible((4, 8), 32)
    assert weakly_compatible(4, 8) and not weakly_compatible(3, 8)


def test_crd2idx_idx2crd() -> None:
    # [hpp stride.hpp] int coordinates unroll colexicographically; the last mode is unbounded.
    assert crd2idx(5, (4, 8), (1, 4)) == crd2idx((1, 1), (4, 8), (1, 4)) == 5
    assert crd2idx(9, (2, 3), (3, 1)) == 3 * 1 + 4 * 1  # (1, 4): mode 1 extends past 3
    assert idx2crd(17, ((2, 3), 5)) == ((1, 2), 2)
    assert crd2idx(((1, 2), 2), ((2, 3), 5)) == 17
    assert idx2crd((1, 5), (2, (2, 3))) == (1, (1, 2))
    lay = P("(4,8):(8,1)")
    assert lay(1, 2) == lay((1, 2)) == 10
    assert lay(33) == 1 * 8 + 8  # extension of the last mode


def test_slicing() -> None:
    lay = P("((4,8),(2,2,2)):((32,1),(16,8,128))")
    assert lay(_, 0) == P("((4,8)):((32,1))")
    assert lay((_, 3), _) == P("(4,(2,2,2)):(32,(16,8,128))")
    assert lay(None, (1, _, 0)) == lay(_, (1, _, 0)) == P("((4,8),2):((32,1),8)")
    assert slice(_, lay) == lay
    sub, off = L.slice_and_offset(((1, _), 3), lay)
    assert sub == P("(8):(1)") and off == 32 + 16 + 8
    assert dice_layout(((1, _), 3), lay) == P("(4,(2,2,2)):(32,(16,8,128))")
    assert slice(((1, 2), (0, 1, 1)), lay) == Layout((), ())


def test_mode_manipulation() -> None:
    lay = P("(2,3,4):(1,2,6)")
    assert select(lay, 2, 0) == P("(4,2):(6,1)")
    assert take(lay, 1, 3) == P("(3,4):(2,6)")
    assert group(lay, 0, 2) == P("((2,3),4):((1,2),6)")
    assert append(lay) == P("(2,3,4,1):(1,2,6,0)")
    assert append(P("8:1"), n=3) == P("(8,1,1):(1,0,0)")
    assert prepend(lay, P("5:100")) == P("(5,2,3,4):(100,1,2,6)")
    assert flatten(P("((2,3),(4,(5,6))):((1,2),(6,(24,120)))")) == P(
        "(2,3,4,5,6):(1,2,6,24,120)")
    assert make_layout(P("2:1"), P("(3,4):(2,6)")) == P("(2,(3,4)):(1,(2,6))")
    assert L.unflatten_layout(P("(2,3,4):(1,2,6)"), (1, (1, 1))) == P("(2,(3,4)):(1,(2,6))")


def test_nullspace() -> None:
    # [hpp layout.hpp] nullspace: the stride-0 modes, with compact strides.
    assert nullspace(P("(2,3,4):(0,1,0)")) == P("(2,4):(1,6)")
    assert nullspace(P("(2,3):(1,2)")) == P("1:0")


def test_equality_hash_pickle() -> None:
    a, b = P("(4,8):(8,1)"), Layout((4, 8), (8, 1))
    assert a == b and hash(a) == hash(b)
    assert P("8:1") != P("(8):(1)")  # structural: a 1-tuple is not a scalar
    assert a != "(4,8):(8,1)"
    assert len({a, b, P("(4,8):(1,4)")}) == 2
    assert pickle.loads(pickle.dumps(a)) == a
    assert Layout("(4,8):(8,1)") == a
    with pytest.raises(AttributeError):
        a.shape = (1,)  # type: ignore[misc]


def test_printing() -> None:
    # [lay]/[ops] CuTe prints shape:stride with nested parentheses and no spaces.
    assert str(P("((4,8),(2,2,2)):((32,1),(16,8,128))")) == "((4,8),(2,2,2)):((32,1),(16,8,128))"
    assert str(Layout(8, 1)) == "8:1"
    assert str(Layout((8,), (1,))) == "(8):(1)"
    assert str(Layout((), ())) == "():()"
    assert str(Layout((4, 1), (-1, 0))) == "(4,1):(-1,0)"
    assert repr(Layout((4, 8), (8, 1))) == "Layout('(4,8):(8,1)')"


def test_parsing() -> None:
    assert P("  ( 4 , 8 ) : ( 8 , 1 ) ") == Layout((4, 8), (8, 1))
    assert P("(4,8)") == Layout((4, 8))  # no stride: compact column-major
    assert P("_8:_1") == Layout(8, 1)
    assert P("(8):(1)") == Layout((8,), (1,))
    assert P("():()") == Layout((), ())
    assert P("4:-1") == Layout(4, -1)
    assert parse_int_tuple("((2,3),(4,(5)))") == ((2, 3), (4, (5,)))
    assert parse_int_tuple(" 7 ") == 7


def test_cosize_with_negative_stride() -> None:
    # [hpp layout.hpp] coshape uses |stride|.
    assert cosize(P("(4,2):(-1,4)")) == 1 + 3 + 4
