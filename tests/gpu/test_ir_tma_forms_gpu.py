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

import numpy as np
import pytest

pytestmark = pytest.mark.gpu
pytest.importorskip("xdsl", reason="xdsl==0.74.0 not installed (pip install .whl/*.whl)")
cupy = pytest.importorskip("cupy")

from tests.gpu import ir_kernels as K  # noqa: E402


def _cc() -> str:
    try:
        return str(cupy.cuda.Device().compute_capability)
    except Exception:  # no device
        return ""


if _cc() != "90":
    pytest.skip("needs an sm_90 GPU (H100)", allow_module_level=True)


def _tma_round_trip(name: str, kernel: str) -> None:
    """Load the box at (x, y) of a row-major m x n f16 tensor and TMA-store it to the same
    place of a NaN-poisoned tensor: exactly the box must arrive."""
    kern, info = K.kernels(name)[kernel]
    rng = np.random.default_rng()
    for x, y in ((64, 64), (int(rng.integers(0, 4)) * 64, int(rng.integers(0, 3)) * 64),
                 (8 * int(rng.integers(0, 25)), int(rng.integers(0, 129)))):
        K.check_tma_round_trip(kern, info, 192, 256, x, y, fill=K.F16_NAN)  # n contiguous


def test_shared_cta_tma_load_moves_exactly_the_box() -> None:
    _tma_round_trip("tma_shared_cta.mlir", "tma_shared_cta")


def test_bulk_tensor_prefetch_then_load_moves_exactly_the_box() -> None:
    _tma_round_trip("tma_prefetch.mlir", "tma_prefetch")


def _copies_exactly(kernel: str, threads: int, shape: tuple[int, int], dtype: type) -> None:
    """One CTA of ``threads`` threads of tests/ir/copy_forms.mlir's ``kernel`` copies a
    row-major tile of ``dtype`` (fresh normal values) over a NaN-poisoned one: bit-exact."""
    kern, info = K.kernels("copy_forms.mlir")[kernel]
    assert info.threads == threads
    rng = np.random.default_rng()
    bits = {2: np.uint16, 4: np.uint32}[np.dtype(dtype).itemsize]
    for _ in range(3):
        src = rng.standard_normal(shape).astype(dtype)
        d_src = cupy.asarray(src)
        d_dst = cupy.full(shape, np.nan, dtype=dtype)
        kern.launch(1, threads, [d_src.data.ptr, d_dst.data.ptr])
        cupy.cuda.runtime.deviceSynchronize()
        np.testing.assert_array_equal(cupy.asnumpy(d_dst).view(bits), src.view(bits))


def test_generic_address_ldmatrix_stmatrix_is_an_identity() -> None:
    _copies_exactly("copy_generic", 32, (32, 8), np.float16)


def test_tiled_copy_moves_the_tile() -> None:
    _copies_exactly("tiled_copy", 128, (32, 16), np.float32)
