"""What a GEMM provider and ``nvatom.gemm`` share: the problem, the launch plan, the operand
rules, the provider protocol and the wave-count rule that picks a kernel's tile
(:func:`wave_pick`, :func:`rule_pick`: what a launch recipe needs to choose among its
alternatives; the SM90 kernel's tiles and schedules it chooses among are its tuning table,
:mod:`nvatom.kernels.sm90.tuning`).

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
    "SCALED_DTYPES",
    "SCALE_MODES",
    "GemmLaunch",
    "GemmProblem",
    "GemmProvider",
    "OperandRule",
    "capability_text",
    "default_operand_rules",
    "rule_pick",
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


def rule_pick(rule: dict[str, Any], m: int, n: int, k: int, sms: int) -> int:
    """The option a recipe's size rule (``accepts["tile_rule"]``) picks for M x N x K: the
    tile (promoted FP8) or schedule (16-bit, ``"kind": "schedule"`` with the schedules'
    ``names``) that finishes first by wave count (:func:`wave_pick` of its ``options``)."""
    return wave_pick(rule["options"], m, n, sms)
