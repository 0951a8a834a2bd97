"""Register-MMA verification: every diagnostic of the specification has a negative case here.

Expected texts are the specification's strings (nvatom.diagnostics;
docs/spec-deviations.md#mma-verifier-ladders) with the values the checks print; positive cases use
the canonical use of every form in the registry.
"""

from __future__ import annotations

import dataclasses

import pytest

from nvatom import diagnostics as D
from nvatom.arch import Tier
from nvatom.atoms.interfaces import (
    AtomVerificationError,
    MmaAtom,
    SparseMetadataAtom,
    interfaces_of,
    verify_atom_instance,
)
from nvatom.atoms.registry import (
    ATOMS,
    UnknownAtomError,
    atom_record,
    check_shape_in_lattice,
    mma_form,
    mma_forms,
)
from nvatom.atoms.synth import ARMS, synthesize_reference_layouts
from nvatom.atoms.tiled_mma import check_gemm_operands, make_tiled_mma
from nvatom.atoms.universal import UniversalFma
from nvatom.atoms.verify import MmaUse, OperandUse
from nvatom.errors import NvatomError
from nvatom.layout import Layout, Swizzle, make_composed_layout

BF16 = "sm80.mma.m16n8k16.f32.bf16.bf16.f32"
SPARSE_S8 = "sm80.sparse_mma.m16n8k32.s32.s8.s8.s32"


def _err(fn, *args) -> str:
    with pytest.raises(AtomVerificationError) as ei:
        fn(*args)
    return str(ei.value)


@pytest.mark.parametrize("form", [f for f in mma_forms() if f.shape_str != "m8n8k4"
                                  or f.a.name == "f64"], ids=lambda f: f.name)
def test_canonical_use_of_every_form_verifies(form) -> None:
    first = next(t for t in ("sm_70", "sm_75", "sm_80", "sm_89", "sm_90a") if form.available_on(t))
    form.verify_instance(first, MmaUse.canonical(form))
    verify_atom_instance(form, "sm_90a", MmaUse.canonical(form, with_layouts=False))


def test_dispatch_needs_a_known_interface() -> None:
    assert _err(verify_atom_instance, object(), "sm_80", None) == D.NO_KNOWN_INTERFACE
    assert D.NO_KNOWN_INTERFACE == "atom type does not implement a known cute_nvgpu interface"


def test_interfaces_are_asked_not_names() -> None:
    dense, sparse = mma_form(BF16), mma_form(SPARSE_S8)
    assert isinstance(dense, MmaAtom) and not isinstance(dense, SparseMetadataAtom)
    assert interfaces_of(sparse) == ("MmaAtom", "SparseMetadataAtom")
    assert ATOMS["sm80.sparse_mma"].interfaces == interfaces_of(sparse)


def test_target_tier_and_feature() -> None:
    u = MmaUse.canonical(mma_form(BF16))
    assert _err(mma_form(BF16).verify_instance, "sm_75", u) == (
        f"atom '{BF16}' needs tier SM80, but target sm_75 is tier SM70/75")
    fp8 = mma_form("sm89.mma.m16n8k32.f32.e4m3.e5m2.f32")
    msg = _err(fp8.verify_instance, "sm_88", MmaUse.canonical(fp8))
    assert msg.startswith("atom 'sm89.mma.m16n8k32.f32.e4m3.e5m2.f32' needs tier SM89")
    f64 = mma_form("sm80.mma.m16n8k8.f64.f64.f64.f64")
    assert "is not available on sm_89: it needs mma.sync m16n8k4/k8/k16 with f64" in _err(
        f64.verify_instance, "sm_89", MmaUse.canonical(f64))


def test_rmem_inputs() -> None:
    f = mma_form(BF16)
    u = dataclasses.replace(MmaUse.canonical(f, with_layouts=False),
                            b=OperandUse("bf16", "smem"))
    assert _err(f.verify_instance, "sm_80", u) == (
        D.RMEM_INPUTS + "memref<bf16, rmem>, B: memref<bf16, smem>, D: memref<f32, rmem>")


@pytest.mark.parametrize("slot, field, bad", [("a", "a", "f16"), ("b", "b", "e4m3"),
                                              ("c", "c", "f16"), ("c", "d", "s32")])
def test_operand_element_types(slot, field, bad) -> None:
    f = mma_form(BF16)
    u = dataclasses.replace(MmaUse.canonical(f, with_layouts=False), **{field: OperandUse(bad)})
    want = f.operand_type(field.upper()).name
    assert _err(f.verify_instance, "sm_80", u) == (
        f"expects operand {slot} with element type {want}, but get {bad}.")


def test_mma_atom_layout() -> None:
    f = mma_form(BF16)
    wrong = Layout(((4, 8), (2, 2, 2)), ((1, 4), (16, 8, 128)))
    u = dataclasses.replace(MmaUse.canonical(f), a=OperandUse("bf16", "rmem", wrong))
    assert _err(f.verify_instance, "sm_80", u) == (
        D.MMA_ATOM_LAYOUT + "((4,8),(2,2,2)):((32,1),(16,8,128)) for operand A, but got "
        "((4,8),(2,2,2)):((1,4),(16,8,128))")
    # An equivalent layout (same function, other structure) is accepted.
    flat = Layout((4, 8, 2, 2, 2), (32, 1, 16, 8, 128))
    f.verify_instance("sm_80", dataclasses.replace(u, a=OperandUse("bf16", "rmem", flat)))


def test_static_layout() -> None:
    f = mma_form(BF16)
    u = dataclasses.replace(MmaUse.canonical(f), b=OperandUse("bf16", "rmem", "(4,8):(?,1)"))
    assert _err(f.verify_instance, "sm_80", u) == D.STATIC_LAYOUT + " '(4,8):(?,1)'"


def test_composed_layout() -> None:
    f = mma_form(BF16)
    sw = make_composed_layout(Swizzle(1, 0, 1), 0, f.tv_layout("A"))
    u = dataclasses.replace(MmaUse.canonical(f), a=OperandUse("bf16", "rmem", sw))
    msg = _err(f.verify_instance, "sm_80", u)
    assert msg.startswith("doesn't support composed layout for A/B/D, but got: A: Sw<1,0,1> o 0 o")
    assert msg.endswith(f", B: {f.tv_layout('B')}, D:{f.tv_layout('D')}")


def test_sparse_metadata_and_selector() -> None:
    f = mma_form(SPARSE_S8)
    good = MmaUse.canonical(f, with_layouts=False)
    f.verify_instance("sm_80", dataclasses.replace(good, selector=1))
    assert _err(f.verify_instance, "sm_80", dataclasses.replace(good, metadata=None)) == (
        f"atom '{SPARSE_S8}' expects a sparse metadata operand")
    assert _err(f.verify_instance, "sm_80", dataclasses.replace(good, selector=2)) == (
        f"atom '{SPARSE_S8}': sparsity selector 2 out of range [0..1]")
    dense = mma_form(BF16)
    assert "is dense and takes no metadata" in _err(
        dense.verify_instance, "sm_80",
        dataclasses.replace(MmaUse.canonical(dense), metadata=OperandUse("u32")))


def test_universal_fma_one_element_type() -> None:
    fma = UniversalFma.of("f32")
    ok = MmaUse(OperandUse("f32"), OperandUse("f32"), OperandUse("f32"))
    verify_atom_instance(fma, "sm_70", ok)
    bad = dataclasses.replace(ok, b=OperandUse("f16"))
    assert _err(verify_atom_instance, fma, "sm_70", bad) == (
        D.ALL_OPERANDS_ELEMENT_TYPE + " f32, but got A: f32, B: f16, C: f32, D: f32")
    assert D.ALL_OPERANDS_ELEMENT_TYPE == "expects all mma operands to have element type"
    assert atom_record("atom.universal_fma").allowed_on("sm_70")


def test_check_shape_in_lattice() -> None:
    assert check_shape_in_lattice("SM80", (16, 8, 16), "bf16", "bf16", "f32")
    assert check_shape_in_lattice("SM89", (16, 8, 32), "e4m3", "e5m2", "f16")
    # ptxas: no tf32 k16
    assert not check_shape_in_lattice("SM80", (16, 8, 16), "tf32", "tf32", "f32")
    assert check_shape_in_lattice("SM80", (16, 8, 16), "tf32", "tf32", "f32", sparse=True)
    assert not check_shape_in_lattice("SM70", (16, 8, 8), "f16", "f16", "f32")  # needs sm_75
    assert check_shape_in_lattice("SM75", (16, 8, 8), "f16", "f16", "f32")


def test_unknown_names_suggest_the_nearest() -> None:
    with pytest.raises(UnknownAtomError) as ei:
        mma_form("sm80.mma.m16n8k16.f32.bf16.bf16.f16")
    assert str(ei.value).startswith("unknown MMA atom 'sm80.mma.m16n8k16.f32.bf16.bf16.f16'; "
                                     "nearest: sm80.mma.m16n8k16.f32.bf16.bf16.f32")


def test_synthesizer_arms() -> None:
    r = synthesize_reference_layouts(16, 16, False, False, False)
    assert r.slot_count == 3 and r.elements_per_thread == 8
    assert str(r.slots[0]) == "((4,8),(2,2,2)):((32,1),(16,8,128))"  # CUTLASS SM80_16x8x16
    assert synthesize_reference_layouts(32, 16, False, True, False).elements_per_thread == 16
    assert synthesize_reference_layouts(32, 16, False, False, False).elements_per_thread == 16
    msg = _err(synthesize_reference_layouts, 16, 16, False, False, True)
    assert "Illegal blayout '.row'" in msg and "ldmatrix" in msg


def test_synthesizer_sparse_arms_have_four_slots() -> None:
    pytest.importorskip("nvatom.atoms.sparse")
    for k in (16, 32):
        r = synthesize_reference_layouts(k, 16, True, False, False)
        dense = synthesize_reference_layouts(k, 16, False, False, False)
        assert r.slot_count == 4 and r.elements_per_thread * 2 == dense.elements_per_thread


def test_tiled_mma_covers_the_tile() -> None:
    from nvatom.layout import size

    t = make_tiled_mma(mma_form(BF16), (2, 2, 1), (64, 32, 16))
    assert t.threads == 128
    c = t.tv_layout("C")
    assert sorted(c(i) for i in range(size(c))) == list(range(64 * 32))
    a = t.tv_layout("A")  # replicated across the two N warps
    assert sorted({a(i) for i in range(size(a))}) == list(range(64 * 16))
    vals, off = t.partition("C", Layout((64, 32), (32, 1)), 5)
    # Lane 5 of warp 0: groupID 1, threadID_in_group 1 -> rows 1, 9 and columns 2, 3 (PTX ISA
    # C fragment), repeated every 32 rows and 16 columns (2x2 warps of 16x8 in a 64x32 tile).
    assert off == 1 * 32 + 2
    want = {r * 32 + c for r in (1, 9, 33, 41) for c in (2, 3, 18, 19)}
    assert {off + vals(i) for i in range(size(vals))} == want


def test_tiled_mma_errors() -> None:
    with pytest.raises(AtomVerificationError, match=r"tile \(48, 32, 16\) is not a multiple"):
        make_tiled_mma(mma_form(BF16), (2, 2, 1), (48, 32, 16))


def test_gemm_operand_checks() -> None:
    a2, b2, c2 = Layout((16, 16)), Layout((8, 16)), Layout((16, 8))
    check_gemm_operands(a2, b2, c2)
    assert _err(check_gemm_operands, a2, Layout(8), c2) == (
        f"{D.SAME_RANK_AB}(16,16):(1,16), B: 8:1")
    assert _err(check_gemm_operands, a2, b2, c2, Layout(128)) == (
        f"{D.SAME_RANK_CD}(16,8):(1,16), D: 128:1")
    assert _err(check_gemm_operands, Layout(8), Layout(8), Layout((2, 2, 2))) == (
        D.C_RANK_1_OR_2 + "(2,2,2):(1,2,4)")
    assert _err(check_gemm_operands, a2, b2, Layout(8)) == D.C_RANK_2_OR_3 + "8:1"
    a3 = Layout((2, 16, 16))
    assert _err(check_gemm_operands, a3, Layout((2, 8, 16)), c2) == D.C_RANK_3 + "(16,8):(1,16)"
    sw = make_composed_layout(Swizzle(3, 4, 3), 0, Layout((8, 64), (64, 1)))
    assert _err(check_gemm_operands, sw, b2, c2).startswith(
        "doesn't support composed layout for A/B/D, but got: A: Sw<3,4,3> o 0 o (8,64):(64,1)")


def _metadata_layout_from_isa(form) -> Layout:
    """Slot 3 written from the PTX ISA's sparse-metadata figures for 8-bit A (docs/fragments.md,
    measured on the GPU): contributor t = j + 2 g (j < 2 lanes per group of four, group g < 8);
    nibble v < 8 of its register holds row g + 8 j, chunk v (m16n8k32: eight 4-element chunks);
    index row + 16 * chunk of the column-major 16 x 8 nibble tile."""
    assert form.k == 32 and form.a.name == "s8"
    return Layout(((2, 8), 8), ((8, 1), 16))


def test_sparse_metadata_layout_is_slot_3() -> None:
    f = mma_form(SPARSE_S8)
    right = _metadata_layout_from_isa(f)
    good = MmaUse.canonical(f)  # carries the synthesized slot 3 for selector 0
    f.verify_instance("sm_80", good)
    f.verify_instance("sm_80", dataclasses.replace(good, metadata=OperandUse("u32", "rmem", right)))
    slot3 = synthesize_reference_layouts(32, 16, True, False, False).slots[3]
    f.verify_instance("sm_80", dataclasses.replace(good, metadata=OperandUse("u32", "rmem", slot3)))
    # The 16-bit convention (row g + 8 (v // 4), chunk 4 j + v % 4) applied to 8-bit A: wrong.
    wrong = Layout(((2, 8), (4, 2)), ((64, 1), (16, 8)))
    bad = dataclasses.replace(good, metadata=OperandUse("u32", "rmem", wrong))
    assert _err(f.verify_instance, "sm_80", bad) == (
        "expects Mma atom layout of ((2,8),8):((8,1),16) on lanes 0 + (2,8):(1,4) for operand E "
        "(metadata), but got ((2,8),(4,2)):((64,1),(16,8))")
    # Selector 1 reads lanes 2, 3 of each group: selector 0's layout is wrong there.
    sel1 = dataclasses.replace(good, selector=1)
    msg = _err(f.verify_instance, "sm_80", sel1)
    assert msg.startswith("expects Mma atom layout of ((2,8),8):((8,1),16) on lanes 2 + (2,8):(1,4)"
                          " for operand E (metadata), but got ((2,8),8):((8,1),16) on lanes 0 + ")
    f.verify_instance("sm_80", dataclasses.replace(
        sel1, metadata=OperandUse("u32", "rmem", f.metadata_layout(1))))


def test_sparse_metadata_layout_of_every_sparse_arm() -> None:
    """Each sparse form accepts its own slot 3 and rejects another form's (a mis-sized buffer)."""
    f16 = mma_form("sm80.sparse_mma.m16n8k16.f16.f16.f16.f16")
    s8 = mma_form(SPARSE_S8)
    u = MmaUse.canonical(f16)
    wrong = dataclasses.replace(u, metadata=OperandUse("u32", "rmem", s8.metadata_layout(0)))
    assert _err(f16.verify_instance, "sm_80", wrong).startswith(D.MMA_ATOM_LAYOUT)
    assert D.MMA_ATOM_LAYOUT == "expects Mma atom layout of "


def test_synthesizer_arm_6_is_an_sm80_atom() -> None:
    """Arms other than the FP8 one apply "at SM80 and above" (#reference-layout-synthesizer): arm 6
    is m16n8k8 f16, which sm80.mma carries too (the same PTX as sm75.mma.m16n8k8)."""
    r = synthesize_reference_layouts(8, 16, False, False, False)
    assert r.form == "sm80.mma.m16n8k8.f16.f16.f16.f16" and r.elements_per_thread == 4
    sm80, sm75 = mma_form(r.form), mma_form("sm75.mma.m16n8k8.f16.f16.f16.f16")
    assert sm80.opcode == sm75.opcode == "mma.sync.aligned.m16n8k8.row.col.f16.f16.f16.f16"
    assert sm80.available_on("sm_80") and not sm80.available_on("sm_75")
    for arm, name in ARMS.items():
        if name is not None and not arm[3]:  # every non-FP8 arm: an SM80 atom
            assert mma_form(name).tier == Tier.SM80, name
    u = MmaUse.canonical(sm80)
    assert _err(sm80.verify_instance, "sm_75", u) == (
        "atom 'sm80.mma.m16n8k8.f16.f16.f16.f16' needs tier SM80, but target sm_75 is tier "
        "SM70/75")


# --------------------------------------------------------------------------- registry vs ptxas

_F4, _F4b = "{f0,f1,f2,f3}", "{f4,f5,f6,f7}"
#: One instruction of each registry record, written from the PTX ISA's syntax sections, with the
#: lowest .version it needs (the target's own minimum binds too).
RECORD_PROBES: dict[str, tuple[str, tuple[int, int]]] = {
    "atom.universal_fma": ("fma.rn.f32 f0, f1, f2, f3;", (6, 0)),
    "sm70.mma": ("mma.sync.aligned.m8n8k4.row.col.f32.f16.f16.f32 {f0,f1,f2,f3,f4,f5,f6,f7}, "
                 "{r0,r1}, {r2,r3}, {f8,f9,f10,f11,f12,f13,f14,f15};", (6, 4)),
    "sm75.mma": ("mma.sync.aligned.m16n8k8.row.col.f16.f16.f16.f16 {r0,r1}, {r2,r3}, {r4}, "
                 "{r5,r6};", (6, 5)),
    "sm80.mma": (f"mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {_F4}, {{r0,r1,r2,r3}}, "
                 f"{{r4,r5}}, {_F4b};", (7, 0)),
    "sm80.sparse_mma": (f"mma.sp.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {_F4}, {{r0,r1}}, "
                        f"{{r2,r3}}, {_F4b}, r8, 0x0;", (7, 1)),
    "sm89.mma": (f"mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e5m2.f32 {_F4}, {{r0,r1,r2,r3}}, "
                 f"{{r4,r5}}, {_F4b};", (8, 4)),
    "sm89.sparse_mma": (f"mma.sp::ordered_metadata.sync.aligned.m16n8k64.row.col.f32.e4m3.e4m3"
                        f".f32 {_F4}, {{r0,r1,r2,r3}}, {{r4,r5,r6,r7}}, {_F4b}, r8, 0;", (8, 5)),
    "atom.universal_copy": ("ld.shared.b32 r1, [r0];", (6, 0)),
    "atom.ldsm": ("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {r0,r1,r2,r3}, [r4];", (6, 5)),
    "atom.stsm": ("stmatrix.sync.aligned.m8n8.x2.shared.b16 [r0], {r1,r2};", (7, 8)),
    "atom.simt_async_copy": ("cp.async.cg.shared.global [r0], [rd0], 16;", (7, 0)),
    "sm90.mma": (f"wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16 {_F4}, rd0, rd1, p0, 1, 1, "
                 "0, 0;", (8, 0)),
    "sm100.mma": ("tcgen05.mma.cta_group::1.kind::f16 [r0], rd0, rd1, r1, p0;", (8, 6)),
    "sm100.mma_sp": ("tcgen05.mma.sp.cta_group::1.kind::tf32 [r0], rd0, rd1, [r2], r1, p0;",
                     (8, 6)),
    "sm100.mma_bs": ("tcgen05.mma.cta_group::1.kind::mxf8f6f4.block_scale.block32 [r0], rd0, rd1,"
                     " r1, [r2], [r3], p0;", (8, 8)),
    "sm100.mma_bs_sp": ("tcgen05.mma.sp.cta_group::1.kind::mxf8f6f4.block_scale.block32 [r0], rd0,"
                        " rd1, [r4], r1, [r2], [r3], p0;", (8, 8)),
    "atom.tmem_load": ("tcgen05.ld.sync.aligned.32x32b.x2.b32 {r1,r2}, [r0];", (8, 6)),
    "atom.tmem_store": ("tcgen05.st.sync.aligned.16x64b.x1.b32 [r0], {r1};", (8, 6)),
    "atom.s2t_copy": ("tcgen05.cp.cta_group::1.128x256b [r0], rd0;", (8, 6)),
    "SM120.mma_bs": (f"mma.sync.aligned.m16n8k32.row.col.kind::mxf8f6f4.block_scale.scale_vec::1X"
                     f".f32.e4m3.e4m3.f32.ue8m0 {_F4}, {{r0,r1,r2,r3}}, {{r4,r5}}, {_F4b}, r6, "
                     "{0,0}, r7, {0,0};", (8, 7)),
    "sm120.mma": (f"mma.sync.aligned.m16n8k32.row.col.kind::f8f6f4.f32.e5m2.e4m3.f32 {_F4}, "
                  f"{{r0,r1,r2,r3}}, {{r4,r5}}, {_F4b};", (8, 6)),
    "sm120.sparse_mma": (f"mma.sp::ordered_metadata.sync.aligned.m16n8k64.row.col.kind::f8f6f4"
                         f".f32.e4m3.e4m3.f32 {_F4}, {{r0,r1,r2,r3}}, {{r4,r5,r6,r7}}, {_F4b}, "
                         "r8, 0;", (8, 6)),
    "atom.tma_load": ("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx"
                      "::bytes [r0], [rd0, {r1, r2}], [r3];", (8, 0)),
    "atom.tma_store": ("cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group [rd0, {r1, r2}],"
                       " [r0];", (8, 0)),
    "atom.tma_reduce": ("cp.reduce.async.bulk.tensor.2d.global.shared::cta.add.tile.bulk_group "
                        "[rd0, {r1, r2}], [r0];", (8, 0)),
    "prefetch_tma_desc": ("prefetch.tensormap [rd0];", (8, 0)),
}
# The non-exec atoms and make_exec_tma issue the executable atoms' instructions.
for _d in ("load", "store", "reduce"):
    RECORD_PROBES[f"atom.non_exec_tiled_tma_{_d}"] = RECORD_PROBES[f"atom.tma_{_d}"]
RECORD_PROBES["atom.make_exec_tma"] = RECORD_PROBES["atom.tma_load"]


def _probe_module(target: str, version: tuple[int, int], lines) -> tuple[str, int]:
    head = [f".version {version[0]}.{version[1]}", f".target {target}", ".address_size 64",
            ".visible .entry probe()", "{",
            ".reg .b32 r<16>; .reg .f32 f<16>; .reg .b64 rd<8>; .reg .pred p<4>;"]
    return "\n".join([*head, *lines, "ret;", "}", ""]), len(head) + 1


def test_record_probes_cover_the_registry() -> None:
    assert set(RECORD_PROBES) == set(ATOMS)


def _record_groups() -> list:
    from nvatom.arch import TARGETS
    from tests.ptxas_sweep import groups

    pairs = []
    for t in TARGETS.values():
        for mn, (_, v) in RECORD_PROBES.items():
            version = max(v, t.min_ptx)
            if t.ptxas == "12.9" and version > (8, 8):
                continue  # ptxas 12.9 knows PTX up to 8.8; those records are far above sm_7x
            pairs.append(((t.name, version), mn))
    return groups(pairs)


@pytest.mark.parametrize(("target", "version", "records"), _record_groups())
def test_allowed_on_is_what_ptxas_accepts(target: str, version, records) -> None:
    """One instruction of each record assembles on a target exactly when the registry allows
    the record there (sm90.mma: sm_90a only; tcgen05 atoms: sm_100/103/110 a and f; ...)."""
    from tests.ptxas_sweep import verdicts

    got = verdicts(_probe_module, target, version, [RECORD_PROBES[m][0] for m in records])
    wrong = [f"{m}: ptxas {'accepts' if ok else 'rejects ' + '; '.join(msgs)}, allowed_on says "
             f"{ATOMS[m].allowed_on(target)}"
             for m, (ok, msgs) in zip(records, got, strict=True)
             if ok != ATOMS[m].allowed_on(target)]
    assert not wrong, wrong


@pytest.mark.parametrize(("mnemonic", "target", "message"), [
    ("sm90.mma", "sm_90", "atom 'sm90.mma' is not available on sm_90: it needs wgmma.mma_async "
     "(warpgroup MMA) (sm_9x, 'a' targets)"),
    ("sm100.mma", "sm_120a", "atom 'sm100.mma' is not available on sm_120a: it needs tcgen05 "
     "(UMMA, tensor memory) (sm_10x/11x, 'a'/'f' targets)"),
    ("atom.tmem_load", "sm_100", "atom 'atom.tmem_load' is not available on sm_100: it needs "
     "tcgen05 (UMMA, tensor memory) (sm_10x/11x, 'a'/'f' targets)"),
    ("sm100.mma_bs", "sm_90a", "atom 'sm100.mma_bs' needs tier SM100/SM103, but target sm_90a is "
     "tier SM90"),
    ("SM120.mma_bs", "sm_120", "atom 'SM120.mma_bs' is not available on sm_120: it needs mma.sync "
     "block_scale (SM120 MX/NV formats) (sm_12x, 'a'/'f' targets)"),
])
def test_record_rejections(mnemonic: str, target: str, message: str) -> None:
    r = atom_record(mnemonic)
    assert not r.allowed_on(target) and r.rejection(target) == message
    assert r.rejection("sm_100a" if "100" in mnemonic or "tmem" in mnemonic else
                       "sm_90a" if mnemonic == "sm90.mma" else "sm_120a") is None


def test_wgmma_atom_on_plain_sm90_is_rejected_by_the_record() -> None:
    from nvatom.atoms.sm90 import FORMS as WGMMA

    f = WGMMA[0]
    assert not atom_record(f.mnemonic).allowed_on("sm_90")
    assert atom_record(f.mnemonic).allowed_on("sm_90a")


@pytest.mark.parametrize(("tier", "mnk", "types", "sparse", "want"), [
    # SM90 WGMMA (PTX ISA wgmma "Matrix shape"): M = 64, K = 256 / bits,
    # N = 8..256 step 8 for f16/bf16/tf32/FP8; s8/u8 N = 8, 16, 24, then 32..256 step 16.
    ("SM90", (64, 128, 16), ("f16", "f16", "f32"), False, True),
    ("SM90", (64, 256, 16), ("bf16", "bf16", "f32"), False, True),
    ("SM90", (64, 8, 8), ("tf32", "tf32", "f32"), False, True),
    ("SM90", (64, 200, 32), ("e4m3", "e5m2", "f16"), False, True),
    ("SM90", (64, 48, 32), ("s8", "u8", "s32"), False, True),
    ("SM90", (64, 40, 32), ("s8", "s8", "s32"), False, False),  # 40 is not a WGMMA integer N
    ("SM90", (128, 128, 16), ("f16", "f16", "f32"), False, False),  # M is 64 only
    ("SM90", (64, 128, 32), ("f16", "f16", "f32"), False, False),  # K = 256 / 16
    ("SM90", (64, 128, 64), ("s4", "s4", "s32"), False, False),  # no 4-bit WGMMA
    ("SM90", (64, 128, 16), ("f16", "f16", "f32"), True, False),
    # SM100 UMMA (PTX ISA tcgen05.mma "Matrix shape" table): cta_group::1 M 64/128 with N step
    # 8, cta_group::2 M 128/256 with N step 16, N <= 256; K = 256 / bits, doubled when sparse.
    ("SM100", (128, 256, 16), ("f16", "f16", "f32"), False, True),
    ("SM100", (64, 8, 16), ("bf16", "bf16", "f32"), False, True),
    ("SM100", (256, 256, 16), ("f16", "f16", "f16"), False, True),
    ("SM100", (256, 24, 16), ("f16", "f16", "f32"), False, False),  # cta_group::2: N step 16
    ("SM100", (128, 264, 16), ("f16", "f16", "f32"), False, False),
    ("SM100", (64, 8, 16), ("bf16", "bf16", "f16"), False, False),  # bf16 accumulates in f32
    ("SM100", (128, 128, 32), ("f16", "f16", "f32"), True, True),
    ("SM100", (128, 128, 32), ("f16", "f16", "f32"), False, False),
    ("SM100", (128, 64, 8), ("tf32", "tf32", "f32"), False, True),
    ("SM100", (128, 128, 32), ("e2m3", "e4m3", "f32"), False, True),
    ("SM100", (128, 128, 32), ("s8", "u8", "s32"), False, True),
    ("SM100", (128, 128, 64), ("e2m1", "e2m1", "f32"), False, True),  # mxf4 / mxf4nvf4
    ("SM110", (128, 128, 16), ("f16", "f16", "f32"), False, True),  # sm_110a/f run tcgen05
    # SM120 and the register tiers keep their tables.
    ("SM120", (16, 8, 32), ("e4m3", "e4m3", "f32"), False, True),
    ("SM89", (16, 8, 32), ("e4m3", "e4m3", "f32"), False, True),
    ("SM80", (16, 8, 8), ("f16", "f16", "f16"), False, True),  # synthesizer arm 6
    ("SM80", (64, 128, 16), ("f16", "f16", "f32"), False, False),
])
def test_shape_lattice_of_every_tier(tier, mnk, types, sparse, want) -> None:
    assert check_shape_in_lattice(tier, mnk, *types, sparse=sparse) is want


def test_every_tier_has_lattice_rows() -> None:
    rows = {"SM70": ((8, 8, 4), "f16", "f16", "f32"), "SM75": ((16, 8, 8), "f16", "f16", "f32"),
            "SM80": ((16, 8, 16), "bf16", "bf16", "f32"), "SM89": ((16, 8, 16), "e5m2", "e4m3",
                                                                   "f32"),
            "SM90": ((64, 8, 16), "f16", "f16", "f16"), "SM100": ((128, 8, 16), "f16", "f16",
                                                                 "f32"),
            "SM110": ((128, 8, 16), "f16", "f16", "f32"),
            "SM120": ((16, 8, 32), "e2m1", "e3m2", "f32")}
    assert set(rows) == set(Tier.__members__)
    for tier, (mnk, a, b, c) in rows.items():
        assert check_shape_in_lattice(tier, mnk, a, b, c), tier
    with pytest.raises(NvatomError, match="unknown tier 'SM95'"):
        check_shape_in_lattice("SM95", (64, 8, 16), "f16", "f16", "f16")
