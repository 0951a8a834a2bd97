"""Swizzle and ComposedLayout.

Sources: [sw] include/cute/swizzle.hpp (the bit diagram, the masks, make_swizzle examples);
[swl] include/cute/swizzle_layout.hpp; [ut:X] test/unit/cute/core/X.cpp; [ptx] the PTX ISA's
128-byte shared-memory swizzle (16-byte chunk c of 128-byte row r lands at chunk c ^ (r % 8)).
"""

from __future__ import annotations

import pytest

from nvatom.layout import (
    ComposedLayout,
    Layout,
    Swizzle,
    _,
    coalesce,
    compatible,
    complement,
    composition,
    cosize,
    downcast,
    layouts_equivalent,
    left_inverse,
    logical_divide,
    make_layout,
    make_swizzle,
    max_common_vector,
    parse_layout,
    right_inverse,
    size,
    slice,
    slice_and_offset,
    tile_to_shape,
    upcast,
    zipped_divide,
)

P = parse_layout


def test_masks_and_apply() -> None:
    # [sw] yyy_msk = bit_msk << (M + max(0,S)), zzz_msk = bit_msk << (M - min(0,S)).
    sw = Swizzle(3, 4, 3)
    assert (sw.yyy_msk, sw.zzz_msk) == (0b1110000000, 0b0001110000)
    neg = Swizzle(2, 1, -3)
    assert (neg.yyy_msk, neg.zzz_msk) == (0b0000110, 0b0110000)
    # offset ^ shiftr(offset & yyy, S): a negative S shifts left.
    assert neg(0b0000010) == 0b0000010 ^ 0b0010000
    assert sw(0b0010000000) == 0b0010010000


def test_128b_swizzle_pattern() -> None:
    # [ptx] Sw<3,4,3> on byte offsets: chunk c of row r moves to chunk c ^ (r % 8).
    sw = Swizzle(3, 4, 3)
    for r in range(16):
        for c in range(8):
            for byte in (0, 5, 15):
                off = r * 128 + c * 16 + byte
                assert sw(off) == r * 128 + ((c ^ (r % 8)) * 16) + byte


def test_make_swizzle_examples() -> None:
    # [sw] make_swizzle<0b1000, 0b0100>() -> Swizzle<1,2,1>;
    #      make_swizzle<0b11000000, 0b00000110>() -> Swizzle<2,1,5>.
    assert make_swizzle(0b1000, 0b0100) == Swizzle(1, 2, 1)
    assert make_swizzle(0b11000000, 0b00000110) == Swizzle(2, 1, 5)
    assert make_swizzle(0, 0) == Swizzle(0, 0, 0)


def test_print_and_parse() -> None:
    # [swl]/layout_composed.hpp print: "A o offset o B"; Swizzle prints as Sw<B,M,S>.
    cl = ComposedLayout(Swizzle(3, 4, 3), 0, P("(8,64):(64,1)"))
    assert str(cl) == "Sw<3,4,3> o 0 o (8,64):(64,1)"
    assert repr(cl) == "ComposedLayout('Sw<3,4,3> o 0 o (8,64):(64,1)')"
    assert repr(Swizzle(3, 4, 3)) == "Swizzle(3,4,3)"
    assert P("Sw<3,4,3> o 0 o (8,64):(64,1)") == cl
    assert P(" Sw < 3 , 4 , 3 >  o  (8,64):(64,1) ") == cl  # whitespace, no offset
    assert P("Sw<3,4,3> o _0 o (_8,_64):(_64,_1)") == cl  # CuTe's static underscores
    assert ComposedLayout("Sw<2,0,-3> o 5 o 8:1") == ComposedLayout(Swizzle(2, 0, -3), 5, P("8:1"))


def test_composed_layout_as_a_function() -> None:
    cl = ComposedLayout(Swizzle(3, 4, 3), 0, P("(8,64):(64,1)"))
    lay = P("(8,64):(64,1)")
    assert size(cl) == 512 and cl.shape == (8, 64) and cl.rank == 2
    assert cosize(cl) == cosize(lay)  # [layout_composed.hpp] cosize is the outer layout's
    for i in range(8):
        for j in range(64):
            assert cl(i, j) == Swizzle(3, 4, 3)(lay(i, j))
    assert cl[1] == ComposedLayout(Swizzle(3, 4, 3), 0, P("64:1"))


@pytest.mark.parametrize(
    "cl",
    [  # [ut:swizzle_layout]
        ComposedLayout(Swizzle(3, 0, 3), 0, P("(8,8):(8,1)")),
        ComposedLayout(Swizzle(3, 0, -3), 0, P("(8,8):(8,1)")),
        ComposedLayout(Swizzle(2, 1, 3), 0, P("((2,2,2),(2,2,2)):((32,2,8),(4,1,16))")),
        ComposedLayout(Swizzle(3, 4, 3), 0, P("(8,64):(64,1)")),
    ],
)
def test_swizzle_2d_slicing(cl: ComposedLayout) -> None:
    # [ut:swizzle_layout] test_swizzle_2d: row and column slices agree with the full layout
    # (the unit test slices a tensor, which adds the returned offset to its pointer).
    m, n = size(cl.outer[0]), size(cl.outer[1])
    for i in range(m):
        row, off = slice_and_offset((i, _), cl)
        assert [row(j) + off for j in range(n)] == [cl(i, j) for j in range(n)]
    for j in range(n):
        col, off = slice_and_offset((_, j), cl)
        assert [col(i) + off for i in range(m)] == [cl(i, j) for i in range(m)]


def test_slice_decays_to_layout() -> None:
    # [swl] a row of Sw<3,0,3> o (8,8):(8,1) touches only Z bits: it decays to a Layout whose
    # strides flip sign with the row's Y bits; every column touches Y only.
    cl = ComposedLayout(Swizzle(3, 0, 3), 0, P("(8,8):(8,1)"))
    row, off = slice_and_offset((5, _), cl)
    assert isinstance(row, Layout)
    assert [row(j) + off for j in range(8)] == [cl(5, j) for j in range(8)]
    col, off = slice_and_offset((_, 2), cl)
    assert isinstance(col, Layout)
    assert [col(i) + off for i in range(8)] == [cl(i, 2) for i in range(8)]
    # All wildcards: no decay, only the outer layout is sliced.
    assert slice((_, _), cl) == cl


def test_divide_and_product_act_on_outer() -> None:
    cl = ComposedLayout(Swizzle(3, 4, 3), 0, P("(8,64):(64,1)"))
    t = (P("4:1"), P("8:1"))
    d = logical_divide(cl, t)
    assert isinstance(d, ComposedLayout) and d.inner == cl.inner
    assert d.outer == logical_divide(cl.outer, t)
    assert zipped_divide(cl, t).outer == zipped_divide(cl.outer, t)
    tiled = tile_to_shape(cl, (64, 128))
    assert tiled.outer == tile_to_shape(cl.outer, (64, 128))
    assert coalesce(cl).outer == coalesce(cl.outer)
    assert complement(cl) == complement(cl.outer, cosize(cl.outer))


def test_composition_with_swizzle() -> None:
    # [ut:composition] "Swizzle composition": R(c) == A(B(c)) for c in B's domain.
    a = P("(8,8):(8,1)")
    for a_, b_ in [
        (a, composition(Swizzle(2, 0, -3), P("(8,8):(8,1)"))),
        (composition(Swizzle(2, 0, 3), P("(8,8):(8,1)")),
         composition(Swizzle(2, 0, -3), P("(8,8):(8,1)"))),
    ]:
        r = composition(a_, b_)
        assert compatible(b_.shape, r.shape)
        assert all(r(c) == a_(b_(c)) for c in range(size(b_)))
    # The identity swizzle is dropped, as in CuTe.
    assert composition(Swizzle(0, 3, 3), a) == a
    assert make_layout(Swizzle(3, 4, 3)) == ComposedLayout(Swizzle(3, 4, 3), 0, P("1024:1"))


@pytest.mark.parametrize(
    "cl",
    [  # [ut:inverse_right] / [ut:inverse_left] swizzle cases
        ComposedLayout(Swizzle(1, 0, 2), 0, P("(4,4):(1,4)")),
        ComposedLayout(Swizzle(1, 0, 2), 0, P("(4,4):(4,1)")),
        ComposedLayout(Swizzle(1, 0, 1), 0, P("(4,4):(8,1)")),
    ],
)
def test_swizzle_inverses(cl: ComposedLayout) -> None:
    rinv = right_inverse(cl)
    assert all(cl(rinv(i)) == i for i in range(size(rinv)))
    linv = left_inverse(cl)
    assert all(linv(cl(i)) == i for i in range(size(cl)))


def test_swizzle_up_and_downcast() -> None:
    # [swl] upcast<N>(Swizzle<B,M,S>) = Swizzle<B, M - log2 N, S> (bits below the unit are
    # lost: Swizzle<max(B+M',0), 0, S> when M' < 0); downcast adds log2 N to M.
    assert upcast(Swizzle(3, 4, 3), 2) == Swizzle(3, 3, 3)
    assert upcast(Swizzle(3, 4, 3), 64) == Swizzle(1, 0, 3)
    assert upcast(Swizzle(3, 4, 3), 256) == Swizzle(0, 0, 3)
    assert downcast(Swizzle(3, 3, 3), 2) == Swizzle(3, 4, 3)
    bytes_cl = ComposedLayout(Swizzle(3, 4, 3), 0, P("(8,128):(128,1)"))
    half = upcast(bytes_cl, 2)
    assert half == ComposedLayout(Swizzle(3, 3, 3), 0, P("(8,64):(64,1)"))
    # In units of 2 bytes the swizzle is the same function on addresses.
    for i in range(8):
        for j in range(64):
            assert 2 * half(i, j) == bytes_cl(i, 2 * j)
    assert downcast(half, 2) == bytes_cl
    with pytest.raises(ValueError):
        upcast(Swizzle(3, 4, 3), 3)


def test_max_common_vector_swizzled() -> None:
    # [swl] a swizzle keeps at most 2^M contiguous elements together.
    cl = ComposedLayout(Swizzle(3, 3, 3), 0, P("(8,64):(64,1)"))
    row_major = P("(8,64):(64,1)")
    assert max_common_vector(row_major, row_major) == 512
    assert max_common_vector(cl, row_major) == 8


def test_equivalence_with_composed() -> None:
    cl = ComposedLayout(Swizzle(2, 0, 2), 0, P("16:1"))
    table = [Swizzle(2, 0, 2)(i) for i in range(16)]
    assert layouts_equivalent(cl, cl)
    assert not layouts_equivalent(cl, P("16:1"))
    assert layouts_equivalent(ComposedLayout(Swizzle(2, 0, 2), 0, P("(4,4):(1,4)")), cl)
    assert [cl(i) for i in range(16)] == table
