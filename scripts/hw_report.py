#!/usr/bin/env python3
"""Run the `gpu`-marked tests on this machine's GPU and write a JSON report.

Used by `make hw` on a GPU machine (see docs/hardware.md).  The report holds the device
name, driver, compute capability, date, git commit, software versions, every test with
its outcome, and ``cpu_model_agreement``: how many MMA forms the GPU ran and how many agreed
with the CPU models of nvatom.ref (tests/gpu/test_ref_models_gpu.py appends to the file
named by $NVATOM_REF_AGREEMENT), and ``sanitize``: the summary of scripts/sanitize.py's run
(every shipped kernel configuration under compute-sanitizer's memcheck, racecheck, synccheck
and initcheck; its full report in reports/sanitize.json; ``--no-sanitize`` skips it).  Exits
non-zero when a test failed, when no GPU test ran at all, or when the sanitizer found a
kernel error, did not complete or missed a canary.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


class _Collector:
    def __init__(self) -> None:
        self.tests: dict[str, dict] = {}

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        entry = self.tests.setdefault(report.nodeid, {"test": report.nodeid, "outcome": "passed",
                                                      "duration_s": 0.0})
        entry["duration_s"] = round(entry["duration_s"] + report.duration, 4)
        if report.skipped:
            entry["outcome"] = "skipped"
            entry["detail"] = str(report.longrepr[-1]) if isinstance(report.longrepr, tuple) \
                else str(report.longrepr)
        elif report.failed:
            entry["outcome"] = "failed" if report.when == "call" else "error"
            entry["detail"] = str(report.longrepr)[-4000:]


def _run(cmd: list[str]) -> str:
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=60,
                              check=False).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def _device() -> dict:
    q = _run(["nvidia-smi", "--query-gpu=name,driver_version,compute_cap,memory.total",
              "--format=csv,noheader"])
    devices = []
    for line in q.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) == 4:
            devices.append({"name": parts[0], "driver": parts[1], "compute_capability": parts[2],
                            "memory": parts[3]})
    return {"gpus": devices, "cuda_runtime": _run(["nvcc", "--version"]).splitlines()[-1:]}


def _commit() -> dict:
    commit = os.environ.get("NVATOM_COMMIT") or _run(["git", "-C", str(ROOT), "rev-parse", "HEAD"])
    dirty = os.environ.get("NVATOM_DIRTY")
    if dirty is None:
        status = _run(["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no"])
        dirty = "yes" if status else ("no" if commit else "unknown")
    return {"commit": commit or "unknown", "dirty": dirty}


def _versions() -> dict:
    out = {"python": platform.python_version()}
    for mod in ("numpy", "cupy", "torch", "cuda.core", "ml_dtypes"):
        try:
            m = __import__(mod, fromlist=["_"])
            out[mod] = getattr(m, "__version__", "installed")
        except Exception:
            out[mod] = None
    from nvatom.runtime.ptxas import discover

    out["ptxas"] = [f"{t.build} ({t.path})" for t in discover()]
    return out


AGREEMENT_ENV = "NVATOM_REF_AGREEMENT"  # tests/gpu/test_ref_models_gpu.py appends here


def _model_agreement(path: Path) -> dict:
    """Forms compared with the CPU models of nvatom.ref, and how many agreed (a form agrees
    when all its runs, e.g. every sparse selector, did), per family and in all."""
    runs = []
    if path.exists():
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                runs.append(json.loads(line))
            except json.JSONDecodeError:
                continue
    forms: dict[tuple[str, str], bool] = {}
    for r in runs:
        key = (str(r.get("family")), str(r.get("form")))
        forms[key] = forms.get(key, True) and bool(r.get("agree"))
    by_family: dict[str, dict[str, int]] = {}
    for (family, _), ok in forms.items():
        fam = by_family.setdefault(family, {"compared": 0, "agreeing": 0})
        fam["compared"] += 1
        fam["agreeing"] += int(ok)
    return {
        "forms_compared": len(forms),
        "forms_agreeing": sum(forms.values()),
        "runs": len(runs),
        "by_family": by_family,
        "disagreeing": sorted(f"{fam}:{name}" for (fam, name), ok in forms.items() if not ok),
    }


def _sanitize() -> dict[str, object]:
    """Run scripts/sanitize.py (its four tools at once) into reports/sanitize.json and return
    the summary the GPU report carries: configurations, kernel and API errors, whether every
    tool completed and caught its planted canary."""
    from sanitize import sanitizer  # scripts/sanitize.py, beside this script

    try:
        sanitizer()
    except SystemExit:
        return {"ran": False, "why": "compute-sanitizer not found"}
    out = ROOT / "reports" / "sanitize.json"
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "sanitize.py"), "--jobs",
                           "4", "--out", str(out)], capture_output=True, text=True)
    print(proc.stdout[-2000:], proc.stderr[-2000:], sep="", flush=True)
    try:
        rep = json.loads(out.read_text())
    except (OSError, json.JSONDecodeError) as e:
        return {"ran": True, "exit": proc.returncode, "error": f"no report: {e}"}
    return {"ran": True, "exit": proc.returncode, "report": "reports/sanitize.json",
            "configs": len(rep.get("configs", [])),
            **{k: rep.get(k) for k in ("kernel_errors", "api_errors", "all_completed",
                                       "canaries_caught")}}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(ROOT / "reports/hw/latest.json"))
    ap.add_argument("--sanitize", action=argparse.BooleanOptionalAction, default=True,
                    help="also run scripts/sanitize.py (every shipped kernel configuration "
                    "under compute-sanitizer's four tools; reports/sanitize.json) and put its "
                    "summary in the report (default on; skipped where compute-sanitizer is "
                    "missing)")
    ap.add_argument("pytest_args", nargs="*", help="extra pytest arguments")
    args = ap.parse_args()

    collector = _Collector()
    t0 = time.time()
    agreement_dir = tempfile.TemporaryDirectory(prefix="nvatom-hw-")
    agreement = Path(agreement_dir.name) / "cpu_model_agreement.jsonl"
    os.environ[AGREEMENT_ENV] = str(agreement)
    rc = pytest.main(["-m", "gpu", "-p", "no:cacheprovider", "-q", str(ROOT / "tests"),
                      *args.pytest_args], plugins=[collector])
    tests = sorted(collector.tests.values(), key=lambda e: e["test"])
    counts: dict[str, int] = {}
    for e in tests:
        counts[e["outcome"]] = counts.get(e["outcome"], 0) + 1
    report = {
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "device": _device(),
        **_commit(),
        "host": platform.node(),
        "versions": _versions(),
        "wall_s": round(time.time() - t0, 2),
        "pytest_exit": int(rc),
        "summary": counts,
        "cpu_model_agreement": _model_agreement(agreement),
        "sanitize": _sanitize() if args.sanitize else {"ran": False, "why": "--no-sanitize"},
        "tests": tests,
    }
    agreement_dir.cleanup()
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")
    agree = report["cpu_model_agreement"]
    print(f"wrote {out}: {counts}; CPU models: {agree['forms_agreeing']} of "
          f"{agree['forms_compared']} forms agree with the GPU")
    if counts.get("passed", 0) == 0:
        print("no GPU test passed", file=sys.stderr)
        return 1
    san = report["sanitize"]
    if san.get("ran"):
        print(f"sanitize: {san.get('configs')} configurations, {san.get('kernel_errors')} kernel "
              f"errors, all completed {san.get('all_completed')}, canaries caught "
              f"{san.get('canaries_caught')}")
    san_ok = not san.get("ran") or san.get("exit") == 0
    return 0 if counts.get("failed", 0) == counts.get("error", 0) == 0 and san_ok else 1


if __name__ == "__main__":
    sys.exit(main())
