"""Every copy atom of the table lowers from ``cute_nvgpu.atom.copy`` and assembles.

One module per target holds one kernel per atom (ptxas runs once per module): universal
copies gmem -> smem -> gmem (and through registers where the access moves 32- or 64-bit
elements), cp.async gmem -> smem with commit/wait, ldmatrix/stmatrix between the atom's
reference smem layout and a register fragment.  The instruction spellings each kernel must
contain are the PTX ISA's ("ld", "st", "cp.async", "ldmatrix", "stmatrix").  Swizzled shared
memory: the lowered address arithmetic is run on the CPU for every lane and compared with
``nvatom.atoms.smem.warp_addresses`` (the layout algebra's addresses of the swizzled tile)."""

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
    return True  # every copy atom lowers (the decompressing ldmatrix: below)


@pytest.mark.parametrize("atom", [a for a in COPY_ATOMS if isinstance(a, MatrixCopy)
                                  and a.fmt.spelling == "b8x16.b4x16_p64"],
                         ids=lambda a: a.name)
def test_the_decompressing_b4_ldmatrix_writes_byte_wide_registers(atom: MatrixCopy) -> None:
    # PTX ISA "ldmatrix", .b8x16.b4x16_p64: each 4-bit element lands in a byte of its own,
    # so each m<R>n<C> matrix is R * C bytes over 32 lanes of 4-byte registers -- twice the
    # registers a packed e2m1 fragment counts: the fragment gets the atom's registers
    r, c = (int(x) for x in re.fullmatch(r"m(\d+)n(\d+)", atom.shape.name).groups())
    want = atom.num * r * c // (32 * 4)
    text, _ = _module("sm_100a", [atom])
    mod = driver.parse(text, "b4.mlir")
    out = lower(mod, driver.verify(mod, "sm_100a"))
    line = next(ln for ln in out.ptx.splitlines() if atom.opcode in ln)
    assert line.split("{")[1].split("}")[0].count("%r") == want, line
    assert set(assemble(out.ptx, "sm_100a").kernels) == {"k0"}


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
    # a swizzled layout's offset that misaligns the access
    ("%g = cute.make_view %p : !cute.memref<f32, gmem, (32,4):(4,1)>\n"
     "  %s = cute.alloc_smem : !cute.memref<f32, smem, Sw<3,4,3> o 2 o (32,4):(4,1)>\n"
     "  cute_nvgpu.atom.copy %atom, %g, %s",
     "the swizzled layout's offset 2 puts the 16-byte access of value offset 0 at element 2, "
     "not a multiple of 4"),
    # swizzles lower in shared memory only
    ("%g = cute.make_view %p : !cute.memref<f32, gmem, Sw<3,4,3> o 0 o (32,4):(4,1)>\n"
     "  %s = cute.alloc_smem : !cute.memref<f32, smem, (32,4):(4,1)>\n"
     "  cute_nvgpu.atom.copy %atom, %g, %s",
     "static layout (swizzled ones in smem only)"),
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
    # a verify diagnostic (issue 16's invariant: what verifies lowers)
    with pytest.raises(driver.IRError, match=r"moves 32 32-bit registers per thread, but the "
                                             r"fragment \(128,16\):\(16,1\) of f32 holds 16"):
        driver.verify(mod, "sm_100a")


# --------------------------------------------------------------------------- swizzled smem

# The (lane, value) layout of ldmatrix/stmatrix .x4 over the top-left 16 x 16 block of a
# row-major 16 x 64 tile of 16-bit elements (lane l = t + 8 j0 + 16 j1: row 8 j0 + t, columns
# 8 j1 ..): the order of nvatom.atoms.smem.warp_addresses("ldsm.x4") for that block.
_X4_ROWS = "((8,2,2),8):((64,512,8),1)"
# Sw<3,4,3> (the issue's example) and the hardware's SW32/SW64/SW128 modes in 16-bit elements
_SWIZZLES = ["Sw<3,4,3>", "Sw<1,3,3>", "Sw<2,3,3>", "Sw<3,3,3>"]


def _swizzled_kernel(i: int, sw: str) -> str:
    return (f"func.func @sw{i}(%pa: !cute.ptr<f16, gmem>, %pd: !cute.ptr<f16, gmem>) {{\n"
            "  %cp = cute_nvgpu.make_atom : !cute_nvgpu.atom.simt_async_copy<16>\n"
            "  %ld = cute_nvgpu.make_atom : !cute_nvgpu.atom.ldsm<m8n8.x4>\n"
            "  %st = cute_nvgpu.make_atom : !cute_nvgpu.atom.stsm<m8n8.x4>\n"
            "  %out = cute_nvgpu.make_atom : !cute_nvgpu.atom.universal_copy<128>\n"
            "  %ga = cute.make_view %pa : !cute.memref<f16, gmem, ((8,2,2),8):((16,128,8),1)>\n"
            "  %gd = cute.make_view %pd : !cute.memref<f16, gmem, ((8,2,2),8):((16,128,8),1)>\n"
            f"  %sa = cute.alloc_smem : !cute.memref<f16, smem, {sw} o 0 o {_X4_ROWS}>\n"
            "  cute_nvgpu.atom.copy %cp, %ga, %sa\n"
            "  cute_nvgpu.arch.cp_async_commit_group\n"
            "  cute_nvgpu.arch.cp_async_wait_group {pending = 0}\n"
            "  cute_nvgpu.arch.sync_threads\n"
            "  %r = cute.alloc_rmem : !cute.memref<f16, rmem, (32,(2,4)):(2,(1,64))>\n"
            "  cute_nvgpu.atom.copy %ld, %sa, %r\n"
            "  cute_nvgpu.arch.sync_threads\n"
            "  cute_nvgpu.atom.copy %st, %r, %sa\n"
            "  cute_nvgpu.arch.sync_threads\n"
            "  cute_nvgpu.atom.copy %out, %sa, %gd\n"
            "  func.return\n}\n")


# The u32 integer instructions the address arithmetic uses (PTX ISA semantics, mod 2^32).
_U32 = {
    "mov.u32": lambda a: a,
    "and.b32": lambda a, b: a & b,
    "xor.b32": lambda a, b: a ^ b,
    "shr.u32": lambda a, b: a >> b,
    "shl.b32": lambda a, b: (a << b) & 0xFFFFFFFF,
    "add.u32": lambda a, b: (a + b) & 0xFFFFFFFF,
    "mad.lo.u32": lambda a, b, c: (a * b + c) & 0xFFFFFFFF,
}
_SMEM_OPS = ("cp.async", "ldmatrix", "stmatrix", "ld.shared", "st.shared")


def _shared_addresses(body: str, lane: int) -> list[tuple[str, int]]:
    """Run the kernel's u32 arithmetic for thread ``lane`` (shared symbols at 0) and return
    (opcode, byte address) of every shared-memory access in order."""
    env: dict[str, int] = {}

    def val(a: str) -> int:
        if a == "%tid.x":
            return lane
        if a.startswith("%"):
            return env[a]
        return int(a) if a.lstrip("-").isdigit() else 0  # a .shared symbol: base 0

    out = []
    for line in body.splitlines():
        m = re.fullmatch(r"\s*([\w.:]+) (.*);", line)
        if not m:
            continue
        op, args = m.group(1), m.group(2)
        if op in _U32:
            regs = [a.strip() for a in args.split(",")]
            env[regs[0]] = _U32[op](*(val(a) for a in regs[1:]))
        elif op.startswith(_SMEM_OPS) and "[" in args:  # not cp.async.commit/wait_group
            # the shared operand: [reg] or [reg+imm] (cp.async: the first bracket)
            addr = re.findall(r"\[(%r\d+)(?:\+(\d+))?\]", args)[0]
            out.append((op, val(addr[0]) + int(addr[1] or 0)))
    return out


def test_swizzled_smem_copies_lower_and_assemble_and_address_what_the_layout_says() -> None:
    """cp.async -> ldmatrix -> stmatrix -> ld.shared.v4 through swizzled smem, per swizzle:
    every lane's shared address (the lowered u32 arithmetic run on the CPU) is the one
    ``nvatom.atoms.smem.warp_addresses`` gives for the swizzled 16 x 64 tile, for all four
    instructions (one ptxas run for the whole module)."""
    from nvatom.atoms.smem import warp_addresses
    from nvatom.layout import ComposedLayout

    text = "".join(_swizzled_kernel(i, sw) for i, sw in enumerate(_SWIZZLES))
    mod = driver.parse(text, "swizzled.mlir")
    assert driver.print_module(mod) == text
    out = lower(mod, driver.verify(mod, "sm_90a"))
    bodies = out.ptx.split(".entry ")[1:]
    assert len(bodies) == len(_SWIZZLES)
    ops = ["cp.async.cg.shared.global", "ldmatrix.sync.aligned.m8n8.x4.shared.b16",
           "stmatrix.sync.aligned.m8n8.x4.shared.b16", "ld.shared.v4.b32"]
    for sw, body in zip(_SWIZZLES, bodies, strict=True):
        tile = ComposedLayout(f"{sw} o 0 o (16,64):(64,1)")
        want = [la.address for la in warp_addresses(tile, "ldsm.x4", element_bits=16)[0].lanes]
        for lane in range(32):
            got = _shared_addresses(body, lane)
            assert [o for o, _ in got] == ops, (sw, got)
            assert {a for _, a in got} == {want[lane]}, (sw, lane, got, want[lane])
    assert any(want[lane] != 128 * (lane % 16) + 16 * (lane // 16) for lane in range(32))
    assert set(assemble(out.ptx, "sm_90a").kernels) == {f"sw{i}" for i in range(len(_SWIZZLES))}


def test_swizzled_copy_example_file_lowers_and_assembles() -> None:
    text = (HERE / "copy_swizzled.mlir").read_text()
    mod = driver.parse(text, "copy_swizzled.mlir")  # round trip: test_ir_files.py
    out = lower(mod, driver.verify(mod, "sm_90a"))
    assert out.ptx.count("xor.b32") == 4  # one swizzle per shared access
    assert set(assemble(out.ptx, "sm_90a").kernels) == {"copy_swizzled_f16"}


_LDSM_X4 = ("  %a = cute_nvgpu.make_atom : !cute_nvgpu.atom.ldsm<m8n8.x4>\n"
            "  %s = cute.alloc_smem : !cute.memref<f16, smem, {}>\n"
            "  %r = cute.alloc_rmem : !cute.memref<f16, rmem, (32,(2,4)):(2,(1,64))>\n"
            "  cute_nvgpu.atom.copy %a, %s, %r\n")


@pytest.mark.parametrize(("elem", "body", "msg"), [
    # the swizzle's lowest bit (4 elements) splits a 16-byte ldmatrix row (8 f16): the
    # verifier says so in the specification's words (tests/ir/invalid_copy.mlir)
    ("f16", _LDSM_X4.format("Sw<3,2,3> o 0 o (32,8):(8,1)"),
     "'atom.ldsm<m8n8.x4>' cannot vectorize copy to 8 elements (static strides must be 1): "
     "the swizzle Sw<3,2,3> permutes units of 4 16-bit element(s), less than the 16-byte "
     "access"),
    # a swizzled ldmatrix operand's values must be one row in order
    ("f16", _LDSM_X4.format("Sw<3,4,3> o 0 o (32,8):(8,2)"),
     "'atom.ldsm<m8n8.x4>' takes a swizzled src Sw o offset o (lane, value) with 32 lanes and "
     "the values one row 8:1, but got Sw<3,4,3> o 0 o (32,8):(8,2)"),
    # sub-byte elements: not implemented
    ("u4", "  %a = cute_nvgpu.make_atom : !cute_nvgpu.atom.universal_copy<128>\n"
     "  %g = cute.make_view %p : !cute.memref<u4, gmem, (32,32):(32,1)>\n"
     "  %s = cute.alloc_smem : !cute.memref<u4, smem, Sw<3,5,3> o 0 o (32,32):(32,1)>\n"
     "  cute_nvgpu.atom.copy %a, %g, %s\n",
     "a swizzled copy operand of 4-bit elements does not lower"),
])
def test_swizzled_copies_that_do_not_lower_say_why(elem: str, body: str, msg: str) -> None:
    text = f"func.func @k(%p: !cute.ptr<{elem}, gmem>) {{\n{body}  func.return\n}}\n"
    mod = driver.parse(text, "bad.mlir")
    with pytest.raises(driver.IRError, match=re.escape(msg)):
        lower(mod, driver.verify(mod, "sm_90a"))


def test_thread_invariant_swizzled_operand_folds_the_swizzle_at_build_time() -> None:
    """A rank-1 smem layout (the same elements for every thread): each 16-byte access's
    address is the swizzle of its element offset, computed at build time (no xor emitted)."""
    from nvatom.layout import Swizzle

    text = ("func.func @k(%p: !cute.ptr<f16, gmem>) {\n"
            "  %a = cute_nvgpu.make_atom : !cute_nvgpu.atom.universal_copy<128>\n"
            "  %g = cute.make_view %p : !cute.memref<f16, gmem, 256:1>\n"
            "  %s = cute.alloc_smem : !cute.memref<f16, smem, Sw<3,4,3> o 0 o 256:1>\n"
            "  cute_nvgpu.atom.copy %a, %g, %s\n  func.return\n}\n")
    mod = driver.parse(text, "static.mlir")
    out = lower(mod, driver.verify(mod, "sm_90a"))
    assert "xor.b32" not in out.ptx
    got = [a for _, a in _shared_addresses(out.ptx, 0)]
    assert got == [2 * Swizzle(3, 4, 3)(8 * j) for j in range(32)]
    assert got != [16 * j for j in range(32)]
    assert set(assemble(out.ptx, "sm_90a").kernels) == {"k"}
