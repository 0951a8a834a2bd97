"""``nvatom.gemm`` with e4m3 operands and per-tensor scales on an sm_90 GPU.

The public path ``nvatom.gemm(a, b, out, scale_a=, scale_b=)`` (SM90 provider, WGMMA
``.e4m3``) on random shapes, ragged ones included (M anything; K a multiple of 16, TMA's
16-byte pitch rule for 1-byte A and B rows; N a multiple of 16 as ``torch._scaled_mm`` wants,
and one N that is only a multiple of 8, all the bf16 D rows need), the output poisoned with NaN
first.

Reference: the float64 product of the decoded e4m3 inputs (each e4m3 value is exact in
float64) times the scales.  Tolerance per element, for ``ref = (a @ b) * sa * sb`` and
``S = (|a| @ |b|) * sa * sb``:

* ``2^-8 * |ref|``: the bf16 output rounding (unit roundoff 2^-9) plus the two f32 roundings
  of the scale product and the scaled accumulator (2^-24 each), with a factor two of margin;
* ``2^-13 * (K / 32 + 1) * S``: the accumulation.  One e4m3 x e4m3 product is exact in f32
  (4-bit significands), but Hopper's FP8 tensor cores are reported to keep only about 14 bits
  of the running sum (DeepSeek-V3 technical report, section 3.3.2), so each of the K / 32
  WGMMA k-steps may lose up to 2^-13 of a partial sum bounded by S (a worst-case bound; the
  observed error is far below it).

Against ``torch._scaled_mm`` (cuBLAS, same inputs, scales and bf16 output) the two results may
differ by the accumulation term and one bf16 rounding each; most elements round identically.
"""

from __future__ import annotations

import random

import pytest

pytestmark = pytest.mark.gpu

torch = pytest.importorskip("torch")

E4M3 = torch.float8_e4m3fn


def _require_sm90() -> None:
    if not torch.cuda.is_available() or torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("nvatom's FP8 GEMM needs an sm_90 (Hopper) GPU")


def _random_shapes(count: int, seed: int) -> list[tuple[int, int, int]]:
    rng = random.Random(seed)
    return [(rng.randint(1, 700), 16 * rng.randint(1, 64), 16 * rng.randint(1, 130))
            for _ in range(count)]


# tile-aligned, ragged in M / N / K (N and K multiples of 16; N = 264 of 8), skinny, K = one
# k-step
SHAPES = [(128, 256, 128), (256, 512, 1024), (129, 272, 80), (129, 264, 80), (1, 16, 16),
          (7, 1008, 16), (333, 784, 528), (1, 4096, 2048), (4096, 16, 1024), (640, 1536, 2064),
          *_random_shapes(8, seed=7)]


def _operands(m: int, n: int, k: int, gen):
    a = (torch.randn(m, k, device="cuda", generator=gen) * 2).to(E4M3)
    b = (torch.randn(n, k, device="cuda", generator=gen) * 2).to(E4M3).t()  # column-major
    sa = (torch.rand((), device="cuda", generator=gen) + 0.5).float()
    sb = (torch.rand((), device="cuda", generator=gen) + 0.5).float()
    return a, b, sa, sb


def _check(out, a, b, sa, sb) -> float:
    """out against float64 (scales: floats, or row-wise (M, 1) / (1, N) tensors); returns the
    relative error in norm."""
    k = a.shape[1]
    ad, bd = a.double(), b.double()
    ref = (ad @ bd) * sa * sb
    bound = (ad.abs() @ bd.abs()) * sa * sb
    assert not torch.isnan(out).any(), "elements left unwritten (NaN poison)"
    err = (out.double() - ref).abs()
    tol = 2.0**-8 * ref.abs() + 2.0**-13 * (k / 32 + 1) * bound
    bad = err > tol
    assert not bad.any(), (f"{int(bad.sum())} elements out of tolerance; worst "
                           f"{float((err - tol).max()):.3g} over, at shape {tuple(out.shape)}")
    rel = float((out.double() - ref).norm() / ref.norm())
    assert rel < 8e-3, rel  # bf16 rounding dominates: about 2^-9 / sqrt(3) in norm
    return rel


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_fp8_gemm_against_float64(shape: tuple[int, int, int]) -> None:
    _require_sm90()
    import nvatom

    m, n, k = shape
    gen = torch.Generator(device="cuda")
    gen.seed()  # fresh inputs every run
    a, b, sa, sb = _operands(m, n, k, gen)
    out = torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
    assert nvatom.gemm(a, b, out, scale_a=sa, scale_b=sb) is out
    torch.cuda.synchronize()
    _check(out, a, b, float(sa), float(sb))
    if n % 16:  # torch._scaled_mm takes N multiples of 16 only
        return
    # against cuBLAS: same bf16 output up to one rounding each side and the accumulation
    try:
        theirs = torch._scaled_mm(a, b, sa, sb, out_dtype=torch.bfloat16)
    except RuntimeError:
        if m % 16 == 0:
            raise
        return  # a torch/cuBLAS build that wants M a multiple of 16 too: no cuBLAS row here
    ref = (a.double() @ b.double()) * float(sa) * float(sb)
    bound = (a.double().abs() @ b.double().abs()) * float(sa) * float(sb)
    diff = (out.double() - theirs.double()).abs()
    assert (diff <= 2.0**-7 * ref.abs() + 2.0**-12 * (k / 32 + 1) * bound).all()
    same = float((out == theirs).double().mean())
    assert same > 0.5, f"only {same:.1%} of elements equal torch._scaled_mm's"


def test_fp8_gemm_float_scales_default_out_and_plan() -> None:
    _require_sm90()
    import nvatom
    from nvatom.gemm import check_operands, plan

    m, n, k = 200, 272, 336
    gen = torch.Generator(device="cuda").manual_seed(1)
    a, b, _, _ = _operands(m, n, k, gen)
    problem = check_operands(a, b, scale_a=0.75, scale_b=1.5)[3]
    launch, target = plan(problem, (9, 0))
    assert (launch.provider, target, problem.out_dtype) == ("sm90", "sm_90a", "bf16")
    d = nvatom.gemm(a, b, scale_a=0.75, scale_b=1.5)  # Python floats; out made as bf16
    assert d.dtype == torch.bfloat16 and tuple(d.shape) == (m, n)
    torch.cuda.synchronize()
    _check(d, a, b, 0.75, 1.5)


def test_fp8_call_cache_keys_the_scales() -> None:
    """A repeated call with other scale tensors (same operands and out) must not reuse the
    first call's arguments; a scale tensor updated in place is read at run time."""
    _require_sm90()
    import nvatom

    m, n, k = 96, 160, 256
    gen = torch.Generator(device="cuda").manual_seed(2)
    a, b, _, _ = _operands(m, n, k, gen)
    out = torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
    s1 = torch.tensor(1.0, device="cuda")
    s2 = torch.tensor(2.0, device="cuda")
    for sa, sb in ((s1, s1), (s2, s1), (s1, s2), (s2, s2), (0.5, 1.0), (0.25, 1.0)):
        out.fill_(float("nan"))
        nvatom.gemm(a, b, out, scale_a=sa, scale_b=sb)
        torch.cuda.synchronize()
        _check(out, a, b, float(sa), float(sb))
    s1.fill_(4.0)  # same pointers: the cached call, new value read by the kernel
    out.fill_(float("nan"))
    nvatom.gemm(a, b, out, scale_a=s1, scale_b=s2)
    torch.cuda.synchronize()
    _check(out, a, b, 4.0, 2.0)


def test_fp8_errors_on_the_gpu() -> None:
    _require_sm90()
    import nvatom
    from nvatom.gemm import GemmError

    gen = torch.Generator(device="cuda").manual_seed(3)
    a, b, sa, sb = _operands(64, 64, 64, gen)
    out = torch.empty(64, 64, device="cuda", dtype=torch.bfloat16)
    with pytest.raises(GemmError, match=r"FP8 needs b column-major .*"
                       r"b = b_rowmajor\.t\(\)\.contiguous\(\)\.t\(\)"):
        nvatom.gemm(a, b.contiguous(), out, scale_a=sa, scale_b=sb)
    with pytest.raises(GemmError, match="scale_b is missing"):
        nvatom.gemm(a, b, out, scale_a=sa)
    with pytest.raises(GemmError, match="scale_a is on device 'cpu'"):
        nvatom.gemm(a, b, out, scale_a=sa.cpu(), scale_b=sb)
    with pytest.raises(GemmError, match="scale_a has dtype bfloat16"):
        nvatom.gemm(a, b, out, scale_a=sa.bfloat16(), scale_b=sb)
    with pytest.raises(GemmError, match="sm80: the SM80 kernel \\(mma.sync\\) has no FP8 path"):
        nvatom.gemm(a, b, out, scale_a=sa, scale_b=sb, provider="sm80")
    with pytest.raises(GemmError, match="scale_a given but a and b are bf16"):
        nvatom.gemm(a.bfloat16(), b.bfloat16(), out, scale_a=sa)
