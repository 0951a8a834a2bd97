"""Training with nvatom's attention (issue 26, the parts that exist): the differentiable
``torch.ops.nvatom.attention`` and ``flash_attn_func`` on an sm_90 GPU.

Gradients (dq, dk, dv, through the out and the lse) against float64 autograd of
softmax(scale q k^T) v on random shapes (GQA, causal, Sq != Sk, ragged lengths, each head
dim), with the bar set by torch SDPA's own bf16/f16 gradients against the same float64
reference; ``torch.compile(fullgraph=True)`` and CUDA-graph capture of a forward + backward
step equal to eager; FlashAttention's (batch, seqlen, heads, head_dim) entry point; its
refusals.  The backward runs the SM90 backward kernel at head dims 64 and 128 without
softcap (tests/gpu/test_attention_bwd_gpu.py checks it alone) and the float32 reference
otherwise (d 256, softcap): what is checked here is the operator, its
gradients and its compile/graph behaviour."""

from __future__ import annotations

import math

import pytest

pytestmark = pytest.mark.gpu

torch = pytest.importorskip("torch")

from tests.gpu.attention_ref import reference_grads as _reference_grads  # noqa: E402


def _require_sm90() -> None:
    if not torch.cuda.is_available() or torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("the SM90 attention kernel needs an sm_90 (Hopper) GPU")


def _ops():
    import nvatom.torch_ops as T

    T.register()
    return T


def _inputs(b, h, hk, sq, sk, d, dt, seed):
    g = torch.Generator(device="cuda").manual_seed(seed)
    q = torch.randn(b, h, sq, d, device="cuda", generator=g).to(dt)
    k = torch.randn(b, hk, sk, d, device="cuda", generator=g).to(dt)
    v = torch.randn(b, hk, sk, d, device="cuda", generator=g).to(dt)
    gout = torch.randn(b, h, sq, d, device="cuda", generator=g)
    glse = torch.randn(b, h, sq, device="cuda", generator=g)
    return q, k, v, gout, glse


def _ours(q, k, v, causal, gout, glse):
    qg, kg, vg = (t.detach().clone().requires_grad_() for t in (q, k, v))
    out, lse = torch.ops.nvatom.attention(qg, kg, vg, causal, None)
    loss = (out.float() * gout).sum()
    if glse is not None:
        loss = loss + (lse * glse).sum()
    loss.backward()
    return qg.grad, kg.grad, vg.grad


def _sdpa(q, k, v, causal, gout):
    qg, kg, vg = (t.detach().clone().requires_grad_() for t in (q, k, v))
    out = torch.nn.functional.scaled_dot_product_attention(
        qg, kg, vg, is_causal=causal, enable_gqa=q.shape[1] != k.shape[1])
    (out.float() * gout).sum().backward()
    return qg.grad, kg.grad, vg.grad


def _rel(a, ref):
    return ((a.double() - ref).norm() / ref.norm()).item()


CASES = [
    # (B, H, Hkv, Sq, Sk, D, causal, dtype)
    (2, 4, 4, 129, 257, 64, False, torch.bfloat16),
    (1, 8, 2, 300, 300, 128, True, torch.bfloat16),
    (2, 2, 1, 64, 1000, 128, False, torch.float16),
    (1, 4, 4, 77, 77, 256, True, torch.bfloat16),
    (1, 4, 2, 513, 200, 64, True, torch.float16),
]


@pytest.mark.parametrize("case", range(len(CASES)))
def test_gradients_against_float64_and_sdpa(case: int) -> None:
    """dq, dk, dv within 1.5x SDPA's own error against float64 (plus a floor at the 16-bit
    rounding level)."""
    _require_sm90()
    _ops()
    b, h, hk, sq, sk, d, causal, dt = CASES[case]
    q, k, v, gout, _ = _inputs(b, h, hk, sq, sk, d, dt, seed=case)
    ref = _reference_grads(q, k, v, causal, 1 / math.sqrt(d), gout, None)
    ours = _ours(q, k, v, causal, gout, None)
    theirs = _sdpa(q, k, v, causal, gout)
    for name, o, t, r in zip(("dq", "dk", "dv"), ours, theirs, ref, strict=True):
        assert o.dtype == dt and o.shape == r.shape
        assert not torch.isnan(o).any(), name
        bar = max(1.5 * _rel(t, r), 4e-3)
        assert _rel(o, r) <= bar, (CASES[case], name, _rel(o, r), _rel(t, r))


def test_gradient_through_the_lse() -> None:
    """The log-sum-exp is an output too: its gradient reaches q and k."""
    _require_sm90()
    _ops()
    q, k, v, gout, glse = _inputs(2, 4, 2, 150, 260, 128, torch.bfloat16, seed=40)
    ref = _reference_grads(q, k, v, True, 1 / math.sqrt(128), gout, glse)
    for name, o, r in zip(("dq", "dk", "dv"), _ours(q, k, v, True, gout, glse), ref,
                          strict=True):
        assert _rel(o, r) < 1e-2, (name, _rel(o, r))


def test_compile_fullgraph_forward_and_backward() -> None:
    _require_sm90()
    _ops()
    q, k, v, gout, _ = _inputs(1, 4, 2, 200, 333, 128, torch.bfloat16, seed=41)

    def step(q, k, v):
        out, _ = torch.ops.nvatom.attention(q, k, v, True, None)
        return (out.float() * gout).sum()

    torch._dynamo.reset()
    compiled = torch.compile(step, fullgraph=True)
    grads = []
    for fn in (step, compiled):
        qg, kg, vg = (t.detach().clone().requires_grad_() for t in (q, k, v))
        fn(qg, kg, vg).backward()
        grads.append((qg.grad, kg.grad, vg.grad))
    for e, c in zip(*grads, strict=True):  # the same kernels; cuBLAS may pick other algorithms
        assert _rel(c, e.double()) < 1e-3


def test_cuda_graph_forward_and_backward() -> None:
    """One training step's attention forward + backward captured once; replayed on new
    inputs it equals eager."""
    _require_sm90()
    _ops()
    q, k, v, gout, _ = _inputs(2, 4, 2, 256, 300, 64, torch.bfloat16, seed=42)
    qs, ks, vs = (t.detach().clone().requires_grad_() for t in (q, k, v))
    go = gout.to(torch.bfloat16)

    def step():
        out, _ = torch.ops.nvatom.attention(qs, ks, vs, False, None)
        return (out, *torch.autograd.grad(out, (qs, ks, vs), go))

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(2):
            step()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static = step()
    q2, k2, v2, _, _ = _inputs(2, 4, 2, 256, 300, 64, torch.bfloat16, seed=43)
    with torch.no_grad():
        for dst, src in ((qs, q2), (ks, k2), (vs, v2)):
            dst.copy_(src)
    graph.replay()
    torch.cuda.synchronize()
    qe, ke, ve = (t.detach().clone().requires_grad_() for t in (q2, k2, v2))
    out_e, _ = torch.ops.nvatom.attention(qe, ke, ve, False, None)
    eager = (out_e, *torch.autograd.grad(out_e, (qe, ke, ve), go))
    for s, e in zip(static, eager, strict=True):
        assert _rel(s, e.double()) < 1e-3


def test_flash_attn_func_bshd() -> None:
    """FlashAttention's entry point on (batch, seqlen, heads, head_dim): the forward equals
    SDPA's within its rounding, the gradients the float64 reference's."""
    _require_sm90()
    T = _ops()
    q, k, v, gout, _ = _inputs(2, 8, 2, 190, 190, 128, torch.bfloat16, seed=44)
    qb, kb, vb = (t.transpose(1, 2).contiguous().requires_grad_() for t in (q, k, v))
    out = T.flash_attn_func(qb, kb, vb, causal=True, softmax_scale=0.1)
    assert out.shape == (2, 190, 8, 128)
    (out.float() * gout.transpose(1, 2)).sum().backward()
    ref = _reference_grads(q, k, v, True, 0.1, gout, None)
    for name, g, r in zip(("dq", "dk", "dv"), (qb.grad, kb.grad, vb.grad), ref, strict=True):
        assert _rel(g.transpose(1, 2), r) < 1e-2, (name, _rel(g.transpose(1, 2), r))
    sdpa = torch.nn.functional.scaled_dot_product_attention(
        q, k, v, is_causal=True, scale=0.1, enable_gqa=True)
    assert _rel(out.transpose(1, 2), sdpa.double()) < 1e-2


@pytest.mark.parametrize(("kw", "msg"), [
    (dict(dropout_p=0.1), "dropout_p = 0.1 is not supported yet"),
    (dict(return_attn_probs=True), "return_attn_probs = True is not supported yet"),
])
def test_flash_attn_func_refuses_what_it_lacks(kw: dict, msg: str) -> None:
    _require_sm90()
    T = _ops()
    from nvatom.attention import AttentionError

    q = torch.randn(1, 64, 2, 64, device="cuda", dtype=torch.bfloat16)
    with pytest.raises(AttentionError, match=msg.replace("(", r"\(").replace(")", r"\)")):
        T.flash_attn_func(q, q, q, **kw)


def test_flash_attn_func_refuses_bottom_right_causal() -> None:
    """FlashAttention's causal mask for seqlen_q != seqlen_k is aligned at the bottom right;
    nvatom's at the top left: refused, not computed differently."""
    _require_sm90()
    T = _ops()
    from nvatom.attention import AttentionError

    q = torch.randn(1, 32, 2, 64, device="cuda", dtype=torch.bfloat16)
    kv = torch.randn(1, 80, 2, 64, device="cuda", dtype=torch.bfloat16)
    with pytest.raises(AttentionError, match="bottom right"):
        T.flash_attn_func(q, kv, kv, causal=True)
    with pytest.raises(AttentionError, match="window_size = \\(8, 8\\) with seqlen_q"):
        T.flash_attn_func(q, kv, kv, window_size=(8, 8))
    with pytest.raises(AttentionError, match="window_size = 'x': a pair"):
        T.flash_attn_func(q, q, q, window_size="x")
    assert T.flash_attn_func(q, kv, kv, causal=False).shape == (1, 32, 2, 64)


@pytest.mark.parametrize(("d", "causal"), [(128, False), (64, True), (256, True)])
def test_softcap_forward_and_gradients(d: int, causal: bool) -> None:
    """Logit softcapping (softcap * tanh(scale q k^T / softcap)) with a cap small enough to
    bend most scores: the forward (the kernel's tanh.approx) and the gradients (the
    reference backward) against float64."""
    _require_sm90()
    _ops()
    q, k, v, gout, glse = _inputs(2, 4, 2, 200, 333, d, torch.bfloat16, seed=50 + d)
    cap = 1.5
    (ref_g, ref_o) = _reference_grads(q, k, v, causal, 1 / math.sqrt(d), gout, glse, cap,
                                      want_out=True)
    qg, kg, vg = (t.detach().clone().requires_grad_() for t in (q, k, v))
    out, lse = torch.ops.nvatom.attention(qg, kg, vg, causal, None, cap)
    assert _rel(out, ref_o) < 1e-2, _rel(out, ref_o)
    ((out.float() * gout).sum() + (lse * glse).sum()).backward()
    for name, g, r in zip(("dq", "dk", "dv"), (qg.grad, kg.grad, vg.grad), ref_g, strict=True):
        assert _rel(g, r) < 2e-2, (name, _rel(g, r))
    if not causal:  # through FlashAttention's entry point too (its causal mask for Sq != Sk
        # is bottom-right aligned: refused there, tests/gpu: test_flash_attn_func_refuses_...)
        out2 = _ops().flash_attn_func(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                      causal=causal, softcap=cap)
        assert _rel(out2.transpose(1, 2), ref_o) < 1e-2


WINDOWS = [
    # (B, H, Hkv, Sq, Sk, D, causal, window, softcap)
    (2, 4, 2, 700, 700, 128, False, (100, 100), 0.0),  # both edges, several KV tiles
    (1, 8, 8, 513, 513, 64, True, (255, -1), 0.0),  # causal + left: the walk starts late
    (2, 2, 1, 300, 900, 256, False, (-1, 40), 0.0),  # right only, Sk > Sq
    (1, 4, 2, 1030, 1030, 128, False, (0, 0), 0.0),  # each row sees itself only
    (1, 4, 4, 400, 400, 64, True, (64, 0), 2.0),  # with softcap
]


@pytest.mark.parametrize("case", range(len(WINDOWS)))
def test_sliding_window_forward_and_gradients(case: int) -> None:
    """FlashAttention's window_size (aligned at the top left) in the forward kernel: the
    output and lse against float64 with the output NaN-poisoned through the cache of
    out/lse addresses (a fresh call), and the gradients (the reference backward)."""
    _require_sm90()
    _ops()
    b, h, hk, sq, sk, d, causal, window, cap = WINDOWS[case]
    q, k, v, gout, glse = _inputs(b, h, hk, sq, sk, d, torch.bfloat16, seed=60 + case)
    ref_g, ref_o = _reference_grads(q, k, v, causal, 1 / math.sqrt(d), gout, glse, cap,
                                    want_out=True, window=window)
    qg, kg, vg = (t.detach().clone().requires_grad_() for t in (q, k, v))
    out, lse = torch.ops.nvatom.attention(qg, kg, vg, causal, None, cap, *window)
    assert not torch.isnan(out).any() and not torch.isnan(lse).any()
    assert _rel(out, ref_o) < 1e-2, (WINDOWS[case], _rel(out, ref_o))
    ((out.float() * gout).sum() + (lse * glse).sum()).backward()
    for name, g, r in zip(("dq", "dk", "dv"), (qg.grad, kg.grad, vg.grad), ref_g, strict=True):
        assert _rel(g, r) < 2e-2, (WINDOWS[case], name, _rel(g, r))
    if sq == sk:  # FlashAttention's entry point
        out2 = _ops().flash_attn_func(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                      causal=causal, window_size=window, softcap=cap)
        assert _rel(out2.transpose(1, 2), ref_o) < 1e-2


def test_deterministic_backward_repeats_bit_for_bit() -> None:
    """``deterministic=True`` (the operator's and flash_attn_func's): two backward passes on
    the same inputs give identical bits (the reference backward); the default (the kernel)
    agrees with it within the 16-bit rounding of its dQ sums."""
    _require_sm90()
    T = _ops()
    q, k, v, gout, _ = _inputs(2, 4, 2, 300, 333, 128, torch.bfloat16, seed=45)

    def grads(deterministic):
        qg, kg, vg = (t.detach().clone().requires_grad_() for t in (q, k, v))
        out, _ = torch.ops.nvatom.attention(qg, kg, vg, True, None, 0.0, -1, -1,
                                            deterministic)
        (out.float() * gout).sum().backward()
        return qg.grad, kg.grad, vg.grad

    a, b = grads(True), grads(True)
    for x, y in zip(a, b, strict=True):
        assert torch.equal(x, y)
    for x, y in zip(a, grads(False), strict=True):
        assert _rel(y, x.double()) < 1e-2
    qb, kb, vb = (t.transpose(1, 2).detach().clone().requires_grad_() for t in (q, k, v))
    out = T.flash_attn_func(qb, kb, vb, causal=False, deterministic=True)
    out.float().sum().backward()
    assert qb.grad is not None and not torch.isnan(qb.grad).any()


@pytest.mark.parametrize(("lens_q", "lens_k", "causal", "window", "d"), [
    ([37, 0, 300, 129, 1], [60, 5, 300, 400, 77], False, (-1, -1), 128),
    ([200, 64, 513], [200, 64, 513], True, (-1, -1), 64),
    ([150, 333], [150, 333], False, (40, 7), 128),
    ([20, 7], [0, 9], False, (-1, -1), 64),
])
def test_flash_attn_varlen_func(lens_q, lens_k, causal, window, d) -> None:
    """Packed variable-length batches (an empty query sequence, a sequence without keys,
    GQA, causal and windowed sequences): the output and the gradients of every sequence
    against float64 autograd of that sequence alone; the packed gradients of a sequence's
    rows only hold that sequence's."""
    _require_sm90()
    T = _ops()
    g = torch.Generator(device="cuda").manual_seed(sum(lens_q) + d)
    h, hk = 4, 2
    tq, tk = sum(lens_q), sum(lens_k)
    q = torch.randn(tq, h, d, device="cuda", generator=g).to(torch.bfloat16).requires_grad_()
    k = torch.randn(tk, hk, d, device="cuda", generator=g).to(torch.bfloat16).requires_grad_()
    v = torch.randn(tk, hk, d, device="cuda", generator=g).to(torch.bfloat16).requires_grad_()
    gout = torch.randn(tq, h, d, device="cuda", generator=g)
    cq = torch.tensor([0, *torch.tensor(lens_q).cumsum(0).tolist()], dtype=torch.int32,
                      device="cuda")
    ck = torch.tensor([0, *torch.tensor(lens_k).cumsum(0).tolist()], dtype=torch.int32,
                      device="cuda")
    out = T.flash_attn_varlen_func(q, k, v, cq, ck, max(lens_q), max(lens_k), causal=causal,
                                   window_size=window)
    assert out.shape == (tq, h, d) and not torch.isnan(out).any()
    (out.float() * gout).sum().backward()
    scale = 1 / math.sqrt(d)
    for i, (lq, lk) in enumerate(zip(lens_q, lens_k, strict=True)):
        rq = slice(int(cq[i]), int(cq[i + 1]))
        rk = slice(int(ck[i]), int(ck[i + 1]))
        if lq == 0:
            continue
        if lk == 0:
            assert (out[rq] == 0).all()
            continue
        qi, ki, vi = (t[r].detach().unsqueeze(0).transpose(1, 2)
                      for t, r in ((q, rq), (k, rk), (v, rk)))
        gi = gout[rq].unsqueeze(0).transpose(1, 2)
        ref, ref_out = _reference_grads(qi, ki, vi, causal, scale, gi, None, want_out=True,
                                        window=window)
        assert _rel(out[rq].unsqueeze(0).transpose(1, 2), ref_out) < 1e-2, i
        for name, grad, r, rr in (("dq", q.grad, rq, ref[0]), ("dk", k.grad, rk, ref[1]),
                                  ("dv", v.grad, rk, ref[2])):
            assert _rel(grad[r].unsqueeze(0).transpose(1, 2), rr) < 2e-2, (i, name)


def test_flash_attn_varlen_refusals() -> None:
    _require_sm90()
    T = _ops()
    q = torch.zeros(10, 2, 64, device="cuda", dtype=torch.bfloat16)
    k = torch.zeros(12, 2, 64, device="cuda", dtype=torch.bfloat16)
    cq = torch.tensor([0, 4, 10], dtype=torch.int32, device="cuda")
    ck = torch.tensor([0, 6, 12], dtype=torch.int32, device="cuda")
    from nvatom.attention import AttentionError

    for kw, needle in ((dict(cu_seqlens_q=torch.tensor([0, 5, 4], dtype=torch.int32,
                                                        device="cuda")), "decreases"),
                       (dict(cu_seqlens_q=cq.float()), "int32"),
                       (dict(cu_seqlens_k=ck[:2]), "batch + 1"),
                       (dict(max_seqlen_q=5), "max_seqlen_q"),
                       (dict(causal=True), "bottom right"),
                       (dict(block_table=cq), "block_table")):
        args = dict(cu_seqlens_q=cq, cu_seqlens_k=ck, max_seqlen_q=6, max_seqlen_k=6)
        args.update(kw)
        with pytest.raises(AttentionError, match=needle):
            T.flash_attn_varlen_func(q, k, k, **args)


def test_flash_attn_varlen_more_refusals() -> None:
    _require_sm90()
    T = _ops()
    from nvatom.attention import AttentionError

    q = torch.zeros(10, 2, 64, device="cuda", dtype=torch.bfloat16)
    ck = torch.tensor([0, 6, 10], dtype=torch.int32, device="cuda")
    for kw, needle in ((dict(cu_seqlens_q=torch.tensor([1, 4, 10], dtype=torch.int32,
                                                        device="cuda")), "starts at 1"),
                       (dict(cu_seqlens_q=torch.tensor([0, 4, 9], dtype=torch.int32,
                                                        device="cuda")), "ends at 9"),
                       (dict(window_size=5), "window_size = 5"),
                       (dict(q=q[None]), "takes \\(total, heads, head_dim\\)")):
        args = dict(q=q, k=q, v=q, cu_seqlens_q=ck, cu_seqlens_k=ck, max_seqlen_q=6,
                    max_seqlen_k=6)
        args.update(kw)
        with pytest.raises(AttentionError, match=needle):
            T.flash_attn_varlen_func(**args)
    graph = torch.cuda.CUDAGraph()
    with pytest.raises(AttentionError, match="cannot be captured"):
        with torch.cuda.graph(graph):
            T.flash_attn_varlen_func(q, q, q, ck, ck, 6, 6)
