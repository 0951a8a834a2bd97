"""A ragged sm_80 GEMM on typed tensors: ``D = A @ B (+ bias) (relu)`` for any M, N, K.

One CTA of four warps per 64 x 64 tile of D (``%ctaid.x``: the N tile, ``%ctaid.y``: the M
tile).  The K loop runs at run time over a ring of ``stages`` shared-memory stages
(:func:`nvatom.kernels.ragged.stage_ring`): the prologue fills ``stages - 1`` of them, and
each iteration waits for its stage, refills the stage the previous iteration read (after the
barrier), then multiplies: ``ldmatrix`` + ``mma.sync.m16n8k16`` (2 x 2 warps, f32
accumulators), as :mod:`nvatom.kernels.sm80_tile`.  Ragged edges cost no branch: the copies
are ``cp.async`` with ``src-size`` zero fill past M, N and K
(:func:`nvatom.kernels.ragged.copy_ragged`), so a partial tile multiplies zeros, and the
epilogue's loads and stores are predicated on M and N.  Tile coordinates past K (the last
prologue/refill copies) read nothing and fill zeros.

Parameters (in order): ``M N K lda ldb ldd`` (``.u32``; leading dimensions in elements, each
a multiple of 8: 16-byte rows for cp.async), then the global addresses of A, B, bias (f32,
one per column; only with ``bias=True``) and D (bf16/f16, row-major ``M x N``).  A is ``M x
K`` (``a_major="K"``: row-major; "M": stored as A^T row-major), B is ``K x N`` ("N":
row-major; "K": stored as B^T row-major), seen as CuTe does as the ``N x K`` tensor.

Sources: PTX ISA "cp.async" (src-size), "ldmatrix", "mma" (m16n8k16), "bra", "setp".
"""

from __future__ import annotations

from nvatom.arch import Target
from nvatom.atoms.copy import copy_atom
from nvatom.atoms.registry import mma_form
from nvatom.atoms.smem import smem_layout
from nvatom.atoms.tiled_copy import make_tiled_copy
from nvatom.atoms.tiled_mma import make_tiled_mma
from nvatom.kernels import ragged as R
from nvatom.kernels import tensor as T
from nvatom.layout import Layout
from nvatom.ptx.builder import Module
from nvatom.ptx.copy_emit import emit_commit_group, emit_wait_group

__all__ = ["BK", "SIZES", "THREADS", "TILE", "build_sm80_gemm_tiled", "grid", "kernel_name"]

TILE = 64  # M = N = 64 per CTA
BK = 32  # K per stage
THREADS = 128
SIZES = ("M", "N", "K", "lda", "ldb", "ldd")  # the .u32 parameters, before the addresses


def kernel_name(dtype: str, a_major: str = "K", b_major: str = "N", stages: int = 3,
                bias: bool = True, relu: bool = False) -> str:
    return (f"sm80_gemm_tiled_{dtype}_a{a_major}_b{b_major}_s{stages}"
            f"{'_bias' if bias else ''}{'_relu' if relu else ''}")


def grid(m: int, n: int) -> tuple[int, int, int]:
    return -(-n // TILE), -(-m // TILE), 1


def build_sm80_gemm_tiled(dtype: str = "bf16", target: Target | str = "sm_80", *,
                          a_major: str = "K", b_major: str = "N", stages: int = 3,
                          bias: bool = True, relu: bool = False) -> Module:
    """The module of the ragged GEMM kernel (:func:`kernel_name`), 128 threads a CTA."""
    if a_major not in ("K", "M") or b_major not in ("K", "N") or stages < 2:
        raise T.TensorError(f"A {a_major}-major, B {b_major}-major, {stages} stages: the "
                            "kernel takes A K/M- and B K/N-major and at least 2 stages")
    form = mma_form(f"sm80.mma.m16n8k16.f32.{dtype}.{dtype}.f32")
    mod = Module(target, features=[form.feature, "cp.async", "ldmatrix"])
    k = mod.kernel(kernel_name(dtype, a_major, b_major, stages, bias, relu))
    k.maxntid = (THREADS, 1, 1)
    M, N, K, lda, ldb, ldd = (k.ld_param(k.param(p, "u32")) for p in SIZES)
    tiled = make_tiled_mma(form, atom_layout=(2, 2, 1), tile=(TILE, TILE, 16))
    ka, kb = a_major == "K", b_major == "K"  # K contiguous in memory?
    gA = R.gmem_matrix(k, "A", dtype, (M, K), (lda, 1) if ka else (1, lda))  # M x K
    gB = R.gmem_matrix(k, "B", dtype, (N, K), (ldb, 1) if kb else (1, ldb))  # N x K (CuTe)
    gBias = R.gmem_matrix(k, "bias", "f32", (None, N), (0, 1)) if bias else None
    gD = R.gmem_matrix(k, "D", dtype, (M, N), (ldd, 1))
    tm, tn = k.reg("u32"), k.reg("u32")
    k.ins("mov.u32", tn, "%ctaid.x")
    k.ins("mov.u32", tm, "%ctaid.y")

    def ring(name: str, k_major: bool) -> R.StageRing:  # 64- / 128-byte swizzled rows
        lay = smem_layout(TILE, BK, 16, "K" if k_major else "MN", 64 if k_major else 128)
        return R.stage_ring(k, name, dtype, lay, stages)

    sA, sB = ring("sA", ka), ring("sB", kb)
    cp = copy_atom("atom.simt_async_copy<16>.src_size")  # zero fill past M, N, K
    along_k = make_tiled_copy(cp, Layout((32, 4), (4, 1)), Layout((1, 8)))
    along_mn = make_tiled_copy(cp, Layout((8, 16), (1, 8)), Layout((8, 1)))
    cp_a, cp_b = (along_k if x else along_mn for x in (ka, kb))
    ld_a = copy_atom("atom.ldsm<m8n8.x4>" if ka else "atom.ldsm<m8n8.x4.trans>")
    ld_b = copy_atom("atom.ldsm<m8n8.x2>" if kb else "atom.ldsm<m8n8.x2.trans>")
    acc = T.fragment(k, tiled, "C", name="acc", zero=True)
    rA, rB = T.fragment(k, tiled, "A", name="rA"), T.fragment(k, tiled, "B", name="rB")

    def load(kt: object, stage: object) -> None:  # k-tile kt into a stage; then commit
        R.copy_ragged(k, cp_a, gA.tile_at(k, (TILE, BK), (tm, kt)), sA.at(k, stage))
        R.copy_ragged(k, cp_b, gB.tile_at(k, (TILE, BK), (tn, kt)), sB.at(k, stage))
        emit_commit_group(k)

    for s in range(stages - 1):
        load(s, s)
    kt, read, write, ktiles = (k.reg("u32") for _ in range(4))
    for r, v in ((kt, 0), (read, 0), (write, stages - 1)):
        k.ins("mov.u32", r, v)
    k.ins("add.u32", ktiles, K, BK - 1)
    k.ins("div.u32", ktiles, ktiles, BK)
    loop, more = k.fresh_label("KLOOP"), k.reg("pred")
    k.label(loop)
    emit_wait_group(k, stages - 2)  # k-tile kt has landed
    k.ins("bar.sync", 0)  # ... for every thread; and the stage read last iteration is free
    nxt = k.reg("u32")
    k.ins("add.u32", nxt, kt, stages - 1)
    load(nxt, write)
    a, b = sA.at(k, read), sB.at(k, read)
    for ks in range(BK // 16):
        T.copy(k, ld_a, a, rA, tile=(0, ks))
        T.copy(k, ld_b, b, rB, tile=(0, ks))
        T.mma(k, tiled, acc, rA, rB, acc)
    sA.advance(k, read)
    sA.advance(k, write)
    k.ins("add.u32", kt, kt, 1)
    k.ins("setp.lt.u32", more, kt, ktiles)
    k.bra(loop, more, uni=True)
    emit_wait_group(k, 0)  # the zero-filled copies past K, before the CTA exits

    k.comment("epilogue: D = acc (+ bias) (relu), rounded; predicated on M and N")
    if gBias is not None:
        r_bias = T.fragment_like(k, acc, name="rBias")
        v2 = copy_atom("atom.universal_copy<64>.v2.b32")
        R.copy_ragged(k, v2, gBias.tile_at(k, (TILE, TILE), (tm, tn)), r_bias)
        T.elementwise(k, "add.f32", acc, acc, r_bias)
    if relu:
        T.elementwise(k, "max.f32", acc, acc, 0.0)
    out = T.fragment_like(k, acc, dtype=dtype, name="rD")
    T.convert(k, acc, out)
    R.copy_ragged(k, copy_atom("atom.universal_copy<32>"), out,
                  gD.tile_at(k, (TILE, TILE), (tm, tn)))
    return mod
