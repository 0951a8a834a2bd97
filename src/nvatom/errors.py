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
