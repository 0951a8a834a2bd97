"""One name per hardware family (docs/atom-names.md, "One vocabulary"): src/nvatom spells SM90's
warpgroup MMA ``wgmma``, never CUTLASS's ``gmma``, except where it cites something by that
name (a CUTLASS identifier or file, a SASS opcode, a profiler metric, the specification's
"GMMA K" heading) or keeps a deprecated alias; and no identifier or module is named after a
GPU's marketing name (``Hopper``, ``Blackwell``: prose only)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

PKG = Path(__file__).resolve().parents[1] / "src" / "nvatom"

#: ``gmma`` in any case, not as part of ``wgmma``.
RETIRED = re.compile(r"(?<![wW])(gmma|Gmma|GMMA)")
#: Where the retired spelling cites something outside nvatom by its own name.
CITATIONS = (
    r"GMMA::\w+",  # CUTLASS's namespace: GMMA::Layout_K_SW128_Atom, GMMA::LayoutType
    r"\w*gmma\w*\.hpp",  # CUTLASS's files: mma_traits_sm90_gmma.hpp, mma_sm90_gmma.hpp
    r"(?:CUTLASS(?:'s)? `*(?:union )?|union )GmmaDescriptor",  # CUTLASS's descriptor union
    r"(?:its ``make_gmma_desc``|``make_gmma_desc`` \(include/cute/)",  # CUTLASS's function
    r"\b[HQIB]GMMA\b",  # SASS opcodes
    r"\w*_gmma_cycles\w*",  # ncu metrics
    r'"GMMA K"',  # the specification's heading
)
#: Lines that keep the old names working for callers not moved yet (docs/atom-names.md).
ALIAS_MARK = "# deprecated alias (docs/atom-names.md)"
#: Files not held to the vocabulary yet, with the reason.
SKIPPED_FILES = {
}
MARKETING = re.compile(r"hopper|blackwell", re.IGNORECASE)


def _files() -> list[tuple[str, Path]]:
    return [(p.relative_to(PKG).as_posix(), p) for p in sorted(PKG.rglob("*.py"))
            if p.relative_to(PKG).as_posix() not in SKIPPED_FILES]


def test_no_retired_gmma_spelling() -> None:
    cited = re.compile("|".join(CITATIONS))
    found = []
    for rel, path in _files():
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if ALIAS_MARK in line:
                continue
            if RETIRED.search(cited.sub("", line)):
                found.append(f"src/nvatom/{rel}:{n}: {line.strip()}")
    assert not found, ("gmma is CUTLASS's spelling of WGMMA; nvatom says wgmma "
                       "(docs/atom-names.md):\n" + "\n".join(found))


def test_deprecated_aliases_are_the_new_names() -> None:
    from nvatom.descriptors import wgmma

    assert wgmma.GmmaDescriptor is wgmma.WgmmaDescriptor
    assert wgmma.make_gmma_desc is wgmma.make_wgmma_desc
    assert wgmma.canonical_gmma_layout is wgmma.canonical_wgmma_layout


def test_identifiers_and_modules_name_no_retired_or_marketing_word() -> None:
    bad = []
    for rel, path in _files():
        if RETIRED.search(rel) or MARKETING.search(rel):
            bad.append(f"module src/nvatom/{rel}")
        for node in ast.walk(ast.parse(path.read_text())):
            names: list[str] = []
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names = [node.name]
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                names = [node.id]
            elif isinstance(node, ast.arg):
                names = [node.arg]
            elif isinstance(node, ast.alias) and node.asname:
                names = [node.asname]
            for name in names:
                if MARKETING.search(name) or RETIRED.search(name):
                    bad.append(f"src/nvatom/{rel}:{node.lineno}: {name}")
    allowed = {f"src/nvatom/descriptors/wgmma.py:{n}" for n in _alias_lines()}
    bad = [b for b in bad if b.rsplit(":", 1)[0] not in allowed]
    assert not bad, "\n".join(bad)


def _alias_lines() -> list[int]:
    text = (PKG / "descriptors" / "wgmma.py").read_text().splitlines()
    return [n for n, line in enumerate(text, 1) if ALIAS_MARK in line]


def test_the_command_names_atom_families_as_the_registry_does() -> None:
    """``nvatom atoms --wgmma / --umma / --sm120 / --copy`` are registry families by their
    registry names, and ``nvatom desc`` names each MMA descriptor by its atom family."""
    from nvatom.atoms.registry import FAMILIES
    from nvatom.cli import _parser

    sub = next(a for a in _parser()._actions if a.__class__.__name__ == "_SubParsersAction")
    flags = {o[2:] for a in sub.choices["atoms"]._actions for o in a.option_strings
             if o.startswith("--")}
    names = {f.name for f in FAMILIES}
    family_flags = flags & (names | {"gmma", "tcgen05", "sm90", "sm100"})
    assert family_flags == {"wgmma", "umma", "sm120", "copy"}, family_flags
    (kinds,) = [a.choices for a in sub.choices["desc"]._actions if a.dest == "kind"]
    assert {"wgmma", "umma"} <= set(kinds) <= names | {"idesc"}
