"""The PTX nvatom emits for the GEMMs and the IR examples is what reports/ptx_fingerprint.json
recorded (scripts/ptx_fingerprint.py): refactors must leave it byte-identical, and a commit that
changes it on purpose re-records it and says why."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _script():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("ptx_fingerprint",
                                                  ROOT / "scripts" / "ptx_fingerprint.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_emitted_ptx_is_as_recorded() -> None:
    fp = _script()
    recorded = json.loads(fp.RECORD.read_text(encoding="utf-8"))
    assert len(recorded) >= 70
    assert fp.compare(recorded, fp.fingerprint()) == []


def test_compare_names_what_moved() -> None:
    fp = _script()
    assert fp.compare({"a": "1", "b": "2"}, {"a": "1", "b": "3", "c": "4"}) == [
        "changed: b", "new: c"]
    assert fp.compare({"a": "1"}, {}) == ["missing now: a"]
