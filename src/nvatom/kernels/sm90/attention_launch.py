"""Launching the SM90 attention kernels: the forward's parameters, grid and block, the 4-D
tensor maps of Q, K, V and O, and the folded softmax scale; the backward's grid, tensor maps
and stats rows (CUDA Driver API "cuTensorMapEncodeTiled")."""

from __future__ import annotations

from nvatom.atoms.wgmma_fragments import WARPGROUP
from nvatom.descriptors.tma import TensorMap, tma_data_type
from nvatom.kernels.sm90.attention_bwd_config import (
    BWD_BLOCK_M,
    BWD_BLOCK_N,
    DQ_BOX,
    AttentionBwdSm90Config,
)
from nvatom.kernels.sm90.attention_config import _CHUNK, _LOG2E, BLOCK_M, AttentionSm90Config
from nvatom.kernels.sm90.limits import SW128 as _SW128
from nvatom.ptx import tma_emit as TE

__all__ = [
    "bwd_launch_geometry",
    "bwd_stats_rows",
    "bwd_tensor_maps",
    "kernel_params",
    "launch_geometry",
    "scale_log2",
    "softcap_params",
    "tensor_maps",
]


def kernel_params(cfg: AttentionSm90Config | None = None) -> tuple[tuple[str, str], ...]:
    """The kernel's parameters as ``(name, PTX type)`` (then ``softcap_pre`` for a softcap
    configuration, ``win_left``, ``win_right`` for a window, the offsets and totals for
    varlen)."""
    tmap = TE.tensormap_param_type(TE.GEMM_TENSORMAP_ALIGN)
    return (("tmap_q", tmap), ("tmap_k", tmap), ("tmap_v", tmap), ("tmap_o", tmap),
            ("o_ptr", "u64"),
            ("lse_ptr", "u64"), ("seqlen_q", "u32"), ("seqlen_k", "u32"), ("heads", "u32"),
            ("group", "u32"), ("scale_log2", "f32"),
            *((("softcap_pre", "f32"),) if cfg is not None and cfg.softcap else ()),
            *((("win_left", "u32"), ("win_right", "u32")) if cfg is not None and cfg.window
              else ()),
            *((("cu_seqlens_q", "u64"), ("cu_seqlens_k", "u64"), ("total_q", "u32"),
               ("total_k", "u32")) if cfg is not None and cfg.varlen else ()))


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


def softcap_params(scale: float, softcap: float) -> tuple[float, float]:
    """A softcap kernel's ``(scale_log2, softcap_pre)``: ``softcap * log2(e)`` (the factor of
    the capped scores ``tanh(.)`` in the softmax and the lse) and ``scale / softcap``."""
    return softcap * _LOG2E, scale / softcap


def bwd_launch_geometry(cfg: AttentionBwdSm90Config, batch: int, kv_heads: int, seqlen_k: int
                        ) -> tuple[tuple[int, int, int], tuple[int, int, int], int]:
    """The backward's (grid, block, dynamic shared-memory bytes): one CTA per 128 KV rows of
    each KV head."""
    return ((-(-seqlen_k // BWD_BLOCK_N), kv_heads, batch), (3 * WARPGROUP, 1, 1),
            cfg.smem_bytes)


def bwd_stats_rows(seqlen_q: int) -> int:
    """Q rows of the backward's stats tensor (B, H, 2, rows): seqlen_q padded to whole 64-row
    blocks (the pad rows hold -inf and 0: they add nothing)."""
    return -(-seqlen_q // BWD_BLOCK_M) * BWD_BLOCK_M


def bwd_tensor_maps(cfg: AttentionBwdSm90Config, q: _Tensor, k: _Tensor, v: _Tensor,
                    do: _Tensor, stats: _Tensor, dq: _Tensor) -> tuple[TensorMap, ...]:
    """The backward's 4-D tensor maps: Q and dO (boxes 64 columns x 64 rows), K and V (64 x 128),
    128-byte swizzle, as the forward's; the stats (B, H, 2, rows) f32, box 64 x 2 unswizzled;
    the dQ accumulator (B, H, Sq, D) f32, boxes of 32 columns x 64 rows, 128-byte swizzle
    (the kernel's TMA reductions)."""
    dt = tma_data_type(cfg.dtype)
    out = []
    for (ptr, shape, strides), rows in ((q, BWD_BLOCK_M), (k, BWD_BLOCK_N), (v, BWD_BLOCK_N),
                                        (do, BWD_BLOCK_M)):
        bb, hh, ss, dd = shape
        sb, sh, ssq, _ = strides
        out.append(TensorMap("tiled", dt, ptr, (dd, ss, hh, bb), (ssq * 2, sh * 2, sb * 2),
                             box_dims=(_CHUNK, rows, 1, 1), swizzle=_SW128,
                             l2_promotion="256B"))
    ptr, (bb, hh, two, rows), (sb, sh, s2, _) = stats
    out.append(TensorMap("tiled", tma_data_type("f32"), ptr, (rows, two, hh, bb),
                         (s2 * 4, sh * 4, sb * 4), box_dims=(BWD_BLOCK_M, 2, 1, 1)))
    ptr, (bb, hh, ss, dd), (sb, sh, ssq, _) = dq
    out.append(TensorMap("tiled", tma_data_type("f32"), ptr, (dd, ss, hh, bb),
                         (ssq * 4, sh * 4, sb * 4), box_dims=(DQ_BOX, BWD_BLOCK_M, 1, 1),
                         swizzle=_SW128))
    return tuple(out)
