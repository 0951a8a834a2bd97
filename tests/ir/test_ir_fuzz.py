"""Fuzzing the parser, the verifier and the lowering with mutated .mlir inputs (hypothesis).

Every mutated input must end in success or in diagnostics (``IRError``): no Python exception
escapes, and no diagnostic is an internal error (``nvatom.ir.driver.INTERNAL``, the prefix the
driver gives an unexpected exception).  The run is bounded (``NVATOM_IR_FUZZ_EXAMPLES``,
default 300 inputs, a few seconds) and prints how many inputs it tried.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nvatom.ir import checker, driver
from nvatom.ir.lower import lower

HERE = Path(__file__).parent
SEEDS = [c.text.lstrip("\n") for p in sorted(HERE.glob("*.mlir"))
         for c in checker.split_cases(p.read_text())]
EXAMPLES = int(os.environ.get("NVATOM_IR_FUZZ_EXAMPLES", "300"))
TOKENS = ["%", "%a", "%0", "<", ">", "(", ")", "{", "}", ":", ",", "@", "...", "=", "!",
          "#", '"', "0", "1", "-1", "7", "4294967296", "99999999999999999999999", "1@0",
          "Sw<3,4,3> o 0 o ", "!cute.layout<", "!cute.memref<f32, rmem", "rmem", "smem",
          "gmem", "tmem", "e4m3", "f16", "i32", "index", "cute_nvgpu.atom.mma", "func.return",
          "scf.for", "\n", " ", "\u00e9", "\x00", "// -----", "{num_multicast = 0}",
          "!cute_nvgpu.sm90.mma<", "!cute_nvgpu.SM120.mma_bs<", "K", "MN"]

_count = {"n": 0, "ok": 0, "diag": 0}


@st.composite
def mutated(draw: st.DrawFn) -> str:
    text = draw(st.sampled_from(SEEDS))
    for _ in range(draw(st.integers(1, 3))):
        n = len(text)
        i = draw(st.integers(0, max(n - 1, 0)))
        kind = draw(st.sampled_from(["delete", "insert", "replace", "duplicate", "swap"]))
        if kind == "delete":
            j = min(n, i + draw(st.integers(1, 12)))
            text = text[:i] + text[j:]
        elif kind == "insert":
            text = text[:i] + draw(st.sampled_from(TOKENS)) + text[i:]
        elif kind == "replace":
            j = min(n, i + draw(st.integers(1, 4)))
            text = text[:i] + draw(st.sampled_from(TOKENS)) + text[j:]
        elif kind == "duplicate":
            lines = text.split("\n")
            k = draw(st.integers(0, len(lines) - 1))
            lines.insert(k, lines[k])
            text = "\n".join(lines)
        else:
            lines = text.split("\n")
            a, b = draw(st.integers(0, len(lines) - 1)), draw(st.integers(0, len(lines) - 1))
            lines[a], lines[b] = lines[b], lines[a]
            text = "\n".join(lines)
    return text


def _run(text: str) -> list[driver.Diagnostic]:
    try:
        mod = driver.parse(text, "fuzz.mlir")
        ctx = driver.verify(mod)
        lower(mod, ctx)
    except driver.IRError as e:
        return e.diagnostics
    return []


@settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
          suppress_health_check=list(HealthCheck))
@given(mutated())
def _fuzz(text: str) -> None:
    _count["n"] += 1
    diags = _run(text)  # any exception other than IRError fails the test here
    _count["diag" if diags else "ok"] += 1
    for d in diags:
        assert driver.INTERNAL not in d.message, f"{d}\n--- input ---\n{text}"
        assert d.line >= 1 and d.col >= 1
        assert str(d).startswith(f"fuzz.mlir:{d.line}:{d.col}: error: ")


def test_mutated_inputs_give_diagnostics_never_exceptions(
        capsys: pytest.CaptureFixture[str]) -> None:
    t0 = time.perf_counter()
    _count.update(n=0, ok=0, diag=0)
    _fuzz()
    dt = time.perf_counter() - t0
    with capsys.disabled():
        print(f"\n[ir fuzz] {_count['n']} mutated inputs tried in {dt:.1f} s: "
              f"{_count['diag']} rejected with diagnostics, {_count['ok']} accepted, "
              "0 exceptions")
    assert _count["n"] >= min(EXAMPLES, 50)


def test_seed_inputs_are_many() -> None:
    assert len(SEEDS) >= 40
