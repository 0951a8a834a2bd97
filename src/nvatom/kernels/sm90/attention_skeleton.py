"""The SM90 attention kernel's skeleton: the state its pieces share (:class:`_Build`, with
the shared-memory address of each mbarrier) and the prologue (parameters, the Q block in
longest-first order, the KV tile count, barrier initialisation) (PTX ISA "mbarrier",
"cvta", "setmaxnreg")."""

from __future__ import annotations

import dataclasses
from typing import Any

from nvatom.atoms.wgmma_fragments import WARPGROUP
from nvatom.kernels.sm90.attention_config import BLOCK_M, AttentionSm90Config
from nvatom.kernels.sm90.attention_plan import AttentionPlan
from nvatom.kernels.sm90.emit import u32 as _u32
from nvatom.kernels.sm90.emit import varlen_rows
from nvatom.kernels.sm90.limits import ENTRY_REGS as _ENTRY_REGS
from nvatom.ptx import sync_emit as SE
from nvatom.ptx import tma_emit as TE
from nvatom.ptx.builder import Kernel, Reg


@dataclasses.dataclass(frozen=True)
class _Build:
    """What the attention kernel's pieces share, fixed once the prologue has run: the kernel
    being built, its configuration and plan, the shared-memory map (byte offsets) and the
    registers every warpgroup reads."""

    k: Kernel
    cfg: AttentionSm90Config
    plan: AttentionPlan
    target: str
    off_q: int
    off_k: int
    off_v: int
    off_bar: int
    smem: Reg
    tid: Reg
    wg: Reg
    tmaps: tuple[Reg, Reg, Reg, Reg]  # Q, K, V, O
    m0: Reg  # first Q row of the CTA
    head: Reg
    kv_head: Reg
    batch: Reg
    sq: Reg
    sk: Reg
    heads: Reg
    n_tiles: Reg
    o_ptr: Reg
    lse_ptr: Reg
    c: Reg  # scale * log2(e)
    done: str
    rings: tuple[Any, Any] | None = None  # the K and V rings (attention_rings.kv_rings)
    q: Any = None  # the Q tile (attention_rings.q_buffer)
    pre: Reg | None = None  # softcap: scale / softcap (c is then softcap * log2(e))
    kv0: Reg | None = None  # window: the first KV row of the CTA's walk (a tile multiple)
    win: tuple[Reg, Reg] | None = None  # window: (left, right)
    # varlen: the sequence's first rows in the packed q and k, the packed lengths; the
    # tensor maps' batch coordinate (0: one packed batch)
    q_start: Reg | None = None
    k_start: Reg | None = None
    total_q: Reg | None = None
    coord_batch: Reg | None = None

    @property
    def tma_batch(self) -> Reg:
        """The batch coordinate of the tensor maps (varlen: 0)."""
        return self.batch if self.coord_batch is None else self.coord_batch

    def bar(self, which: str, stage: Reg | int = 0) -> Reg:
        """Shared address of barrier ``q_full`` / ``k_full[s]`` / ``v_full[s]`` / ``empty[s]``
        (V's, or both K and V without ``split_release``) / ``k_empty[s]``."""
        st = self.cfg.stages
        base = {"q": 0, "k": 1, "v": 1 + st, "e": 1 + 2 * st, "ek": 1 + 3 * st}[which]
        off = self.off_bar + 8 * base
        if isinstance(stage, int):
            return _u32(self.k, "add.u32", self.smem, off + 8 * stage)
        r = _u32(self.k, "mad.lo.u32", stage, 8, off)
        self.k.ins("add.u32", r, r, self.smem)
        return r


def _prologue(k: Kernel, cfg: AttentionSm90Config, plan: AttentionPlan, target_: str) -> _Build:
    k.reqntid = (3 * WARPGROUP, 1, 1)
    k.minnctapersm = 1
    k.maxnreg = _ENTRY_REGS
    pq, pk, pv, pom = (k.byte_param(n, TE.TENSORMAP_BYTES, TE.GEMM_TENSORMAP_ALIGN)
                       for n in ("tmap_q", "tmap_k", "tmap_v", "tmap_o"))
    po, pl = k.param("o_ptr", "u64"), k.param("lse_ptr", "u64")
    psq, psk, ph, pg = (k.param(n, "u32") for n in ("seqlen_q", "seqlen_k", "heads", "group"))
    pc = k.param("scale_log2", "f32")
    ppre = k.param("softcap_pre", "f32") if cfg.softcap else None
    pwin = (k.param("win_left", "u32"), k.param("win_right", "u32")) if cfg.window else None
    pvar = ((k.param("cu_seqlens_q", "u64"), k.param("cu_seqlens_k", "u64"),
             k.param("total_q", "u32"), k.param("total_k", "u32")) if cfg.varlen else None)
    dsm = k.dynamic_shared("smem", align=1024)
    off_q = 0
    off_k = cfg.q_bytes
    off_v = off_k + cfg.stages * cfg.kv_bytes
    off_bar = off_v + cfg.stages * cfg.kv_bytes
    smem = _u32(k, "mov.u32", dsm)
    tid = _u32(k, "mov.u32", "%tid.x")
    wg = _u32(k, "shr.u32", tid, 7)
    sq, sk, heads, group = (k.ld_param(p) for p in (psq, psk, ph, pg))
    c = k.ld_param(pc)
    pre = k.ld_param(ppre) if ppre is not None else None
    o_ptr, lse_ptr = k.ld_param(po), k.ld_param(pl)
    k.ins("cvta.to.global.u64", o_ptr, o_ptr)
    k.ins("cvta.to.global.u64", lse_ptr, lse_ptr)
    tm = []
    for p in (pq, pk, pv, pom):
        g = k.reg("u64")
        k.ins("cvta.param.u64", g, k.param_address(p))
        tm.append(g)
    # Q block: the longest (causal) blocks first
    mblk = _u32(k, "mov.u32", "%ctaid.x")
    nblk = _u32(k, "mov.u32", "%nctaid.x")
    k.ins("sub.u32", mblk, nblk, mblk)
    k.ins("sub.u32", mblk, mblk, 1)
    m0 = _u32(k, "mul.lo.u32", mblk, BLOCK_M)
    head = _u32(k, "mov.u32", "%ctaid.y")
    batch = _u32(k, "mov.u32", "%ctaid.z")
    kv_head = _u32(k, "div.u32", head, group)
    var: dict[str, Reg] = {}
    if pvar is not None:  # this sequence's rows and lengths; a CTA past them exits
        var = varlen_rows(k, pvar, batch)
        sq, sk = var["sq"], var["sk"]
        out = k.reg("pred")
        k.ins("setp.ge.u32", out, m0, sq)
        k.ins("ret", pred=str(out))
    # KV tiles: ceil(min(Sk, m0 + 128) / BN) when causal, else ceil(Sk / BN); with a window
    # ceil(min(Sk, m0 + 128 + right) / BN) less the tiles left of row m0 - left
    lim = _u32(k, "mov.u32", sk)
    if cfg.causal:
        end = _u32(k, "add.u32", m0, BLOCK_M)
        k.ins("min.u32", lim, lim, end)
    win = kv0 = None
    if pwin is not None:
        win = (k.ld_param(pwin[0]), k.ld_param(pwin[1]))
        end = _u32(k, "add.u32", m0, BLOCK_M)
        k.ins("add.u32", end, end, win[1])
        k.ins("min.u32", lim, lim, end)
        lo = _u32(k, "max.u32", m0, win[0])  # max(m0 - left, 0) without wrapping
        k.ins("sub.u32", lo, lo, win[0])
        t0 = _u32(k, "div.u32", lo, cfg.block_n)
        kv0 = _u32(k, "mul.lo.u32", t0, cfg.block_n)
    n_tiles = _u32(k, "add.u32", lim, cfg.block_n - 1)
    k.ins("div.u32", n_tiles, n_tiles, cfg.block_n)
    if kv0 is not None:
        if pvar is not None:  # a sequence whose rows outrun its keys' window: no tile, not
            k.ins("max.u32", n_tiles, n_tiles, t0)  # a wrapped count (the host can't check)
        k.ins("sub.u32", n_tiles, n_tiles, t0)

    b = _Build(k, cfg, plan, target_, off_q, off_k, off_v, off_bar, smem, tid, wg,
               (tm[0], tm[1], tm[2], tm[3]), m0, head, kv_head, batch, sq, sk, heads, n_tiles,
               o_ptr, lse_ptr, c, k.fresh_label("exit"), pre=pre, kv0=kv0, win=win,
               q_start=var.get("q_start"), k_start=var.get("k_start"),
               total_q=var.get("total_q"), coord_batch=var.get("zero"))
    k.comment("barriers: q_full (1 + TMA bytes), k_full[s], v_full[s] (1 + bytes), empty[s] (2)")
    p0 = k.reg("pred")
    k.ins("setp.eq.u32", p0, tid, 0)
    skip = k.fresh_label("init_done")
    k.bra(skip, f"!{p0}")
    TE.mbarrier_init(k, b.bar("q"), 1)
    for s in range(cfg.stages):
        TE.mbarrier_init(k, b.bar("k", s), 1)
        TE.mbarrier_init(k, b.bar("v", s), 1)
        TE.mbarrier_init(k, b.bar("e", s), 2)
        TE.mbarrier_init(k, b.bar("ek", s), 2)
    TE.fence_mbarrier_init(k)
    for t in tm if cfg.epilogue == "tma" else tm[:3]:
        TE.prefetch_tensormap(k, t)
    k.label(skip)
    SE.named_barrier_sync(k, 0, 3 * WARPGROUP, target=target_)
    return b

