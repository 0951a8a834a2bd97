"""The WGMMA CPU model (nvatom.ref.wgmma): registers, descriptors, shared memory, immediates.

* golden formulas transcribed here from the PTX ISA ("Register Fragments": D and the rs A
  of 16- and 8-bit types; "Shared Memory Matrix Layout": the canonical K- and MN-major
  address arithmetic with LBO, SBO and the swizzle on absolute addresses) place elements
  and bytes by hand; the model must read them where the ISA says;
* every form of the table (fixed seed) against numpy, with the swizzle mode, scale-d,
  imm-scale-a/b = -1 and trans-a/b varied;
* a deliberately wrong descriptor (other swizzle mode, other SBO) reads another tile;
* bad immediates, set base offsets and out-of-range reads raise WgmmaRefError;
* the WGMMA test kernel with imm-scale-a/b = -1 (used by tests/gpu/test_ref_models_gpu.py)
  assembles with ptxas and spells the immediates.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from nvatom import dtypes
from nvatom.atoms.sm90 import FORMS, wgmma_form
from nvatom.descriptors.wgmma import SM90_LAYOUT_TYPE, WgmmaDescriptor
from nvatom.ptx.wgmma_emit import WgmmaEmitError, build_wgmma_test_module
from nvatom.ref import wgmma as ref
from nvatom.runtime.ptxas import assemble

RNG_SEED = 20261125
SWIZZLE_BYTES = {"INTERLEAVE": 0, "SW32": 32, "SW64": 64, "SW128": 128}


def _values(t: dtypes.DType, rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    if t.name == "b1":
        return rng.integers(0, 2, shape)
    if t.is_int:
        return rng.integers(int(t.int_min), int(t.int_max) + 1, shape)
    return rng.integers(-8, 9, shape).astype(np.float64)


# --------------------------------------------------------------------------- ISA formulas


def _isa_d_rc(thread: int, i: int) -> tuple[int, int]:
    """PTX ISA wgmma D fragment: row = 16 * warp + groupID (+8 for d2, d3 of every four),
    col = (i / 4) * 8 + threadID_in_group * 2 + (i % 2)."""
    w, lane = thread // 32, thread % 32
    g, t = lane >> 2, lane % 4
    return 16 * w + g + 8 * ((i >> 1) & 1), (i >> 2) * 8 + t * 2 + (i & 1)


def _isa_a_rc(bits: int, thread: int, i: int) -> tuple[int, int]:
    """PTX ISA wgmma A fragment (rs): 16-bit a0..a7 at row 16w + groupID + 8 * ((i >> 1) & 1),
    col (i >> 2) * 8 + threadID_in_group * 2 + (i & 1); 8-bit a0..a15 at row 16w +
    groupID + 8 * ((i >> 2) & 1), col (i >> 3) * 16 + threadID_in_group * 4 + (i & 3)."""
    w, lane = thread // 32, thread % 32
    g, t = lane >> 2, lane % 4
    if bits == 16:
        return 16 * w + g + 8 * ((i >> 1) & 1), (i >> 2) * 8 + t * 2 + (i & 1)
    return 16 * w + g + 8 * ((i >> 2) & 1), (i >> 3) * 16 + t * 4 + (i & 3)


@pytest.mark.parametrize("name", ["sm90.mma.m64n16k16.rs.f32.f16.f16",
                                  "sm90.mma.m64n24k32.rs.s32.s8.u8",
                                  "sm90.mma.m64n8k16.rs.f16.f16.f16"])
def test_register_fragments_follow_the_isa(name: str) -> None:
    form = wgmma_form(name)
    rng = np.random.default_rng(RNG_SEED)
    bits = form.a.pack_bits
    a = _values(form.a, rng, (64, form.k))
    b = _values(form.b, rng, (form.n, form.k))
    c = rng.integers(-64, 65, (64, form.n))
    a_codes = dtypes.encode(form.a, a).astype(np.int64)
    aw = np.zeros((128, 4), np.uint32)
    per = 32 // bits
    for thr in range(128):
        for i in range(4 * per):
            r, j = divmod(i, per)
            aw[thr, r] |= np.uint32(int(a_codes[_isa_a_rc(bits, thr, i)]) << (bits * j))
    # B in shared memory, K-major, no swizzle: core matrix (8 rows x 16 bytes), LBO between
    # the two 16-byte K halves, SBO between 8-row groups
    eb = bits // 8
    lbo, sbo = 16 * 8, 16 * 8 * 2
    smem = np.zeros(1 << 14, np.uint8)
    b_codes = dtypes.encode(form.b, b).astype(np.int64)
    for n, k in itertools.product(range(form.n), range(form.k)):
        kb = k * eb
        addr = (n % 8) * 16 + (n // 8) * sbo + (kb // 16) * lbo + kb % 16
        for j in range(eb):
            smem[addr + j] = (int(b_codes[n, k]) >> (8 * j)) & 0xFF
    desc = WgmmaDescriptor(0, lbo, sbo, 0, "INTERLEAVE").encode()
    d_per = 2 if form.d.name == "f16" else 1
    cw = np.zeros((128, form.registers("D")), np.uint32)
    for thr in range(128):
        for i in range(form.n // 2):
            code = int(dtypes.encode("f16", c[_isa_d_rc(thr, i)])) if form.d.name == "f16" \
                else int(np.float32(c[_isa_d_rc(thr, i)]).view(np.uint32)) \
                if form.d.name == "f32" else int(c[_isa_d_rc(thr, i)]) & 0xFFFFFFFF
            cw[thr, i // d_per] |= np.uint32(code << (16 * (i % d_per)))
    dw = ref.wgmma(form, cw, aw, desc, smem, scale_d=True)
    want = a @ b.T + c
    for thr in range(128):
        for i in range(form.n // 2):
            word = int(dw[thr, i // d_per])
            if form.d.name == "f16":
                got = float(dtypes.decode("f16", (word >> (16 * (i % 2))) & 0xFFFF))
            elif form.d.name == "f32":
                got = float(np.uint32(word).view(np.float32))
            else:
                got = int(np.uint32(word).view(np.int32))
            assert got == want[_isa_d_rc(thr, i)], (thr, i)


def _isa_address(start: int, lbo: int, sbo: int, sw: str, major: str, mn_byte: int,
                 k: int) -> int:
    """Byte address of (MN, K) of one K-block, PTX ISA canonical layouts (W = swizzle
    bytes): K-major (row r = MN, K byte c) INTERLEAVE start + (r%8)*16 + (r//8)*SBO +
    (c//16)*LBO + c%16, SWxx start + (r%8)*W + (r//8)*SBO + c; MN-major (MN byte m, K row
    k) INTERLEAVE start + m%16 + (m//16)*SBO + (k%8)*16 + (k//8)*LBO, SWxx start + m%W +
    (m//W)*LBO + (k%8)*W + (k//8)*SBO; then bits [4, 4+B) ^= bits [7, 7+B) of the absolute
    address, 16 << B = W."""
    w = SWIZZLE_BYTES[sw]
    if major == "K":
        r, c = mn_byte, k
        a = start + (r % 8) * 16 + (r // 8) * sbo + (c // 16) * lbo + c % 16 if not w else \
            start + (r % 8) * w + (r // 8) * sbo + c
    else:
        m = mn_byte
        a = start + m % 16 + (m // 16) * sbo + (k % 8) * 16 + (k // 8) * lbo if not w else \
            start + m % w + (m // w) * lbo + (k % 8) * w + (k // 8) * sbo
    if w:
        bb = (w // 16).bit_length() - 1
        a ^= ((a >> 7) & ((1 << bb) - 1)) << 4
    return a


@pytest.mark.parametrize("sw", list(SWIZZLE_BYTES))
@pytest.mark.parametrize("major", ["K", "MN"])
def test_shared_memory_follows_the_isa(sw: str, major: str) -> None:
    """Random bytes, a descriptor with a random start, LBO and SBO: the model reads each
    element where the ISA's canonical layout puts it."""
    rng = np.random.default_rng(RNG_SEED + len(sw))
    if major == "K":
        form, op = wgmma_form("sm90.mma.m64n64k32.ss.s32.s8.u8"), "B"
    else:
        form, op = wgmma_form("sm90.mma.m64n64k16.ss.f32.f16.f16"), "B"
    eb = form.b.pack_bits // 8
    smem = rng.integers(0, 256, 1 << 16).astype(np.uint8)
    if eb == 2:
        smem[1::2] &= 0xBF  # finite f16 codes (exponent never all ones)
    start = 16 * int(rng.integers(0, 64))
    lbo = 16 * int(rng.integers(1, 200))
    sbo = 16 * int(rng.integers(1, 200))
    desc = WgmmaDescriptor(start, lbo, sbo, 0, sw).encode()
    got = ref.read_operand(form, op, smem, desc, trans=int(major == "MN"))
    want = np.zeros((form.n, form.k))
    for n, k in itertools.product(range(form.n), range(form.k)):
        if major == "K":
            addr = _isa_address(start, lbo, sbo, sw, "K", n, k * eb)
        else:
            addr = _isa_address(start, lbo, sbo, sw, "MN", n * eb, k)
        code = sum(int(smem[addr + j]) << (8 * j) for j in range(eb))
        want[n, k] = float(dtypes.decode(form.b, code))
    assert np.array_equal(got, want)


def test_b1_bytes_are_lsb_first() -> None:
    form = wgmma_form("sm90.mma.m64n8k256.ss.s32.b1.b1.and.popc")
    smem = np.zeros(4096, np.uint8)
    desc = WgmmaDescriptor(0, 16 * 8, 16 * 8 * 2, 0, "INTERLEAVE").encode()
    smem[0] = 0b0000_0101  # row 0, K bits 0 and 2
    got = ref.read_operand(form, "B", smem, desc)
    assert got[0, :8].tolist() == [1, 0, 1, 0, 0, 0, 0, 0] and got.sum() == 2


# --------------------------------------------------------------------------- whole forms


def test_every_form_matches_numpy() -> None:
    """Every form of the table, each with its own swizzle, scale-d, negation and transposes
    (cycled), against numpy."""
    rng = np.random.default_rng(RNG_SEED)
    for i, form in enumerate(FORMS):
        sw = list(SWIZZLE_BYTES)[i % 4]
        a = _values(form.a, rng, (64, form.k))
        b = _values(form.b, rng, (form.n, form.k))
        c = rng.integers(-(2**31), 2**31, (64, form.n)) if form.d.is_int else \
            rng.integers(-64, 65, (64, form.n)).astype(np.float64)
        scale_d = bool(i % 2)
        sa = -1 if "scale_a" in form.immediates and i % 3 == 1 else 1
        sb = -1 if "scale_b" in form.immediates and i % 3 == 2 else 1
        ta = int("trans_a" in form.immediates and i % 4 == 1)
        tb = int("trans_b" in form.immediates and i % 4 == 2)
        w = SWIZZLE_BYTES[sw]
        if tb and (form.n * 2) % max(16, w):
            tb = 0  # an MN-major operand fills whole swizzle atoms along MN
        # canonical strides (bytes) that keep every element of a K-block apart
        k_strides = (16, 8 * w) if w else (128, 256)
        mn_strides = (8 * w, 4096) if w else (8192, 128)
        smem = np.zeros(1 << 17, np.uint8)
        a_desc = WgmmaDescriptor(0, *(mn_strides if ta else k_strides), 0, sw).encode()
        b_desc = WgmmaDescriptor(1 << 16, *(mn_strides if tb else k_strides), 0, sw).encode()
        ref.write_operand(form, "B", smem, b_desc, b, trans=tb)
        if form.a_source == "ss":
            ref.write_operand(form, "A", smem, a_desc, a, trans=ta)
            a_op: object = a_desc
        else:
            a_op = ref.encode_a(form, a)
        d_in = ref.encode_d(form, c) if scale_d else None
        got = ref.decode_d(form, ref.wgmma(form, d_in, a_op, b_desc, smem, scale_d=scale_d,
                                           scale_a=sa, scale_b=sb, trans_a=ta, trans_b=tb))
        if form.bop:
            want = (a[:, None, :] & b[None, :, :]).sum(axis=2)
        else:
            want = (sa * a) @ (sb * b).T
        if scale_d:
            want = want + c
        if form.d.is_int:
            want = np.clip(want, -(2**31), 2**31 - 1) if form.satfinite else \
                (want + 2**31) % 2**32 - 2**31
        assert np.array_equal(got, want), (form.name, sw, scale_d, sa, sb, ta, tb)
        # the operand round trip: what was written is what the descriptor reads
        assert np.array_equal(ref.read_operand(form, "B", smem, b_desc, tb), b)


def test_wrong_descriptor_reads_another_tile() -> None:
    form = wgmma_form("sm90.mma.m64n64k16.ss.f32.f16.f16")
    rng = np.random.default_rng(RNG_SEED)
    a = rng.integers(-8, 9, (64, 16)).astype(np.float64)
    b = rng.integers(-8, 9, (64, 16)).astype(np.float64)
    smem = np.zeros(1 << 16, np.uint8)
    a_desc = WgmmaDescriptor(0, 16, 1024, 0, "SW128").encode()
    b_desc = WgmmaDescriptor(8192, 16, 1024, 0, "SW128").encode()
    ref.write_operand(form, "A", smem, a_desc, a)
    ref.write_operand(form, "B", smem, b_desc, b)
    good = ref.decode_d(form, ref.wgmma(form, None, a_desc, b_desc, smem, scale_d=False))
    assert np.array_equal(good, a @ b.T)
    for wrong in (WgmmaDescriptor(8192, 16, 512, 0, "SW64"), WgmmaDescriptor(8192, 16, 512, 0,
                                                                          "SW128")):
        got = ref.decode_d(form, ref.wgmma(form, None, a_desc, wrong.encode(), smem,
                                           scale_d=False))
        assert not np.array_equal(got, good), wrong


def test_bad_inputs_raise() -> None:
    f16 = wgmma_form("sm90.mma.m64n64k16.ss.f32.f16.f16")
    s8 = wgmma_form("sm90.mma.m64n64k32.ss.s32.s8.s8")
    rs = wgmma_form("sm90.mma.m64n64k16.rs.f32.f16.f16")
    smem = np.zeros(1 << 15, np.uint8)
    desc = WgmmaDescriptor(0, 16, 1024, 0, "SW128").encode()
    with pytest.raises(ref.WgmmaRefError, match="scale_a"):
        ref.wgmma(s8, None, desc, desc, smem, scale_d=False, scale_a=-1)
    with pytest.raises(ref.WgmmaRefError, match="trans_a"):
        ref.wgmma(rs, None, np.zeros((128, 4), np.uint32), desc, smem, scale_d=False,
                  trans_a=1)
    with pytest.raises(ref.WgmmaRefError, match="scale_b must be"):
        ref.wgmma(f16, None, desc, desc, smem, scale_d=False, scale_b=2)
    with pytest.raises(ref.WgmmaRefError, match="base_offset"):
        ref.wgmma(f16, None, desc, desc | (1 << 49), smem, scale_d=False)
    with pytest.raises(ref.WgmmaRefError, match="beyond"):
        ref.wgmma(f16, None, desc, desc, smem[:1000], scale_d=False)
    with pytest.raises(ref.WgmmaRefError, match=r"register\(s\) per thread"):
        ref.wgmma(f16, np.zeros((128, 3), np.uint32), desc, desc, smem, scale_d=True)
    with pytest.raises(ref.WgmmaRefError, match="reserved"):
        ref.wgmma(f16, None, desc | (1 << 14), desc, smem, scale_d=False)
    with pytest.raises(ref.WgmmaRefError, match="register fragment"):
        ref.encode_a(f16, np.zeros((64, 16)))
    assert SM90_LAYOUT_TYPE["SW128"] == 1  # the descriptor above is the SW128 code


def test_error_bound() -> None:
    form = wgmma_form("sm90.mma.m64n8k32.ss.f32.e4m3.e4m3")
    a = np.ones((64, 32))
    b = np.ones((8, 32))
    bound = ref.error_bound(form, a, b, None)
    assert bound.shape == (64, 8)
    assert np.allclose(bound, 32 * 2.0**-10 + 32 * 2.0**-23)
    assert not ref.error_bound(wgmma_form("sm90.mma.m64n8k32.ss.s32.s8.s8"), a, b, None).any()


# --------------------------------------------------------------------------- test kernel


def test_negating_test_kernel_assembles() -> None:
    """The test kernel with imm-scale-a/b = -1, and with an rs b1 A (loaded 32 bits of K
    per register from the packed global rows), assembles."""
    for name, sa, sb, want in (("sm90.mma.m64n64k16.ss.f32.f16.f16", -1, 1, ["-1", "1"]),
                               ("sm90.mma.m64n32k8.rs.f32.tf32.tf32", 1, -1, ["1", "-1"]),
                               ("sm90.mma.m64n16k32.ss.f16.e5m2.e4m3", -1, -1, ["-1", "-1"]),
                               ("sm90.mma.m64n24k256.rs.s32.b1.b1.and.popc", 1, 1, [])):
        text = build_wgmma_test_module(name, "SW64", 2, scale_a=sa, scale_b=sb,
                                       load_c=True).emit()
        line = next(x for x in text.splitlines() if "wgmma.mma_async" in x)
        tokens = [x.strip() for x in line.strip().rstrip(";").split(",")]
        pred = max(i for i, x in enumerate(tokens) if x.startswith("%p"))  # scale-d
        imms = tokens[pred + 1:]
        assert imms[:2] == want, line
        assemble(text, "sm_90a")
    with pytest.raises(WgmmaEmitError, match="scale_a"):
        build_wgmma_test_module("sm90.mma.m64n64k32.ss.s32.s8.s8", scale_a=-1)
    with pytest.raises(WgmmaEmitError, match="1 or -1"):
        build_wgmma_test_module("sm90.mma.m64n64k16.ss.f32.f16.f16", scale_b=0)
