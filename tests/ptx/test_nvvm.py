"""SM70/SM75 atoms through the NVVM-intrinsic path: LLVM's NVPTX backend (llvmlite) must emit
exactly the PTX instruction nvatom emits for the same form."""

from __future__ import annotations

import re

import pytest

from nvatom.atoms.fragments import FragmentError
from nvatom.atoms.registry import mma_forms
from nvatom.errors import NvatomError
from nvatom.ptx.nvvm import intrinsic_name, lower_with_llvm

llvm = pytest.importorskip("llvmlite.binding", reason="llvmlite not installed (nvatom[llvm])")

INTRINSIC_PATH = [f for f in mma_forms() if f.mnemonic in ("sm70.mma", "sm75.mma")]


def test_intrinsic_names_follow_llvm() -> None:
    # Spellings as LLVM's IntrinsicsNVVM.td defines them (MMA_NAME / MMA_SIGNATURE).
    names = {intrinsic_name(f) for f in INTRINSIC_PATH}
    assert "llvm.nvvm.mma.m16n8k8.row.col.f16.f16" in names
    assert "llvm.nvvm.mma.m8n8k4.col.row.f32.f16" in names
    assert "llvm.nvvm.mma.m8n8k16.row.col.satfinite.s8.u8" in names
    assert "llvm.nvvm.mma.m8n8k32.row.col.u4" in names
    assert "llvm.nvvm.mma.xor.popc.m8n8k128.row.col.b1" in names


# LLVM selects m8n8k128 .xor.popc only from sm_80, though ptxas takes it on sm_75 at PTX 7.0
# (tests/atoms/test_mma_ptxas.py); LLVM is checked on sm_80 for it and its refusal pinned.
LLVM_NEEDS_SM80 = {"sm75.mma.m8n8k128.s32.b1.b1.s32.xor.popc"}


@pytest.mark.parametrize("form", INTRINSIC_PATH, ids=lambda f: f.name)
def test_llvm_emits_our_instruction(form) -> None:
    cpu = "sm_70" if form.mnemonic == "sm70.mma" else "sm_75"
    if form.name in LLVM_NEEDS_SM80:
        with pytest.raises(NvatomError, match="Cannot select"):
            lower_with_llvm(form, cpu, form.min_ptx)
        cpu = "sm_80"
    try:
        ptx = lower_with_llvm(form, cpu, form.min_ptx)
    except FragmentError as e:  # the m8n8k4 fragments may not be there yet
        pytest.skip(str(e))
    lines = [m.group(1) for m in re.finditer(r"^\s*(mma\.\S+)", ptx, re.M)]
    assert lines == [form.opcode]
