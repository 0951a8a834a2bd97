"""The TMA and copy forms of issue 16 lower to the PTX the PTX ISA spells and ptxas assembles:
the ``.shared::cta`` load destination, the bulk tensor prefetch, nvatom's own modes (im2col,
gather4, scatter4), the partition op, generic-address ldmatrix/stmatrix and the tiled copy.
(The negative cases: tests/ir/invalid_tma_forms.mlir; the GPU runs:
tests/gpu/test_ir_tma_forms_gpu.py.)"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from nvatom.atoms import tma as T
from nvatom.ir import driver
from nvatom.ir.generate_forms import TMA_FORMS
from nvatom.ir.lower import lower
from nvatom.runtime.ptxas import assemble

from .invariant import known

HERE = Path(__file__).parent

# file -> (target, instructions each must contain); spellings from the PTX ISA chapters
# "cp.async.bulk.tensor", "cp.async.bulk.prefetch.tensor", "prefetch", "ldmatrix", "stmatrix"
FORMS = {
    "tma_shared_cta.mlir": ("sm_90a", [
        "cp.async.bulk.tensor.2d.shared::cta.global.tile.mbarrier::complete_tx::bytes",
        # the partition's bytes: 64 x 64 f16
        r"mbarrier\.arrive\.expect_tx\.release\.cta\.shared::cta\.b64 _, \[%r\d+\], 8192;",
        "cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group"]),
    "tma_prefetch.mlir": ("sm_90a", [
        "prefetch.tensormap [",
        "createpolicy.fractional.L2::evict_last.b64",
        r"cp\.async\.bulk\.prefetch\.tensor\.2d\.L2\.global\.tile\.L2::cache_hint "
        r"\[%rd\d+, \{%r\d+, %r\d+\}\], %rd\d+;"]),
    "tma_forms_sm100.mlir": ("sm_100a", [
        # a column and four rows
        r"cp\.async\.bulk\.prefetch\.tensor\.2d\.L2\.global\.tile::gather4 "
        r"\[%rd\d+, \{%r\d+, %r\d+, %r\d+, %r\d+, %r\d+\}\];",
        "cp.async.bulk.tensor.2d.shared::cta.global.tile::gather4.mbarrier::complete_tx::bytes",
        # four rows of 64 f16
        r"mbarrier\.arrive\.expect_tx\.release\.cta\.shared::cta\.b64 _, \[%r\d+\], 512;",
        "cp.async.bulk.tensor.2d.global.shared::cta.tile::scatter4.bulk_group",
        "cp.async.bulk.prefetch.tensor.3d.L2.global.im2col::w.L2::cache_hint"]),
    "copy_forms.mlir": ("sm_90a", [
        "cvta.shared.u64", "ldmatrix.sync.aligned.m8n8.x4.b16 {",
        "stmatrix.sync.aligned.m8n8.x4.b16 [",
        "ld.global.v4.b32", "st.shared.v4.b32", "ld.shared.v4.b32", "st.global.v4.b32"]),
}


def _lower(name: str, target: str):
    mod = driver.parse((HERE / name).read_text(), name)
    return lower(mod, driver.verify(mod, target))


@pytest.mark.parametrize("name", list(FORMS))
def test_form_lowers_to_the_isa_spelling_and_assembles(name: str) -> None:
    target, lines = FORMS[name]
    out = _lower(name, target)
    for line in lines:  # a literal, or a pattern where registers are named
        assert line in out.ptx or re.search(line, out.ptx), line
    assert set(assemble(out.ptx, target).kernels) == {k.name for k in out.kernels}


def test_shared_cta_destination_needs_ptx_8_6() -> None:
    # ptxas 13.0: "Feature 'cp.async.bulk.tensor with destination state space as
    # .shared::cta' requires PTX ISA .version 8.6 or later" (also on sm_90)
    assert ".version 8.6" in _lower("tma_shared_cta.mlir", "sm_90a").ptx
    assert ".version 8.0" in _lower("tma_prefetch.mlir", "sm_90a").ptx
    assert ".version 8.6" in _lower("tma_shared_cta.mlir", "sm_90").ptx


def test_generic_matrix_copies_have_no_shared_state_space() -> None:
    ptx = _lower("copy_forms.mlir", "sm_90a").ptx
    assert "ldmatrix.sync.aligned.m8n8.x4.shared" not in ptx
    assert "stmatrix.sync.aligned.m8n8.x4.shared" not in ptx


def test_four_row_maps_have_a_one_row_box() -> None:
    # gather4/scatter4 read a 2-d map whose box is one row: each instruction names four rows
    out = _lower("tma_forms_sm100.mlir", "sm_100a")
    gs = next(k for k in out.kernels if k.name == "tma_gather_scatter")
    assert [t.box for t in gs.tma] == [(64, 1), (64, 1)]


def test_tiled_copy_threads_cover_the_tile_once() -> None:
    """The tiled copy's (thread, value) -> offset layout of the 32 x 16 tile: 128 threads x 4
    values reach each element once, and each thread's 4 values are contiguous (one 128-bit
    access)."""
    mod = driver.parse((HERE / "copy_forms.mlir").read_text(), "copy_forms.mlir")
    ctx = driver.verify(mod, "sm_90a")
    op = next(o for o in mod.walk() if o.name == "cute_nvgpu.tiled_copy.copy")
    _, (tv, _) = ctx.facts[op]
    offsets = [tv(t, v) for t in range(128) for v in range(4)]
    assert sorted(offsets) == list(range(512))
    for t in range(128):
        first = tv(t, 0)
        assert [tv(t, v) for v in range(4)] == list(range(first, first + 4))
        assert first % 4 == 0


def test_the_partition_op_takes_one_mode() -> None:
    text = ("func.func @k(%src: !cute.ptr<f16, gmem>, %n: i32, %m: i32, %ld: i32) {\n"
            "  %gl = cute.static : !cute.layout<(n,m):(1,ld)>\n"
            "  %d = nv_tileas.make_tiled_tma_desc %src, %gl shapes(%n, %m) strides(%ld) "
            "paddings() {mode = #cute_nvgpu.tma_load_mode<tiled>, elementBitWidth = 16} : "
            "!cute_nvgpu.tma_descriptor_tiled\n"
            "  %tile = cute.static : !cute.composed_layout<Sw<3,4,3> o 0 o (8,64):(64,1)>\n"
            "  %vmap = cute.static : !cute.layout<(8,64):(1@1,1@0)>\n"
            "  %a = cute_nvgpu.atom.tma_partition %d, %tile, %vmap {num_multicast = 1}\n"
            "  func.return\n}\n")
    with pytest.raises(driver.IRError, match="takes exactly one of tma_load_mode, "
                                             "tma_store_mode or kind"):
        driver.parse(text, "k.mlir")


def test_the_generated_tma_forms_cover_every_mode_and_reduction() -> None:
    from nvatom.ir import types as TY

    spelled = {(f.op, f.mode) for f in TMA_FORMS}
    assert {("load", m) for m in TY.LOAD_MODES} <= spelled
    assert {("prefetch", m) for m in TY.LOAD_MODES} <= spelled
    assert {("store", m) for m in TY.STORE_MODES} <= spelled
    assert {("reduce", k) for k in TY.REDUCE_KINDS} <= spelled
    assert {f.dst_space for f in TMA_FORMS if f.op == "load"} == {None, "shared::cta"}
    # every mode enum member has an IR spelling (nvatom's own values included)
    assert set(TY.LOAD_MODES.values()) == set(T.TmaLoadMode)
    assert set(TY.STORE_MODES.values()) == set(T.TmaStoreMode)


@pytest.mark.parametrize("target", ["sm_90a", "sm_100a"])
def test_every_tma_form_that_verifies_assembles(target: str) -> None:
    """Every generated TMA form (nvatom.ir.generate_forms.TMA_FORMS) that verifies on the
    target, as one module of one kernel per form: one ptxas call (the invariant sweep checks
    every target; this pins each PTX spelling in CI)."""
    from nvatom.arch import target as tgt
    from nvatom.atoms.registry import family
    from nvatom.ir.generate_forms import tma_use

    fam = family("tma")
    bodies = []
    for i, form in enumerate(TMA_FORMS):
        text = tma_use(fam, form, tgt(target))
        try:
            driver.verify(driver.parse(text, form.name), target)
        except driver.IRError as e:  # a rejection must carry a known diagnostic
            assert known(str(e)), (form.name, str(e))
            continue
        body = text.split("{\n", 1)[1].rsplit("}\n", 1)[0]  # the func.func
        bodies.append(body.replace("func.func @use(", f"func.func @form{i}(", 1))
    assert len(bodies) >= (18 if target == "sm_90a" else 33)
    mod = driver.parse("".join(bodies), f"tma_forms_{target}.mlir")
    out = lower(mod, driver.verify(mod, target))
    assert len(assemble(out.ptx, target).kernels) == len(bodies)


def test_the_emitters_refuse_forms_ptxas_has_not() -> None:
    from nvatom.ptx import tma_emit as TE
    from nvatom.ptx.builder import Module

    k = Module("sm_90a").kernel("k")
    with pytest.raises(TE.TmaEmitError, match="into shared::cta cannot multicast"):
        TE.tma_load(k, "%r1", "%rd1", ["%r2", "%r3"], "%r4", multicast_mask="%h1",
                    dst_space="shared::cta")
    with pytest.raises(TE.TmaEmitError, match="writes shared::cluster or shared::cta"):
        TE.tma_load(k, "%r1", "%rd1", ["%r2", "%r3"], "%r4", dst_space="global")
    with pytest.raises(TE.TmaEmitError, match="im2col on a rank-3 tensor takes 1 offsets"):
        TE.tma_prefetch(k, "%rd1", ["%r2", "%r3", "%r4"], mode=".im2col")
    with pytest.raises(TE.TmaEmitError, match="not available on sm_90a"):
        TE.tma_prefetch(k, "%rd1", ["%r2"] * 5, mode=".tile::gather4", target="sm_90a")
