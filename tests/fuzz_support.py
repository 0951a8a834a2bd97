"""Loads the fuzzing tool (scripts/fuzz.py) and its grammars (scripts/fuzz_grammars.py) for the
CPU tests: one copy of each module, registered under its own name so that fuzz.py's
``import fuzz_grammars`` finds the same one.  CPU tests only: tests/gpu must not import this
(the grammars read tests/ir and tests/data, the tests use hypothesis)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

SCRIPTS = Path(__file__).resolve().parent.parent / "scripts"


def load(name: str) -> ModuleType:
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, SCRIPTS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


grammars = load("fuzz_grammars")
fuzz = load("fuzz")
