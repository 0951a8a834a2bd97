"""Swizzled shared-memory layouts and the bank-conflict counter (nvatom.atoms.smem).

Sources the answers come from, none of them our code:

* [cute] CUTLASS 4.2 include/cute/atom/mma_traits_sm90_gmma.hpp: ``Layout_K_SW128_Atom_Bits =
  ComposedLayout<Swizzle<3,4,3>, smem_ptr_flag, Layout<(8,1024):(1024,1)>>`` (bits) and its
  INTER/SW32/SW64 and MN-major siblings, typed in below; compiled with g++ when the headers
  are there (``as_position_independent_swizzle_layout`` of the tiled atom, printed by CuTe).
* [ptx] the 128-byte swizzle: 16-byte chunk c of 128-byte row r lands at chunk c ^ (r % 8).
* [guide] CUDA C++ Programming Guide, "Shared Memory": 32 banks of 4 bytes, bank of byte
  address a = (a // 4) % 32; requests for the same word are multicast; 64-bit accesses are
  served per half-warp and 128-bit ones per quarter-warp.
* [isa] PTX ISA, ldmatrix: lanes 0-7 / 8-15 / 16-23 / 24-31 supply the row addresses of
  matrices 0 / 1 / 2 / 3, each row 16 bytes.

Bank arithmetic is done by hand in the comments; the counter is also checked against a small
cycle-by-cycle simulation of the banks written independently below.
"""

from __future__ import annotations

import hashlib
import random
import shutil
import subprocess
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nvatom.atoms.smem import (
    ACCESSES,
    SMEM_SWIZZLES,
    LaneAddress,
    SmemError,
    bank_conflicts,
    bank_conflicts_of_addresses,
    banks_report,
    count_phases,
    smem_access,
    smem_layout,
    smem_swizzle,
    smem_swizzle_of,
    warp_addresses,
)
from nvatom.layout import (
    ComposedLayout,
    Layout,
    Swizzle,
    composition,
    layouts_equivalent,
    parse_layout,
    size,
)

ELEMENT_BITS = (4, 8, 16, 32, 64)


def bank(addr: int) -> int:  # [guide]
    return (addr // 4) % 32


# ============================================================================ swizzle table


def test_swizzle_table_matches_cutlass() -> None:
    # [cute] Layout_{K,MN}_{INTER,SW32,SW64,SW128}_Atom_Bits use Swizzle<0|1|2|3, 4, 3>.
    want = {"INTERLEAVE": (0, Swizzle(0, 4, 3)), "SW32": (32, Swizzle(1, 4, 3)),
            "SW64": (64, Swizzle(2, 4, 3)), "SW128": (128, Swizzle(3, 4, 3))}
    assert {s.name: (s.nbytes, s.swizzle) for s in SMEM_SWIZZLES} == want
    for s in SMEM_SWIZZLES:
        assert smem_swizzle(s.nbytes) is s
        assert smem_swizzle(s.name.lower()) is s
        assert smem_swizzle(s) is s
    assert smem_swizzle("128B") is smem_swizzle("B128") is smem_swizzle(128)
    assert smem_swizzle("none") is smem_swizzle(0)


@pytest.mark.parametrize("bad", [16, 256, "SW16", True, None, 1.5])
def test_unknown_swizzle(bad: object) -> None:
    with pytest.raises(SmemError, match="unknown shared-memory swizzle"):
        smem_swizzle(bad)  # type: ignore[arg-type]


def test_128b_swizzle_in_elements_is_cute_byte_swizzle() -> None:
    # The brief's example: CuTe's composition(Swizzle<3,4,3>, (8,64):(64,1)) for 16-bit data
    # swizzles *byte* addresses; our element-offset layout is Sw<3,3,3> o (8,64):(64,1).
    lay = smem_layout(8, 64, 16)
    assert str(lay) == "Sw<3,3,3> o 0 o ((8,1),(64,1)):((64,0),(1,0))"  # CuTe's tile_to_shape
    assert layouts_equivalent(lay, parse_layout("Sw<3,3,3> o 0 o (8,64):(64,1)"))
    sw_bytes = Swizzle(3, 4, 3)
    for r in range(8):
        for c in range(64):
            plain = 128 * r + 2 * c  # row-major byte offset
            assert 2 * lay(r, c) == sw_bytes(plain)
            # [ptx] chunk c//8 of row r lands at chunk (c//8) ^ r.
            assert 2 * lay(r, c) == 128 * r + 16 * ((c // 8) ^ (r % 8)) + 2 * (c % 8)


@pytest.mark.parametrize("e", ELEMENT_BITS)
@pytest.mark.parametrize("sw", SMEM_SWIZZLES, ids=str)
@pytest.mark.parametrize("major", ["K", "MN"])
def test_atoms_permute_bytes_as_cute(e: int, sw, major: str) -> None:  # type: ignore[no-untyped-def]
    # [cute] the atom in bits: K-major (8, W):(W, 1), MN-major (W, 8):(1, W) with W = row bits;
    # CuTe applies the Swizzle<B,4,3> to the byte address (swizzle_ptr::apply_swizzle).
    w = 8 * sw.row_bytes
    atom = sw.atom(e, major)
    rows, cols = (8, w // e) if major == "K" else (w // e, 8)
    assert atom.shape == (rows, cols)
    seen = set()
    for r in range(rows):
        for c in range(cols):
            bit = (w * r + e * c) if major == "K" else (e * r + w * c)
            if bit % 8:
                continue  # sub-byte element inside a byte: same byte as its neighbour
            got = atom(r, c) * e // 8
            assert got == sw.swizzle(bit // 8), (r, c)
            seen.add(got)
    if e >= 8:
        assert len(seen) == rows * cols  # a permutation of the atom's element addresses


def test_element_swizzles() -> None:
    sw128 = smem_swizzle(128)
    assert [sw128.element_swizzle(e) for e in (4, 8, 16, 32, 64)] == [
        Swizzle(3, 5, 3), Swizzle(3, 4, 3), Swizzle(3, 3, 3), Swizzle(3, 2, 3), Swizzle(3, 1, 3)]
    assert smem_swizzle(32).element_swizzle(16) == Swizzle(1, 3, 3)
    assert isinstance(smem_layout(16, 16, 16, swizzle=0), Layout)  # Sw<0,..> is dropped


def test_smem_layout_known_answers() -> None:
    # CuTe prints these for as_position_independent_swizzle_layout(tile_to_shape(atom, shape))
    # (checked by test_smem_layout_against_compiled_cute when g++ and the headers exist).
    assert str(smem_layout(16, 128, 16)) == "Sw<3,3,3> o 0 o ((8,2),(64,2)):((64,512),(1,1024))"
    assert str(smem_layout(64, 16, 32, "MN", 64)) == \
        "Sw<2,2,3> o 0 o ((16,4),(8,2)):((1,128),(16,512))"
    assert str(smem_layout(16, 16, 16, "K", 0)) == "((8,2),(8,2)):((8,64),(1,128))"
    assert str(smem_layout(8, 128, 4, "K", 32)) == "Sw<1,5,3> o 0 o ((8,1),(64,2)):((64,0),(1,512))"


def test_smem_layout_errors() -> None:
    with pytest.raises(SmemError, match=r"SW128 K-major atom of 16-bit elements is 8 x 64"):
        smem_layout(16, 16, 16)
    with pytest.raises(SmemError, match="major must be 'K' or 'MN'"):
        smem_layout(8, 64, 16, "row")
    with pytest.raises(SmemError, match="element_bits must be a power of two"):
        smem_layout(8, 64, 12)
    with pytest.raises(SmemError, match="rows must be a positive int"):
        smem_layout(0, 64, 16)


@settings(max_examples=60, deadline=None)
@given(sw=st.sampled_from(SMEM_SWIZZLES), e=st.sampled_from((8, 16, 32)),
       major=st.sampled_from(("K", "MN")), mr=st.integers(1, 3), mc=st.integers(1, 3))
def test_smem_layout_is_a_bijection(sw, e: int, major: str, mr: int, mc: int) -> None:  # type: ignore[no-untyped-def]
    ar, ac = sw.atom(e, major).shape
    lay = smem_layout(ar * mr, ac * mc, e, major, sw)
    offs = sorted(lay(i) for i in range(size(lay)))
    assert offs == list(range(size(lay)))
    assert smem_swizzle_of(lay, e) is (sw if sw.nbytes else SMEM_SWIZZLES[0])


def test_swizzle_of_foreign_layouts() -> None:
    assert smem_swizzle_of(parse_layout("Sw<2,2,3> o 0 o (8,64):(64,1)"), 16) is None
    assert smem_swizzle_of(parse_layout("Sw<2,2,3> o 0 o (8,64):(64,1)"), 32).name == "SW64"
    assert smem_swizzle_of(parse_layout("Sw<3,3,3> o 0 o (8,64):(64,1)"), 16).name == "SW128"
    assert smem_swizzle_of(parse_layout("Sw<3,3,3> o 0 o (8,64):(64,1)"), 8) is None
    # the identity swizzle, how a TMA tile without swizzle is written (the partition
    # verifier's step 5 takes swizzle layouts only): INTERLEAVE, in bytes (Sw<0,4,3>)
    assert smem_swizzle_of(parse_layout("Sw<0,4,3> o 0 o (32,16):(16,1)"), 8).name == \
        "INTERLEAVE"


def _cute_flags() -> list[str] | None:
    try:
        from tests.layout.test_cute_oracle import FLAGS
    except Exception:  # pragma: no cover - the oracle module moved
        return None
    return FLAGS


def _compile_and_run(src: str, flags: list[str]) -> str:
    """Compile and run a CuTe program with g++; its output is cached by a hash of the source
    and the flags next to the ptxas cache (the headers are fixed by the wheel's version)."""
    from nvatom.runtime.ptxas import cache_dir

    key = hashlib.sha256("\0".join([src, *flags]).encode()).hexdigest()[:32]
    base = cache_dir()
    cached = base.parent / "cute-oracle" / f"{key}.txt" if base is not None else None
    if cached is not None and cached.exists():
        return cached.read_text()
    with tempfile.TemporaryDirectory() as d:
        (Path(d) / "t.cpp").write_text(src)
        cc = subprocess.run(["g++", *flags, "t.cpp", "-o", "t"], cwd=d, capture_output=True,
                            text=True, check=False)
        if cc.returncode:
            pytest.skip(f"CuTe's GMMA header does not compile here: {cc.stderr[-400:]}")
        out = subprocess.run([str(Path(d) / "t")], capture_output=True, text=True,
                             check=True).stdout
    if cached is not None:
        cached.parent.mkdir(parents=True, exist_ok=True)
        cached.write_text(out)
    return out


def test_smem_layout_against_compiled_cute() -> None:
    """[cute] tile_to_shape(GMMA::Layout_<major>_<mode>_Atom<T>, shape), made position
    independent (the swizzle recast from bytes to elements of T), printed by CuTe itself."""
    flags = _cute_flags()
    if flags is None or shutil.which("g++") is None:
        pytest.skip("needs g++ and the CuTe headers of the nvidia-cutlass wheel")
    ctype = {4: "cute::int4_t", 8: "uint8_t", 16: "cute::half_t", 32: "float", 64: "double"}
    cname = {0: "INTER", 32: "SW32", 64: "SW64", 128: "SW128"}
    rng = random.Random(4)
    cases, lines = [], []
    for e in ELEMENT_BITS:
        for sw in SMEM_SWIZZLES:
            for major in ("K", "MN"):
                ar, ac = sw.atom(e, major).shape  # type: ignore[misc]
                shape = (ar * rng.choice((1, 2, 4)), ac * rng.choice((1, 2, 3)))
                cases.append((e, sw, major, shape))
                atom = f"GMMA::Layout_{major}_{cname[sw.nbytes]}_Atom<{ctype[e]}>{{}}"
                lines.append(
                    f"  print(as_position_independent_swizzle_layout(tile_to_shape({atom}, "
                    f"Shape<Int<{shape[0]}>,Int<{shape[1]}>>{{}}))); printf(\"\\n\");")
    src = ("#include <cute/tensor.hpp>\n#include <cute/atom/mma_traits_sm90_gmma.hpp>\n"
           "using namespace cute;\nint main() {\n" + "\n".join(lines) + "\n}\n")
    out = _compile_and_run(src, flags).splitlines()
    assert len(out) == len(cases)
    for (e, sw, major, shape), text in zip(cases, out, strict=True):
        theirs = parse_layout(text.replace("_", ""))
        ours = smem_layout(*shape, e, major, sw)
        assert ours == theirs, (e, sw.name, major, shape, text)


# ============================================================================ access table


def test_access_table() -> None:
    names = set(ACCESSES)
    for need in ("ldsm.x1", "ldsm.x2", "ldsm.x4", "ldsm.x4.trans", "stsm.x4", "lds.32",
                 "lds.64", "lds.128"):
        assert need in names
    a = smem_access("ldsm.x4.trans")
    assert a.ptx == "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16"
    assert (a.op, a.lane_bytes, a.matrices, a.registers, a.feature) == ("ld", 16, 4, 4,
                                                                          "ldmatrix")
    assert smem_access("stsm.x2").ptx == "stmatrix.sync.aligned.m8n8.x2.shared.b16"
    assert smem_access("lds.128").ptx == "ld.shared.v4.b32"
    assert smem_access("sts.64").ptx == "st.shared.v2.b32"
    # [isa] .x1 uses lanes 0-7, .x2 0-15, .x4 all; [guide] 64-bit: half-warps, 128: quarters.
    assert smem_access("ldsm.x1").phases == (tuple(range(8)),)
    assert smem_access("ldsm.x2").phases == (tuple(range(8)), tuple(range(8, 16)))
    assert [len(p) for p in smem_access("lds.32").phases] == [32]
    assert [len(p) for p in smem_access("lds.64").phases] == [16, 16]
    assert [len(p) for p in smem_access("lds.128").phases] == [8, 8, 8, 8]
    for acc in ACCESSES.values():
        lanes = [i for p in acc.phases for i in p]
        assert len(lanes) == len(set(lanes)) and set(lanes) <= set(range(32))
        assert all(len(p) * acc.lane_bytes <= 128 for p in acc.phases)  # one wavefront each
    with pytest.raises(SmemError, match="unknown shared-memory access 'ldsm.x8'"):
        smem_access("ldsm.x8")


# ============================================================================ ldmatrix


def test_ldsm_unswizzled_16x16_has_2way_conflicts() -> None:
    # (16,16):(16,1) f16: rows are 32 B apart.  Matrix 0's rows r=0..7 start at byte 32r,
    # words 8r..8r+3, banks {0-3, 8-11, 16-19, 24-27, 0-3, 8-11, 16-19, 24-27}: rows r and
    # r+4 need different words from the same banks -> 2 wavefronts per matrix, 8 for x4.
    r = bank_conflicts("(16,16):(16,1)", "ldsm.x4")
    (ins,) = r.instructions
    assert [p.wavefronts for p in ins.phases] == [2, 2, 2, 2]
    assert (r.wavefronts, r.ideal, r.conflicts) == (8, 4, 4)
    assert [la.bank for la in ins.phases[0].lanes] == [0, 8, 16, 24, 0, 8, 16, 24]
    # Matrix 2 (lanes 16-23) is the right half, bytes 16..31 of each row: banks 4-7, 12-15...
    assert [la.address for la in ins.phases[2].lanes] == [16 + 32 * t for t in range(8)]


def test_ldsm_128B_rows_have_8way_conflicts() -> None:
    # (16,64):(64,1) f16: rows are 128 B apart, so the 8 rows of a matrix all start in bank 0
    # (128r/4 = 32r = 0 mod 32): 8 distinct words per bank -> 8 wavefronts per phase.
    r = bank_conflicts(Layout((16, 64), (64, 1)), "ldsm.x4")
    assert len(r.instructions) == 4  # a 16x16 tile per instruction, 4 along the columns
    for ins in r.instructions:
        assert [p.wavefronts for p in ins.phases] == [8, 8, 8, 8]
        assert all(p.replays == 7 for p in ins.phases)
    assert (r.wavefronts, r.ideal, r.conflicts) == (128, 16, 112)


def test_ldsm_128B_rows_swizzled_have_none() -> None:
    # Same tile, Sw<3,4,3> on bytes = Sw<3,3,3> on 16-bit elements: row r's chunk c moves to
    # c ^ r, so matrix 0's rows start at banks 0, 4+32.., i.e. 4*(c ^ r) + 0..3 (mod 32):
    # eight different 4-bank groups.
    lay = parse_layout("Sw<3,3,3> o 0 o (16,64):(64,1)")
    r = bank_conflicts(lay, "ldsm.x4")
    assert (r.wavefronts, r.ideal, r.conflicts) == (16, 16, 0)
    first = r.instructions[0].phases[0].lanes
    assert [la.bank for la in first] == [0, 4, 8, 12, 16, 20, 24, 28]
    assert layouts_equivalent(smem_layout(16, 64, 16), lay)


def test_ldsm_padded_rows_have_none() -> None:
    # (16,64):(72,1): rows 144 B apart, row r starts at word 36r -> bank 4r mod 32.
    r = bank_conflicts("(16,64):(72,1)", "ldsm.x4")
    assert r.conflicts == 0
    assert [la.bank for la in r.instructions[0].phases[0].lanes] == [4 * t for t in range(8)]


@pytest.mark.parametrize("sw", SMEM_SWIZZLES, ids=str)
def test_canonical_k_major_tiles_are_conflict_free(sw) -> None:  # type: ignore[no-untyped-def]
    # Each mode's rows are 16 B * 2^B wide and the swizzle spreads the 8 rows of a matrix
    # over all 32 banks; INTERLEAVE keeps each 8x8 matrix in one 128 B core matrix.
    lay = smem_layout(32, 64, 16, "K", sw)
    for name in ("ldsm.x1", "ldsm.x2", "ldsm.x4", "stsm.x4"):
        r = bank_conflicts(lay, name)
        assert r.conflicts == 0, (sw.name, name)
        assert r.wavefronts == sum(smem_access(name).matrices for _ in r.instructions)


@pytest.mark.parametrize("sw", SMEM_SWIZZLES, ids=str)
def test_canonical_mn_major_tiles_read_with_trans(sw) -> None:  # type: ignore[no-untyped-def]
    lay = smem_layout(64, 32, 16, "MN", sw)
    assert bank_conflicts(lay, "ldsm.x4.trans").conflicts == 0
    assert bank_conflicts(lay, "stsm.x2.trans").conflicts == 0
    with pytest.raises(SmemError, match="not contiguous.*use .trans"):
        bank_conflicts(lay, "ldsm.x4")


def test_ldsm_unswizzled_sw32_sw64_widths() -> None:
    # Without a swizzle, 32 B rows give 2-way, 64 B rows 4-way, 128 B rows 8-way conflicts
    # (rows r and r + 128/pitch share banks); the SW32/SW64/SW128 modes exist to undo this.
    for cols, way in ((16, 2), (32, 4), (64, 8)):
        r = bank_conflicts(Layout((16, cols), (cols, 1)), "ldsm.x4")
        assert r.wavefronts == way * r.ideal
        sw = {16: 32, 32: 64, 64: 128}[cols]
        assert bank_conflicts(smem_layout(16, cols, 16, "K", sw), "ldsm.x4").conflicts == 0


def test_ldsm_geometry() -> None:
    lay = Layout((16, 16), (16, 1))
    w = warp_addresses(lay, "ldsm.x4")[0]
    # [isa] lane i supplies row i%8 of matrix i//8; matrix j is block (j%2, j//2).
    assert [w.lanes[i].coord for i in (0, 7, 8, 15, 16, 31)] == [
        (0, 0), (7, 0), (8, 0), (15, 0), (0, 8), (15, 8)]
    x2 = warp_addresses(Layout((16, 8), (8, 1)), "ldsm.x2")[0]
    assert all(x2.lanes[i] is None for i in range(16, 32))
    assert [x2.lanes[i].address for i in range(16)] == [16 * i for i in range(16)]
    x1 = warp_addresses(Layout((8, 8), (8, 1)), "ldsm.x1")
    assert len(x1) == 1 and sum(la is not None for la in x1[0].lanes) == 8
    # .trans: lane i's 16 bytes run down the rows, at column 8*(j//2) + i%8.
    tr = warp_addresses(Layout((16, 16), (1, 16)), "ldsm.x4.trans")[0]
    assert [tr.lanes[i].coord for i in (0, 7, 8, 16, 31)] == [
        (0, 0), (0, 7), (8, 0), (0, 8), (8, 15)]
    # A (32, 32) layout is covered by 2 x 2 instructions, row blocks outer.
    labels = [w.label for w in warp_addresses(Layout((32, 32), (32, 1)), "ldsm.x4")]
    assert labels == ["tile at (0,0)", "tile at (0,16)", "tile at (16,0)", "tile at (16,16)"]


def test_ldsm_errors() -> None:
    with pytest.raises(SmemError, match="lane 0 supplies the 16-byte row of matrix 0 starting "
                       r"at \(0,0\), but its 8 elements along col are not contiguous"):
        bank_conflicts("(16,16):(1,16)", "ldsm.x4")
    with pytest.raises(SmemError, match="covers a 16 x 16 tile"):
        bank_conflicts("(16,8):(8,1)", "ldsm.x4")
    with pytest.raises(SmemError, match="rank 2"):
        bank_conflicts("(16,16,2):(16,1,256)", "ldsm.x4")
    with pytest.raises(SmemError, match="not aligned to its 16-byte access"):
        bank_conflicts("(16,16):(20,1)", "ldsm.x4")  # rows 40 B apart
    with pytest.raises(SmemError, match=".trans transposes 16-bit elements"):
        bank_conflicts("(16,32):(32,1)", "ldsm.x4.trans", element_bits=8)


def test_ldsm_8bit_elements() -> None:
    # With 8-bit elements a 16-byte row is 16 elements: x4 covers a 16 x 32 tile.
    r = bank_conflicts(smem_layout(16, 128, 8), "ldsm.x4", element_bits=8)
    assert len(r.instructions) == 4 and r.conflicts == 0
    assert r.instructions[0].phases[2].lanes[0].coord == (0, 16)


# ============================================================================ ld/st.shared


def test_lds32_linear_stride_and_broadcast() -> None:
    # Lane l reads word l: 32 different banks, one wavefront.
    assert bank_conflicts("32:1", "lds.32").wavefronts == 1
    # Stride 2 words: lanes l and l+16 hit bank 2l mod 32 with words 2l and 2l+32 -> 2-way.
    r = bank_conflicts("32:2", "lds.32")
    assert (r.wavefronts, r.conflicts) == (2, 1)
    # Stride 32 words: every lane in bank 0, 32 distinct words -> 32 wavefronts.
    assert bank_conflicts("32:32", "lds.32").wavefronts == 32
    # Broadcast: every lane reads word 5 -> one wavefront; pairs sharing words also free.
    assert bank_conflicts("32:0", "lds.32").wavefronts == 1
    assert bank_conflicts("(2,16):(0,1)", "lds.32").wavefronts == 1
    # Stride 33 words (a padded column): bank (33l) mod 32 = l mod 32 -> conflict-free.
    assert bank_conflicts("32:33", "lds.32").wavefronts == 1


def test_lds64_half_warp_phases() -> None:
    # Lane-linear 8 B: each half-warp reads 128 contiguous bytes -> 2 wavefronts, ideal 2.
    r = bank_conflicts("32:1", "lds.64")
    assert (r.wavefronts, r.ideal, r.conflicts) == (2, 2, 0)
    # Stride 16 B: half-warp 0 reads words {4l, 4l+1}, l < 16, spanning 64 words: banks
    # 4l mod 32 repeat for l and l+8 -> 2 wavefronts per half-warp.
    r = bank_conflicts("32:2", "lds.64")
    assert [p.wavefronts for p in r.instructions[0].phases] == [2, 2]
    # Lanes l and l+16 read the same 8 bytes at banks 2l, 2l+1 but in different phases.
    assert bank_conflicts("(16,2):(1,0)", "lds.64").wavefronts == 2


def test_lds128_quarter_warp_phases() -> None:
    # Lane-linear 16 B: four quarter-warps of 128 contiguous bytes -> 4 wavefronts, 0 extra,
    # although lanes 0 and 8 use the same banks (different phases).
    r = bank_conflicts("32:1", "lds.128")
    assert (r.wavefronts, r.ideal, r.conflicts) == (4, 4, 0)
    assert r.instructions[0].phases[1].lanes[0].banks == (0, 1, 2, 3)
    # Stride 128 B: the 8 lanes of a phase all in banks 0-3 -> 8-way, 32 wavefronts.
    r = bank_conflicts("32:8", "lds.128")
    assert (r.wavefronts, r.conflicts) == (32, 28)
    # Chunk (l % 8) of row l // 8 of a 128 B-wide tile, read down the columns: lane l of a
    # phase reads row l at chunk c -> 8-way without swizzle, none with Sw<3,0,3> (16 B units).
    assert bank_conflicts("(8,4):(8,1)", "lds.128").wavefronts == 32
    assert bank_conflicts("Sw<3,0,3> o 0 o (8,4):(8,1)", "lds.128").wavefronts == 4


def test_vector_layout_in_other_units() -> None:
    # A 16-bit SW128 tile read by lds.128, lane l reading the 8 elements from (row l % 8,
    # col 8 * (l // 8)): the tile's 1-D index of (r, c) is r + 8c, so the lane layout is
    # (8,4):(1,64), composed with the tile; offsets stay in 16-bit elements.
    tile = smem_layout(8, 64, 16)
    lanes = parse_layout("(8,4):(1,64)")
    r = bank_conflicts(composition(tile, lanes), "lds.128", element_bits=16)
    assert r.conflicts == 0
    plain = bank_conflicts(composition(Layout((8, 64), (64, 1)), lanes), "lds.128",
                           element_bits=16)
    assert plain.wavefronts == 32


def test_partial_instruction_and_stores() -> None:
    r = bank_conflicts("40:1", "sts.32")
    assert len(r.instructions) == 2
    assert sum(la is not None for p in r.instructions[1].phases for la in p.lanes) == 8
    assert (r.wavefronts, r.conflicts) == (2, 0)


# ============================================================================ generic entry


def test_generic_addresses() -> None:
    a = bank_conflicts_of_addresses([4 * i for i in range(32)], 32)
    assert (a.wavefronts, a.ideal, a.conflicts) == (1, 1, 0)
    # Inactive lanes cost nothing; an instruction with one active lane still takes a wavefront.
    a = bank_conflicts_of_addresses([None] * 31 + [128], 32)
    assert (a.wavefronts, a.ideal) == (1, 1)
    # 128-bit with only lanes 8-15 active: one phase used.
    a = bank_conflicts_of_addresses([None] * 8 + [16 * i for i in range(8)], 128)
    assert (a.wavefronts, a.ideal) == (1, 1)
    # 8-bit and 16-bit accesses: bytes of one word are multicast.
    assert bank_conflicts_of_addresses(list(range(32)), 8).wavefronts == 1
    assert bank_conflicts_of_addresses([2 * i for i in range(32)], 16).wavefronts == 1
    assert bank_conflicts_of_addresses([128 * i for i in range(32)], 16).wavefronts == 32
    # Explicit phases: the ldmatrix .x1 pattern over raw addresses.
    a = bank_conflicts_of_addresses([32 * i for i in range(8)], 128, phases=[range(8)])
    assert a.wavefronts == 2
    with pytest.raises(SmemError, match="not aligned"):
        bank_conflicts_of_addresses([2], 32)
    with pytest.raises(SmemError, match="width_bits"):
        bank_conflicts_of_addresses([0], 24)
    with pytest.raises(SmemError, match="non-negative int"):
        bank_conflicts_of_addresses([-4], 32)


def _simulate(lanes: list[LaneAddress], phases: list[list[int]]) -> int:
    """Independent model: each cycle every bank delivers one pending word; a word requested
    by several lanes is delivered once.  Returns the cycles the phases take in turn."""
    cycles = 0
    by_lane = {la.lane: la for la in lanes}
    for ph in phases:
        pending = {w for i in ph if i in by_lane
                   for w in range(by_lane[i].address // 4,
                                  (by_lane[i].address + by_lane[i].nbytes + 3) // 4)}
        while pending:
            served: dict[int, int] = {}
            for w in sorted(pending):
                served.setdefault(w % 32, w)
            pending -= set(served.values())
            cycles += 1
    return cycles


@settings(max_examples=200, deadline=None)
@given(width=st.sampled_from((32, 64, 128)), seed=st.integers(0, 2**32 - 1),
       span=st.sampled_from((64, 512, 4096)), active=st.floats(0.2, 1.0))
def test_counter_matches_simulation(width: int, seed: int, span: int, active: float) -> None:
    rng = random.Random(seed)
    nb = width // 8
    addrs = [rng.randrange(0, span // nb) * nb if rng.random() < active else None
             for _ in range(32)]
    rep = bank_conflicts_of_addresses(addrs, width)
    lanes = [LaneAddress(i, a, nb) for i, a in enumerate(addrs) if a is not None]
    phases = [list(p) for p in smem_access(f"lds.{width}").phases]
    assert rep.wavefronts == _simulate(lanes, phases)
    assert rep.wavefronts >= rep.ideal


@settings(max_examples=60, deadline=None)
@given(pitch=st.integers(1, 40), n=st.sampled_from((1, 2, 4)), seed=st.integers(0, 1000))
def test_ldsm_counter_matches_simulation(pitch: int, n: int, seed: int) -> None:
    # Rows of 8 f16 at a random pitch (in 16-byte units) through ldmatrix: same simulation.
    lay = Layout((16, 16), (8 * pitch, 1)) if n == 4 else Layout((16, 8), (8 * pitch, 1))
    if n == 1:
        lay = Layout((8, 8), (8 * pitch, 1))
    name = f"ldsm.x{n}"
    rep = bank_conflicts(lay, name)
    for w, ins in zip(warp_addresses(lay, name), rep.instructions, strict=True):
        lanes = [la for la in w.lanes if la is not None]
        phases = [list(p) for p in smem_access(name).phases]
        assert ins.wavefronts == _simulate(lanes, phases)


def test_count_phases_direct() -> None:
    lanes = [LaneAddress(0, 0, 4), LaneAddress(1, 128, 4), None, LaneAddress(3, 0, 4)]
    rep = count_phases(lanes, [[0, 1, 2, 3]])
    assert rep.wavefronts == 2 and rep.phases[0].bank_words() == {0: {0, 32}}


# ============================================================================ report text


def test_banks_report_text() -> None:
    text = banks_report("ldsm.x4", "(16,64):(64,1)")
    assert text.startswith("ldsm.x4: ldmatrix.sync.aligned.m8n8.x4.shared.b16")
    assert "access 0: tile at (0,0): 32 wavefronts = 4 ideal + 28 conflicts" in text
    assert "phase 0: lanes 0-7 (matrix 0): 8 wavefronts (7 replays)" in text
    assert text.rstrip().endswith("total: 4 instructions, 128 wavefronts = 16 ideal + "
                                  "112 conflicts (8.00x ideal)")
    sw = banks_report("ldsm.x4", "Sw<3,3,3> o 0 o (16,64):(64,1)")
    assert "phase 0: lanes 0-7 (matrix 0): 1 wavefront (0 replays)" in sw
    assert "    bank    0-3   4-7  8-11 12-15 16-19 20-23 24-27 28-31" in sw
    assert "0 conflicts (1.00x ideal)" in sw
    lds = banks_report("lds.32", "32:2")
    assert "lane l of instruction k accesses layout(l + 32*k)" in lds
    assert "2 wavefronts = 1 ideal + 1 conflict" in lds


def test_banks_report_every_name() -> None:
    for name, acc in ACCESSES.items():
        if acc.is_matrix:
            layout = "(16,16):(1,16)" if acc.trans else "(16,16):(16,1)"
        else:
            layout = "64:1"
        text = banks_report(name, layout)
        assert text.startswith(f"{name}: {acc.ptx}")
        assert "total:" in text


def test_banks_report_detail_limit_and_errors() -> None:
    text = banks_report("ldsm.x4", "(16,64):(64,1)", max_detailed=1)
    assert text.count("phase 0:") == 1 and "access 3: tile at (0,48)" in text
    with pytest.raises(SmemError, match="unknown shared-memory access"):
        banks_report("ldsm.x3", "(16,16):(16,1)")
    with pytest.raises(Exception, match="cannot parse layout"):
        banks_report("ldsm.x4", "(16,16):(16,")
    with pytest.raises(SmemError, match="base must be"):
        bank_conflicts("32:1", "lds.32", base=-1)


def test_base_address_shifts_banks() -> None:
    r = bank_conflicts("32:1", "lds.32", base=4)
    assert r.instructions[0].phases[0].lanes[0].bank == 1 and r.conflicts == 0
    # A negative stride needs a base that keeps every address in the buffer.
    with pytest.raises(SmemError, match="negative byte address -4; pass a base"):
        bank_conflicts("32:-1", "lds.32")
    assert bank_conflicts("32:-1", "lds.32", base=124).wavefronts == 1


def test_composed_layout_accepted_directly() -> None:
    lay = ComposedLayout(Swizzle(3, 3, 3), 0, Layout((16, 64), (64, 1)))
    assert bank_conflicts(lay, "stsm.x4").conflicts == 0


# ============================================================================ the GPU bench


def _bench():  # type: ignore[no-untyped-def]
    import importlib.util
    import sys

    name = "nvatom_bench_banks_ncu"
    if name not in sys.modules:
        path = Path(__file__).resolve().parents[2] / "bench" / "banks_ncu.py"
        spec = importlib.util.spec_from_file_location(name, path)
        assert spec is not None and spec.loader is not None
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        spec.loader.exec_module(mod)
    return sys.modules[name]


@pytest.fixture(scope="module")
def bench_sm90():  # type: ignore[no-untyped-def]
    from nvatom.arch import target

    b = _bench()
    prepared, skipped = b.prepare_all(target("sm_90a"))
    assert not skipped and len(prepared) == len(b.CASES)
    return b, prepared


def test_bench_kernels_assemble(bench_sm90) -> None:  # type: ignore[no-untyped-def]
    from nvatom.arch import target

    b, prepared = bench_sm90
    b.assemble_all(prepared)
    assert all(p.cubin for p in prepared)
    older, skipped = b.prepare_all(target("sm_80"))
    assert {s.split(":")[0] for s in skipped} == {c.name for c in b.CASES
                                                 if c.access.startswith("stsm")}
    b.assemble_all(older)


def _emulate(p) -> np.ndarray:  # type: ignore[no-untyped-def]
    """What the GPU does with the kernel's inputs, written from the PTX ISA's definitions
    (not from the bench): ldmatrix gives lane t word t % 4 of row t // 4 of matrix j, the
    8 rows read from the addresses of lanes 8j..8j+7 (.trans: of the transposed matrix);
    stmatrix is its inverse; ld/st.shared move words."""
    acc, tab = p.access, p.addresses
    nk, nreg = tab.shape[0], acc.registers
    if acc.op == "ld":
        mem16 = p.inp.view(np.uint16)
        out = np.zeros((nk, nreg, 32), dtype=np.uint32)
        for k in range(nk):
            for j in range(nreg):
                if acc.is_matrix:
                    m = np.array([mem16[a // 2:a // 2 + 8] for a in tab[k, 8 * j:8 * j + 8]],
                                 dtype=np.uint32)
                    if acc.trans:
                        m = m.T
                    for t in range(32):
                        out[k, j, t] = m[t // 4, 2 * (t % 4)] | (m[t // 4, 2 * (t % 4) + 1] << 16)
                else:
                    out[k, j] = p.inp[tab[k] // 4 + j]
        return out.reshape(-1)
    mem = np.zeros(p.smem_bytes // 4, dtype=np.uint32)
    vals = p.inp.reshape(nk, nreg, 32)
    mem16 = mem.view(np.uint16)
    for k in range(nk):
        for j in range(nreg):
            if acc.is_matrix:
                m = np.zeros((8, 8), dtype=np.uint16)
                for t in range(32):
                    m[t // 4, 2 * (t % 4)] = vals[k, j, t] & 0xFFFF
                    m[t // 4, 2 * (t % 4) + 1] = vals[k, j, t] >> 16
                if acc.trans:
                    m = m.T
                for r in range(8):
                    a = int(tab[k, 8 * j + r]) // 2
                    mem16[a:a + 8] = m[r]
            else:
                mem[tab[k] // 4 + j] = vals[k, j]
    return mem


def test_bench_checkers_accept_the_isa_semantics(bench_sm90) -> None:  # type: ignore[no-untyped-def]
    # The bench's expected values (tile coordinates, one formula with or without .trans) and
    # the ISA's per-matrix semantics above must agree on every case; a corrupted word fails.
    _, prepared = bench_sm90
    for p in prepared:
        out = _emulate(p)
        assert p.check(out) == [], p.case.name
        bad = out.copy()
        if p.access.op == "ld":
            bad[5] ^= 1
        else:  # a word the instructions wrote
            bad[int(p.addresses[0, 3]) // 4] ^= 1
        assert p.check(bad), p.case.name


def test_bench_predictions() -> None:
    b = _bench()
    want = {"ldsm_x4_rowmajor_128B": (128, 112), "ldsm_x4_sw128": (16, 0),
            "ldsm_x4_padded_144B": (16, 0), "ldsm_x4_rowmajor_32B": (8, 4),
            "ldsm_x1_rowmajor_128B": (64, 56), "ldsm_x4_trans_mn_plain": (128, 112),
            "lds32_stride32": (32, 31), "lds128_stride128B": (32, 28),
            "probe_lds128_broadcast": (4, 0)}
    for c in b.CASES:
        r = bank_conflicts(c.layout, c.access, element_bits=c.element_bits)
        if c.name in want:
            assert (r.wavefronts, r.conflicts) == want[c.name], c.name
        assert len({c.name for c in b.CASES}) == len(b.CASES)


def test_bench_ncu_parsing_and_metric_choice() -> None:
    b = _bench()
    csv_text = "\n".join([
        '==PROF== Connected to process 1',
        '"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream",'
        '"Block Size","Grid Size","Device","CC","Section Name","Metric Name","Metric Unit",'
        '"Metric Value"',
        '"0","1","python3","h","banks_ldsm_x4_sw128","1","7","(32, 1, 1)","(1, 1, 1)","0",'
        '"9.0","Command line profiler metrics",'
        '"l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ldsm.sum","","16"',
        '"0","1","python3","h","banks_ldsm_x4_sw128","1","7","(32, 1, 1)","(1, 1, 1)","0",'
        '"9.0","Command line profiler metrics",'
        '"l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ldsm.sum","","0"',
        '"0","1","python3","h","banks_ldsm_x4_sw128","1","7","(32, 1, 1)","(1, 1, 1)","0",'
        '"9.0","Command line profiler metrics",'
        '"l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum","","1,024"',
    ])
    vals = b.parse_ncu_csv(csv_text)
    assert vals == {"banks_ldsm_x4_sw128": {
        "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ldsm": 16.0,
        "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ldsm": 0.0,
        "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld": 1024.0}}
    from nvatom.arch import target

    p = b.prepare(next(c for c in b.CASES if c.name == "ldsm_x4_sw128"), target("sm_90a"))
    m = b.measured(p, vals)
    assert (m.wavefronts, m.conflicts) == (16, 0) and m.matches(p.report)
    assert m.wavefront_metric.endswith("op_ldsm")
    # A GPU that counts ldmatrix under op_ld: op_ldsm reads 0, op_ld is taken.
    alt = {p.kernel: {"l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ldsm": 0.0,
                      "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld": 16.0,
                      "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld": 0.0}}
    m = b.measured(p, alt)
    assert m.wavefront_metric.endswith("op_ld") and m.matches(p.report)
    # Metric choice: hardware counter first, SASS form as fallback; none -> error listing.
    avail = {"l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld",
             "smsp__sass_l1tex_data_pipe_lsu_wavefronts_mem_shared_op_ldsm",
             "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld",
             "smsp__inst_executed_op_ldsm", "l1tex__t_bytes"}
    assert b.choose_metrics(avail) == [
        "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld",
        "smsp__sass_l1tex_data_pipe_lsu_wavefronts_mem_shared_op_ldsm",
        "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld",
        "smsp__inst_executed_op_ldsm"]
    with pytest.raises(b.NcuError, match="shared-memory metrics this ncu offers"):
        b.choose_metrics({"l1tex__t_bytes", "l1tex__data_pipe_lsu_wavefronts_mem_shared"})


def test_bank_conflicts_refuses_a_layout_larger_than_shared_memory() -> None:
    # checked before walking the layout (a 1M x 8 layout used to take 23 s and 1.8 GB)
    from nvatom.atoms.smem import SMEM_BYTES_LIMIT, SmemError, bank_conflicts

    with pytest.raises(SmemError, match=f"the limit is {SMEM_BYTES_LIMIT} bytes"):
        bank_conflicts("(1000000,8):(8,1)", "lds.32")
    assert bank_conflicts(f"({SMEM_BYTES_LIMIT // 4 // 32},32):(32,1)", "lds.32").instructions
