"""FP8 grouped GEMM (MoE in e4m3): ``nvatom.grouped_gemm`` against ``torch._scaled_grouped_mm``.

    PYTHONPATH=src python3 bench/gemm_grouped_fp8.py [--rounds 9] [--batch 5] [--quick]
        [--out reports/bench/gemm_grouped_fp8.json]

The four MoE cases of bench/gemm_grouped.py (8 x 2048 tokens 4096 -> 4096; 64 experts 0-1024
tokens 7168 -> 2048; 8 experts 0-4096 tokens 7168 -> 4096; 64 experts 0-4096 tokens 7168 ->
2048), e4m3 operands with row-wise scales (``scale_a`` per token, ``scale_b`` per expert and
output column: the one mode ``torch._scaled_grouped_mm`` takes on the H100; B as the weights
``w`` (G, N, K) transposed, K-major), bf16 output.  Pairs timed against each other: the
promoted default against ``_scaled_grouped_mm(use_fast_accum=False)`` and ``fast_accum=True``
against ``use_fast_accum=True``; per-expert per-tensor scales (nvatom only) as a third row.
Each output is checked first against float64 (relative Frobenius error; NaN-poisoned, rows
past the last group untouched).  Rounds interleaved with a rotating order, ``--batch`` calls
between two CUDA events, medians and spreads, and the median of per-round ratios (the clock
drifts between rounds).  Writes JSON with the device and commit; asserts nothing.
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

TAIL = 8  # rows past the last group: must stay NaN


def _error(torch: Any, got: Any, a: Any, b: Any, sa: Any, sb: Any, ends: list[int]) -> dict:
    """:func:`bench._report.grouped_error` with the scales: row-wise ``sa`` (total,), ``sb``
    (G, N), or per-tensor ``sa`` one element, ``sb`` (G,)."""
    def scale(ref: Any, start: int, end: int, i: int) -> Any:
        if sb.dim() == 2:
            return ref * sa[start:end, None].double() * sb[i][None, :].double()
        return ref * float(sa) * float(sb[i])
    return R.grouped_error(torch, got, a, b, ends, scale)


def _case(torch: Any, nvatom: Any, args: Any, label: str, sizes: list[int], n: int,
          k: int) -> dict[str, Any]:
    """Check and time one MoE case (module docstring)."""
    sgm = torch._scaled_grouped_mm
    f8 = torch.float8_e4m3fn
    g = len(sizes)
    ends = [sum(sizes[: i + 1]) for i in range(g)]
    total = ends[-1]
    a = torch.randn(total + TAIL, k, device="cuda").to(f8)
    b = torch.randn(g, n, k, device="cuda").to(f8).transpose(1, 2)  # (G, K, N) K-major
    sa = torch.rand(total + TAIL, device="cuda") + 0.5
    sb = torch.rand(g, n, device="cuda") + 0.5
    st_a = torch.rand((), device="cuda") + 0.5
    st_b = torch.rand(g, device="cuda") + 0.5
    offs = torch.tensor(ends, dtype=torch.int32, device="cuda")
    outs = {name: torch.empty(total + TAIL, n, device="cuda", dtype=torch.bfloat16)
            for name in ("nvatom", "nvatom fast", "nvatom per-tensor")}
    at, sat = a[:total], sa[:total]
    fns: dict[str, Any] = {
        "nvatom": lambda: nvatom.grouped_gemm(a, b, ends, out=outs["nvatom"], scale_a=sa,
                                              scale_b=sb),
        "_scaled_grouped_mm": lambda: sgm(at, b, sat, sb, offs=offs,
                                          out_dtype=torch.bfloat16),
        "nvatom fast": lambda: nvatom.grouped_gemm(a, b, ends, out=outs["nvatom fast"],
                                                   scale_a=sa, scale_b=sb, fast_accum=True),
        "_scaled_grouped_mm fast": lambda: sgm(at, b, sat, sb, offs=offs,
                                               out_dtype=torch.bfloat16,
                                               use_fast_accum=True),
        "nvatom per-tensor": lambda: nvatom.grouped_gemm(
            a, b, ends, out=outs["nvatom per-tensor"], scale_a=st_a, scale_b=st_b)}
    refs = {"nvatom": "_scaled_grouped_mm", "nvatom fast": "_scaled_grouped_mm fast",
            "nvatom per-tensor": "_scaled_grouped_mm"}
    checks: dict[str, Any] = {}
    for name, fn in fns.items():
        if name in outs:
            outs[name].fill_(float("nan"))
            fn()
            got = outs[name]
        else:
            got = torch.cat([fn(), torch.full((TAIL, n), float("nan"), device="cuda",
                                              dtype=torch.bfloat16)])
        scales = (st_a, st_b) if name == "nvatom per-tensor" else (sa, sb)
        checks[name] = _error(torch, got, a, b, *scales, ends)
        torch.cuda.synchronize()
    times = R.rotating_rounds(torch, fns, args.rounds, args.batch)
    flops = 2 * total * n * k
    row: dict[str, Any] = {"case": label, "groups": g, "tokens": sizes, "n": n, "k": k,
                           "checks": checks}
    print(f"{label}:")
    for name, ts in times.items():
        entry = {"tflops_median": flops / statistics.median(ts) / 1e12,
                 "tflops_min": flops / max(ts) / 1e12,
                 "tflops_max": flops / min(ts) / 1e12}
        ref = refs.get(name)
        if ref:
            per_round = [r / t for r, t in zip(times[ref], ts, strict=True)]
            entry.update(vs=ref, ratio_per_round=per_round,
                         ratio_round_median=statistics.median(per_round),
                         ratio_of_medians=statistics.median(times[ref]) / statistics.median(ts))
        row[name] = entry
        c = checks[name]
        bad = c["nan"] or not c["tail_untouched"] or c["rel_err"] > 5e-3
        ratio = (f"  x{entry['ratio_round_median']:.3f} vs {ref} (per round)"
                 if ref else "")
        print(f"  {name:26s} {entry['tflops_median']:7.1f} TF/s "
              f"({entry['tflops_min']:.0f}-{entry['tflops_max']:.0f})  err "
              f"{c['rel_err']:.3e}{'  WRONG' if bad else ''}{ratio}", flush=True)
    return row


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--batch", type=int, default=5)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--out", type=Path, default=ROOT / "reports/bench/gemm_grouped_fp8.json")
    args = ap.parse_args(argv)
    import torch

    import nvatom

    cases = R.moe_cases()
    if args.quick:
        cases = cases[:2]
    rows = [_case(torch, nvatom, args, label, sizes, n, k)
            for label, sizes, n, k in cases]
    result = {**R.torch_header(torch), "rounds": args.rounds, "batch": args.batch,
              "rows": rows}
    R.write_json(args.out, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
