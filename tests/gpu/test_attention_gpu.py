"""nvatom.attention on an sm_90 GPU against a float32 reference.

Random shapes: every head dim (64, 128, 256), bf16 and f16, causal and not, grouped-query
ratios 1, 2, 4 and 8, sequence lengths that are not multiples of any tile (1, 77, 333, 1025
...), Sq != Sk, q stored as (B, S, H, D) and seen through ``transpose(1, 2)``, the shipped
configuration and the variants the tuning measured (ping-pong, no overlap, one K/V release,
176-row KV tiles) and both epilogues (stmatrix + TMA store, per-thread global stores: the
same arithmetic, so their outputs must be bit-identical).  Fresh random inputs per case;
output and lse poisoned with NaN first (an element the kernel does not write fails); the
reference is softmax(scale q k^T) v computed in float32 from the same 16-bit inputs; the bar
is the cuDNN / flash backend's error against the same reference (x 1.5, plus a floor for
cases where both are at rounding level)."""

from __future__ import annotations

import dataclasses
import importlib
import math
from typing import Any

import pytest

pytestmark = pytest.mark.gpu

torch = pytest.importorskip("torch")

A = importlib.import_module("nvatom.attention")
K = importlib.import_module("nvatom.kernels.sm90.attention_config")

from tests.gpu.attention_ref import reference as _reference  # noqa: E402

_T = {"bf16": torch.bfloat16, "f16": torch.float16}


def _require_sm90() -> None:
    if not torch.cuda.is_available() or torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("the SM90 attention kernel needs an sm_90 (Hopper) GPU")


def _backend_error(q: Any, k: Any, v: Any, causal: bool, ref: Any) -> float:
    """The smallest max error of torch's cuDNN / flash SDPA backends against ``ref``."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    errs = []
    for be in (SDPBackend.CUDNN_ATTENTION, SDPBackend.FLASH_ATTENTION):
        try:
            with sdpa_kernel([be]):
                o = torch.nn.functional.scaled_dot_product_attention(
                    q, k, v, is_causal=causal, enable_gqa=q.shape[1] != k.shape[1])
            errs.append((o.float() - ref).abs().max().item())
        except RuntimeError:
            continue
    return min(errs, default=float("inf"))


def _run(q: Any, k: Any, v: Any, causal: bool, cfg: Any = None,
         scale: float | None = None) -> tuple[Any, Any]:
    p = A.check_inputs(q, k, v, causal=causal, scale=scale)
    out = torch.full((p.batch, p.heads, p.seqlen_q, p.head_dim), float("nan"), dtype=q.dtype,
                     device=q.device)
    lse = torch.full((p.batch, p.heads, p.seqlen_q), float("nan"), device=q.device)
    A.prepare(q, k, v, out, lse, p, cfg)()
    torch.cuda.synchronize()
    return out, lse


# (B, H, Hkv, Sq, Sk, D)
SHAPES = [
    (1, 1, 1, 128, 128, 128), (2, 4, 4, 256, 384, 128), (1, 2, 2, 1000, 1000, 128),
    (2, 8, 2, 333, 517, 128), (1, 3, 1, 77, 1, 128), (1, 4, 4, 1, 300, 128),
    (1, 8, 1, 1025, 2049, 128), (2, 4, 4, 512, 512, 64), (1, 6, 3, 431, 1025, 64),
    (1, 8, 8, 2000, 2000, 64), (2, 4, 4, 384, 384, 256), (1, 4, 2, 555, 555, 256),
    (1, 4, 1, 300, 800, 256),
]


@pytest.mark.parametrize("dt", ["bf16", "f16"])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_attention_matches_float32_reference(shape: tuple[int, ...], causal: bool,
                                             dt: str) -> None:
    _require_sm90()
    b, h, hk, sq, sk, d = shape
    torch.manual_seed(sum(shape) + 7 * causal + (dt == "f16"))
    # q as attention layers keep it: (B, S, H, D) storage, viewed as (B, H, S, D)
    q = torch.randn(b, sq, h, d, dtype=_T[dt], device="cuda").transpose(1, 2)
    k = torch.randn(b, hk, sk, d, dtype=_T[dt], device="cuda")
    v = torch.randn(b, hk, sk, d, dtype=_T[dt], device="cuda")
    scale = 1 / math.sqrt(d)
    out, lse = _run(q, k, v, causal)
    ref, ref_lse = _reference(q, k, v, causal, scale)
    assert not torch.isnan(out).any() and not torch.isnan(lse).any()
    err = (out.float() - ref).abs().max().item()
    floor = 4e-3 if dt == "bf16" else 5e-4
    assert err <= max(1.5 * _backend_error(q, k, v, causal, ref), floor), err
    assert (lse - ref_lse).abs().max().item() < 1e-3


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_epilogues_agree(shape: tuple[int, ...], causal: bool) -> None:
    """The TMA epilogue (O through the Q tile's shared memory, rows past Sq clipped by the
    tensor map) and the direct one write the same bits, and both match the reference."""
    _require_sm90()
    b, h, hk, sq, sk, d = shape
    torch.manual_seed(sum(shape) + 11 * causal)
    q = torch.randn(b, h, sq, d, dtype=torch.bfloat16, device="cuda")
    k = torch.randn(b, hk, sk, d, dtype=torch.bfloat16, device="cuda")
    v = torch.randn(b, hk, sk, d, dtype=torch.bfloat16, device="cuda")
    ref, ref_lse = _reference(q, k, v, causal, d ** -0.5)
    outs = {}
    for ep in K.EPILOGUES:
        cfg = dataclasses.replace(K.default_config("bf16", d, causal), epilogue=ep)
        out, lse = _run(q, k, v, causal, cfg)
        assert not torch.isnan(out).any() and not torch.isnan(lse).any(), ep
        assert (out.float() - ref).abs().max().item() < 1.6e-2, ep
        assert (lse - ref_lse).abs().max().item() < 1e-3, ep
        outs[ep] = (out, lse)
    assert torch.equal(outs["tma"][0], outs["direct"][0])
    assert torch.equal(outs["tma"][1], outs["direct"][1])


_VARIANTS = {
    "pingpong": dict(pingpong=True),
    "no-pingpong": dict(pingpong=False),
    "no-overlap": dict(overlap=False, pingpong=False),
    "one-release": dict(split_release=False),
    "n176": dict(block_n=176),
    "stages3": dict(stages=3),
    "epilogue-tma": dict(epilogue="tma"),
    "epilogue-direct": dict(epilogue="direct"),
}


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("variant", list(_VARIANTS))
def test_tuning_variants_are_correct(variant: str, causal: bool) -> None:
    _require_sm90()
    torch.manual_seed(3)
    q = torch.randn(2, 8, 777, 128, dtype=torch.bfloat16, device="cuda")
    k = torch.randn(2, 2, 901, 128, dtype=torch.bfloat16, device="cuda")
    v = torch.randn(2, 2, 901, 128, dtype=torch.bfloat16, device="cuda")
    cfg = dataclasses.replace(K.default_config("bf16", 128, causal), **_VARIANTS[variant])
    out, lse = _run(q, k, v, causal, cfg)
    ref, ref_lse = _reference(q, k, v, causal, 128 ** -0.5)
    assert not torch.isnan(out).any()
    assert (out.float() - ref).abs().max().item() < 1.6e-2
    assert (lse - ref_lse).abs().max().item() < 1e-3


def test_public_entry_and_scale() -> None:
    _require_sm90()
    torch.manual_seed(5)
    q, k, v = (torch.randn(1, 2, 300, 64, dtype=torch.float16, device="cuda") for _ in range(3))
    out, lse = A.attention(q, k, v, causal=True, scale=0.3)
    ref, ref_lse = _reference(q, k, v, True, 0.3)
    assert out.shape == q.shape and out.dtype == q.dtype and lse.dtype == torch.float32
    assert (out.float() - ref).abs().max().item() < 2e-3
    assert (lse - ref_lse).abs().max().item() < 1e-3
    again, _ = A.attention(q, k, v, causal=True, scale=0.3)  # the cached path
    assert torch.equal(again, out)
    k2 = torch.randn_like(k)  # same shapes, new contents at a new address
    out2, _ = A.attention(q, k2, v, causal=True, scale=0.3)
    assert (out2.float() - _reference(q, k2, v, True, 0.3)[0]).abs().max().item() < 2e-3
    with pytest.raises(A.AttentionError, match="causal = 1"):
        A.attention(q, k, v, causal=1, scale=0.3)  # type: ignore[arg-type]
    e_out, e_lse = A.attention(q[:, :, :0], k, v)  # no queries: empty results
    assert e_out.shape == (1, 2, 0, 64) and e_lse.shape == (1, 2, 0)


def test_bad_device_tensors_are_named() -> None:
    _require_sm90()
    q = torch.randn(1, 2, 64, 128, dtype=torch.bfloat16, device="cuda")
    with pytest.raises(A.AttentionError, match="head dimension must be contiguous"):
        A.attention(q.transpose(2, 3).contiguous().transpose(2, 3), q, q)
    with pytest.raises(A.AttentionError, match="k is on device 'cpu'"):
        A.attention(q, q.cpu(), q)
    with pytest.raises(A.AttentionError, match="head_dim 96"):
        x = torch.randn(1, 2, 64, 96, dtype=torch.bfloat16, device="cuda")
        A.attention(x, x, x)


def test_demo_attention_check() -> None:
    _require_sm90()
    from nvatom.demo import gpu_attention_check

    r = gpu_attention_check(1, 2, 512, 128, causal=True, rounds=1, batch=2)
    assert r["max_abs_err"] <= max(1.5 * r["sdpa_max_abs_err"], 4e-3), r
    assert r["tflops"] > 0 and r["sdpa_tflops"] > 0
