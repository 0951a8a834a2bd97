"""Tiled MMA: an MMA atom repeated over a layout of warps, and operand partitioning.

``make_tiled_mma(atom, atom_layout=(LM, LN, LK), tile=(TM, TN, TK))`` follows CuTe's TiledMMA:
``LM x LN x LK`` copies of the atom (one per warp) cover an ``(atomM*LM, atomN*LN, atomK*LK)``
tile; a larger ``tile`` (CuTe's permutation given as tile sizes) repeats that pattern, the
repetitions becoming extra values of each thread: interleaved by default (the warps' atoms
side by side, the pattern repeated), or ``warp_order="blocked"`` (each warp's repetitions
side by side: one contiguous block of the tile per warp).

Each operand's tiled (thread, value) layout is built by the layout algebra: the atom's layout
is composed with the embedding of the atom tile into the tiled tile, the warp modes are
appended to the thread mode (stride 0 along the dimension an operand does not have: A is
replicated across N warps, B across M warps, C across K warps), and the repetitions are
appended to the value mode.  :meth:`TiledMma.partition` then slices a thread's values out of
any tensor layout of the tile (or of a larger tensor, tile by tile).

:func:`check_gemm_operands` applies the spec's builder diagnostics (the spec's registry):
composed layouts are rejected, A/B and C/D ranks must agree, and C's rank must fit A's
(CuTe's gemm dispatch: (V)x(V)=>(V) or (M)x(N)=>(M,N); (M,K)x(N,K)=>(M,N) or
(V,M)x(V,N)=>(V,M,N); (V,M,K)x(V,N,K)=>(V,M,N)).
"""

from __future__ import annotations

import dataclasses
import math

from nvatom import diagnostics as D
from nvatom.atoms.frag_view import FragmentView
from nvatom.atoms.interfaces import AtomVerificationError, MmaAtom
from nvatom.layout import (
    ComposedLayout,
    Layout,
    composition,
    layouts_equivalent,
    rank,
    size,
    slice_and_offset,
    zipped_divide,
)

__all__ = ["WARP_ORDERS", "TiledMma", "check_fragment_layout", "check_gemm_operands",
           "make_tiled_mma"]

# Which tile dimensions (of M, N, K) each operand's tile spans, in CuTe's order.
_DIMS = {"A": (0, 2), "B": (1, 2), "C": (0, 1)}


#: How a tile larger than the warps' atoms is shared out (``make_tiled_mma(warp_order=)``):
#: "interleaved" (CuTe's TiledMMA: warps one atom apart, each warp's repetitions one
#: atom-layout apart) or "blocked" (each warp one contiguous block of atoms: the
#: repetitions one atom apart, the warps one block apart).
WARP_ORDERS = ("interleaved", "blocked")


@dataclasses.dataclass(frozen=True)
class TiledMma:
    atom: MmaAtom
    atom_layout: tuple[int, int, int]
    tile: tuple[int, int, int]
    warp_order: str = "interleaved"

    @property
    def atom_threads(self) -> int:
        return size(self.atom.tv_layout("C")) // _values(self.atom, "C")  # type: ignore[attr-defined]

    @property
    def threads(self) -> int:
        return self.atom_threads * math.prod(self.atom_layout)

    def tv_layout(self, operand: str) -> Layout:
        """(thread, value) -> column-major index into the operand's tiled tile."""
        op = "C" if operand.upper() == "D" else operand.upper()
        if op not in _DIMS:
            raise AtomVerificationError(f"unknown operand '{operand}' (A, B, C or D)")
        atom_tv: Layout = self.atom.tv_layout(op)  # type: ignore[attr-defined]
        d0, d1 = _DIMS[op]
        amnk = self.atom.shape_mnk
        rows = self.tile[d0]
        # Embed the atom's tile, column-major, into the tiled tile (rows x ...).
        embed = Layout((amnk[d0], amnk[d1]), (1, rows))
        atom_in_tile = composition(embed, atom_tv)
        thr, val = atom_in_tile[0], atom_in_tile[1]
        # Warp modes over (M, N, K): a step of one atom along the operand's dimensions,
        # stride 0 (replication) along the other one.
        reps = tuple(self.tile[i] // (amnk[i] * self.atom_layout[i]) for i in (d0, d1))
        if self.warp_order == "blocked":  # a warp's atoms side by side, warps a block apart
            step = {d0: amnk[d0] * reps[0], d1: amnk[d1] * reps[1] * rows}
            rep_stride = (amnk[d0], amnk[d1] * rows)
        else:  # interleaved: warps an atom apart, repetitions an atom layout apart
            step = {d0: amnk[d0], d1: amnk[d1] * rows}
            rep_stride = (amnk[d0] * self.atom_layout[d0],
                          amnk[d1] * self.atom_layout[d1] * rows)
        warp_shape = self.atom_layout
        warp_stride = tuple(step.get(i, 0) for i in range(3))
        return Layout(
            ((thr.shape, warp_shape), (val.shape, reps)),
            ((thr.stride, warp_stride), (val.stride, rep_stride)),
        )

    def picture(self, operand: str = "C") -> FragmentView:
        """Which thread holds which element of the operand's tiled tile (A: M x K, B: K x N,
        C/D: M x N); Jupyter shows it, ``.svg`` is the SVG."""
        op = "C" if operand.upper() == "D" else operand.upper()
        tv = self.tv_layout(op)
        d0, d1 = _DIMS[op]
        dims = (self.tile[d1], self.tile[d0]) if op == "B" else (self.tile[d0], self.tile[d1])
        name = getattr(self.atom, "name", type(self.atom).__name__)
        title = (f"tiled {name} x {self.atom_layout} over {self.tile}  operand {op}  "
                 "(T<thread>:V<value>)")
        return FragmentView(tv, op, dims, self.threads, title)

    def _repr_html_(self) -> str:
        """Jupyter: the A, B and C pictures (each bounded by nvatom.layout.svg's caps)."""
        return "".join(self.picture(op)._repr_html_() for op in ("A", "B", "C"))

    def partition(self, operand: str, tensor: Layout, thread: int) -> tuple[Layout, int]:
        """Thread ``thread``'s values of ``tensor`` (a layout of the operand's tile or of a
        tensor made of whole tiles): (layout over (value, tiles...), offset)."""
        op = "C" if operand.upper() == "D" else operand.upper()
        if not 0 <= thread < self.threads:
            raise AtomVerificationError(
                f"thread {thread} out of range for a tiled MMA of {self.threads} threads"
            )
        d0, d1 = _DIMS[op]
        tiles = zipped_divide(tensor, (self.tile[d0], self.tile[d1]))
        tv = self.tv_layout(op)
        per_tile = composition(tiles[0], tv)
        values, offset = slice_and_offset((thread, None), per_tile)
        rest = tiles[1]
        return Layout((values.shape, rest.shape), (values.stride, rest.stride)), offset


def _values(atom: MmaAtom, op: str) -> int:
    if hasattr(atom, "values"):
        return atom.values(op)  # type: ignore[attr-defined]
    return 1


def make_tiled_mma(
    atom: MmaAtom,
    atom_layout: tuple[int, int, int] = (1, 1, 1),
    tile: tuple[int, int, int] | None = None,
    warp_order: str = "interleaved",
) -> TiledMma:
    """Repeat ``atom`` over ``atom_layout`` warps; ``tile`` enlarges the tile (multiples),
    shared out as ``warp_order`` says (:data:`WARP_ORDERS`)."""
    if warp_order not in WARP_ORDERS:
        raise AtomVerificationError(f"warp order {warp_order!r} is not one of "
                                    f"{', '.join(WARP_ORDERS)}")
    if len(atom_layout) != 3 or any(int(x) < 1 for x in atom_layout):
        raise AtomVerificationError(f"atom layout must be three positive sizes, got {atom_layout}")
    base = tuple(s * r for s, r in zip(atom.shape_mnk, atom_layout, strict=True))
    tile = tuple(tile) if tile is not None else base
    if len(tile) != 3 or any(t % b for t, b in zip(tile, base, strict=True)):
        raise AtomVerificationError(
            f"tile {tile} is not a multiple of the atom tile times the atom layout {base}"
        )
    return TiledMma(atom, tuple(int(x) for x in atom_layout), tile,  # type: ignore[arg-type]
                    warp_order)


def check_gemm_operands(a: object, b: object, c: object, d: object | None = None) -> None:
    """The tiled builders' checks on A, B, C(, D) tensor layouts, with the spec's texts."""
    d = c if d is None else d
    if any(isinstance(x, ComposedLayout) for x in (a, b, d)):
        raise AtomVerificationError(D.COMPOSED_LAYOUT + D.COMPOSED_LAYOUT_ABD.format(a, b, d))
    if rank(a) != rank(b):
        raise AtomVerificationError(f"{D.SAME_RANK_AB}{a}, B: {b}")
    if rank(c) != rank(d):
        raise AtomVerificationError(f"{D.SAME_RANK_CD}{c}, D: {d}")
    ra, rc = rank(a), rank(c)
    allowed = {1: (1, 2), 2: (2, 3), 3: (3,)}.get(ra)
    if allowed is None:
        raise AtomVerificationError(f"expects A to have rank 1, 2 or 3, but got A: {a}")
    if rc not in allowed:
        text = {1: D.C_RANK_1_OR_2, 2: D.C_RANK_2_OR_3, 3: D.C_RANK_3}[ra]
        raise AtomVerificationError(f"{text}{c}")


def check_fragment_layout(operand: str, want: Layout, got: object) -> None:
    """A register fragment must hold the values of ``want``, the atom's or the tiled MMA's
    (thread, value) layout of ``operand`` (up to equivalence), with the specification's
    "expects Mma atom layout" text; the IR's fragment checks and the kernel layer's
    (``nvatom.kernels.tensor``) both call this."""
    if not (isinstance(got, Layout) and layouts_equivalent(got, want)):
        raise AtomVerificationError(f"{D.MMA_ATOM_LAYOUT}{want} for operand {operand}, but got "
                                    f"{got}")
