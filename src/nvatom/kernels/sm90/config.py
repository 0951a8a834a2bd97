"""The SM90 GEMM's configuration: :class:`GemmSm90Config` (one kernel: tile, stages,
schedule, cluster, register budget, the FP8 options) with the checks of every rule it must
satisfy, the element-type and scaling-mode tables it is checked against, and the WGMMA forms
it selects from :data:`nvatom.atoms.sm90.FORMS` (PTX ISA "wgmma.mma_async", "setmaxnreg")."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Sequence

from nvatom.atoms.sm90 import FORMS, WgmmaForm
from nvatom.atoms.wgmma_fragments import WARPGROUP
from nvatom.dtypes import dtype
from nvatom.errors import NvatomError
from nvatom.kernels.sm90 import fusion
from nvatom.kernels.sm90.limits import ENTRY_REGS as _ENTRY_REGS
from nvatom.kernels.sm90.limits import MAX_SMEM as _MAX_SMEM
from nvatom.kernels.sm90.limits import REGS as _REGS
from nvatom.kernels.sm90.limits import SW128 as _SW128

__all__ = [
    "FP8_DTYPES",
    "GROUP_SCHEDS",
    "IN_DTYPES",
    "OUT_DTYPES",
    "PINGPONG_BAR",
    "SCALE_BLOCK",
    "SCALE_MODES",
    "SCHEDULES",
    "GemmSm90Config",
    "GemmSm90Error",
    "b_major_of",
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
_ROW = _SW128.row_bytes  # one SW128 row: the K extent of every smem tile and TMA box row
#: row_scale_stage: a consumer warpgroup's staged scale_a (its 64 rows of f32); its scale_b
#: follows at this offset in the warpgroup's staging area
_STAGED_SA_BYTES = 4 * 64
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
    # Block scales with promote_unroll > 1: the scales of all K blocks of an unrolled
    # iteration are loaded at its start (before its first WGMMA) instead of each block's
    # before its own, so only the first block's promotion can wait for them (ncu: 31% of
    # the wide block tile's stall cycles were these loads; docs/perf.md).  Not yet measured
    # on a GPU: an option, not a default.
    promote_scales_early: bool = False
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
    # A fused epilogue (nvatom.kernels.sm90.fusion): act(alpha acc + beta C + bias) + residual
    # on the f32 accumulators before they are packed; None: the plain epilogue (PTX unchanged).
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
        if (self.cluster_m == 2 and self.multicast and self.b_major == "MN"
                and self.block_n // 64 % 2):
            # each CTA multicasts half of B's boxes: an odd count leaves one never loaded,
            # so the stage's full barrier (expecting all of B) never completes: a hang the
            # stage ring's expect_tx check found (kernels/pipeline.py, docs/pipelines.md)
            raise GemmSm90Error(f"cluster_m 2 multicasting an MN-major B gives each CTA half "
                                f"of its 64-column boxes: block_n {self.block_n} has an odd "
                                "number of them (use 128 or 256, K-major B, or multicast "
                                "False)")
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
            raise GemmSm90Error(f"epilogue must be a nvatom.kernels.sm90.fusion.EpilogueSpec "
                                f"or None, got {ep!r}")
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
        if self.scale_mode == "block" and (
                self.promote != 1 or self.promote_pipelined or self.block_n % SCALE_BLOCK
                or self.block_k != SCALE_BLOCK or not isinstance(self.promote_parts, int)
                or self.promote_parts < 1 or self.block_n % self.promote_parts
                or SCALE_BLOCK % (self.block_n // self.promote_parts)):
            raise GemmSm90Error(
                f"scale_mode 'block' scales each K block's partial sums at promotion: it "
                f"needs promote 1 (not pipelined), block_n a multiple of {SCALE_BLOCK} (whole "
                f"blocks of B's scales), N parts that each lie in one block and "
                f"{SCALE_BLOCK}-element K blocks (FP8); got promote {self.promote}, "
                f"promote_pipelined {self.promote_pipelined}, block_n {self.block_n}, "
                f"promote_parts {self.promote_parts!r}")
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
                                         or self.promote_rs
                                         or self.schedule != "cooperative"):
            raise GemmSm90Error(
                f"promote_unroll {self.promote_unroll} runs several K blocks per iteration of "
                f"the cooperative promoted loop with promote 1 and A by descriptor (got "
                f"promote {self.promote}, promote_pipelined {self.promote_pipelined}, "
                f"promote_rs {self.promote_rs}, schedule {self.schedule!r})")
        if not isinstance(self.promote_scales_early, bool):
            raise GemmSm90Error(f"promote_scales_early must be a bool, got "
                                f"{self.promote_scales_early!r}")
        if self.promote_scales_early and (self.scale_mode != "block"
                                          or self.promote_unroll == 1):
            raise GemmSm90Error(
                f"promote_scales_early loads an unrolled iteration's block scales at its "
                f"start: it needs scale_mode 'block' and promote_unroll > 1 (got scale_mode "
                f"{self.scale_mode!r}, promote_unroll {self.promote_unroll})")
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
            extra += "e" if self.promote_scales_early else ""
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
