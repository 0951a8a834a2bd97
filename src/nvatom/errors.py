"""Exception types shared by every part of nvatom.

This module is a leaf: it imports nothing of ours, so every room of the house (the layout
algebra included) may raise these.  Each error carries the text a user sees; the CLI prints
``str(err)`` on one line and exits with status 2.
"""

from __future__ import annotations


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
