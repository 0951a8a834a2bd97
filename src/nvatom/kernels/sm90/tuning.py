"""The SM90 GEMM's tuning table: the measured tiles, stage counts and FP8 promotion
settings of each consumer schedule (docs/perf.md), read by :func:`nvatom.kernels.sm90.launch.
default_config`, by the SM90 provider's size rules and by the launch recipes' alternatives."""

from __future__ import annotations

from typing import Any

from nvatom.kernels.sm90.config import SCALE_BLOCK

__all__ = [
    "DEFAULT_SCHEDULE_16BIT",
    "FP8_BLOCK_PROMOTION",
    "FP8_PROMOTION",
    "FP8_PROMOTION_WIDE",
    "FP8_TILE_CHOICES",
    "SCHEDULE_TILES",
    "fp8_tile_options",
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


#: Block scales: the promotion above with 128-column tiles (one block of B's scales each).
FP8_BLOCK_PROMOTION = {**FP8_PROMOTION, "block_n": SCALE_BLOCK}


#: Each consumer schedule's tile and stage count (docs/perf.md, "Ping-pong consumers"):
#: cooperative 128 x 256 (the two warpgroups 64 rows each), 4 stages; ping-pong 128 x 128
#: per warpgroup (128 accumulator registers a thread), 6 stages; "pingpong192": ping-pong
#: 128 x 192 per warpgroup (192 registers), 4 stages (docs/perf.md, "Grouped ping-pong and
#: schedule choice").  The names are nvatom.runtime.gemm_plan.SCHEDULE_OPTIONS.
SCHEDULE_TILES: dict[str, dict[str, Any]] = {
    "cooperative": {"schedule": "cooperative", "block_n": 256, "stages": 4},
    "pingpong": {"schedule": "pingpong", "block_n": 128, "stages": 6},
    "pingpong192": {"schedule": "pingpong", "block_n": 192, "stages": 4},
}


#: The default schedule of bf16/f16 inputs (measured on an H100, docs/perf.md "Ping-pong
#: consumers": level or faster on every bench shape but 4096^3, 1-2% slower there); FP8
#: stays cooperative (ping-pong measured slower).  With the problem's sizes the schedule
#: comes from nvatom.runtime.gemm_plan.plain_schedule (by wave count; the grouped kernel's
#: from SCHEDULE_RULES["grouped"]).
DEFAULT_SCHEDULE_16BIT = "pingpong"


def fp8_tile_options(block_m: int = 128) -> list[list[float]]:
    """:data:`FP8_TILE_CHOICES` as ``wave_pick`` options ``[block_m, block_n, efficiency]``
    (data a launch recipe can carry)."""
    return [[block_m, c["block_n"], eff] for c, eff in FP8_TILE_CHOICES]
