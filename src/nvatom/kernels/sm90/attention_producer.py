"""The SM90 attention kernel's producer warpgroup: one thread loads Q once, then K and V of
every KV tile into the stage ring, K and V on their own barriers (PTX ISA
"cp.async.bulk.tensor", "mbarrier.arrive.expect_tx")."""

from __future__ import annotations

from nvatom.kernels.sm90.attention_config import _CHUNK
from nvatom.kernels.sm90.attention_skeleton import _Build
from nvatom.kernels.sm90.emit import next_stage as _next_stage
from nvatom.kernels.sm90.emit import producer_thread
from nvatom.kernels.sm90.emit import u32 as _u32


def _producer(b: _Build) -> None:
    """Warpgroup 0: one thread loads Q (``b.q``, a
    :class:`~nvatom.kernels.pipeline.SingleBuffer`), then K and V of every KV tile into the
    ring: K and V as the producer roles of two pipelines (``b.rings``,
    :func:`~nvatom.kernels.sm90.attention_rings.kv_rings`) at the kernel's ring
    registers, so each stage's acquire comes before its loads and the loads deliver the
    announced bytes."""
    k, cfg, plan = b.k, b.cfg, b.plan
    producer_thread(k, cfg.producer_regs, b.tid, b.done, b.target)
    tq, tk, tv, _ = b.tmaps
    assert b.rings is not None and b.q is not None
    b.q.arm()  # Q: its own barrier, the boxes delivering q_bytes
    qrow = b.m0 if b.q_start is None else _u32(k, "add.u32", b.m0, b.q_start)
    for c, off in enumerate(plan.q_boxes):
        dst = _u32(k, "add.u32", b.smem, b.off_q + off)
        b.q.load(dst, tq, [c * _CHUNK, qrow, b.head, b.tma_batch],
                 cfg.q_bytes // len(plan.q_boxes))
    b.q.commit()
    roles = [ring.producer(f"{ring.spec.name}_producer") for ring in b.rings]
    stage = _u32(k, "mov.u32", 0)
    phase = _u32(k, "mov.u32", 1)  # a fresh barrier's previous phase counts as complete
    j = _u32(k, "mov.u32", 0)
    top = k.fresh_label("p_kv")
    k.label(top)
    with roles[0].loop(), roles[1].loop():
        n0 = _u32(k, "mul.lo.u32", j, cfg.block_n)
        if b.kv0 is not None:  # a window: the walk starts at its first tile
            k.ins("add.u32", n0, n0, b.kv0)
        if b.k_start is not None:  # varlen: the sequence's rows of the packed k, v
            k.ins("add.u32", n0, n0, b.k_start)
        for (tmap, region, boxes), role in zip(((tk, b.off_k, plan.k_boxes),
                                                (tv, b.off_v, plan.v_boxes)), roles,
                                               strict=True):
            role.begin(at=(stage, phase))
            role.acquire()  # without split_release, K's acquire waits V's empty too
            base = _u32(k, "mad.lo.u32", stage, cfg.kv_bytes, region)
            k.ins("add.u32", base, base, b.smem)
            for c, off in enumerate(boxes):
                dst = _u32(k, "add.u32", base, off)
                role.load(dst, tmap, [c * _CHUNK, n0, b.kv_head, b.tma_batch],
                          cfg.kv_bytes // len(boxes))
            role.commit()
        _next_stage(k, stage, phase, cfg.stages)
        k.ins("add.u32", j, j, 1)
        more = k.reg("pred")
        k.ins("setp.lt.u32", more, j, b.n_tiles)
        k.bra(top, more)
    k.bra(b.done)
