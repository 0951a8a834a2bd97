"""The grouped GEMM's group table, built on the GPU from device offsets (MoE without a host
synchronisation; CUDA-graph capturable).

The grouped SM90 kernel reads one buffer (:class:`nvatom.gemm_providers.GroupedPlan`): per
group three 128-byte tensor maps (A and D at the group's first row with the group's M, B at
its matrix), then ``tile_ends`` (G u32: cumulative output tiles) and, for FP8, ``row_ends``
(G u32: cumulative row ends, which index the stacked rows' scales).  With host offsets the
host writes it.  With device offsets this kernel does, from

* **contiguous** groups (``torch._grouped_mm``'s ``offs``): ``offs[g]`` the cumulative row
  end of group g over the stacked rows of A and D;
* **masked** groups (DeepGEMM's decode layout): A is ``(G, M_max, K)``, D ``(G, M_max, N)``,
  ``offs[g]`` the count of valid rows of group g (rows past it are neither read nor written).
  The FP8 kernel indexes the scales of A's rows by ``row_ends``: group g's first scale row is
  ``row_ends[g - 1]`` and ``row_ends[g] - row_ends[g - 1]`` bounds its scale rows, so the
  masked table writes ``row_ends[g] = (g + 1) M_max``: the scales of ``(G, M_max)`` rows,
  each group's whole M_max (rows past the count are computed in a partial tile, but never
  stored: D's map ends at the count).

Bad values cannot be refused on the host (it never sees them); they get a defined outcome,
and a flag: each value is clamped into ``[0, rows]`` (contiguous: also raised to the running
maximum, so the ends never decrease: a decreasing end makes an empty group), and when any
value was changed, ``status[0] |= 1`` (``atom.global.or``) where a status word was given.
The GEMM then computes exactly the clamped grouping; nothing is read or written outside the
tensors.

One CTA of :data:`THREADS` threads walks the groups :data:`THREADS` at a time; the running
maximum and the tile counts are block-wide inclusive scans in shared memory (Hillis-Steele:
log2(THREADS) steps of ``bar.sync``), carried from chunk to chunk.  Each thread then writes its
group's entries: the three maps are copied from by-value template parameters (the maps of the
whole tensors, encoded on the host by the driver) and edited in place with
``tensormap.replace.tile.global_address`` / ``.global_dim`` (PTX ISA "tensormap.replace";
sm_90a), then released to the tensormap proxy with ``fence.proxy.tensormap::generic.release
.gpu``; the GEMM acquires each group's maps before its first TMA through them (PTX ISA
"Memory Consistency Model", "fence.proxy.tensormap").  An empty group's maps get M = 1 (a
tensor map's extent is at least 1) and are never read: the group owns no tiles.
"""

from __future__ import annotations

import dataclasses

from nvatom.atoms import tma as TA
from nvatom.errors import NvatomError
from nvatom.kernels.sm90.emit import u32 as _u32
from nvatom.ptx import tma_emit as TE
from nvatom.ptx.builder import Kernel, Module, Param, Reg

__all__ = ["PARAMS", "THREADS", "GroupTableError", "GroupTableSpec", "build_group_table",
           "reference_table"]

THREADS = 256
MAP_BYTES = TE.TENSORMAP_BYTES
ENTRY_BYTES = 3 * MAP_BYTES  # A, B, D of one group

#: The kernel's scalar parameters, in order, then the three by-value template maps
#: (``tA``, ``tB``, ``tD``: ``b8[128]`` aligned to 128).  ``offs``: G int32 (ends or counts);
#: ``rows``: total M (contiguous) or M_max (masked); ``a_row`` / ``d_row``: bytes per row;
#: ``a_group`` / ``d_group``: bytes per group (masked; 0 when contiguous); ``b_step``: bytes
#: per B matrix; ``table``: the kernel buffer; ``status``: a u32 word or 0.
PARAMS = (("offs", "u64"), ("G", "u32"), ("rows", "u32"), ("tiles_n", "u32"),
          ("a", "u64"), ("a_row", "u64"), ("a_group", "u64"), ("b", "u64"), ("b_step", "u64"),
          ("d", "u64"), ("d_row", "u64"), ("d_group", "u64"), ("table", "u64"),
          ("status", "u64"))


class GroupTableError(NvatomError):
    """A group-table kernel that cannot be built (axes, tile size)."""


@dataclasses.dataclass(frozen=True)
class GroupTableSpec:
    """One table kernel: ``masked`` (counts per group) or contiguous (cumulative ends);
    ``block_m`` the GEMM's tile M; ``a_m_axes`` / ``d_m_axes`` the dimensions of A's and D's
    tensor maps whose extent is the group's M (from the maps' symbolic form); ``row_ends``:
    write the FP8 kernel's row ends after ``tile_ends``."""

    masked: bool
    block_m: int
    a_m_axes: tuple[int, ...]
    d_m_axes: tuple[int, ...]
    row_ends: bool = False
    rank: int = 5  # the maps' dimensions that tensormap.replace may name (0 .. rank - 1)

    def __post_init__(self) -> None:
        if not 1 <= self.block_m <= 256:
            raise GroupTableError(f"block_m = {self.block_m}: a GEMM tile has 1..256 rows")
        for name, axes in (("A", self.a_m_axes), ("D", self.d_m_axes)):
            if not axes or any(not 0 <= x < self.rank for x in axes):
                raise GroupTableError(f"{name}'s map has M at dimensions {axes}: at least one, "
                                      f"each in 0..{self.rank - 1}")

    @property
    def name(self) -> str:
        ax = "_".join("".join(str(x) for x in axes) for axes in (self.a_m_axes, self.d_m_axes))
        return (f"nvatom_group_table_{'masked' if self.masked else 'contig'}_m{self.block_m}"
                f"_ax{ax}{'_rows' if self.row_ends else ''}")


def reference_table(offs: list[int], rows: int, masked: bool, block_m: int, tiles_n: int
                    ) -> tuple[list[tuple[int, int]], list[int], bool]:
    """What the kernel computes, in Python: per group (first row, M) after clamping, the
    cumulative tile counts and whether any value was clamped (tests; the host path)."""
    groups, tile_ends, bad, run, tiles = [], [], False, 0, 0
    for g, raw in enumerate(offs):
        v = min(max(raw, 0), rows)
        bad |= v != raw
        if masked:
            start, m = g * rows, v
        else:
            bad |= raw < run
            start, m = run, max(v, run) - run
            run = max(v, run)
        groups.append((start, m))
        tiles += -(-m // block_m) * tiles_n
        tile_ends.append(tiles)
    return groups, tile_ends, bad


def _scan(k: Kernel, s: str, tid: Reg, x: Reg, op: str) -> Reg:
    """Block-wide inclusive scan of ``x`` (u32) with ``op`` (``max.u32`` / ``add.u32``) over
    the CTA's threads, through the shared array ``s`` (Hillis-Steele); returns the result."""
    slot = _u32(k, "shl.b32", tid, 2)
    base = k.reg("u32")
    k.ins("mov.u32", base, s)
    k.ins("add.u32", slot, slot, base)
    k.ins("st.shared.u32", f"[{slot}]", x)
    k.ins("bar.sync", 0)
    off = 1
    while off < THREADS:
        y, has = _u32(k, "mov.u32", 0), k.reg("pred")
        k.ins("setp.ge.u32", has, tid, off)
        k.ins("ld.shared.u32", y, f"[{slot}+{-4 * off}]", pred=str(has))
        k.ins("bar.sync", 0)
        k.ins(op, x, x, y)
        k.ins("st.shared.u32", f"[{slot}]", x)
        k.ins("bar.sync", 0)
        off *= 2
    return x


def build_group_table(spec: GroupTableSpec, target: str = "sm_90a") -> Module:
    """The module of ``spec``'s table kernel (:attr:`GroupTableSpec.name`); launch one CTA of
    :data:`THREADS` threads with :data:`PARAMS` then the templates ``tA``, ``tB``, ``tD``."""
    mod = Module(target, features=["tensormap.replace"])
    k = mod.kernel(spec.name)
    k.reqntid = (THREADS, 1, 1)
    p = {name: k.ld_param(k.param(name, ty)) for name, ty in PARAMS}
    tmpl = [k.byte_param(f"t{x}", MAP_BYTES, TE.TENSORMAP_ALIGN) for x in "ABD"]
    s_scan = k.shared("scan", 4 * THREADS, align=16)
    tid = _u32(k, "mov.u32", "%tid.x")
    has_status = k.reg("pred")
    k.ins("setp.ne.u64", has_status, p["status"], 0)
    for name in ("offs", "table", "status"):
        k.ins("cvta.to.global.u64", p[name], p[name])
    carry_end, carry_tiles, c0 = (_u32(k, "mov.u32", 0) for _ in range(3))
    top, done = k.fresh_label("chunk"), k.fresh_label("done")
    k.label(top)
    more = k.reg("pred")
    k.ins("setp.lt.u32", more, c0, p["G"])
    k.bra(done, f"!{more}", uni=True)
    g = _u32(k, "add.u32", c0, tid)
    valid, bad = k.reg("pred"), k.reg("pred")
    k.ins("setp.lt.u32", valid, g, p["G"])
    raw = k.reg("s32")
    k.ins("mov.s32", raw, 0)
    addr = k.reg("u64")
    k.ins("mad.wide.u32", addr, g, 4, p["offs"])
    k.ins("ld.global.nc.s32", raw, f"[{addr}]", pred=str(valid))
    v = k.reg("s32")
    k.ins("max.s32", v, raw, 0)
    k.ins("min.s32", v, v, p["rows"])
    k.ins("setp.ne.s32", bad, v, raw)
    if spec.masked:
        start = _u32(k, "mov.u32", 0)  # rows of the group's own (M_max, K) matrix
        m = _u32(k, "mov.u32", v)
    else:  # ends: the running maximum (never decreasing), carried across chunks
        end = _scan(k, s_scan, tid, _u32(k, "max.u32", v, carry_end), "max.u32")
        start = _u32(k, "mov.u32", carry_end)
        first = k.reg("pred")
        k.ins("setp.eq.u32", first, tid, 0)
        prev = _u32(k, "shl.b32", tid, 2)
        base = _u32(k, "mov.u32", s_scan)
        k.ins("add.u32", prev, prev, base)
        k.ins("ld.shared.u32", start, f"[{prev}+-4]", pred=f"!{first}")
        lower = k.reg("pred")  # below an earlier end: clamped up, flagged
        k.ins("setp.lt.s32", lower, raw, start)
        k.ins("or.pred", bad, bad, lower)
        m = _u32(k, "sub.u32", end, start)
        k.ins("ld.shared.u32", carry_end, f"[{s_scan}+{4 * (THREADS - 1)}]")
        k.ins("bar.sync", 0)  # every thread has read the carry before the next scan
    tiles = _u32(k, "add.u32", m, spec.block_m - 1)
    k.ins("div.u32", tiles, tiles, spec.block_m)
    k.ins("mul.lo.u32", tiles, tiles, p["tiles_n"])
    k.ins("selp.b32", tiles, tiles, 0, valid)
    tile_end = _scan(k, s_scan, tid, tiles, "add.u32")
    k.ins("add.u32", tile_end, tile_end, carry_tiles)
    skip = k.fresh_label("skip")
    k.bra(skip, f"!{valid}")
    k.ins("and.pred", bad, bad, has_status)
    _write_entry(k, spec, p, tmpl, g, start, m, tile_end, bad)
    k.label(skip)
    last = _u32(k, "mov.u32", 0)
    k.ins("ld.shared.u32", last, f"[{s_scan}+{4 * (THREADS - 1)}]")
    k.ins("add.u32", carry_tiles, carry_tiles, last)
    k.ins("bar.sync", 0)  # the scan array is free for the next chunk
    k.ins("add.u32", c0, c0, THREADS)
    k.bra(top, uni=True)
    k.label(done)
    TE.fence_tensormap_release(k, "gpu")
    return mod


def _write_entry(k: Kernel, spec: GroupTableSpec, p: dict[str, Reg], tmpl: list[Param],
                 g: Reg, start: Reg, m: Reg, tile_end: Reg, bad: Reg) -> None:
    """Group ``g``'s three maps (templates edited at its base addresses and M), its tile end,
    its row end (FP8) and the status flag (``bad``: clamped, and a status word given)."""
    G, table = p["G"], p["table"]
    ends = k.reg("u64")  # tile_ends after the G entries
    k.ins("mul.wide.u32", ends, G, ENTRY_BYTES)
    k.ins("add.s64", ends, ends, table)
    at = k.reg("u64")
    k.ins("mad.wide.u32", at, g, 4, ends)
    k.ins("st.global.u32", f"[{at}]", tile_end)
    if spec.row_ends:  # masked: the group's whole M_max rows (its scales' rows)
        row_end = (_u32(k, "mad.lo.u32", g, p["rows"], p["rows"]) if spec.masked
                   else _u32(k, "add.u32", start, m))
        k.ins("mad.wide.u32", at, G, 4, at)
        k.ins("st.global.u32", f"[{at}]", row_end)
    dim = _u32(k, "max.u32", m, 1)  # an empty group's maps are never read; extents are >= 1
    entry = k.reg("u64")
    k.ins("mad.wide.u32", entry, g, ENTRY_BYTES, table)
    for i, (op, axes) in enumerate((("a", spec.a_m_axes), ("b", ()), ("d", spec.d_m_axes))):
        slot = k.reg("u64")
        k.ins("add.s64", slot, entry, i * MAP_BYTES)
        word = k.reg("b64")
        for off in range(0, MAP_BYTES, 8):
            k.ins("ld.param.b64", word, f"[{tmpl[i].name}+{off}]")
            k.ins("st.global.b64", f"[{slot}+{off}]", word)
        base = k.reg("u64")
        if op == "b":
            step = k.reg("u64")
            k.ins("cvt.u64.u32", step, g)
            k.ins("mul.lo.u64", step, step, p["b_step"])
            k.ins("add.s64", base, p["b"], step)
        else:
            row, grp = k.reg("u64"), k.reg("u64")
            k.ins("cvt.u64.u32", row, start)
            k.ins("mul.lo.u64", row, row, p[f"{op}_row"])
            k.ins("cvt.u64.u32", grp, g)
            k.ins("mul.lo.u64", grp, grp, p[f"{op}_group"])
            k.ins("add.s64", base, p[op], row)
            k.ins("add.s64", base, base, grp)
        TE.tensormap_replace(k, slot, TA.tma_update("global_address", base), space="global")
        for ax in axes:
            TE.tensormap_replace(k, slot, TA.tma_update("global_dim", dim, ax, rank=spec.rank),
                                 space="global")
    old = k.reg("b32")  # bad: a value was clamped and a status word was given
    k.ins("atom.global.or.b32", old, f"[{p['status']}]", 1, pred=str(bad))
