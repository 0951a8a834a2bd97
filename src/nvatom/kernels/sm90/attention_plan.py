"""What the SM90 attention kernel derives from the layout algebra: the Q, K, V shared-memory
layouts and their WGMMA descriptors, the TMA boxes, the P retile (S accumulator -> ``rs`` A
fragment) and the O retile and stmatrix row addresses of the TMA epilogue, each checked
against the atoms' (thread, value) layouts (PTX ISA "wgmma" register fragments,
"stmatrix", "Matrix Descriptor Format")."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import Any

from nvatom.atoms.copy import MATRIX_COPIES
from nvatom.atoms.wgmma_fragments import WARPGROUP, a_layout, accumulator_layout
from nvatom.descriptors.wgmma import WgmmaDescriptor, make_wgmma_desc
from nvatom.kernels.sm90.attention_config import (
    _CHUNK,
    BLOCK_M,
    AttentionSm90Config,
    AttentionSm90Error,
)
from nvatom.kernels.sm90.limits import SW128 as _SW128
from nvatom.layout import tile_to_shape
from nvatom.tables.swizzles import smem_layout

__all__ = [
    "AttentionPlan",
    "attention_plan",
    "o_retile",
    "p_retile",
    "stsm_lane_offset",
    "stsm_matrix_origin",
]

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
    q_descs: tuple[WgmmaDescriptor, ...]  # per K step (D / 16) of S = Q K^T, consumer 0
    k_descs: tuple[WgmmaDescriptor, ...]
    v_descs: tuple[WgmmaDescriptor, ...]  # per K step (BN / 16) of O += P V
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
    qb = make_wgmma_desc(smem_layout(64, _CHUNK, 16, "K", _SW128), 16, "K")
    kb = make_wgmma_desc(smem_layout(bn, _CHUNK, 16, "K", _SW128), 16, "K")
    vb = make_wgmma_desc(vl, 16, "MN")
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
