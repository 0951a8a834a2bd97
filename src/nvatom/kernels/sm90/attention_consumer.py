"""The SM90 attention kernel's consumer warpgroups: per KV tile ``S = Q K^T`` (WGMMA ss),
the online softmax and ``O += P V`` (WGMMA rs), with FA3's intra-warpgroup overlap and the
ping-pong order between the two warpgroups, then the epilogue (PTX ISA "wgmma.mma_async",
"wgmma.wait_group", "bar.sync", "bar.arrive")."""

from __future__ import annotations

from nvatom.atoms.wgmma_fragments import WARPGROUP, accumulator_coord
from nvatom.kernels.sm90.attention_epilogue import _store
from nvatom.kernels.sm90.attention_skeleton import _Build
from nvatom.kernels.sm90.attention_softmax import _mask, _pack_p, _Softmax, _softmax
from nvatom.kernels.sm90.emit import desc_base as _desc_base
from nvatom.kernels.sm90.emit import next_stage as _next_stage
from nvatom.kernels.sm90.emit import u32 as _u32
from nvatom.ptx import sync_emit as SE
from nvatom.ptx import tma_emit as TE
from nvatom.ptx.builder import Reg
from nvatom.ptx.wgmma_emit import WgmmaSequence


def _consumer(b: _Build) -> None:
    """Warpgroups 1 and 2: 64 Q rows each; S = Q K^T, online softmax, O += P V per KV tile."""
    k, cfg, plan = b.k, b.cfg, b.plan
    bn, d = cfg.block_n, cfg.head_dim
    k.comment("consumer warpgroups: S = Q K^T (ss), softmax, O += P V (rs)")
    SE.setmaxnreg(k, "inc", cfg.consumer_regs, target=b.target)
    cw = _u32(k, "sub.u32", b.wg, 1)
    ltid = _u32(k, "and.b32", b.tid, WARPGROUP - 1)
    warp = _u32(k, "shr.u32", ltid, 5)
    lane = _u32(k, "and.b32", ltid, 31)
    g = _u32(k, "shr.u32", lane, 2)
    tig = _u32(k, "and.b32", lane, 3)
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
    s_imm = (1, 1, 0, 0)
    o_imm = (1, 1, 1)  # scale-a, scale-b, transpose B (V is MN-major)
    seq = WgmmaSequence(k)

    def descs(base: list[Reg], stage: Reg) -> list[Reg]:
        off = _u32(k, "mul.lo.u32", stage, cfg.kv_bytes >> 4)
        w = k.reg("b64")
        k.ins("cvt.u64.u32", w, off)
        out = []
        for dsc in base:
            r = k.reg("b64")
            k.ins("add.s64", r, dsc, w)
            out.append(r)
        return out

    def issue_s(stage: Reg, phase: Reg) -> None:
        TE.mbarrier_wait_parity(k, b.bar("k", stage), phase)
        kd = descs(k_desc0, stage)
        seq.fence()
        for i in range(d // 16):
            seq.mma(cfg.s_form, s, q_desc[i], kd[i], p_false if i == 0 else p_true, s_imm)
        seq.commit()

    def issue_o(stage: Reg, phase: Reg) -> None:
        TE.mbarrier_wait_parity(k, b.bar("v", stage), phase)
        vd = descs(v_desc0, stage)
        seq.fence()  # P and O were written by ordinary instructions (and a branch since)
        for i in range(bn // 16):
            seq.mma(cfg.o_form, o, p[4 * i:4 * i + 4], vd[i], p_true, o_imm)
        seq.commit()

    def release(stage: Reg, which: str = "e") -> None:
        if which == "ek" and not cfg.split_release:
            return
        skip = k.fresh_label("no_release")
        k.bra(skip, f"!{is_lead}")
        TE.mbarrier_arrive(k, b.bar(which, stage))
        k.label(skip)

    # ping-pong: a consumer issues its WGMMAs only after the other one has issued its own
    # (named barriers 1 and 2: "consumer c may issue"); consumer 1 lets consumer 0 go first.
    my_bar = _u32(k, "add.u32", cw, 1)
    other_bar = _u32(k, "sub.u32", 2, cw)
    if cfg.pingpong:
        p1 = k.reg("pred")
        k.ins("setp.eq.u32", p1, cw, 1)
        sk_ = k.fresh_label("pp_start")
        k.bra(sk_, f"!{p1}")
        SE.named_barrier_arrive(k, 1, 2 * WARPGROUP, target=b.target)
        k.label(sk_)

    def turn_begin() -> None:
        if cfg.pingpong:
            SE.named_barrier_sync(k, my_bar, 2 * WARPGROUP, target=b.target)

    def turn_end(last: bool = False) -> None:
        if not cfg.pingpong:
            return
        skip = None
        if last:  # consumer 1's final hand-off has no taker (it handed off first)
            skip = k.fresh_label("pp_last")
            pz = k.reg("pred")
            k.ins("setp.eq.u32", pz, cw, 1)
            k.bra(skip, pz)
        SE.named_barrier_arrive(k, other_bar, 2 * WARPGROUP, target=b.target)
        if skip:
            k.label(skip)

    def rescale(alphas: list[Reg]) -> None:
        for i in range(d // 2):
            row_half = accumulator_coord(d, 0, i)[0] // 8
            k.ins("mul.f32", o[i], o[i], alphas[row_half])

    TE.mbarrier_wait_parity(k, b.bar("q"), 0)
    stage = _u32(k, "mov.u32", 0)
    phase = _u32(k, "mov.u32", 0)
    # first tile: S_0, softmax, P_0
    turn_begin()
    issue_s(stage, phase)
    turn_end()
    seq.wait(0)
    release(stage, "ek")
    seq.read(s)
    zero = _u32(k, "mov.u32", 0)
    _mask(b, s, st, zero)
    _softmax(b, s, st, first=True)
    _pack_p(b, s, p)
    j = _u32(k, "mov.u32", 1)
    tail = k.fresh_label("c_tail")
    done_loop = k.reg("pred")
    k.ins("setp.ge.u32", done_loop, j, b.n_tiles)
    k.bra(tail, done_loop)
    top = k.fresh_label("c_kv")
    k.label(top)
    nstage = _u32(k, "mov.u32", stage)
    nphase = _u32(k, "mov.u32", phase)
    _next_stage(k, nstage, nphase, cfg.stages)
    n0 = _u32(k, "mul.lo.u32", j, bn)
    if cfg.overlap:
        turn_begin()
        issue_s(nstage, nphase)  # S_{j} while P_{j-1} V_{j-1} runs
        issue_o(stage, phase)
        turn_end()
        seq.wait(1)
        release(nstage, "ek")
        seq.read(s)
        _mask(b, s, st, n0)
        alphas = _softmax(b, s, st, first=False)
        seq.wait(0)
        release(stage)
    else:
        issue_o(stage, phase)
        seq.wait(0)
        release(stage)
        issue_s(nstage, nphase)
        seq.wait(0)
        release(nstage, "ek")
        seq.read(s)
        _mask(b, s, st, n0)
        alphas = _softmax(b, s, st, first=False)
    assert alphas is not None
    seq.write(o)
    rescale(alphas)
    _pack_p(b, s, p)
    k.ins("mov.u32", stage, nstage)
    k.ins("mov.u32", phase, nphase)
    k.ins("add.u32", j, j, 1)
    more = k.reg("pred")
    k.ins("setp.lt.u32", more, j, b.n_tiles)
    k.bra(top, more)
    k.label(tail)
    turn_begin()
    issue_o(stage, phase)
    turn_end(last=True)
    seq.wait(0)
    release(stage)
    seq.read(o)
    seq.finish()
    _store(b, o, st, lane, cw, q_sm, ltid, warp)
    k.bra(b.done)
