"""Element types of NVIDIA tensor-core operands, with exact encode/decode.

This module models the scalar element types that MMA, WGMMA, UMMA and block-scaled MMA atoms
consume or produce: IEEE f64/f32/f16, the "alternate" floating-point formats (bf16, tf32, the
OCP 8-bit formats e4m3/e5m2, the OCP MX 6- and 4-bit formats e3m2/e2m3/e2m1, the scale formats
ue8m0/ue4m3), and the integer/bit types s32/s8/u8/s4/u4/b1.

Every type is one immutable :class:`DType` record in the declarative table ``_TABLE``; each
record re-derives its range constants from its bit fields in ``__post_init__`` and refuses to
exist if they disagree.  On top of the table sit exact, vectorised numpy conversions:

* :func:`decode`: bit patterns -> exact float64 values (NaN / +-inf where the format has them),
* :func:`encode`: values -> bit patterns, with the rounding modes and the overflow / NaN rules
  of PTX ``cvt`` for that destination format,
* :func:`pack` / :func:`unpack` / :func:`pack_b32` / :func:`unpack_b32`: sub-byte packing and
  packing into the 32-bit registers that MMA fragments are made of (element 0 in the lowest bits).

Sources (see docs/dtypes.md for the per-rule citations):

* PTX ISA (9.x), section "Alternate Floating-Point Data Formats" (bf16, e4m3, e5m2, tf32, e2m1,
  e2m3, e3m2, ue8m0, ue4m3: widths, NaN/inf policy, register containers), and the ``cvt``
  instruction ("Data Movement and Conversion Instructions: cvt"): rounding modifiers per
  destination type, ``.satfinite`` (mandatory for e4m3x2/e5m2x2/e2m1x2/e2m3x2/e3m2x2), the NaN
  results (NaN, or positive MAX_NORM for the formats without NaN), and the packing order.
* OCP 8-bit Floating Point Specification (OFP8) rev. 1.0: E4M3 and E5M2 encodings, special
  values, saturating and non-saturating conversion.
* OCP Microscaling Formats (MX) Specification v1.0: FP6 (E2M3, E3M2), FP4 (E2M1) element formats
  and the E8M0 scale format.
* IEEE 754-2019 for binary16/32/64.

Values are handled as float64.  ``encode`` rounds each float64 input exactly once (there is no
hidden trip through float32); to reproduce a PTX ``cvt`` from an ``.f32`` register bit-exactly,
pass float32-representable inputs.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import cache
from types import MappingProxyType
from typing import Any, Literal, get_args

import numpy as np
import numpy.typing as npt

from nvatom.errors import DTypeError

__all__ = [
    "DTYPES",
    "DType",
    "Kind",
    "NanPolicy",
    "Rounding",
    "all_dtypes",
    "decode",
    "dtype",
    "encode",
    "pack",
    "pack_b32",
    "pack_codes",
    "unpack",
    "unpack_b32",
    "unpack_codes",
    "values",
]

Kind = Literal["float", "int", "bits"]
#: ``ieee``: all-ones exponent is inf (mantissa 0) or NaN.  ``fn``: finite, the single pattern
#: S.1..1.1..1 is NaN (OCP E4M3).  ``fnu``: unsigned, all-ones is NaN (E8M0, UE4M3).
#: ``none``: every pattern is a finite number (MX FP6/FP4, integers).
NanPolicy = Literal["ieee", "fn", "fnu", "none"]
#: PTX ``cvt`` floating-point rounding modifiers: to nearest even, to nearest ties away from
#: zero, toward zero, toward -inf, toward +inf.
Rounding = Literal["rn", "rna", "rz", "rm", "rp"]

_KINDS: tuple[str, ...] = get_args(Kind)
_NAN_POLICIES: tuple[str, ...] = get_args(NanPolicy)
_ROUNDINGS: tuple[str, ...] = get_args(Rounding)
_STORAGE_WIDTHS = (1, 4, 8, 16, 32, 64)
_MAX_ENUMERABLE_BITS = 20  # values() / all_codes() refuse wider encodings


@dataclass(frozen=True, repr=False)
class DType:
    """One element type.  Instances live in the module table; look them up with :func:`dtype`.

    Width fields (all in bits):

    * ``encoding_bits``: bits the encoding itself uses (e2m1 4, e2m3 6, ue4m3 7, tf32 19).
    * ``storage_bits``: container of one element in a register or in memory when not packed
      (e2m1/e2m3/e3m2/ue4m3: 8; tf32: 32; s4/u4: 4; b1: 1).  Use this for K-per-instruction
      arithmetic (256 / storage_bits).
    * ``pack_bits``: default pitch of :func:`pack` / :func:`pack_b32` (e2m1: 4, two per
      byte as PTX ``.e2m1x2``; every other type: ``storage_bits``).
    * ``low_pad_bits``: zero bits below the encoding inside a code (tf32: 13, the code is the
      32-bit container); 6/7-bit formats are padded at the top instead (MSBs zero).

    A *code* is the unsigned integer bit pattern of one element as it sits in its container
    (``numpy_storage`` dtype).  Float fields are ``None`` for the integer/bit types.
    """

    name: str
    ptx: str | None
    kind: Kind
    signed: bool
    encoding_bits: int
    storage_bits: int
    pack_bits: int
    exponent_bits: int = 0
    mantissa_bits: int = 0
    bias: int = 0
    has_inf: bool = False
    nan: NanPolicy = "none"
    subnormals: bool = True
    max_finite: float | None = None
    min_normal: float | None = None
    min_subnormal: float | None = None
    low_pad_bits: int = 0
    #: PTX ``cvt`` rounding modifiers that produce this type (ints/bits: none).
    roundings: tuple[Rounding, ...] = ()
    #: rounding used when ``encode`` is given none; ``None`` means "must be explicit".
    default_rounding: Rounding | None = None
    #: whether ``encode`` saturates (``.satfinite``) when not told.
    satfinite_default: bool = False
    aliases: tuple[str, ...] = ()
    note: str = ""

    def __post_init__(self) -> None:
        problems = list(_consistency_problems(self))
        if problems:
            raise DTypeError(
                f"inconsistent element type record {self.name!r}: " + "; ".join(problems)
            )

    # -- identity ---------------------------------------------------------------------------
    def __repr__(self) -> str:
        return f"DType({self.name!r})"

    def __str__(self) -> str:
        return self.name

    # -- classification ---------------------------------------------------------------------
    @property
    def is_float(self) -> bool:
        return self.kind == "float"

    @property
    def is_int(self) -> bool:
        """Integer or bit type (s32, s8, u8, s4, u4, b1)."""
        return self.kind != "float"

    @property
    def is_narrow_float(self) -> bool:
        """A float that fits a byte: e4m3, e5m2, e3m2, e2m3, e2m1, ue8m0, ue4m3."""
        return self.kind == "float" and self.storage_bits <= 8

    @property
    def code_bits(self) -> int:
        """Width of a code: the encoding plus its low padding (tf32: 32)."""
        return self.encoding_bits + self.low_pad_bits

    @property
    def numpy_storage(self) -> type[np.unsignedinteger[Any]]:
        """Unsigned numpy scalar type holding one code (np.uint8 for every sub-byte type)."""
        return _uint_for(self.storage_bits)

    # -- ranges -----------------------------------------------------------------------------
    @property
    def int_min(self) -> int | None:
        if self.kind == "float":
            return None
        return -(1 << (self.encoding_bits - 1)) if self.signed else 0

    @property
    def int_max(self) -> int | None:
        if self.kind == "float":
            return None
        return (1 << (self.encoding_bits - 1)) - 1 if self.signed else (1 << self.encoding_bits) - 1

    @property
    def emin(self) -> int | None:
        """Exponent of the smallest normal binade (also the subnormal exponent); floats only."""
        if self.kind != "float":
            return None
        return (1 - self.bias) if self.subnormals else -self.bias

    # -- special codes ----------------------------------------------------------------------
    @property
    def nan_code(self) -> int | None:
        """Canonical NaN code (positive, all value bits set), or None without NaN."""
        if self.nan == "none":
            return None
        if self.nan == "ieee":
            enc = (1 << (self.exponent_bits + self.mantissa_bits)) - 1
        else:  # fn and fnu: the one all-ones magnitude pattern
            enc = (1 << (self.encoding_bits - int(self.signed))) - 1
        return enc << self.low_pad_bits

    @property
    def inf_code(self) -> int | None:
        """Code of +inf, or None without inf."""
        if not self.has_inf:
            return None
        return ((1 << self.exponent_bits) - 1) << (self.mantissa_bits + self.low_pad_bits)

    @property
    def max_code(self) -> int | None:
        """Code of +max_finite (floats) or of int_max (ints)."""
        if self.kind != "float":
            return self.int_max
        assert self.max_finite is not None
        enc = int(_magnitude_to_encoding(self, np.array([self.max_finite]))[0])
        return enc << self.low_pad_bits

    def all_codes(self) -> np.ndarray:
        """Every valid code of this type in increasing order (encodings of <= 20 bits only)."""
        if self.encoding_bits > _MAX_ENUMERABLE_BITS:
            raise DTypeError(
                f"{self.name} has 2**{self.encoding_bits} codes; refusing to enumerate them"
            )
        codes = np.arange(1 << self.encoding_bits, dtype=np.uint64) << np.uint64(self.low_pad_bits)
        return codes.astype(self.numpy_storage)


def _uint_for(bits: int) -> type[np.unsignedinteger[Any]]:
    if bits <= 8:
        return np.uint8
    if bits <= 16:
        return np.uint16
    if bits <= 32:
        return np.uint32
    return np.uint64


# --------------------------------------------------------------------------------------------
# Range constants derived from the bit fields (used to check the declared table values)
# --------------------------------------------------------------------------------------------


def _max_fields(d: DType) -> tuple[int, int]:
    """(exponent field, mantissa field) of the largest finite magnitude."""
    e, m = d.exponent_bits, d.mantissa_bits
    if d.nan == "ieee":
        return (1 << e) - 2, (1 << m) - 1
    if d.nan in ("fn", "fnu"):
        if m == 0:  # the all-ones exponent is NaN: drop one binade
            return (1 << e) - 2, 0
        return (1 << e) - 1, (1 << m) - 2
    return (1 << e) - 1, (1 << m) - 1


def _derived_constants(d: DType) -> tuple[float, float | None, float | None]:
    """(max_finite, min_normal, min_subnormal) computed from the bit fields alone."""
    m = d.mantissa_bits
    emin = (1 - d.bias) if d.subnormals else -d.bias
    field, mant = _max_fields(d)
    max_finite = math.ldexp((1 << m) + mant, field - d.bias - m)
    min_normal = math.ldexp(1.0, emin)
    min_subnormal = math.ldexp(1.0, emin - m) if (d.subnormals and m > 0) else None
    return max_finite, min_normal, min_subnormal


def _consistency_problems(d: DType) -> Iterator[str]:
    if not re.fullmatch(r"[a-z][a-z0-9]*", d.name):
        yield "name must be lower-case alphanumeric"
    if d.ptx is not None and not re.fullmatch(r"\.[a-z][a-z0-9]*", d.ptx):
        yield f"PTX spelling {d.ptx!r} must look like '.e4m3'"
    if d.kind not in _KINDS:
        yield f"kind {d.kind!r} not in {_KINDS}"
    if d.nan not in _NAN_POLICIES:
        yield f"nan policy {d.nan!r} not in {_NAN_POLICIES}"
    if d.storage_bits not in _STORAGE_WIDTHS:
        yield f"storage_bits {d.storage_bits} not in {_STORAGE_WIDTHS}"
    if d.encoding_bits < 1 or d.low_pad_bits < 0:
        yield "encoding_bits must be >= 1 and low_pad_bits >= 0"
    if d.code_bits > d.storage_bits:
        yield f"a {d.code_bits}-bit code does not fit its {d.storage_bits}-bit container"
    if not d.code_bits <= d.pack_bits <= d.storage_bits:
        yield f"pack_bits {d.pack_bits} must lie in [code_bits, storage_bits]"
    if len(set(d.roundings)) != len(d.roundings) or not set(d.roundings) <= set(_ROUNDINGS):
        yield f"roundings {d.roundings} must be distinct members of {_ROUNDINGS}"
    if d.default_rounding is not None and d.default_rounding not in d.roundings:
        yield f"default rounding {d.default_rounding!r} not among {d.roundings}"
    if len(set(d.aliases)) != len(d.aliases) or d.name in d.aliases:
        yield "aliases must be distinct and differ from the name"
    if d.kind == "float":
        yield from _float_problems(d)
    else:
        fields = (d.exponent_bits, d.mantissa_bits, d.bias, d.low_pad_bits)
        if any(fields) or d.has_inf or d.nan != "none" or not d.subnormals:
            yield "integer/bit types carry no exponent, mantissa, bias, padding, inf or NaN"
        if (d.max_finite, d.min_normal, d.min_subnormal) != (None, None, None):
            yield "integer/bit types have no float range constants"
        if d.roundings or d.satfinite_default:
            yield "integer/bit types have no rounding modes or satfinite default"
        if d.storage_bits != d.encoding_bits:
            yield "integer/bit types fill their container"
        if d.kind == "bits" and d.signed:
            yield "bit types are unsigned"


def _float_problems(d: DType) -> Iterator[str]:
    e, m = d.exponent_bits, d.mantissa_bits
    if e < 0 or m < 0 or e + m == 0:
        yield "a float needs exponent_bits + mantissa_bits >= 1"
    if d.encoding_bits != int(d.signed) + e + m:
        yield f"encoding_bits {d.encoding_bits} != sign {int(d.signed)} + {e} + {m}"
    if d.has_inf != (d.nan == "ieee"):
        yield "inf exists exactly in the IEEE-like NaN policy"
    if d.nan == "ieee" and e < 2:
        yield "an IEEE-like format needs >= 2 exponent bits"
    if d.nan == "fn" and (not d.signed or m == 0):
        yield "the 'fn' policy (S.1..1.1..1 is NaN) needs a sign and a mantissa"
    if d.nan == "fnu" and d.signed:
        yield "the 'fnu' policy is for unsigned formats"
    if not d.subnormals and m != 0:
        yield "only mantissa-less formats (E8M0) may lack subnormals"
    if not d.roundings:
        yield "a float must list at least one rounding mode"
    declared = (d.max_finite, d.min_normal, d.min_subnormal)
    derived = _derived_constants(d)
    for label, want, got in zip(
        ("max_finite", "min_normal", "min_subnormal"), declared, derived, strict=True
    ):
        if want != got:
            yield f"declared {label} {want!r} != {got!r} derived from the bit fields"


# --------------------------------------------------------------------------------------------
# The table
# --------------------------------------------------------------------------------------------

_IEEE_ROUNDINGS: tuple[Rounding, ...] = ("rn", "rz", "rm", "rp")

_TABLE: tuple[DType, ...] = (
    DType(
        name="f64", ptx=".f64", kind="float", signed=True,
        encoding_bits=64, storage_bits=64, pack_bits=64,
        exponent_bits=11, mantissa_bits=52, bias=1023, has_inf=True, nan="ieee",
        max_finite=float.fromhex("0x1.fffffffffffffp+1023"),
        min_normal=2.0**-1022, min_subnormal=2.0**-1074,
        roundings=_IEEE_ROUNDINGS, default_rounding="rn",
        aliases=("Float64", "F64", "FP64", "float64", "double"),
        note="IEEE binary64.",
    ),
    DType(
        name="f32", ptx=".f32", kind="float", signed=True,
        encoding_bits=32, storage_bits=32, pack_bits=32,
        exponent_bits=8, mantissa_bits=23, bias=127, has_inf=True, nan="ieee",
        max_finite=float.fromhex("0x1.fffffep+127"),
        min_normal=2.0**-126, min_subnormal=2.0**-149,
        roundings=_IEEE_ROUNDINGS, default_rounding="rn",
        aliases=("Float32", "F32", "FP32", "float32", "float"),
        note="IEEE binary32; the accumulator type of every floating-point MMA.",
    ),
    DType(
        name="tf32", ptx=".tf32", kind="float", signed=True,
        encoding_bits=19, storage_bits=32, pack_bits=32, low_pad_bits=13,
        exponent_bits=8, mantissa_bits=10, bias=127, has_inf=True, nan="ieee",
        max_finite=float.fromhex("0x1.ffcp+127"),
        min_normal=2.0**-126, min_subnormal=2.0**-136,
        roundings=("rn", "rna", "rz"), default_rounding="rn",
        aliases=("TFloat32", "TF32", "tfloat32", "tfloat32_t"),
        note="f32 range, 10 mantissa bits, in a .b32 container whose low 13 bits are zero "
        "(PTX leaves the layout implementation-defined; this is what cvt.*.tf32.f32 yields; "
        "an sm_90 MMA reading a raw f32 truncates those bits, i.e. acts like rounding='rz').",
    ),
    DType(
        name="f16", ptx=".f16", kind="float", signed=True,
        encoding_bits=16, storage_bits=16, pack_bits=16,
        exponent_bits=5, mantissa_bits=10, bias=15, has_inf=True, nan="ieee",
        max_finite=65504.0, min_normal=2.0**-14, min_subnormal=2.0**-24,
        roundings=_IEEE_ROUNDINGS, default_rounding="rn",
        aliases=("Float16", "F16", "FP16", "float16", "half", "half_t"),
        note="IEEE binary16.",
    ),
    DType(
        name="bf16", ptx=".bf16", kind="float", signed=True,
        encoding_bits=16, storage_bits=16, pack_bits=16,
        exponent_bits=8, mantissa_bits=7, bias=127, has_inf=True, nan="ieee",
        max_finite=float.fromhex("0x1.fep+127"),
        min_normal=2.0**-126, min_subnormal=2.0**-133,
        roundings=_IEEE_ROUNDINGS, default_rounding="rn",
        aliases=("BFloat16", "BF16", "bfloat16", "bfloat16_t"),
        note="bfloat16: the top half of an f32.",
    ),
    DType(
        name="e4m3", ptx=".e4m3", kind="float", signed=True,
        encoding_bits=8, storage_bits=8, pack_bits=8,
        exponent_bits=4, mantissa_bits=3, bias=7, has_inf=False, nan="fn",
        max_finite=448.0, min_normal=2.0**-6, min_subnormal=2.0**-9,
        roundings=("rn",), default_rounding="rn", satfinite_default=True,
        aliases=("Float8E4M3FN", "f8E4M3FN", "E4M3FN", "float8_e4m3fn", "float_e4m3_t", "FP8E4M3"),
        note="OCP E4M3: no inf, NaN only S.1111.111 (0x7f, 0xff).",
    ),
    DType(
        name="e5m2", ptx=".e5m2", kind="float", signed=True,
        encoding_bits=8, storage_bits=8, pack_bits=8,
        exponent_bits=5, mantissa_bits=2, bias=15, has_inf=True, nan="ieee",
        max_finite=57344.0, min_normal=2.0**-14, min_subnormal=2.0**-16,
        roundings=("rn",), default_rounding="rn", satfinite_default=True,
        aliases=("Float8E5M2", "f8E5M2", "float8_e5m2", "float_e5m2_t", "FP8E5M2"),
        note="OCP E5M2: IEEE-like, with inf and NaN.",
    ),
    DType(
        name="e3m2", ptx=".e3m2", kind="float", signed=True,
        encoding_bits=6, storage_bits=8, pack_bits=8,
        exponent_bits=3, mantissa_bits=2, bias=3, has_inf=False, nan="none",
        max_finite=28.0, min_normal=0.25, min_subnormal=0.0625,
        roundings=("rn",), default_rounding="rn", satfinite_default=True,
        aliases=("Float6E3M2FN", "f6E3M2FN", "E3M2FN", "float6_e3m2fn", "float_e3m2_t"),
        note="OCP MX FP6 E3M2: no inf, no NaN; 6 bits in a byte, 2 MSBs zero.",
    ),
    DType(
        name="e2m3", ptx=".e2m3", kind="float", signed=True,
        encoding_bits=6, storage_bits=8, pack_bits=8,
        exponent_bits=2, mantissa_bits=3, bias=1, has_inf=False, nan="none",
        max_finite=7.5, min_normal=1.0, min_subnormal=0.125,
        roundings=("rn",), default_rounding="rn", satfinite_default=True,
        aliases=("Float6E2M3FN", "f6E2M3FN", "E2M3FN", "float6_e2m3fn", "float_e2m3_t"),
        note="OCP MX FP6 E2M3: no inf, no NaN; 6 bits in a byte, 2 MSBs zero.",
    ),
    DType(
        name="e2m1", ptx=".e2m1", kind="float", signed=True,
        encoding_bits=4, storage_bits=8, pack_bits=4,
        exponent_bits=2, mantissa_bits=1, bias=1, has_inf=False, nan="none",
        max_finite=6.0, min_normal=1.0, min_subnormal=0.5,
        roundings=("rn",), default_rounding="rn", satfinite_default=True,
        aliases=("Float4E2M1FN", "f4E2M1FN", "E2M1FN", "float4_e2m1fn", "float_e2m1_t"),
        note="OCP MX FP4 E2M1: no inf, no NaN; packed two per byte (.e2m1x2), or one per "
        "byte in kind::f8f6f4 operands.",
    ),
    DType(
        name="ue8m0", ptx=".ue8m0", kind="float", signed=False,
        encoding_bits=8, storage_bits=8, pack_bits=8,
        exponent_bits=8, mantissa_bits=0, bias=127, has_inf=False, nan="fnu", subnormals=False,
        max_finite=2.0**127, min_normal=2.0**-127, min_subnormal=None,
        roundings=("rz", "rp"), default_rounding=None, satfinite_default=True,
        aliases=("Float8E8M0FNU", "f8E8M0FNU", "E8M0", "E8M0FNU", "float8_e8m0fnu",
                 "float_ue8m0_t", "UE8M0"),
        note="OCP MX E8M0 scale: 2**(e-127), 0xff NaN, no zero, no inf, no sign.",
    ),
    DType(
        name="ue4m3", ptx=".ue4m3", kind="float", signed=False,
        encoding_bits=7, storage_bits=8, pack_bits=8,
        exponent_bits=4, mantissa_bits=3, bias=7, has_inf=False, nan="fnu",
        max_finite=448.0, min_normal=2.0**-6, min_subnormal=2.0**-9,
        roundings=("rn",), default_rounding="rn", satfinite_default=True,
        aliases=("UE4M3", "float_ue4m3_t"),
        note="Unsigned E4M3 (NVFP4 scale): 7 bits in a byte, MSB zero, 0x7f NaN, no inf.",
    ),
    DType(
        name="s32", ptx=".s32", kind="int", signed=True,
        encoding_bits=32, storage_bits=32, pack_bits=32,
        aliases=("Int32", "i32", "si32", "int32", "int32_t"),
        note="Integer MMA accumulator.",
    ),
    DType(
        name="s8", ptx=".s8", kind="int", signed=True,
        encoding_bits=8, storage_bits=8, pack_bits=8,
        aliases=("Int8", "i8", "si8", "int8", "int8_t"),
    ),
    DType(
        name="u8", ptx=".u8", kind="int", signed=False,
        encoding_bits=8, storage_bits=8, pack_bits=8,
        aliases=("Uint8", "ui8", "uint8", "uint8_t"),
    ),
    DType(
        name="s4", ptx=".s4", kind="int", signed=True,
        encoding_bits=4, storage_bits=4, pack_bits=4,
        aliases=("Int4", "i4", "si4", "int4", "int4b_t"),
        note="Two per byte, low nibble first.",
    ),
    DType(
        name="u4", ptx=".u4", kind="int", signed=False,
        encoding_bits=4, storage_bits=4, pack_bits=4,
        aliases=("Uint4", "ui4", "uint4", "uint4b_t"),
        note="Two per byte, low nibble first.",
    ),
    DType(
        name="b1", ptx=".b1", kind="bits", signed=False,
        encoding_bits=1, storage_bits=1, pack_bits=1,
        aliases=("u1", "i1", "uint1b_t", "bin1"),
        note="Single bits, 32 per .b32 register, bit i = element i (.xor.popc / .and.popc MMA).",
    ),
)

#: canonical name -> record, in table order
DTYPES: Mapping[str, DType] = MappingProxyType({d.name: d for d in _TABLE})

F64, F32, TF32, F16, BF16 = (DTYPES[n] for n in ("f64", "f32", "tf32", "f16", "bf16"))
E4M3, E5M2, E3M2, E2M3, E2M1 = (DTYPES[n] for n in ("e4m3", "e5m2", "e3m2", "e2m3", "e2m1"))
UE8M0, UE4M3 = (DTYPES[n] for n in ("ue8m0", "ue4m3"))
S32, S8, U8, S4, U4, B1 = (DTYPES[n] for n in ("s32", "s8", "u8", "s4", "u4", "b1"))


def _build_index() -> tuple[dict[str, str], dict[str, str]]:
    exact: dict[str, str] = {}
    folded: dict[str, str] = {}
    for d in _TABLE:
        for key in (d.name, *d.aliases):
            for table, k in ((exact, key), (folded, key.casefold())):
                if table.get(k, d.name) != d.name:
                    raise DTypeError(f"alias {key!r} names both {table[k]!r} and {d.name!r}")
                table[k] = d.name
    return exact, folded


_EXACT, _FOLDED = _build_index()

# Spellings that are deliberately *not* aliases, with the reason shown to the user.
_HINTS: Mapping[str, str] = MappingProxyType({
    "float8e4m3": "MLIR's Float8E4M3 is the IEEE-style E4M3 (with inf, max 240), a different "
    "format; PTX e4m3 is Float8E4M3FN, and the unsigned scale type is ue4m3",
    "f8e4m3": "MLIR's f8E4M3 is the IEEE-style E4M3 (with inf, max 240), a different format; "
    "PTX e4m3 is f8E4M3FN, and the unsigned scale type is ue4m3",
    "fp8": "FP8 is a family: pick e4m3 or e5m2",
    "fp6": "FP6 is a family: pick e2m3 or e3m2",
    "fp4": "FP4 is a family: pick e2m1",
    "floatnv4e0m3f": "the specification's FloatNV4E0M3F ('NVFP4, 0 exponent, 3 mantissa') is "
    "not a hardware element format: NVFP4 elements are e2m1, scaled by ue4m3 per 16 elements "
    "(PTX ISA kind::mxf4nvf4); use e2m1",
    "mxfp4": "MXFP4 is a block-scaled format: e2m1 elements with ue8m0 scales",
    "nvfp4": "NVFP4 is a block-scaled format: e2m1 elements with ue4m3 scales",
    "mxfp8": "MXFP8 is a block-scaled format: e4m3/e5m2 elements with ue8m0 scales",
})


def all_dtypes() -> tuple[DType, ...]:
    """Every element type, in table order."""
    return _TABLE


def _resolve(key: str) -> str | None:
    candidates = [key]
    if key.startswith("."):
        candidates.append(key[1:])  # PTX spelling
    for prefix in ("cutlass::", "cutlass."):
        if key.startswith(prefix):
            candidates.append(key[len(prefix):])
    candidates += [c[:-4] for c in list(candidates) if c.endswith("Type") and len(c) > 4]
    for c in candidates:
        if c in _EXACT:
            return _EXACT[c]
    for c in candidates:
        if c.casefold() in _FOLDED:
            return _FOLDED[c.casefold()]
    return None


def dtype(name: str | DType) -> DType:
    """Look an element type up by canonical name, PTX spelling (``.e4m3``) or alias.

    Aliases cover the MLIR/CUTLASS DSL class names (``Float8E4M3FN``, ``BFloat16``, ``Int4``...,
    with or without a trailing ``Type``), MLIR builtin spellings (``f8E4M3FN``, ``i32``...),
    ml_dtypes names (``float8_e4m3fn``) and CUTLASS C++ names (``cutlass::float_e2m1_t``).
    Matching is case-insensitive.  Anything else raises :class:`DTypeError`.
    """
    if isinstance(name, DType):
        return name
    if not isinstance(name, str):
        raise DTypeError(
            f"element type must be a name or a DType, not {type(name).__name__} {name!r}"
        )
    hit = _resolve(name.strip())
    if hit is not None:
        return DTYPES[hit]
    message = f"unknown element type {name!r}; known: {', '.join(DTYPES)}"
    hint = _HINTS.get(name.strip().lstrip(".").casefold())
    if hint:
        message += f" ({hint})"
    raise DTypeError(message)


# --------------------------------------------------------------------------------------------
# Decoding
# --------------------------------------------------------------------------------------------


def _as_codes(d: DType, bits: npt.ArrayLike, what: str = "bit pattern") -> np.ndarray:
    """Validate bit patterns of ``d`` and return them as a uint64 array of the same shape."""
    arr = np.asarray(bits)
    if arr.dtype == np.bool_:
        arr = arr.astype(np.uint8)
    if arr.dtype.kind == "O":  # e.g. Python ints beyond 64 bits
        for v in arr.ravel():
            if isinstance(v, bool) or not isinstance(v, int | np.integer):
                raise DTypeError(f"{d.name} {what}s must be integers, not {v!r}")
            if not 0 <= v < 1 << d.code_bits:
                raise DTypeError(f"{what} {v:#x} does not fit a {d.code_bits}-bit {d.name} code")
        arr = arr.astype(np.uint64)
    if arr.dtype.kind not in "iu":
        raise DTypeError(f"{d.name} {what}s must be integers, not {arr.dtype} data")
    if arr.dtype.kind == "i" and arr.size and arr.min() < 0:
        raise DTypeError(f"{what} {int(arr.min())} is negative; {d.name} codes are unsigned")
    codes = arr.astype(np.uint64)
    if d.code_bits < 64:
        invalid = codes >> np.uint64(d.code_bits) != 0
        if d.low_pad_bits:
            invalid |= codes & np.uint64((1 << d.low_pad_bits) - 1) != 0
        if invalid.any():
            bad = int(_first(codes, invalid))
            layout = f"a {d.encoding_bits}-bit encoding"
            if d.low_pad_bits:
                layout += f" above {d.low_pad_bits} zero bits in its {d.storage_bits}-bit container"
            elif d.storage_bits > d.encoding_bits:
                layout += f" in the low bits of its {d.storage_bits}-bit container, upper bits zero"
            raise DTypeError(f"{what} {bad:#x} is not a valid {d.name} code ({layout})")
    return codes


def _decode_encoding(d: DType, enc: np.ndarray) -> np.ndarray:
    """Exact float64 values of encodings ``enc`` (uint64, low padding already removed)."""
    e, m = d.exponent_bits, d.mantissa_bits
    mant = (enc & np.uint64((1 << m) - 1)).astype(np.int64)
    field = ((enc >> np.uint64(m)) & np.uint64((1 << e) - 1)).astype(np.int64)
    emin = d.emin
    assert emin is not None
    sub = field == 0 if d.subnormals else np.zeros(enc.shape, dtype=bool)
    significand = np.where(sub, mant, mant + (1 << m)).astype(np.float64)
    exponent = (np.where(sub, emin, field - d.bias) - m).astype(np.int32)
    val = np.ldexp(significand, exponent)
    if d.signed:
        negative = (enc >> np.uint64(d.encoding_bits - 1)) & np.uint64(1) == 1
        val = np.where(negative, -val, val)
    if d.nan == "ieee":
        top = field == (1 << e) - 1
        val = np.where(top & (mant == 0), np.copysign(np.inf, val), val)
        val = np.where(top & (mant != 0), np.nan, val)
    elif d.nan in ("fn", "fnu"):
        magnitude_mask = np.uint64((1 << (d.encoding_bits - int(d.signed))) - 1)
        val = np.where(enc & magnitude_mask == magnitude_mask, np.nan, val)
    return val


@cache
def _decode_table(d: DType) -> np.ndarray:
    table = _decode_encoding(d, np.arange(1 << d.encoding_bits, dtype=np.uint64))
    table.setflags(write=False)
    return table


def decode(dt: str | DType, bits: npt.ArrayLike) -> np.ndarray:
    """Exact values of the codes ``bits`` (any integer array-like; same shape out).

    Floats give float64 (NaN for NaN codes, +-inf where the format has inf, -0.0 kept); integer
    and bit types give int64 (two's complement for the signed ones).  Codes that do not belong
    to the type (bits above the encoding, tf32 codes with non-zero low 13 bits) raise
    :class:`DTypeError`.
    """
    d = dtype(dt)
    codes = _as_codes(d, bits)
    if d.kind != "float":
        out = codes.astype(np.int64)
        if d.signed:
            out = np.where(out >= 1 << (d.encoding_bits - 1), out - (1 << d.encoding_bits), out)
        return out
    if d.name == "f64":
        return np.array(codes, dtype=np.uint64).view(np.float64)
    enc = codes >> np.uint64(d.low_pad_bits)
    if d.encoding_bits <= 16:
        return _decode_table(d)[enc.astype(np.intp)]
    return _decode_encoding(d, enc)


def values(dt: str | DType) -> np.ndarray:
    """All distinct finite values of a type, ascending (one 0.0; ints as int64).

    Only for types of at most 20 encoding bits (everything but f64, f32 and s32).
    """
    d = dtype(dt)
    if d.encoding_bits > _MAX_ENUMERABLE_BITS:
        raise DTypeError(f"{d.name} has 2**{d.encoding_bits} codes; refusing to enumerate them")
    if d.kind != "float":
        assert d.int_min is not None and d.int_max is not None
        return np.arange(d.int_min, d.int_max + 1, dtype=np.int64)
    vals = decode(d, d.all_codes())
    vals = np.unique(vals[np.isfinite(vals)])
    vals[vals == 0] = 0.0  # one zero, positive
    return vals


# --------------------------------------------------------------------------------------------
# Encoding
# --------------------------------------------------------------------------------------------


def _round_magnitudes(d: DType, a: np.ndarray, mode: str, negative: np.ndarray) -> np.ndarray:
    """Round finite magnitudes ``a >= 0`` to ``d``'s precision with an unbounded exponent range.

    The result may exceed max_finite (even be inf); the caller resolves overflow.
    """
    emin = d.emin
    assert emin is not None
    _, e2 = np.frexp(a)  # a = f * 2**e2 with f in [0.5, 1): floor(log2 a) = e2 - 1
    quantum_exp = (np.maximum(e2.astype(np.int64) - 1, emin) - d.mantissa_bits).astype(np.int32)
    t = np.ldexp(a, -quantum_exp)  # exact: scaling by a power of two
    if mode == "rn":
        n = np.rint(t)  # ties to even
    elif mode == "rna":
        n = np.floor(t)
        n += (t - n) >= 0.5
    elif mode == "rz":
        n = np.floor(t)
    elif mode == "rp":  # toward +inf: up in magnitude for positives
        n = np.where(negative, np.floor(t), np.ceil(t))
    else:  # rm
        n = np.where(negative, np.ceil(t), np.floor(t))
    with np.errstate(over="ignore"):
        return np.ldexp(n, quantum_exp)


def _magnitude_to_encoding(d: DType, r: np.ndarray) -> np.ndarray:
    """Encodings (int64, no sign, no padding) of representable finite magnitudes ``r``."""
    emin = d.emin
    assert emin is not None
    e, m = d.exponent_bits, d.mantissa_bits
    _, e2 = np.frexp(r)
    e = e2.astype(np.int64) - 1
    if d.exponent_bits == 0:
        sub = np.ones(r.shape, dtype=bool)
    elif d.subnormals:
        sub = r < math.ldexp(1.0, emin)
    else:
        sub = np.zeros(r.shape, dtype=bool)
    field = np.where(sub, 0, e + d.bias)
    scale_exp = np.where(sub, emin - m, e - m).astype(np.int32)
    significand = np.ldexp(r, -scale_exp).astype(np.int64)
    mant = np.where(sub, significand, significand - (1 << m))
    return (field << m) | mant


def _check_rounding(d: DType, rounding: str | None) -> str:
    if rounding is None:
        if d.default_rounding is None:
            raise DTypeError(
                f"{d.name} conversions need an explicit rounding: PTX cvt to {d.ptx}x2 has only "
                f"{', '.join('.' + r for r in d.roundings)} (pass rounding={d.roundings[0]!r} "
                f"or {d.roundings[1]!r})"
            )
        return d.default_rounding
    if rounding not in d.roundings:
        raise DTypeError(
            f"rounding {rounding!r} is not available for {d.name}; allowed: "
            f"{', '.join(d.roundings)}"
        )
    return rounding


def _encode_float(d: DType, x: np.ndarray, saturate: bool, mode: str) -> np.ndarray:
    nan_in = np.isnan(x)
    inf_in = np.isinf(x)
    negative = np.signbit(x) if d.signed else np.zeros(x.shape, dtype=bool)
    if d.name == "f64":
        codes = np.array(x, dtype=np.float64).view(np.uint64)
        if saturate:
            codes = np.where(inf_in, np.uint64(F64.max_code or 0), codes)
            codes |= negative.astype(np.uint64) << np.uint64(63)
        return np.where(nan_in, np.uint64(F64.nan_code or 0), codes)

    assert d.max_finite is not None
    a = np.abs(np.where(nan_in | inf_in, 0.0, x))
    r = _round_magnitudes(d, a, mode, negative)
    if not d.subnormals:  # no zero (E8M0): everything below the smallest value becomes it
        assert d.min_normal is not None
        r = np.maximum(r, d.min_normal)
    overflow = r > d.max_finite
    enc = _magnitude_to_encoding(d, np.where(overflow, d.max_finite, r))

    max_enc = int(_magnitude_to_encoding(d, np.array([d.max_finite]))[0])
    if d.has_inf:
        special = ((1 << d.exponent_bits) - 1) << d.mantissa_bits  # inf
    elif d.nan != "none":
        special = (d.nan_code or 0) >> d.low_pad_bits  # no inf: NaN stands in
    else:
        special = max_enc  # neither: always saturate
    if not saturate:
        # IEEE: an overflowing finite value goes to max_finite when the rounding direction
        # points toward zero for its sign, else to inf (NaN where the format has no inf).
        toward_zero = np.full(x.shape, mode == "rz")
        if mode == "rm":
            toward_zero = ~negative
        elif mode == "rp":
            toward_zero = negative
        enc = np.where(overflow & ~toward_zero, special, enc)
        enc = np.where(inf_in, special, enc)
    else:
        enc = np.where(inf_in, max_enc, enc)

    if d.signed:
        enc = enc | (negative.astype(np.int64) << (d.encoding_bits - 1))
    nan_enc = max_enc if d.nan == "none" else (d.nan_code or 0) >> d.low_pad_bits
    enc = np.where(nan_in, nan_enc, enc)
    return enc.astype(np.uint64) << np.uint64(d.low_pad_bits)


def _first(arr: np.ndarray, mask: np.ndarray) -> Any:
    return arr.ravel()[np.flatnonzero(mask.ravel())[0]]


def _encode_int(d: DType, x: npt.ArrayLike, saturate: bool) -> np.ndarray:
    lo, hi = d.int_min, d.int_max
    assert lo is not None and hi is not None
    arr = np.asarray(x)
    if arr.dtype == np.bool_:
        arr = arr.astype(np.int64)
    if arr.dtype.kind == "O":  # Python ints beyond 64 bits, or junk
        items = []
        for v in arr.ravel():
            if isinstance(v, bool) or not isinstance(v, int | np.integer):
                raise DTypeError(f"{v!r} is not an integer value for {d.name}")
            if not lo <= v <= hi and not saturate:
                raise DTypeError(f"value {v} is out of range for {d.name} [{lo}, {hi}]")
            items.append(min(max(int(v), lo), hi))
        arr = np.array(items, dtype=np.int64).reshape(arr.shape)
    elif arr.dtype.kind == "f":
        bad = ~np.isfinite(arr) | (arr != np.trunc(arr))
        if bad.any():
            raise DTypeError(
                f"value {float(_first(arr, bad))!r} is not an integer; "
                f"{d.name} holds integers only"
            )
    elif arr.dtype.kind == "u":
        arr = arr.astype(np.uint64)
        above = arr > np.uint64(hi)
        if above.any() and not saturate:
            raise DTypeError(
                f"value {int(_first(arr, above))} is out of range for {d.name} [{lo}, {hi}]"
            )
        arr = np.minimum(arr, np.uint64(hi)).astype(np.int64)
    elif arr.dtype.kind == "i":
        arr = arr.astype(np.int64)
    else:
        raise DTypeError(f"{d.name} values must be numbers, not {arr.dtype} data")
    out_of_range = (arr < lo) | (arr > hi)
    if out_of_range.any():
        if not saturate:
            v = _first(arr, out_of_range)
            shown = int(v) if arr.dtype.kind == "i" else float(v)
            raise DTypeError(f"value {shown} is out of range for {d.name} [{lo}, {hi}]")
        arr = np.clip(arr, lo, hi)
    ints = arr.astype(np.int64)
    return (ints & np.int64((1 << d.encoding_bits) - 1)).astype(np.uint64)


def encode(
    dt: str | DType,
    x: npt.ArrayLike,
    *,
    saturate: bool | None = None,
    rounding: Rounding | None = None,
) -> np.ndarray:
    """Codes (``numpy_storage`` array, same shape) of the values ``x`` in type ``dt``.

    Floats round each float64 input exactly once with ``rounding`` (default: the type's
    ``default_rounding``, ``rn`` = nearest-even; ue8m0 has none and needs ``rz`` or ``rp``;
    only the PTX ``cvt`` modifiers for that destination are accepted).  Overflow, inf and NaN
    follow PTX ``cvt``:

    * ``saturate=True`` (``.satfinite``; the default for the narrow formats, for which PTX makes
      it mandatory): anything beyond max_finite, inf included, becomes +-max_finite; NaN stays
      NaN, except in e2m1/e2m3/e3m2 (no NaN), where NaN becomes +max_finite.
    * ``saturate=False`` (IEEE/OCP non-saturating): overflow becomes +-inf (e5m2, f16, bf16,
      tf32, f32) or NaN (e4m3, ue8m0, ue4m3), except that ``rz``/``rm``/``rp`` stop at
      max_finite on the side they round toward zero.  Not allowed for e2m1/e2m3/e3m2.

    Unsigned formats (ue8m0, ue4m3) encode the magnitude (the sign is dropped, as PTX does for
    ue8m0 overflow).  ue8m0 has no zero: 0 and tiny inputs give 0x00 = 2**-127.  NaN results
    use the canonical positive NaN code (all value bits set).

    Integer/bit types take integral numbers; values outside the range raise
    :class:`DTypeError` naming the value and the type, unless ``saturate=True`` (clamp, as
    ``cvt.sat``).  ``rounding`` must be None for them.
    """
    d = dtype(dt)
    if d.kind != "float":
        if rounding is not None:
            raise DTypeError(f"{d.name} is an integer type; rounding={rounding!r} does not apply")
        return _encode_int(d, x, bool(saturate)).astype(d.numpy_storage)
    mode = _check_rounding(d, rounding)
    if saturate is None:
        saturate = d.satfinite_default
    elif not saturate and d.nan == "none":
        raise DTypeError(
            f"{d.name} has neither inf nor NaN: conversions to it always saturate "
            "(PTX makes .satfinite mandatory); saturate=False is not possible"
        )
    try:
        xf = np.asarray(x, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise DTypeError(f"cannot convert {x!r} to {d.name}: {exc}") from None
    return _encode_float(d, xf, bool(saturate), mode).astype(d.numpy_storage)


# --------------------------------------------------------------------------------------------
# Packing
# --------------------------------------------------------------------------------------------


def _container(d: DType, container_bits: int | None) -> int:
    width = d.pack_bits if container_bits is None else container_bits
    if isinstance(width, bool) or not isinstance(width, int) or not d.code_bits <= width <= 64:
        raise DTypeError(
            f"container_bits={container_bits!r} cannot hold a {d.code_bits}-bit {d.name} code "
            "(need an int in [code_bits, 64])"
        )
    return width


def _pack_stream(codes: np.ndarray, width: int) -> np.ndarray:
    """Little-endian bit stream: element i occupies stream bits [i*width, (i+1)*width)."""
    if width in (8, 16, 32, 64):
        return codes.astype(f"<u{width // 8}").view(np.uint8).copy()
    if 8 % width == 0:
        per = 8 // width
        small = codes.astype(np.uint8).reshape(-1, per)
        shifts = (np.arange(per) * width).astype(np.uint8)
        return np.bitwise_or.reduce(small << shifts, axis=1).astype(np.uint8)
    bit_index = np.arange(width, dtype=np.uint64)
    bits = ((codes[:, None] >> bit_index) & np.uint64(1)).astype(np.uint8)
    return np.packbits(bits.ravel(), bitorder="little")


def _unpack_stream(data: np.ndarray, width: int, count: int) -> np.ndarray:
    if width in (8, 16, 32, 64):
        nbytes = count * width // 8
        return np.ascontiguousarray(data[:nbytes]).view(f"<u{width // 8}").astype(np.uint64)
    if 8 % width == 0:
        shifts = (np.arange(8 // width) * width).astype(np.uint8)
        parts = (data[:, None] >> shifts) & np.uint8((1 << width) - 1)
        return parts.ravel()[:count].astype(np.uint64)
    bits = np.unpackbits(data, bitorder="little")[: count * width].reshape(count, width)
    return (bits.astype(np.uint64) << np.arange(width, dtype=np.uint64)).sum(axis=1)


def pack_codes(
    dt: str | DType, codes: npt.ArrayLike, *, container_bits: int | None = None
) -> np.ndarray:
    """Pack codes (flattened, C order) into bytes (uint8), element 0 in the lowest bits.

    Each element takes ``container_bits`` bits (default ``pack_bits``: 4 for s4/u4/e2m1,
    i.e. two per byte low nibble first; 1 for b1; the storage width otherwise); pass
    ``container_bits=8`` for e2m1 in kind::f8f6f4 operands, or 6 for densely packed fp6.  The
    elements must fill whole bytes.
    """
    d = dtype(dt)
    width = _container(d, container_bits)
    flat = _as_codes(d, codes, "code").ravel()
    total = flat.size * width
    if total % 8:
        raise DTypeError(
            f"{flat.size} {d.name} element(s) of {width} bits make {total} bits, "
            "not a whole number of bytes"
        )
    return _pack_stream(flat, width)


def unpack_codes(
    dt: str | DType,
    data: npt.ArrayLike | bytes,
    count: int | None = None,
    *,
    container_bits: int | None = None,
) -> np.ndarray:
    """Inverse of :func:`pack_codes`: the first ``count`` codes (default: all that fit)."""
    d = dtype(dt)
    width = _container(d, container_bits)
    raw = np.frombuffer(data, dtype=np.uint8) if isinstance(data, bytes | bytearray) else data
    arr = np.asarray(raw)
    if arr.dtype.kind in "iu" and (arr.size == 0 or (arr.min() >= 0 and arr.max() <= 0xFF)):
        arr = arr.astype(np.uint8)
    if arr.dtype != np.uint8:
        raise DTypeError(f"packed {d.name} data must be bytes or byte values, not {arr.dtype} data")
    arr = arr.ravel()
    capacity = arr.size * 8 // width
    if count is None:
        count = capacity
    if not 0 <= count <= capacity:
        raise DTypeError(
            f"{arr.size} byte(s) hold {capacity} {d.name} element(s) of {width} bits, "
            f"not {count}"
        )
    codes = _unpack_stream(arr, width, count)
    return _as_codes(d, codes, "packed code").astype(d.numpy_storage)


def pack(
    dt: str | DType,
    x: npt.ArrayLike,
    *,
    container_bits: int | None = None,
    saturate: bool | None = None,
    rounding: Rounding | None = None,
) -> np.ndarray:
    """:func:`encode` then :func:`pack_codes`: values -> packed bytes (uint8)."""
    d = dtype(dt)
    codes = encode(d, x, saturate=saturate, rounding=rounding)
    return pack_codes(d, codes, container_bits=container_bits)


def unpack(
    dt: str | DType,
    data: npt.ArrayLike | bytes,
    count: int | None = None,
    *,
    container_bits: int | None = None,
) -> np.ndarray:
    """:func:`unpack_codes` then :func:`decode`: packed bytes -> values."""
    d = dtype(dt)
    return decode(d, unpack_codes(d, data, count, container_bits=container_bits))


def pack_b32(
    dt: str | DType,
    x: npt.ArrayLike,
    *,
    container_bits: int | None = None,
    saturate: bool | None = None,
    rounding: Rounding | None = None,
) -> np.ndarray:
    """Values -> ``.b32`` registers (uint32): element i at bits [i*w, (i+1)*w) of the stream.

    With the default widths a register holds 32 b1, 8 s4/u4/e2m1, 4 s8/u8/e4m3/e5m2/e2m3/e3m2,
    2 f16/bf16 or 1 tf32/f32/s32, element 0 in the least significant bits, which is the
    "fragment elements low to high" order of PTX MMA operands.  (Note that ``cvt`` packs its
    *first* operand into the *upper* half: ``cvt.rn.satfinite.e4m3x2.f32 d, a, b`` gives
    d[15:8] = a, d[7:0] = b.)  The elements must fill whole registers; f64 takes two.
    """
    d = dtype(dt)
    width = _container(d, container_bits)
    codes = encode(d, x, saturate=saturate, rounding=rounding).ravel()
    if (codes.size * width) % 32:
        raise DTypeError(
            f"{codes.size} {d.name} element(s) of {width} bits make {codes.size * width} bits, "
            "not a whole number of .b32 registers"
        )
    stream = pack_codes(d, codes, container_bits=width)
    return stream.view("<u4").astype(np.uint32)


def unpack_b32(
    dt: str | DType,
    regs: npt.ArrayLike,
    count: int | None = None,
    *,
    container_bits: int | None = None,
) -> np.ndarray:
    """Inverse of :func:`pack_b32`: ``.b32`` registers -> values."""
    d = dtype(dt)
    arr = np.asarray(regs)
    if arr.dtype.kind not in "iu" or (arr.size and (arr.min() < 0 or arr.max() > 0xFFFFFFFF)):
        raise DTypeError(f".b32 registers must be integers in [0, 2**32), got {arr.dtype} data")
    stream = arr.astype("<u4").ravel().view(np.uint8)
    return unpack(d, stream, count, container_bits=container_bits)
