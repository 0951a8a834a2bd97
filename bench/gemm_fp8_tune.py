"""FP8 tuning run for the SM90 kernel: correctness, accuracy and speed of main-loop variants.

    PYTHONPATH=src python3 bench/gemm_fp8_tune.py [--quick] [--out DIR]

One process, one GPU (docs/perf.md, "FP8 promotion"):

1. correctness: every variant on ragged shapes, output poisoned with NaN, against the float64
   product of the decoded inputs (relative Frobenius error, NaN fails);
2. accuracy at M = N = 8192 (4096 with --quick), K = 4096, 8192, 16384: relative error of each
   variant and of ``torch._scaled_mm`` (default and ``use_fast_accum=True``) against float64;
3. speed at 8192^3: the variants and ``_scaled_mm`` interleaved in rounds over rotating input
   sets (median ms per launch, events around a batch), per-tensor and row-wise scales.

``--session5`` (docs/perf.md, "FP8 promoted, session 5"): the A-from-registers variants
(``promote_rs``) next to the shipped tiles and ``nvatom.gemm`` itself; correctness adds
multi-tile shapes; speed at 4096^3 and 8192^3 with the median and spread of the per-round
ratios to ``_scaled_mm`` (each round times every contender once, in a rotating order).

Writes ``tune.json`` under ``--out`` and prints a table.  No assertions about speed.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

VARIANTS: dict[str, dict[str, Any]] = {
    "fast": {},
    "fast192": {"block_n": 192},
    "pr1n2t1": {"promote": 1, "promote_parts": 2, "promote_temps": 1},
    "pr192n2t2": {"promote": 1, "promote_parts": 2, "promote_temps": 2, "block_n": 192},
    "pr192n4t2": {"promote": 1, "promote_parts": 4, "promote_temps": 2, "block_n": 192},
    "pr192c2": {"promote": 1, "promote_parts": 2, "promote_temps": 2, "block_n": 192,
                "cluster_m": 2},
    "pr192g4": {"promote": 1, "promote_parts": 2, "promote_temps": 2, "block_n": 192,
                "raster_group": 4},
    "pr192g16": {"promote": 1, "promote_parts": 2, "promote_temps": 2, "block_n": 192,
                 "raster_group": 16},
}
#: Session 5: A from registers (``promote_rs``; ``p``: the next K block's A prefetched).
RS = {"promote": 1, "promote_rs": True}
VARIANTS_RS: dict[str, dict[str, Any]] = {
    "rs256t1": {**RS, "promote_parts": 2, "promote_temps": 1},
    "rsp256t1": {**RS, "promote_parts": 2, "promote_temps": 1, "promote_rs_prefetch": True},
    "rs256p4t2": {**RS, "promote_parts": 4, "promote_temps": 2},
    "rsp256p4t2": {**RS, "promote_parts": 4, "promote_temps": 2, "promote_rs_prefetch": True},
    "rs192t2": {**RS, "promote_parts": 2, "promote_temps": 2, "block_n": 192},
    "rsp192t2": {**RS, "promote_parts": 2, "promote_temps": 2, "block_n": 192,
                 "promote_rs_prefetch": True},
}
#: Session 5, run 2: several K blocks per promoted-loop iteration (``promote_unroll``).
VARIANTS_UNROLL: dict[str, dict[str, Any]] = {
    "pr192u2": {"promote": 1, "promote_parts": 2, "promote_temps": 2, "block_n": 192,
                "promote_unroll": 2},
    "pr192u4": {"promote": 1, "promote_parts": 2, "promote_temps": 2, "block_n": 192,
                "promote_unroll": 4},
    "pr1n4t2u2": {"promote": 1, "promote_parts": 4, "promote_temps": 2, "promote_unroll": 2},
    "pr1n4t2u4": {"promote": 1, "promote_parts": 4, "promote_temps": 2, "promote_unroll": 4},
    # not measured yet (session 5's next candidate for 8192^3): 128 x 192 in 3 parts of n64
    "pr192n3t2": {"promote": 1, "promote_parts": 3, "promote_temps": 2, "block_n": 192},
    "pr192n3t2u4": {"promote": 1, "promote_parts": 3, "promote_temps": 2, "block_n": 192,
                    "promote_unroll": 4},
}
ALL = {}  # filled below: every named variant
#: Measured on an H100 before (docs/perf.md, FP8 promotion log): pipelined across K blocks
#: (ptxas C7514 serialises it), promote 2 (less exact), 128-wide tiles (slower).
EARLIER = {
    "pl256n4": {"promote": 1, "promote_parts": 4, "promote_temps": 2,
                "promote_pipelined": True},
    "pl192n2": {"promote": 1, "promote_parts": 2, "promote_temps": 2, "block_n": 192,
                "promote_pipelined": True},
    "pr1n4t2": {"promote": 1, "promote_parts": 4, "promote_temps": 2},
    "pr2n2t1": {"promote": 2, "promote_parts": 2, "promote_temps": 1},
    "pr128n1t1": {"promote": 1, "promote_parts": 1, "promote_temps": 1, "block_n": 128,
                  "stages": 6},
    "pr128n2t2": {"promote": 1, "promote_parts": 2, "promote_temps": 2, "block_n": 128,
                  "stages": 6},
}


def _cfg(variant: str, a: str = "e4m3", b: str = "e4m3", scale: str = "tensor") -> Any:
    from nvatom.kernels.sm90.config import GemmSm90Config

    return GemmSm90Config(in_dtype=a, b_dtype="" if b == a else b, b_major="K",
                          scale_mode=scale, **ALL[variant])


ALL.update({**EARLIER, **VARIANTS, **VARIANTS_RS, **VARIANTS_UNROLL})


def _operands(m: int, n: int, k: int, a_t: Any, b_t: Any, scale: str, gen: Any) -> tuple:
    import torch

    a = torch.randn(m, k, device="cuda", generator=gen).to(a_t)
    b = torch.randn(n, k, device="cuda", generator=gen).to(b_t).t()
    if scale == "row":
        sa = (torch.rand(m, 1, device="cuda", generator=gen) + 0.5).float()
        sb = (torch.rand(1, n, device="cuda", generator=gen) + 0.5).float()
    else:
        sa = (torch.rand((), device="cuda", generator=gen) + 0.5).float()
        sb = (torch.rand((), device="cuda", generator=gen) + 0.5).float()
    return a, b, sa, sb


def _ref(a: Any, b: Any, sa: Any, sb: Any) -> Any:
    return (a.double() @ b.double()) * sa.double() * sb.double()


def _rel(out: Any, ref: Any) -> float:
    import torch

    if torch.isnan(out).any():
        return float("nan")
    return float((out.double() - ref).norm() / ref.norm())


def _run(cfg: Any, a: Any, b: Any, sa: Any, sb: Any, out: Any) -> Any:
    from nvatom.gemm_providers import prepare_gemm_sm90

    return prepare_gemm_sm90(a, b, out, cfg, sa.reshape(-1), sb.reshape(-1))


def main() -> int:
    import torch

    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--out", default=".")
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--session5", action="store_true")
    ap.add_argument("--speed-only", action="store_true", help="--session5 without the "
                    "correctness and accuracy parts")
    ap.add_argument("--profile", default="", help="launch these variants once each at "
                    "4096^3 (per-tensor), for ncu")
    args = ap.parse_args()
    if args.profile:
        return profile(args.profile.split(","))
    if args.session5:
        return session5(args)
    variants = args.variants.split(",")
    dev = torch.cuda.get_device_name()
    res: dict[str, Any] = {"device": dev, "correct": [], "accuracy": [], "speed": []}
    gen = torch.Generator(device="cuda").manual_seed(1)
    e4, e5 = torch.float8_e4m3fn, torch.float8_e5m2
    tnames = {e4: "e4m3", e5: "e5m2"}

    # 1. correctness on ragged shapes
    combos = [(e4, e4, "tensor"), (e4, e4, "row"), (e4, e5, "tensor"), (e5, e4, "row"),
              (e5, e5, "tensor")]
    for m, n, k in [(129, 264, 80), (333, 784, 528), (1, 16, 16), (640, 1536, 2064),
                    (256, 512, 4096)]:
        for at, bt, sc in combos:
            a, b, sa, sb = _operands(m, n, k, at, bt, sc, gen)
            ref = _ref(a, b, sa, sb)
            for v in variants:
                cfg = _cfg(v, tnames[at], tnames[bt], sc)
                out = torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
                _run(cfg, a, b, sa, sb, out)()
                torch.cuda.synchronize()
                err = _rel(out, ref)
                res["correct"].append([m, n, k, tnames[at], tnames[bt], sc, v, err])
                if not err < 2e-2:
                    print("WRONG", m, n, k, tnames[at], tnames[bt], sc, v, err, flush=True)
    bad = [r for r in res["correct"] if not r[-1] < 2e-2]
    print(f"correctness: {len(res['correct'])} runs, {len(bad)} wrong", flush=True)

    # 2. accuracy against float64
    mn = 4096 if args.quick else 8192
    for k in (4096, 8192, 16384):
        for sc in ("tensor", "row"):
            a, b, sa, sb = _operands(mn, mn, k, e4, e4, sc, gen)
            ref = _ref(a, b, sa, sb)
            row = {"m": mn, "n": mn, "k": k, "scale": sc}
            for fast in (False, True):
                try:
                    o = torch._scaled_mm(a, b, sa, sb, out_dtype=torch.bfloat16,
                                         use_fast_accum=fast)
                    row["scaled_mm" + ("_fast" if fast else "")] = _rel(o, ref)
                except RuntimeError as e:  # not every torch takes every mode
                    print("scaled_mm", sc, fast, e, flush=True)
            for v in variants:
                out = torch.full((mn, mn), float("nan"), device="cuda", dtype=torch.bfloat16)
                _run(_cfg(v, scale=sc), a, b, sa, sb, out)()
                row[v] = _rel(out, ref)
            res["accuracy"].append(row)
            print("accuracy", json.dumps(row), flush=True)
            del ref

    # 3. speed at 8192^3 (and 4096^3), rotating sets
    shapes = [(8192, 8192, 8192)] + ([] if args.quick else [(4096, 4096, 4096)])
    for m, n, k in shapes:
        for sc in ("tensor", "row"):
            sets = 3 if m >= 8192 else 8
            ops = [_operands(m, n, k, e4, e4, sc, gen) for _ in range(sets)]
            out = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
            cont: dict[str, Any] = {}
            for fast in (False, True):
                try:
                    torch._scaled_mm(ops[0][0], ops[0][1], ops[0][2], ops[0][3],
                                     out_dtype=torch.bfloat16, use_fast_accum=fast)
                except RuntimeError:
                    continue
                cont["scaled_mm" + ("_fast" if fast else "")] = (
                    lambda i, f=fast, ops=ops: torch._scaled_mm(ops[i][0], ops[i][1], ops[i][2],
                                                       ops[i][3], out_dtype=torch.bfloat16,
                                                       use_fast_accum=f))
            for v in variants:
                fns = [_run(_cfg(v, scale=sc), *ops[i], out) for i in range(sets)]
                cont[v] = lambda i, fns=fns: fns[i]()
            times = _interleave(cont, sets, 10, args.rounds)
            flop = 2 * m * n * k
            row = {"m": m, "n": n, "k": k, "scale": sc}
            for name, ts in times.items():
                med = statistics.median(ts)
                row[name] = {"ms": med, "tflops": flop / med / 1e9, "spread": max(ts) / min(ts)}
            res["speed"].append(row)
            base = row["scaled_mm"]["ms"]
            print(f"speed {m}x{n}x{k} {sc}: " + ", ".join(
                f"{nm} {r['tflops']:.0f} TF/s ({base / r['ms']:.3f}x)"
                for nm, r in row.items() if isinstance(r, dict)), flush=True)
    Path(args.out).mkdir(parents=True, exist_ok=True)
    (Path(args.out) / "tune.json").write_text(json.dumps(res, indent=1))
    return 1 if bad else 0


def profile(variants: list[str]) -> int:
    """One launch of each variant at 4096^3, per-tensor scales (run under ncu)."""
    import torch

    gen = torch.Generator(device="cuda").manual_seed(7)
    a, b, sa, sb = _operands(4096, 4096, 4096, torch.float8_e4m3fn, torch.float8_e4m3fn,
                             "tensor", gen)
    out = torch.empty(4096, 4096, device="cuda", dtype=torch.bfloat16)
    for v in variants:
        _run(_cfg(v), a, b, sa, sb, out)()
        torch.cuda.synchronize()
        print("profiled", v, _cfg(v).name, flush=True)
    return 0


S5_BASE = ["pr1n2t1", "pr192n2t2"]  # the two shipped promoted tiles (4096^3 / 8192^3 picks)


def session5(args: Any) -> int:
    """Correctness (ragged and multi-tile shapes, four type/scale combinations, NaN poison,
    float64), accuracy at 8192 x 8192 x {4096, 8192, 16384}, and interleaved speed at 4096^3
    and 8192^3 (per-round ratios to ``_scaled_mm``) of the promote_rs variants, the shipped
    tiles, fast accumulation and ``nvatom.gemm``."""
    import torch

    import nvatom

    variants = [v for v in args.variants.split(",") if v] if args.variants != ",".join(
        VARIANTS) else [*S5_BASE, *VARIANTS_RS]
    dev = torch.cuda.get_device_name()
    res: dict[str, Any] = {"device": dev, "variants": {v: ALL[v] for v in variants},
                           "correct": [], "accuracy": [], "speed": []}
    gen = torch.Generator(device="cuda").manual_seed(5)
    e4, e5 = torch.float8_e4m3fn, torch.float8_e5m2
    tnames = {e4: "e4m3", e5: "e5m2"}
    combos = [(e4, e4, "tensor"), (e4, e4, "row"), (e4, e5, "tensor"), (e5, e4, "row")]
    shapes = [(129, 264, 80), (333, 784, 528), (1, 16, 16), (640, 1536, 2064),
              (7, 1008, 16), (3000, 3000, 64), (4000, 4040, 64), (2040, 2040, 144),
              (384, 520, 384), (300, 1000, 640), (2100, 3000, 1152)]
    if args.speed_only:
        shapes = []
    for m, n, k in shapes:
        for at, bt, sc in combos:
            a, b, sa, sb = _operands(m, n, k, at, bt, sc, gen)
            ref = _ref(a, b, sa, sb)
            for v in variants:
                out = torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
                _run(_cfg(v, tnames[at], tnames[bt], sc), a, b, sa, sb, out)()
                torch.cuda.synchronize()
                err = _rel(out, ref)
                res["correct"].append([m, n, k, tnames[at], tnames[bt], sc, v, err])
                if not err < 4e-3:  # bf16 output rounding is ~1.7e-3
                    print("WRONG", m, n, k, tnames[at], tnames[bt], sc, v, err, flush=True)
    bad = [r for r in res["correct"] if not r[-1] < 4e-3]
    worst = max((r[-1] for r in res["correct"]), default=0.0)
    print(f"correctness: {len(res['correct'])} runs, {len(bad)} wrong, max err {worst:.3e}",
          flush=True)
    mn = 8192  # the bench shapes' M and N
    for k in () if args.speed_only else (4096, 8192, 16384):
        for sc in ("tensor", "row"):
            a, b, sa, sb = _operands(mn, mn, k, e4, e4, sc, gen)
            ref = _ref(a, b, sa, sb)
            row = {"m": mn, "n": mn, "k": k, "scale": sc,
                   "scaled_mm": _rel(torch._scaled_mm(a, b, sa, sb, out_dtype=torch.bfloat16),
                                     ref),
                   "gemm": _rel(nvatom.gemm(a, b, scale_a=sa, scale_b=sb), ref)}
            for v in variants:
                out = torch.full((mn, mn), float("nan"), device="cuda", dtype=torch.bfloat16)
                _run(_cfg(v, scale=sc), a, b, sa, sb, out)()
                row[v] = _rel(out, ref)
            res["accuracy"].append(row)
            print("accuracy", " ".join(f"{x}={y:.5g}" if isinstance(y, float) else f"{x}={y}"
                                       for x, y in row.items()), flush=True)
            del ref
    for m in (4096, 8192):
        for sc in ("tensor", "row"):
            sets = 3 if m >= 8192 else 8
            ops = [_operands(m, m, m, e4, e4, sc, gen) for _ in range(sets)]
            out = torch.empty(m, m, device="cuda", dtype=torch.bfloat16)
            cont: dict[str, Any] = {}
            for fast in (False, True):
                cont["scaled_mm" + ("_fast" if fast else "")] = (
                    lambda i, f=fast, ops=ops: torch._scaled_mm(
                        ops[i][0], ops[i][1], ops[i][2], ops[i][3], out_dtype=torch.bfloat16,
                        use_fast_accum=f))
            cont["gemm"] = lambda i, ops=ops, out=out: nvatom.gemm(
                ops[i][0], ops[i][1], out, scale_a=ops[i][2], scale_b=ops[i][3])
            for v in ["fast", *variants]:
                fns = [_run(_cfg(v, scale=sc), *ops[i], out) for i in range(sets)]
                cont[v] = lambda i, fns=fns: fns[i]()
            times = _interleave(cont, sets, 20 if m < 8192 else 10, args.rounds, rotate=True)
            flop = 2 * m ** 3
            row = {"m": m, "n": m, "k": m, "scale": sc, "rounds": times}
            for name, ts in times.items():
                theirs = times["scaled_mm_fast" if name == "fast" else "scaled_mm"]
                ratios = sorted(t0 / t for t0, t in zip(theirs, ts, strict=True))
                med = statistics.median(ts)
                row[name] = {"ms": med, "tflops": flop / med / 1e9, "spread": max(ts) / min(ts),
                             "ratio": statistics.median(ratios), "ratio_lo": ratios[0],
                             "ratio_hi": ratios[-1]}
            res["speed"].append(row)
    print(f"\n{'variant':<12}" + "".join(f"{m}^3 {sc:<7}" for m in (4096, 8192)
                                         for sc in ("tensor", "row")))
    for name in ["gemm", "fast", *variants, "scaled_mm", "scaled_mm_fast"]:
        cells = []
        for row in res["speed"]:
            r = row[name]
            cells.append(f"{r['ratio']:.3f} {r['tflops']:4.0f}".ljust(16))
        print(f"{name:<12}" + "".join(cells))
    print("(median per-round ratio to _scaled_mm default; fast: to use_fast_accum=True; TF/s)")
    Path(args.out).mkdir(parents=True, exist_ok=True)
    name = "tune_s5_speed.json" if args.speed_only else "tune_s5.json"
    (Path(args.out) / name).write_text(json.dumps(res, indent=1))
    return 1 if bad else 0


def _interleave(cont: dict[str, Any], sets: int, batch: int, rounds: int,
                rotate: bool = False) -> dict[str, list]:
    """Milliseconds per call of each contender (called with the input set index) per round:
    the order alternates direction each round, or with ``rotate`` turns by one contender."""
    import torch

    def once(fn: Any) -> float:
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        for i in range(batch):
            fn(i % sets)
        e.record()
        e.synchronize()
        return s.elapsed_time(e) / batch

    names = list(cont)
    for nm in names:
        once(cont[nm])
    times: dict[str, list] = {nm: [] for nm in names}
    for r in range(rounds):
        order = (names[r % len(names):] + names[:r % len(names)] if rotate else
                 names if r % 2 == 0 else names[::-1])
        for nm in order:
            times[nm].append(once(cont[nm]))
    return times


if __name__ == "__main__":
    raise SystemExit(main())
