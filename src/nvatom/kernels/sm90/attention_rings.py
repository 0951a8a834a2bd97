"""The SM90 attention kernel's shared-memory buffers as pipeline objects: the K and V stage
rings (:class:`~nvatom.kernels.pipeline.Pipeline`, their barrier operations spelled as the
kernel always did: :class:`KvBarriers`), the Q tile (:func:`q_buffer`, a
:class:`~nvatom.kernels.pipeline.SingleBuffer`: loaded once, read by every S group, then
overwritten by the O staging), and :class:`WgmmaGroups`, which tells each reader which of
its WGMMA groups a ``wgmma.wait_group`` retired when the groups of both rings and Q share the
warpgroup's one queue (PTX ISA "mbarrier", "wgmma.wait_group")."""

from __future__ import annotations

from typing import Any

from nvatom.kernels.pipeline import Barriers, Pipeline, PipelineSpec, SingleBuffer
from nvatom.kernels.sm90.attention_skeleton import _Build
from nvatom.ptx import tma_emit as TE
from nvatom.ptx.builder import Reg


class KvBarriers(Barriers):
    """The K (``which`` "k") or V ring's operations: ``full`` is ``k[s]`` / ``v[s]``; the
    empty barrier is ``ek[s]`` for K and ``e[s]`` for V with ``split_release``, else ``e[s]``
    for both (K's acquire waits for it once for both; V's release arrives on it for both, so
    K's release emits nothing)."""

    def __init__(self, b: _Build, which: str) -> None:
        self.b, self.which = b, which

    def _shared(self) -> bool:
        return self.which == "k" and not self.b.cfg.split_release

    def acquire(self, pipe: Pipeline, stage: Reg, phase: Reg) -> Reg:
        b = self.b
        if b.cfg.split_release:  # K's slot frees when S retires, V's when P V does
            TE.mbarrier_wait_parity(b.k, b.bar("ek" if self.which == "k" else "e", stage),
                                    phase)
        elif self.which == "k":
            TE.mbarrier_wait_parity(b.k, b.bar("e", stage), phase)
        full = b.bar(self.which, stage)
        TE.mbarrier_arrive_expect_tx(b.k, full, pipe.spec.tx_bytes)
        return full

    def wait(self, pipe: Pipeline, stage: Reg, phase: Reg) -> None:
        TE.mbarrier_wait_parity(self.b.k, self.b.bar(self.which, stage), phase)

    def release(self, pipe: Pipeline, stage: Reg, pred: Reg | None) -> None:
        if self._shared():  # V's release of the same e[s] frees K's slot
            return
        k = self.b.k
        assert pred is not None
        skip = k.fresh_label("no_release")
        k.bra(skip, f"!{pred}")
        TE.mbarrier_arrive(k, self.b.bar("ek" if self.which == "k" else "e", stage))
        k.label(skip)


def kv_rings(b: _Build) -> tuple[Pipeline, Pipeline]:
    """The K ring and the V ring: ``stages`` stages of ``kv_bytes`` each, read and released
    by both consumer warpgroups (``empty`` counts 2, as the prologue initialises them)."""
    cfg = b.cfg
    k_ring, v_ring = (Pipeline(b.k, PipelineSpec(f"attention_{w}", cfg.stages, cfg.kv_bytes,
                                                 consumers=2),
                               b.off_bar, b.off_bar, barriers=KvBarriers(b, w))
                      for w in ("k", "v"))
    return k_ring, v_ring


def q_buffer(b: _Build) -> SingleBuffer:
    """The Q tile: ``q_bytes`` loaded once on barrier ``q`` by the producer thread, read by
    both consumer warpgroups' S groups (each its own 64 rows: one model), never released;
    the ``"tma"`` epilogue stages O in it."""
    return SingleBuffer(b.k, "attention_q", lambda: b.bar("q"), b.cfg.q_bytes,
                        producer="attention_q_producer")


class WgmmaGroups:
    """The warpgroup's WGMMA groups in commit order, each reading one ring's stage (and Q):
    ``wait(n)`` (after ``wgmma.wait_group n``) keeps the newest ``n`` pending and tells each
    reader how many of its own groups those are."""

    def __init__(self, readers: tuple[Any, ...]) -> None:
        self.readers = readers
        self.queue: list[tuple[Any, ...]] = []

    def read(self, *readers: Any) -> None:
        """A group (committed just before) reads each reader's current stage or buffer."""
        for r in readers:
            r.read()
        self.queue.append(readers)

    def wait(self, pending: int) -> None:
        self.queue = self.queue[len(self.queue) - pending:] if pending else []
        for r in self.readers:
            r.wgmma_wait(sum(r in g for g in self.queue))
