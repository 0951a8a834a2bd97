"""Swizzle functions: the XOR patterns that spread a tile across shared-memory banks.

``Swizzle(B, M, S)`` is CuTe's ``Swizzle<BBits, MBase, SShift>`` (``include/cute/swizzle.hpp``).
Read an offset as bits; keep the low ``M`` bits; take the ``B`` bits that sit ``|S|`` above the
other ``B``-bit field and XOR them into it::

    0bxxxxxxxxxxxxxxxYYYxxxxxxxZZZxxxx      (S > 0: YYY above ZZZ; S < 0: the other way)
                                  ^--^ M   low bits left alone
                     ^-^       ^-^     B   bits per field
                       ^---------^     S   distance from ZZZ up to YYY

    yyy_msk = ((1 << B) - 1) << (M + max(0, S))
    zzz_msk = ((1 << B) - 1) << (M - min(0, S))
    swizzle(x) = x ^ shiftr(x & yyy_msk, S)      # shiftr by a negative S shifts left

``|S| >= B`` keeps the two fields apart, so the YYY bits are unchanged and the function is
its own inverse.  ``Swizzle(3, 4, 3)`` on byte offsets is the 128-byte swizzle of Hopper's TMA
and WGMMA: 16-byte chunk ``c`` of 128-byte row ``r`` moves to chunk ``c ^ (r % 8)``.  In units
of 2-byte elements the same pattern is ``Swizzle(3, 3, 3)`` (see :func:`upcast_swizzle`).

CuTe's masks are 32-bit integers, so every bit a swizzle reads or writes lies below bit 32:
``B + M + |S| <= 32`` (:data:`SWIZZLE_BITS`).  Larger parameters are no swizzle CuTe can
express and are rejected before any mask is built.

A swizzle is not a layout (it is not linear); it is composed with one in a
:class:`~nvatom.layout.ComposedLayout`, printed as CuTe does: ``Sw<3,4,3> o 0 o (8,64):(64,1)``.
"""

from __future__ import annotations

from typing import Any

from nvatom.errors import LayoutError

__all__ = ["SWIZZLE_BITS", "Swizzle", "downcast_swizzle", "make_swizzle", "upcast_swizzle"]

#: the width of CuTe's swizzle masks: B + M + |S| must not exceed it
SWIZZLE_BITS = 32


def _short(v: int) -> str:
    """An int for an error message; a huge one by its digit count."""
    return str(v) if abs(v) < 10**30 else f"<{len(str(abs(v)))}-digit integer>"


def _shiftr(x: Any, s: int) -> Any:
    return x >> s if s >= 0 else x << -s


class Swizzle:
    """CuTe's ``Swizzle<B, M, S>``: ``x -> x ^ shiftr(x & yyy_msk, S)`` (see module doc)."""

    __slots__ = ("base", "bits", "shift", "yyy_msk", "zzz_msk")

    bits: int
    base: int
    shift: int
    yyy_msk: int
    zzz_msk: int

    def __init__(self, bits: int, base: int, shift: int) -> None:
        for name, v in (("B", bits), ("M", base), ("S", shift)):
            if isinstance(v, bool) or not isinstance(v, int):
                raise LayoutError(f"Swizzle: {name} must be an int, got {v!r}")
        if bits < 0:
            raise LayoutError(f"Swizzle<{bits},{base},{shift}>: B (the bit count) must be >= 0")
        if base < 0:
            raise LayoutError(f"Swizzle<{bits},{base},{shift}>: M (the base) must be >= 0")
        if bits + base + abs(shift) > SWIZZLE_BITS:
            raise LayoutError(
                f"Swizzle<{_short(bits)},{_short(base)},{_short(shift)}>: B + M + |S| must be "
                f"<= {SWIZZLE_BITS} (CuTe's swizzle masks are {SWIZZLE_BITS}-bit)"
            )
        if abs(shift) < bits:
            raise LayoutError(
                f"Swizzle<{bits},{base},{shift}>: |S| must be >= B so that the two bit "
                "fields do not overlap"
            )
        msk = (1 << bits) - 1
        set_ = object.__setattr__
        set_(self, "bits", int(bits))
        set_(self, "base", int(base))
        set_(self, "shift", int(shift))
        set_(self, "yyy_msk", msk << (base + max(0, shift)))
        set_(self, "zzz_msk", msk << (base - min(0, shift)))

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("Swizzle is immutable")

    def __call__(self, offset: Any) -> Any:
        """Apply to an int (or elementwise to a numpy integer array)."""
        return offset ^ _shiftr(offset & self.yyy_msk, self.shift)

    @property
    def swizzle_code(self) -> int:
        """``yyy_msk | zzz_msk``: every bit the swizzle reads or writes."""
        return self.yyy_msk | self.zzz_msk

    def __eq__(self, other: object) -> bool:
        if type(other) is not Swizzle:
            return NotImplemented
        return (self.bits, self.base, self.shift) == (other.bits, other.base, other.shift)

    def __hash__(self) -> int:
        return hash(("Swizzle", self.bits, self.base, self.shift))

    def __str__(self) -> str:
        return f"Sw<{self.bits},{self.base},{self.shift}>"

    def __repr__(self) -> str:
        return f"Swizzle({self.bits},{self.base},{self.shift})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (Swizzle, (self.bits, self.base, self.shift))


def _ctz32(x: int) -> int:
    # countr_zero of a uint32: 32 for zero, which make_swizzle relies on.
    return (x & -x).bit_length() - 1 if x & 0xFFFFFFFF else 32


def make_swizzle(y_mask: int, z_mask: int) -> Swizzle:
    """The swizzle whose YYY bits are ``y_mask`` and ZZZ bits ``z_mask`` (CuTe's
    ``make_swizzle<Y, Z>``): ``make_swizzle(0b1000, 0b0100) == Swizzle(1,2,1)``."""
    y, z = int(y_mask), int(z_mask)
    if y < 0 or z < 0 or y >> 32 or z >> 32:
        raise LayoutError(f"make_swizzle({y:#b}, {z:#b}): masks must be 32-bit unsigned")
    b = y.bit_count()
    if z.bit_count() != b:
        raise LayoutError(
            f"make_swizzle({y:#b}, {z:#b}): the Y and Z masks have different bit counts"
        )
    ty, tz = _ctz32(y), _ctz32(z)
    m = min(ty, tz) % 32
    try:
        sw = Swizzle(b, m, ty - tz)
    except LayoutError as e:
        raise LayoutError(f"make_swizzle({y:#b}, {z:#b}): {e}") from None
    if (y | z) != sw.swizzle_code:
        raise LayoutError(
            f"make_swizzle({y:#b}, {z:#b}): the masks are not two contiguous bit fields of "
            f"equal width (nearest is {sw})"
        )
    return sw


def compose_swizzles(a: Swizzle, b: Swizzle) -> Swizzle:
    """``a o b`` for two swizzles of the same shift (CuTe merges their masks)."""
    if a.shift != b.shift:
        raise LayoutError(f"composition({a}, {b}): only swizzles of the same shift compose")
    return make_swizzle(a.yyy_msk ^ b.yyy_msk, a.zzz_msk ^ b.zzz_msk)


def _log2(n: int, where: str) -> int:
    if isinstance(n, bool) or not isinstance(n, int) or n < 1 or n & (n - 1):
        raise LayoutError(f"{where}: n must be a power of two, got {n!r}")
    return n.bit_length() - 1


def upcast_swizzle(sw: Swizzle, n: int) -> Swizzle:
    """The swizzle in units ``n`` times wider (CuTe's ``upcast<N>(Swizzle)``): ``M`` drops by
    ``log2(n)``; bits below the new unit are lost."""
    k = _log2(n, f"upcast({sw}, {n})")
    new_m = sw.base - k
    if new_m >= 0:
        return Swizzle(sw.bits, new_m, sw.shift)
    return Swizzle(max(sw.bits + new_m, 0), 0, sw.shift)


def downcast_swizzle(sw: Swizzle, n: int) -> Swizzle:
    """The swizzle in units ``n`` times narrower (CuTe's ``downcast<N>(Swizzle)``)."""
    k = _log2(n, f"downcast({sw}, {n})")
    return Swizzle(sw.bits, sw.base + k, sw.shift)
