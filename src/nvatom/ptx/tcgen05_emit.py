"""Emit the ``tcgen05`` family into a :class:`~nvatom.ptx.builder.Kernel`: TMEM allocation,
UMMA (``tcgen05.mma``), commit to an mbarrier, fences and waits, ``tcgen05.ld/st/cp``.

PTX ISA "TensorCore 5th Generation Family Instructions".  The rules this module enforces:

* every tcgen05 instruction of a kernel uses one ``.cta_group`` (ptxas: "Function ... uses
  single CTA(.cta_group::1) and CTA pair granularity(.cta_group::2) and that is not
  allowed"): a :class:`Tcgen05` emitter is bound to a kernel and one CTA group, and binding a
  second emitter with the other group raises :class:`Tcgen05EmitError`; :func:`check_kernel`
  also scans a kernel's text (raw lines included);
* instruction spellings come from :mod:`nvatom.atoms.sm100` (forms) and
  :mod:`nvatom.atoms.tmem` (copy atoms, allocation), never from here;
* ``tcgen05.mma`` and ``tcgen05.cp`` are issued by one thread; their completion is observed
  through ``tcgen05.commit`` -> mbarrier (``.mbarrier::arrive::one``, optionally multicast to
  the CTAs of a 16-bit mask); ``tcgen05.ld``/``st`` are warp-wide and complete at
  ``tcgen05.wait::ld`` / ``wait::st``; ``tcgen05.fence::before_thread_sync`` /
  ``after_thread_sync`` order tcgen05 work around thread synchronisation.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from nvatom.atoms.sm100 import Tcgen05MmaForm, UmmaAtom
from nvatom.atoms.tmem import (
    S2tCopyAtom,
    TmemCopyAtom,
    alloc_instruction,
    dealloc_instruction,
    relinquish_instruction,
    shift_instruction,
)
from nvatom.errors import NvatomError
from nvatom.ptx.builder import Kernel, Reg

__all__ = [
    "FENCE_AFTER",
    "FENCE_BEFORE",
    "WAIT_LD",
    "WAIT_ST",
    "Tcgen05",
    "Tcgen05EmitError",
    "check_kernel",
    "commit_instruction",
]

FENCE_BEFORE = "tcgen05.fence::before_thread_sync"
FENCE_AFTER = "tcgen05.fence::after_thread_sync"
WAIT_LD = "tcgen05.wait::ld.sync.aligned"
WAIT_ST = "tcgen05.wait::st.sync.aligned"

_CTA_RE = re.compile(r"^\s*(?:@\S+\s+)?tcgen05\.\S*cta_group::(\d)")


class Tcgen05EmitError(NvatomError):
    """A tcgen05 instruction the kernel cannot take (mixed CTA groups, wrong operands)."""


def commit_instruction(mbar: str, cta_group: int = 1, multicast_mask: str | None = None) -> str:
    """``tcgen05.commit.cta_group::N.mbarrier::arrive::one.shared::cluster[.multicast::cluster]
    .b64 [mbar][, ctaMask];``: the mbarrier gets one arrival once all prior async tcgen05
    operations of the thread completed (ctaMask: a 16-bit register)."""
    mc = ".multicast::cluster" if multicast_mask is not None else ""
    tail = f", {multicast_mask}" if multicast_mask is not None else ""
    return (f"tcgen05.commit.cta_group::{cta_group}.mbarrier::arrive::one.shared::cluster{mc}"
            f".b64 [{mbar}]{tail};")


def check_kernel(k: Kernel) -> int | None:
    """The one CTA group of the kernel's tcgen05 instructions (None: there are none); raises
    :class:`Tcgen05EmitError` naming the lines if they mix ``cta_group::1`` and ``::2``."""
    groups: dict[int, str] = {}
    for line in k.emit().splitlines():
        m = _CTA_RE.match(line)
        if m:
            groups.setdefault(int(m.group(1)), line.strip())
    if len(groups) > 1:
        raise Tcgen05EmitError(
            f"kernel '{k.name}' mixes tcgen05 CTA groups ({groups[1]!r} and {groups[2]!r}); "
            "every tcgen05 instruction of a kernel must use one cta_group")
    return next(iter(groups), None)


class Tcgen05:
    """The tcgen05 emitter of one kernel and one CTA group."""

    def __init__(self, k: Kernel, cta_group: int = 1) -> None:
        if cta_group not in (1, 2):
            raise Tcgen05EmitError(f"cta_group is 1 or 2, got {cta_group!r}")
        bound = getattr(k, "_tcgen05_cta_group", None)
        if bound is not None and bound != cta_group:
            raise Tcgen05EmitError(
                f"kernel '{k.name}' already issues tcgen05 with cta_group::{bound}; "
                f"cta_group::{cta_group} cannot join it (one CTA group per kernel)")
        k.need_feature("tcgen05", "tcgen05", Tcgen05EmitError)
        k._tcgen05_cta_group = cta_group  # type: ignore[attr-defined]
        self.k = k
        self.cta_group = cta_group

    # ------------------------------------------------------------------ allocation
    def alloc(self, dst_smem: Reg | str, ncols: int | Reg) -> None:
        """Warp-wide: allocate ``ncols`` columns; the TMEM address is written to shared memory
        at ``dst_smem`` (a 32-bit shared address)."""
        self.k.raw(alloc_instruction(str(dst_smem), ncols if isinstance(ncols, int)
                                     else str(ncols), self.cta_group))

    def dealloc(self, taddr: Reg | str, ncols: int | Reg) -> None:
        self.k.raw(dealloc_instruction(str(taddr), ncols if isinstance(ncols, int)
                                       else str(ncols), self.cta_group))

    def relinquish(self) -> None:
        self.k.raw(relinquish_instruction(self.cta_group))

    # ------------------------------------------------------------------ sync
    def fence_before_thread_sync(self) -> None:
        self.k.ins(FENCE_BEFORE)

    def fence_after_thread_sync(self) -> None:
        self.k.ins(FENCE_AFTER)

    def wait_ld(self) -> None:
        self.k.ins(WAIT_LD)

    def wait_st(self) -> None:
        self.k.ins(WAIT_ST)

    def commit(self, mbar: Reg | str, multicast_mask: Reg | str | None = None,
               pred: str | None = None) -> None:
        if multicast_mask is not None and isinstance(multicast_mask, Reg) and \
                multicast_mask.type not in ("b16", "u16", "s16"):
            raise Tcgen05EmitError(f"the multicast CTA mask is a 16-bit register, got "
                                   f"{multicast_mask.type}")
        line = commit_instruction(str(mbar), self.cta_group,
                                  None if multicast_mask is None else str(multicast_mask))
        self.k.raw((f"@{pred} " if pred else "") + line)

    # ------------------------------------------------------------------ MMA
    def mma(self, what: UmmaAtom | Tcgen05MmaForm, *, d: Any, a: Any, b: Any, idesc: Any,
            enable_input_d: Any, pred: str | None = None, **optional: Any) -> None:
        """One ``tcgen05.mma`` (issued by the threads ``pred`` selects: normally one)."""
        form = what.form() if isinstance(what, UmmaAtom) else what
        if form.cta_group != self.cta_group:
            raise Tcgen05EmitError(f"{form.name} is cta_group::{form.cta_group}; this kernel "
                                   f"issues cta_group::{self.cta_group}")
        line = form.instruction(d=d, a=a, b=b, idesc=idesc, enable_input_d=enable_input_d,
                                **optional)
        self.k.need_atom(form, Tcgen05EmitError)
        self.k.raw((f"@{pred} " if pred else "") + line)

    # ------------------------------------------------------------------ copies
    def ld(self, atom: TmemCopyAtom, regs: Sequence[Reg | str], taddr: Reg | str) -> None:
        if atom.direction != "load":
            raise Tcgen05EmitError(f"{atom.name} is a store")
        self.k.need_atom(atom, Tcgen05EmitError, name_feature=False)
        self.k.raw(atom.instruction([str(r) for r in regs], str(taddr)))

    def st(self, atom: TmemCopyAtom, taddr: Reg | str, regs: Sequence[Reg | str]) -> None:
        if atom.direction != "store":
            raise Tcgen05EmitError(f"{atom.name} is a load")
        self.k.need_atom(atom, Tcgen05EmitError, name_feature=False)
        self.k.raw(atom.instruction([str(r) for r in regs], str(taddr)))

    def shift(self, taddr: Reg | str, pred: str | None = None) -> None:
        """``tcgen05.shift.cta_group::N.down [taddr]`` (one thread issues it)."""
        self.k.need_feature("tcgen05.shift", "tcgen05.shift", Tcgen05EmitError)
        self.k.raw((f"@{pred} " if pred else "") + shift_instruction(str(taddr), self.cta_group))

    def cp(self, atom: S2tCopyAtom, taddr: Reg | str, sdesc: Reg | str,
           pred: str | None = None) -> None:
        if atom.cta_group != self.cta_group:
            raise Tcgen05EmitError(f"{atom.name} is cta_group::{atom.cta_group}; this kernel "
                                   f"issues cta_group::{self.cta_group}")
        self.k.need_atom(atom, Tcgen05EmitError, name_feature=False)
        self.k.raw((f"@{pred} " if pred else "") + atom.instruction(str(taddr), str(sdesc)))
