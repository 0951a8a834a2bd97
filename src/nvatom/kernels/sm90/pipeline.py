"""The SM90 GEMM's stage ring of mbarriers: a stage's barrier address, the release of a
stage to the producer (``empty[s]``, across the cluster when B is multicast) and the advance
of a ring position over another warpgroup's K blocks (PTX ISA "mbarrier", "mapa")."""

from __future__ import annotations

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
