"""The SM80 GEMM: ``D = A @ B`` with cp.async multistage pipelining, swizzled shared memory,
ldmatrix and ``mma.sync.m16n8k16``, built on the typed-tensor kernel layer (docs/kernel-layer.md).

One CTA computes a ``bm x bn`` tile of D with ``warps_m x warps_n`` warps (the tiled MMA
``make_tiled_mma(form, (warps_m, warps_n, 1), (bm, bn, 16))``: each warp holds
``(bm / warps_m / 16) x (bn / warps_n / 8)`` m16n8 f32 accumulators, its atoms ``16 warps_m``
rows and ``8 warps_n`` columns apart).  The CTA index picks the tile in group-M order
(:class:`nvatom.kernels.scheduler.StaticPersistent`, ``group_m`` M tiles per sweep of N, for
L2 reuse).  The K loop streams ``bk``-deep slices of A and B through ``stages`` stages of
dynamic shared memory (:func:`nvatom.kernels.ragged.stage_rings`: A's then B's tile per
stage, ``.extern .shared`` of :meth:`GemmSm80Config.smem_bytes` bytes):

1. **gmem -> smem**: a tiled ``atom.simt_async_copy<16>.src_size`` (``make_tiled_copy``:
   consecutive threads along the contiguous dimension, 16-byte chunks) into
   ``nvatom.atoms.smem.smem_layout`` swizzled tiles (64/128-byte swizzles, so ldmatrix rows
   are bank-conflict free), hoisted out of the loop (:func:`nvatom.kernels.hoisted.ragged_loader`):
   each k-tile only moves the pointers and computes the K tail; chunks past M, N or K get a
   ``src-size`` below 16 and are zero-filled, a chunk that reads nothing addresses the
   operand's base.
2. **smem -> registers**: ``ldmatrix .x4`` (``.trans`` for M-major A / N-major B; for B one
   ``.x4`` loads two n8 fragments), row offsets hoisted
   (:func:`nvatom.kernels.hoisted.ldsm_reader`), checked against the MMA's fragments.
3. **mma.sync** of the tiled MMA (:func:`nvatom.kernels.tensor.mma`).
4. **epilogue**: the accumulators rounded (:func:`nvatom.kernels.tensor.convert`) or kept as
   f32.  A CTA whose tile lies inside M and N (one uniform branch on the tile) stages them:
   its column pairs into a 128-byte-swizzled smem tile over the ring
   (:func:`nvatom.kernels.ragged.reuse_rings`, between two barriers), then 16-byte stores of
   whole rows (:func:`nvatom.kernels.ragged.store_tile`) when D's base and pitch are 16-byte
   aligned (checked at run time: the host requires pair alignment only); an edge CTA, or
   any CTA of a D view that is not 16-byte aligned, stores the pairs predicated on M and N
   (:func:`nvatom.kernels.ragged.copy_ragged`; N is even, so a pair is never cut).
   ``epilogue="direct"`` stores an interior tile's pairs unpredicated instead (2-3% slower
   at short K, where the epilogue is up to a quarter of the time: docs/perf.md).

The setup the first mma needs and the first loads do not (ldmatrix row offsets, zeroed
accumulators) is emitted after the prologue's cp.asyncs, while they are in flight.

Every address, predicate and fragment mapping is derived by the layer from the atoms' layouts
and checked for every thread; this module only chooses the atoms and tiles.

Supported: A ``M x K`` and B ``K x N`` 16-bit (bf16 or f16, both the same), either operand
K-major or MN-major, unit stride in the contiguous dimension, the other stride a multiple of
8 elements (16-byte rows for cp.async); output bf16, f16 or f32 with unit column stride and
an even N (the host checks both).

Sources: PTX ISA "cp.async", "ldmatrix", "mma.sync (m16n8k16)", "cvt", "Dynamic shared
memory" (``.extern .shared``); the multistage structure follows CUTLASS's sm80 mainloop.
"""

from __future__ import annotations

import dataclasses

from nvatom.arch import Target, target
from nvatom.atoms.copy import MatrixCopy, copy_atom
from nvatom.atoms.mma import MmaForm
from nvatom.atoms.registry import mma_form
from nvatom.atoms.smem import smem_layout, smem_swizzle
from nvatom.atoms.tiled_copy import TiledCopy, make_tiled_copy
from nvatom.atoms.tiled_mma import WARP_ORDERS, TiledMma, make_tiled_mma
from nvatom.dtypes import dtype
from nvatom.errors import NvatomError
from nvatom.kernels import hoisted as H
from nvatom.kernels import ragged as R
from nvatom.kernels import tensor as T
from nvatom.kernels.scheduler import StaticPersistent
from nvatom.layout import ComposedLayout, Layout
from nvatom.ptx.builder import Kernel, Module, Reg
from nvatom.ptx.copy_emit import emit_commit_group, emit_wait_group
from nvatom.ptx.tiled_mma_emit import global_pointer

__all__ = [
    "DYNAMIC_SMEM",
    "IN_DTYPES",
    "OUT_DTYPES",
    "GemmSm80Config",
    "GemmSm80Error",
    "GemmSm80Spec",
    "Operand",
    "build_gemm_sm80",
    "emit_ptx",
    "kernel_params",
    "operands",
    "tiled_mma",
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
#: GemmSm80Config.epilogue's values
EPILOGUES = ("staged", "direct")
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
    # how the warps share the tile (atoms.tiled_mma.WARP_ORDERS): "interleaved" (CuTe's;
    # the default) or "blocked" (each warp one contiguous warp_m x warp_n block, as the
    # hand-written kernel had it: measured against the default in bench/gemm_sm80_port.py)
    warp_order: str = "interleaved"
    # how an interior tile's D leaves the registers (EPILOGUES): "staged" through the ring's
    # shared memory (swizzled), then 16-byte stores of whole lines (the default: measured
    # in bench/gemm_sm80_port.py); "direct": each thread's column pairs straight to gmem
    epilogue: str = "staged"

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
        if self.warp_order not in WARP_ORDERS:
            raise GemmSm80Error(f"warp_order={self.warp_order!r}: one of "
                                f"{', '.join(WARP_ORDERS)}")
        if self.epilogue not in EPILOGUES:
            raise GemmSm80Error(f"epilogue={self.epilogue!r}: one of {', '.join(EPILOGUES)}")

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
                f"{c.bm}x{c.bn}x{c.bk}_w{c.warps_m}x{c.warps_n}_s{c.stages}_g{c.group_m}"
                f"{'_wb' if c.warp_order == 'blocked' else ''}"
                f"{'_ed' if c.epilogue == 'direct' else ''}")

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


# --------------------------------------------------------------------------- the pieces


@dataclasses.dataclass(frozen=True)
class Operand:
    """One input operand's CTA tile: ``mn x bk`` (A: M x K, B: N x K, CuTe's orientation),
    its contiguous dimension (``major``: "K" or "MN"), swizzled shared-memory layout, tiled
    cp.async and ldmatrix atom."""

    name: str  # "A" or "B"
    mn: int  # bm or bn
    bk: int
    major: str  # "K" or "MN"
    layout: Layout | ComposedLayout  # (mn, k) -> element offset in shared memory
    copy: TiledCopy  # gmem -> smem
    ldsm: MatrixCopy  # smem -> the MMA fragment (B: two n8 fragments per instruction)


def operands(spec: GemmSm80Spec) -> tuple[Operand, Operand]:
    """The A and B tiles of ``spec``: layouts and atoms (the layer derives the rest)."""
    cfg = spec.config
    cp = copy_atom("atom.simt_async_copy<16>.src_size")  # zero fill past M, N, K
    per_chunk = _CHUNK // _ESIZE
    out = []
    for name, mn, k_major in (("A", cfg.bm, spec.a_major == "K"),
                              ("B", cfg.bn, spec.b_major == "K")):
        contiguous = cfg.bk if k_major else mn
        sw128, sw64 = smem_swizzle("SW128"), smem_swizzle("SW64")
        swizzle = sw128 if contiguous * _ESIZE % sw128.row_bytes == 0 else sw64
        major = "K" if k_major else "MN"
        cpr = contiguous // per_chunk  # chunks per line; consecutive threads along a line
        if cfg.threads % cpr or (mn * cfg.bk // per_chunk) % cfg.threads:
            raise GemmSm80Error(f"{name} tile {mn}x{cfg.bk} does not split into 16-byte "
                                f"chunks over {cfg.threads} threads")
        lines = cfg.threads // cpr
        if k_major:
            tc = make_tiled_copy(cp, Layout((lines, cpr), (cpr, 1)), Layout((1, per_chunk)))
        else:
            tc = make_tiled_copy(cp, Layout((cpr, lines), (1, cpr)), Layout((per_chunk, 1)))
        trans = ".trans" if not k_major else ""
        ldsm = copy_atom(f"atom.ldsm<m8n8.x4{trans}>")
        assert isinstance(ldsm, MatrixCopy)
        out.append(Operand(name, mn, cfg.bk, major,
                           smem_layout(mn, cfg.bk, _ESIZE * 8, major, swizzle), tc, ldsm))
    return out[0], out[1]


def staging_layout(spec: GemmSm80Spec) -> Layout | ComposedLayout:
    """The staged epilogue's ``bm x bn`` smem tile of D: rows of the 128-byte swizzle (the
    K-major operand layout with N as K), so the fragments' pairs (8 rows x 16 bytes a warp)
    and the 16-byte row reads both spread over all banks."""
    cfg, bits = spec.config, dtype(spec.out_dtype).storage_bits
    if cfg.bm * cfg.bn * bits // 8 > cfg.smem_bytes():
        raise GemmSm80Error(f"epilogue='staged': the {cfg.bm}x{cfg.bn} {spec.out_dtype} tile "
                            f"does not fit the ring's {cfg.smem_bytes()} bytes; use "
                            "epilogue='direct'")
    return smem_layout(cfg.bm, cfg.bn, bits, "K", smem_swizzle("SW128"))


def staging_copy(spec: GemmSm80Spec) -> TiledCopy:
    """smem -> gmem of the staged tile: ``atom.universal_copy<128>``, consecutive threads
    along a row (a warp stores whole 128-byte lines)."""
    cfg = spec.config
    atom = copy_atom("atom.universal_copy<128>")
    per = atom.bits // dtype(spec.out_dtype).storage_bits  # elements per store
    cpr = cfg.bn // per
    if cfg.bn % per or cfg.threads % cpr or (cfg.bm * cpr) % cfg.threads:
        raise GemmSm80Error(f"epilogue='staged': a {cfg.bm}x{cfg.bn} {spec.out_dtype} tile "
                            f"does not split into 16-byte row chunks over {cfg.threads} "
                            "threads; use epilogue='direct'")
    lines = cfg.threads // cpr
    return make_tiled_copy(atom, Layout((lines, cpr), (cpr, 1)), Layout((1, per)))


def tiled_mma(spec: GemmSm80Spec) -> TiledMma:
    """The CTA's tiled MMA for one k16 step: ``warps_m x warps_n`` warps over ``bm x bn``."""
    c = spec.config
    return make_tiled_mma(spec.form, atom_layout=(c.warps_m, c.warps_n, 1),
                          tile=(c.bm, c.bn, 16), warp_order=c.warp_order)


def build_gemm_sm80(spec: GemmSm80Spec, target_: Target | str = "sm_80") -> Module:
    """The PTX module of one SM80 GEMM kernel (named ``spec.kernel_name``).

    Parameters (see :func:`kernel_params`): ``A, B, D`` global addresses, ``M, N, K``, and the
    row strides ``lda, ldb, ldd`` in elements.  Launch with ``spec.grid(M, N)``,
    ``spec.block()`` and ``spec.config.smem_bytes()`` bytes of dynamic shared memory.
    """
    t = target(target_)
    op_a, op_b = operands(spec)
    atoms = (op_a.copy.atom, op_a.ldsm, op_b.ldsm)
    for a in atoms:
        if not a.available_on(t):  # type: ignore[attr-defined]
            raise GemmSm80Error(f"{a.name} is not available on {t.name}")  # type: ignore[attr-defined]
    version = max(spec.form.ptx_version_for(t),
                  *(a.ptx_version_for(t) for a in atoms))  # type: ignore[attr-defined]
    mod = Module(t, features=[spec.form.feature, "cp.async", "ldmatrix"], version=version)
    k = mod.kernel(spec.kernel_name)
    k.maxntid = (spec.config.threads, 1, 1)
    b = _Build(k, spec, tiled_mma(spec), op_a, op_b)
    b.mainloop()
    b.epilogue()
    return mod


class _Build:
    """The kernel: parameters, CTA tile and hoisted copies (here), the K loop, the epilogue."""

    def __init__(self, k: Kernel, spec: GemmSm80Spec, tiled: TiledMma, op_a: Operand,
                 op_b: Operand) -> None:
        cfg, t = spec.config, spec.in_dtype
        self.k, self.spec, self.tiled = k, spec, tiled
        ptr = {name: global_pointer(k, name) for name in ("A", "B", "D")}
        M, N, K, lda, ldb, ldd = (k.ld_param(k.param(n, ty)) for n, ty in _PARAMS[3:])
        T.thread_index(k)  # %tid.x, read once at the top
        gA = R.gmem_matrix(k, "A", t, (M, K), (lda, 1) if op_a.major == "K" else (1, lda),
                           base=ptr["A"])
        gB = R.gmem_matrix(k, "B", t, (N, K), (ldb, 1) if op_b.major == "K" else (1, ldb),
                           base=ptr["B"])
        self.gD = R.gmem_matrix(k, "D", spec.out_dtype, (M, N), (ldd, 1), multiple_of=(1, 2),
                                base=ptr["D"], align=2 * spec.out_bytes)  # pairs (host rule)
        k.comment("CTA index -> (tile m, tile n), grouped along M for L2 reuse")
        cta = k.reg("u32")
        k.ins("mov.u32", cta, "%ctaid.x")
        self.tm, self.tn = StaticPersistent(1, 1, cfg.group_m).emit_tile(
            k, cta, _ceil_div(k, M, cfg.bm), _ceil_div(k, N, cfg.bn))
        self.ktiles = _ceil_div(k, K, cfg.bk)
        self.rings = R.stage_rings(k, DYNAMIC_SMEM, t, [("sA", op_a.layout),
                                                        ("sB", op_b.layout)], cfg.stages)
        assert self.rings[0].stage_bytes * cfg.stages == cfg.smem_bytes()
        sA, sB = (r.first for r in self.rings)
        k.comment("hoisted: gmem chunk pointers, predicates and smem offsets")
        self.loads = (H.ragged_loader(k, op_a.copy, gA.tile_at(k, (cfg.bm, cfg.bk),
                                                               (self.tm, 0)), sA),
                      H.ragged_loader(k, op_b.copy, gB.tile_at(k, (cfg.bn, cfg.bk),
                                                               (self.tn, 0)), sB))
        self.ldsm = (op_a.ldsm, op_b.ldsm)

    def load(self, stage: Reg | int) -> None:
        """cp.async the loaders' next k-tile into ``stage``; one commit group."""
        for loader, s in zip(self.loads, R.stages_at(self.k, self.rings, stage), strict=True):
            loader.copy(self.k, s)
        emit_commit_group(self.k)

    def mainloop(self) -> None:
        """``stages - 1`` k-tiles in flight ahead of the one multiplied; past K the copies
        read nothing and fill zeros, so the loop has one branch, its back edge."""
        k, cfg = self.k, self.spec.config
        k.comment(f"prologue: fill {cfg.stages - 1} stages")
        for s in range(cfg.stages - 1):
            self.load(s)
        # what the first mma needs and the first loads do not, while those are in flight
        k.comment("hoisted: ldmatrix row offsets of every k16 step")
        sA, sB = (r.first for r in self.rings)
        steps = [(0, ks) for ks in range(cfg.bk // 16)]
        self.frags = [(T.fragment(k, self.tiled, "A", name=f"rA{ks}"),
                       T.fragment(k, self.tiled, "B", name=f"rB{ks}")) for _, ks in steps]
        self.readers = (H.ldsm_reader(k, self.ldsm[0], sA, self.frags[0][0], steps),
                        H.ldsm_reader(k, self.ldsm[1], sB, self.frags[0][1], steps))
        self.acc = T.fragment(k, self.tiled, "C", name="acc", zero=True)
        kt, read, write = k.reg("u32"), k.reg("u32"), k.reg("u32")
        for r, v in ((kt, 0), (read, 0), (write, cfg.stages - 1)):
            k.ins("mov.u32", r, v)
        loop, more = k.fresh_label("K_LOOP"), k.reg("pred")
        k.label(loop)
        emit_wait_group(k, cfg.stages - 2)  # k-tile kt has landed ...
        k.ins("bar.sync", 0)  # ... for every thread; the stage read last iteration is free
        self.load(write)  # k-tile kt + stages - 1
        k.comment("compute on stage read")
        a, b = (rd.at(k, s) for rd, s in zip(self.readers, R.stages_at(k, self.rings, read),
                                              strict=True))
        for ks, (ra, rb) in enumerate(self.frags):
            a.copy(k, ra, (0, ks))
            b.copy(k, rb, (0, ks))
            T.mma(k, self.tiled, self.acc, ra, rb, self.acc)
        k.ins("mov.u32", write, read)  # the next refill goes where this iteration read
        self.rings[0].advance(k, read)
        k.ins("add.u32", kt, kt, 1)
        k.ins("setp.lt.u32", more, kt, self.ktiles)
        k.bra(loop, more, uni=True)
        emit_wait_group(k, 0)  # the zero-filled copies past K, before the CTA exits

    def epilogue(self) -> None:
        """D = acc, rounded to bf16/f16 or kept f32.  An interior tile: staged (the pairs into
        a swizzled smem tile over the ring, then 16-byte stores of whole rows) or direct
        (the pairs unpredicated); an edge tile: the pairs predicated on M and N."""
        k, spec, cfg = self.k, self.spec, self.spec.config
        tile = self.gD.tile_at(k, (cfg.bm, cfg.bn), (self.tm, self.tn))
        if spec.out_dtype == "f32":
            out, pair = self.acc, copy_atom("atom.universal_copy<64>.v2.b32")
        else:
            out, pair = (T.fragment_like(k, self.acc, dtype=spec.out_dtype, name="rD"),
                         copy_atom("atom.universal_copy<32>"))
            T.convert(k, self.acc, out)
        if cfg.epilogue == "direct":
            k.comment("epilogue: accumulator pairs -> D (interior tile: unpredicated)")
            R.copy_ragged(k, pair, out, tile, interior=True)
            return
        k.comment("epilogue: interior tile staged through smem (D 16-byte aligned), else "
                  "predicated pairs")
        edge, done = k.fresh_label("EDGE_TILE"), k.fresh_label("TILE_DONE")
        inside = R.tile_inside(k, tile)
        assert inside is not None  # D's extents are M and N
        store = staging_copy(spec)
        whole = k.reg("pred")  # D need only be pair-aligned (host rule): check the store's
        k.ins("and.pred", whole, inside, R.aligned(k, self.gD, store.atom.bits // 8))  # width
        k.bra(edge, f"!{whole}", uni=True)
        k.ins("bar.sync", 0)  # every warp's last ldmatrix of the ring is done
        sD = R.reuse_rings(k, self.rings, "sD", spec.out_dtype, staging_layout(spec))
        T.copy(k, pair, out, sD)
        k.ins("bar.sync", 0)  # the whole tile is in smem
        R.store_tile(k, store, sD, tile, aligned=True)
        k.bra(done, uni=True)
        k.label(edge)
        R.copy_ragged(k, pair, out, tile)
        k.label(done)


def _ceil_div(k: Kernel, x: Reg, d: int) -> Reg:
    r = k.reg("u32")
    k.ins("add.u32", r, x, d - 1)
    k.ins("div.u32", r, r, d)
    return r


def emit_ptx(spec: GemmSm80Spec, target_: Target | str = "sm_80") -> str:
    """PTX text of the kernel (with its module-scope dynamic shared-memory declaration)."""
    return build_gemm_sm80(spec, target_).emit()
