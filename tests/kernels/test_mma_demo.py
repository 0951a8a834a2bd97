"""The demo kernel: its layout-derived addresses equal the PTX ISA fragment formulas, and it
assembles wherever mma.m16n8k16 exists."""

from __future__ import annotations

import pytest

from nvatom.kernels.mma_demo import DEMO_MMAS, build_demo_module, operand_memory_layout
from nvatom.layout import Layout, slice_and_offset
from nvatom.ptx.builder import PtxBuildError
from nvatom.runtime.ptxas import assemble


# PTX ISA, "Matrix Fragments for mma.m16n8k16 with floating point type" (16-bit A/B, f32 C/D):
# groupID = lane >> 2, threadID_in_group = lane % 4.
def isa_a(lane: int, i: int) -> tuple[int, int]:
    g, t = lane >> 2, lane % 4
    row = g + 8 * ((i // 2) % 2)
    col = t * 2 + (i & 1) + 8 * (i // 4)
    return row, col


def isa_b(lane: int, i: int) -> tuple[int, int]:  # (k, n)
    g, t = lane >> 2, lane % 4
    return t * 2 + (i & 1) + 8 * (i // 2), g


def isa_c(lane: int, i: int) -> tuple[int, int]:
    g, t = lane >> 2, lane % 4
    return g + 8 * (i // 2), t * 2 + (i & 1)


@pytest.mark.parametrize("dtype", list(DEMO_MMAS))
def test_fragment_addresses_match_the_isa(dtype: str) -> None:
    mma = DEMO_MMAS[dtype]
    a, b, d = (operand_memory_layout(mma, op) for op in "ABD")
    for lane in range(32):
        for i in range(8):
            r, c = isa_a(lane, i)
            assert a(lane, i) == r * 16 + c, ("A", lane, i)
        for i in range(4):
            k, n = isa_b(lane, i)
            assert b(lane, i) == n * 16 + k, ("B", lane, i)  # Bt is n-major rows of k
            r, c = isa_c(lane, i)
            assert d(lane, i) == r * 8 + c, ("D", lane, i)


def test_lane_part_is_a_slice_of_the_composition() -> None:
    a = operand_memory_layout(DEMO_MMAS["f16"], "A")
    lane_part, offset = slice_and_offset((None, 0), a)  # CuTe order: (coord, layout)
    assert offset == 0 and isinstance(lane_part, Layout)
    assert [lane_part(t) for t in range(32)] == [a(t, 0) for t in range(32)]


@pytest.mark.parametrize("target", ["sm_80", "sm_86", "sm_89", "sm_90a", "sm_100a", "sm_120f"])
@pytest.mark.parametrize("dtype", list(DEMO_MMAS))
def test_demo_assembles(target: str, dtype: str) -> None:
    res = assemble(build_demo_module(target, dtype).emit(), target)
    k = res.kernel("mma_demo")
    assert k.spills == 0 and k.stack_frame == 0 and k.shared_bytes == 0


def test_demo_needs_sm80() -> None:
    with pytest.raises(PtxBuildError, match="target sm_75 does not support 'mma.sm80'"):
        build_demo_module("sm_75")
