"""The ragged typed-tensor GEMM (nvatom.kernels.sm80_gemm_tiled): assembled by ptxas for
sm_80 and sm_90a, and run on the CPU by the PTX interpreter (tests/kernels/ptx_interp.py) on
ragged shapes, every CTA of the grid, against numpy float64.

The storage of A, B and D is padded to the leading dimensions with NaN: a copy that reads
past K, M or N (a wrong src-size) makes D NaN, a store outside M x N leaves a non-NaN in the
padding.  Small integer inputs keep every product, sum and bf16/f16 rounding exact, so D
must equal the float64 reference exactly.
"""

from __future__ import annotations

import ast
import inspect
import textwrap
from collections.abc import Callable

import numpy as np
import pytest

from nvatom.kernels import sm80_gemm_tiled as G
from nvatom.runtime.ptxas import assemble
from tests.kernels.ptx_interp import Machine, planted_bugs


def _ld(n: int) -> int:
    return max(8, -(-n // 8) * 8)  # 16-byte rows of 16-bit elements


def test_kernel_function_is_at_most_80_lines() -> None:
    src = textwrap.dedent(inspect.getsource(G.build_sm80_gemm_tiled))
    fn = ast.parse(src).body[0]
    assert isinstance(fn, ast.FunctionDef)
    lines = [ln for ln in src.splitlines()[fn.body[0].lineno - 1:fn.end_lineno] if ln.strip()]
    assert len(lines) <= 80, len(lines)


@pytest.mark.parametrize("dtype", ["bf16", "f16"])
@pytest.mark.parametrize("target", ["sm_80", "sm_90a"])
def test_assembles_without_spills(dtype: str, target: str) -> None:
    ptx = G.build_sm80_gemm_tiled(dtype, target).emit()
    k = assemble(ptx, target).kernel(G.kernel_name(dtype))
    assert k.spills == 0 and k.shared_bytes == 3 * 2 * 64 * 32 * 2  # 3 stages of A and B
    assert ptx.count("mma.sync.aligned.m16n8k16.row.col.f32") == 8 * 2  # one loop body
    assert ptx.count("bra.uni") == 1  # the run-time K loop; ragged edges need no branch


def _run(m: int, n: int, kk: int, *, a_major: str = "K", b_major: str = "N", stages: int = 3,
         bias: bool = True, relu: bool = False, dtype: str = "bf16", seed: int = 0,
         plant: Callable[[str], str] = lambda p: p) -> None:
    rng = np.random.default_rng(seed)
    a = rng.integers(-2, 3, (m, kk)).astype(np.float64)
    b = rng.integers(-1, 2, (kk, n)).astype(np.float64)
    vb = rng.integers(-8, 9, n).astype(np.float64)

    def padded(x: np.ndarray) -> tuple[np.ndarray, int]:  # row-major, NaN past the columns
        ld = _ld(x.shape[1])
        mem = np.full((x.shape[0], ld), np.nan)
        mem[:, :x.shape[1]] = x
        return mem.ravel(), ld

    a_mem, lda = padded(a if a_major == "K" else a.T)
    b_mem, ldb = padded(b if b_major == "N" else b.T)
    ldd = _ld(n)
    d = np.full(m * ldd, np.nan)
    params: dict[str, object] = {"M": m, "N": n, "K": kk, "lda": lda, "ldb": ldb, "ldd": ldd,
                                 "A": (a_mem, 2), "B": (b_mem, 2)}
    if bias:
        params["bias"] = (vb, 4)
    params["D"] = (d, 2)
    ptx = G.build_sm80_gemm_tiled(dtype, a_major=a_major, b_major=b_major, stages=stages,
                                  bias=bias, relu=relu).emit()
    mach = Machine(plant(ptx), params)
    gx, gy, _ = G.grid(m, n)
    for y in range(gy):
        for x in range(gx):
            mach.run((x, y))
    ref = a @ b + (vb if bias else 0)
    if relu:
        ref = np.maximum(ref, 0)
    out = d.reshape(m, ldd)
    assert np.isnan(out[:, n:]).all(), "a store past N"
    assert not np.isnan(out[:, :n]).any(), f"{np.isnan(out[:, :n]).sum()} outputs unwritten"
    np.testing.assert_array_equal(out[:, :n], ref)


@pytest.mark.parametrize(("m", "n", "kk"), [(70, 37, 50), (64, 64, 64), (1, 1, 1),
                                            (5, 66, 100)])
def test_ragged_shapes_match_float64(m: int, n: int, kk: int) -> None:
    _run(m, n, kk, seed=m + n + kk)


@pytest.mark.parametrize(("a_major", "b_major", "stages", "bias", "relu"),
                         [("M", "N", 2, False, True), ("K", "K", 4, True, True),
                          ("M", "K", 3, False, False)])
def test_storage_orders_stages_and_epilogues(a_major: str, b_major: str, stages: int,
                                             bias: bool, relu: bool) -> None:
    _run(67, 45, 83, a_major=a_major, b_major=b_major, stages=stages, bias=bias, relu=relu,
         dtype="f16", seed=stages)


_PLANTED = planted_bugs(3)


@pytest.mark.parametrize("bug", sorted(_PLANTED))
def test_the_interpreter_catches_planted_bugs(bug: str) -> None:
    """The CPU check is not vacuous: each planted PTX bug fails it (NaN padding read, a stage
    read before it lands, a store past N, the K loop cut short)."""
    with pytest.raises(AssertionError):
        _run(70, 37, 50, seed=1, plant=_PLANTED[bug])
