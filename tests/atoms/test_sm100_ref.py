"""The CPU model of tcgen05 (nvatom.ref.tcgen05) against nvatom's builders.

* Descriptors: random tiles (element width, major, swizzle, rows, K-blocks) are written into
  the model's shared memory through the *layout algebra* (``smem_layout``); the descriptors
  ``make_umma_desc`` / ``k_block_descriptors`` build are then read back by the model, which
  decodes the 64-bit word itself and applies the PTX ISA canonical-layout arithmetic and the
  address swizzle.  The tiles must come back element for element.
* MMA: the model's D equals numpy's A @ B^T for every modelled kind (f16, bf16, tf32, e4m3 x
  e5m2, s8 x u8, MXFP8, NVFP4, MXFP4), K-major and MN-major B, negation, accumulate and
  scale-input-d, structured sparsity and A in TMEM.
* FP4/FP6 of kind::f8f6f4 / mxf8f6f4 in shared memory: the padded-packed 16-byte units
  (.b4x16_p64 / .b6x16_p32) match the format's definition; MMAs mixing e2m1/e2m3/e3m2 with
  FP8 match numpy; one code per byte (the wrong container) gives a wrong D.
* tcgen05.ld/st: every atom round-trips through the TMEM model; 32x32b loads by four warps
  return D's rows.
* Data paths: the model's D placement equals CUTLASS's ``tmem_frg`` atoms (PTX ISA Layouts A,
  B, D, E, F, G); MMAs of M = 32/64/128/256, cta_group::1 and ::2 (a CTA pair with two shared
  and two tensor memories), ``.ws``, f16 accumulators, lane alignment 16, block scaling,
  4:8 pair sparsity and A in TMEM (every layout but C, rows duplicated where D's layout
  spreads a row over several lanes) match numpy over random data, majors and swizzles.
* Sparse metadata in TMEM: the model's placement equals CUTLASS's ``tmem_e_frg`` atoms
  (M = 128: f16, 8-bit, 4-bit; .ws M = 64 / 32: f16, 8-bit).  Metadata stored by four
  warps' tcgen05.st and read by the MMA at its TMEM address gives numpy's D on the dense A
  (f16, bf16 .ws, f8f6f4, i8, mxf8f6f4, mxf4, mxf4nvf4, f16 on a CTA pair, A in TMEM, .ws
  M = 64 / 32); a row-per-lane placement of f16 metadata gives a wrong D.
* Scale factors in TMEM: staged in CUTLASS's SF atom layout, copied with tcgen05.cp
  .32x128b.warpx4, selected by the idesc's scale-factor ids (1X, 2X, 4X), the MMA matches
  numpy.
"""

from __future__ import annotations

import random

import numpy as np
import pytest

from nvatom.atoms.sm100 import make_umma_atom
from nvatom.atoms.smem import smem_layout
from nvatom.atoms.tmem import COLUMNS, LDST_SHAPES, TmemCopyAtom
from nvatom.descriptors.umma import UmmaSmemDescriptor, k_block_descriptors
from nvatom.dtypes import decode, encode
from nvatom.layout import Layout
from nvatom.ref.tcgen05 import (
    RefError,
    Smem,
    Tmem,
    d_lanes_columns,
    decode_sparse_meta,
    encode_sparse_meta,
    layout_id,
    mma,
    read_matrix,
    read_padded_matrix,
    read_scale_factors,
    read_sparse_meta,
    sparse_meta_cells,
    store_sparse_meta,
    tmem_copy_32x128b_warpx4,
    tmem_load,
    tmem_store,
    write_padded_matrix,
)

BASE_A, BASE_B = 0x4000, 0x10000
META_COL = 480  # sparse metadata column in the data-path tests


def _store_tile(smem: Smem, base: int, codes: np.ndarray, bits: int, major: str,
                sw: str) -> object:
    """Write ``codes`` (rows x K) at ``base`` through smem_layout; return the layout."""
    rows, k = codes.shape
    if major == "K":  # K padded to whole swizzle atoms (the padding stays unread)
        w = max(16, {"INTERLEAVE": 16, "SW32": 32, "SW64": 64, "SW128": 128}[sw]) * 8 // bits
        k = -(-k // w) * w
    lay = smem_layout(rows, k, bits, major, sw)
    k = codes.shape[1]
    for r in range(rows):
        for c in range(k):
            off = lay((r, c))
            if bits == 4:
                addr = base + off // 2
                shift = 4 * (off % 2)
                smem.data[addr] = (smem.data[addr] & (0xF0 >> shift)) | (int(codes[r, c]) << shift)
            else:
                v = int(codes[r, c])
                for j in range(bits // 8):
                    smem.data[base + off * bits // 8 + j] = (v >> (8 * j)) & 0xFF
    return lay


# PTX ISA: tf32 (32-bit) MN-major operands exist only with the 128-byte swizzle of 32-byte
# atomicity (SW128_32B), which no other operand takes
_CASES = [(bits, major, sw) for bits in (4, 8, 16, 32) for major in ("K", "MN")
          for sw in ("INTERLEAVE", "SW32", "SW64", "SW128", "SW128_32B")
          if not (bits == 4 and major == "MN")
          and (major == "MN" and bits == 32) == (sw == "SW128_32B")]


@pytest.mark.parametrize(("bits", "major", "sw"), _CASES)
def test_descriptors_read_back_what_the_layout_wrote(bits: int, major: str, sw: str) -> None:
    rng = np.random.default_rng(bits * 7 + len(sw) + (major == "MN"))
    r = random.Random(bits + len(sw))
    kb = 256 // bits
    for _ in range(2):
        rows = r.choice([64, 128] if major == "K" else [128, 256])
        kblocks = r.choice([1, 2, 4])
        codes = rng.integers(0, 1 << min(bits, 16), (rows, kblocks * kb)).astype(np.uint64)
        smem = Smem()
        lay = _store_tile(smem, BASE_B, codes, bits, major, sw)
        descs = k_block_descriptors(lay, bits, major, kblocks, BASE_B)
        for j, d in enumerate(descs):
            got = read_matrix(smem, d.encode(), rows, kb, bits, major)
            np.testing.assert_array_equal(got, codes[:, j * kb:(j + 1) * kb],
                                          err_msg=f"K-block {j}: {d.explain()}")


def test_tf32_mn_major_needs_the_32_byte_atomic_swizzle() -> None:
    # descriptor words written field by field (PTX ISA Table 40): version 0b001 in bits 46-48,
    # the layout type in bits 61-63 (1: 128-byte swizzle with 32-byte atomicity, 2: 128-byte)
    word = (0x10000 >> 4) | (512 >> 4) << 16 | (2048 >> 4) << 32 | 1 << 46
    smem = Smem()
    read_matrix(smem, word | 1 << 61, 128, 8, 32, "MN")
    with pytest.raises(RefError, match="MN-major operand of 32-bit elements is read with the "
                       "swizzle modes SW128_32B; the descriptor .* has SW128 \\(tf32 MN-major"):
        read_matrix(smem, word | 2 << 61, 128, 8, 32, "MN")
    with pytest.raises(RefError, match="has SW128_32B"):
        read_matrix(smem, word | 1 << 61, 128, 16, 16, "MN")
    with pytest.raises(RefError, match="has SW128_32B"):
        read_matrix(smem, word | 1 << 61, 128, 8, 32, "K")


def test_sw128_32b_read_is_the_isa_byte_formula() -> None:
    # MN-major tf32 through a SW128_32B descriptor: element (mn, k) at
    # start + 4 (mn % 32) + 128 (k % 4) + LBO (mn // 32) + SBO (k // 4), then 32-byte unit u of
    # each 128-byte line l becomes u ^ (l % 4) (bits 5-6 ^= bits 7-8 of the absolute address)
    start, lbo, sbo = 0x10000, 1024, 512
    word = (start >> 4) | (lbo >> 4) << 16 | (sbo >> 4) << 32 | 1 << 46 | 1 << 61
    smem = Smem()
    smem.data[:] = np.random.default_rng(3).integers(0, 256, smem.data.size, dtype=np.uint8)
    got = read_matrix(smem, word, 64, 8, 32, "MN")
    for mn in range(64):
        for k in range(8):
            lin = start + 4 * (mn % 32) + 128 * (k % 4) + lbo * (mn // 32) + sbo * (k // 4)
            addr = (lin & ~0x60) | ((((lin >> 5) & 3) ^ ((lin >> 7) & 3)) << 5)
            want = int.from_bytes(bytes(smem.data[addr:addr + 4]), "little")
            assert int(got[mn, k]) == want, (mn, k)


def test_a_wrong_descriptor_reads_another_tile() -> None:
    rng = np.random.default_rng(1)
    codes = rng.integers(0, 1 << 16, (128, 64)).astype(np.uint64)
    smem = Smem()
    lay = _store_tile(smem, BASE_B, codes, 16, "K", "SW128")
    d = k_block_descriptors(lay, 16, "K", 1, BASE_B)[0]
    import dataclasses

    for bad in (dataclasses.replace(d, layout_type="SW64"), dataclasses.replace(d, sbo=2048)):
        got = read_matrix(smem, bad.encode(), 128, 16, 16, "K")
        assert not np.array_equal(got, codes[:, :16])


# --------------------------------------------------------------------------- MMA


def _rand_codes(rng: np.random.Generator, t: str, shape: tuple[int, int]) -> np.ndarray:
    if t in ("s8", "u8"):
        lo, hi = (-128, 128) if t == "s8" else (0, 256)
        return encode(t, rng.integers(lo, hi, shape)).astype(np.uint64)
    if t == "tf32":
        return encode(t, rng.standard_normal(shape), rounding="rn").astype(np.uint64)
    vals = rng.standard_normal(shape) * 2
    return encode(t, vals, saturate=True).astype(np.uint64)


def _run(kind: str, a_t: str, b_t: str, d_t: str, *, b_major: str = "K", k_blocks: int = 2,
         sf: str | None = None, vec: int | None = None, sparse: bool = False,
         a_tmem: bool = False, neg: bool = False, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    atom = make_umma_atom(kind, 1, 128, 64, d_t, a_t, b_t, sparse=sparse, b_major=b_major,
                          a_source="ts" if a_tmem else "ss", sf=sf, vec_size=vec)
    m, n, k = atom.shape_mnk
    bits = 4 if kind.startswith("mxf4") else {"f16": 16, "bf16": 16, "tf32": 32}.get(a_t, 8)
    ka = k // 2 if sparse else k
    a_codes = _rand_codes(rng, a_t, (m, ka * k_blocks))
    b_codes = _rand_codes(rng, b_t, (n, k * k_blocks))
    smem, tmem = Smem(), Tmem()
    a_lay = _store_tile(smem, BASE_A, a_codes, bits, "K", "SW128" if bits > 4 else "SW64")
    b_sw = "SW128" if b_major == "K" or n * bits // 8 >= 128 else "SW64"
    if b_major == "MN" and bits == 32:
        b_sw = "SW128_32B"  # tf32 MN-major: the only swizzle it has (PTX ISA)
    b_lay = _store_tile(smem, BASE_B, b_codes, bits, b_major, b_sw)
    a_descs = k_block_descriptors(a_lay, bits, "K", k_blocks * ka // (256 // bits), BASE_A)
    b_descs = k_block_descriptors(b_lay, bits, b_major, k_blocks * k // (256 // bits), BASE_B)
    per_b = k // (256 // bits)  # descriptors per instruction (sparse B spans two K-blocks)
    av = decode(a_t, a_codes).astype(np.float64)
    bv = decode(b_t, b_codes).astype(np.float64)
    meta = None
    if sparse:
        g = 2 if kind == "tf32" else 4
        keep = g // 2
        meta = np.zeros((m, ka * k_blocks), np.int64)
        full = np.zeros((m, k * k_blocks))
        for i in range(m):
            for grp in range(k * k_blocks // g):
                pos = sorted(rng.choice(g, keep, replace=False))
                meta[i, grp * keep:(grp + 1) * keep] = pos
                for j, p in enumerate(pos):
                    full[i, grp * g + p] = av[i, grp * keep + j]
        av = full
    sfa = sfb = None
    if sf is not None:
        assert vec is not None
        sfa = rng.integers(120, 134, (m, k * k_blocks // vec)).astype(np.uint64) \
            if sf == "ue8m0" else encode("ue4m3", rng.uniform(0.25, 4, (m, k * k_blocks // vec)),
                                         rounding="rn").astype(np.uint64)
        sfb = rng.integers(120, 134, (n, k * k_blocks // vec)).astype(np.uint64) \
            if sf == "ue8m0" else encode("ue4m3", rng.uniform(0.25, 4, (n, k * k_blocks // vec)),
                                         rounding="rn").astype(np.uint64)
        av = av * np.repeat(decode(sf, sfa), vec, axis=1)
        bv = bv * np.repeat(decode(sf, sfb), vec, axis=1)
    idesc = atom.idesc(a_negate=neg).encode()
    d_taddr = 64  # column 64
    for s in range(k_blocks):
        a_arg: int | tuple[str, int]
        if a_tmem:
            cols = ka * bits // 32
            per = 32 // bits
            block = a_codes[:, s * ka:(s + 1) * ka]
            for c in range(cols):
                word = np.zeros(m, np.uint64)
                for j in range(per):
                    word |= block[:, c * per + j] << np.uint64(bits * j)
                tmem.cells[:m, 256 + c] = word.astype(np.uint32)
            a_arg = ("tmem", 256)
        else:
            a_arg = a_descs[s * (ka * bits // 256)].encode()
        mma(tmem, smem, kind=kind, d_taddr=d_taddr, a=a_arg,
            b_desc=b_descs[s * per_b].encode(), idesc=idesc, enable_input_d=s > 0,
            sfa=None if sfa is None else sfa[:, s * k // vec:(s + 1) * k // vec],
            sfb=None if sfb is None else sfb[:, s * k // vec:(s + 1) * k // vec],
            sparse_meta=None if meta is None else meta[:, s * ka:(s + 1) * ka])
    want = (-av if neg else av) @ bv.T
    cells = tmem.cells[:m, d_taddr:d_taddr + n]
    got = cells.view(np.int32) if d_t == "s32" else cells.view(np.float32)
    if d_t == "s32":
        np.testing.assert_array_equal(got, want.astype(np.int64))
    else:
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)
    # four warps read D back with 32x32b.x64: thread t of warp w holds row 32w + t
    ld = TmemCopyAtom("load", "32x32b", 64)
    for w in range(4):
        regs = tmem_load(tmem, ld, (32 * w) << 16 | d_taddr)
        np.testing.assert_array_equal(regs, cells[32 * w:32 * w + 32, :64])


@pytest.mark.parametrize(("kind", "a", "b", "d", "kw"), [
    ("f16", "f16", "f16", "f32", {}),
    ("f16", "bf16", "bf16", "f32", {"b_major": "MN"}),
    ("f16", "f16", "f16", "f32", {"neg": True, "k_blocks": 3}),
    ("tf32", "tf32", "tf32", "f32", {"b_major": "MN"}),
    ("f8f6f4", "e4m3", "e5m2", "f32", {}),
    ("i8", "s8", "u8", "s32", {"k_blocks": 4}),
    ("i8", "u8", "u8", "s32", {"b_major": "MN"}),
    ("f16", "f16", "f16", "f32", {"sparse": True}),
    ("tf32", "tf32", "tf32", "f32", {"sparse": True}),
    ("i8", "s8", "s8", "s32", {"sparse": True}),
    ("f16", "bf16", "bf16", "f32", {"a_tmem": True}),
    ("mxf8f6f4", "e4m3", "e4m3", "f32", {"sf": "ue8m0", "vec": 32}),
    ("mxf4nvf4", "e2m1", "e2m1", "f32", {"sf": "ue4m3", "vec": 16}),
    ("mxf4", "e2m1", "e2m1", "f32", {"sf": "ue8m0", "vec": 32}),
])
def test_mma_model_matches_numpy(kind: str, a: str, b: str, d: str, kw: dict) -> None:
    _run(kind, a, b, d, **kw)


def test_scale_input_d_and_errors() -> None:
    smem, tmem = Smem(), Tmem()
    lay = _store_tile(smem, BASE_A, np.zeros((128, 16), np.uint64), 16, "K", "SW128")
    da = k_block_descriptors(lay, 16, "K", 1, BASE_A)[0].encode()
    lay = _store_tile(smem, BASE_B, np.zeros((64, 16), np.uint64), 16, "K", "SW128")
    db = k_block_descriptors(lay, 16, "K", 1, BASE_B)[0].encode()
    tmem.cells[:128, :64] = np.float32(8.0).view(np.uint32)
    idesc = make_umma_atom("f16", 1, 128, 64, "f32", "f16", "f16").idesc().encode()
    d = mma(tmem, smem, kind="f16", d_taddr=0, a=da, b_desc=db, idesc=idesc,
            enable_input_d=True, scale_input_d=2)
    assert np.all(d == 2.0)  # 8 * 2^-2
    with pytest.raises(RefError, match="bits 46-48"):
        mma(tmem, smem, kind="f16", d_taddr=0, a=da & ~(1 << 46), b_desc=db, idesc=idesc,
            enable_input_d=False)


# --------------------------------------------------------------------------- ld / st


@pytest.mark.parametrize("shape", list(LDST_SHAPES))
@pytest.mark.parametrize("pack", [False, True])
def test_ld_st_round_trip(shape: str, pack: bool) -> None:
    rng = np.random.default_rng(3)
    for num in (1, 4):
        split = 8 if shape == "16x32bx2" else None
        st = TmemCopyAtom("store", shape, num, pack, split)
        ld = TmemCopyAtom("load", shape, num, pack, split)
        tmem = Tmem()
        regs = rng.integers(0, 1 << 32, (32, st.registers), dtype=np.uint64).astype(np.uint32)
        if pack:  # a packed store keeps 16 bits per column; ld packs them back
            taddr = 32 << 16 | 8
        else:
            taddr = 64 << 16 | 16
        tmem_store(tmem, st, taddr, regs)
        np.testing.assert_array_equal(tmem_load(tmem, ld, taddr), regs)
        touched = np.count_nonzero(tmem.cells != 0)
        assert touched <= 32 * st.registers * (2 if pack else 1)


# --------------------------------------------------------------------------- data-path layouts
# The D layouts as CUTLASS writes them (mma_traits_sm100.hpp ``tmem_frg`` / ``tmem_frg_ws``, in
# virtual TMEM addressing: lane + 128 * column), per CTA, as nvatom.layout Layouts: an
# independent statement of the PTX ISA's Layouts A, B, D, E, F, G.
def _cutlass_d_layout(m: int, n: int, cta: int, ws: bool) -> Layout:
    rows = m // cta
    if (rows, ws) in ((128, False), (128, True)):
        return Layout((128, n), (1, 128))  # Layouts A, D
    if rows == 64 and not ws and cta == 1:
        return Layout(((16, 4), n), ((1, 32), 128))  # Layout F
    if rows == 64:
        return Layout((64, (n // 2, 2)), (1, (128, 64)))  # Layouts B (2-CTA M128), E (.ws)
    assert rows == 32 and ws
    return Layout((32, (n // 4, 4)), (1, (128, 32)))  # Layout G


_LAYOUT_CASES = [(64, 1, False, False, "F"), (128, 1, False, False, "D"),
                 (32, 1, False, True, "G"), (64, 1, False, True, "E"),
                 (128, 1, True, True, "D"), (128, 2, False, False, "B"),
                 (256, 2, True, False, "A")]


@pytest.mark.parametrize(("m", "cta", "sparse", "ws", "lid"), _LAYOUT_CASES)
def test_data_path_layouts_are_the_isa_and_cutlass_ones(m: int, cta: int, sparse: bool,
                                                         ws: bool, lid: str) -> None:
    assert layout_id(m, cta, sparse, ws) == lid
    for n in (64, 256):
        lanes, cols = d_lanes_columns(m, n, cta, sparse, ws)
        lay = _cutlass_d_layout(m, n, cta, ws)
        want = np.array([[lay((r, c)) for c in range(n)] for r in range(m // cta)])
        np.testing.assert_array_equal(lanes + 128 * cols, want)
        assert len(set((lanes * COLUMNS + cols).ravel().tolist())) == lanes.size  # one-to-one
        assert lanes.max() < 128


def test_layout_spot_values() -> None:
    # PTX ISA: F uses half the data path (16 lanes of each 32-lane quarter); G stacks four N
    # quarters over the lane quarters; E two N halves over the lane halves.
    lanes, cols = d_lanes_columns(64, 64, 1)
    assert (lanes[15, 0], lanes[16, 0], lanes[63, 5], cols[63, 5]) == (15, 32, 111, 5)
    lanes, cols = d_lanes_columns(32, 128, 1, ws=True)
    assert (lanes[5, 96], cols[5, 96]) == (101, 0)
    lanes, cols = d_lanes_columns(64, 256, 1, ws=True)
    assert (lanes[1, 129], cols[1, 129]) == (65, 1)
    # Layout C (M 128, cta_group::2, sparse A): the ISA's table gives it F's organization
    # ("4x1 (1/2 datapath utilized)", lane alignment 0 or 16) over each CTA's 64 rows.
    lanes, cols = d_lanes_columns(128, 64, 2, sparse=True)
    assert [int(lanes[r, 0]) for r in (0, 15, 16, 31, 32, 48, 63)] == [0, 15, 32, 47, 64, 96, 111]
    assert (int(cols[40, 7]), lanes.shape) == (7, (64, 64))
    with pytest.raises(RefError, match="M = 32"):
        layout_id(32, 1, False, False)
    with pytest.raises(RefError, match="cta_group::1 only"):
        layout_id(64, 2, False, True)


def _sw_for(rows: int, bits: int, major: str, rng: np.random.Generator,
            kbytes: int = 32) -> str:
    if major == "K":  # a swizzled K-major atom must hold one MMA's K bytes of a row
        return str(rng.choice([s for s, w in (("INTERLEAVE", 0), ("SW32", 32), ("SW64", 64),
                                              ("SW128", 128)) if w == 0 or w >= kbytes]))
    # the MN-major atom spans W bytes of MN: it must divide the rows
    return str(rng.choice([s for s, w in (("INTERLEAVE", 16), ("SW32", 32), ("SW64", 64),
                                          ("SW128", 128)) if rows % (w * 8 // bits) == 0]))


def _run_paths(kind: str, a_t: str, b_t: str, d_t: str, m: int, n: int, *, cta: int = 1,
               ws: bool = False, sparse: bool = False, a_tmem: bool = False,
               lane: int = 0, seed: int = 0, k_blocks: int = 2, sf: str | None = None,
               vec: int | None = None, meta_tmem: str | None = None) -> None:
    """One or more MMAs of any modelled shape over random data and random layouts (majors,
    swizzles), D compared with numpy and read back through CUTLASS's layout of D.

    ``meta_tmem``: sparse metadata placed in each CTA's TMEM (column 480) before each MMA,
    ``"st"`` by four warps' tcgen05.st (``store_sparse_meta``), ``"rowmajor"`` deliberately
    wrong (row r in lane r, codes packed low first), and the MMA given its address."""
    rng = np.random.default_rng(seed)
    bits = 4 if kind.startswith("mxf4") else {"f16": 16, "bf16": 16, "tf32": 32}.get(a_t, 8)
    a_major = "K" if a_tmem or bits in (4, 32) else str(rng.choice(["K", "MN"]))
    b_major = "K" if bits in (4, 32) else str(rng.choice(["K", "MN"]))
    atom = make_umma_atom(kind, cta, m, n, d_t, a_t, b_t, sparse=sparse, ws=ws,
                          a_source="ts" if a_tmem else "ss", a_major=a_major, b_major=b_major,
                          sf=sf, vec_size=vec)
    if sparse:
        a_major = atom.a_major
    k = atom.k
    ka = k // 2 if sparse else k
    mc, nc = m // cta, n // cta
    a_codes = _rand_codes(rng, a_t, (m, ka * k_blocks))
    b_codes = _rand_codes(rng, b_t, (n, k * k_blocks))
    smems, tmems = [Smem() for _ in range(cta)], [Tmem() for _ in range(cta)]
    a_sw = _sw_for(mc, bits, a_major, rng, ka * bits // 8)
    b_sw = _sw_for(nc, bits, b_major, rng, k * bits // 8)
    a_descs = b_descs = None
    for c in range(cta):  # each CTA holds its M/2 rows of A and N/2 rows of B, same layout
        a_lay = _store_tile(smems[c], BASE_A, a_codes[c * mc:(c + 1) * mc], bits, a_major, a_sw)
        b_lay = _store_tile(smems[c], BASE_B, b_codes[c * nc:(c + 1) * nc], bits, b_major, b_sw)
        a_descs = k_block_descriptors(a_lay, bits, a_major, k_blocks * ka * bits // 256, BASE_A)
        b_descs = k_block_descriptors(b_lay, bits, b_major, k_blocks * k * bits // 256, BASE_B)
    assert a_descs is not None and b_descs is not None
    av = decode(a_t, a_codes).astype(np.float64)
    bv = decode(b_t, b_codes).astype(np.float64)
    meta = None
    if sparse:  # PTX ISA 9.7.16.10.8 granularity: 1:2 tf32, 4:8 in pairs mxf4*, else 2:4
        g = {"tf32": 2, "mxf4": 8, "mxf4nvf4": 8}.get(kind, 4)
        meta = np.zeros((m, ka * k_blocks), np.int64)
        full = np.zeros((m, k * k_blocks))
        for i in range(m):
            for grp in range(k * k_blocks // g):
                if g == 8:
                    pairs = sorted(rng.choice(4, 2, replace=False))
                    pos = [2 * pairs[0], 2 * pairs[0] + 1, 2 * pairs[1], 2 * pairs[1] + 1]
                else:
                    pos = sorted(rng.choice(g, g // 2, replace=False))
                meta[i, grp * g // 2:(grp + 1) * g // 2] = pos
                for j, p in enumerate(pos):
                    full[i, grp * g + p] = av[i, grp * g // 2 + j]
        av = full
    sfa = sfb = None
    if sf is not None:  # block-scaled: scale codes as arrays (around 1.0)
        assert vec is not None
        if sf == "ue8m0":
            sfa = rng.integers(124, 130, (m, k * k_blocks // vec)).astype(np.uint64)
            sfb = rng.integers(124, 130, (n, k * k_blocks // vec)).astype(np.uint64)
        else:
            sfa = encode(sf, rng.uniform(0.25, 4, (m, k * k_blocks // vec)),
                         rounding="rn").astype(np.uint64)
            sfb = encode(sf, rng.uniform(0.25, 4, (n, k * k_blocks // vec)),
                         rounding="rn").astype(np.uint64)
        av = av * np.repeat(decode(sf, sfa), vec, axis=1)
        bv = bv * np.repeat(decode(sf, sfb), vec, axis=1)
    idesc = atom.idesc().encode()
    d_col = int(rng.choice([0, 32, 128]))
    d_taddr = lane << 16 | d_col
    # A in TMEM: row r in every lane where CUTLASS's D layout puts row r (the lane's data
    # path multiplies that row)
    # Layout C (M 128 on a pair, sparse A): the ISA's table gives it F's organization per CTA
    d_lay = _cutlass_d_layout(64, n, 1, False) if (m, cta, sparse) == (128, 2, True) else \
        _cutlass_d_layout(m, n, cta, ws)
    a_lanes = [sorted({d_lay((r, j)) % 128 for j in range(n)}) for r in range(mc)]
    for s in range(k_blocks):
        a_arg: int | tuple[str, int]
        if a_tmem:
            per = 32 // bits
            for c in range(cta):
                block = a_codes[c * mc:(c + 1) * mc, s * ka:(s + 1) * ka]
                for r in range(mc):
                    for col in range(ka // per):
                        word = sum(int(block[r, col * per + j]) << (bits * j)
                                   for j in range(per))
                        for ln in a_lanes[r]:
                            tmems[c].cells[lane + ln, 384 + col] = word
            a_arg = ("tmem", lane << 16 | 384)
        else:
            a_arg = a_descs[s * (ka * bits // 256)].encode()
        meta_arg: np.ndarray | int | None = None if meta is None else \
            meta[:, s * ka:(s + 1) * ka]
        if meta_tmem is not None:
            assert meta is not None
            for c in range(cta):
                rows = meta[c * mc:(c + 1) * mc, s * ka:(s + 1) * ka]
                if meta_tmem == "st":
                    store_sparse_meta(tmems[c], META_COL, kind, rows)
                else:
                    codes = encode_sparse_meta(kind, rows).astype(np.uint64)
                    tmems[c].cells[:, META_COL:META_COL + 2] = 0
                    for j in range(codes.shape[1]):
                        tmems[c].cells[:mc, META_COL + j // 8] |= (
                            codes[:, j] << np.uint64(4 * (j % 8))).astype(np.uint32)
            meta_arg = META_COL
        mma(tmems if cta == 2 else tmems[0], smems if cta == 2 else smems[0], kind=kind,
            d_taddr=d_taddr, a=a_arg, b_desc=b_descs[s * (k * bits // 256)].encode(),
            idesc=idesc, enable_input_d=s > 0, cta_group=cta, ws=ws, sparse_meta=meta_arg,
            sfa=None if sfa is None else sfa[:, s * k // vec:(s + 1) * k // vec],
            sfb=None if sfb is None else sfb[:, s * k // vec:(s + 1) * k // vec])
    want = av @ bv.T
    for c in range(cta):
        lay = d_lay
        got = np.zeros((mc, n), np.uint32)
        for r in range(mc):
            for j in range(n):
                v = lay((r, j))
                got[r, j] = tmems[c].cells[lane + v % 128, d_col + v // 128]
        w = want[c * mc:(c + 1) * mc]
        if d_t == "s32":
            np.testing.assert_array_equal(got.view(np.int32), w.astype(np.int64))
        elif d_t == "f16":
            assert np.all(got >> 16 == 0)  # one f16 in the low half of each word
            np.testing.assert_allclose(decode("f16", got.astype(np.uint64)), w, rtol=2e-3,
                                       atol=2e-2)
        else:
            np.testing.assert_allclose(got.view(np.float32), w, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize(("kind", "a", "b", "d", "m", "n", "kw"), [
    ("f16", "f16", "f16", "f32", 64, 40, {}),
    ("f16", "bf16", "bf16", "f32", 64, 64, {"lane": 16, "seed": 1}),
    ("i8", "s8", "u8", "s32", 64, 24, {"seed": 2}),
    ("f8f6f4", "e4m3", "e4m3", "f32", 64, 16, {"sparse": True, "seed": 3}),
    ("f16", "f16", "f16", "f32", 64, 32, {"a_tmem": True, "lane": 16, "seed": 4}),
    ("f16", "bf16", "bf16", "f32", 128, 64, {"a_tmem": True, "cta": 2, "seed": 22}),
    ("i8", "s8", "s8", "s32", 256, 32, {"a_tmem": True, "cta": 2, "seed": 23}),
    ("f16", "f16", "f16", "f32", 64, 128, {"a_tmem": True, "ws": True, "seed": 24}),
    ("tf32", "tf32", "tf32", "f32", 32, 64, {"a_tmem": True, "ws": True, "seed": 25}),
    ("f8f6f4", "e4m3", "e5m2", "f32", 128, 256, {"a_tmem": True, "ws": True, "seed": 26}),
    ("f16", "f16", "f16", "f16", 128, 64, {"seed": 5}),
    ("f8f6f4", "e5m2", "e4m3", "f16", 64, 48, {"seed": 6}),
    ("f16", "f16", "f16", "f32", 32, 64, {"ws": True, "seed": 7}),
    ("tf32", "tf32", "tf32", "f32", 32, 128, {"ws": True, "seed": 8}),
    ("f16", "bf16", "bf16", "f32", 64, 256, {"ws": True, "seed": 9}),
    ("i8", "u8", "u8", "s32", 128, 64, {"ws": True, "seed": 10}),
    ("f16", "f16", "f16", "f32", 64, 128, {"ws": True, "sparse": True, "seed": 11}),
    ("f16", "f16", "f16", "f32", 256, 64, {"cta": 2, "seed": 12}),
    ("f16", "bf16", "bf16", "f32", 128, 32, {"cta": 2, "seed": 13}),
    ("i8", "s8", "s8", "s32", 128, 64, {"cta": 2, "seed": 14}),
    ("f16", "f16", "f16", "f32", 256, 32, {"cta": 2, "sparse": True, "seed": 15}),
    # Layout C: M 128 on a CTA pair with sparse A (64 rows per CTA, half the data path)
    ("f16", "bf16", "bf16", "f32", 128, 64, {"cta": 2, "sparse": True, "seed": 22}),
    ("i8", "s8", "u8", "s32", 128, 32, {"cta": 2, "sparse": True, "seed": 23}),
    ("tf32", "tf32", "tf32", "f32", 256, 16, {"cta": 2, "seed": 16}),
    ("mxf8f6f4", "e4m3", "e5m2", "f32", 256, 32, {"cta": 2, "sf": "ue8m0", "vec": 32,
                                                  "seed": 17}),
    ("mxf8f6f4", "e4m3", "e4m3", "f32", 128, 48, {"cta": 2, "sf": "ue8m0", "vec": 32,
                                                  "seed": 18}),
    ("mxf4", "e2m1", "e2m1", "f32", 128, 64, {"sparse": True, "sf": "ue8m0", "vec": 64,
                                              "seed": 19}),
    ("mxf4nvf4", "e2m1", "e2m1", "f32", 256, 32, {"cta": 2, "sparse": True, "sf": "ue4m3",
                                                  "vec": 32, "seed": 20}),
    ("mxf8f6f4", "e5m2", "e4m3", "f32", 128, 32, {"sparse": True, "sf": "ue8m0", "vec": 64,
                                                  "seed": 21}),
])
def test_mma_data_paths_match_numpy(kind: str, a: str, b: str, d: str, m: int, n: int,
                                    kw: dict) -> None:
    _run_paths(kind, a, b, d, m, n, **kw)


def test_data_path_errors() -> None:
    smem, tmem = Smem(), Tmem()
    i128 = make_umma_atom("f16", 1, 128, 64, "f32", "f16", "f16").idesc().encode()
    with pytest.raises(RefError, match="lane alignment 0, got lane 16"):
        mma(tmem, smem, kind="f16", d_taddr=16 << 16, a=0, b_desc=0, idesc=i128,
            enable_input_d=False)
    with pytest.raises(RefError, match="pair of Tmem"):
        mma(tmem, smem, kind="f16", d_taddr=0, a=0, b_desc=0, idesc=i128,
            enable_input_d=False, cta_group=2)
    w32 = make_umma_atom("f16", 1, 32, 64, "f32", "f16", "f16", ws=True).idesc().encode()
    with pytest.raises(RefError, match="not a kind::f16 cta_group::1 shape"):
        mma(tmem, smem, kind="f16", d_taddr=0, a=0, b_desc=0, idesc=w32, enable_input_d=False)
    e64 = make_umma_atom("f16", 1, 64, 64, "f32", "f16", "f16", ws=True,
                         a_source="ts").idesc().encode()
    tmem.cells[70, 0] = 1  # A row 6 in lane 6 (zero) and lane 70 (one) disagree
    with pytest.raises(RefError, match="layout E needs each A row in lanes \\[0, 64\\]"):
        mma(tmem, smem, kind="f16", d_taddr=0, a=("tmem", 0), b_desc=0, idesc=e64,
            enable_input_d=False, ws=True)
    with pytest.raises(RefError, match="taking no scale factors|takes no scale factors"):
        mma(tmem, smem, kind="f16", d_taddr=0, a=0, b_desc=0, idesc=i128,
            enable_input_d=False, sfa=0, sfb=0)


# --------------------------------------------------------------------------- scale factors in TMEM
def _sf_to_tmem(smem: Smem, tmem: Tmem, base: int, col: int, sf: np.ndarray) -> int:
    """Stage scale codes (rows x Q, Q = K / vec over all MMAs) the CUTLASS way: 512-byte SF
    atoms of 128 rows x 4 scale factors, row m = m0 + 32 m1 and scale q at byte
    16 m0 + 4 m1 + q (``Sm1xxBlkScaledConfig``'s ((32,4),(vec,4)):((16,4),(0,1))), each
    copied to TMEM with tcgen05.cp .32x128b.warpx4 (columns col + 4 per atom).  Returns the
    TMEM columns used per group of four scale factors."""
    rows, q = sf.shape
    groups = -(-rows // 128)  # a partial atom is padded
    sf = np.concatenate([sf, np.zeros((128 * groups - rows, q), sf.dtype)])
    addr = base
    for ch in range(q // 4):
        for g in range(groups):
            chunk = np.zeros(512, np.uint8)
            for x in range(128):
                for j in range(4):
                    chunk[16 * (x % 32) + 4 * (x // 32) + j] = sf[128 * g + x, 4 * ch + j]
            smem.data[addr:addr + 512] = chunk
            desc = UmmaSmemDescriptor(addr, 16, 128).encode()  # 32 rows of 16 bytes
            tmem_copy_32x128b_warpx4(tmem, smem, col + ch * 4 * groups + 4 * g, desc)
            addr += 512
    return 4 * groups


@pytest.mark.parametrize(("kind", "ab", "sf", "vec", "n", "seed", "qual"), [
    ("mxf8f6f4", "e4m3", "ue8m0", 32, 256, 0, None),
    ("mxf8f6f4", "e5m2", "ue8m0", 32, 64, 1, "block32"),
    ("mxf4", "e2m1", "ue8m0", 32, 128, 2, None),
    ("mxf4nvf4", "e2m1", "ue4m3", 16, 256, 3, None),
    ("mxf4nvf4", "e2m1", "ue8m0", 32, 64, 4, "scale_vec::2X"),
    ("mxf4nvf4", "e2m1", "ue8m0", 16, 128, 5, "block16"),
])
def test_scale_factors_from_tmem(kind: str, ab: str, sf: str, vec: int, n: int,
                                 seed: int, qual: str | None) -> None:
    rng = np.random.default_rng(seed)
    m, k_blocks = 128, 4
    atom = make_umma_atom(kind, 1, m, n, "f32", ab, ab, sf=sf, vec_size=vec)
    k = atom.k
    bits = 4 if kind != "mxf8f6f4" else 8
    a_codes, b_codes = _rand_codes(rng, ab, (m, k * k_blocks)), _rand_codes(rng, ab,
                                                                           (n, k * k_blocks))
    smem, tmem = Smem(), Tmem()
    sw = "SW128" if bits == 8 else "SW64"
    a_descs = k_block_descriptors(_store_tile(smem, BASE_A, a_codes, bits, "K", sw), bits, "K",
                                  k_blocks * k * bits // 256, BASE_A)
    b_descs = k_block_descriptors(_store_tile(smem, BASE_B, b_codes, bits, "K", sw), bits, "K",
                                  k_blocks * k * bits // 256, BASE_B)
    q = k * k_blocks // vec
    if sf == "ue8m0":
        sfa = rng.integers(120, 134, (m, q)).astype(np.uint64)
        sfb = rng.integers(120, 134, (n, q)).astype(np.uint64)
    else:
        sfa = encode(sf, rng.uniform(0.25, 4, (m, q)), rounding="rn").astype(np.uint64)
        sfb = encode(sf, rng.uniform(0.25, 4, (n, q)), rounding="rn").astype(np.uint64)
    sfa_col, sfb_col = 256, 320
    a_step = _sf_to_tmem(smem, tmem, 0x30000, sfa_col, sfa)
    b_step = _sf_to_tmem(smem, tmem, 0x38000, sfb_col, sfb)
    per = k // vec  # scale factors per row per MMA: 1 (1X), 2 (2X) or 4 (4X)
    for s in range(k_blocks):
        first = s * per  # index of this MMA's first scale factor in the row
        idesc = atom.idesc(a_sf_id=first % 4, b_sf_id=first % 4).encode()
        mma(tmem, smem, kind=kind, d_taddr=0, a=a_descs[s * k * bits // 256].encode(),
            b_desc=b_descs[s * k * bits // 256].encode(), idesc=idesc, enable_input_d=s > 0,
            sfa=sfa_col + (first // 4) * a_step, sfb=sfb_col + (first // 4) * b_step,
            scale_vec=qual)
    av = decode(ab, a_codes) * np.repeat(decode(sf, sfa), vec, axis=1)
    bv = decode(ab, b_codes) * np.repeat(decode(sf, sfb), vec, axis=1)
    want = av @ bv.T  # D is rounded to f32 after each of the k_blocks MMAs: allow that
    np.testing.assert_allclose(tmem.cells[:m, :n].view(np.float32), want, rtol=1e-5,
                               atol=4e-7 * k_blocks * np.abs(want).max())


def test_scale_factor_errors() -> None:
    tmem = Tmem()
    tmem.cells[:, 8] = 0x7F7F7F7F
    np.testing.assert_array_equal(read_scale_factors(tmem, 8, 32, 2, 2), 0x7F)
    with pytest.raises(RefError, match="legal ids \\(0, 2\\)"):
        read_scale_factors(tmem, 8, 32, 2, 1)
    with pytest.raises(RefError, match="legal ids \\(0,\\)"):
        read_scale_factors(tmem, 8, 32, 4, 2)
    with pytest.raises(RefError, match="three per row"):
        read_scale_factors(tmem, 8, 32, 3, 0)
    tmem.cells[64, 8] = 0  # partition 2 differs from the others
    with pytest.raises(RefError, match="not duplicated over the 32-lane partitions "
                       "\\(0, 1, 2, 3\\)"):
        read_scale_factors(tmem, 8, 32, 1, 0)
    # 2x2: partitions (0, 1) and (2, 3) hold the two halves; each pair must agree
    tmem.cells[96, 8] = 0
    np.testing.assert_array_equal(read_scale_factors(tmem, 8, 64, 1, 0, "2x2")[:, 0],
                                  [0x7F] * 32 + [0] + [0x7F] * 31)
    tmem.cells[96, 8] = 5
    with pytest.raises(RefError, match="partitions \\(2, 3\\)"):
        read_scale_factors(tmem, 8, 64, 1, 0, "2x2")
    with pytest.raises(RefError, match="data path '3x1'"):
        read_scale_factors(tmem, 8, 64, 1, 0, "3x1")
    with pytest.raises(RefError, match="lane field must be 0"):
        read_scale_factors(tmem, 32 << 16 | 8, 32, 1, 0)
    smem = Smem()
    nv = make_umma_atom("mxf4nvf4", 1, 128, 64, "f32", "e2m1", "e2m1", sf="ue8m0", vec_size=32)
    with pytest.raises(RefError, match="2X or 4X: pass scale_vec"):
        mma(tmem, smem, kind="mxf4nvf4", d_taddr=0, a=0, b_desc=0,
            idesc=nv.idesc().encode(), enable_input_d=False, sfa=0, sfb=8)
    with pytest.raises(RefError, match="takes scale-vector qualifiers"):
        mma(tmem, smem, kind="mxf4nvf4", d_taddr=0, a=0, b_desc=0, scale_vec="scale_vec::1X",
            idesc=nv.idesc().encode(), enable_input_d=False, sfa=0, sfb=8)
    k96 = make_umma_atom("mxf4", 2, 256, 64, "f32", "e2m1", "e2m1", sf="ue8m0", vec_size=32)
    with pytest.raises(RefError, match="K = 96 form"):
        mma([tmem, Tmem()], [smem, Smem()], kind="mxf4", d_taddr=0, a=0, b_desc=0,
            cta_group=2, idesc=k96.idesc(k_size=1).encode(), enable_input_d=False,
            sfa=np.zeros((256, 3)), sfb=np.zeros((64, 3)))
    with pytest.raises(RefError, match="both as TMEM addresses or both as arrays"):
        mma(tmem, smem, kind="mxf4nvf4", d_taddr=0, a=0, b_desc=0,
            idesc=nv.idesc().encode(), enable_input_d=False, sfa=np.zeros((128, 2)), sfb=8)


def test_mxf4_sparsity_is_pairwise() -> None:
    # PTX ISA 9.7.16.10.8.3: kind::mxf4/mxf4nvf4 keep two aligned 2-wide sub-chunks of each
    # 8-wide chunk; element-wise 2:4 positions are not a legal pattern.
    atom = make_umma_atom("mxf4", 1, 128, 64, "f32", "e2m1", "e2m1", sparse=True, sf="ue8m0",
                          vec_size=64)
    smem, tmem = Smem(), Tmem()
    da = k_block_descriptors(_store_tile(smem, BASE_A, np.zeros((128, 64), np.uint64), 4, "K",
                                         "SW64"), 4, "K", 1, BASE_A)[0].encode()
    db = k_block_descriptors(_store_tile(smem, BASE_B, np.zeros((64, 128), np.uint64), 4, "K",
                                         "SW64"), 4, "K", 2, BASE_B)[0].encode()
    sfa, sfb = np.full((128, 2), 127, np.uint64), np.full((64, 2), 127, np.uint64)
    kw = dict(kind="mxf4", d_taddr=0, a=da, b_desc=db, idesc=atom.idesc().encode(),
              enable_input_d=False, sfa=sfa, sfb=sfb)
    pairs = np.tile([2, 3, 4, 5], (128, 16))
    mma(tmem, smem, sparse_meta=pairs, **kw)
    with pytest.raises(RefError, match="4:8 in pairs"):
        mma(tmem, smem, sparse_meta=np.tile([0, 2, 4, 6], (128, 16)), **kw)
    with pytest.raises(RefError, match="4:8 in pairs"):
        mma(tmem, smem, sparse_meta=np.tile([1, 2, 4, 5], (128, 16)), **kw)
    with pytest.raises(RefError, match="increasing positions inside each group of 8"):
        mma(tmem, smem, sparse_meta=np.tile([4, 5, 2, 3], (128, 16)), **kw)


def _sf_cells(tmem: Tmem, col: int, sf: np.ndarray, datapath: str) -> None:
    """Write scale codes (rows x count) into TMEM through CUTLASS's ``tmem_sf_frg`` atom (as an
    nvatom Layout over (row incl. replicas, scale index) -> lane + 128 * byte column):
    4x1 ``(((32, R/32), 4), n):(((1, 512), 32), 128)``, 2x2
    ``(((32, R/64), 2, 2), n):(((1, 512), 64, 32), 128)``."""
    rows, cnt = sf.shape
    if datapath == "4x1":
        lay = Layout((((32, -(-rows // 32)), 4), cnt), (((1, 512), 32), 128))
        reps = 4
    else:
        lay = Layout((((32, -(-rows // 64)), 2, 2), cnt), (((1, 512), 64, 32), 128))
        reps = 2
    for rep in range(reps):
        for r in range(rows):
            for j in range(cnt):
                v = lay((r + rep * rows, j))
                lane, byte = v % 128, v // 128
                cell = int(tmem.cells[lane, col + byte // 4]) & ~(0xFF << 8 * (byte % 4))
                tmem.cells[lane, col + byte // 4] = cell | int(sf[r, j]) << 8 * (byte % 4)


@pytest.mark.parametrize(("m", "n", "seed"), [(256, 64, 0), (128, 64, 1), (128, 256, 2)])
def test_scale_factors_from_tmem_cta_pair(m: int, n: int, seed: int) -> None:
    # mxf8f6f4 cta_group::2: CTA c holds the SFA of its M/2 rows (4x1) and all N SFB (4x1 for
    # Layout A, 2x2 for Layout B), written through CUTLASS's tmem_sf_frg atoms; the two CTAs'
    # D rows are scaled by their own copies.
    rng = np.random.default_rng(seed)
    atom = make_umma_atom("mxf8f6f4", 2, m, n, "f32", "e4m3", "e5m2",
                          sf="ue8m0", vec_size=32)
    k, mc, nc = atom.k, m // 2, n // 2
    a_codes, b_codes = _rand_codes(rng, "e4m3", (m, k)), _rand_codes(rng, "e5m2", (n, k))
    smems, tmems = [Smem(), Smem()], [Tmem(), Tmem()]
    sfa = rng.integers(120, 134, (m, 1)).astype(np.uint64)
    sfb = rng.integers(120, 134, (n, 1)).astype(np.uint64)
    for c in range(2):
        da = k_block_descriptors(_store_tile(smems[c], BASE_A, a_codes[c * mc:(c + 1) * mc], 8,
                                             "K", "SW128"), 8, "K", 1, BASE_A)[0].encode()
        db = k_block_descriptors(_store_tile(smems[c], BASE_B, b_codes[c * nc:(c + 1) * nc], 8,
                                             "K", "SW128"), 8, "K", 1, BASE_B)[0].encode()
        # scale id 2: the factors sit in byte 2 of each word
        _sf_cells(tmems[c], 256, np.concatenate([np.zeros((mc, 2), np.uint64),
                                                 sfa[c * mc:(c + 1) * mc]], axis=1), "4x1")
        _sf_cells(tmems[c], 300, np.concatenate([np.zeros((n, 2), np.uint64), sfb], axis=1),
                  "2x2" if m == 128 else "4x1")
    mma(tmems, smems, kind="mxf8f6f4", d_taddr=0, a=da, b_desc=db, cta_group=2,
        idesc=atom.idesc(a_sf_id=2, b_sf_id=2).encode(), enable_input_d=False, sfa=256,
        sfb=300)
    want = (decode("e4m3", a_codes) * decode("ue8m0", sfa)) @ \
        (decode("e5m2", b_codes) * decode("ue8m0", sfb)).T
    for c in range(2):
        lay = _cutlass_d_layout(m, n, 2, False)
        got = np.array([[tmems[c].cells[lay((r, j)) % 128, lay((r, j)) // 128]
                         for j in range(n)] for r in range(mc)], np.uint32)
        np.testing.assert_allclose(got.view(np.float32), want[c * mc:(c + 1) * mc],
                                   rtol=1e-5, atol=1e-4)
    # Layout B reads SFB as 2x2: staged as 4x1 instead, N's second half gets other scales
    if m == 128:
        t2 = [Tmem(), Tmem()]
        for c in range(2):
            t2[c].cells[:] = tmems[c].cells
            _sf_cells(t2[c], 300, np.concatenate([np.zeros((n, 2), np.uint64), sfb], axis=1),
                      "4x1")
        d2 = mma(t2, smems, kind="mxf8f6f4", d_taddr=0, a=da, b_desc=db, cta_group=2,
                 idesc=atom.idesc(a_sf_id=2, b_sf_id=2).encode(), enable_input_d=False,
                 sfa=256, sfb=300)
        assert not np.allclose(d2[:, n // 2:], want[:, n // 2:])


# ---------------------------------------------------------------------------- sparse metadata
# CUTLASS tmem_e_frg (mma_traits_sm100.hpp) atoms for M = 128, as nvatom.layout Layouts over
# (row, K element) in virtual TMEM addressing (lane + 128 * metadata-bit column), and the
# metadata bits per K element (sparse_elem<8, uint8_t>: 1; sparse_elem<16, uint8_t>: 1/2).
# The .ws atoms (tmem_e_frg_ws) for M = 64 / 32 carry a last mode of 128 / M copies, which
# is given here as the coordinate q.
_CUTLASS_E = {
    ("f16", 128): (Layout(((8, 2, 8), (16, 2)), ((1, 2048, 16), (128, 8))), 32, 4, 1),
    ("i8", 128): (Layout((128, 64), (1, 128)), 64, 4, 1),
    ("mxf4", 128): (Layout((128, 128), (1, 128)), 128, 8, 2),
    ("f16", 64): (Layout(((8, 2, 4), (16, 2), 2), ((1, 2048, 16), (128, 8), 64)), 32, 4, 1),
    ("f16", 32): (Layout(((8, 2, 2), (16, 2), 4), ((1, 2048, 16), (128, 8), 32)), 32, 4, 1),
    ("i8", 64): (Layout((64, (64, 2)), (1, (128, 64))), 64, 4, 1),
    ("i8", 32): (Layout((32, (64, 4)), (1, (128, 32))), 64, 4, 1),
}


@pytest.mark.parametrize(("kind", "rows"), sorted(_CUTLASS_E))
def test_sparse_meta_layout_is_cutlass_tmem_e_frg(kind: str, rows: int) -> None:
    lay, k, chunk, per_bit = _CUTLASS_E[(kind, rows)]
    lane, col, bit = sparse_meta_cells(kind, rows, k)
    assert lane.shape == (rows, k // chunk)
    for r in range(rows):
        for j in range(k // chunk):
            for q in range(128 // rows):
                # the code of chunk j starts at its first element's bit; copy q
                if kind == "i8":
                    v = lay((r, chunk * j + k * q))
                else:
                    v = lay((r, chunk * j, q) if rows < 128 else (r, chunk * j))
                assert (lane[r, j] + rows * q, 32 * col[r, j] + bit[r, j]) == \
                    (v % 128, v // 128 // per_bit)
    # one-to-one: every metadata nibble has its own 4 bits
    cells = {(int(a), int(b), int(c) // 4)
             for a, b, c in zip(lane.ravel(), col.ravel(), bit.ravel(), strict=True)}
    assert len(cells) == lane.size


def _rand_positions(rng: np.random.Generator, kind: str, rows: int, k: int) -> np.ndarray:
    out = []
    for _ in range(rows):
        row: list[int] = []
        for _ in range(k // (8 if kind.startswith("mxf4") else 4)):
            if kind.startswith("mxf4"):
                p = sorted(rng.choice(4, 2, replace=False))
                row += [2 * p[0], 2 * p[0] + 1, 2 * p[1], 2 * p[1] + 1]
            else:
                row += sorted(rng.choice(4, 2, replace=False).tolist())
        out.append(row)
    return np.array(out, np.int64)


@pytest.mark.parametrize(("kind", "k"), [("f16", 32), ("i8", 64), ("f8f6f4", 64),
                                         ("mxf8f6f4", 64), ("mxf4", 128), ("mxf4nvf4", 128)])
def test_sparse_meta_store_then_read(kind: str, k: int) -> None:
    rng = np.random.default_rng(5)
    pos = _rand_positions(rng, kind, 128, k)
    np.testing.assert_array_equal(decode_sparse_meta(kind, encode_sparse_meta(kind, pos)), pos)
    tmem = Tmem()
    store_sparse_meta(tmem, 200, kind, pos)
    np.testing.assert_array_equal(read_sparse_meta(tmem, 200, kind, 128, k), pos)
    # PTX ISA mma.sp (9.7.14.6) metadata: 0xD keeps elements 1 and 3 of a chunk of 4
    assert encode_sparse_meta("f16", np.array([[1, 3]]))[0, 0] == 0b1101
    assert encode_sparse_meta("mxf4", np.array([[2, 3, 6, 7]]))[0, 0] == 0b1101


def test_sparse_meta_wrong_placement_is_caught() -> None:
    rng = np.random.default_rng(6)
    pos = _rand_positions(rng, "f16", 128, 32)
    tmem = Tmem()
    codes = encode_sparse_meta("f16", pos)
    for j in range(8):  # row r in lane r: not the f16 layout
        tmem.cells[:, 100] |= codes[:, j] << np.uint32(4 * j)
    assert not np.array_equal(read_sparse_meta(tmem, 100, "f16", 128, 32), pos)
    store_sparse_meta(tmem, 100, "f16", pos)
    with pytest.raises(RefError, match="lane field must be 0"):
        read_sparse_meta(tmem, 32 << 16 | 100, "f16", 128, 32)
    with pytest.raises(RefError, match="selector 1 is not modelled"):
        read_sparse_meta(tmem, 100, "f16", 128, 32, selector=1)
    with pytest.raises(RefError, match="kind::tf32 is not modelled"):
        read_sparse_meta(tmem, 100, "tf32", 128, 16)
    with pytest.raises(RefError, match="64 rows without .ws"):
        read_sparse_meta(tmem, 100, "f16", 64, 32)
    with pytest.raises(RefError, match="got 16"):
        sparse_meta_cells("f16", 16, 32)
    ws = _rand_positions(rng, "i8", 64, 64)
    store_sparse_meta(tmem, 300, "i8", ws)
    np.testing.assert_array_equal(read_sparse_meta(tmem, 300, "i8", 64, 64, ws=True), ws)
    tmem.cells[64:, 300:302] = 0  # .ws M = 64: the copy in lanes 64.. is missing
    with pytest.raises(RefError, match="copy in lanes 64"):
        read_sparse_meta(tmem, 300, "i8", 64, 64, ws=True)
    with pytest.raises(RefError, match="past column"):
        read_sparse_meta(tmem, 511, "i8", 128, 64)
    with pytest.raises(RefError, match="aligned pairs"):
        encode_sparse_meta("mxf4", np.array([[1, 2, 4, 5]]))
    dense = make_umma_atom("f16", 1, 128, 64, "f32", "f16", "f16").idesc().encode()
    with pytest.raises(RefError, match="dense"):
        mma(tmem, Smem(), kind="f16", d_taddr=0, a=0, b_desc=0, idesc=dense,
            enable_input_d=False, sparse_meta=100)


_META_TMEM_CASES = [
    ("f16", "f16", "f16", "f32", 128, 64, {"seed": 21}),
    ("f16", "bf16", "bf16", "f32", 128, 128, {"ws": True, "seed": 22}),
    ("f16", "f16", "f16", "f32", 64, 128, {"ws": True, "seed": 30}),
    ("f16", "f16", "f16", "f32", 32, 64, {"ws": True, "seed": 31}),
    ("i8", "s8", "s8", "s32", 64, 64, {"ws": True, "seed": 32}),
    ("f8f6f4", "e5m2", "e4m3", "f32", 32, 128, {"ws": True, "seed": 33}),
    ("f16", "f16", "f16", "f32", 256, 64, {"cta": 2, "seed": 23}),
    ("f16", "f16", "f16", "f32", 128, 32, {"a_tmem": True, "seed": 24}),
    ("f8f6f4", "e4m3", "e5m2", "f32", 128, 64, {"seed": 25}),
    ("i8", "s8", "u8", "s32", 128, 32, {"seed": 26}),
    ("mxf8f6f4", "e5m2", "e4m3", "f32", 128, 32, {"sf": "ue8m0", "vec": 64, "seed": 27}),
    ("mxf4", "e2m1", "e2m1", "f32", 128, 64, {"sf": "ue8m0", "vec": 64, "seed": 28}),
    ("mxf4nvf4", "e2m1", "e2m1", "f32", 256, 32, {"cta": 2, "sf": "ue4m3", "vec": 32,
                                                  "seed": 29}),
]


@pytest.mark.parametrize(("kind", "a", "b", "d", "m", "n", "kw"), _META_TMEM_CASES)
def test_sparse_mma_reads_metadata_from_tmem(kind: str, a: str, b: str, d: str, m: int, n: int,
                                             kw: dict) -> None:
    _run_paths(kind, a, b, d, m, n, sparse=True, meta_tmem="st", **kw)


def test_sparse_mma_with_misplaced_metadata_fails() -> None:
    with pytest.raises(AssertionError, match="Not equal to tolerance"):
        _run_paths("f16", "f16", "f16", "f32", 128, 64, sparse=True, meta_tmem="rowmajor",
                   seed=21)
    # the same metadata placed correctly passes (the case above)
    _run_paths("f16", "f16", "f16", "f32", 128, 64, sparse=True, meta_tmem="st", seed=21)


# --------------------------------------------------------------- FP4 / FP6 in shared memory
# kind::f8f6f4 / mxf8f6f4 read e2m1 / e2m3 / e3m2 from shared memory in the padded-packed
# format: PTX ISA 9.7.16.10.4.4 ("contiguously packed along with padding"), the layout of TMA's
# .b4x16_p64 / .b6x16_p32 (ISA 5.5.1.1.1; CUDA driver API CU_TENSOR_MAP_DATA_TYPE_16U4_ALIGN16B
# "8 byte gaps between every 8 byte chunk of packed values", 16U6_ALIGN16B "4 byte gaps between
# every 12 byte chunk"), which CUTLASS loads these operands with (float_*_unpacksmem_t,
# sm1xx_common.inl); descriptors count one byte per element.

_SUB = {"e2m1": 4, "e2m3": 6, "e3m2": 6}


def _unit_bytes(codes: list[int], bits: int) -> bytes:
    """One 16-byte unit written from the formats' definition, independently of the model:
    16 codes packed little-endian (code i at bits bits*i), then the padding (zero here)."""
    data = sum(int(c) << (bits * i) for i, c in enumerate(codes))
    return data.to_bytes(2 * bits, "little") + bytes(16 - 2 * bits)


@pytest.mark.parametrize("bits", [4, 6])
def test_padded_unit_matches_the_format_definition(bits: int) -> None:
    rng = np.random.default_rng(bits)
    codes = rng.integers(0, 1 << bits, (8, 128)).astype(np.uint64)
    smem = Smem()
    lay = smem_layout(8, 128, 8, "K", "SW128")  # one 128B swizzle atom: 8 rows x 128 bytes
    words = [d.encode() for d in k_block_descriptors(lay, 8, "K", 4, BASE_A)]
    for j, w in enumerate(words):
        write_padded_matrix(smem, w, codes[:, 32 * j:32 * j + 32], bits)
    # 128B swizzle (ISA 9.7.16.10.3 / CUTLASS Swizzle<3,4,3>): unit u of row r at 16 (u ^ r)
    for r in range(8):
        for u in range(8):
            at = BASE_A + 128 * r + 16 * (u ^ r)
            assert bytes(smem.data[at:at + 16]) == _unit_bytes(list(codes[r, 16 * u:16 * u + 16]),
                                                               bits)
            smem.data[at + 2 * bits:at + 16] = 0xA5  # garbage in the padding is not read
    for j, w in enumerate(words):
        np.testing.assert_array_equal(read_padded_matrix(smem, w, 8, 32, bits),
                                      codes[:, 32 * j:32 * j + 32])


@pytest.mark.parametrize("bits", [4, 6])
def test_mn_major_padded_units_follow_mn(bits: int) -> None:
    # MN-major: the 16 elements of a 16-byte unit are 16 consecutive M/N elements of one K row
    # (the operand's contiguous dimension).  8-bit MN-major 128-byte swizzle, written from the
    # ISA's canonical form ((T,8,m),(8,k)):((1,T,LBO),(8T,SBO)) with T = 16 one-byte elements:
    # element (mn, k) at start + mn % 128 + 128 (k % 8) + SBO (k // 8) (one 128-row atom along
    # MN), then the 128-byte swizzle (address bits 4-6 ^= bits 7-9)
    rng = np.random.default_rng(10 + bits)
    codes = rng.integers(0, 1 << bits, (128, 32)).astype(np.uint64)
    smem = Smem()
    word = k_block_descriptors(smem_layout(128, 32, 8, "MN", "SW128"), 8, "MN", 1,
                               BASE_B)[0].encode()
    write_padded_matrix(smem, word, codes, bits, "MN")
    start, sbo = (word & 0x3FFF) << 4, ((word >> 32) & 0x3FFF) << 4
    for k in range(32):
        for u in range(8):
            lin = start + 16 * u + 128 * (k % 8) + sbo * (k // 8)
            at = lin ^ (((lin >> 7) & 7) << 4)
            assert bytes(smem.data[at:at + 16]) == _unit_bytes(list(codes[16 * u:16 * u + 16, k]),
                                                               bits), (k, u)
    np.testing.assert_array_equal(read_padded_matrix(smem, word, 128, 32, bits, "MN"), codes)


def _sub_operand(smem: Smem, base: int, codes: np.ndarray, t: str, major: str,
                 sw: str, container: str = "padded") -> list[int]:
    """Store (rows x K) codes of type t; return the descriptor word of each 32-element
    K-block.  Sub-byte types go in the padded-packed format (``container="byte"``: one code
    per byte instead, the wrong assumption)."""
    rows, k = codes.shape
    if t not in _SUB or container == "byte":
        lay = _store_tile(smem, base, codes, 8, major, sw)
    else:
        kk = -(-k // 128) * 128 if major == "K" else k
        lay = smem_layout(rows, kk, 8, major, sw)
    words = [d.encode() for d in k_block_descriptors(lay, 8, major, k // 32, base)]
    if t in _SUB and container == "padded":
        for j, w in enumerate(words):
            write_padded_matrix(smem, w, codes[:, 32 * j:32 * j + 32], _SUB[t], major)
    return words


def _run_sub(kind: str, a_t: str, b_t: str, *, b_major: str = "K", b_sw: str = "SW128",
             seed: int = 0, container: str = "padded", a_major: str = "K",
             a_sw: str = "SW128") -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    sf = "ue8m0" if kind == "mxf8f6f4" else None
    atom = make_umma_atom(kind, 1, 128, 64, "f32", a_t, b_t, a_major=a_major, b_major=b_major,
                          sf=sf, vec_size=32 if sf else None)
    m, n, k = atom.shape_mnk
    kb = 3

    def codes(t: str, rows: int) -> np.ndarray:
        if t in _SUB:  # every code is a finite value
            return rng.integers(0, 1 << _SUB[t], (rows, k * kb)).astype(np.uint64)
        return _rand_codes(rng, t, (rows, k * kb))

    a_codes, b_codes = codes(a_t, m), codes(b_t, n)
    smem, tmem = Smem(), Tmem()
    a_words = _sub_operand(smem, BASE_A, a_codes, a_t, a_major, a_sw, container)
    b_words = _sub_operand(smem, BASE_B, b_codes, b_t, b_major, b_sw, container)
    av, bv = decode(a_t, a_codes).astype(np.float64), decode(b_t, b_codes).astype(np.float64)
    sfa = sfb = None
    if sf:
        sfa = rng.integers(120, 134, (m, kb)).astype(np.uint64)
        sfb = rng.integers(120, 134, (n, kb)).astype(np.uint64)
        av, bv = av * np.repeat(decode(sf, sfa), 32, axis=1), \
            bv * np.repeat(decode(sf, sfb), 32, axis=1)
    idesc = atom.idesc().encode()
    for s in range(kb):
        mma(tmem, smem, kind=kind, d_taddr=0, a=a_words[s], b_desc=b_words[s], idesc=idesc,
            enable_input_d=s > 0, sfa=None if sfa is None else sfa[:, s:s + 1],
            sfb=None if sfb is None else sfb[:, s:s + 1])
    return tmem.cells[:m, :n].view(np.float32), av @ bv.T


@pytest.mark.parametrize(("kind", "a", "b", "kw"), [
    ("f8f6f4", "e2m1", "e4m3", {}),
    ("f8f6f4", "e4m3", "e2m3", {"b_sw": "SW64"}),
    ("f8f6f4", "e3m2", "e2m1", {"b_sw": "SW32"}),
    ("f8f6f4", "e2m3", "e3m2", {"b_sw": "INTERLEAVE"}),
    ("f8f6f4", "e2m1", "e2m1", {"b_sw": "SW128"}),
    ("f8f6f4", "e3m2", "e5m2", {"b_major": "MN", "b_sw": "SW64"}),
    ("mxf8f6f4", "e2m1", "e3m2", {}),
    ("mxf8f6f4", "e5m2", "e2m1", {"b_sw": "SW64"}),
    # MN-major (transposed) FP4/FP6: PTX ISA Table 49 allows transpose for kind::f8f6f4 and
    # mxf8f6f4 with no sub-byte exception; CUTLASS's SM100 builders take M-/N-major
    # e2m1/e2m3/e3m2 there (sm1xx_gemm_check_for_f8f6f4_mix8bit_requirement)
    ("f8f6f4", "e4m3", "e2m1", {"b_major": "MN", "b_sw": "SW64"}),
    ("f8f6f4", "e2m3", "e3m2", {"a_major": "MN", "b_major": "MN", "b_sw": "SW32"}),
    ("f8f6f4", "e2m1", "e2m1", {"a_major": "MN", "a_sw": "SW64", "b_major": "MN",
                                "b_sw": "INTERLEAVE"}),
    ("mxf8f6f4", "e3m2", "e2m1", {"a_major": "MN", "b_major": "MN", "b_sw": "SW64"}),
])
def test_fp4_fp6_from_shared_memory_match_numpy(kind: str, a: str, b: str, kw: dict) -> None:
    got, want = _run_sub(kind, a, b, seed=len(a + b + kind), **kw)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)


def test_fp4_fp6_one_code_per_byte_is_not_the_format() -> None:
    # the other container assumption (one code per byte, as in TMEM) must give a wrong D
    for a, b in (("e2m1", "e4m3"), ("e4m3", "e2m3")):
        got, want = _run_sub("f8f6f4", a, b, seed=5, container="byte")
        assert not np.allclose(got, want, rtol=1e-5, atol=1e-4)


def test_fp4_fp6_errors() -> None:
    smem, tmem = Smem(), Tmem()
    word = k_block_descriptors(smem_layout(8, 32, 8, "K", "INTERLEAVE"), 8, "K", 1,
                               BASE_A)[0].encode()
    with pytest.raises(RefError, match="4- or 6-bit elements, not 8-bit"):
        read_padded_matrix(smem, word, 8, 32, 8)
    with pytest.raises(RefError, match="must be 4-bit values"):
        write_padded_matrix(smem, word, np.full((8, 32), 16), 4)
    with pytest.raises(RefError, match=r"\(rows x k\) array"):
        write_padded_matrix(smem, word, np.zeros(16, np.int64), 4)
    e2 = make_umma_atom("f8f6f4", 1, 128, 64, "f32", "e2m1", "e2m1",
                        a_source="ts").idesc().encode()
    with pytest.raises(RefError, match="e2m1 A in tensor memory .* 8-bit containers"):
        mma(tmem, smem, kind="f8f6f4", d_taddr=0, a=("tmem", 256), b_desc=word, idesc=e2,
            enable_input_d=False)
