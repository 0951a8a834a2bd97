"""``nvatom.gemm`` with a fused epilogue on an sm_90 GPU against torch in float64.

``out = act(alpha * (a @ b) * scale_a * scale_b + beta * c + bias) + residual`` for every
activation, bias per column and per row (bf16/f16 and f32), alpha/beta with C, and the
residual, with bf16, f16 and e4m3 (per-tensor and row-wise scales) operands, on shapes
ragged in M and N (bias, C and residual loads past the edges) and large enough for several
tiles per CTA (the persistent grid has one CTA per SM; ping-pong warpgroups alternate
tiles).  Fresh random inputs per case; ``out`` poisoned with NaN first (an element left
unwritten fails); C as ``out`` itself (in place), a residual broadcast from one row (row
stride 0), C a strided view, storage read through a copy; K = 0; the torch operator.

Reference: float64 from the exact inputs (bf16/f16/e4m3 values and the scales are exact in
float64), the activations by torch in float64.  Tolerance per element, with
``S = |alpha| (|a| @ |b|) sa sb`` and ``pre`` the float64 pre-activation value:

* accumulation: ``2^-23 (K + 8) S`` for 16-bit inputs (f32 sums of exact products, at most
  one f32 rounding per addition, truncation allowed), FP8's ``2^-13 (K/32 + 1) S``
  (tests/gpu/test_gemm_fp8_gpu.py: WGMMA's FP8 partial sums; promoted every K block);
* the epilogue's f32 steps: ``2^-21 (|alpha acc s| + |beta c| + |bias|)`` (four f32
  roundings at most before the activation);
* the activation: Lipschitz 1.2 on that (relu 1; gelu, gelu_tanh and silu at most 1.13),
  plus ``2^-15 |act(pre)|`` for its approximation (tests/kernels/test_fusion.py measures
  the float32 programs within 7.3e-6 relative; ex2.approx and rcp.approx add a few ulps);
* the output's rounding: its unit roundoff times ``|ref|`` (bf16 2^-8, f16 2^-11, f32
  2^-24), with 2% margin, and the f32 addition of the residual (2^-23 |ref|).

The norm-wise relative error is also reported against torch's unfused chain
(``torch.matmul`` in the output's type, then the same ops), which rounds the product to the
output type before the epilogue: nvatom's fused result is closer to float64.
"""

from __future__ import annotations

import math
import random
import zlib

import pytest

pytestmark = pytest.mark.gpu

torch = pytest.importorskip("torch")

import nvatom  # noqa: E402

E4M3 = torch.float8_e4m3fn
F = torch.nn.functional
ACTS = (None, "relu", "gelu", "gelu_tanh", "silu")
UNIT = {torch.bfloat16: 2.0**-8, torch.float16: 2.0**-11, torch.float32: 2.0**-24}


def _require_sm90() -> None:
    if not torch.cuda.is_available() or torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("nvatom's fused epilogues run on the SM90 kernel: an sm_90 (Hopper) GPU")


def _act64(x, act):
    if act is None:
        return x
    if act == "relu":
        return torch.relu(x)
    if act == "gelu":
        return F.gelu(x)
    if act == "gelu_tanh":
        return F.gelu(x, approximate="tanh")
    return F.silu(x)


def _operands(m, n, k, dtype, gen, scale_mode="tensor"):
    """a, b (bf16/f16: b row-major; e4m3: column-major) and the scales (1.0 for 16-bit),
    sized so that the pre-activation values are about N(0, 1)."""
    if dtype == E4M3:
        a = (torch.randn(m, k, device="cuda", generator=gen) * 2).to(E4M3)
        b = (torch.randn(n, k, device="cuda", generator=gen) * 2).to(E4M3).t()
        base = 1.0 / (4.0 * math.sqrt(k))
        if scale_mode == "row":
            sa = (torch.rand(m, 1, device="cuda", generator=gen) + 0.5) * base
            sb = torch.rand(1, n, device="cuda", generator=gen) + 0.5
        else:
            sa = (torch.rand((), device="cuda", generator=gen) + 0.5) * base
            sb = torch.rand((), device="cuda", generator=gen) + 0.5
        return a, b, sa.float(), sb.float()
    a = torch.randn(m, k, device="cuda", generator=gen).to(dtype)
    b = (torch.randn(k, n, device="cuda", generator=gen) / math.sqrt(k)).to(dtype)
    return a, b, None, None


def _terms(m, n, out_dtype, gen, terms):
    """The epilogue's keyword arguments for ``terms`` (a set of names)."""
    kw = {}
    rnd = lambda *s, dt=out_dtype: torch.randn(*s, device="cuda", generator=gen).to(dt)  # noqa: E731
    if "alpha" in terms:
        kw["alpha"] = 0.75
    if "c" in terms:
        kw["c"], kw["beta"] = rnd(m, n), -0.5
    if "bias_col" in terms:
        kw["bias"] = rnd(n)
    if "bias_col_f32" in terms:
        kw["bias"] = rnd(n, dt=torch.float32)
    if "bias_row" in terms:
        kw["bias"] = rnd(m, 1)
    if "residual" in terms:
        kw["residual"] = rnd(m, n)
    return kw


def _reference(a, b, sa, sb, act, alpha=1.0, beta=None, c=None, bias=None, residual=None):
    """(float64 result, per-element tolerance without the output rounding)."""
    k = a.shape[1]
    ad, bd = a.double(), b.double()
    s = 1.0
    if sa is not None:
        s = sa.double() * sb.double()
    acc = (ad @ bd) * s
    bound = (ad.abs() @ bd.abs()) * abs(s) * abs(alpha)
    pre = alpha * acc
    mag = pre.abs()
    if c is not None:
        beta = 1.0 if beta is None else beta
        pre = pre + beta * c.double()
        mag = mag + abs(beta) * c.double().abs()
    if bias is not None:
        bd64 = bias.double().reshape(-1, 1) if bias.dim() == 2 and bias.shape[1] == 1 \
            else bias.double().reshape(1, -1)
        pre = pre + bd64
        mag = mag + bd64.abs()
    y = _act64(pre, act)
    accum = (2.0**-13 * (k / 32 + 1) if a.dtype == E4M3 else 2.0**-23 * (k + 8)) * bound
    tol = (1.2 if act else 1.0) * (accum + 2.0**-21 * mag) + 2.0**-15 * y.abs()
    if residual is not None:
        y = y + residual.double()
    return y, tol + 2.0**-23 * y.abs() + 1e-30


def _check(out, ref, tol) -> float:
    assert not torch.isnan(out).any(), "elements left unwritten (NaN poison)"
    full = tol + 1.02 * UNIT[out.dtype] * ref.abs()
    err = (out.double() - ref).abs()
    bad = err > full
    assert not bad.any(), (f"{int(bad.sum())} of {bad.numel()} elements out of tolerance; "
                           f"worst {float((err - full).max()):.3g} over, at "
                           f"{tuple(int(i) for i in (bad.nonzero()[0]))} of {tuple(out.shape)}")
    return float((out.double() - ref).norm() / max(float(ref.norm()), 1e-30))


def _random_shape(seed):
    rng = random.Random(seed)
    return (rng.randint(1, 600), 16 * rng.randint(1, 48), 16 * rng.randint(1, 40))


#: ragged M and N (not a multiple of any tile), several tiles per CTA (17 x 17 tiles of
#: 128 x 128 > 132 SMs), one row, a random one.
SHAPES = [(129, 264, 80), (2085, 2072, 128), (1, 16, 64), _random_shape(25)]
TERM_SETS = [("bias_col",), ("bias_row", "c"), ("alpha", "c", "residual"),
             ("alpha", "bias_col_f32", "c", "residual")]
DTYPES = {"bf16": torch.bfloat16, "f16": torch.float16, "e4m3": E4M3}


@pytest.mark.parametrize("terms", TERM_SETS, ids="+".join)
@pytest.mark.parametrize("act", ACTS, ids=str)
@pytest.mark.parametrize("dt", sorted(DTYPES))
def test_fused_epilogue_matches_float64(dt, act, terms) -> None:
    _require_sm90()
    dtype = DTYPES[dt]
    gen = torch.Generator(device="cuda").manual_seed(zlib.crc32(repr((dt, act, terms)).encode()))
    out_dtype = torch.bfloat16 if dtype == E4M3 else dtype
    for m, n, k in SHAPES:
        a, b, sa, sb = _operands(m, n, k, dtype, gen)
        kw = _terms(m, n, out_dtype, gen, set(terms))
        out = torch.full((m, n), float("nan"), dtype=out_dtype, device="cuda")
        nvatom.gemm(a, b, out, scale_a=sa, scale_b=sb, activation=act, **kw)
        torch.cuda.synchronize()
        ref, tol = _reference(a, b, sa, sb, act, **kw)
        _check(out, ref, tol)


@pytest.mark.parametrize("act", ACTS, ids=str)
def test_fp8_row_scales_and_f32_output(act) -> None:
    """Row-wise FP8 scales (staged in shared memory) before the epilogue; bf16 inputs with
    f32 output (f32 C, residual and row bias)."""
    _require_sm90()
    gen = torch.Generator(device="cuda").manual_seed(7)
    for m, n, k in SHAPES[:2]:
        a, b, sa, sb = _operands(m, n, k, E4M3, gen, scale_mode="row")
        kw = _terms(m, n, torch.bfloat16, gen, {"bias_col", "c", "residual"})
        out = torch.full((m, n), float("nan"), dtype=torch.bfloat16, device="cuda")
        nvatom.gemm(a, b, out, scale_a=sa, scale_b=sb, activation=act, **kw)
        _check(out, *_reference(a, b, sa, sb, act, **kw))
        a, b, _, _ = _operands(m, n, k, torch.bfloat16, gen)
        kw = _terms(m, n, torch.float32, gen, {"bias_row", "c", "residual"})
        kw["bias"] = kw["bias"].float()
        out = torch.full((m, n), float("nan"), dtype=torch.float32, device="cuda")
        nvatom.gemm(a, b, out, activation=act, **kw)
        _check(out, *_reference(a, b, None, None, act, **kw))


def test_in_place_broadcast_and_strided_operands() -> None:
    """C is ``out`` itself (as cuBLAS's C == D), the residual one row broadcast (row stride
    0), the bias a (1, N) view, b column-major, C and residual strided views of wider
    tensors; an odd row stride and a strided bias (read through copies); K = 0 gives the
    epilogue of zeros."""
    _require_sm90()
    gen = torch.Generator(device="cuda").manual_seed(11)
    m, n, k = 1000, 1032, 256
    a = torch.randn(m, k, device="cuda", generator=gen).bfloat16()
    b = (torch.randn(n, k, device="cuda", generator=gen) / 16).bfloat16().t()  # K-major
    out = torch.randn(m, n, device="cuda", generator=gen).bfloat16()
    c = out.clone()
    row = torch.randn(1, n, device="cuda", generator=gen).bfloat16()
    residual = row.expand(m, n)
    bias = torch.randn(1, n, device="cuda", generator=gen).bfloat16()
    nvatom.gemm(a, b, out, c=out, beta=2.0, residual=residual, bias=bias, activation="gelu")
    _check(out, *_reference(a, b, None, None, "gelu", beta=2.0, c=c, bias=bias,
                            residual=residual))
    wide = torch.randn(m, n + 40, device="cuda", generator=gen).bfloat16()
    cv, rv = wide[:, 8:8 + n], wide[:, 16:16 + n]
    out = torch.full((m, n), float("nan"), dtype=torch.bfloat16, device="cuda")
    nvatom.gemm(a, b, out, c=cv, residual=rv, activation="silu", alpha=-1.5)
    _check(out, *_reference(a, b, None, None, "silu", alpha=-1.5, c=cv, residual=rv))
    # storage the kernel cannot read in place (odd row stride, strided bias): read from a copy
    odd = torch.randn(m, n + 1, device="cuda", generator=gen).bfloat16()[:, :n]
    sbias = torch.randn(2 * n, device="cuda", generator=gen).bfloat16()[::2]
    out = torch.full((m, n), float("nan"), dtype=torch.bfloat16, device="cuda")
    nvatom.gemm(a, b, out, c=odd, bias=sbias, activation="gelu_tanh")
    _check(out, *_reference(a, b, None, None, "gelu_tanh", c=odd, bias=sbias))
    empty = torch.empty(m, 0, device="cuda").bfloat16()
    out = torch.full((m, n), float("nan"), dtype=torch.bfloat16, device="cuda")
    nvatom.gemm(empty, torch.empty(0, n, device="cuda").bfloat16(), out, bias=bias,
                activation="relu", residual=rv)
    ref = torch.relu(bias.double().expand(m, n)) + rv.double()
    _check(out, ref, 2.0**-23 * ref.abs())


def test_fused_closer_to_float64_than_torch_unfused() -> None:
    """bias + gelu: nvatom applies it to the f32 accumulators, torch's unfused chain to the
    product already rounded to bf16; both are compared with float64 (norm-wise)."""
    _require_sm90()
    gen = torch.Generator(device="cuda").manual_seed(3)
    m, n, k = 2048, 2048, 1024
    a, b, _, _ = _operands(m, n, k, torch.bfloat16, gen)
    bias = torch.randn(n, device="cuda", generator=gen).bfloat16()
    ours = nvatom.gemm(a, b, bias=bias, activation="gelu")
    theirs = F.gelu(torch.addmm(bias, a, b))
    ref, tol = _reference(a, b, None, None, "gelu", bias=bias)
    rel_ours = _check(ours, ref, tol)
    rel_theirs = float((theirs.double() - ref).norm() / ref.norm())
    assert rel_ours <= rel_theirs * 1.05, (rel_ours, rel_theirs)


def test_torch_operator_matches_nvatom_gemm() -> None:
    from nvatom import torch_ops

    _require_sm90()
    gen = torch.Generator(device="cuda").manual_seed(5)
    m, n, k = 300, 520, 192
    a, b, _, _ = _operands(m, n, k, torch.bfloat16, gen)
    kw = _terms(m, n, torch.bfloat16, gen, {"bias_col", "c", "residual", "alpha"})
    got = torch_ops.gemm_epilogue(a, b, activation="gelu_tanh", **kw)
    want = nvatom.gemm(a, b, activation="gelu_tanh", **kw)
    assert torch.equal(got, want)
    op = torch.ops.nvatom.gemm_epilogue(a, b, None, None, kw["bias"], kw["c"],
                                        kw["residual"], activation="gelu_tanh",
                                        alpha=kw["alpha"], beta=kw["beta"])
    assert torch.equal(op, want)
