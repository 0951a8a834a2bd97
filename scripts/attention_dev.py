"""One device run for the attention kernel: correctness on many shapes, then timings of
kernel variants next to torch's SDPA backends in the same process.

    PYTHONPATH=src python scripts/attention_dev.py [--quick] [--json OUT.json] [--only d128]
    PYTHONPATH=src python scripts/attention_dev.py --epilogues [--rounds 5] [--json OUT.json]

Correctness: fresh random inputs, NaN-poisoned outputs, a float32 reference (the math of
softmax(scale q k^T) v in float32, GQA by repeating KV heads), our max error next to the
cuDNN backend's against the same reference.  Timings: CUDA events, interleaved rounds,
median and spread, TFLOP/s = 4 B H Sq Sk D / t (causal: / 2).  ``--epilogues``: only the
two epilogues (``ours_tma``, ``ours_direct``) next to cuDNN at 4k, d 64 / 128 / 256, full and
causal, the contenders' order reversed every other round, then a short table.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import importlib
import json
import math
import statistics
import sys
import time
import traceback
import warnings
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from nvatom.kernels.sm90.attention_config import AttentionSm90Config, default_config

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the root: bench/, tests/
from bench import _report as R
from tests.gpu.attention_ref import reference

A = importlib.import_module("nvatom.attention")  # the module (nvatom.attention is the function)
DT = {"bf16": torch.bfloat16, "f16": torch.float16}


def sdpa(q: Any, k: Any, v: Any, causal: bool, backend: Any) -> Any:
    g = q.shape[1] // k.shape[1]
    with sdpa_kernel([backend]):
        if g > 1:
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=True)
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal)


def run_ours(q: Any, k: Any, v: Any, causal: bool, cfg: Any = None,
             poison: bool = True) -> tuple[Any, Any]:
    p = A.check_inputs(q, k, v, causal=causal)
    fill = float("nan") if poison else 0.0
    out = torch.full((p.batch, p.heads, p.seqlen_q, p.head_dim), fill, dtype=q.dtype,
                     device=q.device)
    lse = torch.full((p.batch, p.heads, p.seqlen_q), fill, dtype=torch.float32,
                     device=q.device)
    A.prepare(q, k, v, out, lse, p, cfg)()
    return out, lse


CASES = [
    # B, H, Hkv, Sq, Sk, D, dtype, causal
    (1, 1, 1, 128, 128, 128, "bf16", False),
    (2, 4, 4, 256, 256, 128, "bf16", False),
    (2, 4, 4, 256, 256, 128, "bf16", True),
    (1, 2, 2, 1000, 1000, 128, "bf16", False),
    (1, 2, 2, 1000, 1000, 128, "bf16", True),
    (2, 8, 2, 333, 517, 128, "f16", False),
    (2, 8, 2, 517, 517, 128, "f16", True),
    (1, 3, 1, 77, 1, 128, "bf16", False),
    (1, 4, 4, 1, 300, 128, "bf16", False),
    (2, 4, 4, 512, 512, 64, "bf16", False),
    (2, 4, 4, 700, 700, 64, "bf16", True),
    (1, 6, 3, 431, 1025, 64, "f16", False),
    (1, 6, 2, 1025, 1025, 64, "f16", True),
    (2, 4, 4, 384, 384, 256, "bf16", False),
    (1, 4, 2, 555, 555, 256, "bf16", True),
    (1, 4, 1, 300, 800, 256, "f16", False),
    (1, 2, 2, 2048, 2048, 128, "bf16", True),
]


def check(cases: list[tuple], log: list[dict], strided: bool = True,
          variant: str = "") -> int:
    bad = 0
    for case in cases:
        b, h, hk, sq, sk, d, dt, causal = case
        cfg = None
        if variant:
            cfg = VARIANTS[variant](dt, d, causal)
            if cfg is None:
                continue
        torch.manual_seed(hash(case) % 1000)
        try:
            if strided:  # (B, S, H, D) storage seen as (B, H, S, D), as attention layers do
                q = torch.randn(b, sq, h, d, dtype=DT[dt], device="cuda").transpose(1, 2)
            else:
                q = torch.randn(b, h, sq, d, dtype=DT[dt], device="cuda")
            k = torch.randn(b, hk, sk, d, dtype=DT[dt], device="cuda")
            v = torch.randn(b, hk, sk, d, dtype=DT[dt], device="cuda")
            scale = 1 / math.sqrt(d)
            ro, rl = reference(q, k, v, causal, scale)
            t0 = time.time()
            out, lse = run_ours(q, k, v, causal, cfg)
            torch.cuda.synchronize()
            el = time.time() - t0
            err = (out.float() - ro).abs().max().item()
            lerr = (lse - rl).abs().max().item()
            nan = bool(torch.isnan(out).any().item() or torch.isnan(lse).any().item())
            try:
                cu = sdpa(q, k, v, causal, SDPBackend.CUDNN_ATTENTION)
                cerr = (cu.float() - ro).abs().max().item()
            except Exception as e:
                cerr = float("nan")
                _ = e
            try:
                fl = sdpa(q, k, v, causal, SDPBackend.FLASH_ATTENTION)
                ferr = (fl.float() - ro).abs().max().item()
            except Exception:
                ferr = float("nan")
            best = min(x for x in (cerr, ferr, 1.0) if x == x)
            ok = (not nan) and err <= max(2 * best, 2e-3 if dt == "f16" else 1.6e-2) \
                and lerr < 1e-3
            bad += not ok
            row = dict(case=case, variant=variant, err=err, lse_err=lerr, cudnn_err=cerr,
                       flash_err=ferr, nan=nan, ok=ok, secs=round(el, 3))
            log.append(row)
            if ok:
                print(f"OK  {variant or 'ours'} {case} err {err:.2e} cudnn {cerr:.2e} "
                      f"lse {lerr:.1e}", flush=True)
            else:
                print("BAD " + json.dumps(row), flush=True)
        except Exception:
            bad += 1
            print("FAIL", case, traceback.format_exc(), flush=True)
            log.append(dict(case=case, ok=False, error=traceback.format_exc()[-2000:]))
    return bad


_BACKENDS = (("cudnn", SDPBackend.CUDNN_ATTENTION), ("flash", SDPBackend.FLASH_ATTENTION),
             ("efficient", SDPBackend.EFFICIENT_ATTENTION))


def bench(shapes: list[tuple], variants: dict[str, Any], rounds: int, out: list[dict],
          backends: tuple[str, ...] = ("cudnn", "flash", "efficient")) -> None:
    for (b, h, s, d, dt, causal) in shapes:
        torch.manual_seed(0)
        q = torch.randn(b, h, s, d, dtype=DT[dt], device="cuda")
        k = torch.randn(b, h, s, d, dtype=DT[dt], device="cuda")
        v = torch.randn(b, h, s, d, dtype=DT[dt], device="cuda")
        flops = 4 * b * h * s * s * d / (2 if causal else 1)
        fns = {}
        p = A.check_inputs(q, k, v, causal=causal)
        o = torch.empty_like(q)
        lse = torch.empty(b, h, s, dtype=torch.float32, device="cuda")
        for name, mk in variants.items():
            try:
                cfg = mk(dt, d, causal)
                if cfg is None:
                    continue
                fns[name] = A.prepare(q, k, v, o, lse, p, cfg)
            except Exception as e:
                print("variant", name, "failed to build:", e, flush=True)
        for name, be in _BACKENDS:
            if name not in backends:
                continue
            f = functools.partial(sdpa, q, k, v, causal, be)
            try:
                f()
                fns[name] = f
            except Exception as e:
                print("sdpa", name, "unavailable:", str(e)[:200], flush=True)
        torch.cuda.synchronize()
        for fn in fns.values():
            fn()
            fn()
        torch.cuda.synchronize()
        iters = max(3, int(0.02 / max(flops / 600e12, 1e-5)))
        times: dict[str, list[float]] = {n: [] for n in fns}
        order = list(fns.items())
        for rnd in range(rounds):
            for n, fn in order if rnd % 2 == 0 else order[::-1]:
                times[n].append(R.cuda_seconds(torch, fn, iters))
        row: dict[str, Any] = dict(batch=b, heads=h, seqlen=s, head_dim=d, dtype=dt,
                                   causal=causal, tflops={}, spread={})
        for n, ts in times.items():
            med = statistics.median(ts)
            row["tflops"][n] = round(flops / med / 1e12, 1)
            row["spread"][n] = round((max(ts) - min(ts)) / med, 3)
        fastest = max((v_ for n, v_ in row["tflops"].items() if not n.startswith("ours")),
                      default=None)
        if fastest:
            row["ratio_vs_fastest_sdpa"] = {n: round(v_ / fastest, 3)
                                            for n, v_ in row["tflops"].items()
                                            if n.startswith("ours")}
        out.append(row)
        print(json.dumps(row), flush=True)
        fns.clear()
        torch.cuda.empty_cache()


C = AttentionSm90Config


def _v(d_only: int | None, **kw: Any) -> Any:
    """A variant: the default config of (dtype, d, causal) with ``kw`` replaced (None where
    the head dim is not ``d_only``)."""
    def mk(dt: str, d: int, c: bool) -> Any:
        if d_only is not None and d != d_only:
            return None
        return dataclasses.replace(default_config(dt, d, c), **kw)
    return mk


VARIANTS = {
    "ours": _v(None),
    "ours_other_pp": lambda dt, d, c: dataclasses.replace(default_config(dt, d, c),
                                                          pingpong=not c),
    "ours_d64_n192": _v(64, block_n=192),
    "ours_d64_s2": _v(64, stages=2),
    "ours_d64_n192_s3": _v(64, block_n=192, stages=3),
    "ours_d256_n80": _v(256, block_n=80),
}
EPILOGUE_VARIANTS = {"ours_tma": _v(None, epilogue="tma"),
                     "ours_direct": _v(None, epilogue="direct")}


def epilogue_table(rows: list[dict]) -> None:
    """The short table of an ``--epilogues`` run: TFLOP/s (spread) and tma / direct."""
    print(f"{'d':>4} {'mask':>6} {'tma':>12} {'direct':>12} {'cudnn':>12} {'tma/direct':>10} "
          f"{'tma/cudnn':>9}")
    for r in rows:
        t, sp = r["tflops"], r["spread"]
        cell = {n: f"{t[n]:.0f} ({100 * sp[n]:.0f}%)" if n in t else "-"
                for n in ("ours_tma", "ours_direct", "cudnn")}
        ratio = t["ours_tma"] / t["ours_direct"] if "ours_direct" in t else float("nan")
        vs = t["ours_tma"] / t["cudnn"] if "cudnn" in t else float("nan")
        print(f"{r['head_dim']:>4} {'causal' if r['causal'] else 'full':>6} "
              f"{cell['ours_tma']:>12} {cell['ours_direct']:>12} {cell['cudnn']:>12} "
              f"{ratio:>10.3f} {vs:>9.3f}", flush=True)
VARIANT_CASES = [
    (1, 4, 2, 555, 1000, 128, "bf16", False),
    (2, 4, 4, 777, 777, 128, "bf16", True),
    (1, 4, 1, 300, 800, 256, "f16", True),
    (1, 6, 2, 1025, 1025, 64, "f16", True),
]


def shapes_for(quick: bool) -> list[tuple]:
    out = []
    for d, h in ((128, 16), (64, 32), (256, 8)):
        for s, b in ((4096, 4), (16384, 1)):
            for c in (False, True):
                if quick and s != 4096:
                    continue
                out.append((b, h, s, d, "bf16", c))
    return out


def main() -> int:
    warnings.filterwarnings("ignore")
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--no-check", action="store_true")
    ap.add_argument("--no-bench", action="store_true")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--json", default="")
    ap.add_argument("--only", default="", help="comma-separated variants to time")
    ap.add_argument("--epilogues", action="store_true",
                    help="time the TMA and direct epilogues next to cuDNN (4k) and stop")
    a = ap.parse_args()
    print(torch.cuda.get_device_name(), torch.__version__, flush=True)
    log: dict[str, Any] = {"device": torch.cuda.get_device_name(), "torch": torch.__version__}
    bad = 0
    if a.epilogues:
        log["bench"] = []
        bench(shapes_for(True), EPILOGUE_VARIANTS, a.rounds, log["bench"], ("cudnn",))
        epilogue_table(log["bench"])
        if a.json:
            with open(a.json, "w") as f:
                json.dump(log, f, indent=1)
        return 0
    if not a.no_check:
        log["checks"] = []
        bad = check(CASES, log["checks"])
        for vn in VARIANTS:
            if vn != "ours":
                bad += check(VARIANT_CASES, log["checks"], variant=vn)
        print(f"correctness: {bad} bad of {len(CASES)}", flush=True)
    if not a.no_bench:
        log["bench"] = []
        vs = VARIANTS if not a.only else {n: VARIANTS[n] for n in a.only.split(",")}
        bench(shapes_for(a.quick), vs, a.rounds, log["bench"])
    if a.json:
        with open(a.json, "w") as f:
            json.dump(log, f, indent=1)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
