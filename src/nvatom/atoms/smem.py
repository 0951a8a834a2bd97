"""Shared memory: swizzled tile layouts, and a bank-conflict counter for the instructions
that read and write them (ldmatrix, stmatrix, ld.shared, st.shared).

**Banks.**  Shared memory is 32 banks of 4 bytes: byte address ``a`` is in word ``a // 4``,
and word ``w`` is in bank ``w % 32``.  In one cycle the banks deliver one *wavefront*: at most
one word per bank, 128 bytes.  A warp instruction is split into *phases*; the lanes of a phase
are served together, in as many wavefronts as the busiest bank has distinct words to deliver
(lanes asking for the same word share it: multicast).  Phases (CUDA C++ Programming Guide,
"Shared Memory"; ldmatrix and stmatrix from the PTX ISA's "Warp-level matrix load/store
instructions"):

=========================== ===================================== ================
access                      phase                                 ideal wavefronts
=========================== ===================================== ================
ld/st.shared 8/16/32-bit    the whole warp                        1
ld/st.shared 64-bit         half-warps: lanes 0-15, 16-31         2
ld/st.shared 128-bit        quarter-warps: lanes 0-7, 8-15, ...   4
ldmatrix/stmatrix .xN       one matrix: lanes 8j..8j+7 supply     N
                            the addresses of its eight 16-byte
                            rows (.x1: lanes 0-7, .x2: 0-15)
=========================== ===================================== ================

**Definitions** (:func:`count_phases`)::

    wavefronts(phase)       = max over banks b of |{distinct word addresses in bank b}|  (>= 1)
    wavefronts(instruction) = sum over its phases with at least one active lane
    ideal(instruction)      = number of such phases
    conflicts               = wavefronts - ideal          (ncu: "bank conflicts")

**Swizzles.**  The swizzle modes (:data:`SMEM_SWIZZLES`, :data:`SW128_32B`), the canonical
tiles (:func:`smem_layout`) and SM100's canonical operand layouts (:data:`UMMA_SMEM_CANONICAL`)
live in :mod:`nvatom.tables.swizzles`, below atoms and descriptors that both read them; this
module re-exports them, so ``nvatom.atoms.smem`` stays the one place a user imports shared
memory from.

**Access patterns.**  :data:`ACCESSES` names each warp access by what the SASS calls it:
``ldsm.x1``, ``ldsm.x2``, ``ldsm.x4`` (+ ``.trans``), ``stsm.x1/x2/x4`` (+ ``.trans``),
``lds.32/64/128`` and ``sts.32/64/128``.  How a layout becomes per-lane addresses
(:func:`warp_addresses`):

* ``ldsm``/``stsm``: the layout maps a tile coordinate ``(row, col)`` to an element offset.
  Each matrix is an 8 x 8 block of 16-bit elements (8 x ``128/element_bits`` in general);
  ``.x4`` covers a 16 x 16 tile with matrix ``j`` at block ``(j % 2, j // 2)`` (``.x2``: a
  16 x 8 tile, blocks 0 and 1 down the rows; ``.x1``: one 8 x 8 block).  Lane ``i`` supplies
  row ``t = i % 8`` of matrix ``j = i // 8``.  Without ``.trans`` that 16-byte row is
  ``(8*(j%2) + t, 8*(j//2) + 0..7)`` (contiguous along ``col``); with ``.trans`` it is
  ``(8*(j%2) + 0..7, 8*(j//2) + t)`` (contiguous along ``row``).  Either way register ``j``
  of lane ``l`` receives tile elements ``(8*(j%2) + l//4, 8*(j//2) + 2*(l%4) + {0,1})``: the
  same fragment, whichever way the tile is stored.  Each instruction covers one tile; the
  layout's ``(rows, cols)`` is covered tile by tile, row blocks outer.
* ``lds.W``/``sts.W``: the layout maps ``i = lane + 32*k`` (the ``k``-th instruction) to the
  element offset that lane reads or writes, in units of ``element_bits`` (default ``W``).

The ldmatrix/stmatrix forms (spelling, ``.xN``, ``.trans``, gating) are read from the copy-atom
table (:mod:`nvatom.atoms.copy`); :class:`SmemAccess` adds the bank model's view (16-byte rows,
lanes ``8j..8j+7`` supplying matrix ``j``, one phase per matrix).

Sources: CUDA C++ Programming Guide, "Shared Memory" (32 banks of 4 bytes; 64/128-bit
accesses); PTX ISA, "ldmatrix", "stmatrix"; CUTLASS include/cute/swizzle.hpp,
include/cute/atom/mma_traits_sm90_gmma.hpp, include/cute/atom/copy_traits_sm75.hpp.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from typing import Any

from nvatom.atoms.copy import COPY_ATOMS, MatrixCopy
from nvatom.layout import ComposedLayout, Layout, parse_layout, rank, size
from nvatom.layout.svg import layout_svg
from nvatom.tables import swizzles
from nvatom.tables.swizzles import *  # noqa: F403  (re-exported: see the docstring)
from nvatom.tables.swizzles import SmemError, check_element_bits

__all__ = [
    "ACCESSES",
    "BANKS",
    "BANK_BYTES",
    "WARP",
    "WAVEFRONT_BYTES",
    "AccessReport",
    "BankReport",
    "LaneAddress",
    "PhaseReport",
    "SmemAccess",
    "WarpAccess",
    "bank_conflicts",
    "bank_conflicts_of_addresses",
    "banks_report",
    "count_phases",
    "default_phases",
    "matrix_tile_shape",
    "smem_access",
    "warp_addresses",
    *swizzles.__all__,
]

BANKS = 32
BANK_BYTES = 4
WAVEFRONT_BYTES = BANKS * BANK_BYTES
WARP = 32

# ============================================================================ access patterns


@dataclasses.dataclass(frozen=True)
class SmemAccess:
    """One warp-wide shared-memory instruction form, as the bank model sees it.

    ``lane_bytes`` is what one lane's address covers (a 16-byte row for ldmatrix/stmatrix);
    ``phases`` lists the lanes served together; a lane outside every phase supplies no
    address (ldmatrix ``.x1``: lanes 8-31).
    """

    name: str  # "ldsm.x4.trans", "lds.128", ...
    ptx: str  # "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16", "ld.shared.v4.b32", ...
    op: str  # "ld" | "st"
    lane_bytes: int
    matrices: int = 0  # ldmatrix/stmatrix: 1, 2 or 4; 0 for ld/st.shared
    trans: bool = False
    feature: str = ""  # nvatom.arch feature that gates it ("" for ld/st.shared)

    def __post_init__(self) -> None:
        if self.op not in ("ld", "st"):
            raise SmemError(f"{self.name}: op must be 'ld' or 'st'")
        if self.lane_bytes not in (1, 2, 4, 8, 16):
            raise SmemError(f"{self.name}: lane_bytes must be 1, 2, 4, 8 or 16")
        if self.matrices not in (0, 1, 2, 4) or (self.matrices and self.lane_bytes != 16):
            raise SmemError(f"{self.name}: a matrix access has 1, 2 or 4 matrices of 16 B rows")
        if self.trans and not self.matrices:
            raise SmemError(f"{self.name}: only ldmatrix/stmatrix have .trans")

    @property
    def is_matrix(self) -> bool:
        return self.matrices > 0

    @property
    def phases(self) -> tuple[tuple[int, ...], ...]:
        if self.matrices:
            return tuple(tuple(range(8 * j, 8 * j + 8)) for j in range(self.matrices))
        return default_phases(self.lane_bytes)

    @property
    def ideal_wavefronts(self) -> int:
        return len(self.phases)

    @property
    def registers(self) -> int:
        """32-bit registers per lane (ldmatrix ``.xN``: N; ld.shared.v4.b32: 4)."""
        return self.matrices or max(1, self.lane_bytes // 4)

    def describe(self) -> str:
        ph = self.phases
        if self.matrices:
            return (f"{self.ptx}: {len(ph)} phase{'s' if len(ph) > 1 else ''} (one per 8x8 "
                    f"matrix) of 8 lanes x 16 B rows")
        return (f"{self.ptx}: {len(ph)} phase{'s' if len(ph) > 1 else ''} of {len(ph[0])} "
                f"lanes x {self.lane_bytes} B")


def default_phases(lane_bytes: int) -> tuple[tuple[int, ...], ...]:
    """Lanes served together by ld/st.shared of ``lane_bytes`` per lane: the warp for up to 4
    bytes, half-warps for 8, quarter-warps for 16 (128 bytes per phase)."""
    per = WARP if lane_bytes <= BANK_BYTES else WAVEFRONT_BYTES // lane_bytes
    return tuple(tuple(range(p, p + per)) for p in range(0, WARP, per))


def _make_accesses() -> dict[str, SmemAccess]:
    # The ldmatrix/stmatrix forms (PTX spelling, .xN, .trans, gating feature) come from the
    # copy-atom table (nvatom.atoms.copy); the bank model adds the 16-byte rows and phases.
    out: dict[str, SmemAccess] = {}
    for atom in COPY_ATOMS:
        if not isinstance(atom, MatrixCopy) or atom.shape.name != "m8n8":
            continue
        short = "ldsm" if atom.op == "ldmatrix" else "stsm"
        name = f"{short}.x{atom.num}{'.trans' if atom.trans else ''}"
        out[name] = SmemAccess(name, atom.opcode, "ld" if atom.op == "ldmatrix" else "st", 16,
                               atom.num, atom.trans, atom.feature)
    for op, short in (("ld", "lds"), ("st", "sts")):
        for bits, vec in ((32, ""), (64, ".v2"), (128, ".v4")):
            name = f"{short}.{bits}"
            out[name] = SmemAccess(name, f"{op}.shared{vec}.b32", op, bits // 8)
    return out


#: Every named access pattern: ldsm.x{1,2,4}[.trans], stsm.x{1,2,4}[.trans],
#: lds.{32,64,128}, sts.{32,64,128}.
ACCESSES: dict[str, SmemAccess] = _make_accesses()


def smem_access(name: str | SmemAccess) -> SmemAccess:
    """Look an access pattern up by name (see :data:`ACCESSES`)."""
    if isinstance(name, SmemAccess):
        return name
    try:
        return ACCESSES[name]
    except (KeyError, TypeError):
        raise SmemError(
            f"unknown shared-memory access {name!r} (known: {', '.join(ACCESSES)})"
        ) from None


# ============================================================================ addresses


@dataclasses.dataclass(frozen=True)
class LaneAddress:
    """The bytes one lane reads or writes: ``nbytes`` from byte ``address``."""

    lane: int
    address: int
    nbytes: int
    coord: Any = None  # the layout coordinate of its first element, when it came from one

    @property
    def words(self) -> range:
        first = self.address // BANK_BYTES
        return range(first, (self.address + self.nbytes - 1) // BANK_BYTES + 1)

    @property
    def banks(self) -> tuple[int, ...]:
        return tuple(w % BANKS for w in self.words)

    @property
    def bank(self) -> int:
        """The bank of the first word."""
        return (self.address // BANK_BYTES) % BANKS

    def bank_text(self) -> str:
        b = self.banks
        return str(b[0]) if len(b) == 1 else f"{b[0]}-{b[-1]}"


@dataclasses.dataclass(frozen=True)
class WarpAccess:
    """One warp instruction: the address each lane supplies (None: the lane supplies none)."""

    label: str
    lanes: tuple[LaneAddress | None, ...]


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def _coord_text(c: Any) -> str:
    return f"({c[0]},{c[1]})" if isinstance(c, tuple) else str(c)


def _element_offsets(layout: Any, coords: Iterable[Any]) -> list[int]:
    return [int(layout(c)) for c in coords]


def _to_bytes(off: int, element_bits: int, base: int, where: str) -> int:
    bits = off * element_bits
    if bits % 8:
        raise SmemError(f"{where}: element offset {off} of {element_bits}-bit elements is not "
                        "at a byte boundary")
    addr = base + bits // 8
    if addr < 0:
        raise SmemError(f"{where}: element offset {off} gives the negative byte address {addr}; "
                        "pass a base address")
    return addr


def _as_layout(layout: Any) -> Layout | ComposedLayout:
    if isinstance(layout, str):
        return parse_layout(layout)
    if not isinstance(layout, (Layout, ComposedLayout)):
        raise SmemError(f"expected a Layout, a ComposedLayout or CuTe notation, got {layout!r}")
    return layout


def matrix_tile_shape(access: SmemAccess, element_bits: int = 16) -> tuple[int, int]:
    """``(rows, cols)`` of the tile one ldmatrix/stmatrix instruction covers."""
    n = 128 // element_bits
    rb, cb = {1: (1, 1), 2: (2, 1), 4: (2, 2)}[access.matrices]
    return (n * rb, 8 * cb) if access.trans else (8 * rb, n * cb)


def _matrix_instructions(
    layout: Any, access: SmemAccess, element_bits: int, base: int
) -> list[WarpAccess]:
    e = element_bits
    if 128 % e:
        raise SmemError(f"{access.name}: {e}-bit elements do not pack a 16-byte row")
    if access.trans and e != 16:
        raise SmemError(f"{access.name}: .trans transposes 16-bit elements; got {e}-bit ones")
    n = 128 // e
    if rank(layout) != 2:
        raise SmemError(f"{access.name}: the layout must be rank 2 (row, col); {layout} has "
                        f"rank {rank(layout)}")
    R, C = size(layout[0]), size(layout[1])
    tr, tc = matrix_tile_shape(access, e)
    if R % tr or C % tc:
        raise SmemError(f"{access.name}: one instruction covers a {tr} x {tc} tile of "
                        f"{e}-bit elements; the layout {layout} is {R} x {C}")
    out: list[WarpAccess] = []
    for r0 in range(0, R, tr):
        for c0 in range(0, C, tc):
            lanes: list[LaneAddress | None] = [None] * WARP
            for lane in range(8 * access.matrices):
                j, t = divmod(lane, 8)
                if access.trans:
                    coords = [(r0 + n * (j % 2) + u, c0 + 8 * (j // 2) + t) for u in range(n)]
                else:
                    coords = [(r0 + 8 * (j % 2) + t, c0 + n * (j // 2) + u) for u in range(n)]
                offs = _element_offsets(layout, coords)
                if offs != list(range(offs[0], offs[0] + n)):
                    along = "row" if access.trans else "col"
                    raise SmemError(
                        f"{access.name}: lane {lane} supplies the 16-byte row of matrix {j} "
                        f"starting at {_coord_text(coords[0])}, but its {n} elements along "
                        f"{along} are not contiguous in {layout} (offsets "
                        f"{', '.join(map(str, offs))}); "
                        + ("use .trans for a tile contiguous along row" if not access.trans
                           else "drop .trans for a tile contiguous along col")
                    )
                where = f"{access.name} lane {lane}"
                addr = _to_bytes(offs[0], e, base, where)
                lanes[lane] = LaneAddress(lane, addr, 16, coords[0])
            out.append(WarpAccess(f"tile at ({r0},{c0})", tuple(lanes)))
    return out


def _vector_instructions(
    layout: Any, access: SmemAccess, element_bits: int, base: int
) -> list[WarpAccess]:
    n = size(layout)
    out: list[WarpAccess] = []
    for k in range(0, (n + WARP - 1) // WARP):
        lanes: list[LaneAddress | None] = [None] * WARP
        for lane in range(WARP):
            i = k * WARP + lane
            if i >= n:
                break
            addr = _to_bytes(int(layout(i)), element_bits, base, f"{access.name} lane {lane}")
            lanes[lane] = LaneAddress(lane, addr, access.lane_bytes, i)
        last = min(n, k * WARP + WARP) - 1
        out.append(WarpAccess(f"instruction {k} (indices {k * WARP}..{last})", tuple(lanes)))
    return out


def warp_addresses(
    layout: Any,
    access: str | SmemAccess,
    *,
    element_bits: int | None = None,
    base: int = 0,
) -> list[WarpAccess]:
    """The per-lane byte addresses of every instruction that ``access`` needs to cover
    ``layout`` (the conventions are in the module doc).  ``element_bits`` defaults to 16 for
    ldmatrix/stmatrix and to the access width for ld/st.shared; ``base`` is the byte address
    of element offset 0 (keep it aligned to the swizzle's 1024-byte period)."""
    acc = smem_access(access)
    lay = _as_layout(layout)
    e = check_element_bits(element_bits if element_bits is not None
                            else (16 if acc.is_matrix else 8 * acc.lane_bytes))
    if isinstance(base, bool) or not isinstance(base, int) or base < 0:
        raise SmemError(f"base must be a non-negative int, got {base!r}")
    if acc.is_matrix:
        return _matrix_instructions(lay, acc, e, base)
    return _vector_instructions(lay, acc, e, base)


# ============================================================================ counting


@dataclasses.dataclass(frozen=True)
class PhaseReport:
    """The lanes of one phase and the wavefronts they take."""

    index: int
    lanes: tuple[LaneAddress, ...]  # active lanes only
    wavefronts: int

    @property
    def replays(self) -> int:
        """Wavefronts beyond the first (0 for a conflict-free phase)."""
        return max(0, self.wavefronts - 1)

    @property
    def ideal(self) -> int:
        """1 for a phase with active lanes (it takes one wavefront at least), else 0."""
        return 1 if self.lanes else 0

    def bank_words(self) -> dict[int, set[int]]:
        """bank -> the distinct word addresses the phase needs from it."""
        return _bank_words(self.lanes)


def _bank_words(lanes: Iterable[LaneAddress]) -> dict[int, set[int]]:
    out: dict[int, set[int]] = {}
    for la in lanes:
        for w in la.words:
            out.setdefault(w % BANKS, set()).add(w)
    return out


class _Totals:
    """``wavefronts`` and ``ideal`` summed over a report's parts (an instruction's phases, a
    layout's instructions), and ``conflicts``, the wavefronts beyond the ideal."""

    def _parts(self) -> Sequence[PhaseReport | AccessReport]:
        raise NotImplementedError

    @property
    def wavefronts(self) -> int:
        return sum(p.wavefronts for p in self._parts())

    @property
    def ideal(self) -> int:
        return sum(p.ideal for p in self._parts())

    @property
    def conflicts(self) -> int:
        return self.wavefronts - self.ideal


@dataclasses.dataclass(frozen=True)
class AccessReport(_Totals):
    """The wavefronts of one warp instruction."""

    label: str
    phases: tuple[PhaseReport, ...]

    def _parts(self) -> tuple[PhaseReport, ...]:
        return self.phases


def count_phases(
    lanes: Sequence[LaneAddress | None],
    phases: Sequence[Sequence[int]],
    label: str = "",
) -> AccessReport:
    """Wavefronts of one instruction: for each phase, the most distinct words any one bank
    must deliver (multicast of the same word is free); phases without lanes cost nothing."""
    out = []
    for k, ph in enumerate(phases):
        active = tuple(la for i in ph if i < len(lanes) and (la := lanes[i]) is not None)
        for la in active:
            if la.address % la.nbytes:
                raise SmemError(f"{label or 'access'}: lane {la.lane} address {la.address} is "
                                f"not aligned to its {la.nbytes}-byte access")
        wf = max((len(s) for s in _bank_words(active).values()), default=0)
        out.append(PhaseReport(k, active, wf))
    return AccessReport(label, tuple(out))


def bank_conflicts_of_addresses(
    addresses: Sequence[int | None],
    width_bits: int,
    *,
    phases: Sequence[Sequence[int]] | None = None,
    label: str = "",
) -> AccessReport:
    """The generic entry point: one warp instruction in which lane ``i`` accesses
    ``width_bits`` (8, 16, 32, 64 or 128) from byte ``addresses[i]`` (None: inactive).
    ``phases`` defaults to the ld/st.shared phases of that width."""
    if width_bits not in (8, 16, 32, 64, 128):
        raise SmemError(f"width_bits must be 8, 16, 32, 64 or 128, got {width_bits!r}")
    if len(addresses) > WARP:
        raise SmemError(f"a warp has {WARP} lanes; got {len(addresses)} addresses")
    nbytes = width_bits // 8
    lanes = []
    for i, a in enumerate(addresses):
        if a is not None and (isinstance(a, bool) or not isinstance(a, int) or a < 0):
            raise SmemError(f"lane {i}: address must be a non-negative int or None, got {a!r}")
        lanes.append(None if a is None else LaneAddress(i, a, nbytes))
    return count_phases(lanes, phases if phases is not None else default_phases(nbytes), label)


@dataclasses.dataclass(frozen=True)
class BankReport(_Totals):
    """Bank conflicts of an access pattern over a whole shared-memory layout."""

    access: SmemAccess
    layout: Layout | ComposedLayout
    element_bits: int
    base: int
    instructions: tuple[AccessReport, ...]

    def _parts(self) -> tuple[AccessReport, ...]:
        return self.instructions

    def format(self, max_detailed: int | None = None) -> str:
        """A readable table: per instruction, per phase, the lanes' addresses and banks and
        the phase's wavefronts; then the totals.  Instructions past ``max_detailed`` get one
        line each."""
        a = self.access
        lines = [
            f"{a.name}: {a.describe()}",
            f"layout: {self.layout}  ({self.element_bits}-bit elements, base address "
            f"{self.base})",
        ]
        if a.is_matrix:
            lines.append(
                "lane i supplies row i%8 of matrix i//8; matrix j is block (j%2, j//2) of the "
                f"{'x'.join(map(str, matrix_tile_shape(a, self.element_bits)))} tile"
                + (" (.trans: rows run down the tile's rows)" if a.trans else "")
            )
        else:
            lines.append("lane l of instruction k accesses layout(l + 32*k)")
        lines.append("")
        for k, ins in enumerate(self.instructions):
            lines.append(f"access {k}: {ins.label}: {_plural(ins.wavefronts, 'wavefront')} = "
                         f"{ins.ideal} ideal + {_plural(ins.conflicts, 'conflict')}")
            if max_detailed is not None and k >= max_detailed:
                continue
            for ph in ins.phases:
                if not ph.lanes:
                    continue
                lo, hi = ph.lanes[0].lane, ph.lanes[-1].lane
                what = f" (matrix {ph.index})" if a.is_matrix else ""
                lines.append(f"  phase {ph.index}: lanes {lo}-{hi}{what}: "
                             f"{_plural(ph.wavefronts, 'wavefront')} "
                             f"({_plural(ph.replays, 'replay')})")
                for chunk in range(0, len(ph.lanes), 16):
                    part = ph.lanes[chunk:chunk + 16]
                    w = 1 + max(5, *(max(len(str(la.address)), len(la.bank_text()))
                                     for la in part))
                    lines.append("    lane " + "".join(f"{la.lane:>{w}}" for la in part))
                    lines.append("    addr " + "".join(f"{la.address:>{w}}" for la in part))
                    lines.append("    bank " + "".join(f"{la.bank_text():>{w}}" for la in part))
        ratio = self.wavefronts / self.ideal if self.ideal else 0.0
        lines.append("")
        lines.append(f"total: {_plural(len(self.instructions), 'instruction')}, "
                     f"{_plural(self.wavefronts, 'wavefront')} = {self.ideal} ideal + "
                     f"{_plural(self.conflicts, 'conflict')} ({ratio:.2f}x ideal)")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.format()

    @property
    def svg(self) -> str:
        """The tile's picture: offsets, cells coloured by the bank of each element's first
        byte (:func:`nvatom.layout.svg.layout_svg`); Jupyter shows it."""
        return layout_svg(self.layout, element_bits=self.element_bits, base=self.base,
                          title=f"{self.access.name} over {self.layout}: "
                          f"{self.wavefronts} wavefronts, {self.conflicts} conflicts")

    def _repr_svg_(self) -> str:
        return self.svg


#: The most shared memory one thread block can address (228 KiB on sm_90 / sm_100; the
#: CUDA C++ Programming Guide's compute-capability table): a layout larger than this cannot
#: be a shared-memory tile, and walking it would cost time in proportion to a user's number.
SMEM_BYTES_LIMIT = 228 * 1024


def bank_conflicts(
    layout: Any,
    access: str | SmemAccess,
    *,
    element_bits: int | None = None,
    base: int = 0,
) -> BankReport:
    """Count the wavefronts and bank conflicts of ``access`` covering ``layout`` (a Layout,
    ComposedLayout or CuTe notation; conventions in the module doc)."""
    acc = smem_access(access)
    lay = _as_layout(layout)
    e = element_bits if element_bits is not None else (16 if acc.is_matrix
                                                       else 8 * acc.lane_bytes)
    n = size(lay)
    if n * e > 8 * SMEM_BYTES_LIMIT:  # checked before walking every element
        raise SmemError(f"a layout of {n} {e}-bit elements ({n * e // 8} bytes) is more than "
                        f"shared memory holds (the limit is {SMEM_BYTES_LIMIT} bytes = 228 KiB)")
    instrs = warp_addresses(lay, acc, element_bits=e, base=base)
    reports = tuple(count_phases(w.lanes, acc.phases, w.label) for w in instrs)
    return BankReport(acc, lay, e, base, reports)


def banks_report(
    atom_name: str,
    smem_layout_text: str,
    *,
    element_bits: int | None = None,
    base: int = 0,
    max_detailed: int | None = 8,
) -> str:
    """The text the CLI prints for ``atom_name`` (a key of :data:`ACCESSES`: ``ldsm.x1``,
    ``ldsm.x2``, ``ldsm.x4``, ``ldsm.x4.trans``, ``stsm.x4``, ``lds.32``, ``lds.64``,
    ``lds.128``, ...) over a layout in CuTe notation (``Sw<3,3,3> o 0 o (16,64):(64,1)``)."""
    return bank_conflicts(smem_layout_text, atom_name, element_bits=element_bits,
                          base=base).format(max_detailed)
