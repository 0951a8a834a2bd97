"""A ``-verify-diagnostics`` runner for ``.mlir`` files, as MLIR's test files use it.

A file is split at lines ``// -----`` into cases; each case is parsed, verified and (with
``lower=True``) lowered on its own, and the diagnostics it produces must be exactly the
expected ones.  An expectation is a comment::

    // expected-error {{message text}}          on this line
    // expected-error @+1 {{message text}}      on the next line (@-N: N lines above)

The text between ``{{`` and ``}}`` must occur in the diagnostic's message (after the
``'op' op`` prefix), as in MLIR.  Line numbers are those of the whole file.  A case may set its
target with a comment line ``// target: sm_120a`` (default: the module's
``nvatom.target`` attribute, else sm_90a).
"""

from __future__ import annotations

import dataclasses
import re

from nvatom.ir import driver
from nvatom.ir.lower import lower as lower_

__all__ = ["Case", "CaseResult", "check_file", "check_text", "split_cases"]

_SPLIT = re.compile(r"^\s*//\s*-----\s*$")
_EXPECT = re.compile(r"//\s*expected-(error|warning|note)\s*(@[+-]\d+|@above|@below)?\s*"
                     r"\{\{(.*?)\}\}")
_TARGET = re.compile(r"^\s*//\s*target:\s*(\S+)\s*$")


@dataclasses.dataclass(frozen=True)
class Case:
    first_line: int  # 1-based line of the case's first line in the file
    text: str  # padded with newlines so that line numbers are the file's


@dataclasses.dataclass
class CaseResult:
    case: Case
    problems: list[str]
    diagnostics: list[driver.Diagnostic]

    @property
    def ok(self) -> bool:
        return not self.problems


def split_cases(text: str) -> list[Case]:
    lines = text.split("\n")
    cases, start = [], 0
    for i, line in enumerate([*lines, "// -----"]):
        if _SPLIT.match(line):
            body = "\n" * start + "\n".join(lines[start:i])
            cases.append(Case(start + 1, body))
            start = i + 1
    return cases


def _expectations(case: Case) -> list[tuple[int, str]]:
    out = []
    for n, line in enumerate(case.text.split("\n"), start=1):
        for m in _EXPECT.finditer(line):
            if m.group(1) != "error":
                continue
            where = m.group(2)
            target = n
            if where in ("@above",):
                target = n - 1
            elif where in ("@below",):
                target = n + 1
            elif where:
                target = n + int(where[1:])
            out.append((target, m.group(3)))
    return out


def _target_of(case: Case) -> str | None:
    for line in case.text.split("\n"):
        m = _TARGET.match(line)
        if m:
            return m.group(1)
    return None


def run_case(case: Case, filename: str, *, lower: bool = False) -> list[driver.Diagnostic]:
    try:
        mod = driver.parse(case.text, filename)
        ctx = driver.verify(mod, _target_of(case))
        if lower:
            lower_(mod, ctx)
    except driver.IRError as e:
        return e.diagnostics
    return []


def check_text(text: str, filename: str = "<input>", *, lower: bool = False
               ) -> list[CaseResult]:
    results = []
    for case in split_cases(text):
        diags = run_case(case, filename, lower=lower)
        want = _expectations(case)
        problems = []
        remaining = list(diags)
        for line, msg in want:
            hit = next((d for d in remaining if d.line == line and msg in d.message), None)
            if hit is None:
                got = [str(d) for d in diags if d.line == line]
                problems.append(f"{filename}:{line}: expected error {{{{{msg}}}}} was not "
                                f"produced" + (f"; got: {' | '.join(got)}" if got else ""))
            else:
                remaining.remove(hit)
        for d in remaining:
            problems.append(f"unexpected diagnostic: {d}")
        results.append(CaseResult(case, problems, diags))
    return results


def check_file(path: str, *, lower: bool = False) -> list[CaseResult]:
    with open(path, encoding="utf-8") as f:
        return check_text(f.read(), path, lower=lower)
