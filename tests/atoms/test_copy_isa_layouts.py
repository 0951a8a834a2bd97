"""Every copy atom's (thread, value) layout against the PTX ISA's own per-lane rule.

The rules below are transcribed from the PTX ISA here, independently of nvatom.atoms.copy and
nvatom.atoms.tmem, and compared lane by lane, element by element (bit by bit for the matrix
copies) with what the atoms declare.  They describe the bare instruction: where a library
rearranges registers after it (CUTLASS's SM100_U8x{8,16}_LDSM_T byte shuffle), its layout is
not the atom's (docs/copy-atoms.md).

* ldmatrix / stmatrix: PTX ISA "Warp-level matrix load instruction: ldmatrix" and "Warp-level
  matrix store instruction: stmatrix" (ISA 9.0: Figures 104-107 and the .m16n8 figure after
  them).  A lane's register element is compared *reference-free*: which address lane's row and
  which element (and bit) of that 16-byte row it is.
* cp.async and ld/st: "cp.async" (cp-size contiguous bytes per thread), "ld"/"st" (a vector's
  elements at consecutive addresses).
* tcgen05.ld / tcgen05.st: "Matrix fragments for shape .32x32b / .16x64b / .16x128b /
  .16x256b / .16x32bx2" (ISA 9.0 Figures 183-187) and "Packing and unpacking" (.pack::16b: two
  16-bit values of adjacent columns in one register, the lower column in the low half).  Those
  figures are pictures; the formulas are our reading of them, and the same tables agree with
  CUTLASS's Copy_Traits<SM100_TMEM_LOAD_*> (tests/atoms/test_sm100_tmem.py).
"""

from __future__ import annotations

import itertools

import pytest

from nvatom.atoms import copy as C
from nvatom.atoms.tmem import LDST_SHAPES, TmemCopyAtom

# --------------------------------------------------------------------------- ldmatrix/stmatrix

#: smem rows of one matrix, i.e. address lanes per matrix (ISA: "addresses addr0-addr7
#: correspond to the rows of the first matrix, addr8-addr15 to the rows of the second"; the
#: 16x16 8-bit matrix has 16 rows of 16 bytes, threads 0-15 for .x1 and 0-31 for .x2).
ISA_ROWS = {"m8n8": 8, "m16n16": 16, "m8n16": 8, "m16n8": 8}
#: bits of one element in the registers (the 6-/4-bit forms widen into bytes).
ISA_BITS = {"b16": 16, "b8": 8, "b8x16.b6x16_p32": 8, "b8x16.b4x16_p64": 8}


def isa_register_element(shape: str, trans: bool, lane: int, reg: int, k: int
                         ) -> tuple[int, int, int]:
    """(matrix, smem row, element of that row) of element ``k`` (k = 0 in the low bits) of
    register ``reg`` of ``lane``, as the ISA's fragment figures give it.  g = lane / 4,
    q = lane % 4; (r, c) is the position in the matrix as the registers see it, which .trans
    stores transposed."""
    g, q = divmod(lane, 4)
    if shape == "m8n8":  # Fig. 104/107: a group of four threads holds a row, two per thread
        j, r, c = reg, g, 2 * q + k
    elif shape == "m16n16":  # Fig. 105: 4 consecutive columns across 2 rows, one per register
        j, i = divmod(reg, 2)
        r, c = g + 8 * i, 4 * q + k
    elif shape == "m8n16":  # Fig. 106: 4 consecutive columns of row g
        j, r, c = reg, g, 4 * q + k
    elif shape == "m16n8":  # stmatrix .m16n8: e0, e1 in row g, e2, e3 in row g + 8
        j, r, c = reg, g + 8 * (k // 2), 2 * q + k % 2
    else:
        raise AssertionError(shape)
    return (j, c, r) if trans else (j, r, c)


def _matrix_cases() -> list[C.MatrixCopy]:
    return list(C.MATRIX_COPIES)


@pytest.mark.parametrize("atom", _matrix_cases(), ids=lambda a: a.name)
def test_matrix_copy_follows_the_isa_bit_by_bit(atom: C.MatrixCopy) -> None:
    shape = atom.qualifiers.split(".")[0]
    w = ISA_BITS[atom.fmt.spelling]
    rows = ISA_ROWS[shape]
    nmat = atom.num
    # where each reference bit sits, from the atom's smem side: (address lane, bit of its row)
    smem = atom.smem_layout(1)
    where = {smem(lane, b): (lane, b) for lane in range(nmat * rows) for b in range(128)}
    assert len(where) == nmat * rows * 128, "two address lanes share a row"
    reg_side = atom.register_layout(1)
    nregs = {"m16n16": 2}.get(shape, 1) * nmat
    assert atom.registers == nregs
    for lane, bit in itertools.product(range(32), range(32 * nregs)):
        reg, within = divmod(bit, 32)
        k, u = divmod(within, w)
        j, row, col = isa_register_element(shape, atom.trans, lane, reg, k)
        want = (j * rows + row, col * w + u)
        assert where[reg_side(lane, bit)] == want, (atom.name, lane, reg, k, u)


@pytest.mark.parametrize("atom", _matrix_cases(), ids=lambda a: a.name)
def test_matrix_copy_element_units(atom: C.MatrixCopy) -> None:
    """The same per element, in the atom's element units, and every element of every row
    moved exactly once."""
    shape = atom.qualifiers.split(".")[0]
    rows, w = ISA_ROWS[shape], ISA_BITS[atom.fmt.spelling]
    per_row = 128 // w
    smem, regs = atom.smem_layout(), atom.register_layout()
    where = {smem(lane, e): (lane, e) for lane in range(atom.num * rows) for e in range(per_row)}
    seen = []
    for lane, v in itertools.product(range(32), range(atom.registers * 32 // w)):
        reg, k = divmod(v, 32 // w)
        j, row, col = isa_register_element(shape, atom.trans, lane, reg, k)
        assert where[regs(lane, v)] == (j * rows + row, col), (atom.name, lane, v)
        seen.append((j * rows + row, col))
    assert sorted(seen) == sorted(where.values())


def test_m16n16_register_is_one_row() -> None:
    """The issue's statement of the ISA rule, on the atom itself: lane 5 (g = 1, q = 1) of
    ldmatrix .m16n16.x1.trans.b8 holds in register 0 columns 4..7 of row 1 of the register
    matrix, i.e. byte 1 of smem rows 4..7; in register 1 the same columns of row 9."""
    a = C.copy_atom("atom.ldsm<m16n16.x1.trans.b8>")
    assert isinstance(a, C.MatrixCopy)
    regs = a.register_layout()  # reference element: smem row * 16 + byte
    assert [regs(5, k) for k in range(4)] == [4 * 16 + 1, 5 * 16 + 1, 6 * 16 + 1, 7 * 16 + 1]
    assert [regs(5, 4 + k) for k in range(4)] == [4 * 16 + 9, 5 * 16 + 9, 6 * 16 + 9, 7 * 16 + 9]


# --------------------------------------------------------------------------- cp.async, ld/st


@pytest.mark.parametrize("atom", [*C.ASYNC_COPIES, *C.UNIVERSAL_COPIES], ids=lambda a: a.name)
def test_thread_vector_copies_move_contiguous_bits(atom: C._CopyBase) -> None:
    """ISA "cp.async": one thread copies cp-size contiguous bytes; "ld"/"st" .vN: the vector's
    elements at consecutive addresses.  So value bit v of the one thread is bit v."""
    bits = atom.value_bits
    for lay in (atom.src_layout(1), atom.dst_layout(1)):  # type: ignore[attr-defined]
        assert lay.shape[0] in (1, (1,))
        assert [lay(0, v) for v in range(bits)] == list(range(bits))
    per_byte = atom.src_layout(8)  # type: ignore[attr-defined]
    assert [per_byte(0, v) for v in range(bits // 8)] == list(range(bits // 8))


# --------------------------------------------------------------------------- tcgen05.ld / st


def isa_tmem_cell(shape: str, pack: bool, split: int, t: int, v: int) -> tuple[int, int]:
    """(TMEM lane, column) from the warp's base address of value ``v`` of thread ``t``: value
    ``v`` is register ``v`` (32-bit), or with .pack::16b half ``v % 2`` of register ``v / 2``."""
    r, h = divmod(v, 2) if pack else (v, 0)
    base = 0
    if shape == "32x32b":  # Fig. 183: thread t is lane t; register r is column r
        lane, col = t, r
    elif shape == "16x64b":  # Fig. 184: T0 lane 0, T1 lane 8, T2/T3 the next column, T4 lane 1
        lane, col = t // 4 + 8 * (t % 2), 2 * r + (t // 2) % 2
    elif shape == "16x128b":  # Fig. 185: lane t/4, column t%4; odd registers 8 lanes down
        lane, col = t // 4 + 8 * (r % 2), 4 * (r // 2) + t % 4
    elif shape == "16x256b":  # Fig. 186: lane t/4, columns 2(t%4) + {0,1}; r2, r3 8 lanes down
        lane, col = t // 4 + 8 * ((r // 2) % 2), 8 * (r // 4) + 2 * (t % 4) + r % 2
    elif shape == "16x32bx2":  # Fig. 187: lanes 0-15 twice; threads 16-31 at immHalfSplitoff
        lane, col, base = t % 16, r, split * (t // 16)
    else:
        raise AssertionError(shape)
    if pack:  # each register covers two adjacent columns, the lower in its low half
        col = 2 * col + h
    return lane, base + col


def _tmem_cases() -> list[tuple[str, int, bool, int | None]]:
    out = []
    for shape, s in LDST_SHAPES.items():
        for num in (1, 2, 4, 8, 16, 32, 64, 128):
            if s.regs * num > 128:
                continue
            for pack in (False, True):
                splits: tuple[int | None, ...] = (None,)
                if shape == "16x32bx2":
                    w = num * (2 if pack else 1)  # columns of one half
                    splits = (w, w + 32)
                for split in splits:
                    out.append((shape, num, pack, split))
    return out


@pytest.mark.parametrize("case", _tmem_cases(),
                         ids=lambda c: f"{c[0]}.x{c[1]}{'.16b' * c[2]}@{c[3]}")
def test_tmem_ldst_follows_the_isa(case: tuple[str, int, bool, int | None]) -> None:
    shape, num, pack, split = case
    for direction in ("load", "store"):
        atom = TmemCopyAtom(direction, shape, num, pack, split)
        nval = atom.registers * (2 if pack else 1)
        cells = set()
        for t, v in itertools.product(range(32), range(nval)):
            want = isa_tmem_cell(shape, pack, split or 0, t, v)
            assert atom.coords(t, v) == want, (atom.name, t, v)
            cells.add(want)
        assert len(cells) == 32 * nval  # each (lane, column or half) exactly once
        lanes = {c[0] for c in cells}
        assert lanes == set(range(32 if shape == "32x32b" else 16))
