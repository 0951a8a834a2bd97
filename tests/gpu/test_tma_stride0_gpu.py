"""A global stride of 0 in a TMA tensor map (a broadcast dimension), on an sm_90a GPU.

nvatom.descriptors.tma accepts ``globalStrides[i] = 0`` because the driver does (the
review's device sweep found 139 such maps that cuTensorMapEncodeTiled accepted and nvatom
refused).  Proved here, for tiled maps of rank 2..5 with one or every stride 0, for interleave
32B and for an im2col map:

* the driver accepts the map and ``TensorMap.encode()`` (pure Python) writes the driver's 128
  bytes, and :func:`nvatom.descriptors.tma.decode` gives the map back;
* a TMA load (``cp.async.bulk.tensor``, tests.gpu.tma_kernels.load_store_module) through a
  map whose dimension 1 (then dimension 2) has stride 0 reads the same global row for every
  index of that dimension: each element of the box is checked against numpy indexing of the
  source buffer (fresh random data, NaN-poisoned output).
"""

from __future__ import annotations

import numpy as np
import pytest

from nvatom.descriptors import tma as tma_desc
from nvatom.descriptors.tma import TensorMap
from tests.gpu import tma_kernels as K
from tests.gpu.test_tma_gpu import _cu, _dev, _nan_bytes, launch

pytestmark = pytest.mark.gpu

F32 = np.float32


def _buffer(nbytes: int):
    import cupy

    _cu()  # skips unless sm_90 (the kernels are sm_90a), makes a context current
    return cupy.zeros(nbytes // 4 + 64, dtype=cupy.float32)


def _maps(addr: int) -> list[TensorMap]:
    t = []
    for rank in (2, 3, 4, 5):
        dims = (64, 8, 4, 3, 2)[:rank]
        packed = [256, 2048, 8192, 24576][:rank - 1]
        for zero in [*range(rank - 1), "all"]:
            strides = tuple(0 if zero in (j, "all") else s for j, s in enumerate(packed))
            t.append(TensorMap("tiled", "float32", addr, dims, strides,
                               box_dims=(16, 4, 2, 2, 1)[:rank]))
    t.append(TensorMap("tiled", "float16", addr, (64, 16, 4), (0, 256), box_dims=(16, 8, 2),
                       interleave="32B", swizzle=32))
    t.append(TensorMap("tiled", "bfloat16", addr, (64, 64), (0,), box_dims=(64, 32),
                       swizzle=128))
    t.append(TensorMap("im2col", "float32", addr, (16, 8, 8, 2), (0, 512, 4096),
                       channels_per_pixel=16, pixels_per_column=32,
                       pixel_box_lower_corner=(0, 0), pixel_box_upper_corner=(-1, -1)))
    return t


_N_MAPS = len(_maps(1 << 12))


@pytest.mark.parametrize("i", range(_N_MAPS))
def test_driver_encodes_zero_strides_as_our_encoder_does(i: int) -> None:
    """One map per case (tiled ranks 2..5 with each / every stride 0, then interleave 32B,
    SW128 bf16 and im2col), so a refusal names the map."""
    buf = _buffer(1 << 16)
    m = _maps(int(buf.data.ptr))[i]
    drv = m.encode_with_driver()  # raises DescriptorError naming the CUresult if refused
    assert m.encode() == drv, (m, m.encode().hex(), drv.hex())
    assert tma_desc.decode(drv) == m


@pytest.mark.parametrize("axis", [1, 2])
def test_tma_load_reads_a_broadcast_dimension(axis: int) -> None:
    """Source: 4 x 64 distinct floats.  The map is (64, 8, 4) innermost first; the stride of
    ``axis`` is 0 and the other one is 256 bytes, so element (x, y, z) is src[z, x] (axis 1)
    or src[y, x] (axis 2): the broadcast index selects nothing."""
    _cu()  # skips unless sm_90
    rng = np.random.default_rng()
    src = rng.standard_normal((8, 64)).astype(F32)  # rows enough for either axis
    d_src = _dev(src)
    strides = (0, 256) if axis == 1 else (256, 0)
    m = TensorMap("tiled", "float32", int(d_src.data.ptr), (64, 8, 4), strides,
                  box_dims=(16, 8, 2))
    drv = m.encode_with_driver()
    assert m.encode() == drv
    box, at = (16, 8, 2), (8, 0, 1)
    box_bytes = 16 * 8 * 2 * 4
    dump = _nan_bytes(box_bytes)
    launch(K.load_store_module(3, box_bytes), "tma_load_store",
           [("map", drv), ("map", drv), ("u64", dump.data.ptr),
            *[("s32", c) for c in at], *[("s32", 0)] * 3])
    got = dump.get().reshape(box[2], box[1], box[0])  # [z][y][x] of the box
    for z in range(box[2]):
        for y in range(box[1]):
            row = src[at[2] + z] if axis == 1 else src[at[1] + y]
            np.testing.assert_array_equal(got[z, y], row[at[0]:at[0] + box[0]],
                                          err_msg=f"axis {axis}: box element (*, {y}, {z})")
