"""Fragment pictures: which lane holds which element, as text and as SVG (PTX ISA style).

The grid is the operand's matrix as the PTX ISA draws it (A: M x K, B: K x N, C/D: M x N);
each cell says ``T<lane>:V<value>``.  Replicated elements (several owners) list every owner
(the table) or the first with a ``+`` (the picture; the tooltip lists all).  The pictures are
drawn by :func:`nvatom.layout.svg.draw_grid`, bounded in size whatever the tile.
"""

from __future__ import annotations

import dataclasses
from html import escape
from typing import Any

from nvatom.errors import NvatomError
from nvatom.layout import Layout, size
from nvatom.layout.svg import MAX_CELLS, GridCell, colour, draw_grid, summary_svg

__all__ = [
    "FragmentView",
    "FragmentViewError",
    "fragment_grid",
    "fragment_svg",
    "fragment_table",
    "operand_dims",
    "warp_fragment_view",
]


class FragmentViewError(NvatomError):
    """A fragment picture asked of an operand the atom does not have."""


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


def fragment_svg(grid: list[list[list[tuple[int, int]]]], title: str, *,
                 threads: int | None = None) -> str:
    """The grid as SVG (:func:`nvatom.layout.svg.draw_grid`): cells coloured by the (first)
    owning thread, labelled ``T<lane>:V<value>``; small cells show the lane only, every
    owner is in the cell's tooltip.  ``threads`` sizes the colour legend."""
    rows, cols = len(grid), len(grid[0])
    if threads is None:
        threads = 1 + max((t for row in grid for cell in row for t, _ in cell), default=0)

    def cell(r: int, c: int) -> GridCell:
        owners = grid[r][c]
        if not owners:
            return GridCell("#ffffff", "-", "", f"({r},{c}) no owner")
        t, v = owners[0]
        more = "+" if len(owners) > 1 else ""
        return GridCell(colour(t), f"T{t}:V{v}{more}", f"{t}{more}",
                        f"({r},{c}) " + " ".join(f"T{a}:V{b}" for a, b in owners))

    return draw_grid(title, rows, cols, cell, legend_title="colour: thread (lane)",
                     legend=[(colour(t), str(t)) for t in range(min(threads, 256))])


@dataclasses.dataclass(frozen=True)
class FragmentView:
    """A fragment's picture: which thread holds which element of an operand tile.

    ``tv`` maps (thread, value) to the column-major index of the operand's tile in the ISA's
    orientation (``rows x cols``: A is M x K, B is K x N, C/D is M x N).  Jupyter shows it
    (``form.picture("A")``); :attr:`svg` and :attr:`table` are the picture and the text."""

    tv: Layout
    operand: str
    rows_cols: tuple[int, int]
    threads: int
    title: str

    def _too_large(self) -> bool:
        return self.rows_cols[0] * self.rows_cols[1] > MAX_CELLS or size(self.tv) > MAX_CELLS

    def grid(self) -> list[list[list[tuple[int, int]]]]:
        return fragment_grid(self.tv, self.operand, self.rows_cols, self.threads)

    @property
    def svg(self) -> str:
        if self._too_large():
            r, c = self.rows_cols
            return summary_svg(self.title, [
                f"{r} x {c} tile, {size(self.tv)} (thread, value) pairs: too many to draw "
                f"(the limit is {MAX_CELLS}); nothing was evaluated.",
                f"(thread, value) -> element layout: {self.tv}"])
        return fragment_svg(self.grid(), self.title, threads=self.threads)

    @property
    def table(self) -> str:
        """The text table (``nvatom frag``'s), for tiles of at most 1024 cells."""
        r, c = self.rows_cols
        if r * c > 1024:
            return f"{r} x {c} tile: too large for a text table (limit 1024 cells)"
        return fragment_table(self.grid())

    def _repr_svg_(self) -> str:
        return self.svg

    def _repr_html_(self) -> str:
        return (f"<div><pre>{escape(self.title)}\n(thread, value) -> element layout: "
                f"{escape(str(self.tv))}</pre>{self.svg}</div>")


def operand_dims(form: Any, op: str) -> tuple[int, int]:
    """Rows x columns of a warp-MMA operand's tile as the PTX ISA draws it: A is M x K (the
    compressed M x K/2 of a sparse form), B is K x N, C and D are M x N."""
    return {"A": (form.m, form.k // 2 if form.is_sparse else form.k), "B": (form.k, form.n),
            "C": (form.m, form.n), "D": (form.m, form.n)}[op]


def warp_fragment_view(form: Any, operand: str, tv: Layout) -> FragmentView:
    """The picture of a one-warp MMA form's operand (register MMA, SM120, SM70 quad-pairs)."""
    op = _operand(operand)
    return FragmentView(tv, op, operand_dims(form, op), size(tv[0]),
                        f"{form.name}  operand {op}  (T<thread>:V<value>)")


def _operand(operand: str) -> str:
    op = operand.upper() if isinstance(operand, str) else operand
    if op not in ("A", "B", "C", "D"):
        raise FragmentViewError(f"unknown operand {operand!r} (A, B, C or D)")
    return op
