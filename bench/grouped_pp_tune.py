"""Device script: the grouped GEMM's schedules (cooperative vs ping-pong) on MoE shapes.

    PYTHONPATH=src python3 bench/grouped_pp_tune.py diag  [--rounds 9] [--out DIR]
    PYTHONPATH=src python3 bench/grouped_pp_tune.py final [--rounds 9] [--out DIR]
    PYTHONPATH=src python3 bench/grouped_pp_tune.py one CASE VARIANT   # one launch, for ncu

``diag`` (docs/perf.md, "Grouped ping-pong and schedule choice"): bench/gemm_grouped.py's
four cases A-D plus uniform-size controls, each with kernel variants (cooperative,
ping-pong, ping-pong without the tensor-map acquire, other rasters, K-major B, and the plain
kernel on the same work as one dense GEMM), every variant checked first against a float64
reference per group (NaN-poisoned output, 8 rows past the last group must stay NaN); then a
sweep of uniform group sizes (cooperative vs ping-pong) and of plain shapes.  ``final``:
the shipped rule (``grouped_gemm`` through its public path) against both fixed schedules.
Timing: every round runs each callable once (``batch`` launches between two CUDA events)
in a rotating order; per variant the median TF/s and the median over rounds of the same
round's ``torch._grouped_mm`` (or ``torch.mm``) time over the variant's.  JSON to ``--out``
(one file per mode), a table printed last.
"""

from __future__ import annotations

import argparse
import importlib
import json
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT))  # bench._report

from bench import _report as R  # noqa: E402


def moe_cases() -> list[tuple[str, list[int], int, int]]:
    """bench/gemm_grouped.py's cases (:func:`bench._report.moe_cases`) labelled A-D."""
    return [(label, sizes, n, k) for label, (_, sizes, n, k) in zip("ABCD", R.moe_cases(),
                                                                     strict=True)]


def _pp(**kw: Any) -> Any:
    from nvatom.kernels.sm90.config import GemmSm90Config
    from nvatom.kernels.sm90.tuning import SCHEDULE_TILES
    return GemmSm90Config(**{**SCHEDULE_TILES["pingpong"], **kw})


def _coop(**kw: Any) -> Any:
    from nvatom.kernels.sm90.config import GemmSm90Config
    from nvatom.kernels.sm90.tuning import SCHEDULE_TILES
    return GemmSm90Config(**{**SCHEDULE_TILES["cooperative"], **kw})


class Case:
    """Operands of one grouped problem on the device, its float64 reference (kept as f32)."""

    def __init__(self, torch: Any, sizes: list[int], n: int, k: int, ref: bool = True,
                 kmajor: bool = False) -> None:
        self.torch, self.sizes, self.n, self.k = torch, sizes, n, k
        self.ends = [sum(sizes[: i + 1]) for i in range(len(sizes))]
        self.total = self.ends[-1]
        self.a = torch.randn(self.total + 8, k, device="cuda").to(torch.bfloat16)
        self.b = torch.randn(len(sizes), k, n, device="cuda").to(torch.bfloat16)
        self.bk = (self.b.transpose(1, 2).contiguous().transpose(1, 2) if kmajor else None)
        self.offs = torch.tensor(self.ends, dtype=torch.int32, device="cuda")
        self.ref = None
        if ref:
            self.ref = torch.empty(self.total, n, device="cuda", dtype=torch.float32)
            start = 0
            for g, end in enumerate(self.ends):
                if end > start:
                    self.ref[start:end] = (self.a[start:end].double()
                                           @ self.b[g].double()).float()
                start = end
        self.tb = self.b
        try:
            torch._grouped_mm(self.a[: self.total], self.b, offs=self.offs)
        except RuntimeError:
            self.tb = self.bk if self.bk is not None else (
                self.b.transpose(1, 2).contiguous().transpose(1, 2))
        self.keep: list[Any] = []

    def out(self) -> Any:
        return self.torch.full((self.total + 8, self.n), float("nan"), device="cuda",
                               dtype=self.torch.bfloat16)

    def grouped(self, cfg: Any, kmajor: bool = False) -> tuple[Any, Any]:
        """(direct launcher, its NaN-poisoned output) of the grouped kernel ``cfg``."""
        import nvatom

        ng = importlib.import_module("nvatom.gemm")
        out = self.out()
        b = self.bk if kmajor else self.b
        with ng.grouped_variant(config=cfg) as calls:
            nvatom.grouped_gemm(self.a, b, self.ends, out=out)
            run, params, buf = next(iter(calls.values()))
        self.keep.append(buf)
        stream = self.torch.cuda.current_stream().cuda_stream
        return (lambda: run(params, stream)), out

    def public(self) -> tuple[Any, Any]:
        """``nvatom.grouped_gemm`` (the shipped plan and call cache)."""
        import nvatom
        out = self.out()
        return (lambda: nvatom.grouped_gemm(self.a, self.b, self.ends, out=out)), out

    def check(self, out: Any) -> dict[str, Any]:
        """Relative Frobenius error against the float64 reference, NaN, tail untouched."""
        torch = self.torch
        got = out[: self.total].float()
        nan = bool(torch.isnan(got).any())
        if self.ref is not None:
            err = float((got - self.ref).norm() / self.ref.norm())
        else:  # sweep cases: against torch._grouped_mm's bf16 output
            r = torch._grouped_mm(self.a[: self.total], self.tb, offs=self.offs).float()
            err = float((got - r).norm() / r.norm())
        tail = bool(torch.isnan(out[self.total:]).all())
        return {"rel_err": err, "nan": nan, "tail_untouched": tail,
                "ok": (not nan) and tail and err < (5e-3 if self.ref is not None else 1e-2)}

    def torch_fn(self) -> Any:
        a, tb, offs = self.a[: self.total], self.tb, self.offs
        return lambda: self.torch._grouped_mm(a, tb, offs=offs)


def interleave(torch: Any, fns: dict[str, Any], ref: str, rounds: int, flop: float,
               target_s: float = 4e-3) -> dict[str, Any]:
    """Rounds of every callable once (rotating order, reversed on odd rounds); per callable
    median TF/s, spread and the per-round ratio to ``ref``."""
    for fn in fns.values():
        fn()
    torch.cuda.synchronize()
    t0 = R.cuda_seconds(torch, fns[ref], 2)
    batch = max(2, min(20, round(target_s / max(t0, 1e-6))))
    times = R.rotating_rounds(torch, fns, rounds, batch)
    res: dict[str, Any] = {"batch": batch}
    for nm, ts in times.items():
        pr = [x / t for x, t in zip(times[ref], ts, strict=True)]
        res[nm] = {"tflops": flop / statistics.median(ts) / 1e12,
                   "tflops_min": flop / max(ts) / 1e12, "tflops_max": flop / min(ts) / 1e12,
                   "ratio_round": statistics.median(pr), "ratio_rounds": pr,
                   "s": ts}
    return res


def _plain(torch: Any, cfg: Any, a: Any, b: Any) -> tuple[Any, Any]:
    from nvatom.gemm_providers import prepare_gemm_sm90
    out = torch.empty(a.shape[0], b.shape[1], device="cuda", dtype=torch.bfloat16)
    return prepare_gemm_sm90(a, b, out, cfg), out


def run_case(torch: Any, label: str, sizes: list[int], n: int, k: int,
             variants: dict[str, Any], rounds: int, dense: bool, public: bool = False,
             ref: bool = True) -> dict[str, Any]:
    """Check and time the grouped ``variants`` (name -> (config, K-major B)) on one case;
    ``dense``: also the plain kernels on the same work as one M = total GEMM (b[0])."""
    kmaj = any(km for _, km in variants.values())
    c = Case(torch, sizes, n, k, ref=ref, kmajor=kmaj)
    fns: dict[str, Any] = {"torch": c.torch_fn()}
    checks: dict[str, Any] = {}
    for name, (cfg, km) in variants.items():
        try:
            fn, out = c.grouped(cfg, km)
            fn()
            torch.cuda.synchronize()
            checks[name] = c.check(out)
            fns[name] = fn
        except Exception as e:  # a failing variant is reported, not fatal
            checks[name] = {"ok": False, "error": f"{type(e).__name__}: {e}"}
    if public:
        fn, out = c.public()
        fn()
        torch.cuda.synchronize()
        checks["public"] = c.check(out)
        fns["public"] = fn
    if dense:
        a2, b2 = c.a[: c.total], c.b[0]
        for name, cfg in (("dense_coop", _coop()), ("dense_pp", _pp())):
            fn, out = _plain(torch, cfg, a2, b2)
            fns[name] = fn
        fns["dense_torch.mm"] = lambda: torch.mm(a2, b2)
    flop = 2.0 * c.total * n * k
    t = interleave(torch, fns, "torch", rounds, flop)
    row = {"case": label, "groups": len(sizes), "tokens": sizes, "n": n, "k": k,
           "checks": checks, "times": t}
    bad = [nm for nm, ch in checks.items() if not ch.get("ok")]
    print(f"{label} (G {len(sizes)}, M {c.total}, N {n}, K {k}; batch {t['batch']})"
          + (f"  FAILED CHECKS: {bad}" if bad else "  checks ok"), flush=True)
    for nm in fns:
        ch = checks.get(nm, {})
        print(f"  {nm:18s} {t[nm]['tflops']:7.1f} TF/s ({t[nm]['tflops_min']:.0f}-"
              f"{t[nm]['tflops_max']:.0f})  x{t[nm]['ratio_round']:.3f}"
              + (f"  err {ch['rel_err']:.2e}" if 'rel_err' in ch else ""), flush=True)
    del c
    torch.cuda.empty_cache()
    return row


def diag(args: argparse.Namespace, torch: Any) -> dict[str, Any]:
    variants = {"coop": (_coop(), False), "pp": (_pp(), False),
                "pp_nofence": (_pp(group_sched="nofence"), False),
                "coop_n128": (_coop(block_n=128, stages=6), False),
                "pp_r16": (_pp(raster_group=16), False), "pp_r2": (_pp(raster_group=2), False),
                "coop_Kb": (_coop(b_major="K"), True), "pp_Kb": (_pp(b_major="K"), True)}
    rows = []
    for label, sizes, n, k in moe_cases():
        rows.append(run_case(torch, label, sizes, n, k, variants, args.rounds, dense=True))
    two = {"coop": (_coop(), False), "pp": (_pp(), False)}
    controls = [("D-uniform 64x2048", [2048] * 64, 2048, 7168),
                ("B-uniform 64x512", [512] * 64, 2048, 7168),
                ("B-ragged-aligned 64x(128j)", [128 * random.Random(1).randint(0, 8)
                                                for _ in range(64)], 2048, 7168)]
    for label, sizes, n, k in controls:
        rows.append(run_case(torch, label, sizes, n, k, two, args.rounds, dense=False))
    sweep = []
    for (n, k) in ((4096, 4096), (2048, 7168), (4096, 7168)):
        for tok in (256, 512, 1024, 2048, 4096):
            sweep.append(run_case(torch, f"sweep 8x{tok} {k}->{n}", [tok] * 8, n, k, two,
                                  max(5, args.rounds // 2), dense=False, ref=False))
    return {"rows": rows, "sweep": sweep, "plain": plain_sweep(args, torch)}


def plain_sweep(args: argparse.Namespace, torch: Any) -> list[dict[str, Any]]:
    """Plain 16-bit kernel, cooperative vs ping-pong vs torch.mm, per shape."""
    rows = []
    for m, n, k in ((2048, 2048, 2048), (4096, 4096, 4096), (6144, 6144, 6144),
                    (8192, 8192, 8192), (8192, 8192, 1024), (16384, 1024, 8192),
                    (4096, 4096, 7168), (16384, 2048, 7168), (4096, 8192, 8192)):
        a = torch.randn(m, k, device="cuda").to(torch.bfloat16)
        b = torch.randn(k, n, device="cuda").to(torch.bfloat16)
        fns: dict[str, Any] = {"torch": lambda a=a, b=b: torch.mm(a, b)}
        checks = {}
        ref = (a[:256].double() @ b.double())
        for name, cfg in (("coop", _coop()), ("pp", _pp())):
            fn, out = _plain(torch, cfg, a, b)
            out.fill_(float("nan"))
            fn()
            torch.cuda.synchronize()
            checks[name] = float((out[:256].double() - ref).norm() / ref.norm())
            checks[name + "_nan"] = bool(torch.isnan(out).any())
            fns[name] = fn
        t = interleave(torch, fns, "torch", args.rounds, 2.0 * m * n * k)
        rows.append({"shape": [m, n, k], "checks": checks, "times": t})
        print(f"plain {m}x{n}x{k}: coop x{t['coop']['ratio_round']:.3f} "
              f"pp x{t['pp']['ratio_round']:.3f} (torch {t['torch']['tflops']:.0f} TF/s; "
              f"err {checks['coop']:.1e} / {checks['pp']:.1e})", flush=True)
    return rows


def one(args: argparse.Namespace, torch: Any) -> dict[str, Any]:
    """One case, one variant: a warm-up launch then one launch (ncu --launch-skip 1)."""
    cases = {lb: (s, n, k) for lb, s, n, k in moe_cases()}
    sizes, n, k = cases[args.case]
    cfg = {"coop": _coop(), "pp": _pp()}[args.variant]
    c = Case(torch, sizes, n, k, ref=False)
    fn, _ = c.grouped(cfg)
    fn()
    torch.cuda.synchronize()
    fn()
    torch.cuda.synchronize()
    return {}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("mode", choices=("diag", "final", "one"))
    ap.add_argument("case", nargs="?", default="B")
    ap.add_argument("variant", nargs="?", default="pp")
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--out", type=Path, default=ROOT / "reports/bench")
    args = ap.parse_args(argv)
    import torch

    t0 = time.time()
    if args.mode == "one":
        one(args, torch)
        return 0
    res = {**R.torch_header(torch), "mode": args.mode, "rounds": args.rounds}
    res.update(diag(args, torch) if args.mode == "diag" else final(args, torch))
    res["wall_s"] = time.time() - t0
    R.write_json(args.out / f"grouped_pp_{args.mode}.json", res)
    print(json.dumps({"wall_s": res["wall_s"]}))
    return 0


def final(args: argparse.Namespace, torch: Any) -> dict[str, Any]:
    """The shipped rule through the public paths against both fixed schedules (and the
    ping-pong 128 x 192 tile, 4 stages, as an exploration) on the bench cases and on cases
    that test the rule's thresholds; the plain kernel likewise."""
    from nvatom.kernels.sm90.tuning import grouped_schedule

    variants = {"coop": (_coop(), False), "pp": (_pp(), False),
                "pp192": (_pp(block_n=192, stages=4), False)}
    rng = random.Random(7)
    cases = [
        *moe_cases(),
        ("V1 64 experts 0-4096, 4096->2048", [rng.randint(0, 4096) for _ in range(64)],
         2048, 4096),
        ("V2 8 experts 0-4096, 4096->4096", [rng.randint(0, 4096) for _ in range(8)],
         4096, 4096),
        ("V3 64 experts 0-1024, 4096->4096", [rng.randint(0, 1024) for _ in range(64)],
         4096, 4096),
        ("V4 64x2048, 4096->4096", [2048] * 64, 4096, 4096),
        ("V5 8 experts 0-4096, 4096->14336", [rng.randint(0, 4096) for _ in range(8)],
         14336, 4096),
        ("V6 8 experts 0-4096, 14336->4096", [rng.randint(0, 4096) for _ in range(8)],
         4096, 14336)]
    rows = []
    for i, (label, sizes, n, k) in enumerate(cases):
        ends = [sum(sizes[: j + 1]) for j in range(len(sizes))]
        row = run_case(torch, label, sizes, n, k, variants,
                       args.rounds + 2 if i < 4 else args.rounds, dense=False, public=True)
        row["rule"] = grouped_schedule("bf16", ends, n, k)
        print(f"  rule: {row['rule']}", flush=True)
        rows.append(row)
    return {"rows": rows, "plain": plain_final(args, torch)}


def plain_final(args: argparse.Namespace, torch: Any) -> list[dict[str, Any]]:
    """``nvatom.gemm`` (the rule) vs the fixed schedules vs torch.mm, per shape."""
    import nvatom
    from nvatom.kernels.sm90.tuning import plain_schedule

    rows = []
    for m, n, k in ((114521, 2048, 7168), (65536, 2048, 7168), (32768, 4096, 7168),
                    (16384, 16384, 8192), (16384, 8192, 8192), (16384, 16384, 4096),
                    (8192, 8192, 8192), (6144, 6144, 6144), (4096, 4096, 4096)):
        a = torch.randn(m, k, device="cuda").to(torch.bfloat16)
        b = torch.randn(k, n, device="cuda").to(torch.bfloat16)
        fns: dict[str, Any] = {"torch": lambda a=a, b=b: torch.mm(a, b)}
        checks = {}
        ref = a[:256].double() @ b.double()
        outs = {}
        for name, cfg in (("coop", _coop()), ("pp", _pp()), ("pp192", _pp(block_n=192,
                                                                            stages=4))):
            fns[name], outs[name] = _plain(torch, cfg, a, b)
        o = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
        fns["nvatom.gemm"], outs["nvatom.gemm"] = (
            lambda a=a, b=b, o=o: nvatom.gemm(a, b, out=o)), o
        for name, fn in fns.items():
            if name == "torch":
                continue
            outs[name].fill_(float("nan"))
            fn()
            torch.cuda.synchronize()
            checks[name] = {"rel_err": float((outs[name][:256].double() - ref).norm()
                                             / ref.norm()),
                            "nan": bool(torch.isnan(outs[name]).any())}
        t = interleave(torch, fns, "torch", args.rounds, 2.0 * m * n * k)
        rule = plain_schedule(m, n)
        rows.append({"shape": [m, n, k], "rule": rule, "checks": checks, "times": t})
        bad = [nm for nm, c in checks.items() if c["nan"] or c["rel_err"] > 5e-3]
        print(f"plain {m}x{n}x{k} (rule {rule}): " + "  ".join(
            f"{nm} x{t[nm]['ratio_round']:.3f}" for nm in fns if nm != "torch")
            + f"  (torch {t['torch']['tflops']:.0f} TF/s)"
            + (f"  WRONG {bad}" if bad else ""), flush=True)
        del a, b, o, outs, fns
        torch.cuda.empty_cache()
    return rows


if __name__ == "__main__":
    raise SystemExit(main())
