"""The SM90 GEMM's FP8 scales as the consumers read them: per tensor (one product),
row-wise (two addresses for the epilogue), block scales (DeepSeek-V3: a thread's rows of
``scale_a`` and the rows of ``scale_b`` of the tile's column blocks, per K block) and the
grouped kernel's per-group scales (PTX ISA "ld.global.nc")."""

from __future__ import annotations

from collections.abc import Sequence

from nvatom.atoms.wgmma_fragments import WARPGROUP
from nvatom.kernels.sm90.config import SCALE_BLOCK, GemmSm90Config
from nvatom.kernels.sm90.emit import u32 as _u32
from nvatom.kernels.sm90.row_scales import _check_row_cols
from nvatom.kernels.sm90.skeleton import _Build
from nvatom.ptx.builder import Kernel, Reg


def _fp8_scale(b: _Build) -> Reg | tuple[Reg, Reg] | None:
    """FP8: ``scale_a * scale_b`` loaded from the two f32 device scalars; row-wise scales:
    the two vectors' global addresses (else None)."""
    if b.scale_params is None or b.scale_step is not None:
        return None  # grouped: per tile (_group_scales)
    ga, gb = _scale_addresses(b)
    if b.cfg.scale_mode in ("row", "block"):
        return ga, gb
    return _scale_product(b.k, ga, gb)


def _scale_addresses(b: _Build) -> tuple[Reg, Reg]:
    """``scale_a`` and ``scale_b``'s global addresses from the kernel's parameters."""
    assert b.scale_params is not None
    ga, gb = (b.k.ld_param(p) for p in b.scale_params)
    b.k.ins("cvta.to.global.u64", ga, ga)
    b.k.ins("cvta.to.global.u64", gb, gb)
    return ga, gb


def _scale_product(k: Kernel, ga: Reg, gb: Reg) -> Reg:
    """Per-tensor scales: ``scale_a[0] * scale_b[0]`` at the two addresses."""
    sa, sb = k.reg("f32"), k.reg("f32")
    k.ins("ld.global.nc.f32", sa, f"[{ga}]")
    k.ins("ld.global.nc.f32", sb, f"[{gb}]")
    scale = k.reg("f32")
    k.ins("mul.f32", scale, sa, sb)
    return scale


def _group_scales(b: _Build, g: Reg | None) -> Reg | tuple[Reg, Reg]:
    """Grouped FP8, per tile: the current group's (``g``) rows ``start..end`` (the row ends follow
    ``tile_ends`` in the kernel's buffer; its M, ``end - start``, into ``b.dims[0]``) and its
    scales: ``scale_a`` indexed by A's stacked rows (row-wise: from row ``start``; block:
    from row ``start`` of its ``ktiles`` columns) and ``scale_b`` at ``g * scale_b_step``
    bytes; per-tensor: ``scale_a[0] * scale_b[g]`` (a register), else the two addresses for
    :func:`_row_scale` / :func:`_block_scale_rows`.  The parameters are read here, per tile,
    so no register of this lives across the main loop."""
    k, cfg = b.k, b.cfg
    assert b.scale_params is not None and b.scale_step is not None
    assert b.groups is not None and g is not None and b.dims is not None
    _, ends, G = b.groups
    k.comment("grouped FP8: this group's rows and scales")
    ga, gb = _scale_addresses(b)
    sstep = k.ld_param(b.scale_step)
    rows = k.reg("u64")
    k.ins("mad.wide.u32", rows, G, 4, ends)
    ea = k.reg("u64")
    k.ins("mad.wide.u32", ea, g, 4, rows)
    end = k.reg("u32")
    k.ins("ld.global.nc.u32", end, f"[{ea}]")
    start = _u32(k, "mov.u32", 0)
    first = k.reg("pred")
    k.ins("setp.eq.u32", first, g, 0)
    k.ins("ld.global.nc.u32", start, f"[{ea}+-4]", pred=f"!{first}")
    k.ins("sub.u32", b.dims[0], end, start)
    gbg = k.reg("u64")
    k.ins("mad.wide.u32", gbg, g, sstep, gb)
    if cfg.scale_mode == "tensor":
        return _scale_product(k, ga, gbg)
    per_row = 4 if cfg.scale_mode == "row" else None
    off = k.reg("u64")
    if per_row is None:  # block: ktiles f32 per row of A
        k.ins("mul.wide.u32", off, start, b.ktiles)
        k.ins("shl.b64", off, off, 2)
    else:
        k.ins("mul.wide.u32", off, start, per_row)
    gag = k.reg("u64")
    k.ins("add.s64", gag, ga, off)
    return gag, gbg


def _block_scale_rows(b: _Build, ptrs: tuple[Reg, Reg], cw: Reg, mb: Reg,
                      nb: Reg) -> tuple[Reg, ...]:
    """Block scales, once per tile: the global addresses of this thread's two rows of
    ``scale_a`` (rows ``row0`` and ``row0 + 8`` of its accumulator fragment, clamped to M - 1:
    a row past M is dropped by the TMA store) and of the rows of ``scale_b``'s K-major storage
    of the tile's ``block_n / 128`` column blocks (``nb * block_n / 128 + j``, clamped to
    the last block of N: columns past N are dropped by the TMA store), each at K block 0.
    Both scale tensors hold ``ktiles`` = ceil(K / 128) f32 per row (A row / B column block),
    contiguous.  Returns ``(a row 0, a row 8, b block 0, b block 1, ...)``."""
    k, cfg = b.k, b.cfg
    assert b.dims is not None
    _check_row_cols(cfg.block_n // cfg.promote_parts)
    ga, gb = ptrs
    lt = _u32(k, "and.b32", b.tid, WARPGROUP - 1)
    lane = _u32(k, "and.b32", lt, 31)
    warp = _u32(k, "shr.u32", lt, 5)
    g = _u32(k, "shr.u32", lane, 2)
    r = _u32(k, "mad.lo.u32", warp, 16, g)
    k.ins("mad.lo.u32", r, cw, 64, r)
    k.ins("mad.lo.u32", r, mb, cfg.block_m, r)
    mlast = _u32(k, "sub.u32", b.dims[0], 1)
    out = []
    for h in (0, 1):
        rh = _u32(k, "add.u32", r, 8 * h)
        k.ins("min.u32", rh, rh, mlast)
        out.append(_row_address(k, ga, rh, b.ktiles))
    blocks = cfg.block_n // SCALE_BLOCK
    if blocks == 1:
        out.append(_row_address(k, gb, nb, b.ktiles))
        return tuple(out)
    nlast = _u32(k, "add.u32", b.dims[1], SCALE_BLOCK - 1)  # the last column block of N
    k.ins("shr.u32", nlast, nlast, SCALE_BLOCK.bit_length() - 1)
    k.ins("sub.u32", nlast, nlast, 1)
    first = _u32(k, "mul.lo.u32", nb, blocks)
    for j in range(blocks):
        cb = _u32(k, "add.u32", first, j)
        k.ins("min.u32", cb, cb, nlast)
        out.append(_row_address(k, gb, cb, b.ktiles))
    return tuple(out)


def _row_address(k: Kernel, base: Reg, row: Reg, per_row: Reg) -> Reg:
    """``base + row * per_row * 4``: row ``row`` of a row-major f32 matrix."""
    off = k.reg("u64")
    k.ins("mul.wide.u32", off, row, per_row)
    k.ins("shl.b64", off, off, 2)
    addr = k.reg("u64")
    k.ins("add.s64", addr, base, off)
    return addr


def _block_scales(k: Kernel, rows: Sequence[Reg], kt: Reg,
                  ahead: int = 0) -> list[tuple[Reg, Reg]]:
    """K block ``kt + ahead``'s scales of this thread's two fragment rows, per column block
    of the tile: ``scale_a[row, kb] * scale_b[kb, n block j]``, ``kb = kt + ahead``
    (``ahead`` folded into the loads' address immediates; loaded before the K block's
    WGMMAs, used when its partial sums are promoted); ``rows`` from
    :func:`_block_scale_rows`."""
    off = k.reg("u64")
    k.ins("mul.wide.u32", off, kt, 4)
    vals = []
    for base in rows:
        addr = k.reg("u64")
        k.ins("add.s64", addr, base, off)
        v = k.reg("f32")
        k.ins("ld.global.nc.f32", v, f"[{addr}+{4 * ahead}]" if ahead else f"[{addr}]")
        vals.append(v)
    out = []
    for sb in vals[2:]:
        s0, s1 = k.reg("f32"), k.reg("f32")
        k.ins("mul.f32", s0, vals[0], sb)
        k.ins("mul.f32", s1, vals[1], sb)
        out.append((s0, s1))
    return out


def part_scale_block(cfg: GemmSm90Config, part: int) -> int:
    """The tile's column block (of 128) that N part ``part`` of the promoted loop lies in."""
    return part * (cfg.block_n // cfg.promote_parts) // SCALE_BLOCK
