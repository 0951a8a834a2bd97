"""Judge many PTX instruction lines with few ptxas calls (shared by the table sweeps).

All lines go into one kernel; ptxas names the lines it rejects.  It skips later passes once
one failed, so the lines it did not reject are assembled again on their own until the rest
assembles.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from typing import TypeVar

from nvatom.runtime import ptxas

T = TypeVar("T")

#: (target, version, lines) -> (module text, line number of the first instruction line)
ModuleBuilder = Callable[[str, tuple[int, int], Sequence[str]], tuple[str, int]]


def verdicts(build: ModuleBuilder, target: str, version: tuple[int, int],
             lines: Sequence[str]) -> list[tuple[bool, tuple[str, ...]]]:
    """(accepted, error messages) of each instruction line, as ptxas judges it."""
    out: dict[int, tuple[bool, tuple[str, ...]]] = {}
    pending = list(range(len(lines)))
    while pending:
        text, first = build(target, version, [lines[i] for i in pending])
        ok, diags = ptxas.check(text, target)
        if ok:
            out.update((i, (True, ())) for i in pending)
            break
        errors: dict[int, list[str]] = defaultdict(list)
        for d in diags:
            if d.severity == "error" and d.line is not None and \
                    0 <= d.line - first < len(pending):
                errors[pending[d.line - first]].append(d.message)
        assert errors, f"ptxas rejected {target} PTX without naming a line: {diags}"
        out.update((i, (False, tuple(m))) for i, m in errors.items())
        pending = [i for i in pending if i not in errors]
    return [out[i] for i in range(len(lines))]


def vstr(v: tuple[int, int]) -> str:
    return f"{v[0]}.{v[1]}"


def marks(t: object) -> list:
    """sm_70/sm_72 need the CUDA 12.9 ptxas (tests marked sm70 skip without it)."""
    import pytest

    return [pytest.mark.sm70] if getattr(t, "ptxas", "") == "12.9" else []


def groups(pairs: Iterable[tuple[tuple[str, tuple[int, int]], T]]) -> list:
    """pytest params (target, version, [items...]) grouping items by (target, version)."""
    import pytest

    from nvatom import arch

    by: dict[tuple[str, tuple[int, int]], list[T]] = defaultdict(list)
    for key, item in pairs:
        by[key].append(item)
    return [pytest.param(t, v, by[(t, v)], id=f"{t}-{vstr(v)}", marks=marks(arch.target(t)))
            for t, v in sorted(by, key=lambda k: (arch.target(k[0]).cc, k[0], k[1]))]


def case_verdicts(
    build: Callable[[Sequence[Sequence[str]]], tuple[str, list[int]]],
    target: str,
    cases: dict[str, Sequence[str]],
) -> dict[str, tuple[bool, tuple[str, ...]]]:
    """(accepted, error messages) per case, a case being a group of lines that must all
    assemble.  ``build`` puts the groups into one module and returns its text and the line
    number of each group's first line."""
    pending = list(cases)
    out: dict[str, tuple[bool, tuple[str, ...]]] = {}
    while pending:
        text, starts = build([cases[i] for i in pending])
        ok, diags = ptxas.check(text, target)
        if ok:
            out.update((i, (True, ())) for i in pending)
            break
        bad: dict[str, list[str]] = {}
        for d in diags:
            if d.severity != "error" or d.line is None:
                continue
            for i, s in zip(pending, starts, strict=True):
                if s <= d.line < s + len(cases[i]):
                    bad.setdefault(i, []).append(d.message)
        assert bad, f"ptxas rejected the {target} sweep without naming a line: {diags}"
        out.update((i, (False, tuple(m))) for i, m in bad.items())
        pending = [i for i in pending if i not in bad]
    return out
