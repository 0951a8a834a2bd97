"""``nvatom.gemm(a, b)``: a matrix product of torch tensors computed by nvatom's own kernels.

The kernels are built only from nvatom atoms (``nvatom.kernels``); this module validates the
operands (:mod:`nvatom.runtime.torch_interop`), picks a kernel provider for the device, gets
the compiled kernel from the cache (:mod:`nvatom.runtime.launch`) and launches it on torch's
current stream.

Dispatch: :data:`PROVIDERS` is an ordered list of :class:`GemmProvider` objects; the first whose
``supports(problem, capability)`` is true runs.  The SM80 provider (cp.async + ldmatrix +
mma.sync) supports every GPU from compute capability 8.0 on.  Plug-in point: a module that
defines ``gemm_provider() -> GemmProvider`` is registered (before the SM80 one) by
:func:`register_provider`; ``nvatom.kernels.gemm_sm90`` is imported for this automatically
the first time a GEMM runs, if it exists and defines ``gemm_provider``.
"""

from __future__ import annotations

import dataclasses
import importlib
import warnings
from collections.abc import Sequence
from typing import Any, Protocol

from nvatom.errors import NvatomError
from nvatom.runtime.launch import KernelSource, LruCache, PackedParams, get_kernel
from nvatom.runtime.torch_interop import TensorArgumentError, TensorInfo, check_matrix

__all__ = [
    "PROVIDERS",
    "GemmError",
    "GemmLaunch",
    "GemmProblem",
    "GemmProvider",
    "Sm80Provider",
    "gemm",
    "plan",
    "register_provider",
]

#: Accumulator types offered (the MMA atoms used accumulate in f32).
ACC_TYPES = ("f32",)
#: Modules imported once to let them register a provider (optional; absent is fine).
PLUGIN_MODULES = ("nvatom.kernels.gemm_sm90",)


class GemmError(NvatomError, ValueError):
    """A GEMM that nvatom cannot run as asked (shapes, types, device)."""


@dataclasses.dataclass(frozen=True)
class GemmProblem:
    """``D (M x N) = A (M x K) @ B (K x N)`` with operand storage orders and types."""

    m: int
    n: int
    k: int
    in_dtype: str  # A and B
    out_dtype: str
    a_major: str  # "K": A row-major (M x K, stride (lda, 1)); "M": column-major
    b_major: str  # "N": B row-major (K x N, stride (ldb, 1)); "K": column-major
    acc: str = "f32"


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

    def args(self, a: TensorInfo, b: TensorInfo, d: TensorInfo, p: GemmProblem) -> list[Any]:
        return [a.ptr, b.ptr, d.ptr, p.m, p.n, p.k, a.ld, b.ld, d.ld]

    def packed(self, a: TensorInfo, b: TensorInfo, d: TensorInfo,
               p: GemmProblem) -> PackedParams:
        """:meth:`args` checked and laid out for the launch, cached (bounded LRU) by everything
        the arguments depend on."""
        key = (a.ptr, b.ptr, d.ptr, a.ld, b.ld, d.ld, p.m, p.n, p.k)
        return self.param_cache.get_or_make(
            key, lambda: PackedParams.of(self.source.params, self.args(a, b, d, p)))


class GemmProvider(Protocol):
    """A family of GEMM kernels (one per SM generation)."""

    name: str

    def supports(self, problem: GemmProblem, capability: tuple[int, int]) -> bool: ...

    def target(self, capability: tuple[int, int]) -> str: ...

    def plan(self, problem: GemmProblem, target: str) -> GemmLaunch: ...


class Sm80Provider:
    """cp.async + ldmatrix + mma.sync (``nvatom.kernels.gemm_sm80``), compute capability 8.0+."""

    name = "sm80"

    def __init__(self, config: Any = None, name: str | None = None) -> None:
        """``config``: a :class:`nvatom.kernels.gemm_sm80.GemmSm80Config` (default tiling)."""
        self.config = config
        if name is not None:
            self.name = name

    def supports(self, problem: GemmProblem, capability: tuple[int, int]) -> bool:
        from nvatom.kernels.gemm_sm80 import IN_DTYPES, OUT_DTYPES

        return (capability >= (8, 0) and problem.in_dtype in IN_DTYPES
                and problem.out_dtype in OUT_DTYPES and problem.acc == "f32")

    def target(self, capability: tuple[int, int]) -> str:
        # A cubin runs only on its own major (sm_80 SASS does not load on sm_90), so the
        # sm_80-level kernel is assembled for the device's plain target.
        from nvatom.arch import target

        return target(f"sm_{capability[0]}{capability[1]}").name

    def plan(self, problem: GemmProblem, target: str) -> GemmLaunch:
        from nvatom.kernels import gemm_sm80 as k

        spec = k.GemmSm80Spec(problem.in_dtype, problem.out_dtype,
                              "K" if problem.a_major == "K" else "M",
                              "N" if problem.b_major == "N" else "K",
                              self.config or k.GemmSm80Config())
        source = KernelSource(repr(spec), spec.kernel_name, k.kernel_params(),
                              lambda t, s=spec: k.emit_ptx(s, t))
        return GemmLaunch(source, spec.grid(problem.m, problem.n), spec.block(),
                          spec.config.smem_bytes(), None, self.name)


PROVIDERS: list[GemmProvider] = [Sm80Provider()]
_plugins_loaded = False
#: (problem, capability, providers) -> (launch plan, target): gemm() plans a shape once.
_plans: dict[tuple[Any, ...], tuple[GemmLaunch, str]] = {}


def register_provider(provider: GemmProvider, *, first: bool = True) -> None:
    """Add a provider; ``first`` puts it ahead of the existing ones (more specific kernels)."""
    if any(p.name == provider.name for p in PROVIDERS):
        raise GemmError(f"a GEMM provider named '{provider.name}' is already registered")
    if first:
        PROVIDERS.insert(0, provider)
    else:
        PROVIDERS.append(provider)
    _calls.clear()  # a checked call may now dispatch elsewhere


def _load_plugins() -> None:
    global _plugins_loaded
    if _plugins_loaded:
        return
    _plugins_loaded = True
    for name in PLUGIN_MODULES:
        try:
            mod = importlib.import_module(name)
            factory = getattr(mod, "gemm_provider", None)
            provider = factory() if factory is not None else None
        except Exception as e:  # a broken plug-in must not take the other kernels down
            if not (isinstance(e, ImportError) and e.name == name):
                warnings.warn(f"GEMM plug-in {name} not loaded: {type(e).__name__}: {e}",
                              RuntimeWarning, stacklevel=3)
            continue
        if provider is not None and not any(p.name == provider.name for p in PROVIDERS):
            register_provider(provider)


def plan(problem: GemmProblem, capability: tuple[int, int],
         providers: Sequence[GemmProvider] | None = None) -> tuple[GemmLaunch, str]:
    """The launch plan and target of the first provider that supports ``problem`` (memoized
    when ``providers`` is the registered list)."""
    if providers is None:
        _load_plugins()
        key = (problem, tuple(capability), tuple(id(p) for p in PROVIDERS))
        hit = _plans.get(key)
        if hit is None:
            hit = _plans[key] = plan(problem, capability, PROVIDERS)
        return hit
    for p in providers:
        if p.supports(problem, capability):
            target = p.target(capability)
            return p.plan(problem, target), target
    cc = f"{capability[0]}.{capability[1]}"
    raise GemmError(
        f"no nvatom GEMM kernel for {problem.in_dtype} x {problem.in_dtype} -> "
        f"{problem.out_dtype} (acc {problem.acc}) on compute capability {cc} "
        f"(providers: {', '.join(p.name for p in providers)})")


def check_operands(a: Any, b: Any, out: Any = None, *, acc: str = "f32"
                   ) -> tuple[TensorInfo, TensorInfo, TensorInfo | None, GemmProblem]:
    """Validate ``a @ b`` (and ``out``); raises :class:`TensorArgumentError` / :class:`GemmError`
    naming the offending argument.  Needs no GPU (duck-typed tensors suffice)."""
    if acc not in ACC_TYPES:
        raise GemmError(f"acc='{acc}': the accumulator type is one of {', '.join(ACC_TYPES)}")
    from nvatom.kernels.gemm_sm80 import IN_DTYPES, OUT_DTYPES

    ai = check_matrix(a, "a", dtypes=IN_DTYPES, majors=("row", "col"))
    bi = check_matrix(b, "b", dtypes=IN_DTYPES, majors=("row", "col"), device=ai.device)
    if ai.dtype != bi.dtype:
        raise TensorArgumentError(f"a is {ai.dtype} but b is {bi.dtype}; the operands must "
                                  "have one element type")
    (m, ka), (kb, n) = ai.shape, bi.shape
    if ka != kb:
        raise GemmError(f"shapes do not chain: a is {m}x{ka}, b is {kb}x{n} ({ka} != {kb})")
    if n % 2:
        raise GemmError(f"N = {n} is odd: the kernels store output columns in pairs; pad b to "
                        f"{n + 1} columns")
    oi = None
    out_dtype = ai.dtype
    if out is not None:
        oi = check_matrix(out, "out", dtypes=OUT_DTYPES, majors=("row",), align_bytes=4,
                          device=ai.device)
        if oi.shape != (m, n):
            raise GemmError(f"out has shape {oi.shape}, the product is {m}x{n}")
        _check_out_pairs(oi)
        out_dtype = oi.dtype
    problem = GemmProblem(m, n, ka, ai.dtype, out_dtype,
                          "K" if ai.major == "row" else "M", "N" if bi.major == "row" else "K",
                          acc)
    return ai, bi, oi, problem


def _check_out_pairs(oi: TensorInfo) -> None:
    """Column pairs are stored as one 4-byte (16-bit D) or 8-byte (f32 D) access."""
    pair = 2 * oi.element_bytes
    if oi.shape[0] > 1 and oi.ld % 2:
        raise TensorArgumentError(f"out's row stride {oi.ld} is odd; the kernels store column "
                                  "pairs")
    if oi.ptr % pair:
        raise TensorArgumentError(f"out's data pointer 0x{oi.ptr:x} is not {pair}-byte aligned")


def gemm(a: Any, b: Any, out: Any = None, *, acc: str = "f32", provider: str | None = None
         ) -> Any:
    """``a @ b`` for 2-D CUDA torch tensors (bf16 or f16 operands, f32 accumulation).

    ``out``: an optional row-major (M x N) tensor of bf16, f16 or f32 to write (default: a new
    tensor of ``a``'s dtype).  Operands may be row- or column-major (``x.t()`` of a contiguous
    tensor); the leading stride must be a multiple of 16 bytes.  Runs on torch's current stream.
    ``provider``: the name of a registered provider to use instead of the first that supports
    the problem (benchmarks; :class:`GemmError` if it does not support it).

    Host cost: a call whose operands match an earlier one in everything the checks read
    (pointers, shapes, strides, dtypes, devices; ``out`` given) skips the checks and goes
    straight to its prepared launcher and packed arguments (:data:`_calls`, bounded); any
    other call is checked, then planned (memoized per problem and device), its launcher
    prepared (per plan) and its arguments packed with their encoded tensor maps (bounded LRU
    per pointers and strides); then one ``cuLaunchKernelEx``.
    """
    import torch

    key: tuple[Any, ...] | None = None
    if out is not None:
        try:
            key = (a.data_ptr(), b.data_ptr(), out.data_ptr(), a.shape, b.shape, out.shape,
                   a.stride(), b.stride(), out.stride(), a.dtype, b.dtype, out.dtype,
                   a.device, b.device, out.device, acc, provider)
            hit = _calls.get(key)
        except Exception:  # not tensors, or unhashable: the checks below say what is wrong
            key = hit = None
        if hit is not None:
            hit[0](hit[1], torch.cuda.current_stream(hit[2]).cuda_stream)
            return out
    ai, bi, oi, problem = check_operands(a, b, out, acc=acc)
    if out is None:
        out = torch.empty((problem.m, problem.n), dtype=a.dtype, device=a.device)
        oi = check_matrix(out, "out", dtypes=(ai.dtype,), align_bytes=4)
    assert oi is not None
    if problem.m == 0 or problem.n == 0:
        return out
    if problem.k == 0:
        out.zero_()
        return out
    dev = ai.device
    cap = _capabilities.get(dev)
    if cap is None:
        cap = _capabilities[dev] = tuple(torch.cuda.get_device_capability(dev))
    if provider is None:
        launch, target = plan(problem, cap)  # type: ignore[arg-type]
    else:
        launch, target = _plan_with(problem, cap, provider)  # type: ignore[arg-type]
    run = _launchers.get((id(launch), dev))
    if run is None or run[0] is not launch:
        kernel = get_kernel(launch.source, target, device=dev)
        run = (launch, kernel.launcher(launch.grid, launch.block, shmem=launch.shmem,
                                       cluster=launch.cluster))
        _launchers[(id(launch), dev)] = run
    params = launch.packed(ai, bi, oi, problem)
    run[1](params, torch.cuda.current_stream(dev).cuda_stream)
    if key is not None:
        if len(_calls) >= _MAX_CALLS:
            del _calls[next(iter(_calls))]  # the oldest entry
        _calls[key] = (run[1], params, dev)
    return out


def _plan_with(problem: GemmProblem, capability: tuple[int, int],
               name: str) -> tuple[GemmLaunch, str]:
    key = (problem, capability, name)
    hit = _named_plans.get(key)
    if hit is not None:
        return hit
    _load_plugins()
    chosen = [p for p in PROVIDERS if p.name == name]
    if not chosen:
        raise GemmError(f"no GEMM provider named '{name}' (registered: "
                        f"{', '.join(p.name for p in PROVIDERS)})")
    hit = _named_plans[key] = plan(problem, capability, chosen)
    return hit


_named_plans: dict[tuple[Any, ...], tuple[GemmLaunch, str]] = {}
#: checked calls: (pointers, shapes, strides, dtypes, devices, acc, provider) -> (launcher,
#: packed arguments, device); at most _MAX_CALLS, oldest dropped first.
_calls: dict[tuple[Any, ...], tuple[Any, PackedParams, int]] = {}
_MAX_CALLS = 256
#: device index -> compute capability (asked of torch once).
_capabilities: dict[int, tuple[int, ...]] = {}
#: (id of a memoized plan, device) -> (the plan, its prepared Launcher).
_launchers: dict[tuple[int, int], tuple[GemmLaunch, Any]] = {}
