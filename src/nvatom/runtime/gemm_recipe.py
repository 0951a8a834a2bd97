"""Launch recipes: ``nvatom.gemm``'s first call in a fresh process without the kernel builders.

Planning a GEMM the ordinary way imports the providers, the kernel emitters, the atoms and the
layout algebra (hundreds of milliseconds) only to learn a handful of facts: which cubin, the
launch shape, how the tensor maps are laid out and which sizes the kernel takes.  When a
provider can state those facts as data (``GemmLaunch.recipe``: the SM90 provider does),
:mod:`nvatom.gemm` writes them once per *problem class* (element types, storage orders,
accumulator, scaling mode, compute capability, SM count) next to the kernel cache
(``<cache>/gemm-recipes``, one self-checking entry each, :func:`nvatom.runtime.ptxas.
write_entry`).  A later process reads the recipe back and launches from it with this module
alone: :class:`RecipeLaunch` loads the cubin straight from its disk entry
(:func:`nvatom.runtime.launch.load_cached_kernel`), evaluates the grid and the tensor maps for
the call's M, N, K and leading dimensions, and encodes the maps with the driver
(``cuTensorMapEncodeTiled``).

A recipe is keyed by a fingerprint of everything it was derived from (nvatom's PTX rooms, as
the kernel cache, plus the GEMM dispatch modules and this one) and by the ptxas builds on the
machine, so an edited provider or kernel never launches from a stale recipe.  What a recipe
states (shape-independent; the symbols are ``m``, ``n``, ``k``, ``lda``, ``ldb``, ``ldd``):

* ``kernel``: source key, entry name, parameters, target and the cubin's disk-cache key;
* ``block``, ``shmem``, ``cluster``; ``tiles``: block_m, block_n, cluster_m, persistent and the
  SM count the grid is sized by;
* ``accepts``: the sizes the provider takes: ``pitch`` rules (``symbol * bytes`` a multiple of
  16), the largest tile count and, where the provider chose the tile by a size rule (promoted
  FP8: the tile by wave count; 16-bit: the consumer schedule by wave count, ``"kind":
  "schedule"``), that ``tile_rule``: the recipe's kernel serves the sizes it picks the same
  tile for,
  and ``alternatives`` holds the recipes of the rule's other tiles (their cubins assembled
  into the kernel cache when the recipe is written), which :class:`RecipeLaunch` takes for
  the sizes the rule gives them;
* ``rules``: the provider's :class:`~nvatom.runtime.gemm_plan.OperandRule` per operand (an
  operand that breaks one takes the ordinary path, which stages it);
* ``maps``: per tensor map, the driver's arguments with the address, dimensions and strides as
  symbols (``{"sym": "k"}``, ``{"sym": "lda", "times": 2}``) or constants;
* ``args``: the kernel's argument list as ``map:i``, a size symbol or ``scale_a``/``scale_b``.

The provider derives the symbolic maps from its own launch spec and checks them against the
spec at the recording shape; ``tests/runtime/test_gemm_recipe.py`` checks them (and the grid
and ``accepts``) against the spec on random shapes.
"""

from __future__ import annotations

import ctypes
import hashlib
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from nvatom.runtime import ptxas
from nvatom.runtime.gemm_plan import rule_pick
from nvatom.runtime.launch import (
    ByValue,
    KernelSource,
    LaunchError,
    LruCache,
    PackedParams,
    _code_fingerprint,
    kernel_cache_dir,
    load_cached_kernel,
)

__all__ = ["RECIPE_FORMAT", "RecipeLaunch", "evaluate_maps", "load_recipe", "recipe_accepts",
           "recipe_grid", "recipe_key", "save_recipe"]

#: Bump when what a recipe holds or means changes.
RECIPE_FORMAT = 4  # 2: promoted FP8 tile_rule and alternatives; 3: 16-bit schedule rule;
# 4: the 16-bit schedule by wave count (three schedules)
#: The modules besides the PTX rooms a recipe is derived from (relative to ``nvatom/``).
_DISPATCH_FILES = ("gemm.py", "gemm_providers.py", "runtime/gemm_plan.py",
                   "runtime/gemm_recipe.py", "runtime/launch.py")
_fingerprints: list[str] = []


def _fingerprint() -> str:
    """The kernel cache's code fingerprint plus the dispatch modules' source (once per
    process)."""
    if not _fingerprints:
        root = Path(__file__).resolve().parents[1]
        h = hashlib.sha256(_code_fingerprint().encode())
        for f in _DISPATCH_FILES:
            try:
                h.update(f.encode() + b"\0" + (root / f).read_bytes())
            except OSError:
                h.update(f.encode() + b"\0missing")
        _fingerprints.append(h.hexdigest()[:16])
    return _fingerprints[0]


def recipe_key(problem_class: Sequence[Any], capability: Sequence[int], sms: int) -> str:
    """The recipe's key: the problem class (every field of the problem but its sizes), the
    GPU (capability, SM count), the code fingerprint and the ptxas builds found here."""
    builds = ",".join(f"{t.path}={t.build}" for t in ptxas.discover())
    text = json.dumps([RECIPE_FORMAT, _fingerprint(), builds, list(problem_class),
                       list(capability), int(sms)])
    return hashlib.sha256(text.encode()).hexdigest()


def _path(key: str) -> Path | None:
    d = kernel_cache_dir()
    return None if d is None else d.parent / "gemm-recipes" / key[:2] / f"{key}.entry"


def load_recipe(key: str) -> dict[str, Any] | None:
    """The recipe stored under ``key``, or None (absent, or failed its checks)."""
    path = _path(key)
    got = None if path is None else ptxas.read_entry(path, key)
    if got is None or got[0].get("format") != RECIPE_FORMAT:
        return None
    return got[0]


def save_recipe(key: str, recipe: dict[str, Any]) -> None:
    """Store ``recipe`` under ``key`` (atomically; a read-only or full disk only costs
    speed)."""
    path = _path(key)
    if path is None:
        return
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        ptxas.write_entry(path, {**recipe, "key": key, "format": RECIPE_FORMAT})
    except OSError:
        pass


def _value(entry: Any, env: dict[str, int]) -> int:
    """A template entry: a constant, or ``{"sym": name, "times": factor}``."""
    if isinstance(entry, dict):
        return env[entry["sym"]] * int(entry.get("times", 1))
    return int(entry)


def evaluate_maps(maps: Sequence[dict[str, Any]], env: dict[str, int]) -> list[dict[str, Any]]:
    """The driver arguments of each symbolic map (``maps`` of a recipe) for the symbol values
    ``env`` (``m``, ``n``, ``k``, ``lda``, ``ldb``, ``ldd`` and the operands' addresses
    ``a``, ``b``, ``out``)."""
    out = []
    for tm in maps:
        args = dict(tm["fixed"])
        args["globalAddress"] = env[tm["operand"]]
        args["globalDim"] = tuple(_value(e, env) for e in tm["dims"])
        args["globalStrides"] = tuple(_value(e, env) for e in tm["strides"])
        for name in ("boxDim", "elementStrides"):
            args[name] = tuple(args[name])
        out.append(args)
    return out


def _encode_tiled(args: dict[str, Any]) -> bytes:
    """``cuTensorMapEncodeTiled`` with driver arguments as :func:`evaluate_maps` gives them
    (the caller's context is current: the operands live on it)."""

    from cuda.bindings import driver as cu

    u64, u32 = cu.cuuint64_t, cu.cuuint32_t
    err, tm = cu.cuTensorMapEncodeTiled(
        cu.CUtensorMapDataType(args["tensorDataType"]), u32(args["tensorRank"]),
        args["globalAddress"], [u64(d) for d in args["globalDim"]],
        [u64(s) for s in args["globalStrides"]] or [u64(0)],
        [u32(b) for b in args["boxDim"]], [u32(e) for e in args["elementStrides"]],
        cu.CUtensorMapInterleave(args["interleave"]), cu.CUtensorMapSwizzle(args["swizzle"]),
        cu.CUtensorMapL2promotion(args["l2Promotion"]),
        cu.CUtensorMapFloatOOBfill(args["oobFill"]))
    if int(err):
        raise LaunchError(f"cuTensorMapEncodeTiled refused the map {args}: {err.name}")
    return ctypes.string_at(tm.getPtr(), 128)


def _tiles(recipe: dict[str, Any], m: int, n: int) -> int:
    t = recipe["tiles"]
    tm = -(-m // int(t["block_m"]))
    if int(t["cluster_m"]) == 2:
        tm += tm % 2
    return tm * -(-n // int(t["block_n"]))


def recipe_accepts(recipe: dict[str, Any], m: int, n: int, k: int) -> bool:
    """Whether the recipe's kernel takes an M x N x K problem: each size in 1..2^31 - 1,
    each ``pitch`` rule's row (``symbol * bytes``) a multiple of 16 bytes, at most
    ``max_tiles`` output tiles, and, with a ``tile_rule`` (promoted FP8: the tile chosen by
    wave count; 16-bit: the schedule by shape), only sizes for which the rule picks the
    recipe's tile."""
    env = {"m": m, "n": n, "k": k}
    if min(m, n, k) < 1 or max(m, n, k) >= 1 << 31:
        return False
    if any((env[s] * int(b)) % 16 for s, b in recipe["accepts"]["pitch"]):
        return False
    rule = recipe["accepts"].get("tile_rule")
    if rule is not None and rule_pick(rule, m, n, k,
                                      int(recipe["tiles"]["sms"])) != int(rule["pick"]):
        return False  # the provider picks another tile for these sizes: plan them
    return _tiles(recipe, m, n) <= int(recipe["accepts"]["max_tiles"])


def recipe_grid(recipe: dict[str, Any], m: int, n: int) -> tuple[int, int, int]:
    """The launch grid: one CTA per output tile (M padded to whole clusters), at most the
    SM count (whole clusters) when persistent."""
    t = recipe["tiles"]
    tiles = _tiles(recipe, m, n)
    if t["persistent"]:
        sms, cm = int(t["sms"]), int(t["cluster_m"])
        tiles = min(tiles, sms - sms % cm)
    return (tiles, 1, 1)


def _no_build(target: str) -> str:
    raise LaunchError("a recipe's kernel is loaded from the kernel cache only")


class RecipeLaunch:
    """A GEMM launch rebuilt from a recipe: :meth:`accepts` the sizes, :meth:`launcher` of
    the grid for M x N, :meth:`packed` arguments (tensor maps encoded once per distinct map,
    argument blocks kept per pointers and sizes)."""

    def __init__(self, recipe: dict[str, Any], device: int) -> None:
        kern = recipe["kernel"]
        self.recipe = recipe
        self.provider = str(recipe["provider"])
        self.source = KernelSource(kern["source_key"], kern["name"],
                                   tuple((str(n), str(t)) for n, t in kern["params"]),
                                   _no_build)
        loaded = load_cached_kernel(self.source, kern["target"], kern["disk_key"], device)
        if loaded is None:
            raise LaunchError(f"the cubin of recipe kernel {kern['name']} is not cached")
        self.kernel = loaded
        self.device = device
        self._maps = LruCache(512)
        self._params = LruCache(256)
        self._alts: dict[int, RecipeLaunch | None] = {}

    def _for(self, m: int, n: int, k: int) -> RecipeLaunch | None:
        """The launch for an M x N x K problem: this one, or where the recipe's ``tile_rule``
        picks another tile, that tile's recipe (``alternatives``; None when absent)."""
        rule = self.recipe["accepts"].get("tile_rule")
        if rule is None:
            return self
        pick = rule_pick(rule, m, n, k, int(self.recipe["tiles"]["sms"]))
        if pick == int(rule["pick"]):
            return self
        if pick not in self._alts:
            sub = self.recipe.get("alternatives", {}).get(str(pick))
            try:
                self._alts[pick] = None if sub is None else RecipeLaunch(sub, self.device)
            except (LaunchError, KeyError, TypeError, ValueError):
                self._alts[pick] = None  # its cubin is gone: plan those sizes instead
        return self._alts[pick]

    def accepts(self, m: int, n: int, k: int) -> bool:
        """Whether the provider's kernel takes these sizes (else the ordinary path decides)."""
        r = self._for(m, n, k)
        return r is not None and recipe_accepts(r.recipe, m, n, k)

    def grid(self, m: int, n: int) -> tuple[int, int, int]:
        return recipe_grid(self.recipe, m, n)

    def launcher(self, m: int, n: int, k: int) -> Any:
        """The launcher of the kernel the recipe's rule picks for M x N x K (the grid for
        M x N)."""
        alt = self._for(m, n, k)
        if alt is not self and alt is not None:
            return alt.launcher(m, n, k)
        r = self.recipe
        cluster = r["cluster"]
        return self.kernel.launcher(self.grid(m, n), tuple(r["block"]), shmem=int(r["shmem"]),
                                    cluster=None if cluster is None else tuple(cluster))

    def packed(self, a: Any, b: Any, d: Any, p: Any,
               scales: tuple[int, int] | None = None) -> PackedParams:
        """The packed arguments for operands ``a``, ``b``, ``d`` (``TensorInfo``) and problem
        ``p``, cached by everything they depend on."""
        alt = self._for(p.m, p.n, p.k)
        if alt is not self and alt is not None:
            return alt.packed(a, b, d, p, scales)
        key = (a.ptr, b.ptr, d.ptr, a.ld, b.ld, d.ld, p.m, p.n, p.k, scales)
        return self._params.get_or_make(key, lambda: self._pack(a, b, d, p, scales))

    def _pack(self, a: Any, b: Any, d: Any, p: Any,
              scales: tuple[int, int] | None) -> PackedParams:
        env = {"m": p.m, "n": p.n, "k": p.k, "lda": a.ld, "ldb": b.ld, "ldd": d.ld,
               "a": a.ptr, "b": b.ptr, "out": d.ptr}
        maps = [self._maps.get_or_make(tuple((k, v) for k, v in sorted(args.items())),
                                       lambda args=args: _encode_tiled(args))
                for args in evaluate_maps(self.recipe["maps"], env)]
        values: list[Any] = []
        for item in self.recipe["args"]:
            if item.startswith("map:"):
                values.append(ByValue(maps[int(item[4:])]))
            elif item in ("scale_a", "scale_b"):
                if scales is None:
                    raise LaunchError("a scaled GEMM launch needs the scale addresses")
                values.append(scales[0 if item == "scale_a" else 1])
            else:
                values.append(env[item])
        return PackedParams.of(self.source.params, values)
