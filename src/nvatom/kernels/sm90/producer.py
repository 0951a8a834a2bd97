"""The SM90 GEMM's producer warpgroup: one thread loops over the CTA's tiles and K blocks and
issues the TMA loads of A and B into the stage ring (half of B each, multicast, in a 2-CTA
cluster) (PTX ISA "cp.async.bulk.tensor", "mbarrier.arrive.expect_tx")."""

from __future__ import annotations

from nvatom.kernels.pipeline import ProducerRole
from nvatom.kernels.sm90.emit import next_stage as _next_stage
from nvatom.kernels.sm90.emit import producer_thread
from nvatom.kernels.sm90.emit import u32 as _u32
from nvatom.kernels.sm90.scheduler import TileScheduler
from nvatom.kernels.sm90.skeleton import _Build
from nvatom.ptx.builder import Reg


def _producer(b: _Build) -> None:
    """Warpgroup 0: one thread loops over the CTA's tiles and K blocks as the stage ring's
    producer role (``b.ring``): acquires stage ``s`` (waits for ``empty[s]``, announces the
    stage's bytes on ``full[s]``) and issues the TMA loads of A and B (with ``cluster_m`` 2
    and multicast: half of B each, to both CTAs)."""
    k, cfg = b.k, b.cfg
    bm, bn, bk = cfg.block_m, cfg.block_n, cfg.block_k
    producer_thread(k, cfg.producer_regs, b.tid, b.done, b.target)
    mask = None
    if cfg.mcast:
        mask = k.reg("b16")
        k.ins("mov.b16", mask, 3)
    assert b.ring is not None
    prod = b.ring.producer("producer")
    # phase 1: a fresh barrier's "previous phase" counts as complete
    sched = TileScheduler(b, b.first_tile, b.step)
    pstage, pphase, ptile, ptop, pmb, pnb = sched.tile_loop("p_tile", 1, (0, 1))
    with prod.loop(may_skip=True):  # the tile loop (zero times in a CTA past the last tile)
        am = _u32(k, "mul.lo.u32", pmb, bm)
        bnn = _u32(k, "mul.lo.u32", pnb, bn)
        pkt = _u32(k, "mov.u32", 0)
        pk_top = k.fresh_label("p_k")
        k.label(pk_top)
        with prod.loop():  # the K loop
            prod.begin(at=(pstage, pphase))
            _acquire(prod)
            kx = _u32(k, "mul.lo.u32", pkt, bk)
            _load_stage(b, prod, pstage, kx, am, bnn, mask)
            prod.commit()
            _next_stage(k, pstage, pphase, cfg.stages)
            k.ins("add.u32", pkt, pkt, 1)
            pk2 = k.reg("pred")
            k.ins("setp.lt.u32", pk2, pkt, b.ktiles)
            k.bra(pk_top, pk2)
        k.ins("add.u32", ptile, ptile, sched.step)
        k.bra(ptop)


def _acquire(prod: ProducerRole) -> Reg:
    """The producer takes its stage (the role's ``acquire``: wait for ``empty[s]``, then
    ``expect_tx`` on ``full[s]``)."""
    return prod.acquire()


def _load_stage(b: _Build, prod: ProducerRole, pstage: Reg, kx: Reg, am: Reg, bnn: Reg,
                mask: Reg | None) -> None:
    """The TMA loads of one K block into the acquired stage: A's box, then B's (K-major: one
    box; MN-major: its boxes), multicast halves of B in a 2-CTA cluster (each such load and
    its peer's mirror deliver twice its bytes to this CTA's stage)."""
    k, cfg, plan = b.k, b.cfg, b.plan
    bn = cfg.block_n
    stage_a, stage_b = cfg.a_stage_bytes, cfg.b_stage_bytes
    ta, tb, _ = b.tmaps
    a_dst = _u32(k, "mad.lo.u32", pstage, stage_a, b.off_a)
    k.ins("add.u32", a_dst, a_dst, b.smem)
    prod.load(a_dst, ta, [kx, am], stage_a)
    b_dst = _u32(k, "mad.lo.u32", pstage, stage_b, b.off_b)
    k.ins("add.u32", b_dst, b_dst, b.smem)
    rank = b.rank
    if cfg.b_major == "K":
        if cfg.mcast:
            assert rank is not None
            half = _u32(k, "mul.lo.u32", rank, plan.b_box_offsets[0])
            dst = _u32(k, "add.u32", b_dst, half)
            bn_half = _u32(k, "mad.lo.u32", rank, bn // 2, bnn)
            prod.load(dst, tb, [kx, bn_half], stage_b, multicast_mask=mask)
        else:
            prod.load(b_dst, tb, [kx, bnn], stage_b)
    else:
        boxes = plan.b_box_offsets
        per = plan.b_box[0]
        box_bytes = stage_b // len(boxes)
        if cfg.mcast:
            assert rank is not None
            # each CTA loads half of the boxes and multicasts them
            nh = len(boxes) // 2
            for jb in range(nh):
                sel = _u32(k, "mad.lo.u32", rank, nh, jb)  # box index
                dst = _u32(k, "mad.lo.u32", sel, boxes[1] - boxes[0], b_dst)
                nx = _u32(k, "mad.lo.u32", sel, per, bnn)
                prod.load(dst, tb, [nx, kx], 2 * box_bytes, multicast_mask=mask)
        else:
            for jb, off in enumerate(boxes):
                dst = _u32(k, "add.u32", b_dst, off)
                nx = _u32(k, "add.u32", bnn, jb * per)
                prod.load(dst, tb, [nx, kx], box_bytes)
