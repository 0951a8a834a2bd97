"""User epilogues (nvatom.kernels.sm90.user_epilogue) on the CPU.

* The example hooks of tests/kernels/user_hooks.py (squared ReLU, leaky ReLU with an f32
  parameter, a causal mask with per-column bf16 and per-row f32 scales, row/column
  arithmetic, a column tensor named ``col``) build into the GEMM with and without the
  built-in terms, on the planned bf16 ping-pong tile, the cooperative tile, f16 -> f32, and
  e4m3 (row-wise scales, block scales, fast accumulation), and assemble for sm_90a without
  warnings, alone without spills; the kernel's parameters are ``kernel_params``'s, the
  hook's ``u_<name>`` last.  (With every
  built-in term as well ptxas spills a few registers for the causal hook: :data:`SPILLS`.)
* The fused epilogue's instructions with each hook, run by the interpreter of
  tests/kernels/test_fusion.py as threads of a ragged corner tile (cooperative and both
  ping-pong halves): every element inside M x N is ``hook(act(alpha acc) + residual)`` at
  its own (row, column) by the hooks' float64 references; no load leaves the tensors
  (rows and columns past M and N are clamped).
* Every misuse (a hook that raises, writes a wrong-typed register, changes x's type, writes
  row, uses a guard, a branch, a label, shared memory, a barrier, emits nothing or never
  writes x, a form ptxas refuses, ...) is an EpilogueError naming the hook and the
  instruction.
* Identity: the kernel name and its build-cache key follow the hook's name and code.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from nvatom.kernels.gemm_sm90 import build_gemm_sm90, default_config, kernel_params
from nvatom.kernels.sm90 import user_epilogue as ue
from nvatom.kernels.sm90.fusion import EpilogueError, EpilogueSpec, UserEpilogue
from nvatom.ptx.builder import Reg
from nvatom.runtime.ptxas import assemble

from .test_fusion import REFS, _bf16, _Memory, _params_of, emit_slab, run_slab, slab_config
from .user_hooks import HOOKS, reference

# --------------------------------------------------------------------------- ptxas

KERNELS = {
    "bf16-pp": lambda: default_config("bf16"),
    "bf16-coop": lambda: default_config("bf16", schedule="cooperative"),
    "f16-f32": lambda: default_config("f16", "f32"),
    "e4m3-row": lambda: default_config("e4m3", scale_mode="row"),
    "e4m3-fast": lambda: default_config("e4m3", fast_accum=True),
    "e4m3-block": lambda: default_config("e4m3", scale_mode="block"),
}


#: (hook, kernel) pairs that ptxas spills (a few registers: at most 16 bytes of stack) with
#: every built-in term too; a hook adds registers the fused epilogue cannot plan for.
SPILLS = {("causal", "bf16-pp"), ("causal", "bf16-coop"), ("causal", "e4m3-fast")}


def _full(cfg, hook) -> EpilogueSpec:
    bdt = "f32" if cfg.out_dtype == "f32" else cfg.out_dtype
    return EpilogueSpec(alpha=True, c=True, bias="col", bias_dtype=bdt, activation="gelu",
                        residual=True, user=hook)


@pytest.mark.parametrize("full", [False, True], ids=["hook", "all-terms"])
@pytest.mark.parametrize("kernel", sorted(KERNELS))
@pytest.mark.parametrize("name", sorted(HOOKS))
def test_hooks_assemble_without_spills(name, kernel, full) -> None:
    hook = HOOKS[name]
    cfg = KERNELS[kernel]()
    spec = _full(cfg, hook) if full else EpilogueSpec(user=hook)
    cfg = dataclasses.replace(cfg, epilogue=spec)
    assert cfg.name.endswith(hook.tag) and hook.tag.startswith(f"u{name}_")
    ptx = build_gemm_sm90(cfg).emit()
    names = [n for _, n in _params_of(ptx, cfg.name)]
    assert names == [n for n, _ in kernel_params(cfg)]
    assert names[len(names) - len(hook.params):] == [f"u_{a}" for a in hook.arg_names]
    r = assemble(ptx, "sm_90a")
    k = r.kernels[cfg.name]
    assert not [d for d in r.diagnostics if d.severity != "info"], r.diagnostics
    if full and (name, kernel) in SPILLS:
        assert k.stack_frame <= 16, k.summary()
        return
    assert k.spill_stores == 0 and k.spill_loads == 0 and k.stack_frame == 0, k.summary()


def test_no_hook_no_change() -> None:
    cfg = default_config("bf16")
    spec = EpilogueSpec(activation="relu")
    a = build_gemm_sm90(dataclasses.replace(cfg, epilogue=spec)).emit()
    assert "user epilogue" not in a and "u_" not in "".join(n for n, _ in kernel_params(
        dataclasses.replace(cfg, epilogue=spec)))


# --------------------------------------------------------------------------- interpreted


def _hook_args(name: str, rng, mem: _Memory, m: int, n: int) -> tuple[dict, dict]:
    """(the hook's kernel parameter values, its float64 arguments for the reference)."""
    if name == "leaky":
        return {"u_slope": np.float32(0.125)}, {"slope": 0.125}
    if name == "colidx":
        t = rng.standard_normal(n).astype(np.float32)
        return {"u_col": mem.add(t)}, {"col": t.astype(np.float64)}
    if name != "causal":
        return {}, {}
    scale = _bf16(rng.standard_normal(n).astype(np.float32))
    rs = rng.standard_normal(m).astype(np.float32)
    vals = {"u_scale": mem.add((scale.view(np.uint32) >> 16).astype(np.uint16)),
            "u_rs": mem.add(rs)}
    return vals, {"scale": scale.astype(np.float64), "rs": rs.astype(np.float64)}


@pytest.mark.parametrize(("dt", "half"), [("bf16", None), ("f16", 0), ("f32", 1)])
@pytest.mark.parametrize("name", sorted(HOOKS))
def test_emitted_hook_computes_its_reference(name, dt, half) -> None:
    """The fused epilogue (alpha, relu, residual, then the hook) as threads of the last,
    ragged tile: each element inside M x N is the hook's reference at its row and column."""
    from nvatom.atoms.wgmma_fragments import accumulator_coord

    hook = HOOKS[name]
    cfg = slab_config(dt, EpilogueSpec(alpha=True, activation="relu", residual=True,
                                       user=hook), half)
    lines, params, acc = emit_slab(cfg, half)
    rng = np.random.default_rng(7)
    m, n = 64 * 3 + 37, cfg.block_n * 2 + 40
    tile = (64 * 3, cfg.block_n * 2)
    mem = _Memory()
    res = rng.standard_normal((m, n + 2)).astype(np.float32)
    if dt == "bf16":
        res = _bf16(res)
        rptr = mem.add((res.view(np.uint32) >> 16).astype(np.uint16))
    else:
        npdt = np.float16 if dt == "f16" else np.float32
        res = res.astype(npdt).astype(np.float32)
        rptr = mem.add(res.astype(npdt))
    hvals, hargs = _hook_args(name, rng, mem, m, n)
    pvals = {"alpha": np.float32(0.75), "residual": rptr, "ldr": n + 2, **hvals}
    for t in (0, 5, 37, 70, 127):
        accv = rng.standard_normal(len(acc)).astype(np.float32) * 2
        regs = run_slab(lines, params, pvals, mem, acc, accv, t, tile, (m, n))
        for i, r in enumerate(acc):
            rr, cc = accumulator_coord(cfg.block_n, t, i)
            row, col = tile[0] + rr, tile[1] + cc
            if row >= m or col >= n:
                continue  # dropped by the TMA store; its loads stayed inside (checked)
            y = REFS["relu"](0.75 * float(accv[i])) + float(res[row, col])
            want = float(reference(name, np.float64(y), row, col, hargs, np))
            got = float(regs[str(r)])
            scale = abs(want) + abs(y) + 1 + (col * abs(hargs["col"][col]) if "col" in hargs
                                              else 0)
            assert abs(got - want) <= 1e-5 * scale, (t, i, got, want)


# --------------------------------------------------------------------------- misuse


def _hook(*lines):
    """A hook running ``lines`` (callables of (k, x, row, col)) in order."""
    def fn(k, x, row, col):
        for f in lines:
            f(k, x, row, col)
    return fn


def _ok(k, x, row, col):
    k.ins("max.f32", x, x, 0.0)


MISUSE = [
    (lambda k, x, r, c: 1 / 0, r" raised ZeroDivisionError: division by zero \(after 0"),
    (_hook(_ok, lambda k, x, r, c: k.ins("add.f32", k.reg("u32"), x, 1.0)),
     r"writes .f32 into %t0, a .u32 register \(in `add.f32 %t0, %x, 1.0`\)"),
    (lambda k, x, r, c: k.ins("add.u32", x, r, 1),
     r"writes .u32 into %x, a .f32 register \(x stays .f32"),
    (lambda k, x, r, c: k.ins("add.u32", r, r, 1), r"%row is read-only \(the hook writes x"),
    (lambda k, x, r, c: k.ins("mov.f32", x, 0.0, pred="%p1"),
     r"a guarded instruction \(@p\) is refused.*\(in `mov.f32 %x, 0.0`\)"),
    (lambda k, x, r, c: k.ins("@%p1 mov.f32", x, 0.0), r"guarded instruction"),
    (lambda k, x, r, c: k.ins("bra", "$L_1"), r"branches and calls are refused.*`bra \$L_1`"),
    (lambda k, x, r, c: k.label("$L_1"), r"a hook cannot use labels"),
    (lambda k, x, r, c: k.ins("ld.shared.f32", x, "[0]"),
     r"shared memory is refused \(in `ld.shared.f32 %x, \[0\]`\)"),
    (lambda k, x, r, c: k.shared("buf", 16), r"a hook cannot use shared memory"),
    (lambda k, x, r, c: k.ins("bar.sync", 0), r"barriers and fences are refused"),
    (lambda k, x, r, c: k.ins("ld.global.f32", x, "[%rd1]"), r"memory instructions are refused"),
    (lambda k, x, r, c: None, r": the hook emitted no instruction"),
    (lambda k, x, r, c: k.ins("mov.f32", k.reg("f32"), x), r"the hook never writes x"),
    (lambda k, x, r, c: x, r"fn returned Reg.*transforms x in place"),
    (lambda k, x, r, c: k.ins("mov.f32", x, Reg("%f3", "f32")),
     r"register %f3 \(.f32\) is not one of this hook's"),
    (lambda k, x, r, c: k.ins("add.f32", x, k.reg("f32"), x), r"%t0 is read before it is written"),
    (lambda k, x, r, c: k.ins("frob.f32", x, x), r"'frob' is not an instruction a hook may use"),
    (lambda k, x, r, c: k.ins("fma.f32", x, x, x, x), r"'fma' with .f32 needs one of .rm .rn"),
    (lambda k, x, r, c: k.ins("ex2.f32", x, x), r"'ex2' with .f32 needs one of .approx"),
    (lambda k, x, r, c: k.ins("add.rn.u32", x, x, x), r"'add' with .u32 does not take .rn"),
    (lambda k, x, r, c: k.ins("cvt.f32.u32", x, r), r"integer -> float needs one of .rn"),
    (lambda k, x, r, c: k.ins("add.f32", x, x), r"'add.f32' takes 3 operands, got 2"),
    (lambda k, x, r, c: k.ins("add.f32", x, x, "%f1"), r"'%f1' is not an immediate a .f32"),
    (lambda k, x, r, c: k.ins("add.f32", x, x, r), r"%row is .u32; this operand is .f32"),
    (lambda k, x, r, c: k.ins("add.f32", x, x, [x, x]), r"a vector operand"),
    (lambda k, x, r, c: k.ins("add.f32", x, x, k.arg("nope")),
     r"k.arg\('nope'\): not one of its scalars \(none\)"),
    (lambda k, x, r, c: k.load("nope"), r"k.load\('nope'\): not one of its tensors"),
    (lambda k, x, r, c: k.reg("f8"), r"no register type 'f8'"),
    (lambda k, x, r, c: [k.ins("mov.f32", x, 1.0) for _ in range(ue.MAX_INSTRUCTIONS + 1)],
     r"more than 128 instructions"),
    (lambda k, x, r, c: k.ins("setp.ge.b16", k.reg("pred"), 1, 2), r"'setp' with .b16 does "
                                                                   r"not take .ge"),
    (lambda k, x, r, c: k.ins("add.ftz.f64", x, x, x), r"'add' with .f64 does not take .ftz"),
    # what the table lets through and ptxas refuses: the probe names the instruction
    (lambda k, x, r, c: k.ins("div.ftz.full.f32", x, x, 3.0),
     r"ptxas refuses it: Unknown modifier '.full' \(in `div.ftz.full.f32 %x, %x, "
     r"0f40400000;`\)"),
]


@pytest.mark.parametrize(("fn", "match"), MISUSE, ids=range(len(MISUSE)))
def test_misuse_is_an_epilogue_error(fn, match) -> None:
    with pytest.raises(EpilogueError, match=r"^user epilogue 'bad'.*" + match):
        UserEpilogue("bad", fn)


def test_parameter_misuse() -> None:
    def reads_scale(k, x, row, col):
        k.ins("mul.rn.f32", x, x, k.arg("scale"))

    with pytest.raises(EpilogueError, match=r"k.arg\('scale'\): a tensor: read it with k.load"):
        UserEpilogue("p", reads_scale, tensors={"scale": ("col", "f32")})

    def writes_load(k, x, row, col):
        k.ins("mov.f32", k.load("s"), x)

    with pytest.raises(EpilogueError, match=r"%t0 is read-only"):
        UserEpilogue("p", writes_load, tensors={"s": ("row", "f32")})
    for kw, match in [
        ({"tensors": {"s": ("both", "f32")}}, r"tensor 's' is \('both', 'f32'\); a tensor is "
                                              r"\(kind, dtype\) with kind one of row, col"),
        ({"tensors": {"s": ("col", "e4m3")}}, r"dtype one of bf16, f16, f32"),
        ({"scalars": "slope"}, r"scalars must be a sequence of parameter names"),
        ({"scalars": None}, r"scalars must be a sequence of parameter names"),
        ({"tensors": ["s"]}, r"tensors must be a mapping name -> \(kind, dtype\)"),
        ({"scalars": ("a", "a")}, r"repeat a name"),
        ({"scalars": ("s",), "tensors": {"s": ("col", "f32")}}, r"'s' is both a scalar and"),
    ]:
        with pytest.raises(EpilogueError, match=match):
            UserEpilogue("p", _ok, **kw)
    for name in ("", "9x", "a-b", "x" * 33, None):
        with pytest.raises(EpilogueError, match="a user epilogue's name must be a letter"):
            UserEpilogue(name, _ok)  # type: ignore[arg-type]
    assert UserEpilogue("p", _ok, tensors={"s": ["row", "f16"]}).tensors == (
        ("s", "row", "f16"),)
    with pytest.raises(EpilogueError, match="fn must be callable"):
        UserEpilogue("p", 3)  # type: ignore[arg-type]
    with pytest.raises(EpilogueError, match="epilogue user must be a UserEpilogue or None"):
        EpilogueSpec(user=_ok)  # type: ignore[arg-type]


def test_names_and_literals_are_whole() -> None:
    """A name or literal with a trailing newline (or anything after it) is refused whole,
    and a UserEpilogue cannot be changed once made (its fingerprint names its kernel)."""
    with pytest.raises(EpilogueError, match="a user epilogue's name must be a letter"):
        UserEpilogue("ok\n", _ok)
    assert ue._imm("5\n", "u32") is None and ue._imm("5", "u32") == "5"
    with pytest.raises(EpilogueError, match=r"'0x10;\\n' is not an immediate"):
        UserEpilogue("p", lambda k, x, r, c: k.ins("add.u32", k.reg("u32"), r, "0x10;\n"))
    h = UserEpilogue("p", _ok)
    with pytest.raises(AttributeError, match="a UserEpilogue is immutable"):
        h.program = ()


def test_immediates_and_types() -> None:
    """Numbers become exact literals of the operand's type; the type rules of PTX registers
    (same size; a bit type mixes with any; u and s mix)."""
    assert ue._imm(1.0, "f32") == "0f3F800000" and ue._imm(2, "f32") == "0f40000000"
    assert ue._imm(0.1, "f64") == "0d3FB999999999999A"
    assert ue._imm(float("-inf"), "f32") == "0fFF800000" and ue._imm(1e39, "f32") is None
    assert ue._imm(7, "u32") == "7" and ue._imm(1.5, "u32") is None
    assert ue._imm("0f3F800000", "f32") == "0f3F800000" and ue._imm("0f3F800000", "f64") is None
    assert ue._imm(True, "u32") is None and ue._imm(1.0, "f16") is None
    assert ue.compatible("f32", "b32") and ue.compatible("b32", "f32")
    assert ue.compatible("u32", "s32") and not ue.compatible("u32", "f32")
    assert not ue.compatible("f16", "bf16") and not ue.compatible("u64", "u32")
    assert not ue.compatible("pred", "b32")


# --------------------------------------------------------------------------- identity


def _scaled(by: float):
    def fn(k, x, row, col):
        k.ins("mul.rn.f32", x, x, by)
    return fn


def test_identity_follows_name_and_code() -> None:
    """Hooks that emit the same code under the same name are equal (one kernel); any other
    difference -- the code, an immediate, the name, the parameters -- is a different tag,
    kernel name and build-cache key (``repr(cfg)``, what ``KernelSource.key`` is)."""
    a, b = UserEpilogue("s", _scaled(2.0)), UserEpilogue("s", _scaled(2.0))
    assert a == b and hash(a) == hash(b) and a.fn is not b.fn
    others = [UserEpilogue("s", _scaled(3.0)), UserEpilogue("t", _scaled(2.0)),
              UserEpilogue("s", _scaled(2.0), scalars=("unused",)), HOOKS["relu2"]]
    base = default_config("bf16")
    cfgs = [dataclasses.replace(base, epilogue=EpilogueSpec(user=h)) for h in (a, *others)]
    assert len({c.name for c in cfgs}) == len(cfgs)
    assert len({repr(c) for c in cfgs}) == len(cfgs)
    assert len({hash(c) for c in cfgs}) == len(cfgs)
    assert all(a != o for o in others)
    assert cfgs[0] == dataclasses.replace(base, epilogue=EpilogueSpec(user=b))
    assert a.fingerprint in repr(cfgs[0])


def test_provider_plans_separate_kernels() -> None:
    from nvatom.gemm_providers import Sm90Provider
    from nvatom.runtime.gemm_plan import GemmProblem

    p = GemmProblem(1024, 1024, 1024, "bf16", "bf16", "K", "N")
    s1 = Sm90Provider(epilogue=EpilogueSpec(user=HOOKS["relu2"])).plan(p, "sm_90a").source
    s2 = Sm90Provider(epilogue=EpilogueSpec(user=HOOKS["ramp"])).plan(p, "sm_90a").source
    assert s1.key != s2.key and s1.name != s2.name
    assert HOOKS["relu2"].tag in s1.name and HOOKS["relu2"].fingerprint in s1.key
