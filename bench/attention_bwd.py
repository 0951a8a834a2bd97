"""Attention backward throughput: nvatom's SM90 backward kernel against SDPA's backends.

    PYTHONPATH=src python3 bench/attention_bwd.py [--rounds 5] [--batch 5]
        [--out reports/bench/attention_bwd.json] [--shapes d128s2048b8h16c,...]
        [--variants red,dqk,...]

Method: the backward alone.  Each contender's forward runs once before timing; then
``nvatom`` is ``attention_backward(dout, q, k, v, out, lse, causal=)`` (the
user path: the stats and the zeroed f32 dQ accumulator prepared by torch operations, the
kernel, the dQ rounding), ``cudnn`` / ``flash`` are ``torch.autograd.grad`` of SDPA's
output restricted to that backend (``retain_graph``: the same graph each call), and ``fa4``
the same of FlashAttention-4's CuTe DSL ``flash_attn_func`` on contiguous (B, S, H, D) copies
where ``flash_attn.cute`` imports (../shared/anchors/README.md).  Shapes:
issue 26's three backward shapes (d128: S2048 B8 H16 causal, S8192 B2 H16 full and causal)
and d64 / d128 at S4096; bf16, contiguous (B, H, S, D).  ``--batch`` calls between two CUDA
events, rounds interleaved with alternating order, median over rounds with the spread.
TFLOP/s = 2.5 x 4 B H S^2 D / t (halved for causal; FlashAttention's convention: the backward
does five S x S x D products against the forward's two).  Before timing nvatom's gradients are
compared with cuDNN's (relative Frobenius difference).  ``--variants``: other kernel
configurations (:data:`VARIANTS`), timed in the same rounds as ``nvatom-<name>``.  Writes
JSON with the device and commit; asserts nothing.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT))  # bench._report

from bench import _report as R  # noqa: E402

#: kernel variants (``--variants``): name -> AttentionBwdSm90Config fields over the default
VARIANTS: dict[str, dict[str, Any]] = {
    "red": {"dq_reduce": "red"},
    "dqk": {"dq_split": "k"},
    "s1": {"stages": 1},
    "s3": {"stages": 3},
}

#: name -> (head dim, seqlen, batch, heads, causal)
SHAPES = {
    "d128s2048b8h16c": (128, 2048, 8, 16, True),
    "d128s8192b2h16": (128, 8192, 2, 16, False),
    "d128s8192b2h16c": (128, 8192, 2, 16, True),
    "d128s4096b4h16": (128, 4096, 4, 16, False),
    "d64s4096b4h32": (64, 4096, 4, 32, False),
    "d64s4096b4h32c": (64, 4096, 4, 32, True),
}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--batch", type=int, default=5)
    ap.add_argument("--shapes", default=",".join(SHAPES))
    ap.add_argument("--out", default=str(ROOT / "reports" / "bench" / "attention_bwd.json"))
    ap.add_argument("--variants", default="", help="comma-separated names of VARIANTS")
    args = ap.parse_args(argv)

    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    import nvatom
    from nvatom.attention import attention_backward
    from nvatom.kernels.sm90.attention_bwd_config import default_bwd_config
    from nvatom.kernels.sm90.attention_config import AttentionSm90Error

    fa4 = R.fa4_attention()
    rows = []
    for name in args.shapes.split(","):
        d, s, b, h, causal = SHAPES[name]
        torch.manual_seed(0)
        q, k, v, dout = (torch.randn(b, h, s, d, dtype=torch.bfloat16, device="cuda")
                         for _ in range(4))
        out, lse = nvatom.attention(q, k, v, causal=causal)
        fns: dict[str, Any] = {"nvatom": lambda q=q, k=k, v=v, out=out, lse=lse, dout=dout,
                               causal=causal: attention_backward(
                                   dout, q, k, v, out, lse, causal=causal, backend="kernel")}
        for vname in filter(None, args.variants.split(",")):
            try:
                vcfg = dataclasses.replace(default_bwd_config("bf16", d, causal),
                                           **VARIANTS[vname])
            except AttentionSm90Error as e:
                print(f"{vname}: not for {name} ({e})")
                continue
            fns[f"nvatom-{vname}"] = (
                lambda q=q, k=k, v=v, out=out, lse=lse, dout=dout, causal=causal, vcfg=vcfg:
                attention_backward(dout, q, k, v, out, lse, causal=causal, config=vcfg))
        grads: dict[str, Any] = {}
        for cname, be in (("cudnn", SDPBackend.CUDNN_ATTENTION),
                          ("flash", SDPBackend.FLASH_ATTENTION)):
            qg, kg, vg = (t.detach().clone().requires_grad_() for t in (q, k, v))
            try:
                with sdpa_kernel([be]):
                    o = F.scaled_dot_product_attention(qg, kg, vg, is_causal=causal)
                grads[cname] = torch.autograd.grad(o, (qg, kg, vg), dout, retain_graph=True)
            except RuntimeError as e:
                print(f"{cname}: unavailable ({str(e)[:120]})")
                continue
            fns[cname] = (lambda o=o, qg=qg, kg=kg, vg=vg, dout=dout: torch.autograd.grad(
                o, (qg, kg, vg), dout, retain_graph=True))
        if fa4 is not None:  # FlashAttention-4's backward, on (B, S, H, D) copies
            qb, kb, vb = (t.transpose(1, 2).contiguous().requires_grad_() for t in (q, k, v))
            dob = dout.transpose(1, 2).contiguous()
            try:
                ob = fa4(qb, kb, vb, causal=causal)[0]
                torch.autograd.grad(ob, (qb, kb, vb), dob, retain_graph=True)
                fns["fa4"] = (lambda ob=ob, qb=qb, kb=kb, vb=vb, dob=dob: torch.autograd.grad(
                    ob, (qb, kb, vb), dob, retain_graph=True))
            except Exception as e:  # report and go on without it
                print(f"fa4: failed ({type(e).__name__}: {str(e)[:120]})")
        ours = fns["nvatom"]()
        diff = {}
        if "cudnn" in grads:
            diff = {gname: round(((a.double() - c.double()).norm() / c.double().norm()).item(),
                                 5)
                    for gname, a, c in zip(("dq", "dk", "dv"), ours, grads["cudnn"],
                                           strict=True)}
        for fn in fns.values():
            fn()
        torch.cuda.synchronize()
        times = R.rotating_rounds(torch, fns, args.rounds, args.batch)
        flops = 2.5 * 4 * b * h * s * s * d / (2 if causal else 1)
        res = {}
        for cname, ts in times.items():
            med = statistics.median(ts)
            res[cname] = {"tflops": round(flops / med / 1e12, 1),
                          "ms_median": round(med * 1e3, 3),
                          "spread": round((max(ts) - min(ts)) / med, 3)}
        best = max((x["tflops"] for n, x in res.items()
                    if not n.startswith(("nvatom", "fa4"))), default=0)
        if best:
            res["nvatom"]["ratio_to_fastest_sdpa"] = round(res["nvatom"]["tflops"] / best, 3)
        if "fa4" in res:
            res["nvatom"]["ratio_to_fa4"] = round(res["nvatom"]["tflops"]
                                                  / res["fa4"]["tflops"], 3)
        rows.append({"shape": name, "head_dim": d, "seqlen": s, "batch": b, "heads": h,
                     "causal": causal, "results": res, "rel_diff_to_cudnn": diff})
        print(f"{name}: " + "  ".join(f"{n} {x['tflops']} TF/s" for n, x in res.items())
              + f"  diff vs cudnn {diff}", flush=True)
        del q, k, v, dout, out, lse, fns, grads
        torch.cuda.empty_cache()
    report = {**R.torch_header(torch), "rows": rows,
              "method": "backward only; median of interleaved rounds; TFLOP/s = 2.5 x "
                        "4 B H S^2 D / t (/2 causal); nvatom = attention_backward(backend="
                        "'kernel') incl. its torch-op stats and dQ scaling"}
    print(f"wrote {R.write_json(args.out, report, indent=2)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
