"""The typed-tensor sm_80 tile kernel (nvatom.kernels.sm80_tile): at most 60 lines, assembled
by ptxas for sm_80 and sm_90a, and run on the CPU by the small interpreter of the PTX it emits
(tests/kernels/ptx_interp.py, which knows the instructions from the PTX ISA, not from our
layouts).

Small integer inputs keep every product, sum and bf16/f16 rounding exact, so D must equal
``relu(A @ B + bias)`` exactly and every element must be written once.
"""

from __future__ import annotations

import ast
import inspect
import textwrap

import numpy as np
import pytest

from nvatom.kernels import sm80_tile
from nvatom.kernels.sm80_tile import build_sm80_tile
from nvatom.runtime.ptxas import assemble
from tests.kernels.ptx_interp import Machine


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


def _run(ptx: str, a: np.ndarray, b: np.ndarray, bias: np.ndarray) -> np.ndarray:
    d = np.full(64 * 64, np.nan)
    m = Machine(ptx, {"A": (a.ravel().copy(), 2), "B": (b.ravel().copy(), 2),
                      "bias": (bias.astype(np.float64), 4), "D": (d, 2)})
    m.run()
    return d.reshape(64, 64)


@pytest.mark.parametrize(("dtype", "K"), [("bf16", 64), ("f16", 96), ("bf16", 32)])
def test_tile_kernel_computes_relu_of_product_plus_bias(dtype: str, K: int) -> None:
    ptx = build_sm80_tile(dtype, K).emit()
    rng = np.random.default_rng(K)
    a = rng.integers(-2, 3, (64, K)).astype(np.float64)  # |sums| <= 2 K + 8 < 256: exact
    b = rng.integers(-1, 2, (K, 64)).astype(np.float64)
    bias = rng.integers(-8, 9, 64).astype(np.float64)
    d = _run(ptx, a, b, bias)
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
    d = _run(ptx, a_mem, b_mem, bias)
    np.testing.assert_array_equal(d, np.maximum(a @ b + bias, 0))
