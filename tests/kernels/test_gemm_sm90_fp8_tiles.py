"""The promoted FP8 tile chosen by wave count (docs/perf.md, "FP8 tile by wave count"), the
recipe's size rule, and the epilogue's staging-buffer wait for an odd number of chunks."""

from __future__ import annotations

import math

import pytest

from nvatom.gemm_providers import Sm90Provider
from nvatom.kernels.sm90.gemm import build_gemm_sm90
from nvatom.kernels.sm90.launch import default_config
from nvatom.runtime import gemm_recipe as gr
from nvatom.runtime.gemm_plan import GemmProblem, wave_pick

OPTIONS = [[128, 192, 1.0], [128, 256, 0.98]]


def _time(bm: int, bn: int, eff: float, m: int, n: int, sms: int) -> float:
    # written here from the model, independently of wave_pick: whole waves x tile area / speed
    return math.ceil(math.ceil(m / bm) * math.ceil(n / bn) / sms) * bm * bn / eff


@pytest.mark.parametrize(("m", "n", "want"), [
    (4096, 4096, 1),    # 704 tiles = 6 waves x 192 vs 512 = 4 waves x 256 / 0.98
    (2048, 2048, 1),    # 176 = 2 waves vs 128 = 1 wave
    (8192, 8192, 0),    # 2752 = 21 waves vs 2048 = 16 waves: 4032 < 4180
    (16384, 1024, 1),   # 768 = 6 waves vs 512 = 4 waves
    (1, 4096, 0),       # one wave either way: the smaller tile
    (128, 192, 0),
])
def test_wave_pick(m: int, n: int, want: int) -> None:
    assert wave_pick(OPTIONS, m, n, 132) == want
    times = [_time(*o, m, n, 132) for o in OPTIONS]  # type: ignore[arg-type]
    assert times[want] == min(times)


def test_wave_pick_tie_goes_to_the_first() -> None:
    assert wave_pick([[128, 128, 1.0], [128, 128, 1.0]], 4096, 4096, 132) == 0


def test_default_config_picks_the_tile_by_size() -> None:
    assert default_config("e4m3").block_n == 192  # no sizes: the 128 x 192 tile
    wide = default_config("e4m3", m=4096, n=4096)
    assert (wide.block_n, wide.promote, wide.promote_parts, wide.promote_temps,
            wide.promote_unroll) == (256, 1, 4, 2, 4)
    assert default_config("e4m3", scale_mode="row", m=2048, n=2048).block_n == 256
    assert default_config("e4m3", m=8192, n=8192).block_n == 192
    assert default_config("e4m3", m=8192, n=8192) == default_config("e4m3")
    # block scales: whole 128-column blocks of B's scales per tile, picked by wave count
    # (time ~ waves x tile area / efficiency; 132 SMs):
    # 4096 x 4096: 128 x 256 512 tiles, 4 waves x 32768 = 131072; 128 x 128 1024 tiles,
    #   8 x 16384 / 0.85 = 154202; 64 x 128 2048 tiles, 16 x 8192 / 0.68 = 192753 -> wide
    blk = default_config("e4m3", scale_mode="block", m=4096, n=4096)
    assert (blk.block_m, blk.block_n, blk.promote_parts, blk.promote_temps,
            blk.promote_unroll) == (128, 256, 2, 1, 4)
    # 256 x 7168: 56 tiles, 1 wave x 32768; 112 tiles, 1 x 19275; 224 tiles, 2 x 12047 =
    #   24094 -> 128 x 128
    narrow = default_config("e4m3", scale_mode="block", m=256, n=7168)
    assert (narrow.block_m, narrow.block_n, narrow.promote_parts, narrow.promote_temps,
            narrow.promote_unroll) == (128, 128, 2, 2, 4)
    # 128 x 7168: 28, 56 and 112 tiles, one wave each -> the smallest area per time, 64 x 128
    small = default_config("e4m3", scale_mode="block", m=128, n=7168)
    assert (small.block_m, small.block_n, small.consumers, small.stages) == (64, 128, 1, 8)
    # the grouped kernel keeps 128-row tiles
    assert default_config("e4m3", scale_mode="block", m=128, n=7168,
                          min_block_m=128).block_m == 128
    assert default_config("e4m3", scale_mode="block").block_n == 128  # no sizes
    # fast accumulation its tile
    fast = default_config("e4m3", fast_accum=True, m=4096, n=4096)
    assert (fast.block_n, fast.promote) == (256, 0)
    # 16-bit types are not affected by the sizes
    assert default_config("bf16", m=4096, n=4096) == default_config("bf16")


def _problem(m: int, n: int, mode: str = "tensor") -> GemmProblem:
    return GemmProblem(m, n, 4096, "e4m3", "bf16", "K", "K", "f32", "", mode, False)


def test_provider_plans_the_size_rule_and_the_recipe_keeps_to_it() -> None:
    prov = Sm90Provider()
    assert prov._config(_problem(4096, 4096), 132).block_n == 256
    assert prov._config(_problem(8192, 8192), 132).block_n == 192
    rule = prov._tile_rule(_problem(4096, 4096), prov._config(_problem(4096, 4096)))
    assert rule == {"options": OPTIONS, "pick": 1}
    rec = {"accepts": {"pitch": [["k", 1], ["n", 2]], "max_tiles": 2**31 - 1,
                       "tile_rule": rule},
           "tiles": {"block_m": 128, "block_n": 256, "cluster_m": 1, "persistent": True,
                     "sms": 132}}
    assert gr.recipe_accepts(rec, 4096, 4096, 4096)
    assert gr.recipe_accepts(rec, 2048, 2048, 512)
    assert not gr.recipe_accepts(rec, 8192, 8192, 4096)  # the rule picks 128 x 192 there
    # block scales carry their own rule (the block tiles), a provider with its own config
    # none
    blk = _problem(4096, 4096, "block")
    brule = prov._tile_rule(blk, prov._config(blk))
    assert brule == {"kind": "fp8_block", "options": [[128, 256, 1.0], [128, 128, 0.85],
                                                      [64, 128, 0.68]], "pick": 0}
    brec = {**rec, "accepts": {**rec["accepts"], "tile_rule": brule}}
    assert gr.recipe_accepts(brec, 4096, 4096, 4096)
    assert not gr.recipe_accepts(brec, 256, 7168, 4096)  # the rule picks 128 x 128 there
    small = _problem(128, 7168, "block")
    srule = prov._tile_rule(small, prov._config(small))
    assert srule is not None and srule["pick"] == 2  # 64 x 128: matched by rows too
    own = Sm90Provider(default_config("e4m3"))
    assert own._tile_rule(_problem(4096, 4096), own._config(_problem(4096, 4096))) is None


@pytest.mark.parametrize(("cfg", "reads0"), [
    (default_config("e4m3"), 1),                   # 192 columns: 3 chunks of 64
    (default_config("e4m3", m=4096, n=4096), 0),   # 256 columns: 4 chunks
])
def test_odd_chunk_count_waits_for_the_previous_tiles_last_store(cfg, reads0: int) -> None:
    # With two staging buffers used alternately per chunk, an odd chunk count puts a tile's
    # first chunk in the buffer of the previous tile's last store, which may still be in
    # flight after "wait_group.read 1" (PTX ISA, cp.async.bulk.wait_group: .read waits until
    # at most N of the most recent groups are still reading their source): that chunk must
    # wait for all ("read 0"); an even count never needs to.
    text = build_gemm_sm90(cfg).emit()
    assert text.count("cp.async.bulk.wait_group.read 0;") == reads0
    assert text.count("cp.async.bulk.wait_group.read 1;") == cfg.block_n // 64 - reads0


def test_recipe_alternatives_launch_the_other_tile(tmp_path, monkeypatch) -> None:
    """A promoted FP8 recipe carries the other tile's recipe (its cubin put in the kernel
    cache); the launch rebuilt from it runs each size on the tile the provider plans."""
    import random
    import types

    from nvatom.kernels.sm90.launch import kernel_params
    from nvatom.runtime import launch as rl
    from tests.test_gemm_recipe import _operands, check_alternative_is_the_kernels

    monkeypatch.setenv("NVATOM_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(rl, "_cubins", {})  # a cubin built by an earlier test: disk again
    prov = Sm90Provider()
    p0 = _problem(512, 384)
    a, b, d = _operands(p0, random.Random(3))
    rec = prov.plan(p0, "sm_90a").recipe(a, b, d, p0)
    assert rec is not None and rec["tiles"]["block_n"] == 192
    sub = rec["alternatives"]["1"]
    assert sub["tiles"]["block_n"] == 256 and sub["accepts"]["tile_rule"]["pick"] == 1
    p = _problem(4096, 4096)
    wide = prov._config(p, 132)
    assert sub["kernel"]["name"] == wide.name
    assert rl._entry_path(sub["kernel"]["disk_key"]).exists()  # assembled into the cache
    spec = check_alternative_is_the_kernels(sub, wide, p, 4)
    # the rebuilt launch (kernels faked: no GPU here) dispatches by the rule
    monkeypatch.setattr(gr, "load_cached_kernel", lambda src, t, key, dev: types.SimpleNamespace(
        launcher=lambda grid, block, shmem=0, cluster=None: (src.name, grid, shmem)))
    rec["kernel"] = {"source_key": "k", "name": prov._config(p0, 132).name,
                     "params": [list(x) for x in kernel_params(wide)],
                     "target": "sm_90a", "disk_key": "d"}
    launch = gr.RecipeLaunch(rec, 0)
    assert launch.accepts(4096, 4096, 512) and launch.accepts(8192, 8192, 512)
    assert launch.launcher(4096, 4096, 512) == (wide.name, spec.grid, spec.smem_bytes)
    narrow = prov._config(_problem(8192, 8192), 132)
    assert launch.launcher(8192, 8192, 512)[0] == narrow.name == rec["kernel"]["name"]
    del rec["alternatives"]  # a recipe without them: the ordinary path plans those sizes
    assert not gr.RecipeLaunch(rec, 0).accepts(4096, 4096, 512)
