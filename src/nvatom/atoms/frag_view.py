"""Fragment pictures: which lane holds which element, as text and as SVG (PTX ISA style).

The grid is the operand's matrix as the PTX ISA draws it (A: M x K, B: K x N, C/D: M x N);
each cell says ``T<lane>:V<value>``.  Replicated elements (several owners) list every owner.
"""

from __future__ import annotations

import colorsys
from html import escape

from nvatom.layout import Layout, size

__all__ = ["fragment_grid", "fragment_svg", "fragment_table"]


def fragment_grid(tv: Layout, operand: str, rows_cols: tuple[int, int],
                  threads: int = 32) -> list[list[list[tuple[int, int]]]]:
    """grid[r][c] = [(lane, value), ...] in the ISA's orientation of the operand."""
    op = "C" if operand.upper() == "D" else operand.upper()
    rows, cols = rows_cols
    grid: list[list[list[tuple[int, int]]]] = [[[] for _ in range(cols)] for _ in range(rows)]
    nval = size(tv) // threads
    for t in range(threads):
        for v in range(nval):
            idx = tv(t, v)
            if op == "B":  # codomain (N, K) column-major; drawn as K x N
                n_, k_ = idx % cols, idx // cols
                r, c = k_, n_
            else:  # (M, K) or (M, N) column-major
                r, c = idx % rows, idx // rows
            grid[r][c].append((t, v))
    return grid


def fragment_table(grid: list[list[list[tuple[int, int]]]]) -> str:
    cells = [[",".join(f"T{t}:V{v}" for t, v in cell) or "-" for cell in row] for row in grid]
    width = max(len(c) for row in cells for c in row)
    ncols = len(cells[0])
    head = "     " + " ".join(f"{c:>{width}}" for c in range(ncols))
    lines = [head] + [f"{r:>4} " + " ".join(f"{c:>{width}}" for c in row)
                      for r, row in enumerate(cells)]
    return "\n".join(lines)


def _colour(lane: int) -> str:
    r, g, b = colorsys.hsv_to_rgb((lane * 0.61803398875) % 1.0, 0.35, 0.97)
    return f"#{int(r * 255):02x}{int(g * 255):02x}{int(b * 255):02x}"


def fragment_svg(grid: list[list[list[tuple[int, int]]]], title: str) -> str:
    cw, ch, pad = 64, 26, 30
    rows, cols = len(grid), len(grid[0])
    w, h = pad + cols * cw + 10, pad + 20 + rows * ch + 10
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" '
           'font-family="monospace" font-size="11">',
           f'<text x="{pad}" y="16" font-size="13">{escape(title)}</text>']
    top = pad + 20
    for c in range(cols):
        out.append(f'<text x="{pad + c * cw + cw / 2}" y="{top - 4}" text-anchor="middle">'
                   f'{c}</text>')
    for r in range(rows):
        out.append(f'<text x="{pad - 4}" y="{top + r * ch + ch / 2 + 4}" text-anchor="end">'
                   f'{r}</text>')
        for c in range(cols):
            owners = grid[r][c]
            fill = _colour(owners[0][0]) if owners else "#ffffff"
            label = " ".join(f"T{t}:V{v}" for t, v in owners[:2]) + ("…" if len(owners) > 2
                                                                      else "")
            x, y = pad + c * cw, top + r * ch
            out.append(f'<rect x="{x}" y="{y}" width="{cw}" height="{ch}" fill="{fill}" '
                       'stroke="#333" stroke-width="0.5"/>')
            out.append(f'<text x="{x + cw / 2}" y="{y + ch / 2 + 4}" text-anchor="middle">'
                       f'{escape(label)}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"
