"""nvatom: an open, pure-Python atom layer for NVIDIA tensor cores."""

from __future__ import annotations

__version__ = "0.1.0"

from nvatom.gemm import gemm

__all__ = ["__version__", "gemm"]
