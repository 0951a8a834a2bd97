"""Small PTX emitters shared by the SM90 kernels (the GEMM and attention): a
32-bit result of one instruction, a WGMMA shared-memory descriptor word for a tile at a run-
time shared address (PTX ISA "Matrix Descriptor Format": the start address field holds
``address >> 4`` in 14 bits, the rest of the word is the descriptor's constant part), and the
advance of an mbarrier stage ring with its phase bit, the row address each lane gives
``stmatrix.x4`` in a 128-byte-swizzled staging tile, and a packed variable-length batch's
sequence rows read from its offsets."""

from __future__ import annotations

from typing import Any

from nvatom.atoms.wgmma_fragments import WARPGROUP
from nvatom.descriptors.wgmma import FIELDS, WgmmaDescriptor
from nvatom.ptx import sync_emit as SE
from nvatom.ptx.builder import Kernel, Reg

__all__ = ["consumer_thread", "desc_base", "next_stage", "stmatrix_lane_offset", "u32",
           "varlen_rows"]


def u32(k: Kernel, op: str, *args: Any) -> Reg:
    """A fresh ``u32`` register holding ``op``'s result on ``args``."""
    r = k.reg("u32")
    k.ins(op, r, *args)
    return r


def desc_base(k: Kernel, smem: Reg, desc: WgmmaDescriptor, region: int) -> Reg:
    """64-bit descriptor word for the tile at shared address ``smem + region +
    desc.start_address``; later stages / K steps are added to the start-address field."""
    start = FIELDS[0]
    const = desc.encode() & ~start.mask
    t = u32(k, "add.u32", smem, region + desc.start_address)
    k.ins("shr.u32", t, t, start.shift)
    k.ins("and.b32", t, t, (1 << start.width) - 1)
    w = k.reg("b64")
    k.ins("cvt.u64.u32", w, t)
    k.ins("or.b64", w, w, f"0x{const:016x}")
    return w


def next_stage(k: Kernel, stage: Reg, phase: Reg, stages: int) -> None:
    """Advance a ring position: ``stage + 1`` modulo ``stages``, flipping the mbarrier phase
    bit each time the ring wraps."""
    k.ins("add.u32", stage, stage, 1)
    wrap = k.reg("pred")
    k.ins("setp.eq.u32", wrap, stage, stages)
    k.ins("selp.u32", stage, 0, stage, wrap)
    k.ins("xor.b32", phase, phase, 1, pred=str(wrap))


def stmatrix_lane_offset(k: Kernel, lane: Reg, warp: Reg, row_bytes: int) -> Reg:
    """Byte offset of the row lane ``lane`` of warp ``warp`` addresses for ``stmatrix.x4``
    into a 16-bit staging tile of ``row_bytes``-byte rows, 128-byte swizzled: lanes 8j..8j+7
    give rows t = lane % 8 of matrix j = lane / 8 (PTX ISA "stmatrix"), matrix j covering
    rows 8 (j % 2).. and columns 8 (j / 2).. of the warp's 16 x 16 block at rows 16 warp..;
    the 16-byte chunk index (j / 2) is xor-ed with the row within the 8-row pattern.  The
    callers check the offsets against their staging layouts."""
    j = u32(k, "shr.u32", lane, 3)  # matrix j, row t of it
    t = u32(k, "and.b32", lane, 7)
    row = u32(k, "and.b32", j, 1)
    k.ins("shl.b32", row, row, 3)
    k.ins("add.u32", row, row, t)
    k.ins("mad.lo.u32", row, warp, 16, row)
    col = u32(k, "shr.u32", j, 1)
    k.ins("xor.b32", col, col, t)
    k.ins("shl.b32", col, col, 4)
    return u32(k, "mad.lo.u32", row, row_bytes, col)


def producer_thread(k: Kernel, regs: int, tid: Reg, done: str, target: str) -> None:
    """The producer warpgroup's entry: give registers back (``setmaxnreg.dec`` to ``regs``),
    then every thread but thread 0, which issues all TMA loads, goes to ``done``."""
    k.comment("producer warpgroup: one thread issues every TMA load")
    SE.setmaxnreg(k, "dec", regs, target=target)
    pl = k.reg("pred")
    k.ins("setp.ne.u32", pl, tid, 0)
    k.bra(done, pl)


def varlen_rows(k: Kernel, pvar: tuple[Any, ...], batch: Reg) -> dict[str, Reg]:
    """Sequence ``batch``'s first rows and lengths from ``cu_seqlens_q[batch .. batch + 1]``
    and ``cu_seqlens_k``'s, each offset clamped to its packed total and the end to at least
    the start (offsets the host cannot check give empty or short sequences, never an access
    past the tensors)."""
    out: dict[str, Reg] = {}
    for which, cu_p, tot_p in (("q", pvar[0], pvar[2]), ("k", pvar[1], pvar[3])):
        cu = k.ld_param(cu_p)
        k.ins("cvta.to.global.u64", cu, cu)
        total = k.ld_param(tot_p)
        at = k.reg("u64")
        k.ins("mad.wide.u32", at, batch, 4, cu)
        start, end = k.reg("u32"), k.reg("u32")
        k.ins("ld.global.nc.u32", start, f"[{at}]")
        k.ins("ld.global.nc.u32", end, f"[{at}+4]")
        k.ins("min.u32", start, start, total)
        k.ins("max.u32", end, end, start)
        k.ins("min.u32", end, end, total)
        out[f"{which}_start"] = start
        out[f"s{which}"] = u32(k, "sub.u32", end, start)
        out[f"total_{which}"] = total
    out["zero"] = u32(k, "mov.u32", 0)
    return out


def consumer_thread(k: Kernel, wg: Reg, tid: Reg) -> tuple[Reg, Reg, Reg, Reg, Reg, Reg]:
    """A consumer warpgroup thread's coordinates: (consumer index ``wg - 1``, thread in the
    warpgroup, warp, lane, groupID ``lane / 4``, threadID_in_group ``lane % 4``: the wgmma
    fragments' terms, PTX ISA "Register Fragments")."""
    cw = u32(k, "sub.u32", wg, 1)
    ltid = u32(k, "and.b32", tid, WARPGROUP - 1)
    warp = u32(k, "shr.u32", ltid, 5)
    lane = u32(k, "and.b32", ltid, 31)
    g = u32(k, "shr.u32", lane, 2)
    tig = u32(k, "and.b32", lane, 3)
    return cw, ltid, warp, lane, g, tig
