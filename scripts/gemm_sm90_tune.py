"""Device script for the SM90 GEMM: correctness of many configurations and shapes
against torch in float64, then timings against torch.matmul / torch._scaled_mm.

    PYTHONPATH=src python3 scripts/gemm_sm90_tune.py smoke [--tmap mov|cvta]
    PYTHONPATH=src python3 scripts/gemm_sm90_tune.py run --variants NAME,... [--json out.json]

``smoke`` runs one small problem (a subprocess per tensor-map addressing mode keeps a faulting
kernel from taking the whole run down).  ``run`` checks each variant on random shapes (ragged
and skinny included, output poisoned with NaN) and times it with CUDA events (median of
``--reps`` launches after warm-up) on the bench shapes, printing a table last.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
import time

import torch

from nvatom.gemm_providers import prepare_gemm_sm90
from nvatom.kernels.gemm_sm90 import (
    GemmSm90Config,
    GemmSm90Error,
    build_gemm_sm90,
    check_problem,
    default_config,
)

BENCH = [(2048, 2048, 2048), (4096, 4096, 4096), (8192, 8192, 8192), (8192, 8192, 1024),
         (16384, 1024, 8192)]
CHECK = [(128, 256, 64), (256, 512, 1024), (1000, 1000, 1000), (129, 264, 72), (1, 8, 8),
         (1, 4096, 4096), (4096, 8, 4096), (7, 1000, 16), (333, 776, 520), (2048, 2048, 8),
         (640, 1536, 2056), (3000, 3000, 64)]
TORCH = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32,
         "e4m3": torch.float8_e4m3fn}

BASE = dict(in_dtype="bf16", out_dtype="bf16")
VARIANTS: dict[str, dict] = {
    "np": dict(persistent=False),
    "p": dict(),
    "p_again": dict(),
    "pK": dict(b_major="K"),
    "p_c2": dict(cluster_m=2),
    "np_c2": dict(cluster_m=2, persistent=False),
    "p_c2_nomc": dict(cluster_m=2, multicast=False),
    "p_c2_s3": dict(cluster_m=2, stages=3),
    "fp8_c2_g16": dict(in_dtype="e4m3", b_major="K", cluster_m=2, raster_group=16),
    "f16_c2": dict(in_dtype="f16", out_dtype="f16", cluster_m=2),
    "pK_c2": dict(b_major="K", cluster_m=2),
    "p_w0": dict(wgmma_inflight=0),
    "p_g4": dict(raster_group=4),
    "p_g16": dict(raster_group=16),
    "p_g2": dict(raster_group=2),
    "p_c2_g4": dict(cluster_m=2, raster_group=4),
    "p_c2_g16": dict(cluster_m=2, raster_group=16),
    "p_s3": dict(stages=3),
    "p_n128": dict(block_n=128, stages=6),
    "f16": dict(in_dtype="f16", out_dtype="f16"),
    "f16_f32": dict(in_dtype="f16", out_dtype="f32", stages=3),
    "bf16_f32": dict(out_dtype="f32", stages=3),
    "bf16_f16": dict(out_dtype="f16"),
    "fp8": dict(in_dtype="e4m3", b_major="K"),
    "fp8_c2": dict(in_dtype="e4m3", b_major="K", cluster_m=2),
}


DEFAULTS = {"d_bf16": ("bf16", "bf16", "MN"), "d_bf16_K": ("bf16", "bf16", "K"),
            "d_f16": ("f16", "f16", "MN"), "d_bf16_f32": ("bf16", "f32", "MN"),
            "d_f16_f32": ("f16", "f32", "MN"), "d_bf16_f16": ("bf16", "f16", "MN"),
            "d_fp8": ("e4m3", "bf16", "K")}


def make_cfg(name: str, tmap: str) -> GemmSm90Config:
    if name in DEFAULTS:  # the shipped defaults (default_config)
        return dataclasses.replace(default_config(*DEFAULTS[name]), tmap_address=tmap)
    kw = {**BASE, **VARIANTS[name], "tmap_address": tmap}
    return GemmSm90Config(**kw)


def operands(cfg: GemmSm90Config, m: int, n: int, k: int, gen: torch.Generator):
    dev = "cuda"
    if cfg.in_dtype == "e4m3":
        a = (torch.randn(m, k, device=dev, generator=gen) * 2).to(torch.float8_e4m3fn)
        bt = (torch.randn(n, k, device=dev, generator=gen) * 2).to(torch.float8_e4m3fn)
        b = bt.t()
        sa = torch.rand((), device=dev, generator=gen) + 0.5
        sb = torch.rand((), device=dev, generator=gen) + 0.5
        return a, b, sa.float(), sb.float()
    dt = TORCH[cfg.in_dtype]
    a = torch.randn(m, k, device=dev, generator=gen).to(dt)
    if cfg.b_major == "MN":
        b = torch.randn(k, n, device=dev, generator=gen).to(dt)
    else:
        b = torch.randn(n, k, device=dev, generator=gen).to(dt).t()
    return a, b, None, None


def check(cfg: GemmSm90Config, m: int, n: int, k: int, seed: int) -> dict | None:
    try:
        check_problem(cfg, m, n, k)
    except GemmSm90Error:
        return None  # not a shape TMA's stride rule allows for these dtypes
    gen = torch.Generator(device="cuda").manual_seed(seed)
    a, b, sa, sb = operands(cfg, m, n, k, gen)
    out = torch.full((m, n), float("nan"), device="cuda", dtype=TORCH[cfg.out_dtype])
    prepare_gemm_sm90(a, b, out, cfg, sa, sb)()
    torch.cuda.synchronize()
    ref = a.double() @ b.double()
    if sa is not None:
        ref = ref * (sa.double() * sb.double())
    nan = int(torch.isnan(out).sum())
    err = float((out.double() - ref).norm() / ref.norm().clamp_min(1e-30))
    tol = 1e-5 if cfg.out_dtype == "f32" else 1e-2
    return dict(shape=(m, n, k), nan=nan, rel_err=err, ok=nan == 0 and err < tol)


def timed(fn, reps: int) -> float:
    """Milliseconds per call: ``reps`` back-to-back launches between two CUDA events (no
    host synchronisation between launches, so the GPU never idles), after 3 warm-ups."""
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    for _ in range(reps):
        fn()
    e.record()
    e.synchronize()
    return s.elapsed_time(e) / reps


def bench(cfg: GemmSm90Config, m: int, n: int, k: int, reps: int, rounds: int,
          grid: int | None = None) -> dict:
    """Median times of the kernel and of torch's, measured in alternating rounds (the clock
    and power state drift; alternating keeps both under the same conditions)."""
    gen = torch.Generator(device="cuda").manual_seed(1)
    a, b, sa, sb = operands(cfg, m, n, k, gen)
    out = torch.full((m, n), float("nan"), device="cuda", dtype=TORCH[cfg.out_dtype])
    launch = prepare_gemm_sm90(a, b, out, cfg, sa, sb, grid=grid)
    if cfg.in_dtype == "e4m3":
        def ref():
            return torch._scaled_mm(a, b, sa, sb, out_dtype=torch.bfloat16)
    else:
        o2 = torch.empty_like(out)
        if o2.dtype == a.dtype:
            def ref():
                return torch.matmul(a, b, out=o2)
        else:
            try:  # cuBLAS with a float32 output (torch >= 2.8), else matmul + cast
                torch.mm(a, b, out_dtype=o2.dtype)

                def ref():
                    return torch.mm(a, b, out_dtype=o2.dtype)
            except (TypeError, RuntimeError):
                def ref():
                    return torch.matmul(a, b).to(o2.dtype)
    ours, theirs = [], []
    for i in range(rounds):  # alternate, and alternate which side goes first
        pair = [(ours, launch), (theirs, ref)]
        for dst, fn in (pair if i % 2 == 0 else pair[::-1]):
            dst.append(timed(fn, reps))
    ms, ref_ms = statistics.median(ours), statistics.median(theirs)
    if cfg.in_dtype == "e4m3":
        r = torch._scaled_mm(a, b, sa, sb, out_dtype=torch.float32)
    else:
        r = torch.matmul(a.float(), b.float())
    err = float((out.float() - r).norm() / r.norm())
    tflops = 2 * m * n * k / ms / 1e9
    return dict(shape=(m, n, k), ms=ms, ref_ms=ref_ms, tflops=tflops, grid=launch.grid,
                min_ms=min(ours), ref_min_ms=min(theirs),
                ref_tflops=2 * m * n * k / ref_ms / 1e9, speedup=ref_ms / ms, rel_err=err,
                nan=int(torch.isnan(out).sum()), ms_rounds=ours, ref_ms_rounds=theirs)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=("smoke", "run"))
    ap.add_argument("--tmap", default="cvta")
    ap.add_argument("--variants", default="p")
    ap.add_argument("--shapes", default="all")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--grid", type=int, default=None)
    ap.add_argument("--json", default=None)
    ap.add_argument("--no-check", action="store_true")
    args = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    print(torch.cuda.get_device_name(), torch.__version__, flush=True)
    if args.mode == "smoke":
        for v in args.variants.split(","):
            cfg = make_cfg(v, args.tmap)
            r = check(cfg, 256, 512, 256, 0)
            print("SMOKE", v, args.tmap, r, flush=True)
        return 0
    results = []
    for v in args.variants.split(","):
        cfg = make_cfg(v, args.tmap)
        t0 = time.perf_counter()
        build_gemm_sm90(cfg).emit()
        build_ms = (time.perf_counter() - t0) * 1e3
        rec = dict(variant=v, config=dataclasses.asdict(cfg), build_ms=build_ms, checks=[],
                   bench=[])
        if not args.no_check:
            for i, (m, n, k) in enumerate(CHECK):
                if cfg.out_dtype == "f32" and n % 4:
                    continue
                c = check(cfg, m, n, k, 100 + i)
                if c is None:
                    continue
                rec["checks"].append(c)
                if not c["ok"]:
                    print("FAIL", v, c, flush=True)
            rec["all_ok"] = all(c["ok"] for c in rec["checks"])
            print(f"CHECK {v}: {sum(c['ok'] for c in rec['checks'])}/{len(rec['checks'])} ok, "
                  f"max err {max(c['rel_err'] for c in rec['checks']):.2e}", flush=True)
        shapes = BENCH if args.shapes == "all" else [BENCH[int(i)] for i in args.shapes.split(",")]
        for (m, n, k) in shapes:
            bres = bench(cfg, m, n, k, args.reps, args.rounds, args.grid)
            rec["bench"].append(bres)
            print(f"BENCH {v} {m}x{n}x{k}: {bres['ms']:.3f} ms {bres['tflops']:.0f} TF/s vs "
                  f"ref {bres['ref_tflops']:.0f} -> {bres['speedup']:.3f}x err "
                  f"{bres['rel_err']:.1e} grid {bres['grid']}", flush=True)
        results.append(rec)
        if args.json:
            with open(args.json, "w") as f:
                json.dump(dict(device=torch.cuda.get_device_name(), results=results), f,
                          indent=1)
    print("\nvariant      " + " ".join(f"{m}x{n}x{k}".rjust(17) for (m, n, k) in
                                      (BENCH if args.shapes == "all" else shapes)))
    for rec in results:
        print(f"{rec['variant']:<12} " + " ".join(
            f"{b['tflops']:5.0f}/{b['ref_tflops']:4.0f}={b['speedup']:.2f}".rjust(17)
            for b in rec["bench"]) + f"  ok={rec.get('all_ok')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
