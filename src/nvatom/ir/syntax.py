"""Text of the ``cute`` layout types, read and written without xDSL.

The bodies of ``!cute.layout<...>``, ``!cute.composed_layout<...>`` and of the layout slot of
``!cute.memref<...>`` use CuTe's notation (``nvatom.layout.notation``) widened the way the TMA
partition verifier needs it (docs/spec-deviations.md#tma-partition-verifier, and
``nvatom.atoms.tma.LayoutType``):

    body      := composed | layout | "..."
    composed  := "Sw<" int "," int "," int ">" " o " int " o " layout
    layout    := tuple ":" (tuple | "...")  |  tuple "," "..."
    tuple     := leaf | "(" tuple ("," tuple)* ")"
    leaf      := int | name | int "@" int                 name: a dynamic integer;
                                                          s@m: CuTe's scaled basis E<m> * s

A body with only integers is an ordinary :class:`~nvatom.layout.Layout`; names, scaled bases
or ``...`` (unknown) give a :class:`~nvatom.atoms.tma.LayoutType`.  Printing is the text the
atom layer's diagnostics use (``nvatom.atoms.tma.type_text``), so an IR type prints exactly as
a verifier message quotes it.
"""

from __future__ import annotations

import functools
import re
from typing import Any

from nvatom.atoms.tma import E, LayoutType, type_text
from nvatom.errors import LayoutError, NvatomError
from nvatom.layout import ComposedLayout, Layout, parse_layout
from nvatom.layout.notation import INT_LIMIT, MAX_INT_DIGITS

__all__ = ["IRSyntaxError", "layout_text", "parse_layout_body", "split_top_level"]


class IRSyntaxError(NvatomError):
    """A type or attribute body that does not follow its grammar (names the text)."""


_TOKEN = re.compile(r"\s*(\.\.\.|\d+|[A-Za-z_][A-Za-z0-9_]*|[():,@])")


def _tokens(text: str) -> list[str]:
    pos, out = 0, []
    text = text.rstrip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:
            raise IRSyntaxError(f"unexpected character '{text[pos:].strip()[:1]}' in layout "
                                f"'{text.strip()}' at offset {pos}")
        out.append(m.group(1))
        pos = m.end()
    return out


class _Reader:
    def __init__(self, text: str) -> None:
        self.text = text.strip()
        self.toks = _tokens(text)
        self.i = 0

    def peek(self) -> str | None:
        return self.toks[self.i] if self.i < len(self.toks) else None

    def take(self, want: str | None = None) -> str:
        tok = self.peek()
        if tok is None or (want is not None and tok != want):
            found = "the end" if tok is None else f"'{tok}'"
            raise IRSyntaxError(f"expected {(want and repr(want)) or 'more'} in layout "
                                f"'{self.text}', found {found}")
        self.i += 1
        return tok

    def tuple_(self, depth: int = 0) -> Any:
        if depth > 32:
            raise IRSyntaxError(f"layout '{self.text}' nests deeper than 32 levels")
        if self.peek() == "(":
            self.take("(")
            items = [self.tuple_(depth + 1)]
            while self.peek() == ",":
                self.take(",")
                items.append(self.tuple_(depth + 1))
            self.take(")")
            return tuple(items)
        tok = self.take()
        if tok.isdigit():
            if len(tok) > MAX_INT_DIGITS or int(tok) >= INT_LIMIT:
                raise IRSyntaxError(f"integer {tok} in layout '{self.text}' is out of range "
                                    "(integers must fit in 64 bits: |v| < 2^63)")
            if self.peek() == "@":
                self.take("@")
                mode = self.take()
                if not mode.isdigit():
                    raise IRSyntaxError(f"scaled basis '{tok}@{mode}' in layout '{self.text}' "
                                        "needs an integer mode")
                return E(int(mode), int(tok))
            return int(tok)
        if tok[0].isalpha() or tok[0] == "_":
            return tok
        raise IRSyntaxError(f"unexpected '{tok}' in layout '{self.text}'")


def _leaves(x: Any) -> list[Any]:
    if isinstance(x, tuple):
        return [v for e in x for v in _leaves(e)]
    return [x]


def _congruent(a: Any, b: Any) -> bool:
    if isinstance(a, tuple) != isinstance(b, tuple):
        return False
    if isinstance(a, tuple):
        return len(a) == len(b) and all(_congruent(x, y) for x, y in zip(a, b, strict=True))
    return True


@functools.lru_cache(maxsize=4096)
def parse_layout_body(text: str) -> Layout | ComposedLayout | LayoutType:
    """The layout a type body names (see the module doc)."""
    body = text.strip()
    if body.startswith("Sw<"):
        try:
            lay = parse_layout(body)
        except LayoutError as e:
            raise IRSyntaxError(str(e)) from None
        if not isinstance(lay, ComposedLayout):
            raise IRSyntaxError(f"'{body}' is not a swizzled (composed) layout")
        return lay
    r = _Reader(body)
    if r.peek() == "..." and len(r.toks) == 1:
        return LayoutType()
    shape = r.tuple_()
    stride: Any = None
    if r.peek() == ":":
        r.take(":")
        stride = None if r.peek() == "..." and r.take("...") else r.tuple_()
    else:
        r.take(",")
        r.take("...")
    if r.peek() is not None:
        raise IRSyntaxError(f"unexpected '{r.peek()}' after the layout in '{body}'")
    if any(isinstance(v, E) for v in _leaves(shape)):
        raise IRSyntaxError(f"a scaled basis is a stride, not a shape, in '{body}'")
    if stride is not None and not _congruent(shape, stride):
        raise IRSyntaxError(f"shape and stride of '{body}' are not congruent")
    if stride is not None and all(isinstance(v, int) for v in _leaves((shape, stride))):
        if any(v < 0 for v in _leaves(shape)):
            raise IRSyntaxError(f"negative extent in '{body}'")
        return Layout(shape, stride)
    return LayoutType(shape, stride)


def layout_text(x: Layout | ComposedLayout | LayoutType) -> str:
    """The body text of a layout type, as ``type_text`` prints it (without ``!cute.x<>``)."""
    t = type_text(x)
    return t[t.index("<") + 1:-1]


def split_top_level(text: str, n: int) -> list[str]:
    """Split ``text`` at its first ``n`` commas outside brackets (``<>()[]{}``)."""
    depth, out, start = 0, [], 0
    for i, c in enumerate(text):
        if c in "<([{":
            depth += 1
        elif c in ">)]}":
            depth -= 1
        elif c == "," and depth == 0 and len(out) < n:
            out.append(text[start:i].strip())
            start = i + 1
    out.append(text[start:].strip())
    return out
