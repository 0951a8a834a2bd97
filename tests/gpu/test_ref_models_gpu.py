"""The CPU models of nvatom.ref (register MMA, WGMMA) against the GPU, form by form.

Every register MMA form (and sparse selector) the GPU's target runs, and on an sm_90 GPU
every WGMMA form, is executed on random inputs; the device's D is
compared with the CPU model's D computed from the *same register words / shared-memory
bytes* the instruction saw:

* register MMA: random operand tiles are turned into per-lane register words by the model
  (``nvatom.ref.mma.encode_operand``); the words are placed in global memory where the test
  kernel of tests/gpu/test_mma_gpu.py loads each lane's registers
  (``nvatom.ptx.mma_emit.operand_access``: a pure register transport), and the D words the
  kernel stores are gathered back the same way;
* WGMMA: the kernel of ``nvatom.ptx.wgmma_emit.build_wgmma_test_module`` copies global
  tiles into shared tiles laid out by ``nvatom.atoms.smem.smem_layout``; the model gets the
  same shared-memory byte image (built here from those layouts) and the kernel's
  descriptors, and reads it through the *decoded* descriptors; ``rs`` A is the model's
  register words of each K step; D is compared as the 64 x N tile (the kernel stores it
  through the accumulator layout).  Each form runs one configuration drawn from its name
  (swizzle mode, 1 or 2 K steps, scale-d false or a preloaded accumulator, imm-scale-a/b
  = -1, trans-a/b for f16/bf16), so the sweep covers every feature many times.

Comparisons: integer and b1 forms exactly (``.satfinite`` forms also on crafted inputs that
saturate); floating forms exactly on small-integer inputs (every partial sum exact in the
accumulator), and within ``nvatom.ref.{mma,wgmma}.error_bound`` on normal-distributed inputs.

When the environment variable ``NVATOM_REF_AGREEMENT`` names a file, each compared form
appends one JSON line ``{"family", "form", "selector", "agree"}``; scripts/hw_report.py sets
it and records the counts in the report's ``cpu_model_agreement`` section.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import json
import math
import os
import tempfile
import zlib
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from nvatom import dtypes
from nvatom.atoms import registry, sparse
from nvatom.atoms.mma import MmaForm
from nvatom.atoms.sm90 import FORMS as WGMMA_FORMS
from nvatom.atoms.sm90 import WgmmaForm
from nvatom.errors import NvatomError
from nvatom.layout import ComposedLayout, Layout, composition
from nvatom.ptx.mma_emit import operand_access
from nvatom.ptx.wgmma_emit import WgmmaTestPlan, build_wgmma_test_module, wgmma_test_plan
from nvatom.ref import mma as ref_mma
from nvatom.ref import wgmma as ref_wgmma
from nvatom.runtime.ptxas import assemble

pytestmark = pytest.mark.gpu

RECORD_ENV = "NVATOM_REF_AGREEMENT"
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1


def _record(family: str, form: str, selector: int | None, agree: bool) -> None:
    path = os.environ.get(RECORD_ENV)
    if not path:
        return
    line = json.dumps({"family": family, "form": form, "selector": selector, "agree": agree})
    with open(path, "a", encoding="utf-8") as f:
        f.write(line + "\n")


def _compared(family: str, form: str, selector: int | None, check: Callable[[], None]) -> None:
    """Run ``check`` and record whether the device agreed with the model (skips record
    nothing)."""
    try:
        check()
    except pytest.skip.Exception:
        raise
    except BaseException:
        _record(family, form, selector, False)
        raise
    _record(family, form, selector, True)


def _exact_range(k: int, acc: str, fp8: bool = False) -> tuple[int, int]:
    """(v, c): inputs drawn from the integers in [-v, v], C from [-c, c], so that every
    partial sum of k products is an integer the accumulator holds exactly (f16: 2^11; FP8
    WGMMA into f32 keeps fewer bits than f32: 2^10 to be safe)."""
    limit = 2**10 if (acc == "f16" or fp8) else 2**20
    c = 64
    v = max(1, min(8, math.isqrt((limit - c) // k)))
    return v, c


def _float_values(t: str, rng: np.random.Generator, shape: tuple[int, ...], v: int | None
                  ) -> np.ndarray:
    """Exactly representable values: integers in [-v, v], or (v None) normal values
    rounded to the type (FP8 scaled by 2)."""
    if v is not None:
        return rng.integers(-v, v + 1, size=shape).astype(np.float64)
    x = rng.standard_normal(shape) * (2.0 if t in ("e4m3", "e5m2") else 1.0)
    return x if t == "f64" else dtypes.decode(t, dtypes.encode(t, x))


def _int_values(t: dtypes.DType, rng: np.random.Generator, shape: tuple[int, ...]
                ) -> np.ndarray:
    if t.name == "b1":
        return rng.integers(0, 2, size=shape).astype(np.int64)
    return rng.integers(int(t.int_min), int(t.int_max) + 1, size=shape).astype(np.int64)


# =========================================================================== register MMA


def _mma_kernels():  # type: ignore[no-untyped-def]
    from tests.gpu.test_mma_gpu import _kernels  # one module of test kernels, shared

    return _kernels()


def _mma_cases() -> list:
    return [pytest.param(f, sel, id=f.name + (f"-sel{sel}" if sel is not None else ""))
            for f in registry.mma_forms() for sel in (f.selectors or (None,))]


def _to_memory(form: MmaForm, op: str, words: np.ndarray) -> np.ndarray:
    """Global bytes of the test kernel's operand ``op`` such that lane l's register r gets
    ``words[l, r]``."""
    acc = operand_access(form, op)
    buf = np.zeros(acc.nbytes, dtype=np.uint8)
    written = np.zeros(acc.nbytes, dtype=np.int64)
    raw = np.ascontiguousarray(words.astype(ref_mma.word_dtype(form, op))).view(np.uint8)
    raw = raw.reshape(words.shape[0], words.shape[1], acc.width)
    for lane in range(words.shape[0]):
        for r in range(words.shape[1]):
            at = acc.address(lane, r)
            buf[at:at + acc.width] = raw[lane, r]
            written[at:at + acc.width] += 1
    assert (written == 1).all(), f"{form.name}: {op} registers do not cover its memory once"
    return buf


def _from_memory(form: MmaForm, op: str, buf: np.ndarray) -> np.ndarray:
    acc = operand_access(form, op)
    wt = ref_mma.word_dtype(form, op)
    words = np.zeros((32, form.registers(op)), dtype=wt)
    for lane in range(32):
        for r in range(form.registers(op)):
            at = acc.address(lane, r)
            words[lane, r] = np.frombuffer(buf[at:at + acc.width].tobytes(), dtype=wt)[0]
    return words


def _run_mma(form: MmaForm, selector: int | None, a: np.ndarray, b: np.ndarray,
             c: np.ndarray, e: np.ndarray | None) -> np.ndarray:
    """Device D words for register words a, b, c (and metadata e)."""
    import cupy

    d_bytes = operand_access(form, "D").nbytes
    bufs = [_to_memory(form, "A", a), _to_memory(form, "B", b), _to_memory(form, "C", c),
            np.frombuffer(np.full(d_bytes // 4, 0xDEADBEEF, np.uint32).tobytes(), np.uint8)]
    if e is not None:
        bufs.append(np.ascontiguousarray(e, dtype=np.uint32).view(np.uint8))
    dev = [cupy.asarray(x) for x in bufs]
    _mma_kernels().launch(form, selector, dev)
    return _from_memory(form, "D", cupy.asnumpy(dev[3]))


def _mma_trial(form: MmaForm, selector: int | None, a_t: np.ndarray, b_t: np.ndarray,
               c_t: np.ndarray, problem: sparse.SparseProblem | None, exact: bool,
               what: str) -> None:
    enc = ref_mma.encode_operand
    e = problem.metadata if problem is not None else None
    a_w, b_w, c_w = enc(form, "A", a_t), enc(form, "B", b_t), enc(form, "C", c_t)
    got_w = _run_mma(form, selector, a_w, b_w, c_w, e)
    want_w = ref_mma.mma(form, a_w, b_w, c_w, e, selector)
    got = ref_mma.decode_operand(form, "D", got_w)
    want = ref_mma.decode_operand(form, "D", want_w)
    if exact or form.d.is_int:
        bad = np.argwhere(got != want)
        assert bad.size == 0, (f"{form.name} {what}: {len(bad)} of {got.size} D elements differ "
                               f"from the model, first {tuple(bad[0])}: device "
                               f"{got[tuple(bad[0])]}, model {want[tuple(bad[0])]}")
        return
    a_dense = ref_mma.decode_operand(form, "A", a_w) if problem is None else \
        problem.a_dense[None].astype(np.float64)
    bound = ref_mma.error_bound(form, a_dense, ref_mma.decode_operand(form, "B", b_w),
                                ref_mma.decode_operand(form, "C", c_w))
    err = np.abs(got - want)
    assert np.isfinite(got).all() and (err <= bound).all(), (
        f"{form.name} {what}: |device - model| up to {np.nanmax(err):.3e} exceeds the bound "
        f"(worst ratio {np.nanmax(err / np.maximum(bound, 1e-300)):.3g})")


def _saturating(form: MmaForm, rng: np.random.Generator, sign: int
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """Integer tiles whose products all have ``sign`` and C near that s32 limit."""
    p, m, k = ref_mma.tile_shape(form, "A")
    n = form.n
    a_lo, a_hi = 0, int(form.a.int_max)
    b_lo, b_hi = 0, int(form.b.int_max)
    if sign < 0:
        if form.a.signed:
            a_lo, a_hi = int(form.a.int_min), 0
        elif form.b.signed:
            b_lo, b_hi = int(form.b.int_min), 0
        else:
            return None
    a = rng.integers(a_lo, a_hi + 1, size=(p, m, k))
    b = rng.integers(b_lo, b_hi + 1, size=(p, n, form.k))
    span = int(np.abs(np.einsum("pmk,pnk->pmn", a, b)).max()) + 1
    near = rng.integers(0, 2 * span, size=(p, m, n))
    c = (INT32_MAX - near) if sign > 0 else (INT32_MIN + near)
    return a, b, c


@pytest.mark.parametrize(("form", "selector"), _mma_cases())
def test_register_mma_matches_model(form: MmaForm, selector: int | None) -> None:
    kernels = _mma_kernels()
    key = (form.name, selector)
    if key in kernels.unavailable:
        pytest.skip(kernels.unavailable[key])

    def check() -> None:
        rng = np.random.default_rng(zlib.crc32(f"{form.name}/{selector}".encode()))
        p, m, ka = ref_mma.tile_shape(form, "A")
        n, k = form.n, form.k
        problem = None
        trials: list[tuple[bool, str]] = [(True, "exact")]
        if not form.d.is_int:
            trials.append((False, "random"))
        for exact, what in trials:
            if form.d.is_int:
                a = _int_values(form.a, rng, (p, m, ka))
                b = _int_values(form.b, rng, (p, n, k))
                c = rng.integers(-(2**20), 2**20, size=(p, m, n))
            else:
                v, cmax = _exact_range(k, form.d.name)
                a = _float_values(form.a.name, rng, (p, m, ka), v if exact else None)
                b = _float_values(form.b.name, rng, (p, n, k), v if exact else None)
                c = rng.integers(-cmax, cmax + 1, size=(p, m, n)).astype(np.float64) if exact \
                    else _float_values(form.c.name, rng, (p, m, n), None)
            if form.is_sparse:
                problem = sparse.random_sparse_problem(form, rng, selector)
                a = problem.a_compressed[None]
            _mma_trial(form, selector, a, b, c, problem, exact, what)
        if form.satfinite and not form.is_sparse:
            for sign in (1, -1):
                crafted = _saturating(form, rng, sign)
                if crafted is not None:
                    _mma_trial(form, selector, *crafted, None, True, f"saturating {sign:+d}")

    _compared("mma", form.name, selector, check)


# =========================================================================== WGMMA

SWIZZLES = ("SW128", "SW64", "SW32", "INTERLEAVE")
MAJORS = (("K", "K"), ("MN", "K"), ("K", "MN"), ("MN", "MN"))


@dataclasses.dataclass(frozen=True)
class _Config:
    swizzle: str
    k_steps: int
    load_c: bool
    scale_a: int
    scale_b: int
    a_major: str
    b_major: str

    def kwargs(self) -> dict:
        return {"a_major": self.a_major, "b_major": self.b_major, "load_c": self.load_c,
                "scale_a": self.scale_a, "scale_b": self.scale_b}


def _config(form: WgmmaForm) -> _Config:
    """One test-kernel configuration per form, drawn from the form's name."""
    rng = np.random.default_rng(zlib.crc32(form.name.encode()))
    sw = SWIZZLES[int(rng.integers(4))]
    k_steps = int(rng.integers(1, 3))
    load_c = bool(rng.integers(2)) or form.satfinite
    neg = int(rng.integers(3))
    scale_a = -1 if neg == 1 and "scale_a" in form.immediates else 1
    scale_b = -1 if neg == 2 and "scale_b" in form.immediates else 1
    a_major, b_major = MAJORS[int(rng.integers(4))] if form.family in ("f16", "bf16") \
        else ("K", "K")
    if form.a_source == "rs":
        a_major = "K"
    for majors in ((a_major, b_major), ("K", b_major), (a_major, "K"), ("K", "K")):
        cfg = _Config(sw, k_steps, load_c, scale_a, scale_b, *majors)
        try:
            wgmma_test_plan(form, sw, k_steps, **cfg.kwargs())
        except NvatomError:
            continue  # an MN-major tile needs MN to fill the swizzle atom
        return cfg
    raise AssertionError(f"{form.name}: no K-major test plan for {sw}")


def _wgmma_cases() -> list:
    return [pytest.param(f, id=f.name) for f in WGMMA_FORMS]


def _require_sm90() -> None:
    import cupy

    if cupy.cuda.Device().compute_capability != "90":
        pytest.skip("wgmma needs an sm_90 (Hopper) GPU")


_CUBINS: dict[str, bytes | Exception] = {}


def _wgmma_cubin(form: WgmmaForm, cfg: _Config) -> bytes:
    """The form's test kernel; the first call assembles every form's kernel in parallel."""
    if not _CUBINS:
        jobs = {f.name: (f, _config(f)) for f in WGMMA_FORMS}

        def build(item: tuple[WgmmaForm, _Config]) -> bytes | Exception:
            f, c = item
            try:
                text = build_wgmma_test_module(f, c.swizzle, c.k_steps, **c.kwargs()).emit()
                return assemble(text, "sm_90a").cubin
            except NvatomError as e:
                return e

        with concurrent.futures.ThreadPoolExecutor(max_workers=os.cpu_count() or 4) as pool:
            for name, out in zip(jobs, pool.map(build, jobs.values()), strict=True):
                _CUBINS[name] = out
    out = _CUBINS[form.name]
    if isinstance(out, Exception):
        raise out
    return out


def _layout_codes(form: WgmmaForm, t: dtypes.DType, values: np.ndarray) -> np.ndarray:
    """Codes of the shared-memory layout elements of a rows x K tile: the element codes,
    or for b1 bytes of eight K elements (lowest K in the least significant bit)."""
    if t.name == "b1":
        bits = values.astype(np.uint64).reshape(values.shape[0], -1, 8)
        return (bits << np.arange(8, dtype=np.uint64)).sum(axis=2)
    return ref_mma.values_to_codes(t, values)


def _global_bytes(codes: np.ndarray, esize: int) -> np.ndarray:
    return np.ascontiguousarray(codes.astype(f"<u{esize}")).view(np.uint8)


def _tile_offsets(tile: object, rows: int, cols: int) -> np.ndarray:
    """Element offset of every (row, col) of an smem_layout tile."""
    if isinstance(tile, ComposedLayout):
        outer = ref_mma.layout_table(composition(tile.outer, (Layout(rows, 1), Layout(cols, 1))))
        x = outer + tile.offset
        sw = tile.inner
        return x ^ ((x & sw.yyy_msk) >> sw.shift)
    return ref_mma.layout_table(composition(tile, (Layout(rows, 1), Layout(cols, 1))))


def _smem_image(plan: WgmmaTestPlan, a_codes: np.ndarray | None, b_codes: np.ndarray
                ) -> tuple[np.ndarray, int]:
    """Shared-memory bytes as the kernel's copy leaves them: A's tile at 0 (ss), B's at the
    next 1024-byte boundary; returns (bytes, B's base)."""
    es, k_smem = plan.esize, plan.k_smem
    rows_a = 64 if a_codes is not None else 0
    b_base = -(-rows_a * k_smem * es // 1024) * 1024
    smem = np.zeros(b_base + b_codes.shape[0] * k_smem * es + 1024, dtype=np.uint8)
    for codes, tile, base in ((a_codes, plan.a_smem, 0), (b_codes, plan.b_smem, b_base)):
        if codes is None:
            continue
        rows, cols = codes.shape
        addr = base + _tile_offsets(tile, rows, cols) * es
        for j in range(es):
            smem[addr + j] = ((codes >> np.uint64(8 * j)) & np.uint64(0xFF)).astype(np.uint8)
    return smem, b_base


def _saturating_c(n: int, rng: np.random.Generator) -> np.ndarray:
    c = rng.integers(-(2**20), 2**20, (64, n))
    c[:22] = INT32_MAX - rng.integers(0, 2**18, (22, n))
    c[22:44] = INT32_MIN + rng.integers(0, 2**18, (22, n))
    return c


def _run_wgmma(form: WgmmaForm, cfg: _Config, cubin: bytes, a_g: np.ndarray, b_g: np.ndarray,
               c: np.ndarray | None) -> np.ndarray:
    import cupy

    dn = form.d.name
    if dn == "f16":
        d0 = np.full((64, form.n), 0x7E00, np.uint16) if c is None else \
            dtypes.encode("f16", c).astype(np.uint16)
    elif dn == "f32":
        d0 = np.full((64, form.n), np.nan, np.float32) if c is None else c.astype(np.float32)
    else:
        d0 = np.full((64, form.n), 0x5A5A5A5A, np.int32) if c is None else c.astype(np.int32)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "k.cubin"
        path.write_bytes(cubin)
        fn = cupy.RawModule(path=str(path)).get_function("wgmma_test")
        dev = [cupy.asarray(np.ascontiguousarray(x)) for x in (a_g, b_g, d0)]
        fn((1,), (128,), tuple(dev))
        cupy.cuda.runtime.deviceSynchronize()
        out = cupy.asnumpy(dev[2])
    if dn == "f16":
        return dtypes.decode("f16", out).astype(np.float64)
    return out.astype(np.float64) if dn == "f32" else out.astype(np.int64)


def _wgmma_model(form: WgmmaForm, cfg: _Config, plan: WgmmaTestPlan, a: np.ndarray, b: np.ndarray,
                 c: np.ndarray | None, a_codes: np.ndarray, b_codes: np.ndarray) -> np.ndarray:
    ss = form.a_source == "ss"
    smem, b_base = _smem_image(plan, a_codes if ss else None, b_codes)
    d = ref_wgmma.encode_d(form, c) if c is not None else None
    for s in range(cfg.k_steps):
        b_desc = plan.b_descs[s]
        b_word = dataclasses.replace(b_desc, start_address=b_desc.start_address + b_base)
        a_op = plan.a_descs[s].encode() if ss else \
            ref_wgmma.encode_a(form, a[:, s * form.k:(s + 1) * form.k])
        d = ref_wgmma.wgmma(form, d, a_op, b_word.encode(), smem,
                            scale_d=cfg.load_c or s > 0, scale_a=cfg.scale_a,
                            scale_b=cfg.scale_b, trans_a=int(cfg.a_major == "MN"),
                            trans_b=int(cfg.b_major == "MN"))
    return ref_wgmma.decode_d(form, d)


def _wgmma_trial(form: WgmmaForm, cfg: _Config, rng: np.random.Generator, exact: bool) -> None:
    plan = wgmma_test_plan(form, cfg.swizzle, cfg.k_steps, **cfg.kwargs())
    kt = form.k * cfg.k_steps
    c = None
    if form.d.is_int:
        a = _int_values(form.a, rng, (64, kt))
        b = _int_values(form.b, rng, (form.n, kt))
        if cfg.load_c:
            c = _saturating_c(form.n, rng) if form.family == "int8" else \
                rng.integers(-(2**20), 2**20, (64, form.n))
    else:
        v, cmax = _exact_range(kt, form.d.name, form.family == "fp8")
        a = _float_values(form.a.name, rng, (64, kt), v if exact else None)
        b = _float_values(form.b.name, rng, (form.n, kt), v if exact else None)
        if cfg.load_c:
            c = rng.integers(-cmax, cmax + 1, (64, form.n)).astype(np.float64) if exact else \
                _float_values(form.d.name, rng, (64, form.n), None)
    es = plan.esize
    a_codes, b_codes = _layout_codes(form, form.a, a), _layout_codes(form, form.b, b)
    a_g = _global_bytes(a_codes.T if cfg.a_major == "MN" else a_codes, es)
    b_g = _global_bytes(b_codes.T if cfg.b_major == "MN" else b_codes, es)
    got = _run_wgmma(form, cfg, _wgmma_cubin(form, cfg), a_g, b_g, c)
    want = _wgmma_model(form, cfg, plan, a, b, c, a_codes, b_codes)
    what = f"{'exact' if exact else 'random'} inputs, {cfg}"
    if exact or form.d.is_int:
        bad = np.argwhere(got != want)
        assert bad.size == 0, (f"{form.name} ({what}): {len(bad)} of {got.size} D elements "
                               f"differ, first {tuple(bad[0])}: device {got[tuple(bad[0])]}, "
                               f"model {want[tuple(bad[0])]}")
        return
    bound = ref_wgmma.error_bound(form, a * cfg.scale_a, b * cfg.scale_b, c)
    err = np.abs(got - want)
    assert np.isfinite(got).all() and (err <= bound).all(), (
        f"{form.name} ({what}): |device - model| up to {np.nanmax(err):.3e} exceeds the "
        f"bound (worst ratio {np.nanmax(err / np.maximum(bound, 1e-300)):.3g})")


@pytest.mark.parametrize("form", _wgmma_cases())
def test_wgmma_matches_model(form: WgmmaForm) -> None:
    _require_sm90()
    cfg = _config(form)

    def check() -> None:
        rng = np.random.default_rng(zlib.crc32(form.name.encode()) + 1)
        _wgmma_trial(form, cfg, rng, exact=True)
        if not form.d.is_int:
            _wgmma_trial(form, cfg, rng, exact=False)

    _compared("wgmma", form.name, None, check)
