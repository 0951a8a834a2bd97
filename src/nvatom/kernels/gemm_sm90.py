"""The SM90 GEMM's public names, kept for external importers: the kernel is the package
:mod:`nvatom.kernels.sm90` (config, tuning, plan, launch, gemm and the kernel's pieces)."""

from nvatom.descriptors.tma import MAX_GLOBAL_STRIDE
from nvatom.kernels.sm90.config import (
    FP8_DTYPES,
    GROUP_SCHEDS,
    IN_DTYPES,
    OUT_DTYPES,
    PINGPONG_BAR,
    SCALE_BLOCK,
    SCALE_MODES,
    SCHEDULES,
    GemmSm90Config,
    GemmSm90Error,
    b_major_of,
)
from nvatom.kernels.sm90.gemm import build_gemm_sm90
from nvatom.kernels.sm90.launch import (
    LaunchSpec,
    check_problem,
    default_config,
    gemm_sm90_launch_spec,
    kernel_params,
)
from nvatom.kernels.sm90.plan import GemmSm90Plan, gemm_sm90_plan
from nvatom.kernels.sm90.tuning import (
    DEFAULT_SCHEDULE_16BIT,
    FP8_BLOCK_PROMOTION,
    FP8_PROMOTION,
    FP8_PROMOTION_WIDE,
    FP8_TILE_CHOICES,
    SCHEDULE_TILES,
    fp8_tile_options,
)

__all__ = [
    "DEFAULT_SCHEDULE_16BIT",
    "FP8_BLOCK_PROMOTION",
    "FP8_DTYPES",
    "FP8_PROMOTION",
    "FP8_PROMOTION_WIDE",
    "FP8_TILE_CHOICES",
    "GROUP_SCHEDS",
    "IN_DTYPES",
    "MAX_GLOBAL_STRIDE",
    "OUT_DTYPES",
    "PINGPONG_BAR",
    "SCALE_BLOCK",
    "SCALE_MODES",
    "SCHEDULES",
    "SCHEDULE_TILES",
    "GemmSm90Config",
    "GemmSm90Error",
    "GemmSm90Plan",
    "LaunchSpec",
    "b_major_of",
    "build_gemm_sm90",
    "check_problem",
    "default_config",
    "fp8_tile_options",
    "gemm_sm90_launch_spec",
    "gemm_sm90_plan",
    "kernel_params",
]
