"""nvatom: an open, pure-Python atom layer for NVIDIA tensor cores.

``import nvatom`` loads nothing but this file: the GEMM (:mod:`nvatom.gemm`, which pulls in
the kernels, the PTX builder and the runtime with numpy) is imported the first time
``nvatom.gemm`` is looked up (PEP 562 module ``__getattr__``), so ``import nvatom.layout``
costs only the layout algebra (``bench/import_time.py`` measures both).
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

__all__ = ["__version__", "attention", "gemm", "grouped_gemm", "grouped_gemm_masked"]


def __getattr__(name: str) -> Any:
    """``nvatom.gemm`` / ``nvatom.grouped_gemm`` / ``nvatom.grouped_gemm_masked`` /
    ``nvatom.attention``: imported on first use."""
    if name == "gemm":
        # the module nvatom/gemm.py, which is callable (``nvatom.gemm(a, b)`` runs its
        # ``gemm``): one object, however it is reached (``import nvatom.gemm as g`` too)
        return importlib.import_module("nvatom.gemm")
    if name == "attention":  # the same, for nvatom.attention (nvatom/attention.py)
        from nvatom.attention import attention

        globals()["attention"] = attention
        return attention
    if name in ("grouped_gemm", "grouped_gemm_masked"):
        from nvatom.gemm import grouped_gemm, grouped_gemm_masked

        fn = grouped_gemm if name == "grouped_gemm" else grouped_gemm_masked
        globals()[name] = fn
        return fn
    raise AttributeError(f"module 'nvatom' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
