"""SM90 attention backward (FlashAttention-2/3 manner): TMA -> swizzled smem -> WGMMA ss / rs,
dQ accumulated in f32 by TMA reductions.

For one (128-row KV block, KV head, batch) per CTA, over the query heads of the KV head's group
and the 64-row Q blocks that see the KV block (causal: from the block of its first row; a
window: the rows its edges reach), with ``P`` and ``dS`` recomputed from the forward's
log-sum-exp:

* ``S^T = K Q^T`` and ``dP^T = V dO^T``: ``sm90.mma.m64n64k16.ss`` (K, V the consumer's 64
  resident rows, K-major A; Q, dO the stage's tiles, K-major B);
* ``P^T = exp2(S^T scale log2(e) - lse log2(e))`` (columns are Q rows: the stats tile, from
  the preprocess kernel :mod:`~nvatom.kernels.sm90.attention_bwd_pre`, holds ``-lse log2(e)``
  and ``rowsum(dO * O) - dlse`` per Q row), the causal / window mask on the tiles that need
  it (softcap: ``t = tanh(scale S^T / c)`` first, and dS carries ``1 - t^2``);
  ``dS^T = P^T (dP^T - rowsum)``;
* ``dV += P^T dO`` and ``dK += dS^T Q``: ``m64n<D>k16.rs`` (P^T and dS^T packed to 16 bits in
  registers: the forward's P retile; dO and Q read again, as MN-major B, from the same
  bytes);
* ``dQ_i += scale dS K``: dS^T stored by ``stmatrix.x4`` as (KV row, Q column) rows, read as
  the MN-major A of ``m64n<D/2 or D>k16.ss`` with K MN-major; the f32 result staged in shared
  memory and added to the dQ accumulator by TMA reductions (``dq_reduce="tma"``; ``"red"``:
  per-thread ``red.global.add.v2.f32``), rows past seqlen_q clipped;
* epilogue: ``dK * scale`` and ``dV`` rounded to 16 bits, stored per thread (rows past
  seqlen_k skipped).  The host rounds dQ.

3 warpgroups: a producer (one thread: K and V once, then Q, dO and the stats tile of each
(head, Q block) into a ``stages``-deep ring) and two consumers of 64 KV rows each.  Q rows
past seqlen_q are zero-filled by TMA and their stats are (-inf, 0) (the preprocess pads
them), so they add nothing; KV rows past seqlen_k are zero (their dK, dV rows are not
stored).  ``varlen``: packed sequences, each CTA's rows read from the offsets on the GPU
(the next sequence's keys masked).

Sources: PTX ISA 8.x "wgmma.mma_async", "stmatrix", "cp.reduce.async.bulk.tensor", "red",
"cp.async.bulk.tensor", "mbarrier"; Dao, "FlashAttention-2" (2023), Shah et al.,
"FlashAttention-3" (2024) for the algorithm.
"""

from __future__ import annotations

from nvatom.kernels.sm90.attention_bwd_config import AttentionBwdSm90Config
from nvatom.kernels.sm90.attention_bwd_consumer import bwd_consumer
from nvatom.kernels.sm90.attention_bwd_skeleton import bwd_producer, bwd_prologue
from nvatom.ptx.builder import Module

__all__ = ["build_attention_bwd_sm90"]


def build_attention_bwd_sm90(cfg: AttentionBwdSm90Config, target_: str = "sm_90a") -> Module:
    """The kernel ``cfg.name(tmap_q, tmap_k, tmap_v, tmap_do, tmap_stats, dq_ptr, dk_ptr,
    dv_ptr, seqlen_q, seqlen_k, heads, group, scale_log2, scale)``; grid
    (ceil(Sk / 128), Hkv, B), 384 threads."""
    mod = Module(target_, features=["wgmma", "tma", "mbarrier.tx", "setmaxnreg", "stmatrix",
                                    "red.vec.f32"])
    k = mod.kernel(cfg.name)
    b = bwd_prologue(k, cfg, target_)
    pp = k.reg("pred")
    k.ins("setp.eq.u32", pp, b.wg, 0)
    prod = k.fresh_label("producer")
    k.bra(prod, pp)
    bwd_consumer(b)
    k.label(prod)
    bwd_producer(b)
    b.ring.check_arrivals()
    k.label(b.done)
    return mod
