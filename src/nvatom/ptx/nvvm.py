"""The NVVM-intrinsic path of the SM70/SM75 register MMAs.

The specification routes SM70/SM75 MMAs through the NVVM intrinsics (``llvm.nvvm.mma.*``) and
lets LLVM's NVPTX backend choose the PTX spelling.  This module names each form's intrinsic
(LLVM ``IntrinsicsNVVM.td``, ``MMA_NAME``: ``llvm.nvvm.mma[.<bop>].<shape>.<alayout>.<blayout>
[.satfinite]`` followed by the identifying types: D and C types for f16 inputs, A and B types
when they differ, else the A type) and writes a small LLVM IR kernel calling it.  With
llvmlite (optional extra ``nvatom[llvm]``) :func:`lower_with_llvm` compiles that IR to PTX, so
tests can check that LLVM emits exactly the instruction nvatom emits.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys

from nvatom.atoms.mma import MmaForm
from nvatom.errors import NvatomError

__all__ = ["intrinsic_ir", "intrinsic_name", "llvm_type", "lower_with_llvm"]


def intrinsic_name(form: MmaForm) -> str:
    if form.is_sparse:
        raise NvatomError(f"{form.name}: sparse MMAs have no llvm.nvvm.mma intrinsic here")
    bop = f".{form.bop}" if form.bop else ""
    sat = ".satfinite" if form.satfinite else ""
    if form.a.name == "f16":
        types = (form.d.name, form.c.name)
    elif form.a != form.b:
        types = (form.a.name, form.b.name)
    else:
        types = (form.a.name,)
    return (f"llvm.nvvm.mma{bop}.{form.shape_str}.{form.alayout}.{form.blayout}{sat}."
            + ".".join(types))


def _elt(form: MmaForm, op: str) -> str:
    t, reg = form.operand_type(op), form.register_type(op)
    if reg == "f32":
        return "float"
    if reg == "f64":
        return "double"
    if t.name == "f16":
        return "<2 x half>"
    return "i32"


def llvm_type(form: MmaForm, op: str) -> str:
    """The LLVM type of one register of operand ``op`` in the form's intrinsic."""
    return _elt(form, op)


def intrinsic_ir(form: MmaForm) -> str:
    """An LLVM IR module whose kernel calls the form's intrinsic once and stores D."""
    name = intrinsic_name(form)
    args = [_elt(form, op) for op in "ABC" for _ in range(form.registers(op))]
    d_elt = _elt(form, "D")
    nd = form.registers("D")
    ret = "{" + ", ".join([d_elt] * nd) + "}"
    call_args = ", ".join(f"{t} zeroinitializer" if t.startswith("<") else f"{t} 0"
                          if t == "i32" else f"{t} 0.0" for t in args)
    return (
        'target triple = "nvptx64-nvidia-cuda"\n'
        f"declare {ret} @{name}({', '.join(args)})\n"
        "define void @mma_kernel(ptr %out) {\n"
        f"  %r = call {ret} @{name}({call_args})\n"
        f"  %d0 = extractvalue {ret} %r, 0\n"
        f"  store {d_elt} %d0, ptr %out\n"
        "  ret void\n"
        "}\n"
        '!nvvm.annotations = !{!0}\n'
        '!0 = !{ptr @mma_kernel, !"kernel", i32 1}\n'
    )


_LOWER = """
import sys
import llvmlite.binding as llvm
llvm.initialize_all_targets()
llvm.initialize_all_asmprinters()
module = llvm.parse_assembly(sys.stdin.read())
module.verify()
tm = llvm.Target.from_triple("nvptx64-nvidia-cuda").create_target_machine(
    cpu=sys.argv[1], features=sys.argv[2])
sys.stdout.write(str(tm.emit_assembly(module)))
"""


def lower_with_llvm(form: MmaForm, cpu: str, ptx_version: tuple[int, int]) -> str:
    """PTX text from LLVM's NVPTX backend (needs llvmlite).

    Runs in a child process: LLVM aborts the whole process when it cannot select an
    intrinsic, and that must become an error, not a crash.
    """
    if importlib.util.find_spec("llvmlite") is None:
        raise NvatomError("llvmlite is not installed: pip install 'nvatom[llvm]'")
    features = f"+ptx{ptx_version[0]}{ptx_version[1]}"
    proc = subprocess.run([sys.executable, "-c", _LOWER, cpu, features],
                          input=intrinsic_ir(form), capture_output=True, text=True,
                          timeout=120, check=False)
    if proc.returncode != 0:
        err = next((line for line in proc.stderr.splitlines() if "LLVM ERROR" in line),
                   proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else "failed")
        raise NvatomError(f"LLVM could not lower {intrinsic_name(form)} for {cpu} "
                          f"{features}: {err}")
    return proc.stdout
