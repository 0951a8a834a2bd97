"""The SM90 attention forward's public names, kept for external importers: the kernel is in
the package :mod:`nvatom.kernels.sm90` (``attention_config``, ``attention_plan``,
``attention_launch``, ``attention`` and the kernel's pieces)."""

from nvatom.kernels.sm90.attention import build_attention_sm90
from nvatom.kernels.sm90.attention_config import (
    DTYPES,
    EPILOGUES,
    HEAD_DIMS,
    AttentionSm90Config,
    AttentionSm90Error,
    default_config,
)
from nvatom.kernels.sm90.attention_launch import (
    kernel_params,
    launch_geometry,
    scale_log2,
    tensor_maps,
)
from nvatom.kernels.sm90.attention_plan import (
    attention_plan,
    o_retile,
    p_retile,
    stsm_lane_offset,
    stsm_matrix_origin,
)

__all__ = [
    "DTYPES",
    "EPILOGUES",
    "HEAD_DIMS",
    "AttentionSm90Config",
    "AttentionSm90Error",
    "attention_plan",
    "build_attention_sm90",
    "default_config",
    "kernel_params",
    "launch_geometry",
    "o_retile",
    "p_retile",
    "scale_log2",
    "stsm_lane_offset",
    "stsm_matrix_origin",
    "tensor_maps",
]
