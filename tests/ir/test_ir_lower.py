"""The IR examples lower to PTX that ptxas assembles; the command line drives the same path.

The examples: the specification's TMA worked example (docs/spec-deviations.md#tma-worked-example), a
TMA load/store round trip, an sm80 mma.sync kernel, a WGMMA tile loop
(TMA + mbarriers + wgmma over K, sm_90a) and an SM120 block-scaled MMA (sm_120a)."""

from __future__ import annotations

from pathlib import Path

import pytest

from nvatom.cli import main
from nvatom.ir import driver
from nvatom.ir.lower import lower
from nvatom.runtime.ptxas import assemble

HERE = Path(__file__).parent

# file -> PTX lines each example must contain (spellings from the PTX ISA)
EXAMPLES = {
    "seed001_tma.mlir": [
        "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes",
        "mbarrier.arrive.expect_tx.release.cta.shared::cta.b64 _, [%r6], 1024;",
        "prefetch.tensormap", ".param .align 128 .b8 tmap0[128]", "cvta.param.u64"],
    "mma_sm80.mlir": ["mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32"],
    "mma_sm80_m16n8k8.mlir": ["mma.sync.aligned.m16n8k8.row.col.f16.f16.f16.f16"],
    "tma_copy.mlir": [
        "mbarrier.arrive.expect_tx.release.cta.shared::cta.b64 _, [%r6], 8192;",
        "cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group", "fence.proxy.async"],
    "wgmma_tile_loop.mlir": ["wgmma.fence.sync.aligned", "wgmma.commit_group.sync.aligned",
                             "wgmma.wait_group.sync.aligned 0",
                             "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3"],
    "tma_modes.mlir": [
        ".multicast::cluster.L2::cache_hint", "mov.b16 %h0, 3;",
        "createpolicy.fractional.L2::evict_last.b64", "createpolicy.fractional.L2::evict_first.b64",
        # two slices of 8 x 64 f16 land in each CTA of the mask
        "mbarrier.arrive.expect_tx.release.cta.shared::cta.b64 _, [%r6], 2048;",
        "cp.async.bulk.tensor.3d.global.shared::cta.im2col_no_offs.bulk_group.L2::cache_hint",
        "cp.reduce.async.bulk.tensor.2d.global.shared::cta.max.tile.bulk_group.L2::cache_hint"],
    "tma_sm100.mlir": [
        ".tile.mbarrier::complete_tx::bytes.cta_group::2",
        "cp.async.bulk.tensor.3d.shared::cluster.global.im2col::w.mbarrier::complete_tx::bytes",
        "cvt.u16.u32"],
    "tma_rebind.mlir": [
        "tensormap.replace.tile.global_dim.global.b1024.b32",
        "tensormap.replace.tile.global_address.global.b1024.b64",
        "tensormap.replace.tile.global_stride.global.b1024.b64",
        "fence.proxy.tensormap::generic.release.gpu",
        "fence.proxy.tensormap::generic.acquire.gpu"],
    "umma_sm100.mlir": [
        "tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32",
        "tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned",
        "tcgen05.mma.cta_group::1.kind::f8f6f4",
        "tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64",
        "tcgen05.ld.sync.aligned.32x32b.x64.b32", "tcgen05.wait::ld.sync.aligned",
        "tcgen05.dealloc.cta_group::1.sync.aligned.b32"],
    "tma_multicast.mlir": [
        ".reqnctapercluster 2, 1, 1", "mov.u32 %r9, %cluster_ctarank;",
        # slice k = popc(mask & ((1 << rank) - 1)): 32 of the box's 64 rows, 32 x 64 x 2 bytes
        "popc.b32 %r11, %r10;", "mad.lo.u32 %r12, %r11, 32, %r5;",
        "mad.lo.u32 %r13, %r11, 4096, %r8;",
        # every CTA's barrier expects the whole 64 x 64 bf16 box
        "mbarrier.arrive.expect_tx.release.cta.shared::cta.b64 _, [%r7], 8192;",
        ".multicast::cluster [%r13], [%rd5, {%r4, %r12}], [%r7], %h0;",
        "barrier.cluster.arrive.release.aligned;", "barrier.cluster.wait.acquire.aligned;"],
    "copy_pipeline.mlir": ["cp.async.cg.shared.global", "ldmatrix.sync.aligned.m8n8.x4",
                           "stmatrix.sync.aligned.m8n8.x2"],
    "sm120_block_scaled.mlir": [
        "mma.sync.aligned.m16n8k64.row.col.kind::mxf4nvf4.block_scale.scale_vec::4X"],
    # 2 (M) x 4 (N) repetitions of the atom, four K steps; %tid.x of 128 threads
    "tiled_gemm.mlir": ["mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32",
                        "%r0, 127;", "ld.global.b32", "st.global.f32"],
}


def _lower(name: str) -> tuple[driver.Module, object]:
    mod = driver.parse((HERE / name).read_text(), name)
    return mod, lower(mod, driver.verify(mod))


@pytest.mark.parametrize("name", list(EXAMPLES))
def test_example_lowers_and_assembles(name: str) -> None:
    _, out = _lower(name)
    for line in EXAMPLES[name]:
        assert line in out.ptx, line
    res = assemble(out.ptx, out.target)  # raises PtxasError with ptxas's message
    assert set(res.kernels) == {k.name for k in out.kernels}


def test_seed001_hoists_the_descriptor_with_the_partition_box() -> None:
    _, out = _lower("seed001_tma.mlir")
    (k,) = out.kernels
    assert k.params == ["ptr", "u32", "u32", "u32", "u32", "u32", "tma"]
    (t,) = k.tma
    # the 64-element (128-byte) inner box row, 8 rows; 128-byte swizzle
    # (docs/spec-deviations.md#tma-worked-example)
    assert (t.box, t.element_bits, t.swizzle_bytes, t.tensor_arg) == ((64, 8), 16, 128, 0)
    assert t.gmem_layout == "(n,m):(1,sn)"


def test_umma_issues_one_instruction_per_k_block_with_advanced_descriptors() -> None:
    from nvatom.descriptors.umma import k_block_descriptors
    from nvatom.layout import ComposedLayout

    _, out = _lower("umma_sm100.mlir")
    # a 128-element K tile of e4m3 is four K-blocks of the k32 atom; only the first
    # overwrites the accumulator (accumulate = false)
    mmas = [ln for ln in out.ptx.splitlines() if "tcgen05.mma" in ln]
    assert len(mmas) == 4 and len({m.split(",")[-1] for m in mmas[1:]}) == 1
    assert mmas[0].split(",")[-1] != mmas[1].split(",")[-1]
    # the descriptor words (start address 0, advanced 32 bytes per K-block) are added to the
    # shared address >> 4
    lay = ComposedLayout("Sw<3,4,3> o 0 o (128,128):(128,1)")
    for d in k_block_descriptors(lay, 8, "K", 4):
        assert f", {d.encode()};" in out.ptx
    assert out.kernels[0].threads == 128


def test_wgmma_loop_issues_one_instruction_per_k_block() -> None:
    _, out = _lower("wgmma_tile_loop.mlir")
    # a 128-element K tile of e4m3 is four K-blocks of the k32 atom
    assert out.ptx.count("wgmma.mma_async") == 4
    assert out.kernels[0].threads == 128


def test_wgmma_protocol_is_checked_when_lowering() -> None:
    text = (HERE / "wgmma_tile_loop.mlir").read_text().replace(
        "    cute_nvgpu.warpgroup.fence\n", "")
    mod = driver.parse(text, "nofence.mlir")
    with pytest.raises(driver.IRError, match="without a wgmma.fence before it"):
        lower(mod, driver.verify(mod))


def test_cli_verify_and_compile(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = str(HERE / "wgmma_tile_loop.mlir")
    assert main(["verify", src]) == 0
    out = tmp_path / "out.ptx"
    assert main(["compile", src, "--target", "sm_90a", "-o", str(out)]) == 0
    assert "wgmma.mma_async" in out.read_text()
    bad = str(HERE / "invalid_tma.mlir")
    assert main(["verify", bad, "--split-input-file"]) == 1
    err = capsys.readouterr().err
    assert f"{bad}:11:3: error: 'cute_nvgpu.atom.non_exec_tiled_tma_load' op invalid operand " \
           "types, got !cute.layout<(a,b,c,d,e,f),...>" in err
    assert "Traceback" not in err
    assert main(["verify", bad, "--verify-diagnostics"]) == 0
    assert main(["compile", bad, "-o", str(out)]) == 1


def test_cli_bad_file_and_target(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["verify", str(tmp_path / "missing.mlir")]) == 2
    assert "cannot read" in capsys.readouterr().err
    p = tmp_path / "k.mlir"
    p.write_text((HERE / "mma_sm80.mlir").read_text())
    assert main(["compile", str(p), "--target", "sm_75", "-o", "-"]) == 1
    assert "needs tier SM80, but target sm_75 is tier SM70/75" in capsys.readouterr().err
    p.write_text("func.func @k(%a: i32 {\n")
    assert main(["verify", str(p)]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"{p}:2:1: error: ") and "Traceback" not in err


def test_umma_operands_must_be_allocated_in_the_kernel() -> None:
    text = ("func.func @k(%a: !cute_nvgpu.smem_desc_view<f16, K, Sw<3,3,3> o 0 o (128,64):(64,1)>,"
            " %b: !cute_nvgpu.smem_desc_view<f16, K, Sw<3,3,3> o 0 o (256,64):(64,1)>,"
            " %d: !cute.memref<f32, tmem, (128,256):(256,1)>) {\n"
            "  %atom = cute_nvgpu.make_atom : "
            "!cute_nvgpu.sm100.mma<f16.cta1.m128n256k16.ss.f32.f16.f16>\n"
            "  cute_nvgpu.atom.mma %atom, %d, %a, %b, %d\n  func.return\n}\n")
    mod = driver.parse(text, "umma.mlir")
    ctx = driver.verify(mod, "sm_100a")
    # a TMEM accumulator is a cute.alloc_tmem buffer (umma_sm100.mlir), not an argument
    with pytest.raises(driver.IRError, match=r"argument #2 of type !cute.memref<f32, tmem, "
                       r"\(128,256\):\(256,1\)> has no PTX parameter form"):
        lower(mod, ctx)


def test_multicast_kernel_reports_its_cluster_and_slice_box() -> None:
    _, out = _lower("tma_multicast.mlir")
    (k,) = out.kernels
    assert k.cluster == (2, 1, 1)
    load, store = k.tma
    assert load.box == (64, 32)  # the slice: half of the 64-row box (innermost first)
    assert store.box == (64, 64)
    assert k.shared_bytes >= 64 * 64 * 2


def test_kernels_without_the_attribute_have_no_cluster() -> None:
    _, out = _lower("tma_copy.mlir")
    assert out.kernels[0].cluster is None
    assert ".reqnctapercluster" not in out.ptx


@pytest.mark.parametrize(("attr", "target", "msg"), [
    ("[0, 1, 1]", "sm_90a", "is not a list of 1 to 3 positive integers"),
    ('"2"', "sm_90a", "is not a list of 1 to 3 positive integers"),
    ("[1, 1, 1, 1]", "sm_90a", "is not a list of 1 to 3 positive integers"),
    ("[4, 4]", "sm_90a", "a cluster of (4, 4, 1) has more than 8 CTAs"),
    ("[2]", "sm_80", "a cluster launch needs sm_90 or later, not sm_80"),
])
def test_bad_cluster_attribute_is_a_diagnostic(attr: str, target: str, msg: str) -> None:
    text = (f'module attributes {{nvatom.target = "{target}"}} {{\n'
            f"func.func @k() attributes {{cluster = {attr}}} {{\n  func.return\n}}\n}}\n")
    mod = driver.parse(text, "k.mlir")
    with pytest.raises(driver.IRError) as e:
        lower(mod, driver.verify(mod))
    assert msg in str(e.value)


@pytest.mark.parametrize("attr", ["array<i32: 2, 2>", "[2, 2]", "[2 : i32, 2 : i32, 1 : i32]"])
def test_cluster_attribute_forms(attr: str) -> None:
    text = f"func.func @k() attributes {{cluster = {attr}}} {{\n  func.return\n}}\n"
    mod = driver.parse(text, "k.mlir")
    out = lower(mod, driver.verify(mod))
    assert out.kernels[0].cluster == (2, 2, 1)
    assert ".reqnctapercluster 2, 2, 1" in out.ptx
    assemble(out.ptx, out.target)
