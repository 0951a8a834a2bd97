"""The SM80 GEMM (cp.async + ldmatrix + mma.sync) on the GPU against torch's float64 product.

Every dtype combination the kernel offers (bf16/f16 inputs, bf16/f16/f32 outputs), all four
operand storage orders, ragged and skinny shapes.  Inputs are views into larger buffers whose
padding is NaN, so a load past K, M or N poisons the result; the output is a view into a
NaN-filled buffer, so an element left unwritten stays NaN and a store past M or N is seen in
the padding.
"""

from __future__ import annotations

import importlib
import itertools
import zlib

import pytest

pytestmark = pytest.mark.gpu

torch = pytest.importorskip("torch")

from nvatom.gemm import GemmError, gemm  # noqa: E402
from nvatom.runtime.torch_interop import TensorArgumentError  # noqa: E402


@pytest.fixture(autouse=True)
def sm80_only(monkeypatch):
    """Every GEMM in this file runs the SM80 kernel, whatever the SM90 provider would pick."""
    gemm_mod = importlib.import_module("nvatom.gemm")
    monkeypatch.setattr(gemm_mod, "PROVIDERS", [gemm_mod.Sm80Provider()])


IN = {"bf16": torch.bfloat16, "f16": torch.float16}
OUT = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32}
# unit roundoff of the output type (0 for f32: the accumulation bound covers it)
OUT_U = {"bf16": 2.0 ** -8, "f16": 2.0 ** -11, "f32": 0.0}

RAGGED = [(1, 8, 8), (7, 24, 40), (16, 8, 16), (129, 136, 72), (300, 520, 264),
          (64, 4096, 8), (1, 4096, 1024), (1000, 8, 2048), (255, 256, 200),
          (33, 10, 13), (70, 38, 37), (5, 130, 1)]
BIG = [(2048, 2048, 2048), (4096, 1024, 512)]


def _pad8(x: int) -> int:
    return (x + 7) // 8 * 8


def _operand(rows: int, cols: int, dtype: torch.dtype, major: str, gen: torch.Generator
             ) -> torch.Tensor:
    """A rows x cols view (row- or column-major) into a NaN-padded buffer."""
    if major == "row":
        buf = torch.full((rows + 3, _pad8(cols) + 8), float("nan"), dtype=dtype, device="cuda")
        view = buf[:rows, :cols]
    else:
        buf = torch.full((cols + 3, _pad8(rows) + 8), float("nan"), dtype=dtype, device="cuda")
        view = buf[:cols, :rows].t()
    view.copy_(torch.randn(rows, cols, generator=gen, device="cuda").to(dtype))
    return view


def _check(a: torch.Tensor, b: torch.Tensor, out_dtype: str) -> None:
    m, k = a.shape
    n = b.shape[1]
    buf = torch.full((m + 5, _pad8(n) + 8), float("nan"), dtype=OUT[out_dtype], device="cuda")
    out = buf[:m, :n]
    got = gemm(a, b, out)
    assert got is out
    torch.cuda.synchronize()
    ref = a.double() @ b.double()
    mag = a.double().abs() @ b.double().abs()
    res = out.double()
    # f32 accumulation: the tensor cores align and add products with truncation, not
    # round-to-nearest (Fasi et al., "Numerical behavior of NVIDIA tensor cores", 2021), so
    # allow 2u per addition; then the output rounding of the computed value.
    tol = (OUT_U[out_dtype] * torch.maximum(ref.abs(), res.abs().nan_to_num())
           + (k + 16) * 2.0 ** -23 * mag + 2.0 ** -25)
    assert torch.isfinite(res).all(), f"{(~torch.isfinite(res)).sum().item()} outputs NaN/inf"
    err = (res - ref).abs()
    worst = (err / tol).max().item()
    assert worst <= 1.0, f"max err/tol {worst:.3g} at {divmod((err / tol).argmax().item(), n)}"
    assert torch.isnan(buf[m:, :]).all(), "stores past M"
    assert torch.isnan(buf[:, n:]).all(), "stores past N"


@pytest.mark.parametrize(("in_t", "out_t"), list(itertools.product(IN, OUT)))
@pytest.mark.parametrize(("a_major", "b_major"),
                         list(itertools.product(("row", "col"), ("row", "col"))))
def test_ragged_shapes(in_t: str, out_t: str, a_major: str, b_major: str) -> None:
    seed = zlib.crc32(f"{in_t}{out_t}{a_major}{b_major}".encode())
    gen = torch.Generator(device="cuda").manual_seed(seed)
    for m, n, k in RAGGED:
        a = _operand(m, k, IN[in_t], a_major, gen)
        b = _operand(k, n, IN[in_t], b_major, gen)
        _check(a, b, out_t)


@pytest.mark.parametrize(("m", "n", "k"), BIG)
def test_large_bf16(m: int, n: int, k: int) -> None:
    gen = torch.Generator(device="cuda").manual_seed(m + n + k)
    a = torch.randn(m, k, generator=gen, device="cuda").bfloat16()
    b = torch.randn(k, n, generator=gen, device="cuda").bfloat16()
    _check(a, b, "bf16")
    _check(a, b, "f32")


def test_random_shapes() -> None:
    gen = torch.Generator(device="cuda").manual_seed(1234)
    rng = torch.Generator().manual_seed(99)
    for _ in range(12):
        m = int(torch.randint(1, 700, (1,), generator=rng))
        n = 8 * int(torch.randint(1, 90, (1,), generator=rng))
        k = 8 * int(torch.randint(1, 90, (1,), generator=rng))
        a = _operand(m, k, torch.bfloat16, "row", gen)
        b = _operand(k, n, torch.bfloat16, "row", gen)
        _check(a, b, "bf16")


def test_default_out_and_current_stream() -> None:
    a = torch.randn(256, 512, device="cuda", dtype=torch.float16)
    b = torch.randn(512, 128, device="cuda", dtype=torch.float16)
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        d = gemm(a, b)
    s.synchronize()
    assert d.dtype == torch.float16 and d.shape == (256, 128)
    ref = (a.double() @ b.double())
    assert ((d.double() - ref).abs() <= 2.0 ** -10 * ref.abs() + 1e-2).all()


def test_k_zero_and_empty() -> None:
    a = torch.randn(16, 0, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(0, 8, device="cuda", dtype=torch.bfloat16)
    assert (gemm(a, b) == 0).all()
    e = gemm(torch.randn(0, 8, device="cuda", dtype=torch.bfloat16),
             torch.randn(8, 8, device="cuda", dtype=torch.bfloat16))
    assert e.shape == (0, 8)


def test_bad_arguments_on_gpu() -> None:
    a = torch.randn(32, 32, device="cuda", dtype=torch.bfloat16)
    with pytest.raises(TensorArgumentError, match="not a CUDA device"):
        gemm(a.cpu(), a)
    with pytest.raises(TensorArgumentError, match="dtype float32"):
        gemm(a.float(), a.float())
    with pytest.raises(TensorArgumentError, match="bf16 but b is f16"):
        gemm(a, a.half())
    with pytest.raises(GemmError, match="do not chain"):
        gemm(a, a[:16])
    # a view 2 bytes off is legal storage: staged through an aligned copy, not refused
    odd = a.flatten()[1:1 + 31 * 32].view(31, 32)[:, :24]
    ref = odd.double() @ a[:24].double()
    assert float((gemm(odd, a[:24]).double() - ref).norm() / ref.norm()) < 8e-3
    with pytest.raises(TensorArgumentError, match="is not row-major"):
        gemm(a[:, ::2], a[:16])
