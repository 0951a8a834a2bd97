"""Kernels written in the cute_nvgpu IR, lowered by nvatom.ir and run on the GPU.

* tests/ir/mma_sm80.mlir: one warp, D = A * B^T + C with the sm80 bf16 mma.sync atom;
  fragments moved by cute_nvgpu.atom.copy_fragment.  Checked against a float64 product of
  the exactly-representable inputs, output poisoned with NaN first.
* tests/ir/copy_pipeline.mlir: copy atoms around an mma.sync (cp.async, ldmatrix, stmatrix,
  universal copy), exact on small integers.
* tests/ir/tma_rebind.mlir: the load descriptor rebound on the device (tensormap.replace of
  base pointer, row count, row stride) must load from the new tensor.
* tests/ir/tma_copy.mlir: a 64 x 64 f16 box TMA-loaded into swizzled shared memory (mbarrier
  completion with the byte count the lowering derived from the partition) and TMA-stored
  into another tensor; the host encodes both hoisted descriptors from the lowering's
  TmaParam (box, swizzle).  The box must arrive exactly, and nothing else be written.
* tests/ir/tma_multicast.mlir: a cluster of two CTAs (the kernel's cluster attribute, launched
  with the cluster the lowering reports); each CTA loads its half of a 64 x 64 bf16 box
  multicast to both and stores its whole tile to its own output slot: both slots must hold
  the box exactly (so each CTA received the other's half), nothing else written.
"""

from __future__ import annotations

import numpy as np
import pytest

pytestmark = pytest.mark.gpu
# The device's Python may lack xDSL: install the wheels of .whl/ (docs/ir.md), else skip.
pytest.importorskip("xdsl", reason="xdsl==0.74.0 not installed (pip install .whl/*.whl)")

from tests.gpu import ir_kernels as K  # noqa: E402


def _kernel(name: str, target: str):
    ((kern, info),) = K.kernels(name, target).values()
    return kern, info


def test_ir_mma_kernel_matches_float64() -> None:
    kern, info = _kernel("mma_sm80.mlir", "sm_80")
    assert info.threads == 32
    K.check_mma_sm80(kern)


def test_ir_tma_round_trip_moves_exactly_the_box() -> None:
    kern, info = _kernel("tma_copy.mlir", "sm_90a")
    K.check_tma_round_trip(kern, info, 128, 256, 64, 64)  # row-major m x n f16: n contiguous


def test_ir_copy_pipeline_matches_the_product() -> None:
    """tests/ir/copy_pipeline.mlir: cp.async -> ldmatrix -> mma.sync (f16) -> stmatrix ->
    128-bit universal copies (ir_kernels.check_copy_pipeline)."""
    kern, info = _kernel("copy_pipeline.mlir", "sm_90a")
    assert info.threads == 32
    K.check_copy_pipeline(kern)


def test_ir_descriptor_rebind_loads_from_the_new_tensor() -> None:
    """tests/ir/tma_rebind.mlir: the host encodes the load map for ``src``; the kernel copies
    it to a global workspace and rebinds base pointer, row count and row stride
    (tensormap.replace) to ``src2``, then loads the box and TMA-stores it.  The box of
    ``src2`` (never of ``src``) must arrive, and nothing else be written."""
    import cupy

    kern, info = _kernel("tma_rebind.mlir", "sm_90a")
    n, m = 256, 128
    x, y = 64, 64
    rng = np.random.default_rng()
    src = cupy.asarray(rng.integers(1, 30000, (m, n)).astype(np.uint16))
    src2 = cupy.asarray(rng.integers(30001, 60000, (m, n)).astype(np.uint16))
    dst = cupy.zeros((m, n), dtype=cupy.uint16)
    ws = cupy.zeros(128, dtype=cupy.uint8)
    # the load map starts with a wrong row count and stride: the rebind must fix them
    maps = K.f16_maps(info, (src, dst), n,
                      lambda buf: (m // 2, n) if buf is src else (m, n * 2))
    kern.launch(1, 128, [src.data.ptr, src2.data.ptr, dst.data.ptr, ws.data.ptr, n, m, n,
                         m, n * 2, x, y, *maps])
    cupy.cuda.runtime.deviceSynchronize()
    got, want = cupy.asnumpy(dst), np.zeros((m, n), np.uint16)
    bx, by = info.tma[0].box
    want[y:y + by, x:x + bx] = cupy.asnumpy(src2)[y:y + by, x:x + bx]
    np.testing.assert_array_equal(got, want)


def test_ir_multicast_slices_fill_every_cta_of_the_cluster() -> None:
    import cupy

    from nvatom.descriptors.tma import TensorMap
    from nvatom.runtime.launch import ByValue

    kern, info = _kernel("tma_multicast.mlir", "sm_90a")
    assert info.cluster == (2, 1, 1)
    n, m, mo = 128, 128, 256  # row-major bf16 (bit patterns): n contiguous
    x, y = 64, 32
    rng = np.random.default_rng()
    src = cupy.asarray(rng.integers(1, 30000, (m, n)).astype(np.uint16))
    dst = cupy.zeros((mo, n), dtype=cupy.uint16)
    maps = []
    for t, buf, rows in zip(info.tma, (src, dst), (m, mo), strict=True):
        assert t.element_bits == 16
        tm = TensorMap("tiled", "bfloat16", int(buf.data.ptr), (n, rows), (n * 2,),
                       box_dims=t.box, swizzle=t.swizzle_bytes)
        maps.append(ByValue(tm.encode_with_driver()))
    assert info.tma[0].box == (64, 32)  # each CTA's slice: half of the box's 64 rows
    kern.launch(2, 128, [src.data.ptr, dst.data.ptr, n, m, mo, n, x, y, *maps],
                cluster=info.cluster)
    cupy.cuda.runtime.deviceSynchronize()
    got, want = cupy.asnumpy(dst), np.zeros((mo, n), np.uint16)
    box = cupy.asnumpy(src)[y:y + 64, x:x + 64]
    for rank in range(2):  # CTA r stores its tile at rows y + 64 r
        want[y + 64 * rank:y + 64 * rank + 64, x:x + 64] = box
    np.testing.assert_array_equal(got, want)
