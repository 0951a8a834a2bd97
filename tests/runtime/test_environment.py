"""``nvatom check``'s report (:mod:`nvatom.runtime.environment`): what is there and what each
missing piece costs.  The probes are replaced by stand-ins, so every combination is checked
without changing the machine; one test reads this machine as it is (ptxas is installed here)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from nvatom.arch import TARGETS
from nvatom.runtime import ptxas
from nvatom.runtime.environment import PIECES, inspect_environment

PY_PIECES = {s.module for s in PIECES if s.module}


def _tool(*names: str) -> ptxas.PtxasTool:
    return ptxas.PtxasTool(Path("/opt/cuda/bin/ptxas"), "PATH", (13, 0), "13.0.88",
                           frozenset(names))


def _env(tools=(), gpus=(), modules=PY_PIECES, versions=None):
    versions = versions or {}
    return inspect_environment(tools=list(tools), gpus=list(gpus),
                               module_present=lambda m: m in modules,
                               version=lambda d: versions.get(d, "1.0") if d else "")


EVERYTHING = dict(tools=[_tool(*TARGETS)], gpus=["NVIDIA H100 80GB HBM3, 570.1, 9.0"])


def test_everything_present() -> None:
    env = _env(**EVERYTHING, versions={"xdsl": "0.74.0"})
    assert env.ok and env.can_assemble and env.can_run and env.can_run_gemm and env.has_ir
    text = env.text()
    assert "missing" not in text
    assert f"targets assemblable: {len(TARGETS)}/{len(TARGETS)}\n" in text
    assert "GPU: NVIDIA H100 80GB HBM3, 570.1, 9.0" in text
    for line in ("assemble   yes", "run        yes", "gemm       yes", "IR         yes"):
        assert f"  {line}\n" in text


def test_no_ptxas_means_no_assembly() -> None:
    env = _env(tools=[], gpus=EVERYTHING["gpus"])
    assert not env.can_assemble and not env.can_run and env.ok
    text = env.text()
    assert "ptxas: none found" in text
    assert "  ptxas          no assembly: PTX is emitted but not checked by ptxas" in text
    assert "assemble   no (missing: ptxas)" in text
    assert f"targets assemblable: 0/{len(TARGETS)}" in text


def test_no_torch_or_driver_means_no_running() -> None:
    env = _env(**EVERYTHING, modules=PY_PIECES - {"torch"})
    assert env.can_run and not env.can_run_gemm
    assert "  torch          no running of nvatom.gemm or the torch operators" in env.text()
    assert "gemm       no (missing: torch)" in env.text()
    env = _env(tools=EVERYTHING["tools"], gpus=[], modules=PY_PIECES - {"cuda.bindings"})
    assert not env.can_run
    text = env.text()
    assert "  cuda.bindings  no running: kernels cannot be loaded or launched" in text
    assert "  GPU            no running: kernels can be built and assembled" in text
    assert "run        no (missing: GPU, cuda.bindings)" in text


def test_no_cuda_core_falls_back_to_the_driver_backend() -> None:
    env = _env(**EVERYTHING, modules=PY_PIECES - {"cuda.core"})
    assert env.can_run
    assert "launches go through the driver API backend" in env.text()


def test_no_xdsl_means_no_ir_and_a_wrong_pin_is_named() -> None:
    env = _env(**EVERYTHING, modules=PY_PIECES - {"xdsl"})
    assert not env.has_ir
    assert "  xdsl           no IR: nvatom verify and nvatom compile are unavailable" in env.text()
    env = _env(**EVERYTHING, versions={"xdsl": "0.80.0"})
    assert env.piece("xdsl").detail == "0.80.0 (tested: 0.74.0)"


def test_missing_numpy_is_not_ok() -> None:
    env = _env(**EVERYTHING, modules=PY_PIECES - {"numpy"})
    assert not env.ok
    assert "nothing works: numpy is a required dependency [required]" in env.text()


def test_this_machine() -> None:
    """ptxas 13.0 and numpy are installed here; the report names them and imports no torch."""
    code = ("import sys, nvatom\n"
            "from nvatom.runtime.environment import inspect_environment\n"
            "e = inspect_environment()\n"
            "assert e.ok and e.can_assemble, e.text()\n"
            "assert 'torch' not in sys.modules\n"
            "print(e.text())")
    src = Path(__file__).resolve().parents[2] / "src"
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=False, env=dict(os.environ, PYTHONPATH=str(src)), timeout=120)
    if res.returncode != 0 and "ptxas: none found" in res.stderr:
        pytest.skip("no ptxas on this machine")
    assert res.returncode == 0, res.stderr
    assert "ptxas 13.0" in res.stdout and "  numpy   " in res.stdout
