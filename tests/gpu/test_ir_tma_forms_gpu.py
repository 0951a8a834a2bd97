"""IR forms of issue 16 run on an sm_90 GPU (H100): a TMA load into ``.shared::cta``, the bulk
tensor prefetch before a load, generic-address ldmatrix/stmatrix and a tiled copy.

* tests/ir/tma_shared_cta.mlir: the partition op makes the load atom; the load writes the
  CTA's own shared memory (``cp.async.bulk.tensor.2d.shared::cta.global``, completing on the
  mbarrier with the partition's byte count) and a TMA store writes the box to another tensor.
* tests/ir/tma_prefetch.mlir: ``prefetch.tensormap`` and ``cp.async.bulk.prefetch.tensor``
  of the box (L2 evict_last hint), then the load and the store.
* tests/ir/copy_forms.mlir: ``ldmatrix``/``stmatrix`` through a generic address (an
  identity: the stored tile must equal the loaded one) and a tiled copy of a 32 x 16 f32 tile
  (128 threads, 4 values each) global -> swizzled shared -> registers -> global.

For the TMA kernels the host encodes the hoisted descriptors from the lowering's TmaParam (box,
swizzle); the box must arrive exactly and every other element keep its NaN poison.  Fresh
random inputs and box positions each round.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytestmark = pytest.mark.gpu
pytest.importorskip("xdsl", reason="xdsl==0.74.0 not installed (pip install .whl/*.whl)")
cupy = pytest.importorskip("cupy")

from nvatom.arch import device_target  # noqa: E402
from nvatom.ir import driver  # noqa: E402
from nvatom.ir.lower import lower  # noqa: E402

IR = Path(__file__).parent.parent / "ir"
F16_NAN = 0x7E00  # a quiet NaN of f16, as bits


def _cc() -> str:
    try:
        return str(cupy.cuda.Device().compute_capability)
    except Exception:  # no device
        return ""


if _cc() != "90":
    pytest.skip("needs an sm_90 GPU (H100)", allow_module_level=True)


def _kernels(name: str, target: str = "sm_90a") -> dict[str, tuple[object, object]]:
    from nvatom.runtime.launch import KernelSource, get_kernel

    mod = driver.parse((IR / name).read_text(), name)
    out = lower(mod, driver.verify(mod, target))
    gpu = device_target(cupy.cuda.Device().compute_capability).name
    return {k.name: (get_kernel(KernelSource(f"ir:{name}:{k.name}:{hash(out.ptx)}", k.name,
                                             k.ptx_params, lambda _t, ptx=out.ptx: ptx), gpu), k)
            for k in out.kernels}


def _tma_round_trip(name: str, kernel: str) -> None:
    """Load the box at (x, y) of a row-major m x n f16 tensor and TMA-store it to the same
    place of a NaN-poisoned tensor: exactly the box must arrive."""
    from nvatom.descriptors.tma import TensorMap
    from nvatom.runtime.launch import ByValue

    kern, info = _kernels(name)[kernel]
    n, m = 256, 192  # n contiguous
    rng = np.random.default_rng()
    for x, y in ((64, 64), (int(rng.integers(0, 4)) * 64, int(rng.integers(0, 3)) * 64),
                 (8 * int(rng.integers(0, 25)), int(rng.integers(0, 129)))):
        src = cupy.asarray(rng.integers(1, 30000, (m, n)).astype(np.uint16))  # finite f16
        dst = cupy.full((m, n), F16_NAN, dtype=cupy.uint16)
        maps = []
        for t, buf in zip(info.tma, (src, dst), strict=True):
            assert t.element_bits == 16 and t.gmem_layout == "(n,m):(1,ld)"
            tm = TensorMap("tiled", "float16", int(buf.data.ptr), (n, m), (n * 2,),
                           box_dims=t.box, swizzle=t.swizzle_bytes)
            maps.append(ByValue(tm.encode_with_driver()))
        kern.launch(1, 128, [src.data.ptr, dst.data.ptr, n, m, n, x, y, *maps])
        cupy.cuda.runtime.deviceSynchronize()
        got = cupy.asnumpy(dst)
        want = np.full((m, n), F16_NAN, np.uint16)
        bx, by = info.tma[0].box
        # out-of-bounds parts of the box are not written by the store
        want[y:y + by, x:x + bx] = cupy.asnumpy(src)[y:y + by, x:x + bx]
        np.testing.assert_array_equal(got, want, err_msg=f"box at ({x}, {y})")


def test_shared_cta_tma_load_moves_exactly_the_box() -> None:
    _tma_round_trip("tma_shared_cta.mlir", "tma_shared_cta")


def test_bulk_tensor_prefetch_then_load_moves_exactly_the_box() -> None:
    _tma_round_trip("tma_prefetch.mlir", "tma_prefetch")


def test_generic_address_ldmatrix_stmatrix_is_an_identity() -> None:
    kern, info = _kernels("copy_forms.mlir")["copy_generic"]
    assert info.threads == 32
    rng = np.random.default_rng()
    for _ in range(3):
        src = rng.standard_normal((32, 8)).astype(np.float16)
        d_src = cupy.asarray(src)
        d_dst = cupy.full((32, 8), np.nan, dtype=cupy.float16)
        kern.launch(1, 32, [d_src.data.ptr, d_dst.data.ptr])
        cupy.cuda.runtime.deviceSynchronize()
        np.testing.assert_array_equal(cupy.asnumpy(d_dst).view(np.uint16), src.view(np.uint16))


def test_tiled_copy_moves_the_tile() -> None:
    kern, info = _kernels("copy_forms.mlir")["tiled_copy"]
    assert info.threads == 128
    rng = np.random.default_rng()
    for _ in range(3):
        src = rng.standard_normal((32, 16)).astype(np.float32)
        d_src = cupy.asarray(src)
        d_dst = cupy.full((32, 16), np.nan, dtype=cupy.float32)
        kern.launch(1, 128, [d_src.data.ptr, d_dst.data.ptr])
        cupy.cuda.runtime.deviceSynchronize()
        np.testing.assert_array_equal(cupy.asnumpy(d_dst), src)
