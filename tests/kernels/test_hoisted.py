"""Hoisted copies (nvatom.kernels.hoisted) and the pieces of nvatom.kernels.ragged the
production SM80 GEMM added (rings in dynamic shared memory holding several tensors a stage,
a gmem matrix with a base register and known extent multiples): misuse is a TensorError
naming the use, one test per diagnostic; the hoisted loop body costs no per-thread
arithmetic.  The kernel built from them runs on the CPU in tests/kernels/test_gemm_sm80_run.py.
"""

from __future__ import annotations

import re

import pytest

from nvatom.atoms.copy import copy_atom
from nvatom.atoms.registry import mma_form
from nvatom.atoms.smem import smem_layout
from nvatom.atoms.tiled_copy import make_tiled_copy
from nvatom.atoms.tiled_mma import TiledMma, make_tiled_mma
from nvatom.kernels import hoisted as H
from nvatom.kernels import ragged as R
from nvatom.kernels import tensor as T
from nvatom.layout import Layout
from nvatom.ptx.builder import Kernel, Module, Reg
from nvatom.runtime.ptxas import assemble

FORM = mma_form("sm80.mma.m16n8k16.f32.bf16.bf16.f32")
CP_SS = copy_atom("atom.simt_async_copy<16>.src_size")
CP = copy_atom("atom.simt_async_copy<16>")
ALONG_K = make_tiled_copy(CP_SS, Layout((32, 4), (4, 1)), Layout((1, 8)))
SW64 = smem_layout(64, 32, 16, "K", 64)
LDSM = copy_atom("atom.ldsm<m8n8.x4>")


def _setup() -> tuple[Kernel, TiledMma, list[Reg]]:
    k = Module("sm_80", features=[FORM.feature, "cp.async", "ldmatrix"]).kernel("t")
    k.maxntid = (128, 1, 1)
    sizes = [k.ld_param(k.param(n, "u32")) for n in ("M", "K", "ld", "i")]
    return k, make_tiled_mma(FORM, (2, 2, 1), (64, 64, 16)), sizes


def _rings(k: Kernel) -> tuple[R.StageRing, ...]:
    return R.stage_rings(k, "smem", "bf16", [("sA", SW64), ("sB", SW64)], 3)


def test_a_hoisted_loop_body_is_copies_and_their_tails() -> None:
    """Per k-tile: the K tail of the one column each thread copies (setp, min, shl), per chunk
    setp.and + two selp + (another line) mad.wide + cp.async, one add for the stage's shared
    address, the pointer's step and the residue; ldmatrix adds the stage base once per
    distinct offset register of all K steps."""
    k, tiled, s = _setup()
    sA, sB = _rings(k)
    gA = R.gmem_matrix(k, "A", "bf16", (s[0], s[1]), (s[2], 1))
    load = H.ragged_loader(k, ALONG_K, gA.tile_at(k, (64, 32), (0, 0)), sA.first)
    frags = [T.fragment(k, tiled, "A", name=f"rA{i}") for i in range(2)]
    read = H.ldsm_reader(k, LDSM, sA.first, frags[0], [(0, 0), (0, 1)])
    k.comment("LOOP")
    a, _ = R.stages_at(k, (sA, sB), s[3])
    load.copy(k, a)
    st = read.at(k, a)
    for i, f in enumerate(frags):
        st.copy(k, f, (0, i))
    ptx = k.module.emit()  # type: ignore[union-attr]
    body = [ln.strip() for ln in ptx[ptx.index("// LOOP"):].splitlines()[1:-2]]
    ops = [ln.split()[0] for ln in body]
    assert ops.count("cp.async.cg.shared.global") == 2 and ops.count("ldmatrix.sync.aligned."
                                                                    "m8n8.x4.shared.b16") == 4
    assert len(body) == 1 + 3 + 1 + 2 * 4 + 1 + 2 + 2 + 4, "\n".join(body)
    assert ".extern .shared .align 1024 .b8 smem[];" in ptx
    assert re.search(r"cp\.async\.cg\.shared\.global \[%r\d+\+2048\]", ptx)  # 32 rows on
    assert assemble(ptx, "sm_80").kernel("t").spills == 0


def test_rings_share_stages_and_lay_their_tensors_one_after_the_other() -> None:
    k, _, s = _setup()
    sA, sB = _rings(k)
    assert (sA.stage_bytes, sB.stage_bytes) == (8192, 8192)
    assert (sA.first.offset, sB.first.offset) == (0, 2048)  # elements: B after A's 4096 bytes
    a, b = R.stages_at(k, (sA, sB), s[3])
    assert a.base is b.base and b.offset == 2048
    other = R.stage_rings(k.module.kernel("u"), "smem", "bf16", [("sC", SW64)], 3)  # type: ignore[union-attr]
    with pytest.raises(T.TensorError, match=r"rings 'sA', 'sC' do not share their stages"):
        R.stages_at(k, (sA, other[0]), s[3])
    with pytest.raises(T.TensorError, match=r"stage 3 of the 3-stage rings 'sA', 'sB'"):
        R.stages_at(k, (sA, sB), 3)


def _err(fn, match: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(T.TensorError, match=match):
        fn()


def test_misuse_is_named() -> None:
    k, tiled, s = _setup()
    sA, sB = _rings(k)
    gA = R.gmem_matrix(k, "A", "bf16", (s[0], s[1]), (s[2], 1))
    tile = gA.tile_at(k, (64, 32), (0, 0))
    _err(lambda: H.ragged_loader(k, make_tiled_copy(CP, Layout((32, 4), (4, 1)),
                                                    Layout((1, 8))), tile, sA.first),
         "a ragged tile needs the zero-filling atom 'atom.simt_async_copy<16>.src_size'")
    _err(lambda: H.ragged_loader(k, ALONG_K, tile, sA.first, along=2),
         "along dimension 0 or 1, got along=2")
    load = H.ragged_loader(k, ALONG_K, tile, sA.first)
    _, b = R.stages_at(k, (sA, sB), s[3])
    _err(lambda: load.copy(k, b), r"smem tensor 'sB' .* is not a stage of the buffer 'sA'")
    rA = T.fragment(k, tiled, "A", name="rA")
    read = H.ldsm_reader(k, LDSM, sA.first, rA, [(0, 0)])
    _err(lambda: read.at(k, b), "is not a stage of the buffer 'sA'")
    st = read.at(k, sA.first)
    _err(lambda: st.copy(k, rA, (0, 1)), r"tile \(0, 1\) was not hoisted \(tiles \[\(0, 0\)\]\)")
    _err(lambda: st.copy(k, T.fragment(k, tiled, "B", name="rB"), (0, 0)),
         "fragment 'rB' is not like 'rA', the fragment the copy was hoisted for")
    _err(lambda: R.gmem_matrix(k, "D", "bf16", (s[0], s[1]), (s[2], 1), multiple_of=(1, 0)),
         r"gmem matrix 'D': multiple_of takes 2 positive ints, got \(1, 0\)")
    _err(lambda: R.gmem_matrix(k, "D", "bf16", (s[0], s[1]), (s[2], 1), base=s[0]),
         "gmem matrix 'D': its base must be a 64-bit register, got %r0 of type .u32")


def test_an_ldmatrix_x4_loads_two_b_fragments() -> None:
    """B of m16n8k16 is two registers; ``.x4`` loads two consecutive n8 fragments (lanes 16-31
    address the second), ``.x2`` one: half the instructions, the same registers."""
    k, tiled, _ = _setup()
    lay = smem_layout(64, 16, 16, "K", 32)
    sB = T.smem_tensor(k, "sB", "bf16", lay)
    rB = T.fragment(k, tiled, "B", name="rB")
    T.copy(k, copy_atom("atom.ldsm<m8n8.x4>"), sB, rB)
    T.copy(k, copy_atom("atom.ldsm<m8n8.x2>"), sB, T.fragment(k, tiled, "B", name="rB2"))
    ptx = k.module.emit()  # type: ignore[union-attr]
    assert ptx.count("ldmatrix.sync.aligned.m8n8.x4.shared.b16") == 2
    assert ptx.count("ldmatrix.sync.aligned.m8n8.x2.shared.b16") == 4
    narrow = make_tiled_mma(FORM, (2, 2, 1), (64, 16, 16))  # one n8 fragment per warp
    k2 = Module("sm_80", features=[FORM.feature, "ldmatrix"]).kernel("t2")
    k2.maxntid = (128, 1, 1)
    s16 = T.smem_tensor(k2, "s16", "bf16", smem_layout(16, 16, 16, "K", 32))
    with pytest.raises(T.TensorError, match=r"loads 2 repetitions of operand B at once; the "
                                             r"tile has 1 along its first dimension"):
        T.copy(k2, copy_atom("atom.ldsm<m8n8.x4>"), s16, T.fragment(k2, narrow, "B"))
