"""The SM90 GEMM's tuning table, the one place its measured choices are written
(docs/perf.md): the tile and stage count of each consumer schedule (:data:`SCHEDULE_TILES`),
the FP8 promotion settings and tiles, and the size rules that choose among them by wave count
or problem shape.  :func:`nvatom.kernels.sm90.launch.default_config`, the SM90 provider
(:func:`size_rule`) and the launch recipes' alternatives (:func:`rule_settings`) read it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from nvatom.kernels.sm90.config import SCALE_BLOCK, GemmSm90Config
from nvatom.runtime.gemm_plan import PLAIN_DTYPES, wave_pick

__all__ = [
    "DEFAULT_SCHEDULE_16BIT",
    "FP8_BLOCK_PROMOTION",
    "FP8_BLOCK_PROMOTION_SMALL_M",
    "FP8_BLOCK_PROMOTION_WIDE",
    "FP8_BLOCK_TILE_CHOICES",
    "FP8_PROMOTION",
    "FP8_PROMOTION_WIDE",
    "FP8_TILE_CHOICES",
    "PLAIN_SCHEDULE_WAVES",
    "SCHEDULE_OPTIONS",
    "SCHEDULE_OPTION_TILES",
    "SCHEDULE_RULES",
    "SCHEDULE_TILES",
    "fp8_tile_options",
    "grouped_schedule",
    "plain_schedule",
    "plain_schedule_options",
    "rule_settings",
    "schedule_pick",
    "size_rule",
]

#: The FP8 main loop's promotion settings (docs/perf.md, "FP8 promotion"): ``promote`` K
#: blocks per promotion, in ``promote_parts`` N parts through ``promote_temps`` temporaries.
FP8_PROMOTION = {"promote": 1, "promote_parts": 2, "promote_temps": 2, "block_n": 192}
#: The wide promoted tile, 128 x 256: 4 parts of n64 through two temporaries (128 + 64
#: registers), 4 K blocks per loop iteration (one WGMMA drain per 4 K blocks): 4-6% faster
#: than the earlier one n128 temporary (``promote_parts`` 2, ``promote_temps`` 1) at 4096^3
#: and 8192^3 (docs/perf.md, "FP8 promoted, session 5", U2).
FP8_PROMOTION_WIDE = {"promote": 1, "promote_parts": 4, "promote_temps": 2, "block_n": 256,
                      "promote_unroll": 4}
#: The promoted tiles (per-tensor and row-wise scales) chosen per problem size by
#: :func:`nvatom.runtime.gemm_plan.wave_pick`: (settings, speed of one tile relative to the
#: first: at 8192^3 on an H100 the wide tile ran at 0.970 of the 128 x 192 one (median of
#: per-round ratios, two sweeps, both scale modes), i.e. 0.985 per tile once its 16 waves
#: against 21 x 3/4 are taken out; 0.98 here; session 5, U2).
FP8_TILE_CHOICES: tuple[tuple[dict[str, Any], float], ...] = (
    (FP8_PROMOTION, 1.0), (FP8_PROMOTION_WIDE, 0.98))
#: Block scales (DeepSeek-V3; docs/perf.md "FP8 block scales, tiled"): a tile is whole
#: 128-column blocks of B's scales and each N part lies in one.  The narrow tile, 128 x 128
#: in 2 parts of n64 through two temporaries, and the wide one, 128 x 256 in 2 parts of n128
#: through one (each part one scale block), both 4 K blocks per loop iteration: on an H200
#: the wide tile ran 1.17-1.37x the earlier 128 x 128 without unrolling on DeepGEMM's large
#: shapes, 4096^3 and 8192^3, and the narrow one 0.83-0.86x the wide per tile there (1.04-1.11x
#: the earlier tile at M 64 and 128, where it keeps twice the CTAs busy).
FP8_BLOCK_PROMOTION = {**FP8_PROMOTION, "block_n": SCALE_BLOCK, "promote_unroll": 4,
                       "consumers": 2, "stages": 4}
FP8_BLOCK_PROMOTION_WIDE = {**FP8_BLOCK_PROMOTION, "promote_temps": 1,
                            "block_n": 2 * SCALE_BLOCK}
#: The small-M tile: 64 x 128 (one consumer warpgroup), 8 stages: at M 64 and 128 on an H200
#: 1.31-1.33x the 128 x 128 tile (four times the CTAs of the wide one); per tile area 0.67-0.71
#: of the wide tile's speed where both fill whole waves (docs/perf.md "FP8 block scales,
#: tiled").
FP8_BLOCK_PROMOTION_SMALL_M = {**FP8_BLOCK_PROMOTION, "consumers": 1, "stages": 8}
#: The block-scale tiles chosen per problem size by ``wave_pick`` (settings, speed of one
#: tile relative to the first, per area), as :data:`FP8_TILE_CHOICES`; a choice's rows are
#: 64 per consumer warpgroup (``consumers``).  Each choice names every field another
#: choice sets (a launch recipe applies one over another with ``dataclasses.replace``).
FP8_BLOCK_TILE_CHOICES: tuple[tuple[dict[str, Any], float], ...] = (
    (FP8_BLOCK_PROMOTION_WIDE, 1.0), (FP8_BLOCK_PROMOTION, 0.85),
    (FP8_BLOCK_PROMOTION_SMALL_M, 0.68))
#: Each consumer schedule's tile and stage count (docs/perf.md, "Ping-pong consumers"):
#: cooperative 128 x 256 (the two warpgroups 64 rows each), 4 stages; ping-pong 128 x 128
#: per warpgroup (128 accumulator registers a thread), 6 stages; "pingpong192": ping-pong
#: 128 x 192 per warpgroup (192 registers), 4 stages (docs/perf.md, "Grouped ping-pong and
#: schedule choice").  The names are :data:`SCHEDULE_OPTIONS`.
SCHEDULE_TILES: dict[str, dict[str, Any]] = {
    "cooperative": {"schedule": "cooperative", "block_n": 256, "stages": 4},
    "pingpong": {"schedule": "pingpong", "block_n": 128, "stages": 6},
    "pingpong192": {"schedule": "pingpong", "block_n": 192, "stages": 4},
}
#: The default schedule of bf16/f16 inputs (measured on an H100, docs/perf.md "Ping-pong
#: consumers": level or faster on every bench shape but 4096^3, 1-2% slower there); FP8
#: stays cooperative (ping-pong measured slower).  With the problem's sizes the schedule
#: comes from :func:`plain_schedule` (by wave count; the grouped kernel's
#: from SCHEDULE_RULES["grouped"]).
DEFAULT_SCHEDULE_16BIT = "pingpong"


def fp8_tile_options(block_m: int = 128, block_scales: bool = False) -> list[list[float]]:
    """:data:`FP8_TILE_CHOICES` (rows ``block_m``) or, with ``block_scales``,
    :data:`FP8_BLOCK_TILE_CHOICES` (each choice's own rows) as ``wave_pick`` options
    ``[block_m, block_n, efficiency]`` (data a launch recipe can carry)."""
    if block_scales:
        return [[64 * c["consumers"], c["block_n"], eff]
                for c, eff in FP8_BLOCK_TILE_CHOICES]
    return [[block_m, c["block_n"], eff] for c, eff in FP8_TILE_CHOICES]


#: The 16-bit schedule options (the names of :data:`SCHEDULE_TILES`) in the order the size
#: rules list them, and the output tile each counts in (a warpgroup's tile with ping-pong),
#: read from :data:`SCHEDULE_TILES`: ping-pong 128 x 128, cooperative 128 x 256, ping-pong
#: 128 x 192.
SCHEDULE_OPTIONS = ("pingpong", "cooperative", "pingpong192")
SCHEDULE_OPTION_TILES = {name: (GemmSm90Config(**SCHEDULE_TILES[name]).block_m,
                                SCHEDULE_TILES[name]["block_n"]) for name in SCHEDULE_OPTIONS}
_NO_LIMIT = 2**31 - 1
#: The plain 16-bit GEMM's schedule by wave count (:func:`plain_schedule`; docs/perf.md,
#: "Schedule by wave count"): (schedule, efficiency of one of its tiles relative to the
#: 128 x 192 ping-pong tile, the most output tiles it is taken for).  Efficiencies measured on
#: an H100 at 8192^3, 4096^3 and 16384 x 8192 x 8192 (bf16, tile area x TF/s over whole waves:
#: 128 x 128 ping-pong 0.97-1.0, cooperative 0.977-1.012); the 128 x 128 ping-pong tile turns
#: DRAM-bound above 4608 tiles (:data:`SCHEDULE_RULES`' measurements).  Its picks were the
#: fastest of the three on 12 of 14 shapes measured, within 1.8% on the others.
PLAIN_SCHEDULE_WAVES: tuple[tuple[str, float, int], ...] = (
    ("pingpong", 0.99, 4608), ("pingpong192", 1.0, _NO_LIMIT), ("cooperative", 0.985, _NO_LIMIT))


def plain_schedule_options() -> list[list[float]]:
    """:data:`PLAIN_SCHEDULE_WAVES` as :func:`wave_pick` options ``[block_m, block_n,
    efficiency, max_tiles]`` (data a launch recipe carries)."""
    return [[*SCHEDULE_OPTION_TILES[name], eff, cap] for name, eff, cap in PLAIN_SCHEDULE_WAVES]


def plain_schedule(m: int, n: int, sms: int = 132) -> str:
    """The schedule of a plain 16-bit M x N GEMM on ``sms`` multiprocessors: the option of
    :data:`PLAIN_SCHEDULE_WAVES` whose tiles finish first (:func:`wave_pick`)."""
    return PLAIN_SCHEDULE_WAVES[wave_pick(plain_schedule_options(), m, n, sms)][0]


#: Which schedule the grouped 16-bit kernel runs by problem shape (docs/perf.md, "Grouped
#: ping-pong and schedule choice"; measured on an H100): ``pick`` where every condition holds, else
#: ``otherwise``. Conditions: at most ``max_groups`` non-empty groups, K
#: <= ``max_k``, at least ``min_mean_rows`` rows a non-empty group on average, and at most
#: ``max_tiles`` output tiles of ``pick``'s tile (and, where listed, an output type of
#: ``out_dtypes`` and a B layout of ``b_majors``: "N" row-major, "K" column-major, the measured
#: ones). The 128 x 128 ping-pong tile turns DRAM-bound on large problems (case B of
#: bench/gemm_grouped.py: 2.25x the DRAM bytes of the 128 x 256 tile; plain GEMMs of 8192-16384
#: such tiles 0.75-0.95x the cooperative kernel in 5 of 6 shapes, of <= 4224 tiles 0.97-1.09x):
#: the plain GEMM's wave rule takes it up to 4608 tiles. The grouped kernel: the 128 x 192
#: ping-pong tile won on 8-expert cases with K <= 7168 (+0.4% to +6.4%) and lost on 64-expert
#: ones (-1.6% to -8.0%) and at K = 14336 (-5.8%).
SCHEDULE_RULES: dict[str, dict[str, Any]] = {
    "grouped": {"pick": "pingpong192", "otherwise": "cooperative", "max_groups": 8,
                "max_k": 8192, "min_mean_rows": 512, "max_tiles": _NO_LIMIT,
                "out_dtypes": ["bf16", "f16"], "b_majors": ["N"]},
}


def schedule_pick(rows: Sequence[int], n: int, k: int, rule: dict[str, Any],
                  out_dtype: str = "", b_major: str = "") -> str:
    """The schedule (a name of :data:`SCHEDULE_OPTIONS`) one entry of
    :data:`SCHEDULE_RULES` gives groups of ``rows`` rows (one entry for a plain GEMM;
    empty groups are ignored) sharing N and K, with output type ``out_dtype`` and B layout
    ``b_major`` (checked where the rule lists them)."""
    sizes = [int(r) for r in rows if r > 0]
    if not sizes or out_dtype not in rule.get("out_dtypes", [out_dtype]) \
            or b_major not in rule.get("b_majors", [b_major]):
        return str(rule["otherwise"])
    bm, bn = SCHEDULE_OPTION_TILES[rule["pick"]]
    tiles = sum(-(-r // bm) for r in sizes) * -(-n // bn)
    ok = (len(sizes) <= rule["max_groups"] and k <= rule["max_k"]
          and sum(sizes) >= rule["min_mean_rows"] * len(sizes) and tiles <= rule["max_tiles"])
    return str(rule["pick"] if ok else rule["otherwise"])


def grouped_schedule(types: tuple[str, str, str], ends: Sequence[int], n: int, k: int) -> str:
    """The schedule of ``nvatom.grouped_gemm`` for ``types`` = (A's and B's type, the output
    type, B's layout "N" or "K") and groups ending at the cumulative row offsets ``ends``
    (:data:`SCHEDULE_RULES` ``"grouped"``; the kernel runs FP8 cooperative only)."""
    in_dtype, out_dtype, b_major = types
    if in_dtype not in PLAIN_DTYPES:
        return "cooperative"
    starts = [0, *ends[:-1]]
    return schedule_pick([e - s for s, e in zip(starts, ends, strict=True)], n, k,
                         SCHEDULE_RULES["grouped"], out_dtype, b_major)


def size_rule(cfg: GemmSm90Config) -> dict[str, Any] | None:
    """The size rule that picks ``cfg``'s tile from this table, as a launch recipe carries it
    (``accepts["tile_rule"]``; :func:`nvatom.runtime.gemm_plan.rule_pick` evaluates it), or
    None where no rule chose it: 16-bit, the schedule by wave count
    (:data:`PLAIN_SCHEDULE_WAVES`, ``"kind": "schedule"`` with the schedules' ``names``);
    promoted FP8, the tile by wave count (:data:`FP8_TILE_CHOICES`; block scales
    :data:`FP8_BLOCK_TILE_CHOICES`, ``"kind": "fp8_block"``).  ``pick`` is ``cfg``'s
    option."""
    if not cfg.fp8:
        names = [name for name, _, _ in PLAIN_SCHEDULE_WAVES]
        picks = [i for i, o in enumerate(names) if all(
            getattr(cfg, f) == v for f, v in SCHEDULE_TILES[o].items())]
        return ({"kind": "schedule", "names": names, "options": plain_schedule_options(),
                 "pick": picks[0]} if picks else None)
    if not cfg.promote:
        return None
    block = cfg.scale_mode == "block"
    options = fp8_tile_options(cfg.block_m, block)
    picks = [i for i, o in enumerate(options) if o[:2] == [cfg.block_m, cfg.block_n]]
    if not picks:
        return None
    return {**({"kind": "fp8_block"} if block else {}), "options": options, "pick": picks[0]}


def rule_settings(rule: dict[str, Any]) -> list[dict[str, Any]]:
    """The configuration settings of each option of a :func:`size_rule` rule, in its order
    (applied to the chosen configuration with ``dataclasses.replace``)."""
    if rule.get("kind") == "schedule":
        return [SCHEDULE_TILES[s] for s in rule["names"]]
    if rule.get("kind") == "fp8_block":
        return [c for c, _ in FP8_BLOCK_TILE_CHOICES]
    return [c for c, _ in FP8_TILE_CHOICES]
