"""The kernel layer and its kernels (``nvatom.kernels``, the SM90 package included): small
modules with one job each and short functions, and the old module paths
(``nvatom.kernels.gemm_sm90``, ``nvatom.kernels.attention_sm90``, kept for external importers)
naming its objects."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

import nvatom.kernels.sm90 as pkg

PACKAGE = Path(pkg.__file__).parent
#: every module of nvatom.kernels (the layer, the SM90 package, the other kernels)
MODULES = sorted(p for p in PACKAGE.parent.rglob("*.py") if p.name != "__init__.py")
#: The most lines a module and a function of the package may have (issue 25: a kernel is a
#: short composition of pieces, each readable at once).
MAX_MODULE_LINES = 800
MAX_FUNCTION_LINES = 100


@pytest.mark.parametrize("path", MODULES, ids=lambda p: p.relative_to(PACKAGE.parent).as_posix())
def test_modules_and_functions_are_small(path: Path) -> None:
    text = path.read_text()
    assert text.count("\n") <= MAX_MODULE_LINES
    assert text.startswith('"""')  # a docstring saying what the module models
    long = [f"{n.name}: {n.end_lineno - n.lineno + 1} lines"
            for n in ast.walk(ast.parse(text)) if isinstance(n, ast.FunctionDef)
            and n.end_lineno - n.lineno + 1 > MAX_FUNCTION_LINES]
    assert long == []


@pytest.mark.parametrize(("shim", "package"), [
    ("nvatom.kernels.gemm_sm90", ("config", "gemm", "launch", "plan", "tuning")),
    ("nvatom.kernels.attention_sm90", ("attention", "attention_config", "attention_launch",
                                       "attention_plan")),
])
def test_the_old_paths_name_the_package_objects(shim: str, package: tuple[str, ...]) -> None:
    mod = importlib.import_module(shim)
    homes = [importlib.import_module(f"nvatom.kernels.sm90.{m}") for m in package]
    for name in mod.__all__:
        if name == "MAX_GLOBAL_STRIDE":  # the TMA descriptor's limit, re-exported as before
            continue
        assert any(getattr(h, name, None) is getattr(mod, name) for h in homes), name
