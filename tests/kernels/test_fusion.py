"""Fused GEMM epilogues (nvatom.kernels.sm90.fusion) on the CPU.

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
* The instructions FusedEpilogue emits, run by a small PTX interpreter written here on a
  ragged corner tile (cooperative and both ping-pong halves; bf16, f16 and f32 output; column
  and row bias of either type): every element inside M x N is the formula at its fragment
  (row, column), and no load leaves the tensors.
* EpilogueSpec's and GemmSm90Config's refusals, each naming the value.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import re

import numpy as np
import pytest

from nvatom.kernels.gemm_sm90 import (
    GemmSm90Config,
    GemmSm90Error,
    build_gemm_sm90,
    default_config,
    kernel_params,
)
from nvatom.kernels.sm90 import fusion
from nvatom.kernels.sm90.fusion import ACTIVATION_PROGRAMS, EpilogueError, EpilogueSpec
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
    with pytest.raises(GemmSm90Error, match="must be a nvatom.kernels.sm90.fusion.EpilogueSpec"):
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


# --------------------------------------------------------------------------- the emitted PTX


class _Memory:
    """Global memory as named float arrays at disjoint base addresses; a read outside every
    array fails (the kernel must clamp its addresses)."""

    def __init__(self) -> None:
        self.regions: list[tuple[int, bytes]] = []
        self.next = 1 << 40

    def add(self, arr: np.ndarray) -> int:
        base = self.next
        self.regions.append((base, arr.tobytes()))
        self.next += (arr.nbytes + 4096) // 4096 * 4096 + 4096
        return base

    def read(self, addr: int, nbytes: int) -> bytes:
        for base, data in self.regions:
            if base <= addr and addr + nbytes <= base + len(data):
                return data[addr - base:addr - base + nbytes]
        raise AssertionError(f"read of {nbytes} bytes at 0x{addr:x} outside every tensor")


def _f32_bits(v) -> int:
    return int(np.float32(v).view(np.uint32))


def _bits_f32(b: int) -> np.float32:
    return np.uint32(b & 0xFFFFFFFF).view(np.float32)


_SETP_U32 = {"setp.lt.u32": lambda a, b: a < b, "setp.gt.u32": lambda a, b: a > b,
             "setp.ge.u32": lambda a, b: a >= b, "setp.eq.u32": lambda a, b: a == b}


def _interpret(lines, regs: dict, params: dict, mem: _Memory) -> None:
    """Run the straight-line PTX ``lines`` (the fused epilogue's instructions) on ``regs``
    (name -> int for integer and b16/b32 registers, np.float32 for f32, bool for
    predicates).  Only the forms the epilogue emits are known; anything else fails."""
    def val(tok: str):
        tok = tok.strip()
        if tok.startswith("%"):
            return regs[tok]
        if tok.startswith("0f"):
            return _bits_f32(int(tok[2:], 16))
        return int(tok, 0)

    for line in lines:
        line = line.strip()
        if not line or line.startswith("//"):
            continue
        assert line.endswith(";") and not line.startswith("@"), line
        op, _, rest = line[:-1].partition(" ")
        ops = [o.strip() for o in re.split(r",(?![^{]*\})", rest)]
        d, s = ops[0], ops[1:]
        if op.startswith("ld.param."):
            regs[d] = params[s[0].strip("[]")]
        elif op == "cvta.to.global.u64":
            regs[d] = val(s[0])
        elif op in ("and.b32", "shr.u32", "shl.b32", "add.u32", "sub.u32", "min.u32",
                    "mad.lo.u32"):
            a, b = val(s[0]), val(s[1])
            if op == "and.b32":
                r = a & b
            elif op == "shr.u32":
                r = a >> b
            elif op == "shl.b32":
                r = a << b
            elif op == "add.u32":
                r = a + b
            elif op == "sub.u32":
                r = a - b
            elif op == "min.u32":
                r = min(a, b)
            else:
                r = a * b + val(s[2])
            regs[d] = r & 0xFFFFFFFF
        elif op == "mul.wide.u32":
            regs[d] = val(s[0]) * val(s[1])
        elif op in ("mad.lo.u64", "mad.wide.u32"):
            regs[d] = (val(s[0]) * val(s[1]) + val(s[2])) & (2**64 - 1)
        elif op in _SETP_U32:
            regs[d] = _SETP_U32[op](val(s[0]), val(s[1]))
        elif op == "sub.s32":  # two's complement, kept as the u32 bit pattern
            regs[d] = (val(s[0]) - val(s[1])) & 0xFFFFFFFF
        elif op == "cvt.rn.f32.u32":
            regs[d] = np.float32(val(s[0]))
        elif op == "slct.f32.s32":  # a if c >= 0 else b, c read as signed
            c = val(s[2])
            regs[d] = val(s[0]) if c < 2**31 else val(s[1])
        elif op == "selp.u32":
            regs[d] = val(s[0]) if regs[s[2]] else val(s[1])
        elif op in ("ld.global.b32", "ld.global.nc.b16", "ld.global.nc.f32", "ld.global.v2.f32",
                    "ld.global.b16", "ld.global.f32"):
            addr = regs[s[0].strip("[]")]
            if op == "ld.global.b32":
                regs[d] = int.from_bytes(mem.read(addr, 4), "little")
            elif op in ("ld.global.nc.b16", "ld.global.b16"):
                regs[d] = int.from_bytes(mem.read(addr, 2), "little")
            elif op in ("ld.global.nc.f32", "ld.global.f32"):
                regs[d] = np.frombuffer(mem.read(addr, 4), np.float32)[0]
            else:
                v = np.frombuffer(mem.read(addr, 8), np.float32)
                for name, x in zip(d.strip("{}").split(","), v, strict=True):
                    regs[name.strip()] = x
        elif op == "mov.b32":
            if d.startswith("{"):  # two 16-bit halves, low first
                lo, hi = (x.strip() for x in d.strip("{}").split(","))
                regs[lo], regs[hi] = val(s[0]) & 0xFFFF, val(s[0]) >> 16
            else:
                regs[d] = _bits_f32(val(s[0]))
        elif op in ("cvt.f32.bf16", "cvt.f32.f16"):
            h = val(s[0])
            regs[d] = (_bits_f32(h << 16) if op.endswith("bf16") else
                       np.float32(np.uint16(h).view(np.float16)))
        elif op in ("mul.rn.f32", "add.rn.f32", "max.f32"):
            a, b = np.float32(val(s[0])), np.float32(val(s[1]))
            regs[d] = np.float32({"mul.rn.f32": a * b, "add.rn.f32": a + b,
                                  "max.f32": max(a, b)}[op])
        elif op == "fma.rn.f32":
            a, b, c = (np.float64(val(x)) for x in s)
            regs[d] = np.float32(a * b + c)
        elif op == "abs.f32":
            regs[d] = np.float32(abs(val(s[0])))
        elif op == "ex2.approx.ftz.f32":
            with np.errstate(over="ignore"):
                regs[d] = np.float32(np.exp2(np.float64(val(s[0]))))
        elif op == "rcp.approx.ftz.f32":
            with np.errstate(divide="ignore"):
                regs[d] = np.float32(1.0 / np.float64(val(s[0])))
        elif op == "setp.lt.f32":
            regs[d] = bool(val(s[0]) < val(s[1]))
        elif op == "selp.f32":
            regs[d] = val(s[0]) if regs[s[2]] else val(s[1])
        else:
            raise AssertionError(f"the interpreter does not know {op!r} ({line})")


def slab_config(dt: str, spec: EpilogueSpec, half: int | None) -> GemmSm90Config:
    """A ping-pong 128 x 128 kernel (``half`` 0 or 1) or a cooperative 128 x 256 one (None)
    writing ``dt`` with the fused epilogue ``spec``."""
    schedule = {"schedule": "pingpong", "block_n": 128, "stages": 6} if half is not None \
        else {"schedule": "cooperative", "block_n": 256, "stages": 4}
    in_dt = "bf16" if dt == "f32" else dt
    return GemmSm90Config(in_dtype=in_dt, out_dtype=dt, epilogue=spec, **schedule)


def emit_slab(cfg: GemmSm90Config, half: int | None) -> tuple[list[str], dict, list]:
    """The instructions FusedEpilogue emits for one 64-row slab (every chunk), its kernel
    parameters and the accumulator registers; the registers it reads besides them are
    the first six of the kernel: tid, row0, col0, M, N, K (%r0..%r5)."""
    from nvatom.ptx.builder import Kernel

    k = Kernel("sim")
    params = fusion.declare_params(k, cfg.epilogue)
    tid, row0, col0, m_r, n_r, k_r = (k.reg("u32") for _ in range(6))
    acc = k.regs("f32", cfg.block_n // 2)
    fused = fusion.FusedEpilogue(k, cfg, params, tid, row0, col0, (m_r, n_r, k_r), half)
    cc = cfg.c_chunk_cols
    for ch in range(cfg.block_n // cc):
        groups = range(ch * cc // 8, (ch + 1) * cc // 8)
        fused.apply(acc, groups, fused.load(groups))
    return k._body, params, acc


def run_slab(lines: list[str], params: dict, pvals: dict, mem: _Memory, acc: list,
             accv: np.ndarray, t: int, tile: tuple[int, int], dims: tuple[int, int]) -> dict:
    """Interpret :func:`emit_slab`'s ``lines`` as consumer thread ``t`` (of the second
    warpgroup) of the slab at ``tile`` (row0, col0) of an M x N = ``dims`` output, its
    accumulators ``accv``; ``pvals``: parameter name -> value.  Returns the registers."""
    regs = {str(r): v for r, v in zip(acc, accv, strict=True)}
    regs.update(dict(zip(("%r0", "%r1", "%r2", "%r3", "%r4", "%r5"),
                         (128 + t, *tile, *dims, 64), strict=True)))
    _interpret(lines, regs, {p.name: pvals[n] for n, p in params.items()}, mem)
    return regs


def _bf16(x: np.ndarray) -> np.ndarray:
    """float32 -> nearest bf16 values (as float32) and their 16-bit patterns."""
    bits = x.astype(np.float32).view(np.uint32)
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    return bits.view(np.float32)


@pytest.mark.parametrize(("dt", "bias_kind", "bias_dt", "act", "half"), [
    ("bf16", "col", "bf16", "gelu", None),
    ("bf16", "row", "f32", "silu", 0),
    ("f16", "col", "f32", "gelu_tanh", 1),
    ("f32", "row", "f32", "relu", None),
    ("bf16", "", "", "", 0),
])
def test_emitted_epilogue_computes_the_formula(dt, bias_kind, bias_dt, act, half) -> None:
    """The instructions FusedEpilogue emits, run by an interpreter of their own on a tile at
    the ragged corner of the output: every element inside M x N gets
    act(alpha acc + beta C + bias) + residual of its own row and column (the fragment's
    (row, column) of each accumulator register from nvatom.atoms.wgmma_fragments), and no
    load leaves the tensors (rows and columns past the edges are clamped)."""
    from nvatom.atoms.wgmma_fragments import accumulator_coord

    spec = EpilogueSpec(alpha=True, c=True, bias=bias_kind, bias_dtype=bias_dt,
                        activation=act, residual=True)
    cfg = slab_config(dt, spec, half)
    lines, params, acc = emit_slab(cfg, half)

    rng = np.random.default_rng(1)
    M, N = 64 * 3 + 37, cfg.block_n * 2 + 40  # the tile below is the last one: ragged
    t_row0, t_col0 = 64 * 3, cfg.block_n * 2
    ldc, ldr = N + 6, N + 2
    npdt = {"bf16": np.float32, "f16": np.float16, "f32": np.float32}[dt]
    mem = _Memory()

    def matrix(ld):
        x = rng.standard_normal((M, ld)).astype(np.float32)
        if dt == "bf16":
            x = _bf16(x)
            return x, mem.add((x.view(np.uint32) >> 16).astype(np.uint16))
        return x.astype(npdt).astype(np.float32), mem.add(x.astype(npdt))

    cmat, cptr = matrix(ldc)
    rmat, rptr = matrix(ldr)
    blen = N if bias_kind == "col" else M
    bvals = rng.standard_normal(blen).astype(np.float32)
    bptr = 0
    if bias_kind:
        if bias_dt == "bf16":
            bvals = _bf16(bvals)
            bptr = mem.add((bvals.view(np.uint32) >> 16).astype(np.uint16))
        else:
            bptr = mem.add(bvals)
    alpha, beta = np.float32(0.75), np.float32(-1.25)
    pvals = {"alpha": alpha, "beta": beta, "c": cptr, "ldc": ldc, "bias": bptr,
             "residual": rptr, "ldr": ldr}
    for t in (0, 5, 37, 70, 127):
        accv = rng.standard_normal(len(acc)).astype(np.float32) * 2
        regs = run_slab(lines, params, pvals, mem, acc, accv, t, (t_row0, t_col0), (M, N))
        for i, r in enumerate(acc):
            rr, cc_ = accumulator_coord(cfg.block_n, t, i)
            row, col = t_row0 + rr, t_col0 + cc_
            if row >= M or col >= N:
                continue  # dropped by the TMA store; its loads stayed inside (checked)
            bias = (bvals[col] if bias_kind == "col" else bvals[row] if bias_kind == "row"
                    else 0.0)
            pre = 0.75 * float(accv[i]) - 1.25 * float(cmat[row, col]) + float(bias)
            want = (REFS[act](pre) if act else pre) + float(rmat[row, col])
            got = float(regs[str(r)])
            assert abs(got - want) <= 1e-5 * (abs(want) + abs(pre) + 1), (t, i, got, want)
