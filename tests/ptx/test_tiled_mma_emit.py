"""nvatom.ptx.tiled_mma_emit: fragment addresses of a tiled mma.sync against the PTX ISA.

Golden addresses are written here from the PTX ISA's fragment formulas for mma.m16n8k16 with
16-bit A/B and f32 C/D ("Matrix Fragments for mma.m16n8k16 with floating point type":
groupID g = lane >> 2, threadID_in_group t = lane % 4; A a0,a1 at (g, 2t + i), a2,a3 at
(g + 8, 2t + i), a4,a5 at (g, 2t + 8 + i), a6,a7 at (g + 8, 2t + 8 + i); B b0,b1 at
(k = 2t + i, n = g), b2,b3 at (k = 2t + 8 + i, n = g); C c0,c1 at (g, 2t + i), c2,c3 at
(g + 8, 2t + i)) and CuTe's TiledMMA placement: warp w sits at (w % LM, w // LM) of the
atom layout, and repetition (i, j) of the tile adds i * atomM * LM rows (j * atomN * LN
columns).  Every kernel built here is assembled by ptxas.
"""

from __future__ import annotations

import re

import pytest

from nvatom.atoms.registry import mma_form
from nvatom.atoms.tiled_mma import make_tiled_mma
from nvatom.layout import Layout
from nvatom.ptx import tiled_mma_emit as tm
from nvatom.ptx.builder import Module
from nvatom.runtime.ptxas import assemble

BF16 = "sm80.mma.m16n8k16.f32.bf16.bf16.f32"
M = N = K = 64
LM, LN = 2, 2


@pytest.fixture(scope="module")
def tiled():  # type: ignore[no-untyped-def]
    return make_tiled_mma(mma_form(BF16), (LM, LN, 1), (64, 64, 16))


def _isa_a(lane: int, reg: int) -> tuple[int, int]:
    """(row, col) of the first element of A register ``reg`` in one 16 x 16 atom."""
    g, t = lane >> 2, lane % 4
    return g + 8 * (reg % 2), 2 * t + 8 * (reg // 2)


def _isa_b(lane: int, reg: int) -> tuple[int, int]:
    """(n, k) of the first element of B register ``reg`` in one 8 x 16 (N x K) atom."""
    g, t = lane >> 2, lane % 4
    return g, 2 * t + 8 * reg


def _isa_c(lane: int, reg: int) -> tuple[int, int]:
    """(row, col) of C register ``reg`` (one f32) in one 16 x 8 atom."""
    g, t = lane >> 2, lane % 4
    return g + 8 * (reg // 2), 2 * t + reg % 2


def _address(tiled, op, tensor, tile, thread, position):  # type: ignore[no-untyped-def]
    thread_bytes, reg_bytes = tm.fragment_access(tiled, op, tensor, tile)
    return thread_bytes(thread) + reg_bytes[position]


@pytest.mark.parametrize("kt", [0, 3])
def test_a_and_b_addresses_follow_the_isa(tiled, kt: int) -> None:  # type: ignore[no-untyped-def]
    a_mem, b_mem = Layout((M, K), (K, 1)), Layout((N, K), (K, 1))
    frag_a = tm.Fragment("A", tuple(range(4 * 2)), 4, (2, 1))  # positions stand for registers
    frag_b = tm.Fragment("B", tuple(range(2 * 4)), 2, (4, 1))
    for thread in range(128):
        lane, w = thread % 32, thread // 32
        wm, wn = w % LM, w // LM
        for i in range(2):
            for r, pos in enumerate(frag_a.atom(i, 0)):
                row, col = _isa_a(lane, r)
                want = 2 * ((16 * wm + 32 * i + row) * K + 16 * kt + col)
                assert _address(tiled, "A", a_mem, (0, kt), thread, pos) == want
        for j in range(4):
            for r, pos in enumerate(frag_b.atom(j, 0)):
                n, k = _isa_b(lane, r)
                want = 2 * ((8 * wn + 16 * j + n) * K + 16 * kt + k)
                assert _address(tiled, "B", b_mem, (0, kt), thread, pos) == want


def test_c_addresses_follow_the_isa(tiled) -> None:  # type: ignore[no-untyped-def]
    d_mem = Layout((M, N), (N, 1))
    frag = tm.Fragment("C", tuple(range(4 * 8)), 4, (2, 4))
    seen = set()
    for thread in range(128):
        lane, w = thread % 32, thread // 32
        wm, wn = w % LM, w // LM
        for i in range(2):
            for j in range(4):
                for r, pos in enumerate(frag.atom(i, j)):
                    row, col = _isa_c(lane, r)
                    want = 4 * ((16 * wm + 32 * i + row) * N + 8 * wn + 16 * j + col)
                    assert _address(tiled, "C", d_mem, (0, 0), thread, pos) == want
                    seen.add(want)
    assert len(seen) == M * N  # every element of D written exactly once


def test_kernel_pairs_the_right_registers_and_assembles(tiled) -> None:  # type: ignore[no-untyped-def]
    form = tiled.atom
    mod = Module("sm_80", features=[form.feature])
    k = mod.kernel("gemm_tile")
    k.maxntid = (tiled.threads, 1, 1)
    pa, pb, pd = (tm.global_pointer(k, n) for n in ("A", "Bt", "D"))
    tid = tm.thread_index(k)
    acc = tm.zero_fragment(k, tiled)
    a = tm.load_fragment(k, tiled, "A", Layout((M, K), (K, 1)), pa, tid)
    b = tm.load_fragment(k, tiled, "B", Layout((N, K), (K, 1)), pb, tid)
    tm.emit_tiled_mma(k, tiled, acc, a, b, acc)
    tm.store_fragment(k, tiled, acc, Layout((M, N), (N, 1)), pd, tid)
    ptx = mod.emit()
    mmas = re.findall(r"mma\.sync\S* \{([^}]*)\}, \{([^}]*)\}, \{([^}]*)\}, \{([^}]*)\};", ptx)
    got = [tuple(g.split(", ") for g in m) for m in mmas]
    want = []
    for j in range(4):
        for i in range(2):
            regs = [[str(r) for r in x] for x in
                    (acc.atom(i, j), a.atom(i, 0), b.atom(j, 0), acc.atom(i, j))]
            want.append(tuple(regs))
    assert got == want
    assert ptx.count("ld.global.b32") == 8 + 8 and ptx.count("st.global.f32") == 32
    assert assemble(ptx, "sm_80").kernel("gemm_tile").spills == 0


def test_k_repetitions_chain_the_accumulator() -> None:
    tiled = make_tiled_mma(mma_form(BF16), (1, 1, 1), (16, 8, 32))
    mod = Module("sm_80", features=[tiled.atom.feature])
    k = mod.kernel("k2")
    p = tm.global_pointer(k, "P")
    tid = tm.thread_index(k)
    c = tm.zero_fragment(k, tiled)
    d = tm.zero_fragment(k, tiled, "D")
    a = tm.load_fragment(k, tiled, "A", Layout((16, 32), (32, 1)), p, tid)
    b = tm.load_fragment(k, tiled, "B", Layout((8, 32), (32, 1)), p, tid)
    tm.emit_tiled_mma(k, tiled, d, a, b, c)
    ptx = mod.emit()
    ops = re.findall(r"mma\.sync\S* \{[^}]*\}, \{[^}]*\}, \{[^}]*\}, \{([^}]*)\};", ptx)
    assert ops == [", ".join(map(str, c.regs)), ", ".join(map(str, d.regs))]
    assemble(ptx, "sm_80")


def test_bad_inputs_raise_our_error(tiled) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(tm.TiledMmaEmitError, match="whole 64 x 16 tiles"):
        tm.fragment_access(tiled, "A", Layout((64, 24), (24, 1)))
    with pytest.raises(tm.TiledMmaEmitError, match="tile \\(0, 4\\) is outside"):
        tm.fragment_access(tiled, "A", Layout((64, 64), (64, 1)), (0, 4))
    with pytest.raises(tm.TiledMmaEmitError, match="not contiguous"):  # A column-major
        tm.fragment_access(tiled, "A", Layout((64, 64), (1, 64)))
    with pytest.raises(tm.TiledMmaEmitError, match="unknown operand 'E'"):
        tm.fragment_access(tiled, "E", Layout((64, 64), (64, 1)))
    with pytest.raises(tm.TiledMmaEmitError, match="warps along K"):
        tm.fragment_access(make_tiled_mma(mma_form(BF16), (1, 1, 2)), "A",
                           Layout((16, 32), (32, 1)))
    frag = tm.Fragment("A", tuple(range(8)), 4, (2, 1))
    with pytest.raises(tm.TiledMmaEmitError, match="outside the 2 x 1"):
        frag.atom(2, 0)
