"""The SM80 GEMM: ``D = A @ B`` with cp.async multistage pipelining, swizzled shared memory,
ldmatrix and ``mma.sync.m16n8k16``, built only from nvatom atoms and emitters.

One CTA computes a ``bm x bn`` tile of D with ``warps_m x warps_n`` warps; each warp owns a
``(bm / warps_m) x (bn / warps_n)`` sub-tile of ``m16n8`` MMA accumulators (f32).  The K loop
streams ``bk``-deep slices of A and B through ``stages`` shared-memory buffers:

1. **gmem -> smem**: ``atom.simt_async_copy<16>.src_size`` (``cp.async.cg`` 16 B with zero fill):
   each thread copies 16-byte chunks along the operand's contiguous dimension; chunks past M,
   N or K get ``src-size`` 0..16 so ragged tiles read zeros (PTX ISA "cp.async").  Shared
   tiles are ``nvatom.atoms.smem.smem_layout`` swizzled tiles (CuTe's WGMMA layout atoms, 64/128 B
   swizzles), so the 16-byte rows ldmatrix reads are bank-conflict free.
2. **smem -> registers**: ``ldmatrix`` x4 (A, K-major; ``.trans`` for M-major A) and
   ``ldmatrix`` x4 built from the x2 B atom for two n8 tiles (``.trans`` for N-major B, i.e. a
   row-major ``K x N`` torch tensor).  Row addresses are ``nvatom.atoms.copy.row_addresses``
   of the atom and MMA form, mapped into the swizzled tile by the layout algebra.
3. **mma.sync** of the register MMA atom ``sm80.mma.m16n8k16.f32.<t>.<t>.f32``.
4. **epilogue**: accumulator pairs (the form's C layout) are rounded (``cvt.rn.bf16x2.f32`` /
   ``cvt.rn.f16x2.f32``) or kept as f32 and stored with predicates for ragged M and N.

Every per-thread address is a layout evaluated at the thread index in PTX
(``nvatom.ptx.layout_eval``); the per-value parts are compile-time constants, folded as an
``add`` or, where the swizzle makes the difference lane-dependent, an ``xor`` (checked in Python
for every thread before it is emitted).

Supported: A ``M x K`` and B ``K x N`` 16-bit (bf16 or f16, both the same), either operand
K-major or MN-major, unit stride in the contiguous dimension, the other stride a multiple of
8 elements (16-byte rows for cp.async); output bf16, f16 or f32 with unit column stride.

Sources: PTX ISA "cp.async", "ldmatrix", "mma.sync (m16n8k16)", "cvt", "Dynamic shared
memory" (``.extern .shared``); the multistage structure follows CUTLASS's sm80 mainloop.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

from nvatom.arch import Target, target
from nvatom.atoms.copy import MatrixCopy, SimtAsyncCopy, copy_atom, row_addresses
from nvatom.atoms.mma import MmaForm
from nvatom.atoms.registry import mma_form
from nvatom.atoms.smem import smem_layout, smem_swizzle
from nvatom.dtypes import dtype
from nvatom.errors import NvatomError
from nvatom.kernels.tensor import thread_offsets
from nvatom.layout import ComposedLayout, Layout
from nvatom.ptx import copy_emit, mma_emit
from nvatom.ptx import sync_emit as SE
from nvatom.ptx.builder import Kernel, Module, Reg
from nvatom.ptx.layout_eval import emit_layout_offset

__all__ = [
    "DYNAMIC_SMEM",
    "IN_DTYPES",
    "OUT_DTYPES",
    "GemmSm80Config",
    "GemmSm80Error",
    "GemmSm80Spec",
    "build_gemm_sm80",
    "copy_plan",
    "emit_ptx",
    "kernel_params",
    "ldsm_atoms",
    "ldsm_plan",
    "operands",
]

#: Input element types (A and B alike) and output types the kernel offers.
IN_DTYPES = ("bf16", "f16")
OUT_DTYPES = ("bf16", "f16", "f32")
#: Name of the module-scope dynamic shared-memory array (``.extern .shared``).
DYNAMIC_SMEM = "gemm_smem"
#: Parameters in order: three global pointers, the sizes and the row strides (elements).
_PARAMS = (("A", "u64"), ("B", "u64"), ("D", "u64"), ("M", "u32"), ("N", "u32"),
           ("K", "u32"), ("lda", "u32"), ("ldb", "u32"), ("ldd", "u32"))
_CHUNK = 16  # bytes per cp.async
_ESIZE = dtype(IN_DTYPES[0]).storage_bits // 8  # bytes per input element (all 16-bit)
assert all(dtype(t).storage_bits == 8 * _ESIZE for t in IN_DTYPES)


class GemmSm80Error(NvatomError, ValueError):
    """A GEMM configuration or problem the SM80 kernel cannot run."""


@dataclasses.dataclass(frozen=True)
class GemmSm80Config:
    """Tiling of the SM80 kernel (the performance knobs)."""

    bm: int = 128
    bn: int = 128
    bk: int = 32
    warps_m: int = 2
    warps_n: int = 2
    stages: int = 4
    group_m: int = 8  # CTAs along M that share a band of B (L2 reuse)

    def __post_init__(self) -> None:
        for name in ("bm", "bn", "bk", "warps_m", "warps_n", "stages", "group_m"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise GemmSm80Error(f"GemmSm80Config.{name} must be a positive int, got {v!r}")
        if self.bm % (16 * self.warps_m) or self.bn % (16 * self.warps_n):
            raise GemmSm80Error(
                f"tile {self.bm}x{self.bn} does not split into {self.warps_m}x{self.warps_n} "
                "warp tiles of whole m16 x n16 blocks")
        if self.bk % 32:
            raise GemmSm80Error(f"bk={self.bk}: must be a multiple of 32 (64-byte rows)")
        if self.stages < 2:
            raise GemmSm80Error(f"stages={self.stages}: the pipeline needs at least 2")

    @property
    def threads(self) -> int:
        return 32 * self.warps_m * self.warps_n

    @property
    def warp_m(self) -> int:
        return self.bm // self.warps_m

    @property
    def warp_n(self) -> int:
        return self.bn // self.warps_n

    def stage_bytes(self) -> int:
        return (self.bm + self.bn) * self.bk * _ESIZE

    def smem_bytes(self) -> int:
        """Dynamic shared memory one CTA needs."""
        return self.stages * self.stage_bytes()


@dataclasses.dataclass(frozen=True)
class GemmSm80Spec:
    """Everything the PTX depends on: the cache key of a compiled kernel (with the target)."""

    in_dtype: str = "bf16"
    out_dtype: str = "bf16"
    a_major: str = "K"  # "K": A is M x K row-major; "M": A^T is contiguous
    b_major: str = "N"  # "N": B is K x N row-major (torch's a @ b); "K": B^T is contiguous
    config: GemmSm80Config = GemmSm80Config()

    def __post_init__(self) -> None:
        if self.in_dtype not in IN_DTYPES:
            raise GemmSm80Error(f"input dtype '{self.in_dtype}' (one of {', '.join(IN_DTYPES)})")
        if self.out_dtype not in OUT_DTYPES:
            raise GemmSm80Error(
                f"output dtype '{self.out_dtype}' (one of {', '.join(OUT_DTYPES)})")
        if self.a_major not in ("K", "M"):
            raise GemmSm80Error(f"a_major '{self.a_major}' (one of K, M)")
        if self.b_major not in ("K", "N"):
            raise GemmSm80Error(f"b_major '{self.b_major}' (one of K, N)")

    @property
    def kernel_name(self) -> str:
        c = self.config
        return (f"gemm_sm80_{self.in_dtype}_{self.out_dtype}_a{self.a_major}_b{self.b_major}_"
                f"{c.bm}x{c.bn}x{c.bk}_w{c.warps_m}x{c.warps_n}_s{c.stages}_g{c.group_m}")

    @property
    def form(self) -> MmaForm:
        t = self.in_dtype
        return mma_form(f"sm80.mma.m16n8k16.f32.{t}.{t}.f32")

    @property
    def out_bytes(self) -> int:
        return dtype(self.out_dtype).storage_bits // 8

    def grid(self, m: int, n: int) -> tuple[int, int, int]:
        """1-D grid of CTAs; the kernel maps the CTA index to a (tile m, tile n) pair."""
        c = self.config
        return (-(-m // c.bm) * -(-n // c.bn), 1, 1)

    def block(self) -> tuple[int, int, int]:
        return (self.config.threads, 1, 1)


def kernel_params() -> tuple[tuple[str, str], ...]:
    """(name, PTX type) of the kernel's parameters, in order."""
    return _PARAMS


# --------------------------------------------------------------------------- address helpers


def _add32(k: Kernel, a: Reg | str | int, b: Reg | str | int) -> Reg:
    out = k.reg("u32")
    k.ins("add.u32", out, a, b)
    return out


@dataclasses.dataclass(frozen=True)
class _Operand:
    """One input operand's CTA tile: shape (mn, k) in smem coordinates and its majorness."""

    name: str  # "A" or "B"
    mn: int  # bm or bn
    bk: int
    major: str  # "K" or "MN"

    @functools.cached_property
    def tile(self) -> Layout | ComposedLayout:
        """The swizzled smem tile, (mn, k) -> element offset."""
        contiguous_bytes = (self.bk if self.major == "K" else self.mn) * _ESIZE
        sw128, sw64 = smem_swizzle("SW128"), smem_swizzle("SW64")
        swizzle = sw128 if contiguous_bytes % sw128.row_bytes == 0 else sw64
        return smem_layout(self.mn, self.bk, _ESIZE * 8, self.major, swizzle)

    def idx(self, mn: int, kk: int) -> int:
        """Colexicographic 1-D coordinate of (mn, k) in the tile."""
        return mn + self.mn * kk

    @property
    def contiguous(self) -> int:
        return self.bk if self.major == "K" else self.mn

    @property
    def lines(self) -> int:
        return self.mn if self.major == "K" else self.bk


def copy_plan(op: _Operand, nthreads: int) -> tuple[Layout, list[int], int]:
    """Thread -> tile coordinate of its first 16-byte chunk, the coordinate deltas of its other
    chunks, and the line step between them.  Consecutive threads walk the contiguous
    dimension (coalesced), then the lines."""
    per_chunk = _CHUNK // _ESIZE
    cpr = op.contiguous // per_chunk  # chunks per line
    total = op.lines * cpr
    if total % nthreads or nthreads % cpr:
        raise GemmSm80Error(f"{op.name} tile {op.mn}x{op.bk} does not split into 16-byte "
                            f"chunks over {nthreads} threads")
    lines_per_pass = nthreads // cpr
    if op.major == "K":  # contiguous = k, lines = mn
        thr = Layout((cpr, lines_per_pass), (op.idx(0, per_chunk), op.idx(1, 0)))
        step = op.idx(lines_per_pass, 0)
    else:  # contiguous = mn, lines = k
        thr = Layout((cpr, lines_per_pass), (op.idx(per_chunk, 0), op.idx(0, 1)))
        step = op.idx(0, lines_per_pass)
    return thr, [i * step for i in range(total // nthreads)], lines_per_pass


# --------------------------------------------------------------------------- the kernel


@dataclasses.dataclass
class _OperandState:
    op: _Operand
    smem_base: int  # byte offset of this operand inside one stage
    soff: list[Reg]  # per chunk: smem byte offset within the operand tile
    gptr: list[Reg]  # per chunk: global byte address of the current k-tile
    line_ok: list[Reg | None]  # per chunk: predicate "the line is inside the problem"
    step_bytes: Reg | int  # bytes the pointers advance per k-tile
    base: Reg | None = None  # the operand's global base: the address a chunk that reads
    # nothing (src-size 0) is given, so no copy names memory outside the tensor


def build_gemm_sm80(spec: GemmSm80Spec, target_: Target | str = "sm_80") -> Module:
    """The PTX module of one SM80 GEMM kernel (named ``spec.kernel_name``).

    Parameters (see :func:`kernel_params`): ``A, B, D`` global addresses, ``M, N, K``, and the
    row strides ``lda, ldb, ldd`` in elements.  Launch with ``spec.grid(M, N)``,
    ``spec.block()`` and ``spec.config.smem_bytes()`` bytes of dynamic shared memory.
    """
    t = target(target_)
    cp = copy_atom("atom.simt_async_copy<16>.src_size")
    assert isinstance(cp, SimtAsyncCopy)
    lds = ldsm_atoms(spec)
    (ld_a, _), (ld_b, ld_b_pair) = lds["A"], lds["B"]
    assert ld_b_pair is not None
    atoms = (cp, ld_a, ld_b, ld_b_pair)
    for a in atoms:
        if not a.available_on(t):
            raise GemmSm80Error(f"{a.name} is not available on {t.name}")
    features = [spec.form.feature, "cp.async", "ldmatrix"]
    version = max(spec.form.ptx_version_for(t), *(a.ptx_version_for(t) for a in atoms))
    mod = Module(t, features=features, version=version)
    b = _prologue(mod.kernel(spec.kernel_name), spec, cp)
    _k_loop(b, ld_a, ld_b)
    b.k.comment("epilogue: accumulator pairs -> D, predicated on M and N")
    _epilogue(b.k, spec, spec.form, b.acc, b.lane, b.warp, b.m0, b.n0, b.p, b.g["D"])
    return mod


@dataclasses.dataclass
class _Sm80Build:
    """What the main loop and the epilogue share, set up by :func:`_prologue`."""

    k: Kernel
    spec: GemmSm80Spec
    cp: SimtAsyncCopy
    p: dict[str, Reg]  # the parameters, loaded
    g: dict[str, Reg]  # A, B, D as global addresses
    sbase: Reg  # the dynamic shared memory's base
    m0: Reg
    n0: Reg
    ktiles: Reg
    copies: tuple[Any, Any]  # A's and B's cp.async setups (_copy_setup)
    kleft: Reg  # K - (first k of the next tile to load)
    lane: Reg
    warp: Reg
    ldsm: tuple[dict[Any, Any], dict[Any, Any]]  # A's and B's ldmatrix row addresses
    acc: list[list[list[Reg]]]  # [m16 block][n8 block] -> 4 f32 accumulators
    wstage: Reg  # the stage being written (byte offset)
    rstage: Reg  # the stage being read

    def advance(self, stage: Reg) -> None:
        k, cfg = self.k, self.spec.config
        stage_bytes = cfg.stage_bytes()
        pr = k.reg("pred")
        k.ins("add.u32", stage, stage, stage_bytes)
        k.ins("setp.ge.u32", pr, stage, cfg.stages * stage_bytes)
        k.ins("sub.u32", stage, stage, cfg.stages * stage_bytes, pred=str(pr))

    def load_tile(self) -> None:
        """cp.async the next k-tile into stage ``wstage``; zero fill past the problem."""
        k = self.k
        for st in self.copies:
            _issue_copies(k, self.cp, st, self.sbase, self.wstage, self.kleft)
        k.ins("sub.s32", self.kleft, self.kleft, self.spec.config.bk)
        copy_emit.emit_commit_group(k)
        self.advance(self.wstage)


def _prologue(k: Kernel, spec: GemmSm80Spec, cp: SimtAsyncCopy) -> _Sm80Build:
    """Parameters, the CTA's tile, the copy and ldmatrix address setups, zeroed
    accumulators and the stage counters."""
    cfg = spec.config
    k.maxntid = (cfg.threads, 1, 1)
    nthr = cfg.threads
    p = {name: k.ld_param(k.param(name, ty)) for name, ty in _PARAMS}
    g = {}
    for name in ("A", "B", "D"):
        g[name] = k.reg("u64")
        k.ins("cvta.to.global.u64", g[name], p[name])
    tid = k.reg("u32")
    k.ins("mov.u32", tid, "%tid.x")
    sbase = k.reg("u32")
    k.ins("mov.u32", sbase, k.dynamic_shared(DYNAMIC_SMEM, align=1024))

    k.comment("CTA index -> (tile m, tile n), grouped along M for L2 reuse")
    tile_m, tile_n = _cta_tile(k, p["M"], p["N"], cfg)
    m0, n0 = k.reg("u32"), k.reg("u32")
    k.ins("mul.lo.u32", m0, tile_m, cfg.bm)
    k.ins("mul.lo.u32", n0, tile_n, cfg.bn)
    ktiles = k.reg("u32")
    k.ins("add.u32", ktiles, p["K"], cfg.bk - 1)
    k.ins("div.u32", ktiles, ktiles, cfg.bk)

    op_a, op_b = operands(spec)
    k.comment("gmem -> smem chunk addresses (thread part evaluated, chunk parts folded)")
    st_a = _copy_setup(k, op_a, 0, tid, nthr, g["A"], p["lda"], m0, p["M"], p["K"])
    st_b = _copy_setup(k, op_b, cfg.bm * cfg.bk * _ESIZE, tid, nthr, g["B"], p["ldb"], n0,
                       p["N"], p["K"])
    kleft = k.reg("s32")
    k.ins("mov.b32", kleft, p["K"])

    k.comment("smem -> register row addresses for ldmatrix")
    lane, warp = k.reg("u32"), k.reg("u32")
    k.ins("and.b32", lane, tid, 31)
    k.ins("shr.u32", warp, tid, 5)
    a_addr = _ldsm_setup(k, spec, "A", tid)
    b_addr = _ldsm_setup(k, spec, "B", tid)

    mi_n, ni_n = cfg.warp_m // 16, cfg.warp_n // 8
    acc = [[k.regs("f32", 4) for _ in range(ni_n)] for _ in range(mi_n)]
    for row in acc:
        for regs in row:
            for r in regs:
                k.ins("mov.f32", r, "0f00000000")
    wstage, rstage = k.reg("u32"), k.reg("u32")
    k.ins("mov.u32", wstage, 0)
    k.ins("mov.u32", rstage, 0)
    return _Sm80Build(k, spec, cp, p, g, sbase, m0, n0, ktiles, (st_a, st_b), kleft, lane,
                      warp, (a_addr, b_addr), acc, wstage, rstage)


def _k_loop(b: _Sm80Build, ld_a: MatrixCopy, ld_b: MatrixCopy) -> None:
    """The multistage K loop: ``stages - 1`` tiles in flight ahead of the one computed."""
    k, cfg = b.k, b.spec.config
    k.comment(f"prologue: fill {cfg.stages - 1} stages")
    for _ in range(cfg.stages - 1):
        b.load_tile()
    copy_emit.emit_wait_group(k, cfg.stages - 2)
    k.ins("bar.sync", 0)

    kt = k.reg("u32")
    k.ins("mov.u32", kt, 0)
    done = k.reg("pred")
    k.label("K_LOOP")
    k.ins("setp.ge.u32", done, kt, b.ktiles)
    k.bra("K_END", done, uni=True)
    b.load_tile()
    k.comment("compute on stage rstage")
    for ks in range(cfg.bk // 16):
        _compute_step(b, ld_a, ld_b, ks)
    copy_emit.emit_wait_group(k, cfg.stages - 2)
    k.ins("bar.sync", 0)
    b.advance(b.rstage)
    k.ins("add.u32", kt, kt, 1)
    k.bra("K_LOOP", uni=True)
    k.label("K_END")
    copy_emit.emit_wait_all(k)


def _compute_step(b: _Sm80Build, ld_a: MatrixCopy, ld_b: MatrixCopy, ks: int) -> None:
    """One k16 step on stage ``rstage``: ldmatrix the warp's A and B fragments, then every
    m16 x n8 MMA of the warp tile."""
    k, cfg, form = b.k, b.spec.config, b.spec.form
    mi_n, ni_n = cfg.warp_m // 16, cfg.warp_n // 8
    a_addr, b_addr = b.ldsm
    fa = []
    for mi in range(mi_n):
        regs = k.regs("b32", 4)
        addr = _add32(k, _add32(k, b.sbase, b.rstage), a_addr[(mi, ks)])
        copy_emit.emit_matrix_copy(k, ld_a, regs, addr)
        fa.append(regs)
    fb = []
    for nj in range(ni_n // 2):
        regs = k.regs("b32", 4)
        addr = _add32(k, _add32(k, b.sbase, b.rstage), b_addr[(nj, ks)])
        copy_emit.emit_matrix_copy(k, ld_b, regs, addr)
        fb += [regs[0:2], regs[2:4]]
    for mi in range(mi_n):
        for ni in range(ni_n):
            c = b.acc[mi][ni]
            mma_emit.emit_mma(k, form, c, fa[mi], fb[ni], c)


def _cta_tile(k: Kernel, m: Reg, n: Reg, cfg: GemmSm80Config) -> tuple[Reg, Reg]:
    """CTA index -> (tile m, tile n): groups of ``group_m`` tile rows, column by column."""
    pid, tm, tn = k.reg("u32"), k.reg("u32"), k.reg("u32")
    k.ins("mov.u32", pid, "%ctaid.x")
    k.ins("add.u32", tm, m, cfg.bm - 1)
    k.ins("div.u32", tm, tm, cfg.bm)
    k.ins("add.u32", tn, n, cfg.bn - 1)
    k.ins("div.u32", tn, tn, cfg.bn)
    in_group, group, first, gsize, r = (k.reg("u32") for _ in range(5))
    k.ins("mul.lo.u32", in_group, tn, cfg.group_m)
    k.ins("div.u32", group, pid, in_group)
    k.ins("mul.lo.u32", first, group, cfg.group_m)
    k.ins("sub.u32", gsize, tm, first)
    k.ins("min.u32", gsize, gsize, cfg.group_m)
    k.ins("rem.u32", r, pid, in_group)
    out_m, out_n = k.reg("u32"), k.reg("u32")
    k.ins("rem.u32", out_m, r, gsize)
    k.ins("add.u32", out_m, out_m, first)
    k.ins("div.u32", out_n, r, gsize)
    return out_m, out_n


def _copy_setup(k: Kernel, op: _Operand, smem_base: int, tid: Reg, nthr: int, gbase: Reg,
                ld: Reg, mn0: Reg, mn_limit: Reg, k_limit: Reg) -> _OperandState:
    thr, deltas, lines_per_pass = copy_plan(op, nthr)
    soff = [_scale(k, r) for r in thread_offsets(k, tid, nthr, op.tile, thr, deltas)]
    per_chunk = _CHUNK // _ESIZE
    cpr = op.contiguous // per_chunk
    # thread -> (contiguous element, line) of its first chunk
    cchunk, line = k.reg("u32"), k.reg("u32")
    k.ins("rem.u32" if cpr & (cpr - 1) else "and.b32", cchunk, tid,
          cpr if cpr & (cpr - 1) else cpr - 1)
    k.ins("mul.lo.u32", cchunk, cchunk, per_chunk)
    k.ins("div.u32", line, tid, cpr)
    gptr: list[Reg] = []
    line_ok: list[Reg | None] = []
    nchunks = len(deltas)
    if op.major == "K":
        # lines are rows of A (m) or of B^T (n): fixed; the contiguous dim is k (advances)
        for i in range(nchunks):
            row = _add32(k, _add32(k, mn0, line), i * lines_per_pass)
            ok = k.reg("pred")
            k.ins("setp.lt.u32", ok, row, mn_limit)
            clamped = k.reg("u32")  # keep the address inside the tensor when the row is not
            k.ins("selp.b32", clamped, row, 0, ok)
            gptr.append(_gaddr(k, gbase, clamped, ld, cchunk))
            line_ok.append(ok)
        step: Reg | int = op.bk * _ESIZE
    else:
        # lines are k (advance); the contiguous dim is m or n (fixed): its bytes left are
        # the same for every k-tile, folded into a per-thread src-size below
        col = _add32(k, mn0, cchunk)
        for i in range(nchunks):
            kk = _add32(k, line, i * lines_per_pass)
            gptr.append(_gaddr(k, gbase, kk, ld, col))
            line_ok.append(None)
        step64 = k.reg("u64")
        k.ins("mul.wide.u32", step64, ld, op.bk * _ESIZE)
        step = step64
        # src bytes along the fixed contiguous dim: clamp(limit - col, 0, 8) * 2
        left = k.reg("s32")
        k.ins("sub.s32", left, mn_limit, col)
        k.ins("max.s32", left, left, 0)
        k.ins("min.s32", left, left, per_chunk)
        k.ins("shl.b32", left, left, 1)
        line_ok = [None] * nchunks
        st = _OperandState(op, smem_base, soff, gptr, line_ok, step, gbase)
        st.fixed_bytes = left  # type: ignore[attr-defined]
        st.line = line  # type: ignore[attr-defined]
        st.lines_per_pass = lines_per_pass  # type: ignore[attr-defined]
        return st
    st = _OperandState(op, smem_base, soff, gptr, line_ok, step, gbase)
    st.cchunk = cchunk  # type: ignore[attr-defined]
    return st


def _scale(k: Kernel, r: Reg) -> Reg:
    out = k.reg("u32")
    k.ins("shl.b32", out, r, _ESIZE.bit_length() - 1)
    return out


def _gaddr(k: Kernel, base: Reg, line: Reg, ld: Reg, col: Reg) -> Reg:
    """``base + (line * ld + col) * 2`` in 64 bits."""
    off, c64, out = k.reg("u64"), k.reg("u64"), k.reg("u64")
    k.ins("mul.wide.u32", off, line, ld)
    k.ins("cvt.u64.u32", c64, col)
    k.ins("add.s64", off, off, c64)
    k.ins("shl.b64", off, off, _ESIZE.bit_length() - 1)
    k.ins("add.s64", out, base, off)
    return out


def _issue_copies(k: Kernel, cp: SimtAsyncCopy, st: _OperandState, sbase: Reg, stage: Reg,
                  kleft: Reg) -> None:
    """One k-tile of an operand: per chunk a cp.async with its src-size, then advance."""
    per_chunk = _CHUNK // _ESIZE
    dst0 = k.reg("u32")
    k.ins("add.u32", dst0, sbase, stage)
    if st.op.major == "K":
        # bytes left along k for this thread's chunks: clamp(kleft - cchunk, 0, 8) * 2
        nbytes = k.reg("s32")
        k.ins("sub.s32", nbytes, kleft, st.cchunk)  # type: ignore[attr-defined]
        k.ins("max.s32", nbytes, nbytes, 0)
        k.ins("min.s32", nbytes, nbytes, per_chunk)
        k.ins("shl.b32", nbytes, nbytes, 1)
    for i, (so, gp) in enumerate(zip(st.soff, st.gptr, strict=True)):
        src = k.reg("u32")
        if st.op.major == "K":
            ok = st.line_ok[i]
            k.ins("selp.b32", src, nbytes, 0, ok)
        else:  # line = k: inside while (this chunk's k) < K
            ok = k.reg("pred")
            first = i * st.lines_per_pass  # type: ignore[attr-defined]
            rel = k.reg("s32")
            k.ins("sub.s32", rel, kleft, st.line)  # type: ignore[attr-defined]
            k.ins("setp.gt.s32", ok, rel, first)
            k.ins("selp.b32", src, st.fixed_bytes, 0, ok)  # type: ignore[attr-defined]
        dst = _add32(k, _add32(k, dst0, so), st.smem_base)
        # a chunk past the problem (src-size 0) reads nothing, but its address would still
        # point past the tensor (compute-sanitizer's initcheck reports such copies as reads
        # of uninitialized memory): it is given the tensor's base instead
        reads, addr = k.reg("pred"), k.reg("u64")
        k.ins("setp.ne.u32", reads, src, 0)
        k.ins("selp.b64", addr, gp, st.base, reads)
        copy_emit.emit_cp_async(k, cp, dst, addr, fill=src)
        k.ins("add.s64", gp, gp, st.step_bytes)


def operands(spec: GemmSm80Spec) -> tuple[_Operand, _Operand]:
    """The A and B shared-memory tiles of ``spec``."""
    cfg = spec.config
    return (_Operand("A", cfg.bm, cfg.bk, "K" if spec.a_major == "K" else "MN"),
            _Operand("B", cfg.bn, cfg.bk, "K" if spec.b_major == "K" else "MN"))


def ldsm_atoms(spec: GemmSm80Spec) -> dict[str, tuple[MatrixCopy, MatrixCopy | None]]:
    """Per operand: the ldmatrix atom issued, and (B) the x2 atom it is built from."""
    a = copy_atom("atom.ldsm<m8n8.x4>" if spec.a_major == "K" else "atom.ldsm<m8n8.x4.trans>")
    b_pair = copy_atom("atom.ldsm<m8n8.x2.trans>" if spec.b_major == "N" else "atom.ldsm<m8n8.x2>")
    b = copy_atom("atom.ldsm<m8n8.x4.trans>" if spec.b_major == "N" else "atom.ldsm<m8n8.x4>")
    assert isinstance(a, MatrixCopy) and isinstance(b, MatrixCopy)
    assert isinstance(b_pair, MatrixCopy)
    return {"A": (a, None), "B": (b, b_pair)}


def ldsm_plan(spec: GemmSm80Spec, operand: str) -> tuple[Layout, dict[tuple[int, int], int]]:
    """Thread -> 1-D tile coordinate of its ldmatrix row address (for the warp's first tile
    and k step), and the coordinate delta of every (m16 tile | n16 pair, k16 step)."""
    cfg = spec.config
    form = spec.form
    op = operands(spec)[0 if operand == "A" else 1]
    atom, pair_atom = ldsm_atoms(spec)[operand]
    if pair_atom is None:
        rows = row_addresses(atom, form, operand, op.major)
        lane_mn_k = _dense_coords(rows, form.m, form.k, op.major, 32)
    else:
        rows = row_addresses(pair_atom, form, operand, op.major)
        half = _dense_coords(rows, form.n, form.k, op.major, 16)
        # lanes 16-31 address the second n8 tile: the x4 is two x2's side by side
        lane_mn_k = half + [(mn + form.n, kk) for mn, kk in half]
    # thread -> 1-D tile coordinate: lane part (from the atom) + warp part (warp tile origin)
    if operand == "A":
        warp_stride = (op.idx(cfg.warp_m, 0), 0)
    else:
        warp_stride = (0, op.idx(cfg.warp_n, 0))
    lane_layout = _layout_of([op.idx(mn, kk) for mn, kk in lane_mn_k])
    thr = _concat(lane_layout, Layout((cfg.warps_m, cfg.warps_n), warp_stride))
    n_tiles = (cfg.warp_m if operand == "A" else cfg.warp_n) // 16
    deltas = {(j, ks): op.idx(j * 16, ks * 16)
              for j in range(n_tiles) for ks in range(cfg.bk // 16)}
    return thr, deltas


def _ldsm_setup(k: Kernel, spec: GemmSm80Spec, operand: str, tid: Reg
                ) -> dict[tuple[int, int], Reg]:
    """Byte offsets (inside a stage) of this thread's ldmatrix row address for every
    (m16 tile | pair of n8 tiles, k16 step) of its warp."""
    cfg = spec.config
    op = operands(spec)[0 if operand == "A" else 1]
    thr, deltas = ldsm_plan(spec, operand)
    offs = thread_offsets(k, tid, cfg.threads, op.tile, thr, list(deltas.values()))
    base = 0 if operand == "A" else cfg.bm * cfg.bk * _ESIZE
    out = {}
    for key, r in zip(deltas, offs, strict=True):
        b = _scale(k, r)
        if base:
            k.ins("add.u32", b, b, base)
        out[key] = b
    return out


def _dense_coords(rows: Layout, mn: int, kk: int, major: str, lanes: int
                  ) -> list[tuple[int, int]]:
    """lane -> (mn, k) of the row address, from the atom's offsets into the dense operand
    tile (K-major: ``mn * K + k``; MN-major: ``k * MN + mn``)."""
    out = []
    for lane in range(lanes):
        o = int(rows(lane))
        out.append((o // kk, o % kk) if major == "K" else (o % mn, o // mn))
    return out


def _layout_of(values: list[int]) -> Layout:
    """The layout (power-of-two modes) that maps i -> values[i]; raises if there is none."""
    n = len(values)
    shape, stride = [], []
    size = 1
    while size < n:
        shape.append(2)
        stride.append(values[size] - values[0])
        size *= 2
    lay = Layout(tuple(shape), tuple(stride))
    if size != n or any(int(lay(i)) + values[0] != v for i, v in enumerate(values)):
        raise GemmSm80Error(f"row addresses {values} are not an affine layout")
    if values[0]:
        raise GemmSm80Error("row addresses do not start at 0")
    return lay


def _concat(a: Layout, b: Layout) -> Layout:
    """The layout whose modes are ``a``'s then ``b``'s (CuTe's make_layout(a, b), flattened)."""
    def flat(t: object) -> tuple:
        return tuple(x for y in t for x in flat(y)) if isinstance(t, tuple) else (t,)

    return Layout(flat(a.shape) + flat(b.shape), flat(a.stride) + flat(b.stride))


def _epilogue(k: Kernel, spec: GemmSm80Spec, form: MmaForm, regs_c: list[list[list[Reg]]],
              lane: Reg, warp: Reg, m0: Reg, n0: Reg, p: dict[str, Reg], d: Reg) -> None:
    cfg = spec.config
    osize = spec.out_bytes
    # (lane, value) -> (m, n) of the accumulator, read off the form's C layout (column-major
    # element index m + 16 * n); values 0,1 and 2,3 are column pairs.
    c_tv = form.tv_layout("C")

    def mn(lane_: int, v: int) -> tuple[int, int]:
        e = int(c_tv(lane_, v))
        return e % form.m, e // form.m

    for ln in range(32):
        (r0, c0), (r1, c1) = mn(ln, 0), mn(ln, 1)
        (r2, c2) = mn(ln, 2)
        if not (r0 == r1 and c1 == c0 + 1 and c0 % 2 == 0 and mn(ln, 3) == (r2, c2 + 1)):
            raise GemmSm80Error(f"{form.name}: C values are not column pairs (lane {ln})")
    base_m = [mn(ln, 0)[0] for ln in range(32)]
    base_n = [mn(ln, 0)[1] for ln in range(32)]
    lane_m = emit_layout_offset(k, _layout_of(base_m), lane)
    lane_n = emit_layout_offset(k, _layout_of(base_n), lane)
    half_dm = mn(0, 2)[0] - mn(0, 0)[0]  # the second pair's row offset (8)
    wm, wn = k.reg("u32"), k.reg("u32")
    k.ins("rem.u32", wm, warp, cfg.warps_m)
    k.ins("div.u32", wn, warp, cfg.warps_m)
    row0, col0 = k.reg("u32"), k.reg("u32")
    k.ins("mad.lo.u32", row0, wm, cfg.warp_m, m0)
    k.ins("add.u32", row0, row0, lane_m)
    k.ins("mad.lo.u32", col0, wn, cfg.warp_n, n0)
    k.ins("add.u32", col0, col0, lane_n)
    # per row (mi, half): pointer and predicate; per n8 tile: column predicate
    col_ok = []
    for ni in range(len(regs_c[0])):
        c = _add32(k, col0, ni * form.n)
        ok = k.reg("pred")
        k.ins("setp.lt.u32", ok, c, p["N"])
        col_ok.append(ok)
    base_ptr = k.reg("u64")
    c64 = k.reg("u64")
    k.ins("mul.wide.u32", base_ptr, row0, p["ldd"])
    k.ins("cvt.u64.u32", c64, col0)
    k.ins("add.s64", base_ptr, base_ptr, c64)
    k.ins("mul.lo.u64", base_ptr, base_ptr, osize)
    k.ins("add.s64", base_ptr, base_ptr, d)
    for mi, row in enumerate(regs_c):
        for h in range(2):
            dr = mi * form.m + h * half_dm
            r = _add32(k, row0, dr)
            rok = k.reg("pred")
            k.ins("setp.lt.u32", rok, r, p["M"])
            rp, roff = k.reg("u64"), k.reg("u64")
            k.ins("mul.wide.u32", roff, p["ldd"], dr * osize)
            k.ins("add.s64", rp, base_ptr, roff)
            for ni, acc in enumerate(row):
                ok = k.reg("pred")
                k.ins("and.pred", ok, rok, col_ok[ni])
                lo, hi = acc[2 * h], acc[2 * h + 1]
                addr = f"[{rp}+{ni * form.n * osize}]"
                if spec.out_dtype == "f32":
                    k.ins("st.global.v2.f32", addr, [lo, hi], pred=str(ok))
                else:
                    packed = SE.cvt_pack_f32(k, spec.out_dtype, hi, lo)  # hi in bits 16-31
                    k.ins("st.global.b32", addr, packed, pred=str(ok))


def emit_ptx(spec: GemmSm80Spec, target_: Target | str = "sm_80") -> str:
    """PTX text of the kernel (with its module-scope dynamic shared-memory declaration)."""
    return build_gemm_sm80(spec, target_).emit()
