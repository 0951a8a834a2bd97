"""Attention forward throughput: nvatom.attention against every SDPA backend, one run.

    PYTHONPATH=src python3 bench/attention.py [--rounds 5] [--out reports/bench/attention.json]
        [--head-dims 64,128,256] [--seqlens 4096,16384] [--dtype bf16]

Method (docs/perf.md, "Attention"):

* shapes: head dim 64 / 128 / 256 with 32 / 16 / 8 heads (a model width of 2048), sequence
  length 4096 (batch 4) and 16384 (batch 1), causal and not; q, k, v contiguous
  (B, H, S, D), bf16, ``scale = 1/sqrt(D)``;
* contenders, on the same inputs in the same process: ``nvatom`` (the user path
  ``nvatom.attention(q, k, v, causal=)``: checks, output allocation, launch per call),
  ``nvatom-direct`` (the same kernel through a launcher prepared once, ``prepare``),
  ``nvatom-pingpong`` / ``nvatom-no-pingpong`` (the kernel with the other schedule than
  the default's, prepared), and
  ``torch.nn.functional.scaled_dot_product_attention`` restricted to each backend in turn
  (``cudnn``, ``flash``, ``efficient``; ``math`` at 4k only: it materialises the B x H x S x S
  score matrix);
* one measurement = enough launches between one pair of CUDA events for ~20 ms; rounds are
  interleaved and their order alternates, the median over rounds is reported with the
  spread ((max - min) / median) and the best round;
* TFLOP/s = 4 B H S^2 D / t (halved for causal: the work a causal kernel has to do);
* ratio = nvatom / the fastest SDPA backend of the same shape in the same run, and nvatom /
  FlashAttention-4's CuTe DSL kernel (``fa4``, on contiguous (B, S, H, D) copies of the same
  inputs) where ``flash_attn.cute`` imports (../shared/anchors/README.md);
* before timing, nvatom's output is compared with cuDNN's (max |difference|).

``--with-backward``: after the forward rows, the backward alone (bench/attention_bwd.py, FA4
included where it imports) in the same process, its rows under ``backward`` in the report.
``--backward``: one training step per call instead (forward and backward through
``torch.ops.nvatom.attention``, whose backward is the SM90 backward kernel at d 64 / 128 and
the float32 reference in torch operations at d 256, against SDPA's cuDNN and flash backends'
forward + backward; TFLOP/s = 3.5 x the forward's FLOPs / t, FlashAttention's convention),
written to
``reports/bench/attention_backward.json``.  ``--memory S``: the peak memory of one nvatom
forward + backward step at sequence length S (batch 1, head dim 128, 16 heads, causal)
beyond its inputs, against SDPA's cuDNN backend (the issue's "O(sequence) extra memory").

Writes ``reports/bench/attention.json`` (device, driver, torch, commit, date, rows) and
prints a table.  No assertions about speed.  Commit from ``NVATOM_COMMIT`` where the tree
has no git.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import importlib
import json
import statistics
import sys
import warnings
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT))  # bench._report

from bench import _report as R  # noqa: E402

HEADS = {64: 32, 128: 16, 256: 8}
BATCH = {4096: 4, 16384: 1}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--out", default=str(ROOT / "reports" / "bench" / "attention.json"))
    ap.add_argument("--head-dims", default="64,128,256")
    ap.add_argument("--seqlens", default="4096,16384")
    ap.add_argument("--dtype", default="bf16")
    ap.add_argument("--with-backward", action="store_true",
                    help="also the backward alone (bench/attention_bwd.py) into the report's "
                         "'backward' rows")
    ap.add_argument("--backward", action="store_true",
                    help="time forward + backward steps (reports/bench/attention_backward.json)")
    ap.add_argument("--memory", type=int, metavar="S",
                    help="only the peak memory of one step at sequence length S")
    args = ap.parse_args(argv)
    warnings.filterwarnings("ignore")
    if args.memory:
        return _memory(args.memory, args.dtype)
    if args.backward:
        return _backward(args)
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    import nvatom

    A = importlib.import_module("nvatom.attention")
    K = importlib.import_module("nvatom.kernels.sm90.attention_config")
    dt = {"bf16": torch.bfloat16, "f16": torch.float16}[args.dtype]
    props = torch.cuda.get_device_properties(0)

    def sdpa(q: Any, k: Any, v: Any, causal: bool, be: Any) -> Any:
        with sdpa_kernel([be]):
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal)

    rows = []
    fa4 = R.fa4_attention()
    for d in (int(x) for x in args.head_dims.split(",")):
        for s in (int(x) for x in args.seqlens.split(",")):
            for causal in (False, True):
                b, h = BATCH[s], HEADS[d]
                torch.manual_seed(0)
                q, k, v = (torch.randn(b, h, s, d, dtype=dt, device="cuda") for _ in range(3))
                flops = 4 * b * h * s * s * d / (2 if causal else 1)
                p = A.check_inputs(q, k, v, causal=causal)
                o = torch.empty_like(q)
                lse = torch.empty(b, h, s, dtype=torch.float32, device="cuda")
                cfg = K.default_config(args.dtype, d, causal)
                fns: dict[str, Any] = {
                    "nvatom": functools.partial(nvatom.attention, q, k, v, causal=causal),
                    "nvatom-direct": A.prepare(q, k, v, o, lse, p, cfg),
                }
                alt = dataclasses.replace(cfg, pingpong=not cfg.pingpong)
                fns["nvatom-" + ("pingpong" if alt.pingpong else "no-pingpong")] = A.prepare(
                    q, k, v, torch.empty_like(q), torch.empty_like(lse), p, alt)
                backends = [("cudnn", SDPBackend.CUDNN_ATTENTION),
                            ("flash", SDPBackend.FLASH_ATTENTION),
                            ("efficient", SDPBackend.EFFICIENT_ATTENTION)]
                if s <= 4096:
                    backends.append(("math", SDPBackend.MATH))
                ref = None
                for name, be in backends:
                    f = functools.partial(sdpa, q, k, v, causal, be)
                    try:
                        r = f()
                    except RuntimeError as e:
                        print(f"{name}: unavailable ({str(e)[:120]})")
                        continue
                    if name == "cudnn":
                        ref = r
                    fns[name] = f
                if fa4 is not None:  # FlashAttention-4 (CuTe DSL) on (B, S, H, D) copies
                    qb, kb, vb = (t.transpose(1, 2).contiguous() for t in (q, k, v))
                    fns["fa4"] = functools.partial(fa4, qb, kb, vb, causal=causal)
                    try:
                        fns["fa4"]()
                    except Exception as e:  # report and go on without it
                        print(f"fa4: failed ({type(e).__name__}: {str(e)[:120]})")
                        del fns["fa4"]
                torch.cuda.synchronize()
                fns["nvatom-direct"]()
                diff = (o.float() - ref.float()).abs().max().item() if ref is not None else None
                for fn in fns.values():
                    fn()
                torch.cuda.synchronize()
                times: dict[str, list[float]] = {n: [] for n in fns}
                iters = {n: max(2, int(0.02 / max(R.cuda_seconds(torch, fn, 1), 1e-6)))
                         for n, fn in fns.items()}
                names = list(fns)
                for r_ in range(args.rounds):
                    for n in (names if r_ % 2 == 0 else names[::-1]):
                        times[n].append(R.cuda_seconds(torch, fns[n], iters[n]))
                res = {}
                for n, ts in times.items():
                    med = statistics.median(ts)
                    res[n] = {"tflops": round(flops / med / 1e12, 1),
                              "tflops_best": round(flops / min(ts) / 1e12, 1),
                              "ms_median": round(med * 1e3, 4),
                              "spread": round((max(ts) - min(ts)) / med, 4)}
                sdpa_best = max((x["tflops"] for n, x in res.items()
                                 if not n.startswith(("nvatom", "fa4"))), default=None)
                fastest = max(((x["tflops"], n) for n, x in res.items()
                               if not n.startswith(("nvatom", "fa4"))), default=(0, None))[1]
                for n, x in res.items():
                    if n.startswith("nvatom") and sdpa_best:
                        x["ratio_to_fastest_sdpa"] = round(x["tflops"] / sdpa_best, 3)
                    if n.startswith("nvatom") and "fa4" in res:
                        x["ratio_to_fa4"] = round(x["tflops"] / res["fa4"]["tflops"], 3)
                row = {"head_dim": d, "seqlen": s, "batch": b, "heads": h, "causal": causal,
                       "dtype": args.dtype, "config": cfg.name, "fastest_sdpa": fastest,
                       "max_abs_diff_vs_cudnn": diff, "results": res}
                rows.append(row)
                print(f"d={d} S={s} B={b} H={h} causal={causal} (vs cuDNN {diff})")
                for n, x in res.items():
                    print(f"  {n:<16} {x['tflops']:>7.1f} TF/s  spread {x['spread']:.3f}  "
                          f"{x.get('ratio_to_fastest_sdpa', '')}", flush=True)
                fns.clear()
                del q, k, v, o, lse, ref
                torch.cuda.empty_cache()
    report = {"device": props.name, "sms": props.multi_processor_count,
              "driver_and_power_limit": R.nvidia_smi("driver_version,power.limit"),
              "torch": torch.__version__, "commit": R.commit(), "date": R.utc_date("seconds"),
              "method": f"median of {args.rounds} interleaved rounds (order alternating), "
                        "~20 ms of launches between one pair of CUDA events; TFLOP/s = "
                        "4 B H S^2 D / t (/2 causal); ratio = nvatom / fastest SDPA backend "
                        "of the same shape in the same run",
              "rows": rows}
    if args.with_backward:  # the backward alone (bench/attention_bwd.py), same process
        from bench import attention_bwd

        bwd_out = Path(args.out).with_name("attention_bwd.json")
        attention_bwd.main(["--rounds", str(args.rounds), "--out", str(bwd_out)])
        report["backward"] = json.loads(bwd_out.read_text())["rows"]
    print(f"wrote {R.write_json(args.out, report, indent=2)}")
    return 0


def _step(torch: Any, attn: Any, q: Any, k: Any, v: Any, gout: Any) -> Any:
    """A training step's attention: forward, then backward of sum(out * gout)."""
    qg, kg, vg = (t.detach().requires_grad_() for t in (q, k, v))
    out = attn(qg, kg, vg)
    return torch.autograd.grad(out, (qg, kg, vg), gout)


def _backward(args: Any) -> int:
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    import nvatom.torch_ops as T

    T.register()
    dt = {"bf16": torch.bfloat16, "f16": torch.float16}[args.dtype]
    rows = []
    for d in (int(x) for x in args.head_dims.split(",")):
        for s in (int(x) for x in args.seqlens.split(",")):
            for causal in (False, True):
                b, h = BATCH.get(s, 1), HEADS[d]
                torch.manual_seed(0)
                q, k, v, gout = (torch.randn(b, h, s, d, dtype=dt, device="cuda")
                                 for _ in range(4))
                flops = 3.5 * 4 * b * h * s * s * d / (2 if causal else 1)

                def ours(q: Any, k: Any, v: Any, causal: bool = causal) -> Any:
                    return torch.ops.nvatom.attention(q, k, v, causal, None)[0]

                fns: dict[str, Any] = {"nvatom": functools.partial(_step, torch, ours, q, k, v,
                                                                   gout)}
                for name, be in (("cudnn", SDPBackend.CUDNN_ATTENTION),
                                 ("flash", SDPBackend.FLASH_ATTENTION)):
                    def theirs(q: Any, k: Any, v: Any, be: Any = be, causal: bool = causal
                               ) -> Any:
                        with sdpa_kernel([be]):
                            return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
                    f = functools.partial(_step, torch, theirs, q, k, v, gout)
                    try:
                        f()
                    except RuntimeError as e:
                        print(f"{name}: unavailable ({str(e)[:120]})")
                        continue
                    fns[name] = f
                for fn in fns.values():
                    fn()
                torch.cuda.synchronize()
                iters = {n: max(1, int(0.05 / max(R.cuda_seconds(torch, fn, 1), 1e-6)))
                         for n, fn in fns.items()}
                times = R.rotating_rounds(torch, {n: (lambda fn=fn, i=iters[n]: [
                    fn() for _ in range(i)]) for n, fn in fns.items()}, args.rounds, 1)
                res = {n: {"tflops": round(flops * iters[n] / statistics.median(ts) / 1e12, 1),
                           "ms_median": round(statistics.median(ts) / iters[n] * 1e3, 3)}
                       for n, ts in times.items()}
                best = max((x["tflops"] for n, x in res.items() if n != "nvatom"), default=0)
                if best:
                    res["nvatom"]["ratio_to_fastest_sdpa"] = round(res["nvatom"]["tflops"]
                                                                   / best, 3)
                rows.append({"head_dim": d, "seqlen": s, "batch": b, "heads": h,
                             "causal": causal, "dtype": args.dtype, "results": res})
                print(f"fwd+bwd d={d} S={s} B={b} H={h} causal={causal}: " + "  ".join(
                    f"{n} {x['tflops']} TF/s" for n, x in res.items()), flush=True)
                del q, k, v, gout
                fns.clear()
                torch.cuda.empty_cache()
    out = Path(args.out).with_name("attention_backward.json")
    method = ("forward + backward steps; median of interleaved rounds; TFLOP/s = 3.5 x "
              "4 B H S^2 D / t (/2 causal); nvatom backward = the SM90 kernel (d 64, 128), the "
              "float32 reference in torch operations (d 256)")
    report = {**R.torch_header(torch), "rows": rows, "method": method}
    print(f"wrote {R.write_json(out, report, indent=2)}")
    return 0


def _memory(s: int, dtype: str) -> int:
    """Peak memory beyond the inputs of one forward + backward step at sequence length ``s``
    (batch 1, 16 heads, head dim 128, causal): nvatom's operator and SDPA's cuDNN backend."""
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    import nvatom.torch_ops as T

    T.register()
    dt = {"bf16": torch.bfloat16, "f16": torch.float16}[dtype]
    q, k, v, gout = (torch.randn(1, 16, s, 128, dtype=dt, device="cuda") for _ in range(4))

    def ours(q: Any, k: Any, v: Any) -> Any:
        return torch.ops.nvatom.attention(q, k, v, True, None)[0]

    def cudnn(q: Any, k: Any, v: Any) -> Any:
        with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
            return F.scaled_dot_product_attention(q, k, v, is_causal=True)

    res = {}
    for name, f in (("nvatom", ours), ("cudnn", cudnn)):
        torch.cuda.synchronize()
        base = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        grads = _step(torch, f, q, k, v, gout)
        torch.cuda.synchronize()
        res[name] = {"peak_extra_bytes": torch.cuda.max_memory_allocated() - base,
                     "inputs_bytes": 4 * q.numel() * q.element_size()}
        del grads
        print(f"S={s} {name}: peak {res[name]['peak_extra_bytes'] / 2**20:.1f} MiB beyond "
              f"the inputs ({res[name]['inputs_bytes'] / 2**20:.1f} MiB)", flush=True)
    R.write_json(ROOT / "reports" / "bench" / f"attention_memory_s{s}.json",
                 {**R.torch_header(torch), "seqlen": s, "results": res})
    return 0


if __name__ == "__main__":
    sys.exit(main())
