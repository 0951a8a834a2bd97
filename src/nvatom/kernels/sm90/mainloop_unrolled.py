"""The promoted FP8 main loop with ``promote_unroll`` K blocks per iteration: the parts of
several K blocks through the temporaries as one stream, the WGMMA pipe drained once per
iteration (PTX ISA "wgmma.wait_group")."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from nvatom.kernels.sm90.emit import next_stage as _next_stage
from nvatom.kernels.sm90.emit import u32 as _u32
from nvatom.kernels.sm90.promotion import _add_part, _part_mmas, _promotion_start
from nvatom.kernels.sm90.scales import _block_scales, part_scale_block
from nvatom.kernels.sm90.skeleton import _Build
from nvatom.ptx.builder import Reg
from nvatom.ptx.wgmma_emit import WgmmaSequence


def _promoted_blocks(b: _Build, seq: WgmmaSequence, acc: Sequence[Reg],
                     temps: Sequence[Sequence[Reg]], a_desc0: Sequence[Reg],
                     b_desc0: Sequence[Reg], stage: Reg, phase: Reg, is_lead: Reg,
                     p_true: Reg, maps: Sequence[tuple[int, ...]], p_zero: Reg,
                     blocks: int, cons: Any, kt: Reg,
                     block_rows: Sequence[Reg] | None = None) -> None:
    """``blocks`` consecutive K blocks (stages ``stage``, ``stage + 1``, ...) of the promoted
    loop as one stream of (block, part) units through the temporaries in turn: a unit's
    group is retired (``wait_group nt - 1``) and added when the next ``nt - 1`` units are
    issued, a block's stage is released once its last unit is added, and everything is
    retired at the end (nothing in flight across the caller's loop edge).  Advances
    ``stage`` / ``phase`` by ``blocks``.  ``cons``: the stage ring's consumer role (a block
    is its iteration; a release lags the newest block begun by the blocks since).  Block
    scales (``block_rows``): K block ``kt + blk``'s scales are loaded before its first
    WGMMA (``promote_scales_early``: every block's before the first block's), and each part
    is added scaled by its column block's."""
    k, cfg = b.k, b.cfg
    parts, nt = cfg.promote_parts, len(temps)
    pos = [(stage, phase)]
    for _ in range(blocks - 1):
        st, ph = _u32(k, "mov.u32", pos[-1][0]), _u32(k, "mov.u32", pos[-1][1])
        _next_stage(k, st, ph, cfg.stages)
        pos.append((st, ph))
    units = [(blk, q) for blk in range(blocks) for q in range(parts)]
    pending: list[int] = []
    begun = [-1]  # the newest block begun
    scales: dict[int, list[tuple[Reg, Reg]]] = {}
    if block_rows is not None and cfg.promote_scales_early:  # every block's, up front
        for blk in range(blocks):
            scales[blk] = _block_scales(k, block_rows, kt, blk)

    def add(u: int) -> None:
        blk, q = units[u]
        _add_part(k, seq, acc, temps[u % nt], maps[q],
                  scales[blk][part_scale_block(cfg, q)] if block_rows is not None else None)
        if q == parts - 1:  # the block's last part: its stage is free
            cons.release(begun[0] - blk, stage=pos[blk][0], pred=is_lead)

    for u, (blk, q) in enumerate(units):
        st, ph = pos[blk]
        if q == 0:
            begun[0] = blk
            if block_rows is not None and blk not in scales:
                scales[blk] = _block_scales(k, block_rows, kt, blk)
        _part_mmas(b, seq, temps[u % nt], a_desc0, b_desc0, st, ph if q == 0 else None, q,
                   p_zero, p_true, cons=cons)
        seq.commit()
        cons.read()
        pending.append(u)
        if len(pending) == nt:
            seq.wait(nt - 1)
            cons.wgmma_wait(nt - 1)
            add(pending.pop(0))
    if pending:
        seq.wait(0)
        cons.wgmma_wait(0)
    for u in pending:
        add(u)
    k.ins("mov.u32", stage, pos[-1][0])
    k.ins("mov.u32", phase, pos[-1][1])
    _next_stage(k, stage, phase, cfg.stages)


def _mainloop_unrolled(b: _Build, seq: WgmmaSequence, acc: Sequence[Reg],
                       temps: Sequence[Sequence[Reg]], a_desc0: Sequence[Reg],
                       b_desc0: Sequence[Reg], stage: Reg, phase: Reg, is_lead: Reg,
                       p_true: Reg, cons: Any,
                       block_rows: Sequence[Reg] | None = None) -> None:
    """The promoted loop (promote 1) with ``promote_unroll`` K blocks per iteration
    (:func:`_promoted_blocks`), then the K blocks left over one at a time (``cons``: the
    stage ring's consumer role; ``block_rows``: block scales, :func:`_block_scale_rows`)."""
    k, cfg = b.k, b.cfg
    un = cfg.promote_unroll
    k.comment(f"promoted main loop, {un} K blocks per iteration: {cfg.promote_parts} part(s) "
              f"of n{cfg.block_n // cfg.promote_parts} each through {len(temps)} temporaries")
    maps, p_zero = _promotion_start(k, cfg, acc)
    args = (b, seq, acc, temps, a_desc0, b_desc0, stage, phase, is_lead, p_true, maps, p_zero)
    loop = cons.loop
    kt = _u32(k, "mov.u32", 0)
    rest = k.fresh_label("c_k_rest")
    kloop = k.fresh_label("c_k")
    pr = k.reg("pred")
    k.label(kloop)
    left = _u32(k, "sub.u32", b.ktiles, kt)
    k.ins("setp.lt.u32", pr, left, un)
    k.bra(rest, pr)
    with loop():
        _promoted_blocks(*args, un, cons, kt, block_rows)
    k.ins("add.u32", kt, kt, un)
    k.bra(kloop)
    k.label(rest)
    one = k.fresh_label("c_k_one")
    done = k.fresh_label("c_k_done")
    k.label(one)
    k.ins("setp.ge.u32", pr, kt, b.ktiles)
    k.bra(done, pr)
    with loop():
        _promoted_blocks(*args, 1, cons, kt, block_rows)
    k.ins("add.u32", kt, kt, 1)
    k.bra(one)
    k.label(done)
