"""nvatom's attention as a Hugging Face ``transformers`` attention implementation (issue 26,
"a real client"): a small random-weight Llama-style model (grouped-query heads, two layers,
bf16) runs a forward and a training step with ``attn_implementation="nvatom"``; its logits,
loss and every parameter's gradient match the same model with ``"sdpa"`` within bf16
tolerance."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.gpu

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")


def _require_sm90() -> None:
    if not torch.cuda.is_available() or torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("the SM90 attention kernel needs an sm_90 (Hopper) GPU")


def _model(impl: str, state: dict | None):
    cfg = transformers.LlamaConfig(vocab_size=1000, hidden_size=256, intermediate_size=512,
                                   num_hidden_layers=2, num_attention_heads=4,
                                   num_key_value_heads=2, max_position_embeddings=512)
    torch.manual_seed(0)
    m = transformers.LlamaForCausalLM(cfg)
    if state is not None:
        m.load_state_dict(state)
    m.config._attn_implementation = impl  # read by every layer at forward time
    return m.to(device="cuda", dtype=torch.bfloat16)


def _rel(a, b) -> float:
    return ((a.double() - b.double()).norm() / b.double().norm()).item()


def test_llama_forward_and_training_step_match_sdpa() -> None:
    _require_sm90()
    import nvatom.torch_ops as T

    name = T.register_transformers()
    ref = _model("sdpa", None)
    ours = _model(name, {k: v.float().cpu() for k, v in ref.state_dict().items()})
    g = torch.Generator(device="cuda").manual_seed(1)
    ids = torch.randint(0, 1000, (2, 192), device="cuda", generator=g)
    runs = []
    for m in (ref, ours):
        m.zero_grad(set_to_none=True)
        r = m(input_ids=ids, labels=ids)
        r.loss.backward()
        runs.append((r.logits.detach(), r.loss.detach(),
                     {n: p.grad for n, p in m.named_parameters()}))
    (l_ref, loss_ref, g_ref), (l_ours, loss_ours, g_ours) = runs
    assert not torch.isnan(l_ours).any()
    assert _rel(l_ours, l_ref) < 2e-2, _rel(l_ours, l_ref)
    assert abs(loss_ours.item() - loss_ref.item()) < 2e-2 * abs(loss_ref.item())
    for n, gr in g_ref.items():
        go = g_ours[n]
        assert go is not None and not torch.isnan(go).any(), n
        cos = torch.nn.functional.cosine_similarity(go.double().flatten(),
                                                    gr.double().flatten(), dim=0).item()
        assert cos > 0.99 and _rel(go, gr) < 0.1, (n, cos, _rel(go, gr))


@pytest.mark.parametrize(("kw", "mask", "sk", "msg"), [
    (dict(dropout=0.1), None, 64, "dropout = 0.1 is not supported"),
    (dict(sliding_window=32), None, 64, "sliding_window = 32"),
    ({}, None, 96, "causal with 64 queries and 96 keys"),
    ({}, "padding", 64, "not the plain causal mask"),
])
def test_transformers_attention_refuses_by_name(kw: dict, mask: object, sk: int,
                                                msg: str) -> None:
    """What the transformers function cannot compute is refused, never computed otherwise:
    dropout, a sliding window (transformers' convention), a KV cache's bottom-right causal
    mask, a padding mask; the plain causal mask is accepted."""
    _require_sm90()
    import types

    import nvatom.torch_ops as T
    from nvatom.attention import AttentionError

    q = torch.randn(1, 4, 64, 64, device="cuda", dtype=torch.bfloat16)
    kv = torch.randn(1, 2, sk, 64, device="cuda", dtype=torch.bfloat16)
    module = types.SimpleNamespace(is_causal=True)
    causal = torch.ones(64, sk, dtype=torch.bool, device="cuda").tril()[None, None]
    if mask == "padding":
        causal = causal.clone()
        causal[..., :, :3] = False  # the first three keys are padding
    with pytest.raises(AttentionError, match=msg):
        T.transformers_attention(module, q, kv, kv, causal if mask else None, **kw)
    if sk == 64:  # the plain causal mask, as a bool mask or as no mask, is accepted
        plain = torch.ones(64, 64, dtype=torch.bool, device="cuda").tril()[None, None]
        out, w = T.transformers_attention(module, q, kv, kv, plain)
        assert out.shape == (1, 64, 4, 64) and w is None
