"""The SM100 ``tcgen05`` descriptors: the 64-bit shared-memory matrix descriptor and the 32-bit
instruction descriptor (idesc) in its plain and block-scaled forms.  Bit-exact codecs.

Sources: PTX ISA "tcgen05 Shared Memory Descriptor" and "Instruction descriptor" (tables for
.kind::f16/tf32/f8f6f4/i8 and for the block-scaled kinds); CUTLASS
include/cute/arch/mma_sm100_desc.hpp (``union SmemDescriptor``, ``InstrDescriptor``,
``InstrDescriptorBlockScaled``).  Each field is written once, in :data:`SMEM_FIELDS`,
:data:`IDESC_FIELDS` or :data:`IDESC_BS_FIELDS`; encode, decode and explain read the tables.

**Shared-memory descriptor** (differs from SM90's, :mod:`nvatom.descriptors.wgmma`, in three
places; PTX ISA "Shared memory descriptor" of tcgen05 and "Matrix Descriptor Format" of wgmma)::

    start_address   0-13   addr >> 4        lbo  16-29  bytes >> 4     sbo  32-45  bytes >> 4
    fixed           46-48  constant 0b001   base_offset 49-51          lbo_mode 52 (0 relative)
    layout_type     61-63  0 none, 1 128B with 32B atoms, 2 128B, 4 64B, 6 32B

LBO and SBO have the meaning of the SM90 descriptor (strides between 8 x 16-byte core
matrices) and follow from the layout by the same canonical forms (CUTLASS's ``make_umma_desc``
mirrors its ``make_gmma_desc``): :func:`make_umma_desc` derives them with the layout algebra
through :func:`nvatom.descriptors.wgmma.make_wgmma_desc` and re-encodes them here.

**Instruction descriptor** (32 bits; passed as a ``.b32`` register; PTX ISA Tables 42-44, in
:mod:`nvatom.descriptors.idesc_rules` with the rules of which words are valid)::

    bit   plain kinds (Table 42)              block-scaled kinds (Tables 43, 44)
    0-1   sparse_id2 (sparse only)            reserved
    2     sparse                              sparse
    3     saturate (i8)                       reserved
    4-5   D format: 0 f16, 1 f32, 2 s32       B scale-factor id (mxf4/mxf4nvf4: 0 or 2)
    7-9   A format                            A format
    10-12 B format                            B format (mxf4/mxf4nvf4: 10-11, 12 reserved)
    13/14 negate A / negate B (not i8)        negate A / negate B
    15/16 A major / B major (0 K, 1 MN)       A major / B major (mxf4/mxf4nvf4: K only)
    17-22 N >> 3                              N >> 3
    23    reserved                            scale format: 0 ue4m3 (mxf4nvf4), 1 ue8m0
    24-28 M >> 4                              24-26 reserved, 27-28 M >> 7
    29    reserved                            29-30 A scale-factor id (mxf4/mxf4nvf4: 0 or 2)
    30-31 max shift (.ws)                     31 K size (mxf4/mxf4nvf4: 0 K64/K128 sparse,
                                              1 K96); reserved for mxf8f6f4

Formats: f16 kind f16 0 / bf16 1 / tf32 2; f8f6f4 and mxf8f6f4 e4m3 0, e5m2 1, e2m3 3,
e3m2 4, e2m1 5; i8 u8 0 / s8 1; mxf4 and mxf4nvf4 e2m1 1 (:data:`FORMAT_CODES`).  For valid
words the block-scaled layout agrees bit for bit with CUTLASS's ``InstrDescriptorBlockScaled``
(which keeps the plain layout's ``M >> 4`` in 24-28 and a selector in 0-1).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from nvatom.descriptors.idesc_rules import (
    BS_KINDS,
    D_FORMAT,
    FORMAT_CODES,
    IDESC_BS_FIELDS,
    IDESC_FIELDS,
    IDESC_MXF4_FIELDS,
    IDESC_TABLES,
    MAX_SHIFT,
    SCALE_FORMAT,
    idesc_problems,
)
from nvatom.descriptors.wgmma import (
    DescriptorField,
    WgmmaDescriptor,
    canonical_wgmma_layout,
    check_desc_matches,
    make_wgmma_desc,
)
from nvatom.dtypes import DType, dtype
from nvatom.errors import DescriptorError
from nvatom.layout import ComposedLayout, size
from nvatom.tables.swizzles import (
    SMEM_SWIZZLES,
    SW128_32B,
    UMMA_SMEM_SWIZZLES,
    SmemError,
    SmemSwizzle,
    smem_swizzle,
    smem_swizzle_of,
    umma_canonical_layout,
    umma_canonical_params,
    umma_swizzles_for,
)

__all__ = [
    "FORMAT_CODES",
    "IDESC_BS_FIELDS",
    "IDESC_FIELDS",
    "IDESC_MXF4_FIELDS",
    "IDESC_TABLES",
    "SM100_LAYOUT_TYPE",
    "SMEM_FIELDS",
    "InstrDescriptor",
    "UmmaSmemDescriptor",
    "canonical_umma_layout",
    "check_umma_desc_matches",
    "decode_idesc",
    "decode_smem_desc",
    "idesc_problems",
    "instr_desc_for",
    "k_block_descriptors",
    "make_umma_desc",
]

_M64 = (1 << 64) - 1
_M32 = (1 << 32) - 1

# ============================================================================ smem descriptor

#: The SM100 shared-memory descriptor's fields (PTX ISA; CUTLASS UMMA::SmemDescriptor).
SMEM_FIELDS: tuple[DescriptorField, ...] = (
    DescriptorField("start_address", 0, 14, 4),
    DescriptorField("lbo", 16, 14, 4),
    DescriptorField("sbo", 32, 14, 4),
    DescriptorField("fixed", 46, 3),  # must read 0b001 (CUTLASS: version_ = 1)
    DescriptorField("base_offset", 49, 3),
    DescriptorField("lbo_mode", 52, 1),
    DescriptorField("layout_type", 61, 3),
)
_SF = {f.name: f for f in SMEM_FIELDS}
SMEM_RESERVED_MASK: int = _M64 & ~sum(f.mask for f in SMEM_FIELDS)
SMEM_FIXED_VALUE = 0b001

#: SM100's 3-bit layout-type code of each swizzle mode (PTX ISA Table 40; CUTLASS
#: UMMA::LayoutType).  Code 1, "128-Byte with 32B atomic swizzling" (CUTLASS
#: SWIZZLE_128B_BASE32B), is nvatom.tables.swizzles.SW128_32B, ``Sw<2,5,2>`` on byte addresses.
SM100_LAYOUT_TYPE: dict[str, int] = {"INTERLEAVE": 0, "SW128_32B": 1, "SW128": 2, "SW64": 4,
                                     "SW32": 6}
_NAME_OF_CODE = {v: k for k, v in SM100_LAYOUT_TYPE.items()}
if {s.name for s in UMMA_SMEM_SWIZZLES} != set(SM100_LAYOUT_TYPE):  # pragma: no cover
    raise ImportError("SM100_LAYOUT_TYPE must name every mode of UMMA_SMEM_SWIZZLES")


def _check_uint(where: str, name: str, v: Any, bits: int) -> None:
    if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v < 1 << bits:
        raise DescriptorError(f"{where}: {name} must be an integer 0..{(1 << bits) - 1}, "
                              f"got {v!r}")


@dataclasses.dataclass(frozen=True)
class UmmaSmemDescriptor:
    """The logical fields of an SM100 shared-memory descriptor (bytes for address/offsets;
    ``layout_type`` a mode name of :data:`SM100_LAYOUT_TYPE` or an SmemSwizzle)."""

    start_address: int
    lbo: int
    sbo: int
    base_offset: int = 0
    lbo_mode: int = 0  # 0: LBO is a relative offset; 1: an absolute address
    layout_type: str = "INTERLEAVE"

    def __post_init__(self) -> None:
        lt = self.layout_type
        if isinstance(lt, SmemSwizzle):
            lt = lt.name
        elif isinstance(lt, (int, str)) and lt not in SM100_LAYOUT_TYPE:
            try:
                lt = smem_swizzle(lt, umma=True).name
            except SmemError as e:
                raise DescriptorError(f"UmmaSmemDescriptor: layout_type: {e}") from None
        if lt not in SM100_LAYOUT_TYPE:
            raise DescriptorError(f"UmmaSmemDescriptor: layout_type {self.layout_type!r} is "
                                  f"none of {', '.join(SM100_LAYOUT_TYPE)}")
        object.__setattr__(self, "layout_type", lt)
        for f in SMEM_FIELDS[:3]:
            v = getattr(self, f.name)
            if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= f.max_value:
                raise DescriptorError(f"UmmaSmemDescriptor: {f.name} = {v!r} does not fit bits "
                                      f"{f.bits} (0 to {f.max_value:#x}, >> {f.shift})")
            if v % 16:
                raise DescriptorError(f"UmmaSmemDescriptor: {f.name} = {v:#x} is not 16-byte "
                                      f"aligned (the field stores {f.name} >> 4)")
        _check_uint("UmmaSmemDescriptor", "base_offset", self.base_offset, 3)
        _check_uint("UmmaSmemDescriptor", "lbo_mode", self.lbo_mode, 1)

    @property
    def swizzle(self) -> SmemSwizzle:
        """The nvatom.tables.swizzles mode (SW128_32B included)."""
        return next(s for s in UMMA_SMEM_SWIZZLES if s.name == self.layout_type)

    def field_values(self) -> dict[str, int]:
        return {"start_address": self.start_address >> 4, "lbo": self.lbo >> 4,
                "sbo": self.sbo >> 4, "fixed": SMEM_FIXED_VALUE,
                "base_offset": self.base_offset, "lbo_mode": self.lbo_mode,
                "layout_type": SM100_LAYOUT_TYPE[self.layout_type]}

    def encode(self) -> int:
        vals = self.field_values()
        return sum(vals[f.name] << f.lsb for f in SMEM_FIELDS)

    def __int__(self) -> int:
        return self.encode()

    def explain(self) -> str:
        return (f"start={self.start_address:#x} lbo={self.lbo} sbo={self.sbo} "
                f"base_offset={self.base_offset} lbo_mode="
                f"{'absolute' if self.lbo_mode else 'relative'} swizzle={self.layout_type}")

    def __str__(self) -> str:
        return f"{self.encode():#018x} ({self.explain()})"

    @classmethod
    def of_wgmma(cls, g: WgmmaDescriptor) -> UmmaSmemDescriptor:
        """The same core-matrix geometry as an SM90 descriptor, in SM100's encoding."""
        return cls(g.start_address, g.lbo, g.sbo, g.base_offset, 0, g.layout_type.name)

    def as_wgmma(self) -> WgmmaDescriptor:
        sw = self.swizzle
        if sw not in SMEM_SWIZZLES or self.lbo_mode:
            raise DescriptorError(f"{self.explain()}: no SM90 equivalent (SW128_32B or "
                                  "absolute LBO mode)")
        return WgmmaDescriptor(self.start_address, self.lbo, self.sbo, self.base_offset, sw)


def decode_smem_desc(word: int) -> UmmaSmemDescriptor:
    """The fields of a 64-bit SM100 descriptor; rejects reserved bits, a fixed field other
    than 0b001 and the unassigned layout codes 3, 5, 7."""
    where = "decode_smem_desc"
    if isinstance(word, bool) or not isinstance(word, int) or not 0 <= word <= _M64:
        raise DescriptorError(f"{where}: a descriptor is a 64-bit unsigned int, got {word!r}")
    bad = word & SMEM_RESERVED_MASK
    if bad:
        bits = [i for i in range(64) if bad >> i & 1]
        raise DescriptorError(f"{where}({word:#018x}): reserved bit(s) "
                              f"{', '.join(map(str, bits))} set")
    raw = {f.name: (word & f.mask) >> f.lsb for f in SMEM_FIELDS}
    if raw["fixed"] != SMEM_FIXED_VALUE:
        raise DescriptorError(f"{where}({word:#018x}): bits 46-48 are {raw['fixed']:#05b}; "
                              "SM100 requires the constant 0b001 (an SM90 word?)")
    if raw["layout_type"] not in _NAME_OF_CODE:
        raise DescriptorError(f"{where}({word:#018x}): layout_type code {raw['layout_type']} "
                              "in bits 61-63 is unassigned (0, 1, 2, 4, 6 are modes)")
    return UmmaSmemDescriptor(raw["start_address"] << 4, raw["lbo"] << 4, raw["sbo"] << 4,
                              raw["base_offset"], raw["lbo_mode"],
                              _NAME_OF_CODE[raw["layout_type"]])


def _check_umma_swizzle(where: str, sw: SmemSwizzle, element_bits: int, major: str) -> None:
    """The swizzle modes tcgen05.mma takes for a (major, element width): tf32 MN-major only
    with SW128_32B, and SW128_32B only for it (nvatom.tables.swizzles.umma_swizzles_for)."""
    try:
        legal = umma_swizzles_for(major, element_bits)
    except SmemError as e:
        raise DescriptorError(f"{where}: {e}") from None
    if sw not in legal:
        raise DescriptorError(
            f"{where}: a {major}-major operand of {element_bits}-bit elements takes the "
            f"swizzle modes {', '.join(s.name for s in legal)}, not {sw.name}"
            + (" (tf32 MN-major exists only with the 128-byte swizzle of 32-byte atomicity)"
               if major == "MN" and element_bits == 32 else ""))


def _make_sw128_32b_desc(where: str, smem_layout: Any, element_bits: int,
                         start_address: int) -> UmmaSmemDescriptor:
    """SW128_32B (MN-major tf32): LBO / SBO read off the canonical form of
    nvatom.tables.swizzles.UMMA_SMEM_CANONICAL, then the first K-block compared with it."""
    if isinstance(smem_layout, ComposedLayout) and smem_layout.offset:
        raise DescriptorError(f"{where}: {smem_layout} has offset {smem_layout.offset} between "
                              "the swizzle and the layout; move it into start_address")
    outer = smem_layout.outer if isinstance(smem_layout, ComposedLayout) else smem_layout
    rows, kblock = size(outer[0]), 256 // element_bits
    if size(outer[1]) % kblock:
        raise DescriptorError(f"{where}: K = {size(outer[1])} is not a multiple of one K-block "
                              f"({kblock} elements)")
    lbo, sbo = umma_canonical_params(smem_layout, "MN", SW128_32B, element_bits, rows, kblock)
    canon = umma_canonical_layout("MN", SW128_32B, element_bits, rows, kblock, lbo, sbo)
    base = int(outer((0, 0)))
    for r in range(rows):
        for k in range(kblock):
            if int(outer((r, k))) - base != int(canon.outer((r, k))):
                raise DescriptorError(
                    f"{where}: not the canonical MN-major SW128_32B layout "
                    f"{canon} (LBO {lbo}, SBO {sbo} elements): element ({r},{k}) is at "
                    f"{int(outer((r, k))) - base}, not {int(canon.outer((r, k)))}")
    period = SW128_32B.period_bytes
    if start_address % period >= 128:
        raise DescriptorError(f"{where}: start_address {start_address:#x} is at byte "
                              f"{start_address % period} of the {period}-byte SW128_32B "
                              f"pattern; align the tile to {period} bytes")
    eb = element_bits // 8
    return UmmaSmemDescriptor(start_address, lbo * eb, sbo * eb, 0, 0, SW128_32B.name)


def make_umma_desc(smem_layout: Any, element_bits: int, major: str,
                   start_address: int = 0) -> UmmaSmemDescriptor:
    """The SM100 descriptor of the first K-block (32 bytes of K) of ``smem_layout``: LBO/SBO
    derived with the layout algebra (the canonical forms of docs/descriptors.md; SW128_32B
    through nvatom.tables.swizzles.UMMA_SMEM_CANONICAL).  Refuses a swizzle mode tcgen05.mma does
    not take for (major, element width): tf32 MN-major needs SW128_32B."""
    where = f"make_umma_desc({smem_layout}, {element_bits}, {major!r})"
    sw = None
    if isinstance(element_bits, int) and not isinstance(element_bits, bool) and \
            element_bits in (4, 8, 16, 32):
        try:
            sw = smem_swizzle_of(smem_layout, element_bits, umma=True)
        except (SmemError, TypeError):
            sw = None
    if sw is not None and major in ("K", "MN"):
        _check_umma_swizzle(where, sw, element_bits, major)
        if sw is SW128_32B:
            return _make_sw128_32b_desc(where, smem_layout, element_bits, start_address)
    return UmmaSmemDescriptor.of_wgmma(make_wgmma_desc(smem_layout, element_bits, major,
                                                     start_address))


def canonical_umma_layout(desc: UmmaSmemDescriptor, element_bits: int, major: str,
                          mn: int) -> Any:
    """The K-block layout ``desc`` describes (coordinates (mn, k) -> element offsets)."""
    if desc.layout_type == SW128_32B.name:
        _check_umma_swizzle("canonical_umma_layout", SW128_32B, element_bits, major)
        eb = element_bits // 8
        return umma_canonical_layout(major, SW128_32B, element_bits, mn, 256 // element_bits,
                                     desc.lbo // eb, desc.sbo // eb)
    return canonical_wgmma_layout(desc.as_wgmma(), element_bits, major, mn)


def check_umma_desc_matches(desc: UmmaSmemDescriptor, smem_layout: Any, element_bits: int,
                            major: str) -> None:
    """Raise DescriptorError unless ``desc`` describes the first K-block of the layout."""
    if desc.layout_type == SW128_32B.name:
        got = make_umma_desc(smem_layout, element_bits, major, desc.start_address)
        if (got.lbo, got.sbo, got.layout_type) != (desc.lbo, desc.sbo, desc.layout_type):
            raise DescriptorError(f"check_umma_desc_matches: {desc.explain()} does not describe "
                                  f"{smem_layout} ({got.explain()})")
        return
    check_desc_matches(desc.as_wgmma(), smem_layout, element_bits, major)


# ============================================================================ idesc
# The field tables, the format codes and the validity predicate live in
# nvatom.descriptors.idesc_rules (PTX ISA Tables 42-44); this section is the codec over them.

def _inv(d: dict[str, int]) -> dict[int, str]:
    return {v: k for k, v in d.items()}


def _check_idesc(word: int, kind: str, where: str) -> None:
    problems = idesc_problems(word, kind)
    if problems:
        raise DescriptorError(f"{where}: {'; '.join(problems)}")


@dataclasses.dataclass(frozen=True)
class InstrDescriptor:
    """The logical content of a tcgen05 idesc.  ``kind`` selects the table (PTX ISA Tables
    42-44) and how formats are coded; ``m``/``n`` are the shape; ``a``/``b``/``d`` and ``sf``
    element types; ``max_shift`` is 0/8/16/32 (.ws only).  Only what the ISA's tables define
    can be built (:func:`nvatom.descriptors.idesc_rules.idesc_problems`)."""

    kind: str
    m: int
    n: int
    a: DType
    b: DType
    d: DType | None = None  # plain kinds only (block-scaled D is f32 by definition)
    a_major: str = "K"
    b_major: str = "K"
    a_negate: bool = False
    b_negate: bool = False
    saturate: bool = False
    sparse: bool = False
    sparse_id2: int = 0
    max_shift: int = 0
    sf: DType | None = None
    a_sf_id: int = 0
    b_sf_id: int = 0
    k_size: int = 0

    def __post_init__(self) -> None:
        for f in ("a", "b", "d", "sf"):
            v = getattr(self, f)
            if isinstance(v, str):
                object.__setattr__(self, f, dtype(v))
        where = f"InstrDescriptor(kind::{self.kind})"
        if self.kind not in FORMAT_CODES:
            raise DescriptorError(f"{where}: unknown kind (one of {', '.join(FORMAT_CODES)})")
        codes = FORMAT_CODES[self.kind]
        for slot in ("a", "b"):
            t = getattr(self, slot)
            if t is None or t.name not in codes:
                raise DescriptorError(f"{where}: {slot.upper()} type "
                                      f"{t.name if t else None} has no code (legal: "
                                      f"{', '.join(codes)})")
        if self.block_scaled:
            if self.d is None:
                object.__setattr__(self, "d", dtype("f32"))
            if self.d.name != "f32":
                raise DescriptorError(f"{where}: block-scaled D is f32, got {self.d.name}")
            if self.sf is None or self.sf.name not in SCALE_FORMAT:
                raise DescriptorError(f"{where}: scale format must be ue8m0 or ue4m3, got "
                                      f"{self.sf.name if self.sf else None}")
            if self.saturate or self.max_shift:
                raise DescriptorError(f"{where}: block-scaled idesc has no saturate/max_shift")
            if self.sparse_id2:
                raise DescriptorError(f"{where}: sparse_id2 {self.sparse_id2}: bits 0-1 are "
                                      "reserved in the block-scaled idesc (the selector is 0)")
            for n_, bits in (("a_sf_id", 2), ("b_sf_id", 2), ("k_size", 1)):
                _check_uint(where, n_, getattr(self, n_), bits)
            if self.k_size and self.kind == "mxf8f6f4":
                raise DescriptorError(f"{where}: k_size is for kind::mxf4/mxf4nvf4 (bit 31 is "
                                      "reserved for mxf8f6f4)")
        else:
            if self.d is None or self.d.name not in D_FORMAT:
                raise DescriptorError(f"{where}: D format must be f16, f32 or s32, got "
                                      f"{self.d.name if self.d else None}")
            if self.sf is not None or self.a_sf_id or self.b_sf_id or self.k_size:
                raise DescriptorError(f"{where}: scale-factor fields are for block-scaled kinds")
            if self.max_shift not in MAX_SHIFT:
                raise DescriptorError(f"{where}: max_shift is 0, 8, 16 or 32, got "
                                      f"{self.max_shift}")
            if self.saturate and self.kind != "i8":
                raise DescriptorError(f"{where}: saturate is for kind::i8 only")
            _check_uint(where, "sparse_id2", self.sparse_id2, 2)
        for slot in ("a_major", "b_major"):
            if getattr(self, slot) not in ("K", "MN"):
                raise DescriptorError(f"{where}: {slot} must be 'K' or 'MN'")
        for f in self.fields:  # M and N must be expressible in their fields
            if f.name in ("m", "n"):
                v = getattr(self, f.name)
                if isinstance(v, bool) or not isinstance(v, int) or v <= 0 or \
                        v % (1 << f.shift) or v > f.max_value:
                    raise DescriptorError(
                        f"{where}: {f.name.upper()} = {v!r} is not a multiple of "
                        f"{1 << f.shift} that fits bits {f.bits} ({f.name.upper()} >> {f.shift})")
        _check_idesc(self.encode(), self.kind, where)

    @property
    def block_scaled(self) -> bool:
        return self.kind in BS_KINDS

    @property
    def fields(self) -> tuple[DescriptorField, ...]:
        return IDESC_TABLES[self.kind]

    def field_values(self) -> dict[str, int]:
        codes = FORMAT_CODES[self.kind]
        v = {"sparse": int(self.sparse),
             "a_format": codes[self.a.name], "b_format": codes[self.b.name],
             "a_negate": int(self.a_negate), "b_negate": int(self.b_negate),
             "a_major": int(self.a_major == "MN"), "b_major": int(self.b_major == "MN")}
        for f in self.fields:
            if f.name in ("m", "n"):
                v[f.name] = getattr(self, f.name) >> f.shift
        if self.block_scaled:
            assert self.sf is not None
            v.update(b_sf_id=self.b_sf_id, scale_format=SCALE_FORMAT[self.sf.name],
                     a_sf_id=self.a_sf_id)
            if self.kind != "mxf8f6f4":
                v["k_size"] = self.k_size
        else:
            assert self.d is not None
            v.update(sparse_id2=self.sparse_id2, saturate=int(self.saturate),
                     d_format=D_FORMAT[self.d.name], max_shift=MAX_SHIFT[self.max_shift])
        return v

    def encode(self) -> int:
        vals = self.field_values()
        return sum(vals[f.name] << f.lsb for f in self.fields)

    def __int__(self) -> int:
        return self.encode()

    def explain(self) -> str:
        parts = [f"kind::{self.kind}", f"M={self.m}", f"N={self.n}",
                 f"A={self.a.name}({self.a_major})", f"B={self.b.name}({self.b_major})"]
        if self.block_scaled:
            assert self.sf is not None
            parts += ["D=f32", f"sf={self.sf.name}", f"sfa_id={self.a_sf_id}",
                      f"sfb_id={self.b_sf_id}", f"k_size={self.k_size}"]
        else:
            assert self.d is not None
            parts.append(f"D={self.d.name}")
            if self.saturate:
                parts.append("saturate")
            if self.max_shift:
                parts.append(f"max_shift={self.max_shift}")
        if self.a_negate:
            parts.append("-A")
        if self.b_negate:
            parts.append("-B")
        if self.sparse:
            parts.append(f"sparse(id2={self.sparse_id2})")
        return " ".join(parts)

    def __str__(self) -> str:
        return f"{self.encode():#010x} ({self.explain()})"


def decode_idesc(word: int, kind: str) -> InstrDescriptor:
    """Decode a 32-bit idesc; the kind (an instruction qualifier) picks the table and the
    format codes.  Refuses every word the PTX ISA's tables mark invalid (reserved bits, codes
    and values a kind does not list, shapes it does not have; :func:`idesc_problems`)."""
    where = f"decode_idesc({word!r}, {kind!r})"
    if isinstance(word, bool) or not isinstance(word, int) or not 0 <= word <= _M32:
        raise DescriptorError(f"{where}: an idesc is a 32-bit unsigned int")
    if kind not in FORMAT_CODES:
        raise DescriptorError(f"{where}: unknown kind (one of {', '.join(FORMAT_CODES)})")
    where = f"decode_idesc({word:#010x}, {kind!r})"
    _check_idesc(word, kind, where)
    table = IDESC_TABLES[kind]
    raw = {f.name: (word & f.mask) >> f.lsb << f.shift for f in table}
    names = _inv(FORMAT_CODES[kind])
    common: dict[str, Any] = dict(
        kind=kind, m=raw["m"], n=raw["n"], a=names[raw["a_format"]],
        b=names[raw["b_format"]], a_major="MN" if raw["a_major"] else "K",
        b_major="MN" if raw["b_major"] else "K", a_negate=bool(raw["a_negate"]),
        b_negate=bool(raw["b_negate"]), sparse=bool(raw["sparse"]))
    if kind in BS_KINDS:
        return InstrDescriptor(**common, d="f32", sf=_inv(SCALE_FORMAT)[raw["scale_format"]],
                               a_sf_id=raw["a_sf_id"], b_sf_id=raw["b_sf_id"],
                               k_size=raw.get("k_size", 0))
    return InstrDescriptor(**common, sparse_id2=raw["sparse_id2"],
                           d=_inv(D_FORMAT)[raw["d_format"]], saturate=bool(raw["saturate"]),
                           max_shift=_inv(MAX_SHIFT)[raw["max_shift"]])

def instr_desc_for(atom: Any, **fields: Any) -> InstrDescriptor:
    """The idesc of a :class:`nvatom.atoms.sm100.UmmaAtom` (negation, saturate, sparse_id2,
    max_shift and scale-factor ids from ``fields``)."""
    kw: dict[str, Any] = dict(kind=atom.kind, m=atom.m, n=atom.n, a=atom.a, b=atom.b,
                              d=atom.d, a_major=atom.a_major, b_major=atom.b_major,
                              sparse=atom.sparse)
    if atom.block_scaled:
        kw["sf"] = atom.sf
    kw.update(fields)
    return InstrDescriptor(**kw)


def k_block_descriptors(smem_layout: Any, element_bits: int, major: str, k_blocks: int,
                        start_address: int = 0, block_k: int | None = None
                        ) -> tuple[UmmaSmemDescriptor, ...]:
    """The descriptor of each 32-byte K-block of ``smem_layout`` stored from
    ``start_address``: the first block's LBO/SBO, the start advanced to the byte offset of
    element ``(0, j * K_block)`` (the layout's swizzle leaves row 0 in place).  ``block_k``
    overrides the K-block's elements (a sparse A stores 16 bytes of K per instruction, a
    sparse B 64)."""
    first = make_umma_desc(smem_layout, element_bits, major, start_address)
    kb = 256 // element_bits if block_k is None else block_k
    out = []
    for j in range(k_blocks):
        off = smem_layout((0, j * kb)) * element_bits // 8
        out.append(dataclasses.replace(first, start_address=start_address + off))
    return tuple(out)
