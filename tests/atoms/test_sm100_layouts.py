"""UMMA (tcgen05.mma) operand layouts against the PTX ISA, rule by rule, element by element.

Each rule is written here independently of nvatom's tables:

* shared memory, PTX ISA 9.7.16.3.3 "Canonical Layouts" (tcgen05): per major-ness and swizzle
  mode, the element offset of (mn, k) from LBO / SBO, then the swizzle on the byte address
  (16-byte units of 128-byte lines permuted by the line index; for the 128-byte swizzle with
  32-byte atomicity, 32-byte units by the line index mod 4);
* D in TMEM, PTX ISA 9.7.16.10.5 "Data Path Layout Organization": the lane and column of each
  accumulator element for Layouts A, B, D, E, F, G;
* A in TMEM: D's lane of the row, K packed 32 / bits to a column;
* scale factors, PTX ISA 9.7.16.10.7: row r in lane r % 32, column r // 32, every 32-lane
  partition a copy (2x2: each half of the rows in its own pair of partitions);

then the verifier's "expects Mma atom layout of ..." diagnostics byte for byte
(docs/spec-deviations.md#mma-verifier-ladders), and
``scale_factor_layout_is_legal`` (#block-scale-packed-value).
"""

from __future__ import annotations

import dataclasses
import itertools

import pytest

from nvatom import diagnostics as D
from nvatom.atoms.interfaces import AtomVerificationError
from nvatom.atoms.sm100 import (
    UmmaError,
    UmmaUse,
    make_umma_atom,
    scale_factor_layout_is_legal,
    umma_atom,
)
from nvatom.atoms.smem import SmemError, smem_layout, umma_canonical_layout
from nvatom.atoms.verify import OperandUse
from nvatom.descriptors.umma import make_umma_desc
from nvatom.layout import ComposedLayout, Layout

L = 1 << 16  # one TMEM lane in an address lane << 16 | column

# ============================================================================ shared memory


def _isa_offset(major: str, mode: str, t: int, lbo: int, sbo: int, r: int, k: int) -> int:
    """PTX ISA canonical layouts, in elements (T elements per 16 bytes; W 16-byte units per
    swizzled row)."""
    w = {"INTERLEAVE": 1, "SW32": 2, "SW64": 4, "SW128": 8, "SW128_32B": 8}[mode]
    if major == "K":
        if mode == "INTERLEAVE":  # ((8,m),(T,2k)):((1T,SBO),(1,LBO))
            return (r % 8) * t + (r // 8) * sbo + k % t + (k // t) * lbo
        return (r % 8) * w * t + (r // 8) * sbo + k  # ((8,m),(T,2k)):((WT,SBO),(1,T))
    if mode == "INTERLEAVE":  # ((T,1,m),(8,k)):((1,T,SBO),(1T,LBO))
        return r % t + (r // t) * sbo + (k % 8) * t + (k // 8) * lbo
    rows_k = 4 if mode == "SW128_32B" else 8  # 32-byte atomicity: atoms of 4 K rows
    return r % (w * t) + (r // (w * t)) * lbo + (k % rows_k) * w * t + (k // rows_k) * sbo


def _isa_swizzle(mode: str, byte: int) -> int:
    if mode == "INTERLEAVE":
        return byte
    if mode == "SW128_32B":  # 32-byte unit u of 128-byte line l -> u ^ (l % 4)
        return (byte & ~0x60) | ((((byte >> 5) & 3) ^ ((byte >> 7) & 3)) << 5)
    bits = {"SW32": 1, "SW64": 2, "SW128": 3}[mode]
    mask = (1 << bits) - 1
    return (byte & ~(mask << 4)) | ((((byte >> 4) & mask) ^ ((byte >> 7) & mask)) << 4)


_SMEM = [("K", m, e) for m in ("INTERLEAVE", "SW32", "SW64", "SW128") for e in (4, 8, 16, 32)]
_SMEM += [("MN", m, e) for m in ("INTERLEAVE", "SW32", "SW64", "SW128") for e in (8, 16)]
_SMEM += [("MN", "SW128_32B", 32)]


@pytest.mark.parametrize(("major", "mode", "bits"), _SMEM)
def test_canonical_smem_layouts_are_the_isa_ones(major: str, mode: str, bits: int) -> None:
    t = 128 // bits
    rows, k = 128, 256 // bits  # one dense K-block (32 bytes)
    lbo, sbo = 16 * 64 * t, 16 * 4 * t  # in elements; 16-byte multiples, unlike any compact
    lay = umma_canonical_layout(major, mode, bits, rows, k, lbo, sbo)
    for r in range(rows):
        for kk in range(k):
            want = _isa_swizzle(mode, _isa_offset(major, mode, t, lbo, sbo, r, kk) * bits // 8)
            assert int(lay((r, kk))) * bits // 8 == want, (r, kk)


@pytest.mark.parametrize(("major", "mode", "bits"), _SMEM)
def test_compact_canonical_is_the_tile_a_tma_box_fills(major: str, mode: str, bits: int) -> None:
    # the compact LBO / SBO are those of CuTe's tile_to_shape(atom, tile) (smem_layout), and
    # the descriptor derived from that tile carries them
    rows, k = 256, 256 // bits
    ar = 8 if major == "K" else {"INTERLEAVE": 1, "SW32": 2, "SW64": 4, "SW128": 8,
                                 "SW128_32B": 8}[mode] * 128 // bits
    kpad = max(k, {"INTERLEAVE": 16, "SW32": 32, "SW64": 64, "SW128": 128,
                   "SW128_32B": 128}[mode] * 8 // bits) if major == "K" else k
    tile = smem_layout(-(-rows // ar) * ar, kpad, bits, major, mode)
    canon = umma_canonical_layout(major, mode, bits, rows, k)
    assert all(int(canon((r, c))) == int(tile((r, c))) for r in range(rows) for c in range(k))
    d = make_umma_desc(tile, bits, major)
    assert d.layout_type == mode
    # the descriptor's LBO / SBO rebuild the same canonical layout (bytes -> elements)
    if bits >= 8 and not (major == "K" and mode != "INTERLEAVE"):
        again = umma_canonical_layout(major, mode, bits, rows, k, d.lbo * 8 // bits,
                                      d.sbo * 8 // bits)
        assert all(int(again((r, c))) == int(canon((r, c)))
                   for r in range(rows) for c in range(k))


def test_k_major_swizzled_rows_hold_the_k_block() -> None:
    # a sparse f16 B reads 64 bytes of K: a 32-byte swizzled row cannot hold it
    with pytest.raises(SmemError, match="SW32 row holds 32 bytes of K; 32 16-bit elements"):
        umma_canonical_layout("K", "SW32", 16, 64, 32)
    sp = umma_atom("sm100.mma_sp.f16.cta1.m128n64k32.ss.f32.f16.f16")
    assert [s.name for s in sp.smem_swizzles("B")] == ["INTERLEAVE", "SW64", "SW128"]
    assert [s.name for s in sp.smem_swizzles("A")] == ["INTERLEAVE", "SW32", "SW64", "SW128"]


def test_tf32_mn_major_only_with_the_32_byte_atomic_swizzle() -> None:
    a = umma_atom("sm100.mma.tf32.cta1.m128n64k8.ss.f32.tf32.tf32.bmn")
    assert [s.name for s in a.smem_swizzles("B")] == ["SW128_32B"]
    assert [s.name for s in a.smem_swizzles("A")] == ["INTERLEAVE", "SW32", "SW64", "SW128"]
    with pytest.raises(UmmaError, match="MN-major B of 32-bit elements takes the swizzle modes "
                       "SW128_32B, not SW128 \\(tf32 MN-major exists only"):
        a.smem_layout("B", "SW128")
    f16 = umma_atom("sm100.mma.f16.cta1.m128n64k16.ss.f32.f16.f16.bmn")
    with pytest.raises(UmmaError, match="takes the swizzle modes INTERLEAVE, SW32, SW64, SW128, "
                       "not SW128_32B"):
        f16.smem_layout("B", "SW128_32B")


# ============================================================================ TMEM


def _isa_d(lid: str, rows: int, n: int, r: int, c: int) -> tuple[int, int]:
    """(lane, column) of D element (r, c) of one CTA, PTX ISA 9.7.16.10.5."""
    if lid in ("A", "D"):
        return r, c
    if lid == "F":  # half the data path: 16 lanes at the start of each 32-lane partition
        return (r % 16) + 32 * (r // 16), c
    if lid in ("B", "E"):  # N halves over lanes 0-63 and 64-127
        return r + 64 * (c // (n // 2)), c % (n // 2)
    assert lid == "G"  # N quarters over the four lane partitions
    return r + 32 * (c // (n // 4)), c % (n // 4)


_TMEM_ATOMS = [
    ("f16", 1, 128, 64, False, False, "D"),
    ("f16", 1, 64, 64, False, False, "F"),
    ("f16", 2, 256, 128, False, False, "A"),
    ("f16", 2, 128, 64, False, False, "B"),
    ("tf32", 1, 128, 64, False, True, "D"),
    ("i8", 1, 64, 128, False, True, "E"),
    ("f16", 1, 32, 64, False, True, "G"),
    ("f16", 1, 32, 128, True, True, "G"),
    ("f8f6f4", 1, 64, 128, True, True, "E"),
]


@pytest.mark.parametrize(("kind", "cta", "m", "n", "sparse", "ws", "lid"), _TMEM_ATOMS)
def test_d_and_a_in_tmem_are_the_data_path_layouts(kind: str, cta: int, m: int, n: int,
                                                   sparse: bool, ws: bool, lid: str) -> None:
    t = {"f16": "f16", "tf32": "tf32", "i8": "s8", "f8f6f4": "e4m3"}[kind]
    d = {"i8": "s32"}.get(kind, "f32")
    atom = make_umma_atom(kind, cta, m, n, d, t, t, a_source="ts", sparse=sparse, ws=ws)
    assert atom.datapath == lid
    rows = m // cta
    lay = atom.tmem_layout("D")
    for r, c in itertools.product(range(rows), range(n)):
        lane, col = _isa_d(lid, rows, n, r, c)
        assert int(lay((r, c))) == lane * L + col, (r, c)
    # A in TMEM: row r in D's lane of (r, 0); element k in column k // (32 / bits)
    bits = {"f16": 16, "tf32": 32}.get(kind, 8)
    ka = atom.k // (2 if sparse else 1)
    a_lay = atom.tmem_layout("A")
    for r, k in itertools.product(range(rows), range(ka)):
        lane, _ = _isa_d(lid, rows, n, r, 0)
        assert int(a_lay((r, k))) == lane * L + k // (32 // bits), (r, k)


def test_layout_c_is_layout_f_per_cta() -> None:
    # PTX ISA 9.7.16.10.5's table: Layout C (M 128, cta_group::2, sparse A) has the same data
    # path organization as F, "4x1 (1/2 datapath utilized)", lane alignment 0 or 16, over the
    # 64 rows each CTA of the pair holds: row r in lane 32 (r // 16) + r % 16.
    sp = umma_atom("sm100.mma_sp.f16.cta2.m128n64k32.ss.f32.f16.f16")
    assert sp.datapath == "C"
    lay = sp.tmem_layout("D")
    for r, c in itertools.product(range(64), range(64)):
        assert int(lay((r, c))) == (32 * (r // 16) + r % 16) * L + c, (r, c)



def _isa_sf(rows: int, datapath: str, r: int) -> tuple[int, int]:
    """PTX ISA 9.7.16.10.7 (CUTLASS tmem_sf_frg): (lane, column) of scale-factor row r."""
    if datapath == "4x1":
        return r % 32, r // 32
    half = rows // 2
    return (r % half) % 32 + 64 * (r // half), (r % half) // 32


@pytest.mark.parametrize(("name", "sfa", "sfb"), [
    ("sm100.mma_bs.mxf8f6f4.cta1.m128n256k32.ss.f32.e4m3.e2m1.ue8m0.vs32", "4x1", "4x1"),
    ("sm100.mma_bs.mxf4nvf4.cta2.m128n128k64.ss.f32.e2m1.e2m1.ue4m3.vs16", "4x1", "2x2"),
    ("sm100.mma_bs.mxf4.cta2.m256n64k64.ss.f32.e2m1.e2m1.ue8m0.vs32", "4x1", "4x1"),
    ("sm100.mma_bs_sp.mxf8f6f4.cta1.m128n16k64.ss.f32.e4m3.e4m3.ue8m0.vs64", "4x1", "4x1"),
])
def test_scale_factors_in_tmem(name: str, sfa: str, sfb: str) -> None:
    atom = umma_atom(name)
    for op, dp, rows in (("SFA", sfa, atom.m // atom.cta_group), ("SFB", sfb, atom.n)):
        lay = atom.tmem_layout(op)
        count = atom.k // atom.vec_size
        assert atom.tmem_tile(op) == (rows, count)
        for r, j in itertools.product(range(rows), range(count)):
            lane, col = _isa_sf(rows, dp, r)
            assert int(lay((r, j))) == lane * L + col, (op, r, j)  # byte sf_id + j of the word


# ============================================================================ verifier


def _op(t: str, res: str, layout: object = None) -> OperandUse:
    return OperandUse(t, res, layout)


def _err(atom: object, use: UmmaUse) -> str:
    with pytest.raises(AtomVerificationError) as e:
        atom.verify_instance("sm_100a", use)  # type: ignore[attr-defined]
    return str(e.value)


def _both_ctas(lay: Layout, cta: int) -> Layout:
    """A per-CTA TMEM layout as the whole operand's: a CTA pair's second half of the rows sits
    at the same addresses in the peer CTA (stride 0 over the CTA mode)."""
    if cta == 1:
        return lay
    return Layout(((lay.shape[0], 2), lay.shape[1]), ((lay.stride[0], 0), lay.stride[1]))


def test_verifier_accepts_the_atoms_own_layouts() -> None:
    for name in ("sm100.mma.f16.cta1.m128n64k16.ss.f32.f16.f16",
                 "sm100.mma.tf32.cta1.m64n64k8.ts.f32.tf32.tf32.bmn",
                 "sm100.mma.i8.cta2.m256n128k32.ss.s32.s8.u8.amn.bmn",
                 "sm100.mma_bs.mxf4nvf4.cta2.m128n128k64.ss.f32.e2m1.e2m1.ue4m3.vs16"):
        atom = umma_atom(name)
        cta = atom.cta_group
        use = UmmaUse.canonical(atom)
        kw: dict[str, OperandUse] = {}
        for slot, op in (("a", "A"), ("b", "B")):
            old = getattr(use, slot)
            if old.residency == "smem_desc_view":
                major = atom.a_major if op == "A" else atom.b_major
                rows, k = atom.operand_shape(op)  # the whole operand: CTA 0's rows first
                for sw in atom.smem_swizzles(op):
                    lay = umma_canonical_layout(major, sw, atom.element_bits(op), rows, k)
                    atom.verify_instance("sm_100a", dataclasses.replace(
                        use, **{slot: _op(old.type_name, old.residency, lay)}))
                kw[slot] = _op(old.type_name, old.residency, umma_canonical_layout(
                    major, atom.smem_swizzles(op)[-1], atom.element_bits(op), rows, k))
            else:
                kw[slot] = _op(old.type_name, "tmem", _both_ctas(atom.tmem_layout(op), cta))
        kw["d"] = _op(atom.d.name, "tmem", _both_ctas(atom.tmem_layout("D"), cta))
        if atom.block_scaled:
            kw["sfa"] = _op(atom.sf.name, "tmem", atom.tmem_layout("SFA"))
            kw["sfb"] = _op(atom.sf.name, "tmem", atom.tmem_layout("SFB"))
            assert scale_factor_layout_is_legal(atom, kw["sfa"].layout, kw["sfb"].layout)
        atom.verify_instance("sm_100a", dataclasses.replace(use, **kw))


def test_verifier_smem_diagnostics() -> None:
    a = umma_atom("sm100.mma.f16.cta1.m128n64k16.ss.f32.f16.f16")
    use = UmmaUse.canonical(a)
    # a plain row-major tile is no canonical layout: no swizzle means INTERLEAVE, whose rows
    # are 16 bytes apart (T = 8 elements); LBO (0, 8) -> 8 and SBO (8, 0) -> 512 read off it
    row_major = Layout((128, 16), (64, 1))
    got = _err(a, dataclasses.replace(use, a=_op("f16", "smem_desc_view", row_major)))
    assert got == ("expects Mma atom layout of ((8,16),(8,2)):((8,512),(1,8)) for operand A, "
                   "but got (128,16):(64,1)")
    assert got.startswith(D.MMA_ATOM_LAYOUT)
    # tf32 MN-major B swizzled with 128 bytes of 16-byte atomicity: the atom expects SW128_32B
    t = umma_atom("sm100.mma.tf32.cta1.m128n64k8.ss.f32.tf32.tf32.bmn")
    bad = smem_layout(64, 8, 32, "MN", "SW128")
    got = _err(t, dataclasses.replace(UmmaUse.canonical(t), b=_op("tf32", "smem_desc_view",
                                                                 bad)))
    assert got == ("expects Mma atom layout of Sw<2,3,2> o 0 o ((4,8,2),(4,2)):((1,4,128),"
                   "(32,256)) for operand B, but got Sw<3,2,3> o 0 o ((32,2),(8,1)):((1,256),"
                   "(32,0))")
    # the right swizzle with a K row stride other than the atom's
    skew = ComposedLayout(smem_layout(64, 8, 32, "MN", "SW128_32B").inner, 0,
                          Layout((64, 8), (1, 64)))
    got = _err(t, dataclasses.replace(UmmaUse.canonical(t), b=_op("tf32", "smem_desc_view",
                                                                 skew)))
    assert got.startswith("expects Mma atom layout of Sw<2,3,2> o 0 o ((4,8,2),(4,2)):"
                          "((1,4,") and got.endswith(f"for operand B, but got {skew}")


def test_verifier_tmem_diagnostics() -> None:
    a = umma_atom("sm100.mma.f16.cta1.m64n64k16.ts.f32.f16.f16")
    use = UmmaUse.canonical(a)
    col_major = Layout((64, 64), (1, 64))
    got = _err(a, dataclasses.replace(use, d=_op("f32", "tmem", col_major)))
    assert got == ("expects Mma atom layout of ((16,4),64):((65536,2097152),1) for operand D, "
                   "but got (64,64):(1,64)")
    # D of layout F in lanes 0-63 (the M = 128 placement) is wrong: rows 16.. skip to lane 32
    flat = Layout((64, 64), (L, 1))
    assert "for operand D, but got (64,64):(65536,1)" in _err(
        a, dataclasses.replace(use, d=_op("f32", "tmem", flat)))
    # the IR's TMEM buffer (lanes, columns) stored row-major is read as lane << 16 | column
    m128 = umma_atom("sm100.mma.f16.cta1.m128n64k16.ss.f32.f16.f16")
    m128.verify_instance("sm_100a", dataclasses.replace(
        UmmaUse.canonical(m128), d=_op("f32", "tmem", Layout((128, 64), (64, 1)))))
    a_bad = Layout((64, (2, 8)), (L, (0, 1)))  # A rows in lanes 0-63
    assert _err(a, dataclasses.replace(use, a=_op("f16", "tmem", a_bad))) == (
        "expects Mma atom layout of ((16,4),(2,8)):((65536,2097152),(0,1)) for operand A, but "
        "got (64,(2,8)):(65536,(0,1))")


def test_scale_factor_layout_is_legal() -> None:
    a = umma_atom("sm100.mma_bs.mxf8f6f4.cta1.m128n64k32.ss.f32.e4m3.e4m3.ue8m0.vs32")
    use = UmmaUse.canonical(a)
    sfa, sfb = a.tmem_layout("SFA"), a.tmem_layout("SFB")
    assert str(sfa) == "((32,4),1):((65536,1),0)" and str(sfb) == "((32,2),1):((65536,1),0)"
    assert scale_factor_layout_is_legal(a, sfa, sfb)
    assert scale_factor_layout_is_legal(a, None, None)
    rows_in_lanes = Layout((128, 1), (L, 0))  # all 128 rows in lanes 0-127, one column
    assert not scale_factor_layout_is_legal(a, rows_in_lanes, sfb)
    got = _err(a, dataclasses.replace(use, sfa=_op("ue8m0", "tmem", rows_in_lanes)))
    assert got == ("expects Mma atom layout of ((32,4),1):((65536,1),0) for operand SFA, but "
                   "got (128,1):(65536,0)")
    sfb_bad = Layout((64, 1), (L, 0))
    got = _err(a, dataclasses.replace(use, sfb=_op("ue8m0", "tmem", sfb_bad)))
    assert got == ("expects Mma atom layout of ((32,2),1):((65536,1),0) for operand SFB, but "
                   "got (64,1):(65536,0)")
    dense = umma_atom("sm100.mma.f16.cta1.m128n64k16.ss.f32.f16.f16")
    assert scale_factor_layout_is_legal(dense, None, None)
    assert not scale_factor_layout_is_legal(dense, sfa, None)
