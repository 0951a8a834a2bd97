"""The SM90 GEMM written in the IR (tests/ir/gemm_sm90.mlir): it verifies, lowers and assembles
for sm_90a without spills, and its PTX has the structure of the Python-built kernel
(src/nvatom/kernels/sm90/): warp specialisation with setmaxnreg 40 / 232, per K block
four m64n256k16 WGMMAs (the first of each tile with scale-d 0), mbarrier pipeline waits and
arrivals, one expect_tx of both loads' bytes, stmatrix into swizzled staging + TMA stores.
Also the new operations' verifier diagnostics and the pieces of their lowering (nvatom.ir.
ops_sync, lower_sync) that the GEMM does not reach.  The GPU run: tests/gpu/test_ir_gemm_gpu.py.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytest.importorskip("xdsl")

from nvatom.ir import driver
from nvatom.ir.driver import IRError
from nvatom.ir.lower import lower
from nvatom.runtime.ptxas import assemble

GEMM = Path(__file__).parent / "gemm_sm90.mlir"
# PTX ISA, "wgmma.mma_async": m64nNk16 with .bf16 inputs; A 128 x 64 + B 256 x 64 bf16 tiles
STAGE_BYTES = (128 * 64 + 256 * 64) * 2


@pytest.fixture(scope="module")
def gemm() -> tuple[str, object]:
    mod = driver.parse(GEMM.read_text(), GEMM.name)
    out = lower(mod, driver.verify(mod, "sm_90a"))
    (info,) = out.kernels
    return out.ptx, info


def test_gemm_assembles_without_spills(gemm: tuple[str, object]) -> None:
    """As the Python-built kernel (tests/kernels/test_gemm_sm90.py): the .maxnreg 168 entry
    budget, no spills, no stack, and no ptxas warning (none about serialised WGMMAs)."""
    ptx, _ = gemm
    res = assemble(ptx, "sm_90a")
    k = res.kernel("gemm_sm90_bf16")
    assert (k.spills, k.stack_frame) == (0, 0)
    assert k.registers <= 168
    assert not res.warnings, res.warnings


def test_gemm_kernel_facts(gemm: tuple[str, object]) -> None:
    ptx, info = gemm
    assert info.threads == 384  # 1 producer + 2 consumer warpgroups
    assert ".reqntid 384, 1, 1" in ptx and ".maxnreg 168" in ptx
    # 4 stages of A and B, 4 staging tiles of 64 x 64 bf16: dynamic shared memory
    assert info.dynamic_shared == 4 * STAGE_BYTES + 4 * 64 * 64 * 2
    assert ".extern .shared .align 1024" in ptx
    assert [t.box for t in info.tma] == [(64, 128), (64, 256), (64, 64)]
    assert {t.swizzle_bytes for t in info.tma} == {128}


def test_gemm_ptx_structure(gemm: tuple[str, object]) -> None:
    ptx, _ = gemm
    count = ptx.count
    assert count("setmaxnreg.dec.sync.aligned.u32 40;") == 1
    assert count("setmaxnreg.inc.sync.aligned.u32 232;") == 1
    # the peeled first K block and the loop body: 4 K-steps of 16 each
    assert count("wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16") == 8
    assert count("wgmma.commit_group.sync.aligned") == 2
    assert count("wgmma.wait_group.sync.aligned 1;") == 2
    assert count("mbarrier.arrive.expect_tx.release.cta.shared::cta.b64 _, [") == 1
    assert f", {STAGE_BYTES};" in ptx
    assert count("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier") == 2
    assert count("mbarrier.arrive.release.cta.shared::cta.b64 _,") == 2  # release empty[s]
    assert count("stmatrix.sync.aligned.m8n8.x4.shared.b16") == 16
    assert count("cvt.rn.bf16x2.f32") == 64
    assert count("cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group") == 4
    assert count("fence.proxy.async.shared::cta;") == 4
    assert count("cp.async.bulk.wait_group.read 1;") == 4
    assert len(re.findall(r"bar\.sync %r\d+, 128;", ptx)) == 8  # the warpgroup's own barrier


def test_cli_compiles_the_gemm(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from nvatom.cli import main

    out = tmp_path / "g.ptx"
    assert main(["compile", str(GEMM), "--target", "sm_90a", "-o", str(out)]) == 0
    assert "wgmma.mma_async" in out.read_text()
    # the dynamic shared memory the host must launch with is part of the report
    assert f"+ {4 * STAGE_BYTES + 4 * 64 * 64 * 2} B dynamic" in capsys.readouterr().err


# ------------------------------------------------------------------ the new ops
OPS = """func.func @ops(%p: !cute.ptr<f32, gmem>, %r: i32) attributes {{cluster = [2, 1, 1]}} {{
  %bars = cute_nvgpu.arch.mbarrier_init_array {{count = 3, size = 2}}
  %i = cute_nvgpu.arch.thread_idx {{dim = "y"}}
  %b = cute_nvgpu.arch.mbarrier_at %bars, %i
  {body}
  func.return
}}
"""


def _lower(body: str, target: str = "sm_90a") -> str:
    mod = driver.parse(OPS.format(body=body), "ops.mlir")
    return lower(mod, driver.verify(mod, target)).ptx


def _errors(body: str, target: str = "sm_90a") -> str:
    mod = driver.parse(OPS.format(body=body), "ops.mlir")
    with pytest.raises(IRError) as e:
        lower(mod, driver.verify(mod, target))
    return str(e.value)


def test_arrive_forms_lower_and_assemble() -> None:
    ptx = _lower("cute_nvgpu.arch.mbarrier_arrive %b {count = 2}\n"
                 "  cute_nvgpu.arch.mbarrier_arrive %b, %r\n"
                 "  %q = arith.cmpi ult, %r, %i : i32\n"
                 "  %s = arith.select %q, %r, %i : i32\n"
                 "  %t = arith.shli %s, %r : i32\n"
                 "  cute_nvgpu.arch.barrier_sync {id = 3, threads = 64}\n"
                 "  cute_nvgpu.arch.bulk_wait_group {pending = 0}")
    assert "mbarrier.arrive.release.cta.shared::cta.b64 _, [" in ptx and "], 2;" in ptx
    assert "mapa.shared::cluster.u32" in ptx
    assert "mbarrier.arrive.release.cta.shared::cluster.b64 _, [" in ptx
    assert "setp.lt.u32" in ptx and "selp.b32" in ptx and "shl.b32" in ptx
    assert "bar.sync 3, 64;" in ptx
    assert ptx.count("mbarrier.init.shared::cta.b64") == 2 and "], 3;" in ptx
    assert ".reqnctapercluster 2, 1, 1" in ptx
    assemble(ptx, "sm_90a")


@pytest.mark.parametrize(("body", "message"), [
    ("cute_nvgpu.arch.mbarrier_arrive %b {count = 1, expect_tx = 16}",
     "arrives once: drop count or expect_tx"),
    ("cute_nvgpu.arch.mbarrier_arrive %b, %r {expect_tx = 16}",
     "takes neither count nor expect_tx"),
    ("cute_nvgpu.arch.mbarrier_arrive %b {expect_tx = 1048576}", "expect_tx is 0..1048575"),
    ('cute_nvgpu.arch.setmaxnreg {action = "inc", regs = 250}', "in steps of 8, got 250"),
    ('cute_nvgpu.arch.setmaxnreg {action = "up", regs = 240}', "'inc' or 'dec', got 'up'"),
    ("cute_nvgpu.arch.barrier_sync {threads = 100}", "whole warps, got 100"),
    ("cute_nvgpu.arch.barrier_sync {threads = 128}", "as the attribute 'id' or as one i32"),
    ("cute_nvgpu.arch.barrier_sync %r {id = 1, threads = 128}", "as the attribute 'id'"),
    ("cute_nvgpu.arch.bulk_wait_group {pending = 64}", "takes 0..63, got 64"),
    ("%x = cute_nvgpu.arch.mbarrier_at %b, %r", "mbarrier_init_array as operand #0"),
    ('%x = cute_nvgpu.arch.block_idx {dim = "w"}', "x, y or z, got 'w'"),
    ("%s = cute.alloc_smem : !cute.memref<f16, smem, Sw<3,3,3> o 0 o (64,64):(64,1)>\n"
     "  %v = cute.smem_view %s, %r {stride = 512} : "
     "!cute.memref<f16, smem, Sw<3,3,3> o 0 o (8,64):(64,1)>",
     "not a multiple of 1024 bytes"),
    ("%s = cute.alloc_smem : !cute.memref<f16, smem, (64,64):(64,1)>\n"
     "  %v = cute.smem_view %s, %r : !cute.memref<f16, smem, (8,64):(64,1)>",
     "needs the attribute 'stride'"),
    ("%s = cute.alloc_smem : !cute.memref<f16, smem, (64,64):(64,1)>\n"
     "  %v = cute.smem_view %s : !cute.memref<f32, smem, (8,64):(64,1)>",
     "keeps the element type"),
    ("%f = cute.alloc_rmem : !cute.memref<f32, rmem, (32,8):(8,1)>\n"
     "  %g = cute.fragment_slice %f {offset = 4} : !cute.memref<f32, rmem, (32,8):(8,1)>",
     "values 4..11 are outside the fragment's 8 values"),
    ("%f = cute.alloc_rmem : !cute.memref<f32, rmem, (32,3):(3,1)>\n"
     "  %g = cute.fragment_convert %f : !cute.memref<bf16, rmem, (32,3):(3,1)>",
     "keeps the values (an even number)"),
    ("%f = cute.alloc_rmem : !cute.memref<f32, rmem, (32,2):(2,1)>\n"
     "  %g = cute.fragment_convert %f : !cute.memref<f32, rmem, (32,2):(2,1)>",
     "rounds f32 to bf16 or f16, not f32 to f32"),
])
def test_new_op_diagnostics(body: str, message: str) -> None:
    assert message in _errors(body)


@pytest.mark.parametrize(("attrs", "message"), [
    # PTX ISA "mbarrier.init": the expected arrival count is 1 .. 2^20 - 1
    ("count = 0, size = 2", "an mbarrier's arrival count is 1..1048575, got 0"),
    ("count = 1048576, size = 2", "an mbarrier's arrival count is 1..1048575, got 1048576"),
    ("count = 1, size = 0", "an mbarrier array holds 1..1024 barriers, got 0"),
    ("count = 1, size = 1025", "an mbarrier array holds 1..1024 barriers, got 1025"),
])
def test_mbarrier_init_array_diagnostics(attrs: str, message: str) -> None:
    text = OPS.format(body="").replace("count = 3, size = 2", attrs)
    mod = driver.parse(text, "ops.mlir")
    with pytest.raises(IRError, match=re.escape(message)):
        driver.verify(mod, "sm_90a")


def test_setmaxnreg_needs_sm90a() -> None:
    assert "setmaxnreg is not available on sm_90" in _errors(
        'cute_nvgpu.arch.setmaxnreg {action = "dec", regs = 40}', "sm_90")


def test_setmaxnreg_needs_a_whole_warpgroup() -> None:
    """PTX ISA "setmaxnreg": ``.sync.aligned``, executed by all threads of a warpgroup, so
    the kernel needs at least 128 threads: without a ``threads`` attribute the CTA gets 128,
    and a 64-thread attribute is refused."""
    body = 'cute_nvgpu.arch.setmaxnreg {action = "dec", regs = 40}'
    mod = driver.parse(OPS.format(body=body), "ops.mlir")
    assert lower(mod, driver.verify(mod, "sm_90a")).kernels[0].threads == 128
    text = OPS.format(body=body).replace("cluster = [2, 1, 1]", "threads = 64 : i32")
    mod = driver.parse(text, "ops.mlir")
    with pytest.raises(IRError, match="threads = 64 is not a whole number of warps covering "
                                      "the 128 threads"):
        lower(mod, driver.verify(mod, "sm_90a"))


def test_bad_kernel_attributes_are_diagnostics() -> None:
    text = OPS.format(body="").replace("cluster = [2, 1, 1]", "threads = 2000 : i32")
    mod = driver.parse(text, "ops.mlir")
    with pytest.raises(IRError, match="threads = 2000 : i32 is not an integer in 1..1024"):
        lower(mod, driver.verify(mod, "sm_90a"))


def test_threads_attribute_must_be_whole_warps() -> None:
    text = OPS.format(body="").replace("cluster = [2, 1, 1]", "threads = 100 : i32")
    mod = driver.parse(text, "ops.mlir")
    with pytest.raises(IRError, match="threads = 100 is not a whole number of warps"):
        lower(mod, driver.verify(mod, "sm_90a"))


@pytest.mark.parametrize("op", ["addi", "muli", "andi", "subi", "divui", "shli", "ori"])
def test_narrow_integer_arith_is_refused_not_miscomputed(op: str) -> None:
    """The lowering computes in 32- or 64-bit registers: an i16 op would need a wrap after
    every instruction, so it is refused (addi/muli/andi used to emit add.s32 and friends
    with no wrap: i16 30000 + 30000 gave 60000)."""
    body = (f"%c = arith.constant 7 : i16\n  %d = arith.constant 9 : i16\n"
            f"  %e = arith.{op} %c, %d : i16")
    assert f"'arith.{op}' on i16 is not supported (i32, i64)" in _errors(body)
