"""gmem -> smem (cp.async, swizzled) -> registers (ldmatrix) -> mma.sync -> stmatrix -> gmem,
on the GPU, for f16, bf16 and e4m3 inputs: the product matches numpy.

Fresh random inputs each run, output poisoned with NaN; the reference is the float64 product of
the exactly decoded inputs, rounded like the kernel's output (f16 / bf16)."""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import pytest

from nvatom import dtypes
from nvatom.arch import device_target
from nvatom.kernels.copy_pipeline import PIPELINES, build_pipeline_module
from nvatom.runtime.ptxas import assemble

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("dtype", list(PIPELINES))
def test_pipeline_product(dtype: str) -> None:
    import cupy

    gpu = device_target(cupy.cuda.Device().compute_capability)
    form = PIPELINES[dtype].form
    out_t = "f16" if form.d.name == "f16" else "bf16"
    res = assemble(build_pipeline_module(dtype, gpu).emit(), gpu)
    rng = np.random.default_rng()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "k.cubin"
        path.write_bytes(res.cubin)
        fn = cupy.RawModule(path=str(path)).get_function("copy_pipeline")
        for _ in range(4):
            scale = 1.0 if dtype != "e4m3" else 4.0
            a_bits = dtypes.encode(dtype, rng.standard_normal((form.m, form.k)) * scale)
            b_bits = dtypes.encode(dtype, rng.standard_normal((form.n, form.k)) * scale)
            a, bt = dtypes.decode(dtype, a_bits), dtypes.decode(dtype, b_bits)
            store = np.uint16 if dtype != "e4m3" else np.uint8
            d_a = cupy.asarray(a_bits.astype(store))
            d_b = cupy.asarray(b_bits.astype(store))
            d_d = cupy.full((form.m, form.n), 0x7FFF, dtype=cupy.uint16)  # NaN in f16 and bf16
            fn((1,), (32,), (d_a, d_b, d_d))
            cupy.cuda.runtime.deviceSynchronize()
            got = dtypes.decode(out_t, cupy.asnumpy(d_d))
            ref = a @ bt.T
            assert np.isfinite(got).all(), "unwritten or non-finite outputs"
            # f16 accumulation rounds every partial sum; bf16 rounds once at the end.
            tol = (2.0 ** -9 if out_t == "f16" else 2.0 ** -7) * (np.abs(a) @ np.abs(bt).T + 1)
            assert (np.abs(got - ref) <= tol).all(), np.max(np.abs(got - ref) / tol)
