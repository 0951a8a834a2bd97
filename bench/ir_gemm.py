"""The SM90 GEMM written in the IR (tests/ir/gemm_sm90.mlir) against the Python-built SM90 GEMM
(src/nvatom/kernels/sm90/) in the same run.

    PYTHONPATH=src:. python3 bench/ir_gemm.py [--shapes MxNxK ...] [--rounds 7] [--batch 20]
        [--out reports/bench/ir_gemm.json] [--ptx-dir DIR]

Contenders, all on the same bf16 inputs (A row-major, B K-major: ``bt`` N x K row-major),
bf16 output:

* ``ir``: the .mlir file compiled by ``nvatom compile`` (the PTX it writes is checked to be the
  library lowering's, which the launch uses: tests/gpu/ir_gemm_host.py);
* ``py``: the Python-built kernel in the same configuration (``default_config("bf16",
  b_major="K")``: 128 x 256 x 64 tiles, 4 stages, 2 consumer warpgroups, setmaxnreg 40/232,
  persistent, raster group 8) through its direct launcher ``prepare_gemm_sm90``;
* ``torch``: ``torch.matmul(a, bt.T)`` (cuBLAS), for context.

One measurement = ``--batch`` launches between a pair of CUDA events; rounds interleave the
contenders (order alternating); the median and spread (min, max) over rounds are reported,
and the ratio ir / py of the medians.  Each output is checked first against the float64
product (max error relative to max |ref|).  ``--ptx-dir`` writes both kernels' PTX there
(for ptxas -v / cuobjdump on the device); ``--sass`` assembles both with the ptxas on the
PATH (else triton's) and records registers, spills and the SASS HGMMA count (cuobjdump).
Commit from ``NVATOM_COMMIT`` where the tree has no git.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT))  # tests.gpu.ir_gemm_host, bench._report

from bench import _report as R  # noqa: E402


def _cli_ptx() -> str:
    """The PTX ``nvatom compile`` writes for the .mlir file."""
    from tests.gpu import ir_gemm_host as H

    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "gemm.ptx"
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT / "src"),
                                                           os.environ.get("PYTHONPATH", "")]))
        subprocess.run([sys.executable, "-m", "nvatom.cli", "compile", str(H.IR_FILE),
                        "--target", "sm_90a", "-o", str(out), "--no-ptxas"], check=True,
                       env=env)
        return out.read_text()


def _tool(name: str) -> str | None:
    path = shutil.which(name)
    if path:
        return path
    try:
        import triton

        cand = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / name
        return str(cand) if cand.exists() else None
    except ImportError:
        return None


def _sass(ptx: str) -> dict[str, Any]:
    """``ptxas -v`` registers/spills and the SASS HGMMA count of a PTX module (sm_90a)."""
    ptxas, cuobjdump = _tool("ptxas"), _tool("cuobjdump")
    if ptxas is None or cuobjdump is None:
        return {"skipped": "no ptxas/cuobjdump"}
    with tempfile.TemporaryDirectory() as tmp:
        src, cubin = Path(tmp) / "k.ptx", Path(tmp) / "k.cubin"
        src.write_text(ptx)
        log = subprocess.run([ptxas, "-arch=sm_90a", "-v", str(src), "-o", str(cubin)],
                             capture_output=True, text=True, check=True).stderr
        sass = subprocess.run([cuobjdump, "-sass", str(cubin)], capture_output=True,
                              text=True, check=True).stdout
    regs = re.search(r"Used (\d+) registers", log)
    spills = re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", log)
    return {"registers": int(regs.group(1)) if regs else None,
            "spill_bytes": sum(map(int, spills.groups())) if spills else None,
            "warnings": log.lower().count("warning"),
            "sass_hgmma": len(re.findall(r"\bHGMMA\.", sass)),
            "sass_instructions": len(re.findall(r"/\*[0-9a-f]{4}\*/", sass))}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shapes", nargs="*", default=["8192x8192x8192", "4096x4096x4096",
                                                     "8192x8192x2048"])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--batch", type=int, default=20)
    ap.add_argument("--out", default=str(ROOT / "reports" / "bench" / "ir_gemm.json"))
    ap.add_argument("--ptx-dir", default=None)
    ap.add_argument("--sass", action="store_true")
    args = ap.parse_args(argv)

    import torch
    from tests.gpu import ir_gemm_host as H

    from nvatom.gemm_providers import prepare_gemm_sm90
    from nvatom.kernels.sm90.gemm import build_gemm_sm90
    from nvatom.kernels.sm90.launch import default_config

    ir_ptx, info = H.lowered()
    cli = _cli_ptx()
    assert cli == ir_ptx, "nvatom compile wrote other PTX than the library lowering"
    cfg = default_config("bf16", "bf16", b_major="K", schedule="cooperative")  # the IR design
    py_ptx = build_gemm_sm90(cfg).emit()
    if args.ptx_dir:
        d = Path(args.ptx_dir)
        d.mkdir(parents=True, exist_ok=True)
        (d / "ir_gemm.ptx").write_text(ir_ptx)
        (d / "py_gemm.ptx").write_text(py_ptx)
    sass = {"ir": _sass(ir_ptx), "py": _sass(py_ptx)} if args.sass else None
    if sass:
        print(f"ptxas/SASS: {sass}")
    props = torch.cuda.get_device_properties(0)
    print(f"device: {props.name}, torch {torch.__version__}, commit {R.commit()}")
    results: list[dict[str, Any]] = []
    for text in args.shapes:
        m, n, k = (int(x) for x in text.split("x"))
        g = torch.Generator(device="cuda").manual_seed(m + n + k)
        a = torch.randn(m, k, generator=g, device="cuda").to(torch.bfloat16)
        bt = torch.randn(n, k, generator=g, device="cuda").to(torch.bfloat16)
        outs = {c: torch.full((m, n), float("nan"), dtype=torch.bfloat16, device="cuda")
                for c in ("ir", "py", "torch")}
        runs = {
            "ir": H.prepare(a, bt, outs["ir"]),
            "py": prepare_gemm_sm90(a, bt.t(), outs["py"], cfg),
            "torch": lambda o=outs["torch"], x=a, y=bt: torch.matmul(x, y.t(), out=o),
        }
        ref = (a.double() @ bt.double().t())
        scale = ref.abs().max().item()
        errs = {}
        for c, run in runs.items():
            run()
            torch.cuda.synchronize()
            errs[c] = ((outs[c].double() - ref).abs().max().item() / scale
                       if torch.isfinite(outs[c]).all() else float("inf"))
        ev = [torch.cuda.Event(enable_timing=True) for _ in range(2)]
        for run in runs.values():  # warm up
            for _ in range(3):
                run()
        times: dict[str, list[float]] = {c: [] for c in runs}
        order = list(runs)
        for r in range(args.rounds):
            for c in (order if r % 2 == 0 else order[::-1]):
                ev[0].record()
                for _ in range(args.batch):
                    runs[c]()
                ev[1].record()
                ev[1].synchronize()
                times[c].append(ev[0].elapsed_time(ev[1]) / args.batch * 1e-3)
        flop = 2.0 * m * n * k
        row: dict[str, Any] = {"shape": [m, n, k]}
        for c, ts in times.items():
            tf = [flop / t / 1e12 for t in ts]
            row[c] = {"tflops_median": round(statistics.median(tf), 1),
                      "tflops_min": round(min(tf), 1), "tflops_max": round(max(tf), 1),
                      "ms_median": round(statistics.median(ts) * 1e3, 4),
                      "max_rel_error": errs[c]}
        row["ratio_ir_over_py"] = round(row["ir"]["tflops_median"] / row["py"]["tflops_median"],
                                        3)
        results.append(row)
        print(f"{m}x{n}x{k}: ir {row['ir']['tflops_median']} TF/s "
              f"[{row['ir']['tflops_min']}..{row['ir']['tflops_max']}], py "
              f"{row['py']['tflops_median']} [{row['py']['tflops_min']}.."
              f"{row['py']['tflops_max']}], torch {row['torch']['tflops_median']}; "
              f"ir/py {row['ratio_ir_over_py']}; errors ir {errs['ir']:.2e} py "
              f"{errs['py']:.2e} torch {errs['torch']:.2e}")
        del a, bt, outs, runs, ref
        torch.cuda.empty_cache()
    report = {
        "what": "SM90 bf16 GEMM written in the IR (tests/ir/gemm_sm90.mlir) vs the Python-built "
                "kernel (default_config('bf16', b_major='K')) and torch.matmul, same run",
        "device": props.name, "torch": torch.__version__, "commit": R.commit(),
        "date": R.utc_date("seconds"),
        "rounds": args.rounds, "batch": args.batch,
        "ir_kernel": {"threads": info.threads, "dynamic_shared_bytes": info.dynamic_shared},
        "ptxas_sass": sass,
        "results": results,
    }
    R.write_json(args.out, report)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
