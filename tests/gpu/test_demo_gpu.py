"""The demo's GPU part (``make demo`` on a GPU): nvatom.gemm at 4096^3 checked against a
float64 product and timed next to cuBLAS; and the cached launch path it relies on staying
correct when buffers are reused, rewritten, or replaced by others at the same address."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.gpu

torch = pytest.importorskip("torch")


def test_gpu_gemm_check_4096() -> None:
    from nvatom.demo import gpu_gemm_check

    r = gpu_gemm_check(4096, rounds=2, batch=5)
    if tuple(torch.cuda.get_device_capability()) == (9, 0):
        assert r["provider"] == "sm90"
    # bf16 output of an f32-accumulated product: within a few bf16 ulps of the maximum, and
    # no worse than 4x cuBLAS's own error against the same float64 reference
    assert r["max_rel_err"] < 4 * max(r["cublas_max_rel_err"], 2.0**-8), r
    assert r["tflops"] > 0 and r["cublas_tflops"] > 0


def test_run_demo_prints_the_gpu_result(tmp_path, capsys) -> None:
    from nvatom.demo import run_demo

    assert run_demo(["sm_90a"], tmp_path) == 0
    out = capsys.readouterr().out
    assert "max relative error" in out and " OK" in out and "TFLOP/s" in out
    assert "no GPU present" not in out


@pytest.mark.parametrize("provider", ["sm90", "sm80"])
def test_cached_launch_path_stays_correct(provider: str) -> None:
    """Same buffers with new contents, a new output, then freed and re-allocated buffers of
    another shape (possibly at the same addresses): every result matches float64."""
    import nvatom

    if provider == "sm90" and tuple(torch.cuda.get_device_capability()) != (9, 0):
        pytest.skip("the SM90 kernel needs an sm_90 GPU")

    def check(m: int, n: int, k: int, reps: int = 3) -> None:
        a = torch.empty(m, k, device="cuda", dtype=torch.bfloat16)
        b = torch.empty(k, n, device="cuda", dtype=torch.bfloat16)
        for _ in range(reps):
            a.copy_(torch.randn(m, k, device="cuda"))
            b.copy_(torch.randn(k, n, device="cuda"))
            out = torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
            nvatom.gemm(a, b, out, provider=provider)
            ref = a.double() @ b.double()
            err = float((out.double() - ref).norm() / ref.norm())
            assert err < 8e-3, (m, n, k, err)

    check(512, 768, 256)
    torch.cuda.empty_cache()
    check(768, 512, 256)  # the caching allocator may hand out the same addresses
    check(256, 256, 1024)
