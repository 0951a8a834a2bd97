"""A/B of the SM90 kernel's schedules and tiles on plain GEMMs, long interleaved runs.

    PYTHONPATH=src python3 bench/schedule_ab.py [--rounds 25] [--batch 10] [--fp8]
        [--shapes 8192x8192x8192,4096x4096x4096] [--out reports/bench/schedule_ab.json]

16-bit (bf16 and f16, row-major B): the cooperative 128 x 256 kernel, ping-pong 128 x 128
and ping-pong 128 x 192 (``default_config(schedule=...)``, launched directly), the public
``nvatom.gemm`` (whatever its schedule rule picks) and ``torch.matmul``.  ``--fp8``: e4m3
with per-tensor and row-wise scales, the promoted 128 x 192 and 128 x 256 (wide) tiles,
``nvatom.gemm`` and ``torch._scaled_mm`` (default accumulation).  Every contender is checked
first (sampled rows against float64, NaN-poisoned outputs); then ``--rounds`` rounds in a
rotating order (:func:`bench._report.rotating_rounds`), ``--batch`` launches per timed
sample.  Reports the median TF/s, and per contender the median and the quartiles of the
per-round ratio to the torch reference of the same round (the clock moves between rounds,
less within one).  Writes JSON with the device and commit; asserts nothing.
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

#: FP8 candidates timed beside the shipped tiles (``GemmSm90Config`` settings)
FP8_EXTRA: dict[str, dict[str, int | bool]] = {
    "192u2": {"promote": 1, "promote_parts": 2, "promote_temps": 2, "block_n": 192,
              "promote_unroll": 2},
    "192p3u4": {"promote": 1, "promote_parts": 3, "promote_temps": 2, "block_n": 192,
                "promote_unroll": 4},
    "192p3": {"promote": 1, "promote_parts": 3, "promote_temps": 2, "block_n": 192},
    # row-wise only: the scales staged in shared memory by cp.async (row_scale_stage)
    "192st": {"promote": 1, "promote_parts": 2, "promote_temps": 2, "block_n": 192,
              "row_scale_stage": True},
    "256st": {"promote": 1, "promote_parts": 4, "promote_temps": 2, "block_n": 256,
              "promote_unroll": 4, "row_scale_stage": True},
}


def _rel_err(torch: Any, out: Any, a: Any, b: Any, scale: Any = None) -> float:
    """Relative Frobenius error of 64 sampled rows against float64 (NaN counts as wrong)."""
    idx = torch.linspace(0, a.shape[0] - 1, 64, device=a.device).long()
    ref = a[idx].double() @ b.double()
    if scale is not None:
        ref = scale(ref, idx)
    got = out[idx].double()
    if torch.isnan(got).any():
        return float("inf")
    return float((got - ref).norm() / ref.norm())


def _contenders_16(torch: Any, nvatom: Any, dt: str, m: int, n: int, k: int
                   ) -> tuple[dict[str, Any], dict[str, float]]:
    from nvatom.gemm_providers import prepare_gemm_sm90
    from nvatom.kernels.sm90.launch import default_config

    tdt = {"bf16": torch.bfloat16, "f16": torch.float16}[dt]
    a = torch.randn(m, k, device="cuda").to(tdt)
    b = torch.randn(k, n, device="cuda").to(tdt)
    fns: dict[str, Any] = {}
    outs: dict[str, Any] = {}
    for sched in ("cooperative", "pingpong", "pingpong192"):
        o = outs[sched] = torch.full((m, n), float("nan"), device="cuda", dtype=tdt)
        fns[sched] = prepare_gemm_sm90(a, b, o, default_config(dt, dt, "MN", schedule=sched))
    o = outs["nvatom.gemm"] = torch.full((m, n), float("nan"), device="cuda", dtype=tdt)
    fns["nvatom.gemm"] = lambda: nvatom.gemm(a, b, o)
    fns["torch"] = lambda: torch.matmul(a, b)
    errs = {}
    for name, fn in fns.items():
        r = fn()
        errs[name] = _rel_err(torch, r if name == "torch" else outs[name], a, b)
    return fns, errs


def _contenders_fp8(torch: Any, nvatom: Any, mode: str, m: int, n: int, k: int
                    ) -> tuple[dict[str, Any], dict[str, float]]:
    import dataclasses

    from nvatom.gemm_providers import prepare_gemm_sm90
    from nvatom.kernels.sm90.launch import default_config
    from nvatom.kernels.sm90.tuning import FP8_TILE_CHOICES

    f8 = torch.float8_e4m3fn
    a = (torch.randn(m, k, device="cuda")).to(f8)
    b = (torch.randn(n, k, device="cuda")).to(f8).t()
    if mode == "row":
        sa, sb = torch.rand(m, 1, device="cuda") + 0.5, torch.rand(1, n, device="cuda") + 0.5
    else:
        sa, sb = torch.rand((), device="cuda") + 0.5, torch.rand((), device="cuda") + 0.5
    fns: dict[str, Any] = {}
    outs: dict[str, Any] = {}
    base = default_config("e4m3", scale_mode=mode)
    for name, tile in [*((f"{t.get('block_n', 256)}", t) for t, _eff in FP8_TILE_CHOICES),
                       *FP8_EXTRA.items()]:
        if tile.get("row_scale_stage") and mode != "row":
            continue
        cfg = dataclasses.replace(base, **tile)
        o = outs[name] = torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
        fns[name] = prepare_gemm_sm90(a, b, o, cfg, sa, sb)
    o = outs["nvatom.gemm"] = torch.full((m, n), float("nan"), device="cuda",
                                         dtype=torch.bfloat16)
    fns["nvatom.gemm"] = lambda: nvatom.gemm(a, b, o, scale_a=sa, scale_b=sb)
    fns["torch"] = lambda: torch._scaled_mm(a, b, sa, sb, out_dtype=torch.bfloat16)

    def scale(ref: Any, idx: Any) -> Any:
        return ref * (sa[idx].double() if mode == "row" else float(sa)) * sb.double()

    errs = {}
    for name, fn in fns.items():
        r = fn()
        errs[name] = _rel_err(torch, r if name == "torch" else outs[name], a, b, scale)
    return fns, errs


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=25)
    ap.add_argument("--batch", type=int, default=10)
    ap.add_argument("--fp8", action="store_true")
    ap.add_argument("--shapes", default="8192x8192x8192,4096x4096x4096")
    ap.add_argument("--out", type=Path, default=ROOT / "reports/bench/schedule_ab.json")
    args = ap.parse_args(argv)
    import torch

    import nvatom

    shapes = [tuple(int(x) for x in s.split("x")) for s in args.shapes.split(",")]
    kinds = ["tensor", "row"] if args.fp8 else ["bf16", "f16"]
    rows = []
    for m, n, k in shapes:
        for kind in kinds:
            make = _contenders_fp8 if args.fp8 else _contenders_16
            fns, errs = make(torch, nvatom, kind, m, n, k)
            torch.cuda.synchronize()
            times = R.rotating_rounds(torch, fns, args.rounds, args.batch)
            flops = 2 * m * n * k
            row: dict[str, Any] = {"m": m, "n": n, "k": k, "kind": kind, "errors": errs}
            print(f"{m}x{n}x{k} {kind}:")
            for name, ts in times.items():
                per = sorted(r / t for r, t in zip(times["torch"], ts, strict=True))
                q = statistics.quantiles(per, n=4)
                row[name] = {"tflops_median": flops / statistics.median(ts) / 1e12,
                             "ratio_round_median": statistics.median(per),
                             "ratio_q1": q[0], "ratio_q3": q[2],
                             "ratio_of_medians": statistics.median(times["torch"])
                             / statistics.median(ts)}
                e = row[name]
                print(f"  {name:12s} {e['tflops_median']:7.1f} TF/s  per round "
                      f"x{e['ratio_round_median']:.3f} (q {e['ratio_q1']:.3f}-"
                      f"{e['ratio_q3']:.3f})  medians x{e['ratio_of_medians']:.3f}  err "
                      f"{errs[name]:.2e}", flush=True)
            rows.append(row)
    R.write_json(args.out, {**R.torch_header(torch), "rounds": args.rounds,
                            "batch": args.batch, "rows": rows})
    return 0


if __name__ == "__main__":
    sys.exit(main())
