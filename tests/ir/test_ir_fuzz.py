"""Fuzzing the parser, the verifier and the lowering with mutated .mlir inputs (hypothesis;
the mutations are scripts/fuzz_grammars.py's, shared with scripts/fuzz.py's ``ir`` target).

Every mutated input must end in success or in diagnostics (``IRError``): no Python exception
escapes, and no diagnostic is an internal error (``nvatom.ir.driver.INTERNAL``, the prefix the
driver gives an unexpected exception).  The run is bounded (``NVATOM_IR_FUZZ_EXAMPLES``,
default 300 inputs, a few seconds) and prints how many inputs it tried.
"""

from __future__ import annotations

import os
import time

import pytest
from hypothesis import HealthCheck, given, settings

from nvatom.ir import driver
from nvatom.ir.lower import lower
from tests.fuzz_support import grammars

SEEDS = grammars.ir_seeds()
EXAMPLES = int(os.environ.get("NVATOM_IR_FUZZ_EXAMPLES", "300"))
_count = {"n": 0, "ok": 0, "diag": 0}
#: tests/ir cases with 1-3 mutations (scripts/fuzz_grammars.py, shared with scripts/fuzz.py)
mutated = grammars.hypothesis_strategy(grammars.mutated_ir)


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
@given(mutated)
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
