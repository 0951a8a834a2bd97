"""Scale-factor fragments of the SM120 block-scaled ``mma.sync``: which lane's register byte
scales which block of A or B.

Source: PTX ISA "Block Scaling for mma.sync" (the ``scale-a-data`` / ``scale-b-data``
operands and their ``{byte-id, thread-id}`` selectors, Tables 35-37 and Figures 43-45).

The scale matrices are ``scale_A`` (M x X) and ``scale_B`` (X x N) for ``.scale_vec::XX``:
row ``m`` of A is cut into X blocks of ``K / X`` elements, block ``j`` multiplied by
``scale_A[m, j]``; column ``n`` of B likewise by ``scale_B[j, n]``.  Every lane passes one
``.b32`` register per scale operand; the instruction reads

* A: in each quad (lanes ``4g .. 4g + 3``), the thread *pair* chosen by ``thread-id-a``
  (0: ``%laneid % 4`` in {0, 1}, 1: in {2, 3}); of the pair, the lower lane holds row ``g``,
  the upper row ``g + 8``;
* B: in each quad, the one lane with ``%laneid % 4 == thread-id-b``; it holds column ``g``;
* in each read register, bytes ``byte-id + j`` for ``j < X``: 1X one byte (byte-id 0..3),
  2X a byte pair (byte-id 0 or 2), 4X all four bytes (byte-id 0); byte ``byte-id + j`` holds
  block ``j``.

The PTX ISA states the lane choice in prose and draws the row within the pair only in its
figures; CUTLASS's ``SFALayout`` (``mma_traits_sm120.hpp``: thread mode ``(2,2,8):(8,0,1)``,
lane bit 0 is row + 8) and Triton's SM120 scale layout agree with the rule above, and
``tests/atoms/test_sm120_fragments.py`` checks it against both.  Nothing here ran on an SM120
GPU: the rule is the ISA's, cross-checked, not measured.

As CuTe does, :func:`scale_tv_layout` is the (lane, value) -> scale-matrix layout over all 32
lanes: lanes the selector does not read carry a copy of their partner's index (stride-0
modes), so the layout does not depend on ``thread-id``; :func:`scale_sources` is the exact,
selector-dependent answer.  Codomains are column-major like the operand layouts: ``scale_A``
as (M, X) (``m + 16 * j``), ``scale_B`` as (N, X) (``n + 8 * j``).
"""

from __future__ import annotations

import dataclasses

from nvatom.atoms.fragments import FragmentError, layout_from_function
from nvatom.layout import Layout

__all__ = [
    "BYTE_IDS",
    "THREAD_IDS",
    "ScaleSource",
    "reading_lanes",
    "scale_sources",
    "scale_tv_layout",
]

M, N = 16, 8
WARP = 32

#: Legal ``byte-id`` values per scale-vector count X (PTX ISA Table 37; ptxas 13.0 agrees).
BYTE_IDS: dict[int, tuple[int, ...]] = {1: (0, 1, 2, 3), 2: (0, 2), 4: (0,)}
#: Legal ``thread-id`` values per scale operand (PTX ISA Table 37; ptxas 13.0 agrees).
THREAD_IDS: dict[str, tuple[int, ...]] = {"SFA": (0, 1), "SFB": (0, 1, 2, 3)}


def _operand(op: str) -> str:
    key = op.upper()
    if key in ("A", "SFA"):
        return "SFA"
    if key in ("B", "SFB"):
        return "SFB"
    raise FragmentError(f"unknown scale operand '{op}' (SFA or SFB)")


def _row_a(lane: int) -> int:
    """Row of A whose scales lane ``lane`` holds (if it is read): pair member 0 -> g,
    member 1 -> g + 8."""
    return lane // 4 + 8 * (lane % 2)


def scale_tv_layout(op: str, scale_vec: int) -> Layout:
    """(lane, block) -> scale-matrix index, for ``.scale_vec::<scale_vec>X`` (1, 2 or 4).

    SFA: ``((2,2,8),X):((8,0,1),16)``; SFB: ``((4,8),X):((0,1),8)`` (X = 1 drops the value
    mode).  Value ``j`` sits in byte ``byte-id + j`` of the lane's register.
    """
    which = _operand(op)
    if scale_vec not in BYTE_IDS:
        raise FragmentError(f"scale_vec::{scale_vec}X does not exist (1X, 2X or 4X)")
    if which == "SFA":
        return layout_from_function((2, 2, 8), scale_vec,
                                    lambda t, j: _row_a(t) + M * j,
                                    f"SFA scale_vec::{scale_vec}X")
    return layout_from_function((4, 8), scale_vec, lambda t, j: t // 4 + N * j,
                                f"SFB scale_vec::{scale_vec}X")


def _check_selectors(which: str, scale_vec: int, byte_id: int, thread_id: int) -> None:
    if scale_vec not in BYTE_IDS:
        raise FragmentError(f"scale_vec::{scale_vec}X does not exist (1X, 2X or 4X)")
    if byte_id not in BYTE_IDS[scale_vec]:
        raise FragmentError(f"{which}: byte-id {byte_id} is not legal with scale_vec::"
                            f"{scale_vec}X (legal: {BYTE_IDS[scale_vec]})")
    if thread_id not in THREAD_IDS[which]:
        raise FragmentError(f"{which}: thread-id {thread_id} is not legal (legal: "
                            f"{THREAD_IDS[which]})")


def reading_lanes(op: str, thread_id: int) -> tuple[int, ...]:
    """Lanes whose scale register the instruction reads for this ``thread-id``."""
    which = _operand(op)
    _check_selectors(which, 1, 0, thread_id)
    if which == "SFA":
        return tuple(lane for lane in range(WARP) if (lane % 4) // 2 == thread_id)
    return tuple(lane for lane in range(WARP) if lane % 4 == thread_id)


@dataclasses.dataclass(frozen=True)
class ScaleSource:
    """One scale factor: scale-matrix entry (``mn``, ``block``) comes from ``byte`` of
    lane ``lane``'s scale register."""

    mn: int  # row of A (SFA) or column of B (SFB)
    block: int  # K block j < X
    lane: int
    byte: int


def scale_sources(op: str, scale_vec: int, byte_id: int = 0, thread_id: int = 0
                  ) -> tuple[ScaleSource, ...]:
    """Every scale factor of the operand with its source (lane, byte), ordered by (mn, block).

    Derived from :func:`scale_tv_layout`: the read lanes are those the ``thread-id`` selects,
    and value ``j`` of a lane is its byte ``byte-id + j``.
    """
    which = _operand(op)
    _check_selectors(which, scale_vec, byte_id, thread_id)
    tv = scale_tv_layout(which, scale_vec)
    rows = M if which == "SFA" else N
    out = []
    for lane in reading_lanes(which, thread_id):
        for j in range(scale_vec):
            idx = int(tv(lane, j))
            out.append(ScaleSource(idx % rows, idx // rows, lane, byte_id + j))
    got = sorted(out, key=lambda s: (s.mn, s.block))
    keys = [(s.mn, s.block) for s in got]
    if keys != [(mn, j) for mn in range(rows) for j in range(scale_vec)]:
        raise FragmentError(f"{which} scale_vec::{scale_vec}X thread-id {thread_id}: the read "
                            "lanes do not cover every scale factor exactly once")
    return tuple(got)
