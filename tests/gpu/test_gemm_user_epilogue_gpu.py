"""User epilogues on an sm_90 GPU against torch in float64.

The hooks of tests/kernels/user_hooks.py (squared ReLU; leaky ReLU with an f32 parameter;
a causal mask with a per-column bf16 and a per-row f32 scale; row/column arithmetic; a
column tensor named ``col``), each
after built-in terms (bias and an activation; alpha, C and residual), with bf16 and e4m3
operands (per-tensor scales), on the ragged and multi-tile shapes of
tests/gpu/test_gemm_epilogue_gpu.py; fresh random inputs per case, ``out`` poisoned with NaN.
Also the kernel-builder path (``build_gemm_sm90`` + ``prepare_gemm_sm90``, the hook's value
passed by position), K = 0 (the kernel on a zero product) and the call cache (a second hook
on the same tensors runs its own kernel).

Reference: tests/gpu/test_gemm_epilogue_gpu.py's float64 value ``y`` of the built-in terms
and its per-element tolerance ``tol``, then the hook's float64 reference
(``user_hooks.reference``) with the tolerance carried through it: squared ReLU ``2 |y| tol +
tol^2``, leaky ReLU ``tol`` (slope <= 1), the causal scales ``|scale rs| tol``, the ramp
``tol``; plus ``2^-21`` of the hook's result and its operands for its own f32 roundings;
then the output's rounding (``_check``).
"""

from __future__ import annotations

import dataclasses
import zlib

import pytest

from tests.gpu.test_gemm_epilogue_gpu import (
    E4M3,
    SHAPES,
    _check,
    _operands,
    _reference,
    _require_sm90,
    _terms,
)
from tests.kernels.user_hooks import HOOKS, reference

pytestmark = pytest.mark.gpu

torch = pytest.importorskip("torch")

import nvatom  # noqa: E402

DTYPES = {"bf16": torch.bfloat16, "e4m3": E4M3}
#: built-in terms before each hook (tests/gpu/test_gemm_epilogue_gpu.py's names)
TERMS = {"relu2": ((), None), "leaky": (("bias_col",), "gelu"),
         "causal": (("alpha", "c", "residual"), None), "ramp": (("bias_row",), "silu"),
         "colidx": (("residual",), "relu")}


def _hook_args(name: str, m: int, n: int, gen) -> tuple[dict, dict]:
    """(nvatom.gemm's epilogue_args, the float64 reference's arguments)."""
    if name == "leaky":
        return {"slope": 0.125}, {"slope": 0.125}
    if name == "colidx":
        t = torch.randn(n, device="cuda", generator=gen) / n
        return {"col": t}, {"col": t.double()}
    if name != "causal":
        return {}, {}
    scale = (torch.rand(n, device="cuda", generator=gen) + 0.5).bfloat16()
    rs = torch.rand(m, 1, device="cuda", generator=gen).float() + 0.5
    return {"scale": scale, "rs": rs}, {"scale": scale.double(), "rs": rs.double().view(-1)}


def _hook_reference(name: str, y, tol, args: dict):
    """(the hook's float64 result on ``y``, its tolerance from ``y``'s ``tol``)."""
    m, n = y.shape
    rows = torch.arange(m, device=y.device).view(-1, 1)
    cols = torch.arange(n, device=y.device).view(1, -1)
    out = reference(name, y, rows, cols, args, torch)
    if name == "relu2":
        carried = 2 * y.abs() * tol + tol * tol
    elif name == "causal":
        carried = (args["scale"][cols] * args["rs"][rows]).abs() * tol
    else:
        carried = tol
    extra = cols * args["col"][cols].abs() if name == "colidx" else 0
    return out, carried + 2.0**-21 * (out.abs() + y.abs() + cols + extra) + 1e-30


@pytest.mark.parametrize("name", sorted(HOOKS))
@pytest.mark.parametrize("dt", sorted(DTYPES))
def test_hook_matches_float64(dt, name) -> None:
    _require_sm90()
    dtype = DTYPES[dt]
    gen = torch.Generator(device="cuda").manual_seed(zlib.crc32(repr((dt, name)).encode()))
    terms, act = TERMS[name]
    for m, n, k in SHAPES:
        a, b, sa, sb = _operands(m, n, k, dtype, gen)
        kw = _terms(m, n, torch.bfloat16, gen, set(terms))
        args, ref_args = _hook_args(name, m, n, gen)
        out = torch.full((m, n), float("nan"), dtype=torch.bfloat16, device="cuda")
        nvatom.gemm(a, b, out, scale_a=sa, scale_b=sb, activation=act, epilogue=HOOKS[name],
                    epilogue_args=args, **kw)
        torch.cuda.synchronize()
        y, tol = _reference(a, b, sa, sb, act, **kw)
        _check(out, *_hook_reference(name, y, tol, ref_args))


def test_builder_path_with_a_parameter() -> None:
    """build_gemm_sm90 + prepare_gemm_sm90 with the leaky hook and its slope by position,
    on a ragged bf16 problem; then the causal hook (row/column, two tensors) on e4m3."""
    from nvatom.gemm_providers import prepare_gemm_sm90
    from nvatom.kernels.gemm_sm90 import default_config
    from nvatom.kernels.sm90.fusion import EpilogueSpec

    _require_sm90()
    gen = torch.Generator(device="cuda").manual_seed(17)
    m, n, k = 1000, 1032, 192
    cfg = dataclasses.replace(default_config("bf16"),
                              epilogue=EpilogueSpec(user=HOOKS["leaky"]))
    a, b, _, _ = _operands(m, n, k, torch.bfloat16, gen)
    out = torch.full((m, n), float("nan"), dtype=torch.bfloat16, device="cuda")
    prepare_gemm_sm90(a, b, out, cfg, epilogue_args=[0.125])()
    torch.cuda.synchronize()
    y, tol = _reference(a, b, None, None, None)
    _check(out, *_hook_reference("leaky", y, tol, {"slope": 0.125}))
    cfg = dataclasses.replace(default_config("e4m3"), epilogue=EpilogueSpec(
        user=HOOKS["causal"]))
    a, b, sa, sb = _operands(m, n, k, E4M3, gen)
    args, ref_args = _hook_args("causal", m, n, gen)
    out = torch.full((m, n), float("nan"), dtype=torch.bfloat16, device="cuda")
    prepare_gemm_sm90(a, b, out, cfg, sa.view(1), sb.view(1),
                      epilogue_args=[args["scale"], args["rs"]])()
    torch.cuda.synchronize()
    y, tol = _reference(a, b, sa, sb, None)
    _check(out, *_hook_reference("causal", y, tol, ref_args))


def test_k_zero_and_two_hooks_on_the_same_tensors() -> None:
    """K = 0: the hook on the zero product plus a bias (the kernel runs on zeros); then two
    hooks, one after the other, on the same tensors: each its own kernel and cached call."""
    _require_sm90()
    gen = torch.Generator(device="cuda").manual_seed(23)
    m, n = 300, 264
    bias = torch.randn(n, device="cuda", generator=gen).bfloat16()
    out = torch.full((m, n), float("nan"), dtype=torch.bfloat16, device="cuda")
    empty_a = torch.empty(m, 0, device="cuda").bfloat16()
    nvatom.gemm(empty_a, torch.empty(0, n, device="cuda").bfloat16(), out, bias=bias,
                epilogue=HOOKS["ramp"])
    y = bias.double().expand(m, n)
    _check(out, *_hook_reference("ramp", y, 0 * y, {}))
    a, b, _, _ = _operands(m, n, 128, torch.bfloat16, gen)
    y, tol = _reference(a, b, None, None, None)
    for _ in range(2):
        for name in ("relu2", "ramp"):
            out = torch.full((m, n), float("nan"), dtype=torch.bfloat16, device="cuda")
            nvatom.gemm(a, b, out, epilogue=HOOKS[name])
            _check(out, *_hook_reference(name, y, tol, {}))
