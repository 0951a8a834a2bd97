"""bench/_report.py (the report plumbing the bench scripts share) on the CPU, and every bench
script that uses it still loads the way ``bench/gemm.py --block-scales`` loads its siblings
(from its file, bench/ not being a package)."""

from __future__ import annotations

import importlib.util
import json
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest
from bench import _report as R

ROOT = Path(__file__).resolve().parents[1]


def test_commit_honours_nvatom_commit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NVATOM_COMMIT", "0123456789abcdef0123")
    assert R.commit() == R.commit(dirty=True) == "0123456789ab"


def test_commit_from_git(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NVATOM_COMMIT", raising=False)
    git = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                         capture_output=True, text=True, check=False)
    if git.returncode:
        pytest.skip("no git checkout")
    assert R.commit() == git.stdout.strip()
    assert R.commit(dirty=True).split("-dirty")[0] == git.stdout.strip()


def test_write_json_makes_the_folder(tmp_path: Path) -> None:
    out = R.write_json(tmp_path / "a" / "b.json", {"x": [1, 2]})
    assert out.read_text().endswith("\n") and json.loads(out.read_text()) == {"x": [1, 2]}


def test_cuda_seconds_is_per_call() -> None:
    calls = []

    class Event:
        def __init__(self, enable_timing: bool) -> None:
            assert enable_timing

        def record(self) -> None: ...
        def synchronize(self) -> None: ...
        def elapsed_time(self, _end: object) -> float:
            return 50.0  # ms between the two events

    torch = SimpleNamespace(cuda=SimpleNamespace(Event=Event))
    assert R.cuda_seconds(torch, lambda: calls.append(1), 10) == pytest.approx(0.005)
    assert len(calls) == 10


@pytest.mark.parametrize("name", ["attention", "gemm", "gemm_first_call", "gemm_fp8_block",
                                  "gemm_grouped", "ir_gemm"])
def test_bench_script_loads_from_its_file(name: str) -> None:
    spec = importlib.util.spec_from_file_location(f"bench_{name}", ROOT / "bench" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert callable(mod.main) and mod.R is R
