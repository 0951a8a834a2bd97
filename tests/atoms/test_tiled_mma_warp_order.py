"""The tiled MMA's two warp orders (``make_tiled_mma(warp_order=)``) against the PTX ISA's
m16n8k16 C fragment written out here: lane ``l`` holds c0..c3 at row ``l // 4 + 8 (v // 2)``
and column ``2 (l % 4) + v % 2`` of its 16 x 8 atom (PTX ISA "Matrix Fragments for
mma.m16n8k16", the f32 accumulator figure).  Warp ``w`` of a (LM, LN) warp layout is
``(w % LM, w // LM)`` (column-major, CuTe's).  Interleaved (CuTe's TiledMMA): the warp's
repetition ``(i, j)`` of the atom sits at rows ``16 (w_m + LM i)``, columns ``8 (w_n + LN j)``;
blocked: at rows ``16 (i + R_m w_m)``, columns ``8 (j + R_n w_n)`` (R the repetitions per
warp), so each warp owns one contiguous (16 R_m) x (8 R_n) block."""

from __future__ import annotations

import pytest

from nvatom.atoms.interfaces import AtomVerificationError
from nvatom.atoms.registry import mma_form
from nvatom.atoms.tiled_mma import make_tiled_mma

FORM = "sm80.mma.m16n8k16.f32.bf16.bf16.f32"


def _isa_c(lm: int, ln: int, tm: int, tn: int, order: str) -> dict[tuple[int, int], int]:
    """(row, col) -> thread over the tm x tn tile, from the ISA's fragment and the order."""
    rm, rn = tm // (16 * lm), tn // (8 * ln)
    out: dict[tuple[int, int], int] = {}
    for w in range(lm * ln):
        wm, wn = w % lm, w // lm
        for lane in range(32):
            for i in range(rm):
                for j in range(rn):
                    bm = wm + lm * i if order == "interleaved" else i + rm * wm
                    bn = wn + ln * j if order == "interleaved" else j + rn * wn
                    for v in range(4):
                        row = 16 * bm + lane // 4 + 8 * (v // 2)
                        col = 8 * bn + 2 * (lane % 4) + v % 2
                        assert (row, col) not in out
                        out[(row, col)] = 32 * w + lane
    return out


@pytest.mark.parametrize("order", ["interleaved", "blocked"])
@pytest.mark.parametrize(("lm", "ln", "tm", "tn"), [(2, 2, 128, 128), (1, 2, 64, 128),
                                                    (2, 1, 32, 64), (4, 2, 128, 64)])
def test_c_layout_is_the_isa_fragment_in_that_order(order: str, lm: int, ln: int, tm: int,
                                                    tn: int) -> None:
    tiled = make_tiled_mma(mma_form(FORM), atom_layout=(lm, ln, 1), tile=(tm, tn, 16),
                           warp_order=order)
    tv = tiled.tv_layout("C")
    want = _isa_c(lm, ln, tm, tn, order)
    got: dict[tuple[int, int], int] = {}
    threads = 32 * lm * ln
    for t in range(threads):
        for v in range(len(want) // threads):
            idx = tv((t, v))  # column-major index into the tm x tn tile
            got[(idx % tm, idx // tm)] = t
    assert got == want


def test_blocked_gives_each_warp_one_block() -> None:
    tiled = make_tiled_mma(mma_form(FORM), atom_layout=(2, 2, 1), tile=(128, 128, 16),
                           warp_order="blocked")
    tv = tiled.tv_layout("C")
    for t in range(128):
        w = t // 32
        rows, cols = set(), set()
        for v in range(128):
            idx = tv((t, v))
            rows.add(idx % 128 // 64)
            cols.add(idx // 128 // 64)
        assert rows == {w % 2} and cols == {w // 2}


def test_unknown_warp_order() -> None:
    with pytest.raises(AtomVerificationError, match="warp order 'rows' is not one of"):
        make_tiled_mma(mma_form(FORM), atom_layout=(2, 2, 1), warp_order="rows")
