"""The 16-bit SM90 kernel's consumer schedule chosen by shape (docs/perf.md, "Grouped ping-pong
and schedule choice"): the rule's table, its picks for given shapes (derived here from the
thresholds the table states, not from the rule's output), the grouped plan's hook, the plain
provider's config and the launch recipe that carries the other schedule."""

from __future__ import annotations

import math
import random
import types

import pytest

from nvatom import gemm_providers as gp
from nvatom.kernels import gemm_sm90 as sm90
from nvatom.runtime import gemm_recipe as gr
from nvatom.runtime.gemm_plan import (
    SCHEDULE_OPTIONS,
    SCHEDULE_RULES,
    GemmProblem,
    grouped_schedule,
    rule_pick,
    schedule_pick,
)

#: The thresholds docs/perf.md states (measured on an H100): a change of the table must be
#: a deliberate one, made here too.
STATED = {"plain": {"max_k": 4096, "long_k_max_tiles": 8192, "min_mean_rows": 0},
          "grouped": {"max_k": 4096, "long_k_max_tiles": 0, "min_mean_rows": 512}}


def _expected(rows: list[int], n: int, k: int, t: dict[str, int]) -> str:
    """The rule as docs/perf.md words it, written independently: ping-pong when the
    non-empty groups average at least min_mean_rows rows and K <= max_k or the 128 x 128
    output tiles number at most long_k_max_tiles."""
    live = [r for r in rows if r]
    if not live or sum(live) / len(live) < t["min_mean_rows"]:
        return "cooperative"
    tiles = sum(math.ceil(r / 128) for r in live) * math.ceil(n / 128)
    return "pingpong" if k <= t["max_k"] or tiles <= t["long_k_max_tiles"] else "cooperative"


def _moe_cases() -> dict[str, tuple[list[int], int, int]]:
    rng = random.Random(0)  # bench/gemm_grouped.py's cases
    return {"A": ([2048] * 8, 4096, 4096),
            "B": ([rng.randint(0, 1024) for _ in range(64)], 2048, 7168),
            "C": ([rng.randint(0, 4096) for _ in range(8)], 4096, 7168),
            "D": ([rng.randint(0, 4096) for _ in range(64)], 2048, 7168)}


def test_the_table_is_the_stated_one() -> None:
    assert SCHEDULE_RULES == STATED
    assert SCHEDULE_OPTIONS == ("pingpong", "cooperative")
    assert set(SCHEDULE_OPTIONS) == set(sm90.SCHEDULE_TILES)


@pytest.mark.parametrize(("m", "n", "k", "want"), [
    (8192, 8192, 8192, "pingpong"),       # K > 4096 but 64 x 64 = 4096 tiles <= 8192
    (114521, 2048, 7168, "cooperative"),  # 895 x 16 = 14320 tiles, K 7168 (measured 0.74x)
    (65536, 2048, 7168, "pingpong"),      # 512 x 16 = 8192 tiles: the bound itself
    (65537, 2048, 7168, "cooperative"),   # 513 x 16 = 8208
    (16384, 16384, 4096, "pingpong"),     # K <= 4096: any tile count
    (16384, 16384, 8192, "cooperative"),
    (4096, 4096, 4096, "pingpong"),
    (1, 8, 16, "pingpong"),
])
def test_plain_rule(m: int, n: int, k: int, want: str) -> None:
    assert _expected([m], n, k, STATED["plain"]) == want
    assert schedule_pick([m], n, k, SCHEDULE_RULES["plain"]) == want
    cfg = sm90.default_config("bf16", m=m, n=n, k=k)
    assert cfg == sm90.default_config("bf16", schedule=want)
    assert sm90.default_config("f16", "f32", "K", m=m, n=n, k=k).schedule == want


def test_plain_rule_needs_all_three_sizes_and_yields_to_a_given_schedule() -> None:
    default = sm90.default_config("bf16")
    assert default.schedule == sm90.DEFAULT_SCHEDULE_16BIT
    assert sm90.default_config("bf16", m=114521, n=2048) == default  # no K: the default
    assert sm90.default_config("bf16", m=114521, n=2048, k=7168,
                               schedule="pingpong").schedule == "pingpong"
    # FP8 keeps its tile rule (wave count), cooperative
    assert sm90.default_config("e4m3", m=114521, n=2048, k=7168).schedule == "cooperative"


@pytest.mark.parametrize("case", ["A", "B", "C", "D"])
def test_grouped_rule_on_the_bench_cases(case: str) -> None:
    rows, n, k = _moe_cases()[case]
    ends = [sum(rows[: i + 1]) for i in range(len(rows))]
    want = _expected(rows, n, k, STATED["grouped"])
    assert want == ("pingpong" if case == "A" else "cooperative")  # K 4096 vs 7168
    assert grouped_schedule("bf16", ends, n, k) == want
    assert grouped_schedule("f16", ends, n, k) == want
    assert grouped_schedule("e4m3", ends, n, k) == "cooperative"  # FP8: cooperative only


@pytest.mark.parametrize(("rows", "k", "want"), [
    ([512] * 8, 4096, "pingpong"),
    ([511] * 8, 4096, "cooperative"),           # below 512 rows a group on average
    ([0, 0, 1024, 0], 4096, "pingpong"),         # empty groups do not count
    ([0, 0, 0], 4096, "cooperative"),            # nothing to run
    ([256, 768], 4096, "pingpong"),              # mean 512
    ([4096] * 8, 4096 + 8, "cooperative"),       # long K: no tile allowance when grouped
    ([128], 64, "cooperative"),
])
def test_grouped_rule_thresholds(rows: list[int], k: int, want: str) -> None:
    ends = [sum(rows[: i + 1]) for i in range(len(rows))]
    assert _expected(rows, 4096, k, STATED["grouped"]) == want
    assert grouped_schedule("bf16", ends, 4096, k) == want


def test_grouped_plan_takes_the_rules_schedule() -> None:
    def plan(rows: list[int], k: int) -> gp.GroupedPlan:
        ends = [sum(rows[: i + 1]) for i in range(len(rows))]
        return gp.grouped_plan("bf16", "bf16", "N", ends, 2048, k, 0x7F0000000000, k,
                               0x7F4000000000, k * 2048 * 2, 2048, 0x7F8000000000, 2048, 132,
                               encode=lambda args: bytes(128))
    pp, coop = plan([2048] * 4, 4096), plan([2048] * 4, 7168)
    assert pp.cfg == sm90.GemmSm90Config(grouped=True, **sm90.SCHEDULE_TILES["pingpong"])
    assert coop.cfg == sm90.GemmSm90Config(grouped=True, **sm90.SCHEDULE_TILES["cooperative"])
    assert pp.tile_ends[-1] == 4 * 16 * 16 and coop.tile_ends[-1] == 4 * 16 * 8
    # a given config wins over the rule
    cfg = sm90.GemmSm90Config(**sm90.SCHEDULE_TILES["pingpong"])
    ends = [2048] * 1
    got = gp.grouped_plan("bf16", "bf16", "N", ends, 2048, 7168, 0x7F0000000000, 7168,
                          0x7F4000000000, 7168 * 2048 * 2, 2048, 0x7F8000000000, 2048, 132,
                          encode=lambda args: bytes(128), config=cfg)
    assert got.cfg.schedule == "pingpong"


def _problem(m: int, n: int, k: int) -> GemmProblem:
    return GemmProblem(m, n, k, "bf16", "bf16", "K", "N")


def test_provider_rule_and_recipe_acceptance() -> None:
    prov = gp.Sm90Provider()
    big, small = _problem(114521, 2048, 7168), _problem(8192, 8192, 8192)
    assert prov._config(big, 132).schedule == "cooperative"
    assert prov._config(small, 132).schedule == "pingpong"
    rule = prov._tile_rule(small, prov._config(small, 132))
    assert rule == {"kind": "schedule", "table": STATED["plain"],
                    "options": ["pingpong", "cooperative"], "pick": 0}
    assert rule_pick(rule, 114521, 2048, 7168, 132) == 1
    assert rule_pick(rule, 8192, 8192, 8192, 132) == 0
    rec = {"accepts": {"pitch": [["k", 2], ["n", 2]], "max_tiles": 2**31 - 1,
                       "tile_rule": rule},
           "tiles": {"block_m": 128, "block_n": 128, "cluster_m": 1, "persistent": True,
                     "sms": 132}}
    assert gr.recipe_accepts(rec, 8192, 8192, 8192)
    assert not gr.recipe_accepts(rec, 114521, 2048, 7168)  # the rule picks cooperative
    # a provider with its own config carries no rule
    own = gp.Sm90Provider(sm90.default_config("bf16"))
    assert own._tile_rule(small, own._config(small)) is None


def test_recipe_carries_the_other_schedule(tmp_path, monkeypatch) -> None:
    """A 16-bit recipe carries the other schedule's recipe (its cubin put in the kernel
    cache); the launch rebuilt from it runs each shape on the schedule the provider plans."""
    from nvatom.runtime import launch as rl
    from tests.test_gemm_recipe import _norm, _operands

    monkeypatch.setenv("NVATOM_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(rl, "_cubins", {})
    prov = gp.Sm90Provider()
    p0 = _problem(512, 384, 256)
    a, b, d = _operands(p0, random.Random(5))
    rec = prov.plan(p0, "sm_90a").recipe(a, b, d, p0)
    assert rec is not None and rec["tiles"]["block_n"] == 128  # ping-pong at this shape
    sub = rec["alternatives"]["1"]
    p = _problem(114521, 2048, 7168)
    coop = prov._config(p, 132)
    assert coop.schedule == "cooperative" and sub["kernel"]["name"] == coop.name
    assert sub["tiles"]["block_n"] == 256 and sub["accepts"]["tile_rule"]["pick"] == 1
    assert rl._entry_path(sub["kernel"]["disk_key"]).exists()
    a, b, d = _operands(p, random.Random(6))
    spec = sm90.gemm_sm90_launch_spec(coop, p.m, p.n, p.k, a.ptr, b.ptr, d.ptr, 132,
                                      lda=a.ld, ldb=b.ld, ldd=d.ld)
    env = {"m": p.m, "n": p.n, "k": p.k, "lda": a.ld, "ldb": b.ld, "ldd": d.ld,
           "a": a.ptr, "b": b.ptr, "out": d.ptr}
    assert [_norm(x) for x in gr.evaluate_maps(sub["maps"], env)] == \
        [_norm(tm.driver_args()) for tm in spec.tensor_maps]
    assert gr.recipe_grid(sub, p.m, p.n) == spec.grid
    monkeypatch.setattr(gr, "load_cached_kernel", lambda src, t, key, dev: types.SimpleNamespace(
        launcher=lambda grid, block, shmem=0, cluster=None: (src.name, grid, shmem)))
    pp = prov._config(p0, 132)
    rec["kernel"] = {"source_key": "k", "name": pp.name,
                     "params": [list(x) for x in sm90.kernel_params(pp)],
                     "target": "sm_90a", "disk_key": "d"}
    launch = gr.RecipeLaunch(rec, 0)
    assert launch.accepts(p.m, p.n, p.k) and launch.accepts(8192, 8192, 8192)
    assert launch.launcher(p.m, p.n, p.k) == (coop.name, spec.grid, spec.smem_bytes)
    assert launch.launcher(8192, 8192, 8192)[0] == pp.name
    # the same M x N with a short K: the rule keeps ping-pong
    assert launch.launcher(p.m, p.n, 4096)[0] == pp.name
    del rec["alternatives"]
    assert not gr.RecipeLaunch(rec, 0).accepts(p.m, p.n, p.k)
