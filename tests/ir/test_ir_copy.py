"""Every copy atom of the table lowers from ``cute_nvgpu.atom.copy`` and assembles.

One module per target holds one kernel per atom (ptxas runs once per module): universal
copies gmem -> smem -> gmem (and through registers where the access moves 32- or 64-bit
elements), cp.async gmem -> smem with commit/wait, ldmatrix/stmatrix between the atom's
reference smem layout and a register fragment.  The instruction spellings each kernel must
contain are the PTX ISA's ("ld", "st", "cp.async", "ldmatrix", "stmatrix")."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from nvatom.atoms.copy import COPY_ATOMS, MatrixCopy, SimtAsyncCopy, UniversalCopy
from nvatom.ir import driver
from nvatom.ir.lower import lower
from nvatom.runtime.ptxas import assemble

HERE = Path(__file__).parent

# element type of an access/format width (the matrix copies: their format's element)
_ELEMENT = {8: "u8", 16: "f16", 32: "f32", 64: "f64"}
_FORMAT_ELEMENT = {"b16": "f16", "b8": "u8", "b8x16.b6x16_p32": "e3m2",
                   "b8x16.b4x16_p64": "e2m1"}


def _kernel(i: int, atom: object) -> tuple[str, list[str]]:
    """An IR kernel applying ``atom`` and the PTX it must contain."""
    name = atom.name  # type: ignore[attr-defined]
    body = name.removeprefix(atom.mnemonic)  # type: ignore[attr-defined]
    body = body[1:-1] if body.endswith(">") else body[1:].replace(">", "", 1)
    atype = f"!cute_nvgpu.{atom.mnemonic}<{body}>"  # type: ignore[attr-defined]

    def head(e: str) -> str:
        return (f"func.func @k{i}(%p: !cute.ptr<{e}, gmem>, %q: !cute.ptr<{e}, gmem>) {{\n"
                f"  %atom = cute_nvgpu.make_atom : {atype}\n")

    if isinstance(atom, MatrixCopy):
        e = _FORMAT_ELEMENT[atom.fmt.spelling]
        eb = atom.fmt.reg_bits
        smem, regs = atom.smem_layout(eb), atom.register_layout(eb)
        src, dst = ("%s", "%r") if atom.op == "ldmatrix" else ("%r", "%s")
        text = head(e) + (
            f"  %s = cute.alloc_smem : !cute.memref<{e}, smem, {smem}>\n"
            f"  %r = cute.alloc_rmem : !cute.memref<{e}, rmem, {regs}>\n"
            f"  cute_nvgpu.atom.copy %atom, {src}, {dst}\n  func.return\n}}\n")
        return text, [atom.opcode]
    if isinstance(atom, SimtAsyncCopy):
        n = atom.nbytes // 4
        lay = f"(32,{n}):({n},1)" if n > 1 else "32:1"
        text = head("f32") + (
            f"  %g = cute.make_view %p : !cute.memref<f32, gmem, {lay}>\n"
            f"  %s = cute.alloc_smem : !cute.memref<f32, smem, {lay}>\n"
            "  cute_nvgpu.atom.copy %atom, %g, %s\n"
            "  cute_nvgpu.arch.cp_async_commit_group\n"
            "  cute_nvgpu.arch.cp_async_wait_group {pending = 0}\n  func.return\n}\n")
        return text, [atom.opcode, "cp.async.commit_group", "cp.async.wait_group 0"]
    assert isinstance(atom, UniversalCopy)
    acc = atom.vector_access
    eb = acc.elem
    e = _ELEMENT[eb]
    n = atom.bits // eb
    lay = f"(32,{n}):({n},1)" if n > 1 else "32:1"
    text = head(e) + (
        f"  %g = cute.make_view %p : !cute.memref<{e}, gmem, {lay}>\n"
        f"  %o = cute.make_view %q : !cute.memref<{e}, gmem, {lay}>\n"
        f"  %s = cute.alloc_smem : !cute.memref<{e}, smem, {lay}>\n"
        "  cute_nvgpu.atom.copy %atom, %g, %s\n")
    want = [atom.ld_opcode("gmem"), atom.st_opcode("smem")]
    if eb >= 32:  # through a register fragment
        text += (f"  %r = cute.alloc_rmem : !cute.memref<{e}, rmem, {lay}>\n"
                 "  cute_nvgpu.atom.copy %atom, %s, %r\n"
                 "  cute_nvgpu.atom.copy %atom, %r, %o\n")
        want += [atom.ld_opcode("smem"), atom.st_opcode("gmem")]
    return text + "  func.return\n}\n", want


def _module(target: str, atoms: list) -> tuple[str, list[list[str]]]:
    texts, wants = zip(*(_kernel(i, a) for i, a in enumerate(atoms)), strict=True)
    return "".join(texts), list(wants)


def _lowerable(a: object) -> bool:
    # ldmatrix .b4x16_p64 widens each packed 4-bit element into its own byte: the fragment
    # of an e2m1 memref counts packed registers (docs/ir.md)
    return not (isinstance(a, MatrixCopy) and a.fmt.spelling == "b8x16.b4x16_p64")


@pytest.mark.parametrize("target", ["sm_90a", "sm_100a"])
def test_every_copy_atom_lowers_and_assembles(target: str) -> None:
    from nvatom.arch import target as tgt

    atoms = [a for a in COPY_ATOMS if a.available_on(tgt(target)) and _lowerable(a)]
    if target == "sm_100a":  # the forms sm_90a lacks
        atoms = [a for a in atoms if not a.available_on(tgt("sm_90a"))]
    assert atoms
    text, wants = _module(target, atoms)
    mod = driver.parse(text, f"copies_{target}.mlir")
    assert driver.print_module(mod) == text
    out = lower(mod, driver.verify(mod, target))
    funcs = out.ptx.split(".entry ")[1:]
    assert len(funcs) == len(atoms)
    for atom, body, want in zip(atoms, funcs, wants, strict=True):
        for w in want:
            assert w in body, (atom.name, w)
    res = assemble(out.ptx, target)
    assert len(res.kernels) == len(atoms)


def test_the_decompressing_b4_ldmatrix_says_why_it_does_not_lower() -> None:
    atom = next(a for a in COPY_ATOMS if not _lowerable(a) and a.num == 2)
    text, _ = _module("sm_100a", [atom])
    mod = driver.parse(text, "b4.mlir")
    with pytest.raises(driver.IRError,
                       match="writes 4 registers per lane, the fragment has 2; it widens"):
        lower(mod, driver.verify(mod, "sm_100a"))


def test_copy_pipeline_example() -> None:
    text = (HERE / "copy_pipeline.mlir").read_text()
    mod = driver.parse(text, "copy_pipeline.mlir")  # round trip: test_ir_files.py
    out = lower(mod, driver.verify(mod))
    order = ["cp.async.cg.shared.global", "cp.async.commit_group", "cp.async.wait_group 0",
             "ldmatrix.sync.aligned.m8n8.x4.shared.b16", "ldmatrix.sync.aligned.m8n8.x2.shared.b16",
             "mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16",
             "stmatrix.sync.aligned.m8n8.x2.shared.b16", "ld.shared.v4.b32", "st.global.v4.b32"]
    pos = [out.ptx.index(w) for w in order]
    assert pos == sorted(pos)
    # the ldmatrix registers are the MMA's A and B operands (cute.retile emits nothing)
    ld = out.ptx.split("ldmatrix.sync.aligned.m8n8.x4.shared.b16 ")[1].split(",", 4)
    mma = out.ptx.split("mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16 ")[1]
    assert "{" + ", ".join(x.strip(" {}") for x in ld[:4]) + "}" in mma
    assert set(assemble(out.ptx, "sm_90a").kernels) == {"copy_pipeline_f16"}


@pytest.mark.parametrize(("body", "msg"), [
    # a 16-bit access cannot address half of a fragment register
    ("%h = cute.make_view %ph : !cute.memref<f16, gmem, (32,8):(8,1)>\n"
     "  %r = cute.alloc_rmem : !cute.memref<f16, rmem, (32,8):(8,1)>\n"
     "  %a16 = cute_nvgpu.make_atom : !cute_nvgpu.atom.universal_copy<16>\n"
     "  cute_nvgpu.atom.copy %a16, %h, %r",
     "a .b16 access cannot move 16-bit values held in 32-bit registers"),
    # a swizzled tile: the lowering evaluates plain layouts only
    ("%g = cute.make_view %p : !cute.memref<f32, gmem, (32,4):(4,1)>\n"
     "  %s = cute.alloc_smem : !cute.memref<f32, smem, Sw<1,2,3> o 0 o (32,4):(4,1)>\n"
     "  cute_nvgpu.atom.copy %atom, %g, %s",
     "static, unswizzled layout"),
    # thread stride not a multiple of the access: misaligned for lanes > 0
    ("%g = cute.make_view %p : !cute.memref<f32, gmem, (32,4):(2,1)>\n"
     "  %s = cute.alloc_smem : !cute.memref<f32, smem, (32,4):(4,1)>\n"
     "  cute_nvgpu.atom.copy %atom, %g, %s",
     "the thread stride 2 of 32:2 is not a multiple of the 16-byte access"),
])
def test_copies_that_do_not_lower_say_why(body: str, msg: str) -> None:
    text = ("func.func @k(%p: !cute.ptr<f32, gmem>, %ph: !cute.ptr<f16, gmem>) {\n"
            "  %atom = cute_nvgpu.make_atom : !cute_nvgpu.atom.universal_copy<128>\n"
            f"  {body}\n  func.return\n}}\n")
    mod = driver.parse(text, "bad.mlir")
    with pytest.raises(driver.IRError, match=re.escape(msg)):
        lower(mod, driver.verify(mod))


def test_tmem_store_and_load_lower_to_tcgen05() -> None:
    """tcgen05.st then tcgen05.ld of a 128 x 32 f32 TMEM buffer (sm_100a): each warp at its
    lane quarter ((warp % 4) * 32 << 16 added to the allocated address), waits after each."""
    text = ("func.func @k() {\n"
            "  %t = cute.alloc_tmem : !cute.memref<f32, tmem, (128,32):(32,1)>\n"
            "  %r = cute.alloc_rmem : !cute.memref<f32, rmem, (128,32):(32,1)>\n"
            "  %st = cute_nvgpu.make_atom : !cute_nvgpu.atom.tmem_store<32x32b.x32>\n"
            "  %ld = cute_nvgpu.make_atom : !cute_nvgpu.atom.tmem_load<32x32b.x32>\n"
            "  cute_nvgpu.atom.copy %st, %r, %t\n"
            "  cute_nvgpu.atom.copy %ld, %t, %r\n"
            "  func.return\n}\n")
    mod = driver.parse(text, "tmem.mlir")
    out = lower(mod, driver.verify(mod, "sm_100a"))
    order = ["tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32",
             "tcgen05.st.sync.aligned.32x32b.x32.b32", "tcgen05.wait::st.sync.aligned",
             "tcgen05.ld.sync.aligned.32x32b.x32.b32", "tcgen05.wait::ld.sync.aligned",
             "tcgen05.dealloc.cta_group::1.sync.aligned.b32"]
    pos = [out.ptx.index(w) for w in order]
    assert pos == sorted(pos)
    assert "shl.b32" in out.ptx and out.kernels[0].threads == 128
    assert set(assemble(out.ptx, "sm_100a").kernels) == {"k"}


def test_tmem_copy_register_count_is_checked() -> None:
    text = ("func.func @k() {\n"
            "  %t = cute.alloc_tmem : !cute.memref<f32, tmem, (128,32):(32,1)>\n"
            "  %r = cute.alloc_rmem : !cute.memref<f32, rmem, (128,16):(16,1)>\n"
            "  %ld = cute_nvgpu.make_atom : !cute_nvgpu.atom.tmem_load<32x32b.x32>\n"
            "  cute_nvgpu.atom.copy %ld, %t, %r\n"
            "  func.return\n}\n")
    mod = driver.parse(text, "tmem.mlir")
    with pytest.raises(driver.IRError, match="moves 32 registers per thread, the fragment "
                                             "has 16"):
        lower(mod, driver.verify(mod, "sm_100a"))
