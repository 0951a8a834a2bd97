"""SM90 warpgroup fragments (nvatom.atoms.wgmma_fragments) against CUTLASS and the PTX ISA.

Known answers, typed in from CUTLASS include/cute/atom/mma_traits_sm90_gmma.hpp:

* ``CLayout_64xN = ((4,8,4),(2,2,N/8)):((128,1,16),(64,8,512))`` (the accumulator);
* ``ALayout_64x8 = ((4,8,4),(2,2)):((64,1,16),(8,256))`` (32-bit A, rs);
* ``ALayout_64x16 = ((4,8,4),(2,2,2)):((128,1,16),(64,8,512))`` (16-bit A, rs);
* ``ALayout_64x32 = ((4,8,4),(4,2,2)):((256,1,16),(64,8,1024))`` (8-bit A, rs).

The ISA formulas (PTX ISA "Asynchronous Warpgroup Level Matrix Fragment", Register
Fragments for D and A) are re-evaluated here independently, element by element.
"""

from __future__ import annotations

import pytest

from nvatom.atoms.fragments import FragmentError
from nvatom.atoms.sm90 import FORMS, wgmma_form
from nvatom.atoms.wgmma_fragments import (
    a_coord,
    a_layout,
    accumulator_coord,
    accumulator_layout,
    register_values,
    wgmma_tv_layout,
)
from nvatom.layout import Layout, layouts_equivalent, size


def _cutlass_clayout(n: int) -> Layout:
    return Layout(((4, 8, 4), (2, 2, n // 8)), ((128, 1, 16), (64, 8, 512)))


CUTLASS_A = {
    32: Layout(((4, 8, 4), (2, 2)), ((64, 1, 16), (8, 256))),
    16: Layout(((4, 8, 4), (2, 2, 2)), ((128, 1, 16), (64, 8, 512))),
    8: Layout(((4, 8, 4), (4, 2, 2)), ((256, 1, 16), (64, 8, 1024))),
}


@pytest.mark.parametrize("n", list(range(8, 257, 8)))
def test_accumulator_is_cutlass_clayout(n: int) -> None:
    got = accumulator_layout(n)
    want = _cutlass_clayout(n)
    for t in range(128):
        for i in range(n // 2):
            assert got(t, i) == want(t, i), (n, t, i)
    assert size(got) == 64 * n
    if n > 8:
        assert got == want


@pytest.mark.parametrize("n", [8, 16, 24, 64, 128, 256])
def test_accumulator_isa_formula_and_coverage(n: int) -> None:
    lay = accumulator_layout(n)
    seen = set()
    for t in range(128):
        w, lane = t // 32, t % 32
        g, tig = lane >> 2, lane % 4
        for i in range(n // 2):
            row = 16 * w + g + 8 * ((i // 2) % 2)
            col = 8 * (i // 4) + 2 * tig + i % 2
            assert accumulator_coord(n, t, i) == (row, col)
            assert lay(t, i) == row + 64 * col
            seen.add(lay(t, i))
    assert seen == set(range(64 * n))  # every element of D exactly once (64 N values)


def test_warp_owns_sixteen_rows() -> None:
    lay = accumulator_layout(64)
    for w in range(4):
        rows = {lay(t, i) % 64 for t in range(32 * w, 32 * w + 32) for i in range(32)}
        assert rows == set(range(16 * w, 16 * w + 16))


@pytest.mark.parametrize("bits", [32, 16, 8])
def test_a_layout_is_cutlass(bits: int) -> None:
    got, want = a_layout(bits), CUTLASS_A[bits]
    assert got == want
    assert layouts_equivalent(got, want)


@pytest.mark.parametrize("bits", [32, 16, 8, 1])
def test_a_isa_formula_and_coverage(bits: int) -> None:
    p, k = 32 // bits, 256 // bits
    lay = a_layout(bits)
    seen = set()
    for t in range(128):
        w, lane = t // 32, t % 32
        g, tig = lane >> 2, lane % 4
        for i in range(4 * p):
            r, j = i // p, i % p
            # m16n8k* A fragment of warp w: a_r at row g + 8 (r % 2), K block r // 2
            row = 16 * w + g + 8 * (r % 2)
            col = (r // 2) * 4 * p + tig * p + j
            assert a_coord(bits, t, i) == (row, col)
            assert lay(t, i) == row + 64 * col
            seen.add(lay(t, i))
    assert seen == set(range(64 * k))


def test_a_matches_the_warp_m16n8k16_fragment() -> None:
    """Per warp, the 16-bit rs A fragment is mma.sync m16n8k16's A (fragments.py)."""
    from nvatom.atoms.fragments import rowcol_fragment

    warp = rowcol_fragment("A", 16, 8, 16, 16)  # (lane, value) -> m + 16 k
    lay = a_layout(16)
    for w in range(4):
        for lane in range(32):
            for i in range(8):
                m16 = warp(lane, i)
                assert lay(32 * w + lane, i) == 16 * w + m16 % 16 + 64 * (m16 // 16)


def test_tv_layouts_of_forms() -> None:
    ss = wgmma_form("sm90.mma.m64n128k16.ss.f32.f16.f16")
    rs = wgmma_form("sm90.mma.m64n64k32.rs.s32.s8.s8")
    h = wgmma_form("sm90.mma.m64n64k16.ss.f16.f16.f16")
    assert wgmma_tv_layout(ss, "D") == _cutlass_clayout(128)
    assert wgmma_tv_layout(rs, "A") == CUTLASS_A[8]
    assert register_values(ss, "D") == 1
    assert register_values(h, "D") == 2  # f16x2
    assert register_values(rs, "A") == 4
    with pytest.raises(FragmentError, match="descriptor"):
        wgmma_tv_layout(ss, "A")
    with pytest.raises(FragmentError, match="descriptor"):
        wgmma_tv_layout(ss, "B")
    with pytest.raises(FragmentError, match="unknown operand"):
        wgmma_tv_layout(ss, "E")


def test_every_form_fills_its_registers() -> None:
    for f in FORMS:
        d = wgmma_tv_layout(f, "D")
        assert size(d[0]) == 128
        assert size(d[1]) == f.registers("D") * register_values(f, "D")
        if f.a_source == "rs":
            a = wgmma_tv_layout(f, "A")
            assert size(a[1]) == 4 * (32 // f.a.pack_bits) == 4 * register_values(f, "A")


def test_errors() -> None:
    with pytest.raises(FragmentError):
        accumulator_layout(12)
    with pytest.raises(FragmentError):
        accumulator_coord(64, 128, 0)
    with pytest.raises(FragmentError):
        accumulator_coord(64, 0, 32)
    with pytest.raises(FragmentError):
        a_layout(64)
    with pytest.raises(FragmentError):
        a_coord(16, 0, 8)
