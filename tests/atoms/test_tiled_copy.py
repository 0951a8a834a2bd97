"""Tiled copies: CuTe's make_tiled_copy construction and partitioning of tiles."""

from __future__ import annotations

import pytest

from nvatom.atoms.interfaces import AtomVerificationError
from nvatom.atoms.tiled_copy import make_tiled_copy
from nvatom.layout import Layout, size


def test_cute_tutorial_copy_partition() -> None:
    # CuTe's GEMM tutorial (sgemm_1): 32x8 threads, column-major, each copying 4x1 values:
    # the tile is 128x8, thread t owns rows 4*(t%32)..+3 of column t//32.
    tc = make_tiled_copy(None, Layout((32, 8)), Layout((4, 1)))
    assert tc.tiler == (128, 8) and tc.threads == 256
    tensor = Layout((128, 8), (1, 128))  # column-major tile
    for t in (0, 1, 31, 32, 255):
        vals, off = tc.partition(tensor, t)
        got = [off + vals(i) for i in range(size(vals))]
        base = 4 * (t % 32) + 128 * (t // 32)
        assert got == [base, base + 1, base + 2, base + 3], t


def test_every_element_owned_once() -> None:
    tc = make_tiled_copy(None, Layout((8, 4), (4, 1)), Layout((1, 8)))
    tensor = Layout((16, 64), (64, 1))  # 2 x 2 tiles of 8 x 32, row-major
    owned = []
    for t in range(tc.threads):
        vals, off = tc.partition(tensor, t)
        owned += [off + vals(i) for i in range(size(vals))]
    assert sorted(owned) == list(range(16 * 64))


class _Atom:
    name = "atom.fake4"
    values_per_thread = 4


def test_values_must_be_whole_atom_calls() -> None:
    with pytest.raises(AtomVerificationError, match="not a multiple of the 4 values one "
                       "atom.fake4 call moves"):
        make_tiled_copy(_Atom(), Layout((32,)), Layout((2,)))
    make_tiled_copy(_Atom(), Layout((32,)), Layout((8,)))


def test_thread_range_and_layout_types() -> None:
    tc = make_tiled_copy(None, Layout((32,)), Layout((4,)))
    with pytest.raises(AtomVerificationError, match="thread 32 out of range"):
        tc.partition(Layout(128), 32)
    with pytest.raises(AtomVerificationError, match="the thread layout must be a plain Layout"):
        make_tiled_copy(None, "(32):(1)", Layout((4,)))  # type: ignore[arg-type]


def test_partition_pair_vectorises_to_the_atom_width() -> None:
    from nvatom.atoms.copy import copy_atom

    atom = copy_atom("atom.universal_copy<128>")  # 8 f16 per call
    tc = make_tiled_copy(atom, Layout((16, 8), (8, 1)), Layout((1, 8)))
    assert tc.tiler == (16, 64)
    rowmajor = Layout((16, 64), (64, 1))
    (s, s_off), (d, d_off) = tc.partition_pair(rowmajor, rowmajor, 9, 16)
    assert [d(i) for i in range(8)] == list(range(8))
    assert s_off == d_off == 1 * 64 + 8  # thread 9: row 1, columns 8..15
    assert [s(i) for i in range(8)] == list(range(8))


def test_partition_pair_spec_diagnostics() -> None:
    from nvatom import diagnostics as D
    from nvatom.atoms.copy import copy_atom

    atom = copy_atom("atom.universal_copy<128>")
    tc = make_tiled_copy(atom, Layout((16, 8), (8, 1)), Layout((1, 8)))
    rowmajor = Layout((16, 64), (64, 1))
    colmajor = Layout((16, 64), (1, 16))  # a thread's 8 values are 16 elements apart
    with pytest.raises(AtomVerificationError) as ei:
        tc.partition_pair(rowmajor, colmajor, 0, 16)
    assert str(ei.value) == D.VECTORIZE_STRIDES_ONE.format("atom.universal_copy<128>", 8)
    # Contiguous in both, but in another order: columns (c0, c1, c2) -> 4*c0 + c1 + 8*c2.
    shuffled = Layout((16, (2, 4, 8)), (64, (4, 1, 8)))
    with pytest.raises(AtomVerificationError) as ei:
        tc.partition_pair(rowmajor, shuffled, 0, 16)
    assert str(ei.value) == D.VECTORIZE_STRIDES_MATCH.format("atom.universal_copy<128>", 8)
