"""The SM90 WGMMA shared-memory descriptor (nvatom.descriptors.wgmma).

Golden values come only from sources outside nvatom:

* [isa] the PTX ISA's "Matrix Descriptor Format" (wgmma), encoded by hand: the real SM90 bit
  positions, the specification's worked example ``0x0010_0000_0200_1000`` decoded as SM90 (start
  0x10000, LBO field 0x200 = 8192 B, SBO 0, layout type 0, reserved bit 52 set), and the correct
  encodings ``0x4000000000801000`` (start 0x10000, LBO 2048, SBO 0, 128B) and
  ``0x4000004000011000`` (CUTLASS canonical 128B K-major: LBO field 1, SBO 1024 B).
* [cutlass] CUTLASS include/cute/atom/mma_traits_sm90_gmma.hpp, ``make_wgmma_desc``: the
  canonical layouts in 16-byte units (K-major ``((8,n),2):((W,SBO),1)``, INTERLEAVE
  ``((8,n),2):((1,SBO),LBO)``; MN-major ``((W,n),(8,k)):((1,LBO),(W,SBO))``, INTERLEAVE
  ``((1,n),(8,k)):((X,SBO),(1,LBO))``) and its ``GMMA::Layout_*_Atom_Bits`` atoms; the
  LBO/SBO of each tile below is worked out by hand from those atoms in its comment.
  include/cute/arch/mma_sm90_desc.hpp ``union GmmaDescriptor``: start_address_ :14 at bit 0,
  leading_byte_offset_ :14 at bit 16, stride_byte_offset_ :14 at bit 32, base_offset_ :3 at
  bit 49, layout_type_ :2 at bit 62; LayoutType INTERLEAVE 0, B128 1, B64 2, B32 3.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nvatom.atoms.smem import SMEM_SWIZZLES, smem_layout, smem_swizzle
from nvatom.descriptors import (
    FIELDS,
    RESERVED_MASK,
    DescriptorError,
    WgmmaDescriptor,
    canonical_wgmma_layout,
    check_desc_matches,
    decode,
    decode_fields,
    make_wgmma_desc,
)
from nvatom.layout import ComposedLayout, Layout, Swizzle, composition

# ============================================================================ codec


def test_field_table_is_cutlass_gmma_descriptor():
    # [cutlass] mma_sm90_desc.hpp bitfield: 14 | 2 unused | 14 | 2 | 14 | 3 | 3 | 10 | 2
    assert [(f.name, f.lsb, f.width) for f in FIELDS] == [
        ("start_address", 0, 14), ("lbo", 16, 14), ("sbo", 32, 14), ("base_offset", 49, 3),
        ("layout_type", 62, 2),
    ]
    reserved = [b for b in range(64) if RESERVED_MASK >> b & 1]
    assert reserved == [14, 15, 30, 31, 46, 47, 48, *range(52, 62)]


@pytest.mark.parametrize("fields, word", [
    # [isa] the specification's intended fields, encoded at the real positions
    ((0x10000, 2048, 0, 0, "SW128"), 0x4000000000801000),
    # [isa] CUTLASS canonical 128B K-major: LBO = 1 (16 B, ignored), SBO = 1024 B
    ((0x10000, 16, 1024, 0, "SW128"), 0x4000004000011000),
])
def test_hand_encoded_golden_words(fields, word):
    d = WgmmaDescriptor(*fields)
    assert d.encode() == word
    assert decode(word) == d
    assert int(d) == word


@pytest.mark.parametrize("mode, code", [("INTERLEAVE", 0), ("SW128", 1), ("SW64", 2),
                                        ("SW32", 3)])
def test_layout_type_codes(mode, code):
    # [cutlass] GMMA::LayoutType; [isa] bits 62-63
    assert WgmmaDescriptor(0, 0, 0, 0, mode).encode() == code << 62
    assert decode(code << 62).layout_type is smem_swizzle(mode)


def test_explain():
    d = decode(0x4000004000011000)
    assert d.explain() == "start=0x10000 lbo=16 sbo=1024 base_offset=0 swizzle=128B"
    assert str(d) == "0x4000004000011000 (" + d.explain() + ")"
    assert "swizzle=INTERLEAVE" in WgmmaDescriptor(0, 16, 16).explain()
    assert WgmmaDescriptor(0, 0, 0, 0, 32).swizzle.name == "SW32"


def test_seed_worked_example_decoded_as_sm90():
    # [isa] 0x0010_0000_0200_1000 read by SM90: start 0x10000, LBO field 0x200 (8192 B),
    # SBO 0, base offset 0, layout type 0 (INTERLEAVE, not 128B), reserved bit 52 set.
    word = 0x0010_0000_0200_1000
    raw = decode_fields(word)
    assert raw["start_address"] << 4 == 0x10000
    assert raw["lbo"] == 0x200 and raw["lbo"] << 4 == 8192
    assert raw["sbo"] == 0 and raw["base_offset"] == 0 and raw["layout_type"] == 0
    assert raw["reserved"] == 1 << 52
    with pytest.raises(DescriptorError, match=r"reserved bit 52 set"):
        decode(word)
    # With the reserved bit cleared the hardware reads an unswizzled tile.
    d = decode(word & ~(1 << 52))
    assert (d.start_address, d.lbo, d.sbo, d.layout_type.name) == (0x10000, 8192, 0,
                                                                   "INTERLEAVE")


@pytest.mark.parametrize("bits, text", [
    ((14,), "reserved bit 14 set"),
    ((30, 31), "reserved bits 30-31 set"),
    ((46, 48, 60), "reserved bits 46, 48, 60 set"),
])
def test_decode_rejects_reserved_bits(bits, text):
    word = sum(1 << b for b in bits) | 0x4000004000011000
    with pytest.raises(DescriptorError, match=text):
        decode(word)


@pytest.mark.parametrize("word", [-1, 1 << 64, 1.0, True, "0x1"])
def test_decode_rejects_non_words(word):
    with pytest.raises(DescriptorError, match="64-bit unsigned int"):
        decode(word)


@pytest.mark.parametrize("kwargs, text", [
    ({"start_address": 1 << 18}, r"start_address = 0x40000 is out of range: bits 0-13"),
    ({"start_address": 0x10008}, r"start_address = 0x10008 is not 16-byte aligned"),
    ({"start_address": -16}, r"start_address = -0x10 is out of range"),
    ({"lbo": 1 << 18}, r"lbo = 0x40000 is out of range: bits 16-29"),
    ({"lbo": 8}, r"lbo = 0x8 is not 16-byte aligned"),
    ({"sbo": 1 << 18}, r"sbo = 0x40000 is out of range: bits 32-45"),
    ({"sbo": 1000}, r"sbo = 0x3e8 is not 16-byte aligned"),
    ({"base_offset": 8}, r"base_offset = 0x8 is out of range: bits 49-51"),
    ({"lbo": 16.0}, r"lbo must be an int"),
    ({"layout_type": "SW16"}, r"layout_type: unknown shared-memory swizzle 'SW16'"),
])
def test_field_validation(kwargs, text):
    args = {"start_address": 0, "lbo": 16, "sbo": 1024, "base_offset": 0,
            "layout_type": "SW128"} | kwargs
    with pytest.raises(DescriptorError, match=text):
        WgmmaDescriptor(**args)


def test_field_maxima_encode():
    d = WgmmaDescriptor(0x3FFF0, 0x3FFF0, 0x3FFF0, 7, "SW32")
    assert d.encode() == ((1 << 64) - 1) & ~RESERVED_MASK


_valid_words = st.builds(
    lambda s, lbo, sbo, base, lt: s | lbo << 16 | sbo << 32 | base << 49 | lt << 62,
    st.integers(0, (1 << 14) - 1), st.integers(0, (1 << 14) - 1),
    st.integers(0, (1 << 14) - 1), st.integers(0, 7), st.integers(0, 3),
)


@given(_valid_words)
def test_round_trip_word(word):
    assert decode(word).encode() == word


@given(st.integers(0, (1 << 18) - 1).map(lambda a: a & ~15),
       st.integers(0, (1 << 14) - 1), st.integers(0, (1 << 14) - 1), st.integers(0, 7),
       st.sampled_from(SMEM_SWIZZLES))
def test_round_trip_fields(start, lbo, sbo, base, sw):
    d = WgmmaDescriptor(start, 16 * lbo, 16 * sbo, base, sw)
    assert decode(d.encode()) == d


@given(_valid_words, st.sampled_from([14, 15, 30, 31, 46, 47, 48, *range(52, 62)]))
def test_any_reserved_bit_rejected(word, bit):
    with pytest.raises(DescriptorError, match=f"reserved bit {bit} set"):
        decode(word | 1 << bit)


# ============================================================================ from layouts

# (rows, cols, element_bits, major, swizzle) -> (LBO bytes, SBO bytes), worked from [cutlass]:
CANONICAL = [
    # K_SW128 f16 64x64: atom (8,64):(64,1) el, atoms down rows every 512 el; in 16-byte units
    # ((8,8),2):((8,64),1): SBO = 64 x 16 = 1024 B, LBO = 1 (written by CUTLASS, ignored).
    # This is [isa]'s canonical 0x4000004000011000 at start 0x10000.
    ((64, 64, 16, "K", 128), (16, 1024)),
    # K_SW128 of 8-bit (e4m3) and 32-bit (tf32) elements: the same bytes, the same descriptor.
    ((64, 128, 8, "K", 128), (16, 1024)),
    ((64, 32, 32, "K", 128), (16, 1024)),
    # K_SW64 f16 64x32: atom (8,32) el = 8 rows x 64 B, 512 B apart: ((8,8),2):((4,32),1).
    ((64, 32, 16, "K", 64), (16, 512)),
    # K_SW32 f16 64x32: atom (8,16) el = 8 rows x 32 B, 256 B apart: ((8,8),2):((2,16),1).
    ((64, 32, 16, "K", 32), (16, 256)),
    # K_INTER f16 64x16: atom (8,8):(8,1) el = 128 B; 8 atoms down rows, then the second K
    # chunk 8 x 128 = 1024 B on: ((8,8),2):((1,8),64): SBO = 128 B, LBO = 1024 B.
    ((64, 16, 16, "K", 0), (1024, 128)),
    # MN_SW128 f16 128x64: atom (64,8):(1,64) el; 2 atoms down MN (512 el = 1024 B apart),
    # then K atoms 1024 el = 2048 B apart: ((8,2),(8,2)):((1,64),(8,128)).
    ((128, 64, 16, "MN", 128), (1024, 2048)),
    # MN_SW64 f16 128x64: atom (32,8):(1,32) el; 4 atoms down MN 256 el = 512 B apart, K atoms
    # 1024 el = 2048 B apart: ((4,4),(8,2)):((1,32),(4,128)).
    ((128, 64, 16, "MN", 64), (512, 2048)),
    # MN_SW32 f16 64x32: atom (16,8):(1,16) el; 4 atoms down MN 128 el = 256 B apart, K atoms
    # 512 el = 1024 B apart: ((2,4),(8,2)):((1,16),(2,64)).
    ((64, 32, 16, "MN", 32), (256, 1024)),
    # MN_INTER f16 64x32: atom (8,8):(1,8) el; 8 atoms down MN 64 el = 128 B apart (SBO), K
    # atoms 512 el = 1024 B apart (LBO): ((1,8),(8,2)):((X,8),(1,64)).
    ((64, 32, 16, "MN", 0), (1024, 128)),
]


@pytest.mark.parametrize("args, offsets", CANONICAL, ids=lambda v: str(v))
def test_make_wgmma_desc_canonical(args, offsets):
    _, _, e, major, sw = args
    lay = smem_layout(*args)
    d = make_wgmma_desc(lay, e, major, start_address=0x10000)
    assert (d.lbo, d.sbo) == offsets
    assert d.layout_type is smem_swizzle(sw)
    assert (d.start_address, d.base_offset) == (0x10000, 0)
    check_desc_matches(d, lay, e, major)


def test_make_wgmma_desc_canonical_word():
    # [isa] CUTLASS canonical 128B K-major at start 0x10000 -> 0x4000004000011000
    d = make_wgmma_desc(smem_layout(64, 64, 16, "K", 128), 16, "K", 0x10000)
    assert d.encode() == 0x4000004000011000
    assert d.field_values()["lbo"] == 1 and d.field_values()["sbo"] == 64


def test_larger_k_uses_first_k_block():
    # A 64x128 f16 K_SW128 tile holds two atoms along K; the descriptor of K-block 0 is the
    # same as for 64x64 (the next K-block is a start-address advance).
    small = make_wgmma_desc(smem_layout(64, 64, 16, "K", 128), 16, "K")
    assert make_wgmma_desc(smem_layout(64, 128, 16, "K", 128), 16, "K") == small


@pytest.mark.parametrize("args", [a for a, _ in CANONICAL])
def test_canonical_layout_is_the_tile(args):
    rows, _, e, major, _ = args
    lay = smem_layout(*args)
    d = make_wgmma_desc(lay, e, major)
    want = canonical_wgmma_layout(d, e, major, rows)
    kb = 256 // e
    for r in range(rows):
        for k in range(kb):
            assert lay((r, k)) == want((r, k))


# ------------------------------------------------------------------ rejections


def test_rejects_unknown_swizzle():
    lay = composition(Swizzle(3, 2, 3), Layout((64, 64), (64, 1)))
    with pytest.raises(DescriptorError, match=r"none of the WGMMA modes for 16-bit"):
        make_wgmma_desc(lay, 16, "K")


def test_rejects_row_major_without_core_matrices():
    # Plain row-major 64x64 f16: 16-byte rows of K are 128 B apart, not 16 B (INTERLEAVE W=1)
    with pytest.raises(DescriptorError, match=r"K-major INTERLEAVE layout.*row \(mode 0,0\) "
                                              r"stride is 8, not 1"):
        make_wgmma_desc(Layout((64, 64), (64, 1)), 16, "K")


def test_rejects_swizzle_not_matching_row_width():
    # The SW64 swizzle on 128-byte rows: the swizzle is known but rows are 8 chunks, not 4.
    lay = composition(Swizzle(2, 3, 3), Layout(((8, 8), 64), ((64, 512), 1)))
    with pytest.raises(DescriptorError, match=r"SW64 layout.*stride is 8, not 4"):
        make_wgmma_desc(lay, 16, "K")


def test_rejects_mn_major_tile_as_k_major():
    with pytest.raises(DescriptorError, match=r"not a canonical WGMMA K-major"):
        make_wgmma_desc(smem_layout(64, 64, 16, "MN", 128), 16, "K")


def test_rejects_k_not_multiple_of_k_block():
    with pytest.raises(DescriptorError, match=r"K = 8 16-bit elements is not a multiple of one "
                                              r"wgmma K-block \(16 elements"):
        make_wgmma_desc(smem_layout(64, 8, 16, "K", 0), 16, "K")


def test_rejects_mn_not_multiple_of_span():
    lay = composition(Swizzle(3, 3, 3), Layout((32, 16), (1, 32)))
    with pytest.raises(DescriptorError, match=r"MN size is 4 16-byte chunks, not a multiple of "
                                              r"the SW128 span of 8"):
        make_wgmma_desc(lay, 16, "MN")


def test_rejects_k_major_mn_not_multiple_of_8():
    with pytest.raises(DescriptorError, match=r"MN size 4 is not a multiple of 8"):
        make_wgmma_desc(Layout((4, 16), (8, 1)), 16, "K")


def test_rejects_offset_and_rank_and_args():
    lay = smem_layout(64, 64, 16, "K", 128)
    shifted = ComposedLayout(lay.inner, 8, lay.outer)
    with pytest.raises(DescriptorError, match=r"has offset 8 .*move it into start_address"):
        make_wgmma_desc(shifted, 16, "K")
    with pytest.raises(DescriptorError, match=r"rank 2 \(mn, k\).*has rank 3"):
        make_wgmma_desc(Layout((8, 8, 2), (8, 1, 64)), 16, "K")
    with pytest.raises(DescriptorError, match=r"major must be 'K' or 'MN', got 'M'"):
        make_wgmma_desc(lay, 16, "M")
    with pytest.raises(DescriptorError,
                       match=r"element_bits must be 1, 4, 8, 16, 32 or 64, got 12"):
        make_wgmma_desc(lay, 12, "K")
    with pytest.raises(DescriptorError, match=r"expected a Layout or ComposedLayout"):
        make_wgmma_desc("(8,8):(8,1)", 16, "K")
    with pytest.raises(DescriptorError, match=r"start_address must be an int"):
        make_wgmma_desc(lay, 16, "K", start_address=None)


def test_rejects_start_off_the_swizzle_phase():
    # base_offset 0 needs the pattern aligned: [cutlass] asserts start & 0b1110000000 == 0
    lay = smem_layout(64, 64, 16, "K", 128)
    with pytest.raises(DescriptorError, match=r"start_address 0x10080 is at byte 128 of the "
                                              r"1024-byte SW128 pattern"):
        make_wgmma_desc(lay, 16, "K", 0x10080)
    # a K-block advance inside the 128-byte row keeps the phase
    assert make_wgmma_desc(lay, 16, "K", 0x10020).start_address == 0x10020


def test_rejects_start_out_of_range():
    lay = smem_layout(64, 64, 16, "K", 128)
    with pytest.raises(DescriptorError, match=r"start_address = 0x40000 does not fit bits 0-13"):
        make_wgmma_desc(lay, 16, "K", 1 << 18)


# ------------------------------------------------------------------ check_desc_matches


def test_check_rejects_swizzle_disagreement():
    lay = smem_layout(64, 64, 16, "K", 128)
    d = WgmmaDescriptor(0, 16, 1024, 0, "SW64")
    with pytest.raises(DescriptorError, match=r"swizzled SW128 but the descriptor says SW64"):
        check_desc_matches(d, lay, 16, "K")


def test_check_rejects_seed_descriptor_for_canonical_tile():
    # [isa] the specification's intended 128B descriptor has SBO = 0, wrong for this tile
    lay = smem_layout(64, 64, 16, "K", 128)
    d = decode(0x4000000000801000)
    with pytest.raises(DescriptorError, match=r"LBO/SBO disagree with the layout.*own "
                                              r"descriptor is start=0x0 lbo=16 sbo=1024"):
        check_desc_matches(d, lay, 16, "K")


def test_check_rejects_swapped_lbo_sbo_interleave():
    lay = smem_layout(64, 16, 16, "K", 0)
    check_desc_matches(WgmmaDescriptor(0, 1024, 128), lay, 16, "K")
    with pytest.raises(DescriptorError, match=r"LBO/SBO disagree"):
        check_desc_matches(WgmmaDescriptor(0, 128, 1024), lay, 16, "K")


def test_check_rejects_base_offset():
    lay = smem_layout(64, 64, 16, "K", 128)
    with pytest.raises(DescriptorError, match=r"base_offset 3 != 0 is not modelled"):
        check_desc_matches(WgmmaDescriptor(0, 16, 1024, 3, "SW128"), lay, 16, "K")


def test_smem_desc_view_checks_on_construction() -> None:
    from nvatom.atoms.interfaces import DescriptorType
    from nvatom.atoms.smem import smem_layout
    from nvatom.descriptors import DescriptorError, SmemDescView, WgmmaDescriptor

    tile = smem_layout(64, 64, 16, "K", 128)
    view = SmemDescView.of(tile, 16, "K", 0x10000)
    assert isinstance(view, DescriptorType)
    assert view.word == 0x4000004000011000  # [isa] CUTLASS's canonical 128B K-major word
    assert str(view).startswith("smem_desc_view<Sw<3,3,3> o 0 o")
    wrong = WgmmaDescriptor(0x10000, 16, 1024, 0, "SW64")
    with pytest.raises(DescriptorError, match="the layout is swizzled SW128 but the descriptor "
                       "says SW64"):
        SmemDescView(tile, 16, "K", wrong)
