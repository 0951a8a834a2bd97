"""The SM90 GEMM's tile scheduler: a warpgroup's persistent tile loop (tile = ctaid + i *
nctaid), a tile's (M block, N block) in the grouped raster order, and for the grouped (MoE)
kernel the tile -> group lookup that points the warpgroup's tensor maps at its group's
(PTX ISA "tensormap", "fence.proxy.tensormap")."""

from __future__ import annotations

import dataclasses

from nvatom.kernels.sm90.emit import u32 as _u32
from nvatom.kernels.sm90.group_table import ENTRY_BYTES
from nvatom.kernels.sm90.skeleton import _Build
from nvatom.ptx import tma_emit as TE
from nvatom.ptx.builder import Reg

__all__ = [
    "TileScheduler",
]


@dataclasses.dataclass
class TileScheduler:
    """One warpgroup's walk over the CTA's tiles (the producer's, a consumer's): its first
    tile and stride, and what it keeps across tiles: the tile's group and, for the grouped
    kernel's "resume" schedules, where the walk over the groups stands, the tensor maps the
    warpgroup issues TMA with and (``"late"``) whether D's map still needs its acquire."""

    b: _Build
    first_tile: Reg  # this warpgroup's first tile
    step: Reg  # between its tiles
    # the maps it issues TMA with (0 A, 1 B, 2 D)
    maps_used: tuple[int, ...] = (0, 1, 2)
    # grouped, "resume" family: (group, its first tile, its end tile, its M blocks) across
    # tiles
    gstate: tuple[Reg, Reg, Reg, Reg] | None = None
    gpend: Reg | None = None  # "late": D's map changed and is not yet acquired
    group: Reg | None = None  # grouped: the current tile's group (set by tile_coords)

    def tile_loop(self, name: str, phase0: int | Reg,
                  maps_used: tuple[int, ...] = (0, 1, 2),
                  stage0: int | Reg = 0) -> tuple[Reg, Reg, Reg, str, Reg, Reg]:
        """Open a warpgroup's persistent tile loop: a ring position (stage 0, mbarrier phase
        ``phase0``; or ``stage0`` / ``phase0`` given), the tile index (from ``first_tile``),
        the loop label ``name`` and the exit
        to ``done`` past the last tile.  Returns (stage, phase, tile, label, m block, n block);
        the loop ends with ``tile += step`` and a branch to the label."""
        k = self.b.k
        stage = _u32(k, "mov.u32", stage0)
        phase = _u32(k, "mov.u32", phase0)
        tile = _u32(k, "mov.u32", self.first_tile)
        self.maps_used = maps_used
        self.gpend = None  # per warpgroup path: the consumer's is not the producer's
        if self.b.groups is not None and self.b.cfg.group_sched != "scan":
            # group -1 ending at tile 0: the first tile's lookup starts the walk at group 0
            self.gstate = (_u32(k, "mov.u32", 0xFFFFFFFF), _u32(k, "mov.u32", 0),
                           _u32(k, "mov.u32", 0), _u32(k, "mov.u32", 0))
            if self.b.cfg.group_sched == "late" and maps_used == (2,):
                self.gpend = k.reg("pred")
                k.ins("setp.ne.u32", self.gpend, 0, 0)
        top = k.fresh_label(name)
        k.label(top)
        past = k.reg("pred")
        k.ins("setp.ge.u32", past, tile, self.b.ntiles)
        k.bra(self.b.done, past)
        return stage, phase, tile, top, *self.tile_coords(tile)

    def tile_coords(self, tile: Reg) -> tuple[Reg, Reg]:
        """(m block, n block) of a linear tile index: grouped raster (``raster_group`` M
        blocks per N sweep); non-persistent launches use the same order."""
        k, g = self.b.k, self.b.cfg.raster_group
        tiles_m = self.b.tiles_m
        if self.b.groups is not None:
            tile, tiles_m = self._group_of(tile)
        per_group = _u32(k, "mul.lo.u32", self.b.tiles_n, g)
        gid = _u32(k, "div.u32", tile, per_group)
        first = _u32(k, "mul.lo.u32", gid, g)
        gsize = _u32(k, "sub.u32", tiles_m, first)
        k.ins("min.u32", gsize, gsize, g)
        within = _u32(k, "rem.u32", tile, per_group)
        mb = _u32(k, "rem.u32", within, gsize)
        k.ins("add.u32", mb, mb, first)
        nb = _u32(k, "div.u32", within, gsize)
        return mb, nb

    def _group_of(self, tile: Reg) -> tuple[Reg, Reg]:
        """Grouped GEMM: the group of linear tile ``tile`` (the first g with
        ``tile < tile_ends[g]``: empty groups own no tiles and are stepped over), its tensor
        maps made this thread's ``tmaps`` (``tmaps + 384 g`` + 0 / 128 / 256, acquired for
        the tensormap proxy), and (the tile's index within the group, the group's M blocks)."""
        k = self.b.k
        assert self.b.groups is not None
        if self.gstate is not None:
            return self._group_resume(tile)
        maps, ends, _ = self.b.groups
        g = _u32(k, "mov.u32", 0)
        start = _u32(k, "mov.u32", 0)
        end = k.reg("u32")
        scan = k.fresh_label("g_scan")
        found = k.fresh_label("g_found")
        k.label(scan)
        addr = k.reg("u64")
        k.ins("mad.wide.u32", addr, g, 4, ends)
        k.ins("ld.global.nc.u32", end, f"[{addr}]")
        inside = k.reg("pred")
        k.ins("setp.lt.u32", inside, tile, end)
        k.bra(found, inside)
        k.ins("mov.u32", start, end)
        k.ins("add.u32", g, g, 1)
        k.bra(scan)
        k.label(found)
        self.group = g
        local = _u32(k, "sub.u32", tile, start)
        tiles_m = _u32(k, "sub.u32", end, start)
        k.ins("div.u32", tiles_m, tiles_m, self.b.tiles_n)
        base = k.reg("u64")
        k.ins("mad.wide.u32", base, g, ENTRY_BYTES, maps)
        for i, t in enumerate(self.b.tmaps):
            k.ins("add.s64", t, base, i * TE.TENSORMAP_BYTES)
            TE.fence_tensormap_acquire(k, t)
        return local, tiles_m

    def _group_resume(self, tile: Reg) -> tuple[Reg, Reg]:
        """:meth:`_group_of` for the "resume" schedules: a CTA's tiles ascend, so the group
        of the previous tile is kept and the walk over ``tile_ends`` resumes from it; only
        when the group changes are the maps this warpgroup uses pointed at and acquired
        (and with "prefetch" the next group's acquired and prefetched)."""
        k, sched = self.b.k, self.b.cfg.group_sched
        assert self.b.groups is not None and self.gstate is not None
        maps, ends, G = self.b.groups
        g, start, end, tiles_m = self.gstate
        self.group = g
        same = k.fresh_label("g_same")
        inside = k.reg("pred")
        k.ins("setp.lt.u32", inside, tile, end)
        k.bra(same, inside)
        walk = k.fresh_label("g_walk")
        k.label(walk)
        k.ins("mov.u32", start, end)
        k.ins("add.u32", g, g, 1)
        addr = k.reg("u64")
        k.ins("mad.wide.u32", addr, g, 4, ends)
        k.ins("ld.global.nc.u32", end, f"[{addr}]")
        k.ins("setp.lt.u32", inside, tile, end)
        k.bra(walk, f"!{inside}")
        k.ins("sub.u32", tiles_m, end, start)
        k.ins("div.u32", tiles_m, tiles_m, self.b.tiles_n)
        base = k.reg("u64")
        k.ins("mad.wide.u32", base, g, ENTRY_BYTES, maps)
        for i in self.maps_used:
            k.ins("add.s64", self.b.tmaps[i], base, i * TE.TENSORMAP_BYTES)
            if self.gpend is not None:  # acquired in the main loop (late_acquire)
                k.ins("setp.eq.u32", self.gpend, 0, 0)
            elif sched != "nofence":
                TE.fence_tensormap_acquire(k, self.b.tmaps[i])
        if sched == "prefetch":
            nxt = _u32(k, "add.u32", g, 1)
            last = k.reg("pred")
            k.ins("setp.ge.u32", last, nxt, G)
            k.bra(same, last)
            na = k.reg("u64")
            k.ins("mad.wide.u32", na, nxt, 4, ends)
            nend = k.reg("u32")
            k.ins("ld.global.nc.u32", nend, f"[{na}]")
            k.ins("setp.eq.u32", last, nend, end)  # an empty next group: zero maps
            k.bra(same, last)
            for i in self.maps_used:
                t = k.reg("u64")
                k.ins("add.s64", t, base, ENTRY_BYTES + i * TE.TENSORMAP_BYTES)
                TE.fence_tensormap_acquire(k, t)
                TE.prefetch_tensormap(k, t)
        k.label(same)
        local = _u32(k, "sub.u32", tile, start)
        return local, tiles_m

    def late_acquire(self, is_lead: Reg) -> None:
        """"late": in the consumer's main loop, the lead thread (the one that issues the TMA
        stores) acquires D's map if the group changed; nothing for other schedules."""
        if self.gpend is None:
            return
        k = self.b.k
        skip = k.fresh_label("g_acq_done")
        p = k.reg("pred")
        k.ins("and.pred", p, self.gpend, is_lead)
        k.bra(skip, f"!{p}")
        TE.fence_tensormap_acquire(k, self.b.tmaps[2])
        k.label(skip)
        k.ins("setp.ne.u32", self.gpend, 0, 0)
