"""The SM90 attention backward kernel (issue 26) on an sm_90 GPU: dq, dk, dv of random shapes
(head dims 64 and 128, causal or not, grouped-query heads, ragged and unequal lengths, both
16-bit types, a gradient through the lse) against float64 autograd of softmax(scale q k^T) v,
with every output poisoned with NaN before the run; the kernel against the float32 reference
backward; a strided dout; the outcome of a CTA whose KV rows no query row sees (causal,
Sk > Sq: dK = dV = 0 stored)."""

from __future__ import annotations

import math
import random

import pytest

pytestmark = pytest.mark.gpu

torch = pytest.importorskip("torch")

from tests.gpu.attention_ref import reference_grads  # noqa: E402


def _require_sm90() -> None:
    if not torch.cuda.is_available() or torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("the SM90 attention backward kernel needs an sm_90 (Hopper) GPU")


def _float64_grads(q, k, v, causal, scale, gout, glse, window=(-1, -1), softcap=0.0):
    """Independent reference: float64 autograd of the forward's math (attention_ref)."""
    return reference_grads(q, k, v, causal, scale, gout, glse, softcap=softcap, window=window)


def _rel(a, ref):
    """Relative Frobenius error; the denominator has a floor of RMS 0.05 per element, for a
    gradient that is zero in exact arithmetic (causal, Sq = 1: dS = P (dP - rowsum) = 0
    there, and both backwards leave the rounding of rowsum(dO * O) in it)."""
    floor = 0.05 * math.sqrt(ref.numel())
    return ((a.double() - ref).norm() / max(ref.norm().item(), floor)).item()


def _case(seed):
    r = random.Random(seed)
    d = r.choice((64, 128))
    hk = r.choice((1, 2, 4))
    h = hk * r.choice((1, 2, 3))
    sq = r.choice((1, 17, 64, 127, 200, 333, 520))
    sk = r.choice((5, 64, 129, 256, 300, 700))
    causal = r.random() < 0.5  # top-left: every row keeps key 0, whatever Sq and Sk
    dt = r.choice((torch.bfloat16, torch.float16))
    return r.choice((1, 2)), h, hk, sq, sk, d, causal, dt


def _run(b, h, hk, sq, sk, d, causal, dt, seed, with_lse, scale=None):
    import nvatom
    from nvatom.attention import attention_backward

    g = torch.Generator(device="cuda").manual_seed(seed)
    q = torch.randn(b, h, sq, d, device="cuda", generator=g).to(dt)
    k = torch.randn(b, hk, sk, d, device="cuda", generator=g).to(dt)
    v = torch.randn(b, hk, sk, d, device="cuda", generator=g).to(dt)
    gout = torch.randn(b, h, sq, d, device="cuda", generator=g).to(dt)
    glse = torch.randn(b, h, sq, device="cuda", generator=g) if with_lse else None
    out, lse = nvatom.attention(q, k, v, causal=causal, scale=scale)
    grads = tuple(torch.full(t.shape, float("nan"), device="cuda", dtype=dt)
                  for t in (q, k, v))
    ours = attention_backward(gout, q, k, v, out, lse, causal=causal,
                                               scale=scale, dlse=glse, backend="kernel",
                                               out_grads=grads)
    torch.cuda.synchronize()
    return q, k, v, gout, glse, out, lse, ours


@pytest.mark.parametrize("seed", range(24))
def test_backward_kernel_against_float64(seed: int) -> None:
    """Random shapes; the error bar is the one a float32-accumulating bf16/f16 backward
    reaches (the reference backward's own error, measured in the same test, times 1.5,
    with a floor at the 16-bit rounding level)."""
    _require_sm90()
    from nvatom.attention import attention_backward

    b, h, hk, sq, sk, d, causal, dt = _case(seed)
    scale = None if seed % 3 else 0.07
    q, k, v, gout, glse, out, lse, ours = _run(b, h, hk, sq, sk, d, causal, dt, seed,
                                                with_lse=seed % 4 == 1, scale=scale)
    sc = 1 / math.sqrt(d) if scale is None else scale
    ref = _float64_grads(q, k, v, causal, sc, gout, glse)
    theirs = attention_backward(gout, q, k, v, out, lse, causal=causal,
                                                 scale=scale, dlse=glse, backend="reference")
    for name, o, t, r in zip(("dq", "dk", "dv"), ours, theirs, ref, strict=True):
        assert o.dtype == dt and o.shape == r.shape, name
        assert not torch.isnan(o).any(), (name, _case(seed))
        bar = max(1.5 * _rel(t, r), 6e-3)
        assert _rel(o, r) <= bar, (_case(seed), name, _rel(o, r), _rel(t, r))


def test_kv_rows_no_query_sees_get_zero_gradients() -> None:
    """Causal with Sk = 700 > Sq = 100: KV rows from 100 on are seen by no query row (top-left
    alignment); their CTAs run no Q block and still store dK = dV = 0 over the NaN."""
    _require_sm90()
    *_, (dq, dk, dv) = _run(1, 4, 2, 100, 700, 128, True, torch.bfloat16, 7, False)
    assert not torch.isnan(dk).any() and not torch.isnan(dv).any()
    assert (dk[:, :, 100:] == 0).all() and (dv[:, :, 100:] == 0).all()
    assert dk[:, :, :100].abs().sum() > 0 and not torch.isnan(dq).any()


def test_strided_dout_and_bshd_inputs() -> None:
    """(B, S, H, D) storage seen as (B, H, S, D) views, and a dout that is not TMA-aligned
    (copied): the same gradients as contiguous inputs."""
    _require_sm90()
    import nvatom
    from nvatom.attention import attention_backward

    g = torch.Generator(device="cuda").manual_seed(3)
    qs, ks, vs = (torch.randn(2, 150, hh, 64, device="cuda", generator=g).to(torch.bfloat16)
                  for hh in (4, 2, 2))
    q, k, v = (t.transpose(1, 2) for t in (qs, ks, vs))
    out, lse = nvatom.attention(q, k, v, causal=True)
    big = torch.randn(2, 4, 150, 65, device="cuda", generator=g).to(torch.bfloat16)
    dout = big[..., :64]  # sequence stride 65 elements: not a 16-byte multiple
    a = attention_backward(dout, q, k, v, out, lse, causal=True,
                                            backend="kernel")
    b = attention_backward(dout.contiguous(), q.contiguous(), k.contiguous(),
                                            v.contiguous(), out, lse, causal=True,
                                            backend="kernel")
    for x, y in zip(a, b, strict=True):
        assert _rel(x, y.double()) < 1e-6


@pytest.mark.parametrize(("sq", "sk", "window", "causal", "d"), [
    (300, 300, (100, 37), False, 128),
    (520, 700, (64, -1), True, 64),
    (333, 200, (200, 0), False, 128),
    (129, 777, (-1, 50), False, 64),
    (600, 600, (1, 1), False, 128),
    (200, 450, (300, 200), True, 128),
])
def test_window_kernel_against_float64(sq, sk, window, causal, d) -> None:
    """Sliding windows in the backward kernel (both edges, one edge, with causal; windows
    narrower than a Q block and wider than the sequence), against float64 with NaN-poisoned
    gradients, within the reference backward's error bar."""
    _require_sm90()
    import nvatom
    from nvatom.attention import attention_backward

    g = torch.Generator(device="cuda").manual_seed(sq + sk + d)
    q = torch.randn(2, 4, sq, d, device="cuda", generator=g).to(torch.bfloat16)
    k, v = (torch.randn(2, 2, sk, d, device="cuda", generator=g).to(torch.bfloat16)
            for _ in range(2))
    gout = torch.randn(2, 4, sq, d, device="cuda", generator=g).to(torch.bfloat16)
    out, lse = nvatom.attention(q, k, v, causal=causal, window=window)
    grads = tuple(torch.full(t.shape, float("nan"), device="cuda", dtype=torch.bfloat16)
                  for t in (q, k, v))
    ours = attention_backward(gout, q, k, v, out, lse, causal=causal, window=window,
                              backend="kernel", out_grads=grads)
    ref = _float64_grads(q, k, v, causal, 1 / math.sqrt(d), gout, None, window)
    theirs = attention_backward(gout, q, k, v, out, lse, causal=causal, window=window,
                                backend="reference")
    for name, o, t, r in zip(("dq", "dk", "dv"), ours, theirs, ref, strict=True):
        assert not torch.isnan(o).any(), name
        assert _rel(o, r) <= max(1.5 * _rel(t, r), 6e-3), (name, _rel(o, r), _rel(t, r))


@pytest.mark.parametrize(("d", "causal", "window", "cap"), [
    (128, False, (-1, -1), 30.0), (128, True, (-1, -1), 2.0), (64, False, (50, 10), 5.0),
    (64, True, (-1, -1), 50.0), (128, False, (100, 37), 1.0),
])
def test_softcap_kernel_against_float64(d, causal, window, cap) -> None:
    """Softcap in the backward kernel (opt-in: backend="kernel"; the default still takes the
    reference until this has run): t = tanh(scale s / c) in the S registers, P recomputed,
    dS times max(1 - t^2, 0); against float64 within the reference backward's error bar,
    NaN-poisoned gradients, masked elements (t = -inf) contributing exactly nothing."""
    _require_sm90()
    import nvatom
    from nvatom.attention import attention_backward

    g = torch.Generator(device="cuda").manual_seed(d + int(cap))
    q = torch.randn(2, 4, 333, d, device="cuda", generator=g).to(torch.bfloat16)
    k, v = (torch.randn(2, 2, 400, d, device="cuda", generator=g).to(torch.bfloat16)
            for _ in range(2))
    gout = torch.randn(2, 4, 333, d, device="cuda", generator=g).to(torch.bfloat16)
    out, lse = nvatom.attention(q, k, v, causal=causal, window=window, softcap=cap)
    grads = tuple(torch.full(t.shape, float("nan"), device="cuda", dtype=torch.bfloat16)
                  for t in (q, k, v))
    ours = attention_backward(gout, q, k, v, out, lse, causal=causal, window=window,
                              softcap=cap, backend="kernel", out_grads=grads)
    ref = _float64_grads(q, k, v, causal, 1 / math.sqrt(d), gout, None, window, cap)
    theirs = attention_backward(gout, q, k, v, out, lse, causal=causal, window=window,
                                softcap=cap, backend="reference")
    for name, o, t, r in zip(("dq", "dk", "dv"), ours, theirs, ref, strict=True):
        assert not torch.isnan(o).any(), name
        assert _rel(o, r) <= max(1.5 * _rel(t, r), 6e-3), (name, _rel(o, r), _rel(t, r))
