"""What a GEMM provider and ``nvatom.gemm`` share: the problem, the launch plan, the operand
rules, the provider protocol and the size rules that pick a kernel (:func:`wave_pick`: the
FP8 tile by wave count; :data:`SCHEDULE_RULES`: the 16-bit consumer schedule by shape).

This module sits below both :mod:`nvatom.gemm` (dispatch) and :mod:`nvatom.gemm_providers`
(the providers over :mod:`nvatom.kernels`), so the GEMM imports its providers directly and no
provider imports the GEMM back.  A :class:`GemmLaunch` names its kernel by a
:class:`~nvatom.runtime.launch.KernelSource` and packs its arguments with
:class:`~nvatom.runtime.launch.PackedParams`; an :class:`OperandRule` is checked against the
duck-typed :class:`~nvatom.runtime.torch_interop.TensorInfo` of an operand.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any, Protocol

from nvatom.runtime.launch import KernelSource, LruCache, PackedParams
from nvatom.runtime.torch_interop import ELEMENT_BYTES, TensorInfo

__all__ = [
    "MAX_GRID_X",
    "OUT_DTYPES",
    "PLAIN_DTYPES",
    "PLAIN_SCHEDULE_WAVES",
    "SCALED_DTYPES",
    "SCALE_MODES",
    "SCHEDULE_OPTIONS",
    "SCHEDULE_OPTION_TILES",
    "SCHEDULE_RULES",
    "GemmLaunch",
    "GemmProblem",
    "GemmProvider",
    "OperandRule",
    "capability_text",
    "default_operand_rules",
    "grouped_schedule",
    "plain_schedule",
    "plain_schedule_options",
    "rule_pick",
    "schedule_pick",
    "wave_pick",
]

#: Operand types taken with scales (FP8; either type on either side).
SCALED_DTYPES = ("e4m3", "e5m2")
#: The unscaled operand types and the output types ``nvatom.gemm`` takes (those of the SM80
#: kernel, which runs every problem of them: ``nvatom.kernels.gemm_sm80.IN_DTYPES`` /
#: ``OUT_DTYPES``, checked equal in tests/runtime/test_gemm_recipe.py); here so the checks
#: need no kernel module.
PLAIN_DTYPES = ("bf16", "f16")
OUT_DTYPES = ("bf16", "f16", "f32")
#: How FP8 scales apply: one f32 per operand ("tensor"), one per row of A and column of B
#: ("row"), or per 1 x 128 block of A and 128 x 128 block of B ("block", DeepSeek-V3's).
SCALE_MODES = ("tensor", "row", "block")
#: gridDim.x's limit (CUDA C++ Programming Guide, "Compute Capabilities": 2^31 - 1).
MAX_GRID_X = 2**31 - 1


def capability_text(capability: Sequence[int]) -> str:
    """``"9.0"`` for (9, 0)."""
    return f"{capability[0]}.{capability[1]}"


@dataclasses.dataclass(frozen=True)
class GemmProblem:
    """``D (M x N) = A (M x K) @ B (K x N)`` with operand storage orders and types."""

    m: int
    n: int
    k: int
    in_dtype: str  # A (and B unless b_dtype)
    out_dtype: str
    a_major: str  # "K": A row-major (M x K, stride (lda, 1)); "M": column-major
    b_major: str  # "N": B row-major (K x N, stride (ldb, 1)); "K": column-major
    acc: str = "f32"
    b_dtype: str = ""  # B's type where it differs from A's (FP8: e4m3 x e5m2, e5m2 x e4m3)
    scale_mode: str = ""  # FP8: "tensor", "row" or "block" (SCALE_MODES); "" without scales
    fast_accum: bool = False  # FP8: WGMMA accumulates the whole K (no f32 promotion)


@dataclasses.dataclass(frozen=True)
class GemmLaunch:
    """How to run one problem: the kernel, launch shape and a function giving its arguments."""

    source: KernelSource
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    shmem: int
    cluster: tuple[int, int, int] | None
    provider: str
    #: packed kernel arguments per (pointers, leading dimensions, M, N, K): the hot path of a
    #: repeated call is one dictionary hit (:meth:`packed`).
    param_cache: LruCache = dataclasses.field(default_factory=lambda: LruCache(256),
                                              compare=False, hash=False, repr=False)

    def args(self, a: TensorInfo, b: TensorInfo, d: TensorInfo, p: GemmProblem,
             scales: tuple[int, int] | None = None) -> list[Any]:
        """The kernel's arguments; ``scales``: device addresses of the f32 per-tensor scales
        of a scaled (FP8) problem, else None (kernels without scales ignore it)."""
        return [a.ptr, b.ptr, d.ptr, p.m, p.n, p.k, a.ld, b.ld, d.ld]

    def packed(self, a: TensorInfo, b: TensorInfo, d: TensorInfo, p: GemmProblem,
               scales: tuple[int, int] | None = None) -> PackedParams:
        """:meth:`args` checked and laid out for the launch, cached (bounded LRU) by everything
        the arguments depend on (the scale addresses included)."""
        key = (a.ptr, b.ptr, d.ptr, a.ld, b.ld, d.ld, p.m, p.n, p.k, scales)
        return self.param_cache.get_or_make(
            key, lambda: PackedParams.of(self.source.params, self.args(a, b, d, p, scales)))


@dataclasses.dataclass(frozen=True)
class OperandRule:
    """What a kernel needs of one operand's storage to read or write it where it lies.

    ``base_align``: the data pointer is a multiple of it (bytes).  ``pitch_align``: the row
    pitch (leading stride x element size) is a multiple of it, when more than one line is
    stored.  ``max_ld``: the largest leading stride, in elements (the kernel's parameter
    width), or None.  ``max_pitch``: the row pitch is below it (bytes), or None.
    ``no_overlap``: the leading stride is at least the contiguous extent (lines do not
    overlap: a TMA tensor map).  ``why``: the hardware reason, shown by
    :func:`nvatom.gemm.explain`.  An operand that breaks a rule is staged: copied to (or, for
    ``out``, computed in) an aligned buffer, :data:`nvatom.gemm.STAGE_ALIGN`-byte aligned with
    a tight, padded pitch that meets every rule."""

    base_align: int
    pitch_align: int
    why: str
    max_ld: int | None = None
    max_pitch: int | None = None
    no_overlap: bool = False

    def violation(self, t: TensorInfo) -> str | None:
        """Why ``t`` cannot be used in place (None: it can)."""
        if t.ptr % self.base_align:
            return (f"{t.name}'s data pointer 0x{t.ptr:x} is not {self.base_align}-byte "
                    f"aligned ({self.why})")
        if t.lines <= 1:  # one line: the leading stride addresses nothing (see settle_ld)
            return None
        pitch = t.ld * t.element_bytes
        if pitch % self.pitch_align:
            return (f"{t.name}'s row pitch {t.ld} elements ({pitch} bytes) is not a multiple "
                    f"of {self.pitch_align} bytes ({self.why})")
        if self.no_overlap and t.ld < t.inner:
            return (f"{t.name}'s leading stride {t.ld} is below its {t.inner} elements per "
                    f"line: its lines overlap ({self.why})")
        if self.max_ld is not None and t.ld > self.max_ld:
            return f"{t.name}'s leading stride {t.ld} exceeds {self.max_ld} ({self.why})"
        if self.max_pitch is not None and pitch >= self.max_pitch:
            return (f"{t.name}'s row pitch {pitch} bytes is not below {self.max_pitch} "
                    f"({self.why})")
        return None

    def tight_ld(self, inner: int, element_bytes: int) -> int:
        """The smallest leading stride >= ``inner`` (at least 1) whose pitch meets the rule."""
        step = self.pitch_align // math.gcd(self.pitch_align, element_bytes)
        return -(-max(inner, 1) // step) * step

    def settle_ld(self, t: TensorInfo) -> TensorInfo:
        """``t`` with a leading stride that meets the rule when it stores one line (torch
        gives a 1 x N view any stride; the kernel is never asked to step by it)."""
        if t.lines > 1:
            return t
        ld = self.tight_ld(t.inner, t.element_bytes)
        return t if ld == t.ld else t.with_ld(ld)


def default_operand_rules(problem: GemmProblem) -> dict[str, OperandRule]:
    """The rules of a provider that states none (:meth:`GemmProvider.operand_rules`): those of
    the SM80 kernel, 16-byte A and B (cp.async) and pair-aligned D."""
    cp = OperandRule(16, 16, "cp.async moves 16-byte chunks; lda and ldb are u32",
                     max_ld=2**32 - 1)
    pair = 2 * ELEMENT_BYTES[problem.out_dtype]
    d = OperandRule(pair, pair, f"column pairs are stored as one {pair}-byte access; ldd is "
                    "u32", max_ld=2**32 - 1)
    return {"a": cp, "b": cp, "out": d}


class GemmProvider(Protocol):
    """A family of GEMM kernels (one per SM generation).

    ``supports`` decides dispatch; ``reject`` (optional: providers without it are described
    as "does not support this problem") gives the reason it does not, shown in the error when
    no provider runs a problem.  ``plan`` returns a :class:`GemmLaunch` whose ``args`` take
    the scale addresses of a scaled (FP8) problem."""

    name: str

    def supports(self, problem: GemmProblem, capability: tuple[int, int]) -> bool: ...

    def reject(self, problem: GemmProblem, capability: tuple[int, int]) -> str | None: ...

    def target(self, capability: tuple[int, int]) -> str: ...

    def plan(self, problem: GemmProblem, target: str) -> GemmLaunch: ...

    def operand_rules(self, problem: GemmProblem) -> dict[str, OperandRule]:
        """Optional: what the kernel needs of ``a``, ``b`` and ``out`` in memory
        (:func:`default_operand_rules` when absent)."""
        ...




def wave_pick(options: Sequence[Sequence[float]], m: int, n: int, sms: int) -> int:
    """The index of the tile that should finish an M x N output first on ``sms``
    multiprocessors running one persistent CTA each: ``options`` are ``(block_m, block_n,
    efficiency[, max_tiles])``, the estimated time of one is ``ceil(tiles / sms) * block_m *
    block_n / efficiency`` (whole waves of tiles, each tile's time its area over its measured
    relative speed; docs/perf.md, "FP8 tile by wave count"); an option with ``max_tiles`` is
    left out above that many tiles (where it was measured to turn memory-bound).  Ties go to
    the earlier option; the first is taken when every option is left out."""
    best, best_t = 0, math.inf
    for i, (bm, bn, eff, *cap) in enumerate(options):
        tiles = -(-m // int(bm)) * -(-n // int(bn))
        if cap and tiles > cap[0]:
            continue
        t = -(-tiles // sms) * bm * bn / eff
        if t < best_t:
            best, best_t = i, t
    return best


#: The 16-bit SM90 kernel's schedule options (``nvatom.kernels.gemm_sm90.SCHEDULE_TILES``
#: holds each one's settings) and the output tile each counts in: ping-pong 128 x 128 per
#: warpgroup (6 stages), cooperative 128 x 256 (4 stages), ping-pong 128 x 192 (4 stages).
SCHEDULE_OPTIONS = ("pingpong", "cooperative", "pingpong192")
SCHEDULE_OPTION_TILES = {"pingpong": (128, 128), "cooperative": (128, 256),
                         "pingpong192": (128, 192)}
_NO_LIMIT = 2**31 - 1
#: The plain 16-bit GEMM's schedule by wave count (:func:`plain_schedule`; docs/perf.md,
#: "Schedule by wave count"): (schedule, efficiency of one of its tiles relative to the
#: 128 x 192 ping-pong tile, the most output tiles it is taken for).  Efficiencies measured on
#: an H100 at 8192^3, 4096^3 and 16384 x 8192 x 8192 (bf16, tile area x TF/s over whole waves:
#: 128 x 128 ping-pong 0.97-1.0, cooperative 0.977-1.012); the 128 x 128 ping-pong tile turns
#: DRAM-bound above 4608 tiles (:data:`SCHEDULE_RULES`' measurements).  Its picks were the
#: fastest of the three on 12 of 14 shapes measured, within 1.8% on the others.
PLAIN_SCHEDULE_WAVES: tuple[tuple[str, float, int], ...] = (
    ("pingpong", 0.99, 4608), ("pingpong192", 1.0, _NO_LIMIT), ("cooperative", 0.985, _NO_LIMIT))


def plain_schedule_options() -> list[list[float]]:
    """:data:`PLAIN_SCHEDULE_WAVES` as :func:`wave_pick` options ``[block_m, block_n,
    efficiency, max_tiles]`` (data a launch recipe carries)."""
    return [[*SCHEDULE_OPTION_TILES[name], eff, cap] for name, eff, cap in PLAIN_SCHEDULE_WAVES]


def plain_schedule(m: int, n: int, sms: int = 132) -> str:
    """The schedule of a plain 16-bit M x N GEMM on ``sms`` multiprocessors: the option of
    :data:`PLAIN_SCHEDULE_WAVES` whose tiles finish first (:func:`wave_pick`)."""
    return PLAIN_SCHEDULE_WAVES[wave_pick(plain_schedule_options(), m, n, sms)][0]


#: Which schedule the grouped 16-bit kernel runs by problem shape (docs/perf.md, "Grouped
#: ping-pong and schedule choice"; measured on an H100): ``pick`` where every condition holds, else
#: ``otherwise``. Conditions: at most ``max_groups`` non-empty groups, K
#: <= ``max_k``, at least ``min_mean_rows`` rows a non-empty group on average, and at most
#: ``max_tiles`` output tiles of ``pick``'s tile (and, where listed, an output type of
#: ``out_dtypes`` and a B layout of ``b_majors``: "N" row-major, "K" column-major, the measured
#: ones). The 128 x 128 ping-pong tile turns DRAM-bound on large problems (case B of
#: bench/gemm_grouped.py: 2.25x the DRAM bytes of the 128 x 256 tile; plain GEMMs of 8192-16384
#: such tiles 0.75-0.95x the cooperative kernel in 5 of 6 shapes, of <= 4224 tiles 0.97-1.09x):
#: the plain GEMM's wave rule takes it up to 4608 tiles. The grouped kernel: the 128 x 192
#: ping-pong tile won on 8-expert cases with K <= 7168 (+0.4% to +6.4%) and lost on 64-expert
#: ones (-1.6% to -8.0%) and at K = 14336 (-5.8%).
SCHEDULE_RULES: dict[str, dict[str, Any]] = {
    "grouped": {"pick": "pingpong192", "otherwise": "cooperative", "max_groups": 8,
                "max_k": 8192, "min_mean_rows": 512, "max_tiles": _NO_LIMIT,
                "out_dtypes": ["bf16", "f16"], "b_majors": ["N"]},
}


def schedule_pick(rows: Sequence[int], n: int, k: int, rule: dict[str, Any],
                  out_dtype: str = "", b_major: str = "") -> str:
    """The schedule (a name of :data:`SCHEDULE_OPTIONS`) one entry of
    :data:`SCHEDULE_RULES` gives groups of ``rows`` rows (one entry for a plain GEMM;
    empty groups are ignored) sharing N and K, with output type ``out_dtype`` and B layout
    ``b_major`` (checked where the rule lists them)."""
    sizes = [int(r) for r in rows if r > 0]
    if not sizes or out_dtype not in rule.get("out_dtypes", [out_dtype]) \
            or b_major not in rule.get("b_majors", [b_major]):
        return str(rule["otherwise"])
    bm, bn = SCHEDULE_OPTION_TILES[rule["pick"]]
    tiles = sum(-(-r // bm) for r in sizes) * -(-n // bn)
    ok = (len(sizes) <= rule["max_groups"] and k <= rule["max_k"]
          and sum(sizes) >= rule["min_mean_rows"] * len(sizes) and tiles <= rule["max_tiles"])
    return str(rule["pick"] if ok else rule["otherwise"])


def grouped_schedule(types: tuple[str, str, str], ends: Sequence[int], n: int, k: int) -> str:
    """The schedule of ``nvatom.grouped_gemm`` for ``types`` = (A's and B's type, the output
    type, B's layout "N" or "K") and groups ending at the cumulative row offsets ``ends``
    (:data:`SCHEDULE_RULES` ``"grouped"``; the kernel runs FP8 cooperative only)."""
    in_dtype, out_dtype, b_major = types
    if in_dtype not in PLAIN_DTYPES:
        return "cooperative"
    starts = [0, *ends[:-1]]
    return schedule_pick([e - s for s, e in zip(starts, ends, strict=True)], n, k,
                         SCHEDULE_RULES["grouped"], out_dtype, b_major)


def rule_pick(rule: dict[str, Any], m: int, n: int, k: int, sms: int) -> int:
    """The option a recipe's size rule (``accepts["tile_rule"]``) picks for M x N x K: the
    tile (promoted FP8) or schedule (16-bit, ``"kind": "schedule"`` with the schedules'
    ``names``) that finishes first by wave count (:func:`wave_pick` of its ``options``)."""
    return wave_pick(rule["options"], m, n, sms)
