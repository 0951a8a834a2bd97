"""Fused GEMM epilogues (nvatom.kernels.fusion) on the CPU.

* The activation programs, interpreted here instruction by instruction in float32 (an
  interpreter of their own, not the emitter), against float64 references written from the
  definitions (``math.erf``, ``math.tanh``, ``math.exp``) over a dense grid: GELU's erf
  approximation (Numerical Recipes' erfcc) and the sigmoid forms stay far below bf16's and
  f16's rounding, in both tails.
* Every combination of activation x bias kind x C (with alpha) x residual builds and
  assembles for sm_90a (ptxas) without spills or warnings on the tile the planner picks at
  8192^3, for bf16 (ping-pong 128 x 192, or 128 x 128 where that one spills) and e4m3 (the
  promoted 128 x 192 tile, row-wise scales), and the full epilogue on the other kernels: the
  kernel's parameters are the ones ``kernel_params`` lists; with no epilogue nothing
  changes.
* EpilogueSpec's and GemmSm90Config's refusals, each naming the value.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import re

import numpy as np
import pytest

from nvatom.kernels import fusion
from nvatom.kernels.fusion import ACTIVATION_PROGRAMS, EpilogueError, EpilogueSpec
from nvatom.kernels.gemm_sm90 import (
    GemmSm90Config,
    GemmSm90Error,
    build_gemm_sm90,
    default_config,
    kernel_params,
)
from nvatom.runtime.ptxas import assemble

F32 = np.float32


def _run(program, x: np.ndarray) -> np.ndarray:
    """Interpret an activation program in float32: each instruction rounds to float32 (fma
    once, from float64: the product of two float32 is exact there); ``ex2`` and ``rcp`` are
    taken correctly rounded (the hardware's approximations are a few ulps off: PTX ISA)."""
    regs = {"x": x.astype(F32)}

    def val(v):
        return F32(v) if isinstance(v, float) else regs[v]

    for op, dst, srcs in program:
        s = [val(v) for v in srcs]
        with np.errstate(over="ignore", divide="ignore", invalid="ignore", under="ignore"):
            if op == "mul":
                r = s[0] * s[1]
            elif op == "add":
                r = s[0] + s[1]
            elif op == "fma":
                r = (np.float64(s[0]) * np.float64(s[1]) + np.float64(s[2])).astype(F32)
            elif op == "max":
                r = np.maximum(s[0], s[1])
            elif op == "abs":
                r = np.abs(s[0])
            elif op == "ex2":
                r = np.exp2(np.float64(s[0])).astype(F32)
            elif op == "rcp":
                r = (1.0 / np.float64(s[0])).astype(F32)
            elif op == "selneg":
                r = np.where(regs["x"] < 0, s[0], s[1])
            else:
                raise AssertionError(op)
        regs[dst] = np.asarray(r, dtype=F32)
    return regs["x"]


def _gelu(x: float) -> float:
    # 0.5 x (1 + erf(x / sqrt 2)), written with erfc: 1 + erf cancels in float64 below -6
    return 0.5 * x * math.erfc(-x / math.sqrt(2.0))


def _gelu_tanh(x: float) -> float:
    u = math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)
    if u >= 0:
        return 0.5 * x * (1.0 + math.tanh(u))
    e = math.exp(2.0 * u)  # 1 + tanh(u) = 2 e^2u / (1 + e^2u): no cancellation for u < 0
    return 0.5 * x * (2.0 * e / (1.0 + e))


def _silu(x: float) -> float:
    return x / (1.0 + math.exp(-x)) if x > -700 else 0.0


REFS = {"relu": lambda x: max(x, 0.0), "gelu": _gelu, "gelu_tanh": _gelu_tanh, "silu": _silu}
#: float32 inputs on [-30, 30]: steps of 2^-10 (61441 points), plus the edges of float32.
GRID = np.concatenate([np.arange(-30 * 1024, 30 * 1024 + 1) / 1024.0,
                       [0.0, -0.0, 1e-30, -1e-30, 3e38, -3e38]]).astype(F32)


@pytest.mark.parametrize("name", sorted(ACTIVATION_PROGRAMS))
def test_activation_programs_match_their_definitions(name: str) -> None:
    got = _run(ACTIVATION_PROGRAMS[name], GRID).astype(np.float64)
    ref = np.array([REFS[name](float(x)) for x in GRID.astype(np.float64)])
    assert np.all(np.isfinite(got)), GRID[~np.isfinite(got)]
    # relative error where the value is a normal float32, absolute below that (ftz)
    big = np.abs(ref) > 1e-30
    rel = np.abs(got[big] - ref[big]) / np.abs(ref[big])
    # bf16 rounds at 2^-9 relative, f16 at 2^-11: the programs stay 30x below f16's
    assert rel.max() < 2e-5, (name, float(rel.max()), float(GRID[big][rel.argmax()]))
    assert np.abs(got[~big] - ref[~big]).max(initial=0.0) < 1e-30


def test_gelu_erf_approximation_is_the_cited_one() -> None:
    """Numerical Recipes' erfcc: fractional error below 1.2e-7 for every z >= 0 (checked
    here in float64 over [0, 9] against math.erfc), which the program evaluates."""
    z = np.linspace(0.0, 9.0, 90001)
    t = 1.0 / (1.0 + 0.5 * z)
    p = np.polyval(fusion.ERFC_COEFFS[::-1], t)
    approx = t * np.exp(-z * z + p)
    ref = np.array([math.erfc(v) for v in z])
    assert (np.abs(approx - ref) / ref).max() < 1.2e-7


def test_gelu_tails_keep_relative_accuracy() -> None:
    """Deep in the negative tail gelu(x) = x Phi(x) is tiny; computing erfc directly (not
    1 + erf) keeps its relative error small there too."""
    x = np.array([-5.0, -8.0, -10.0, -12.0], dtype=F32)
    got = _run(ACTIVATION_PROGRAMS["gelu"], x).astype(np.float64)
    ref = np.array([_gelu(float(v)) for v in x])
    assert (np.abs(got - ref) / np.abs(ref)).max() < 2e-5


def _formula(acc, alpha, beta, c, bias, act, residual):
    """The documented epilogue in float64: act(alpha acc + beta C + bias) + residual."""
    y = alpha * acc + beta * c + bias
    y = np.vectorize(REFS[act])(y) if act else y
    return y + residual


def test_formula_composes_in_float32_as_documented() -> None:
    """The epilogue's per-element steps (mul alpha, fma beta C, add bias, the activation
    program, add residual) in float32 match the float64 formula within float32 rounding."""
    rng = np.random.default_rng(25)
    n = 4096
    acc, c, bias, res = (rng.standard_normal(n).astype(F32) * 3 for _ in range(4))
    alpha, beta = F32(0.75), F32(-1.25)
    for act in ("", *ACTIVATION_PROGRAMS):
        x = acc * alpha
        x = (np.float64(c) * np.float64(beta) + np.float64(x)).astype(F32)
        x = x + bias
        x = _run(ACTIVATION_PROGRAMS[act], x) if act else x
        x = x + res
        ref = _formula(*(np.float64(v) for v in (acc, alpha, beta, c, bias)), act,
                       np.float64(res))
        scale = np.abs(acc * alpha).astype(np.float64) + np.abs(c) + np.abs(bias) + np.abs(res)
        assert (np.abs(x - ref) / scale).max() < 1e-6, act


# --------------------------------------------------------------------------- the spec


def test_spec_tag_and_params() -> None:
    s = EpilogueSpec(alpha=True, c=True, bias="col", bias_dtype="bf16", activation="gelu",
                     residual=True)
    assert s.tag == "ep_a_c_bcolbf16_gelu_r"
    assert s.params == (("alpha", "f32"), ("beta", "f32"), ("c", "u64"), ("ldc", "u32"),
                        ("bias", "u64"), ("residual", "u64"), ("ldr", "u32"))
    assert EpilogueSpec(activation="relu").params == ()
    assert EpilogueSpec(bias="row", bias_dtype="f32").tag == "ep_browf32"


@pytest.mark.parametrize(("kw", "match"), [
    ({}, "nothing to do: use epilogue=None"),
    ({"activation": "tanh"}, "activation 'tanh' is not one of relu, gelu, gelu_tanh, silu"),
    ({"bias": "col"}, "bias 'col' needs a bias_dtype"),
    ({"bias_dtype": "f32"}, "bias '' needs a bias_dtype and only it"),
    ({"bias": "both", "bias_dtype": "f32"}, "bias 'both' is not '' \\(none\\) or one of col, row"),
    ({"bias": "col", "bias_dtype": "f64"}, "bias_dtype 'f64' is not one of bf16, f16, f32"),
    ({"c": 1}, "epilogue c must be a bool, got 1"),
])
def test_spec_refusals(kw, match) -> None:
    with pytest.raises(EpilogueError, match=match):
        EpilogueSpec(**kw)


def test_config_refusals() -> None:
    ep = EpilogueSpec(activation="relu")
    with pytest.raises(GemmSm90Error, match="the grouped kernel fuses no epilogue"):
        GemmSm90Config(grouped=True, epilogue=ep)
    with pytest.raises(GemmSm90Error, match="must be a nvatom.kernels.fusion.EpilogueSpec"):
        GemmSm90Config(epilogue="relu")  # type: ignore[arg-type]
    with pytest.raises(GemmSm90Error, match=r"bias_dtype 'f16': a bias has the output's type "
                                            r"\(bf16\) or f32"):
        GemmSm90Config(epilogue=EpilogueSpec(bias="col", bias_dtype="f16"))


def test_no_epilogue_changes_nothing() -> None:
    cfg = default_config("bf16")
    assert cfg.epilogue is None and "_ep" not in cfg.name
    fused = dataclasses.replace(cfg, epilogue=EpilogueSpec(activation="relu"))
    assert fused.name == cfg.name + "_ep_relu"
    assert kernel_params(fused) == kernel_params(cfg)  # no pointers: no parameters
    full = dataclasses.replace(cfg, epilogue=EpilogueSpec(alpha=True, residual=True))
    assert kernel_params(full)[len(kernel_params(cfg)):] == (
        ("alpha", "f32"), ("residual", "u64"), ("ldr", "u32"))


def test_fragment_offsets() -> None:
    for bn in (64, 128, 192, 256):
        fusion.check_fragment(bn)  # raises on a mismatch with the fragment formula


# --------------------------------------------------------------------------- ptxas


def _planned(spec: EpilogueSpec, dt: str) -> GemmSm90Config:
    """The kernel nvatom.gemm plans for a fused 8192^3 problem (Sm90Provider with the
    epilogue: bf16's ping-pong 128 x 192, or 128 x 128 where ptxas spills that; e4m3's
    promoted 128 x 192 with row-wise scales)."""
    from nvatom.gemm_providers import Sm90Provider
    from nvatom.runtime.gemm_plan import GemmProblem

    p = (GemmProblem(8192, 8192, 8192, "bf16", "bf16", "K", "N") if dt == "bf16" else
         GemmProblem(8192, 8192, 8192, "e4m3", "bf16", "K", "K", scale_mode="row"))
    return Sm90Provider(epilogue=spec)._config(p)
COMBOS = [c for c in itertools.product(("", *fusion.ACTIVATIONS), ("", "col", "row"),
                                       (False, True), (False, True)) if any(c)]


def _params_of(ptx: str, name: str) -> list[str]:
    head = ptx[ptx.index(f".entry {name}("):]
    head = head[:head.index(")")]
    return re.findall(r"\.param \.(?:align \d+ )?\.?(\w+) (\w+)", head)


@pytest.mark.parametrize("base", ["bf16", "e4m3"])
@pytest.mark.parametrize(("act", "bias", "c", "res"), COMBOS,
                         ids=["-".join(str(v) for v in c) for c in COMBOS])
def test_every_combination_assembles_without_spills(base, act, bias, c, res) -> None:
    """The kernel the planner picks for each combination (bf16: the 128 x 192 ping-pong
    tile where it does not spill, else 128 x 128) assembles without spills or warnings,
    and its parameters are kernel_params'."""
    spec = EpilogueSpec(alpha=c, c=c, bias=bias, bias_dtype="bf16" if bias else "",
                        activation=act, residual=res)
    cfg = _planned(spec, base)
    assert cfg.epilogue == spec and cfg.block_n in ((128, 192) if base == "bf16" else (192,))
    ptx = build_gemm_sm90(cfg).emit()
    names = [n for _, n in _params_of(ptx, cfg.name)]
    assert names == [n for n, _ in kernel_params(cfg)]
    r = assemble(ptx, "sm_90a")
    k = r.kernels[cfg.name]
    assert k.spill_stores == 0 and k.spill_loads == 0 and k.stack_frame == 0, spec.tag
    assert not [d for d in r.diagnostics if d.severity != "info"], r.diagnostics


@pytest.mark.parametrize("cfg", [
    default_config("bf16"),  # ping-pong 128 x 128, the fallback tile
    default_config("bf16", "f32"),
    default_config("f16"),
    default_config("bf16", schedule="cooperative"),
    default_config("e4m3", scale_mode="row"),
    default_config("e4m3", scale_mode="block"),
    default_config("e4m3", m=4096, n=4096),
    default_config("e4m3", fast_accum=True),
], ids=lambda c: c.name)
def test_other_kernels_fuse_the_full_epilogue(cfg) -> None:
    """f32 output (f32 C, residual and row bias), f16, the cooperative 128 x 256 tile and
    every FP8 scaling mode and tile take the full epilogue without spills."""
    bdt = "f32" if cfg.out_dtype == "f32" else cfg.out_dtype
    spec = EpilogueSpec(alpha=True, c=True, bias="row" if cfg.out_dtype == "f32" else "col",
                        bias_dtype=bdt, activation="gelu", residual=True)
    cfg = dataclasses.replace(cfg, epilogue=spec)
    r = assemble(build_gemm_sm90(cfg).emit(), "sm_90a")
    k = r.kernels[cfg.name]
    assert k.spill_stores == 0 and k.spill_loads == 0 and k.stack_frame == 0
    assert not [d for d in r.diagnostics if d.severity != "info"], r.diagnostics
