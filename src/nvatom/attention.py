"""``nvatom.attention(q, k, v)``: a FlashAttention forward on torch tensors, from nvatom's atoms.

``out, lse = nvatom.attention(q, k, v, causal=False, scale=None)`` computes
``softmax(scale * q @ k^T [+ causal mask]) @ v`` per (batch, head) and the row log-sum-exp
``lse = log(sum(exp(scale * q @ k^T)))`` (natural log, float32), as
``torch.nn.functional.scaled_dot_product_attention`` does its output:

* ``q`` is (B, H, Sq, D); ``k`` and ``v`` are (B, Hkv, Sk, D) with ``H`` a multiple of
  ``Hkv`` (grouped-query attention: query head ``h`` reads KV head ``h // (H / Hkv)``), all
  bf16 or all f16 on one CUDA device of compute capability 9.0 (the kernel is
  :mod:`nvatom.kernels.sm90.attention`: TMA + WGMMA).  D is 64, 128 or 256.
* Any strides torch gives with a contiguous head dimension (stride 1) whose other strides are
  multiples of 16 bytes and a 16-byte aligned base (TMA's rules): e.g. ``x.transpose(1, 2)``
  of a (B, S, H, D) tensor.  Anything else is refused with :class:`AttentionError` naming
  the tensor and the stride (pass ``x.contiguous()``).
* ``causal``: the mask ``col <= row`` aligned at the top left, as SDPA's ``is_causal``.
* ``scale``: defaults to ``1 / sqrt(D)``; a positive finite number.
* ``window``: ``(left, right)``, FlashAttention's ``window_size`` aligned at the top left
  (row ``i`` sees keys ``i - left .. i + right``; -1: unbounded; with ``causal`` the right
  edge is the diagonal); every query row must keep a key (``Sq <= Sk + left``).
* ``softcap``: 0 (none) or a positive number ``c``: the scores ``scale * q @ k^T`` become
  ``c * tanh(scale * q @ k^T / c)`` before the mask and the softmax (Gemma 2's logit
  softcapping, FlashAttention's ``softcap``); ``lse`` is of the capped scores.
* Sequence lengths are any positive ints (the last tiles are masked / clipped).

``out`` is a new contiguous (B, H, Sq, D) tensor of q's dtype and ``lse`` (B, H, Sq)
float32.  The call runs on torch's current stream.  Bad input raises :class:`AttentionError`
(a :class:`~nvatom.errors.NvatomError`); the checks (:func:`check_inputs`) need no GPU.
"""

from __future__ import annotations

import ctypes
import dataclasses
import math
import sys
import types
from collections.abc import Sequence
from typing import Any

from nvatom.errors import F32_MAX, NvatomError, f32_number, shown
from nvatom.kernels.sm90.attention import build_attention_sm90
from nvatom.kernels.sm90.attention_bwd import build_attention_bwd_sm90
from nvatom.kernels.sm90.attention_bwd_config import (
    BWD_HEAD_DIMS,
    AttentionBwdSm90Config,
    default_bwd_config,
)
from nvatom.kernels.sm90.attention_bwd_pre import (
    BwdPreConfig,
    build_attention_bwd_pre,
    pre_launch_geometry,
)
from nvatom.kernels.sm90.attention_config import (
    DTYPES,
    HEAD_DIMS,
    AttentionSm90Config,
    default_config,
)
from nvatom.kernels.sm90.attention_launch import (
    bwd_launch_geometry,
    bwd_stats_rows,
    bwd_tensor_maps,
    launch_geometry,
    scale_log2,
    softcap_params,
    tensor_maps,
)
from nvatom.runtime.driver_launch import load_function, prepare_driver_launch
from nvatom.runtime.launch import TensorMapCache
from nvatom.runtime.ptxas import assemble
from nvatom.runtime.torch_interop import TORCH_DTYPES

__all__ = ["AttentionError", "AttentionProblem", "attention", "attention_backward",
           "attention_backward_reference", "attention_varlen", "attention_varlen_backward",
           "check_inputs", "prepare"]

#: The largest element count of q or of the output: the kernel indexes them in 32 bits.
MAX_ELEMENTS = 2**31 - 1
_TMAPS = TensorMapCache(256)


class AttentionError(NvatomError, ValueError):
    """An attention call nvatom cannot run as asked (device, dtype, shapes, strides)."""


class AttentionProblem:
    """The checked shape of one call."""

    __slots__ = ("batch", "causal", "device", "dtype", "group", "head_dim", "heads",
                 "kv_heads", "scale", "seqlen_k", "seqlen_q", "softcap", "window")

    def __init__(self, batch: int, heads: int, kv_heads: int, seqlen_q: int, seqlen_k: int,
                 head_dim: int, dtype: str, device: int, causal: bool, scale: float,
                 softcap: float = 0.0, window: tuple[int, int] = (-1, -1)) -> None:
        self.batch, self.heads, self.kv_heads = batch, heads, kv_heads
        self.seqlen_q, self.seqlen_k, self.head_dim = seqlen_q, seqlen_k, head_dim
        self.dtype, self.device, self.causal, self.scale = dtype, device, causal, scale
        self.softcap, self.window = softcap, window
        self.group = heads // kv_heads if kv_heads else 1

    def __repr__(self) -> str:
        return (f"AttentionProblem(B={self.batch}, H={self.heads}, Hkv={self.kv_heads}, "
                f"Sq={self.seqlen_q}, Sk={self.seqlen_k}, D={self.head_dim}, {self.dtype}, "
                f"causal={self.causal}, scale={self.scale}"
                f"{f', softcap={self.softcap}' if self.softcap else ''}"
                f"{f', window={self.window}' if self.window != (-1, -1) else ''})")

    @property
    def windowed(self) -> bool:
        """A sliding window the kernel must apply (a causal mask alone covers the right)."""
        left, right = self.window
        return left >= 0 or (right >= 0 and not self.causal)

    def window_params(self) -> tuple[int, int]:
        """The kernel's (win_left, win_right): the window's edges, an unbounded one (-1)
        and the right edge of a causal mask as far as the sequences reach."""
        left, right = self.window
        return (left if left >= 0 else self.seqlen_q + self.seqlen_k,
                0 if self.causal else min(right, self.seqlen_k) if right >= 0
                else self.seqlen_k)


def _tensor(t: Any, name: str) -> tuple[str, tuple[int, ...], tuple[int, ...], int]:
    """(dtype, shape, strides, device index) of a 4-D CUDA tensor, checked."""
    if not (hasattr(t, "data_ptr") and hasattr(t, "stride") and hasattr(t, "shape")
            and hasattr(t, "device") and hasattr(t, "dtype")):
        raise AttentionError(f"{name} is a {type(t).__name__}, not a torch tensor: "
                             "nvatom.attention takes torch CUDA tensors")
    dev = t.device
    if getattr(dev, "type", None) != "cuda":
        raise AttentionError(f"{name} is on device '{dev}', not a CUDA device; move it with "
                             f"{name}.cuda()")
    dt = TORCH_DTYPES.get(str(t.dtype).removeprefix("torch."))
    if dt not in DTYPES:
        raise AttentionError(f"{name} has dtype {str(t.dtype).removeprefix('torch.')}; "
                             "nvatom.attention takes bfloat16 or float16")
    shape = tuple(int(x) for x in t.shape)
    if len(shape) != 4:
        raise AttentionError(f"{name} has shape {shape}: expected 4 dimensions "
                             "(batch, heads, seqlen, head_dim)")
    idx = getattr(dev, "index", None)
    return dt, shape, tuple(int(x) for x in t.stride()), 0 if idx is None else int(idx)


def _check_strides(t: Any, name: str, shape: tuple[int, ...], strides: tuple[int, ...]) -> None:
    if shape[3] > 1 and strides[3] != 1:
        raise AttentionError(f"{name} has strides {strides}: the head dimension must be "
                             f"contiguous (stride 1, got {strides[3]}); pass {name}.contiguous()")
    for dim, what in ((0, "batch"), (1, "head"), (2, "sequence")):
        if shape[dim] > 1 and (strides[dim] * 2) % 16:
            raise AttentionError(
                f"{name} has strides {strides}: its {what} stride ({strides[dim]} elements) is "
                "not a multiple of 16 bytes (TMA); pass "
                f"{name}.contiguous()")
        if shape[dim] > 1 and strides[dim] <= 0:
            raise AttentionError(f"{name} has strides {strides}: the {what} stride must be "
                                 "positive")
    if shape[2] > 1 and strides[2] < shape[3]:
        raise AttentionError(f"{name} has strides {strides}: rows overlap (sequence stride "
                             f"{strides[2]} < head_dim {shape[3]})")
    if int(t.data_ptr()) % 16:
        raise AttentionError(f"{name} starts at address 0x{int(t.data_ptr()):x}, not 16-byte "
                             f"aligned (TMA); pass {name}.contiguous()")


def check_inputs(q: Any, k: Any, v: Any, *, causal: bool = False,
                 scale: float | None = None, softcap: float = 0.0,
                 window: Any = (-1, -1)) -> AttentionProblem:
    """Validate a call; raises :class:`AttentionError` naming what is wrong.  No GPU needed."""
    if not isinstance(causal, bool):
        raise AttentionError(f"causal = {causal!r} is not a bool")
    dq, sq_, stq, devq = _tensor(q, "q")
    dk, sk_, stk, devk = _tensor(k, "k")
    dv, sv_, stv, devv = _tensor(v, "v")
    if not dq == dk == dv:
        raise AttentionError(f"q, k, v have dtypes {dq}, {dk}, {dv}; they must be one type")
    if not devq == devk == devv:
        raise AttentionError(f"q, k, v are on cuda:{devq}, cuda:{devk}, cuda:{devv}; they must "
                             "share one device")
    b, h, s_q, d = sq_
    if sk_ != sv_:
        raise AttentionError(f"k has shape {sk_} but v has {sv_}; they must match")
    bk, hk, s_k, dk_ = sk_
    if bk != b:
        raise AttentionError(f"q has batch {b} but k and v have {bk}")
    if dk_ != d:
        raise AttentionError(f"q has head_dim {d} but k and v have {dk_}")
    if d not in HEAD_DIMS:
        raise AttentionError(f"head_dim {d} is not supported (nvatom.attention takes "
                             f"{', '.join(map(str, HEAD_DIMS))})")
    if hk < 1 or h % hk:
        raise AttentionError(f"q has {h} heads and k, v have {hk}: the query heads must be a "
                             "multiple of the KV heads (grouped-query attention)")
    if s_k < 1 and s_q > 0:
        raise AttentionError(f"k and v have sequence length {s_k}: at least one key is needed")
    if b * h * max(s_q, 1) * d > MAX_ELEMENTS or b * hk * s_k * d > MAX_ELEMENTS:
        raise AttentionError(f"q {sq_} / k {sk_} have more than 2^31 - 1 elements, the "
                             "kernel's 32-bit index range")
    for t, name, shape, st in ((q, "q", sq_, stq), (k, "k", sk_, stk), (v, "v", sv_, stv)):
        _check_strides(t, name, shape, st)
    if scale is None:
        scale = 1.0 / math.sqrt(d)
    # the kernel takes scale * log2(e) as an .f32: both must be finite positive float32s
    f = f32_number(scale)
    if f is None or f <= 0 or f32_number(scale_log2(f)) is None:
        raise AttentionError(f"scale = {shown(scale)} must be a positive finite number below "
                             f"{F32_MAX / scale_log2(1.0):.4g} (the kernel multiplies it by "
                             "log2(e) in float32)")
    cap = 0.0
    if softcap is not None and not (isinstance(softcap, (int, float)) and not
                                    isinstance(softcap, bool) and softcap == 0):
        c = f32_number(softcap)
        # the kernel takes softcap * log2(e) and scale / softcap as .f32 numbers
        if c is None or c <= 0 or not all(f32_number(x) for x in softcap_params(f, c)):
            raise AttentionError(f"softcap = {shown(softcap)} must be 0 (none) or a positive "
                                 "finite number whose scale / softcap and softcap * log2(e) "
                                 "are finite, nonzero float32s")
        cap = c
    win = _check_window(window, s_q, s_k)
    return AttentionProblem(b, h, hk, s_q, s_k, d, dq, devq, causal, f, cap, win)


def _check_window(window: Any, s_q: int, s_k: int) -> tuple[int, int]:
    """``window = (left, right)``: two ints, each -1 (unbounded) or 0 .. 2^31 - 1; every query
    row must keep a key (``seqlen_q <= seqlen_k + left``: the window is aligned at the top
    left, row i sees keys i - left .. i + right)."""
    try:
        left, right = window
    except (TypeError, ValueError):
        raise AttentionError(f"window = {shown(window)}: a pair (left, right) of ints, -1 for "
                             "unbounded") from None
    for name, v in (("left", left), ("right", right)):
        if isinstance(v, bool) or not isinstance(v, int) or not -1 <= v < 2**31:
            raise AttentionError(f"window {name} = {shown(v)}: an int, -1 (unbounded) or "
                                 "0 .. 2^31 - 1")
    if left >= 0 and s_q > s_k + left:
        raise AttentionError(f"window = ({left}, {right}) leaves query rows {s_k + left} .. "
                             f"{s_q - 1} without a key (the window is aligned at the top "
                             f"left: row i sees keys i - {left} .. ; seqlen_k = {s_k})")
    return left, right


def _capability(device: int) -> tuple[int, int]:
    import torch

    hit = _caps.get(device)
    if hit is None:
        hit = _caps[device] = tuple(torch.cuda.get_device_capability(device))  # type: ignore
    return hit


_caps: dict[int, tuple[int, int]] = {}


def prepare(q: Any, k: Any, v: Any, out: Any, lse: Any, p: AttentionProblem,
            config: AttentionSm90Config | None = None, *,
            keep_tensors: bool = True) -> Any:
    """A zero-argument callable that runs the kernel for checked tensors into ``out``
    (contiguous (B, H, Sq, D), q's dtype) and ``lse`` (contiguous (B, H, Sq) float32) on
    torch's current stream (benchmarks keep it; :func:`attention` caches them by pointers,
    without ``keep_tensors``: the callable then holds addresses only)."""
    import torch

    cap = _capability(p.device)
    if cap != (9, 0):
        raise AttentionError(f"nvatom.attention needs compute capability 9.0 (sm_90a: WGMMA, "
                             f"TMA), the tensors are on a {cap[0]}.{cap[1]} device")
    cfg = config or default_config(p.dtype, p.head_dim, p.causal, softcap=bool(p.softcap),
                                   window=p.windowed)
    if (cfg.dtype, cfg.head_dim, cfg.causal, cfg.softcap, cfg.window) != (
            p.dtype, p.head_dim, p.causal, bool(p.softcap), p.windowed):
        raise AttentionError(f"config {cfg.name} does not fit {p!r}")
    want = (p.batch, p.heads, p.seqlen_q, p.head_dim)
    if tuple(out.shape) != want or not out.is_contiguous() or out.dtype != q.dtype:
        raise AttentionError(f"out must be a contiguous {want} tensor of {q.dtype}")
    if tuple(lse.shape) != want[:3] or not lse.is_contiguous() or lse.dtype != torch.float32:
        raise AttentionError(f"lse must be a contiguous {want[:3]} float32 tensor")
    maps = tensor_maps(cfg, *((int(t.data_ptr()), tuple(t.shape), tuple(t.stride()))
                              for t in (q, k, v, out)))
    raw = [_TMAPS.get(tm) for tm in maps]
    f = load_function(cfg, lambda: assemble(build_attention_sm90(cfg).emit(),
                                            "sm_90a").cubin,
                      cfg.name, p.device, cfg.smem_bytes, False)
    grid, block, smem = launch_geometry(cfg, p.batch, p.heads, p.seqlen_q)
    params: list[Any] = [(ctypes.c_uint64 * 16).from_buffer_copy(r) for r in raw]
    params += [ctypes.c_uint64(int(out.data_ptr())), ctypes.c_uint64(int(lse.data_ptr())),
               ctypes.c_uint32(p.seqlen_q), ctypes.c_uint32(p.seqlen_k),
               ctypes.c_uint32(p.heads), ctypes.c_uint32(p.group)]
    params += _scale_window_params(p)
    dev = p.device
    return prepare_driver_launch(f, grid, block, smem, (1, 1, 1), params,
                                 lambda: torch.cuda.current_stream(dev).cuda_stream,
                                 keep=(q, k, v, out, lse) if keep_tensors else None)


def attention(q: Any, k: Any, v: Any, *, causal: bool = False,
              scale: float | None = None, softcap: float = 0.0,
              window: tuple[int, int] = (-1, -1)) -> tuple[Any, Any]:
    """``(out, lse)`` of scaled dot-product attention (module docstring).

    Host cost: a call whose q, k, v match an earlier one in everything the checks read
    (pointers, shapes, strides, dtypes, devices, ``causal``, ``scale``) skips the checks;
    its launch (tensor maps encoded, arguments packed) is reused when the fresh ``out`` and
    ``lse`` land at the addresses of an earlier call's (torch's caching allocator makes that
    the common case in a loop).  Both caches are bounded and hold no tensors."""
    key: tuple[Any, ...] | None
    try:
        key = (*((t.data_ptr(), tuple(t.shape), tuple(t.stride()), t.dtype, t.device)
                 for t in (q, k, v)), type(causal), causal, type(scale), scale,
               type(softcap), softcap, _hashable(window))
        p = _problems.get(key)
    except Exception:  # not tensors, or unhashable: the checks say what is wrong
        key, p = None, None
    if p is None:
        p = check_inputs(q, k, v, causal=causal, scale=scale, softcap=softcap, window=window)
        if key is not None:
            _remember(_problems, key, p)
    import torch

    out = torch.empty((p.batch, p.heads, p.seqlen_q, p.head_dim), dtype=q.dtype,
                      device=q.device)
    lse = torch.empty((p.batch, p.heads, p.seqlen_q), dtype=torch.float32, device=q.device)
    if out.numel() == 0:
        return out, lse
    lkey = None if key is None else (key, out.data_ptr(), lse.data_ptr())
    run = _launches.get(lkey) if lkey is not None else None
    if run is None:
        run = prepare(q, k, v, out, lse, p, keep_tensors=False)
        if lkey is not None:
            _remember(_launches, lkey, run)
    run()
    return out, lse


def attention_varlen(q: Any, k: Any, v: Any, cu_seqlens_q: Any, cu_seqlens_k: Any,
                     max_seqlen_q: int, max_seqlen_k: int, *, causal: bool = False,
                     scale: float | None = None, softcap: float = 0.0,
                     window: tuple[int, int] = (-1, -1)) -> tuple[Any, Any]:
    """``(out, lse)`` of packed variable-length attention in **one launch** (no host
    synchronisation: CUDA-graph capturable): q (total_q, heads, D), k and v (total_k,
    kv_heads, D), sequence ``i`` at rows ``cu_seqlens[i] .. cu_seqlens[i + 1]`` (int32 on
    q's device, batch + 1 entries); ``out`` (total_q, heads, D), ``lse`` (heads, total_q)
    float32.  Each sequence is a dense problem of its own lengths (causal and windows
    aligned at its top left).  The offsets are read on the GPU, so the host checks only
    their shape and type: each is clamped to its packed total and a sequence's end to at
    least its start (a bad table gives short or empty sequences, never an access past the
    tensors); rows past ``max_seqlen_q`` are not computed (their ``out`` rows stay 0 and
    ``lse`` -inf); a row without keys gets ``out`` 0 and ``lse`` -inf.  Other sequences'
    rows of k and v are read by the last KV tile of a sequence and masked (they must be
    finite numbers, as any tensor's).  Forward only (written after the session's last GPU
    run: its GPU tests have not run yet); :func:`nvatom.torch_ops.flash_attn_varlen_func`
    is the differentiable entry point."""
    import torch

    pv, views = _varlen_problem(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
                                max_seqlen_k, causal, scale, softcap, window)
    p, batch = pv, pv.batch
    total_q, total_k = int(q.shape[0]), int(k.shape[0])
    out = torch.zeros((total_q, p.heads, p.head_dim), dtype=q.dtype, device=q.device)
    lse = torch.full((p.heads, total_q), float("-inf"), dtype=torch.float32, device=q.device)
    if total_q == 0 or max_seqlen_q == 0 or batch == 0:
        return out, lse
    cap = _capability(p.device)
    if cap != (9, 0):
        raise AttentionError(f"nvatom.attention needs compute capability 9.0 (sm_90a: WGMMA, "
                             f"TMA), the tensors are on a {cap[0]}.{cap[1]} device")
    cfg = dataclasses.replace(default_config(p.dtype, p.head_dim, causal,
                                             softcap=bool(p.softcap), window=pv.windowed),
                              epilogue="direct", varlen=True)
    maps = tensor_maps(cfg, *((int(t.data_ptr()), tuple(t.shape), tuple(t.stride()))
                              for t in views))
    raw = [_TMAPS.get(tm) for tm in maps]
    raw.append(raw[0])  # tmap_o: unused by the direct epilogue
    f = load_function(cfg, lambda: assemble(build_attention_sm90(cfg).emit(),
                                            "sm_90a").cubin,
                      cfg.name, p.device, cfg.smem_bytes, False)
    grid, block, smem = launch_geometry(cfg, batch, p.heads, max_seqlen_q)
    params: list[Any] = [(ctypes.c_uint64 * 16).from_buffer_copy(r) for r in raw]
    params += [ctypes.c_uint64(int(out.data_ptr())), ctypes.c_uint64(int(lse.data_ptr())),
               ctypes.c_uint32(max_seqlen_q), ctypes.c_uint32(pv.seqlen_k),
               ctypes.c_uint32(p.heads), ctypes.c_uint32(p.group)]
    params += _scale_window_params(pv)
    params += [ctypes.c_uint64(int(cu_seqlens_q.data_ptr())),
               ctypes.c_uint64(int(cu_seqlens_k.data_ptr())),
               ctypes.c_uint32(total_q), ctypes.c_uint32(total_k)]
    dev = p.device
    prepare_driver_launch(f, grid, block, smem, (1, 1, 1), params,
                          lambda: torch.cuda.current_stream(dev).cuda_stream,
                          keep=(q, k, v, out, lse, cu_seqlens_q, cu_seqlens_k))()
    return out, lse


def _varlen_problem(q: Any, k: Any, v: Any, cu_seqlens_q: Any, cu_seqlens_k: Any,
                    max_seqlen_q: int, max_seqlen_k: int, causal: bool, scale: float | None,
                    softcap: float, window: Any) -> tuple[AttentionProblem, list[Any]]:
    """The checks :func:`attention_varlen` and :func:`attention_varlen_backward` share: the
    packed tensors (as one (1, H, total, D) batch each, returned), the offsets' type and
    count, the maximum lengths; the problem with B = the sequences and the maxima as
    lengths."""
    import torch

    for name, t in (("q", q), ("k", k), ("v", v)):
        if getattr(t, "dim", lambda: 0)() != 3:
            raise AttentionError(f"{name} has shape {tuple(getattr(t, 'shape', ()))}: "
                                 "varlen attention takes (total, heads, head_dim)")
    views = [t.unsqueeze(0).transpose(1, 2) for t in (q, k, v)]  # (1, H, total, D)
    for name, mx in (("max_seqlen_q", max_seqlen_q), ("max_seqlen_k", max_seqlen_k)):
        if isinstance(mx, bool) or not isinstance(mx, int) or not 0 <= mx < 2**31:
            raise AttentionError(f"{name} = {shown(mx)}: a non-negative int")
    p = check_inputs(*views, causal=causal, scale=scale, softcap=softcap, window=(-1, -1))
    batch = None
    for name, cu in (("cu_seqlens_q", cu_seqlens_q), ("cu_seqlens_k", cu_seqlens_k)):
        if (getattr(cu, "dim", lambda: 0)() != 1 or cu.dtype != torch.int32
                or cu.device != q.device or not cu.is_contiguous() or cu.numel() < 2):
            raise AttentionError(f"{name} must be a contiguous 1-D int32 tensor of batch + 1 "
                                 f"offsets on {q.device}, got "
                                 f"{getattr(cu, 'dtype', type(cu).__name__)} of shape "
                                 f"{tuple(getattr(cu, 'shape', ()))}")
        if batch is not None and cu.numel() - 1 != batch:
            raise AttentionError(f"cu_seqlens_q and cu_seqlens_k describe {batch} and "
                                 f"{cu.numel() - 1} sequences")
        batch = cu.numel() - 1
    assert batch is not None
    if batch > 65535:
        raise AttentionError(f"{batch} sequences: at most 65535 (the grid's z)")
    win = _check_window(window, 0, 1)  # per sequence the rule is the GPU's (rows keep 0)
    return AttentionProblem(batch, p.heads, p.kv_heads, max_seqlen_q, max(max_seqlen_k, 1),
                            p.head_dim, p.dtype, p.device, causal, p.scale, p.softcap,
                            win), views


def attention_varlen_backward(dout: Any, q: Any, k: Any, v: Any, out: Any, lse: Any,
                              cu_seqlens_q: Any, cu_seqlens_k: Any, max_seqlen_q: int,
                              max_seqlen_k: int, *, causal: bool = False,
                              scale: float | None = None, softcap: float = 0.0,
                              window: tuple[int, int] = (-1, -1),
                              dlse: Any = None) -> tuple[Any, Any, Any]:
    """``(dq, dk, dv)`` of :func:`attention_varlen` (packed, the shapes of q, k, v) in two
    launches (the preprocess and the backward kernel, ``varlen=True``: each CTA reads its
    sequence's offsets on the GPU, clamped as the forward does; the next sequence's keys are
    masked), no host synchronisation; ``out`` (total_q, H, D) and ``lse`` (H, total_q) are
    the forward's, ``dlse`` the lse's gradient (same shape) or None.  Head dims 64 and 128
    (others: refused).  Rows no sequence covers get zero gradients.  Written after the
    session's last GPU run: its GPU tests have not run yet."""
    import torch

    pv, views = _varlen_problem(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
                                max_seqlen_k, causal, scale, softcap, window)
    why = _bwd_kernel_refusal(pv)
    if why:
        raise AttentionError(f"the varlen backward kernel cannot run {pv!r}: {why}")
    total_q, total_k = int(q.shape[0]), int(k.shape[0])
    h, d = pv.heads, pv.head_dim
    for name, t, shape, dt in (("dout", dout, tuple(q.shape), q.dtype),
                               ("out", out, tuple(q.shape), q.dtype),
                               ("lse", lse, (h, total_q), torch.float32),
                               ("dlse", dlse, (h, total_q), torch.float32)):
        if t is not None and (tuple(t.shape) != shape or t.dtype != dt
                              or t.device != q.device):
            raise AttentionError(f"{name} must be a {shape} tensor of {dt} on {q.device}, "
                                 f"got {tuple(t.shape)} {t.dtype} on {t.device}")
    f32 = torch.float32
    dq_acc = torch.zeros((total_q, h, d), dtype=f32, device=q.device)
    dk = torch.zeros((total_k, pv.kv_heads, d), dtype=q.dtype, device=q.device)
    dv = torch.zeros_like(dk)
    if total_q == 0 or max_seqlen_q == 0 or pv.batch == 0:
        return dq_acc.to(q.dtype), dk, dv
    cap = _capability(pv.device)
    if cap != (9, 0):
        raise AttentionError(f"the attention backward kernel needs compute capability 9.0, "
                             f"the tensors are on a {cap[0]}.{cap[1]} device")
    rows = bwd_stats_rows(max_seqlen_q)
    stats = torch.empty((pv.batch, h, 2, rows), dtype=f32, device=q.device)
    do4, o4 = (_tma_ready(t.unsqueeze(0).transpose(1, 2)) for t in (dout, out))
    lse = lse.contiguous()
    dlse = None if dlse is None else dlse.contiguous()
    cu = [ctypes.c_uint64(int(cu_seqlens_q.data_ptr())), ctypes.c_uint32(total_q)]
    _run_bwd_pre(BwdPreConfig(pv.dtype, d, dlse is not None, varlen=True), pv, do4, o4, lse,
                 dlse, stats, dq_acc, max_seqlen_q, rows, cu, keep=(cu_seqlens_q,))
    cfg = dataclasses.replace(default_bwd_config(pv.dtype, d, causal, pv.windowed,
                                                 bool(pv.softcap)), varlen=True)
    cu = [ctypes.c_uint64(int(cu_seqlens_q.data_ptr())),
          ctypes.c_uint64(int(cu_seqlens_k.data_ptr())),
          ctypes.c_uint32(total_q), ctypes.c_uint32(total_k)]
    _run_bwd_kernel(cfg, pv, (*views, do4, stats, dq_acc.unsqueeze(0).transpose(1, 2)),
                    dq_acc, dk, dv, max_seqlen_q, max(max_seqlen_k, 1), cu,
                    keep=(cu_seqlens_q, cu_seqlens_k))
    return dq_acc.to(q.dtype), dk, dv


def _hashable(x: Any) -> Any:
    """``x`` as a cache-key part: a list becomes a tuple (the checks name anything odd)."""
    return tuple(x) if isinstance(x, list) else x


#: checked calls (q, k, v attributes, causal, scale) -> problem; and (that, out and lse
#: addresses) -> prepared launch.  At most _MAX_CALLS each, oldest dropped first.
_problems: dict[tuple[Any, ...], AttentionProblem] = {}
_launches: dict[tuple[Any, ...], Any] = {}
_MAX_CALLS = 128


def _remember(cache: dict[tuple[Any, ...], Any], key: tuple[Any, ...], value: Any) -> None:
    if len(cache) >= _MAX_CALLS:
        del cache[next(iter(cache))]
    cache[key] = value


class _AttentionModule(types.ModuleType):
    """This module, callable (as :mod:`nvatom.gemm`): calling it runs :func:`attention`."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return attention(*args, **kwargs)


sys.modules[__name__].__class__ = _AttentionModule


#: Elements of one (B, H, rows, Sk) float32 block of the backward's score matrices: the
#: query rows per step are as many as keep each of its four temporaries at 64 MiB.
BACKWARD_BLOCK_ELEMENTS = 1 << 24


def attention_backward(dout: Any, q: Any, k: Any, v: Any, out: Any, lse: Any, *,
                       causal: bool = False, scale: float | None = None,
                       dlse: Any = None, softcap: float = 0.0,
                       window: tuple[int, int] = (-1, -1),
                       backend: str | None = None,
                       out_grads: tuple[Any, Any, Any] | None = None,
                       config: AttentionBwdSm90Config | None = None) -> tuple[Any, Any, Any]:
    """``(dq, dk, dv)`` of :func:`attention` for the output gradient ``dout`` (and ``dlse``,
    the gradient of the log-sum-exp, where it is used), given the forward's ``out`` and
    ``lse``.

    ``backend``: ``"kernel"``, the SM90 backward kernel
    (:mod:`nvatom.kernels.sm90.attention_bwd`: head dims 64 and 128, causal or not, sliding
    windows, softcap, grouped query heads, any lengths); ``"reference"``,
    :func:`attention_backward_reference` (torch operations, every option); ``None`` (the
    default): the kernel where it applies, else the reference -- and the reference for
    softcap, whose kernel path has not run on a GPU yet (``"kernel"`` takes it).
    ``out_grads``: ``(dq, dk, dv)`` tensors (contiguous, q's dtype, the shapes of q, k, v) to
    write the gradients into (returned); else new ones.  ``config``: the kernel's
    configuration (benchmarks and tests; default
    :func:`~nvatom.kernels.sm90.attention_bwd_config.default_bwd_config`)."""
    p = check_inputs(q, k, v, causal=causal, scale=scale, softcap=softcap, window=window)
    if out_grads is not None:
        _check_out_grads(out_grads, q, k, v)
    if backend not in (None, "kernel", "reference"):
        raise AttentionError(f"backend = {shown(backend)} is not 'kernel', 'reference' or None")
    why = _bwd_kernel_refusal(p)
    if config is not None and (config.dtype, config.head_dim, config.causal, config.window,
                               config.softcap) != (p.dtype, p.head_dim, p.causal, p.windowed,
                                                   bool(p.softcap)):
        raise AttentionError(f"config {config.name} does not fit {p!r}")
    if (backend == "kernel" or config is not None) and why:
        raise AttentionError(f"the backward kernel cannot run {p!r}: {why}")
    # the kernel's softcap path is ptxas-clean and CPU-checked but has not run on a GPU
    # yet: only an explicit backend="kernel" (or config) takes it
    opt_in = backend == "kernel" or config is not None
    if backend == "reference" or why or (p.softcap and not opt_in):
        grads = attention_backward_reference(dout, q, k, v, out, lse, causal=causal,
                                             scale=scale, dlse=dlse, softcap=softcap,
                                             window=window)
        if out_grads is None:
            return grads
        for dst, src in zip(out_grads, grads, strict=True):
            dst.copy_(src)
        return tuple(out_grads)  # type: ignore[return-value]
    return _backward_kernel(dout, q, k, v, out, lse, dlse, p, out_grads, config)


def _check_out_grads(grads: Any, q: Any, k: Any, v: Any) -> None:
    try:
        dq, dk, dv = grads
    except (TypeError, ValueError):
        raise AttentionError(f"out_grads = {shown(grads)}: a tuple (dq, dk, dv) of "
                             "tensors") from None
    for name, g, like in (("dq", dq, q), ("dk", dk, k), ("dv", dv, v)):
        if not hasattr(g, "is_contiguous") or tuple(g.shape) != tuple(like.shape) or (
                g.dtype != like.dtype or g.device != like.device or not g.is_contiguous()):
            raise AttentionError(f"out_grads' {name} must be a contiguous "
                                 f"{tuple(like.shape)} tensor of {like.dtype} on "
                                 f"{like.device}")


def _bwd_kernel_refusal(p: AttentionProblem) -> str:
    """Why the backward kernel cannot run ``p`` ('' when it can)."""
    if p.head_dim not in BWD_HEAD_DIMS:
        return f"head_dim {p.head_dim} (it takes {', '.join(map(str, BWD_HEAD_DIMS))})"
    return ""


def _tma_ready(t: Any) -> Any:
    """``t`` if TMA can read it as it is (unit stride along D, 16-byte strides and base),
    else a contiguous copy."""
    st = t.stride()
    if (st[3] == 1 and all((x * 2) % 16 == 0 and x > 0 for x in st[:3])
            and int(t.data_ptr()) % 16 == 0):
        return t
    return t.contiguous()


def _backward_kernel(dout: Any, q: Any, k: Any, v: Any, out: Any, lse: Any, dlse: Any,
                     p: AttentionProblem, grads: Any = None,
                     config: AttentionBwdSm90Config | None = None) -> tuple[Any, Any, Any]:
    """The SM90 backward: the preprocess kernel (:mod:`~nvatom.kernels.sm90.attention_bwd_pre`:
    the stats ``-lse log2(e)`` and ``rowsum(dO * O) - dlse``, pad rows -inf and 0, and the
    zeroed f32 dQ accumulator), the backward kernel (dK, dV in q's dtype; ``scale dS K``
    reduced into the accumulator), then the accumulator rounded to q's dtype."""
    import torch

    b, h, sq, d = p.batch, p.heads, p.seqlen_q, p.head_dim
    for name, t, shape in (("dout", dout, (b, h, sq, d)), ("out", out, (b, h, sq, d)),
                           ("lse", lse, (b, h, sq)), ("dlse", dlse, (b, h, sq))):
        if t is not None and tuple(t.shape) != shape:
            raise AttentionError(f"{name} has shape {tuple(t.shape)}, expected {shape}")
    for name, t in (("dout", dout), ("out", out)):
        if t.dtype != q.dtype or t.device != q.device:
            raise AttentionError(f"{name} is {t.dtype} on {t.device}; it must match q "
                                 f"({q.dtype} on {q.device})")
    cap = _capability(p.device)
    if cap != (9, 0):
        raise AttentionError(f"the attention backward kernel needs compute capability 9.0, "
                             f"the tensors are on a {cap[0]}.{cap[1]} device")
    f32 = torch.float32
    dq_acc = torch.empty((b, h, sq, d), dtype=f32, device=q.device)  # zeroed by the preprocess
    if grads is not None:
        dq, dk, dv = grads
    else:
        dq = None
        dk = torch.empty((b, p.kv_heads, p.seqlen_k, d), dtype=q.dtype, device=q.device)
        dv = torch.empty_like(dk)
    if sq == 0 or b * h == 0:
        dk.zero_()
        dv.zero_()
        if dq is None:
            return dq_acc.to(q.dtype), dk, dv
        dq.zero_()
        return dq, dk, dv
    rows = bwd_stats_rows(sq)
    stats = torch.empty((b, h, 2, rows), dtype=f32, device=q.device)
    dout, out = _tma_ready(dout), _tma_ready(out)
    lse = lse.to(f32).contiguous()
    dlse = None if dlse is None else dlse.to(f32).contiguous()
    _run_bwd_pre(BwdPreConfig(p.dtype, d, dlse is not None), p, dout, out, lse, dlse, stats,
                 dq_acc, sq, rows)
    cfg = config or default_bwd_config(p.dtype, d, p.causal, p.windowed, bool(p.softcap))
    _run_bwd_kernel(cfg, p, (q, k, v, dout, stats, dq_acc), dq_acc, dk, dv, sq, p.seqlen_k)
    if dq is None:
        return dq_acc.to(q.dtype), dk, dv  # the kernel applied the scale
    dq.copy_(dq_acc)
    return dq, dk, dv


def _scale_window_params(p: AttentionProblem, scale: bool = False) -> list[Any]:
    """The kernels' parameters after the lengths: ``scale_log2`` (softcap: ``softcap
    log2(e)``), with ``scale`` the scale itself (the backward), ``softcap_pre`` for softcap,
    then the window's edges (:func:`~nvatom.kernels.sm90.attention_launch.kernel_params`,
    :func:`~nvatom.kernels.sm90.attention_bwd_skeleton.bwd_kernel_params`)."""
    if p.softcap:
        c, pre = softcap_params(p.scale, p.softcap)
        out = [ctypes.c_float(c), *((ctypes.c_float(p.scale),) if scale else ()),
               ctypes.c_float(pre)]
    else:
        out = [ctypes.c_float(scale_log2(p.scale)),
               *((ctypes.c_float(p.scale),) if scale else ())]
    if p.windowed:
        out += [ctypes.c_uint32(x) for x in p.window_params()]
    return out


def _stream(dev: int) -> Any:
    import torch

    return lambda: int(torch.cuda.current_stream(dev).cuda_stream)


def _run_bwd_pre(pre: BwdPreConfig, p: AttentionProblem, dout: Any, out: Any, lse: Any,
                 dlse: Any, stats: Any, dq_acc: Any, seqlen_q: int, rows: int,
                 extra: Sequence[Any] = (), keep: tuple[Any, ...] = ()) -> None:
    """Launch the backward's preprocess kernel (:func:`pre_kernel_params`' order; ``extra``:
    the varlen parameters) on the current stream."""
    fpre = load_function(pre, lambda: assemble(build_attention_bwd_pre(pre).emit(),
                                               "sm_90a").cubin, pre.name, p.device, 0, False)
    params: list[Any] = []
    for t in (dout, out):
        params.append(ctypes.c_uint64(int(t.data_ptr())))
        params += [ctypes.c_uint64(int(x)) for x in t.stride()[:3]]
    params += [ctypes.c_uint64(int(t.data_ptr())) for t in (lse, lse if dlse is None else dlse,
                                                            stats, dq_acc)]
    params += [ctypes.c_uint32(x) for x in (p.heads, seqlen_q, rows,
                                            p.batch * p.heads * rows)]
    params += list(extra)
    grid, block, smem = pre_launch_geometry(pre, p.batch, p.heads, rows)
    prepare_driver_launch(fpre, grid, block, smem, (1, 1, 1), params, _stream(p.device),
                          keep=(dout, out, lse, dlse, stats, dq_acc, *keep))()


def _run_bwd_kernel(cfg: AttentionBwdSm90Config, p: AttentionProblem, maps_of: tuple[Any, ...],
                    dq_acc: Any, dk: Any, dv: Any, seqlen_q: int, seqlen_k: int,
                    extra: Sequence[Any] = (), keep: tuple[Any, ...] = ()) -> None:
    """Launch the backward kernel (:func:`bwd_kernel_params`' order) on the current stream:
    ``maps_of`` are the (B, H, S, D) views of q, k, v, dout, the stats and the dQ
    accumulator its tensor maps describe; ``extra``: the varlen parameters."""
    maps = bwd_tensor_maps(cfg, *((int(t.data_ptr()), tuple(t.shape), tuple(t.stride()))
                                  for t in maps_of))
    raw = [_TMAPS.get(tm) for tm in maps]
    f = load_function(cfg, lambda: assemble(build_attention_bwd_sm90(cfg).emit(),
                                            "sm_90a").cubin,
                      cfg.name, p.device, cfg.smem_bytes, False)
    grid, block, smem = bwd_launch_geometry(cfg, p.batch, p.kv_heads, seqlen_k)
    params: list[Any] = [(ctypes.c_uint64 * 16).from_buffer_copy(r) for r in raw]
    params += [ctypes.c_uint64(int(t.data_ptr())) for t in (dq_acc, dk, dv)]
    params += [ctypes.c_uint32(x) for x in (seqlen_q, p.seqlen_k, p.heads, p.group)]
    params += _scale_window_params(p, scale=True)
    params += list(extra)
    prepare_driver_launch(f, grid, block, smem, (1, 1, 1), params, _stream(p.device),
                          keep=(*maps_of, dq_acc, dk, dv, *keep))()


def attention_backward_reference(dout: Any, q: Any, k: Any, v: Any, out: Any, lse: Any, *,
                                 causal: bool = False, scale: float | None = None,
                                 dlse: Any = None, softcap: float = 0.0,
                                 window: tuple[int, int] = (-1, -1)) -> tuple[Any, Any, Any]:
    """``(dq, dk, dv)`` as :func:`attention_backward`, in torch operations: every option
    (softcap, windows, any head dim) and the independent check of the kernel.

    FlashAttention's backward algorithm in float32,
    blocked over the query rows so that its extra memory is linear in the sequence length
    (:data:`BACKWARD_BLOCK_ELEMENTS` per temporary): per block ``P = exp(scale q k^T -
    lse)`` (causal: zero above the diagonal, aligned at the top left as the forward),
    ``dV += P^T dO``, ``dS = P (dO V^T - rowsum(dO * O) + dlse)``, ``dQ = scale dS K``,
    ``dK += scale dS^T Q`` (with ``softcap`` c the scores are ``c tanh(scale q k^T / c)`` and
    dS carries their derivative ``1 - tanh^2``); grouped-query heads' dK and dV summed over
    each KV head's group.
    Every step is a torch operation with no host synchronisation (CUDA-graph capturable)."""
    import torch

    p = check_inputs(q, k, v, causal=causal, scale=scale, softcap=softcap, window=window)
    b, h, sq, d = p.batch, p.heads, p.seqlen_q, p.head_dim
    hk, sk, grp = p.kv_heads, p.seqlen_k, p.group
    for name, t, shape in (("dout", dout, (b, h, sq, d)), ("out", out, (b, h, sq, d)),
                           ("lse", lse, (b, h, sq)), ("dlse", dlse, (b, h, sq))):
        if t is not None and tuple(t.shape) != shape:
            raise AttentionError(f"{name} has shape {tuple(t.shape)}, expected {shape}")
    f32 = torch.float32
    kf = k.to(f32).repeat_interleave(grp, dim=1)  # (B, H, Sk, D): each query head's KV
    vf = v.to(f32).repeat_interleave(grp, dim=1)
    dq = torch.empty((b, h, sq, d), dtype=f32, device=q.device)
    dk = torch.zeros((b, h, sk, d), dtype=f32, device=q.device)
    dv = torch.zeros((b, h, sk, d), dtype=f32, device=q.device)
    rowsum = (dout.to(f32) * out.to(f32)).sum(-1)  # (B, H, Sq)
    if dlse is not None:
        rowsum = rowsum - dlse.to(f32)
    step = max(1, min(sq, BACKWARD_BLOCK_ELEMENTS // max(1, b * h * sk)))
    cols = torch.arange(sk, device=q.device)
    for i0 in range(0, sq, step):
        i1 = min(sq, i0 + step)
        qb, dob = q[:, :, i0:i1].to(f32), dout[:, :, i0:i1].to(f32)
        sb = torch.matmul(qb, kf.transpose(-1, -2)) * p.scale
        if p.softcap:
            tb = torch.tanh(sb / p.softcap)
            sb = tb * p.softcap
        pb = torch.exp(sb - lse[:, :, i0:i1, None].to(f32))
        rows = torch.arange(i0, i1, device=q.device)
        if causal:
            pb = pb.masked_fill(cols[None, :] > rows[:, None], 0.0)
        if p.window[0] >= 0:
            pb = pb.masked_fill(cols[None, :] < rows[:, None] - p.window[0], 0.0)
        if p.window[1] >= 0:
            pb = pb.masked_fill(cols[None, :] > rows[:, None] + p.window[1], 0.0)
        dv += torch.matmul(pb.transpose(-1, -2), dob)
        ds = pb * (torch.matmul(dob, vf.transpose(-1, -2)) - rowsum[:, :, i0:i1, None])
        if p.softcap:
            ds = ds * (1.0 - tb * tb)
        dq[:, :, i0:i1] = torch.matmul(ds, kf) * p.scale
        dk += torch.matmul(ds.transpose(-1, -2), qb) * p.scale
    dk = dk.view(b, hk, grp, sk, d).sum(2)
    dv = dv.view(b, hk, grp, sk, d).sum(2)
    return dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)
