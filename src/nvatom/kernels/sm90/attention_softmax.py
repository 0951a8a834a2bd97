"""The SM90 attention kernel's online softmax on the S accumulator fragment: the causal and
ragged-tile mask, the running row max and sums (4-lane ``shfl.bfly`` reductions,
``ex2.approx`` with the scale folded in) and the packing of P into the ``rs`` A fragment
(PTX ISA "shfl.sync", "ex2", "cvt")."""

from __future__ import annotations

import dataclasses
from typing import Any

from nvatom.atoms.wgmma_fragments import accumulator_coord
from nvatom.kernels.sm90.attention_config import _NEG_INF
from nvatom.kernels.sm90.attention_skeleton import _Build
from nvatom.kernels.sm90.emit import u32 as _u32
from nvatom.ptx import sync_emit as SE
from nvatom.ptx.builder import Kernel, Reg


def _f32(k: Kernel, op: str, *args: Any) -> Reg:
    r = k.reg("f32")
    k.ins(op, r, *args)
    return r


def _f32_tree(k: Kernel, op: str, vals: list[Reg]) -> Reg:
    """``vals`` reduced by the binary f32 ``op`` (``max.f32``, ``add.f32``) as a balanced tree:
    neighbours pair up level by level, an odd one out moves up unchanged."""
    while len(vals) > 1:
        nxt = []
        for i in range(0, len(vals) - 1, 2):
            nxt.append(_f32(k, op, vals[i], vals[i + 1]))
        if len(vals) % 2:
            nxt.append(vals[-1])
        vals = nxt
    return vals[0]


def _quad(k: Kernel, op: str, v: Reg) -> Reg:
    """Reduce ``v`` over the 4 lanes that share a row (lane bits 0 and 1)."""
    for m in (1, 2):
        o = k.reg("f32")
        k.ins("shfl.sync.bfly.b32", o, v, m, 0x1F, "0xffffffff")
        v = _f32(k, op, v, o)
    return v


@dataclasses.dataclass
class _Softmax:
    """A consumer thread's softmax state for its two rows (``half`` 0: row r0, 1: r0 + 8)."""

    m: list[Reg]  # running max of the raw scores
    l: list[Reg]  # per-thread partial row sums  # noqa: E741
    rows: list[Reg]  # absolute row indices (u32)
    tig2: Reg  # 2 * threadID_in_group (s32)


def _half_indices(bn: int, half: int) -> list[int]:
    """The S fragment values of row half ``half`` (thread 0's pattern holds for all: the
    fragment formula's row term depends on the thread only through groupID)."""
    out = [i for i in range(bn // 2) if accumulator_coord(bn, 0, i)[0] == 8 * half]
    return out


def _mask(b: _Build, s: list[Reg], st: _Softmax, n0: Reg) -> None:
    """Set the scores of columns at or past each row's limit to -inf: the limit is Sk (ragged
    last tile) and, causal, row + 1; with a window also row + right + 1, and the columns
    before row - left.  Skipped (branch) when the tile needs no mask.  With
    softcap, first every score becomes ``tanh(scale s / softcap)`` (``tanh.approx.f32``, PTX
    ISA "tanh"; the softmax's factor ``c`` is then ``softcap log2(e)``)."""
    k, cfg = b.k, b.cfg
    bn = cfg.block_n
    if cfg.softcap:
        assert b.pre is not None
        for r in s:
            k.ins("mul.f32", r, r, b.pre)
            k.ins("tanh.approx.f32", r, r)
    lims, lows = [], []
    for h in (0, 1):
        lim = _u32(k, "mov.u32", b.sk)
        if cfg.causal:
            r1 = _u32(k, "add.u32", st.rows[h], 1)
            k.ins("min.u32", lim, lim, r1)
        if b.win is not None:  # the window's right edge: row + right + 1
            r1 = _u32(k, "add.u32", st.rows[h], b.win[1])
            k.ins("add.u32", r1, r1, 1)
            k.ins("min.u32", lim, lim, r1)
            low = k.reg("s32")  # its left edge, row - left, relative to the tile
            k.ins("sub.s32", low, st.rows[h], b.win[0])
            k.ins("sub.s32", low, low, n0)
            lows.append(low)
        rel = k.reg("s32")
        k.ins("sub.s32", rel, lim, n0)
        lims.append(rel)
    need = k.reg("pred")
    k.ins("setp.lt.s32", need, lims[0], bn)  # row 0 has the smaller limit
    if lows:  # ... and row 1 the larger left edge
        k.ins("setp.gt.or.s32", need, lows[1], 0, need)
    skip = k.fresh_label("no_mask")
    k.bra(skip, f"!{need}")
    for h in (0, 1):
        k.ins("sub.s32", lims[h], lims[h], st.tig2)
        if lows:
            k.ins("sub.s32", lows[h], lows[h], st.tig2)
        for i in _half_indices(bn, h):
            _, col = accumulator_coord(bn, 0, i)  # thread 0: tig = 0
            p = k.reg("pred")
            k.ins("setp.lt.s32", p, col, lims[h])
            if lows:
                k.ins("setp.ge.and.s32", p, col, lows[h], p)
            k.ins("selp.f32", s[i], s[i], _NEG_INF, p)
    k.label(skip)


def _softmax(b: _Build, s: list[Reg], st: _Softmax, first: bool) -> list[Reg] | None:
    """Online softmax on the S fragment in place (s <- p); returns each row's rescale factor
    for O (None on the first tile)."""
    k, bn = b.k, b.cfg.block_n
    alphas = []
    for h in (0, 1):
        idx = _half_indices(bn, h)
        mx = _quad(k, "max.f32", _f32_tree(k, "max.f32", [s[i] for i in idx]))
        m_new = _f32(k, "max.f32", st.m[h], mx) if not first else mx
        # a row with every score -inf so far: subtract 0 instead of -inf (no NaN)
        inf = k.reg("pred")
        k.ins("setp.eq.f32", inf, m_new, _NEG_INF)
        mu = k.reg("f32")
        k.ins("selp.f32", mu, "0f00000000", m_new, inf)
        neg = _f32(k, "mul.f32", mu, b.c)
        k.ins("neg.f32", neg, neg)
        if not first:
            a = _f32(k, "fma.rn.f32", st.m[h], b.c, neg)
            k.ins("ex2.approx.ftz.f32", a, a)
            alphas.append(a)
        for i in idx:
            k.ins("fma.rn.f32", s[i], s[i], b.c, neg)
            k.ins("ex2.approx.ftz.f32", s[i], s[i])
        tot = _f32_tree(k, "add.f32", [s[i] for i in idx])
        if first:
            k.ins("mov.f32", st.l[h], tot)
        else:
            k.ins("fma.rn.f32", st.l[h], st.l[h], alphas[h], tot)
        k.ins("mov.f32", st.m[h], m_new)
    return None if first else alphas


def _pack_p(b: _Build, s: list[Reg], p: list[Reg]) -> None:
    """P (16-bit) for the rs WGMMA: register r of K step kk packs the S values
    :func:`p_retile` names."""
    k = b.k
    for kk, regs in enumerate(b.plan.retile):
        for r, (lo, hi) in enumerate(regs):
            k.ins(SE.spell("cvt.pack", type=b.cfg.dtype), p[4 * kk + r], s[hi], s[lo])
