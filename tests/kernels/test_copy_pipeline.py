"""The copy pipeline kernel builds and assembles wherever stmatrix exists (sm_90+)."""

from __future__ import annotations

import pytest

from nvatom.kernels.copy_pipeline import PIPELINES, build_pipeline_module
from nvatom.ptx.builder import PtxBuildError
from nvatom.runtime.ptxas import assemble


@pytest.mark.parametrize("target", ["sm_90", "sm_90a", "sm_100a", "sm_120a"])
@pytest.mark.parametrize("dtype", list(PIPELINES))
def test_pipeline_assembles(dtype: str, target: str) -> None:
    text = build_pipeline_module(dtype, target).emit()
    for op in ("cp.async.cg.shared.global", "ldmatrix.sync.aligned.m8n8.x4.shared.b16",
               "ldmatrix.sync.aligned.m8n8.x2.shared.b16", "stmatrix.sync.aligned.m8n8.x2",
               PIPELINES[dtype].form.opcode):
        assert op in text
    k = assemble(text, target).kernel("copy_pipeline")
    assert k.spills == 0 and k.shared_bytes == 1024


def test_pipeline_needs_stmatrix() -> None:
    with pytest.raises(PtxBuildError, match="does not support 'stmatrix'"):
        build_pipeline_module("f16", "sm_89")
