"""Grouped GEMM (MoE): ``nvatom.grouped_gemm`` against ``torch._grouped_mm`` in one process.

    PYTHONPATH=src python3 bench/gemm_grouped.py [--rounds 5] [--batch 10]
        [--out reports/bench/gemm_grouped.json]

Cases: 8 experts of 2048 tokens x 4096 x 4096 (the issue's anchor) and 64 experts with random
tokens per expert (0-1024, DeepSeek-V3-like: hidden 7168 -> 2048), bf16. Rounds interleaved
with alternating order; ``--batch`` calls between two CUDA events (host time per call counts
where it exceeds the GPU's); the median over rounds and the spread.  Each output is checked
against float64 first (relative error, Frobenius).  ``torch._grouped_mm(a, b, offs=)`` takes
B as (G, K, N); its layout requirement is probed (row-major, else K-major).  Writes JSON with
the device and commit; asserts nothing.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import random
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))


def _commit() -> str:
    env = os.environ.get("NVATOM_COMMIT")
    if env:
        return env
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                              capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--batch", type=int, default=10)
    ap.add_argument("--out", type=Path, default=ROOT / "reports/bench/gemm_grouped.json")
    args = ap.parse_args(argv)
    import torch

    import nvatom

    rng = random.Random(0)
    cases = [("8x2048 tok, 4096->4096", [2048] * 8, 4096, 4096),
             ("64 experts 0-1024 tok, 7168->2048", [rng.randint(0, 1024) for _ in range(64)],
              2048, 7168)]
    rows: list[dict[str, Any]] = []
    for label, sizes, n, k in cases:
        g = len(sizes)
        ends = [sum(sizes[: i + 1]) for i in range(g)]
        total = ends[-1]
        a = torch.randn(total, k, device="cuda").to(torch.bfloat16)
        b = torch.randn(g, k, n, device="cuda").to(torch.bfloat16)
        offs = torch.tensor(ends, dtype=torch.int32, device="cuda")
        offs_host = torch.tensor(ends, dtype=torch.int32)
        out = torch.empty(total, n, device="cuda", dtype=torch.bfloat16)
        ref = torch.cat([a[(ends[i - 1] if i else 0):ends[i]].double() @ b[i].double()
                         for i in range(g)])
        b_t = None
        try:
            torch._grouped_mm(a, b, offs=offs)
            tb = b
        except RuntimeError:
            b_t = b.transpose(1, 2).contiguous().transpose(1, 2)  # K-major per group
            tb = b_t
        fns = {"nvatom": lambda a=a, b=b, o=offs_host, out=out:
               nvatom.grouped_gemm(a, b, o, out=out),
               "torch._grouped_mm": lambda a=a, tb=tb, o=offs: torch._grouped_mm(a, tb, offs=o)}
        errs = {}
        for name, fn in fns.items():
            r = fn()
            r = out if r is None else r
            errs[name] = ((r.double() - ref).norm() / ref.norm()).item()
        del ref
        for fn in fns.values():
            fn()
        torch.cuda.synchronize()
        times: dict[str, list[float]] = {name: [] for name in fns}
        order = list(fns)
        for rnd in range(args.rounds):
            for name in (order if rnd % 2 == 0 else order[::-1]):
                e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                e0.record()
                for _ in range(args.batch):
                    fns[name]()
                e1.record()
                e1.synchronize()
                times[name].append(e0.elapsed_time(e1) / args.batch * 1e-3)
        flops = 2 * total * n * k
        row: dict[str, Any] = {"case": label, "groups": g, "tokens": sizes, "n": n, "k": k,
                               "rel_err_vs_float64": errs,
                               "grouped_mm_b_layout": "row-major" if b_t is None else "K-major"}
        for name, ts in times.items():
            row[name] = {"tflops_median": flops / statistics.median(ts) / 1e12,
                         "tflops_min": flops / max(ts) / 1e12,
                         "tflops_max": flops / min(ts) / 1e12}
        row["ratio"] = row["nvatom"]["tflops_median"] / row["torch._grouped_mm"]["tflops_median"]
        rows.append(row)
    result = {"device": torch.cuda.get_device_name(), "torch": torch.__version__,
              "commit": _commit(), "date": datetime.datetime.now(datetime.UTC).isoformat(),
              "rounds": args.rounds, "batch": args.batch, "rows": rows}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    for row in rows:
        print(f"{row['case']}: nvatom {row['nvatom']['tflops_median']:.0f} TF/s, "
              f"_grouped_mm {row['torch._grouped_mm']['tflops_median']:.0f} TF/s, ratio "
              f"{row['ratio']:.3f}; errors {row['rel_err_vs_float64']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
