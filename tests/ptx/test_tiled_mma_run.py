"""The tutorial's tiled kernel, run on the CPU: a small interpreter of the PTX it emits.

The builder's kernel (nvatom.ptx.tiled_mma_emit) and the IR's (tests/ir/tiled_gemm.mlir) are
executed instruction by instruction for all 128 threads; ``mma.sync.m16n8k16`` bf16 -> f32 is
executed per warp with the PTX ISA's fragment formulas, written here ("Matrix Fragments for
mma.m16n8k16 with floating point type": g = lane >> 2, t = lane % 4; a0,a1 (g, 2t + i),
a2,a3 (g + 8, 2t + i), a4..a7 the same 8 columns on; b0,b1 (k = 2t + i, n = g), b2,b3 k + 8;
c0,c1 (g, 2t + i), c2,c3 (g + 8, 2t + i)).  Small integer inputs make every product and sum
exact, so D must equal A @ Bt^T exactly and every element must be written once.  The GPU
runs the same kernels in tests/gpu/test_tutorial_gpu.py.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from nvatom.atoms.registry import mma_form
from nvatom.atoms.tiled_mma import make_tiled_mma
from nvatom.layout import Layout
from nvatom.ptx import tiled_mma_emit as tm
from nvatom.ptx.builder import Module

M = N = K = 64
THREADS = 128
_BASES = (0x1000, 0x100000, 0x200000)  # A, Bt, D in a flat address space
# The integer instructions the address arithmetic uses (no overflow at these sizes).
_ALU = {"shr.u32": lambda x, y: x >> y, "and.b32": lambda x, y: x & y,
        "shl.b32": lambda x, y: x << y, "add.u32": lambda x, y: x + y,
        "add.s64": lambda x, y: x + y, "mad.lo.u32": lambda x, y, z: x * y + z}


def _builder_ptx() -> str:
    tiled = make_tiled_mma(mma_form("sm80.mma.m16n8k16.f32.bf16.bf16.f32"), (2, 2, 1),
                           (64, 64, 16))
    mod = Module("sm_80", features=[tiled.atom.feature])
    k = mod.kernel("gemm_tile")
    pa, pb, pd = (tm.global_pointer(k, p) for p in ("A", "Bt", "D"))
    tid = tm.thread_index(k)
    acc = tm.zero_fragment(k, tiled)
    for kt in range(K // 16):
        a = tm.load_fragment(k, tiled, "A", Layout((M, K), (K, 1)), pa, tid, tile=(0, kt))
        b = tm.load_fragment(k, tiled, "B", Layout((N, K), (K, 1)), pb, tid, tile=(0, kt))
        tm.emit_tiled_mma(k, tiled, acc, a, b, acc)
    tm.store_fragment(k, tiled, acc, Layout((M, N), (N, 1)), pd, tid)
    return mod.emit()


def _ir_ptx() -> str:
    pytest.importorskip("xdsl")
    from nvatom.ir import driver
    from nvatom.ir.lower import lower

    path = Path(__file__).parent.parent / "ir" / "tiled_gemm.mlir"
    mod = driver.parse(path.read_text(), path.name)
    return lower(mod, driver.verify(mod, "sm_80")).ptx


class _Memory:
    def __init__(self, a: np.ndarray, bt: np.ndarray) -> None:
        self.arrays = {_BASES[0]: (a, 2), _BASES[1]: (bt, 2),
                       _BASES[2]: (np.full((M, N), np.nan), 4)}

    def _find(self, addr: int) -> tuple[np.ndarray, int]:
        for base, (arr, esize) in self.arrays.items():
            if base <= addr < base + arr.size * esize:
                assert (addr - base) % esize == 0, hex(addr)
                return arr, (addr - base) // esize
        raise AssertionError(f"address {addr:#x} is outside A, Bt and D")

    def load(self, addr: int, kind: str) -> object:
        arr, i = self._find(addr)
        return (arr.flat[i], arr.flat[i + 1]) if kind == "b32" else arr.flat[i]

    def store(self, addr: int, value: float) -> None:
        arr, i = self._find(addr)
        assert np.isnan(arr.flat[i]), f"element {i} of D written twice"
        arr.flat[i] = value


def _mma(regs: list[dict], d: list[str], a: list[str], b: list[str], c: list[str]) -> None:
    """The MMA of every warp of the threads whose registers ``regs`` are."""
    for w in range(len(regs) // 32):
        am, bm, cm = np.zeros((16, 16)), np.zeros((16, 8)), np.zeros((16, 8))
        for lane in range(32):
            r, g, t = regs[32 * w + lane], lane >> 2, lane % 4
            for i in range(4):
                row, col = g + 8 * (i % 2), 2 * t + 8 * (i // 2)
                am[row, col], am[row, col + 1] = r[a[i]]
                cm[g + 8 * (i // 2), 2 * t + i % 2] = r[c[i]]
            for i in range(2):
                bm[2 * t + 8 * i, g], bm[2 * t + 8 * i + 1, g] = r[b[i]]
        dm = am @ bm + cm
        for lane in range(32):
            r, g, t = regs[32 * w + lane], lane >> 2, lane % 4
            for i in range(4):
                r[d[i]] = dm[g + 8 * (i // 2), 2 * t + i % 2]


def _run(ptx: str, a: np.ndarray, bt: np.ndarray) -> np.ndarray:
    mem = _Memory(a, bt)
    params = re.findall(r"\.param \.u64 (\w+)", ptx)
    assert len(params) == 3
    base_of = dict(zip(params, _BASES, strict=True))
    regs: list[dict] = [{} for _ in range(THREADS)]
    body = ptx[ptx.index("{", ptx.index(".entry")):]
    for line in body.splitlines():
        m = re.match(r"\s*([a-z][\w.:]*)\s+(.*);$", line)
        if not m or m.group(1) in (".reg", "ret"):
            continue
        op, args = m.groups()
        if op.startswith("mma.sync"):
            _mma(regs, *(g.split(", ") for g in re.findall(r"\{([^}]*)\}", args)))
            continue
        ops = [x.strip() for x in args.split(",")]
        for tid, r in enumerate(regs):
            def v(x: str, r: dict = r) -> int:
                return r[x] if x.startswith("%") else int(x)

            if op == "ld.param.u64":
                r[ops[0]] = base_of[ops[1].strip("[]")]
            elif op in ("cvta.to.global.u64", "cvt.u64.u32"):
                r[ops[0]] = r[ops[1]]
            elif op == "mov.u32":
                r[ops[0]] = tid if ops[1] == "%tid.x" else v(ops[1])
            elif op in ("mov.f32", "mov.b32"):
                assert ops[1] in ("0f00000000", "0"), line
                r[ops[0]] = 0
            elif op in _ALU:
                r[ops[0]] = _ALU[op](*(v(o) for o in ops[1:]))
            elif op in ("ld.global.b32", "ld.global.f32"):
                reg, off = re.fullmatch(r"\[(%\w+)\+(\d+)\]", ops[1]).groups()  # type: ignore[union-attr]
                r[ops[0]] = mem.load(r[reg] + int(off), op.rsplit(".", 1)[1])
            elif op == "st.global.f32":
                reg, off = re.fullmatch(r"\[(%\w+)\+(\d+)\]", ops[0]).groups()  # type: ignore[union-attr]
                mem.store(r[reg] + int(off), r[ops[1]])
            else:
                raise AssertionError(f"the interpreter does not know '{line.strip()}'")
    return mem.arrays[_BASES[2]][0]


@pytest.mark.parametrize("source", ["builder", "ir"])
def test_tiled_kernel_computes_the_product(source: str) -> None:
    ptx = _builder_ptx() if source == "builder" else _ir_ptx()
    rng = np.random.default_rng(7)
    a = rng.integers(-8, 9, (M, K)).astype(np.float64)
    bt = rng.integers(-8, 9, (N, K)).astype(np.float64)
    d = _run(ptx, a, bt)
    assert not np.isnan(d).any(), "some elements of D were never written"
    np.testing.assert_array_equal(d, a @ bt.T)
