"""SM90 WGMMA forms without ptxas: names, opcodes, register counts (PTX ISA wgmma: N/2 f32),
immediates, the lattice (PTX ISA wgmma "Matrix shape"), and one negative test per verifier
diagnostic."""

from __future__ import annotations

import collections
import dataclasses

import pytest

from nvatom.atoms import sm90
from nvatom.atoms.interfaces import (
    AtomVerificationError,
    MmaAtom,
    SmemDescriptorAtom,
    interfaces_of,
    verify_atom_instance,
)
from nvatom.atoms.sm90 import FORMS, WgmmaForm, WgmmaFormError, wgmma_form
from nvatom.atoms.verify import MmaUse, OperandUse
from nvatom.dtypes import dtype

SS_F16 = "sm90.mma.m64n128k16.ss.f32.f16.f16"


def _use(f: WgmmaForm, a: str | None = None, b: str | None = None, d: str | None = None,
         a_res: str | None = None, b_res: str = "smem_desc_view", shape=None) -> MmaUse:
    a_res = a_res or ("smem_desc_view" if f.a_source == "ss" else "rmem")
    dt = d or f.d.name
    return MmaUse(OperandUse(a or f.a.name, a_res), OperandUse(b or f.b.name, b_res),
                  OperandUse(dt, "rmem"), OperandUse(dt, "rmem"), shape=shape)


def _err(form: WgmmaForm, use: MmaUse, t: str = "sm_90a") -> str:
    with pytest.raises(AtomVerificationError) as ei:
        form.verify_instance(t, use)
    return str(ei.value)


# --------------------------------------------------------------------------- naming


def test_name_and_opcode() -> None:
    f = wgmma_form(SS_F16)
    assert (f.shape, f.a_source, f.d.name, f.c.name) == ((64, 128, 16), "ss", "f32", "f32")
    assert f.opcode == "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16"
    s8 = wgmma_form("sm90.mma.m64n256k32.rs.satfinite.s32.s8.u8")
    assert s8.opcode == "wgmma.mma_async.sync.aligned.m64n256k32.satfinite.s32.s8.u8"
    b1 = wgmma_form("sm90.mma.m64n24k256.ss.s32.b1.b1.and.popc")
    assert b1.opcode == "wgmma.mma_async.sync.aligned.m64n24k256.s32.b1.b1.and.popc"
    assert wgmma_form("sm90.mma.m64n8k32.ss.f16.e5m2.e4m3").k == 32
    assert wgmma_form("sm90.mma.m64n8k8.rs.f32.tf32.tf32").k == 8


def test_names_are_unique_and_resolve() -> None:
    names = [f.name for f in FORMS]
    assert len(set(names)) == len(names)
    assert all(wgmma_form(n).name == n for n in names)
    with pytest.raises(WgmmaFormError, match="unknown WGMMA atom"):
        wgmma_form("sm90.mma.m64n40k32.ss.s32.s8.s8")


def test_interfaces() -> None:
    f = wgmma_form(SS_F16)
    assert isinstance(f, MmaAtom) and isinstance(f, SmemDescriptorAtom)
    assert interfaces_of(f) == ("MmaAtom", "SmemDescriptorAtom")
    assert f.mnemonic == "sm90.mma" and f.feature == "wgmma" and f.shape_mnk == f.shape


# --------------------------------------------------------------------------- lattice


def test_lattice() -> None:
    by = collections.defaultdict(set)
    for f in FORMS:
        by[f.family].add(f.n)
        assert f.m == 64 and f.k * f.a.pack_bits == 256
    steps8 = set(range(8, 257, 8))
    steps16 = {8, 16, 24, *range(32, 257, 16)}
    assert by == {"f16": steps8, "bf16": steps8, "tf32": steps8, "fp8": steps8,
                  "int8": steps16, "b1": steps16}
    assert not any(f.a.name in ("s4", "u4") for f in FORMS)
    assert {f.bop for f in FORMS} == {None, "and.popc"}


def test_accumulators_and_counts() -> None:
    accs = collections.defaultdict(set)
    for f in FORMS:
        accs[f.family].add(f.d.name)
    assert accs == {"f16": {"f16", "f32"}, "bf16": {"f32"}, "tf32": {"f32"},
                    "fp8": {"f16", "f32"}, "int8": {"s32"}, "b1": {"s32"}}
    # per N: f16 2, bf16 1, tf32 1, fp8 8 (4 pairs x 2 accs), int8 8 (4 pairs x satfinite),
    # b1 1; each in ss and rs.
    assert len(FORMS) == 2 * (32 * (2 + 1 + 1 + 8) + 18 * (8 + 1))
    assert {f.satfinite for f in FORMS if f.family == "int8"} == {False, True}
    assert not any(f.satfinite for f in FORMS if f.family != "int8")
    assert {f.min_ptx for f in FORMS if f.mixed_integer} == {(8, 4)}


# --------------------------------------------------------------------------- registers


def test_register_counts_errata_1b() -> None:
    f = wgmma_form(SS_F16)
    assert (f.registers("D"), f.register_type("D")) == (64, "f32")  # not the seed's 32
    assert (f.registers("A"), f.register_type("A")) == (1, "b64")
    assert (f.registers("B"), f.register_type("B")) == (1, "b64")
    rs = wgmma_form("sm90.mma.m64n128k16.rs.f32.f16.f16")
    assert (rs.registers("A"), rs.register_type("A")) == (4, "b32")
    h = wgmma_form("sm90.mma.m64n128k16.ss.f16.f16.f16")
    assert (h.registers("D"), h.register_type("D")) == (32, "b32")
    i = wgmma_form("sm90.mma.m64n256k32.ss.s32.s8.s8")
    assert (i.registers("D"), i.register_type("D")) == (128, "b32")
    with pytest.raises(WgmmaFormError):
        f.registers("E")


@pytest.mark.parametrize("form", FORMS[::37], ids=lambda f: f.name)
def test_register_rule(form: WgmmaForm) -> None:
    assert form.registers("D") == form.n // (2 if form.d.pack_bits == 32 else 4)
    assert form.registers("A") == (4 if form.a_source == "rs" else 1)


# --------------------------------------------------------------------------- immediates


def test_immediates() -> None:
    imm = {(f.family, f.a_source): f.immediates for f in FORMS}
    full = ("scale_a", "scale_b", "trans_a", "trans_b")
    assert imm[("f16", "ss")] == imm[("bf16", "ss")] == full
    assert imm[("f16", "rs")] == imm[("bf16", "rs")] == ("scale_a", "scale_b", "trans_b")
    for fam in ("tf32", "fp8"):
        assert imm[(fam, "ss")] == imm[(fam, "rs")] == ("scale_a", "scale_b")
    for fam in ("int8", "b1"):
        assert imm[(fam, "ss")] == imm[(fam, "rs")] == ()


def test_instruction_text() -> None:
    f = wgmma_form(SS_F16)
    d = [f"%f{i}" for i in range(64)]
    text = f.instruction(d, "%rd0", "%rd1", "%p0", 1, -1, 0, 1)
    assert text.startswith("wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 {%f0, ")
    assert text.endswith("%f63}, %rd0, %rd1, %p0, 1, -1, 0, 1;")
    rs = wgmma_form("sm90.mma.m64n8k32.rs.s32.u8.s8")
    assert rs.instruction("{%r0, %r1, %r2, %r3}", ["%r4", "%r5", "%r6", "%r7"], "%rd1",
                          "%p0") == ("wgmma.mma_async.sync.aligned.m64n8k32.s32.u8.s8 "
                                     "{%r0, %r1, %r2, %r3}, {%r4, %r5, %r6, %r7}, %rd1, %p0;")


@pytest.mark.parametrize(("args", "match"), [
    ((1, 1, 0), "takes 4 immediates"),
    ((1, 1, 0, 0, 0), "takes 4 immediates"),
    ((2, 1, 0, 0), "scale_a must be 1 or -1"),
    ((1, 1, -1, 0), "trans_a must be 0 or 1"),
])
def test_instruction_rejects_bad_immediates(args, match) -> None:
    f = wgmma_form(SS_F16)
    with pytest.raises(WgmmaFormError, match=match):
        f.instruction("{}", "%rd0", "%rd1", "%p0", *args)


def test_instruction_rejects_bad_vectors() -> None:
    f = wgmma_form(SS_F16)
    with pytest.raises(WgmmaFormError, match="D takes 64 registers, got 32"):
        f.instruction([f"%f{i}" for i in range(32)], "%rd0", "%rd1", "%p0", 1, 1, 0, 0)
    with pytest.raises(WgmmaFormError, match="64-bit descriptor"):
        f.instruction("{}", ["%r0"], "%rd1", "%p0", 1, 1, 0, 0)
    rs = wgmma_form("sm90.mma.m64n128k8.rs.f32.tf32.tf32")
    with pytest.raises(WgmmaFormError, match="A takes 4 registers, got 2"):
        rs.instruction("{}", ["%r0", "%r1"], "%rd1", "%p0", 1, 1)
    with pytest.raises(WgmmaFormError, match="takes 0 immediates"):
        wgmma_form("sm90.mma.m64n64k32.ss.s32.s8.s8").instruction("{}", "%rd0", "%rd1", "%p0", 1)


# --------------------------------------------------------------------------- rows


@pytest.mark.parametrize(("change", "match"), [
    ({"m": 128}, "M = 128"),
    ({"k": 32}, "K = 32"),
    ({"n": 12}, "N = 12"),
    ({"n": 264}, "N = 264"),
    ({"a_source": "ts"}, "A source"),
    ({"satfinite": True}, "satfinite"),
    ({"bop": "and.popc"}, "bop"),
    ({"d": dtype("s32")}, None),  # s32 is an accumulator type; the pair rules live in FORMS
])
def test_rows_check_themselves(change, match) -> None:
    base = wgmma_form(SS_F16)
    if match is None:
        dataclasses.replace(base, **change)
        return
    with pytest.raises(WgmmaFormError, match=match):
        dataclasses.replace(base, **change)


def test_b1_rows_need_and_popc() -> None:
    b1 = wgmma_form("sm90.mma.m64n64k256.ss.s32.b1.b1.and.popc")
    for bop in (None, "xor.popc"):
        with pytest.raises(WgmmaFormError, match="bop"):
            dataclasses.replace(b1, bop=bop)


# --------------------------------------------------------------------------- availability


def test_available_only_on_sm90a() -> None:
    f = wgmma_form(SS_F16)
    assert f.available_on("sm_90a")
    for t in ("sm_80", "sm_89", "sm_90", "sm_100a", "sm_100f", "sm_110a", "sm_120a"):
        assert not f.available_on(t), t
    assert f.ptx_version_for("sm_90a") == (8, 0)
    assert wgmma_form("sm90.mma.m64n64k32.ss.s32.u8.s8").ptx_version_for("sm_90a") == (8, 4)


# --------------------------------------------------------------------------- verifier


@pytest.mark.parametrize("form", FORMS[::29], ids=lambda f: f.name)
def test_canonical_use_verifies(form: WgmmaForm) -> None:
    form.verify_instance("sm_90a", _use(form, shape=form.shape))
    verify_atom_instance(form, "sm_90a", _use(form))


def test_diagnostic_strings_byte_for_byte() -> None:
    assert sm90.WGMMA_INT8_TYPES == "expects A/B of type s8/u8 and D of type i32"
    assert sm90.WGMMA_INT4_TYPES == "expects A/B of type s4/u4 and D of type i32"
    assert sm90.WGMMA_B1_TYPES == "expects A/B of type u1 and D of type i32"
    assert sm90.WGMMA_FP8_TYPES == "expects A/B of the e5m2/e4m3 type"


def test_int8_pair_diagnostic() -> None:
    f = wgmma_form("sm90.mma.m64n64k32.ss.s32.s8.s8")
    assert _err(f, _use(f, b="f16")) == sm90.WGMMA_INT8_TYPES
    assert _err(f, _use(f, d="f32")) == sm90.WGMMA_INT8_TYPES
    assert _err(f, _use(f, a="e4m3")) == sm90.WGMMA_INT8_TYPES


@pytest.mark.parametrize(("a", "b"), [("s4", "s4"), ("u4", "s4"), ("s8", "u4"), ("f16", "s4")])
def test_int4_diagnostic_always_fires(a: str, b: str) -> None:
    for f in (wgmma_form("sm90.mma.m64n64k32.ss.s32.s8.s8"), wgmma_form(SS_F16)):
        assert _err(f, _use(f, a=a, b=b, d="s32")) == sm90.WGMMA_INT4_TYPES


def test_b1_diagnostic() -> None:
    f = wgmma_form("sm90.mma.m64n64k256.ss.s32.b1.b1.and.popc")
    assert _err(f, _use(f, d="f32")) == sm90.WGMMA_B1_TYPES
    assert _err(f, _use(f, b="f16")) == sm90.WGMMA_B1_TYPES


def test_fp8_diagnostic() -> None:
    f = wgmma_form("sm90.mma.m64n64k32.ss.f32.e4m3.e5m2")
    assert _err(f, _use(f, b="f16")) == sm90.WGMMA_FP8_TYPES
    assert _err(f, _use(f, a="bf16")) == sm90.WGMMA_FP8_TYPES
    # the mixed FP8 pairs are legal; a mismatch against this form is a plain type error
    assert _err(f, _use(f, a="e5m2")) == \
        "expects operand a with element type e4m3, but get e5m2."


def test_other_verifier_failures() -> None:
    f = wgmma_form(SS_F16)
    assert "is not available on sm_90" in _err(f, _use(f), "sm_90")
    assert "is not available on sm_100a" in _err(f, _use(f), "sm_100a")
    assert "has shape (64, 128, 16), but the use has shape (64, 64, 16)" in \
        _err(f, _use(f, shape=(64, 64, 16)))
    assert _err(f, _use(f, d="f16")) == "expects operand c with element type f32, but get f16."
    assert _err(f, _use(f, a_res="rmem")) == \
        f"atom '{SS_F16}' expects A in smem_desc_view, but got rmem"
    assert "expects B in smem_desc_view, but got rmem" in _err(f, _use(f, b_res="rmem"))
    rs = wgmma_form("sm90.mma.m64n128k16.rs.f32.f16.f16")
    assert "expects A in rmem, but got smem_desc_view" in _err(rs, _use(rs, a_res="smem_desc_view"))
