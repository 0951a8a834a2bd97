"""wgmma.mma_async (ss, f16/bf16 inputs, f32 accumulation) on an sm_90a GPU: global ->
swizzled shared tiles -> descriptors -> k_steps x mma_async -> accumulator layout -> global,
against numpy float64 on the exactly decoded inputs.

Fresh random inputs each run, D poisoned with NaN (and the accumulators start as NaN in the
kernel, so scale-d = false on the first step is tested too).  A deliberately mismatched B
descriptor (SW64 over an SW128 tile) is rejected by check_desc_matches and, run anyway, gives
a wrong product."""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import pytest

from nvatom import dtypes
from nvatom.atoms.sm90 import wgmma_form
from nvatom.descriptors.wgmma import DescriptorError, check_desc_matches
from nvatom.ptx.wgmma_emit import build_wgmma_test_module, wgmma_test_plan
from nvatom.runtime.ptxas import assemble

pytestmark = pytest.mark.gpu

SWIZZLES = ("SW128", "SW64", "SW32", "INTERLEAVE")


def _require_sm90() -> None:
    import cupy

    if cupy.cuda.Device().compute_capability != "90":
        pytest.skip("wgmma needs an sm_90 (Hopper) GPU")


def _run(form, swizzle: str, k_steps: int, b_desc_swizzle: str | None = None,
         rng: np.random.Generator | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    import cupy

    rng = rng or np.random.default_rng()
    dt = form.a.name
    text = build_wgmma_test_module(form, swizzle, k_steps,
                                   b_desc_swizzle=b_desc_swizzle).emit()
    res = assemble(text, "sm_90a")
    kt = form.k * k_steps
    a_bits = dtypes.encode(dt, rng.standard_normal((64, kt)))
    b_bits = dtypes.encode(dt, rng.standard_normal((form.n, kt)))
    a, b = dtypes.decode(dt, a_bits), dtypes.decode(dt, b_bits)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "k.cubin"
        path.write_bytes(res.cubin)
        fn = cupy.RawModule(path=str(path)).get_function("wgmma_test")
        d_a = cupy.asarray(np.ascontiguousarray(a_bits.astype(np.uint16)))
        d_b = cupy.asarray(np.ascontiguousarray(b_bits.astype(np.uint16)))
        d_d = cupy.full((64, form.n), np.nan, dtype=cupy.float32)
        fn((1,), (128,), (d_a, d_b, d_d))
        cupy.cuda.runtime.deviceSynchronize()
        got = cupy.asnumpy(d_d).astype(np.float64)
    return got, a, b


@pytest.mark.parametrize("dtype", ["f16", "bf16"])
@pytest.mark.parametrize("n", [8, 16, 24, 64, 128, 256])
@pytest.mark.parametrize("swizzle", SWIZZLES)
@pytest.mark.parametrize("k_steps", [1, 3])
def test_wgmma_product(dtype: str, n: int, swizzle: str, k_steps: int) -> None:
    _require_sm90()
    form = wgmma_form(f"sm90.mma.m64n{n}k16.ss.f32.{dtype}.{dtype}")
    got, a, b = _run(form, swizzle, k_steps)
    ref = a @ b.T
    assert np.isfinite(got).all(), "unwritten or non-finite outputs"
    tol = 1e-5 * (np.abs(a) @ np.abs(b).T) + 1e-30
    err = np.abs(got - ref)
    assert (err <= tol).all(), float(np.max(err / tol))


def test_mismatched_descriptor_is_rejected_and_wrong() -> None:
    _require_sm90()
    form = wgmma_form("sm90.mma.m64n64k16.ss.f32.f16.f16")
    plan = wgmma_test_plan(form, "SW128", 1, b_desc_swizzle="SW64")
    with pytest.raises(DescriptorError):
        check_desc_matches(plan.b_descs[0], plan.b_smem, 16, "K")
    got, a, b = _run(form, "SW128", 1, b_desc_swizzle="SW64")
    ref = a @ b.T
    tol = 1e-5 * (np.abs(a) @ np.abs(b).T) + 1e-30
    assert not (np.abs(got - ref) <= tol).all(), "a mismatched descriptor gave the right answer"


# ------------------------------------------------------------------------- other families
#
# Global A/B hold the element codes in their storage width (b1 packed 8 to a byte, element 0
# in the least significant bit); D is the form's accumulator type.  Reference: numpy on the
# decoded inputs (float64; int64 for integers, then the s32 wrap or clamp).

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1


def _values(dt: str, shape: tuple[int, int], rng: np.random.Generator) -> np.ndarray:
    if dt == "b1":
        return rng.integers(0, 2, shape)
    if dt == "s8":
        return rng.integers(-128, 128, shape)
    if dt == "u8":
        return rng.integers(0, 256, shape)
    scale = 2.0 if dt in ("e4m3", "e5m2") else 1.0
    return scale * rng.standard_normal(shape)


def _global_bytes(dt: str, codes: np.ndarray) -> np.ndarray:
    """Row-major bytes of a 2-D code array (b1: each row packed into bytes)."""
    d = dtypes.dtype(dt)
    if dt == "b1":
        return np.stack([dtypes.pack_codes(dt, row) for row in codes])
    return np.ascontiguousarray(codes.astype(f"<u{d.storage_bits // 8}")).view(np.uint8)


def _run_any(form, swizzle: str, k_steps: int, *, a_major: str = "K", b_major: str = "K",
             c: np.ndarray | None = None, b_desc_swizzle: str | None = None,
             rng: np.random.Generator | None = None):
    """Run the test kernel on random inputs: (got, a, b) with got decoded (float64 or
    int64) and a, b the decoded inputs (64 x Kt, N x Kt)."""
    import cupy

    rng = rng or np.random.default_rng()
    text = build_wgmma_test_module(form, swizzle, k_steps, b_desc_swizzle=b_desc_swizzle,
                                   a_major=a_major, b_major=b_major,
                                   load_c=c is not None).emit()
    res = assemble(text, "sm_90a")
    kt = form.k * k_steps
    ops = []
    for dt, rows, major in ((form.a.name, 64, a_major), (form.b.name, form.n, b_major)):
        codes = dtypes.encode(dt, _values(dt, (rows, kt), rng))
        ops.append((dtypes.decode(dt, codes),
                    _global_bytes(dt, codes.T if major == "MN" else codes)))
    (a, a_g), (b, b_g) = ops
    dn = form.d.name
    if dn == "f16":
        d0 = np.full((64, form.n), 0x7E00, np.uint16)
        if c is not None:
            d0 = dtypes.encode("f16", c).astype(np.uint16)
    elif dn == "f32":
        d0 = np.full((64, form.n), np.nan, np.float32) if c is None else c.astype(np.float32)
    else:
        d0 = np.full((64, form.n), 0x5A5A5A5A, np.int32) if c is None else c.astype(np.int32)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "k.cubin"
        path.write_bytes(res.cubin)
        fn = cupy.RawModule(path=str(path)).get_function("wgmma_test")
        d_a, d_b, d_d = (cupy.asarray(np.ascontiguousarray(x)) for x in (a_g, b_g, d0))
        fn((1,), (128,), (d_a, d_b, d_d))
        cupy.cuda.runtime.deviceSynchronize()
        out = cupy.asnumpy(d_d)
    if dn == "f16":
        got = dtypes.decode("f16", out).astype(np.float64)
    elif dn == "f32":
        got = out.astype(np.float64)
    else:
        got = out.astype(np.int64)
    return got, a, b


def _rel_tol(form) -> float:
    """Tolerance relative to sum |a||b|: f32 accumulation 1e-5 (tf32/16-bit); FP8 into f32
    2^-10 (Hopper's FP8 accumulator keeps fewer bits than f32); f16 accumulation 2^-8."""
    if form.d.name == "f16":
        return 2.0**-8
    return 2.0**-10 if form.family == "fp8" else 1e-5


def _check(form, got: np.ndarray, a: np.ndarray, b: np.ndarray,
           c: np.ndarray | None = None) -> None:
    if form.d.name == "s32":
        ref = a.astype(np.int64) @ b.astype(np.int64).T
        if c is not None:
            ref = ref + c
        ref = np.clip(ref, INT32_MIN, INT32_MAX) if form.satfinite else \
            (ref - INT32_MIN) % 2**32 + INT32_MIN
        bad = np.argwhere(got != ref)
        assert bad.size == 0, (len(bad), bad[:4].tolist())
        return
    ref = a @ b.T + (0 if c is None else c)
    assert np.isfinite(got).all(), "unwritten or non-finite outputs"
    mag = np.abs(a) @ np.abs(b).T + (0 if c is None else np.abs(c))
    tol = _rel_tol(form) * mag + 1e-30
    err = np.abs(got - ref)
    assert (err <= tol).all(), float(np.max(err / tol))


FP8_PAIRS = [(x, y) for x in ("e4m3", "e5m2") for y in ("e4m3", "e5m2")]
INT_PAIRS = [(x, y) for x in ("s8", "u8") for y in ("s8", "u8")]
TWO_SW = ("SW128", "SW32")


@pytest.mark.parametrize("n", [8, 16, 24, 64, 128, 256])
@pytest.mark.parametrize("swizzle", TWO_SW)
@pytest.mark.parametrize("k_steps", [1, 3])
def test_tf32(n: int, swizzle: str, k_steps: int) -> None:
    _require_sm90()
    form = wgmma_form(f"sm90.mma.m64n{n}k8.ss.f32.tf32.tf32")
    _check(form, *_run_any(form, swizzle, k_steps))


@pytest.mark.parametrize("pair", FP8_PAIRS, ids="x".join)
@pytest.mark.parametrize("acc", ["f32", "f16"])
@pytest.mark.parametrize("n", [8, 16, 24, 64, 128, 256])
@pytest.mark.parametrize("swizzle", TWO_SW)
def test_fp8(pair: tuple[str, str], acc: str, n: int, swizzle: str) -> None:
    _require_sm90()
    form = wgmma_form(f"sm90.mma.m64n{n}k32.ss.{acc}.{pair[0]}.{pair[1]}")
    _check(form, *_run_any(form, swizzle, 2))


@pytest.mark.parametrize("pair", INT_PAIRS, ids="x".join)
@pytest.mark.parametrize("n", [8, 16, 24, 64, 128, 256])
@pytest.mark.parametrize("swizzle", (*TWO_SW, "INTERLEAVE"))
def test_int8(pair: tuple[str, str], n: int, swizzle: str) -> None:
    _require_sm90()
    form = wgmma_form(f"sm90.mma.m64n{n}k32.ss.s32.{pair[0]}.{pair[1]}")
    _check(form, *_run_any(form, swizzle, 2))


def _saturating_c(n: int, rng: np.random.Generator) -> np.ndarray:
    """C near INT32_MAX (rows 0-21), near INT32_MIN (rows 22-43), moderate (rows 44-63):
    one K step of 8-bit products moves by at most 32 * 255 * 255 < 2^21."""
    c = rng.integers(-(2**20), 2**20, (64, n))
    c[:22] = INT32_MAX - rng.integers(0, 2**18, (22, n))
    c[22:44] = INT32_MIN + rng.integers(0, 2**18, (22, n))
    return c


@pytest.mark.parametrize("pair", INT_PAIRS, ids="x".join)
@pytest.mark.parametrize("sat", [False, True], ids=["wrap", "satfinite"])
@pytest.mark.parametrize("n", [24, 64])
def test_int8_preloaded_accumulator(pair: tuple[str, str], sat: bool, n: int) -> None:
    """D preloaded with C, scale-d = 1: .satfinite clamps to the s32 range, without it the
    sum wraps."""
    _require_sm90()
    rng = np.random.default_rng()
    sf = ".satfinite" if sat else ""
    form = wgmma_form(f"sm90.mma.m64n{n}k32.ss{sf}.s32.{pair[0]}.{pair[1]}")
    c = _saturating_c(n, rng)
    got, a, b = _run_any(form, "SW128", 1, c=c, rng=rng)
    _check(form, got, a, b, c)


@pytest.mark.parametrize("n", [8, 16, 24, 64, 128, 256])
@pytest.mark.parametrize("swizzle", TWO_SW)
@pytest.mark.parametrize("k_steps", [1, 2])
def test_b1_and_popc(n: int, swizzle: str, k_steps: int) -> None:
    _require_sm90()
    form = wgmma_form(f"sm90.mma.m64n{n}k256.ss.s32.b1.b1.and.popc")
    _check(form, *_run_any(form, swizzle, k_steps))


def test_f32_preloaded_accumulator() -> None:
    _require_sm90()
    rng = np.random.default_rng()
    form = wgmma_form("sm90.mma.m64n64k16.ss.f32.f16.f16")
    c = rng.standard_normal((64, 64))
    got, a, b = _run_any(form, "SW128", 2, c=c, rng=rng)
    _check(form, got, a, b, c)


# ------------------------------------------------------------------------- rs forms

RS_FORMS = ["f32.f16.f16", "f16.f16.f16", "f32.bf16.bf16", "f32.tf32.tf32", "f32.e4m3.e5m2",
            "f16.e5m2.e4m3", "s32.s8.u8", "s32.u8.u8", "s32.s8.s8"]


@pytest.mark.parametrize("types", RS_FORMS)
@pytest.mark.parametrize("n", [8, 64, 256])
@pytest.mark.parametrize("swizzle", TWO_SW)
def test_rs(types: str, n: int, swizzle: str) -> None:
    """A from registers (each thread loads its fragment from global memory), B by
    descriptor, 2 K steps."""
    _require_sm90()
    bits = dtypes.dtype(types.split(".")[1]).pack_bits
    if types.startswith("s32") and n == 64:
        n = 24
    form = wgmma_form(f"sm90.mma.m64n{n}k{256 // bits}.rs.{types}")
    _check(form, *_run_any(form, swizzle, 2))


# ------------------------------------------------------------------------- MN-major


def _mn_ok(n: int, swizzle: str, majors: tuple[str, str]) -> bool:
    from nvatom.atoms.smem import smem_swizzle

    span = smem_swizzle(swizzle).row_bytes // 2  # 16-bit elements along MN in one atom
    return (majors[0] != "MN" or 64 % span == 0) and (majors[1] != "MN" or n % span == 0)


MN_CASES = [(dt, majors, n, sw) for dt in ("f16", "bf16")
            for majors in (("MN", "K"), ("K", "MN"), ("MN", "MN"))
            for n in (8, 64, 256) for sw in ("SW128", "SW32", "INTERLEAVE")
            if _mn_ok(n, sw, majors)]


@pytest.mark.parametrize("dtype,majors,n,swizzle", MN_CASES)
def test_mn_major(dtype: str, majors: tuple[str, str], n: int, swizzle: str) -> None:
    """Transposed (MN-major) A and/or B in shared memory with trans-a / trans-b = 1."""
    _require_sm90()
    form = wgmma_form(f"sm90.mma.m64n{n}k16.ss.f32.{dtype}.{dtype}")
    _check(form, *_run_any(form, swizzle, 2, a_major=majors[0], b_major=majors[1]))


@pytest.mark.parametrize("types", ["f32.f16.f16", "f16.f16.f16", "f32.bf16.bf16"])
@pytest.mark.parametrize("swizzle", ["SW128", "SW32"])
def test_rs_mn_major_b(types: str, swizzle: str) -> None:
    _require_sm90()
    form = wgmma_form(f"sm90.mma.m64n64k16.rs.{types}")
    _check(form, *_run_any(form, swizzle, 2, b_major="MN"))
