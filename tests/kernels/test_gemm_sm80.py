"""The SM80 GEMM kernel without a GPU: its data movement checked against the PTX ISA's
semantics of cp.async and ldmatrix, and every variant assembled by ptxas.

The model: each thread's cp.async chunk lands at ``tile(thread coordinate)``; the PTX computes
the global (mn, k) of the same chunk from the thread index separately, so the two must agree
and cover the tile once.  ldmatrix (PTX ISA "ldmatrix"): matrix q takes its 8 row addresses
from lanes 8q..8q+7; lane l receives in register q the elements (row l/4, columns 2(l%4),
2(l%4)+1) of matrix q, or with ``.trans`` (rows 2(l%4), 2(l%4)+1; column l/4).  Following the
row addresses through the shared tile must give each lane exactly the (m|n, k) elements the
MMA fragment (the form's (lane, value) layout) wants.
"""

from __future__ import annotations

import itertools

import pytest

from nvatom.kernels.gemm_sm80 import (
    GemmSm80Config,
    GemmSm80Error,
    GemmSm80Spec,
    copy_plan,
    emit_ptx,
    ldsm_atoms,
    ldsm_plan,
    operands,
)
from nvatom.runtime.ptxas import assemble

LAYOUTS = list(itertools.product(("K", "M"), ("N", "K")))
CONFIGS = [GemmSm80Config(), GemmSm80Config(bm=64, bn=128, bk=64, warps_m=1, warps_n=2,
                                            stages=3)]


def _smem_map(spec: GemmSm80Spec, name: str) -> dict[int, tuple[int, int]]:
    """smem element offset -> (mn, k) the copy stage puts there (checked to be a bijection)."""
    op = operands(spec)[0 if name == "A" else 1]
    thr, deltas, lines_per_pass = copy_plan(op, spec.config.threads)
    cpr = op.contiguous // 8
    where: dict[int, tuple[int, int]] = {}
    for t in range(spec.config.threads):
        for i, d in enumerate(deltas):
            # the global side, as the PTX computes it: chunk t % cpr, line t // cpr + i * step
            c, line = (t % cpr) * 8, t // cpr + i * lines_per_pass
            mn, kk = (line, c) if op.major == "K" else (c, line)
            assert op.idx(mn, kk) == thr(t) + d, (t, i)
            base = int(op.tile(thr(t) + d))
            for e in range(8):  # 8 consecutive 16-bit elements along the contiguous dim
                coord = (mn, kk + e) if op.major == "K" else (mn + e, kk)
                off = int(op.tile(op.idx(*coord)))
                assert off == base + e, "a 16-byte chunk is not contiguous in shared memory"
                assert off not in where, f"two chunks write smem element {off}"
                where[off] = coord
    assert len(where) == op.mn * op.bk
    return where


@pytest.mark.parametrize("config", CONFIGS, ids=["128x128x32", "64x128x64"])
@pytest.mark.parametrize(("a_major", "b_major"), LAYOUTS)
def test_ldmatrix_delivers_mma_fragments(a_major: str, b_major: str,
                                         config: GemmSm80Config) -> None:
    spec = GemmSm80Spec("bf16", "f32", a_major, b_major, config)
    form = spec.form
    cfg = spec.config
    for name in ("A", "B"):
        op = operands(spec)[0 if name == "A" else 1]
        where = _smem_map(spec, name)
        atom, _ = ldsm_atoms(spec)[name]
        trans = atom.name.endswith(".trans>")
        thr, deltas = ldsm_plan(spec, name)
        tv = form.tv_layout(name)  # (lane, value) -> m + 16 k (A) or n + 8 k (B)
        rows_mn = form.m if name == "A" else form.n
        for warp in range(cfg.warps_m * cfg.warps_n):
            wm, wn = warp % cfg.warps_m, warp // cfg.warps_m
            for (j, ks), d in deltas.items():
                addr = [int(op.tile(thr(32 * warp + ln) + d)) for ln in range(32)]
                for ln in range(32):
                    for q in range(4):
                        got = []
                        for e in range(2):
                            r, c = (2 * (ln % 4) + e, ln // 4) if trans else \
                                (ln // 4, 2 * (ln % 4) + e)
                            start = addr[8 * q + r]
                            # element c of the 8-element row at `start`, in smem order
                            mn0, k0 = where[start]
                            mn, kk = (mn0, k0 + c) if op.major == "K" else (mn0 + c, k0)
                            assert where[int(op.tile(op.idx(mn, kk)))] == (mn, kk)
                            got.append((mn, kk))
                        # expected: the fragment's values 2q', 2q'+1 of the tile this reg feeds
                        if name == "A":
                            tile_mn, reg = j * 16 + wm * cfg.warp_m, q
                        else:  # regs 0,1: n8 tile 2j; regs 2,3: n8 tile 2j+1
                            tile_mn, reg = j * 16 + 8 * (q // 2) + wn * cfg.warp_n, q % 2
                        want = []
                        for e in range(2):
                            el = int(tv(ln, 2 * reg + e))
                            want.append((tile_mn + el % rows_mn, ks * 16 + el // rows_mn))
                        assert got == want, (name, warp, j, ks, ln, q)


def test_all_variants_assemble() -> None:
    """Every dtype pair and storage order the kernel offers, through ptxas for sm_80."""
    for (a_major, b_major), in_t, out_t in itertools.product(LAYOUTS, ("bf16", "f16"),
                                                              ("bf16", "f16", "f32")):
        spec = GemmSm80Spec(in_t, out_t, a_major, b_major)
        res = assemble(emit_ptx(spec, "sm_80"), "sm_80")
        r = res.kernel(spec.kernel_name)
        assert r.spills == 0 and r.stack_frame == 0, r.summary()
        assert r.registers <= 255


def test_config_and_spec_errors() -> None:
    with pytest.raises(GemmSm80Error, match="bk=48"):
        GemmSm80Config(bk=48)
    with pytest.raises(GemmSm80Error, match="stages=1"):
        GemmSm80Config(stages=1)
    with pytest.raises(GemmSm80Error, match="does not split"):
        GemmSm80Config(bm=96, warps_m=4)
    with pytest.raises(GemmSm80Error, match="warps_n must be a positive int"):
        GemmSm80Config(warps_n=0)
    with pytest.raises(GemmSm80Error, match="input dtype 'f32'"):
        GemmSm80Spec("f32")
    with pytest.raises(GemmSm80Error, match="output dtype 'e4m3'"):
        GemmSm80Spec("bf16", "e4m3")
    with pytest.raises(GemmSm80Error, match="b_major 'M'"):
        GemmSm80Spec(b_major="M")


def test_launch_shape() -> None:
    spec = GemmSm80Spec()
    assert spec.grid(4096, 4096) == (32 * 32, 1, 1)
    assert spec.grid(129, 8) == (2, 1, 1)
    assert spec.block() == (128, 1, 1)
    assert spec.config.smem_bytes() == 4 * (128 + 128) * 32 * 2


def test_cli_gemm_assembles(tmp_path, capsys) -> None:
    from nvatom.cli import main

    out = tmp_path / "g.ptx"
    assert main(["gemm", "--m", "300", "--n", "136", "--k", "72", "--dtype", "f16",
                 "--out-dtype", "f32", "--b-major", "K", "--target", "sm_80",
                 "--emit", str(out)]) == 0
    text = capsys.readouterr().out
    assert "gemm_sm80_f16_f32_aK_bK_128x128x32" in text
    assert "grid (6, 1, 1), block (128, 1, 1), 65536 B dynamic smem" in text
    assert "0/0 B spill" in text
    ptx = out.read_text()
    assert ".extern .shared .align 1024 .b8 gemm_smem[];" in ptx
    assert "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32" in ptx
    assert "ldmatrix.sync.aligned.m8n8.x4.shared.b16" in ptx  # B K-major: no .trans


def test_cli_gemm_errors(capsys) -> None:
    from nvatom.cli import main

    assert main(["gemm", "--m", "0", "--n", "8", "--k", "8"]) == 2
    assert "nvatom: error: --m must be >= 1, got 0" in capsys.readouterr().err
    assert main(["gemm", "--m", "8", "--n", "8", "--k", "8", "--target", "sm_75"]) == 2
    assert "no nvatom GEMM kernel for bf16 x bf16 -> bf16 (acc f32) on compute capability 7.5" \
        in capsys.readouterr().err
