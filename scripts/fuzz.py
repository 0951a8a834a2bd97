#!/usr/bin/env python3
"""Fuzzing campaigns against nvatom's inputs (issue 17, "Bad input never crashes").

Targets (generators: scripts/fuzz_grammars.py):

* ``layout``: ``nvatom.layout.parse_layout`` on layout strings, then up to three algebra
  operations (composition, divides, products, inverses, complement, up/downcast, evaluation)
  and a print/parse round trip;
* ``swizzle``: ``Swizzle(B, M, S)`` from any integers (and ``Sw<B,M,S>`` text), applied twice;
* ``atom_name``: names resolved through every atom registry (register MMA forms, WGMMA, SM100
  UMMA and tcgen05 forms, SM120, copy atoms, TMEM copy atoms, the atom records);
* ``descriptor``: decoding SM90 (WGMMA) and SM100 (UMMA) shared-memory descriptors, tcgen05
  instruction descriptors per kind, and CUDA tensor maps (128 bytes), then ``explain()``;
* ``cli``: ``nvatom.cli.main(argv)`` in-process, stdout/stderr captured;
* ``ir``: MLIR modules through ``nvatom.ir.driver`` parse, verify and ``lower``;
* ``api``: Python API calls on duck-typed tensors (``fuzz_grammars.FakeTensor``): ``nvatom.gemm``
  (fused epilogue, FP8 scales, ``provider``, ``out``), ``gemm.explain``, ``nvatom.grouped_gemm``,
  ``nvatom.attention`` and ``attention.check_inputs``, the ``nvatom.torch_ops`` implementations
  and fakes, the kernel layer's ``gmem_tensor``/``smem_tensor``/``fragment`` and
  ``EpilogueSpec``, under a fake ``torch`` (:func:`api_fakes`): a call that passes every check
  stops where it would launch (:class:`ReachedDevice`, counted a success).

Each input ends in one class: ``ok`` (success), ``clean`` (a clean error: an NvatomError
subclass (for ``api``, of one line); for the CLI exit 2 with one line ``nvatom: error: ...``,
or exit 1 with located IR diagnostics; for IR an IRError whose diagnostics are located and not
internal), or a failure: ``traceback`` (any other exception), ``internal`` (CLI exit 70 or an
IR ``internal error`` diagnostic), ``hang`` (over the per-input time limit), ``memory``
(MemoryError, or the worker killed over its address-space limit), ``crash`` (the worker died
otherwise) or ``wrong`` (malformed error output, an unexpected exit status, a print/parse round
trip that differs).

Every input is a pure function of (seed, target, index): ``random.Random(f"{seed}:{target}:
{index}")`` feeds the grammar, so ``--replay TARGET:INDEX --seed S`` rebuilds one input.

    python scripts/fuzz.py --inputs 1000000 --seed 1 --workers 2 --json reports/fuzz/latest.json
    python scripts/fuzz.py --seed 1 --replay ir:1234        # show one input and its outcome

Exit status 1 when any input failed; the reproducers are printed and saved next to --json
(``failures/<target>-<index>.json``).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as _dt
import importlib
import io
import json
import multiprocessing as mp
import os
import random
import re
import resource
import signal
import subprocess
import sys
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))
if str(ROOT / "src") not in sys.path:  # fuzz this checkout's nvatom, not an installed one
    sys.path.insert(0, str(ROOT / "src"))

import fuzz_grammars as G  # noqa: E402

TARGETS = tuple(G.GENERATORS)
FAILURES = ("traceback", "internal", "hang", "memory", "crash", "wrong")
CLASSES = ("ok", "clean", *FAILURES)
#: The default share of --inputs per target (cheap targets get more; IR is slow).
WEIGHTS = {"layout": 0.25, "swizzle": 0.22, "descriptor": 0.2, "atom_name": 0.15,
           "cli": 0.12, "ir": 0.06, "api": 0.1}
DEFAULT_TIME_LIMIT = 10.0
DEFAULT_MEMORY_GIB = 4.0


class Hang(BaseException):
    """Raised by the per-input timer."""


class Failure(Exception):
    def __init__(self, kind: str, detail: str) -> None:
        super().__init__(detail)
        self.kind = kind
        self.detail = detail


def _clean_type() -> type[BaseException]:
    from nvatom.errors import NvatomError

    return NvatomError


# --------------------------------------------------------------------------- target runners


def run_layout(case: dict[str, Any]) -> str:
    import nvatom.layout as L

    layout = L.parse_layout(case["text"])
    for op, arg in case["ops"]:
        if op == "call":
            layout(arg)
        elif op in ("size", "cosize"):
            getattr(L, op)(layout)
        elif op == "roundtrip":
            again = L.parse_layout(str(layout))
            if str(again) != str(layout):
                raise Failure("wrong", f"print/parse round trip: {layout} -> {again}")
        elif G.LAYOUT_OPS[op] == "layout":
            layout = getattr(L, op)(layout, L.parse_layout(arg))
        elif G.LAYOUT_OPS[op] == "int":
            layout = getattr(L, op)(layout, arg)
        else:
            layout = getattr(L, op)(layout)
    str(layout)
    return "ok"


def run_swizzle(case: dict[str, Any]) -> str:
    import nvatom.layout as L

    if "text" in case:
        L.parse_layout(f"{case['text']} o 0 o 8:1")
    sw = L.Swizzle(case["b"], case["m"], case["s"])
    str(sw)
    for x in case["x"]:
        if x >= 0 and sw(sw(x)) != x:
            raise Failure("wrong", f"{sw} is not an involution at {x}")
    return "ok"


#: The atom registries a name is resolved through: (module, function).  One table, so a
#: refactor that moves a resolver updates one line here.
RESOLVERS: tuple[tuple[str, str], ...] = (
    ("nvatom.atoms.registry", "mma_form"),
    ("nvatom.atoms.registry", "atom_record"),
    ("nvatom.atoms.sm90", "wgmma_form"),
    ("nvatom.atoms.sm100", "umma_atom"),
    ("nvatom.atoms.sm100", "tcgen05_form"),
    ("nvatom.atoms.sm120", "sm120_form"),
    ("nvatom.atoms.copy", "copy_atom"),
    ("nvatom.atoms.tmem", "tmem_atom"),
)


def _resolvers() -> list[tuple[str, Callable[[str], Any]]]:
    return [(f"{m}.{f}", getattr(importlib.import_module(m), f)) for m, f in RESOLVERS]


def run_atom_name(name: str) -> str:
    clean = _clean_type()
    hits = 0
    for label, fn in _resolvers():
        try:
            atom = fn(name)
        except clean:
            continue
        except Hang:
            raise
        except Exception as e:
            raise Failure("traceback", f"{label}({name!r}): {_exc_text(e)}") from e
        str(getattr(atom, "name", atom))
        hits += 1
    return "ok" if hits else "clean"


def run_descriptor(case: dict[str, Any]) -> str:
    from nvatom.descriptors import tma, tma_encode, umma, wgmma

    kind = case["kind"]
    if kind == "wgmma":
        wgmma.decode_fields(case["word"])
        desc = wgmma.decode(case["word"])
    elif kind == "umma":
        desc = umma.decode_smem_desc(case["word"])
    elif kind == "idesc":
        desc = umma.decode_idesc(case["word"], case["mma_kind"])
    else:
        tma_encode.decode_fields(case["hex"])
        desc = tma.decode(case["hex"])
        tma_encode.explain(case["hex"])
    desc.explain() if hasattr(desc, "explain") else str(desc)
    return "ok"


_LOCATED = re.compile(r"^.+:\d+:\d+: (error|note|warning): ")


def run_cli(argv: list[str]) -> str:
    from nvatom.cli import main

    out, err = io.StringIO(), io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(list(argv))
    except SystemExit as e:  # argparse: usage errors, --help, --version
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 2)
    text = err.getvalue()
    if "Traceback (most recent call last)" in text:
        raise Failure("traceback", text[-2000:])
    if code == 70 or "internal error" in text:
        raise Failure("internal", f"exit {code}: {text[:2000]}")
    if code == 0:
        return "ok"
    if code == 2:
        if text.startswith("nvatom: error: ") and text.count("\n") == 1 and text.endswith("\n"):
            return "clean"
        raise Failure("wrong", f"exit 2 but stderr is not one 'nvatom: error:' line: "
                      f"{text[:2000]!r}")
    if code == 1 and text and all(_LOCATED.match(s) for s in text.splitlines() if s.strip()):
        return "clean"  # verify/compile: located IR diagnostics
    raise Failure("wrong", f"exit {code}, stderr {text[:2000]!r}")


def run_ir(case: dict[str, Any]) -> str:
    from nvatom.ir import driver
    from nvatom.ir.lower import lower

    try:
        mod = driver.parse(case["text"], "fuzz.mlir")
        ctx = driver.verify(mod, case.get("target"))
        lower(mod, ctx)
    except driver.IRError as e:
        if not e.diagnostics:
            raise Failure("wrong", f"IRError without diagnostics: {e}") from e
        for d in e.diagnostics:
            if driver.INTERNAL in d.message:
                raise Failure("internal", str(d)) from e
            if d.line < 1 or d.col < 1:
                raise Failure("wrong", f"unlocated diagnostic: {d}") from e
        return "clean"
    return "ok"


# --------------------------------------------------------------------------- the api target


class ReachedDevice(BaseException):
    """Raised by the fakes where a call would start work on the GPU (a kernel launch, a
    device-side computation): every check passed, so the input counts as a success.  A
    BaseException, so no ``except Exception`` on the way swallows it."""


def _reached(*args: Any, **kwargs: Any) -> Any:
    raise ReachedDevice()


def _launched(*args: Any, **kwargs: Any) -> None:
    """A launch in the ``api`` target: nothing runs, and the call goes on (its call caches
    fill, so a second call can hit them)."""
    return None


class _FakeKernel:
    """What ``get_kernel`` returns in the ``api`` target: its launcher checks the launch
    shape as the real one does (``launch._dims``); launching does nothing."""

    def launcher(self, grid: Any, block: Any, shmem: int = 0, cluster: Any = None) -> Any:
        from nvatom.runtime.launch import _dims

        _dims(grid, "grid")
        _dims(block, "block")
        if cluster is not None:
            _dims(cluster, "cluster")
        return _launched


def _fake_torch(capability: tuple[int, ...]) -> Any:
    """A stand-in ``torch``: allocations make :class:`fuzz_grammars.FakeTensor` objects, the
    device reports ``capability``, anything that computes raises :class:`ReachedDevice`."""
    import types

    torch = types.ModuleType("torch")
    for name in ("bfloat16", "float16", "float32", "float8_e4m3fn", "float8_e5m2", "uint8",
                 "int32", "int64"):
        setattr(torch, name, f"torch.{name}")

    def empty(shape: Any, dtype: Any = None, device: Any = None) -> Any:
        return G.contiguous(shape, dtype or "torch.float32", device)

    def full(shape: Any, value: Any, dtype: Any = None, device: Any = None) -> Any:
        return G.contiguous(shape, dtype or "torch.float32", G.FakeDevice())

    def frombuffer(buf: Any, dtype: Any = None) -> Any:
        return G.contiguous((len(buf),), dtype, G.FakeDevice("cpu", None))

    def tensor(values: Any, dtype: Any = None, device: Any = None) -> Any:
        t = G.contiguous((len(values),), dtype or "torch.int64", G.FakeDevice())
        t.values = list(values)
        return t

    torch.empty, torch.full, torch.frombuffer = empty, full, frombuffer  # type: ignore[attr-defined]
    torch.tensor = tensor  # type: ignore[attr-defined]
    torch.zeros = _reached  # type: ignore[attr-defined]  # the fused epilogue on K = 0
    def from_dlpack(x: Any) -> Any:  # a numpy array or scalar: a CPU tensor, as torch's
        shape = tuple(int(s) for s in x.shape)
        return G.FakeTensor(shape, tuple(int(s) // x.itemsize for s in x.strides),
                            f"torch.{x.dtype}", 0x10000, G.FakeDevice("cpu", None))

    torch.from_dlpack = from_dlpack  # type: ignore[attr-defined]
    stream = types.SimpleNamespace(cuda_stream=0)
    torch.cuda = types.SimpleNamespace(  # type: ignore[attr-defined]
        current_stream=lambda device=None: stream, current_device=lambda: 0,
        get_device_capability=lambda device=None: capability,
        get_device_properties=lambda device=None: types.SimpleNamespace(
            multi_processor_count=132))
    return torch


def _api_modules() -> dict[str, Any]:
    import nvatom.attention
    import nvatom.gemm
    import nvatom.gemm_providers
    import nvatom.kernels.sm90.fusion
    import nvatom.kernels.tensor
    import nvatom.runtime.gemm_recipe
    import nvatom.torch_ops  # before a fake torch is installed (it looks for torch)

    return {"gemm": nvatom.gemm, "attention": sys.modules["nvatom.attention"],
            "gp": nvatom.gemm_providers, "gr": nvatom.runtime.gemm_recipe,
            "tensor": nvatom.kernels.tensor, "fusion": nvatom.kernels.sm90.fusion,
            "torch_ops": nvatom.torch_ops}


@contextlib.contextmanager
def api_fakes(capability: Sequence[int]) -> Iterator[None]:
    """The ``api`` target's world for one input: a fake ``torch`` (``sys.modules``), kernels
    whose launches check their grid and do nothing (:class:`_FakeKernel`), device-side work
    that raises :class:`ReachedDevice`, tensor maps by the pure-Python encoder (its checks
    run; no driver), fresh host caches (an input's outcome is its own), no recipe written to
    disk.  Everything is restored afterwards (the CI test runs in-process,
    beside tests that need the real modules)."""
    from nvatom.descriptors import tma_encode

    m = _api_modules()
    gm, att, gp = m["gemm"], m["attention"], m["gp"]
    saved_torch = sys.modules.get("torch", _MISSING)
    patches = [
        (gm, "get_kernel", lambda *a, **k: _FakeKernel()),
        (gm, "_record_recipe", lambda *a, **k: None),
        (gm, "CACHES", gm.GemmCaches()),
        (gp, "_encode_tiled", lambda args: tma_encode.encode_args("tiled", args)),
        (gp, "load_function", _reached), (gp, "prepare_driver_launch", _reached),
        (att, "load_function", lambda *a, **k: None),
        (att, "prepare_driver_launch", lambda *a, **k: _launched),
        (att, "_caps", {}), (att, "_problems", {}), (att, "_launches", {}),
    ]
    old = [(obj, name, getattr(obj, name)) for obj, name, _ in patches]
    enc = [(c, c.encoder) for c in (gp.TENSOR_MAPS, att._TMAPS)]
    try:
        for obj, name, value in patches:
            setattr(obj, name, value)
        for c, _ in enc:
            c.encoder = lambda tm: tm.encode()
            c.clear()
        if hasattr(gp, "_GROUPED_MAPS"):
            gp._GROUPED_MAPS.clear()
        sys.modules["torch"] = _fake_torch(tuple(capability))
        yield
    finally:
        if saved_torch is _MISSING:
            sys.modules.pop("torch", None)
        else:
            sys.modules["torch"] = saved_torch
        for obj, name, value in old:
            setattr(obj, name, value)
        for c, e in enc:
            c.encoder = e
            c.clear()


_MISSING = object()


def _api_function(case: dict[str, Any]) -> Callable[..., Any]:
    """The function an ``api`` case calls (a kernel-layer constructor gets a fresh kernel of
    the case's target as its first argument)."""
    m = _api_modules()
    fn = case["fn"]
    if fn in ("gemm", "explain", "grouped_gemm", "grouped_gemm_masked"):
        return getattr(m["gemm"], fn)  # type: ignore[no-any-return]
    if fn == "UserEpilogue":
        return _user_epilogue
    if fn in ("attention", "check_inputs"):
        return getattr(m["attention"], fn)  # type: ignore[no-any-return]
    if fn.startswith("torch_ops."):
        return getattr(m["torch_ops"], fn.removeprefix("torch_ops."))  # type: ignore[no-any-return]
    if fn == "EpilogueSpec":
        def spec(**kw: Any) -> Any:
            s = m["fusion"].EpilogueSpec(**kw)
            return s.tag, s.params
        return spec
    if fn.startswith("kernels.tensor."):
        from nvatom.ptx.builder import Module

        ctor = getattr(m["tensor"], fn.removeprefix("kernels.tensor."))

        def build(*args: Any, **kw: Any) -> Any:
            k = Module(case["target"]).kernel("t")
            return str(ctor(k, *args, **kw))
        return build
    raise ValueError(f"unknown api function {fn!r}")


def _user_epilogue(spec: dict[str, Any]) -> Any:
    """A :class:`~nvatom.kernels.sm90.user_epilogue.UserEpilogue` whose hook emits
    ``spec["program"]`` (fuzz_grammars._hook_call): each step an opcode and operand roles --
    ``f``/``u``/``p`` a new register of .f32/.u32/.pred (reused once made), ``x``, ``r``
    (row), ``c`` (col), ``s`` the scalar ``s``, ``l`` the loaded tensor ``l``, ``1`` an
    immediate, ``L`` a label, anything else as text -- then ends as ``spec["end"]`` says."""
    from nvatom.kernels.sm90.user_epilogue import UserEpilogue

    def fn(k: Any, x: Any, row: Any, col: Any) -> Any:
        regs: dict[str, Any] = {}

        def operand(role: str) -> Any:
            if role in "fup":
                if role not in regs:
                    regs[role] = k.reg({"f": "f32", "u": "u32", "p": "pred"}[role])
                return regs[role]
            return {"x": x, "r": row, "c": col, "1": 1.5, "L": "$L1"}.get(role) or (
                k.arg("s") if role == "s" else k.load("l") if role == "l" else role)

        for step in spec["program"]:
            op, roles, *guard = step
            k.ins(op, *(operand(c) for c in roles), **({"pred": guard[0]} if guard else {}))
        if spec["end"] == "raise":
            raise ValueError("the hook failed")
        if spec["end"] == "return":
            return 1
        return None

    hook = UserEpilogue(spec["name"], fn, **spec["kw"])
    return hook.tag, hook.params


def _api_outcome(fn: Callable[..., Any], call: dict[str, Any]) -> str:
    """"ok" or "clean" for one call (inside :func:`api_fakes`); raises :class:`Failure` for
    an error that is not one line, lets anything else through (classify names it)."""
    args = [G.materialize(x) for x in call["args"]]
    kw = {k: G.materialize(v) for k, v in call["kw"].items()}
    try:
        fn(*args, **kw)
    except ReachedDevice:
        return "ok"
    except _clean_type() as e:
        text = str(e)
        if not text or "\n" in text:
            raise Failure("wrong", f"{type(e).__name__} not one line: {text[:2000]!r}") from e
        return "clean"
    return "ok"


def run_api(case: dict[str, Any]) -> str:
    """One call, or (``case["then"]``) a call after another one in the same process: the
    second must end as it does alone (the call caches skip the checks on a hit, so a key
    that misses something the checks read would let a refused call through, or refuse an
    accepted one)."""
    fn = _api_function(case)
    with api_fakes(case["capability"]):
        got = _api_outcome(fn, case)
    then = case.get("then")
    if then is None:
        return got
    with api_fakes(case["capability"]):
        alone = _api_outcome(fn, then)
    with api_fakes(case["capability"]):
        _api_outcome(fn, case)
        after = _api_outcome(fn, then)
    if after != alone:
        raise Failure("wrong", f"the second call ends {after!r} after the first ({got!r}) but "
                      f"{alone!r} alone: a call cache answered for a different call")
    return after


RUNNERS: dict[str, Callable[[Any], str]] = {
    "layout": run_layout, "swizzle": run_swizzle, "atom_name": run_atom_name,
    "descriptor": run_descriptor, "cli": run_cli, "ir": run_ir, "api": run_api,
}


# --------------------------------------------------------------------------- one input


def _exc_text(e: BaseException) -> str:
    return f"{type(e).__name__}: {str(e)[:1000]}"


def make_input(seed: int | str, target: str, index: int) -> Any:
    return G.GENERATORS[target](random.Random(f"{seed}:{target}:{index}"))


def _on_alarm(signum: int, frame: Any) -> None:
    raise Hang()


def classify(target: str, case: Any, time_limit: float = DEFAULT_TIME_LIMIT
             ) -> tuple[str, str]:
    """(class, detail) of one input; the time limit uses SIGALRM (main thread only)."""
    use_timer = time_limit > 0 and hasattr(signal, "setitimer")
    if use_timer:
        old = signal.signal(signal.SIGALRM, _on_alarm)
        signal.setitimer(signal.ITIMER_REAL, time_limit)
    try:
        return RUNNERS[target](case), ""
    except Failure as f:
        return f.kind, f.detail
    except Hang:
        return "hang", f"over the {time_limit:g} s limit"
    except MemoryError as e:
        return "memory", _exc_text(e)
    except RecursionError as e:
        return "traceback", _exc_text(e) + "\n" + traceback.format_exc(limit=-8)
    except Exception as e:
        if isinstance(e, _clean_type()) and target != "cli":
            return "clean", ""
        return "traceback", traceback.format_exc(limit=-12)[-3000:]
    finally:
        if use_timer:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, old)


# --------------------------------------------------------------------------- campaign


def _new_counts() -> dict[str, dict[str, float]]:
    return {t: {**{c: 0 for c in CLASSES}, "inputs": 0, "seconds": 0.0} for t in TARGETS}


def _prepare() -> None:
    """Warm the caches every worker needs (before fork, so it happens once)."""
    os.environ.pop("NVATOM_TRACEBACK", None)
    G.real_atom_names()
    G.atom_name_parts()
    G.tma_corpus()
    G.ir_seeds()
    _resolvers()
    _api_modules()
    import nvatom.cli
    import nvatom.ir.lower  # noqa: F401


def run_chunk(seed: int | str, target: str, start: int, count: int, time_limit: float,
              heartbeat: Any = None, wid: int = 0, stop_at: float | None = None
              ) -> tuple[dict[str, float], list[dict[str, Any]]]:
    counts: dict[str, float] = {**{c: 0 for c in CLASSES}, "inputs": 0, "seconds": 0.0}
    failures: list[dict[str, Any]] = []
    t0 = time.perf_counter()
    for i in range(start, start + count):
        if heartbeat is not None:
            heartbeat[3 * wid], heartbeat[3 * wid + 1] = i, time.time()
        case = make_input(seed, target, i)
        kind, detail = classify(target, case, time_limit)
        counts[kind] += 1
        counts["inputs"] += 1
        if kind in FAILURES:
            failures.append({"target": target, "index": i, "seed": seed, "class": kind,
                             "detail": detail, "input": case})
        if stop_at is not None and time.time() > stop_at:
            break
    counts["seconds"] = time.perf_counter() - t0
    return counts, failures


def _worker(wid: int, tasks: Any, results: Any, heartbeat: Any, seed: int | str,
            time_limit: float, memory_gib: float) -> None:
    if memory_gib > 0:
        lim = int(memory_gib * 2**30)
        resource.setrlimit(resource.RLIMIT_AS, (lim, lim))
    while True:
        task = tasks.get()
        if task is None:
            return
        cid, target, start, count = task
        heartbeat[3 * wid + 2] = cid
        counts, failures = run_chunk(seed, target, start, count, time_limit, heartbeat, wid)
        results.send((cid, counts, failures))  # a pipe: synchronous, nothing lost at a crash


def plan(total: int, overrides: dict[str, int] | None = None,
         only: list[str] | None = None) -> dict[str, int]:
    """Inputs per target: the overrides, and the rest of --inputs by WEIGHTS."""
    names = [t for t in TARGETS if not only or t in only]
    fixed = {t: n for t, n in (overrides or {}).items() if t in names}
    rest = [t for t in names if t not in fixed]
    left = max(total - sum(fixed.values()), 0)
    w = sum(WEIGHTS[t] for t in rest) or 1.0
    out = {t: int(left * WEIGHTS[t] / w) for t in rest}
    if rest:
        out[rest[0]] += left - sum(out.values())
    out.update(fixed)
    return {t: out[t] for t in names}


def _chunk_size(target: str) -> int:
    return {"ir": 25, "cli": 100}.get(target, 500)


def campaign(seed: int | str, per_target: dict[str, int], *, workers: int = 2,
             time_limit: float = DEFAULT_TIME_LIMIT, memory_gib: float = DEFAULT_MEMORY_GIB,
             progress: bool = False) -> dict[str, Any]:
    """Run the inputs; ``workers=0`` runs in this process (the CI test)."""
    _prepare()
    commit = _commit()  # the code under test: HEAD when the campaign starts
    counts = _new_counts()
    failures: list[dict[str, Any]] = []
    t0 = time.time()
    chunks: list[tuple[int, str, int, int]] = []
    for target, n in per_target.items():
        size = _chunk_size(target)
        for start in range(0, n, size):
            chunks.append((len(chunks), target, start, min(size, n - start)))
    # interleave the targets so progress (and a stopped run) covers all of them
    chunks.sort(key=lambda c: (c[2] / max(per_target[c[1]], 1), c[1]))

    def merge(c: dict[str, float], target: str) -> None:
        for k, v in c.items():
            counts[target][k] += v

    if workers <= 0:
        with _address_space_limit(memory_gib):
            for _, target, start, count in chunks:
                c, f = run_chunk(seed, target, start, count, time_limit)
                merge(c, target)
                failures += f
    else:
        failures += _run_pool(seed, chunks, workers, time_limit, memory_gib, merge, progress,
                              per_target)
    wall = time.time() - t0
    return _report(seed, counts, failures, wall, time_limit, memory_gib, workers, commit)


@contextlib.contextmanager
def _address_space_limit(gib: float) -> Iterator[None]:
    """In-process runs: lower the soft RLIMIT_AS to what the process maps now plus ``gib``
    (so runaway memory is a MemoryError, not the machine's), and restore it after."""
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    try:
        with open("/proc/self/statm") as f:
            mapped = int(f.read().split()[0]) * resource.getpagesize()
    except OSError:
        mapped = None
    if gib <= 0 or mapped is None:
        yield
        return
    want = mapped + int(gib * 2**30)
    if hard != resource.RLIM_INFINITY:
        want = min(want, hard)
    if soft != resource.RLIM_INFINITY:
        want = min(want, soft)
    resource.setrlimit(resource.RLIMIT_AS, (want, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


def _run_pool(seed: int | str, chunks: list[tuple[int, str, int, int]], workers: int,
              time_limit: float, memory_gib: float,
              merge: Callable[[dict[str, float], str], None], progress: bool,
              per_target: dict[str, int]) -> list[dict[str, Any]]:
    from multiprocessing.connection import wait

    ctx = mp.get_context("fork")
    tasks = ctx.Queue()
    readers: list[Any] = [None] * workers
    heartbeat = ctx.Array("d", [-1.0] * (3 * workers), lock=False)
    by_id = {c[0]: c for c in chunks}
    for c in chunks:
        tasks.put(c)
    failures: list[dict[str, Any]] = []
    procs: list[Any] = [None] * workers

    def start(w: int) -> None:
        heartbeat[3 * w], heartbeat[3 * w + 1], heartbeat[3 * w + 2] = -1, time.time(), -1
        r, wr = ctx.Pipe(duplex=False)
        p = ctx.Process(target=_worker, args=(w, tasks, wr, heartbeat, seed, time_limit,
                                              memory_gib), daemon=True)
        p.start()
        wr.close()
        procs[w], readers[w] = p, r

    def receive(timeout: float) -> None:
        nonlocal done_inputs
        for r in wait([x for x in readers if x is not None], timeout=timeout):
            try:
                cid, c, f = r.recv()
            except EOFError:  # the worker is gone; the liveness check below handles it
                readers[readers.index(r)] = None
                continue
            merge(c, by_id[cid][1])
            failures.extend(f)
            for x in f if progress else ():  # at once: a long campaign may be stopped
                print(f"[fuzz] FAILURE {x['class']} {x['target']}:{x['index']}: "
                      f"{json.dumps(x['input'], ensure_ascii=True)[:300]} -- "
                      f"{x['detail'].strip().splitlines()[-1][:200] if x['detail'] else ''}",
                      flush=True)
            pending.discard(cid)
            done_inputs += int(c["inputs"])

    for w in range(workers):
        start(w)
    pending = set(by_id)
    done_inputs, total_inputs, last = 0, sum(c[3] for c in chunks), time.time()
    stale = max(3 * time_limit, 30.0)
    while pending:
        receive(1.0)
        for w, p in enumerate(procs):
            cid = int(heartbeat[3 * w + 2])
            dead = not p.is_alive()
            hung = cid >= 0 and time.time() - heartbeat[3 * w + 1] > stale
            if not (dead or hung) or cid < 0 or cid not in pending:
                if dead and pending and cid not in pending:
                    start(w)  # exited between chunks (should not happen): replace it
                continue
            # the worker died or stopped answering inside chunk cid at input i
            _, target, first, count = by_id[cid]
            i = int(heartbeat[3 * w])
            if hung:
                p.kill()
            p.join()
            receive(0)  # what it sent before it died
            if cid not in pending:
                start(w)
                continue
            kind = ("hang" if hung else
                    "memory" if p.exitcode in (-signal.SIGKILL, -signal.SIGSEGV) else "crash")
            detail = (f"no progress for {stale:.0f} s (watchdog)" if hung
                      else f"worker exited with {p.exitcode}")
            failures.append({"target": target, "index": i, "seed": seed, "class": kind,
                             "detail": detail, "input": make_input(seed, target, i)})
            # the chunk's inputs before i were lost with the worker: rerun them, skip i
            c = {**{k: 0 for k in CLASSES}, "inputs": 1, "seconds": 0.0, kind: 1}
            merge(c, target)
            done_inputs += 1
            pending.discard(cid)
            nid = max(by_id) + 1
            rest = [(nid, target, first, i - first), (nid + 1, target, i + 1,
                                                      first + count - i - 1)]
            for r in rest:
                if r[3] > 0:
                    by_id[r[0]] = r
                    pending.add(r[0])
                    tasks.put(r)
            start(w)
        if progress and time.time() - last > 30:
            last = time.time()
            print(f"[fuzz] {done_inputs}/{total_inputs} inputs, {len(failures)} failures",
                  flush=True)
    for _ in procs:
        tasks.put(None)
    for p in procs:
        p.join(timeout=10)
        if p.is_alive():
            p.kill()
    del per_target
    return failures


def _commit() -> str:
    try:
        out = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True,
                             text=True, timeout=10, check=False).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "src"],
                               capture_output=True, text=True, timeout=10,
                               check=False).stdout.strip()
        return out + ("+dirty-src" if dirty else "") if out else "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def _report(seed: int | str, counts: dict[str, dict[str, float]],
            failures: list[dict[str, Any]], wall: float, time_limit: float,
            memory_gib: float, workers: int, commit: str) -> dict[str, Any]:
    targets = {t: {k: (round(v, 1) if k == "seconds" else int(v)) for k, v in c.items()}
               for t, c in counts.items() if c["inputs"]}
    total = {k: sum(c[k] for c in targets.values()) for k in ("inputs", *CLASSES)}
    return {
        "seed": seed, "commit": commit,
        "date": _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "wall_seconds": round(wall, 1), "workers": workers,
        "time_limit_s": time_limit, "memory_limit_gib": memory_gib,
        "python": sys.version.split()[0],
        "targets": targets, "total": total,
        "failures": failures,
    }


def table(report: dict[str, Any]) -> str:
    cols = ("inputs", "ok", "clean", *FAILURES)
    head = f"{'target':<11}" + "".join(f"{c:>10}" for c in cols) + f"{'seconds':>10}"
    rows = [head, "-" * len(head)]
    for t, c in report["targets"].items():
        rows.append(f"{t:<11}" + "".join(f"{c[k]:>10}" for k in cols) + f"{c['seconds']:>10}")
    tot = report["total"]
    rows.append(f"{'total':<11}" + "".join(f"{tot[k]:>10}" for k in cols)
                + f"{report['wall_seconds']:>10}")
    return "\n".join(rows)


def markdown_table(report: dict[str, Any]) -> str:
    cols = ("inputs", "ok", "clean", "traceback", "hang", "internal", "memory", "crash",
            "wrong")
    names = ("inputs", "successes", "clean errors", "tracebacks", "hangs", "internal errors",
             "memory", "worker crashes", "wrong output")
    out = ["| target | " + " | ".join(names) + " |", "|---" * (len(cols) + 1) + "|"]
    for t, c in [*report["targets"].items(), ("**total**", report["total"])]:
        out.append(f"| {t} | " + " | ".join(f"{c[k]:,}" for k in cols) + " |")
    return "\n".join(out)


def _save_failures(report: dict[str, Any], folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for f in report["failures"]:
        path = folder / f"{f['target']}-{f['index']}.json"
        path.write_text(json.dumps(f, indent=1, ensure_ascii=True) + "\n")


def _parse_overrides(text: str | None) -> dict[str, int]:
    out: dict[str, int] = {}
    for part in (text or "").split(","):
        if part.strip():
            t, _, n = part.partition("=")
            if t.strip() not in TARGETS:
                raise SystemExit(f"fuzz.py: unknown target {t!r} (one of {', '.join(TARGETS)})")
            out[t.strip()] = int(n)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seed", default=None, help="campaign seed (default: a random one, printed)")
    ap.add_argument("--inputs", type=int, default=10_000, help="inputs in total (default 10000)")
    ap.add_argument("--per-target", default=None,
                    help="fixed counts, e.g. ir=20000,cli=100000 (the rest of --inputs is "
                    "shared by WEIGHTS)")
    ap.add_argument("--targets", default=None, help="comma-separated subset of " +
                    ",".join(TARGETS))
    ap.add_argument("--workers", type=int, default=2, help="worker processes (0: in-process)")
    ap.add_argument("--time-limit", type=float, default=DEFAULT_TIME_LIMIT,
                    help="seconds per input before it counts as a hang (default 10)")
    ap.add_argument("--memory-gib", type=float, default=DEFAULT_MEMORY_GIB,
                    help="each worker's address-space limit (RLIMIT_AS, default 4 GiB)")
    ap.add_argument("--json", default=None, help="write the report here "
                    "(e.g. reports/fuzz/latest.json)")
    ap.add_argument("--markdown", action="store_true",
                    help="also print the table as markdown (docs/reliability.md)")
    ap.add_argument("--replay", default=None, metavar="TARGET:INDEX",
                    help="rebuild one input of --seed, print it and its outcome")
    ap.add_argument("--replay-file", default=None, help="replay a saved failures/*.json")
    args = ap.parse_args(argv)

    if args.replay or args.replay_file:
        if args.replay_file:
            saved = json.loads(Path(args.replay_file).read_text())
            target, case = saved["target"], saved["input"]
        else:
            target, _, idx = args.replay.partition(":")
            if args.seed is None:
                ap.error("--replay needs --seed")
            case = make_input(args.seed, target, int(idx))
        print(f"target {target}\ninput {json.dumps(case, ensure_ascii=True)}")
        if target == "ir":
            print("--- module ---\n" + case["text"] + "\n--------------")
        kind, detail = classify(target, case, args.time_limit)
        print(f"class {kind}\n{detail}".rstrip())
        return 1 if kind in FAILURES else 0

    seed = args.seed if args.seed is not None else str(random.randrange(1 << 32))
    only = [t.strip() for t in args.targets.split(",")] if args.targets else None
    per_target = plan(args.inputs, _parse_overrides(args.per_target), only)
    print(f"[fuzz] seed {seed}; inputs {sum(per_target.values())}: "
          + ", ".join(f"{t}={n}" for t, n in per_target.items())
          + f"; workers {args.workers}; limit {args.time_limit:g} s, {args.memory_gib:g} GiB",
          flush=True)
    report = campaign(seed, per_target, workers=args.workers, time_limit=args.time_limit,
                      memory_gib=args.memory_gib, progress=True)
    print(table(report))
    if args.markdown:
        print(markdown_table(report))
    if args.json:
        out = Path(args.json)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(report, indent=1, ensure_ascii=True) + "\n")
        if report["failures"]:
            _save_failures(report, out.parent / "failures")
        print(f"[fuzz] wrote {out}")
    for f in report["failures"]:
        print(f"\nFAILURE {f['class']} {f['target']}:{f['index']} (replay: python "
              f"scripts/fuzz.py --seed {f['seed']} --replay {f['target']}:{f['index']})")
        print(f"input: {json.dumps(f['input'], ensure_ascii=True)[:3000]}")
        print(f["detail"][-3000:])
    return 1 if report["failures"] else 0


if __name__ == "__main__":
    sys.exit(main())
