"""Emit PTX that evaluates a CuTe layout at a run-time index.

A layout maps a 1-D index ``i`` to ``sum_j ((i / P_j) % S_j) * D_j`` over its flattened modes
(shape ``S_j``, stride ``D_j``, ``P_j`` the product of the shapes before mode ``j``).  Kernels
use this for the thread part of a (thread, value) layout: the lane index is known only at
run time, while the value part is a compile-time constant folded into each address.

Divisions, remainders and products by powers of two become shifts and masks; modes of size 1
or stride 0 emit nothing; the last mode needs no remainder when the index is below the size.
A swizzled (composed) layout ``Sw<B,M,S> o offset o L`` adds the offset and applies
``x ^ ((x & yyy_mask) >> S)`` (CuTe's Swizzle) to the linear part, before any scaling.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from nvatom.layout import ComposedLayout, Layout, Swizzle
from nvatom.ptx.builder import Kernel, Reg

__all__ = ["emit_composed_offset", "emit_layout_offset", "emit_swizzle", "flat_modes",
           "register_bytes"]


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


def register_bytes(lane: Any, value: Any, *, bits: int, per_reg: int, nregs: int, threads: int,
                   error: Callable[[str], Exception], operand: str, where: str,
                   prefix: str = "", thread: str = "lane") -> tuple[Layout, tuple[int, ...]]:
    """Byte offsets of a register fragment in memory, for one access per register: ``lane``
    maps a thread and ``value`` a (register, element) index to element offsets.  Each
    register's ``per_reg`` elements must be contiguous and ``max(bits, 32)``-bit aligned, and
    so must each thread's first element; else ``error(message)`` is raised, the message
    naming ``operand``, the register or ``thread`` and the tile (``where``) after ``prefix``.
    Returns (lane -> byte offset, the byte offset of each register)."""
    align = max(bits, 32)
    reg_bytes = []
    for r in range(nregs):
        offs = [value(r * per_reg + j) for j in range(per_reg)]
        if offs != list(range(offs[0], offs[0] + per_reg)) or (offs[0] * bits) % align:
            raise error(f"{prefix}register {r} of operand {operand} holds the elements at "
                        f"offsets {offs} of {where}, which are not contiguous and {align}-bit "
                        "aligned (one access per register is impossible)")
        reg_bytes.append(offs[0] * bits // 8)
    # Every mode of size > 1 is an offset difference at a unit coordinate, so aligned lane
    # offsets mean aligned strides, and the byte layout below is exact.
    bad = [t for t in range(threads) if (lane(t) * bits) % align]
    if bad:
        raise error(f"{prefix}{thread} {bad[0]}'s fragment of operand {operand} starts at "
                    f"element {lane(bad[0])} of {where}, not on a {align}-bit boundary")
    modes = [(s, d * bits // 8 if s > 1 else 0) for s, d in flat_modes(lane)]
    return Layout(tuple(s for s, _ in modes), tuple(d for _, d in modes)), tuple(reg_bytes)


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


def emit_swizzle(k: Kernel, value: Reg, swizzle: object) -> Reg:
    """Append ``value ^ shiftr(value & yyy_mask, S)`` for a CuTe Swizzle(B, M, S)."""
    bits, base, shift = swizzle.bits, swizzle.base, swizzle.shift  # type: ignore[attr-defined]
    if bits == 0:
        return value
    yyy = ((1 << bits) - 1) << (base + max(0, shift))
    t, out = k.reg("u32"), k.reg("u32")
    k.ins("and.b32", t, value, yyy)
    if shift > 0:
        k.ins("shr.u32", t, t, shift)
    elif shift < 0:
        k.ins("shl.b32", t, t, -shift)
    k.ins("xor.b32", out, value, t)
    return out


def emit_composed_offset(k: Kernel, layout: object, index: Reg, *, scale: int = 1) -> Reg:
    """``layout(index) * scale`` for a plain Layout or a swizzled ComposedLayout."""
    if not isinstance(layout, ComposedLayout):
        return emit_layout_offset(k, layout, index, scale=scale)
    if not isinstance(layout.inner, Swizzle):
        raise TypeError(f"only swizzle-composed layouts can be evaluated in PTX, got {layout}")
    lin = emit_layout_offset(k, layout.outer, index)
    if layout.offset:
        k.ins("add.u32", lin, lin, layout.offset)
    out = emit_swizzle(k, lin, layout.inner)
    if scale != 1:
        scaled = k.reg("u32")
        k.ins("mul.lo.u32", scaled, out, scale)
        return scaled
    return out
