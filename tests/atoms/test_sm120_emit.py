"""SM120 emission: instruction, inline asm and test kernels assemble; errors are ours; CLI.

Every PTX text here goes through ptxas (many kernels per module, so few calls).
"""

from __future__ import annotations

import re

import pytest

from nvatom import cli
from nvatom.atoms import sm120
from nvatom.atoms.sm120 import MmaBsForm
from nvatom.ptx import mma_emit, sm120_emit
from nvatom.ptx.builder import Kernel, Module
from nvatom.runtime import ptxas

BS = sm120.mma_bs_forms()
MXF8 = "SM120.mma_bs.m16n8k32.mxf8f6f4.1X.f32.e4m3.e2m1.f32.ue8m0"
SP_NV = "SM120.mma_bs.m16n8k128.ordered_metadata.mxf4nvf4.4X.f32.e2m1.e2m1.f32.ue4m3"


def _bs(name: str) -> MmaBsForm:
    f = sm120.sm120_form(name)
    assert isinstance(f, MmaBsForm)
    return f


@pytest.mark.parametrize("target", ["sm_120a", "sm_121a", "sm_120f"])
def test_test_kernels_of_every_form_assemble(target: str) -> None:
    """One module: a kernel per SM120.mma_bs form (several selectors) and per kind::f8f6f4
    form, each loading its fragments through the layouts."""
    forms = [f for f in BS if f.available_on(target)]
    extra = [g for f in forms[:: 7] for g in f.selector_choices()[1::29]]
    module = Module(target, version=(8, 8) if target != "sm_120a" else (8, 7))
    for i, f in enumerate([*forms, *extra]):
        sm120_emit.add_mma_bs_test_kernel(module, f, f"bs{i}")
    for i, g in enumerate(sm120.f8f6f4_forms(target)):
        mma_emit.add_mma_test_kernel(module, g, f"f8f6f4_{i}")
    res = ptxas.assemble(module.emit(), target)
    assert len(res.kernels) == len(forms) + len(extra) + len(sm120.f8f6f4_forms(target))
    assert all(k.spill_stores == 0 for k in res.kernels.values())


def _substitute(form: MmaBsForm) -> str:
    """The inline-asm template with each %N replaced the way nvcc would: registers of the
    constraint's class, immediates for "n"."""
    asm = sm120_emit.inline_asm(form)
    assert len(asm.constraint_list) == len(asm.names) == asm.outputs + asm.inputs
    counters = {"f": 0, "r": 0}

    def operand(i: int) -> str:
        letter = asm.constraint_list[i].lstrip("=")
        if letter == "n":
            return asm.names[i]
        counters[letter] += 1
        return f"%{letter}{counters[letter]}"

    values = [operand(i) for i in range(len(asm.names))]
    return re.sub(r"%(\d+)", lambda m: values[int(m.group(1))], asm.template)


def test_inline_asm_templates_assemble() -> None:
    forms = [*BS, *[g for f in BS[::5] for g in f.selector_choices()[::17]]]
    body = "\n".join(_substitute(f) for f in forms)
    text = (".version 8.7\n.target sm_120a\n.address_size 64\n.visible .entry t()\n{\n"
            ".reg .b32 %r<64>;\n.reg .f32 %f<64>;\n" + body + "\nret;\n}\n")
    ok, diags = ptxas.check(text, "sm_120a")
    assert ok, diags
    asm = sm120_emit.inline_asm(_bs(SP_NV))
    assert asm.constraints == "=f,=f,=f,=f," + "r," * 8 + "f,f,f,f,r,n,r,n,n,r,n,n"
    assert asm.names[-6:] == ("sfa", "0", "0", "sfb", "0", "0")


def test_emit_checks_operands() -> None:
    f = _bs(MXF8)
    k = Kernel("t")
    regs = sm120_emit.alloc_mma_bs_registers(k, f)
    with pytest.raises(sm120_emit.MmaBsEmitError, match="operand A takes 4 .b32"):
        sm120_emit.emit_mma_bs(k, f, regs.d, regs.a[:3], regs.b, regs.c, regs.sfa, regs.sfb)
    with pytest.raises(sm120_emit.MmaBsEmitError, match="operand C takes .f32"):
        sm120_emit.emit_mma_bs(k, f, regs.d, regs.a, regs.b, regs.a, regs.sfa, regs.sfb)
    with pytest.raises(sm120_emit.MmaBsEmitError, match="scale A register is .b32"):
        sm120_emit.emit_mma_bs(k, f, regs.d, regs.a, regs.b, regs.c, regs.d[0], regs.sfb)
    with pytest.raises(sm120_emit.MmaBsEmitError, match="dense"):
        sm120_emit.emit_mma_bs(k, f, regs.d, regs.a, regs.b, regs.c, regs.sfa, regs.sfb,
                               e=regs.sfa)
    sp = _bs(SP_NV)
    k2 = Kernel("t2")
    r2 = sm120_emit.alloc_mma_bs_registers(k2, sp)
    with pytest.raises(sm120_emit.MmaBsEmitError, match="needs the metadata"):
        sm120_emit.emit_mma_bs(k2, sp, r2.d, r2.a, r2.b, r2.c, r2.sfa, r2.sfb)
    with pytest.raises(sm120_emit.MmaBsEmitError, match="selector 1 is not legal"):
        sm120_emit.emit_mma_bs(k2, sp, r2.d, r2.a, r2.b, r2.c, r2.sfa, r2.sfb, e=r2.e,
                               selector=1)


def test_test_module_checks_target_and_version() -> None:
    with pytest.raises(sm120_emit.MmaBsEmitError, match="not available on sm_100a"):
        sm120_emit.build_mma_bs_test_module(_bs(MXF8), "sm_100a")
    with pytest.raises(sm120_emit.MmaBsEmitError, match="not available on sm_120f"):
        sm120_emit.build_mma_bs_test_module(_bs(SP_NV), "sm_120f")
    with pytest.raises(sm120_emit.MmaBsEmitError, match="needs PTX .version 8.7"):
        sm120_emit.add_mma_bs_test_kernel(Module("sm_120a", version=(8, 6)), _bs(MXF8))


# --------------------------------------------------------------------------- CLI


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    rc = cli.main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def test_cli_atoms(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = _run(capsys, "atoms", "--sm120")
    assert rc == 0 and "156 atoms: 56 SM120.mma_bs" in out
    rc, out, _ = _run(capsys, "atoms", "--sm120", "--target", "sm_120f", "--sf", "ue4m3")
    assert rc == 0 and out.count("SM120.mma_bs.") == 1  # the sparse NVFP4 form needs 'a'
    rc, out, _ = _run(capsys, "atoms", "--sm120", "--json", "--a", "e2m1", "--b", "e2m1",
                      "--sf", "ue8m0")
    import json

    rows = json.loads(out)
    assert {r["attributes"]["kind"] for r in rows} == {"mxf8f6f4", "mxf4", "mxf4nvf4"}
    assert all(set(r["attributes"]) >= {"a_type", "shape_MNK", "vec_size"} for r in rows)
    rc, _, err = _run(capsys, "atoms", "--sm120", "--a", "f16")
    assert rc == 2 and "no SM120 atom matches" in err


def test_cli_frag(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = _run(capsys, "frag", MXF8 + ".sfa_b2t1.sfb_b0t0", "--operand", "sfa")
    assert rc == 0
    assert "lanes read: [2, 3, 6, 7," in out and "T2:V2" in out and "T3:V2" in out
    rc, out, _ = _run(capsys, "frag", MXF8, "-p", "B", "--no-table")
    assert rc == 0 and "8 values in 2 b32 registers per lane (8-bit fields)" in out
    rc, _, err = _run(capsys, "frag", "sm120.mma.m16n8k32.f32.e2m1.e2m1.f32", "-p", "SFB")
    assert rc == 2 and "unknown operand 'SFB'" in err
    rc, _, err = _run(capsys, "frag", MXF8 + ".sfa_b4t0.sfb_b0t0", "-p", "SFA")
    assert rc == 2 and "byte_id_a = 4 is out of range" in err


def test_cli_emit(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = _run(capsys, "emit", MXF8, "--target", "sm_121a")
    assert rc == 0 and "%r" in out and ", {0, 0};" in out
    rc, out, _ = _run(capsys, "emit", SP_NV, "-t", "sm_120a", "--asm-template")
    assert rc == 0 and '"n"(0)' in out and '"r"(e)' in out
    rc, out, _ = _run(capsys, "emit", SP_NV, "-t", "sm_121a", "--kernel", "--assemble")
    assert rc == 0 and "mma_bs_test:" in out and "registers" in out
    rc, _, err = _run(capsys, "emit", SP_NV, "-t", "sm_120f")
    assert rc == 2 and "not available on sm_120f" in err
    rc, _, err = _run(capsys, "emit", MXF8, "-t", "sm_120a", "--selector", "0")
    assert rc == 2 and "sparsity selector 0 is not legal" in err
    rc, out, _ = _run(capsys, "emit", "sm120.sparse_mma.m16n8k64.ordered_metadata.f32.e3m2."
                      "e2m1.f32", "-t", "sm_120a", "--kernel", "--assemble")
    assert rc == 0 and "kind::f8f6f4" in out


@pytest.mark.parametrize("name", [MXF8, "SM120.mma_bs.m16n8k64.mxf4.2X.f32.e2m1.e2m1.f32.ue8m0",
                                  "SM120.mma_bs.m16n8k32.mxf8f6f4.1X.f32.e3m2.e2m1.f32.ue8m0"])
def test_register_packing_meets_the_kernel_memory_contract(name: str) -> None:
    """Registers packed by block_scale_ref and stored where the test kernel loads them give
    exactly the documented memory image: A M x K row-major, B as N x K row-major, one element
    per byte (e2m1 in bits 5..2) or two e2m1 per byte (low nibble first)."""
    import numpy as np

    from nvatom.atoms import block_scale_ref as ref
    from tests.gpu.test_sm120_gpu import _from_memory, _to_memory

    f = _bs(name)
    rng = np.random.default_rng(3)
    a = rng.integers(0, 16, size=(16, f.k))
    b = rng.integers(0, 16, size=(f.k, 8))
    for op, tile in (("A", a), ("B", b.T)):
        mem = _to_memory(f, op, ref.pack_operand(f, op, tile if op == "A" else b))
        fields = ref.container_codes(f, op, tile).astype(np.uint8)
        if f.element_bits(op) == 4:
            flat = fields.reshape(-1)
            image = (flat[0::2] | (flat[1::2] << 4)).astype(np.uint8)
        else:
            image = fields.reshape(-1)
        assert mem.view(np.uint8).tolist() == image.tolist(), op
    c = rng.integers(-4, 4, size=(16, 8)).astype(np.float32)
    d_regs = ref.pack_operand(f, "C", c)
    assert np.array_equal(ref.unpack_accumulator(f, _from_memory(f, _to_memory(f, "D", d_regs))),
                          c)
