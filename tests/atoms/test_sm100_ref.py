"""The CPU model of tcgen05 (nvatom.ref.tcgen05) against nvatom's builders.

* Descriptors: random tiles (element width, major, swizzle, rows, K-blocks) are written into
  the model's shared memory through the *layout algebra* (``smem_layout``); the descriptors
  ``make_umma_desc`` / ``k_block_descriptors`` build are then read back by the model, which
  decodes the 64-bit word itself and applies the PTX ISA canonical-layout arithmetic and the
  address swizzle.  The tiles must come back element for element.
* MMA: the model's D equals numpy's A @ B^T for every modelled kind (f16, bf16, tf32, e4m3 x
  e5m2, s8 x u8, MXFP8, NVFP4, MXFP4), K-major and MN-major B, negation, accumulate and
  scale-input-d, structured sparsity and A in TMEM.
* tcgen05.ld/st: every atom round-trips through the TMEM model; 32x32b loads by four warps
  return D's rows.
"""

from __future__ import annotations

import random

import numpy as np
import pytest

from nvatom.atoms.sm100 import make_umma_atom
from nvatom.atoms.smem import smem_layout
from nvatom.atoms.tmem import LDST_SHAPES, TmemCopyAtom
from nvatom.descriptors.umma import k_block_descriptors
from nvatom.dtypes import decode, encode
from nvatom.ref.tcgen05 import RefError, Smem, Tmem, mma, read_matrix, tmem_load, tmem_store

BASE_A, BASE_B = 0x4000, 0x10000


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


_CASES = [(bits, major, sw) for bits in (4, 8, 16, 32) for major in ("K", "MN")
          for sw in ("INTERLEAVE", "SW32", "SW64", "SW128") if not (bits == 4 and major == "MN")]


@pytest.mark.parametrize(("bits", "major", "sw"), _CASES)
def test_descriptors_read_back_what_the_layout_wrote(bits: int, major: str, sw: str) -> None:
    rng = np.random.default_rng(bits * 7 + len(sw) + (major == "MN"))
    r = random.Random(bits + len(sw))
    kb = 256 // bits
    for _ in range(2):
        rows = r.choice([64, 128] if major == "K" else [128, 256])
        kblocks = r.choice([1, 2, 4])
        if major == "MN" and bits == 32 and sw == "INTERLEAVE":
            kblocks = 1
        codes = rng.integers(0, 1 << min(bits, 16), (rows, kblocks * kb)).astype(np.uint64)
        smem = Smem()
        lay = _store_tile(smem, BASE_B, codes, bits, major, sw)
        descs = k_block_descriptors(lay, bits, major, kblocks, BASE_B)
        for j, d in enumerate(descs):
            got = read_matrix(smem, d.encode(), rows, kb, bits, major)
            np.testing.assert_array_equal(got, codes[:, j * kb:(j + 1) * kb],
                                          err_msg=f"K-block {j}: {d.explain()}")


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
    i64 = make_umma_atom("f16", 1, 64, 64, "f32", "f16", "f16").idesc().encode()
    with pytest.raises(RefError, match="M = 64"):
        mma(tmem, smem, kind="f16", d_taddr=0, a=da, b_desc=db, idesc=i64, enable_input_d=False)
    with pytest.raises(RefError, match="bits 46-48"):
        mma(tmem, smem, kind="f16", d_taddr=0, a=da & ~(1 << 46), b_desc=db, idesc=idesc,
            enable_input_d=False)
    e2 = make_umma_atom("f8f6f4", 1, 128, 64, "f32", "e2m1", "e2m1").idesc().encode()
    with pytest.raises(RefError, match="8-bit container"):
        mma(tmem, smem, kind="f8f6f4", d_taddr=0, a=da, b_desc=db, idesc=e2,
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
