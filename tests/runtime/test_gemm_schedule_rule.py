"""The 16-bit SM90 kernel's consumer schedule chosen by shape (docs/perf.md, "Grouped ping-pong
and schedule choice", "Schedule by wave count"): the rules' tables, their picks for given
shapes (derived here from the rules as the docs state them, not from the rules' output), the
grouped plan's hook, the plain provider's config and the launch recipe that carries the other
schedules."""

from __future__ import annotations

import dataclasses
import math
import random
import types

import pytest

from nvatom import gemm_providers as gp
from nvatom.kernels.sm90.config import GemmSm90Config, GemmSm90Error
from nvatom.kernels.sm90.gemm import build_gemm_sm90
from nvatom.kernels.sm90.launch import default_config, kernel_params
from nvatom.kernels.sm90.tuning import (
    DEFAULT_SCHEDULE_16BIT,
    PLAIN_SCHEDULE_WAVES,
    SCHEDULE_OPTION_TILES,
    SCHEDULE_OPTIONS,
    SCHEDULE_RULES,
    SCHEDULE_TILES,
    grouped_schedule,
    plain_schedule,
)
from nvatom.runtime import gemm_recipe as gr
from nvatom.runtime.gemm_plan import GemmProblem, rule_pick

#: The thresholds docs/perf.md states (measured on an H100): a change of the table must be
#: a deliberate one, made here too.
NO_LIMIT = 2**31 - 1
STATED = {"grouped": {"pick": "pingpong192", "otherwise": "cooperative", "max_groups": 8,
                      "max_k": 8192, "min_mean_rows": 512, "max_tiles": NO_LIMIT,
                      "out_dtypes": ["bf16", "f16"], "b_majors": ["N"]}}
TILE = {"pingpong": (128, 128), "pingpong192": (128, 192), "cooperative": (128, 256)}
#: The plain GEMM's wave rule as docs/perf.md states it: (schedule, efficiency, most tiles)
STATED_WAVES = (("pingpong", 0.99, 4608), ("pingpong192", 1.0, NO_LIMIT),
                ("cooperative", 0.985, NO_LIMIT))


def _expected_plain(m: int, n: int, sms: int = 132) -> str:
    """Written independently: each schedule's time is its whole waves of tiles times the
    tile's area over its efficiency, a schedule with more tiles than its limit is out, the
    smallest time wins (the earlier on a tie)."""
    best, best_t = "", math.inf
    for name, eff, cap in STATED_WAVES:
        bm, bn = TILE[name]
        tiles = math.ceil(m / bm) * math.ceil(n / bn)
        if tiles > cap:
            continue
        t = math.ceil(tiles / sms) * bm * bn / eff
        if t < best_t:
            best, best_t = name, t
    return best


def _expected(rows: list[int], n: int, k: int, t: dict, out: str = "bf16",
              bmaj: str = "N") -> str:
    """The rule as docs/perf.md words it, written independently: ``pick`` when there are at
    most max_groups non-empty groups, K <= max_k, the non-empty groups average at least
    min_mean_rows rows, ``pick``'s output tiles number at most max_tiles and (where the
    rule lists them) the output type and B's layout are measured ones."""
    live = [r for r in rows if r]
    if not live or out not in t.get("out_dtypes", [out]) or bmaj not in t.get("b_majors",
                                                                                [bmaj]):
        return t["otherwise"]
    bm, bn = TILE[t["pick"]]
    tiles = sum(math.ceil(r / bm) for r in live) * math.ceil(n / bn)
    ok = (len(live) <= t["max_groups"] and k <= t["max_k"]
          and sum(live) / len(live) >= t["min_mean_rows"] and tiles <= t["max_tiles"])
    return t["pick"] if ok else t["otherwise"]


def _moe_cases() -> dict[str, tuple[list[int], int, int]]:
    rng = random.Random(0)  # bench/gemm_grouped.py's cases
    return {"A": ([2048] * 8, 4096, 4096),
            "B": ([rng.randint(0, 1024) for _ in range(64)], 2048, 7168),
            "C": ([rng.randint(0, 4096) for _ in range(8)], 4096, 7168),
            "D": ([rng.randint(0, 4096) for _ in range(64)], 2048, 7168)}


def test_the_table_is_the_stated_one() -> None:
    assert SCHEDULE_RULES == STATED
    assert PLAIN_SCHEDULE_WAVES == STATED_WAVES
    assert SCHEDULE_OPTIONS == ("pingpong", "cooperative", "pingpong192")
    assert set(SCHEDULE_OPTIONS) == set(SCHEDULE_TILES)
    assert SCHEDULE_TILES["pingpong192"] == {"schedule": "pingpong", "block_n": 192,
                                             "stages": 4}
    # the tiles the rules count in are read from the kernel's table (one place)
    assert SCHEDULE_OPTION_TILES == TILE


@pytest.mark.parametrize(("m", "n", "want"), [
    # measured on an H100 (bench/schedule_ab.py, reports/bench/schedule_ab.json): the pick
    # was the fastest of the three schedules at each of these
    (8192, 8192, "pingpong192"),     # 21 waves of 128 x 192 (31.03 -> 32 of 128 x 128)
    (4096, 4096, "pingpong"),        # 7.76 -> 8 waves; 128 x 192: 5.33 -> 6
    (2048, 2048, "pingpong"),
    (16384, 1024, "pingpong"),       # 1024 columns: 192 would pad to 1152
    (16384, 8192, "pingpong192"),    # 128 x 128: 8192 tiles, over its limit
    (12288, 12288, "pingpong192"),
    (114521, 2048, "cooperative"),   # 895 x 11 tiles of 192 (the last 128 wide) waste
    (33792, 4096, "cooperative"),    # 4224 tiles of 128 x 256: 32 whole waves
    (9216, 8192, "pingpong"),        # 4608 tiles of 128 x 128, its limit: 35 waves
    (9217, 8192, "pingpong192"),     # 4672 tiles: over it; 24 waves of 128 x 192
    (1, 8, "pingpong"),
])
def test_plain_rule(m: int, n: int, want: str) -> None:
    assert _expected_plain(m, n) == want
    assert plain_schedule(m, n) == want
    cfg = default_config("bf16", m=m, n=n)
    assert cfg == default_config("bf16", schedule=want)
    assert default_config("f16", "f32", "K", m=m, n=n).schedule == \
        SCHEDULE_TILES[want]["schedule"]


def test_plain_rule_sweep_matches_the_stated_rule() -> None:
    rng = random.Random(11)
    for _ in range(400):
        m, n, sms = rng.randint(1, 70000), 8 * rng.randint(1, 3000), rng.choice((132, 114, 78))
        assert plain_schedule(m, n, sms) == _expected_plain(m, n, sms), (m, n, sms)


def test_plain_rule_needs_all_three_sizes_and_yields_to_a_given_schedule() -> None:
    default = default_config("bf16")
    assert default.schedule == DEFAULT_SCHEDULE_16BIT
    assert default_config("bf16", m=114521) == default  # no N: the default
    assert default_config("bf16", m=114521, n=2048,
                          schedule="pingpong").schedule == "pingpong"
    wide = default_config("f16", schedule="pingpong192")
    assert (wide.schedule, wide.block_n, wide.stages) == ("pingpong", 192, 4)
    with pytest.raises(GemmSm90Error, match="the FP8 defaults are cooperative"):
        default_config("e4m3", schedule="pingpong192")
    with pytest.raises(GemmSm90Error, match="schedule 'bogus' is not one of"):
        default_config("bf16", schedule="bogus")
    # FP8 keeps its tile rule (wave count), cooperative
    assert default_config("e4m3", m=114521, n=2048).schedule == "cooperative"


@pytest.mark.parametrize("case", ["A", "B", "C", "D"])
def test_grouped_rule_on_the_bench_cases(case: str) -> None:
    rows, n, k = _moe_cases()[case]
    ends = [sum(rows[: i + 1]) for i in range(len(rows))]
    want = _expected(rows, n, k, STATED["grouped"])
    # 8 experts (A, C): the 128 x 192 ping-pong tile; 64 experts (B, D): cooperative
    assert want == ("pingpong192" if case in "AC" else "cooperative")
    assert grouped_schedule(("bf16", "bf16", "N"), ends, n, k) == want
    assert grouped_schedule(("f16", "f16", "N"), ends, n, k) == want
    # not measured on the 128 x 192 ping-pong tile: f32 output, a K-major B
    assert grouped_schedule(("bf16", "f32", "N"), ends, n, k) == "cooperative"
    assert grouped_schedule(("bf16", "bf16", "K"), ends, n, k) == "cooperative"
    assert _expected(rows, n, k, STATED["grouped"], "f32") == "cooperative"
    assert _expected(rows, n, k, STATED["grouped"], "bf16", "K") == "cooperative"
    # FP8: cooperative only
    assert grouped_schedule(("e4m3", "bf16", "K"), ends, n, k) == "cooperative"


@pytest.mark.parametrize(("rows", "k", "want"), [
    ([512] * 8, 4096, "pingpong192"),
    ([511] * 8, 4096, "cooperative"),            # below 512 rows a group on average
    ([0, 0, 1024, 0], 4096, "pingpong192"),       # empty groups do not count
    ([0] * 56 + [2048] * 8, 8192, "pingpong192"),  # 8 non-empty groups, K 8192
    ([2048] * 9, 4096, "cooperative"),            # 9 groups
    ([0, 0, 0], 4096, "cooperative"),             # nothing to run
    ([256, 768], 4096, "pingpong192"),            # mean 512
    ([4096] * 8, 8192 + 8, "cooperative"),        # K above 8192
    ([128], 64, "cooperative"),
])
def test_grouped_rule_thresholds(rows: list[int], k: int, want: str) -> None:
    ends = [sum(rows[: i + 1]) for i in range(len(rows))]
    assert _expected(rows, 4096, k, STATED["grouped"]) == want
    assert grouped_schedule(("bf16", "bf16", "N"), ends, 4096, k) == want


def test_grouped_plan_takes_the_rules_schedule() -> None:
    def plan(rows: list[int], k: int) -> gp.GroupedPlan:
        ends = [sum(rows[: i + 1]) for i in range(len(rows))]
        return gp.grouped_plan("bf16", "bf16", "N", ends, 2048, k, 0x7F0000000000, k,
                               0x7F4000000000, k * 2048 * 2, 2048, 0x7F8000000000, 2048, 132,
                               encode=lambda args: bytes(128))
    pp, coop = plan([2048] * 4, 7168), plan([2048] * 16, 7168)
    assert pp.cfg == GemmSm90Config(grouped=True, **SCHEDULE_TILES["pingpong192"])
    assert coop.cfg == GemmSm90Config(grouped=True, **SCHEDULE_TILES["cooperative"])
    # 2048 columns: 11 tiles of 192 (the last 128 wide), 8 of 256
    assert pp.tile_ends[-1] == 4 * 16 * 11 and coop.tile_ends[-1] == 16 * 16 * 8
    # a given config wins over the rule
    cfg = GemmSm90Config(**SCHEDULE_TILES["pingpong"])
    ends = [2048] * 1
    got = gp.grouped_plan("bf16", "bf16", "N", ends, 2048, 7168, 0x7F0000000000, 7168,
                          0x7F4000000000, 7168 * 2048 * 2, 2048, 0x7F8000000000, 2048, 132,
                          encode=lambda args: bytes(128), config=cfg)
    assert got.cfg.schedule == "pingpong"


@pytest.mark.parametrize("grouped", [False, True])
@pytest.mark.parametrize(("ind", "outd", "major"), [("bf16", "bf16", "MN"), ("f16", "f16", "K"),
                                                    ("bf16", "f32", "K")])
def test_pingpong192_assembles_without_spills(grouped: bool, ind: str, outd: str,
                                              major: str) -> None:
    from nvatom.runtime.ptxas import assemble

    cfg = dataclasses.replace(default_config(ind, outd, major, schedule="pingpong192"),
                              grouped=grouped)
    ptx = build_gemm_sm90(cfg).emit()
    assert assemble(ptx, "sm_90a").kernel().spills == 0
    # 192 columns: three 64-column chunks of 16-bit output per 64-row half (an odd count:
    # each half's first chunk waits for every earlier store to finish reading its buffer)
    if outd != "f32":
        assert ptx.count("cp.async.bulk.wait_group.read 0;") == 2
        assert ptx.count("cp.async.bulk.wait_group.read 1;") == 4


def _problem(m: int, n: int, k: int) -> GemmProblem:
    return GemmProblem(m, n, k, "bf16", "bf16", "K", "N")


def test_provider_rule_and_recipe_acceptance() -> None:
    prov = gp.Sm90Provider()
    big, small = _problem(114521, 2048, 7168), _problem(4096, 4096, 4096)
    assert prov._config(big, 132) == default_config("bf16", schedule="cooperative")
    assert prov._config(small, 132) == default_config("bf16", schedule="pingpong")
    rule = prov._tile_rule(small, prov._config(small, 132))
    assert rule == {"kind": "schedule", "names": [n for n, _, _ in STATED_WAVES],
                    "options": [[*TILE[n], e, c] for n, e, c in STATED_WAVES], "pick": 0}
    assert prov._tile_rule(big, prov._config(big, 132))["pick"] == 2
    assert rule_pick(rule, 114521, 2048, 7168, 132) == 2
    assert rule_pick(rule, 8192, 8192, 8192, 132) == 1
    assert rule_pick(rule, 4096, 4096, 4096, 132) == 0
    rec = {"accepts": {"pitch": [["k", 2], ["n", 2]], "max_tiles": 2**31 - 1,
                       "tile_rule": rule},
           "tiles": {"block_m": 128, "block_n": 128, "cluster_m": 1, "persistent": True,
                     "sms": 132}}
    assert gr.recipe_accepts(rec, 4096, 4096, 4096)
    assert not gr.recipe_accepts(rec, 8192, 8192, 8192)  # the rule picks 128 x 192
    assert not gr.recipe_accepts(rec, 114521, 2048, 7168)  # the rule picks cooperative
    # a provider with its own config carries no rule
    own = gp.Sm90Provider(default_config("bf16"))
    assert own._tile_rule(small, own._config(small)) is None


def test_recipe_carries_the_other_schedule(tmp_path, monkeypatch) -> None:
    """A 16-bit recipe carries the other schedule's recipe (its cubin put in the kernel
    cache); the launch rebuilt from it runs each shape on the schedule the provider plans."""
    from nvatom.runtime import launch as rl
    from tests.test_gemm_recipe import _operands, check_alternative_is_the_kernels

    monkeypatch.setenv("NVATOM_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(rl, "_cubins", {})
    prov = gp.Sm90Provider()
    p0 = _problem(512, 384, 256)
    a, b, d = _operands(p0, random.Random(5))
    rec = prov.plan(p0, "sm_90a").recipe(a, b, d, p0)
    assert rec is not None and rec["tiles"]["block_n"] == 128  # ping-pong at this shape
    assert set(rec["alternatives"]) == {"1", "2"}  # 128 x 192 ping-pong, cooperative
    wide = rec["alternatives"]["1"]
    assert wide["tiles"]["block_n"] == 192 and wide["accepts"]["tile_rule"]["pick"] == 1
    sub = rec["alternatives"]["2"]
    p = _problem(114521, 2048, 7168)
    coop = prov._config(p, 132)
    assert coop.schedule == "cooperative" and sub["kernel"]["name"] == coop.name
    assert sub["tiles"]["block_n"] == 256 and sub["accepts"]["tile_rule"]["pick"] == 2
    assert rl._entry_path(sub["kernel"]["disk_key"]).exists()
    spec = check_alternative_is_the_kernels(sub, coop, p, 6)
    monkeypatch.setattr(gr, "load_cached_kernel", lambda src, t, key, dev: types.SimpleNamespace(
        launcher=lambda grid, block, shmem=0, cluster=None: (src.name, grid, shmem)))
    pp = prov._config(p0, 132)
    rec["kernel"] = {"source_key": "k", "name": pp.name,
                     "params": [list(x) for x in kernel_params(pp)],
                     "target": "sm_90a", "disk_key": "d"}
    launch = gr.RecipeLaunch(rec, 0)
    assert launch.accepts(p.m, p.n, p.k) and launch.accepts(8192, 8192, 8192)
    assert launch.launcher(p.m, p.n, p.k) == (coop.name, spec.grid, spec.smem_bytes)
    assert launch.launcher(4096, 4096, 4096)[0] == pp.name
    assert launch.launcher(8192, 8192, 8192)[0] == prov._config(_problem(8192, 8192, 64)).name
    del rec["alternatives"]
    assert not gr.RecipeLaunch(rec, 0).accepts(p.m, p.n, p.k)
