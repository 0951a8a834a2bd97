"""The 128 bytes of a ``CUtensorMap``, encoded and decoded in pure Python (no GPU, no driver).

``cuTensorMapEncodeTiled`` / ``cuTensorMapEncodeIm2col`` write an opaque 128-byte object that
``cp.async.bulk.tensor`` reads (PTX ISA, "Tensor-map" under "Tensors"; the driver calls are in
the CUDA Driver API section "Tensor Map Object Management").  NVIDIA documents no layout.  The
layout below was read off the driver's output: ``scripts/tma_corpus.py`` encoded a corpus of
configurations on the device, most of them varying one argument of a base map at a time, the rest
random; every field was found as the bytes that one argument moves, and :func:`encode` reproduces
every accepted map of the corpus byte for byte (tests/descriptors/test_tma_encode.py, against
tests/data/tma_driver_corpus.json.gz; the recording device, driver and date are in that file's
``meta``).  Findings, in the driver's own terms:

* the driver writes all 128 bytes (a map prefilled with 0xAA or 0x55 came back identical) and the
  result depends on the arguments alone (the same call twice gives the same bytes); bytes 74..127
  and the unlisted bits below were zero in every map;
* the address is stored verbatim (bytes 0..7) and must be below 2^57;
* global strides are stored as ``stride >> 4`` split 32 + 4 bits, global dims and box dims as
  ``value - 1``, element strides as ``value - 1`` in 3-bit fields;
* the data type becomes a 4-bit element format and a separate tf32 bit: FLOAT32 and TFLOAT32
  share format 7, FLOAT32_FTZ and TFLOAT32_FTZ share format 8, FLOAT64 is 9 and BFLOAT16 is 10;
* two fields are derived, not given: a byte count (``smem_bytes``: for a tiled map the element
  size times the product of ``floor(boxDim[i] / elementStrides[i])``, every dimension including
  dimension 0; for an im2col map ``channelsPerPixel * pixelsPerColumn * elementSize``) and a
  16-bit word that varied with the swizzle mode alone (16 for NONE, 8x the swizzle span in bytes
  otherwise: 256, 512, 1024).  Both are named here by what varies them; what the hardware does
  with them is not documented.

The SM100-only arguments (the packed ``16U4``/``16U6`` data types and the ``128B_ATOM_*``
swizzles) were refused by the driver on the recording device (sm_90), so their encoding is not
known and :func:`encode_args` refuses them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from nvatom.errors import DescriptorError

__all__ = [
    "FIELDS",
    "MAP_BYTES",
    "Field",
    "decode_args",
    "decode_fields",
    "encode",
    "encode_args",
    "explain",
]

MAP_BYTES = 128
#: The address must be below 2^57 (the driver refused every address bit 57..63).
ADDRESS_LIMIT = 1 << 57

#: ``CUtensorMapDataType`` code -> (element format, tf32 flag, element bytes).
_FORMATS: dict[int, tuple[int, int, int]] = {
    0: (0, 0, 1),  # UINT8
    1: (1, 0, 2),  # UINT16
    2: (2, 0, 4),  # UINT32
    3: (3, 0, 4),  # INT32
    4: (4, 0, 8),  # UINT64
    5: (5, 0, 8),  # INT64
    6: (6, 0, 2),  # FLOAT16
    7: (7, 0, 4),  # FLOAT32
    8: (9, 0, 8),  # FLOAT64
    9: (10, 0, 2),  # BFLOAT16
    10: (8, 0, 4),  # FLOAT32_FTZ
    11: (7, 1, 4),  # TFLOAT32
    12: (8, 1, 4),  # TFLOAT32_FTZ
}
_DTYPE_OF_FORMAT = {(f, t): code for code, (f, t, _) in _FORMATS.items()}
#: swizzle code (NONE, 32B, 64B, 128B) -> the derived 16-bit word at byte 72.
_SWIZZLE_WORD = {0: 16, 1: 256, 2: 512, 3: 1024}
#: im2col corner field width by rank: the rank - 2 offsets share 16 bits.
_CORNER_BITS = {3: 16, 4: 8, 5: 5}


@dataclasses.dataclass(frozen=True)
class Field:
    """One field of the 128-byte map: ``width`` bits at bit ``bit`` of the little-endian
    1024-bit integer (byte ``bit // 8``); ``kinds`` says which maps use it."""

    name: str
    bit: int
    width: int
    meaning: str
    kinds: tuple[str, ...] = ("tiled", "im2col")

    @property
    def byte(self) -> int:
        return self.bit // 8

    @property
    def dim(self) -> int | None:
        """The dimension a per-dimension field belongs to (``boxDim[2]`` -> 2), else None."""
        if "[" not in self.name:
            return None
        return int(self.name.split("[")[1].split("]")[0])

    def get(self, word: int) -> int:
        return (word >> self.bit) & ((1 << self.width) - 1)


def _fields() -> tuple[Field, ...]:
    f = [
        Field("globalAddress", 0, 64, "global address, verbatim (< 2^57)"),
        Field("im2col", 64, 1, "1 for an im2col map, 0 for tiled"),
        Field("rank_minus_1", 68, 3, "tensorRank - 1"),
        Field("format", 71, 4, "element format (from tensorDataType; see _FORMATS)"),
        Field("interleave", 75, 2, "CUtensorMapInterleave code"),
        Field("swizzle", 77, 2, "CUtensorMapSwizzle code (NONE/32B/64B/128B)"),
        Field("oob_nan", 79, 1, "oobFill NAN_REQUEST_ZERO_FMA"),
        Field("tf32", 80, 1, "1 for TFLOAT32 / TFLOAT32_FTZ"),
        Field("l2_promotion", 81, 2, "CUtensorMapL2promotion code"),
    ]
    for i in range(4):
        f.append(Field(f"globalStrides[{i + 1}]_lo", 96 + 32 * i, 32,
                       f"bits 4..35 of the byte stride of dimension {i + 1}"))
    for i in range(4):
        f.append(Field(f"globalStrides[{i + 1}]_hi", 224 + 4 * i, 4,
                       f"bits 36..39 of the byte stride of dimension {i + 1}"))
    for i in range(5):
        f.append(Field(f"globalDim[{i}]", 256 + 32 * i, 32, f"globalDim[{i}] - 1"))
    for i in range(5):
        f.append(Field(f"elementStrides[{i}]", 416 + 3 * i, 3, f"elementStrides[{i}] - 1"))
    for i in range(5):
        f.append(Field(f"boxDim[{i}]", 440 + 8 * i, 8, f"boxDim[{i}] - 1", ("tiled",)))
    f += [
        Field("channelsPerPixel", 440, 8, "channelsPerPixel - 1", ("im2col",)),
        Field("pixelBoxLowerCorner", 448, 16,
              "the rank-2 lower-corner offsets, 16/8/5 bits each (rank 3/4/5)", ("im2col",)),
        Field("pixelBoxUpperCorner", 464, 16, "the upper-corner offsets, packed alike",
              ("im2col",)),
        Field("pixelsPerColumn", 480, 16, "pixelsPerColumn - 1", ("im2col",)),
        Field("smem_bytes", 512, 32,
              "derived: elementSize * prod(floor(boxDim[i] / elementStrides[i])) (tiled), "
              "elementSize * channelsPerPixel * pixelsPerColumn (im2col)"),
        Field("swizzle_word", 576, 16,
              "derived from the swizzle alone: 16 (NONE), 256 / 512 / 1024 (32B / 64B / 128B)"),
    ]
    return tuple(f)


#: Every field of the map, in address order (bits not covered were zero in every driver map).
FIELDS: tuple[Field, ...] = _fields()
_BY_NAME = {f.name: f for f in FIELDS if f.name != "channelsPerPixel"}
_CHANNELS = next(f for f in FIELDS if f.name == "channelsPerPixel")


def _fields_of(kind: str) -> tuple[Field, ...]:
    return tuple(f for f in FIELDS if kind in f.kinds)


def _covered_mask(kind: str) -> int:
    m = 0
    for f in _fields_of(kind):
        m |= ((1 << f.width) - 1) << f.bit
    return m


def _put(word: int, field: Field, value: int) -> int:
    if not 0 <= value < 1 << field.width:
        raise DescriptorError(f"{field.name} = {value} does not fit its {field.width}-bit field")
    return word | (value << field.bit)


def encode_args(kind: str, args: Mapping[str, Any]) -> bytes:
    """The 128 bytes for driver arguments as :meth:`TensorMap.driver_args` gives them (enum
    codes, innermost dimension first).  Checks only what the encoding needs (field widths and
    the codes whose encoding is known); :class:`~nvatom.descriptors.tma.TensorMap` checks the
    documented rules."""
    if kind not in ("tiled", "im2col"):
        raise DescriptorError(f"kind = {kind!r} is not 'tiled' or 'im2col'")
    code = args["tensorDataType"]
    if code not in _FORMATS:
        raise DescriptorError(
            f"tensorDataType = {code} has no known encoding (codes 0..12; the packed SM100 "
            "types were refused by the driver on sm_90)"
        )
    swizzle = args["swizzle"]
    if swizzle not in _SWIZZLE_WORD:
        raise DescriptorError(
            f"swizzle = {swizzle} has no known encoding (codes 0..3; the SM100 128B_ATOM_* "
            "modes were refused by the driver on sm_90)"
        )
    fmt, tf32, esize = _FORMATS[code]
    rank = args["tensorRank"]
    dims: Sequence[int] = args["globalDim"]
    strides: Sequence[int] = args["globalStrides"]
    estr: Sequence[int] = args["elementStrides"]
    if not 1 <= rank <= 5 or len(dims) != rank or len(estr) != rank:
        raise DescriptorError(f"tensorRank = {rank} does not match globalDim/elementStrides")
    if len(strides) != rank - 1:
        raise DescriptorError(f"globalStrides has {len(strides)} entries, expected {rank - 1}")
    addr = args["globalAddress"]
    if not 0 <= addr < ADDRESS_LIMIT:
        raise DescriptorError(f"globalAddress = {addr:#x} is not below 2^57")

    w = 0
    w = _put(w, _BY_NAME["globalAddress"], addr)
    w = _put(w, _BY_NAME["im2col"], int(kind == "im2col"))
    w = _put(w, _BY_NAME["rank_minus_1"], rank - 1)
    w = _put(w, _BY_NAME["format"], fmt)
    w = _put(w, _BY_NAME["interleave"], args["interleave"])
    w = _put(w, _BY_NAME["swizzle"], swizzle)
    w = _put(w, _BY_NAME["oob_nan"], args["oobFill"])
    w = _put(w, _BY_NAME["tf32"], tf32)
    w = _put(w, _BY_NAME["l2_promotion"], args["l2Promotion"])
    for i, s in enumerate(strides):
        if s % 16 or not 0 <= s < 1 << 40:  # 0: a broadcast dimension, stored as 0
            raise DescriptorError(f"globalStrides[{i + 1}] = {s} is not a multiple of 16 "
                                  "in 0..2^40 - 16")
        w = _put(w, _BY_NAME[f"globalStrides[{i + 1}]_lo"], (s >> 4) & 0xFFFFFFFF)
        w = _put(w, _BY_NAME[f"globalStrides[{i + 1}]_hi"], s >> 36)
    for i, d in enumerate(dims):
        w = _put(w, _BY_NAME[f"globalDim[{i}]"], d - 1)
    for i, e in enumerate(estr):
        w = _put(w, _BY_NAME[f"elementStrides[{i}]"], e - 1)
    if kind == "tiled":
        box: Sequence[int] = args["boxDim"]
        if len(box) != rank:
            raise DescriptorError(f"boxDim has {len(box)} entries, expected {rank}")
        nbytes = esize
        for i, (b, e) in enumerate(zip(box, estr, strict=True)):
            w = _put(w, _BY_NAME[f"boxDim[{i}]"], b - 1)
            nbytes *= b // e
    else:
        if rank < 3:
            raise DescriptorError(f"tensorRank = {rank}: an im2col map has rank 3..5")
        cpp, ppc = args["channelsPerPixel"], args["pixelsPerColumn"]
        w = _put(w, _CHANNELS, cpp - 1)
        bits = _CORNER_BITS[rank]
        for name in ("pixelBoxLowerCorner", "pixelBoxUpperCorner"):
            corner: Sequence[int] = args[name]
            if len(corner) != rank - 2:
                raise DescriptorError(f"{name} has {len(corner)} entries, expected {rank - 2}")
            packed = 0
            for i, c in enumerate(corner):
                if not -(1 << (bits - 1)) <= c < 1 << (bits - 1):
                    raise DescriptorError(f"{name}[{i}] = {c} does not fit {bits} signed bits")
                packed |= (c & ((1 << bits) - 1)) << (bits * i)
            w = _put(w, _BY_NAME[name], packed)
        w = _put(w, _BY_NAME["pixelsPerColumn"], ppc - 1)
        nbytes = esize * cpp * ppc
    w = _put(w, _BY_NAME["smem_bytes"], nbytes)
    w = _put(w, _BY_NAME["swizzle_word"], _SWIZZLE_WORD[swizzle])
    return w.to_bytes(MAP_BYTES, "little")


def encode(tensor_map: Any) -> bytes:
    """The 128 bytes the CUDA driver writes for ``tensor_map`` (a checked
    :class:`~nvatom.descriptors.tma.TensorMap`)."""
    return encode_args(tensor_map.kind, tensor_map.driver_args())


def _word(data: bytes | bytearray | str) -> int:
    if isinstance(data, str):
        try:
            data = bytes.fromhex(data.replace(" ", "").replace("\n", ""))
        except ValueError:
            raise DescriptorError("a tensor map in hex must hold hex digits only") from None
    if len(data) != MAP_BYTES:
        raise DescriptorError(f"a tensor map is {MAP_BYTES} bytes, got {len(data)}")
    return int.from_bytes(bytes(data), "little")


def _kind(word: int) -> str:
    return "im2col" if _BY_NAME["im2col"].get(word) else "tiled"


def decode_fields(data: bytes | bytearray | str) -> dict[str, int]:
    """The raw value of every field used by this map's kind (no checks, no ``- 1`` undone)."""
    word = _word(data)
    return {f.name: f.get(word) for f in _fields_of(_kind(word))}


def decode_args(data: bytes | bytearray | str) -> tuple[str, dict[str, Any]]:
    """The kind (``"tiled"``/``"im2col"``) and the driver arguments whose encoding is ``data``,
    as :func:`encode_args` takes them (enum codes, innermost dimension first).

    Raises :class:`DescriptorError` on bits outside every field, on an unknown element format
    and on a rank above 5; the codes are not checked against the enums
    (:func:`nvatom.descriptors.tma.decode` names them and builds the checked map)."""
    word = _word(data)
    kind = _kind(word)
    stray = word & ~_covered_mask(kind)
    if stray:
        bits = [b for b in range(MAP_BYTES * 8) if stray >> b & 1]
        raise DescriptorError(f"bits {bits[:8]} are set outside every field of a {kind} map")
    v = {f.name: f.get(word) for f in _fields_of(kind)}
    key = (v["format"], v["tf32"])
    if key not in _DTYPE_OF_FORMAT:
        raise DescriptorError(f"format = {v['format']} (tf32 = {v['tf32']}) is no known data type")
    rank = v["rank_minus_1"] + 1
    if rank > 5:
        raise DescriptorError(f"rank_minus_1 = {rank - 1} gives a rank above 5")
    args: dict[str, Any] = {
        "tensorDataType": _DTYPE_OF_FORMAT[key],
        "tensorRank": rank,
        "globalAddress": v["globalAddress"],
        "globalDim": tuple(v[f"globalDim[{i}]"] + 1 for i in range(rank)),
        "globalStrides": tuple(
            (v[f"globalStrides[{i}]_hi"] << 32 | v[f"globalStrides[{i}]_lo"]) << 4
            for i in range(1, rank)
        ),
    }
    if kind == "tiled":
        args["boxDim"] = tuple(v[f"boxDim[{i}]"] + 1 for i in range(rank))
    else:
        if rank not in _CORNER_BITS:  # the driver's im2col maps have rank 3 to 5
            raise DescriptorError(f"an im2col map has rank 3 to 5; rank_minus_1 = {rank - 1} "
                                  f"gives rank {rank}")
        bits = _CORNER_BITS[rank]

        def unpack(packed: int) -> tuple[int, ...]:
            out = []
            for i in range(rank - 2):
                x = packed >> (bits * i) & ((1 << bits) - 1)
                out.append(x - (1 << bits) if x >> (bits - 1) else x)
            return tuple(out)

        args["pixelBoxLowerCorner"] = unpack(v["pixelBoxLowerCorner"])
        args["pixelBoxUpperCorner"] = unpack(v["pixelBoxUpperCorner"])
        args["channelsPerPixel"] = _CHANNELS.get(word) + 1
        args["pixelsPerColumn"] = v["pixelsPerColumn"] + 1
    args.update(
        elementStrides=tuple(v[f"elementStrides[{i}]"] + 1 for i in range(rank)),
        interleave=v["interleave"],
        swizzle=v["swizzle"],
        l2Promotion=v["l2_promotion"],
        oobFill=v["oob_nan"],
    )
    return kind, args


def explain(data: bytes | bytearray | str) -> str:
    """A hex dump of the map, 8 bytes a line, then every field with its byte range and value."""
    word = _word(data)
    raw = word.to_bytes(MAP_BYTES, "little")
    kind = _kind(word)
    lines = []
    last_nonzero = max((i for i in range(MAP_BYTES) if raw[i]), default=0)
    for off in range(0, MAP_BYTES, 8):
        chunk = raw[off:off + 8]
        if off > last_nonzero and not any(chunk):
            lines.append(f"  {off:3d}..{MAP_BYTES - 1}: zero")
            break
        lines.append(f"  {off:3d}: {chunk.hex(' ')}")
    rank = _BY_NAME["rank_minus_1"].get(word) + 1
    lines.append(f"fields ({kind} map, rank {rank}; fields of dimensions >= {rank} omitted):")
    for f in _fields_of(kind):
        if f.dim is not None and f.dim >= rank:
            continue
        val = f.get(word)
        end = (f.bit + f.width - 1) // 8
        where = f"byte {f.byte}" if end == f.byte else f"bytes {f.byte}..{end}"
        lines.append(f"  {f.name:<24} {where:<14} bits {f.bit % 8}+{f.width:<3} "
                     f"= {val:#x}  {f.meaning}")
    return "\n".join(lines)
