"""Emit PTX that evaluates a CuTe layout at a run-time index.

A layout maps a 1-D index ``i`` to ``sum_j ((i / P_j) % S_j) * D_j`` over its flattened modes
(shape ``S_j``, stride ``D_j``, ``P_j`` the product of the shapes before mode ``j``).  Kernels
use this for the thread part of a (thread, value) layout: the lane index is known only at
run time, while the value part is a compile-time constant folded into each address.

Divisions, remainders and products by powers of two become shifts and masks; modes of size 1
or stride 0 emit nothing; the last mode needs no remainder when the index is below the size.
"""

from __future__ import annotations

from nvatom.ptx.builder import Kernel, Reg

__all__ = ["emit_layout_offset", "flat_modes"]


def _flatten(t: object) -> list[int]:
    if isinstance(t, tuple):
        out: list[int] = []
        for x in t:
            out.extend(_flatten(x))
        return out
    return [int(t)]  # type: ignore[call-overload]


def flat_modes(layout: object) -> list[tuple[int, int]]:
    """(shape, stride) of each flattened mode of a Layout."""
    return list(zip(_flatten(layout.shape), _flatten(layout.stride), strict=True))  # type: ignore[attr-defined]


def _is_pow2(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


def emit_layout_offset(k: Kernel, layout: object, index: Reg, *, scale: int = 1) -> Reg:
    """Append instructions computing ``layout(index) * scale`` into a new ``u32`` register."""
    acc = k.reg("u32")
    k.ins("mov.u32", acc, 0)
    modes = flat_modes(layout)
    prefix = 1
    last = max((j for j, (s, _) in enumerate(modes) if s > 1), default=-1)
    for j, (shape, stride) in enumerate(modes):
        p, prefix = prefix, prefix * shape
        if shape == 1 or stride == 0:
            continue
        q = index
        if p > 1:
            q = k.reg("u32")
            if _is_pow2(p):
                k.ins("shr.u32", q, index, p.bit_length() - 1)
            else:
                k.ins("div.u32", q, index, p)
        if j != last:
            r = k.reg("u32")
            if _is_pow2(shape):
                k.ins("and.b32", r, q, shape - 1)
            else:
                k.ins("rem.u32", r, q, shape)
            q = r
        d = stride * scale
        if _is_pow2(d):
            t = k.reg("u32")
            k.ins("shl.b32", t, q, d.bit_length() - 1)
            k.ins("add.u32", acc, acc, t)
        else:
            k.ins("mad.lo.u32", acc, q, d, acc)
    return acc
