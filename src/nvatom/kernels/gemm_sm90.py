"""SM90 GEMM: TMA -> 128B-swizzled shared memory -> WGMMA, warp-specialised and persistent.

``D (M x N) = A (M x K) @ B (K x N)`` with f32 accumulation, built only from nvatom's atoms:

* **MMA**: one ``wgmma.mma_async`` form of :mod:`nvatom.atoms.sm90`
  (``sm90.mma.m64n<BN>k16.ss.f32.bf16.bf16``, ``...k32.ss.f32.e4m3.e4m3``), emitted through
  :class:`nvatom.ptx.wgmma_emit.WgmmaSequence` (fence -> mma_async -> commit -> wait, checked).
* **Shared-memory tiles**: :func:`nvatom.atoms.smem.smem_layout` (K-major A and B,
  SW128) and, for an MN-major B (``b`` row-major K x N), the SW128 MN-major atom tiled
  K-first (``tile_to_shape(..., order=(1, 0))``) so that each 64 x 64 TMA box lands as one
  contiguous 8 KB block.  The WGMMA descriptors (start address per stage / K step, LBO, SBO,
  swizzle) are derived from those layouts by :func:`nvatom.descriptors.wgmma.make_gmma_desc`.
* **Copies**: TMA loads and stores and mbarriers from :mod:`nvatom.ptx.tma_emit`; tensor maps
  are :class:`nvatom.descriptors.tma.TensorMap` (validated before the driver sees them).
* **Epilogue**: accumulator fragment (:mod:`nvatom.atoms.wgmma_fragments`) -> 16-bit pairs
  -> ``stmatrix.x4`` (:mod:`nvatom.atoms.copy`, :func:`nvatom.ptx.copy_emit.emit_matrix_copy`)
  into SW128 staging tiles -> ``fence.proxy.async`` -> TMA store.  f32 output uses
  ``st.shared.v2.f32`` (stmatrix moves 16-bit elements only).

**Kernel structure** (PTX ISA "wgmma", "cp.async.bulk.tensor", "mbarrier", "setmaxnreg"),
one function per piece of :func:`build_gemm_sm90`: :func:`_prologue` (parameters,
shared-memory map, tile counts, barriers), :func:`_producer`, :func:`_consumer` (main loop)
with :func:`_epilogue_setup` / :func:`_epilogue`, and :func:`_exit`.
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
import functools
from collections.abc import Sequence
from typing import Any

from nvatom.atoms.copy import ASYNC_COPIES, MATRIX_COPIES
from nvatom.atoms.sm90 import FORMS, WgmmaForm
from nvatom.atoms.smem import smem_layout, smem_swizzle
from nvatom.atoms.wgmma_fragments import WARPGROUP, accumulator_coord
from nvatom.descriptors.tma import MAX_GLOBAL_STRIDE, TensorMap, tma_data_type
from nvatom.descriptors.wgmma import GmmaDescriptor, make_gmma_desc
from nvatom.dtypes import dtype
from nvatom.errors import DescriptorError, NvatomError
from nvatom.kernels import fusion
from nvatom.kernels.sm90_emit import desc_base as _desc_base
from nvatom.kernels.sm90_emit import next_stage as _next_stage
from nvatom.kernels.sm90_emit import stmatrix_lane_offset as _stsm_lane
from nvatom.kernels.sm90_emit import u32 as _u32
from nvatom.layout import tile_to_shape
from nvatom.ptx import copy_emit as CE
from nvatom.ptx import sync_emit as SE
from nvatom.ptx import tma_emit as TE
from nvatom.ptx.builder import Kernel, Module, Param, Reg
from nvatom.ptx.copy_emit import emit_matrix_copy
from nvatom.ptx.wgmma_emit import WgmmaSequence, emit_scale_d
from nvatom.runtime.gemm_plan import plain_schedule, wave_pick

__all__ = [
    "FP8_DTYPES",
    "IN_DTYPES",
    "MAX_GLOBAL_STRIDE",
    "OUT_DTYPES",
    "PINGPONG_BAR",
    "SCALE_BLOCK",
    "SCALE_MODES",
    "SCHEDULES",
    "GemmSm90Config",
    "GemmSm90Error",
    "LaunchSpec",
    "b_major_of",
    "build_gemm_sm90",
    "check_problem",
    "default_config",
    "gemm_sm90_launch_spec",
    "gemm_sm90_plan",
    "kernel_params",
]

#: The element types the kernel reads (A and B: one ``wgmma`` ``.ss`` form per type, f32
#: accumulation) and writes.  Widths come from :mod:`nvatom.dtypes`, the K of each
#: instruction from the form (:data:`nvatom.atoms.sm90.FORMS`).
IN_DTYPES = ("bf16", "f16", "e4m3", "e5m2")
#: grouped GEMM: how a tile finds its group (GemmSm90Config.group_sched)
GROUP_SCHEDS = ("scan", "resume", "prefetch", "nofence", "late")
#: How the two consumer warpgroups share the work (GemmSm90Config.schedule): "cooperative"
#: both on one 128-row tile (64 rows each); "pingpong" each on its own 128-row tile (two m64
#: WGMMAs per K step), alternating: one's epilogue runs under the other's main loop.
SCHEDULES = ("cooperative", "pingpong")
#: Named barriers of the ping-pong order: warpgroup w (0, 1) waits on ``PINGPONG_BAR + w``
#: before its main loop; the other arrives there after issuing its own.  (0: the prologue's
#: CTA barrier; 1, 2: the consumers' epilogue barriers.)
PINGPONG_BAR = 3
#: The 8-bit operand types (WGMMA ``.e4m3`` / ``.e5m2``, either on either side): K-major
#: operands, f32 scales, bf16 output.
FP8_DTYPES = ("e4m3", "e5m2")
#: FP8 scaling modes: one f32 per tensor, one per row of A and per column of B, or block
#: scales (DeepSeek-V3): one per row of A and 128 K elements, one per 128 x 128 block of B,
#: applied at promotion (:data:`SCALE_BLOCK`).
SCALE_MODES = ("tensor", "row", "block")
#: The block of the block-scaling mode: 128 K elements (one FP8 K block) by 128 rows of A
#: (one scale per row) or 128 columns of B.
SCALE_BLOCK = 128
OUT_DTYPES = ("bf16", "f16", "f32")
_SW128 = smem_swizzle("SW128")
_ROW = _SW128.row_bytes  # one SW128 row: the K extent of every smem tile and TMA box row
_MAX_SMEM = 232448  # sm_90: 227 KB of dynamic shared memory per block
#: row_scale_stage: a consumer warpgroup's staged scale_a (its 64 rows of f32); its scale_b
#: follows at this offset in the warpgroup's staging area
_STAGED_SA_BYTES = 4 * 64
_REGS = 65536  # registers per SM
_ENTRY_REGS = 168  # .maxnreg at entry (65536 / 384, rounded down to 8): setmaxnreg needs a cap
# promote_rs: 4 k-steps x 4 .b32 A registers live, 4 A descriptors (.b64) no longer: +8
_RS_EXTRA_REGS = 8


class GemmSm90Error(NvatomError, ValueError):
    """A GEMM configuration or problem the SM90 kernel cannot run."""


@dataclasses.dataclass(frozen=True)
class GemmSm90Config:
    """One SM90 GEMM kernel.

    ``consumers`` warpgroups of 64 rows each make the CTA tile ``64*consumers x block_n``
    (``block_n`` a multiple of 64 up to 256); the K block is 128 bytes (64 16-bit or 128
    8-bit elements).  ``b_major`` is ``"MN"`` for ``b`` row-major K x N (16-bit types only:
    WGMMA's transpose bit) or ``"K"`` for ``b`` column-major (``b.t()`` row-major N x K;
    required for e4m3, as ``torch._scaled_mm`` does).  ``persistent``: grid = number of SMs
    and a tile loop; else one tile per CTA.  ``cluster_m = 2`` multicasts B across two
    CTAs that share an N block.  ``wgmma_inflight`` is the ``wait_group`` count in the main
    loop (1: release a stage one K block late).

    FP8 only: ``b_dtype`` is B's type where it differs from A's (``""``: the same; WGMMA takes
    e4m3 and e5m2 on either side).  ``promote`` > 0 is the promoted main loop: WGMMA sums
    ``promote`` K blocks into a temporary f32 accumulator, which ordinary ``add.f32`` then
    adds into the tile's f32 accumulator (WGMMA's FP8 accumulation keeps fewer bits than
    f32); the partial is computed in ``promote_parts`` N parts of ``block_n / promote_parts``
    columns through ``promote_temps`` temporaries (2: one part's WGMMA runs while the other's
    sum is added), so the registers stay within ``consumer_regs``.  ``promote`` 0 is fast
    accumulation (WGMMA accumulates the whole K).  ``promote_unroll`` K blocks (1, 2, 4) make
    one iteration of the promoted loop (the WGMMA pipe drains once per iteration);
    ``promote_rs`` reads A from registers (``ldmatrix`` once per K block, WGMMA ``.rs``;
    measured slower, docs/perf.md).  ``scale_mode`` "tensor": one f32 scale per operand;
    "row": one per row of A (M) and per column of B (N), applied in the epilogue.
    """

    in_dtype: str = "bf16"
    out_dtype: str = "bf16"
    block_n: int = 256
    consumers: int = 2
    stages: int = 4
    b_major: str = "MN"
    persistent: bool = True
    raster_group: int = 8
    cluster_m: int = 1
    multicast: bool = True  # with cluster_m = 2: share B by TMA multicast (else each loads)
    wgmma_inflight: int = 1
    producer_regs: int = 40
    consumer_regs: int = 232
    # How the tensor maps' addresses are formed: "cvta" (cvta.param.u64 of the parameter's
    # address: works) or "mov" (the bare mov.u64: a misaligned-address fault on an H100).
    tmap_address: str = "cvta"
    b_dtype: str = ""
    promote: int = 0
    promote_parts: int = 2
    promote_temps: int = 1
    promote_pipelined: bool = False
    # The promoted loop's A from registers (WGMMA ``.rs``): per K block each consumer thread
    # loads its A fragment (16 registers: 4 ldmatrix.x4) once and every N part's WGMMAs read
    # it there, so A leaves shared memory once per K block instead of once per part
    # (docs/perf.md, "FP8 promoted, session 5").  False: A by descriptor (``.ss``).
    promote_rs: bool = False
    # With promote_rs: the next K block's A fragment is loaded as soon as the last part's
    # WGMMAs retire (its barrier waited there), before that part's sum is added, so the
    # barrier wait and ldmatrix latency overlap the add.f32s.
    promote_rs_prefetch: bool = False
    # K blocks per iteration of the promoted loop (1, 2 or 4; promote 1, A by descriptor):
    # the parts of that many K blocks go through the temporaries in one stream, so a
    # warpgroup's WGMMA pipe drains (wait_group 0) once per iteration; nothing is in flight
    # across the loop's back edge (unlike promote_pipelined, which ptxas serialises: C7514).
    promote_unroll: int = 1
    scale_mode: str = "tensor"
    # Row-wise scales staged in shared memory: at a tile's start each consumer warpgroup
    # copies its 64 rows of scale_a and the tile's block_n columns of scale_b there with
    # cp.async (the copies run under the main loop), so the epilogue reads them from shared
    # memory instead of waiting on global loads (cooperative, not grouped).
    row_scale_stage: bool = False
    # Grouped GEMM (MoE): one persistent launch over G groups that share N and K; each group's
    # three tensor maps come from a device array (kernel_params), so TMA clips every load and
    # store at the group's own rows.
    grouped: bool = False
    # How a grouped kernel finds a tile's group (GROUP_SCHEDS; docs/perf.md, "Grouped GEMM"):
    # "scan" every tile scans tile_ends from group 0 and acquires all three maps in every
    # thread; "resume" keeps the group across tiles (a CTA's tiles ascend) and acquires only
    # the maps the warpgroup uses, only when the group changes; "prefetch" also acquires and
    # prefetches the next group's maps then; "nofence" is "resume" without the acquire (a
    # measurement only: the PTX memory model asks for it); "late" is "resume" with the
    # consumers' acquire of D's map moved into the main loop (the warpgroup's lead thread,
    # after the tile's first WGMMA group is committed), off the tile's critical path.
    group_sched: str = "resume"
    # SCHEDULES: "pingpong" gives each consumer warpgroup its own 128 x block_n tile (two m64
    # accumulators, block_n <= 128 for 16-bit inputs), the tiles alternating between them
    # and their main loops ordered by named barriers (PINGPONG_BAR), so that one warpgroup's
    # epilogue overlaps the other's main loop.
    schedule: str = "cooperative"
    # A fused epilogue (nvatom.kernels.fusion): act(alpha acc + beta C + bias) + residual on
    # the f32 accumulators before they are packed; None: the plain epilogue (PTX unchanged).
    epilogue: fusion.EpilogueSpec | None = None

    def __post_init__(self) -> None:
        if self.in_dtype not in IN_DTYPES:
            raise GemmSm90Error(f"in_dtype {self.in_dtype!r} is not one of "
                                f"{', '.join(IN_DTYPES)}")
        if self.out_dtype not in OUT_DTYPES:
            raise GemmSm90Error(f"out_dtype {self.out_dtype!r} is not one of "
                                f"{', '.join(OUT_DTYPES)}")
        if self.in_dtype in FP8_DTYPES and self.out_dtype != "bf16":
            raise GemmSm90Error(f"{self.in_dtype} inputs give bf16 output here, not "
                                f"{self.out_dtype}")
        if self.b_major not in ("K", "MN"):
            raise GemmSm90Error(f"b_major {self.b_major!r} is not 'K' or 'MN'")
        if self.b_major == "MN" and self.in_dtype in FP8_DTYPES:
            raise GemmSm90Error(f"{self.in_dtype} WGMMA reads K-major operands only: b_major "
                                "must be 'K' (pass b column-major)")
        self._check_fp8()
        if not isinstance(self.multicast, bool) or not isinstance(self.persistent, bool):
            raise GemmSm90Error("multicast and persistent must be bools")
        if not isinstance(self.grouped, bool):
            raise GemmSm90Error(f"grouped must be a bool, got {self.grouped!r}")
        if self.grouped and (self.cluster_m != 1 or not self.persistent):
            raise GemmSm90Error("grouped GEMM runs persistent, without a cluster (got "
                                f"cluster_m {self.cluster_m}, persistent {self.persistent})")
        if self.grouped and self.fp8 and self.schedule != "cooperative":
            raise GemmSm90Error("the grouped FP8 kernel is cooperative (got schedule "
                                f"{self.schedule!r}): the per-group scales are applied by "
                                "the cooperative consumer")
        if self.group_sched not in GROUP_SCHEDS:
            raise GemmSm90Error(f"group_sched {self.group_sched!r} is not one of "
                                f"{', '.join(GROUP_SCHEDS)}")
        self._check_schedule()
        self._check_epilogue()
        for name in ("block_n", "consumers", "stages", "raster_group", "cluster_m",
                     "wgmma_inflight", "producer_regs", "consumer_regs"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int):
                raise GemmSm90Error(f"{name} must be an int, got {v!r}")
        if self.block_n % 64 or not 64 <= self.block_n <= 256:
            raise GemmSm90Error(f"block_n {self.block_n} is not a multiple of 64 in 64..256")
        if self.consumers not in (1, 2):
            raise GemmSm90Error(f"consumers {self.consumers} is not 1 or 2")
        if not 2 <= self.stages <= 8:
            raise GemmSm90Error(f"stages {self.stages} is not in 2..8")
        if self.raster_group < 1:
            raise GemmSm90Error(f"raster_group {self.raster_group} is not positive")
        if self.cluster_m not in (1, 2):
            raise GemmSm90Error(f"cluster_m {self.cluster_m} is not 1 or 2")
        if self.cluster_m == 2 and self.raster_group % 2:
            raise GemmSm90Error(f"cluster_m 2 needs an even raster_group, got "
                                f"{self.raster_group}")
        if self.wgmma_inflight not in (0, 1):
            raise GemmSm90Error(f"wgmma_inflight {self.wgmma_inflight} is not 0 or 1")
        if self.wgmma_inflight >= self.stages - 1:
            raise GemmSm90Error(f"wgmma_inflight {self.wgmma_inflight} needs at least "
                                f"{self.wgmma_inflight + 2} stages")
        for name in ("producer_regs", "consumer_regs"):
            v = getattr(self, name)
            if v % 8 or not 24 <= v <= 256:
                raise GemmSm90Error(f"{name} {v} is not a multiple of 8 in 24..256 "
                                    "(setmaxnreg)")
        if not self.producer_regs <= _ENTRY_REGS <= self.consumer_regs:
            raise GemmSm90Error(f"setmaxnreg: producer_regs {self.producer_regs} must be <= "
                                f"{_ENTRY_REGS} (the entry cap) <= consumer_regs "
                                f"{self.consumer_regs}")
        if self.cluster_m == 2 and self.b_major == "MN" and self.block_n < 128:
            raise GemmSm90Error("cluster_m 2 with an MN-major B splits its 64-column boxes "
                                "between the CTAs: block_n must be at least 128")
        if self.tmap_address not in ("mov", "cvta"):
            raise GemmSm90Error(f"tmap_address {self.tmap_address!r} is not 'mov' or 'cvta'")
        if WARPGROUP * (self.producer_regs + self.consumers * self.consumer_regs) > _REGS:
            raise GemmSm90Error(
                f"setmaxnreg budget: 128 x ({self.producer_regs} + {self.consumers} x "
                f"{self.consumer_regs}) registers exceed the SM's {_REGS}")
        if self.row_scale_stage and (self.scale_mode != "row" or self.grouped
                                     or self.schedule != "cooperative"):
            raise GemmSm90Error("row_scale_stage stages row-wise scales of the cooperative "
                                f"plain kernel (got scale_mode {self.scale_mode!r}, grouped "
                                f"{self.grouped}, schedule {self.schedule!r})")
        smem = self.smem_bytes
        if smem > _MAX_SMEM:
            raise GemmSm90Error(f"{self.stages} stages need {smem} bytes of shared memory, "
                                f"more than the {_MAX_SMEM} an sm_90 block may have")

    def _check_schedule(self) -> None:
        """The ping-pong schedule's limits: two consumers, no cluster, no block scales or
        pipelined promotion, and its accumulators (two m64 halves) within the budget."""
        if self.schedule not in SCHEDULES:
            raise GemmSm90Error(f"schedule {self.schedule!r} is not one of "
                                f"{', '.join(SCHEDULES)}")
        if self.schedule == "cooperative":
            return
        if (self.consumers != 2 or self.cluster_m != 1 or self.scale_mode == "block"
                or self.promote_pipelined):
            raise GemmSm90Error(
                f"schedule 'pingpong' runs two consumer warpgroups without a cluster, block "
                f"scales or promote_pipelined (got consumers {self.consumers}, cluster_m "
                f"{self.cluster_m}, scale_mode {self.scale_mode!r}, promote_pipelined "
                f"{self.promote_pipelined})")
        if isinstance(self.block_n, int) and isinstance(self.promote_parts, int) \
                and isinstance(self.promote_temps, int) and self.promote_parts > 0:
            regs = self.block_n * (1 + (self.promote_temps / (2 * self.promote_parts)
                                        if self.promote else 0))
            if regs + 32 > self.consumer_regs:
                raise GemmSm90Error(
                    f"schedule 'pingpong': a warpgroup's 128 x {self.block_n} tile needs "
                    f"{regs:.0f} f32 accumulator registers a thread, more than consumer_regs "
                    f"{self.consumer_regs} - 32 allow: block_n at most 128 (FP8 promoted: "
                    "with the temporaries)")

    def _check_epilogue(self) -> None:
        """A fused epilogue: an EpilogueSpec, on the plain (not grouped) kernel, its bias of
        the output's type or f32."""
        ep = self.epilogue
        if ep is None:
            return
        if not isinstance(ep, fusion.EpilogueSpec):
            raise GemmSm90Error(f"epilogue must be a nvatom.kernels.fusion.EpilogueSpec or "
                                f"None, got {ep!r}")
        if self.grouped:
            raise GemmSm90Error(f"the grouped kernel fuses no epilogue (got {ep.tag})")
        if ep.bias_dtype and ep.bias_dtype not in (self.out_dtype, "f32"):
            raise GemmSm90Error(f"epilogue bias_dtype {ep.bias_dtype!r}: a bias has the "
                                f"output's type ({self.out_dtype}) or f32")

    @property
    def pingpong(self) -> bool:
        """Each consumer warpgroup runs its own tile (:data:`SCHEDULES`)."""
        return self.schedule == "pingpong"

    def _check_fp8(self) -> None:
        """The FP8-only options: B's type, the promoted main loop, the scaling mode."""
        fp8 = self.in_dtype in FP8_DTYPES
        if self.b_dtype and (not fp8 or self.b_dtype not in FP8_DTYPES):
            raise GemmSm90Error(f"b_dtype {self.b_dtype!r}: a separate B type is one of "
                                f"{', '.join(FP8_DTYPES)}, with FP8 A (in_dtype "
                                f"{self.in_dtype!r})")
        if self.scale_mode not in SCALE_MODES:
            raise GemmSm90Error(f"scale_mode {self.scale_mode!r} is not one of "
                                f"{', '.join(SCALE_MODES)}")
        if self.scale_mode != "tensor" and not fp8:
            raise GemmSm90Error(f"scale_mode {self.scale_mode!r} applies to FP8 operands only")
        if self.scale_mode == "block" and (self.promote != 1 or self.promote_pipelined
                                           or self.block_n != SCALE_BLOCK
                                           or self.block_k != SCALE_BLOCK):
            raise GemmSm90Error(
                f"scale_mode 'block' scales each K block's partial sums at promotion: it "
                f"needs promote 1 (not pipelined), block_n {SCALE_BLOCK} (a tile is one "
                f"block of B's scales) and {SCALE_BLOCK}-element K blocks (FP8); got "
                f"promote {self.promote}, promote_pipelined {self.promote_pipelined}, "
                f"block_n {self.block_n}")
        for name in ("promote", "promote_parts", "promote_temps"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int):
                raise GemmSm90Error(f"{name} must be an int, got {v!r}")
        if not isinstance(self.promote_pipelined, bool):
            raise GemmSm90Error(f"promote_pipelined must be a bool, got "
                                f"{self.promote_pipelined!r}")
        if not isinstance(self.promote_rs, bool) or not isinstance(self.promote_rs_prefetch,
                                                                    bool):
            raise GemmSm90Error(f"promote_rs and promote_rs_prefetch must be bools, got "
                                f"{self.promote_rs!r}, {self.promote_rs_prefetch!r}")
        if self.promote_rs_prefetch and not self.promote_rs:
            raise GemmSm90Error("promote_rs_prefetch loads A's next fragment early: it needs "
                                "promote_rs")
        if isinstance(self.promote_unroll, bool) or self.promote_unroll not in (1, 2, 4):
            raise GemmSm90Error(f"promote_unroll {self.promote_unroll!r} is not 1, 2 or 4")
        if self.promote_unroll > 1 and (self.promote != 1 or self.promote_pipelined
                                         or self.promote_rs or self.scale_mode == "block"
                                         or self.schedule != "cooperative"):
            raise GemmSm90Error(
                f"promote_unroll {self.promote_unroll} runs several K blocks per iteration of "
                f"the cooperative promoted loop with promote 1, A by descriptor and per-tensor "
                f"or row scales (got "
                f"promote {self.promote}, promote_pipelined {self.promote_pipelined}, "
                f"promote_rs {self.promote_rs}, scale_mode {self.scale_mode!r}, schedule "
                f"{self.schedule!r})")
        if self.promote_rs and (self.promote != 1 or self.promote_pipelined
                                or self.schedule != "cooperative"):
            raise GemmSm90Error(
                f"promote_rs loads A's fragment once per K block: it needs the cooperative "
                f"promoted loop with promote 1, not pipelined (got promote {self.promote}, "
                f"promote_pipelined {self.promote_pipelined}, schedule {self.schedule!r})")
        if self.promote == 0:
            if self.promote_pipelined:
                raise GemmSm90Error("promote_pipelined needs the promoted main loop (promote 1)")
            return
        if not fp8:
            raise GemmSm90Error(f"promote {self.promote}: the promoted main loop is for FP8 "
                                f"operands (WGMMA's FP8 accumulation), not {self.in_dtype}")
        if not 1 <= self.promote <= self.stages - 1:
            raise GemmSm90Error(f"promote {self.promote} is not in 1..{self.stages - 1} (a "
                                f"consumer holds that many of the {self.stages} stages)")
        if self.promote_temps not in (1, 2):
            raise GemmSm90Error(f"promote_temps {self.promote_temps} is not 1 or 2")
        parts = self.promote_parts
        if parts < 1 or self.block_n % parts or (self.block_n // parts) % 8:
            raise GemmSm90Error(f"promote_parts {parts} does not split block_n "
                                f"{self.block_n} into WGMMA widths (multiples of 8)")
        if self.promote_temps > parts:
            raise GemmSm90Error(f"promote_temps {self.promote_temps} > promote_parts {parts}")
        if self.pipelined and (parts % 2 or self.promote != 1 or self.promote_temps != 2):
            raise GemmSm90Error(f"promote_pipelined needs promote 1, promote_temps 2 and an "
                                f"even promote_parts (got {self.promote}, "
                                f"{self.promote_temps}, {parts}): it alternates the "
                                "temporaries across K blocks")
        regs = self.block_n // 2 * (1 + self.promote_temps / parts)
        # promote_rs: A's 16 fragment registers replace its 4 descriptors (8 registers)
        regs += _RS_EXTRA_REGS if self.promote_rs else 0
        if regs + 32 > self.consumer_regs:
            raise GemmSm90Error(f"promoted accumulators need {regs:.0f} f32 registers a "
                                f"thread, more than consumer_regs {self.consumer_regs} - 32 "
                                "allow: more promote_parts or fewer promote_temps"
                                + (" (promote_rs: with A's fragment)" if self.promote_rs
                                   else ""))

    # ------------------------------------------------------------------ derived
    @property
    def fp8(self) -> bool:
        return self.in_dtype in FP8_DTYPES

    @property
    def b_type(self) -> str:
        """B's element type."""
        return self.b_dtype or self.in_dtype

    @property
    def pipelined(self) -> bool:
        """The promoted main loop pipelined across K blocks (two temporaries, every K block)."""
        return bool(self.promote) and self.promote_pipelined

    @property
    def part_form(self) -> WgmmaForm:
        """The promoted main loop's WGMMA: ``block_n / promote_parts`` columns (``.rs``
        with ``promote_rs``)."""
        n = self.block_n // self.promote_parts
        if self.promote_rs:
            return _wgmma_form(n, self.in_dtype, self.b_type, "rs")
        return _ss_form(n, self.in_dtype, self.b_type)

    @property
    def mcast(self) -> bool:
        """B is multicast across the cluster."""
        return self.cluster_m > 1 and self.multicast

    @property
    def in_bytes(self) -> int:
        return _element_bytes(self.in_dtype)

    @property
    def out_bytes(self) -> int:
        return _element_bytes(self.out_dtype)

    @property
    def block_m(self) -> int:
        return 64 * self.consumers

    @property
    def block_k(self) -> int:
        """K elements per stage: one 128-byte SW128 row."""
        return _ROW // self.in_bytes

    @property
    def k_steps(self) -> int:
        return self.block_k // self.form.k

    @property
    def threads(self) -> int:
        return WARPGROUP * (1 + self.consumers)

    @property
    def form(self) -> WgmmaForm:
        return _ss_form(self.block_n, self.in_dtype, self.b_type)

    @property
    def a_stage_bytes(self) -> int:
        return self.block_m * _ROW

    @property
    def b_stage_bytes(self) -> int:
        return self.block_n * _ROW

    @property
    def c_chunk_cols(self) -> int:
        """Output columns per epilogue chunk: one 128-byte SW128 row."""
        return _ROW // self.out_bytes

    @property
    def c_buffer_bytes(self) -> int:
        """One epilogue staging buffer: 64 rows x 128 bytes."""
        return 64 * _ROW

    @property
    def smem_bytes(self) -> int:
        stage = self.a_stage_bytes + self.b_stage_bytes
        c = 2 * self.consumers * self.c_buffer_bytes
        return (self.stages * stage + c + self.consumers * self.scale_stage_bytes
                + 16 * self.stages + 16)

    @property
    def scale_stage_bytes(self) -> int:
        """Shared memory for one consumer warpgroup's staged row-wise scales (its 64 rows of
        scale_a, the tile's block_n columns of scale_b; 0 without ``row_scale_stage``)."""
        return _STAGED_SA_BYTES + 4 * self.block_n if self.row_scale_stage else 0

    @property
    def name(self) -> str:
        p = "p" if self.persistent else "np"
        if self.cluster_m > 1 and not self.multicast:
            p += "_nomc"
        ab = self.in_dtype + (f"x{self.b_dtype}" if self.b_type != self.in_dtype else "")
        extra = ""
        if self.promote:
            extra += f"_pr{self.promote}n{self.promote_parts}t{self.promote_temps}"
            extra += "pl" if self.promote_pipelined else ""
            extra += "rs" if self.promote_rs else ""
            extra += "p" if self.promote_rs_prefetch else ""
            extra += f"u{self.promote_unroll}" if self.promote_unroll != 1 else ""
        if self.scale_mode != "tensor":
            extra += f"_{self.scale_mode}scale"
        if self.row_scale_stage:
            extra += "_staged"
        if self.grouped:
            extra += "_grouped" + ("" if self.group_sched == "scan" else
                                   f"_{self.group_sched}")
        if self.pingpong:
            extra += "_pp"
        if self.epilogue is not None:
            extra += "_" + self.epilogue.tag
        return (f"gemm_sm90_{ab}_{self.out_dtype}_{self.block_m}x{self.block_n}_"
                f"s{self.stages}_b{self.b_major}_{p}_g{self.raster_group}_c{self.cluster_m}_"
                f"w{self.wgmma_inflight}{extra}")


@functools.cache
def _element_bytes(name: str) -> int:
    return dtype(name).storage_bits // 8


@functools.cache
def _ss_form(n: int, in_dtype: str, b_dtype: str) -> WgmmaForm:
    """The ``wgmma`` form ``m64n<n>k<K>.ss.f32.<a>.<b>`` of the atom table."""
    return next(f for f in FORMS if (f.n, f.a.name, f.b.name, f.d.name, f.a_source,
                                     f.satfinite) == (n, in_dtype, b_dtype, "f32", "ss", False))


@functools.cache
def _wgmma_form(n: int, in_dtype: str, b_dtype: str, source: str) -> WgmmaForm:
    """The ``wgmma`` form ``m64n<n>k<K>.<source>.f32.<a>.<b>`` of the atom table."""
    return next(f for f in FORMS if (f.n, f.a.name, f.b.name, f.d.name, f.a_source,
                                     f.satfinite) == (n, in_dtype, b_dtype, "f32", source, False))


def b_major_of(b_shape: Sequence[int], b_strides: Sequence[int]) -> str | None:
    """'MN' for a row-major K x N ``b``, 'K' for a column-major one, None otherwise."""
    k, n = b_shape
    if b_strides[1] == 1 and (b_strides[0] == n or k == 1):
        return "MN"
    if b_strides[0] == 1 and (b_strides[1] == k or n == 1):
        return "K"
    return None


# ============================================================================ layouts


@dataclasses.dataclass(frozen=True)
class GemmSm90Plan:
    """What the kernel derives from the layout algebra (shown by tests, used by the build)."""

    a_layout: Any  # 64*C x BK (one stage)
    b_layout: Any  # BN x BK (one stage)
    a_descs: tuple[GmmaDescriptor, ...]  # per K step, stage 0, consumer 0 (relative offsets)
    b_descs: tuple[GmmaDescriptor, ...]
    a_consumer_offset: int  # bytes between consumer warpgroups' A rows
    b_box_offsets: tuple[int, ...]  # bytes: each TMA box of B within a stage
    b_box: tuple[int, int]  # TMA box of B (inner, outer) in elements
    c_layout: Any  # 64 x chunk staging tile (output elements)
    b_part_offsets: tuple[int, ...] = (0,)  # bytes: each promoted N part's rows of B


def _b_layout(cfg: GemmSm90Config) -> Any:
    bits = 8 * cfg.in_bytes
    if cfg.b_major == "K":
        return smem_layout(cfg.block_n, cfg.block_k, bits, "K", _SW128)
    # MN-major: 64-element (128-byte) MN atoms; tile K first so each 64(N) x BK TMA box is one
    # contiguous block of BK rows (the box's memory order).
    return tile_to_shape(_SW128.atom(bits, "MN"), (cfg.block_n, cfg.block_k), (1, 0))


@functools.lru_cache(maxsize=64)
def gemm_sm90_plan(cfg: GemmSm90Config) -> GemmSm90Plan:
    bits = 8 * cfg.in_bytes
    ks = cfg.form.k
    a_l = smem_layout(cfg.block_m, cfg.block_k, bits, "K", _SW128)
    a_one = smem_layout(64, cfg.block_k, bits, "K", _SW128)
    a_base = make_gmma_desc(a_one, bits, "K")
    a_descs = tuple(dataclasses.replace(a_base, start_address=a_l((0, s * ks)) * bits // 8)
                    for s in range(cfg.k_steps))
    b_l = _b_layout(cfg)
    b_base = make_gmma_desc(b_l, bits, cfg.b_major)
    b_descs = tuple(dataclasses.replace(b_base, start_address=b_l((0, s * ks)) * bits // 8)
                    for s in range(cfg.k_steps))
    if cfg.b_major == "K":
        boxes: tuple[int, ...] = (0,)
        box = (cfg.block_k, cfg.block_n // (2 if cfg.mcast else 1))
        if cfg.mcast:
            boxes = (b_l((cfg.block_n // 2, 0)) * bits // 8,)
    else:
        per = _ROW // cfg.in_bytes  # 64 elements of N per box
        boxes = tuple(b_l((j * per, 0)) * bits // 8 for j in range(cfg.block_n // per))
        box = (per, cfg.block_k)
    for off in boxes:
        if off % 1024:
            raise GemmSm90Error(f"B box offset {off} is not 1024-byte aligned")  # pragma: no cover
    c_l = smem_layout(64, cfg.c_chunk_cols, 8 * cfg.out_bytes, "K", _SW128)
    parts: tuple[int, ...] = (0,)
    if cfg.promote:
        pn = cfg.block_n // cfg.promote_parts
        parts = tuple(b_l((q * pn, 0)) * bits // 8 for q in range(cfg.promote_parts))
        for off in parts:  # a part starts on a whole SW128 pattern (8 rows of 128 bytes)
            if off % 1024:
                raise GemmSm90Error(f"B part offset {off} is not 1024-byte aligned")
    return GemmSm90Plan(a_l, b_l, a_descs, b_descs, a_l((64, 0)) * bits // 8, boxes, box, c_l,
                        parts)


# ============================================================================ small emitters



def _barrier(k: Kernel, smem: Reg, off: int, stage: Reg) -> Reg:
    """The shared-memory address of mbarrier ``stage`` of the 8-byte barriers at byte ``off``
    of the kernel's shared memory (base address ``smem``)."""
    bar = _u32(k, "mad.lo.u32", stage, 8, off)
    k.ins("add.u32", bar, bar, smem)
    return bar


# ============================================================================ the kernel



def _check_c_offsets(cfg: GemmSm90Config, plan: GemmSm90Plan) -> None:
    """The epilogue's per-lane address formulas equal the staging layout's offsets (so the
    PTX arithmetic below is the layout algebra, evaluated once here)."""
    c = plan.c_layout
    eb = cfg.out_bytes
    for lane in range(32):
        for w in range(4):
            if cfg.out_bytes == 2:  # stmatrix.x4: lane supplies row t of matrix j
                j, t = lane // 8, lane % 8
                row = 16 * w + 8 * (j % 2) + t
                base = row * _ROW + (((j >> 1) ^ t) << 4)
                for q in range(cfg.c_chunk_cols // 16):
                    want = c((row, 16 * q + 8 * (j >> 1))) * eb
                    if base ^ (32 * q) != want:  # pragma: no cover - algebra guard
                        raise GemmSm90Error(f"stmatrix address of lane {lane} q {q}: "
                                            f"{base ^ (32 * q)} != layout {want}")
            else:  # st.shared.v2.f32 of accumulator pairs
                g, tig = lane // 4, lane % 4
                for half in (0, 1):
                    row = 16 * w + g + 8 * half
                    base = row * _ROW + (((tig >> 1) ^ g) << 4) + (tig & 1) * 8
                    for cb in range(cfg.c_chunk_cols // 8):
                        want = c((row, 8 * cb + 2 * tig)) * eb
                        if base ^ (32 * cb) != want:  # pragma: no cover
                            raise GemmSm90Error("f32 epilogue address mismatch")


def _acc_index(n: int, row_half: int, col: int) -> int:
    """Index i of accumulator element d_i at (row group half, column) for thread 0 pattern:
    from the fragment formula, (i // 4) = col // 8, (i // 2) % 2 = row_half, i % 2 = col % 2."""
    i = 4 * (col // 8) + 2 * row_half + col % 2
    r, c = accumulator_coord(n, 0, i)
    assert (r, c) == (8 * row_half, col), (r, c)  # thread 0 owns rows 0/8, cols 0,1 mod 8
    return i


@dataclasses.dataclass
class _Build:
    """What the pieces of the kernel share: the kernel being built, its configuration and plan,
    the shared-memory map (byte offsets) and the registers every warpgroup reads."""

    k: Kernel
    cfg: GemmSm90Config
    plan: GemmSm90Plan
    target: str
    off_a: int
    off_b: int
    off_c: int
    off_full: int
    off_empty: int
    smem: Reg  # the dynamic shared memory's base address
    tid: Reg
    wg: Reg  # warpgroup index: 0 the producer, 1.. the consumers
    tmaps: tuple[Reg, Reg, Reg]  # A, B, D tensor-map addresses
    tiles_m: Reg
    tiles_n: Reg
    ntiles: Reg
    ktiles: Reg
    rank: Reg | None  # %cluster_ctarank (cluster_m 2)
    first_tile: Reg
    step: Reg
    producer_label: str  # where warpgroup 0 starts
    done: str  # the exit label
    scale_params: tuple[Param, Param] | None  # FP8: scale_a, scale_b addresses
    dims: tuple[Reg, Reg, Reg] | None = None  # M, N, K
    # grouped: (tensor-map array, generic address; tile_ends, global address; G)
    groups: tuple[Reg, Reg, Reg] | None = None
    # grouped, "resume" family: this warpgroup's (group, its first tile, its end tile, its M
    # blocks) across tiles, and the maps it issues TMA with (0 A, 1 B, 2 D)
    gstate: tuple[Reg, Reg, Reg, Reg] | None = None
    maps_used: tuple[int, ...] = (0, 1, 2)
    gpend: Reg | None = None  # "late": D's map changed and is not yet acquired
    group: Reg | None = None  # grouped: the current tile's group (set by tile_coords)
    # grouped FP8: the parameter of scale_b's stride between groups in bytes (0: one
    # scale_b for every group); the groups' row ends follow tile_ends in its buffer
    scale_step: Param | None = None
    epi_params: dict[str, Param] = dataclasses.field(default_factory=dict)  # fused epilogue

    def tile_loop(self, name: str, phase0: int | Reg,
                  maps_used: tuple[int, ...] = (0, 1, 2),
                  stage0: int | Reg = 0) -> tuple[Reg, Reg, Reg, str, Reg, Reg]:
        """Open a warpgroup's persistent tile loop: a ring position (stage 0, mbarrier phase
        ``phase0``; or ``stage0`` / ``phase0`` given), the tile index (from ``first_tile``),
        the loop label ``name`` and the exit
        to ``done`` past the last tile.  Returns (stage, phase, tile, label, m block, n block);
        the loop ends with ``tile += step`` and a branch to the label."""
        k = self.k
        stage = _u32(k, "mov.u32", stage0)
        phase = _u32(k, "mov.u32", phase0)
        tile = _u32(k, "mov.u32", self.first_tile)
        self.maps_used = maps_used
        self.gpend = None  # per warpgroup path: the consumer's is not the producer's
        if self.groups is not None and self.cfg.group_sched != "scan":
            # group -1 ending at tile 0: the first tile's lookup starts the walk at group 0
            self.gstate = (_u32(k, "mov.u32", 0xFFFFFFFF), _u32(k, "mov.u32", 0),
                           _u32(k, "mov.u32", 0), _u32(k, "mov.u32", 0))
            if self.cfg.group_sched == "late" and maps_used == (2,):
                self.gpend = k.reg("pred")
                k.ins("setp.ne.u32", self.gpend, 0, 0)
        top = k.fresh_label(name)
        k.label(top)
        past = k.reg("pred")
        k.ins("setp.ge.u32", past, tile, self.ntiles)
        k.bra(self.done, past)
        return stage, phase, tile, top, *self.tile_coords(tile)

    def tile_coords(self, tile: Reg) -> tuple[Reg, Reg]:
        """(m block, n block) of a linear tile index: grouped raster (``raster_group`` M
        blocks per N sweep); non-persistent launches use the same order."""
        k, g = self.k, self.cfg.raster_group
        tiles_m = self.tiles_m
        if self.groups is not None:
            tile, tiles_m = self._group_of(tile)
        per_group = _u32(k, "mul.lo.u32", self.tiles_n, g)
        gid = _u32(k, "div.u32", tile, per_group)
        first = _u32(k, "mul.lo.u32", gid, g)
        gsize = _u32(k, "sub.u32", tiles_m, first)
        k.ins("min.u32", gsize, gsize, g)
        within = _u32(k, "rem.u32", tile, per_group)
        mb = _u32(k, "rem.u32", within, gsize)
        k.ins("add.u32", mb, mb, first)
        nb = _u32(k, "div.u32", within, gsize)
        return mb, nb

    def _group_of(self, tile: Reg) -> tuple[Reg, Reg]:
        """Grouped GEMM: the group of linear tile ``tile`` (the first g with
        ``tile < tile_ends[g]``: empty groups own no tiles and are stepped over), its tensor
        maps made this thread's ``tmaps`` (``tmaps + 384 g`` + 0 / 128 / 256, acquired for
        the tensormap proxy), and (the tile's index within the group, the group's M blocks)."""
        k = self.k
        assert self.groups is not None
        if self.gstate is not None:
            return self._group_resume(tile)
        maps, ends, _ = self.groups
        g = _u32(k, "mov.u32", 0)
        start = _u32(k, "mov.u32", 0)
        end = k.reg("u32")
        scan = k.fresh_label("g_scan")
        found = k.fresh_label("g_found")
        k.label(scan)
        addr = k.reg("u64")
        k.ins("mad.wide.u32", addr, g, 4, ends)
        k.ins("ld.global.nc.u32", end, f"[{addr}]")
        inside = k.reg("pred")
        k.ins("setp.lt.u32", inside, tile, end)
        k.bra(found, inside)
        k.ins("mov.u32", start, end)
        k.ins("add.u32", g, g, 1)
        k.bra(scan)
        k.label(found)
        self.group = g
        local = _u32(k, "sub.u32", tile, start)
        tiles_m = _u32(k, "sub.u32", end, start)
        k.ins("div.u32", tiles_m, tiles_m, self.tiles_n)
        base = k.reg("u64")
        k.ins("mad.wide.u32", base, g, 3 * TE.TENSORMAP_BYTES, maps)
        for i, t in enumerate(self.tmaps):
            k.ins("add.s64", t, base, i * TE.TENSORMAP_BYTES)
            TE.fence_tensormap_acquire(k, t)
        return local, tiles_m

    def _group_resume(self, tile: Reg) -> tuple[Reg, Reg]:
        """:meth:`_group_of` for the "resume" schedules: a CTA's tiles ascend, so the group
        of the previous tile is kept and the walk over ``tile_ends`` resumes from it; only
        when the group changes are the maps this warpgroup uses pointed at and acquired
        (and with "prefetch" the next group's acquired and prefetched)."""
        k, sched = self.k, self.cfg.group_sched
        assert self.groups is not None and self.gstate is not None
        maps, ends, G = self.groups
        g, start, end, tiles_m = self.gstate
        self.group = g
        same = k.fresh_label("g_same")
        inside = k.reg("pred")
        k.ins("setp.lt.u32", inside, tile, end)
        k.bra(same, inside)
        walk = k.fresh_label("g_walk")
        k.label(walk)
        k.ins("mov.u32", start, end)
        k.ins("add.u32", g, g, 1)
        addr = k.reg("u64")
        k.ins("mad.wide.u32", addr, g, 4, ends)
        k.ins("ld.global.nc.u32", end, f"[{addr}]")
        k.ins("setp.lt.u32", inside, tile, end)
        k.bra(walk, f"!{inside}")
        k.ins("sub.u32", tiles_m, end, start)
        k.ins("div.u32", tiles_m, tiles_m, self.tiles_n)
        base = k.reg("u64")
        k.ins("mad.wide.u32", base, g, 3 * TE.TENSORMAP_BYTES, maps)
        for i in self.maps_used:
            k.ins("add.s64", self.tmaps[i], base, i * TE.TENSORMAP_BYTES)
            if self.gpend is not None:  # acquired in the main loop (late_acquire)
                k.ins("setp.eq.u32", self.gpend, 0, 0)
            elif sched != "nofence":
                TE.fence_tensormap_acquire(k, self.tmaps[i])
        if sched == "prefetch":
            nxt = _u32(k, "add.u32", g, 1)
            last = k.reg("pred")
            k.ins("setp.ge.u32", last, nxt, G)
            k.bra(same, last)
            na = k.reg("u64")
            k.ins("mad.wide.u32", na, nxt, 4, ends)
            nend = k.reg("u32")
            k.ins("ld.global.nc.u32", nend, f"[{na}]")
            k.ins("setp.eq.u32", last, nend, end)  # an empty next group: zero maps
            k.bra(same, last)
            for i in self.maps_used:
                t = k.reg("u64")
                k.ins("add.s64", t, base, 3 * TE.TENSORMAP_BYTES + i * TE.TENSORMAP_BYTES)
                TE.fence_tensormap_acquire(k, t)
                TE.prefetch_tensormap(k, t)
        k.label(same)
        local = _u32(k, "sub.u32", tile, start)
        return local, tiles_m

    def late_acquire(self, is_lead: Reg) -> None:
        """"late": in the consumer's main loop, the lead thread (the one that issues the TMA
        stores) acquires D's map if the group changed; nothing for other schedules."""
        if self.gpend is None:
            return
        k = self.k
        skip = k.fresh_label("g_acq_done")
        p = k.reg("pred")
        k.ins("and.pred", p, self.gpend, is_lead)
        k.bra(skip, f"!{p}")
        TE.fence_tensormap_acquire(k, self.tmaps[2])
        k.label(skip)
        k.ins("setp.ne.u32", self.gpend, 0, 0)


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
    pp = b.k.reg("pred")
    b.k.ins("setp.eq.u32", pp, b.wg, 0)
    b.k.bra(b.producer_label, pp)
    if cfg.pingpong:
        _consumer_pingpong(b)
    else:
        _consumer(b)
    b.k.label(b.producer_label)
    _producer(b)
    _exit(b)
    return mod


def _prologue(k: Kernel, cfg: GemmSm90Config, plan: GemmSm90Plan, target_: str) -> _Build:
    """Parameters, the shared-memory map, tile counts and the barriers' initialisation."""
    k.reqntid = (cfg.threads, 1, 1)
    k.minnctapersm = 1
    k.maxnreg = _ENTRY_REGS
    if cfg.cluster_m > 1:
        k.reqnctapercluster = (cfg.cluster_m, 1, 1)
    if cfg.grouped:
        return _prologue_grouped(k, cfg, plan, target_)
    pa, pb, pd = (k.byte_param(n, TE.TENSORMAP_BYTES, TE.GEMM_TENSORMAP_ALIGN)
                  for n in ("tmap_a", "tmap_b", "tmap_d"))
    pm, pn, pk = (k.param(n, "u32") for n in ("M", "N", "K"))
    scale_params = None
    if cfg.fp8:
        scale_params = (k.param("scale_a", "u64"), k.param("scale_b", "u64"))
    epi_params = fusion.declare_params(k, cfg.epilogue)
    dsm = k.dynamic_shared("smem", align=1024)

    # shared-memory map: A stages, B stages, epilogue staging, full[s], empty[s]
    off_a = 0
    off_b = cfg.stages * cfg.a_stage_bytes
    off_c = off_b + cfg.stages * cfg.b_stage_bytes
    off_full = off_c + 2 * cfg.consumers * cfg.c_buffer_bytes  # scale staging, then barriers
    off_full += cfg.consumers * cfg.scale_stage_bytes
    off_empty = off_full + 8 * cfg.stages

    smem = _u32(k, "mov.u32", dsm)
    tid = _u32(k, "mov.u32", "%tid.x")
    wg = _u32(k, "shr.u32", tid, 7)
    M, N, K = (k.ld_param(p) for p in (pm, pn, pk))

    def tmap(p: Param) -> Reg:
        r = k.param_address(p)
        if cfg.tmap_address == "cvta":
            g = k.reg("u64")
            k.ins("cvta.param.u64", g, r)
            return g
        return r

    ta, tb, td = tmap(pa), tmap(pb), tmap(pd)

    # tiles
    bm, bn, bk = cfg.block_m, cfg.block_n, cfg.block_k
    tiles_m = _u32(k, "add.u32", M, bm - 1)
    k.ins("div.u32", tiles_m, tiles_m, bm)
    if cfg.cluster_m == 2:  # round up to whole clusters (the extra CTA loads/stores nothing)
        k.ins("add.u32", tiles_m, tiles_m, 1)
        k.ins("and.b32", tiles_m, tiles_m, 0xFFFFFFFE)
    tiles_n = _u32(k, "add.u32", N, bn - 1)
    k.ins("div.u32", tiles_n, tiles_n, bn)
    ntiles = _u32(k, "mul.lo.u32", tiles_m, tiles_n)
    ktiles = _u32(k, "add.u32", K, bk - 1)
    k.ins("div.u32", ktiles, ktiles, bk)
    rank = None
    if cfg.cluster_m == 2:
        rank = _u32(k, "mov.u32", "%cluster_ctarank")

    _init_barriers(k, cfg, smem, tid, off_full, off_empty, (ta, tb, td))
    if cfg.cluster_m > 1:
        SE.barrier_cluster_arrive(k, target=target_)
        SE.barrier_cluster_wait(k, target=target_)
    else:
        SE.named_barrier_sync(k, 0, cfg.threads, target=target_)

    first_tile = _u32(k, "mov.u32", "%ctaid.x")
    step = _u32(k, "mov.u32", "%nctaid.x")
    prod = k.fresh_label("producer")
    done = k.fresh_label("exit")
    return _Build(k, cfg, plan, target_, off_a, off_b, off_c, off_full, off_empty, smem, tid,
                  wg, (ta, tb, td), tiles_m, tiles_n, ntiles, ktiles, rank, first_tile, step,
                  prod, done, scale_params, (M, N, K), epi_params=epi_params)


def _init_barriers(k: Kernel, cfg: GemmSm90Config, smem: Reg, tid: Reg, off_full: int,
                   off_empty: int, tmaps: Sequence[Any]) -> None:
    """Thread 0 initialises the stage ring's barriers -- ``full[s]`` (one arrival plus the TMA
    bytes) and ``empty[s]`` (each consumer warpgroup that reads the stage: one with ping-pong,
    every one otherwise, times the CTAs that multicast into it) -- fences the inits and
    prefetches the kernel's tensor maps (``tmaps``; none for the grouped kernel, whose maps
    change per tile)."""
    k.comment("barriers: full[s] (1 arrival + TMA bytes), empty[s] (consumer warpgroups)")
    p0 = k.reg("pred")
    k.ins("setp.eq.u32", p0, tid, 0)
    skip = k.fresh_label("init_done")
    k.bra(skip, f"!{p0}")
    for s in range(cfg.stages):
        TE.mbarrier_init(k, _u32(k, "add.u32", smem, off_full + 8 * s), 1)
        TE.mbarrier_init(k, _u32(k, "add.u32", smem, off_empty + 8 * s),
                         (1 if cfg.pingpong else cfg.consumers)
                         * (cfg.cluster_m if cfg.mcast else 1))
    TE.fence_mbarrier_init(k)
    for t in tmaps:
        TE.prefetch_tensormap(k, t)
    k.label(skip)


def _smem_map(cfg: GemmSm90Config) -> tuple[int, int, int, int, int]:
    """Byte offsets of the A stages, B stages, epilogue staging, full[s] and empty[s]."""
    off_b = cfg.stages * cfg.a_stage_bytes
    off_c = off_b + cfg.stages * cfg.b_stage_bytes
    off_full = off_c + 2 * cfg.consumers * cfg.c_buffer_bytes
    return 0, off_b, off_c, off_full, off_full + 8 * cfg.stages


def _prologue_grouped(k: Kernel, cfg: GemmSm90Config, plan: GemmSm90Plan,
                      target_: str) -> _Build:
    """The grouped kernel's prologue: parameters ``tmaps`` (G x 3 tensor maps in global
    memory: A, B, D of each group, 128 bytes each), ``tile_ends`` (G u32: cumulative output
    tiles), ``G``, ``N``, ``K``; the tile count is ``tile_ends[G - 1]``; the per-tile maps are
    chosen by :meth:`_Build.tile_coords`."""
    k.reqntid = (cfg.threads, 1, 1)
    k.minnctapersm = 1
    k.maxnreg = _ENTRY_REGS
    pt, pe = k.param("tmaps", "u64"), k.param("tile_ends", "u64")
    pg, pn, pk = (k.param(n, "u32") for n in ("G", "N", "K"))
    scale_params = step_param = None
    if cfg.fp8:
        scale_params = (k.param("scale_a", "u64"), k.param("scale_b", "u64"))
        step_param = k.param("scale_b_step", "u32")
    dsm = k.dynamic_shared("smem", align=1024)
    off_a, off_b, off_c, off_full, off_empty = _smem_map(cfg)
    smem = _u32(k, "mov.u32", dsm)
    tid = _u32(k, "mov.u32", "%tid.x")
    wg = _u32(k, "shr.u32", tid, 7)
    maps, ends = k.ld_param(pt), k.ld_param(pe)
    k.ins("cvta.to.global.u64", ends, ends)
    G, N, K = (k.ld_param(p) for p in (pg, pn, pk))
    tmaps = (k.reg("u64"), k.reg("u64"), k.reg("u64"))
    bn, bk = cfg.block_n, cfg.block_k
    tiles_n = _u32(k, "add.u32", N, bn - 1)
    k.ins("div.u32", tiles_n, tiles_n, bn)
    last = _u32(k, "sub.u32", G, 1)
    la = k.reg("u64")
    k.ins("mad.wide.u32", la, last, 4, ends)
    ntiles = k.reg("u32")
    k.ins("ld.global.nc.u32", ntiles, f"[{la}]")
    tiles_m = _u32(k, "mov.u32", 0)  # per group (tile_coords)
    ktiles = _u32(k, "add.u32", K, bk - 1)
    k.ins("div.u32", ktiles, ktiles, bk)
    dims = None
    if step_param is not None:
        dims = (_u32(k, "mov.u32", 0), N, K)  # the current group's M: set per tile
    _init_barriers(k, cfg, smem, tid, off_full, off_empty, ())
    SE.named_barrier_sync(k, 0, cfg.threads, target=target_)
    first_tile = _u32(k, "mov.u32", "%ctaid.x")
    step = _u32(k, "mov.u32", "%nctaid.x")
    prod = k.fresh_label("producer")
    done = k.fresh_label("exit")
    b = _Build(k, cfg, plan, target_, off_a, off_b, off_c, off_full, off_empty, smem, tid,
               wg, tmaps, tiles_m, tiles_n, ntiles, ktiles, None, first_tile, step,
               prod, done, scale_params, dims, (maps, ends, G))
    b.scale_step = step_param
    return b


@dataclasses.dataclass
class _Epilogue:
    """A consumer warpgroup's epilogue registers: its lane's offset in a staging tile, its
    two staging buffers and its named barrier."""

    c_lane: Reg
    c_buf0: Reg
    bar_id: Reg
    is_lead: Reg  # thread 0 of the warpgroup
    cw: Reg  # consumer index


def _consumer(b: _Build) -> None:
    """Warpgroups 1..C: per tile, the WGMMA main loop over K blocks, then the epilogue."""
    k, cfg, plan, form = b.k, b.cfg, b.plan, b.cfg.form
    k.comment("consumer warpgroups: WGMMA main loop + epilogue")
    SE.setmaxnreg(k, "inc", cfg.consumer_regs, target=b.target)
    cw = _u32(k, "sub.u32", b.wg, 1)  # consumer index
    ltid = _u32(k, "and.b32", b.tid, WARPGROUP - 1)
    is_lead = k.reg("pred")
    k.ins("setp.eq.u32", is_lead, ltid, 0)
    # descriptors of stage 0 for this consumer's rows; stages added below (16-byte units)
    a_row = _u32(k, "mul.lo.u32", cw, plan.a_consumer_offset)
    a_sm = _u32(k, "add.u32", b.smem, a_row)
    a_desc0 = [_desc_base(k, a_sm, d, b.off_a) for d in plan.a_descs]
    b_desc0 = [_desc_base(k, b.smem, d, b.off_b) for d in plan.b_descs]
    acc = k.regs("f32", form.registers("D"))
    scale = _fp8_scale(b)
    p_true, p_acc, imm, ep, temps, p_first = _consumer_state(b, cw, ltid, is_lead)

    stage, phase, tile, top, mb, nb = b.tile_loop("c_tile", 0, (2,))
    block_ptrs = None
    if cfg.scale_mode == "block":  # applied at promotion, not in the epilogue
        if b.scale_step is not None:
            scale = _group_scales(b)
        assert isinstance(scale, tuple)
        block_ptrs, scale = scale, None
    staged = None
    if cfg.row_scale_stage:
        assert isinstance(scale, tuple)
        staged = _stage_row_scales(b, scale, cw, ltid, mb, nb)
    seq = WgmmaSequence(k)
    if cfg.promote:
        rows = None if block_ptrs is None else _block_scale_rows(b, block_ptrs, cw, mb, nb)
        _mainloop_promoted(b, seq, acc, temps, a_desc0, b_desc0, stage, phase, is_lead,
                           p_true, p_first, rows)
    else:
        kt, prev, kloop = _open_k_loop(b, p_acc, stage, phase)
        # descriptors of this stage
        da = k.reg("b64")
        db = k.reg("b64")
        sa_off = _u32(k, "mul.lo.u32", stage, cfg.a_stage_bytes >> 4)
        sb_off = _u32(k, "mul.lo.u32", stage, cfg.b_stage_bytes >> 4)
        da64, db64 = k.reg("b64"), k.reg("b64")
        k.ins("cvt.u64.u32", da64, sa_off)
        k.ins("cvt.u64.u32", db64, sb_off)
        seq.fence()  # every K block: the previous tile's epilogue touched the accumulators
        for s in range(cfg.k_steps):
            k.ins("add.s64", da, a_desc0[s], da64)
            k.ins("add.s64", db, b_desc0[s], db64)
            seq.mma(form, acc, da, db, p_acc if s == 0 else p_true, imm)
            da, db = k.reg("b64"), k.reg("b64")
        _retire_k_block(b, seq, is_lead, p_acc, kt, prev, stage, phase, kloop)
        seq.wait(0)
        if cfg.wgmma_inflight:
            _release(k, cfg, b.smem, b.off_empty, prev, is_lead, b.rank)
    seq.read(acc)
    seq.finish()
    if b.scale_step is not None and block_ptrs is None:
        scale = _group_scales(b)  # after the main loop: nothing of it lives across the loop
    _epilogue(b, ep, acc, scale, mb, nb, staged=staged)
    k.ins("add.u32", tile, tile, b.step)
    k.bra(top)


def _open_k_loop(b: _Build, p_acc: Reg, stage: Reg, phase: Reg) -> tuple[Reg, Reg, str]:
    """The fast-accumulation main loop's head: the first K block overwrites (``p_acc``
    false), K block and previous-stage counters at 0, the loop label, and the wait for the
    stage's ``full`` barrier.  Returns (K block, previous stage, loop label)."""
    k = b.k
    k.ins("setp.ne.u32", p_acc, 0, 0)  # first K block: D = A*B
    kt = _u32(k, "mov.u32", 0)
    prev = _u32(k, "mov.u32", 0)
    kloop = k.fresh_label("c_k")
    k.label(kloop)
    full = _barrier(k, b.smem, b.off_full, stage)
    TE.mbarrier_wait_parity(k, full, phase)
    return kt, prev, kloop


def _skip_blocks(k: Kernel, stage: Reg, phase: Reg, blocks: Reg, stages: int) -> None:
    """Advance a ring position by ``blocks`` K blocks (the other warpgroup's tile): ``stage
    + blocks`` modulo ``stages``, the phase bit flipped once per wrap."""
    t = _u32(k, "add.u32", stage, blocks)
    wraps = _u32(k, "div.u32", t, stages)
    k.ins("rem.u32", stage, t, stages)
    k.ins("and.b32", wraps, wraps, 1)
    k.ins("xor.b32", phase, phase, wraps)


def _consumer_pingpong(b: _Build) -> None:
    """Warpgroups 1-2 under the ping-pong schedule: consumer ``w`` runs the CTA's tiles
    ``w, w + 2, ...`` (tile ``first_tile + (2i + w) * step``), each a whole 128 x BN tile
    (two m64 WGMMAs per K step, one per 64-row half).  The producer fills the stage ring in
    tile order, so a consumer's ring position skips the other's tile (``ktiles`` K blocks,
    :func:`_skip_blocks`) and each stage is released by one warpgroup (``empty`` counts 1).
    Order: before its main loop a consumer waits on named barrier ``PINGPONG_BAR + w``
    (``bar.sync``, 256 threads; not on the CTA's very first tile); after issuing its last
    WGMMA it arrives (``bar.arrive``) on the other's barrier if the other has a next tile.
    So the main loops run one after the other and one's epilogue overlaps the other's main
    loop; the arrivals on each barrier alternate strictly between the two warpgroups (an
    arrival needs the other's previous one to have been waited for), and the wait also
    guarantees every earlier stage was filled, so no mbarrier parity wait can be two phases
    behind."""
    k, cfg, plan, form = b.k, b.cfg, b.plan, b.cfg.form
    k.comment("consumer warpgroups, ping-pong: each its own 128-row tile, main loops ordered")
    SE.setmaxnreg(k, "inc", cfg.consumer_regs, target=b.target)
    cw = _u32(k, "sub.u32", b.wg, 1)
    ltid = _u32(k, "and.b32", b.tid, WARPGROUP - 1)
    is_lead = k.reg("pred")
    k.ins("setp.eq.u32", is_lead, ltid, 0)
    a_hi = _u32(k, "add.u32", b.smem, plan.a_consumer_offset)  # rows 64..127 of a stage
    a_descs = ([_desc_base(k, b.smem, d, b.off_a) for d in plan.a_descs],
               [_desc_base(k, a_hi, d, b.off_a) for d in plan.a_descs])
    b_desc0 = [_desc_base(k, b.smem, d, b.off_b) for d in plan.b_descs]
    accs = [k.regs("f32", form.registers("D")) for _ in range(2)]
    scale = _fp8_scale(b)
    p_true, p_acc, imm, ep, temps, p_first = _consumer_state(b, cw, ltid, is_lead)
    wait_bar = _u32(k, "add.u32", cw, PINGPONG_BAR)  # mine
    sig_bar = _u32(k, "sub.u32", PINGPONG_BAR + 1, cw)  # the other's
    cta_first, cta_step = b.first_tile, b.step
    b.first_tile = _u32(k, "mad.lo.u32", cw, cta_step, cta_first)
    b.step = _u32(k, "shl.b32", cta_step, 1)
    # ring position: consumer 1 starts past consumer 0's first tile (K block ktiles * cw)
    pos = _u32(k, "mul.lo.u32", cw, b.ktiles)
    stage0 = _u32(k, "rem.u32", pos, cfg.stages)
    phase0 = _u32(k, "div.u32", pos, cfg.stages)
    k.ins("and.b32", phase0, phase0, 1)
    stage, phase, tile, top, mb, nb = b.tile_loop("c_tile", phase0, (2,), stage0)
    b.first_tile, b.step = cta_first, cta_step
    k.ins("setp.eq.u32", p_acc, tile, cta_first)  # the CTA's first tile: nobody to wait for
    skip_wait = k.fresh_label("pp_first")
    k.bra(skip_wait, p_acc)
    SE.named_barrier_sync(k, wait_bar, 2 * WARPGROUP, target=b.target)
    k.label(skip_wait)
    nxt = _u32(k, "add.u32", tile, cta_step)  # the other warpgroup's next tile
    p_sig = k.reg("pred")
    k.ins("setp.lt.u32", p_sig, nxt, b.ntiles)
    seq = WgmmaSequence(k)

    def signal() -> None:
        skip = k.fresh_label("pp_nosig")
        k.bra(skip, f"!{p_sig}")
        SE.named_barrier_arrive(k, sig_bar, 2 * WARPGROUP, target=b.target)
        k.label(skip)

    if cfg.promote:
        _mainloop_promoted(b, seq, accs[0], temps, a_descs[0], b_desc0, stage, phase, is_lead,
                           p_true, p_first, None, list(zip(accs, a_descs, strict=True)))
        signal()
    else:
        kt, prev, kloop = _open_k_loop(b, p_acc, stage, phase)
        sa_off = _u32(k, "mul.lo.u32", stage, cfg.a_stage_bytes >> 4)
        sb_off = _u32(k, "mul.lo.u32", stage, cfg.b_stage_bytes >> 4)
        da64, db64 = k.reg("b64"), k.reg("b64")
        k.ins("cvt.u64.u32", da64, sa_off)
        k.ins("cvt.u64.u32", db64, sb_off)
        seq.fence()
        for s in range(cfg.k_steps):
            db = k.reg("b64")
            k.ins("add.s64", db, b_desc0[s], db64)
            for h in (0, 1):
                da = k.reg("b64")
                k.ins("add.s64", da, a_descs[h][s], da64)
                seq.mma(form, accs[h], da, db, p_acc if s == 0 else p_true, imm)
        _retire_k_block(b, seq, is_lead, p_acc, kt, prev, stage, phase, kloop)
        signal()  # every WGMMA of this tile is issued: the other warpgroup's turn
        seq.wait(0)
        if cfg.wgmma_inflight:
            _release(k, cfg, b.smem, b.off_empty, prev, is_lead, b.rank)
    for acc in accs:
        seq.read(acc)
    seq.finish()
    for h in (0, 1):
        _epilogue(b, ep, accs[h], scale, mb, nb, half=h)
    _skip_blocks(k, stage, phase, b.ktiles, cfg.stages)  # the other warpgroup's next tile
    k.ins("add.u32", tile, tile, b.step)
    k.ins("add.u32", tile, tile, b.step)
    k.bra(top)


@functools.cache
def _promote_map(bn: int, pn: int, part: int) -> tuple[int, ...]:
    """For each element ``i`` of a part's temporary (``m64n<pn>``, the tile's columns
    ``part * pn ..``), the index of the tile accumulator (``m64n<bn>``) holding the same
    (row, column): from the accumulator fragment formula
    (:func:`nvatom.atoms.wgmma_fragments.accumulator_coord`), and the same for every thread
    of the warpgroup (else the promotion could not be one unrolled sequence)."""
    want: tuple[int, ...] | None = None
    for t in range(WARPGROUP):
        where = {accumulator_coord(bn, t, j): j for j in range(bn // 2)}
        got = tuple(where[(r, c + part * pn)]
                    for r, c in (accumulator_coord(pn, t, i) for i in range(pn // 2)))
        if want is None:
            want = got
        elif got != want:  # pragma: no cover - fragment formula guard
            raise GemmSm90Error(f"promotion map of thread {t} differs from thread 0's")
    assert want is not None
    return want


def _part_mmas(b: _Build, seq: WgmmaSequence, t: Sequence[Reg], a_desc0: Sequence[Reg],
               b_desc0: Sequence[Reg], stage: Reg, phase: Reg | None, part: int, first: Reg,
               p_true: Reg, a_frag: Sequence[Sequence[Reg]] | None = None) -> None:
    """One K block of one N part: wait ``full[stage]`` (when ``phase`` is given), then the
    K block's WGMMAs into temporary ``t`` (the first with scale-d ``first``); A by
    descriptor, or (``promote_rs``) from ``a_frag``, each k-step's 4 registers
    (:func:`_load_a_frag`)."""
    k, cfg, plan = b.k, b.cfg, b.plan
    form = cfg.part_form
    if phase is not None:
        full = _barrier(k, b.smem, b.off_full, stage)
        TE.mbarrier_wait_parity(k, full, phase)
    if a_frag is None:
        sa_off = _u32(k, "mul.lo.u32", stage, cfg.a_stage_bytes >> 4)
    sb_off = _u32(k, "mul.lo.u32", stage, cfg.b_stage_bytes >> 4)
    if plan.b_part_offsets[part]:
        k.ins("add.u32", sb_off, sb_off, plan.b_part_offsets[part] >> 4)
    if a_frag is None:
        da64, db64 = k.reg("b64"), k.reg("b64")
        k.ins("cvt.u64.u32", da64, sa_off)
    else:
        db64 = k.reg("b64")
    k.ins("cvt.u64.u32", db64, sb_off)
    imm = tuple(1 if w.startswith("scale") else 0 for w in form.immediates)  # K-major B
    seq.fence()  # the temporary was read by add.f32 (fenced after the barrier wait: C7519)
    for s in range(cfg.k_steps):
        a: Reg | Sequence[Reg]
        if a_frag is None:
            a, db = k.reg("b64"), k.reg("b64")
            k.ins("add.s64", a, a_desc0[s], da64)
        else:
            a, db = a_frag[s], k.reg("b64")
        k.ins("add.s64", db, b_desc0[s], db64)
        seq.mma(form, t, a, db, first if s == 0 else p_true, imm)


#: ``promote_rs``: the ldmatrix that loads a k-step's 8-bit A fragment (16-bit view: each
#: register is 4 K-consecutive bytes of one row, the WGMMA ``.rs`` A register's content).
_LDSM_A = "atom.ldsm<m8n8.x4>"


def _rs_lane_offset(lane: int, warp: int, step: int) -> int:
    """``promote_rs``: the byte offset, in a consumer's 64 x 128-byte SW128 A block, of the
    16-byte row that ``lane`` of ``warp`` hands to ``ldmatrix.x4`` for k-step ``step``
    (32 bytes of K): matrix ``j = lane // 8`` is rows ``16 warp + 8 (j % 2) ..`` and bytes
    ``32 step + 16 (j // 2) ..``, lane ``lane`` points at its row ``lane % 8``; SW128 moves
    16-byte chunk ``c`` of row ``r`` to ``c ^ (r % 8)``.  The PTX below computes exactly this
    (checked against the stage's layout by :func:`_check_rs_offsets`)."""
    row = 16 * warp + (lane & 15)
    return (row * _ROW + ((((lane >> 4) ^ lane) & 7) << 4)) ^ (32 * step)


def _check_rs_offsets(cfg: GemmSm90Config, plan: GemmSm90Plan) -> None:
    """:func:`_rs_lane_offset` (plus the consumer's rows) equals the A stage layout's offset
    of each ldmatrix row (the layout algebra, evaluated here once)."""
    bits = 8 * cfg.in_bytes
    for cw in range(cfg.consumers):
        for warp in range(4):
            for lane in range(32):
                for s in range(cfg.k_steps):
                    row = 64 * cw + 16 * warp + 8 * ((lane // 8) % 2) + lane % 8
                    col = (32 * s + 16 * (lane // 16)) * 8 // bits
                    want = plan.a_layout((row, col)) * bits // 8
                    got = cw * plan.a_consumer_offset + _rs_lane_offset(lane, warp, s)
                    if got != want:  # pragma: no cover - algebra guard
                        raise GemmSm90Error(f"promote_rs: ldmatrix row of lane {lane}, warp "
                                            f"{warp}, k-step {s}: {got} != layout {want}")


def _rs_lane_base(b: _Build) -> Reg:
    """``promote_rs``: this thread's ldmatrix row address in stage 0 (k-step 0):
    shared base + A's offset + the consumer's rows + :func:`_rs_lane_offset` (lane, warp, 0)."""
    k = b.k
    lt = _u32(k, "and.b32", b.tid, WARPGROUP - 1)
    cw = _u32(k, "sub.u32", b.wg, 1)
    row = _u32(k, "and.b32", lt, 15)
    warp = _u32(k, "shr.u32", lt, 5)
    k.ins("mad.lo.u32", row, warp, 16, row)  # 16 warp + (lane & 15)
    ch = _u32(k, "shr.u32", lt, 4)
    k.ins("and.b32", ch, ch, 1)  # lane >> 4 (bit 4 of lt is lane's)
    k.ins("xor.b32", ch, ch, lt)
    k.ins("and.b32", ch, ch, 7)  # ((lane >> 4) ^ lane) & 7
    off = _u32(k, "shl.b32", ch, 4)
    k.ins("mad.lo.u32", off, row, _ROW, off)
    k.ins("mad.lo.u32", off, cw, b.plan.a_consumer_offset, off)
    k.ins("add.u32", off, off, b.smem)
    k.ins("add.u32", off, off, b.off_a)
    return off


def _load_a_frag(b: _Build, seq: WgmmaSequence, lane_base: Reg, stage: Reg,
                 into: Sequence[Sequence[Reg]] | None = None) -> list[list[Reg]]:
    """``promote_rs``: this K block's A fragment, 4 k-steps x 4 registers, by 4
    ``ldmatrix.x4`` from stage ``stage`` (row address: :func:`_rs_lane_offset`, the k-step's
    32 bytes by an xor: the stage and consumer bases are 1024-byte aligned).  Every WGMMA of
    the previous K block has retired (``wait_group 0``) before these registers are
    written.  ``into``: the registers to load (else fresh ones)."""
    k, cfg = b.k, b.cfg
    atom = next(a for a in MATRIX_COPIES if a.name == _LDSM_A)
    base = _u32(k, "mad.lo.u32", stage, cfg.a_stage_bytes, lane_base)
    frag = []
    for s in range(cfg.k_steps):
        regs = k.regs("b32", 4) if into is None else list(into[s])
        addr = base if s == 0 else _u32(k, "xor.b32", base, 32 * s)
        emit_matrix_copy(k, atom, regs, addr)
        frag.append(regs)
    seq.write([r for f in frag for r in f])
    return frag


def _promotion_start(k: Kernel, cfg: GemmSm90Config,
                     acc: Sequence[Reg]) -> tuple[list[tuple[int, ...]], Reg]:
    """How both promoted main loops begin: the accumulator map of each of the
    ``promote_parts`` N parts (:func:`_promote_map`), the tile's f32 accumulators zeroed, and
    a false predicate (scale-d 0: a part's first WGMMA overwrites its temporary)."""
    pn = cfg.block_n // cfg.promote_parts
    maps = [_promote_map(cfg.block_n, pn, q) for q in range(cfg.promote_parts)]
    for r in acc:
        k.ins("mov.f32", r, "0f00000000")
    p_zero = k.reg("pred")
    k.ins("setp.ne.u32", p_zero, 0, 0)
    return maps, p_zero


def _add_part(k: Kernel, seq: WgmmaSequence, acc: Sequence[Reg], t: Sequence[Reg],
              part_map: tuple[int, ...], scales: Sequence[Reg] | None = None) -> None:
    """Retire temporary ``t`` and add it into the tile's accumulators: ``t[i]`` into
    ``acc[part_map[i]]``; with block ``scales`` (one f32 per row half of the fragment,
    :func:`_block_scales`) ``t[i] * scales[(i // 2) % 2]`` (one ``fma.rn.f32``)."""
    seq.read(t)
    for i, j in enumerate(part_map):
        if scales is None:
            k.ins("add.f32", acc[j], acc[j], t[i])
        else:
            k.ins("fma.rn.f32", acc[j], t[i], scales[(i // 2) % 2], acc[j])


def _block_scale_rows(b: _Build, ptrs: tuple[Reg, Reg], cw: Reg, mb: Reg,
                      nb: Reg) -> tuple[Reg, Reg, Reg]:
    """Block scales, once per tile: the global addresses of this thread's two rows of
    ``scale_a`` (rows ``row0`` and ``row0 + 8`` of its accumulator fragment, clamped to M - 1:
    a row past M is dropped by the TMA store) and of the tile's row of ``scale_b``'s
    K-major storage (N block ``nb``: a tile is one 128-column block), each at K block 0.
    Both scale tensors hold ``ktiles`` = ceil(K / 128) f32 per row (A row / B column block),
    contiguous."""
    k, cfg = b.k, b.cfg
    assert b.dims is not None
    _check_row_cols(cfg.block_n // cfg.promote_parts)
    ga, gb = ptrs
    lt = _u32(k, "and.b32", b.tid, WARPGROUP - 1)
    lane = _u32(k, "and.b32", lt, 31)
    warp = _u32(k, "shr.u32", lt, 5)
    g = _u32(k, "shr.u32", lane, 2)
    r = _u32(k, "mad.lo.u32", warp, 16, g)
    k.ins("mad.lo.u32", r, cw, 64, r)
    k.ins("mad.lo.u32", r, mb, cfg.block_m, r)
    mlast = _u32(k, "sub.u32", b.dims[0], 1)
    out = []
    for h in (0, 1):
        rh = _u32(k, "add.u32", r, 8 * h)
        k.ins("min.u32", rh, rh, mlast)
        off = k.reg("u64")
        k.ins("mul.wide.u32", off, rh, b.ktiles)
        addr = k.reg("u64")
        k.ins("shl.b64", off, off, 2)
        k.ins("add.s64", addr, ga, off)
        out.append(addr)
    off = k.reg("u64")
    k.ins("mul.wide.u32", off, nb, b.ktiles)
    k.ins("shl.b64", off, off, 2)
    addr = k.reg("u64")
    k.ins("add.s64", addr, gb, off)
    return out[0], out[1], addr


def _block_scales(k: Kernel, rows: tuple[Reg, Reg, Reg], kt: Reg) -> tuple[Reg, Reg]:
    """K block ``kt``'s scales of this thread's two fragment rows:
    ``scale_a[row, kt] * scale_b[kt, n block]`` (loaded before the K block's WGMMAs, used when
    its partial sums are promoted)."""
    off = k.reg("u64")
    k.ins("mul.wide.u32", off, kt, 4)
    vals = []
    for base in rows:
        addr = k.reg("u64")
        k.ins("add.s64", addr, base, off)
        v = k.reg("f32")
        k.ins("ld.global.nc.f32", v, f"[{addr}]")
        vals.append(v)
    s0, s1 = k.reg("f32"), k.reg("f32")
    k.ins("mul.f32", s0, vals[0], vals[2])
    k.ins("mul.f32", s1, vals[1], vals[2])
    return s0, s1


def _mainloop_promoted(b: _Build, seq: WgmmaSequence, acc: Sequence[Reg],
                       temps: Sequence[Sequence[Reg]], a_desc0: Sequence[Reg],
                       b_desc0: Sequence[Reg], stage: Reg, phase: Reg, is_lead: Reg,
                       p_true: Reg, p_first: Reg | None,
                       block_rows: tuple[Reg, Reg, Reg] | None = None,
                       halves: Sequence[tuple[Sequence[Reg], Sequence[Reg]]] | None = None
                       ) -> None:
    """The promoted FP8 main loop of one tile: per group of ``promote`` K blocks and per N
    part, WGMMA sums the group into a temporary (scale-d 0 on its first instruction), and
    ``add.f32`` adds the retired temporary into the tile's accumulators (:func:`_promote_map`);
    with two temporaries the next part's WGMMA runs while the last one's sum is added.  Then
    the group's stages are released.  Block scales (``block_rows``, :func:`_block_scale_rows`;
    ``promote`` 1): each K block's two scales are loaded before its WGMMAs and its partial
    sums are added scaled (``fma.rn.f32``).  ``halves`` (the ping-pong schedule): the
    (accumulators, A descriptors) of each 64-row half of the warpgroup's tile; the N parts
    run per half, in that order (else one half: ``acc``, ``a_desc0``)."""
    k, cfg = b.k, b.cfg
    assert p_first is not None
    if halves is None:
        halves = [(acc, a_desc0)]
    if cfg.pipelined:
        _mainloop_pipelined(b, seq, acc, temps, a_desc0, b_desc0, stage, phase, is_lead, p_true)
        return
    if cfg.promote_unroll > 1:
        _mainloop_unrolled(b, seq, acc, temps, a_desc0, b_desc0, stage, phase, is_lead, p_true)
        return
    group, parts, nt = cfg.promote, cfg.promote_parts, len(temps)
    k.comment(f"promoted main loop: {group} K block(s) x {parts} part(s) of "
              f"n{cfg.block_n // parts} per promotion into the f32 accumulators")
    maps, p_zero = _promotion_start(k, cfg, [r for h in halves for r in h[0]])
    units = [(h, q) for h in range(len(halves)) for q in range(parts)]
    lane_base = _rs_lane_base(b) if cfg.promote_rs else None
    kt = _u32(k, "mov.u32", 0)
    a_frag = None

    def load_a(st: Reg, ph: Reg, into: list[list[Reg]] | None = None) -> list[list[Reg]]:
        assert lane_base is not None
        TE.mbarrier_wait_parity(k, _barrier(k, b.smem, b.off_full, st), ph)
        return _load_a_frag(b, seq, lane_base, st, into)

    if cfg.promote_rs_prefetch:  # the tile's first K block; the others are prefetched
        a_frag = load_a(stage, phase)
    kloop = k.fresh_label("c_k")
    k.label(kloop)
    if lane_base is not None and not cfg.promote_rs_prefetch:
        a_frag = load_a(stage, phase)  # A's fragment of this K block, once for every part

    def prefetch() -> None:
        """promote_rs_prefetch: the last part has retired; load the next K block's A."""
        if not cfg.promote_rs_prefetch:
            return
        assert a_frag is not None
        skip = k.fresh_label("no_prefetch")
        more = k.reg("pred")
        kn = _u32(k, "add.u32", kt, 1)
        k.ins("setp.lt.u32", more, kn, b.ktiles)
        k.bra(skip, f"!{more}")
        st, ph = _u32(k, "mov.u32", stage), _u32(k, "mov.u32", phase)
        _next_stage(k, st, ph, cfg.stages)
        load_a(st, ph, a_frag)
        k.label(skip)
    cnt = None
    if group > 1:  # the last group of a tile may be short (ragged K)
        cnt = _u32(k, "sub.u32", b.ktiles, kt)
        k.ins("min.u32", cnt, cnt, group)
    pending: list[int] = []
    scales = None
    if block_rows is not None:
        assert group == 1
        scales = _block_scales(k, block_rows, kt)

    def add(u: int) -> None:
        h, q = units[u]
        _add_part(k, seq, halves[h][0], temps[u % nt], maps[q], scales)

    for u, (h, q) in enumerate(units):
        t = temps[u % nt]
        ad = halves[h][1]
        if cnt is None:
            _part_mmas(b, seq, t, ad, b_desc0, stage,
                       phase if u == 0 and a_frag is None else None, q, p_zero, p_true, a_frag)
        else:
            st = _u32(k, "mov.u32", stage)
            ph = _u32(k, "mov.u32", phase)
            j = _u32(k, "mov.u32", 0)
            k.ins("setp.ne.u32", p_first, 0, 0)
            jl = k.fresh_label("c_kg")
            k.label(jl)
            _part_mmas(b, seq, t, ad, b_desc0, st, ph if u == 0 else None, q, p_first,
                       p_true)
            k.ins("setp.ne.u32", p_first, 1, 0)
            _next_stage(k, st, ph, cfg.stages)
            k.ins("add.u32", j, j, 1)
            pj = k.reg("pred")
            k.ins("setp.lt.u32", pj, j, cnt)
            k.bra(jl, pj)
        seq.commit()
        pending.append(u)
        if len(pending) == nt:
            seq.wait(nt - 1)
            if nt == 1 and u == len(units) - 1:
                prefetch()
            add(pending.pop(0))
    if pending:
        seq.wait(0)
        prefetch()
    for u in pending:
        add(u)
    if cnt is None:
        _release(k, cfg, b.smem, b.off_empty, stage, is_lead, b.rank)
        _next_stage(k, stage, phase, cfg.stages)
        k.ins("add.u32", kt, kt, 1)
    else:
        j = _u32(k, "mov.u32", 0)
        rl = k.fresh_label("c_rel")
        k.label(rl)
        _release(k, cfg, b.smem, b.off_empty, stage, is_lead, b.rank)
        _next_stage(k, stage, phase, cfg.stages)
        k.ins("add.u32", j, j, 1)
        pj = k.reg("pred")
        k.ins("setp.lt.u32", pj, j, cnt)
        k.bra(rl, pj)
        k.ins("add.u32", kt, kt, cnt)
    pk_ = k.reg("pred")
    k.ins("setp.lt.u32", pk_, kt, b.ktiles)
    k.bra(kloop, pk_)


def _promoted_blocks(b: _Build, seq: WgmmaSequence, acc: Sequence[Reg],
                     temps: Sequence[Sequence[Reg]], a_desc0: Sequence[Reg],
                     b_desc0: Sequence[Reg], stage: Reg, phase: Reg, is_lead: Reg,
                     p_true: Reg, maps: Sequence[tuple[int, ...]], p_zero: Reg,
                     blocks: int) -> None:
    """``blocks`` consecutive K blocks (stages ``stage``, ``stage + 1``, ...) of the promoted
    loop as one stream of (block, part) units through the temporaries in turn: a unit's
    group is retired (``wait_group nt - 1``) and added when the next ``nt - 1`` units are
    issued, a block's stage is released once its last unit is added, and everything is
    retired at the end (nothing in flight across the caller's loop edge).  Advances
    ``stage`` / ``phase`` by ``blocks``."""
    k, cfg = b.k, b.cfg
    parts, nt = cfg.promote_parts, len(temps)
    pos = [(stage, phase)]
    for _ in range(blocks - 1):
        st, ph = _u32(k, "mov.u32", pos[-1][0]), _u32(k, "mov.u32", pos[-1][1])
        _next_stage(k, st, ph, cfg.stages)
        pos.append((st, ph))
    units = [(blk, q) for blk in range(blocks) for q in range(parts)]
    pending: list[int] = []

    def add(u: int) -> None:
        blk, q = units[u]
        _add_part(k, seq, acc, temps[u % nt], maps[q])
        if q == parts - 1:  # the block's last part: its stage is free
            _release(k, cfg, b.smem, b.off_empty, pos[blk][0], is_lead, b.rank)

    for u, (blk, q) in enumerate(units):
        st, ph = pos[blk]
        _part_mmas(b, seq, temps[u % nt], a_desc0, b_desc0, st, ph if q == 0 else None, q,
                   p_zero, p_true)
        seq.commit()
        pending.append(u)
        if len(pending) == nt:
            seq.wait(nt - 1)
            add(pending.pop(0))
    if pending:
        seq.wait(0)
    for u in pending:
        add(u)
    k.ins("mov.u32", stage, pos[-1][0])
    k.ins("mov.u32", phase, pos[-1][1])
    _next_stage(k, stage, phase, cfg.stages)


def _mainloop_unrolled(b: _Build, seq: WgmmaSequence, acc: Sequence[Reg],
                       temps: Sequence[Sequence[Reg]], a_desc0: Sequence[Reg],
                       b_desc0: Sequence[Reg], stage: Reg, phase: Reg, is_lead: Reg,
                       p_true: Reg) -> None:
    """The promoted loop (promote 1) with ``promote_unroll`` K blocks per iteration
    (:func:`_promoted_blocks`), then the K blocks left over one at a time."""
    k, cfg = b.k, b.cfg
    un = cfg.promote_unroll
    k.comment(f"promoted main loop, {un} K blocks per iteration: {cfg.promote_parts} part(s) "
              f"of n{cfg.block_n // cfg.promote_parts} each through {len(temps)} temporaries")
    maps, p_zero = _promotion_start(k, cfg, acc)
    args = (b, seq, acc, temps, a_desc0, b_desc0, stage, phase, is_lead, p_true, maps, p_zero)
    kt = _u32(k, "mov.u32", 0)
    rest = k.fresh_label("c_k_rest")
    kloop = k.fresh_label("c_k")
    pr = k.reg("pred")
    k.label(kloop)
    left = _u32(k, "sub.u32", b.ktiles, kt)
    k.ins("setp.lt.u32", pr, left, un)
    k.bra(rest, pr)
    _promoted_blocks(*args, un)
    k.ins("add.u32", kt, kt, un)
    k.bra(kloop)
    k.label(rest)
    one = k.fresh_label("c_k_one")
    done = k.fresh_label("c_k_done")
    k.label(one)
    k.ins("setp.ge.u32", pr, kt, b.ktiles)
    k.bra(done, pr)
    _promoted_blocks(*args, 1)
    k.ins("add.u32", kt, kt, 1)
    k.bra(one)
    k.label(done)


def _mainloop_pipelined(b: _Build, seq: WgmmaSequence, acc: Sequence[Reg],
                        temps: Sequence[Sequence[Reg]], a_desc0: Sequence[Reg],
                        b_desc0: Sequence[Reg], stage: Reg, phase: Reg, is_lead: Reg,
                        p_true: Reg) -> None:
    """The promoted main loop with two temporaries, promotion every K block, software-
    pipelined across K blocks: each N part's WGMMA group is committed before the previous
    group (the previous part, or the previous K block's last part) is retired
    (``wait_group 1``) and added, so one group stays in flight while ``add.f32`` runs.  Part
    ``q`` always uses temporary ``q % 2`` (``promote_parts`` is even).  A K block's stage is
    released once its last group has retired, during the next K block."""
    k, cfg = b.k, b.cfg
    parts = cfg.promote_parts
    k.comment(f"promoted main loop, pipelined: {parts} part(s) of n{cfg.block_n // parts} per "
              "K block, two temporaries, one WGMMA group in flight while the other is added")
    maps, p_zero = _promotion_start(k, cfg, acc)
    prev = _u32(k, "mov.u32", stage)

    def add(q: int) -> None:
        _add_part(k, seq, acc, temps[q % 2], maps[q])

    def block(first: bool) -> None:
        for q in range(parts):
            _part_mmas(b, seq, temps[q % 2], a_desc0, b_desc0, stage,
                       phase if q == 0 else None, q, p_zero, p_true)
            seq.commit()
            if first and q == 0:
                continue
            seq.wait(1)  # the group before this one has retired
            add((q - 1) % parts)
            if q == 0:  # the previous K block's groups have all retired
                _release(k, cfg, b.smem, b.off_empty, prev, is_lead, b.rank)
        k.ins("mov.u32", prev, stage)
        _next_stage(k, stage, phase, cfg.stages)

    block(first=True)
    kt = _u32(k, "mov.u32", 1)
    tail = k.fresh_label("c_k_tail")
    pe = k.reg("pred")
    k.ins("setp.ge.u32", pe, kt, b.ktiles)
    k.bra(tail, pe)
    kloop = k.fresh_label("c_k")
    k.label(kloop)
    block(first=False)
    k.ins("add.u32", kt, kt, 1)
    pk_ = k.reg("pred")
    k.ins("setp.lt.u32", pk_, kt, b.ktiles)
    k.bra(kloop, pk_)
    k.label(tail)
    seq.wait(0)
    add(parts - 1)
    _release(k, cfg, b.smem, b.off_empty, prev, is_lead, b.rank)


def _fp8_scale(b: _Build) -> Reg | tuple[Reg, Reg] | None:
    """FP8: ``scale_a * scale_b`` loaded from the two f32 device scalars; row-wise scales:
    the two vectors' global addresses (else None)."""
    if b.scale_params is None or b.scale_step is not None:
        return None  # grouped: per tile (_group_scales)
    ga, gb = _scale_addresses(b)
    if b.cfg.scale_mode in ("row", "block"):
        return ga, gb
    return _scale_product(b.k, ga, gb)


def _scale_addresses(b: _Build) -> tuple[Reg, Reg]:
    """``scale_a`` and ``scale_b``'s global addresses from the kernel's parameters."""
    assert b.scale_params is not None
    ga, gb = (b.k.ld_param(p) for p in b.scale_params)
    b.k.ins("cvta.to.global.u64", ga, ga)
    b.k.ins("cvta.to.global.u64", gb, gb)
    return ga, gb


def _scale_product(k: Kernel, ga: Reg, gb: Reg) -> Reg:
    """Per-tensor scales: ``scale_a[0] * scale_b[0]`` at the two addresses."""
    sa, sb = k.reg("f32"), k.reg("f32")
    k.ins("ld.global.nc.f32", sa, f"[{ga}]")
    k.ins("ld.global.nc.f32", sb, f"[{gb}]")
    scale = k.reg("f32")
    k.ins("mul.f32", scale, sa, sb)
    return scale


def _group_scales(b: _Build) -> Reg | tuple[Reg, Reg]:
    """Grouped FP8, per tile: the current group's rows ``start..end`` (the row ends follow
    ``tile_ends`` in the kernel's buffer; its M, ``end - start``, into ``b.dims[0]``) and its
    scales: ``scale_a`` indexed by A's stacked rows (row-wise: from row ``start``; block:
    from row ``start`` of its ``ktiles`` columns) and ``scale_b`` at ``g * scale_b_step``
    bytes; per-tensor: ``scale_a[0] * scale_b[g]`` (a register), else the two addresses for
    :func:`_row_scale` / :func:`_block_scale_rows`.  The parameters are read here, per tile,
    so no register of this lives across the main loop."""
    k, cfg = b.k, b.cfg
    assert b.scale_params is not None and b.scale_step is not None
    assert b.groups is not None and b.group is not None and b.dims is not None
    _, ends, G = b.groups
    g = b.group
    k.comment("grouped FP8: this group's rows and scales")
    ga, gb = _scale_addresses(b)
    sstep = k.ld_param(b.scale_step)
    rows = k.reg("u64")
    k.ins("mad.wide.u32", rows, G, 4, ends)
    ea = k.reg("u64")
    k.ins("mad.wide.u32", ea, g, 4, rows)
    end = k.reg("u32")
    k.ins("ld.global.nc.u32", end, f"[{ea}]")
    start = _u32(k, "mov.u32", 0)
    first = k.reg("pred")
    k.ins("setp.eq.u32", first, g, 0)
    k.ins("ld.global.nc.u32", start, f"[{ea}+-4]", pred=f"!{first}")
    k.ins("sub.u32", b.dims[0], end, start)
    gbg = k.reg("u64")
    k.ins("mad.wide.u32", gbg, g, sstep, gb)
    if cfg.scale_mode == "tensor":
        return _scale_product(k, ga, gbg)
    per_row = 4 if cfg.scale_mode == "row" else None
    off = k.reg("u64")
    if per_row is None:  # block: ktiles f32 per row of A
        k.ins("mul.wide.u32", off, start, b.ktiles)
        k.ins("shl.b64", off, off, 2)
    else:
        k.ins("mul.wide.u32", off, start, per_row)
    gag = k.reg("u64")
    k.ins("add.s64", gag, ga, off)
    return gag, gbg


def _epilogue_setup(b: _Build, cw: Reg, ltid: Reg, is_lead: Reg) -> _Epilogue:
    """The per-lane staging address (checked against the staging layout by
    :func:`_check_c_offsets`), this warpgroup's two staging buffers and its barrier id."""
    k, cfg = b.k, b.cfg
    lane = _u32(k, "and.b32", b.tid, 31)
    warp = _u32(k, "shr.u32", ltid, 5)
    if cfg.out_bytes == 2:
        c_lane = _stsm_lane(k, lane, warp, _ROW)
    else:
        g8 = _u32(k, "shr.u32", lane, 2)
        tig = _u32(k, "and.b32", lane, 3)
        row = _u32(k, "mad.lo.u32", warp, 16, g8)
        col = _u32(k, "shr.u32", tig, 1)
        k.ins("xor.b32", col, col, g8)
        k.ins("shl.b32", col, col, 4)
        lo = _u32(k, "and.b32", tig, 1)
        k.ins("shl.b32", lo, lo, 3)
        k.ins("add.u32", col, col, lo)
        c_lane = _u32(k, "mad.lo.u32", row, _ROW, col)
    c_buf0 = _u32(k, "mad.lo.u32", cw, 2 * cfg.c_buffer_bytes, b.off_c)
    k.ins("add.u32", c_buf0, c_buf0, b.smem)  # this warpgroup's two staging buffers
    bar_id = _u32(k, "add.u32", cw, 1)
    return _Epilogue(c_lane, c_buf0, bar_id, is_lead, cw)


def _row_col_base(thread: int) -> tuple[int, int]:
    """(row, column) of a thread's accumulator element 0 (the PTX arithmetic of
    :func:`_row_scale`)."""
    lane = thread % 32
    return 16 * (thread // 32) + lane // 4, 2 * (lane % 4)


@functools.cache
def _check_row_cols(bn: int) -> None:
    """Every accumulator element ``i`` of every thread sits at its element 0's (row, column)
    plus (8 * ((i // 2) % 2), 8 * (i // 4) + i % 2): the offsets :func:`_row_scale` uses,
    checked against the fragment formula."""
    for t in range(WARPGROUP):
        r0, c0 = _row_col_base(t)
        for i in range(bn // 2):
            want = (r0 + 8 * ((i // 2) % 2), c0 + 8 * (i // 4) + i % 2)
            if accumulator_coord(bn, t, i) != want:  # pragma: no cover - fragment guard
                raise GemmSm90Error(f"row-scale offsets of thread {t} element {i}")


def _stage_row_scales(b: _Build, ptrs: tuple[Reg, Reg], cw: Reg, ltid: Reg, mb: Reg,
                      nb: Reg) -> Reg:
    """``row_scale_stage``, at a tile's start: this warpgroup's 64 rows of ``scale_a``
    (threads 0..63, one f32 each; rows past M read ``scale_a[M - 1]``) and the tile's
    ``block_n`` columns of ``scale_b`` (column pairs, 8 bytes a thread; pairs past N read
    ``scale_b[0..1]``) copied with cp.async into its staging area (``scale_a`` at +0,
    ``scale_b`` at +256 bytes) and committed as one group; returns the area's address.  The
    epilogue waits for the group and syncs the warpgroup before reading
    (:func:`_row_scale` with ``staged``); the previous tile's readers are past the epilogue's
    first named barrier before any thread issues these copies."""
    k, cfg = b.k, b.cfg
    assert b.dims is not None
    m, n = b.dims[0], b.dims[1]
    ga, gb = ptrs
    bn, ssb = cfg.block_n, cfg.scale_stage_bytes
    k.comment("row_scale_stage: this tile's row-wise scales -> shared memory (cp.async)")
    base = _u32(k, "mad.lo.u32", cw, ssb, b.off_full - cfg.consumers * ssb)
    k.ins("add.u32", base, base, b.smem)
    cp4 = next(a for a in ASYNC_COPIES if a.name == "atom.simt_async_copy<4>")
    cp8 = next(a for a in ASYNC_COPIES if a.name == "atom.simt_async_copy<8>")
    skip = k.fresh_label("sa_staged")
    out = k.reg("pred")
    k.ins("setp.ge.u32", out, ltid, 64)
    k.bra(skip, out)
    row = _u32(k, "mad.lo.u32", mb, cfg.block_m, ltid)
    k.ins("mad.lo.u32", row, cw, 64, row)
    mlast = _u32(k, "sub.u32", m, 1)
    k.ins("min.u32", row, row, mlast)
    src = k.reg("u64")
    k.ins("mad.wide.u32", src, row, 4, ga)
    CE.emit_cp_async(k, cp4, _u32(k, "mad.lo.u32", ltid, 4, base), src)
    k.label(skip)
    pairs = bn // 2
    for i in range(-(-pairs // WARPGROUP)):
        q = _u32(k, "add.u32", ltid, WARPGROUP * i)
        done = None
        if pairs - WARPGROUP * i < WARPGROUP:
            done = k.fresh_label("sb_staged")
            past = k.reg("pred")
            k.ins("setp.ge.u32", past, q, pairs)
            k.bra(done, past)
        col = _u32(k, "mad.lo.u32", nb, bn, _u32(k, "shl.b32", q, 1))
        inside = k.reg("pred")
        k.ins("setp.lt.u32", inside, col, n)
        k.ins("selp.u32", col, col, 0, inside)
        src = k.reg("u64")
        k.ins("mad.wide.u32", src, col, 4, gb)
        dst = _u32(k, "mad.lo.u32", q, 8, base)
        k.ins("add.u32", dst, dst, _STAGED_SA_BYTES)
        CE.emit_cp_async(k, cp8, dst, src)
        if done is not None:
            k.label(done)
    CE.emit_commit_group(k)
    return base


def _row_scale(b: _Build, acc: Sequence[Reg], ptrs: tuple[Reg, Reg], row0: Reg,
               col0: Reg, staged: Reg | None = None) -> None:
    """Row-wise scales: ``acc[m, n] *= scale_a[m] * scale_b[n]`` for this warpgroup's rows
    (``row0``..) and the tile's columns (``col0``..); rows past M read ``scale_a[M - 1]`` and
    columns past N ``scale_b[0]`` (their outputs are dropped by the TMA store).  ``staged``:
    read them from the warpgroup's staging area instead (:func:`_stage_row_scales`: row r of
    the warpgroup at +4 r, column c of the tile at +256 + 4 c)."""
    k, bn = b.k, b.cfg.block_n
    _check_row_cols(bn)
    assert b.dims is not None
    m, n = b.dims[0], b.dims[1]
    ga, gb = ptrs
    k.comment("row-wise scales: acc[m, n] *= scale_a[m] * scale_b[n]")
    lt = _u32(k, "and.b32", b.tid, WARPGROUP - 1)
    lane = _u32(k, "and.b32", lt, 31)
    warp = _u32(k, "shr.u32", lt, 5)
    g = _u32(k, "shr.u32", lane, 2)
    r = _u32(k, "mad.lo.u32", warp, 16, g)
    sa = []
    if staged is not None:  # warpgroup-local row r, tile-local column c
        ra = _u32(k, "mad.lo.u32", r, 4, staged)
        for h in (0, 1):
            v = k.reg("f32")
            k.ins("ld.shared.f32", v, f"[{ra}+{32 * h}]")
            sa.append(v)
        c = _u32(k, "and.b32", lane, 3)
        cb = _u32(k, "mad.lo.u32", c, 8, staged)

        def load_sb(j: int) -> list[Reg]:
            sb = [k.reg("f32"), k.reg("f32")]
            k.ins("ld.shared.v2.f32", sb, f"[{cb}+{_STAGED_SA_BYTES + 32 * j}]")
            return sb
    else:
        k.ins("add.u32", r, r, row0)
        mlast = _u32(k, "sub.u32", m, 1)
        for h in (0, 1):
            rh = _u32(k, "add.u32", r, 8 * h)
            k.ins("min.u32", rh, rh, mlast)
            addr = k.reg("u64")
            k.ins("mad.wide.u32", addr, rh, 4, ga)
            v = k.reg("f32")
            k.ins("ld.global.nc.f32", v, f"[{addr}]")
            sa.append(v)
        c = _u32(k, "and.b32", lane, 3)
        k.ins("shl.b32", c, c, 1)
        k.ins("add.u32", c, c, col0)

        def load_sb(j: int) -> list[Reg]:
            cj = _u32(k, "add.u32", c, 8 * j)
            inside = k.reg("pred")
            k.ins("setp.lt.u32", inside, cj, n)
            k.ins("selp.u32", cj, cj, 0, inside)
            addr = k.reg("u64")
            k.ins("mad.wide.u32", addr, cj, 4, gb)
            sb = [k.reg("f32"), k.reg("f32")]
            k.ins("ld.global.nc.v2.f32", sb, f"[{addr}]")
            return sb
    for j in range(bn // 8):
        sb = load_sb(j)
        for h in (0, 1):
            for e in (0, 1):
                f = k.reg("f32")
                k.ins("mul.f32", f, sa[h], sb[e])
                i = 4 * j + 2 * h + e
                k.ins("mul.f32", acc[i], acc[i], f)


def _epilogue(b: _Build, ep: _Epilogue, acc: Sequence[Reg],
              scale: Reg | tuple[Reg, Reg] | None, mb: Reg, nb: Reg,
              half: int | None = None, staged: Reg | None = None) -> None:
    """One tile's accumulators -> 16-bit pairs (``stmatrix.x4``) or f32 pairs
    (``st.shared.v2.f32``) into the SW128 staging buffers, one 128-byte-wide chunk at a time,
    alternating buffers -> ``fence.proxy.async`` -> one TMA store per chunk."""
    k, cfg = b.k, b.cfg
    bm, bn = cfg.block_m, cfg.block_n
    k.comment("epilogue: registers -> SW128 staging (stmatrix) -> TMA store, per chunk")
    row0 = _u32(k, "mul.lo.u32", mb, bm)
    if half is None:  # cooperative: this warpgroup's 64 rows of the tile
        k.ins("mad.lo.u32", row0, ep.cw, 64, row0)
    elif half:  # ping-pong: the second 64-row half of this warpgroup's tile
        k.ins("add.u32", row0, row0, 64 * half)
    col0 = _u32(k, "mul.lo.u32", nb, bn)
    if staged is not None:  # the tile's scales in shared memory (_stage_row_scales)
        CE.emit_wait_all(k)
        SE.named_barrier_sync(k, ep.bar_id, WARPGROUP)
        _row_scale(b, acc, scale, row0, col0, staged)  # type: ignore[arg-type]
    elif isinstance(scale, tuple):
        _row_scale(b, acc, scale, row0, col0)
    elif scale is not None:
        for r in acc:
            k.ins("mul.f32", r, r, scale)
    fused = None
    if cfg.epilogue is not None:  # bias, C, activation, residual (nvatom.kernels.fusion)
        assert b.dims is not None
        fused = fusion.FusedEpilogue(k, cfg, b.epi_params, b.tid, row0, col0, b.dims, half)
    nchunks = bn // cfg.c_chunk_cols
    stsm = next(a for a in MATRIX_COPIES if a.name == "atom.stsm<m8n8.x4>")
    for ch in range(nchunks):
        groups = range(ch * cfg.c_chunk_cols // 8, (ch + 1) * cfg.c_chunk_cols // 8)
        loaded = fused.load(groups) if fused is not None else None  # latency under the wait
        buf = _u32(k, "add.u32", ep.c_buf0, (ch % 2) * cfg.c_buffer_bytes)
        skip_w = k.fresh_label("no_wait")
        k.bra(skip_w, f"!{ep.is_lead}")
        # the store that last read this buffer is done: one store (the other buffer's) may
        # stay in flight, except on a tile's first chunk when a tile has an odd number of
        # chunks: then the previous tile's last store read this same buffer (buffer 0), so
        # wait for all (docs/perf.md, "FP8 tile by wave count": a race seen at 128 x 192)
        TE.bulk_wait_group(k, 0 if ch == 0 and nchunks % 2 else 1, read=True)
        k.label(skip_w)
        SE.named_barrier_sync(k, ep.bar_id, WARPGROUP)
        if fused is not None and loaded is not None:
            fused.apply(acc, groups, loaded)
        base = _u32(k, "add.u32", buf, ep.c_lane)
        cc = cfg.c_chunk_cols
        if cfg.out_bytes == 2:
            for q in range(cc // 16):
                c16 = ch * cc + 16 * q  # first column of this 16 x 16 block
                regs = []
                for jj in range(4):  # matrix jj: rows 8*(jj%2).., cols c16 + 8*(jj//2)..
                    i0 = _acc_index(bn, jj % 2, c16 + 8 * (jj // 2))
                    regs.append(SE.cvt_pack_f32(k, cfg.out_dtype, acc[i0 + 1], acc[i0],
                                              target=b.target))
                addr = _u32(k, "xor.b32", base, 32 * q)
                emit_matrix_copy(k, stsm, regs, addr)
        else:
            for cb in range(cc // 8):
                for half in (0, 1):
                    i0 = _acc_index(bn, half, ch * cc + 8 * cb)
                    addr = _u32(k, "xor.b32", base, 32 * cb)
                    k.ins("st.shared.v2.f32", f"[{addr}+{half * 1024}]",
                          [acc[i0], acc[i0 + 1]])
        TE.fence_proxy_async(k)
        SE.named_barrier_sync(k, ep.bar_id, WARPGROUP)
        skip_st = k.fresh_label("no_store")
        k.bra(skip_st, f"!{ep.is_lead}")
        cx = _u32(k, "add.u32", col0, ch * cc)
        TE.tma_store(k, b.tmaps[2], [cx, row0], buf)
        TE.bulk_commit_group(k)
        k.label(skip_st)


def _producer(b: _Build) -> None:
    """Warpgroup 0: one thread loops over the CTA's tiles and K blocks, waits for ``empty[s]``,
    announces the stage's bytes on ``full[s]`` and issues the TMA loads of A and B (with
    ``cluster_m`` 2 and multicast: half of B each, to both CTAs)."""
    k, cfg, plan = b.k, b.cfg, b.plan
    bm, bn, bk = cfg.block_m, cfg.block_n, cfg.block_k
    stage_a, stage_b = cfg.a_stage_bytes, cfg.b_stage_bytes
    ta, tb, _ = b.tmaps
    k.comment("producer warpgroup: one thread issues every TMA load")
    SE.setmaxnreg(k, "dec", cfg.producer_regs, target=b.target)
    pl = k.reg("pred")
    k.ins("setp.ne.u32", pl, b.tid, 0)
    k.bra(b.done, pl)
    tx = stage_a + stage_b
    mask = None
    if cfg.mcast:
        mask = k.reg("b16")
        k.ins("mov.b16", mask, 3)
    # phase 1: a fresh barrier's "previous phase" counts as complete
    pstage, pphase, ptile, ptop, pmb, pnb = b.tile_loop("p_tile", 1, (0, 1))
    am = _u32(k, "mul.lo.u32", pmb, bm)
    bnn = _u32(k, "mul.lo.u32", pnb, bn)
    pkt = _u32(k, "mov.u32", 0)
    pk_top = k.fresh_label("p_k")
    k.label(pk_top)
    empty = _barrier(k, b.smem, b.off_empty, pstage)
    TE.mbarrier_wait_parity(k, empty, pphase)
    fullp = _barrier(k, b.smem, b.off_full, pstage)
    TE.mbarrier_arrive_expect_tx(k, fullp, tx)
    kx = _u32(k, "mul.lo.u32", pkt, bk)
    a_dst = _u32(k, "mad.lo.u32", pstage, stage_a, b.off_a)
    k.ins("add.u32", a_dst, a_dst, b.smem)
    TE.tma_load(k, a_dst, ta, [kx, am], fullp)
    b_dst = _u32(k, "mad.lo.u32", pstage, stage_b, b.off_b)
    k.ins("add.u32", b_dst, b_dst, b.smem)
    rank = b.rank
    if cfg.b_major == "K":
        if cfg.mcast:
            assert rank is not None
            half = _u32(k, "mul.lo.u32", rank, plan.b_box_offsets[0])
            dst = _u32(k, "add.u32", b_dst, half)
            bn_half = _u32(k, "mad.lo.u32", rank, bn // 2, bnn)
            TE.tma_load(k, dst, tb, [kx, bn_half], fullp, multicast_mask=mask)
        else:
            TE.tma_load(k, b_dst, tb, [kx, bnn], fullp)
    else:
        boxes = plan.b_box_offsets
        per = plan.b_box[0]
        if cfg.mcast:
            assert rank is not None
            # each CTA loads half of the boxes and multicasts them
            nh = len(boxes) // 2
            for jb in range(nh):
                sel = _u32(k, "mad.lo.u32", rank, nh, jb)  # box index
                dst = _u32(k, "mad.lo.u32", sel, boxes[1] - boxes[0], b_dst)
                nx = _u32(k, "mad.lo.u32", sel, per, bnn)
                TE.tma_load(k, dst, tb, [nx, kx], fullp, multicast_mask=mask)
        else:
            for jb, off in enumerate(boxes):
                dst = _u32(k, "add.u32", b_dst, off)
                nx = _u32(k, "add.u32", bnn, jb * per)
                TE.tma_load(k, dst, tb, [nx, kx], fullp)
    _next_stage(k, pstage, pphase, cfg.stages)
    k.ins("add.u32", pkt, pkt, 1)
    pk2 = k.reg("pred")
    k.ins("setp.lt.u32", pk2, pkt, b.ktiles)
    k.bra(pk_top, pk2)
    k.ins("add.u32", ptile, ptile, b.step)
    k.bra(ptop)


def _exit(b: _Build) -> None:
    """Every thread: outstanding TMA stores finish reading shared memory before the CTA
    exits; in a cluster, no CTA exits while its peer can still signal its barriers."""
    k = b.k
    k.label(b.done)
    TE.bulk_wait_group(k, 0, read=False)
    if b.cfg.cluster_m > 1:
        SE.barrier_cluster_arrive(k, aligned=False, target=b.target)
        SE.barrier_cluster_wait(k, aligned=False, target=b.target)


def _consumer_state(b: _Build, cw: Reg, ltid: Reg, is_lead: Reg) -> tuple[Any, ...]:
    """What a consumer warpgroup sets up before its tile loop (cooperative and ping-pong
    alike): the always-true scale-d predicate, the first-K-block accumulate predicate, the
    WGMMA immediates (scales 1; B transposed when MN-major), the epilogue's registers and,
    when FP8 promotes, the zeroed partial-sum temporaries and their first-block predicate."""
    k, cfg, form = b.k, b.cfg, b.cfg.form
    p_true = emit_scale_d(k, 1)
    p_acc = k.reg("pred")
    imm = tuple(1 if w.startswith("scale") else int(w == "trans_b" and cfg.b_major == "MN")
                for w in form.immediates)
    ep = _epilogue_setup(b, cw, ltid, is_lead)
    temps: list[list[Reg]] = []
    p_first = None
    if cfg.promote:
        temps = [k.regs("f32", cfg.part_form.registers("D")) for _ in range(cfg.promote_temps)]
        p_first = k.reg("pred")
        for r in (r for t in temps for r in t):  # defined before WGMMA's first use (C7519)
            k.ins("mov.f32", r, "0f00000000")
    return p_true, p_acc, imm, ep, temps, p_first


def _retire_k_block(b: _Build, seq: Any, is_lead: Reg, p_acc: Reg, kt: Reg, prev: Reg,
                    stage: Reg, phase: Reg, kloop: str) -> None:
    """The end of one K block of a consumer's main loop (cooperative and ping-pong alike):
    commit the block's WGMMAs, clear the first-block accumulate flag, wait until at most
    ``wgmma_inflight`` groups are pending, release the stage whose group retired (the previous
    one with ``wgmma_inflight``, from the second block on), advance the stage ring and loop
    while K blocks remain."""
    k, cfg = b.k, b.cfg
    seq.commit()
    b.late_acquire(is_lead)
    k.ins("setp.ne.u32", p_acc, 1, 0)
    seq.wait(cfg.wgmma_inflight)
    rel = prev if cfg.wgmma_inflight else stage
    pr = k.reg("pred")
    if cfg.wgmma_inflight:
        k.ins("setp.ne.u32", pr, kt, 0)
        k.ins("and.pred", pr, pr, is_lead)
    else:
        k.ins("mov.pred", pr, is_lead)
    _release(k, cfg, b.smem, b.off_empty, rel, pr, b.rank)
    k.ins("mov.u32", prev, stage)
    _next_stage(k, stage, phase, cfg.stages)
    k.ins("add.u32", kt, kt, 1)
    pk_ = k.reg("pred")
    k.ins("setp.lt.u32", pk_, kt, b.ktiles)
    k.bra(kloop, pk_)



def _release(k: Kernel, cfg: GemmSm90Config, smem: Reg, off_empty: int, stage: Reg,
             pred: Reg, rank: Reg | None) -> None:
    """Arrive on ``empty[stage]`` (of every CTA of the cluster that multicast into it)."""
    skip = k.fresh_label("no_release")
    k.bra(skip, f"!{pred}")
    bar = _barrier(k, smem, off_empty, stage)
    if not cfg.mcast:
        TE.mbarrier_arrive(k, bar)
    else:
        for peer in range(cfg.cluster_m):
            # CTA-scope release (the default): the .release.cluster form halved the 2-CTA
            # kernel's speed (docs/perf.md); wgmma's smem reads are complete at wait_group.
            TE.mbarrier_arrive_remote(k, SE.mapa_shared_cluster(k, bar, peer))
    k.label(skip)


# ============================================================================ launch


@dataclasses.dataclass(frozen=True)
class LaunchSpec:
    """What a launcher needs: grid, block, dynamic smem bytes, cluster shape, and the three
    tensor maps (A, B, D) to encode with ``cuTensorMapEncodeTiled`` (their ``driver_args``)."""

    kernel: str
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    smem_bytes: int
    cluster: tuple[int, int, int]
    tensor_maps: tuple[TensorMap, TensorMap, TensorMap]
    scalars: tuple[int, int, int]  # M, N, K


def check_problem(cfg: GemmSm90Config, m: int, n: int, k: int) -> None:
    for name, v in (("M", m), ("N", n), ("K", k)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise GemmSm90Error(f"{name} = {v!r} must be a positive int")
        if v >= 1 << 31:
            raise GemmSm90Error(f"{name} = {v} does not fit the kernel's 32-bit indices")
    ib, ob = cfg.in_bytes, cfg.out_bytes
    if (k * ib) % 16:
        raise GemmSm90Error(f"K = {k}: a row of A ({k} x {ib} bytes) is not a multiple of 16 "
                            f"bytes (TMA's stride rule); K must be a multiple of {16 // ib}")
    if cfg.b_major == "MN" and (n * ib) % 16:
        raise GemmSm90Error(f"N = {n}: a row of B ({n} x {ib} bytes) is not a multiple of 16 "
                            f"bytes (TMA's stride rule); N must be a multiple of {16 // ib}")
    if (n * ob) % 16:
        raise GemmSm90Error(f"N = {n}: a row of D ({n} x {ob} bytes) is not a multiple of 16 "
                            f"bytes (TMA's stride rule); N must be a multiple of {16 // ob}")
    tm = -(-m // cfg.block_m)
    tm += tm % 2 if cfg.cluster_m == 2 else 0
    tiles = tm * -(-n // cfg.block_n)
    if tiles > _MAX_TILES:
        raise GemmSm90Error(f"M x N = {m} x {n} makes {tiles} tiles of {cfg.block_m} x "
                            f"{cfg.block_n}, more than the kernel's 32-bit tile index (and a "
                            f"non-persistent grid) takes: at most {_MAX_TILES} = 2^31 - 1")


#: The most output tiles: the kernel counts them in u32 (tiles_m * tiles_n, tile + nctaid),
#: and a non-persistent launch has one CTA each (gridDim.x <= 2^31 - 1).
_MAX_TILES = 2**31 - 1


@functools.cache
def _tma_type(name: str) -> Any:
    """The tensor-map data type of an element type: the driver's own
    (:func:`nvatom.descriptors.tma.tma_data_type`), or for a type it has none of (FP8) the
    unsigned integer of its width, which TMA moves as raw bytes."""
    try:
        return tma_data_type(name)
    except DescriptorError:
        return tma_data_type(f"uint{dtype(name).storage_bits}")


def gemm_sm90_launch_spec(cfg: GemmSm90Config, m: int, n: int, k: int, a_ptr: int = 0,
                          b_ptr: int = 0, d_ptr: int = 0, num_sms: int = 132, *,
                          lda: int | None = None, ldb: int | None = None,
                          ldd: int | None = None) -> LaunchSpec:
    """Grid, block, shared memory, cluster and tensor maps for an M x N x K problem with
    A, B, D at the given device addresses (row-major A and D; B as ``cfg.b_major``).  The
    leading dimensions (in elements) default to tight rows; each must give a row pitch that
    is a multiple of 16 bytes (TMA)."""
    check_problem(cfg, m, n, k)
    plan = gemm_sm90_plan(cfg)
    ib, ob = cfg.in_bytes, cfg.out_bytes
    it, ot = _tma_type(cfg.in_dtype), _tma_type(cfg.out_dtype)
    lda = k if lda is None else lda
    ldb = (k if cfg.b_major == "K" else n) if ldb is None else ldb
    ldd = n if ldd is None else ldd
    for name, ld, least, eb in (("lda", lda, k, ib), ("ldb", ldb, k if cfg.b_major == "K"
                                                     else n, ib), ("ldd", ldd, n, ob)):
        if isinstance(ld, bool) or not isinstance(ld, int) or ld < least or (ld * eb) % 16:
            raise GemmSm90Error(f"{name} = {ld!r} must be an int >= {least} whose row pitch "
                                f"({eb}-byte elements) is a multiple of 16 bytes (TMA)")
    ta = TensorMap("tiled", it, a_ptr, (k, m), (lda * ib,),
                   box_dims=(cfg.block_k, cfg.block_m), swizzle=_SW128,
                   l2_promotion="256B")
    if cfg.b_major == "K":
        tb = TensorMap("tiled", it, b_ptr, (k, n), (ldb * ib,), box_dims=plan.b_box,
                       swizzle=_SW128, l2_promotion="256B")
    else:
        tb = TensorMap("tiled", it, b_ptr, (n, k), (ldb * ib,), box_dims=plan.b_box,
                       swizzle=_SW128, l2_promotion="256B")
    td = TensorMap("tiled", ot, d_ptr, (n, m), (ldd * ob,), box_dims=(cfg.c_chunk_cols, 64),
                   swizzle=_SW128)
    tm = -(-m // cfg.block_m)
    if cfg.cluster_m == 2:
        tm += tm % 2
    tiles = tm * -(-n // cfg.block_n)
    if cfg.persistent:
        grid = min(tiles, num_sms - num_sms % cfg.cluster_m)
    else:
        grid = tiles
    return LaunchSpec(cfg.name, (grid, 1, 1), (cfg.threads, 1, 1), cfg.smem_bytes,
                      (cfg.cluster_m, 1, 1), (ta, tb, td), (m, n, k))


#: The FP8 main loop's promotion settings (docs/perf.md, "FP8 promotion"): ``promote`` K
#: blocks per promotion, in ``promote_parts`` N parts through ``promote_temps`` temporaries.
FP8_PROMOTION = {"promote": 1, "promote_parts": 2, "promote_temps": 2, "block_n": 192}
#: The wide promoted tile, 128 x 256: 4 parts of n64 through two temporaries (128 + 64
#: registers), 4 K blocks per loop iteration (one WGMMA drain per 4 K blocks): 4-6% faster
#: than the earlier one n128 temporary (``promote_parts`` 2, ``promote_temps`` 1) at 4096^3
#: and 8192^3 (docs/perf.md, "FP8 promoted, session 5", U2).
FP8_PROMOTION_WIDE = {"promote": 1, "promote_parts": 4, "promote_temps": 2, "block_n": 256,
                      "promote_unroll": 4}
#: The promoted tiles (per-tensor and row-wise scales) chosen per problem size by
#: :func:`nvatom.runtime.gemm_plan.wave_pick`: (settings, speed of one tile relative to the
#: first: at 8192^3 on an H100 the wide tile ran at 0.970 of the 128 x 192 one (median of
#: per-round ratios, two sweeps, both scale modes), i.e. 0.985 per tile once its 16 waves
#: against 21 x 3/4 are taken out; 0.98 here; session 5, U2).
FP8_TILE_CHOICES: tuple[tuple[dict[str, Any], float], ...] = (
    (FP8_PROMOTION, 1.0), (FP8_PROMOTION_WIDE, 0.98))
#: Block scales: the promotion above with 128-column tiles (one block of B's scales each).
FP8_BLOCK_PROMOTION = {**FP8_PROMOTION, "block_n": SCALE_BLOCK}


#: Each consumer schedule's tile and stage count (docs/perf.md, "Ping-pong consumers"):
#: cooperative 128 x 256 (the two warpgroups 64 rows each), 4 stages; ping-pong 128 x 128
#: per warpgroup (128 accumulator registers a thread), 6 stages; "pingpong192": ping-pong
#: 128 x 192 per warpgroup (192 registers), 4 stages (docs/perf.md, "Grouped ping-pong and
#: schedule choice").  The names are nvatom.runtime.gemm_plan.SCHEDULE_OPTIONS.
SCHEDULE_TILES: dict[str, dict[str, Any]] = {
    "cooperative": {"schedule": "cooperative", "block_n": 256, "stages": 4},
    "pingpong": {"schedule": "pingpong", "block_n": 128, "stages": 6},
    "pingpong192": {"schedule": "pingpong", "block_n": 192, "stages": 4},
}
#: The default schedule of bf16/f16 inputs (measured on an H100, docs/perf.md "Ping-pong
#: consumers": level or faster on every bench shape but 4096^3, 1-2% slower there); FP8
#: stays cooperative (ping-pong measured slower).  With the problem's sizes the schedule
#: comes from nvatom.runtime.gemm_plan.plain_schedule (by wave count; the grouped kernel's
#: from SCHEDULE_RULES["grouped"]).
DEFAULT_SCHEDULE_16BIT = "pingpong"


def fp8_tile_options(block_m: int = 128) -> list[list[float]]:
    """:data:`FP8_TILE_CHOICES` as ``wave_pick`` options ``[block_m, block_n, efficiency]``
    (data a launch recipe can carry)."""
    return [[block_m, c["block_n"], eff] for c, eff in FP8_TILE_CHOICES]


def default_config(in_dtype: str = "bf16", out_dtype: str | None = None,
                   b_major: str = "MN", *, b_dtype: str = "", fast_accum: bool = False,
                   scale_mode: str = "tensor", schedule: str = "", m: int | None = None,
                   n: int | None = None, sms: int = 132) -> GemmSm90Config:
    """The tuned configuration for a dtype pair (docs/perf.md): persistent with raster
    group 8, one wgmma group in flight, no cluster (the 2-CTA multicast cluster measured
    equal within noise).  bf16/f16: the ping-pong schedule (:data:`DEFAULT_SCHEDULE_16BIT`,
    128 x 128 per consumer warpgroup, 6 stages; ``schedule="cooperative"`` gives the
    128 x 256 cooperative kernel, 4 stages: :data:`SCHEDULE_TILES`).  FP8 (cooperative only)
    takes a K-major B, gives bf16 and promotes WGMMA's partial sums into f32 every K block
    (:data:`FP8_PROMOTION`: 128 x 192 tiles, two N parts of 96 through two temporaries)
    unless ``fast_accum`` (128 x 256, WGMMA accumulates the whole K).  With the output's
    ``m`` and ``n`` (and the SM count ``sms``), promoted FP8 with per-tensor or row-wise
    scales takes the tile of :data:`FP8_TILE_CHOICES` that fills the waves best
    (:func:`~nvatom.runtime.gemm_plan.wave_pick`: 128 x 256 at 2048^3 and 4096^3, 128 x 192
    at 8192^3); without them, 128 x 192.  Row-wise scales are staged in shared memory
    (``row_scale_stage``: +1-2% on the H100, docs/perf.md "Row-wise scales staged in shared
    memory").  16-bit with ``m`` and ``n`` and no ``schedule``: the
    schedule whose tiles fill the waves best (:func:`~nvatom.runtime.gemm_plan.plain_schedule`:
    ping-pong 128 x 128 at 2048^3 and 4096^3, ping-pong 128 x 192 at 8192^3)."""
    if schedule and schedule not in SCHEDULE_TILES:
        raise GemmSm90Error(f"schedule {schedule!r} is not one of "
                            f"{', '.join(SCHEDULE_TILES)}")
    if in_dtype not in FP8_DTYPES:
        if out_dtype is None:
            out_dtype = in_dtype
        if not schedule and m is not None and n is not None:
            schedule = plain_schedule(m, n, sms)
        return GemmSm90Config(in_dtype=in_dtype, out_dtype=out_dtype, b_major=b_major,
                              **SCHEDULE_TILES[schedule or DEFAULT_SCHEDULE_16BIT])
    if schedule and SCHEDULE_TILES[schedule]["schedule"] == "pingpong":
        raise GemmSm90Error("the FP8 defaults are cooperative (ping-pong measured slower, "
                            "docs/perf.md): build a ping-pong FP8 GemmSm90Config directly")
    if scale_mode == "block" and fast_accum:
        raise GemmSm90Error("block scales are applied when the partial sums are promoted: "
                            "fast_accum (no promotion) cannot take them")
    promo = FP8_PROMOTION
    if m is not None and n is not None and scale_mode != "block":
        promo = FP8_TILE_CHOICES[wave_pick(fp8_tile_options(), m, n, sms)][0]
    extra: dict[str, Any] = {} if fast_accum else dict(
        FP8_BLOCK_PROMOTION if scale_mode == "block" else promo)
    return GemmSm90Config(in_dtype=in_dtype, out_dtype=out_dtype or "bf16", b_major="K",
                          b_dtype="" if b_dtype == in_dtype else b_dtype,
                          scale_mode=scale_mode, row_scale_stage=scale_mode == "row", **extra)


def kernel_params(cfg: GemmSm90Config) -> tuple[tuple[str, str], ...]:
    """The kernel's parameters as ``(name, PTX type)`` (``nvatom.runtime.launch`` form)."""
    if cfg.grouped:
        grouped = (("tmaps", "u64"), ("tile_ends", "u64"), ("G", "u32"), ("N", "u32"),
                   ("K", "u32"))
        if cfg.fp8:  # the row ends follow tile_ends in the same buffer
            grouped += (("scale_a", "u64"), ("scale_b", "u64"), ("scale_b_step", "u32"))
        return grouped
    tmap = TE.tensormap_param_type(TE.GEMM_TENSORMAP_ALIGN)
    out = [("tmap_a", tmap), ("tmap_b", tmap), ("tmap_d", tmap),
           ("M", "u32"), ("N", "u32"), ("K", "u32")]
    if cfg.fp8:
        out += [("scale_a", "u64"), ("scale_b", "u64")]
    if cfg.epilogue is not None:
        out += cfg.epilogue.params
    return tuple(out)
