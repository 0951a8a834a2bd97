"""wgmma.mma_async (ss, f16/bf16 inputs, f32 accumulation) on an sm_90a GPU: global ->
swizzled shared tiles -> descriptors -> k_steps x mma_async -> accumulator layout -> global,
against numpy float64 on the exactly decoded inputs.

Fresh random inputs each run, D poisoned with NaN (and the accumulators start as NaN in the
kernel, so scale-d = false on the first step is tested too).  A deliberately mismatched B
descriptor (SW64 over an SW128 tile) is rejected by check_desc_matches and, run anyway, gives
a wrong product."""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import pytest

from nvatom import dtypes
from nvatom.atoms.sm90 import wgmma_form
from nvatom.descriptors.wgmma import DescriptorError, check_desc_matches
from nvatom.ptx.wgmma_emit import build_wgmma_test_module, wgmma_test_plan
from nvatom.runtime.ptxas import assemble

pytestmark = pytest.mark.gpu

SWIZZLES = ("SW128", "SW64", "SW32", "INTERLEAVE")


def _require_sm90() -> None:
    import cupy

    if cupy.cuda.Device().compute_capability != "90":
        pytest.skip("wgmma needs an sm_90 (Hopper) GPU")


def _run(form, swizzle: str, k_steps: int, b_desc_swizzle: str | None = None,
         rng: np.random.Generator | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    import cupy

    rng = rng or np.random.default_rng()
    dt = form.a.name
    text = build_wgmma_test_module(form, swizzle, k_steps,
                                   b_desc_swizzle=b_desc_swizzle).emit()
    res = assemble(text, "sm_90a")
    kt = form.k * k_steps
    a_bits = dtypes.encode(dt, rng.standard_normal((64, kt)))
    b_bits = dtypes.encode(dt, rng.standard_normal((form.n, kt)))
    a, b = dtypes.decode(dt, a_bits), dtypes.decode(dt, b_bits)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "k.cubin"
        path.write_bytes(res.cubin)
        fn = cupy.RawModule(path=str(path)).get_function("wgmma_test")
        d_a = cupy.asarray(np.ascontiguousarray(a_bits.astype(np.uint16)))
        d_b = cupy.asarray(np.ascontiguousarray(b_bits.astype(np.uint16)))
        d_d = cupy.full((64, form.n), np.nan, dtype=cupy.float32)
        fn((1,), (128,), (d_a, d_b, d_d))
        cupy.cuda.runtime.deviceSynchronize()
        got = cupy.asnumpy(d_d).astype(np.float64)
    return got, a, b


@pytest.mark.parametrize("dtype", ["f16", "bf16"])
@pytest.mark.parametrize("n", [8, 64, 128, 256])
@pytest.mark.parametrize("swizzle", SWIZZLES)
@pytest.mark.parametrize("k_steps", [1, 3])
def test_wgmma_product(dtype: str, n: int, swizzle: str, k_steps: int) -> None:
    _require_sm90()
    form = wgmma_form(f"sm90.mma.m64n{n}k16.ss.f32.{dtype}.{dtype}")
    got, a, b = _run(form, swizzle, k_steps)
    ref = a @ b.T
    assert np.isfinite(got).all(), "unwritten or non-finite outputs"
    tol = 1e-5 * (np.abs(a) @ np.abs(b).T) + 1e-30
    err = np.abs(got - ref)
    assert (err <= tol).all(), float(np.max(err / tol))


def test_mismatched_descriptor_is_rejected_and_wrong() -> None:
    _require_sm90()
    form = wgmma_form("sm90.mma.m64n64k16.ss.f32.f16.f16")
    plan = wgmma_test_plan(form, "SW128", 1, b_desc_swizzle="SW64")
    with pytest.raises(DescriptorError):
        check_desc_matches(plan.b_descs[0], plan.b_smem, 16, "K")
    got, a, b = _run(form, "SW128", 1, b_desc_swizzle="SW64")
    ref = a @ b.T
    tol = 1e-5 * (np.abs(a) @ np.abs(b).T) + 1e-30
    assert not (np.abs(got - ref) <= tol).all(), "a mismatched descriptor gave the right answer"
