"""The IR examples lower to PTX that ptxas assembles; the command line drives the same path.

The examples: seed 001's TMA worked example, a TMA load/store round trip, an sm80 mma.sync
kernel, a WGMMA tile loop
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
    "tma_copy.mlir": [
        "mbarrier.arrive.expect_tx.release.cta.shared::cta.b64 _, [%r6], 8192;",
        "cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group", "fence.proxy.async"],
    "wgmma_tile_loop.mlir": ["wgmma.fence.sync.aligned", "wgmma.commit_group.sync.aligned",
                             "wgmma.wait_group.sync.aligned 0",
                             "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3"],
    "sm120_block_scaled.mlir": [
        "mma.sync.aligned.m16n8k64.row.col.kind::mxf4nvf4.block_scale.scale_vec::4X"],
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
    # the 64-element (128-byte) inner box row, 8 rows; 128-byte swizzle (seed 001 example)
    assert (t.box, t.element_bits, t.swizzle_bytes, t.tensor_arg) == ((64, 8), 16, 128, 0)
    assert t.gmem_layout == "(n,m):(1,sn)"


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


def test_umma_atoms_verify_but_do_not_lower_yet() -> None:
    text = ("func.func @k(%a: !cute_nvgpu.smem_desc_view<f16, K, Sw<3,3,3> o 0 o (128,64):(64,1)>,"
            " %b: !cute_nvgpu.smem_desc_view<f16, K, Sw<3,3,3> o 0 o (256,64):(64,1)>,"
            " %d: !cute.memref<f32, tmem, (128,256):(256,1)>) {\n"
            "  %atom = cute_nvgpu.make_atom : "
            "!cute_nvgpu.sm100.mma<f16.cta1.m128n256k16.ss.f32.f16.f16>\n"
            "  cute_nvgpu.atom.mma %atom, %d, %a, %b, %d\n  func.return\n}\n")
    mod = driver.parse(text, "umma.mlir")
    ctx = driver.verify(mod, "sm_100a")
    with pytest.raises(driver.IRError, match="SM100 UMMA atoms .* are not lowered yet"):
        lower(mod, ctx)
