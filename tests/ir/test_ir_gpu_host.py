"""The host side of the IR GPU tests (tests/gpu/ir_kernels.py) on the CPU: every example those
tests lower still lowers, and its kernels take the parameters the shared launches pass
(``check_mma_sm80``: four pointers; ``check_copy_pipeline``: three; ``check_tma_round_trip``:
two pointers, five u32 and the two by-value tensor maps, each of 16-bit elements in the
row-major ``(n,m):(1,ld)`` form ``f16_maps`` encodes).  A broken helper or a changed example
is found here, not only on the GPU.
"""

from __future__ import annotations

import pytest

pytest.importorskip("xdsl")

from tests.gpu import ir_kernels as K

PTR, U32, TMAP = "u64", "u32", "b8[128]@128"  # a pointer, an integer, a CUtensorMap by value

# example, target, kernel -> the parameter kinds of the shared launch that runs it
LAUNCHES = {
    ("mma_sm80.mlir", "sm_80", "mma_m16n8k16_bf16"): (PTR,) * 4,
    ("copy_pipeline.mlir", "sm_90a", "copy_pipeline_f16"): (PTR,) * 3,
    ("copy_forms.mlir", "sm_90a", "copy_generic"): (PTR,) * 2,
    ("copy_forms.mlir", "sm_90a", "tiled_copy"): (PTR,) * 2,
    **{(f, "sm_90a", f[:-5]): (PTR,) * 2 + (U32,) * 5 + (TMAP,) * 2
       for f in ("tma_copy.mlir", "tma_shared_cta.mlir", "tma_prefetch.mlir")},
}


@pytest.mark.parametrize(("name", "target", "kernel"), sorted(LAUNCHES))
def test_shared_launch_matches_the_kernel(name: str, target: str, kernel: str) -> None:
    out = K.lower_example(name, target)
    info = {k.name: k for k in out.kernels}[kernel]
    assert tuple(kind for _, kind in info.ptx_params) == LAUNCHES[name, target, kernel]
    assert f".entry {kernel}" in out.ptx
    for t in info.tma:
        assert t.element_bits == 16 and t.gmem_layout == "(n,m):(1,ld)"
    assert len(info.tma) == LAUNCHES[name, target, kernel].count(TMAP)
