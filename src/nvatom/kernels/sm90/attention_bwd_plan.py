"""What the SM90 attention backward derives from the layout algebra: one shared-memory tile
read as two operands (Q and dO: the K-major B of ``S^T = K Q^T`` and the MN-major B of
``dK += dS^T Q``; K: the K-major A of ``S^T`` and the MN-major B of ``dQ = dS K``), the dS
tile written by ``stmatrix`` as (KV row, Q column) rows and read as the MN-major A of dQ, the
WGMMA descriptors of each, and the register packing that serves both the ``rs`` A fragment
and ``stmatrix`` (PTX ISA "wgmma" register fragments and "Matrix Descriptor Format",
"stmatrix")."""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

from nvatom.atoms.wgmma_fragments import accumulator_coord
from nvatom.descriptors.wgmma import WgmmaDescriptor, make_wgmma_desc
from nvatom.kernels.sm90.attention_bwd_config import (
    BWD_BLOCK_M,
    BWD_BLOCK_N,
    DQ_BOX,
    AttentionBwdSm90Config,
)
from nvatom.kernels.sm90.attention_config import _CHUNK, AttentionSm90Error
from nvatom.kernels.sm90.attention_plan import (
    STSM,
    Retile,
    o_retile,
    p_retile,
    stsm_lane_offset,
    stsm_matrix_origin,
)
from nvatom.kernels.sm90.limits import SW128 as _SW128
from nvatom.layout import tile_to_shape
from nvatom.tables.swizzles import smem_layout

__all__ = ["AttentionBwdPlan", "attention_bwd_plan", "dq_stage_offset", "pack_retile"]


@functools.cache
def pack_retile(block_m: int = BWD_BLOCK_M) -> Retile:
    """The one packing of a thread's m64n<block_m> f32 accumulator (P^T, dS^T) into 16-bit
    pairs that is both the ``rs`` A fragment of K step ``kk`` (:func:`p_retile`: dV += P^T dO,
    dK += dS^T Q) and the ``stmatrix.x4`` registers of 16-column block ``kk``
    (:func:`o_retile`: dS^T into shared memory): raises unless the two derivations agree, so
    one ``cvt`` per pair serves both."""
    a, s = p_retile(block_m), o_retile(block_m)
    if a != s:  # pragma: no cover - fragment formula guard
        raise AttentionSm90Error(f"m64n{block_m}: the rs A packing and the stmatrix packing "
                                 "differ; dS needs two packings")
    return a


@dataclasses.dataclass(frozen=True)
class AttentionBwdPlan:
    kv_layout: Any  # K and V: 128 x D, K-major SW128 (rows: KV)
    tile_layout: Any  # Q and dO: 64 x D, K-major SW128 (rows: Q)
    ds_layout: Any  # dS: (Q 64, KV 128) as the MN-major A of dQ
    kv_descs: tuple[WgmmaDescriptor, ...]  # A of S^T / dP^T per K step (D / 16), consumer 0
    kv_consumer_offset: int  # bytes between the consumers' 64-row halves of K and V
    tile_k_descs: tuple[WgmmaDescriptor, ...]  # B of S^T / dP^T (K-major) per K step (D / 16)
    tile_mn_descs: tuple[WgmmaDescriptor, ...]  # B of dV / dK (MN-major) per K step (64 / 16)
    k_mn_descs: tuple[WgmmaDescriptor, ...]  # B of dQ (K MN-major) per K step, consumer 0
    ds_descs: tuple[WgmmaDescriptor, ...]  # A of dQ per K step, consumer 0
    dq_consumer_offsets: tuple[int, int]  # (K's, dS's) bytes added for consumer 1's dQ
    kv_boxes: tuple[int, ...]  # byte offsets of the D/64 TMA boxes of K or V
    tile_boxes: tuple[int, ...]  # of Q or dO
    retile: Retile  # [K step / 16-column block][register] = accumulator values packed
    dq_layout: Any  # a warpgroup's dQ staging tile: 64 x dq_n f32, K-major SW128
    dq_boxes: tuple[int, ...]  # byte offsets of its 32-column TMA boxes


def _same_bytes(name: str, a: Any, b: Any, rows: int, cols: int) -> None:
    """``a((r, c)) == b((c, r))`` for every element: one tile, two operand views."""
    for r in range(rows):
        for c in range(cols):
            if a((r, c)) != b((c, r)):  # pragma: no cover - algebra guard
                raise AttentionSm90Error(f"{name}: element ({r}, {c}) differs between the "
                                         "K-major and the MN-major view")


@functools.lru_cache(maxsize=16)
def attention_bwd_plan(cfg: AttentionBwdSm90Config) -> AttentionBwdPlan:
    d, bm, bn = cfg.head_dim, BWD_BLOCK_M, BWD_BLOCK_N
    kl = smem_layout(bn, d, 16, "K", _SW128)
    tl = smem_layout(bm, d, 16, "K", _SW128)
    atom = _SW128.atom(16, "MN")
    tmn = tile_to_shape(atom, (d, bm), (1, 0))  # (N = D, K = Q rows)
    kmn = tile_to_shape(atom, (d, bn), (1, 0))  # (N = D, K = KV rows)
    dsk = smem_layout(bn, bm, 16, "K", _SW128)  # (KV row, Q column): stmatrix's view
    dsmn = tile_to_shape(atom, (bm, bn), (1, 0))  # (M = Q, K = KV): the dQ MMA's view
    _same_bytes("Q / dO tile", tl, tmn, bm, d)
    _same_bytes("K tile", kl, kmn, bn, d)
    _same_bytes("dS tile", dsk, dsmn, bn, bm)

    ka = make_wgmma_desc(smem_layout(64, _CHUNK, 16, "K", _SW128), 16, "K")
    kv_descs = tuple(dataclasses.replace(ka, start_address=kl((0, 16 * s)) * 2)
                     for s in range(d // 16))
    tb = make_wgmma_desc(smem_layout(bm, _CHUNK, 16, "K", _SW128), 16, "K")
    tile_k = tuple(dataclasses.replace(tb, start_address=tl((0, 16 * s)) * 2)
                   for s in range(d // 16))
    tm = make_wgmma_desc(tmn, 16, "MN")
    tile_mn = tuple(dataclasses.replace(tm, start_address=tmn((0, 16 * s)) * 2)
                    for s in range(bm // 16))
    km = make_wgmma_desc(kmn, 16, "MN")
    da = make_wgmma_desc(dsmn, 16, "MN")
    # dQ's K steps: all 128 KV rows ("n": consumer c takes columns c D/2 ..), or the
    # consumer's own 64 ("k": consumer c takes rows 64 c ..)
    steps = bn // 16 if cfg.dq_split == "n" else 64 // 16
    k_mn = tuple(dataclasses.replace(km, start_address=kmn((0, 16 * s)) * 2)
                 for s in range(steps))
    ds_descs = tuple(dataclasses.replace(da, start_address=dsmn((0, 16 * s)) * 2)
                     for s in range(steps))
    if cfg.dq_split == "n":
        dq_off = (kmn((d // 2, 0)) * 2, 0)
        for s in range(steps):
            if kmn((d // 2, 16 * s)) * 2 - kmn((0, 16 * s)) * 2 != dq_off[0]:
                raise AttentionSm90Error("K's column halves differ by K step")  # pragma: no cover
    else:
        dq_off = (kmn((0, 64)) * 2, dsmn((0, 64)) * 2)
        for s in range(steps):
            if (kmn((0, 64 + 16 * s)) * 2 - kmn((0, 16 * s)) * 2,
                    dsmn((0, 64 + 16 * s)) * 2 - dsmn((0, 16 * s)) * 2) != dq_off:
                raise AttentionSm90Error("K's row halves differ by K step")  # pragma: no cover
    kvoff = kl((64, 0)) * 2
    for s in range(d // 16):
        if kl((64, 16 * s)) * 2 - kl((0, 16 * s)) * 2 != kvoff:  # pragma: no cover
            raise AttentionSm90Error("KV consumer offset differs between K steps")
    kv_boxes = tuple(kl((0, _CHUNK * c)) * 2 for c in range(cfg.chunks))
    tile_boxes = tuple(tl((0, _CHUNK * c)) * 2 for c in range(cfg.chunks))
    for name, boxes, size in (("K / V", kv_boxes, bn), ("Q / dO", tile_boxes, bm)):
        for c, off in enumerate(boxes):  # each box: `size` rows of 128 bytes, contiguous
            if off != c * size * 128 or off % 1024:  # pragma: no cover - algebra guard
                raise AttentionSm90Error(f"{name} box {c} at byte {off}, not {c * size * 128}")
    _check_ds_store(dsk)
    dql = smem_layout(bm, cfg.dq_n, 32, "K", _SW128)
    dq_boxes = tuple(dql((0, DQ_BOX * c)) * 4 for c in range(cfg.dq_n // DQ_BOX))
    for c, off in enumerate(dq_boxes):
        if off != c * bm * 128:  # pragma: no cover - algebra guard
            raise AttentionSm90Error(f"dQ staging box {c} at byte {off}, not {c * bm * 128}")
    _check_dq_stage(dql, cfg.dq_n)
    return AttentionBwdPlan(kl, tl, dsmn, kv_descs, kvoff, tile_k, tile_mn, k_mn, ds_descs,
                            dq_off, kv_boxes, tile_boxes, pack_retile(bm), dql, dq_boxes)


def dq_stage_offset(warp: int, lane: int, i: int) -> int:
    """Byte offset, in a warpgroup's dQ staging tile, of value ``i`` (even: the first of a
    ``st.shared.v2.f32`` pair) of the thread's m64n<N> dQ fragment: the PTX arithmetic of the
    kernel, ``box + row 128 + (y ^ 32 (j % 4))`` with ``y = 16 ((tig / 2) ^ g) + 8 (tig % 2)``
    (row ``16 warp + g + 8 h``, column ``8 j + 2 tig``, ``j = i / 4``); checked against the
    SW128 layout by :func:`attention_bwd_plan`."""
    g, tig = divmod(lane, 4)
    j, h = i // 4, (i // 2) % 2
    y = 16 * ((tig // 2) ^ g) + 8 * (tig % 2)
    box, jj = divmod(j, DQ_BOX // 8)
    return box * BWD_BLOCK_M * 128 + (16 * warp + g + 8 * h) * 128 + (y ^ (32 * jj))


def _check_dq_stage(dql: Any, n: int) -> None:
    """Every dQ value's staging address (:func:`dq_stage_offset`) is where the layout puts
    its (row, column), and each pair's second value sits 4 bytes after the first."""
    for warp in range(4):
        for lane in range(32):
            t = 32 * warp + lane
            for i in range(0, n // 2, 2):
                for e in (0, 1):
                    row, col = accumulator_coord(n, t, i + e)
                    if dq_stage_offset(warp, lane, i) + 4 * e != dql((row, col)) * 4:
                        raise AttentionSm90Error(  # pragma: no cover - algebra guard
                            f"dQ staging address of warp {warp} lane {lane} value {i + e}")


def _check_ds_store(dsk: Any) -> None:
    """The dS stores' addresses are the dS tile's: consumer ``c``'s ``stmatrix.x4`` of block
    ``q`` (16 Q columns) writes lane ``l``'s row at ``64 c 128 + (stsm_lane_offset(warp, l)
    ^ 32 q)``, which must be where the layout puts that matrix row's first element."""
    for cw in (0, 1):
        for w in range(4):
            for lane in range(STSM.address_lanes):
                j, t = divmod(lane, STSM.rows)
                r0, c0 = stsm_matrix_origin(j)
                for q in range(BWD_BLOCK_M // 16):
                    want = dsk((64 * cw + 16 * w + r0 + t, 16 * q + c0)) * 2
                    got = 64 * cw * 128 + (stsm_lane_offset(w, lane) ^ (32 * q))
                    if got != want:  # pragma: no cover - algebra guard
                        raise AttentionSm90Error(f"dS stmatrix address of consumer {cw} warp "
                                                 f"{w} lane {lane} block {q}: {got} != {want}")
