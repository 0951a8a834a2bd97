"""Tiled copies: a copy atom repeated over a layout of threads, and tile partitioning.

``make_tiled_copy(atom, thr_layout, val_layout)`` follows CuTe's construction: the tile is
``raked_product(thr_layout, val_layout)`` -- each thread owns a ``val_layout`` block, threads
arranged by ``thr_layout`` -- so its shape is ``thr_shape * val_shape`` per mode, and the
(thread, value) -> tile-coordinate layout is that product's right inverse reshaped to
``(size(thr_layout), size(val_layout))``.  ``partition(tensor, thread)`` cuts a tensor layout
into tiles (``zipped_divide``) and returns the thread's values in every tile.

Each thread's values must be whole atom invocations: the value count is a multiple of what
one atom call moves per thread.  :meth:`TiledCopy.partition_pair` partitions a source and a
destination tensor alike and checks that each thread's values can move at the atom's vector
width, failing with the specification's vectorisation diagnostics ("'{0}' cannot vectorize
copy to {1} elements (static strides must be 1)" / "... must match)").
"""

from __future__ import annotations

import dataclasses
import math

from nvatom.atoms.copy import vectorize_copy
from nvatom.atoms.interfaces import AtomVerificationError
from nvatom.layout import (
    Layout,
    composition,
    make_layout,
    product_each,
    raked_product,
    right_inverse,
    shape,
    size,
    slice_and_offset,
    zipped_divide,
)

__all__ = ["TiledCopy", "make_tiled_copy"]


@dataclasses.dataclass(frozen=True)
class TiledCopy:
    atom: object
    thr_layout: Layout
    val_layout: Layout
    tiler: tuple[int, ...]  # tile shape, one size per mode
    layout_tv: Layout  # (thread, value) -> column-major index into the tile

    @property
    def threads(self) -> int:
        return size(self.thr_layout)

    @property
    def values(self) -> int:
        return size(self.val_layout)

    def partition(self, tensor: Layout, thread: int) -> tuple[Layout, int]:
        """Thread ``thread``'s elements of ``tensor`` (made of whole tiles):
        (layout over (value, tile indices...), offset of the first)."""
        if not 0 <= thread < self.threads:
            raise AtomVerificationError(
                f"thread {thread} out of range for a tiled copy of {self.threads} threads"
            )
        tiles = zipped_divide(tensor, self.tiler)
        per_tile = composition(tiles[0], self.layout_tv)
        vals, offset = slice_and_offset((thread, None), per_tile)
        rest = tiles[1]
        return Layout((vals.shape, rest.shape), (vals.stride, rest.stride)), offset


    def partition_pair(
        self, src: Layout, dst: Layout, thread: int, element_bits: int
    ) -> tuple[tuple[Layout, int], tuple[Layout, int]]:
        """Partition ``src`` and ``dst`` for ``thread`` and check the copy vectorises to the
        atom's width (``bits / element_bits`` elements for a universal copy)."""
        s_vals, s_off = self.partition(src, thread)
        d_vals, d_off = self.partition(dst, thread)
        bits = getattr(self.atom, "bits", None)
        if bits is not None:
            width = max(1, int(bits) // element_bits)
            name = getattr(self.atom, "name", "atom.universal_copy")
            # Within one tile (mode 0: the thread's values), after the first element.
            vectorize_copy(s_vals[0], d_vals[0], element_bits, max(bits, element_bits),
                           vector=width, name=name)
        return (s_vals, s_off), (d_vals, d_off)


def _atom_values(atom: object) -> int:
    n = getattr(atom, "values_per_thread", 1)
    return int(n() if callable(n) else n)


def make_tiled_copy(atom: object, thr_layout: Layout, val_layout: Layout) -> TiledCopy:
    """Repeat ``atom`` over ``thr_layout`` threads, each moving ``val_layout`` values."""
    for what, lay in (("thread", thr_layout), ("value", val_layout)):
        if not isinstance(lay, Layout):
            raise AtomVerificationError(f"make_tiled_copy: the {what} layout must be a plain "
                                        f"Layout, got {lay!r}")
    per_call = _atom_values(atom)
    nval = size(val_layout)
    if nval % per_call:
        raise AtomVerificationError(
            f"make_tiled_copy: each thread moves {nval} values ({val_layout}), not a multiple "
            f"of the {per_call} values one {getattr(atom, 'name', atom)} call moves per thread"
        )
    layout_mn = raked_product(thr_layout, val_layout)
    tiler = tuple(product_each(shape(layout_mn)))  # type: ignore[arg-type]
    inverse = right_inverse(layout_mn)
    layout_tv = composition(inverse, make_layout((size(thr_layout), nval)))
    if size(layout_tv) != math.prod(tiler):
        raise AtomVerificationError(
            f"make_tiled_copy: threads {thr_layout} and values {val_layout} do not tile "
            f"{tiler} one-to-one"
        )
    return TiledCopy(atom, thr_layout, val_layout, tiler, layout_tv)
