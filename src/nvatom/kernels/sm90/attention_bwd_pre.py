"""The SM90 attention backward's preprocess kernel: per query row, ``rowsum(dO * O)`` in f32
(less ``dlse``, the log-sum-exp's gradient, when given), the row of the backward kernel's
stats tensor (``-lse log2(e)`` and that sum; rows past seqlen_q, the padding to whole 64-row
blocks, get -inf and 0), and the row of the f32 dQ accumulator zeroed (FlashAttention's
"preprocess" step; PTX ISA "ld.global.nc", "shfl.sync", "st.global").

``head_dim / 8`` threads share a row, each loading 8 elements of dO and of O with one
16-byte ``ld.global.nc.v4.b32`` apiece (dO and O may be any (B, H, S, D) views with unit
stride along D and 16-byte strides: the strides are parameters), multiplying in f32 and
reducing over the row's lanes with ``shfl.sync.bfly``; 256 threads a block.  Every lane runs
the shuffles (rows past the end are predicated, not exited), so a warp whose rows straddle
seqlen_q or the last row stays converged."""

from __future__ import annotations

import dataclasses

from nvatom.kernels.sm90.attention_bwd_config import BWD_HEAD_DIMS
from nvatom.kernels.sm90.attention_config import _LOG2E, _NEG_INF, DTYPES, AttentionSm90Error
from nvatom.kernels.sm90.emit import u32 as _u32
from nvatom.kernels.sm90.fusion import f32_imm
from nvatom.ptx.builder import Kernel, Module, Reg

__all__ = ["PRE_THREADS", "BwdPreConfig", "build_attention_bwd_pre", "pre_kernel_params",
           "pre_launch_geometry"]

PRE_THREADS = 256
_VEC = 8  # 16-bit elements of one 16-byte load


@dataclasses.dataclass(frozen=True)
class BwdPreConfig:
    """The preprocess kernel of one element type and head dim (``dlse``: subtract a given
    log-sum-exp gradient)."""

    dtype: str = "bf16"
    head_dim: int = 128
    dlse: bool = False
    # packed variable-length batches: sequence b's rows start at cu_seqlens_q[b] (clamped to
    # total_q) of dO, O (one packed batch), the lse and dlse (heads, total_q) and the packed
    # dQ accumulator (total_q, heads, D); its stats rows stay per sequence (B, H, 2, rows)
    varlen: bool = False

    def __post_init__(self) -> None:
        if self.dtype not in DTYPES:
            raise AttentionSm90Error(f"dtype {self.dtype!r} is not one of {', '.join(DTYPES)}")
        if self.head_dim not in BWD_HEAD_DIMS:
            raise AttentionSm90Error(f"head_dim {self.head_dim!r}: the backward takes "
                                     f"{', '.join(map(str, BWD_HEAD_DIMS))}")

    @property
    def lanes(self) -> int:
        """Threads per query row."""
        return self.head_dim // _VEC

    @property
    def rows_per_block(self) -> int:
        return PRE_THREADS // self.lanes

    @property
    def name(self) -> str:
        return (f"nvatom_attn_bwd_pre_{self.dtype}_d{self.head_dim}"
                f"{'_dlse' if self.dlse else ''}{'_varlen' if self.varlen else ''}")


def pre_kernel_params(cfg: BwdPreConfig | None = None) -> tuple[tuple[str, str], ...]:
    """``(name, PTX type)``: dO and O (base, then batch, head and row strides in elements), the
    lse and dlse (contiguous (B, H, Sq) f32; dlse read only by a ``dlse`` kernel), the stats
    (B, H, 2, rows) and the dQ accumulator (B, H, Sq, D), heads, seqlen_q, rows, all rows."""
    return (("do_ptr", "u64"), ("do_sb", "u64"), ("do_sh", "u64"), ("do_ss", "u64"),
            ("o_ptr", "u64"), ("o_sb", "u64"), ("o_sh", "u64"), ("o_ss", "u64"),
            ("lse_ptr", "u64"), ("dlse_ptr", "u64"), ("stats_ptr", "u64"), ("dq_ptr", "u64"),
            ("heads", "u32"), ("seqlen_q", "u32"), ("rows", "u32"), ("total", "u32"),
            *((("cu_seqlens_q", "u64"), ("total_q", "u32")) if cfg is not None and cfg.varlen
              else ()))


def pre_launch_geometry(cfg: BwdPreConfig, batch: int, heads: int, rows: int
                        ) -> tuple[tuple[int, int, int], tuple[int, int, int], int]:
    """(grid, block, dynamic shared memory): one thread group per padded query row."""
    total = batch * heads * rows
    return ((-(-total // cfg.rows_per_block), 1, 1), (PRE_THREADS, 1, 1), 0)


def _row_address(k: Kernel, base: Reg, strides: list[Reg], b: Reg, h: Reg, s: Reg,
                 col: Reg) -> Reg:
    """``base + 2 (b sb + h sh + s ss + col)`` in 64 bits."""
    el = k.reg("u64")
    k.ins("cvt.u64.u32", el, col)
    for idx, st in zip((b, h, s), strides, strict=True):
        w = k.reg("u64")
        k.ins("cvt.u64.u32", w, idx)
        k.ins("mad.lo.u64", el, w, st, el)
    addr = k.reg("u64")
    k.ins("mad.lo.u64", addr, el, 2, base)
    return addr


def _products(k: Kernel, cfg: BwdPreConfig, a: list[Reg], o: list[Reg], acc: Reg) -> None:
    """``acc += sum(a_i o_i)`` over the 8 16-bit elements packed in 4 b32 registers each."""
    for x, y in zip(a, o, strict=True):
        for half in (0, 1):
            fx, fy = k.reg("f32"), k.reg("f32")
            for src, dst in ((x, fx), (y, fy)):
                if cfg.dtype == "bf16":  # a bf16 is the top half of its f32
                    if half:
                        k.ins("and.b32", dst, src, "0xFFFF0000")
                    else:
                        k.ins("shl.b32", dst, src, 16)
                else:
                    hh = k.reg("b16")
                    lo, hi = k.reg("b16"), k.reg("b16")
                    k.ins("mov.b32", [lo, hi], src)
                    k.ins("mov.b16", hh, hi if half else lo)
                    k.ins("cvt.f32.f16", dst, hh)
            k.ins("fma.rn.f32", acc, fx, fy, acc)


def build_attention_bwd_pre(cfg: BwdPreConfig, target_: str = "sm_90a") -> Module:
    """The kernel ``cfg.name(...)`` (:func:`pre_kernel_params`); grid and block by
    :func:`pre_launch_geometry`."""
    mod = Module(target_)
    k = mod.kernel(cfg.name)
    k.reqntid = (PRE_THREADS, 1, 1)
    p = {n: k.param(n, t) for n, t in pre_kernel_params(cfg)}
    v = {n: k.ld_param(p[n]) for n in p}
    for n in ("do_ptr", "o_ptr", "lse_ptr", "dlse_ptr", "stats_ptr", "dq_ptr",
              *(("cu_seqlens_q",) if cfg.varlen else ())):
        k.ins("cvta.to.global.u64", v[n], v[n])
    tid = _u32(k, "mov.u32", "%tid.x")
    t = _u32(k, "rem.u32", tid, cfg.lanes)
    r = _u32(k, "div.u32", tid, cfg.lanes)
    blk = _u32(k, "mov.u32", "%ctaid.x")
    k.ins("mad.lo.u32", r, blk, cfg.rows_per_block, r)
    live = k.reg("pred")  # a row of the tensor (padding included)
    k.ins("setp.lt.u32", live, r, v["total"])
    bh = _u32(k, "div.u32", r, v["rows"])
    s = _u32(k, "rem.u32", r, v["rows"])
    b = _u32(k, "div.u32", bh, v["heads"])
    h = _u32(k, "rem.u32", bh, v["heads"])
    seq_len, start = v["seqlen_q"], None
    if cfg.varlen:  # this sequence's first row and length, clamped to the packed total
        at = k.reg("u64")
        k.ins("mad.wide.u32", at, b, 4, v["cu_seqlens_q"])
        start, end = k.reg("u32"), k.reg("u32")
        k.ins("mov.u32", start, 0)
        k.ins("mov.u32", end, 0)
        k.ins("ld.global.nc.u32", start, f"[{at}]", pred=str(live))
        k.ins("ld.global.nc.u32", end, f"[{at}+4]", pred=str(live))
        k.ins("min.u32", start, start, v["total_q"])
        k.ins("max.u32", end, end, start)
        k.ins("min.u32", end, end, v["total_q"])
        seq_len = _u32(k, "sub.u32", end, start)
    real = k.reg("pred")  # ... and one of the sequence's
    k.ins("setp.lt.and.u32", real, s, seq_len, live)
    grow, bcoord = s, b
    if start is not None:  # dO and O rows: the packed tensors' (one batch)
        grow = _u32(k, "add.u32", start, s)
        bcoord = _u32(k, "mov.u32", 0)
    col = _u32(k, "mul.lo.u32", t, _VEC)
    a, o = k.regs("b32", 4), k.regs("b32", 4)
    for x in (*a, *o):
        k.ins("mov.b32", x, 0)
    skip = k.fresh_label("pad_row")
    k.bra(skip, f"!{real}")
    for regs, base, st in ((a, "do_ptr", "do_"), (o, "o_ptr", "o_")):
        addr = _row_address(k, v[base], [v[st + x] for x in ("sb", "sh", "ss")], bcoord, h,
                            grow, col)
        k.ins("ld.global.nc.v4.b32", regs, f"[{addr}]")
    k.label(skip)
    acc = k.reg("f32")
    k.ins("mov.f32", acc, "0f00000000")
    _products(k, cfg, a, o, acc)
    m = 1
    while m < cfg.lanes:  # the row's lanes: aligned groups of a power of two
        other = k.reg("f32")
        k.ins("shfl.sync.bfly.b32", other, acc, m, 0x1F, "0xffffffff")
        k.ins("add.f32", acc, acc, other)
        m *= 2
    # the dQ accumulator's row: zeros (rows of seqlen_q only)
    if start is None:
        line = _u32(k, "mad.lo.u32", bh, v["seqlen_q"], s)
        lidx = line
    else:  # packed: (total_q, H, D) and the lse's (H, total_q)
        line = _u32(k, "mad.lo.u32", grow, v["heads"], h)
        lidx = _u32(k, "mad.lo.u32", h, v["total_q"], grow)
    el = _u32(k, "mad.lo.u32", line, cfg.head_dim, col)
    dq = k.reg("u64")
    k.ins("mad.wide.u32", dq, el, 4, v["dq_ptr"])
    z = "0f00000000"
    for off in (0, 16):
        k.ins("st.global.v4.f32", f"[{dq}+{off}]", [z, z, z, z], pred=str(real))
    # the stats row, by the row's first lane: (-lse log2 e, rowsum - dlse), or (-inf, 0)
    done = k.fresh_label("done")
    _stats_row(k, cfg, v, t, live, real, bh, s, lidx, acc, done)
    k.label(done)
    k.ins("ret")
    return mod


def _stats_row(k: Kernel, cfg: BwdPreConfig, v: dict[str, Reg], t: Reg, live: Reg, real: Reg,
               bh: Reg, s: Reg, lidx: Reg, acc: Reg, done: str) -> None:
    """The row's first lane stores its stats: ``-lse log2(e)`` and ``rowsum - dlse`` (the lse
    and dlse at ``lidx``), or (-inf, 0) for a pad row, at (``bh``, 0 / 1, ``s``) of the
    (B, H, 2, rows) tensor."""
    lead = k.reg("pred")
    k.ins("setp.eq.and.u32", lead, t, 0, live)
    k.bra(done, f"!{lead}")
    srow = _u32(k, "mul.lo.u32", bh, v["rows"])
    k.ins("shl.b32", srow, srow, 1)
    k.ins("add.u32", srow, srow, s)
    sp = k.reg("u64")
    k.ins("mad.wide.u32", sp, srow, 4, v["stats_ptr"])
    ml, ds = k.reg("f32"), k.reg("f32")
    k.ins("mov.f32", ml, _NEG_INF)
    k.ins("mov.f32", ds, "0f00000000")
    lp = k.reg("u64")
    k.ins("mad.wide.u32", lp, lidx, 4, v["lse_ptr"])
    k.ins("ld.global.nc.f32", ml, f"[{lp}]", pred=str(real))
    k.ins("mul.f32", ml, ml, f32_imm(-_LOG2E), pred=str(real))
    k.ins("mov.f32", ds, acc, pred=str(real))
    if cfg.dlse:
        dl = k.reg("f32")
        k.ins("mov.f32", dl, "0f00000000")
        dp = k.reg("u64")
        k.ins("mad.wide.u32", dp, lidx, 4, v["dlse_ptr"])
        k.ins("ld.global.nc.f32", dl, f"[{dp}]", pred=str(real))
        k.ins("sub.f32", ds, ds, dl)
    k.ins("st.global.f32", f"[{sp}]", ml)
    rows4 = _u32(k, "shl.b32", v["rows"], 2)
    sp2 = k.reg("u64")
    k.ins("cvt.u64.u32", sp2, rows4)
    k.ins("add.u64", sp2, sp2, sp)
    k.ins("st.global.f32", f"[{sp2}]", ds)
