"""Lowering of the operations of ir/ops_tma.py and ir/ops_copy.py (issue 16).

``lower._KernelLowering`` looks an operation up here when it has no method of its own
(:data:`LOWERINGS`: operation name -> function of the kernel lowering and the op; this
module does not import ``lower``, which imports it):

* ``atom.tma_partition``: as ``non_exec_tiled_tma_*`` (the box and swizzle of the hoisted
  descriptor parameter from the partition);
* ``prefetch_tma_tensor``: thread 0 issues ``cp.async.bulk.prefetch.tensor`` in the load
  atom's mode (``nvatom.ptx.tma_emit.tma_prefetch``; ``.L2::cache_hint`` with a
  ``createpolicy`` of the hint);
* ``make_tiled_copy``: nothing (static); ``tiled_copy.copy``: the atom applied to each
  operand's (thread, value) -> offset layout (``tile o layout_tv``, swizzled smem as for
  ``atom.copy``), through the same emitter as ``atom.copy``.

Also :func:`descriptor_box` (the box a tensor map is encoded with: the partition's, one row
for the four-row modes) and :func:`generic_shared` (a shared address made generic).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from nvatom.atoms import tma as T
from nvatom.errors import NvatomError
from nvatom.ir import lower_pipeline, lower_sync
from nvatom.ir import types as TY
from nvatom.ir.ops_copy import thread_layout
from nvatom.ptx import tma_emit as TE
from nvatom.ptx.builder import Kernel, Reg

__all__ = ["LOWERINGS", "descriptor_box", "generic_shared"]


def descriptor_box(r: T.TmaPartitionResult) -> tuple[int, ...]:
    """The box the host encodes the map with: the partition's, except for the four-row modes
    (``.tile::gather4``/``::scatter4``), whose map box is one row of the tile's four (each
    instruction names four row coordinates)."""
    box = r.tma_tensor_type.box
    if any(r.tma_tensor_type.mode is m for m in T.FOUR_ROW_MODES):
        return (box[0], 1)
    return box


def generic_shared(k: Kernel, addr: str | Reg) -> Reg:
    """The generic address of a 32-bit shared-window address ``reg[+offset]``."""
    base, _, off = str(addr).partition("+")
    a32 = k.reg("u32")
    if off:
        k.ins("add.u32", a32, base, int(off))
    else:
        k.ins("mov.u32", a32, base)
    a64 = k.reg("u64")
    k.ins("cvt.u64.u32", a64, a32)
    g = k.reg("u64")
    k.ins("cvta.shared.u64", g, a64)
    return g


def _tma_partition(low: Any, op: Any) -> None:
    low._non_exec(op)


def _prefetch_tma_tensor(low: Any, op: Any) -> None:
    r: T.TmaPartitionResult = low.v.facts[op]
    atom_val = low._reg_of(op.operands[0])
    desc = atom_val[0]  # lower._Desc
    mode = T.partition_ptx_mode(r)
    coords = low._reg_of(op.operands[1])
    offsets = []
    for x in op.operands[2:]:
        r16 = low.k.reg("b16")
        low.k.ins("cvt.u16.u32", r16, low._reg_of(x))
        offsets.append(r16)
    hint = op.attr("l2_cache_hint")
    skip, _ = low._elect()
    policy = TE.create_policy(low.k, T.CacheMode(hint)) if hint else None
    TE.tma_prefetch(low.k, desc.reg, coords, mode=mode, im2col_offsets=offsets or None,
                    cache_policy=policy, target=low.t)
    low.k.label(skip)


def _make_tiled_copy(low: Any, op: Any) -> None:
    low.vals[op.results[0]] = low.v.facts[op]


def _tiled_copy_copy(low: Any, op: Any) -> None:
    tc, _ = low.v.facts[op]
    sides = []
    for x in op.operands[1:]:
        m = TY.memref_of(x.type)
        assert m is not None
        val = low._reg_of(x)
        if m.space == "rmem":
            lay = m.layout
            sides.append(low.copy_side(m.space, m.element.pack_bits, lay[0], lay[1], val))
            continue
        tv, sw, off = thread_layout(tc, m)
        if sw is not None and m.element.pack_bits % 8:
            raise NvatomError(f"a swizzled copy operand of {m.element.pack_bits}-bit elements "
                             "does not lower (sub-byte elements are not implemented)")
        sides.append(low.copy_side(m.space, m.element.pack_bits, tv[0], tv[1], val.reg,
                                   swizzle=sw, offset=off))
    low._apply_copy(tc.atom, sides)


#: operation name -> lowering
LOWERINGS: dict[str, Callable[[Any, Any], None]] = {
    "cute_nvgpu.atom.tma_partition": _tma_partition,
    "cute_nvgpu.prefetch_tma_tensor": _prefetch_tma_tensor,
    "cute_nvgpu.make_tiled_copy": _make_tiled_copy,
    "cute.make_tiled_copy": _make_tiled_copy,  # the specification's spelling (ir/ops_copy.py)
    "cute.make_tiled_mma": _make_tiled_copy,  # likewise: the value is the verified tiled MMA
    "cute_nvgpu.tiled_copy.copy": _tiled_copy_copy,
    **lower_sync.LOWERINGS,  # scf.if, more arith, the warp-specialisation ops of ops_sync
    **lower_pipeline.LOWERINGS,  # the cutlass dialect: pipelines and tile schedulers
}
