"""The SM90 GEMM's consumer warpgroups: per tile a main loop (fast accumulation or
promoted FP8) then the epilogue, under the cooperative schedule (two warpgroups on one
128-row tile) or the ping-pong one (each its own tile, main loops ordered by named barriers)
(PTX ISA "setmaxnreg", "bar.sync", "wgmma.mma_async")."""

from __future__ import annotations

from typing import Any

from nvatom.atoms.wgmma_fragments import WARPGROUP
from nvatom.kernels.pipeline import PingPongOrder
from nvatom.kernels.sm90.config import PINGPONG_BAR
from nvatom.kernels.sm90.emit import desc_base as _desc_base
from nvatom.kernels.sm90.emit import u32 as _u32
from nvatom.kernels.sm90.epilogue import _epilogue, _epilogue_setup
from nvatom.kernels.sm90.mainloop import _drain, _open_k_loop, _retire_k_block, _wait_stage
from nvatom.kernels.sm90.mainloop_promoted import _mainloop_promoted
from nvatom.kernels.sm90.pipeline import _skip_blocks
from nvatom.kernels.sm90.row_scales import _stage_row_scales
from nvatom.kernels.sm90.scales import _block_scale_rows, _fp8_scale, _group_scales
from nvatom.kernels.sm90.scheduler import TileScheduler
from nvatom.kernels.sm90.skeleton import _Build
from nvatom.ptx import sync_emit as SE
from nvatom.ptx.builder import Reg
from nvatom.ptx.wgmma_emit import WgmmaSequence, emit_scale_d


def _consumer_state(b: _Build, cw: Reg, ltid: Reg, is_lead: Reg) -> tuple[Any, ...]:
    """What a consumer warpgroup sets up before its tile loop (cooperative and ping-pong
    alike): the always-true scale-d predicate, the first-K-block accumulate predicate, the
    WGMMA immediates (scales 1; B transposed when MN-major), the epilogue's registers and,
    when FP8 promotes, the zeroed partial-sum temporaries and their first-block predicate."""
    k, cfg, form = b.k, b.cfg, b.cfg.form
    p_true = emit_scale_d(k, 1)
    p_acc = k.reg("pred")
    imm = tuple(1 if w.startswith("scale") else int(w == "trans_b" and cfg.b_major == "MN")
                for w in form.immediates)
    ep = _epilogue_setup(b, cw, ltid, is_lead)
    temps: list[list[Reg]] = []
    p_first = None
    if cfg.promote:
        temps = [k.regs("f32", cfg.part_form.registers("D")) for _ in range(cfg.promote_temps)]
        p_first = k.reg("pred")
        for r in (r for t in temps for r in t):  # defined before WGMMA's first use (C7519)
            k.ins("mov.f32", r, "0f00000000")
    return p_true, p_acc, imm, ep, temps, p_first


def _consumer(b: _Build) -> None:
    """Warpgroups 1..C: per tile, the WGMMA main loop over K blocks, then the epilogue."""
    k, cfg, plan, form = b.k, b.cfg, b.plan, b.cfg.form
    k.comment("consumer warpgroups: WGMMA main loop + epilogue")
    SE.setmaxnreg(k, "inc", cfg.consumer_regs, target=b.target)
    cw = _u32(k, "sub.u32", b.wg, 1)  # consumer index
    ltid = _u32(k, "and.b32", b.tid, WARPGROUP - 1)
    is_lead = k.reg("pred")
    k.ins("setp.eq.u32", is_lead, ltid, 0)
    # descriptors of stage 0 for this consumer's rows; stages added below (16-byte units)
    a_row = _u32(k, "mul.lo.u32", cw, plan.a_consumer_offset)
    a_sm = _u32(k, "add.u32", b.smem, a_row)
    a_desc0 = [_desc_base(k, a_sm, d, b.off_a) for d in plan.a_descs]
    b_desc0 = [_desc_base(k, b.smem, d, b.off_b) for d in plan.b_descs]
    acc = k.regs("f32", form.registers("D"))
    scale = _fp8_scale(b)
    p_true, p_acc, imm, ep, temps, p_first = _consumer_state(b, cw, ltid, is_lead)

    assert b.ring is not None
    cons = b.ring.consumer("consumers", arrivals=cfg.consumers)  # each warpgroup releases
    sched = TileScheduler(b, b.first_tile, b.step)
    stage, phase, tile, top, mb, nb = sched.tile_loop("c_tile", 0, (2,))
    block_ptrs = None
    if cfg.scale_mode == "block":  # applied at promotion, not in the epilogue
        if b.scale_step is not None:
            scale = _group_scales(b, sched.group)
        assert isinstance(scale, tuple)
        block_ptrs, scale = scale, None
    staged = None
    if cfg.row_scale_stage:
        assert isinstance(scale, tuple)
        staged = _stage_row_scales(b, scale, cw, ltid, mb, nb)
    seq = WgmmaSequence(k)
    if cfg.promote:
        rows = None if block_ptrs is None else _block_scale_rows(b, block_ptrs, cw, mb, nb)
        # the tile loop: replayed (the next tile's first K blocks); may_skip: a CTA past the
        # last tile runs it zero times (grouped grids of every SM)
        with cons.loop(may_skip=True):
            _mainloop_promoted(b, seq, acc, temps, a_desc0, b_desc0, stage, phase, is_lead,
                               p_true, p_first, rows, cons=cons)
    else:
        with cons.loop(may_skip=True):  # the tile loop, as above
            kt, prev, kloop = _open_k_loop(b, p_acc, cons)
            with cons.loop():  # the K loop
                _wait_stage(cons, stage, phase)
                # descriptors of this stage
                da = k.reg("b64")
                db = k.reg("b64")
                sa_off = _u32(k, "mul.lo.u32", stage, cfg.a_stage_bytes >> 4)
                sb_off = _u32(k, "mul.lo.u32", stage, cfg.b_stage_bytes >> 4)
                da64, db64 = k.reg("b64"), k.reg("b64")
                k.ins("cvt.u64.u32", da64, sa_off)
                k.ins("cvt.u64.u32", db64, sb_off)
                seq.fence()  # every K block: the previous tile's epilogue read the accumulators
                for s in range(cfg.k_steps):
                    k.ins("add.s64", da, a_desc0[s], da64)
                    k.ins("add.s64", db, b_desc0[s], db64)
                    seq.mma(form, acc, da, db, p_acc if s == 0 else p_true, imm)
                    da, db = k.reg("b64"), k.reg("b64")
                _retire_k_block(b, sched, seq, cons, is_lead, p_acc, kt, prev, stage, phase,
                                kloop)
            _drain(b, seq, cons, prev, is_lead)
    seq.read(acc)
    seq.finish()
    if b.scale_step is not None and block_ptrs is None:
        # after the main loop: nothing of it lives across the loop
        scale = _group_scales(b, sched.group)
    with ep.ring.tile():  # checked across chunks and, replayed, across the tile loop
        _epilogue(b, ep, acc, scale, mb, nb, staged=staged)
    k.ins("add.u32", tile, tile, sched.step)
    k.bra(top)
    cons.finish()


def _consumer_pingpong(b: _Build) -> None:
    """Warpgroups 1-2 under the ping-pong schedule: consumer ``w`` runs the CTA's tiles
    ``w, w + 2, ...`` (tile ``first_tile + (2i + w) * step``), each a whole 128 x BN tile
    (two m64 WGMMAs per K step, one per 64-row half).  The producer fills the stage ring in
    tile order, so a consumer's ring position skips the other's tile (``ktiles`` K blocks,
    :func:`_skip_blocks`) and each stage is released by one warpgroup (``empty`` counts 1).
    Order: before its main loop a consumer waits on named barrier ``PINGPONG_BAR + w``
    (``bar.sync``, 256 threads; not on the CTA's very first tile); after issuing its last
    WGMMA it arrives (``bar.arrive``) on the other's barrier if the other has a next tile.
    So the main loops run one after the other and one's epilogue overlaps the other's main
    loop; the arrivals on each barrier alternate strictly between the two warpgroups (an
    arrival needs the other's previous one to have been waited for), and the wait also
    guarantees every earlier stage was filled, so no mbarrier parity wait can be two phases
    behind."""
    k, cfg, plan, form = b.k, b.cfg, b.plan, b.cfg.form
    k.comment("consumer warpgroups, ping-pong: each its own 128-row tile, main loops ordered")
    SE.setmaxnreg(k, "inc", cfg.consumer_regs, target=b.target)
    cw = _u32(k, "sub.u32", b.wg, 1)
    ltid = _u32(k, "and.b32", b.tid, WARPGROUP - 1)
    is_lead = k.reg("pred")
    k.ins("setp.eq.u32", is_lead, ltid, 0)
    a_hi = _u32(k, "add.u32", b.smem, plan.a_consumer_offset)  # rows 64..127 of a stage
    a_descs = ([_desc_base(k, b.smem, d, b.off_a) for d in plan.a_descs],
               [_desc_base(k, a_hi, d, b.off_a) for d in plan.a_descs])
    b_desc0 = [_desc_base(k, b.smem, d, b.off_b) for d in plan.b_descs]
    accs = [k.regs("f32", form.registers("D")) for _ in range(2)]
    scale = _fp8_scale(b)
    p_true, p_acc, imm, ep, temps, p_first = _consumer_state(b, cw, ltid, is_lead)
    wait_bar = _u32(k, "add.u32", cw, PINGPONG_BAR)  # mine
    sig_bar = _u32(k, "sub.u32", PINGPONG_BAR + 1, cw)  # the other's
    assert b.ring is not None
    order = PingPongOrder(k, PINGPONG_BAR, b.target)
    cons = b.ring.consumer("consumer", order=order)  # one warpgroup per tile
    cta_first, cta_step = b.first_tile, b.step
    sched = TileScheduler(b, _u32(k, "mad.lo.u32", cw, cta_step, cta_first),
                          _u32(k, "shl.b32", cta_step, 1))
    # ring position: consumer 1 starts past consumer 0's first tile (K block ktiles * cw)
    pos = _u32(k, "mul.lo.u32", cw, b.ktiles)
    stage0 = _u32(k, "rem.u32", pos, cfg.stages)
    phase0 = _u32(k, "div.u32", pos, cfg.stages)
    k.ins("and.b32", phase0, phase0, 1)
    stage, phase, tile, top, mb, nb = sched.tile_loop("c_tile", phase0, (2,), stage0)
    # the tile loop (its turn, main loop, release): replayed; may run zero times
    with cons.loop(may_skip=True):
        k.ins("setp.eq.u32", p_acc, tile, cta_first)  # the CTA's first tile: nobody to wait for
        order.wait(cons, cw, skip=p_acc, bar=wait_bar)
        nxt = _u32(k, "add.u32", tile, cta_step)  # the other warpgroup's next tile
        p_sig = k.reg("pred")
        k.ins("setp.lt.u32", p_sig, nxt, b.ntiles)
        seq = WgmmaSequence(k)

        def signal() -> None:
            order.signal(cons, cw, pred=p_sig, bar=sig_bar)

        if cfg.promote:
            _mainloop_promoted(b, seq, accs[0], temps, a_descs[0], b_desc0, stage, phase,
                               is_lead, p_true, p_first, None,
                               list(zip(accs, a_descs, strict=True)),
                               cons=cons)
            signal()
        else:
            kt, prev, kloop = _open_k_loop(b, p_acc, cons)
            with cons.loop():  # the K loop
                _wait_stage(cons, stage, phase)
                sa_off = _u32(k, "mul.lo.u32", stage, cfg.a_stage_bytes >> 4)
                sb_off = _u32(k, "mul.lo.u32", stage, cfg.b_stage_bytes >> 4)
                da64, db64 = k.reg("b64"), k.reg("b64")
                k.ins("cvt.u64.u32", da64, sa_off)
                k.ins("cvt.u64.u32", db64, sb_off)
                seq.fence()
                for s in range(cfg.k_steps):
                    db = k.reg("b64")
                    k.ins("add.s64", db, b_desc0[s], db64)
                    for h in (0, 1):
                        da = k.reg("b64")
                        k.ins("add.s64", da, a_descs[h][s], da64)
                        seq.mma(form, accs[h], da, db, p_acc if s == 0 else p_true, imm)
                _retire_k_block(b, sched, seq, cons, is_lead, p_acc, kt, prev, stage, phase,
                                kloop)
            signal()  # every WGMMA of this tile is issued: the other warpgroup's turn
            _drain(b, seq, cons, prev, is_lead)
    for acc in accs:
        seq.read(acc)
    seq.finish()
    with ep.ring.tile():
        for h in (0, 1):
            _epilogue(b, ep, accs[h], scale, mb, nb, half=h)
    _skip_blocks(k, stage, phase, b.ktiles, cfg.stages)  # the other warpgroup's next tile
    # the other warpgroup's next tile, then mine: the CTA's step twice (sched.step, written
    # once, as the PTX was recorded)
    k.ins("add.u32", tile, tile, cta_step)
    k.ins("add.u32", tile, tile, cta_step)
    k.bra(top)
    cons.finish()
