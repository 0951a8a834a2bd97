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

:func:`gemm` and :func:`gemm_out` are eager conveniences over them: they register first, take
DLPack arrays (``torch.from_dlpack``; results are torch tensors) and Python-number scales.
"""

from __future__ import annotations

import dataclasses
import importlib.util
from collections.abc import Callable, Sequence
from typing import Any

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
    "gemm",
    "gemm_epilogue",
    "gemm_out",
    "gemm_output_spec",
    "register",
    "registered",
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


#: Every operator, in registration order.  Grouped GEMM and attention add rows here.
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


if importlib.util.find_spec("torch") is not None:  # registered on import where torch is
    register()
