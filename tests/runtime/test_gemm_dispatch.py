"""``nvatom.gemm``'s dispatch without a GPU: every operand the docs allow (any offset, any row
pitch, views such as ``a[:, 1:]``, a misaligned ``out``) runs, on the provider that supports
the problem, in place where the kernel's memory rules allow and through an aligned staging
copy where they do not; never an error.

The rules are re-stated here from their sources, independently of nvatom's tables:
TMA (CUDA Driver API, ``cuTensorMapEncodeTiled``): ``globalAddress`` 16-byte aligned, each
``globalStrides`` entry a multiple of 16 and below 2^40; the kernels' tensor maps also need
rows that do not overlap.  cp.async (PTX ISA, "cp.async"): a 16-byte copy's source address is
16-byte aligned.  The SM80 epilogue stores column pairs as one 2 x element access (PTX ISA,
"st": the address is aligned to the access size).  Duck-typed tensors stand in for torch's.
"""

from __future__ import annotations

import dataclasses
import importlib
import random
import struct
import sys
import types

import pytest

from nvatom import gemm_providers as gp
from nvatom.gemm import (
    MAX_DIM,
    GemmError,
    GemmProblem,
    OperandRule,
    Sm80Provider,
    check_operands,
    explain,
    plan,
    route,
)
from nvatom.runtime.launch import PackedParams
from nvatom.runtime.torch_interop import TensorArgumentError, TensorInfo

from .test_launch import FakeTensor

gm = importlib.import_module("nvatom.gemm")
SM90 = (9, 0)
BASE = 0x7F0000000000  # 64 KB aligned
EB = {"torch.bfloat16": 2, "torch.float16": 2, "torch.float32": 4,
      "torch.float8_e4m3fn": 1}


@pytest.fixture(autouse=True)
def providers(monkeypatch):
    """The registered providers as a GPU session has them: SM90 first, then SM80."""
    monkeypatch.setattr(gm, "PROVIDERS", [gp.Sm90Provider(), Sm80Provider()])
    monkeypatch.setattr(gm, "CACHES", gm.GemmCaches())
    monkeypatch.setattr(gp.TENSOR_MAPS, "encoder", lambda tm: tm.encode())
    gp.TENSOR_MAPS.clear()
    yield
    gp.TENSOR_MAPS.clear()


def view(rows: int, cols: int, *, ld: int, major: str = "row", offset: int = 0,
         dtype: str = "torch.bfloat16", base: int = BASE) -> FakeTensor:
    """A ``rows x cols`` view with leading stride ``ld`` starting ``offset`` elements into an
    aligned allocation (as ``x[:, offset:]`` or ``x.as_strided(..., storage_offset)``)."""
    strides = (ld, 1) if major == "row" else (1, ld)
    return FakeTensor((rows, cols), strides, dtype=dtype, ptr=base + offset * EB[dtype])


# --------------------------------------------------------------------------- the rules, restated


def tma_ok(t: TensorInfo) -> bool:
    eb = t.element_bytes
    lines = t.shape[0] if t.major == "row" else t.shape[1]
    inner = t.shape[1] if t.major == "row" else t.shape[0]
    if t.ptr % 16:
        return False
    return lines <= 1 or (t.ld * eb % 16 == 0 and t.ld >= inner and t.ld * eb < 2**40)


def sm80_ok(t: TensorInfo, name: str) -> bool:
    eb = t.element_bytes
    lines = t.shape[0] if t.major == "row" else t.shape[1]
    need = 16 if name in ("a", "b") else 2 * eb
    return t.ptr % need == 0 and (lines <= 1 or (t.ld * eb % need == 0 and t.ld < 2**32))


def _aligned_copy(t: TensorInfo, rule: OperandRule, slot: int) -> TensorInfo:
    """What staging gives the kernel: a 256-byte aligned buffer, tight padded pitch."""
    ld = rule.tight_ld(t.shape[1] if t.major == "row" else t.shape[0], t.element_bytes)
    moved = dataclasses.replace(t, ptr=BASE + (slot + 1) * 2**32)
    return rule.settle_ld(moved.with_ld(ld))


def _launch_args(r, p) -> PackedParams:
    infos = {"a": r.a, "b": r.b, "out": r.out}
    for i, name in enumerate(r.staged):
        infos[name] = _aligned_copy(infos[name], r.rules[name], i)
    scales = (0x1000, 0x2000) if p.in_dtype == "e4m3" else None
    # packs and checks every argument; SM90 builds and encodes its tensor maps (TensorMap
    # checks the driver's rules, the pure-Python encoder encodes them)
    return PackedParams.of(r.launch.source.params,
                           r.launch.args(infos["a"], infos["b"], infos["out"], p, scales))


# --------------------------------------------------------------------------- named cases


@pytest.mark.parametrize(("a", "b", "out", "provider", "staged"), [
    # aligned, tight: SM90 in place
    (view(128, 64, ld=64), view(64, 256, ld=256), view(128, 256, ld=256), "sm90", ()),
    # out[:, 2:] of a wider tensor: 4-byte offset, legal (even), not TMA's 16 bytes
    (view(128, 64, ld=64), view(64, 256, ld=256), view(128, 256, ld=264, offset=2), "sm90",
     ("out",)),
    # out with a row pitch of 2 * 260 = 520 bytes: legal, not a multiple of 16
    (view(128, 64, ld=64), view(64, 256, ld=256), view(128, 256, ld=260), "sm90", ("out",)),
    # a[:, 1:] of a 128 x 65 tensor: 2-byte offset, 130-byte pitch
    (view(128, 64, ld=65, offset=1), view(64, 256, ld=256), view(128, 256, ld=256), "sm90",
     ("a",)),
    # column-major b with an odd pitch and an offset
    (view(128, 64, ld=64), view(64, 256, ld=67, major="col", offset=3),
     view(128, 256, ld=256), "sm90", ("b",)),
    # b broadcast over K (stride 0): lines overlap, TMA cannot map it; SM80 reads it in place
    (view(128, 64, ld=64), view(64, 256, ld=0), view(128, 256, ld=256), "sm90", ("b",)),
    # one row with a stride no kernel could take: nothing steps by it, nothing to stage
    (view(1, 64, ld=2**40 + 3), view(64, 256, ld=256), view(1, 256, ld=7), "sm90", ()),
    # f32 out 4 bytes off: SM90 stages it
    (view(64, 64, ld=64), view(64, 64, ld=64), view(64, 64, ld=64, offset=1,
                                                    dtype="torch.float32"), "sm90", ("out",)),
    # K = 36 (72-byte rows): SM90 does not support the problem; SM80 takes everything in place
    (view(64, 36, ld=40), view(36, 64, ld=64), view(64, 64, ld=66, offset=2), "sm80", ()),
    # ... except what breaks cp.async / the pair stores: 2-byte offsets of a and of out
    (view(64, 36, ld=40, offset=1), view(36, 64, ld=64), view(64, 64, ld=66, offset=1),
     "sm80", ("a", "out")),
    # f32 out on SM80: pairs are 8-byte stores
    (view(64, 36, ld=40), view(36, 64, ld=64), view(64, 64, ld=66, offset=1,
                                                    dtype="torch.float32"), "sm80", ("out",)),
    (view(64, 36, ld=40), view(36, 64, ld=64), view(64, 64, ld=67, dtype="torch.float32"),
     "sm80", ("out",)),
])
def test_route_stages_what_the_kernel_cannot_take(a, b, out, provider, staged) -> None:
    ai, bi, oi, p = check_operands(a, b, out)  # every one of these is documented legal
    r = route(ai, bi, oi, p, SM90)
    assert (r.provider, r.staged) == (provider, staged)
    assert len(r.why) == len(staged)
    ok = tma_ok if provider == "sm90" else (lambda t: sm80_ok(t, t.name))
    for t in (ai, bi, oi):
        assert ok(t) == (t.name not in staged), t
    _launch_args(r, p)


def test_fp8_operands_are_staged_for_tma() -> None:
    e4 = "torch.float8_e4m3fn"
    a = view(128, 64, ld=72, dtype=e4)  # 72-byte pitch
    b = view(64, 128, ld=64, major="col", dtype=e4, offset=8)  # 8 bytes off
    out = view(128, 128, ld=128, offset=2)
    ai, bi, oi, p = check_operands(a, b, out, scale_a=1.0, scale_b=2.0)
    r = route(ai, bi, oi, p, SM90)
    assert (r.provider, r.staged) == ("sm90", ("a", "b", "out"))
    assert "72 elements (72 bytes) is not a multiple of 16 bytes" in r.why[0]
    assert "0x7f0000000008 is not 16-byte aligned (TMA" in r.why[1]
    _launch_args(r, p)
    # K = 40: a problem (not storage) no kernel runs, and the error says why
    with pytest.raises(GemmError, match=r"sm90: K = 40: a row of A .*; sm80: .*no FP8 path"):
        ai, bi, oi, p = check_operands(view(8, 40, ld=48, dtype=e4),
                                       view(40, 64, ld=48, major="col", dtype=e4),
                                       scale_a=1.0, scale_b=1.0)
        route(ai, bi, view_info(8, 64), p, SM90)


def view_info(m: int, n: int) -> TensorInfo:
    return TensorInfo("out", BASE, "bf16", (m, n), (n, 1), 0, "row")


def test_operand_rule_settles_one_line_strides() -> None:
    rule = OperandRule(16, 16, "TMA", no_overlap=True)
    one = TensorInfo("a", BASE, "bf16", (1, 100), (3, 1), 0, "row")
    assert rule.violation(one) is None
    assert rule.settle_ld(one).ld == 104  # 100 rounded up to 16 bytes (8 bf16)
    assert rule.tight_ld(5, 4) == 8 and rule.tight_ld(0, 2) == 8
    assert OperandRule(8, 8, "pairs").tight_ld(5, 4) == 6  # f32 pairs: even strides
    col = TensorInfo("b", BASE, "f16", (64, 1), (1, 5), 0, "col")
    assert rule.settle_ld(col).strides == (1, 64)


# --------------------------------------------------------------------------- random legal inputs


def _random_case(rng: random.Random):
    """A random call the docs allow: bf16/f16 (or e4m3 with its majors), any M and K, even N,
    random majors, row pitches, storage offsets (element-aligned, as torch's are) and out."""
    fp8 = rng.random() < 0.2
    dt = "torch.float8_e4m3fn" if fp8 else rng.choice(["torch.bfloat16", "torch.float16"])
    step = rng.choice([1, 8, 16, 64, 64])  # multiples of 8 and 16 make SM90 support the problem
    m = rng.choice([1, 2, 7, 64, 129, 300])
    k = step * rng.randint(1, 40) if not fp8 else 16 * rng.randint(1, 20)
    n = 2 * rng.randint(1, 200) if not fp8 else 8 * rng.randint(1, 50)
    od = "torch.bfloat16" if fp8 else rng.choice(["torch.bfloat16", "torch.float16",
                                                   "torch.float32"])

    def operand(rows: int, cols: int, major: str, dtype: str) -> FakeTensor:
        inner = cols if major == "row" else rows
        kind = rng.random()
        if kind < 0.05:  # broadcast lines
            ld = 0
        elif kind < 0.1 and (rows if major == "row" else cols) == 1:
            ld = rng.randint(1, 2**41)
        else:
            ld = inner + rng.choice([0] * 8 + [64] * 4 + [1, 2, 3, 5, 8, 16])
        off = rng.choice([0] * 12 + [1, 2, 3, 4, 8, 12])
        return view(rows, cols, ld=ld, major=major, offset=off, dtype=dtype,
                    base=BASE + rng.randint(0, 1023) * 2**16)

    am = "row" if fp8 else rng.choice(["row", "col"])
    bm = "col" if fp8 else rng.choice(["row", "col"])
    a, b = operand(m, k, am, dt), operand(k, n, bm, dt)
    ld = n + rng.choice([0] * 8 + [2, 4, 6, 8, 10, 64])
    out = view(m, n, ld=ld, offset=rng.choice([0] * 12 + [1, 2, 3, 4, 6]), dtype=od)
    return a, b, out, ({"scale_a": 0.5, "scale_b": 2.0} if fp8 else {})


def test_random_legal_inputs_always_run() -> None:
    """1,200 random legal calls (the issue's experiment): each is routed without an error,
    runs on SM90 whenever SM90 supports the problem, in place exactly when the operand meets
    TMA's rules (else staged), and its kernel arguments, tensor maps included, are made."""
    rng = random.Random(1234)
    seen = {"sm90": 0, "sm80": 0, "staged": 0, "in place": 0}
    for _ in range(1200):
        a, b, out, scales = _random_case(rng)
        ai, bi, oi, p = check_operands(a, b, out, **scales)
        r = route(ai, bi, oi, p, SM90)
        sm90_supports = gp.Sm90Provider().supports(p, SM90)
        assert r.provider == ("sm90" if sm90_supports else "sm80"), p
        ok = tma_ok if r.provider == "sm90" else (lambda t: sm80_ok(t, t.name))
        for t in (ai, bi, oi):
            assert ok(t) == (t.name not in r.staged), (t, r.staged)
        _launch_args(r, p)
        seen[r.provider] += 1
        seen["staged" if r.staged else "in place"] += 1
    assert min(seen.values()) > 100, seen  # every path exercised


# --------------------------------------------------------------------------- nvatom.gemm itself


@dataclasses.dataclass(frozen=True)
class _Dev:
    type: str = "cuda"
    index: int = 0


class _Tensor(FakeTensor):
    """A fake tensor that logs copies and makes strided views of itself."""

    log: list

    def copy_(self, src) -> _Tensor:
        self.log.append(("copy", self.ptr, src.ptr))
        return self

    def as_strided(self, shape, strides, offset) -> _Tensor:
        t = _Tensor(tuple(shape), tuple(strides), self.dtype, self.ptr + offset * EB[self.dtype],
                    self.device)
        t.log = self.log
        return t


@pytest.fixture
def fake_torch(monkeypatch):
    log: list = []
    next_ptr = [0x7F5000000010]  # deliberately not 256-byte aligned

    def empty(shape, dtype=None, device=None):
        n = shape if isinstance(shape, int) else shape[0] * shape[1]
        t = _Tensor((n,), (1,), dtype, next_ptr[0], device)
        t.log = log
        next_ptr[0] += 2**24 + 0x30
        log.append(("empty", t.ptr))
        return t

    cuda = types.SimpleNamespace(
        current_stream=lambda dev=None: types.SimpleNamespace(cuda_stream=5),
        get_device_capability=lambda dev=None: SM90)
    monkeypatch.setitem(sys.modules, "torch", types.SimpleNamespace(cuda=cuda, empty=empty))

    class Kernel:
        def launcher(self, grid, block, shmem=0, cluster=None):
            return lambda params, stream: log.append(("launch", params, stream))

    monkeypatch.setattr(gm, "get_kernel", lambda src, target, device=0, **kw: Kernel())
    monkeypatch.setattr(gm, "CACHES", gm.GemmCaches())
    monkeypatch.setattr(gm, "_record_recipe", lambda *args: None)  # no cache writes
    maps: list = []
    monkeypatch.setattr(gp.TENSOR_MAPS, "encoder", lambda tm: maps.append(tm) or tm.encode())
    return types.SimpleNamespace(log=log, maps=maps)


def _t(rows, cols, ld, offset=0, dtype="torch.bfloat16", major="row", log=None) -> _Tensor:
    v = view(rows, cols, ld=ld, offset=offset, dtype=dtype, major=major)
    t = _Tensor(v.shape, v.strides, v.dtype, v.ptr, _Dev())
    t.log = log
    return t


def test_gemm_misaligned_out_is_staged_and_copied_back(fake_torch) -> None:
    log = fake_torch.log
    a, b = _t(128, 64, 64, log=log), _t(64, 256, 256, log=log)
    out = _t(128, 256, 260, offset=2, log=log)  # 4 bytes off, 520-byte rows
    assert gm.gemm(a, b, out) is out
    kinds = [e[0] for e in log]
    assert kinds == ["empty", "launch", "copy"]
    buf = log[0][1]
    staged_d = next(tm for tm in fake_torch.maps if tm.global_dims == (256, 128))
    assert staged_d.global_address % 256 == 0 and staged_d.global_address > buf
    assert staged_d.global_strides == (256 * 2,)
    assert log[2][1] == out.ptr and log[2][2] == staged_d.global_address  # out.copy_(buffer)
    assert gm.CACHES.calls == {}  # a staged call is never call-cached (its buffers are per call)
    # the aligned call is launched in place and cached
    log.clear()
    good = _t(128, 256, 256, log=log)
    gm.gemm(a, b, good)
    assert [e[0] for e in log] == ["launch"] and len(gm.CACHES.calls) == 1


def test_gemm_stages_inputs_before_the_launch(fake_torch) -> None:
    log = fake_torch.log
    fake_torch_cap = (8, 6)
    sys.modules["torch"].cuda.get_device_capability = lambda dev=None: fake_torch_cap
    a = _t(100, 40, 41, offset=1, log=log)  # a[:, 1:] of a 100 x 41 tensor
    b = _t(40, 64, 40, major="col", log=log)  # column-major, 80-byte pitch: fine for SM80
    out = _t(100, 64, 64, log=log)
    gm.gemm(a, b, out)
    assert [e[0] for e in log] == ["empty", "copy", "launch"]
    staged_a = log[1][1]
    assert log[1][2] == a.ptr and staged_a % 256 == 0
    params = log[2][1]
    ptr_a, ptr_b, ptr_d = struct.unpack("<3Q", b"".join(params.data(i) for i in range(3)))
    lda, ldb, ldd = struct.unpack("<3I", b"".join(params.data(i) for i in range(6, 9)))
    assert (ptr_a, ptr_b, ptr_d) == (staged_a, b.ptr, out.ptr)
    assert (lda, ldb, ldd) == (40, 40, 64)  # the staged copy: tight 80-byte rows


def test_explain_reports_the_route() -> None:
    r = explain(view(64, 64, ld=64), view(64, 64, ld=64), view(64, 64, ld=72, offset=2),
                capability=SM90)
    assert (r.provider, r.target, r.staged) == ("sm90", "sm_90a", ("out",))
    assert "out's data pointer 0x7f0000000004 is not 16-byte aligned (TMA" in r.why[0]
    r = explain(view(64, 64, ld=64), view(64, 64, ld=64), capability=(8, 0))
    assert (r.provider, r.target, r.staged) == ("sm80", "sm_80", ())
    r = explain(view(64, 64, ld=64), view(64, 64, ld=64), capability=[8, 0])  # a list too
    assert r.provider == "sm80"


@pytest.mark.parametrize(("kw", "match"), [
    # found by the api fuzz target: TypeError (a float is not iterable; a list is unhashable)
    ({"capability": 9.0}, r"capability = 9\.0: a compute capability is a \(major, minor\) "
                          r"pair of ints"),
    ({"capability": (9, 0, 1)}, r"capability = \(9, 0, 1\)"),
    ({"capability": (True, 0)}, r"capability = \(True, 0\)"),
    ({"capability": SM90, "provider": ["sm90"]}, r"provider = \['sm90'\]: the name of a "
                                                 r"registered GEMM provider \(a str\)"),
])
def test_explain_refuses_odd_capabilities_and_providers(kw, match) -> None:
    with pytest.raises(GemmError, match=match):
        explain(view(64, 64, ld=64), view(64, 64, ld=64), **kw)


# --------------------------------------------------------------------------- size limits


def test_grid_and_index_limits_are_refused_with_the_value() -> None:
    big = GemmProblem(MAX_DIM, MAX_DIM - 1, 64, "bf16", "bf16", "K", "N")
    why80 = Sm80Provider().reject(big, SM90)
    assert why80 is not None and "needs 281474976710656 CTAs of 128 x 128" in why80
    assert "gridDim.x <= 2147483647" in why80
    sm90_big = dataclasses.replace(big, n=MAX_DIM - 7)
    why90 = gp.Sm90Provider().reject(sm90_big, SM90)
    assert why90 is not None and "more than the kernel's 32-bit tile index" in why90
    with pytest.raises(GemmError, match="no nvatom GEMM kernel .* 2147483647 x 2147483646"):
        plan(big, SM90)
    # the largest grids that still fit are planned
    lp, _ = plan(GemmProblem(MAX_DIM, 8, 64, "bf16", "bf16", "K", "N"), (8, 0),
                 [Sm80Provider()])
    assert lp.grid == (2**24, 1, 1)


def test_cli_refuses_sizes_over_the_limit(capsys) -> None:
    from nvatom.cli import main

    assert main(["gemm", "--m", str(10**30), "--n", "64", "--k", "64"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "--m = " + str(10**30) in err and "2147483647" in err
    assert main(["gemm", "--m", "2147483647", "--n", "2147483640", "--k", "64",
                 "--target", "sm_80"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "CTAs of 128 x 128" in err and "2147483647" in err


def test_cli_bench_without_torch_names_bench(capsys) -> None:
    if importlib.util.find_spec("torch") is not None:
        pytest.skip("torch is installed here")
    from nvatom.cli import main

    assert main(["gemm", "--m", "64", "--n", "64", "--k", "64", "--bench"]) == 2
    err = capsys.readouterr().err
    assert "--bench needs torch" in err and "--run needs" not in err
    assert main(["gemm", "--m", "64", "--n", "64", "--k", "64", "--run"]) == 2
    assert "--run needs torch" in capsys.readouterr().err


def test_non_tensors_are_named() -> None:
    import nvatom

    with pytest.raises(TensorArgumentError, match=r"a is a list, not a torch tensor: "
                       r"nvatom's kernels take torch CUDA tensors"):
        nvatom.gemm([[1.0]], [[1.0]])
