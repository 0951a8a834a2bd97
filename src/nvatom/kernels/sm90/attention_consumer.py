"""The SM90 attention kernel's consumer warpgroups: per KV tile ``S = Q K^T`` (WGMMA ss),
the online softmax and ``O += P V`` (WGMMA rs), with FA3's intra-warpgroup overlap and the
ping-pong order between the two warpgroups, then the epilogue (PTX ISA "wgmma.mma_async",
"wgmma.wait_group", "bar.sync", "bar.arrive")."""

from __future__ import annotations

import dataclasses
from typing import Any

from nvatom.atoms.wgmma_fragments import accumulator_coord
from nvatom.kernels.pipeline import PingPongOrder
from nvatom.kernels.sm90.attention_epilogue import _store
from nvatom.kernels.sm90.attention_rings import WgmmaGroups
from nvatom.kernels.sm90.attention_skeleton import _Build
from nvatom.kernels.sm90.attention_softmax import _mask, _pack_p, _Softmax, _softmax
from nvatom.kernels.sm90.emit import consumer_thread
from nvatom.kernels.sm90.emit import desc_base as _desc_base
from nvatom.kernels.sm90.emit import next_stage as _next_stage
from nvatom.kernels.sm90.emit import u32 as _u32
from nvatom.ptx import sync_emit as SE
from nvatom.ptx.builder import Reg
from nvatom.ptx.wgmma_emit import WgmmaSequence

#: The WGMMA immediates: S = Q K^T scale-a, scale-b, no transposes; O += P V scale-a,
#: scale-b, transpose B (V is MN-major)
_S_IMM = (1, 1, 0, 0)
_O_IMM = (1, 1, 1)


@dataclasses.dataclass
class _Consumer:
    """A consumer warpgroup's registers (S, O and P fragments, the descriptors of its Q rows
    and of stage 0's K and V, its predicates and ping-pong barriers) and the steps of its KV
    loop: issue S or O's WGMMAs, release a stage, take and hand over the ping-pong turn,
    rescale O."""

    b: _Build
    seq: WgmmaSequence
    cw: Reg  # consumer index
    is_lead: Reg
    q_desc: list[Reg]
    k_desc0: list[Reg]
    v_desc0: list[Reg]
    s: list[Reg]  # S = Q K^T: the m64n<BN> f32 fragment (P after the softmax, in place)
    o: list[Reg]  # O: the m64n<D> f32 fragment
    p: list[Reg]  # P in 16 bits: the rs A fragment
    p_true: Reg
    p_false: Reg
    my_bar: Reg | None = None  # ping-pong: named barrier "this consumer may issue"
    other_bar: Reg | None = None
    order: PingPongOrder | None = None  # ping-pong: the turns over both rings' roles
    kr: Any = None  # the K ring's and the V ring's consumer roles (attention_rings)
    vr: Any = None
    groups: Any = None  # their WGMMA groups in commit order (WgmmaGroups)

    def descs(self, base: list[Reg], stage: Reg) -> list[Reg]:
        k = self.b.k
        off = _u32(k, "mul.lo.u32", stage, self.b.cfg.kv_bytes >> 4)
        w = k.reg("b64")
        k.ins("cvt.u64.u32", w, off)
        out = []
        for dsc in base:
            r = k.reg("b64")
            k.ins("add.s64", r, dsc, w)
            out.append(r)
        return out

    def issue_s(self, stage: Reg, phase: Reg) -> None:
        b, seq = self.b, self.seq
        self.kr.begin(at=(stage, phase))
        self.kr.wait()
        kd = self.descs(self.k_desc0, stage)
        seq.fence()
        for i in range(b.cfg.head_dim // 16):
            seq.mma(b.cfg.s_form, self.s, self.q_desc[i], kd[i],
                    self.p_false if i == 0 else self.p_true, _S_IMM)
        seq.commit()
        self.groups.read(self.kr, self.b.q)  # the group reads K's stage and the Q tile

    def issue_o(self, stage: Reg, phase: Reg) -> None:
        b, seq, p = self.b, self.seq, self.p
        self.vr.begin(at=(stage, phase))
        self.vr.wait()
        vd = self.descs(self.v_desc0, stage)
        seq.fence()  # P and O were written by ordinary instructions (and a branch since)
        for i in range(b.cfg.block_n // 16):
            seq.mma(b.cfg.o_form, self.o, p[4 * i:4 * i + 4], vd[i], self.p_true, _O_IMM)
        seq.commit()
        self.groups.read(self.vr)

    def release(self, stage: Reg, which: str = "e", k_lag: int = 0) -> None:
        """``which`` "ek": K's stage (only with ``split_release``); "e": V's stage, and
        without ``split_release`` also K's (the same ``e[s]``; K's iteration ``k_lag``
        behind: 1 when S of the next tile was issued first)."""
        split = self.b.cfg.split_release
        if which == "ek":
            if split:
                self.kr.release(0, stage=stage, pred=self.is_lead)
            return
        self.vr.release(0, stage=stage, pred=self.is_lead)
        if not split:
            self.kr.release(k_lag, stage=stage, pred=self.is_lead)  # V's arrival did it

    def wait(self, pending: int) -> None:
        """``wgmma.wait_group pending``, and which stages' groups it retired."""
        self.seq.wait(pending)
        self.groups.wait(pending)

    def turn_begin(self) -> None:
        if self.order is not None:
            self.order.wait((self.kr, self.vr), self.cw, bar=self.my_bar)

    def turn_end(self, last: bool = False) -> None:
        k = self.b.k
        if self.order is None:
            return
        skip = None
        if last:  # consumer 1's final hand-off has no taker (it handed off first)
            skip = k.reg("pred")
            k.ins("setp.eq.u32", skip, self.cw, 1)
        self.order.signal((self.kr, self.vr), self.cw, skip=skip, bar=self.other_bar,
                          label="pp_last")

    def rescale(self, alphas: list[Reg]) -> None:
        d = self.b.cfg.head_dim
        for i in range(d // 2):
            row_half = accumulator_coord(d, 0, i)[0] // 8
            self.b.k.ins("mul.f32", self.o[i], self.o[i], alphas[row_half])


def _consumer_setup(b: _Build) -> tuple[_Consumer, _Softmax, Reg, Reg, Reg, Reg]:
    """A consumer warpgroup's registers: its rows, the descriptors, the zeroed fragments, the
    softmax state, and with ping-pong its barriers (consumer 1 lets consumer 0 go first).
    Returns (consumer, softmax state, lane, Q rows' shared address, thread in warpgroup,
    warp)."""
    k, cfg, plan = b.k, b.cfg, b.plan
    bn, d = cfg.block_n, cfg.head_dim
    k.comment("consumer warpgroups: S = Q K^T (ss), softmax, O += P V (rs)")
    SE.setmaxnreg(k, "inc", cfg.consumer_regs, target=b.target)
    cw, ltid, warp, lane, g, tig = consumer_thread(k, b.wg, b.tid)
    r0 = _u32(k, "mad.lo.u32", cw, 64, b.m0)
    k.ins("mad.lo.u32", r0, warp, 16, r0)
    k.ins("add.u32", r0, r0, g)
    r1 = _u32(k, "add.u32", r0, 8)
    tig2 = k.reg("s32")
    k.ins("shl.b32", tig2, tig, 1)
    is_lead = k.reg("pred")
    k.ins("setp.eq.u32", is_lead, ltid, 0)
    # descriptors: Q of this consumer's rows, K and V of stage 0 (stages added per tile)
    q_sm = _u32(k, "mad.lo.u32", cw, plan.q_consumer_offset, b.smem)
    q_desc = [_desc_base(k, q_sm, dd, b.off_q) for dd in plan.q_descs]
    k_desc0 = [_desc_base(k, b.smem, dd, b.off_k) for dd in plan.k_descs]
    v_desc0 = [_desc_base(k, b.smem, dd, b.off_v) for dd in plan.v_descs]
    s = k.regs("f32", bn // 2)
    o = k.regs("f32", d // 2)
    p = k.regs("b32", bn // 4)
    st = _Softmax([k.reg("f32"), k.reg("f32")], [k.reg("f32"), k.reg("f32")], [r0, r1], tig2)
    for r in o:
        k.ins("mov.f32", r, "0f00000000")
    for r in s:  # defined before WGMMA's first use
        k.ins("mov.f32", r, "0f00000000")
    p_true = k.reg("pred")
    k.ins("setp.eq.u32", p_true, 0, 0)
    p_false = k.reg("pred")
    k.ins("setp.ne.u32", p_false, 0, 0)
    c = _Consumer(b, WgmmaSequence(k), cw, is_lead, q_desc, k_desc0, v_desc0, s, o, p, p_true,
                  p_false)
    # ping-pong: a consumer issues its WGMMAs only after the other one has issued its own
    # (named barriers 1 and 2: "consumer c may issue"); consumer 1 lets consumer 0 go first.
    c.order = PingPongOrder(k, 1, b.target) if cfg.pingpong else None
    assert b.rings is not None  # both warpgroups run this code: 2 releases of each stage
    c.kr, c.vr = (ring.consumer("consumers", arrivals=2, order=c.order) for ring in b.rings)
    c.groups = WgmmaGroups((c.kr, c.vr, b.q))
    c.my_bar = _u32(k, "add.u32", cw, 1)
    c.other_bar = _u32(k, "sub.u32", 2, cw)
    if c.order is not None:
        p1 = k.reg("pred")
        k.ins("setp.eq.u32", p1, cw, 1)
        c.order.first_turn(p1)
    return c, st, lane, q_sm, ltid, warp


def _kv_tile(c: _Consumer, st: _Softmax, stage: Reg, phase: Reg, j: Reg) -> None:
    """One KV tile ``j`` > 0 of the loop: S_j on the next stage and O += P_{j-1} V_{j-1} on
    this one (with ``overlap``: both issued, the softmax of S_j under P V's WGMMAs), O
    rescaled, P_j packed; the ring advanced to S_j's stage."""
    b, seq, s = c.b, c.seq, c.s
    k, cfg = b.k, b.cfg
    nstage = _u32(k, "mov.u32", stage)
    nphase = _u32(k, "mov.u32", phase)
    _next_stage(k, nstage, nphase, cfg.stages)
    n0 = _u32(k, "mul.lo.u32", j, cfg.block_n)
    if b.kv0 is not None:  # a window: the walk starts at its first tile
        k.ins("add.u32", n0, n0, b.kv0)
    if cfg.overlap:
        c.turn_begin()
        c.issue_s(nstage, nphase)  # S_{j} while P_{j-1} V_{j-1} runs
        c.issue_o(stage, phase)
        c.turn_end()
        c.wait(1)
        c.release(nstage, "ek")
        seq.read(s)
        _mask(b, s, st, n0)
        alphas = _softmax(b, s, st, first=False)
        c.wait(0)
        c.release(stage, k_lag=1)
    else:
        c.issue_o(stage, phase)
        c.wait(0)
        c.release(stage)
        c.issue_s(nstage, nphase)
        c.wait(0)
        c.release(nstage, "ek")
        seq.read(s)
        _mask(b, s, st, n0)
        alphas = _softmax(b, s, st, first=False)
    assert alphas is not None
    seq.write(c.o)
    c.rescale(alphas)
    _pack_p(b, s, c.p)
    k.ins("mov.u32", stage, nstage)
    k.ins("mov.u32", phase, nphase)


def _consumer(b: _Build) -> None:
    """Warpgroups 1 and 2: 64 Q rows each; S = Q K^T, online softmax, O += P V per KV tile."""
    k = b.k
    c, st, lane, q_sm, ltid, warp = _consumer_setup(b)
    seq, s = c.seq, c.s
    b.q.wait()
    stage = _u32(k, "mov.u32", 0)
    phase = _u32(k, "mov.u32", 0)
    # first tile: S_0, softmax, P_0
    c.turn_begin()
    c.issue_s(stage, phase)
    c.turn_end()
    c.wait(0)
    c.release(stage, "ek")
    seq.read(s)
    zero = _u32(k, "mov.u32", 0) if b.kv0 is None else b.kv0
    _mask(b, s, st, zero)
    _softmax(b, s, st, first=True)
    _pack_p(b, s, c.p)
    j = _u32(k, "mov.u32", 1)
    tail = k.fresh_label("c_tail")
    done_loop = k.reg("pred")
    k.ins("setp.ge.u32", done_loop, j, b.n_tiles)
    k.bra(tail, done_loop)
    top = k.fresh_label("c_kv")
    k.label(top)
    # the KV loop, replayed at its back edge; skipped for a single KV tile (both paths
    # checked from here on)
    with c.kr.loop(may_skip=True), c.vr.loop(may_skip=True), b.q.loop(may_skip=True):
        _kv_tile(c, st, stage, phase, j)
        k.ins("add.u32", j, j, 1)
        more = k.reg("pred")
        k.ins("setp.lt.u32", more, j, b.n_tiles)
        k.bra(top, more)
    k.label(tail)
    c.turn_begin()
    c.issue_o(stage, phase)
    c.turn_end(last=True)
    c.wait(0)
    c.release(stage)
    c.kr.finish()
    c.vr.finish()
    seq.read(c.o)
    seq.finish()
    _store(b, c.o, st, lane, cw=c.cw, q_sm=q_sm, ltid=ltid, warp=warp)
    k.bra(b.done)
