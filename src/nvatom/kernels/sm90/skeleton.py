"""The SM90 GEMM's skeleton: the state the kernel's pieces share (:class:`_Build`), the
prologue (parameters, the shared-memory map, tile counts, barrier initialisation; plain and
grouped) and the exit (PTX ISA "mbarrier", "barrier.cluster", "setmaxnreg")."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from nvatom.kernels.pipeline import Pipeline
from nvatom.kernels.sm90 import fusion
from nvatom.kernels.sm90.config import GemmSm90Config
from nvatom.kernels.sm90.emit import u32 as _u32
from nvatom.kernels.sm90.limits import ENTRY_REGS as _ENTRY_REGS
from nvatom.kernels.sm90.plan import GemmSm90Plan
from nvatom.ptx import sync_emit as SE
from nvatom.ptx import tma_emit as TE
from nvatom.ptx.builder import Kernel, Param, Reg


@dataclasses.dataclass(frozen=True)
class _Build:
    """What the pieces of the kernel share, fixed once the prologue has run: the kernel being
    built, its configuration and plan, the shared-memory map (byte offsets) and the registers
    every warpgroup reads.  A warpgroup's own state across its tiles is its
    :class:`~nvatom.kernels.sm90.scheduler.TileScheduler`."""

    k: Kernel
    cfg: GemmSm90Config
    plan: GemmSm90Plan
    target: str
    off_a: int
    off_b: int
    off_c: int
    off_full: int
    off_empty: int
    smem: Reg  # the dynamic shared memory's base address
    tid: Reg
    wg: Reg  # warpgroup index: 0 the producer, 1.. the consumers
    tmaps: tuple[Reg, Reg, Reg]  # A, B, D tensor-map addresses
    tiles_m: Reg
    tiles_n: Reg
    ntiles: Reg
    ktiles: Reg
    rank: Reg | None  # %cluster_ctarank (cluster_m 2)
    first_tile: Reg  # the CTA's first tile (%ctaid.x)
    step: Reg  # between the CTA's tiles (%nctaid.x)
    producer_label: str  # where warpgroup 0 starts
    done: str  # the exit label
    scale_params: tuple[Param, Param] | None  # FP8: scale_a, scale_b addresses
    dims: tuple[Reg, Reg, Reg] | None = None  # M, N, K
    # grouped: (tensor-map array, generic address; tile_ends, global address; G)
    groups: tuple[Reg, Reg, Reg] | None = None
    # grouped FP8: the parameter of scale_b's stride between groups in bytes (0: one
    # scale_b for every group); the groups' row ends follow tile_ends in its buffer
    scale_step: Param | None = None
    epi_params: dict[str, Param] = dataclasses.field(default_factory=dict)  # fused epilogue
    # the stage ring as a pipeline object (its roles check the main loops; set by the build)
    ring: Pipeline | None = None


def _prologue(k: Kernel, cfg: GemmSm90Config, plan: GemmSm90Plan, target_: str) -> _Build:
    """Parameters, the shared-memory map, tile counts and the barriers' initialisation."""
    k.reqntid = (cfg.threads, 1, 1)
    k.minnctapersm = 1
    k.maxnreg = _ENTRY_REGS
    if cfg.cluster_m > 1:
        k.reqnctapercluster = (cfg.cluster_m, 1, 1)
    if cfg.grouped:
        return _prologue_grouped(k, cfg, plan, target_)
    pa, pb, pd = (k.byte_param(n, TE.TENSORMAP_BYTES, TE.GEMM_TENSORMAP_ALIGN)
                  for n in ("tmap_a", "tmap_b", "tmap_d"))
    pm, pn, pk = (k.param(n, "u32") for n in ("M", "N", "K"))
    scale_params = None
    if cfg.fp8:
        scale_params = (k.param("scale_a", "u64"), k.param("scale_b", "u64"))
    epi_params = fusion.declare_params(k, cfg.epilogue)
    dsm = k.dynamic_shared("smem", align=1024)

    off_a, off_b, off_c, off_full, off_empty = _smem_map(cfg)

    smem = _u32(k, "mov.u32", dsm)
    tid = _u32(k, "mov.u32", "%tid.x")
    wg = _u32(k, "shr.u32", tid, 7)
    M, N, K = (k.ld_param(p) for p in (pm, pn, pk))

    def tmap(p: Param) -> Reg:
        r = k.param_address(p)
        if cfg.tmap_address == "cvta":
            g = k.reg("u64")
            k.ins("cvta.param.u64", g, r)
            return g
        return r

    ta, tb, td = tmap(pa), tmap(pb), tmap(pd)

    # tiles
    bm, bn, bk = cfg.block_m, cfg.block_n, cfg.block_k
    tiles_m = _u32(k, "add.u32", M, bm - 1)
    k.ins("div.u32", tiles_m, tiles_m, bm)
    if cfg.cluster_m == 2:  # round up to whole clusters (the extra CTA loads/stores nothing)
        k.ins("add.u32", tiles_m, tiles_m, 1)
        k.ins("and.b32", tiles_m, tiles_m, 0xFFFFFFFE)
    tiles_n = _u32(k, "add.u32", N, bn - 1)
    k.ins("div.u32", tiles_n, tiles_n, bn)
    ntiles = _u32(k, "mul.lo.u32", tiles_m, tiles_n)
    ktiles = _u32(k, "add.u32", K, bk - 1)
    k.ins("div.u32", ktiles, ktiles, bk)
    rank = None
    if cfg.cluster_m == 2:
        rank = _u32(k, "mov.u32", "%cluster_ctarank")

    _init_barriers(k, cfg, smem, tid, off_full, off_empty, (ta, tb, td))
    if cfg.cluster_m > 1:
        SE.barrier_cluster_arrive(k, target=target_)
        SE.barrier_cluster_wait(k, target=target_)
    else:
        SE.named_barrier_sync(k, 0, cfg.threads, target=target_)

    first_tile = _u32(k, "mov.u32", "%ctaid.x")
    step = _u32(k, "mov.u32", "%nctaid.x")
    prod = k.fresh_label("producer")
    done = k.fresh_label("exit")
    return _Build(k, cfg, plan, target_, off_a, off_b, off_c, off_full, off_empty, smem, tid,
                  wg, (ta, tb, td), tiles_m, tiles_n, ntiles, ktiles, rank, first_tile, step,
                  prod, done, scale_params, (M, N, K), epi_params=epi_params)


def _init_barriers(k: Kernel, cfg: GemmSm90Config, smem: Reg, tid: Reg, off_full: int,
                   off_empty: int, tmaps: Sequence[Any]) -> None:
    """Thread 0 initialises the stage ring's barriers -- ``full[s]`` (one arrival plus the TMA
    bytes) and ``empty[s]`` (each consumer warpgroup that reads the stage: one with ping-pong,
    every one otherwise, times the CTAs that multicast into it) -- fences the inits and
    prefetches the kernel's tensor maps (``tmaps``; none for the grouped kernel, whose maps
    change per tile)."""
    k.comment("barriers: full[s] (1 arrival + TMA bytes), empty[s] (consumer warpgroups)")
    p0 = k.reg("pred")
    k.ins("setp.eq.u32", p0, tid, 0)
    skip = k.fresh_label("init_done")
    k.bra(skip, f"!{p0}")
    for s in range(cfg.stages):
        TE.mbarrier_init(k, _u32(k, "add.u32", smem, off_full + 8 * s), 1)
        TE.mbarrier_init(k, _u32(k, "add.u32", smem, off_empty + 8 * s),
                         (1 if cfg.pingpong else cfg.consumers)
                         * (cfg.cluster_m if cfg.mcast else 1))
    TE.fence_mbarrier_init(k)
    for t in tmaps:
        TE.prefetch_tensormap(k, t)
    k.label(skip)


def _smem_map(cfg: GemmSm90Config) -> tuple[int, int, int, int, int]:
    """Byte offsets of the A stages, B stages, epilogue staging, full[s] and empty[s]: the
    stages, the consumers' two staging buffers each, their staged row scales
    (``row_scale_stage``), then the barriers."""
    off_b = cfg.stages * cfg.a_stage_bytes
    off_c = off_b + cfg.stages * cfg.b_stage_bytes
    off_full = off_c + 2 * cfg.consumers * cfg.c_buffer_bytes  # scale staging, then barriers
    off_full += cfg.consumers * cfg.scale_stage_bytes
    return 0, off_b, off_c, off_full, off_full + 8 * cfg.stages


def _prologue_grouped(k: Kernel, cfg: GemmSm90Config, plan: GemmSm90Plan,
                      target_: str) -> _Build:
    """The grouped kernel's prologue: parameters ``tmaps`` (G x 3 tensor maps in global
    memory: A, B, D of each group, 128 bytes each), ``tile_ends`` (G u32: cumulative output
    tiles), ``G``, ``N``, ``K``; the tile count is ``tile_ends[G - 1]``; the per-tile maps are
    chosen by :meth:`~nvatom.kernels.sm90.scheduler.TileScheduler.tile_coords`."""
    k.reqntid = (cfg.threads, 1, 1)
    k.minnctapersm = 1
    k.maxnreg = _ENTRY_REGS
    pt, pe = k.param("tmaps", "u64"), k.param("tile_ends", "u64")
    pg, pn, pk = (k.param(n, "u32") for n in ("G", "N", "K"))
    scale_params = step_param = None
    if cfg.fp8:
        scale_params = (k.param("scale_a", "u64"), k.param("scale_b", "u64"))
        step_param = k.param("scale_b_step", "u32")
    dsm = k.dynamic_shared("smem", align=1024)
    off_a, off_b, off_c, off_full, off_empty = _smem_map(cfg)
    smem = _u32(k, "mov.u32", dsm)
    tid = _u32(k, "mov.u32", "%tid.x")
    wg = _u32(k, "shr.u32", tid, 7)
    maps, ends = k.ld_param(pt), k.ld_param(pe)
    k.ins("cvta.to.global.u64", ends, ends)
    G, N, K = (k.ld_param(p) for p in (pg, pn, pk))
    tmaps = (k.reg("u64"), k.reg("u64"), k.reg("u64"))
    bn, bk = cfg.block_n, cfg.block_k
    tiles_n = _u32(k, "add.u32", N, bn - 1)
    k.ins("div.u32", tiles_n, tiles_n, bn)
    last = _u32(k, "sub.u32", G, 1)
    la = k.reg("u64")
    k.ins("mad.wide.u32", la, last, 4, ends)
    ntiles = k.reg("u32")
    k.ins("ld.global.nc.u32", ntiles, f"[{la}]")
    tiles_m = _u32(k, "mov.u32", 0)  # per group (tile_coords)
    ktiles = _u32(k, "add.u32", K, bk - 1)
    k.ins("div.u32", ktiles, ktiles, bk)
    dims = None
    if step_param is not None:
        dims = (_u32(k, "mov.u32", 0), N, K)  # the current group's M: set per tile
    _init_barriers(k, cfg, smem, tid, off_full, off_empty, ())
    SE.named_barrier_sync(k, 0, cfg.threads, target=target_)
    first_tile = _u32(k, "mov.u32", "%ctaid.x")
    step = _u32(k, "mov.u32", "%nctaid.x")
    prod = k.fresh_label("producer")
    done = k.fresh_label("exit")
    return _Build(k, cfg, plan, target_, off_a, off_b, off_c, off_full, off_empty, smem, tid,
                  wg, tmaps, tiles_m, tiles_n, ntiles, ktiles, None, first_tile, step,
                  prod, done, scale_params, dims, (maps, ends, G), step_param)


def _exit(b: _Build) -> None:
    """Every thread: outstanding TMA stores finish reading shared memory before the CTA
    exits; in a cluster, no CTA exits while its peer can still signal its barriers."""
    k = b.k
    k.label(b.done)
    TE.bulk_wait_group(k, 0, read=False)
    if b.cfg.cluster_m > 1:
        SE.barrier_cluster_arrive(k, aligned=False, target=b.target)
        SE.barrier_cluster_wait(k, aligned=False, target=b.target)
