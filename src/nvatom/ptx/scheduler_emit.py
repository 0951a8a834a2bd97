"""PTX of the tile schedulers' index arithmetic: a linear tile index -> the tile's
coordinates, for the three orders nvatom's persistent kernels use (the models, and which CTA
visits which tile, are :mod:`nvatom.kernels.scheduler`; the IR's
``cutlass.tile_scheduler.*`` lowers here too).

* grouped-M raster (CUTLASS's ``PersistentTileScheduler`` swizzle): tiles are walked in
  groups of ``group`` M blocks, N fastest across a group's sweep, so the CTAs running at the
  same time share A rows and B columns in L2;
* grouped GEMM (MoE): a table of each group's first tile, the group found by a scan;
* causal attention: the query blocks with the most key blocks first (largest M block first,
  heads fastest), so the persistent grid ends on short tiles.

All values are ``u32`` registers; PTX ISA "Integer Arithmetic Instructions" (div, rem, min,
mad) and "ld" (the grouped table, ``ld.global.nc``).
"""

from __future__ import annotations

from nvatom.ptx.builder import Kernel, Reg
from nvatom.ptx.tma_emit import Operand

__all__ = ["causal_longest_first", "grouped_lookup", "grouped_m_raster"]


def _u32(k: Kernel, op: str, *args: Operand) -> Reg:
    r = k.reg("u32")
    k.ins(op, r, *args)
    return r


def grouped_m_raster(k: Kernel, tile: Operand, tiles_m: Operand, tiles_n: Operand,
                     group: int) -> tuple[Reg, Reg]:
    """``(m_block, n_block)`` of linear tile ``tile`` rastered in groups of ``group`` M
    blocks: group ``g = tile / (group * tiles_n)`` covers M blocks ``g * group ..`` (fewer in
    the last group); within it M is fastest."""
    per_group = _u32(k, "mul.lo.u32", tiles_n, group)
    gid = _u32(k, "div.u32", tile, per_group)
    first = _u32(k, "mul.lo.u32", gid, group)
    left = _u32(k, "sub.u32", tiles_m, first)
    gsize = _u32(k, "min.u32", left, group)
    within = _u32(k, "rem.u32", tile, per_group)
    mb = _u32(k, "rem.u32", within, gsize)
    k.ins("add.u32", mb, mb, first)
    nb = _u32(k, "div.u32", within, gsize)
    return mb, nb


def grouped_lookup(k: Kernel, tile: Operand, starts: Operand, groups: Operand,
                   tiles_n: Operand) -> tuple[Reg, Reg, Reg]:
    """``(group, m_block, n_block)`` of linear tile ``tile`` of a grouped GEMM whose group
    ``g`` owns tiles ``starts[g] .. starts[g + 1]`` (``starts``: a global ``u64`` address of
    ``groups + 1`` u32 prefix sums; every group has ``tiles_n`` N blocks, its M blocks are
    ``(starts[g + 1] - starts[g]) / tiles_n``, M fastest).  A linear scan: groups are few."""
    g = _u32(k, "mov.u32", 0)
    top, done = k.fresh_label("group_scan"), k.fresh_label("group_found")
    addr = k.reg("u64")
    nxt = k.reg("u32")
    k.label(top)
    k.ins("mad.wide.u32", addr, g, 4, starts)
    k.ins("ld.global.nc.u32", nxt, f"[{addr}+4]")
    p = k.reg("pred")
    k.ins("setp.lt.u32", p, tile, nxt)
    k.bra(done, p)
    k.ins("add.u32", g, g, 1)
    q = k.reg("pred")
    k.ins("setp.lt.u32", q, g, groups)
    k.bra(top, q)
    k.label(done)
    start = _u32(k, "ld.global.nc.u32", f"[{addr}]")
    local = _u32(k, "sub.u32", tile, start)
    tiles_m = _u32(k, "sub.u32", nxt, start)
    k.ins("div.u32", tiles_m, tiles_m, tiles_n)
    mb = _u32(k, "rem.u32", local, tiles_m)
    nb = _u32(k, "div.u32", local, tiles_m)
    return g, mb, nb


def causal_longest_first(k: Kernel, tile: Operand, m_blocks: Operand,
                         heads: Operand) -> tuple[Reg, Reg]:
    """``(head, m_block)`` of linear tile ``tile`` in longest-first causal order: M block
    ``m_blocks - 1 - tile / heads`` (under a causal mask query block ``m`` reads ``m + 1``
    key blocks, so this visits the longest tiles first), head ``tile % heads``."""
    head = _u32(k, "rem.u32", tile, heads)
    q = _u32(k, "div.u32", tile, heads)
    mb = _u32(k, "sub.u32", m_blocks, q)
    k.ins("sub.u32", mb, mb, 1)
    return head, mb
