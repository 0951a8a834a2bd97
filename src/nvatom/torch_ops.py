"""nvatom's kernels as torch custom operators (``torch.ops.nvatom.*``).

Source: PyTorch, "Python Custom Operators" (``torch.library.custom_op``, ``register_fake``):
an operator registered with a schema and a fake (meta) implementation is opaque to
``torch.compile`` -- Dynamo and AOTAutograd trace it by its fake, Inductor calls the real one
-- so a graph that uses it compiles with ``fullgraph=True``; the real implementation launches
on the caller's current stream, so it can be captured in a CUDA graph (``torch.cuda.graph``).

Each operator is one :class:`OpSpec` row of :data:`OPS`: its name in the ``nvatom``
namespace, its schema, the arguments it mutates, and two plain functions, the implementation
(tensors in, tensors out; the kernel runs on ``torch.cuda.current_stream()``) and the fake
(output shape and dtype only, from :func:`gemm_output_spec`, which needs no torch and is what
CPU tests check).  Kernels that follow the GEMM (grouped GEMM, attention) add a row; nothing
else changes.

torch is optional: importing this module imports torch only when it is installed, and then
registers the operators (:func:`register`, idempotent); without torch the module still
imports, :func:`gemm_output_spec` and :data:`OPS` work, and :func:`register` raises
:class:`TorchOpsError`.  ``import nvatom`` never imports this module.

Operators:

* ``torch.ops.nvatom.gemm(a, b, scale_a=None, scale_b=None, *, out_dtype=None) -> Tensor``:
  ``a @ b`` in a new tensor (``out_dtype``: bf16, f16 or f32; default ``a``'s dtype; bf16 for
  e4m3 operands, which need both per-tensor scales as float32 one-element tensors).
* ``torch.ops.nvatom.gemm_out(a, b, out, scale_a=None, scale_b=None) -> ()``: writes
  ``a @ b`` into ``out`` (mutates ``out``; a fixed ``out`` makes a repeated call hit
  :func:`nvatom.gemm`'s call cache).
* ``torch.ops.nvatom.gemm_epilogue(a, b, scale_a=None, scale_b=None, bias=None, c=None,
  residual=None, *, activation=None, alpha=1.0, beta=None, out_dtype=None) -> Tensor``:
  ``act(alpha * (a @ b) * scales + beta * c + bias) + residual`` in a new tensor, the
  epilogue fused into the SM90 kernel (:func:`nvatom.gemm`'s arguments of those names).  It
  cannot carry a user epilogue (``nvatom.gemm``'s ``epilogue=``, a Python function that
  emits PTX): an operator's schema takes tensors, numbers, strings and dtypes only, so
  :func:`gemm_epilogue` refuses ``epilogue`` and ``epilogue_args`` with
  :class:`TorchOpsError`; call ``nvatom.gemm(a, b, epilogue=hook, epilogue_args=...)``.
* ``torch.ops.nvatom.attention(q, k, v, causal=False, scale=None, softcap=0.0,
  window_left=-1, window_right=-1, deterministic=False) -> (Tensor, Tensor)``:
  :func:`nvatom.attention`'s ``(out, lse)``, differentiable (``register_autograd``): its
  backward is ``torch.ops.nvatom.attention_backward(dout, dlse, q, k, v, out, lse, causal,
  scale, ..., deterministic) -> (dq, dk, dv)``, which runs
  :func:`nvatom.attention.attention_backward`: the SM90 backward kernel (head dims 64 and
  128, causal or not, windows, GQA), else (head dim 256, softcap, ``deterministic``: the
  same bits on every run) a float32 reference in torch operations (blocked, linear extra
  memory).  :func:`flash_attn_func` is FlashAttention's entry point over it, on
  (batch, seqlen, heads, head_dim) tensors, and :func:`flash_attn_varlen_func` its packed
  (variable-length) one, a launch per sequence.

:func:`gemm` and :func:`gemm_out` are eager conveniences over them: they register first, take
DLPack arrays (``torch.from_dlpack``; results are torch tensors) and Python-number scales.
"""

from __future__ import annotations

import dataclasses
import importlib.util
from collections.abc import Callable, Sequence
from typing import Any

from nvatom.attention import (
    AttentionError,
    attention,
    attention_backward,
    attention_varlen,
    attention_varlen_backward,
)
from nvatom.errors import NvatomError
from nvatom.gemm import SCALED_OUT_DTYPE, GemmError
from nvatom.gemm import gemm as _run_gemm
from nvatom.kernels.gemm_sm80 import IN_DTYPES, OUT_DTYPES
from nvatom.runtime.gemm_plan import SCALED_DTYPES
from nvatom.runtime.torch_interop import TORCH_DTYPES, from_dlpack

__all__ = [
    "NAMESPACE",
    "OPS",
    "OpSpec",
    "TorchOpsError",
    "attention_output_spec",
    "flash_attn_func",
    "flash_attn_varlen_func",
    "gemm",
    "gemm_epilogue",
    "gemm_out",
    "gemm_output_spec",
    "register",
    "register_transformers",
    "registered",
    "transformers_attention",
]

#: The torch.library namespace: ``torch.ops.nvatom.<name>``.
NAMESPACE = "nvatom"
#: nvatom element type -> torch dtype name (the inverse of ``TORCH_DTYPES``).
_TORCH_NAMES = {ours: name for name, ours in TORCH_DTYPES.items()}


class TorchOpsError(NvatomError, RuntimeError):
    """The torch operators cannot be registered or called (torch missing, bad arguments)."""


@dataclasses.dataclass(frozen=True)
class OpSpec:
    """One custom operator: ``torch.ops.nvatom.<name>`` with ``schema`` (the part after the
    name, torch's schema language), the arguments it writes (``mutates``: each marked
    ``Tensor(x!)`` in the schema), the implementation and the fake."""

    name: str
    schema: str
    mutates: tuple[str, ...]
    impl: Callable[..., Any]
    fake: Callable[..., Any]
    doc: str = ""
    # (backward, setup_context) for torch.library.register_autograd, or None
    autograd: tuple[Callable[..., Any], Callable[..., Any]] | None = None

    @property
    def qualname(self) -> str:
        return f"{NAMESPACE}::{self.name}"


def _dtype_text(dt: Any) -> str:
    """A torch dtype (or its name) as torch's name without ``torch.``."""
    return str(dt).removeprefix("torch.")


def gemm_output_spec(a_shape: Sequence[Any], a_dtype: Any, b_shape: Sequence[Any],
                     b_dtype: Any, out_dtype: Any = None, *, scaled: bool = False
                     ) -> tuple[tuple[Any, Any], str]:
    """The output (shape, torch dtype name) of ``nvatom::gemm`` for operands of these shapes
    and dtypes (torch dtypes or names: ``torch.bfloat16`` / ``"bfloat16"``), as the fake
    reports it and the implementation allocates it.  ``scaled``: per-tensor scales were given.
    Shapes may hold symbolic sizes (``torch.SymInt``): they are compared, never converted.
    Raises :class:`GemmError` for operands no kernel takes (the full checks, of strides and
    devices, run with the real tensors)."""
    if len(a_shape) != 2 or len(b_shape) != 2:
        raise GemmError(f"nvatom::gemm takes 2-D matrices, got a of shape {tuple(a_shape)} and "
                        f"b of shape {tuple(b_shape)}")
    (m, ka), (kb, n) = a_shape, b_shape
    if ka != kb:
        raise GemmError(f"shapes do not chain: a is {m}x{ka}, b is {kb}x{n} ({ka} != {kb})")
    at, bt = _dtype_text(a_dtype), _dtype_text(b_dtype)
    ours = {TORCH_DTYPES.get(at), TORCH_DTYPES.get(bt)}
    takes = [_TORCH_NAMES[t] for t in (*IN_DTYPES, *SCALED_DTYPES)]
    if at != bt or at not in takes:
        raise GemmError(f"a is {at} and b is {bt}; nvatom::gemm takes two operands of one of "
                        f"{', '.join(takes)}")
    fp8 = bool(ours & set(SCALED_DTYPES))
    if fp8 != scaled:
        raise GemmError(f"a and b are {at}: " + (
            "FP8 operands need scale_a and scale_b (float32 one-element tensors)" if fp8 else
            "per-tensor scales apply to FP8 operands only"))
    outs = [_TORCH_NAMES[t] for t in OUT_DTYPES]
    if out_dtype is None:
        want = _TORCH_NAMES[SCALED_OUT_DTYPE] if fp8 else at
    else:
        want = _dtype_text(out_dtype)
        allowed = [_TORCH_NAMES[SCALED_OUT_DTYPE]] if fp8 else outs
        if want not in allowed:
            raise GemmError(f"out_dtype={want}: {at} x {at} GEMMs write "
                            f"{' or '.join(allowed)}")
    return (m, n), want


# ------------------------------------------------------------------ nvatom::gemm (+ _out)


def _torch_dtype(name: str) -> Any:
    import torch

    return getattr(torch, name)


def _gemm_impl(a: Any, b: Any, scale_a: Any = None, scale_b: Any = None, *,
               out_dtype: Any = None) -> Any:
    """Allocate the output (on ``a``'s device, through torch's caching allocator: a graph's
    private pool under capture) and run :func:`nvatom.gemm` on the current stream."""
    import torch

    shape, dt = gemm_output_spec(a.shape, a.dtype, b.shape, b.dtype, out_dtype,
                                 scaled=scale_a is not None or scale_b is not None)
    out = torch.empty(shape, dtype=_torch_dtype(dt), device=a.device)
    _run_gemm(a, b, out, scale_a=scale_a, scale_b=scale_b)
    return out


def _gemm_fake(a: Any, b: Any, scale_a: Any = None, scale_b: Any = None, *,
               out_dtype: Any = None) -> Any:
    shape, dt = gemm_output_spec(a.shape, a.dtype, b.shape, b.dtype, out_dtype,
                                 scaled=scale_a is not None or scale_b is not None)
    return a.new_empty(shape, dtype=_torch_dtype(dt))


def _gemm_out_impl(a: Any, b: Any, out: Any, scale_a: Any = None,
                   scale_b: Any = None) -> None:
    _run_gemm(a, b, out, scale_a=scale_a, scale_b=scale_b)


def _gemm_out_fake(a: Any, b: Any, out: Any, scale_a: Any = None,
                   scale_b: Any = None) -> None:
    shape, _ = gemm_output_spec(a.shape, a.dtype, b.shape, b.dtype, out.dtype,
                                 scaled=scale_a is not None or scale_b is not None)
    if tuple(out.shape) != tuple(shape):
        raise GemmError(f"out has shape {tuple(out.shape)}, the product is "
                        f"{shape[0]}x{shape[1]}")


def epilogue_output_spec(a_shape: Sequence[Any], a_dtype: Any, b_shape: Sequence[Any],
                         b_dtype: Any, out_dtype: Any = None, *, scaled: bool = False,
                         bias_shape: Sequence[Any] | None = None,
                         c_shape: Sequence[Any] | None = None,
                         residual_shape: Sequence[Any] | None = None
                         ) -> tuple[tuple[Any, Any], str]:
    """:func:`gemm_output_spec` for ``nvatom::gemm_epilogue``, with the shapes of ``bias``
    ((N,), (1, N) or (M, 1)), ``c`` and ``residual`` ((M, N)) checked against the product
    (dtypes, strides and devices are checked by :func:`nvatom.gemm.check_epilogue` with the
    real tensors)."""
    (m, n), dt = gemm_output_spec(a_shape, a_dtype, b_shape, b_dtype, out_dtype,
                                  scaled=scaled)
    for name, shape in (("c", c_shape), ("residual", residual_shape)):
        if shape is not None and tuple(shape) != (m, n):
            raise GemmError(f"{name} has shape {tuple(shape)}, the product is ({m}, {n})")
    if bias_shape is not None and tuple(bias_shape) not in ((n,), (1, n), (m, 1)):
        raise GemmError(f"bias has shape {tuple(bias_shape)}: a bias is per column, ({n},) "
                        f"or (1, {n}), or per row, ({m}, 1)")
    return (m, n), dt


def _shape(t: Any) -> Any:
    return None if t is None else tuple(t.shape)


def _epilogue_out(a: Any, b: Any, scale_a: Any, scale_b: Any, bias: Any, c: Any,
                  residual: Any, out_dtype: Any) -> tuple[Any, Any]:
    """The fused operator's output shape and dtype (the real and the fake implementation)."""
    return epilogue_output_spec(a.shape, a.dtype, b.shape, b.dtype, out_dtype,
                                scaled=scale_a is not None or scale_b is not None,
                                bias_shape=_shape(bias), c_shape=_shape(c),
                                residual_shape=_shape(residual))


def _gemm_epilogue_impl(a: Any, b: Any, scale_a: Any = None, scale_b: Any = None,
                        bias: Any = None, c: Any = None, residual: Any = None, *,
                        activation: str | None = None, alpha: float = 1.0,
                        beta: float | None = None, out_dtype: Any = None) -> Any:
    import torch

    shape, dt = _epilogue_out(a, b, scale_a, scale_b, bias, c, residual, out_dtype)
    out = torch.empty(shape, dtype=_torch_dtype(dt), device=a.device)
    _run_gemm(a, b, out, scale_a=scale_a, scale_b=scale_b, bias=bias, activation=activation,
              alpha=alpha, beta=beta, c=c, residual=residual)
    return out


def _gemm_epilogue_fake(a: Any, b: Any, scale_a: Any = None, scale_b: Any = None,
                        bias: Any = None, c: Any = None, residual: Any = None, *,
                        activation: str | None = None, alpha: float = 1.0,
                        beta: float | None = None, out_dtype: Any = None) -> Any:
    shape, dt = _epilogue_out(a, b, scale_a, scale_b, bias, c, residual, out_dtype)
    return a.new_empty(shape, dtype=_torch_dtype(dt))


# ------------------------------------------------------------------ nvatom::attention


def attention_output_spec(q_shape: Sequence[Any], k_shape: Sequence[Any],
                          v_shape: Sequence[Any]) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
    """The shapes of ``nvatom::attention``'s ``out`` (B, H, Sq, D) and ``lse`` (B, H, Sq) for
    q (B, H, Sq, D), k and v (B, Hkv, Sk, D), as the fake reports them (shapes may be
    symbolic: compared, never converted); the full checks run with the real tensors."""
    if len(q_shape) != 4 or len(k_shape) != 4 or tuple(k_shape) != tuple(v_shape):
        raise AttentionError(f"q {tuple(q_shape)}, k {tuple(k_shape)}, v {tuple(v_shape)}: "
                             "q is (B, H, Sq, D) and k, v one (B, Hkv, Sk, D) shape")
    b, h, sq, d = q_shape
    return (b, h, sq, d), (b, h, sq)


def _attention_impl(q: Any, k: Any, v: Any, causal: bool = False,
                    scale: float | None = None, softcap: float = 0.0, window_left: int = -1,
                    window_right: int = -1, deterministic: bool = False) -> tuple[Any, Any]:
    return attention(q, k, v, causal=causal, scale=scale, softcap=softcap,
                     window=(window_left, window_right))


def _attention_fake(q: Any, k: Any, v: Any, causal: bool = False,
                    scale: float | None = None, softcap: float = 0.0, window_left: int = -1,
                    window_right: int = -1, deterministic: bool = False) -> tuple[Any, Any]:
    import torch

    o, lse = attention_output_spec(q.shape, k.shape, v.shape)
    return q.new_empty(o), q.new_empty(lse, dtype=torch.float32)


def _attention_bwd_impl(dout: Any, dlse: Any, q: Any, k: Any, v: Any, out: Any, lse: Any,
                        causal: bool = False, scale: float | None = None,
                        softcap: float = 0.0, window_left: int = -1, window_right: int = -1,
                        deterministic: bool = False) -> tuple[Any, Any, Any]:
    # the kernel adds dQ with TMA reductions in the CTAs' order: deterministic takes the
    # reference, whose torch operations give the same bits on every run
    return attention_backward(dout, q, k, v, out, lse, causal=causal, scale=scale, dlse=dlse,
                              softcap=softcap, window=(window_left, window_right),
                              backend="reference" if deterministic else None)


def _attention_bwd_fake(dout: Any, dlse: Any, q: Any, k: Any, v: Any, out: Any, lse: Any,
                        causal: bool = False, scale: float | None = None,
                        softcap: float = 0.0, window_left: int = -1, window_right: int = -1,
                        deterministic: bool = False) -> tuple[Any, Any, Any]:
    return q.new_empty(q.shape), k.new_empty(k.shape), v.new_empty(v.shape)


def _attention_setup(ctx: Any, inputs: tuple[Any, ...], output: tuple[Any, Any]) -> None:
    q, k, v, causal, scale, softcap, left, right, deterministic = inputs
    ctx.save_for_backward(q, k, v, *output)
    ctx.causal, ctx.scale, ctx.softcap, ctx.window = causal, scale, softcap, (left, right)
    ctx.deterministic = deterministic


def _attention_grad(ctx: Any, dout: Any, dlse: Any) -> tuple[Any, ...]:
    import torch

    q, k, v, out, lse = ctx.saved_tensors
    dq, dk, dv = torch.ops.nvatom.attention_backward(
        dout.contiguous(), None if dlse is None else dlse.contiguous(), q, k, v, out, lse,
        ctx.causal, ctx.scale, ctx.softcap, *ctx.window, ctx.deterministic)
    return dq, dk, dv, None, None, None, None, None, None


def _varlen_impl(q: Any, k: Any, v: Any, cu_seqlens_q: Any, cu_seqlens_k: Any,
                 max_seqlen_q: int, max_seqlen_k: int, causal: bool = False,
                 scale: float | None = None, softcap: float = 0.0, window_left: int = -1,
                 window_right: int = -1) -> tuple[Any, Any]:
    return attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                            causal=causal, scale=scale, softcap=softcap,
                            window=(window_left, window_right))


def _varlen_fake(q: Any, k: Any, v: Any, cu_seqlens_q: Any, cu_seqlens_k: Any,
                 max_seqlen_q: int, max_seqlen_k: int, causal: bool = False,
                 scale: float | None = None, softcap: float = 0.0, window_left: int = -1,
                 window_right: int = -1) -> tuple[Any, Any]:
    import torch

    return q.new_empty(q.shape), q.new_empty((q.shape[1], q.shape[0]), dtype=torch.float32)


def _varlen_bwd_impl(dout: Any, dlse: Any, q: Any, k: Any, v: Any, out: Any, lse: Any,
                     cu_seqlens_q: Any, cu_seqlens_k: Any, max_seqlen_q: int,
                     max_seqlen_k: int, causal: bool = False, scale: float | None = None,
                     softcap: float = 0.0, window_left: int = -1, window_right: int = -1
                     ) -> tuple[Any, Any, Any]:
    return attention_varlen_backward(dout, q, k, v, out, lse, cu_seqlens_q, cu_seqlens_k,
                                     max_seqlen_q, max_seqlen_k, causal=causal, scale=scale,
                                     softcap=softcap, window=(window_left, window_right),
                                     dlse=dlse)


def _varlen_bwd_fake(dout: Any, dlse: Any, q: Any, k: Any, v: Any, out: Any, lse: Any,
                     cu_seqlens_q: Any, cu_seqlens_k: Any, max_seqlen_q: int,
                     max_seqlen_k: int, causal: bool = False, scale: float | None = None,
                     softcap: float = 0.0, window_left: int = -1, window_right: int = -1
                     ) -> tuple[Any, Any, Any]:
    return q.new_empty(q.shape), k.new_empty(k.shape), v.new_empty(v.shape)


def _varlen_setup(ctx: Any, inputs: tuple[Any, ...], output: tuple[Any, Any]) -> None:
    q, k, v, cq, ck, mq, mk, causal, scale, softcap, left, right = inputs
    ctx.save_for_backward(q, k, v, cq, ck, *output)
    ctx.args = (mq, mk, causal, scale, softcap, left, right)


def _varlen_grad(ctx: Any, dout: Any, dlse: Any) -> tuple[Any, ...]:
    import torch

    q, k, v, cq, ck, out, lse = ctx.saved_tensors
    dq, dk, dv = torch.ops.nvatom.attention_varlen_backward(
        dout.contiguous(), None if dlse is None else dlse.contiguous(), q, k, v, out, lse,
        cq, ck, *ctx.args)
    return dq, dk, dv, *(None,) * 9


#: Every operator, in registration order.  Grouped GEMM adds rows here.
OPS: tuple[OpSpec, ...] = (
    OpSpec("gemm",
           "(Tensor a, Tensor b, Tensor? scale_a=None, Tensor? scale_b=None, *, "
           "ScalarType? out_dtype=None) -> Tensor",
           (), _gemm_impl, _gemm_fake, "a @ b in a new tensor"),
    OpSpec("gemm_out",
           "(Tensor a, Tensor b, Tensor(a!) out, Tensor? scale_a=None, "
           "Tensor? scale_b=None) -> ()",
           ("out",), _gemm_out_impl, _gemm_out_fake, "a @ b written into out"),
    OpSpec("gemm_epilogue",
           "(Tensor a, Tensor b, Tensor? scale_a=None, Tensor? scale_b=None, "
           "Tensor? bias=None, Tensor? c=None, Tensor? residual=None, *, "
           "str? activation=None, float alpha=1.0, float? beta=None, "
           "ScalarType? out_dtype=None) -> Tensor",
           (), _gemm_epilogue_impl, _gemm_epilogue_fake,
           "act(alpha * a @ b + beta * c + bias) + residual in a new tensor"),
    OpSpec("attention_backward",
           "(Tensor dout, Tensor? dlse, Tensor q, Tensor k, Tensor v, Tensor out, "
           "Tensor lse, bool causal=False, float? scale=None, float softcap=0.0, "
           "int window_left=-1, int window_right=-1, bool deterministic=False) -> "
           "(Tensor, Tensor, Tensor)",
           (), _attention_bwd_impl, _attention_bwd_fake,
           "(dq, dk, dv) of nvatom::attention (the SM90 backward kernel, or the float32 "
           "reference in torch operations)"),
    OpSpec("attention_varlen_backward",
           "(Tensor dout, Tensor? dlse, Tensor q, Tensor k, Tensor v, Tensor out, "
           "Tensor lse, Tensor cu_seqlens_q, Tensor cu_seqlens_k, int max_seqlen_q, "
           "int max_seqlen_k, bool causal=False, float? scale=None, float softcap=0.0, "
           "int window_left=-1, int window_right=-1) -> (Tensor, Tensor, Tensor)",
           (), _varlen_bwd_impl, _varlen_bwd_fake,
           "(dq, dk, dv) of nvatom::attention_varlen (packed; the varlen backward kernels)"),
    OpSpec("attention_varlen",
           "(Tensor q, Tensor k, Tensor v, Tensor cu_seqlens_q, Tensor cu_seqlens_k, "
           "int max_seqlen_q, int max_seqlen_k, bool causal=False, float? scale=None, "
           "float softcap=0.0, int window_left=-1, int window_right=-1) -> (Tensor, Tensor)",
           (), _varlen_impl, _varlen_fake,
           "(out, lse) of packed variable-length attention in one launch",
           (_varlen_grad, _varlen_setup)),
    OpSpec("attention",
           "(Tensor q, Tensor k, Tensor v, bool causal=False, float? scale=None, "
           "float softcap=0.0, int window_left=-1, int window_right=-1, "
           "bool deterministic=False) -> (Tensor, Tensor)",
           (), _attention_impl, _attention_fake, "(out, lse) of scaled dot-product attention",
           (_attention_grad, _attention_setup)),
)

#: name -> the registered ``CustomOpDef`` (filled by :func:`register`).
_registered: dict[str, Any] = {}


def _torch() -> Any:
    try:
        import torch
    except ImportError as e:
        raise TorchOpsError(f"the nvatom torch operators need torch (pip install "
                            f"'nvatom[gpu]'): {e}") from None
    if not hasattr(torch, "library") or not hasattr(torch.library, "custom_op"):
        raise TorchOpsError(f"torch {torch.__version__} has no torch.library.custom_op "
                            "(added in torch 2.4); upgrade torch")
    return torch


def register(ops: Sequence[OpSpec] = OPS) -> dict[str, Any]:
    """Register ``ops`` (default all of :data:`OPS`) with torch, once each: afterwards
    ``torch.ops.nvatom.<name>`` exists.  Returns name -> ``CustomOpDef``."""
    torch = _torch()
    for spec in ops:
        if spec.name in _registered:
            continue
        op = torch.library.custom_op(spec.qualname, spec.impl, mutates_args=spec.mutates,
                                     schema=spec.schema)
        op.register_fake(spec.fake)
        if spec.autograd is not None:
            op.register_autograd(spec.autograd[0], setup_context=spec.autograd[1])
        _registered[spec.name] = op
    return dict(_registered)


def registered() -> tuple[str, ...]:
    """The names registered so far."""
    return tuple(_registered)


def _scale(v: Any, like: Any) -> Any:
    """A scale as the operator takes it: a float32 one-element tensor on ``like``'s device."""
    if v is None or hasattr(v, "data_ptr"):
        return v
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        import torch

        return torch.full((1,), float(v), dtype=torch.float32, device=like.device)
    return from_dlpack(v)


def _as_tensor(x: Any, name: str) -> Any:
    t = from_dlpack(x)
    if not hasattr(t, "data_ptr"):
        raise TorchOpsError(f"{name} is a {type(x).__name__}: nvatom's torch operators take "
                            "torch tensors or DLPack arrays (__dlpack__)")
    return t


def gemm(a: Any, b: Any, *, scale_a: Any = None, scale_b: Any = None,
         out_dtype: Any = None) -> Any:
    """``torch.ops.nvatom.gemm`` after :func:`register`, taking DLPack arrays (CuPy, ...) and
    Python-number scales; returns a torch tensor."""
    torch = _torch()
    register()
    a, b = _as_tensor(a, "a"), _as_tensor(b, "b")
    return torch.ops.nvatom.gemm(a, b, scale_a=_scale(scale_a, a), scale_b=_scale(scale_b, a),
                                 out_dtype=out_dtype)


def gemm_epilogue(a: Any, b: Any, *, scale_a: Any = None, scale_b: Any = None,
                  bias: Any = None, activation: str | None = None, alpha: float = 1.0,
                  beta: float | None = None, c: Any = None, residual: Any = None,
                  out_dtype: Any = None, epilogue: Any = None,
                  epilogue_args: Any = None) -> Any:
    """``torch.ops.nvatom.gemm_epilogue`` after :func:`register` (DLPack arrays and
    Python-number scales taken as :func:`gemm` takes them).  ``epilogue`` and
    ``epilogue_args`` are refused (:class:`TorchOpsError`): the operator cannot carry a
    user epilogue (a Python function), :func:`nvatom.gemm` can."""
    if epilogue is not None or epilogue_args is not None:
        raise TorchOpsError("torch.ops.nvatom.gemm_epilogue cannot carry a user epilogue: a "
                            "torch operator's schema takes tensors, numbers, strings and "
                            "dtypes, not a Python function; call nvatom.gemm(a, b, "
                            "epilogue=hook, epilogue_args={...}) instead")
    torch = _torch()
    register()
    a, b = _as_tensor(a, "a"), _as_tensor(b, "b")
    opt = {name: None if v is None else _as_tensor(v, name)
           for name, v in (("bias", bias), ("c", c), ("residual", residual))}
    return torch.ops.nvatom.gemm_epilogue(
        a, b, scale_a=_scale(scale_a, a), scale_b=_scale(scale_b, a), activation=activation,
        alpha=float(alpha), beta=None if beta is None else float(beta), out_dtype=out_dtype,
        **opt)


def gemm_out(a: Any, b: Any, out: Any, *, scale_a: Any = None, scale_b: Any = None) -> Any:
    """``torch.ops.nvatom.gemm_out`` after :func:`register`; returns ``out`` as a torch
    tensor (a DLPack ``out`` shares its memory, so the producer sees the result)."""
    torch = _torch()
    register()
    a, b, out = _as_tensor(a, "a"), _as_tensor(b, "b"), _as_tensor(out, "out")
    torch.ops.nvatom.gemm_out(a, b, out, scale_a=_scale(scale_a, a),
                              scale_b=_scale(scale_b, a))
    return out


def flash_attn_func(q: Any, k: Any, v: Any, dropout_p: float = 0.0,
                    softmax_scale: float | None = None, causal: bool = False,
                    window_size: tuple[int, int] = (-1, -1), softcap: float = 0.0,
                    alibi_slopes: Any = None, deterministic: bool = False,
                    return_attn_probs: bool = False) -> Any:
    """FlashAttention's ``flash_attn_func`` over ``torch.ops.nvatom.attention``: q (batch,
    seqlen_q, heads, head_dim), k and v (batch, seqlen_k, kv_heads, head_dim); returns the
    output (batch, seqlen_q, heads, head_dim) (a view of the kernel's (B, H, S, D) output),
    differentiable; ``softcap`` and ``window_size`` as :func:`nvatom.attention`'s ``softcap``
    and ``window``.  ``deterministic``: the backward gives the same bits on every run (the
    float32 reference backward; the kernel's dQ is summed by TMA reductions in whatever
    order the CTAs finish).  Not
    supported yet, refused naming the value: ``dropout_p`` other than 0, ``alibi_slopes``,
    ``return_attn_probs``, and ``causal`` or a window with seqlen_q != seqlen_k
    (FlashAttention aligns those masks at the bottom right; nvatom's kernel, as SDPA's
    ``is_causal``, at the top left)."""
    torch = _torch()
    register()
    for name, value, default in (("dropout_p", dropout_p, 0.0),
                                 ("alibi_slopes", alibi_slopes, None),
                                 ("return_attn_probs", return_attn_probs, False)):
        if (value is not None) if default is None else value != default:
            raise AttentionError(f"flash_attn_func: {name} = {value!r} is not supported yet "
                                 f"(nvatom's attention takes {name} = {default!r})")
    for name, t in (("q", q), ("k", k), ("v", v)):
        if getattr(t, "dim", lambda: 0)() != 4:
            raise AttentionError(f"{name} has shape {tuple(getattr(t, 'shape', ()))}: "
                                 "flash_attn_func takes (batch, seqlen, heads, head_dim)")
    try:
        left, right = (int(x) for x in window_size)
    except (TypeError, ValueError):
        raise AttentionError(f"flash_attn_func: window_size = {window_size!r}: a pair "
                             "(left, right), -1 for unbounded") from None
    windowed = (left, right) != (-1, -1)
    if (causal or windowed) and int(q.shape[1]) != int(k.shape[1]):
        what = "causal" if causal else f"window_size = {(left, right)}"
        raise AttentionError(
            f"flash_attn_func: {what} with seqlen_q = {int(q.shape[1])} != seqlen_k = "
            f"{int(k.shape[1])} is not supported yet (FlashAttention aligns that mask at the "
            "bottom right, nvatom's kernel at the top left)")
    out, _ = torch.ops.nvatom.attention(q.transpose(1, 2), k.transpose(1, 2),
                                        v.transpose(1, 2), causal, softmax_scale,
                                        float(softcap or 0.0), left, right,
                                        bool(deterministic))
    return out.transpose(1, 2)


def _cu_seqlens(torch: Any, cu: Any, name: str, total: int, batch: int | None) -> list[int]:
    """``cu`` (a 1-D int32/int64 tensor of B + 1 prefix sums from 0 to ``total``, on q's
    device) read on the host, checked."""
    if not hasattr(cu, "dim") or cu.dim() != 1 or cu.dtype not in (torch.int32, torch.int64):
        raise AttentionError(f"flash_attn_varlen_func: {name} must be a 1-D int32 tensor of "
                             f"batch + 1 offsets, got {getattr(cu, 'dtype', type(cu).__name__)}"
                             f" of shape {tuple(getattr(cu, 'shape', ()))}")
    if torch.cuda.is_available() and torch.cuda.is_current_stream_capturing():
        raise AttentionError("flash_attn_varlen_func reads cu_seqlens on the host (one launch "
                             "per sequence): it cannot be captured in a CUDA graph yet")
    vals = [int(x) for x in cu.tolist()]
    if len(vals) < 2 or (batch is not None and len(vals) != batch + 1):
        raise AttentionError(f"flash_attn_varlen_func: {name} has {len(vals)} entries; "
                             f"{'batch + 1 = ' + str(batch + 1) if batch is not None else '>= 2'}"
                             " expected")
    bad = next((i for i in range(1, len(vals)) if vals[i] < vals[i - 1]), None)
    if vals[0] != 0 or bad is not None or vals[-1] != total:
        where = f"decreases at entry {bad}" if bad is not None else (
            f"starts at {vals[0]}" if vals[0] != 0 else f"ends at {vals[-1]}")
        raise AttentionError(f"flash_attn_varlen_func: {name} {where}; it must rise from 0 to "
                             f"the packed length {total}")
    return vals


def flash_attn_varlen_func(q: Any, k: Any, v: Any, cu_seqlens_q: Any, cu_seqlens_k: Any,
                           max_seqlen_q: int, max_seqlen_k: int, dropout_p: float = 0.0,
                           softmax_scale: float | None = None, causal: bool = False,
                           window_size: tuple[int, int] = (-1, -1), softcap: float = 0.0,
                           alibi_slopes: Any = None, deterministic: bool = False,
                           return_attn_probs: bool = False, block_table: Any = None) -> Any:
    """FlashAttention's ``flash_attn_varlen_func``: packed batches, q (total_q, heads,
    head_dim) and k, v (total_k, kv_heads, head_dim) with sequence ``i`` at rows
    ``cu_seqlens[i] .. cu_seqlens[i + 1]``; returns the output (total_q, heads, head_dim),
    differentiable.  **One launch per sequence** (each a view of the packed tensors through
    ``torch.ops.nvatom.attention``, then concatenated): the offsets are read on the host (a
    synchronisation; not CUDA-graph capturable); a device-side varlen kernel is the next step.
    A sequence with no query rows contributes none; one with queries but no keys gives zeros
    (as FlashAttention).  ``max_seqlen_q`` / ``max_seqlen_k`` must bound the lengths.  Refused
    by name as in :func:`flash_attn_func` (dropout, alibi, attention probabilities, causal or
    a window on a sequence whose lengths differ), and a ``block_table`` (paged KV)."""
    torch = _torch()
    register()
    for name, value, default in (("dropout_p", dropout_p, 0.0),
                                 ("alibi_slopes", alibi_slopes, None),
                                 ("return_attn_probs", return_attn_probs, False),
                                 ("block_table", block_table, None)):
        if (value is not None) if default is None else value != default:
            raise AttentionError(f"flash_attn_varlen_func: {name} = {value!r} is not "
                                 f"supported yet (nvatom's attention takes {name} = "
                                 f"{default!r})")
    for name, t in (("q", q), ("k", k), ("v", v)):
        if getattr(t, "dim", lambda: 0)() != 3:
            raise AttentionError(f"{name} has shape {tuple(getattr(t, 'shape', ()))}: "
                                 "flash_attn_varlen_func takes (total, heads, head_dim)")
    try:
        left, right = (int(x) for x in window_size)
    except (TypeError, ValueError):
        raise AttentionError(f"flash_attn_varlen_func: window_size = {window_size!r}: a pair "
                             "(left, right), -1 for unbounded") from None
    cq = _cu_seqlens(torch, cu_seqlens_q, "cu_seqlens_q", int(q.shape[0]), None)
    ck = _cu_seqlens(torch, cu_seqlens_k, "cu_seqlens_k", int(k.shape[0]), len(cq) - 1)
    outs = []
    for i in range(len(cq) - 1):
        lq, lk = cq[i + 1] - cq[i], ck[i + 1] - ck[i]
        for name, n, bound in (("q", lq, max_seqlen_q), ("k", lk, max_seqlen_k)):
            if n > bound:
                raise AttentionError(f"flash_attn_varlen_func: sequence {i} has {n} {name} "
                                     f"rows, more than max_seqlen_{name} = {bound}")
        if lq == 0:
            continue
        if (causal or (left, right) != (-1, -1)) and lq != lk:
            raise AttentionError(
                f"flash_attn_varlen_func: sequence {i}: causal or a window with {lq} "
                f"queries and {lk} keys is not supported yet (FlashAttention aligns that "
                "mask at the bottom right, nvatom's kernel at the top left)")
        if lk == 0:
            outs.append(q.new_zeros((lq, q.shape[1], v.shape[2])))
            continue
        qi = q[cq[i]:cq[i + 1]].unsqueeze(0).transpose(1, 2)
        ki = k[ck[i]:ck[i + 1]].unsqueeze(0).transpose(1, 2)
        vi = v[ck[i]:ck[i + 1]].unsqueeze(0).transpose(1, 2)
        out, _ = torch.ops.nvatom.attention(qi, ki, vi, causal, softmax_scale,
                                            float(softcap or 0.0), left, right,
                                            bool(deterministic))
        outs.append(out[0].transpose(0, 1))
    if not outs:
        return q.new_empty((0, q.shape[1], v.shape[2]))
    return torch.cat(outs, dim=0)


def transformers_attention(module: Any, query: Any, key: Any, value: Any, attention_mask: Any,
                           scaling: float | None = None, dropout: float = 0.0,
                           **kwargs: Any) -> tuple[Any, None]:
    """A Hugging Face ``transformers`` attention function (its ``AttentionInterface``
    signature: query (B, H, S, D), key and value (B, Hkv, S, D); returns (B, S, H, D) and no
    weights) over ``torch.ops.nvatom.attention``: causal when the module is (``is_causal``,
    default True) and the query has more than one row; a ``softcap`` keyword (Gemma 2) caps
    the scores.  Refused by name, never computed wrongly: a ``sliding_window`` keyword (not
    supported yet), dropout, an attention mask that is not the plain causal one (padding), causal
    attention with more keys than queries (a KV cache: its mask is aligned at the bottom
    right, nvatom's at the top left)."""
    torch = _torch()
    if dropout:
        raise AttentionError(f"nvatom attention: dropout = {dropout} is not supported")
    sq, sk = int(query.shape[2]), int(key.shape[2])
    causal = bool(getattr(module, "is_causal", True)) and sq > 1
    if causal and sq != sk:
        raise AttentionError(f"nvatom attention: causal with {sq} queries and {sk} keys (a KV "
                             "cache) needs a bottom-right-aligned mask; not supported yet")
    if attention_mask is not None:
        m = attention_mask[..., :sq, :sk]
        allowed = torch.ones(sq, sk, dtype=torch.bool, device=query.device)
        if causal:
            allowed = allowed.tril()
        keep = m if m.dtype == torch.bool else m == 0
        if not bool((keep == allowed).all()):
            raise AttentionError("nvatom attention: the attention mask is not the plain "
                                 f"{'causal' if causal else 'full'} mask (padding?); "
                                 "masks are not supported yet")
    if kwargs.get("sliding_window") is not None:
        raise AttentionError(f"nvatom attention: sliding_window = {kwargs['sliding_window']} "
                             "(transformers' convention) is not supported yet")
    softcap = kwargs.get("softcap")
    out, _ = torch.ops.nvatom.attention(query, key, value, causal, scaling,
                                        float(softcap or 0.0))
    return out.transpose(1, 2).contiguous(), None


def _no_mask(*args: Any, **kwargs: Any) -> None:
    """transformers' mask function for "nvatom": none (the attention applies the causal
    mask itself)."""
    return None


def register_transformers(name: str = "nvatom") -> str:
    """Register :func:`transformers_attention` as ``attn_implementation=name`` with Hugging
    Face ``transformers`` (its ``AttentionInterface``; and, where the version has one, its
    ``AttentionMaskInterface`` with no mask: the kernel masks causally itself).  Returns
    ``name``."""
    _torch()
    register()
    try:
        import transformers
    except ImportError as e:
        raise TorchOpsError(f"register_transformers needs transformers: {e}") from None
    if not hasattr(transformers, "AttentionInterface"):
        raise TorchOpsError(f"transformers {transformers.__version__} has no AttentionInterface "
                            "(added in 4.48); upgrade transformers")
    transformers.AttentionInterface.register(name, transformers_attention)
    if hasattr(transformers, "AttentionMaskInterface"):
        transformers.AttentionMaskInterface.register(name, _no_mask)
    return name


if importlib.util.find_spec("torch") is not None:  # registered on import where torch is
    register()
