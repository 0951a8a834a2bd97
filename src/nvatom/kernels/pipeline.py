"""Pipelines as objects: a multi-stage TMA -> WGMMA producer/consumer ring over mbarriers, and
an epilogue staging ring of shared-memory buffers drained by TMA stores, each emitting PTX
through :mod:`nvatom.ptx.pipeline_emit` / :mod:`nvatom.ptx.tma_emit` and **checking at build
time** that the program it emits uses them legally.

The hardware (PTX ISA "mbarrier", "cp.async.bulk.tensor", "wgmma.wait_group",
"cp.async.bulk.wait_group") enforces none of this: a stage overwritten while a WGMMA still
reads it, or a staging buffer rewritten while a TMA store still reads it, is a silent race
(docs/perf.md, "FP8 tile by wave count").  So each role of a pipeline keeps the state of the
stages it touches, as far as the builder can know it from the order in which the role's code
is emitted:

* producer: a stage is **free** -> ``acquire`` (wait ``empty[s]``, ``expect_tx`` on
  ``full[s]``) -> **acquired** -> ``load`` (TMA loads completing on ``full[s]``) ->
  ``commit`` (the loads deliver exactly the ``expect_tx`` bytes) -> **committed**;
* consumer: ``wait`` (``full[s]``) -> **full** -> ``read`` (a WGMMA group reads it) ->
  **read** -> ``wgmma_wait(n)`` retires all but the newest ``n`` groups -> ``release``
  (arrive on ``empty[s]``; only once every group reading it retired) -> **released**.

The stage index is symbolic: offset 0 is the stage of the role's current iteration, ``-1``
the previous one.  A loop is modelled by one iteration: ``with role.loop():`` records the
body, and at its end replays it once more from the state the body left (the back edge), so a
release that lags a WGMMA group behind, or a wait that lets the previous tile's store run into
this tile's first write, is checked across iterations.  Arrival counts are checked across the
roles: ``empty[s]`` completes after ``empty_arrivals`` arrivals, which must equal the
warpgroups that release each stage (fewer: the producer refills a stage some consumer still
reads; more: never completes).

Violations raise :class:`PipelineError` naming the pipeline, the stage or buffer and the
rule.  The state machines are :mod:`nvatom.ptx.pipeline_state` (no PTX), which the IR
verifier runs too over a kernel's ``cutlass.pipeline.*`` operations.

The SM90 GEMM and attention kernels (:mod:`nvatom.kernels.sm90`) are built through these
objects: a :class:`Barriers` subclass keeps a kernel's own PTX spelling of the barrier
operations, ``begin(at=(stage, phase))`` its own ring-position registers, and
``wait``/``release(emit=False)`` record the iterations of a run-time loop emitted once
(docs/pipelines.md, "In the SM90 GEMM").

Ping-pong (two consumer warpgroups on alternate tiles, each stage released by one):
:class:`PingPongOrder` emits the named-barrier hand-off that orders their main loops, and a
ping-pong consumer may only wait on a stage inside its turn.  A buffer loaded once and never
released (attention's Q tile, later overwritten by the O staging) is a
:class:`SingleBuffer`.  docs/pipelines.md.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Literal

from nvatom.atoms import mbarrier as M
from nvatom.atoms.wgmma_fragments import WARPGROUP
from nvatom.ptx import pipeline_emit as PE
from nvatom.ptx import pipeline_state as PS
from nvatom.ptx import sync_emit as SE
from nvatom.ptx import tma_emit as TE
from nvatom.ptx.builder import Kernel, Reg
from nvatom.ptx.pipeline_state import PipelineError
from nvatom.ptx.tma_emit import Operand

__all__ = ["Barriers", "ConsumerRole", "EpilogueRing", "PingPongOrder", "Pipeline", "PipelineError",
           "PipelineSpec", "ProducerRole", "SingleBuffer"]


Kind = Literal["ordered", "pingpong"]


@dataclasses.dataclass(frozen=True)
class PipelineSpec:
    """A TMA -> WGMMA ring: ``stages`` stages of ``tx_bytes`` each (what the TMA loads of one
    stage deliver: the ``expect_tx`` count), ``consumers`` consumer warpgroups.  ``ordered``:
    every consumer warpgroup reads (and releases) every stage; ``pingpong``: two warpgroups
    on alternate tiles, one release per stage.  ``empty_arrivals`` (default: what ``kind``
    needs) is the count ``empty[s]`` is initialised with; giving another one is how a wrong
    count is shown to be refused.  ``cluster``: the CTAs whose consumers release each stage
    (a 2-CTA cluster multicasting B: every consumer warpgroup arrives on ``empty[s]`` of
    both CTAs, so it counts ``cluster`` times the readers)."""

    name: str
    stages: int
    tx_bytes: int
    consumers: int = 1
    kind: Kind = "ordered"
    empty_arrivals: int | None = None
    cluster: int = 1

    def __post_init__(self) -> None:
        if not 1 <= self.stages <= 32:
            raise PipelineError(f"pipeline '{self.name}': {self.stages} stages, not 1..32")
        if not 0 < self.tx_bytes <= M.MAX_TX_COUNT:
            raise PipelineError(f"pipeline '{self.name}': {self.tx_bytes} transaction bytes "
                                f"per stage, not 1..{M.MAX_TX_COUNT}")
        if self.kind not in ("ordered", "pingpong"):
            raise PipelineError(f"pipeline '{self.name}': kind '{self.kind}' is not ordered "
                                "or pingpong")
        if self.kind == "pingpong" and self.consumers != 2:
            raise PipelineError(f"pipeline '{self.name}': ping-pong alternates 2 consumer "
                                f"warpgroups, not {self.consumers}")
        if not 1 <= self.cluster <= 2 or (self.cluster > 1 and self.kind == "pingpong"):
            raise PipelineError(f"pipeline '{self.name}': a cluster of {self.cluster} CTAs "
                                f"({self.kind}) is not supported")
        if not 1 <= self.consumers <= 4:
            raise PipelineError(f"pipeline '{self.name}': {self.consumers} consumer "
                                "warpgroups, not 1..4")

    @property
    def empty_count(self) -> int:
        """The arrivals that complete ``empty[s]``: one per warpgroup that reads the stage."""
        if self.empty_arrivals is not None:
            return self.empty_arrivals
        return self.readers * self.cluster

    @property
    def readers(self) -> int:
        """The consumer warpgroups that read (and must release) each stage."""
        return 1 if self.kind == "pingpong" else self.consumers


# ============================================================================ the roles
class _Role:
    """A role's registers (iteration, stage, phase) over its state machine
    (:mod:`nvatom.ptx.pipeline_state`, shared with the IR verifier)."""

    state: PS.ProducerState | PS.ConsumerState

    def __init__(self, pipe: Pipeline, name: str) -> None:
        self.pipe, self.name = pipe, name
        self.it: Reg | None = None
        self.stage: Reg | None = None
        self.phase: Reg | None = None

    def loop(self, may_skip: bool = False) -> contextlib.AbstractContextManager[None]:
        """Record the body of a loop over this role's iterations; at its end, replay it from
        the state it left (the back edge) so the checks see two consecutive iterations.
        ``may_skip``: a branch may jump over the loop (it runs zero times): what follows is
        checked from both states."""
        return self.state.loop(may_skip)

    def _begin(self, it: Operand | None, at: tuple[Reg, Reg] | None) -> None:
        if at is not None:  # the kernel's own ring-position registers: nothing emitted
            self.stage, self.phase = at
            self.it = None
            return
        assert it is not None, "begin() needs an iteration or the ring position (at=)"
        self.stage, self.phase = PE.stage_phase(self.pipe.k, it, self.pipe.spec.stages)
        self.it = it if isinstance(it, Reg) else None


class ProducerRole(_Role):
    """The producer (one thread of the producer warpgroup): per iteration ``begin(it)``,
    ``acquire()``, one or more ``load(...)``, ``commit()``."""

    state: PS.ProducerState

    def __init__(self, pipe: Pipeline, name: str) -> None:
        super().__init__(pipe, name)
        self.state = PS.ProducerState(pipe.spec.name, name, pipe.spec.stages,
                                                pipe.spec.tx_bytes)
        self.full: Reg | None = None

    def begin(self, it: Operand | None = None, *, at: tuple[Reg, Reg] | None = None) -> None:
        """Iteration ``it`` of the role (an iteration register): its stage and phase; or
        ``at``: the (stage, phase) registers the kernel keeps and advances itself (``phase``:
        the parity the role's barrier wait uses)."""
        self.state.begin()
        self._begin(it, at)

    def acquire(self) -> Reg:
        """Wait until the consumers released stage ``s`` (``empty[s]``), announce its bytes
        on ``full[s]``; returns ``full[s]``, the barrier the stage's loads complete on."""
        self.state.acquire()
        p = self.pipe
        assert self.stage is not None and self.phase is not None
        self.full = p.barriers.acquire(p, self.stage, self.phase)
        return self.full

    def load(self, dst: Operand, tmap: Operand, coords: Sequence[Operand], nbytes: int,
             **kwargs: Any) -> None:
        """A TMA load of ``nbytes`` into stage ``s`` (``dst``), completing on ``full[s]``
        (a multicast load: the bytes it and its peers' loads deliver to this CTA's stage)."""
        self.state.load(nbytes)
        TE.tma_load(self.pipe.k, dst, tmap, coords, self.full, **kwargs)

    def commit(self) -> None:
        """The stage's loads are issued (their ``complete_tx`` commits it: no instruction)."""
        self.state.commit()


class ConsumerRole(_Role):
    """A consumer: ``arrivals`` warpgroups run this code and each releases every stage it
    reads once (one elected thread each).  Per iteration ``begin(it)``, ``wait()``,
    ``read()`` (after committing a WGMMA group that reads the stage), ``wgmma_wait(n)``
    (where ``wgmma.wait_group n`` is emitted), ``release(lag)``."""

    state: PS.ConsumerState

    def __init__(self, pipe: Pipeline, name: str, arrivals: int,
                 order: PingPongOrder | None) -> None:
        super().__init__(pipe, name)
        self.arrivals = arrivals
        self.order = order
        in_turn = None if order is None else (lambda: order.holding(self))
        self.state = PS.ConsumerState(pipe.spec.name, name, pipe.spec.stages,
                                                in_turn)

    def begin(self, it: Operand | None = None, *, at: tuple[Reg, Reg] | None = None) -> None:
        """Iteration ``it`` (or ``at``: the kernel's (stage, phase) registers, as for the
        producer): its stage and phase; the previous stages move one back."""
        self.state.begin()
        self._begin(it, at)

    def start(self) -> None:
        """The loop counter a ``release(unless_first=True)`` is predicated on was reset."""
        self.state.start()

    def wait(self, emit: bool = True) -> None:
        """Wait until stage ``s`` is full (``full[s]``, parity of this round).  ``emit``
        False: only record it (the wait emitted once runs again in a run-time loop)."""
        self.state.wait()
        if not emit:
            return
        p = self.pipe
        assert self.stage is not None and self.phase is not None
        p.barriers.wait(p, self.stage, self.phase)

    def read(self, synchronous: bool = False, span: int = 1) -> None:
        """A WGMMA group (committed just before) reads stage ``s`` (``span``: and the
        ``span - 1`` stages before it); ``synchronous``: the threads read it with
        ``ld.shared``/``ldmatrix`` (done when they return)."""
        self.state.read(synchronous, span)

    def wgmma_wait(self, pending: int) -> None:
        """``wgmma.wait_group pending`` was emitted: all but the newest ``pending`` groups
        retired (their shared-memory reads are done)."""
        self.state.wgmma_wait(pending)

    def release(self, lag: int = 0, *, pred: Reg | None = None, stage: Reg | None = None,
                unless_first: bool = False, emit: bool = True) -> None:
        """Arrive on ``empty`` of stage ``s - lag`` (``pred``: the elected thread of each
        warpgroup).  ``lag`` 1 releases the previous stage, whose WGMMA group retired while
        the current one is in flight.  ``stage``: the kernel's register holding stage
        ``s - lag`` (else computed from the iteration).  ``unless_first``: ``pred`` is false
        on the first iteration after :meth:`start` (nothing to release yet).  ``emit`` False:
        only record it (the release emitted once runs again in a run-time loop)."""
        self.state.release(lag, unless_first)
        if not emit:
            return
        p = self.pipe
        if stage is None and lag:
            assert self.it is not None, "release(lag) needs begin() with an iteration register"
            prev = p.k.reg("u32")
            p.k.ins("sub.u32", prev, self.it, lag)
            stage, _ = PE.stage_phase(p.k, prev, p.spec.stages)
        stage = self.stage if stage is None else stage
        assert stage is not None
        p.barriers.release(p, stage, pred)

    def finish(self) -> None:
        """The role is done: every stage it read was released (else the producer's next
        acquire of it, in this CTA's next tile or a peer's, waits forever)."""
        self.state.finish()


class PingPongOrder:
    """The named-barrier order of a ping-pong pipeline's two consumer warpgroups: warpgroup
    ``w`` waits on barrier ``base + w`` (``bar.sync``, both warpgroups' 256 threads) before
    its main loop and arrives on ``base + 1 - w`` (``bar.arrive``) after issuing its last
    WGMMA, so the main loops alternate and one's epilogue runs under the other's main loop
    (PTX ISA "bar.sync / bar.arrive")."""

    def __init__(self, k: Kernel, base: int, target: str | None = None) -> None:
        if not 0 < base < SE.NAMED_BARRIERS - 1:
            raise PipelineError(f"ping-pong order barriers {base}, {base + 1} outside "
                                f"1..{SE.NAMED_BARRIERS - 1} (0 is the CTA barrier)")
        self.k, self.base, self.target = k, base, target
        self._turn: set[int] = set()

    def holding(self, role: ConsumerRole) -> bool:
        return id(role) in self._turn

    def first_turn(self, first: Reg, wg: int = 1) -> None:
        """Before the main loops: warpgroup ``wg`` (where predicate ``first`` holds) hands
        the first turn to the other (``bar.arrive`` on the other's barrier), so that one
        starts without waiting for an earlier turn."""
        label = self.k.fresh_label("pp_start")
        self.k.bra(label, f"!{first}")
        SE.named_barrier_arrive(self.k, self._bar(wg, 1), 2 * WARPGROUP, target=self.target)
        self.k.label(label)

    def wait(self, role: ConsumerRole | Sequence[ConsumerRole], wg: Operand, *,
             skip: Reg | None = None, bar: Operand | None = None) -> None:
        """Warpgroup ``wg`` (0/1, a register or int) waits for its turn (``skip``: a
        predicate under which it need not, e.g. the CTA's first tile; ``bar``: the barrier
        ``base + wg`` computed by the caller).  ``role``: the consumer role (or the roles of
        several pipelines) whose waits the turn covers."""
        bar = self._bar(wg, 0) if bar is None else bar
        label = None
        if skip is not None:
            label = self.k.fresh_label("pp_first")
            self.k.bra(label, skip)
        SE.named_barrier_sync(self.k, bar, 2 * WARPGROUP, target=self.target)
        if label is not None:
            self.k.label(label)
        for r in _roles(role):
            self._turn.add(id(r))
            r.state.turn(True)

    def signal(self, role: ConsumerRole | Sequence[ConsumerRole], wg: Operand, *,
               pred: Reg | None = None, skip: Reg | None = None, bar: Operand | None = None,
               label: str = "pp_nosig") -> None:
        """Warpgroup ``wg`` ends its turn: the other may run its main loop (``pred``: only
        when the other has a tile left; ``skip``: not where this predicate holds, e.g. the
        warpgroup whose last hand-off has no taker; ``bar``: the other's barrier, computed
        by the caller; ``label``: the stem of the branch's label)."""
        for r in _roles(role):
            if id(r) not in self._turn:
                raise PipelineError(f"ping-pong consumer '{r.name}' of pipeline "
                                    f"'{r.pipe.spec.name}' ends a turn it never waited for "
                                    "(order barrier wait before signal)")
        target = None
        if pred is not None or skip is not None:
            target = self.k.fresh_label(label)
            self.k.bra(target, f"!{pred}" if pred is not None else skip)
        SE.named_barrier_arrive(self.k, self._bar(wg, 1) if bar is None else bar,
                                2 * WARPGROUP, target=self.target)
        if target is not None:
            self.k.label(target)
        for r in _roles(role):
            self._turn.discard(id(r))
            r.state.turn(False)

    def _bar(self, wg: Operand, other: int) -> Operand:
        if isinstance(wg, int):
            return self.base + (1 - wg if other else wg)
        r = self.k.reg("u32")
        if other:
            self.k.ins("sub.u32", r, self.base + 1, wg)
        else:
            self.k.ins("add.u32", r, wg, self.base)
        return r


def _roles(role: ConsumerRole | Sequence[ConsumerRole]) -> Sequence[ConsumerRole]:
    return (role,) if isinstance(role, ConsumerRole) else role


class Barriers:
    """How a pipeline's barrier operations are spelled in PTX: by default
    :mod:`nvatom.ptx.pipeline_emit` over the arrays at ``pipe.full`` / ``pipe.empty`` (the
    producer's ``phase`` is the consumers' parity: it waits on the opposite one).  A kernel
    with its own address arithmetic or release (a cluster's remote arrivals) passes a
    subclass, so the roles' checks guard its PTX unchanged."""

    def acquire(self, pipe: Pipeline, stage: Reg, phase: Reg) -> Reg:
        """Wait for ``empty[stage]``, ``expect_tx`` on ``full[stage]``; returns it."""
        return PE.producer_acquire(pipe.k, pipe.empty, pipe.full, stage, phase,
                                   pipe.spec.tx_bytes)

    def wait(self, pipe: Pipeline, stage: Reg, phase: Reg) -> None:
        PE.consumer_wait(pipe.k, pipe.full, stage, phase)

    def release(self, pipe: Pipeline, stage: Reg, pred: Reg | None) -> None:
        PE.consumer_release(pipe.k, pipe.empty, stage, pred=pred)


class Pipeline:
    """A TMA -> WGMMA ring of ``spec.stages`` stages: ``full`` and ``empty`` are the
    shared-memory addresses of its two barrier arrays (8 bytes per stage each);
    ``barriers``: how their operations are emitted (:class:`Barriers`)."""

    def __init__(self, k: Kernel, spec: PipelineSpec, full: Operand, empty: Operand, *,
                 barriers: Barriers | None = None) -> None:
        self.k, self.spec, self.full, self.empty = k, spec, full, empty
        self.barriers = Barriers() if barriers is None else barriers
        self.consumers: list[ConsumerRole] = []
        self.order: PingPongOrder | None = None
        self._inited = False

    @staticmethod
    def barrier_bytes(stages: int) -> int:
        """Shared memory of both barrier arrays."""
        return 2 * PE.MBARRIER_BYTES * stages

    def init(self, tid: Reg) -> None:
        """Thread ``tid == 0`` initialises ``full[s]`` (1 arrival + the bytes) and
        ``empty[s]`` (``spec.empty_count``) and fences the inits; the caller synchronises
        the CTA before any role runs."""
        k = self.k
        p = k.reg("pred")
        k.ins("setp.ne.u32", p, tid, 0)
        skip = k.fresh_label("pipe_init_done")
        k.bra(skip, p)
        PE.init_barriers(k, [(self.full, 1), (self.empty, self.spec.empty_count)],
                         self.spec.stages)
        k.label(skip)
        self._inited = True

    def producer(self, name: str = "producer") -> ProducerRole:
        return ProducerRole(self, name)

    def consumer(self, name: str = "consumer", arrivals: int | None = None,
                 order: PingPongOrder | None = None) -> ConsumerRole:
        """A consumer role run by ``arrivals`` warpgroups (default: all readers of a stage).
        The warpgroups releasing each stage must add up to ``empty[s]``'s count."""
        spec = self.spec
        n = spec.readers if arrivals is None else arrivals
        if spec.kind == "pingpong" and order is None:
            raise PipelineError(f"pipeline '{spec.name}': a ping-pong consumer needs the "
                                "PingPongOrder that alternates the two warpgroups")
        if spec.kind == "pingpong":
            if n != 1:
                raise PipelineError(f"pipeline '{spec.name}': a ping-pong consumer is one "
                                    f"warpgroup per tile, not {n}")
            total = spec.empty_count
        else:  # every consumer warpgroup arrives on empty[s] of each CTA of the cluster
            total = (n + sum(c.arrivals for c in self.consumers)) * spec.cluster
        if total > spec.empty_count or (spec.kind == "pingpong" and n != spec.empty_count):
            raise PipelineError(
                f"pipeline '{spec.name}', every stage: empty[s] completes after "
                f"{spec.empty_count} arrival(s) but {total} consumer warpgroup(s) read and "
                "release it: the producer refills a stage another consumer still reads "
                "(stage reused before its consumer release)")
        role = ConsumerRole(self, name, n, order)
        self.consumers.append(role)
        return role

    def check_arrivals(self) -> None:
        """Every arrival ``empty[s]`` waits for comes from some consumer role."""
        if self.spec.kind == "pingpong":
            return
        total = sum(c.arrivals for c in self.consumers) * self.spec.cluster
        if total < self.spec.empty_count:
            raise PipelineError(
                f"pipeline '{self.spec.name}', every stage: empty[s] waits for "
                f"{self.spec.empty_count} arrivals but the consumers give {total}: the "
                "producer's acquire never completes")


class SingleBuffer:
    """A shared-memory buffer loaded once by TMA on its own mbarrier and read by WGMMA groups,
    never released: the state machine :class:`~nvatom.ptx.pipeline_state.BufferState`.  The
    producer ``arm()``s its barrier (``expect_tx`` of ``tx_bytes``), ``load``s and
    ``commit``s; the readers ``wait()`` on the barrier (parity 0: one phase), ``read()`` it
    (a WGMMA group), report each ``wgmma_wait`` and may ``write()`` it (the epilogue staging
    its output there) only after every group reading it retired.  ``bar`` computes the
    barrier's address where a role uses it (each role's instruction stream its own)."""

    def __init__(self, k: Kernel, name: str, bar: Callable[[], Operand], tx_bytes: int, *,
                 producer: str = "producer", reader: str = "consumers") -> None:
        self.k, self.bar = k, bar
        self.state = PS.BufferState(name, tx_bytes, producer, reader)
        self.full: Operand | None = None

    def arm(self) -> Operand:
        """``mbarrier.arrive.expect_tx`` of the buffer's bytes; returns the barrier."""
        self.state.arm()
        self.full = self.bar()
        TE.mbarrier_arrive_expect_tx(self.k, self.full, self.state.tx_bytes)
        return self.full

    def load(self, dst: Operand, tmap: Operand, coords: Sequence[Operand], nbytes: int,
             **kwargs: Any) -> None:
        self.state.load(nbytes)
        TE.tma_load(self.k, dst, tmap, coords, self.full, **kwargs)

    def commit(self) -> None:
        self.state.commit()

    def wait(self) -> None:
        self.state.wait()
        TE.mbarrier_wait_parity(self.k, self.bar(), 0)

    def read(self) -> None:
        """A WGMMA group (committed just before) reads the buffer."""
        self.state.read()

    def wgmma_wait(self, pending: int) -> None:
        """After a ``wgmma.wait_group``, ``pending`` of the groups reading the buffer remain
        (the newest of them, as a ring's consumer role counts its own)."""
        self.state.wgmma_wait(pending)

    def write(self) -> None:
        """The readers' threads write the buffer (``st.shared``, ``stmatrix``)."""
        self.state.write()

    def loop(self, may_skip: bool = False) -> contextlib.AbstractContextManager[None]:
        return self.state.loop(may_skip)


# ============================================================================ epilogue ring
class EpilogueRing:
    """``len(buffers)`` shared-memory staging buffers (addresses) written by ``st.shared`` /
    ``stmatrix`` and read by TMA stores (``cp.async.bulk.tensor ... .bulk_group``, one bulk
    group each, issued by the thread where ``lead`` holds).  A buffer may be written again
    only after ``cp.async.bulk.wait_group.read n`` left its store out of the newest ``n``
    pending groups (PTX ISA "cp.async.bulk.wait_group": ``.read`` waits until the source
    reads are done).  Each buffer's state: **free** -> ``write`` -> **written** -> ``store``
    -> **read by store (group g)** -> a wait retiring g -> **free**.

    ``lead_only``: the ring also checks how the writers (a warpgroup) synchronise with the
    lead thread, which alone waits and stores: a write needs a ``sync`` after the wait that
    freed its buffer, a store needs ``fence`` then ``sync`` after the buffer's writes
    (:class:`~nvatom.ptx.pipeline_state.StagingState`).  :meth:`strided` builds a ring whose
    buffer addresses are computed when used (``base + b * stride``)."""

    def __init__(self, k: Kernel, name: str, buffers: Sequence[Operand], lead: Reg | None, *,
                 lead_only: bool = False) -> None:
        self.state = PS.StagingState(name, len(buffers), lead_only)
        self.k, self.name, self.buffers, self.lead = k, name, list(buffers), lead
        self._offsets: tuple[Operand, list[int]] | None = None
        self._in_lead = False

    @classmethod
    def strided(cls, k: Kernel, name: str, base: Operand, stride: int, n: int, lead: Reg, *,
                lead_only: bool = False) -> EpilogueRing:
        """``n`` buffers at ``base + b * stride``; :meth:`address` emits the ``add.u32``."""
        return cls.at_offsets(k, name, base, [b * stride for b in range(n)], lead,
                              lead_only=lead_only)

    @classmethod
    def at_offsets(cls, k: Kernel, name: str, base: Operand, offsets: Sequence[int],
                   lead: Reg | None, *, lead_only: bool = False) -> EpilogueRing:
        """Buffers at ``base + offsets[b]``; :meth:`address` emits the ``add.u32``.
        ``lead`` None: every store, commit and wait is inside :meth:`lead_section`."""
        ring = cls(k, name, [base] * len(offsets), lead, lead_only=lead_only)
        ring._offsets = (base, list(offsets))
        return ring

    @contextlib.contextmanager
    def lead_section(self, pred: Reg | None = None, label: str = "no_store") -> Iterator[None]:
        """One branch around several of the lead thread's operations (``pred``: the lead
        and whatever else the kernel requires of the storing thread): inside it
        :meth:`store`, :meth:`commit` and :meth:`wait` emit no branch of their own."""
        k = self.k
        pred = self.lead if pred is None else pred
        assert pred is not None, "a ring without a lead register needs lead_section(pred)"
        skip = k.fresh_label(label)
        k.bra(skip, f"!{pred}")
        self._in_lead = True
        try:
            yield
        finally:
            self._in_lead = False
        k.label(skip)

    def _lead(self, label: str) -> contextlib.AbstractContextManager[None]:
        return contextlib.nullcontext() if self._in_lead else self.lead_section(label=label)

    def tile(self) -> contextlib.AbstractContextManager[None]:
        """Record one tile's epilogue (the body of the tile loop); replay it once more from
        the state it left, so the next tile's first writes are checked against this tile's
        last stores."""
        return self.state.loop()

    def address(self, buf: int) -> Operand:
        """Buffer ``buf``'s address (a strided ring: ``add.u32`` into a fresh register now,
        used by the following :meth:`write` and :meth:`store` of ``buf``)."""
        if self._offsets is not None:
            base, offsets = self._offsets
            r = self.k.reg("u32")
            self.k.ins("add.u32", r, base, offsets[buf])
            self.buffers[buf] = r
        return self.buffers[buf]

    def wait(self, pending: int) -> None:
        """The lead thread waits until at most ``pending`` store groups still read their
        buffers (``cp.async.bulk.wait_group.read pending``)."""
        self.state.wait(pending)
        with self._lead("no_wait"):
            TE.bulk_wait_group(self.k, pending, read=True)

    def sync(self, bar: Operand, threads: int, **kwargs: Any) -> None:
        """``bar.sync bar, threads`` among the writers and the lead."""
        self.state.sync()
        SE.named_barrier_sync(self.k, bar, threads, **kwargs)  # type: ignore[arg-type]

    def fence(self) -> None:
        """``fence.proxy.async``: the writes so far become visible to the TMA stores."""
        self.state.fence()
        TE.fence_proxy_async(self.k)

    def write(self, buf: int) -> Operand:
        """Record that buffer ``buf`` is written now (the caller emits the st.shared /
        stmatrix at the returned address)."""
        self.state.write(buf)
        return self.buffers[buf]

    def store(self, buf: int, tmap: Operand, coords: Sequence[Operand] | Callable[[], Sequence[
              Operand]], *, commit: bool = True, reduce: str | None = None,
              **kwargs: Any) -> None:
        """The lead thread stores buffer ``buf`` (a TMA store, or with ``reduce`` a TMA
        reduction such as ``"add"`` into the global box; then ``cp.async.bulk.commit_group``:
        the store is one bulk group; ``commit`` False: it joins the group the next
        :meth:`commit` closes).  The caller fenced the writes (``fence.proxy.async``) and
        synchronised the writers first.  ``coords`` may be a function emitting them inside
        the lead thread's branch."""
        self.state.store(buf, commit)
        k = self.k
        with self._lead("no_store"):
            at = coords() if callable(coords) else coords
            if reduce is None:
                TE.tma_store(k, tmap, at, self.buffers[buf], **kwargs)
            else:
                TE.tma_reduce(k, reduce, tmap, at, self.buffers[buf], **kwargs)
            if commit:
                TE.bulk_commit_group(k)

    def commit(self) -> None:
        """``cp.async.bulk.commit_group`` (the lead thread): the stores since the last
        commit are one bulk group."""
        self.state.commit()
        with self._lead("no_commit"):
            TE.bulk_commit_group(self.k)
