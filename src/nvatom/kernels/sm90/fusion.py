"""Fused GEMM epilogues: f32 operations on the accumulators before they are packed and stored.

The SM90 GEMM's epilogue holds each output element in an f32 register whose (row, column)
in the tile is known (the accumulator fragment, PTX ISA "wgmma" -> "Matrix fragments for
wgmma.mma_async": thread ``t``'s element ``i`` sits at row ``16 (t // 32) + (t % 32) // 4
+ 8 ((i // 2) % 2)``, column ``2 (t % 4) + 8 (i // 4) + i % 2``).  An :class:`EpilogueSpec`
describes what runs on those registers between the FP8 scales and the ``cvt`` packing:

    out = act(alpha * acc * s + beta * C + bias) + residual

``acc`` the f32 sum of ``a @ b``, ``s`` the FP8 scales (1 for bf16/f16), ``C`` and
``residual`` M x N matrices of the output's type, ``bias`` per column (N) or per row (M),
``act`` one of :data:`ACTIVATIONS`; then, last, a user's own PTX on each element
(:class:`~nvatom.kernels.sm90.user_epilogue.UserEpilogue`, ``EpilogueSpec.user``: ``out =
hook(act(...) + residual)``, given the element's row and column clamped into M x N).  Each
term is optional; the kernel takes parameters only for the terms present
(:meth:`EpilogueSpec.params`).  The C, residual and column-bias
values are loaded from global memory per 128-byte epilogue chunk, before the chunk's barrier
wait so that the wait hides their latency (as many as the registers allow:
:func:`preload_groups`), as pairs of adjacent columns (``ld.global.b32`` for two 16-bit
elements, ``.v2.f32`` for f32; PTX ISA "ld"); a row bias once per 64-row slab.  Rows past M
and columns past N read row M - 1 and column 0 instead (their results are dropped by the TMA
store), so no load leaves the tensors.

The activations are short f32 programs (:data:`ACTIVATION_PROGRAMS`): data, emitted as PTX
here and interpreted independently in tests/kernels/test_fusion.py.  GELU's ``erf`` has no
PTX instruction; it is computed from Numerical Recipes' ``erfcc`` (W. H. Press et al.,
"Numerical Recipes in C", 2nd ed., 1992, section 6.2: ``erfc(z) = t exp(-z^2 + P(t))``,
``t = 1 / (1 + z/2)``, a degree-9 Chebyshev-fitted P, fractional error below 1.2e-7 for
every z >= 0), so ``gelu(x) = x Phi(x)`` with ``Phi(x) = erfc(|x|/sqrt 2) / 2`` for x < 0
and ``1 - erfc(|x|/sqrt 2) / 2`` otherwise keeps its relative accuracy in both tails.
``gelu_tanh`` (torch's ``approximate='tanh'``) and ``silu`` use the identity
``0.5 x (1 + tanh u) = x / (1 + exp(-2u))``.  ``exp`` is ``ex2.approx.ftz.f32`` of the
argument times log2(e) and ``1/x`` is ``rcp.approx.ftz.f32`` (PTX ISA "ex2", "rcp": both
within a few f32 ulps), far below bf16's and f16's rounding.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import struct
from collections.abc import Sequence
from typing import Any

from nvatom.atoms.wgmma_fragments import WARPGROUP, accumulator_coord
from nvatom.kernels.sm90.emit import u32 as _u32
from nvatom.kernels.sm90.user_epilogue import EpilogueError, UserEpilogue
from nvatom.ptx.builder import Kernel, Param, Reg

__all__ = [
    "ACTIVATIONS",
    "ACTIVATION_PROGRAMS",
    "BIAS_KINDS",
    "EpilogueError",
    "EpilogueSpec",
    "FusedEpilogue",
    "UserEpilogue",
    "declare_params",
]

#: The activations (torch's names: ``relu``, ``gelu`` = exact erf form, ``gelu_tanh`` =
#: ``gelu(approximate='tanh')``, ``silu``).
ACTIVATIONS = ("relu", "gelu", "gelu_tanh", "silu")
#: Bias per column (``(N,)``, as ``torch.nn.functional.linear``) or per row (``(M, 1)``).
BIAS_KINDS = ("col", "row")
#: Element types of C, residual and bias (C and residual: the output's; bias also f32).
OPERAND_DTYPES = ("bf16", "f16", "f32")

_LOG2E = 1.0 / math.log(2.0)
_SQRT_HALF = math.sqrt(0.5)
#: Numerical Recipes' erfcc coefficients, constant term first (P(t) = sum c_i t^i).
ERFC_COEFFS = (-1.26551223, 1.00002368, 0.37409196, 0.09678418, -0.18628806, 0.27886807,
               -1.13520398, 1.48851587, -0.82215223, 0.17087277)
#: gelu_tanh: 2u = x (K0 + K1 x^2), K0 = 2 sqrt(2/pi), K1 = 0.044715 K0 (torch's constants).
_GT_K0 = 2.0 * math.sqrt(2.0 / math.pi)
_GT_K1 = 0.044715 * _GT_K0

#: One f32 instruction of an activation program: (op, destination, sources).  Sources are
#: register names of the program (``"x"`` the input, also the output) or float immediates.
#: Ops: ``mul`` a*b, ``add`` a+b, ``fma`` a*b+c, ``max`` max(a, b), ``abs`` |a|, ``ex2``
#: 2^a, ``rcp`` 1/a, ``selneg`` (a if x < 0 else b).
Instr = tuple[str, str, tuple[str | float, ...]]


def _erfc_horner() -> tuple[Instr, ...]:
    c = ERFC_COEFFS
    out: list[Instr] = [("fma", "p", ("t", c[9], c[8]))]
    out += [("fma", "p", ("p", "t", c[i])) for i in range(7, -1, -1)]
    return tuple(out)


#: The activations as f32 programs on register ``x`` (see the module docstring).
ACTIVATION_PROGRAMS: dict[str, tuple[Instr, ...]] = {
    "relu": (("max", "x", ("x", 0.0)),),
    "silu": (("mul", "t", ("x", -_LOG2E)), ("ex2", "t", ("t",)), ("add", "t", ("t", 1.0)),
             ("rcp", "t", ("t",)), ("mul", "x", ("x", "t"))),
    "gelu_tanh": (("mul", "t", ("x", "x")), ("fma", "t", ("t", -_GT_K1 * _LOG2E,
                                                            -_GT_K0 * _LOG2E)),
                  ("mul", "t", ("t", "x")), ("ex2", "t", ("t",)), ("add", "t", ("t", 1.0)),
                  ("rcp", "t", ("t",)), ("mul", "x", ("x", "t"))),
    "gelu": (("abs", "z", ("x",)), ("mul", "z", ("z", _SQRT_HALF)),  # z = |x| / sqrt 2
             ("fma", "t", ("z", 0.5, 1.0)), ("rcp", "t", ("t",)),  # t = 1 / (1 + z/2)
             *_erfc_horner(),  # p = P(t)
             ("mul", "w", ("x", -0.5)), ("fma", "p", ("w", "x", "p")),  # p - z^2
             ("mul", "p", ("p", _LOG2E)), ("ex2", "p", ("p",)),  # exp(p - z^2)
             ("mul", "t", ("t", 0.5)), ("mul", "h", ("t", "p")),  # h = erfc(z) / 2
             ("fma", "g", ("h", -1.0, 1.0)), ("selneg", "h", ("h", "g")),  # Phi(x)
             ("mul", "x", ("x", "h"))),
}


@dataclasses.dataclass(frozen=True)
class EpilogueSpec:
    """What the fused epilogue computes (``out = act(alpha acc s + beta C + bias) +
    residual``): ``alpha`` (a runtime f32 factor: kernel parameter ``alpha``), ``c`` (``beta
    * C``: parameters ``beta``, ``c``, ``ldc``; C has the output's type), ``bias`` ("" none,
    "col" one per column, "row" one per row; parameter ``bias``) of ``bias_dtype`` (the
    output's type or f32), ``activation`` ("" none, or one of :data:`ACTIVATIONS`) and
    ``residual`` (parameters ``residual``, ``ldr``; the output's type), then ``user``, a
    :class:`~nvatom.kernels.sm90.user_epilogue.UserEpilogue` applied last (``out =
    user(act(...) + residual)``; its parameters ``u_<name>`` after the others).  Part of the
    kernel's configuration: its :attr:`tag` is in the kernel's name."""

    alpha: bool = False
    c: bool = False
    bias: str = ""
    bias_dtype: str = ""
    activation: str = ""
    residual: bool = False
    user: UserEpilogue | None = None

    def __post_init__(self) -> None:
        for name in ("alpha", "c", "residual"):
            if not isinstance(getattr(self, name), bool):
                raise EpilogueError(f"epilogue {name} must be a bool, got "
                                    f"{getattr(self, name)!r}")
        if self.bias not in ("", *BIAS_KINDS):
            raise EpilogueError(f"epilogue bias {self.bias!r} is not '' (none) or one of "
                                f"{', '.join(BIAS_KINDS)}")
        if bool(self.bias) != bool(self.bias_dtype):
            raise EpilogueError(f"epilogue bias {self.bias!r} needs a bias_dtype and only it "
                                f"(got bias_dtype {self.bias_dtype!r})")
        if self.bias_dtype and self.bias_dtype not in OPERAND_DTYPES:
            raise EpilogueError(f"epilogue bias_dtype {self.bias_dtype!r} is not one of "
                                f"{', '.join(OPERAND_DTYPES)}")
        if self.activation not in ("", *ACTIVATIONS):
            raise EpilogueError(f"epilogue activation {self.activation!r} is not one of "
                                f"{', '.join(ACTIVATIONS)}")
        if self.user is not None and not isinstance(self.user, UserEpilogue):
            raise EpilogueError(f"epilogue user must be a UserEpilogue or None, got "
                                f"{self.user!r}")
        if not (self.alpha or self.c or self.bias or self.activation or self.residual
                or self.user):
            raise EpilogueError("an EpilogueSpec with nothing to do: use epilogue=None")

    @property
    def tag(self) -> str:
        """The kernel-name suffix, e.g. ``ep_a_c_bcolbf16_gelu_r`` (a user epilogue adds
        its :attr:`~nvatom.kernels.sm90.user_epilogue.UserEpilogue.tag`)."""
        parts = ["ep"]
        parts += ["a"] if self.alpha else []
        parts += ["c"] if self.c else []
        parts += [f"b{self.bias}{self.bias_dtype}"] if self.bias else []
        parts += [self.activation] if self.activation else []
        parts += ["r"] if self.residual else []
        parts += [self.user.tag] if self.user is not None else []
        return "_".join(parts)

    @property
    def params(self) -> tuple[tuple[str, str], ...]:
        """The kernel parameters the epilogue adds, as ``(name, PTX type)``, in order."""
        out: list[tuple[str, str]] = []
        if self.alpha:
            out.append(("alpha", "f32"))
        if self.c:
            out += [("beta", "f32"), ("c", "u64"), ("ldc", "u32")]
        if self.bias:
            out.append(("bias", "u64"))
        if self.residual:
            out += [("residual", "u64"), ("ldr", "u32")]
        if self.user is not None:
            out += self.user.params
        return tuple(out)


def declare_params(k: Kernel, spec: EpilogueSpec | None) -> dict[str, Param]:
    """Declare ``spec``'s kernel parameters (after the GEMM's own); {} without an epilogue."""
    if spec is None:
        return {}
    return {name: k.param(name, ty) for name, ty in spec.params}


def f32_imm(v: float) -> str:
    """A PTX f32 immediate (``0fXXXXXXXX``, the value rounded to f32)."""
    return "0f" + struct.pack(">f", v).hex().upper()


def emit_program(k: Kernel, program: Sequence[Instr], x: Reg) -> None:
    """Emit an activation program on register ``x`` (in place; temporaries are new f32
    registers)."""
    regs: dict[str, Any] = {"x": x}

    def src(v: str | float) -> Any:
        return f32_imm(v) if isinstance(v, float) else regs[v]

    for op, dst, srcs in program:
        s = [src(v) for v in srcs]
        if dst not in regs:
            regs[dst] = k.reg("f32")
        d = regs[dst]
        if op in ("mul", "add", "max"):
            k.ins(f"{op}.f32" if op == "max" else f"{op}.rn.f32", d, *s)
        elif op == "fma":
            k.ins("fma.rn.f32", d, *s)
        elif op == "abs":
            k.ins("abs.f32", d, *s)
        elif op == "ex2":
            k.ins("ex2.approx.ftz.f32", d, *s)
        elif op == "rcp":
            k.ins("rcp.approx.ftz.f32", d, *s)
        elif op == "selneg":
            neg = k.reg("pred")
            k.ins("setp.lt.f32", neg, x, f32_imm(0.0))
            k.ins("selp.f32", d, *s, neg)
        else:  # pragma: no cover - the programs above use only these
            raise EpilogueError(f"unknown f32 op {op!r}")


def thread_row_col(thread: int) -> tuple[int, int]:
    """(row, column) of a consumer thread's accumulator element 0 in its 64-row slab."""
    lane = thread % 32
    return 16 * (thread // 32) + lane // 4, 2 * (lane % 4)


@functools.cache
def check_fragment(bn: int) -> None:
    """Every accumulator element ``i`` of every thread is at :func:`thread_row_col` plus
    (8 ((i // 2) % 2), 8 (i // 4) + i % 2): the offsets the loads below use, checked against
    the fragment formula of :mod:`nvatom.atoms.wgmma_fragments`."""
    for t in range(WARPGROUP):
        r0, c0 = thread_row_col(t)
        for i in range(bn // 2):
            want = (r0 + 8 * ((i // 2) % 2), c0 + 8 * (i // 4) + i % 2)
            if accumulator_coord(bn, t, i) != want:  # pragma: no cover - fragment guard
                raise EpilogueError(f"epilogue offsets of thread {t} element {i}")


_BYTES = {"bf16": 2, "f16": 2, "f32": 4}
#: Registers a consumer thread keeps for everything but the accumulators and the epilogue's
#: preloaded values (addresses, counters, the tile loop's state).
_RESERVED_REGS = 48


def preload_groups(cfg: Any, half: int | None) -> int:
    """How many 8-column groups of a chunk the epilogue loads before the chunk's barrier
    wait (their latency then overlaps it; the others are loaded where they are used): as
    many as the registers left beside the live accumulators hold (ping-pong's first half:
    both halves' accumulators are live), within :data:`_RESERVED_REGS` and a user
    epilogue's own (:attr:`~nvatom.kernels.sm90.user_epilogue.UserEpilogue.registers`)."""
    spec = cfg.epilogue
    live = cfg.block_n // 2 * (2 if half == 0 else 1)
    per_pair = _BYTES[cfg.out_dtype] // 2
    cost = 2 * per_pair * (int(spec.c) + int(spec.residual))
    cost += _BYTES[spec.bias_dtype] // 2 if spec.bias == "col" else 0
    spare = cfg.consumer_regs - live - _RESERVED_REGS
    spare -= spec.user.registers if spec.user is not None else 0
    chunk = cfg.c_chunk_cols // 8
    return chunk if cost == 0 else max(0, min(chunk, spare // cost))


class FusedEpilogue:
    """One warpgroup's fused epilogue for one 64-row slab of a tile (rows ``row0``..,
    columns ``col0``..): the constructor emits the per-slab setup (parameters, the thread's
    two rows clamped to M - 1, their C / residual row addresses, a row bias);
    :meth:`load` emits one chunk's loads and :meth:`apply` its f32 arithmetic."""

    def __init__(self, k: Kernel, cfg: Any, params: dict[str, Param], tid: Reg, row0: Reg,
                 col0: Reg, dims: tuple[Reg, Reg, Reg], half: int | None = None) -> None:
        spec, out_dtype, bn = cfg.epilogue, cfg.out_dtype, cfg.block_n
        check_fragment(bn)
        self.k, self.spec, self.out_dtype = k, spec, out_dtype
        self.preload = preload_groups(cfg, half)
        m, n = dims[0], dims[1]
        self.n = n
        k.comment(f"fused epilogue ({spec.tag}): act(alpha acc + beta C + bias) + residual")
        p = {name: k.ld_param(prm) for name, prm in params.items()}
        self.alpha, self.beta = p.get("alpha"), p.get("beta")
        for name in ("c", "bias", "residual"):
            if name in p:
                k.ins("cvta.to.global.u64", p[name], p[name])
        lt = _u32(k, "and.b32", tid, WARPGROUP - 1)
        lane = _u32(k, "and.b32", lt, 31)
        warp = _u32(k, "shr.u32", lt, 5)
        g = _u32(k, "shr.u32", lane, 2)
        r = _u32(k, "mad.lo.u32", warp, 16, g)
        k.ins("add.u32", r, r, row0)
        mlast = _u32(k, "sub.u32", m, 1)
        rows = []
        for h in (0, 1):
            rh = _u32(k, "add.u32", r, 8 * h)
            k.ins("min.u32", rh, rh, mlast)
            rows.append(rh)
        c = _u32(k, "and.b32", lane, 3)
        k.ins("shl.b32", c, c, 1)
        k.ins("add.u32", c, c, col0)
        self.col = c  # the thread's first column in the tile (absolute)
        eb = _BYTES[out_dtype]
        self.c_rows = self._row_addresses(p, "c", "ldc", rows, eb)
        self.r_rows = self._row_addresses(p, "residual", "ldr", rows, eb)
        self.bias_ptr = p.get("bias")
        self.bias_rows: list[Reg] = []
        if spec.bias == "row":
            bb = _BYTES[spec.bias_dtype]
            for rh in rows:
                addr = k.reg("u64")
                k.ins("mad.wide.u32", addr, rh, bb, self.bias_ptr)
                self.bias_rows.append(self._load_one(addr, spec.bias_dtype))
        self.rows, self.user = rows, spec.user
        if self.user is not None:
            self._user_setup(p)

    def _user_setup(self, p: dict[str, Reg]) -> None:
        """A user epilogue's per-slab setup: its scalars' registers, its tensors' global
        addresses and, when it reads columns, N - 1 (the last column)."""
        k, user = self.k, self.user
        assert user is not None
        k.comment(f"user epilogue '{user.name}' ({user.tag}): last, on every element")
        self.user_args = {s: p[f"u_{s}"] for s in user.scalars}
        self.user_ptrs: dict[str, Reg] = {}
        for name in user.tensor_names:
            ptr = self.user_ptrs[name] = p[f"u_{name}"]
            k.ins("cvta.to.global.u64", ptr, ptr)
        self.nlast = _u32(k, "sub.u32", self.n, 1) if user.uses_col else None
        self.user_rows: dict[tuple[str, int], Reg] = {}  # a row tensor's values, per slab

    def _apply_user(self, x: Reg, j: int, h: int, e: int, cache: dict[Any, Reg]) -> None:
        """The user epilogue on element ``4 j + 2 h + e`` (row half h, column 8 j + e): its
        column (clamped to N - 1) and tensor values made once per column group (``cache``),
        a row tensor's once per slab."""
        k, user = self.k, self.user
        assert user is not None
        col = cache.get(("%col", e))  # (a tensor's name is an identifier: no '%')
        if col is None and user.uses_col:
            col = cache[("%col", e)] = _u32(k, "add.u32", self.col, 8 * j + e)
            k.ins("min.u32", col, col, self.nlast)
        row = self.rows[h]

        def load(name: str) -> Reg:
            kind, dt = user.tensor(name)
            store, key = (self.user_rows, (name, h)) if kind == "row" else (cache, (name, e))
            got = store.get(key)
            if got is None:
                addr = k.reg("u64")
                k.ins("mad.wide.u32", addr, row if kind == "row" else col, _BYTES[dt],
                      self.user_ptrs[name])
                got = store[key] = self._load_one(addr, dt, nc=False)
            return got

        user.emit(k, x, row, col, self.user_args, load)

    def _row_addresses(self, p: dict[str, Reg], ptr: str, ld: str, rows: Sequence[Reg],
                       eb: int) -> list[Reg]:
        if ptr not in p:
            return []
        k, out = self.k, []
        for rh in rows:
            off = k.reg("u64")
            k.ins("mul.wide.u32", off, rh, p[ld])
            addr = k.reg("u64")
            k.ins("mad.lo.u64", addr, off, eb, p[ptr])
            out.append(addr)
        return out

    def _load_one(self, addr: Reg, dt: str, nc: bool = True) -> Reg:
        """One element at ``addr`` as f32 (read-only data: ``.nc``, unless not ``nc``)."""
        k = self.k
        f = k.reg("f32")
        cache = ".nc" if nc else ""
        if dt == "f32":
            k.ins(f"ld.global{cache}.f32", f, f"[{addr}]")
            return f
        h = k.reg("b16")
        k.ins(f"ld.global{cache}.b16", h, f"[{addr}]")
        k.ins(f"cvt.f32.{dt}", f, h)
        return f

    def _load_pair(self, addr: Reg, dt: str, nc: bool) -> Any:
        """Two adjacent elements at ``addr`` (raw: a b32 of two 16-bit, or two f32)."""
        k = self.k
        cache = ".nc" if nc else ""
        if dt == "f32":
            v = [k.reg("f32"), k.reg("f32")]
            k.ins(f"ld.global{cache}.v2.f32", v, f"[{addr}]")
            return v
        w = k.reg("b32")
        k.ins(f"ld.global{cache}.b32", w, f"[{addr}]")
        return w

    def _unpack(self, raw: Any, dt: str) -> list[Reg]:
        """A loaded pair as two f32 (bf16: the bits shifted into place; f16: ``cvt``)."""
        k = self.k
        if dt == "f32":
            return list(raw)
        out = [k.reg("f32"), k.reg("f32")]
        if dt == "bf16":
            lo, hi = k.reg("b32"), k.reg("b32")
            k.ins("shl.b32", lo, raw, 16)
            k.ins("and.b32", hi, raw, 0xFFFF0000)
            k.ins("mov.b32", out[0], lo)
            k.ins("mov.b32", out[1], hi)
        else:
            h = [k.reg("b16"), k.reg("b16")]
            k.ins("mov.b32", h, raw)
            for e in (0, 1):
                k.ins(f"cvt.f32.{dt}", out[e], h[e])
        return out

    def load(self, groups: range, *, all_: bool = False) -> dict[tuple[str, int, int], Any]:
        """Emit the loads of column groups ``groups`` (8 columns each: j covers the thread's
        columns ``col + 8 j`` and ``+1``; only the first :attr:`preload` of them unless
        ``all_``: :meth:`apply` loads the others where it needs them): C and residual for
        both rows and a column bias, all plain ``ld.global`` (C and residual may be ``out``
        itself, each element read before its own chunk is stored; for the bias, ptxas
        merged ``.nc`` loads of one address across the barriers, so a ping-pong tile's
        column bias stayed live from its first half into the second and spilled).  Columns
        past N read column 0."""
        k, spec, dt = self.k, self.spec, self.out_dtype
        raw: dict[tuple[str, int, int], Any] = {}
        if not (spec.c or spec.residual or spec.bias == "col"):
            return raw  # nothing is read per column
        for j in (groups if all_ else groups[:self.preload]):
            cj = _u32(k, "add.u32", self.col, 8 * j)
            inside = k.reg("pred")
            k.ins("setp.lt.u32", inside, cj, self.n)
            k.ins("selp.u32", cj, cj, 0, inside)
            for name, rows in (("c", self.c_rows), ("r", self.r_rows)):
                for h, base in enumerate(rows):
                    addr = k.reg("u64")
                    k.ins("mad.wide.u32", addr, cj, _BYTES[dt], base)
                    raw[(name, j, h)] = self._load_pair(addr, dt, nc=False)
            if spec.bias == "col":
                addr = k.reg("u64")
                k.ins("mad.wide.u32", addr, cj, _BYTES[spec.bias_dtype], self.bias_ptr)
                raw[("b", j, 0)] = self._load_pair(addr, spec.bias_dtype, nc=False)
        return raw

    def apply(self, acc: Sequence[Reg], groups: range,
              raw: dict[tuple[str, int, int], Any]) -> None:
        """Emit ``acc[i] = act(alpha acc[i] + beta C + bias) + residual`` (then the user
        epilogue) for the elements of column groups ``groups`` (element ``4 j + 2 h + e``: row
        half h, column 8 j + e)."""
        k, spec, dt = self.k, self.spec, self.out_dtype
        program = ACTIVATION_PROGRAMS.get(spec.activation, ())
        for j in groups:
            cache: dict[Any, Reg] = {}  # a user epilogue's columns and column values
            if ("c", j, 0) not in raw and ("b", j, 0) not in raw and ("r", j, 0) not in raw:
                raw.update(self.load(range(j, j + 1), all_=True))
            bias = self._unpack(raw[("b", j, 0)], spec.bias_dtype) if spec.bias == "col" \
                else None
            for h in (0, 1):
                cv = self._unpack(raw[("c", j, h)], dt) if spec.c else None
                rv = self._unpack(raw[("r", j, h)], dt) if spec.residual else None
                for e in (0, 1):
                    x = acc[4 * j + 2 * h + e]
                    if self.alpha is not None:
                        k.ins("mul.rn.f32", x, x, self.alpha)
                    if cv is not None:
                        k.ins("fma.rn.f32", x, cv[e], self.beta, x)
                    if bias is not None:
                        k.ins("add.rn.f32", x, x, bias[e])
                    elif self.bias_rows:
                        k.ins("add.rn.f32", x, x, self.bias_rows[h])
                    emit_program(k, program, x)
                    if rv is not None:
                        k.ins("add.rn.f32", x, x, rv[e])
                    if self.user is not None:
                        self._apply_user(x, j, h, e, cache)

