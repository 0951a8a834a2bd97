"""The attention references shared by the GPU tests and scripts/attention_dev.py:
softmax(scale q k^T) v and its log-sum-exp, in float32 from the same 16-bit inputs,
grouped-query attention by repeating each KV head over its query heads, the causal mask on
the top-left of the (Sq, Sk) scores; and the gradients in float64 autograd
(:func:`reference_grads`, softcap and windows included).  torch is imported by the
functions only (this module imports nothing at load)."""

from __future__ import annotations

from typing import Any


def reference(q: Any, k: Any, v: Any, causal: bool, scale: float) -> tuple[Any, Any]:
    """(out, lse) for ``q`` (B, Hq, Sq, D) and ``k``, ``v`` (B, Hkv, Sk, D), float32."""
    import torch

    g = q.shape[1] // k.shape[1]
    kf = k.float().repeat_interleave(g, dim=1)
    vf = v.float().repeat_interleave(g, dim=1)
    s = torch.matmul(q.float(), kf.transpose(-1, -2)) * scale
    if causal:
        mask = torch.ones(s.shape[-2:], dtype=torch.bool, device=q.device).tril()
        s = s.masked_fill(~mask, float("-inf"))
    return torch.matmul(torch.softmax(s, dim=-1), vf), torch.logsumexp(s, dim=-1)


def reference_grads(q: Any, k: Any, v: Any, causal: bool, scale: float, gout: Any, glse: Any,
                    softcap: float = 0.0, want_out: bool = False,
                    window: tuple[int, int] = (-1, -1)) -> Any:
    """float64 autograd of the math: (dq, dk, dv) of sum(out * gout) + sum(lse * glse)
    (scores capped as softcap * tanh(s / softcap) when softcap is given; a window keeps keys
    row - left .. row + right), for q (B, H, Sq, D) and k, v (B, Hkv, Sk, D)."""
    import torch

    qd, kd, vd = (t.detach().double().requires_grad_() for t in (q, k, v))
    grp = q.shape[1] // k.shape[1]
    s = qd @ kd.repeat_interleave(grp, 1).transpose(-1, -2) * scale
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
    out = torch.softmax(s, -1) @ vd.repeat_interleave(grp, 1)
    loss = (out * gout.double()).sum()
    if glse is not None:
        loss = loss + (torch.logsumexp(s, -1) * glse.double()).sum()
    grads = torch.autograd.grad(loss, (qd, kd, vd))
    return (grads, out.detach()) if want_out else grads
