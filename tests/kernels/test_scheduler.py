"""Tile schedulers (nvatom.kernels.scheduler): the pure-Python models visit every tile exactly
once for any grid, the raster groups M blocks, the causal order is longest first; the PTX of
each order assembles, and the emitted arithmetic, run on the CPU instruction by instruction,
gives the model's coordinates."""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable

import pytest

from nvatom.kernels.scheduler import (
    CausalLongestFirst,
    Grouped,
    SchedulerError,
    StaticPersistent,
    cta_tiles,
    visits,
)
from nvatom.ptx.builder import Kernel, Module
from nvatom.runtime.ptxas import assemble

SCHEDS = [StaticPersistent(13, 7, 8), StaticPersistent(1, 1), StaticPersistent(16, 3, 4),
          StaticPersistent(5, 9, 1), Grouped((3, 0, 5, 1), 4), Grouped((0, 2), 3),
          CausalLongestFirst(9, 6), CausalLongestFirst(1, 1)]


@pytest.mark.parametrize("sched", SCHEDS, ids=repr)
@pytest.mark.parametrize("grid", [1, 3, 8, 132, 1000])
def test_every_tile_exactly_once(sched: object, grid: int) -> None:
    seen = [c for seq in visits(sched, grid) for c in seq]  # type: ignore[arg-type]
    assert len(seen) == sched.ntiles == len(set(seen))  # type: ignore[attr-defined]
    every = {sched.coord(t) for t in range(sched.ntiles)}  # type: ignore[attr-defined]
    assert set(seen) == every


def test_static_persistent_covers_the_grid() -> None:
    s = StaticPersistent(13, 7, 8)
    assert {s.coord(t) for t in range(s.ntiles)} == set(itertools.product(range(13), range(7)))
    # the first 8 x 7 tiles stay in M blocks 0..7 (a group), M fastest
    assert [s.coord(t) for t in range(3)] == [(0, 0), (1, 0), (2, 0)]
    assert {m for m, _ in (s.coord(t) for t in range(56))} == set(range(8))
    assert s.coord(56) == (8, 0)  # the last group has 5 M blocks
    assert s.coord(61) == (8, 1)


def test_cta_sequence_is_strided() -> None:
    assert cta_tiles(10, 2, 4) == [2, 6]
    with pytest.raises(SchedulerError):
        cta_tiles(10, 4, 4)


def test_grouped_lookup_model() -> None:
    g = Grouped((3, 0, 2), 2)
    assert g.starts == (0, 6, 6, 10)
    assert [g.coord(t) for t in range(g.ntiles)] == [
        (0, 0, 0), (0, 1, 0), (0, 2, 0), (0, 0, 1), (0, 1, 1), (0, 2, 1),
        (2, 0, 0), (2, 1, 0), (2, 0, 1), (2, 1, 1)]
    with pytest.raises(SchedulerError):
        g.coord(10)


@pytest.mark.parametrize("grid", [1, 4, 7, 54])
def test_causal_longest_first(grid: int) -> None:
    s = CausalLongestFirst(9, 6)
    work = [s.work(s.coord(t)) for t in range(s.ntiles)]
    assert work == sorted(work, reverse=True)
    for seq in visits(s, grid):  # each CTA too starts long and ends short
        w = [s.work(c) for c in seq]
        assert w == sorted(w, reverse=True)
    # the CTAs' first tiles are the longest of all
    assert {s.work(seq[0]) for seq in visits(s, min(grid, 6))} == {9}


def test_bad_parameters() -> None:
    with pytest.raises(SchedulerError):
        StaticPersistent(0, 3)
    with pytest.raises(SchedulerError):
        Grouped((), 3)
    with pytest.raises(SchedulerError):
        CausalLongestFirst(3, 0)


# ------------------------------------------------------------------ PTX
_ALU: dict[str, Callable[[list[int]], int]] = {
    "mov": lambda x: x[0], "add": lambda x: x[0] + x[1], "sub": lambda x: x[0] - x[1],
    "mul": lambda x: x[0] * x[1], "div": lambda x: x[0] // x[1],
    "rem": lambda x: x[0] % x[1], "min": min, "mad": lambda x: x[0] * x[1] + x[2]}


def _run_u32(body: list[str], regs: dict[str, int], mem: dict[int, int]) -> dict[str, int]:
    """Interpret the straight-line and looping u32 PTX the schedulers emit (add, sub, mul.lo,
    div, rem, min, mad.lo, mad.wide, ld.global.nc, setp.lt, bra): enough to check them."""
    lines = [ln.strip().rstrip(";") for ln in body
             if ln.strip() and not ln.strip().startswith("//")]
    labels = {ln[:-1]: i for i, ln in enumerate(lines) if ln.endswith(":")}
    pc = 0

    def val(x: str) -> int:
        return regs[x] if x.startswith("%") else int(x)

    while pc < len(lines):
        ln = lines[pc]
        pc += 1
        if ln.endswith(":") or ln.startswith(".") or ln == "ret":
            continue
        m = re.match(r"(@!?%\w+\s+)?([\w.:]+)\s*(.*)", ln)
        assert m
        guard, op, args = m.groups()
        if guard:
            g = guard.strip()
            if bool(regs[g.lstrip("@!")]) == g.startswith("@!"):
                continue
        a = [x.strip() for x in args.split(",")] if args else []
        base = op.split(".")[0]
        if base == "bra":
            pc = labels[a[0]]
        elif base == "ld":
            addr = re.match(r"\[(%\w+)(?:\+(\d+))?\]", a[1])
            assert addr
            regs[a[0]] = mem[regs[addr.group(1)] + int(addr.group(2) or 0)]
        elif base == "setp":
            lt = val(a[1]) < val(a[2])
            regs[a[0]] = int(lt if ".lt." in op else not lt)
        else:
            regs[a[0]] = _ALU[base]([val(v) for v in a[1:]]) & (2**64 - 1)
    return regs


def _body(k: Kernel) -> list[str]:
    text = k.emit()
    return [ln for ln in text[text.index("{") + 1:text.rindex("}")].splitlines()
            if "ld.param" not in ln and ".reg" not in ln]


@pytest.mark.parametrize("sched", [StaticPersistent(13, 7, 8), StaticPersistent(16, 3, 4),
                                   CausalLongestFirst(9, 6)], ids=repr)
def test_emitted_arithmetic_matches_the_model(sched: StaticPersistent | CausalLongestFirst
                                              ) -> None:
    k = Module("sm_90a").kernel("sched")
    t = k.ld_param(k.param("t", "u32"))
    out = sched.emit_tile(k, t)
    lines = _body(k)
    for tile in range(sched.ntiles):
        regs = _run_u32(lines, {str(t): tile}, {})
        assert tuple(regs[str(r)] for r in out) == sched.coord(tile)


def test_emitted_grouped_lookup_matches_the_model() -> None:
    g = Grouped((3, 0, 2, 4), 2)
    k = Module("sm_90a").kernel("sched")
    t = k.ld_param(k.param("t", "u32"))
    starts = k.ld_param(k.param("starts", "u64"))
    out = g.emit_tile(k, t, starts)
    lines = _body(k)
    mem = {1000 + 4 * i: s for i, s in enumerate(g.starts)}
    for tile in range(g.ntiles):
        regs = _run_u32(lines, {str(t): tile, str(starts): 1000}, mem)
        assert tuple(regs[str(r)] for r in out) == g.coord(tile)


def test_scheduler_ptx_assembles() -> None:
    mod = Module("sm_90a")
    k = mod.kernel("sched")
    t = k.ld_param(k.param("t", "u32"))
    starts = k.ld_param(k.param("starts", "u64"))
    out = k.ld_param(k.param("out", "u64"))
    regs = [*StaticPersistent(13, 7).emit_tile(k, t),
            *Grouped((3, 2), 2).emit_tile(k, t, starts), *CausalLongestFirst(9, 6).emit_tile(k, t)]
    for i, r in enumerate(regs):
        k.ins("st.global.u32", f"[{out}+{4 * i}]", r)
    assemble(mod.emit(), "sm_90a").kernel("sched")
