"""The ragged typed-tensor GEMM (nvatom.kernels.sm80_gemm_tiled) on the GPU against float64
torch, for random ragged M, N, K (not multiples of the 64 x 64 tile or the 32-deep stage).

Storage is padded to leading dimensions of a multiple of 8 elements and the padding is NaN:
a copy reading past K, M or N (a wrong src-size) turns D into NaN; D is poisoned with NaN, so
an element never written shows up, and its padding must still be NaN afterwards (no store
past N).  The reference is the float64 product of the same 16-bit values; tolerance as in
tests/gpu/test_sm80_tile_gpu.py (one rounding of the output plus 2^-23 per f32 addition).
The CPU twin is tests/kernels/test_sm80_gemm_tiled.py (the PTX interpreter).
"""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.gpu

torch = pytest.importorskip("torch")

from nvatom.kernels import sm80_gemm_tiled as G  # noqa: E402
from tests.gpu.test_sm80_tile_gpu import DT, U, _need_sm80  # noqa: E402  (the tile's helpers)


def _padded(x: torch.Tensor) -> tuple[torch.Tensor, int]:
    ld = max(8, -(-x.shape[1] // 8) * 8)
    mem = torch.full((x.shape[0], ld), float("nan"), dtype=x.dtype, device=x.device)
    mem[:, :x.shape[1]] = x
    return mem, ld


def _run_and_check(m: int, n: int, k: int, seed: int, *, dtype: str = "bf16",
                   a_major: str = "K", b_major: str = "N", stages: int = 3,
                   bias: bool = True, relu: bool = False) -> None:
    from nvatom.runtime.load import load_kernel

    gpu = _need_sm80()
    mod = G.build_sm80_gemm_tiled(dtype, a_major=a_major, b_major=b_major, stages=stages,
                                  bias=bias, relu=relu)
    kernel = load_kernel(mod, gpu, G.kernel_name(dtype, a_major, b_major, stages, bias, relu))
    gen = torch.Generator(device="cuda").manual_seed(seed)
    a = torch.randn(m, k, generator=gen, device="cuda").to(DT[dtype])
    b = torch.randn(k, n, generator=gen, device="cuda").to(DT[dtype])
    vb = torch.randn(n, generator=gen, device="cuda")
    a_mem, lda = _padded(a if a_major == "K" else a.t())
    b_mem, ldb = _padded(b if b_major == "N" else b.t())
    d, ldd = _padded(torch.full((m, n), float("nan"), dtype=DT[dtype], device="cuda"))
    ptrs = [a_mem.data_ptr(), b_mem.data_ptr()] + ([vb.data_ptr()] if bias else [])
    kernel.launch(G.grid(m, n), G.THREADS, [m, n, k, lda, ldb, ldd, *ptrs, d.data_ptr()])
    torch.cuda.synchronize()
    ref = a.double() @ b.double() + (vb.double() if bias else 0)
    mag = a.double().abs() @ b.double().abs() + (vb.double().abs() if bias else 0)
    if relu:
        ref = torch.relu(ref)
    got = d[:, :n].double()
    assert torch.isnan(d[:, n:]).all(), "a store past N"
    assert torch.isfinite(got).all(), f"{(~torch.isfinite(got)).sum().item()} outputs unwritten"
    tol = U[dtype] * ref.abs() + (k + 16) * 2.0 ** -23 * mag + 2.0 ** -24
    worst = ((got - ref).abs() / tol).max().item()
    assert worst <= 1.0, f"{dtype} {m}x{n}x{k}: max err/tol {worst:.3g}"


@pytest.mark.parametrize(("m", "n", "k"), [(64, 64, 64), (70, 37, 50), (1, 1, 1),
                                           (129, 200, 333), (1000, 513, 1031)])
@pytest.mark.parametrize("dtype", ["bf16", "f16"])
def test_ragged_shapes_match_float64(dtype: str, m: int, n: int, k: int) -> None:
    _run_and_check(m, n, k, seed=m + n + k, dtype=dtype)


@pytest.mark.parametrize("seed", range(8))
def test_random_ragged_shapes(seed: int) -> None:
    g = torch.Generator().manual_seed(seed)
    m, n, k = (int(x) for x in torch.randint(1, 300, (3,), generator=g))
    _run_and_check(m, n, k, seed=seed, relu=bool(seed % 2), bias=seed % 3 != 0,
                   stages=2 + seed % 3)


@pytest.mark.parametrize(("a_major", "b_major"), [("M", "N"), ("K", "K"), ("M", "K")])
def test_other_storage_orders(a_major: str, b_major: str) -> None:
    _run_and_check(150, 90, 77, seed=7, a_major=a_major, b_major=b_major, dtype="f16")
