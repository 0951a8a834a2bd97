"""The register-MMA CPU model (nvatom.ref.mma) on register words.

* golden per-lane formulas transcribed here from the PTX ISA's fragment sections (m16n8k16
  f16, m8n8k16 s8, m8n8k4 f16 quad-pairs) place the elements in the registers by hand; the
  model must then give numpy's D, read back through the ISA's C/D formula;
* every form of the registry (every sparse selector the ISA defines): random tiles ->
  words -> model -> D equals numpy's (int64 / float64 on small integers, b1 popc) on the
  decoded tiles; ``.satfinite`` clamps and the plain integer forms wrap;
* a deliberately wrong fragment (A placed with groupID and threadID_in_group swapped) or a
  wrong sparsity selector gives another D;
* bad words and missing metadata raise MmaRefError / SparseError.
"""

from __future__ import annotations

import numpy as np
import pytest

from nvatom import dtypes
from nvatom.atoms import registry, sparse
from nvatom.atoms.mma import MmaForm
from nvatom.errors import NvatomError
from nvatom.ref import mma as ref

RNG_SEED = 20261125


def _values(t: dtypes.DType, rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    if t.name == "b1":
        return rng.integers(0, 2, shape)
    if t.is_int:
        return rng.integers(int(t.int_min), int(t.int_max) + 1, shape)
    return rng.integers(-8, 9, shape).astype(np.float64)


def _b32(lo: int, hi: int) -> int:
    return lo | hi << 16


# --------------------------------------------------------------------------- ISA formulas


def test_m16n8k16_f16_isa_fragments() -> None:
    """PTX ISA "Matrix Fragments for mma.m16n8k16 with floating point type": groupID =
    laneid >> 2, threadID_in_group = laneid % 4; A a0..a7 (two f16 per .b32), B b0..b3,
    C/D c0..c3 (.f32)."""
    form = registry.mma_form("sm80.mma.m16n8k16.f32.f16.f16.f32")
    rng = np.random.default_rng(RNG_SEED)
    a = rng.integers(-8, 9, (16, 16)).astype(np.float64)
    b = rng.integers(-8, 9, (16, 8)).astype(np.float64)  # K x N, as the ISA draws it
    c = rng.integers(-64, 65, (16, 8)).astype(np.float64)
    aw = np.zeros((32, 4), np.uint32)
    bw = np.zeros((32, 2), np.uint32)
    cw = np.zeros((32, 4), np.uint32)
    for lane in range(32):
        g, t = lane >> 2, lane % 4

        def a_rc(i: int, g: int = g, t: int = t) -> tuple[int, int]:
            row = g if (i < 2 or 4 <= i < 6) else g + 8
            col = t * 2 + (i & 1) + (8 if i >= 4 else 0)
            return row, col

        def b_rc(i: int, g: int = g, t: int = t) -> tuple[int, int]:
            return t * 2 + (i & 1) + (8 if i >= 2 else 0), g

        def code(x: float) -> int:
            return int(dtypes.encode("f16", x))

        for r in range(4):
            aw[lane, r] = _b32(code(a[a_rc(2 * r)]), code(a[a_rc(2 * r + 1)]))
        for r in range(2):
            bw[lane, r] = _b32(code(b[b_rc(2 * r)]), code(b[b_rc(2 * r + 1)]))
        for i in range(4):
            cw[lane, i] = np.float32(c[g + 8 * (i >= 2), t * 2 + (i & 1)]).view(np.uint32)
    dw = ref.mma(form, aw, bw, cw)
    want = a @ b + c
    for lane in range(32):
        g, t = lane >> 2, lane % 4
        for i in range(4):
            got = float(np.uint32(dw[lane, i]).view(np.float32))
            assert got == want[g + 8 * (i >= 2), t * 2 + (i & 1)], (lane, i)


def test_m8n8k16_s8_isa_fragments() -> None:
    """PTX ISA "Matrix Fragments for mma.m8n8k16": A a0..a3 at (groupID, threadID_in_group *
    4 + i), B b0..b3 at (threadID_in_group * 4 + i, groupID), C/D c0, c1 at (groupID,
    threadID_in_group * 2 + i); .satfinite clamps."""
    for sat in (False, True):
        form = registry.mma_form(f"sm75.mma.m8n8k16{'.satfinite' if sat else ''}.s32.s8.u8.s32")
        rng = np.random.default_rng(RNG_SEED + sat)
        a = rng.integers(-128, 128, (8, 16))
        b = rng.integers(0, 256, (16, 8))
        near = rng.integers(0, 2**18, (8, 8))  # C near the s32 limits
        c = np.where(rng.integers(0, 2, (8, 8)) == 1, 2**31 - 1 - near, -(2**31) + near)
        aw = np.zeros((32, 1), np.uint32)
        bw = np.zeros((32, 1), np.uint32)
        cw = np.zeros((32, 2), np.uint32)
        for lane in range(32):
            g, t = lane >> 2, lane % 4
            aw[lane, 0] = sum((int(a[g, t * 4 + i]) & 0xFF) << (8 * i) for i in range(4))
            bw[lane, 0] = sum(int(b[t * 4 + i, g]) << (8 * i) for i in range(4))
            for i in range(2):
                cw[lane, i] = int(c[g, t * 2 + i]) & 0xFFFFFFFF
        dw = ref.mma(form, aw, bw, cw)
        exact = a @ b + c
        want = np.clip(exact, -(2**31), 2**31 - 1) if sat else \
            (exact + 2**31) % 2**32 - 2**31
        for lane in range(32):
            g, t = lane >> 2, lane % 4
            for i in range(2):
                got = int(np.uint32(dw[lane, i]).view(np.int32))
                assert got == want[g, t * 2 + i], (sat, lane, i)
        assert (exact != want).any(), "the C near the limits neither saturated nor wrapped"


def test_m8n8k4_quad_pair_isa_fragments() -> None:
    """PTX ISA "Matrix Fragments for mma.m8n8k4 with .f16 floating point type": four
    independent products, quad-pair q = lanes 4q..4q+3 and 4q+16..4q+19; A .row (row =
    laneid % 4 (+4 for the upper lanes), col = i), B .col (row = i, col = laneid % 4 (+4)),
    C/D .f32 row = X (+4) with X = (laneid & 1) + (i & 2), col = (i & 4) + (laneid & 2) +
    (i & 1)."""
    form = registry.mma_form("sm70.mma.m8n8k4.row.col.f32.f16.f16.f32")
    rng = np.random.default_rng(RNG_SEED)
    a = rng.integers(-8, 9, (4, 8, 4)).astype(np.float64)
    b = rng.integers(-8, 9, (4, 4, 8)).astype(np.float64)  # K x N
    c = rng.integers(-64, 65, (4, 8, 8)).astype(np.float64)
    aw, bw, cw = (np.zeros((32, n), np.uint32) for n in (2, 2, 8))

    def code(x: float) -> int:
        return int(dtypes.encode("f16", x))

    for lane in range(32):
        q, hi = (lane % 16) // 4, 4 * (lane >= 16)
        x = lane % 4 + hi
        for r in range(2):
            aw[lane, r] = _b32(code(a[q, x, 2 * r]), code(a[q, x, 2 * r + 1]))
            bw[lane, r] = _b32(code(b[q, 2 * r, x]), code(b[q, 2 * r + 1, x]))
        for i in range(8):
            row, col = (lane & 1) + (i & 2) + hi, (i & 4) + (lane & 2) + (i & 1)
            cw[lane, i] = np.float32(c[q, row, col]).view(np.uint32)
    dw = ref.mma(form, aw, bw, cw)
    want = a @ b + c
    for lane in range(32):
        q, hi = (lane % 16) // 4, 4 * (lane >= 16)
        for i in range(8):
            row, col = (lane & 1) + (i & 2) + hi, (i & 4) + (lane & 2) + (i & 1)
            assert float(np.uint32(dw[lane, i]).view(np.float32)) == want[q, row, col]


# --------------------------------------------------------------------------- every form


def _numpy_d(form: MmaForm, a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    if form.bop == "xor.popc":
        d = c + (a[:, :, None, :] ^ b[:, None, :, :]).sum(axis=3)
    elif form.bop == "and.popc":
        d = c + (a[:, :, None, :] & b[:, None, :, :]).sum(axis=3)
    else:
        d = c + np.einsum("pmk,pnk->pmn", a, b)
    if form.d.is_int:
        d = np.clip(d, -(2**31), 2**31 - 1) if form.satfinite else \
            (d + 2**31) % 2**32 - 2**31
    return d


@pytest.mark.parametrize("family", sorted({f.mnemonic for f in registry.mma_forms()}))
def test_every_form_matches_numpy(family: str) -> None:
    rng = np.random.default_rng(RNG_SEED)
    forms = registry.mma_forms(mnemonic=family)
    assert forms
    for form in forms:
        p, m, ka = ref.tile_shape(form, "A")
        n, k = form.n, form.k
        b = _values(form.b, rng, (p, n, k))
        c = rng.integers(-(2**31), 2**31, (p, m, n)) if form.c.name == "s32" else \
            rng.integers(-64, 65, (p, m, n)).astype(np.float64)
        for sel in sparse.isa_selectors(form) if form.is_sparse else (None,):
            if form.is_sparse:
                problem = sparse.random_sparse_problem(form, rng, sel)
                a_dense, a = problem.a_dense[None], problem.a_compressed[None]
                e = problem.metadata
            else:
                a = a_dense = _values(form.a, rng, (p, m, ka))
                e = None
            words = [ref.encode_operand(form, op, x) for op, x in (("A", a), ("B", b),
                                                                    ("C", c))]
            for w, op in zip(words, "ABC", strict=True):
                assert w.shape == (32, form.registers(op))
                assert w.dtype == (np.uint64 if form.operand_type(op).name == "f64"
                                   else np.uint32)
            got = ref.decode_operand(form, "D", ref.mma(form, *words, e, sel))
            want = _numpy_d(form, a_dense, b, c)
            assert np.array_equal(got, want), f"{form.name} selector {sel}"


def test_f16_accumulator_rounds_once() -> None:
    form = registry.mma_form("sm80.mma.m16n8k16.f16.f16.f16.f16")
    a = np.full((16, 16), 1.0)
    a[:, 0] = 2048.0
    b = np.ones((8, 16))
    c = np.zeros((16, 8))
    words = [ref.encode_operand(form, op, x) for op, x in (("A", a), ("B", b), ("C", c))]
    got = ref.decode_operand(form, "D", ref.mma(form, *words))
    # 2048 + 15 = 2063 rounds to 2064 in f16 (ulp 2 above 2048); adding one by one would
    # give 2048 (each +1 a tie to even)
    assert (got == 2064.0).all()


# --------------------------------------------------------------------------- wrong inputs


def test_wrong_fragment_changes_d() -> None:
    """Two plausible misreadings of the ISA fragment give another D: elements packed from
    the high byte down (cvt's packing order), and rows off by one groupID (lanes rotated
    by 4)."""
    form = registry.mma_form("sm75.mma.m8n8k16.s32.s8.s8.s32")
    rng = np.random.default_rng(RNG_SEED)
    a = rng.integers(-128, 128, (8, 16))
    b = rng.integers(-128, 128, (8, 16))
    c = np.zeros((8, 8), np.int64)
    good = ref.encode_operand(form, "A", a)
    reversed_bytes = good.byteswap()
    rotated = np.roll(good, 4, axis=0)
    bw, cw = ref.encode_operand(form, "B", b), ref.encode_operand(form, "C", c)
    want = a @ b.T
    assert np.array_equal(ref.decode_operand(form, "D", ref.mma(form, good, bw, cw))[0], want)
    for wrong in (reversed_bytes, rotated):
        got = ref.decode_operand(form, "D", ref.mma(form, wrong, bw, cw))[0]
        assert not np.array_equal(got, want)


def test_wrong_selector_changes_d() -> None:
    form = registry.mma_form("sm80.sparse_mma.m16n8k16.f32.f16.f16.f32")
    rng = np.random.default_rng(RNG_SEED)
    problem = sparse.random_sparse_problem(form, rng, 1)
    aw = ref.encode_operand(form, "A", problem.a_compressed)
    b = rng.integers(-8, 9, (8, 16)).astype(np.float64)
    bw = ref.encode_operand(form, "B", b)
    cw = ref.encode_operand(form, "C", np.zeros((16, 8)))
    right = ref.decode_operand(form, "D", ref.mma(form, aw, bw, cw, problem.metadata, 1))[0]
    assert np.array_equal(right, problem.a_dense @ b.T)
    other = ref.decode_operand(form, "D", ref.mma(form, aw, bw, cw, problem.metadata, 0))[0]
    assert not np.array_equal(other, right)  # lanes of selector 0 hold the decoy nibbles


def test_bad_inputs_raise() -> None:
    form = registry.mma_form("sm80.mma.m16n8k16.f32.f16.f16.f32")
    ok = np.zeros((32, 4), np.uint32)
    with pytest.raises(ref.MmaRefError, match="shape"):
        ref.mma(form, np.zeros((32, 3), np.uint32), np.zeros((32, 2), np.uint32), ok)
    with pytest.raises(ref.MmaRefError, match="32-bit"):
        ref.mma(form, np.full((32, 4), 2**33), np.zeros((32, 2), np.uint32), ok)
    with pytest.raises(ref.MmaRefError, match="dense"):
        ref.mma(form, ok, np.zeros((32, 2), np.uint32), ok, np.zeros(32, np.uint32), 0)
    with pytest.raises(ref.MmaRefError, match="tiles have shape"):
        ref.encode_operand(form, "A", np.zeros((16, 8)))
    sp = registry.mma_form("sm80.sparse_mma.m16n8k16.f32.f16.f16.f32")
    with pytest.raises(ref.MmaRefError, match="metadata"):
        ref.mma(sp, np.zeros((32, 2), np.uint32), np.zeros((32, 2), np.uint32), ok)
    with pytest.raises(NvatomError, match="nibble"):  # 0b0000 names one element twice
        ref.mma(sp, np.zeros((32, 2), np.uint32), np.zeros((32, 2), np.uint32), ok,
                np.zeros(32, np.uint32), 0)


def test_error_bound_is_zero_for_integers_and_covers_rounding() -> None:
    form = registry.mma_form("sm80.mma.m16n8k16.s32.s8.s8.s32")
    z = np.zeros((1, 16, 16))
    assert not ref.error_bound(form, z, np.zeros((1, 8, 16)), np.zeros((1, 16, 8))).any()
    f = registry.mma_form("sm80.mma.m16n8k8.f32.tf32.tf32.f32")
    rng = np.random.default_rng(RNG_SEED)
    a = dtypes.decode("tf32", dtypes.encode("tf32", rng.standard_normal((1, 16, 8))))
    b = dtypes.decode("tf32", dtypes.encode("tf32", rng.standard_normal((1, 8, 8))))
    c = rng.standard_normal((1, 16, 8)).astype(np.float32).astype(np.float64)
    words = [ref.encode_operand(f, op, x) for op, x in (("A", a), ("B", b), ("C", c))]
    got = ref.decode_operand(f, "D", ref.mma(f, *words))
    exact = c + np.einsum("pmk,pnk->pmn", a, b)
    assert (np.abs(got - exact) <= ref.error_bound(f, a, b, c)).all()
