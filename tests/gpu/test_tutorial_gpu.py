"""docs/tutorial.md on the GPU: every block, the ```python gpu ones included, in order.

The GPU blocks load the tutorial's 64 x 64 x 64 bf16 tile kernel (4 warps of mma.sync
m16n8k16, operands straight from global memory) and the same kernel lowered from the IR,
launch them on random bf16 tiles with a NaN-poisoned output, and assert that every element
was written and matches the float64 torch product of the same values (relative to the
largest element, < 1e-5; f32 rounding of the sums is about 1e-7).  The builder path needs
torch only; the IR section also needs xDSL (the device's Python may lack it: docs/ir.md),
so it is a second test that skips without it.  Section 10 (a user epilogue on nvatom's SM90
GEMM, through the kernel builder and through ``nvatom.gemm``) needs an sm_90 GPU: its own
test runs its blocks alone and skips elsewhere, and the all-blocks test leaves it out there.
"""

from __future__ import annotations

import pytest

from tests.gpu.tutorial_blocks import blocks, run

pytestmark = pytest.mark.gpu
torch = pytest.importorskip("torch")

_IR_HEADING = "## 8. The same kernel in the IR"


def _ir_line() -> int:
    from tests.gpu.tutorial_blocks import TUTORIAL

    lines = TUTORIAL.read_text().splitlines()
    return lines.index(_IR_HEADING) + 1


def _typed_line() -> int:
    from tests.gpu.tutorial_blocks import TUTORIAL

    lines = TUTORIAL.read_text().splitlines()
    return next(i for i, ln in enumerate(lines, 1) if ln.startswith("## 9."))


def _user_line() -> int:
    from tests.gpu.tutorial_blocks import TUTORIAL

    lines = TUTORIAL.read_text().splitlines()
    return next(i for i, ln in enumerate(lines, 1) if ln.startswith("## 10."))


def _sm90() -> bool:
    return torch.cuda.get_device_capability() == (9, 0)


def _need_cuda() -> None:
    if not torch.cuda.is_available():
        pytest.skip("torch sees no CUDA device")
    if torch.cuda.get_device_capability() < (8, 0):
        pytest.skip("the tutorial's mma.sync bf16 atom needs sm_80 or newer")


def test_tutorial_builder_kernel_runs_and_matches_torch() -> None:
    _need_cuda()
    first = [b for b in blocks() if b.line < _ir_line()]
    assert any(b.gpu for b in first)
    ns, outs = run(first)
    assert "64x64x64 bf16 tile: max error" in outs[-1]
    assert ns["err"] < 1e-5 and bool(torch.isfinite(ns["d"]).all())


def test_tutorial_all_blocks_with_the_ir_kernel() -> None:
    _need_cuda()
    pytest.importorskip("xdsl", reason="xdsl==0.74.0 not installed (pip install .whl/*.whl)")
    # section 10 needs the SM90 GEMM (sm_90a): on another GPU it is left out
    ns, outs = run([b for b in blocks() if b.line < _user_line() or _sm90()])
    assert any("IR kernel: max error" in o for o in outs)
    assert ns["err_ir"] < 1e-5 and bool(torch.isfinite(ns["d_ir"]).all())
    assert ns["err9"] < 2.0 ** -8


def test_tutorial_typed_tensor_tile_runs_and_matches_torch() -> None:
    """Section 9 (shared memory, ldmatrix, bias + ReLU with typed tensors) after sections 1-7,
    without the IR section (no xDSL needed)."""
    _need_cuda()
    selected = [b for b in blocks()
                if b.line < _ir_line() or _typed_line() < b.line < _user_line()]
    ns, outs = run(selected)
    assert "tile + bias + ReLU: max error" in outs[-1]
    assert ns["err9"] < 2.0 ** -8 and bool(torch.isfinite(ns["d9"].double()).all())


def test_tutorial_user_epilogue_runs_and_matches_torch() -> None:
    """Section 10 on its own (its blocks import what they use): the leaky-ReLU hook after a
    bias through build_gemm_sm90 + prepare_gemm_sm90, and the scaled lower triangle
    (row, column and a column tensor) through nvatom.gemm(epilogue=...), each on a ragged
    1000 x 1032 x 256 bf16 problem against float64 torch, NaN-poisoned outputs."""
    _need_cuda()
    if not _sm90():
        pytest.skip("section 10 runs nvatom's SM90 GEMM: an sm_90 GPU (H100, H200)")
    ns, outs = run([b for b in blocks() if b.line > _user_line()])
    assert "bias + leaky ReLU epilogue: max error" in outs[-2]
    assert "scaled lower triangle: max error" in outs[-1]
    assert ns["err10"] < 2.0 ** -7 and ns["err10m"] < 2.0 ** -7
    assert bool(torch.isfinite(ns["d10"].double()).all())
