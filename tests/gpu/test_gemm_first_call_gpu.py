"""``nvatom.gemm`` launched from a recipe (:mod:`nvatom.runtime.gemm_recipe`) in a fresh
process, and the call cache without ``out``, against float64 on an sm_90 GPU.

A first process plans one problem class (writing its recipe to a private cache folder); a
second process then runs other shapes of the class, ragged ones included, with NaN-poisoned
outputs and fresh random inputs, and must do so without importing any kernel module (the
recipe path).  The no-``out`` call cache is checked on repeated calls (a fresh output each
time, every one correct)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.gpu

torch = pytest.importorskip("torch")

SRC = Path(__file__).resolve().parents[2] / "src"

CHILD = r'''
import json, sys, torch
dtype = sys.argv[1]
shapes = json.loads(sys.argv[2])
import nvatom
errs = []
for m, n, k in shapes:
    if dtype == "e4m3":
        a = (torch.randn(m, k, device="cuda") * 0.5).to(torch.float8_e4m3fn)
        b = (torch.randn(n, k, device="cuda") * 0.5).to(torch.float8_e4m3fn).t()
        sa, sb = torch.rand(1, device="cuda") + 0.5, torch.rand(1, device="cuda") + 0.5
        kw = {"scale_a": sa, "scale_b": sb}
        ref = (a.double() @ b.double()) * sa.double() * sb.double()
        odt = torch.bfloat16
    else:
        odt = {"bf16": torch.bfloat16, "f16": torch.float16}[dtype]
        a = torch.randn(m, k, device="cuda").to(odt)
        b = torch.randn(k, n, device="cuda").to(odt)
        kw = {}
        ref = a.double() @ b.double()
    out = torch.full((m, n), float("nan"), device="cuda", dtype=odt)
    nvatom.gemm(a, b, out, **kw)
    got = [out]
    for _ in range(3):  # no out: the call cache allocates a fresh output each time
        got.append(nvatom.gemm(a, b, **kw))
    torch.cuda.synchronize()
    for o in got:
        bad = bool(torch.isnan(o).any())
        errs.append((((o.double() - ref).norm() / ref.norm()).item(), bad))
    assert got[1].data_ptr() != got[2].data_ptr()
heavy = sorted(m for m in sys.modules if m.startswith(("nvatom.kernels", "nvatom.gemm_providers")))
print("RESULT " + json.dumps({"errs": errs, "heavy": heavy}))
'''


def _require_sm90() -> None:
    if not torch.cuda.is_available() or torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("the recipe path is the SM90 provider's (an sm_90 GPU)")


def _run(cache: Path, dtype: str, shapes: list[tuple[int, int, int]]) -> dict:
    env = dict(os.environ, PYTHONPATH=str(SRC), NVATOM_CACHE_DIR=str(cache))
    proc = subprocess.run([sys.executable, "-c", CHILD, dtype, json.dumps(shapes)], env=env,
                          capture_output=True, text=True, timeout=600, check=False)
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    raise AssertionError(f"child failed:\n{proc.stdout}\n{proc.stderr}")


@pytest.mark.parametrize("dtype", ["bf16", "f16", "e4m3"])
def test_recipe_launch_in_a_fresh_process(tmp_path: Path, dtype: str) -> None:
    _require_sm90()
    first = _run(tmp_path, dtype, [(256, 256, 256)])
    assert first["heavy"], "the first process plans (and records the recipe)"
    tol = 2e-2 if dtype == "e4m3" else 5e-3
    shapes = [(1000, 520, 144), (129, 8 if dtype != "e4m3" else 16, 4096), (4096, 4096, 512),
              (3, 2056, 272)]
    second = _run(tmp_path, dtype, shapes)
    assert second["heavy"] == [], f"the recipe path imported {second['heavy']}"
    assert len(second["errs"]) == 4 * len(shapes)
    for err, nan in second["errs"]:
        assert not nan and err < tol, (err, nan)
