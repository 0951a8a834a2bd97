"""Host side shared by the GPU tests of kernels written in the IR (tests/gpu/test_ir_gpu.py,
test_emit_llvm_gpu.py, test_ir_tma_forms_gpu.py): lower an example of tests/ir/ (what
``nvatom compile`` does), load its kernels through the runtime, and the checks that more
than one test runs on such a kernel (the same example lowered to PTX directly or through the
LLVM path must compute the same).

A test fixture: cupy is imported inside the functions that touch the device, so this module
imports (and :func:`lower_example` runs) on a machine without a GPU.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

IR = Path(__file__).resolve().parent.parent / "ir"
F16_NAN = 0x7E00  # a quiet NaN of f16, as bits


def lower_example(name: str, target: str) -> Any:
    """The lowering (``nvatom.ir.lower.LowerResult``: PTX and per-kernel facts) of
    tests/ir/<name> for ``target``."""
    from nvatom.ir import driver
    from nvatom.ir.lower import lower

    mod = driver.parse((IR / name).read_text(), name)
    return lower(mod, driver.verify(mod, target))


def load(key: str, kernel: str, params: Any, ptx: str) -> Any:
    """The loaded kernel ``kernel`` (PTX parameters ``params``) of ``ptx`` on the current
    device; ``key`` names the source in the runtime's cache."""
    import cupy

    from nvatom.arch import device_target
    from nvatom.runtime.launch import KernelSource, get_kernel

    src = KernelSource(key, kernel, params, lambda _t, ptx=ptx: ptx)
    return get_kernel(src, device_target(cupy.cuda.Device().compute_capability).name)


def kernels(name: str, target: str = "sm_90a") -> dict[str, tuple[Any, Any]]:
    """Every kernel of tests/ir/<name>, lowered for ``target``: name -> (loaded kernel,
    ``KernelInfo``)."""
    out = lower_example(name, target)
    return {k.name: (load(f"ir:{name}:{k.name}:{hash(out.ptx)}", k.name, k.ptx_params,
                          out.ptx), k)
            for k in out.kernels}


def check_mma_sm80(kern: Any) -> None:
    """tests/ir/mma_sm80.mlir (one warp, D = A * B^T + C, bf16 in, f32 out) matches a float64
    product of the exactly-representable inputs; D is poisoned with NaN first."""
    import cupy

    from nvatom import dtypes

    rng = np.random.default_rng()
    for _ in range(3):
        a = dtypes.encode("bf16", rng.standard_normal((16, 16))).astype(np.uint16)
        bt = dtypes.encode("bf16", rng.standard_normal((8, 16))).astype(np.uint16)
        c = rng.standard_normal((16, 8)).astype(np.float32)
        ref = dtypes.decode("bf16", a) @ dtypes.decode("bf16", bt).T + c.astype(np.float64)
        d_a, d_b, d_c = cupy.asarray(a), cupy.asarray(bt), cupy.asarray(c)
        d_d = cupy.full((16, 8), np.nan, dtype=cupy.float32)
        kern.launch(1, 32, [d_a.data.ptr, d_b.data.ptr, d_c.data.ptr, d_d.data.ptr])
        cupy.cuda.runtime.deviceSynchronize()
        out = cupy.asnumpy(d_d).astype(np.float64)
        assert np.isfinite(out).all(), "some outputs were never written"
        np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5)


def check_copy_pipeline(kern: Any) -> None:
    """tests/ir/copy_pipeline.mlir (cp.async -> ldmatrix -> mma.sync f16 -> stmatrix ->
    128-bit universal copies): small integer inputs make every product and sum exact in f16,
    so D must equal A * B^T exactly; D is poisoned with NaN first."""
    import cupy

    rng = np.random.default_rng()
    for _ in range(3):
        a = rng.integers(-3, 4, (16, 16)).astype(np.float16)
        bt = rng.integers(-3, 4, (8, 16)).astype(np.float16)
        ref = a.astype(np.float64) @ bt.astype(np.float64).T
        d_a, d_b = cupy.asarray(a), cupy.asarray(bt)
        d_d = cupy.full((16, 8), np.nan, dtype=cupy.float16)
        kern.launch(1, 32, [d_a.data.ptr, d_b.data.ptr, d_d.data.ptr])
        cupy.cuda.runtime.deviceSynchronize()
        np.testing.assert_array_equal(cupy.asnumpy(d_d).astype(np.float64), ref)


def f16_maps(info: Any, bufs: Any, n: int, shape: Callable[[Any], tuple[int, int]]
             ) -> list[Any]:
    """By-value tensor maps of the kernel's hoisted TMA descriptors (``info.tma``, box and
    swizzle from the lowering) over the row-major f16 tensors ``bufs`` (cupy, n contiguous):
    ``shape(buf)`` = (rows, row stride in bytes) the map is encoded with."""
    from nvatom.descriptors.tma import TensorMap
    from nvatom.runtime.launch import ByValue

    maps = []
    for t, buf in zip(info.tma, bufs, strict=True):
        assert t.element_bits == 16 and t.gmem_layout == "(n,m):(1,ld)"
        rows, stride = shape(buf)
        tm = TensorMap("tiled", "float16", int(buf.data.ptr), (n, rows), (stride,),
                       box_dims=t.box, swizzle=t.swizzle_bytes)
        maps.append(ByValue(tm.encode_with_driver()))
    return maps


def check_tma_round_trip(kern: Any, info: Any, m: int, n: int, x: int, y: int,
                         fill: int = 0) -> None:
    """A kernel of the tests/ir/tma_copy.mlir form (params: src, dst, n, m, ld, x, y, the
    load and store maps) loads the box at (x, y) of a row-major m x n f16 tensor and
    TMA-stores it to the same place of a tensor filled with ``fill`` (bits): exactly the box
    must arrive (its out-of-bounds part is not written)."""
    import cupy

    rng = np.random.default_rng()
    src = cupy.asarray(rng.integers(1, 30000, (m, n)).astype(np.uint16))  # finite f16
    dst = cupy.full((m, n), fill, dtype=cupy.uint16)
    maps = f16_maps(info, (src, dst), n, lambda _b: (m, n * 2))
    kern.launch(1, 128, [src.data.ptr, dst.data.ptr, n, m, n, x, y, *maps])
    cupy.cuda.runtime.deviceSynchronize()
    got = cupy.asnumpy(dst)
    want = np.full((m, n), fill, np.uint16)
    bx, by = info.tma[0].box
    want[y:y + by, x:x + bx] = cupy.asnumpy(src)[y:y + by, x:x + bx]
    np.testing.assert_array_equal(got, want, err_msg=f"box at ({x}, {y})")
