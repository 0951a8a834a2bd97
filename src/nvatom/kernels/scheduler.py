"""Tile schedulers as objects: which tiles each CTA of a persistent kernel visits, and in
what order, as a pure-Python model (:meth:`tiles`, tested on the CPU: every tile exactly
once) and as PTX (:meth:`emit_tile`, through :mod:`nvatom.ptx.scheduler_emit`, the same
arithmetic the IR's ``cutlass.tile_scheduler.*`` lowers to).

A persistent launch runs ``grid`` CTAs (about one per SM); CTA ``b`` visits the linear tiles
``b, b + grid, b + 2 grid, ...`` (CUTLASS's ``PersistentTileScheduler``); the scheduler's
order maps a linear index to tile coordinates:

* :class:`StaticPersistent`: an M x N tile grid in grouped-M raster order (``group`` M blocks
  per sweep of N), so CTAs running together share panels of A and B in L2;
* :class:`Grouped`: a grouped GEMM (MoE), group ``g`` owning ``tiles_m[g] x tiles_n`` tiles
  after those of the groups before it; a tile is found by its group's prefix sum;
* :class:`CausalLongestFirst`: causal attention, whose query block ``m`` reads ``m + 1`` key
  blocks: the largest M blocks first (heads fastest), so the grid's last wave holds the
  shortest tiles instead of the longest.

PTX ISA "Special Registers" (``%ctaid.x``, ``%nctaid.x``), "Integer Arithmetic Instructions".
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from itertools import accumulate

from nvatom.errors import NvatomError
from nvatom.ptx import scheduler_emit as SCH
from nvatom.ptx.builder import Kernel, Reg
from nvatom.ptx.tma_emit import Operand

__all__ = ["CausalLongestFirst", "Grouped", "SchedulerError", "StaticPersistent",
           "cta_tiles", "emit_first_and_step", "visits"]


class SchedulerError(NvatomError, ValueError):
    """A tile scheduler with impossible parameters."""


def cta_tiles(ntiles: int, cta: int, grid: int) -> list[int]:
    """The linear tiles CTA ``cta`` of ``grid`` visits, in order: ``cta + i * grid``."""
    if not 0 <= cta < grid:
        raise SchedulerError(f"CTA {cta} outside a grid of {grid}")
    return list(range(cta, ntiles, grid))


def emit_first_and_step(k: Kernel) -> tuple[Reg, Reg]:
    """``%ctaid.x`` and ``%nctaid.x``: the CTA's first linear tile and the stride."""
    first, step = k.reg("u32"), k.reg("u32")
    k.ins("mov.u32", first, "%ctaid.x")
    k.ins("mov.u32", step, "%nctaid.x")
    return first, step


@dataclasses.dataclass(frozen=True)
class StaticPersistent:
    """``tiles_m x tiles_n`` tiles in grouped-M raster order: ``group`` M blocks per sweep
    of N, M fastest within a group (``group`` 1: N fastest, one M block at a time)."""

    tiles_m: int
    tiles_n: int
    group: int = 8

    def __post_init__(self) -> None:
        if self.tiles_m < 1 or self.tiles_n < 1 or self.group < 1:
            raise SchedulerError(f"a {self.tiles_m} x {self.tiles_n} tile grid in groups of "
                                 f"{self.group} M blocks: all must be positive")

    @property
    def ntiles(self) -> int:
        return self.tiles_m * self.tiles_n

    def coord(self, t: int) -> tuple[int, int]:
        """``(m_block, n_block)`` of linear tile ``t`` (the model of :meth:`emit_tile`)."""
        per_group = self.group * self.tiles_n
        first = t // per_group * self.group
        gsize = min(self.tiles_m - first, self.group)
        within = t % per_group
        return within % gsize + first, within // gsize

    def tiles(self, cta: int, grid: int) -> list[tuple[int, int]]:
        """The tiles CTA ``cta`` of ``grid`` visits, in order."""
        return [self.coord(t) for t in cta_tiles(self.ntiles, cta, grid)]

    def emit_tile(self, k: Kernel, t: Operand, tiles_m: Operand | None = None,
                  tiles_n: Operand | None = None) -> tuple[Reg, Reg]:
        """PTX: ``(m_block, n_block)`` of linear tile ``t`` (tile counts as registers for a
        run-time problem size, else this scheduler's)."""
        return SCH.grouped_m_raster(k, t, self.tiles_m if tiles_m is None else tiles_m,
                                    self.tiles_n if tiles_n is None else tiles_n, self.group)


@dataclasses.dataclass(frozen=True)
class Grouped:
    """A grouped GEMM: group ``g`` has ``tiles_m[g]`` M blocks (0 for an empty group) and
    every group ``tiles_n`` N blocks; linear tiles are the groups' tiles one group after the
    other, M fastest within a group."""

    tiles_m: tuple[int, ...]
    tiles_n: int

    def __post_init__(self) -> None:
        if not self.tiles_m or any(m < 0 for m in self.tiles_m) or self.tiles_n < 1:
            raise SchedulerError(f"grouped tiles {self.tiles_m} x {self.tiles_n}: at least "
                                 "one group, no negative count, N blocks >= 1")

    @property
    def starts(self) -> tuple[int, ...]:
        """Each group's first linear tile, and the total last (the ``groups + 1`` prefix
        sums the kernel reads)."""
        return tuple(accumulate((m * self.tiles_n for m in self.tiles_m), initial=0))

    @property
    def ntiles(self) -> int:
        return self.starts[-1]

    def coord(self, t: int) -> tuple[int, int, int]:
        """``(group, m_block, n_block)`` of linear tile ``t``."""
        if not 0 <= t < self.ntiles:
            raise SchedulerError(f"tile {t} outside the {self.ntiles} tiles of the groups")
        s = self.starts
        g = next(i for i in range(len(self.tiles_m)) if t < s[i + 1])
        local = t - s[g]
        return g, local % self.tiles_m[g], local // self.tiles_m[g]

    def tiles(self, cta: int, grid: int) -> list[tuple[int, int, int]]:
        return [self.coord(t) for t in cta_tiles(self.ntiles, cta, grid)]

    def emit_tile(self, k: Kernel, t: Operand, starts: Operand, groups: Operand | None = None,
                  tiles_n: Operand | None = None) -> tuple[Reg, Reg, Reg]:
        """PTX: ``(group, m_block, n_block)``; ``starts`` is the global address of the
        :attr:`starts` table (u32)."""
        return SCH.grouped_lookup(k, t, starts,
                                  len(self.tiles_m) if groups is None else groups,
                                  self.tiles_n if tiles_n is None else tiles_n)


@dataclasses.dataclass(frozen=True)
class CausalLongestFirst:
    """Causal attention tiles ``(head, m_block)`` (``heads`` = batch x heads), longest
    first: query block ``m`` has ``m + 1`` key blocks of work."""

    m_blocks: int
    heads: int

    def __post_init__(self) -> None:
        if self.m_blocks < 1 or self.heads < 1:
            raise SchedulerError(f"{self.m_blocks} M blocks x {self.heads} heads: both must "
                                 "be positive")

    @property
    def ntiles(self) -> int:
        return self.m_blocks * self.heads

    def coord(self, t: int) -> tuple[int, int]:
        return t % self.heads, self.m_blocks - 1 - t // self.heads

    @staticmethod
    def work(coord: tuple[int, int]) -> int:
        """Key blocks a tile reads under the causal mask."""
        return coord[1] + 1

    def tiles(self, cta: int, grid: int) -> list[tuple[int, int]]:
        return [self.coord(t) for t in cta_tiles(self.ntiles, cta, grid)]

    def emit_tile(self, k: Kernel, t: Operand, m_blocks: Operand | None = None,
                  heads: Operand | None = None) -> tuple[Reg, Reg]:
        return SCH.causal_longest_first(k, t, self.m_blocks if m_blocks is None else m_blocks,
                                        self.heads if heads is None else heads)


def visits(sched: StaticPersistent | Grouped | CausalLongestFirst,
           grid: int) -> list[Sequence[object]]:
    """Every CTA's tile sequence (the whole schedule of a grid)."""
    return [sched.tiles(b, grid) for b in range(grid)]
