"""The SM90 GEMM written in the IR (tests/ir/gemm_sm90.mlir) on an sm_90 GPU.

``d = a @ bt.T`` (bf16 in, f32 accumulation, bf16 out) on fresh random inputs of ragged
shapes (every dimension off the 128 x 256 x 64 tile, M = 1, a single K block, several
persistent rounds), against the float64 product of the bf16 inputs; the output is poisoned
with NaN first and sits in a larger buffer whose tail (never part of ``d``) must stay
untouched, so every element is written exactly where TMA's bounds put it.
"""

from __future__ import annotations

import math

import pytest

pytestmark = pytest.mark.gpu
torch = pytest.importorskip("torch")
pytest.importorskip("xdsl", reason="xdsl==0.74.0 not installed (pip install .whl/*.whl)")

if not torch.cuda.is_available() or torch.cuda.get_device_capability() != (9, 0):
    pytest.skip("needs an sm_90 GPU (H100/H200)", allow_module_level=True)

from tests.gpu import ir_gemm_host as H  # noqa: E402

SHAPES = [(128, 256, 64), (1, 8, 8), (300, 520, 136), (129, 264, 1000),
          (2048, 2304, 512), (4000, 4104, 264)]


def _check(m: int, n: int, k: int, gen: torch.Generator) -> None:
    a = torch.randn(m, k, generator=gen, device="cuda").to(torch.bfloat16)
    bt = torch.randn(n, k, generator=gen, device="cuda").to(torch.bfloat16)
    pad = 4096  # a tail beyond d that the kernel must not touch
    flat = torch.full((m * n + pad,), float("nan"), dtype=torch.bfloat16, device="cuda")
    flat[m * n:] = 7.0
    d = flat[:m * n].view(m, n)
    H.prepare(a, bt, d)()
    torch.cuda.synchronize()
    ref = a.double() @ bt.double().T
    got = d.double()
    assert torch.isfinite(got).all(), f"{m}x{n}x{k}: some outputs were never written"
    assert (flat[m * n:] == 7.0).all(), f"{m}x{n}x{k}: wrote past the end of d"
    # bf16 output: within one bf16 ulp of the float64 product (f32 accumulation adds far less)
    err = (got - ref).abs()
    tol = 2.0 ** -7 * ref.abs() + 1e-3 * math.sqrt(k)
    bad = (err > tol).sum().item()
    assert bad == 0, f"{m}x{n}x{k}: {bad} elements off, max error {err.max().item():.4g}"


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_ir_gemm_matches_float64(shape: tuple[int, int, int]) -> None:
    _check(*shape, torch.Generator(device="cuda").manual_seed(hash(shape) % 10_000))


def test_ir_gemm_random_shapes() -> None:
    """Shapes drawn at random (seed printed): N and K multiples of 8 (TMA's 16-byte pitch)."""
    import random

    seed = random.randrange(1 << 30)
    print(f"ir gemm random-shape seed {seed}")
    rng = random.Random(seed)
    gen = torch.Generator(device="cuda").manual_seed(seed)
    for _ in range(4):
        m = rng.randint(1, 1500)
        n = 8 * rng.randint(1, 200)
        k = 8 * rng.randint(1, 160)
        _check(m, n, k, gen)
