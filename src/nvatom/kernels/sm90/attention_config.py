"""The SM90 attention forward's configuration: :class:`AttentionSm90Config` (element type,
head dim, KV tile rows, pipeline depth, causal mask, FA3 overlap and ping-pong, register
budget, epilogue) with its checks, the tuned :func:`default_config` per head dim, and the
WGMMA forms it selects (PTX ISA "wgmma.mma_async")."""

from __future__ import annotations

import dataclasses
import functools
import math

from nvatom.atoms.sm90 import FORMS, WgmmaForm
from nvatom.atoms.wgmma_fragments import WARPGROUP
from nvatom.errors import NvatomError
from nvatom.kernels.sm90.limits import MAX_SMEM as _MAX_SMEM
from nvatom.kernels.sm90.limits import REGS as _REGS

__all__ = [
    "DTYPES",
    "EPILOGUES",
    "HEAD_DIMS",
    "AttentionSm90Config",
    "AttentionSm90Error",
    "default_config",
]

DTYPES = ("bf16", "f16")
EPILOGUES = ("tma", "direct")  # O via stmatrix + TMA store / per-thread st.global
HEAD_DIMS = (64, 128, 256)
BLOCK_NS = (64, 80, 96, 128, 144, 160, 176, 192)  # KV tile rows: multiples of 16 (the rs K)
BLOCK_M = 128  # Q rows per CTA: two consumer warpgroups of 64 (WGMMA's M)
_CHUNK = 64  # 16-bit elements in one 128-byte SW128 row: one TMA box's inner extent
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
    # logit softcapping (Gemma 2, FlashAttention's softcap): scores become
    # softcap * tanh(scale q.k / softcap); the kernel takes scale / softcap ("softcap_pre")
    # and softcap * log2(e) in place of scale * log2(e)
    softcap: bool = False
    # a sliding window (FlashAttention's window_size, aligned at the top left): row i sees
    # keys i - left .. i + right; the kernel takes left and right ("win_left", "win_right",
    # the host's effective values: never past the sequences), starts each CTA's KV walk at
    # the first tile its window reaches and masks both bounds
    window: bool = False
    # packed variable-length batches (FlashAttention's varlen): q, k, v are (total, heads, D)
    # seen as one batch of length total; CTA z = sequence b reads its rows from
    # cu_seqlens_q / cu_seqlens_k on the device (clamped to the totals) and runs as a dense
    # problem of those lengths (a CTA past its sequence's rows exits); O and the lse (heads,
    # total_q) are stored per thread ("direct": a TMA box would cross into the next sequence)
    varlen: bool = False

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
        if self.producer_regs * WARPGROUP + 2 * self.consumer_regs * WARPGROUP > _REGS:
            raise AttentionSm90Error("producer_regs + 2 consumer_regs exceed the 64K registers")
        if self.varlen and self.epilogue != "direct":
            raise AttentionSm90Error("varlen stores O per thread (epilogue 'direct'): a TMA "
                                     "box of a sequence's last rows would cross into the next")

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
                f"{'_otma' if self.epilogue == 'tma' else ''}{'_cap' if self.softcap else ''}"
                f"{'_win' if self.window else ''}{'_varlen' if self.varlen else ''}")

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


def default_config(dtype: str = "bf16", head_dim: int = 128, causal: bool = False,
                   softcap: bool = False, window: bool = False) -> AttentionSm90Config:
    """The tuned configuration per head dim (docs/perf.md, "Attention"): KV tiles of 128 rows
    (64 for D = 256, whose O takes 128 registers), 2 stages (4 for D = 64), overlap and split
    release always, ping-pong for causal masks (it won 6 of 6 causal shapes, lost or tied
    5 of 6 full ones); the TMA epilogue except for d 64 with a full mask, the one shape where
    it measured slower than the direct stores (by 1.6%, inside the rounds' spread; log
    entry 9)."""
    bn, stages = {64: (128, 4), 128: (128, 2), 256: (64, 2)}.get(head_dim, (128, 2))
    epilogue = "direct" if head_dim == 64 and not causal else "tma"
    return AttentionSm90Config(dtype, head_dim, bn, stages, causal, pingpong=causal,
                               epilogue=epilogue, softcap=softcap, window=window)


assert math.isclose(_LOG2E * _LN2, 1.0)
