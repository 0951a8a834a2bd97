"""A tiled MMA in the IR: copy_fragment of a tiled MMA's fragments and tiled_mma.gemm on them
(tests/ir/tiled_gemm.mlir, the tutorial's kernel), against the builder's own emission."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from nvatom.ir import driver
from nvatom.ir.lower import lower

HERE = Path(__file__).parent


def test_tiled_gemm_issues_every_repetition_in_k_order() -> None:
    mod = driver.parse((HERE / "tiled_gemm.mlir").read_text(), "tiled_gemm.mlir")
    out = lower(mod, driver.verify(mod, "sm_80"))
    (info,) = out.kernels
    assert info.threads == 128 and ".target sm_80" in out.ptx
    # 4 K steps x 2 (M) x 4 (N) atoms; per thread and step 8 A + 8 B loads, 32 f32 stores
    assert out.ptx.count("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32") == 32
    assert out.ptx.count("ld.global.b32") == 4 * 16 and out.ptx.count("st.global.f32") == 32
    # the K tiles of A (64 x 16 of a 64 x 64 row-major bf16 tensor) start 32 bytes apart:
    # the first A register of K step k sits at byte 32 k of the thread's row
    firsts = [int(m) for m in re.findall(r"ld\.global\.b32 %r\d+, \[%rd\d+\+(\d+)\];", out.ptx)]
    assert [firsts[16 * k] for k in range(4)] == [0, 32, 64, 96]


def test_gemm_on_memory_tiles_is_a_lowering_diagnostic() -> None:
    text = """
func.func @f(%a: !cute.memref<f16, smem, (16,16):(16,1)>,
            %b: !cute.memref<f16, smem, (8,16):(16,1)>, %c: !cute.memref<f32, smem, (16,8):(8,1)>) {
  %atom = cute_nvgpu.make_atom : !cute_nvgpu.sm80.mma<m16n8k16.f32.f16.f16.f32>
  %t = cute_nvgpu.make_tiled_mma %atom
  cute_nvgpu.tiled_mma.gemm %t, %c, %a, %b, %c
  func.return
}
"""
    mod = driver.parse(text, "f.mlir")
    with pytest.raises(driver.IRError, match="lowered on register fragments"):
        lower(mod, driver.verify(mod, "sm_80"))


def test_the_specification_s_cute_spelling_is_an_alias() -> None:
    # 000: "cute.make_tiled_copy / cute.make_tiled_mma builders consuming atom values"; the
    # file spells them so; with the cute_nvgpu spelling the same text must give the same PTX
    text = (HERE / "tiled_spec_spelling.mlir").read_text()
    assert "cute.make_tiled_copy %atom" in text and "cute.make_tiled_mma %atom" in text
    nv = text.replace("cute.make_tiled_", "cute_nvgpu.make_tiled_")
    outs = []
    for src in (text, nv):
        mod = driver.parse(src, "tiled_spec_spelling.mlir")
        outs.append(lower(mod, driver.verify(mod, "sm_80")).ptx)
    assert outs[0] == outs[1]
    assert outs[0].count("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32") == 32
    # the spelling round-trips (printed as written) and the alias verifies alike: a bad
    # attribute fails with the same diagnostic under both names
    mod = driver.parse(text, "tiled_spec_spelling.mlir")
    assert "cute.make_tiled_copy %" in driver.print_module(mod)
    for name in ("cute.make_tiled_mma", "cute_nvgpu.make_tiled_mma"):
        bad = f"""
func.func @f() {{
  %atom = cute_nvgpu.make_atom : !cute_nvgpu.sm80.mma<m16n8k16.f32.f16.f16.f32>
  %t = {name} %atom {{atom_layout = "(2,0)"}}
  func.return
}}
"""
        m = driver.parse(bad, "f.mlir")
        with pytest.raises(driver.IRError, match=r"atom_layout must be 3 positive integers"):
            driver.verify(m, "sm_80")
