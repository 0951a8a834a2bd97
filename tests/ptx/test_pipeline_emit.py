"""ptx/pipeline_emit.py and ptx/pipeline_state.py: the ring arithmetic (stage and phase of an
iteration, both ring shapes) interpreted on the CPU against its definition; the barrier
protocol's instructions and their order; a kernel of every emitter assembled by ptxas; the
state machines' loop replay, nested loops included."""

from __future__ import annotations

import re

import pytest

from nvatom.ptx import pipeline_emit as PE
from nvatom.ptx.builder import Kernel, Module
from nvatom.ptx.pipeline_state import ConsumerState, PipelineError, ProducerState, StagingState
from nvatom.runtime.ptxas import assemble


def _kernel() -> tuple[Module, Kernel]:
    mod = Module("sm_90a")
    return mod, mod.kernel("pipe")


def _eval(k: Kernel, it_reg: str, it: int) -> dict[str, int]:
    """Run the straight-line and/shr/rem/div/xor/mad u32 code of ``k`` with ``it``."""
    regs = {it_reg: it}
    ops = {"and": lambda a, b: a & b, "shr": lambda a, b: a >> b, "rem": lambda a, b: a % b,
           "div": lambda a, b: a // b, "xor": lambda a, b: a ^ b}
    for ln in k.emit().splitlines():
        m = re.match(r"\s*(\w+)\.[\w.]+\s+(%\w+), (%\w+|\d+), (%\w+|\d+);", ln)
        if m and m.group(1) in ops:
            a, b = (regs[x] if x.startswith("%") else int(x) for x in m.group(3, 4))
            regs[m.group(2)] = ops[m.group(1)](a, b)
    return regs


@pytest.mark.parametrize("stages", [1, 2, 3, 4, 5, 8])
def test_stage_and_phase_of_an_iteration(stages: int) -> None:
    _, k = _kernel()
    it = k.ld_param(k.param("it", "u32"))
    stage, phase = PE.stage_phase(k, it, stages)
    for i in range(3 * stages + 2):
        regs = _eval(k, str(it), i)
        assert (regs[str(stage)], regs[str(phase)]) == (i % stages, (i // stages) & 1)
    body = k.emit()
    assert ("rem.u32" in body) == bool(stages & (stages - 1))


def test_protocol_instructions_in_order() -> None:
    mod, k = _kernel()
    full, empty = k.reg("u32"), k.reg("u32")
    it = k.ld_param(k.param("it", "u32"))
    PE.init_barriers(k, [(full, 1), (empty, 2)], 4)
    stage, phase = PE.stage_phase(k, it, 4)
    fb = PE.producer_acquire(k, empty, full, stage, phase, 49152)
    PE.consumer_wait(k, full, stage, phase)
    p = k.reg("pred")
    k.ins("setp.eq.u32", p, it, 0)
    PE.consumer_release(k, empty, stage, pred=p)
    body = k.emit()
    inits = re.findall(r"mbarrier\.init\.shared::cta\.b64 \[(%\w+)(?:\+(\d+))?\], (\d+);", body)
    assert [(b == str(full), int(o or 0), int(c)) for b, o, c in inits] == [
        *((True, 8 * i, 1) for i in range(4)), *((False, 8 * i, 2) for i in range(4))]
    seq = [m for m in re.findall(r"(mbarrier\.\S+|fence\.mbarrier_init\S*)", body)
           if not m.startswith("mbarrier.init")]
    assert seq == ["fence.mbarrier_init.release.cluster;",
                   "mbarrier.try_wait.parity.acquire.cta.shared::cta.b64",  # empty, flipped
                   "mbarrier.arrive.expect_tx.release.cta.shared::cta.b64",
                   "mbarrier.try_wait.parity.acquire.cta.shared::cta.b64",  # full
                   "mbarrier.arrive.release.cta.shared::cta.b64"]
    assert "xor.b32" in body and ", 49152;" in body and str(fb) in body
    assert re.search(r"@!%p\d+ bra \$no_release", body)
    k.ins("st.shared.u32", f"[{fb}]", 0)
    assemble(mod.emit(), "sm_90a").kernel("pipe")


def test_nested_loops_replay_inner_and_outer() -> None:
    """A tile loop around a K loop: the inner body is replayed at its end, and recorded once
    into the outer body, whose replay catches a stage the tile never releases."""
    c = ConsumerState("p", "c", 2)
    with pytest.raises(PipelineError, match=r"next iteration.*whole ring of 2 stages"):
        with c.loop():  # tiles
            with c.loop():  # K blocks: release the previous stage
                c.begin()
                c.wait()
                c.read()
                c.wgmma_wait(1)
    c2 = ConsumerState("p", "c", 2)
    with c2.loop():
        with c2.loop():
            c2.begin()
            c2.wait()
            c2.read()
            c2.wgmma_wait(0)
            c2.release()
    c2.finish()


def test_error_names_the_event_of_a_replay() -> None:
    """An error found on replay carries the ``at`` of the recorded event (the IR op)."""
    p = ProducerState("p", "prod", 4, 512)
    with pytest.raises(PipelineError) as e:
        with p.loop():
            p.at = "the acquire op"
            p.begin()
            p.acquire()
    assert getattr(e.value, "at", None) == "the acquire op"
    assert "back edge" in str(e.value)


def test_staging_ring_of_three_buffers_keeps_two_in_flight() -> None:
    """Round-robin over 3 buffers with 2 stores in flight is safe across tiles only when a
    tile's chunk count is a multiple of 3 (else the next tile's chunk 0 reuses a buffer one
    of the 2 newest stores reads)."""
    s = StagingState("r", 3)
    with s.loop():
        for ch in range(6):
            s.wait(2)
            s.write(ch % 3)
            s.store(ch % 3)
    with pytest.raises(PipelineError, match=r"buffer 0 \(next tile, at the loop's back "
                       r"edge\): written while"):
        s2 = StagingState("r", 3)
        with s2.loop():
            for ch in range(4):
                s2.wait(2)
                s2.write(ch % 3)
                s2.store(ch % 3)
