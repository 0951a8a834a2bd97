"""``nvatom gemm``: build, assemble, run and time nvatom's GEMM kernel for one problem.

    nvatom gemm --m 4096 --n 4096 --k 4096 --dtype bf16 --target sm_90a [--emit out.ptx]
                [--run] [--bench]

Without ``--run``: picks the kernel the dispatch table would use on a GPU of ``--target``'s
compute capability, emits its PTX, assembles it with ptxas and prints the kernel name, launch
shape and ptxas's resource report.  ``--run`` (needs torch and a GPU) multiplies random
matrices and compares with torch.matmul; ``--bench`` also times both (CUDA events).
"""

from __future__ import annotations

import argparse
import re
import statistics
import time
from pathlib import Path

from nvatom.errors import NvatomError

__all__ = ["add_parser"]


def _capability(target_name: str) -> tuple[int, int]:
    from nvatom.arch import target

    t = target(target_name)
    m = re.fullmatch(r"sm_(\d+)(\d)[af]?", t.name)
    assert m
    return int(m.group(1)), int(m.group(2))


def _cmd_gemm(args: argparse.Namespace) -> int:
    from nvatom.gemm import GemmError, GemmProblem, plan
    from nvatom.runtime.ptxas import assemble

    for name in ("m", "n", "k"):
        if getattr(args, name) < 1:
            raise GemmError(f"--{name} must be >= 1, got {getattr(args, name)}")
    out_dtype = args.out_dtype or args.dtype
    problem = GemmProblem(args.m, args.n, args.k, args.dtype, out_dtype, args.a_major,
                          args.b_major)
    cap = _capability(args.target)
    t0 = time.perf_counter()
    launch, target = plan(problem, cap)
    ptx = launch.source.build(target)
    emit_ms = 1e3 * (time.perf_counter() - t0)
    if args.emit:
        Path(args.emit).write_text(ptx)
    res = assemble(ptx, target)
    print(f"kernel   {launch.source.name} ({launch.provider}, PTX for {target}, runs on "
          f"{args.target})")
    print(f"launch   grid {launch.grid}, block {launch.block}, {launch.shmem} B dynamic smem"
          + (f", cluster {launch.cluster}" if launch.cluster else ""))
    print(f"ptxas    {res.kernel(launch.source.name).summary()}")
    print(f"python   build + emit {emit_ms:.0f} ms, {ptx.count(chr(10))} PTX lines"
          + (f" -> {args.emit}" if args.emit else ""))
    if args.run or args.bench:
        _run(args, out_dtype)
    return 0


def _run(args: argparse.Namespace, out_dtype: str) -> None:
    try:
        import torch
    except ImportError:
        raise NvatomError("--run needs torch") from None
    if not torch.cuda.is_available():
        raise NvatomError("--run needs a CUDA GPU (torch.cuda.is_available() is False)")
    from nvatom.gemm import gemm
    from nvatom.runtime.torch_interop import torch_dtype

    dt, ot = torch_dtype(args.dtype), torch_dtype(out_dtype)
    a = torch.randn(args.m, args.k, device="cuda", dtype=dt)
    b = torch.randn(args.k, args.n, device="cuda", dtype=dt)
    if args.a_major == "M":
        a = a.t().contiguous().t()
    if args.b_major == "K":
        b = b.t().contiguous().t()
    d = torch.empty(args.m, args.n, device="cuda", dtype=ot)
    gemm(a, b, d)
    ref = a.double() @ b.double()
    err = ((d.double() - ref).abs().max() / ref.abs().max()).item()
    print(f"run      max |D - ref| / max |ref| = {err:.2e} (ref: float64 product)")
    if not args.bench:
        return
    flop = 2.0 * args.m * args.n * args.k

    def timed(fn) -> float:
        for _ in range(3):
            fn()
        ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
              for _ in range(args.iters)]
        for s, e in ev:
            s.record()
            fn()
            e.record()
        torch.cuda.synchronize()
        return statistics.median(s.elapsed_time(e) for s, e in ev)

    from nvatom.gemm import check_operands, plan
    from nvatom.runtime.launch import get_kernel

    ai, bi, oi, problem = check_operands(a, b, d)
    launch, target = plan(problem, tuple(torch.cuda.get_device_capability()))  # type: ignore[arg-type]
    kern = get_kernel(launch.source, target)
    kargs = launch.args(ai, bi, oi, problem)  # type: ignore[arg-type]
    kernel_ms = timed(lambda: kern.launch(launch.grid, launch.block, kargs, shmem=launch.shmem,
                                          cluster=launch.cluster))
    call_ms = timed(lambda: gemm(a, b, d))
    theirs = timed(lambda: torch.matmul(a, b))
    print(f"bench    {launch.source.name}: {flop / kernel_ms / 1e9:.1f} TFLOP/s "
          f"({kernel_ms:.3f} ms); torch.matmul {flop / theirs / 1e9:.1f} TFLOP/s "
          f"({theirs:.3f} ms); ratio {theirs / kernel_ms:.2f}")
    print(f"         nvatom.gemm() end to end (host checks, plan, arguments, launch): "
          f"{call_ms:.3f} ms a call; medians of {args.iters}, inputs stay in L2 when small "
          "(bench/gemm.py rotates them)")


def add_parser(sub: argparse._SubParsersAction) -> None:
    g = sub.add_parser(
        "gemm", help="build/assemble/run nvatom's GEMM kernel for one problem",
        description="Emit the PTX of the GEMM kernel nvatom would pick for a GPU of TARGET, "
        "assemble it and print the launch shape and resources; --run/--bench need torch and "
        "a GPU (docs/runtime.md).")
    g.add_argument("--m", type=int, required=True)
    g.add_argument("--n", type=int, required=True)
    g.add_argument("--k", type=int, required=True)
    g.add_argument("--dtype", default="bf16", choices=["bf16", "f16"], help="A and B type")
    g.add_argument("--out-dtype", choices=["bf16", "f16", "f32"], help="D type (default dtype)")
    g.add_argument("--a-major", choices=["K", "M"], default="K",
                   help="K: A row-major M x K (default); M: column-major")
    g.add_argument("--b-major", choices=["N", "K"], default="N",
                   help="N: B row-major K x N as torch's a @ b (default); K: column-major")
    g.add_argument("--target", default="sm_90a", help="the GPU to build for (default sm_90a)")
    g.add_argument("--emit", metavar="FILE", help="write the PTX here")
    g.add_argument("--run", action="store_true", help="run once and check against float64")
    g.add_argument("--bench", action="store_true", help="also time against torch.matmul")
    g.add_argument("--iters", type=int, default=20, help="timed launches for --bench")
    g.set_defaults(func=_cmd_gemm)
