"""PTX of a multi-stage producer/consumer pipeline over mbarriers, and of the tile schedulers
that feed it: the one implementation behind both front ends, the Python kernel layer
(:mod:`nvatom.kernels.pipeline`, :mod:`nvatom.kernels.scheduler`, which add the build-time
state checks) and the IR (``cutlass.pipeline.*``, ``cutlass.tile_scheduler.*``, lowered by
:mod:`nvatom.ir.lower_pipeline`).

A pipeline of ``S`` stages is two arrays of ``S`` mbarriers in shared memory (PTX ISA
"Parallel Synchronization and Communication Instructions: mbarrier"):

* ``full[s]``: arrival count 1 (the producer's ``mbarrier.arrive.expect_tx``, which also
  raises the phase's transaction count by the stage's bytes); the TMA loads into stage ``s``
  complete it with ``.mbarrier::complete_tx::bytes``;
* ``empty[s]``: one arrival per consumer that must be done with the stage (each consumer
  warpgroup of an ordered pipeline, the one warpgroup of a ping-pong tile).

Iteration ``it`` of a role uses stage ``it % S`` in round ``it / S``; an mbarrier's phase
parity flips each time it completes, so a consumer waits on ``full[s]`` with parity
``(it / S) & 1`` and the producer on ``empty[s]`` with the opposite parity (a fresh
barrier's "previous phase" counts as complete, so round 0 passes at once:
``mbarrier.try_wait.parity`` returns true for the phase before the current one).

Every function appends to a :class:`~nvatom.ptx.builder.Kernel`; barrier addresses are
32-bit ``.shared::cta`` window addresses, 8 bytes per barrier.
"""

from __future__ import annotations

from nvatom.ptx import tma_emit as TE
from nvatom.ptx.builder import Kernel, Reg
from nvatom.ptx.tma_emit import Operand

__all__ = [
    "MBARRIER_BYTES", "barrier_at", "consumer_release", "consumer_wait", "init_barriers",
    "producer_acquire", "stage_phase",
]

#: bytes of one mbarrier object (PTX ISA "Size and alignment of mbarrier object": .b64)
MBARRIER_BYTES = 8


def _u32(k: Kernel, op: str, *args: Operand) -> Reg:
    r = k.reg("u32")
    k.ins(op, r, *args)
    return r


def init_barriers(k: Kernel, bases: list[tuple[Operand, int]], stages: int) -> None:
    """``mbarrier.init`` of ``stages`` consecutive barriers at each ``(base, count)``, then
    ``fence.mbarrier_init`` (the inits visible to the async proxy and the cluster).  The
    caller runs it on one thread and synchronises the CTA after it."""
    for base, count in bases:
        for i in range(stages):
            TE.mbarrier_init(k, f"{base}+{MBARRIER_BYTES * i}" if i else base, count)
    TE.fence_mbarrier_init(k)


def stage_phase(k: Kernel, it: Operand, stages: int) -> tuple[Reg, Reg]:
    """``(it % stages, (it / stages) & 1)``: the stage and the phase parity of a role's
    iteration ``it`` (shift and mask for a power-of-two ring)."""
    if stages & (stages - 1) == 0:
        stage = _u32(k, "and.b32", it, stages - 1)
        rnd = _u32(k, "shr.u32", it, stages.bit_length() - 1)
    else:
        stage = _u32(k, "rem.u32", it, stages)
        rnd = _u32(k, "div.u32", it, stages)
    k.ins("and.b32", rnd, rnd, 1)
    return stage, rnd


def barrier_at(k: Kernel, base: Operand, stage: Operand) -> Reg:
    """The address of barrier ``stage`` of the array at ``base``."""
    return _u32(k, "mad.lo.u32", stage, MBARRIER_BYTES, base)


def producer_acquire(k: Kernel, empty: Operand, full: Operand, stage: Operand, phase: Operand,
                     tx_bytes: int) -> Reg:
    """The producer takes stage ``stage``: wait until ``empty[stage]`` completed the phase
    before ``phase`` (the consumers released the stage's previous contents), then arrive on
    ``full[stage]`` announcing the ``tx_bytes`` its TMA loads will deliver
    (``mbarrier.arrive.expect_tx``).  Returns ``full[stage]``'s address, the barrier the loads
    complete on."""
    flip = _u32(k, "xor.b32", phase, 1)
    TE.mbarrier_wait_parity(k, barrier_at(k, empty, stage), flip)
    fb = barrier_at(k, full, stage)
    TE.mbarrier_arrive_expect_tx(k, fb, tx_bytes)
    return fb


def consumer_wait(k: Kernel, full: Operand, stage: Operand, phase: Operand) -> None:
    """A consumer waits until the stage is full: ``full[stage]``'s phase of parity ``phase``
    completed (its arrival and all its transaction bytes)."""
    TE.mbarrier_wait_parity(k, barrier_at(k, full, stage), phase)


def consumer_release(k: Kernel, empty: Operand, stage: Operand, *,
                     pred: Reg | None = None) -> None:
    """One arrival on ``empty[stage]`` (release at CTA scope): this consumer is done reading
    the stage.  ``pred``: only the threads where it holds arrive (one per warpgroup)."""
    skip = None
    if pred is not None:
        skip = k.fresh_label("no_release")
        k.bra(skip, f"!{pred}")
    TE.mbarrier_arrive(k, barrier_at(k, empty, stage))
    if skip is not None:
        k.label(skip)
