"""``make demo`` / ``nvatom demo``: the main job, end to end.

1. the SM target tiers (one line per tier);
2. the mma.sync demo kernel (one m16n8k16 atom) assembled for each requested target;
3. the SM90 GEMM built only from nvatom atoms (TMA, mbarrier, WGMMA, stmatrix; see
   :mod:`nvatom.kernels.sm90`): Python build+emit time, then ptxas for ``sm_90a`` and
   its resource use (registers, shared memory, spills);
4. where a GPU is present: ``nvatom.gemm`` at 4096^3 bf16, checked against torch
   (``torch.matmul``) and timed next to cuBLAS (interleaved rounds, 20 launches per
   measurement, median); without one the demo says so and still succeeds;
5. on an sm_90 GPU: ``nvatom.attention`` (bf16, d = 128, 4k tokens, causal and not) checked
   against a float32 reference and timed next to torch's SDPA (:func:`gpu_attention_check`).

PTX and cubins go to ``--out`` (default ``build/demo``).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import nvatom
from nvatom.arch import TARGETS
from nvatom.gemm import check_operands, plan
from nvatom.kernels.mma_demo import build_demo_module
from nvatom.kernels.sm90.gemm import build_gemm_sm90
from nvatom.kernels.sm90.launch import default_config
from nvatom.runtime.ptxas import assemble

__all__ = ["gpu_attention_check", "gpu_gemm_check", "gpu_skip_reason", "run_demo"]

GEMM_N = 4096


def _tiers() -> None:
    by: dict[str, list[str]] = {}
    for t in TARGETS.values():
        by.setdefault(t.tier.label, []).append(t.name)
    for label, names in by.items():
        print(f"  {label:<12} {' '.join(names)}")


def _mma_demo(targets: Sequence[str], out: Path) -> None:
    for tname in targets:
        mod = build_demo_module(tname, "f16")
        text = mod.emit()
        (out / f"mma_demo_{tname}.ptx").write_text(text)
        res = assemble(text, tname)
        (out / f"mma_demo_{tname}.cubin").write_bytes(res.cubin)
        print(f"  {tname:<7} {res.kernel('mma_demo').summary()}")


def _sm90_gemm(out: Path) -> dict[str, Any]:
    """Build, emit and assemble the default SM90 GEMM; print and return what was measured."""

    cfg = default_config("bf16")
    t0 = time.perf_counter()
    text = build_gemm_sm90(cfg, "sm_90a").emit()
    build_ms = 1e3 * (time.perf_counter() - t0)
    ptx = out / f"{cfg.name}.ptx"
    ptx.write_text(text)
    t0 = time.perf_counter()
    res = assemble(text, "sm_90a")
    ptxas_ms = 1e3 * (time.perf_counter() - t0)
    (out / f"{cfg.name}.cubin").write_bytes(res.cubin)
    kr = res.kernel(cfg.name)
    f = cfg.form
    print(f"  kernel   {cfg.name}: {cfg.block_m}x{cfg.block_n}x{cfg.block_k} tiles, "
          f"{cfg.stages} stages, {cfg.threads} threads (1 producer + {cfg.consumers} consumer "
          "warpgroups), persistent")
    print(f"  atoms    {f.name} (WGMMA), TMA tiled load/store, mbarrier pipeline, "
          "stmatrix.x4 epilogue, setmaxnreg")
    print(f"  build    {build_ms:.0f} ms Python build+emit, {text.count(chr(10))} PTX lines "
          f"-> {ptx}")
    how = "from the ptxas cache" if res.cached else f"{ptxas_ms:.0f} ms"
    print(f"  ptxas    sm_90a ({res.ptxas_version}, {how}): "
          f"{kr.registers} registers at entry (setmaxnreg: producer {cfg.producer_regs}, "
          f"consumers {cfg.consumer_regs}), {kr.shared_bytes + cfg.smem_bytes} B shared "
          f"({cfg.smem_bytes} dynamic), {kr.spill_stores} spill stores, "
          f"{kr.spill_loads} spill loads")
    return {"build_ms": build_ms, "registers": kr.registers, "spills": kr.spills,
            "smem": kr.shared_bytes + cfg.smem_bytes}


def gpu_skip_reason() -> str | None:
    """None when torch sees a CUDA GPU, else why the GPU part is skipped."""
    try:
        import torch
    except ImportError:
        return "torch is not installed"
    try:
        if not torch.cuda.is_available() or torch.cuda.device_count() == 0:
            return "torch sees no CUDA device"
    except Exception as e:  # a broken driver install
        return f"CUDA unavailable ({type(e).__name__}: {e})"
    return None


def _time_batch(fn: Any, batch: int) -> float:
    import torch

    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    for _ in range(batch):
        fn()
    e.record()
    e.synchronize()
    return s.elapsed_time(e) / batch


def gpu_gemm_check(n: int = GEMM_N, *, rounds: int = 5, batch: int = 20) -> dict[str, Any]:
    """``nvatom.gemm`` on n^3 bf16: max relative error against ``torch.matmul`` (output
    poisoned first) and TFLOP/s of both (median of interleaved rounds of ``batch``
    launches between one pair of CUDA events)."""
    import torch

    g = torch.Generator(device="cuda").manual_seed(7)
    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16, generator=g)
    b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16, generator=g)
    d = torch.full((n, n), float("nan"), device="cuda", dtype=torch.bfloat16)
    ref = torch.empty_like(d)
    nvatom.gemm(a, b, d)
    torch.matmul(a, b, out=ref)
    torch.cuda.synchronize()
    want = torch.matmul(a.double(), b.double()) if n <= 4096 else ref.double()
    err = ((d.double() - want).abs().max() / want.abs().max()).item()
    err_cublas = ((ref.double() - want).abs().max() / want.abs().max()).item()
    cap = tuple(torch.cuda.get_device_capability())
    provider = plan(check_operands(a, b, d)[3], cap)[0].provider  # type: ignore[arg-type]
    fns = {"nvatom": lambda: nvatom.gemm(a, b, d), "cublas": lambda: torch.matmul(a, b, out=ref)}
    times: dict[str, list[float]] = {k: [] for k in fns}
    for fn in fns.values():  # warm-up
        _time_batch(fn, batch)
    for r in range(rounds):
        for k in (list(fns) if r % 2 == 0 else list(fns)[::-1]):
            times[k].append(_time_batch(fns[k], batch))
    flop = 2.0 * n * n * n
    tf = {k: flop / statistics.median(v) / 1e9 for k, v in times.items()}
    return {"n": n, "provider": provider, "device": torch.cuda.get_device_name(),
            "max_rel_err": err, "cublas_max_rel_err": err_cublas, "tflops": tf["nvatom"],
            "cublas_tflops": tf["cublas"], "ratio": tf["nvatom"] / tf["cublas"]}


def run_demo(targets: Sequence[str] = ("sm_80", "sm_90a"), out: str | Path = "build/demo",
             *, show_ptx: bool = False) -> int:
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    print("== SM target tiers (nvatom targets --features for the feature matrix) ==")
    _tiers()
    print("== mma.sync m16n8k16 demo kernel (f16 in, f32 accumulate) through ptxas ==")
    _mma_demo(targets, out)
    if show_ptx:
        print(build_demo_module(targets[0], "f16").emit())
    print("== SM90 GEMM built from nvatom atoms, assembled for sm_90a ==")
    _sm90_gemm(out)
    print(f"== GPU: nvatom.gemm {GEMM_N}^3 bf16 against torch ==")
    reason = gpu_skip_reason()
    if reason is not None:
        print(f"  no GPU present ({reason}): the kernel was built and assembled only")
        return 0
    r = gpu_gemm_check()
    ok = r["max_rel_err"] <= 4 * max(r["cublas_max_rel_err"], 2.0**-8)
    print(f"  {r['device']}, provider {r['provider']}: max relative error {r['max_rel_err']:.1e} "
          f"vs float64 (cuBLAS {r['cublas_max_rel_err']:.1e}) {'OK' if ok else 'MISMATCH'}")
    print(f"  nvatom.gemm {r['tflops']:.0f} TFLOP/s, cuBLAS {r['cublas_tflops']:.0f} TFLOP/s "
          f"({r['ratio']:.2f}x; median of interleaved rounds, 20 launches each)")
    if not ok:
        return 1
    import torch

    if tuple(torch.cuda.get_device_capability()) != (9, 0):
        return 0
    print("== GPU: nvatom.attention (bf16, d 128, 4096 tokens) against torch SDPA ==")
    ok_all = True
    for causal in (False, True):
        a = gpu_attention_check(causal=causal)
        ok = a["max_abs_err"] <= max(1.5 * a["sdpa_max_abs_err"], 4e-3)
        ok_all &= ok
        print(f"  causal={causal}: max |error| {a['max_abs_err']:.1e} vs float32 (SDPA "
              f"{a['sdpa_max_abs_err']:.1e}) {'OK' if ok else 'MISMATCH'}; "
              f"{a['tflops']:.0f} TFLOP/s, SDPA {a['sdpa_tflops']:.0f} ({a['ratio']:.2f}x)")
    return 0 if ok_all else 1


def gpu_attention_check(b: int = 4, h: int = 16, s: int = 4096, d: int = 128, *,
                        causal: bool = False, rounds: int = 5, batch: int = 10
                        ) -> dict[str, Any]:
    """``nvatom.attention`` on (b, h, s, d) bf16: max |error| of it and of torch's SDPA
    against a float32 reference on the first head, and TFLOP/s of both (4 b h s^2 d / t,
    halved when causal; median of interleaved rounds)."""
    import torch
    import torch.nn.functional as F

    g = torch.Generator(device="cuda").manual_seed(11)
    q, k, v = (torch.randn(b, h, s, d, device="cuda", dtype=torch.bfloat16, generator=g)
               for _ in range(3))
    out, _ = nvatom.attention(q, k, v, causal=causal)
    ref = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    sc = (q[:1, :1].float() @ k[:1, :1].float().transpose(-1, -2)) / d ** 0.5
    if causal:
        sc = sc.masked_fill(~torch.ones(s, s, dtype=torch.bool, device="cuda").tril(),
                            float("-inf"))
    want = torch.softmax(sc, -1) @ v[:1, :1].float()
    err = (out[:1, :1].float() - want).abs().max().item()
    err_sdpa = (ref[:1, :1].float() - want).abs().max().item()
    fns = {"nvatom": lambda: nvatom.attention(q, k, v, causal=causal),
           "sdpa": lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal)}
    times: dict[str, list[float]] = {n: [] for n in fns}
    for fn in fns.values():
        _time_batch(fn, 2)
    for r in range(rounds):
        for n in (list(fns) if r % 2 == 0 else list(fns)[::-1]):
            times[n].append(_time_batch(fns[n], batch))
    flop = 4.0 * b * h * s * s * d / (2 if causal else 1)
    tf = {n: flop / statistics.median(t) / 1e9 for n, t in times.items()}
    return {"max_abs_err": err, "sdpa_max_abs_err": err_sdpa, "tflops": tf["nvatom"],
            "sdpa_tflops": tf["sdpa"], "ratio": tf["nvatom"] / tf["sdpa"]}
