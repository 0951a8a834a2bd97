"""mbarrier, proxy-fence, bulk-group and cluster-barrier instructions around TMA (sm_90+).

A TMA pipeline needs a handful of synchronisation instructions besides the copy itself:

* an **mbarrier** (a 64-bit object in shared memory) that a TMA load completes on:
  ``init`` with the expected arrival count, ``arrive.expect_tx`` raising the phase's pending
  transaction count by the bytes the transfer will deliver, the load's own
  ``complete_tx::bytes``, and ``try_wait.parity`` spinning until the phase of a given parity
  has completed (the phase bit flips each time a phase completes);
* **fences**: ``fence.mbarrier_init`` (make an initialised barrier visible to the async proxy
  and the cluster), ``fence.proxy.async`` (order generic-proxy shared-memory writes before an
  async-proxy read, e.g. ``st.shared`` before a TMA store), and the tensormap-proxy fences a
  device-side descriptor edit needs (``fence.proxy.tensormap::generic.release/acquire``,
  ``tensormap.cp_fenceproxy``);
* **bulk groups** for stores and reductions: ``cp.async.bulk.commit_group`` and
  ``cp.async.bulk.wait_group[.read] N``;
* the **cluster barrier** (``barrier.cluster.arrive/wait``) that orders barrier initialisation
  in every CTA before a multicast load signals them.

Each instruction is one row of :data:`SYNC_OPS`: its PTX spelling with ``{slot}`` holes, the
values each slot may take, its operands, and the :mod:`nvatom.arch` feature that gates it
(every row is assembled by ptxas in tests/ptx/test_tma_emit.py).  :mod:`nvatom.ptx.tma_emit`
spells instructions only through :func:`spell`.

Source: PTX ISA 8.x, sections "Parallel Synchronization and Communication Instructions:
mbarrier" (init, arrive, expect-tx, try_wait, phase completion), "membar/fence"
(``fence.proxy.async``, ``fence.proxy.tensormap::generic``, ``fence.mbarrier_init``),
"tensormap.cp_fenceproxy", "cp.async.bulk.commit_group", "cp.async.bulk.wait_group",
"barrier.cluster".
"""

from __future__ import annotations

import dataclasses
import string
from collections.abc import Mapping

from nvatom.arch import Target, target
from nvatom.errors import NvatomError, lookup

__all__ = [
    "MAX_ARRIVAL_COUNT",
    "MAX_TX_COUNT",
    "MBARRIER_BYTES",
    "SYNC_OPS",
    "SyncOp",
    "SyncOpError",
    "spell",
    "sync_op",
]

#: an mbarrier object is 8 bytes, 8-byte aligned, in shared memory
MBARRIER_BYTES = 8
#: PTX ISA "mbarrier: Contents": the expected arrival count is 1 .. 2^20 - 1
MAX_ARRIVAL_COUNT = (1 << 20) - 1
#: the tx-count of a phase lies in [-(2^20 - 1), 2^20 - 1]; expect_tx adds a non-negative count
MAX_TX_COUNT = (1 << 20) - 1


class SyncOpError(NvatomError):
    """An mbarrier/fence request the PTX ISA has no form for (bad scope, count, ...)."""


@dataclasses.dataclass(frozen=True)
class SyncOp:
    """One synchronisation instruction: spelling with ``{slot}`` holes and its operands."""

    name: str  # our key, the instruction's name in the PTX ISA
    spelling: str  # e.g. "mbarrier.arrive.release.{scope}.shared::cta.b64"
    operands: tuple[str, ...]  # operand roles in order ("[bar]", "count", ...)
    feature: str  # nvatom.arch feature that gates it
    slots: Mapping[str, tuple[str, ...]] = dataclasses.field(default_factory=dict)
    role: str = ""
    #: (slot, value, feature): a slot value that lowers the requirement (ptxas: the
    #: ``.cta``-scope arrive is sm_80, its ``.cluster`` form sm_90)
    slot_features: tuple[tuple[str, str, str], ...] = ()

    def __post_init__(self) -> None:
        used = {f for _, f, _, _ in string.Formatter().parse(self.spelling) if f}
        if used != set(self.slots):
            raise SyncOpError(f"{self.name}: slots {sorted(self.slots)} != holes {sorted(used)}")

    def feature_for(self, **slots: str) -> str:
        """The feature gating this row with these slot values."""
        for slot, value, feature in self.slot_features:
            if slots.get(slot, self.slots[slot][0]) == value:
                return feature
        return self.feature

    def available_on(self, t: Target | str, **slots: str) -> bool:
        return target(t).supports(self.feature_for(**slots))


_SCOPE_CTA_CLUSTER = ("cta", "cluster")
# mbarrier itself is sm_80 (PTX 7.0), these spellings (.shared::cta, .release.cta) PTX 8.0:
# nvatom.arch's "mbarrier" feature
_SM80 = "mbarrier"
_SCOPE_ALL = ("cta", "cluster", "gpu", "sys")

#: Every synchronisation instruction nvatom emits around TMA.  The mbarrier rows use the
#: spellings with explicit ``.shared::cta`` and semantics/scope qualifiers; init, inval and
#: the single ``.cta`` arrive assemble on sm_80, the rest needs sm_90 (``mbarrier.tx``).
SYNC_OPS: dict[str, SyncOp] = {
    op.name: op
    for op in (
        SyncOp("mbarrier.init", "mbarrier.init.shared::cta.b64", ("[bar]", "count"),
               _SM80, role="set the expected arrival count; phase 0, tx-count 0"),
        SyncOp("mbarrier.arrive", "mbarrier.arrive.release.{scope}.shared::cta.b64",
               ("_", "[bar]"), "mbarrier.tx", {"scope": _SCOPE_CTA_CLUSTER},
               role="one arrival on a barrier of this CTA (the state result is discarded)",
               slot_features=(("scope", "cta", _SM80),)),
        SyncOp("mbarrier.arrive.count", "mbarrier.arrive.release.{scope}.shared::cta.b64",
               ("_", "[bar]", "count"), "mbarrier.tx", {"scope": _SCOPE_CTA_CLUSTER},
               role="count arrivals at once"),
        # Default scope cta (what `mbarrier.arrive.shared::cluster.b64` means without
        # qualifiers): a per-K-block .release.cluster arrive halved the SM90 GEMM's speed with
        # a 2-CTA cluster on an H100 (docs/perf.md entries 3/3a).
        SyncOp("mbarrier.arrive.remote", "mbarrier.arrive.release.{scope}.shared::cluster.b64",
               ("_", "[bar]"), "mbarrier.tx", {"scope": _SCOPE_CTA_CLUSTER},
               role="arrive on a barrier of another CTA of the cluster (mapa address)"),
        SyncOp("mbarrier.arrive.expect_tx",
               "mbarrier.arrive.expect_tx.release.{scope}.shared::cta.b64",
               ("_", "[bar]", "tx"), "mbarrier.tx", {"scope": _SCOPE_CTA_CLUSTER},
               role="raise the pending tx-count by the transfer's bytes, then arrive"),
        SyncOp("mbarrier.expect_tx", "mbarrier.expect_tx.relaxed.{scope}.shared::cta.b64",
               ("[bar]", "tx"), "mbarrier.tx", {"scope": _SCOPE_CTA_CLUSTER},
               role="raise the pending tx-count without arriving"),
        SyncOp("mbarrier.try_wait.parity",
               "mbarrier.try_wait.parity.acquire.{scope}.shared::cta.b64",
               ("pred", "[bar]", "parity"), "mbarrier.tx", {"scope": _SCOPE_CTA_CLUSTER},
               role="true once the phase of this parity has completed (may time out: loop)"),
        SyncOp("mbarrier.inval", "mbarrier.inval.shared::cta.b64", ("[bar]",), _SM80,
               role="invalidate before the memory is reused for something else"),
        SyncOp("fence.mbarrier_init", "fence.mbarrier_init.release.cluster", (), "mbarrier.tx",
               role="publish mbarrier.init to the async proxy and the cluster"),
        SyncOp("fence.proxy.async", "fence.proxy.async{space}", (), "tma",
               {"space": ("", ".shared::cta", ".shared::cluster", ".global")},
               role="order generic-proxy accesses before async-proxy ones (and back)"),
        SyncOp("fence.proxy.tensormap.release", "fence.proxy.tensormap::generic.release.{scope}",
               (), "tma", {"scope": _SCOPE_ALL},
               role="release generic-proxy tensor-map writes to the tensormap proxy"),
        SyncOp("fence.proxy.tensormap.acquire", "fence.proxy.tensormap::generic.acquire.{scope}",
               ("[tmap]", "128"), "tma", {"scope": _SCOPE_ALL},
               role="acquire a 128-byte tensor map before a TMA reads it"),
        SyncOp("tensormap.cp_fenceproxy",
               "tensormap.cp_fenceproxy.global.shared::cta.tensormap::generic.release.{scope}"
               ".sync.aligned", ("[dst]", "[src]", "128"), "tma", {"scope": _SCOPE_ALL},
               role="copy a tensor map shared -> global with a release proxy fence (warp-wide)"),
        SyncOp("cp.async.bulk.commit_group", "cp.async.bulk.commit_group", (), "tma",
               role="close the bulk group of this thread's pending bulk stores/reductions"),
        SyncOp("cp.async.bulk.wait_group", "cp.async.bulk.wait_group{read}", ("n",), "tma",
               {"read": ("", ".read")},
               role="wait until at most n bulk groups are pending (.read: their reads)"),
        SyncOp("barrier.cluster.arrive", "barrier.cluster.arrive.release.aligned", (), "cluster",
               role="arrive on the cluster barrier (all threads of the CTA)"),
        SyncOp("barrier.cluster.wait", "barrier.cluster.wait.acquire.aligned", (), "cluster",
               role="wait for every CTA of the cluster to arrive"),
    )
}


def sync_op(name: str) -> SyncOp:
    return lookup(SYNC_OPS, name, lambda: SyncOpError(
        f"no synchronisation instruction '{name}' (known: {', '.join(SYNC_OPS)})"))


def spell(name: str, **slots: str) -> str:
    """The PTX opcode of ``name`` with its slots filled (unspecified slots take their first
    value); a value outside the slot's list raises :class:`SyncOpError` naming it."""
    op = sync_op(name)
    filled = {}
    for slot, values in op.slots.items():
        v = slots.pop(slot, values[0])
        if v not in values:
            shown = ", ".join(repr(x) for x in values)
            raise SyncOpError(f"{name}: {slot} {v!r} is not one of {shown}")
        filled[slot] = v
    if slots:
        raise SyncOpError(f"{name} has no slot(s) {', '.join(sorted(slots))}")
    return op.spelling.format(**filled)
