"""The ``cutlass`` dialect: pipelines and tile schedulers as typed values, in the
specification's spelling (seed 000, "If You Know CUTLASS": ``cutlass::PipelineTmaAsync`` is
``cutlass.pipeline.create`` + ``cutlass.pipeline.init`` with explicit producer/consumer
participant attributes; ``cutlass::PersistentTileScheduler`` is
``cutlass.tile_scheduler.create_static_persistent_params`` returning a typed scheduler
handle).

```
%p    = cutlass.pipeline.create {kind = "tma_async", stages = 4}  // !cutlass.pipeline<tma_async, 4>
%pipe = cutlass.pipeline.init %p {producer = "tma", producer_arrivals = 1, consumer = "wgmma",
                                  consumer_arrivals = 2, tx_bytes = 49152}
%fb   = cutlass.pipeline.producer_acquire %pipe, %it   // wait empty[s], expect_tx full[s]
cutlass.pipeline.producer_commit %pipe, %it            // the TMA loads' complete_tx: no code
cutlass.pipeline.consumer_wait %pipe, %it              // wait full[s]
cutlass.pipeline.consumer_release %pipe, %it           // arrive on empty[s]
%s    = cutlass.pipeline.stage %pipe, %it              // it % stages (a ring slot's index)
%sch  = cutlass.tile_scheduler.create_static_persistent_params %tiles_m, %tiles_n {raster_group = 8}
%t0   = cutlass.tile_scheduler.first_tile %sch   // and tile_step, num_tiles
%mb   = cutlass.tile_scheduler.tile_m %sch, %t   // and tile_n, local_index
```

``%it`` is the role's iteration counter (stage ``it % stages``, phase ``(it / stages) & 1``:
:mod:`nvatom.ptx.pipeline_emit`, the same emitters as the Python layer
:mod:`nvatom.kernels.pipeline`).  Lowered by :mod:`nvatom.ir.lower_pipeline`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from nvatom.atoms import mbarrier as M
from nvatom.ir import types as TY
from nvatom.ir import xdsl_adapter as X
from nvatom.ir.dialect import NvOp, VerifyCtx, _defining, _fail
from nvatom.ir.syntax import IRSyntaxError
from nvatom.ptx import pipeline_state as PS

__all__ = ["OPS", "TYPES"]

PIPELINE_KINDS = ("tma_async",)
PRODUCERS = ("tma",)
CONSUMERS = ("wgmma",)
SCHEDULES = ("ordered", "pingpong")
SCHEDULER_KINDS = ("static_persistent",)
MAX_STAGES = 32
MAX_RASTER_GROUP = 64


def _pipeline_body(body: str) -> str:
    parts = [p.strip() for p in body.split(",")]
    if len(parts) != 2 or parts[0] not in PIPELINE_KINDS or not parts[1].isdigit():
        raise IRSyntaxError(f"a pipeline type is <kind, stages> with kind "
                            f"{' or '.join(PIPELINE_KINDS)}, not <{body.strip()}>")
    if not 1 <= int(parts[1]) <= MAX_STAGES:
        raise IRSyntaxError(f"a pipeline has 1..{MAX_STAGES} stages, not {parts[1]}")
    return f"{parts[0]}, {int(parts[1])}"


def _scheduler_body(body: str) -> str:
    if body.strip() not in SCHEDULER_KINDS:
        raise IRSyntaxError(f"a tile scheduler type is <{' | '.join(SCHEDULER_KINDS)}>, not "
                            f"<{body.strip()}>")
    return body.strip()


#: ``!cutlass.pipeline<tma_async, 4>``: a pipeline of 4 stages (its barriers' storage)
PipelineT = X.define_text_type("cutlass.pipeline", _pipeline_body)
#: ``!cutlass.tile_scheduler<static_persistent>``: a tile scheduler's parameters
TileSchedulerT = X.define_text_type("cutlass.tile_scheduler", _scheduler_body)


def pipeline_stages(t: Any) -> int:
    return int(t.text.split(",")[1])


def _i32() -> Any:
    return X.IntegerType(32)


def _int_operand(op: NvOp, i: int, what: str) -> None:
    t = op.operands[i].type
    if not X.is_integer_like(t):
        _fail(f"expects an integer {what} as operand #{i}, but got {TY.type_text(t)}")


def _in(what: str, value: Any, allowed: Sequence[str]) -> None:
    if value not in allowed:
        _fail(f"{what} must be {' or '.join(repr(a) for a in allowed)}, got {value!r}")


# =========================================================================== pipeline
class PipelineCreateOp(NvOp):
    """``%p = cutlass.pipeline.create {kind = "tma_async", stages = 4}``: the shared-memory
    storage of a pipeline's ``full`` and ``empty`` mbarrier arrays (8 bytes per barrier, PTX
    ISA "mbarrier": a ``.b64`` object), not yet initialised."""

    name = "cutlass.pipeline.create"
    RESULT = "infer"
    ATTRS: ClassVar[dict[str, Any]] = {"kind": "str", "stages": "int"}
    REQUIRED = ("stages",)

    @classmethod
    def infer(cls, operands: Sequence[Any], attrs: dict[str, Any]) -> Any:
        kind = X.attr_value(attrs["kind"]) if "kind" in attrs else "tma_async"
        return TY.make(PipelineT, _pipeline_body(f"{kind}, {X.attr_value(attrs['stages'])}"))

    def verify_ir(self, v: VerifyCtx) -> None:
        if not v.target.supports("mbarrier.tx"):
            _fail(f"a TMA pipeline needs mbarrier transaction counts (sm_90+), not "
                  f"{v.target.name}")
        inits = [u.operation for u in self.results[0].uses
                 if isinstance(u.operation, PipelineInitOp)]
        if len(inits) != 1:
            _fail(f"a pipeline is initialised by exactly one cutlass.pipeline.init, not "
                  f"{len(inits)}")


class PipelineInitOp(NvOp):
    """``%pipe = cutlass.pipeline.init %p {producer = "tma", producer_arrivals = 1, consumer
    = "wgmma", consumer_arrivals = 2, tx_bytes = 49152, schedule = "ordered"}``: thread 0
    initialises ``full[s]`` with the producer's arrival count (a TMA producer arrives once,
    with ``mbarrier.arrive.expect_tx`` of ``tx_bytes``, the bytes of one stage's loads) and
    ``empty[s]`` with the consumers' (one per consumer warpgroup that reads each stage; 1
    under ``schedule = "pingpong"``, where warpgroups alternate tiles), fences the inits and
    synchronises the CTA: it runs before the kernel branches into roles."""

    name = "cutlass.pipeline.init"
    OPERANDS = 1
    RESULT = "infer"
    ATTRS: ClassVar[dict[str, Any]] = {
        "producer": "str", "producer_arrivals": "int", "consumer": "str",
        "consumer_arrivals": "int", "tx_bytes": "int", "schedule": "str"}
    REQUIRED = ("producer", "producer_arrivals", "consumer", "consumer_arrivals", "tx_bytes")

    @classmethod
    def infer(cls, operands: Sequence[Any], attrs: dict[str, Any]) -> Any:
        t = operands[0].type
        if not isinstance(t, PipelineT):
            raise IRSyntaxError(f"'{cls.name}' initialises a !cutlass.pipeline, not "
                                f"{TY.type_text(t)}")
        return t

    def verify_ir(self, v: VerifyCtx) -> None:
        if not isinstance(_defining(self.operands[0]), PipelineCreateOp):
            _fail("expects the pipeline of a cutlass.pipeline.create as operand #0")
        _in("producer", self.attr("producer"), PRODUCERS)
        _in("consumer", self.attr("consumer"), CONSUMERS)
        _in("schedule", self.attr("schedule", "ordered"), SCHEDULES)
        if self.attr("producer_arrivals") != 1:
            _fail(f"a TMA producer arrives once per stage (mbarrier.arrive.expect_tx), so "
                  f"producer_arrivals is 1, not {self.attr('producer_arrivals')}")
        n = self.attr("consumer_arrivals")
        if not 1 <= n <= M.MAX_ARRIVAL_COUNT:
            _fail(f"consumer_arrivals is 1..{M.MAX_ARRIVAL_COUNT}, got {n}")
        if self.attr("schedule") == "pingpong" and n != 1:
            _fail(f"a ping-pong pipeline's stage is read and released by one warpgroup, so "
                  f"consumer_arrivals is 1, not {n}")
        tx = self.attr("tx_bytes")
        if not 1 <= tx <= M.MAX_TX_COUNT:
            _fail(f"tx_bytes is 1..{M.MAX_TX_COUNT}, got {tx}")
        users = {type(u.operation) for u in self.results[0].uses}
        for role, op in (("producer", PipelineProducerAcquireOp),
                         ("consumer", PipelineConsumerWaitOp),
                         ("consumer", PipelineConsumerReleaseOp)):
            if op not in users:
                _fail(f"the pipeline has no {op.name}: its {role} never takes part, and the "
                      "other role waits forever")
        err = stage_state_errors(v, self).get(self)
        if err is not None:
            _fail(err)


class _PipelineUse(NvOp):
    """An operation on an initialised pipeline at a role's iteration ``%it``."""

    OPERANDS = 2

    def verify_ir(self, v: VerifyCtx) -> None:
        init = _defining(self.operands[0])
        if not isinstance(init, PipelineInitOp):
            _fail("expects a pipeline of cutlass.pipeline.init as operand #0")
        _int_operand(self, 1, "iteration")
        err = stage_state_errors(v, init).get(self)
        if err is not None:
            _fail(err)


# =========================================================================== stage states
class _Stop(Exception):
    pass


def _lag(x: Any, it: Any) -> int | None:
    """``x`` as ``it - c`` (``c`` a constant: ``x`` is ``it`` or ``arith.subi it, c``)."""
    if x is it:
        return 0
    d = _defining(x)
    if d is not None and d.name == "arith.subi" and d.operands[0] is it:
        c = _defining(d.operands[1])
        if c is not None and c.name == "arith.constant":
            v = X.attr_value(c.value)
            return int(v) if isinstance(v, int) and v >= 0 else None
    return None


def stage_state_errors(v: VerifyCtx, init: PipelineInitOp) -> dict[Any, str]:
    """The stage-state rules of :mod:`nvatom.ptx.pipeline_state` on the kernel that holds
    ``init``: its operations in program order (both branches of an ``scf.if``; an
    ``scf.for`` body recorded and replayed once at its back edge, as the Python layer's
    ``loop()``).  The producer's iteration is each ``producer_acquire`` (its loads taken to
    deliver ``tx_bytes``), closed by ``producer_commit``; the consumer's each
    ``consumer_wait``; a ``warpgroup.commit_group`` after it reads the stage,
    ``warpgroup.wait {pending = n}`` retires all but ``n`` groups; ``consumer_release`` of
    ``it`` or ``it - c`` (``c`` constant) releases that stage, of any other iteration the
    oldest held.  Returns the failing operation -> its diagnostic (at most one)."""
    key = ("cutlass.pipeline.stage_state", init)
    if key in v.facts:
        return v.facts[key]  # type: ignore[no-any-return]
    v.facts[key] = errors = {}
    pipe = init.results[0]
    name = pipe.name_hint or "pipeline"
    stages, tx = pipeline_stages(pipe.type), init.attr("tx_bytes")
    prod = PS.ProducerState(name, "producer", stages, tx)
    cons = PS.ConsumerState(name, "consumer", stages)
    last_it: list[Any] = [None]
    seen_consumer = [False]

    def visit(op: Any) -> None:
        prod.at = cons.at = op
        mine = bool(op.operands) and op.operands[0] is pipe
        if mine and isinstance(op, PipelineProducerAcquireOp):
            prod.begin()
            prod.acquire()
            prod.load(tx)
        elif mine and isinstance(op, PipelineProducerCommitOp):
            prod.commit()
        elif mine and isinstance(op, PipelineConsumerWaitOp):
            cons.begin()
            cons.wait()
            last_it[0] = op.operands[1]
            seen_consumer[0] = True
        elif op.name == "cute_nvgpu.warpgroup.commit_group":
            if cons.state.get(0) in (PS.FULL, PS.READ):
                cons.read()
        elif op.name == "cute_nvgpu.warpgroup.wait":
            cons.wgmma_wait(op.attr("pending"))
        elif mine and isinstance(op, PipelineConsumerReleaseOp):
            lag = _lag(op.operands[1], last_it[0])
            if lag is None:
                cons.release_oldest()
            else:
                if lag == 0 and cons.state.get(0) == PS.FULL:
                    cons.read(synchronous=True)  # no WGMMA read it: the threads did
                cons.release(lag)
        if op.name == "scf.for":
            with prod.loop(), cons.loop():
                for region in op.regions:
                    for block in region.blocks:
                        for inner in block.ops:
                            visit(inner)
            return
        for region in op.regions:
            for block in region.blocks:
                for inner in block.ops:
                    visit(inner)

    fn = init
    while fn is not None and fn.name != "func.func":
        fn = fn.parent_op()
    try:
        if fn is not None:
            for region in fn.regions:
                for block in region.blocks:
                    for op in block.ops:
                        visit(op)
            if seen_consumer[0]:
                cons.at = init
                cons.finish()
    except PS.PipelineError as e:
        at = getattr(e, "at", None)
        errors[at if isinstance(at, NvOp) else init] = str(e)
    return errors


class PipelineProducerAcquireOp(_PipelineUse):
    """``%full = cutlass.pipeline.producer_acquire %pipe, %it``: the producer waits until
    the consumers released stage ``it % stages`` (``empty[s]``, the previous round's parity),
    then arrives on ``full[s]`` with ``expect_tx`` of the stage's bytes; the result is
    ``full[s]``, the barrier the stage's TMA loads (``expect_tx = false``) complete on."""

    name = "cutlass.pipeline.producer_acquire"
    RESULT = "infer"

    @classmethod
    def infer(cls, operands: Sequence[Any], attrs: dict[str, Any]) -> Any:
        return TY.make(TY.MbarrierT)


class PipelineProducerCommitOp(_PipelineUse):
    """``cutlass.pipeline.producer_commit %pipe, %it``: the stage's loads are issued.  For a
    TMA producer there is no instruction: the loads' ``complete_tx`` completes ``full[s]``
    (as CUTLASS's ``PipelineTmaAsync::producer_commit``)."""

    name = "cutlass.pipeline.producer_commit"


class PipelineConsumerWaitOp(_PipelineUse):
    """``cutlass.pipeline.consumer_wait %pipe, %it``: wait until stage ``it % stages`` is
    full (``full[s]``'s phase of parity ``(it / stages) & 1``)."""

    name = "cutlass.pipeline.consumer_wait"


class PipelineConsumerReleaseOp(_PipelineUse):
    """``cutlass.pipeline.consumer_release %pipe, %it``: one arrival on ``empty[it %
    stages]`` (every thread that reaches it arrives: elect one per warpgroup with
    ``scf.if``, after the WGMMAs reading the stage retired)."""

    name = "cutlass.pipeline.consumer_release"


class PipelineStageOp(_PipelineUse):
    """``%s = cutlass.pipeline.stage %pipe, %it``: the ring slot ``it % stages`` (an i32, to
    address the stage's buffers with ``cute.smem_view``)."""

    name = "cutlass.pipeline.stage"
    RESULT = "infer"

    @classmethod
    def infer(cls, operands: Sequence[Any], attrs: dict[str, Any]) -> Any:
        return _i32()


# =========================================================================== tile scheduler
class CreateStaticPersistentParamsOp(NvOp):
    """``%sch = cutlass.tile_scheduler.create_static_persistent_params %tiles_m, %tiles_n
    {raster_group = 8}``: a persistent grid's schedule of ``tiles_m x tiles_n`` output tiles:
    CTA ``b`` visits linear tiles ``b, b + gridDim.x, ...``, each mapped to ``(m, n)`` in
    grouped-M raster order (``raster_group`` M blocks per sweep of N, for L2 reuse)."""

    name = "cutlass.tile_scheduler.create_static_persistent_params"
    OPERANDS = 2
    RESULT = "infer"
    ATTRS: ClassVar[dict[str, Any]] = {"raster_group": "int"}

    @classmethod
    def infer(cls, operands: Sequence[Any], attrs: dict[str, Any]) -> Any:
        return TY.make(TileSchedulerT, "static_persistent")

    def verify_ir(self, v: VerifyCtx) -> None:
        _int_operand(self, 0, "M tile count")
        _int_operand(self, 1, "N tile count")
        g = self.attr("raster_group", 1)
        if not 1 <= g <= MAX_RASTER_GROUP:
            _fail(f"raster_group is 1..{MAX_RASTER_GROUP} M blocks, got {g}")


class _SchedulerUse(NvOp):
    RESULT = "infer"

    @classmethod
    def infer(cls, operands: Sequence[Any], attrs: dict[str, Any]) -> Any:
        return _i32()

    def verify_ir(self, v: VerifyCtx) -> None:
        if not isinstance(self.operands[0].type, TileSchedulerT):
            _fail(f"expects a !cutlass.tile_scheduler as operand #0, but got "
                  f"{TY.type_text(self.operands[0].type)}")
        if len(self.operands) > 1:
            _int_operand(self, 1, "linear tile index")


class FirstTileOp(_SchedulerUse):
    """``%t0 = cutlass.tile_scheduler.first_tile %sch``: the CTA's first linear tile
    (``%ctaid.x``)."""

    name = "cutlass.tile_scheduler.first_tile"
    OPERANDS = 1


class TileStepOp(_SchedulerUse):
    """``%step = cutlass.tile_scheduler.tile_step %sch``: the stride between a CTA's tiles
    (``%nctaid.x``)."""

    name = "cutlass.tile_scheduler.tile_step"
    OPERANDS = 1


class NumTilesOp(_SchedulerUse):
    """``%n = cutlass.tile_scheduler.num_tiles %sch``: ``tiles_m * tiles_n``."""

    name = "cutlass.tile_scheduler.num_tiles"
    OPERANDS = 1


class TileMOp(_SchedulerUse):
    """``%mb = cutlass.tile_scheduler.tile_m %sch, %t``: the M block of linear tile ``%t``."""

    name = "cutlass.tile_scheduler.tile_m"
    OPERANDS = 2


class TileNOp(_SchedulerUse):
    """``%nb = cutlass.tile_scheduler.tile_n %sch, %t``: the N block of linear tile ``%t``."""

    name = "cutlass.tile_scheduler.tile_n"
    OPERANDS = 2


class LocalIndexOp(_SchedulerUse):
    """``%i = cutlass.tile_scheduler.local_index %sch, %t``: how many tiles this CTA ran
    before ``%t`` (``(t - first) / step``: a role's pipeline iteration base is ``i`` times
    the K blocks per tile)."""

    name = "cutlass.tile_scheduler.local_index"
    OPERANDS = 2


OPS = X.irdl_ops(PipelineCreateOp, PipelineInitOp, PipelineProducerAcquireOp,
                 PipelineProducerCommitOp, PipelineConsumerWaitOp, PipelineConsumerReleaseOp,
                 PipelineStageOp, CreateStaticPersistentParamsOp, FirstTileOp, TileStepOp,
                 NumTilesOp, TileMOp, TileNOp, LocalIndexOp)
TYPES = [PipelineT, TileSchedulerT]
