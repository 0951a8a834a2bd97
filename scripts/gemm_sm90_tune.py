"""Device script for the SM90 GEMM: correctness of many configurations and shapes
against torch in float64, then timings against torch.matmul / torch._scaled_mm.

    PYTHONPATH=src python3 scripts/gemm_sm90_tune.py smoke [--tmap mov|cvta]
    PYTHONPATH=src python3 scripts/gemm_sm90_tune.py run --variants NAME,... [--json out.json]
    PYTHONPATH=src python3 scripts/gemm_sm90_tune.py pingpong [--json out.json]
    PYTHONPATH=src python3 scripts/gemm_sm90_tune.py tail [--json out.json]
    PYTHONPATH=src python3 scripts/gemm_sm90_tune.py profile   # under ncu: one 4096^3 FP8 launch

``smoke`` runs one small problem (a subprocess per tensor-map addressing mode keeps a faulting
kernel from taking the whole run down).  ``run`` checks each variant on random shapes (ragged
and skinny included, output poisoned with NaN) and times it with CUDA events (median of
``--reps`` launches after warm-up) on the bench shapes, printing a table last.
``pingpong`` checks the ping-pong schedule (bf16, f16, f32 output, e4m3 promoted with
per-tensor and row-wise scales, fast accumulation, grouped) against float64 on ragged shapes
with NaN-poisoned outputs, then times cooperative vs ping-pong vs torch in interleaved
rounds (every round runs each variant once, in a rotating order) and prints a table.
``tail`` checks the promoted FP8 tile variants of :data:`TAIL` (per-tensor and row-wise
scales) against float64 on the ragged shapes, then times them interleaved with
``torch._scaled_mm`` on :data:`TAIL_SHAPES` (docs/perf.md, "FP8 tile by wave count").
``profile`` runs the default promoted FP8 kernel at 4096^3 twice (a warm-up, then the launch
for ``ncu --launch-skip 1 --launch-count 1``).
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
from nvatom.kernels.sm90.config import GemmSm90Config, GemmSm90Error
from nvatom.kernels.sm90.gemm import build_gemm_sm90
from nvatom.kernels.sm90.launch import check_problem, default_config

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


PP = dict(schedule="pingpong", block_n=128, stages=6)
PP_FP8 = dict(PP, promote=1, promote_parts=2, promote_temps=2)
#: (label, config) pairs the ping-pong run checks for correctness
PP_CHECKS = [
    ("bf16 pp MN", GemmSm90Config(**PP)),
    ("bf16 pp K", GemmSm90Config(**PP, b_major="K")),
    ("f16 pp", GemmSm90Config(**PP, in_dtype="f16", out_dtype="f16")),
    ("bf16->f32 pp s5", GemmSm90Config(**dict(PP, stages=5), out_dtype="f32")),
    ("bf16 pp w0", GemmSm90Config(**PP, wgmma_inflight=0)),
    ("e4m3 pp promoted", GemmSm90Config(**PP_FP8, in_dtype="e4m3", b_major="K")),
    ("e4m3 pp row", GemmSm90Config(**PP_FP8, in_dtype="e4m3", b_major="K", scale_mode="row")),
    ("e4m3 pp fast", GemmSm90Config(**PP, in_dtype="e4m3", b_major="K")),
    ("e4m3xe5m2 pp", GemmSm90Config(**PP_FP8, in_dtype="e4m3", b_dtype="e5m2", b_major="K")),
]
PP_SHAPES = [(4096, 4096, 4096), (8192, 8192, 8192), (8192, 8192, 1024)]


def _pp_operands(cfg: GemmSm90Config, m: int, n: int, k: int, gen: torch.Generator):
    """Operands for any config: FP8 with per-tensor or row-wise scales, else 16-bit."""
    if not cfg.fp8:
        return operands(cfg, m, n, k, gen)
    f8 = {"e4m3": torch.float8_e4m3fn, "e5m2": torch.float8_e5m2}
    a = (torch.randn(m, k, device="cuda", generator=gen) * 2).to(f8[cfg.in_dtype])
    b = (torch.randn(n, k, device="cuda", generator=gen) * 2).to(f8[cfg.b_type]).t()
    if cfg.scale_mode == "row":
        sa = torch.rand(m, 1, device="cuda", generator=gen) + 0.5
        sb = torch.rand(1, n, device="cuda", generator=gen) + 0.5
    else:
        sa = torch.rand((), device="cuda", generator=gen) + 0.5
        sb = torch.rand((), device="cuda", generator=gen) + 0.5
    return a, b, sa.float(), sb.float()


def _pp_check(cfg: GemmSm90Config, m: int, n: int, k: int, seed: int) -> dict | None:
    try:
        check_problem(cfg, m, n, k)
    except GemmSm90Error:
        return None
    gen = torch.Generator(device="cuda").manual_seed(seed)
    a, b, sa, sb = _pp_operands(cfg, m, n, k, gen)
    out = torch.full((m, n), float("nan"), device="cuda", dtype=TORCH[cfg.out_dtype])
    prepare_gemm_sm90(a, b, out, cfg, sa, sb)()
    torch.cuda.synchronize()
    ref = a.double() @ b.double()
    if sa is not None:
        ref = ref * sa.double() * sb.double()
    nan = int(torch.isnan(out).sum())
    err = float((out.double() - ref).norm() / ref.norm().clamp_min(1e-30))
    tol = 1e-5 if cfg.out_dtype == "f32" else 1e-2
    return dict(shape=(m, n, k), nan=nan, rel_err=err, ok=nan == 0 and err < tol)


def _interleaved(fns: dict, reps: int, rounds: int) -> dict:
    """Median ms of each callable over ``rounds`` rounds; each round runs every callable
    once (``reps`` launches), the order rotated from round to round."""
    names = list(fns)
    times: dict = {n: [] for n in names}
    for i in range(rounds):
        order = names[i % len(names):] + names[:i % len(names)]
        for nm in order:
            times[nm].append(timed(fns[nm], reps))
    res = {nm: dict(ms=statistics.median(t), min_ms=min(t), rounds=t)
           for nm, t in times.items()}
    if "torch" in times:  # the same round's torch time over the variant's, median
        for nm, t in times.items():
            res[nm]["round_ratio"] = statistics.median(
                r / x for r, x in zip(times["torch"], t, strict=True))
    return res


#: bench/gemm_grouped.py's MoE cases (A: the anchor; B-D: random sizes, seed 0)
def _grouped_cases() -> list[tuple[str, list[int], int, int]]:
    import random

    rng = random.Random(0)
    return [("A", [2048] * 8, 4096, 4096),
            ("B", [rng.randint(0, 1024) for _ in range(64)], 2048, 7168),
            ("C", [rng.randint(0, 4096) for _ in range(8)], 4096, 7168),
            ("D", [rng.randint(0, 4096) for _ in range(64)], 2048, 7168)]


def _pp_grouped(rounds: int, sizes: list[int] | None = None, n: int = 4096,
                k: int = 4096, check: bool = True) -> dict:
    """A grouped case (default A: 8 groups of 2048 x 4096 -> 4096, bf16): cooperative vs
    ping-pong vs torch._grouped_mm, interleaved, with a float64 check of both schedules."""
    import functools
    import importlib

    import nvatom

    ng = importlib.import_module("nvatom.gemm")

    sizes = sizes or [2048] * 8
    ends = [sum(sizes[:i + 1]) for i in range(len(sizes))]
    total = ends[-1]
    a = torch.randn(total + 8, k, device="cuda").to(torch.bfloat16)
    b = torch.randn(len(sizes), k, n, device="cuda").to(torch.bfloat16)
    offs = torch.tensor(ends, dtype=torch.int32, device="cuda")
    fns, res, keep = {}, {}, []
    for label, cfg in (("coop", default_config("bf16", schedule="cooperative")),
                       ("pp", GemmSm90Config(**PP))):
        out = torch.full((total + 8, n), float("nan"), device="cuda", dtype=torch.bfloat16)
        with ng.grouped_variant(config=cfg) as calls:
            nvatom.grouped_gemm(a, b, ends, out=out)
            run, params, buf = next(iter(calls.values()))
        torch.cuda.synchronize()
        num = den = 0.0
        start = 0
        for g, end in enumerate(ends if check else []):
            if end == start:
                continue
            ref = a[start:end].double() @ b[g].double()
            num += float((out[start:end].double() - ref).norm()) ** 2
            den += float(ref.norm()) ** 2
            start = end
        res[label] = dict(rel_err=(num / den) ** 0.5 if den else None,
                          nan=bool(torch.isnan(out[:total]).any()),
                          tail_untouched=bool(torch.isnan(out[total:]).all()))
        stream = torch.cuda.current_stream().cuda_stream
        fns[label] = functools.partial(run, params, stream)
        keep.append(buf)  # the maps stay on the device while the launcher runs
    tb = b
    try:
        torch._grouped_mm(a[:total], b, offs=offs)
    except RuntimeError:
        tb = b.transpose(1, 2).contiguous().transpose(1, 2)  # K-major per group
    fns["torch"] = lambda: torch._grouped_mm(a[:total], tb, offs=offs)
    t = _interleaved(fns, 10, rounds)
    flop = 2 * total * n * k
    for v in t.values():
        v["tflops"] = flop / v["ms"] / 1e9
    return dict(check=res, times=t)


def pingpong(args: argparse.Namespace) -> int:
    out: dict = dict(device=torch.cuda.get_device_name(), checks={}, bench=[])
    for label, cfg in PP_CHECKS if args.set == "first" else []:
        cs = [c for i, (m, n, k) in enumerate(CHECK)
              if (c := _pp_check(cfg, m, n, k, 300 + i)) is not None]
        ok = all(c["ok"] for c in cs)
        out["checks"][label] = dict(ok=ok, n=len(cs), max_err=max(c["rel_err"] for c in cs),
                                    fails=[c for c in cs if not c["ok"]])
        print(f"CHECK {label}: {sum(c['ok'] for c in cs)}/{len(cs)} ok, max err "
              f"{max(c['rel_err'] for c in cs):.2e}", flush=True)
    classes = [] if args.set == "confirm" else [
        ("bf16", default_config("bf16", "bf16", "MN"),
         {"pp_s6": GemmSm90Config(**PP), "pp_s5": GemmSm90Config(**dict(PP, stages=5))}),
        ("e4m3", default_config("e4m3"),
         {"pp_s6": GemmSm90Config(**PP_FP8, in_dtype="e4m3", b_major="K")}),
        ("e4m3_row", default_config("e4m3", scale_mode="row"),
         {"pp_s6": GemmSm90Config(**PP_FP8, in_dtype="e4m3", b_major="K", scale_mode="row")}),
    ]
    shapes_of = {}
    if args.set == "confirm":  # the second run: every bench shape, f16, FP8 variants
        fp8_n1 = dict(PP, promote=1, promote_parts=1, promote_temps=1)
        for label, cfg in (("e4m3 pp n1t1", GemmSm90Config(**fp8_n1, in_dtype="e4m3",
                                                             b_major="K")),
                           ("bf16 pp g16", GemmSm90Config(**PP, raster_group=16))):
            cs = [c for i, (m, n, k) in enumerate(CHECK)
                  if (c := _pp_check(cfg, m, n, k, 500 + i)) is not None]
            out["checks"][label] = dict(ok=all(c["ok"] for c in cs), n=len(cs))
            print(f"CHECK {label}: {sum(c['ok'] for c in cs)}/{len(cs)} ok", flush=True)
        classes = [
            ("bf16", default_config("bf16", "bf16", "MN"),
             {"pp_s6": GemmSm90Config(**PP), "pp_s5": GemmSm90Config(**dict(PP, stages=5)),
              "pp_g16": GemmSm90Config(**PP, raster_group=16)}),
            ("f16", default_config("f16", "f16", "MN"),
             {"pp_s6": GemmSm90Config(**PP, in_dtype="f16", out_dtype="f16")}),
            ("bf16_f32", default_config("bf16", "f32", "MN"),
             {"pp_s6": GemmSm90Config(**PP, out_dtype="f32")}),
            ("e4m3", default_config("e4m3"),
             {"pp_s6": GemmSm90Config(**PP_FP8, in_dtype="e4m3", b_major="K"),
              "pp_s5": GemmSm90Config(**fp8_n1, in_dtype="e4m3", b_major="K")}),
            ("e4m3fast", default_config("e4m3", fast_accum=True),
             {"pp_s6": GemmSm90Config(**PP, in_dtype="e4m3", b_major="K")}),
        ]
        shapes_of = {"bf16": BENCH, "f16": PP_SHAPES[:2], "bf16_f32": PP_SHAPES[:2],
                     "e4m3": PP_SHAPES[:2], "e4m3fast": PP_SHAPES[:2]}
    for cls, coop, pps in classes:
        for (m, n, k) in shapes_of.get(cls, PP_SHAPES):
            gen = torch.Generator(device="cuda").manual_seed(1)
            a, b, sa, sb = _pp_operands(coop, m, n, k, gen)
            fns = {}
            outs = {}
            for nm, cfg in {"coop": coop, **pps}.items():
                o = torch.full((m, n), float("nan"), device="cuda", dtype=TORCH[coop.out_dtype])
                outs[nm] = o
                fns[nm] = prepare_gemm_sm90(a, b, o, cfg, sa, sb)
            if coop.fp8:
                fns["torch"] = lambda a=a, b=b, sa=sa, sb=sb: torch._scaled_mm(
                    a, b, sa, sb, out_dtype=torch.bfloat16)
            elif coop.out_dtype != coop.in_dtype:  # cuBLAS with the wider output
                fns["torch"] = lambda a=a, b=b, od=TORCH[coop.out_dtype]: torch.mm(
                    a, b, out_dtype=od)
            else:
                o2 = torch.empty(m, n, device="cuda", dtype=TORCH[coop.out_dtype])
                fns["torch"] = lambda a=a, b=b, o2=o2: torch.matmul(a, b, out=o2)
            t = _interleaved(fns, args.reps, args.rounds)
            ref = torch.matmul(a.float(), b.float())
            if coop.fp8:
                ref = ref * sa * sb
            errs = {nm: float((o.float() - ref).norm() / ref.norm()) for nm, o in outs.items()}
            row = dict(cls=cls, shape=(m, n, k), times=t, errs=errs,
                       ratio={nm: t["torch"]["ms"] / t[nm]["ms"] for nm in t})
            out["bench"].append(row)
            print(f"BENCH {cls} {m}x{n}x{k}: " + " ".join(
                f"{nm} {2 * m * n * k / v['ms'] / 1e9:.0f}TF ({row['ratio'][nm]:.3f}x)"
                for nm, v in t.items()) + " errs " + " ".join(
                f"{nm}={e:.1e}" for nm, e in errs.items()), flush=True)
    cases = _grouped_cases() if args.set == "confirm" else _grouped_cases()[:1]
    for label, sizes, gn, gk in cases:
        try:
            out[f"grouped_{label}"] = g = _pp_grouped(args.rounds, sizes, gn, gk,
                                                      check=label == "A")
            print(f"GROUPED {label}:", {nm: f"{v['tflops']:.0f}TF ("
                                        f"{g['times']['torch']['ms'] / v['ms']:.3f}x)"
                                        for nm, v in g["times"].items()},
                  g["check"], flush=True)
        except Exception as e:  # report it, keep the plain results
            print(f"GROUPED {label} failed:", type(e).__name__, e, flush=True)
            out[f"grouped_{label}"] = dict(error=f"{type(e).__name__}: {e}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    cols = ("coop", "pp_s6", "pp_s5", "pp_g16", "torch")
    print("\nclass     shape            " + "  ".join(f"{nm:>15}" for nm in cols))
    for row in out["bench"]:
        m, n, k = row["shape"]
        cells = []
        for nm in cols:
            v = row["times"].get(nm)
            cells.append(f"{2 * m * n * k / v['ms'] / 1e9:6.0f} {v['round_ratio']:.3f}x"
                         if v else " " * 15)
        print(f"{row['cls']:<9} {m}x{n}x{k}".ljust(27) + "  ".join(f"{c:>15}" for c in cells))
    return 0


#: The promoted FP8 tiles compared by ``tail`` (on top of ``default_config("e4m3")``: the
#: cooperative 128 x 192, two n96 parts through two temporaries, 4 stages).
TAIL: dict[str, dict] = {
    "d192": {},
    "n256t1": dict(block_n=256, promote_parts=2, promote_temps=1),
    "n256p4t2": dict(block_n=256, promote_parts=4, promote_temps=2),
    "n128t1s6": dict(block_n=128, promote_parts=1, promote_temps=1, stages=6),
    "n128p2t2s6": dict(block_n=128, promote_parts=2, promote_temps=2, stages=6),
}
TAIL_SHAPES = [(4096, 4096, 4096), (8192, 8192, 8192), (8192, 8192, 1024), (2048, 2048, 2048)]


def tail(args: argparse.Namespace) -> int:
    from concurrent.futures import ThreadPoolExecutor

    from nvatom.gemm_providers import _cubin

    out: dict = dict(device=torch.cuda.get_device_name(), checks={}, bench=[])
    names = [nm for nm in TAIL if args.tail == "all" or nm in args.tail.split(",")]
    cfgs = {(mode, nm): dataclasses.replace(default_config("e4m3", scale_mode=mode),
                                            **TAIL[nm])
            for mode in ("tensor", "row") for nm in names}
    t0 = time.perf_counter()
    with ThreadPoolExecutor(8) as ex:  # ptxas runs in subprocesses: assemble in parallel
        list(ex.map(_cubin, cfgs.values()))
    print(f"assembled {len(cfgs)} kernels in {time.perf_counter() - t0:.1f} s", flush=True)
    for (mode, nm), cfg in cfgs.items():
        cs = [c for i, (m, n, k) in enumerate(CHECK)
              if (c := _pp_check(cfg, m, n, k, 700 + i)) is not None]
        out["checks"][f"{nm}/{mode}"] = dict(ok=all(c["ok"] for c in cs), n=len(cs),
                                             max_err=max(c["rel_err"] for c in cs),
                                             fails=[c for c in cs if not c["ok"]])
        print(f"CHECK {nm}/{mode}: {sum(c['ok'] for c in cs)}/{len(cs)} ok, max err "
              f"{max(c['rel_err'] for c in cs):.2e}", flush=True)
    for mode in ("tensor", "row"):
        for (m, n, k) in TAIL_SHAPES:
            gen = torch.Generator(device="cuda").manual_seed(1)
            a, b, sa, sb = _pp_operands(cfgs[(mode, "d192")], m, n, k, gen)
            fns, outs = {}, {}
            for nm in names:
                outs[nm] = torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
                fns[nm] = prepare_gemm_sm90(a, b, outs[nm], cfgs[(mode, nm)], sa, sb)
            if args.tail_gemm:  # the shipped path: nvatom.gemm picks the tile by size
                import nvatom

                outs["gemm"] = og = torch.full((m, n), float("nan"), device="cuda",
                                               dtype=torch.bfloat16)
                fns["gemm"] = lambda a=a, b=b, sa=sa, sb=sb, og=og: nvatom.gemm(
                    a, b, og, scale_a=sa, scale_b=sb)
            fns["torch"] = lambda a=a, b=b, sa=sa, sb=sb: torch._scaled_mm(
                a, b, sa, sb, out_dtype=torch.bfloat16)
            t = _interleaved(fns, args.reps, args.rounds)
            ref = torch.matmul(a.float(), b.float()) * sa * sb
            errs = {nm: float((o.float() - ref).norm() / ref.norm()) for nm, o in outs.items()}
            row = dict(mode=mode, shape=(m, n, k), times=t, errs=errs,
                       tflops={nm: 2 * m * n * k / v["ms"] / 1e9 for nm, v in t.items()})
            out["bench"].append(row)
            print(f"BENCH {mode} {m}x{n}x{k}: " + " ".join(
                f"{nm} {row['tflops'][nm]:.0f}TF ({v['round_ratio']:.3f}x)"
                for nm, v in t.items()), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    cols = (*names, *(("gemm",) if args.tail_gemm else ()), "torch")
    print("\nTF/s and median per-round ratio to torch._scaled_mm (same process, interleaved)")
    print("mode   shape            " + "  ".join(f"{nm:>15}" for nm in cols))
    for row in out["bench"]:
        m, n, k = row["shape"]
        print(f"{row['mode']:<6} {m}x{n}x{k}".ljust(24) + "  ".join(
            f"{row['tflops'][nm]:6.0f} {row['times'][nm]['round_ratio']:.3f}x".rjust(15)
            for nm in cols))
    return 0


def profile() -> int:
    gen = torch.Generator(device="cuda").manual_seed(1)
    cfg = default_config("e4m3")
    a, b, sa, sb = _pp_operands(cfg, 4096, 4096, 4096, gen)
    o = torch.empty(4096, 4096, device="cuda", dtype=torch.bfloat16)
    fn = prepare_gemm_sm90(a, b, o, cfg, sa, sb)
    fn()
    fn()
    torch.cuda.synchronize()
    print("PROFILED", cfg.name, flush=True)
    return 0


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=("smoke", "run", "pingpong", "tail", "profile"))
    ap.add_argument("--tmap", default="cvta")
    ap.add_argument("--variants", default="p")
    ap.add_argument("--shapes", default="all")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--grid", type=int, default=None)
    ap.add_argument("--json", default=None)
    ap.add_argument("--set", default="first", choices=("first", "confirm"),
                    help="pingpong mode: the first comparison or the confirming one")
    ap.add_argument("--no-check", action="store_true")
    ap.add_argument("--tail", default="all", help="tail mode: the TAIL variants to run")
    ap.add_argument("--tail-gemm", action="store_true",
                    help="tail mode: also time nvatom.gemm (the tile chosen by size)")
    args = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    print(torch.cuda.get_device_name(), torch.__version__, flush=True)
    if args.mode == "pingpong":
        return pingpong(args)
    if args.mode == "tail":
        return tail(args)
    if args.mode == "profile":
        return profile()
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
