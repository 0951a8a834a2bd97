"""The build-time state machines of a producer/consumer mbarrier pipeline and of an epilogue
staging ring: pure bookkeeping, no PTX.  Both front ends drive them -- the Python kernel
layer (:mod:`nvatom.kernels.pipeline`, as it emits each role's code) and the IR verifier
(:mod:`nvatom.ir.ops_pipeline`, walking a kernel's ``cutlass.pipeline.*`` and
``warpgroup.*`` operations) -- the way :class:`nvatom.ptx.wgmma_emit.WgmmaSequence` checks
the WGMMA protocol for both.

The hardware checks none of these rules (PTX ISA "mbarrier", "wgmma.wait_group",
"cp.async.bulk.wait_group"): breaking one is a silent race or a hang.

* producer, per stage: free -> ``acquire`` -> acquired -> ``load(bytes)``... -> ``commit``
  (the loads deliver exactly the ``expect_tx`` bytes) -> committed;
* consumer, per stage: ``wait`` -> full -> ``read`` (a WGMMA group reads it) -> read ->
  ``release`` (only once every group reading it retired: ``wgmma_wait(n)`` keeps the newest
  ``n`` groups pending) -> released;
* staging buffer: ``write`` -> written -> ``store`` (one bulk group) -> read by the store ->
  ``wait(n)`` retiring the group -> free;
* a buffer loaded once (:class:`BufferState`, attention's Q tile): ``arm`` -> ``load``... ->
  ``commit`` (the bytes announced); ``wait`` -> ``read`` (WGMMA groups) -> ``wgmma_wait``
  retiring them -> ``write`` (the readers overwrite it; no read after).

Stage offsets are symbolic (0: the role's current iteration, -1: the previous one).
``with state.loop():`` records a loop body and replays it once from the state it left (the
back edge); loops may nest (an inner body is replayed at its own end and recorded once into
the outer one).  ``loop(may_skip=True)``: the loop may run zero times (a branch around it),
so a copy of the state from before it goes on too and every later event is checked on both
paths (a failure on the copy says "on the path where the loop runs zero times").
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Callable, Iterator
from typing import Any

from nvatom.errors import NvatomError

__all__ = ["BufferState", "ConsumerState", "PipelineError", "ProducerState", "StagingState"]

FREE, ACQUIRED, COMMITTED = "free", "acquired", "committed"
FULL, READ, RELEASED = "full", "read", "released"


class PipelineError(NvatomError, ValueError):
    """A pipeline or staging ring used against its rules (names it, the stage or buffer,
    and the rule)."""


def stage_name(off: int) -> str:
    return "stage s" if off == 0 else f"stage s{off:+d}"


class _Machine:
    """Recording and replay of a loop body's events.  ``at`` (any object: the IR operation
    of an event) is attached to a :class:`PipelineError` as ``err.at``, also when the event
    fails on replay."""

    def __init__(self) -> None:
        self._recs: list[list[tuple[str, tuple[Any, ...], Any]]] = []
        self.replaying = False
        self.at: Any = None
        self.skipped = False  # this copy models the path on which a loop ran zero times
        self._alts: list[_Machine] = []  # such copies, run alongside (loop(may_skip=True))

    def _do(self, op: str, *args: Any) -> None:
        if not self.replaying:
            for rec in self._recs:
                rec.append((op, args, self.at))
        self._run(op, args, self.at)
        for alt in self._alts:
            alt._run(op, args, self.at)

    def _run(self, op: str, args: tuple[Any, ...], at: Any) -> None:
        try:
            getattr(self, "_" + op)(*args)
        except PipelineError as e:
            if getattr(e, "at", None) is None:
                e.at = at  # type: ignore[attr-defined]
            raise

    @contextlib.contextmanager
    def loop(self, may_skip: bool = False) -> Iterator[None]:
        """Record the body of a loop; at its end replay it from the state it left.
        ``may_skip``: the loop may run zero times at run time (a branch around it), so the
        state before it is kept too and every later event is checked on both paths."""
        skip = self._copy() if may_skip else None
        rec: list[tuple[str, tuple[Any, ...], Any]] = []
        self._recs.append(rec)
        try:
            yield
        finally:  # by identity: an outer loop's record may equal this one (list ==)
            del self._recs[next(i for i, r in enumerate(self._recs) if r is rec)]
        outer, self.replaying = self.replaying, True
        try:
            for op, args, at in rec:
                self._run(op, args, at)
                for alt in self._alts:
                    alt._run(op, args, at)
        finally:
            self.replaying = outer
        if skip is not None:
            self._alts.append(skip)

    def _copy(self) -> _Machine:
        """This machine's state now, as the path that skips a loop continues from it."""
        alt = copy.copy(self)
        for key, val in vars(self).items():
            if key not in ("_recs", "_alts") and isinstance(val, (dict, list, set)):
                setattr(alt, key, copy.deepcopy(val))
        alt._recs, alt._alts, alt.skipped = [], [], True
        return alt

    def _where(self) -> str:
        if self.skipped:
            return " (on the path where the loop runs zero times)"
        return " (next iteration, at the loop's back edge)" if self.replaying else ""


class _RoleState(_Machine):
    role = "role"

    def __init__(self, pipeline: str, name: str, stages: int) -> None:
        super().__init__()
        self.pipeline, self.name, self.stages = pipeline, name, stages
        self.state: dict[int, str] = {}
        self.begun = False

    def _fail(self, off: int, rule: str) -> None:
        raise PipelineError(f"pipeline '{self.pipeline}', {self.role} '{self.name}', "
                            f"{stage_name(off)}{self._where()}: {rule}")

    def _advance(self) -> None:
        self.state = {off - 1: st for off, st in self.state.items()}
        self.begun = True


class ProducerState(_RoleState):
    """The producer's stages: ``begin``, ``acquire``, ``load(bytes)``..., ``commit``."""

    role = "producer"

    def __init__(self, pipeline: str, name: str, stages: int, tx_bytes: int) -> None:
        super().__init__(pipeline, name, stages)
        self.tx_bytes = tx_bytes
        self.bytes = 0

    def begin(self) -> None:
        self._do("begin")

    def acquire(self) -> None:
        self._do("acquire")

    def load(self, nbytes: int) -> None:
        self._do("load", nbytes)

    def commit(self) -> None:
        self._do("commit")

    def _begin(self) -> None:
        if self.state.get(0) == ACQUIRED:
            self._fail(0, "acquired but never committed before the next iteration (its full "
                          "barrier's phase never completes)")
        self._advance()

    def _acquire(self) -> None:
        if not self.begun:
            self._fail(0, "acquire before begin(it): the stage is not known")
        if self.state.get(0) is not None:
            self._fail(0, f"acquired twice in one iteration (it is {self.state[0]}): the "
                          "producer may only acquire a stage the consumers released")
        self.state[0] = ACQUIRED
        self.bytes = 0

    def _load(self, nbytes: int) -> None:
        if self.state.get(0) != ACQUIRED:
            self._fail(0, "filled by TMA before the producer acquired it (acquire before "
                          "fill: the consumers may still read it)")
        self.bytes += nbytes

    def _commit(self) -> None:
        if self.state.get(0) != ACQUIRED:
            self._fail(0, "committed without being acquired")
        if self.bytes != self.tx_bytes:
            self._fail(0, f"its loads deliver {self.bytes} bytes but expect_tx announced "
                          f"{self.tx_bytes} (the full barrier's phase would complete early "
                          "or never)")
        self.state[0] = COMMITTED


class ConsumerState(_RoleState):
    """A consumer's stages: ``begin``, ``wait``, ``read``, ``wgmma_wait(n)``,
    ``release(lag)``; ``in_turn`` (ping-pong) says whether the role holds its turn."""

    role = "consumer"

    def __init__(self, pipeline: str, name: str, stages: int,
                 in_turn: Callable[[], bool] | None = None) -> None:
        super().__init__(pipeline, name, stages)
        self.in_turn = in_turn
        # the stage offsets each WGMMA group not yet retired reads (oldest group first)
        self.groups: list[tuple[int, ...]] = []
        self.first_next = False  # start() was seen: the next iteration is a loop's first
        self.first = False  # the current iteration is the first since start()
        self.holding: bool | None = None  # ping-pong: the turn, as turn() recorded it

    def begin(self) -> None:
        self._do("begin")

    def wait(self) -> None:
        self._do("wait")

    def read(self, synchronous: bool = False, span: int = 1) -> None:
        """The stage is read: by a committed WGMMA group (retired by a later
        ``wgmma_wait``), or ``synchronous``ly (``ld.shared``, ``ldmatrix``: done at once).
        ``span``: the group reads the current stage and the ``span - 1`` before it (one
        group over several K blocks)."""
        self._do("read", synchronous, span)

    def wgmma_wait(self, pending: int) -> None:
        self._do("wgmma_wait", pending)

    def release(self, lag: int = 0, unless_first: bool = False) -> None:
        """Release stage ``s - lag``; ``unless_first``: not on the first iteration after
        :meth:`start` (a release predicated on the loop counter: nothing to release yet)."""
        self._do("release", lag, unless_first)

    def start(self) -> None:
        """A loop's counter is reset: the next iteration is its first (see ``release``)."""
        self._do("start")

    def turn(self, holding: bool) -> None:
        """Ping-pong: the role takes (``True``) or hands on its turn; recorded, so a loop
        replayed at its back edge sees the turn as its body left it (else ``in_turn``)."""
        self._do("turn", holding)

    def _turn(self, holding: bool) -> None:
        self.holding = holding

    def release_oldest(self) -> None:
        """Release the oldest stage this role holds (an iteration the caller cannot relate
        to the current one: a ring is released in order)."""
        self._do("release_oldest")

    def held(self) -> list[int]:
        return sorted(o for o, st in self.state.items() if st in (FULL, READ))

    def _begin(self) -> None:
        if self.begun and self.state.get(0) is None:
            self._fail(0, "the iteration ended without waiting on its stage (the ring "
                          "position and the producer's would drift apart)")
        self._advance()
        self.first, self.first_next = self.first_next, False
        self.groups = [tuple(o - 1 for o in g) for g in self.groups]
        for off, st in self.state.items():
            if off <= -self.stages and st != RELEASED:
                self._fail(off, f"still held ({st}) a whole ring of {self.stages} stages "
                                "later: the producer's acquire of it waits forever")
        self.state = {o: s for o, s in self.state.items() if o > -self.stages}

    def _wait(self) -> None:
        if not self.begun:
            self._fail(0, "wait before begin(it): the stage is not known")
        holding = self.holding if self.holding is not None else (
            self.in_turn is None or self.in_turn())
        if self.in_turn is not None and not holding:
            self._fail(0, "a ping-pong consumer waits on a stage outside its turn (wait on "
                          "its order barrier first)")
        if self.state.get(0) is not None:
            self._fail(0, f"waited on twice in one iteration (it is {self.state[0]})")
        self.state[0] = FULL

    def _read(self, synchronous: bool = False, span: int = 1) -> None:
        offs = tuple(-i for i in range(span - 1, -1, -1))
        for off in offs:
            st = self.state.get(off)
            if st is None:
                self._fail(off, "read before its full barrier was waited on (wait-full "
                                "before read: TMA may still be writing it)")
            if st == RELEASED:
                self._fail(off, "read after its release (the producer may already refill "
                                "it)")
            self.state[off] = READ
        if not synchronous:
            self.groups.append(offs)

    def _wgmma_wait(self, pending: int) -> None:
        self.groups = self.groups[len(self.groups) - pending:] if pending else []

    def _start(self) -> None:
        self.first_next = True

    def _release(self, lag: int, unless_first: bool = False) -> None:
        if unless_first and self.first:
            return
        off = -lag
        st = self.state.get(off)
        if st is None or st == FULL:
            self._fail(off, "released but never read by this consumer (release after read)")
        if st == RELEASED:
            self._fail(off, "released twice: the producer may refill it while another "
                            "consumer still reads it (stage reused before its consumer "
                            "release)")
        if any(off in g for g in self.groups):
            n = len(self.groups)
            self._fail(off, f"released while a WGMMA group still reads it ({n} group"
                            f"{'s' if n > 1 else ''} pending after wgmma.wait_group): stage "
                            "reused before its consumer release is done")
        self.state[off] = RELEASED

    def _release_oldest(self) -> None:
        held = self.held()
        if not held:
            self._fail(0, "released but this consumer holds no stage (release after read)")
        self._release(-held[0])

    def finish(self) -> None:
        """Every stage read was released (else the producer's acquire waits forever)."""
        self._do("finish")

    def _finish(self) -> None:
        for off, st in sorted(self.state.items()):
            if st in (FULL, READ):
                self._fail(off, f"never released (it is {st}): the producer's acquire of it "
                                "waits forever")


class StagingState(_Machine):
    """The buffers of an epilogue staging ring: ``wait(n)``, ``write(b)``, ``store(b)``.

    ``lead_only``: one thread of the writing warpgroup (the lead) issues the stores and the
    waits, so its wait frees a buffer only for itself: the other writers learn of it at the
    next ``sync`` (``bar.sync`` among the writers).  Likewise a store may read a buffer only
    once its writes were made visible to the async proxy (``fence``: ``fence.proxy.async``)
    and every writer synchronised with the lead after that (``sync``).  Without it the
    writers are treated as one thread (each event orders everything before it)."""

    def __init__(self, name: str, nbuffers: int, lead_only: bool = False) -> None:
        super().__init__()
        if nbuffers < 1:
            raise PipelineError(f"staging ring '{name}' has no buffers")
        self.name, self.nbuffers, self.lead_only = name, nbuffers, lead_only
        # the buffers each pending store group reads, oldest group first
        self.groups: list[tuple[int, ...]] = []
        self.visible: list[tuple[int, ...]] = []  # the pending groups as every writer knows
        self.open: list[int] = []  # stores issued since the last commit_group
        self.written: set[int] = set()
        self.fenced: set[int] = set()  # written, fenced, not yet synchronised
        self.published: set[int] = set()  # written, fenced and synchronised: storable
        self.last_wait: int | None = None

    def _fail(self, buf: int, rule: str) -> None:
        where = " (next tile, at the loop's back edge)" if self.replaying else ""
        raise PipelineError(f"staging ring '{self.name}', buffer {buf}{where}: {rule}")

    def _check(self, buf: int) -> None:
        if not 0 <= buf < self.nbuffers:
            raise PipelineError(f"staging ring '{self.name}' has buffers "
                                f"0..{self.nbuffers - 1}, not {buf}")

    def wait(self, pending: int) -> None:
        self._do("wait", pending)

    def write(self, buf: int) -> None:
        self._check(buf)
        self._do("write", buf)

    def fence(self) -> None:
        """``fence.proxy.async``: the buffers written so far are visible to TMA stores."""
        self._do("fence")

    def sync(self) -> None:
        """The writers and the lead synchronise (``bar.sync``)."""
        self._do("sync")

    def store(self, buf: int, commit: bool = True) -> None:
        """A TMA store reads ``buf``; ``commit``: it is committed as its own bulk group
        (else it joins the group the next :meth:`commit` closes)."""
        self._check(buf)
        self._do("store", buf, commit)

    def commit(self) -> None:
        """``cp.async.bulk.commit_group``: the stores since the last one are one group."""
        self._do("commit")

    def _wait(self, pending: int) -> None:
        self.last_wait = pending
        self.groups = self.groups[len(self.groups) - pending:] if pending else []
        if not self.lead_only:
            self.visible = list(self.groups)

    def _sync(self) -> None:
        self.visible = list(self.groups)
        self.published |= self.fenced
        self.fenced = set()

    def _fence(self) -> None:
        self.fenced |= self.written - self.published

    def _write(self, buf: int) -> None:
        if buf in self.open:
            self._fail(buf, "written while its TMA store, not yet committed, may still read it")
        pending = [i for i, g in enumerate(self.groups) if buf in g]
        if any(buf in g for g in self.visible) and not pending:
            self._fail(buf, "written before the writers synchronised with the lead thread's "
                            "cp.async.bulk.wait_group.read (it frees the buffer for the lead "
                            "only: bar.sync after the wait, before the writes)")
        if pending:
            n = len(self.groups)
            newer = n - 1 - pending[-1]
            self._fail(buf, f"written while its previous TMA store may still read it: the "
                            f"last cp.async.bulk.wait_group.read {self.last_wait} left {n} "
                            f"store group{'s' if n > 1 else ''} in flight, {newer} newer "
                            f"than buffer {buf}'s (rule: write a staging buffer only after "
                            "its store's read was waited for)")
        self.written.add(buf)
        self.fenced.discard(buf)
        self.published.discard(buf)

    def _store(self, buf: int, commit: bool = True) -> None:
        if buf not in self.written:
            self._fail(buf, "stored before it was written")
        if self.lead_only and buf not in self.published:
            self._fail(buf, "stored before its writes were fenced (fence.proxy.async) and "
                            "every writer synchronised with the lead thread (bar.sync): the "
                            "TMA store may read stale shared memory")
        self.written.discard(buf)
        self.published.discard(buf)
        self.open.append(buf)
        if commit:
            self._commit()

    def _commit(self) -> None:  # an empty group counts in wait_group too
        self.groups.append(tuple(self.open))
        self.visible.append(tuple(self.open))
        self.open = []


class BufferState(_Machine):
    """A shared-memory buffer loaded once by TMA on its own mbarrier (attention's Q tile), read
    by WGMMA groups and never released, then overwritten by the reading threads (the O
    staging): ``arm`` (``expect_tx``), ``load(bytes)``..., ``commit`` (the producer);
    ``wait``, ``read`` (a committed WGMMA group reads it), ``wgmma_wait(n)``, ``write`` (the
    readers).  The last read must come before the write, and every group reading it must
    have retired (``wgmma.wait_group``) before it: the hardware orders neither."""

    def __init__(self, name: str, tx_bytes: int, producer: str, reader: str) -> None:
        super().__init__()
        self.name, self.tx_bytes = name, tx_bytes
        self.producer, self.reader = producer, reader
        self.armed = False
        self.bytes = 0
        self.waited = False
        self.written = False
        self.groups = 0  # the WGMMA groups reading it not yet retired

    def _fail(self, role: str, rule: str) -> None:
        raise PipelineError(f"buffer '{self.name}', {role}{self._where()}: {rule}")

    def arm(self) -> None:
        self._do("arm")

    def load(self, nbytes: int) -> None:
        self._do("load", nbytes)

    def commit(self) -> None:
        self._do("commit")

    def wait(self) -> None:
        self._do("wait")

    def read(self) -> None:
        self._do("read")

    def wgmma_wait(self, pending: int) -> None:
        """After a ``wgmma.wait_group``, ``pending`` of the groups reading it remain."""
        self._do("wgmma_wait", pending)

    def write(self) -> None:
        self._do("write")

    def _arm(self) -> None:
        self.armed, self.bytes = True, 0

    def _load(self, nbytes: int) -> None:
        if not self.armed:
            self._fail(f"producer '{self.producer}'", "filled by TMA before expect_tx "
                       "announced its bytes on its barrier (its phase may complete early)")
        self.bytes += nbytes

    def _commit(self) -> None:
        if self.bytes != self.tx_bytes:
            self._fail(f"producer '{self.producer}'", f"its loads deliver {self.bytes} bytes "
                       f"but expect_tx announced {self.tx_bytes} (its barrier's phase would "
                       "complete early or never)")

    def _wait(self) -> None:
        self.waited = True

    def _read(self) -> None:
        who = f"consumer '{self.reader}'"
        if not self.waited:
            self._fail(who, "read before its barrier was waited on (wait before read: TMA "
                            "may still be writing it)")
        if self.written:
            self._fail(who, "read after the threads overwrote it (the last read must come "
                            "before the write)")
        self.groups += 1

    def _wgmma_wait(self, pending: int) -> None:
        self.groups = pending

    def _write(self) -> None:
        who = f"consumer '{self.reader}'"
        if not self.waited:
            self._fail(who, "overwritten before its barrier was waited on (TMA may still be "
                            "writing it)")
        if self.groups:
            n = self.groups
            self._fail(who, f"overwritten while a WGMMA group still reads it ({n} group"
                            f"{'s' if n > 1 else ''} pending after wgmma.wait_group): write "
                            "it only after every group reading it retired")
        self.written = True
