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


#: block-scale tilings beside the default (GemmSm90Config fields over it): 4 K blocks per
#: loop iteration, and 128 x 256 tiles that span two blocks of B's scales (4 parts of n64
#: through two temporaries, or 2 parts of n128 through one)
_TILINGS = {"b128u4": {"promote_unroll": 4},
            "b256p4u4": {"block_n": 256, "promote_parts": 4, "promote_temps": 2,
                         "promote_unroll": 4},
            "b256p4": {"block_n": 256, "promote_parts": 4, "promote_temps": 2},
            "b256p2t1u4": {"block_n": 256, "promote_parts": 2, "promote_temps": 1,
                           "promote_unroll": 4},
            "b256p2t1u4c2": {"block_n": 256, "promote_parts": 2, "promote_temps": 1,
                             "promote_unroll": 4, "cluster_m": 2},
            "m64b128u4": {"consumers": 1, "promote_unroll": 4},
            "m64b128s8u4": {"consumers": 1, "stages": 8, "promote_unroll": 4},
            # every K block's scales of an unrolled iteration loaded at its start
            "b256p2t1u4e": {"block_n": 256, "promote_parts": 2, "promote_temps": 1,
                            "promote_unroll": 4, "promote_scales_early": True},
            "m64b128s8u4e": {"consumers": 1, "stages": 8, "promote_unroll": 4,
                             "promote_scales_early": True},
            "m64b256p2t1u4": {"consumers": 1, "block_n": 256, "promote_parts": 2,
                              "promote_temps": 1, "promote_unroll": 4}}


@pytest.fixture
def only_provider(monkeypatch):
    """Route every GEMM through one SM90 provider holding a given config (caches emptied
    before and after, so no launch planned by another provider is reused)."""
    import nvatom.gemm as gm
    from nvatom.gemm_providers import Sm90Provider

    def use(cfg) -> None:
        monkeypatch.setattr(gm, "PROVIDERS", [Sm90Provider(cfg)])
        gm.clear_caches()

    yield use
    gm.clear_caches()


@pytest.mark.parametrize("tiling", sorted(_TILINGS))
# N 384: the last 256-column tile covers scale blocks 2 and 3 of 3 (the clamp); K 1152: nine
# K blocks, two unrolled iterations and one left over; M 1 and a 200 x 264 x 400 ragged one
@pytest.mark.parametrize("m,n,k", [(256, 384, 1152), (200, 264, 400), (1, 128, 128),
                                   (777, 1000, 640)])
def test_block_scale_tilings_against_float64(tiling: str, m: int, n: int, k: int,
                                             only_provider) -> None:
    _require_sm90()
    import dataclasses

    import nvatom
    from nvatom.gemm import explain
    from nvatom.kernels.sm90.launch import default_config

    cfg = dataclasses.replace(default_config("e4m3", scale_mode="block"), **_TILINGS[tiling])
    only_provider(cfg)
    a, b, sa, sb, ref = _case(m, n, k, "e4m3", "e4m3", seed=m * 13 + n * 5 + k)
    if sa.numel() > 1 or sb.numel() > 1:
        launched = explain(a, b, scale_a=sa, scale_b=sb).launch.source.name
        assert f"x{cfg.block_n}_" in launched and launched.endswith("_blockscale"), launched
        early = "e" if cfg.promote_scales_early else ""
        assert (f"u{cfg.promote_unroll}{early}_" in launched) == (cfg.promote_unroll > 1), launched
    out = torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
    if cfg.promote_scales_early and sa.numel() == 1 and sb.numel() == 1:
        # one scale each (1 x 128 x 128) is the per-tensor mode, which loads no block scales:
        # the block-only option's provider is refused by name
        from nvatom.gemm import GemmError

        with pytest.raises(GemmError, match="promote_scales_early"):
            nvatom.gemm(a, b, out, scale_a=sa, scale_b=sb)
        return
    nvatom.gemm(a, b, out, scale_a=sa, scale_b=sb)
    torch.cuda.synchronize()
    assert not torch.isnan(out).any()
    err = ((out.double() - ref).norm() / ref.norm()).item()
    assert err < 6e-3, err
