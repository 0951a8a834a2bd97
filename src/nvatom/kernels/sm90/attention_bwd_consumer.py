"""The SM90 attention backward's consumer warpgroups: per (query head, Q block) ``S^T``,
``dP^T`` (WGMMA ss), ``P^T`` and ``dS^T`` in registers, ``dV`` and ``dK`` (WGMMA rs), dS^T
through ``stmatrix`` into shared memory, ``dQ`` (WGMMA ss) staged in shared memory and added
to global memory by TMA reductions (or ``red.global.add.v2.f32``); then the dK / dV epilogue
(PTX ISA "wgmma.mma_async", "stmatrix", "fence.proxy", "bar.sync",
"cp.reduce.async.bulk.tensor", "red", "ex2", "tanh")"""

from __future__ import annotations

import contextlib
import dataclasses
from typing import Any

from nvatom.atoms.wgmma_fragments import WARPGROUP, accumulator_coord
from nvatom.kernels.pipeline import EpilogueRing
from nvatom.kernels.sm90.attention_bwd_config import BWD_BLOCK_M, DQ_BOX
from nvatom.kernels.sm90.attention_bwd_skeleton import BwdBuild, advance_q, start_q
from nvatom.kernels.sm90.attention_config import _NEG_INF
from nvatom.kernels.sm90.attention_plan import STSM
from nvatom.kernels.sm90.attention_rings import WgmmaGroups
from nvatom.kernels.sm90.emit import consumer_thread
from nvatom.kernels.sm90.emit import desc_base as _desc_base
from nvatom.kernels.sm90.emit import next_stage as _next_stage
from nvatom.kernels.sm90.emit import stmatrix_lane_offset as _stsm_lane
from nvatom.kernels.sm90.emit import u32 as _u32
from nvatom.ptx import sync_emit as SE
from nvatom.ptx import tma_emit as TE
from nvatom.ptx.builder import Kernel, Reg
from nvatom.ptx.copy_emit import emit_matrix_copy
from nvatom.ptx.wgmma_emit import WgmmaSequence

__all__ = ["bwd_consumer"]

#: WGMMA immediates: S^T, dP^T (scale-a, scale-b, no transposes); dV, dK (transpose B: dO
#: and Q MN-major); dQ (transpose A and B: dS and K MN-major)
_SS_IMM = (1, 1, 0, 0)
_RS_IMM = (1, 1, 1)
_DQ_IMM = (1, 1, 1, 1)


def _step(k: Kernel, base: Reg, delta: int) -> Reg:
    """Descriptor ``base`` moved ``delta`` bytes (the start-address field counts 16 bytes)."""
    if not delta:
        return base
    r = k.reg("b64")
    k.ins("add.s64", r, base, delta >> 4)
    return r


def _at(k: Kernel, base: Reg, off: Reg) -> Reg:
    r = k.reg("b64")
    k.ins("add.s64", r, base, off)
    return r


def _pack(b: BwdBuild, vals: list[Reg], out: list[Reg]) -> None:
    """16-bit pairs of an m64n64 accumulator (:func:`pack_retile`): the rs A fragment of
    K step ``kk`` and the stmatrix registers of 16-column block ``kk`` alike."""
    for kk, regs in enumerate(b.plan.retile):
        for r, (lo, hi) in enumerate(regs):
            SE.cvt_pack_f32(b.k, b.cfg.dtype, vals[hi], vals[lo], target=b.target,
                            into=out[4 * kk + r])


@dataclasses.dataclass
class _Consumer:
    """A consumer warpgroup's registers (its rows, the descriptors of K step 0, the
    accumulators and packed fragments, the dS and dQ staging addresses) and the steps of one
    (head, Q block) iteration."""

    b: BwdBuild
    seq: WgmmaSequence
    role: Any  # the ring's consumer role
    groups: WgmmaGroups
    cw: Reg
    tig2: Reg
    row16: Reg  # the thread's first row in a 64-row tile
    krow: Reg  # ... of the CTA's KV rows (absolute)
    is_lead: Reg
    desc: dict[str, Reg]  # ka, va (this consumer's K, V rows), qk, dok, qmn, domn (stage 0),
    # kb (K as dQ's B), dsa (dS as dQ's A)
    st_base: Reg  # this lane's stmatrix row address in the dS tile
    stats: Reg  # this thread's columns of stage 0's stats tile
    hkv: Reg
    acc: dict[str, list[Reg]]  # s, dp, dv, dk, dq (f32); pk, pds (16-bit pairs)
    p_true: Reg
    p_false: Reg
    ring: EpilogueRing | None = None  # dq_reduce "tma": the dQ staging tile
    stg: list[Reg] | None = None  # its row addresses per column group

    def stage_descs(self, stage: Reg) -> dict[str, Reg]:
        k = self.b.k
        soff = _u32(k, "mul.lo.u32", stage, self.b.cfg.stage_stride >> 4)
        sw = k.reg("b64")
        k.ins("cvt.u64.u32", sw, soff)
        return {n: _at(k, self.desc[n], sw) for n in ("qk", "dok", "qmn", "domn")}

    def issue_sdp(self, sd: dict[str, Reg]) -> None:
        """S^T = K Q^T and dP^T = V dO^T, one group each."""
        b, seq, plan, a = self.b, self.seq, self.b.plan, self.acc
        for acc, a0, b0 in ((a["s"], self.desc["ka"], sd["qk"]),
                            (a["dp"], self.desc["va"], sd["dok"])):
            seq.fence()
            for i in range(b.cfg.head_dim // 16):
                dlt = plan.kv_descs[i].start_address - plan.kv_descs[0].start_address
                dlb = plan.tile_k_descs[i].start_address - plan.tile_k_descs[0].start_address
                seq.mma(b.cfg.s_form, acc, _step(b.k, a0, dlt), _step(b.k, b0, dlb),
                        self.p_false if i == 0 else self.p_true, _SS_IMM)
            seq.commit()
            self.groups.read(self.role, b.kv)

    def wait(self, pending: int) -> None:
        self.seq.wait(pending)
        self.groups.wait(pending)

    def probabilities(self, stage: Reg, q0: Reg) -> None:
        """P^T = exp2(S^T c - lse log2 e) (columns are Q rows; the mask on the diagonal),
        then dS^T = P^T (dP^T - rowsum(dO O)), both packed to 16 bits.  With softcap the
        scores are first t = tanh(S^T scale / softcap) (c is then softcap log2 e), kept in
        the S registers: P is packed from temporaries and recomputed for dS^T, which carries
        the cap's derivative ``max(1 - t^2, 0)`` (0 where the mask made t = -inf)."""
        b, seq, a = self.b, self.seq, self.acc
        k, bm = b.k, BWD_BLOCK_M
        s, dp = a["s"], a["dp"]
        cap = b.cfg.softcap
        st_s = _u32(k, "mad.lo.u32", stage, b.cfg.stage_stride, self.stats)
        ml = None if cap else self._stats(st_s, 0)
        self.wait(1)
        seq.read(s)
        if cap:
            assert b.pre is not None
            for r in s:
                k.ins("mul.f32", r, r, b.pre)
                k.ins("tanh.approx.f32", r, r)
        if b.cfg.causal or b.cfg.window or b.cfg.varlen:
            _mask(b, s, self.krow, q0, self.cw, self.tig2)
        if cap:  # P from temporaries, pair by pair (t stays in s; few registers live)
            for kk, regs in enumerate(b.plan.retile):
                for r, (lo, hi) in enumerate(regs):
                    m_lo, m_hi = self._stat(st_s, 0, lo), self._stat(st_s, 0, hi)
                    SE.cvt_pack_f32(k, b.cfg.dtype, self._p(s[hi], m_hi), self._p(s[lo], m_lo),
                                    target=b.target, into=a["pk"][4 * kk + r])
        else:
            assert ml is not None
            for i in range(bm // 2):
                jj, e = i // 4, i % 2
                k.ins("fma.rn.f32", s[i], s[i], b.c, ml[jj][e])
                k.ins("ex2.approx.ftz.f32", s[i], s[i])
            seq.write(s)
            _pack(b, s, a["pk"])
        dsum = None if cap else self._stats(st_s, 4 * bm)
        self.wait(0)
        seq.read(dp)
        for i in range(bm // 2):
            jj, e = i // 4, i % 2
            t = k.reg("f32")
            if cap:  # the stats read where used: P recomputed, the cap's derivative
                k.ins("sub.f32", t, dp[i], self._stat(st_s, 4 * bm, i))
                f = k.reg("f32")
                k.ins("neg.f32", f, s[i])
                k.ins("fma.rn.f32", f, f, s[i], "0f3F800000")
                k.ins("max.f32", f, f, "0f00000000")
                k.ins("mul.f32", t, t, f)
                k.ins("mul.f32", dp[i], self._p(s[i], self._stat(st_s, 0, i)), t)
            else:
                assert dsum is not None
                k.ins("sub.f32", t, dp[i], dsum[jj][e])
                k.ins("mul.f32", dp[i], s[i], t)
        seq.write(dp)
        _pack(b, dp, a["pds"])

    def _stat(self, st_s: Reg, off: int, i: int) -> Reg:
        """One stat of the column of S^T value ``i`` (``ld.shared.f32``)."""
        k = self.b.k
        jj, e = i // 4, i % 2
        r = k.reg("f32")
        k.ins("ld.shared.f32", r, f"[{st_s}+{off + 32 * jj + 4 * e}]")
        return r

    def _stats(self, st_s: Reg, off: int) -> list[list[Reg]]:
        """This thread's columns of one half of the stage's stats tile (``off`` 0: -lse
        log2 e; ``4 * 64``: the row sums), as [column group][pair element]."""
        k = self.b.k
        out = []
        for j in range(BWD_BLOCK_M // 8):
            pair = [k.reg("f32"), k.reg("f32")]
            k.ins("ld.shared.v2.f32", pair, f"[{st_s}+{off + 32 * j}]")
            out.append(pair)
        return out

    def _p(self, t: Reg, ml: Reg) -> Reg:
        """``exp2(t c + ml)`` in a fresh register."""
        k = self.b.k
        p = k.reg("f32")
        k.ins("fma.rn.f32", p, t, self.b.c, ml)
        k.ins("ex2.approx.ftz.f32", p, p)
        return p

    def issue_dkv(self, sd: dict[str, Reg]) -> None:
        """dV += P^T dO, dK += dS^T Q (A from registers, B the stage's tiles MN-major)."""
        b, seq, plan, a = self.b, self.seq, self.b.plan, self.acc
        seq.fence()
        for acc, a_regs, b0 in ((a["dv"], a["pk"], sd["domn"]), (a["dk"], a["pds"], sd["qmn"])):
            for i in range(BWD_BLOCK_M // 16):
                dlt = plan.tile_mn_descs[i].start_address - plan.tile_mn_descs[0].start_address
                seq.mma(b.cfg.kv_form, acc, a_regs[4 * i:4 * i + 4], _step(b.k, b0, dlt),
                        self.p_true, _RS_IMM)
        seq.commit()
        self.groups.read(self.role)

    def store_ds(self, buf: Reg) -> None:
        """dS^T -> shared memory (rows: KV; columns: Q), visible to the async proxy, then
        both halves (dq_split "n") or this one's ("k") complete; the lead thread first waits
        until the previous block's dQ reduction has read the staging tile."""
        b, cfg = self.b, self.b.cfg
        k = b.k
        if self.ring is not None:
            self.ring.wait(0)
        base = self.st_base
        if cfg.ds_buffers > 1:
            base = _u32(k, "mad.lo.u32", buf, cfg.ds_bytes, self.st_base)
        for q in range(BWD_BLOCK_M // 16):
            addr = base
            if q:
                addr = _u32(k, "xor.b32", base, 32 * q)
            emit_matrix_copy(k, STSM, self.acc["pds"][4 * q:4 * q + 4], addr)
        TE.fence_proxy_async(k)
        if cfg.dq_split == "n":
            bar: Reg | int = 1
            threads = 2 * WARPGROUP
        else:
            bar, threads = _u32(k, "add.u32", self.cw, 1), WARPGROUP
        if self.ring is not None:
            self.ring.sync(bar, threads, target=b.target)
        else:
            SE.named_barrier_sync(k, bar, threads, target=b.target)

    def issue_dq(self, buf: Reg) -> None:
        """dQ_i (+)= dS K: this consumer's columns ("n") or KV rows ("k")."""
        b, cfg, plan, seq = self.b, self.b.cfg, self.b.plan, self.seq
        k = b.k
        dsa = self.desc["dsa"]
        if cfg.ds_buffers > 1:
            bo = _u32(k, "mul.lo.u32", buf, cfg.ds_bytes >> 4)
            bw = k.reg("b64")
            k.ins("cvt.u64.u32", bw, bo)
            dsa = _at(k, dsa, bw)
        seq.fence()
        for i in range(len(plan.ds_descs)):
            da = plan.ds_descs[i].start_address - plan.ds_descs[0].start_address
            db = plan.k_mn_descs[i].start_address - plan.k_mn_descs[0].start_address
            seq.mma(cfg.dq_form, self.acc["dq"], _step(k, dsa, da),
                    _step(k, self.desc["kb"], db), self.p_false if i == 0 else self.p_true,
                    _DQ_IMM)
        seq.commit()
        self.groups.read(b.kv)


def _setup(b: BwdBuild) -> _Consumer:
    """A consumer warpgroup's registers (:class:`_Consumer`), zeroed accumulators."""
    k, cfg, plan, off = b.k, b.cfg, b.plan, b.off
    d, bm = cfg.head_dim, BWD_BLOCK_M
    SE.setmaxnreg(k, "inc", cfg.consumer_regs, target=b.target)
    cw, ltid, warp, lane, g, tig = consumer_thread(k, b.wg, b.tid)
    tig2 = _u32(k, "shl.b32", tig, 1)
    row16 = _u32(k, "mad.lo.u32", warp, 16, g)
    krow = _u32(k, "mad.lo.u32", cw, 64, row16)
    k.ins("add.u32", krow, krow, b.n0)
    is_lead = k.reg("pred")
    k.ins("setp.eq.u32", is_lead, ltid, 0)
    kv_sm = _u32(k, "mad.lo.u32", cw, plan.kv_consumer_offset, b.smem)
    desc = {"ka": _desc_base(k, kv_sm, plan.kv_descs[0], off["k"]),
            "va": _desc_base(k, kv_sm, plan.kv_descs[0], off["v"])}
    tb = cfg.tile_bytes
    for name, dd, region in (("qk", plan.tile_k_descs[0], 0), ("dok", plan.tile_k_descs[0], tb),
                             ("qmn", plan.tile_mn_descs[0], 0),
                             ("domn", plan.tile_mn_descs[0], tb)):
        desc[name] = _desc_base(k, b.smem, dd, off["ring"] + region)
    kq_sm = _u32(k, "mad.lo.u32", cw, plan.dq_consumer_offsets[0], b.smem)
    desc["kb"] = _desc_base(k, kq_sm, plan.k_mn_descs[0], off["k"])
    ds_sm = _u32(k, "mad.lo.u32", cw, plan.dq_consumer_offsets[1], b.smem)
    desc["dsa"] = _desc_base(k, ds_sm, plan.ds_descs[0], off["ds"])
    st_base = _stsm_lane(k, lane, warp, 128)  # this consumer's 64 KV rows of the dS tile
    k.ins("add.u32", st_base, st_base, b.smem)
    k.ins("mad.lo.u32", st_base, cw, 64 * 128, st_base)
    k.ins("add.u32", st_base, st_base, off["ds"])
    stats = _u32(k, "shl.b32", tig, 3)  # columns 8 j + 2 tig (+1) of the stats tile
    k.ins("add.u32", stats, stats, b.smem)
    k.ins("add.u32", stats, stats, off["ring"] + 2 * tb)
    hkv = _u32(k, "div.u32", b.heads, b.group)
    acc = {n: k.regs("f32", w // 2) for n, w in (("s", bm), ("dp", bm), ("dv", d), ("dk", d),
                                                 ("dq", cfg.dq_n))}
    acc.update({n: k.regs("b32", bm // 4) for n in ("pk", "pds")})
    for n in ("s", "dp", "dv", "dk", "dq"):
        for r in acc[n]:
            k.ins("mov.f32", r, "0f00000000")
    p_true = k.reg("pred")
    k.ins("setp.eq.u32", p_true, 0, 0)
    p_false = k.reg("pred")
    k.ins("setp.ne.u32", p_false, 0, 0)
    role = b.ring.consumer("attention_bwd_consumers", arrivals=2)
    c = _Consumer(b, WgmmaSequence(k), role, WgmmaGroups((role, b.kv)), cw, tig2, row16, krow,
                  is_lead, desc, st_base, stats, hkv, acc, p_true, p_false)
    if cfg.dq_reduce == "tma":  # this warpgroup's dQ staging tile and its 32-column boxes
        dq_sm = _u32(k, "mad.lo.u32", cw, cfg.dq_stage_bytes, b.smem)
        k.ins("add.u32", dq_sm, dq_sm, off["dq"])
        c.ring = EpilogueRing.at_offsets(k, "attention_bwd_dq", dq_sm, list(plan.dq_boxes),
                                         is_lead, lead_only=True)
        # the thread's row address and 16-byte chunk (dq_stage_offset), per column group
        y = _u32(k, "shr.u32", tig, 1)
        k.ins("xor.b32", y, y, g)
        k.ins("shl.b32", y, y, 4)
        t1 = _u32(k, "and.b32", tig, 1)
        k.ins("mad.lo.u32", y, t1, 8, y)
        rowb = _u32(k, "mad.lo.u32", row16, 128, dq_sm)
        c.stg = []
        for jj in range(DQ_BOX // 8):
            r = _u32(k, "xor.b32", y, 32 * jj)
            k.ins("add.u32", r, r, rowb)
            c.stg.append(r)
    return c


def bwd_consumer(b: BwdBuild) -> None:
    """Warpgroups 1 and 2: 64 KV rows each (module docstring)."""
    k, cfg = b.k, b.cfg
    k.comment("consumer warpgroups: S^T, dP^T (ss); P^T, dS^T; dV, dK (rs); dQ (ss) -> red")
    c = _setup(b)
    a = c.acc
    b.kv.wait()
    # a CTA whose KV rows no Q block sees (causal, n0 >= Sq) stores dK = dV = 0
    main = k.fresh_label("c_main")
    some = k.reg("pred")
    k.ins("setp.ne.u32", some, b.n_iters, 0)
    k.bra(main, some)
    _store_dkv(b, a["dk"], a["dv"], c.krow, c.tig2, c.hkv)
    k.bra(b.done)
    k.label(main)
    stage = _u32(k, "mov.u32", 0)
    phase = _u32(k, "mov.u32", 0)
    it = _u32(k, "mov.u32", 0)
    buf = _u32(k, "mov.u32", 0)
    head, qi, qend = start_q(b)
    top = k.fresh_label("c_q")
    k.label(top)
    with c.role.loop(), b.kv.loop(), c.ring.tile() if c.ring else contextlib.nullcontext():
        q0 = _u32(k, "mul.lo.u32", qi, BWD_BLOCK_M)
        c.role.begin(at=(stage, phase))
        c.role.wait()
        sd = c.stage_descs(stage)
        c.issue_sdp(sd)
        c.probabilities(stage, q0)
        c.issue_dkv(sd)
        c.store_ds(buf)
        c.issue_dq(buf)
        c.wait(0)
        c.role.release(0, stage=stage, pred=c.is_lead)
        c.seq.read(a["dq"])
        for r in a["dq"]:  # dQ = scale dS K: the scale here, so the host only rounds
            k.ins("mul.f32", r, r, b.scale)
        c.seq.write(a["dq"])
        if c.ring is None:
            _dq_reduce(b, a["dq"], head, q0, c.row16, c.tig2, c.cw)
        else:
            assert c.stg is not None
            _dq_stage(b, c.ring, a["dq"], c.stg, head, q0, c.cw)
        _next_stage(k, stage, phase, cfg.stages)
        advance_q(k, qi, head, b.i0, qend)
        if cfg.ds_buffers > 1:
            k.ins("xor.b32", buf, buf, 1)
        k.ins("add.u32", it, it, 1)
        more = k.reg("pred")
        k.ins("setp.lt.u32", more, it, b.n_iters)
        k.bra(top, more)
    if c.ring is not None:  # the staging tile stays until the last reduction has read it
        c.ring.wait(0)
    c.role.finish()
    c.seq.finish()
    _store_dkv(b, a["dk"], a["dv"], c.krow, c.tig2, c.hkv)
    k.bra(b.done)


def _dq_stage(b: BwdBuild, ring: EpilogueRing, dq: list[Reg], stg: list[Reg], head: Reg,
              q0: Reg, cw: Reg) -> None:
    """The dQ fragment into this warpgroup's staging tile (``st.shared.v2.f32`` at
    :func:`~nvatom.kernels.sm90.attention_bwd_plan.dq_stage_offset`: ``stg[j % 4]`` holds
    the thread's row address with the XOR of column group ``j % 4`` applied), fenced, the
    warpgroup synchronised (barrier ``3 + consumer``), then the lead thread adds each
    32-column box into the f32 accumulator with a TMA reduction (rows past seqlen_q clipped
    by the tensor map) as one bulk group."""
    k, cfg, plan = b.k, b.cfg, b.plan
    n = cfg.dq_n
    for bx in range(len(plan.dq_boxes)):
        ring.write(bx)
    for i in range(0, n // 2, 2):
        j, h = i // 4, (i // 2) % 2
        box, jj = divmod(j, DQ_BOX // 8)
        k.ins("st.shared.v2.f32", f"[{stg[jj]}+{plan.dq_boxes[box] + 1024 * h}]",
              [dq[i], dq[i + 1]])
    ring.fence()
    bar = _u32(k, "add.u32", cw, 3)  # 0: the CTA, 1 and 2: dS
    ring.sync(bar, WARPGROUP, target=b.target)
    with ring.lead_section(label="no_dq_store"):
        qrow = q0 if b.q_start is None else _u32(k, "add.u32", q0, b.q_start)
        col0 = _u32(k, "mul.lo.u32", cw, cfg.head_dim // 2) if cfg.dq_split == "n" else 0
        for bx in range(len(plan.dq_boxes)):
            ring.address(bx)
            x = col0 if bx == 0 else _u32(k, "add.u32", col0, DQ_BOX * bx)
            ring.store(bx, b.tmaps[5], [x, qrow, head, b.tma_batch], commit=False,
                       reduce="add")
        ring.commit()


def _mask(b: BwdBuild, s: list[Reg], krow: Reg, q0: Reg, cw: Reg, tig2: Reg) -> None:
    """``S^T`` of (KV row r, Q row c) outside the mask becomes -inf: causal (top-left
    aligned, as the forward) ``r > c``; with a window, outside ``c - left <= r <= c + right``;
    varlen, every ``r`` past the sequence's keys (the next sequence's rows of the packed k).
    Branched over unless some element of this consumer's 64 x 64 tile is outside."""
    k, cfg = b.k, b.cfg
    first = _u32(k, "mad.lo.u32", cw, 64, b.n0)  # this consumer's first KV row
    last = _u32(k, "add.u32", first, 63)
    need = k.reg("pred")
    if cfg.causal or cfg.window:
        edge = q0 if b.win is None else _u32(k, "add.u32", q0, b.win[1])
        # some kv > q + right: its last row past the first column's edge
        k.ins("setp.gt.u32", need, last, edge)
        if b.win is not None:  # some kv < q - left: its first row before the last column's
            lo = _u32(k, "add.u32", first, b.win[0])
            k.ins("setp.lt.or.u32", need, lo, _u32(k, "add.u32", q0, 63), need)
        if cfg.varlen:
            k.ins("setp.ge.or.u32", need, last, b.sk, need)
    else:  # varlen only: the rows past the sequence's keys
        k.ins("setp.ge.u32", need, last, b.sk)
    skip = k.fresh_label("no_mask")
    k.bra(skip, f"!{need}")
    for h in (0, 1):
        # keep column c (relative to 2 tig) iff c >= kv row - right - q0 - 2 tig
        # (and, with a window, c <= kv row + left - q0 - 2 tig)
        rel = k.reg("s32")
        k.ins("add.u32", rel, krow, 8 * h)
        row_ok = None
        if cfg.varlen:  # this thread's row of the half: a key of the sequence?
            row_ok = k.reg("pred")
            k.ins("setp.lt.u32", row_ok, rel, b.sk)
        k.ins("sub.s32", rel, rel, q0)
        k.ins("sub.s32", rel, rel, tig2)
        lim = rel
        if b.win is not None:
            lim = k.reg("s32")
            k.ins("sub.s32", lim, rel, b.win[1])
            hi = k.reg("s32")
            k.ins("add.s32", hi, rel, b.win[0])
        for i in range(len(s)):
            row, col = accumulator_coord(BWD_BLOCK_M, 0, i)  # thread 0: tig = g = 0
            if row != 8 * h:
                continue
            p = k.reg("pred")
            if cfg.causal or cfg.window:
                k.ins("setp.ge.s32", p, col, lim)
                if b.win is not None:
                    k.ins("setp.le.and.s32", p, col, hi, p)
                if row_ok is not None:
                    k.ins("and.pred", p, p, row_ok)
            else:
                assert row_ok is not None
                p = row_ok
            k.ins("selp.f32", s[i], s[i], _NEG_INF, p)
    k.label(skip)


def _dq_reduce(b: BwdBuild, dq: list[Reg], head: Reg, q0: Reg, row16: Reg, tig2: Reg,
               cw: Reg) -> None:
    """``red.global.add.v2.f32`` of the dQ fragment into the f32 accumulator (B, H, Sq, D) at
    this consumer's columns (``"n"``: ``cw D/2 ..``), Q rows past seqlen_q skipped."""
    k, cfg = b.k, b.cfg
    d, n = cfg.head_dim, cfg.dq_n
    bh = _u32(k, "mad.lo.u32", b.batch, b.heads, head)
    col0 = _u32(k, "mov.u32", tig2)
    if cfg.dq_split == "n":
        k.ins("mad.lo.u32", col0, cw, d // 2, col0)
    for h in (0, 1):
        row = _u32(k, "add.u32", q0, row16)
        if h:
            k.ins("add.u32", row, row, 8)
        inside = k.reg("pred")
        k.ins("setp.lt.u32", inside, row, b.sq)
        skip = k.fresh_label("no_dq_row")
        k.bra(skip, f"!{inside}")
        if b.q_start is None:
            el = _u32(k, "mad.lo.u32", bh, b.sq, row)
        else:  # varlen: the packed (total_q, H, D) accumulator
            el = _u32(k, "add.u32", b.q_start, row)
            k.ins("mad.lo.u32", el, el, b.heads, head)
        k.ins("mad.lo.u32", el, el, d, col0)
        ptr = k.reg("u64")
        k.ins("mad.wide.u32", ptr, el, 4, b.dq_ptr)
        for i in range(0, n // 2, 2):
            rr, cc = accumulator_coord(n, 0, i)
            if rr != 8 * h:
                continue
            k.ins("red.global.add.v2.f32", f"[{ptr}+{4 * cc}]", [dq[i], dq[i + 1]])
        k.label(skip)


def _store_dkv(b: BwdBuild, dk: list[Reg], dv: list[Reg], krow: Reg, tig2: Reg,
               hkv: Reg) -> None:
    """``dK * scale`` and ``dV`` in 16 bits to (B, Hkv, Sk, D), rows past seqlen_k skipped."""
    k, cfg = b.k, b.cfg
    d = cfg.head_dim
    k.comment("epilogue: dK * scale, dV -> 16 bits -> st.global")
    bh = _u32(k, "mad.lo.u32", b.batch, hkv, b.kv_head)
    for h in (0, 1):
        row = _u32(k, "add.u32", krow, 8 * h)
        inside = k.reg("pred")
        k.ins("setp.lt.u32", inside, row, b.sk)
        skip = k.fresh_label("no_kv_row")
        k.bra(skip, f"!{inside}")
        if b.k_start is None:
            el = _u32(k, "mad.lo.u32", bh, b.sk, row)
        else:  # varlen: the packed (total_k, Hkv, D) gradients
            el = _u32(k, "add.u32", b.k_start, row)
            k.ins("mad.lo.u32", el, el, hkv, b.kv_head)
        k.ins("mad.lo.u32", el, el, d, tig2)
        for acc, ptr, scaled in ((dk, b.dk_ptr, True), (dv, b.dv_ptr, False)):
            p = k.reg("u64")
            k.ins("mad.wide.u32", p, el, 2, ptr)
            for i in range(0, d // 2, 2):
                rr, cc = accumulator_coord(d, 0, i)
                if rr != 8 * h:
                    continue
                lo, hi = acc[i], acc[i + 1]
                if scaled:
                    lo = _f(k, "mul.f32", lo, b.scale)
                    hi = _f(k, "mul.f32", hi, b.scale)
                w = SE.cvt_pack_f32(k, cfg.dtype, hi, lo, target=b.target)
                k.ins("st.global.b32", f"[{p}+{2 * cc}]", w)
        k.label(skip)


def _f(k: Kernel, op: str, *args: object) -> Reg:
    r = k.reg("f32")
    k.ins(op, r, *args)
    return r
