"""Parse, verify and lower time of a 300-operation module (printed, not asserted: the
numbers go to the report; tests only check that the module is what it claims to be)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from nvatom.ir import driver
from nvatom.ir.lower import lower

HERE = Path(__file__).parent
N_OPS = 300


def module_text(n_ops: int = N_OPS) -> str:
    """One kernel: mma.sync tiles, each loading A, B, C fragments, one mma, storing D."""
    head = ("func.func @many(%pa: !cute.ptr<bf16, gmem>, %pb: !cute.ptr<bf16, gmem>, "
            "%pc: !cute.ptr<f32, gmem>) {\n"
            "  %atom = cute_nvgpu.make_atom : !cute_nvgpu.sm80.mma<m16n8k16.f32.bf16.bf16.f32>\n"
            "  %ga = cute.make_view %pa : !cute.memref<bf16, gmem, (16,16):(16,1)>\n"
            "  %gb = cute.make_view %pb : !cute.memref<bf16, gmem, (8,16):(16,1)>\n"
            "  %gc = cute.make_view %pc : !cute.memref<f32, gmem, (16,8):(8,1)>\n")
    body = []
    i = 0
    while 5 + 1 + len(body) < n_ops:
        body += [
            f"  %ra{i} = cute.alloc_rmem : !cute.memref<bf16, rmem, "
            "((4,8),(2,2,2)):((32,1),(16,8,128))>",
            f"  %rb{i} = cute.alloc_rmem : !cute.memref<bf16, rmem, ((4,8),(2,2)):((16,1),(8,64))>",
            f"  %rc{i} = cute.alloc_rmem : !cute.memref<f32, rmem, ((4,8),(2,2)):((32,1),(16,8))>",
            f"  cute_nvgpu.atom.copy_fragment %atom, %ga, %ra{i} {{operand = \"A\"}}",
            f"  cute_nvgpu.atom.copy_fragment %atom, %gb, %rb{i} {{operand = \"B\"}}",
            f"  cute_nvgpu.atom.mma %atom, %rc{i}, %ra{i}, %rb{i}, %rc{i}",
            f"  cute_nvgpu.atom.copy_fragment %atom, %rc{i}, %gc {{operand = \"D\"}}",
        ]
        i += 1
    body = body[: n_ops - 6]
    return head + "\n".join(body) + "\n  func.return\n}\n"


def test_300_op_module_times(capsys: pytest.CaptureFixture[str]) -> None:
    text = module_text()
    t0 = time.perf_counter()
    mod = driver.parse(text, "many.mlir")
    t1 = time.perf_counter()
    ctx = driver.verify(mod)
    t2 = time.perf_counter()
    out = lower(mod, ctx)
    t3 = time.perf_counter()
    n = sum(1 for op in mod.walk()) - 1  # without the implicit module
    assert n == N_OPS
    assert out.ptx.count("mma.sync.aligned") == text.count("cute_nvgpu.atom.mma ")
    with capsys.disabled():
        print(f"\n[ir perf] {n}-op module: parse {1e3 * (t1 - t0):.0f} ms, verify "
              f"{1e3 * (t2 - t1):.0f} ms, lower {1e3 * (t3 - t2):.0f} ms, total "
              f"{1e3 * (t3 - t0):.0f} ms")
