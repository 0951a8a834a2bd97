"""MMA operand fragments in the IR: what the verifier (:mod:`nvatom.ir.dialect`) and the
lowering (:mod:`nvatom.ir.lower`) both need to know about ``cute_nvgpu.atom.copy_fragment``.

For an MMA atom and one of its operands: the (thread, value) layout of the register fragment
(:func:`operand_tv`; WGMMA: its fragment layouts), the element type (:func:`operand_dtype`) and,
for a tile layout, how each lane reaches its registers (:func:`fragment_access`: the tile
composed with the (thread, value) layout, each register contiguous and aligned so one
``ld``/``st`` moves it).  The verifier stores the :class:`FragmentAccess` as a fact of the op;
the lowering emits the accesses from it.  :class:`IRVerifyError` is defined here, the lowest
module that raises it; :mod:`nvatom.ir.dialect` re-exports it.

Source: the PTX ISA's register-fragment layouts of mma.sync and wgmma, as the atom tables
hold them (``tv_layout`` of the register atoms, :mod:`nvatom.atoms.wgmma_fragments`).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from nvatom.atoms.sm90 import WgmmaForm
from nvatom.atoms.wgmma_fragments import wgmma_tv_layout
from nvatom.errors import NvatomError
from nvatom.layout import Layout, composition, cosize, size
from nvatom.ptx import tiled_mma_emit as tm
from nvatom.ptx.layout_eval import register_bytes

__all__ = [
    "FragmentAccess",
    "IRVerifyError",
    "fragment_access",
    "operand_dtype",
    "operand_tv",
    "tiled_fragment_access",
]

WARP = 32  # lanes of a warp (the lowering reads it from here)


class IRVerifyError(NvatomError):
    """An operation that breaks a rule of the IR (the message is the diagnostic)."""


@dataclasses.dataclass(frozen=True)
class FragmentAccess:
    """How each lane reaches its registers of one MMA operand in a tile: byte address of
    register ``r`` of lane ``l`` is ``base + lane_bytes(l) + reg_bytes[r]``."""

    ptx_type: str  # b32, f32 or f64: one load/store per register
    lane_bytes: Layout
    reg_bytes: tuple[int, ...]
    threads: int  # 32 (a warp) or 128 (a warpgroup)


def operand_tv(form: Any, op: str) -> Layout:
    """(thread, value) -> element of a register operand (WGMMA: its fragment layouts)."""

    if isinstance(form, WgmmaForm):
        return wgmma_tv_layout(form, op)
    return form.tv_layout(op)


def operand_dtype(form: Any, op: str) -> Any:
    if hasattr(form, "operand_type"):
        return form.operand_type(op)
    return {"A": form.a, "B": form.b, "C": form.d, "D": form.d}[op]


def fragment_access(form: Any, op: str, tile: Layout) -> FragmentAccess:
    """Compose the tile's layout with the atom's (thread, value) layout and check that each
    register's values are contiguous and aligned, so one load/store moves a register."""
    tv = operand_tv(form, op)
    if size(tile) != cosize(tv) and size(tile) < cosize(tv):
        raise IRVerifyError(f"the tile {tile} has {size(tile)} elements, the atom's operand {op} "
                            f"covers {cosize(tv)}")
    mem = composition(tile, tv)
    threads = size(mem[0])
    if threads not in (WARP, 4 * WARP):
        raise IRVerifyError(f"copy_fragment supports warp and warpgroup atoms; '{form.name}' "
                            f"spreads operand {op} over {threads} threads")
    lane, value = mem[0], mem[1]
    bits = operand_dtype(form, op).pack_bits
    per_reg = 1 if bits >= 32 else 32 // bits
    nregs = form.registers(op)
    if size(value) != nregs * per_reg:
        raise IRVerifyError(f"operand {op} of '{form.name}' has {size(value)} values per lane "
                            f"for {nregs} registers")
    lane_bytes, reg_bytes = register_bytes(
        lane, value, bits=bits, per_reg=per_reg, nregs=nregs, threads=threads,
        error=IRVerifyError, operand=op, where=f"the tile {tile}")
    return FragmentAccess(form.register_type(op), lane_bytes, reg_bytes, threads)


def tiled_fragment_access(tiled: Any, op: str, tensor: Layout,
                          tile: tuple[int, int] = (0, 0)) -> FragmentAccess:
    """:func:`fragment_access` for a tiled register MMA (``cute_nvgpu.make_tiled_mma``): the
    fragment of tile ``tile`` of ``tensor``, over all the tiled MMA's threads
    (:func:`nvatom.ptx.tiled_mma_emit.fragment_access`).  The lowering takes a thread's index
    as ``%tid.x`` modulo the thread count, so that count must be a power of two."""

    if tiled.threads & (tiled.threads - 1):
        raise IRVerifyError(f"copy_fragment of a tiled MMA needs a power-of-two thread count, "
                            f"got {tiled.threads} (atom layout {tiled.atom_layout})")
    try:
        thread_bytes, reg_bytes = tm.fragment_access(tiled, op, tensor, tile)
    except tm.TiledMmaEmitError as e:
        raise IRVerifyError(str(e)) from None
    c_op = "C" if op == "D" else op
    return FragmentAccess(tiled.atom.register_type(c_op), thread_bytes, reg_bytes,
                          tiled.threads)
