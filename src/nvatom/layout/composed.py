"""ComposedLayout: ``inner o offset o outer``, a layout followed by a non-linear function.

Some functions of coordinates are not layouts -- a swizzle is not linear -- but we still want
to tile, slice and partition them like layouts.  CuTe's answer (``include/cute/
layout_composed.hpp``, specialised for swizzles in ``include/cute/swizzle_layout.hpp``) is
``ComposedLayout(inner, offset, outer)``, the function::

    x  ->  inner(offset + outer(x))

``outer`` is an ordinary :class:`Layout` and defines the domain: shape, size, rank, modes and
every tiling operation (divides, products, coalesce, ...) act on ``outer`` alone and keep
``inner`` and ``offset``.  ``inner`` is a :class:`Swizzle` (the common case, e.g. a 128-byte
swizzled shared-memory tile ``Sw<3,4,3> o 0 o (8,64):(64,1)``) or another Layout.  The offset
exists because a swizzle does not commute with translation: slicing a swizzled tile moves the
fixed coordinates into ``offset`` rather than into a pointer.

Slicing a swizzled layout follows CuTe: when the kept modes touch only one of each pair of
swizzled bits, the swizzle acts on them as a sign flip and the result *decays* to a plain
Layout plus an offset; otherwise it stays composed.  Every decay is checked numerically
against the composed function before it is returned.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from nvatom.errors import LayoutError

from .inttuple import (
    _,
    _crd2idx,
    _fmt_crd,
    dice,
    format_int_tuple,
    has_underscore,
    slice_,
)
from .layout import (
    Layout,
    _compose_ll,
    _cosize,
    _ctx,
    _flat,
    _left_inverse_cached,
    _mk,
    _norm_coord,
    _right_inverse_cached,
    _show,
    _wrap,
)
from .layout import composition as _composition
from .layout import max_common_layout as _mcl
from .layout import max_common_vector as _mcv
from .layout import upcast as _upcast
from .swizzle import Swizzle, compose_swizzles, downcast_swizzle, make_swizzle, upcast_swizzle

__all__ = ["ComposedLayout", "layouts_equivalent", "make_composed_layout"]

_DECAY_CHECK_LIMIT = 1 << 20
#: most elements a layout may have where a check enumerates them (layouts_equivalent of a
#: composed layout, exact composition): 2^24 int64 values are 128 MiB per array
ENUMERATION_LIMIT = 1 << 24


class ComposedLayout:
    """``inner o offset o outer``: ``x -> inner(offset + outer(x))`` (see the module doc).

    ``ComposedLayout('Sw<3,4,3> o 0 o (8,64):(64,1)')`` parses CuTe notation.
    """

    __slots__ = ("_hash", "inner", "offset", "outer")

    inner: Swizzle | Layout
    offset: int
    outer: Layout

    def __init__(self, inner: Any, offset: Any = 0, outer: Any = None) -> None:
        if type(inner) is str:
            if outer is not None:
                raise LayoutError("ComposedLayout(text): takes no other arguments")
            from .notation import parse_layout

            r = parse_layout(inner)
            if type(r) is not ComposedLayout:
                raise LayoutError(f"ComposedLayout({inner!r}): the text is a plain Layout")
            inner, offset, outer = r.inner, r.offset, r.outer
        if type(inner) not in (Swizzle, Layout):
            raise LayoutError(
                f"ComposedLayout: inner must be a Swizzle or a Layout, got {_show(inner)}"
            )
        if type(outer) is not Layout:
            raise LayoutError(f"ComposedLayout: outer must be a Layout, got {_show(outer)}")
        if isinstance(offset, bool) or not isinstance(offset, int):
            raise LayoutError(f"ComposedLayout: offset must be an int, got {offset!r}")
        set_ = object.__setattr__
        set_(self, "inner", inner)
        set_(self, "offset", int(offset))
        set_(self, "outer", outer)
        set_(self, "_hash", None)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("ComposedLayout is immutable")

    def __reduce__(self) -> tuple[Any, ...]:
        return (ComposedLayout, (self.inner, self.offset, self.outer))

    # -- the Layout-like interface, all from the outer layout

    @property
    def shape(self) -> Any:
        return self.outer.shape

    @property
    def rank(self) -> int:
        return self.outer.rank

    @property
    def depth(self) -> int:
        return self.outer.depth

    def size(self) -> int:
        return self.outer.size()

    def cosize(self) -> int:
        """CuTe's ``cosize(ComposedLayout)``: the cosize of ``outer``."""
        return _cosize(self.outer)

    def __getitem__(self, idx: int | tuple[int, ...]) -> ComposedLayout:
        return ComposedLayout(self.inner, self.offset, self.outer[idx])

    def __iter__(self) -> Any:
        return iter([ComposedLayout(self.inner, self.offset, m) for m in self.outer])

    def __call__(self, *args: Any) -> Any:
        c = args[0] if len(args) == 1 else args
        if has_underscore(c):
            return slice(c, self)
        return self.inner(self.offset + self.outer(c))

    def compose(self, *others: Any) -> Any:
        return composition(self, others[0] if len(others) == 1 else tuple(others))

    def __eq__(self, other: object) -> bool:
        if type(other) is not ComposedLayout:
            return NotImplemented
        return (
            self.inner == other.inner
            and self.offset == other.offset
            and self.outer == other.outer
        )

    def __hash__(self) -> int:
        h = self._hash
        if h is None:
            h = hash((self.inner, self.offset, self.outer))
            object.__setattr__(self, "_hash", h)
        return h

    def __str__(self) -> str:
        return f"{self.inner} o {self.offset} o {self.outer}"

    def __repr__(self) -> str:
        return f"ComposedLayout('{self}')"


def is_swizzle(x: object) -> bool:
    return type(x) is Swizzle


def is_composed(x: object) -> bool:
    return type(x) is ComposedLayout


def make_composed_layout(inner: Any, offset: Any, outer: Any) -> ComposedLayout:
    """CuTe's ``composition(inner, offset, outer)``: ``x -> inner(offset + outer(x))``."""
    return ComposedLayout(inner, offset, outer)


def _compose_swizzle(sw: Swizzle, outer: Layout) -> Any:
    """``composition(Swizzle, Layout)``; CuTe drops the identity swizzle ``Sw<0,M,S>``."""
    if sw.bits == 0:
        return outer
    return ComposedLayout(sw, 0, outer)


def make_swizzle_layout(sw: Swizzle) -> Any:
    """CuTe's ``make_layout(Swizzle<B,M,S>)``: the swizzle on ``2^(M+B+|S|):1``."""
    n = 1 << (sw.base + sw.bits + abs(sw.shift))
    return _compose_swizzle(sw, _mk(n, 1))


# ----------------------------------------------------------------------------- dispatch


def _bad(name: str, *args: Any) -> LayoutError:
    return LayoutError(
        f"{_ctx(name, *args)}: unsupported argument types "
        + ", ".join(type(a).__name__ for a in args)
    )


def on_outer(x: Any, f: Callable[[Layout], Any]) -> Any:
    """Apply a domain operation to the outer layout and keep ``inner o offset``."""
    if type(x) is ComposedLayout:
        return make_composed_layout(x.inner, x.offset, f(x.outer))
    raise LayoutError(f"expected a Layout or a ComposedLayout, got {_show(x)}")


def size(x: Any) -> int:
    if type(x) is ComposedLayout:
        return x.outer.size()
    raise LayoutError(f"size: expected a layout or an int tuple, got {_show(x)}")


def cosize(x: Any) -> int:
    if type(x) is ComposedLayout:
        return _cosize(x.outer)
    raise LayoutError(f"cosize: expected a layout, got {_show(x)}")


def shape(x: Any) -> Any:
    if type(x) is ComposedLayout:
        return x.outer.shape
    raise LayoutError(f"shape: expected a layout or an int tuple, got {_show(x)}")


def get(x: Any, *idx: int) -> Any:
    from .layout import get as _get

    return on_outer(x, lambda o: _get(o, *idx))


def composition(a: Any, b: Any) -> Any:
    ta, tb = type(a), type(b)
    if ta is ComposedLayout:
        if tb is ComposedLayout or tb is Swizzle:
            # (I o O o L) o B = I o O o (L o B), with L o B itself possibly composed.
            inner = composition(a.outer, b)
            if type(inner) is ComposedLayout:
                if a.offset != 0 or type(a.inner) is not Swizzle or inner.offset != 0:
                    raise LayoutError(
                        f"composition({a}, {b}): nested composed layouts with offsets are "
                        "not supported"
                    )
                if type(inner.inner) is Swizzle:
                    # CuTe would nest the two; we merge them, which must be the same function.
                    sw = _merge_swizzles(a.inner, inner.inner, a, b)
                    return _compose_swizzle(sw, inner.outer)
                raise LayoutError(f"composition({a}, {b}): unsupported nesting")
            return make_composed_layout(a.inner, a.offset, inner)
        return make_composed_layout(a.inner, a.offset, _composition(a.outer, b))
    if ta is Swizzle:
        if tb is Layout:
            return _compose_swizzle(a, b)
        if tb is Swizzle:
            return compose_swizzles(a, b)
        if tb is ComposedLayout:
            if type(b.inner) is Swizzle and b.offset == 0:
                return _compose_swizzle(compose_swizzles(a, b.inner), b.outer)
            raise LayoutError(
                f"composition({a}, {b}): only a swizzle with offset 0 inside merges with a "
                "swizzle"
            )
        raise _bad("composition", a, b)
    if ta is Layout:
        if tb is Swizzle:
            # CuTe: the swizzle's Y and Z bits pushed through a become a new swizzle.
            try:
                sw = make_swizzle(a(b.yyy_msk), a(b.zzz_msk))
            except LayoutError as e:
                raise _wrap("composition", (a, b), e) from None
            return _compose_swizzle(sw, a)
        if tb is ComposedLayout:
            if b.offset != 0:
                raise LayoutError(
                    f"composition({a}, {b}): CuTe requires the composed layout's offset to "
                    "be 0 here"
                )
            return composition(composition(a, b.inner), b.outer)
    raise _bad("composition", a, b)


def _merge_swizzles(s0: Swizzle, s1: Swizzle, a: Any, b: Any) -> Swizzle:
    try:
        sw = compose_swizzles(s0, s1)
    except LayoutError as e:
        raise LayoutError(f"composition({a}, {b}): {e}") from None
    top = max(s0.swizzle_code, s1.swizzle_code).bit_length()
    if any(sw(x) != s0(s1(x)) for x in range(1 << top)):
        raise LayoutError(
            f"composition({a}, {b}): {s0} o {s1} is not a single swizzle, so the nested "
            "composed layout cannot be represented"
        )
    return sw


def complement(x: Any, cotarget: Any = None) -> Any:
    from .layout import complement as _complement

    if type(x) is ComposedLayout:
        return _complement(x.outer, _cosize(x.outer) if cotarget is None else cotarget)
    raise _bad("complement", x)


def right_inverse(x: Any) -> Any:
    if type(x) is Swizzle:
        return x
    if type(x) is ComposedLayout:
        inv_outer = _right_inverse_cached(x.outer)
        if type(x.inner) is Swizzle:
            if x.offset != 0:
                raise LayoutError(
                    f"right_inverse({x}): a swizzled layout with a nonzero offset has no "
                    "representable inverse"
                )
            return composition(inv_outer, x.inner)
        return make_composed_layout(inv_outer, -x.offset, _right_inverse_cached(x.inner))
    raise _bad("right_inverse", x)


def left_inverse(x: Any) -> Any:
    if type(x) is Swizzle:
        return x
    if type(x) is ComposedLayout:
        try:
            inv_outer = _left_inverse_cached(x.outer)
        except LayoutError as e:
            raise _wrap("left_inverse", (x,), e) from None
        if type(x.inner) is Swizzle:
            if x.offset != 0:
                raise LayoutError(
                    f"left_inverse({x}): a swizzled layout with a nonzero offset has no "
                    "representable inverse"
                )
            return composition(inv_outer, x.inner)
        try:
            inv_inner = _left_inverse_cached(x.inner)
        except LayoutError as e:
            raise _wrap("left_inverse", (x,), e) from None
        return make_composed_layout(inv_outer, -x.offset, inv_inner)
    raise _bad("left_inverse", x)


def _scale_offset(off: int, n: int, up: bool, where: str) -> int:
    if not up:
        return off * n
    if off % n:
        raise LayoutError(f"{where}: the offset {off} is not a multiple of {n}")
    return off // n


def upcast(x: Any, n: int) -> Any:
    if type(x) is Swizzle:
        return upcast_swizzle(x, n)
    if type(x) is ComposedLayout:
        where = _ctx("upcast", x, n)
        inner = upcast_swizzle(x.inner, n) if type(x.inner) is Swizzle else _upcast(x.inner, n)
        return make_composed_layout(inner, _scale_offset(x.offset, n, True, where),
                                    _upcast(x.outer, n))
    raise _bad("upcast", x, n)


def downcast(x: Any, n: int) -> Any:
    from .layout import downcast as _downcast

    if type(x) is Swizzle:
        return downcast_swizzle(x, n)
    if type(x) is ComposedLayout:
        where = _ctx("downcast", x, n)
        inner = (downcast_swizzle(x.inner, n) if type(x.inner) is Swizzle
                 else _downcast(x.inner, n))
        return make_composed_layout(inner, _scale_offset(x.offset, n, False, where),
                                    _downcast(x.outer, n))
    raise _bad("downcast", x, n)


def max_common_layout(a: Any, b: Any) -> Any:
    if type(a) is Layout and type(b) is ComposedLayout:
        a, b = b, a
    if type(a) is ComposedLayout and type(b) is Layout and type(a.inner) is Swizzle:
        common = _mcl(a.outer, b)
        base = 1 << a.inner.base
        if base < common.size():
            return _composition(common, base)
        return common
    raise _bad("max_common_layout", a, b)


def max_common_vector(a: Any, b: Any) -> int:
    if type(a) is Layout and type(b) is ComposedLayout:
        a, b = b, a
    if type(a) is ComposedLayout and type(a.inner) is Swizzle:
        if type(b) is Layout:
            return min(_mcv(a.outer, b), 1 << a.inner.base)
        if type(b) is ComposedLayout and type(b.inner) is Swizzle:
            vec = _mcv(a.outer, b.outer)
            if a.inner == b.inner:
                return vec
            return min(vec, 1 << a.inner.base, 1 << b.inner.base)
    raise _bad("max_common_vector", a, b)


# ----------------------------------------------------------------------------- slicing


def slice_and_offset(coord: Any, x: Any) -> tuple[Any, int]:
    """``(sub-layout, offset)`` with ``sub(y) + offset == x(coord with y in the _ modes)``."""
    if type(x) is not ComposedLayout:
        raise _bad("slice_and_offset", _fmt_crd(coord), x)
    coord = _norm_coord(coord)
    try:
        return _slice_and_offset_cached(coord, x)
    except TypeError:  # an unhashable coordinate element: compute without the cache
        return _slice_and_offset(coord, x)


@functools.lru_cache(maxsize=4096)
def _slice_and_offset_cached(coord: Any, x: ComposedLayout) -> tuple[Any, int]:
    return _slice_and_offset(coord, x)


def _slice_and_offset(coord: Any, x: ComposedLayout) -> tuple[Any, int]:
    try:
        sliced = _mk(slice_(coord, x.outer.shape), slice_(coord, x.outer.stride))
        off_b = _crd2idx(coord, x.outer.shape, x.outer.stride, "")
    except LayoutError as e:
        raise _wrap("slice_and_offset", (_fmt_crd(coord), x), e) from None
    if type(x.inner) is not Swizzle:
        return ComposedLayout(x.inner, x.offset + off_b, sliced), 0
    if not _has_int(coord):
        return make_composed_layout(x.inner, x.offset, sliced), 0
    res = _swizzle_slice(coord, x, sliced)
    if res is not None:
        return res
    return make_composed_layout(x.inner, x.offset + off_b, sliced), 0


def slice(coord: Any, x: Any) -> Any:
    return slice_and_offset(coord, x)[0]


def _has_int(c: Any) -> bool:
    if type(c) is tuple:
        return any(_has_int(v) for v in c)
    return not (c is None or c is _)


def _swizzle_slice(coord: Any, x: ComposedLayout, sliced: Layout) -> tuple[Any, int] | None:
    """CuTe's swizzle ``slice_and_offset`` (swizzle_layout.hpp), or None when its
    preconditions fail (then the caller keeps the composed form with the full offset)."""
    sw: Swizzle = x.inner  # type: ignore[assignment]
    b, m, s = sw.bits, sw.base, abs(sw.shift)
    # Projections of an index onto the swizzle's two bit fields ("only_zy") and onto the
    # rest ("anti_zy"); the trailing mode extends each past the swizzle's domain.
    p_shape = (1 << m, 1 << b, 1 << (s - b), 1 << b, 1)
    only_zy = _mk(p_shape, (0, 1 << m, 0, 1 << (m + s), 0))
    anti_zy = _mk(p_shape, (1, 0, 1 << (m + b), 0, 1 << (m + b + s)))
    try:
        diced = _mk(dice(coord, x.outer.shape), dice(coord, x.outer.stride))
        dcoord = dice(coord, coord)
        d_only = _compose_ll(only_zy, diced)
        d_anti = _compose_ll(anti_zy, diced)
        off_zy = x.offset ^ d_only(dcoord)
        off_anti = d_anti(dcoord)
        s_only = _compose_ll(only_zy, sliced)
        active = s_only(s_only.size() - 1)
        if active & ~sw(active):
            # The kept modes hit a Y bit and its Z partner: the swizzle stays.
            result: tuple[Any, int] = (make_composed_layout(sw, off_zy, sliced), off_anti)
        else:
            zbit = sw.zzz_msk & -sw.zzz_msk
            ybit = sw.yyy_msk & -sw.yyy_msk
            lo = _swizzle_strides(zbit < ybit, zbit, ybit, off_zy, b)
            hi = _swizzle_strides(zbit > ybit, zbit, ybit, off_zy, b)
            shapes = (1 << m, *(2,) * b, 1 << (s - b), *(2,) * b, 1)
            strides = (1, *lo, 1 << (m + b), *hi, 1 << (m + b + s))
            result = (_compose_ll(_mk(shapes, strides), sliced), sw(off_zy) + off_anti)
    except LayoutError:
        return None
    if not _slice_matches(result, x, sliced, x.offset + _crd2idx(coord, x.outer.shape,
                                                                 x.outer.stride, "")):
        return None
    return result


def _swizzle_strides(z_first: bool, z: int, y: int, off: int, b: int) -> tuple[int, ...]:
    """The signed strides of the swizzle bits once one field is fixed by ``off``."""
    if z_first:
        return tuple((z << i) if (off & (y << i)) == 0 else -(z << i) for i in range(b))
    return tuple(((y + z) << i) if (off & (z << i)) == 0 else ((y - z) << i) for i in range(b))


def _slice_matches(result: tuple[Any, int], x: ComposedLayout, sliced: Layout,
                   total: int) -> bool:
    n = sliced.size()
    if n > _DECAY_CHECK_LIMIT:
        return False
    lay, off = result
    want = x.inner(total + _values(sliced))
    got = _values_any(lay) + off
    return bool((want == got).all())


# ----------------------------------------------------------------------------- equivalence


def _values(lay: Layout) -> Any:
    """``[lay(i) for i in range(size)]`` as an int64 numpy array."""
    import numpy as np

    fs, fd = _flat(lay)
    n = lay.size()
    if n > ENUMERATION_LIMIT:
        raise LayoutError(f"{lay} has {n} elements, too many to enumerate (the limit is "
                          f"2^24 = {ENUMERATION_LIMIT})")
    # int64 unless a value could overflow it (strides are up to 2^63): then Python ints
    big = sum((s - 1) * abs(d) for s, d in zip(fs, fd, strict=True)) >= 1 << 62
    dt = object if big else np.int64
    idx = np.arange(n, dtype=np.int64).astype(dt)
    out = np.zeros(n, dtype=dt)
    for k, (s, d) in enumerate(zip(fs, fd, strict=True)):
        if s == 1 or d == 0:
            continue
        q = idx
        p = 1
        for j in range(k):
            p *= fs[j]
        if p > 1:
            q = idx // p
        if k != len(fs) - 1:
            q = q % s
        out += q * d
    return out


def _values_any(x: Any) -> Any:
    if type(x) is Layout:
        return _values(x)
    if type(x) is ComposedLayout:
        inner = _values_any_fn(x.inner)
        return inner(x.offset + _values(x.outer))
    raise LayoutError(f"expected a layout, got {_show(x)}")


def _values_any_fn(f: Any) -> Callable[[Any], Any]:
    if type(f) is Swizzle:
        return f
    if type(f) is Layout:
        return lambda v: _eval_layout_array(f, v)
    raise LayoutError(f"expected a Swizzle or a Layout, got {_show(f)}")


def _eval_layout_array(lay: Layout, v: Any) -> Any:
    import numpy as np

    if (v < 0).any():
        raise LayoutError(f"{lay}: evaluated at a negative index")
    fs, fd = _flat(lay)
    out = np.zeros_like(v)
    for k in range(len(fs) - 1):
        out += (v % fs[k]) * fd[k]
        v = v // fs[k]
    return out + v * fd[-1]


def layouts_equivalent(a: Any, b: Any) -> bool:
    """Same function on the same domain: ``size(a) == size(b)`` and ``a(i) == b(i)`` for
    every ``i < size``.  Shapes may differ (``(2,4):(1,2)`` is equivalent to ``8:1``)."""
    if type(a) is Layout and type(b) is Layout:
        if a.size() != b.size():
            return False
        # Coalesced form is canonical for the function on [0, size): a coalesced layout's
        # first mode is fixed by where i*d0 stops holding, and so on inductively.
        return _coalesce_key(a) == _coalesce_key(b)
    for v in (a, b):
        if type(v) not in (Layout, ComposedLayout):
            raise LayoutError(f"layouts_equivalent: expected layouts, got {_show(v)}")
    if a.size() != b.size():
        return False
    return bool((_values_any(a) == _values_any(b)).all())


def _coalesce_key(lay: Layout) -> tuple[Any, Any]:
    from .layout import _coalesce1

    c = _coalesce1(lay)
    return c.shape, c.stride


def format_layout(x: Any) -> str:
    """CuTe notation for a Layout, ComposedLayout, Swizzle or int tuple."""
    if type(x) in (Layout, ComposedLayout, Swizzle):
        return str(x)
    return format_int_tuple(x)

