"""Partitioning: which elements of a tile each thread touches, for a tiled copy, an ldmatrix
feeding a tiled MMA, or a register fragment moved to or from memory (CuTe's ``partition_S``,
``partition_D`` and ``retile``), as plain index arithmetic with no PTX.

Every partition is an :class:`Accesses`: thread ``t``'s access ``j`` moves the elements at
the tensor's 1-D (colexicographic) coordinates ``thread(t) + deltas[j][e]``, ``e`` running
over the elements one instruction moves (a 16-byte chunk of cp.async, a 16-byte row of
ldmatrix, a vector of ld/st).  ``thread`` is a :class:`~nvatom.layout.Layout`, so a kernel
evaluates it once at run time from ``%tid.x`` (``nvatom.ptx.layout_eval``) and folds the
deltas in as constants.  The split into a thread part and constants is *derived* from the
atoms' layouts and then checked for every thread, never assumed: a partition that is not of
that form raises, naming the thread and access.

Sources: the (thread, value) layouts of ``nvatom.atoms.tiled_copy`` (CuTe's
``make_tiled_copy``), ``nvatom.atoms.tiled_mma`` (CuTe's ``TiledMMA``) and
``nvatom.atoms.copy.row_addresses`` (the PTX ISA's ldmatrix fragment description).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Sequence

from nvatom.atoms.copy import MatrixCopy, row_addresses
from nvatom.atoms.tiled_copy import TiledCopy
from nvatom.atoms.tiled_mma import TiledMma
from nvatom.errors import NvatomError
from nvatom.layout import Layout, coalesce, size

__all__ = ["Accesses", "PartitionError", "affine_layout", "fragment_partition",
           "ldsm_group", "ldsm_partition", "operand_tile", "retile", "tiled_copy_partition"]

WARP = 32
# Which (M, N, K) dimensions span an operand's tile: A is M x K, B is N x K, C is M x N.
_DIMS = {"A": (0, 2), "B": (1, 2), "C": (0, 1), "D": (0, 1)}


class PartitionError(NvatomError):
    """A tile that does not split over the threads as the atom needs."""


def affine_layout(values: Sequence[int]) -> Layout | None:
    """``i -> values[i] - values[0]`` as a layout of power-of-two modes (coalesced), or None
    when no layout maps every index exactly (the check is exhaustive)."""
    n = len(values)
    if n == 0 or n & (n - 1):
        return None
    shape, stride, s = [], [], 1
    while s < n:
        shape.append(2)
        stride.append(values[s] - values[0])
        s *= 2
    if not shape:
        return Layout(1, 0)
    lay = Layout(tuple(shape), tuple(stride))
    if any(lay(i) + values[0] != v for i, v in enumerate(values)):
        return None
    return coalesce(lay)


@dataclasses.dataclass(frozen=True)
class Accesses:
    """Thread ``t``'s access ``j`` touches the tensor coordinates ``thread(t) + deltas[j][e]``."""

    threads: int
    thread: Layout
    deltas: tuple[tuple[int, ...], ...]

    @property
    def starts(self) -> tuple[int, ...]:
        return tuple(d[0] for d in self.deltas)

    @property
    def vector(self) -> int:
        return len(self.deltas[0])


def _accesses(threads: int, n_access: int, width: int, fn: Callable[[int, int, int], int],
              what: str) -> Accesses:
    """Split ``fn(t, j, e)`` (tensor coordinate of element ``e`` of thread ``t``'s access
    ``j``) into a thread layout plus constants, checked for every (t, j, e)."""
    origin = fn(0, 0, 0)
    thread = affine_layout([fn(t, 0, 0) - origin for t in range(threads)])
    if thread is None:
        raise PartitionError(f"{what}: the threads' first elements are not a layout of the "
                             "thread index")
    deltas = tuple(tuple(fn(0, j, e) for e in range(width)) for j in range(n_access))
    for t in range(threads):
        base = thread(t)
        for j in range(n_access):
            for e in range(width):
                if fn(t, j, e) != base + deltas[j][e]:
                    raise PartitionError(
                        f"{what}: thread {t}'s access {j} is not the thread's first element "
                        "moved by a constant (the partition is not thread-uniform)")
    return Accesses(threads, thread, deltas)


def _tv(layout: Layout, t: int, v: int) -> int:
    """``layout(t, v)`` of a (thread, value) layout, as its 1-D (colexicographic) index: the
    same value, evaluated without the coordinate recursion (partitions check every thread)."""
    return int(layout(t + _threads(layout) * v))


@functools.lru_cache(maxsize=256)
def _threads(layout: Layout) -> int:
    return size(layout[0])


def _tile_index(shape: tuple[int, int], tile_shape: tuple[int, int], tile: Sequence[int],
                x: int) -> int:
    """Column-major coordinate ``x`` of tile ``tile`` (of ``tile_shape``) -> coordinate of
    the tensor of ``shape``."""
    tr, tc = tile_shape
    r, c = x % tr, x // tr
    return (tile[0] * tr + r) + shape[0] * (tile[1] * tc + c)


@functools.lru_cache(maxsize=256)  # pure; a kernel partitions alike often
def tiled_copy_partition(tc: TiledCopy, shape: tuple[int, int], vector: int) -> Accesses:
    """partition_S / partition_D: every thread's values of every tile of a ``shape`` tensor
    made of whole tiles of the tiled copy, ``vector`` values per access."""
    tr, tcols = tc.tiler[0], tc.tiler[1]
    if len(shape) != 2 or shape[0] % tr or shape[1] % tcols:
        raise PartitionError(f"a tensor of shape {tuple(shape)} is not made of whole "
                             f"{tr} x {tcols} tiles of the tiled copy")
    nval = tc.values
    if nval % vector:
        raise PartitionError(f"each thread moves {nval} values, not a multiple of the "
                             f"{vector} one access moves")
    grid = (shape[0] // tr, shape[1] // tcols)
    per_tile = nval // vector

    def fn(t: int, j: int, e: int) -> int:
        tile_i, vec = divmod(j, per_tile)
        tile = (tile_i % grid[0], tile_i // grid[0])
        return _tile_index(shape, (tr, tcols), tile, _tv(tc.layout_tv, t, vec * vector + e))

    return _accesses(tc.threads, grid[0] * grid[1] * per_tile, vector, fn, "tiled copy")


@functools.lru_cache(maxsize=256)  # pure; a kernel partitions alike often
def fragment_partition(mma: TiledMma, operand: str, layout: Layout, vector: int) -> Accesses:
    """A register fragment (``layout``: (thread, value) -> column-major coordinate of the
    operand's tile) moved to/from a tensor of the operand tile's shape, ``vector``
    consecutive values per access (retiling the fragment for the copy)."""
    nval = size(layout[1])
    if nval % vector:
        raise PartitionError(f"each thread holds {nval} values, not a multiple of the "
                             f"{vector} one access moves")

    def fn(t: int, j: int, e: int) -> int:
        return int(_tv(layout, t, j * vector + e))  # the tile's coordinate is the tensor's

    return _accesses(mma.threads, nval // vector, vector, fn, f"operand {operand} fragment")


def operand_tile(mma: TiledMma, operand: str) -> tuple[int, int]:
    """(rows, cols) of ``operand``'s tile of the tiled MMA: A is M x K, B N x K, C M x N."""
    d0, d1 = _DIMS[operand]
    return mma.tile[d0], mma.tile[d1]


def ldsm_group(atom: MatrixCopy, form: object, operand: str) -> tuple[MatrixCopy, int]:
    """(the atom one fragment of ``operand`` needs, how many of it ``atom`` issues at once):
    an ``ldmatrix .x4`` moving twice the registers of one B fragment of ``m16n8k16`` is two
    ``.x2`` side by side (lanes 0-15 address the first, 16-31 the second; registers 0-1 and
    2-3), loading two consecutive repetitions of the fragment in one instruction."""
    per = form.registers(operand)  # type: ignore[attr-defined]
    if atom.registers % per or atom.num % (atom.registers // per):
        raise PartitionError(f"{atom.name} moves {atom.registers} registers, not a multiple "
                             f"of the {per} of one operand {operand} fragment")
    group = atom.registers // per
    return dataclasses.replace(atom, num=atom.num // group), group


def ldsm_partition(atom: MatrixCopy, mma: TiledMma, operand: str, major: str,
                   shape: tuple[int, int], tile: Sequence[int]) -> Accesses:
    """The row each thread's ldmatrix reads, for every instruction that loads ``operand``'s
    fragment, in tile ``tile`` of a tensor of ``shape`` (``major``: its contiguous dim).

    An instruction loads ``group`` consecutive atom repetitions (:func:`ldsm_group`: one, or
    two for an ``.x4`` of two ``.x2`` fragments): lane ``l`` of sub-instruction ``i`` points
    at the row ``row_addresses(sub atom, form, operand, major)(l)`` of the atom tile of
    repetition ``group * j + i``, which for warp ``w`` starts where the tiled MMA's (thread,
    value) layout puts value ``r * atom values`` of thread ``32 w``.  Access ``j``'s registers
    are ``group * per_atom`` consecutive fragment registers."""
    return _ldsm_partition(atom, mma, operand, major, (shape[0], shape[1]),
                           (tile[0], tile[1]))


@functools.lru_cache(maxsize=256)  # pure; a K loop asks it per K step of every kernel build
def _ldsm_partition(atom: MatrixCopy, mma: TiledMma, operand: str, major: str,
                    shape: tuple[int, int], tile: tuple[int, int]) -> Accesses:
    form = mma.atom
    d0, d1 = _DIMS[operand]
    am, ak = form.shape_mnk[d0], form.shape_mnk[d1]  # type: ignore[attr-defined]
    tm, tk = operand_tile(mma, operand)
    sub, group = ldsm_group(atom, form, operand)
    rows = row_addresses(sub, form, operand, major)  # type: ignore[arg-type]
    contiguous_k = major == "K"
    atom_tv = form.tv_layout(operand)  # type: ignore[attr-defined]
    tiled_tv = mma.tv_layout(operand)
    nval_atom = size(atom_tv[1])
    reps = size(tiled_tv[1]) // nval_atom
    first_dim = size(tiled_tv[1][1][0]) if tiled_tv[1].rank > 1 else reps
    if first_dim % group:
        raise PartitionError(f"{atom.name} loads {group} repetitions of operand {operand} at "
                             f"once; the tile has {first_dim} along its first dimension")
    a0 = atom_tv(0, 0)
    a0_rc = (a0 % am, a0 // am)
    lanes = sub.address_lanes

    def lane_rc(lane: int) -> tuple[int, int]:
        o = rows(lane % lanes)
        return divmod(o, ak) if contiguous_k else (o % am, o // am)

    def fn(t: int, j: int, e: int) -> int:
        lane = t % WARP
        rep = j * group + lane // lanes % group
        x = _tv(tiled_tv, WARP * (t // WARP), rep * nval_atom)
        r0, c0 = x % tm - a0_rc[0], x // tm - a0_rc[1]
        lr, lc = lane_rc(lane)
        r, c = r0 + lr, c0 + lc
        if contiguous_k:
            c += e
        else:
            r += e
        return _tile_index(shape, (tm, tk), tile, r + tm * c)

    return _accesses(mma.threads, reps // group, atom.cols, fn, f"{atom.name} rows")


def retile(regs: Sequence[object], groups: int) -> list[list[object]]:
    """A fragment's registers cut into ``groups`` equal consecutive groups, one per access
    (CuTe's ``retile``: the same registers seen with another atom's value grouping)."""
    n = len(regs)
    if groups < 1 or n % groups:
        raise PartitionError(f"{n} registers do not split into {groups} equal accesses")
    per = n // groups
    return [list(regs[i * per:(i + 1) * per]) for i in range(groups)]
