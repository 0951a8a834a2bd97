"""CuTe's text notation for layouts: what ``print(layout)`` shows in CuTe C++, read back.

The grammar, as CuTe prints it (``print`` in ``layout.hpp``, ``swizzle.hpp`` and
``layout_composed.hpp``)::

    layout    := int_tuple [":" int_tuple]          shape:stride; no stride = column-major
    composed  := inner " o " int " o " layout        inner(offset + outer(x))
    inner     := "Sw<" int "," int "," int ">"  |  layout
    int_tuple := int  |  "(" [int_tuple ("," int_tuple)*] ")"
    int       := ["_"] ["-"] digits                  "_8" is CuTe's static 8

Examples: ``8:1``, ``(8):(1)`` (a rank-1 tuple, distinct from ``8:1``),
``((4,8),(2,2,2)):((32,1),(16,8,128))``, ``Sw<3,4,3> o 0 o (8,64):(64,1)``.  Whitespace is
ignored anywhere; ``Sw<3,4,3> o (8,64):(64,1)`` (no offset) means offset 0.  CuTe prints
static integers with a leading underscore; we print plain integers and accept both.

This module reads text into plain parts (:class:`ParsedLayout`, :class:`ParsedComposed`) and
imports only ``inttuple`` and ``swizzle``; ``parse_layout`` and the ``Layout(text)`` /
``ComposedLayout(text)`` constructors in ``layout.py`` build the objects from those parts, so
every string goes through the one parser :func:`parse_parts`.

Errors name the text and the 0-based position of the first character that does not fit.

Limits (checked before any work that grows with them; each error names the limit):
integers must fit in CuTe's ``int64_t`` (``|v| < 2**63``, at most :data:`MAX_INT_DIGITS`
digits), tuples nest at most :data:`MAX_DEPTH` levels, a text holds at most
:data:`MAX_INTS` integers (the inverses sort modes in quadratic time) and at most
:data:`MAX_TEXT` characters.  Longer texts are shortened in error messages.
"""

from __future__ import annotations

from typing import NamedTuple

from nvatom.errors import LayoutError

from .inttuple import IntTuple, _as_int_tuple, compact_col_major, congruent, format_int_tuple
from .swizzle import Swizzle

__all__ = ["MAX_DEPTH", "MAX_INTS", "MAX_INT_DIGITS", "MAX_TEXT", "ParsedComposed",
           "ParsedLayout", "format_int_tuple", "parse_int_tuple", "parse_parts"]

#: deepest nesting of parentheses (CuTe's own layouts nest 3 or 4 levels)
MAX_DEPTH = 32
#: integers are CuTe's int64_t: |v| < 2**63, which has 19 digits
MAX_INT_DIGITS = 19
INT_LIMIT = 1 << 63
#: most integers in one text (a layout of 4096 modes has 8192)
MAX_INTS = 10_000
#: longest notation text accepted (a layout of a thousand modes is far shorter)
MAX_TEXT = 100_000


class ParsedLayout(NamedTuple):
    """``shape:stride`` as read (the stride is compact column-major when the text has none)."""

    shape: IntTuple
    stride: IntTuple


class ParsedComposed(NamedTuple):
    """``inner o offset o outer`` as read."""

    inner: Swizzle | ParsedLayout
    offset: int
    outer: ParsedLayout


def clip(text: str, limit: int = 80) -> str:
    """``repr(text)``, shortened to about ``limit`` characters for an error message."""
    if len(text) <= limit:
        return repr(text)
    return repr(text[:limit - 20]) + f"... ({len(text)} characters)"


class _Parser:
    __slots__ = ("count", "n", "pos", "text", "what")

    def __init__(self, text: str, what: str) -> None:
        self.text = text
        self.pos = 0
        self.n = len(text)
        self.what = what
        self.count = 0

    def fail(self, msg: str, pos: int | None = None) -> LayoutError:
        p = self.pos if pos is None else pos
        return LayoutError(f"cannot parse {self.what} {clip(self.text)}: {msg} at position {p}")

    def ws(self) -> None:
        t, n, p = self.text, self.n, self.pos
        while p < n and t[p].isspace():
            p += 1
        self.pos = p

    def peek(self) -> str:
        self.ws()
        return self.text[self.pos] if self.pos < self.n else ""

    def expect(self, ch: str) -> None:
        if self.peek() != ch:
            got = repr(self.text[self.pos]) if self.pos < self.n else "end of text"
            raise self.fail(f"expected {ch!r}, found {got}")
        self.pos += 1

    def int_(self) -> int:
        self.ws()
        t, n = self.text, self.n
        start = p = self.pos
        if p < n and t[p] == "_":
            p += 1
        neg = p < n and t[p] == "-"
        if neg:
            p += 1
        q = p
        while p < n and "0" <= t[p] <= "9":
            p += 1
        if p == q:
            got = repr(t[start]) if start < n else "end of text"
            raise self.fail(f"expected an integer, found {got}", start)
        self.count += 1
        if self.count > MAX_INTS:
            raise self.fail(f"more than {MAX_INTS} integers (the limit)", start)
        if p - q > MAX_INT_DIGITS and t[q:p].lstrip("0")[MAX_INT_DIGITS:]:
            raise self.fail(f"integer of {p - q} digits is out of range (integers must fit "
                            f"in 64 bits: |v| < 2^63)", start)
        v = int(t[q:p])
        if v >= INT_LIMIT:
            raise self.fail(f"integer {v} is out of range (integers must fit in 64 bits: "
                            f"|v| < 2^63)", start)
        self.pos = p
        return -v if neg else v

    def int_tuple(self, depth: int = 0) -> IntTuple:
        if self.peek() != "(":
            return self.int_()
        if depth >= MAX_DEPTH:
            raise self.fail(f"tuples nest deeper than {MAX_DEPTH} levels (the limit)")
        self.pos += 1
        items: list[IntTuple] = []
        if self.peek() == ")":
            self.pos += 1
            return ()
        while True:
            items.append(self.int_tuple(depth + 1))
            c = self.peek()
            if c == ",":
                self.pos += 1
                continue
            if c == ")":
                self.pos += 1
                return tuple(items)
            got = repr(c) if c else "end of text"
            raise self.fail(f"expected ',' or ')', found {got}")

    def at_end(self) -> bool:
        self.ws()
        return self.pos >= self.n


def parse_int_tuple(text: str) -> IntTuple:
    """Read ``(4,(2,2))``-style text (``_``-prefixed static ints accepted)."""
    if not isinstance(text, str):
        raise LayoutError(f"parse_int_tuple: expected a string, got {text!r}")
    p = _Parser(text, "int tuple")
    _check_length(p)
    v = p.int_tuple()
    if not p.at_end():
        raise p.fail(f"unexpected {text[p.pos]!r}")
    return v


def _layout_core(p: _Parser) -> ParsedLayout:
    start = p.pos
    shape = p.int_tuple()
    stride: IntTuple | None = None
    if p.peek() == ":":
        p.pos += 1
        stride_pos = p.pos
        stride = p.int_tuple()
        if not congruent(shape, stride):
            raise p.fail(
                f"stride {format_int_tuple(stride)} is not congruent to shape "
                f"{format_int_tuple(shape)}",
                stride_pos,
            )
    try:
        # the check of the Layout constructor, with its words
        checked = _as_int_tuple(shape, "Layout", positive=True)
    except LayoutError as e:
        raise p.fail(str(e).replace("Layout: ", ""), start) from None
    if stride is None:
        return ParsedLayout(checked, compact_col_major(checked))
    return ParsedLayout(shape, stride)


def _swizzle(p: _Parser) -> Swizzle:
    start = p.pos
    p.pos += 2  # "Sw"
    p.expect("<")
    b = p.int_()
    p.expect(",")
    m = p.int_()
    p.expect(",")
    s = p.int_()
    p.expect(">")
    try:
        return Swizzle(b, m, s)
    except LayoutError as e:
        raise p.fail(str(e), start) from None


def _check_length(p: _Parser) -> None:
    if p.n > MAX_TEXT:
        raise p.fail(f"text of {p.n} characters is longer than the limit of {MAX_TEXT}",
                     MAX_TEXT)


def parse_parts(text: str) -> ParsedLayout | ParsedComposed:
    """Read CuTe notation into its parts (see the module doc); ``nvatom.layout.parse_layout``
    builds the Layout or ComposedLayout from them."""
    p = _Parser(text, "layout")
    _check_length(p)
    p.ws()
    first: Swizzle | ParsedLayout
    if p.text.startswith("Sw", p.pos):
        first = _swizzle(p)
    else:
        first = _layout_core(p)
    if p.at_end():
        if type(first) is Swizzle:
            raise p.fail("a swizzle must be followed by 'o offset o layout'")
        return first
    if p.peek() != "o":
        raise p.fail(f"unexpected {p.text[p.pos]!r}")
    p.pos += 1
    # Either "o offset o layout" or just "o layout" (offset 0).
    mark = p.pos
    t = p.int_tuple()
    if type(t) is int and p.peek() == "o":
        offset = t
        p.pos += 1
        outer = _layout_core(p)
    else:
        p.pos = mark
        offset = 0
        outer = _layout_core(p)
    if not p.at_end():
        raise p.fail(f"unexpected {p.text[p.pos]!r}")
    return ParsedComposed(first, offset, outer)
