"""The SM90 attention backward's skeleton: the state its pieces share (:class:`BwdBuild`, with
the shared-memory address of each mbarrier), the prologue (parameters, the CTA's KV block and
Q-block range, barrier initialisation) and the producer warpgroup (PTX ISA "mbarrier",
"cp.async.bulk.tensor", "setmaxnreg")."""

from __future__ import annotations

import dataclasses
from typing import Any

from nvatom.atoms.wgmma_fragments import WARPGROUP
from nvatom.kernels.pipeline import Pipeline, PipelineSpec, SingleBuffer
from nvatom.kernels.sm90.attention_bwd_config import BWD_BLOCK_M, AttentionBwdSm90Config
from nvatom.kernels.sm90.attention_bwd_plan import AttentionBwdPlan, attention_bwd_plan
from nvatom.kernels.sm90.attention_config import _CHUNK
from nvatom.kernels.sm90.emit import next_stage as _next_stage
from nvatom.kernels.sm90.emit import producer_thread, varlen_rows
from nvatom.kernels.sm90.emit import u32 as _u32
from nvatom.kernels.sm90.limits import ENTRY_REGS as _ENTRY_REGS
from nvatom.ptx import sync_emit as SE
from nvatom.ptx import tma_emit as TE
from nvatom.ptx.builder import Kernel, Reg

__all__ = ["BwdBuild", "advance_q", "bwd_kernel_params", "bwd_producer", "bwd_prologue",
           "start_q"]


@dataclasses.dataclass(frozen=True)
class BwdBuild:
    """What the backward kernel's pieces share once the prologue has run."""

    k: Kernel
    cfg: AttentionBwdSm90Config
    plan: AttentionBwdPlan
    target: str
    off: dict[str, int]
    smem: Reg
    tid: Reg
    wg: Reg
    tmaps: tuple[Reg, ...]  # Q, K, V, dO, stats, the dQ accumulator
    dq_ptr: Reg
    dk_ptr: Reg
    dv_ptr: Reg
    sq: Reg
    sk: Reg
    heads: Reg
    group: Reg
    c: Reg  # scale * log2(e) (softcap: softcap * log2(e))
    scale: Reg
    n0: Reg  # the CTA's first KV row
    kv_head: Reg
    batch: Reg
    i0: Reg  # the first Q block
    nq: Reg  # Q blocks per query head
    n_iters: Reg  # group * nq
    done: str
    ring: Pipeline
    kv: SingleBuffer
    win: tuple[Reg, Reg] | None = None  # window: (left, right)
    pre: Reg | None = None  # softcap: scale / softcap
    # varlen: the sequence's first rows in the packed q and k, the packed q length, the
    # packed tensor maps' batch coordinate (0)
    q_start: Reg | None = None
    k_start: Reg | None = None
    total_q: Reg | None = None
    coord_batch: Reg | None = None

    @property
    def tma_batch(self) -> Reg:
        """The batch coordinate of the Q, K, V, dO and dQ tensor maps (varlen: 0; the stats
        stay per sequence)."""
        return self.batch if self.coord_batch is None else self.coord_batch

    def bar(self, which: str, stage: Reg | int = 0) -> Reg:
        """Shared address of ``kv_full``, ``full[s]`` or ``empty[s]``."""
        base = {"kv": 0, "full": 1, "empty": 1 + self.cfg.stages}[which]
        off = self.off["bar"] + 8 * base
        if isinstance(stage, int):
            return _u32(self.k, "add.u32", self.smem, off + 8 * stage)
        r = _u32(self.k, "mad.lo.u32", stage, 8, off)
        self.k.ins("add.u32", r, r, self.smem)
        return r


def bwd_kernel_params(cfg: AttentionBwdSm90Config | None = None
                      ) -> tuple[tuple[str, str], ...]:
    """The kernel's parameters as ``(name, PTX type)`` (then ``softcap_pre`` for a softcap
    configuration, ``win_left``, ``win_right`` for a window one, the offsets and totals for
    varlen)."""
    tmap = TE.tensormap_param_type(TE.GEMM_TENSORMAP_ALIGN)
    return (*((n, tmap) for n in ("tmap_q", "tmap_k", "tmap_v", "tmap_do", "tmap_stats",
                                  "tmap_dq")),
            ("dq_ptr", "u64"), ("dk_ptr", "u64"), ("dv_ptr", "u64"),
            ("seqlen_q", "u32"), ("seqlen_k", "u32"), ("heads", "u32"), ("group", "u32"),
            ("scale_log2", "f32"), ("scale", "f32"),
            *((("softcap_pre", "f32"),) if cfg is not None and cfg.softcap else ()),
            *((("win_left", "u32"), ("win_right", "u32")) if cfg is not None and cfg.window
              else ()),
            *((("cu_seqlens_q", "u64"), ("cu_seqlens_k", "u64"), ("total_q", "u32"),
               ("total_k", "u32")) if cfg is not None and cfg.varlen else ()))


class _RingBarriers:
    """The Q / dO / stats ring's barrier operations at the kernel's ``full[s]`` and
    ``empty[s]`` (the producer's phase is the consumers': it waits for the opposite one)."""

    def __init__(self, b: Any) -> None:
        self.b = b

    def acquire(self, pipe: Pipeline, stage: Reg, phase: Reg) -> Reg:
        k = pipe.k
        flip = _u32(k, "xor.b32", phase, 1)
        TE.mbarrier_wait_parity(k, self.b().bar("empty", stage), flip)
        full = self.b().bar("full", stage)
        TE.mbarrier_arrive_expect_tx(k, full, pipe.spec.tx_bytes)
        return full

    def wait(self, pipe: Pipeline, stage: Reg, phase: Reg) -> None:
        TE.mbarrier_wait_parity(pipe.k, self.b().bar("full", stage), phase)

    def release(self, pipe: Pipeline, stage: Reg, pred: Reg | None) -> None:
        k = pipe.k
        assert pred is not None
        skip = k.fresh_label("no_release")
        k.bra(skip, f"!{pred}")
        TE.mbarrier_arrive(k, self.b().bar("empty", stage))
        k.label(skip)


def bwd_prologue(k: Kernel, cfg: AttentionBwdSm90Config, target_: str) -> BwdBuild:
    k.reqntid = (3 * WARPGROUP, 1, 1)
    k.minnctapersm = 1
    k.maxnreg = _ENTRY_REGS
    params = bwd_kernel_params()
    tm_params = [k.byte_param(n, TE.TENSORMAP_BYTES, TE.GEMM_TENSORMAP_ALIGN)
                 for n, _ in params[:6]]
    pdq, pdk, pdv = (k.param(n, "u64") for n in ("dq_ptr", "dk_ptr", "dv_ptr"))
    psq, psk, ph, pg = (k.param(n, "u32") for n in ("seqlen_q", "seqlen_k", "heads", "group"))
    pc, ps = k.param("scale_log2", "f32"), k.param("scale", "f32")
    ppre = k.param("softcap_pre", "f32") if cfg.softcap else None
    pwin = (k.param("win_left", "u32"), k.param("win_right", "u32")) if cfg.window else None
    pvar = ((k.param("cu_seqlens_q", "u64"), k.param("cu_seqlens_k", "u64"),
             k.param("total_q", "u32"), k.param("total_k", "u32")) if cfg.varlen else None)
    dsm = k.dynamic_shared("smem", align=1024)
    smem = _u32(k, "mov.u32", dsm)
    tid = _u32(k, "mov.u32", "%tid.x")
    wg = _u32(k, "shr.u32", tid, 7)
    sq, sk, heads, group = (k.ld_param(p) for p in (psq, psk, ph, pg))
    c, scale = k.ld_param(pc), k.ld_param(ps)
    pre = k.ld_param(ppre) if ppre is not None else None
    ptrs = []
    for p in (pdq, pdk, pdv):
        r = k.ld_param(p)
        k.ins("cvta.to.global.u64", r, r)
        ptrs.append(r)
    tm = []
    for p in tm_params:
        g = k.reg("u64")
        k.ins("cvta.param.u64", g, k.param_address(p))
        tm.append(g)
    n0 = _u32(k, "mov.u32", "%ctaid.x")
    k.ins("mul.lo.u32", n0, n0, cfg.block_n)
    kv_head = _u32(k, "mov.u32", "%ctaid.y")
    batch = _u32(k, "mov.u32", "%ctaid.z")
    var: dict[str, Reg] = {}
    if pvar is not None:  # this sequence's rows and lengths; a CTA past its keys exits
        var = varlen_rows(k, pvar, batch)
        sq, sk = var["sq"], var["sk"]
        out = k.reg("pred")
        k.ins("setp.ge.u32", out, n0, sk)
        k.ins("ret", pred=str(out))
    # Q blocks: ceil(Sq / 64) of them, from the block of row n0 when causal (rows above
    # it see none of the CTA's keys); none when n0 >= Sq (dK = dV = 0 still stored)
    nqb = _u32(k, "add.u32", sq, BWD_BLOCK_M - 1)
    k.ins("div.u32", nqb, nqb, BWD_BLOCK_M)
    win = None
    if pwin is not None:  # rows n0 - right .. n0 + 127 + left see the CTA's keys
        win = (k.ld_param(pwin[0]), k.ld_param(pwin[1]))
        lo = _u32(k, "max.u32", n0, win[1])  # max(n0 - right, 0) without wrapping
        k.ins("sub.u32", lo, lo, win[1])
        i0 = _u32(k, "div.u32", lo, BWD_BLOCK_M)
        end = _u32(k, "add.u32", n0, cfg.block_n - 1)
        k.ins("add.u32", end, end, win[0])
        k.ins("div.u32", end, end, BWD_BLOCK_M)
        k.ins("add.u32", end, end, 1)
        k.ins("min.u32", nqb, nqb, end)
    elif cfg.causal:
        i0 = _u32(k, "div.u32", n0, BWD_BLOCK_M)
    else:
        i0 = _u32(k, "mov.u32", 0)
    nq = _u32(k, "max.u32", nqb, i0)
    k.ins("sub.u32", nq, nq, i0)
    n_iters = _u32(k, "mul.lo.u32", nq, group)
    off = cfg.offsets
    holder: list[BwdBuild] = []
    ring = Pipeline(k, PipelineSpec("attention_bwd_qdo", cfg.stages, cfg.stage_tx,
                                    consumers=2), 0, 0,
                    barriers=_RingBarriers(lambda: holder[0]))  # type: ignore[arg-type]
    b = BwdBuild(k, cfg, attention_bwd_plan(cfg), target_, off, smem, tid, wg, tuple(tm),
                 ptrs[0], ptrs[1], ptrs[2], sq, sk, heads, group, c, scale, n0, kv_head,
                 batch, i0, nq, n_iters, k.fresh_label("exit"), ring,
                 SingleBuffer(k, "attention_bwd_kv", lambda: holder[0].bar("kv"),
                              2 * cfg.kv_bytes, producer="attention_bwd_kv_producer"), win,
                 pre, var.get("q_start"), var.get("k_start"), var.get("total_q"),
                 var.get("zero"))
    holder.append(b)
    k.comment("barriers: kv_full (1 + K and V bytes), full[s] (1 + stage bytes), empty[s] (2)")
    p0 = k.reg("pred")
    k.ins("setp.eq.u32", p0, tid, 0)
    skip = k.fresh_label("init_done")
    k.bra(skip, f"!{p0}")
    TE.mbarrier_init(k, b.bar("kv"), 1)
    for s in range(cfg.stages):
        TE.mbarrier_init(k, b.bar("full", s), 1)
        TE.mbarrier_init(k, b.bar("empty", s), 2)
    TE.fence_mbarrier_init(k)
    for t in tm:
        TE.prefetch_tensormap(k, t)
    k.label(skip)
    SE.named_barrier_sync(k, 0, 3 * WARPGROUP, target=target_)
    return b


def bwd_producer(b: BwdBuild) -> None:
    """Warpgroup 0: one thread loads K and V of the CTA's KV rows (``b.kv``), then per
    iteration (query head, Q block) Q, dO and the stats tile into the ring's next stage."""
    k, cfg, plan = b.k, b.cfg, b.plan
    producer_thread(k, cfg.producer_regs, b.tid, b.done, b.target)
    tq, tk, tv, tdo, tst, _ = b.tmaps
    b.kv.arm()
    krow = b.n0 if b.k_start is None else _u32(k, "add.u32", b.n0, b.k_start)
    for tmap, region in ((tk, b.off["k"]), (tv, b.off["v"])):
        for c, off in enumerate(plan.kv_boxes):
            dst = _u32(k, "add.u32", b.smem, region + off)
            b.kv.load(dst, tmap, [c * _CHUNK, krow, b.kv_head, b.tma_batch],
                      cfg.kv_bytes // len(plan.kv_boxes))
    b.kv.commit()
    role = b.ring.producer("attention_bwd_qdo_producer")
    stage = _u32(k, "mov.u32", 0)
    phase = _u32(k, "mov.u32", 0)
    it = _u32(k, "mov.u32", 0)
    head, qi, qend = start_q(b)
    none = k.reg("pred")
    k.ins("setp.eq.u32", none, b.n_iters, 0)
    k.bra(b.done, none)
    top = k.fresh_label("p_q")
    k.label(top)
    with role.loop():
        q0 = _u32(k, "mul.lo.u32", qi, BWD_BLOCK_M)
        role.begin(at=(stage, phase))
        role.acquire()
        base = _u32(k, "mad.lo.u32", stage, cfg.stage_stride, b.off["ring"])
        k.ins("add.u32", base, base, b.smem)
        qrow = q0 if b.q_start is None else _u32(k, "add.u32", q0, b.q_start)
        for tmap, region in ((tq, 0), (tdo, cfg.tile_bytes)):
            for c, off in enumerate(plan.tile_boxes):
                dst = _u32(k, "add.u32", base, region + off)
                role.load(dst, tmap, [c * _CHUNK, qrow, head, b.tma_batch],
                          cfg.tile_bytes // len(plan.tile_boxes))
        dst = _u32(k, "add.u32", base, 2 * cfg.tile_bytes)
        role.load(dst, tst, [q0, 0, head, b.batch], cfg.stats_bytes)
        role.commit()
        _next_stage(k, stage, phase, cfg.stages)
        advance_q(k, qi, head, b.i0, qend)
        k.ins("add.u32", it, it, 1)
        more = k.reg("pred")
        k.ins("setp.lt.u32", more, it, b.n_iters)
        k.bra(top, more)
    k.bra(b.done)


def start_q(b: BwdBuild) -> tuple[Reg, Reg, Reg]:
    """The walk over (query head, Q block) of the CTA: its first head and block, and the end
    of a head's blocks (:func:`advance_q` moves on)."""
    k = b.k
    head = _u32(k, "mul.lo.u32", b.kv_head, b.group)
    qi = _u32(k, "mov.u32", b.i0)
    qend = _u32(k, "add.u32", b.i0, b.nq)
    return head, qi, qend


def advance_q(k: Kernel, qi: Reg, head: Reg, i0: Reg, qend: Reg) -> None:
    """The next (query head, Q block): the next block, or the next head's first."""
    k.ins("add.u32", qi, qi, 1)
    wrap = k.reg("pred")
    k.ins("setp.eq.u32", wrap, qi, qend)
    k.ins("selp.u32", qi, i0, qi, wrap)
    k.ins("add.u32", head, head, 1, pred=str(wrap))
