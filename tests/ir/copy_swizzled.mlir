// One warp, swizzled shared memory (CuTe's Sw<B,M,S> o offset o layout, element offsets):
// cp.async gmem -> smem and ldmatrix smem -> registers through the 128-byte-line swizzle
// Sw<3,4,3> of a 16 x 64 f16 tile (row-major, 64 elements a row); stmatrix registers -> smem
// and ld.shared.v4 smem -> gmem through Sw<2,4,3>.  Lane l = t + 8 j0 + 16 j1 names row
// 8 j0 + t, columns 8 j1 .. 8 j1 + 7 of the tile's top-left 16 x 16 block: one 16-byte row
// per lane, which each swizzle moves as a whole (its lowest bit, 2^4 elements, is >= 8).
func.func @copy_swizzled_f16(%pa: !cute.ptr<f16, gmem>, %pd: !cute.ptr<f16, gmem>) {
  %cp = cute_nvgpu.make_atom : !cute_nvgpu.atom.simt_async_copy<16>
  %ld = cute_nvgpu.make_atom : !cute_nvgpu.atom.ldsm<m8n8.x4>
  %st = cute_nvgpu.make_atom : !cute_nvgpu.atom.stsm<m8n8.x4>
  %out = cute_nvgpu.make_atom : !cute_nvgpu.atom.universal_copy<128>
  %ga = cute.make_view %pa : !cute.memref<f16, gmem, ((8,2,2),8):((16,128,8),1)>
  %gd = cute.make_view %pd : !cute.memref<f16, gmem, ((8,2,2),8):((16,128,8),1)>
  %sa = cute.alloc_smem : !cute.memref<f16, smem, Sw<3,4,3> o 0 o ((8,2,2),8):((64,512,8),1)>
  %sd = cute.alloc_smem : !cute.memref<f16, smem, Sw<2,4,3> o 0 o ((8,2,2),8):((64,512,8),1)>
  cute_nvgpu.atom.copy %cp, %ga, %sa
  cute_nvgpu.arch.cp_async_commit_group
  cute_nvgpu.arch.cp_async_wait_group {pending = 0}
  cute_nvgpu.arch.sync_threads
  %r = cute.alloc_rmem : !cute.memref<f16, rmem, (32,(2,4)):(2,(1,64))>
  cute_nvgpu.atom.copy %ld, %sa, %r
  cute_nvgpu.atom.copy %st, %r, %sd
  cute_nvgpu.arch.sync_threads
  cute_nvgpu.atom.copy %out, %sd, %gd
  func.return
}
