"""nvatom.dtypes.encode against the GPU's own cvt, bit for bit.

4M random f32 bit patterns (plus the edge cases: inf, NaN, overflow thresholds, ties,
subnormals) go through each PTX cvt form an sm_90 GPU has; every result must equal
``encode`` with the same rounding and saturation.  NaN results may differ only in payload.
(The FP6/FP4/ue8m0 conversions need sm_100a/sm_120a and are not run here.)
cvt.rna.tf32 on NaN inputs is a known exception, asserted separately below.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import pytest

from nvatom import dtypes
from nvatom.ptx.builder import Module
from nvatom.runtime.ptxas import assemble

pytestmark = pytest.mark.gpu

# (element type, rounding, satfinite, cvt instruction); {d} 16/32-bit result, {x} the f32 input.
CASES = [
    ("e4m3", "rn", True, "cvt.rn.satfinite.e4m3x2.f32 {d}, {zero}, {x}"),
    ("e5m2", "rn", True, "cvt.rn.satfinite.e5m2x2.f32 {d}, {zero}, {x}"),
    ("f16", "rn", False, "cvt.rn.f16.f32 {d}, {x}"),
    ("f16", "rz", False, "cvt.rz.f16.f32 {d}, {x}"),
    ("f16", "rm", False, "cvt.rm.f16.f32 {d}, {x}"),
    ("f16", "rp", False, "cvt.rp.f16.f32 {d}, {x}"),
    ("f16", "rn", True, "cvt.rn.satfinite.f16.f32 {d}, {x}"),
    ("bf16", "rn", False, "cvt.rn.bf16.f32 {d}, {x}"),
    ("bf16", "rz", False, "cvt.rz.bf16.f32 {d}, {x}"),
    ("bf16", "rn", True, "cvt.rn.satfinite.bf16.f32 {d}, {x}"),
    ("tf32", "rn", False, "cvt.rn.tf32.f32 {d}, {x}"),
    ("tf32", "rz", False, "cvt.rz.tf32.f32 {d}, {x}"),
    ("tf32", "rna", False, "cvt.rna.tf32.f32 {d}, {x}"),
]

EDGES = [0x7F800000, 0xFF800000, 0x7FC00000, 0x7F800001, 0x43E80000, 0x43E80001, 0x43E7FFFF,
         0x47700000, 0x476FFFFF, 0x477FEFFF, 0x477FF000, 0x7F7FFFFF, 0xFF7FFFFF, 0x80000000, 1,
         0x3F808000, 0x3F818000, 0x00800000, 0x807FFFFF]


def _kernel(cases) -> str:
    # cvt ... .satfinite.f16.f32 needs PTX 8.1.
    mod = Module("sm_90", version=(8, 1))
    k = mod.kernel("cvt_all")
    px, py = k.param("x"), k.param("y")
    gx, gy = k.reg("u64"), k.reg("u64")
    k.ins("cvta.to.global.u64", gx, k.ld_param(px))
    k.ins("cvta.to.global.u64", gy, k.ld_param(py))
    tid, cta, i = k.reg("u32"), k.reg("u32"), k.reg("u32")
    k.ins("mov.u32", tid, "%tid.x")
    k.ins("mov.u32", cta, "%ctaid.x")
    k.ins("mad.lo.u32", i, cta, 256, tid)
    off = k.reg("u64")
    k.ins("mul.wide.u32", off, i, 4)
    k.ins("add.s64", gx, gx, off)
    x, zero = k.reg("f32"), k.reg("f32")
    k.ins("ld.global.f32", x, f"[{gx}]")
    k.ins("mov.f32", zero, "0f00000000")
    k.ins("mul.wide.u32", off, i, 4 * len(cases))
    k.ins("add.s64", gy, gy, off)
    for j, (name, _, _, form) in enumerate(cases):
        out = k.reg("u32")
        if name == "tf32":
            k.raw(form.format(d=out, x=x, zero=zero) + ";")
        else:
            h = k.reg("b16")
            k.raw(form.format(d=h, x=x, zero=zero) + ";")
            k.ins("cvt.u32.u16", out, h)
        k.ins("st.global.u32", f"[{gy}+{4 * j}]", out)
    return mod.emit()


def test_encode_matches_cvt_bit_for_bit() -> None:
    import cupy

    n = 1 << 22
    rng = np.random.default_rng()
    bits = rng.integers(0, 1 << 32, n, dtype=np.uint64).astype(np.uint32)
    bits[: len(EDGES)] = EDGES
    res = assemble(_kernel(CASES), "sm_90")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "k.cubin"
        path.write_bytes(res.cubin)
        fn = cupy.RawModule(path=str(path)).get_function("cvt_all")
        d_x = cupy.asarray(bits)
        d_y = cupy.full(n * len(CASES), 0xDEADBEEF, dtype=cupy.uint32)
        fn((n // 256,), (256,), (d_x, d_y))
        cupy.cuda.runtime.deviceSynchronize()
    got_all = cupy.asnumpy(d_y).reshape(n, len(CASES)).astype(np.int64)
    with np.errstate(all="ignore"):
        values = bits.view(np.float32).astype(np.float64)
    problems = []
    for j, (name, rounding, sat, form) in enumerate(CASES):
        got = got_all[:, j]
        if name in ("e4m3", "e5m2"):
            got = got & 0xFF  # low byte holds the conversion of the second source
        want = dtypes.encode(name, values, rounding=rounding, saturate=sat).astype(np.int64)
        both_nan = np.isnan(dtypes.decode(name, want)) & _is_nan_code(name, got)
        ok = both_nan
        if rounding == "rna":
            # Seen on an H200: cvt.rna.tf32 clears the low 13 bits of a NaN input, so a NaN
            # whose payload sits only there comes out as +-inf.  encode() maps NaN to the
            # canonical NaN (docs/dtypes.md); NaN inputs are pinned by the test below.
            ok = ok | np.isnan(values)
        bad = np.flatnonzero((got != want) & ~ok)
        if bad.size:
            i = bad[0]
            problems.append(f"{form.split()[0]}: {bad.size} mismatches, e.g. x=0x{bits[i]:08x} "
                            f"gpu=0x{got[i]:x} encode=0x{want[i]:x}")
    assert not problems, problems


def _is_nan_code(name: str, codes: np.ndarray) -> np.ndarray:
    if name == "tf32":
        # cvt.rna keeps NaN payloads in the low bits; any f32 NaN pattern counts.
        return np.isnan(codes.astype(np.uint32).view(np.float32))
    return np.isnan(dtypes.decode(name, codes))


def test_tf32_rna_on_nan_inputs_truncates() -> None:
    """Pin the observed quirk: cvt.rna.tf32 clears the low 13 bits of a NaN (no rounding bias:
    0x7f801000 gave inf on an H200, where biasing would give 0x7f802000), so a NaN with its
    payload only in those bits becomes +-inf."""
    import cupy

    bits = np.array([0x7F800001, 0xFF800FFF, 0x7FC00000, 0x7F801000, 0xFFC00000, 0x7F803000,
                     0xFFBFFFFF], np.uint32)
    res = assemble(_kernel([c for c in CASES if c[1] == "rna"]), "sm_90")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "k.cubin"
        path.write_bytes(res.cubin)
        fn = cupy.RawModule(path=str(path)).get_function("cvt_all")
        pad = np.zeros(256, np.uint32)
        pad[: bits.size] = bits
        d_x = cupy.asarray(pad)
        d_y = cupy.zeros(256, dtype=cupy.uint32)
        fn((1,), (256,), (d_x, d_y))
        cupy.cuda.runtime.deviceSynchronize()
    got = cupy.asnumpy(d_y)[: bits.size]
    want = [int(b) & ~0x1FFF & 0xFFFFFFFF for b in bits]
    assert [hex(int(g)) for g in got] == [hex(w) for w in want]
