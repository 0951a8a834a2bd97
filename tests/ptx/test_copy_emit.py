"""The copy-atom emitter: instructions, inline-asm templates and test kernels.

* instructions carry the atom's opcode and check register counts, types and operands;
* every inline-asm template numbers its operands 0..n-1 with one constraint each, and
  assembles once registers of the constrained types are substituted;
* the test kernels of every atom assemble on sm_80, sm_90a, sm_100a and sm_120a;
* on a GPU (``gpu`` marker; ``make hw``), every test kernel the GPU runs moves exactly the
  bits the atom's layouts say: ldmatrix/stmatrix lane l's register bit b is reference bit
  ``register_layout(1)(l, b)``, cp.async copies the first ``cp_async_zero_fill`` bytes and
  zero-fills the rest, universal copies round-trip through shared and local memory.
"""

from __future__ import annotations

import atexit
import functools
import re
import shutil
import tempfile
from pathlib import Path

import numpy as np
import pytest

from nvatom.arch import device_target
from nvatom.atoms import copy as C
from nvatom.ptx.builder import Kernel, Module
from nvatom.ptx.copy_emit import (
    CopyEmitError,
    alloc_copy_registers,
    build_copy_test_module,
    cp_async_zero_fill,
    emit_commit_group,
    emit_cp_async,
    emit_ld,
    emit_matrix_copy,
    emit_st,
    emit_universal_copy,
    emit_wait_all,
    emit_wait_group,
    inline_asm,
)
from nvatom.runtime.ptxas import assemble, check


def _body(k: Kernel) -> list[str]:
    return [line.strip() for line in k.emit().splitlines()]


# --------------------------------------------------------------------------- instructions


def test_matrix_copy_instructions() -> None:
    k = Kernel("t")
    x4 = C.copy_atom("atom.ldsm<m8n8.x4.trans>")
    regs = alloc_copy_registers(k, x4)
    addr = k.reg("u32")
    emit_matrix_copy(k, x4, regs, addr)
    st = C.copy_atom("atom.stsm<m8n8.x2>")
    emit_matrix_copy(k, st, regs[:2], f"{addr}+16")
    body = _body(k)
    assert "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%r0, %r1, %r2, %r3}, [%r4];" in body
    assert "stmatrix.sync.aligned.m8n8.x2.shared.b16 [%r4+16], {%r0, %r1};" in body
    with pytest.raises(CopyEmitError, match="takes 4 .b32 register"):
        emit_matrix_copy(k, x4, regs[:2], addr)
    with pytest.raises(CopyEmitError, match="takes .b32 registers, got %fd0"):
        emit_matrix_copy(k, x4, k.regs("f64", 4), addr)


def test_universal_copy_instructions() -> None:
    k = Kernel("t")
    u = C.copy_atom("atom.universal_copy<128>")
    g, s = k.reg("u64"), k.reg("u32")
    regs = emit_universal_copy(k, u, ("gmem", g), ("smem", s))
    assert len(regs) == 4
    out = k.regs("b32", 4)
    emit_universal_copy(k, u, ("rmem", regs), ("rmem", out))
    emit_universal_copy(k, C.copy_atom("atom.universal_copy<16>.v2.b8"), ("smem", s),
                        ("rmem", k.regs("b16", 2)))
    emit_ld(k, C.copy_atom("atom.universal_copy<64>"), "lmem", [k.reg("f64")], g)
    emit_st(k, C.copy_atom("atom.universal_copy<8>"), "gmem", g, [k.reg("u16")])
    body = _body(k)
    for line in ("ld.global.v4.b32 {%r1, %r2, %r3, %r4}, [%rd0];",
                 "st.shared.v4.b32 [%r0], {%r1, %r2, %r3, %r4};", "mov.b32 %r5, %r1;",
                 "ld.shared.v2.b8 {%h0, %h1}, [%r0];", "ld.local.b64 %fd0, [%rd0];",
                 "st.global.b8 [%rd0], %h2;"):
        assert line in body, line
    with pytest.raises(CopyEmitError, match="not 'tmem'"):
        emit_universal_copy(k, u, ("tmem", g), ("rmem", out))
    with pytest.raises(CopyEmitError, match="not 'rmem'"):
        emit_ld(k, u, "rmem", out, g)
    with pytest.raises(CopyEmitError, match="takes .b16 registers"):
        emit_ld(k, C.copy_atom("atom.universal_copy<16>"), "gmem", [k.reg("b32")], g)


def test_cp_async_instructions() -> None:
    k = Kernel("t")
    s, g, n, p, pol = k.reg("u32"), k.reg("u64"), k.reg("u32"), k.reg("pred"), k.reg("b64")
    emit_cp_async(k, C.copy_atom("atom.simt_async_copy<16>"), s, g)
    emit_cp_async(k, C.copy_atom("atom.simt_async_copy<4>.src_size"), s, g, fill=n)
    emit_cp_async(k, C.copy_atom("atom.simt_async_copy<8>.src_size"), s, g, fill=3)
    emit_cp_async(k, C.copy_atom("atom.simt_async_copy<16>.ca.L2::cache_hint.ignore_src"), s, g,
                  fill=p, cache_policy=pol)
    emit_commit_group(k)
    emit_wait_group(k, 1)
    emit_wait_all(k)
    body = _body(k)
    for line in ("cp.async.cg.shared.global [%r0], [%rd0], 16;",
                 "cp.async.ca.shared.global [%r0], [%rd0], 4, %r1;",
                 "cp.async.ca.shared.global [%r0], [%rd0], 8, 3;",
                 "cp.async.ca.shared.global.L2::cache_hint [%r0], [%rd0], 16, %p0, %rd1;",
                 "cp.async.commit_group;", "cp.async.wait_group 1;", "cp.async.wait_all;"):
        assert line in body, line
    zf = C.copy_atom("atom.simt_async_copy<4>.src_size")
    with pytest.raises(CopyEmitError, match="zero-fill operand is required"):
        emit_cp_async(k, zf, s, g)
    with pytest.raises(CopyEmitError, match="zero-fill operand is not taken"):
        emit_cp_async(k, C.copy_atom("atom.simt_async_copy<4>"), s, g, fill=n)
    with pytest.raises(CopyEmitError, match=r"src-size 5 is not in \[0, 4\]"):
        emit_cp_async(k, zf, s, g, fill=5)
    with pytest.raises(CopyEmitError, match="operand is .pred"):
        emit_cp_async(k, C.copy_atom("atom.simt_async_copy<4>.ignore_src"), s, g, fill=n)
    with pytest.raises(CopyEmitError, match="cache-policy operand is required"):
        emit_cp_async(k, C.copy_atom("atom.simt_async_copy<4>.L2::cache_hint"), s, g)
    with pytest.raises(CopyEmitError, match="immediate >= 0"):
        emit_wait_group(k, -1)


# --------------------------------------------------------------------------- inline asm

_PREFIX = {"r": "%r", "h": "%h", "l": "%rd"}


def _templates() -> list[tuple[str, object, str]]:
    out: list[tuple[str, object, str]] = []
    for a in C.COPY_ATOMS:
        if isinstance(a, C.UniversalCopy):
            for res in C.STATE_SPACE:
                out.append((f"{a.name}:ld.{res}", a, res))
                out.append((f"{a.name}:st.{res}", a, "st." + res))
        else:
            out.append((a.name, a, ""))
    return out


def _asm(atom: object, how: str):  # type: ignore[no-untyped-def]
    if how.startswith("st."):
        return inline_asm(atom, how[3:], store=True)  # type: ignore[arg-type]
    return inline_asm(atom, how or None)  # type: ignore[arg-type]


def _substituted(atom: object, how: str) -> str:
    asm = _asm(atom, how)
    letters = [c.lstrip("=") for c in asm.constraint_list]
    assert len(letters) == asm.outputs + asm.inputs
    numbers = sorted({int(n) for n in re.findall(r"%(\d+)", asm.template)})
    assert numbers == list(range(len(letters))), (asm.template, asm.constraints)
    assert all(c.startswith("=") for c in asm.constraint_list[:asm.outputs])

    def sub(m: re.Match[str]) -> str:
        i = int(m.group(1))
        if letters[i] == "n":
            return str(atom.nbytes)  # type: ignore[attr-defined]
        return f"{_PREFIX[letters[i]]}{10 + i}"

    return re.sub(r"%(\d+)", sub, asm.template)


def test_inline_asm_examples() -> None:
    a = inline_asm(C.copy_atom("atom.ldsm<m8n8.x4>"))
    assert a.template == "ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
    assert a.constraints == "=r,=r,=r,=r,r" and (a.outputs, a.inputs) == (4, 1)
    s = inline_asm(C.copy_atom("atom.stsm<m8n8.x2.trans>"))
    assert s.template == "stmatrix.sync.aligned.m8n8.x2.trans.shared.b16 [%0], {%1,%2};"
    assert s.constraints == "r,r,r"
    u = inline_asm(C.copy_atom("atom.universal_copy<128>"), "gmem")
    assert (u.template, u.constraints) == ("ld.global.v4.b32 {%0,%1,%2,%3}, [%4];",
                                          "=r,=r,=r,=r,l")
    u = inline_asm(C.copy_atom("atom.universal_copy<16>"), "smem", store=True)
    assert (u.template, u.constraints) == ("st.shared.b16 [%0], %1;", "r,h")
    cp = inline_asm(C.copy_atom("atom.simt_async_copy<16>.L2::128B.src_size"))
    assert (cp.template, cp.constraints) == (
        "cp.async.cg.shared.global.L2::128B [%0], [%1], %2, %3;", "r,l,n,r")
    cp = inline_asm(C.copy_atom("atom.simt_async_copy<4>.L2::cache_hint.ignore_src"))
    assert cp.template == ("{ .reg .pred p; setp.ne.b32 p, %3, 0; cp.async.ca.shared.global."
                           "L2::cache_hint [%0], [%1], %2, p, %4; }")
    assert cp.constraints == "r,l,n,r,l"
    with pytest.raises(CopyEmitError, match="name the memory side"):
        inline_asm(C.copy_atom("atom.universal_copy<32>"), "rmem")


def test_inline_asm_templates_assemble() -> None:
    head = ".reg .b16 %h<64>;\n.reg .b32 %r<64>;\n.reg .b64 %rd<64>;\n"
    for t, version in (("sm_90a", (8, 0)), ("sm_100a", (8, 6))):
        items = [(n, _substituted(a, how)) for n, a, how in _templates()
                 if a.available_on(t) and (t == "sm_90a" or not a.available_on("sm_90a"))]
        body = "\n".join(text for _, text in items)
        ptx = (f".version {version[0]}.{version[1]}\n.target {t}\n.address_size 64\n"
               f".visible .entry k()\n{{\n{head}{body}\nret;\n}}\n")
        ok, diags = check(ptx, t)
        assert ok, (t, [str(d) for d in diags][:5])


# --------------------------------------------------------------------------- test kernels


@pytest.mark.parametrize("target", ["sm_75", "sm_80", "sm_90a", "sm_100a", "sm_120a"])
def test_every_test_kernel_assembles(target: str) -> None:
    atoms = C.copy_atoms(target)
    module, names = build_copy_test_module(atoms, target)
    assert len(names) == len(atoms)
    asm = assemble(module.emit(), target)
    assert set(asm.kernels) == set(names)
    for name in names:
        assert asm.kernel(name).spills == 0


def test_test_kernel_refuses_what_the_module_lacks() -> None:
    from nvatom.ptx.copy_emit import add_cp_async_test_kernel, add_matrix_copy_test_kernel

    with pytest.raises(CopyEmitError, match="not available on sm_80"):
        add_matrix_copy_test_kernel(Module("sm_80"), C.copy_atom("atom.stsm<m8n8.x1>"), "k")
    with pytest.raises(CopyEmitError, match=r"needs PTX .version 7.5"):
        add_cp_async_test_kernel(Module("sm_80", version=(7, 4)),
                                 C.copy_atom("atom.simt_async_copy<16>.ignore_src"), "k")


# --------------------------------------------------------------------------- on the GPU


class _Gpu:
    """Every copy atom's test kernel for this GPU's target, assembled into one module."""

    def __init__(self) -> None:
        import cupy

        self.target = device_target(cupy.cuda.Device().compute_capability).name
        self.atoms = [a for a in C.copy_atoms(self.target)
                      if not (isinstance(a, C.MatrixCopy) and a.fmt.decompresses)]
        module, names = build_copy_test_module(self.atoms, self.target)
        self.names = {a.name: n for a, n in zip(self.atoms, names, strict=True)}
        tmp = tempfile.mkdtemp(prefix="nvatom-copy-gpu-")
        atexit.register(shutil.rmtree, tmp, True)
        path = Path(tmp) / "copy.cubin"
        path.write_bytes(assemble(module.emit(), self.target).cubin)
        self.module = cupy.RawModule(path=str(path))

    def run(self, atom: C._CopyBase, data: np.ndarray, out_bytes: int) -> np.ndarray:
        import cupy

        if not atom.available_on(self.target):
            pytest.skip(f"{atom.name}: not on {self.target}")
        if atom.name not in self.names:
            pytest.skip(f"{atom.name}: where a widened 6-/4-bit element sits in its byte is "
                        "not modelled")
        src = cupy.asarray(data)
        dst = cupy.full(out_bytes, 0xAB, dtype=cupy.uint8)
        self.module.get_function(self.names[atom.name])((1,), (32,), (src, dst))
        cupy.cuda.runtime.deviceSynchronize()
        return cupy.asnumpy(dst)


@functools.cache
def _gpu() -> _Gpu:
    return _Gpu()


def _expected_matrix(atom: C.MatrixCopy, data: np.ndarray) -> np.ndarray:
    """What the test kernel writes: bytes moved through register_layout(1)."""
    reg = atom.register_layout(1)
    nbytes = atom.registers * 4
    ref_bytes = atom.address_lanes * C.ROW_BITS // 8
    if atom.op == "ldmatrix":
        out = np.empty(32 * nbytes, dtype=np.uint8)
        for t in range(32):
            for b in range(nbytes):
                out[t * nbytes + b] = data[reg(t, 8 * b) // 8]
        return out
    out = np.full(ref_bytes, 0xAB, dtype=np.uint8)
    for t in range(32):
        for b in range(nbytes):
            out[reg(t, 8 * b) // 8] = data[t * nbytes + b]
    return out


@pytest.mark.gpu
@pytest.mark.parametrize("atom", C.COPY_ATOMS, ids=lambda a: a.name)
def test_on_gpu(atom: C._CopyBase) -> None:
    gpu = _gpu()
    rng = np.random.default_rng(abs(hash(atom.name)) % 2**32)
    if isinstance(atom, C.MatrixCopy):
        ref_bytes = atom.address_lanes * C.ROW_BITS // 8
        in_bytes = ref_bytes if atom.op == "ldmatrix" else 32 * atom.registers * 4
        out_bytes = 32 * atom.registers * 4 if atom.op == "ldmatrix" else ref_bytes
        data = rng.integers(0, 256, in_bytes, dtype=np.uint8)
        got = gpu.run(atom, data, out_bytes)
        np.testing.assert_array_equal(got, _expected_matrix(atom, data))
        return
    n = atom.bits // 8  # type: ignore[attr-defined]
    data = rng.integers(0, 256, 32 * n, dtype=np.uint8)
    got = gpu.run(atom, data, 32 * n).reshape(32, n)
    want = data.reshape(32, n).copy()
    if isinstance(atom, C.SimtAsyncCopy):
        for lane in range(32):
            want[lane, cp_async_zero_fill(atom, lane):] = 0
    np.testing.assert_array_equal(got, want)
