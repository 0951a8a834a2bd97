"""SM120 block-scaled MMA without hardware: table and names, fragments, verifier, reference.

Independent sources: CUTLASS's ``mma_traits_sm120.hpp`` / ``mma_traits_sm80.hpp`` layouts
(typed in below as CUTLASS writes them), the PTX ISA's selector prose and Table 37, and
ml_dtypes' codecs for the numpy product.  Every diagnostic has a negative case.
"""

from __future__ import annotations

import itertools
import zlib

import ml_dtypes
import numpy as np
import pytest

from nvatom import diagnostics as D
from nvatom.atoms import block_scale_ref as ref
from nvatom.atoms import fragments_sm120 as fs
from nvatom.atoms import registry, sm120
from nvatom.atoms.fragments import FragmentError
from nvatom.atoms.interfaces import AtomVerificationError, interfaces_of
from nvatom.atoms.sm120 import MmaBsForm, MmaBsUse
from nvatom.atoms.verify import OperandUse
from nvatom.layout import Layout, layouts_equivalent

MXF8 = "SM120.mma_bs.m16n8k32.mxf8f6f4.1X.f32.e4m3.e2m1.f32.ue8m0"
NVF4 = "SM120.mma_bs.m16n8k64.mxf4nvf4.4X.f32.e2m1.e2m1.f32.ue4m3"
MXF4 = "SM120.mma_bs.m16n8k64.mxf4.2X.f32.e2m1.e2m1.f32.ue8m0"
SP_MXF4 = "SM120.mma_bs.m16n8k128.ordered_metadata.mxf4nvf4.4X.f32.e2m1.e2m1.f32.ue4m3"
SP_MXF8 = "SM120.mma_bs.m16n8k64.ordered_metadata.mxf8f6f4.1X.f32.e3m2.e2m3.f32.ue8m0"


def _nine(**over: object) -> dict[str, object]:
    base: dict[str, object] = dict(a_type="e4m3", b_type="e4m3", byte_id_a=0, byte_id_b=0,
                                   sf_type="ue8m0", shape_MNK=(16, 8, 32), thread_id_a=0,
                                   thread_id_b=0, vec_size=32)
    base.update(over)
    return base


# --------------------------------------------------------------------------- table, names


def test_the_nine_attributes_are_the_first_fields_in_spec_order() -> None:
    import dataclasses

    names = [f.name for f in dataclasses.fields(MmaBsForm)]
    assert names[:9] == ["a_type", "b_type", "byte_id_a", "byte_id_b", "sf_type", "shape_MNK",
                         "thread_id_a", "thread_id_b", "vec_size"]
    assert names[9:] == ["kind"]


def test_uppercase_spelling_round_trips() -> None:
    for f in sm120.mma_bs_forms():
        assert f.name.startswith("SM120.mma_bs.")
        assert sm120.sm120_form(f.name) == f
        assert registry.mma_form(f.name) == f
    sel = sm120.sm120_form(MXF8 + ".sfa_b3t1.sfb_b2t3")
    assert sel.scale_selectors == (3, 1, 2, 3)
    assert sel.name == MXF8 + ".sfa_b3t1.sfb_b2t3"
    assert registry.atom_record("SM120.mma_bs").min_tier == registry.Tier.SM120


def test_unknown_names_suggest_neighbours() -> None:
    with pytest.raises(sm120.UnknownSm120AtomError, match="nearest: SM120.mma_bs"):
        sm120.sm120_form("SM120.mma_bs.m16n8k32.mxf8f6f4.1X.f32.e4m3.e2m1.f32.ue4m3")
    with pytest.raises(registry.UnknownAtomError):
        registry.mma_form("sm120.mma_bs.m16n8k32.mxf8f6f4.1X.f32.e4m3.e2m1.f32.ue8m0")
    with pytest.raises(sm120.UnknownSm120AtomError, match="only SM120.mma_bs"):
        sm120.sm120_form("sm120.mma.m16n8k32.f32.e4m3.e4m3.f32.sfa_b1t0.sfb_b0t0")


def test_opcodes_of_the_errata_forms() -> None:
    # The corrected spellings (qualifier order as the ISA's syntax block; spec-deviations.md,
    # SM120).
    assert sm120.sm120_form(MXF8).opcode == (
        "mma.sync.aligned.m16n8k32.row.col.kind::mxf8f6f4.block_scale.scale_vec::1X.f32.e4m3"
        ".e2m1.f32.ue8m0")
    assert sm120.sm120_form(SP_MXF4).opcode == (
        "mma.sp::ordered_metadata.sync.aligned.m16n8k128.row.col.kind::mxf4nvf4.block_scale"
        ".scale_vec::4X.f32.e2m1.e2m1.f32.ue4m3")
    f = sm120.sm120_form(MXF8).with_selectors(1, 1, 3, 2)
    assert f.instruction("{d}", "{a}", "{b}", "{c}", "%r1", "%r2").endswith(
        "{d}, {a}, {b}, {c}, %r1, {1, 1}, %r2, {3, 2};")


def test_vec_size_and_sparsity_follow_from_the_attributes() -> None:
    table = {(f.kind_name, f.k, f.scale_vec): (f.vec_size, f.is_sparse)
             for f in sm120.mma_bs_forms()}
    assert table == {
        ("mxf8f6f4", 32, 1): (32, False), ("mxf8f6f4", 64, 1): (64, True),
        ("mxf4", 64, 2): (32, False), ("mxf4", 128, 2): (64, True),
        ("mxf4nvf4", 64, 2): (32, False), ("mxf4nvf4", 128, 2): (64, True),
        ("mxf4nvf4", 64, 4): (16, False), ("mxf4nvf4", 128, 4): (32, True),
    }
    nv = sm120.verify_sm120_mma_bs(**_nine(a_type="e2m1", b_type="e2m1", sf_type="ue4m3",
                                           shape_MNK=(16, 8, 64), vec_size=16))
    assert nv.kind_name == "mxf4nvf4" and nv.scale_vec == 4
    mx = sm120.verify_sm120_mma_bs(**_nine(a_type="e2m1", b_type="e2m1",
                                           shape_MNK=(16, 8, 64), vec_size=32))
    assert mx.kind_name == "mxf4"  # the canonical choice; mxf4nvf4 2X is the same product
    assert sm120.verify_sm120_mma_bs(**_nine(a_type="e2m1", b_type="e2m1",
                                             shape_MNK=(16, 8, 64), vec_size=32,
                                             kind="mxf4nvf4")).kind_name == "mxf4nvf4"
    sp = sm120.verify_sm120_mma_bs(**_nine(shape_MNK=(16, 8, 64), vec_size=64))
    assert sp.is_sparse and sp.kind_name == "mxf8f6f4"


def test_interfaces() -> None:
    assert interfaces_of(sm120.sm120_form(MXF8)) == ("MmaAtom", "BlockScaleAtom")
    assert interfaces_of(sm120.sm120_form(SP_MXF4)) == ("MmaAtom", "SparseMetadataAtom",
                                                        "BlockScaleAtom")
    assert interfaces_of(sm120.sm120_form("sm120.mma.m16n8k32.f16.e2m1.e3m2.f16")) == (
        "MmaAtom",)


def test_register_counts_match_cutlass() -> None:
    # CUTLASS mma_sm120.hpp: SM120_16x8x32_TN A uint32_t[4], B [2], C/D float[4];
    # SM120_16x8x64_TN_VS A [4], B [2]; SFA/SFB one register each; PTX ISA mma for sparse.
    for f in sm120.mma_bs_forms():
        want_b = 4 if f.is_sparse else 2
        assert [f.registers(op) for op in ("A", "B", "C", "D", "SFA", "SFB")] == \
            [4, want_b, 4, 4, 1, 1], f.name
    for f in sm120.f8f6f4_forms():
        acc = 4 if f.d.name == "f32" else 2
        assert [f.registers(op) for op in "ABCD"] == [4, 4 if f.is_sparse else 2, acc, acc]


# --------------------------------------------------------------------------- fragments

# CUTLASS, as written there: SM80_16x8x32_S32S8S8S32_TN (A, B) and SM80_16x8_Row (C), which
# mma_traits_sm120.hpp's SM120_16x8x32_TN inherits; SM120_16x8x64_TN_VS ALayout/BLayout;
# SFALayout/SFBLayout of both (T32, V-over-K) -> (M16|N8, K).
CUTLASS = {
    ("A", 32): Layout(((4, 8), (4, 2, 2)), ((64, 1), (16, 8, 256))),
    ("B", 32): Layout(((4, 8), (4, 2)), ((32, 1), (8, 128))),
    ("A", 64): Layout(((4, 8), (8, 2, 2)), ((128, 1), (16, 8, 512))),
    ("B", 64): Layout(((4, 8), (8, 2)), ((64, 1), (8, 256))),
    "C": Layout(((4, 8), (2, 2)), ((32, 1), (16, 8))),
}
CUTLASS_SFA = {k: Layout(((2, 2, 8), k), ((8, 0, 1), 16)) for k in (32, 64, 128)}
CUTLASS_SFB = {k: Layout(((4, 8), k), ((0, 1), 8)) for k in (32, 64, 128)}


@pytest.mark.parametrize("name", [MXF8, NVF4, MXF4])
def test_operand_layouts_match_cutlass(name: str) -> None:
    f = sm120.sm120_form(name)
    assert isinstance(f, MmaBsForm)
    for op in "AB":
        assert layouts_equivalent(f.tv_layout(op), CUTLASS[(op, f.k)]), (name, op)
    assert layouts_equivalent(f.tv_layout("C"), CUTLASS["C"])
    assert f.tv_layout("D") == f.tv_layout("C")


def test_unscaled_f8f6f4_uses_the_8bit_container_layout() -> None:
    f = sm120.sm120_form("sm120.mma.m16n8k32.f32.e2m1.e3m2.f32")
    assert layouts_equivalent(f.tv_layout("A"), CUTLASS[("A", 32)])
    assert layouts_equivalent(f.tv_layout("B"), CUTLASS[("B", 32)])


def test_sparse_fragments_are_the_compressed_tiles() -> None:
    f = sm120.sm120_form(SP_MXF4)
    assert layouts_equivalent(f.tv_layout("A"), CUTLASS[("A", 64)])  # M x 64 of 4-bit
    g = sm120.sm120_form(SP_MXF8)
    assert layouts_equivalent(g.tv_layout("A"), CUTLASS[("A", 32)])  # M x 32 containers
    assert g.metadata_layout().lanes == tuple(range(32))  # 4 lanes a group, selector 0
    assert f.metadata_layout().lanes == tuple(range(32))
    with pytest.raises(sm120.Sm120FormError, match="dense"):
        sm120.sm120_form(MXF8).metadata_layout()


@pytest.mark.parametrize("name", [MXF8, NVF4, MXF4, SP_MXF8, SP_MXF4])
def test_scale_layouts_agree_with_cutlass_per_element(name: str) -> None:
    """CUTLASS's SFALayout maps (lane, k) to the scaled element (m, k); ours maps (lane,
    block) to scale_A[m, block].  For every lane and k they must name the same row/column
    (CUTLASS's layouts are the thread-id 0 / byte-id 0 instance)."""
    f = sm120.sm120_form(name)
    assert isinstance(f, MmaBsForm)
    for op, cut, rows in (("SFA", CUTLASS_SFA[f.k], 16), ("SFB", CUTLASS_SFB[f.k], 8)):
        ours = f.tv_layout(op)
        for lane, k in itertools.product(range(32), range(f.k)):
            elem = int(cut(lane, k))
            assert elem // rows == k
            idx = int(ours(lane, k // f.vec_size))
            assert (idx % rows, idx // rows) == (elem % rows, k // f.vec_size), (op, lane, k)


def test_scale_sources_follow_the_isa_prose() -> None:
    # thread-id-a 0: %laneid % 4 in {0, 1} provide SF_A; 1: {2, 3}; thread-id-b t: % 4 == t.
    for tid in (0, 1):
        assert set(fs.reading_lanes("SFA", tid)) == {lane for lane in range(32)
                                                      if lane % 4 in (2 * tid, 2 * tid + 1)}
    for tid in range(4):
        assert fs.reading_lanes("SFB", tid) == tuple(range(tid, 32, 4))
    # byte-id: 1X one byte, 2X a pair from byte-id, 4X all four bytes.
    for x, bid in ((1, 3), (2, 2), (4, 0)):
        srcs = fs.scale_sources("SFA", x, bid, 1)
        assert {s.byte for s in srcs} == set(range(bid, bid + x))
        assert all(s.byte == bid + s.block for s in srcs)
        assert len(srcs) == 16 * x
    # each row's scales come from one lane of quad m % 8: g + 8 is the pair's upper lane.
    srcs = {(s.mn, s.block): s for s in fs.scale_sources("SFA", 2, 0, 1)}
    assert srcs[(3, 1)].lane == 4 * 3 + 2 and srcs[(11, 0)].lane == 4 * 3 + 3
    srcs_b = {(s.mn, s.block): s for s in fs.scale_sources("SFB", 4, 0, 2)}
    assert srcs_b[(5, 3)] == fs.ScaleSource(5, 3, 4 * 5 + 2, 3)


def test_scale_selector_ranges_are_table_37() -> None:
    assert fs.BYTE_IDS == {1: (0, 1, 2, 3), 2: (0, 2), 4: (0,)}
    assert fs.THREAD_IDS == {"SFA": (0, 1), "SFB": (0, 1, 2, 3)}
    with pytest.raises(FragmentError, match="byte-id 1"):
        fs.scale_sources("SFA", 2, 1, 0)
    with pytest.raises(FragmentError, match="thread-id 2"):
        fs.scale_sources("SFA", 1, 0, 2)
    with pytest.raises(FragmentError, match="scale_vec::3X"):
        fs.scale_tv_layout("SFB", 3)
    with pytest.raises(FragmentError, match="SFC"):
        fs.scale_tv_layout("SFC", 1)


# --------------------------------------------------------------------------- verifier


def test_verify_sm120_mma_bs_accepts_the_table() -> None:
    for f in sm120.mma_bs_forms():
        for g in f.selector_choices():
            got = sm120.verify_sm120_mma_bs(**{k: v for k, v in g.attributes().items()},
                                            target_="sm_121a")
            assert got == g


@pytest.mark.parametrize(("over", "detail"), [
    (dict(sf_type="ue4m3"), "scale_vec::1X takes sf_type ue8m0"),
    (dict(shape_MNK=(16, 8, 64), vec_size=16, a_type="e2m1", b_type="e2m1", sf_type="ue8m0"),
     "scale_vec::4X takes sf_type ue4m3"),
    (dict(shape_MNK=(16, 8, 64), vec_size=32, a_type="e2m1", b_type="e2m1", sf_type="ue4m3"),
     "scale_vec::2X takes sf_type ue8m0"),
    (dict(shape_MNK=(16, 8, 64), vec_size=32), "a_type e4m3 is not one of e2m1"),
    (dict(shape_MNK=(16, 8, 32), vec_size=16), "scale_vec::2X; kind::mxf8f6f4 takes 1X"),
    (dict(shape_MNK=(16, 8, 16), vec_size=16), "kind::mxf8f6f4 is m16n8k32, sparse m16n8k64"),
    (dict(shape_MNK=(16, 16, 32)), "kind::mxf8f6f4 is m16n8k32"),
    (dict(vec_size=5), "vec_size must divide K=32"),
    (dict(a_type="f16"), "a_type f16 is not one of e4m3/e5m2/e3m2/e2m3/e2m1"),
    (dict(kind="mxf6"), "unknown kind 'mxf6'"),
])
def test_verify_names_the_rejected_combination(over: dict[str, object], detail: str) -> None:
    with pytest.raises(AtomVerificationError) as ei:
        sm120.verify_sm120_mma_bs(**_nine(**over))
    msg = str(ei.value)
    assert msg.startswith("SM120.mma_bs has no form with shape_MNK=")
    assert detail in msg
    assert "legal families: kind::mxf8f6f4 K=32 (sparse 64) 1X ue8m0" in msg


def test_verify_rejects_unknown_types_and_selectors_and_targets() -> None:
    with pytest.raises(AtomVerificationError, match="has no form with unknown element type"):
        sm120.verify_sm120_mma_bs(**_nine(a_type="fp4"))
    with pytest.raises(AtomVerificationError) as ei:
        sm120.verify_sm120_mma_bs(**_nine(thread_id_a=2))
    assert str(ei.value) == D.SM120_SELECTOR.format("thread_id_a", 2, "SM120.mma_bs", "0, 1")
    with pytest.raises(AtomVerificationError) as ei:
        sm120.verify_sm120_mma_bs(**_nine(byte_id_b=4))
    assert str(ei.value) == D.SM120_SELECTOR.format("byte_id_b", 4, "scale_vec::1X",
                                                     "0, 1, 2, 3")
    for t in ("sm_100a", "sm_110a", "sm_90a", "sm_120"):
        with pytest.raises(AtomVerificationError) as ei:
            sm120.verify_sm120_mma_bs(**_nine(), target_=t)
        assert str(ei.value) == D.SM120_TARGET.format(
            "SM120.mma_bs", t, "sm_12x, 'a'/'f' targets")
    sparse_fp4 = _nine(a_type="e2m1", b_type="e2m1", shape_MNK=(16, 8, 128), vec_size=64)
    assert sm120.verify_sm120_mma_bs(**sparse_fp4, target_="sm_121a").is_sparse
    with pytest.raises(AtomVerificationError, match="sm_120f"):
        sm120.verify_sm120_mma_bs(**sparse_fp4, target_="sm_120f")


def _use(name: str, **over: object) -> tuple[MmaBsForm, MmaBsUse]:
    import dataclasses

    f = sm120.sm120_form(name)
    assert isinstance(f, MmaBsForm)
    return f, dataclasses.replace(MmaBsUse.canonical(f), **over)


def _fails(name: str, **over: object) -> str:
    f, use = _use(name, **over)
    with pytest.raises(AtomVerificationError) as ei:
        f.verify_instance("sm_120a", use)
    return str(ei.value)


def test_use_verifier_accepts_canonical_uses() -> None:
    for f in sm120.mma_bs_forms("sm_121a"):
        f.verify_instance("sm_121a", MmaBsUse.canonical(f))


def test_use_verifier_sm120_contract() -> None:
    for field, value, what in (("cta_group", 2, "cta group"), ("collector", "a::fill",
                               "collector"), ("weight_stationary", True,
                               "weight-stationary mode"), ("scale_input_d", 3,
                               "scale-input accumulator")):
        assert _fails(MXF8, **{field: value}) == D.SM120_NO_TCGEN05.format(what)
    assert _fails(MXF8, d=OperandUse("f32", "tmem")) == \
        D.SM120_NO_TCGEN05.format("tensor-memory destination")
    assert _fails(MXF8, a=OperandUse("e4m3", "smem")).startswith(D.RMEM_INPUTS)


def test_use_verifier_types_scales_layouts_metadata() -> None:
    assert _fails(MXF8, c=OperandUse("f16")) == D.OPERAND_ELEMENT_TYPE.format("c", "f32", "f16")
    assert _fails(MXF8, b=OperandUse("e5m2")) == \
        D.OPERAND_ELEMENT_TYPE.format("b", "e2m1", "e5m2")
    msg = _fails(NVF4, scale_a=OperandUse("ue8m0"))
    assert msg.startswith(D.SM120_SCALE_OPERANDS.split("{0}")[0] + "ue4m3")
    assert _fails(MXF8, scale_b=None).endswith("scale_b: None")
    assert _fails(MXF8, scale_a=OperandUse("ue8m0", "tmem")).startswith("SM120.mma_bs expects")
    f = sm120.sm120_form(MXF8)
    bad = OperandUse("ue8m0", "rmem", fs.scale_tv_layout("SFB", 1))
    assert _fails(MXF8, scale_a=bad).startswith(D.MMA_ATOM_LAYOUT + str(f.tv_layout("SFA")))
    assert _fails(MXF8, a=OperandUse("e4m3", "rmem", f.tv_layout("B"))).startswith(
        D.MMA_ATOM_LAYOUT)
    assert _fails(SP_MXF8, metadata=None) == f"atom '{SP_MXF8}' expects a sparse metadata operand"
    assert "out of range [0..0]" in _fails(SP_MXF8, selector=1)
    assert "one 32-bit register" in _fails(SP_MXF8, metadata=OperandUse("u16"))
    assert _fails(MXF8, selector=0) == f"atom '{MXF8}' is dense and takes no metadata or selector"
    assert "has shape (16, 8, 32), but the use has shape (16, 8, 64)" in _fails(
        MXF8, shape=(16, 8, 64))


# --------------------------------------------------------------------------- reference

_ML = {"e4m3": ml_dtypes.float8_e4m3fn, "e5m2": ml_dtypes.float8_e5m2,
       "e3m2": ml_dtypes.float6_e3m2fn, "e2m3": ml_dtypes.float6_e2m3fn,
       "e2m1": ml_dtypes.float4_e2m1fn, "ue8m0": ml_dtypes.float8_e8m0fnu,
       "ue4m3": ml_dtypes.float8_e4m3fn}  # ue4m3 = e4m3fn with the sign bit clear


def _ml_decode(name: str, codes: np.ndarray) -> np.ndarray:
    return np.asarray(codes, dtype=np.uint8).view(_ML[name]).astype(np.float64)


def _finite_codes(name: str) -> np.ndarray:
    codes = np.arange(256 if name in ("e4m3", "e5m2") else 64 if name[1] in "32" and name in (
        "e3m2", "e2m3") else 16, dtype=np.uint8)
    return codes[np.isfinite(_ml_decode(name, codes))]


def _random_problem(f: MmaBsForm, rng: np.random.Generator, scale_codes: np.ndarray):  # type: ignore[no-untyped-def]
    a = rng.choice(_finite_codes(f.a_type.name), size=(16, f.k))
    b = rng.choice(_finite_codes(f.b_type.name), size=(f.k, 8))
    sa = rng.choice(scale_codes, size=(16, f.scale_vec))
    sb = rng.choice(scale_codes, size=(f.scale_vec, 8))
    c = rng.integers(-64, 64, size=(16, 8)).astype(np.float32)
    return a, b, c, sa, sb


def _numpy_product(f: MmaBsForm, a, b, c, sa, sb) -> np.ndarray:  # type: ignore[no-untyped-def]
    av = _ml_decode(f.a_type.name, a) * np.repeat(_ml_decode(f.sf_type.name, sa), f.vec_size, 1)
    bv = _ml_decode(f.b_type.name, b) * np.repeat(_ml_decode(f.sf_type.name, sb), f.vec_size, 0)
    return av @ bv + c.astype(np.float64)


def _scale_codes(sf: str, exact: bool) -> np.ndarray:
    if sf == "ue8m0":
        return np.arange(124, 131) if exact else np.arange(100, 150)
    codes = np.arange(0x20, 0x50) if exact else np.arange(1, 0x7F)
    return codes


@pytest.mark.parametrize("name", [f.name for f in sm120.mma_bs_forms() if not f.is_sparse])
def test_reference_matches_numpy(name: str) -> None:
    f = sm120.sm120_form(name)
    assert isinstance(f, MmaBsForm)
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    for exact in (True, False):
        a, b, c, sa, sb = _random_problem(f, rng, _scale_codes(f.sf_type.name, exact))
        got = ref.block_scaled_mma(a, b, c, sa, sb, a_type=f.a_type, b_type=f.b_type,
                                   sf_type=f.sf_type, vec_size=f.vec_size)
        want = _numpy_product(f, a, b, c, sa, sb)
        assert got.dtype == np.float32
        # float32 accumulation of X scaled block products and C: at most 2X + 1 roundings
        # (each block term to f32, each addition), each within eps/2 of a partial sum, and a
        # partial sum is at most the sum of the terms' magnitudes (blocks may cancel).
        av, bv = _ml_decode(f.a_type.name, a), _ml_decode(f.b_type.name, b)
        sav, sbv = _ml_decode(f.sf_type.name, sa), _ml_decode(f.sf_type.name, sb)
        mags = np.abs(c).astype(np.float64)
        for j in range(f.scale_vec):
            blk = slice(j * f.vec_size, (j + 1) * f.vec_size)
            mags += np.abs((av[:, blk] @ bv[blk, :]) * sav[:, j:j + 1] * sbv[j:j + 1, :])
        tol = (2 * f.scale_vec + 1) * 0.5 * np.finfo(np.float32).eps * mags
        assert np.all(np.abs(got - want) <= tol + 1e-30), name


def test_reference_exact_small_case() -> None:
    # A all e4m3 1.0 (0x38), B all 2.0 (0x40), scale_A 2**1, scale_B 2**-2, C 1:
    # D = 32 * 1 * 2 * 2 * 0.25 + 1 = 33.
    f = sm120.sm120_form("SM120.mma_bs.m16n8k32.mxf8f6f4.1X.f32.e4m3.e4m3.f32.ue8m0")
    d = ref.block_scaled_mma(np.full((16, 32), 0x38), np.full((32, 8), 0x40),
                             np.ones((16, 8), np.float32), np.full((16, 1), 128),
                             np.full((1, 8), 125), a_type="e4m3", b_type="e4m3",
                             sf_type="ue8m0", vec_size=32)
    assert (d == 33.0).all()
    assert f.vec_size == 32


def test_reference_rejects_bad_shapes() -> None:
    with pytest.raises(ref.BlockScaleError, match="vec_size 7"):
        ref.block_scaled_mma(np.zeros((16, 32)), np.zeros((32, 8)), np.zeros((16, 8)),
                             np.zeros((16, 4)), np.zeros((4, 8)), a_type="e4m3",
                             b_type="e4m3", sf_type="ue8m0", vec_size=7)
    with pytest.raises(ref.BlockScaleError, match="scale_A must be 16 x 1"):
        ref.block_scaled_mma(np.zeros((16, 32)), np.zeros((32, 8)), np.zeros((16, 8)),
                             np.zeros((16, 2)), np.zeros((1, 8)), a_type="e4m3",
                             b_type="e4m3", sf_type="ue8m0", vec_size=32)
    with pytest.raises(ref.BlockScaleError, match="B must be 32 x N"):
        ref.block_scaled_mma(np.zeros((16, 32)), np.zeros((16, 8)), np.zeros((16, 8)),
                             np.zeros((16, 1)), np.zeros((1, 8)), a_type="e4m3",
                             b_type="e4m3", sf_type="ue8m0", vec_size=32)


@pytest.mark.parametrize("name", [MXF8, NVF4, MXF4,
                                  "SM120.mma_bs.m16n8k32.mxf8f6f4.1X.f32.e3m2.e2m3.f32.ue8m0"])
def test_register_emulation_matches_numpy(name: str) -> None:
    """Pack random tiles into the 32 lanes through the layouts (decoys where the selectors
    do not read), emulate the instruction, compare with numpy, for several selectors."""
    base = sm120.sm120_form(name)
    assert isinstance(base, MmaBsForm)
    rng = np.random.default_rng(7)
    choices = base.selector_choices()
    for f in [choices[0], choices[-1], choices[len(choices) // 2]]:
        a, b, c, sa, sb = _random_problem(f, rng, _scale_codes(f.sf_type.name, True))
        regs = [ref.pack_operand(f, "A", a), ref.pack_operand(f, "B", b),
                ref.pack_operand(f, "C", c), ref.pack_scales(f, "SFA", sa, rng=rng),
                ref.pack_scales(f, "SFB", sb, rng=rng)]
        d = ref.unpack_accumulator(f, ref.emulate(f, *regs))
        assert np.allclose(d, _numpy_product(f, a, b, c, sa, sb), rtol=1e-6, atol=0)
        # a model that read the wrong lane pair would see decoys: prove they matter
        other = f.with_selectors(f.byte_id_a, 1 - f.thread_id_a, f.byte_id_b, f.thread_id_b)
        d2 = ref.unpack_accumulator(f, ref.emulate(other, *regs))
        assert not np.allclose(d2, d, equal_nan=True)


def test_containers_follow_the_isa() -> None:
    f = sm120.sm120_form(MXF8)  # B is e2m1 in 8-bit containers: bits 5..2
    assert isinstance(f, MmaBsForm)
    b = np.zeros((32, 8), dtype=np.uint8)
    b[0, 0] = 0b0010  # 1.0 -> 0x08 in its container
    regs = ref.pack_operand(f, "B", b)
    assert regs[0, 0] == 0x08
    g = sm120.sm120_form(MXF4)  # packed: two e2m1 per byte, element 0 low
    assert isinstance(g, MmaBsForm)
    b2 = np.zeros((64, 8), dtype=np.uint8)
    b2[1, 0] = 0b0010
    assert ref.pack_operand(g, "B", b2)[0, 0] == 0x20
    with pytest.raises(ref.BlockScaleError, match="dense forms"):
        ref.emulate(sm120.sm120_form(SP_MXF4), *([np.zeros((32, 4), np.uint32)] * 3),  # type: ignore[arg-type]
                    np.zeros(32, np.uint32), np.zeros(32, np.uint32))


def test_lattice_gate_knows_sm120() -> None:
    assert registry.check_shape_in_lattice("SM120", (16, 8, 32), "e4m3", "e2m1", "f32")
    assert registry.check_shape_in_lattice("SM120", (16, 8, 64), "e2m1", "e2m1", "f32")
    assert registry.check_shape_in_lattice("SM120", (16, 8, 128), "e2m1", "e2m1", "f32",
                                           sparse=True)
    assert registry.check_shape_in_lattice("SM120", (16, 8, 32), "e3m2", "e2m3", "f16")
    assert not registry.check_shape_in_lattice("SM120", (16, 8, 64), "e4m3", "e4m3", "f32")
    assert not registry.check_shape_in_lattice("SM120", (16, 8, 128), "e2m1", "e2m1", "f32")


def test_sparse_class_follows_the_attributes() -> None:
    dense = sm120.sm120_form(MXF8)
    assert type(dense) is MmaBsForm
    with pytest.raises(sm120.Sm120FormError, match="construct SM120.mma_bs atoms as MmaBsForm"):
        sm120.SparseMmaBsForm(**{k: getattr(dense, k) for k in (
            "a_type", "b_type", "byte_id_a", "byte_id_b", "sf_type", "shape_MNK",
            "thread_id_a", "thread_id_b", "vec_size", "kind")})
    sparse = sm120.sm120_form(SP_MXF4)
    assert type(sparse.with_selectors(0, 1, 0, 2)) is sm120.SparseMmaBsForm


# CUTLASS mma_traits_sm120_sparse.hpp: B layouts and the metadata ELayout, over the dense
# (M16, K) tile: (T32, V) -> m + 16 * k.
CUTLASS_SPARSE = {
    64: dict(B=Layout(((4, 8), (4, 4)), ((32, 1), (8, 128))),
             E=Layout(((2, 2, 8), 32), ((8, 512, 1), 16))),
    128: dict(B=Layout(((4, 8), (8, 4)), ((64, 1), (8, 256))),
              E=Layout(((2, 2, 8), 64), ((8, 1024, 1), 16))),
}


@pytest.mark.parametrize("name", [SP_MXF8, SP_MXF4])
def test_sparse_b_and_metadata_match_cutlass(name: str) -> None:
    f = sm120.sm120_form(name)
    assert isinstance(f, MmaBsForm)
    cut = CUTLASS_SPARSE[f.k]
    assert layouts_equivalent(f.tv_layout("B"), cut["B"])
    ml = f.metadata_layout()
    chunk = 4 if f.k == 64 else 8  # 2:4 on 8-bit containers, 4:8 pairs on packed e2m1
    for lane in range(32):
        ours = set()
        for row_lane, _bit, row, ch in ml.table():
            if row_lane == lane:
                ours |= {(row, k) for k in range(ch * chunk, (ch + 1) * chunk)}
        theirs = {(int(cut["E"](lane, v)) % 16, int(cut["E"](lane, v)) // 16)
                  for v in range(cut["E"].shape[1])}
        assert ours == theirs, lane
