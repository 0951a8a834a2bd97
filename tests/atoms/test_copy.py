"""Copy atoms (nvatom.atoms.copy) against independent sources, without ptxas.

* the ldmatrix/stmatrix (thread, value) layouts equal CUTLASS's ``Copy_Traits`` (typed in
  below as known answers, with the header they come from) where CUTLASS issues the bare
  instruction; its .m16n16 loads shuffle bytes afterwards and match ours only through that
  shuffle.  The PTX ISA's per-lane rules are tests/atoms/test_copy_isa_layouts.py;
* ``ldsm_matches_mma`` / ``row_addresses`` agree with the well-known ldmatrix recipes for
  mma.sync operands, and reject the mismatches;
* ``vectorize_copy`` vectorises what CuTe would and fails with the specification's two
  templates byte for byte;
* each verifier diagnostic has a negative test; contracts and names.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable

import pytest

from nvatom import diagnostics as D
from nvatom.arch import Tier
from nvatom.atoms import copy as C
from nvatom.atoms.interfaces import (
    AsyncCopyAtom,
    AtomVerificationError,
    CopyAtom,
    interfaces_of,
    verify_atom_instance,
)
from nvatom.atoms.registry import mma_form
from nvatom.atoms.verify import OperandUse
from nvatom.layout import Layout, Swizzle, layouts_equivalent, make_composed_layout, size

# --------------------------------------------------------------------------- CUTLASS answers
# include/cute/atom/copy_traits_sm75.hpp (NVIDIA/cutlass @ 474c1fd4): SrcLayout / DstLayout
# of SM75_U32x{1,2,4}_LDSM_N and SM75_U16x{2,4,8}_LDSM_T, in bits.
_SRC_X1 = Layout(((8, 4), 128), ((128, 0), 1))
_SRC_X2 = Layout(((16, 2), 128), ((128, 0), 1))
_SRC_X4 = Layout((32, 128), (128, 1))
CUTLASS_SM75 = {
    "atom.ldsm<m8n8.x1>": (_SRC_X1, Layout((32, 32), (32, 1))),
    "atom.ldsm<m8n8.x2>": (_SRC_X2, Layout((32, (32, 2)), (32, (1, 1024)))),
    "atom.ldsm<m8n8.x4>": (_SRC_X4, Layout((32, (32, 4)), (32, (1, 1024)))),
    "atom.ldsm<m8n8.x1.trans>": (_SRC_X1, Layout(((4, 8), (16, 2)), ((256, 16), (1, 128)))),
    "atom.ldsm<m8n8.x2.trans>": (_SRC_X2, Layout(((4, 8), (16, 2, 2)),
                                                 ((256, 16), (1, 128, 1024)))),
    "atom.ldsm<m8n8.x4.trans>": (_SRC_X4, Layout(((4, 8), (16, 2, 4)),
                                                 ((256, 16), (1, 128, 1024)))),
}
# include/cute/atom/copy_traits_sm100.hpp (NVIDIA/cutlass @ 17f8157a): SM100_U8x4/8/16_STSM_T,
# SM100_SU{4,6}_DU8x16_x{1,2,4}_LDSM_N (same bit layouts as the SM75 non-transposed loads),
# SM100_U8x8_LDSM_T and SM100_U8x16_LDSM_T.
CUTLASS_SM100 = {
    "atom.stsm<m16n8.x1.trans.b8>": (Layout(((4, 8), (8, 2, 2)), ((256, 8), (1, 128, 64))),
                                     _SRC_X1),
    "atom.stsm<m16n8.x2.trans.b8>": (Layout(((4, 8), (8, 2, 2, 2)),
                                            ((256, 8), (1, 128, 64, 1024))), _SRC_X2),
    "atom.stsm<m16n8.x4.trans.b8>": (Layout(((4, 8), (8, 2, 2, 4)),
                                            ((256, 8), (1, 128, 64, 1024))), _SRC_X4),
    **{f"atom.ldsm<m8n16.x{n}.b8x16.b{b}x16_p{p}>": CUTLASS_SM75[f"atom.ldsm<m8n8.x{n}>"]
       for n in (1, 2, 4) for b, p in ((4, 64), (6, 32))},
}
# SM100_U8x8_LDSM_T / SM100_U8x16_LDSM_T (copy_sm100.hpp) issue ldmatrix .m16n16 and then
# rearrange the bytes of each register pair: dst0 = {tmp0.x, tmp0.y, tmp1.x, tmp1.y}, dst1 =
# {tmp0.z, tmp0.w, tmp1.z, tmp1.w}.  Their layouts describe the registers after that shuffle
# (and order their reference rows differently), so they are a cross-check of the bare
# instruction's layout only through the shuffle (test_cutlass_m16n16_is_the_bare_load_shuffled).
CUTLASS_SM100_M16N16_SHUFFLED = {
    "atom.ldsm<m16n16.x1.trans.b8>": (
        Layout(((2, 2, 4, 2), 128), ((128, 1024, 256, 0), 1)),
        Layout(((4, 8), (8, 2, 2, 2)), ((256, 8), (1, 128, 64, 1024)))),
    "atom.ldsm<m16n16.x2.trans.b8>": (
        Layout(((2, 2, 4, 2), 128), ((128, 1024, 256, 2048), 1)),
        Layout(((4, 8), (8, 2, 2, 4)), ((256, 8), (1, 128, 64, 1024)))),
}


def _atom(name: str) -> C.MatrixCopy:
    a = C.copy_atom(name)
    assert isinstance(a, C.MatrixCopy)
    return a


@pytest.mark.parametrize("name", sorted(CUTLASS_SM75))
def test_ldsm_layouts_match_cutlass_sm75(name: str) -> None:
    src, dst = CUTLASS_SM75[name]
    a = _atom(name)
    assert layouts_equivalent(a.src_layout(1), src), (a.src_layout(1), src)
    assert layouts_equivalent(a.dst_layout(1), dst), (a.dst_layout(1), dst)
    assert size(a.src_layout(1)[0]) == size(a.dst_layout(1)[0]) == 32


@pytest.mark.parametrize("name", sorted(CUTLASS_SM75))
def test_stsm_layouts_are_the_ldsm_ones_swapped(name: str) -> None:
    """include/cute/atom/copy_traits_sm90.hpp: SM90_*_STSM_* use the LDSM layouts swapped."""
    src, dst = CUTLASS_SM75[name]
    s = _atom(name.replace("atom.ldsm", "atom.stsm"))
    assert layouts_equivalent(s.src_layout(1), dst)
    assert layouts_equivalent(s.dst_layout(1), src)


@pytest.mark.parametrize("name", sorted(CUTLASS_SM100))
def test_sm100_layouts_match_cutlass(name: str) -> None:
    src, dst = CUTLASS_SM100[name]
    a = _atom(name)
    assert layouts_equivalent(a.src_layout(1), src), (a.src_layout(1), src)
    assert layouts_equivalent(a.dst_layout(1), dst), (a.dst_layout(1), dst)


def _lane_bits(src: Layout, dst: Callable[[int, int], int], nbits: int
               ) -> list[tuple[int, int]]:
    """For each destination (thread, bit): (source lane, bit of its row) that supplies it,
    the first lane when several address the same row."""
    where: dict[int, tuple[int, int]] = {}
    nthr, nval = size(src[0]), size(src[1])
    for lane, b in itertools.product(range(nthr), range(nval)):
        where.setdefault(src(lane, b), (lane, b))
    return [where[dst(t, v)] for v in range(nbits) for t in range(32)]


def _cutlass_shuffle(bare: Layout) -> Callable[[int, int], int]:
    """CUTLASS's register p-pair shuffle applied to the bare (thread, bit) layout: its register
    2p + d, byte b is the bare register 2p + b / 2, byte 2d + b % 2."""

    def f(t: int, bit: int) -> int:
        reg, rest = divmod(bit, 32)
        byte, u = divmod(rest, 8)
        p, d = divmod(reg, 2)
        return bare(t, 32 * (2 * p + byte // 2) + 8 * (2 * d + byte % 2) + u)

    return f


@pytest.mark.parametrize("name", sorted(CUTLASS_SM100_M16N16_SHUFFLED))
def test_cutlass_m16n16_is_the_bare_load_shuffled(name: str) -> None:
    """Cross-check, not ground truth: our .m16n16 layout (the ISA's, see
    test_copy_isa_layouts.py) followed by CUTLASS's byte shuffle is CUTLASS's layout, so the
    two differ exactly by that shuffle (docs/copy-atoms.md)."""
    src, dst = CUTLASS_SM100_M16N16_SHUFFLED[name]
    a = _atom(name)
    nbits = size(dst[1])
    ours = _lane_bits(a.src_layout(1), _cutlass_shuffle(a.dst_layout(1)), nbits)
    assert ours == _lane_bits(src, dst, nbits)
    # the shuffle is not the identity: CUTLASS's layout is not the instruction's
    assert _lane_bits(a.src_layout(1), a.dst_layout(1), nbits) != ours
    # ... and the decompressing variants share the 8-bit layouts.
    for fmt in ("b8x16.b6x16_p32", "b8x16.b4x16_p64"):
        d = _atom(name.replace(".b8>", f".{fmt}>"))
        assert layouts_equivalent(d.dst_layout(1), a.dst_layout(1))


# --------------------------------------------------------------------------- table


def test_table_shape() -> None:
    ldsm = C.copy_atoms(mnemonic="atom.ldsm")
    stsm = C.copy_atoms(mnemonic="atom.stsm")
    assert len(ldsm) == 6 + 6 + 6 and len(stsm) == 6 + 3
    assert len(C.ASYNC_COPIES) == 4 * 4 * 2 * 3
    assert {a.vector_access.suffix for a in C.UNIVERSAL_COPIES} == {
        ".b8", ".b16", ".v2.b8", ".b32", ".v2.b16", ".v4.b8", ".b64", ".v2.b32", ".v4.b16",
        ".v4.b32", ".v2.b64"}
    for a in C.MATRIX_COPIES:
        assert a.registers == a.num * a.shape.regs
        assert a.address_lanes * a.cols * a.fmt.reg_bits == a.num * a.shape.m * a.shape.n * \
            a.fmt.reg_bits
    # The specification's table (#copy-atom-contracts): 2, 4, 8 elements per lane for x1, x2, x4
    # (16-bit).
    for n, per_lane in ((1, 2), (2, 4), (4, 8)):
        assert _atom(f"atom.ldsm<m8n8.x{n}>").elements_per_lane == per_lane


def test_names_and_lookup() -> None:
    assert C.copy_atom("atom.ldsm<m8n8.x4.trans>").opcode == \
        "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16"
    assert C.copy_atom("atom.ldsm<m8n8>") is C.copy_atom("atom.ldsm<m8n8.x1>")  # seed spelling
    assert C.copy_atom("atom.stsm<m16n8.x4.trans.b8>").opcode == \
        "stmatrix.sync.aligned.m16n8.x4.trans.shared.b8"
    assert C.copy_atom("atom.universal_copy<128>").ld_opcode("gmem") == "ld.global.v4.b32"
    assert C.copy_atom("atom.universal_copy<128>.v2.b64").st_opcode("lmem") == \
        "st.local.v2.b64"
    a = C.copy_atom("atom.simt_async_copy<16>.ca.L2::cache_hint.L2::256B.src_size")
    assert isinstance(a, C.SimtAsyncCopy)
    assert a.opcode == "cp.async.ca.shared.global.L2::cache_hint.L2::256B"
    assert a.operands("%r1", "%rd2", "%r3", "%rd4") == ["[%r1]", "[%rd2]", "16", "%r3", "%rd4"]
    with pytest.raises(C.CopyAtomError, match="nearest: atom.ldsm<m8n8.x4.trans>"):
        C.copy_atom("atom.ldsm<m8n8.x4.tran>")
    assert {a.mnemonic for a in C.copy_atoms("sm_80")} == {
        "atom.universal_copy", "atom.ldsm", "atom.simt_async_copy"}
    assert {a.mnemonic for a in C.copy_atoms("sm_70")} == {"atom.universal_copy"}


# --------------------------------------------------------------------------- feeding an MMA

F16 = "sm80.mma.m16n8k16.f32.f16.f16.f32"
F16_ACC16 = "sm80.mma.m16n8k16.f16.f16.f16.f16"
MATCHES = [
    # (copy atom, MMA form, operand, major): the recipes every ldmatrix GEMM uses.
    ("atom.ldsm<m8n8.x4>", F16, "A", "K"),
    ("atom.ldsm<m8n8.x4.trans>", F16, "A", "M"),
    ("atom.ldsm<m8n8.x2>", F16, "B", "K"),
    ("atom.ldsm<m8n8.x2.trans>", F16, "B", "N"),
    ("atom.ldsm<m8n8.x4>", "sm80.mma.m16n8k16.f32.bf16.bf16.f32", "A", "K"),
    ("atom.ldsm<m8n8.x2>", "sm75.mma.m16n8k8.f32.f16.f16.f32", "A", "K"),
    ("atom.ldsm<m8n8.x1>", "sm75.mma.m16n8k8.f32.f16.f16.f32", "B", "K"),
    ("atom.ldsm<m8n8.x1.trans>", "sm75.mma.m16n8k8.f32.f16.f16.f32", "B", "N"),
    ("atom.ldsm<m8n8.x4>", "sm80.mma.m16n8k32.s32.s8.s8.s32", "A", "K"),  # bytes in b16 pairs
    ("atom.ldsm<m8n8.x2>", "sm80.mma.m16n8k32.s32.s8.s8.s32", "B", "K"),
    ("atom.ldsm<m8n8.x4>", "sm80.mma.m16n8k8.f32.tf32.tf32.f32", "A", "K"),
    ("atom.ldsm<m8n8.x4>", "sm89.mma.m16n8k32.f32.e4m3.e4m3.f32", "A", "K"),
    ("atom.ldsm<m8n16.x4.b8x16.b4x16_p64>", "sm89.mma.m16n8k32.f32.e4m3.e4m3.f32", "A", "K"),
    # the bare .m16n16 .trans load: register i is row g + 8 i, columns 4q..4q+3 -- the 8-bit
    # A fragment of an M-major tile (matrix j: K 16 j .. 16 j + 15)
    ("atom.ldsm<m16n16.x2.trans.b8>", "sm89.mma.m16n8k32.f32.e4m3.e4m3.f32", "A", "M"),
    ("atom.ldsm<m16n16.x1.trans.b8>", "sm80.mma.m16n8k16.s32.s8.s8.s32", "A", "M"),
]
MISMATCHES = [
    ("atom.ldsm<m8n8.x4>", F16, "A", "M"),  # an M-major tile needs .trans
    ("atom.ldsm<m8n8.x4.trans>", F16, "A", "K"),
    ("atom.ldsm<m8n8.x2.trans>", F16, "B", "K"),
    ("atom.ldsm<m8n8.x2>", F16, "A", "K"),  # 4 values per lane, A has 8
    ("atom.ldsm<m8n8.x4>", F16, "B", "K"),
    ("atom.ldsm<m8n8.x4.trans>", "sm80.mma.m16n8k32.s32.s8.s8.s32", "A", "M"),  # 16-bit units
    ("atom.ldsm<m8n8.x4.trans>", "sm80.mma.m16n8k8.f32.tf32.tf32.f32", "A", "M"),
    ("atom.ldsm<m8n8.x1>", "sm70.mma.m8n8k4.row.col.f32.f16.f16.f32", "A", "K"),  # 8 threads
    ("atom.ldsm<m16n16.x1.trans.b8>", "sm89.mma.m16n8k32.f32.e4m3.e4m3.f32", "B", "N"),
    ("atom.ldsm<m16n16.x2.trans.b8>", "sm89.mma.m16n8k32.f32.e4m3.e4m3.f32", "A", "K"),
]


@pytest.mark.parametrize(("copy", "form", "op", "major"), MATCHES)
def test_ldsm_feeds_mma(copy: str, form: str, op: str, major: str) -> None:
    assert C.ldsm_matches_mma(_atom(copy), form, op, major)


@pytest.mark.parametrize(("copy", "form", "op", "major"), MISMATCHES)
def test_ldsm_does_not_feed_mma(copy: str, form: str, op: str, major: str) -> None:
    assert not C.ldsm_matches_mma(_atom(copy), form, op, major)
    with pytest.raises(C.CopyAtomError, match="does not move operand"):
        C.row_addresses(_atom(copy), form, op, major)


def test_major_is_required_and_speaks_k_and_mn() -> None:
    """No default (it would flip with .trans): leaving ``major`` out is one clear error."""
    assert C.ldsm_matches_mma(_atom("atom.ldsm<m8n8.x4>"), F16, "A", major="K")
    assert C.ldsm_matches_mma(_atom("atom.ldsm<m8n8.x4.trans>"), mma_form(F16), "A",
                              major="MN")
    assert C.ldsm_matches_mma(_atom("atom.ldsm<m8n8.x2.trans>"), F16, "B", "MN")
    assert C.ldsm_matches_mma(_atom("atom.ldsm<m8n8.x2.trans>"), F16, "B", "N")
    for fn, atom, op in ((C.ldsm_matches_mma, "atom.ldsm<m8n8.x4>", "A"),
                         (C.stsm_matches_mma, "atom.stsm<m8n8.x2>", "C"),
                         (C.row_addresses, "atom.ldsm<m8n8.x4.trans>", "A")):
        with pytest.raises(C.CopyAtomError, match=rf"^{fn.__name__}\(\) needs major=: the "
                           r"operand tile's contiguous dimension .* flips with \.trans$"):
            fn(_atom(atom), F16_ACC16, op)


def test_row_addresses_are_the_textbook_ones() -> None:
    """x4 of a K-major 16 x 16 A tile: lane l points at row l % 16, column 8 (l / 16); x2.trans
    of an N-major 16 x 8 B tile (K rows of 8): lane l at row l; x4.trans of an M-major A:
    matrices (m0-7,k0-7), (m8-15,k0-7), (m0-7,k8-15), (m8-15,k8-15)."""
    a = C.row_addresses(_atom("atom.ldsm<m8n8.x4>"), F16, "A", major="K")
    assert [a(lane) for lane in range(32)] == [(lane % 16) * 16 + 8 * (lane // 16)
                                               for lane in range(32)]
    b = C.row_addresses(_atom("atom.ldsm<m8n8.x2.trans>"), F16, "B", major="MN")
    assert [b(lane) for lane in range(16)] == [8 * lane for lane in range(16)]
    at = C.row_addresses(_atom("atom.ldsm<m8n8.x4.trans>"), F16, "A", major="MN")
    assert [at(lane) for lane in range(32)] == [
        (lane % 8) * 16 + 8 * ((lane // 8) % 2) + 128 * (lane // 16) for lane in range(32)]
    # .m16n16.x2.trans and an M-major 16 x 32 8-bit A tile (16 M-bytes per K): lane l at K row l
    b8 = C.row_addresses(_atom("atom.ldsm<m16n16.x2.trans.b8>"),
                         "sm89.mma.m16n8k32.f32.e4m3.e4m3.f32", "A", "M")
    assert [b8(lane) for lane in range(32)] == [16 * lane for lane in range(32)]


def test_stsm_stores_the_accumulator() -> None:
    x2, x2t = _atom("atom.stsm<m8n8.x2>"), _atom("atom.stsm<m8n8.x2.trans>")
    assert C.stsm_matches_mma(x2, F16_ACC16, "C", major="N")  # N-major (row-major) C
    assert C.stsm_matches_mma(x2t, F16_ACC16, "D", major="M")  # M-major
    assert not C.stsm_matches_mma(x2, F16_ACC16, "C", "M")
    # f32: 32-bit pairs
    assert not C.stsm_matches_mma(_atom("atom.stsm<m8n8.x4>"), F16, "C", major="N")
    assert C.row_addresses(x2, F16_ACC16, "C", major="N")(9) == 9 * 8  # row 9 of a 16 x 8 tile
    with pytest.raises(C.CopyAtomError, match="not an ldmatrix"):
        C.ldsm_matches_mma(x2, F16_ACC16, "C", major="N")
    with pytest.raises(C.CopyAtomError, match="not an stmatrix"):
        C.stsm_matches_mma(_atom("atom.ldsm<m8n8.x2>"), F16_ACC16, "C", major="N")
    with pytest.raises(C.CopyAtomError, match="major must be"):
        C.stsm_matches_mma(x2, F16_ACC16, "C", "K")


# --------------------------------------------------------------------------- vectorisation

# The specification's copy-atom contracts (docs/spec-deviations.md#copy-atom-contracts), typed
# in from the specification text (not from our module).
SPEC_STRIDES_ONE = "'{0}' cannot vectorize copy to {1} elements (static strides must be 1)"
SPEC_STRIDES_MATCH = "'{0}' cannot vectorize copy to {1} elements (static strides must match)"


def test_templates_are_the_specification_s() -> None:
    assert SPEC_STRIDES_ONE == D.VECTORIZE_STRIDES_ONE
    assert SPEC_STRIDES_MATCH == D.VECTORIZE_STRIDES_MATCH


@pytest.mark.parametrize(("src", "dst", "bits", "want"), [
    (Layout(64, 1), Layout(64, 1), 16, 8),  # 128 bits of f16
    (Layout(64, 1), Layout(64, 1), 32, 4),
    (Layout(64, 1), Layout(64, 1), 8, 16),
    (Layout(8, 1), Layout((4, 2), (1, 8)), 16, 4),  # dst contiguous in fours
    (Layout((4, 8), (1, 4)), Layout((4, 8), (8, 1)), 16, 1),  # transpose: no common vector
    (Layout(6, 1), Layout(6, 1), 32, 2),  # 6 elements: pairs, never four
    (Layout(64, 2), Layout(64, 1), 16, 1),
])
def test_vectorize_picks_the_widest(src: Layout, dst: Layout, bits: int, want: int) -> None:
    assert C.vectorize_copy(src, dst, bits) == want


def test_vectorize_swizzled() -> None:
    # 128B swizzle of 16-bit elements: 8-element (16-byte) chunks stay contiguous.
    sw = make_composed_layout(Swizzle(3, 3, 3), 0, Layout((8, 64), (64, 1)))
    assert C.vectorize_copy(sw, Layout((8, 64), (64, 1)), 16) == 8
    assert C.vectorize_copy(sw, Layout((8, 64), (64, 1)), 16, 64) == 4


def test_a_swizzle_too_fine_for_the_access_is_the_specifications_diagnostic() -> None:
    """Sw<3,2,3> permutes 4-element units of f16: no 8-element (16-byte) access survives it.
    The message is the specification's "cannot vectorize copy" with the reason, never the
    layout algebra's (the swizzled layout has no right inverse to give)."""
    name = "atom.simt_async_copy<16>"
    fine = make_composed_layout(Swizzle(3, 2, 3), 0, Layout((8, 64), (64, 1)))
    assert C.vectorize_copy(fine, Layout((8, 64), (64, 1)), 16) == 4
    want = ("'atom.simt_async_copy<16>' cannot vectorize copy to 8 elements (static strides "
            "must be 1): the swizzle Sw<3,2,3> permutes units of 4 16-bit element(s), less "
            "than the 16-byte access")
    for src, dst in ((Layout((8, 64), (64, 1)), fine), (fine, Layout((8, 64), (64, 1)))):
        with pytest.raises(AtomVerificationError) as e:
            C.vectorize_copy(src, dst, 16, vector=8, name=name)
        assert str(e.value) == want
    assert C.swizzle_unit(Swizzle(3, 2, 3)) == 4 and C.swizzle_unit(Swizzle(3, 4, 3)) == 16
    # an ldmatrix row: 16 bytes, 8 f16 (the IR's verifier passes the row's width)
    row = make_composed_layout(Swizzle(3, 2, 3), 0, Layout((32, 8), (64, 1)))
    with pytest.raises(AtomVerificationError, match=r"'atom.ldsm<m8n8.x4>' cannot vectorize "
                       r"copy to 8 elements \(static strides must be 1\): the swizzle "
                       r"Sw<3,2,3> permutes units of 4 16-bit"):
        C.swizzle_too_fine("atom.ldsm<m8n8.x4>", row, 8, 16)
    C.swizzle_too_fine("atom.ldsm<m8n8.x4>", Layout((32, 8), (64, 1)), 8, 16)  # no swizzle
    C.swizzle_too_fine("atom.ldsm<m8n8.x4>",
                       make_composed_layout(Swizzle(3, 3, 3), 0, Layout((32, 8), (64, 1))), 8, 16)


def test_vectorize_diagnostics_byte_for_byte() -> None:
    name = "atom.universal_copy<128>"
    with pytest.raises(AtomVerificationError) as e:
        C.vectorize_copy(Layout(64, 1), Layout(64, 2), 16, vector=8, name=name)
    assert str(e.value) == SPEC_STRIDES_ONE.format(name, 8)
    assert str(e.value) == \
        "'atom.universal_copy<128>' cannot vectorize copy to 8 elements (static strides must be 1)"
    with pytest.raises(AtomVerificationError) as e:
        C.vectorize_copy(Layout((4, 8), (1, 4)), Layout((4, 8), (8, 1)), 16, vector=4,
                         name=name)
    assert str(e.value) == SPEC_STRIDES_MATCH.format(name, 4)
    # A run of 2 on one side only is "must be 1" for 4.
    with pytest.raises(AtomVerificationError, match=r"must be 1\)$"):
        C.vectorize_copy(Layout(8, 1), Layout((2, 4), (1, 4)), 32, vector=4, name=name)
    assert C.vectorize_copy(Layout(8, 1), Layout((2, 4), (1, 4)), 32, vector=2) == 2


def test_vectorize_illegal_width_is_our_own_message() -> None:
    with pytest.raises(AtomVerificationError, match="legal widths are 8, 16, 32, 64, 128 bits"):
        C.vectorize_copy(Layout(8, 1), Layout(8, 1), 16, vector=3)
    with pytest.raises(AtomVerificationError, match=r"\(256 bits\)"):
        C.vectorize_copy(Layout(64, 1), Layout(64, 1), 16, vector=16)


# --------------------------------------------------------------------------- verification


def _use(src: str, dst: str, t: str = "f16", src_layout: object = None,
         dst_layout: object = None, dst_type: str | None = None) -> C.CopyUse:
    return C.CopyUse(OperandUse(t, src, src_layout), OperandUse(dst_type or t, dst, dst_layout))


def _fails(atom: object, target: str, use: object, text: str) -> None:
    with pytest.raises(AtomVerificationError) as e:
        verify_atom_instance(atom, target, use)
    assert str(e.value) == text


def test_correct_uses_verify() -> None:
    x4 = _atom("atom.ldsm<m8n8.x4>")
    verify_atom_instance(x4, "sm_80", _use("smem", "rmem", "f16", x4.src_layout(16),
                                           x4.dst_layout(16)))
    verify_atom_instance(x4, "sm_75", _use("smem", "rmem", "s8", None, x4.dst_layout(8)))
    s = _atom("atom.stsm<m8n8.x4.trans>")
    verify_atom_instance(s, "sm_90a", _use("rmem", "smem", "bf16", s.src_layout(), None))
    verify_atom_instance(_atom("atom.ldsm<m16n16.x2.trans.b8x16.b4x16_p64>"), "sm_100a",
                         _use("smem", "rmem", "e2m1"))
    cp = C.copy_atom("atom.simt_async_copy<16>")
    verify_atom_instance(cp, "sm_80", _use("gmem", "smem", "f16", Layout((8, 4), (1, 8)),
                                           Layout(32, 1)))
    u = C.copy_atom("atom.universal_copy<64>")
    for src, dst in itertools.product(("rmem", "gmem", "smem", "lmem"), repeat=2):
        verify_atom_instance(u, "sm_70", _use(src, dst, "f32", Layout(4, 1), Layout(4, 1)))


def test_target_diagnostics() -> None:
    x4 = _atom("atom.ldsm<m8n8.x4>")
    _fails(x4, "sm_72", _use("smem", "rmem"),
           "atom 'atom.ldsm<m8n8.x4>' needs tier SM75, but target sm_72 is tier SM70")
    _fails(_atom("atom.stsm<m8n8.x1>"), "sm_89", _use("rmem", "smem"),
           "atom 'atom.stsm<m8n8.x1>' needs tier SM90, but target sm_89 is tier SM89")
    _fails(C.copy_atom("atom.simt_async_copy<4>"), "sm_75", _use("gmem", "smem", "f32"),
           "atom 'atom.simt_async_copy<4>' needs tier SM80, but target sm_75 is tier SM75")
    with pytest.raises(AtomVerificationError, match="is not available on sm_100: it needs"):
        verify_atom_instance(_atom("atom.ldsm<m16n16.x1.trans.b8>"), "sm_100",
                             _use("smem", "rmem", "u8"))
    with pytest.raises(AtomVerificationError, match="needs tier SM100, but target sm_90a"):
        verify_atom_instance(_atom("atom.stsm<m16n8.x1.trans.b8>"), "sm_90a",
                             _use("rmem", "smem", "u8"))


def test_residency_diagnostics() -> None:
    _fails(_atom("atom.ldsm<m8n8.x4>"), "sm_80", _use("gmem", "rmem"),
           "'atom.ldsm<m8n8.x4>' copies smem -> rmem, but got src: memref<f16, gmem>, "
           "dst: memref<f16, rmem>")
    _fails(_atom("atom.stsm<m8n8.x2>"), "sm_90", _use("rmem", "rmem"),
           "'atom.stsm<m8n8.x2>' copies rmem -> smem, but got src: memref<f16, rmem>, "
           "dst: memref<f16, rmem>")
    _fails(C.copy_atom("atom.simt_async_copy<16>"), "sm_80", _use("smem", "smem"),
           "'atom.simt_async_copy<16>' copies gmem -> smem, but got src: memref<f16, smem>, "
           "dst: memref<f16, smem>")
    with pytest.raises(AtomVerificationError, match=re.escape("copies rmem|gmem|smem|lmem")):
        verify_atom_instance(C.copy_atom("atom.universal_copy<32>"), "sm_100a",
                             _use("tmem", "rmem", "f32"))


def test_element_diagnostics() -> None:
    _fails(_atom("atom.ldsm<m8n8.x4.trans>"), "sm_80", _use("smem", "rmem", "s8"),
           "'atom.ldsm<m8n8.x4.trans>' moves 16-bit elements (.trans moves 16-bit units), "
           "but got s8 (8 bits)")
    _fails(_atom("atom.ldsm<m8n8.x4>"), "sm_80", _use("smem", "rmem", "f64"),
           "'atom.ldsm<m8n8.x4>' moves elements of 1, 2, 4, 8, 16 or 32 bits (none may "
           "straddle a register), but got f64 (64 bits)")
    _fails(_atom("atom.ldsm<m8n16.x1.b8x16.b6x16_p32>"), "sm_100a", _use("smem", "rmem", "e2m1"),
           "'atom.ldsm<m8n16.x1.b8x16.b6x16_p32>' moves 6-bit elements, but got e2m1 (4 bits)")
    _fails(C.copy_atom("atom.universal_copy<32>"), "sm_80", _use("gmem", "rmem", "f64"),
           "'atom.universal_copy<32>' moves 32-bit vectors of whole elements, but got f64 "
           "(64 bits)")
    _fails(C.copy_atom("atom.simt_async_copy<4>"), "sm_80",
           _use("gmem", "smem", "f16", dst_type="f32"),
           "'atom.simt_async_copy<4>' copies one element type, but got src: f16, dst: f32")


def test_layout_diagnostics() -> None:
    x2 = _atom("atom.ldsm<m8n8.x2>")
    wrong = _atom("atom.ldsm<m8n8.x2.trans>").dst_layout(16)
    _fails(x2, "sm_80", _use("smem", "rmem", "f16", None, wrong),
           f"'atom.ldsm<m8n8.x2>' expects dst layout {x2.dst_layout(16)}, but got {wrong}")
    _fails(C.copy_atom("atom.universal_copy<128>"), "sm_80",
           _use("gmem", "smem", "f16", Layout(64, 2), Layout(64, 1)),
           SPEC_STRIDES_ONE.format("atom.universal_copy<128>", 8))
    _fails(C.copy_atom("atom.simt_async_copy<8>"), "sm_80",
           _use("gmem", "smem", "f16", Layout((4, 8), (1, 4)), Layout((4, 8), (8, 1))),
           SPEC_STRIDES_MATCH.format("atom.simt_async_copy<8>", 4))


def test_not_a_copy_use() -> None:
    with pytest.raises(AtomVerificationError, match="verifies a CopyUse"):
        verify_atom_instance(_atom("atom.ldsm<m8n8.x1>"), "sm_80", object())


# --------------------------------------------------------------------------- contracts


def test_interfaces_and_contracts() -> None:
    x4, cp = _atom("atom.ldsm<m8n8.x4>"), C.copy_atom("atom.simt_async_copy<16>")
    assert interfaces_of(x4) == ("CopyAtom",)
    assert interfaces_of(cp) == ("CopyAtom", "AsyncCopyAtom")
    assert isinstance(cp, CopyAtom) and isinstance(cp, AsyncCopyAtom)
    assert x4.contract() == C.CopyContract(Tier.SM75, ("smem",), ("rmem",), 128, False)
    assert cp.contract().is_async and cp.contract().value_bits == 128
    assert cp.contract().source == ("gmem",) and cp.contract().destination == ("smem",)
    u = C.copy_atom("atom.universal_copy<8>").contract()
    assert u.min_tier is None and u.source == u.destination == ("rmem", "gmem", "smem", "lmem")


def test_registry_records_agree_with_the_tables() -> None:
    from nvatom.atoms.registry import ATOMS

    mnemonics = {a.mnemonic for a in C.COPY_ATOMS}
    if not mnemonics <= set(ATOMS):
        pytest.skip("nvatom.atoms.registry.ATOMS has no copy atom records yet")
    for m in mnemonics:
        atoms = [a for a in C.COPY_ATOMS if a.mnemonic == m]
        tiers = {a.tier for a in atoms}
        assert ATOMS[m].min_tier == (None if None in tiers else min(tiers)), m  # type: ignore
        assert set(ATOMS[m].interfaces) == set(interfaces_of(atoms[0])), m


def test_cache_policy_data() -> None:
    assert C.default_cache_policy(16) == C.CachePolicy("cg")
    assert C.default_cache_policy(4) == C.default_cache_policy(8) == C.CachePolicy("ca")
    assert C.SimtAsyncCopy(16, C.CachePolicy("ca")).name == "atom.simt_async_copy<16>.ca"
    with pytest.raises(C.CopyAtomError, match="copies 16 bytes, not 4"):
        C.SimtAsyncCopy(4, C.CachePolicy("cg"))
    with pytest.raises(C.CopyAtomError, match="prefetch size 32"):
        C.CachePolicy("ca", 32)
    assert C.SimtAsyncCopy(8).min_ptx == (7, 0)
    assert C.SimtAsyncCopy(8, C.CachePolicy("ca", 128)).min_ptx == (7, 4)
    assert C.SimtAsyncCopy(16, fill="ignore_src").min_ptx == (7, 5)
    with pytest.raises(C.CopyAtomError, match="cache-policy operand is required"):
        C.SimtAsyncCopy(16, C.CachePolicy("cg", None, True)).operands("a", "b")
