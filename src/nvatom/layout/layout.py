"""CuTe layouts and their algebra: composition, complement, inverses, divides and products.

A *layout* ``L = S:D`` is a pair of congruent int tuples, shape ``S`` and stride ``D``.  It is a
function from coordinates to integers: a natural coordinate ``c`` (congruent to ``S``) maps to
the inner product ``sum(c_i * D_i)``, and any coarser coordinate -- down to a single int -- is
first unrolled colexicographically into a natural one.  So every layout is also a function
from the integers ``[0, size(L))`` to the integers, and that 1-D view is what the algebra
works on.  Example, the A operand of SM80's m16n8k16 MMA as (thread, value) -> element::

    L = ((4,8),(2,2,2)):((32,1),(16,8,128))       size 256, cosize 256
    L(1)          = 32      # thread 1, value 0
    L((1,0),0)    = 32      # the same, hierarchical coordinate
    L(4)          = 1       # thread 4 = (0,1) in the (4,8) thread mode

The operations, all of which mirror CuTe C++ as of CUTLASS 4.2.0 (``include/cute/layout.hpp``
with the definitions of ``int_tuple.hpp`` and ``stride.hpp``, documented in the CuTe docs
``02_layout_algebra.md``):

* ``coalesce(L)`` merges adjacent modes ``s0:d0, s1:s0*d0`` into ``s0*s1:d0`` and drops size-1
  modes; same function on ``[0, size)``, depth <= 1.  ``filter`` also drops stride-0 modes.
* ``composition(A, B)`` is the layout ``R`` with ``R(i) = A(B(i))`` and the shape of ``B``
  (refined where needed).  It exists when CuTe's *divisibility conditions* hold: each stride
  of ``B`` must step over whole modes of ``A`` or fit inside one, and each shape of ``B`` must
  be a multiple of what it takes from a mode.  ``A``'s last mode extends to infinity, so ``B``
  may reach past ``size(A)``.  A stride smaller than a mode but not dividing it pads the mode
  (CuTe 4.2's weak condition, used for ragged tiles); ``exact=True`` refuses that.  A tuple of
  layouts (a *tiler*) composes mode by mode.
* ``complement(A, M)`` is the ordered layout that fills the holes of ``A`` up to ``M``: it
  enumerates the "repetitions" of ``A``; ``(A, complement(A, M))`` covers ``[0, M)`` once when
  ``A`` tiles it exactly.
* ``right_inverse(L)`` / ``left_inverse(L)`` invert ``L`` on the largest contiguous part of its
  image / on its whole image.
* ``logical_divide(A, B) = A o (B, complement(B, shape(coalesce(A))))``: the first mode
  enumerates the tile ``B`` inside ``A``, the second the tiles.
  ``logical_product(A, B) = (A, complement(A, size(A)*cosize(B)) o B)``: ``A`` repeated in
  the pattern of ``B``.  ``zipped_``, ``tiled_`` and ``flat_`` variants regroup the modes;
  ``blocked_product`` and ``raked_product`` zip the modes of ``A`` and ``B`` rank by rank;
  ``tile_to_shape`` repeats a block to a shape.

:class:`ComposedLayout` (``inner o offset o outer``, a layout followed by a swizzle or another
layout) lives in this module too: a Layout composed with a Swizzle is a ComposedLayout and a
ComposedLayout's domain is a Layout, so each operation takes both kinds; the section
"composed layouts" below says how the operations act on them.  CuTe notation is read by
``notation.py`` into plain parts that :func:`parse_layout` turns into objects.

The public names are listed once, by the package (``nvatom/layout/__init__.py``).

Every argument is checked, every CuTe ``static_assert`` becomes a :class:`LayoutError` that
names the layouts involved, and no operation returns a layout of the wrong size.  Layouts are
immutable and hashable, so the heavier operations keep a small cache of recent results.
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable
from typing import Any

from nvatom.errors import LayoutError

from .inttuple import (
    IntTuple,
    _,
    _as_int_tuple,
    _crd2idx,
    _fmt_crd,
    ceil_div,
    compact_col_major,
    compact_order,
    compact_row_major,
    congruent,
    dice,
    evenly_divides,
    flatten_to_tuple,
    format_int_tuple,
    has_underscore,
    product,
    product_each,
    signum,
    slice_,
    unflatten,
)
from .inttuple import depth as _tdepth
from .inttuple import flatten as _tflatten
from .inttuple import get as _tget
from .inttuple import rank as _trank
from .notation import ParsedLayout, parse_parts
from .svg import LayoutPicture, layout_html, layout_svg
from .swizzle import Swizzle, compose_swizzles, downcast_swizzle, make_swizzle, upcast_swizzle

_CACHE = 4096


class _Pictured:
    """Pictures (nvatom.layout.svg) of a Layout or ComposedLayout: Jupyter shows the layout as
    its (row, col) -> offset grid."""

    __slots__ = ()

    def picture(self, *, element_bits: int | None = None, base: int = 0) -> LayoutPicture:
        """The picture with cells coloured by the bank of ``element_bits``-wide elements."""
        return LayoutPicture(self, element_bits=element_bits, base=base)

    def _repr_svg_(self) -> str:
        return layout_svg(self)

    def _repr_html_(self) -> str:
        return layout_html(self)


class Layout(_Pictured):
    """A CuTe layout ``shape:stride``; immutable, hashable, ``==`` compares structure.

    ``Layout(shape)`` uses compact column-major strides; ``Layout('(4,8):(8,1)')`` parses CuTe
    notation.  Call it with an int or a (hierarchical) coordinate to get an index; a
    coordinate containing ``_`` (or ``None``) slices instead.  ``layout[i]`` is mode ``i``.
    """

    __slots__ = ("_ev", "_flat", "_hash", "_shape", "_size", "_str", "_stride")

    _shape: IntTuple
    _stride: IntTuple

    def __new__(cls, shape: Any, stride: Any = None) -> Layout:
        if type(shape) is str:
            if stride is not None:
                raise LayoutError("Layout(text): a parsed layout takes no separate stride")
            r = parse_layout(shape)
            if type(r) is not Layout:
                raise LayoutError(f"Layout({shape!r}): the text is a ComposedLayout")
            return r
        if stride is None:
            if type(shape) is int and shape > 0:
                return _mk(shape, 1 if shape != 1 else 0)
            s = _as_int_tuple(shape, "Layout", positive=True)
            return _mk(s, compact_col_major(s))
        if _valid_pair(shape, stride):
            return _mk(shape, stride)
        s = _as_int_tuple(shape, "Layout", positive=True)
        d = _as_int_tuple(stride, "Layout", positive=False)
        if not congruent(s, d):
            raise LayoutError(
                f"Layout: shape {format_int_tuple(s)} and stride {format_int_tuple(d)} "
                "are not congruent"
            )
        return _mk(s, d)

    def __reduce__(self) -> tuple[Any, ...]:
        return (Layout, (self._shape, self._stride))

    # -- accessors

    @property
    def shape(self) -> IntTuple:
        return self._shape

    @property
    def stride(self) -> IntTuple:
        return self._stride

    @property
    def rank(self) -> int:
        return len(self._shape) if type(self._shape) is tuple else 1

    @property
    def depth(self) -> int:
        return _tdepth(self._shape)

    def size(self) -> int:
        n = self._size
        if n is None:
            n = self._size = product(self._shape)
        return n

    def cosize(self) -> int:
        return _cosize(self)

    def __getitem__(self, idx: int | tuple[int, ...]) -> Layout:
        if type(idx) is tuple:
            return get(self, *idx)
        return get(self, idx)  # type: ignore[arg-type]

    def __iter__(self) -> Any:
        return iter(_modes(self))

    # -- mapping

    def __call__(self, *args: Any) -> Any:
        if len(args) == 1:
            c = args[0]
            if type(c) is int:
                ev = self._ev
                if ev is None:
                    ev = self._build_ev()
                if c < 0:
                    raise LayoutError(f"{self}: negative index {c}")
                r = 0
                for s, d in ev[0]:
                    r += (c % s) * d
                    c //= s
                return r + c * ev[1]
        else:
            c = args
        if has_underscore(c):
            return _slice(c, self)
        return _crd2idx(c, self._shape, self._stride, str(self))

    def _build_ev(self) -> tuple[tuple[tuple[int, int], ...], int]:
        fs, fd = _flat(self)
        pairs = tuple((s, d) for s, d in zip(fs[:-1], fd[:-1], strict=True) if s != 1)
        ev = (pairs, fd[-1] if fs else 0)
        self._ev = ev
        return ev

    def compose(self, *others: Any) -> Layout:
        """``composition(self, other)``; several arguments form a tiler."""
        return composition(self, others[0] if len(others) == 1 else tuple(others))

    def with_shape(self, *shape: Any) -> Layout:
        """``composition(self, make_layout(shape))``: view the same function with a new shape."""
        s = shape[0] if len(shape) == 1 else tuple(shape)
        return composition(self, Layout(s))

    # -- comparison and text

    def __eq__(self, other: object) -> bool:
        if type(other) is not Layout:
            return NotImplemented
        return self._shape == other._shape and self._stride == other._stride

    def __ne__(self, other: object) -> bool:
        if type(other) is not Layout:
            return NotImplemented
        return self._shape != other._shape or self._stride != other._stride

    def __hash__(self) -> int:
        h = self._hash
        if h is None:
            h = self._hash = hash((self._shape, self._stride))
        return h

    def __str__(self) -> str:
        t = self._str
        if t is None:
            # Python's tuple repr is C code; CuTe's text differs only by the spaces and the
            # trailing comma of 1-tuples.
            t = self._str = (repr(self._shape) + ":" + repr(self._stride)).replace(
                " ", "").replace(",)", ")")
        return t

    def __repr__(self) -> str:
        return f"Layout('{self}')"



def _valid_pair(s: Any, d: Any) -> bool:
    """Fast check: exact ints, positive shapes, congruent.  False sends to the slow path
    (which normalises lists and numpy ints, or says what is wrong)."""
    if type(s) is int:
        return type(d) is int and s > 0
    if type(s) is not tuple or type(d) is not tuple or len(s) != len(d):
        return False
    for a, b in zip(s, d):  # noqa: B905 - lengths checked above
        if type(a) is int:
            if type(b) is not int or a < 1:
                return False
        elif not _valid_pair(a, b):
            return False
    return True


def _mk(shape: IntTuple, stride: IntTuple) -> Layout:
    """Build a Layout from already-validated parts (the algebra's internal constructor)."""
    obj = object.__new__(Layout)
    obj._shape = shape
    obj._stride = stride
    # Derived values are computed on first use; None here is cheaper than the AttributeError
    # an unset slot would raise on that first use.
    obj._ev = obj._flat = obj._hash = obj._size = obj._str = None
    return obj


_EMPTY_FLAT: tuple[tuple[int, ...], tuple[int, ...]] = ((1,), (0,))


def _flat(lay: Layout) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Flattened (shapes, strides) leaves; the empty layout ``():()`` acts as ``1:0``."""
    f = lay._flat
    if f is None:
        s = lay._shape
        if type(s) is int:
            f = ((s,), (lay._stride,))
        else:
            fs = flatten_to_tuple(s)
            f = (fs, flatten_to_tuple(lay._stride)) if fs else _EMPTY_FLAT
        lay._flat = f
    return f


def _from_list(shapes: list[IntTuple] | tuple[IntTuple, ...],
               strides: list[IntTuple] | tuple[IntTuple, ...]) -> Layout:
    """One mode stays a scalar layout; several form a tuple (how CuTe's algorithms return)."""
    if len(shapes) == 1:
        return _mk(shapes[0], strides[0])
    return _mk(tuple(shapes), tuple(strides))


class _MajorTag:
    """``LayoutLeft`` / ``LayoutRight``: generalized column- / row-major order tags.

    Pass one to :func:`make_layout` or :func:`tile_to_shape`, or call it on a shape:
    ``LayoutRight((4,8)) == Layout((4,8), (8,1))``.
    """

    __slots__ = ("_left", "_name")

    def __init__(self, name: str, left: bool) -> None:
        self._name = name
        self._left = left

    def strides(self, shape: IntTuple) -> IntTuple:
        return compact_col_major(shape) if self._left else compact_row_major(shape)

    def __call__(self, shape: Any) -> Layout:
        s = _as_int_tuple(shape, self._name, positive=True)
        return _mk(s, self.strides(s))

    def __repr__(self) -> str:
        return self._name


LayoutLeft = _MajorTag("LayoutLeft", True)
LayoutRight = _MajorTag("LayoutRight", False)


# ============================================================================ small helpers


def _need_layout(x: object, where: str) -> Layout:
    if type(x) is Layout:
        return x
    raise LayoutError(f"{where}: expected a Layout, got {_show(x)}")


def _show(x: Any) -> str:
    """Render an argument for an error message (layouts in CuTe notation)."""
    if type(x) is tuple:
        return "<" + ",".join(_show(v) for v in x) + ">"
    if x is None or x is _:
        return "_"
    return str(x)


def _ctx(name: str, *args: Any) -> str:
    return f"{name}(" + ", ".join(_show(a) for a in args) + ")"


def _wrap(name: str, args: tuple[Any, ...], e: LayoutError) -> LayoutError:
    return LayoutError(f"{_ctx(name, *args)}: {e}")


def _rank(lay: Layout) -> int:
    s = lay._shape
    return len(s) if type(s) is tuple else 1


def _mode(lay: Layout, i: int) -> Layout:
    s = lay._shape
    if type(s) is tuple:
        return _mk(s[i], lay._stride[i])  # type: ignore[index]
    if i != 0:
        raise LayoutError(f"mode {i} out of range for the rank-1 layout {lay}")
    return lay


def _modes(lay: Layout) -> list[Layout]:
    s = lay._shape
    if type(s) is tuple:
        return [_mk(a, b) for a, b in zip(s, lay._stride, strict=True)]  # type: ignore[arg-type]
    return [lay]


def _concat(layouts: list[Layout] | tuple[Layout, ...]) -> Layout:
    """CuTe's ``make_layout(L0, L1, ...)``: the modes side by side (always a tuple)."""
    return _mk(tuple(x._shape for x in layouts), tuple(x._stride for x in layouts))


def _cosize(lay: Layout) -> int:
    fs, fd = _flat(lay)
    # The largest index is reached at the last coordinate once strides are made positive.
    return 1 + sum((s - 1) * abs(d) for s, d in zip(fs, fd, strict=True))


def _cached(fn: Callable[..., Any]) -> Callable[..., Any]:
    return functools.lru_cache(maxsize=_CACHE)(fn)


# ============================================================================ construction


def make_layout(*args: Any, order: Any = None) -> Any:
    """CuTe's ``make_layout``.

    * ``make_layout(shape)`` -- compact column-major;
    * ``make_layout(shape, stride)``;
    * ``make_layout(shape, LayoutLeft | LayoutRight)``;
    * ``make_layout(shape, order=(...))`` -- compact in the given mode order;
    * ``make_layout(L0, L1, ...)`` -- concatenate layouts as modes;
    * ``make_layout(swizzle)`` -- the swizzle on its own domain (a ComposedLayout).
    """
    if not args:
        raise LayoutError("make_layout: needs a shape or layouts")
    a0 = args[0]
    if type(a0) is Layout or all(type(a) is Layout for a in args):
        if not all(type(a) is Layout for a in args):
            raise LayoutError(
                "make_layout: mix of layouts and other arguments: "
                + ", ".join(_show(a) for a in args)
            )
        if order is not None:
            raise LayoutError("make_layout(layouts...): order applies to shapes only")
        return _concat(args)
    if len(args) == 1 and is_swizzle(a0):
        return make_swizzle_layout(a0)
    if len(args) > 2:
        raise LayoutError(f"make_layout: too many arguments ({len(args)})")
    if order is not None:
        if len(args) != 1:
            raise LayoutError("make_layout: give either a stride or an order, not both")
        return make_ordered_layout(a0, order)
    if len(args) == 2 and isinstance(args[1], _MajorTag):
        return args[1](a0)
    return Layout(a0, args[1] if len(args) == 2 else None)


def make_ordered_layout(shape: Any, order: Any) -> Layout:
    """Compact layout whose leaves are enumerated in increasing ``order`` (congruent to
    ``shape``), e.g. ``make_ordered_layout((2,2,2,2), (0,2,3,1)) == (2,2,2,2):(1,4,8,2)``."""
    s = _as_int_tuple(shape, "make_ordered_layout", positive=True)
    if isinstance(order, _MajorTag):
        return _mk(s, order.strides(s))
    o = _as_int_tuple(order, "make_ordered_layout", positive=False)
    try:
        return _mk(s, compact_order(s, o))
    except LayoutError as e:
        raise _wrap("make_ordered_layout", (format_int_tuple(s), format_int_tuple(o)), e) from None


def make_layout_like(layout: Layout) -> Layout:
    """Compact layout with ``layout``'s shape, its modes ordered like its strides; stride-0
    modes stay stride 0 (CuTe's ``make_layout_like``)."""
    lay = _need_layout(layout, "make_layout_like")
    s, d = lay._shape, lay._stride
    return _mk(s, compact_order(_filter_zeros(d, s), d))


def _filter_zeros(d: IntTuple, s: IntTuple) -> IntTuple:
    if type(d) is tuple:
        return tuple(_filter_zeros(x, y) for x, y in zip(d, s, strict=True))  # type: ignore[arg-type]
    if d == 0:
        return _ones_like(s)
    return s


def _ones_like(s: IntTuple) -> IntTuple:
    if type(s) is tuple:
        return tuple(_ones_like(v) for v in s)
    return 1


# ============================================================================ queries


def size(x: Any) -> int:
    """Size of the domain of a layout, or the product of an int tuple."""
    if type(x) is Layout:
        return x.size()
    if type(x) is int or type(x) is tuple:
        return product(x)
    return _composed_size(x)


def cosize(x: Any) -> int:
    """Size of the codomain: ``max(L(i)) + 1`` over the domain (with ``|stride|``)."""
    if type(x) is Layout:
        return _cosize(x)
    return _composed_cosize(x)


def shape(x: Any) -> IntTuple:
    if type(x) is Layout:
        return x._shape
    if type(x) is int or type(x) is tuple:
        return x
    return _composed_shape(x)


def rank(x: Any) -> int:
    """Number of top-level modes of a layout or an int tuple (an int has rank 1)."""
    if type(x) is Layout:
        return _rank(x)
    if type(x) is int or type(x) is tuple:
        return _trank(x)
    if is_composed(x):
        return x.rank
    raise LayoutError(f"rank: expected a layout or an int tuple, got {_show(x)}")


def stride(x: Any) -> IntTuple:
    return _need_layout(x, "stride")._stride


def depth(x: Any) -> int:
    if type(x) is int or type(x) is tuple:
        return _tdepth(x)
    return _tdepth(shape(x))


def get(x: Any, *idx: int) -> Any:
    """``get<I...>(x)``: the sub-layout (or sub-tuple) at a nested mode index."""
    if type(x) is not Layout:
        if type(x) is int or type(x) is tuple:
            return _tget(x, *idx)
        return _composed_get(x, *idx)
    lay = x
    for i in idx:
        if type(i) is not int:
            raise LayoutError(f"get: mode index must be an int, got {i!r}")
        s = lay._shape
        if type(s) is tuple:
            if not -len(s) <= i < len(s):
                raise LayoutError(f"get({lay}, {i}): mode {i} out of range for rank {len(s)}")
            lay = _mk(s[i], lay._stride[i])  # type: ignore[index]
        elif i != 0:
            raise LayoutError(f"get({lay}, {i}): mode {i} out of range for rank 1")
    return lay


def select(layout: Any, *idx: int) -> Any:
    """The layout of the modes ``idx`` (in that order)."""
    if type(layout) is not Layout:
        return on_outer(layout, lambda o: select(o, *idx))
    return _concat([get(layout, i) for i in idx])


def take(layout: Any, begin: int, end: int) -> Any:
    """The layout of the modes ``[begin, end)``."""
    if type(layout) is not Layout:
        return on_outer(layout, lambda o: take(o, begin, end))
    r = _rank(layout)
    if not 0 <= begin < end <= r:
        raise LayoutError(f"take({layout}, {begin}, {end}): range out of bounds for rank {r}")
    return _concat(_modes(layout)[begin:end])


def flatten(x: Any) -> Any:
    """Layout with every leaf a top-level mode (depth <= 1); on int tuples, their leaves."""
    if type(x) is Layout:
        if type(x._shape) is int:
            return x
        return _mk(flatten_to_tuple(x._shape), flatten_to_tuple(x._stride))
    if type(x) is int or type(x) is tuple:
        return _tflatten(x)
    return on_outer(x, flatten)


def unflatten_layout(layout: Layout, profile: IntTuple) -> Layout:
    """Fold a flat layout back into the nesting of ``profile``."""
    lay = _need_layout(layout, "unflatten")
    return _mk(unflatten(lay._shape, profile), unflatten(lay._stride, profile))


def group(layout: Any, begin: int, end: int) -> Any:
    """Gather the modes ``[begin, end)`` into one mode."""
    if type(layout) is not Layout:
        return on_outer(layout, lambda o: group(o, begin, end))
    ms = _modes(layout)
    if not 0 <= begin <= end <= len(ms):
        raise LayoutError(f"group({layout}, {begin}, {end}): range out of bounds")
    return _concat([*ms[:begin], _concat(ms[begin:end]), *ms[end:]])


def append(layout: Any, x: Layout | None = None, *, n: int | None = None) -> Any:
    """Append mode ``x`` (default ``1:0``); with ``n``, pad with ``x`` up to rank ``n``."""
    if type(layout) is not Layout:
        return on_outer(layout, lambda o: append(o, x, n=n))
    xx = _mk(1, 0) if x is None else _need_layout(x, "append")
    if n is None:
        return _concat([*_modes(layout), xx])
    return _append_to(layout, n, xx)


def _append_to(lay: Layout, n: int, x: Layout | None = None) -> Layout:
    """CuTe's ``append<N>``: pad to rank ``n``; a scalar layout at ``n == 1`` stays scalar."""
    r = _rank(lay)
    if r > n:
        raise LayoutError(f"append({lay}, n={n}): the layout already has rank {r}")
    if r == n:
        return lay
    xx = _mk(1, 0) if x is None else x
    return _concat(_modes(lay) + [xx] * (n - r))


def prepend(layout: Any, x: Layout | None = None, *, n: int | None = None) -> Any:
    """Prepend mode ``x`` (default ``1:0``); with ``n``, pad in front up to rank ``n``."""
    if type(layout) is not Layout:
        return on_outer(layout, lambda o: prepend(o, x, n=n))
    xx = _mk(1, 0) if x is None else _need_layout(x, "prepend")
    if n is None:
        return _concat([xx, *_modes(layout)])
    r = _rank(layout)
    if r > n:
        raise LayoutError(f"prepend({layout}, n={n}): the layout already has rank {r}")
    if r == n:
        return layout
    return _concat([xx] * (n - r) + _modes(layout))


# ============================================================================ slicing


def _slice(coord: Any, lay: Layout) -> Layout:
    return _mk(slice_(coord, lay._shape), slice_(coord, lay._stride))


def slice(coord: Any, layout: Any) -> Any:
    """The sub-layout of the modes where ``coord`` has ``_`` (or ``None``); the offset of the
    fixed coordinates is dropped (see :func:`slice_and_offset`)."""
    if type(layout) is Layout:
        coord = _norm_coord(coord)
        try:
            return _slice(coord, layout)
        except LayoutError as e:
            raise _wrap("slice", (_fmt_crd(coord), layout), e) from None
    return _composed_slice(coord, layout)


def slice_and_offset(coord: Any, layout: Any) -> tuple[Any, int]:
    """``(slice(coord, layout), layout(coord with _ as 0))``: the sub-layout and its offset."""
    if type(layout) is Layout:
        coord = _norm_coord(coord)
        try:
            return _slice(coord, layout), _crd2idx(coord, layout._shape, layout._stride, "")
        except LayoutError as e:
            raise _wrap("slice_and_offset", (_fmt_crd(coord), layout), e) from None
    return _composed_slice_and_offset(coord, layout)


def dice_layout(coord: Any, layout: Layout) -> Layout:
    """The sub-layout of the modes where ``coord`` has an integer (CuTe's ``dice``)."""
    lay = _need_layout(layout, "dice")
    coord = _norm_coord(coord)
    return _mk(dice(coord, lay._shape), dice(coord, lay._stride))


def _norm_coord(c: Any) -> Any:
    if type(c) is list:
        return tuple(_norm_coord(v) for v in c)
    if type(c) is tuple:
        return tuple(_norm_coord(v) for v in c) if any(type(v) is list for v in c) else c
    return c


# ============================================================================ coalesce, filter


def _bw_coalesce(fs: Any, fd: Any, n: int, ns: int, nd: int) -> tuple[IntTuple, IntTuple]:
    """CuTe's ``bw_coalesce``: fold the leaves ``n-1 .. 0`` of (fs, fd), right to left, onto the
    front mode (ns, nd): skip size 1, replace a size-1 front, merge ``s:d`` into a front with
    stride ``s*d``, else prepend."""
    rs = [ns]
    rd = [nd]
    for k in range(n - 1, -1, -1):
        s = fs[k]
        if s == 1:
            continue
        d = fd[k]
        if len(rs) == 1 and rs[0] == 1:
            rs[0] = s
            rd[0] = d
        elif s * d == rd[-1]:
            rs[-1] *= s
            rd[-1] = d
        else:
            rs.append(s)
            rd.append(d)
    if len(rs) == 1:
        return (1, 0) if rs[0] == 1 else (rs[0], rd[0])
    rs.reverse()
    rd.reverse()
    return tuple(rs), tuple(rd)


def _coalesce1(lay: Layout) -> Layout:
    fs, fd = _flat(lay)
    n = len(fs)
    s, d = _bw_coalesce(fs, fd, n - 1, fs[-1], fd[-1])
    return _mk(s, d)


def _coalesce_x(lay: Layout) -> tuple[Any, Any]:
    """CuTe's ``detail::coalesce_x``: like coalesce but keeps the function *outside* the
    domain too -- a trailing size-1 mode still sets the stride of the infinite extension."""
    fs, fd = _flat(lay)
    n = len(fs)
    last = fs[-1]
    return _bw_coalesce(fs, fd, n - 1, 2 if last == 1 else last, fd[-1])


@_cached
def _coalesce_cached(lay: Layout, profile: Any) -> Layout:
    if profile is None or type(profile) is not tuple:
        return _coalesce1(lay)
    return _bymode(lay, profile, lambda m, p: _coalesce_cached(m, p), "coalesce")


def coalesce(layout: Any, profile: Any = None) -> Any:
    """Simplify to the fewest modes with the same function on ``[0, size)`` (depth <= 1).
    With ``profile`` (an int tuple), coalesce each mode at the profile's leaves separately:
    ``coalesce((2,(1,6)):(1,(6,2)), (1,1)) == (2,6):(1,2)``."""
    if type(layout) is not Layout:
        return on_outer(layout, lambda o: coalesce(o, profile))
    try:
        return _coalesce_cached(layout, _norm_profile(profile))
    except LayoutError as e:
        raise _wrap("coalesce", (layout, profile), e) from None


def _norm_profile(p: Any) -> Any:
    if p is None or type(p) is int:
        return p
    if type(p) in (tuple, list):
        return tuple(_norm_profile(v) for v in p)
    raise LayoutError(f"profile must be an int tuple, got {p!r}")


def _filter1(lay: Layout) -> Layout:
    fs, fd = _flat(lay)
    ks = [s if d != 0 else 1 for s, d in zip(fs, fd, strict=True)]
    s, d = _bw_coalesce(ks, fd, len(ks) - 1, ks[-1], fd[-1])
    return _mk(s, d)


@_cached
def _filter_cached(lay: Layout, profile: Any) -> Layout:
    if profile is None or type(profile) is not tuple:
        return _filter1(lay)
    return _bymode(lay, profile, lambda m, p: _filter_cached(m, p), "filter")


def filter(layout: Any, profile: Any = None) -> Any:
    """Remove every stride-0 and size-1 mode, then coalesce (``1:0`` if nothing is left)."""
    if type(layout) is not Layout:
        return on_outer(layout, lambda o: filter(o, profile))
    try:
        return _filter_cached(layout, _norm_profile(profile))
    except LayoutError as e:
        raise _wrap("filter", (layout, profile), e) from None


def _bymode(lay: Layout, tiler: tuple[Any, ...], f: Callable[[Layout, Any], Layout],
            name: str, *, keep_rest: bool = True) -> Layout:
    """CuTe's ``transform_layout(layout, tiler, f)``: apply ``f`` to the first modes, keep the
    remaining modes of ``lay`` as they are (or drop them, as by-mode composition does)."""
    r = _rank(lay)
    if len(tiler) > r:
        raise LayoutError(
            f"the tiler {_show(tiler)} has {len(tiler)} modes but {lay} has only {r}"
        )
    out = [f(_mode(lay, i), t) for i, t in enumerate(tiler)]
    if keep_rest and len(tiler) < r:
        out.extend(_modes(lay)[len(tiler):])
    return _concat(out)


# ============================================================================ composition


def _compose_leaf(ls: Any, ld: Any, rs: int, rd: int, exact: bool) -> tuple[IntTuple, IntTuple]:
    """``composition_impl`` of CuTe 4.2 for an integral right-hand mode ``rs:rd`` on the
    coalesced left layout ``ls:ld`` (depth <= 1): walk the left modes, skip those the stride
    steps over, keep ``min(what the stride leaves of the mode, the shape still wanted)``.

    A stride smaller than a mode but not dividing it is accepted, as in CuTe 4.2: the mode is
    treated as padded up to a multiple of the stride (how CuTe tiles a mode that a tile does
    not divide, leaving the padding to predication).  ``exact=True`` refuses those cases (and
    ``_check_exact`` then verifies the whole result), so that ``R(i) == A(B(i))``."""
    if rd == 0:
        return rs, 0
    if type(ls) is int:
        return rs, rd * ld
    r = len(ls)

    def flat_lhs() -> str:
        return format_int_tuple(ls) + ":" + format_int_tuple(ld)

    res_s: list[int] = []
    res_d: list[int] = []
    rest_shape = rs
    rest_stride = rd
    for i in range(r - 1):
        c = ls[i]
        # C++ remainders and quotients: truncating, sign taken apart.
        ars = abs(rest_stride)
        if ars % c != 0 and not rest_stride < c:
            raise LayoutError(
                f"stride {rd} of the right-hand layout does not divide the left-hand layout: "
                f"the remaining stride {rest_stride} is neither a multiple of nor smaller than "
                f"shape {c} of mode {i} of {flat_lhs()} (stride divisibility condition)"
            )
        next_shape = (c + ars - 1) // ars
        next_stride = (ars + c - 1) // c * (1 if rest_stride > 0 else -1)
        if exact and rest_shape > 1 and ars % c != 0 and c % ars != 0:
            raise LayoutError(
                f"stride {rd} of the right-hand layout does not divide the left-hand layout: "
                f"the remaining stride {rest_stride} and shape {c} of mode {i} of {flat_lhs()} "
                "do not divide each other, so CuTe's result may pad that mode (exact "
                "composition requested)"
            )
        if next_shape == 1 or rest_shape == 1:
            rest_stride = next_stride
            continue
        new_shape = min(next_shape, rest_shape)
        if rest_shape % new_shape != 0:
            raise LayoutError(
                f"shape {rs} (stride {rd}) of the right-hand layout does not fit the left-hand "
                f"layout: the remaining shape {rest_shape} is not a multiple of {new_shape}, "
                f"what is left of mode {i} of {flat_lhs()} (shape divisibility condition)"
            )
        res_s.append(new_shape)
        res_d.append(rest_stride * ld[i])
        rest_shape //= new_shape
        rest_stride = next_stride
    if not res_s:
        return rest_shape, rest_stride * ld[-1]
    if rest_shape == 1:
        return (res_s[0], res_d[0]) if len(res_s) == 1 else (tuple(res_s), tuple(res_d))
    res_s.append(rest_shape)
    res_d.append(rest_stride * ld[-1])
    return tuple(res_s), tuple(res_d)


def _compose_impl(ls: Any, ld: Any, rs: IntTuple, rd: IntTuple,
                  exact: bool) -> tuple[IntTuple, IntTuple]:
    if type(rs) is tuple:
        shapes = []
        strides = []
        for s, d in zip(rs, rd, strict=True):  # type: ignore[arg-type]
            a, b = _compose_impl(ls, ld, s, d, exact)
            shapes.append(a)
            strides.append(b)
        return tuple(shapes), tuple(strides)
    return _compose_leaf(ls, ld, rs, rd, exact)  # type: ignore[arg-type]


@_cached
def _compose_ll(a: Layout, b: Layout, exact: bool = False) -> Layout:
    ls, ld = _coalesce_x(a)
    try:
        s, d = _compose_impl(ls, ld, b._shape, b._stride, exact)
        r = _mk(s, d)
        if exact:
            _check_exact(a, b, r)
    except LayoutError as e:
        raise _wrap("composition", (a, b), e) from None
    return r


def _check_exact(a: Layout, b: Layout, r: Layout) -> None:
    """CuTe composes mode by mode, which is the function composition only when the modes of
    ``b`` do not interact inside ``a`` (no carries between them); check it outright."""
    bv = _values(b)
    if bv.size and bv.min() < 0:
        raise LayoutError("exact composition cannot be checked: the right-hand layout "
                          "produces negative indices")
    want = _eval_layout_array(a, bv)
    got = _values(r)
    bad = (want != got).nonzero()[0]
    if bad.size:
        i = int(bad[0])
        raise LayoutError(
            f"CuTe's mode-by-mode result {r} is not the function composition: at index {i} "
            f"it gives {int(got[i])} but the left-hand layout at {int(bv[i])} is {int(want[i])} "
            "(the modes of the right-hand layout interact; exact composition requested)"
        )


@_cached
def _compose_lt(a: Layout, t: Any, exact: bool = False) -> Layout:
    """Composition with a tiler: a Layout, an int ``n`` (= ``n:1``), ``_``, or a tuple applied
    mode by mode (modes of ``a`` beyond the tiler are dropped, as in CuTe)."""
    if type(t) is Layout:
        return _compose_ll(a, t, exact)
    if t is _:
        return a
    if type(t) is int:
        return _compose_ll(a, _mk(t, 1), exact)  # CuTe uses t:_1 here, not make_layout(t)
    try:
        return _bymode(a, t, lambda m, x: _compose_lt(m, x, exact), "composition",
                       keep_rest=False)
    except LayoutError as e:
        if str(e).startswith("composition("):
            raise
        raise _wrap("composition", (a, t), e) from None


def _norm_tiler(t: Any, where: str, *, allow_composed: bool = False) -> Any:
    """Validate a tiler: Layout | positive int | _/None | tuple of tilers (lists accepted)."""
    tt = type(t)
    if tt is Layout:
        return t
    if tt is int:
        if t < 1:
            raise LayoutError(f"{where}: a tile size must be >= 1, got {t}")
        return t
    if t is None or t is _:
        return _
    if tt is tuple or tt is list:
        return tuple(_norm_tiler(v, where) for v in t)
    if allow_composed and is_composed(t):
        return t
    if isinstance(t, bool):
        raise LayoutError(f"{where}: invalid tiler {t!r}")
    try:
        v = operator.index(t)
    except TypeError:
        raise LayoutError(
            f"{where}: a tiler is a Layout, an int, _ or a tuple of those; got {t!r}"
        ) from None
    return _norm_tiler(v, where)


def composition(a: Any, b: Any, *rest: Any, exact: bool = False) -> Any:
    """``a o b``: the layout ``R`` with ``R(c) == a(b(c))`` for every coordinate ``c`` of ``b``.

    ``b`` may be a Layout, an int ``n`` (meaning ``n:1``), ``_``/``None`` (keep ``a``), or a
    tuple of those applied to the modes of ``a`` (a tiler; modes of ``a`` past the tiler are
    dropped, as in CuTe).  Swizzles and ComposedLayouts compose too;
    ``composition(inner, offset, outer)`` builds a ComposedLayout.

    Like CuTe 4.2, a stride of ``b`` that is smaller than a mode of ``a`` without dividing it
    pads that mode (see ``docs/layout.md``); ``exact=True`` raises instead, guaranteeing
    ``R(i) == a(b(i))`` for all ``i < size(b)``.
    """
    if rest:
        return make_composed_layout(a, b, *rest)
    if type(a) is Layout:
        tb = type(b)
        if tb is Layout:
            return _compose_ll(a, b, exact)
        if tb is int or tb is tuple or tb is list or b is None or b is _:
            return _compose_lt(a, _norm_tiler(b, _ctx("composition", a, b)), exact)
    return _composed_composition(a, b)


# ============================================================================ complement


def _norm_cotarget(c: Any, where: str) -> IntTuple:
    v = _as_int_tuple(c, where, positive=True)
    return v


@_cached
def _complement_cached(lay: Layout, cotarget: IntTuple | None) -> Layout:
    f = _filter1(lay)
    fs, fd = _flat(f)
    if cotarget is None:
        cotarget = _cosize(f)
    if fd[0] == 0:
        # Nothing is covered (filter left 1:0): the complement is all of the cotarget.
        n = product(cotarget)
        return _mk(n, 1 if n != 1 else 0)
    shapes = list(fs)
    strides = list(fd)
    if min(strides) < 0:
        raise LayoutError(f"the layout {lay} has a negative stride; complement needs "
                          "non-negative strides")
    r = len(shapes)
    rshape: list[int] = []
    rstride = [1]
    for i in range(r):
        m = min(strides)
        k = strides.index(m)
        ns = m // rstride[i]
        if ns == 0:
            raise LayoutError(
                f"{lay} has no complement: stride {m} is smaller than {rstride[i]}, the "
                "extent its smaller modes already span (the layout is not injective, or its "
                "modes interleave)"
            )
        rshape.append(ns)
        nxt = m * shapes[k]
        del shapes[k]
        del strides[k]
        if i < r - 1:
            rstride.append(nxt)
        else:
            rest = product(ceil_div(cotarget, nxt))
            rshape.append(rest)
            rstride.append(nxt)
    s, d = _bw_coalesce(rshape, rstride, r, rshape[-1], rstride[-1])
    return _mk(s, d)


def complement(layout: Any, cotarget: Any = None) -> Any:
    """The ordered layout of the "holes and repetitions" of ``layout`` up to ``cotarget``
    (an int or a shape; default ``cosize(filter(layout))``): disjoint from ``layout``'s image,
    strides increasing, and ``(layout, complement)`` reaches at least ``size(cotarget)``.
    ``complement(4:2, 24) == (2,3):(1,8)``."""
    if type(layout) is not Layout:
        return _composed_complement(layout, cotarget)
    try:
        ct = None if cotarget is None else _norm_cotarget(cotarget, "cotarget")
        return _complement_cached(layout, ct)
    except LayoutError as e:
        args = (layout,) if cotarget is None else (layout, _show_it(cotarget))
        raise _wrap("complement", args, e) from None


def _show_it(x: Any) -> str:
    try:
        return format_int_tuple(_as_int_tuple(x, "", positive=False))
    except LayoutError:
        return repr(x)


# ============================================================================ inverses


def _exchange_sort(keys: list[int]) -> list[int]:
    """Indices of ``keys`` in the order CuTe's (unstable) ``exchange_sort`` puts them."""
    a = list(enumerate(keys))
    n = len(a)
    for i in range(n):
        for j in range(i + 1, n):
            if a[j][1] < a[i][1]:
                a[i], a[j] = a[j], a[i]
    return [k for k, _v in a]


@_cached
def _right_inverse_cached(lay: Layout) -> Layout:
    c = _coalesce1(lay)
    cs, cd = _flat(c)
    pre = [1]
    for s in cs:
        pre.append(pre[-1] * s)
    rs = [1]
    rd = [0]
    curr = 1
    for k in _exchange_sort(list(cd)):
        if cd[k] == curr:
            rs.append(cs[k])
            rd.append(pre[k])
            curr = cs[k] * cd[k]
    s, d = _bw_coalesce(rs, rd, len(rs) - 1, rs[-1], rd[-1])
    return _mk(s, d)


def right_inverse(layout: Any) -> Any:
    """A layout ``R`` with ``layout(R(i)) == i`` for all ``i < size(R)``: CuTe follows the
    strides 1, s0*d0, ... of the coalesced layout as far as they chain."""
    if type(layout) is Layout:
        return _right_inverse_cached(layout)
    if layout is None or layout is _:
        return _
    return _composed_right_inverse(layout)


@_cached
def _left_inverse_cached(lay: Layout) -> Layout:
    c = _coalesce1(lay)
    cs, cd = _flat(c)
    if min(cd) < 0:
        raise LayoutError(f"{lay} has a negative stride; left_inverse needs non-negative strides")
    pre = [1]
    for s in cs:
        pre.append(pre[-1] * s)
    order = _exchange_sort(list(cd))
    rs: list[int] = []
    rd = [0]
    covered = 1
    prev = None
    for k in order:
        d = cd[k]
        if d == 0:
            if cs[k] != 1:
                raise LayoutError(
                    f"{lay} is not injective (a mode of size {cs[k]} has stride 0), so it has "
                    "no left inverse"
                )
            continue
        if d % covered != 0:
            raise LayoutError(
                f"{lay} has no left inverse CuTe can build: stride {d} is not a multiple of "
                f"{covered}, the stride below it (left inverse divisibility condition)"
            )
        if prev is not None and d < prev:
            raise LayoutError(
                f"{lay} is not injective: stride {d} is below {prev}, the extent of the modes "
                "with smaller strides, so two coordinates meet"
            )
        rs.append(d // covered)
        rd.append(pre[k])
        covered = d
        prev = d * cs[k]
    rs.append(cs[order[-1]])
    s, d = _bw_coalesce(rs, rd, len(rs) - 1, rs[-1], rd[-1])
    return _mk(s, d)


def left_inverse(layout: Any) -> Any:
    """A layout ``R`` with ``R(layout(i)) == i`` for all ``i < size(layout)`` (CuTe 4.2's
    construction from the sorted strides).  ``layout`` must be injective: CuTe would return a
    quasi-inverse otherwise, we raise :class:`LayoutError`."""
    if type(layout) is Layout:
        try:
            return _left_inverse_cached(layout)
        except LayoutError as e:
            raise _wrap("left_inverse", (layout,), e) from None
    if layout is None or layout is _:
        return _
    return _composed_left_inverse(layout)


# ============================================================================ divide


@_cached
def _logical_divide_cached(lay: Layout, t: Any) -> Layout:
    if t is _:
        return lay
    if type(t) is int:
        t = _mk(t, 1 if t != 1 else 0)
    if type(t) is Layout:
        comp = _complement_cached(t, _coalesce1(lay)._shape)
        return _compose_ll(lay, _concat([t, comp]))
    return _bymode(lay, t, _logical_divide_cached, "logical_divide")


def _zip2_by(lay: Layout, guide: Any) -> Layout:
    """CuTe's ``zip2_by`` (``tile_unzip``): gather the rank-2 ``(tile, rest)`` modes at the
    leaves of ``guide`` into ``((tiles...), (rests..., other modes...))``."""
    if type(guide) is tuple:
        r = _rank(lay)
        split = [_zip2_by(_mode(lay, i), g) for i, g in enumerate(guide)]
        first = _concat([_mode(x, 0) for x in split])
        second = _concat([_mode(x, 1) for x in split] + _modes(lay)[len(guide):r])
        return _concat([first, second])
    if guide is _:
        # C++ has no rule here (a `_` mode is not rank 2); take no tile and keep the mode.
        return _concat([_mk(1, 0), lay])
    if _rank(lay) != 2:
        raise LayoutError(f"internal: expected a rank-2 (tile, rest) mode, got {lay}")
    return lay


def _unpack(lay: Layout, first: bool, second: bool) -> Layout:
    """``result(_, repeat<R1>(_))`` and friends: lift the modes of mode 0 and/or mode 1."""
    m0, m1 = _mode(lay, 0), _mode(lay, 1)
    out = _modes(m0) if first and _rank(m0) > 1 else [m0]
    out += _modes(m1) if second and _rank(m1) > 1 else [m1]
    return _concat(out)


_POST: dict[str, Callable[[Layout, Any], Layout]] = {
    "logical": lambda r, t: r,
    "zipped": lambda r, t: _zip2_by(r, t),
    "tiled": lambda r, t: _unpack(_zip2_by(r, t), False, True),
    "flat": lambda r, t: _unpack(_zip2_by(r, t), True, True),
}


@_cached
def _divide_cached(kind: str, lay: Layout, t: Any) -> Layout:
    return _POST[kind](_logical_divide_cached(lay, t), t)


@_cached
def _product_cached(kind: str, lay: Layout, t: Any) -> Layout:
    return _POST[kind](_logical_product_cached(lay, t), t)


def _divide_family(kind: str, layout: Any, tiler: Any) -> Any:
    name = kind + "_divide"
    if type(layout) is not Layout:
        return on_outer(layout, lambda o: _divide_family(kind, o, tiler))
    t = _norm_tiler(tiler, name)
    try:
        return _divide_cached(kind, layout, t)
    except LayoutError as e:
        raise _wrap(name, (layout, t), e) from None


def logical_divide(layout: Any, tiler: Any) -> Any:
    """``layout o (tiler, complement(tiler, shape(layout)))``: mode 0 is the tile, mode 1
    enumerates the tiles.  A tuple tiler divides mode by mode (other modes are kept)."""
    return _divide_family("logical", layout, tiler)


def zipped_divide(layout: Any, tiler: Any) -> Any:
    """``((tile modes...), (rest modes..., untouched modes...))``."""
    return _divide_family("zipped", layout, tiler)


def tiled_divide(layout: Any, tiler: Any) -> Any:
    """``((tile modes...), rest0, rest1, ..., untouched modes...)``."""
    return _divide_family("tiled", layout, tiler)


def flat_divide(layout: Any, tiler: Any) -> Any:
    """``(tile0, tile1, ..., rest0, rest1, ..., untouched modes...)``."""
    return _divide_family("flat", layout, tiler)


# ============================================================================ product


@_cached
def _logical_product_cached(block: Layout, t: Any) -> Layout:
    if t is _:
        return block
    if type(t) is int:
        t = _mk(t, 1 if t != 1 else 0)
    if type(t) is Layout:
        comp = _complement_cached(block, block.size() * _cosize(t))
        return _concat([block, _compose_ll(comp, t)])
    return _bymode(block, t, _logical_product_cached, "logical_product")


def _product_family(kind: str, block: Any, tiler: Any) -> Any:
    name = kind + "_product"
    if type(block) is not Layout:
        return on_outer(block, lambda o: _product_family(kind, o, tiler))
    t = _norm_tiler(tiler, name, allow_composed=True)
    if is_composed(t):
        raise LayoutError(f"{_ctx(name, block, t)}: a ComposedLayout as the tiler is not "
                          "supported")
    try:
        return _product_cached(kind, block, t)
    except LayoutError as e:
        raise _wrap(name, (block, t), e) from None


def logical_product(block: Any, tiler: Any) -> Any:
    """``(block, complement(block, size(block)*cosize(tiler)) o tiler)``: mode 0 is the block,
    mode 1 enumerates its repetitions in the order of ``tiler``."""
    return _product_family("logical", block, tiler)


def zipped_product(block: Any, tiler: Any) -> Any:
    return _product_family("zipped", block, tiler)


def tiled_product(block: Any, tiler: Any) -> Any:
    return _product_family("tiled", block, tiler)


def flat_product(block: Any, tiler: Any) -> Any:
    return _product_family("flat", block, tiler)


def _zip_layouts(a: Layout, b: Layout) -> Layout:
    """CuTe's ``zip(a, b)``: ``((a0,b0),(a1,b1),...)``; a scalar ``a`` gives ``((a,b))``."""
    if type(a._shape) is not tuple:
        return _concat([_concat([a, b])])
    ra = len(a._shape)
    if type(b._shape) is tuple and len(b._shape) == ra:
        return _concat([_concat([_mode(a, i), _mode(b, i)]) for i in range(ra)])
    if ra == 1:
        # CuTe's zip does not compile here (rank-1 tuple against a scalar or a longer tuple);
        # there is only one mode, so pair the two whole.
        bb = b if type(b._shape) is not tuple or len(b._shape) != 1 else _mode(b, 0)
        return _concat([_concat([_mode(a, 0), bb])])
    raise LayoutError(f"cannot zip {a} with {b}: their ranks differ")


@_cached
def _rank_product(block: Layout, tiler: Layout, raked: bool) -> Layout:
    r = max(_rank(block), _rank(tiler))
    res = _logical_product_cached(_append_to(block, r), _append_to(tiler, r))
    m0, m1 = _mode(res, 0), _mode(res, 1)
    return _zip_layouts(m1, m0) if raked else _zip_layouts(m0, m1)


def _rank_product_entry(name: str, block: Any, tiler: Any, raked: bool) -> Any:
    if type(block) is not Layout:
        return on_outer(block, lambda o: _rank_product_entry(name, o, tiler, raked))
    if type(tiler) is not Layout:
        if type(tiler) is int or type(tiler) is tuple:
            tiler = Layout(tiler)
        else:
            raise LayoutError(f"{_ctx(name, block, tiler)}: the tiler must be a Layout")
    try:
        return _rank_product(block, tiler, raked)
    except LayoutError as e:
        raise _wrap(name, (block, tiler), e) from None


def blocked_product(block: Any, tiler: Any) -> Any:
    """Repeat ``block`` over ``tiler`` rank by rank, blocks contiguous: mode ``i`` of the
    result is ``(block_i, tiler_i')`` where ``tiler'`` is the product's second mode."""
    return _rank_product_entry("blocked_product", block, tiler, False)


def raked_product(block: Any, tiler: Any) -> Any:
    """Like :func:`blocked_product` but interleaved: mode ``i`` is ``(tiler_i, block_i)``."""
    return _rank_product_entry("raked_product", block, tiler, True)


@_cached
def _tile_to_shape(block: Layout, trg: IntTuple, order: Any) -> Layout:
    rb, rt = _rank(block), _trank(trg)
    if rb > rt:
        raise LayoutError(f"the block has rank {rb}, more than the target's {rt}")
    padded = _append_to(block, rt)
    bshape = product_each(padded._shape)
    tshape = product_each(trg)
    if not evenly_divides(tshape, bshape):
        raise LayoutError(
            f"the block shape {format_int_tuple(bshape)} does not divide the target shape "
            f"{format_int_tuple(tshape)}"
        )
    pshape = ceil_div(tshape, bshape)
    if order is None:
        tiles = _mk(pshape, compact_col_major(pshape))
    elif isinstance(order, _MajorTag):
        tiles = _mk(pshape, order.strides(pshape))
    else:
        tiles = _mk(pshape, compact_order(pshape, order))
    return _rank_product(padded, tiles, False)


def tile_to_shape(block: Any, target_shape: Any, order: Any = None) -> Any:
    """Repeat ``block`` (blocked product) until it has the shape ``target_shape``, tiling the
    modes in ``order`` (default column-major: mode 0 first)."""
    if type(block) is not Layout:
        return on_outer(block, lambda o: tile_to_shape(o, target_shape, order))
    trg = _as_int_tuple(target_shape, "tile_to_shape", positive=True)
    o = order
    if o is not None and not isinstance(o, _MajorTag):
        o = _as_int_tuple(o, "tile_to_shape", positive=False)
    try:
        return _tile_to_shape(block, trg, o)
    except LayoutError as e:
        args = (block, format_int_tuple(trg)) if o is None else (block, format_int_tuple(trg), o)
        raise _wrap("tile_to_shape", args, e) from None


# ============================================================================ up/downcast


def _check_n(n: Any, where: str) -> int:
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise LayoutError(f"{where}: n must be a positive int, got {n!r}")
    return n


def _upcast_sd(s: IntTuple, d: IntTuple, n: int) -> tuple[IntTuple, IntTuple]:
    if type(s) is tuple:
        pairs = [_upcast_sd(a, b, n) for a, b in zip(s, d, strict=True)]  # type: ignore[arg-type]
        return tuple(p[0] for p in pairs), tuple(p[1] for p in pairs)
    if d == 0:
        return s, d
    ad = abs(d)  # type: ignore[arg-type]
    if ad % n != 0 and n % ad != 0:
        raise LayoutError(f"stride {d} and the factor {n} do not divide each other")
    k = (n + ad - 1) // ad
    return (s + k - 1) // k, signum(d) * ((ad + n - 1) // n)  # type: ignore[operator,arg-type]


@_cached
def _upcast_cached(lay: Layout, n: int) -> Layout:
    s, d = _upcast_sd(lay._shape, lay._stride, n)
    return _mk(s, d)


def upcast(layout: Any, n: int) -> Any:
    """Re-express ``layout`` in units of an element ``n`` times wider (CuTe's ``upcast<N>``):
    the stride-1 mode shrinks by ``n``, every other stride is divided by ``n``."""
    n = _check_n(n, "upcast")
    if type(layout) is Layout:
        try:
            return _upcast_cached(layout, n)
        except LayoutError as e:
            raise _wrap("upcast", (layout, n), e) from None
    return _composed_upcast(layout, n)


def _downcast_sd(s: IntTuple, d: IntTuple, n: int) -> tuple[IntTuple, IntTuple]:
    if type(s) is tuple:
        pairs = [_downcast_sd(a, b, n) for a, b in zip(s, d, strict=True)]  # type: ignore[arg-type]
        return tuple(p[0] for p in pairs), tuple(p[1] for p in pairs)
    if d == 1 or d == -1:
        return s * n, d  # type: ignore[operator]
    return s, d * n  # type: ignore[operator]


def downcast(layout: Any, n: int) -> Any:
    """Re-express ``layout`` in units of an element ``n`` times narrower (CuTe's
    ``downcast<N>``): the stride-1 mode grows by ``n``, every other stride is multiplied."""
    n = _check_n(n, "downcast")
    if type(layout) is Layout:
        if 1 not in _flat(layout)[1]:
            raise LayoutError(
                f"downcast({layout}, {n}): needs a stride-1 mode (adjacent elements) to split"
            )
        s, d = _downcast_sd(layout._shape, layout._stride, n)
        return _mk(s, d)
    return _composed_downcast(layout, n)


# ============================================================================ other


def max_common_layout(a: Any, b: Any) -> Any:
    """The largest layout ``R`` with ``a(R(i)) == i == b(R(i))`` for ``i < size(R)``: the
    elements that are contiguous in both ``a`` and ``b`` (useful for vectorised copies)."""
    if type(a) is Layout and type(b) is Layout:
        inv_b = _right_inverse_cached(b)
        common = _coalesce1(_compose_ll(a, inv_b))
        m0 = _mode(common, 0)
        if m0._stride == 1:
            return _compose_ll(inv_b, m0)
        return _mk(1, 0)
    return _composed_max_common_layout(a, b)


def max_common_vector(a: Any, b: Any) -> int:
    """The number of leading elements that are contiguous in both ``a`` and ``b``."""
    if type(a) is Layout and type(b) is Layout:
        common = _coalesce1(_compose_ll(a, _right_inverse_cached(b)))
        m0 = _mode(common, 0)
        return m0._shape if m0._stride == 1 else 1  # type: ignore[return-value]
    return _composed_max_common_vector(a, b)


def nullspace(layout: Layout) -> Layout:
    """A layout enumerating the coordinates that ``layout`` maps to 0 (its stride-0 modes):
    ``size(result) == size(layout) / size(filter(layout))``."""
    lay = _need_layout(layout, "nullspace")
    fs, fd = flatten_to_tuple(lay._shape), flatten_to_tuple(lay._stride)
    seq = [k for k, d in enumerate(fd) if d == 0]
    if not seq:
        return _mk(1, 0)
    rstride = flatten_to_tuple(compact_col_major(fs))
    return _from_list([fs[k] for k in seq], [rstride[k] for k in seq])


# ============================================================================ text


@functools.lru_cache(maxsize=1024)
def _parse_cached(text: str) -> Any:
    r = parse_parts(text)
    if type(r) is ParsedLayout:
        return _mk(r.shape, r.stride)
    inner = r.inner if type(r.inner) is Swizzle else _mk(r.inner.shape, r.inner.stride)
    return ComposedLayout(inner, r.offset, _mk(r.outer.shape, r.outer.stride))


def parse_layout(text: str) -> Any:
    """Read CuTe notation into a Layout or ComposedLayout (the grammar: ``notation.py``)."""
    if not isinstance(text, str):
        raise LayoutError(f"parse_layout: expected a string, got {text!r}")
    return _parse_cached(text)


# ============================================================================ composed layouts
#
# ComposedLayout: ``inner o offset o outer``, a layout followed by a non-linear function.
#
# Some functions of coordinates are not layouts -- a swizzle is not linear -- but we still want
# to tile, slice and partition them like layouts.  CuTe's answer (``include/cute/
# layout_composed.hpp``, specialised for swizzles in ``include/cute/swizzle_layout.hpp``) is
# ``ComposedLayout(inner, offset, outer)``, the function::
#
#     x  ->  inner(offset + outer(x))
#
# ``outer`` is an ordinary :class:`Layout` and defines the domain: shape, size, rank, modes and
# every tiling operation (divides, products, coalesce, ...) act on ``outer`` alone and keep
# ``inner`` and ``offset``.  ``inner`` is a :class:`Swizzle` (the common case, e.g. a 128-byte
# swizzled shared-memory tile ``Sw<3,4,3> o 0 o (8,64):(64,1)``) or another Layout.  The offset
# exists because a swizzle does not commute with translation: slicing a swizzled tile moves the
# fixed coordinates into ``offset`` rather than into a pointer.
#
# Slicing a swizzled layout follows CuTe: when the kept modes touch only one of each pair of
# swizzled bits, the swizzle acts on them as a sign flip and the result *decays* to a plain
# Layout plus an offset; otherwise it stays composed.  Every decay is checked numerically
# against the composed function before it is returned.

_DECAY_CHECK_LIMIT = 1 << 20
#: most elements a layout may have where a check enumerates them (layouts_equivalent of a
#: composed layout, exact composition): 2^24 int64 values are 128 MiB per array
ENUMERATION_LIMIT = 1 << 24


class ComposedLayout(_Pictured):
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
            return _composed_slice(c, self)
        return self.inner(self.offset + self.outer(c))

    def compose(self, *others: Any) -> Any:
        return _composed_composition(self, others[0] if len(others) == 1 else tuple(others))

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


def _composed_size(x: Any) -> int:
    if type(x) is ComposedLayout:
        return x.outer.size()
    raise LayoutError(f"size: expected a layout or an int tuple, got {_show(x)}")


def _composed_cosize(x: Any) -> int:
    if type(x) is ComposedLayout:
        return _cosize(x.outer)
    raise LayoutError(f"cosize: expected a layout, got {_show(x)}")


def _composed_shape(x: Any) -> Any:
    if type(x) is ComposedLayout:
        return x.outer.shape
    raise LayoutError(f"shape: expected a layout or an int tuple, got {_show(x)}")


def _composed_get(x: Any, *idx: int) -> Any:
    return on_outer(x, lambda o: get(o, *idx))


def _composed_composition(a: Any, b: Any) -> Any:
    ta, tb = type(a), type(b)
    if ta is ComposedLayout:
        if tb is ComposedLayout or tb is Swizzle:
            # (I o O o L) o B = I o O o (L o B), with L o B itself possibly composed.
            inner = _composed_composition(a.outer, b)
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
        return make_composed_layout(a.inner, a.offset, composition(a.outer, b))
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
            return _composed_composition(_composed_composition(a, b.inner), b.outer)
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


def _composed_complement(x: Any, cotarget: Any = None) -> Any:
    if type(x) is ComposedLayout:
        return complement(x.outer, _cosize(x.outer) if cotarget is None else cotarget)
    raise _bad("complement", x)


def _composed_right_inverse(x: Any) -> Any:
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
            return _composed_composition(inv_outer, x.inner)
        return make_composed_layout(inv_outer, -x.offset, _right_inverse_cached(x.inner))
    raise _bad("right_inverse", x)


def _composed_left_inverse(x: Any) -> Any:
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
            return _composed_composition(inv_outer, x.inner)
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


def _composed_upcast(x: Any, n: int) -> Any:
    if type(x) is Swizzle:
        return upcast_swizzle(x, n)
    if type(x) is ComposedLayout:
        where = _ctx("upcast", x, n)
        inner = upcast_swizzle(x.inner, n) if type(x.inner) is Swizzle else upcast(x.inner, n)
        return make_composed_layout(inner, _scale_offset(x.offset, n, True, where),
                                    upcast(x.outer, n))
    raise _bad("upcast", x, n)


def _composed_downcast(x: Any, n: int) -> Any:
    if type(x) is Swizzle:
        return downcast_swizzle(x, n)
    if type(x) is ComposedLayout:
        where = _ctx("downcast", x, n)
        inner = (downcast_swizzle(x.inner, n) if type(x.inner) is Swizzle
                 else downcast(x.inner, n))
        return make_composed_layout(inner, _scale_offset(x.offset, n, False, where),
                                    downcast(x.outer, n))
    raise _bad("downcast", x, n)


def _composed_max_common_layout(a: Any, b: Any) -> Any:
    if type(a) is Layout and type(b) is ComposedLayout:
        a, b = b, a
    if type(a) is ComposedLayout and type(b) is Layout and type(a.inner) is Swizzle:
        common = max_common_layout(a.outer, b)
        base = 1 << a.inner.base
        if base < common.size():
            return composition(common, base)
        return common
    raise _bad("max_common_layout", a, b)


def _composed_max_common_vector(a: Any, b: Any) -> int:
    if type(a) is Layout and type(b) is ComposedLayout:
        a, b = b, a
    if type(a) is ComposedLayout and type(a.inner) is Swizzle:
        if type(b) is Layout:
            return min(max_common_vector(a.outer, b), 1 << a.inner.base)
        if type(b) is ComposedLayout and type(b.inner) is Swizzle:
            vec = max_common_vector(a.outer, b.outer)
            if a.inner == b.inner:
                return vec
            return min(vec, 1 << a.inner.base, 1 << b.inner.base)
    raise _bad("max_common_vector", a, b)


# ----------------------------------------------------------------------------- slicing


def _composed_slice_and_offset(coord: Any, x: Any) -> tuple[Any, int]:
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


def _composed_slice(coord: Any, x: Any) -> Any:
    return _composed_slice_and_offset(coord, x)[0]


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
    c = _coalesce1(lay)
    return c.shape, c.stride


def format_layout(x: Any) -> str:
    """CuTe notation for a Layout, ComposedLayout, Swizzle or int tuple."""
    if type(x) in (Layout, ComposedLayout, Swizzle):
        return str(x)
    return format_int_tuple(x)


def cache_clear() -> None:
    """Drop the memoised results of the layout algebra (for benchmarking cold paths)."""
    for f in (_coalesce_cached, _filter_cached, _compose_ll, _compose_lt, _complement_cached,
              _right_inverse_cached, _left_inverse_cached, _logical_divide_cached,
              _logical_product_cached, _rank_product, _tile_to_shape, _upcast_cached,
              _divide_cached, _product_cached, _slice_and_offset_cached):
        f.cache_clear()  # type: ignore[attr-defined]
