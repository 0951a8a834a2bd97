"""Tensor memory (TMEM) of SM100-family GPUs and its copy atoms: ``atom.tmem_load``
(``tcgen05.ld``), ``atom.tmem_store`` (``tcgen05.st``), ``atom.s2t_copy`` (``tcgen05.cp``), and
the allocation / synchronisation instructions around them.

TMEM is 128 lanes x 512 columns of 32-bit cells per CTA.  A TMEM address is ``lane << 16 |
column`` (PTX ISA "Tensor Memory Addressing").  Columns are allocated per CTA in powers of two
from 32 to 512 (``tcgen05.alloc``, written to shared memory), freed with ``tcgen05.dealloc``;
``tcgen05.relinquish_alloc_permit`` promises no further allocation.  A warp may access only
the 32-lane quarter ``32 * (warp_id % 4)`` of TMEM.

``tcgen05.ld/st.sync.aligned.<shape>.x<N>[.pack::16b|.unpack::16b].b32`` (PTX ISA "tcgen05.ld",
"Matrix fragments for tcgen05.ld/st"; docs/spec-deviations.md, "SM100 tcgen05"): one warp moves, per
repetition, a
``lanes x bits`` block: 32x32b, 16x64b, 16x128b, 16x256b, or two 16x32b halves
(``16x32bx2``) ``immHalfSplitoff`` columns apart.  N = 1..128 with at most 128 registers per
thread.  ``.pack::16b`` packs the 16-bit values of two adjacent columns into one register
(the block covers twice the columns); ``.unpack::16b`` is its inverse for st.

The (thread, value) layouts below map (lane-of-warp thread, register) to the TMEM cell offset
``lane * 2^16 + column`` relative to the warp's base address; they are built with the layout
algebra from one row per shape (:data:`LDST_SHAPES`).  They are the bare instruction's: the
PTX ISA's per-lane rule of each shape is written out in tests/atoms/test_copy_isa_layouts.py
and compared lane by lane; CUTLASS's bit-level ``Copy_Traits<SM100_TMEM_LOAD_*>`` layouts
(cute/atom/copy_traits_sm100.hpp) are a cross-check in tests/atoms/test_sm100_tmem.py.

``tcgen05.cp.cta_group::N.<shape>[.<decompress>] [taddr], s-desc`` copies shared memory (read
through a matrix descriptor) into TMEM: shapes 128x256b, 4x256b, 128x128b,
64x128b.warpx2::{02_13,01_23}, 32x128b.warpx4; decompression ``.b8x16.b6x16_p32`` and
``.b8x16.b4x16_p64`` (6/4-bit values padded in shared memory, unpacked to 8 bits).

The specification's ``atom.tmem_to_smem_copy`` and ``tcgen05.cp.async`` tmem->tmem atoms do
not exist in the ISA (ptxas: ``Arguments mismatch for instruction 'tcgen05.cp'``;
docs/spec-deviations.md, "SM100 tcgen05"):
:func:`tmem_to_smem_path` names the real path, ``tcgen05.ld`` then ``st.shared``.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from typing import Any

from nvatom.arch import PtxVersion, Target, feature, target
from nvatom.atoms.interfaces import AsyncCopyAtom, AtomVerificationError, CopyAtom
from nvatom.errors import NvatomError
from nvatom.layout import Layout

__all__ = [
    "COLUMNS",
    "CP_DECOMPRESS",
    "CP_SHAPES",
    "LANES",
    "LANE_STRIDE",
    "LDST_SHAPES",
    "S2tCopyAtom",
    "TmemCopyAtom",
    "TmemError",
    "alloc_columns",
    "alloc_instruction",
    "check_alloc_columns",
    "dealloc_instruction",
    "relinquish_instruction",
    "shift_instruction",
    "tmem_address",
    "tmem_atom",
    "tmem_atoms",
    "tmem_copy_atom",
    "tmem_to_smem_path",
]


class TmemError(NvatomError):
    """An impossible tensor-memory operation (names the offending value)."""


LANES = 128
COLUMNS = 512
LANE_STRIDE = 1 << 16  # lane field of a TMEM address
MAX_REGS = 128


def tmem_address(lane: int, column: int) -> int:
    if not 0 <= lane < LANES or not 0 <= column < COLUMNS:
        raise TmemError(f"TMEM has {LANES} lanes x {COLUMNS} columns; no cell ({lane}, {column})")
    return lane * LANE_STRIDE | column


def alloc_columns(ncols: int) -> int:
    """The columns ``tcgen05.alloc`` takes for ``ncols`` columns: the next power of two,
    at least 32 (checked against :data:`COLUMNS` by :func:`check_alloc_columns`)."""
    return max(32, 1 << (ncols - 1).bit_length())


def check_alloc_columns(ncols: int) -> int:
    """tcgen05.alloc/dealloc column counts: a power of two from 32 to 512."""
    if isinstance(ncols, bool) or not isinstance(ncols, int) or ncols < 32 or ncols > 512 or \
            ncols & (ncols - 1):
        raise TmemError(f"tcgen05.alloc takes a power of two from 32 to 512 columns, got {ncols!r}")
    return ncols


def _cta(cta_group: int) -> str:
    if cta_group not in (1, 2):
        raise TmemError(f"cta_group is 1 or 2, got {cta_group!r}")
    return f"cta_group::{cta_group}"


def alloc_instruction(dst_smem: str, ncols: int | str, cta_group: int = 1) -> str:
    """``tcgen05.alloc...shared::cta.b32 [dst], ncols;`` (the address lands in shared memory)."""
    if not isinstance(ncols, str):
        check_alloc_columns(ncols)
    return f"tcgen05.alloc.{_cta(cta_group)}.sync.aligned.shared::cta.b32 [{dst_smem}], {ncols};"


def dealloc_instruction(taddr: str, ncols: int | str, cta_group: int = 1) -> str:
    if not isinstance(ncols, str):
        check_alloc_columns(ncols)
    return f"tcgen05.dealloc.{_cta(cta_group)}.sync.aligned.b32 {taddr}, {ncols};"


def relinquish_instruction(cta_group: int = 1) -> str:
    return f"tcgen05.relinquish_alloc_permit.{_cta(cta_group)}.sync.aligned;"


def shift_instruction(taddr: str, cta_group: int = 1) -> str:
    """``tcgen05.shift.cta_group::N.down [taddr];`` (PTX ISA "tcgen05.shift"): asynchronously
    shift the rows of the matrix at ``taddr`` down by one lane (issued by one thread, tracked
    by tcgen05.commit; ptxas 13.0 takes it on the 'a' targets only: feature
    ``tcgen05.shift``)."""
    return f"tcgen05.shift.{_cta(cta_group)}.down [{taddr}];"


# ============================================================================ tcgen05.ld / st


class _Tcgen05:
    """What the TMEM atoms share: they exist where the ``tcgen05`` feature does."""

    name: str  # the atom's (a field of each subclass)

    def available_on(self, t: Target | str) -> bool:
        return feature("tcgen05").available_on(target(t))

    @property
    def min_ptx(self) -> PtxVersion:
        return feature("tcgen05").min_ptx

    def require(self, target_: Any) -> Target:
        """The target, or the error that the atom is not available there (and why)."""
        t = target(target_)
        if not feature("tcgen05").available_on(t):
            raise AtomVerificationError(f"atom '{self.name}' is not available on {t.name}: it "
                                        f"needs tcgen05 ({feature('tcgen05').rule})")
        return t


@dataclasses.dataclass(frozen=True)
class LdStShape:
    """One tcgen05.ld/st shape: ``lanes`` x ``bits`` per repetition; registers per thread per
    repetition; the x1 thread layout and register layout as (lane, column) strides."""

    name: str
    lanes: int
    bits: int
    regs: int
    thr: tuple[tuple[int, ...], tuple[tuple[int, int], ...]]  # shape, (dlane, dcol) strides
    val: tuple[tuple[int, ...], tuple[tuple[int, int], ...]]  # within one repetition

    @property
    def columns(self) -> int:
        """Columns one repetition covers (unpacked)."""
        return self.bits // 32 if self.name != "16x32bx2" else 1


#: PTX ISA "Matrix fragments for tcgen05.ld/st"; CUTLASS Copy_Traits<SM100_TMEM_LOAD_*>.
LDST_SHAPES: dict[str, LdStShape] = {s.name: s for s in (
    # thread t: lane t
    LdStShape("32x32b", 32, 32, 1, ((32,), ((1, 0),)), ((1,), ((0, 0),))),
    # thread t = t0 + 2 t1 + 4 t2: lane t2 + 8 t0, column t1
    LdStShape("16x64b", 16, 64, 1, ((2, 2, 8), ((8, 0), (0, 1), (1, 0))), ((1,), ((0, 0),))),
    # thread t = t0 + 4 t1: lane t1, column t0; register 1 at lane + 8
    LdStShape("16x128b", 16, 128, 2, ((4, 8), ((0, 1), (1, 0))), ((2,), ((8, 0),))),
    # thread t = t0 + 4 t1: lane t1, columns 2 t0, 2 t0 + 1; registers 2, 3 at lane + 8
    LdStShape("16x256b", 16, 256, 4, ((4, 8), ((0, 2), (1, 0))), ((2, 2), ((0, 1), (8, 0)))),
    # thread t = t0 + 16 t1: lane t0, column t1 * immHalfSplitoff (stride set per atom)
    LdStShape("16x32bx2", 16, 32, 1, ((16, 2), ((1, 0), (0, -1))), ((1,), ((0, 0),))),
)}


@dataclasses.dataclass(frozen=True)
class TmemCopyAtom(_Tcgen05, CopyAtom):
    """``atom.tmem_load`` / ``atom.tmem_store``: one tcgen05.ld / tcgen05.st form."""

    direction: str  # "load" (tmem -> rmem) or "store" (rmem -> tmem)
    shape: str
    num: int = 1
    pack16: bool = False  # .pack::16b (load) / .unpack::16b (store)
    half_split: int | None = None  # 16x32bx2: immHalfSplitoff in columns

    def __post_init__(self) -> None:
        if self.direction not in ("load", "store"):
            raise TmemError(f"direction is 'load' or 'store', got {self.direction!r}")
        s = LDST_SHAPES.get(self.shape)
        if s is None:
            raise TmemError(f"no tcgen05 shape '{self.shape}' (one of {', '.join(LDST_SHAPES)})")
        if self.num not in (1, 2, 4, 8, 16, 32, 64, 128):
            raise TmemError(f".x{self.num}: the repetition count is a power of two 1..128")
        if s.regs * self.num > MAX_REGS:
            raise TmemError(f"{self.shape}.x{self.num} needs {s.regs * self.num} registers per "
                            f"thread; at most {MAX_REGS} (.x{MAX_REGS // s.regs} is the largest)")
        if (self.shape == "16x32bx2") != (self.half_split is not None):
            raise TmemError("16x32bx2, and only it, takes immHalfSplitoff (half_split)")
        if self.half_split is not None and not 0 <= self.half_split < COLUMNS:
            raise TmemError(f"immHalfSplitoff {self.half_split} is not a column offset")

    @property
    def mnemonic(self) -> str:
        return "atom.tmem_load" if self.direction == "load" else "atom.tmem_store"

    @property
    def name(self) -> str:
        p = (".pack::16b" if self.direction == "load" else ".unpack::16b") if self.pack16 else ""
        split = f"@{self.half_split}" if self.half_split is not None else ""
        return f"{self.mnemonic}<{self.shape}.x{self.num}{p}{split}>"

    @property
    def spec(self) -> LdStShape:
        return LDST_SHAPES[self.shape]

    @property
    def registers(self) -> int:
        return self.spec.regs * self.num

    @property
    def lanes(self) -> int:
        return self.spec.lanes

    @property
    def columns(self) -> int:
        """TMEM columns the instruction covers (from the base column)."""
        s = self.spec
        cols = s.columns * self.num * (2 if self.pack16 else 1)
        if self.half_split is not None:  # the second half starts immHalfSplitoff further
            cols += self.half_split
        return cols

    @property
    def element_bits(self) -> int:
        return 16 if self.pack16 else 32

    @property
    def opcode(self) -> str:
        op = "tcgen05.ld" if self.direction == "load" else "tcgen05.st"
        p = (".pack::16b" if self.direction == "load" else ".unpack::16b") if self.pack16 else ""
        return f"{op}.sync.aligned.{self.shape}.x{self.num}{p}.b32"

    def instruction(self, regs: Sequence[str], taddr: str) -> str:
        if len(regs) != self.registers:
            raise TmemError(f"{self.name} moves {self.registers} registers per thread, got "
                            f"{len(regs)}")
        vec = "{" + ", ".join(str(r) for r in regs) + "}"
        addr = f"[{taddr}]" + (f", {self.half_split}" if self.half_split is not None else "")
        if self.direction == "load":
            return f"{self.opcode} {vec}, {addr};"
        return f"{self.opcode} {addr}, {vec};"

    # ------------------------------------------------------------------ layouts
    def tv_layout(self) -> Layout:
        """(thread, value) -> TMEM cell offset ``dlane * 2^16 + dcolumn`` from the warp's base
        address.  Values are registers (32-bit) or, with pack16, 16-bit halves: value ``2r +
        h`` is half ``h`` of register ``r`` and sits in the low 16 bits of its column."""
        s = self.spec
        pk = 2 if self.pack16 else 1
        split = self.half_split if self.half_split is not None else 0

        def cell(d: tuple[int, int]) -> int:
            dl, dc = d
            return dl * LANE_STRIDE + (split if dc == -1 else dc * pk)

        thr_shape, thr_d = s.thr
        val_shape, val_d = s.val
        rep_cols = s.columns * pk
        vshape: tuple[int, ...] = (*val_shape, self.num)
        vstride: tuple[int, ...] = (*(cell(d) for d in val_d), rep_cols)
        if self.pack16:
            vshape, vstride = (2, *vshape), (1, *vstride)
        return Layout((thr_shape, vshape), (tuple(cell(d) for d in thr_d), vstride))

    def coords(self, thread: int, value: int) -> tuple[int, int]:
        """(lane, column) relative to the warp's base of one (thread, value)."""
        off = self.tv_layout()(thread, value)
        return off // LANE_STRIDE, off % LANE_STRIDE

    # ------------------------------------------------------------------ availability
    @property
    def feature(self) -> str:
        return "tcgen05"

    def verify_instance(self, target_: Any, use: Any) -> None:
        """A use is (src residency, dst residency, element bits)."""
        self.require(target_)
        src, dst, bits = use
        want = ("tmem", "rmem") if self.direction == "load" else ("rmem", "tmem")
        if (src, dst) != want:
            raise AtomVerificationError(f"'{self.name}' copies {want[0]} -> {want[1]}, but got "
                                        f"src: {src}, dst: {dst}")
        if bits != self.element_bits:
            raise AtomVerificationError(f"'{self.name}' moves {self.element_bits}-bit elements, "
                                        f"but got {bits}-bit ones")


def tmem_copy_atom(direction: str, shape: str, num: int = 1, pack16: bool = False,
                   half_split: int | None = None) -> TmemCopyAtom:
    return TmemCopyAtom(direction, shape, num, pack16, half_split)


# ============================================================================ tcgen05.cp

#: tcgen05.cp shapes: (rows, bits per row) and the warps that must issue (PTX ISA tcgen05.cp).
CP_SHAPES: dict[str, tuple[int, int]] = {
    "128x256b": (128, 256),
    "4x256b": (4, 256),
    "128x128b": (128, 128),
    "64x128b.warpx2::02_13": (64, 128),
    "64x128b.warpx2::01_23": (64, 128),
    "32x128b.warpx4": (32, 128),
}
#: Decompression: (source bits per element in smem, with padding) -> 8-bit TMEM elements.
CP_DECOMPRESS: dict[str, int] = {"b8x16.b6x16_p32": 6, "b8x16.b4x16_p64": 4}


@dataclasses.dataclass(frozen=True)
class S2tCopyAtom(_Tcgen05, CopyAtom, AsyncCopyAtom):
    """``atom.s2t_copy``: ``tcgen05.cp`` shared memory (by descriptor) -> TMEM, asynchronous
    (completion through ``tcgen05.commit``)."""

    shape: str
    cta_group: int = 1
    decompress: str | None = None

    def __post_init__(self) -> None:
        if self.shape not in CP_SHAPES:
            raise TmemError(f"no tcgen05.cp shape '{self.shape}' (one of "
                            f"{', '.join(CP_SHAPES)}; 64x128b and 32x128b need their .warpx "
                            "qualifier)")
        _cta(self.cta_group)
        if self.decompress is not None and self.decompress not in CP_DECOMPRESS:
            raise TmemError(f"no tcgen05.cp decompression '{self.decompress}' (one of "
                            f"{', '.join(CP_DECOMPRESS)})")

    mnemonic = "atom.s2t_copy"

    @property
    def name(self) -> str:
        d = f".{self.decompress}" if self.decompress else ""
        return f"atom.s2t_copy<cta_group::{self.cta_group}.{self.shape}{d}>"

    @property
    def opcode(self) -> str:
        d = f".{self.decompress}" if self.decompress else ""
        return f"tcgen05.cp.cta_group::{self.cta_group}.{self.shape}{d}"

    def instruction(self, taddr: str, sdesc: str) -> str:
        return f"{self.opcode} [{taddr}], {sdesc};"

    @property
    def rows(self) -> int:
        return CP_SHAPES[self.shape][0]

    @property
    def columns(self) -> int:
        """TMEM columns written per lane (32-bit cells)."""
        return CP_SHAPES[self.shape][1] // 32

    @property
    def smem_bytes(self) -> int:
        """Bytes written to TMEM (rows x row bits / 8); with decompression the shared-memory
        source holds the same number of 6- or 4-bit values, padded per group of 16."""
        rows, bits = CP_SHAPES[self.shape]
        return rows * bits // 8

    def verify_instance(self, target_: Any, use: Any) -> None:
        self.require(target_)
        src, dst = use[:2]
        if (src, dst) != ("smem", "tmem"):
            raise AtomVerificationError(f"'{self.name}' copies smem -> tmem, but got src: {src},"
                                        f" dst: {dst}")


_SPEC_ONLY = {
    "atom.tmem_to_smem_copy": "tcgen05.cp copies shared memory -> TMEM only",
    "atom.tcgen05.cp": "tcgen05.cp has no TMEM -> TMEM (cluster-scope) form",
}


def tmem_to_smem_path() -> tuple[str, str, str]:
    """The real TMEM -> shared memory path: ld to registers, wait, store to shared memory."""
    return ("tcgen05.ld.sync.aligned.<shape>.x<N>.b32", "tcgen05.wait::ld.sync.aligned",
            "st.shared.b32 / stmatrix")


def spec_only_atom(name: str) -> None:
    """Raise for the spec's copy atoms the ISA does not have (docs/spec-deviations.md, "SM100
    tcgen05")."""
    why = _SPEC_ONLY.get(name)
    if why is None:
        raise TmemError(f"'{name}' is not a TMEM copy atom")
    ld, wait, st = tmem_to_smem_path()
    raise TmemError(f"'{name}' does not exist in the PTX ISA ({why}; ptxas: \"Arguments "
                    f"mismatch for instruction 'tcgen05.cp'\"); use {ld}, {wait}, then {st}")


def tmem_atom(name: str) -> TmemCopyAtom | S2tCopyAtom:
    """Parse ``atom.tmem_load<32x32b.x4[.pack::16b]>``, ``atom.tmem_store<16x32bx2.x2@8>``
    or ``atom.s2t_copy<cta_group::1.128x256b[.b8x16.b4x16_p64]>`` (the names atoms print)."""

    s = name.strip()
    m = re.fullmatch(  # numbers of at most 9 digits (int() of 4,300+ digits raises)
        r"atom\.tmem_(load|store)<(\w+)\.x(\d{1,9})(\.(?:un)?pack::16b)?(?:@(\d{1,9}))?>", s)
    if m:
        d = m.group(1)
        if m.group(4) and (m.group(4) == ".pack::16b") != (d == "load"):
            raise TmemError(f"'{name}': loads take .pack::16b, stores .unpack::16b")
        atom = TmemCopyAtom(d, m.group(2), int(m.group(3)), bool(m.group(4)),
                            int(m.group(5)) if m.group(5) else None)
        return atom
    m = re.fullmatch(r"atom\.s2t_copy<cta_group::([12])\.(.+?)(?:\.(b8x16\.b[46]x16_p(?:32|64)))?>",
                     s)
    if m:
        return S2tCopyAtom(m.group(2), int(m.group(1)), m.group(3))
    if s in _SPEC_ONLY:
        spec_only_atom(s)
    raise TmemError(f"'{name}' is not a TMEM atom name (e.g. atom.tmem_load<32x32b.x4>, "
                    "atom.s2t_copy<cta_group::1.128x256b>)")


def tmem_atoms(target_: Target | str | None = None, *, mnemonic: str | None = None
               ) -> list[TmemCopyAtom | S2tCopyAtom]:
    """Every TMEM copy atom form, filtered by target and mnemonic: each tcgen05.ld / st shape
    at every ``.xN`` (at most :data:`MAX_REGS` registers) with and without ``.pack::16b``
    (``16x32bx2`` with a half-split of 16 columns; any column is legal), and each tcgen05.cp
    shape per CTA group and decompression."""
    out: list[TmemCopyAtom | S2tCopyAtom] = []
    for direction in ("load", "store"):
        for shape, spec in LDST_SHAPES.items():
            for num in (1, 2, 4, 8, 16, 32, 64, 128):
                if spec.regs * num > MAX_REGS:
                    continue
                for pack in (False, True):
                    split = 16 if shape == "16x32bx2" else None
                    out.append(TmemCopyAtom(direction, shape, num, pack, split))
    out += [S2tCopyAtom(shape, cta, dec) for shape in CP_SHAPES for cta in (1, 2)
            for dec in (None, *CP_DECOMPRESS)]
    return [a for a in out if (mnemonic is None or a.mnemonic == mnemonic)
            and (target_ is None or a.available_on(target_))]
