"""What every benchmark report holds, in one place: the commit a run measured, the device's
driver, the date, CUDA-event timing, and writing the JSON report.  Used by the bench scripts
(bench/attention.py, gemm.py, gemm_epilogue.py, gemm_first_call.py, gemm_fp8_block.py,
gemm_grouped.py, ir_gemm.py) and scripts/attention_dev.py.

bench/ is not a package (no ``__init__``): a script puts the repository root on ``sys.path``
and imports ``from bench import _report``, so ``python bench/X.py`` keeps working from any
directory.  Imports nothing of nvatom or torch (torch is passed in where needed).
"""

from __future__ import annotations

import datetime
import json
import os
import random
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def _git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True,
                          check=True, timeout=10).stdout.strip()


def commit(dirty: bool = False) -> str:
    """The commit a run measured: ``NVATOM_COMMIT`` (its first 12 characters; the device's
    copy of the tree may have no .git, or a stale one), else ``git rev-parse --short HEAD``
    (with ``-dirty`` appended when ``dirty`` is asked and tracked files differ), else
    ``"unknown"``."""
    if os.environ.get("NVATOM_COMMIT"):
        return os.environ["NVATOM_COMMIT"][:12]
    try:
        rev = _git("rev-parse", "--short", "HEAD")
        if rev and dirty and _git("status", "--porcelain", "--untracked-files=no"):
            rev += "-dirty"
        return rev or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def nvidia_smi(query: str) -> str:
    """``nvidia-smi --query-gpu=<query>`` (e.g. ``driver_version,power.limit``) of the first
    GPU, ``"unknown"`` without nvidia-smi."""
    try:
        out = subprocess.run(["nvidia-smi", f"--query-gpu={query}", "--format=csv,noheader"],
                             capture_output=True, text=True, check=False, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    lines = out.stdout.strip().splitlines()
    return lines[0] if lines else "unknown"


def cuda_driver_version() -> str:
    """The CUDA version the driver supports (``cuDriverGetVersion``), ``"unknown"`` without
    cuda-python or a driver."""
    try:
        from cuda.bindings import driver as cu

        cu.cuInit(0)
        err, v = cu.cuDriverGetVersion()
        return f"{v // 1000}.{v % 1000 // 10}" if int(err) == 0 else "unknown"
    except Exception:
        return "unknown"


def utc_date(timespec: str = "auto") -> str:
    """Now, in UTC, ISO 8601 (``timespec`` as :meth:`datetime.datetime.isoformat`)."""
    return datetime.datetime.now(datetime.UTC).isoformat(timespec=timespec)


def torch_header(torch: Any) -> dict[str, str]:
    """The first keys of a report: device name, torch version, commit, date."""
    return {"device": torch.cuda.get_device_name(), "torch": torch.__version__,
            "commit": commit(), "date": utc_date()}


def cuda_seconds(torch: Any, fn: Callable[[], Any], iters: int) -> float:
    """Seconds per call of ``fn`` over ``iters`` calls between one pair of CUDA events on
    torch's current stream."""
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    for _ in range(iters):
        fn()
    e.record()
    e.synchronize()
    return s.elapsed_time(e) / iters / 1e3


def moe_cases() -> list[tuple[str, list[int], int, int]]:
    """The grouped benches' mixture-of-experts cases (seed 0): (label, tokens per expert, N,
    K): 8 experts x 2048 tokens 4096 -> 4096 (issue 18's anchor); 64 experts with 0-1024
    tokens, 7168 -> 2048 (DeepSeek-V3-like); 8 experts with 0-4096 tokens, 7168 -> 4096; 64
    experts with 0-4096 tokens, 7168 -> 2048."""
    rng = random.Random(0)
    return [("8x2048 tok, 4096->4096", [2048] * 8, 4096, 4096),
            ("64 experts 0-1024 tok, 7168->2048", [rng.randint(0, 1024) for _ in range(64)],
             2048, 7168),
            ("8 experts 0-4096 tok, 7168->4096", [rng.randint(0, 4096) for _ in range(8)],
             4096, 7168),
            ("64 experts 0-4096 tok, 7168->2048", [rng.randint(0, 4096) for _ in range(64)],
             2048, 7168)]


def grouped_error(torch: Any, got: Any, a: Any, b: Any, ends: list[int],
                  scale: Callable[[Any, int, int, int], Any] | None = None) -> dict[str, Any]:
    """A grouped GEMM's output ``got`` against float64: the relative Frobenius error over the
    groups' rows (group i is rows ``ends[i-1]..ends[i]`` of ``a``, times ``b[i]``; ``scale(ref,
    start, end, i)`` applies its scales), whether any of them is NaN, and whether the rows
    past the last group kept their NaN poison."""
    num = den = 0.0
    nan = False
    start = 0
    for i, end in enumerate(ends):
        if end > start:
            ref = a[start:end].double() @ b[i].double()
            if scale is not None:
                ref = scale(ref, start, end, i)
            g = got[start:end].double()
            nan = nan or bool(torch.isnan(g).any())
            num += float((g - ref).norm()) ** 2
            den += float(ref.norm()) ** 2
        start = end
    tail_ok = bool(torch.isnan(got[ends[-1]:]).all()) if got.shape[0] > ends[-1] else True
    return {"rel_err": (num / den) ** 0.5 if den else 0.0, "nan": nan, "tail_untouched": tail_ok}


def rotating_rounds(torch: Any, fns: dict[str, Callable[[], Any]], rounds: int,
                    batch: int) -> dict[str, list[float]]:
    """Seconds per call of each contender in each of ``rounds`` rounds (``batch`` calls
    between two CUDA events, :func:`cuda_seconds`); round r starts at contender ``r % n`` and
    odd rounds run backwards, so no contender always follows the same one (the card's clock
    drifts with power and heat)."""
    order = list(fns)
    times: dict[str, list[float]] = {name: [] for name in order}
    for rnd in range(rounds):
        rot = order[rnd % len(order):] + order[: rnd % len(order)]
        for name in (rot if rnd % 2 == 0 else rot[::-1]):
            times[name].append(cuda_seconds(torch, fns[name], batch))
    return times


def write_json(path: str | Path, report: Any, indent: int = 1) -> Path:
    """Write ``report`` as JSON (and a final newline) to ``path``, making its folder."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=indent) + "\n")
    return out


def fa4_attention() -> Any:
    """FlashAttention-4's CuTe DSL ``flash_attn_func`` (q, k, v (B, S, H, D); returns (out,
    lse)) when ``flash_attn.cute`` imports (../shared/anchors/README.md brings it to the GPU
    machine), else None with the reason printed."""
    try:
        from flash_attn.cute import flash_attn_func
    except Exception as e:  # any import failure means: not here
        print(f"fa4: unavailable ({type(e).__name__}: {str(e)[:120]})")
        return None
    return flash_attn_func
