"""A tiled register MMA in PTX: fragments loaded from and stored to global memory, and the
tile's products, all read off a :class:`~nvatom.atoms.tiled_mma.TiledMma`.

This is the short path from a tiled MMA to a kernel (docs/tutorial.md):

* :func:`global_pointer` and :func:`thread_index` start a kernel (a ``.u64`` parameter
  converted with ``cvta.to.global``; ``%tid.x``);
* :func:`load_fragment` loads one thread's values of an operand tile into registers,
  :func:`store_fragment` stores them back, :func:`zero_fragment` starts an accumulator;
* :func:`emit_tiled_mma` issues the atom once per repetition of the tile.

Addresses come from the layout algebra, as in :mod:`nvatom.ptx.mma_emit` for one atom: the
operand's tensor layout (element offset of a column-major coordinate of the operand in its
codomain orientation: A as M x K, B as N x K, C/D as M x N) is divided into the tiled MMA's
tiles (``zipped_divide``); the tile at ``tile`` composed with ``tiled.tv_layout(op)`` maps
(thread, value) to an element offset.  Its thread part is evaluated at run time from
``%tid.x`` (:func:`nvatom.ptx.layout_eval.emit_layout_offset`), its value part is folded into
constant offsets, one ``ld``/``st`` per register: the values a register packs must be
contiguous and aligned (:func:`nvatom.ptx.layout_eval.register_bytes` says which are not).

Value order: the tiled value mode is (atom values, repetitions along the operand's two
dimensions), so register ``r`` of repetition ``(i, j)`` is ``regs[r + R * (i + I * j)]`` with
``R`` the atom's register count and ``I`` the repetitions along the first dimension
(:meth:`Fragment.atom`).

Scope: dense warp-wide register MMA atoms (``mma.sync``; not ``mma.sp``, not the m8n8k4
quad-pair atoms) with one warp along K (``atom_layout[2] == 1``: warps along K would each hold
a partial sum that needs a reduction).

Source: PTX ISA, "Warp Level Matrix Multiply-Accumulate Instructions" (fragments of mma);
CuTe's TiledMMA (partition_A/B/C) for the value order.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from nvatom.atoms.mma import MmaForm
from nvatom.atoms.tiled_mma import TiledMma
from nvatom.errors import NvatomError
from nvatom.layout import Layout, composition, size, zipped_divide
from nvatom.ptx.builder import Kernel, Reg
from nvatom.ptx.layout_eval import emit_layout_offset, register_bytes
from nvatom.ptx.mma_emit import emit_mma

__all__ = [
    "Fragment",
    "TiledMmaEmitError",
    "emit_tiled_mma",
    "fragment_access",
    "global_pointer",
    "load_fragment",
    "repetitions",
    "store_fragment",
    "thread_index",
    "zero_fragment",
]

WARP = 32
# Which tile dimensions (of M, N, K) each operand spans, in its codomain orientation.
_DIMS = {"A": (0, 2), "B": (1, 2), "C": (0, 1)}


class TiledMmaEmitError(NvatomError):
    """A tiled MMA, operand or tensor that this emitter cannot turn into PTX."""


@dataclasses.dataclass(frozen=True)
class Fragment:
    """One thread's registers of an operand of a tiled MMA, in value order."""

    operand: str  # "A", "B" or "C" (D is C)
    regs: tuple[Reg, ...]
    per_atom: int  # registers of one atom instance
    reps: tuple[int, int]  # repetitions along the operand's two dimensions

    def atom(self, i: int, j: int) -> list[Reg]:
        """The registers of repetition ``(i, j)``: one atom instance's operand."""
        ri, rj = self.reps
        if not (0 <= i < ri and 0 <= j < rj):
            raise TiledMmaEmitError(
                f"repetition ({i}, {j}) is outside the {ri} x {rj} repetitions of {self.operand}"
            )
        start = self.per_atom * (i + ri * j)
        return list(self.regs[start:start + self.per_atom])


def _operand(op: str) -> str:
    o = op.upper()
    o = "C" if o == "D" else o
    if o not in _DIMS:
        raise TiledMmaEmitError(f"unknown operand '{op}' (A, B, C or D)")
    return o


def _form(tiled: TiledMma) -> MmaForm:
    form = tiled.atom
    if not isinstance(form, MmaForm) or form.is_sparse:
        raise TiledMmaEmitError(
            f"{getattr(form, 'name', form)}: only dense register MMA atoms (mma.sync) are "
            "emitted here"
        )
    if tiled.atom_threads != WARP:
        raise TiledMmaEmitError(
            f"{form.name}: the atom spans {tiled.atom_threads} threads; only warp-wide atoms "
            "are emitted here (m8n8k4 works on quad-pairs)"
        )
    if tiled.atom_layout[2] != 1:
        raise TiledMmaEmitError(
            f"atom layout {tiled.atom_layout} puts {tiled.atom_layout[2]} warps along K; each "
            "would hold a partial sum (use 1 along K and repeat the tile in K instead)"
        )
    return form


def repetitions(tiled: TiledMma, operand: str) -> tuple[int, int]:
    """How often the atom repeats along ``operand``'s two dimensions in the tile."""
    d0, d1 = _DIMS[_operand(operand)]
    amnk = tiled.atom.shape_mnk
    return (tiled.tile[d0] // (amnk[d0] * tiled.atom_layout[d0]),
            tiled.tile[d1] // (amnk[d1] * tiled.atom_layout[d1]))


def fragment_access(tiled: TiledMma, operand: str, tensor: Layout,
                    tile: Sequence[int] = (0, 0)) -> tuple[Layout, tuple[int, ...]]:
    """(thread -> byte offset, byte offset of each register) of ``operand``'s fragment in the
    tile ``tile`` of ``tensor`` (see the module doc); checked for one access per register."""
    op = _operand(operand)
    form = _form(tiled)
    d0, d1 = _DIMS[op]
    rows, cols = tiled.tile[d0], tiled.tile[d1]
    shape = tensor.shape if isinstance(tensor.shape, tuple) else (tensor.shape,)
    if len(shape) != 2 or size(shape[0]) % rows or size(shape[1]) % cols:
        raise TiledMmaEmitError(
            f"operand {op}: tensor {tensor} is not made of whole {rows} x {cols} tiles"
        )
    tiles = zipped_divide(tensor, (rows, cols))
    grid = (size(shape[0]) // rows, size(shape[1]) // cols)
    ti, tj = (int(x) for x in tile)
    if not (0 <= ti < grid[0] and 0 <= tj < grid[1]):
        raise TiledMmaEmitError(f"operand {op}: tile ({ti}, {tj}) is outside the {grid[0]} x "
                                f"{grid[1]} tiles of {tensor}")
    base = tiles[1](ti + grid[0] * tj)
    mem = composition(tiles[0], tiled.tv_layout(op))
    thread, value = mem[0], mem[1]
    bits = form.operand_type(op).pack_bits
    per_reg = 1 if bits == 64 else 32 // bits
    nregs = form.registers(op) * repetitions(tiled, op)[0] * repetitions(tiled, op)[1]
    thread_bytes, reg_bytes = register_bytes(
        thread, value, bits=bits, per_reg=per_reg, nregs=nregs, threads=tiled.threads,
        error=TiledMmaEmitError, operand=op, where=str(tensor), prefix=f"{form.name}: ",
        thread="thread")
    shift = base * bits // 8
    return thread_bytes, tuple(b + shift for b in reg_bytes)


def global_pointer(k: Kernel, name: str) -> Reg:
    """A new ``.u64`` parameter ``name`` of ``k``, as a global-space address register."""
    raw = k.ld_param(k.param(name, "u64"))
    g = k.reg("u64")
    k.ins("cvta.to.global.u64", g, raw)
    return g


def thread_index(k: Kernel) -> Reg:
    """``%tid.x`` in a ``.u32`` register (the tiled MMA's thread index)."""
    tid = k.reg("u32")
    k.ins("mov.u32", tid, "%tid.x")
    return tid


def _address(k: Kernel, base: Reg, thread_bytes: Layout, thread: Reg) -> Reg:
    off = emit_layout_offset(k, thread_bytes, thread)
    off64, addr = k.reg("u64"), k.reg("u64")
    k.ins("cvt.u64.u32", off64, off)
    k.ins("add.s64", addr, base, off64)
    return addr


def zero_fragment(k: Kernel, tiled: TiledMma, operand: str = "C") -> Fragment:
    """Fresh registers of ``operand``'s fragment, set to zero (an accumulator)."""
    op = _operand(operand)
    form = _form(tiled)
    reps = repetitions(tiled, op)
    rtype = form.register_type(op)
    regs = k.regs(rtype, form.registers(op) * reps[0] * reps[1])
    zero = {"f32": "0f00000000", "f64": "0d0000000000000000"}.get(rtype, "0")
    for r in regs:
        k.ins(f"mov.{rtype}", r, zero)
    return Fragment(op, tuple(regs), form.registers(op), reps)


def load_fragment(k: Kernel, tiled: TiledMma, operand: str, tensor: Layout, base: Reg,
                  thread: Reg, *, tile: Sequence[int] = (0, 0)) -> Fragment:
    """Load thread ``thread``'s fragment of ``operand`` from tile ``tile`` of the global
    tensor at ``base`` whose layout is ``tensor`` (element offsets)."""
    op = _operand(operand)
    form = _form(tiled)
    thread_bytes, reg_bytes = fragment_access(tiled, op, tensor, tile)
    rtype = form.register_type(op)
    regs = k.regs(rtype, len(reg_bytes))
    addr = _address(k, base, thread_bytes, thread)
    for reg, off in zip(regs, reg_bytes, strict=True):
        k.ins(f"ld.global.{rtype}", reg, f"[{addr}+{off}]")
    return Fragment(op, tuple(regs), form.registers(op), repetitions(tiled, op))


def store_fragment(k: Kernel, tiled: TiledMma, frag: Fragment, tensor: Layout, base: Reg,
                   thread: Reg, *, tile: Sequence[int] = (0, 0)) -> None:
    """Store ``frag`` (a C/D fragment, or any operand's) to tile ``tile`` of ``tensor``."""
    form = _form(tiled)
    thread_bytes, reg_bytes = fragment_access(tiled, frag.operand, tensor, tile)
    if len(reg_bytes) != len(frag.regs):
        raise TiledMmaEmitError(
            f"operand {frag.operand}: the fragment has {len(frag.regs)} registers, the tiled "
            f"MMA's has {len(reg_bytes)}")
    rtype = form.register_type(frag.operand)
    addr = _address(k, base, thread_bytes, thread)
    for reg, off in zip(frag.regs, reg_bytes, strict=True):
        k.ins(f"st.global.{rtype}", f"[{addr}+{off}]", reg)


def emit_tiled_mma(k: Kernel, tiled: TiledMma, d: Fragment, a: Fragment, b: Fragment,
                   c: Fragment) -> None:
    """D = A @ B^T + C over the tile: the atom once per (M, N, K) repetition, K innermost
    (the first K step reads C, the next ones accumulate into D; ``d`` may be ``c``)."""
    form = _form(tiled)
    for frag, op in ((a, "A"), (b, "B"), (c, "C"), (d, "C")):
        want = repetitions(tiled, op)
        if frag.operand != op or frag.reps != want:
            raise TiledMmaEmitError(
                f"expected a fragment of operand {op} with {want} repetitions, got operand "
                f"{frag.operand} with {frag.reps}")
    rm, rn = d.reps
    rk = a.reps[1]
    for j in range(rn):
        for i in range(rm):
            for kk in range(rk):
                acc = c.atom(i, j) if kk == 0 else d.atom(i, j)
                emit_mma(k, form, d.atom(i, j), a.atom(i, kk), b.atom(j, kk), acc)
