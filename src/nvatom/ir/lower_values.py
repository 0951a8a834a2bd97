"""What :mod:`nvatom.ir.lower` and :mod:`nvatom.ir.lower_sync` share: the lowering's error,
the lowered forms of a register fragment and of a memory address, and two facts about IR
types (a buffer's footprint, an integer's width).  Its own module so that the lowering of
the warp-specialisation operations does not import the main lowering (no import cycle)."""

from __future__ import annotations

import dataclasses
from typing import Any

from nvatom.errors import NvatomError
from nvatom.layout import ComposedLayout, Layout, Swizzle, cosize
from nvatom.ptx.builder import Reg

__all__ = ["LowerError"]


class LowerError(NvatomError):
    """An operation the lowering cannot turn into PTX (the message says why)."""


@dataclasses.dataclass
class _Frag:
    regs: list[Reg]


@dataclasses.dataclass
class _Addr:
    reg: Reg  # u64 global or u32 shared address
    space: str  # "gmem" or "smem"


def _footprint(layout: Layout | ComposedLayout) -> int:
    """Elements a buffer of ``layout`` spans.  A swizzle ``Sw o off o L`` keeps every bit
    above its highest XOR target, so it maps ``[0, off + cosize(L))`` into the same range
    rounded up to a multiple of ``2^(that bit + 1)``."""
    if not isinstance(layout, ComposedLayout) or not isinstance(layout.inner, Swizzle):
        return cosize(layout)
    n = layout.offset + cosize(layout.outer)
    span = 1 << layout.inner.zzz_msk.bit_length()
    return -(-n // span) * span


def _int_bits(t: Any) -> int:
    w = getattr(t, "width", None)
    return 32 if w is None else int(w.data)


def arith_bits(op: Any) -> int:
    """The width of an integer arith op's result: 32 or 64 (the PTX registers the lowering
    computes in; a narrower type would need a wrap after every instruction)."""
    bits = _int_bits(op.results[0].type)
    if bits not in (32, 64):
        raise LowerError(f"'{op.name}' on i{bits} is not supported (i32, i64)")
    return bits
