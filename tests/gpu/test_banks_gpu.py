"""Shared-memory bank conflicts on the GPU, against nvatom.atoms.smem's predictions.

The cases, kernels and ncu plumbing live in bench/banks_ncu.py (one place; the bench prints
the same comparison as a table).  Here:

(a) every case's kernel runs and its data round-trips: ldmatrix/stmatrix registers hold the
    tile elements the PTX ISA's fragment says, through plain, swizzled and padded layouts,
    with and without ``.trans``; ld/st.shared move the words at the model's addresses;
(b) when ``ncu`` is on PATH (or $NVATOM_NCU), one ncu run profiles every kernel and, for each
    case that is not a probe, the measured shared-memory wavefronts and bank conflicts of the
    op under test equal the predicted ones.  Skipped without ncu or when the counters are
    restricted to admin users; an unknown metric name fails with the metrics ncu offers.
"""

from __future__ import annotations

import functools
import importlib.util
import sys
import tempfile
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

pytestmark = pytest.mark.gpu

ROOT = Path(__file__).resolve().parents[2]


def _load_bench() -> ModuleType:
    name = "nvatom_bench_banks_ncu"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, ROOT / "bench" / "banks_ncu.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod  # dataclasses look their module up while the class is made
    spec.loader.exec_module(mod)
    return mod


bench = _load_bench()
CASES = bench.CASES


@functools.lru_cache(maxsize=1)
def _prepared() -> tuple[dict[str, Any], dict[str, str]]:
    target = bench.gpu_target()
    prepared, skipped = bench.prepare_all(target)
    bench.assemble_all(prepared)
    reasons = {s.split(":", 1)[0]: s for s in skipped}
    return {p.case.name: p for p in prepared}, reasons


def _case(name: str) -> Any:
    prepared, skipped = _prepared()
    if name not in prepared:
        pytest.skip(skipped.get(name, f"{name} is not prepared on this GPU"))
    return prepared[name]


@pytest.mark.parametrize("name", [c.name for c in CASES])
def test_round_trip(name: str, tmp_path: Path) -> None:
    p = _case(name)
    problems = bench.run_prepared(p, tmp_path)
    assert not problems, f"{name} ({p.access.ptx} over {p.case.layout}):\n" + "\n".join(problems)


@functools.lru_cache(maxsize=1)
def _ncu_values() -> tuple[dict[str, dict[str, float]] | None, str]:
    ncu = bench.find_ncu()
    if ncu is None:
        return None, "ncu is not on PATH (nor /usr/local/cuda/bin/ncu or $NVATOM_NCU)"
    prepared, _ = _prepared()
    work = Path(tempfile.mkdtemp(prefix="nvatom-banks-ncu-"))
    try:
        return bench.run_ncu(list(prepared.values()), ncu, work), ""
    except bench.NcuPermissionError as e:
        return None, str(e)
    except bench.NcuError as e:
        return {}, str(e)


@pytest.mark.parametrize("name", [c.name for c in CASES if not c.probe])
def test_ncu_matches_prediction(name: str) -> None:
    p = _case(name)
    values, why = _ncu_values()
    if values is None:
        pytest.skip(why)
    if not values:
        pytest.fail(f"ncu could not measure: {why}")
    m = bench.measured(p, values)
    assert m.wavefront_metric is not None, (
        f"{p.kernel}: no shared-memory wavefront counter in ncu's answer: {m.raw}")
    got = (m.wavefronts, m.conflicts)
    want = (p.report.wavefronts, p.report.conflicts)
    assert got[0] == want[0] and (got[1] is None or got[1] == want[1]), (
        f"{name}: {p.access.name} over {p.case.layout}: ncu says {got[0]:g} wavefronts "
        f"({m.wavefront_metric}), {got[1]} conflicts ({m.conflict_metric}); the model says "
        f"{want[0]} wavefronts, {want[1]} conflicts\n{p.report.format(max_detailed=2)}")
