"""Every register MMA form that runs on this GPU computes D = A @ B + C like numpy says.

One module holds a test kernel (nvatom.ptx.mma_emit) for every form the GPU's target has (one
per selector for sparse forms); it is assembled once for the GPU.  Each form runs on fresh
random inputs with D poisoned (NaN, or 0xDEADBEEF for s32), and is checked against a float64
or int64 reference computed from the decoded inputs:

* integer and single-bit forms exactly; dense ``.satfinite`` forms also on inputs crafted so
  that C + A @ B leaves the s32 range (every product of one sign, C near INT32_MAX or
  INT32_MIN: the clamp is then the same whatever order the hardware sums in);
* b1 forms as D = C + popc(a_row XOR b_col) (``.xor.popc``) or popc(a_row AND b_col);
* floating forms within the format's tolerance: products are exact (tf32/f16/bf16/fp8
  inputs are encoded first), so the error is the accumulation's, bounded relative to
  sum |a_ik b_kj| + |c_ij|;
* sparse forms through nvatom.atoms.sparse.random_sparse_problem, every legal selector:
  the result must equal a_dense @ B + C.
"""

from __future__ import annotations

import atexit
import functools
import importlib
import shutil
import tempfile
from pathlib import Path

import numpy as np
import pytest

from nvatom import dtypes
from nvatom.arch import device_target
from nvatom.atoms import registry
from nvatom.atoms.mma import MmaForm
from nvatom.errors import NvatomError, PtxasError
from nvatom.ptx.builder import Module
from nvatom.ptx.mma_emit import add_mma_test_kernel, operand_access, operand_tile
from nvatom.runtime.ptxas import assemble

pytestmark = pytest.mark.gpu

FORMS = registry.mma_forms()
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1


def _gpu_target() -> str:
    import cupy

    return device_target(cupy.cuda.Device().compute_capability).name


def _sparse_module():  # type: ignore[no-untyped-def]
    try:
        return importlib.import_module("nvatom.atoms.sparse")
    except ImportError as e:
        pytest.skip(f"nvatom.atoms.sparse is not there yet ({e})")


def _cases() -> list:
    out = []
    for f in FORMS:
        for sel in f.selectors or (None,):
            tag = f.name + (f"-sel{sel}" if sel is not None else "")
            out.append(pytest.param(f, sel, id=tag))
    return out


# --------------------------------------------------------------------------- one module


class _Kernels:
    """Every runnable (form, selector) test kernel of one GPU target, assembled once."""

    def __init__(self, target: str) -> None:
        import cupy

        self.target = target
        self.names: dict[tuple[str, int | None], str] = {}
        self.unavailable: dict[tuple[str, int | None], str] = {}
        runnable = []
        for f in FORMS:
            for sel in f.selectors or (None,):
                key = (f.name, sel)
                if not f.available_on(target):
                    self.unavailable[key] = f"{f.name} is not available on {target}"
                    continue
                try:
                    for op in "ABCD":
                        operand_access(f, op)
                except NvatomError as e:  # fragments not ready (SM70 m8n8k4)
                    self.unavailable[key] = f"{f.name} cannot be emitted yet: {e}"
                    continue
                runnable.append((key, f, sel))
        self.broken: dict[tuple[str, int | None], str] = {}
        while True:
            text = self._module(runnable).emit()
            try:
                cubin = assemble(text, target).cubin
                break
            except PtxasError as e:
                # Keep the rest testable: drop the kernels ptxas names, fail their tests.
                owners = _kernel_of_line(text)
                bad = {owners.get(d.line): d.message for d in e.diagnostics
                       if d.severity == "error" and d.line is not None}
                if not bad or None in bad:
                    raise
                for key, f, sel in runnable:
                    if self.names[key] in bad:
                        self.broken[key] = f"ptxas rejects the test kernel of {f.name}" + \
                            (f" with selector {sel}" if sel is not None else "") + \
                            f": {bad[self.names[key]]}"
                runnable = [r for r in runnable if r[0] not in self.broken]
        # RawModule loads the file lazily, at the first get_function: keep it until exit.
        tmp = tempfile.mkdtemp(prefix="nvatom-mma-gpu-")
        atexit.register(shutil.rmtree, tmp, True)
        path = Path(tmp) / "mma.cubin"
        path.write_bytes(cubin)
        self.module = cupy.RawModule(path=str(path))

    def _module(self, runnable: list) -> Module:
        version = max(f.ptx_version_for(self.target) for _, f, _ in runnable)
        module = Module(self.target, version=version)
        self.names = {}
        for i, (key, f, sel) in enumerate(runnable):
            add_mma_test_kernel(module, f, f"mma_test_{i}", selector=sel)
            self.names[key] = f"mma_test_{i}"
        return module

    def launch(self, form: MmaForm, selector: int | None, args: list) -> None:
        import cupy

        key = (form.name, selector)
        if key in self.unavailable:
            pytest.skip(self.unavailable[key])
        if key in self.broken:
            pytest.fail(self.broken[key])
        fn = self.module.get_function(self.names[key])
        fn((1,), (32,), tuple(args))
        cupy.cuda.runtime.deviceSynchronize()


def _kernel_of_line(text: str) -> dict[int, str]:
    """PTX line number (1-based) -> name of the kernel it belongs to."""
    owners, current = {}, None
    for number, line in enumerate(text.splitlines(), start=1):
        if line.startswith(".visible .entry "):
            current = line.split()[2].split("(")[0]
        if current is not None:
            owners[number] = current
    return owners


@functools.cache
def _kernels() -> _Kernels:
    return _Kernels(_gpu_target())


# --------------------------------------------------------------------------- data


def _random_values(t: str, rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """Random values exactly representable in ``t`` (float64, or int64 for integers)."""
    d = dtypes.dtype(t)
    if t == "b1":
        return rng.integers(0, 2, size=shape).astype(np.int64)
    if d.is_int:
        return rng.integers(int(d.int_min), int(d.int_max) + 1, size=shape).astype(np.int64)
    if t == "f64":
        return rng.standard_normal(shape)
    return dtypes.decode(t, dtypes.encode(t, rng.standard_normal(shape)))


def _memory(form: MmaForm, op: str, tiles: np.ndarray) -> np.ndarray:
    """Bytes of the operand as the test kernel reads or writes them: ``tiles`` has shape
    (products, rows, cols) in the atom's orientation (B as N x K)."""
    t = form.operand_type(op)
    acc = operand_access(form, op)
    ordered = tiles if acc.major == "row" else np.swapaxes(tiles, 1, 2)
    if t.name == "f64":
        codes = np.ascontiguousarray(ordered, dtype=np.float64).view(np.uint64)
    elif t.name == "f32":
        codes = np.ascontiguousarray(ordered, dtype=np.float32).view(np.uint32)
    else:
        codes = dtypes.encode(t, ordered)
    return dtypes.pack_codes(t, codes.ravel())


def _read_d(form: MmaForm, raw: np.ndarray, products: int) -> np.ndarray:
    t = form.d.name
    shape = (products, form.m, form.n)
    if t == "f64":
        return raw.view(np.float64).reshape(shape)
    if t == "f32":
        return raw.view(np.float32).astype(np.float64).reshape(shape)
    if t == "s32":
        return raw.view(np.int32).astype(np.int64).reshape(shape)
    return dtypes.decode(t, raw.view(np.uint16)).reshape(shape)


def _poison(form: MmaForm, products: int) -> np.ndarray:
    n = products * form.m * form.n
    t = form.d.name
    if t == "s32":
        return np.full(n, 0xDEADBEEF, dtype=np.uint32).view(np.uint8)
    if t == "f16":
        return np.full(n, 0x7E00, dtype=np.uint16).view(np.uint8)
    return np.full(n, np.nan, dtype=np.float64 if t == "f64" else np.float32).view(np.uint8)


def _run(form: MmaForm, selector: int | None, a_tiles: np.ndarray, b_tiles: np.ndarray,
         c_tiles: np.ndarray, metadata: np.ndarray | None = None) -> np.ndarray:
    import cupy

    products = a_tiles.shape[0]
    bufs = [_memory(form, "A", a_tiles), _memory(form, "B", b_tiles),
            _memory(form, "C", c_tiles), _poison(form, products)]
    if metadata is not None:
        bufs.append(np.ascontiguousarray(metadata, dtype=np.uint32).view(np.uint8))
    dev = [cupy.asarray(b) for b in bufs]
    _kernels().launch(form, selector, dev)
    return _read_d(form, cupy.asnumpy(dev[3]), products)


def _reference(form: MmaForm, a: np.ndarray, b: np.ndarray, c: np.ndarray
               ) -> tuple[np.ndarray, np.ndarray]:
    """(D, sum |a b| + |c|) per product; a (P, M, K), b (P, N, K), c (P, M, N)."""
    if form.bop is not None:
        ai, bi = a.astype(np.int64), b.astype(np.int64)
        bits = (ai[:, :, None, :] ^ bi[:, None, :, :]) if form.bop == "xor.popc" else \
            (ai[:, :, None, :] & bi[:, None, :, :])
        d = c.astype(np.int64) + bits.sum(axis=3)
        return d, np.abs(d)
    if form.d.is_int:
        d = c.astype(np.int64) + np.einsum("pmk,pnk->pmn", a.astype(np.int64),
                                           b.astype(np.int64))
        if form.satfinite:
            d = np.clip(d, INT32_MIN, INT32_MAX)
        return d, np.abs(d)
    d = c + np.einsum("pmk,pnk->pmn", a, b)
    mag = np.abs(c) + np.einsum("pmk,pnk->pmn", np.abs(a), np.abs(b))
    return d, mag


def _tolerance(form: MmaForm) -> float:
    """Bound on |D - reference| / (sum |a b| + |c|): the accumulation's rounding.

    Measured on an H100 (30 random trials per form): f32 accumulation stays below 2^-23
    (FP8 inputs included), f64 below 2^-50, f16 accumulation below 2^-10.
    """
    if form.d.name == "f64":
        return 2.0**-46
    if form.d.name == "f16":
        return 2.0**-8
    return 2.0**-20


def _check(form: MmaForm, out: np.ndarray, ref: np.ndarray, mag: np.ndarray, what: str) -> None:
    if form.d.is_int:
        bad = np.argwhere(out != ref)
        assert bad.size == 0, (f"{form.name} {what}: {len(bad)} of {out.size} wrong, first at "
                               f"{tuple(bad[0])}: got {out[tuple(bad[0])]}, want "
                               f"{ref[tuple(bad[0])]}")
        return
    assert np.isfinite(out).all(), f"{form.name} {what}: outputs never written (NaN poison)"
    err = np.abs(out - ref)
    bound = _tolerance(form) * mag + 1e-30
    worst = np.unravel_index(np.argmax(err / bound), err.shape)
    assert (err <= bound).all(), (
        f"{form.name} {what}: |D - ref| = {err[worst]:.3e} at {tuple(worst)} exceeds "
        f"{bound[worst]:.3e} (got {out[worst]!r}, want {ref[worst]!r})")
    if form.d.name == "f32":
        rel = np.linalg.norm(out - ref) / np.linalg.norm(ref)
        assert rel < 1e-5, f"{form.name} {what}: relative error {rel:.2e}"


def _inputs(form: MmaForm, rng: np.random.Generator, products: int
            ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    m, n, k = form.shape
    a = _random_values(form.a.name, rng, (products, m, k))
    b = _random_values(form.b.name, rng, (products, n, k))
    if form.c.name == "s32":
        c = rng.integers(-(2**20), 2**20, size=(products, m, n)).astype(np.int64)
    else:
        c = _random_values(form.c.name, rng, (products, m, n))
    return a, b, c


def _saturating_inputs(form: MmaForm, rng: np.random.Generator, sign: int
                       ) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """Inputs whose products all have ``sign`` and whose C sits near the s32 limit on that
    side, so that about half of D saturates; None when the types cannot make that sign."""
    m, n, k = form.shape
    ta, tb = form.a, form.b
    a_range, b_range = (0, int(ta.int_max)), (0, int(tb.int_max))
    if sign < 0:
        if ta.signed:
            a_range = (int(ta.int_min), 0)
        elif tb.signed:
            b_range = (int(tb.int_min), 0)
        else:
            return None
    a = rng.integers(a_range[0], a_range[1] + 1, size=(1, m, k)).astype(np.int64)
    b = rng.integers(b_range[0], b_range[1] + 1, size=(1, n, k)).astype(np.int64)
    span = int(np.abs(np.einsum("pmk,pnk->pmn", a, b)).max()) + 1
    near = rng.integers(0, 2 * span, size=(1, m, n))
    c = (INT32_MAX - near) if sign > 0 else (INT32_MIN + near)
    return a, b, c.astype(np.int64)


# --------------------------------------------------------------------------- tests


@pytest.mark.parametrize(("form", "selector"), _cases())
def test_mma_matches_numpy(form: MmaForm, selector: int | None) -> None:
    kernels = _kernels()
    key = (form.name, selector)
    if key in kernels.unavailable:
        pytest.skip(kernels.unavailable[key])
    if key in kernels.broken:
        pytest.fail(kernels.broken[key])
    rng = np.random.default_rng()
    products = operand_access(form, "A").products
    if form.is_sparse:
        _check_sparse(form, selector, rng)
        return
    for trial in range(2):
        a, b, c = _inputs(form, rng, products)
        out = _run(form, None, a, b, c)
        ref, mag = _reference(form, a, b, c)
        _check(form, out, ref, mag, f"random trial {trial}")
    if form.satfinite:
        saturated = 0
        for sign in (1, -1):
            crafted = _saturating_inputs(form, rng, sign)
            if crafted is None:
                continue
            a, b, c = crafted
            out = _run(form, None, a, b, c)
            ref, mag = _reference(form, a, b, c)
            saturated += int(np.sum(np.abs(ref) == (INT32_MAX if sign > 0 else -INT32_MIN)))
            _check(form, out, ref, mag, f"saturation towards {'+' if sign > 0 else '-'}")
        assert saturated > 0, "the crafted inputs saturated nothing"


def _check_sparse(form: MmaForm, selector: int | None, rng: np.random.Generator) -> None:
    sparse = _sparse_module()
    assert selector is not None
    m, n, k = form.shape
    for trial in range(2):
        problem = sparse.random_sparse_problem(form, rng, selector)
        assert problem.a_compressed.shape == operand_tile(form, "A")
        b = _random_values(form.b.name, rng, (1, n, k))
        if form.c.name == "s32":
            c = rng.integers(-(2**20), 2**20, size=(1, m, n)).astype(np.int64)
        else:
            c = _random_values(form.c.name, rng, (1, m, n))
        comp = np.asarray(problem.a_compressed)[None]
        out = _run(form, selector, comp, b, c, problem.metadata)
        dense = np.asarray(problem.a_dense, dtype=np.int64 if form.a.is_int else np.float64)
        ref, mag = _reference(form, dense[None], b, c)
        _check(form, out, ref, mag, f"sparse trial {trial}, selector {selector}")


def test_every_form_the_gpu_has_runs() -> None:
    """Nothing but the SM70 m8n8k4 forms may be left out on this GPU."""
    kernels = _kernels()
    left_out = {name for (name, _), why in kernels.unavailable.items()
                if "not available" not in why}
    assert all(".m8n8k4." in n and n.startswith("sm70.") for n in left_out), sorted(left_out)
    assert kernels.names, "no kernel at all"
