"""The SM90 attention kernel's epilogue: the log-sum-exp and ``O / l`` in 16 bits, stored
per thread (``st.global``) or through ``stmatrix.x4`` into the Q tile and a TMA store (PTX
ISA "stmatrix", "fence.proxy", "cp.async.bulk.tensor")."""

from __future__ import annotations

import struct

from nvatom.atoms.wgmma_fragments import WARPGROUP, accumulator_coord
from nvatom.kernels.pipeline import EpilogueRing
from nvatom.kernels.sm90.attention_config import _CHUNK, _LN2
from nvatom.kernels.sm90.attention_plan import STSM
from nvatom.kernels.sm90.attention_skeleton import _Build
from nvatom.kernels.sm90.attention_softmax import _f32, _quad, _Softmax
from nvatom.kernels.sm90.emit import stmatrix_lane_offset as _stsm_lane
from nvatom.kernels.sm90.emit import u32 as _u32
from nvatom.ptx import sync_emit as SE
from nvatom.ptx.builder import Reg
from nvatom.ptx.copy_emit import emit_matrix_copy


def _store(b: _Build, o: list[Reg], st: _Softmax, lane: Reg, cw: Reg, q_sm: Reg, ltid: Reg,
           warp: Reg) -> None:
    """The log-sum-exp (f32, rows past seqlen_q skipped) and ``O / l`` in 16 bits: through
    shared memory and a TMA store (:func:`_store_tma`) or per-thread global stores."""
    k, cfg = b.k, b.cfg
    d = cfg.head_dim
    k.comment(f"epilogue ({cfg.epilogue}): O / l -> 16 bits; lse = (m c + log2 l) ln 2")
    inv = []
    lse = []
    for h in (0, 1):
        tot = _quad(k, "add.f32", st.l[h])
        r = _f32(k, "rcp.approx.ftz.f32", tot)
        if cfg.varlen:  # a row without keys (a sequence with none): O = 0, lse = -inf
            empty = k.reg("pred")
            k.ins("setp.eq.f32", empty, tot, "0f00000000")
            k.ins("selp.f32", r, "0f00000000", r, empty)
        inv.append(r)
        lg = _f32(k, "lg2.approx.ftz.f32", tot)
        k.ins("fma.rn.f32", lg, st.m[h], b.c, lg)
        k.ins("mul.f32", lg, lg, f"0f{_f32_hex(_LN2)}")
        lse.append(lg)
    tig = _u32(k, "and.b32", lane, 3)
    bh = _u32(k, "mad.lo.u32", b.batch, b.heads, b.head)
    direct = cfg.epilogue == "direct"
    for h in (0, 1):
        row = st.rows[h]
        inside = k.reg("pred")
        k.ins("setp.lt.u32", inside, row, b.sq)
        skip = k.fresh_label("no_row")
        k.bra(skip, f"!{inside}")
        if b.q_start is None:
            line = _u32(k, "mad.lo.u32", bh, b.sq, row)  # (b * H + h) * Sq + row
            lidx = line
        else:  # varlen: O (total_q, H, D), lse (H, total_q)
            assert b.total_q is not None
            grow = _u32(k, "add.u32", b.q_start, row)
            line = _u32(k, "mad.lo.u32", grow, b.heads, b.head)
            lidx = _u32(k, "mad.lo.u32", b.head, b.total_q, grow)
        lp = k.reg("u64")
        k.ins("mad.wide.u32", lp, lidx, 4, b.lse_ptr)
        lead = k.reg("pred")
        k.ins("setp.eq.u32", lead, tig, 0)
        k.ins("st.global.f32", f"[{lp}]", lse[h], pred=str(lead))
        if direct:
            col = _u32(k, "shl.b32", tig, 1)
            el = _u32(k, "mad.lo.u32", line, d, col)
            op = k.reg("u64")
            k.ins("mad.wide.u32", op, el, 2, b.o_ptr)
            for i in range(d // 2):
                rr, cc = accumulator_coord(d, 0, i)
                if rr != 8 * h or i % 2:
                    continue
                lo = _f32(k, "mul.f32", o[i], inv[h])
                hi = _f32(k, "mul.f32", o[i + 1], inv[h])
                w = k.reg("b32")
                k.ins(SE.spell("cvt.pack", type=cfg.dtype), w, hi, lo)
                k.ins("st.global.b32", f"[{op}+{2 * cc}]", w)
        k.label(skip)
    if not direct:
        _store_tma(b, o, inv, cw, q_sm, ltid, lane, warp)


def _store_tma(b: _Build, o: list[Reg], inv: list[Reg], cw: Reg, q_sm: Reg, ltid: Reg,
               lane: Reg, warp: Reg) -> None:
    """``O / l`` -> 16-bit pairs -> ``stmatrix.x4`` (registers by :func:`o_retile`, row
    addresses by :func:`stsm_lane_offset`, both checked against the layouts) into this
    consumer's 64-row half of the Q tile (its S MMAs have all retired; no other reader) ->
    ``fence.proxy.async`` -> named barrier ``3 + consumer`` -> one thread issues a TMA store
    per 64-column chunk (rows past seqlen_q clipped by the tensor map's bounds; a half
    entirely past it is skipped) and waits for their shared-memory reads before exiting."""
    k, cfg, plan = b.k, b.cfg, b.plan
    d = cfg.head_dim
    k.comment("O -> stmatrix.x4 into this consumer's half of the Q tile (SW128) -> TMA store")
    base = _stsm_lane(k, lane, warp, 128)  # the lanes' row addresses
    k.ins("add.u32", base, base, q_sm)
    if b.off_q:
        k.ins("add.u32", base, base, b.off_q)
    per_chunk = _CHUNK // 16
    b.q.write()  # O overwrites Q: only after every S group reading it retired
    # the chunks of this half of the Q tile: staging buffers written once, stored as one
    # bulk group by the lead thread (of a half not entirely past seqlen_q)
    ring = EpilogueRing.at_offsets(k, "attention_o", q_sm,
                                   [b.off_q + plan.q_boxes[c] for c in range(cfg.chunks)],
                                   None, lead_only=True)
    for blk, regs in enumerate(plan.o_retile):
        c, q = divmod(blk, per_chunk)
        if not q:
            ring.write(c)
        vals = []
        for lo, hi in regs:
            half = accumulator_coord(d, 0, lo)[0] // 8
            flo = _f32(k, "mul.f32", o[lo], inv[half])
            fhi = _f32(k, "mul.f32", o[hi], inv[half])
            vals.append(SE.cvt_pack_f32(k, cfg.dtype, fhi, flo, target=b.target))
        addr = _u32(k, "add.u32", base, plan.q_boxes[c])
        if q:
            k.ins("xor.b32", addr, addr, 32 * q)
        emit_matrix_copy(k, STSM, vals, addr)
    ring.fence()
    bar = _u32(k, "add.u32", cw, 3)  # 0: the CTA, 1 and 2: ping-pong turns
    ring.sync(bar, WARPGROUP, target=b.target)
    r0 = _u32(k, "mad.lo.u32", cw, 64, b.m0)
    go = k.reg("pred")
    k.ins("setp.lt.u32", go, r0, b.sq)
    k.ins("setp.eq.and.u32", go, ltid, 0, go)
    with ring.lead_section(go, "no_o_store"):
        for c in range(cfg.chunks):
            ring.address(c)
            ring.store(c, b.tmaps[3], [c * _CHUNK, r0, b.head, b.batch], commit=False)
        ring.commit()
        ring.wait(0)  # the tile is read before the CTA's smem goes


def _f32_hex(x: float) -> str:
    return struct.pack(">f", x).hex().upper()
