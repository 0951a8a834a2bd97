"""SM90 attention forward (FlashAttention-3 manner): TMA -> swizzled smem -> WGMMA ss / rs.

``O = softmax(scale * Q K^T [+ causal mask]) V`` and the row log-sum-exp, for one
(batch, head, 128-row Q block) per CTA, built only from nvatom's atoms:

* **MMAs**: ``S = Q K^T`` is ``sm90.mma.m64n<BN>k16.ss.f32.<t>.<t>`` (Q and K both K-major in
  shared memory); ``O += P V`` is ``sm90.mma.m64n<D>k16.rs.f32.<t>.<t>`` (P from registers,
  V MN-major in shared memory, the transpose-B immediate set).  Both are emitted through
  :class:`nvatom.ptx.wgmma_emit.WgmmaSequence`, which checks the fence / commit / wait order.
* **The P retile** (:func:`p_retile`): the f32 accumulator fragment of ``S`` (64 x BN) becomes
  the 16-bit A fragment of the ``rs`` WGMMA (64 x 16 per K step).  It is derived from the two
  atoms' (thread, value) layouts (:func:`nvatom.atoms.wgmma_fragments.accumulator_layout`,
  :func:`~nvatom.atoms.wgmma_fragments.a_layout`): for every thread, every K step and every
  A register, the accumulator values at the same (row, column); the derivation raises unless
  it is one map for all 128 threads whose registers are pairs of values (a packing) -- it is
  the identity ``A[kk][r] = (S[8kk + 2r], S[8kk + 2r + 1])`` (tests/test_attention.py checks
  it against the ISA's formulas written out independently).
* **Shared memory**: Q (128 x D), K stages (BN x D) by
  :func:`nvatom.tables.swizzles.smem_layout` (K-major, SW128: D/64 column chunks of
  rows x 128 bytes, each one TMA box); V stages as the SW128 MN-major atom tiled K first
  (like the GEMM's MN-major B: each 64-column box of BN rows is one contiguous block).  The
  WGMMA descriptors come from :func:`nvatom.descriptors.wgmma.make_wgmma_desc` of those
  layouts, the K steps' start addresses from the layouts' offsets.
* **Copies**: 4-D TMA tensor maps (D, S, H, B) of Q, K, V (and O, for the store) with the
  strides torch gives (:class:`nvatom.descriptors.tma.TensorMap`); rows past the sequence
  length are zero-filled by TMA (and masked to -inf in S for K); mbarriers ``q_full``,
  ``k_full[s]``, ``v_full[s]``, ``empty[s]``.

**Kernel structure**: 3 warpgroups (384 threads).  Warpgroup 0 is the producer
(``setmaxnreg.dec`` to 24; one thread issues every TMA: Q once, then K and V of each KV tile
into a ``stages``-deep ring, K and V on their own barriers so S can start before V lands).
Warpgroups 1 and 2 are consumers (``setmaxnreg.inc`` to 240), 64 Q rows each.  With
``overlap`` (FA3's intra-warpgroup pipelining) the consumer issues ``S_{j+1} = Q K_{j+1}^T``
and then ``O += P_j V_j`` before touching either, waits for S only (``wait_group 1``), runs the
masked online softmax on ``S_{j+1}`` while ``P_j V_j`` runs on the tensor cores, then retires
it (``wait_group 0``), releases stage j, rescales O and packs P.  The softmax: row max over
the thread's values and a 4-lane ``shfl.bfly`` reduction, ``p = ex2(s * c - m * c)`` with the
scale folded into ``c = scale * log2(e)`` (one FMA and one ``ex2.approx`` per element),
per-thread partial row sums (reduced across the 4 lanes of a row once, at the end).
Causal masking (top-left aligned, as ``torch.nn.functional.scaled_dot_product_attention``)
and the ragged last KV tile are one masked block, branched over for tiles that need no mask;
causal CTAs visit only the KV tiles left of their diagonal and the grid runs the longest
Q blocks first.  Epilogue (``epilogue="tma"``): ``O / l`` rounded to 16 bits and stored
with ``stmatrix.x4`` into the consumer's own 64-row half of the Q tile (its S MMAs have all
retired), the registers (:func:`o_retile`) derived from the accumulator and stmatrix
fragments and the row addresses (:func:`stsm_lane_offset`) checked against the Q tile's
SW128 layout; ``fence.proxy.async``, a named barrier per consumer, then one thread issues a
TMA store per 64-column chunk through a 4-D tensor map of O (box 64 x 64; rows past the
sequence length are clipped by its bounds).  ``epilogue="direct"``: each thread stores its
pairs of columns with ``st.global.b32`` (rows past the sequence length skipped).  Both write
``lse = (m c + log2 l) ln 2`` (f32) with plain stores.

Sources: PTX ISA 8.x, "wgmma.mma_async" (register fragments of D and of A), "Matrix
Descriptor Format", "cp.async.bulk.tensor", "mbarrier", "setmaxnreg", "shfl.sync",
"ex2", "stmatrix"; Shah et al., "FlashAttention-3" (2024) for the schedule.
"""

from __future__ import annotations

import dataclasses

from nvatom.kernels.sm90.attention_config import AttentionSm90Config
from nvatom.kernels.sm90.attention_consumer import _consumer
from nvatom.kernels.sm90.attention_plan import attention_plan
from nvatom.kernels.sm90.attention_producer import _producer
from nvatom.kernels.sm90.attention_rings import kv_rings, q_buffer
from nvatom.kernels.sm90.attention_skeleton import _prologue
from nvatom.ptx.builder import Module

__all__ = [
    "build_attention_sm90",
]


def build_attention_sm90(cfg: AttentionSm90Config, target_: str = "sm_90a") -> Module:
    """The kernel ``cfg.name(tmap_q, tmap_k, tmap_v, tmap_o, o_ptr, lse_ptr, seqlen_q,
    seqlen_k, heads, group, scale_log2)``; grid (ceil(Sq / 128), H, B), 384 threads.  The
    TMA epilogue stores through ``tmap_o``, the direct one through ``o_ptr``."""
    plan = attention_plan(cfg)
    feats = ["wgmma", "tma", "mbarrier.tx", "setmaxnreg"]
    if cfg.epilogue == "tma":
        feats.append("stmatrix")
    mod = Module(target_, features=feats)
    k = mod.kernel(cfg.name)
    b = _prologue(k, cfg, plan, target_)
    b = dataclasses.replace(b, rings=kv_rings(b), q=q_buffer(b))
    pp = k.reg("pred")
    k.ins("setp.eq.u32", pp, b.wg, 0)
    prod = k.fresh_label("producer")
    k.bra(prod, pp)
    _consumer(b)
    k.label(prod)
    _producer(b)
    for ring in b.rings:
        ring.check_arrivals()
    k.label(b.done)
    return mod
