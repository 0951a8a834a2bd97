"""Lowering of the ``cutlass`` dialect (:mod:`nvatom.ir.ops_pipeline`) through the emitters the
Python kernel layer uses (:mod:`nvatom.ptx.pipeline_emit`, :mod:`nvatom.ptx.scheduler_emit`):

* ``pipeline.create``: ``2 x stages`` 8-byte barriers of static shared memory (``full``
  then ``empty``); ``pipeline.init``: thread 0 runs ``mbarrier.init`` on each and
  ``fence.mbarrier_init``, then the CTA synchronises (``bar.sync 0``);
* ``producer_acquire`` / ``consumer_wait`` / ``consumer_release`` / ``stage``: the
  iteration's stage and parity (``and``/``shr`` for a power-of-two ring), then
  ``mbarrier.try_wait.parity`` / ``mbarrier.arrive.expect_tx`` / ``mbarrier.arrive``;
  ``producer_commit``: nothing (the TMA loads' ``complete_tx`` commits);
* ``tile_scheduler.*``: ``%ctaid.x``, ``%nctaid.x``, the tile count, and the grouped-M
  raster (one computation per linear tile value, shared by ``tile_m`` and ``tile_n``).

Source: PTX ISA "mbarrier" (init, arrive, expect_tx, try_wait.parity), "Special Registers".
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from nvatom.ir.lower_values import LowerError
from nvatom.ir.ops_pipeline import pipeline_stages
from nvatom.ptx import pipeline_emit as PE
from nvatom.ptx import scheduler_emit as SCH
from nvatom.ptx import tma_emit as TE
from nvatom.ptx.builder import Reg

__all__ = ["LOWERINGS"]

Low = Any  # nvatom.ir.lower._KernelLowering


@dataclasses.dataclass
class _Pipe:
    full: Reg
    empty: Reg
    stages: int
    tx_bytes: int = 0


@dataclasses.dataclass
class _Sched:
    tiles_m: Reg
    tiles_n: Reg
    group: int
    ntiles: Reg
    first: Reg
    step: Reg
    tiles: dict[Any, tuple[Reg, Reg]] = dataclasses.field(default_factory=dict)


def _pipe(low: Low, v: Any) -> _Pipe:
    p = low._reg_of(v)
    if not isinstance(p, _Pipe):
        raise LowerError("expects a lowered cutlass pipeline")
    return p


def _create(low: Low, op: Any) -> None:
    stages = pipeline_stages(op.results[0].type)
    nbytes = 2 * PE.MBARRIER_BYTES * stages
    sym = low.k.shared(low.fresh("pipe"), nbytes, 8)
    low.shared += nbytes
    full = TE.shared_address(low.k, sym)
    empty = TE.shared_address(low.k, sym, PE.MBARRIER_BYTES * stages)
    low.vals[op.results[0]] = _Pipe(full, empty, stages)


def _init(low: Low, op: Any) -> None:
    src = _pipe(low, op.operands[0])
    skip, _ = low._elect()
    PE.init_barriers(low.k, [(src.full, op.attr("producer_arrivals")),
                             (src.empty, op.attr("consumer_arrivals"))], src.stages)
    low.k.label(skip)
    low.k.ins("bar.sync", 0)
    low.vals[op.results[0]] = dataclasses.replace(src, tx_bytes=op.attr("tx_bytes"))


def _stage_phase(low: Low, op: Any) -> tuple[_Pipe, Reg, Reg]:
    p = _pipe(low, op.operands[0])
    stage, phase = PE.stage_phase(low.k, low._reg_of(op.operands[1]), p.stages)
    return p, stage, phase


def _producer_acquire(low: Low, op: Any) -> None:
    p, stage, phase = _stage_phase(low, op)
    low.vals[op.results[0]] = PE.producer_acquire(low.k, p.empty, p.full, stage, phase,
                                                  p.tx_bytes)


def _producer_commit(low: Low, op: Any) -> None:
    _pipe(low, op.operands[0])  # a TMA producer's loads commit the stage: no instruction


def _consumer_wait(low: Low, op: Any) -> None:
    p, stage, phase = _stage_phase(low, op)
    PE.consumer_wait(low.k, p.full, stage, phase)


def _consumer_release(low: Low, op: Any) -> None:
    p = _pipe(low, op.operands[0])
    stage, _ = PE.stage_phase(low.k, low._reg_of(op.operands[1]), p.stages)
    PE.consumer_release(low.k, p.empty, stage)


def _stage(low: Low, op: Any) -> None:
    p = _pipe(low, op.operands[0])
    it = low._reg_of(op.operands[1])
    r = low.k.reg("u32")
    if p.stages & (p.stages - 1) == 0:
        low.k.ins("and.b32", r, it, p.stages - 1)
    else:
        low.k.ins("rem.u32", r, it, p.stages)
    low.vals[op.results[0]] = r


# =========================================================================== scheduler
def _sched(low: Low, v: Any) -> _Sched:
    s = low._reg_of(v)
    if not isinstance(s, _Sched):
        raise LowerError("expects a lowered cutlass tile scheduler")
    return s


def _create_static_persistent(low: Low, op: Any) -> None:
    tm, tn = (low._reg_of(x) for x in op.operands)
    k = low.k
    n = k.reg("u32")
    k.ins("mul.lo.u32", n, tm, tn)
    first, step = k.reg("u32"), k.reg("u32")
    k.ins("mov.u32", first, "%ctaid.x")
    k.ins("mov.u32", step, "%nctaid.x")
    low.vals[op.results[0]] = _Sched(tm, tn, op.attr("raster_group", 1), n, first, step)


def _field(name: str) -> Callable[[Low, Any], None]:
    def lower(low: Low, op: Any) -> None:
        low.vals[op.results[0]] = getattr(_sched(low, op.operands[0]), name)

    return lower


def _tile(which: int) -> Callable[[Low, Any], None]:
    def lower(low: Low, op: Any) -> None:
        s = _sched(low, op.operands[0])
        t = op.operands[1]
        key = (t, op.parent)  # tile_m and tile_n of one tile in one block share the arithmetic
        if key not in s.tiles:
            s.tiles[key] = SCH.grouped_m_raster(low.k, low._reg_of(t), s.tiles_m, s.tiles_n,
                                                s.group)
        low.vals[op.results[0]] = s.tiles[key][which]

    return lower


def _local_index(low: Low, op: Any) -> None:
    s = _sched(low, op.operands[0])
    r = low.k.reg("u32")
    low.k.ins("sub.u32", r, low._reg_of(op.operands[1]), s.first)
    low.k.ins("div.u32", r, r, s.step)
    low.vals[op.results[0]] = r


LOWERINGS: dict[str, Callable[[Low, Any], None]] = {
    "cutlass.pipeline.create": _create,
    "cutlass.pipeline.init": _init,
    "cutlass.pipeline.producer_acquire": _producer_acquire,
    "cutlass.pipeline.producer_commit": _producer_commit,
    "cutlass.pipeline.consumer_wait": _consumer_wait,
    "cutlass.pipeline.consumer_release": _consumer_release,
    "cutlass.pipeline.stage": _stage,
    "cutlass.tile_scheduler.create_static_persistent_params": _create_static_persistent,
    "cutlass.tile_scheduler.first_tile": _field("first"),
    "cutlass.tile_scheduler.tile_step": _field("step"),
    "cutlass.tile_scheduler.num_tiles": _field("ntiles"),
    "cutlass.tile_scheduler.tile_m": _tile(0),
    "cutlass.tile_scheduler.tile_n": _tile(1),
    "cutlass.tile_scheduler.local_index": _local_index,
}
