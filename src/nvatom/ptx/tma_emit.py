"""Emitters for the asynchronous proxy on sm_90+: mbarriers, TMA tensor copies, bulk groups.

What a TMA pipeline needs around ``cp.async.bulk.tensor`` (PTX ISA 8.x, sections "Parallel
Synchronization and Communication Instructions: mbarrier", "Data Movement: cp.async.bulk.tensor",
"cp.reduce.async.bulk.tensor", "prefetch.tensormap", "Memory Consistency: fence.proxy"):

* an mbarrier in shared memory, initialised once (``mbarrier.init``) and made visible to the
  async proxy and the cluster (``fence.mbarrier_init.release.cluster``);
* a producer that announces the bytes a transfer will deliver
  (``mbarrier.arrive.expect_tx``) and issues the load, which completes on that barrier through
  ``.mbarrier::complete_tx::bytes``;
* consumers that wait for the barrier's current phase (``mbarrier.try_wait.parity``; the
  phase bit flips each time the barrier completes);
* stores/reductions from shared memory that complete through bulk groups
  (``cp.async.bulk.commit_group`` / ``cp.async.bulk.wait_group[.read]``), preceded by
  ``fence.proxy.async.shared::cta`` so the async proxy sees the generic-proxy writes.

Every function appends to a :class:`~nvatom.ptx.builder.Kernel`.  Shared-memory addresses are
32-bit ``.shared::cta`` window addresses (``Reg`` of type u32/b32); the tensor map is the
generic address of a by-value kernel parameter (:meth:`Kernel.byte_param` +
:meth:`Kernel.param_address`) or of a tensor map in global memory.
"""

from __future__ import annotations

from collections.abc import Sequence

from nvatom.errors import NvatomError
from nvatom.ptx.builder import Kernel, Reg

__all__ = [
    "TmaEmitError",
    "bulk_commit_group",
    "bulk_wait_group",
    "fence_mbarrier_init",
    "fence_proxy_async",
    "mbarrier_arrive",
    "mbarrier_arrive_expect_tx",
    "mbarrier_arrive_remote",
    "mbarrier_expect_tx",
    "mbarrier_init",
    "mbarrier_wait_parity",
    "prefetch_tensormap",
    "shared_address",
    "tma_load",
    "tma_reduce",
    "tma_store",
]

Operand = Reg | str | int

# The eight reductions of cp.reduce.async.bulk.tensor (PTX ISA: ".redOp").
REDUCE_OPS = ("add", "min", "max", "inc", "dec", "and", "or", "xor")
LOAD_MODES = ("tile", "im2col")


class TmaEmitError(NvatomError):
    """A TMA/mbarrier emission request the PTX ISA has no form for."""


def shared_address(k: Kernel, symbol: str, offset: int = 0) -> Reg:
    """The 32-bit shared-window address of ``symbol + offset`` (a ``.shared`` variable)."""
    r = k.reg("u32")
    k.ins("mov.u32", r, f"{symbol}+{offset}" if offset else symbol)
    return r


# ----------------------------------------------------------------------------- mbarrier
def mbarrier_init(k: Kernel, bar: Operand, count: Operand) -> None:
    """``mbarrier.init``: expected arrival count ``count`` (1 .. 2^20 - 1)."""
    if isinstance(count, int) and not 0 < count < (1 << 20):
        raise TmaEmitError(f"mbarrier arrival count {count} outside 1..{(1 << 20) - 1}")
    k.ins("mbarrier.init.shared::cta.b64", f"[{bar}]", count)


def fence_mbarrier_init(k: Kernel) -> None:
    """Make initialised mbarriers visible to the async proxy and to the other CTAs of the
    cluster (the only form of ``fence.mbarrier_init``)."""
    k.ins("fence.mbarrier_init.release.cluster")


def mbarrier_arrive(k: Kernel, bar: Operand, *, count: Operand | None = None) -> None:
    """Arrive (release, CTA scope) on a local barrier; the returned state is discarded."""
    ops: list[Operand] = ["_", f"[{bar}]"] + ([count] if count is not None else [])
    k.ins("mbarrier.arrive.release.cta.shared::cta.b64", *ops)


def mbarrier_arrive_remote(k: Kernel, bar_cluster: Operand) -> None:
    """Arrive on a barrier of another CTA of the cluster (address from ``mapa``)."""
    k.ins("mbarrier.arrive.release.cluster.shared::cluster.b64", "_", f"[{bar_cluster}]")


def mbarrier_arrive_expect_tx(k: Kernel, bar: Operand, tx_bytes: Operand) -> None:
    """Arrive once and raise the barrier's pending transaction count by ``tx_bytes``: the
    bytes the TMA transfers completing on this barrier will deliver in this phase."""
    _check_tx(tx_bytes)
    k.ins("mbarrier.arrive.expect_tx.release.cta.shared::cta.b64", "_", f"[{bar}]", tx_bytes)


def mbarrier_expect_tx(k: Kernel, bar: Operand, tx_bytes: Operand) -> None:
    """Raise the pending transaction count without arriving."""
    _check_tx(tx_bytes)
    k.ins("mbarrier.expect_tx.relaxed.cta.shared::cta.b64", f"[{bar}]", tx_bytes)


def _check_tx(tx: Operand) -> None:
    if isinstance(tx, int) and not 0 <= tx < (1 << 20):
        raise TmaEmitError(f"mbarrier transaction count {tx} outside 0..{(1 << 20) - 1}")


def mbarrier_wait_parity(k: Kernel, bar: Operand, parity: Operand, *,
                         scope: str = "cta") -> None:
    """Spin until the phase with parity ``parity`` (0/1) of ``bar`` has completed
    (``mbarrier.try_wait.parity`` in a loop; acquire at ``scope`` = cta or cluster)."""
    if scope not in ("cta", "cluster"):
        raise TmaEmitError(f"mbarrier wait scope '{scope}' is not cta or cluster")
    p = k.reg("pred")
    top = k.fresh_label("mbar_wait")
    k.label(top)
    k.ins(f"mbarrier.try_wait.parity.acquire.{scope}.shared::cta.b64", p, f"[{bar}]", parity)
    k.bra(top, f"!{p}")


# ----------------------------------------------------------------------------- fences, groups
def fence_proxy_async(k: Kernel, space: str = "shared::cta") -> None:
    """Order generic-proxy accesses before later async-proxy ones (e.g. st.shared before a TMA
    store reads the tile)."""
    if space not in ("shared::cta", "shared::cluster", "global", ""):
        raise TmaEmitError(f"fence.proxy.async has no state space '{space}'")
    k.ins("fence.proxy.async" + (f".{space}" if space else ""))


def bulk_commit_group(k: Kernel) -> None:
    k.ins("cp.async.bulk.commit_group")


def bulk_wait_group(k: Kernel, n: int = 0, *, read: bool = True) -> None:
    """Wait until at most ``n`` bulk groups are pending (``.read``: only until their source
    reads are done, enough to reuse the shared-memory tile)."""
    if not isinstance(n, int) or n < 0:
        raise TmaEmitError(f"bulk wait_group count {n!r} is not a non-negative integer")
    k.ins("cp.async.bulk.wait_group" + (".read" if read else ""), n)


def prefetch_tensormap(k: Kernel, tmap: Operand) -> None:
    """Bring a tensor map into the descriptor cache (generic address)."""
    k.ins("prefetch.tensormap", f"[{tmap}]")


# ----------------------------------------------------------------------------- tensor copies
def _coords(coords: Sequence[Operand]) -> str:
    if not 1 <= len(coords) <= 5:
        raise TmaEmitError(f"a TMA tensor copy takes 1..5 coordinates, got {len(coords)}")
    return "{" + ", ".join(str(c) for c in coords) + "}"


def tma_load(
    k: Kernel,
    dst: Operand,
    tmap: Operand,
    coords: Sequence[Operand],
    bar: Operand,
    *,
    multicast_mask: Operand | None = None,
    cache_policy: Operand | None = None,
    im2col_offsets: Sequence[Operand] | None = None,
) -> None:
    """``cp.async.bulk.tensor.{N}d.shared::cluster.global.{tile|im2col}
    .mbarrier::complete_tx::bytes[.multicast::cluster][.L2::cache_hint]``.

    ``coords`` are the signed 32-bit element coordinates of the box origin (innermost first);
    ``im2col_offsets`` (16-bit, rank - 2 of them) select the im2col mode; ``multicast_mask``
    (a 16-bit register) writes the tile to the same offset in every CTA of the mask and
    signals each one's barrier at the same offset; ``cache_policy`` is a 64-bit L2 policy
    (``createpolicy``)."""
    rank = len(coords)
    mode = "tile"
    extra = ""
    if im2col_offsets is not None:
        if rank < 3:
            raise TmaEmitError(f"im2col needs a tensor of rank 3..5, got rank {rank}")
        if len(im2col_offsets) != rank - 2:
            raise TmaEmitError(
                f"im2col on a rank-{rank} tensor takes {rank - 2} offsets, "
                f"got {len(im2col_offsets)}"
            )
        mode = "im2col"
        extra = ", {" + ", ".join(str(o) for o in im2col_offsets) + "}"
    op = f"cp.async.bulk.tensor.{rank}d.shared::cluster.global.{mode}.mbarrier::complete_tx::bytes"
    tail: list[Operand] = []
    if multicast_mask is not None:
        op += ".multicast::cluster"
        tail.append(multicast_mask)
    if cache_policy is not None:
        op += ".L2::cache_hint"
        tail.append(cache_policy)
    ops = [f"[{dst}]", f"[{tmap}, {_coords(coords)}]", f"[{bar}]{extra}", *map(str, tail)]
    k.ins(op, *ops)


def tma_store(k: Kernel, tmap: Operand, coords: Sequence[Operand], src: Operand, *,
              cache_policy: Operand | None = None) -> None:
    """``cp.async.bulk.tensor.{N}d.global.shared::cta.tile.bulk_group``: the box at
    ``coords`` from the shared tile ``src`` (out-of-bounds elements are not written)."""
    op = f"cp.async.bulk.tensor.{len(coords)}d.global.shared::cta.tile.bulk_group"
    tail = []
    if cache_policy is not None:
        op += ".L2::cache_hint"
        tail.append(str(cache_policy))
    k.ins(op, f"[{tmap}, {_coords(coords)}]", f"[{src}]", *tail)


def tma_reduce(k: Kernel, red_op: str, tmap: Operand, coords: Sequence[Operand],
               src: Operand, *, cache_policy: Operand | None = None) -> None:
    """``cp.reduce.async.bulk.tensor.{N}d.global.shared::cta.{op}.tile.bulk_group``: global
    box = global box (op) shared tile, element-wise, atomically per element."""
    if red_op not in REDUCE_OPS:
        raise TmaEmitError(
            f"TMA reduction '{red_op}' is not one of {', '.join(REDUCE_OPS)}"
        )
    op = f"cp.reduce.async.bulk.tensor.{len(coords)}d.global.shared::cta.{red_op}.tile.bulk_group"
    tail = []
    if cache_policy is not None:
        op += ".L2::cache_hint"
        tail.append(str(cache_policy))
    k.ins(op, f"[{tmap}, {_coords(coords)}]", f"[{src}]", *tail)
