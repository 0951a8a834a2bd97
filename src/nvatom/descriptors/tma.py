"""A checked model of a TMA tensor map (the CUDA driver's ``CUtensorMap``).

A TMA copy (``cp.async.bulk.tensor``) reads its global tensor through a 128-byte tensor map that
the host builds with ``cuTensorMapEncodeTiled`` or ``cuTensorMapEncodeIm2col``.  The driver
rejects a bad argument with a bare ``CUDA_ERROR_INVALID_VALUE``; :class:`TensorMap` checks every
documented requirement first (in ``__post_init__``, so an invalid map never exists) and names the
field and the value in a :class:`~nvatom.errors.DescriptorError`.  :meth:`TensorMap.driver_args`
gives the driver's arguments (enum codes, innermost dimension first) for a map already checked;
:meth:`TensorMap.encode` gives the 128 bytes the driver would write, in pure Python
(:mod:`nvatom.descriptors.tma_encode`), and :meth:`TensorMap.encode_with_driver` asks the driver.

Sources: CUDA Driver API reference, section "Tensor Map Object Management"
(https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__TENSOR__MEMORY.html), the entries
of ``cuTensorMapEncodeTiled`` and ``cuTensorMapEncodeIm2col`` and the enums
``CUtensorMapDataType``, ``CUtensorMapInterleave``, ``CUtensorMapSwizzle``,
``CUtensorMapL2promotion`` and ``CUtensorMapFloatOOBfill``.  The rules checked, in order:

* ``tensorRank``: 1..5 for tiled maps, 3..5 for im2col (the PTX ``.im2col`` forms are 3d..5d,
  PTX ISA "cp.async.bulk.tensor").
* ``tensorDataType``: one of :data:`TMA_DATA_TYPES` (the driver's 13 classic types; the packed
  ``16U4``/``16U6`` types of SM100 are not modelled).
* ``globalAddress``: 16-byte aligned; 32-byte aligned when ``interleave`` is 32B; below 2^57
  (not in the documentation: the driver refused every address with a bit 57..63 set,
  tests/data/tma_driver_corpus.json.gz, group ``sweep:addr``).
* ``globalDim[i]``: 1 .. 2^32.
* ``globalStrides[i]`` (``rank - 1`` byte strides of dims 1..rank-1): a multiple of 16 (of 32
  when ``interleave`` is 32B) and less than 2^40.  0 is accepted: every index of that dimension
  reads the same bytes (a broadcast dimension).  The documentation's pseudo-code builds each
  stride from the previous one (``globalStrides[i] >= globalDim[i] ...``), but the driver checks
  no such relation (it accepted 1,003 maps of the corpus whose stride of dimension 1 is smaller
  than the row, and a 0 stride in the review's device sweep); tests/gpu/test_tma_stride0_gpu.py
  proves the 0-stride map on the GPU.
* tiled ``boxDim[i]``: 1 .. 256; ``boxDim[0] * elementSize`` (im2col: ``channelsPerPixel *
  elementSize``) is a multiple of 16 bytes.  The documentation asks this with ``interleave``
  none only; the driver refused every other inner size with 16B and 32B interleave too.
* the box fits in 228 KiB (:attr:`TensorMap.smem_bytes`; found on the driver, undocumented).
* im2col: ``pixelBoxLowerCorner`` / ``pixelBoxUpperCorner`` have ``rank - 2`` offsets each,
  within [-32768, 32767] (rank 3), [-128, 127] (rank 4), [-16, 15] (rank 5);
  ``channelsPerPixel`` 1 .. 256; ``pixelsPerColumn`` 1 .. 1024; the pixel box is not empty:
  ``globalDim[i + 1] - lower[i] + upper[i]`` is 1 .. 2^31 - 1 for each corner offset i (the
  driver's form of "non-zero area", found by sweeping corners and dims: it computes the span in
  signed 32 bits, so it refuses spans from 2^31 and accepts those that wrap to a positive value,
  which this model refuses too).
* ``tensorRank`` >= 3 when ``interleave`` is not none.
* ``elementStrides[i]``: 1 .. 8.
* ``swizzle``: a mode of :data:`nvatom.tables.swizzles.SMEM_SWIZZLES` (NONE/32B/64B/128B; the SM100
  ``128B_ATOM_*`` modes are not modelled, and the sm_90 driver refuses them); with
  ``interleave`` 32B it must be 32B (as documented: the driver accepts the others); with
  ``interleave`` none and a swizzle, the inner box dimension in bytes (``boxDim[0]``, or
  ``channelsPerPixel`` for im2col, times the element size) is at most the swizzle span.
* ``oobFill``: ``nan_request_zero_fma`` only for a floating-point ``tensorDataType``.
"""

from __future__ import annotations

import ctypes
import dataclasses
from collections.abc import Mapping
from typing import Any, Literal

from nvatom.descriptors.base import DescriptorType
from nvatom.descriptors.tma_encode import decode_args, decode_fields, encode
from nvatom.dtypes import DType, dtype
from nvatom.errors import DescriptorError, DTypeError
from nvatom.tables.swizzles import SMEM_SWIZZLES, SmemError, SmemSwizzle, smem_swizzle

__all__ = [
    "INTERLEAVES",
    "L2_PROMOTIONS",
    "MAX_BOX_DIM",
    "MAX_BOX_SMEM_BYTES",
    "MAX_ELEMENT_STRIDE",
    "MAX_GLOBAL_ADDRESS",
    "MAX_GLOBAL_DIM",
    "MAX_GLOBAL_STRIDE",
    "OOB_FILLS",
    "SWIZZLE_CODES",
    "TMA_DATA_TYPES",
    "TensorMap",
    "TmaDataType",
    "decode",
    "tma_data_type",
]


@dataclasses.dataclass(frozen=True)
class TmaDataType:
    """One ``CUtensorMapDataType`` value: its name, enum code, byte size, and float-ness."""

    name: str  # lower-case enum suffix: "bfloat16" for CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
    code: int
    nbytes: int
    is_float: bool

    @property
    def enum_name(self) -> str:
        return f"CU_TENSOR_MAP_DATA_TYPE_{self.name.upper()}"


#: ``CUtensorMapDataType`` (UINT8 = 0 ... TFLOAT32_FTZ = 12), with the byte sizes of the doc.
TMA_DATA_TYPES: tuple[TmaDataType, ...] = (
    TmaDataType("uint8", 0, 1, False),
    TmaDataType("uint16", 1, 2, False),
    TmaDataType("uint32", 2, 4, False),
    TmaDataType("int32", 3, 4, False),
    TmaDataType("uint64", 4, 8, False),
    TmaDataType("int64", 5, 8, False),
    TmaDataType("float16", 6, 2, True),
    TmaDataType("float32", 7, 4, True),
    TmaDataType("float64", 8, 8, True),
    TmaDataType("bfloat16", 9, 2, True),
    TmaDataType("float32_ftz", 10, 4, True),
    TmaDataType("tfloat32", 11, 4, True),
    TmaDataType("tfloat32_ftz", 12, 4, True),
)
_DATA_TYPE_BY_NAME = {t.name: t for t in TMA_DATA_TYPES}

#: nvatom dtype name -> driver type, where the driver has one.  Other types (e4m3, s8 ...) are
#: moved as raw bytes: pass the driver name ("uint8") explicitly.
_FROM_NVATOM = {
    "u8": "uint8",
    "s32": "int32",
    "f16": "float16",
    "f32": "float32",
    "f64": "float64",
    "bf16": "bfloat16",
    "tf32": "tfloat32",
}

#: ``CUtensorMapInterleave``: name -> (enum code, bytes).
INTERLEAVES: dict[str, tuple[int, int]] = {"none": (0, 0), "16B": (1, 16), "32B": (2, 32)}
#: ``CUtensorMapL2promotion``: name -> enum code.
L2_PROMOTIONS: dict[str, int] = {"none": 0, "64B": 1, "128B": 2, "256B": 3}
#: ``CUtensorMapFloatOOBfill``: name -> enum code.
OOB_FILLS: dict[str, int] = {"none": 0, "nan_request_zero_fma": 1}
#: ``CUtensorMapSwizzle`` code of each SMEM_SWIZZLES mode (by name): NONE 0, 32B 1, 64B 2, 128B 3.
SWIZZLE_CODES: dict[str, int] = {"INTERLEAVE": 0, "SW32": 1, "SW64": 2, "SW128": 3}
assert set(SWIZZLE_CODES) == {s.name for s in SMEM_SWIZZLES}

MAX_GLOBAL_ADDRESS = 1 << 57  # exclusive; found on the driver, not documented
MAX_GLOBAL_DIM = 1 << 32  # inclusive
#: The most bytes a box may hold (:attr:`TensorMap.smem_bytes`): 228 KiB, an SM's shared memory
#: on sm_90 (found on the driver: sweep:smem_limit; not in the documentation).
MAX_BOX_SMEM_BYTES = 228 * 1024
MAX_GLOBAL_STRIDE = 1 << 40  # exclusive
MAX_BOX_DIM = 256
MAX_ELEMENT_STRIDE = 8
MAX_CHANNELS_PER_PIXEL = 256
MAX_PIXELS_PER_COLUMN = 1024
#: im2col corner offset range by rank (rank - 2 offsets each).
IM2COL_CORNER_RANGE: dict[int, tuple[int, int]] = {3: (-32768, 32767), 4: (-128, 127), 5: (-16, 15)}

Kind = Literal["tiled", "im2col"]


def tma_data_type(t: str | DType | TmaDataType) -> TmaDataType:
    """The driver data type for a driver name ("bfloat16"), an nvatom dtype or its name/alias."""
    if isinstance(t, TmaDataType):
        return t
    if isinstance(t, str) and t.lower() in _DATA_TYPE_BY_NAME:
        return _DATA_TYPE_BY_NAME[t.lower()]
    try:
        d = dtype(t)
    except DTypeError:
        d = None
    if d is not None and d.name in _FROM_NVATOM:
        return _DATA_TYPE_BY_NAME[_FROM_NVATOM[d.name]]
    known = ", ".join(_DATA_TYPE_BY_NAME)
    shown = t.name if isinstance(t, DType) else t
    raise DescriptorError(f"tensorDataType = {shown!r} has no TMA data type (known: {known})")


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _ints(name: str, values: Any) -> tuple[int, ...]:
    try:
        out = tuple(values)
    except TypeError:
        raise DescriptorError(f"{name} = {values!r} is not a sequence of integers") from None
    for i, v in enumerate(out):
        if not _is_int(v):
            raise DescriptorError(f"{name}[{i}] = {v!r} is not an integer")
    return out


def _check_len(name: str, values: tuple[int, ...], n: int) -> None:
    if len(values) != n:
        raise DescriptorError(f"{name} has {len(values)} entries, expected {n}")


@dataclasses.dataclass(frozen=True)
class TensorMap(DescriptorType):
    """The arguments of ``cuTensorMapEncodeTiled`` / ``cuTensorMapEncodeIm2col``, checked.

    Dimensions are innermost first, as the driver takes them: ``global_dims[0]`` is the
    contiguous one, and ``global_strides`` holds the ``rank - 1`` byte strides of dims 1..rank-1.
    ``box_dims`` is for tiled maps only; an im2col map gives ``pixel_box_lower_corner``,
    ``pixel_box_upper_corner``, ``channels_per_pixel`` and ``pixels_per_column`` instead.
    ``element_strides`` defaults to all ones.  ``swizzle`` is anything
    :func:`nvatom.tables.swizzles.smem_swizzle` accepts (0/32/64/128, "SW128", an SmemSwizzle).
    """

    kind: Kind
    data_type: TmaDataType | DType | str
    global_address: int
    global_dims: tuple[int, ...]
    global_strides: tuple[int, ...]
    box_dims: tuple[int, ...] = ()
    element_strides: tuple[int, ...] = ()
    interleave: str = "none"
    swizzle: SmemSwizzle | int | str = 0
    l2_promotion: str = "none"
    oob_fill: str = "none"
    pixel_box_lower_corner: tuple[int, ...] = ()
    pixel_box_upper_corner: tuple[int, ...] = ()
    channels_per_pixel: int = 0
    pixels_per_column: int = 0

    def __post_init__(self) -> None:
        def put(name: str, value: Any) -> None:
            object.__setattr__(self, name, value)

        if self.kind not in ("tiled", "im2col"):
            raise DescriptorError(f"kind = {self.kind!r} is not 'tiled' or 'im2col'")
        dims = _ints("globalDim", self.global_dims)
        rank = len(dims)
        lo = 1 if self.kind == "tiled" else 3
        if not lo <= rank <= 5:
            what = "a tiled" if lo == 1 else "an im2col"
            raise DescriptorError(f"tensorRank = {rank} is out of range for {what} map ({lo}..5)")
        put("global_dims", dims)
        dt = tma_data_type(self.data_type)
        put("data_type", dt)

        if self.interleave not in INTERLEAVES:
            raise DescriptorError(
                f"interleave = {self.interleave!r} is not one of {', '.join(INTERLEAVES)}"
            )
        il_bytes = INTERLEAVES[self.interleave][1]
        try:
            sw = smem_swizzle(self.swizzle)
        except SmemError:
            known = ", ".join(f"{s.name} ({s.nbytes})" for s in SMEM_SWIZZLES)
            raise DescriptorError(
                f"swizzle = {self.swizzle!r} is not a TMA swizzle mode (known: {known})"
            ) from None
        put("swizzle", sw)
        if self.l2_promotion not in L2_PROMOTIONS:
            raise DescriptorError(
                f"l2Promotion = {self.l2_promotion!r} is not one of {', '.join(L2_PROMOTIONS)}"
            )
        if self.oob_fill not in OOB_FILLS:
            raise DescriptorError(
                f"oobFill = {self.oob_fill!r} is not one of {', '.join(OOB_FILLS)}"
            )

        addr = self.global_address
        align = 32 if il_bytes == 32 else 16
        if not _is_int(addr) or addr < 0 or addr >= 1 << 64:
            raise DescriptorError(f"globalAddress = {addr!r} is not a 64-bit address")
        if addr >= MAX_GLOBAL_ADDRESS:
            raise DescriptorError(f"globalAddress = {addr:#x} is not below 2^57")
        if addr % align:
            why = " (interleave 32B)" if align == 32 else ""
            raise DescriptorError(
                f"globalAddress = {addr:#x} is not {align}-byte aligned{why}"
            )

        for i, d in enumerate(dims):
            if not 1 <= d <= MAX_GLOBAL_DIM:
                raise DescriptorError(f"globalDim[{i}] = {d} is out of range (1..2^32)")

        strides = _ints("globalStrides", self.global_strides)
        _check_len("globalStrides", strides, rank - 1)
        put("global_strides", strides)
        smult = 32 if il_bytes == 32 else 16
        for j, s in enumerate(strides):
            i = j + 1  # the stride of dimension i
            if s % smult:
                why = " (interleave 32B)" if smult == 32 else ""
                raise DescriptorError(
                    f"globalStrides[{i}] = {s} bytes is not a multiple of {smult}{why}"
                )
            if not 0 <= s < MAX_GLOBAL_STRIDE:  # 0: a broadcast dimension (the driver's rule)
                raise DescriptorError(
                    f"globalStrides[{i}] = {s} bytes is out of range (0 or 16..2^40 - 16)"
                )

        if self.kind == "tiled":
            box = _ints("boxDim", self.box_dims)
            _check_len("boxDim", box, rank)
            put("box_dims", box)
            for i, b in enumerate(box):
                if not 1 <= b <= MAX_BOX_DIM:
                    raise DescriptorError(f"boxDim[{i}] = {b} is out of range (1..256)")
            inner_bytes = box[0] * dt.nbytes
            inner_what = f"boxDim[0] = {box[0]}"
        else:
            self._check_im2col(rank)
            inner_bytes = self.channels_per_pixel * dt.nbytes
            inner_what = f"channelsPerPixel = {self.channels_per_pixel}"
        # Documented for interleave none only; the driver enforces it with interleave too.
        if inner_bytes % 16:
            raise DescriptorError(
                f"{inner_what} x {dt.nbytes} bytes = {inner_bytes} bytes is not a multiple of 16"
            )

        es = _ints("elementStrides", self.element_strides or (1,) * rank)
        _check_len("elementStrides", es, rank)
        put("element_strides", es)
        for i, e in enumerate(es):
            if not 1 <= e <= MAX_ELEMENT_STRIDE:
                raise DescriptorError(f"elementStrides[{i}] = {e} is out of range (1..8)")

        if il_bytes == 32 and sw.nbytes != 32:
            raise DescriptorError(
                f"swizzle = {sw.name} with interleave 32B: the swizzle must be SW32"
            )
        if il_bytes == 0 and sw.nbytes and inner_bytes > sw.nbytes:
            raise DescriptorError(
                f"{inner_what} x {dt.nbytes} bytes = {inner_bytes} bytes exceeds the "
                f"{sw.nbytes}-byte span of swizzle {sw.name}"
            )
        if self.oob_fill == "nan_request_zero_fma" and not dt.is_float:
            raise DescriptorError(
                f"oobFill = nan_request_zero_fma needs a floating-point tensorDataType, "
                f"got {dt.name}"
            )
        if il_bytes and rank < 3:
            raise DescriptorError(
                f"interleave = {self.interleave} needs tensorRank >= 3, got {rank}"
            )
        if self.smem_bytes > MAX_BOX_SMEM_BYTES:
            what = ("elementSize x prod(floor(boxDim[i] / elementStrides[i]))"
                    if self.kind == "tiled" else
                    "elementSize x channelsPerPixel x pixelsPerColumn")
            raise DescriptorError(
                f"the box holds {self.smem_bytes} bytes ({what}), more than the "
                f"{MAX_BOX_SMEM_BYTES} bytes (228 KiB) of shared memory the driver allows"
            )

    def _check_im2col(self, rank: int) -> None:
        if self.box_dims:
            raise DescriptorError(
                f"boxDim = {tuple(self.box_dims)} is for tiled maps; an im2col map takes "
                "channelsPerPixel and pixelsPerColumn"
            )
        lo, hi = IM2COL_CORNER_RANGE[rank]
        for name, attr in (
            ("pixelBoxLowerCorner", "pixel_box_lower_corner"),
            ("pixelBoxUpperCorner", "pixel_box_upper_corner"),
        ):
            corner = _ints(name, getattr(self, attr))
            _check_len(name, corner, rank - 2)
            object.__setattr__(self, attr, corner)
            for i, c in enumerate(corner):
                if not lo <= c <= hi:
                    raise DescriptorError(
                        f"{name}[{i}] = {c} is out of range for rank {rank} ({lo}..{hi})"
                    )
        for name, value, top in (
            ("channelsPerPixel", self.channels_per_pixel, MAX_CHANNELS_PER_PIXEL),
            ("pixelsPerColumn", self.pixels_per_column, MAX_PIXELS_PER_COLUMN),
        ):
            if not _is_int(value) or not 1 <= value <= top:
                raise DescriptorError(f"{name} = {value!r} is out of range (1..{top})")
        # "The bounding box ... must have non-zero area": along spatial dimension i + 1 the box
        # spans globalDim[i + 1] - lower[i] + upper[i] pixels, which the driver evaluates as a
        # signed 32-bit number that must be positive (found by sweeping corners and dims).
        dims = self.global_dims
        for i, (lo_c, up_c) in enumerate(
            zip(self.pixel_box_lower_corner, self.pixel_box_upper_corner, strict=True)
        ):
            span = dims[i + 1] - lo_c + up_c
            if not 0 < span < 1 << 31:
                raise DescriptorError(
                    f"pixelBoxLowerCorner[{i}] = {lo_c} and pixelBoxUpperCorner[{i}] = {up_c} "
                    f"give a pixel box of {span} along globalDim[{i + 1}] = {dims[i + 1]} "
                    "(globalDim - lower + upper must be 1..2^31 - 1)"
                )

    # --- derived --------------------------------------------------------------------------
    @property
    def rank(self) -> int:
        return len(self.global_dims)

    @property
    def element_bytes(self) -> int:
        dt = self.data_type
        assert isinstance(dt, TmaDataType)
        return dt.nbytes

    @property
    def smem_bytes(self) -> int:
        """The byte count the driver stores in the map and checks against 228 KiB (found on
        the driver, tests/data/tma_driver_corpus.json.gz): for a tiled map the element size
        times ``floor(boxDim[i] / elementStrides[i])`` over every dimension (dimension 0
        included, rounded down, unlike :attr:`box_bytes`); for an im2col map
        ``channelsPerPixel * pixelsPerColumn`` elements."""
        n = self.element_bytes
        if self.kind == "im2col":
            return n * self.channels_per_pixel * self.pixels_per_column
        for b, e in zip(self.box_dims, self.element_strides, strict=True):
            n *= b // e
        return n

    @property
    def box_bytes(self) -> int:
        """Bytes one tiled box copies into shared memory (elements strided by element_strides:
        ``ceil(boxDim[i] / elementStrides[i])`` along i; dimension 0 is never strided with
        interleave none)."""
        if self.kind != "tiled":
            raise DescriptorError("box_bytes is defined for tiled maps only")
        n = self.element_bytes
        for i, (b, e) in enumerate(zip(self.box_dims, self.element_strides, strict=True)):
            if i == 0 and self.interleave == "none":
                e = 1
            n *= -(-b // e)
        return n

    def driver_args(self) -> dict[str, Any]:
        """The driver call's arguments (without ``tensorMap``), enums as their integer codes.

        ``globalStrides`` has ``rank - 1`` entries, so none for rank 1.  The C API still needs a
        non-NULL pointer there: the driver returns CUDA_ERROR_INVALID_VALUE for a NULL
        ``globalStrides`` at any rank, and cuda.bindings passes NULL for an empty list.
        :meth:`encode_with_driver` passes a one-element array instead, whose value the driver
        does not read (tests/data/tma_driver_corpus.json.gz ``meta.rank1``)."""
        dt = self.data_type
        sw = self.swizzle
        assert isinstance(dt, TmaDataType) and isinstance(sw, SmemSwizzle)
        args: dict[str, Any] = {
            "tensorDataType": dt.code,
            "tensorRank": self.rank,
            "globalAddress": self.global_address,
            "globalDim": self.global_dims,
            "globalStrides": self.global_strides,
        }
        if self.kind == "tiled":
            args["boxDim"] = self.box_dims
        else:
            args["pixelBoxLowerCorner"] = self.pixel_box_lower_corner
            args["pixelBoxUpperCorner"] = self.pixel_box_upper_corner
            args["channelsPerPixel"] = self.channels_per_pixel
            args["pixelsPerColumn"] = self.pixels_per_column
        args.update(
            elementStrides=self.element_strides,
            interleave=INTERLEAVES[self.interleave][0],
            swizzle=SWIZZLE_CODES[sw.name],
            l2Promotion=L2_PROMOTIONS[self.l2_promotion],
            oobFill=OOB_FILLS[self.oob_fill],
        )
        return args

    # --- the 128 bytes -----------------------------------------------------------------------
    def encode(self) -> bytes:
        """The 128-byte ``CUtensorMap`` the driver writes for this map, computed in pure Python
        (no GPU needed; :mod:`nvatom.descriptors.tma_encode` has the layout)."""
        return encode(self)

    def encode_with_driver(self) -> bytes:
        """The 128 bytes from ``cuTensorMapEncodeTiled`` / ``cuTensorMapEncodeIm2col`` through
        cuda.bindings (the driver needs a current context: device 0's primary context is made
        current when there is none).  Raises :class:`DescriptorError`
        with the CUresult name when the driver refuses the map, or when cuda.bindings or the
        driver is missing."""
        return _driver_encode(self.kind, self.driver_args())

    def to_bytes(self, driver: bool | None = None) -> bytes:
        """The 128 bytes: from the driver when ``driver`` is true, from :meth:`encode` when it is
        false, and when None from the driver if cuda.bindings and a driver load, else
        :meth:`encode`."""
        if driver is None:
            driver = driver_available()
        return self.encode_with_driver() if driver else self.encode()


def decode(data: bytes | bytearray | str) -> TensorMap:
    """The :class:`TensorMap` whose encoding is ``data`` (128 bytes, or their hex text).

    Raises :class:`DescriptorError` on bits outside every field, on an unknown element format,
    and when the derived fields disagree with the rest (so ``decode(b).encode() == b``); the bit
    layout is :mod:`nvatom.descriptors.tma_encode`'s."""
    kind, args = decode_args(data)

    def name_of(table: Mapping[str, Any], value: int, what: str) -> str:
        for name, c in table.items():
            if (c[0] if isinstance(c, tuple) else c) == value:
                return name
        raise DescriptorError(f"{what} = {value} is no known code")

    kw: dict[str, Any] = dict(
        kind=kind,
        data_type=next(t for t in TMA_DATA_TYPES if t.code == args["tensorDataType"]),
        global_address=args["globalAddress"],
        global_dims=args["globalDim"],
        global_strides=args["globalStrides"],
        element_strides=args["elementStrides"],
        interleave=name_of(INTERLEAVES, args["interleave"], "interleave"),
        swizzle=(0, 32, 64, 128)[args["swizzle"]],
        l2_promotion=name_of(L2_PROMOTIONS, args["l2Promotion"], "l2_promotion"),
        oob_fill=name_of(OOB_FILLS, args["oobFill"], "oob_nan"),
    )
    if kind == "tiled":
        kw["box_dims"] = args["boxDim"]
    else:
        kw.update(
            channels_per_pixel=args["channelsPerPixel"],
            pixels_per_column=args["pixelsPerColumn"],
            pixel_box_lower_corner=args["pixelBoxLowerCorner"],
            pixel_box_upper_corner=args["pixelBoxUpperCorner"],
        )
    tm = TensorMap(**kw)
    # no bits outside the fields (decode_args checked), so equal fields are equal bytes
    raw, diff = decode_fields(data), decode_fields(tm.encode())
    if diff != raw:
        bad = [f"{k} = {raw[k]} (expected {diff[k]})" for k in diff if diff[k] != raw.get(k)]
        raise DescriptorError("inconsistent tensor map: " + ", ".join(bad))
    return tm


def driver_available() -> bool:
    """Whether cuda.bindings imports and ``cuInit`` succeeds (a CUDA driver and a device)."""
    try:
        from cuda.bindings import driver as cu

        (err,) = cu.cuInit(0)
        if int(err) == 0:
            err, n = cu.cuDeviceGetCount()
    except Exception:  # ImportError, or the driver library failing to load
        return False
    return int(err) == 0 and n > 0


def _ensure_context(cu: Any) -> None:
    """The encoders return CUDA_ERROR_INVALID_CONTEXT without a current context (seen on the
    device, corpus ``meta.no_context``): make device 0's primary context current if none is."""
    err, ctx = cu.cuCtxGetCurrent()
    if int(err) == 0 and int(ctx) != 0:
        return
    err, dev = cu.cuDeviceGet(0)
    if int(err) == 0:
        err, ctx = cu.cuDevicePrimaryCtxRetain(dev)
    if int(err) == 0:
        (err,) = cu.cuCtxSetCurrent(ctx)
    if int(err):
        raise DescriptorError(f"no CUDA context for the tensor-map encoder: {err.name}")


def _driver_encode(kind: str, args: dict[str, Any]) -> bytes:
    """Call the driver's encoder with ``args`` (as :meth:`TensorMap.driver_args` gives them)."""

    try:
        from cuda.bindings import driver as cu
    except ImportError as e:
        raise DescriptorError(f"the CUDA driver encoder needs cuda.bindings ({e})") from None
    (err,) = cu.cuInit(0)
    if int(err):
        raise DescriptorError(f"cuInit failed: {err.name}")
    _ensure_context(cu)
    u64, u32 = cu.cuuint64_t, cu.cuuint32_t
    common = dict(
        tensorDataType=cu.CUtensorMapDataType(args["tensorDataType"]),
        tensorRank=u32(args["tensorRank"]),
        globalAddress=args["globalAddress"],
        globalDim=[u64(d) for d in args["globalDim"]],
        # an empty list becomes NULL, which the driver refuses: rank 1 gets a dummy entry
        globalStrides=[u64(s) for s in args["globalStrides"]] or [u64(0)],
    )
    tail = dict(
        elementStrides=[u32(e) for e in args["elementStrides"]],
        interleave=cu.CUtensorMapInterleave(args["interleave"]),
        swizzle=cu.CUtensorMapSwizzle(args["swizzle"]),
        l2Promotion=cu.CUtensorMapL2promotion(args["l2Promotion"]),
        oobFill=cu.CUtensorMapFloatOOBfill(args["oobFill"]),
    )
    if kind == "tiled":
        err, tm = cu.cuTensorMapEncodeTiled(
            **common, boxDim=[u32(b) for b in args["boxDim"]], **tail)
    else:
        err, tm = cu.cuTensorMapEncodeIm2col(
            **common,
            pixelBoxLowerCorner=list(args["pixelBoxLowerCorner"]),
            pixelBoxUpperCorner=list(args["pixelBoxUpperCorner"]),
            channelsPerPixel=u32(args["channelsPerPixel"]),
            pixelsPerColumn=u32(args["pixelsPerColumn"]),
            **tail,
        )
    if int(err):
        fn = "cuTensorMapEncodeTiled" if kind == "tiled" else "cuTensorMapEncodeIm2col"
        raise DescriptorError(f"{fn} refused the map: {err.name}")
    return ctypes.string_at(tm.getPtr(), 128)
