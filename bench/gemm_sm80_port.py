"""The SM80 GEMM built on the typed-tensor layer against the hand-written build it replaced,
and cuBLAS (``torch.mm``), in one process on one GPU.

    # on a checkout of the old commit: write the old kernels' PTX
    PYTHONPATH=<old>/src python3 bench/gemm_sm80_port.py --emit-old bench/_sm80_old
    # on the GPU machine, from this tree
    PYTHONPATH=src python3 bench/gemm_sm80_port.py --old bench/_sm80_old [--rounds 7]

Both builds take the same parameters (``kernel_params``), grid, block and dynamic shared
memory (``GemmSm80Spec``), so each is launched directly with the same arguments; each is
checked first against float64 (relative error, Frobenius) with the output NaN-poisoned.
Rounds interleave the contenders with a rotating order; ``--batch`` launches between two CUDA
events; the median over rounds.  Writes reports/bench/gemm_sm80_port.json; asserts nothing.
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

#: (M, N, K, A major, B major): square sizes, a ragged one, short K (where the epilogue
#: weighs most), and the other storage orders
SHAPES = [(4096, 4096, 4096, "K", "N"), (8192, 8192, 4096, "K", "N"),
          (3000, 2008, 1000, "K", "N"), (2048, 2048, 512, "K", "N"),
          (2048, 2048, 1024, "K", "N"), (4096, 4096, 4096, "M", "K"),
          (4096, 4096, 4096, "K", "K")]
#: the tilings compared; "default-direct" is the default tiling with the direct epilogue
#: (each thread's column pairs straight to gmem, as the hand-written kernel stored them),
#: against the old default build
CONFIGS = ("default", "64x128x64", "default-direct")
_OLD = {"default-direct": "default"}  # the old build a new tiling is compared with


def _spec(a_major: str, b_major: str, cfg: str) -> Any:
    from nvatom.kernels import gemm_sm80 as sm80

    if cfg == "64x128x64":
        c = sm80.GemmSm80Config(bm=64, bn=128, bk=64, warps_m=1, warps_n=2, stages=3,
                                group_m=8)
    elif cfg == "default-direct":  # (a field the old build does not have)
        c = sm80.GemmSm80Config(epilogue="direct")
    else:
        c = sm80.GemmSm80Config()
    return sm80.GemmSm80Spec("bf16", "bf16", a_major, b_major, c)


def _file(a_major: str, b_major: str, cfg: str) -> str:
    return f"sm80_{_OLD.get(cfg, cfg)}_a{a_major}_b{b_major}.ptx"


def emit_old(out: Path) -> int:
    from nvatom.kernels import gemm_sm80 as sm80

    out.mkdir(parents=True, exist_ok=True)
    for _, _, _, am, bm in SHAPES:
        for cfg in CONFIGS:
            if cfg not in _OLD:
                (out / _file(am, bm, cfg)).write_text(sm80.emit_ptx(_spec(am, bm, cfg),
                                                                    "sm_90a"))
    print(f"old PTX -> {out}")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--old", type=Path, help="folder of the old build's PTX (--emit-old)")
    ap.add_argument("--emit-old", type=Path, help="write this checkout's PTX there and exit")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--batch", type=int, default=10)
    ap.add_argument("--out", type=Path, default=ROOT / "reports/bench/gemm_sm80_port.json")
    ap.add_argument("--shapes", help="MxNxK[:AB] comma-separated (A major K/M, B major N/K; "
                    "default KN), instead of the default list")
    args = ap.parse_args(argv)
    if args.emit_old:
        return emit_old(args.emit_old)
    if args.old is None:
        ap.error("--old DIR is required (the old build's PTX, from --emit-old)")
    import torch

    from nvatom.kernels import gemm_sm80 as sm80
    from nvatom.runtime.launch import PackedParams
    from nvatom.runtime.load import load_kernel

    shapes = SHAPES
    if args.shapes:
        shapes = []
        for item in args.shapes.split(","):
            dims, _, majors = item.partition(":")
            m_, n_, k_ = (int(x) for x in dims.split("x"))
            shapes.append((m_, n_, k_, *(tuple(majors) if majors else ("K", "N"))))
    rows = []
    for m, n, k, am, bm in shapes:
        a = torch.randn(m, k, device="cuda").to(torch.bfloat16)
        b = torch.randn(k, n, device="cuda").to(torch.bfloat16)
        a_st = a if am == "K" else a.t().contiguous().t()  # A^T row-major for M-major
        b_st = b if bm == "N" else b.t().contiguous().t()
        lda = k if am == "K" else m
        ldb = n if bm == "N" else k
        ref = a.double() @ b.double()
        out = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
        fns: dict[str, Any] = {"cuBLAS (torch.mm)": lambda a=a, b=b: torch.mm(a, b)}
        checks: dict[str, float] = {}
        for cfg in CONFIGS:
            spec = _spec(am, bm, cfg)
            old_spec = _spec(am, bm, _OLD.get(cfg, cfg))
            for build, ptx, name in (
                    ("old", (args.old / _file(am, bm, cfg)).read_text(), old_spec.kernel_name),
                    ("new", sm80.emit_ptx(spec, "sm_90a"), spec.kernel_name)):
                kern = load_kernel(ptx, "sm_90a", name, params=sm80.kernel_params())
                launcher = kern.launcher(spec.grid(m, n), spec.block(),
                                         shmem=spec.config.smem_bytes())
                packed = PackedParams.of(sm80.kernel_params(), [
                    a_st.data_ptr(), b_st.data_ptr(), out.data_ptr(), m, n, k, lda, ldb, n])

                def run(launcher=launcher, packed=packed) -> None:
                    launcher(packed, torch.cuda.current_stream().cuda_stream)

                out.fill_(float("nan"))
                run()
                torch.cuda.synchronize()
                name = f"{build} {cfg}"
                checks[name] = float((out.double() - ref).norm() / ref.norm())
                fns[name] = run
        times = R.rotating_rounds(torch, fns, args.rounds, args.batch)
        flops = 2 * m * n * k
        row: dict[str, Any] = {"m": m, "n": n, "k": k, "a_major": am, "b_major": bm,
                               "checks": checks}
        for name, ts in times.items():
            row[name] = {"tflops_median": flops / statistics.median(ts) / 1e12}
        for cfg in CONFIGS:
            row[f"new/old {cfg}"] = (statistics.median(times[f"old {cfg}"])
                                     / statistics.median(times[f"new {cfg}"]))
        rows.append(row)
        print(f"{m}x{n}x{k} a{am} b{bm}: " + "  ".join(
            f"{name} {row[name]['tflops_median']:.0f}" for name in times) + "  " + "  ".join(
            f"new/old {cfg} x{row[f'new/old {cfg}']:.3f}" for cfg in CONFIGS)
            + f"  max err {max(checks.values()):.1e}", flush=True)
    R.write_json(args.out, {**R.torch_header(torch), "rounds": args.rounds,
                            "batch": args.batch, "rows": rows})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
