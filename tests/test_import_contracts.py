"""Import cycles among nvatom's modules and rooms, found from the source with ``ast``.

Every ``import`` / ``from ... import`` statement of ``src/nvatom`` counts: at module level,
inside functions (the usual way to dodge a cycle at import time), and under
``if TYPE_CHECKING:``.  ``from pkg import name`` is an import of ``pkg.name`` when that is a
module, else of ``pkg``; relative imports are resolved.  Two graphs are checked: modules, and
rooms (the top-level modules and packages of ``nvatom``, the rows of docs/ARCHITECTURE.md's
room table; ``lint-imports`` checks the same table as contracts in pyproject.toml).

The target is no cycle at all.  While other changes are in flight, the imports
that still close a cycle are listed in :data:`ALLOWED_MODULE_EDGES` / :data:`ALLOWED_ROOM_EDGES`
(each with the change that removes it): the test asserts that the graph *without* those
imports has no cycle, so a new cycle fails it and a removed import never does.  Empty the lists
as those changes land.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parent.parent / "src"

#: (importer, imported) module pairs that still close a cycle; removing them leaves none.
ALLOWED_MODULE_EDGES: frozenset[tuple[str, str]] = frozenset({
})
#: (importer room, imported room) pairs that still close a cycle between rooms.
ALLOWED_ROOM_EDGES: frozenset[tuple[str, str]] = frozenset()

Edge = tuple[str, str]
Graph = dict[str, dict[str, list[str]]]  # importer -> imported -> ["line 12 (function)", ...]


def module_names(src: Path, package: str) -> dict[str, Path]:
    """Dotted name -> file of every module of ``package`` under ``src``."""
    out = {}
    for path in sorted((src / package).rglob("*.py")):
        parts = list(path.relative_to(src).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _where(tree: ast.Module) -> dict[int, str]:
    """id(import node) -> "function" / "TYPE_CHECKING" for the imports that are not plain
    module-level ones."""
    out: dict[int, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for sub in ast.walk(node):
                out[id(sub)] = "TYPE_CHECKING"
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            for sub in ast.walk(node):
                out.setdefault(id(sub), "function")
    return out


def import_graph(src: Path, package: str) -> Graph:
    """Every import between modules of ``package`` (see the module doc)."""
    mods = module_names(src, package)

    def resolve(name: str) -> str | None:
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name or None

    graph: Graph = {m: {} for m in mods}
    for mod, path in mods.items():
        tree = ast.parse(path.read_text(), str(path))
        where = _where(tree)
        here = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = here.split(".")[: len(here.split(".")) - (node.level - 1)]
                    base = ".".join(up + ([base] if base else []))
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in mods else base
                           for a in node.names]
            else:
                continue
            line = f"line {node.lineno} ({where.get(id(node), 'module level')})"
            for t in targets:
                r = resolve(t) if t.split(".")[0] == package else None
                if r is not None and r != mod and line not in graph[mod].get(r, []):
                    graph[mod].setdefault(r, []).append(line)
    return graph


def rooms(graph: Graph) -> Graph:
    """The graph between rooms: ``package.x.y`` collapses to ``package.x`` (the package's own
    ``__init__`` stays ``package``); each edge keeps the module imports behind it."""
    def room(m: str) -> str:
        return ".".join(m.split(".")[:2])

    out: Graph = {}
    for a, targets in graph.items():
        for b, lines in targets.items():
            ra, rb = room(a), room(b)
            out.setdefault(ra, {})
            out.setdefault(rb, {})
            if ra != rb:
                out[ra].setdefault(rb, []).extend(f"{a} -> {b} {w}" for w in lines)
    for targets in out.values():
        for lines in targets.values():
            lines.sort()
    return out


def strongly_connected(graph: Graph, removed: frozenset[Edge] = frozenset()
                       ) -> list[list[str]]:
    """The import cycles: strongly connected components of more than one module (Tarjan),
    without the ``removed`` edges."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, {}):
            if (v, w) in removed:
                continue
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 10 * len(graph) + 100))
    try:
        for v in sorted(graph):
            if v not in index:
                visit(v)
    finally:
        sys.setrecursionlimit(limit)
    return sorted(out)


def report(graph: Graph, cycles: list[list[str]]) -> str:
    lines = []
    for comp in cycles:
        lines.append("cycle: " + ", ".join(comp))
        for a in comp:
            for b, where in sorted(graph[a].items()):
                if b in comp:
                    lines.append(f"    {a} -> {b}: {'; '.join(where)}")
    return "\n".join(lines)


# ------------------------------------------------------------------------------- the finder


def _package(tmp_path: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        p = tmp_path / "pkg" / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return tmp_path


def test_finder_sees_function_level_relative_and_type_checking_imports(tmp_path: Path) -> None:
    src = _package(tmp_path, {
        "__init__.py": "",
        "a.py": "from pkg import b\n",
        "b.py": "def f():\n    from . import a\n    return a\n",
        "sub/__init__.py": "from typing import TYPE_CHECKING\n"
                           "if TYPE_CHECKING:\n    from ..c import X\n",
        "c.py": "import pkg.sub\nimport os\nX = 1\n",
        "d.py": "from pkg.c import X\n",  # a name, not a module: an import of pkg.c
    })
    g = import_graph(src, "pkg")
    assert g["pkg.a"] == {"pkg.b": ["line 1 (module level)"]}
    assert g["pkg.b"] == {"pkg.a": ["line 2 (function)"]}
    assert g["pkg.sub"] == {"pkg.c": ["line 3 (TYPE_CHECKING)"]}
    assert g["pkg.c"] == {"pkg.sub": ["line 1 (module level)"]}  # os is not ours
    assert g["pkg.d"] == {"pkg.c": ["line 1 (module level)"]}
    assert strongly_connected(g) == [["pkg.a", "pkg.b"], ["pkg.c", "pkg.sub"]]
    assert strongly_connected(g, frozenset({("pkg.b", "pkg.a")})) == [["pkg.c", "pkg.sub"]]
    assert "pkg.b -> pkg.a: line 2 (function)" in report(g, strongly_connected(g))
    r = rooms(g)
    assert strongly_connected(r) == [["pkg.a", "pkg.b"], ["pkg.c", "pkg.sub"]]


# ------------------------------------------------------------------------------- nvatom


@pytest.fixture(scope="module")
def nvatom_graph() -> Graph:
    return import_graph(SRC, "nvatom")


def test_finder_sees_nvatom_imports(nvatom_graph: Graph) -> None:
    assert "nvatom.errors" in nvatom_graph["nvatom.layout.layout"]
    assert "nvatom.tables.swizzles" in nvatom_graph["nvatom.descriptors.wgmma"]
    assert not nvatom_graph["nvatom.errors"]


def test_no_module_import_cycle_outside_the_allow_list(nvatom_graph: Graph) -> None:
    cycles = strongly_connected(nvatom_graph, ALLOWED_MODULE_EDGES)
    assert not cycles, "import cycles between nvatom modules:\n" + report(nvatom_graph, cycles)


def test_no_room_import_cycle_outside_the_allow_list(nvatom_graph: Graph) -> None:
    g = rooms(nvatom_graph)
    cycles = strongly_connected(g, ALLOWED_ROOM_EDGES)
    assert not cycles, "import cycles between nvatom rooms:\n" + report(g, cycles)


def test_allow_lists_name_existing_modules() -> None:
    mods = module_names(SRC, "nvatom")
    for a, b in ALLOWED_MODULE_EDGES | ALLOWED_ROOM_EDGES:
        assert a in mods and b in mods, (a, b)


def test_every_room_is_in_the_layers_contract() -> None:
    """Each top-level module and package of nvatom is a layer of the ``rooms`` contract in
    pyproject.toml, so a new room cannot sit outside the checked table."""
    import tomllib

    cfg = tomllib.loads((SRC.parent / "pyproject.toml").read_text())["tool"]["importlinter"]
    layers = next(c for c in cfg["contracts"] if c["id"] == "rooms")["layers"]
    named = {m.strip().strip("()") for layer in layers for m in layer.replace("|", ":").split(":")}
    tops = {".".join(m.split(".")[:2]) for m in module_names(SRC, "nvatom") if m != "nvatom"}
    assert tops <= named, f"rooms missing from [tool.importlinter] 'rooms': {tops - named}"
