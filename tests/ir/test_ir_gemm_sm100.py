"""The SM100 UMMA GEMM written in the IR (tests/ir/gemm_sm100.mlir): ``nvatom compile`` lowers
it and ptxas assembles it for sm_100a; its PTX issues the UMMA with the descriptor words and
idesc the atom layer gives; and its operation sequence, run on the CPU model of tcgen05
(tests/ir/sm100_model.py: the driver's SWIZZLE_128B TMA boxes, the model UMMA reading shared
memory through the kernel's descriptor words, tcgen05.ld, the row stores), computes
A @ B^T of random bf16 matrices as numpy does."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import numpy as np
import pytest

from nvatom.cli import main
from nvatom.dtypes import decode, encode
from nvatom.runtime import ptxas

sys.path.insert(0, str(Path(__file__).parent))
from sm100_model import compile_module, run_cta

GEMM = Path(__file__).parent / "gemm_sm100.mlir"
BM, BN, BK, N = 128, 64, 64, 128  # the file's tile and D's row length


@pytest.fixture(scope="module")
def compiled() -> tuple:
    return compile_module(GEMM.read_text(), str(GEMM))


def test_nvatom_compile_assembles_it_for_sm100a(tmp_path: Path) -> None:
    out = tmp_path / "gemm.ptx"
    assert main(["compile", str(GEMM), "--target", "sm_100a", "-o", str(out)]) == 0
    res = ptxas.assemble(out.read_text(), "sm_100a")
    assert res.kernel("gemm_sm100").spills == 0


def test_the_ptx_issues_the_atoms_words(compiled: tuple) -> None:
    from nvatom.descriptors.umma import k_block_descriptors
    from nvatom.ir import types as TY

    mod, _ctx, low = compiled
    atom = TY.atom_of(next(op for op in mod.walk() if op.name == "cute_nvgpu.make_atom"
                           ).results[0].type)
    ptx = low.ptx
    # the kind::f16 idesc and one instruction per 16-element K-block of each 64-element tile
    # (the peeled first tile and the loop body)
    assert re.search(rf"mov\.u32 %r\d+, {atom.idesc().encode()};", ptx)
    assert ptx.count("tcgen05.mma.cta_group::1.kind::f16 ") == 2 * BK // 16
    for rows in (BM, BN):  # each K-block's descriptor word (relative start) is added
        from nvatom.atoms.smem import smem_layout, smem_swizzle

        lay = smem_layout(rows, BK, 16, "K", smem_swizzle("SW128"))
        for w in k_block_descriptors(lay, 16, "K", BK // 16):
            assert re.search(rf"add\.s64 %rd\d+, %rd\d+, {w.encode()};", ptx), (rows, w)
    # each instruction's A and B descriptors: the tile that tmap0 (A) and tmap1 (B) load into
    # (cvt of its shared address, >> 4) plus the K-block's word, in K-block order
    lay = {rows: smem_layout(rows, BK, 16, "K", smem_swizzle("SW128")) for rows in (BM, BN)}
    words = {rows: [w.encode() for w in k_block_descriptors(lay[rows], 16, "K", BK // 16)]
             for rows in (BM, BN)}
    param_of = dict(re.findall(r"mov\.u64 (%rd\d+), (tmap\d);", ptx))
    generic = {dst: param_of[src] for dst, src in
               re.findall(r"cvta\.param\.u64 (%rd\d+), (%rd\d+);", ptx)}
    tile_of = {generic[m]: t for t, m in re.findall(
        r"cp\.async\.bulk\.tensor\.2d\S* \[(%r\d+)\], \[(%rd\d+),", ptx)}
    source = dict(re.findall(r"cvt\.u64\.u32 (%rd\d+), (%r\d+);", ptx))
    added = {d: (b, int(c)) for d, b, c in re.findall(r"add\.s64 (%rd\d+), (%rd\d+), (\d+);", ptx)}
    mmas = re.findall(r"tcgen05\.mma\.cta_group::1\.kind::f16 \[%r\d+\], (%rd\d+), (%rd\d+),", ptx)
    assert len(mmas) == 2 * BK // 16
    for i, (da, db) in enumerate(mmas):
        j = i % (BK // 16)
        for reg, tmap, rows in ((da, "tmap0", BM), (db, "tmap1", BN)):
            base, word = added[reg]
            assert source[base] == tile_of[tmap] and word == words[rows][j], (i, reg)
    assert "tcgen05.ld.sync.aligned.32x32b.x64.b32" in ptx
    # the host encodes the tensor maps the partition gives: 64 x 128 and 64 x 64 boxes, SW128
    assert [(t.box, t.swizzle_bytes) for t in low.kernels[0].tma] == [((64, 128), 128),
                                                                     ((64, 64), 128)]


@pytest.mark.parametrize(("m", "k", "seed"), [(256, 192, 1), (128, 64, 2)])
def test_the_cpu_model_runs_it_on_random_data(compiled: tuple, m: int, k: int,
                                              seed: int) -> None:
    mod, ctx, low = compiled
    rng = np.random.default_rng(seed)
    a = encode("bf16", rng.standard_normal((m, k))).astype(np.uint16)
    b = encode("bf16", rng.standard_normal((N, k))).astype(np.uint16)
    d = np.full((m, N), np.nan, np.float32)  # every element must be written
    for m0 in range(0, m, BM):
        for n0 in range(0, N, BN):
            run_cta(mod, ctx, low, [a, b, d.ravel()[m0 * N + n0:], m, N, k, m0, n0,
                                    k // BK])
    want = decode("bf16", a).astype(np.float64) @ decode("bf16", b).astype(np.float64).T
    np.testing.assert_allclose(d, want, rtol=1e-5, atol=1e-4)


def test_block_scaled_ts_umma_runs_on_the_cpu_model() -> None:
    # tests/ir/umma_bs_ts.mlir: A -> registers -> tcgen05.st (A in TMEM), B -> canonical
    # shared tile, scale factors -> shared -> tcgen05.cp 32x128b.warpx4, kind::mxf8f6f4
    mod, ctx, low = compile_module((Path(__file__).parent / "umma_bs_ts.mlir").read_text())
    assert ptxas.assemble(low.ptx, "sm_100a").kernel("umma_bs_ts").spills == 0
    rng = np.random.default_rng(16)
    a = encode("e4m3", rng.standard_normal((128, 32))).astype(np.uint8)
    b = encode("e4m3", rng.standard_normal((64, 32))).astype(np.uint8)
    sfa = rng.integers(120, 134, 128).astype(np.uint8)  # ue8m0: 2^(code - 127)
    sfb = rng.integers(120, 134, 64).astype(np.uint8)

    def sf_rows(codes: np.ndarray) -> np.ndarray:
        # row r's scale in lane r % 32, column r // 32, byte 0 of the word (scale-factor id
        # 0): the 32 x 16-byte tile tcgen05.cp .32x128b.warpx4 copies to every lane quarter
        out = np.zeros((32, 16), np.uint8)
        for r, c in enumerate(codes):
            out[r % 32, 4 * (r // 32)] = c
        return out

    d = np.full((128, 64), np.nan, np.float32)
    run_cta(mod, ctx, low, [a.view(np.float32), b, sf_rows(sfa), sf_rows(sfb), d])
    av = decode("e4m3", a).astype(np.float64) * 2.0 ** (sfa.astype(np.float64) - 127)[:, None]
    bv = decode("e4m3", b).astype(np.float64) * 2.0 ** (sfb.astype(np.float64) - 127)[:, None]
    np.testing.assert_allclose(d, av @ bv.T, rtol=1e-6, atol=1e-6)
