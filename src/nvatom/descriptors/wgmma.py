"""The SM90 WGMMA shared-memory matrix descriptor: a bit-exact codec, and its derivation from a
CuTe shared-memory layout.

A ``wgmma.mma_async`` operand in shared memory is passed as a 64-bit descriptor (PTX ISA,
"Asynchronous Warpgroup Level Matrix Shared Memory Layout" / "Matrix Descriptor Format";
CUTLASS ``union GmmaDescriptor`` in include/cute/arch/mma_sm90_desc.hpp).  :data:`FIELDS` is the
one table of its bit positions; :meth:`WgmmaDescriptor.encode` and :func:`decode` both read it:

=============== ====== ===== ===== ==========================================================
field           lsb    width shift meaning
=============== ====== ===== ===== ==========================================================
start_address   0      14    4     byte address in shared memory (18-bit space), >> 4
lbo             16     14    4     leading-dimension byte offset, >> 4
sbo             32     14    4     stride-dimension byte offset, >> 4
base_offset     49     3     0     swizzle-pattern phase (0 when the pattern is aligned)
layout_type     62     2     0     swizzle mode: 0 INTERLEAVE, 1 SW128, 2 SW64, 3 SW32
=============== ====== ===== ===== ==========================================================

Every other bit (14-15, 30-31, 46-48, 52-61) is reserved and must be zero.  The swizzle mode is
the :class:`~nvatom.tables.swizzles.SmemSwizzle` of
:data:`nvatom.tables.swizzles.SMEM_SWIZZLES`; its
2-bit code is SM90's *encoding* of the mode and lives here (:data:`SM90_LAYOUT_TYPE`), since
SM100's ``tcgen05`` descriptor spells the same modes with other codes in other bits.

**LBO and SBO** are strides between *core matrices* (8 rows of 16 bytes).  Following CUTLASS's
``make_gmma_desc`` (include/cute/atom/mma_traits_sm90_gmma.hpp), in units of 16 bytes
(``uint128_t``), one MMA K-block of an operand must be one of these canonical layouts, with
``W`` = 1, 2, 4, 8 for INTERLEAVE, SW32, SW64, SW128::

    K-major   INTERLEAVE  ((8,n),2):((1,SBO),LBO)
              SWxx        Sw o ((8,n),2):((W,SBO),1)          (LBO unused; CUTLASS writes 1)
    MN-major  INTERLEAVE  ((1,n),(8,k)):((X,SBO),(1,LBO))
              SWxx        Sw o ((W,n),(8,k)):((1,LBO),(W,SBO))

:func:`make_wgmma_desc` recasts a layout of elements to 16-byte units (``upcast``), takes the
first K-block (32 bytes of K for K-major, ``256 / element_bits`` elements for MN-major),
``logical_divide``s it by ``(8, 2)`` or ``(W, 8)`` and reads LBO and SBO off the strides; a
layout that is none of the forms above is rejected with :class:`DescriptorError`.
Elements are 1 to 64 bits (:data:`ELEMENT_BITS`): a b1 (``.and.popc``) operand's layout
counts bits, its swizzle is the byte swizzle's image on bit offsets (``Sw<3,7,3>`` for SW128)
and its K-block is 256 bits, so its descriptor is that of the same bytes seen as 8-bit
elements (docs/ir.md, "b1 WGMMA tiles").
:func:`check_desc_matches` rebuilds the canonical layout from a descriptor and compares it, as
a function, with the layout it claims to describe.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from nvatom.descriptors.base import DescriptorType
from nvatom.errors import DescriptorError, LayoutError
from nvatom.layout import (
    ComposedLayout,
    Layout,
    composition,
    is_int,
    layouts_equivalent,
    logical_divide,
    rank,
    size,
    upcast,
)
from nvatom.tables.swizzles import (
    SMEM_SWIZZLES,
    SmemError,
    SmemSwizzle,
    smem_swizzle,
    smem_swizzle_of,
)

__all__ = [
    "ADDRESS_BITS",
    "ELEMENT_BITS",
    "FIELDS",
    "RESERVED_MASK",
    "SM90_LAYOUT_TYPE",
    "DescriptorError",
    "DescriptorField",
    "GmmaDescriptor",  # deprecated alias (docs/atom-names.md)
    "SmemDescView",
    "WgmmaDescriptor",
    "canonical_gmma_layout",  # deprecated alias (docs/atom-names.md)
    "canonical_wgmma_layout",
    "check_desc_matches",
    "decode",
    "decode_fields",
    "make_gmma_desc",  # deprecated alias (docs/atom-names.md)
    "make_wgmma_desc",
]


@dataclasses.dataclass(frozen=True)
class DescriptorField:
    """One bit field: ``value >> shift`` is stored in bits ``lsb .. lsb + width - 1``."""

    name: str
    lsb: int
    width: int
    shift: int = 0

    @property
    def mask(self) -> int:
        """The field's bits in the 64-bit word."""
        return ((1 << self.width) - 1) << self.lsb

    @property
    def bits(self) -> str:
        return f"{self.lsb}-{self.lsb + self.width - 1}"

    @property
    def max_value(self) -> int:
        """The largest value (before the shift) the field can hold."""
        return ((1 << self.width) - 1) << self.shift


#: The SM90 descriptor's fields (PTX ISA "Matrix Descriptor Format"; CUTLASS GmmaDescriptor).
FIELDS: tuple[DescriptorField, ...] = (
    DescriptorField("start_address", 0, 14, 4),
    DescriptorField("lbo", 16, 14, 4),
    DescriptorField("sbo", 32, 14, 4),
    DescriptorField("base_offset", 49, 3),
    DescriptorField("layout_type", 62, 2),
)
_FIELD = {f.name: f for f in FIELDS}

#: Bits of the 64-bit word that belong to no field.
RESERVED_MASK: int = ((1 << 64) - 1) & ~sum(f.mask for f in FIELDS)

#: The start address is (addr & 0x3FFFF) >> 4: an 18-bit shared-memory byte address.
ADDRESS_BITS = _FIELD["start_address"].width + _FIELD["start_address"].shift

#: SM90's 2-bit code for each swizzle mode of nvatom.tables.swizzles.SMEM_SWIZZLES (by mode name);
#: CUTLASS GMMA::LayoutType: INTERLEAVE = 0, B128 = 1, B64 = 2, B32 = 3.
SM90_LAYOUT_TYPE: dict[str, int] = {"INTERLEAVE": 0, "SW128": 1, "SW64": 2, "SW32": 3}
if set(SM90_LAYOUT_TYPE) != {s.name for s in SMEM_SWIZZLES}:  # pragma: no cover
    raise ImportError("SM90_LAYOUT_TYPE must name every mode of SMEM_SWIZZLES exactly once")

#: Element widths a descriptor's layout may count in (the wgmma operand types' storage widths:
#: b1; e2m1/s4-like 4-bit; 8-bit; f16/bf16; tf32; 64).  Whatever the width, one K-block is 256
#: bits of K and the canonical forms are in 16-byte (128-bit) units, so a b1 layout is in
#: bits and its swizzle the bit-unit image of the byte swizzle (``Sw<3,7,3>`` for SW128).
ELEMENT_BITS: tuple[int, ...] = (1, 4, 8, 16, 32, 64)
_MODE_OF_CODE: dict[int, SmemSwizzle] = {
    SM90_LAYOUT_TYPE[s.name]: s for s in SMEM_SWIZZLES
}


def _bit_list(mask: int) -> str:
    """'bits 14, 52' for the set bits of ``mask``, ranges collapsed: 'bits 52-55'."""
    bits = [i for i in range(64) if mask >> i & 1]
    runs: list[list[int]] = []
    for b in bits:
        if runs and runs[-1][-1] == b - 1:
            runs[-1].append(b)
        else:
            runs.append([b])
    text = ", ".join(str(r[0]) if len(r) == 1 else f"{r[0]}-{r[-1]}" for r in runs)
    return f"bit{'s' if len(bits) > 1 else ''} {text}"


def _swizzle_name(sw: SmemSwizzle) -> str:
    return f"{sw.nbytes}B" if sw.nbytes else "INTERLEAVE"


@dataclasses.dataclass(frozen=True)
class WgmmaDescriptor:
    """The logical fields of an SM90 shared-memory matrix descriptor.

    ``start_address``, ``lbo`` and ``sbo`` are in bytes (16-byte aligned); ``base_offset`` is
    the 3-bit pattern phase; ``layout_type`` is a swizzle mode of ``SMEM_SWIZZLES`` (a name,
    byte count or :class:`SmemSwizzle` is accepted and normalised).
    """

    start_address: int
    lbo: int
    sbo: int
    base_offset: int = 0
    layout_type: SmemSwizzle = SMEM_SWIZZLES[0]

    def __post_init__(self) -> None:
        try:
            sw = smem_swizzle(self.layout_type)  # type: ignore[arg-type]
        except SmemError as e:
            raise DescriptorError(f"WgmmaDescriptor: layout_type: {e}") from None
        object.__setattr__(self, "layout_type", sw)
        for f in FIELDS[:4]:
            v = getattr(self, f.name)
            if isinstance(v, bool) or not isinstance(v, int):
                raise DescriptorError(f"WgmmaDescriptor: {f.name} must be an int, got {v!r}")
            if v < 0 or v > f.max_value:
                raise DescriptorError(
                    f"WgmmaDescriptor: {f.name} = {v:#x} is out of range: bits {f.bits} hold "
                    f"0 to {f.max_value:#x}" + (f" (>> {f.shift})" if f.shift else "")
                )
            if v % (1 << f.shift):
                raise DescriptorError(
                    f"WgmmaDescriptor: {f.name} = {v:#x} is not {1 << f.shift}-byte aligned "
                    f"(the field stores {f.name} >> {f.shift})"
                )

    @property
    def swizzle(self) -> SmemSwizzle:
        return self.layout_type

    def field_values(self) -> dict[str, int]:
        """Each field's stored value (after the shift), by field name."""
        vals = {f.name: getattr(self, f.name) for f in FIELDS[:4]}
        vals["layout_type"] = SM90_LAYOUT_TYPE[self.layout_type.name]
        return {f.name: vals[f.name] >> f.shift for f in FIELDS}

    def encode(self) -> int:
        """The 64-bit descriptor word."""
        word = 0
        for f in FIELDS:
            word |= self.field_values()[f.name] << f.lsb
        return word

    def __int__(self) -> int:
        return self.encode()

    def explain(self) -> str:
        """``start=0x10000 lbo=2048 sbo=1024 base_offset=0 swizzle=128B``."""
        return (f"start={self.start_address:#x} lbo={self.lbo} sbo={self.sbo} "
                f"base_offset={self.base_offset} swizzle={_swizzle_name(self.layout_type)}")

    def __str__(self) -> str:
        return f"{self.encode():#018x} ({self.explain()})"


def decode(word: int) -> WgmmaDescriptor:
    """The fields of a 64-bit SM90 descriptor word; rejects set reserved bits."""
    if isinstance(word, bool) or not isinstance(word, int) or not 0 <= word < 1 << 64:
        raise DescriptorError(f"decode: a descriptor is a 64-bit unsigned int, got {word!r}")
    bad = word & RESERVED_MASK
    if bad:
        raise DescriptorError(
            f"decode({word:#018x}): reserved {_bit_list(bad)} set (SM90 fields: "
            + ", ".join(f"{f.name} {f.bits}" for f in FIELDS) + ")"
        )
    raw = {f.name: (word & f.mask) >> f.lsb for f in FIELDS}
    # Every 2-bit code names a mode today; the check keeps decode honest if the table shrinks.
    if raw["layout_type"] not in _MODE_OF_CODE:  # pragma: no cover
        raise DescriptorError(f"decode({word:#018x}): unknown layout_type code "
                              f"{raw['layout_type']} in bits {_FIELD['layout_type'].bits}")
    return WgmmaDescriptor(
        start_address=raw["start_address"] << 4,
        lbo=raw["lbo"] << 4,
        sbo=raw["sbo"] << 4,
        base_offset=raw["base_offset"],
        layout_type=_MODE_OF_CODE[raw["layout_type"]],
    )


def decode_fields(word: int) -> dict[str, int]:
    """Every field's raw bits and the reserved bits of ``word``, without validation."""
    out = {f.name: (word & f.mask) >> f.lsb for f in FIELDS}
    out["reserved"] = word & RESERVED_MASK
    return out


# ============================================================================ from layouts




def _check_major(major: Any) -> str:
    if major not in ("K", "MN"):
        raise DescriptorError(f"major must be 'K' or 'MN', got {major!r}")
    return major


def _split(layout: Any, element_bits: int, where: str) -> tuple[SmemSwizzle, Layout]:
    """The swizzle mode of ``layout`` and its outer layout of elements."""
    if isinstance(element_bits, bool) or not isinstance(element_bits, int) or \
            element_bits not in ELEMENT_BITS:
        raise DescriptorError(f"{where}: element_bits must be 1, 4, 8, 16, 32 or 64, "
                              f"got {element_bits!r}")
    if not isinstance(layout, (Layout, ComposedLayout)):
        raise DescriptorError(f"{where}: expected a Layout or ComposedLayout, got {layout!r}")
    sw = smem_swizzle_of(layout, element_bits)
    if sw is None:
        raise DescriptorError(
            f"{where}: the swizzle of {layout} is none of the WGMMA modes for {element_bits}-bit "
            "elements (" + ", ".join(f"{s.name} = {s.element_swizzle(element_bits)}"
                                     for s in SMEM_SWIZZLES) + ")"
        )
    if isinstance(layout, ComposedLayout):
        if layout.offset:
            raise DescriptorError(f"{where}: {layout} has offset {layout.offset} between the "
                                  "swizzle and the layout; move it into start_address")
        outer = layout.outer
    else:
        outer = layout
    if rank(outer) != 2:
        raise DescriptorError(f"{where}: a WGMMA operand layout is rank 2 (mn, k); {layout} "
                              f"has rank {rank(outer)}")
    return sw, outer


def _k_block(outer: Layout, element_bits: int, major: str, where: str) -> Layout:
    """The first MMA K-block of ``outer`` in units of 16 bytes (uint128_t)."""
    kblock = 256 // element_bits  # 32 bytes of K per wgmma instruction
    k = size(outer[1])
    if k % kblock:
        raise DescriptorError(f"{where}: K = {k} {element_bits}-bit elements is not a multiple "
                              f"of one wgmma K-block ({kblock} elements, 32 bytes)")
    per = 128 // element_bits
    try:
        first = composition(outer, (Layout(size(outer[0]), 1), Layout(kblock, 1)))
        return upcast(first, per)
    except LayoutError as e:
        raise DescriptorError(
            f"{where}: {outer} does not group into 16-byte core-matrix rows along "
            f"{major} ({e})"
        ) from None


def _canonical_strides(
    u: Layout, sw: SmemSwizzle, major: str, where: str
) -> tuple[int, int]:
    """(LBO, SBO) in 16-byte units read off the canonical form of K-block ``u``."""
    w = sw.row_bytes // sw.atom_bytes  # the swizzle span in 16-byte chunks
    mn = size(u[0])
    if major == "K":
        if mn % 8:
            raise DescriptorError(f"{where}: not a canonical WGMMA K-major layout: the MN size "
                                  f"{mn} is not a multiple of 8 core-matrix rows")
        tiler: tuple[Layout, Layout] = (Layout(8, 1), Layout(2, 1))
    else:
        if mn % w:
            raise DescriptorError(
                f"{where}: not a canonical WGMMA MN-major layout: the MN size is {mn} 16-byte "
                f"chunks, not a multiple of the {sw.name} span of {w}"
            )
        tiler = (Layout(w, 1), Layout(8, 1))
    try:
        c = logical_divide(u, tiler)
    except LayoutError as e:
        raise DescriptorError(
            f"{where}: not a canonical WGMMA {major}-major layout ({e})") from None
    flat = [c[i][j] for i in (0, 1) for j in (0, 1)] if all(rank(c[i]) == 2 for i in (0, 1)) \
        else []
    if not flat or not all(is_int(m.shape) for m in flat):
        raise DescriptorError(f"{where}: not a canonical WGMMA {major}-major layout: {c} has no "
                              "flat offset mode")
    s00, s01, s10, s11 = (m.stride for m in flat)
    swz = sw.nbytes != 0

    def expect(name: str, got: int, want: int) -> None:
        if got != want:
            raise DescriptorError(
                f"{where}: not a canonical WGMMA {major}-major {sw.name} layout: in 16-byte "
                f"units its K-block is {c}, whose {name} stride is {got}, not {want}"
            )

    if major == "K":
        expect("row (mode 0,0)", s00, w)
        if swz:
            expect("K chunk (mode 1,0)", s10, 1)
            return 1, s01  # LBO is unused for swizzled K-major; CUTLASS writes 1
        return s10, s01
    if swz:
        expect("MN chunk (mode 0,0)", s00, 1)
    expect("K row (mode 1,0)", s10, w)
    return (s11, s01) if not swz else (s01, s11)


def make_wgmma_desc(
    smem_layout: Any,
    element_bits: int,
    major: str,
    start_address: int = 0,
) -> WgmmaDescriptor:
    """The SM90 descriptor of the first wgmma K-block of ``smem_layout`` (coordinates
    ``(mn, k)`` to element offsets, as :func:`nvatom.tables.swizzles.smem_layout` builds them),
    stored from byte ``start_address``.  Raises :class:`DescriptorError` for a layout that
    is not one of the canonical forms (CUTLASS's ``GMMA::Layout_*`` atoms)."""
    where = f"make_wgmma_desc({smem_layout}, {element_bits}, {major!r})"
    major = _check_major(major)
    sw, outer = _split(smem_layout, element_bits, where)
    if isinstance(start_address, bool) or not isinstance(start_address, int):
        raise DescriptorError(f"{where}: start_address must be an int, got {start_address!r}")
    if sw.nbytes:
        # base_offset = 0 means the swizzle pattern (period 2^(7+B) bytes) starts at its phase 0.
        period = 1 << (7 + sw.swizzle.bits)
        if start_address % period >= 128:
            raise DescriptorError(
                f"{where}: start_address {start_address:#x} is at byte {start_address % period} "
                f"of the {period}-byte {sw.name} pattern; align the tile to {period} bytes"
            )
    u = _k_block(outer, element_bits, major, where)
    lbo, sbo = _canonical_strides(u, sw, major, where)
    fields = {"start_address": start_address, "lbo": 16 * lbo, "sbo": 16 * sbo}
    for name, v in fields.items():
        f = _FIELD[name]
        if v < 0 or v > f.max_value or v % 16:
            raise DescriptorError(f"{where}: {name} = {v:#x} does not fit bits {f.bits} "
                                  f"(0 to {f.max_value:#x}, 16-byte aligned)")
    return WgmmaDescriptor(start_address, 16 * lbo, 16 * sbo, 0, sw)


def canonical_wgmma_layout(
    desc: WgmmaDescriptor, element_bits: int, major: str, mn: int
) -> Layout | ComposedLayout:
    """The K-block layout (coordinates ``(mn, k)`` to element offsets from the start address)
    that ``desc`` describes for an operand of ``mn`` rows: CUTLASS's canonical form."""
    major = _check_major(major)
    sw = desc.layout_type
    w = sw.row_bytes // sw.atom_bytes  # the swizzle span in 16-byte chunks
    per = 128 // element_bits
    lbo, sbo = desc.lbo // 16 * per, desc.sbo // 16 * per  # in elements
    if major == "K":
        if mn % 8:
            raise DescriptorError(f"canonical_wgmma_layout: K-major MN = {mn} is not a multiple "
                                  "of 8")
        kstride = lbo if not sw.nbytes else per
        lay = Layout(((8, mn // 8), (per, 2)), ((w * per, sbo), (1, kstride)))
    else:
        if mn % (w * per):
            raise DescriptorError(f"canonical_wgmma_layout: MN-major MN = {mn} is not a multiple "
                                  f"of the {sw.name} span ({w * per} elements)")
        k8 = 256 // element_bits // 8
        if sw.nbytes:
            lay = Layout(((per, w, mn // (w * per)), (8, k8)),
                         ((1, per, lbo), (w * per, sbo)))
        else:
            lay = Layout(((per, mn // per), (8, k8)), ((1, sbo), (per, lbo)))
    return composition(sw.element_swizzle(element_bits), lay)


def check_desc_matches(
    desc: WgmmaDescriptor, smem_layout: Any, element_bits: int, major: str
) -> None:
    """Raise :class:`DescriptorError` unless ``desc`` describes the first K-block of
    ``smem_layout``: same swizzle mode, and LBO/SBO that reproduce its offsets."""
    where = f"check_desc_matches({desc.explain()}, {smem_layout})"
    major = _check_major(major)
    sw, outer = _split(smem_layout, element_bits, where)
    if sw is not desc.layout_type:
        raise DescriptorError(
            f"{where}: the layout is swizzled {sw.name} but the descriptor says "
            f"{desc.layout_type.name}; the hardware would read another tile"
        )
    if desc.base_offset:
        raise DescriptorError(f"{where}: base_offset {desc.base_offset} != 0 is not modelled")
    kblock = 256 // element_bits
    mn = size(outer[0])
    want = canonical_wgmma_layout(desc, element_bits, major, mn)
    try:
        got = composition(smem_layout, (Layout(mn, 1), Layout(kblock, 1)))
        ok = layouts_equivalent(got, want)
    except LayoutError as e:
        raise DescriptorError(f"{where}: {e}") from None
    if not ok:
        derived = ""
        try:
            own = make_wgmma_desc(smem_layout, element_bits, major)
            derived = f"; the layout's own descriptor is {own.explain()}"
        except DescriptorError:
            pass
        raise DescriptorError(
            f"{where}: LBO/SBO disagree with the layout: the descriptor describes {want}{derived}"
        )


@dataclasses.dataclass(frozen=True)
class SmemDescView(DescriptorType):
    """``!cute_nvgpu.smem_desc_view``: a descriptor word together with the layout it describes.

    Constructing one checks that the descriptor and the layout agree (swizzle, LBO, SBO), so a
    mismatched pair is rejected before any PTX exists; :meth:`of` derives the descriptor.
    """

    layout: Layout | ComposedLayout
    element_bits: int
    major: str
    descriptor: WgmmaDescriptor

    def __post_init__(self) -> None:
        check_desc_matches(self.descriptor, self.layout, self.element_bits, self.major)

    @classmethod
    def of(cls, layout: Layout | ComposedLayout, element_bits: int, major: str = "K",
           start_address: int = 0) -> SmemDescView:
        return cls(layout, element_bits, major,
                   make_wgmma_desc(layout, element_bits, major, start_address))

    @property
    def word(self) -> int:
        return self.descriptor.encode()

    def __str__(self) -> str:
        return (f"smem_desc_view<{self.layout}, {self.element_bits}-bit, {self.major}-major, "
                f"{self.descriptor.explain()}>")


# The names before "one vocabulary" (docs/atom-names.md): CUTLASS's spelling, kept as aliases
# until the SM90 kernels that use them are split into nvatom.kernels.sm90.
GmmaDescriptor = WgmmaDescriptor  # deprecated alias (docs/atom-names.md)
make_gmma_desc = make_wgmma_desc  # deprecated alias (docs/atom-names.md)
canonical_gmma_layout = canonical_wgmma_layout  # deprecated alias (docs/atom-names.md)
