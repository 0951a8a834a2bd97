"""A small persistent kernel built from the pipeline layer (:mod:`nvatom.kernels.pipeline`,
:mod:`nvatom.kernels.scheduler`), the smallest one that has every piece of the SM90 GEMM's
synchronisation: a warp-specialised TMA producer, a ``stages``-deep ring with ``full`` /
``empty`` mbarriers, one or two consumer warpgroups, a static persistent tile loop and an
epilogue of ``chunks`` TMA stores per tile through a ring of two staging buffers.

It reduces rows: ``Y[4 m + r, 32 c + j] = (c + 1) * sum_kb X[4 m + r, 32 kb + j]`` (f32; a
tile is 4 rows, a K block 32 columns, one stage one 4 x 32 TMA box of 512 bytes, thread
``i`` of a consumer warpgroup owns element ``i`` of the box; with two consumer warpgroups
both read every stage and store the same values, a stand-in for the cooperative GEMM's two
halves of a tile).

Two options rebuild last rounds' bugs so that tests can show the layer refuses them:

* ``epilogue_wait="one_in_flight"``: every chunk waits with ``cp.async.bulk.wait_group.read
  1`` -- the FP8 epilogue race of docs/perf.md ("FP8 tile by wave count"): with an odd
  number of chunks the next tile's first chunk writes the buffer the previous tile's last
  store still reads.  ``"safe"`` (the default) waits for all on a tile's first chunk when the
  chunk count is odd, as ``gemm_sm90._epilogue`` does;
* ``empty_arrivals=1`` with two consumer warpgroups: ``empty[s]`` completes on the first
  warpgroup's release, and the producer refills a stage the second still reads.
"""

from __future__ import annotations

import dataclasses
import struct
from typing import Any, Literal

from nvatom.atoms.wgmma_fragments import WARPGROUP
from nvatom.kernels.pipeline import EpilogueRing, PingPongOrder, Pipeline, PipelineSpec
from nvatom.kernels.scheduler import StaticPersistent, emit_first_and_step
from nvatom.ptx import sync_emit as SE
from nvatom.ptx import tma_emit as TE
from nvatom.ptx.builder import Kernel, Module, Param, Reg

__all__ = ["BOX_BYTES", "build_pipeline_demo"]

#: one TMA box: 4 rows x 32 f32 columns
BOX_ROWS, BOX_COLS = 4, 32
BOX_BYTES = BOX_ROWS * BOX_COLS * 4
#: the consumers' named barrier (0 is the CTA barrier)
CONSUMER_BAR = 1
#: the ping-pong order's named barriers (PINGPONG_BAR + w, w = 0, 1), after the consumers' 1, 2
PINGPONG_BAR = 3
#: the stages' offset in the shared buffer (the staging buffers follow them)
_OFF_STAGE = 0


def build_pipeline_demo(*, stages: int = 3, chunks: int = 3, consumers: int = 1,
                        schedule: Literal["ordered", "pingpong"] = "ordered",
                        epilogue_wait: Literal["safe", "one_in_flight"] = "safe",
                        empty_arrivals: int | None = None,
                        target: str = "sm_90a") -> Module:
    """The demo kernel ``pipeline_demo(tmap_x, tmap_y, tiles_m, ktiles)``; raises
    :class:`~nvatom.kernels.pipeline.PipelineError` for the racy options.  ``schedule =
    "pingpong"`` (two consumer warpgroups): warpgroup ``w`` takes the CTA's tiles ``w, w + 2,
    ...``, its ring position skipping the other's K blocks, each stage released by one
    warpgroup, the main loops ordered by :class:`~nvatom.kernels.pipeline.PingPongOrder`."""
    mod = Module(target)
    d = _prologue(mod, stages, consumers, schedule, empty_arrivals, target)
    _producer(d)
    _consumers(d, chunks, epilogue_wait)
    d.k.label(d.done)
    TE.bulk_wait_group(d.k, 0, read=False)
    return mod


@dataclasses.dataclass(frozen=True)
class _Demo:
    """What the producer and the consumers share, set up by :func:`_prologue`."""

    k: Kernel
    target: str
    consumers: int
    pingpong: bool
    pipe: Pipeline
    sched: StaticPersistent
    tx: Param
    ty: Param
    tiles_m: Reg
    ktiles: Reg
    base: Reg  # the shared buffer's address: stages at 0, staging at off_c
    off_c: int
    tid: Reg
    wg: Reg
    first: Reg
    step: Reg
    done: str  # the exit label
    cons_label: str  # where the consumer warpgroups start


def _prologue(mod: Module, stages: int, consumers: int, schedule: str,
              empty_arrivals: int | None, target: str) -> _Demo:
    """Parameters, the shared buffer (stages, staging, barriers), the pipeline's barriers,
    the persistent schedule and the branch to the consumers."""
    k = mod.kernel("pipeline_demo")
    threads = WARPGROUP * (1 + consumers)
    k.reqntid = (threads, 1, 1)
    tx = TE.tensormap_param(k, "tmap_x")
    ty = TE.tensormap_param(k, "tmap_y")
    tiles_m = k.ld_param(k.param("tiles_m", "u32"))
    ktiles = k.ld_param(k.param("ktiles", "u32"))
    spec = PipelineSpec("demo", stages, BOX_BYTES, consumers=consumers, kind=schedule,
                        empty_arrivals=empty_arrivals)  # type: ignore[arg-type]
    off_c = stages * BOX_BYTES
    off_bar = off_c + 2 * consumers * BOX_BYTES
    sym = k.shared("smem", off_bar + Pipeline.barrier_bytes(stages), 1024)
    base = TE.shared_address(k, sym)
    full = TE.shared_address(k, sym, off_bar)
    empty = TE.shared_address(k, sym, off_bar + 8 * stages)
    tid = k.reg("u32")
    k.ins("mov.u32", tid, "%tid.x")
    pipe = Pipeline(k, spec, full, empty)
    pipe.init(tid)
    k.ins("bar.sync", 0)
    sched = StaticPersistent(tiles_m=1, tiles_n=1, group=8)  # run-time tile counts below
    first, step = emit_first_and_step(k)
    wg = k.reg("u32")
    k.ins("shr.u32", wg, tid, 7)
    done = k.fresh_label("exit")
    cons_label = k.fresh_label("consumer")
    isp = k.reg("pred")
    k.ins("setp.ne.u32", isp, wg, 0)
    k.bra(cons_label, isp)
    return _Demo(k, target, consumers, schedule == "pingpong", pipe, sched, tx, ty, tiles_m,
                 ktiles, base, off_c, tid, wg, first, step, done, cons_label)


def _producer(d: _Demo) -> None:
    """Thread 0 loads one 4 x 32 box per stage, for every K block of the CTA's tiles."""
    k = d.k
    k.comment("producer: thread 0 loads one 4 x 32 box per stage")
    p0 = k.reg("pred")
    k.ins("setp.ne.u32", p0, d.tid, 0)
    k.bra(d.done, p0)
    prod = d.pipe.producer()
    pit = k.reg("u32")
    k.ins("mov.u32", pit, 0)
    pt = k.reg("u32")
    k.ins("mov.u32", pt, d.first)
    ptop, pend = k.fresh_label("p_tile"), k.fresh_label("p_tiles_done")
    k.label(ptop)
    pp = k.reg("pred")
    k.ins("setp.ge.u32", pp, pt, d.tiles_m)
    k.bra(d.done, pp)
    mb, _ = d.sched.emit_tile(k, pt, d.tiles_m, 1)
    row = k.reg("u32")
    k.ins("mul.lo.u32", row, mb, BOX_ROWS)
    kb = k.reg("u32")
    k.ins("mov.u32", kb, 0)
    ktop = k.fresh_label("p_k")
    k.label(ktop)
    with prod.loop():
        prod.begin(pit)
        prod.acquire()
        assert prod.stage is not None
        dst = k.reg("u32")
        k.ins("mad.lo.u32", dst, prod.stage, BOX_BYTES, d.base)
        kx = k.reg("u32")
        k.ins("mul.lo.u32", kx, kb, BOX_COLS)
        prod.load(dst, d.tx, [kx, row], BOX_BYTES)
        prod.commit()
    k.ins("add.u32", pit, pit, 1)
    k.ins("add.u32", kb, kb, 1)
    pk = k.reg("pred")
    k.ins("setp.lt.u32", pk, kb, d.ktiles)
    k.bra(ktop, pk)
    k.ins("add.u32", pt, pt, d.step)
    k.bra(ptop)
    k.label(pend)


def _consumers(d: _Demo, chunks: int, epilogue_wait: str) -> None:
    """The consumer warpgroups: each thread sums its element of every stage of a tile, then
    stores ``chunks`` multiples of the sum through the staging ring."""
    k = d.k
    k.label(d.cons_label)
    k.comment("consumer warpgroups: each thread sums its element of every stage")
    cw = k.reg("u32")
    k.ins("sub.u32", cw, d.wg, 1)
    ltid = k.reg("u32")
    k.ins("and.b32", ltid, d.tid, WARPGROUP - 1)
    lead = k.reg("pred")
    k.ins("setp.eq.u32", lead, ltid, 0)
    bar_id = k.reg("u32")
    k.ins("add.u32", bar_id, cw, CONSUMER_BAR)
    order = PingPongOrder(k, PINGPONG_BAR, d.target) if d.pingpong else None
    cons = d.pipe.consumer("readers", arrivals=None if d.pingpong else d.consumers,
                           order=order)
    d.pipe.check_arrivals()
    c_buf = k.reg("u32")  # this warpgroup's two staging buffers
    k.ins("mad.lo.u32", c_buf, cw, 2 * BOX_BYTES, d.base)
    k.ins("add.u32", c_buf, c_buf, d.off_c)
    c_buf1 = k.reg("u32")
    k.ins("add.u32", c_buf1, c_buf, BOX_BYTES)
    ring = EpilogueRing(k, "demo_staging", [c_buf, c_buf1], lead)
    lane_off = k.reg("u32")
    k.ins("mul.lo.u32", lane_off, ltid, 4)
    cit = k.reg("u32")
    k.ins("mov.u32", cit, 0)
    ct = k.reg("u32")
    k.ins("mov.u32", ct, d.first)
    cstep = d.step
    if d.pingpong:  # warpgroup cw: tiles first + (2i + cw) step, ring past the other's blocks
        k.ins("mad.lo.u32", ct, cw, d.step, d.first)
        k.ins("mul.lo.u32", cit, cw, d.ktiles)
        cstep = k.reg("u32")
        k.ins("shl.b32", cstep, d.step, 1)
    ctop = k.fresh_label("c_tile")
    k.label(ctop)
    cp = k.reg("pred")
    k.ins("setp.ge.u32", cp, ct, d.tiles_m)
    k.bra(d.done, cp)
    if order is not None:  # my turn: not waited for on the CTA's very first tile
        first_tile = k.reg("pred")
        k.ins("setp.eq.u32", first_tile, ct, d.first)
        order.wait(cons, cw, skip=first_tile)
    cmb, _ = d.sched.emit_tile(k, ct, d.tiles_m, 1)
    crow = k.reg("u32")
    k.ins("mul.lo.u32", crow, cmb, BOX_ROWS)
    acc = _consumer_k_loop(d, cons, cit, bar_id, lead)
    if order is not None:  # the other warpgroup's main loop may start, if it has a tile
        nxt = k.reg("u32")
        k.ins("add.u32", nxt, ct, d.step)
        more = k.reg("pred")
        k.ins("setp.lt.u32", more, nxt, d.tiles_m)
        order.signal(cons, cw, pred=more)
        k.ins("add.u32", cit, cit, d.ktiles)  # skip the other's K blocks
    _epilogue(d, ring, acc, crow, lane_off, bar_id, chunks, epilogue_wait)
    cons.finish()
    k.ins("add.u32", ct, ct, cstep)
    k.bra(ctop)


def _consumer_k_loop(d: _Demo, cons: Any, cit: Reg, bar_id: Reg, lead: Reg) -> Reg:
    """One tile's K loop of a consumer warpgroup: wait, read, release each stage; returns
    the thread's sum."""
    k = d.k
    acc = k.reg("f32")
    k.ins("mov.f32", acc, "0f00000000")
    ckb = k.reg("u32")
    k.ins("mov.u32", ckb, 0)
    cktop = k.fresh_label("c_k")
    k.label(cktop)
    with cons.loop():
        cons.begin(cit)
        cons.wait()
        assert cons.stage is not None
        src = k.reg("u32")
        k.ins("mad.lo.u32", src, cons.stage, BOX_BYTES, d.base)
        k.ins("add.u32", src, src, _OFF_STAGE)
        v = k.reg("f32")
        k.ins("ld.shared.f32", v, f"[{src}]")
        k.ins("add.f32", acc, acc, v)
        cons.read(synchronous=True)  # an ld.shared: done when it returns
        # every thread of the warpgroup has read before its lead releases the stage
        SE.named_barrier_sync(k, bar_id, WARPGROUP, target=d.target)
        cons.release(pred=lead)
    k.ins("add.u32", cit, cit, 1)
    k.ins("add.u32", ckb, ckb, 1)
    ck = k.reg("pred")
    k.ins("setp.lt.u32", ck, ckb, d.ktiles)
    k.bra(cktop, ck)
    return acc


def _epilogue(d: _Demo, ring: EpilogueRing, acc: Reg, crow: Reg, lane_off: Reg, bar_id: Reg,
              chunks: int, epilogue_wait: str) -> None:
    """``chunks`` TMA stores per tile through the ring of two staging buffers."""
    k = d.k
    with ring.tile():
        for ch in range(chunks):
            buf = ch % 2
            safe = epilogue_wait == "safe" and ch == 0 and chunks % 2
            ring.wait(0 if safe else 1)
            SE.named_barrier_sync(k, bar_id, WARPGROUP, target=d.target)
            addr = k.reg("u32")
            k.ins("add.u32", addr, ring.write(buf), lane_off)
            out = k.reg("f32")
            k.ins("mul.f32", out, acc, f"0f{_f32_bits(ch + 1):08X}")
            k.ins("st.shared.f32", f"[{addr}]", out)
            TE.fence_proxy_async(k)
            SE.named_barrier_sync(k, bar_id, WARPGROUP, target=d.target)
            cx = k.reg("u32")
            k.ins("mov.u32", cx, ch * BOX_COLS)
            ring.store(buf, d.ty, [cx, crow])


def _f32_bits(x: float) -> int:
    return int.from_bytes(struct.pack(">f", x), "big")
