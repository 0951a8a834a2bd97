"""Host side of the SM90 GEMM written in the IR (tests/ir/gemm_sm90.mlir), shared by
tests/gpu/test_ir_gemm_gpu.py and bench/ir_gemm.py: lower the file (what ``nvatom compile``
does), load it through the runtime, encode its three hoisted tensor maps from the lowering's
:class:`nvatom.ir.lower.TmaParam` facts (box and swizzle from the partitions) and launch a
persistent grid of min(tiles, SMs) CTAs with the dynamic shared memory the lowering reports.

The kernel computes ``d = a @ bt.T`` for bf16 ``a`` (M x K, row-major), ``bt`` (N x K,
row-major: B K-major) and bf16 ``d`` (M x N, row-major).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any

IR_FILE = Path(__file__).resolve().parent.parent / "ir" / "gemm_sm90.mlir"
BLOCK_M, BLOCK_N = 128, 256  # the tile of the .mlir file


@functools.cache
def lowered(target: str = "sm_90a") -> tuple[str, Any]:
    """(PTX, KernelInfo) of the IR GEMM."""
    from nvatom.ir import driver
    from nvatom.ir.lower import lower

    mod = driver.parse(IR_FILE.read_text(), IR_FILE.name)
    out = lower(mod, driver.verify(mod, target))
    (info,) = out.kernels
    return out.ptx, info


@functools.cache
def _kernel(target: str) -> Any:
    from nvatom.runtime.launch import KernelSource, get_kernel

    ptx, info = lowered(target)
    src = KernelSource(f"ir:gemm_sm90:{hash(ptx)}", info.name, info.ptx_params,
                       lambda _t, ptx=ptx: ptx)
    return get_kernel(src, target, backend="driver")


def prepare(a: Any, bt: Any, d: Any, target: str = "sm_90a") -> Callable[[], None]:
    """A zero-argument launch of ``d = a @ bt.T`` on torch's current stream (maps encoded
    once)."""
    import torch

    from nvatom.descriptors.tma import TensorMap
    from nvatom.runtime.launch import ByValue, PackedParams

    m, k = a.shape
    n = bt.shape[0]
    assert bt.shape[1] == k and tuple(d.shape) == (m, n)
    for t in (a, bt, d):
        assert t.dtype == torch.bfloat16 and t.is_contiguous() and t.data_ptr() % 16 == 0
    _, info = lowered(target)
    ta, tb, td = info.tma
    maps = [
        TensorMap("tiled", "bfloat16", a.data_ptr(), (k, m), (k * 2,), box_dims=ta.box,
                  swizzle=ta.swizzle_bytes, l2_promotion="256B"),
        TensorMap("tiled", "bfloat16", bt.data_ptr(), (k, n), (k * 2,), box_dims=tb.box,
                  swizzle=tb.swizzle_bytes, l2_promotion="256B"),
        TensorMap("tiled", "bfloat16", d.data_ptr(), (n, m), (n * 2,), box_dims=td.box,
                  swizzle=td.swizzle_bytes),
    ]
    blobs = [ByValue(tm.encode_with_driver()) for tm in maps]
    kern = _kernel(target)
    sms = torch.cuda.get_device_properties(a.device).multi_processor_count
    tiles = -(-m // BLOCK_M) * -(-n // BLOCK_N)
    launcher = kern.launcher(min(tiles, sms), info.threads, shmem=info.dynamic_shared)
    params = PackedParams.of(info.ptx_params, [a.data_ptr(), bt.data_ptr(), d.data_ptr(),
                                               m, n, k, *blobs])
    keep = (a, bt, d, params)

    def run() -> None:
        launcher(keep[3], torch.cuda.current_stream(a.device).cuda_stream)

    return run
