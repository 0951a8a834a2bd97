"""Packed variable-length attention in one launch (``nvatom.attention.attention_varlen``) on an
sm_90 GPU: each sequence's output and log-sum-exp against float64 of that sequence alone
(empty sequences, sequences without keys, GQA, causal, windows, softcap, every head dim),
rows past ``max_seqlen_q`` left at 0 / -inf, CUDA-graph capture replayed after the offsets
change on the device, and the clamping of offsets the host cannot check (no fault)."""

from __future__ import annotations

import importlib
import math

import pytest

pytestmark = pytest.mark.gpu

torch = pytest.importorskip("torch")

A = importlib.import_module("nvatom.attention")


def _require_sm90() -> None:
    if not torch.cuda.is_available() or torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("the SM90 attention kernel needs an sm_90 (Hopper) GPU")


def _reference(q, k, v, causal, scale, softcap=0.0, window=(-1, -1)):
    """float64 (out, lse) of one sequence: q (Sq, H, D), k, v (Sk, Hkv, D)."""
    grp = q.shape[1] // k.shape[1]
    qd = q.double().transpose(0, 1)
    kd = k.double().repeat_interleave(grp, 1).transpose(0, 1)
    vd = v.double().repeat_interleave(grp, 1).transpose(0, 1)
    s = qd @ kd.transpose(-1, -2) * scale
    if softcap:
        s = softcap * torch.tanh(s / softcap)
    rows = torch.arange(s.shape[-2], device=q.device)[:, None]
    cols = torch.arange(s.shape[-1], device=q.device)[None, :]
    keep = torch.ones(s.shape[-2:], dtype=torch.bool, device=q.device)
    if causal:
        keep &= cols <= rows
    if window[0] >= 0:
        keep &= cols >= rows - window[0]
    if window[1] >= 0:
        keep &= cols <= rows + window[1]
    s = s.masked_fill(~keep, float("-inf"))
    lse = torch.logsumexp(s, -1)  # (H, Sq)
    out = torch.softmax(s, -1) @ vd
    return out.transpose(0, 1), lse


def _packed(lens_q, lens_k, h, hk, d, seed, dt=torch.bfloat16):
    g = torch.Generator(device="cuda").manual_seed(seed)
    q = torch.randn(sum(lens_q), h, d, device="cuda", generator=g).to(dt)
    k = torch.randn(max(sum(lens_k), 1), hk, d, device="cuda", generator=g).to(dt)
    v = torch.randn(max(sum(lens_k), 1), hk, d, device="cuda", generator=g).to(dt)
    cq = torch.tensor([0, *torch.tensor(lens_q).cumsum(0).tolist()], dtype=torch.int32,
                      device="cuda")
    ck = torch.tensor([0, *torch.tensor(lens_k).cumsum(0).tolist()], dtype=torch.int32,
                      device="cuda")
    return q, k, v, cq, ck


def _check(q, k, v, cq, ck, out, lse, causal, scale, softcap=0.0, window=(-1, -1)):
    for i in range(cq.numel() - 1):
        rq = slice(int(cq[i]), int(cq[i + 1]))
        rk = slice(int(ck[i]), int(ck[i + 1]))
        if rq.stop == rq.start:
            continue
        if rk.stop == rk.start:  # no keys: 0 and -inf
            assert (out[rq] == 0).all() and torch.isinf(lse[:, rq]).all()
            continue
        ro, rl = _reference(q[rq], k[rk], v[rk], causal, scale, softcap, window)
        err = ((out[rq].double() - ro).norm() / ro.norm()).item()
        assert err < 1e-2, (i, err)
        assert (lse[:, rq].double() - rl).abs().max().item() < 2e-2, i


@pytest.mark.parametrize(("lens_q", "lens_k", "d", "causal", "softcap", "window"), [
    ([37, 0, 300, 129, 1], [60, 5, 300, 400, 77], 128, False, 0.0, (-1, -1)),
    ([200, 64, 513], [200, 64, 513], 64, True, 0.0, (-1, -1)),
    ([150, 333, 1], [150, 333, 1], 128, False, 0.0, (40, 7)),
    ([20, 7, 90], [0, 9, 90], 64, False, 0.0, (-1, -1)),
    ([129, 256], [300, 256], 256, True, 30.0, (-1, -1)),
    ([1000], [1000], 128, True, 0.0, (128, -1)),
])
def test_varlen_against_float64(lens_q, lens_k, d, causal, softcap, window) -> None:
    _require_sm90()
    q, k, v, cq, ck = _packed(lens_q, lens_k, 4, 2, d, sum(lens_q) + d)
    out, lse = A.attention_varlen(q, k, v, cq, ck, max(lens_q), max(max(lens_k), 1),
                                  causal=causal, softcap=softcap, window=window)
    torch.cuda.synchronize()
    assert out.shape == q.shape and lse.shape == (4, q.shape[0])
    assert not torch.isnan(out).any()
    _check(q, k, v, cq, ck, out, lse, causal, 1 / math.sqrt(d), softcap, window)


def test_rows_past_max_seqlen_stay_untouched() -> None:
    """A sequence longer than max_seqlen_q: its rows from max_seqlen_q on are not computed
    (0, -inf); the rows before are right."""
    _require_sm90()
    q, k, v, cq, ck = _packed([300, 50], [300, 50], 4, 2, 128, 5)
    out, lse = A.attention_varlen(q, k, v, cq, ck, 200, 300)
    torch.cuda.synchronize()
    assert (out[200:300] == 0).all() and torch.isinf(lse[:, 200:300]).all()
    ro, _ = _reference(q[:300], k[:300], v[:300], False, 1 / math.sqrt(128))
    err = ((out[:200].double() - ro[:200]).norm() / ro[:200].norm()).item()
    assert err < 1e-2


def test_graph_replay_follows_offsets_changed_on_the_device() -> None:
    """Captured once in a CUDA graph; the offsets rewritten on the device (same tensors)
    and replayed: the new grouping is computed."""
    _require_sm90()
    q, k, v, cq, ck = _packed([100, 200, 300], [100, 200, 300], 4, 2, 64, 9)
    A.attention_varlen(q, k, v, cq, ck, 300, 300)  # builds and loads the kernel
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out, lse = A.attention_varlen(q, k, v, cq, ck, 300, 300)
    new = torch.tensor([0, 300, 350, 600], dtype=torch.int32, device="cuda")
    cq.copy_(new)
    ck.copy_(new)
    graph.replay()
    torch.cuda.synchronize()
    _check(q, k, v, cq, ck, out, lse, False, 1 / math.sqrt(64))


def test_bad_offsets_are_clamped_not_faulted() -> None:
    """Offsets the host cannot check (decreasing, past the packed length) give short or
    empty sequences: no fault, no NaN."""
    _require_sm90()
    q, k, v, _, _ = _packed([64, 64], [64, 64], 4, 2, 128, 11)
    bad = torch.tensor([0, 100000, 10], dtype=torch.int32, device="cuda")
    out, _ = A.attention_varlen(q, k, v, bad, bad, 128, 128)
    torch.cuda.synchronize()
    assert not torch.isnan(out).any()
    with pytest.raises(A.AttentionError, match="int32"):
        A.attention_varlen(q, k, v, bad.long(), bad, 128, 128)
    with pytest.raises(A.AttentionError, match="describe 2 and 1 sequences"):
        A.attention_varlen(q, k, v, bad, bad[:2], 128, 128)


def test_rows_past_the_window_of_their_keys() -> None:
    """A sequence whose query rows outrun its keys' window (100 rows, 10 keys, window 5
    left): rows 15.. see no key and get 0 / -inf (the tile count does not wrap), rows
    0..14 match float64."""
    _require_sm90()
    q, k, v, cq, ck = _packed([100], [10], 4, 2, 64, 13)
    out, lse = A.attention_varlen(q, k, v, cq, ck, 100, 10, causal=True, window=(5, -1))
    torch.cuda.synchronize()
    assert not torch.isnan(out).any()
    assert (out[15:] == 0).all() and torch.isinf(lse[:, 15:]).all()
    ro, rl = _reference(q[:15], k, v, True, 1 / math.sqrt(64), window=(5, -1))
    assert ((out[:15].double() - ro).norm() / ro.norm()).item() < 1e-2
    assert (lse[:, :15].double() - rl).abs().max().item() < 2e-2


def _grads64(q, k, v, causal, scale, gout, window=(-1, -1), softcap=0.0):
    """float64 autograd of one sequence: (dq, dk, dv) of sum(out * gout)."""
    qd, kd, vd = (t.detach().double().requires_grad_() for t in (q, k, v))
    out, _ = _reference(qd, kd, vd, causal, scale, softcap, window)
    return torch.autograd.grad((out * gout.double()).sum(), (qd, kd, vd))


@pytest.mark.parametrize(("lens_q", "lens_k", "d", "causal", "window", "softcap"), [
    ([37, 0, 300, 129, 1], [60, 5, 300, 400, 77], 128, False, (-1, -1), 0.0),
    ([200, 64, 513], [200, 64, 513], 64, True, (-1, -1), 0.0),
    ([150, 333], [150, 333], 128, False, (40, 7), 0.0),
    ([129, 256], [129, 256], 128, True, (-1, -1), 20.0),
])
def test_varlen_op_gradients_against_float64(lens_q, lens_k, d, causal, window,
                                             softcap) -> None:
    """``torch.ops.nvatom.attention_varlen`` (one launch forward, two backward): each
    sequence's dq, dk, dv against float64 of that sequence alone; sequences without query
    rows leave their keys' gradients 0."""
    _require_sm90()
    import nvatom.torch_ops as T

    T.register()
    q, k, v, cq, ck = _packed(lens_q, lens_k, 4, 2, d, sum(lens_q) + 7 * d)
    qg, kg, vg = (t.detach().clone().requires_grad_() for t in (q, k, v))
    g = torch.Generator(device="cuda").manual_seed(3)
    gout = torch.randn(q.shape, device="cuda", generator=g)
    out, _ = torch.ops.nvatom.attention_varlen(qg, kg, vg, cq, ck, max(lens_q),
                                               max(max(lens_k), 1), causal, None, softcap,
                                               *window)
    (out.float() * gout).sum().backward()
    scale = 1 / math.sqrt(d)
    for i in range(len(lens_q)):
        rq = slice(int(cq[i]), int(cq[i + 1]))
        rk = slice(int(ck[i]), int(ck[i + 1]))
        if rk.stop == rk.start:
            continue
        if rq.stop == rq.start:
            assert (kg.grad[rk] == 0).all() and (vg.grad[rk] == 0).all()
            continue
        ref = _grads64(q[rq], k[rk], v[rk], causal, scale, gout[rq], window, softcap)
        for name, grad, r, rr in (("dq", qg.grad, rq, ref[0]), ("dk", kg.grad, rk, ref[1]),
                                  ("dv", vg.grad, rk, ref[2])):
            assert not torch.isnan(grad[r]).any(), (i, name)
            err = ((grad[r].double() - rr).norm() / rr.norm().clamp_min(1e-12)).item()
            assert err < 2e-2, (i, name, err)


def test_varlen_refusals_name_the_value() -> None:
    """The host's refusals of the one-launch varlen calls, each naming what is wrong."""
    _require_sm90()
    q, k, v, cq, ck = _packed([64, 64], [64, 64], 4, 2, 128, 17)
    out, lse = A.attention_varlen(q, k, v, cq, ck, 64, 64)
    for args, kw, needle in (
            ((q[None], k, v, cq, ck, 64, 64), {}, "varlen attention takes (total, heads"),
            ((q, k, v, cq, ck, -1, 64), {}, "max_seqlen_q = -1"),
            ((q, k, v, cq, ck, 64, True), {}, "max_seqlen_k = True"),
            ((q, k, v, cq.cpu(), ck, 64, 64), {}, "cu_seqlens_q must be"),
            ((q, k, v, torch.zeros(70000, dtype=torch.int32, device="cuda"),
              torch.zeros(70000, dtype=torch.int32, device="cuda"), 64, 64), {},
             "69999 sequences: at most 65535")):
        with pytest.raises(A.AttentionError, match=needle.replace("(", r"\(")):
            A.attention_varlen(*args, **kw)
    g = torch.zeros_like(q)
    for bad, needle in ((dict(dout=g.float()), "dout must be"), (dict(out=out[:10]), "out must"),
                        (dict(lse=lse.t()), "lse must be"),
                        (dict(dlse=lse.double()), "dlse must be")):
        args = dict(dout=g, out=out, lse=lse, dlse=None)
        args.update(bad)
        with pytest.raises(A.AttentionError, match=needle):
            A.attention_varlen_backward(args["dout"], q, k, v, args["out"], args["lse"], cq,
                                        ck, 64, 64, dlse=args["dlse"])
    qd = torch.zeros(128, 4, 256, device="cuda", dtype=torch.bfloat16)
    kd = torch.zeros(128, 2, 256, device="cuda", dtype=torch.bfloat16)
    with pytest.raises(A.AttentionError, match="head_dim 256"):
        A.attention_varlen_backward(qd, qd, kd, kd, qd, lse, cq, ck, 64, 64)


def test_dense_backward_refuses_a_mismatched_dout() -> None:
    _require_sm90()
    import nvatom
    from nvatom.attention import attention_backward

    q = torch.randn(1, 2, 64, 64, device="cuda").to(torch.bfloat16)
    out, lse = nvatom.attention(q, q, q)
    with pytest.raises(A.AttentionError, match="dout is torch.float16"):
        attention_backward(out.half(), q, q, q, out, lse, backend="kernel")
    with pytest.raises(A.AttentionError, match="out is torch.float32"):
        attention_backward(out, q, q, q, out.float(), lse, backend="kernel")
