"""SM90 GEMM: TMA -> 128B-swizzled shared memory -> WGMMA, warp-specialised and persistent.

``D (M x N) = A (M x K) @ B (K x N)`` with f32 accumulation, built only from nvatom's atoms:

* **MMA**: one ``wgmma.mma_async`` form of :mod:`nvatom.atoms.sm90`
  (``sm90.mma.m64n<BN>k16.ss.f32.bf16.bf16``, ``...k32.ss.f32.e4m3.e4m3``), emitted through
  :class:`nvatom.ptx.wgmma_emit.WgmmaSequence` (fence -> mma_async -> commit -> wait, checked).
* **Shared-memory tiles**: :func:`nvatom.atoms.smem.smem_layout` (K-major A and B,
  SW128) and, for an MN-major B (``b`` row-major K x N), the SW128 MN-major atom tiled
  K-first (``tile_to_shape(..., order=(1, 0))``) so that each 64 x 64 TMA box lands as one
  contiguous 8 KB block.  The WGMMA descriptors (start address per stage / K step, LBO, SBO,
  swizzle) are derived from those layouts by :func:`nvatom.descriptors.wgmma.make_wgmma_desc`.
* **Copies**: TMA loads and stores and mbarriers from :mod:`nvatom.ptx.tma_emit`; tensor maps
  are :class:`nvatom.descriptors.tma.TensorMap` (validated before the driver sees them).
* **Epilogue**: accumulator fragment (:mod:`nvatom.atoms.wgmma_fragments`) -> 16-bit pairs
  -> ``stmatrix.x4`` (:mod:`nvatom.atoms.copy`, :func:`nvatom.ptx.copy_emit.emit_matrix_copy`)
  into SW128 staging tiles -> ``fence.proxy.async`` -> TMA store.  f32 output uses
  ``st.shared.v2.f32`` (stmatrix moves 16-bit elements only).

**Kernel structure** (PTX ISA "wgmma", "cp.async.bulk.tensor", "mbarrier", "setmaxnreg"),
one module of :mod:`nvatom.kernels.sm90` per piece of :func:`build_gemm_sm90`:
:mod:`~nvatom.kernels.sm90.skeleton` (``_prologue``: parameters, shared-memory map, tile
counts, barriers; ``_exit``), :mod:`~nvatom.kernels.sm90.scheduler` (the tile loop),
:mod:`~nvatom.kernels.sm90.producer`, :mod:`~nvatom.kernels.sm90.consumer` (the main loops of
``mainloop*`` and the epilogue of :mod:`~nvatom.kernels.sm90.epilogue`).
``1 + C`` warpgroups.  Warpgroup 0 is the producer: ``setmaxnreg.dec`` to ``producer_regs``,
then one thread loops over the CTA's tiles and K blocks: wait ``empty[s]``,
``mbarrier.arrive.expect_tx(full[s], stage bytes)``, TMA A and B into stage ``s``.
Warpgroups 1..C are consumers (``setmaxnreg.inc`` to ``consumer_regs``), each owning 64 rows
of the ``64C x BN`` CTA tile: wait ``full[s]``, 4 WGMMAs (one K block of 128 bytes),
commit, ``wait_group 1`` and release the *previous* stage (so one WGMMA group stays in
flight), then the epilogue.  Tiles are visited persistently (tile = ctaid + i * nctaid) in a
grouped order: ``raster_group`` M-blocks share each N sweep, keeping A and B panels in L2.
A cluster of 2 along M (``cluster_m=2``) multicasts each B K-block: each CTA loads half of
the B box and broadcasts it to both CTAs; the ``empty`` barriers then count the consumer
warpgroups of both CTAs (released with ``mbarrier.arrive.shared::cluster`` via ``mapa``).

``schedule="pingpong"`` (:func:`_consumer_pingpong`) gives each consumer warpgroup its own
128-row tile instead (two m64 accumulators), the CTA's tiles alternating between them and
their main loops ordered by named barriers, so one's epilogue runs under the other's WGMMAs.

FP8 (``.e4m3`` / ``.e5m2``, either type on either side; :data:`FP8_DTYPES`): WGMMA's FP8
accumulation keeps fewer bits than f32, so by default the consumers *promote*: per K block
and per N part they let WGMMA sum into a temporary f32 fragment (scale-d 0 on the first
instruction) and add it into the tile's f32 accumulators with ``add.f32``
(:func:`_mainloop_promoted`; the temporary -> accumulator map from the accumulator fragment,
:func:`_promote_map`).  ``promote=0`` is fast accumulation.  Scales are per tensor (one f32
each, multiplied in the epilogue) or row-wise (``scale_a[m] * scale_b[n]``,
:func:`_row_scale`).  docs/perf.md, "FP8", has the measurements behind the defaults.

Ragged M, N and K are handled by TMA bounds: loads outside the tensor are zero-filled (and
still counted in the transaction bytes), stores outside it are dropped.  TMA's rules on the
host side: every row pitch a multiple of 16 bytes, so K (and N) a multiple of 8 for 16-bit
and of 16 for 8-bit elements (f32 output: N a multiple of 4).

Synchronisation and register-budget instructions come from :mod:`nvatom.ptx.sync_emit`:
``setmaxnreg``, ``bar.sync id, count`` for one warpgroup, ``mapa``,
``barrier.cluster.arrive/wait``, ``cvt.rn.{bf16x2,f16x2}.f32``; the mbarrier and TMA ones from
:mod:`nvatom.ptx.tma_emit` (the remote arrive with CTA-scope release: the ``.release.cluster``
form halves the speed, docs/perf.md).  The tensor maps' addresses
are ``cvta.param.u64`` of the by-value parameters (the bare ``mov.u64`` faulted on an H100).

Sources: PTX ISA 8.x, "wgmma.mma_async", "Matrix Descriptor Format", "cp.async.bulk.tensor",
"mbarrier", "setmaxnreg", "stmatrix", "mapa", "barrier.cluster"; CUDA Driver API
"cuTensorMapEncodeTiled", "cuLaunchKernelEx".
"""

from __future__ import annotations

import dataclasses

from nvatom.kernels.sm90.config import GemmSm90Config
from nvatom.kernels.sm90.consumer import _consumer, _consumer_pingpong
from nvatom.kernels.sm90.epilogue import _check_c_offsets
from nvatom.kernels.sm90.mainloop_rs import _check_rs_offsets
from nvatom.kernels.sm90.pipeline import stage_ring
from nvatom.kernels.sm90.plan import gemm_sm90_plan
from nvatom.kernels.sm90.producer import _producer
from nvatom.kernels.sm90.skeleton import _exit, _prologue
from nvatom.ptx.builder import Module

__all__ = [
    "build_gemm_sm90",
]


def build_gemm_sm90(cfg: GemmSm90Config, target_: str = "sm_90a") -> Module:
    """The kernel ``cfg.name(tmap_a, tmap_b, tmap_d, M, N, K[, scale_a, scale_b])``: a
    prologue (parameters, shared-memory map, tile counts, barriers), then warpgroup 0 runs
    :func:`_producer` and warpgroups 1..C run :func:`_consumer` (main loop and
    :func:`_epilogue`), all leaving through :func:`_exit`."""
    plan = gemm_sm90_plan(cfg)
    _check_c_offsets(cfg, plan)
    feats = ["wgmma", "tma", "mbarrier.tx", "setmaxnreg", "stmatrix"]
    if cfg.promote_rs:
        _check_rs_offsets(cfg, plan)
        feats.append("ldmatrix")
    if cfg.cluster_m > 1:
        feats.append("cluster")
    if cfg.grouped:  # fence.proxy.tensormap::generic (PTX 8.3, the tensormap-edit family)
        feats.append("tensormap.replace")
    mod = Module(target_, features=feats)
    b = _prologue(mod.kernel(cfg.name), cfg, plan, target_)
    b = dataclasses.replace(b, ring=stage_ring(b.k, cfg, b.smem, b.off_full, b.off_empty,
                                               b.rank))
    pp = b.k.reg("pred")
    b.k.ins("setp.eq.u32", pp, b.wg, 0)
    b.k.bra(b.producer_label, pp)
    if cfg.pingpong:
        _consumer_pingpong(b)
    else:
        _consumer(b)
    b.k.label(b.producer_label)
    _producer(b)
    b.ring.check_arrivals()
    _exit(b)
    return mod
