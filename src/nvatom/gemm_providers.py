"""The GEMM providers of :func:`nvatom.gemm`: one per kernel family of :mod:`nvatom.kernels`.

:class:`Sm90Provider` runs :mod:`nvatom.kernels.sm90` (TMA + WGMMA, compute capability
9.0) and :class:`Sm80Provider` runs :mod:`nvatom.kernels.gemm_sm80` (cp.async + ldmatrix +
mma.sync, compute capability 8.0 and newer).  :data:`PROVIDERS` lists them in dispatch order;
:mod:`nvatom.gemm` imports this module directly (no plug-in loading), and the types both share
come from :mod:`nvatom.runtime.gemm_plan`, below both.

:func:`prepare_gemm_sm90` / :func:`run_gemm_sm90` run the SM90 kernel directly on torch
tensors for one :class:`~nvatom.kernels.sm90.config.GemmSm90Config` (benchmarks, tuning, FP8
checks) through the driver launcher of :mod:`nvatom.runtime.driver_launch`.
"""

from __future__ import annotations

import ctypes
import dataclasses
import functools
import math
from collections.abc import Sequence
from typing import Any

from nvatom.arch import target as arch_target
from nvatom.descriptors.tma import MAX_GLOBAL_STRIDE
from nvatom.errors import NvatomError, f32_number, shown
from nvatom.kernels import gemm_sm80 as sm80
from nvatom.kernels.sm90.config import (
    FP8_DTYPES,
    IN_DTYPES,
    OUT_DTYPES,
    SCALE_BLOCK,
    GemmSm90Config,
    GemmSm90Error,
    b_major_of,
)
from nvatom.kernels.sm90.gemm import build_gemm_sm90
from nvatom.kernels.sm90.group_table import ENTRY_BYTES, GroupTableSpec
from nvatom.kernels.sm90.launch import (
    MAX_TILES,
    check_problem,
    default_config,
    gemm_sm90_launch_spec,
    kernel_params,
)
from nvatom.kernels.sm90.tuning import SCHEDULE_TILES, grouped_schedule, rule_settings, size_rule
from nvatom.runtime.driver_launch import load_function, prepare_driver_launch
from nvatom.runtime.gemm_plan import (
    MAX_GRID_X,
    SCALED_DTYPES,
    GemmLaunch,
    GemmProblem,
    OperandRule,
    capability_text,
    default_operand_rules,
)
from nvatom.runtime.gemm_recipe import _encode_tiled, evaluate_maps
from nvatom.runtime.launch import (
    ByValue,
    KernelSource,
    TensorMapCache,
    build_cubin,
    kernel_disk_key,
)
from nvatom.runtime.ptxas import assemble
from nvatom.runtime.torch_interop import TORCH_DTYPES, torch_dtype

__all__ = ["PROVIDERS", "TENSOR_MAPS", "GroupedDevicePlan", "GroupedPlan", "Sm80Provider",
           "Sm90Provider", "grouped_config", "grouped_device_plan", "grouped_plan",
           "prepare_gemm_sm90", "run_gemm_sm90", "symbolic_maps"]

#: Encoded tensor maps of the SM90 provider path (the driver's ``cuTensorMapEncodeTiled``
#: through :meth:`nvatom.descriptors.tma.TensorMap.encode_with_driver`), keyed by the whole
#: :class:`~nvatom.descriptors.tma.TensorMap`; at most 512 kept.
TENSOR_MAPS = TensorMapCache(512)


class Sm80Provider:
    """cp.async + ldmatrix + mma.sync (:mod:`nvatom.kernels.gemm_sm80`), compute capability 8.0+."""

    name = "sm80"

    def __init__(self, config: Any = None, name: str | None = None) -> None:
        """``config``: a :class:`nvatom.kernels.gemm_sm80.GemmSm80Config` (default tiling)."""
        self.config = config
        if name is not None:
            self.name = name

    def supports(self, problem: GemmProblem, capability: tuple[int, int]) -> bool:
        return self.reject(problem, capability) is None

    def reject(self, problem: GemmProblem, capability: tuple[int, int]) -> str | None:
        if problem.in_dtype in SCALED_DTYPES:
            return (f"the SM80 kernel (mma.sync) has no FP8 path: {problem.in_dtype} GEMMs "
                    "run on the SM90 kernel only (compute capability 9.0)")
        if tuple(capability) < (8, 0):
            return f"needs compute capability 8.0 or newer, got {capability_text(capability)}"
        if problem.in_dtype not in sm80.IN_DTYPES or problem.out_dtype not in sm80.OUT_DTYPES:
            return (f"takes {'/'.join(sm80.IN_DTYPES)} operands and "
                    f"{'/'.join(sm80.OUT_DTYPES)} output, "
                    f"not {problem.in_dtype} -> {problem.out_dtype}")
        if problem.acc != "f32":
            return f"accumulates in f32, not {problem.acc}"
        spec = self._spec(problem)
        ctas = spec.grid(problem.m, problem.n)[0]
        if ctas > MAX_GRID_X:
            c = spec.config
            return (f"M x N = {problem.m} x {problem.n} needs {ctas} CTAs of {c.bm} x {c.bn}, "
                    f"more than the launch grid takes (gridDim.x <= {MAX_GRID_X} = 2^31 - 1)")
        return None

    def operand_rules(self, problem: GemmProblem) -> dict[str, OperandRule]:
        return default_operand_rules(problem)

    def _spec(self, problem: GemmProblem) -> Any:
        return sm80.GemmSm80Spec(problem.in_dtype, problem.out_dtype,
                              "K" if problem.a_major == "K" else "M",
                              "N" if problem.b_major == "N" else "K",
                              self.config or sm80.GemmSm80Config())

    def target(self, capability: tuple[int, int]) -> str:
        # A cubin runs only on its own major (sm_80 SASS does not load on sm_90), so the
        # sm_80-level kernel is assembled for the device's plain target.
        return arch_target(f"sm_{capability[0]}{capability[1]}").name

    def plan(self, problem: GemmProblem, target: str) -> GemmLaunch:
        spec = self._spec(problem)
        source = KernelSource(repr(spec), spec.kernel_name, sm80.kernel_params(),
                              lambda t, s=spec: sm80.emit_ptx(s, t))
        return GemmLaunch(source, spec.grid(problem.m, problem.n), spec.block(),
                          spec.config.smem_bytes(), None, self.name)


class Sm90Provider:
    """The ``nvatom.gemm`` provider for sm_90 GPUs: TMA + WGMMA (:mod:`nvatom.kernels.sm90`).

    Takes row-major A (``a_major`` "K"), B either way, bf16/f16 in, bf16/f16/f32 out, or
    FP8 in (e4m3 or e5m2 on either side) with a column-major B and bf16 out (per-tensor or
    row-wise scales; the promoted main loop unless ``fast_accum``), on compute capability 9.0,
    when TMA's 16-byte pitch rule holds for K and N (else the next provider, the SM80 kernel,
    runs).  Kernel arguments: three tensor maps from the operands' pointers and leading
    dimensions, then M, N, K (then the scales' addresses for FP8).  The maps are encoded
    once per distinct map (:data:`TENSOR_MAPS`, a bounded LRU keyed by the whole map) and the
    packed argument block once per (pointers, leading dimensions, shape, scale addresses)
    (``GemmLaunch.packed``), so a repeated call costs no encoding."""

    name = "sm90"

    def __init__(self, config: GemmSm90Config | None = None,
                 epilogue: Any = None) -> None:
        """``epilogue``: a :class:`nvatom.kernels.sm90.fusion.EpilogueSpec` fused into every
        kernel this provider plans (``nvatom.gemm``'s bias, activation, alpha/beta/c and
        residual arguments), or None."""
        self.config = config
        self.epilogue = epilogue

    def _config(self, problem: Any, sms: int = 132) -> GemmSm90Config:
        """:meth:`_plain_config` with the provider's fused epilogue.  A ping-pong tile wider
        than 128 columns keeps 192 accumulator registers a thread live in its first half's
        epilogue, which leaves some epilogues too few registers: where ptxas spills that
        kernel (:func:`_spills`), a fused problem takes the 128 x 128 ping-pong tile."""
        cfg = self._plain_config(problem, sms)
        if self.epilogue is None:
            return cfg
        cfg = dataclasses.replace(cfg, epilogue=self.epilogue)
        if cfg.pingpong and cfg.block_n > 128 and self.config is None and _spills(cfg):
            cfg = dataclasses.replace(cfg, **SCHEDULE_TILES["pingpong"])
        return cfg

    def _plain_config(self, problem: Any, sms: int = 132) -> GemmSm90Config:
        """The kernel for ``problem``: the provider's ``config`` made to the problem's types,
        else ``default_config`` (promoted FP8: the tile chosen by wave count for M, N on
        ``sms`` multiprocessors)."""
        major = "MN" if problem.b_major == "N" else "K"
        fp8 = problem.in_dtype in FP8_DTYPES
        b_dtype = getattr(problem, "b_dtype", "")
        b_dtype = "" if b_dtype == problem.in_dtype else b_dtype
        scale_mode = getattr(problem, "scale_mode", "") or "tensor"
        fast = bool(getattr(problem, "fast_accum", False))
        if self.config is not None:
            extra: dict[str, Any] = {}
            if fp8:
                extra = dict(b_dtype=b_dtype, scale_mode=scale_mode)
                if fast:
                    extra.update(promote=0, promote_pipelined=False)
            return dataclasses.replace(self.config, in_dtype=problem.in_dtype,
                                       out_dtype=problem.out_dtype, b_major=major, **extra)
        if not fp8:  # the schedule by wave count (tuning.plain_schedule)
            return default_config(problem.in_dtype, problem.out_dtype, major,
                                  m=problem.m, n=problem.n, sms=sms)
        return default_config(problem.in_dtype, problem.out_dtype, major,
                              b_dtype=b_dtype, fast_accum=fast, scale_mode=scale_mode,
                              m=problem.m, n=problem.n, sms=sms)

    def _tile_rule(self, problem: Any, cfg: GemmSm90Config) -> dict[str, Any] | None:
        """The size rule that chose ``cfg``'s tile (a recipe then serves only the sizes
        for which the rule picks that tile), or None: 16-bit, the schedule by shape; promoted
        FP8 (per-tensor or row-wise scales), the tile by wave count."""
        return None if self.config is not None else size_rule(cfg)

    def supports(self, problem: Any, capability: tuple[int, int]) -> bool:
        return self.reject(problem, capability) is None

    def reject(self, problem: Any, capability: tuple[int, int]) -> str | None:
        """Why this provider cannot run ``problem`` (None: it can)."""
        if tuple(capability) != (9, 0):
            cc = f"{capability[0]}.{capability[1]}"
            return f"needs compute capability 9.0 (sm_90a; WGMMA and TMA), got {cc}"
        if problem.acc != "f32":
            return f"accumulates in f32, not {problem.acc}"
        if problem.a_major != "K":
            return "needs a row-major (K-major) a"
        if problem.in_dtype not in IN_DTYPES or problem.out_dtype not in OUT_DTYPES:
            return f"no kernel for {problem.in_dtype} -> {problem.out_dtype}"
        b_dtype = getattr(problem, "b_dtype", "") or problem.in_dtype
        if b_dtype != problem.in_dtype and not (problem.in_dtype in FP8_DTYPES
                                                and b_dtype in FP8_DTYPES):
            return f"no kernel for {problem.in_dtype} x {b_dtype}"
        try:
            check_problem(self._config(problem), problem.m, problem.n, problem.k)
        except GemmSm90Error as e:
            return str(e)
        return None

    def operand_rules(self, problem: Any) -> dict[str, Any]:
        """TMA's rules for every operand (``cuTensorMapEncodeTiled``, :mod:`nvatom.descriptors.
        tma`): 16-byte aligned global address, row pitch a multiple of 16 bytes below 2^40,
        rows that do not overlap (the pitch covers the row).  ``nvatom.gemm`` stages an
        operand that breaks one through an aligned copy."""
        tma = OperandRule(16, 16, "TMA: 16-byte aligned global address and row pitch",
                          max_pitch=MAX_GLOBAL_STRIDE, no_overlap=True)
        return {"a": tma, "b": tma, "out": tma}

    def target(self, capability: tuple[int, int]) -> str:
        return "sm_90a"

    def plan(self, problem: Any, target: str) -> Any:
        sms = 132
        try:
            import torch

            sms = torch.cuda.get_device_properties(torch.cuda.current_device()) \
                .multi_processor_count
        except Exception:  # no torch / no GPU: plan with the H100/H200 count
            pass
        cfg = self._config(problem, sms)
        tile_rule = self._tile_rule(problem, cfg)
        spec = gemm_sm90_launch_spec(cfg, problem.m, problem.n, problem.k, num_sms=sms)
        source = KernelSource(repr(cfg), cfg.name, kernel_params(cfg),
                              lambda t, c=cfg: build_gemm_sm90(c, t).emit())

        epi = tuple(f"epi:{name}" for name, _ in cfg.epilogue.params) if cfg.epilogue else ()
        arg_names = _ARGS + (_SCALE_ARGS if cfg.fp8 else ()) + epi
        provider = self.name

        @dataclasses.dataclass(frozen=True)
        class Sm90Launch(GemmLaunch):
            def args(self, a: Any, b: Any, d: Any, p: Any,
                     scales: tuple[Any, ...] | None = None) -> list[Any]:
                """The kernel's arguments; ``scales``: those after M, N, K (the FP8 scales'
                addresses, then a fused epilogue's values in its ``params`` order)."""
                s = gemm_sm90_launch_spec(cfg, p.m, p.n, p.k, a.ptr, b.ptr, d.ptr, sms,
                                          lda=a.ld, ldb=b.ld, ldd=d.ld)
                if cfg.fp8 and scales is None:
                    raise GemmSm90Error("an FP8 launch needs the scale_a, scale_b addresses")
                if (cfg.fp8 or epi) and (scales is None
                                         or len(scales) != len(arg_names) - len(_ARGS)):
                    raise GemmSm90Error(
                        f"this launch takes {', '.join(arg_names[len(_ARGS):])} after M, N, "
                        f"K, got {scales!r}")
                sizes = {"m": p.m, "n": p.n, "k": p.k}
                out: list[Any] = []
                for item in arg_names:
                    if item.startswith("map:"):
                        out.append(ByValue(TENSOR_MAPS.get(s.tensor_maps[int(item[4:])])))
                    elif item in _SCALE_ARGS or item in epi:
                        out.append(scales[arg_names.index(item) - len(_ARGS)])  # type: ignore[index]
                    else:
                        out.append(sizes[item])
                return out

            def recipe(self, a: Any, b: Any, d: Any, p: Any) -> dict[str, Any] | None:
                """This launch as data (:mod:`nvatom.runtime.gemm_recipe`) for any sizes of
                the problem class, or None when the symbolic maps do not reproduce the
                spec at ``p``'s sizes and ``a``, ``b``, ``d``'s leading dimensions."""
                return _sm90_recipe(cfg, sms, self, arg_names, provider, a, b, d, p,
                                    tile_rule)

        cluster = spec.cluster if cfg.cluster_m > 1 else None
        return Sm90Launch(source, spec.grid, spec.block, spec.smem_bytes, cluster, self.name)


@functools.cache
def _spills(cfg: GemmSm90Config) -> bool:
    """Whether ptxas spills registers (or uses a stack frame) assembling ``cfg`` for sm_90a
    (the cubin is the one the launch then loads: ptxas results are cached); True where
    ptxas fails or cannot be run, so the caller takes its safe choice."""
    try:
        k = assemble(build_gemm_sm90(cfg).emit(), "sm_90a").kernels[cfg.name]
    except Exception:  # no ptxas here, or it refused: not this tile
        return True
    return bool(k.spill_stores or k.spill_loads or k.stack_frame)


#: The SM90 kernel's arguments by name: the three tensor maps (A, B, D) of its launch spec,
#: then M, N, K (then the FP8 scales' addresses): one list for the launch and its recipe.
_ARGS = ("map:0", "map:1", "map:2", "m", "n", "k")
_SCALE_ARGS = ("scale_a", "scale_b")
#: Probe values of the recipe's symbols: pairwise distinct, and far from every constant of a
#: tensor map (boxes, element strides, codes), so a dimension or stride equal to one of them
#: is that symbol.  Sizes and pitches meet TMA's 16-byte rule for every element width.
_PROBE = {"m": 700_001, "n": 16 * 52_433, "k": 16 * 40_961, "a": 1 << 40, "b": 2 << 40,
          "out": 3 << 40}
_PROBE_PAD = {"lda": 16 * 7, "ldb": 16 * 11, "ldd": 16 * 13}


def _symbolic(value: int, env: dict[str, int], names: Sequence[str],
              factors: Sequence[int] = (1,)) -> Any:
    for name in names:
        for f in factors:
            if value == env[name] * f:
                return {"sym": name, "times": f} if f != 1 else {"sym": name}
    return value


def symbolic_maps(cfg: Any, sms: int = 132) -> list[dict[str, Any]] | None:
    """The three tensor maps (A, B, D) of ``cfg``'s launch spec with each address, dimension
    and stride replaced by the symbol it equals (``a``/``b``/``out``; ``m``, ``n``, ``k``;
    ``lda``, ``ldb``, ``ldd`` times the element size), found by evaluating the spec at probe
    sizes (:data:`_PROBE`); :func:`nvatom.runtime.gemm_recipe.evaluate_maps` gives the driver
    arguments for real ones.  None when a map is not tiled or an address is not an
    operand's."""
    env = dict(_PROBE)
    env["lda"] = env["k"] + _PROBE_PAD["lda"]
    env["ldb"] = env["k" if cfg.b_major == "K" else "n"] + _PROBE_PAD["ldb"]
    env["ldd"] = env["n"] + _PROBE_PAD["ldd"]
    spec = gemm_sm90_launch_spec(cfg, env["m"], env["n"], env["k"], env["a"], env["b"],
                                 env["out"], sms, lda=env["lda"], ldb=env["ldb"],
                                 ldd=env["ldd"])
    maps = []
    for tm in spec.tensor_maps:
        args = tm.driver_args()
        if tm.kind != "tiled":
            return None
        operand = _symbolic(args.pop("globalAddress"), env, ("a", "b", "out"))
        if not isinstance(operand, dict):
            return None
        dims = [_symbolic(v, env, ("m", "n", "k")) for v in args.pop("globalDim")]
        strides = [_symbolic(v, env, ("lda", "ldb", "ldd"), (1, 2, 4))
                   for v in args.pop("globalStrides")]
        maps.append({"operand": operand["sym"], "dims": dims, "strides": strides,
                     "fixed": {k: list(v) if isinstance(v, tuple) else v
                               for k, v in args.items()}})
    return maps


def _sm90_recipe(cfg: Any, sms: int, launch: GemmLaunch, arg_names: Sequence[str],
                 provider: str, a: Any, b: Any, d: Any, p: Any,
                 tile_rule: dict[str, Any] | None = None) -> dict[str, Any] | None:
    """The recipe of an SM90 launch: the tensor maps of the launch spec at probe sizes
    (:data:`_PROBE`), each dimension and stride replaced by the symbol it equals, checked
    against the spec at the call's own sizes.  ``tile_rule``: the size rule that chose the
    tile (``accepts["tile_rule"]``: the recipe serves only sizes it picks this tile for)."""

    maps = symbolic_maps(cfg, sms)
    if maps is None:
        return None
    real = gemm_sm90_launch_spec(cfg, p.m, p.n, p.k, a.ptr, b.ptr, d.ptr, sms,
                                 lda=a.ld, ldb=b.ld, ldd=d.ld)
    got = evaluate_maps(maps, {"m": p.m, "n": p.n, "k": p.k, "lda": a.ld, "ldb": b.ld,
                               "ldd": d.ld, "a": a.ptr, "b": b.ptr, "out": d.ptr})
    want = [tm.driver_args() for tm in real.tensor_maps]
    if [{k: tuple(v) if isinstance(v, list) else v for k, v in g.items()} for g in got] != \
            [{k: tuple(v) if isinstance(v, list) else v for k, v in w.items()} for w in want]:
        return None
    if tuple(real.grid) != tuple(launch.grid):
        return None
    rec = _recipe_body(cfg, sms, maps, arg_names, provider, launch.block, launch.shmem,
                       launch.cluster, tile_rule)
    if tile_rule is not None:
        rec["alternatives"] = _tile_alternatives(cfg, sms, arg_names, provider, tile_rule)
    return rec


def _recipe_body(cfg: Any, sms: int, maps: list[dict[str, Any]], arg_names: Sequence[str],
                 provider: str, block: Sequence[int], shmem: int, cluster: Any,
                 tile_rule: dict[str, Any] | None) -> dict[str, Any]:
    pitch = [["k", cfg.in_bytes]] + ([["n", cfg.in_bytes]] if cfg.b_major == "MN" else []) \
        + [["n", cfg.out_bytes]]
    accepts: dict[str, Any] = {"pitch": pitch, "max_tiles": MAX_TILES}
    if tile_rule is not None:
        accepts["tile_rule"] = tile_rule
    return {
        "provider": provider, "args": list(arg_names), "maps": maps,
        "block": list(block), "shmem": shmem,
        "cluster": None if cluster is None else list(cluster),
        "tiles": {"block_m": cfg.block_m, "block_n": cfg.block_n, "cluster_m": cfg.cluster_m,
                  "persistent": cfg.persistent, "sms": sms},
        "accepts": accepts,
    }


def _tile_alternatives(cfg: Any, sms: int, arg_names: Sequence[str], provider: str,
                       tile_rule: dict[str, Any]) -> dict[str, Any]:
    """The recipes of the size rule's other tiles (keyed by their index in the rule), each
    with its kernel assembled into the disk cache now, so that a later process launches
    every size of the class from the recipe (:class:`nvatom.runtime.gemm_recipe.
    RecipeLaunch` picks by the rule)."""

    out: dict[str, Any] = {}
    for i, choice in enumerate(rule_settings(tile_rule)):
        if i == tile_rule["pick"]:
            continue
        alt = dataclasses.replace(cfg, **choice)
        maps = symbolic_maps(alt, sms)
        if maps is None:
            continue
        src = KernelSource(repr(alt), alt.name, kernel_params(alt),
                           lambda t, c=alt: build_gemm_sm90(c, t).emit())
        build_cubin(src, "sm_90a")  # the disk entry the recipe names
        cluster = (alt.cluster_m, 1, 1) if alt.cluster_m > 1 else None
        rec = _recipe_body(alt, sms, maps, arg_names, provider, (alt.threads, 1, 1),
                           alt.smem_bytes, cluster, {**tile_rule, "pick": i})
        rec["kernel"] = {"source_key": src.key, "name": src.name,
                         "params": [list(p) for p in src.params], "target": "sm_90a",
                         "disk_key": kernel_disk_key(src, "sm_90a")}
        out[str(i)] = rec
    return out


#: Dispatch order: the SM90 kernel where it runs, else the SM80 one.
PROVIDERS: tuple[Any, ...] = (Sm90Provider(), Sm80Provider())


# ---------------------------------------------------------------------------- direct run


@functools.lru_cache(maxsize=64)
def _cubin(cfg: GemmSm90Config) -> bytes:
    return assemble(build_gemm_sm90(cfg).emit(), "sm_90a").cubin


def prepare_gemm_sm90(a: Any, b: Any, out: Any, cfg: GemmSm90Config,
                      scale_a: Any = None, scale_b: Any = None, *,
                      grid: int | None = None, epilogue_args: Sequence[Any] = ()) -> Any:
    """Check torch tensors against ``cfg`` and return a zero-argument callable that launches
    the kernel on the current stream (tensor maps encoded once, by the driver).  ``grid``
    caps the number of CTAs of a persistent launch (tuning).  ``epilogue_args``: the values
    of ``cfg.epilogue.params``, in order (a user epilogue's last): numbers for the .f32
    ones, ints for the .u32 ones, addresses (ints, or tensors: their ``data_ptr()``) for the
    .u64 ones; only their kinds are checked here (:func:`nvatom.gemm.gemm` checks shapes,
    dtypes and devices too), so a tensor a hook reads must hold a value for every row or
    column it reads."""
    import torch

    want_a, want_b = torch_dtype(cfg.in_dtype), torch_dtype(cfg.b_type)
    want_out = torch_dtype(cfg.out_dtype)
    for name, t, want in (("a", a, want_a), ("b", b, want_b), ("out", out, want_out)):
        if t.dtype != want:
            raise GemmSm90Error(f"{name} is {t.dtype}, the config wants {want}")
        if not t.is_cuda or t.dim() != 2:
            raise GemmSm90Error(f"{name} must be a 2-D CUDA tensor")
    m, k = a.shape
    k2, n = b.shape
    if k2 != k or tuple(out.shape) != (m, n):
        raise GemmSm90Error(f"shapes a {tuple(a.shape)} @ b {tuple(b.shape)} -> out "
                            f"{tuple(out.shape)} do not match")
    if a.stride() != (k, 1) or out.stride() != (n, 1):
        raise GemmSm90Error("a and out must be row-major and contiguous")
    if b_major_of(b.shape, b.stride()) != cfg.b_major:
        raise GemmSm90Error(f"b has strides {b.stride()}, the config wants a "
                            f"{cfg.b_major}-major b")
    for name, t in (("a", a), ("b", b), ("out", out)):
        if t.data_ptr() % 16:
            raise GemmSm90Error(f"{name} is not 16-byte aligned (TMA)")
    dev = a.device.index if a.device.index is not None else torch.cuda.current_device()
    props = torch.cuda.get_device_properties(dev)
    spec = gemm_sm90_launch_spec(cfg, m, n, k, a.data_ptr(), b.data_ptr(),
                                 out.data_ptr(), props.multi_processor_count)
    maps = [tm.encode_with_driver() for tm in spec.tensor_maps]
    f = load_function(cfg, lambda: _cubin(cfg), cfg.name, dev, cfg.smem_bytes,
                      cfg.cluster_m > 1)
    # kernel parameters: three 128-byte tensor maps by value, then M, N, K (u32) [, scales]
    blobs: list[Any] = [(ctypes.c_uint64 * 16).from_buffer_copy(raw) for raw in maps]
    for v in spec.scalars:
        blobs.append(ctypes.c_uint32(v))
    if cfg.fp8:
        if scale_a is None or scale_b is None:
            raise GemmSm90Error("FP8 GEMM needs scale_a and scale_b (f32 device tensors)")
        if cfg.scale_mode == "block":  # (M, Kb) row-major and (Kb, Nb) K-major, f32
            kb, nb = -(-k // SCALE_BLOCK), -(-n // SCALE_BLOCK)
            for name, t, shape, strides in (("scale_a", scale_a, (m, kb), (kb, 1)),
                                            ("scale_b", scale_b, (kb, nb), (1, kb))):
                if (t.dtype != torch.float32 or tuple(t.shape) != shape
                        or any(s != w and d > 1 for s, w, d in
                               zip(t.stride(), strides, shape, strict=True))):
                    raise GemmSm90Error(f"{name} must be float32 {shape} with strides "
                                        f"{strides} (block scales), got {t.dtype} "
                                        f"{tuple(t.shape)} {t.stride()}")
        if cfg.scale_mode == "row":  # one f32 per row of a / column of b, unit stride
            for name, t, count in (("scale_a", scale_a, m), ("scale_b", scale_b, n)):
                shape = tuple(int(x) for x in t.shape)
                if (t.dtype != torch.float32 or math.prod(shape) != count
                        or (max(shape, default=1) > 1 and
                        t.stride()[shape.index(max(shape))] != 1)):
                    raise GemmSm90Error(f"{name} must be {count} contiguous float32 "
                                        f"(row-wise scales), got {t.dtype} {shape}")
        blobs += [ctypes.c_uint64(scale_a.data_ptr()), ctypes.c_uint64(scale_b.data_ptr())]
    params = cfg.epilogue.params if cfg.epilogue is not None else ()
    epilogue_args = () if epilogue_args is None else epilogue_args
    if not isinstance(epilogue_args, (tuple, list)) or len(epilogue_args) != len(params):
        raise GemmSm90Error(f"the epilogue takes {len(params)} arguments "
                            f"({', '.join(n for n, _ in params)}), a list in that order; got "
                            f"{shown(epilogue_args)}")
    blobs += [_epilogue_blob(name, ty, v) for (name, ty), v in zip(params, epilogue_args,
                                                                 strict=True)]
    return prepare_driver_launch(
        f, spec.grid, spec.block, spec.smem_bytes, spec.cluster, blobs,
        lambda: torch.cuda.current_stream(dev).cuda_stream,
        fit_clusters=cfg.cluster_m > 1 and cfg.persistent, grid_cap=grid,
        keep=(maps, a, b, out, scale_a, scale_b, tuple(epilogue_args)))


def _epilogue_blob(name: str, ty: str, v: Any) -> Any:
    """One epilogue argument as its ctypes value: an f32 a real number, a u32 an int, a u64
    (an address) an int or a tensor (its ``data_ptr()``); anything else is refused."""
    if ty == "u64" and hasattr(v, "data_ptr"):
        v = int(v.data_ptr())
    ok = f32_number(v) is not None if ty == "f32" else (
        isinstance(v, int) and not isinstance(v, bool) and 0 <= v < 1 << (32 if ty == "u32"
                                                                          else 64))
    if not ok:
        what = "a finite float32 number" if ty == "f32" else (
            "an address (an int or a tensor)" if ty == "u64" else "a 32-bit unsigned int")
        raise GemmSm90Error(f"epilogue argument {name} (.{ty}) = {shown(v)} is not {what}")
    return {"f32": ctypes.c_float, "u32": ctypes.c_uint32, "u64": ctypes.c_uint64}[ty](v)


def run_gemm_sm90(a: Any, b: Any, out: Any, cfg: GemmSm90Config | None = None, *,
                  scale_a: Any = None, scale_b: Any = None) -> Any:
    """``out = a @ b`` (FP8: ``out = (a @ b) * scale_a * scale_b``) with torch tensors on
    an sm_90 device; ``cfg`` defaults to the tuned configuration for the dtypes."""
    if cfg is None:
        ind = TORCH_DTYPES.get(str(a.dtype).removeprefix("torch."))
        outd = TORCH_DTYPES.get(str(out.dtype).removeprefix("torch."))
        bd = TORCH_DTYPES.get(str(b.dtype).removeprefix("torch."))
        if ind not in IN_DTYPES or outd not in OUT_DTYPES:
            raise GemmSm90Error(f"no SM90 GEMM for {a.dtype} -> {out.dtype}")
        if ind in FP8_DTYPES:
            mode = "row" if scale_a is not None and scale_a.numel() > 1 else "tensor"
            cfg = default_config(ind, outd, "K", b_dtype=bd or "", scale_mode=mode)
        else:
            cfg = default_config(ind, outd, b_major_of(b.shape, b.stride()) or "MN")
    prepare_gemm_sm90(a, b, out, cfg, scale_a, scale_b)()
    return out


# ---------------------------------------------------------------------------- grouped GEMM


@dataclasses.dataclass(frozen=True)
class GroupedPlan:
    """One grouped launch: the kernel's config, the tensor-map array (G x 3 maps of 128
    bytes: A, B, D of each group; an empty group's are zero, never read), the cumulative
    tile counts (``tile_ends``) and the persistent grid."""

    cfg: Any
    maps: bytes
    tile_ends: tuple[int, ...]
    grid: int
    # FP8: the groups' cumulative row ends, after tile_ends in the kernel's buffer (the
    # kernel indexes the stacked rows' scales with them); () otherwise
    row_ends: tuple[int, ...] = ()

    def buffer(self) -> bytes:
        """The kernel's device buffer: the maps, then ``tile_ends`` (and ``row_ends``), u32."""
        return self.maps + b"".join(int(e).to_bytes(4, "little")
                                    for e in (*self.tile_ends, *self.row_ends))


_GROUPED_MAPS: dict[tuple[Any, ...], Any] = {}
#: Grouped FP8 tiles that differ from the plain default, by (scale mode, fast_accum): the
#: fast row-wise kernel's 128 x 256 tile spills (ptxas: 16 stores, 28 loads) once the group
#: walk's registers live beside its 128 accumulators, so it takes 128 x 192 (no spills).
_GROUPED_FP8_TILES: dict[tuple[str, bool], dict[str, Any]] = {("row", True): {"block_n": 192}}


def grouped_config(in_dtype: str, out_dtype: str, b_major: str, ends: Sequence[int], n: int,
                   k: int, *, config: Any = None, group_sched: str | None = None,
                   b_dtype: str = "", scale_mode: str = "tensor", fast_accum: bool = False
                   ) -> tuple[Any, Any]:
    """(the plain kernel's configuration, its grouped form) for :func:`grouped_plan` and
    :func:`grouped_device_plan` (``ends``: the groups' cumulative row ends, or an estimate of
    them where only the device knows them)."""
    if config is None and in_dtype in FP8_DTYPES:
        # block scales: the tile by wave count over all groups' rows (tuning
        # FP8_BLOCK_TILE_CHOICES; 128-row tiles: the grouped kernel's 64-row form is not
        # measured); the other modes keep the plain default's tile
        size: dict[str, Any] = ({"m": max(1, ends[-1]), "n": n, "min_block_m": 128}
                                if scale_mode == "block" and ends and not fast_accum else {})
        config = default_config(in_dtype, out_dtype, "K", b_dtype=b_dtype,
                                fast_accum=fast_accum, scale_mode=scale_mode, **size)
        config = dataclasses.replace(config, row_scale_stage=False,  # plain kernel only
                                     **_GROUPED_FP8_TILES.get((scale_mode, fast_accum), {}))
    base = config or default_config(in_dtype, out_dtype, "MN" if b_major == "N" else "K",
                                    schedule=grouped_schedule(
                                             (in_dtype, out_dtype, b_major), ends, n, k))
    cfg = dataclasses.replace(base, grouped=True)
    if group_sched is not None:
        cfg = dataclasses.replace(cfg, group_sched=group_sched)
    return base, cfg


def _grouped_symbols(base: Any, sms: int) -> Any:
    key = (base, sms)
    sym = _GROUPED_MAPS.get(key)
    if sym is None:
        sym = _GROUPED_MAPS[key] = symbolic_maps(base, sms)
    assert sym is not None
    return sym


def grouped_plan(in_dtype: str, out_dtype: str, b_major: str, ends: Sequence[int], n: int,
                 k: int, a_ptr: int, lda: int, b_ptr: int, b_group_stride: int, ldb: int,
                 d_ptr: int, ldd: int, sms: int,
                 encode: Any = None, group_sched: str | None = None,
                 config: Any = None, *, b_dtype: str = "", scale_mode: str = "tensor",
                 fast_accum: bool = False) -> GroupedPlan:
    """Plan ``nvatom.grouped_gemm``: group g is rows ``ends[g-1]..ends[g]`` of A and D
    (``ends`` cumulative, as ``torch._grouped_mm``'s ``offs``) and B's matrix g (``b_ptr +
    g * b_group_stride`` bytes).  Each group's maps are the SM90 kernel's own (its launch
    spec's maps as symbols, :func:`symbolic_maps`) at the group's base addresses and M, so
    TMA clips every load and store at the group's rows.  ``encode``: driver arguments ->
    128 bytes (default ``cuTensorMapEncodeTiled``).  ``group_sched``: the kernel's
    ``GemmSm90Config.group_sched`` (default: the config's).  ``config``: the plain
    kernel's configuration to group (default: ``default_config`` of the types; tuning, e.g.
    the ping-pong schedule).  FP8 (``in_dtype`` e4m3/e5m2, ``b_dtype`` B's where it
    differs, K-major B): the plain FP8 default of ``scale_mode`` and ``fast_accum`` (its
    128 x 192 promoted tile: no per-size choice, the groups' sizes differ)."""

    base, cfg = grouped_config(in_dtype, out_dtype, b_major, ends, n, k, config=config,
                               group_sched=group_sched, b_dtype=b_dtype,
                               scale_mode=scale_mode, fast_accum=fast_accum)
    sym = _grouped_symbols(base, sms)
    ib, ob = base.in_bytes, base.out_bytes
    tiles_n = -(-n // base.block_n)
    blob = bytearray()
    tile_ends = []
    total, start = 0, 0
    enc = encode or _encode_tiled
    for g, end in enumerate(ends):
        m = end - start
        if m > 0:
            check_problem(base, m, n, k)
            env = {"m": m, "n": n, "k": k, "lda": lda, "ldb": ldb, "ldd": ldd,
                   "a": a_ptr + start * lda * ib, "b": b_ptr + g * b_group_stride,
                   "out": d_ptr + start * ldd * ob}
            for args in evaluate_maps(sym, env):
                blob += enc(args)
            total += -(-m // base.block_m) * tiles_n
        else:
            blob += bytes(ENTRY_BYTES)
        tile_ends.append(total)
        start = end
    return GroupedPlan(cfg, bytes(blob), tuple(tile_ends), min(total, sms),
                       tuple(ends) if cfg.fp8 else ())


@dataclasses.dataclass(frozen=True)
class GroupedDevicePlan:
    """A grouped launch whose group table the GPU builds
    (:mod:`nvatom.kernels.sm90.group_table`): the GEMM's config, the table kernel's spec,
    the three template maps (A, B, D of the whole tensors, 384 bytes), ``tiles_n``, the
    persistent grid (an upper bound of the tiles, capped at the SM count: a CTA past the
    last tile exits at once) and the table buffer's size."""

    cfg: Any
    table: GroupTableSpec
    templates: bytes
    tiles_n: int
    grid: int
    buffer_bytes: int


def _m_axes(tmap: dict[str, Any], name: str) -> tuple[int, ...]:
    """The dimensions of a symbolic map whose extent is M (the group's rows)."""
    axes = tuple(i for i, d in enumerate(tmap["dims"]) if d == {"sym": "m"})
    if not axes or any(isinstance(d, dict) and d.get("sym") == "m" and d != {"sym": "m"}
                       for d in tmap["dims"]):
        raise NvatomError(f"the {name} map's dimensions {tmap['dims']} do not hold M as one "
                          "extent: its groups cannot be set on the device")
    return axes


def grouped_device_plan(in_dtype: str, out_dtype: str, b_major: str, rows: int, groups: int,
                        n: int, k: int, a_ptr: int, lda: int, b_ptr: int,
                        b_group_stride: int, ldb: int, d_ptr: int, ldd: int, sms: int, *,
                        masked: bool = False, encode: Any = None, b_dtype: str = "",
                        scale_mode: str = "tensor", fast_accum: bool = False
                        ) -> GroupedDevicePlan:
    """Plan a grouped GEMM whose offsets only the GPU knows: ``rows`` is the stacked rows'
    count (contiguous) or each group's M_max (``masked``, A and D ``(G, M_max, .)``).  The
    schedule is chosen for groups of equal size (the sizes are not known here); the
    templates are the maps of the whole A (``rows`` rows, or one group's M_max), B (matrix
    0) and D, which the table kernel re-points per group."""
    est = [(g + 1) * rows // groups for g in range(groups)] if not masked else [
        (g + 1) * rows for g in range(groups)]
    base, cfg = grouped_config(in_dtype, out_dtype, b_major, est, n, k, b_dtype=b_dtype,
                               scale_mode=scale_mode, fast_accum=fast_accum)
    sym = _grouped_symbols(base, sms)
    check_problem(base, max(rows, 1), n, k)
    env = {"m": max(rows, 1), "n": n, "k": k, "lda": lda, "ldb": ldb, "ldd": ldd,
           "a": a_ptr, "b": b_ptr, "out": d_ptr}
    enc = encode or _encode_tiled
    templates = b"".join(enc(args) for args in evaluate_maps(sym, env))
    spec = GroupTableSpec(masked=masked, block_m=base.block_m, a_m_axes=_m_axes(sym[0], "A"),
                          d_m_axes=_m_axes(sym[2], "D"), row_ends=cfg.fp8)
    tiles_n = -(-n // base.block_n)
    per_group = -(-rows // base.block_m)
    upper = (groups * per_group if masked else per_group + groups) * tiles_n
    nbytes = groups * (ENTRY_BYTES + 4 * (2 if cfg.fp8 else 1))
    return GroupedDevicePlan(cfg, spec, templates, tiles_n, max(1, min(upper, sms)), nbytes)
