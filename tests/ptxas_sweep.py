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


def kernel_lines(emit: Callable[..., object]) -> list[str]:
    """The instruction lines one emitter call appends to an empty kernel (no declarations)."""
    from nvatom.ptx.builder import Kernel

    k = Kernel("x")
    emit(k)
    return [ln for ln in k.emit().splitlines()[2:-2] if not ln.strip().startswith(".reg")]


def one_kernel_module(ptx_target: str, version: tuple[int, int], params: str, regs: str,
                      groups: Sequence[Sequence[str]]) -> tuple[str, list[int]]:
    """One kernel holding every group of lines, and the line number where each group starts
    (the ``build`` argument of :func:`case_verdicts`)."""
    text = (f".version {version[0]}.{version[1]}\n.target {ptx_target}\n.address_size 64\n"
            f".visible .entry k({params})\n{{\n" + regs)
    starts = []
    for lines in groups:
        starts.append(text.count("\n") + 1)
        text += "\n".join(lines) + "\n"
    return text + "ret;\n}\n", starts
