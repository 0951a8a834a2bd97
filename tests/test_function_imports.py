"""Imports live at the top of a module; a function imports only what it must import late.

Checked on the source with ``ast`` (no module is imported):

(a) no function imports a module its file already imports at module level (a second, slower
    spelling of the same name);
(b) a function imports a standard-library or nvatom module only where :data:`ALLOWED` says
    why, and each reason is one of: the imported module needs an optional dependency that
    the importing file does not (checked here, from the module-level imports of nvatom's
    modules), the lazy top package (``import nvatom`` loads no room,
    tests/test_import_light.py), the first GEMM call launched from a recipe, which
    imports no kernel module (docs/runtime.md, "The hot path"), or the CLI's startup (a
    sub-command imports the GEMM, kernel, demo and launcher rooms only when it runs,
    tests/test_cli_parser.py).

Third-party imports inside functions are not listed: they are the optional dependencies
(torch, cuda.*, xDSL, llvmlite, ml_dtypes) or numpy, which ``import nvatom.layout`` must not
load.  A cycle between nvatom modules would be a fourth reason; none is needed today.
"""

from __future__ import annotations

import ast
import functools
import sys
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
PKG = SRC / "nvatom"
#: Required packages: numpy is a dependency of the wheel (``import nvatom.layout`` still
#: must not load it, which is why layout imports it late).
REQUIRED = {"numpy"}

OPTIONAL = "optional"  # the target needs an optional dependency the importer does not
LIGHT = "lazy top package: `import nvatom` loads no room (tests/test_import_light.py)"
RECIPE = ("a first call launched from a recipe imports no kernel module (docs/runtime.md, "
          "'The hot path'; gemm._from_recipe checks sys.modules for nvatom.gemm_providers)")
SPLIT = "being split, see branch h6split"
CLI = ("CLI startup: `import nvatom.cli` loads no GEMM, kernel, demo or launcher module; "
       "the command that needs one imports it (tests/test_cli_parser.py)")

#: (file under src/nvatom, imported module) -> why a function imports it.
ALLOWED: dict[tuple[str, str], str] = {
    ("__init__.py", "nvatom.attention"): LIGHT,
    ("__init__.py", "nvatom.gemm"): LIGHT,
    ("cli/gemm.py", "nvatom.gemm"): CLI,
    ("cli/gemm.py", "nvatom.runtime.launch"): CLI,
    ("cli/sm100.py", "nvatom.kernels.gemm_sm100"): CLI,
    ("cli/tools.py", "nvatom.demo"): CLI,
    ("cli/ir.py", "nvatom.ir.checker"): OPTIONAL,
    ("cli/ir.py", "nvatom.ir.driver"): OPTIONAL,
    ("cli/ir.py", "nvatom.ir.lower"): OPTIONAL,
    ("gemm.py", "nvatom.gemm_providers"): RECIPE,
    ("gemm.py", "nvatom.kernels.sm90.gemm"): RECIPE,
    ("gemm.py", "nvatom.kernels.sm90.launch"): RECIPE,
    ("gemm.py", "nvatom.kernels.sm90.fusion"): RECIPE,
    ("gemm.py", "nvatom.kernels.sm90.group_table"): RECIPE,
    ("gemm.py", "nvatom.ptx.tma_emit"): RECIPE,
    ("ir/tcgen05.py", "nvatom.ir.types"): OPTIONAL,
    ("ir/tcgen05.py", "nvatom.ir.xdsl_adapter"): OPTIONAL,
}
#: Whole files not checked yet, with the reason.
SKIPPED_FILES: dict[str, str] = {
}


def _module_name(path: Path) -> str:
    parts = path.relative_to(SRC).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_module(name: str) -> bool:
    rel = Path(*name.split("."))
    return (SRC / rel).with_suffix(".py").exists() or (SRC / rel / "__init__.py").exists()


def _targets(node: ast.Import | ast.ImportFrom, path: Path) -> list[str]:
    """The modules an import statement loads: ``from nvatom.ir import types`` loads
    ``nvatom.ir.types``; relative imports resolved against ``path``."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    base = node.module or ""
    if node.level:
        pkg = _module_name(path).split(".")
        if path.name != "__init__.py":
            pkg = pkg[:-1]
        pkg = pkg[: len(pkg) - (node.level - 1)]
        base = ".".join([*pkg, *([base] if base else [])])
    subs = [f"{base}.{a.name}" for a in node.names if _is_module(f"{base}.{a.name}")]
    return subs or [base]


def _is_type_checking(node: ast.stmt) -> bool:
    return isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)


def _module_level(tree: ast.Module, path: Path, *, required_only: bool = False) -> set[str]:
    """The modules imported at module level (not under ``if TYPE_CHECKING``; with
    ``required_only``, not inside ``try`` either: an import a module survives without)."""
    found: set[str] = set()

    def visit(body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                found.update(_targets(node, path))
            elif isinstance(node, ast.If) and not _is_type_checking(node):
                visit(node.body)
                visit(node.orelse)
            elif isinstance(node, ast.Try) and not required_only:
                visit(node.body)

    visit(tree.body)
    return found


def _function_level(tree: ast.Module) -> list[ast.Import | ast.ImportFrom]:
    out: dict[int, ast.Import | ast.ImportFrom] = {}
    for fn in ast.walk(tree):
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for node in ast.walk(fn):
                if isinstance(node, (ast.Import, ast.ImportFrom)):
                    out[id(node)] = node
    return sorted(out.values(), key=lambda n: n.lineno)


@functools.cache
def _sources() -> dict[str, tuple[Path, ast.Module]]:
    return {_module_name(p): (p, ast.parse(p.read_text(), str(p)))
            for p in sorted(PKG.rglob("*.py"))}


@functools.cache
def _optional_needs(module: str) -> frozenset[str]:
    """The optional packages ``module`` cannot be imported without (its module-level imports
    and theirs, transitively; a package's ``__init__`` counts for its submodules)."""
    sources = _sources()
    needs: set[str] = set()
    seen: set[str] = set()
    todo = [module]
    while todo:
        m = todo.pop()
        if m in seen or m not in sources:
            continue
        seen.add(m)
        path, tree = sources[m]
        for target in _module_level(tree, path, required_only=True):
            top = target.split(".")[0]
            if top == "nvatom":
                parts = target.split(".")
                todo += [".".join(parts[:i]) for i in range(2, len(parts) + 1)]
            elif top not in sys.stdlib_module_names and top not in REQUIRED:
                needs.add(top)
    return frozenset(needs)


def _check() -> tuple[list[str], set[tuple[str, str]]]:
    problems, used = [], set()
    for module, (path, tree) in _sources().items():
        rel = path.relative_to(PKG).as_posix()
        if rel in SKIPPED_FILES:
            continue
        top_level = _module_level(tree, path)
        for node in _function_level(tree):
            for target in _targets(node, path):
                where = f"src/nvatom/{rel}:{node.lineno} imports {target}"
                if target in top_level or (isinstance(node, ast.ImportFrom)
                                           and node.module in top_level):
                    problems.append(f"{where}, which the file imports at module level")
                    continue
                top = target.split(".")[0]
                if top != "nvatom" and top not in sys.stdlib_module_names:
                    continue  # an optional dependency (or numpy, late for nvatom.layout)
                why = ALLOWED.get((rel, target))
                if why is None:
                    problems.append(f"{where} inside a function; import it at module level "
                                    "(or add (file, module) with a reason to ALLOWED)")
                    continue
                used.add((rel, target))
                if why == CLI and not rel.startswith("cli/"):
                    problems.append(f"{where} late for the CLI's startup, outside cli/")
                if why == OPTIONAL:
                    extra = _optional_needs(target) - _optional_needs(module)
                    if not extra:
                        problems.append(f"{where} late as an optional dependency, but it "
                                        f"needs none that {module} does not")
    return problems, used


def test_function_level_imports_are_needed() -> None:
    problems, _ = _check()
    assert not problems, "\n".join(problems)


def test_every_allowed_late_import_exists() -> None:
    """An entry of ALLOWED that no function uses any more is removed, so the list stays the
    list of late imports."""
    _, used = _check()
    assert set(ALLOWED) - used == set()
    assert all((PKG / rel).exists() for rel in SKIPPED_FILES)


def test_optional_needs_are_read_from_the_sources() -> None:
    """The check of OPTIONAL entries rests on this: the xDSL-built IR modules need xDSL, the
    light ones (the tcgen05 model, the layout algebra) need nothing optional."""
    assert "xdsl" in _optional_needs("nvatom.ir.types")
    assert "xdsl" in _optional_needs("nvatom.ir.lower")
    assert _optional_needs("nvatom.ir.tcgen05") == frozenset()
    assert _optional_needs("nvatom.layout") == frozenset()
    assert _optional_needs("nvatom.cli") == frozenset()
