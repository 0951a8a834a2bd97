"""The promoted FP8 main loop software-pipelined across K blocks (``promote_pipelined``): two
temporaries, one WGMMA group in flight while the other's sum is added (PTX ISA
"wgmma.commit_group", "wgmma.wait_group")."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from nvatom.kernels.sm90.emit import next_stage as _next_stage
from nvatom.kernels.sm90.emit import u32 as _u32
from nvatom.kernels.sm90.promotion import _add_part, _part_mmas, _promotion_start
from nvatom.kernels.sm90.skeleton import _Build
from nvatom.ptx.builder import Reg
from nvatom.ptx.wgmma_emit import WgmmaSequence


def _mainloop_pipelined(b: _Build, seq: WgmmaSequence, acc: Sequence[Reg],
                        temps: Sequence[Sequence[Reg]], a_desc0: Sequence[Reg],
                        b_desc0: Sequence[Reg], stage: Reg, phase: Reg, is_lead: Reg,
                        p_true: Reg, cons: Any) -> None:
    """The promoted main loop with two temporaries, promotion every K block, software-
    pipelined across K blocks: each N part's WGMMA group is committed before the previous
    group (the previous part, or the previous K block's last part) is retired
    (``wait_group 1``) and added, so one group stays in flight while ``add.f32`` runs.  Part
    ``q`` always uses temporary ``q % 2`` (``promote_parts`` is even).  A K block's stage is
    released once its last group has retired, during the next K block.  ``cons``: the stage
    ring's consumer role (the first K block is peeled, so its lagged release is plain)."""
    k, cfg = b.k, b.cfg
    parts = cfg.promote_parts
    k.comment(f"promoted main loop, pipelined: {parts} part(s) of n{cfg.block_n // parts} per "
              "K block, two temporaries, one WGMMA group in flight while the other is added")
    maps, p_zero = _promotion_start(k, cfg, acc)
    prev = _u32(k, "mov.u32", stage)

    def add(q: int) -> None:
        _add_part(k, seq, acc, temps[q % 2], maps[q])

    def block(first: bool) -> None:
        for q in range(parts):
            _part_mmas(b, seq, temps[q % 2], a_desc0, b_desc0, stage,
                       phase if q == 0 else None, q, p_zero, p_true, cons=cons)
            seq.commit()
            cons.read()
            if first and q == 0:
                continue
            seq.wait(1)  # the group before this one has retired
            cons.wgmma_wait(1)
            add((q - 1) % parts)
            if q == 0:  # the previous K block's groups have all retired
                cons.release(1, stage=prev, pred=is_lead)
        k.ins("mov.u32", prev, stage)
        _next_stage(k, stage, phase, cfg.stages)

    block(first=True)
    kt = _u32(k, "mov.u32", 1)
    tail = k.fresh_label("c_k_tail")
    pe = k.reg("pred")
    k.ins("setp.ge.u32", pe, kt, b.ktiles)
    k.bra(tail, pe)
    kloop = k.fresh_label("c_k")
    k.label(kloop)
    with cons.loop():
        block(first=False)
        k.ins("add.u32", kt, kt, 1)
        pk_ = k.reg("pred")
        k.ins("setp.lt.u32", pk_, kt, b.ktiles)
        k.bra(kloop, pk_)
    k.label(tail)
    seq.wait(0)
    cons.wgmma_wait(0)
    add(parts - 1)
    cons.release(0, stage=prev, pred=is_lead)
