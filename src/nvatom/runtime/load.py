"""Run a kernel built with :mod:`nvatom.ptx.builder`: its :class:`KernelSource`, loaded.

:func:`kernel_source` names one kernel of a :class:`~nvatom.ptx.builder.Module` for the
runtime's caches (the key is a hash of the module's PTX text, so an edited kernel is a new
entry) with its parameter list; :func:`load_kernel` assembles the module for a target through
:func:`nvatom.runtime.launch.get_kernel` (memory and disk caches) and loads it on a device.
The PTX's own ``.target`` may be older than the one assembled for: PTX for a plain target
runs on newer GPUs (``Target.runs_on``), so an ``sm_80`` module assembles for ``sm_90a``.

Source: CUDA Driver API, "Module Management" (what get_kernel does).
"""

from __future__ import annotations

import hashlib

from nvatom.errors import NvatomError
from nvatom.ptx.builder import Module
from nvatom.runtime.launch import KernelSource, LoadedKernel, get_kernel, params_of

__all__ = ["kernel_source", "load_kernel"]


def kernel_source(module: Module, name: str | None = None) -> KernelSource:
    """The :class:`KernelSource` of kernel ``name`` of ``module`` (default: its only one)."""
    if name is None:
        if len(module.kernels) != 1:
            raise NvatomError(
                f"the module has {len(module.kernels)} kernels "
                f"({', '.join(k.name for k in module.kernels) or 'none'}); name one")
        kernel = module.kernels[0]
    else:
        found = [k for k in module.kernels if k.name == name]
        if not found:
            raise NvatomError(f"the module has no kernel '{name}' (kernels: "
                              f"{', '.join(k.name for k in module.kernels) or 'none'})")
        kernel = found[0]
    ptx = module.emit()
    key = "module:" + hashlib.sha256(ptx.encode()).hexdigest()
    return KernelSource(key, kernel.name, params_of(kernel), lambda _target: ptx)


def load_kernel(module: Module, target: str, name: str | None = None, *,
                device: int = 0) -> LoadedKernel:
    """Kernel ``name`` of ``module`` assembled for ``target`` (e.g. the GPU's
    ``device_target(...).name``) and loaded on ``device``: call ``.launch(grid, block,
    args)`` on it (pointers as ints, e.g. ``tensor.data_ptr()``)."""
    return get_kernel(kernel_source(module, name), target, device=device)
