"""``promote_rs``: the promoted main loop's A from registers (WGMMA ``.rs``): the A
fragment of a K block loaded once by ``ldmatrix.x4`` from the SW128 stage, the lane row
addresses checked against the stage's layout (PTX ISA "ldmatrix", "wgmma.mma_async")."""

from __future__ import annotations

from collections.abc import Sequence

from nvatom.atoms.copy import MATRIX_COPIES
from nvatom.atoms.wgmma_fragments import WARPGROUP
from nvatom.kernels.sm90.config import _ROW, GemmSm90Config, GemmSm90Error
from nvatom.kernels.sm90.emit import u32 as _u32
from nvatom.kernels.sm90.plan import GemmSm90Plan
from nvatom.kernels.sm90.skeleton import _Build
from nvatom.ptx.builder import Reg
from nvatom.ptx.copy_emit import emit_matrix_copy
from nvatom.ptx.wgmma_emit import WgmmaSequence

#: ``promote_rs``: the ldmatrix that loads a k-step's 8-bit A fragment (16-bit view: each
#: register is 4 K-consecutive bytes of one row, the WGMMA ``.rs`` A register's content).
_LDSM_A = "atom.ldsm<m8n8.x4>"


def _rs_lane_offset(lane: int, warp: int, step: int) -> int:
    """``promote_rs``: the byte offset, in a consumer's 64 x 128-byte SW128 A block, of the
    16-byte row that ``lane`` of ``warp`` hands to ``ldmatrix.x4`` for k-step ``step``
    (32 bytes of K): matrix ``j = lane // 8`` is rows ``16 warp + 8 (j % 2) ..`` and bytes
    ``32 step + 16 (j // 2) ..``, lane ``lane`` points at its row ``lane % 8``; SW128 moves
    16-byte chunk ``c`` of row ``r`` to ``c ^ (r % 8)``.  The PTX below computes exactly this
    (checked against the stage's layout by :func:`_check_rs_offsets`)."""
    row = 16 * warp + (lane & 15)
    return (row * _ROW + ((((lane >> 4) ^ lane) & 7) << 4)) ^ (32 * step)


def _check_rs_offsets(cfg: GemmSm90Config, plan: GemmSm90Plan) -> None:
    """:func:`_rs_lane_offset` (plus the consumer's rows) equals the A stage layout's offset
    of each ldmatrix row (the layout algebra, evaluated here once)."""
    bits = 8 * cfg.in_bytes
    for cw in range(cfg.consumers):
        for warp in range(4):
            for lane in range(32):
                for s in range(cfg.k_steps):
                    row = 64 * cw + 16 * warp + 8 * ((lane // 8) % 2) + lane % 8
                    col = (32 * s + 16 * (lane // 16)) * 8 // bits
                    want = plan.a_layout((row, col)) * bits // 8
                    got = cw * plan.a_consumer_offset + _rs_lane_offset(lane, warp, s)
                    if got != want:  # pragma: no cover - algebra guard
                        raise GemmSm90Error(f"promote_rs: ldmatrix row of lane {lane}, warp "
                                            f"{warp}, k-step {s}: {got} != layout {want}")


def _rs_lane_base(b: _Build) -> Reg:
    """``promote_rs``: this thread's ldmatrix row address in stage 0 (k-step 0):
    shared base + A's offset + the consumer's rows + :func:`_rs_lane_offset` (lane, warp, 0)."""
    k = b.k
    lt = _u32(k, "and.b32", b.tid, WARPGROUP - 1)
    cw = _u32(k, "sub.u32", b.wg, 1)
    row = _u32(k, "and.b32", lt, 15)
    warp = _u32(k, "shr.u32", lt, 5)
    k.ins("mad.lo.u32", row, warp, 16, row)  # 16 warp + (lane & 15)
    ch = _u32(k, "shr.u32", lt, 4)
    k.ins("and.b32", ch, ch, 1)  # lane >> 4 (bit 4 of lt is lane's)
    k.ins("xor.b32", ch, ch, lt)
    k.ins("and.b32", ch, ch, 7)  # ((lane >> 4) ^ lane) & 7
    off = _u32(k, "shl.b32", ch, 4)
    k.ins("mad.lo.u32", off, row, _ROW, off)
    k.ins("mad.lo.u32", off, cw, b.plan.a_consumer_offset, off)
    k.ins("add.u32", off, off, b.smem)
    k.ins("add.u32", off, off, b.off_a)
    return off


def _load_a_frag(b: _Build, seq: WgmmaSequence, lane_base: Reg, stage: Reg,
                 into: Sequence[Sequence[Reg]] | None = None) -> list[list[Reg]]:
    """``promote_rs``: this K block's A fragment, 4 k-steps x 4 registers, by 4
    ``ldmatrix.x4`` from stage ``stage`` (row address: :func:`_rs_lane_offset`, the k-step's
    32 bytes by an xor: the stage and consumer bases are 1024-byte aligned).  Every WGMMA of
    the previous K block has retired (``wait_group 0``) before these registers are
    written.  ``into``: the registers to load (else fresh ones)."""
    k, cfg = b.k, b.cfg
    atom = next(a for a in MATRIX_COPIES if a.name == _LDSM_A)
    base = _u32(k, "mad.lo.u32", stage, cfg.a_stage_bytes, lane_base)
    frag = []
    for s in range(cfg.k_steps):
        regs = k.regs("b32", 4) if into is None else list(into[s])
        addr = base if s == 0 else _u32(k, "xor.b32", base, 32 * s)
        emit_matrix_copy(k, atom, regs, addr)
        frag.append(regs)
    seq.write([r for f in frag for r in f])
    return frag
