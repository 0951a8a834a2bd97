"""A 64 x 64 sm_80 GEMM tile with a fused bias + ReLU epilogue, written with typed tensors.

``D = relu(A @ B + bias)`` for one CTA of four warps: A is ``64 x K``, B is ``K x N`` (seen,
as CuTe does, as the ``N x K`` tensor: strides ``(1, 64)`` when B is row-major), each stored
row- or column-major; bias is one f32 per column, D is ``64 x 64`` bf16/f16, row-major.  The
K loop is unrolled at build time (K a multiple of 32) and double-buffered: ``cp.async``
16-byte chunks into swizzled shared memory (64-byte swizzle for a K-major tile, 128-byte for
an M/N-major one), ``ldmatrix.x4`` for A and ``ldmatrix.x2`` for B (``.trans`` for an
M/N-major tile), ``mma.sync.m16n8k16`` with f32 accumulation (2 x 2 warps, each repeating the
atom 2 x 4 times), then the epilogue on the accumulator fragment: the bias loaded as a
fragment of the same layout (a stride-0 tensor over M), ``add``, ``max`` with 0, rounded
pairs stored as one 32-bit access each.

No address is written by hand: :mod:`nvatom.kernels.tensor` derives every one from the
layouts and runs the atom verifiers first (docs/kernel-layer.md; the tutorial's section 9).

Sources: PTX ISA "cp.async", "ldmatrix", "mma" (m16n8k16), "cvt"; the swizzled tiles are
``nvatom.atoms.smem.smem_layout`` (the WGMMA canonical smem atoms).
"""

from __future__ import annotations

from nvatom.arch import Target
from nvatom.atoms.copy import copy_atom
from nvatom.atoms.registry import mma_form
from nvatom.atoms.smem import smem_layout
from nvatom.atoms.tiled_copy import make_tiled_copy
from nvatom.atoms.tiled_mma import make_tiled_mma
from nvatom.kernels import tensor as T
from nvatom.layout import Layout
from nvatom.ptx.builder import Module
from nvatom.ptx.copy_emit import emit_commit_group, emit_wait_group

__all__ = ["PARAMS", "THREADS", "TILE", "build_sm80_tile", "kernel_name"]

TILE = 64  # M = N = 64
BK = 32  # K per shared-memory stage
THREADS = 128
#: Kernel parameters, in order: global addresses of A (M x K), B (K x N), bias (N, f32), D.
PARAMS = ("A", "B", "bias", "D")


def kernel_name(dtype: str, k: int, a_major: str = "K", b_major: str = "N") -> str:
    return f"sm80_tile_{dtype}_a{a_major}_b{b_major}_k{k}"


def build_sm80_tile(dtype: str = "bf16", K: int = 64, target: Target | str = "sm_80",
                    a_major: str = "K", b_major: str = "N") -> Module:
    """The module of one tile kernel: ``D = relu(A @ B + bias)``, 128 threads, one CTA.
    ``a_major``: "K" (A row-major) or "M" (A^T row-major); ``b_major``: "N" (B row-major) or
    "K" (B^T row-major)."""
    if K < BK or K % BK or a_major not in ("K", "M") or b_major not in ("K", "N"):
        raise T.TensorError(f"K = {K}, A {a_major}-major, B {b_major}-major: the tile kernel "
                            f"takes a positive multiple of {BK}, A K/M- and B K/N-major")
    form = mma_form(f"sm80.mma.m16n8k16.f32.{dtype}.{dtype}.f32")
    mod = Module(target, features=[form.feature, "cp.async", "ldmatrix"])
    k = mod.kernel(kernel_name(dtype, K, a_major, b_major))
    k.maxntid = (THREADS, 1, 1)
    tiled = make_tiled_mma(form, atom_layout=(2, 2, 1), tile=(TILE, TILE, 16))
    ka, kb_ = a_major == "K", b_major == "K"  # K contiguous in memory?
    gA = T.gmem_tensor(k, "A", dtype, (TILE, K), (K, 1) if ka else (1, TILE))  # M x K
    gB = T.gmem_tensor(k, "B", dtype, (TILE, K), (K, 1) if kb_ else (1, TILE))  # N x K (CuTe)
    bias = T.gmem_tensor(k, "bias", "f32", (TILE, TILE), (0, 1))  # one per column
    gD = T.gmem_tensor(k, "D", dtype, (TILE, TILE), (TILE, 1))

    def stages(name: str, k_major: bool) -> list[T.Tensor]:  # 64- / 128-byte swizzled rows
        lay = smem_layout(TILE, BK, 16, "K" if k_major else "MN", 64 if k_major else 128)
        return [T.smem_tensor(k, f"{name}{s}", dtype, lay) for s in (0, 1)]

    sA, sB = stages("sA", ka), stages("sB", kb_)
    cp = copy_atom("atom.simt_async_copy<16>")  # 8 elements a thread, along the contiguous dim
    along_k = make_tiled_copy(cp, Layout((32, 4), (4, 1)), Layout((1, 8)))  # 32 x 32 a pass
    along_mn = make_tiled_copy(cp, Layout((8, 16), (1, 8)), Layout((8, 1)))  # 64 x 16 a pass
    cp_a, cp_b = (along_k if x else along_mn for x in (ka, kb_))
    ld_a = copy_atom("atom.ldsm<m8n8.x4>" if ka else "atom.ldsm<m8n8.x4.trans>")
    ld_b = copy_atom("atom.ldsm<m8n8.x2>" if kb_ else "atom.ldsm<m8n8.x2.trans>")
    acc = T.fragment(k, tiled, "C", name="acc", zero=True)
    rA, rB = T.fragment(k, tiled, "A", name="rA"), T.fragment(k, tiled, "B", name="rB")

    def load(kb: int) -> None:
        T.copy(k, cp_a, gA.tile((TILE, BK), (0, kb)), sA[kb % 2])
        T.copy(k, cp_b, gB.tile((TILE, BK), (0, kb)), sB[kb % 2])
        emit_commit_group(k)

    load(0)
    for kb in range(K // BK):
        more = kb + 1 < K // BK
        if more:
            load(kb + 1)  # the next stage streams in while this one is multiplied
        emit_wait_group(k, 1 if more else 0)
        k.ins("bar.sync", 0)
        for ks in range(BK // 16):
            T.copy(k, ld_a, sA[kb % 2], rA, tile=(0, ks))
            T.copy(k, ld_b, sB[kb % 2], rB, tile=(0, ks))
            T.mma(k, tiled, acc, rA, rB, acc)
        k.ins("bar.sync", 0)  # the stage is refilled two steps later

    k.comment("epilogue: D = relu(acc + bias), rounded to 16 bits")
    r_bias = T.fragment_like(k, acc, name="rBias")
    T.copy(k, copy_atom("atom.universal_copy<64>.v2.b32"), bias, r_bias)
    T.elementwise(k, "add.f32", acc, acc, r_bias)
    T.elementwise(k, "max.f32", acc, acc, 0.0)
    out = T.fragment_like(k, acc, dtype=dtype, name="rD")
    T.convert(k, acc, out)
    T.copy(k, copy_atom("atom.universal_copy<32>"), out, gD)
    return mod
