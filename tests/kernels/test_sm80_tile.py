"""The typed-tensor sm_80 tile kernel (nvatom.kernels.sm80_tile): at most 60 lines, assembled
by ptxas for sm_80 and sm_90a, and run on the CPU by a small interpreter of the PTX it emits.

The interpreter knows the instructions from the PTX ISA, not from our layouts:

* ``cp.async`` copies 16 bytes when its group is waited for (``cp.async.wait_group N``
  completes all but the newest N committed groups), so a missing wait reads the NaN that
  shared memory starts as;
* ``ldmatrix .m8n8 .x{1,2,4} [.trans] .b16``: lanes ``8 j .. 8 j + 7`` give the row addresses
  of matrix ``j``; register ``j`` of lane ``t`` holds row ``t / 4``, columns ``2 (t % 4) + {0,
  1}`` of matrix ``j`` (with ``.trans``: column ``t / 4``, rows ``2 (t % 4) + {0, 1}``) -- the
  ISA's "Matrix fragment for ldmatrix" figure;
* ``mma.sync.m16n8k16`` is tests/ptx/test_tiled_mma_run.py's (the ISA's fragment formulas).

Small integer inputs keep every product, sum and bf16/f16 rounding exact, so D must equal
``relu(A @ B + bias)`` exactly and every element must be written once.
"""

from __future__ import annotations

import ast
import inspect
import re
import textwrap

import numpy as np
import pytest

from nvatom.kernels import sm80_tile
from nvatom.kernels.sm80_tile import build_sm80_tile
from nvatom.runtime.ptxas import assemble
from tests.ptx.test_tiled_mma_run import _mma

THREADS = 128
_GLOBAL = {"A": 0x100000, "B": 0x200000, "bias": 0x300000, "D": 0x400000}
_ALU = {"shr.u32": lambda x, y: x >> y, "and.b32": lambda x, y: x & y,
        "shl.b32": lambda x, y: x << y, "add.u32": lambda x, y: x + y,
        "xor.b32": lambda x, y: x ^ y, "mul.lo.u32": lambda x, y: x * y,
        "add.s64": lambda x, y: x + y, "mad.lo.u32": lambda x, y, z: x * y + z,
        "div.u32": lambda x, y: x // y, "rem.u32": lambda x, y: x % y}


def test_kernel_body_is_at_most_60_lines() -> None:
    src = textwrap.dedent(inspect.getsource(build_sm80_tile))
    fn = ast.parse(src).body[0]
    assert isinstance(fn, ast.FunctionDef)
    first = fn.body[0].lineno  # the docstring included; blank lines not
    lines = [ln for ln in src.splitlines()[first - 1:fn.end_lineno] if ln.strip()]
    assert len(lines) <= 60, len(lines)


@pytest.mark.parametrize("dtype", ["bf16", "f16"])
@pytest.mark.parametrize("target", ["sm_80", "sm_90a"])
def test_tile_kernel_assembles(dtype: str, target: str) -> None:
    ptx = build_sm80_tile(dtype, 64, target).emit()
    k = assemble(ptx, target).kernel(sm80_tile.kernel_name(dtype, 64))
    assert k.spills == 0 and k.shared_bytes == 4 * 64 * 32 * 2  # two stages of A and B
    # 2 x 2 warps, each 2 (M) x 4 (N) atoms, per K step of 16
    assert ptx.count("mma.sync.aligned.m16n8k16.row.col.f32") == 8 * 4
    assert ptx.count("ldmatrix.sync.aligned.m8n8.x4.shared.b16") == 2 * 4
    assert ptx.count("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16") == 4 * 4


def _address(regs: dict, text: str) -> int:
    """``[%r]`` or ``[%r+imm]`` (PTX ISA "Addresses as Operands")."""
    m = re.fullmatch(r"\[?(%\w+)(?:\+(\d+))?\]?", text.strip())
    assert m is not None, text
    return regs[m.group(1)] + int(m.group(2) or 0)


class _Machine:
    def __init__(self, ptx: str, a: np.ndarray, b: np.ndarray, bias: np.ndarray) -> None:
        self.glob = {_GLOBAL["A"]: (a.ravel().copy(), 2), _GLOBAL["B"]: (b.ravel().copy(), 2),
                     _GLOBAL["bias"]: (bias.astype(np.float64), 4),
                     _GLOBAL["D"]: (np.full(64 * 64, np.nan), 2)}
        self.shared_base, top = {}, 0
        for name, n in re.findall(r"\.shared \.align \d+ \.b8 (\w+)\[(\d+)\]", ptx):
            self.shared_base[name] = top
            top += int(n)
        self.smem = np.full(top // 2, np.nan)  # 16-bit elements
        self.groups: list[list[tuple[int, int]]] = [[]]
        self.regs: list[dict] = [{} for _ in range(THREADS)]

    def _global(self, addr: int) -> tuple[np.ndarray, int]:
        for base, (arr, esize) in self.glob.items():
            if base <= addr < base + arr.size * esize:
                assert (addr - base) % esize == 0, hex(addr)
                return arr, (addr - base) // esize
        raise AssertionError(f"global address {addr:#x} is outside A, B, bias and D")

    def _smem_row(self, addr: int) -> np.ndarray:
        assert addr % 16 == 0 and 0 <= addr < 2 * self.smem.size, addr
        row = self.smem[addr // 2: addr // 2 + 8]
        assert not np.isnan(row).any(), f"ldmatrix reads shared bytes {addr} not yet copied"
        return row

    def _ldmatrix(self, op: str, dst: list[str], addr: str) -> None:
        trans = ".trans" in op
        for w in range(THREADS // 32):
            lanes = self.regs[32 * w: 32 * w + 32]
            for j, reg in enumerate(dst):
                rows = [self._smem_row(_address(lanes[8 * j + r], addr)) for r in range(8)]
                for t, r in enumerate(lanes):
                    c = 2 * (t % 4)
                    pair = ((rows[c][t // 4], rows[c + 1][t // 4]) if trans
                            else (rows[t // 4][c], rows[t // 4][c + 1]))
                    r[reg] = pair

    def run(self, ptx: str) -> np.ndarray:
        body = ptx[ptx.index("{", ptx.index(".entry")):]
        for line in body.splitlines():
            m = re.match(r"\s*([a-z][\w.:]*)\s+(.*);$", line) or re.match(
                r"\s*([a-z][\w.:]*);$", line)
            if not m or m.group(1) in (".reg", ".shared", "ret"):
                continue
            op, args = m.group(1), (m.group(2) if m.lastindex == 2 else "")
            self.step(line, op, args)
        assert self.groups == [[]], "cp.async groups were never waited for"
        return self.glob[_GLOBAL["D"]][0].reshape(64, 64)

    def step(self, line: str, op: str, args: str) -> None:
        if op.startswith("mma.sync"):
            _mma(self.regs, *(g.split(", ") for g in re.findall(r"\{([^}]*)\}", args)))
            return
        if op.startswith("ldmatrix"):
            regs = re.search(r"\{([^}]*)\}", args).group(1).split(", ")  # type: ignore[union-attr]
            self._ldmatrix(op, regs, re.search(r"\[([^\]]+)\]", args).group(1))  # type: ignore[union-attr]
            return
        if op == "cp.async.commit_group":
            self.groups.append([])
            return
        if op == "cp.async.wait_group":
            n = int(args)
            done, self.groups = self.groups[:-1], self.groups[-1:]
            keep = done[len(done) - n:] if n else []
            for group in done[:len(done) - n]:
                for dst, src in group:
                    assert dst % 16 == 0 and 0 <= dst // 2 + 8 <= self.smem.size, dst
                    arr, i = self._global(src)
                    self.smem[dst // 2: dst // 2 + 8] = arr[i:i + 8]
            self.groups = keep + self.groups
            return
        if op == "bar.sync":
            return
        ops = [x.strip() for x in re.sub(r"\{([^}]*)\}", lambda g: g.group(1).replace(",", ";"),
                                         args).split(",")]
        for tid, r in enumerate(self.regs):
            def v(x: str, r: dict = r) -> int:
                return r[x] if x.startswith("%") else int(x)

            if op == "ld.param.u64":
                r[ops[0]] = _GLOBAL[ops[1].strip("[]")]
            elif op in ("cvta.to.global.u64", "cvt.u64.u32"):
                r[ops[0]] = r[ops[1]]
            elif op == "mov.u32":
                src = ops[1]
                r[ops[0]] = (tid if src == "%tid.x" else self.shared_base[src]
                             if src in self.shared_base else v(src))
            elif op == "mov.f32":
                assert ops[1] == "0f00000000", line
                r[ops[0]] = 0.0
            elif op == "mov.b32":
                r[ops[0]] = r[ops[1]]
            elif op in _ALU:
                r[ops[0]] = _ALU[op](*(v(o) for o in ops[1:]))
            elif op == "cp.async.cg.shared.global":
                assert ops[2] == "16"
                self.groups[-1].append((_address(r, ops[0]), _address(r, ops[1])))
            elif op == "ld.global.v2.b32":
                lo, hi = ops[0].split(";")
                arr, i = self._global(_address(r, ops[1]))
                r[lo.strip()], r[hi.strip()] = arr[i], arr[i + 1]
            elif op == "add.f32":
                r[ops[0]] = r[ops[1]] + r[ops[2]]
            elif op == "max.f32":
                assert ops[2] == "0f00000000", line
                r[ops[0]] = max(r[ops[1]], 0.0)
            elif op in ("cvt.rn.bf16x2.f32", "cvt.rn.f16x2.f32"):
                r[ops[0]] = (r[ops[2]], r[ops[1]])  # the first source goes high
            elif op == "st.global.b32":
                arr, i = self._global(_address(r, ops[0]))
                assert np.isnan(arr[i:i + 2]).all(), f"D element {i} written twice"
                arr[i:i + 2] = r[ops[1]]
            else:
                raise AssertionError(f"the interpreter does not know '{line.strip()}'")


@pytest.mark.parametrize(("dtype", "K"), [("bf16", 64), ("f16", 96), ("bf16", 32)])
def test_tile_kernel_computes_relu_of_product_plus_bias(dtype: str, K: int) -> None:
    ptx = build_sm80_tile(dtype, K).emit()
    rng = np.random.default_rng(K)
    a = rng.integers(-2, 3, (64, K)).astype(np.float64)  # |sums| <= 2 K + 8 < 256: exact
    b = rng.integers(-1, 2, (K, 64)).astype(np.float64)
    bias = rng.integers(-8, 9, 64).astype(np.float64)
    d = _Machine(ptx, a, b, bias).run(ptx)
    assert not np.isnan(d).any(), "some elements of D were never written"
    np.testing.assert_array_equal(d, np.maximum(a @ b + bias, 0))


@pytest.mark.parametrize(("a_major", "b_major"), [("M", "N"), ("K", "K"), ("M", "K")])
def test_other_storage_orders_compute_the_same(a_major: str, b_major: str) -> None:
    """M-major A (ldmatrix .x4.trans, 128-byte swizzle) and K-major B (.x2 without .trans,
    64-byte swizzle): the tensor layer's other partitions, run by the same interpreter."""
    ptx = build_sm80_tile("f16", 64, a_major=a_major, b_major=b_major).emit()
    name = sm80_tile.kernel_name("f16", 64, a_major, b_major)
    assert assemble(ptx, "sm_80").kernel(name).spills == 0
    rng = np.random.default_rng(3)
    a = rng.integers(-2, 3, (64, 64)).astype(np.float64)
    b = rng.integers(-1, 2, (64, 64)).astype(np.float64)
    bias = rng.integers(-8, 9, 64).astype(np.float64)
    a_mem = a if a_major == "K" else np.ascontiguousarray(a.T)  # A^T is K x M row-major
    b_mem = b if b_major == "N" else np.ascontiguousarray(b.T)  # B^T is N x K row-major
    d = _Machine(ptx, a_mem, b_mem, bias).run(ptx)
    np.testing.assert_array_equal(d, np.maximum(a @ b + bias, 0))
