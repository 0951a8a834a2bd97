// One warp: gmem -> smem with cp.async (16 bytes a lane), smem -> registers with ldmatrix,
// an sm80 mma.sync, registers -> smem with stmatrix, smem -> gmem with 128-bit universal
// copies (after src/nvatom/kernels/copy_pipeline.py, without its swizzle).
//
// A copy operand's layout maps (thread, value) to an element offset.  Shared memory holds
// the matrices in ldmatrix's reference order (matrix j, row r, 8 elements: (8 j + r) * 8), so
// the smem layouts are the atoms' own; the global layouts pick, for lane l = 8 j + r, row
// r + 8 (j % 2) and column 8 (j / 2) of the row-major A (16 x 16), B^T (8 x 16) and D (16 x 8).
// cute.retile views the ldmatrix registers (reference order) as the MMA fragments they are.
func.func @copy_pipeline_f16(%pa: !cute.ptr<f16, gmem>, %pb: !cute.ptr<f16, gmem>, %pd: !cute.ptr<f16, gmem>) {
  %cp = cute_nvgpu.make_atom : !cute_nvgpu.atom.simt_async_copy<16>
  %ldA = cute_nvgpu.make_atom : !cute_nvgpu.atom.ldsm<m8n8.x4>
  %ldB = cute_nvgpu.make_atom : !cute_nvgpu.atom.ldsm<m8n8.x2>
  %stD = cute_nvgpu.make_atom : !cute_nvgpu.atom.stsm<m8n8.x2>
  %out = cute_nvgpu.make_atom : !cute_nvgpu.atom.universal_copy<128>
  %matom = cute_nvgpu.make_atom : !cute_nvgpu.sm80.mma<m16n8k16.f16.f16.f16.f16>
  %ga = cute.make_view %pa : !cute.memref<f16, gmem, ((8,2,2),8):((16,128,8),1)>
  %gb = cute.make_view %pb : !cute.memref<f16, gmem, ((8,2,2),8):((16,8,0),1)>
  %gd = cute.make_view %pd : !cute.memref<f16, gmem, ((16,2),8):((8,0),1)>
  %sa = cute.alloc_smem : !cute.memref<f16, smem, (32,8):(8,1)>
  %sb = cute.alloc_smem : !cute.memref<f16, smem, ((16,2),8):((8,0),1)>
  %sd = cute.alloc_smem : !cute.memref<f16, smem, ((16,2),8):((8,0),1)>
  cute_nvgpu.atom.copy %cp, %ga, %sa
  cute_nvgpu.atom.copy %cp, %gb, %sb
  cute_nvgpu.arch.cp_async_commit_group
  cute_nvgpu.arch.cp_async_wait_group {pending = 0}
  cute_nvgpu.arch.sync_threads
  %la = cute.alloc_rmem : !cute.memref<f16, rmem, (32,(2,4)):(2,(1,64))>
  %lb = cute.alloc_rmem : !cute.memref<f16, rmem, (32,(2,2)):(2,(1,64))>
  cute_nvgpu.atom.copy %ldA, %sa, %la
  cute_nvgpu.atom.copy %ldB, %sb, %lb
  %ra = cute.retile %la : !cute.memref<f16, rmem, ((4,8),(2,2,2)):((32,1),(16,8,128))>
  %rb = cute.retile %lb : !cute.memref<f16, rmem, ((4,8),(2,2)):((16,1),(8,64))>
  %rc = cute.alloc_rmem : !cute.memref<f16, rmem, ((4,8),(2,2)):((32,1),(16,8))>
  %rd = cute.alloc_rmem : !cute.memref<f16, rmem, ((4,8),(2,2)):((32,1),(16,8))>
  cute_nvgpu.atom.mma %matom, %rd, %ra, %rb, %rc
  %fd = cute.retile %rd : !cute.memref<f16, rmem, (32,(2,2)):(2,(1,64))>
  cute_nvgpu.atom.copy %stD, %fd, %sd
  cute_nvgpu.arch.sync_threads
  cute_nvgpu.atom.copy %out, %sd, %gd
  func.return
}
