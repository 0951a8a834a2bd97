"""The SM90 GEMM's stage ring of mbarriers: a stage's barrier address, the release of a
stage to the producer (``empty[s]``, across the cluster when B is multicast) and the advance
of a ring position over another warpgroup's K blocks (PTX ISA "mbarrier", "mapa"); and the
ring as a :class:`~nvatom.kernels.pipeline.Pipeline` (:func:`stage_ring`), whose producer and
consumer roles check the kernel's acquire / wait / read / release order while it is built,
spelling each operation as below (:class:`GemmBarriers`)."""

from __future__ import annotations

from nvatom.kernels.pipeline import Barriers, Pipeline, PipelineSpec
from nvatom.kernels.sm90.config import GemmSm90Config
from nvatom.kernels.sm90.emit import u32 as _u32
from nvatom.ptx import sync_emit as SE
from nvatom.ptx import tma_emit as TE
from nvatom.ptx.builder import Kernel, Reg


def _barrier(k: Kernel, smem: Reg, off: int, stage: Reg) -> Reg:
    """The shared-memory address of mbarrier ``stage`` of the 8-byte barriers at byte ``off``
    of the kernel's shared memory (base address ``smem``)."""
    bar = _u32(k, "mad.lo.u32", stage, 8, off)
    k.ins("add.u32", bar, bar, smem)
    return bar


def _release(k: Kernel, cfg: GemmSm90Config, smem: Reg, off_empty: int, stage: Reg,
             pred: Reg, rank: Reg | None) -> None:
    """Arrive on ``empty[stage]`` (of every CTA of the cluster that multicast into it)."""
    skip = k.fresh_label("no_release")
    k.bra(skip, f"!{pred}")
    bar = _barrier(k, smem, off_empty, stage)
    if not cfg.mcast:
        TE.mbarrier_arrive(k, bar)
    else:
        for peer in range(cfg.cluster_m):
            # CTA-scope release (the default): the .release.cluster form halved the 2-CTA
            # kernel's speed (docs/perf.md); wgmma's smem reads are complete at wait_group.
            TE.mbarrier_arrive_remote(k, SE.mapa_shared_cluster(k, bar, peer))
    k.label(skip)


def _skip_blocks(k: Kernel, stage: Reg, phase: Reg, blocks: Reg, stages: int) -> None:
    """Advance a ring position by ``blocks`` K blocks (the other warpgroup's tile): ``stage
    + blocks`` modulo ``stages``, the phase bit flipped once per wrap."""
    t = _u32(k, "add.u32", stage, blocks)
    wraps = _u32(k, "div.u32", t, stages)
    k.ins("rem.u32", stage, t, stages)
    k.ins("and.b32", wraps, wraps, 1)
    k.ins("xor.b32", phase, phase, wraps)


class GemmBarriers(Barriers):
    """The GEMM's spelling of the ring's operations: a barrier's address is ``smem + off +
    8 stage`` (:func:`_barrier`), the producer's phase register already holds the parity it
    waits on (it starts at 1), a release arrives on every CTA that multicast into the stage
    (:func:`_release`)."""

    def __init__(self, cfg: GemmSm90Config, smem: Reg, off_full: int, off_empty: int,
                 rank: Reg | None) -> None:
        self.cfg, self.smem, self.off_full, self.off_empty = cfg, smem, off_full, off_empty
        self.rank = rank

    def acquire(self, pipe: Pipeline, stage: Reg, phase: Reg) -> Reg:
        k = pipe.k
        TE.mbarrier_wait_parity(k, _barrier(k, self.smem, self.off_empty, stage), phase)
        full = _barrier(k, self.smem, self.off_full, stage)
        TE.mbarrier_arrive_expect_tx(k, full, pipe.spec.tx_bytes)
        return full

    def wait(self, pipe: Pipeline, stage: Reg, phase: Reg) -> None:
        TE.mbarrier_wait_parity(pipe.k, _barrier(pipe.k, self.smem, self.off_full, stage),
                                phase)

    def release(self, pipe: Pipeline, stage: Reg, pred: Reg | None) -> None:
        assert pred is not None, "the GEMM releases from each warpgroup's lead thread"
        _release(pipe.k, self.cfg, self.smem, self.off_empty, stage, pred, self.rank)


def stage_ring(k: Kernel, cfg: GemmSm90Config, smem: Reg, off_full: int, off_empty: int,
               rank: Reg | None) -> Pipeline:
    """The kernel's stage ring as a pipeline object: ``stages`` stages of A + B bytes,
    read by every consumer warpgroup (cooperative) or one per tile (ping-pong), released on
    both CTAs of a multicasting cluster (``empty[s]``'s count, as :func:`_init_barriers`
    sets it)."""
    spec = PipelineSpec("gemm_stages", cfg.stages, cfg.a_stage_bytes + cfg.b_stage_bytes,
                        consumers=cfg.consumers,
                        kind="pingpong" if cfg.pingpong else "ordered",
                        cluster=cfg.cluster_m if cfg.mcast else 1)
    # full / empty: byte offsets in the kernel's shared memory (GemmBarriers adds the base)
    return Pipeline(k, spec, off_full, off_empty,
                    barriers=GemmBarriers(cfg, smem, off_full, off_empty, rank))

