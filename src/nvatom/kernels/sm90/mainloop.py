"""The fast-accumulation main loop's K-block head and tail, shared by the cooperative and
ping-pong consumers: the wait for a stage's ``full`` barrier, then after the K block's WGMMAs
the commit, ``wait_group wgmma_inflight``, the release of the retired stage and the loop edge
(PTX ISA "wgmma.commit_group", "wgmma.wait_group", "mbarrier")."""

from __future__ import annotations

from typing import Any

from nvatom.kernels.pipeline import ConsumerRole
from nvatom.kernels.sm90.config import GemmSm90Config
from nvatom.kernels.sm90.emit import next_stage as _next_stage
from nvatom.kernels.sm90.emit import u32 as _u32
from nvatom.kernels.sm90.scheduler import TileScheduler
from nvatom.kernels.sm90.skeleton import _Build
from nvatom.ptx.builder import Reg


def _open_k_loop(b: _Build, p_acc: Reg, cons: ConsumerRole) -> tuple[Reg, Reg, str]:
    """The fast-accumulation main loop's head: the first K block overwrites (``p_acc``
    false), K block and previous-stage counters at 0 (the role's ``start``: the lagged
    release skips the first block), the loop label.  The caller's K block begins with the
    role's ``begin`` and ``wait`` for the stage's ``full`` barrier.  Returns (K block,
    previous stage, loop label)."""
    k = b.k
    k.ins("setp.ne.u32", p_acc, 0, 0)  # first K block: D = A*B
    kt = _u32(k, "mov.u32", 0)
    prev = _u32(k, "mov.u32", 0)
    cons.start()
    kloop = k.fresh_label("c_k")
    k.label(kloop)
    return kt, prev, kloop


def _wait_stage(cons: ConsumerRole, stage: Reg, phase: Reg) -> None:
    """A K block's head: the consumer role's iteration at the kernel's ring position, and
    its wait for the stage's ``full`` barrier."""
    cons.begin(at=(stage, phase))
    cons.wait()


def _release_lag(cfg: GemmSm90Config) -> int:
    """The K blocks a stage's release lags its WGMMA group: ``wgmma_inflight`` (the previous
    stage is released once its group retired under ``wait_group wgmma_inflight``)."""
    return cfg.wgmma_inflight


def _retire_k_block(b: _Build, sched: TileScheduler, seq: Any, cons: ConsumerRole,
                    is_lead: Reg, p_acc: Reg, kt: Reg, prev: Reg, stage: Reg, phase: Reg,
                    kloop: str) -> None:
    """The end of one K block of a consumer's main loop (cooperative and ping-pong alike):
    commit the block's WGMMAs (the group that reads the stage), clear the first-block
    accumulate flag, wait until at most ``wgmma_inflight`` groups are pending, release the
    stage whose group retired (the previous one with ``wgmma_inflight``, from the second
    block on), advance the stage ring and loop while K blocks remain (``sched``: the
    consumer's tiles, for the "late" acquire).  The role ``cons`` checks the release."""
    k, cfg = b.k, b.cfg
    seq.commit()
    cons.read()
    sched.late_acquire(is_lead)
    k.ins("setp.ne.u32", p_acc, 1, 0)
    seq.wait(cfg.wgmma_inflight)
    cons.wgmma_wait(cfg.wgmma_inflight)
    lag = _release_lag(cfg)
    rel = prev if lag else stage
    pr = k.reg("pred")
    if cfg.wgmma_inflight:
        k.ins("setp.ne.u32", pr, kt, 0)
        k.ins("and.pred", pr, pr, is_lead)
    else:
        k.ins("mov.pred", pr, is_lead)
    cons.release(lag, stage=rel, pred=pr, unless_first=bool(cfg.wgmma_inflight))
    k.ins("mov.u32", prev, stage)
    _next_stage(k, stage, phase, cfg.stages)
    k.ins("add.u32", kt, kt, 1)
    pk_ = k.reg("pred")
    k.ins("setp.lt.u32", pk_, kt, b.ktiles)
    k.bra(kloop, pk_)


def _drain(b: _Build, seq: Any, cons: ConsumerRole, prev: Reg, is_lead: Reg) -> None:
    """After the K loop: every WGMMA group retired (``wait_group 0``), then with
    ``wgmma_inflight`` the last K block's stage (``prev``) released."""
    seq.wait(0)
    cons.wgmma_wait(0)
    if b.cfg.wgmma_inflight:
        cons.release(0, stage=prev, pred=is_lead)
