"""FP8 block scales (DeepSeek-V3: ``scale_a`` 1 x 128 per row of A, ``scale_b`` 128 x 128 per
block of B) without a GPU: the mode picked from the shapes, every wrong shape, stride, dtype
and option named, the kernel configuration (promotion every K block, 128-column tiles) and
its PTX assembled by ptxas with the scales applied by ``fma.rn.f32`` at promotion."""

from __future__ import annotations

import pytest

from nvatom import gemm_providers as gp
from nvatom.gemm import SCALE_BLOCK, GemmError, GemmProblem, check_operands, plan
from nvatom.kernels.sm90.config import SCALE_BLOCK as KERNEL_SCALE_BLOCK
from nvatom.kernels.sm90.config import GemmSm90Config, GemmSm90Error
from nvatom.kernels.sm90.gemm import build_gemm_sm90
from nvatom.kernels.sm90.launch import default_config, kernel_params
from nvatom.runtime.ptxas import assemble

from .runtime.test_launch import FakeTensor
from .test_gemm_api_fp8 import a8, b8


def blk_a(m: int, kb: int, **kw) -> FakeTensor:
    """scale_a (M x Kb) row-major."""
    return FakeTensor((m, kb), (kb, 1), dtype=kw.pop("dtype", "torch.float32"),
                      ptr=0x7F0000400000, **kw)


def blk_b(kb: int, nb: int, *, row_major: bool = False, **kw) -> FakeTensor:
    """scale_b (Kb x Nb) K-major (``w_scale.t()``), or row-major."""
    strides = (nb, 1) if row_major else (1, kb)
    return FakeTensor((kb, nb), strides, dtype=kw.pop("dtype", "torch.float32"),
                      ptr=0x7F0000500000, **kw)


def test_block_mode_from_the_shapes() -> None:
    # K = 400: 4 K blocks (the last partial); N = 264: 3 N blocks
    a, b = a8(200, 400), b8(400, 264)
    *_, p = check_operands(a, b, scale_a=blk_a(200, 4), scale_b=blk_b(4, 3))
    assert p == GemmProblem(200, 264, 400, "e4m3", "bf16", "K", "K", scale_mode="block")
    launch, _ = plan(p, (9, 0))
    # by wave count (tuning.FP8_BLOCK_TILE_CHOICES): 200 x 264 is 4 tiles of 128 x 256,
    # 6 of 128 x 128 or 12 of 64 x 128, one wave each: the smallest area per time, 64 x 128
    assert launch.source.name.endswith("_blockscale") and "_64x128_" in launch.source.name
    # one K block: scale_a (M, 1) is row-wise's shape too; scale_b (1, Nb) picks block
    *_, p = check_operands(a8(64, 128), b8(128, 512), scale_a=blk_a(64, 1),
                           scale_b=blk_b(1, 4))
    assert p.scale_mode == "block"
    assert SCALE_BLOCK == KERNEL_SCALE_BLOCK


@pytest.mark.parametrize(("sa", "sb", "kw", "match"), [
    (blk_a(200, 4), blk_b(4, 3, row_major=True), {},
     r"scale_b \(4 x 3 block scales\) has strides \(3, 1\), not \(1, 4\): .* w_scale\.t\(\)"),
    (FakeTensor((200, 4), (1, 200), dtype="torch.float32", ptr=0x7F0000400000), blk_b(4, 3),
     {},
     r"scale_a \(200 x 4 block scales\) has strides \(1, 200\), not \(4, 1\): .*row-major"),
    (blk_a(200, 3), blk_b(4, 3), {},
     r"scale_a has shape \(200, 3\) and scale_b \(4, 3\): .* or block scales "
     r"\(200, 4\) and \(4, 3\)"),
    (blk_a(200, 4), blk_b(3, 4), {}, r"scale_b \(3, 4\)"),
    (blk_a(200, 4, dtype="torch.bfloat16"), blk_b(4, 3), {}, "scale_a has dtype bfloat16"),
    (blk_a(200, 4), blk_b(4, 3), {"fast_accum": True},
     "fast_accum=True with block scales: .* promoted"),
])
def test_block_scale_errors(sa, sb, kw, match) -> None:
    with pytest.raises(GemmError, match=match):
        check_operands(a8(200, 400), b8(400, 264), scale_a=sa, scale_b=sb, **kw)


def test_block_config_rules() -> None:
    cfg = default_config("e4m3", scale_mode="block")
    assert (cfg.block_n, cfg.promote, cfg.promote_pipelined, cfg.block_k) == (128, 1, False, 128)
    for bad in (dict(block_n=192), dict(promote=0, promote_pipelined=False),
                dict(promote_pipelined=True)):
        with pytest.raises(GemmSm90Error, match="scale_mode 'block'"):
            GemmSm90Config(**{**cfg.__dict__, **bad})
    with pytest.raises(GemmSm90Error, match="fast_accum"):
        default_config("e4m3", scale_mode="block", fast_accum=True)


def test_block_tiles_of_several_scale_blocks() -> None:
    """128 x 256 tiles span two blocks of B's scales: accepted when every N part lies in one
    block (n64 or n128 parts), refused when a part would span two (one n256 part)."""
    cfg = default_config("e4m3", scale_mode="block")
    for ok in (dict(block_n=256, promote_parts=4, promote_temps=2, promote_unroll=4),
               dict(block_n=256, promote_parts=2, promote_temps=1),
               dict(promote_unroll=4)):
        GemmSm90Config(**{**cfg.__dict__, **ok})
    with pytest.raises(GemmSm90Error, match=r"N parts that each lie in one block .* block_n "
                       r"256, promote_parts 1"):
        GemmSm90Config(**{**cfg.__dict__, "block_n": 256, "promote_parts": 1,
                          "promote_temps": 1})


@pytest.mark.parametrize(("tiling", "blocks_per_body"), [
    (dict(block_n=256, promote_parts=4, promote_temps=2, promote_unroll=4), 5),
    (dict(block_n=256, promote_parts=2, promote_temps=1, promote_unroll=1), 1),
    (dict(block_n=256, promote_parts=2, promote_temps=1, promote_unroll=4), 5),
    (dict(promote_unroll=1), 1),
    (dict(promote_unroll=4), 5)])
def test_wide_block_kernels_scale_each_part_by_its_block(tiling: dict,
                                                         blocks_per_body: int) -> None:
    """Per K block a thread loads its two ``scale_a`` values and one ``scale_b`` value per
    128-column block of the tile; every promoted element is one fma; the unrolled loop's
    body holds 4 K blocks and the leftover loop 1 (5 in the PTX)."""
    cfg = GemmSm90Config(**{**default_config("e4m3", scale_mode="block").__dict__, **tiling})
    ptx = build_gemm_sm90(cfg).emit()
    assert assemble(ptx, "sm_90a").kernel().spills == 0
    col_blocks = cfg.block_n // 128
    per_thread = cfg.block_n // 2  # f32 accumulators of a thread's m64 x block_n tile
    assert ptx.count("fma.rn.f32") == blocks_per_body * per_thread
    assert ptx.count("add.f32") == 0
    assert ptx.count("ld.global.nc.f32") == blocks_per_body * (2 + col_blocks)
    assert ptx.count("mul.f32") == blocks_per_body * 2 * col_blocks


@pytest.mark.parametrize("early", [False, True])
def test_scales_early_loads_an_iterations_scales_before_its_first_wgmma(early: bool) -> None:
    """``promote_scales_early``: the unrolled iteration's 4 K blocks' scale loads (two
    ``scale_a`` rows and two ``scale_b`` blocks each, 128 x 256) all come before its first
    WGMMA; without it only the first block's do."""
    import re

    cfg = GemmSm90Config(**{**default_config("e4m3", scale_mode="block", m=4096,
                                             n=4096).__dict__, "promote_scales_early": early})
    assert cfg.block_n == 256 and cfg.promote_unroll == 4
    ptx = build_gemm_sm90(cfg).emit()
    assert assemble(ptx, "sm_90a").kernel().spills == 0
    body = ptx[re.search(r"^\$c_k_\d+:", ptx, re.M).start():]  # the unrolled loop's label
    before = body[:body.index("wgmma.mma_async")]
    assert before.count("ld.global.nc.f32") == (4 if early else 1) * (2 + 2)
    assert ptx.count("ld.global.nc.f32") == 5 * (2 + 2)  # 4 unrolled + 1 left over


def test_scales_early_needs_block_scales_and_unrolling() -> None:
    cfg = default_config("e4m3", scale_mode="block")
    with pytest.raises(GemmSm90Error, match=r"promote_scales_early .* needs scale_mode "
                       r"'block' and promote_unroll > 1 \(got scale_mode 'block', "
                       r"promote_unroll 1\)"):
        GemmSm90Config(**{**cfg.__dict__, "promote_unroll": 1, "promote_scales_early": True})
    with pytest.raises(GemmSm90Error, match=r"scale_mode 'row'"):
        GemmSm90Config(**{**default_config("e4m3", scale_mode="row", m=4096,
                                           n=4096).__dict__, "promote_scales_early": True})
    with pytest.raises(GemmSm90Error, match=r"promote_scales_early must be a bool, got 1"):
        GemmSm90Config(**{**cfg.__dict__, "promote_scales_early": 1})


@pytest.mark.parametrize("b_dtype", ["", "e5m2"])
def test_block_kernel_assembles_and_scales_at_promotion(b_dtype: str) -> None:
    cfg = default_config("e4m3", b_dtype=b_dtype, scale_mode="block")
    ptx = build_gemm_sm90(cfg).emit()
    res = assemble(ptx, "sm_90a").kernel()
    assert res.spills == 0
    # every promoted element is one fma (two N parts of 64 columns: 32 per part per thread),
    # no add.f32 promotion left, and no scale multiply in the epilogue; 4 K blocks per
    # iteration and one in the leftover loop: 5 K blocks in the PTX
    assert cfg.promote_unroll == 4
    assert ptx.count("fma.rn.f32") == 5 * cfg.block_n // 2
    assert ptx.count("add.f32") == 0
    # per K block: scale_a (two rows), scale_b
    assert ptx.count("ld.global.nc.f32") == 5 * 3
    assert kernel_params(cfg)[-2:] == (("scale_a", "u64"), ("scale_b", "u64"))


def test_block_recipe_matches_spec() -> None:
    """The block kernel's recipe (first call) reproduces its launch spec."""
    p = GemmProblem(300, 384, 640, "e4m3", "bf16", "K", "K", scale_mode="block")
    launch = gp.Sm90Provider().plan(p, "sm_90a")
    import random

    from .test_gemm_recipe import _operands
    a, b, d = _operands(p, random.Random(5))
    rec = launch.recipe(a, b, d, p)
    assert rec is not None and rec["tiles"]["block_n"] == 128
