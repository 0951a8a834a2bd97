"""``nvatom gemm``: build, assemble, run and time nvatom's GEMM kernel for one problem.

    nvatom gemm --m 4096 --n 4096 --k 4096 --dtype bf16 --target sm_90a [--emit out.ptx]
                [--run] [--bench]
    nvatom gemm --m 4096 --n 4096 --k 4096 --dtype e4m3 [--run] [--bench]   # FP8, sm_90a

Without ``--run``: picks the kernel the dispatch table would use on a GPU of ``--target``'s
compute capability, emits its PTX, assembles it with ptxas and prints the kernel name, launch
shape and ptxas's resource report.  ``--run`` (needs torch and a GPU) multiplies random
matrices and compares with a float64 product; ``--bench`` also times against torch.matmul
(CUDA events).  ``--dtype e4m3``: FP8 operands with per-tensor scales and bf16 output (B
K-major, i.e. column-major: ``--b-major K``, the default for it); ``--run`` draws random
scales and also compares with and times against ``torch._scaled_mm``.  Storage orders are
``K`` or ``MN`` (K-major / MN-major, :data:`nvatom.cli.common.MAJORS`).
"""

from __future__ import annotations

import argparse
import re
import statistics
import time
from typing import Any

from nvatom.arch import target
from nvatom.cli.common import add_major, add_target, write_output
from nvatom.errors import NvatomError
from nvatom.runtime.ptxas import assemble
from nvatom.runtime.torch_interop import torch_dtype

# nvatom.gemm (the providers, the SM80/SM90 kernels) and the launcher are imported by the
# functions that run the command: `import nvatom.cli` stays light for every other command
# (tests/test_cli_parser.py, tests/test_function_imports.py's CLI reason).

__all__ = ["add_parser"]


def _capability(target_name: str) -> tuple[int, int]:
    t = target(target_name)
    m = re.fullmatch(r"sm_(\d+)(\d)[af]?", t.name)
    assert m
    return int(m.group(1)), int(m.group(2))


def _cmd_gemm(args: argparse.Namespace) -> int:
    from nvatom.gemm import (
        SCALED_DTYPES,
        SCALED_OUT_DTYPE,
        GemmError,
        GemmProblem,
        check_sizes,
        plan,
    )

    for name in ("m", "n", "k"):
        if getattr(args, name) < 1:
            raise GemmError(f"--{name} must be >= 1, got {getattr(args, name)}")
    try:
        check_sizes(args.m, args.n, args.k)
    except GemmError as e:  # name the option
        raise GemmError(f"--{str(e)[0].lower()}{str(e)[1:]}") from None
    fp8 = args.dtype in SCALED_DTYPES
    out_dtype = args.out_dtype or (SCALED_OUT_DTYPE if fp8 else args.dtype)
    b_major = args.b_major or ("K" if fp8 else "MN")
    if fp8 and b_major != "K":
        raise GemmError(f"--dtype {args.dtype} --b-major {b_major}: FP8 needs b K-major "
                        "(column-major; --b-major K, the default for e4m3)")
    if fp8 and args.a_major != "K":
        raise GemmError(f"--dtype {args.dtype} --a-major {args.a_major}: FP8 needs a K-major "
                        "(row-major; --a-major K)")
    if fp8 and out_dtype != SCALED_OUT_DTYPE:
        raise GemmError(f"--dtype {args.dtype} --out-dtype {out_dtype}: FP8 GEMMs write "
                        f"{SCALED_OUT_DTYPE}")
    args.b_major = b_major
    if args.run or args.bench:
        _torch_for(args)
    # GemmProblem names the contiguous dimension itself: A "K" or "M", B "K" or "N"
    problem = GemmProblem(args.m, args.n, args.k, args.dtype, out_dtype,
                          "M" if args.a_major == "MN" else "K",
                          "N" if b_major == "MN" else "K")
    cap = _capability(args.target)
    t0 = time.perf_counter()
    launch, target = plan(problem, cap)
    ptx = launch.source.build(target)
    emit_ms = 1e3 * (time.perf_counter() - t0)
    if args.emit is not None:
        write_output(args.emit, ptx)
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


def _torch_for(args: argparse.Namespace) -> Any:
    """torch with a GPU, for ``--run`` / ``--bench`` (checked before anything is built)."""
    flag = "--bench" if args.bench else "--run"
    try:
        import torch
    except ImportError:
        raise NvatomError(f"{flag} needs torch (pip install torch), which is not installed; "
                          "without it, leave out --run and --bench") from None
    if not torch.cuda.is_available():
        raise NvatomError(f"{flag} needs a CUDA GPU (torch.cuda.is_available() is False)")
    return torch


def _run(args: argparse.Namespace, out_dtype: str) -> None:
    from nvatom.gemm import check_operands, gemm, plan
    from nvatom.runtime.launch import get_kernel

    torch = _torch_for(args)

    dt, ot = torch_dtype(args.dtype), torch_dtype(out_dtype)
    fp8 = args.dtype == "e4m3"
    if fp8:  # randn / 2 spans e4m3's normal range well; scales random in [0.5, 2)
        a = (torch.randn(args.m, args.k, device="cuda") / 2).to(dt)
        b = (torch.randn(args.k, args.n, device="cuda") / 2).to(dt)
        sa, sb = 0.5 + 1.5 * torch.rand(2, device="cuda", dtype=torch.float32)
        sa, sb = sa.reshape(()).clone(), sb.reshape(()).clone()
        scales = {"scale_a": sa, "scale_b": sb}
    else:
        a = torch.randn(args.m, args.k, device="cuda", dtype=dt)
        b = torch.randn(args.k, args.n, device="cuda", dtype=dt)
        scales = {}
    if args.a_major == "MN":
        a = a.t().contiguous().t()
    if args.b_major == "K":
        b = b.t().contiguous().t()
    d = torch.empty(args.m, args.n, device="cuda", dtype=ot)
    gemm(a, b, d, **scales)
    ref = a.double() @ b.double()
    if fp8:
        ref = ref * sa.double() * sb.double()
    err = ((d.double() - ref).abs().max() / ref.abs().max()).item()
    what = "float64 product of the decoded e4m3 inputs times the scales" if fp8 else \
        "float64 product"
    print(f"run      max |D - ref| / max |ref| = {err:.2e} (ref: {what})")
    if fp8:
        theirs_d = torch._scaled_mm(a, b, sa, sb, out_dtype=torch.bfloat16)
        diff = ((d.double() - theirs_d.double()).abs().max() / ref.abs().max()).item()
        print(f"         max |D - torch._scaled_mm| / max |ref| = {diff:.2e}")
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

    ai, bi, oi, problem = check_operands(a, b, d, **scales)
    launch, target = plan(problem, tuple(torch.cuda.get_device_capability()))  # type: ignore[arg-type]
    kern = get_kernel(launch.source, target)
    ptrs = (sa.data_ptr(), sb.data_ptr()) if fp8 else None
    kargs = launch.args(ai, bi, oi, problem, ptrs)  # type: ignore[arg-type]
    kernel_ms = timed(lambda: kern.launch(launch.grid, launch.block, kargs, shmem=launch.shmem,
                                          cluster=launch.cluster))
    call_ms = timed(lambda: gemm(a, b, d, **scales))
    if fp8:
        ref_name = "torch._scaled_mm"
        theirs = timed(lambda: torch._scaled_mm(a, b, sa, sb, out_dtype=torch.bfloat16))
    else:
        ref_name = "torch.matmul"
        theirs = timed(lambda: torch.matmul(a, b))
    print(f"bench    {launch.source.name}: {flop / kernel_ms / 1e9:.1f} TFLOP/s "
          f"({kernel_ms:.3f} ms); {ref_name} {flop / theirs / 1e9:.1f} TFLOP/s "
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
    g.add_argument("--m", type=int, required=True, help="rows of A and D")
    g.add_argument("--n", type=int, required=True, help="columns of B and D")
    g.add_argument("--k", type=int, required=True,
                   help="the reduction dimension: columns of A, rows of B")
    g.add_argument("--dtype", default="bf16", choices=["bf16", "f16", "e4m3"],
                   help="A and B type (e4m3: FP8 with per-tensor scales, bf16 out, sm_90a)")
    g.add_argument("--out-dtype", choices=["bf16", "f16", "f32"],
                   help="D type (default: dtype; bf16 for e4m3)")
    add_major(g, "--a-major", "A's storage order: K (K-major: row-major M x K, the default) or "
              "MN (MN-major: column-major; the older spelling M is accepted)",
              aliases={"M": "MN"}, default="K")
    add_major(g, "--b-major", "B's storage order: MN (MN-major: row-major K x N as torch's "
              "a @ b, the default for bf16/f16) or K (K-major: column-major, the default and "
              "the only order for e4m3; the older spelling N is accepted for MN)",
              aliases={"N": "MN"}, default=None)
    add_target(g, "the GPU to build for (default sm_90a)", default="sm_90a")
    g.add_argument("--emit", metavar="FILE", help="write the PTX here")
    g.add_argument("--run", action="store_true", help="run once and check against float64")
    g.add_argument("--bench", action="store_true",
                   help="also time against torch.matmul (e4m3: torch._scaled_mm)")
    g.add_argument("--iters", type=int, default=20, help="timed launches for --bench")
    g.set_defaults(func=_cmd_gemm)
