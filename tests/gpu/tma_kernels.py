"""Test kernels that prove the TMA lowering on the GPU (tests/gpu/test_tma_gpu.py).

A test fixture, not a kernel of ``nvatom.kernels``: only the GPU tests use it.

Each builder returns a :class:`~nvatom.ptx.builder.Module` for sm_90a whose kernels use only
the emitters of :mod:`nvatom.ptx.tma_emit` (spellings from the atom tables) and plain PTX for
the glue (thread index, 16-byte shared <-> global copies).  Tensor maps are 128-byte by-value
parameters (``.param .align 64 .b8 tmap[128]``, CUDA's ``__grid_constant__ CUtensorMap``)
or, for the mutation kernels, 128 bytes in global memory.  Every kernel runs one CTA of
:data:`THREADS` threads unless it says otherwise; thread 0 drives the TMA, all threads copy.

* :func:`load_store_module` - TMA load of one box (optionally through an executable atom, a
  prefetched descriptor, an L2 cache policy, a ``cvta.param`` tensor-map address), the shared
  tile dumped byte for byte to global memory, then optionally TMA-stored to a second map;
* :func:`reduce_module` - a tile copied global -> shared with ordinary loads, then one TMA
  reduction per kernel (one kernel per reduce kind);
* :func:`multicast_module` - a cluster of ``n`` CTAs; CTA 0 multicasts one box to all;
* :func:`im2col_module` - an im2col load with two 16-bit offsets (rank-4 NHWC);
* :func:`mutate_module` - the tensor map in global memory is rebound on the device
  (address, one dimension, one stride) in place or through a shared-memory copy, then used.
"""

from __future__ import annotations

from collections.abc import Sequence

from nvatom.atoms import tma as T
from nvatom.ptx import tma_emit as TE
from nvatom.ptx.builder import Kernel, Module, Reg

__all__ = [
    "THREADS",
    "TMAP_ALIGN",
    "TMAP_BYTES",
    "im2col_module",
    "load_store_module",
    "multicast_module",
    "mutate_module",
    "reduce_module",
]

THREADS = 128
TMAP_BYTES = TE.TENSORMAP_BYTES
TMAP_ALIGN = TE.TENSORMAP_ALIGN  # CUDA 13 cuda.h: alignas(128); nvcc declares .align 128
_TARGET = "sm_90a"
_FEATURES = ("tma", "mbarrier.tx", "cluster")


def _module(*extra: str) -> Module:
    return Module(_TARGET, features=_FEATURES + extra)


def _tid(k: Kernel) -> Reg:
    t = k.reg("u32")
    k.ins("mov.u32", t, "%tid.x")
    return t


def _is_zero(k: Kernel, r: Reg) -> Reg:
    p = k.reg("pred")
    k.ins("setp.eq.u32", p, r, 0)
    return p


def _thread_tile_barrier(k: Kernel) -> tuple[Reg, Reg, Reg, Reg]:
    """``%tid.x``, the leader predicate (thread 0) and the shared addresses of the kernel's
    ``tile`` and ``mbar`` variables."""
    tid = _tid(k)
    leader = _is_zero(k, tid)
    return tid, leader, TE.shared_address(k, "tile"), TE.shared_address(k, "mbar")


def _copy16(k: Kernel, tid: Reg, nbytes: int, *, src: Reg, dst: Reg, to_shared: bool) -> None:
    """All threads: copy ``nbytes`` (a multiple of 16) in 16-byte chunks, chunk i by thread
    i mod THREADS; ``src``/``dst`` are u64 global or u32 shared addresses."""
    if nbytes % 16:
        raise ValueError(f"copy of {nbytes} bytes is not a multiple of 16")
    i = k.reg("u32")
    k.ins("mov.u32", i, tid)
    top, done = k.fresh_label("copy"), k.fresh_label("copy_done")
    k.label(top)
    p = k.reg("pred")
    k.ins("setp.ge.u32", p, i, nbytes // 16)
    k.bra(done, p)
    off = k.reg("u32")
    k.ins("shl.b32", off, i, 4)
    off64 = k.reg("u64")
    k.ins("cvt.u64.u32", off64, off)
    g = k.reg("u64")
    s = k.reg("u32")
    v = k.regs("b32", 4)
    if to_shared:
        k.ins("add.s64", g, src, off64)
        k.ins("add.u32", s, dst, off)
        k.ins("ld.global.v4.b32", v, f"[{g}]")
        k.ins("st.shared.v4.b32", f"[{s}]", v)
    else:
        k.ins("add.u32", s, src, off)
        k.ins("add.s64", g, dst, off64)
        k.ins("ld.shared.v4.b32", v, f"[{s}]")
        k.ins("st.global.v4.b32", f"[{g}]", v)
    k.ins("add.u32", i, i, THREADS)
    k.bra(top, uni=False)
    k.label(done)


def _coord_params(k: Kernel, stem: str, n: int) -> list[Reg]:
    return [k.ld_param(k.param(f"{stem}{i}", "s32")) for i in range(n)]


def _init_barrier(k: Kernel, leader: Reg, bar: Reg, skip_stem: str) -> None:
    skip = k.fresh_label(skip_stem)
    k.bra(skip, f"!{leader}")
    TE.mbarrier_init(k, bar, 1)
    TE.fence_mbarrier_init(k)
    k.label(skip)


def load_store_module(
    rank: int,
    box_bytes: int,
    *,
    name: str = "tma_load_store",
    store: bool = False,
    atom: T.ExecTmaAtom | None = None,
    tmap_address: str = "cvta",
    tmap_align: int = TMAP_ALIGN,
    prefetch: bool = False,
    cache_mode: T.CacheMode = T.CacheMode.NONE,
) -> Module:
    """One kernel ``name(tmap_in, tmap_out, out, c0.., d0..)``: TMA-load the box at
    ``(c0..)`` of ``tmap_in`` into a 1024-byte-aligned shared tile, dump the tile's
    ``box_bytes`` to ``out``, and with ``store`` TMA-store the tile at ``(d0..)`` of
    ``tmap_out``.  ``tmap_address``: 'cvta' (``mov`` + ``cvta.param.u64``, what nvcc emits
    for a ``__grid_constant__`` map) or 'param' (the bare ``mov.u64 r, tmap``, which faults
    on the GPU: docs/tma.md); ``tmap_align`` the parameter's alignment.  With ``atom`` the
    load is lowered from the executable atom (its byte count, mode and cache mode)."""
    m = _module()
    k = m.kernel(name)
    k.reqntid = (THREADS,)
    tin = k.byte_param("tmap_in", TMAP_BYTES, tmap_align)
    tout = k.byte_param("tmap_out", TMAP_BYTES, tmap_align)
    out = k.ld_param(k.param("out", "u64"))
    c = _coord_params(k, "c", rank)
    d = _coord_params(k, "d", rank)
    k.shared("tile", max(box_bytes, 16), align=1024)
    k.shared("mbar", 8, align=8)
    addr = k.param_address if tmap_address == "param" else (
        lambda p: TE.param_generic_address(k, p))
    if tmap_address not in ("param", "cvta"):
        raise ValueError(f"tmap_address must be 'param' or 'cvta', got {tmap_address!r}")
    tm_in, tm_out = addr(tin), addr(tout)
    tid, leader, tile, bar = _thread_tile_barrier(k)
    _init_barrier(k, leader, bar, "init")
    k.ins("bar.sync", 0)
    issue = k.fresh_label("issue_done")
    k.bra(issue, f"!{leader}")
    if prefetch:
        TE.prefetch_tensormap(k, tm_in)
    if atom is not None:
        T_ = atom.atom
        if T_.rank != rank or T_.tx_bytes != box_bytes:
            raise ValueError(f"atom rank {T_.rank} / {T_.tx_bytes} bytes != {rank} / {box_bytes}")
        TE.lower_tma_load(k, atom, tile, tm_in, c, target=_TARGET)
    else:
        TE.mbarrier_arrive_expect_tx(k, bar, box_bytes)
        policy = None if cache_mode is T.CacheMode.NONE else TE.create_policy(k, cache_mode)
        TE.tma_load(k, tile, tm_in, c, bar, cache_policy=policy, target=_TARGET)
    k.label(issue)
    TE.mbarrier_wait_parity(k, bar, 0)
    _copy16(k, tid, box_bytes, src=tile, dst=out, to_shared=False)
    if store:
        done = k.fresh_label("store_done")
        k.bra(done, f"!{leader}")
        TE.tma_store(k, tm_out, d, tile, target=_TARGET)
        TE.bulk_commit_group(k)
        TE.bulk_wait_group(k, 0, read=False)
        k.label(done)
    return m


def reduce_module(rank: int, box_bytes: int) -> Module:
    """One kernel ``tma_reduce_<op>(tmap, src, c0..)`` per reduce kind: ``src`` (the tile's
    bytes in global memory) -> shared with ordinary loads, ``fence.proxy.async``, then thread
    0 reduces the tile into the box at ``(c0..)`` and waits for the bulk group."""
    m = _module()
    for kind in T.TmaReduceKind:
        op = kind.name.removeprefix("TMA_REDUCE_").lower()
        k = m.kernel(f"tma_reduce_{op}")
        k.reqntid = (THREADS,)
        tm = TE.tensormap_param(k, "tmap")
        src = k.ld_param(k.param("src", "u64"))
        c = _coord_params(k, "c", rank)
        k.shared("tile", max(box_bytes, 16), align=1024)
        tid = _tid(k)
        leader = _is_zero(k, tid)
        tile = TE.shared_address(k, "tile")
        _copy16(k, tid, box_bytes, src=src, dst=tile, to_shared=True)
        TE.fence_proxy_async(k, "shared::cta")  # each writer: its st.shared before the TMA
        k.ins("bar.sync", 0)
        done = k.fresh_label("done")
        k.bra(done, f"!{leader}")
        TE.tma_reduce(k, kind, tm, c, tile, target=_TARGET)
        TE.bulk_commit_group(k)
        TE.bulk_wait_group(k, 0, read=False)
        k.label(done)
    return m


def multicast_module(n: int, rank: int, box_bytes: int) -> Module:
    """``tma_multicast{n}(tmap, out, c0..)``, a cluster of ``n`` CTAs (``.reqnctapercluster``):
    every CTA initialises its barrier and expects ``box_bytes``; after a cluster barrier, CTA
    0 issues one load with CTA mask ``2^n - 1``; each CTA waits on its own barrier and dumps
    its tile to ``out + ctaid * box_bytes``."""
    if not 1 <= n <= T.MAX_MULTICAST:
        raise ValueError(f"cluster size {n} outside 1..{T.MAX_MULTICAST}")
    m = _module()
    k = m.kernel(f"tma_multicast{n}")
    k.reqntid = (THREADS,)
    k.reqnctapercluster = (n, 1, 1)
    tm = TE.tensormap_param(k, "tmap")
    out = k.ld_param(k.param("out", "u64"))
    c = _coord_params(k, "c", rank)
    k.shared("tile", max(box_bytes, 16), align=1024)
    k.shared("mbar", 8, align=8)
    tid, leader, tile, bar = _thread_tile_barrier(k)
    skip = k.fresh_label("init")
    k.bra(skip, f"!{leader}")
    TE.mbarrier_init(k, bar, 1)
    TE.fence_mbarrier_init(k)
    TE.mbarrier_arrive_expect_tx(k, bar, box_bytes)
    k.label(skip)
    TE.cluster_sync(k)
    rank_in_cluster = TE.cluster_ctarank(k)
    first = _is_zero(k, rank_in_cluster)
    issuer = k.reg("pred")
    k.ins("and.pred", issuer, first, leader)
    done = k.fresh_label("issued")
    k.bra(done, f"!{issuer}")
    mask = k.reg("b16")
    k.ins("mov.b16", mask, (1 << n) - 1)
    TE.tma_load(k, tile, tm, c, bar, multicast_mask=mask, target=_TARGET)
    k.label(done)
    TE.mbarrier_wait_parity(k, bar, 0)
    cta = k.reg("u32")
    k.ins("mov.u32", cta, "%ctaid.x")
    off = k.reg("u64")
    k.ins("mul.wide.u32", off, cta, box_bytes)
    dst = k.reg("u64")
    k.ins("add.s64", dst, out, off)
    _copy16(k, tid, box_bytes, src=tile, dst=dst, to_shared=False)
    TE.cluster_sync(k)  # no CTA leaves while a multicast may still target it
    return m


def im2col_module(rank: int, box_bytes: int) -> Module:
    """``tma_im2col(tmap, out, c0.., o0..)``: an im2col load at coordinates ``(c0..)`` with
    ``rank - 2`` im2col offsets (u32 parameters, narrowed to 16 bits)."""
    m = _module()
    k = m.kernel("tma_im2col")
    k.reqntid = (THREADS,)
    tm = TE.tensormap_param(k, "tmap")
    out = k.ld_param(k.param("out", "u64"))
    c = _coord_params(k, "c", rank)
    offs = []
    for i in range(rank - 2):
        o32 = k.ld_param(k.param(f"o{i}", "u32"))
        o16 = k.reg("b16")
        k.ins("cvt.u16.u32", o16, o32)
        offs.append(o16)
    k.shared("tile", max(box_bytes, 16), align=1024)
    k.shared("mbar", 8, align=8)
    tid, leader, tile, bar = _thread_tile_barrier(k)
    _init_barrier(k, leader, bar, "init")
    k.ins("bar.sync", 0)
    issue = k.fresh_label("issued")
    k.bra(issue, f"!{leader}")
    TE.mbarrier_arrive_expect_tx(k, bar, box_bytes)
    TE.tma_load(k, tile, tm, c, bar, im2col_offsets=offs, target=_TARGET)
    k.label(issue)
    TE.mbarrier_wait_parity(k, bar, 0)
    _copy16(k, tid, box_bytes, src=tile, dst=out, to_shared=False)
    return m


def mutate_module(rank: int, box_bytes: int, updates: Sequence[tuple[str, int | None]]) -> Module:
    """Two kernels ``tma_mutate_global`` / ``tma_mutate_shared`` ``(gtmap, out, v0.., c0..)``:
    the tensor map at the global address ``gtmap`` is rebound on the device with one update
    per ``(field, axis)`` of ``updates`` (values ``v<i>``: u64 parameters), then a box at
    ``(c0..)`` is loaded through it and dumped to ``out``.  '_global' edits the map in place
    (thread 0); '_shared' copies it to shared memory, edits it there (thread 0) and publishes
    it with ``tensormap.cp_fenceproxy`` (warp 0)."""
    m = _module("tensormap.replace")
    for via in ("global", "shared"):
        k = m.kernel(f"tma_mutate_{via}")
        k.reqntid = (THREADS,)
        gtmap = k.ld_param(k.param("gtmap", "u64"))
        out = k.ld_param(k.param("out", "u64"))
        vals = []
        for i, (field, _axis) in enumerate(updates):
            v64 = k.ld_param(k.param(f"v{i}", "u64"))
            if field in ("dim", "global_dim"):  # a b32 operand; address and stride are b64
                v32 = k.reg("b32")
                k.ins("cvt.u32.u64", v32, v64)
                vals.append(v32)
            else:
                vals.append(v64)
        ups = [T.tma_update(f, v, a, rank=rank) for (f, a), v in zip(updates, vals, strict=True)]
        c = _coord_params(k, "c", rank)
        k.shared("tile", max(box_bytes, 16), align=1024)
        k.shared("tmap_smem", TMAP_BYTES, align=128)
        k.shared("mbar", 8, align=8)
        tid, leader, tile, bar = _thread_tile_barrier(k)
        if via == "global":
            skip = k.fresh_label("edit")
            k.bra(skip, f"!{leader}")
            TE.tensormap_update_sequence(k, gtmap, ups, target=_TARGET)
            k.label(skip)
        else:
            warp = k.reg("u32")
            k.ins("shr.u32", warp, tid, 5)
            w0 = _is_zero(k, warp)
            skip = k.fresh_label("edit")
            k.bra(skip, f"!{w0}")
            smap = TE.shared_address(k, "tmap_smem")
            _copy16(k, tid, TMAP_BYTES, src=gtmap, dst=smap, to_shared=True)  # lanes 0-7
            k.ins("bar.warp.sync", "0xffffffff")
            one = k.fresh_label("one")
            k.bra(one, f"!{leader}")
            for u in ups:
                TE.tensormap_replace(k, smap, u, space="shared::cta", target=_TARGET)
            k.label(one)
            k.ins("bar.warp.sync", "0xffffffff")
            TE.tensormap_cp_fenceproxy(k, gtmap, smap)
            TE.fence_tensormap_acquire(k, gtmap)
            k.label(skip)
        _init_barrier(k, leader, bar, "init")
        k.ins("bar.sync", 0)
        issue = k.fresh_label("issued")
        k.bra(issue, f"!{leader}")
        TE.mbarrier_arrive_expect_tx(k, bar, box_bytes)
        TE.tma_load(k, tile, gtmap, c, bar, target=_TARGET)
        k.label(issue)
        TE.mbarrier_wait_parity(k, bar, 0)
        _copy16(k, tid, box_bytes, src=tile, dst=out, to_shared=False)
    return m
