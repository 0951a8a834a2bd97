"""FP8 row-wise scales in the SM90 GEMM's epilogue: ``acc[m, n] *= scale_a[m] *
scale_b[n]`` from global memory or from a staging area filled with cp.async at the tile's
start (``row_scale_stage``), and the accumulator-fragment offsets both read, checked against
:func:`nvatom.atoms.wgmma_fragments.accumulator_coord` (PTX ISA "cp.async")."""

from __future__ import annotations

import functools
from collections.abc import Sequence

from nvatom.atoms.copy import ASYNC_COPIES
from nvatom.atoms.wgmma_fragments import WARPGROUP, accumulator_coord
from nvatom.kernels.sm90.config import _STAGED_SA_BYTES, GemmSm90Error
from nvatom.kernels.sm90.emit import u32 as _u32
from nvatom.kernels.sm90.skeleton import _Build
from nvatom.ptx import copy_emit as CE
from nvatom.ptx.builder import Reg


def _row_col_base(thread: int) -> tuple[int, int]:
    """(row, column) of a thread's accumulator element 0 (the PTX arithmetic of
    :func:`_row_scale`)."""
    lane = thread % 32
    return 16 * (thread // 32) + lane // 4, 2 * (lane % 4)


@functools.cache
def _check_row_cols(bn: int) -> None:
    """Every accumulator element ``i`` of every thread sits at its element 0's (row, column)
    plus (8 * ((i // 2) % 2), 8 * (i // 4) + i % 2): the offsets :func:`_row_scale` uses,
    checked against the fragment formula."""
    for t in range(WARPGROUP):
        r0, c0 = _row_col_base(t)
        for i in range(bn // 2):
            want = (r0 + 8 * ((i // 2) % 2), c0 + 8 * (i // 4) + i % 2)
            if accumulator_coord(bn, t, i) != want:  # pragma: no cover - fragment guard
                raise GemmSm90Error(f"row-scale offsets of thread {t} element {i}")


def _stage_row_scales(b: _Build, ptrs: tuple[Reg, Reg], cw: Reg, ltid: Reg, mb: Reg,
                      nb: Reg) -> Reg:
    """``row_scale_stage``, at a tile's start: this warpgroup's 64 rows of ``scale_a``
    (threads 0..63, one f32 each; rows past M read ``scale_a[M - 1]``) and the tile's
    ``block_n`` columns of ``scale_b`` (column pairs, 8 bytes a thread; pairs past N read
    ``scale_b[0..1]``) copied with cp.async into its staging area (``scale_a`` at +0,
    ``scale_b`` at +256 bytes) and committed as one group; returns the area's address.  The
    epilogue waits for the group and syncs the warpgroup before reading
    (:func:`_row_scale` with ``staged``); the previous tile's readers are past the epilogue's
    first named barrier before any thread issues these copies."""
    k, cfg = b.k, b.cfg
    assert b.dims is not None
    m, n = b.dims[0], b.dims[1]
    ga, gb = ptrs
    bn, ssb = cfg.block_n, cfg.scale_stage_bytes
    k.comment("row_scale_stage: this tile's row-wise scales -> shared memory (cp.async)")
    base = _u32(k, "mad.lo.u32", cw, ssb, b.off_full - cfg.consumers * ssb)
    k.ins("add.u32", base, base, b.smem)
    cp4 = next(a for a in ASYNC_COPIES if a.name == "atom.simt_async_copy<4>")
    cp8 = next(a for a in ASYNC_COPIES if a.name == "atom.simt_async_copy<8>")
    skip = k.fresh_label("sa_staged")
    out = k.reg("pred")
    k.ins("setp.ge.u32", out, ltid, 64)
    k.bra(skip, out)
    row = _u32(k, "mad.lo.u32", mb, cfg.block_m, ltid)
    k.ins("mad.lo.u32", row, cw, 64, row)
    mlast = _u32(k, "sub.u32", m, 1)
    k.ins("min.u32", row, row, mlast)
    src = k.reg("u64")
    k.ins("mad.wide.u32", src, row, 4, ga)
    CE.emit_cp_async(k, cp4, _u32(k, "mad.lo.u32", ltid, 4, base), src)
    k.label(skip)
    pairs = bn // 2
    for i in range(-(-pairs // WARPGROUP)):
        q = _u32(k, "add.u32", ltid, WARPGROUP * i)
        done = None
        if pairs - WARPGROUP * i < WARPGROUP:
            done = k.fresh_label("sb_staged")
            past = k.reg("pred")
            k.ins("setp.ge.u32", past, q, pairs)
            k.bra(done, past)
        col = _u32(k, "mad.lo.u32", nb, bn, _u32(k, "shl.b32", q, 1))
        inside = k.reg("pred")
        k.ins("setp.lt.u32", inside, col, n)
        k.ins("selp.u32", col, col, 0, inside)
        src = k.reg("u64")
        k.ins("mad.wide.u32", src, col, 4, gb)
        dst = _u32(k, "mad.lo.u32", q, 8, base)
        k.ins("add.u32", dst, dst, _STAGED_SA_BYTES)
        CE.emit_cp_async(k, cp8, dst, src)
        if done is not None:
            k.label(done)
    CE.emit_commit_group(k)
    return base


def _row_scale(b: _Build, acc: Sequence[Reg], ptrs: tuple[Reg, Reg], row0: Reg,
               col0: Reg, staged: Reg | None = None) -> None:
    """Row-wise scales: ``acc[m, n] *= scale_a[m] * scale_b[n]`` for this warpgroup's rows
    (``row0``..) and the tile's columns (``col0``..); rows past M read ``scale_a[M - 1]`` and
    columns past N ``scale_b[0]`` (their outputs are dropped by the TMA store).  ``staged``:
    read them from the warpgroup's staging area instead (:func:`_stage_row_scales`: row r of
    the warpgroup at +4 r, column c of the tile at +256 + 4 c)."""
    k, bn = b.k, b.cfg.block_n
    _check_row_cols(bn)
    assert b.dims is not None
    m, n = b.dims[0], b.dims[1]
    ga, gb = ptrs
    k.comment("row-wise scales: acc[m, n] *= scale_a[m] * scale_b[n]")
    lt = _u32(k, "and.b32", b.tid, WARPGROUP - 1)
    lane = _u32(k, "and.b32", lt, 31)
    warp = _u32(k, "shr.u32", lt, 5)
    g = _u32(k, "shr.u32", lane, 2)
    r = _u32(k, "mad.lo.u32", warp, 16, g)
    sa = []
    if staged is not None:  # warpgroup-local row r, tile-local column c
        ra = _u32(k, "mad.lo.u32", r, 4, staged)
        for h in (0, 1):
            v = k.reg("f32")
            k.ins("ld.shared.f32", v, f"[{ra}+{32 * h}]")
            sa.append(v)
        c = _u32(k, "and.b32", lane, 3)
        cb = _u32(k, "mad.lo.u32", c, 8, staged)

        def load_sb(j: int) -> list[Reg]:
            sb = [k.reg("f32"), k.reg("f32")]
            k.ins("ld.shared.v2.f32", sb, f"[{cb}+{_STAGED_SA_BYTES + 32 * j}]")
            return sb
    else:
        k.ins("add.u32", r, r, row0)
        mlast = _u32(k, "sub.u32", m, 1)
        for h in (0, 1):
            rh = _u32(k, "add.u32", r, 8 * h)
            k.ins("min.u32", rh, rh, mlast)
            addr = k.reg("u64")
            k.ins("mad.wide.u32", addr, rh, 4, ga)
            v = k.reg("f32")
            k.ins("ld.global.nc.f32", v, f"[{addr}]")
            sa.append(v)
        c = _u32(k, "and.b32", lane, 3)
        k.ins("shl.b32", c, c, 1)
        k.ins("add.u32", c, c, col0)

        def load_sb(j: int) -> list[Reg]:
            cj = _u32(k, "add.u32", c, 8 * j)
            inside = k.reg("pred")
            k.ins("setp.lt.u32", inside, cj, n)
            k.ins("selp.u32", cj, cj, 0, inside)
            addr = k.reg("u64")
            k.ins("mad.wide.u32", addr, cj, 4, gb)
            sb = [k.reg("f32"), k.reg("f32")]
            k.ins("ld.global.nc.v2.f32", sb, f"[{addr}]")
            return sb
    for j in range(bn // 8):
        sb = load_sb(j)
        for h in (0, 1):
            for e in (0, 1):
                f = k.reg("f32")
                k.ins("mul.f32", f, sa[h], sb[e])
                i = 4 * j + 2 * h + e
                k.ins("mul.f32", acc[i], acc[i], f)
