"""The PTX builder: declarations, versions, errors, and what ptxas makes of the text."""

from __future__ import annotations

import pytest

from nvatom.ptx.builder import Module, PtxBuildError
from nvatom.runtime.ptxas import assemble


def _saxpy(target: str) -> Module:
    mod = Module(target)
    k = mod.kernel("saxpy")
    px, py = k.param("x"), k.param("y")
    pa = k.param("a", "f32")
    x, y = k.ld_param(px), k.ld_param(py)
    a = k.ld_param(pa)
    tid = k.reg("u32")
    k.ins("mov.u32", tid, "%tid.x")
    off = k.reg("u64")
    k.ins("mul.wide.u32", off, tid, 4)
    gx, gy = k.reg("u64"), k.reg("u64")
    k.ins("cvta.to.global.u64", gx, x)
    k.ins("cvta.to.global.u64", gy, y)
    k.ins("add.s64", gx, gx, off)
    k.ins("add.s64", gy, gy, off)
    vx, vy = k.reg("f32"), k.reg("f32")
    k.ins("ld.global.f32", vx, f"[{gx}]")
    k.ins("ld.global.f32", vy, f"[{gy}]")
    k.ins("fma.rn.f32", vy, a, vx, vy)
    p = k.reg("pred")
    k.ins("setp.lt.u32", p, tid, 1024)
    k.ins("st.global.f32", f"[{gy}]", vy, pred=str(p))
    return mod


@pytest.mark.parametrize("target", ["sm_75", "sm_80", "sm_90a", "sm_100a", "sm_120f"])
def test_builds_assemblable_ptx(target: str) -> None:
    mod = _saxpy(target)
    text = mod.emit()
    assert text.startswith(f".version {mod.version[0]}.{mod.version[1]}\n.target {target}\n")
    res = assemble(text, target)
    assert res.kernel("saxpy").registers > 0


def test_version_is_the_lowest_the_target_and_features_accept() -> None:
    assert Module("sm_80").version == (7, 0)
    assert Module("sm_89", features=["mma.fp8"]).version == (8, 4)
    assert Module("sm_90a", features=["wgmma"]).version == (8, 0)
    assert Module("sm_100f").version == (8, 8)


def test_feature_not_on_target_is_rejected() -> None:
    with pytest.raises(PtxBuildError, match="target sm_90 does not support 'wgmma'"):
        Module("sm_90", features=["wgmma"])


def test_register_classes_are_declared_once_with_counts() -> None:
    mod = Module("sm_80")
    k = mod.kernel("k")
    k.regs("f32", 3)
    k.reg("u32")
    k.reg("s32")
    k.reg("pred")
    text = mod.emit()
    assert "    .reg .f32 %f<3>;" in text
    assert "    .reg .b32 %r<2>;" in text
    assert "    .reg .pred %p<1>;" in text


def test_builder_errors_name_the_value() -> None:
    mod = Module("sm_80")
    k = mod.kernel("k")
    with pytest.raises(PtxBuildError, match="no PTX register type 'f128'"):
        k.reg("f128")
    k.param("x")
    with pytest.raises(PtxBuildError, match="already has a parameter 'x'"):
        k.param("x")
    k.label("L0")
    with pytest.raises(PtxBuildError, match="label 'L0' defined twice"):
        k.label("L0")
    with pytest.raises(PtxBuildError, match="already has a kernel 'k'"):
        mod.kernel("k")
    with pytest.raises(PtxBuildError, match="kernel name '2k'"):
        mod.kernel("2k")


def test_maxntid_is_emitted_and_accepted() -> None:
    mod = _saxpy("sm_80")
    mod.kernels[0].maxntid = (128, 1, 1)
    text = mod.emit()
    assert ".maxntid 128, 1, 1" in text
    assemble(text, "sm_80")


def test_tensor_map_param_dynamic_smem_and_cluster_directives_assemble() -> None:
    mod = Module("sm_90a")
    k = mod.kernel("k")
    tm = k.byte_param("tmap", 128, 64)
    k.reqntid = (384, 1, 1)
    k.maxnreg = 168
    k.reqnctapercluster = (2, 1, 1)
    dsm = k.dynamic_shared("dsmem")
    a = k.param_address(tm)
    r = k.reg("u32")
    k.ins("mov.u32", r, dsm)
    k.ins("prefetch.tensormap", f"[{a}]")
    done = k.fresh_label()
    k.bra(done, uni=True)
    k.label(done)
    text = mod.emit()
    assert "    .param .align 64 .b8 tmap[128]\n)\n.reqntid 384, 1, 1\n.maxnreg 168\n" in text
    assert ".reqnctapercluster 2, 1, 1" in text
    # dynamic shared memory is declared once, at module scope, before the kernels
    assert text.index(".extern .shared .align 1024 .b8 dsmem[];") < text.index(".entry k")
    assemble(text, "sm_90a")


def test_byte_param_and_dynamic_smem_errors() -> None:
    k = Module("sm_90a").kernel("k")
    with pytest.raises(PtxBuildError, match="alignment 48 must be"):
        k.byte_param("t", 128, 48)
    p = k.byte_param("t", 128, 64)
    with pytest.raises(PtxBuildError, match="'t' is a 128-byte array"):
        k.ld_param(p)
    k.dynamic_shared("d")
    with pytest.raises(PtxBuildError, match="already declares dynamic shared memory 'd'"):
        k.dynamic_shared("e")


def test_two_kernels_sharing_an_extern_name_must_agree() -> None:
    mod = Module("sm_90a")
    mod.kernel("a").dynamic_shared("d", align=16)
    mod.kernel("b").dynamic_shared("d", align=16)
    assert mod.emit().count(".extern .shared") == 1
    mod.kernel("c").dynamic_shared("d", align=128)
    with pytest.raises(PtxBuildError, match="'d' declared differently"):
        mod.emit()
