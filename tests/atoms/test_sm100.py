"""SM100 UMMA atoms without ptxas: names, shapes (PTX ISA 9.7.16.2.1 Table 39, every row, and
its edges), block-scale encodings (the packed values of
docs/spec-deviations.md#block-scale-packed-value; the PTX ISA's kinds), interfaces, and one negative
test per verifier diagnostic (#mma-verifier-ladders; strings compared byte for byte)."""

from __future__ import annotations

import dataclasses

import pytest

from nvatom import diagnostics as D
from nvatom.atoms import sm100
from nvatom.atoms.interfaces import (
    AtomVerificationError,
    interfaces_of,
    verify_atom_instance,
)
from nvatom.atoms.registry import atom_record
from nvatom.atoms.sm100 import (
    FORMS,
    KINDS,
    Tcgen05MmaForm,
    UmmaError,
    UmmaUse,
    block_scale_kind,
    block_scale_packed,
    legal_m,
    legal_mn,
    legal_n,
    make_umma_atom,
    tcgen05_form,
    umma_atom,
    umma_atoms,
)
from nvatom.atoms.smem import smem_layout
from nvatom.atoms.verify import OperandUse
from nvatom.layout import Layout

F16 = "sm100.mma.f16.cta1.m128n256k16.ss.f32.f16.f16"
TS = "sm100.mma.f16.cta1.m128n256k16.ts.f32.f16.f16"
BS = "sm100.mma_bs.mxf8f6f4.cta1.m128n128k32.ss.f32.e4m3.e4m3.ue8m0.vs32"


def _err(atom: sm100.UmmaAtom, use: UmmaUse, t: str = "sm_100a") -> str:
    with pytest.raises(AtomVerificationError) as ei:
        atom.verify_instance(t, use)
    return str(ei.value)


def _op(t: str, res: str, layout: object = None) -> OperandUse:
    return OperandUse(t, res, layout)


# --------------------------------------------------------------------------- naming, shapes


def test_names_round_trip() -> None:
    names = [a.name for a in umma_atoms(kind="f16", cta_group=1)]
    assert len(names) == len(set(names))
    for n in names[:: max(1, len(names) // 50)]:
        assert umma_atom(n).name == n
    a = umma_atom(F16)
    assert (a.shape_mnk, a.mnemonic, a.a_source) == ((128, 256, 16), "sm100.mma", "ss")
    assert umma_atom("sm100.mma_sp.tf32.cta2.m256n16k16.ss.f32.tf32.tf32").k == 16
    with pytest.raises(UmmaError, match="not a UMMA atom name"):
        umma_atom("sm100.mma.m128n256k16")
    with pytest.raises(UmmaError, match="k16"):  # K is derived: k32 does not name an atom
        umma_atom("sm100.mma.f16.cta1.m128n256k32.ss.f32.f16.f16")


def test_shapes_follow_the_isa_table() -> None:
    # PTX ISA 9.7.16.2.1 Table 39 "Various combinations of .kind and shapes", row by row
    # (values typed from the table, not derived from SHAPES).
    n8, n16, n32 = set(range(8, 257, 8)), set(range(16, 257, 16)), set(range(32, 257, 32))
    for kind in ("f16", "tf32", "f8f6f4", "i8"):
        n1 = {8, 16, 24, 32, *range(48, 257, 16)} if kind == "i8" else n8
        n2 = n32 if kind == "i8" else n16
        for sp in (False, True):
            assert set(legal_mn(kind, 1, sp)) == {(m, n) for m in (64, 128) for n in n1}
            assert set(legal_mn(kind, 2, sp)) == {(m, n) for m in (128, 256) for n in n2}
            assert set(legal_mn(kind, 1, sp, ws=True)) == {
                (m, n) for m in (32, 64, 128) for n in ((64, 128) if sp else (64, 128, 256))}
            assert legal_mn(kind, 2, sp, ws=True) == ()  # "Invalid"
    for kind in ("mxf8f6f4", "mxf4", "mxf4nvf4"):
        for sp in (False, True):
            assert set(legal_mn(kind, 1, sp)) == {(128, n) for n in n8}
            assert set(legal_mn(kind, 2, sp)) == {
                (m, n) for m in ((256,) if sp else (128, 256)) for n in n16}
            assert legal_mn(kind, 1, sp, ws=True) == legal_mn(kind, 2, sp, ws=True) == ()


# (kind, cta_group, sparse, ws, M, N, legal): the ISA table's edges and the first value past
# each edge.
_EDGES = [
    ("f16", 1, False, False, 64, 8, True), ("f16", 1, False, False, 128, 256, True),
    ("f16", 1, False, False, 128, 264, False), ("f16", 1, False, False, 128, 12, False),
    ("f16", 1, False, False, 32, 64, False), ("f16", 1, False, False, 256, 64, False),
    ("tf32", 2, False, False, 128, 16, True), ("tf32", 2, False, False, 256, 256, True),
    ("tf32", 2, False, False, 256, 8, False), ("tf32", 2, False, False, 64, 64, False),
    ("f8f6f4", 1, True, False, 64, 8, True), ("f8f6f4", 2, True, False, 128, 24, False),
    ("f16", 1, False, True, 32, 64, True), ("f16", 1, False, True, 32, 256, True),
    ("f16", 1, False, True, 32, 32, False), ("f16", 1, False, True, 16, 64, False),
    ("f16", 1, True, True, 128, 128, True), ("f16", 1, True, True, 128, 256, False),
    ("i8", 1, False, False, 64, 8, True), ("i8", 1, False, False, 128, 24, True),
    ("i8", 1, False, False, 128, 32, True), ("i8", 1, False, False, 128, 40, False),
    ("i8", 1, False, False, 128, 48, True), ("i8", 1, False, False, 128, 56, False),
    ("i8", 1, True, False, 64, 256, True), ("i8", 2, False, False, 128, 32, True),
    ("i8", 2, False, False, 128, 16, False), ("i8", 2, False, False, 256, 48, False),
    ("i8", 2, True, False, 256, 256, True), ("i8", 1, True, True, 32, 128, True),
    ("i8", 1, True, True, 32, 256, False),
    ("mxf8f6f4", 1, False, False, 128, 8, True), ("mxf8f6f4", 1, False, False, 64, 128, False),
    ("mxf8f6f4", 1, True, False, 128, 8, True), ("mxf8f6f4", 2, False, False, 128, 16, True),
    ("mxf8f6f4", 2, False, False, 256, 8, False), ("mxf8f6f4", 2, True, False, 256, 16, True),
    ("mxf8f6f4", 2, True, False, 128, 16, False),
    ("mxf4", 1, False, False, 128, 256, True), ("mxf4", 1, True, False, 128, 8, True),
    ("mxf4", 2, False, False, 128, 256, True), ("mxf4", 2, True, False, 128, 256, False),
    ("mxf4", 2, True, False, 256, 256, True),
    ("mxf4nvf4", 1, False, False, 128, 8, True), ("mxf4nvf4", 1, False, False, 128, 4, False),
    ("mxf4nvf4", 2, False, False, 128, 16, True), ("mxf4nvf4", 2, True, False, 128, 16, False),
    ("mxf4nvf4", 2, True, False, 256, 272, False),
]
_TYPES = {"f16": ("f32", "f16", None, None), "tf32": ("f32", "tf32", None, None),
          "f8f6f4": ("f32", "e4m3", None, None), "i8": ("s32", "s8", None, None),
          "mxf8f6f4": ("f32", "e4m3", "ue8m0", 32), "mxf4": ("f32", "e2m1", "ue8m0", 32),
          "mxf4nvf4": ("f32", "e2m1", "ue4m3", 16)}


@pytest.mark.parametrize(("kind", "cta", "sp", "ws", "m", "n", "legal"), _EDGES)
def test_isa_shape_edges(kind: str, cta: int, sp: bool, ws: bool, m: int, n: int,
                         legal: bool) -> None:
    d, ab, sf, vs = _TYPES[kind]
    if vs is not None and sp:
        vs *= 2  # a sparse block-scaled atom has as many scales over twice the K
    build = lambda: make_umma_atom(kind, cta, m, n, d, ab, ab, sparse=sp, ws=ws,  # noqa: E731
                                   sf=sf, vec_size=vs)
    if legal:
        assert build().shape_mnk[:2] == (m, n)
    else:
        with pytest.raises(UmmaError, match=f"M x N = {m} x {n} is not a kind::{kind}"):
            build()


def test_shape_error_names_the_legal_sets() -> None:
    for f in (legal_m, legal_n, legal_mn):
        with pytest.raises(UmmaError, match="unknown kind 'f64'"):
            f("f64", 1)
    with pytest.raises(UmmaError, match=r"M in \(64, 128\), N in \{8\.\.32/8, 48\.\.256/16\}"):
        make_umma_atom("i8", 1, 128, 40, "s32", "s8", "s8")
    with pytest.raises(UmmaError, match=r"M in \(256,\), N in \{16\.\.256/16\}"):
        make_umma_atom("mxf4", 2, 128, 64, "f32", "e2m1", "e2m1", sparse=True, sf="ue8m0",
                       vec_size=64)


@pytest.mark.parametrize(("kind", "k_dense"), [("f16", 16), ("tf32", 8), ("f8f6f4", 32),
                                                ("i8", 32), ("mxf8f6f4", 32), ("mxf4", 64),
                                                ("mxf4nvf4", 64)])
def test_k_is_256_bits_dense_512_sparse(kind: str, k_dense: int) -> None:
    # PTX ISA tcgen05.mma "Matrix shape" / CUTLASS mma_traits_sm100.hpp: K = 256/bits dense,
    # 512/bits sparse
    atoms = list(umma_atoms(kind=kind, cta_group=1, m=128, n=128))
    assert {a.k for a in atoms if not a.sparse} == {k_dense}
    assert {a.k for a in atoms if a.sparse} == {2 * k_dense}


def test_bad_atoms_are_rejected_with_the_value() -> None:
    with pytest.raises(UmmaError, match="M x N = 64 x 8 .*cta_group::2"):
        make_umma_atom("f16", 2, 64, 8, "f32", "f16", "f16")
    with pytest.raises(UmmaError, match="A type e4m3"):
        make_umma_atom("f16", 1, 128, 64, "f32", "e4m3", "e4m3")
    with pytest.raises(UmmaError, match="bf16 accumulates in f32"):
        make_umma_atom("f16", 1, 128, 64, "f16", "bf16", "bf16")
    with pytest.raises(UmmaError, match="one type"):
        make_umma_atom("f16", 1, 128, 64, "f32", "f16", "bf16")
    # no transpose for kind::mxf4 / mxf4nvf4 (PTX ISA Table 49); FP4/FP6 of kind::f8f6f4 /
    # mxf8f6f4 may be MN-major (the same table allows transpose for those kinds)
    for kind, sf, vec in (("mxf4", "ue8m0", 32), ("mxf4nvf4", "ue4m3", 16)):
        with pytest.raises(UmmaError, match=f"A of kind::{kind} must be K-major \\(PTX ISA "
                           "Table 49"):
            make_umma_atom(kind, 1, 128, 64, "f32", "e2m1", "e2m1", sf=sf, vec_size=vec,
                           a_major="MN")
    assert make_umma_atom("f8f6f4", 1, 128, 64, "f32", "e2m1", "e4m3", a_major="MN").name \
        .endswith(".amn")
    assert make_umma_atom("mxf8f6f4", 1, 128, 64, "f32", "e4m3", "e3m2", sf="ue8m0",
                          vec_size=32, b_major="MN").name.endswith(".bmn")
    # Table 50's 8-bit transpose-B N rule holds for them too (8-bit containers in smem)
    with pytest.raises(UmmaError, match="needs N a multiple of 16"):
        make_umma_atom("f8f6f4", 1, 128, 24, "f32", "e4m3", "e2m1", b_major="MN")
    with pytest.raises(UmmaError, match="A from tensor memory is K-major"):
        make_umma_atom("f16", 1, 128, 64, "f32", "f16", "f16", a_source="ts", a_major="MN")
    with pytest.raises(UmmaError, match="scale type ue4m3"):
        make_umma_atom("mxf4", 1, 128, 64, "f32", "e2m1", "e2m1", sf="ue4m3", vec_size=32)
    with pytest.raises(UmmaError, match="vector size 32 with ue4m3"):
        make_umma_atom("mxf4nvf4", 1, 128, 64, "f32", "e2m1", "e2m1", sf="ue4m3", vec_size=32)
    with pytest.raises(UmmaError, match="not block-scaled"):
        make_umma_atom("f16", 1, 128, 64, "f32", "f16", "f16", sf="ue8m0", vec_size=32)
    with pytest.raises(UmmaError, match="unknown kind"):
        make_umma_atom("f64", 1, 128, 64, "f32", "f16", "f16")


def test_every_atom_issues_a_form_of_the_table() -> None:
    forms = {f.name for f in FORMS}
    n = 0
    for a in umma_atoms(n=64):
        assert a.form().name in forms
        if a.block_qualifier:
            assert a.form(block_spelling=True).name in forms
        n += 1
    assert n > 1000


def test_target_availability() -> None:
    i8 = umma_atom("sm100.mma.i8.cta1.m128n64k32.ss.s32.s8.s8")
    assert [t for t in ("sm_100a", "sm_100f", "sm_103a", "sm_110a", "sm_110f", "sm_120a")
            if i8.available_on(t)] == ["sm_100a", "sm_110a"]
    nv = umma_atom("sm100.mma_bs.mxf4nvf4.cta1.m128n128k64.ss.f32.e2m1.e2m1.ue4m3.vs16")
    assert nv.form().scale_vec == "scale_vec::4X"
    assert nv.form(block_spelling=True).scale_vec == "block16"
    assert nv.available_on("sm_100f")  # through .block16
    assert not nv.form().available_on("sm_100f")  # .scale_vec::4X is 'a'-only
    assert not umma_atom(F16).available_on("sm_90a")
    assert nv.issued_form("sm_100a").scale_vec == "scale_vec::4X"
    assert nv.issued_form("sm_110f").scale_vec == "block16"
    assert nv.ptx_version_for("sm_100a") == (8, 7) and nv.ptx_version_for("sm_100f") == (8, 8)
    with pytest.raises(UmmaError, match="not available on sm_120a"):
        nv.issued_form("sm_120a")


def test_form_spelling_and_operands() -> None:
    f = Tcgen05MmaForm("f16", 1, "ss", disable_output_lane=True, scale_input_d=True)
    assert f.operands == ("d", "a", "b", "idesc", "dol", "enable_input_d", "scale_input_d")
    line = f.instruction(d="%r0", a="%rd1", b="%rd2", idesc="%r3",
                         dol=["%r4", "%r5", "%r6", "%r7"], enable_input_d="%p0",
                         scale_input_d=3)
    assert line == ("tcgen05.mma.cta_group::1.kind::f16 [%r0], %rd1, %rd2, %r3, "
                    "{%r4, %r5, %r6, %r7}, %p0, 3;")
    bs = tcgen05_form("tcgen05.mma.sp.cta_group::2.kind::mxf8f6f4.block_scale.scale_vec::1X+ts")
    assert bs.operands == ("d", "a", "b", "meta", "idesc", "sfa", "sfb", "enable_input_d")
    with pytest.raises(UmmaError, match="0..15"):
        f.instruction(d="%r0", a="%rd1", b="%rd2", idesc="%r3", dol=["%r4"] * 4,
                      enable_input_d="%p0", scale_input_d=16)
    with pytest.raises(UmmaError, match="4 .b32 registers"):
        f.instruction(d="%r0", a="%rd1", b="%rd2", idesc="%r3", dol=["%r4"] * 8,
                      enable_input_d="%p0", scale_input_d=1)


@pytest.mark.parametrize(("kw", "msg"), [
    (dict(kind="f16", cta_group=2, ws=True), "cta_group::1 only"),
    (dict(kind="mxf4", ws=True, scale_vec="block32"), "has no .ws form"),
    (dict(kind="f16", ashift=True), "needs A in tensor memory"),
    (dict(kind="f16", a_source="ts", ashift=True, collector="a::fill"), "ashift cannot"),
    (dict(kind="f8f6f4", scale_input_d=True), "scale-input-d is for kind::f16"),
    (dict(kind="mxf4", scale_vec="block16"), "scale-vector qualifiers"),
    (dict(kind="mxf4nvf4"), "scale-vector qualifiers"),
    (dict(kind="f16", collector="b0::fill"), "collector::a"),
    (dict(kind="f16", ws=True, collector="a::fill"), "collector::b"),
    (dict(kind="f16", zero_column_mask=True), "zero-column-mask"),
])
def test_illegal_forms(kw: dict, msg: str) -> None:
    with pytest.raises(UmmaError, match=msg):
        Tcgen05MmaForm(**kw)


# --------------------------------------------------------------------------- block scaling


def test_block_scale_packed_seed_values() -> None:
    # the specification's table (#block-scale-packed-value): (32, 32) 0x2000000020; (64, 16)
    # 0x4000000010; (64, 32) 0x4000000020
    assert block_scale_packed("e4m3", "e4m3", "ue8m0", "ue8m0", 32, 32) == 0x2000000020
    assert block_scale_packed("e2m1", "e2m1", "ue4m3", "ue4m3", 64, 16) == 0x4000000010
    assert block_scale_packed("e2m1", "e2m1", "ue8m0", "ue8m0", 64, 16) == 0x4000000010
    assert block_scale_packed("e2m1", "e2m1", "ue8m0", "ue8m0", 64, 32) == 0x4000000020
    assert block_scale_packed("e2m1", "e2m1", "ue4m3", "ue4m3", 64, 32) == 0  # E4M3 @ 32
    assert block_scale_packed("e4m3", "e4m3", "ue8m0", "ue8m0", 64, 32) == 0
    assert block_scale_packed("e2m1", "e2m1", "ue8m0", "ue4m3", 64, 16) == 0  # sfa != sfb
    assert block_scale_packed("e4m3", "e4m3", "ue4m3", "ue4m3", 32, 16) == 0


def test_block_scale_true_kinds() -> None:
    # the specification's labels are wrong (spec-deviations.md, SM100): vec 16 is NVFP4,
    # vec 32 E8M0 FP4 is MXFP4
    assert block_scale_kind("e4m3", "e5m2", "ue8m0", 32) == ("mxf8f6f4", "scale_vec::1X",
                                                             "block32")
    assert block_scale_kind("e2m1", "e2m1", "ue4m3", 16) == ("mxf4nvf4", "scale_vec::4X",
                                                             "block16")
    assert block_scale_kind("e2m1", "e2m1", "ue8m0", 32) == ("mxf4", "scale_vec::2X", "block32")
    with pytest.raises(UmmaError, match="vector size 64"):
        block_scale_kind("e2m1", "e2m1", "ue8m0", 64)
    # every packed-accepted (a, b, sf, K, vec) has a real kind whose atom exists
    for a, sf, k, vec in (("e4m3", "ue8m0", 32, 32), ("e2m1", "ue4m3", 64, 16),
                          ("e2m1", "ue8m0", 64, 16), ("e2m1", "ue8m0", 64, 32)):
        assert block_scale_packed(a, a, sf, sf, k, vec)
        kind, _, _ = block_scale_kind(a, a, sf, vec)
        atom = make_umma_atom(kind, 1, 128, 64, "f32", a, a, sf=sf, vec_size=vec)
        assert atom.k == k


# --------------------------------------------------------------------------- verifier


def test_interfaces_and_registry() -> None:
    assert interfaces_of(umma_atom(F16)) == ("MmaAtom", "TmemAtom", "SmemDescriptorAtom")
    assert "BlockScaleAtom" in interfaces_of(umma_atom(BS))
    sp = umma_atom("sm100.mma_bs_sp.mxf4.cta1.m128n64k128.ss.f32.e2m1.e2m1.ue8m0.vs64")
    assert {"BlockScaleAtom", "SparseMetadataAtom"} <= set(interfaces_of(sp))
    for mn in sm100.MNEMONICS:
        assert atom_record(mn).min_tier is not None


def test_canonical_use_passes_on_every_kind() -> None:
    for kind in KINDS:
        for a in list(umma_atoms(kind=kind, n=128))[:6]:
            verify_atom_instance(a, "sm_100a", UmmaUse.canonical(a))


def test_target_and_tier() -> None:
    a = umma_atom(F16)
    assert "needs tier" in _err(a, UmmaUse.canonical(a), "sm_90a")
    assert "not available on sm_120a" in _err(a, UmmaUse.canonical(a), "sm_120a")
    i8 = umma_atom("sm100.mma.i8.cta1.m128n64k32.ss.s32.s8.s8")
    assert "not available on sm_103a" in _err(i8, UmmaUse.canonical(i8), "sm_103a")
    verify_atom_instance(i8, "sm_110a", UmmaUse.canonical(i8))  # SM110: the sm100 atoms serve


@pytest.mark.parametrize(("slot", "want"), [
    ("a", "expects operand a with element type f16, but get bf16."),
    ("b", "expects operand b with element type f16, but get bf16."),
    ("c", "expects operand c with element type f32, but get f16."),
    ("d", "expects operand c with element type f32, but get f16."),
])
def test_element_type_ladder(slot: str, want: str) -> None:
    a = umma_atom(F16)
    use = UmmaUse.canonical(a)
    bad = "f16" if slot in "cd" else "bf16"
    op = getattr(use, slot)
    use = dataclasses.replace(use, **{slot: _op(bad, op.residency, op.layout)})
    assert _err(a, use) == want
    assert want == D.OPERAND_ELEMENT_TYPE.format(slot if slot != "d" else "c",
                                                 "f32" if slot in "cd" else "f16", bad)


def test_element_types_before_residency() -> None:
    a = umma_atom(F16)
    use = dataclasses.replace(UmmaUse.canonical(a), a=_op("bf16", "rmem"))
    assert _err(a, use).startswith("expects operand a with element type")


def test_residency_ladder() -> None:
    a, t = umma_atom(F16), umma_atom(TS)
    use = dataclasses.replace(UmmaUse.canonical(a), a=_op("f16", "rmem"))
    assert _err(a, use) == "expects memref/smem_desc_view for operand A, but gets " \
        "A:memref<f16, rmem>."
    use = dataclasses.replace(UmmaUse.canonical(t), a=_op("f16", "smem_desc_view"))
    assert _err(t, use) == "expects memref/smem_desc_view for operand A, but gets " \
        "A:memref<f16, smem_desc_view>."
    use = dataclasses.replace(UmmaUse.canonical(a), b=_op("f16", "smem"))
    assert _err(a, use) == "expects smem_desc_view for operand B, but gets B: memref<f16, smem>."
    use = dataclasses.replace(UmmaUse.canonical(a), d=_op("f32", "rmem"))
    assert _err(a, use) == "expects memref for operand D, but gets D: memref<f32, rmem>."


def test_block_scale_checks() -> None:
    a = umma_atom(BS)
    use = dataclasses.replace(UmmaUse.canonical(a), c=_op("f16", "tmem"))
    assert _err(a, use) == "expects c type to be Float32"
    use = dataclasses.replace(UmmaUse.canonical(a), sfb=_op("ue4m3", "tmem"))
    assert _err(a, use) == "expects sfa/sfb element types to be the same"
    use = dataclasses.replace(UmmaUse.canonical(a), sfa=_op("ue4m3", "tmem"),
                              sfb=_op("ue4m3", "tmem"))
    assert "no block-scaled MMA" in _err(a, use)
    use = dataclasses.replace(UmmaUse.canonical(a), sfa=None)
    assert "scale-factor operands" in _err(a, use)
    plain = umma_atom(F16)
    use = dataclasses.replace(UmmaUse.canonical(plain), sfa=_op("ue8m0", "tmem"),
                              sfb=_op("ue8m0", "tmem"))
    assert "takes no scale factors" in _err(plain, use)


def test_sparse_metadata() -> None:
    a = umma_atom("sm100.mma_sp.f16.cta1.m128n64k32.ss.f32.f16.f16")
    use = dataclasses.replace(UmmaUse.canonical(a), metadata=None)
    assert "sparse metadata in tmem" in _err(a, use)
    dense = umma_atom(F16)
    use = dataclasses.replace(UmmaUse.canonical(dense), metadata=_op("u32", "tmem"))
    assert "dense and takes no metadata" in _err(dense, use)


def test_layout_ladder() -> None:
    a = umma_atom("sm100.mma.f16.cta1.m128n64k16.ss.f32.f16.f16")
    ok = UmmaUse.canonical(a)
    # canonical operands: A, B K-major 128-byte swizzled tiles; D row r in lane r, the second
    # 128-row block 128 columns further
    la, lb = smem_layout(256, 64, 16, "K", 128), smem_layout(128, 64, 16, "K", 128)
    ld = Layout(((128, 2), 128), ((1 << 16, 128), 1))
    use = dataclasses.replace(ok, a=_op("f16", "smem_desc_view", la),
                              b=_op("f16", "smem_desc_view", lb), d=_op("f32", "tmem", ld))
    a.verify_instance("sm_100a", use)  # a 256 x 128 x 64 gemm of 128 x 64 x 16 atoms
    bad_a = Layout((100, 64), (64, 1))
    use2 = dataclasses.replace(use, a=_op("f16", "smem_desc_view", bad_a))
    assert _err(a, use2) == D.UMMA_INVALID_LAYOUT.format(bad_a, lb, ld)
    assert _err(a, use2) == ("invalid layout of A/B/D. A: (100,64):(64,1), B: Sw<3,3,3> o 0 o "
                             "((8,16),(64,1)):((64,512),(1,0)), D:((128,2),128):((65536,128),1)")
    lb2 = Layout((128, 32), (32, 1))  # K 32 != A's K 64
    use3 = dataclasses.replace(use, b=_op("f16", "smem_desc_view", lb2))
    assert _err(a, use3) == ("layoutA, layoutB and layoutD fail to form a gemm. "
                             f"A: {la}, B: {lb2}, D: {ld}")
    use4 = dataclasses.replace(use, d=_op("f32", "tmem", "a string"))
    assert _err(a, use4).startswith("invalid layout of A/B/D.")


def test_shape_mismatch() -> None:
    a = umma_atom(F16)
    use = dataclasses.replace(UmmaUse.canonical(a), shape=(64, 256, 16))
    assert "has shape (128, 256, 16)" in _err(a, use)


def test_layout_ladder_skips_operands_without_layout() -> None:
    a = umma_atom("sm100.mma.f16.cta1.m128n64k16.ss.f32.f16.f16")
    la, lb = smem_layout(256, 64, 16, "K", 128), smem_layout(128, 64, 16, "K", 128)
    use = dataclasses.replace(UmmaUse.canonical(a), a=_op("f16", "smem_desc_view", la),
                              b=_op("f16", "smem_desc_view", lb), d=_op("f32", "tmem"))
    a.verify_instance("sm_100a", use)  # D's layout unknown: A and B still agree on K
    lb2 = Layout((128, 32), (32, 1))
    use2 = dataclasses.replace(use, b=_op("f16", "smem_desc_view", lb2))
    assert _err(a, use2) == ("layoutA, layoutB and layoutD fail to form a gemm. "
                             f"A: {la}, B: {lb2}, D: None")


def test_8bit_transposed_b_n_rule() -> None:
    # PTX ISA 9.7.16.10.1 Table 50: 8-bit transpose B: cta_group::1 16 <= N <= 256 step 16,
    # cta_group::2 32 <= N <= 256 step 32
    assert make_umma_atom("i8", 1, 128, 16, "s32", "s8", "s8", b_major="MN").n == 16
    assert make_umma_atom("i8", 1, 128, 24, "s32", "s8", "s8").n == 24  # K-major: fine
    for kind, d, t, cta, n in (("i8", "s32", "u8", 1, 24), ("i8", "s32", "s8", 1, 8),
                               ("f8f6f4", "f32", "e4m3", 1, 40), ("f8f6f4", "f16", "e5m2", 2, 48)):
        with pytest.raises(UmmaError, match=f"multiple of {16 * cta} .* got N = {n}"):
            make_umma_atom(kind, cta, 128 * cta, n, d, t, t, b_major="MN")
    assert make_umma_atom("f8f6f4", 2, 256, 64, "f32", "e4m3", "e4m3", b_major="MN").n == 64
    # 16-bit MN-major B keeps the plain N rule
    assert make_umma_atom("f16", 1, 128, 24, "f32", "f16", "f16", b_major="MN").n == 24
