"""``nvatom.gemm``'s fused epilogue arguments without a GPU (issue 25 item 3).

Duck-typed tensors (tests/runtime/test_launch.py) and the stand-in ``torch`` of
tests/test_gemm_api_fp8.py: every refusal of :func:`nvatom.gemm.check_epilogue` names the
value; the EpilogueSpec it makes (bias kind from the shape, beta's default, alpha only when
not 1); the packed kernel arguments (the epilogue's values after M, N, K and the FP8
scales, in the spec's ``params`` order, as the kernel declares them); the dispatch (SM90
only: another capability, provider or the grouped kernel are refused; a fused bf16 problem
keeps the planner's tile unless ptxas spills it, then the 128 x 128 ping-pong one); the
torch operator's fake (shapes only).
"""

from __future__ import annotations

import dataclasses
import importlib
import struct

import pytest

from nvatom import gemm_providers as gp
from nvatom.gemm import GemmError, GemmProblem, check_epilogue, check_operands
from nvatom.gemm_providers import Sm90Provider
from nvatom.kernels import gemm_sm90 as sm90
from nvatom.kernels.sm90.fusion import EpilogueSpec

from .runtime.test_launch import FakeTensor, mat
from .test_gemm_api_fp8 import DEV, E4M3, _abd, a8, b8, fake_torch, py_encoder, scale

gm = importlib.import_module("nvatom.gemm")
__all__ = ["fake_torch", "py_encoder"]  # fixtures used below

M, N, K = 256, 384, 512
P = GemmProblem(M, N, K, "bf16", "bf16", "K", "N")


def vec(n: int, dtype: str = "torch.bfloat16", ptr: int = 0x7F0000400000, **kw) -> FakeTensor:
    return FakeTensor((n,), (1,), dtype=dtype, ptr=ptr, **kw)


# --------------------------------------------------------------------------- check_epilogue


def test_spec_from_arguments() -> None:
    c, r = mat(M, N, ptr=0x1000), mat(M, N, ptr=0x2000)
    spec, vals = check_epilogue(P, 0, bias=vec(N), activation="gelu", alpha=0.5, c=c,
                                residual=r)
    assert spec == EpilogueSpec(alpha=True, c=True, bias="col", bias_dtype="bf16",
                                activation="gelu", residual=True)
    # alpha, beta (1: c given, as torch.addmm), c, ldc, bias, residual, ldr
    assert vals == (0.5, 1.0, 0x1000, N, 0x7F0000400000, 0x2000, N)
    spec, vals = check_epilogue(P, 0, bias=FakeTensor((M, 1), (1, 1), dtype="torch.float32"))
    assert spec == EpilogueSpec(bias="row", bias_dtype="f32") and len(vals) == 1
    spec, _ = check_epilogue(P, 0, bias=FakeTensor((1, N), (N, 1)))
    assert spec.bias == "col"
    # beta 0 does not read c; alpha 1 adds no parameter: nothing to fuse
    assert check_epilogue(P, 0, c=mat(M, N), beta=0.0) == (None, ())
    spec, vals = check_epilogue(P, 0, activation="relu", alpha=1.0)
    assert spec == EpilogueSpec(activation="relu") and vals == ()
    # a residual broadcast from one row (row stride 0) is read as it lies
    spec, vals = check_epilogue(P, 0, residual=FakeTensor((M, N), (0, 1), ptr=0x3000))
    assert vals == (0x3000, 0)


@pytest.mark.parametrize(("kw", "match"), [
    ({"activation": "tanh"}, r"activation='tanh' is not one of None, 'relu', 'gelu', "
                             r"'gelu_tanh', 'silu'"),
    ({"activation": "relu", "alpha": float("nan")}, r"alpha=nan is not a finite real"),
    ({"alpha": True}, r"alpha=True is not a finite real number"),
    # found by the api fuzz target: float(10**400) raised OverflowError, alpha=None TypeError
    ({"alpha": 10**400}, r"alpha=an integer of 1329 bits is not a finite real number within "
                         r"float32's range"),
    ({"alpha": None}, r"alpha=None is not a finite real number"),
    ({"c": mat(M, N), "beta": -(10**400)}, r"beta=an integer of 1329 bits is not a finite"),
    ({"alpha": 1e39}, r"alpha=1e\+39 is not a finite real number within float32's range"),
    ({"beta": 2.0}, r"beta=2.0 given without c"),
    ({"bias": vec(M + 1)}, r"bias has shape \(257,\): a bias is per column, \(384,\) or "
                           r"\(1, 384\) .* or per row, \(256, 1\)"),
    ({"bias": vec(N, dtype="torch.float16")}, r"bias has dtype float16; the fused epilogue "
                                              r"takes bf16 or f32"),
    ({"bias": FakeTensor((N,), (2,))}, r"bias with shape \(384,\) has strides \(2,\): .* "
                                       r"bias.contiguous\(\)"),
    ({"bias": vec(N, ptr=0x1002)}, r"bias's data pointer 0x1002 is not 4-byte aligned"),
    ({"bias": vec(N).__class__((N,), (1,), device=DEV.__class__("cpu", None))},
     r"bias is on device .*not a CUDA device"),
    ({"c": mat(M, N - 2)}, r"c has shape \(256, 382\), the product is \(256, 384\)"),
    ({"c": mat(M, N, dtype="torch.float32")}, r"c has dtype float32; the fused epilogue "
                                              r"takes bf16 here"),
    ({"c": mat(N, M).T}, r"c has strides \(1, 256\): .* row-major"),
    ({"residual": FakeTensor((M, N), (N + 1, 1))}, r"residual has strides \(385, 1\): .*even"),
    ({"residual": mat(M, N, ptr=0x1002)}, r"residual's data pointer 0x1002 is not 4-byte"),
    ({"residual": 3.0}, r"residual is a float, not a torch CUDA tensor"),
])
def test_refusals_name_the_value(kw, match) -> None:
    with pytest.raises(GemmError, match=match):
        check_epilogue(P, 0, **kw)


def test_other_device_is_named() -> None:
    from .runtime.test_launch import FakeDevice

    with pytest.raises(GemmError, match="bias is on cuda:1, the operands on cuda:0"):
        check_epilogue(P, 0, bias=vec(N, device=FakeDevice("cuda", 1)))


def test_f32_output_takes_f32_operands() -> None:
    p = dataclasses.replace(P, out_dtype="f32")
    spec, _ = check_epilogue(p, 0, c=mat(M, N, dtype="torch.float32"),
                             bias=vec(N, dtype="torch.float32", ptr=0x1008))
    assert spec.bias_dtype == "f32" and spec.c
    with pytest.raises(GemmError, match="bias's data pointer 0x1004 is not 8-byte aligned"):
        check_epilogue(p, 0, bias=vec(N, dtype="torch.float32", ptr=0x1004))
    with pytest.raises(GemmError, match="c has dtype bfloat16; the fused epilogue takes f32"):
        check_epilogue(p, 0, c=mat(M, N))


# --------------------------------------------------------------------------- planning


def test_fused_tile_falls_back_where_ptxas_spills(monkeypatch) -> None:
    spec = EpilogueSpec(bias="col", bias_dtype="bf16", activation="relu")
    big = GemmProblem(8192, 8192, 8192, "bf16", "bf16", "K", "N")
    plain = Sm90Provider()._config(big)
    assert (plain.schedule, plain.block_n) == ("pingpong", 192)  # plain_schedule at 8192^3
    fused = Sm90Provider(epilogue=spec)._config(big)
    assert fused == dataclasses.replace(plain, epilogue=spec)  # bias + relu: no spills
    heavy = EpilogueSpec(c=True, residual=True)  # C and residual: ptxas spills 128 x 192
    fused = Sm90Provider(epilogue=heavy)._config(big)
    assert (fused.schedule, fused.block_n, fused.stages) == ("pingpong", 128, 6)
    # where ptxas cannot say (none installed), the safe tile
    monkeypatch.setattr(gp, "assemble", lambda *a, **k: (_ for _ in ()).throw(OSError()))
    gp._spills.cache_clear()
    fused = Sm90Provider(epilogue=spec)._config(big)
    assert fused.block_n == 128
    gp._spills.cache_clear()
    f8 = GemmProblem(8192, 8192, 8192, "e4m3", "bf16", "K", "K", scale_mode="row")
    assert Sm90Provider(epilogue=spec)._config(f8) == dataclasses.replace(
        Sm90Provider()._config(f8), epilogue=spec)


def test_packed_arguments_follow_the_kernel_params(py_encoder) -> None:
    ai, bi, oi, p = check_operands(a8(M, K, ptr=1 << 30), b8(K, N, ptr=2 << 30),
                                   mat(M, N, ptr=3 << 30), scale_a=1.0, scale_b=1.0)
    spec = EpilogueSpec(alpha=True, bias="col", bias_dtype="f32", residual=True)
    launch = Sm90Provider(epilogue=spec).plan(p, "sm_90a")
    assert [n for n, _ in launch.source.params][-6:] == [
        "scale_a", "scale_b", "alpha", "bias", "residual", "ldr"]
    packed = launch.packed(ai, bi, oi, p, (0x1000, 0x2000, 0.25, 0x3000, 0x4000, 1024))
    assert struct.unpack("<2Q", packed.data(6) + packed.data(7)) == (0x1000, 0x2000)
    assert struct.unpack("<f", packed.data(8)) == (0.25,)
    assert struct.unpack("<2QI", packed.data(9) + packed.data(10) + packed.data(11)) == (
        0x3000, 0x4000, 1024)
    with pytest.raises(sm90.GemmSm90Error, match=r"takes scale_a, scale_b, epi:alpha, "
                                                 r"epi:bias, epi:residual, epi:ldr after M"):
        launch.args(ai, bi, oi, p, (0x1000, 0x2000))


# --------------------------------------------------------------------------- nvatom.gemm


@pytest.fixture
def fused_torch(fake_torch, monkeypatch):
    monkeypatch.setattr(gm, "CACHES", gm.GemmCaches())
    return fake_torch


def test_gemm_launches_the_fused_kernel(fused_torch) -> None:
    a, b, d = _abd(M, N, K, dtype="torch.bfloat16")
    bias = vec(N, ptr=0x7F0000500000, device=DEV)
    assert gm.gemm(a, b, d, bias=bias, activation="silu") is d
    params, stream = fused_torch.launches[-1]
    assert stream == 77 and struct.unpack("<Q", params.data(6)) == (0x7F0000500000,)
    # the plain call is unchanged: no epilogue arguments
    gm.gemm(a, b, d)
    assert len(fused_torch.launches) == 2
    (key, _), = [(k, v) for k, v in gm.CACHES.fused_plans.items()]
    assert key[1] == EpilogueSpec(bias="col", bias_dtype="bf16", activation="silu")


def test_gemm_fp8_epilogue_after_the_scales(fused_torch) -> None:
    a, b, d = _abd(M, N, K, dtype=E4M3)
    c = mat(M, N, ptr=0x7F0000600000, device=DEV)
    s1, s2 = scale(0x5000, device=DEV), scale(0x6000, device=DEV)
    gm.gemm(a, b, d, scale_a=s1, scale_b=s2, c=c, beta=0.5)
    params, _ = fused_torch.launches[-1]
    assert struct.unpack("<2Q", params.data(6) + params.data(7)) == (0x5000, 0x6000)
    assert struct.unpack("<fQI", params.data(8) + params.data(9) + params.data(10)) == (
        0.5, 0x7F0000600000, N)


def test_gemm_refuses_what_does_not_fuse(fused_torch, monkeypatch) -> None:
    a, b, d = _abd(M, N, K, dtype="torch.bfloat16")
    with pytest.raises(GemmError, match="provider='sm80' with a fused epilogue: only the SM90"):
        gm.gemm(a, b, d, activation="relu", provider="sm80")
    gm.CACHES.capabilities[0] = (8, 0)
    with pytest.raises(GemmError, match=r"a fused epilogue \(ep_relu\) runs on the SM90 kernel "
                                        r"only \(sm_90a, compute capability 9.0\); this GPU is "
                                        r"compute capability 8.0"):
        gm.gemm(a, b, d, activation="relu")
    assert fused_torch.launches == []


def test_plan_refusal_names_the_kernel_reason() -> None:
    p = GemmProblem(M, N, K, "bf16", "bf16", "M", "N")  # column-major a
    with pytest.raises(GemmError, match=r"ep_relu\) runs on the SM90 kernel only .* which "
                                        r"cannot run this GEMM: needs a row-major"):
        gm._fused_plan(p, EpilogueSpec(activation="relu"), (9, 0))


def test_torch_op_fake_checks_shapes() -> None:
    from nvatom import torch_ops as T

    spec = T.epilogue_output_spec((M, K), "bfloat16", (K, N), "bfloat16", bias_shape=(M, 1),
                                  c_shape=(M, N), residual_shape=(M, N))
    assert spec == ((M, N), "bfloat16")
    with pytest.raises(GemmError, match=r"residual has shape \(1, 384\), the product is"):
        T.epilogue_output_spec((M, K), "bfloat16", (K, N), "bfloat16",
                               residual_shape=(1, N))
    with pytest.raises(GemmError, match=r"bias has shape \(256,\): a bias is per column"):
        T.epilogue_output_spec((M, K), "bfloat16", (K, N), "bfloat16", bias_shape=(M,))
    names = [s.name for s in T.OPS]
    assert "gemm_epilogue" in names


@dataclasses.dataclass
class _Copyable(FakeTensor):
    """A stand-in tensor that ``nvatom.gemm`` can copy (``new_empty(...).copy_(t)``)."""

    source: object = None

    def new_empty(self, shape):
        strides = (shape[1], 1) if len(shape) == 2 else (1,)
        return _Copyable(tuple(shape), strides, dtype=self.dtype, ptr=0x7F0000700000,
                         device=self.device)

    def copy_(self, other):
        self.source = other
        return self


def test_gemm_reads_unaligned_epilogue_tensors_through_a_copy(fused_torch) -> None:
    """``check_epilogue`` refuses a C with an odd row stride and a strided bias; ``nvatom.gemm``
    reads contiguous copies of them instead."""
    a, b, d = _abd(M, N, K, dtype="torch.bfloat16")
    c = _Copyable((M, N), (N + 1, 1), ptr=0x7F0000600000, device=DEV)
    with pytest.raises(GemmError, match=r"c has strides \(385, 1\)"):
        check_epilogue(P, 0, c=c)
    gm.gemm(a, b, d, c=c, activation="relu")
    params, _ = fused_torch.launches[-1]
    assert struct.unpack("<fQI", params.data(6) + params.data(7) + params.data(8)) == (
        1.0, 0x7F0000700000, N)


def test_gemm_checks_odd_alphas(fused_torch) -> None:
    a, b, d = _abd(M, N, K, dtype="torch.bfloat16")
    with pytest.raises(GemmError, match="alpha=True is not a finite real number"):
        gm.gemm(a, b, d, alpha=True)
    with pytest.raises(GemmError, match=r"alpha=\[2.0\] is not a finite real number"):
        gm.gemm(a, b, d, alpha=[2.0])
    gm.gemm(a, b, d, alpha=1)  # an int 1 is the plain GEMM
    assert len(fused_torch.launches) == 1 and not gm.CACHES.fused_plans


def test_fused_call_cache(fused_torch, monkeypatch) -> None:
    """A repeated fused call launches from the cache with the first call's arguments; a
    change in anything the checks read (here the bias's address, alpha) is checked again;
    copies made for the kernel are never cached."""
    a, b, d = _abd(M, N, K, dtype="torch.bfloat16")
    bias = vec(N, ptr=0x7F0000500000, device=DEV)
    for _ in range(3):
        gm.gemm(a, b, d, bias=bias, activation="gelu", alpha=2.0)
    ls = fused_torch.launches
    assert len(ls) == 3 and ls[1][0] is ls[0][0] and ls[2][0] is ls[0][0]
    assert len(gm.CACHES.fused_calls) == 1
    gm.gemm(a, b, d, bias=vec(N, ptr=0x7F0000600000, device=DEV), activation="gelu",
            alpha=2.0)
    gm.gemm(a, b, d, bias=bias, activation="gelu", alpha=3.0)
    assert len(gm.CACHES.fused_calls) == 3
    assert struct.unpack("<f", ls[-1][0].data(6)) == (3.0,)
    with pytest.raises(GemmError, match="alpha=nan"):  # checked, not served from the cache
        gm.gemm(a, b, d, bias=bias, activation="gelu", alpha=float("nan"))
    c = _Copyable((M, N), (N + 1, 1), ptr=0x7F0000600000, device=DEV)
    gm.gemm(a, b, d, c=c)
    assert len(gm.CACHES.fused_calls) == 3  # read through a copy: not cached
