"""Host time per call of ``nvatom.grouped_gemm`` (no synchronisation inside the timed loop, a
small problem so the GPU keeps up): the call cache (``out`` given, offsets as a CPU tensor or a
list), the checked path (call cache cleared every call) and ``torch._grouped_mm``.

    PYTHONPATH=src python3 bench/gemm_grouped_host.py
"""

from __future__ import annotations

import time
from typing import Any

import torch

import nvatom
import nvatom.gemm as ng

g, n, k = 8, 256, 256
ends = [128 * (i + 1) for i in range(g)]
a = torch.randn(ends[-1], k, device="cuda").to(torch.bfloat16)
b = torch.randn(g, k, n, device="cuda").to(torch.bfloat16)
out = torch.empty(ends[-1], n, device="cuda", dtype=torch.bfloat16)
offs_h = torch.tensor(ends, dtype=torch.int32)
offs_d = offs_h.cuda()
nvatom.grouped_gemm(a, b, offs_h, out=out)
torch._grouped_mm(a, b, offs=offs_d)
torch.cuda.synchronize()


def per_call(fn: Any, reps: int = 300) -> float:
    best = []
    for _ in range(3):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(reps):
            fn()
        best.append((time.perf_counter() - t0) / reps * 1e6)
        torch.cuda.synchronize()
    return min(best)


def checked() -> None:
    ng.CACHES.grouped_fast.clear()
    nvatom.grouped_gemm(a, b, offs_h, out=out)


fast = per_call(lambda: nvatom.grouped_gemm(a, b, offs_h, out=out))
lst = per_call(lambda: nvatom.grouped_gemm(a, b, ends, out=out))
print(f"host us/call: nvatom fast {fast:.1f}, nvatom list {lst:.1f}, "
      f"nvatom checked {per_call(checked):.1f}, "
      f"torch._grouped_mm {per_call(lambda: torch._grouped_mm(a, b, offs=offs_d)):.1f}")
