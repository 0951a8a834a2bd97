"""The inline-asm templates compile in real CUDA C++ (nvcc), one device function per form.

nvcc checks what ptxas cannot: that the constraint letters fit the C++ operand types and that
operand numbering matches the template.  One nvcc call compiles a translation unit holding a
representative form of every register kind (f16x2, f32, f64, s32, b1, sparse)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from nvatom.atoms.registry import mma_form
from nvatom.ptx.mma_emit import inline_asm

NVCC = shutil.which("nvcc") or (
    "/usr/local/cuda/bin/nvcc" if Path("/usr/local/cuda/bin/nvcc").exists() else None)

FORMS = [
    "sm80.mma.m16n8k16.f32.f16.f16.f32",
    "sm80.mma.m16n8k16.f16.f16.f16.f16",
    "sm80.mma.m8n8k4.f64.f64.f64.f64",
    "sm80.mma.m16n8k32.satfinite.s32.s8.u8.s32",
    "sm80.mma.m16n8k256.s32.b1.b1.s32.and.popc",
    "sm80.sparse_mma.m16n8k16.f32.bf16.bf16.f32",
    "sm89.mma.m16n8k32.f32.e4m3.e5m2.f32",
]
_CTYPE = {"r": "unsigned", "f": "float", "d": "double"}


def _device_function(i: int, name: str) -> str:
    form = mma_form(name)
    asm = inline_asm(form)
    args = []
    for n, letter in enumerate(asm.constraint_list):
        base = letter.lstrip("=")
        if base == "n":
            args.append(f'"n"({form.selectors[0]})')
        else:
            args.append(f'"{letter}"(v{n})')
    decls = "".join(f"  {_CTYPE[c.lstrip('=')]} v{n} = 0;\n"
                    for n, c in enumerate(asm.constraint_list) if c != "n")
    outs, ins = args[: asm.outputs], args[asm.outputs:]
    stores = "".join(f"  out[{n}] = (double)v{n};\n" for n in range(asm.outputs))
    return (f"__device__ void form{i}(double *out) {{\n{decls}"
            f'  asm volatile("{asm.template}"\n      : {", ".join(outs)}\n'
            f'      : {", ".join(ins)});\n{stores}}}\n')


@pytest.mark.skipif(NVCC is None, reason="nvcc not found")
def test_templates_compile_with_nvcc(tmp_path) -> None:
    src = "".join(_device_function(i, n) for i, n in enumerate(FORMS))
    src += "__global__ void k(double *out) {\n" + "".join(
        f"  form{i}(out + {16 * i});\n" for i in range(len(FORMS))) + "}\n"
    cu = tmp_path / "asm.cu"
    cu.write_text(src)
    proc = subprocess.run([NVCC, "-arch=sm_89", "-ptx", str(cu), "-o", str(tmp_path / "a.ptx")],
                          capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    ptx = (tmp_path / "a.ptx").read_text()
    for name in FORMS:
        assert mma_form(name).opcode in ptx
