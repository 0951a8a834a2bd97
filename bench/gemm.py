"""GEMM throughput: nvatom's kernels against torch.matmul (cuBLAS), in the same process.

    PYTHONPATH=src python3 bench/gemm.py [--kernels sm80,sm90] [--dtype bf16] [--shapes ...]

For each shape (M, N, K) every kernel and cuBLAS run on the same inputs; times are medians of
many CUDA-event-timed launches over rotating input buffers (enough copies that A and B of one
launch are not in L2 from the previous one).  Also measured: the Python time to build and emit
each kernel's PTX (ptxas excluded).  Prints a table and writes ``reports/bench/gemm.json``
(device, commit, TFLOP/s, ratio to cuBLAS).  A kernel's output is checked against cuBLAS's
before it is timed.  No assertions about speed.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

DEFAULT_SHAPES = [(2048, 2048, 2048), (4096, 4096, 4096), (8192, 8192, 8192),
                  (8192, 8192, 1024), (16384, 1024, 8192)]


def _commit() -> str:
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                             capture_output=True, text=True, check=False, timeout=10)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                               cwd=ROOT, capture_output=True, text=True, check=False,
                               timeout=10)
        return out.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "") or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def _sm80_config(text: str) -> object:
    """``BMxBNxBK/WMxWN/STAGES``, e.g. ``128x256x32/2x4/4``."""
    from nvatom.kernels.gemm_sm80 import GemmSm80Config

    tile, warps, stages = text.split("/")
    bm, bn, bk = (int(x) for x in tile.split("x"))
    wm, wn = (int(x) for x in warps.split("x"))
    return GemmSm80Config(bm, bn, bk, wm, wn, int(stages))


def _providers(names: list[str], sm80_configs: list[str]) -> dict[str, object]:
    from nvatom.gemm import Sm80Provider

    out: dict[str, object] = {}
    for n in names:
        if n == "sm80":
            out[n] = Sm80Provider()
            for c in sm80_configs:
                out[f"sm80:{c}"] = Sm80Provider(_sm80_config(c), f"sm80:{c}")
        elif n == "sm90":
            try:
                from nvatom.kernels import gemm_sm90
            except ImportError:
                print("sm90: nvatom.kernels.gemm_sm90 not present, skipped")
                continue
            if not hasattr(gemm_sm90, "gemm_provider"):
                print("sm90: nvatom.kernels.gemm_sm90 defines no gemm_provider() yet, skipped "
                      "(see docs/runtime.md, 'Dispatch and the plug-in point')")
                continue
            out[n] = gemm_sm90.gemm_provider()
        else:
            raise SystemExit(f"unknown kernel family '{n}' (sm80, sm90)")
    return out


def _time(fn, sets: int, iters: int, warmup: int) -> float:
    """Median milliseconds of ``fn(i)`` over ``iters`` launches, rotating i over ``sets``."""
    import torch

    for i in range(warmup):
        fn(i % sets)
    torch.cuda.synchronize()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
    for i in range(iters):
        starts[i].record()
        fn(i % sets)
        ends[i].record()
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) for s, e in zip(starts, ends, strict=True))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kernels", default="sm80", help="comma-separated: sm80, sm90")
    ap.add_argument("--dtype", default="bf16", choices=["bf16", "f16"])
    ap.add_argument("--shapes", nargs="*", default=None, help="MxNxK ... (default: the set above)")
    ap.add_argument("--sm80-configs", nargs="*", default=[], metavar="BMxBNxBK/WMxWN/S",
                    help="extra SM80 tilings to time beside the default one")
    ap.add_argument("--iters", type=int, default=50)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--out", default=str(ROOT / "reports" / "bench" / "gemm.json"))
    args = ap.parse_args(argv)

    import torch

    from nvatom.gemm import check_operands
    from nvatom.runtime.launch import get_kernel

    shapes = DEFAULT_SHAPES if not args.shapes else [
        tuple(int(x) for x in s.lower().split("x")) for s in args.shapes]
    providers = _providers([k for k in args.kernels.split(",") if k], args.sm80_configs)
    dt = {"bf16": torch.bfloat16, "f16": torch.float16}[args.dtype]
    props = torch.cuda.get_device_properties(0)
    cap = torch.cuda.get_device_capability(0)
    l2 = getattr(props, "L2_cache_size", 50 * 2**20)
    rows = []
    for m, n, k in shapes:
        per_set = (m * k + k * n) * 2
        sets = max(2, min(32, math.ceil(3 * l2 / per_set)))
        a = [torch.randn(m, k, device="cuda", dtype=dt) for _ in range(sets)]
        b = [torch.randn(k, n, device="cuda", dtype=dt) for _ in range(sets)]
        d = torch.empty(m, n, device="cuda", dtype=dt)
        flop = 2.0 * m * n * k
        ms = _time(lambda i, a=a, b=b, d=d: torch.matmul(a[i], b[i], out=d), sets,
                   args.iters, args.warmup)
        row = {"m": m, "n": n, "k": k, "dtype": args.dtype, "input_sets": sets,
               "cublas_ms": ms, "cublas_tflops": flop / ms / 1e9, "kernels": {}}
        ref = torch.matmul(a[0], b[0]).float()
        for name, prov in providers.items():
            infos = [check_operands(a[i], b[i], d) for i in range(sets)]
            problem = infos[0][3]
            if not prov.supports(problem, cap):
                continue
            t0 = time.perf_counter()
            launch_plan = prov.plan(problem, prov.target(cap))
            ptx = launch_plan.source.build(prov.target(cap))
            emit_s = time.perf_counter() - t0
            kern = get_kernel(launch_plan.source, prov.target(cap))
            argsets = [launch_plan.args(ai, bi, oi, problem) for ai, bi, oi, _ in infos]

            def run(i: int, kern=kern, lp=launch_plan, argsets=argsets) -> None:
                kern.launch(lp.grid, lp.block, argsets[i], shmem=lp.shmem, cluster=lp.cluster)

            run(0)
            torch.cuda.synchronize()
            err = ((d.float() - ref).abs().max() / ref.abs().max()).item()
            kms = _time(run, sets, args.iters, args.warmup)
            row["kernels"][name] = {
                "kernel": launch_plan.source.name, "ms": kms, "tflops": flop / kms / 1e9,
                "ratio_to_cublas": ms / kms, "max_rel_err_vs_cublas": err,
                "ptx_build_emit_s": emit_s, "ptx_lines": ptx.count("\n"),
            }
        rows.append(row)
        a.clear()
        b.clear()
        torch.cuda.empty_cache()

    names = list(providers)
    print(f"device: {props.name} (sm_{cap[0]}{cap[1]}), dtype {args.dtype}")
    print(f"{'M':>6} {'N':>6} {'K':>6}  {'kernel':<24} {'TFLOP/s':>8} {'ms':>8} {'vs cuBLAS':>9}")
    for r in rows:
        shape = f"{r['m']:>6} {r['n']:>6} {r['k']:>6}"
        print(f"{shape}  {'cuBLAS (torch.matmul)':<24} {r['cublas_tflops']:>8.1f} "
              f"{r['cublas_ms']:>8.3f} {1:>9.2f}")
        for nme in names:
            kr = r["kernels"].get(nme)
            if kr:
                print(f"{shape}  {nme:<24} {kr['tflops']:>8.1f} {kr['ms']:>8.3f} "
                      f"{kr['ratio_to_cublas']:>9.2f}")
    for nme in names:
        emits = [r["kernels"][nme]["ptx_build_emit_s"] for r in rows if nme in r["kernels"]]
        if emits:
            print(f"{nme}: Python build+emit of the PTX {1e3 * min(emits):.0f} ms "
                  f"(ptxas excluded)")
    report = {"device": props.name, "capability": f"{cap[0]}.{cap[1]}",
              "torch": torch.__version__, "commit": _commit(),
              "timing": f"median of {args.iters} CUDA-event-timed launches, {args.warmup} "
                        "warm-ups, inputs rotated over input_sets buffers",
              "results": rows}
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
