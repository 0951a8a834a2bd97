"""The demo kernel on the GPU: one mma.sync m16n8k16 with layout-derived addressing.

Fresh random inputs every run, the output poisoned with NaN first, checked against a float64
product of the exactly-representable inputs.  Both the sm_80 PTX and the sm_90a PTX are run:
PTX for a plain target compiles for any newer GPU (Target.runs_on), so the sm_80 module is
assembled for this GPU; an sm_80 *cubin* does not load on an sm_90 GPU (checked below).
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import pytest

from nvatom import dtypes
from nvatom.arch import device_target
from nvatom.arch import target as target_
from nvatom.kernels.mma_demo import build_demo_module
from nvatom.runtime.ptxas import assemble

pytestmark = pytest.mark.gpu


def _gpu_target() -> str:
    import cupy

    return device_target(cupy.cuda.Device().compute_capability).name


def _run_cubin(cubin: bytes, name: str, args: list, block: int) -> None:
    import cupy

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "k.cubin"
        path.write_bytes(cubin)
        mod = cupy.RawModule(path=str(path))
        fn = mod.get_function(name)
        fn((1,), (block,), tuple(args))
        cupy.cuda.runtime.deviceSynchronize()


@pytest.mark.parametrize("target", ["sm_80", "sm_90a"])
@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_mma_demo_matches_float64(target: str, dtype: str) -> None:
    import cupy

    gpu = _gpu_target()
    if not target_(target).runs_on(gpu):
        pytest.skip(f"{target} code does not run on this {gpu} GPU")
    rng = np.random.default_rng()
    for _ in range(3):
        a = rng.standard_normal((16, 16))
        bt = rng.standard_normal((8, 16))
        a_bits = dtypes.encode(dtype, a).astype(np.uint16)
        bt_bits = dtypes.encode(dtype, bt).astype(np.uint16)
        ref = dtypes.decode(dtype, a_bits) @ dtypes.decode(dtype, bt_bits).T

        ptx = build_demo_module(target, dtype).emit()
        # The PTX says .target sm_80 (or sm_90a); ptxas compiles it for this GPU.
        res = assemble(ptx, gpu)
        d_a = cupy.asarray(a_bits)
        d_b = cupy.asarray(bt_bits)
        d_d = cupy.full((16, 8), np.nan, dtype=cupy.float32)
        _run_cubin(res.cubin, "mma_demo", [d_a, d_b, d_d], 32)
        out = cupy.asnumpy(d_d).astype(np.float64)

        assert np.isfinite(out).all(), "some outputs were never written"
        rel = np.linalg.norm(out - ref) / np.linalg.norm(ref)
        # Exact products, f32 accumulation of 16 terms: far below 1e-5.
        assert rel < 1e-5, f"relative error {rel:.3e}"
        # A wrong fragment map swaps elements: check elementwise too.
        np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4)


def test_sm80_cubin_does_not_load_on_a_newer_major() -> None:
    """SASS is not forward compatible across majors: only the PTX is (see Target.runs_on)."""
    import cupy

    gpu = _gpu_target()
    if target_(gpu).major == 8:
        pytest.skip("needs a GPU of another major than sm_8x")
    res = assemble(build_demo_module("sm_80", "f16").emit(), "sm_80")
    with pytest.raises(cupy.cuda.driver.CUDADriverError, match="NO_BINARY_FOR_GPU"):
        _run_cubin(res.cubin, "mma_demo", [], 32)
