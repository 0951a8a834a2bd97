"""Import cost of the package: ``import nvatom`` and ``import nvatom.layout``.

    .venv/bin/python bench/import_time.py [--repeat 7]

Each statement runs in ``--repeat`` fresh interpreters (``python -X importtime -c ...``); the
table shows the median of the cumulative time CPython reports for the top-level module (the
``-X importtime`` line of ``nvatom``, or of ``nvatom.layout`` and its parent), the median
wall time of the whole process, and how many ``nvatom`` modules the statement loaded.
Target: under 50 ms on the 2-core CI machine; ``import nvatom`` must not load the
GEMM, the runtime, the PTX builder or numpy (``nvatom.gemm`` is imported on first use).
Prints a table and writes ``reports/bench/import_time.json``.  No assertions.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STATEMENTS = ("import nvatom", "import nvatom.layout")
TARGET_MS = 50.0
_LINE = re.compile(r"^import time:\s+(\d+)\s+\|\s+(\d+)\s+\|(\s*)(\S+)\s*$")


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT / "src") + os.pathsep + env.get("PYTHONPATH", "")
    return env


def measure_once(statement: str) -> tuple[float, float, int]:
    """(cumulative import microseconds of the ``nvatom`` packages, process wall ms, number
    of nvatom modules loaded) of one fresh interpreter running ``statement``."""
    code = f"{statement}; import sys; print(sum(m.startswith('nvatom') for m in sys.modules))"
    t = time.perf_counter()
    res = subprocess.run([sys.executable, "-X", "importtime", "-c", code], env=_env(),
                         capture_output=True, text=True, check=True)
    wall = 1e3 * (time.perf_counter() - t)
    cumulative = 0
    for line in res.stderr.splitlines():
        m = _LINE.match(line)
        # top-level nvatom lines only (no indentation: not nested in another import)
        if m and m.group(4).split(".")[0] == "nvatom" and len(m.group(3)) <= 1:
            cumulative += int(m.group(2))
    return cumulative, wall, int(res.stdout.split()[-1])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--out", default=str(ROOT / "reports/bench/import_time.json"))
    args = ap.parse_args(argv)
    rows = []
    for st in STATEMENTS:
        runs = [measure_once(st) for _ in range(args.repeat)]
        rows.append({"statement": st,
                     "import_ms": statistics.median(r[0] for r in runs) / 1e3,
                     "process_ms": statistics.median(r[1] for r in runs),
                     "nvatom_modules": runs[-1][2], "target_ms": TARGET_MS})
    print(f"{'statement':<24} {'import ms':>10} {'process ms':>11} {'modules':>8} {'target':>7}")
    for r in rows:
        print(f"{r['statement']:<24} {r['import_ms']:>10.1f} {r['process_ms']:>11.1f} "
              f"{r['nvatom_modules']:>8} {r['target_ms']:>7.0f}")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({
        "what": "python -X importtime, median of fresh processes", "repeat": args.repeat,
        "python": platform.python_version(), "machine": platform.machine(),
        "cpus": os.cpu_count(), "rows": rows}, indent=2) + "\n")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
