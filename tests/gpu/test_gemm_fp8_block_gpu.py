"""FP8 GEMM with DeepSeek-V3 block scales (``scale_a`` 1 x 128, ``scale_b`` 128 x 128) through
``nvatom.gemm`` on an sm_90 GPU, against float64.

The reference expands the scales to the operands' shapes and multiplies the decoded FP8
values in float64: ``out[m, n] = sum_k a[m, k] sa[m, k // 128] * b[k, n] sb[k // 128, n // 128]``.
Fresh random inputs and scales per case, ragged M, N and K (a partial last K block and
N block), e4m3 and e5m2, NaN-poisoned outputs, the call without ``out`` too."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.gpu

torch = pytest.importorskip("torch")


def _require_sm90() -> None:
    if not torch.cuda.is_available() or torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("FP8 GEMMs need an sm_90 (Hopper) GPU")


_F8 = {"e4m3": torch.float8_e4m3fn, "e5m2": torch.float8_e5m2}


def _case(m: int, n: int, k: int, ta: str, tb: str, seed: int):
    g = torch.Generator(device="cuda").manual_seed(seed)
    kb, nb = -(-k // 128), -(-n // 128)
    a = (torch.randn(m, k, device="cuda", generator=g) * 0.5).to(_F8[ta])
    w = (torch.randn(n, k, device="cuda", generator=g) * 0.5).to(_F8[tb])  # weight (N x K)
    sa = torch.rand(m, kb, device="cuda", generator=g) + 0.25
    w_scale = torch.rand(nb, kb, device="cuda", generator=g) + 0.25  # DeepSeek: (N/128, K/128)
    b, sb = w.t(), w_scale.t()  # b (K x N) column-major; its scales (Kb x Nb) K-major
    ea = sa.double().repeat_interleave(128, 1)[:, :k]
    eb = sb.double().repeat_interleave(128, 0)[:k].repeat_interleave(128, 1)[:, :n]
    ref = (a.double() * ea) @ (b.double() * eb)
    return a, b, sa, sb, ref


@pytest.mark.parametrize("m,n,k", [(256, 256, 256), (200, 264, 400), (1, 128, 128),
                                   (777, 1000, 1152), (129, 392, 4096), (2048, 2048, 2048)])
@pytest.mark.parametrize("types", [("e4m3", "e4m3"), ("e4m3", "e5m2")])
def test_block_scales_against_float64(m: int, n: int, k: int, types: tuple[str, str]) -> None:
    _require_sm90()
    import nvatom
    from nvatom.gemm import explain

    a, b, sa, sb, ref = _case(m, n, k, *types, seed=m * 31 + n * 7 + k)
    name = explain(a, b, scale_a=sa, scale_b=sb).launch.source.name
    # one element each (M = 1, K <= 128, N <= 128) is per-tensor's shape: the same product
    assert name.endswith("_blockscale") or sa.numel() == sb.numel() == 1, name
    out = torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
    nvatom.gemm(a, b, out, scale_a=sa, scale_b=sb)
    fresh = nvatom.gemm(a, b, scale_a=sa, scale_b=sb)
    torch.cuda.synchronize()
    for o in (out, fresh):
        assert not torch.isnan(o).any()
        err = ((o.double() - ref).norm() / ref.norm()).item()
        assert err < 6e-3, err  # bf16 output rounding (2^-9) dominates


def test_block_scales_wrong_layout_is_a_named_error() -> None:
    _require_sm90()
    import nvatom
    from nvatom.gemm import GemmError

    a, b, sa, sb, _ = _case(256, 384, 512, "e4m3", "e4m3", seed=3)
    with pytest.raises(GemmError, match="K-major"):
        nvatom.gemm(a, b, scale_a=sa, scale_b=sb.contiguous())  # row-major (Kb x Nb)
    with pytest.raises(GemmError, match="fast_accum"):
        nvatom.gemm(a, b, scale_a=sa, scale_b=sb, fast_accum=True)
