"""The SM90 GEMM's epilogue: accumulators -> 16-bit pairs (``stmatrix.x4``) or f32 pairs
(``st.shared.v2.f32``) into SW128 staging buffers -> ``fence.proxy.async`` -> TMA store, one
128-byte-wide chunk at a time; the per-lane staging addresses checked against the staging
layout (PTX ISA "stmatrix", "cp.async.bulk.tensor", "fence.proxy")."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from nvatom.atoms.copy import MATRIX_COPIES
from nvatom.atoms.wgmma_fragments import WARPGROUP, accumulator_coord
from nvatom.kernels.pipeline import EpilogueRing
from nvatom.kernels.sm90 import fusion
from nvatom.kernels.sm90.config import _ROW, GemmSm90Config, GemmSm90Error
from nvatom.kernels.sm90.emit import stmatrix_lane_offset as _stsm_lane
from nvatom.kernels.sm90.emit import u32 as _u32
from nvatom.kernels.sm90.plan import GemmSm90Plan
from nvatom.kernels.sm90.row_scales import _row_scale
from nvatom.kernels.sm90.skeleton import _Build
from nvatom.ptx import copy_emit as CE
from nvatom.ptx import sync_emit as SE
from nvatom.ptx.builder import Reg
from nvatom.ptx.copy_emit import emit_matrix_copy


def _check_c_offsets(cfg: GemmSm90Config, plan: GemmSm90Plan) -> None:
    """The epilogue's per-lane address formulas equal the staging layout's offsets (so the
    PTX arithmetic below is the layout algebra, evaluated once here)."""
    c = plan.c_layout
    eb = cfg.out_bytes
    for lane in range(32):
        for w in range(4):
            if cfg.out_bytes == 2:  # stmatrix.x4: lane supplies row t of matrix j
                j, t = lane // 8, lane % 8
                row = 16 * w + 8 * (j % 2) + t
                base = row * _ROW + (((j >> 1) ^ t) << 4)
                for q in range(cfg.c_chunk_cols // 16):
                    want = c((row, 16 * q + 8 * (j >> 1))) * eb
                    if base ^ (32 * q) != want:  # pragma: no cover - algebra guard
                        raise GemmSm90Error(f"stmatrix address of lane {lane} q {q}: "
                                            f"{base ^ (32 * q)} != layout {want}")
            else:  # st.shared.v2.f32 of accumulator pairs
                g, tig = lane // 4, lane % 4
                for half in (0, 1):
                    row = 16 * w + g + 8 * half
                    base = row * _ROW + (((tig >> 1) ^ g) << 4) + (tig & 1) * 8
                    for cb in range(cfg.c_chunk_cols // 8):
                        want = c((row, 8 * cb + 2 * tig)) * eb
                        if base ^ (32 * cb) != want:  # pragma: no cover
                            raise GemmSm90Error("f32 epilogue address mismatch")


def _acc_index(n: int, row_half: int, col: int) -> int:
    """Index i of accumulator element d_i at (row group half, column) for thread 0 pattern:
    from the fragment formula, (i // 4) = col // 8, (i // 2) % 2 = row_half, i % 2 = col % 2."""
    i = 4 * (col // 8) + 2 * row_half + col % 2
    r, c = accumulator_coord(n, 0, i)
    assert (r, c) == (8 * row_half, col), (r, c)  # thread 0 owns rows 0/8, cols 0,1 mod 8
    return i


@dataclasses.dataclass
class _Epilogue:
    """A consumer warpgroup's epilogue registers: its lane's offset in a staging tile, its
    two staging buffers (the ring: written by the warpgroup, stored and waited for by its
    lead thread) and its named barrier."""

    c_lane: Reg
    ring: EpilogueRing
    bar_id: Reg
    is_lead: Reg  # thread 0 of the warpgroup
    cw: Reg  # consumer index


def _epilogue_setup(b: _Build, cw: Reg, ltid: Reg, is_lead: Reg) -> _Epilogue:
    """The per-lane staging address (checked against the staging layout by
    :func:`_check_c_offsets`), this warpgroup's two staging buffers and its barrier id."""
    k, cfg = b.k, b.cfg
    lane = _u32(k, "and.b32", b.tid, 31)
    warp = _u32(k, "shr.u32", ltid, 5)
    if cfg.out_bytes == 2:
        c_lane = _stsm_lane(k, lane, warp, _ROW)
    else:
        g8 = _u32(k, "shr.u32", lane, 2)
        tig = _u32(k, "and.b32", lane, 3)
        row = _u32(k, "mad.lo.u32", warp, 16, g8)
        col = _u32(k, "shr.u32", tig, 1)
        k.ins("xor.b32", col, col, g8)
        k.ins("shl.b32", col, col, 4)
        lo = _u32(k, "and.b32", tig, 1)
        k.ins("shl.b32", lo, lo, 3)
        k.ins("add.u32", col, col, lo)
        c_lane = _u32(k, "mad.lo.u32", row, _ROW, col)
    c_buf0 = _u32(k, "mad.lo.u32", cw, 2 * cfg.c_buffer_bytes, b.off_c)
    k.ins("add.u32", c_buf0, c_buf0, b.smem)  # this warpgroup's two staging buffers
    bar_id = _u32(k, "add.u32", cw, 1)
    ring = EpilogueRing.strided(k, "gemm_staging", c_buf0, cfg.c_buffer_bytes, 2, is_lead,
                                lead_only=True)
    return _Epilogue(c_lane, ring, bar_id, is_lead, cw)


def _epilogue(b: _Build, ep: _Epilogue, acc: Sequence[Reg],
              scale: Reg | tuple[Reg, Reg] | None, mb: Reg, nb: Reg,
              half: int | None = None, staged: Reg | None = None) -> None:
    """One tile's accumulators -> 16-bit pairs (``stmatrix.x4``) or f32 pairs
    (``st.shared.v2.f32``) into the SW128 staging buffers, one 128-byte-wide chunk at a time,
    alternating buffers -> ``fence.proxy.async`` -> one TMA store per chunk."""
    k, cfg = b.k, b.cfg
    bm, bn = cfg.block_m, cfg.block_n
    k.comment("epilogue: registers -> SW128 staging (stmatrix) -> TMA store, per chunk")
    row0 = _u32(k, "mul.lo.u32", mb, bm)
    if half is None:  # cooperative: this warpgroup's 64 rows of the tile
        k.ins("mad.lo.u32", row0, ep.cw, 64, row0)
    elif half:  # ping-pong: the second 64-row half of this warpgroup's tile
        k.ins("add.u32", row0, row0, 64 * half)
    col0 = _u32(k, "mul.lo.u32", nb, bn)
    if staged is not None:  # the tile's scales in shared memory (_stage_row_scales)
        CE.emit_wait_all(k)
        SE.named_barrier_sync(k, ep.bar_id, WARPGROUP)
        _row_scale(b, acc, scale, row0, col0, staged)  # type: ignore[arg-type]
    elif isinstance(scale, tuple):
        _row_scale(b, acc, scale, row0, col0)
    elif scale is not None:
        for r in acc:
            k.ins("mul.f32", r, r, scale)
    fused = None
    if cfg.epilogue is not None:  # bias, C, activation, residual (nvatom.kernels.sm90.fusion)
        assert b.dims is not None
        fused = fusion.FusedEpilogue(k, cfg, b.epi_params, b.tid, row0, col0, b.dims, half)
    nchunks = bn // cfg.c_chunk_cols
    stsm = next(a for a in MATRIX_COPIES if a.name == "atom.stsm<m8n8.x4>")
    ring, cc = ep.ring, cfg.c_chunk_cols
    for ch in range(nchunks):
        groups = range(ch * cfg.c_chunk_cols // 8, (ch + 1) * cfg.c_chunk_cols // 8)
        loaded = fused.load(groups) if fused is not None else None  # latency under the wait
        ring.address(ch % 2)
        # the store that last read this buffer is done: one store (the other buffer's) may
        # stay in flight, except on a tile's first chunk when a tile has an odd number of
        # chunks: then the previous tile's last store read this same buffer (buffer 0), so
        # wait for all (docs/perf.md, "FP8 tile by wave count": a race seen at 128 x 192;
        # the ring refuses a weaker wait when the kernel is built)
        ring.wait(_store_wait(ch, nchunks))
        ring.sync(ep.bar_id, WARPGROUP)
        if fused is not None and loaded is not None:
            fused.apply(acc, groups, loaded)
        base = _u32(k, "add.u32", ring.write(ch % 2), ep.c_lane)
        if cfg.out_bytes == 2:
            for q in range(cc // 16):
                c16 = ch * cc + 16 * q  # first column of this 16 x 16 block
                regs = []
                for jj in range(4):  # matrix jj: rows 8*(jj%2).., cols c16 + 8*(jj//2)..
                    i0 = _acc_index(bn, jj % 2, c16 + 8 * (jj // 2))
                    regs.append(SE.cvt_pack_f32(k, cfg.out_dtype, acc[i0 + 1], acc[i0],
                                              target=b.target))
                addr = _u32(k, "xor.b32", base, 32 * q)
                emit_matrix_copy(k, stsm, regs, addr)
        else:
            for cb in range(cc // 8):
                for half in (0, 1):
                    i0 = _acc_index(bn, half, ch * cc + 8 * cb)
                    addr = _u32(k, "xor.b32", base, 32 * cb)
                    k.ins("st.shared.v2.f32", f"[{addr}+{half * 1024}]",
                          [acc[i0], acc[i0 + 1]])
        ring.fence()
        ring.sync(ep.bar_id, WARPGROUP)
        ring.store(ch % 2, b.tmaps[2], lambda x=ch * cc: [_u32(k, "add.u32", col0, x), row0])


def _store_wait(ch: int, nchunks: int) -> int:
    """The ``cp.async.bulk.wait_group.read`` count before chunk ``ch`` of a tile of
    ``nchunks`` chunks: 1 (the other buffer's store may stay in flight), 0 on the first chunk
    of a tile with an odd number of chunks (the previous tile's last store read buffer 0)."""
    return 0 if ch == 0 and nchunks % 2 else 1
