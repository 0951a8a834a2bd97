"""Emitters for the asynchronous proxy on sm_90+: mbarriers, TMA tensor copies, bulk groups,
descriptor prefetch and device-side descriptor mutation.

What a TMA pipeline needs around ``cp.async.bulk.tensor`` (PTX ISA 8.x, sections "Parallel
Synchronization and Communication Instructions: mbarrier", "Data Movement: cp.async.bulk.tensor",
"cp.reduce.async.bulk.tensor", "prefetch.tensormap", "tensormap.replace", "Memory Consistency:
fence.proxy"):

* an mbarrier in shared memory, initialised once (``mbarrier.init``) and made visible to the
  async proxy and the cluster (``fence.mbarrier_init.release.cluster``);
* a producer that announces the bytes a transfer will deliver
  (``mbarrier.arrive.expect_tx``) and issues the load, which completes on that barrier through
  ``.mbarrier::complete_tx::bytes``;
* consumers that wait for the barrier's current phase (``mbarrier.try_wait.parity``; the
  phase bit flips each time the barrier completes);
* stores/reductions from shared memory that complete through bulk groups
  (``cp.async.bulk.commit_group`` / ``cp.async.bulk.wait_group[.read]``), preceded by
  ``fence.proxy.async.shared::cta`` so the async proxy sees the generic-proxy writes;
* descriptor edits on the device (``tensormap.replace``, sm_90a) published to the tensormap
  proxy with ``fence.proxy.tensormap::generic.release`` (or ``tensormap.cp_fenceproxy`` from a
  shared-memory copy) and acquired with ``fence.proxy.tensormap::generic.acquire`` before use.

Spellings come from tables, not from this module: the mbarrier/fence/bulk-group rows of
:data:`nvatom.atoms.mbarrier.SYNC_OPS` and the tensor-copy forms of
:data:`nvatom.atoms.tma.TMA_INSTRS` (mode, ranks, coordinate and im2col-offset counts,
multicast, target feature).  Every function appends to a :class:`~nvatom.ptx.builder.Kernel`.
Shared-memory addresses are 32-bit ``.shared::cta`` window addresses (``Reg`` of type
u32/b32); the tensor map is a generic address: of a by-value kernel parameter
(:func:`tensormap_param`: ``.align 128``, ``mov`` + ``cvta.param.u64``; the bare ``mov`` of
:meth:`Kernel.param_address` faults on the GPU, see docs/tma.md) or of a tensor map in
global memory.  Functions taking ``target=`` refuse a form
the target lacks (ptxas agrees: tests/ptx/test_tma_emit.py).
"""

from __future__ import annotations

from collections.abc import Sequence

from nvatom.arch import Target
from nvatom.arch import target as _target
from nvatom.atoms import mbarrier as M
from nvatom.atoms import tma as T
from nvatom.errors import NvatomError
from nvatom.ptx.builder import Kernel, Param, Reg

__all__ = [
    "LOAD_MODES",
    "REDUCE_OPS",
    "TmaEmitError",
    "bulk_commit_group",
    "bulk_wait_group",
    "cluster_ctarank",
    "cluster_sync",
    "create_policy",
    "fence_mbarrier_init",
    "fence_proxy_async",
    "fence_tensormap_acquire",
    "fence_tensormap_release",
    "lower_tma_load",
    "lower_tma_reduce",
    "lower_tma_store",
    "mbarrier_arrive",
    "mbarrier_arrive_expect_tx",
    "mbarrier_arrive_remote",
    "mbarrier_expect_tx",
    "mbarrier_init",
    "mbarrier_wait_parity",
    "param_generic_address",
    "prefetch_tensormap",
    "shared_address",
    "tensormap_cp_fenceproxy",
    "tensormap_param",
    "tensormap_replace",
    "tensormap_update_sequence",
    "tma_load",
    "tma_prefetch",
    "tma_reduce",
    "tma_store",
]

Operand = Reg | str | int

#: The eight reductions of cp.reduce.async.bulk.tensor, from the spec's enum (PTX ".redOp").
REDUCE_OPS = tuple(k.name.removeprefix("TMA_REDUCE_").lower() for k in T.TmaReduceKind)
#: The load modes of the tensor-copy table.
LOAD_MODES = tuple(m.removeprefix(".") for d, m in T.TMA_INSTRS if d == "load")


class TmaEmitError(NvatomError):
    """A TMA/mbarrier emission request the PTX ISA has no form for."""


def _spell(k: Kernel, name: str, **slots: str) -> str:
    """The row's opcode; records the row's feature on ``k`` (the module's .version)."""
    try:
        op = M.spell(name, **slots)
        k.need_feature(M.sync_op(name).feature_for(**slots), op, TmaEmitError)
        return op
    except M.SyncOpError as e:
        raise TmaEmitError(str(e)) from None


def _gate(k: Kernel, what: str, feature: str, tgt: Target | str | None) -> None:
    k.need_feature(feature, what, TmaEmitError)
    if tgt is None:
        return
    t = _target(tgt)
    if not t.supports(feature):
        raise TmaEmitError(f"{what} is not available on {t.name} (needs feature '{feature}')")


def shared_address(k: Kernel, symbol: str, offset: int = 0) -> Reg:
    """The 32-bit shared-window address of ``symbol + offset`` (a ``.shared`` variable)."""
    r = k.reg("u32")
    k.ins("mov.u32", r, f"{symbol}+{offset}" if offset else symbol)
    return r


def param_generic_address(k: Kernel, p: Param) -> Reg:
    """``mov.u64`` + ``cvta.param.u64``: the generic address of a by-value parameter, the
    form a TMA instruction needs for a tensor map in parameter space (what nvcc 13 emits for
    a ``__grid_constant__ CUtensorMap``).  The bare ``mov.u64`` of
    :meth:`Kernel.param_address` is a ``.param``-window address; used as the tensor-map
    operand it faults on an H100 (cudaErrorMisalignedAddress; tests/gpu/test_tma_gpu.py)."""
    r = k.param_address(p)
    g = k.reg("u64")
    k.ins("cvta.param.u64", g, r)
    return g


#: a CUtensorMap is 128 bytes, 128-byte aligned (CUDA 13 ``cuda.h``: ``alignas(128)``)
TENSORMAP_BYTES = 128
TENSORMAP_ALIGN = 128
#: The ``.align`` the GEMM kernels (``nvatom.kernels.sm90``, ``gemm_sm100``) declare for
#: their by-value tensor-map parameters: 64 (CUDA 12 ``cuda.h``: ``alignas(64)``), which an
#: H100 runs through ``cvta.param`` like 128 (tests/gpu/test_tma_gpu.py, PARAM_FORMS).  Kept
#: apart from :data:`TENSORMAP_ALIGN` so the GEMMs' PTX stays byte for byte what it was.
GEMM_TENSORMAP_ALIGN = 64


def tensormap_param_type(align: int = TENSORMAP_ALIGN) -> str:
    """A by-value tensor-map parameter in :mod:`nvatom.runtime.launch` form
    (``b8[128]@<align>``)."""
    return f"b8[{TENSORMAP_BYTES}]@{align}"


def tensormap_param(k: Kernel, name: str) -> Reg:
    """Declare a by-value tensor-map parameter (``.param .align 128 .b8 name[128]``) and
    return its generic address (:func:`param_generic_address`) for TMA instructions."""
    return param_generic_address(k, k.byte_param(name, TENSORMAP_BYTES, TENSORMAP_ALIGN))


# ----------------------------------------------------------------------------- mbarrier
def mbarrier_init(k: Kernel, bar: Operand, count: Operand) -> None:
    """``mbarrier.init``: expected arrival count ``count`` (1 .. 2^20 - 1)."""
    if isinstance(count, int) and not 0 < count <= M.MAX_ARRIVAL_COUNT:
        raise TmaEmitError(f"mbarrier arrival count {count} outside 1..{M.MAX_ARRIVAL_COUNT}")
    k.ins(_spell(k, "mbarrier.init"), f"[{bar}]", count)


def fence_mbarrier_init(k: Kernel) -> None:
    """Make initialised mbarriers visible to the async proxy and to the other CTAs of the
    cluster (the only form of ``fence.mbarrier_init``)."""
    k.ins(_spell(k, "fence.mbarrier_init"))


def mbarrier_arrive(k: Kernel, bar: Operand, *, count: Operand | None = None,
                    scope: str = "cta") -> None:
    """Arrive (release at ``scope``) on a local barrier; the returned state is discarded."""
    if count is None:
        k.ins(_spell(k, "mbarrier.arrive", scope=scope), "_", f"[{bar}]")
    else:
        if isinstance(count, int) and not 0 < count <= M.MAX_ARRIVAL_COUNT:
            raise TmaEmitError(f"mbarrier arrive count {count} outside 1..{M.MAX_ARRIVAL_COUNT}")
        k.ins(_spell(k, "mbarrier.arrive.count", scope=scope), "_", f"[{bar}]", count)


def mbarrier_arrive_remote(k: Kernel, bar_cluster: Operand, *, scope: str = "cta") -> None:
    """Arrive on a barrier of another CTA of the cluster (address from ``mapa``).  Release at
    ``scope`` cta by default: ``cluster`` orders all of the thread's earlier memory operations
    cluster-wide first, which cost the 2-CTA GEMM half its speed (docs/perf.md, 3/3a)."""
    k.ins(_spell(k, "mbarrier.arrive.remote", scope=scope), "_", f"[{bar_cluster}]")


def _check_tx(tx: Operand) -> None:
    if isinstance(tx, int) and not 0 <= tx <= M.MAX_TX_COUNT:
        raise TmaEmitError(f"mbarrier transaction count {tx} outside 0..{M.MAX_TX_COUNT}")


def mbarrier_arrive_expect_tx(k: Kernel, bar: Operand, tx_bytes: Operand, *,
                              scope: str = "cta") -> None:
    """Arrive once and raise the barrier's pending transaction count by ``tx_bytes``: the
    bytes the TMA transfers completing on this barrier will deliver in this phase."""
    _check_tx(tx_bytes)
    k.ins(_spell(k, "mbarrier.arrive.expect_tx", scope=scope), "_", f"[{bar}]", tx_bytes)


def mbarrier_expect_tx(k: Kernel, bar: Operand, tx_bytes: Operand, *,
                       scope: str = "cta") -> None:
    """Raise the pending transaction count without arriving."""
    _check_tx(tx_bytes)
    k.ins(_spell(k, "mbarrier.expect_tx", scope=scope), f"[{bar}]", tx_bytes)


def mbarrier_wait_parity(k: Kernel, bar: Operand, parity: Operand, *,
                         scope: str = "cta") -> None:
    """Spin until the phase with parity ``parity`` (0/1) of ``bar`` has completed
    (``mbarrier.try_wait.parity`` in a loop; acquire at ``scope`` = cta or cluster)."""
    if isinstance(parity, int) and parity not in (0, 1):
        raise TmaEmitError(f"mbarrier phase parity {parity} is not 0 or 1")
    op = _spell(k, "mbarrier.try_wait.parity", scope=scope)
    p = k.reg("pred")
    top = k.fresh_label("mbar_wait")
    k.label(top)
    k.ins(op, p, f"[{bar}]", parity)
    k.bra(top, f"!{p}")


# ----------------------------------------------------------------------------- fences, groups
def fence_proxy_async(k: Kernel, space: str = "shared::cta") -> None:
    """Order generic-proxy accesses before later async-proxy ones (e.g. st.shared before a TMA
    store reads the tile); ``space`` is shared::cta, shared::cluster, global or '' (all)."""
    k.ins(_spell(k, "fence.proxy.async", space=f".{space}" if space else ""))


def fence_tensormap_release(k: Kernel, scope: str = "gpu") -> None:
    """Release this thread's generic-proxy writes of tensor maps to the tensormap proxy."""
    k.ins(_spell(k, "fence.proxy.tensormap.release", scope=scope))


def fence_tensormap_acquire(k: Kernel, tmap: Operand, scope: str = "gpu") -> None:
    """Acquire the 128-byte tensor map at generic address ``tmap`` before a TMA reads it."""
    k.ins(_spell(k, "fence.proxy.tensormap.acquire", scope=scope), f"[{tmap}]", 128)


def tensormap_cp_fenceproxy(k: Kernel, dst_global: Operand, src_shared: Operand,
                            scope: str = "gpu") -> None:
    """Copy a tensor map from shared to global memory with a release proxy fence (executed by
    a full warp: ``.sync.aligned``)."""
    k.ins(_spell(k, "tensormap.cp_fenceproxy", scope=scope), f"[{dst_global}]", f"[{src_shared}]",
          128)


def bulk_commit_group(k: Kernel) -> None:
    k.ins(_spell(k, "cp.async.bulk.commit_group"))


def bulk_wait_group(k: Kernel, n: int = 0, *, read: bool = True) -> None:
    """Wait until at most ``n`` bulk groups are pending (``.read``: only until their source
    reads are done, enough to reuse the shared-memory tile)."""
    if not isinstance(n, int) or isinstance(n, bool) or n < 0:
        raise TmaEmitError(f"bulk wait_group count {n!r} is not a non-negative integer")
    k.ins(_spell(k, "cp.async.bulk.wait_group", read=".read" if read else ""), n)


def cluster_sync(k: Kernel) -> None:
    """``barrier.cluster.arrive.release`` + ``wait.acquire``: every thread of every CTA of the
    cluster (e.g. after mbarrier init, before a multicast signals remote barriers)."""
    k.ins(_spell(k, "barrier.cluster.arrive"))
    k.ins(_spell(k, "barrier.cluster.wait"))


def cluster_ctarank(k: Kernel) -> Reg:
    r = k.reg("u32")
    k.need_feature("cluster", "%cluster_ctarank", TmaEmitError)
    k.ins("mov.u32", r, "%cluster_ctarank")
    return r


def create_policy(k: Kernel, mode: T.CacheMode | str, fraction: float = 1.0) -> Reg:
    """A 64-bit L2 cache policy (``createpolicy.fractional.L2::<mode>.b64``) for the
    ``.L2::cache_hint`` operand of a TMA copy."""
    m = T.CacheMode(mode) if isinstance(mode, str) else mode
    if m is T.CacheMode.NONE:
        raise TmaEmitError("CacheMode.NONE has no cache policy (emit no hint instead)")
    if not 0.0 < fraction <= 1.0:
        raise TmaEmitError(f"createpolicy fraction {fraction} outside (0, 1]")
    r = k.reg("b64")
    k.need_feature("createpolicy", "createpolicy.fractional", TmaEmitError)
    k.ins(f"createpolicy.fractional.L2::{m.value}.b64", r, repr(float(fraction)))
    return r


def prefetch_tensormap(k: Kernel, tmap: Operand, *, space: str = "") -> None:
    """Bring a tensor map into the descriptor cache: ``tmap`` is a generic address, or with
    ``space`` = 'param'/'const' the name of the parameter/constant holding it."""
    if space not in ("", "param", "const"):
        raise TmaEmitError(f"prefetch.tensormap has no state space '{space}'")
    k.need_feature("tma", "prefetch.tensormap", TmaEmitError)
    k.ins(f"prefetch{'.' + space if space else ''}.tensormap", f"[{tmap}]")


# ----------------------------------------------------------------------------- tensor copies
def _instr(direction: str, mode: str) -> T.TmaInstr:
    m = mode if mode.startswith(".") else "." + mode
    try:
        return T.tma_instr(direction, m)
    except T.AtomVerificationError as e:
        raise TmaEmitError(str(e)) from None


def _rank(instr: T.TmaInstr, coords: Sequence[Operand]) -> int:
    n = len(coords)
    for r in instr.ranks:
        if instr.coords(r) == n:
            return r
    want = sorted({instr.coords(r) for r in instr.ranks})
    shown = f"{want[0]}..{want[-1]}" if len(want) > 1 else str(want[0])
    raise TmaEmitError(
        f"a TMA {instr.direction}{instr.mode} takes {shown} coordinates, got {n}"
    )


def _vec(xs: Sequence[Operand]) -> str:
    return "{" + ", ".join(str(c) for c in xs) + "}"


#: ``cp.async.bulk.tensor`` load destinations: state space -> (the arch.FEATURES row it
#: needs, can it multicast); ptxas 13.0: "Feature 'cp.async.bulk.tensor with destination
#: state space as .shared::cta' requires PTX ISA .version 8.6 or later" (sm_90 included),
#: "Illegal modifier '.multicast::cluster' for instruction 'cp.async.bulk.tensor' with
#: '.shared::cta.global'"
LOAD_DESTINATIONS: dict[str, tuple[str, bool]] = {
    "shared::cluster": ("tma", True),
    "shared::cta": ("tma.shared_cta", False),
}


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
    mode: str | None = None,
    cta_group: int | None = None,
    target: Target | str | None = None,
    dst_space: str = "shared::cluster",
) -> None:
    """``cp.async.bulk.tensor.{N}d.{dst_space}.global.{mode}
    .mbarrier::complete_tx::bytes[.multicast::cluster][.cta_group::2][.L2::cache_hint]``.

    ``coords`` are the signed 32-bit element coordinates of the box origin (innermost first;
    ``.tile::gather4``: column and four rows); ``im2col_offsets`` are the 16-bit im2col
    operands (``.im2col``: rank - 2 of them, and the default mode when given;
    ``.im2col::w``/``::128``: wHalo and wOffset); ``multicast_mask`` (a 16-bit register)
    writes the tile to the same offset in every CTA of the mask and signals each one's
    barrier at the same offset; ``cache_policy`` is a 64-bit L2 policy
    (:func:`create_policy`).  ``dst_space`` ``shared::cta`` (PTX ISA 8.6) writes the issuing
    CTA's own shared memory and cannot multicast (ptxas rejects ``.multicast::cluster`` with
    it)."""
    if mode is None:
        mode = ".im2col" if im2col_offsets is not None else ".tile"
    if dst_space not in LOAD_DESTINATIONS:
        raise TmaEmitError(f"a TMA load writes {' or '.join(LOAD_DESTINATIONS)}, not "
                           f"'{dst_space}'")
    dst_feature, can_multicast = LOAD_DESTINATIONS[dst_space]
    if not can_multicast and multicast_mask is not None:
        raise TmaEmitError(f"a TMA load into {dst_space} cannot multicast")
    instr = _instr("load", mode)
    if instr.offsets_of and len(coords) < min(instr.ranks):
        raise TmaEmitError(
            f"{instr.mode.removeprefix('.')} needs a tensor of rank 3..5, got rank {len(coords)}"
        )
    rank = _rank(instr, coords)
    _gate(k, f"TMA load {instr.mode}", instr.feature, target)
    k.need_feature(dst_feature, f"TMA load into .{dst_space}", TmaEmitError)
    n_off = instr.offsets(rank)
    offs = list(im2col_offsets or ())
    if len(offs) != n_off:
        raise TmaEmitError(
            f"{instr.mode.removeprefix('.')} on a rank-{rank} tensor takes {n_off} offsets, "
            f"got {len(offs)}"
        )
    op = (f"cp.async.bulk.tensor.{rank}d.{dst_space}.global{instr.mode}"
          ".mbarrier::complete_tx::bytes")
    tail: list[str] = []
    if multicast_mask is not None:
        if not instr.multicast:
            raise TmaEmitError(f"TMA load {instr.mode} cannot multicast")
        op += ".multicast::cluster"
        tail.append(str(multicast_mask))
    if cta_group is not None:
        if cta_group not in (1, 2):
            raise TmaEmitError(f"cta_group {cta_group} is not 1 or 2")
        if cta_group == 2:
            _gate(k, "TMA load .cta_group::2", T.CTA_GROUP_FEATURE, target)
        op += f".cta_group::{cta_group}"
    if cache_policy is not None:
        op += ".L2::cache_hint"
        tail.append(str(cache_policy))
    bar_op = f"[{bar}]" + (f", {_vec(offs)}" if offs else "")
    k.ins(op, f"[{dst}]", f"[{tmap}, {_vec(coords)}]", bar_op, *tail)


def tma_prefetch(k: Kernel, tmap: Operand, coords: Sequence[Operand], *, mode: str = ".tile",
                 im2col_offsets: Sequence[Operand] | None = None,
                 cache_policy: Operand | None = None,
                 target: Target | str | None = None) -> None:
    """``cp.async.bulk.prefetch.tensor.{N}d.L2.global{mode}[.L2::cache_hint]``: bring the box
    a load of ``mode`` would read at ``coords`` into L2 (PTX ISA "cp.async.bulk.prefetch.tensor";
    the load modes of :data:`nvatom.atoms.tma.TMA_INSTRS` with their coordinate and im2col
    offset counts: ``.tile``/``.im2col`` on sm_90, ``.tile::gather4``/``.im2col::w[::128]``
    on the sm_100a family, as ptxas 13.0 has them)."""
    instr = _instr("load", mode)
    rank = _rank(instr, coords)
    _gate(k, f"TMA prefetch {instr.mode}", instr.feature, target)
    offs = list(im2col_offsets or ())
    if len(offs) != instr.offsets(rank):
        raise TmaEmitError(f"{instr.mode.removeprefix('.')} on a rank-{rank} tensor takes "
                           f"{instr.offsets(rank)} offsets, got {len(offs)}")
    op = f"cp.async.bulk.prefetch.tensor.{rank}d.L2.global{instr.mode}"
    args = [f"[{tmap}, {_vec(coords)}]"]
    if offs:
        args.append(_vec(offs))
    if cache_policy is not None:
        op += ".L2::cache_hint"
        args.append(str(cache_policy))
    k.ins(op, *args)


def _check_no_offsets(instr: T.TmaInstr) -> None:
    if instr.offsets_of:  # pragma: no cover - no store/reduce form takes offsets
        raise TmaEmitError(f"{instr.direction}{instr.mode} takes no im2col offsets")


def tma_store(k: Kernel, tmap: Operand, coords: Sequence[Operand], src: Operand, *,
              cache_policy: Operand | None = None, mode: str = ".tile",
              target: Target | str | None = None) -> None:
    """``cp.async.bulk.tensor.{N}d.global.shared::cta.{mode}.bulk_group``: the box at
    ``coords`` from the shared tile ``src`` (out-of-bounds elements are not written)."""
    instr = _instr("store", mode)
    rank = _rank(instr, coords)
    _gate(k, f"TMA store {instr.mode}", instr.feature, target)
    _check_no_offsets(instr)
    op = f"cp.async.bulk.tensor.{rank}d.global.shared::cta{instr.mode}.bulk_group"
    tail = []
    if cache_policy is not None:
        op += ".L2::cache_hint"
        tail.append(str(cache_policy))
    k.ins(op, f"[{tmap}, {_vec(coords)}]", f"[{src}]", *tail)


def tma_reduce(k: Kernel, red_op: str | T.TmaReduceKind, tmap: Operand,
               coords: Sequence[Operand], src: Operand, *,
               cache_policy: Operand | None = None, mode: str = ".tile",
               target: Target | str | None = None, data_type: object = None) -> None:
    """``cp.reduce.async.bulk.tensor.{N}d.global.shared::cta.{op}.{mode}.bulk_group``:
    global box = global box (op) shared tile, element-wise, each element atomically
    (relaxed, gpu scope).  The element type is the tensor map's; with ``data_type`` the
    reduction must be defined on it (:data:`nvatom.atoms.tma.REDUCE_TYPES`)."""
    try:
        kind = T.reduce_op(red_op)
        if data_type is not None:
            T.check_reduce_type(kind, data_type)
    except T.AtomVerificationError as e:
        raise TmaEmitError(str(e)) from None
    name = T.ptx_qualifiers(kind)[0]  # type: ignore[index]
    instr = _instr("reduce", mode)
    rank = _rank(instr, coords)
    _gate(k, f"TMA reduce {instr.mode}", instr.feature, target)
    op = (f"cp.reduce.async.bulk.tensor.{rank}d.global.shared::cta{name}{instr.mode}"
          ".bulk_group")
    tail = []
    if cache_policy is not None:
        op += ".L2::cache_hint"
        tail.append(str(cache_policy))
    k.ins(op, f"[{tmap}, {_vec(coords)}]", f"[{src}]", *tail)


# ----------------------------------------------------------------------------- mutation
def tensormap_replace(k: Kernel, tmap: Operand, update: T.TmaUpdate, *,
                      space: str = "global", target: Target | str | None = None) -> None:
    """``tensormap.replace.tile.{global_address|global_dim|global_stride}.{space}.b1024`` on
    the tensor map at ``tmap`` (a 64-bit global or 32-bit shared::cta address); ``update``
    comes from :func:`nvatom.atoms.tma.tma_update`, which enforces the mutation rule."""
    if space not in ("global", "shared::cta"):
        raise TmaEmitError(f"tensormap.replace has no state space '{space}'")
    if not isinstance(update, T.TmaUpdate):
        raise TmaEmitError(f"{update!r} is not a TmaUpdate (build it with tma_update)")
    _gate(k, "tensormap.replace", "tensormap.replace", target)
    ty = "b32" if update.kind is T.TmaUpdateKind.DIM else "b64"
    op = f"tensormap.replace.tile.{update.ptx_field}.{space}.b1024.{ty}"
    ordn = update.ordinal
    if ordn is None:
        k.ins(op, f"[{tmap}]", update.value)
    else:
        k.ins(op, f"[{tmap}]", ordn, update.value)


def tensormap_update_sequence(k: Kernel, tmap_global: Operand,
                              updates: Sequence[T.TmaUpdate], *,
                              smem_copy: Operand | None = None, scope: str = "gpu",
                              target: Target | str | None = None) -> None:
    """The rebind sequence of descriptor mutation (docs/spec-deviations.md#tma-descriptor-mutation):
    the updates (address, dims, strides, in that order), then the release to the tensormap
    proxy and the acquire that makes the map safe for the next ``cp.async.bulk.tensor`` of
    this thread.

    Without ``smem_copy`` the map is edited in place in global memory
    (``tensormap.replace….global`` + ``fence.proxy.tensormap::generic.release``); with it,
    the 128 bytes at the shared address ``smem_copy`` are edited and published with
    ``tensormap.cp_fenceproxy`` (one full warp must execute this path)."""
    order = {T.TmaUpdateKind.BASE_POINTER: 0, T.TmaUpdateKind.DIM: 1, T.TmaUpdateKind.STRIDE: 2}
    ups = sorted(updates, key=lambda u: (order[u.kind], u.axis or 0))
    if smem_copy is None:
        for u in ups:
            tensormap_replace(k, tmap_global, u, space="global", target=target)
        fence_tensormap_release(k, scope)
    else:
        for u in ups:
            tensormap_replace(k, smem_copy, u, space="shared::cta", target=target)
        tensormap_cp_fenceproxy(k, tmap_global, smem_copy, scope)
    fence_tensormap_acquire(k, tmap_global, scope)


# ----------------------------------------------------------------------------- atom lowering
def lower_tma_load(k: Kernel, atom: T.ExecTmaAtom, dst: Operand, tmap: Operand,
                   coords: Sequence[Operand], *, expect_tx: bool = True,
                   multicast_mask: Operand | None = None,
                   im2col_offsets: Sequence[Operand] | None = None,
                   cache_policy: Operand | None = None,
                   target: Target | str | None = None) -> None:
    """Lower an executable TMA load: ``arrive.expect_tx`` on the bound barrier with the
    atom's byte count (unless ``expect_tx`` is False: another thread announces it), then the
    copy in the atom's mode.  The CTA mask is the bound one unless a register is given; the
    cache policy register is created from the atom's cache mode unless given."""
    if atom.atom.kind is not T.TmaKind.LOAD:
        raise TmaEmitError(f"lower_tma_load got a {atom.mnemonic} atom")
    if len(coords) != atom.atom.rank:
        raise TmaEmitError(
            f"the atom has rank {atom.atom.rank} but {len(coords)} coordinates were given")
    assert atom.barrier is not None
    bar = shared_address(k, atom.barrier.symbol, atom.barrier.offset)
    if expect_tx:
        mbarrier_arrive_expect_tx(k, bar, atom.tx_bytes)
    mask: Operand | None = multicast_mask
    if mask is None and atom.multicast_mask is not None:
        mask = k.reg("b16")
        k.ins("mov.b16", mask, atom.multicast_mask)
    if cache_policy is None and atom.cache_mode is not T.CacheMode.NONE:
        cache_policy = create_policy(k, atom.cache_mode)
    cta_group = 2 if atom.atom.mode is T.TmaLoadMode.TMA_LOAD_TWO_CTA else None
    tma_load(k, dst, tmap, coords, bar, multicast_mask=mask, cache_policy=cache_policy,
             im2col_offsets=im2col_offsets, mode=atom.atom.ptx_mode, cta_group=cta_group,
             target=target)


def lower_tma_store(k: Kernel, atom: T.ExecTmaAtom, src: Operand, tmap: Operand,
                    coords: Sequence[Operand], *,
                    target: Target | str | None = None) -> None:
    """Lower an executable TMA store: the copy, then ``commit_group`` (wait with
    :func:`bulk_wait_group` before reusing ``src`` or exiting)."""
    if atom.atom.kind is not T.TmaKind.STORE:
        raise TmaEmitError(f"lower_tma_store got a {atom.mnemonic} atom")
    policy = None if atom.cache_mode is T.CacheMode.NONE else create_policy(k, atom.cache_mode)
    tma_store(k, tmap, coords, src, cache_policy=policy, mode=atom.atom.ptx_mode, target=target)
    bulk_commit_group(k)


def lower_tma_reduce(k: Kernel, atom: T.ExecTmaAtom, src: Operand, tmap: Operand,
                     coords: Sequence[Operand], *,
                     target: Target | str | None = None) -> None:
    """Lower an executable TMA reduction (the atom's reduce kind), then ``commit_group``."""
    if atom.atom.kind is not T.TmaKind.REDUCE:
        raise TmaEmitError(f"lower_tma_reduce got a {atom.mnemonic} atom")
    policy = None if atom.cache_mode is T.CacheMode.NONE else create_policy(k, atom.cache_mode)
    tma_reduce(k, atom.atom.mode, tmap, coords, src,  # type: ignore[arg-type]
               cache_policy=policy, target=target)
    bulk_commit_group(k)
