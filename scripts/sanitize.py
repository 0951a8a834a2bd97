#!/usr/bin/env python3
"""Every shipped kernel configuration under compute-sanitizer (issue 28, "Sanitizer-clean
kernels"): memcheck, racecheck, synccheck and initcheck, on shapes that give several tiles
per CTA, ragged edges and empty groups.  Writes reports/sanitize.json.

    python scripts/sanitize.py --out reports/sanitize.json      # on a GPU machine (make sanitize)
    python scripts/sanitize.py --list                            # the configurations

How it runs: for each tool, one process (``compute-sanitizer --tool T python sanitize.py
--worker``) runs every configuration once, printing ``@@config NAME`` before each; for
memcheck, racecheck and synccheck only nvatom's kernels are instrumented (``--kernel-name``
filters), so torch's own kernels (the random inputs, the NaN poison) cost nothing.  initcheck
instruments every kernel: it learns that memory is initialized from the writes it observes,
and the writes of a kernel the filter leaves out are not observed (on the H200 every
``cp.async`` of the SM80 GEMM's inputs, written by torch's ``randn``, was then reported as
an "Uninitialized __global__ memory read").  The sanitizer's report is split into records
and each is attributed to the configuration that was running, and classified:

* **kernel** errors: a hazard or invalid access inside one of our kernels (memcheck's
  ``Invalid __global__ read``, racecheck's hazards, synccheck's barrier errors, initcheck's
  uninitialized reads);
* **api** errors: memcheck's ``Program hit ... on CUDA API call to ...`` records (a failed
  ``cuGetProcAddress`` probe of a driver entry point the toolkit does not have is one),
  counted apart, as the issue asks.

racecheck sees ordinary shared-memory accesses only: TMA and WGMMA reads/writes go through
the async proxy, which it does not track; the kernel layer's pipeline checks cover those
(docs/pipelines.md).  Exit status 1 when any kernel error was found.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
TOOLS = ("memcheck", "racecheck", "synccheck", "initcheck")
#: nvatom's kernel names (gemm_sm80_*, gemm_sm90_* (grouped too), nvatom_attn_sm90_*): the
#: filters are additive, each a substring of the kernel's name
KERNELS = ("kns=gemm_sm", "kns=nvatom_")
MARK = "@@config "


# --------------------------------------------------------------------------- configurations


def _configs() -> list[tuple[str, Callable[[], None]]]:
    """(name, run) for every shipped configuration; ``run`` launches once and synchronizes."""
    import torch

    import nvatom
    from nvatom.gemm_providers import prepare_gemm_sm90
    from nvatom.kernels.sm90.launch import default_config
    from nvatom.kernels.sm90.tuning import SCHEDULE_TILES

    gen = torch.Generator(device="cuda").manual_seed(1234)
    e4m3, e5m2 = torch.float8_e4m3fn, torch.float8_e5m2

    def rnd(*shape: int, dtype: Any = torch.bfloat16) -> Any:
        x = torch.randn(*shape, device="cuda", generator=gen)
        return (x * 0.5).to(dtype)

    def nan(m: int, n: int, dtype: Any = torch.bfloat16) -> Any:
        return torch.full((m, n), float("nan"), device="cuda", dtype=dtype)

    out: list[tuple[str, Callable[[], None]]] = []
    # SM80 (one tile per CTA): ragged M, N, K; every storage order
    m, n, k = 520, 456, 136
    for dt in (torch.bfloat16, torch.float16):
        t = t_name(dt)
        for a_t in (False, True):
            for b_t in (False, True):
                def run80(dt=dt, a_t=a_t, b_t=b_t) -> None:
                    a = rnd(k, m, dtype=dt).t() if a_t else rnd(m, k, dtype=dt)
                    b = rnd(n, k, dtype=dt).t() if b_t else rnd(k, n, dtype=dt)
                    nvatom.gemm(a, b, nan(m, n, dt), provider="sm80")
                out.append((f"sm80_{t}_a{'M' if a_t else 'K'}_b{'K' if b_t else 'N'}", run80))
    # SM90, each schedule and B major: the persistent grid capped at 7 CTAs, so each CTA
    # runs several tiles (the next tile's copies and the last epilogue's stores overlap)
    m, n, k = 1000, 904, 200
    for dt in (torch.bfloat16, torch.float16):
        t = t_name(dt)
        for sched in SCHEDULE_TILES:
            for b_major in ("MN", "K"):
                def run90(dt=dt, sched=sched, b_major=b_major) -> None:
                    cfg = default_config(t_name(dt), b_major=b_major, schedule=sched)
                    a = rnd(m, k, dtype=dt)
                    b = rnd(n, k, dtype=dt).t() if b_major == "K" else rnd(k, n, dtype=dt)
                    prepare_gemm_sm90(a, b, nan(m, n, dt), cfg, grid=7)()
                out.append((f"sm90_{t}_{sched}_b{b_major}", run90))
        out.append((f"sm90_{t}_out_f32", lambda dt=dt: nvatom.gemm(
            rnd(m, k, dtype=dt), rnd(k, n, dtype=dt), nan(m, n, torch.float32))))
    # FP8 through nvatom.gemm: per-tensor and row-wise scales promoted or fast, block scales
    # (promoted only); e5m2 B; 2000 x 2008 is more tiles than SMs.  Block scales: K of five
    # blocks (one unrolled iteration of four and one left over); by wave count
    # (tuning.FP8_BLOCK_TILE_CHOICES) 2000 x 2008 takes the 128 x 256 tile, 256 x 7168
    # ("block-narrow") the 128 x 128 one, 128 x 2008 ("block-small-m") the 64 x 128 one
    m8, n8, k8 = 2000, 2008, 256
    block_mn = {"block": (m8, n8), "block-narrow": (256, 7168), "block-small-m": (128, n8)}
    for mode, fast in (("tensor", False), ("tensor", True), ("row", False), ("row", True),
                       ("block", False), ("block-narrow", False), ("block-small-m", False)):
        for bt in (e4m3, e5m2):
            def run8(mode=mode, fast=fast, bt=bt) -> None:
                (m8_, n8_), k8_ = block_mn.get(mode, (m8, n8)), (640 if mode in block_mn
                                                                 else k8)
                a = rnd(m8_, k8_, dtype=e4m3)
                b = rnd(n8_, k8_, dtype=bt).t()
                if mode == "tensor":
                    sa = torch.tensor([0.7], device="cuda")
                    sb = torch.tensor([1.3], device="cuda")
                elif mode == "row":
                    sa = torch.rand(m8, 1, device="cuda", generator=gen) + 0.5
                    sb = torch.rand(1, n8, device="cuda", generator=gen) + 0.5
                else:
                    kb, nb = -(-k8_ // 128), -(-n8_ // 128)
                    sa = torch.rand(m8_, kb, device="cuda", generator=gen) + 0.5
                    sb = (torch.rand(nb, kb, device="cuda", generator=gen) + 0.5).t()
                nvatom.gemm(a, b, nan(m8_, n8_), scale_a=sa, scale_b=sb, fast_accum=fast)
            tag = "e4m3" if bt is e4m3 else "e5m2"
            out.append((f"sm90_fp8_{mode}_{'fast' if fast else 'promoted'}_e4m3x{tag}", run8))

    # fused epilogues (nvatom.gemm's bias, activation, alpha/beta with C, residual)
    mf, nf, kf = 2000, 2008, 256

    def run_fused(dt: Any = torch.bfloat16, fp8: bool = False, **kw: Any) -> None:
        if fp8:
            a, b = rnd(mf, kf, dtype=e4m3), rnd(nf, kf, dtype=e4m3).t()
            kw.update(scale_a=torch.rand(mf, 1, device="cuda", generator=gen) + 0.5,
                      scale_b=torch.rand(1, nf, device="cuda", generator=gen) + 0.5)
        else:
            a, b = rnd(mf, kf, dtype=dt), rnd(kf, nf, dtype=dt)
        nvatom.gemm(a, b, nan(mf, nf, torch.bfloat16 if fp8 else dt), **kw)
    out.append(("fused_bf16_colbias_gelu", lambda: run_fused(
        bias=rnd(nf), activation="gelu")))
    out.append(("fused_f16_rowbias_silu_residual", lambda: run_fused(
        torch.float16, bias=rnd(mf, 1, dtype=torch.float16), activation="silu",
        residual=rnd(mf, nf, dtype=torch.float16))))
    out.append(("fused_bf16_alpha_beta_c_relu", lambda: run_fused(
        alpha=0.5, beta=2.0, c=rnd(mf, nf), activation="relu")))
    out.append(("fused_e4m3_row_scales_bias_gelu_tanh", lambda: run_fused(
        fp8=True, bias=rnd(nf), activation="gelu_tanh")))

    # grouped (MoE): ragged groups with empty ones, bf16 and FP8
    def groups() -> list[int]:
        sizes = [0, 700, 0, 1333, 5, 0, 2100, 900]
        ends, acc = [], 0
        for s in sizes:
            acc += s
            ends.append(acc)
        return ends

    def run_grouped(fp8: bool = False) -> None:
        ends = groups()
        g, kk, nn = len(ends), 256, 1000
        if fp8:
            a = rnd(ends[-1], kk, dtype=e4m3)
            b = rnd(g, nn, kk, dtype=e4m3).transpose(1, 2)
            sa = torch.rand(ends[-1], device="cuda", generator=gen) + 0.5
            sb = torch.rand(g, nn, device="cuda", generator=gen) + 0.5
            nvatom.grouped_gemm(a, b, ends, nan(ends[-1], nn), scale_a=sa, scale_b=sb)
        else:
            a = rnd(ends[-1], kk)
            b = rnd(g, kk, nn)
            nvatom.grouped_gemm(a, b, ends, nan(ends[-1], nn))
    out.append(("grouped_bf16_empty_groups", run_grouped))

    def run_grouped_device(masked: bool = False) -> None:  # the group table built on the GPU
        ends, kk, nn = groups(), 256, 1000
        if masked:
            counts = torch.tensor([0, 700, 1, 128, 0, 5, 1024, 900], dtype=torch.int32,
                                  device="cuda")
            a, b = rnd(len(ends), 1024, kk), rnd(len(ends), kk, nn)
            out_m = torch.full((len(ends), 1024, nn), float("nan"), device="cuda",
                               dtype=torch.bfloat16)
            nvatom.grouped_gemm_masked(a, b, counts, out_m)
            return
        offs = torch.tensor(ends, dtype=torch.int32, device="cuda")
        nvatom.grouped_gemm(rnd(ends[-1], kk), rnd(len(ends), kk, nn), offs,
                            nan(ends[-1], nn))
    out.append(("grouped_bf16_device_offsets", run_grouped_device))
    out.append(("grouped_bf16_masked_device_counts", lambda: run_grouped_device(True)))
    out.append(("grouped_e4m3_rowwise_empty_groups", lambda: run_grouped(True)))

    # attention forward: head dims, causal or not, GQA, ragged lengths; then softcap and
    # sliding windows (the _cap / _win configurations)
    plain = [(d, causal, (-1, -1), 0.0) for d in (64, 128, 256) for causal in (False, True)]
    for d, causal, window, cap in (*plain, (128, False, (100, 37), 0.0),
                                   (64, True, (300, -1), 30.0), (256, False, (-1, -1), 2.0)):
        def run_attn(d=d, causal=causal, window=window, cap=cap) -> None:
            q = rnd(2, 8, 777, d)
            kv = rnd(2, 2, 1029, d), rnd(2, 2, 1029, d)
            nvatom.attention(q, *kv, causal=causal, window=window, softcap=cap)
        tag = (f"{'_causal' if causal else ''}{'_window' if window != (-1, -1) else ''}"
               f"{'_softcap' if cap else ''}")
        out.append((f"attention_d{d}{tag}_gqa_ragged", run_attn))

    # attention backward kernel: both head dims, causal or not, GQA, ragged lengths
    # (Sk > Sq: causal CTAs with no Q block).  The forward's output is zero-filled before
    # the forward writes it: initcheck does not count bytes written by a TMA store as
    # initialised (scripts/initcheck_tma_probe.py: 100 errors on reading an output of the
    # "tma" epilogue, 0 with "direct"; docs/reliability.md), and the backward's preprocess
    # reads it with a torch kernel
    for d, causal, window in ((64, False, (-1, -1)), (64, True, (-1, -1)),
                              (128, False, (-1, -1)), (128, True, (-1, -1)),
                              (128, False, (100, 37)), (64, True, (64, -1))):
        def run_bwd(d=d, causal=causal, window=window) -> None:
            from nvatom.attention import attention_backward, check_inputs, prepare

            q = rnd(2, 4, 333, d)
            kv = rnd(2, 2, 520, d), rnd(2, 2, 520, d)
            o = torch.zeros_like(q)
            lse = torch.zeros((2, 4, 333), device="cuda")
            prepare(q, *kv, o, lse, check_inputs(q, *kv, causal=causal, window=window))()
            attention_backward(rnd(2, 4, 333, d), q, *kv, o, lse, causal=causal,
                               window=window, dlse=rnd(2, 4, 333, dtype=torch.float32),
                               backend="kernel")
        tag = f"{'_causal' if causal else ''}{'_window' if window != (-1, -1) else ''}"
        out.append((f"attention_bwd_d{d}{tag}_gqa_ragged", run_bwd))
    return out


# --------------------------------------------------------------------------- canaries

#: A planted bug per tool, in a kernel named like ours: each run of a tool ends with its
#: canary, which the tool must report (else the run proves nothing: a filter that matches
#: none of our kernels, a tool that did not attach).  synccheck has none: a planted barrier
#: error can hang the GPU when the tool is not attached.
CANARY_PTX = """.version 8.0
.target sm_80
.address_size 64
.visible .entry nvatom_canary_memcheck(.param .u64 p)
{
  .reg .b64 %rd<2>;
  .reg .b32 %r<2>;
  ld.param.u64 %rd1, [p];
  ld.global.u32 %r1, [%rd1];
  st.global.u32 [%rd1+4], %r1;
  ret;
}
.visible .entry nvatom_canary_racecheck(.param .u64 p)
{
  .shared .align 4 .b32 cell[1];
  .reg .b64 %rd<2>;
  .reg .b32 %r<3>;
  ld.param.u64 %rd1, [p];
  mov.u32 %r1, %tid.x;
  st.shared.u32 [cell], %r1;
  ld.shared.u32 %r2, [cell];
  st.global.u32 [%rd1], %r2;
  ret;
}
.visible .entry nvatom_canary_initcheck(.param .u64 p)
{
  .reg .b64 %rd<2>;
  .reg .b32 %r<2>;
  ld.param.u64 %rd1, [p];
  ld.global.u32 %r1, [%rd1];
  st.global.u32 [%rd1+4096], %r1;
  ret;
}
"""
CANARIES = ("memcheck", "racecheck", "initcheck")


def canary(tool: str) -> int:
    """Run ``tool``'s planted bug (only ever under compute-sanitizer)."""
    import torch

    from nvatom.arch import device_target
    from nvatom.runtime.load import load_kernel

    # assembled for this GPU (an sm_80 cubin has no image for sm_90: the canary would not run)
    gpu = device_target(torch.cuda.get_device_capability()).name
    k = load_kernel(CANARY_PTX, gpu, f"nvatom_canary_{tool}", params=[("p", "u64")])
    if tool == "memcheck":  # a read and a write at address 16: no allocation holds it
        k.launch(1, 1, [16])
    elif tool == "racecheck":  # 128 threads write one shared word with no barrier
        buf = torch.zeros(1, dtype=torch.int32, device="cuda")
        k.launch(1, 128, [buf.data_ptr()])
    else:  # a read of memory nothing wrote (a fresh cudaMalloc, not torch's cached blocks)
        from cuda.bindings import runtime as rt

        _, ptr = rt.cudaMalloc(8192)
        k.launch(1, 1, [int(ptr)])
    torch.cuda.synchronize()
    print(f"{MARK}<done>", flush=True)
    return 0


def t_name(dt: Any) -> str:
    return {"torch.bfloat16": "bf16", "torch.float16": "f16"}[str(dt)]


def worker(only: str | None) -> int:
    import torch

    t0 = time.time()
    for name, run in _configs():
        if only and not re.search(only, name):
            continue
        print(f"{MARK}{name}", flush=True)
        run()
        torch.cuda.synchronize()
        print(f"@@time {name} {time.time() - t0:.1f}", flush=True)
    print(f"{MARK}<done>", flush=True)
    return 0


# --------------------------------------------------------------------------- the report

_RECORD = re.compile(r"^========= (?!\s)(?!ERROR SUMMARY|RACECHECK SUMMARY|COMPUTE-SANITIZER"
                     r"|Target application returned|LEAK SUMMARY)(.+)$")
_API = re.compile(r"^Program hit .* on CUDA API call to (\w+)")


def parse(tool: str, text: str) -> dict[str, Any]:
    """Records of one tool's output, attributed to configurations and classified."""
    current = "<startup>"
    kernel: dict[str, list[str]] = {}
    api: dict[str, int] = {}
    done = False
    for line in text.splitlines():
        if line.startswith(MARK):
            current = line[len(MARK):].strip()
            done = done or current == "<done>"
            continue
        m = _RECORD.match(line)
        if not m:
            continue
        rec = m.group(1).strip()
        a = _API.match(rec)
        if a:
            api[a.group(1)] = api.get(a.group(1), 0) + 1
        else:
            kernel.setdefault(current, []).append(rec)
    summary = re.findall(r"(?:ERROR|RACECHECK) SUMMARY: (\d+)", text)
    return {"tool": tool, "completed": done, "kernel_errors": kernel,
            "kernel_error_count": sum(len(v) for v in kernel.values()),
            "api_errors": api, "api_error_count": sum(api.values()),
            "summary_counts": [int(s) for s in summary]}


def sanitizer() -> str:
    for c in (shutil.which("compute-sanitizer"), "/usr/local/cuda/bin/compute-sanitizer"):
        if c and os.path.exists(c):
            return c
    raise SystemExit("compute-sanitizer not found (a CUDA toolkit's bin/)")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", default=str(ROOT / "reports" / "sanitize.json"))
    p.add_argument("--tools", default=",".join(TOOLS), help="comma-separated subset")
    p.add_argument("--only", help="a regex over configuration names")
    p.add_argument("--list", action="store_true", help="list the configurations and exit")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--canary", choices=CANARIES, help=argparse.SUPPRESS)
    p.add_argument("--log-dir", help="keep each tool's full output here")
    p.add_argument("--tool-timeout", type=float, default=900.0,
                   help="seconds one tool may run over all configurations (default 900); "
                   "past it the tool is reported as not completed")
    p.add_argument("--jobs", type=int, default=1,
                   help="tools run at once, each its own process on the GPU (default 1)")
    args = p.parse_args(argv)
    if args.canary:
        return canary(args.canary)
    if args.worker:
        return worker(args.only)
    if args.list:
        for name, _ in _configs():
            print(name)
        return 0
    cs = sanitizer()
    env = dict(os.environ, PYTHONPATH=f"{ROOT / 'src'}:{os.environ.get('PYTHONPATH', '')}",
               PYTHONUNBUFFERED="1")
    def run_tool(tool: str) -> dict[str, Any]:
        cmd = [cs, "--tool", tool, "--print-limit", "200"]
        if tool != "initcheck":  # initcheck: every kernel (see the module's docstring)
            for f in KERNELS:
                cmd += ["--kernel-name", f]
        if tool == "memcheck":
            cmd += ["--leak-check", "no"]
        if tool == "racecheck":
            cmd += ["--racecheck-report", "all"]
        cmd += [sys.executable, str(Path(__file__).resolve())]
        t0 = time.time()
        timed_out = False
        try:
            proc = subprocess.run([*cmd, "--worker", *(["--only", args.only] if args.only
                                                        else [])],
                                  capture_output=True, text=True, env=env,
                                  timeout=args.tool_timeout)
            text, status = proc.stdout + proc.stderr, proc.returncode
        except subprocess.TimeoutExpired as e:  # what it printed so far still counts
            timed_out, status = True, None
            text = "".join(x.decode(errors="replace") if isinstance(x, bytes) else (x or "")
                           for x in (e.stdout, e.stderr))
        caught = None
        if tool in CANARIES:
            planted = subprocess.run([*cmd, "--canary", tool], capture_output=True, text=True,
                                     env=env)
            ctext = planted.stdout + planted.stderr
            caught = parse(tool, ctext)["kernel_error_count"] > 0
            if args.log_dir:
                (Path(args.log_dir) / f"canary_{tool}.log").parent.mkdir(parents=True,
                                                                        exist_ok=True)
                (Path(args.log_dir) / f"canary_{tool}.log").write_text(ctext)
        if args.log_dir:
            Path(args.log_dir).mkdir(parents=True, exist_ok=True)
            (Path(args.log_dir) / f"sanitize_{tool}.log").write_text(text)
        r = parse(tool, text)
        r.update(exit_status=status, timed_out=timed_out,
                 seconds=round(time.time() - t0, 1), canary_caught=caught)
        if not r["completed"]:
            r["tail"] = text[-3000:]
            print(text[-1500:], flush=True)
        print(f"{tool:10s} kernel errors {r['kernel_error_count']:4d}   api errors "
              f"{r['api_error_count']:4d}   completed {r['completed']}   canary caught "
              f"{r['canary_caught']}   {r['seconds']:.0f} s",
              flush=True)
        return r

    # tools in parallel (--jobs): each is its own process on the one GPU; the sanitizers'
    # host-side bookkeeping, not the GPU, is what takes the time
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        results = list(pool.map(run_tool, args.tools.split(",")))
    import torch

    configs = [name for name, _ in _configs() if not args.only or re.search(args.only, name)]
    report = {
        "date": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "device": torch.cuda.get_device_name(0),
        # NVATOM_COMMIT where the tree's .git is not the commit measured (the device's copy)
        "commit": os.environ.get("NVATOM_COMMIT") or subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True,
            text=True).stdout.strip(),
        "sanitizer": subprocess.run([cs, "--version"], capture_output=True,
                                    text=True).stdout.strip().splitlines()[-1:],
        "configs": configs,
        "tools": results,
        "kernel_errors": sum(r["kernel_error_count"] for r in results),
        "api_errors": sum(r["api_error_count"] for r in results),
        "all_completed": all(r["completed"] for r in results),
        "canaries_caught": all(r["canary_caught"] is not False for r in results),
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(report, indent=1) + "\n")
    print(f"{len(configs)} configurations x {len(results)} tools: {report['kernel_errors']} "
          f"kernel errors, {report['api_errors']} API errors -> {args.out}")
    ok = report["all_completed"] and report["canaries_caught"]
    return 1 if report["kernel_errors"] or not ok else 0


if __name__ == "__main__":
    sys.exit(main())
