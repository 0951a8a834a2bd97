"""GEMM launch recipes (:mod:`nvatom.runtime.gemm_recipe`) and the cheap first call.

The golden values are the SM90 provider's own launch spec (``gemm_sm90_launch_spec``: its
tensor maps' driver arguments, grid, ``check_problem``): a recipe must reproduce them for
every size, not only the one it was recorded at.  No GPU needed."""

from __future__ import annotations

import os
import random
import subprocess
import sys
import zlib
from pathlib import Path
from typing import Any

import pytest

from nvatom import gemm_providers as gp
from nvatom.kernels import gemm_sm80 as sm80
from nvatom.kernels.sm90.config import GemmSm90Error
from nvatom.kernels.sm90.launch import check_problem, gemm_sm90_launch_spec
from nvatom.runtime import gemm_plan, ptxas
from nvatom.runtime import gemm_recipe as gr
from nvatom.runtime.gemm_plan import GemmProblem
from nvatom.runtime.torch_interop import TensorInfo

SRC = Path(__file__).resolve().parents[1] / "src"
EB = {"bf16": 2, "f16": 2, "f32": 4, "e4m3": 1, "e5m2": 1}

# (in, out, b_major, b_dtype, scale_mode, fast_accum): every problem class the SM90 provider
# plans differently
CLASSES = [
    ("bf16", "bf16", "N", "", "", False),
    ("bf16", "f32", "K", "", "", False),
    ("f16", "f16", "N", "", "", False),
    ("e4m3", "bf16", "K", "", "tensor", False),
    ("e4m3", "bf16", "K", "e5m2", "row", False),
    ("e5m2", "bf16", "K", "", "tensor", True),
    ("e4m3", "bf16", "K", "", "block", False),
]


def _info(name: str, ptr: int, dt: str, rows: int, cols: int, ld: int, major: str) -> TensorInfo:
    strides = (ld, 1) if major == "row" else (1, ld)
    return TensorInfo(name, ptr, dt, (rows, cols), strides, 0, major)  # type: ignore[arg-type]


def _operands(p: GemmProblem, rng: random.Random) -> tuple[TensorInfo, ...]:
    ib, ob = EB[p.in_dtype], EB[p.out_dtype]
    pad = lambda eb: rng.choice([0, 16 // eb, 64 // eb])  # noqa: E731
    a = _info("a", 0x7F0000000000, p.in_dtype, p.m, p.k, p.k + pad(ib), "row")
    if p.b_major == "K":
        b = _info("b", 0x7F1000000000, p.in_dtype, p.k, p.n, p.k + pad(ib), "col")
    else:
        b = _info("b", 0x7F1000000000, p.in_dtype, p.k, p.n, p.n + pad(ib), "row")
    d = _info("out", 0x7F2000000000, p.out_dtype, p.m, p.n, p.n + pad(ob), "row")
    return a, b, d


def _problem(cls: tuple, m: int, n: int, k: int) -> GemmProblem:
    ind, outd, bmaj, bdt, mode, fast = cls
    return GemmProblem(m, n, k, ind, outd, "K", bmaj, "f32", bdt, mode, fast)


def _norm(args: dict) -> dict:
    return {k: tuple(v) if isinstance(v, list) else v for k, v in args.items()}


def check_alternative_is_the_kernels(sub: dict, cfg: Any, p: GemmProblem, seed: int) -> Any:
    """Assert that a recipe's alternative ``sub`` evaluated at problem ``p`` (random pitches)
    gives the tensor maps, grid, block and shared memory of ``cfg``'s own launch spec there
    (132 SMs); returns that spec."""
    a, b, d = _operands(p, random.Random(seed))
    spec = gemm_sm90_launch_spec(cfg, p.m, p.n, p.k, a.ptr, b.ptr, d.ptr, 132,
                                 lda=a.ld, ldb=b.ld, ldd=d.ld)
    env = {"m": p.m, "n": p.n, "k": p.k, "lda": a.ld, "ldb": b.ld, "ldd": d.ld,
           "a": a.ptr, "b": b.ptr, "out": d.ptr}
    assert [_norm(x) for x in gr.evaluate_maps(sub["maps"], env)] == \
        [_norm(tm.driver_args()) for tm in spec.tensor_maps]
    assert gr.recipe_grid(sub, p.m, p.n) == spec.grid
    assert (sub["block"], sub["shmem"]) == (list(spec.block), spec.smem_bytes)
    return spec


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: "-".join(str(x) for x in c))
def test_recipe_reproduces_the_launch_spec_at_every_size(cls: tuple) -> None:
    rng = random.Random(zlib.crc32(repr(cls).encode()))  # the same sizes in every run
    prov = gp.Sm90Provider()
    p0 = _problem(cls, 512, 384, 256)
    launch = prov.plan(p0, "sm_90a")
    a, b, d = _operands(p0, rng)
    rec = launch.recipe(a, b, d, p0)
    assert rec is not None and rec["args"][:3] == ["map:0", "map:1", "map:2"]
    cfg = prov._config(p0)
    sms = rec["tiles"]["sms"]
    step = 16 // EB[p0.in_dtype]
    for _ in range(25):
        m = rng.choice([1, 7, 64, 129, 1000, 4096, rng.randrange(1, 20000)])
        n = rng.choice([8, 16, 200, 256, 4104, rng.randrange(1, 3000) * 8])
        k = rng.choice([step, 64, 4096, rng.randrange(1, 2000) * step])
        if rng.random() < 0.2:  # sizes the kernel refuses: accepts() must agree
            n, k = n + 1, k + 1
        p = _problem(cls, m, n, k)
        try:
            check_problem(cfg, m, n, k)
            ok = True
        except GemmSm90Error:
            ok = False
        # the recipe serves a size only where the provider would plan this same kernel
        # (promoted FP8 chooses its tile by M and N: 128 x 256 where it fills the waves)
        ok = ok and prov._config(p, sms) == cfg
        assert gr.recipe_accepts(rec, m, n, k) == ok, (m, n, k)
        if not ok:
            continue
        a, b, d = _operands(p, rng)
        spec = gemm_sm90_launch_spec(cfg, m, n, k, a.ptr, b.ptr, d.ptr, sms,
                                     lda=a.ld, ldb=b.ld, ldd=d.ld)
        env = {"m": m, "n": n, "k": k, "lda": a.ld, "ldb": b.ld, "ldd": d.ld,
               "a": a.ptr, "b": b.ptr, "out": d.ptr}
        got = [_norm(x) for x in gr.evaluate_maps(rec["maps"], env)]
        assert got == [_norm(tm.driver_args()) for tm in spec.tensor_maps], (m, n, k)
        assert gr.recipe_grid(rec, m, n) == spec.grid
        assert rec["block"] == list(spec.block) and rec["shmem"] == spec.smem_bytes


def test_recipe_args_are_the_launch_args(monkeypatch) -> None:
    """The launch's own argument list is built from the same names the recipe stores."""
    monkeypatch.setattr(gp.TENSOR_MAPS, "encoder", lambda tm: tm.encode())  # no driver here
    p = _problem(CLASSES[4], 256, 256, 256)
    launch = gp.Sm90Provider().plan(p, "sm_90a")
    a, b, d = _operands(p, random.Random(1))
    rec = launch.recipe(a, b, d, p)
    assert rec["args"] == ["map:0", "map:1", "map:2", "m", "n", "k", "scale_a", "scale_b"]
    args = launch.args(a, b, d, p, (0x1000, 0x2000))
    assert args[3:] == [256, 256, 256, 0x1000, 0x2000]


def test_gemm_dtypes_are_the_sm80_kernels() -> None:
    assert gemm_plan.PLAIN_DTYPES == sm80.IN_DTYPES
    assert gemm_plan.OUT_DTYPES == sm80.OUT_DTYPES


def test_recipe_store_round_trip_and_bad_files(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("NVATOM_CACHE_DIR", str(tmp_path))
    cls = (("in_dtype", "bf16"), ("out_dtype", "bf16"))
    key = gr.recipe_key(cls, (9, 0), 132)
    assert len({key, gr.recipe_key(cls, (9, 0), 114), gr.recipe_key(cls[:1], (9, 0), 132)}) == 3
    assert gr.load_recipe(key) is None
    gr.save_recipe(key, {"provider": "sm90", "x": [1, 2]})
    got = gr.load_recipe(key)
    assert got is not None and got["x"] == [1, 2] and got["format"] == gr.RECIPE_FORMAT
    path = next(tmp_path.rglob(f"{key}.entry"))
    path.write_bytes(path.read_bytes()[:-3])  # truncated: refused and removed
    assert gr.load_recipe(key) is None and not path.exists()


def test_ptxas_probe_is_memoized_on_disk(tmp_path, monkeypatch) -> None:
    """A ptxas probed once is not run again by a later process (same binary), and is
    probed again when the binary changes."""
    monkeypatch.setenv("NVATOM_CACHE_DIR", str(tmp_path / "cache"))
    count = tmp_path / "count"
    tool = tmp_path / "ptxas"
    tool.write_text(
        "#!/bin/sh\n"
        f"echo x >> {count}\n"
        'if [ "$1" = --version ]; then echo "Cuda compilation tools, release 13.0, V13.0.88";'
        " else echo \"--gpu-name  Allowed values: 'sm_90a','sm_100a'\"; fi\n")
    tool.chmod(0o755)
    probe = ptxas._probe_tool.__wrapped__  # the disk memo, without the in-process cache
    first = probe(str(tool), "PATH")
    assert first is not None and first.build == "13.0.88" and first.accepts("sm_90a")
    runs = len(count.read_text().split())
    assert runs == 2  # --version and --help
    again = probe(str(tool), "PATH")
    assert again == first and len(count.read_text().split()) == runs
    st = tool.stat()
    os.utime(tool, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))  # a replaced binary
    assert probe(str(tool), "PATH") == first and len(count.read_text().split()) == runs + 2


def test_import_gemm_loads_no_kernel_module() -> None:
    """``import nvatom.gemm`` leaves the providers, kernels, atoms and layout algebra
    unimported: a recipe launch never needs them."""
    code = ("import sys, nvatom.gemm as g\n"
            "heavy = [m for m in sys.modules if m.startswith(('nvatom.kernels', "
            "'nvatom.gemm_providers', 'nvatom.atoms', 'nvatom.layout', 'nvatom.descriptors'))]\n"
            "assert heavy == [], heavy\n"
            "assert g.PROVIDERS[0].name == 'sm90' and 'nvatom.gemm_providers' in sys.modules\n")
    env = dict(os.environ, PYTHONPATH=str(SRC) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    subprocess.run([sys.executable, "-c", code], env=env, check=True)


def _fake_map(args: dict) -> bytes:
    """128 bytes that stand for one map's driver arguments (the same from either path)."""
    import hashlib

    text = repr(sorted(_norm(args).items())).encode()
    return (hashlib.sha256(text).digest() * 4)[:128]


def test_gemm_launches_from_a_recipe_as_the_planned_path(tmp_path, monkeypatch) -> None:
    """End to end without a GPU: a planned call records its class's recipe; with the
    providers unimported and the memory caches empty (a fresh process), calls of that class,
    at the recorded and at other sizes, launch from the recipe with byte-identical kernel
    arguments and the same grid, and calls without ``out`` hit the call cache."""
    import types

    import nvatom.gemm as gm

    from .runtime.test_gemm_dispatch import _t

    monkeypatch.setenv("NVATOM_CACHE_DIR", str(tmp_path))
    log: list = []
    next_ptr = [0x7F5000000000]

    def empty(shape, dtype=None, device=None):
        dt = str(dtype) if str(dtype).startswith("torch.") else f"torch.{dtype}"
        t = _t(shape[0], shape[1], shape[1], dtype=dt, log=log)
        t.ptr = next_ptr[0]
        next_ptr[0] += 2**24
        return t

    cuda = types.SimpleNamespace(
        current_stream=lambda dev=None: types.SimpleNamespace(cuda_stream=5),
        get_device_capability=lambda dev=None: (9, 0),
        get_device_properties=lambda dev=None: types.SimpleNamespace(multi_processor_count=132),
        current_device=lambda: 0)
    monkeypatch.setitem(sys.modules, "torch", types.SimpleNamespace(
        cuda=cuda, empty=empty, bfloat16="bfloat16"))

    class Kernel:
        def __init__(self, tag: str) -> None:
            self.tag = tag

        def launcher(self, grid, block, shmem=0, cluster=None):
            return lambda params, stream: log.append((self.tag, grid, params))

    monkeypatch.setattr(gm, "get_kernel", lambda src, target, device=0, **kw: Kernel("plan"))
    monkeypatch.setattr(gr, "load_cached_kernel", lambda *args: Kernel("recipe"))
    monkeypatch.setattr(gp.TENSOR_MAPS, "encoder", lambda tm: _fake_map(tm.driver_args()))
    monkeypatch.setattr(gr, "_encode_tiled", _fake_map)
    monkeypatch.setattr(gm, "CACHES", gm.GemmCaches())
    gp.TENSOR_MAPS.clear()
    shapes = [(256, 512, 128), (1000, 264, 72), (3, 4096, 8)]

    def run_all(tag: str) -> list:
        got = []
        for m, n, k in shapes:
            a, b = _t(m, k, k + 8, log=log), _t(k, n, n, log=log)
            out = _t(m, n, n, log=log)
            out.ptr = a.ptr + 2**26
            log.clear()
            gm.gemm(a, b, out)
            assert [e[0] for e in log] == [tag], log
            got.append((log[0][1], [log[0][2].data(i) for i in range(6)]))
        return got

    planned = run_all("plan")
    assert list(tmp_path.rglob("gemm-recipes/*/*.entry")), "the planned call wrote a recipe"
    monkeypatch.delitem(sys.modules, "nvatom.gemm_providers")
    for name in ("calls", "capabilities", "launchers", "recipes"):
        getattr(gm.CACHES, name).clear()
    assert run_all("recipe") == planned
    # the call cache without out: the second call skips the checks and packs by out's address
    a, b = _t(256, 128, 128, log=log), _t(128, 512, 512, log=log)
    log.clear()
    r1, r2 = gm.gemm(a, b), gm.gemm(a, b)
    assert len(gm.CACHES.fresh_calls) == 1 and r1.ptr != r2.ptr
    assert [e[0] for e in log if e[0] == "recipe"] == ["recipe", "recipe"]
