"""One entry point for fragment pictures of any MMA atom: :func:`picture`.

Register MMA forms, SM120 forms and tiled MMAs have a ``picture(operand)`` method of their
own; a WGMMA form's register fragments (D/C always, A for ``rs`` forms) come from
:mod:`nvatom.atoms.wgmma_fragments` (PTX ISA "Register Fragments and Shared Memory Matrix
Layouts" for wgmma), which the form's module cannot import, so :func:`picture` is the way to
draw them.  The drawing is :mod:`nvatom.atoms.frag_view`'s.
"""

from __future__ import annotations

from typing import Any

from nvatom.atoms.frag_view import FragmentView, FragmentViewError
from nvatom.atoms.sm90 import WgmmaForm
from nvatom.atoms.wgmma_fragments import WARPGROUP, wgmma_tv_layout

__all__ = ["picture"]


def picture(atom: Any, operand: str = "D") -> FragmentView:
    """The fragment picture of ``atom``'s ``operand`` (A, B, C or D); Jupyter shows it."""
    if isinstance(atom, WgmmaForm):
        op = str(operand).upper()
        tv = wgmma_tv_layout(atom, op)
        dims = (atom.m, atom.k) if op == "A" else (atom.m, atom.n)
        return FragmentView(tv, op, dims, WARPGROUP,
                            f"{atom.name}  operand {op}  (T<thread>:V<value>)")
    fn = getattr(atom, "picture", None)
    if fn is None:
        raise FragmentViewError(f"{type(atom).__name__}: no register fragment picture "
                                "(its layouts, e.g. an SM100 tmem_layout, draw themselves)")
    return fn(operand)  # type: ignore[no-any-return]
