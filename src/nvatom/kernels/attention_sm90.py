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
  WGMMA descriptors come from :func:`nvatom.descriptors.wgmma.make_gmma_desc` of those
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
import functools
import math
from collections.abc import Callable
from typing import Any

from nvatom.atoms.copy import MATRIX_COPIES
from nvatom.atoms.sm90 import FORMS, WgmmaForm
from nvatom.atoms.wgmma_fragments import WARPGROUP, a_layout, accumulator_coord, accumulator_layout
from nvatom.descriptors.tma import TensorMap, tma_data_type
from nvatom.descriptors.wgmma import GmmaDescriptor, make_gmma_desc
from nvatom.errors import NvatomError
from nvatom.kernels.sm90.emit import desc_base as _desc_base
from nvatom.kernels.sm90.emit import next_stage as _next_stage
from nvatom.kernels.sm90.emit import stmatrix_lane_offset as _stsm_lane
from nvatom.kernels.sm90.emit import u32 as _u32
from nvatom.layout import tile_to_shape
from nvatom.ptx import sync_emit as SE
from nvatom.ptx import tma_emit as TE
from nvatom.ptx.builder import Kernel, Module, Reg
from nvatom.ptx.copy_emit import emit_matrix_copy
from nvatom.ptx.wgmma_emit import WgmmaSequence
from nvatom.tables.swizzles import smem_layout, smem_swizzle

__all__ = [
    "DTYPES",
    "EPILOGUES",
    "HEAD_DIMS",
    "AttentionSm90Config",
    "AttentionSm90Error",
    "attention_plan",
    "build_attention_sm90",
    "default_config",
    "kernel_params",
    "launch_geometry",
    "o_retile",
    "p_retile",
    "stsm_lane_offset",
    "stsm_matrix_origin",
    "tensor_maps",
]

DTYPES = ("bf16", "f16")
EPILOGUES = ("tma", "direct")  # O via stmatrix + TMA store / per-thread st.global
HEAD_DIMS = (64, 128, 256)
BLOCK_NS = (64, 80, 96, 128, 144, 160, 176, 192)  # KV tile rows: multiples of 16 (the rs K)
BLOCK_M = 128  # Q rows per CTA: two consumer warpgroups of 64 (WGMMA's M)
_SW128 = smem_swizzle("SW128")
_CHUNK = 64  # 16-bit elements in one 128-byte SW128 row: one TMA box's inner extent
_MAX_SMEM = 232448  # sm_90: 227 KB of dynamic shared memory per block
_ENTRY_REGS = 168  # .maxnreg at entry (65536 / 384): setmaxnreg needs a cap
_LOG2E = 1.4426950408889634
_LN2 = 0.6931471805599453
_NEG_INF = "0fFF800000"


class AttentionSm90Error(NvatomError, ValueError):
    """An attention configuration or problem the SM90 kernel cannot run."""


@dataclasses.dataclass(frozen=True)
class AttentionSm90Config:
    """One attention kernel: element type, head dim, KV tile rows (``block_n``), pipeline
    depth, causal mask, FA3 intra-warpgroup overlap, the consumers' register budget and the
    epilogue (``"tma"``: stmatrix into the Q tile + TMA store; ``"direct"``: per-thread
    4-byte global stores)."""

    dtype: str = "bf16"
    head_dim: int = 128
    block_n: int = 128
    stages: int = 2
    causal: bool = False
    overlap: bool = True
    split_release: bool = True
    pingpong: bool = False
    consumer_regs: int = 240
    producer_regs: int = 24
    epilogue: str = "tma"

    def __post_init__(self) -> None:
        if self.epilogue not in EPILOGUES:
            raise AttentionSm90Error(f"epilogue {self.epilogue!r} is not one of "
                                     f"{', '.join(EPILOGUES)}")
        if self.dtype not in DTYPES:
            raise AttentionSm90Error(f"dtype {self.dtype!r} is not one of {', '.join(DTYPES)}")
        if self.head_dim not in HEAD_DIMS:
            raise AttentionSm90Error(f"head_dim {self.head_dim!r} is not one of "
                                     f"{', '.join(map(str, HEAD_DIMS))}")
        if self.block_n not in BLOCK_NS:
            raise AttentionSm90Error(f"block_n {self.block_n!r} is not one of "
                                     f"{', '.join(map(str, BLOCK_NS))}")
        if not isinstance(self.stages, int) or not 2 <= self.stages <= 8:
            raise AttentionSm90Error(f"stages {self.stages!r} is not in 2..8")
        if self.smem_bytes > _MAX_SMEM:
            raise AttentionSm90Error(f"{self.name}: {self.smem_bytes} bytes of shared memory, "
                                     f"more than sm_90's {_MAX_SMEM}")
        if self.pingpong and not self.overlap:
            raise AttentionSm90Error("pingpong needs overlap (one WGMMA issue per KV tile)")
        if self.producer_regs * WARPGROUP + 2 * self.consumer_regs * WARPGROUP > 65536:
            raise AttentionSm90Error("producer_regs + 2 consumer_regs exceed the 64K registers")

    @property
    def q_bytes(self) -> int:
        return BLOCK_M * self.head_dim * 2

    @property
    def kv_bytes(self) -> int:
        """Bytes of one K (or V) tile."""
        return self.block_n * self.head_dim * 2

    @property
    def chunks(self) -> int:
        return self.head_dim // _CHUNK

    @property
    def smem_bytes(self) -> int:
        return self.q_bytes + 2 * self.stages * self.kv_bytes + 8 * (1 + 4 * self.stages)

    @property
    def name(self) -> str:
        return (f"nvatom_attn_sm90_{self.dtype}_d{self.head_dim}_n{self.block_n}"
                f"_s{self.stages}{'_causal' if self.causal else ''}"
                f"{'_ov' if self.overlap else ''}{'_sr' if self.split_release else ''}"
                f"{'_pp' if self.pingpong else ''}_r{self.consumer_regs}"
                f"{'_otma' if self.epilogue == 'tma' else ''}")

    @property
    def s_form(self) -> WgmmaForm:
        return _form(self.block_n, self.dtype, "ss")

    @property
    def o_form(self) -> WgmmaForm:
        return _form(self.head_dim, self.dtype, "rs")


@functools.cache
def _form(n: int, t: str, src: str) -> WgmmaForm:
    return next(f for f in FORMS if (f.n, f.a.name, f.b.name, f.d.name, f.a_source,
                                     f.satfinite) == (n, t, t, "f32", src, False))


def default_config(dtype: str = "bf16", head_dim: int = 128, causal: bool = False
                   ) -> AttentionSm90Config:
    """The tuned configuration per head dim (docs/perf.md, "Attention"): KV tiles of 128 rows
    (64 for D = 256, whose O takes 128 registers), 2 stages (4 for D = 64), overlap and split
    release always, ping-pong for causal masks (it won 6 of 6 causal shapes, lost or tied
    5 of 6 full ones); the TMA epilogue except for d 64 with a full mask, the one shape where
    it measured slower than the direct stores (by 1.6%, inside the rounds' spread; log
    entry 9)."""
    bn, stages = {64: (128, 4), 128: (128, 2), 256: (64, 2)}.get(head_dim, (128, 2))
    epilogue = "direct" if head_dim == 64 and not causal else "tma"
    return AttentionSm90Config(dtype, head_dim, bn, stages, causal, pingpong=causal,
                               epilogue=epilogue)


# ============================================================================ layout algebra


#: A retile: ``[block][register]`` = the accumulator values packed into the register.
Retile = tuple[tuple[tuple[int, ...], ...], ...]


@functools.cache
def p_retile(block_n: int, bits: int = 16) -> Retile:
    """The P retile: ``[kk][r]`` = the S accumulator values (indices into a thread's m64n<BN>
    f32 fragment) packed, low bits first, into register ``r`` of the ``rs`` A fragment for K
    step ``kk`` (columns ``16 kk .. 16 kk + 15`` of P).

    Derived from the atoms' (thread, value) layouts: both map to ``m + 64 * n`` of their
    64 x N tile; A's K step ``kk`` is the accumulator's columns shifted by ``16 kk``, i.e.
    ``+ 64 * K * kk`` in the codomain.  Raises unless every thread gets the same map (one
    unrolled sequence serves the warpgroup) and every A register is filled."""
    acc = accumulator_layout(block_n)
    a = a_layout(bits)
    per = 32 // bits
    k = 256 // bits
    if block_n % k:
        raise AttentionSm90Error(f"block_n {block_n} is not a multiple of the rs K ({k})")
    return _retile(acc, block_n // 2, block_n // k, 4, per,
                   lambda t, kk, i: a(t, i) + 64 * k * kk, ("P", "S", "A", "K step"))


def _retile(acc: Any, values: int, blocks: int, registers: int, per: int,
            key: Callable[[int, int, int], int], names: tuple[str, str, str, str]) -> Retile:
    """The derivation :func:`p_retile` and :func:`o_retile` share: ``[blk][r]`` = the
    indices (into a thread's ``values`` accumulator values, ``acc``: (thread, value) ->
    ``m + 64 n``) of the ``per`` values packed into register ``r`` of block ``blk``, value
    ``i`` of thread ``t`` sitting at ``key(t, blk, i)``; the same map for every thread of
    the warpgroup.  ``names``: (retile, accumulator, operand, block) for the messages."""
    what, frag, operand, step = names
    want: Retile | None = None
    for t in range(WARPGROUP):
        where = {acc(t, v): v for v in range(values)}
        got = []
        for blk in range(blocks):
            regs = []
            for r in range(registers):
                vals = []
                for e in range(per):
                    at = key(t, blk, r * per + e)
                    if at not in where:  # pragma: no cover - fragment formula guard
                        raise AttentionSm90Error(f"thread {t}: {operand} value {r * per + e} of "
                                                 f"{step} {blk} is not in the thread's {frag} "
                                                 "fragment")
                    vals.append(where[at])
                regs.append(tuple(vals))
            got.append(tuple(regs))
        tup = tuple(got)
        if want is None:
            want = tup
        elif tup != want:  # pragma: no cover
            raise AttentionSm90Error(f"{what} retile of thread {t} differs from thread 0's")
    assert want is not None
    return want


#: The epilogue's store atom (PTX ISA "stmatrix", .m8n8.x4.b16): four 8 x 8 matrices per
#: instruction, lane l addresses row l % 8 of matrix l // 8.
STSM = next(a for a in MATRIX_COPIES if a.name == "atom.stsm<m8n8.x4>")


def stsm_matrix_origin(j: int) -> tuple[int, int]:
    """(row, column) of matrix ``j`` of one ``stmatrix.x4`` in a warp's 16 x 16 block of O:
    the two row halves of the left 8 columns, then of the right 8 (our choice; any order of
    the four 8 x 8 blocks is a valid store, this one keeps a lane's address one XOR apart
    between blocks)."""
    return 8 * (j % 2), 8 * (j // 2)


@functools.cache
def o_retile(head_dim: int) -> Retile:
    """The O retile for the epilogue: ``[blk][r]`` = the O accumulator values (indices into a
    thread's m64n<D> f32 fragment) packed, low bits first, into register ``r`` of the
    ``stmatrix.x4`` that stores the warp's 16 x 16 block of columns ``16 blk ..``.

    Derived like :func:`p_retile`, from the accumulator's (thread, value) layout
    (:func:`~nvatom.atoms.wgmma_fragments.accumulator_layout`, onto ``m + 64 n``) and the
    stmatrix atom's register fragment (:meth:`nvatom.atoms.copy.MatrixCopy.element`, matrix
    ``j`` placed at :func:`stsm_matrix_origin`); raises unless one map serves all 128
    threads and every register is filled."""
    acc = accumulator_layout(head_dim)
    per = 32 // STSM.fmt.reg_bits

    def key(t: int, blk: int, i: int) -> int:
        warp, lane = divmod(t, 32)
        j, row, col = STSM.element(lane, i)
        r0, c0 = stsm_matrix_origin(j)
        return 16 * warp + r0 + row + 64 * (16 * blk + c0 + col)

    return _retile(acc, head_dim // 2, head_dim // 16, STSM.registers, per, key,
                   ("O", "O", "stmatrix", "block"))


def stsm_lane_offset(warp: int, lane: int) -> int:
    """Byte offset, in a consumer's 64-row half of a 64-column SW128 chunk of the Q tile, of
    the row ``lane`` of ``warp`` addresses in the ``stmatrix.x4`` of the chunk's first 16 x 16
    block (block ``q`` of the chunk: this XOR ``32 q``).  The PTX arithmetic of the
    epilogue; :func:`attention_plan` checks it against the Q layout for every lane."""
    j, t = divmod(lane, STSM.rows)
    r0, c0 = stsm_matrix_origin(j)
    return (16 * warp + r0 + t) * 128 + (((c0 // 8) ^ t) << 4)


@dataclasses.dataclass(frozen=True)
class AttentionPlan:
    """What the kernel derives from the layout algebra."""

    q_layout: Any  # 128 x D, K-major SW128
    k_layout: Any  # BN x D, K-major SW128
    v_layout: Any  # (D, BN) = (N, K) of the PV MMA, MN-major SW128
    q_descs: tuple[GmmaDescriptor, ...]  # per K step (D / 16) of S = Q K^T, consumer 0
    k_descs: tuple[GmmaDescriptor, ...]
    v_descs: tuple[GmmaDescriptor, ...]  # per K step (BN / 16) of O += P V
    q_consumer_offset: int  # bytes between the consumers' 64-row halves of Q
    q_boxes: tuple[int, ...]  # byte offsets of the D/64 TMA boxes of a Q tile
    k_boxes: tuple[int, ...]
    v_boxes: tuple[int, ...]
    retile: tuple[tuple[tuple[int, ...], ...], ...]
    o_retile: tuple[tuple[tuple[int, ...], ...], ...]  # [16-column block][stmatrix register]


@functools.lru_cache(maxsize=32)
def attention_plan(cfg: AttentionSm90Config) -> AttentionPlan:
    d, bn = cfg.head_dim, cfg.block_n
    ql = smem_layout(BLOCK_M, d, 16, "K", _SW128)
    kl = smem_layout(bn, d, 16, "K", _SW128)
    vl = tile_to_shape(_SW128.atom(16, "MN"), (d, bn), (1, 0))
    qb = make_gmma_desc(smem_layout(64, _CHUNK, 16, "K", _SW128), 16, "K")
    kb = make_gmma_desc(smem_layout(bn, _CHUNK, 16, "K", _SW128), 16, "K")
    vb = make_gmma_desc(vl, 16, "MN")
    q_descs = tuple(dataclasses.replace(qb, start_address=ql((0, 16 * s)) * 2)
                    for s in range(d // 16))
    k_descs = tuple(dataclasses.replace(kb, start_address=kl((0, 16 * s)) * 2)
                    for s in range(d // 16))
    v_descs = tuple(dataclasses.replace(vb, start_address=vl((0, 16 * s)) * 2)
                    for s in range(bn // 16))
    q_boxes = tuple(ql((0, _CHUNK * c)) * 2 for c in range(cfg.chunks))
    k_boxes = tuple(kl((0, _CHUNK * c)) * 2 for c in range(cfg.chunks))
    v_boxes = tuple(vl((_CHUNK * c, 0)) * 2 for c in range(cfg.chunks))
    for name, boxes, size in (("Q", q_boxes, BLOCK_M), ("K", k_boxes, bn), ("V", v_boxes, bn)):
        for c, off in enumerate(boxes):  # each box: `size` rows of 128 bytes, contiguous
            if off != c * size * 128 or off % 1024:  # pragma: no cover - algebra guard
                raise AttentionSm90Error(f"{name} box {c} at byte {off}, not {c * size * 128}")
    qoff = ql((64, 0)) * 2
    for s in range(d // 16):  # the consumers' halves differ by one constant in every chunk
        if ql((64, 16 * s)) * 2 - ql((0, 16 * s)) * 2 != qoff:  # pragma: no cover
            raise AttentionSm90Error("Q consumer offset differs between K steps")
    _check_o_store(d)
    return AttentionPlan(ql, kl, vl, q_descs, k_descs, v_descs, qoff, q_boxes, k_boxes,
                         v_boxes, p_retile(bn), o_retile(d))


@functools.cache
def _check_o_store(d: int) -> None:
    """The TMA epilogue's addresses are the Q layout's: every stmatrix row address
    (:func:`stsm_lane_offset`, one XOR per 16-column block) is where the layout puts the
    first element of that matrix row, and each consumer's 64 x 64 TMA store box of chunk
    ``c`` (at ``q_boxes[c] + consumer * qoff``) holds exactly the SW128 box layout."""
    ql = smem_layout(BLOCK_M, d, 16, "K", _SW128)
    qoff = ql((64, 0)) * 2
    q_boxes = tuple(ql((0, _CHUNK * c)) * 2 for c in range(d // _CHUNK))
    for cw in (0, 1):
        for w in range(4):
            for lane in range(STSM.address_lanes):
                j, t = divmod(lane, STSM.rows)
                r0, c0 = stsm_matrix_origin(j)
                for blk in range(d // 16):
                    c, q = divmod(blk, _CHUNK // 16)
                    want = ql((64 * cw + 16 * w + r0 + t, 16 * blk + c0)) * 2
                    got = cw * qoff + q_boxes[c] + (stsm_lane_offset(w, lane) ^ (32 * q))
                    if got != want:  # pragma: no cover - algebra guard
                        raise AttentionSm90Error(f"stmatrix address of consumer {cw} warp {w} "
                                                 f"lane {lane} block {blk}: {got} != {want}")
    box = smem_layout(64, _CHUNK, 16, "K", _SW128)
    for cw in (0, 1):
        for c in range(d // _CHUNK):
            start = cw * qoff + q_boxes[c]
            if start % 1024:  # pragma: no cover - TMA's swizzle atom alignment
                raise AttentionSm90Error(f"O box {c} of consumer {cw} at byte {start}")
            for r in range(64):
                for x in range(0, _CHUNK, 8):
                    if ql((64 * cw + r, _CHUNK * c + x)) * 2 - start != box((r, x)) * 2:
                        raise AttentionSm90Error(  # pragma: no cover - algebra guard
                            f"O box {c} of consumer {cw}: element ({r}, {x}) misplaced")


# ============================================================================ small emitters



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


# ============================================================================ the kernel


@dataclasses.dataclass
class _Build:
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


def kernel_params() -> tuple[tuple[str, str], ...]:
    """The kernel's parameters as ``(name, PTX type)``."""
    tmap = TE.tensormap_param_type(TE.GEMM_TENSORMAP_ALIGN)
    return (("tmap_q", tmap), ("tmap_k", tmap), ("tmap_v", tmap), ("tmap_o", tmap),
            ("o_ptr", "u64"),
            ("lse_ptr", "u64"), ("seqlen_q", "u32"), ("seqlen_k", "u32"), ("heads", "u32"),
            ("group", "u32"), ("scale_log2", "f32"))


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
    pp = k.reg("pred")
    k.ins("setp.eq.u32", pp, b.wg, 0)
    prod = k.fresh_label("producer")
    k.bra(prod, pp)
    _consumer(b)
    k.label(prod)
    _producer(b)
    k.label(b.done)
    return mod


def _prologue(k: Kernel, cfg: AttentionSm90Config, plan: AttentionPlan, target_: str) -> _Build:
    k.reqntid = (3 * WARPGROUP, 1, 1)
    k.minnctapersm = 1
    k.maxnreg = _ENTRY_REGS
    pq, pk, pv, pom = (k.byte_param(n, TE.TENSORMAP_BYTES, TE.GEMM_TENSORMAP_ALIGN)
                       for n in ("tmap_q", "tmap_k", "tmap_v", "tmap_o"))
    po, pl = k.param("o_ptr", "u64"), k.param("lse_ptr", "u64")
    psq, psk, ph, pg = (k.param(n, "u32") for n in ("seqlen_q", "seqlen_k", "heads", "group"))
    pc = k.param("scale_log2", "f32")
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
    # KV tiles: ceil(min(Sk, m0 + 128) / BN) when causal, else ceil(Sk / BN)
    lim = _u32(k, "mov.u32", sk)
    if cfg.causal:
        end = _u32(k, "add.u32", m0, BLOCK_M)
        k.ins("min.u32", lim, lim, end)
    n_tiles = _u32(k, "add.u32", lim, cfg.block_n - 1)
    k.ins("div.u32", n_tiles, n_tiles, cfg.block_n)

    b = _Build(k, cfg, plan, target_, off_q, off_k, off_v, off_bar, smem, tid, wg,
               (tm[0], tm[1], tm[2], tm[3]), m0, head, kv_head, batch, sq, sk, heads, n_tiles,
               o_ptr, lse_ptr, c, k.fresh_label("exit"))
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


def _producer(b: _Build) -> None:
    """Warpgroup 0: one thread loads Q, then K and V of every KV tile into the ring."""
    k, cfg, plan = b.k, b.cfg, b.plan
    k.comment("producer warpgroup: one thread issues every TMA load")
    SE.setmaxnreg(k, "dec", cfg.producer_regs, target=b.target)
    pl = k.reg("pred")
    k.ins("setp.ne.u32", pl, b.tid, 0)
    k.bra(b.done, pl)
    tq, tk, tv, _ = b.tmaps
    qbar = b.bar("q")
    TE.mbarrier_arrive_expect_tx(k, qbar, cfg.q_bytes)
    for c, off in enumerate(plan.q_boxes):
        dst = _u32(k, "add.u32", b.smem, b.off_q + off)
        TE.tma_load(k, dst, tq, [c * _CHUNK, b.m0, b.head, b.batch], qbar)
    stage = _u32(k, "mov.u32", 0)
    phase = _u32(k, "mov.u32", 1)  # a fresh barrier's previous phase counts as complete
    j = _u32(k, "mov.u32", 0)
    top = k.fresh_label("p_kv")
    k.label(top)
    n0 = _u32(k, "mul.lo.u32", j, cfg.block_n)
    if not cfg.split_release:
        TE.mbarrier_wait_parity(k, b.bar("e", stage), phase)
    for which, tmap, region, boxes in (("k", tk, b.off_k, plan.k_boxes),
                                       ("v", tv, b.off_v, plan.v_boxes)):
        if cfg.split_release:  # K's slot frees when S retires, V's when P V does
            TE.mbarrier_wait_parity(k, b.bar("ek" if which == "k" else "e", stage), phase)
        full = b.bar(which, stage)
        TE.mbarrier_arrive_expect_tx(k, full, cfg.kv_bytes)
        base = _u32(k, "mad.lo.u32", stage, cfg.kv_bytes, region)
        k.ins("add.u32", base, base, b.smem)
        for c, off in enumerate(boxes):
            dst = _u32(k, "add.u32", base, off)
            TE.tma_load(k, dst, tmap, [c * _CHUNK, n0, b.kv_head, b.batch], full)
    _next_stage(k, stage, phase, cfg.stages)
    k.ins("add.u32", j, j, 1)
    more = k.reg("pred")
    k.ins("setp.lt.u32", more, j, b.n_tiles)
    k.bra(top, more)
    k.bra(b.done)


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
    last tile) and, causal, row + 1.  Skipped (branch) when the tile needs no mask."""
    k, cfg = b.k, b.cfg
    bn = cfg.block_n
    lims = []
    for h in (0, 1):
        lim = _u32(k, "mov.u32", b.sk)
        if cfg.causal:
            r1 = _u32(k, "add.u32", st.rows[h], 1)
            k.ins("min.u32", lim, lim, r1)
        rel = k.reg("s32")
        k.ins("sub.s32", rel, lim, n0)
        lims.append(rel)
    need = k.reg("pred")
    k.ins("setp.lt.s32", need, lims[0], bn)  # row 0 has the smaller limit
    skip = k.fresh_label("no_mask")
    k.bra(skip, f"!{need}")
    for h in (0, 1):
        k.ins("sub.s32", lims[h], lims[h], st.tig2)
        for i in _half_indices(bn, h):
            _, col = accumulator_coord(bn, 0, i)  # thread 0: tig = 0
            p = k.reg("pred")
            k.ins("setp.lt.s32", p, col, lims[h])
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
        line = _u32(k, "mad.lo.u32", bh, b.sq, row)  # (b * H + h) * Sq + row
        lp = k.reg("u64")
        k.ins("mad.wide.u32", lp, line, 4, b.lse_ptr)
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
    for blk, regs in enumerate(plan.o_retile):
        c, q = divmod(blk, per_chunk)
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
    TE.fence_proxy_async(k)
    bar = _u32(k, "add.u32", cw, 3)  # 0: the CTA, 1 and 2: ping-pong turns
    SE.named_barrier_sync(k, bar, WARPGROUP, target=b.target)
    r0 = _u32(k, "mad.lo.u32", cw, 64, b.m0)
    go = k.reg("pred")
    k.ins("setp.lt.u32", go, r0, b.sq)
    k.ins("setp.eq.and.u32", go, ltid, 0, go)
    skip = k.fresh_label("no_o_store")
    k.bra(skip, f"!{go}")
    for c in range(cfg.chunks):
        src = _u32(k, "add.u32", q_sm, b.off_q + plan.q_boxes[c])
        TE.tma_store(k, b.tmaps[3], [c * _CHUNK, r0, b.head, b.batch], src)
    TE.bulk_commit_group(k)
    TE.bulk_wait_group(k, 0, read=True)  # the tile is read before the CTA's smem goes
    k.label(skip)


def _f32_hex(x: float) -> str:
    import struct

    return struct.pack(">f", x).hex().upper()


# ============================================================================ launch


def launch_geometry(cfg: AttentionSm90Config, batch: int, heads: int, seqlen_q: int
                    ) -> tuple[tuple[int, int, int], tuple[int, int, int], int]:
    """(grid, block, dynamic shared-memory bytes)."""
    return ((-(-seqlen_q // BLOCK_M), heads, batch), (3 * WARPGROUP, 1, 1), cfg.smem_bytes)


_Tensor = tuple[int, tuple[int, ...], tuple[int, ...]]


def tensor_maps(cfg: AttentionSm90Config, q: _Tensor, k: _Tensor, v: _Tensor,
                o: _Tensor | None = None) -> tuple[TensorMap, ...]:
    """The 4-D tensor maps of Q, K, V (and, given, O): each ``(address, shape (B, H, S, D),
    strides in elements)`` with unit stride along D; boxes of 64 x rows (128 for Q,
    ``block_n`` for K, V, 64 for O: one consumer's half of a Q block), 128-byte swizzle."""
    dt = tma_data_type(cfg.dtype)
    out = []
    todo = [(q, BLOCK_M), (k, cfg.block_n), (v, cfg.block_n)]
    if o is not None:
        todo.append((o, 64))
    for (ptr, shape, strides), rows in todo:
        bb, hh, ss, dd = shape
        sb, sh, ssq, _ = strides
        out.append(TensorMap("tiled", dt, ptr, (dd, ss, hh, bb), (ssq * 2, sh * 2, sb * 2),
                             box_dims=(_CHUNK, rows, 1, 1), swizzle=_SW128,
                             l2_promotion="256B"))
    return tuple(out)


def scale_log2(scale: float) -> float:
    """The folded softmax scale ``scale * log2(e)`` the kernel takes."""
    return scale * _LOG2E


__all__ += ["scale_log2"]
assert math.isclose(_LOG2E * _LN2, 1.0)
