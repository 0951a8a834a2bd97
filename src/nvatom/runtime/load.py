"""Run a kernel built with :mod:`nvatom.ptx.builder` (or any PTX): its :class:`KernelSource`,
loaded.

:func:`kernel_source` names one kernel of a :class:`~nvatom.ptx.builder.Module` (or of PTX
text with its parameter list, e.g. what :func:`nvatom.ir.lower.lower` returns) for the
runtime's caches: the key is a hash of the PTX text, so an edited kernel is a new entry.
:func:`load_kernel` assembles it for a target through
:func:`nvatom.runtime.launch.get_kernel` (memory and disk caches) and loads it on a device.
The PTX's own ``.target`` may be older than the one assembled for: PTX for a plain target
runs on newer GPUs (``Target.runs_on``), so an ``sm_80`` module assembles for ``sm_90a``.

Source: CUDA Driver API, "Module Management" (what get_kernel does).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from nvatom.errors import NvatomError
from nvatom.ptx.builder import Module
from nvatom.runtime.launch import KernelSource, LoadedKernel, get_kernel, params_of

__all__ = ["kernel_source", "load_kernel"]


def _pick(module: Module, name: str | None) -> tuple[str, tuple[tuple[str, str], ...]]:
    names = ", ".join(k.name for k in module.kernels) or "none"
    if name is None:
        if len(module.kernels) != 1:
            raise NvatomError(f"the module has {len(module.kernels)} kernels ({names}); "
                              "name one")
        return module.kernels[0].name, params_of(module.kernels[0])
    for k in module.kernels:
        if k.name == name:
            return k.name, params_of(k)
    raise NvatomError(f"the module has no kernel '{name}' (kernels: {names})")


def kernel_source(module: Module | str, name: str | None = None, *,
                  params: Sequence[tuple[str, str]] | None = None) -> KernelSource:
    """The :class:`KernelSource` of kernel ``name`` of ``module`` (default: its only one).

    ``module`` may be PTX text; then ``name`` and ``params`` ((name, PTX type) pairs, as
    ``KernelInfo.ptx_params`` of the IR lowering) are required."""
    if isinstance(module, Module):
        if params is not None:
            raise NvatomError("params are read from the module's kernel; pass them only "
                              "with PTX text")
        name, params = _pick(module, name)
        ptx = module.emit()
    else:
        if name is None or params is None:
            raise NvatomError("PTX text needs the kernel's name and params ((name, type) pairs)")
        ptx = module
    key = "ptx:" + hashlib.sha256(ptx.encode()).hexdigest()
    return KernelSource(key, name, tuple((str(n), str(t)) for n, t in params),
                        lambda _target: ptx)


def load_kernel(module: Module | str, target: str, name: str | None = None, *,
                params: Sequence[tuple[str, str]] | None = None,
                device: int = 0) -> LoadedKernel:
    """Kernel ``name`` of ``module`` (see :func:`kernel_source`) assembled for ``target``
    (e.g. the GPU's ``device_target(...).name``) and loaded on ``device``: call
    ``.launch(grid, block, args)`` on it (pointers as ints, e.g. ``tensor.data_ptr()``)."""
    return get_kernel(kernel_source(module, name, params=params), target, device=device)
