"""Pictures of layouts as SVG: the one grid drawer that layouts and fragments share.

A rank-2 layout is drawn as CuTe's ``print_latex`` draws it (CuTe C++
``include/cute/util/print_latex.hpp``): one cell per coordinate ``(row, col)``, the cell
showing the offset ``L(row, col)``.  A rank-1 layout is one row; modes past the first of a
deeper layout become the columns (the column-major index ``row + rows * col``).  Cells are
coloured by shared-memory bank -- ``(byte address // 4) % 32`` with the element width given,
``offset % 32`` (the bank of 32-bit elements) without it.

:func:`draw_grid` is the drawer (also used by :mod:`nvatom.atoms.frag_view` for fragments);
every picture is bounded by construction, checked before anything is evaluated:

* a grid of more than :data:`MAX_CELLS` cells is not evaluated: the picture is a summary;
* at most :data:`MAX_DRAWN` cells are drawn and the picture is at most :data:`MAX_PX` pixels
  on a side: the cells shrink (full labels, then short labels, then bare cells whose values
  are in ``<title>`` tooltips), and past that the picture shows the top-left corner and says
  so in a note.
"""

from __future__ import annotations

import colorsys
import math
from collections.abc import Callable, Sequence
from html import escape
from typing import Any, NamedTuple

from .inttuple import product

__all__ = [
    "MAX_CELLS",
    "MAX_DRAWN",
    "MAX_PX",
    "GridCell",
    "LayoutPicture",
    "colour",
    "draw_grid",
    "layout_html",
    "layout_svg",
    "summary_svg",
]

MAX_CELLS = 65536  # a grid larger than this is summarised, not evaluated
MAX_DRAWN = 16384  # cells drawn at most (a WGMMA m64n256 accumulator is 16384)
MAX_PX = 4800  # the picture's width and height at most, in pixels
BANKS = 32  # shared-memory banks of 4 bytes (CUDA C++ Programming Guide, shared memory)

_LEFT, _TOP_TITLE, _LINE, _MIN_W = 36, 18, 14, 360
_FONT = "monospace"


class GridCell(NamedTuple):
    """One cell: its fill colour, its label, a short label for small cells, its tooltip."""

    fill: str
    label: str
    short: str
    tip: str


class _Scale(NamedTuple):
    cw: int
    ch: int
    font: int
    text: str  # "label", "short" or "" (bare cells)


_BARE = _Scale(5, 5, 0, "")


def colour(i: int) -> str:
    """A pastel colour for a lane, a thread or a bank: hues step by the golden ratio, so
    neighbours differ; the saturation changes every 32 (a warp, all the banks)."""
    sat = (0.35, 0.48, 0.22, 0.42)[(i // 32) % 4]
    r, g, b = colorsys.hsv_to_rgb((i * 0.61803398875) % 1.0, sat, 0.97)
    return f"#{int(r * 255):02x}{int(g * 255):02x}{int(b * 255):02x}"


def _char_w(font: int) -> float:
    return 0.62 * font  # a monospace glyph's advance


def _scales(label_chars: int, short_chars: int) -> list[_Scale]:
    full = _Scale(max(24, math.ceil(_char_w(11) * label_chars) + 8), 22, 11, "label")
    small = _Scale(max(10, math.ceil(_char_w(7) * short_chars) + 3), 11, 7, "short")
    return [full, small, _BARE]


def _svg_open(w: int, h: int) -> str:
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" '
            f'viewBox="0 0 {w} {h}" font-family="{_FONT}" font-size="11">')


def summary_svg(title: str, lines: Sequence[str]) -> str:
    """A picture of text only: what a grid too large to draw gets instead."""
    lines = [title, *lines]
    w = min(MAX_PX, 20 + math.ceil(_char_w(12) * max(len(s) for s in lines)))
    lines = [_fit(s, w, 12) for s in lines]
    h = 16 + _LINE * 1.3 * len(lines)
    out = [_svg_open(w, math.ceil(h)),
           f'<rect x="0" y="0" width="{w}" height="{math.ceil(h)}" fill="#fff8e0" '
           'stroke="#999"/>']
    for i, s in enumerate(lines):
        out.append(f'<text x="10" y="{20 + i * 18}" font-size="12">{escape(s)}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def _window(rows: int, cols: int, reserved_h: int) -> tuple[int, int]:
    """How many rows and columns fit at the smallest scale within the caps."""
    max_cols = max(1, (MAX_PX - _LEFT - 10) // _BARE.cw)
    max_rows = max(1, (MAX_PX - reserved_h) // _BARE.ch)
    c = min(cols, max_cols)
    r = min(rows, max_rows, max(1, MAX_DRAWN // c))
    return r, c


def _legend_rows(legend: Sequence[tuple[str, str]], width: int) -> list[list[tuple[str, str]]]:
    rows: list[list[tuple[str, str]]] = [[]]
    x = 0
    for fill, text in legend:
        sw = max(16, math.ceil(_char_w(8) * len(text)) + 4)
        if x + sw > width and rows[-1]:
            rows.append([])
            x = 0
        rows[-1].append((fill, text))
        x += sw
    return rows if rows[0] else []


def draw_grid(title: str, rows: int, cols: int, cell: Callable[[int, int], GridCell], *,
              legend_title: str = "", legend: Sequence[tuple[str, str]] = (),
              notes: Sequence[str] = ()) -> str:
    """An SVG grid of ``rows x cols`` cells, ``cell(r, c)`` evaluated only for drawn cells.

    Bounded by construction: over :data:`MAX_CELLS` cells it is a :func:`summary_svg`; at
    most :data:`MAX_DRAWN` cells and :data:`MAX_PX` pixels a side are drawn."""
    if rows * cols > MAX_CELLS:
        return summary_svg(title, [
            f"{rows} x {cols} = {rows * cols} cells: too many to draw "
            f"(the limit is {MAX_CELLS}); nothing was evaluated.", *notes])
    legend = list(legend)[:256]
    notes = list(notes)
    header_guess = _TOP_TITLE + _LINE * (len(notes) + 2) + 24
    # the legend wraps at the picture's width, at least _MIN_W: reserve for the narrowest
    legend_guess = (12 + 26 * len(_legend_rows(legend, _MIN_W - _LEFT))) if legend else 0
    shown_r, shown_c = _window(rows, cols, header_guess + legend_guess)
    cells = [[cell(r, c) for c in range(shown_c)] for r in range(shown_r)]
    label_chars = max(len(x.label) for row in cells for x in row)
    short_chars = max(len(x.short) for row in cells for x in row)
    if shown_r < rows or shown_c < cols:
        notes.append(f"elided: rows 0..{shown_r - 1} of {rows} and columns 0..{shown_c - 1} "
                     f"of {cols} are drawn (caps: {MAX_DRAWN} cells, {MAX_PX} px)")
    for sc in _scales(label_chars, short_chars):
        if (_LEFT + shown_c * sc.cw + 10 <= MAX_PX
                and header_guess + legend_guess + shown_r * sc.ch <= MAX_PX):
            break
    if sc.text != "label":
        notes.append("small cells: " + ("short labels; " if sc.text else "no labels; ")
                     + "hover a cell for its full value")
    grid_w = shown_c * sc.cw
    text_w = max([_char_w(13) * len(title), *(_char_w(10) * len(n) for n in notes)])
    width = min(MAX_PX, max(_LEFT + grid_w + 10, _MIN_W, math.ceil(text_w) + 12))
    # header: title, notes (cut to the width), column numbers
    y = _TOP_TITLE
    out_head = [f'<text x="6" y="{y - 4}" font-size="13">'
                f'{escape(_fit(title, width, 13))}</text>']
    for n in notes:
        y += _LINE
        out_head.append(f'<text x="6" y="{y - 4}" font-size="10" fill="#a03000">'
                        f'{escape(_fit(n, width, 10))}</text>')
    idx_font = max(7, min(10, sc.font or 7))
    top = y + 12 + idx_font
    body = [f'<g font-size="{idx_font}" fill="#555">']
    cstep = _step(sc.cw, math.ceil(_char_w(idx_font) * len(str(shown_c - 1))) + 3)
    for c in range(0, shown_c, cstep):
        body.append(f'<text x="{_LEFT + c * sc.cw + sc.cw // 2}" y="{top - 4}" '
                    f'text-anchor="middle">{c}</text>')
    rstep = _step(sc.ch, idx_font + 1)
    for r in range(0, shown_r, rstep):
        body.append(f'<text x="{_LEFT - 4}" y="{top + r * sc.ch + sc.ch // 2 + idx_font // 3}" '
                    f'text-anchor="end">{r}</text>')
    body.append("</g>")
    # cells
    body.append(f'<g stroke="#333" stroke-width="{0.5 if sc.text else 0.2}">')
    for r, row in enumerate(cells):
        for c, x in enumerate(row):
            body.append(f'<rect class="cell" x="{_LEFT + c * sc.cw}" y="{top + r * sc.ch}" '
                        f'width="{sc.cw}" height="{sc.ch}" fill="{x.fill}">'
                        f'<title>{escape(x.tip)}</title></rect>')
    body.append("</g>")
    if sc.text:
        body.append(f'<g font-size="{sc.font}" text-anchor="middle" pointer-events="none">')
        for r, row in enumerate(cells):
            for c, x in enumerate(row):
                t = x.label if sc.text == "label" else x.short
                if t:
                    body.append(f'<text x="{_LEFT + c * sc.cw + sc.cw // 2}" '
                                f'y="{top + r * sc.ch + sc.ch // 2 + sc.font // 3}">'
                                f'{escape(t)}</text>')
        body.append("</g>")
    y = top + shown_r * sc.ch + 8
    if legend:
        y += 12
        body.append(f'<text x="6" y="{y}" font-size="10">{escape(legend_title)}</text>')
        for lrow in _legend_rows(legend, width - _LEFT):
            y += 4
            x0 = _LEFT
            for fill, text in lrow:
                sw = max(16, math.ceil(_char_w(8) * len(text)) + 4)
                body.append(f'<rect x="{x0}" y="{y}" width="{sw - 2}" height="10" '
                            f'fill="{fill}" stroke="#333" stroke-width="0.3"/>'
                            f'<text x="{x0 + sw // 2 - 1}" y="{y + 19}" font-size="8" '
                            f'text-anchor="middle">{escape(text)}</text>')
                x0 += sw
            y += 22
    height = y + 6
    return "\n".join([_svg_open(width, height), *out_head, *body, "</svg>"]) + "\n"


def _fit(text: str, width: int, font: int) -> str:
    n = int((width - 12) / _char_w(font))
    return text if len(text) <= n else text[:max(1, n - 1)] + "…"


def _step(cell: int, need: int) -> int:
    """Label every ``step``-th row or column: a power of two so labels do not overlap."""
    step = 1
    while step * cell < need:
        step *= 2
    return step


# --------------------------------------------------------------------------- layouts


def _grid_shape(layout: Any) -> tuple[int, int]:
    shape = layout.shape
    if type(shape) is not tuple:
        return 1, shape
    if len(shape) == 1:
        return 1, product(shape)
    return product(shape[0]), product(shape[1:])


def layout_svg(layout: Any, *, element_bits: int | None = None, base: int = 0,
               title: str | None = None) -> str:
    """The picture of a Layout or ComposedLayout: ``(row, col) -> offset``, cells coloured by
    shared-memory bank (``element_bits`` wide elements from byte ``base``; without
    ``element_bits``, ``offset % 32``)."""
    rows, cols = _grid_shape(layout)
    deep = type(layout.shape) is tuple and len(layout.shape) > 2
    notes = ["modes 1.. are the columns (column-major)"] if deep else []
    if element_bits is not None:
        how = f"colour: bank of {element_bits}-bit elements" + (f" from byte {base}"
                                                                 if base else "")
    else:
        how = "colour: offset % 32 (the bank of 32-bit elements)"

    def bank(o: int) -> int:
        if element_bits is None:
            return o % BANKS
        return ((base + o * element_bits // 8) // 4) % BANKS

    def cell(r: int, c: int) -> GridCell:
        o = layout(r + rows * c)
        b = bank(o)
        return GridCell(colour(b), str(o), str(o),
                        f"({r},{c}) index {r + rows * c} -> offset {o}, bank {b}")

    return draw_grid(title if title is not None else str(layout), rows, cols, cell,
                     legend_title=how, legend=[(colour(b), str(b)) for b in range(BANKS)],
                     notes=notes)


def layout_html(layout: Any, **kw: Any) -> str:
    """The text form of the layout above its picture (what Jupyter shows)."""
    return (f'<div><pre>{escape(str(layout))}  size={layout.size()} '
            f'cosize={layout.cosize()}</pre>{layout_svg(layout, **kw)}</div>')


class LayoutPicture:
    """A layout's picture with options (``layout.picture(element_bits=16)``); Jupyter shows
    it, :attr:`svg` is the SVG text."""

    def __init__(self, layout: Any, **kw: Any) -> None:
        self.layout, self.kw = layout, kw

    def _repr_svg_(self) -> str:
        return layout_svg(self.layout, **self.kw)

    def _repr_html_(self) -> str:
        return layout_html(self.layout, **self.kw)

    @property
    def svg(self) -> str:
        return layout_svg(self.layout, **self.kw)
