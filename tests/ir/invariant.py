"""Issue 16's invariant, one atom use at a time: it fails ``verify`` with a known diagnostic, or
it verifies, lowers and ptxas assembles it.  Shared by tests/ir/test_ir_invariant.py (a
sample) and scripts/ir_invariant_sweep.py (every atom on every target).

A diagnostic is *known* when it holds the fixed text of one of nvatom.diagnostics' strings (the
specification's, byte for byte) or one of :data:`OWN_DIAGNOSTICS` (ours, documented in
docs/ir.md, "The invariant").  :data:`XFAIL` lists the atom uses that still break the
invariant, each with its reason; it is empty unless a form could not be fixed in time.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Sequence
from typing import Any

from nvatom import diagnostics as D
from nvatom.ir import driver
from nvatom.ir.generate import AtomUse, atom_use
from nvatom.ir.lower import Lowered, lower
from nvatom.runtime.ptxas import PtxasError, assemble

#: Our own verify diagnostics an atom use may end in (docs/ir.md, "The invariant"): the
#: registry's target rules (nvatom.atoms.records.AtomRecord.rejection) and the form tables'.
OWN_DIAGNOSTICS: tuple[str, ...] = (
    "needs tier ",  # AtomRecord.rejection below the minimum tier
    "has no scalar PTX fma/mad for ",  # nvatom.atoms.universal: no scalar FMA of the type
    "' is not available on ",  # AtomRecord.rejection / form feature rules
    "cannot multicast (cp.async.bulk.tensor has no",  # ir.ops_tma: shared::cta destination
)

#: (family, atom-name regex, target regex) -> reason: known breaks of the invariant.
XFAIL: dict[tuple[str, str, str], str] = {}


def _fixed_parts() -> list[str]:
    parts = []
    for name in dir(D):
        v = getattr(D, name)
        if name.isupper() and isinstance(v, str):
            parts += [p for p in re.split(r"\{\d*\}", v) if len(p.strip()) >= 12]
    return parts


_KNOWN = (*_fixed_parts(), *OWN_DIAGNOSTICS)


def known(message: str) -> bool:
    return not message.startswith(driver.INTERNAL) and any(k in message for k in _KNOWN)


def xfail_reason(use: AtomUse) -> str | None:
    for (fam, atom, tgt), why in XFAIL.items():
        if fam == use.family and re.fullmatch(atom, use.atom) and re.fullmatch(tgt, use.target):
            return why
    return None


def verify_and_lower(use: AtomUse) -> tuple[str, str, Lowered | None]:
    """("rejected", diagnostic, None), ("FAIL", why, None) or ("lowered", "", the PTX)."""
    try:
        mod = driver.parse(use.text, f"{use.atom}@{use.target}.mlir")
        ctx = driver.verify(mod)
    except driver.IRError as e:
        msg = e.diagnostics[0].message
        return ("rejected", msg, None) if known(msg) else \
            ("FAIL", f"unknown diagnostic: {msg}", None)
    try:
        return "lowered", "", lower(mod, ctx)
    except Exception as e:
        return "FAIL", f"verifies but does not lower: {type(e).__name__}: {e}", None


def check(use: AtomUse, assemble_: Callable[..., object] = assemble) -> tuple[str, str]:
    """("rejected", diagnostic) or ("assembled", "") or ("FAIL", why)."""
    status, why, out = verify_and_lower(use)
    if out is None:
        return status, why
    try:
        assemble_(out.ptx, out.target)
    except PtxasError as e:
        return "FAIL", f"verifies and lowers but ptxas rejects it: {str(e)[:300]}"
    return "assembled", ""


def sample(pool: Sequence[Any], fixed: int, rand: int, seed: int) -> list[Any]:
    """A test sample of ``pool``: ``fixed`` cases of seed 16 (the same every run), then
    ``rand`` of the others drawn with the run's ``seed``."""
    part = random.Random(16).sample(pool, fixed)
    rest = [c for c in pool if c not in part]
    return part + random.Random(seed).sample(rest, rand)


def assert_invariant(case: tuple[Any, Any, Any], seed: int) -> None:
    """The invariant as a test on one generated case ``(family, atom, target)``: an xfail
    for a break :data:`XFAIL` lists, else it must not FAIL (the message names the sample's
    ``seed`` and shows the program)."""
    import pytest

    fam, atom, t = case
    use = atom_use(fam, atom, t)
    status, why = check(use)
    reason = xfail_reason(use)
    if reason is not None:
        pytest.xfail(reason)
    assert status != "FAIL", f"{use.atom} on {use.target} (seed {seed}): {why}\n{use.text}"
