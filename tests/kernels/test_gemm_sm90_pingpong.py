"""The SM90 GEMM's ping-pong consumer schedule on the CPU: configuration rules, assembly
without spills, the PTX's synchronisation, and a walk of the schedule's protocol.

The walk (:func:`_walk`) is a model of the kernel's three actors, written from the mbarrier
and named-barrier semantics of the PTX ISA ("mbarrier.try_wait.parity": a wait with parity
``phi`` passes once the barrier's current phase parity differs from ``phi``; "bar.sync /
bar.arrive": a barrier of ``count`` threads completes when ``count`` arrivals are in), not
from the kernel's own output: the producer fills ring positions in tile order; consumer
``w`` takes the CTA's tiles ``w, w + 2, ...``, starts at ring position ``w * ktiles``,
advances one stage per K block and skips ``ktiles`` after each tile; it waits for its turn
(named barrier) before its main loop except on the CTA's first tile and hands the turn over
after its last WGMMA when the other has a next tile.  Random interleavings (TMA completions
delayed) check that every parity wait passes on the phase of its own ring position, the
main loops' issue windows never overlap, turn arrivals never pile up, nothing is left
pending at the end and nothing deadlocks; without the turn barriers the model finds the
false parity pass that makes them necessary.
"""

from __future__ import annotations

import dataclasses
import random

import pytest

from nvatom.kernels.sm90.config import PINGPONG_BAR, GemmSm90Config, GemmSm90Error
from nvatom.kernels.sm90.gemm import build_gemm_sm90
from nvatom.kernels.sm90.launch import default_config
from nvatom.runtime.ptxas import assemble

PP = dict(schedule="pingpong", block_n=128, stages=6)
CONFIGS = [
    GemmSm90Config(**PP),
    GemmSm90Config(**{**PP, "stages": 5}, b_major="K", out_dtype="f32"),
    GemmSm90Config(in_dtype="e4m3", b_major="K", promote=1, promote_parts=2, promote_temps=2,
                   scale_mode="row", **PP),
    GemmSm90Config(in_dtype="e4m3", b_major="K", **PP),
    GemmSm90Config(grouped=True, **PP),
]


@pytest.mark.parametrize("cfg", CONFIGS, ids=lambda c: c.name)
def test_pingpong_assembles_without_spills(cfg: GemmSm90Config) -> None:
    ptx = build_gemm_sm90(cfg).emit()
    res = assemble(ptx, "sm_90a")
    k = res.kernel()
    assert k.spill_stores == 0 and k.spill_loads == 0 and k.stack_frame == 0
    assert not res.warnings, [str(d) for d in res.warnings]  # no serialised WGMMA either
    assert cfg.name.endswith("_pp")
    # every empty[s] counts one arrival (a stage belongs to one warpgroup's tile); the turn
    # barriers are 256-thread named barriers waited on with bar.sync, handed over with
    # bar.arrive
    inits = [ln for ln in ptx.splitlines() if "mbarrier.init" in ln]
    assert len(inits) == 2 * cfg.stages and all(ln.rstrip().endswith(", 1;") for ln in inits)
    assert sum("bar.arrive" in ln and ln.rstrip().endswith(", 256;")
               for ln in ptx.splitlines()) == 1
    assert sum("bar.sync" in ln and ln.rstrip().endswith(", 256;")
               for ln in ptx.splitlines()) == 1
    assert ptx.count("wgmma.mma_async") >= 2 * cfg.k_steps  # two m64 halves per K step


def test_pingpong_config_rules() -> None:
    # bf16/f16 defaults are ping-pong 128 x 128 (measured, docs/perf.md); the cooperative
    # kernel on request; FP8 defaults cooperative and refuse a ping-pong default
    base = default_config("bf16")
    assert (base.schedule, base.block_n, base.stages) == ("pingpong", 128, 6)
    assert base.name.endswith("_pp")
    for ind, outd, bm in (("f16", "f16", "MN"), ("bf16", "f32", "K"), ("f16", "bf16", "K")):
        assert default_config(ind, outd, bm).pingpong
    coop = default_config("bf16", schedule="cooperative")
    assert coop == GemmSm90Config() and not coop.name.endswith("_pp")
    assert not default_config("e4m3").pingpong
    assert not default_config("e4m3", fast_accum=True).pingpong
    with pytest.raises(GemmSm90Error, match="FP8 defaults are cooperative"):
        default_config("e4m3", schedule="pingpong")
    with pytest.raises(GemmSm90Error, match="schedule 'zz'"):
        default_config("bf16", schedule="zz")
    for bad in (dict(schedule="zigzag"), dict(PP, block_n=256),
                dict(PP, consumers=1), dict(PP, cluster_m=2),
                dict(PP, in_dtype="e4m3", b_major="K", promote=1, promote_parts=1,
                     promote_temps=1, block_n=128, consumer_regs=168, producer_regs=40)):
        with pytest.raises(GemmSm90Error) as e:
            GemmSm90Config(**bad)
        assert "schedule" in str(e.value) or "pingpong" in str(e.value)
    with pytest.raises(GemmSm90Error, match="pingpong"):
        GemmSm90Config(in_dtype="e4m3", b_major="K", scale_mode="block", promote=1,
                       block_n=128, **{k: v for k, v in PP.items() if k != "block_n"})
    assert PINGPONG_BAR >= 3  # 0: the CTA barrier; 1, 2: the epilogue barriers


# ---------------------------------------------------------------------------- the walk


@dataclasses.dataclass
class _Consumer:
    w: int
    tiles: list[int]  # global tile indices, ascending
    stage: int
    phase: int
    ti: int = 0  # index into tiles
    kb: int = 0  # K block within the tile
    state: str = "turn"  # turn -> loop -> tail -> done
    pos: int = 0  # ring position of the current K block (ground truth)
    pending_release: int | None = None


def _walk(ntiles_cta: int, kt: int, stages: int, seed: int, turns: bool = True) -> list[str]:
    """Run the model once; return the violations found (empty: the protocol holds)."""
    rng = random.Random(seed)
    errs: list[str] = []
    full = [0] * stages  # completed phases of full[s]
    empty = [0] * stages
    filled: set[int] = set()
    released: set[int] = set()
    tma: list[int] = []  # positions whose bytes are in flight
    total = ntiles_cta * kt
    prod = {"p": 0, "stage": 0, "phase": 1}
    arrivals = {0: 0, 1: 0}  # pending arrivals (in warpgroups) on consumer w's turn barrier
    issuing: set[int] = set()
    cons = []
    for w in (0, 1):
        pos = w * kt
        c = _Consumer(w, list(range(w, ntiles_cta, 2)), pos % stages, (pos // stages) & 1)
        c.pos = pos
        if not c.tiles:
            c.state = "done"
        cons.append(c)

    def passes(count: int, phi: int) -> bool:
        return (count & 1) != phi

    def release(pos: int) -> None:
        s = pos % stages
        if pos in released:
            errs.append(f"position {pos} released twice")
        released.add(pos)
        empty[s] += 1

    def step_producer() -> bool:
        p = prod["p"]
        if p >= total:
            return False
        s = prod["stage"]
        if not passes(empty[s], prod["phase"]):
            return False
        if p >= stages and p - stages not in released:
            errs.append(f"producer passed empty[{s}] for position {p} before {p - stages} "
                        "was released")
        tma.append(p)
        prod["p"] += 1
        prod["stage"] += 1
        if prod["stage"] == stages:
            prod["stage"] = 0
            prod["phase"] ^= 1
        return True

    def step_tma() -> bool:
        if not tma:
            return False
        p = tma.pop(rng.randrange(len(tma)))  # completions may come out of order
        # ...but not for one stage: position p + S cannot be issued before p completes and
        # is released, so per-stage order holds; the count is what matters
        full[p % stages] += 1
        filled.add(p)
        return True

    def step_consumer(c: _Consumer) -> bool:
        if c.state == "done":
            return False
        tile = c.tiles[c.ti]
        if c.state == "turn":
            if turns and tile != 0:
                if arrivals[c.w] == 0:
                    return False
                arrivals[c.w] -= 1
            c.state = "loop"
            issuing.add(c.w)
            if len(issuing) > 1:
                errs.append(f"main loops overlap at tile {tile}")
            return True
        if c.state == "loop":
            s = c.stage
            if not passes(full[s], c.phase):
                return False
            if c.pos not in filled or full[s] != c.pos // stages + 1:
                errs.append(f"consumer {c.w} passed full[{s}] for position {c.pos} on phase "
                            f"{full[s]} (needs completion {c.pos // stages + 1})")
            if c.pending_release is not None:  # wgmma_inflight 1: the previous block
                release(c.pending_release)
            c.pending_release = c.pos
            c.kb += 1
            c.pos += 1
            c.stage += 1
            if c.stage == stages:
                c.stage = 0
                c.phase ^= 1
            if c.kb == kt:
                c.state = "tail"
            return True
        # tail: hand the turn over, retire, release, epilogue, skip the other's tile
        issuing.discard(c.w)
        if turns and tile + 1 < ntiles_cta:
            other = 1 - c.w
            if arrivals[other]:
                errs.append(f"consumer {c.w} arrived twice on consumer {other}'s barrier")
            arrivals[other] += 1
        assert c.pending_release is not None
        release(c.pending_release)
        c.pending_release = None
        t = c.stage + kt
        c.stage, c.phase = t % stages, c.phase ^ ((t // stages) & 1)
        c.pos += kt
        c.kb = 0
        c.ti += 1
        c.state = "done" if c.ti == len(c.tiles) else "turn"
        return True

    actors = [step_producer, step_tma, lambda: step_consumer(cons[0]),
              lambda: step_consumer(cons[1])]
    while True:
        order = actors[:]
        rng.shuffle(order)
        if not any(a() for a in order):
            break
        if len(errs) > 3:
            return errs
    if any(c.state != "done" for c in cons) or prod["p"] < total:
        errs.append(f"deadlock: consumers {[c.state for c in cons]}, producer at "
                    f"{prod['p']}/{total}")
    if any(arrivals.values()):
        errs.append(f"arrivals left pending at exit: {arrivals}")
    if released != set(range(total)):
        errs.append("not every position released")
    return errs


@pytest.mark.parametrize("ntiles,kt,stages", [(1, 3, 4), (2, 1, 4), (5, 2, 6), (6, 7, 4),
                                              (7, 13, 6), (4, 4, 4), (9, 16, 5)])
def test_pingpong_walk(ntiles: int, kt: int, stages: int) -> None:
    for seed in range(40):
        assert _walk(ntiles, kt, stages, seed) == [], (ntiles, kt, stages, seed)


def test_pingpong_walk_needs_the_turns() -> None:
    """Without the turn barriers consumer 1 can wait on a ring position two phases ahead of
    the barrier (ktiles >= 2 stages) and pass on the wrong phase: the model sees it."""
    found = [e for seed in range(40) for e in _walk(6, 13, 4, seed, turns=False)]
    assert any("passed full" in e for e in found)
