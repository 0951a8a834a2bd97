"""The SM90 attention backward's configuration: :class:`AttentionBwdSm90Config` (element type,
head dim, KV tile rows, Q/dO ring depth, causal mask, how the two consumer warpgroups share
the ``dQ = dS K`` product, register budget) with its checks, the tuned
:func:`default_bwd_config` per head dim, the shared-memory map, and the WGMMA forms it
selects (PTX ISA "wgmma.mma_async")."""

from __future__ import annotations

import dataclasses

from nvatom.atoms.sm90 import WgmmaForm
from nvatom.atoms.wgmma_fragments import WARPGROUP
from nvatom.kernels.sm90.attention_config import _CHUNK, DTYPES, AttentionSm90Error, _form
from nvatom.kernels.sm90.limits import MAX_SMEM as _MAX_SMEM
from nvatom.kernels.sm90.limits import REGS as _REGS

__all__ = [
    "BWD_BLOCK_M",
    "BWD_HEAD_DIMS",
    "DQ_BOX",
    "DQ_REDUCES",
    "DQ_SPLITS",
    "AttentionBwdSm90Config",
    "default_bwd_config",
]

#: Head dims the backward kernel takes.  D = 256 needs another split of dK / dV between the
#: warpgroups (64 x 256 f32 twice does not fit one thread's 240 registers); not built yet.
BWD_HEAD_DIMS = (64, 128)
#: Q rows per ring stage: the N of S^T = K Q^T and the K of dV += P^T dO (one 64-column
#: SW128 chunk of the dS tile)
BWD_BLOCK_M = 64
#: KV rows per CTA: two consumer warpgroups of 64 (WGMMA's M)
BWD_BLOCK_N = 128
#: how the consumers share dQ_i = dS_i K (64 x D, K = 128 KV rows): "n" each takes D/2
#: columns over all 128 KV rows (both halves of dS in shared memory: a barrier of both
#: warpgroups, dS double-buffered); "k" each takes all D columns over its own 64 KV rows
#: (a warpgroup-local barrier; twice the dQ atomics)
DQ_SPLITS = ("n", "k")
#: how a warpgroup's dQ product reaches the f32 accumulator in global memory: "tma" staged
#: in shared memory (128-byte swizzled boxes of 32 columns) and added by TMA reductions
#: (cp.reduce.async.bulk.tensor .add, one thread); "red" per thread, red.global.add.v2.f32
DQ_REDUCES = ("tma", "red")
DQ_BOX = 32  # f32 columns of one dQ staging box: one 128-byte swizzle row
_STATS = 8  # bytes per Q row of the stats tile: (-lse log2(e), rowsum(dO * O)) as f32


@dataclasses.dataclass(frozen=True)
class AttentionBwdSm90Config:
    """One backward kernel: CTA = 128 KV rows of one KV head, looping over the query heads of
    its group and the 64-row Q blocks; ``stages``: the Q / dO / stats ring."""

    dtype: str = "bf16"
    head_dim: int = 128
    stages: int = 2
    causal: bool = False
    dq_split: str = "n"
    dq_reduce: str = "tma"
    # a sliding window (the forward's window_size, top-left aligned): the kernel takes the
    # host's effective edges ("win_left", "win_right"), visits only the Q blocks whose rows
    # see the CTA's keys and masks both edges (with causal, the host's right edge is 0)
    window: bool = False
    # logit softcapping (the forward's softcap): scores c tanh(scale q.k / c); the kernel
    # takes scale / c ("softcap_pre") and c log2(e) in place of scale log2(e)
    softcap: bool = False
    # packed variable-length batches (the forward's varlen): CTA z = sequence b reads its
    # rows from cu_seqlens on the device (clamped), exits past its keys, masks the next
    # sequence's keys (KV rows past its length) and stores dK, dV at its packed rows
    varlen: bool = False
    consumer_regs: int = 240
    producer_regs: int = 24

    def __post_init__(self) -> None:
        if self.dtype not in DTYPES:
            raise AttentionSm90Error(f"dtype {self.dtype!r} is not one of {', '.join(DTYPES)}")
        if self.head_dim not in BWD_HEAD_DIMS:
            raise AttentionSm90Error(f"head_dim {self.head_dim!r}: the backward kernel takes "
                                     f"{', '.join(map(str, BWD_HEAD_DIMS))}")
        if self.dq_split not in DQ_SPLITS:
            raise AttentionSm90Error(f"dq_split {self.dq_split!r} is not one of "
                                     f"{', '.join(DQ_SPLITS)}")
        if self.dq_split == "n" and (self.head_dim // 2) % _CHUNK:
            raise AttentionSm90Error(
                f"dq_split 'n' gives each warpgroup D/2 = {self.head_dim // 2} columns of K as "
                f"the MN-major B of dQ: not a whole {_CHUNK}-column SW128 atom; use 'k'")
        if self.dq_reduce not in DQ_REDUCES:
            raise AttentionSm90Error(f"dq_reduce {self.dq_reduce!r} is not one of "
                                     f"{', '.join(DQ_REDUCES)}")
        if not isinstance(self.stages, int) or not 1 <= self.stages <= 8:
            raise AttentionSm90Error(f"stages {self.stages!r} is not in 1..8")
        if self.smem_bytes > _MAX_SMEM:
            raise AttentionSm90Error(f"{self.name}: {self.smem_bytes} bytes of shared memory, "
                                     f"more than sm_90's {_MAX_SMEM}")
        if self.producer_regs * WARPGROUP + 2 * self.consumer_regs * WARPGROUP > _REGS:
            raise AttentionSm90Error("producer_regs + 2 consumer_regs exceed the 64K registers")

    @property
    def block_m(self) -> int:
        return BWD_BLOCK_M

    @property
    def block_n(self) -> int:
        return BWD_BLOCK_N

    @property
    def chunks(self) -> int:
        return self.head_dim // _CHUNK

    @property
    def kv_bytes(self) -> int:
        """Bytes of the K (or V) tile, resident for the CTA."""
        return BWD_BLOCK_N * self.head_dim * 2

    @property
    def tile_bytes(self) -> int:
        """Bytes of one Q (or dO) tile of a stage."""
        return BWD_BLOCK_M * self.head_dim * 2

    @property
    def stats_bytes(self) -> int:
        return BWD_BLOCK_M * _STATS

    @property
    def stage_tx(self) -> int:
        """What one stage's TMA loads deliver: Q, dO and the stats."""
        return 2 * self.tile_bytes + self.stats_bytes

    @property
    def stage_stride(self) -> int:
        """Bytes between stages (1024-aligned: SW128 tiles)."""
        return -(-self.stage_tx // 1024) * 1024

    @property
    def ds_bytes(self) -> int:
        """One dS tile (128 KV rows x 64 Q columns, 16 bits)."""
        return BWD_BLOCK_N * BWD_BLOCK_M * 2

    @property
    def ds_buffers(self) -> int:
        """dS tiles: two with ``dq_split`` "n" (both warpgroups read both halves: the next
        tile's writes go to the other buffer), one with "k" (each reads its own half)."""
        return 2 if self.dq_split == "n" else 1

    @property
    def dq_stage_bytes(self) -> int:
        """One warpgroup's dQ staging tile (64 rows x ``dq_n`` f32) with ``dq_reduce`` "tma"."""
        return BWD_BLOCK_M * self.dq_n * 4 if self.dq_reduce == "tma" else 0

    @property
    def offsets(self) -> dict[str, int]:
        """Byte offsets in dynamic shared memory: K, V, the ring, dS, the dQ staging tiles,
        the barriers (``kv_full``, ``full[stages]``, ``empty[stages]``)."""
        off_v = self.kv_bytes
        ring = 2 * self.kv_bytes
        ds = ring + self.stages * self.stage_stride
        dq = ds + self.ds_buffers * self.ds_bytes
        bar = dq + 2 * self.dq_stage_bytes
        return {"k": 0, "v": off_v, "ring": ring, "ds": ds, "dq": dq, "bar": bar}

    @property
    def smem_bytes(self) -> int:
        return self.offsets["bar"] + 8 * (1 + 2 * self.stages)

    @property
    def name(self) -> str:
        return (f"nvatom_attn_bwd_sm90_{self.dtype}_d{self.head_dim}_s{self.stages}"
                f"{'_causal' if self.causal else ''}_dq{self.dq_split}"
                f"_{self.dq_reduce}{'_win' if self.window else ''}"
                f"{'_cap' if self.softcap else ''}{'_varlen' if self.varlen else ''}"
                f"_r{self.consumer_regs}")

    @property
    def s_form(self) -> WgmmaForm:
        """S^T = K Q^T and dP^T = V dO^T: m64n64, both operands K-major in shared memory."""
        return _form(BWD_BLOCK_M, self.dtype, "ss")

    @property
    def kv_form(self) -> WgmmaForm:
        """dV += P^T dO and dK += dS^T Q: m64n<D>, A from registers."""
        return _form(self.head_dim, self.dtype, "rs")

    @property
    def dq_n(self) -> int:
        """The N of one warpgroup's dQ product."""
        return self.head_dim // 2 if self.dq_split == "n" else self.head_dim

    @property
    def dq_form(self) -> WgmmaForm:
        """dQ = dS K: m64n<D/2 or D>, A (dS) and B (K) MN-major in shared memory."""
        return _form(self.dq_n, self.dtype, "ss")


def default_bwd_config(dtype: str = "bf16", head_dim: int = 128, causal: bool = False,
                       window: bool = False, softcap: bool = False) -> AttentionBwdSm90Config:
    """The configuration per head dim: D = 128 splits dQ's columns between the warpgroups
    (2 stages: 160 KB of shared memory), D = 64 its K (its D/2 = 32 columns are not a whole
    SW128 atom) with 3 stages."""
    if head_dim == 64:
        return AttentionBwdSm90Config(dtype, head_dim, 3, causal, "k", window=window,
                                      softcap=softcap)
    return AttentionBwdSm90Config(dtype, head_dim, 2, causal, "n", window=window,
                                  softcap=softcap)
