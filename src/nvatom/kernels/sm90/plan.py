"""What the SM90 GEMM derives from the layout algebra: the A and B stage layouts (SW128,
K-major; MN-major B tiled K first), their WGMMA descriptors per K step
(:func:`nvatom.descriptors.wgmma.make_wgmma_desc`), B's TMA boxes and promoted N parts, and
the epilogue's staging tile (PTX ISA "Matrix Descriptor Format")."""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

from nvatom.atoms.smem import smem_layout
from nvatom.descriptors.wgmma import WgmmaDescriptor, make_wgmma_desc
from nvatom.kernels.sm90.config import _ROW, GemmSm90Config, GemmSm90Error
from nvatom.kernels.sm90.limits import SW128 as _SW128
from nvatom.layout import tile_to_shape

__all__ = [
    "GemmSm90Plan",
    "gemm_sm90_plan",
]


@dataclasses.dataclass(frozen=True)
class GemmSm90Plan:
    """What the kernel derives from the layout algebra (shown by tests, used by the build)."""

    a_layout: Any  # 64*C x BK (one stage)
    b_layout: Any  # BN x BK (one stage)
    a_descs: tuple[WgmmaDescriptor, ...]  # per K step, stage 0, consumer 0 (relative offsets)
    b_descs: tuple[WgmmaDescriptor, ...]
    a_consumer_offset: int  # bytes between consumer warpgroups' A rows
    b_box_offsets: tuple[int, ...]  # bytes: each TMA box of B within a stage
    b_box: tuple[int, int]  # TMA box of B (inner, outer) in elements
    c_layout: Any  # 64 x chunk staging tile (output elements)
    b_part_offsets: tuple[int, ...] = (0,)  # bytes: each promoted N part's rows of B


def _b_layout(cfg: GemmSm90Config) -> Any:
    bits = 8 * cfg.in_bytes
    if cfg.b_major == "K":
        return smem_layout(cfg.block_n, cfg.block_k, bits, "K", _SW128)
    # MN-major: 64-element (128-byte) MN atoms; tile K first so each 64(N) x BK TMA box is one
    # contiguous block of BK rows (the box's memory order).
    return tile_to_shape(_SW128.atom(bits, "MN"), (cfg.block_n, cfg.block_k), (1, 0))


@functools.lru_cache(maxsize=64)
def gemm_sm90_plan(cfg: GemmSm90Config) -> GemmSm90Plan:
    bits = 8 * cfg.in_bytes
    ks = cfg.form.k
    a_l = smem_layout(cfg.block_m, cfg.block_k, bits, "K", _SW128)
    a_one = smem_layout(64, cfg.block_k, bits, "K", _SW128)
    a_base = make_wgmma_desc(a_one, bits, "K")
    a_descs = tuple(dataclasses.replace(a_base, start_address=a_l((0, s * ks)) * bits // 8)
                    for s in range(cfg.k_steps))
    b_l = _b_layout(cfg)
    b_base = make_wgmma_desc(b_l, bits, cfg.b_major)
    b_descs = tuple(dataclasses.replace(b_base, start_address=b_l((0, s * ks)) * bits // 8)
                    for s in range(cfg.k_steps))
    if cfg.b_major == "K":
        boxes: tuple[int, ...] = (0,)
        box = (cfg.block_k, cfg.block_n // (2 if cfg.mcast else 1))
        if cfg.mcast:
            boxes = (b_l((cfg.block_n // 2, 0)) * bits // 8,)
    else:
        per = _ROW // cfg.in_bytes  # 64 elements of N per box
        boxes = tuple(b_l((j * per, 0)) * bits // 8 for j in range(cfg.block_n // per))
        box = (per, cfg.block_k)
    for off in boxes:
        if off % 1024:
            raise GemmSm90Error(f"B box offset {off} is not 1024-byte aligned")  # pragma: no cover
    c_l = smem_layout(64, cfg.c_chunk_cols, 8 * cfg.out_bytes, "K", _SW128)
    parts: tuple[int, ...] = (0,)
    if cfg.promote:
        pn = cfg.block_n // cfg.promote_parts
        parts = tuple(b_l((q * pn, 0)) * bits // 8 for q in range(cfg.promote_parts))
        for off in parts:  # a part starts on a whole SW128 pattern (8 rows of 128 bytes)
            if off % 1024:
                raise GemmSm90Error(f"B part offset {off} is not 1024-byte aligned")
    return GemmSm90Plan(a_l, b_l, a_descs, b_descs, a_l((64, 0)) * bits // 8, boxes, box, c_l,
                        parts)
