"""FP8 block scales (DeepSeek-V3: ``scale_a`` 1 x 128, ``scale_b`` 128 x 128) against our
row-wise FP8 kernel and bf16 cuBLAS at the same shapes, with the error against float64.

    PYTHONPATH=src python3 bench/gemm_fp8_block.py [--shapes 4096x4096x4096 ...]
        [--rounds 7] [--batch 10] [--out reports/bench/gemm_fp8_block.json]
        [--deepgemm] [--variants b128,b256p4u4,...] [--grouped-deepgemm]

``--deepgemm``: DeepGEMM's dense shapes (M x N x K as its README writes them) with its
published H800 TFLOP/s beside ours (:data:`DEEPGEMM`; the H800 has the H100's SM count and
FP8 peak).  ``--variants``: block-scale tilings of the SM90 kernel (:data:`VARIANTS`), each
through ``nvatom.gemm`` with a provider holding that config, checked against float64 like
the default and timed in the same rounds.  ``--grouped-deepgemm``: DeepGEMM's grouped
cases (:data:`DEEPGEMM_GROUPED`, contiguous and masked) with its published numbers beside.

``torch._scaled_mm`` on this torch build refuses block scales, so the anchors are
``nvatom.gemm`` with row-wise scales (the same FP8 inputs; its promoted main loop), bf16
``torch.matmul`` (cuBLAS) on the inputs decoded to bf16, and ``torch._scaled_mm`` with
row-wise scales.  Same process, rounds interleaved with alternating order, ``--batch``
launches between two CUDA events over three rotating input sets (A and B not in L2 from the
launch before); the median over rounds is reported with the spread.  Relative error
``|out - ref| / |ref|`` (Frobenius) against the float64 product of the decoded inputs with
the scales expanded.  Writes JSON with the device and commit; asserts nothing.
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

#: DeepGEMM's published dense block-scaled FP8 numbers (H800, TFLOP/s; its README, as issue
#: 27 quotes them): (M, N, K) -> TFLOP/s
DEEPGEMM = {(4096, 7168, 16384): 1426, (4096, 4096, 7168): 1265, (4096, 24576, 1536): 1125,
            (128, 7168, 16384): 645, (64, 2112, 7168): 206}
#: block-scale tilings (GemmSm90Config fields over the block default): 128 x 128 as shipped,
#: with 4 K blocks per loop iteration, and 128 x 256 (two B scale blocks a tile) in 4 parts
#: of n64 through two temporaries or 2 parts of n128 through one
VARIANTS: dict[str, dict[str, Any]] = {
    "b128": {},
    "b128u4": {"promote_unroll": 4},
    "b256p4u4": {"block_n": 256, "promote_parts": 4, "promote_temps": 2, "promote_unroll": 4},
    "b256p4": {"block_n": 256, "promote_parts": 4, "promote_temps": 2},
    "b256p2t1u4": {"block_n": 256, "promote_parts": 2, "promote_temps": 1,
                   "promote_unroll": 4},
    # around the wide default: 2 K blocks an iteration, a 2-CTA cluster (B multicast),
    # group-M raster of 16; and 64-row tiles (one consumer warpgroup) for small M
    "b256p2t1u2": {"block_n": 256, "promote_parts": 2, "promote_temps": 1,
                   "promote_unroll": 2},
    "b256p2t1u4c2": {"block_n": 256, "promote_parts": 2, "promote_temps": 1,
                     "promote_unroll": 4, "cluster_m": 2},
    "b256p2t1u4g16": {"block_n": 256, "promote_parts": 2, "promote_temps": 1,
                      "promote_unroll": 4, "raster_group": 16},
    "m64b128u4": {"consumers": 1, "promote_unroll": 4},
    "m64b128s8u4": {"consumers": 1, "stages": 8, "promote_unroll": 4},
    "m64b256p2t1u4": {"consumers": 1, "block_n": 256, "promote_parts": 2, "promote_temps": 1,
                      "promote_unroll": 4},
    # the wide and small-M defaults with an unrolled iteration's scales loaded at its start
    "b256p2t1u4e": {"block_n": 256, "promote_parts": 2, "promote_temps": 1,
                    "promote_unroll": 4, "promote_scales_early": True},
    "m64b128s8u4e": {"consumers": 1, "stages": 8, "promote_unroll": 4,
                     "promote_scales_early": True},
}


#: DeepGEMM's published grouped numbers (H800, TFLOP/s): (layout, groups, rows per group, N,
#: K) -> TFLOP/s ("contiguous": the groups' rows stacked; "masked": (G, M_max, K) with a
#: count per group, here every row valid)
DEEPGEMM_GROUPED = {("contiguous", 4, 8192, 4096, 7168): 1346,
                    ("contiguous", 8, 4096, 7168, 2048): 1214,
                    ("masked", 1, 1024, 4096, 7168): 1233,
                    ("masked", 4, 256, 7168, 2048): 815}


def _grouped(torch: Any, nvatom: Any, args: Any) -> list[dict[str, Any]]:
    """``--grouped-deepgemm``: DeepGEMM's grouped block-scaled cases through
    ``nvatom.grouped_gemm`` (contiguous) and ``nvatom.grouped_gemm_masked``, each checked
    against float64 (NaN-poisoned output) and timed over ``--rounds`` x ``--batch``."""
    f8 = torch.float8_e4m3fn
    rows = []
    for (layout, g, m, n, k), published in DEEPGEMM_GROUPED.items():
        kb, nb = -(-k // 128), -(-n // 128)
        gen = torch.Generator(device="cuda").manual_seed(g * m + n + k)
        a = (torch.randn(g * m, k, device="cuda", generator=gen) * 0.5).to(f8)
        w = (torch.randn(g, n, k, device="cuda", generator=gen) * 0.5).to(f8)
        sa = torch.rand(g * m, kb, device="cuda", generator=gen) + 0.25
        ws = torch.rand(g, nb, kb, device="cuda", generator=gen) + 0.25  # (G, N/128, K/128)
        b, sb = w.transpose(1, 2), ws.transpose(1, 2)  # (G, K, N), (G, Kb, Nb) K-major
        out = torch.full((g * m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
        if layout == "contiguous":
            ends = [m * (i + 1) for i in range(g)]

            def run(out=out, a=a, b=b, ends=ends, sa=sa, sb=sb) -> Any:
                return nvatom.grouped_gemm(a, b, ends, out=out, scale_a=sa, scale_b=sb)
        else:
            counts = torch.full((g,), m, dtype=torch.int32, device="cuda")

            a3, o3, sa3 = a.view(g, m, k), out.view(g, m, n), sa.view(g, m, kb)

            def run(a3=a3, b=b, counts=counts, o3=o3, sa3=sa3, sb=sb) -> Any:
                return nvatom.grouped_gemm_masked(a3, b, counts, out=o3, scale_a=sa3,
                                                  scale_b=sb)
        run()
        torch.cuda.synchronize()
        err = 0.0
        for i in range(g):
            rs = slice(i * m, (i + 1) * m)
            ea = sa[rs].double().repeat_interleave(128, 1)[:, :k]
            eb = sb[i].double().repeat_interleave(128, 0)[:k].repeat_interleave(128, 1)[:, :n]
            ref = (a[rs].double() * ea) @ (b[i].double() * eb)
            got = out[rs].double()
            err = max(err, ((got - ref).norm() / ref.norm()).item())
            assert not torch.isnan(got).any(), f"{layout} group {i}: NaN left"
            del ea, eb, ref, got
        # the call as it runs in a model: eager, and replayed from a CUDA graph (how
        # DeepGEMM's masked layout is used in decode; no host work per call)
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            run()
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            run()
        times = R.rotating_rounds(torch, {"eager": run, "graph": graph.replay}, args.rounds,
                                  args.batch)
        flops = 2 * g * m * n * k
        row = {"layout": layout, "groups": g, "m_per_group": m, "n": n, "k": k,
               "rel_err_vs_float64": err, "deepgemm_h800_tflops": published}
        for how, ts in times.items():
            tf = flops / statistics.median(ts) / 1e12
            row[how] = {"tflops_median": tf, "tflops_min": flops / max(ts) / 1e12,
                        "tflops_max": flops / min(ts) / 1e12, "ratio_vs_deepgemm": tf / published}
        print(f"{layout} {g}x{m}x{n}x{k}: nvatom eager {row['eager']['tflops_median']:7.1f} "
              f"graph {row['graph']['tflops_median']:7.1f} TF/s  DeepGEMM (H800, published) "
              f"{published}  graph x{row['graph']['ratio_vs_deepgemm']:.3f}  rel err {err:.2e}",
              flush=True)
        rows.append(row)
        del a, w, b, out
        torch.cuda.empty_cache()
    return rows


def _variant_providers(names: list[str]) -> dict[str, str]:
    """Register an SM90 provider per variant (name ``sm90-<variant>``, behind the
    defaults); returns contender name -> provider name."""
    import dataclasses

    import nvatom.gemm as G
    from nvatom.gemm_providers import Sm90Provider
    from nvatom.kernels.sm90.launch import default_config

    base = default_config("e4m3", scale_mode="block")
    out = {}
    for v in names:
        if v not in VARIANTS:
            raise SystemExit(f"unknown variant {v!r} (one of {', '.join(VARIANTS)})")
        prov = Sm90Provider(dataclasses.replace(base, **VARIANTS[v]))
        prov.name = f"sm90-{v}"
        G.register_provider(prov, first=False)
        out[f"nvatom-block-{v}"] = prov.name
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shapes", nargs="*", default=["4096x4096x4096", "8192x8192x8192"])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--batch", type=int, default=10)
    ap.add_argument("--out", type=Path, default=ROOT / "reports/bench/gemm_fp8_block.json")
    ap.add_argument("--deepgemm", action="store_true", help="DeepGEMM's dense shapes")
    ap.add_argument("--variants", default="", help="comma-separated names of VARIANTS")
    ap.add_argument("--grouped-deepgemm", action="store_true",
                    help="DeepGEMM's grouped cases (contiguous and masked) instead")
    args = ap.parse_args(argv)
    import torch

    import nvatom

    if args.grouped_deepgemm:
        R.write_json(args.out, {**R.torch_header(torch), "rounds": args.rounds,
                                "batch": args.batch, "rows": _grouped(torch, nvatom, args)})
        return 0

    if args.deepgemm:
        args.shapes = [f"{m}x{n}x{k}" for m, n, k in DEEPGEMM]
    variants = _variant_providers([v for v in args.variants.split(",") if v])

    f8 = torch.float8_e4m3fn
    rows: list[dict[str, Any]] = []
    for text in args.shapes:
        m, n, k = (int(x) for x in text.split("x"))
        kb, nb = -(-k // 128), -(-n // 128)
        sets = []
        for s in range(3):
            g = torch.Generator(device="cuda").manual_seed(s)
            a = (torch.randn(m, k, device="cuda", generator=g) * 0.5).to(f8)
            w = (torch.randn(n, k, device="cuda", generator=g) * 0.5).to(f8)
            sets.append({
                "a": a, "b": w.t(),
                "sa_blk": torch.rand(m, kb, device="cuda", generator=g) + 0.25,
                "sb_blk": (torch.rand(nb, kb, device="cuda", generator=g) + 0.25).t(),
                "sa_row": torch.rand(m, 1, device="cuda", generator=g) + 0.25,
                "sb_row": torch.rand(1, n, device="cuda", generator=g) + 0.25,
                "a16": a.to(torch.bfloat16), "b16": w.t().to(torch.bfloat16),
                "out": torch.empty(m, n, device="cuda", dtype=torch.bfloat16)})
        fns = {
            "nvatom-block": lambda d: nvatom.gemm(d["a"], d["b"], d["out"],
                                                  scale_a=d["sa_blk"], scale_b=d["sb_blk"]),
            "nvatom-row": lambda d: nvatom.gemm(d["a"], d["b"], d["out"],
                                                scale_a=d["sa_row"], scale_b=d["sb_row"]),
            "scaled_mm-row": lambda d: torch._scaled_mm(d["a"], d["b"], d["sa_row"],
                                                         d["sb_row"],
                                                         out_dtype=torch.bfloat16),
            "cublas-bf16": lambda d: torch.matmul(d["a16"], d["b16"], out=d["out"]),
        }
        for name, prov in variants.items():
            fns[name] = lambda d, prov=prov: nvatom.gemm(
                d["a"], d["b"], d["out"], scale_a=d["sa_blk"], scale_b=d["sb_blk"],
                provider=prov)
        # accuracy (set 0) against float64
        d = sets[0]
        ea = d["sa_blk"].double().repeat_interleave(128, 1)[:, :k]
        eb = d["sb_blk"].double().repeat_interleave(128, 0)[:k].repeat_interleave(128, 1)[:, :n]
        errs: dict[str, float] = {}
        ref = (d["a"].double() * ea) @ (d["b"].double() * eb)
        o = torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
        nvatom.gemm(d["a"], d["b"], o, scale_a=d["sa_blk"], scale_b=d["sb_blk"])
        errs["nvatom-block"] = ((o.double() - ref).norm() / ref.norm()).item()
        for name in variants:
            o.fill_(float("nan"))
            fns[name]({**d, "out": o})
            errs[name] = ((o.double() - ref).norm() / ref.norm()).item()
        del ref, ea, eb
        ref = d["a"].double() @ d["b"].double() * d["sa_row"].double() * d["sb_row"].double()
        o.fill_(float("nan"))
        nvatom.gemm(d["a"], d["b"], o, scale_a=d["sa_row"], scale_b=d["sb_row"])
        errs["nvatom-row"] = ((o.double() - ref).norm() / ref.norm()).item()
        r = fns["scaled_mm-row"](d)
        errs["scaled_mm-row"] = ((r.double() - ref).norm() / ref.norm()).item()
        ref16 = d["a"].double() @ d["b"].double()
        errs["cublas-bf16"] = ((torch.matmul(d["a16"], d["b16"]).double() - ref16).norm()
                               / ref16.norm()).item()
        del ref, ref16, o, r
        times: dict[str, list[float]] = {name: [] for name in fns}
        for name in fns:  # warm up
            for dd in sets:
                fns[name](dd)
        torch.cuda.synchronize()
        order = list(fns)
        for rnd in range(args.rounds):
            for name in (order if rnd % 2 == 0 else order[::-1]):
                e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                e0.record()
                for i in range(args.batch):
                    fns[name](sets[i % 3])
                e1.record()
                e1.synchronize()
                times[name].append(e0.elapsed_time(e1) / args.batch * 1e-3)
        flops = 2 * m * n * k
        row: dict[str, Any] = {"shape": [m, n, k], "rel_err_vs_float64": errs}
        if (m, n, k) in DEEPGEMM:
            row["deepgemm_h800_tflops"] = DEEPGEMM[(m, n, k)]
        for name, ts in times.items():
            med = statistics.median(ts)
            row[name] = {"tflops_median": flops / med / 1e12,
                         "tflops_min": flops / max(ts) / 1e12,
                         "tflops_max": flops / min(ts) / 1e12}
        base = row["nvatom-block"]["tflops_median"]
        row["ratio_block_vs"] = {name: base / row[name]["tflops_median"]
                                 for name in fns if name != "nvatom-block"}
        rows.append(row)
        del sets
        torch.cuda.empty_cache()
    result = {**R.torch_header(torch), "rounds": args.rounds, "batch": args.batch,
              "rows": rows}
    R.write_json(args.out, result)
    for row in rows:
        print("x".join(map(str, row["shape"])))
        if "deepgemm_h800_tflops" in row:
            print(f"  {'DeepGEMM (H800, published)':14} {row['deepgemm_h800_tflops']:7.1f}")
        for name in ("nvatom-block", "nvatom-row", "scaled_mm-row", "cublas-bf16",
                     *variants):
            t = row[name]
            print(f"  {name:14} {t['tflops_median']:7.1f} TF/s [{t['tflops_min']:.0f}-"
                  f"{t['tflops_max']:.0f}]  rel err {row['rel_err_vs_float64'][name]:.2e}"
                  + (f"  block/this {row['ratio_block_vs'][name]:.3f}"
                     if name in row["ratio_block_vs"] else ""))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
