"""Shared test configuration: GPU detection and the sm_70 assembler."""

from __future__ import annotations

import functools

import pytest


@functools.lru_cache(maxsize=1)
def gpu_skip_reason() -> str | None:
    """None when an NVIDIA GPU is usable through cupy, else why not."""
    try:
        import cupy
    except Exception as e:  # ImportError, or a CUDA library failing to load
        return f"no NVIDIA GPU: cupy is not importable ({type(e).__name__})"
    try:
        n = cupy.cuda.runtime.getDeviceCount()
    except Exception as e:
        return f"no NVIDIA GPU: {type(e).__name__}: {e}"
    return None if n > 0 else "no NVIDIA GPU: device count is 0"


@functools.lru_cache(maxsize=1)
def sm70_skip_reason() -> str | None:
    from nvatom.errors import PtxasError
    from nvatom.runtime.ptxas import find_ptxas

    try:
        find_ptxas("sm_70")
    except PtxasError as e:
        return str(e)
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if "gpu" in item.keywords and (reason := gpu_skip_reason()):
            item.add_marker(pytest.mark.skip(reason=reason))
        if "sm70" in item.keywords and (reason := sm70_skip_reason()):
            item.add_marker(pytest.mark.skip(reason=reason))
