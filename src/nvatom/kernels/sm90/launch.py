"""Launching the SM90 GEMM: the checks of a problem, the launch spec (grid, block, shared
memory, cluster, the tensor maps to encode), the kernel's parameters and the tuned
configuration for a dtype pair and problem size (CUDA Driver API "cuTensorMapEncodeTiled",
"cuLaunchKernelEx")."""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

from nvatom.descriptors.tma import TensorMap, tma_data_type
from nvatom.dtypes import dtype
from nvatom.errors import DescriptorError
from nvatom.kernels.sm90.config import FP8_DTYPES, GemmSm90Config, GemmSm90Error
from nvatom.kernels.sm90.limits import SW128 as _SW128
from nvatom.kernels.sm90.plan import gemm_sm90_plan
from nvatom.kernels.sm90.tuning import (
    DEFAULT_SCHEDULE_16BIT,
    FP8_BLOCK_PROMOTION,
    FP8_BLOCK_TILE_CHOICES,
    FP8_PROMOTION,
    FP8_TILE_CHOICES,
    SCHEDULE_TILES,
    fp8_tile_options,
    plain_schedule,
)
from nvatom.ptx import tma_emit as TE
from nvatom.runtime.gemm_plan import wave_pick

__all__ = [
    "MAX_TILES",
    "LaunchSpec",
    "check_problem",
    "default_config",
    "gemm_sm90_launch_spec",
    "kernel_params",
]


@dataclasses.dataclass(frozen=True)
class LaunchSpec:
    """What a launcher needs: grid, block, dynamic smem bytes, cluster shape, and the three
    tensor maps (A, B, D) to encode with ``cuTensorMapEncodeTiled`` (their ``driver_args``)."""

    kernel: str
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    smem_bytes: int
    cluster: tuple[int, int, int]
    tensor_maps: tuple[TensorMap, TensorMap, TensorMap]
    scalars: tuple[int, int, int]  # M, N, K


def check_problem(cfg: GemmSm90Config, m: int, n: int, k: int) -> None:
    for name, v in (("M", m), ("N", n), ("K", k)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise GemmSm90Error(f"{name} = {v!r} must be a positive int")
        if v >= 1 << 31:
            raise GemmSm90Error(f"{name} = {v} does not fit the kernel's 32-bit indices")
    ib, ob = cfg.in_bytes, cfg.out_bytes
    if (k * ib) % 16:
        raise GemmSm90Error(f"K = {k}: a row of A ({k} x {ib} bytes) is not a multiple of 16 "
                            f"bytes (TMA's stride rule); K must be a multiple of {16 // ib}")
    if cfg.b_major == "MN" and (n * ib) % 16:
        raise GemmSm90Error(f"N = {n}: a row of B ({n} x {ib} bytes) is not a multiple of 16 "
                            f"bytes (TMA's stride rule); N must be a multiple of {16 // ib}")
    if (n * ob) % 16:
        raise GemmSm90Error(f"N = {n}: a row of D ({n} x {ob} bytes) is not a multiple of 16 "
                            f"bytes (TMA's stride rule); N must be a multiple of {16 // ob}")
    tm = -(-m // cfg.block_m)
    tm += tm % 2 if cfg.cluster_m == 2 else 0
    tiles = tm * -(-n // cfg.block_n)
    if tiles > MAX_TILES:
        raise GemmSm90Error(f"M x N = {m} x {n} makes {tiles} tiles of {cfg.block_m} x "
                            f"{cfg.block_n}, more than the kernel's 32-bit tile index (and a "
                            f"non-persistent grid) takes: at most {MAX_TILES} = 2^31 - 1")


#: The most output tiles: the kernel counts them in u32 (tiles_m * tiles_n, tile + nctaid),
#: and a non-persistent launch has one CTA each (gridDim.x <= 2^31 - 1).
MAX_TILES = 2**31 - 1


@functools.cache
def _tma_type(name: str) -> Any:
    """The tensor-map data type of an element type: the driver's own
    (:func:`nvatom.descriptors.tma.tma_data_type`), or for a type it has none of (FP8) the
    unsigned integer of its width, which TMA moves as raw bytes."""
    try:
        return tma_data_type(name)
    except DescriptorError:
        return tma_data_type(f"uint{dtype(name).storage_bits}")


def gemm_sm90_launch_spec(cfg: GemmSm90Config, m: int, n: int, k: int, a_ptr: int = 0,
                          b_ptr: int = 0, d_ptr: int = 0, num_sms: int = 132, *,
                          lda: int | None = None, ldb: int | None = None,
                          ldd: int | None = None) -> LaunchSpec:
    """Grid, block, shared memory, cluster and tensor maps for an M x N x K problem with
    A, B, D at the given device addresses (row-major A and D; B as ``cfg.b_major``).  The
    leading dimensions (in elements) default to tight rows; each must give a row pitch that
    is a multiple of 16 bytes (TMA)."""
    check_problem(cfg, m, n, k)
    plan = gemm_sm90_plan(cfg)
    ib, ob = cfg.in_bytes, cfg.out_bytes
    it, ot = _tma_type(cfg.in_dtype), _tma_type(cfg.out_dtype)
    lda = k if lda is None else lda
    ldb = (k if cfg.b_major == "K" else n) if ldb is None else ldb
    ldd = n if ldd is None else ldd
    for name, ld, least, eb in (("lda", lda, k, ib), ("ldb", ldb, k if cfg.b_major == "K"
                                                     else n, ib), ("ldd", ldd, n, ob)):
        if isinstance(ld, bool) or not isinstance(ld, int) or ld < least or (ld * eb) % 16:
            raise GemmSm90Error(f"{name} = {ld!r} must be an int >= {least} whose row pitch "
                                f"({eb}-byte elements) is a multiple of 16 bytes (TMA)")
    ta = TensorMap("tiled", it, a_ptr, (k, m), (lda * ib,),
                   box_dims=(cfg.block_k, cfg.block_m), swizzle=_SW128,
                   l2_promotion="256B")
    if cfg.b_major == "K":
        tb = TensorMap("tiled", it, b_ptr, (k, n), (ldb * ib,), box_dims=plan.b_box,
                       swizzle=_SW128, l2_promotion="256B")
    else:
        tb = TensorMap("tiled", it, b_ptr, (n, k), (ldb * ib,), box_dims=plan.b_box,
                       swizzle=_SW128, l2_promotion="256B")
    td = TensorMap("tiled", ot, d_ptr, (n, m), (ldd * ob,), box_dims=(cfg.c_chunk_cols, 64),
                   swizzle=_SW128)
    tm = -(-m // cfg.block_m)
    if cfg.cluster_m == 2:
        tm += tm % 2
    tiles = tm * -(-n // cfg.block_n)
    if cfg.persistent:
        grid = min(tiles, num_sms - num_sms % cfg.cluster_m)
    else:
        grid = tiles
    return LaunchSpec(cfg.name, (grid, 1, 1), (cfg.threads, 1, 1), cfg.smem_bytes,
                      (cfg.cluster_m, 1, 1), (ta, tb, td), (m, n, k))


def default_config(in_dtype: str = "bf16", out_dtype: str | None = None,
                   b_major: str = "MN", *, b_dtype: str = "", fast_accum: bool = False,
                   scale_mode: str = "tensor", schedule: str = "", m: int | None = None,
                   n: int | None = None, sms: int = 132,
                   min_block_m: int = 64) -> GemmSm90Config:
    """The tuned configuration for a dtype pair (docs/perf.md): persistent with raster
    group 8, one wgmma group in flight, no cluster (the 2-CTA multicast cluster measured
    equal within noise).  bf16/f16: the ping-pong schedule (:data:`DEFAULT_SCHEDULE_16BIT`,
    128 x 128 per consumer warpgroup, 6 stages; ``schedule="cooperative"`` gives the
    128 x 256 cooperative kernel, 4 stages: :data:`SCHEDULE_TILES`).  FP8 (cooperative only)
    takes a K-major B, gives bf16 and promotes WGMMA's partial sums into f32 every K block
    (:data:`FP8_PROMOTION`: 128 x 192 tiles, two N parts of 96 through two temporaries)
    unless ``fast_accum`` (128 x 256, WGMMA accumulates the whole K).  With the output's
    ``m`` and ``n`` (and the SM count ``sms``), promoted FP8 with per-tensor or row-wise
    scales takes the tile of :data:`FP8_TILE_CHOICES` that fills the waves best
    (:func:`~nvatom.runtime.gemm_plan.wave_pick`: 128 x 256 at 2048^3 and 4096^3, 128 x 192
    at 8192^3); without them, 128 x 192.  Block scales likewise from
    :data:`FP8_BLOCK_TILE_CHOICES` (128 x 256, 128 x 128 or, for small M, 64 x 128; tiles of
    fewer than ``min_block_m`` rows left out); without sizes 128 x 128.  Row-wise scales are
    staged in shared memory (``row_scale_stage``: +1-2% on the H100, docs/perf.md "Row-wise
    scales staged in shared memory").  16-bit with ``m`` and ``n`` and no ``schedule``: the
    schedule whose tiles fill the waves best (:func:`~nvatom.kernels.sm90.tuning.plain_schedule`:
    ping-pong 128 x 128 at 2048^3 and 4096^3, ping-pong 128 x 192 at 8192^3)."""
    if schedule and schedule not in SCHEDULE_TILES:
        raise GemmSm90Error(f"schedule {schedule!r} is not one of "
                            f"{', '.join(SCHEDULE_TILES)}")
    if in_dtype not in FP8_DTYPES:
        if out_dtype is None:
            out_dtype = in_dtype
        if not schedule and m is not None and n is not None:
            schedule = plain_schedule(m, n, sms)
        return GemmSm90Config(in_dtype=in_dtype, out_dtype=out_dtype, b_major=b_major,
                              **SCHEDULE_TILES[schedule or DEFAULT_SCHEDULE_16BIT])
    if schedule and SCHEDULE_TILES[schedule]["schedule"] == "pingpong":
        raise GemmSm90Error("the FP8 defaults are cooperative (ping-pong measured slower, "
                            "docs/perf.md): build a ping-pong FP8 GemmSm90Config directly")
    if scale_mode == "block" and fast_accum:
        raise GemmSm90Error("block scales are applied when the partial sums are promoted: "
                            "fast_accum (no promotion) cannot take them")
    block = scale_mode == "block"
    promo = FP8_BLOCK_PROMOTION if block else FP8_PROMOTION
    if m is not None and n is not None:
        choices = FP8_BLOCK_TILE_CHOICES if block else FP8_TILE_CHOICES
        options = fp8_tile_options(block_scales=block)
        keep = [i for i, o in enumerate(options) if o[0] >= min_block_m]
        pick = wave_pick([options[i] for i in keep], m, n, sms)
        promo = choices[keep[pick]][0]
    extra: dict[str, Any] = {} if fast_accum else dict(promo)
    return GemmSm90Config(in_dtype=in_dtype, out_dtype=out_dtype or "bf16", b_major="K",
                          b_dtype="" if b_dtype == in_dtype else b_dtype,
                          scale_mode=scale_mode, row_scale_stage=scale_mode == "row", **extra)


def kernel_params(cfg: GemmSm90Config) -> tuple[tuple[str, str], ...]:
    """The kernel's parameters as ``(name, PTX type)`` (``nvatom.runtime.launch`` form)."""
    if cfg.grouped:
        grouped = (("tmaps", "u64"), ("tile_ends", "u64"), ("G", "u32"), ("N", "u32"),
                   ("K", "u32"))
        if cfg.fp8:  # the row ends follow tile_ends in the same buffer
            grouped += (("scale_a", "u64"), ("scale_b", "u64"), ("scale_b_step", "u32"))
        return grouped
    tmap = TE.tensormap_param_type(TE.GEMM_TENSORMAP_ALIGN)
    out = [("tmap_a", tmap), ("tmap_b", tmap), ("tmap_d", tmap),
           ("M", "u32"), ("N", "u32"), ("K", "u32")]
    if cfg.fp8:
        out += [("scale_a", "u64"), ("scale_b", "u64")]
    if cfg.epilogue is not None:
        out += cfg.epilogue.params
    return tuple(out)
