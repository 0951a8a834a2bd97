"""The SM100 tcgen05 descriptors (nvatom.descriptors.umma).

Golden values come from outside nvatom:

* [cutlass] include/cute/arch/mma_sm100_desc.hpp declares ``union SmemDescriptor``,
  ``InstrDescriptor`` and ``InstrDescriptorBlockScaled`` as C bit-fields.  The ctypes
  structures below restate those declarations field for field (type, width, order, unnamed
  padding); the C compiler's bit-field layout rule, applied by ctypes, then yields the
  reference word for any field values.  This checks our field tables without reusing them.
* [isa] the PTX ISA's "Shared memory descriptor" (tcgen05), encoded by hand: the SM100 words
  ``0x4000400000801000`` (start 0x10000, LBO 2048, SBO 0, 128B) and ``0x4000404000011000``
  (CUTLASS canonical 128B K-major: LBO field 1, SBO 1024 B), and the layout-type codes
  0/1/2/4/6.
* [cutlass] formats: F16 0 / BF16 1 / TF32 2; E4M3 0, E5M2 1, E2M3 3, E3M2 4, E2M1 5;
  UINT8 0 / INT8 1; MXF4 E2M1 1; CFormat F16 0, F32 1, S32 2; ScaleFormat UE4M3 0, UE8M0 1.
"""

from __future__ import annotations

import ctypes
import random

import pytest

from nvatom.atoms.sm100 import umma_atom
from nvatom.atoms.smem import SmemError, smem_layout
from nvatom.descriptors.umma import (
    FORMAT_CODES,
    InstrDescriptor,
    UmmaSmemDescriptor,
    canonical_umma_layout,
    check_umma_desc_matches,
    decode_idesc,
    decode_smem_desc,
    make_umma_desc,
)
from nvatom.errors import DescriptorError
from nvatom.layout import composition, layouts_equivalent

u8, u16, u32 = ctypes.c_uint8, ctypes.c_uint16, ctypes.c_uint32


class _CutlassSmemDesc(ctypes.LittleEndianStructure):
    # uint16_t start_address_ : 14, : 2; uint16_t leading_byte_offset_ : 14, : 2;
    # uint16_t stride_byte_offset_ : 14, version_ : 2;
    # uint8_t : 1, base_offset_ : 3, lbo_mode_ : 1, : 3; uint8_t : 5, layout_type_ : 3;
    _fields_ = [("start_address_", u16, 14), ("_p0", u16, 2),
                ("leading_byte_offset_", u16, 14), ("_p1", u16, 2),
                ("stride_byte_offset_", u16, 14), ("version_", u16, 2),
                ("_p2", u8, 1), ("base_offset_", u8, 3), ("lbo_mode_", u8, 1), ("_p3", u8, 3),
                ("_p4", u8, 5), ("layout_type_", u8, 3)]


class _CutlassIdesc(ctypes.LittleEndianStructure):
    _fields_ = [("sparse_id2_", u16, 2), ("sparse_flag_", u16, 1), ("saturate_", u16, 1),
                ("c_format_", u16, 2), ("_p0", u16, 1), ("a_format_", u16, 3),
                ("b_format_", u16, 3), ("a_negate_", u16, 1), ("b_negate_", u16, 1),
                ("a_major_", u16, 1),
                ("b_major_", u16, 1), ("n_dim_", u16, 6), ("_p1", u16, 1), ("m_dim_", u16, 5),
                ("_p2", u16, 1), ("max_shift_", u16, 2)]


class _CutlassIdescBs(ctypes.LittleEndianStructure):
    _fields_ = [("sparse_id2_", u16, 2), ("sparse_flag_", u16, 1), ("_p0", u16, 1),
                ("b_sf_id_", u16, 2), ("_p1", u16, 1), ("a_format_", u16, 3),
                ("b_format_", u16, 3), ("a_negate_", u16, 1), ("b_negate_", u16, 1),
                ("a_major_", u16, 1),
                ("b_major_", u16, 1), ("n_dim_", u16, 6), ("scale_format_", u16, 1),
                ("m_dim_", u16, 5), ("a_sf_id_", u16, 2), ("k_size_", u16, 1)]


def _word(s: ctypes.Structure) -> int:
    return int.from_bytes(bytes(s), "little")


def _cutlass_smem(start: int, lbo: int, sbo: int, base: int, mode: int, lt: int) -> int:
    s = _CutlassSmemDesc(start_address_=start >> 4, leading_byte_offset_=lbo >> 4,
                         stride_byte_offset_=sbo >> 4, version_=1, base_offset_=base,
                         lbo_mode_=mode, layout_type_=lt)
    assert ctypes.sizeof(s) == 8
    return _word(s)


_CUTLASS_LT = {"INTERLEAVE": 0, "SW128_32B": 1, "SW128": 2, "SW64": 4, "SW32": 6}

# ============================================================================ smem descriptor


def test_smem_desc_matches_cutlass_bitfields_on_random_fields() -> None:
    rng = random.Random(9)
    for _ in range(500):
        start, lbo, sbo = (rng.randrange(0, 1 << 14) << 4 for _ in range(3))
        base, mode = rng.randrange(8), rng.randrange(2)
        lt = rng.choice(list(_CUTLASS_LT))
        d = UmmaSmemDescriptor(start, lbo, sbo, base, mode, lt)
        want = _cutlass_smem(start, lbo, sbo, base, mode, _CUTLASS_LT[lt])
        assert d.encode() == want, d.explain()
        assert decode_smem_desc(want) == d


def test_hand_encoded_golden_words() -> None:
    assert UmmaSmemDescriptor(0x10000, 2048, 0, layout_type="SW128").encode() == \
        0x4000400000801000
    d = make_umma_desc(smem_layout(64, 64, 16, "K", 128), 16, "K", 0x10000)
    assert (d.lbo, d.sbo, d.layout_type) == (16, 1024, "SW128")
    assert d.encode() == 0x4000404000011000


@pytest.mark.parametrize(("sw", "code"), [("INTERLEAVE", 0), ("SW32", 6), ("SW64", 4),
                                          ("SW128", 2)])
def test_layout_type_codes(sw: str, code: int) -> None:
    d = make_umma_desc(smem_layout(64, 64, 16, "K", sw), 16, "K")
    assert d.encode() >> 61 == code
    assert (d.encode() >> 46) & 0b111 == 0b001


def test_decode_rejects_bad_words() -> None:
    with pytest.raises(DescriptorError, match="0b001"):
        decode_smem_desc(0x4000004000011000)  # the SM90 word: bits 46-48 are 0
    with pytest.raises(DescriptorError, match="reserved bit"):
        decode_smem_desc(0x4000404000011000 | 1 << 55)
    with pytest.raises(DescriptorError, match="unassigned"):
        decode_smem_desc((0x4000404000011000 & ~(7 << 61)) | 3 << 61)
    with pytest.raises(DescriptorError, match="64-bit"):
        decode_smem_desc(-1)


def test_smem_desc_field_errors() -> None:
    with pytest.raises(DescriptorError, match="16-byte aligned"):
        UmmaSmemDescriptor(8, 16, 16)
    with pytest.raises(DescriptorError, match="does not fit"):
        UmmaSmemDescriptor(1 << 18, 16, 16)
    with pytest.raises(DescriptorError, match="layout_type"):
        UmmaSmemDescriptor(0, 16, 16, layout_type="SW256")
    with pytest.raises(DescriptorError, match="base_offset"):
        UmmaSmemDescriptor(0, 16, 16, base_offset=8)


@pytest.mark.parametrize("bits", [8, 16, 32])
@pytest.mark.parametrize("major", ["K", "MN"])
@pytest.mark.parametrize("sw", ["INTERLEAVE", "SW32", "SW64", "SW128", "SW128_32B"])
def test_derived_desc_describes_the_layout(bits: int, major: str, sw: str) -> None:
    # PTX ISA (tcgen05 shared-memory layouts, swizzling notes after the idesc table): tf32
    # MN-major operands exist only with the 128-byte swizzle of 32-byte atomicity, and that
    # mode is for them only (CUTLASS: "SWIZZLE_128B_BASE32B is invalid for Major-K").
    legal = (major == "MN" and bits == 32) == (sw == "SW128_32B")
    rows, cols = 256, 1024 // bits
    if not legal:
        if major == "K" and sw == "SW128_32B":
            with pytest.raises(SmemError, match="MN-major only|no K-major atom"):
                smem_layout(rows, cols, bits, major, sw)
            return
        lay = smem_layout(rows, cols, bits, major, sw)
        with pytest.raises(DescriptorError, match=f"{bits}-bit elements takes the swizzle "
                           f"modes .*not {sw}"):
            make_umma_desc(lay, bits, major)
        return
    lay = smem_layout(rows, cols, bits, major, sw)
    d = make_umma_desc(lay, bits, major)
    check_umma_desc_matches(d, lay, bits, major)
    kblock = 256 // bits
    want = canonical_umma_layout(d, bits, major, rows)
    from nvatom.layout import Layout

    assert layouts_equivalent(composition(lay, (Layout(rows, 1), Layout(kblock, 1))), want)
    lbo, sbo = (d.lbo + 16, d.sbo) if major == "MN" else (d.lbo, d.sbo + 16)
    other = UmmaSmemDescriptor(d.start_address, lbo, sbo, 0, 0, d.layout_type)
    with pytest.raises(DescriptorError):
        check_umma_desc_matches(other, lay, bits, major)


# ============================================================================ idesc


def _cutlass_idesc(d: InstrDescriptor) -> int:
    codes = FORMAT_CODES[d.kind]
    common = dict(sparse_id2_=d.sparse_id2, sparse_flag_=int(d.sparse),
                  a_format_=codes[d.a.name], b_format_=codes[d.b.name],
                  a_negate_=int(d.a_negate), b_negate_=int(d.b_negate),
                  a_major_=int(d.a_major == "MN"), b_major_=int(d.b_major == "MN"),
                  n_dim_=d.n >> 3, m_dim_=d.m >> 4)
    if d.block_scaled:
        assert d.sf is not None
        s: ctypes.Structure = _CutlassIdescBs(
            **common, b_sf_id_=d.b_sf_id, a_sf_id_=d.a_sf_id, k_size_=d.k_size,
            scale_format_={"ue4m3": 0, "ue8m0": 1}[d.sf.name])
    else:
        assert d.d is not None
        s = _CutlassIdesc(**common, saturate_=int(d.saturate),
                          c_format_={"f16": 0, "f32": 1, "s32": 2}[d.d.name],
                          max_shift_={0: 0, 8: 1, 16: 2, 32: 3}[d.max_shift])
    assert ctypes.sizeof(s) == 4
    return _word(s)


_ACC = {"f16": ("f32", "f16"), "tf32": ("f32",), "f8f6f4": ("f32", "f16"), "i8": ("s32",)}


def test_idesc_matches_cutlass_bitfields_on_random_fields() -> None:
    """Random *valid* descriptors (PTX ISA Tables 39, 42-44: shapes every kind has, selector
    only where allowed, no i8 negate, K-major mxf4, per-kind scale formats and ids) encode
    like CUTLASS's bit-fields.  Validity itself is swept in test_idesc_validity.py."""
    rng = random.Random(10)
    for _ in range(2000):
        kind = rng.choice(list(FORMAT_CODES))
        types = list(FORMAT_CODES[kind])
        a = rng.choice(types)
        b = a if kind == "f16" else rng.choice(types)
        bs = kind.startswith("mx")
        sp = rng.random() < 0.3
        mn_major = kind not in ("mxf4", "mxf4nvf4")
        kw: dict = dict(kind=kind, m=rng.choice([128, 256] if bs else [64, 128, 256]),
                        n=32 * rng.randrange(1, 9), a=a, b=b,
                        a_major=rng.choice(["K", "MN"] if mn_major else ["K"]),
                        b_major=rng.choice(["K", "MN"] if mn_major else ["K"]),
                        a_negate=kind != "i8" and rng.random() < .5,
                        b_negate=kind != "i8" and rng.random() < .5, sparse=sp,
                        sparse_id2=rng.randrange(4) if sp and kind in ("f16", "tf32") else 0)
        if bs:
            ids = range(4) if kind == "mxf8f6f4" else (0, 2)
            kw.update(sf=rng.choice(["ue8m0", "ue4m3"] if kind == "mxf4nvf4" else ["ue8m0"]),
                      a_sf_id=rng.choice(ids), b_sf_id=rng.choice(ids),
                      k_size=int(kind != "mxf8f6f4" and not sp and kw["m"] == 256
                                 and rng.random() < .5))
        else:
            acc = _ACC[kind] if (kind, a) != ("f16", "bf16") else ("f32",)
            kw.update(d=rng.choice(acc), saturate=kind == "i8" and rng.random() < .5,
                      max_shift=rng.choice([0, 8, 16, 32]))
        d = InstrDescriptor(**kw)
        assert d.encode() == _cutlass_idesc(d), d.explain()
        assert decode_idesc(d.encode(), kind) == d


@pytest.mark.parametrize(("name", "word"), [
    # f16 x f16 -> f32, M 128, N 256, K-major: c_format 1 (bit 4), N>>3 = 32 at 17, M>>4 = 8
    # at 24  ->  0x10 | 32 << 17 | 8 << 24
    ("sm100.mma.f16.cta1.m128n256k16.ss.f32.f16.f16", 0x10 | 32 << 17 | 8 << 24),
    # bf16: a_format = b_format = 1 (bits 7, 10)
    ("sm100.mma.f16.cta1.m128n128k16.ss.f32.bf16.bf16",
     0x10 | 1 << 7 | 1 << 10 | 16 << 17 | 8 << 24),
    # s8 x u8 -> s32 (c_format 2), M 64, N 8
    ("sm100.mma.i8.cta1.m64n8k32.ss.s32.s8.u8", 2 << 4 | 1 << 7 | 0 << 10 | 1 << 17 | 4 << 24),
    # e5m2 x e2m1 (codes 1, 5), f16 acc, 2-CTA M 256, N 16
    ("sm100.mma.f8f6f4.cta2.m256n16k32.ss.f16.e5m2.e2m1", 1 << 7 | 5 << 10 | 2 << 17 | 16 << 24),
    # NVFP4: e2m1 code 1 for mxf4nvf4, scale ue4m3 (bit 23 = 0), M 128 N 128
    ("sm100.mma_bs.mxf4nvf4.cta1.m128n128k64.ss.f32.e2m1.e2m1.ue4m3.vs16",
     1 << 7 | 1 << 10 | 16 << 17 | 8 << 24),
    # MXFP8 e4m3 x e4m3 with ue8m0 (bit 23), sparse (bit 2)
    ("sm100.mma_bs_sp.mxf8f6f4.cta1.m128n64k64.ss.f32.e4m3.e4m3.ue8m0.vs64",
     1 << 2 | 8 << 17 | 1 << 23 | 8 << 24),
])
def test_idesc_golden(name: str, word: int) -> None:
    assert umma_atom(name).idesc().encode() == word


def test_idesc_mn_major_and_negate_bits() -> None:
    a = umma_atom("sm100.mma.f16.cta1.m64n64k16.ss.f32.f16.f16.amn.bmn")
    w = a.idesc(a_negate=True).encode()
    assert w >> 13 & 1 and w >> 15 & 1 and w >> 16 & 1 and not w >> 14 & 1


def test_idesc_errors() -> None:
    with pytest.raises(DescriptorError, match="has no code"):
        InstrDescriptor("f16", 128, 128, "e4m3", "e4m3", "f32")
    with pytest.raises(DescriptorError, match="saturate"):
        InstrDescriptor("f16", 128, 128, "f16", "f16", "f32", saturate=True)
    with pytest.raises(DescriptorError, match="M = 100"):
        InstrDescriptor("f16", 100, 128, "f16", "f16", "f32")
    with pytest.raises(DescriptorError, match="scale format"):
        InstrDescriptor("mxf4", 128, 128, "e2m1", "e2m1")
    with pytest.raises(DescriptorError, match="reserved bit"):
        decode_idesc(1 << 6, "f16")
    with pytest.raises(DescriptorError, match="names no"):
        decode_idesc(2 << 7 | 1 << 4 | 1 << 17 | 4 << 24, "f8f6f4")  # format code 2
    with pytest.raises(DescriptorError, match="sparse_id2"):
        InstrDescriptor("f16", 128, 128, "f16", "f16", "f32", sparse_id2=1)


# ============================================================================ SW128_32B


def _sw128_32b_byte(addr: int) -> int:
    """PTX ISA Table 40 layout type 1, "128-Byte with 32B atomic swizzling": within each
    128-byte line the 32-byte units are permuted by the line index mod 4 (CUTLASS
    ``Swizzle<2,5,2>``: bits [5,7) ^= bits [7,9)), written out here bit by bit."""
    unit = (addr >> 5) & 3
    line = (addr >> 7) & 3
    return (addr & ~(3 << 5)) | ((unit ^ line) << 5)


def test_sw128_32b_descriptor_round_trip_and_layout() -> None:
    # tf32 MN-major tile 128 (MN) x 8 (K), compact: atoms of 32 MN elements (128 bytes) x 4 K
    # rows; the MN atoms follow each other (LBO = 512 bytes), the K-row groups of 4 after all
    # of them (SBO = 4 atoms x 512 bytes = 2048)
    lay = smem_layout(128, 8, 32, "MN", "SW128_32B")
    d = make_umma_desc(lay, 32, "MN", 0x800)
    assert (d.lbo, d.sbo, d.layout_type, d.start_address) == (512, 2048, "SW128_32B", 0x800)
    word = d.encode()
    assert word >> 61 == 1 and (word >> 46) & 7 == 1
    assert decode_smem_desc(word) == d
    # the element at (mn, k) sits at byte 4 * (mn % 32) + 128 * (k % 4) + 512 * (mn // 32)
    # + 2048 * (k // 4) before the swizzle (the ISA's MN-major canonical form with 4-row atoms)
    for mn in range(128):
        for k in range(8):
            lin = 4 * (mn % 32) + 128 * (k % 4) + 512 * (mn // 32) + 2048 * (k // 4)
            assert int(lay((mn, k))) * 4 == _sw128_32b_byte(lin)
    want = canonical_umma_layout(d, 32, "MN", 128)
    assert all(int(want((mn, k))) == int(lay((mn, k))) for mn in range(128) for k in range(8))
    check_umma_desc_matches(d, lay, 32, "MN")
    from dataclasses import replace

    with pytest.raises(DescriptorError, match="does not describe"):
        check_umma_desc_matches(replace(d, sbo=4096), lay, 32, "MN")
    with pytest.raises(DescriptorError, match="512-byte SW128_32B pattern"):
        make_umma_desc(lay, 32, "MN", 0x880)


def test_sw128_32b_refusals_name_the_values() -> None:
    with pytest.raises(DescriptorError, match="tf32 MN-major exists only with the 128-byte "
                       "swizzle of 32-byte atomicity"):
        make_umma_desc(smem_layout(64, 8, 32, "MN", "SW64"), 32, "MN")
    with pytest.raises(DescriptorError, match="K-major operand of 32-bit elements takes the "
                       "swizzle modes INTERLEAVE, SW32, SW64, SW128, not SW128_32B"):
        from nvatom.layout import Layout, Swizzle
        from nvatom.layout import composition as comp

        make_umma_desc(comp(Swizzle(2, 3, 2), Layout((8, 32), (32, 1))), 32, "K")
    assert UmmaSmemDescriptor(0, 16, 16, layout_type="SW128_32B").swizzle.name == "SW128_32B"
    with pytest.raises(DescriptorError, match="no SM90 equivalent"):
        UmmaSmemDescriptor(0, 16, 16, layout_type="SW128_32B").as_wgmma()
