"""Every invalid argument raises LayoutError (a ValueError) naming the layouts involved."""

from __future__ import annotations

import pytest

from nvatom.errors import LayoutError
from nvatom.layout import (
    ComposedLayout,
    Layout,
    Swizzle,
    _,
    blocked_product,
    ceil_div,
    complement,
    composition,
    crd2idx,
    downcast,
    get,
    group,
    idx2crd,
    left_inverse,
    logical_divide,
    logical_product,
    make_layout,
    make_ordered_layout,
    make_swizzle,
    parse_int_tuple,
    parse_layout,
    right_inverse,
    shape_div,
    slice,
    take,
    tile_to_shape,
    unflatten,
    upcast,
)

P = parse_layout


def raises(fn: object, *parts: str) -> LayoutError:
    with pytest.raises(LayoutError) as info:
        fn()  # type: ignore[operator]
    msg = str(info.value)
    for p in parts:
        assert p in msg, f"{p!r} not in {msg!r}"
    assert isinstance(info.value, ValueError)
    return info.value


@pytest.mark.parametrize(
    ("args", "part"),
    [
        (((4, 0), (1, 4)), "size must be >= 1"),
        (((4, -2), (1, 4)), "size must be >= 1"),
        (((4, 8), (1,)), "not congruent"),
        (((4, (2, 2)), (1, 4)), "not congruent"),
        (((4.0, 8), (1, 4)), "expected an int"),
        (((True, 8), (1, 4)), "expected an int"),
        ((None, None), "expected an int"),
    ],
)
def test_layout_constructor(args: tuple[object, object], part: str) -> None:
    raises(lambda: Layout(*args), "Layout", part)


def test_layout_accepts_lists_and_numpy() -> None:
    import numpy as np

    assert Layout([4, [2, 2]], [1, [4, 8]]) == P("(4,(2,2)):(1,(4,8))")
    assert Layout((np.int64(4), 8), (1, np.int32(4))) == P("(4,8):(1,4)")


def test_composition_stride_divisibility() -> None:
    # 5 is neither a multiple of nor smaller than the mode shape 4 (CuTe static_asserts).
    raises(lambda: composition(P("(4,8):(8,1)"), P("3:5")),
           "composition((4,8):(8,1), 3:5)", "stride 5", "shape 4")


def test_composition_shape_divisibility() -> None:
    raises(lambda: composition(P("(6,2):(1,8)"), P("8:1")),
           "composition((6,2):(1,8), 8:1)", "shape 8", "not a multiple of 6")


def test_composition_exact() -> None:
    assert composition(P("(6,4):(1,10)"), P("4:4")) == P("(2,2):(4,10)")  # CuTe 4.2 pads
    raises(lambda: composition(P("(6,4):(1,10)"), P("4:4"), exact=True),
           "composition((6,4):(1,10), 4:4)", "exact composition")
    # Each mode of B divides A, but B's two modes carry into each other inside A.
    assert composition(P("(4,4):(1,10)"), P("(2,4):(1,1)")) == P("(2,4):(1,1)")
    raises(lambda: composition(P("(4,4):(1,10)"), P("(2,4):(1,1)"), exact=True),
           "composition((4,4):(1,10), (2,4):(1,1))", "not the function composition",
           "at index 7")


def test_composition_tiler_errors() -> None:
    raises(lambda: composition(P("4:1"), (2, 2)), "composition(4:1", "2 modes", "only 1")
    raises(lambda: composition(P("(4,8):(1,4)"), (2, 0)), "tile size must be >= 1")
    raises(lambda: composition(P("(4,8):(1,4)"), "x"), "composition(", "unsupported")
    raises(lambda: composition(P("(4,8):(1,4)"), 2.5), "composition(", "unsupported")


def test_complement_non_injective() -> None:
    raises(lambda: complement(P("(2,2):(1,1)"), 8),
           "complement((2,2):(1,1), 8)", "has no complement", "not injective")
    raises(lambda: complement(P("(3,2):(2,3)")), "complement((3,2):(2,3))", "no complement")


def test_complement_bad_arguments() -> None:
    raises(lambda: complement(P("4:-1"), 8), "complement(4:-1, 8)", "negative stride")
    raises(lambda: complement(P("4:1"), 0), "complement(4:1, 0)", ">= 1")
    raises(lambda: complement(P("4:1"), 2.0), "complement(4:1", "expected an int")


def test_left_inverse_errors() -> None:
    raises(lambda: left_inverse(P("(4,2):(1,0)")), "left_inverse((4,2):(1,0))", "not injective")
    raises(lambda: left_inverse(P("(2,2):(1,1)")), "left_inverse((2,2):(1,1))", "not injective")
    raises(lambda: left_inverse(P("(2,2):(3,2)")), "left_inverse((2,2):(3,2))",
           "divisibility condition")
    raises(lambda: left_inverse(P("4:-1")), "left_inverse(4:-1)", "negative stride")


def test_divide_and_product_errors() -> None:
    raises(lambda: logical_divide(P("(4,8):(8,1)"), P("3:5")),
           "logical_divide((4,8):(8,1), 3:5)", "composition(", "stride 5")
    raises(lambda: logical_divide(P("8:1"), (2, 2)), "logical_divide(8:1, <2,2>)", "2 modes")
    raises(lambda: logical_divide(P("8:1"), P("(2,2):(1,1)")),
           "logical_divide(8:1, (2,2):(1,1))", "no complement")
    raises(lambda: logical_product(P("(2,2):(1,1)"), P("2:1")),
           "logical_product((2,2):(1,1), 2:1)", "no complement")
    raises(lambda: blocked_product(P("2:1"), "x"), "blocked_product(2:1", "must be a Layout")


def test_tile_to_shape_errors() -> None:
    raises(lambda: tile_to_shape(P("(2,2,2):(1,2,4)"), (4, 4)),
           "tile_to_shape((2,2,2):(1,2,4), (4,4)", "rank 3")
    raises(lambda: tile_to_shape(P("(2,3):(1,2)"), (4, 4)),
           "tile_to_shape((2,3):(1,2), (4,4)", "does not divide")


def test_upcast_downcast_errors() -> None:
    raises(lambda: upcast(P("2:3"), 2), "upcast(2:3, 2)", "stride 3")
    raises(lambda: upcast(P("8:1"), 0), "upcast", "positive int")
    raises(lambda: downcast(P("(4,8):(8,2)"), 2), "downcast((4,8):(8,2), 2)", "stride-1")


def test_swizzle_parameters() -> None:
    raises(lambda: Swizzle(-1, 2, 3), "Swizzle<-1,2,3>", "B")
    raises(lambda: Swizzle(2, -1, 3), "Swizzle<2,-1,3>", "M")
    raises(lambda: Swizzle(3, 4, 2), "Swizzle<3,4,2>", "|S| must be >= B")
    raises(lambda: Swizzle(3, 4, -2), "Swizzle<3,4,-2>", "|S| must be >= B")
    raises(lambda: Swizzle(3.0, 4, 3), "Swizzle", "must be an int")  # type: ignore[arg-type]
    raises(lambda: make_swizzle(0b1100, 0b0010), "make_swizzle", "bit counts")
    raises(lambda: make_swizzle(0b1010, 0b0101), "make_swizzle", "|S| must be >= B")
    raises(lambda: make_swizzle(0b10100, 0b00011), "make_swizzle", "contiguous")


def test_composed_layout_errors() -> None:
    raises(lambda: ComposedLayout(Swizzle(3, 4, 3), 0, (8, 8)), "outer must be a Layout")
    raises(lambda: ComposedLayout("x", 0, P("8:1")), "takes no other arguments")
    raises(lambda: ComposedLayout("8:1"), "ComposedLayout('8:1')", "plain Layout")
    raises(lambda: ComposedLayout(5, 0, P("8:1")), "inner must be a Swizzle or a Layout")
    cl = ComposedLayout(Swizzle(3, 4, 3), 16, P("(8,64):(64,1)"))
    raises(lambda: right_inverse(cl), "right_inverse(Sw<3,4,3> o 16 o (8,64):(64,1))",
           "nonzero offset")
    raises(lambda: upcast(ComposedLayout(Swizzle(3, 4, 3), 3, P("(8,64):(64,1)")), 2),
           "upcast(Sw<3,4,3> o 3 o (8,64):(64,1), 2)", "offset 3")
    raises(lambda: composition(P("8:1"), ComposedLayout(Swizzle(1, 0, 1), 2, P("4:1"))),
           "offset to be 0")


def test_coordinate_errors() -> None:
    lay = P("(4,8):(8,1)")
    raises(lambda: lay((1, 2, 3)), "(4,8):(8,1)", "rank mismatch")
    raises(lambda: lay(-1), "(4,8):(8,1)", "negative index")
    raises(lambda: lay("a"), "invalid coordinate")
    raises(lambda: lay[2], "get((4,8):(8,1), 2)", "out of range")
    raises(lambda: P("8:1")[1], "get(8:1, 1)", "out of range")
    raises(lambda: slice((_, _, _), lay), "slice(", "(4,8):(8,1)")
    raises(lambda: take(lay, 1, 3), "take((4,8):(8,1), 1, 3)")
    raises(lambda: group(lay, 1, 3), "group((4,8):(8,1), 1, 3)")
    raises(lambda: get(lay, "x"), "mode index must be an int")
    raises(lambda: crd2idx((1, 2), (4, 8, 2)), "crd2idx", "rank mismatch")
    raises(lambda: idx2crd(3, 4, 0), "idx2crd", "stride 0")


def test_int_tuple_errors() -> None:
    raises(lambda: shape_div(6, 4), "shape_div(6, 4)", "neither")
    raises(lambda: shape_div((4, 8), (2,)), "mismatched ranks")
    raises(lambda: ceil_div((4,), (2, 2)), "ceil_div", "more modes")
    raises(lambda: unflatten((1, 2, 3), (1, (1, 1, 1))), "unflatten", "3 leaves", "4 leaves")
    raises(lambda: make_ordered_layout((2, 2), (0, (1, 2))), "make_ordered_layout",
           "congruent")
    raises(lambda: make_layout(P("2:1"), (2, 2)), "make_layout", "mix of layouts")


@pytest.mark.parametrize(
    ("text", "pos", "part"),
    [
        ("(4,8:(8,1)", 4, "expected ',' or ')'"),
        ("(4,8):(8,1", 10, "expected ',' or ')'"),
        ("(4,8):(8,1,2)", 6, "not congruent"),
        ("(4,x)", 3, "expected an integer"),
        ("(4,0):(1,4)", 0, "size must be >= 1"),
        ("Sw<3,4,2> o 0 o 8:1", 0, "|S| must be >= B"),
        ("Sw<3,4> o 0 o 8:1", 6, "expected ','"),
        ("8:1 junk", 4, "unexpected 'j'"),
        ("Sw<3,4,3>", 9, "must be followed by"),
        ("", 0, "expected an integer"),
    ],
)
def test_parse_errors(text: str, pos: int, part: str) -> None:
    raises(lambda: parse_layout(text), repr(text), f"at position {pos}", part)


def test_parse_int_tuple_errors() -> None:
    raises(lambda: parse_int_tuple("(1,2"), "'(1,2'", "position 4")
    raises(lambda: parse_int_tuple("(1,2))"), "unexpected ')'", "position 5")
    raises(lambda: parse_layout(7), "expected a string")  # type: ignore[arg-type]
