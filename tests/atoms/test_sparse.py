"""Structured sparsity (nvatom.atoms.sparse) against the PTX ISA, CUTLASS and the GPU.

Sources, transcribed here independently of the module:

* PTX ISA 9.7.14.6.1 "Sparse matrix storage": granularity per type, the invalid and the
  meaningful metadata values, and which threads of a group the sparsity selector names;
* PTX ISA 9.7.14.6.2.x "Matrix Fragments for sparse mma.*": one ``.b32`` metadata register
  of sixteen 2-bit (tf32: eight 4-bit) fields;
* the metadata figures of those sections are pictures; in their place, the map measured on
  an H200 (build/nvatom_probe, docs/fragments.md): for every lane, nibble and selector the
  probe changed one nibble and recorded which (row, chunk) of the dense A moved;
* CUTLASS 4.2 ``ELayout`` of ``SM120_SPARSE_16x8x64_TN`` / ``..._16x8x128_TN_VS``
  (mma_traits_sm120_sparse.hpp) and of wgmma.sp (mma_traits_sm90_gmma_sparse.hpp).
"""

from __future__ import annotations

import dataclasses
import zlib
from collections.abc import Callable, Iterable

import numpy as np
import pytest

from nvatom.atoms import registry, sparse
from nvatom.atoms.mma import MmaForm
from nvatom.layout import parse_layout, size

SPARSE_FORMS = [f for f in registry.mma_forms() if f.is_sparse]
CASES = [(f, s) for f in SPARSE_FORMS for s in f.selectors]


def _ids(x: object) -> str:
    return x.name if isinstance(x, MmaForm) else f"sel{x}"


def _family(form: MmaForm) -> str:
    return {"f16": "16", "bf16": "16", "tf32": "tf32", "s8": "i8", "u8": "i8", "e4m3": "i8",
            "e5m2": "i8", "s4": "i4", "u4": "i4"}[form.a.name]


# ---------------------------------------------------------------- ISA "Sparse matrix storage"
# A type -> (chunk width, non-zeros kept per chunk)
ISA_GRANULARITY = {"f16": (4, 2), "bf16": (4, 2), "tf32": (2, 1), "s8": (4, 2), "u8": (4, 2),
                   "e4m3": (4, 2), "e5m2": (4, 2), "s4": (8, 4), "u4": (8, 4)}
ISA_INVALID = {0b0000, 0b0101, 0b1010, 0b1111}
ISA_ORDERED_MEANINGFUL = {0b0100, 0b1000, 0b1001, 0b1100, 0b1101, 0b1110}
ISA_TF32_MEANINGFUL = {0b1110, 0b0100}
# (shape, family) -> {selector: threads of the group of four that contribute metadata}
_ONE = {0: {0}, 1: {1}, 2: {2}, 3: {3}}  # "indicated by a value in {0, 1, 2, 3}"
_PAIR = {0: {0, 1}, 1: {2, 3}}  # "either 0 (threads T0, T1) or 1 (threads T2, T3)"
_ALL = {0: {0, 1, 2, 3}}  # "All threads ... the sparsity selector ... must be 0"
ISA_SELECTOR_THREADS = {
    ("m16n8k16", "16"): _ONE, ("m16n8k32", "16"): _PAIR,
    ("m16n8k8", "tf32"): _ONE, ("m16n8k16", "tf32"): _PAIR,
    ("m16n8k32", "i8"): _PAIR, ("m16n8k64", "i8"): _ALL,
    ("m16n8k64", "i4"): _PAIR, ("m16n8k128", "i4"): _ALL,
}


@pytest.mark.parametrize("form", SPARSE_FORMS, ids=_ids)
def test_pattern_is_the_isa_granularity(form: MmaForm) -> None:
    p = sparse.pattern(form)
    assert (p.chunk, p.keep) == ISA_GRANULARITY[form.a.name]
    assert form.k % p.chunk == 0 and form.values("A") * 32 == 16 * form.k // 2


@pytest.mark.parametrize("form", SPARSE_FORMS, ids=_ids)
def test_valid_nibbles_follow_the_isa(form: MmaForm) -> None:
    valid = set(sparse.valid_nibbles(form))
    assert not valid & ISA_INVALID
    if form.a.name == "tf32":
        assert valid == ISA_TF32_MEANINGFUL
    elif form.sparse == "sp::ordered_metadata":
        assert valid == ISA_ORDERED_MEANINGFUL
    else:  # plain .sp: every value but the four invalid ones (H200: all twelve work)
        assert valid == set(range(16)) - ISA_INVALID


@pytest.mark.parametrize(("form", "selector"), CASES, ids=_ids)
def test_selector_names_the_isa_threads(form: MmaForm, selector: int) -> None:
    threads = ISA_SELECTOR_THREADS[(form.shape_str, _family(form))]
    assert sparse.isa_selectors(form) == tuple(sorted(threads)) == form.selectors
    ml = sparse.metadata_layout(form, selector)
    assert ml.lanes == tuple(sorted(4 * g + t for g in range(8) for t in threads[selector]))
    # "A .b32 register containing 16 2-bit vectors" (tf32: "8 4-bit vectors"): 8 nibbles per
    # lane cover every chunk of the 16 x K tile exactly once.
    chunk = ISA_GRANULARITY[form.a.name][0]
    cells = sorted(int(ml.layout(i)) for i in range(size(ml.layout)))
    assert size(ml.layout) == 8 * len(ml.lanes) == 16 * (form.k // chunk)
    assert cells == list(range(16 * form.k // chunk))


def test_selectors_the_isa_leaves_undefined() -> None:
    """ptxas 13.0 accepts selectors 2 and 3 for f32.f16.f16.f32 m16n8k32; the ISA defines
    0 and 1 only, and on an H200 both stopped the kernel with an illegal instruction."""
    f = registry.mma_form("sm80.sparse_mma.m16n8k32.f32.f16.f16.f32")
    wider = dataclasses.replace(f, selectors=(0, 1, 2, 3))
    for sel in (2, 3):
        with pytest.raises(sparse.SparseError, match="undefined"):
            sparse.metadata_layout(wider, sel)
        with pytest.raises(sparse.SparseError, match="undefined"):
            sparse.random_sparse_problem(wider, np.random.default_rng(0), sel)


def test_selectors_out_of_the_table_range() -> None:
    f = registry.mma_form("sm80.sparse_mma.m16n8k64.s32.s8.s8.s32")
    with pytest.raises(sparse.SparseError, match="out of range"):
        sparse.metadata_layout(f, 1)
    with pytest.raises(sparse.SparseError, match="not a sparse"):
        sparse.metadata_layout(registry.mma_form("sm80.mma.m16n8k16.f32.f16.f16.f32"))


# ---------------------------------------------------------------- the H200 measurement
def _cells(text: str) -> list[tuple[int, int]]:
    return [(int(r), int(c)) for r, c in (p.split(",") for p in text.split())]


_ROWS2 = "0,0 0,1 0,2 0,3 8,0 8,1 8,2 8,3"  # 16/32-bit: rows g and g+8, four chunks each
_ROWS2_HI = "0,4 0,5 0,6 0,7 8,4 8,5 8,6 8,7"
_ROW_G = "0,0 0,1 0,2 0,3 0,4 0,5 0,6 0,7"  # 8/4-bit: one row, eight chunks
_ROW_G8 = "8,0 8,1 8,2 8,3 8,4 8,5 8,6 8,7"
_ROW_G_HI = "0,8 0,9 0,10 0,11 0,12 0,13 0,14 0,15"
_ROW_G8_HI = "8,8 8,9 8,10 8,11 8,12 8,13 8,14 8,15"
# (shape, family, selector) -> {lane of group 0: (row, chunk) of nibbles 0..7}; group g is
# the same with lanes + 4g and rows + g (measured for all 8 groups).
MEASURED_H200 = {
    **{("m16n8k16", "16", s): {s: _ROWS2} for s in range(4)},
    **{("m16n8k8", "tf32", s): {s: _ROWS2} for s in range(4)},
    ("m16n8k32", "16", 0): {0: _ROWS2, 1: _ROWS2_HI},
    ("m16n8k32", "16", 1): {2: _ROWS2, 3: _ROWS2_HI},
    ("m16n8k16", "tf32", 0): {0: _ROWS2, 1: _ROWS2_HI},
    ("m16n8k16", "tf32", 1): {2: _ROWS2, 3: _ROWS2_HI},
    ("m16n8k32", "i8", 0): {0: _ROW_G, 1: _ROW_G8},
    ("m16n8k32", "i8", 1): {2: _ROW_G, 3: _ROW_G8},
    ("m16n8k64", "i4", 0): {0: _ROW_G, 1: _ROW_G8},
    ("m16n8k64", "i4", 1): {2: _ROW_G, 3: _ROW_G8},
    ("m16n8k64", "i8", 0): {0: _ROW_G, 1: _ROW_G8, 2: _ROW_G_HI, 3: _ROW_G8_HI},
    ("m16n8k128", "i4", 0): {0: _ROW_G, 1: _ROW_G8, 2: _ROW_G_HI, 3: _ROW_G8_HI},
}


@pytest.mark.parametrize(("form", "selector"), CASES, ids=_ids)
def test_metadata_layout_matches_the_h200(form: MmaForm, selector: int) -> None:
    key = (form.shape_str, _family(form), selector)
    want = {}
    for g in range(8):
        for lane, text in MEASURED_H200[key].items():
            for v, (r, c) in enumerate(_cells(text)):
                want[(lane + 4 * g, 4 * v)] = (r + g, c)
    table = sparse.metadata_layout(form, selector).table()
    assert {(lane, bit): (r, c) for lane, bit, r, c in table} == want


# ---------------------------------------------------------------- CUTLASS ELayouts
def _elayout_cells(layout: str, m: int, elems_per_nibble: int, lanes: Iterable[int],
                   nibble_of: Callable[[int], int]) -> dict[tuple[int, int], tuple[int, int]]:
    """(lane, bit) -> (row, chunk) from a CUTLASS ELayout (thread, value) -> dense (m, k)."""
    lay = parse_layout(layout)
    nval = size(lay) // 128 if m == 64 else size(lay) // 32
    out: dict[tuple[int, int], tuple[int, int]] = {}
    for lane in lanes:
        for v in range(nval):
            idx = int(lay(lane, v))
            row, k = idx % m, idx // m
            nib = nibble_of(v)
            cell = (row, k // elems_per_nibble)
            assert out.setdefault((lane, 4 * nib), cell) == cell
    return out


def _ours(name: str, selector: int) -> dict[tuple[int, int], tuple[int, int]]:
    ml = sparse.metadata_layout(registry.mma_form(name), selector)
    return {(lane, bit): (r, c) for lane, bit, r, c in ml.table()}


def test_8bit_k64_matches_cutlass_sm120_elayout() -> None:
    # SM120_SPARSE_16x8x64_TN::ELayout, (T32,V32) -> (M16,K64); a byte holds 8 values.
    theirs = _elayout_cells("((2,2,8),32):((8,512,1),16)", 16, 4, range(32), lambda v: v // 4)
    for name in ("sm89.sparse_mma.m16n8k64.f32.e4m3.e4m3.f32",
                 "sm80.sparse_mma.m16n8k64.s32.s8.s8.s32"):
        assert _ours(name, 0) == theirs


def test_4bit_k128_matches_cutlass_sm120_elayout() -> None:
    # SM120_SPARSE_16x8x128_TN_VS::ELayout, (T32,V64) -> (M16,K128); 8 values per nibble.
    theirs = _elayout_cells("((2,2,8),64):((8,1024,1),16)", 16, 8, range(32), lambda v: v // 8)
    assert _ours("sm80.sparse_mma.m16n8k128.s32.s4.s4.s32", 0) == theirs


@pytest.mark.parametrize(("layout", "name", "elems"), [
    # GMMA::ELayout_64x32 (f16/bf16), _64x16 (tf32), _64x64 (8-bit): wgmma.sp's per-warp
    # metadata (warp 0 = rows 0-15) follows the same convention as mma.sp's.
    ("((2,2,8,4),(16,2)):((1024,0,1,16),(64,8))", "sm80.sparse_mma.m16n8k32.f32.f16.f16.f32", 4),
    ("((2,2,8,4),(8,2)):((512,0,1,16),(64,8))", "sm80.sparse_mma.m16n8k16.f32.tf32.tf32.f32", 2),
    ("((2,2,8,4),32):((8,2048,1,16),64)", "sm80.sparse_mma.m16n8k64.s32.s8.s8.s32", 4),
])
def test_matches_cutlass_wgmma_sparse_elayouts(layout: str, name: str, elems: int) -> None:
    form = registry.mma_form(name)
    per_row = 4 * elems  # values of one row (four chunks) in one register half
    wide = form.a.storage_bits >= 16

    def nibble(v: int) -> int:  # value -> nibble: (cols, rows) values, or cols only
        return (v % per_row) // elems + 4 * (v // per_row) if wide else v // elems

    for sel in sparse.isa_selectors(form):
        ours = _ours(name, sel)
        # CUTLASS's stride-0 lane bit is the selector's pair; read the lanes ours reads.
        lanes = range(32) if len(sparse.isa_selectors(form)) == 1 else \
            [lane for lane in range(32) if (lane >> 1) % 2 == sel]
        theirs = _elayout_cells(layout, 64, elems, lanes, nibble)
        assert ours == theirs


# ---------------------------------------------------------------- words, decoys, round trips
@pytest.mark.parametrize(("form", "selector"), CASES, ids=_ids)
def test_random_problem_contract(form: MmaForm, selector: int) -> None:
    rng = np.random.default_rng(zlib.crc32(f"{form.name} {selector}".encode()))
    p = sparse.random_sparse_problem(form, rng, selector)
    chunk, keep = ISA_GRANULARITY[form.a.name]
    m, k = 16, form.k
    assert p.a_dense.shape == (m, k) and p.a_compressed.shape == (m, k // 2)
    assert p.metadata.dtype == np.uint32 and p.metadata.shape == (32,)
    assert p.a_dense.dtype == (np.int64 if form.a.is_int else np.float64)
    # Each chunk keeps `keep` non-zeros (pairs for 4-bit), in compressed order.
    for r in range(m):
        for c in range(k // chunk):
            block = p.a_dense[r, c * chunk:(c + 1) * chunk]
            assert np.count_nonzero(block) == keep
            assert list(block[block != 0]) == list(p.a_compressed[r, c * keep:(c + 1) * keep])
            if chunk == 8:  # "each two-wide sub-chunk ... all zeroes or all non-zeros"
                pairs = block.reshape(4, 2)
                assert all(np.all(q != 0) or np.all(q == 0) for q in pairs)
    # The lanes that are read hold ordered nibbles; the others a decoy that differs from the
    # word of their group's reading lane in every nibble.
    ml = sparse.metadata_layout(form, selector)
    assert np.array_equal(sparse.nibbles_from_words(form, p.metadata, selector), p.nibbles)
    for lane in range(32):
        w = int(p.metadata[lane])
        nibs = [(w >> (4 * v)) & 0xF for v in range(8)]
        if lane in ml.lanes:
            assert set(nibs) <= (ISA_TF32_MEANINGFUL if chunk == 2 else ISA_ORDERED_MEANINGFUL)
        else:
            reader = 4 * (lane // 4) + ml.first_lane + (lane % 4) % ml.threads_per_group
            rw = int(p.metadata[reader])
            for v in range(8):
                mine, theirs = nibs[v], (rw >> (4 * v)) & 0xF
                assert {mine & 3, mine >> 2}.isdisjoint({theirs & 3, theirs >> 2})


@pytest.mark.parametrize(("form", "selector"), CASES, ids=_ids)
def test_compress_round_trips(form: MmaForm, selector: int) -> None:
    rng = np.random.default_rng(7)
    p = sparse.random_sparse_problem(form, rng, selector)
    comp, words, sel = sparse.compress(form, p.a_dense, selector)
    assert sel == selector
    assert np.array_equal(comp, p.a_compressed) and np.array_equal(words, p.metadata)
    assert np.array_equal(sparse.decompress(form, comp, words, selector), p.a_dense)
    # A sparser A: chunks with fewer non-zeros keep the lowest free slots, still ordered.
    thin = p.a_dense.copy()
    thin[:, ::3] = 0
    comp, words, _ = sparse.compress(form, thin, selector)
    assert np.array_equal(sparse.decompress(form, comp, words, selector), thin)


def test_decompress_places_values_at_the_isa_slots() -> None:
    """Slot indices i0 | i1 << 2: the first kept value at i0, the second at i1 (the H200
    agrees for unordered nibbles too, under plain .sp)."""
    f16 = registry.mma_form("sm80.sparse_mma.m16n8k16.f32.f16.f16.f32")
    comp = np.zeros((16, 8))
    comp[0, :2] = [5.0, 7.0]
    nib = np.full((16, 4), 0b0100, dtype=np.uint8)
    for code, want in ((0b1101, {1: 5.0, 3: 7.0}), (0b0111, {3: 5.0, 1: 7.0}),
                       (0b1000, {0: 5.0, 2: 7.0})):
        nib[0, 0] = code
        dense = sparse.decompress(f16, comp, sparse.metadata_words(f16, nib), 0)
        assert {i: v for i, v in enumerate(dense[0, :4]) if v} == want
    ordered = registry.mma_form("sm80.sparse_mma.m16n8k16.ordered_metadata.f32.f16.f16.f32")
    nib[0, 0] = 0b0111
    with pytest.raises(sparse.SparseError, match="not valid"):
        sparse.decompress(ordered, comp, sparse.metadata_words(ordered, nib), 0)
    # tf32: 0b0100 keeps element 0 of the pair, 0b1110 element 1.
    tf32 = registry.mma_form("sm80.sparse_mma.m16n8k8.f32.tf32.tf32.f32")
    assert sparse.nibble_targets(tf32, 0b0100) == (0,)
    assert sparse.nibble_targets(tf32, 0b1110) == (1,)
    # 4-bit: the indices name two-element sub-chunks.
    s4 = registry.mma_form("sm80.sparse_mma.m16n8k64.s32.s4.s4.s32")
    assert sparse.nibble_targets(s4, 0b1101) == (2, 3, 6, 7)
    for bad in ISA_INVALID:
        with pytest.raises(sparse.SparseError):
            sparse.nibble_targets(s4, bad)


def test_compress_rejects_what_the_pattern_cannot_hold() -> None:
    f16 = registry.mma_form("sm80.sparse_mma.m16n8k16.f32.f16.f16.f32")
    a = np.zeros((16, 16))
    a[3, 4:7] = 1.0
    with pytest.raises(sparse.SparseError, match="row 3, columns 4..7 has 3 non-zero"):
        sparse.compress(f16, a)
    s4 = registry.mma_form("sm80.sparse_mma.m16n8k64.s32.s4.s4.s32")
    b = np.zeros((16, 64), dtype=np.int64)
    b[0, [0, 2, 4]] = 1  # three sub-chunks touched
    with pytest.raises(sparse.SparseError, match="3 non-zero pairs"):
        sparse.compress(s4, b)
    with pytest.raises(sparse.SparseError, match="must be 16 x 16"):
        sparse.compress(f16, np.zeros((16, 8)))


def test_worked_example_m16n8k16() -> None:
    """docs/fragments.md's example: row 9 of a 2:4 f16 A, chunk 2 keeping columns 9 and 11."""
    f = registry.mma_form("sm80.sparse_mma.m16n8k16.f32.f16.f16.f32")
    a = np.zeros((16, 16))
    a[9, 9], a[9, 11] = 3.0, -2.0
    comp, words, _ = sparse.compress(f, a, selector=1)
    assert list(comp[9, 4:6]) == [3.0, -2.0]
    ml = sparse.metadata_layout(f, 1)
    lane, v = ml.owner(9, 2)
    assert (lane, v) == (5, 6)  # group 1 (rows 1 and 9), selector 1 -> lane 4 + 1
    assert (int(words[5]) >> (4 * v)) & 0xF == 0b1101  # slots 1 and 3
    assert (int(words[4]) >> (4 * v)) & 0xF == 0b1000  # decoy: slots 0 and 2


def test_form_delegates_to_this_module() -> None:
    f = registry.mma_form("sm80.sparse_mma.m16n8k32.s32.s8.s8.s32")
    assert f.metadata_layout(1) == sparse.metadata_layout(f, 1)  # type: ignore[attr-defined]


def test_small_exact_values() -> None:
    rng = np.random.default_rng(0)
    for t in ("f16", "bf16", "tf32", "e4m3", "e5m2"):
        v = sparse.small_exact_values(t, rng, (64,), nonzero=True)
        assert v.dtype == np.float64 and np.all(v != 0) and np.all(np.abs(v) <= 8)
        assert np.all(v == np.round(v))
    for t, lo, hi in (("s8", -128, 127), ("u8", 0, 255), ("s4", -8, 7), ("u4", 0, 15)):
        v = sparse.small_exact_values(t, rng, (256,), nonzero=True)
        assert v.dtype == np.int64 and v.min() >= lo and v.max() <= hi and np.all(v != 0)
