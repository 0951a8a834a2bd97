"""A b1 (``.and.popc``) WGMMA kernel written in the IR, lowered by nvatom.ir and run on an
sm_90 GPU (tests/ir/wgmma_b1_kernel.py): D (64 x 128 s32) = popc(A & B) over K = 1024 bits,
four ``m64n128k256`` K-blocks, A in a 128-byte-swizzled tile (the host writes its raw image,
swizzled by the PTX ISA's rule), B in an unswizzled (INTERLEAVE) tile the kernel fills through
the IR layout.  Against numpy's popc-AND of the fresh random 0/1 inputs; D is poisoned with
0x7fffffff first (no popc over 1024 bits reaches it), so an unwritten output fails."""

from __future__ import annotations

import numpy as np
import pytest

from nvatom.arch import device_target
from tests.ir import wgmma_b1_kernel as B1

pytestmark = pytest.mark.gpu
# The device's Python may lack xDSL: install the wheels of .whl/ (docs/ir.md), else skip.
pytest.importorskip("xdsl", reason="xdsl==0.74.0 not installed (pip install .whl/*.whl)")

from nvatom.ir import driver  # noqa: E402
from nvatom.ir.lower import lower  # noqa: E402

POISON = 0x7FFFFFFF


def test_ir_b1_wgmma_matches_numpy_popc() -> None:
    import cupy

    from nvatom.runtime.launch import KernelSource, get_kernel

    if cupy.cuda.Device().compute_capability != "90":
        pytest.skip("wgmma needs an sm_90 (Hopper) GPU")
    mod = driver.parse(B1.KERNEL, "wgmma_b1.mlir")
    out = lower(mod, driver.verify(mod, "sm_90a"))
    (info,) = out.kernels
    assert info.threads == 128
    src = KernelSource(f"ir:wgmma_b1:{hash(out.ptx)}", info.name, info.ptx_params,
                       lambda _t, ptx=out.ptx: ptx)
    kern = get_kernel(src, device_target(cupy.cuda.Device().compute_capability).name)
    rng = np.random.default_rng()
    for p in (0.5, 0.1, 0.9):
        a = (rng.random((B1.M, B1.K)) < p).astype(np.uint8)
        b = (rng.random((B1.N, B1.K)) < p).astype(np.uint8)
        d_a = cupy.asarray(np.ascontiguousarray(B1.sw128_image(a)))
        d_b = cupy.asarray(np.ascontiguousarray(B1.pack_rows(b)))
        d_d = cupy.full((B1.M, B1.N), POISON, dtype=cupy.int32)
        kern.launch(1, 128, [d_a.data.ptr, d_b.data.ptr, d_d.data.ptr])
        cupy.cuda.runtime.deviceSynchronize()
        got = cupy.asnumpy(d_d).astype(np.int64)
        assert (got != POISON).all(), "some outputs were never written"
        np.testing.assert_array_equal(got, B1.popc_and(a, b), err_msg=f"density {p}")
