"""``nvatom.gemm(a, b)``: a matrix product of torch tensors computed by nvatom's own kernels.

The kernels are built only from nvatom atoms (``nvatom.kernels``); this module validates the
operands (:mod:`nvatom.runtime.torch_interop`), picks a kernel provider for the device, gets
the compiled kernel from the cache (:mod:`nvatom.runtime.launch`) and launches it on torch's
current stream.

Dispatch: :data:`PROVIDERS` is an ordered list of :class:`GemmProvider` objects; the first whose
``supports(problem, capability)`` is true runs.  The SM80 provider (cp.async + ldmatrix +
mma.sync) supports every GPU from compute capability 8.0 on; the SM90 provider (TMA + WGMMA)
comes first.  Both live in :mod:`nvatom.gemm_providers`, imported directly; the types they
share with this module (:class:`GemmProblem`, :class:`GemmLaunch`, :class:`OperandRule`,
:class:`GemmProvider`) live below both, in :mod:`nvatom.runtime.gemm_plan`.
:func:`register_provider` adds another provider.

FP8: e4m3 or e5m2 on either side, with per-tensor scales (``scale_a``, ``scale_b``: float32
one-element CUDA tensors as ``torch._scaled_mm`` takes, or Python numbers), row-wise ones
(``scale_a`` (M, 1), ``scale_b`` (1, N) float32) or block scales (``scale_a`` (M,
ceil(K/128)), ``scale_b`` (ceil(K/128), ceil(N/128)), DeepSeek-V3's; the mode follows the
shapes, :func:`check_scales`), gives
``(a @ b) * scale_a * scale_b`` in bf16.  WGMMA's partial sums are promoted into f32 every K
block (128 elements) unless ``fast_accum=True`` (WGMMA accumulates the whole K: faster, less
exact; as ``torch._scaled_mm(use_fast_accum=True)``).  Only the SM90 provider (WGMMA
``.e4m3``/``.e5m2``, compute capability 9.0) runs it; its
operands are K-major (row-major ``a``, column-major ``b``), as WGMMA reads 8-bit operands
(PTX ISA, "Asynchronous Warpgroup Level Matrix Multiply-Accumulate", register/shared-memory
layouts of ``.e4m3``: K-major only).  A provider that cannot run a problem says why
(:meth:`GemmProvider.reject`), and those reasons make up the error when none can.

Operands in memory: the checks accept every storage docs/runtime.md documents (any leading
stride, any element-aligned offset).  Each provider states what its kernel needs of each
operand (:class:`OperandRule`: TMA's 16-byte base and pitch for SM90, cp.async's 16-byte
chunks and the pair stores for SM80); :func:`route` checks every operand against the rules of
the provider that runs the problem and stages the ones that break a rule through an aligned
buffer (``out``: computed there, then copied back), so a documented input is never refused
for where it lies.  Sizes are bounded by the kernels' 32-bit index arithmetic
(:data:`MAX_DIM`) and the launch grid (:data:`MAX_GRID_X`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import math
import sys
import types
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, ClassVar

from nvatom.dtypes import dtype as _dtype
from nvatom.errors import F32_MAX, NvatomError, f32_number, shown
from nvatom.runtime import gemm_recipe as gr
from nvatom.runtime.call_cache import CacheSet, LruDict
from nvatom.runtime.gemm_plan import (
    OUT_DTYPES,
    PLAIN_DTYPES,
    SCALED_DTYPES,
    GemmLaunch,
    GemmProblem,
    GemmProvider,
    OperandRule,
    default_operand_rules,
)
from nvatom.runtime.gemm_plan import capability_text as _cc
from nvatom.runtime.launch import (
    KernelSource,
    LaunchError,
    PackedParams,
    get_kernel,
    kernel_disk_key,
)
from nvatom.runtime.torch_interop import (
    TensorArgumentError,
    TensorInfo,
    check_matrix,
    dtype_name,
    from_dlpack,
)

__all__ = [
    "PROVIDERS",  # noqa: F822 (module __getattr__)
    "GemmError",
    "GemmLaunch",
    "GemmProblem",
    "GemmProvider",
    "GemmRoute",
    "OperandRule",
    "Sm80Provider",  # noqa: F822
    "Sm90Provider",  # noqa: F822
    "clear_caches",
    "explain",
    "gemm",
    "grouped_gemm",
    "grouped_gemm_masked",
    "plan",
    "register_provider",
    "route",
]

#: Accumulator types offered (the MMA atoms used accumulate in f32).
ACC_TYPES = ("f32",)
#: The output type of operands taken with per-tensor scales (FP8, ``SCALED_DTYPES``).
SCALED_OUT_DTYPE = "bf16"
#: How to make a row-major FP8 ``b`` column-major (shown in errors).
_B_COL_HINT = "b = b_rowmajor.t().contiguous().t()"
#: The largest M, N or K: the kernels index rows, columns and K steps with 32-bit integers,
#: some signed (``s32`` K remainders and column limits), and take them as ``u32`` parameters.
MAX_DIM = 2**31 - 1
#: Staged operands (copies made so a kernel can read or write them) start at a multiple of
#: this many bytes, with rows padded to the kernel's pitch rule.
STAGE_ALIGN = 256


class GemmError(NvatomError, ValueError):
    """A GEMM that nvatom cannot run as asked (shapes, types, device)."""


class GemmCaches(CacheSet):
    """Every host cache of :func:`gemm` and :func:`grouped_gemm`: one bounded LRU section each,
    its size stated once in ``SIZES``.  :data:`CACHES` is the module's; :func:`clear_caches`
    empties it.  A call-cache entry keeps its own launcher, arguments and scale tensors alive,
    so dropping a plan, a launcher or a scale tensor from another section never frees
    something a cached call still uses."""

    SIZES: ClassVar[dict[str, int]] = {
        "plans": 256, "named_plans": 256, "launchers": 256, "capabilities": 64,
        "recipes": 256, "recorded": 256, "scale_tensors": 256, "calls": 256,
        "fresh_calls": 256, "grouped_calls": 64, "grouped_fast": 64,
        "fused_plans": 256, "fused_calls": 256,
    }
    #: (problem, capability, the registered providers' ids) -> (launch plan, target).
    plans: LruDict[tuple[Any, ...], tuple[GemmLaunch, str]]
    #: (problem, capability, provider name) -> (launch plan, target): ``provider=`` calls.
    named_plans: LruDict[tuple[Any, ...], tuple[GemmLaunch, str]]
    #: (id of a plan, device) -> (the plan, its prepared Launcher).
    launchers: LruDict[tuple[int, int], tuple[GemmLaunch, Any]]
    #: device index -> compute capability (asked of torch once).
    capabilities: LruDict[int, tuple[int, ...]]
    #: (problem class, capability, device) -> (RecipeLaunch, operand rules) or None.
    recipes: LruDict[tuple[Any, ...], Any]
    #: the problem classes whose recipe this process has written (-> True).
    recorded: LruDict[tuple[Any, ...], bool]
    #: (float value, device) -> float32 one-element CUDA tensor: scales given as numbers.
    scale_tensors: LruDict[tuple[float, int], Any]
    #: checked calls with ``out``: (pointers, shapes, strides, dtypes, devices, acc, provider,
    #: fast_accum, out's pointer, shape, stride, dtype, device[, scales]) -> (launcher, packed
    #: arguments, device, scale tensors kept alive).
    calls: LruDict[tuple[Any, ...], tuple[Any, Any, int, Any]]
    #: checked calls without ``out`` (the same key without out's part) -> (launcher, argument
    #: packer, a's and b's TensorInfo, problem, scale addresses, output dtype, device, scale
    #: tensors kept alive): a call allocates its output and packs by its address.
    fresh_calls: LruDict[tuple[Any, ...], tuple[Any, ...]]
    #: (problem, EpilogueSpec, capability) -> (SM90 launch with that epilogue, operand rules).
    fused_plans: LruDict[tuple[Any, ...], tuple[Any, Any]]
    #: checked fused calls (what the checks read of every argument, the epilogue's included)
    #: -> (launcher, launch, a's and b's TensorInfo, out's TensorInfo (or, without ``out``, its
    #: dtype), problem, the arguments after M, N, K, device, scale tensors kept alive).
    fused_calls: LruDict[tuple[Any, ...], tuple[Any, ...]]
    #: grouped calls: (a, b[0], out as TensorInfo (pointers, shapes, strides), b's strides, G,
    #: offsets[, scales]) -> (launcher, packed arguments, the device buffer of maps and tile
    #: counts (and scale tensors)).
    grouped_calls: LruDict[tuple[Any, ...], tuple[Any, Any, Any]]
    #: grouped calls with ``out`` (unchecked key, :func:`_grouped_fast_key`) -> (launcher,
    #: packed arguments, the device buffer, the device).
    grouped_fast: LruDict[tuple[Any, ...], tuple[Any, Any, Any, Any]]


#: This module's host caches (:class:`GemmCaches`); dispatch reads the attribute each call, so
#: tests may replace it with a fresh ``GemmCaches()`` (monkeypatch).
CACHES = GemmCaches()


def clear_caches() -> None:
    """Empty every host cache of :func:`gemm` and :func:`grouped_gemm` (:data:`CACHES`) and, once
    the providers are imported, their tensor maps (``gemm_providers.TENSOR_MAPS``): the next
    call checks, plans, prepares and packs anew.  Compiled kernels stay loaded (their cache
    is :mod:`nvatom.runtime.launch`'s)."""
    CACHES.clear()
    providers = sys.modules.get("nvatom.gemm_providers")
    if providers is not None:
        providers.TENSOR_MAPS.clear()


#: The providers in dispatch order (:mod:`nvatom.gemm_providers`; :func:`register_provider`
#: adds more): ``PROVIDERS``, imported on first use (:func:`_providers`; the module attribute
#: through :func:`__getattr__`), so a call launched from a recipe never imports the kernels.
#: Tests may replace the module attribute (monkeypatch): dispatch reads it each time.
_BUILT_IN_IDS: list[tuple[int, ...]] = []  # the built-in providers' ids, once imported


def _providers() -> list[GemmProvider]:
    """The registered providers, :data:`PROVIDERS` (the built-in ones imported on first
    use)."""
    got = globals().get("PROVIDERS")
    if got is None:
        from nvatom.gemm_providers import PROVIDERS as built_in

        got = globals()["PROVIDERS"] = list(built_in)
        _BUILT_IN_IDS.append(tuple(id(p) for p in built_in))
    return got  # type: ignore[no-any-return]


def _built_in_only() -> bool:
    """No provider registered beyond the built-in ones (or none imported yet): recipes
    stand for the built-in dispatch only."""
    got = globals().get("PROVIDERS")
    return got is None or tuple(id(p) for p in got) == _BUILT_IN_IDS[0]


def __getattr__(name: str) -> Any:
    """``PROVIDERS``, ``Sm80Provider``, ``Sm90Provider``: imported on first use."""
    if name == "PROVIDERS":
        return _providers()
    if name in ("Sm80Provider", "Sm90Provider"):
        import nvatom.gemm_providers as gp

        return getattr(gp, name)
    raise AttributeError(f"module 'nvatom.gemm' has no attribute {name!r}")


def register_provider(provider: GemmProvider, *, first: bool = True) -> None:
    """Add a provider; ``first`` puts it ahead of the existing ones (more specific kernels)."""
    providers = _providers()
    if any(p.name == provider.name for p in providers):
        raise GemmError(f"a GEMM provider named '{provider.name}' is already registered")
    if first:
        providers.insert(0, provider)
    else:
        providers.append(provider)
    CACHES.calls.clear()  # a checked call may now dispatch elsewhere
    CACHES.fresh_calls.clear()
    CACHES.recipes.clear()


def plan(problem: GemmProblem, capability: tuple[int, int],
         providers: Sequence[GemmProvider] | None = None) -> tuple[GemmLaunch, str]:
    """The launch plan and target of the first provider that supports ``problem`` (memoized
    when ``providers`` is the registered list)."""
    if providers is None:
        providers = _providers()
        key = (problem, tuple(capability), tuple(id(p) for p in providers))
        hit = CACHES.plans.get(key)
        if hit is None:
            hit = CACHES.plans[key] = plan(problem, capability, providers)
        return hit
    for p in providers:
        if p.supports(problem, capability):
            target = p.target(capability)
            return p.plan(problem, target), target
    reasons = []
    for p in providers:
        reject = getattr(p, "reject", None)
        why = reject(problem, capability) if reject is not None else None
        reasons.append(f"{p.name}: {why or 'does not support this problem'}")
    raise GemmError(
        f"no nvatom GEMM kernel for {problem.in_dtype} x {problem.b_dtype or problem.in_dtype} -> "
        f"{problem.out_dtype} (acc {problem.acc}) on compute capability {_cc(capability)} "
        f"(M x N x K = {problem.m} x {problem.n} x {problem.k}); " + "; ".join(reasons))


@dataclasses.dataclass(frozen=True)
class GemmRoute:
    """How one call runs: the provider's plan and target, the operands as the kernel gets
    them (``a``, ``b``, ``out``: a one-line operand's leading stride settled to the rule) and
    which of them are ``staged`` (copied to an aligned buffer first; for ``out``, computed in
    one and copied back), each with its reason in ``why``."""

    launch: GemmLaunch
    target: str
    provider: str
    a: TensorInfo
    b: TensorInfo
    out: TensorInfo
    rules: dict[str, OperandRule] = dataclasses.field(compare=False, hash=False)
    staged: tuple[str, ...] = ()
    why: tuple[str, ...] = ()


def _provider_named(name: str, providers: Sequence[GemmProvider]) -> GemmProvider:
    for p in providers:
        if p.name == name:
            return p
    raise GemmError(f"no GEMM provider named '{name}' (registered: "
                    f"{', '.join(p.name for p in providers)})")


def route(a: TensorInfo, b: TensorInfo, out: TensorInfo, problem: GemmProblem,
          capability: tuple[int, int], provider: str | None = None) -> GemmRoute:
    """Choose the kernel for checked operands (:func:`check_operands`; ``out`` as it will be
    written) without launching anything: the first provider that supports ``problem`` (or
    the one named ``provider``), and, from its :class:`OperandRule` table, the operands it
    cannot take where they lie: those are staged.  Staging replaces an operand by a copy with
    a :data:`STAGE_ALIGN`-aligned base and a tight padded pitch, which every rule accepts, so
    a documented input is never refused for its alignment or row pitch."""
    if provider is None:
        launch, target = plan(problem, capability)
    elif not isinstance(provider, str):
        raise GemmError(f"provider = {shown(provider)}: the name of a registered GEMM provider "
                        "(a str), or None for the first that supports the problem")
    else:
        launch, target = _plan_with(problem, capability, provider)
    chosen = next((p for p in _providers() if p.name == launch.provider), None)
    rules_of = getattr(chosen, "operand_rules", None)
    rules = rules_of(problem) if rules_of is not None else default_operand_rules(problem)
    infos, staged, why = {}, [], []
    for name, t in (("a", a), ("b", b), ("out", out)):
        rule = rules[name]
        reason = rule.violation(t)
        if reason is not None:
            staged.append(name)
            why.append(reason)
        infos[name] = rule.settle_ld(t)
    return GemmRoute(launch, target, launch.provider, infos["a"], infos["b"], infos["out"],
                     rules, tuple(staged), tuple(why))


def explain(a: Any, b: Any, out: Any = None, *, acc: str = "f32", provider: str | None = None,
            scale_a: Any = None, scale_b: Any = None,
            capability: tuple[int, int] | None = None, fast_accum: bool = False) -> GemmRoute:
    """The :class:`GemmRoute` :func:`gemm` takes for these arguments (checked as it checks
    them), without running it.  ``capability``: the GPU's (default: the operands' device's,
    from torch).  Without ``out`` the route is that of the fresh contiguous output gemm
    makes."""
    a, b, out = from_dlpack(a), from_dlpack(b), from_dlpack(out)
    scale_a, scale_b = from_dlpack(scale_a), from_dlpack(scale_b)
    ai, bi, oi, problem = check_operands(a, b, out, acc=acc, scale_a=scale_a, scale_b=scale_b,
                                         fast_accum=fast_accum)
    if oi is None:  # what gemm() allocates: contiguous, aligned
        oi = TensorInfo("out", STAGE_ALIGN, problem.out_dtype, (problem.m, problem.n),
                        (problem.n, 1), ai.device, "row")
    if capability is None:
        import torch

        capability = tuple(torch.cuda.get_device_capability(ai.device))  # type: ignore[assignment]
    elif (not isinstance(capability, (tuple, list)) or len(capability) != 2
          or any(isinstance(x, bool) or not isinstance(x, int) for x in capability)):
        raise GemmError(f"capability = {shown(capability)}: a compute capability is a "
                        "(major, minor) pair of ints, e.g. (9, 0)")
    capability = tuple(capability)  # type: ignore[assignment]  # a list keys no cache
    return route(ai, bi, oi, problem, capability, provider)  # type: ignore[arg-type]


def check_operands(a: Any, b: Any, out: Any = None, *, acc: str = "f32",
                   scale_a: Any = None, scale_b: Any = None, fast_accum: bool = False
                   ) -> tuple[TensorInfo, TensorInfo, TensorInfo | None, GemmProblem]:
    """Validate ``a @ b`` (and ``out``, and the FP8 scales); raises
    :class:`TensorArgumentError` / :class:`GemmError` naming the offending argument.  Needs no
    GPU (duck-typed tensors suffice)."""
    if acc not in ACC_TYPES:
        raise GemmError(f"acc='{acc}': the accumulator type is one of {', '.join(ACC_TYPES)}")
    in_dtypes = (*PLAIN_DTYPES, *SCALED_DTYPES)
    # Alignment is each provider's rule (OperandRule): an operand a kernel cannot take where
    # it lies is staged through an aligned copy (route), never refused.
    ai = check_matrix(a, "a", dtypes=in_dtypes, majors=("row", "col"), align_bytes=1)
    bi = check_matrix(b, "b", dtypes=in_dtypes, majors=("row", "col"), device=ai.device,
                      align_bytes=1)
    if ai.dtype != bi.dtype and not (ai.dtype in SCALED_DTYPES and bi.dtype in SCALED_DTYPES):
        raise TensorArgumentError(f"a is {ai.dtype} but b is {bi.dtype}; the operands must "
                                  "have one element type")
    (m, ka), (kb, n) = ai.shape, bi.shape
    if ka != kb:
        raise GemmError(f"shapes do not chain: a is {m}x{ka}, b is {kb}x{n} ({ka} != {kb})")
    check_sizes(m, n, ka)
    if n % 2:
        raise GemmError(f"N = {n} is odd: the kernels store output columns in pairs; pad b to "
                        f"{n + 1} columns")
    scaled = ai.dtype in SCALED_DTYPES
    if not isinstance(fast_accum, bool):
        raise GemmError(f"fast_accum = {fast_accum!r} is not a bool")
    if fast_accum and not scaled:
        raise GemmError(f"fast_accum=True given but a and b are {ai.dtype}: it selects FP8's "
                        f"WGMMA-only accumulation ({', '.join(SCALED_DTYPES)} operands)")
    mode = check_scales(scale_a, scale_b, ai.dtype, ai.device, m, n, ka)
    if mode == "block" and fast_accum:
        raise GemmError("fast_accum=True with block scales: block scales are applied when "
                        "WGMMA's partial sums are promoted into f32 every K block, which "
                        "fast accumulation skips; drop fast_accum")
    if scaled:
        if ai.major != "row" and m > 0 and ka > 0:
            raise GemmError(f"a ({ai.dtype}, {m}x{ka}) is column-major (strides {ai.strides}): "
                            "FP8 needs a row-major (K-major) a; pass a.contiguous()")
        if bi.major != "col" and n > 0 and kb > 0:
            raise GemmError(f"b ({bi.dtype}, {kb}x{n}) is row-major (strides {bi.strides}): "
                            "FP8 needs b column-major (K-major, as torch._scaled_mm): "
                            f"{_B_COL_HINT}")
    oi = None
    out_dtype = SCALED_OUT_DTYPE if scaled else ai.dtype
    if out is not None:
        oi = check_matrix(out, "out", dtypes=OUT_DTYPES, majors=("row",), align_bytes=1,
                          device=ai.device)
        if oi.shape != (m, n):
            raise GemmError(f"out has shape {oi.shape}, the product is {m}x{n}")
        if scaled and oi.dtype != SCALED_OUT_DTYPE:
            raise GemmError(f"out is {oi.dtype}: {ai.dtype} x {bi.dtype} GEMMs write "
                            f"{SCALED_OUT_DTYPE} output")
        if m > 1 and n > 0 and oi.ld < n:
            raise TensorArgumentError(
                f"out's rows overlap (row stride {oi.ld} < N = {n}, strides {oi.strides}): "
                "each element of the product needs its own place; pass a tensor with row "
                f"stride >= {n}, e.g. torch.empty({m}, {n})")
        out_dtype = oi.dtype
    problem = GemmProblem(m, n, ka, ai.dtype, out_dtype,
                          "K" if ai.major == "row" else "M", "N" if bi.major == "row" else "K",
                          acc, "" if bi.dtype == ai.dtype else bi.dtype, mode, fast_accum)
    return ai, bi, oi, problem


def check_sizes(m: int, n: int, k: int) -> None:
    """Refuse a size the kernels' 32-bit index arithmetic cannot take (:data:`MAX_DIM`)."""
    for dim, v in (("M", m), ("N", n), ("K", k)):
        if v > MAX_DIM:
            raise GemmError(f"{dim} = {v} is larger than {MAX_DIM} (2^31 - 1), the largest size "
                            "the GEMM kernels' 32-bit index arithmetic takes")


#: The block of the block-scaling mode (DeepSeek-V3): 128 K elements by one row of A, and
#: 128 x 128 elements of B (``nvatom.kernels.sm90.config.SCALE_BLOCK``, checked equal in
#: tests/test_gemm_block_scales.py).
SCALE_BLOCK = 128


def check_scales(scale_a: Any, scale_b: Any, in_dtype: str, device: int, m: int = 1,
                 n: int = 1, k: int | None = None) -> str:
    """Check the scales against the operand type and the product's M x N (x K), and return
    the scaling mode: "" (no scales: not FP8), "tensor" (one f32 each: a Python number or a
    one-element float32 tensor), "row" (``scale_a`` of shape (M, 1) or (M,): one f32 per row
    of ``a``; ``scale_b`` of shape (1, N) or (N,): one per column of ``b``; as
    ``torch._scaled_mm``'s row-wise mode) or "block" (DeepSeek-V3's: ``scale_a`` of shape
    (M, ceil(K/128)), row-major like ``a``, one per row and 128 K elements; ``scale_b`` of
    shape (ceil(K/128), ceil(N/128)), K-major (column-major) like ``b``, one per 128 x 128
    block of ``b``: for a weight ``w`` (N x K) passed as ``b = w.t()``, its (N/128, K/128)
    row-major scales pass as ``w_scale.t()``).  The shapes decide the mode (tensor, then
    row, then block; where two fit, they mean the same product).  Both are required for FP8
    operands and none is allowed otherwise; tensors are float32 on the operands' CUDA
    device with unit stride (duck-typed: ``.dtype``, ``.shape``, ``.device``, ``.stride()``)."""
    shapes = _scale_shapes(scale_a, scale_b, in_dtype, device)
    if shapes is None:
        return ""
    sa, sb = shapes
    if math.prod(sa) == 1 and math.prod(sb) == 1 and len(sa) <= 2 and len(sb) <= 2:
        return "tensor"
    if sa in ((m, 1), (m,)) and sb in ((1, n), (n,)):
        _check_unit_stride(scale_a, scale_b)
        return "row"
    kb = None if k is None else -(-k // SCALE_BLOCK)
    nb = -(-n // SCALE_BLOCK)
    if kb is not None and sa == (m, kb) and sb == (kb, nb):
        # scale_a row-major (M x Kb, stride (Kb, 1)); scale_b K-major (Kb x Nb, stride (1, Kb))
        _check_block_strides(scale_a, scale_b, kb)
        return "block"
    block = "" if kb is None else f"({m}, {kb}) and ({kb}, {nb}) "
    raise GemmError(f"scale_a has shape {sa} and scale_b {sb}: the scales are per-tensor "
                    f"(one element each) or row-wise (scale_a ({m}, 1), one per row of a; "
                    f"scale_b (1, {n}), one per column of b), as torch._scaled_mm, or block "
                    f"scales {block}(scale_a (M, ceil(K/128)): one per row of a and 128 K "
                    "elements; scale_b (ceil(K/128), ceil(N/128)): one per 128 x 128 block "
                    "of b)")


def _scale_shapes(scale_a: Any, scale_b: Any, in_dtype: str,
                  device: int) -> tuple[tuple[int, ...], tuple[int, ...]] | None:
    """Both scales' shapes (a number's is ()), each checked to be a float or a float32 CUDA
    tensor on ``device``; None for non-FP8 operands (which take no scales)."""
    given = [nm for nm, v in (("scale_a", scale_a), ("scale_b", scale_b)) if v is not None]
    if in_dtype not in SCALED_DTYPES:
        if given:
            raise GemmError(f"{' and '.join(given)} given but a and b are {in_dtype}: scales "
                            f"apply to FP8 ({', '.join(SCALED_DTYPES)}) operands only")
        return None
    if len(given) < 2:
        missing = " and ".join(nm for nm in ("scale_a", "scale_b") if nm not in given)
        raise GemmError(f"a and b are {in_dtype} (FP8) but {missing} is missing: FP8 GEMMs compute "
                        "(a @ b) * scale_a * scale_b and take both scales (per-tensor: float32 "
                        "one-element CUDA tensors, as torch._scaled_mm, or floats; row-wise: "
                        "scale_a (M, 1), scale_b (1, N); block: scale_a (M, ceil(K/128)), "
                        "scale_b (ceil(K/128), ceil(N/128)), float32)")
    shapes = {}
    for name, v in (("scale_a", scale_a), ("scale_b", scale_b)):
        if isinstance(v, bool):
            raise GemmError(f"{name} = {v!r}: a scale is a float or a float32 tensor, not a bool")
        if isinstance(v, (int, float)):
            if f32_number(v) is None:  # 10**400 would raise OverflowError in float()
                raise GemmError(f"{name} = {shown(v)}: a number scale must be finite and "
                                f"within float32's range (|scale| <= {F32_MAX:.4g})")
            shapes[name] = ()
            continue
        if not hasattr(v, "dtype") or not hasattr(v, "shape") or not hasattr(v, "data_ptr"):
            raise GemmError(f"{name} = {shown(v)} ({type(v).__name__}) is neither a float nor "
                            "a float32 CUDA tensor")
        dt = str(v.dtype).removeprefix("torch.")
        if dt != "float32":
            raise GemmError(f"{name} has dtype {dt}; scales are float32 (as "
                            f"torch._scaled_mm): pass {name}.float()")
        shapes[name] = tuple(int(x) for x in v.shape)
        dev = getattr(v, "device", None)
        if getattr(dev, "type", None) != "cuda":
            raise GemmError(f"{name} is on device '{dev}', not a CUDA device; move it with "
                            f"{name}.cuda() (the kernel reads it on the GPU)")
        idx = 0 if dev.index is None else int(dev.index)  # type: ignore[union-attr]
        if idx != device:
            raise GemmError(f"{name} is on cuda:{idx}, the operands on cuda:{device}")
    return shapes["scale_a"], shapes["scale_b"]


def _check_unit_stride(*scales: Any) -> None:
    """Row-wise scales are read as contiguous vectors (the last dimension of a grouped
    ``scale_b``)."""
    for name, v in zip(("scale_a", "scale_b"), scales, strict=False):
        st = tuple(int(x) for x in v.stride())
        shape = tuple(int(x) for x in v.shape)
        if len(shape) == 3 or (len(shape) == 2 and shape[0] > 1 and shape[1] > 1):
            shape, st = shape[-1:], st[-1:]  # (G, N): each group's row
        if max(shape) > 1 and st[shape.index(max(shape))] != 1:
            raise GemmError(f"{name} has strides {tuple(int(x) for x in v.stride())}: "
                            "row-wise scales are read as one contiguous vector; pass "
                            f"{name}.contiguous()")
        if name == "scale_b" and int(v.data_ptr()) % 8:
            raise GemmError(f"scale_b's data pointer 0x{int(v.data_ptr()):x} is not 8-byte "
                            "aligned: row-wise scale_b is read in pairs of columns (a view "
                            "with an odd offset?); pass scale_b.clone()")


def _check_block_strides(scale_a: Any, scale_b: Any, kb: int) -> None:
    """Block scales: ``scale_a`` row-major (M x Kb, strides (Kb, 1)), ``scale_b`` K-major
    (Kb x Nb, strides (1, Kb); grouped: each group's)."""
    for name, v, want in (("scale_a", scale_a, (kb, 1)), ("scale_b", scale_b, (1, kb))):
        shape = tuple(int(x) for x in v.shape)[-2:]
        st = tuple(int(x) for x in v.stride())[-2:]
        if any(s != w and d > 1 for s, w, d in zip(st, want, shape, strict=True)):
            how = ("row-major like a: pass scale_a.contiguous()" if name == "scale_a" else
                   "K-major (column-major) like b: for a weight w (N x K) with row-major "
                   "scales w_scale (ceil(N/128) x ceil(K/128)) pass scale_b = w_scale.t(); "
                   "else scale_b.t().contiguous().t()")
            raise GemmError(f"{name} ({shape[0]} x {shape[1]} block scales) has strides "
                            f"{st}, not {want}: block scales are read {how}")


def check_group_scales(scale_a: Any, scale_b: Any, in_dtype: str, device: int, groups: int,
                       m: int, n: int, k: int) -> tuple[str, int]:
    """:func:`check_scales` for :func:`grouped_gemm` (``m`` = total_M, A's stacked rows):
    returns the mode and ``scale_b``'s stride between groups in bytes (0: one ``scale_b``
    for every group).  Per-tensor: ``scale_a`` one element, ``scale_b`` one element or one
    per group, shape (G,); row-wise: ``scale_a`` (total_M,) or (total_M, 1), ``scale_b``
    (G, N) (or (1, N): every group's), as ``torch._scaled_grouped_mm``; block: ``scale_a``
    (total_M, ceil(K/128)) row-major, ``scale_b`` (G, ceil(K/128), ceil(N/128)), each
    group's K-major (or (ceil(K/128), ceil(N/128)): every group's)."""
    shapes = _scale_shapes(scale_a, scale_b, in_dtype, device)
    if shapes is None:
        return "", 0
    sa, sb = shapes

    def gstep(v: Any, shape: tuple[int, ...], per_group: int) -> int:
        if len(shape) < per_group or shape[0] == 1 or groups == 1:
            return 0
        step = int(v.stride()[0]) * 4
        if not 0 <= step < 2**32:
            raise GemmError(f"scale_b's group stride {v.stride()[0]} elements is outside "
                            "0..2^30 (the kernel steps by a 32-bit byte offset)")
        return step

    if math.prod(sa) == 1 and len(sa) <= 2:
        if math.prod(sb) == 1 and len(sb) <= 2:
            return "tensor", 0
        if sb == (groups,):
            return "tensor", gstep(scale_b, sb, 1)
    if sa in ((m, 1), (m,)) and sb in ((groups, n), (1, n)):
        _check_unit_stride(scale_a, scale_b)
        step = gstep(scale_b, sb, 2)
        if step % 8:
            raise GemmError(f"scale_b's group stride {step // 4} elements is odd: each "
                            "group's row is read in pairs of columns; pass "
                            "scale_b.contiguous()")
        return "row", step
    kb, nb = -(-k // SCALE_BLOCK), -(-n // SCALE_BLOCK)
    if sa == (m, kb) and sb in ((groups, kb, nb), (kb, nb)):
        _check_block_strides(scale_a, scale_b, kb)
        return "block", gstep(scale_b, sb, 3)
    raise GemmError(f"scale_a has shape {sa} and scale_b {sb}: grouped scales are per-tensor "
                    f"(scale_a one element; scale_b one element or ({groups},), one per "
                    f"group), row-wise (scale_a ({m},), one per row of a; scale_b ({groups}, "
                    f"{n}), one per group and column, as torch._scaled_grouped_mm) or block "
                    f"scales (scale_a ({m}, {kb}); scale_b ({groups}, {kb}, {nb}), each "
                    "group's K-major)")



def _fresh_out(problem: GemmProblem, odt: Any, device: Any, dev: int) -> tuple[Any, TensorInfo]:
    """A call-cache hit without ``out``: a new row-major (M, N) output of torch dtype ``odt``
    and the TensorInfo the cached argument packer takes for it."""
    import torch

    out = torch.empty((problem.m, problem.n), dtype=odt, device=device)
    return out, TensorInfo("out", out.data_ptr(), problem.out_dtype, (problem.m, problem.n),
                           (problem.n, 1), dev, "row")


def _default_out(a: Any, ai: TensorInfo, problem: GemmProblem) -> tuple[Any, TensorInfo]:
    """The output a call without ``out`` gets: a new row-major (M, N) tensor of ``a``'s dtype
    (bf16 for FP8 operands) on ``a``'s device, checked as a given one would be."""
    import torch

    odt = torch.bfloat16 if ai.dtype in SCALED_DTYPES else a.dtype
    out = torch.empty((problem.m, problem.n), dtype=odt, device=a.device)
    return out, check_matrix(out, "out", dtypes=(problem.out_dtype,), align_bytes=1)


def _capability(dev: int) -> tuple[int, ...]:
    """Device ``dev``'s compute capability, asked of torch once (``CACHES.capabilities``)."""
    cap = CACHES.capabilities.get(dev)
    if cap is None:
        import torch

        cap = CACHES.capabilities[dev] = tuple(torch.cuda.get_device_capability(dev))
    return cap

def gemm(a: Any, b: Any, out: Any = None, *, acc: str = "f32", provider: str | None = None,
         scale_a: Any = None, scale_b: Any = None, fast_accum: bool = False,
         bias: Any = None, activation: str | None = None, alpha: float = 1.0,
         beta: float | None = None, c: Any = None, residual: Any = None,
         epilogue: Any = None, epilogue_args: Mapping[str, Any] | None = None) -> Any:
    """``a @ b`` for 2-D CUDA torch tensors (bf16 or f16 operands, f32 accumulation), or
    ``(a @ b) * scale_a * scale_b`` in bf16 for e4m3 (``torch.float8_e4m3fn``) operands.

    Fused epilogue (SM90 kernel only; :func:`check_epilogue`): with any of ``bias``,
    ``activation``, ``alpha`` != 1, ``c`` or ``residual`` the kernel computes, on its f32
    accumulators before rounding to ``out``'s type::

        out = act(alpha * (a @ b) * scale_a * scale_b + beta * c + bias) + residual

    ``bias``: per column, shape (N,) or (1, N) (as ``torch.nn.functional.linear``), or per
    row, shape (M, 1); ``out``'s dtype or float32.  ``activation``: None, "relu", "gelu"
    (torch's exact erf form), "gelu_tanh" (``gelu(approximate='tanh')``) or "silu".
    ``c``: (M, N) of ``out``'s dtype, row-major, scaled by ``beta`` (default 1 when ``c`` is
    given, as ``torch.addmm``; ``beta=0`` does not read ``c``).  ``residual``: (M, N) of
    ``out``'s dtype, added after the activation.  ``c`` and ``residual`` may be ``out``
    itself; row-major with an even row stride (0 broadcasts one row) they are read in place,
    any other storage (and a bias with a stride or offset) through a contiguous copy.  The
    SM80 kernel and ``grouped_gemm`` fuse nothing (:class:`GemmError`).
    ``epilogue``: a user epilogue, :class:`nvatom.kernels.sm90.fusion.UserEpilogue` (a
    Python hook that emits PTX on each f32 accumulator, recorded and checked when it is
    made), applied last: ``out = hook(act(...) + residual)``; ``epilogue_args``: the values
    of its parameters by name (``{name: value}``: a Python number for each of its scalars, a
    CUDA tensor for each of its tensors: a "col" one of shape (N,) or (1, N), a "row" one of
    (M,) or (M, 1), of the dtype it declares; a strided one is read through a contiguous
    copy).  Equal hooks (same name, parameters and emitted code) share a kernel; K = 0 runs
    the kernel on a zero product (the hook exists only as PTX).  The torch operator
    ``nvatom::gemm_epilogue`` cannot carry a hook (its schema takes no Python function).

    ``out``: an optional row-major (M x N) tensor of bf16, f16 or f32 to write (default: a new
    tensor of ``a``'s dtype; bf16 for e4m3, the only output FP8 gives).  Operands may be row-
    or column-major (``x.t()`` of a contiguous tensor) with any leading stride and offset
    (views such as ``a[:, 1:]``); ``out`` is row-major with rows that do not overlap.  An
    operand the chosen kernel cannot address where it lies (its :class:`OperandRule`, e.g.
    TMA's 16-byte base and row pitch) is staged through an aligned copy (:func:`route`;
    :func:`explain` shows the route).  Runs on torch's current stream (the caller's: the
    stream a ``torch.cuda.stream(s)`` block or a CUDA graph capture made current).
    Arrays that are not torch tensors but export DLPack (``__dlpack__``: CuPy, JAX, numba) are
    wrapped with ``torch.from_dlpack`` (memory shared; ``out`` is written in place) and the
    result is a torch tensor; such calls take the checked path each time (convert once with
    ``torch.from_dlpack`` for the call cache).
    ``provider``: the name of a registered provider to use instead of the first that supports
    the problem (benchmarks; :class:`GemmError` if it does not support it).
    ``scale_a``, ``scale_b``: FP8 only, and then both required: per-tensor scales, float32
    one-element CUDA tensors on the operands' device (as ``torch._scaled_mm``; the kernel reads
    them when it runs, so updating one in place needs no new call) or Python numbers (copied to
    a cached device tensor once per distinct value); or row-wise scales, float32 CUDA tensors
    ``scale_a`` (M, 1) and ``scale_b`` (1, N) (or 1-D), one per row of ``a`` and column of
    ``b``; or DeepSeek-V3's block scales, ``scale_a`` (M, ceil(K/128)) row-major (one per
    row of ``a`` and 128 K elements) and ``scale_b`` (ceil(K/128), ceil(N/128)) K-major (one
    per 128 x 128 block of ``b``; ``w_scale.t()`` for ``b = w.t()``), applied to each K
    block's partial sums when they are promoted into f32 (so not with ``fast_accum``).
    :func:`check_scales` picks the mode from the shapes and names every wrong one.
    ``fast_accum``: FP8 only; True lets WGMMA accumulate the whole K (its FP8 accumulation
    keeps fewer bits than f32; docs/perf.md), False (default) promotes the partial sums into
    f32 registers every K block.  e4m3 and e5m2 mix freely (WGMMA takes either on either
    side).  FP8 runs on the SM90 kernel only
    (compute capability 9.0) with a row-major ``a`` and a column-major ``b``
    (``b = b_rowmajor.t().contiguous().t()``); K a multiple of 16, N of 8 (TMA's 16-byte rule).

    Host cost: a call whose operands match an earlier one in everything the checks read
    (pointers, shapes, strides, dtypes, devices; ``out``'s too when given) skips the checks
    and goes straight to its prepared launcher and packed arguments (``CACHES.calls`` with
    ``out``, ``CACHES.fresh_calls`` without: there a fresh output is allocated and its
    argument block looked up by its address, bounded LRU); any other call is checked, then
    planned (memoized per problem and device), its launcher prepared (per plan) and its
    arguments packed with their encoded tensor maps (bounded LRU per pointers and strides);
    then one ``cuLaunchKernelEx``.  The first call of a problem class in a process launches
    from the class's recipe when the disk cache has one (:mod:`nvatom.runtime.gemm_recipe`:
    no kernel module is imported); planning a class writes its recipe.  A call with a fused
    epilogue has its own call cache (:data:`CACHES`.fused_calls, same rule) and writes no recipe.
    """
    if (bias is not None or activation is not None or c is not None or residual is not None
            or type(alpha) not in (int, float) or alpha != 1.0 or beta is not None
            or epilogue is not None or epilogue_args is not None):
        return _gemm_fused(a, b, out, acc=acc, provider=provider, scale_a=scale_a,
                           scale_b=scale_b, fast_accum=fast_accum, bias=bias,
                           activation=activation, alpha=alpha, beta=beta, c=c,
                           residual=residual, epilogue=epilogue, epilogue_args=epilogue_args)
    key: tuple[Any, ...] | None = None
    try:
        key = (a.data_ptr(), b.data_ptr(), a.shape, b.shape, a.stride(), b.stride(), a.dtype,
               b.dtype, a.device, b.device, acc, provider, type(fast_accum), fast_accum)
        # (fast_accum's type: 1.0 == True, and a hit skips the check that refuses 1.0)
        if out is not None:
            key += (out.data_ptr(), out.shape, out.stride(), out.dtype, out.device)
        if scale_a is not None or scale_b is not None:  # bf16/f16 calls pay nothing
            key += (_scale_key(scale_a), _scale_key(scale_b))
        hit = (CACHES.calls if out is not None else CACHES.fresh_calls).get(key)
    except Exception:  # not tensors, or unhashable: the checks below say what is wrong
        key = hit = None
    if hit is not None:
        import torch

        if out is not None:
            hit[0](hit[1], torch.cuda.current_stream(hit[2]).cuda_stream)
            return out
        run, packer, ai, bi, problem, scales, odt, dev, _ = hit
        out, oi = _fresh_out(problem, odt, a.device, dev)
        run(packer.packed(ai, bi, oi, problem, scales),
            torch.cuda.current_stream(dev).cuda_stream)
        return out
    fresh = out is None
    # DLPack arrays (CuPy, ...) as torch tensors sharing their memory (not call-cached)
    a, b, out = from_dlpack(a), from_dlpack(b), from_dlpack(out)
    scale_a, scale_b = from_dlpack(scale_a), from_dlpack(scale_b)
    ai, bi, oi, problem = check_operands(a, b, out, acc=acc, scale_a=scale_a, scale_b=scale_b,
                                         fast_accum=fast_accum)
    import torch

    if out is None:
        out, oi = _default_out(a, ai, problem)
    assert oi is not None
    if problem.m == 0 or problem.n == 0:
        return out
    if problem.k == 0:
        out.zero_()
        return out
    dev = ai.device
    cap = _capability(dev)
    scales = keep = None
    if problem.in_dtype in SCALED_DTYPES:
        sa, sb = _scale_tensor(scale_a, dev), _scale_tensor(scale_b, dev)
        scales, keep = (int(sa.data_ptr()), int(sb.data_ptr())), (sa, sb)
    stream = torch.cuda.current_stream(dev).cuda_stream
    fast = _from_recipe(problem, cap, dev, (ai, bi, oi)) if provider is None else None
    if fast is not None:
        packer: Any = fast
        run = fast.launcher(problem.m, problem.n, problem.k)
    else:
        r = route(ai, bi, oi, problem, cap, provider)  # type: ignore[arg-type]
        launch = r.launch
        cached = CACHES.launchers.get((id(launch), dev))
        if cached is None or cached[0] is not launch:
            kernel = get_kernel(launch.source, r.target, device=dev, backend="driver")
            cached = (launch, kernel.launcher(launch.grid, launch.block, shmem=launch.shmem,
                                              cluster=launch.cluster))
            CACHES.launchers[(id(launch), dev)] = cached
        run = cached[1]
        if r.staged:
            _run_staged(r, run, {"a": a, "b": b, "out": out}, problem, scales, stream)
            return out  # not call-cached: the staging buffers are made per call
        if provider is None:
            _record_recipe(r, problem, cap)
        packer, ai, bi, oi = launch, r.a, r.b, r.out
    params = packer.packed(ai, bi, oi, problem, scales)
    run(params, stream)
    if key is not None:
        if fresh:
            CACHES.fresh_calls[key] = (run, packer, ai, bi, problem, scales, out.dtype, dev, keep)
        else:
            CACHES.calls[key] = (run, params, dev, keep)  # keep: scale tensors made from floats
    return out


def check_epilogue(problem: GemmProblem, device: int, *, bias: Any = None,
                   activation: str | None = None, alpha: Any = 1.0, beta: Any = None,
                   c: Any = None, residual: Any = None, epilogue: Any = None,
                   epilogue_args: Any = None) -> tuple[Any, tuple[Any, ...]]:
    """Check :func:`gemm`'s fused-epilogue arguments against the product ``problem`` (M x N,
    ``out``'s dtype) on ``device`` and return the kernel's
    :class:`nvatom.kernels.sm90.fusion.EpilogueSpec` (None: nothing to fuse) and its argument
    values in the spec's ``params`` order (alpha, beta, c's address, its row stride, bias's
    address, residual's address, its row stride: those present; then a user epilogue's
    scalars and its tensors' addresses, :func:`check_user_epilogue`).  Every wrong value raises
    :class:`GemmError` naming it (a tensor the kernel cannot read where it lies -- strides,
    alignment -- one that :func:`gemm` replaces by a contiguous copy).  Needs no GPU
    (duck-typed tensors suffice)."""
    from nvatom.kernels.sm90.fusion import ACTIVATIONS, EpilogueSpec

    m, n, odt = problem.m, problem.n, problem.out_dtype
    if activation is not None and activation not in ACTIVATIONS:
        raise GemmError(f"activation={activation!r} is not one of None, "
                        f"{', '.join(map(repr, ACTIVATIONS))}")
    for name, v in (("alpha", alpha), ("beta", beta)):
        # the kernel takes both as .f32: a huge int (10**400) must not reach float(); alpha
        # has no None (its default is 1.0), beta's None means 1 with c
        if (v is not None or name == "alpha") and f32_number(v) is None:
            raise GemmError(f"{name}={shown(v)} is not a finite real number within float32's "
                            f"range (|{name}| <= {F32_MAX:.4g}; a Python float)")
    if beta is not None and beta != 0 and c is None:
        raise GemmError(f"beta={beta!r} given without c: beta scales the c input "
                        "(out = act(alpha * a @ b + beta * c + bias) + residual)")
    if beta is None:
        beta = 1.0
    values: list[Any] = []
    if alpha != 1.0:
        values.append(float(alpha))
    use_c = c is not None and beta != 0
    if c is not None:
        ci = _epilogue_matrix(c, "c", m, n, odt, device)
        if use_c:
            values += [float(beta), ci[0], ci[1]]
    bias_kind = bias_dtype = ""
    if bias is not None:
        bias_kind, bias_dtype, ptr = _epilogue_bias(bias, m, n, odt, device)
        values.append(ptr)
    if residual is not None:
        values += list(_epilogue_matrix(residual, "residual", m, n, odt, device))
    user, user_values = check_user_epilogue(epilogue, epilogue_args, m, n, device)
    values += user_values
    if not (alpha != 1.0 or use_c or bias is not None or activation or residual is not None
            or user is not None):
        return None, ()
    spec = EpilogueSpec(alpha=alpha != 1.0, c=use_c, bias=bias_kind, bias_dtype=bias_dtype,
                        activation=activation or "", residual=residual is not None, user=user)
    return spec, tuple(values)


def check_user_epilogue(hook: Any, args: Any, m: int, n: int, device: int
                        ) -> tuple[Any, list[Any]]:
    """Check :func:`gemm`'s ``epilogue`` (a UserEpilogue or None) and ``epilogue_args`` (its
    parameters' values by name) for an M x N product on ``device``; returns the hook (None
    without one) and the values in its ``params`` order (scalars as floats, tensors as
    addresses).  A tensor the kernel cannot read where it lies (strided, misaligned) raises
    :class:`_EpilogueStorage` (:func:`gemm` reads a contiguous copy)."""
    from nvatom.kernels.sm90.fusion import UserEpilogue

    if hook is None:
        if args is not None:
            raise GemmError(f"epilogue_args={shown(args)} given without epilogue: they are "
                            "the values of a user epilogue's parameters "
                            "(epilogue=UserEpilogue(...))")
        return None, []
    if not isinstance(hook, UserEpilogue):
        raise GemmError(f"epilogue={shown(hook)} is not a UserEpilogue "
                        "(nvatom.kernels.sm90.fusion.UserEpilogue(name, fn, ...): a hook "
                        "that emits PTX on the accumulators); the built-in terms are the "
                        "arguments bias, activation, alpha, beta, c and residual")
    names = ", ".join(hook.arg_names) or "none"
    args = {} if args is None else args
    if not isinstance(args, Mapping):
        raise GemmError(f"epilogue_args={shown(args)} is not a mapping from the names of "
                        f"user epilogue '{hook.name}''s parameters ({names}) to values")
    missing = [a for a in hook.arg_names if a not in args]
    extra = [shown(a) for a in args if a not in hook.arg_names]
    if missing or extra:
        raise GemmError(f"epilogue_args for user epilogue '{hook.name}' (parameters: "
                        f"{names}): " + "; ".join(
                            [f"missing {', '.join(missing)}"] * bool(missing)
                            + [f"unknown {', '.join(extra)}"] * bool(extra)))
    values: list[Any] = []
    for name in hook.scalars:
        if f32_number(args[name]) is None:
            raise GemmError(f"epilogue_args[{name!r}]={shown(args[name])} is not a finite "
                            f"real number within float32's range (|x| <= {F32_MAX:.4g}; a "
                            f"scalar of user epilogue '{hook.name}')")
        values.append(float(args[name]))
    for name, kind, dt in hook.tensors:
        values.append(_hook_tensor(args[name], name, kind, dt, m if kind == "row" else n,
                                   device, hook.name))
    return hook, values


def _hook_tensor(t: Any, name: str, kind: str, dt: str, length: int, device: int,
                 hook: str) -> int:
    """A user epilogue's tensor ``name``: one ``dt`` value per row (``length`` M: (M,) or
    (M, 1)) or per column (N: (N,) or (1, N)), contiguous along it; returns its address."""
    label = f"epilogue_args[{name!r}]"
    shape, strides, _, ptr = _epilogue_tensor(t, label, device, (dt,),
                                              f"as user epilogue '{hook}' declares it")
    shapes = ((length,), (length, 1)) if kind == "row" else ((length,), (1, length))
    if shape not in shapes:
        raise GemmError(f"{label} has shape {shape}: user epilogue '{hook}' reads one value "
                        f"per {kind} ({' or '.join(map(str, shapes))})")
    if length > 1 and strides[shape.index(length)] != 1:
        raise _EpilogueStorage(("epilogue_args", name),
                               f"{label} with shape {shape} has strides {strides}: its "
                               f"elements must be contiguous; pass it .contiguous()")
    if ptr % _bytes(dt):
        raise _EpilogueStorage(("epilogue_args", name),
                               f"{label}'s data pointer 0x{ptr:x} is not {_bytes(dt)}-byte "
                               "aligned; pass it .clone()")
    return ptr


def _epilogue_tensor(t: Any, name: str, device: int, dtypes: Sequence[str],
                     why: str | None = None) -> tuple[
        tuple[int, ...], tuple[int, ...], str, int]:
    """(shape, strides, nvatom dtype, address) of a fused-epilogue tensor on ``device``
    (``why``: the reason for its dtype, in a refusal; default: the output's type)."""
    if not (hasattr(t, "data_ptr") and hasattr(t, "stride") and hasattr(t, "shape")):
        raise GemmError(f"{name} is a {type(t).__name__}, not a torch CUDA tensor")
    dev = getattr(t, "device", None)
    if getattr(dev, "type", None) != "cuda":
        raise GemmError(f"{name} is on device '{dev}', not a CUDA device; move it with "
                        f"{name}.cuda()")
    idx = 0 if dev.index is None else int(dev.index)
    if idx != device:
        raise GemmError(f"{name} is on cuda:{idx}, the operands on cuda:{device}")
    try:
        dt = dtype_name(t.dtype)
    except TensorArgumentError:
        dt = str(t.dtype).removeprefix("torch.")
    if dt not in dtypes:
        why = why or ("the output's type" + (" or float32" if len(dtypes) > 1 else ""))
        raise GemmError(f"{name} has dtype {str(t.dtype).removeprefix('torch.')}; the fused "
                        f"epilogue takes {' or '.join(dtypes)} here ({why})")
    return (tuple(int(s) for s in t.shape), tuple(int(s) for s in t.stride()), dt,
            int(t.data_ptr()))


class _EpilogueStorage(GemmError):
    """An epilogue tensor of the right shape, dtype and device that the kernel cannot read
    where it lies (strides, alignment): :func:`gemm` reads a contiguous copy instead."""

    def __init__(self, arg: str | tuple[str, str], text: str) -> None:
        super().__init__(text)
        self.arg = arg  # an argument of gemm, or ("epilogue_args", name)


def _bytes(name: str) -> int:
    """Bytes per element of an epilogue operand's type (bf16, f16, f32)."""
    return _dtype(name).storage_bits // 8


def _epilogue_matrix(t: Any, name: str, m: int, n: int, odt: str,
                     device: int) -> tuple[int, int]:
    """``c`` or ``residual``: (M, N) of the output's type, unit column stride, any row
    stride (0 broadcasts a row) of an even number of elements, pair-aligned (the kernel
    reads two adjacent columns at once); returns (address, row stride)."""
    shape, strides, _, ptr = _epilogue_tensor(t, name, device, (odt,))
    if shape != (m, n):
        raise GemmError(f"{name} has shape {shape}, the product is ({m}, {n})")
    eb = _bytes(odt)
    if strides[1] != 1 or strides[0] < 0 or strides[0] % 2 or strides[0] >= 2**32:
        raise _EpilogueStorage(
            name, f"{name} has strides {strides}: the fused epilogue reads it row-major "
            f"(column stride 1) with an even row stride below 2^32, two columns at a time; "
            f"pass {name}.contiguous()")
    if ptr % (2 * eb):
        raise _EpilogueStorage(
            name, f"{name}'s data pointer 0x{ptr:x} is not {2 * eb}-byte aligned (the "
            f"kernel reads column pairs); pass {name}.clone()")
    return ptr, strides[0]


def _epilogue_bias(t: Any, m: int, n: int, odt: str, device: int) -> tuple[str, str, int]:
    """``bias``: (N,) or (1, N) per column, (M, 1) per row; the output's type or float32,
    contiguous along its length; returns (kind, dtype, address)."""
    dtypes = (odt,) if odt == "f32" else (odt, "f32")
    shape, strides, dt, ptr = _epilogue_tensor(t, "bias", device, dtypes)
    if shape in ((n,), (1, n)) and n > 1:
        kind, unit = "col", strides[-1]
    elif shape == (m, 1):
        kind, unit = "row", strides[0]
    else:
        raise GemmError(f"bias has shape {shape}: a bias is per column, ({n},) or (1, {n}) "
                        f"(as torch.nn.functional.linear), or per row, ({m}, 1)")
    if unit != 1 and max(shape) > 1:
        raise _EpilogueStorage(
            "bias", f"bias with shape {shape} has strides {strides}: its elements must be "
            "contiguous; pass bias.contiguous()")
    align = _bytes(dt) * (2 if kind == "col" else 1)
    if ptr % align:
        raise _EpilogueStorage(
            "bias", f"bias's data pointer 0x{ptr:x} is not {align}-byte aligned (a {kind} "
            f"bias is read {'in pairs' if kind == 'col' else 'per element'}); pass "
            "bias.clone()")
    return kind, dt, ptr


def _gemm_fused(a: Any, b: Any, out: Any, *, acc: str, provider: str | None, scale_a: Any,
                scale_b: Any, fast_accum: bool, **epilogue: Any) -> Any:
    """:func:`gemm` with a fused epilogue: checked, planned on the SM90 provider with the
    epilogue (:func:`check_epilogue`), operands staged as :func:`route` would, launched.  A
    call whose arguments match an earlier one in everything the checks read goes straight to
    its launcher (:data:`CACHES`.fused_calls)."""
    key: tuple[Any, ...] | None = None
    try:
        key = (a.data_ptr(), b.data_ptr(), a.shape, b.shape, a.stride(), b.stride(), a.dtype,
               b.dtype, a.device, b.device, acc, provider, type(fast_accum), fast_accum,
               _scale_key(scale_a), _scale_key(scale_b),
               *((n, _epilogue_key(v)) for n, v in epilogue.items()))
        if out is not None:
            key += (out.data_ptr(), out.shape, out.stride(), out.dtype, out.device)
        hit = CACHES.fused_calls.get(key)
    except Exception:  # not tensors, or unhashable: the checks below say what is wrong
        key = hit = None
    if hit is not None:
        import torch

        run, launch, ai, bi, oi, problem, scales, dev, _ = hit
        if out is None:
            out, oi = _fresh_out(problem, oi, a.device, dev)
        run(launch.packed(ai, bi, oi, problem, scales),
            torch.cuda.current_stream(dev).cuda_stream)
        return out
    fresh = out is None
    copied = False
    a, b, out = from_dlpack(a), from_dlpack(b), from_dlpack(out)
    scale_a, scale_b = from_dlpack(scale_a), from_dlpack(scale_b)
    epilogue = {k: from_dlpack(v) if k in ("bias", "c", "residual") else v
                for k, v in epilogue.items()}
    user_args = epilogue.get("epilogue_args")
    if isinstance(user_args, Mapping):
        epilogue["epilogue_args"] = user_args = {n: from_dlpack(v) for n, v in user_args.items()}
    ai, bi, oi, problem = check_operands(a, b, out, acc=acc, scale_a=scale_a, scale_b=scale_b,
                                         fast_accum=fast_accum)
    # c, bias, residual and a user epilogue's tensors: each copied once at most
    for _ in range(3 + (len(user_args) if isinstance(user_args, Mapping) else 0)):
        try:
            spec, values = check_epilogue(problem, ai.device, **epilogue)
            break
        except _EpilogueStorage as e:  # readable once contiguous and freshly allocated
            if isinstance(e.arg, tuple):  # a user epilogue's tensor
                t = user_args[e.arg[1]]  # type: ignore[index]
                user_args[e.arg[1]] = t.new_empty(tuple(t.shape)).copy_(t)  # type: ignore[index]
            else:
                t = epilogue[e.arg]
                epilogue[e.arg] = t.new_empty(tuple(t.shape)).copy_(t)
            copied = True
    else:  # pragma: no cover - a fresh contiguous tensor always passes
        spec, values = check_epilogue(problem, ai.device, **epilogue)
    if spec is None:  # e.g. c with beta=0: nothing to fuse
        return gemm(a, b, out, acc=acc, provider=provider, scale_a=scale_a, scale_b=scale_b,
                    fast_accum=fast_accum)
    if provider not in (None, "sm90"):
        raise GemmError(f"provider={provider!r} with a fused epilogue: only the SM90 kernel "
                        "(provider 'sm90', sm_90a) fuses bias, activation, alpha/beta/c, "
                        "residual and a user epilogue")
    import torch

    if out is None:
        out, oi = _default_out(a, ai, problem)
    assert oi is not None
    if problem.m == 0 or problem.n == 0:
        return out
    dev = ai.device
    cap = _capability(dev)
    if tuple(cap) != (9, 0):
        raise GemmError(f"a fused epilogue ({spec.tag}) runs on the SM90 kernel only (sm_90a, "
                        f"compute capability 9.0); this GPU is compute capability {_cc(cap)}")
    if problem.k == 0 and spec.user is not None:  # the hook is PTX: the kernel on zeros
        return _hook_on_zeros(a, b, out, problem, epilogue, acc=acc, provider=provider,
                              fast_accum=fast_accum)
    if problem.k == 0:  # no product: the epilogue on zeros, by torch
        _epilogue_torch(out, **{k: v for k, v in epilogue.items()
                                if k not in ("epilogue", "epilogue_args")})
        return out
    launch, rules = _fused_plan(problem, spec, cap)  # type: ignore[arg-type]
    scales: tuple[Any, ...] = ()
    keep = None
    if problem.in_dtype in SCALED_DTYPES:  # numbers: cached device tensors (_scale_tensors)
        sa, sb = _scale_tensor(scale_a, dev), _scale_tensor(scale_b, dev)
        scales, keep = (int(sa.data_ptr()), int(sb.data_ptr())), (sa, sb)
    scales += values
    stream = torch.cuda.current_stream(dev).cuda_stream
    cached = CACHES.launchers.get((id(launch), dev))
    if cached is None or cached[0] is not launch:
        kernel = get_kernel(launch.source, "sm_90a", device=dev, backend="driver")
        cached = (launch, kernel.launcher(launch.grid, launch.block, shmem=launch.shmem,
                                          cluster=launch.cluster))
        CACHES.launchers[(id(launch), dev)] = cached
    infos, staged, why = {}, [], []
    for name, t in (("a", ai), ("b", bi), ("out", oi)):
        reason = rules[name].violation(t)
        if reason is not None:
            staged.append(name)
            why.append(reason)
        infos[name] = rules[name].settle_ld(t)
    if staged:
        r = GemmRoute(launch, "sm_90a", launch.provider, infos["a"], infos["b"], infos["out"],
                      rules, tuple(staged), tuple(why))
        _run_staged(r, cached[1], {"a": a, "b": b, "out": out}, problem, scales, stream)
        return out
    cached[1](launch.packed(infos["a"], infos["b"], infos["out"], problem, scales), stream)
    if key is not None and not copied:  # copies and staging buffers are made per call
        CACHES.fused_calls[key] = (cached[1], launch, infos["a"], infos["b"],
                             out.dtype if fresh else infos["out"], problem, scales, dev, keep)
    return out


def _epilogue_key(v: Any) -> Any:
    """What the fused call cache keys an epilogue argument by: a number, string or None by
    value, a tensor by everything :func:`check_epilogue` reads and its address, a mapping
    (``epilogue_args``) by its items keyed so, anything else (a user epilogue) by itself:
    UserEpilogues are equal when they build the same kernel (name, parameters and the
    fingerprint of their code)."""
    if v is None or type(v) in (int, float, str):
        return (type(v), v)
    if isinstance(v, Mapping):
        return (dict, tuple((n, _epilogue_key(x)) for n, x in v.items()))
    if not hasattr(v, "data_ptr"):
        return (type(v), v)
    return (v.data_ptr(), v.dtype, v.shape, v.stride(), v.device)


def _hook_on_zeros(a: Any, b: Any, out: Any, problem: GemmProblem, epilogue: dict[str, Any],
                   **kw: Any) -> Any:
    """K = 0 with a user epilogue, which exists only as PTX: the kernel runs on a zero
    product instead (16 zero columns of ``a`` and rows of ``b`` in their types and storage
    order; FP8 with unit per-tensor scales), so the hook sees the zero accumulators that
    ``a @ b`` has."""
    import torch

    m, n, kz = problem.m, problem.n, 16
    a0 = torch.zeros((m, kz), dtype=a.dtype, device=a.device)
    b0 = (torch.zeros((n, kz), dtype=b.dtype, device=b.device).t() if problem.b_major == "K"
          else torch.zeros((kz, n), dtype=b.dtype, device=b.device))
    scales = {"scale_a": 1.0, "scale_b": 1.0} if problem.in_dtype in SCALED_DTYPES else {}
    return gemm(a0, b0, out, **kw, **scales, **epilogue)


def _fused_plan(problem: GemmProblem, spec: Any, cap: tuple[int, ...]) -> tuple[Any, Any]:
    """The SM90 launch of ``problem`` with the fused epilogue ``spec`` and its operand rules
    (memoized); :class:`GemmError` when the SM90 kernel cannot run it."""
    key = (problem, spec, cap)
    hit = CACHES.fused_plans.get(key)
    if hit is not None:
        return hit
    from nvatom.gemm_providers import Sm90Provider

    p = Sm90Provider(epilogue=spec)
    why = p.reject(problem, cap)  # type: ignore[arg-type]
    if why is not None:
        raise GemmError(f"a fused epilogue ({spec.tag}) runs on the SM90 kernel only (sm_90a, "
                        f"compute capability 9.0), which cannot run this GEMM: {why}")
    hit = CACHES.fused_plans[key] = (p.plan(problem, "sm_90a"), p.operand_rules(problem))
    return hit


def _epilogue_torch(out: Any, *, bias: Any = None, activation: str | None = None,
                    alpha: float = 1.0, beta: float | None = None, c: Any = None,
                    residual: Any = None) -> None:
    """The epilogue formula on a zero product (K = 0), by torch in float32."""
    import torch

    y = torch.zeros(out.shape, dtype=torch.float32, device=out.device)
    if c is not None and (1.0 if beta is None else beta) != 0:
        y += (1.0 if beta is None else beta) * c.float()
    if bias is not None:
        y += bias.float().reshape(-1, 1) if bias.dim() == 2 and bias.shape[1] == 1 \
            else bias.float().reshape(1, -1)
    if activation == "relu":
        y = torch.relu(y)
    elif activation in ("gelu", "gelu_tanh"):
        y = torch.nn.functional.gelu(y, approximate="tanh" if activation == "gelu_tanh"
                                     else "none")
    elif activation == "silu":
        y = torch.nn.functional.silu(y)
    if residual is not None:
        y += residual.float()
    out.copy_(y)


def _problem_class(problem: GemmProblem) -> tuple[tuple[str, Any], ...]:
    """Every field of ``problem`` but its sizes: what a recipe stands for."""
    return tuple((f.name, getattr(problem, f.name)) for f in dataclasses.fields(problem)
                 if f.name not in ("m", "n", "k"))


def _sm_count(device: int) -> int:
    import torch

    return int(torch.cuda.get_device_properties(device).multi_processor_count)


def _from_recipe(problem: GemmProblem, cap: tuple[int, ...], dev: int,
                 infos: tuple[TensorInfo, ...]) -> Any:
    """The :class:`~nvatom.runtime.gemm_recipe.RecipeLaunch` that runs ``problem`` where its
    operands lie, or None (then :func:`route` plans it).  A problem class's recipe is read
    from disk only while the providers are not imported yet (once they are, planning is as
    cheap), once per process."""
    rk = (_problem_class(problem), cap, dev)
    hit = CACHES.recipes.get(rk, _MISSING)
    if hit is _MISSING:
        hit = None
        if "nvatom.gemm_providers" not in sys.modules and _built_in_only():
            rec = gr.load_recipe(gr.recipe_key(rk[0], cap, _sm_count(dev)))
            if rec is not None:
                try:
                    rules = {n: OperandRule(**rec["rules"][n]) for n in ("a", "b", "out")}
                    hit = (gr.RecipeLaunch(rec, dev), rules)
                except (LaunchError, KeyError, TypeError, ValueError):
                    hit = None  # a recipe we cannot use: plan instead
        CACHES.recipes[rk] = hit
    if hit is None:
        return None
    fast, rules = hit
    if not fast.accepts(problem.m, problem.n, problem.k):
        return None
    for t, name in zip(infos, ("a", "b", "out"), strict=True):
        if t.lines <= 1 or rules[name].violation(t) is not None:
            return None
    return fast


def _record_recipe(r: GemmRoute, problem: GemmProblem, cap: tuple[int, ...]) -> None:
    """Write the recipe of ``r``'s problem class (once per process and class) when its
    launch can state one and only the built-in providers are registered."""
    rk = (_problem_class(problem), cap, r.a.device)
    if rk in CACHES.recorded or not _built_in_only():
        return
    CACHES.recorded[rk] = True
    recipe_of = getattr(r.launch, "recipe", None)
    if recipe_of is None or min(r.a.lines, r.b.lines, r.out.lines) <= 1:
        return

    try:
        rec = recipe_of(r.a, r.b, r.out, problem)
        if rec is None:
            return
        src = r.launch.source
        rec["kernel"] = {"source_key": src.key, "name": src.name,
                         "params": [list(p) for p in src.params], "target": r.target,
                         "disk_key": kernel_disk_key(src, r.target)}
        rec["rules"] = {n: dataclasses.asdict(rule) for n, rule in r.rules.items()}
        gr.save_recipe(gr.recipe_key(rk[0], cap, int(rec["tiles"]["sms"])), rec)
    except (NvatomError, OSError):  # no ptxas to key by, an unreadable tree: plan next time
        return


def _host_offsets(offsets: Any) -> list[int]:
    """``offsets`` as a list of Python ints: a sequence, a numpy array or a torch tensor (a CUDA
    tensor is copied to the host: one synchronisation)."""
    if isinstance(offsets, (list, tuple)):
        vals = list(offsets)
    elif hasattr(offsets, "tolist"):
        dt = str(getattr(offsets, "dtype", "")).removeprefix("torch.")
        if dt and not dt.startswith(("int", "uint")):
            raise GemmError(f"offsets has dtype {dt}: group offsets are integers (int32 "
                            "cumulative row ends, as torch._grouped_mm's offs)")
        if len(getattr(offsets, "shape", (0,))) != 1:
            raise GemmError(f"offsets has shape {tuple(offsets.shape)}: one cumulative row end "
                            "per group (a 1-D tensor)")
        vals = offsets.tolist()
    else:
        raise GemmError(f"offsets is a {type(offsets).__name__}: pass the groups' cumulative "
                        "row ends as a 1-D int32 tensor or a list of ints")
    for v in vals:
        if isinstance(v, bool) or not isinstance(v, int):
            raise GemmError(f"offsets holds {v!r}: the cumulative row ends are ints")
    return vals


def grouped_gemm(a: Any, b: Any, offsets: Any, out: Any = None, *, scale_a: Any = None,
                 scale_b: Any = None, fast_accum: bool = False, status: Any = None) -> Any:
    """A grouped GEMM for mixture-of-experts layers: ``out[rows of g] = a[rows of g] @ b[g]``
    for every group ``g``, in one persistent launch of the SM90 kernel.

    ``a``: (total_M, K) row-major bf16 or f16, the groups' rows stacked.  ``b``: (G, K, N) of
    ``a``'s dtype, each ``b[g]`` row-major (strides (., N', 1)) or K-major (strides
    (., 1, K')), group stride a multiple of 16 bytes.

    FP8 (e4m3 / e5m2, mixed freely): ``b[g]`` K-major (``w.transpose(1, 2)`` of weights
    ``w`` (G, N, K), as ``torch._scaled_grouped_mm``), bf16 output, both scales required:
    per-tensor (``scale_a`` one element, ``scale_b`` one element or (G,): one per expert),
    row-wise (``scale_a`` (total_M,), ``scale_b`` (G, N): ``torch._scaled_grouped_mm``'s) or
    DeepSeek-V3 block scales (``scale_a`` (total_M, ceil(K/128)), ``scale_b``
    (G, ceil(K/128), ceil(N/128)), each group's K-major); :func:`check_group_scales` names
    every wrong one.  ``fast_accum`` as :func:`gemm`'s (default: promoted, f32-exact
    accumulation every 128 K elements).  ``offsets``: the groups' cumulative
    row ends, ``offsets[g]`` = the end of group g's rows (int32, as ``torch._grouped_mm``'s
    ``offs``): group g is rows ``offsets[g-1]..offsets[g]`` (group 0 from row 0); groups may be
    empty; non-decreasing, at most total_M.  A CPU tensor or a list: checked on the host.  A
    CUDA int32 tensor is never read by the host (no synchronisation; the call can be captured
    in a CUDA graph, and a replay follows the offsets' new values): a small kernel builds the
    group table on the GPU first (:mod:`nvatom.kernels.sm90.group_table`).  Offsets the host
    cannot check are clamped there: each into [0, total_M] and up to the previous end (a
    decreasing end makes an empty group), and ``status`` (an int32 CUDA tensor, one element
    or more; optional) gets ``status[0] |= 1`` when any was changed.  ``out``: (total_M, N)
    row-major bf16, f16 or f32 (default: a new tensor of ``a``'s dtype; rows past
    ``offsets[-1]`` are zero there and untouched in a given ``out``).

    Each group gets its own three tensor maps (A and D at its first row with its M, B at its
    matrix), built on the host into a device array the kernel indexes per tile, so TMA clips
    every load and store at the group's rows; the tile scheduler walks the groups' tiles in
    order (``tile_ends``: cumulative tile counts).  Compute capability 9.0; K and N multiples
    of 8 (TMA's 16-byte pitch); 16-byte aligned operands.  Wrong shapes, dtypes, layouts or
    offsets raise :class:`GemmError` / ``TensorArgumentError`` naming them.

    Host cost: per call the checks and, for operands and offsets not seen in the last 64
    calls, 3 tensor-map encodings per non-empty group and one host-to-device copy of
    G x 388 bytes; a repeated call (same pointers, strides and offsets) reuses them, and with
    ``out`` given it skips the checks too (the call cache: a key of the tensors' pointers,
    shapes, strides, dtypes and devices and the offsets' values)."""
    fkey = _fast_key_extras(_grouped_fast_key(a, b, offsets, out), scale_a, scale_b,
                            fast_accum, status)
    hit = CACHES.grouped_fast.get(fkey) if fkey is not None else None
    if hit is not None:
        import torch

        hit[0](hit[1], torch.cuda.current_stream(hit[3]).cuda_stream)
        return out
    ai = check_matrix(a, "a", dtypes=(*PLAIN_DTYPES, *SCALED_DTYPES), majors=("row",),
                      align_bytes=16)
    fp8 = ai.dtype in SCALED_DTYPES
    if not (hasattr(b, "dim") and hasattr(b, "stride")) or b.dim() != 3:
        raise GemmError(f"b has shape {tuple(getattr(b, 'shape', ()))}: grouped_gemm takes "
                        "b as (G, K, N), one K x N matrix per group")
    groups, kb_, n = (int(x) for x in b.shape)
    total_m, k = ai.shape
    if groups < 1:
        raise GemmError("b has 0 groups: grouped_gemm takes b as (G, K, N) with G >= 1")
    if b.dtype != a.dtype and not (fp8 and dtype_name(b.dtype) in SCALED_DTYPES):
        raise TensorArgumentError(f"a is {ai.dtype} but b is {dtype_name(b.dtype)}; the "
                                  "operands must have one element type (FP8: e4m3 and e5m2 "
                                  "mix)")
    if kb_ != k:
        raise GemmError(f"shapes do not chain: a is {total_m}x{k}, b is {groups}x{kb_}x{n} "
                        f"({k} != {kb_})")
    if not isinstance(fast_accum, bool):
        raise GemmError(f"fast_accum = {fast_accum!r}: True or False")
    if fast_accum and not fp8:
        raise GemmError(f"fast_accum applies to FP8 operands; a and b are {ai.dtype}")
    if fp8 and int(b.stride(1)) != 1 and k > 1:
        raise TensorArgumentError(
            f"b has strides {tuple(int(x) for x in b.stride())}: FP8 WGMMA reads K-major "
            "operands only, so each b[g] must be column-major (strides (., 1, K')): pass "
            "b = w.transpose(1, 2) of the weights w (G, N, K), as torch._scaled_grouped_mm")
    b0 = check_matrix(b[0], "b[g]", dtypes=SCALED_DTYPES if fp8 else (ai.dtype,),
                      majors=("col",) if fp8 else ("row", "col"), align_bytes=16,
                      device=ai.device)
    for t in (ai, b0):
        if t.lines > 1 and t.ld < t.inner:
            raise TensorArgumentError(
                f"{t.name}'s lines overlap (leading stride {t.ld} < {t.inner} elements per "
                f"line, strides {t.strides}): TMA reads each line on its own; pass a "
                "contiguous tensor")
    eb = ai.element_bytes
    gstride = int(b.stride(0)) * eb
    if groups > 1 and gstride % 16:
        raise TensorArgumentError(f"b's group stride {b.stride(0)} elements ({gstride} bytes) "
                                  "is not a multiple of 16 bytes (TMA)")
    dev_offs = _device_offsets(offsets, groups, ai.device, "offsets")
    _check_status(status, ai.device)
    ends = [] if dev_offs else _host_offsets(offsets)
    if not dev_offs and len(ends) != groups:
        raise GemmError(f"offsets has {len(ends)} entries but b has {groups} groups: one "
                        "cumulative row end per group")
    prev = 0
    for g, e in enumerate(ends):
        if e < prev or e > total_m:
            raise GemmError(f"offsets[{g}] = {e}: the cumulative row ends are non-decreasing, "
                            f"from 0 to total_M = {total_m} (offsets[{g - 1 if g else 0}] = "
                            f"{prev if g else 0})")
        prev = e
    mode, sb_step = check_group_scales(scale_a, scale_b, ai.dtype, ai.device, groups,
                                       total_m, n, k)
    if out is None:
        import torch

        out = torch.empty((total_m, n), dtype=torch.bfloat16 if fp8 else a.dtype,
                          device=a.device)
        if dev_offs:  # the rows past the last end are not known here
            out.zero_()
        elif ends and ends[-1] < total_m:
            out[ends[-1]:].zero_()
        elif not ends:
            out.zero_()
    oi = check_matrix(out, "out", dtypes=(SCALED_OUT_DTYPE,) if fp8 else OUT_DTYPES,
                      majors=("row",), align_bytes=16, device=ai.device)
    if oi.shape != (total_m, n):
        raise GemmError(f"out has shape {oi.shape}, the product is {total_m}x{n}")
    if oi.lines > 1 and oi.ld < n:
        raise TensorArgumentError(f"out's rows overlap (row stride {oi.ld} < N = {n})")
    check_sizes(total_m, n, k)
    if dev_offs:
        return _grouped_device(ai, b, b0, oi, out, offsets, status, groups, n, k, gstride,
                               fp8, mode, sb_step, scale_a, scale_b, fast_accum, False,
                               fkey=fkey)
    if not ends or ends[-1] == 0 or n == 0:
        return out
    import torch

    if k == 0:
        out[: ends[-1]].zero_()
        return out
    dev = ai.device
    cap = _capability(dev)
    if tuple(cap) != (9, 0):
        raise GemmError(f"grouped_gemm runs on the SM90 kernel (compute capability 9.0, "
                        f"WGMMA and TMA); this GPU is {_cc(cap)}")
    key = (ai, b0, oi, tuple(int(x) for x in b.stride()), groups, tuple(ends))
    if fp8:
        key += (_scale_key(scale_a), _scale_key(scale_b), fast_accum)
    hit = CACHES.grouped_calls.get(key)
    if hit is not None:  # the same operands and offsets: maps and tile counts already there
        hit[0](hit[1], torch.cuda.current_stream(dev).cuda_stream)
        _remember_fast(fkey, hit, dev)
        return out
    from nvatom.gemm_providers import grouped_plan

    b_major = "N" if b0.major == "row" else "K"
    try:
        gp = grouped_plan(ai.dtype, oi.dtype, b_major, ends, n, k, ai.ptr, ai.ld, int(b.data_ptr()),
                          gstride, b0.ld, oi.ptr, oi.ld, _sm_count(dev),
                          **(dict(b_dtype=b0.dtype, scale_mode=mode, fast_accum=fast_accum)
                             if fp8 else {}))
    except NvatomError as e:  # a size TMA cannot describe (check_problem)
        raise GemmError(f"grouped_gemm: {e}") from None
    if gp.grid == 0:
        return out
    from nvatom.kernels.sm90.gemm import build_gemm_sm90
    from nvatom.kernels.sm90.launch import kernel_params

    cfg = gp.cfg
    src = KernelSource(repr(cfg), cfg.name, kernel_params(cfg),
                       lambda t, c=cfg: build_gemm_sm90(c, t).emit())
    kernel = get_kernel(src, "sm_90a", device=dev, backend="driver")
    run = kernel.launcher((gp.grid, 1, 1), (cfg.threads, 1, 1), shmem=cfg.smem_bytes)
    host = bytearray(gp.buffer())
    buf = torch.frombuffer(host, dtype=torch.uint8).to(a.device, non_blocking=True)
    base = int(buf.data_ptr())
    args = [base, base + len(gp.maps), groups, n, k]
    keep: tuple[Any, ...] = (buf,)
    if fp8:  # number scales become cached device tensors, kept alive with the call
        sa, sb = _scale_tensor(scale_a, dev), _scale_tensor(scale_b, dev)
        args += [int(sa.data_ptr()), int(sb.data_ptr()), sb_step]
        keep += (sa, sb)
    params = PackedParams.of(src.params, args)
    run(params, torch.cuda.current_stream(dev).cuda_stream)
    hit = CACHES.grouped_calls[key] = (run, params, keep)  # the maps (and scales) stay there
    _remember_fast(fkey, hit, dev)
    return out


def _grouped_fast_key(a: Any, b: Any, offsets: Any, out: Any) -> tuple[Any, ...] | None:
    """The call-cache key of a ``grouped_gemm`` (or ``grouped_gemm_masked``) call with
    ``out`` given: everything the checks and the plan depend on, read without checking
    (None: no fast path, e.g. anything that is not a tensor).  Offsets on the host by value;
    offsets on the GPU (never read by the host) by address, dtype, shape and strides."""
    if out is None:
        return None
    try:
        if isinstance(offsets, (list, tuple)):
            ends = tuple(offsets)
            if not all(type(v) is int for v in ends):
                return None
            okey: Any = ends
        elif getattr(offsets, "is_cuda", False) is True:
            okey = ("cuda", offsets.data_ptr(), offsets.dtype, tuple(offsets.shape),
                    offsets.stride(), offsets.device)
        elif getattr(offsets, "is_cuda", True) or offsets.dim() != 1:
            return None
        else:
            okey = (offsets.dtype, tuple(offsets.tolist()))
        key = (a.data_ptr(), b.data_ptr(), out.data_ptr(), a.shape, b.shape, out.shape,
               a.stride(), b.stride(), out.stride(), a.dtype, b.dtype, out.dtype, a.device,
               b.device, out.device, okey)
        hash(key)
        return key
    except Exception:  # not tensors, or unhashable: the checks say what is wrong
        return None


def _fast_key_extras(fkey: tuple[Any, ...] | None, scale_a: Any, scale_b: Any,
                     fast_accum: Any, status: Any) -> tuple[Any, ...] | None:
    """A grouped call-cache key with the scales, ``fast_accum`` and the status word added
    (None: no fast path, e.g. a value the checks must name)."""
    if fkey is not None and (scale_a is not None or scale_b is not None or fast_accum):
        # fast_accum's type too: 1.0 == True, and a hit skips the check that refuses 1.0
        fkey += (_scale_key(scale_a), _scale_key(scale_b), type(fast_accum), fast_accum)
        try:
            hash(fkey)
        except TypeError:  # e.g. fast_accum=[]: no fast path; the checks name it
            fkey = None
    if fkey is not None and status is not None:
        # the status word too: a hit skips the check that refuses a wrong one (fuzz campaign
        # seed 20261128, api:37266: status=0.5 after a call with a good one was served)
        try:
            fkey += ("status", status.data_ptr(), str(status.dtype), tuple(status.shape),
                     str(status.device))
            hash(fkey)
        except Exception:  # not a tensor: no fast path; the checks name it
            fkey = None
    return fkey


def _remember_fast(fkey: tuple[Any, ...] | None, hit: tuple[Any, Any, Any], dev: Any) -> None:
    """Enter a checked and planned call into the unchecked grouped call cache."""
    if fkey is not None:
        CACHES.grouped_fast[fkey] = (*hit, dev)


def _device_offsets(offsets: Any, groups: int, device: int, name: str) -> bool:
    """True when ``offsets`` is a CUDA tensor (then checked: int32, (G,), contiguous, on the
    operands' GPU; its values stay on the device)."""
    if not getattr(offsets, "is_cuda", False) or not callable(getattr(offsets, "dim", None)):
        return False
    dt = str(offsets.dtype).removeprefix("torch.")
    if dt != "int32":
        raise GemmError(f"{name} has dtype {dt}: on the GPU the groups' offsets are int32 "
                        "(torch._grouped_mm's offs)")
    if offsets.dim() != 1 or int(offsets.shape[0]) != groups:
        raise GemmError(f"{name} has shape {tuple(offsets.shape)}: one int32 per group, "
                        f"({groups},)")
    if groups > 1 and int(offsets.stride(0)) != 1:
        raise GemmError(f"{name} has stride {offsets.stride(0)}: pass a contiguous tensor")
    if _cuda_index(offsets) != device:
        raise GemmError(f"{name} is on cuda:{_cuda_index(offsets)}, the operands on "
                        f"cuda:{device}")
    return True


def _cuda_index(t: Any) -> int:
    """The CUDA device a tensor is on (a device without an index is the current one)."""
    idx = getattr(t.device, "index", None)
    if idx is None:
        import torch

        return int(torch.cuda.current_device())
    return int(idx)


def _check_status(status: Any, device: int) -> None:
    """``status``: None or an int32 CUDA tensor of at least one element on ``device``."""
    if status is None:
        return
    if not getattr(status, "is_cuda", False) or not callable(getattr(status, "numel", None)):
        raise GemmError(f"status is a {type(status).__name__}: an int32 CUDA tensor (one "
                        "element), which the GPU flags when it clamps offsets")
    dt = str(status.dtype).removeprefix("torch.")
    if dt != "int32" or status.numel() < 1 or _cuda_index(status) != device:
        raise GemmError(f"status is {dt} with {status.numel()} elements on "
                        f"cuda:{_cuda_index(status)}: an int32 tensor of at least one element "
                        f"on cuda:{device}")


def _grouped_device(ai: TensorInfo, b: Any, b0: TensorInfo, oi: TensorInfo, out: Any,
                    offsets: Any, status: Any, groups: int, n: int, k: int, gstride: int,
                    fp8: bool, mode: str, sb_step: int, scale_a: Any, scale_b: Any,
                    fast_accum: bool, masked: bool, rows: int | None = None,
                    a_group: int = 0, d_group: int = 0,
                    fkey: tuple[Any, ...] | None = None) -> Any:
    """The grouped GEMM with offsets (or masked counts) on the GPU: the table kernel
    (:mod:`nvatom.kernels.sm90.group_table`) then the grouped SM90 kernel, two launches on
    the current stream and no host read of the offsets (capturable).  ``rows``: the stacked
    rows (contiguous) or M_max (masked); ``a_group`` / ``d_group``: bytes per group
    (masked); ``fkey``: the unchecked call-cache key the launch is entered under."""
    import torch

    rows = ai.shape[0] if rows is None else rows
    if n == 0 or rows == 0:
        return out
    if k == 0:
        raise GemmError("K = 0 with offsets on the GPU: the product is zero on rows the host "
                        "does not know; pass the offsets as a list or CPU tensor")
    dev = ai.device
    cap = _capability(dev)
    if tuple(cap) != (9, 0):
        raise GemmError(f"grouped_gemm runs on the SM90 kernel (compute capability 9.0, "
                        f"WGMMA and TMA); this GPU is {_cc(cap)}")
    sptr = 0 if status is None else int(status.data_ptr())
    # everything the plan and its arguments depend on: the masked layout's group strides of
    # a and out too (fuzz campaign seed 20261210, api:123044: a call with another a group
    # stride was served the first call's plan)
    key = ("device", masked, ai, b0, oi, tuple(int(x) for x in b.stride()), groups, rows,
           a_group, d_group, int(offsets.data_ptr()), sptr)
    if fp8:
        key += (_scale_key(scale_a), _scale_key(scale_b), fast_accum)
    stream = torch.cuda.current_stream(dev).cuda_stream
    hit = CACHES.grouped_calls.get(key)
    if hit is not None:
        hit[0](hit[1], stream)
        _remember_fast(fkey, hit, dev)
        return out
    from nvatom.gemm_providers import grouped_device_plan
    from nvatom.kernels.sm90.gemm import build_gemm_sm90
    from nvatom.kernels.sm90.group_table import (
        ENTRY_BYTES,
        PARAMS,
        THREADS,
        build_group_table,
    )
    from nvatom.kernels.sm90.launch import kernel_params
    from nvatom.ptx.tma_emit import TENSORMAP_ALIGN, tensormap_param_type

    try:
        plan = grouped_device_plan(
            ai.dtype, oi.dtype, "N" if b0.major == "row" else "K", rows, groups, n, k, ai.ptr,
            ai.ld, int(b.data_ptr()), gstride, b0.ld, oi.ptr, oi.ld, _sm_count(dev),
            masked=masked, **(dict(b_dtype=b0.dtype, scale_mode=mode, fast_accum=fast_accum)
                              if fp8 else {}))
    except NvatomError as e:  # a size TMA cannot describe (check_problem)
        raise GemmError(f"grouped_gemm: {e}") from None
    ts = plan.table
    tparams = (*PARAMS, *((f"t{x}", tensormap_param_type(TENSORMAP_ALIGN)) for x in "ABD"))
    tsrc = KernelSource(repr(ts), ts.name, tparams,
                        lambda t, s=ts: build_group_table(s, t).emit())
    trun = get_kernel(tsrc, "sm_90a", device=dev, backend="driver").launcher(
        (1, 1, 1), (THREADS, 1, 1))
    table = torch.empty(plan.buffer_bytes, dtype=torch.uint8, device=f"cuda:{dev}")
    tb, tm = int(table.data_ptr()), plan.templates
    targs = [int(offsets.data_ptr()), groups, rows, plan.tiles_n, ai.ptr,
             ai.ld * ai.element_bytes, a_group, int(b.data_ptr()), gstride, oi.ptr,
             oi.ld * oi.element_bytes, d_group, tb, sptr, tm[:128], tm[128:256], tm[256:]]
    cfg = plan.cfg
    src = KernelSource(repr(cfg), cfg.name, kernel_params(cfg),
                       lambda t, c=cfg: build_gemm_sm90(c, t).emit())
    grun = get_kernel(src, "sm_90a", device=dev, backend="driver").launcher(
        (plan.grid, 1, 1), (cfg.threads, 1, 1), shmem=cfg.smem_bytes)
    args = [tb, tb + groups * ENTRY_BYTES, groups, n, k]
    keep: tuple[Any, ...] = (table, offsets, status)
    if fp8:
        sa, sb = _scale_tensor(scale_a, dev), _scale_tensor(scale_b, dev)
        args += [int(sa.data_ptr()), int(sb.data_ptr()), sb_step]
        keep += (sa, sb)
    packed = (PackedParams.of(tparams, targs), PackedParams.of(src.params, args))

    def run(pp: tuple[Any, Any], stream: Any) -> None:
        trun(pp[0], stream)
        grun(pp[1], stream)

    run(packed, stream)
    CACHES.grouped_calls[key] = (run, packed, keep)
    _remember_fast(fkey, (run, packed, keep), dev)
    return out


def grouped_gemm_masked(a: Any, b: Any, counts: Any, out: Any = None, *, scale_a: Any = None,
                        scale_b: Any = None, fast_accum: bool = False,
                        status: Any = None) -> Any:
    """DeepGEMM's masked grouped layout (MoE decode with CUDA graphs): ``out[g, :c] =
    a[g, :c] @ b[g]`` with ``c = counts[g]`` for every group ``g``; rows past ``c`` are
    neither read nor written.

    ``a``: (G, M_max, K) bf16 or f16, each ``a[g]`` row-major; ``b``: (G, K, N) as
    :func:`grouped_gemm`'s; ``counts``: (G,) int32 on the GPU (never read by the host: the
    call can be captured in a CUDA graph and a replay follows new counts) or a list / CPU
    tensor (checked on the host, then copied); ``out``: (G, M_max, N) row-major of ``a``'s
    dtype or f32 (default: new, zeros).  FP8 (e4m3/e5m2, each ``b[g]`` K-major, bf16
    output) takes :func:`grouped_gemm`'s scales with A's rows as (G, M_max): per-tensor,
    row-wise ``scale_a`` (G, M_max) and ``scale_b`` (G, N), block ``scale_a`` (G, M_max,
    ceil(K/128)) and ``scale_b`` (G, ceil(K/128), ceil(N/128)); ``fast_accum`` as
    :func:`gemm`'s.  A count outside [0, M_max] is clamped on the GPU and flags ``status``
    (as :func:`grouped_gemm`'s).  One table kernel and one persistent launch of the SM90
    grouped kernel; compute capability 9.0; K and N multiples of 8 (16 for FP8).

    Host cost: a repeated call with ``out`` given (same tensors: pointers, shapes, strides,
    dtypes; counts on the GPU by address, on the host by value) skips the checks and
    launches the cached plan (:func:`grouped_gemm`'s call cache)."""
    import torch

    fkey = _grouped_fast_key(a, b, counts, out)
    fkey = _fast_key_extras(None if fkey is None else ("masked", *fkey), scale_a, scale_b,
                            fast_accum, status)
    hit = CACHES.grouped_fast.get(fkey) if fkey is not None else None
    if hit is not None:
        hit[0](hit[1], torch.cuda.current_stream(hit[3]).cuda_stream)
        return out
    for name, t in (("a", a), ("b", b)):
        if not (hasattr(t, "dim") and hasattr(t, "stride")) or t.dim() != 3:
            raise GemmError(f"{name} has shape {tuple(getattr(t, 'shape', ()))}: "
                            "grouped_gemm_masked takes a (G, M_max, K) and b (G, K, N)")
    groups, m_max, k = (int(x) for x in a.shape)
    if groups < 1 or tuple(b.shape[:2]) != (groups, k):
        raise GemmError(f"a is {tuple(a.shape)} and b is {tuple(b.shape)}: a (G, M_max, K) and "
                        "b (G, K, N) with G >= 1 and one K")
    n = int(b.shape[2])
    ai = check_matrix(a[0], "a[g]", dtypes=(*PLAIN_DTYPES, *SCALED_DTYPES), majors=("row",),
                      align_bytes=16)
    fp8 = ai.dtype in SCALED_DTYPES
    if b.dtype != a.dtype and not (fp8 and dtype_name(b.dtype) in SCALED_DTYPES):
        raise TensorArgumentError(f"a is {ai.dtype} but b is {dtype_name(b.dtype)}: one "
                                  "element type (FP8: e4m3 and e5m2 mix)")
    b0 = check_matrix(b[0], "b[g]", dtypes=SCALED_DTYPES if fp8 else (ai.dtype,),
                      majors=("col",) if fp8 else ("row", "col"), align_bytes=16,
                      device=ai.device)
    if not isinstance(fast_accum, bool) or (fast_accum and not fp8):
        raise GemmError(f"fast_accum = {fast_accum!r}: True or False, and True only with FP8 "
                        "operands")
    mode, sb_step = "tensor", 0
    if fp8:
        mode, sb_step = check_group_scales(_stacked_scale(scale_a, groups, m_max), scale_b,
                                           ai.dtype, ai.device, groups, groups * m_max, n, k)
    elif scale_a is not None or scale_b is not None:
        raise GemmError(f"scale_a/scale_b apply to FP8 operands; a and b are {ai.dtype}")
    if not _device_offsets(counts, groups, ai.device, "counts"):
        vals = _host_offsets(counts)
        if len(vals) != groups or any(not 0 <= v <= m_max for v in vals):
            raise GemmError(f"counts = {vals}: one count per group ({groups}), each in "
                            f"0..M_max = {m_max}")
        counts = torch.tensor(vals, dtype=torch.int32, device=f"cuda:{ai.device}")
    _check_status(status, ai.device)
    if out is None:
        out = torch.zeros((groups, m_max, n), dtype=torch.bfloat16 if fp8 else a.dtype,
                          device=a.device)
    if not (hasattr(out, "dim") and hasattr(out, "stride")) or tuple(out.shape) != (
            groups, m_max, n):
        raise GemmError(f"out has shape {tuple(getattr(out, 'shape', ()))}, the product is "
                        f"{(groups, m_max, n)}")
    oi = check_matrix(out[0], "out[g]", dtypes=(SCALED_OUT_DTYPE,) if fp8 else OUT_DTYPES,
                      majors=("row",), align_bytes=16, device=ai.device)
    strides = []
    for name, t, info in (("a", a, ai), ("b", b, b0), ("out", out, oi)):
        step = int(t.stride(0)) * info.element_bytes
        if groups > 1 and step % 16:
            raise TensorArgumentError(f"{name}'s group stride {t.stride(0)} elements ({step} "
                                      "bytes) is not a multiple of 16 bytes (TMA)")
        strides.append(step)
    check_sizes(m_max, n, k)
    return _grouped_device(ai, b, b0, oi, out, counts, status, groups, n, k, strides[1],
                           fp8, mode, sb_step, _stacked_scale(scale_a, groups, m_max),
                           scale_b, fast_accum, True, rows=m_max, a_group=strides[0],
                           d_group=strides[2], fkey=fkey)


def _stacked_scale(scale_a: Any, groups: int, m_max: int) -> Any:
    """A masked call's ``scale_a`` with its (G, M_max) rows as one stacked dimension (a view:
    the kernel reads the caller's tensor), as :func:`check_group_scales` takes it."""
    shape = tuple(getattr(scale_a, "shape", ()))
    if len(shape) < 2 or shape[:2] != (groups, m_max):
        return scale_a  # per-tensor, or a wrong shape the check names
    try:
        return scale_a.view(groups * m_max, *shape[2:])
    except RuntimeError:
        raise GemmError(f"scale_a has shape {shape} and strides {tuple(scale_a.stride())}: its "
                        "(G, M_max) rows must be one stacked dimension; pass "
                        "scale_a.contiguous()") from None


@contextlib.contextmanager
def grouped_variant(**plan_kwargs: Any) -> Iterator[LruDict[tuple[Any, ...], tuple[Any, Any, Any]]]:
    """Plan the ``grouped_gemm`` calls made inside the block with
    ``gemm_providers.grouped_plan(..., **plan_kwargs)`` (another ``group_sched`` or kernel
    ``config``: tuning scripts, benches and tests). The grouped call caches are emptied on
    entry and on exit, so the variant neither reuses nor leaves a plan; the block gets the
    cache of (launcher, packed arguments, device buffer) to launch the variant directly."""
    import nvatom.gemm_providers as gp

    orig = gp.grouped_plan
    gp.grouped_plan = functools.partial(orig, **plan_kwargs)
    CACHES.grouped_calls.clear()
    CACHES.grouped_fast.clear()
    try:
        yield CACHES.grouped_calls
    finally:
        gp.grouped_plan = orig
        CACHES.grouped_calls.clear()
        CACHES.grouped_fast.clear()


def _staging_buffer(t: TensorInfo, like: Any, rule: OperandRule) -> Any:
    """An empty tensor of ``t``'s shape, dtype and major on ``like``'s device whose base is
    :data:`STAGE_ALIGN`-aligned and whose pitch is :meth:`OperandRule.tight_ld`."""
    import torch

    eb = t.element_bytes
    ld = rule.tight_ld(t.inner, eb)
    extra = STAGE_ALIGN // eb
    flat = torch.empty(max(t.lines, 1) * ld + extra, dtype=like.dtype, device=like.device)
    offset = (-int(flat.data_ptr()) % STAGE_ALIGN) // eb
    strides = (ld, 1) if t.major == "row" else (1, ld)
    return flat.as_strided(t.shape, strides, offset)


def _run_staged(r: GemmRoute, launcher: Any, tensors: dict[str, Any], problem: GemmProblem,
                scales: tuple[int, int] | None, stream: int) -> None:
    """Launch ``r`` with its staged operands copied into aligned buffers (``out``: computed
    in one, then copied into ``out``), all on torch's current stream, so the buffers may be
    freed (and reused by later work on that stream) as soon as this returns."""
    infos = {"a": r.a, "b": r.b, "out": r.out}
    bufs = {}
    for name in r.staged:
        buf = _staging_buffer(infos[name], tensors[name], r.rules[name])
        if name != "out":
            buf.copy_(tensors[name])
        bufs[name] = buf
        t = check_matrix(buf, name, dtypes=(infos[name].dtype,), majors=(infos[name].major,),
                         align_bytes=1)
        assert r.rules[name].violation(t) is None, r.rules[name].violation(t)
        infos[name] = r.rules[name].settle_ld(t)
    launch = r.launch
    params = PackedParams.of(launch.source.params,
                             launch.args(infos["a"], infos["b"], infos["out"], problem, scales))
    launcher(params, stream)
    if "out" in bufs:
        tensors["out"].copy_(bufs["out"])


def _scale_key(v: Any) -> Any:
    """What the call cache keys a scale by: a number by value, a tensor by everything
    :func:`check_scales` reads and its address."""
    if v is None or isinstance(v, (int, float)):
        return (type(v), v)
    if not callable(getattr(v, "data_ptr", None)) or not callable(getattr(v, "stride", None)):
        return (type(v), id(v))  # not a tensor: the checks refuse it, naming it
    return (v.data_ptr(), v.dtype, v.shape, v.stride(), v.device)


def _scale_tensor(v: Any, device: int) -> Any:
    """A checked scale as a device tensor: a tensor as given, a number as a float32 tensor
    made once per (value, device) (``CACHES.scale_tensors``)."""
    if not isinstance(v, (int, float)):
        return v
    key = (float(v), device)
    hit = CACHES.scale_tensors.get(key)
    if hit is None:
        import torch

        hit = torch.full((1,), float(v), dtype=torch.float32, device=f"cuda:{device}")
        CACHES.scale_tensors[key] = hit
    return hit


def _plan_with(problem: GemmProblem, capability: tuple[int, int],
               name: str) -> tuple[GemmLaunch, str]:
    key = (problem, capability, name)
    hit = CACHES.named_plans.get(key)
    if hit is not None:
        return hit
    chosen = [_provider_named(name, _providers())]
    hit = CACHES.named_plans[key] = plan(problem, capability, chosen)
    return hit


_MISSING = object()


class _GemmModule(types.ModuleType):
    """This module, callable: ``nvatom.gemm`` is always this module (the package's
    ``__getattr__`` imports it), and calling it runs :func:`gemm`."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return gemm(*args, **kwargs)


sys.modules[__name__].__class__ = _GemmModule
