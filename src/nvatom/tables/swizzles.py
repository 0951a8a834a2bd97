"""The hardware's shared-memory swizzle modes and the canonical tiles built from them: the
one table that shared-memory atoms (:mod:`nvatom.atoms.smem`), the SM90/SM100 smem descriptors
(:mod:`nvatom.descriptors.wgmma`, :mod:`nvatom.descriptors.umma`) and the TMA tensor map
(:mod:`nvatom.descriptors.tma`) all read.  It sits in ``nvatom.tables``, below both atoms and
descriptors, and imports only the layout algebra and ``errors``.

**Swizzles.**  :data:`SMEM_SWIZZLES` is the one table of the hardware's shared-memory swizzle
modes (the names of CUTLASS's ``GMMA::LayoutType`` and of the TMA's
``CU_TENSOR_MAP_SWIZZLE_*``), each as a CuTe ``Swizzle`` on *byte* offsets:
INTERLEAVE = ``Sw<0,4,3>`` (none), SW32 = ``Sw<1,4,3>``, SW64 = ``Sw<2,4,3>``,
SW128 = ``Sw<3,4,3>``: 16-byte chunk ``c`` of a 128-byte line ``l`` moves to chunk
``c ^ (l % 2^B)``.  :func:`smem_layout` builds the canonical tiles of CuTe's WGMMA layout atoms
(``GMMA::Layout_K_SW128_Atom<T>`` ...; include/cute/atom/mma_traits_sm90_gmma.hpp) as
*element-offset* layouts: the byte swizzle re-expressed in elements (``Sw<3,3,3>`` for 16-bit
elements), which is CuTe's ``as_position_independent_swizzle_layout``; ``tile_to_shape``
repeats the atom to the tile.

**SM100.**  :data:`SW128_32B` is the UMMA-only "128-Byte swizzling with 32-Byte atomicity"
(``Sw<2,5,2>``; MN-major tf32 operands only), outside :data:`SMEM_SWIZZLES` because neither the
SM90 descriptor nor the TMA codes name it (``smem_swizzle(..., umma=True)`` finds it).
:data:`UMMA_SMEM_CANONICAL` is the PTX ISA's table of canonical tcgen05 operand layouts
(9.7.16.3.3) per major-ness and mode; :func:`umma_canonical_layout`,
:func:`umma_canonical_params` and :func:`umma_swizzles_for` read it.

Sources: PTX ISA 9.7.16.3.3 "Canonical Layouts" (tcgen05 shared-memory matrices) and the
tcgen05 "Shared Memory Matrix Layout" swizzling notes; CUTLASS include/cute/swizzle.hpp,
include/cute/atom/mma_traits_sm90_gmma.hpp, include/cute/atom/mma_traits_sm100.hpp.
"""

from __future__ import annotations

import dataclasses
import re
from fractions import Fraction
from typing import Any

from nvatom.errors import NvatomError
from nvatom.layout import (
    ComposedLayout,
    Layout,
    Swizzle,
    composition,
    downcast,
    flatten,
    parse_layout,
    size,
    tile_to_shape,
    upcast,
)

__all__ = [
    "SMEM_SWIZZLES",
    "SW128_32B",
    "UMMA_SMEM_CANONICAL",
    "UMMA_SMEM_SWIZZLES",
    "SmemError",
    "SmemSwizzle",
    "check_element_bits",
    "smem_layout",
    "smem_swizzle",
    "smem_swizzle_of",
    "umma_canonical_layout",
    "umma_canonical_params",
    "umma_canonical_text",
    "umma_swizzles_for",
]


class SmemError(NvatomError, ValueError):
    """A shared-memory layout or access pattern that cannot be modelled as asked."""


# ============================================================================ swizzle modes


@dataclasses.dataclass(frozen=True)
class SmemSwizzle:
    """One shared-memory swizzle mode of the hardware (WGMMA descriptors, TMA, CuTe atoms).

    ``swizzle`` acts on byte offsets.  A K-major atom is 8 rows of ``row_bytes`` bytes.  The
    XOR source is the 128-byte line index (SW32 and SW64 rows share a line 4 and 2 at a
    time), so the pattern repeats every ``2^(7+B)`` bytes: 256 (SW32), 512 (SW64), 1024
    (SW128); a buffer aligned to that sees the same banks as offset 0.

    ``atom_bytes`` is the swizzle's *atomicity*: the unit it permutes (16 bytes for the four
    modes of :data:`SMEM_SWIZZLES`; 32 bytes for :data:`SW128_32B`, SM100's "128-Byte swizzling
    with 32-Byte atomicity", ``Sw<2,5,2>``: 32-byte unit ``c`` of 128-byte line ``l`` moves to
    ``c ^ (l % 4)``, period 512 bytes).
    """

    name: str  # "INTERLEAVE", "SW32", "SW64", "SW128", "SW128_32B"
    nbytes: int  # 0 (no swizzle), 32, 64, 128
    swizzle: Swizzle  # on byte offsets
    atom_bytes: int = 16  # the permuted unit (atomicity): 16, or 32 for SW128_32B

    def __post_init__(self) -> None:
        # Sw<B,M,S>: units of 2^M = atom_bytes, the XOR source is the 128-byte line index
        # (M+S = 7), and 2^B units take part: B = log2(nbytes / atom_bytes).
        sw = self.swizzle
        m = self.atom_bytes.bit_length() - 1
        expect_b = 0 if self.nbytes == 0 else (self.nbytes // self.atom_bytes).bit_length() - 1
        if (sw.base, sw.shift) != (m, 7 - m) or sw.bits != expect_b or (
            self.nbytes and self.atom_bytes << sw.bits != self.nbytes
        ):
            raise SmemError(f"{self.name}: {sw} is not the {self.nbytes}-byte swizzle of "
                            f"{self.atom_bytes}-byte atoms")

    @property
    def row_bytes(self) -> int:
        """Width of a K-major atom row: the swizzle span (16 bytes for INTERLEAVE)."""
        return max(16, self.nbytes)

    @property
    def period_bytes(self) -> int:
        """Bytes after which the pattern repeats: ``2^(M+S+B)`` (128 for INTERLEAVE)."""
        sw = self.swizzle
        return 1 << (sw.base + sw.shift + sw.bits)

    @property
    def atom_rows(self) -> int:
        """Rows of ``row_bytes`` in one pattern period: 8, or 4 for SW128_32B."""
        return self.period_bytes // self.row_bytes

    def element_swizzle(self, element_bits: int) -> Swizzle:
        """The same permutation on offsets in units of ``element_bits``-bit elements:
        ``Sw<3,4,3>`` (bytes) is ``Sw<3,3,3>`` for 16-bit and ``Sw<3,5,3>`` for 4-bit ones."""
        e = check_element_bits(element_bits)
        return upcast(self.swizzle, e // 8) if e >= 8 else downcast(self.swizzle, 8 // e)

    def atom(self, element_bits: int, major: str = "K") -> Layout | ComposedLayout:
        """CuTe's ``GMMA::Layout_<major>_<name>_Atom<T>`` (``UMMA::Layout_MN_SW128_32B_Atom``)
        for ``element_bits``-bit ``T``, as an element-offset layout of coordinates
        ``(mn, k)``: K-major is 8 x (row_bytes in elements) row-major; MN-major is (row_bytes
        in elements) x :attr:`atom_rows` column-major.  SW128_32B has no K-major atom."""
        e = check_element_bits(element_bits)
        w = self.row_bytes * 8 // e
        if major == "K":
            if self.atom_bytes != 16:
                raise SmemError(f"{self.name} has no K-major atom: the 128-byte swizzle with "
                                "32-byte atomicity is for MN-major operands")
            outer = Layout((8, w), (w, 1))
        elif major == "MN":
            outer = Layout((w, self.atom_rows), (1, w))
        else:
            raise SmemError(f"major must be 'K' or 'MN', got {major!r}")
        return composition(self.element_swizzle(e), outer)

    def __str__(self) -> str:
        return self.name


#: The hardware's shared-memory swizzle modes of 16-byte atomicity, on byte offsets (the one
#: table of them; SM90 WGMMA, TMA and SM100 UMMA all have them).
SMEM_SWIZZLES: tuple[SmemSwizzle, ...] = (
    SmemSwizzle("INTERLEAVE", 0, Swizzle(0, 4, 3)),
    SmemSwizzle("SW32", 32, Swizzle(1, 4, 3)),
    SmemSwizzle("SW64", 64, Swizzle(2, 4, 3)),
    SmemSwizzle("SW128", 128, Swizzle(3, 4, 3)),
)
#: SM100's "128-Byte swizzling with 32-Byte atomicity" (UMMA smem descriptor layout type 1;
#: CUTLASS ``UMMA::LayoutType::SWIZZLE_128B_BASE32B``, ``Layout_MN_SW128_32B_Atom``:
#: ``Sw<2,5,2>``).  UMMA only: not a mode of SM90's descriptor, so not in SMEM_SWIZZLES.
SW128_32B = SmemSwizzle("SW128_32B", 128, Swizzle(2, 5, 2), 32)
#: The modes a tcgen05 shared-memory descriptor can name.
UMMA_SMEM_SWIZZLES: tuple[SmemSwizzle, ...] = (*SMEM_SWIZZLES, SW128_32B)
_SWIZZLE_BY_KEY: dict[Any, SmemSwizzle] = {}
for _s in SMEM_SWIZZLES:
    _SWIZZLE_BY_KEY[_s.name] = _SWIZZLE_BY_KEY[_s.nbytes] = _s
_SWIZZLE_BY_KEY["NONE"] = _SWIZZLE_BY_KEY["INTER"] = SMEM_SWIZZLES[0]
for _b in (32, 64, 128):
    _SWIZZLE_BY_KEY[f"{_b}B"] = _SWIZZLE_BY_KEY[f"B{_b}"] = _SWIZZLE_BY_KEY[_b]
_UMMA_ONLY_KEYS = {"SW128_32B": SW128_32B, "128B_32B": SW128_32B, "SW128_BASE32B": SW128_32B,
                   "128B_BASE32B": SW128_32B}
del _s, _b


def smem_swizzle(mode: int | str | SmemSwizzle, *, umma: bool = False) -> SmemSwizzle:
    """Look a swizzle mode up by bytes (0, 32, 64, 128) or name ('SW128', '128B', 'B128',
    'INTERLEAVE'; any case).  ``umma=True`` also knows SM100's 'SW128_32B'
    (:data:`SW128_32B`), which no SM90 or TMA table has."""
    if isinstance(mode, SmemSwizzle):
        return mode
    key = mode.upper() if isinstance(mode, str) else mode
    if umma and isinstance(key, str) and key in _UMMA_ONLY_KEYS:
        return _UMMA_ONLY_KEYS[key]
    if isinstance(key, bool) or not isinstance(key, (int, str)) or key not in _SWIZZLE_BY_KEY:
        modes = UMMA_SMEM_SWIZZLES if umma else SMEM_SWIZZLES
        known = ", ".join(f"{s.name} ({s.nbytes})" for s in modes)
        raise SmemError(f"unknown shared-memory swizzle {mode!r} (known: {known})")
    return _SWIZZLE_BY_KEY[key]


def check_element_bits(e: Any) -> int:
    """``e`` if it is a power of two from 1 to 128 (an element width in bits), else SmemError."""
    if isinstance(e, bool) or not isinstance(e, int) or e < 1 or e > 128 or e & (e - 1):
        raise SmemError(f"element_bits must be a power of two from 1 to 128, got {e!r}")
    return e


def smem_layout(
    rows: int,
    cols: int,
    element_bits: int,
    major: str = "K",
    swizzle: int | str | SmemSwizzle = 128,
) -> Layout | ComposedLayout:
    """A ``rows x cols`` shared-memory tile of ``element_bits``-bit elements, as CuTe builds
    it: ``tile_to_shape(GMMA::Layout_<major>_<swizzle>_Atom<T>, (rows, cols))``.

    Coordinates are ``(row, col)`` = ``(mn, k)`` of an MMA operand; ``major="K"`` keeps ``col``
    contiguous inside an atom, ``"MN"`` keeps ``row`` contiguous.  Atoms repeat down the rows
    first (CuTe's default order).  The result maps coordinates to element offsets; byte
    address = offset * element_bits / 8.  ``smem_layout(64, 64, 16)`` is
    ``Sw<3,3,3> o 0 o ((8,8),(64,1)):((64,512),(1,0))``.
    """
    sw = smem_swizzle(swizzle, umma=True)
    atom = sw.atom(element_bits, major)
    for name, v in (("rows", rows), ("cols", cols)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise SmemError(f"smem_layout: {name} must be a positive int, got {v!r}")
    ar, ac = atom.shape  # type: ignore[misc]
    if rows % ar or cols % ac:
        raise SmemError(
            f"smem_layout({rows}, {cols}, {element_bits}, {major!r}, {sw.name}): the {sw.name} "
            f"{major}-major atom of {element_bits}-bit elements is {ar} x {ac} (rows x cols), "
            f"which does not divide {rows} x {cols}"
        )
    return tile_to_shape(atom, (rows, cols))


def smem_swizzle_of(layout: Layout | ComposedLayout, element_bits: int, *,
                    umma: bool = False) -> SmemSwizzle | None:
    """The hardware swizzle mode a layout of ``element_bits``-bit elements uses (INTERLEAVE for
    a plain Layout), or None when its swizzle is none of them (``umma=True``: also
    SW128_32B)."""
    e = check_element_bits(element_bits)
    if isinstance(layout, Layout):
        return SMEM_SWIZZLES[0]
    if not isinstance(layout, ComposedLayout) or not isinstance(layout.inner, Swizzle):
        return None
    for sw in UMMA_SMEM_SWIZZLES if umma else SMEM_SWIZZLES:
        # INTERLEAVE too: the identity swizzle Sw<0,4,3> (in bytes) is how a TMA tile without
        # swizzle must be written (the partition verifier's step 5 wants a swizzle layout)
        if sw.element_swizzle(e) == layout.inner:
            return sw
    return None


# ======================================================================= UMMA canonical layouts


#: PTX ISA 9.7.16.3.3 "Canonical Layouts" (tcgen05 shared-memory matrices; 9.7.17.3.3 in later
#: ISA versions), one entry per (major-ness, swizzle mode): the layout of one MMA operand tile
#: (coordinates ``(mn, k)``) in units of elements, *before* the mode's swizzle, which acts on the
#: byte address.  Symbols as in the ISA: ``T`` = 128 / element bits (elements per 16 bytes),
#: ``m`` repeats the pattern along MN, ``k`` along K, ``LBO`` / ``SBO`` the descriptor's
#: leading- / stride-dimension byte offsets (here in elements).  The ISA's table has the eight
#: 16-byte-atomicity rows; the SW128_32B row (MN-major only) is CUTLASS's ``make_umma_desc``
#: form (cute/atom/mma_traits_sm100.hpp, "Swizzle<2,5,2> o smem_ptr o ((T,8,m),(4,k)):
#: ((1,T,LBO),(?T,SBO))", with the K-row stride ``8T`` its stride check expects).
UMMA_SMEM_CANONICAL: dict[tuple[str, str], str] = {
    ("K", "INTERLEAVE"): "((8,m),(T,2k)):((1T,SBO),(1,LBO))",
    ("K", "SW32"): "((8,m),(T,2k)):((2T,SBO),(1,T))",
    ("K", "SW64"): "((8,m),(T,2k)):((4T,SBO),(1,T))",
    ("K", "SW128"): "((8,m),(T,2k)):((8T,SBO),(1,T))",
    ("MN", "INTERLEAVE"): "((T,1,m),(8,k)):((1,T,SBO),(1T,LBO))",
    ("MN", "SW32"): "((T,2,m),(8,k)):((1,T,LBO),(2T,SBO))",
    ("MN", "SW64"): "((T,4,m),(8,k)):((1,T,LBO),(4T,SBO))",
    ("MN", "SW128"): "((T,8,m),(8,k)):((1,T,LBO),(8T,SBO))",
    ("MN", "SW128_32B"): "((T,8,m),(4,k)):((1,T,LBO),(8T,SBO))",
}
_TOKEN = re.compile(r"(\d*)(SBO|LBO|T|m|k)")
_MARK_LBO, _MARK_SBO = 1_000_003, 2_000_029  # stride markers that no real tile reaches


def umma_swizzles_for(major: str, element_bits: int) -> tuple[SmemSwizzle, ...]:
    """The swizzle modes a tcgen05.mma operand of ``element_bits``-bit elements may use in
    shared memory.  PTX ISA (tcgen05 "Shared Memory Matrix Layout"; the swizzling-mode notes
    after the instruction-descriptor table): K-major operands and MN-major 8/16-bit ones use
    the four 16-byte-atomicity modes; MN-major 32-bit (tf32) operands exist only with the
    128-byte swizzle of 32-byte atomicity (CUTLASS and DeepGEMM agree: ``Layout_MN_SW128_32B``
    and ``SWIZZLE_128B_BASE32B`` "for FP32 MN-major"; SW128_32B "is invalid for Major-K")."""
    e = check_element_bits(element_bits)
    if major == "K":
        return SMEM_SWIZZLES
    if major != "MN":
        raise SmemError(f"major must be 'K' or 'MN', got {major!r}")
    if e == 32:
        return (SW128_32B,)
    if e in (8, 16):
        return SMEM_SWIZZLES
    raise SmemError(f"MN-major UMMA operands are 8-, 16- or 32-bit; got {e}-bit elements")


def umma_canonical_text(major: str, swizzle: int | str | SmemSwizzle) -> str:
    """The ISA's canonical-layout text for (major, mode), e.g. ``Sw<3,4,3> o
    ((8,m),(T,2k)):((8T,SBO),(1,T))`` (the swizzle on byte addresses)."""
    sw = smem_swizzle(swizzle, umma=True)
    key = (major, sw.name)
    if key not in UMMA_SMEM_CANONICAL:
        raise SmemError(f"no canonical UMMA layout for {major}-major {sw.name} (the 128-byte "
                        "swizzle with 32-byte atomicity is MN-major only)")
    return f"{sw.swizzle} o {UMMA_SMEM_CANONICAL[key]}"


def _instantiate(text: str, t: int, m: int, k: Any, lbo: int, sbo: int) -> Layout:
    vals = {"T": t, "m": m, "k": k, "LBO": lbo, "SBO": sbo}

    def sub(mo: re.Match[str]) -> str:
        v = int(mo.group(1) or 1) * vals[mo.group(2)]
        if v != int(v):
            raise SmemError(f"canonical layout {text}: {mo.group(0)} = {v} is not an integer")
        return str(int(v))

    lay = parse_layout(_TOKEN.sub(sub, text))
    assert isinstance(lay, Layout)
    return lay


def _canonical_counts(text: str, major: str, t: int, rows: int, k: int) -> tuple[int, Any]:
    """(m, k) of the ISA's text covering a ``rows x k`` tile (m rounded up: a tile narrower
    than one pattern is its first rows)."""

    unit = _instantiate(text, t, 1, 1, 0, 0)
    p0, p1 = size(unit[0]), size(unit[1])
    m = -(-rows // p0)
    if major == "K":  # (T,2k): K is 2k 16-byte units; a sparse A K-block is one unit
        kk = Fraction(k, p1)
        if (2 * kk).denominator != 1:
            raise SmemError(f"a K-major tile of {k} elements is not whole 16-byte units "
                            f"(T = {t})")
        return m, kk
    return m, -(-k // p1)


def umma_canonical_layout(major: str, swizzle: int | str | SmemSwizzle, element_bits: int,
                          rows: int, k: int, lbo: int | None = None,
                          sbo: int | None = None) -> Layout | ComposedLayout:
    """The ISA's canonical layout (:data:`UMMA_SMEM_CANONICAL`) of a ``rows x k`` operand tile
    of ``element_bits``-bit elements: ``Sw o 0 o layout`` with the swizzle in elements.
    ``lbo`` / ``sbo`` are in elements; None takes the compact tile's values (the ones
    ``smem_layout(rows, k, ...)`` has, rows rounded up to whole atoms).  The result covers at
    least ``rows x k``; the tile is its first rows and columns."""
    e = check_element_bits(element_bits)
    sw = smem_swizzle(swizzle, umma=True)
    text = umma_canonical_text(major, sw).split(" o ", 1)[1]
    t = 128 // e if e <= 128 else 1
    if major == "K" and sw.nbytes and k * e > 8 * sw.row_bytes:
        raise SmemError(f"a K-major {sw.name} row holds {sw.row_bytes} bytes of K; {k} "
                        f"{e}-bit elements ({k * e // 8} bytes) are not one canonical layout")
    m, kk = _canonical_counts(text, major, t, rows, k)
    if lbo is None or sbo is None:
        atom = sw.atom(e, major)
        ar, ac = atom.shape  # type: ignore[misc]
        compact = smem_layout(-(-rows // ar) * ar, -(-k // ac) * ac, e, major, sw)
        c_lbo, c_sbo = umma_canonical_params(compact, major, sw, e, rows, k)
        lbo = c_lbo if lbo is None else lbo
        sbo = c_sbo if sbo is None else sbo
    return composition(sw.element_swizzle(e), _instantiate(text, t, m, kk, lbo, sbo))


def umma_canonical_params(layout: Layout | ComposedLayout, major: str,
                          swizzle: int | str | SmemSwizzle, element_bits: int, rows: int,
                          k: int) -> tuple[int, int]:
    """(LBO, SBO) in elements read off ``layout`` (coordinates ``(mn, k)``, its unswizzled
    outer layout): the offset of the coordinate where the canonical form's LBO / SBO mode
    starts, relative to ``(0, 0)``; 0 where that coordinate is outside ``rows x k`` (the
    field is then unused)."""
    e = check_element_bits(element_bits)
    sw = smem_swizzle(swizzle, umma=True)
    text = umma_canonical_text(major, sw).split(" o ", 1)[1]
    t = 128 // e if e <= 128 else 1
    probe = _instantiate(text, t, 2, 2, _MARK_LBO, _MARK_SBO)
    outer = layout.outer if isinstance(layout, ComposedLayout) else layout
    base = int(outer((0, 0)))
    found = {_MARK_LBO: 0, _MARK_SBO: 0}
    for dim in (0, 1):
        mode = flatten(probe[dim])
        before = 1
        for sh, st in zip(mode.shape, mode.stride, strict=True):  # type: ignore[arg-type]
            if st in found:
                coord = (before, 0) if dim == 0 else (0, before)
                if coord[0] < rows and coord[1] < k:
                    found[st] = int(outer(coord)) - base
            before *= sh
    return found[_MARK_LBO], found[_MARK_SBO]
