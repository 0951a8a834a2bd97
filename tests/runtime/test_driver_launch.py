"""nvatom.runtime.driver_launch against a recording stand-in for cuda.bindings' driver: the
calls made, the launch configuration (grid, block, shared memory, cluster attribute, the
occupancy fit and the grid cap) and the kernelParams array (one pointer per parameter, in
order).  The real driver runs it in tests/gpu/test_gemm_sm90_gpu.py."""

from __future__ import annotations

import ctypes
import types

import pytest

from nvatom.runtime import driver_launch as DL
from nvatom.runtime.launch import LaunchError


class _Obj(types.SimpleNamespace):
    pass


def _fake_driver(log: list, fit: int = 3, fail: str | None = None) -> types.SimpleNamespace:
    def call(name, *ret):
        def f(*args):
            log.append((name, args))
            return (1 if name == fail else 0, *ret)
        return f

    def config():
        return _Obj(attrs=[], numAttrs=0)

    def attribute():
        return _Obj(id=None, value=_Obj(clusterDim=_Obj(x=0, y=0, z=0)))

    return types.SimpleNamespace(
        cuModuleLoadData=call("cuModuleLoadData", "module"),
        cuModuleGetFunction=call("cuModuleGetFunction", "function"),
        cuFuncSetAttribute=call("cuFuncSetAttribute"),
        cuOccupancyMaxActiveClusters=call("cuOccupancyMaxActiveClusters", fit),
        cuLaunchKernelEx=call("cuLaunchKernelEx"),
        cuGetErrorString=lambda err: (0, b"fake error"),
        CUfunction_attribute=types.SimpleNamespace(
            CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES="smem",
            CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED="nonportable"),
        CUlaunchAttributeID=types.SimpleNamespace(
            CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION="cluster"),
        CUlaunchConfig=config, CUlaunchAttribute=attribute, CUstream=lambda h: ("stream", h))


def test_load_function_sets_attributes_once(monkeypatch) -> None:
    log: list = []
    monkeypatch.setattr(DL, "_driver", lambda: _fake_driver(log))
    monkeypatch.setattr(DL, "_FUNCS", {})
    builds: list = []
    f = DL.load_function("cfg", lambda: builds.append(1) or b"cubin", "kern", 0, 200_000, True)
    assert f == "function"
    assert [n for n, _ in log] == ["cuModuleLoadData", "cuModuleGetFunction",
                                   "cuFuncSetAttribute", "cuFuncSetAttribute"]
    assert log[0][1] == (b"cubin",) and log[1][1] == ("module", b"kern")
    assert log[2][1] == ("function", "smem", 200_000)
    assert log[3][1] == ("function", "nonportable", 1)
    assert DL.load_function("cfg", lambda: b"other", "kern", 0, 200_000, True) == "function"
    assert len(log) == 4 and builds == [1]  # cached per (key, device)
    DL.load_function("cfg", lambda: b"cubin", "kern", 1, 1024, False)  # another device
    assert [n for n, _ in log[4:]] == ["cuModuleLoadData", "cuModuleGetFunction",
                                       "cuFuncSetAttribute"]


@pytest.mark.parametrize(("cluster", "fit_clusters", "cap", "want_grid"), [
    ((1, 1, 1), False, None, 132),
    ((1, 1, 1), False, 100, 100),
    ((2, 1, 1), True, None, 6),      # 3 clusters of 2 fit at once
    ((2, 1, 1), True, 5, 4),         # the cap rounds down to whole clusters
    ((2, 1, 1), False, None, 132),
])
def test_prepare_driver_launch(monkeypatch, cluster, fit_clusters, cap, want_grid) -> None:
    log: list = []
    monkeypatch.setattr(DL, "_driver", lambda: _fake_driver(log, fit=3))
    params = [(ctypes.c_uint64 * 16)(*range(16)), ctypes.c_uint32(7), ctypes.c_uint64(9)]
    streams = iter([11, 12, 13])
    launch = DL.prepare_driver_launch("f", (132, 1, 1), (384, 1, 1), 1000, cluster, params,
                                      lambda: next(streams), fit_clusters=fit_clusters,
                                      grid_cap=cap, keep="kept")
    assert launch.grid == want_grid and launch.keep[2] == "kept"
    launch()
    name, (cfg, f, ptrs, extra) = log[-1]
    assert name == "cuLaunchKernelEx" and f == "f" and extra == 0
    assert (cfg.gridDimX, cfg.gridDimY, cfg.gridDimZ) == (want_grid, 1, 1)
    assert (cfg.blockDimX, cfg.blockDimY, cfg.blockDimZ) == (384, 1, 1)
    assert cfg.sharedMemBytes == 1000
    want_stream = 12 if cluster != (1, 1, 1) and fit_clusters else 11
    assert cfg.hStream == ("stream", want_stream)
    if cluster == (1, 1, 1):
        assert cfg.numAttrs == 0
    else:
        (at,) = cfg.attrs
        assert at.id == "cluster" and cfg.numAttrs == 1
        assert (at.value.clusterDim.x, at.value.clusterDim.y, at.value.clusterDim.z) == cluster
    arr = (ctypes.c_void_p * 3).from_address(ptrs)
    assert list(arr) == [ctypes.addressof(p) for p in params]


def test_driver_failure_names_the_call(monkeypatch) -> None:
    log: list = []
    monkeypatch.setattr(DL, "_driver", lambda: _fake_driver(log, fail="cuLaunchKernelEx"))
    monkeypatch.setattr("nvatom.runtime.launch._driver",
                        lambda: _fake_driver([], fail="cuLaunchKernelEx"))
    launch = DL.prepare_driver_launch("f", (1, 1, 1), (32, 1, 1), 0, (1, 1, 1),
                                      [ctypes.c_uint32(1)], lambda: 0)
    with pytest.raises(LaunchError, match="^cuLaunchKernelEx failed: 1 "):
        launch()
