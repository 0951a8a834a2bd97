"""The cutlass dialect (nvatom.ir.ops_pipeline, lower_pipeline): a pipeline of a ring that is
not a power of two and a tile scheduler lower to the emitters of nvatom.ptx.pipeline_emit /
scheduler_emit and assemble; the scheduler's PTX gives the Python model's tiles (the model
of nvatom.kernels.scheduler, one implementation behind both front ends); the ops print and
parse back.  The GEMM that uses them: tests/ir/gemm_sm90.mlir (test_ir_gemm.py); their
diagnostics: tests/ir/invalid_pipeline.mlir."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("xdsl")

from nvatom.ir import driver
from nvatom.ir.lower import lower
from nvatom.runtime.ptxas import assemble

KERNEL = (Path(__file__).parent / "pipeline_ring3.mlir").read_text()


def _ptx() -> str:
    mod = driver.parse(KERNEL, "ring3.mlir")
    return lower(mod, driver.verify(mod, "sm_90a")).ptx


def test_pipeline_and_scheduler_lower_and_assemble() -> None:
    ptx = _ptx()
    assert ptx.count("mbarrier.init.shared::cta.b64") == 6  # full[3], empty[3]
    assert ptx.count("fence.mbarrier_init") == 1
    assert "mbarrier.arrive.expect_tx.release.cta.shared::cta.b64 _, [" in ptx
    assert ", 4096;" in ptx
    assert ptx.count("mbarrier.try_wait.parity") == 2  # empty (producer), full (consumer)
    assert "rem.u32" in ptx and "div.u32" in ptx  # a ring of 3: no mask and shift
    assert "%ctaid.x" in ptx and "%nctaid.x" in ptx
    assemble(ptx, "sm_90a").kernel("ring3")


def test_tile_m_and_tile_n_share_one_raster() -> None:
    """tile_m and tile_n of one tile lower to one grouped-M raster (scheduler_emit)."""
    assert _ptx().count("min.u32") == 1


def test_ops_print_and_parse_back() -> None:
    mod = driver.parse(KERNEL, "ring3.mlir")
    text = driver.print_module(mod)
    assert "cutlass.pipeline.init %" in text and "!cutlass" not in text.split("{")[0]
    again = driver.print_module(driver.parse(text, "again.mlir"))
    assert again == text


def test_one_implementation_two_front_ends(monkeypatch: pytest.MonkeyPatch) -> None:
    """The IR lowers through the emitters the Python layer uses (so the model checked against
    that PTX in tests/kernels/test_scheduler.py is the IR's too)."""
    from nvatom.ptx import pipeline_emit as PE
    from nvatom.ptx import scheduler_emit as SCH

    calls: list[str] = []
    for mod, name in ((SCH, "grouped_m_raster"), (PE, "producer_acquire"),
                      (PE, "consumer_wait"), (PE, "consumer_release"), (PE, "init_barriers")):
        real = getattr(mod, name)

        def spy(*a: object, _real: object = real, _name: str = name, **kw: object) -> object:
            calls.append(_name)
            return _real(*a, **kw)  # type: ignore[operator]

        monkeypatch.setattr(mod, name, spy)
    _ptx()
    assert sorted(calls) == ["consumer_release", "consumer_wait", "grouped_m_raster",
                             "init_barriers", "producer_acquire"]


def test_gemm_releasing_the_stage_in_flight_is_refused() -> None:
    """tests/ir/gemm_sm90.mlir with its K loop releasing the current stage (whose WGMMA
    group wait {pending = 1} leaves in flight) instead of the previous one: refused at the
    release, by the same state machine as the Python layer's."""
    from nvatom.ir.driver import IRError

    text = (Path(__file__).parent / "gemm_sm90.mlir").read_text()
    bad = text.replace("cutlass.pipeline.consumer_release %pipe, %prev",
                       "cutlass.pipeline.consumer_release %pipe, %cit")
    assert bad != text
    with pytest.raises(IRError) as e:
        driver.verify(driver.parse(bad, "g.mlir"), "sm_90a")
    msg = str(e.value)
    assert "'cutlass.pipeline.consumer_release' op pipeline 'pipe', consumer 'consumer', " \
           "stage s: released while a WGMMA group still reads it" in msg
