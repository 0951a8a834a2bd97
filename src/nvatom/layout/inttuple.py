"""Integer tuples: the hierarchical shapes, strides and coordinates of CuTe layouts.

An *IntTuple* is an integer or a tuple of IntTuples, written with parentheses: ``8``, ``(4,8)``,
``((4,8),(2,2,2))``.  A layout is a pair of congruent IntTuples (shape, stride); coordinates
into it are IntTuples too.  This module is the arithmetic on them that the layout algebra is
built from, with the semantics of CuTe C++ (``include/cute/int_tuple.hpp`` and
``include/cute/stride.hpp`` in CUTLASS 3.x/4.x, explained in the CuTe docs ``01_layout.md``
and ``02_layout_algebra.md``).  Python ints play the role of CuTe's *static* integers: every
value is known, so every divisibility condition CuTe checks with ``static_assert`` is checked
here and reported as :class:`~nvatom.errors.LayoutError`.

Vocabulary, by example on the shape ``S = ((4,8),(2,2,2))``:

* ``rank(S) = 2`` (top-level modes), ``depth(S) = 2`` (nesting), ``size(S) = 256``;
  a plain int is rank 1, depth 0 ("scalar").
* ``flatten(S) = (4,8,2,2,2)``; ``product_each(S) = (32,8)``.
* ``compact_col_major(S) = ((1,4),(32,64,128))``: the strides that enumerate S in
  generalized column-major order.  As in CuTe, a mode of size 1 gets stride 0.
* A coordinate is *congruent* to S (``((1,2),(0,1,1))``), or coarser: an int stands for the
  whole sub-shape it sits on and is unrolled colexicographically (leftmost fastest), so
  ``crd2idx(5, (4,8), (1,4)) == crd2idx((1,1), (4,8), (1,4))``.
* When an int coordinate is unrolled over a tuple, the last mode takes whatever is left
  without a bound check: a layout's last mode extends to infinity.  Composition relies on
  this (``composition(A, B)`` is defined when ``B`` reaches past ``size(A)``).

``shape_div`` is the division of the layout algebra: ``shape_div(a, b)`` is ``ceil(a / b)``
provided ``b`` divides ``a`` or ``a`` divides ``b`` (so ``a / b`` or 1), and an error otherwise
-- CuTe's *divisibility condition*.  Tuples fold the divisor from left to right:
``shape_div((4,5,6), 40) == (1,1,3)``.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any, TypeAlias

from nvatom.errors import LayoutError

IntTuple: TypeAlias = "int | tuple[IntTuple, ...]"

__all__ = [
    "IntTuple",
    "Underscore",
    "_",
    "ceil_div",
    "compact_col_major",
    "compact_order",
    "compact_row_major",
    "compatible",
    "congruent",
    "crd2crd",
    "crd2idx",
    "depth",
    "dice",
    "elem_scale",
    "evenly_divides",
    "filter_zeros",
    "flatten",
    "flatten_to_tuple",
    "format_int_tuple",
    "get",
    "has_underscore",
    "idx2crd",
    "inner_product",
    "is_int",
    "is_tuple",
    "is_underscore",
    "prefix_product",
    "product",
    "product_each",
    "rank",
    "repeat_like",
    "round_up",
    "shape_div",
    "shape_min",
    "signum",
    "size",
    "slice_",
    "suffix_product",
    "unflatten",
    "weakly_compatible",
    "weakly_congruent",
]


class Underscore:
    """The slicing wildcard ``_`` of CuTe: keep this mode.  ``None`` is accepted as well."""

    __slots__ = ()
    _instance: Underscore | None = None

    def __new__(cls) -> Underscore:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "_"

    def __reduce__(self) -> tuple[Any, ...]:
        return (Underscore, ())


_ = Underscore()


def is_underscore(x: object) -> bool:
    """True for the slice wildcard (``_`` or ``None``)."""
    return x is None or x is _


def has_underscore(x: object) -> bool:
    """True if a coordinate contains a slice wildcard anywhere."""
    if type(x) is tuple:
        return any(has_underscore(v) for v in x)
    return x is None or x is _


def is_int(x: object) -> bool:
    """True for a Python integer (bool excluded): a scalar IntTuple."""
    return isinstance(x, int) and not isinstance(x, bool)


def is_tuple(x: object) -> bool:
    return isinstance(x, tuple)


def format_int_tuple(t: IntTuple) -> str:
    """CuTe's print format: ``(4,(2,2))``, a 1-tuple as ``(8)``, an int as itself."""
    if type(t) is int:
        return str(t)
    # Python's tuple repr is C code; CuTe's differs only by spaces and the 1-tuple comma.
    return repr(t).replace(" ", "").replace(",)", ")")


def _as_int_tuple(x: object, what: str, *, positive: bool) -> IntTuple:
    """Normalise a user IntTuple (lists, numpy ints) or raise LayoutError saying why."""
    if type(x) is int:
        if positive and x < 1:
            raise LayoutError(f"{what}: every size must be >= 1, got {x}")
        return x
    if isinstance(x, tuple | list):
        return tuple(_as_int_tuple(v, what, positive=positive) for v in x)
    if isinstance(x, bool) or x is None:
        raise LayoutError(f"{what}: expected an int or a tuple of ints, got {x!r}")
    try:
        v = operator.index(x)  # numpy integers and other exact integer types
    except TypeError:
        raise LayoutError(f"{what}: expected an int or a tuple of ints, got {x!r}") from None
    if positive and v < 1:
        raise LayoutError(f"{what}: every size must be >= 1, got {v}")
    return v


# ----------------------------------------------------------------------------- structure


def rank(t: IntTuple) -> int:
    """Number of top-level modes; an int has rank 1."""
    return len(t) if type(t) is tuple else 1


def depth(t: IntTuple) -> int:
    """Nesting depth: 0 for an int, 1 for a flat tuple, ..."""
    if type(t) is tuple:
        return 1 + max((depth(v) for v in t), default=0)
    return 0


def product(t: IntTuple) -> int:
    """Product of all the leaves (``size`` of a shape); 1 for the empty tuple."""
    if type(t) is int:
        return t
    r = 1
    for v in t:
        r *= v if type(v) is int else product(v)
    return r


size = product


def flatten_to_tuple(t: IntTuple) -> tuple[int, ...]:
    """All leaves in order, always as a tuple."""
    if type(t) is not tuple:
        return (t,)  # type: ignore[return-value]
    out: list[int] = []
    _flatten_into(t, out)
    return tuple(out)


def _flatten_into(t: tuple, out: list[int]) -> None:
    for v in t:
        if type(v) is tuple:
            _flatten_into(v, out)
        else:
            out.append(v)


def flatten(t: IntTuple) -> IntTuple:
    """Leaves of a tuple as a flat tuple; an int stays an int (CuTe's flatten)."""
    if type(t) is not tuple:
        return t
    return flatten_to_tuple(t)


def unflatten(flat: IntTuple, profile: IntTuple) -> IntTuple:
    """Fold a flat tuple back into the nesting of ``profile`` (inverse of flatten)."""
    leaves = flatten_to_tuple(flat)
    n = len(flatten_to_tuple(profile))
    if len(leaves) != n:
        raise LayoutError(
            f"unflatten({format_int_tuple(flat)}, {format_int_tuple(profile)}): "
            f"{len(leaves)} leaves do not fill a profile with {n} leaves"
        )
    it = iter(leaves)

    def build(p: IntTuple) -> IntTuple:
        if type(p) is tuple:
            return tuple(build(v) for v in p)
        return next(it)

    return build(profile)


def get(t: IntTuple, *idx: int) -> IntTuple:
    """``get<I0,I1,...>(t)``: nested element access; ``get(int, 0)`` is the int itself."""
    for i in idx:
        if type(t) is tuple:
            if not -len(t) <= i < len(t):
                raise LayoutError(f"get: mode {i} out of range for {format_int_tuple(t)}")
            t = t[i]
        elif i != 0:
            raise LayoutError(f"get: mode {i} out of range for the scalar {t}")
    return t


def repeat_like(t: IntTuple, x: Any) -> Any:
    """A tuple with the profile of ``t`` and ``x`` at every leaf."""
    if type(t) is tuple:
        return tuple(repeat_like(v, x) for v in t)
    return x


def product_each(t: IntTuple) -> tuple[int, ...]:
    """``(size(t[0]), size(t[1]), ...)``; an int is wrapped first, so the result is a tuple."""
    if type(t) is tuple:
        return tuple(product(v) for v in t)
    return (t,)  # type: ignore[return-value]


# ----------------------------------------------------------------------------- arithmetic


def signum(a: int) -> int:
    return (a > 0) - (a < 0)


def _tdiv(a: int, b: int) -> int:
    """C++ integer division (truncates toward zero); CuTe's arithmetic is C++'s."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def _shape_div_int(a: int, b: int) -> int:
    if b == 0 or a == 0:
        raise LayoutError(f"shape_div({a}, {b}): division involving zero")
    if a % b != 0 and b % a != 0:
        raise LayoutError(f"shape_div({a}, {b}): neither {a} nor {b} divides the other")
    return _tdiv(a + b - 1, b)


def shape_div(a: IntTuple, b: IntTuple) -> IntTuple:
    """CuTe's shape division (see the module docstring); raises when neither divides."""
    if type(a) is tuple:
        if type(b) is tuple:
            if len(a) != len(b):
                raise LayoutError(
                    f"shape_div({format_int_tuple(a)}, {format_int_tuple(b)}): mismatched ranks"
                )
            return tuple(shape_div(x, y) for x, y in zip(a, b, strict=True))
        out = []
        for v in a:
            out.append(shape_div(v, b))
            b = _shape_div_int(b, product(v))  # type: ignore[arg-type]
        return tuple(out)
    if type(b) is tuple:
        return _shape_div_int(a, product(b))
    return _shape_div_int(a, b)


def ceil_div(a: IntTuple, b: IntTuple) -> IntTuple:
    """``ceil(a / b)`` with CuTe's tuple rules: missing ranks of ``b`` are 1; an int divisor
    folds across a tuple from the left (``ceil_div((3,5), 2) == (2,5)``)."""
    if type(a) is tuple:
        if type(b) is tuple:
            if len(a) < len(b):
                raise LayoutError(
                    f"ceil_div({format_int_tuple(a)}, {format_int_tuple(b)}): "
                    "the divisor has more modes than the dividend"
                )
            bb = b + (1,) * (len(a) - len(b))
            return tuple(ceil_div(x, y) for x, y in zip(a, bb, strict=True))
        out = []
        for v in a:
            out.append(ceil_div(v, b))
            b = ceil_div(b, v)
        return tuple(out)
    if type(b) is tuple:
        return ceil_div(a, product(b))
    if b == 0:
        raise LayoutError(f"ceil_div({a}, {b}): division by zero")
    return _tdiv(a + b - 1, b)


def round_up(a: IntTuple, b: IntTuple) -> IntTuple:
    """Round ``a`` up to a multiple of ``b`` (by mode for tuples; missing ranks are 1)."""
    if type(a) is tuple and type(b) is tuple:
        if len(a) < len(b):
            raise LayoutError("round_up: the divisor has more modes than the dividend")
        bb = b + (1,) * (len(a) - len(b))
        return tuple(round_up(x, y) for x, y in zip(a, bb, strict=True))
    if type(a) is tuple or type(b) is tuple:
        raise LayoutError("round_up: needs two ints or two tuples")
    return _tdiv(a + b - 1, b) * b


def shape_min(a: int, b: int) -> int:
    """min for shapes: 1 is below everything (so it wins even against a negative value)."""
    if a == 1 or b == 1:
        return 1
    return min(a, b)


def elem_scale(a: IntTuple, b: IntTuple) -> IntTuple:
    """``a`` scaled leaf by leaf by the size of the matching part of ``b``."""
    if type(a) is tuple:
        if type(b) is not tuple or len(a) != len(b):
            raise LayoutError(
                f"elem_scale({format_int_tuple(a)}, {format_int_tuple(b)}): mismatched ranks"
            )
        return tuple(elem_scale(x, y) for x, y in zip(a, b, strict=True))
    return a * product(b)


def inner_product(a: IntTuple, b: IntTuple) -> int:
    if type(a) is tuple and type(b) is tuple:
        if len(a) != len(b):
            raise LayoutError(
                f"inner_product({format_int_tuple(a)}, {format_int_tuple(b)}): mismatched ranks"
            )
        return sum(inner_product(x, y) for x, y in zip(a, b, strict=True))
    if type(a) is tuple or type(b) is tuple:
        raise LayoutError(
            f"inner_product({format_int_tuple(a)}, {format_int_tuple(b)}): mismatched profiles"
        )
    return a * b


# ----------------------------------------------------------------------------- relations


def _leafwise(a: IntTuple, b: IntTuple, leaf: Callable[[int, IntTuple], bool]) -> bool:
    """``b`` nests like ``a`` down to ``a``'s leaves (same ranks on the way), and ``leaf(x, y)``
    holds at each leaf ``x`` of ``a`` with ``y`` the part of ``b`` there."""
    if type(a) is tuple:
        return (
            type(b) is tuple
            and len(a) == len(b)
            and all(_leafwise(x, y, leaf) for x, y in zip(a, b, strict=True))
        )
    return leaf(a, b)


def congruent(a: IntTuple, b: IntTuple) -> bool:
    """Same hierarchical profile (same nesting, same ranks everywhere)."""
    return _leafwise(a, b, lambda _, y: type(y) is not tuple)


def weakly_congruent(a: IntTuple, b: IntTuple) -> bool:
    """Profile of ``a`` is a coarsening of ``b``'s (an int in ``a`` matches anything)."""
    return _leafwise(a, b, lambda _, y: True)


def compatible(a: IntTuple, b: IntTuple) -> bool:
    """Every coordinate of shape ``a`` is a coordinate of shape ``b`` (same sizes at each
    leaf of ``a``)."""
    return _leafwise(a, b, lambda x, y: x == product(y))


def weakly_compatible(a: IntTuple, b: IntTuple) -> bool:
    """At each leaf of ``a`` the size of ``b``'s part is a multiple of it."""
    return _leafwise(a, b, lambda x, y: x != 0 and product(y) % x == 0)


def evenly_divides(shape: IntTuple, tiler: IntTuple) -> bool:
    """True when ``tiler`` (a shape) tiles ``shape`` without a ragged edge, mode by mode."""
    if type(tiler) is tuple:
        if len(tiler) > rank(shape):
            return False
        return all(evenly_divides(get(shape, i), t) for i, t in enumerate(tiler))
    n = product(shape)
    return n == product(tiler) * product(ceil_div(shape, tiler))


def filter_zeros(a: IntTuple, b: IntTuple | None = None) -> IntTuple:
    """Replace the parts of ``b`` that sit on a 0 of ``a`` by 1s (``b`` defaults to ``a``)."""
    if b is None:
        b = a
    if type(a) is tuple:
        return tuple(filter_zeros(x, y) for x, y in zip(a, b, strict=True))  # type: ignore[arg-type]
    if a == 0:
        return repeat_like(b, 1)
    return b


# ----------------------------------------------------------------------------- strides


def _exclusive_product(name: str, a: IntTuple, init: IntTuple, backward: bool) -> IntTuple:
    """:func:`prefix_product` (``backward`` False) and :func:`suffix_product` (True): the same
    scan, leftmost or rightmost mode first; ``name`` is the caller's, for the messages."""
    if type(a) is tuple:
        if type(init) is tuple:
            if len(a) != len(init):
                raise LayoutError(f"{name}: mismatched ranks")
            return tuple(_exclusive_product(name, x, i, backward)
                         for x, i in zip(a, init, strict=True))
        out = []
        for v in reversed(a) if backward else a:
            out.append(_exclusive_product(name, v, init, backward))
            init = init * product(v)
        return tuple(reversed(out)) if backward else tuple(out)
    if type(init) is tuple:
        raise LayoutError(f"{name}: a tuple init needs a tuple argument")
    return init


def prefix_product(a: IntTuple, init: IntTuple = 1) -> IntTuple:
    """Exclusive prefix product, leftmost first: ``prefix_product((2,(3,4),5)) ==
    (1,(2,6),24)``.  Unlike :func:`compact_col_major` a size-1 mode keeps its product."""
    return _exclusive_product("prefix_product", a, init, backward=False)


def suffix_product(a: IntTuple, init: IntTuple = 1) -> IntTuple:
    """Exclusive suffix product, rightmost first (row-major strides without the size-1 rule)."""
    return _exclusive_product("suffix_product", a, init, backward=True)


def _compact(shape: IntTuple, current: int, left: bool) -> tuple[IntTuple, int]:
    if type(shape) is tuple:
        out: list[IntTuple] = []
        for v in shape if left else reversed(shape):
            d, current = _compact(v, current, left)
            out.append(d)
        if not left:
            out.reverse()
        return tuple(out), current
    if shape == 1:
        # CuTe gives a static size-1 mode the stride 0: its coordinate is always 0.
        return 0, current
    return current, current * shape


def compact_col_major(shape: IntTuple, current: IntTuple = 1) -> IntTuple:
    """Strides of the compact generalized column-major layout of ``shape`` (CuTe's
    ``compact_major<LayoutLeft>``): ``(4,(1,3)) -> (1,(0,4))``."""
    if type(current) is tuple:
        if type(shape) is not tuple or len(shape) != len(current):
            raise LayoutError("compact_col_major: mismatched ranks")
        return tuple(compact_col_major(s, c) for s, c in zip(shape, current, strict=True))
    return _compact(shape, current, True)[0]


def compact_row_major(shape: IntTuple, current: IntTuple = 1) -> IntTuple:
    """Strides of the compact row-major layout (CuTe's ``compact_major<LayoutRight>``)."""
    if type(current) is tuple:
        if type(shape) is not tuple or len(shape) != len(current):
            raise LayoutError("compact_row_major: mismatched ranks")
        return tuple(compact_row_major(s, c) for s, c in zip(shape, current, strict=True))
    return _compact(shape, current, False)[0]


def compact_order(shape: IntTuple, order: IntTuple) -> IntTuple:
    """Compact strides that enumerate the leaves of ``shape`` in increasing ``order``
    (``order`` congruent to ``shape``); CuTe's ``compact_order``.  Equal orders share a
    stride, as in CuTe."""
    if not congruent(shape, order):
        raise LayoutError(
            f"compact_order({format_int_tuple(shape)}, {format_int_tuple(order)}): "
            "order must be congruent to the shape"
        )
    flat_s = flatten_to_tuple(shape)
    flat_o = flatten_to_tuple(order)

    def build(s: IntTuple, o: IntTuple) -> IntTuple:
        if type(o) is tuple:
            return tuple(build(x, y) for x, y in zip(s, o, strict=True))  # type: ignore[arg-type]
        d = 1
        for fs, fo in zip(flat_s, flat_o, strict=True):
            if fo < o:
                d *= fs
        return compact_col_major(s, d)

    return build(shape, order)


# ----------------------------------------------------------------------------- coordinates


def _crd2idx(c: Any, s: IntTuple, d: IntTuple, where: str) -> int:
    if type(c) is tuple:
        if type(s) is not tuple or len(c) != len(s):
            raise LayoutError(
                f"{where}: coordinate {_fmt_crd(c)} does not match the shape "
                f"{format_int_tuple(s)} (rank mismatch)"
            )
        r = 0
        for ci, si, di in zip(c, s, d, strict=True):  # type: ignore[arg-type]
            r += _crd2idx(ci, si, di, where)
        return r
    if c is None or c is _:
        return 0  # a slice wildcard contributes no offset (CuTe's Underscore is Int<0>)
    if type(c) is not int:
        c = _coord_int(c, where)
    if c < 0:
        raise LayoutError(f"{where}: negative coordinate {c}")
    if type(s) is tuple:
        n = len(s)
        if n == 0:
            return 0
        r = 0
        for k in range(n - 1):
            sk = s[k]
            p = sk if type(sk) is int else product(sk)
            r += _crd2idx(c % p, sk, d[k], where)  # type: ignore[index]
            c //= p
        return r + _crd2idx(c, s[-1], d[-1], where)  # type: ignore[index]
    return c * d  # type: ignore[operator]


def _coord_int(c: object, where: str) -> int:
    if isinstance(c, bool):
        raise LayoutError(f"{where}: invalid coordinate {c!r}")
    try:
        return operator.index(c)
    except TypeError:
        raise LayoutError(f"{where}: invalid coordinate {c!r}") from None


def _fmt_crd(c: Any) -> str:
    if type(c) is tuple:
        return "(" + ",".join(_fmt_crd(v) for v in c) + ")"
    return "_" if c is None else str(c)


def crd2idx(coord: Any, shape: IntTuple, stride: IntTuple | None = None) -> int:
    """Map a coordinate to an index: the inner product of the natural coordinate with the
    stride.  An int coordinate on a tuple shape is unrolled colexicographically (the last
    mode unbounded).  ``stride`` defaults to compact column-major."""
    if stride is None:
        stride = compact_col_major(shape)
    return _crd2idx(coord, shape, stride, "crd2idx")


def idx2crd(idx: IntTuple, shape: IntTuple, stride: IntTuple | None = None) -> IntTuple:
    """Split an index into the natural coordinate of ``shape`` (CuTe's idx2crd).  Exact only
    for compact (``stride`` omitted or column-major) layouts, as in CuTe."""
    if type(idx) is tuple:
        if type(shape) is not tuple or len(idx) != len(shape):
            raise LayoutError(
                f"idx2crd: index {format_int_tuple(idx)} does not match shape "
                f"{format_int_tuple(shape)}"
            )
        if stride is None:
            return tuple(idx2crd(i, s) for i, s in zip(idx, shape, strict=True))
        if type(stride) is not tuple or len(stride) != len(shape):
            raise LayoutError("idx2crd: mismatched ranks of shape and stride")
        return tuple(idx2crd(i, s, d) for i, s, d in zip(idx, shape, stride, strict=True))
    if stride is None:
        if type(shape) is tuple:
            return idx2crd(idx, shape, compact_col_major(shape))
        return idx
    if type(shape) is tuple:
        if type(stride) is not tuple:
            stride = compact_col_major(shape, stride)
        if len(stride) != len(shape):  # type: ignore[arg-type]
            raise LayoutError("idx2crd: mismatched ranks of shape and stride")
        return tuple(idx2crd(idx, s, d) for s, d in zip(shape, stride, strict=True))  # type: ignore[arg-type]
    if shape == 1:
        return 0
    if stride == 0:
        raise LayoutError(f"idx2crd: stride 0 on a mode of size {shape} has no inverse")
    return _tdiv(idx, stride) % shape  # type: ignore[operator]


def crd2crd(coord: IntTuple, src_shape: IntTuple, dst_shape: IntTuple) -> IntTuple:
    """Re-express a coordinate of ``src_shape`` as a coordinate of ``dst_shape``."""
    if type(coord) is tuple and type(src_shape) is tuple and type(dst_shape) is tuple:
        if not len(coord) == len(src_shape) == len(dst_shape):
            raise LayoutError("crd2crd: mismatched ranks")
        return tuple(
            crd2crd(c, s, d) for c, s, d in zip(coord, src_shape, dst_shape, strict=True)
        )
    return idx2crd(crd2idx(coord, src_shape), dst_shape)


# ----------------------------------------------------------------------------- slicing


def slice_(coord: Any, t: IntTuple) -> IntTuple:
    """Keep the parts of ``t`` paired with a wildcard in ``coord`` (CuTe's ``slice``):
    nested results are concatenated, ``slice_(_, t) == t``."""
    return _select(coord, t, True, "slice")


def dice(coord: Any, t: IntTuple) -> IntTuple:
    """Keep the parts of ``t`` paired with an integer in ``coord`` (CuTe's ``dice``)."""
    return _select(coord, t, False, "dice")


def _select(coord: Any, t: IntTuple, wild: bool, name: str) -> IntTuple:
    """``slice_`` (``wild``: keep the parts at ``_``) or ``dice`` (keep the parts at integers)."""
    if type(coord) is tuple:
        if type(t) is not tuple or len(coord) != len(t):
            raise LayoutError(
                f"{name}: coordinate {_fmt_crd(coord)} does not match {format_int_tuple(t)}"
            )
        out: list[IntTuple] = []
        for c, v in zip(coord, t, strict=True):
            if type(c) is tuple:
                out.extend(_select(c, v, wild, name))  # type: ignore[arg-type]
            elif (c is None or c is _) is wild:
                out.append(v)
        return tuple(out)
    if (coord is None or coord is _) is wild:
        return t
    return ()

