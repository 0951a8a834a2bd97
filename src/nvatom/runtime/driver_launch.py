"""A direct launcher through the CUDA driver (``cuda.bindings``): load a cubin, prepare one
``cuLaunchKernelEx`` and return it as a zero-argument callable.

This is the launcher the benchmarks and the tuning script use to run a kernel outside
``nvatom.gemm`` (``nvatom.gemm_providers.prepare_gemm_sm90``); ``nvatom.gemm`` itself goes
through :mod:`nvatom.runtime.launch`.  What it adds to that path: a persistent cluster launch
is sized by ``cuOccupancyMaxActiveClusters`` (not every SM holds a CTA of a 2-CTA cluster), and
the grid can be capped (tuning).  CUDA Driver API: ``cuModuleLoadData``,
``cuModuleGetFunction``, ``cuFuncSetAttribute`` (``MAX_DYNAMIC_SHARED_SIZE_BYTES``,
``NON_PORTABLE_CLUSTER_SIZE_ALLOWED``), ``cuOccupancyMaxActiveClusters``,
``cuLaunchKernelEx`` with ``CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION``.  Driver failures raise
:class:`~nvatom.runtime.launch.LaunchError` naming the call and the ``CUresult``.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable, Hashable, Sequence
from typing import Any

from nvatom.runtime.launch import _check, _driver

__all__ = ["load_function", "prepare_driver_launch"]

#: (key, device) -> (CUmodule, CUfunction): a module stays loaded for the process.
_FUNCS: dict[tuple[Hashable, int], tuple[Any, Any]] = {}


def load_function(key: Hashable, cubin: Callable[[], bytes], name: str, device: int,
                  smem_bytes: int, cluster: bool) -> Any:
    """The ``CUfunction`` ``name`` of the cubin ``cubin()`` on the current context, loaded once
    per (``key``, ``device``), allowed ``smem_bytes`` of dynamic shared memory and, when
    ``cluster``, non-portable cluster sizes."""
    hit = _FUNCS.get((key, device))
    if hit is not None:
        return hit[1]
    cu = _driver()
    mod = _check(cu.cuModuleLoadData(cubin()), "cuModuleLoadData")
    f = _check(cu.cuModuleGetFunction(mod, name.encode()), "cuModuleGetFunction")
    _check(cu.cuFuncSetAttribute(
        f, cu.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
        smem_bytes), "cuFuncSetAttribute")
    if cluster:
        _check(cu.cuFuncSetAttribute(
            f, cu.CUfunction_attribute.CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1),
            "cuFuncSetAttribute")
    _FUNCS[(key, device)] = (mod, f)
    return f


def prepare_driver_launch(f: Any, grid: Sequence[int], block: Sequence[int], smem_bytes: int,
                          cluster: Sequence[int], params: Sequence[Any],
                          stream: Callable[[], int], *, fit_clusters: bool = False,
                          grid_cap: int | None = None, keep: Any = None) -> Any:
    """A zero-argument callable that launches ``f`` with the ctypes objects ``params`` (one
    per kernel parameter, in order) on ``stream()`` (a raw ``CUstream`` handle, asked at each
    launch).  ``cluster`` (x, y, z) other than (1, 1, 1) adds the cluster attribute;
    ``fit_clusters`` caps grid.x at the clusters that fit at once
    (``cuOccupancyMaxActiveClusters``, a persistent grid); ``grid_cap`` caps grid.x (rounded
    down to whole clusters).  The callable has ``grid`` (the grid.x launched) and ``keep``
    (``params`` and ``keep``, alive while it is)."""
    cu = _driver()
    ptrs = (ctypes.c_void_p * len(params))(*[ctypes.addressof(x) for x in params])
    cfg = cu.CUlaunchConfig()
    cfg.gridDimX, cfg.gridDimY, cfg.gridDimZ = grid
    cfg.blockDimX, cfg.blockDimY, cfg.blockDimZ = block
    cfg.sharedMemBytes = smem_bytes
    attrs = []
    clustered = tuple(cluster) != (1, 1, 1)
    if clustered:
        at = cu.CUlaunchAttribute()
        at.id = cu.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
        at.value.clusterDim.x, at.value.clusterDim.y, at.value.clusterDim.z = cluster
        attrs.append(at)
    cfg.attrs = attrs
    cfg.numAttrs = len(attrs)
    if clustered and fit_clusters:
        # Not every SM can hold a CTA of a 2-CTA cluster (GPCs of odd size): a grid of
        # #SMs CTAs would run a second wave.  Size the grid by the clusters that fit.
        cfg.hStream = cu.CUstream(stream())
        fit = _check(cu.cuOccupancyMaxActiveClusters(f, cfg), "cuOccupancyMaxActiveClusters")
        cfg.gridDimX = min(grid[0], max(1, int(fit)) * cluster[0])
    if grid_cap is not None:
        cfg.gridDimX = min(cfg.gridDimX, grid_cap - grid_cap % cluster[0])
    held = (params, ptrs, keep)

    def launch() -> None:
        cfg.hStream = cu.CUstream(stream())
        _check(cu.cuLaunchKernelEx(cfg, f, ctypes.addressof(ptrs), 0), "cuLaunchKernelEx")

    launch.keep = held  # type: ignore[attr-defined]
    launch.grid = cfg.gridDimX  # type: ignore[attr-defined]
    return launch
