"""nvatom.gemm_providers.prepare_gemm_sm90 (the SM90 kernel's direct launcher) on CPU: the
tensor checks, and what it hands the driver launcher (function key, launch shape, the kernel
parameters in order: three 128-byte maps, M, N, K, the FP8 scale addresses), with torch and
the driver replaced by stand-ins and the maps encoded by the pure-Python encoder.  The GPU
runs it for real in tests/gpu/test_gemm_sm90_gpu.py."""

from __future__ import annotations

import ctypes
import dataclasses
import sys
import types

import pytest

from nvatom import gemm_providers as gp
from nvatom.descriptors.tma import TensorMap
from nvatom.kernels.sm90.config import GemmSm90Config, GemmSm90Error
from nvatom.kernels.sm90.launch import gemm_sm90_launch_spec


@dataclasses.dataclass
class _T:
    shape: tuple[int, int]
    strides: tuple[int, int]
    dtype: str
    ptr: int
    is_cuda: bool = True
    device: types.SimpleNamespace = dataclasses.field(
        default_factory=lambda: types.SimpleNamespace(index=0))

    def stride(self) -> tuple[int, int]:
        return self.strides

    def dim(self) -> int:
        return len(self.shape)

    def data_ptr(self) -> int:
        return self.ptr


@pytest.fixture
def calls(monkeypatch):
    cuda = types.SimpleNamespace(
        current_device=lambda: 0,
        get_device_properties=lambda dev: types.SimpleNamespace(multi_processor_count=132),
        current_stream=lambda dev: types.SimpleNamespace(cuda_stream=77))
    torch = types.SimpleNamespace(cuda=cuda, bfloat16="bf", float16="h", float32="f",
                                  float8_e4m3fn="e4", float8_e5m2="e5")
    monkeypatch.setitem(sys.modules, "torch", torch)
    monkeypatch.setattr(TensorMap, "encode_with_driver", TensorMap.encode)
    log: dict = {}

    def load(key, cubin, name, device, smem, cluster):
        log["load"] = (key, name, device, smem, cluster)
        return "F"

    def prepare(f, grid, block, smem, cluster, params, stream, **kw):
        log["launch"] = (f, grid, block, smem, cluster, params, stream(), kw)
        return "launcher"

    monkeypatch.setattr(gp, "load_function", load)
    monkeypatch.setattr(gp, "prepare_driver_launch", prepare)
    return log


def _row(m: int, n: int, dt: str, ptr: int) -> _T:
    return _T((m, n), (n, 1), dt, ptr)


@pytest.mark.parametrize("cfg", [GemmSm90Config(), GemmSm90Config(cluster_m=2),
                                 GemmSm90Config(in_dtype="e4m3", b_major="K")],
                         ids=["bf16", "cluster2", "e4m3"])
def test_prepare_hands_the_driver_the_spec(calls, cfg) -> None:
    m, n, k = 256, 512, 128
    t = "e4" if cfg.in_dtype == "e4m3" else "bf"
    a = _row(m, k, t, 0x10000)
    b = _T((k, n), (1, k), t, 0x20000) if cfg.b_major == "K" else _row(k, n, t, 0x20000)
    out = _row(m, n, "bf", 0x30000)
    scales = (_T((1, 1), (1, 1), "f", 0x40000), _T((1, 1), (1, 1), "f", 0x40010))
    sa, sb = scales if cfg.in_dtype == "e4m3" else (None, None)
    assert gp.prepare_gemm_sm90(a, b, out, cfg, sa, sb, grid=64) == "launcher"
    spec = gemm_sm90_launch_spec(cfg, m, n, k, 0x10000, 0x20000, 0x30000, 132)
    assert calls["load"] == (cfg, cfg.name, 0, cfg.smem_bytes, cfg.cluster_m > 1)
    f, grid, block, smem, cluster, params, stream, kw = calls["launch"]
    assert (f, grid, block, smem, cluster, stream) == ("F", spec.grid, spec.block,
                                                       spec.smem_bytes, spec.cluster, 77)
    assert kw["fit_clusters"] == (cfg.cluster_m > 1) and kw["grid_cap"] == 64
    assert [bytes(p) for p in params[:3]] == [tm.encode() for tm in spec.tensor_maps]
    assert [p.value for p in params[3:6]] == [m, n, k]
    assert all(isinstance(p, ctypes.c_uint32) for p in params[3:6])
    if cfg.in_dtype == "e4m3":
        assert [p.value for p in params[6:]] == [0x40000, 0x40010]
    else:
        assert len(params) == 6


def test_prepare_checks_the_tensors(calls) -> None:
    cfg = GemmSm90Config()
    a, b, out = _row(64, 64, "bf", 0x10000), _row(64, 64, "bf", 0x20000), _row(64, 64, "bf", 0)
    with pytest.raises(GemmSm90Error, match="^out is h, the config wants bf$"):
        gp.prepare_gemm_sm90(a, b, dataclasses.replace(out, dtype="h"), cfg)
    with pytest.raises(GemmSm90Error, match="the config wants a MN-major b"):
        gp.prepare_gemm_sm90(a, dataclasses.replace(b, strides=(1, 64)), out, cfg)
    with pytest.raises(GemmSm90Error, match="^b is not 16-byte aligned"):
        gp.prepare_gemm_sm90(a, dataclasses.replace(b, ptr=0x20008), out, cfg)
    e4 = GemmSm90Config(in_dtype="e4m3", b_major="K")
    with pytest.raises(GemmSm90Error, match="needs scale_a and scale_b"):
        gp.prepare_gemm_sm90(_row(64, 64, "e4", 0), _T((64, 64), (1, 64), "e4", 0), out, e4)
    assert "launch" not in calls


def test_run_picks_the_default_config(calls, monkeypatch) -> None:
    seen = []
    monkeypatch.setattr(gp, "prepare_gemm_sm90",
                        lambda a, b, out, cfg, sa, sb: seen.append(cfg) or (lambda: None))
    h, f = "torch.float16", "torch.float32"
    a, b = _row(64, 64, h, 0), _T((64, 64), (1, 64), h, 0)
    gp.run_gemm_sm90(a, b, _row(64, 64, f, 0))
    assert (seen[0].in_dtype, seen[0].out_dtype, seen[0].b_major) == ("f16", "f32", "K")
    with pytest.raises(GemmSm90Error, match="e5m2 inputs give bf16 output here, not f16"):
        gp.run_gemm_sm90(_row(64, 64, "torch.float8_e5m2", 0), b, _row(64, 64, h, 0))
    with pytest.raises(GemmSm90Error, match="no SM90 GEMM for torch.int8 -> "):
        gp.run_gemm_sm90(_row(64, 64, "torch.int8", 0), b, _row(64, 64, h, 0))
