"""Exception types shared by every part of nvatom, and :func:`lookup`, the one way a name is
looked up in a table of facts (the caller's error, naming the name, when it is not there).

This module is a leaf: it imports nothing of ours, so every room of the house (the layout
algebra included) may raise these.  Each error carries the text a user sees; the CLI prints
``str(err)`` on one line and exits with status 2.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TypeVar

_K = TypeVar("_K")
_V = TypeVar("_V")


class NvatomError(Exception):
    """Base class of every error nvatom raises on purpose."""


class LayoutError(NvatomError, ValueError):
    """Invalid arguments to the layout algebra (names the layouts involved)."""


class TargetError(NvatomError, ValueError):
    """An unknown SM target or an impossible target requirement."""


class DTypeError(NvatomError, ValueError):
    """An unknown element type or a value that a format cannot encode."""


class DescriptorError(NvatomError, ValueError):
    """A descriptor value, field or layout that the hardware cannot use as given."""


class PtxasError(NvatomError):
    """ptxas rejected the PTX, or could not be found/run; carries ptxas's messages."""

    def __init__(
        self,
        message: str,
        *,
        log: str = "",
        target: str | None = None,
        diagnostics: tuple = (),
    ) -> None:
        super().__init__(message)
        self.log = log
        #: The target ptxas rejected the PTX for; None when ptxas never ran on it.
        self.target = target
        #: ptxas's parsed messages (nvatom.runtime.ptxas.Diagnostic), errors first in order.
        self.diagnostics = diagnostics


def lookup(table: Mapping[_K, _V], key: _K, error: Callable[[], Exception]) -> _V:
    """``table[key]``; for a key the table lacks, raises ``error()`` (the message names the
    key) without the ``KeyError`` as its context: how a name is looked up in a table of facts."""
    try:
        return table[key]
    except KeyError:
        raise error() from None


#: The largest finite float32 (a scale or factor the kernels take as ``.f32``).
F32_MAX = 3.4028234663852886e38


def shown(value: object, limit: int = 60) -> str:
    """``repr(value)`` for an error message, short whatever the value: an integer too long to
    print (Python refuses ``str`` of one over 4,300 digits) is named by its bit length, and a
    long text is cut, saying how long it was."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 200:
        return f"an integer of {value.bit_length()} bits"
    text = repr(value)
    if len(text) <= limit:
        return text
    return f"{text[:limit - 20]}... ({len(text)} characters)"


def f32_number(value: object) -> float | None:
    """``value`` (an int or float, not a bool) as a float when it is finite and within
    float32's range, else None (huge ints included: no OverflowError escapes)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        f = float(value)
    except OverflowError:
        return None
    return f if abs(f) <= F32_MAX else None  # NaN fails the comparison too
