"""Grouped GEMM (MoE): ``nvatom.grouped_gemm`` against ``torch._grouped_mm`` in one process.

    PYTHONPATH=src python3 bench/gemm_grouped.py [--rounds 5] [--batch 10]
        [--variants] [--quick] [--out reports/bench/gemm_grouped.json]

Cases (bf16): 8 experts of 2048 tokens x 4096 x 4096 (the issue's anchor), 64 experts with
random tokens per expert (0-1024, DeepSeek-V3-like: hidden 7168 -> 2048), 8 experts with
0-4096 tokens (7168 -> 4096) and 64 experts with 0-4096 tokens (7168 -> 2048).
The kernel of each case is the one ``nvatom.kernels.sm90.tuning.SCHEDULE_RULES["grouped"]``
picks (recorded as ``schedule`` per row; docs/perf.md, "Grouped ping-pong and schedule
choice").  ``--variants`` adds every ``group_sched`` of the kernel (launched directly, no host
checks) and, on the anchor, the plain GEMM of the same work (one 16384 x 4096 x 4096
``nvatom.gemm`` and ``torch.mm``).  ``--quick`` keeps the first two cases.  Rounds interleaved
with a rotating order; ``--batch`` calls between two CUDA events (host time per call counts
where it exceeds the GPU's); the median over rounds and the spread.  Each output is checked
first against float64 (relative error, Frobenius), NaN-poisoned (every group's rows written,
the rows past the last group untouched).  Rows "device offsets" pass the offsets as a CUDA
tensor (the group table is built on the GPU, no host read); "graph" rows replay a CUDA graph
of one call (nvatom's and ``torch._grouped_mm``'s, each captured after a warm-up).
``torch._grouped_mm(a, b, offs=)`` takes B as (G, K, N); its layout requirement is probed
(row-major, else K-major).  Writes JSON with the device
and commit; asserts nothing (a wrong output is marked WRONG in the table).
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


def _variant(nvatom: Any, torch: Any, a: Any, b: Any, ends: list[int], out: Any,
             sched: str) -> Any:
    """A direct launcher of the grouped kernel with ``group_sched`` = ``sched`` for these
    operands (planned once through ``nvatom.grouped_gemm``, then called without host work)."""
    import nvatom.gemm as ng

    with ng.grouped_variant(group_sched=sched) as calls:
        nvatom.grouped_gemm(a, b, ends, out=out)
        run, params, buf = next(iter(calls.values()))
    stream = torch.cuda.current_stream().cuda_stream

    def call(run: Any = run, params: Any = params, buf: Any = buf) -> None:
        run(params, stream)
    return call


def _graphed(torch: Any, fn: Any) -> Any:
    """``fn`` captured in a CUDA graph (after one warm-up call outside it); returns the
    graph's replay."""
    fn()
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    return graph.replay


def main(argv: list[str] | None = None) -> int:
    from nvatom.kernels.sm90.config import GROUP_SCHEDS, GemmSm90Config
    from nvatom.kernels.sm90.tuning import grouped_schedule

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--batch", type=int, default=10)
    ap.add_argument("--variants", action="store_true")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--scheds", default=",".join(GROUP_SCHEDS),
                    help="group_sched values for --variants (comma-separated)")
    ap.add_argument("--out", type=Path, default=ROOT / "reports/bench/gemm_grouped.json")
    args = ap.parse_args(argv)
    import torch

    import nvatom

    cases = R.moe_cases()
    if args.quick:
        cases = cases[:2]
    default_sched = GemmSm90Config().group_sched
    rows: list[dict[str, Any]] = []
    for label, sizes, n, k in cases:
        g = len(sizes)
        ends = [sum(sizes[: i + 1]) for i in range(g)]
        total = ends[-1]
        tail = 8  # rows past the last group: must stay NaN
        a = torch.randn(total + tail, k, device="cuda").to(torch.bfloat16)
        b = torch.randn(g, k, n, device="cuda").to(torch.bfloat16)
        offs = torch.tensor(ends, dtype=torch.int32, device="cuda")
        offs_host = torch.tensor(ends, dtype=torch.int32)
        out = torch.empty(total + tail, n, device="cuda", dtype=torch.bfloat16)
        tb = b
        try:
            torch._grouped_mm(a[:total], b, offs=offs)
        except RuntimeError:
            tb = b.transpose(1, 2).contiguous().transpose(1, 2)  # K-major per group
        outs: dict[str, Any] = {}
        fns: dict[str, Any] = {
            "nvatom": lambda a=a, b=b, o=offs_host, out=out: nvatom.grouped_gemm(a, b, o,
                                                                                out=out),
            "torch._grouped_mm": lambda a=a[:total], tb=tb, o=offs: torch._grouped_mm(
                a, tb, offs=o)}
        # offsets on the GPU (no host read: the group table is built by a kernel), and both
        # libraries captured in CUDA graphs (issue 27's targets)
        out_d = torch.empty_like(out)
        outs["nvatom (device offsets)"] = out_d
        fns["nvatom (device offsets)"] = (lambda a=a, b=b, o=offs, out=out_d:
                                          nvatom.grouped_gemm(a, b, o, out=out))
        out_g = torch.empty_like(out)
        outs["nvatom (device offsets, graph)"] = out_g
        fns["nvatom (device offsets, graph)"] = _graphed(
            torch, lambda a=a, b=b, o=offs, out=out_g: nvatom.grouped_gemm(a, b, o, out=out))
        tg: dict[str, Any] = {}
        fns["torch._grouped_mm (graph)"] = _graphed(
            torch, lambda a=a[:total], tb=tb, o=offs, tg=tg: tg.__setitem__(
                "out", torch._grouped_mm(a, tb, offs=o)))
        if args.variants:
            for sched in args.scheds.split(","):
                o = torch.empty_like(out)
                outs[f"nvatom[{sched}]"] = o
                o.fill_(float("nan"))
                fns[f"nvatom[{sched}]"] = _variant(nvatom, torch, a, b, ends, o, sched)
        plain = args.variants and len(set(sizes)) == 1
        if plain:  # the same work as one GEMM (per-group shapes equal: M = total)
            a2, b2 = a[:total], b[0]
            c2 = torch.empty(total, n, device="cuda", dtype=torch.bfloat16)
            fns["nvatom.gemm (one M=total GEMM)"] = (lambda a2=a2, b2=b2, c2=c2:
                                                     nvatom.gemm(a2, b2, out=c2))
            fns["torch.mm (one M=total GEMM)"] = lambda a2=a2, b2=b2: torch.mm(a2, b2)
        checks: dict[str, Any] = {}
        for name, fn in fns.items():
            if name == "nvatom":
                out.fill_(float("nan"))
            elif name in outs:
                outs[name].fill_(float("nan"))
            r = fn()
            if name in outs:
                r = outs[name]
            elif name == "nvatom":
                r = out
            elif name == "torch._grouped_mm (graph)":
                r = tg["out"]
            if "one M=total" in name:
                checks[name] = {"rel_err": float((r.double() - a[:total].double() @ b[0].double())
                                                 .norm() / (a[:total].double() @ b[0].double())
                                                 .norm())}
            else:
                checks[name] = R.grouped_error(torch, r if r.shape[0] == total + tail else
                                      torch.cat([r, torch.full((tail, n), float("nan"),
                                                               device="cuda", dtype=r.dtype)]),
                                      a, b, ends)
            torch.cuda.synchronize()
        for fn in fns.values():
            fn()
        torch.cuda.synchronize()
        times = R.rotating_rounds(torch, fns, args.rounds, args.batch)
        flops = 2 * total * n * k
        row: dict[str, Any] = {"case": label, "groups": g, "tokens": sizes, "n": n, "k": k,
                               "checks": checks, "default_group_sched": default_sched,
                               "schedule": grouped_schedule(("bf16", "bf16", "N"), ends, n, k),
                               "grouped_mm_b_layout": "row-major" if tb is b else "K-major"}
        ref_t = statistics.median(times["torch._grouped_mm"])
        for name, ts in times.items():
            row[name] = {"tflops_median": flops / statistics.median(ts) / 1e12,
                         "tflops_min": flops / max(ts) / 1e12,
                         "tflops_max": flops / min(ts) / 1e12,
                         "ratio_vs_grouped_mm": ref_t / statistics.median(ts),
                         # the same round's _grouped_mm time over this one's: the clock
                         # drifts between rounds, less within one
                         "ratio_per_round": [r / t for r, t in zip(times["torch._grouped_mm"],
                                                                   ts, strict=True)]}
            pr = row[name]["ratio_per_round"]
            row[name]["ratio_round_median"] = statistics.median(pr)
        row["ratio"] = row["nvatom"]["ratio_vs_grouped_mm"]
        row["ratio_round_median"] = row["nvatom"]["ratio_round_median"]
        rows.append(row)
        print(f"{label} ({row['schedule']}):")
        for name in times:
            c = checks[name]
            bad = c.get("nan") or not c.get("tail_untouched", True) or c["rel_err"] > 5e-3
            print(f"  {name:34s} {row[name]['tflops_median']:7.1f} TF/s "
                  f"({row[name]['tflops_min']:.0f}-{row[name]['tflops_max']:.0f})  "
                  f"x{row[name]['ratio_vs_grouped_mm']:.3f} (per round "
                  f"x{row[name]['ratio_round_median']:.3f})  err {c['rel_err']:.2e}"
                  f"{'  WRONG' if bad else ''}", flush=True)
    result = {**R.torch_header(torch), "rounds": args.rounds, "batch": args.batch,
              "rows": rows}
    R.write_json(args.out, result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
