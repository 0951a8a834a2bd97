"""Torch tensors as kernel arguments: checked pointers, element types, shapes and strides.

A kernel reads raw addresses, so every property it relies on is checked on the host first and
a violation raises :class:`TensorArgumentError` naming the argument and the value: a CPU
tensor, an element type the kernel does not take, a base address or row stride that breaks
the kernel's vector width (cp.async and TMA move 16-byte chunks), a tensor whose innermost
stride is not 1 (or, for transposed operands, whose outermost is not).

Only duck typing is used (``.device``, ``.dtype``, ``.shape``, ``.stride()``, ``.data_ptr()``,
``.element_size()``), so the checks run and are tested without torch; :func:`current_stream`,
:func:`stream_handle` (for a torch stream) and :func:`from_dlpack` (for a non-torch array) are
the functions that import torch.

DLPack (the Python array API's ``__dlpack__`` protocol): an array that is not a torch tensor
but exports ``__dlpack__`` (a CuPy array, a JAX or numba device array) is wrapped with
``torch.from_dlpack``, which shares its memory and, through ``__dlpack__(stream=...)``, orders
the producer's pending work before torch's current stream.

torch dtype names map to nvatom element types (:mod:`nvatom.dtypes`): ``bfloat16`` -> ``bf16``,
``float16`` -> ``f16``, ``float32`` -> ``f32``, ``float8_e4m3fn`` -> ``e4m3``, ``float8_e5m2``
-> ``e5m2``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Any

from nvatom.dtypes import dtype
from nvatom.errors import NvatomError

__all__ = [
    "ELEMENT_BYTES",
    "TORCH_DTYPES",
    "TensorArgumentError",
    "TensorInfo",
    "check_matrix",
    "current_stream",
    "dtype_name",
    "from_dlpack",
    "stream_handle",
    "torch_dtype",
]

#: torch dtype name (``str(t.dtype)`` without ``torch.``) -> nvatom element type.
TORCH_DTYPES: dict[str, str] = {
    "bfloat16": "bf16",
    "float16": "f16",
    "float32": "f32",
    "float8_e4m3fn": "e4m3",
    "float8_e5m2": "e5m2",
}
#: nvatom element type -> bytes per element (the storage width of :mod:`nvatom.dtypes`).
ELEMENT_BYTES: dict[str, int] = {t: dtype(t).storage_bits // 8 for t in TORCH_DTYPES.values()}
_BYTES = ELEMENT_BYTES


class TensorArgumentError(NvatomError, ValueError):
    """A tensor a kernel cannot take as given (device, dtype, shape, alignment, strides)."""


@dataclasses.dataclass(frozen=True, slots=True)
class TensorInfo:
    """What a kernel needs to know of a 2-D tensor argument."""

    name: str
    ptr: int
    dtype: str  # nvatom element type
    shape: tuple[int, int]
    strides: tuple[int, int]  # in elements
    device: int
    major: str  # "row": stride (ld, 1); "col": stride (1, ld)

    @property
    def ld(self) -> int:
        """The leading dimension: the stride of the non-contiguous dimension, in elements."""
        return self.strides[0] if self.major == "row" else self.strides[1]

    @property
    def element_bytes(self) -> int:
        return _BYTES[self.dtype]

    @property
    def lines(self) -> int:
        """How many rows (row-major) or columns (column-major) are stored ``ld`` apart."""
        return self.shape[0] if self.major == "row" else self.shape[1]

    @property
    def inner(self) -> int:
        """The contiguous extent: elements per line."""
        return self.shape[1] if self.major == "row" else self.shape[0]

    def with_ld(self, ld: int) -> TensorInfo:
        """The same operand with leading stride ``ld`` (for one line, whose stride no access
        uses: the kernels' own rules then decide it)."""
        strides = (ld, 1) if self.major == "row" else (1, ld)
        return dataclasses.replace(self, strides=strides)


_dtype_cache: dict[Any, str] = {}


def dtype_name(dtype: Any) -> str:
    """nvatom element type of a torch dtype (or its name); raises for one we do not map."""
    hit = _dtype_cache.get(dtype)
    if hit is not None:
        return hit
    text = str(dtype).removeprefix("torch.")
    try:
        name = TORCH_DTYPES[text]
    except KeyError:
        raise TensorArgumentError(
            f"torch dtype '{text}' has no nvatom element type (known: "
            f"{', '.join(TORCH_DTYPES)})") from None
    _dtype_cache[dtype] = name
    return name


def torch_dtype(name: str) -> Any:
    """The torch dtype of an nvatom element type name (imports torch)."""
    import torch

    for tname, ours in TORCH_DTYPES.items():
        if ours == name:
            return getattr(torch, tname)
    raise TensorArgumentError(f"element type '{name}' has no torch dtype "
                              f"(known: {', '.join(TORCH_DTYPES.values())})")


def _type_name(t: Any) -> str:
    cls = type(t)
    return cls.__qualname__ if cls.__module__ == "builtins" else \
        f"{cls.__module__}.{cls.__qualname__}"


def _device_index(t: Any, name: str) -> int:
    if not (hasattr(t, "data_ptr") and hasattr(t, "stride") and hasattr(t, "device")):
        raise TensorArgumentError(
            f"{name} is a {_type_name(t)}, not a torch tensor: nvatom's kernels take torch CUDA "
            f"tensors (torch.Tensor on a 'cuda' device), e.g. torch.as_tensor({name}, "
            "dtype=torch.bfloat16, device='cuda')")
    dev = getattr(t, "device", None)
    kind = getattr(dev, "type", None)
    if kind != "cuda":
        raise TensorArgumentError(
            f"{name} is on device '{dev}', not a CUDA device; move it with {name}.cuda()")
    idx = getattr(dev, "index", None)
    return 0 if idx is None else int(idx)


def check_matrix(
    t: Any,
    name: str,
    *,
    dtypes: Iterable[str],
    majors: Iterable[str] = ("row",),
    align_bytes: int = 16,
    device: int | None = None,
) -> TensorInfo:
    """Check that ``t`` is a 2-D CUDA tensor a kernel can read or write directly.

    ``dtypes``: accepted nvatom element types.  ``majors``: accepted storage orders, "row"
    (unit stride along dimension 1) and/or "col" (unit stride along dimension 0).
    ``align_bytes``: the base address and the leading-dimension stride in bytes must be
    multiples of it.  ``device``: the CUDA device index the other arguments are on.
    """
    allowed = tuple(dtypes)
    dev = _device_index(t, name)
    if device is not None and dev != device:
        raise TensorArgumentError(f"{name} is on cuda:{dev}, the other operands on cuda:{device}")
    dt = dtype_name(getattr(t, "dtype", None))
    if dt not in allowed:
        raise TensorArgumentError(
            f"{name} has dtype {str(t.dtype).removeprefix('torch.')} ({dt}); this kernel "
            f"takes {', '.join(allowed)}")
    shape = tuple(int(s) for s in t.shape)
    if len(shape) != 2:
        raise TensorArgumentError(f"{name} must be a 2-D matrix, got shape {shape}")
    strides = tuple(int(s) for s in t.stride())
    if 0 in shape:  # no element is read or written: any strides will do
        return TensorInfo(name, int(t.data_ptr()), dt, shape, strides, dev,  # type: ignore[arg-type]
                          "row")
    order = tuple(majors)
    if strides[1] == 1 or (shape[1] == 1 and strides[0] != 1):
        major = "row"
    elif strides[0] == 1 or shape[0] == 1:
        major = "col"
    else:
        major = ""
    if major not in order:
        want = " or ".join({"row": "row-major (stride (ld, 1))",
                            "col": "column-major (stride (1, ld))"}[m] for m in order)
        raise TensorArgumentError(
            f"{name} with shape {shape} and strides {strides} is not {want}; pass "
            f"{name}.contiguous()")
    esize = _BYTES[dt]
    ptr = int(t.data_ptr())
    if ptr % align_bytes:
        raise TensorArgumentError(
            f"{name}'s data pointer 0x{ptr:x} is not {align_bytes}-byte aligned (a view with an "
            f"offset?); pass {name}.clone()")
    ld = strides[0] if major == "row" else strides[1]
    rows = shape[0] if major == "row" else shape[1]
    if rows > 1 and (ld * esize) % align_bytes:
        raise TensorArgumentError(
            f"{name}'s leading stride {ld} elements ({ld * esize} bytes) is not a multiple of "
            f"{align_bytes} bytes; pad the {'rows' if major == 'row' else 'columns'} to a "
            f"multiple of {max(1, align_bytes // esize)} elements")
    return TensorInfo(name, ptr, dt, shape, strides, dev, major)  # type: ignore[arg-type]


def current_stream(device: int | None = None) -> int:
    """The raw ``CUstream`` handle of torch's current stream on ``device``."""
    import torch

    return int(torch.cuda.current_stream(device).cuda_stream)


def stream_handle(stream: Any = None, device: int | None = None) -> int:
    """A raw ``CUstream`` handle: ``None`` is torch's current stream on ``device`` (the
    caller's stream; the legacy default stream 0 when torch is not installed); an int is taken
    as a handle; a ``torch.cuda.Stream`` gives ``.cuda_stream``; an object of the CUDA stream
    protocol (``__cuda_stream__() -> (version, handle)``: cuda.core, CuPy >= 13) or with a
    ``.ptr`` (CuPy) gives that handle."""
    if stream is None:
        try:
            return current_stream(device)
        except ImportError:
            return 0
    if isinstance(stream, bool):
        raise TensorArgumentError(f"stream = {stream!r} is not a CUDA stream")
    if isinstance(stream, int):
        if stream < 0:
            raise TensorArgumentError(f"stream = {stream} is not a CUDA stream handle")
        return stream
    proto = getattr(stream, "__cuda_stream__", None)
    if callable(proto):
        got = proto()
        if isinstance(got, tuple) and len(got) == 2:
            return int(got[1])
    for attr in ("cuda_stream", "ptr", "handle"):
        v = getattr(stream, attr, None)
        if isinstance(v, int) and not isinstance(v, bool):
            return v
    raise TensorArgumentError(
        f"stream is a {_type_name(stream)}: a stream is a raw CUstream handle (int), a "
        "torch.cuda.Stream, or an object with __cuda_stream__ (cuda.core, CuPy)")


def from_dlpack(x: Any) -> Any:
    """``x`` as a torch tensor when it is not one but exports DLPack (``__dlpack__``: a CuPy
    array, a JAX or numba device array): ``torch.from_dlpack(x)``, sharing its memory, so a
    result written into it is seen by the producer too.  A torch tensor (anything with
    ``data_ptr``), ``None`` and any other object come back unchanged (the checks then name
    what is wrong); so does everything when torch is not installed."""
    if x is None or hasattr(x, "data_ptr") or not hasattr(x, "__dlpack__"):
        return x
    try:
        import torch
    except ImportError:
        return x
    return torch.from_dlpack(x)
