"""The TMA tensor-map model (nvatom.descriptors.tma).

Rules and enum codes come from the CUDA Driver API reference, "Tensor Map Object Management":
the entries of cuTensorMapEncodeTiled and cuTensorMapEncodeIm2col (globalAddress 16-byte
aligned, 32 with INTERLEAVE_32B; globalDim 1..2^32; globalStrides multiple of 16 and < 2^40,
of 32 with INTERLEAVE_32B; boxDim 1..256 and boxDim[0]*elemsize a multiple of 16 with
INTERLEAVE_NONE; elementStrides 1..8; INTERLEAVE_32B needs SWIZZLE_32B; inner box bytes <= the
swizzle span; NAN_REQUEST_ZERO_FMA only for float types; channelsPerPixel <= 256,
pixelsPerColumn <= 1024, corner offsets by rank).  Rank 3..5 for im2col: PTX ISA
"cp.async.bulk.tensor" (.im2col is 3d..5d).
"""

from __future__ import annotations

import re

import pytest

from nvatom.atoms.smem import smem_swizzle
from nvatom.descriptors.tma import TMA_DATA_TYPES, TensorMap, tma_data_type
from nvatom.errors import DescriptorError

BF16_2D = dict(
    kind="tiled",
    data_type="bf16",
    global_address=0x7F00_0000_0000,
    global_dims=(4096, 4096),
    global_strides=(8192,),
    box_dims=(64, 64),
    swizzle=128,
)


def test_bf16_2d_sw128_tile() -> None:
    m = TensorMap(**BF16_2D)
    assert m.rank == 2 and m.element_bytes == 2
    assert m.swizzle is smem_swizzle("SW128")
    assert m.element_strides == (1, 1)
    assert m.box_bytes == 64 * 64 * 2
    assert m.driver_args() == {
        "tensorDataType": 9,
        "tensorRank": 2,
        "globalAddress": 0x7F00_0000_0000,
        "globalDim": (4096, 4096),
        "globalStrides": (8192,),
        "boxDim": (64, 64),
        "elementStrides": (1, 1),
        "interleave": 0,
        "swizzle": 3,
        "l2Promotion": 0,
        "oobFill": 0,
    }
    with pytest.raises(AttributeError):
        m.global_address = 0  # type: ignore[misc]


def test_fp32_3d() -> None:
    m = TensorMap(
        kind="tiled",
        data_type="f32",
        global_address=0x1000,
        global_dims=(32, 128, 8),
        global_strides=(128, 128 * 128),
        box_dims=(16, 32, 2),
        element_strides=(1, 2, 1),
        swizzle="SW64",
        l2_promotion="128B",
        oob_fill="nan_request_zero_fma",
    )
    assert m.data_type.name == "float32"
    assert m.box_bytes == 16 * 4 * 16 * 2
    args = m.driver_args()
    assert (args["tensorDataType"], args["swizzle"], args["l2Promotion"], args["oobFill"]) == (
        7, 2, 2, 1
    )


def test_im2col_4d() -> None:
    m = TensorMap(
        kind="im2col",
        data_type="f16",
        global_address=0x2000,
        global_dims=(64, 32, 32, 4),
        global_strides=(128, 128 * 32, 128 * 32 * 32),
        pixel_box_lower_corner=(-1, -1),
        pixel_box_upper_corner=(1, 1),
        channels_per_pixel=64,
        pixels_per_column=128,
        swizzle=128,
    )
    args = m.driver_args()
    assert args["channelsPerPixel"] == 64 and "boxDim" not in args


def test_data_types() -> None:
    assert [t.code for t in TMA_DATA_TYPES] == list(range(13))
    assert tma_data_type("tf32").name == "tfloat32"
    assert tma_data_type("uint8").code == 0
    assert tma_data_type("s32").name == "int32"


def _bad(msg: str, **changes: object) -> None:
    with pytest.raises(DescriptorError, match="^" + re.escape(msg) + "$"):
        TensorMap(**{**BF16_2D, **changes})  # type: ignore[arg-type]


IM2COL = dict(
    kind="im2col",
    data_type="f16",
    global_address=0x2000,
    global_dims=(64, 32, 32, 4),
    global_strides=(128, 4096, 131072),
    box_dims=(),
    pixel_box_lower_corner=(-1, -1),
    pixel_box_upper_corner=(1, 1),
    channels_per_pixel=64,
    pixels_per_column=128,
)

NEGATIVE = [
    ("kind = 'gather' is not 'tiled' or 'im2col'", dict(kind="gather")),
    ("tensorRank = 6 is out of range for a tiled map (1..5)",
     dict(global_dims=(2,) * 6, global_strides=(16,) * 5, box_dims=(8,) * 6)),
    ("tensorRank = 2 is out of range for an im2col map (3..5)", dict(kind="im2col")),
    ("tensorDataType = 'e4m3' has no TMA data type (known: uint8, uint16, uint32, int32, "
     "uint64, int64, float16, float32, float64, bfloat16, float32_ftz, tfloat32, tfloat32_ftz)",
     dict(data_type="e4m3")),
    ("interleave = '64B' is not one of none, 16B, 32B", dict(interleave="64B")),
    ("swizzle = 256 is not a TMA swizzle mode (known: INTERLEAVE (0), SW32 (32), SW64 (64), "
     "SW128 (128))", dict(swizzle=256)),
    ("l2Promotion = '512B' is not one of none, 64B, 128B, 256B", dict(l2_promotion="512B")),
    ("oobFill = 'nan' is not one of none, nan_request_zero_fma", dict(oob_fill="nan")),
    ("globalAddress = 0x1008 is not 16-byte aligned", dict(global_address=0x1008)),
    ("globalAddress = 0x1010 is not 32-byte aligned (interleave 32B)",
     dict(global_address=0x1010, interleave="32B", swizzle=32)),
    ("globalDim[1] = 0 is out of range (1..2^32)", dict(global_dims=(64, 0))),
    ("globalDim[0] = 4294967297 is out of range (1..2^32)", dict(global_dims=(2**32 + 1, 4))),
    ("globalStrides has 2 entries, expected 1", dict(global_strides=(8192, 8192))),
    ("globalStrides[1] = 1000 bytes is not a multiple of 16", dict(global_strides=(1000,))),
    ("globalStrides[1] = 48 bytes is not a multiple of 32 (interleave 32B)",
     dict(global_strides=(48,), interleave="32B", swizzle=32)),
    ("globalStrides[1] = 1099511627776 bytes is out of range (0 or 16..2^40 - 16)",
     dict(global_strides=(2**40,))),
    ("boxDim has 1 entries, expected 2", dict(box_dims=(64,))),
    ("boxDim[1] = 257 is out of range (1..256)", dict(box_dims=(64, 257))),
    ("boxDim[0] = 0 is out of range (1..256)", dict(box_dims=(0, 64))),
    ("boxDim[0] = 4 x 2 bytes = 8 bytes is not a multiple of 16", dict(box_dims=(4, 64))),
    ("elementStrides[1] = 9 is out of range (1..8)", dict(element_strides=(1, 9))),
    ("elementStrides has 3 entries, expected 2", dict(element_strides=(1, 1, 1))),
    ("swizzle = SW128 with interleave 32B: the swizzle must be SW32",
     dict(interleave="32B", global_address=0x1020)),
    ("boxDim[0] = 128 x 2 bytes = 256 bytes exceeds the 128-byte span of swizzle SW128",
     dict(box_dims=(128, 64))),
    ("boxDim[0] = 32 x 2 bytes = 64 bytes exceeds the 32-byte span of swizzle SW32",
     dict(box_dims=(32, 64), swizzle="SW32")),
    ("oobFill = nan_request_zero_fma needs a floating-point tensorDataType, got int32",
     dict(data_type="int32", oob_fill="nan_request_zero_fma", box_dims=(32, 64))),
    ("globalDim[0] = 1.5 is not an integer", dict(global_dims=(1.5, 4))),
]


@pytest.mark.parametrize(("msg", "changes"), NEGATIVE, ids=[m[:40] for m, _ in NEGATIVE])
def test_tiled_rules(msg: str, changes: dict) -> None:
    _bad(msg, **changes)


IM2COL_NEGATIVE = [
    ("boxDim = (8, 8, 8, 8) is for tiled maps; an im2col map takes channelsPerPixel and "
     "pixelsPerColumn", dict(box_dims=(8, 8, 8, 8))),
    ("pixelBoxLowerCorner has 1 entries, expected 2", dict(pixel_box_lower_corner=(0,))),
    ("pixelBoxUpperCorner[1] = 128 is out of range for rank 4 (-128..127)",
     dict(pixel_box_upper_corner=(0, 128))),
    ("channelsPerPixel = 257 is out of range (1..256)", dict(channels_per_pixel=257)),
    ("pixelsPerColumn = 1025 is out of range (1..1024)", dict(pixels_per_column=1025)),
    ("channelsPerPixel = 128 x 2 bytes = 256 bytes exceeds the 128-byte span of swizzle SW128",
     dict(channels_per_pixel=128, swizzle=128)),
]


@pytest.mark.parametrize(
    ("msg", "changes"), IM2COL_NEGATIVE, ids=[m[:40] for m, _ in IM2COL_NEGATIVE]
)
def test_im2col_rules(msg: str, changes: dict) -> None:
    with pytest.raises(DescriptorError, match="^" + re.escape(msg) + "$"):
        TensorMap(**{**IM2COL, **changes})  # type: ignore[arg-type]


def test_interleave_lifts_box_rules() -> None:
    # With interleave 16B the swizzle-span rule does not apply (256 B inner box > SW128's 128 B).
    # The 16-byte inner-box rule still does: the driver refused every other inner size with
    # interleave (tests/data/tma_driver_corpus.json.gz sweep:il1_box0); and interleave
    # needs rank >= 3 (sweep:il_rank).
    m = TensorMap(**{**BF16_2D, "global_dims": (4096, 4096, 2), "global_strides": (8192, 1 << 25),
                     "interleave": "16B", "box_dims": (128, 64, 1)})  # type: ignore[arg-type]
    assert m.driver_args()["interleave"] == 1


@pytest.mark.parametrize("dim", [1, 2])
def test_a_zero_global_stride_is_a_broadcast_dimension(dim: int) -> None:
    # The driver accepts a global stride of 0 (a device sweep found 139
    # such maps accepted by cuTensorMapEncodeTiled; tests/gpu/test_tma_stride0_gpu.py encodes
    # them with the driver and reads the broadcast dimension back with a TMA load).
    strides = [8192, 8192 * 16]
    strides[dim - 1] = 0
    m = TensorMap(**{**BF16_2D, "global_dims": (4096, 16, 4),  # type: ignore[arg-type]
                     "global_strides": tuple(strides), "box_dims": (64, 8, 2)})
    assert m.driver_args()["globalStrides"] == tuple(strides)
    # 0 is a multiple of 32 too: interleave 32B accepts it.
    TensorMap(**{**BF16_2D, "global_dims": (4096, 16, 4), "global_strides": (0, 8192),
                 "interleave": "32B", "swizzle": 32, "box_dims": (16, 8, 2)})  # type: ignore[arg-type]
    _bad("globalStrides[1] = -16 bytes is out of range (0 or 16..2^40 - 16)",
         global_strides=(-16,))
