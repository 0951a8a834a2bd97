"""Parse, verify and print ``.mlir`` text; diagnostics with source locations.

A diagnostic prints as MLIR prints it::

    FILE:LINE:COL: error: 'cute_nvgpu.atom.non_exec_tiled_tma_load' op invalid operand types, ...

with the atom layer's message unchanged after ``op ``.  LINE and COL are 1-based and point at
the start of the operation (its result list), as MLIR's op locations do; a parse error points
at the offending token.  Nothing here lets a Python exception escape for bad input: every
failure becomes an :class:`IRError` carrying its diagnostics.
"""

from __future__ import annotations

import bisect
import dataclasses
from collections.abc import Iterator
from typing import Any

from nvatom.arch import Target, target
from nvatom.errors import NvatomError
from nvatom.ir import dialect as DL
from nvatom.ir import xdsl_adapter as X
from nvatom.ir.ops import DIALECTS
from nvatom.ir.ops_tma import derive_tma_flags

__all__ = ["Diagnostic", "IRError", "Module", "parse", "print_module", "verify"]

DEFAULT_TARGET = "sm_90a"


@dataclasses.dataclass(frozen=True)
class Diagnostic:
    filename: str
    line: int
    col: int
    message: str  # without the "'op' op " prefix
    op: str | None = None
    severity: str = "error"

    def __str__(self) -> str:
        prefix = f"'{self.op}' op " if self.op else ""
        return f"{self.filename}:{self.line}:{self.col}: {self.severity}: {prefix}{self.message}"


class IRError(NvatomError):
    """Parsing or verification failed; ``diagnostics`` holds every diagnostic."""

    def __init__(self, diagnostics: list[Diagnostic]) -> None:
        super().__init__("\n".join(str(d) for d in diagnostics))
        self.diagnostics = diagnostics


class _Lines:
    def __init__(self, text: str) -> None:
        self.starts = [0] + [i + 1 for i, c in enumerate(text) if c == "\n"]

    def line_col(self, offset: int) -> tuple[int, int]:
        i = bisect.bisect_right(self.starts, offset) - 1
        return i + 1, offset - self.starts[i] + 1


_CTX: Any = None


def _context() -> Any:
    global _CTX
    if _CTX is None:
        _CTX = X.make_context(DIALECTS)
    return _CTX


@dataclasses.dataclass
class Module:
    """A parsed module with the source location of each operation."""

    op: Any  # the builtin.module
    locations: dict[Any, int]
    text: str
    filename: str

    def __post_init__(self) -> None:
        self._lines = _Lines(self.text)

    def diag(self, op: Any, message: str) -> Diagnostic:
        off = self.locations.get(op, 0)
        line, col = self._lines.line_col(off)
        name = op.name if op is not None and op.name != "builtin.module" else None
        return Diagnostic(self.filename, line, col, message, name)

    def walk(self) -> Iterator[Any]:
        yield from self.op.walk()

    def target(self, override: str | Target | None = None) -> Target:
        if override is not None:
            return target(override)
        t = X.module_attr(self.op, "nvatom.target")
        return target(t if isinstance(t, str) else DEFAULT_TARGET)


def parse(text: str, filename: str = "<input>") -> Module:
    """Parse ``text``; raise :class:`IRError` with one diagnostic on a syntax error."""
    try:
        op, locs = X.parse_text(_context(), text, filename)
    except X.XdslParseFailure as e:
        line, col = _Lines(text).line_col(min(e.offset, len(text)))
        msg = internal_error(e.cause) if e.cause is not None else e.message
        if e.op and msg.startswith(f"'{e.op}' "):  # xDSL's messages may name the op already
            msg = msg[len(e.op) + 3:]
        raise IRError([Diagnostic(filename, line, col, msg, e.op)]) from None
    except NvatomError as e:  # a decoder error outside any operation
        raise IRError([Diagnostic(filename, 1, 1, str(e))]) from None
    except Exception as e:  # a bug outside any operation (the fuzz test hunts these)
        raise IRError([Diagnostic(filename, 1, 1, internal_error(e))]) from None
    module = Module(op, locs, text, filename)
    for fn in module.walk():  # a func.func without a body: a declaration or a cut-off file
        if fn.name == "func.func" and not (fn.regions and fn.regions[0].blocks):
            raise IRError([module.diag(fn, "has no body: nvatom compiles function definitions "
                                           "only (is the file cut off after the header?)")])
    return module


def internal_error(e: BaseException) -> str:
    """The diagnostic of an unexpected exception (a bug in nvatom or xDSL)."""
    return f"{INTERNAL} {type(e).__name__}: {e}"


#: the prefix of diagnostics that report bugs rather than bad input
INTERNAL = "internal error (please report):"


def verify(module: Module, target_: str | Target | None = None) -> DL.VerifyCtx:
    """Run every operation's verifier; raise :class:`IRError` with all diagnostics.

    Operations that use a value whose defining operation failed are skipped, so one error
    does not cascade.  Returns the verification facts the lowering reads.
    """
    try:
        t = module.target(target_)
    except NvatomError as e:
        raise IRError([module.diag(module.op, str(e))]) from None
    ctx = DL.VerifyCtx(t)
    diags: list[Diagnostic] = []
    early = X.use_before_definition(module.op)
    if early is not None:
        raise IRError([module.diag(early[0], f"uses {early[1]} before its definition")])
    found = X.structural_verify(module.op)
    if found is not None:
        bad, msg, internal = found
        diags.append(module.diag(bad, f"{INTERNAL} {msg}" if internal else msg))
    failed: set[Any] = set()
    for op in module.walk():
        if not DL.is_nv_op(op):
            continue
        if any(getattr(o, "op", None) in failed for o in op.operands):
            failed.add(op)
            continue
        try:
            op.verify_ir(ctx)
        except NvatomError as e:
            diags.append(module.diag(op, str(e)))
            failed.add(op)
        except Exception as e:  # a bug: report it at the op, without a traceback
            diags.append(module.diag(op, internal_error(e)))
            failed.add(op)
    if diags:
        raise IRError(diags)
    # the TMA flags bits that depend on how a load's tile is used (sparse metadata, a
    # tcgen05.cp source): set once everything has verified
    derive_tma_flags(module, ctx)
    return ctx


def print_module(module: Module | Any) -> str:
    """The custom-syntax text of the module's operations (without the implicit module)."""
    op = module.op if isinstance(module, Module) else module
    if op.attributes:
        return X.print_ops([op])
    return X.print_ops(list(op.body.block.ops))
