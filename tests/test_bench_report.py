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
                                  "gemm_grouped", "gemm_epilogue", "ir_gemm"])
def test_bench_script_loads_from_its_file(name: str) -> None:
    spec = importlib.util.spec_from_file_location(f"bench_{name}", ROOT / "bench" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert callable(mod.main) and mod.R is R


class _T:
    """A numpy-backed stand-in for the few torch tensor operations the report helpers use."""

    def __init__(self, x) -> None:
        import numpy as np

        self.x = np.asarray(x, dtype=np.float64)

    def double(self) -> _T:
        return self

    def norm(self) -> float:
        import numpy as np

        return float(np.linalg.norm(self.x))

    def __getitem__(self, i) -> _T:
        return _T(self.x[i])

    def __matmul__(self, o: _T) -> _T:
        return _T(self.x @ o.x)

    def __sub__(self, o: _T) -> _T:
        return _T(self.x - o.x)

    def __mul__(self, o) -> _T:
        return _T(self.x * (o.x if isinstance(o, _T) else o))

    def any(self) -> bool:
        return bool(self.x.any())

    def all(self) -> bool:
        return bool(self.x.all())

    @property
    def shape(self) -> tuple[int, ...]:
        return self.x.shape


def test_grouped_error() -> None:
    """The grouped benches' check: zero error for the exact product (scaled or not), the
    error of a perturbed group, NaN rows, and a written tail row are all seen."""
    import numpy as np

    fake_torch = SimpleNamespace(isnan=lambda t: _T(np.isnan(t.x)))
    rng = np.random.default_rng(1)
    ends = [3, 3, 7]  # an empty group in the middle; rows 7.. are the tail
    a, b = rng.standard_normal((9, 4)), rng.standard_normal((3, 4, 5))
    got = np.full((9, 5), np.nan)
    got[0:3], got[3:7] = a[0:3] @ b[0], a[3:7] @ b[2]
    r = R.grouped_error(fake_torch, _T(got), _T(a), _T(b), ends)
    assert r == {"rel_err": 0.0, "nan": False, "tail_untouched": True}
    scaled = got.copy()
    scaled[0:3] *= 2.0
    scaled[3:7] *= 3.0
    r = R.grouped_error(fake_torch, _T(scaled), _T(a), _T(b), ends,
                        lambda ref, s, e, i: ref * (2.0 if i == 0 else 3.0))
    assert r["rel_err"] < 1e-15
    off = got.copy()
    off[4, 1] += 1.0  # one element of group 2 off by 1: the error is 1 / |ref| over all groups
    want = 1.0 / np.sqrt(np.linalg.norm(a[0:3] @ b[0]) ** 2 + np.linalg.norm(a[3:7] @ b[2]) ** 2)
    r = R.grouped_error(fake_torch, _T(off), _T(a), _T(b), ends)
    assert abs(r["rel_err"] - want) < 1e-12 and not r["nan"]
    bad = got.copy()
    bad[2, 2] = np.nan
    bad[8, 0] = 0.0
    r = R.grouped_error(fake_torch, _T(bad), _T(a), _T(b), ends)
    assert r["nan"] and not r["tail_untouched"]
