"""A b1 (``.and.popc``) WGMMA kernel written in the IR, shared by the CPU check
(tests/ir/test_ir_b1_wgmma.py) and the GPU run (tests/gpu/test_ir_b1_wgmma_gpu.py).

One warpgroup computes D (64 x 128 s32) = popc(A & B) over K = 1024 bits, four K-blocks of
``m64n128k256``, D = A * B on the first (``accumulate = false``).  The two operands use the
two representations of a b1 tile (docs/ir.md, "b1 WGMMA tiles"), so a descriptor error in
either pairs wrong K bits and shows:

* A: 64 x 1024 bits, K-major, 128-byte swizzle ``Sw<3,7,3> o (64,1024):(1024,1)`` (in bits).
  The host writes the tile's raw byte image (:func:`sw128_image`, the swizzle computed here
  from the PTX ISA's rule, independently of nvatom) and the kernel copies it linearly through
  an unswizzled ``cute.smem_view`` of the tile.
* B: 128 x 1024 bits, K-major, no swizzle (INTERLEAVE): core matrices of 8 rows x 128 bits,
  ``((8,16),(128,8)):((128,1024),(1,16384))`` (in bits: SBO 128 bytes between the 8-row
  groups, LBO 2048 bytes between the 128-bit K chunks).  The kernel copies B from a
  row-major packed global matrix through this layout (a tiled copy of 128-bit accesses).

Global b1 matrices are packed row-major, eight K elements to a byte, the lowest K index in
the least significant bit (as the CPU model and tests/gpu/test_wgmma_gpu.py store them).
"""

from __future__ import annotations

import numpy as np

M, N, K = 64, 128, 1024
KBLOCK = 256  # bits of K per wgmma.mma_async (.b1)

A_TILE = "Sw<3,7,3> o 0 o (64,1024):(1024,1)"
B_TILE = "((8,16),(128,8)):((128,1024),(1,16384))"

# A: 64 threads x 2 per row, 512 bits each; B: a thread per row, 1024 bits
_TCA = '{thr_layout = "(64,2):(2,1)", val_layout = "(1,512):(512,1)"}'
_TCB = '{thr_layout = "(128,1):(1,1)", val_layout = "(1,1024):(1024,1)"}'
_B1P = "!cute.ptr<b1, gmem>"

KERNEL = f"""\
func.func @wgmma_b1(%pa: {_B1P}, %pb: {_B1P}, %pd: !cute.ptr<s32, gmem>) {{
  %cp = cute_nvgpu.make_atom : !cute_nvgpu.atom.universal_copy<128>
  %tca = cute_nvgpu.make_tiled_copy %cp {_TCA}
  %tcb = cute_nvgpu.make_tiled_copy %cp {_TCB}
  %ga = cute.make_view %pa : !cute.memref<b1, gmem, (64,1024):(1024,1)>
  %gb = cute.make_view %pb : !cute.memref<b1, gmem, (128,1024):(1024,1)>
  %sa = cute.alloc_smem : !cute.memref<b1, smem, {A_TILE}>
  %sb = cute.alloc_smem : !cute.memref<b1, smem, {B_TILE}>
  %ra = cute.smem_view %sa : !cute.memref<b1, smem, (64,1024):(1024,1)>
  cute_nvgpu.tiled_copy.copy %tca, %ga, %ra
  cute_nvgpu.tiled_copy.copy %tcb, %gb, %sb
  cute_nvgpu.arch.fence_proxy_async
  cute_nvgpu.arch.sync_threads
  %da = cute_nvgpu.make_smem_desc %sa : !cute_nvgpu.smem_desc_view<b1, K, {A_TILE}>
  %db = cute_nvgpu.make_smem_desc %sb : !cute_nvgpu.smem_desc_view<b1, K, {B_TILE}>
  %wg = cute_nvgpu.make_atom : !cute_nvgpu.sm90.mma<m64n128k256.ss.s32.b1.b1.and.popc>
  %acc = cute.alloc_rmem : !cute.memref<s32, rmem, ((4,8,4),(2,2,16)):((128,1,16),(64,8,512))>
  cute_nvgpu.warpgroup.fence
  cute_nvgpu.atom.mma %wg, %acc, %da, %db, %acc {{accumulate = false}}
  cute_nvgpu.warpgroup.commit_group
  cute_nvgpu.warpgroup.wait {{pending = 0}}
  %gd = cute.make_view %pd : !cute.memref<s32, gmem, (64,128):(128,1)>
  cute_nvgpu.atom.copy_fragment %wg, %acc, %gd {{operand = "D"}}
  func.return
}}
"""


def pack_rows(bits: np.ndarray) -> np.ndarray:
    """Row-major packed bytes of a 0/1 matrix: bit ``k`` of a row in byte ``k // 8``, bit
    ``k % 8``."""
    return np.packbits(np.asarray(bits, dtype=np.uint8), axis=1, bitorder="little")


def sw128_image(bits: np.ndarray) -> np.ndarray:
    """The raw bytes of a K-major 128-byte-swizzled tile (rows of 128 bytes, 1024-byte
    aligned) holding the 0/1 matrix ``bits`` (rows x 1024): PTX ISA "Shared Memory Matrix
    Layout", 128B swizzling: the 16-byte chunk index (byte-address bits 4-6) is XORed with
    the row index within the 8-row, 1024-byte pattern (bits 7-9)."""
    flat = pack_rows(bits).reshape(-1)
    addr = np.arange(flat.size)
    swz = addr ^ (((addr >> 7) & 7) << 4)
    out = np.empty_like(flat)
    out[swz] = flat
    return out.reshape(-1, 128)


def popc_and(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """D[m, n] = popc(A[m, :] & B[n, :]) (int64)."""
    return (a.astype(np.int64)[:, None, :] & b.astype(np.int64)[None, :, :]).sum(axis=2)
