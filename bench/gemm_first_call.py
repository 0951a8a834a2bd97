"""The first ``nvatom.gemm`` call of a process, the call cache and a new shape, measured.

    PYTHONPATH=src python3 bench/gemm_first_call.py [--reps 3] [--base-src DIR]
        [--out reports/bench/gemm_first_call.json]

Every "first call" number comes from a fresh Python process (``subprocess``) that imports
torch, makes its CUDA tensors and synchronises *before* the clock starts; the clock then
covers ``import nvatom`` + the first ``nvatom.gemm(...)`` + ``torch.cuda.synchronize()``
(the user's view of "the first call").  The disk cache (``NVATOM_CACHE_DIR``) is a fresh
folder per scenario family, prepared by the processes named:

* ``cold``: empty cache (ptxas runs; reported, not a target);
* ``warm-same``: the cache a ``cold`` process of the same shape left (cubin and recipe);
* ``warm-new-shape``: the same cache, another M x N x K of the same problem class;
* ``no-recipe``: cubins cached, recipes removed (the planning path: providers, kernels and
  layout algebra imported);
* ``base``: ``warm-same`` with the tree at ``--base-src`` (the code before this work).

In one more fresh process (warm cache): the host time per call of the call cache with and
without ``out`` (median of 2000 calls of a small GEMM, timed on the host; the GPU keeps up),
and the first call of a new shape on a kernel already loaded in the process.  Every first
call's output is checked against a float64 reference (NaN-poisoned ``out``).  A cProfile of
one ``no-recipe`` and one ``warm-same`` first call gives the breakdown (top functions by
cumulative time).  Writes JSON with the device and commit; asserts nothing about speed.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # bench._report

from bench import _report as R  # noqa: E402

CHILD = r'''
import json, os, sys, time
t0 = time.perf_counter()
import torch
t_torch = time.perf_counter() - t0
mode, dtype, m, n, k = sys.argv[1], sys.argv[2], *map(int, sys.argv[3:6])
dev = torch.device("cuda")
g = torch.Generator(device=dev).manual_seed(m * 7 + n * 3 + k)
res = {"mode": mode, "dtype": dtype, "shape": [m, n, k], "import_torch_ms": t_torch * 1e3}
if dtype == "e4m3":
    a = (torch.randn(m, k, device=dev, generator=g) * 0.5).to(torch.float8_e4m3fn)
    b = (torch.randn(n, k, device=dev, generator=g) * 0.5).to(torch.float8_e4m3fn).t()
    sa = torch.tensor([0.75], device=dev)
    sb = torch.tensor([1.25], device=dev)
    out = torch.full((m, n), float("nan"), device=dev, dtype=torch.bfloat16)
    kw = {"scale_a": sa, "scale_b": sb}
    ref = (a.double() @ b.double()) * 0.75 * 1.25
else:
    dt = {"bf16": torch.bfloat16, "f16": torch.float16}[dtype]
    a = torch.randn(m, k, device=dev, generator=g).to(dt)
    b = torch.randn(k, n, device=dev, generator=g).to(dt)
    out = torch.full((m, n), float("nan"), device=dev, dtype=dt)
    kw = {}
    ref = a.double() @ b.double()
torch.cuda.synchronize()
if mode == "profile":
    import cProfile, io, pstats
    pr = cProfile.Profile()
    pr.enable()
t1 = time.perf_counter()
import nvatom
t2 = time.perf_counter()
nvatom.gemm(a, b, out, **kw)
torch.cuda.synchronize()
t3 = time.perf_counter()
if mode == "profile":
    pr.disable()
    s = io.StringIO()
    pstats.Stats(pr, stream=s).sort_stats("cumulative").print_stats(30)
    res["profile"] = s.getvalue()[-6000:]
res["first_call_ms"] = (t3 - t1) * 1e3
res["import_nvatom_ms"] = (t2 - t1) * 1e3
err = ((out.double() - ref).norm() / ref.norm()).item()
res["rel_err"] = err
res["nan"] = bool(torch.isnan(out).any().item())
res["kernel_modules_imported"] = any(m.startswith("nvatom.kernels.sm90") for m in sys.modules)
if mode == "hot":
    import statistics as st
    # a new shape on the loaded kernel: the first call of (m - 64) x n x k
    a2 = a[: m - 64]
    out2 = torch.empty(a2.shape[0], n, device=dev, dtype=out.dtype)
    torch.cuda.synchronize()
    t = time.perf_counter(); nvatom.gemm(a2, b, out2, **kw); torch.cuda.synchronize()
    res["new_shape_first_call_ms"] = (time.perf_counter() - t) * 1e3
    ref2 = (a2.double() @ b.double()) * (0.75 * 1.25 if dtype == "e4m3" else 1.0)
    res["new_shape_rel_err"] = ((out2.double() - ref2).norm() / ref2.norm()).item()
    for label, call in (("out", lambda: nvatom.gemm(a, b, out, **kw)),
                        ("no_out", lambda: nvatom.gemm(a, b, **kw))):
        for _ in range(50):
            call()
        torch.cuda.synchronize()
        times = []
        for _ in range(20):
            t = time.perf_counter()
            for _ in range(100):
                call()
            times.append((time.perf_counter() - t) / 100 * 1e6)
            torch.cuda.synchronize()
        res[f"host_us_{label}"] = st.median(times)
    r3 = nvatom.gemm(a, b, **kw)
    res["no_out_rel_err"] = ((r3.double() - ref).norm() / ref.norm()).item()
print("RESULT " + json.dumps(res))
'''


def _child(src: Path, cache: Path, mode: str, dtype: str, shape: tuple[int, int, int]
           ) -> dict[str, Any]:
    env = dict(os.environ, PYTHONPATH=str(src), NVATOM_CACHE_DIR=str(cache))
    proc = subprocess.run([sys.executable, "-c", CHILD, mode, dtype, *map(str, shape)],
                          env=env, capture_output=True, text=True, timeout=600, check=False)
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    raise RuntimeError(f"child {mode} {dtype} {shape} failed:\n{proc.stdout}\n{proc.stderr}")


def _remove_recipes(cache: Path) -> None:
    shutil.rmtree(cache / "gemm-recipes", ignore_errors=True)


def _summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    firsts = [r["first_call_ms"] for r in rows]
    return {"first_call_ms_median": statistics.median(firsts), "first_call_ms_min": min(firsts),
            "first_call_ms_max": max(firsts),
            "import_nvatom_ms_median": statistics.median(r["import_nvatom_ms"] for r in rows),
            "max_rel_err": max(r["rel_err"] for r in rows),
            "any_nan": any(r["nan"] for r in rows),
            "kernel_modules_imported": [r["kernel_modules_imported"] for r in rows],
            "runs": len(rows)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--base-src", type=Path, default=None)
    ap.add_argument("--dtypes", default="bf16,e4m3")
    ap.add_argument("--quick", action="store_true",
                    help="warm-same, warm-new-shape and base-warm-same only")
    ap.add_argument("--no-compileall", action="store_true",
                    help="do not byte-compile the trees first (an installed package has "
                         "its .pyc files; a fresh checkout compiles them on first import)")
    ap.add_argument("--out", type=Path, default=ROOT / "reports/bench/gemm_first_call.json")
    args = ap.parse_args(argv)
    import torch

    src = ROOT / "src"
    if not args.no_compileall:
        for tree in (src, args.base_src):
            if tree is not None:
                subprocess.run([sys.executable, "-m", "compileall", "-q", str(tree)],
                               check=False, capture_output=True)
    shape, new_shape = (4096, 4096, 4096), (3000, 2048, 1024)
    result: dict[str, Any] = {
        **R.torch_header(torch),
        "python": sys.version.split()[0], "shape": list(shape), "new_shape": list(new_shape),
        "method": "fresh process per first call; clock: import nvatom + first gemm + sync, "
                  "after torch import and tensor setup",
        "bytecode": "not compiled first (every process compiles nvatom's modules)"
                    if args.no_compileall else "compileall before the runs (as installed)",
        "scenarios": {}}
    rows = []
    for dtype in args.dtypes.split(","):
        tmp = Path(tempfile.mkdtemp(prefix="nvatom-first-"))
        sc: dict[str, Any] = {}
        sc["cold"] = _summary([_child(src, tmp, "first", dtype, shape)])
        sc["warm-same"] = _summary([_child(src, tmp, "first", dtype, shape)
                                    for _ in range(args.reps)])
        sc["warm-new-shape"] = _summary([_child(src, tmp, "first", dtype, new_shape)
                                         for _ in range(args.reps)])
        if not args.quick:
            prof_warm = _child(src, tmp, "profile", dtype, shape)
            hot = _child(src, tmp, "hot", dtype, (512, 512, 512))
            sc["hot"] = {k: v for k, v in hot.items()
                         if k.startswith(("host_us", "new_shape", "no_out"))}
            _remove_recipes(tmp)
            sc["no-recipe"] = _summary([_child(src, tmp, "first", dtype, shape)
                                        for _ in range(args.reps)])
            _remove_recipes(tmp)
            prof_plan = _child(src, tmp, "profile", dtype, shape)
            sc["profile_warm_same"] = prof_warm.get("profile", "")
            sc["profile_no_recipe"] = prof_plan.get("profile", "")
        if args.base_src is not None and (dtype == "bf16" or not args.quick):
            btmp = Path(tempfile.mkdtemp(prefix="nvatom-first-base-"))
            _child(args.base_src, btmp, "first", dtype, shape)
            sc["base-warm-same"] = _summary([_child(args.base_src, btmp, "first", dtype, shape)
                                             for _ in range(args.reps)])
            if not args.quick:
                bhot = _child(args.base_src, btmp, "hot", dtype, (512, 512, 512))
                sc["base-hot"] = {k: v for k, v in bhot.items()
                                  if k.startswith(("host_us", "new_shape", "no_out"))}
        result["scenarios"][dtype] = sc
        for name, v in sc.items():
            if isinstance(v, dict) and "first_call_ms_median" in v:
                rows.append((dtype, name, v["first_call_ms_median"], v["first_call_ms_min"],
                             v["first_call_ms_max"], v["max_rel_err"], v["any_nan"]))
    R.write_json(args.out, result)
    print(f"{'dtype':6} {'scenario':16} {'median ms':>10} {'min':>8} {'max':>8} {'rel err':>9}")
    for d, name, med, lo, hi, err, nan in rows:
        print(f"{d:6} {name:16} {med:10.1f} {lo:8.1f} {hi:8.1f} {err:9.2e}"
              f"{'  NaN!' if nan else ''}")
    for dtype, sc in result["scenarios"].items():
        for key in ("hot", "base-hot"):
            if key in sc:
                print(dtype, key, json.dumps({k: round(v, 4) for k, v in sc[key].items()}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
