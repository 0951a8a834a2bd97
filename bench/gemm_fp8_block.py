"""FP8 block scales (DeepSeek-V3: ``scale_a`` 1 x 128, ``scale_b`` 128 x 128) against our
row-wise FP8 kernel and bf16 cuBLAS at the same shapes, with the error against float64.

    PYTHONPATH=src python3 bench/gemm_fp8_block.py [--shapes 4096x4096x4096 ...]
        [--rounds 7] [--batch 10] [--out reports/bench/gemm_fp8_block.json]

``torch._scaled_mm`` on this torch build refuses block scales, so the anchors are
``nvatom.gemm`` with row-wise scales (the same FP8 inputs; its promoted main loop), bf16
``torch.matmul`` (cuBLAS) on the inputs decoded to bf16, and ``torch._scaled_mm`` with
row-wise scales.  Same process, rounds interleaved with alternating order, ``--batch``
launches between two CUDA events over three rotating input sets (A and B not in L2 from the
launch before); the median over rounds is reported with the spread.  Relative error
``|out - ref| / |ref|`` (Frobenius) against the float64 product of the decoded inputs with
the scales expanded.  Writes JSON with the device and commit; asserts nothing.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT))  # bench._report

from bench import _report as R  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shapes", nargs="*", default=["4096x4096x4096", "8192x8192x8192"])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--batch", type=int, default=10)
    ap.add_argument("--out", type=Path, default=ROOT / "reports/bench/gemm_fp8_block.json")
    args = ap.parse_args(argv)
    import torch

    import nvatom

    f8 = torch.float8_e4m3fn
    rows: list[dict[str, Any]] = []
    for text in args.shapes:
        m, n, k = (int(x) for x in text.split("x"))
        kb, nb = -(-k // 128), -(-n // 128)
        sets = []
        for s in range(3):
            g = torch.Generator(device="cuda").manual_seed(s)
            a = (torch.randn(m, k, device="cuda", generator=g) * 0.5).to(f8)
            w = (torch.randn(n, k, device="cuda", generator=g) * 0.5).to(f8)
            sets.append({
                "a": a, "b": w.t(),
                "sa_blk": torch.rand(m, kb, device="cuda", generator=g) + 0.25,
                "sb_blk": (torch.rand(nb, kb, device="cuda", generator=g) + 0.25).t(),
                "sa_row": torch.rand(m, 1, device="cuda", generator=g) + 0.25,
                "sb_row": torch.rand(1, n, device="cuda", generator=g) + 0.25,
                "a16": a.to(torch.bfloat16), "b16": w.t().to(torch.bfloat16),
                "out": torch.empty(m, n, device="cuda", dtype=torch.bfloat16)})
        fns = {
            "nvatom-block": lambda d: nvatom.gemm(d["a"], d["b"], d["out"],
                                                  scale_a=d["sa_blk"], scale_b=d["sb_blk"]),
            "nvatom-row": lambda d: nvatom.gemm(d["a"], d["b"], d["out"],
                                                scale_a=d["sa_row"], scale_b=d["sb_row"]),
            "scaled_mm-row": lambda d: torch._scaled_mm(d["a"], d["b"], d["sa_row"],
                                                         d["sb_row"],
                                                         out_dtype=torch.bfloat16),
            "cublas-bf16": lambda d: torch.matmul(d["a16"], d["b16"], out=d["out"]),
        }
        # accuracy (set 0) against float64
        d = sets[0]
        ea = d["sa_blk"].double().repeat_interleave(128, 1)[:, :k]
        eb = d["sb_blk"].double().repeat_interleave(128, 0)[:k].repeat_interleave(128, 1)[:, :n]
        errs: dict[str, float] = {}
        ref = (d["a"].double() * ea) @ (d["b"].double() * eb)
        o = torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
        nvatom.gemm(d["a"], d["b"], o, scale_a=d["sa_blk"], scale_b=d["sb_blk"])
        errs["nvatom-block"] = ((o.double() - ref).norm() / ref.norm()).item()
        del ref, ea, eb
        ref = d["a"].double() @ d["b"].double() * d["sa_row"].double() * d["sb_row"].double()
        o.fill_(float("nan"))
        nvatom.gemm(d["a"], d["b"], o, scale_a=d["sa_row"], scale_b=d["sb_row"])
        errs["nvatom-row"] = ((o.double() - ref).norm() / ref.norm()).item()
        r = fns["scaled_mm-row"](d)
        errs["scaled_mm-row"] = ((r.double() - ref).norm() / ref.norm()).item()
        ref16 = d["a"].double() @ d["b"].double()
        errs["cublas-bf16"] = ((torch.matmul(d["a16"], d["b16"]).double() - ref16).norm()
                               / ref16.norm()).item()
        del ref, ref16, o, r
        times: dict[str, list[float]] = {name: [] for name in fns}
        for name in fns:  # warm up
            for dd in sets:
                fns[name](dd)
        torch.cuda.synchronize()
        order = list(fns)
        for rnd in range(args.rounds):
            for name in (order if rnd % 2 == 0 else order[::-1]):
                e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                e0.record()
                for i in range(args.batch):
                    fns[name](sets[i % 3])
                e1.record()
                e1.synchronize()
                times[name].append(e0.elapsed_time(e1) / args.batch * 1e-3)
        flops = 2 * m * n * k
        row: dict[str, Any] = {"shape": [m, n, k], "rel_err_vs_float64": errs}
        for name, ts in times.items():
            med = statistics.median(ts)
            row[name] = {"tflops_median": flops / med / 1e12,
                         "tflops_min": flops / max(ts) / 1e12,
                         "tflops_max": flops / min(ts) / 1e12}
        base = row["nvatom-block"]["tflops_median"]
        row["ratio_block_vs"] = {name: base / row[name]["tflops_median"]
                                 for name in fns if name != "nvatom-block"}
        rows.append(row)
        del sets
        torch.cuda.empty_cache()
    result = {**R.torch_header(torch), "rounds": args.rounds, "batch": args.batch,
              "rows": rows}
    R.write_json(args.out, result)
    for row in rows:
        print("x".join(map(str, row["shape"])))
        for name in ("nvatom-block", "nvatom-row", "scaled_mm-row", "cublas-bf16"):
            t = row[name]
            print(f"  {name:14} {t['tflops_median']:7.1f} TF/s [{t['tflops_min']:.0f}-"
                  f"{t['tflops_max']:.0f}]  rel err {row['rel_err_vs_float64'][name]:.2e}"
                  + (f"  block/this {row['ratio_block_vs'][name]:.3f}"
                     if name in row["ratio_block_vs"] else ""))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
