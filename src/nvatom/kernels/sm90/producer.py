"""The SM90 GEMM's producer warpgroup: one thread loops over the CTA's tiles and K blocks and
issues the TMA loads of A and B into the stage ring (half of B each, multicast, in a 2-CTA
cluster) (PTX ISA "cp.async.bulk.tensor", "mbarrier.arrive.expect_tx")."""

from __future__ import annotations

from nvatom.kernels.sm90.emit import next_stage as _next_stage
from nvatom.kernels.sm90.emit import u32 as _u32
from nvatom.kernels.sm90.pipeline import _barrier
from nvatom.kernels.sm90.scheduler import TileScheduler
from nvatom.kernels.sm90.skeleton import _Build
from nvatom.ptx import sync_emit as SE
from nvatom.ptx import tma_emit as TE


def _producer(b: _Build) -> None:
    """Warpgroup 0: one thread loops over the CTA's tiles and K blocks, waits for ``empty[s]``,
    announces the stage's bytes on ``full[s]`` and issues the TMA loads of A and B (with
    ``cluster_m`` 2 and multicast: half of B each, to both CTAs)."""
    k, cfg, plan = b.k, b.cfg, b.plan
    bm, bn, bk = cfg.block_m, cfg.block_n, cfg.block_k
    stage_a, stage_b = cfg.a_stage_bytes, cfg.b_stage_bytes
    ta, tb, _ = b.tmaps
    k.comment("producer warpgroup: one thread issues every TMA load")
    SE.setmaxnreg(k, "dec", cfg.producer_regs, target=b.target)
    pl = k.reg("pred")
    k.ins("setp.ne.u32", pl, b.tid, 0)
    k.bra(b.done, pl)
    tx = stage_a + stage_b
    mask = None
    if cfg.mcast:
        mask = k.reg("b16")
        k.ins("mov.b16", mask, 3)
    # phase 1: a fresh barrier's "previous phase" counts as complete
    sched = TileScheduler(b, b.first_tile, b.step)
    pstage, pphase, ptile, ptop, pmb, pnb = sched.tile_loop("p_tile", 1, (0, 1))
    am = _u32(k, "mul.lo.u32", pmb, bm)
    bnn = _u32(k, "mul.lo.u32", pnb, bn)
    pkt = _u32(k, "mov.u32", 0)
    pk_top = k.fresh_label("p_k")
    k.label(pk_top)
    empty = _barrier(k, b.smem, b.off_empty, pstage)
    TE.mbarrier_wait_parity(k, empty, pphase)
    fullp = _barrier(k, b.smem, b.off_full, pstage)
    TE.mbarrier_arrive_expect_tx(k, fullp, tx)
    kx = _u32(k, "mul.lo.u32", pkt, bk)
    a_dst = _u32(k, "mad.lo.u32", pstage, stage_a, b.off_a)
    k.ins("add.u32", a_dst, a_dst, b.smem)
    TE.tma_load(k, a_dst, ta, [kx, am], fullp)
    b_dst = _u32(k, "mad.lo.u32", pstage, stage_b, b.off_b)
    k.ins("add.u32", b_dst, b_dst, b.smem)
    rank = b.rank
    if cfg.b_major == "K":
        if cfg.mcast:
            assert rank is not None
            half = _u32(k, "mul.lo.u32", rank, plan.b_box_offsets[0])
            dst = _u32(k, "add.u32", b_dst, half)
            bn_half = _u32(k, "mad.lo.u32", rank, bn // 2, bnn)
            TE.tma_load(k, dst, tb, [kx, bn_half], fullp, multicast_mask=mask)
        else:
            TE.tma_load(k, b_dst, tb, [kx, bnn], fullp)
    else:
        boxes = plan.b_box_offsets
        per = plan.b_box[0]
        if cfg.mcast:
            assert rank is not None
            # each CTA loads half of the boxes and multicasts them
            nh = len(boxes) // 2
            for jb in range(nh):
                sel = _u32(k, "mad.lo.u32", rank, nh, jb)  # box index
                dst = _u32(k, "mad.lo.u32", sel, boxes[1] - boxes[0], b_dst)
                nx = _u32(k, "mad.lo.u32", sel, per, bnn)
                TE.tma_load(k, dst, tb, [nx, kx], fullp, multicast_mask=mask)
        else:
            for jb, off in enumerate(boxes):
                dst = _u32(k, "add.u32", b_dst, off)
                nx = _u32(k, "add.u32", bnn, jb * per)
                TE.tma_load(k, dst, tb, [nx, kx], fullp)
    _next_stage(k, pstage, pphase, cfg.stages)
    k.ins("add.u32", pkt, pkt, 1)
    pk2 = k.reg("pred")
    k.ins("setp.lt.u32", pk2, pkt, b.ktiles)
    k.bra(pk_top, pk2)
    k.ins("add.u32", ptile, ptile, sched.step)
    k.bra(ptop)
