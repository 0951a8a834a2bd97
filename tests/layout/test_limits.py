"""Limits of the layout algebra's input: what a swizzle can be, what the notation
reads, and how much a check may enumerate.  Each limit is named in its error; values inside
the limits keep their meaning (checked against the definitions, evaluated one by one)."""

from __future__ import annotations

import time

import pytest

from nvatom.errors import LayoutError
from nvatom.layout import (
    ComposedLayout,
    Layout,
    Swizzle,
    layouts_equivalent,
    parse_int_tuple,
    parse_layout,
)
from nvatom.layout.layout import ENUMERATION_LIMIT, _values
from nvatom.layout.notation import MAX_DEPTH, MAX_INTS, MAX_TEXT
from nvatom.layout.swizzle import SWIZZLE_BITS, downcast_swizzle


def raises(fn, *parts: str) -> str:  # type: ignore[no-untyped-def]
    with pytest.raises(LayoutError) as ei:
        fn()
    msg = str(ei.value)
    for p in parts:
        assert p in msg, (p, msg)
    return msg


@pytest.mark.parametrize(("b", "m", "s"), [(3, 26, 3), (0, 32, 0), (1, 0, -31), (16, 0, 16)])
def test_widest_swizzles_are_swizzles(b: int, m: int, s: int) -> None:
    sw = Swizzle(b, m, s)
    assert sw.swizzle_code < 2**SWIZZLE_BITS
    # CuTe's definition, written out: x ^ ((x & yyy) >> S) with yyy = (2^B - 1) << (M + S)
    x = 0xDEADBEEF
    yyy = ((1 << b) - 1) << (m + max(0, s))
    want = x ^ ((x & yyy) >> s if s >= 0 else (x & yyy) << -s)
    assert sw(x) == want


@pytest.mark.parametrize(("b", "m", "s"), [(3, 27, 3), (0, 33, 0), (1, 0, -32),
                                           (3, 100_000_000_000, 3), (3, 4, 10**30)])
def test_swizzles_past_32_bits_are_refused_at_once(b: int, m: int, s: int) -> None:
    t0 = time.perf_counter()
    msg = raises(lambda: Swizzle(b, m, s), "B + M + |S| must be <= 32")
    assert time.perf_counter() - t0 < 0.1 and len(msg) < 200
    raises(lambda: downcast_swizzle(Swizzle(3, 4, 3), 2**26), "Swizzle<3,30,3>", "<= 32")


def test_notation_limits_name_the_limit() -> None:
    raises(lambda: parse_layout("(" * (MAX_DEPTH + 1) + "1" + ")" * (MAX_DEPTH + 1)),
           f"deeper than {MAX_DEPTH} levels")
    parse_layout("(" * MAX_DEPTH + "1" + ")" * MAX_DEPTH)  # the limit itself is fine
    raises(lambda: parse_layout(str(2**63)), f"integer {2**63} is out of range", "2^63")
    assert parse_layout(f"2:{2**63 - 1}")(1) == 2**63 - 1
    assert parse_layout(f"2:-{2**63 - 1}")(1) == -(2**63 - 1)
    assert parse_layout("0" * 30 + "8:1") == Layout(8, 1)  # leading zeros are not magnitude
    raises(lambda: parse_int_tuple("(" + ",".join(["1"] * (MAX_INTS + 1)) + ")"),
           f"more than {MAX_INTS} integers")
    msg = raises(lambda: parse_layout(" " * (MAX_TEXT + 1)), f"limit of {MAX_TEXT}")
    assert len(msg) < 300


def test_enumeration_is_bounded_and_exact_past_int64() -> None:
    huge = parse_layout("Sw<3,4,3> o 0 o (4294967296,128):(128,1)")
    t0 = time.perf_counter()
    raises(lambda: layouts_equivalent(huge, huge), "too many to enumerate",
           f"2^24 = {ENUMERATION_LIMIT}")
    assert time.perf_counter() - t0 < 0.5
    # strides near 2^63: the values are Python ints, not wrapped int64
    lay = Layout((4, 2), (2**62, 3))
    assert [int(v) for v in _values(lay)] == [lay(i) for i in range(8)]
    a = ComposedLayout(Swizzle(1, 0, 1), 0, lay)
    b = ComposedLayout(Swizzle(1, 0, 1), 0, Layout((4, 2), (2**62, 5)))
    assert layouts_equivalent(a, a) and not layouts_equivalent(a, b)
