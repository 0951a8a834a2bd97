"""scripts/hw_report.py's ``cpu_model_agreement`` section, from the JSON lines that
tests/gpu/test_ref_models_gpu.py appends (one per compared form and selector)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _hw_report():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("hw_report", ROOT / "scripts/hw_report.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_counts_forms_not_runs(tmp_path: Path) -> None:
    runs = [
        {"family": "mma", "form": "sm80.mma.a", "selector": None, "agree": True},
        {"family": "mma", "form": "sm80.sparse_mma.b", "selector": 0, "agree": True},
        {"family": "mma", "form": "sm80.sparse_mma.b", "selector": 1, "agree": False},
        {"family": "wgmma", "form": "sm90.mma.c", "selector": None, "agree": True},
    ]
    path = tmp_path / "agree.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in runs) + "not json\n")
    got = _hw_report()._model_agreement(path)
    assert got["forms_compared"] == 3 and got["forms_agreeing"] == 2 and got["runs"] == 4
    assert got["by_family"] == {"mma": {"compared": 2, "agreeing": 1},
                                "wgmma": {"compared": 1, "agreeing": 1}}
    assert got["disagreeing"] == ["mma:sm80.sparse_mma.b"]


def test_no_file_means_nothing_compared(tmp_path: Path) -> None:
    got = _hw_report()._model_agreement(tmp_path / "missing.jsonl")
    assert got["forms_compared"] == 0 and got["forms_agreeing"] == 0 and got["runs"] == 0
