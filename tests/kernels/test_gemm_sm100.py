"""The SM100 GEMM (nvatom.kernels.gemm_sm100): it assembles for the tcgen05 targets, its PTX
carries the plan's descriptor and idesc words, and the plan's data path -- TMA (as the CUDA
driver defines SWIZZLE_128B) -> UMMA descriptors -> MMA -> tcgen05.ld -> D -- computes
A @ B^T on the CPU reference model."""

from __future__ import annotations

import re

import numpy as np
import pytest

from nvatom.dtypes import decode, encode
from nvatom.kernels.gemm_sm100 import (
    GemmSm100Error,
    build_gemm_sm100_module,
    gemm_sm100_plan,
    simulate,
    tensor_maps,
)
from nvatom.ptx.builder import PtxBuildError
from nvatom.runtime import ptxas


@pytest.mark.parametrize(("bn", "dtype", "k_tiles"), [(128, "bf16", 2), (64, "f16", 1),
                                                     (32, "bf16", 3), (16, "f16", 1)])
def test_assembles_for_sm100a(bn: int, dtype: str, k_tiles: int) -> None:
    plan = gemm_sm100_plan(bn, dtype)
    text = build_gemm_sm100_module(plan, k_tiles).emit()
    res = ptxas.assemble(text, "sm_100a")
    kr = res.kernel("gemm_sm100")
    assert kr.spills == 0
    # the kernel issues the plan's words
    assert re.search(rf"mov\.u32 %r\d+, {plan.idesc};", text)
    for d in (*plan.a_descs, *plan.b_descs):
        assert str(d.encode()) in text
    assert text.count("tcgen05.mma.cta_group::1.kind::f16") == plan.k_blocks * k_tiles
    assert f"tcgen05.ld.sync.aligned.32x32b.x{bn}.b32" in text


@pytest.mark.parametrize("t", ["sm_100f", "sm_103a", "sm_110a"])
def test_assembles_on_other_tcgen05_targets(t: str) -> None:
    text = build_gemm_sm100_module(gemm_sm100_plan(64, "bf16"), 1, target=t).emit()
    assert ptxas.check(text, t)[0]


def test_refused_without_tcgen05() -> None:
    with pytest.raises(PtxBuildError, match="tcgen05"):
        build_gemm_sm100_module(gemm_sm100_plan(64), 1, target="sm_90a")


@pytest.mark.parametrize(("dtype", "m", "n", "k", "bn"), [("bf16", 256, 128, 192, 64),
                                                          ("f16", 128, 128, 64, 128)])
def test_cpu_run_of_the_plan_computes_the_gemm(dtype: str, m: int, n: int, k: int,
                                               bn: int) -> None:
    rng = np.random.default_rng(5)
    a = encode(dtype, rng.standard_normal((m, k))).astype(np.uint16)
    b = encode(dtype, rng.standard_normal((n, k))).astype(np.uint16)
    plan = gemm_sm100_plan(bn, dtype)
    got = simulate(plan, a, b)
    want = decode(dtype, a) @ decode(dtype, b).T
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)


def test_plan_and_problem_errors() -> None:
    with pytest.raises(GemmSm100Error, match="f16 or bf16"):
        gemm_sm100_plan(64, "e4m3")
    with pytest.raises(GemmSm100Error, match="BN = 48"):
        gemm_sm100_plan(48)
    plan = gemm_sm100_plan(64)
    with pytest.raises(GemmSm100Error, match="multiples"):
        tensor_maps(plan, 128, 64, 96)
    ta, tb = tensor_maps(plan, 256, 128, 128, 0x1000, 0x2000)
    assert ta.box_dims == (64, 128) and tb.box_dims == (64, 64)
    with pytest.raises(GemmSm100Error, match="k_tiles"):
        build_gemm_sm100_module(plan, 0)
