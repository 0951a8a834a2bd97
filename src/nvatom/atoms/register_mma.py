"""The register-MMA forms of every tier table, by name and by filter.

The forms of each register-MMA family (one per PTX instruction form of ``mma.sync`` /
``mma.sp``) come from the tier tables ``sm70`` ... ``sm89``; :func:`mma_forms` filters them by
target and types and :func:`mma_form` resolves an atom name (``sm120.*`` names through the
SM120 table, docs/sm120.md), suggesting the nearest legal names on a miss.  Source: PTX ISA
"Warp Level Matrix Multiply-Accumulate Instructions" (every form assembled by ptxas in
tests/atoms/test_mma_ptxas.py).
"""

from __future__ import annotations

import difflib
import functools

from nvatom.arch import Target, target
from nvatom.atoms import sm70, sm75, sm80, sm89, sm120
from nvatom.atoms.mma import MmaForm
from nvatom.atoms.records import UnknownAtomError
from nvatom.dtypes import DType, dtype
from nvatom.errors import NvatomError

__all__ = ["all_forms", "mma_form", "mma_forms"]


@functools.cache
def all_forms() -> tuple[MmaForm, ...]:
    forms = sm70.FORMS + sm75.FORMS + sm80.FORMS + sm89.FORMS
    names = [f.name for f in forms]
    dup = {n for n in names if names.count(n) > 1}
    if dup:
        raise NvatomError(f"MMA tables define these names twice: {sorted(dup)}")
    return forms


@functools.cache
def _by_name() -> dict[str, MmaForm]:
    return {f.name: f for f in all_forms()}


def _as_dtype(t: DType | str | None) -> DType | None:
    return None if t is None else dtype(t)


def mma_forms(
    target_: Target | str | None = None,
    *,
    a: DType | str | None = None,
    b: DType | str | None = None,
    acc: DType | str | None = None,
    shape: tuple[int, int, int] | None = None,
    mnemonic: str | None = None,
) -> list[MmaForm]:
    """Register MMA forms, filtered by target availability, element types, shape, family."""
    ta, tb, tc = _as_dtype(a), _as_dtype(b), _as_dtype(acc)
    t = target(target_) if target_ is not None else None
    out = []
    for f in all_forms():
        if t is not None and not f.available_on(t):
            continue
        if (ta is not None and f.a != ta) or (tb is not None and f.b != tb):
            continue
        if tc is not None and f.c != tc:
            continue
        if shape is not None and f.shape != tuple(shape):
            continue
        if mnemonic is not None and f.mnemonic != mnemonic:
            continue
        out.append(f)
    return out


def mma_form(name: str) -> MmaForm:
    """Resolve an atom name like ``sm80.mma.m16n8k16.f32.bf16.bf16.f32``."""
    key = name.strip()
    try:
        return _by_name()[key]
    except KeyError:
        pass
    if sm120.is_sm120_name(key):
        return sm120.sm120_form(key)  # type: ignore[return-value]
    near = difflib.get_close_matches(key, list(_by_name()), n=3, cutoff=0.6)
    hint = f"; nearest: {', '.join(near)}" if near else "; see 'nvatom atoms' for the list"
    raise UnknownAtomError(f"unknown MMA atom '{key}'{hint}")
