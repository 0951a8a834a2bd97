"""``nvatom.gemm(..., epilogue=hook, epilogue_args=...)`` without a GPU.

Duck-typed tensors and the stand-in ``torch`` of tests/test_gemm_api_fp8.py: every refusal
of :func:`nvatom.gemm.check_user_epilogue` names the value; the hook's values follow the
built-in terms' in the kernel's parameter order (packed after M, N, K and the FP8 scales);
the fused call cache keys the hook (a different hook is a different kernel and call, an
equal one a hit) and its arguments; a strided hook tensor is read through a copy; K = 0
runs the kernel on a zero product; ``prepare_gemm_sm90`` refuses arguments of the wrong
kind; the torch operator refuses a hook.
"""

from __future__ import annotations

import importlib
import struct
import sys

import pytest

from nvatom.gemm import GemmError, GemmProblem, check_epilogue
from nvatom.kernels.sm90.fusion import EpilogueSpec, UserEpilogue

from .kernels.user_hooks import CAUSAL, LEAKY, RELU2
from .runtime.test_launch import FakeDevice, FakeTensor, mat
from .test_gemm_api_fp8 import DEV, E4M3, _abd, fake_torch, py_encoder, scale
from .test_gemm_epilogue import _Copyable, vec

gm = importlib.import_module("nvatom.gemm")
__all__ = ["fake_torch", "py_encoder"]  # fixtures used below

M, N, K = 256, 384, 512
P = GemmProblem(M, N, K, "bf16", "bf16", "K", "N")
ROWS = FakeTensor((M, 1), (1, 1), dtype="torch.float32", ptr=0x7F0000410000)


def test_values_follow_the_built_in_terms() -> None:
    spec, vals = check_epilogue(P, 0, bias=vec(N), epilogue=LEAKY,
                                epilogue_args={"slope": 0.25})
    assert spec == EpilogueSpec(bias="col", bias_dtype="bf16", user=LEAKY)
    assert vals == (0x7F0000400000, 0.25)
    assert spec.params[-1] == ("u_slope", "f32")
    spec, vals = check_epilogue(P, 0, epilogue=CAUSAL, epilogue_args={
        "rs": ROWS, "scale": vec(N, ptr=0x7F0000420000)})
    assert spec == EpilogueSpec(user=CAUSAL) and vals == (0x7F0000420000, 0x7F0000410000)
    # (1, N) and (M,) forms; a hook without parameters takes epilogue_args None or {}
    _, vals = check_epilogue(P, 0, epilogue=CAUSAL, epilogue_args={
        "rs": FakeTensor((M,), (1,), dtype="torch.float32", ptr=0x1000),
        "scale": FakeTensor((1, N), (N, 1), ptr=0x2000)})
    assert vals == (0x2000, 0x1000)
    assert check_epilogue(P, 0, epilogue=RELU2, epilogue_args={}) == (
        EpilogueSpec(user=RELU2), ())


@pytest.mark.parametrize(("kw", "match"), [
    ({"epilogue_args": {"slope": 1.0}}, r"epilogue_args=\{'slope': 1.0\} given without "
                                        r"epilogue"),
    ({"epilogue": lambda k, x, r, c: None}, r"epilogue=<function .* is not a UserEpilogue"),
    ({"epilogue": "relu"}, r"epilogue='relu' is not a UserEpilogue .* the built-in terms are "
                           r"the arguments bias, activation"),
    ({"epilogue": LEAKY}, r"epilogue_args for user epilogue 'leaky' \(parameters: slope\): "
                          r"missing slope"),
    ({"epilogue": LEAKY, "epilogue_args": [0.5]}, r"epilogue_args=\[0.5\] is not a mapping"),
    ({"epilogue": LEAKY, "epilogue_args": {"slope": 1.0, "alpha": 2.0}},
     r"\(parameters: slope\): unknown 'alpha'"),
    ({"epilogue": RELU2, "epilogue_args": {"x": 1}}, r"\(parameters: none\): unknown 'x'"),
    ({"epilogue": LEAKY, "epilogue_args": {"slope": float("inf")}},
     r"epilogue_args\['slope'\]=inf is not a finite real number .*user epilogue 'leaky'"),
    ({"epilogue": LEAKY, "epilogue_args": {"slope": True}}, r"\['slope'\]=True is not a"),
    ({"epilogue": CAUSAL, "epilogue_args": {"rs": ROWS, "scale": vec(N, "torch.float32")}},
     r"epilogue_args\['scale'\] has dtype float32; the fused epilogue takes bf16 here \(as "
     r"user epilogue 'causal' declares it\)"),
    ({"epilogue": CAUSAL, "epilogue_args": {"rs": ROWS, "scale": vec(M)}},
     r"epilogue_args\['scale'\] has shape \(256,\): user epilogue 'causal' reads one value "
     r"per col \(\(384,\) or \(1, 384\)\)"),
    ({"epilogue": CAUSAL, "epilogue_args": {"rs": FakeTensor((1, M), (M, 1),
                                                             dtype="torch.float32"),
                                            "scale": vec(N)}},
     r"\['rs'\] has shape \(1, 256\): .* per row \(\(256,\) or \(256, 1\)\)"),
    ({"epilogue": CAUSAL, "epilogue_args": {"rs": ROWS, "scale": 2.0}},
     r"epilogue_args\['scale'\] is a float, not a torch CUDA tensor"),
    ({"epilogue": CAUSAL, "epilogue_args": {"rs": ROWS, "scale": vec(
        N, device=FakeDevice("cuda", 1))}}, r"\['scale'\] is on cuda:1, the operands on cuda:0"),
    ({"epilogue": CAUSAL, "epilogue_args": {"rs": ROWS, "scale": FakeTensor((N,), (2,))}},
     r"\['scale'\] with shape \(384,\) has strides \(2,\): its elements must be contiguous"),
    ({"epilogue": CAUSAL, "epilogue_args": {"rs": ROWS, "scale": vec(N, ptr=0x1001)}},
     r"\['scale'\]'s data pointer 0x1001 is not 2-byte aligned"),
])
def test_refusals_name_the_value(kw, match) -> None:
    with pytest.raises(GemmError, match=match):
        check_epilogue(P, 0, **kw)


# --------------------------------------------------------------------------- nvatom.gemm


def test_gemm_packs_the_hook_arguments_last(fake_torch) -> None:
    a, b, d = _abd(M, N, K, dtype="torch.bfloat16")
    bias = vec(N, ptr=0x7F0000500000, device=DEV)
    gm.gemm(a, b, d, bias=bias, epilogue=LEAKY, epilogue_args={"slope": 0.25})
    params, _ = fake_torch.launches[-1]
    assert struct.unpack("<Qf", params.data(6) + params.data(7)) == (0x7F0000500000, 0.25)
    a8, b8, d8 = _abd(M, N, K)
    s1, s2 = scale(0x5000, device=DEV), scale(0x6000, device=DEV)
    rs = FakeTensor((M, 1), (1, 1), dtype="torch.float32", ptr=0x7F0000600000, device=DEV)
    gm.gemm(a8, b8, d8, scale_a=s1, scale_b=s2, activation="relu", epilogue=CAUSAL,
            epilogue_args={"scale": vec(N, ptr=0x7F0000700000, device=DEV), "rs": rs})
    params, _ = fake_torch.launches[-1]
    assert struct.unpack("<4Q", b"".join(params.data(i) for i in (6, 7, 8, 9))) == (
        0x5000, 0x6000, 0x7F0000700000, 0x7F0000600000)
    (_, spec, _), = [k for k in gm.CACHES.fused_plans if k[1].user is CAUSAL]
    assert spec == EpilogueSpec(activation="relu", user=CAUSAL)


def _scaled(by: float):
    def fn(k, x, row, col):
        k.ins("mul.rn.f32", x, x, by)
    return fn


def test_call_cache_keys_the_hook(fake_torch) -> None:
    """The same hook (or an equal one: same name and code) hits the fused call cache; a
    different hook, or other arguments, is a new call with its own kernel."""
    a, b, d = _abd(M, N, K, dtype="torch.bfloat16")
    h2, h2_again, h3 = (UserEpilogue("s", _scaled(v)) for v in (2.0, 2.0, 3.0))
    gm.gemm(a, b, d, epilogue=h2)
    gm.gemm(a, b, d, epilogue=h2_again)
    ls = fake_torch.launches
    assert len(ls) == 2 and ls[1][0] is ls[0][0]
    assert len(gm.CACHES.fused_calls) == 1 and len(gm.CACHES.fused_plans) == 1
    gm.gemm(a, b, d, epilogue=h3)
    assert len(gm.CACHES.fused_calls) == 2 and len(gm.CACHES.fused_plans) == 2
    kernels = {k[1].user.fingerprint for k in gm.CACHES.fused_plans}
    assert kernels == {h2.fingerprint, h3.fingerprint}
    for slope in (0.5, 0.5, 0.75):
        gm.gemm(a, b, d, epilogue=LEAKY, epilogue_args={"slope": slope})
    assert len(gm.CACHES.fused_calls) == 4
    assert struct.unpack("<f", ls[-1][0].data(6)) == (0.75,)
    with pytest.raises(GemmError, match=r"slope'\]=nan"):  # checked, not served from cache
        gm.gemm(a, b, d, epilogue=LEAKY, epilogue_args={"slope": float("nan")})


def test_strided_hook_tensor_is_read_through_a_copy(fake_torch) -> None:
    a, b, d = _abd(M, N, K, dtype="torch.bfloat16")
    strided = _Copyable((N,), (2,), ptr=0x7F0000600000, device=DEV)
    rs = FakeTensor((M, 1), (1, 1), dtype="torch.float32", ptr=0x7F0000800000, device=DEV)
    args = {"scale": strided, "rs": rs}
    gm.gemm(a, b, d, epilogue=CAUSAL, epilogue_args=args)
    params, _ = fake_torch.launches[-1]
    assert struct.unpack("<2Q", params.data(6) + params.data(7)) == (0x7F0000700000,
                                                                       0x7F0000800000)
    assert args["scale"] is strided and not gm.CACHES.fused_calls  # copies are not cached


def test_k_zero_runs_the_kernel_on_zeros(fake_torch, monkeypatch) -> None:
    made = []

    def zeros(shape, dtype=None, device=None):
        made.append(shape)
        return mat(*shape, dtype=dtype, ptr=0x7F0000900000 + 0x100000 * len(made), device=DEV)

    monkeypatch.setattr(sys.modules["torch"], "zeros", zeros, raising=False)
    a = mat(M, 0, dtype="torch.bfloat16", ptr=1 << 30, device=DEV)
    b = mat(0, N, dtype="torch.bfloat16", ptr=2 << 30, device=DEV)
    d = mat(M, N, ptr=3 << 30, device=DEV)
    gm.gemm(a, b, d, epilogue=LEAKY, epilogue_args={"slope": 0.5})
    assert made == [(M, 16), (16, N)]
    params, _ = fake_torch.launches[-1]
    assert struct.unpack("<3I", b"".join(params.data(i) for i in (3, 4, 5))) == (M, N, 16)
    assert struct.unpack("<f", params.data(6)) == (0.5,)


def test_gemm_refuses_a_hook_elsewhere(fake_torch) -> None:
    a, b, d = _abd(M, N, K, dtype="torch.bfloat16")
    with pytest.raises(GemmError, match="provider='sm80' with a fused epilogue: only the SM90 "
                                        "kernel .* and a user epilogue"):
        gm.gemm(a, b, d, epilogue=RELU2, provider="sm80")
    gm.CACHES.capabilities[0] = (8, 0)
    with pytest.raises(GemmError, match=rf"a fused epilogue \(ep_{RELU2.tag}\) runs on the "
                                        r"SM90 kernel only"):
        gm.gemm(a, b, d, epilogue=RELU2)
    assert fake_torch.launches == []


def test_prepare_gemm_sm90_checks_argument_kinds() -> None:
    from nvatom.gemm_providers import _epilogue_blob
    from nvatom.kernels.gemm_sm90 import GemmSm90Error

    assert _epilogue_blob("u_slope", "f32", 0.5).value == 0.5
    assert _epilogue_blob("u_scale", "u64", vec(N, ptr=0x1234)).value == 0x1234
    assert _epilogue_blob("ldr", "u32", 7).value == 7
    for name, ty, v, match in [
        ("u_slope", "f32", "0.5", r"u_slope \(.f32\) = '0.5' is not a finite float32"),
        ("u_scale", "u64", 1.5, r"u_scale \(.u64\) = 1.5 is not an address"),
        ("ldr", "u32", -1, r"ldr \(.u32\) = -1 is not a 32-bit unsigned int"),
    ]:
        with pytest.raises(GemmSm90Error, match=match):
            _epilogue_blob(name, ty, v)


def test_torch_operator_refuses_a_hook() -> None:
    from nvatom.torch_ops import TorchOpsError, gemm_epilogue

    with pytest.raises(TorchOpsError, match="gemm_epilogue cannot carry a user epilogue: .* "
                                            r"call nvatom.gemm\(a, b, epilogue=hook"):
        gemm_epilogue(mat(M, K), mat(K, N), epilogue=RELU2)
    with pytest.raises(TorchOpsError, match="cannot carry a user epilogue"):
        gemm_epilogue(mat(M, K), mat(K, N), epilogue_args={"slope": 1.0})


def test_e4m3_hook_is_planned_on_the_fp8_kernel(fake_torch) -> None:
    a, b, d = _abd(M, N, K, dtype=E4M3)
    gm.gemm(a, b, d, scale_a=1.0, scale_b=2.0, epilogue=RELU2)
    (_, spec, _), = list(gm.CACHES.fused_plans)
    launch, _ = next(iter(gm.CACHES.fused_plans.values()))
    assert spec.user is RELU2 and RELU2.tag in launch.source.name
    assert "e4m3" in launch.source.name
