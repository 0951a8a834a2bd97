"""``nvatom.gemm`` with FP8 (e4m3, e5m2) operands and per-tensor or row-wise scales, without a GPU.

Duck-typed tensors (tests/runtime/test_launch.py) stand in for torch's: every error path of
the scales and of the operand layouts FP8 needs, the dispatch (SM90 only; the SM80 provider
says it has no FP8 path), the packed kernel arguments (the scale addresses after M, N, K, as
the kernel's ``.param`` list declares them) and, with a stand-in ``torch`` module, the hot
path of ``nvatom.gemm`` itself (the call cache keyed by the scales, scales given as floats).
Issue 18: the scaling mode picked from the scales' shapes (and every wrong shape, stride or
dtype named), ``fast_accum``, mixed e4m3/e5m2 operands, one kernel per mode.
"""

from __future__ import annotations

import dataclasses
import importlib
import struct
import sys
import types

import pytest

from nvatom import gemm_providers as gp
from nvatom.gemm import GemmError, GemmProblem, Sm80Provider, check_operands, check_scales, plan
from nvatom.kernels.sm90.config import GemmSm90Error
from nvatom.runtime.torch_interop import TensorArgumentError

from .runtime.test_launch import FakeDevice, FakeTensor, mat

gm = importlib.import_module("nvatom.gemm")
E4M3 = "torch.float8_e4m3fn"


def a8(m: int, k: int, **kw) -> FakeTensor:
    """Row-major e4m3 M x K."""
    return mat(m, k, **{"dtype": E4M3, **kw})


def b8(k: int, n: int, **kw) -> FakeTensor:
    """Column-major (K-major) e4m3 K x N, as ``b_rowmajor.t().contiguous().t()`` gives."""
    return mat(n, k, **{"dtype": E4M3, **kw}).T


def scale(ptr: int = 0x7F0000100000, *, shape: tuple[int, ...] = (), dtype: str = "torch.float32",
          device: FakeDevice | None = None) -> FakeTensor:
    return FakeTensor(shape, (1,) * len(shape), dtype=dtype, ptr=ptr,
                      device=device or FakeDevice())


# --------------------------------------------------------------------------- checks


def test_fp8_problem() -> None:
    a, b, d = a8(256, 512), b8(512, 384), mat(256, 384)
    *_, p = check_operands(a, b, d, scale_a=scale(), scale_b=1.5)
    assert p == GemmProblem(256, 384, 512, "e4m3", "bf16", "K", "K", scale_mode="tensor")
    *_, p = check_operands(a, b, scale_a=0.5, scale_b=2)  # no out: bf16 is the FP8 output
    assert p.out_dtype == "bf16"


@pytest.mark.parametrize(("args", "kw", "err", "match"), [
    # scales: both needed for FP8, none for bf16/f16
    ((a8(64, 64), b8(64, 64)), {}, GemmError,
     "a and b are e4m3 \\(FP8\\) but scale_a and scale_b is missing"),
    ((a8(64, 64), b8(64, 64)), {"scale_a": scale()}, GemmError, "but scale_b is missing"),
    ((a8(64, 64), b8(64, 64)), {"scale_b": 1.0}, GemmError, "but scale_a is missing"),
    ((mat(64, 64), mat(64, 64)), {"scale_a": scale(), "scale_b": scale()}, GemmError,
     "scale_a and scale_b given but a and b are bf16: scales apply to FP8"),
    ((mat(64, 64, dtype="torch.float16"), mat(64, 64, dtype="torch.float16")),
     {"scale_b": 2.0}, GemmError, "scale_b given but a and b are f16"),
    # scale values
    ((a8(64, 64), b8(64, 64)), {"scale_a": scale(dtype="torch.bfloat16"), "scale_b": 1.0},
     GemmError, r"scale_a has dtype bfloat16; scales are float32 .* scale_a\.float\(\)"),
    ((a8(64, 64), b8(64, 64)), {"scale_a": 1.0, "scale_b": scale(dtype="torch.float64")},
     GemmError, "scale_b has dtype float64"),
    ((a8(64, 64), b8(64, 64)), {"scale_a": scale(shape=(64,)), "scale_b": 1.0}, GemmError,
     r"scale_a has shape \(64,\) and scale_b \(\): the scales are per-tensor \(one element "
     r"each\) or row-wise \(scale_a \(64, 1\), one per row of a; scale_b \(1, 64\)"),
    ((a8(64, 64), b8(64, 64)), {"scale_a": scale(shape=(0,)), "scale_b": 1.0}, GemmError,
     r"scale_a has shape \(0,\) and scale_b \(\)"),
    ((a8(64, 64), b8(64, 64)), {"scale_a": 1.0, "scale_b": scale(device=FakeDevice("cpu", None))},
     GemmError, r"scale_b is on device 'cpu', not a CUDA device; move it with scale_b\.cuda\(\)"),
    ((a8(64, 64), b8(64, 64)), {"scale_a": scale(device=FakeDevice("cuda", 1)), "scale_b": 1.0},
     GemmError, "scale_a is on cuda:1, the operands on cuda:0"),
    ((a8(64, 64), b8(64, 64)), {"scale_a": "2", "scale_b": 1.0}, GemmError,
     r"scale_a = '2' \(str\) is neither a float nor a float32 CUDA tensor"),
    ((a8(64, 64), b8(64, 64)), {"scale_a": 1.0, "scale_b": True}, GemmError,
     "scale_b = True: a scale is a float or a float32 tensor, not a bool"),
    # operand layouts and types
    ((a8(64, 64), mat(64, 64, dtype=E4M3)), {"scale_a": 1.0, "scale_b": 1.0}, GemmError,
     r"b \(e4m3, 64x64\) is row-major \(strides \(64, 1\)\): FP8 needs b column-major "
     r".*: b = b_rowmajor\.t\(\)\.contiguous\(\)\.t\(\)"),
    ((mat(32, 64, dtype=E4M3).T, b8(32, 64)), {"scale_a": 1.0, "scale_b": 1.0}, GemmError,
     r"a \(e4m3, 64x32\) is column-major .*FP8 needs a row-major \(K-major\) a"),
    ((a8(64, 64), b8(64, 64), mat(64, 64, dtype="torch.float32")),
     {"scale_a": 1.0, "scale_b": 1.0}, GemmError, "out is f32: e4m3 x e4m3 GEMMs write bf16"),
    ((a8(64, 64), b8(64, 64), mat(64, 64, dtype="torch.float16")),
     {"scale_a": 1.0, "scale_b": 1.0}, GemmError, "out is f16: e4m3 x e4m3 GEMMs write bf16"),
    ((a8(64, 64), b8(64, 64).T.T), {"scale_a": 1.0, "scale_b": 1.0}, None, None),
    ((a8(64, 64), b8(64, 64, dtype="torch.float8_e5m2")), {"scale_a": 1.0, "scale_b": 1.0},
     None, None),  # e4m3 x e5m2: WGMMA takes either FP8 type on either side
    ((a8(64, 64), mat(64, 64).T), {"scale_a": 1.0, "scale_b": 1.0}, TensorArgumentError,
     "a is e4m3 but b is bf16"),
    # a 40-byte row pitch is legal storage (staged where a kernel needs 16 bytes); K = 40
    # itself is what no kernel runs (test_cli_gemm_e4m3_errors, tests/runtime/test_gemm_dispatch)
    ((a8(64, 40), b8(40, 64)), {"scale_a": 1.0, "scale_b": 1.0}, None, None),
])
def test_fp8_check_errors(args, kw, err, match) -> None:
    if err is None:  # a control: the same call with a K-major b passes
        check_operands(*args, **kw)
        return
    with pytest.raises(err, match=match):
        check_operands(*args, **kw)


def test_check_scales_accepts_numbers_and_one_element_tensors() -> None:
    for sa, sb in ((1.0, 2), (scale(), scale(shape=(1,))), (scale(shape=(1, 1)), 0.5)):
        check_scales(sa, sb, "e4m3", 0)
    check_scales(None, None, "bf16", 0)


# --------------------------------------------------------------------------- dispatch

PROVIDERS = [gp.Sm90Provider(), Sm80Provider()]


def test_fp8_dispatches_to_sm90_only() -> None:
    p = GemmProblem(256, 384, 512, "e4m3", "bf16", "K", "K")
    launch, target = plan(p, (9, 0), PROVIDERS)
    assert (launch.provider, target) == ("sm90", "sm_90a")
    assert launch.source.params[-2:] == (("scale_a", "u64"), ("scale_b", "u64"))
    assert PROVIDERS[1].reject(p, (9, 0)).startswith("the SM80 kernel (mma.sync) has no FP8")
    assert not PROVIDERS[1].supports(p, (9, 0))


@pytest.mark.parametrize(("problem", "cap", "match"), [
    (GemmProblem(256, 384, 512, "e4m3", "bf16", "K", "K"), (8, 9),
     r"no nvatom GEMM kernel for e4m3 x e4m3 -> bf16 \(acc f32\) on compute capability 8\.9 "
     r"\(M x N x K = 256 x 384 x 512\); sm90: needs compute capability 9\.0 \(sm_90a; WGMMA "
     r"and TMA\), got 8\.9; sm80: the SM80 kernel \(mma\.sync\) has no FP8 path: e4m3 GEMMs "
     r"run on the SM90 kernel only \(compute capability 9\.0\)"),
    (GemmProblem(256, 384, 512, "e4m3", "bf16", "K", "K"), (10, 0), "got 10.0; sm80: the SM80"),
    (GemmProblem(256, 40, 24, "e4m3", "bf16", "K", "K"), (9, 0),
     "sm90: K = 24: a row of A .* K must be a multiple of 16"),
    # a K-major B puts no pitch rule on N; bf16 D rows do (N a multiple of 8)
    (GemmProblem(256, 36, 512, "e4m3", "bf16", "K", "K"), (9, 0),
     r"sm90: N = 36: a row of D \(36 x 2 bytes\) .* N must be a multiple of 8"),
])
def test_fp8_no_provider_says_why(problem, cap, match) -> None:
    with pytest.raises(GemmError, match=match):
        plan(problem, cap, PROVIDERS)


def test_a_provider_without_reject_is_described() -> None:
    class Old:  # the protocol before reject(): still usable, described generically
        name = "old"

        def supports(self, problem, capability) -> bool:
            return False

    with pytest.raises(GemmError, match="old: does not support this problem"):
        plan(GemmProblem(8, 8, 8, "bf16", "bf16", "K", "N"), (9, 0), [Old()])


# --------------------------------------------------------------------------- arguments


@pytest.fixture
def py_encoder(monkeypatch):
    """Tensor maps by nvatom's pure-Python encoder (the driver's stand-in)."""
    monkeypatch.setattr(gp.TENSOR_MAPS, "encoder", lambda tm: tm.encode())
    gp.TENSOR_MAPS.clear()
    yield
    gp.TENSOR_MAPS.clear()


def test_fp8_packed_arguments_carry_the_scale_addresses(py_encoder) -> None:
    ai, bi, oi, p = check_operands(a8(256, 512, ptr=1 << 30), b8(512, 384, ptr=2 << 30),
                                   mat(256, 384, ptr=3 << 30), scale_a=1.0, scale_b=1.0)
    launch, _ = plan(p, (9, 0), PROVIDERS)
    first = launch.packed(ai, bi, oi, p, (0x1000, 0x2000))
    assert struct.unpack("<3I", b"".join(first.data(i) for i in (3, 4, 5))) == (256, 384, 512)
    assert struct.unpack("<2Q", first.data(6) + first.data(7)) == (0x1000, 0x2000)
    # the scale addresses are part of the cache key; the same ones hit
    assert launch.packed(ai, bi, oi, p, (0x1000, 0x2000)) is first
    other = launch.packed(ai, bi, oi, p, (0x1000, 0x3000))
    assert other is not first and struct.unpack("<Q", other.data(7)) == (0x3000,)
    with pytest.raises(GemmSm90Error, match="needs the scale_a, scale_b addresses"):
        launch.args(ai, bi, oi, p)


# --------------------------------------------------------------------------- nvatom.gemm


@dataclasses.dataclass(frozen=True)
class _Dev:
    """A hashable CUDA device (the call cache keys by ``t.device``, as torch's is)."""

    type: str = "cuda"
    index: int = 0


DEV = _Dev()


@dataclasses.dataclass
class _Stream:
    cuda_stream: int = 77


class _FakeKernel:
    def __init__(self, calls: list) -> None:
        self.calls = calls

    def launcher(self, grid, block, shmem=0, cluster=None):
        return lambda params, stream: self.calls.append((params, stream))


@pytest.fixture
def fake_torch(monkeypatch, py_encoder):
    """A stand-in ``torch`` (capability 9.0, one stream) and a kernel that records launches."""
    made: list[float] = []

    def full(shape, value, dtype=None, device=None):
        made.append(value)
        return scale(0x7F0000200000 + 0x100 * len(made), shape=shape, device=DEV)

    def empty(shape, dtype=None, device=None):
        return mat(*shape, dtype=f"torch.{dtype}", ptr=0x7F0000300000, device=DEV)

    cuda = types.SimpleNamespace(current_stream=lambda dev=None: _Stream(),
                                 get_device_capability=lambda dev=None: (9, 0))
    torch = types.SimpleNamespace(cuda=cuda, full=full, empty=empty, bfloat16="bfloat16",
                                  float32="float32")
    monkeypatch.setitem(sys.modules, "torch", torch)
    launches: list = []
    monkeypatch.setattr(gm, "get_kernel",
                        lambda src, target, device=0, **kw: _FakeKernel(launches))
    monkeypatch.setattr(gm, "CACHES", gm.GemmCaches())
    monkeypatch.setattr(gm, "PROVIDERS", list(PROVIDERS))
    monkeypatch.setattr(gm, "_record_recipe", lambda *args: None)  # no cache writes
    return types.SimpleNamespace(launches=launches, made=made)


def _scales_of(params) -> tuple[int, int]:
    return struct.unpack("<2Q", params.data(6) + params.data(7))


def _abd(m: int, n: int, k: int, dtype: str = E4M3):
    """Operands on the hashable device: e4m3 K-major b, or bf16 row-major b."""
    a = mat(m, k, dtype=dtype, ptr=1 << 30, device=DEV)
    b = (mat(n, k, dtype=dtype, ptr=2 << 30, device=DEV).T if dtype == E4M3 else
         mat(k, n, dtype=dtype, ptr=2 << 30, device=DEV))
    return a, b, mat(m, n, ptr=3 << 30, device=DEV)


def test_gemm_fp8_hot_path_keys_the_scales(fake_torch) -> None:
    a, b, d = _abd(256, 384, 512)
    s1, s2 = scale(0x5000, device=DEV), scale(0x6000, device=DEV)
    assert gm.gemm(a, b, d, scale_a=s1, scale_b=s2) is d
    assert gm.gemm(a, b, d, scale_a=s2, scale_b=s1) is d
    assert gm.gemm(a, b, d, scale_a=s1, scale_b=s2) is d  # a cache hit: the first params
    ls = fake_torch.launches
    assert [_scales_of(p) for p, _ in ls] == [(0x5000, 0x6000), (0x6000, 0x5000),
                                               (0x5000, 0x6000)]
    assert ls[2][0] is ls[0][0] and ls[0][1] == 77 and len(gm.CACHES.calls) == 2
    # the cache hit skips the checks, so the key must hold what they read: a scale with
    # another dtype at the same address is checked again (and refused)
    with pytest.raises(GemmError, match="scale_a has dtype bfloat16"):
        gm.gemm(a, b, d, scale_a=scale(0x5000, dtype="torch.bfloat16", device=DEV),
                scale_b=s2)


def test_gemm_hot_path_keys_fast_accum_by_type(fake_torch) -> None:
    """Found by the api fuzz target (a second call in one process): ``1.0 == True``, so a
    call with ``fast_accum=1.0`` hit the entry of a ``fast_accum=True`` call and skipped the
    check that refuses it."""
    a, b, d = _abd(256, 384, 512)
    assert gm.gemm(a, b, d, scale_a=1.0, scale_b=1.0, fast_accum=True) is d
    for fast in (1.0, 1):
        with pytest.raises(GemmError, match=f"fast_accum = {fast} is not a bool"):
            gm.gemm(a, b, d, scale_a=1.0, scale_b=1.0, fast_accum=fast)
    with pytest.raises(GemmError, match="fast_accum = 1.0 is not a bool"):  # fused: its own
        gm.gemm(a, b, d, scale_a=1.0, scale_b=1.0, fast_accum=1.0, activation="relu")


def test_gemm_fp8_float_scales_made_once(fake_torch) -> None:
    a, b, d = _abd(128, 256, 64)
    gm.gemm(a, b, d, scale_a=0.5, scale_b=2.0)
    gm.gemm(a, b, d, scale_a=0.5, scale_b=2.0)  # call-cache hit
    gm.gemm(a, b, d, scale_a=2.0, scale_b=0.5)  # new key; both tensors already made
    assert fake_torch.made == [0.5, 2.0]
    first, third = (_scales_of(p) for p in (fake_torch.launches[0][0],
                                            fake_torch.launches[2][0]))
    assert first == third[::-1] and first[0] != first[1]
    out = gm.gemm(a, b, scale_a=0.5, scale_b=2.0)  # out made as bf16
    assert out.dtype == "torch.bfloat16" and out.shape == (128, 256)


def test_gemm_bf16_call_key_has_no_scale_entries(fake_torch) -> None:
    a, b, d = _abd(256, 384, 512, dtype="torch.bfloat16")
    gm.gemm(a, b, d)
    (key,) = gm.CACHES.calls
    assert len(key) == 19  # pointers, shapes, strides, dtypes, devices, acc, provider,
    # fast_accum's type and value, out's five
    assert len(fake_torch.launches[0][0].data(5)) == 4  # K: the last of six arguments
    with pytest.raises(IndexError):
        fake_torch.launches[0][0].data(6)


# --------------------------------------------------------------------------- CLI


def test_cli_gemm_e4m3_assembles(tmp_path, capsys) -> None:
    from nvatom.cli import main

    ptx = tmp_path / "g.ptx"
    assert main(["gemm", "--m", "256", "--n", "384", "--k", "512", "--dtype", "e4m3",
                 "--emit", str(ptx)]) == 0
    out = capsys.readouterr().out
    assert "kernel   gemm_sm90_e4m3_bf16_" in out and "(sm90, PTX for sm_90a" in out
    text = ptx.read_text()
    assert ".param .u64 scale_a" in text and "e4m3.e4m3" in text


@pytest.mark.parametrize(("argv", "match"), [
    (["--b-major", "N"], "--dtype e4m3 --b-major MN: FP8 needs b K-major \\(column-major"),
    (["--b-major", "MN"], "--dtype e4m3 --b-major MN: FP8 needs b K-major \\(column-major"),
    (["--a-major", "M"], "--dtype e4m3 --a-major MN: FP8 needs a K-major \\(row-major"),
    (["--out-dtype", "f32"], "--dtype e4m3 --out-dtype f32: FP8 GEMMs write bf16"),
    (["--target", "sm_80"], "sm80: the SM80 kernel \\(mma.sync\\) has no FP8 path"),
    (["--k", "40"], "sm90: K = 40: a row of A"),
])
def test_cli_gemm_e4m3_errors(argv, match, capsys) -> None:
    import re

    from nvatom.cli import main

    base = ["gemm", "--m", "64", "--n", "64", "--k", "64", "--dtype", "e4m3"]
    assert main(base + argv) == 2
    assert re.search(match, capsys.readouterr().err)


# --------------------------------------------------------------------------- issue 18

E5M2 = "torch.float8_e5m2"


def test_row_wise_scales_pick_the_mode() -> None:
    a, b = a8(200, 64), b8(64, 96)
    for sa, sb in ((scale(shape=(200, 1)), scale(shape=(1, 96))),
                   (scale(shape=(200,)), scale(shape=(96,))),
                   (scale(shape=(200, 1)), scale(shape=(96,)))):
        *_, p = check_operands(a, b, scale_a=sa, scale_b=sb)
        assert p.scale_mode == "row" and not p.fast_accum
    *_, p = check_operands(a, b, scale_a=scale(shape=(1, 1)), scale_b=2.0, fast_accum=True)
    assert (p.scale_mode, p.fast_accum) == ("tensor", True)
    assert check_scales(None, None, "bf16", 0) == ""
    # M = 1: a (1, 1) scale_a is row-wise when scale_b is
    *_, p = check_operands(a8(1, 64), b, scale_a=scale(shape=(1, 1)), scale_b=scale(shape=(1, 96)))
    assert p.scale_mode == "row"


def test_mixed_fp8_types() -> None:
    *_, p = check_operands(a8(64, 64, dtype=E5M2), b8(64, 64), scale_a=1.0, scale_b=1.0)
    assert (p.in_dtype, p.b_dtype) == ("e5m2", "e4m3")
    *_, p = check_operands(a8(64, 64, dtype=E5M2), b8(64, 64, dtype=E5M2), scale_a=1.0,
                           scale_b=1.0)
    assert (p.in_dtype, p.b_dtype) == ("e5m2", "")
    with pytest.raises(GemmError, match="out is f32: e4m3 x e5m2 GEMMs write bf16"):
        check_operands(a8(64, 64), b8(64, 64, dtype=E5M2), mat(64, 64, dtype="torch.float32"),
                       scale_a=1.0, scale_b=1.0)
    with pytest.raises(TensorArgumentError, match="a is e5m2 but b is bf16"):
        check_operands(a8(64, 64, dtype=E5M2), mat(64, 64).T, scale_a=1.0, scale_b=1.0)


@pytest.mark.parametrize(("kw", "match"), [
    ({"scale_a": scale(shape=(64, 1)), "scale_b": 1.0},
     r"scale_a has shape \(64, 1\) and scale_b \(\): the scales are per-tensor"),
    ({"scale_a": scale(shape=(1, 64)), "scale_b": scale(shape=(1, 96))},
     r"scale_a has shape \(1, 64\) and scale_b \(1, 96\).*scale_a \(64, 1\), one per row of "
     r"a; scale_b \(1, 96\), one per column of b"),
    ({"scale_a": scale(shape=(64, 1)), "scale_b": scale(shape=(96, 1))},
     r"scale_b \(96, 1\)"),
    ({"scale_a": scale(shape=(63, 1)), "scale_b": scale(shape=(1, 96))}, r"\(63, 1\)"),
    ({"scale_a": scale(shape=(64, 1, 1)), "scale_b": scale(shape=(1, 96))}, r"\(64, 1, 1\)"),
    ({"scale_a": FakeTensor((64, 1), (2, 1), dtype="torch.float32"),
      "scale_b": scale(shape=(1, 96))},
     r"scale_a has strides \(2, 1\): row-wise scales are read as one contiguous vector"),
    ({"scale_a": scale(shape=(64, 1)), "scale_b": FakeTensor((1, 96), (96, 3),
                                                            dtype="torch.float32")},
     r"scale_b has strides \(96, 3\)"),
    ({"scale_a": scale(shape=(64, 1), dtype="torch.bfloat16"), "scale_b": scale(shape=(1, 96))},
     "scale_a has dtype bfloat16; scales are float32"),
    # the kernel reads scale_b in column pairs (ld.global.v2.f32 / cp.async 8 bytes): a view
    # at an odd element offset would fault on the GPU, so it is refused here
    ({"scale_a": scale(shape=(64, 1)), "scale_b": scale(0x7F0000100004, shape=(1, 96))},
     r"scale_b's data pointer 0x7f0000100004 is not 8-byte aligned"),
    ({"scale_a": 1.0, "scale_b": 1.0, "fast_accum": 1}, "fast_accum = 1 is not a bool"),
    ({"scale_a": 2**200 * 10**300, "scale_b": 1.0}, "scale_a = an integer of 1197 bits"),
    ({"scale_a": 1.0, "scale_b": -1e39}, r"scale_b = -1e\+39: a number scale must be finite"),
])
def test_scale_and_option_errors(kw, match) -> None:
    with pytest.raises(GemmError, match=match):
        check_operands(a8(64, 32), b8(32, 96), **kw)


def test_fast_accum_needs_fp8() -> None:
    with pytest.raises(GemmError, match="fast_accum=True given but a and b are bf16: it "
                       "selects FP8's WGMMA-only accumulation"):
        check_operands(mat(64, 64), mat(64, 64), fast_accum=True)


def test_fp8_plans_per_mode() -> None:
    """Each FP8 option plans its own kernel: promoted by default, fast on request, row-wise
    scales by their shapes, e5m2 by the operands' types; the parameter list is the same."""
    names = set()
    for kw in ({}, {"fast_accum": True}):
        for sa, sb in ((1.0, 1.0), (scale(shape=(256, 1)), scale(shape=(1, 384)))):
            for bt in (E4M3, E5M2):
                *_, p = check_operands(a8(256, 512), b8(512, 384, dtype=bt), scale_a=sa,
                                       scale_b=sb, **kw)
                launch, _ = plan(p, (9, 0), PROVIDERS)
                name = launch.source.name
                assert ("_pr1n2t2" in name) != bool(kw), name
                assert name.endswith("_rowscale_staged") == (p.scale_mode == "row")
                assert ("e4m3xe5m2" in name) == (bt == E5M2)
                assert launch.source.params[-2:] == (("scale_a", "u64"), ("scale_b", "u64"))
                names.add(name)
    assert len(names) == 8


def test_gemm_fast_accum_is_part_of_the_call_key(fake_torch) -> None:
    a, b, d = _abd(256, 384, 512)
    gm.gemm(a, b, d, scale_a=1.0, scale_b=1.0)
    gm.gemm(a, b, d, scale_a=1.0, scale_b=1.0, fast_accum=True)
    gm.gemm(a, b, d, scale_a=1.0, scale_b=1.0)  # a hit
    assert len(gm.CACHES.calls) == 2 and len(fake_torch.launches) == 3
    sa, sb = scale(0x5000, shape=(256, 1), device=DEV), scale(0x6000, shape=(1, 384), device=DEV)
    gm.gemm(a, b, d, scale_a=sa, scale_b=sb)
    assert _scales_of(fake_torch.launches[-1][0]) == (0x5000, 0x6000)
