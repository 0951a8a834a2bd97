"""The WGMMA emitter (nvatom.ptx.wgmma_emit): the checked fence -> mma_async -> commit_group
-> wait_group protocol, CUTLASS-style inline asm, and the shared-memory test kernel.

* protocol: legal sequences pass and emit what they record; each misuse raises;
* inline asm: operands numbered 0..n-1 with one constraint each, the CUTLASS constraints
  (``+f``/``+r``, ``l``, ``r``, ``n``), and the template assembles on sm_90a once registers
  and immediates are substituted;
* the test kernel assembles on sm_90a for N in {8, 64, 128, 256}, every swizzle and 1 or 3
  K steps, with no local memory; its per-step descriptors, read through a model of the
  hardware's address generation (canonical layout of the descriptor, swizzle on absolute
  byte addresses), address exactly the tile's K-block elements.
"""

from __future__ import annotations

import itertools
import re

import pytest

from nvatom.atoms.sm90 import FORMS, wgmma_form
from nvatom.atoms.smem import smem_swizzle
from nvatom.descriptors.wgmma import DescriptorError, canonical_wgmma_layout, check_desc_matches
from nvatom.layout import ComposedLayout
from nvatom.ptx.builder import Kernel, Module
from nvatom.ptx.wgmma_emit import (
    WgmmaEmitError,
    WgmmaProtocolError,
    WgmmaSequence,
    build_wgmma_test_module,
    emit_scale_d,
    emit_wgmma,
    inline_asm,
    wgmma_test_plan,
)
from nvatom.runtime.ptxas import assemble

SS = "sm90.mma.m64n64k16.ss.f32.f16.f16"
SWIZZLES = ("SW128", "SW64", "SW32", "INTERLEAVE")


def _kernel_with_regs(form_name: str) -> tuple[Module, Kernel, list, object, object]:
    form = wgmma_form(form_name)
    mod = Module("sm_90a", features=["wgmma"], version=form.ptx_version_for("sm_90a"))
    k = mod.kernel("t")
    d = k.regs(form.register_type("D"), form.registers("D"))
    a = k.regs("b32", 4) if form.a_source == "rs" else k.reg("b64")
    b = k.reg("b64")
    for r in d:
        k.ins(f"mov.{'f32' if r.type == 'f32' else 'b32'}", r,
              "0f00000000" if r.type == "f32" else 0)
    for r in (a if isinstance(a, list) else [a]) + [b]:
        k.ins(f"mov.{r.type}", r, 0)
    return mod, k, d, a, b


# ------------------------------------------------------------------------- protocol


def test_sequence_emits_in_order_and_assembles() -> None:
    mod, k, d, a, b = _kernel_with_regs(SS)
    form = wgmma_form(SS)
    seq = WgmmaSequence(k)
    seq.write(d)
    p = emit_scale_d(k, 1)
    seq.fence()
    seq.mma(form, d, a, b, p)
    seq.mma(form, d, a, b, p)
    seq.commit()
    seq.wait(0)
    seq.read(d)
    seq.finish()
    assert seq.log == ["write", "fence", "mma_async", "mma_async", "commit_group",
                       "wait_group 0", "read"]
    text = mod.emit()
    order = [m.group(0) for m in re.finditer(
        r"setp\.ne\.b32|wgmma\.(fence|mma_async|commit_group|wait_group)", text)]
    assert order == ["setp.ne.b32", "wgmma.fence", "wgmma.mma_async", "wgmma.mma_async",
                     "wgmma.commit_group", "wgmma.wait_group"]
    assert "wgmma.wait_group.sync.aligned 0;" in text
    assemble(text, "sm_90a")


def test_mma_before_fence() -> None:
    seq = WgmmaSequence()
    with pytest.raises(WgmmaProtocolError, match="without a wgmma.fence"):
        seq.mma(wgmma_form(SS), [f"%f{i}" for i in range(32)], "%rd0", "%rd1", "%p0")


def test_write_after_fence_needs_another_fence() -> None:
    d = [f"%f{i}" for i in range(32)]
    seq = WgmmaSequence()
    seq.fence()
    seq.write(d)
    with pytest.raises(WgmmaProtocolError, match="fence"):
        seq.mma(wgmma_form(SS), d, "%rd0", "%rd1", "%p0")


@pytest.mark.parametrize("stop", ["mma", "commit", "wait1"])
def test_reading_accumulators_too_early(stop: str) -> None:
    d = [f"%f{i}" for i in range(32)]
    seq = WgmmaSequence()
    seq.fence()
    seq.mma(wgmma_form(SS), d, "%rd0", "%rd1", "%p0")
    if stop != "mma":
        seq.commit()
    if stop == "wait1":
        seq.wait(1)  # one group may stay pending: ours
    with pytest.raises(WgmmaProtocolError, match="before the wgmma is done"):
        seq.read(d)
    with pytest.raises(WgmmaProtocolError, match="unfinished"):
        seq.write(d)
    with pytest.raises(WgmmaProtocolError, match="pending"):
        seq.finish()


def test_wait_n_retires_older_groups() -> None:
    form = wgmma_form(SS)
    d0 = [f"%f{i}" for i in range(32)]
    d1 = [f"%f{i}" for i in range(32, 64)]
    seq = WgmmaSequence()
    seq.fence()
    seq.mma(form, d0, "%rd0", "%rd1", "%p0")
    seq.commit()
    seq.mma(form, d1, "%rd0", "%rd1", "%p0")
    seq.commit()
    assert seq.pending_groups == 2
    seq.wait(1)
    seq.read(d0)  # the older group is retired
    with pytest.raises(WgmmaProtocolError):
        seq.read(d1)
    seq.wait(0)
    seq.read(d1)
    seq.finish()


def test_commit_and_wait_misuse() -> None:
    seq = WgmmaSequence()
    with pytest.raises(WgmmaProtocolError, match="no mma_async"):
        seq.commit()
    seq.fence()
    seq.mma(wgmma_form(SS), [f"%f{i}" for i in range(32)], "%rd0", "%rd1", "%p0")
    with pytest.raises(WgmmaProtocolError, match="uncommitted"):
        seq.wait(0)
    with pytest.raises(WgmmaEmitError):
        seq.wait(-1)


def test_emit_checks_operands() -> None:
    _, k, d, a, b = _kernel_with_regs(SS)
    form = wgmma_form(SS)
    p = emit_scale_d(k, 0)
    with pytest.raises(WgmmaEmitError, match="32"):
        emit_wgmma(k, form, d[:-1], a, b, p)
    with pytest.raises(WgmmaEmitError, match="predicate"):
        emit_wgmma(k, form, d, a, b, d[0])
    with pytest.raises(WgmmaEmitError, match="descriptor"):
        emit_wgmma(k, form, d, [a], b, p)
    rs = wgmma_form("sm90.mma.m64n64k16.rs.f32.f16.f16")
    with pytest.raises(WgmmaEmitError):
        emit_wgmma(k, rs, d, a, b, p)


# ------------------------------------------------------------------------- inline asm


def _pick_forms() -> list:
    names = ["sm90.mma.m64n128k16.ss.f32.f16.f16", "sm90.mma.m64n64k16.rs.f32.bf16.bf16",
             "sm90.mma.m64n8k16.ss.f16.f16.f16", "sm90.mma.m64n64k8.ss.f32.tf32.tf32",
             "sm90.mma.m64n256k32.rs.f32.e4m3.e5m2", "sm90.mma.m64n32k32.ss.s32.s8.s8",
             "sm90.mma.m64n16k256.rs.s32.b1.b1.and.popc"]
    return [wgmma_form(n) for n in names]


def test_inline_asm_cutlass_constraints() -> None:
    ia = inline_asm(wgmma_form("sm90.mma.m64n128k16.ss.f32.f16.f16"))
    c = ia.constraint_list
    assert c == ("+f",) * 64 + ("l", "l", "r", "n", "n", "n", "n")
    assert "setp.ne.b32 p, %66, 0;" in ia.template
    assert "%64, %65, p, %67, %68, %69, %70;" in ia.template
    assert (ia.outputs, ia.inputs) == (64, 7)
    rs = inline_asm(wgmma_form("sm90.mma.m64n64k16.rs.f16.f16.f16"))
    assert rs.constraint_list == ("+r",) * 16 + ("r",) * 4 + ("l", "r", "n", "n", "n")


@pytest.mark.parametrize("form", _pick_forms(), ids=lambda f: f.name)
def test_inline_asm_assembles(form) -> None:
    ia = inline_asm(form)
    nums = sorted({int(x) for x in re.findall(r"%(\d+)", ia.template)})
    assert nums == list(range(len(ia.constraint_list)))
    mod = Module("sm_90a", features=["wgmma"], version=form.ptx_version_for("sm_90a"))
    k = mod.kernel("asm")
    subst = []
    for c in ia.constraint_list:
        if c == "n":
            subst.append("1")
            continue
        r = k.reg({"f": "f32", "r": "b32", "l": "b64"}[c.lstrip("+")])
        k.ins(f"mov.{r.type}", r, "0f00000000" if r.type == "f32" else 0)
        subst.append(r.name)
    imm_names = list(form.immediates)
    text = ia.template
    for i in reversed(range(len(subst))):
        val = subst[i]
        if ia.constraint_list[i] == "n":
            what = imm_names[i - (len(subst) - len(imm_names))]
            val = "0" if what.startswith("trans") else "1"
        text = text.replace(f"%{i}", val)
    k.ins("wgmma.fence.sync.aligned")
    k.raw(text.splitlines())
    k.ins("wgmma.commit_group.sync.aligned")
    k.ins("wgmma.wait_group.sync.aligned 0")
    assemble(mod.emit(), "sm_90a")


def test_every_form_has_a_consistent_template() -> None:
    for f in FORMS:
        ia = inline_asm(f)
        assert len(ia.constraint_list) == ia.outputs + ia.inputs
        assert ia.outputs == f.registers("D")
        assert ia.constraint_list.count("n") == len(f.immediates)


# ------------------------------------------------------------------------- test kernel


def _hw_addresses(desc, bits: int, mn: int, k: int) -> dict:
    """Model: byte address of (i, j) = swizzle_bytes(start + canonical offset(i, j))."""
    canon = canonical_wgmma_layout(dataclasses_replace_start(desc), bits, "K", mn)
    outer = canon.outer if isinstance(canon, ComposedLayout) else canon
    sw = desc.layout_type.swizzle
    return {(i, j): sw(desc.start_address + outer((i, j)) * bits // 8)
            for i in range(mn) for j in range(k)}


def dataclasses_replace_start(desc):
    import dataclasses

    return dataclasses.replace(desc, start_address=0)


@pytest.mark.parametrize("n,swizzle,k_steps",
                         list(itertools.product([8, 64, 256], SWIZZLES, [1, 3])))
def test_step_descriptors_address_the_k_blocks(n: int, swizzle: str, k_steps: int) -> None:
    plan = wgmma_test_plan(wgmma_form(f"sm90.mma.m64n{n}k16.ss.f32.f16.f16"), swizzle, k_steps)
    for tile, descs, mn in ((plan.a_smem, plan.a_descs, 64), (plan.b_smem, plan.b_descs, n)):
        assert len(descs) == k_steps
        for s, desc in enumerate(descs):
            assert desc.layout_type is smem_swizzle(swizzle)
            got = _hw_addresses(desc, 16, mn, 16)
            for (i, j), addr in got.items():
                assert addr == tile((i, 16 * s + j)) * 2, (s, i, j)
        check_desc_matches(descs[0], tile, 16, "K")


def test_mismatched_descriptor_is_rejected_and_addresses_differ() -> None:
    form = wgmma_form("sm90.mma.m64n64k16.ss.f32.f16.f16")
    plan = wgmma_test_plan(form, "SW128", 1, b_desc_swizzle="SW64")
    with pytest.raises(DescriptorError):
        check_desc_matches(plan.b_descs[0], plan.b_smem, 16, "K")
    got = _hw_addresses(plan.b_descs[0], 16, 64, 16)
    assert any(addr != plan.b_smem((i, j)) * 2 for (i, j), addr in got.items())


@pytest.mark.parametrize("dtype", ["f16", "bf16"])
@pytest.mark.parametrize("n", [8, 64, 128, 256])
@pytest.mark.parametrize("swizzle", SWIZZLES)
@pytest.mark.parametrize("k_steps", [1, 3])
def test_test_kernel_assembles(dtype: str, n: int, swizzle: str, k_steps: int) -> None:
    form = wgmma_form(f"sm90.mma.m64n{n}k16.ss.f32.{dtype}.{dtype}")
    text = build_wgmma_test_module(form, swizzle, k_steps).emit()
    assert text.count("wgmma.mma_async") == k_steps
    assert text.count("setp.ne.b32") == (2 if k_steps > 1 else 1)
    assert "fence.proxy.async.shared::cta" in text
    res = assemble(text, "sm_90a")
    kr = res.kernels["wgmma_test"]
    assert kr.stack_frame == 0 and kr.spill_stores == 0
    assert kr.shared_bytes == (64 + n) * wgmma_test_plan(form, swizzle, k_steps).k_smem * 2


def test_test_kernel_rejects_bad_k_steps() -> None:
    with pytest.raises(WgmmaEmitError):
        build_wgmma_test_module(SS, "SW128", 0)


# ------------------------------------------------------------------------- other families


def _gpu_cases() -> list[tuple[str, str, int, dict]]:
    """Every kernel tests/gpu/test_wgmma_gpu.py builds beyond the f16/bf16 K-major ones."""
    out: list[tuple[str, str, int, dict]] = []
    two = ("SW128", "SW32")
    for n, sw, ks in itertools.product([8, 64, 256], two, [1, 3]):
        out.append((f"sm90.mma.m64n{n}k8.ss.f32.tf32.tf32", sw, ks, {}))
    fp8 = ("e4m3", "e5m2")
    for x, y, acc, n, sw in itertools.product(fp8, fp8, ["f32", "f16"], [8, 64, 256], two):
        out.append((f"sm90.mma.m64n{n}k32.ss.{acc}.{x}.{y}", sw, 2, {}))
    i8 = ("s8", "u8")
    for x, y, n, sw in itertools.product(i8, i8, [8, 16, 24, 64, 256], (*two, "INTERLEAVE")):
        out.append((f"sm90.mma.m64n{n}k32.ss.s32.{x}.{y}", sw, 2, {}))
    for x, y, sf, n in itertools.product(i8, i8, ["", ".satfinite"], [24, 64]):
        out.append((f"sm90.mma.m64n{n}k32.ss{sf}.s32.{x}.{y}", "SW128", 1, {"load_c": True}))
    for n, sw, ks in itertools.product([8, 16, 24, 64, 256], two, [1, 2]):
        out.append((f"sm90.mma.m64n{n}k256.ss.s32.b1.b1.and.popc", sw, ks, {}))
    out.append(("sm90.mma.m64n64k16.ss.f32.f16.f16", "SW128", 2, {"load_c": True}))
    rs = ["f32.f16.f16", "f16.f16.f16", "f32.bf16.bf16", "f32.tf32.tf32", "f32.e4m3.e5m2",
          "f16.e5m2.e4m3", "s32.s8.u8", "s32.u8.u8", "s32.s8.s8"]
    for types, n, sw in itertools.product(rs, [8, 64, 256], two):
        bits = {"f16": 16, "bf16": 16, "tf32": 32}.get(types.split(".")[1], 8)
        n = 24 if types.startswith("s32") and n == 64 else n
        out.append((f"sm90.mma.m64n{n}k{256 // bits}.rs.{types}", sw, 2, {}))
    for dt, majors, n, sw in itertools.product(
            ("f16", "bf16"), (("MN", "K"), ("K", "MN"), ("MN", "MN")), (8, 64, 256),
            ("SW128", "SW32", "INTERLEAVE")):
        span = smem_swizzle(sw).row_bytes // 2
        if (majors[0] == "MN" and 64 % span) or (majors[1] == "MN" and n % span):
            continue
        out.append((f"sm90.mma.m64n{n}k16.ss.f32.{dt}.{dt}", sw, 2,
                    {"a_major": majors[0], "b_major": majors[1]}))
    for types, sw in itertools.product(["f32.f16.f16", "f16.f16.f16", "f32.bf16.bf16"], two):
        out.append((f"sm90.mma.m64n64k16.rs.{types}", sw, 2, {"b_major": "MN"}))
    return out


def _case_id(c: tuple) -> str:
    name, sw, ks, kw = c
    extra = "-".join(f"{k}={v}" for k, v in sorted(kw.items()))
    return f"{name.removeprefix('sm90.mma.')}-{sw}-k{ks}" + (f"-{extra}" if extra else "")


@pytest.mark.parametrize("case", _gpu_cases(), ids=_case_id)
def test_new_test_kernels_assemble(case: tuple) -> None:
    name, sw, ks, kw = case
    form = wgmma_form(name)
    plan = wgmma_test_plan(form, sw, ks, **kw)
    text = build_wgmma_test_module(form, sw, ks, **kw).emit()
    assert text.count("wgmma.mma_async") == ks
    # the fence comes after every write of the accumulators and of the A registers
    fence = text.index("wgmma.fence")
    assert fence > max(m.start() for m in re.finditer(r"(ld|mov)\.[^\n]*%(f|r)", text[:fence])
                       ) if form.a_source == "rs" else True
    imm = text.split("wgmma.mma_async")[1].split(";")[0].split(",")
    if form.immediates:
        got = [int(x) for x in imm[-len(form.immediates):]]
        assert got == list(plan.imm)
        for w, v in zip(form.immediates, got, strict=True):
            if w == "trans_a":
                assert v == (kw.get("a_major") == "MN")
            if w == "trans_b":
                assert v == (kw.get("b_major") == "MN")
    res = assemble(text, "sm_90a")
    kr = res.kernels["wgmma_test"]
    assert kr.stack_frame == 0 and kr.spill_stores == 0
    tiles = (64 if form.a_source == "ss" else 0) + form.n
    assert kr.shared_bytes == tiles * plan.k_smem * plan.esize


@pytest.mark.parametrize("bits", [8, 16, 32])
@pytest.mark.parametrize("k_steps", [1, 2])
def test_rs_fragment_offsets_follow_the_isa(bits: int, k_steps: int) -> None:
    """Thread t's register r covers elements a_coord(bits, t, r*p + j) of the global tile."""
    from nvatom.atoms.wgmma_fragments import a_coord
    from nvatom.ptx.wgmma_emit import a_fragment_offsets

    kt = 256 // bits * k_steps
    thr, offs = a_fragment_offsets(bits, kt)
    p = 32 // bits
    for t in range(128):
        for r in range(4):
            for j in range(p):
                row, col = a_coord(bits, t, r * p + j)
                assert thr(t) + offs[r] + j == row * kt + col


def _hw_addresses_major(desc, bits: int, mn: int, k: int, major: str) -> dict:
    canon = canonical_wgmma_layout(dataclasses_replace_start(desc), bits, major, mn)
    outer = canon.outer if isinstance(canon, ComposedLayout) else canon
    sw = desc.layout_type
    return {(i, j): sw.swizzle(desc.start_address + outer((i, j)) * bits // 8)
            for i in range(mn) for j in range(k)}


@pytest.mark.parametrize("case", [c for c in _gpu_cases() if "ss" in c[0]], ids=_case_id)
def test_new_step_descriptors_address_the_k_blocks(case: tuple) -> None:
    """Every ss case (K- or MN-major, 8/16/32-bit and b1-as-bytes tiles): each step's
    descriptors, read through the hardware model, address the tile's K-block."""
    name, sw, ks, kw = case
    plan = wgmma_test_plan(wgmma_form(name), sw, ks, **kw)
    bits, kb = plan.lbits, plan.k_step
    for tile, descs, mn, major in ((plan.a_smem, plan.a_descs, 64, plan.a_major),
                                   (plan.b_smem, plan.b_descs, plan.form.n, plan.b_major)):
        assert len(descs) == ks
        check_desc_matches(descs[0], tile, bits, major)
        for s, desc in enumerate(descs):
            got = _hw_addresses_major(desc, bits, mn, kb, major)
            for (i, j), addr in got.items():
                assert addr * 8 == tile((i, kb * s + j)) * bits, (s, i, j)


def test_test_kernel_rejects_unsupported_options() -> None:
    with pytest.raises(WgmmaEmitError, match="MN-major"):
        build_wgmma_test_module("sm90.mma.m64n64k8.ss.f32.tf32.tf32", "SW128", 1, a_major="MN")
    with pytest.raises(WgmmaEmitError, match="trans-a"):
        build_wgmma_test_module("sm90.mma.m64n64k16.rs.f32.f16.f16", "SW128", 1, a_major="MN")
    with pytest.raises(WgmmaEmitError, match="MN-major tile"):
        build_wgmma_test_module("sm90.mma.m64n8k16.ss.f32.f16.f16", "SW128", 1, b_major="MN")
    with pytest.raises(WgmmaEmitError, match="'K' or 'MN'"):
        build_wgmma_test_module(SS, "SW128", 1, b_major="T")
