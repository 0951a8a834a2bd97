"""The typed-tensor sm_80 tile (nvatom.kernels.sm80_tile) on the GPU against float64 torch.

``D = relu(A @ B + bias)``: one CTA of 128 threads, A 64 x K and B K x 64 (row-major, or
column-major in the storage-order test), bias f32 per column, D 64 x 64 bf16/f16.  Fresh
random inputs per test, D poisoned with NaN so an element the kernel never writes shows up;
the reference is the float64 product of the same 16-bit values.  Tolerance: the output's
unit roundoff times |D| (one rounding to bf16 / f16), plus 2^-23 per addition of the f32
accumulation (the tensor cores truncate when they align products: Fasi et al., "Numerical
behavior of NVIDIA tensor cores", 2021), as in test_gemm_sm80_gpu.py.  The CPU twin is
tests/kernels/test_sm80_tile.py (a PTX interpreter).
"""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.gpu

torch = pytest.importorskip("torch")

from nvatom.kernels.sm80_tile import THREADS, build_sm80_tile, kernel_name  # noqa: E402

DT = {"bf16": torch.bfloat16, "f16": torch.float16}
U = {"bf16": 2.0 ** -8, "f16": 2.0 ** -11}


def _need_sm80() -> str:
    if not torch.cuda.is_available():
        pytest.skip("torch sees no CUDA device")
    if torch.cuda.get_device_capability() < (8, 0):
        pytest.skip("cp.async, ldmatrix and mma.sync bf16 need sm_80 or newer")
    from nvatom.arch import device_target

    return device_target(torch.cuda.get_device_capability()).name


def _run_and_check(dtype: str, k: int, seed: int, a_major: str = "K", b_major: str = "N"
                   ) -> None:
    from nvatom.runtime.load import load_kernel

    gpu = _need_sm80()
    kernel = load_kernel(build_sm80_tile(dtype, k, a_major=a_major, b_major=b_major), gpu,
                         kernel_name(dtype, k, a_major, b_major))
    gen = torch.Generator(device="cuda").manual_seed(seed)
    a = torch.randn(64, k, generator=gen, device="cuda").to(DT[dtype])
    b = torch.randn(k, 64, generator=gen, device="cuda").to(DT[dtype])
    bias = torch.randn(64, generator=gen, device="cuda")
    d = torch.full((64, 64), float("nan"), dtype=DT[dtype], device="cuda")
    a_mem = a if a_major == "K" else a.t().contiguous()  # M-major: A^T row-major
    b_mem = b if b_major == "N" else b.t().contiguous()  # K-major: B^T row-major
    kernel.launch(1, THREADS, [a_mem.data_ptr(), b_mem.data_ptr(), bias.data_ptr(),
                               d.data_ptr()])
    torch.cuda.synchronize()
    ref = torch.relu(a.double() @ b.double() + bias.double())
    mag = a.double().abs() @ b.double().abs() + bias.double().abs()
    got = d.double()
    assert torch.isfinite(got).all(), f"{(~torch.isfinite(got)).sum().item()} outputs unwritten"
    tol = U[dtype] * ref.abs() + (k + 16) * 2.0 ** -23 * mag + 2.0 ** -24
    worst = ((got - ref).abs() / tol).max().item()
    assert worst <= 1.0, f"{dtype} K={k}: max err/tol {worst:.3g}"
    assert (got >= 0).all()  # ReLU


@pytest.mark.parametrize("dtype", ["bf16", "f16"])
def test_sm80_tile_matches_float64(dtype: str) -> None:
    _run_and_check(dtype, 64, seed=1)


@pytest.mark.parametrize("k", [32, 96, 160, 512])
@pytest.mark.parametrize("dtype", ["bf16", "f16"])
def test_sm80_tile_for_several_k(dtype: str, k: int) -> None:
    _run_and_check(dtype, k, seed=k)


@pytest.mark.parametrize(("a_major", "b_major"), [("M", "N"), ("K", "K"), ("M", "K")])
def test_sm80_tile_other_storage_orders(a_major: str, b_major: str) -> None:
    _run_and_check("bf16", 96, seed=7, a_major=a_major, b_major=b_major)
