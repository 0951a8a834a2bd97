"""GEMM throughput: nvatom's kernels against cuBLAS (torch.matmul / torch._scaled_mm), one run.

    PYTHONPATH=src python3 bench/gemm.py [--kernels sm80,sm90] [--dtypes bf16,f16,e4m3]
        [--shapes MxNxK ...] [--rounds 9] [--batch 20] [--out reports/bench/gemm.json]
    PYTHONPATH=src python3 bench/gemm.py --host-cpu     # host time per call, no GPU needed
    PYTHONPATH=src python3 bench/gemm.py --fp8 [--out reports/bench/gemm_fp8.json]

Method (docs/perf.md):

* every contender runs on the same inputs in the same process: nvatom's kernels through the
  user path ``nvatom.gemm(a, b, out, provider=...)`` ("sm80", "sm90"), the SM90 kernel's own
  prepared launcher (``sm90-direct``, ``prepare_gemm_sm90``: the host-path reference), and
  cuBLAS (``torch.matmul``; for e4m3 ``torch._scaled_mm`` with per-tensor scales);
* e4m3 (A row-major, B column-major, per-tensor f32 scales, bf16 out) runs on the SM90 kernel
  only: its nvatom rows are ``sm90`` (``nvatom.gemm(a, b, out, scale_a=, scale_b=)``) and
  ``sm90-direct``;
* one measurement = ``--batch`` launches between one pair of CUDA events, rotating over enough
  input buffers that a launch's A and B are not in L2 from the one before; time per launch =
  elapsed / batch, so host overhead counts only where it exceeds the GPU time;
* rounds are interleaved and the order alternates (ours, cuBLAS, cuBLAS, ours, ...), so clock
  drift under sustained load hits every contender alike; the median over rounds is reported
  (the best round too);
* before timing, each output is checked against the reference (max relative error);
* also measured: the Python build+emit time of each kernel's PTX (ptxas excluded), and the
  host time per call of ``nvatom.gemm`` against the direct launcher and the per-call path of
  before the launch caches (tensor maps encoded and arguments packed on every call).

Writes ``reports/bench/gemm.json`` (device, driver, torch, commit, date, TFLOP/s, ratios) and
prints a table.  No assertions about speed.

``--block-scales`` and ``--grouped`` run ``bench/gemm_fp8_block.py`` (FP8 block scales against
our row-wise kernel and bf16 cuBLAS, errors against float64) and ``bench/gemm_grouped.py``
(``nvatom.grouped_gemm`` against ``torch._grouped_mm``).

``--fp8``: the FP8 study (docs/perf.md, "FP8"), written to ``reports/bench/gemm_fp8.json``:
for per-tensor and row-wise scales, ``nvatom.gemm`` with its default (promoted) main loop and
with ``fast_accum=True`` against ``torch._scaled_mm`` default and ``use_fast_accum=True``,
interleaved as above, same-run ratios (``sm90`` / ``_scaled_mm``, ``sm90-fast`` /
``_scaled_mm-fast``); and the accuracy columns: relative error ``|out - ref| / |ref|``
(Frobenius) of all four against the float64 product of the decoded inputs times the scales,
at M = N = ``--fp8-mn`` and K = 4096, 8192, 16384 (inputs ``randn`` cast to e4m3, scales in
[0.5, 1.5)).  Commit from ``NVATOM_COMMIT`` where the tree has no git.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT))  # bench._report

from bench import _report as R  # noqa: E402

DEFAULT_SHAPES = [(2048, 2048, 2048), (4096, 4096, 4096), (8192, 8192, 8192),
                  (8192, 8192, 1024), (16384, 1024, 8192)]


# ------------------------------------------------------------------------- host, no GPU


class _FakeDtype:
    def __init__(self, name: str) -> None:
        self.name = name

    def __str__(self) -> str:
        return f"torch.{self.name}"


class _FakeDevice:
    type = "cuda"
    index = 0


class _FakeTensor:
    """Duck-typed 2-D CUDA tensor (what nvatom.runtime.torch_interop reads)."""

    device = _FakeDevice()

    def __init__(self, rows: int, cols: int, ptr: int, dtype: _FakeDtype,
                 col_major: bool = False) -> None:
        self.shape = (rows, cols)
        self._stride = (1, rows) if col_major else (cols, 1)
        self._ptr = ptr
        self.dtype = dtype

    def stride(self) -> tuple[int, int]:
        return self._stride

    def data_ptr(self) -> int:
        return self._ptr

    def element_size(self) -> int:
        return 2


def host_cpu(n: int = 4096, calls: int = 2000) -> dict[str, float]:
    """Host microseconds per call of the SM90 provider path on fake tensors, before and after
    the caches (tensor maps by nvatom's pure-Python encoder standing in for the driver's; the
    driver launch itself is not included)."""
    from nvatom import gemm_providers as gp
    from nvatom.gemm import check_operands, plan
    from nvatom.runtime.launch import PackedParams

    bf = _FakeDtype("bfloat16")
    a = _FakeTensor(n, n, 1 << 30, bf)
    b = _FakeTensor(n, n, 2 << 30, bf)
    d = _FakeTensor(n, n, 3 << 30, bf)
    enc = gp.TENSOR_MAPS.encoder
    gp.TENSOR_MAPS.encoder = lambda tm: tm.encode()
    providers = [gp.Sm90Provider()]
    try:
        lp_cached, _ = plan(check_operands(a, b, d)[3], (9, 0), providers)

        def before() -> None:  # the plan was memoized before too; the maps were not
            ai, bi, oi, p = check_operands(a, b, d)
            gp.TENSOR_MAPS.clear()
            PackedParams.of(lp_cached.source.params, lp_cached.args(ai, bi, oi, p))

        def after() -> None:
            ai, bi, oi, p = check_operands(a, b, d)
            lp_cached.packed(ai, bi, oi, p)

        out = {}
        for name, fn in (("before", before), ("after", after)):
            fn()
            t0 = time.perf_counter()
            for _ in range(calls // (10 if name == "before" else 1)):
                fn()
            out[name] = (time.perf_counter() - t0) / (calls // (10 if name == "before" else 1))
            out[name] *= 1e6
        return out
    finally:
        gp.TENSOR_MAPS.encoder = enc


# ------------------------------------------------------------------------- GPU


def _time_batch(fn: Any, sets: int, batch: int) -> float:
    """Milliseconds per launch of ``batch`` launches of ``fn(i)`` between two events."""
    import torch

    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    start.record()
    for i in range(batch):
        fn(i % sets)
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / batch


def _interleaved(contenders: dict[str, Any], sets: int, batch: int, rounds: int
                 ) -> dict[str, list[float]]:
    names = list(contenders)
    times: dict[str, list[float]] = {n: [] for n in names}
    for n in names:  # warm-up batch each
        _time_batch(contenders[n], sets, batch)
    for r in range(rounds):
        for n in (names if r % 2 == 0 else names[::-1]):
            times[n].append(_time_batch(contenders[n], sets, batch))
    return times


def _build_times(kernels: list[str]) -> dict[str, dict[str, Any]]:
    """Python build+emit of each kernel's PTX (cold: first build in this process; warm:
    median of 3 more), ptxas excluded."""
    from nvatom.kernels import gemm_sm80
    from nvatom.kernels.sm90.gemm import build_gemm_sm90
    from nvatom.kernels.sm90.launch import default_config

    out: dict[str, dict[str, Any]] = {}
    builds: dict[str, Any] = {}
    if "sm80" in kernels:
        for dt in ("bf16",):
            spec = gemm_sm80.GemmSm80Spec(dt, dt, "K", "N", gemm_sm80.GemmSm80Config())
            builds[f"sm80 {dt}"] = lambda s=spec: gemm_sm80.emit_ptx(s, "sm_90a")
    if "sm90" in kernels:
        for dt in ("bf16", "e4m3"):
            cfg = default_config(dt)
            builds[f"sm90 {dt}"] = lambda c=cfg: build_gemm_sm90(c).emit()
    for name, fn in builds.items():
        t0 = time.perf_counter()
        text = fn()
        cold = time.perf_counter() - t0
        warm = []
        for _ in range(3):
            t0 = time.perf_counter()
            fn()
            warm.append(time.perf_counter() - t0)
        out[name] = {"cold_ms": 1e3 * cold, "warm_ms": 1e3 * statistics.median(warm),
                     "ptx_lines": text.count("\n")}
    return out


def _host_gpu(n: int = 4096, calls: int = 20) -> dict[str, float]:
    """Host microseconds per call (queued launches, no sync in between) at n^3 bf16."""
    import torch

    import nvatom
    from nvatom.gemm import check_operands, plan
    from nvatom.gemm_providers import TENSOR_MAPS, prepare_gemm_sm90
    from nvatom.kernels.sm90.launch import default_config
    from nvatom.runtime.launch import get_kernel

    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    d = torch.empty(n, n, device="cuda", dtype=torch.bfloat16)
    direct = prepare_gemm_sm90(a, b, d, default_config("bf16"))
    ai, bi, oi, p = check_operands(a, b, d)
    lp, target = plan(p, (9, 0))
    kern = get_kernel(lp.source, target)

    def old_path() -> None:  # what nvatom.gemm did per call before the caches
        check_operands(a, b, d)
        TENSOR_MAPS.clear()
        kern.launch(lp.grid, lp.block, lp.args(ai, bi, oi, p), shmem=lp.shmem,
                    cluster=lp.cluster)

    a8 = (a / 2).to(torch.float8_e4m3fn)
    b8 = (b / 2).to(torch.float8_e4m3fn).t().contiguous().t()
    sa, sb = torch.tensor(0.5, device="cuda"), torch.tensor(2.0, device="cuda")
    out = {}
    for name, fn in (("nvatom.gemm", lambda: nvatom.gemm(a, b, d, provider="sm90")),
                     ("direct launcher", direct), ("before the caches", old_path),
                     ("nvatom.gemm e4m3 (scales)",
                      lambda: nvatom.gemm(a8, b8, d, scale_a=sa, scale_b=sb))):
        fn()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        out[name] = 1e6 * (time.perf_counter() - t0) / calls
        torch.cuda.synchronize()
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kernels", default="sm80,sm90", help="comma-separated: sm80, sm90")
    ap.add_argument("--dtypes", default="bf16,f16,e4m3", help="comma-separated: bf16,f16,e4m3")
    ap.add_argument("--shapes", nargs="*", default=None, help="MxNxK ... (default: the set above)")
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--batch", type=int, default=20, help="launches per timed measurement")
    ap.add_argument("--host-cpu", action="store_true",
                    help="only the host-time micro-benchmark on fake tensors (no GPU)")
    ap.add_argument("--out", default=None, help="default reports/bench/gemm.json "
                    "(gemm_fp8.json with --fp8)")
    ap.add_argument("--fp8", action="store_true", help="the FP8 study (accuracy and speed, "
                    "per-tensor and row-wise scales, promoted and fast accumulation)")
    ap.add_argument("--fp8-mn", type=int, default=8192, help="M = N of the accuracy runs")
    ap.add_argument("--block-scales", action="store_true",
                    help="FP8 block scales vs our row-wise kernel and bf16 cuBLAS, with errors "
                         "vs float64 (bench/gemm_fp8_block.py -> reports/bench/"
                         "gemm_fp8_block.json)")
    ap.add_argument("--grouped", action="store_true",
                    help="grouped GEMM vs torch._grouped_mm (bench/gemm_grouped.py -> "
                         "reports/bench/gemm_grouped.json)")
    args = ap.parse_args(argv)
    if args.block_scales or args.grouped:
        import importlib.util

        name = "gemm_fp8_block" if args.block_scales else "gemm_grouped"
        spec = importlib.util.spec_from_file_location(name, Path(__file__).with_name(
            f"{name}.py"))
        assert spec is not None and spec.loader is not None
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        extra = ["--rounds", str(args.rounds)] + (["--out", args.out] if args.out else [])
        return int(mod.main(extra))
    if args.fp8:
        return fp8_main(args)
    if args.out is None:
        args.out = str(ROOT / "reports" / "bench" / "gemm.json")
    if args.host_cpu:
        r = host_cpu()
        print(f"host time per nvatom.gemm call (SM90 provider, fake tensors, no launch): "
              f"before {r['before']:.1f} us, after {r['after']:.1f} us")
        return 0

    import torch

    import nvatom
    from nvatom.gemm_providers import prepare_gemm_sm90
    from nvatom.kernels.sm90.launch import default_config
    from nvatom.runtime.torch_interop import ELEMENT_BYTES, torch_dtype

    kernels = [k for k in args.kernels.split(",") if k]
    dtypes = [d for d in args.dtypes.split(",") if d]
    shapes = DEFAULT_SHAPES if not args.shapes else [
        tuple(int(x) for x in s.lower().split("x")) for s in args.shapes]
    props = torch.cuda.get_device_properties(0)
    cap = torch.cuda.get_device_capability(0)
    l2 = getattr(props, "L2_cache_size", 50 * 2**20)
    tdt = {dt: torch_dtype(dt) for dt in ("bf16", "f16", "e4m3")}
    sm90 = "sm90" in kernels and cap == (9, 0)

    build = _build_times(kernels)
    host = _host_gpu() if sm90 else {}
    rows = []
    for dt in dtypes:
        for m, n, k in shapes:
            per_set = (m * k + k * n) * ELEMENT_BYTES[dt]
            sets = max(2, min(32, math.ceil(3 * l2 / per_set)))
            gen = torch.Generator(device="cuda").manual_seed(m + n + k)
            if dt == "e4m3":
                a = [(torch.randn(m, k, device="cuda", generator=gen) / 2).to(tdt[dt])
                     for _ in range(sets)]
                b = [(torch.randn(n, k, device="cuda", generator=gen) / 2).to(tdt[dt]).t()
                     for _ in range(sets)]
                sa = torch.tensor(0.5, device="cuda")
                sb = torch.tensor(2.0, device="cuda")
                ref_name = "torch._scaled_mm"
                d_ref = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)

                def ref(i: int, a=a, b=b, sa=sa, sb=sb) -> Any:
                    return torch._scaled_mm(a[i], b[i], sa, sb, out_dtype=torch.bfloat16)
            else:
                a = [torch.randn(m, k, device="cuda", dtype=tdt[dt], generator=gen)
                     for _ in range(sets)]
                b = [torch.randn(k, n, device="cuda", dtype=tdt[dt], generator=gen)
                     for _ in range(sets)]
                ref_name = "torch.matmul"
                d_ref = torch.empty(m, n, device="cuda", dtype=tdt[dt])

                def ref(i: int, a=a, b=b, d=d_ref) -> Any:
                    return torch.matmul(a[i], b[i], out=d)
            out_dt = torch.bfloat16 if dt == "e4m3" else tdt[dt]
            d = torch.empty(m, n, device="cuda", dtype=out_dt)
            want = ref(0).float()
            contenders: dict[str, Any] = {}
            errors: dict[str, float] = {}
            if dt != "e4m3":
                for kname in kernels:
                    if kname == "sm90" and not sm90:
                        continue
                    contenders[kname] = (lambda i, a=a, b=b, d=d, kn=kname:
                                         nvatom.gemm(a[i], b[i], d, provider=kn))
            elif sm90:  # FP8: the SM90 kernel only, through the user path
                contenders["sm90"] = (lambda i, a=a, b=b, d=d, sa=sa, sb=sb:
                                      nvatom.gemm(a[i], b[i], d, scale_a=sa, scale_b=sb))
            if sm90:
                cfg = default_config(dt)
                scales = (sa, sb) if dt == "e4m3" else (None, None)
                prepared = [prepare_gemm_sm90(a[i], b[i], d, cfg, *scales) for i in range(sets)]
                contenders["sm90-direct"] = lambda i, p=prepared: p[i]()
            for name, fn in contenders.items():
                d.fill_(float("nan"))
                fn(0)
                torch.cuda.synchronize()
                errors[name] = ((d.float() - want).abs().max() / want.abs().max()).item()
            contenders[ref_name] = ref
            times = _interleaved(contenders, sets, args.batch, args.rounds)
            flop = 2.0 * m * n * k
            med = {nm: statistics.median(t) for nm, t in times.items()}
            row = {"m": m, "n": n, "k": k, "dtype": dt, "reference": ref_name,
                   "input_sets": sets, "results": {}}
            for nm, t in times.items():
                row["results"][nm] = {
                    "ms_median": med[nm], "ms_best": min(t), "tflops": flop / med[nm] / 1e9,
                    "tflops_best": flop / min(t) / 1e9, "ratio_to_reference": med[ref_name]
                    / med[nm], "max_rel_err": errors.get(nm, 0.0)}
            rows.append(row)
            del a, b, d, d_ref, contenders
            torch.cuda.empty_cache()

    driver, driver_cuda = R.nvidia_smi("driver_version"), R.cuda_driver_version()
    print(f"device: {props.name} (sm_{cap[0]}{cap[1]}), driver {driver} (CUDA {driver_cuda}), "
          f"torch {torch.__version__}; median of {args.rounds} interleaved rounds, "
          f"{args.batch} launches per measurement")
    print(f"{'dtype':<5} {'M':>6} {'N':>6} {'K':>6}  {'kernel':<17} {'TFLOP/s':>8} "
          f"{'best':>7} {'ms':>8} {'vs ref':>7} {'rel err':>8}")
    for r in rows:
        shape = f"{r['dtype']:<5} {r['m']:>6} {r['n']:>6} {r['k']:>6}"
        for nm, x in r["results"].items():
            print(f"{shape}  {nm:<17} {x['tflops']:>8.1f} {x['tflops_best']:>7.1f} "
                  f"{x['ms_median']:>8.3f} {x['ratio_to_reference']:>7.3f} "
                  f"{x['max_rel_err']:>8.1e}")
    for nm, x in build.items():
        print(f"build+emit {nm}: cold {x['cold_ms']:.0f} ms, warm {x['warm_ms']:.0f} ms "
              f"({x['ptx_lines']} PTX lines; ptxas excluded)")
    for nm, us in host.items():
        print(f"host time per call at 4096^3 (bf16 unless named), {nm}: {us:.1f} us")
    report = {"device": props.name, "capability": f"{cap[0]}.{cap[1]}",
              "driver": driver, "driver_cuda": driver_cuda,
              "torch": torch.__version__, "commit": R.commit(dirty=True),
              "date": R.utc_date("seconds"),
              "method": f"median of {args.rounds} interleaved rounds (order alternating), "
                        f"{args.batch} launches between one pair of CUDA events, inputs "
                        "rotated over input_sets buffers; nvatom rows through nvatom.gemm "
                        "(provider=...; e4m3 with scale_a=, scale_b=), sm90-direct through "
                        "prepare_gemm_sm90",
              "ptx_build_emit": build, "host_us_per_call_4096": host, "results": rows}
    print(f"wrote {R.write_json(args.out, report, indent=2)}")
    return 0


FP8_SHAPES = [(8192, 8192, 8192), (4096, 4096, 4096), (8192, 8192, 16384)]


def _fp8_operands(m: int, n: int, k: int, rowwise: bool, gen: Any) -> tuple[Any, ...]:
    import torch

    a = torch.randn(m, k, device="cuda", generator=gen).to(torch.float8_e4m3fn)
    b = torch.randn(n, k, device="cuda", generator=gen).to(torch.float8_e4m3fn).t()
    shape_a, shape_b = ((m, 1), (1, n)) if rowwise else ((), ())
    sa = torch.rand(shape_a, device="cuda", generator=gen) + 0.5
    sb = torch.rand(shape_b, device="cuda", generator=gen) + 0.5
    return a, b, sa, sb


def _fp8_contenders(a: Any, b: Any, sa: Any, sb: Any, d: Any) -> dict[str, Any]:
    """name -> fn(i) over input set i: nvatom promoted / fast, _scaled_mm default / fast."""
    import torch

    import nvatom

    out: dict[str, Any] = {}
    for fast in (False, True):
        sfx = "-fast" if fast else ""
        out["sm90" + sfx] = (lambda i, f=fast: nvatom.gemm(a[i], b[i], d, scale_a=sa[i],
                                                            scale_b=sb[i], fast_accum=f))
        out["torch._scaled_mm" + sfx] = (
            lambda i, f=fast: torch._scaled_mm(a[i], b[i], sa[i], sb[i],
                                               out_dtype=torch.bfloat16, use_fast_accum=f))
    return out


def fp8_main(args: Any) -> int:
    """The FP8 study (module docstring): accuracy against float64, then speed."""
    import torch

    props = torch.cuda.get_device_properties(0)
    cap = torch.cuda.get_device_capability(0)
    if cap != (9, 0):
        print(f"--fp8 needs an sm_90 GPU, this is {props.name} (sm_{cap[0]}{cap[1]})")
        return 1
    gen = torch.Generator(device="cuda").manual_seed(2024)
    accuracy = []
    mn = args.fp8_mn
    for k in (4096, 8192, 16384):
        for mode in ("tensor", "row"):
            a, b, sa, sb = _fp8_operands(mn, mn, k, mode == "row", gen)
            ref = (a.double() @ b.double()) * sa.double() * sb.double()
            d = torch.empty(mn, mn, device="cuda", dtype=torch.bfloat16)
            row: dict[str, Any] = {"m": mn, "n": mn, "k": k, "scales": mode}
            for nm, fn in _fp8_contenders([a], [b], [sa], [sb], d).items():
                d.fill_(float("nan"))
                got = fn(0)
                torch.cuda.synchronize()
                got = d if got is None or got is d else got
                bad = bool(torch.isnan(got).any())
                row[nm] = float("nan") if bad else float((got.double() - ref).norm()
                                                         / ref.norm())
            accuracy.append(row)
            del a, b, ref
            torch.cuda.empty_cache()
    shapes = FP8_SHAPES if not args.shapes else [
        tuple(int(x) for x in s.lower().split("x")) for s in args.shapes]
    l2 = getattr(props, "L2_cache_size", 50 * 2**20)
    speed = []
    for m, n, k in shapes:
        for mode in ("tensor", "row"):
            sets = max(2, min(32, math.ceil(3 * l2 / (m * k + k * n))))
            ops = [_fp8_operands(m, n, k, mode == "row", gen) for _ in range(sets)]
            a, b, sa, sb = (list(x) for x in zip(*ops, strict=True))
            d = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
            times = _interleaved(_fp8_contenders(a, b, sa, sb, d), sets, args.batch,
                                 args.rounds)
            med = {nm: statistics.median(t) for nm, t in times.items()}
            flop = 2.0 * m * n * k
            speed.append({
                "m": m, "n": n, "k": k, "scales": mode, "input_sets": sets,
                "results": {nm: {"ms_median": med[nm], "ms_best": min(t),
                                 "tflops": flop / med[nm] / 1e9, "spread": max(t) / min(t)}
                            for nm, t in times.items()},
                "ratio_promoted_vs_scaled_mm": med["torch._scaled_mm"] / med["sm90"],
                "ratio_fast_vs_scaled_mm_fast": med["torch._scaled_mm-fast"] / med["sm90-fast"],
            })
            del a, b, sa, sb, ops, d
            torch.cuda.empty_cache()
    driver = R.nvidia_smi("driver_version")
    print(f"device: {props.name}, driver {driver}, torch {torch.__version__}")
    print("relative error vs float64 (Frobenius):")
    for r in accuracy:
        print(f"  {r['m']}x{r['n']}x{r['k']:<6} {r['scales']:<6} " + "  ".join(
            f"{nm} {r[nm]:.4e}" for nm in ("sm90", "torch._scaled_mm", "sm90-fast",
                                           "torch._scaled_mm-fast")))
    print("speed (median TFLOP/s; same-run ratios):")
    for r in speed:
        x = r["results"]
        print(f"  {r['m']}x{r['n']}x{r['k']:<6} {r['scales']:<6} " + "  ".join(
            f"{nm} {x[nm]['tflops']:.0f}" for nm in x)
              + f"  promoted/scaled_mm {r['ratio_promoted_vs_scaled_mm']:.3f}"
              + f"  fast/scaled_mm-fast {r['ratio_fast_vs_scaled_mm_fast']:.3f}")
    report = {"device": props.name, "capability": "9.0", "driver": driver,
              "torch": torch.__version__, "commit": R.commit(dirty=True),
              "date": R.utc_date("seconds"),
              "method": f"median of {args.rounds} interleaved rounds (order alternating), "
                        f"{args.batch} launches between one pair of CUDA events, inputs "
                        "rotated over input_sets buffers; nvatom through nvatom.gemm(a, b, "
                        "out, scale_a=, scale_b=, fast_accum=); accuracy: Frobenius "
                        "relative error against the float64 product",
              "accuracy": accuracy, "speed": speed}
    out = R.write_json(args.out or ROOT / "reports" / "bench" / "gemm_fp8.json", report, indent=2)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
