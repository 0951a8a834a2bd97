"""The attention reference shared by tests/gpu/test_attention_gpu.py and
scripts/attention_dev.py: softmax(scale q k^T) v and its log-sum-exp, in float32 from the same
16-bit inputs, grouped-query attention by repeating each KV head over its query heads, the
causal mask on the top-left of the (Sq, Sk) scores.  torch is imported by the caller's
tensors only (this module imports nothing at load)."""

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
