"""The demo kernel: one warp computes D = A @ B with one mma.sync m16n8k16 instruction.

A is 16x16 (row-major), B is given as its transpose Bt (8x16, row-major: the "col" operand of
``.row.col``), D is 16x8 f32 (row-major).  Every address a lane touches comes from the layout
algebra: the atom's (thread, value) layouts map (lane, value) to a column-major coordinate of
the operand tile; composing the tile's memory layout with them gives (lane, value) -> memory
offset, whose thread part is evaluated at run time and whose value part is folded into
constant offsets.

The atom and its (thread, value) layouts come from the SM80 table (nvatom.atoms.sm80), whose
layouts are derived from the PTX ISA fragment formulas; ``nvatom.ptx.mma_emit`` generalises
this kernel to every register MMA form.
"""

from __future__ import annotations

import math

from nvatom.arch import Target, target
from nvatom.atoms.mma import MmaForm
from nvatom.atoms.registry import mma_form
from nvatom.layout import Layout, composition
from nvatom.ptx.builder import Kernel, Module, Reg
from nvatom.ptx.layout_eval import emit_layout_offset, flat_modes

__all__ = ["DEMO_MMAS", "build_demo_module"]


#: the demo's atoms, by element type: the SM80 table's m16n8k16 forms with f32 accumulation
DEMO_MMAS: dict[str, MmaForm] = {
    name: mma_form(f"sm80.mma.m16n8k16.f32.{name}.{name}.f32") for name in ("f16", "bf16")
}


def _row_major(rows: int, cols: int) -> Layout:
    """Memory layout of a row-major rows x cols matrix, indexed by column-major coordinate."""
    return Layout((rows, cols), (cols, 1))


def operand_memory_layout(mma: MmaForm, operand: str) -> Layout:
    """(lane, value) -> element offset of operand A (16x16), Bt (8x16) or D (16x8), row-major.

    Composition of the tile's memory layout with the atom's (thread, value) layout: mode 0 is
    the lane part, mode 1 the value part.
    """
    tiles = {
        "A": ((mma.m, mma.k), "A"),
        "B": ((mma.n, mma.k), "B"),
        "D": ((mma.m, mma.n), "C"),
    }
    (rows, cols), op = tiles[operand]
    return composition(_row_major(rows, cols), mma.tv_layout(op))


def _nvalues(tv: Layout) -> int:
    return math.prod(s for s, _ in flat_modes(tv[1]))


def _load_fragment(
    k: Kernel, base: Reg, tv_mem: Layout, lane: Reg, nvals: int, esize: int
) -> list[Reg]:
    """Load a lane's 16-bit values, two per b32 register (low half = lower value index)."""
    addr = k.reg("u64")
    off = emit_layout_offset(k, tv_mem[0], lane, scale=esize)
    off64 = k.reg("u64")
    k.ins("cvt.u64.u32", off64, off)
    k.ins("add.s64", addr, base, off64)
    value = tv_mem[1]
    regs = []
    for r in range(nvals // 2):
        o0, o1 = value(2 * r) * esize, value(2 * r + 1) * esize
        reg = k.reg("b32")
        if o1 == o0 + esize and o0 % 4 == 0:
            k.ins("ld.global.b32", reg, f"[{addr}+{o0}]")
        else:
            lo, hi = k.reg("b16"), k.reg("b16")
            k.ins("ld.global.b16", lo, f"[{addr}+{o0}]")
            k.ins("ld.global.b16", hi, f"[{addr}+{o1}]")
            k.ins("mov.b32", reg, (lo, hi))
        regs.append(reg)
    return regs


def build_demo_module(target_: Target | str = "sm_80", dtype: str = "f16") -> Module:
    """A module with kernel ``mma_demo(A, Bt, D)`` for one warp (32 threads)."""
    mma = DEMO_MMAS[dtype]
    mod = Module(target(target_), features=[mma.feature])
    k = mod.kernel("mma_demo")
    k.maxntid = (32, 1, 1)
    pa, pb, pd = k.param("A"), k.param("Bt"), k.param("D")
    k.comment(f"D[{mma.m}x{mma.n}] = A[{mma.m}x{mma.k}] @ Bt[{mma.n}x{mma.k}]^T with {mma.opcode}")
    ptrs = []
    for p in (pa, pb, pd):
        raw = k.ld_param(p)
        g = k.reg("u64")
        k.ins("cvta.to.global.u64", g, raw)
        ptrs.append(g)
    lane = k.reg("u32")
    k.ins("mov.u32", lane, "%laneid")

    a_mem = operand_memory_layout(mma, "A")
    b_mem = operand_memory_layout(mma, "B")
    d_mem = operand_memory_layout(mma, "D")
    a = _load_fragment(k, ptrs[0], a_mem, lane, _nvalues(mma.tv_layout("A")), 2)
    b = _load_fragment(k, ptrs[1], b_mem, lane, _nvalues(mma.tv_layout("B")), 2)
    c = k.regs("f32", 4)
    for r in c:
        k.ins("mov.f32", r, "0f00000000")
    d = k.regs("f32", 4)
    k.ins(mma.opcode, d, a, b, c)

    d_addr = k.reg("u64")
    d_off = emit_layout_offset(k, d_mem[0], lane, scale=4)
    d_off64 = k.reg("u64")
    k.ins("cvt.u64.u32", d_off64, d_off)
    k.ins("add.s64", d_addr, ptrs[2], d_off64)
    for v, reg in enumerate(d):
        k.ins("st.global.f32", f"[{d_addr}+{d_mem[1](v) * 4}]", reg)
    return mod
