"""Python build times (ptxas excluded): the GEMM kernels' PTX and the IR pipeline.

    .venv/bin/python bench/build_time.py [--repeat 7]

Measures, as medians of ``--repeat`` runs after one warm-up: building and emitting the PTX of
the SM90 GEMM (the default configurations for bf16, f16, e4m3) and of the SM80 GEMM, and
parsing, verifying and lowering the 300-operation cute_nvgpu module of
tests/ir/test_ir_perf.py.  Targets from issues 7 and 8: under 100 ms per kernel, under 1 s for
the 300-op module on a 2-core machine.  Prints a table and writes
``reports/bench/build_time.json``.  No assertions: the tests only check what is built.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT))


def _median_ms(fn: Callable[[], object], repeat: int) -> float:
    fn()  # warm imports and caches
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return 1e3 * statistics.median(times)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--out", default=str(ROOT / "reports/bench/build_time.json"))
    args = ap.parse_args(argv)

    from nvatom.kernels import gemm_sm80
    from nvatom.kernels.sm90.gemm import build_gemm_sm90
    from nvatom.kernels.sm90.launch import default_config

    rows: list[dict] = []
    for dt in ("bf16", "f16", "e4m3"):
        cfg = default_config(dt)
        rows.append({"what": f"SM90 GEMM {dt} build+emit", "target_ms": 100,
                     "ms": _median_ms(lambda c=cfg: build_gemm_sm90(c).emit(),
                                      args.repeat)})
    spec = gemm_sm80.GemmSm80Spec()
    rows.append({"what": "SM80 GEMM bf16 build+emit", "target_ms": 100,
                 "ms": _median_ms(lambda: gemm_sm80.build_gemm_sm80(spec).emit(), args.repeat)})
    try:
        from tests.ir.test_ir_perf import module_text

        from nvatom.ir import driver
        from nvatom.ir.lower import lower
    except ImportError as e:  # xDSL not installed
        print(f"IR: skipped ({e})")
    else:
        text = module_text()

        def ir() -> None:
            mod = driver.parse(text, "many.mlir")
            lower(mod, driver.verify(mod))

        rows.append({"what": "IR 300-op module parse+verify+lower", "target_ms": 1000,
                     "ms": _median_ms(ir, args.repeat)})
    w = max(len(r["what"]) for r in rows)
    print(f"{'what':<{w}}  {'median ms':>9}  target ms")
    for r in rows:
        print(f"{r['what']:<{w}}  {r['ms']:9.1f}  {r['target_ms']:>9}")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"machine": platform.platform(), "cpus": os.cpu_count(),
                               "python": platform.python_version(), "rows": rows},
                              indent=1) + "\n")
    print(f"-> {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
