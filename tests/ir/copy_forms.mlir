// Copy forms of issue 16 (sm_90a, one warp then 128 threads; both run on the GPU):
// * ldmatrix/stmatrix through a generic address (generic = true: cvta.shared, and the
//   instructions without .shared): a shared tile in the atoms' reference layout is loaded
//   into registers and stored to a second tile, an identity;
// * a tiled copy (make_tiled_copy of a 128-bit universal copy over 32 x 4 threads, 4 f32
//   values each: a 32 x 16 tile): global -> swizzled shared -> registers -> global.
func.func @copy_generic(%p: !cute.ptr<f16, gmem>, %q: !cute.ptr<f16, gmem>) {
  %cp = cute_nvgpu.make_atom : !cute_nvgpu.atom.universal_copy<128>
  %ld = cute_nvgpu.make_atom : !cute_nvgpu.atom.ldsm<m8n8.x4>
  %st = cute_nvgpu.make_atom : !cute_nvgpu.atom.stsm<m8n8.x4>
  %g = cute.make_view %p : !cute.memref<f16, gmem, (32,8):(8,1)>
  %o = cute.make_view %q : !cute.memref<f16, gmem, (32,8):(8,1)>
  %s = cute.alloc_smem : !cute.memref<f16, smem, (32,8):(8,1)>
  %s2 = cute.alloc_smem : !cute.memref<f16, smem, (32,8):(8,1)>
  %r = cute.alloc_rmem : !cute.memref<f16, rmem, (32,(2,4)):(2,(1,64))>
  cute_nvgpu.atom.copy %cp, %g, %s
  cute_nvgpu.arch.sync_threads
  cute_nvgpu.atom.copy %ld, %s, %r {generic = true}
  cute_nvgpu.atom.copy %st, %r, %s2 {generic = true}
  cute_nvgpu.arch.sync_threads
  cute_nvgpu.atom.copy %cp, %s2, %o
  func.return
}
func.func @tiled_copy(%p: !cute.ptr<f32, gmem>, %q: !cute.ptr<f32, gmem>) {
  %atom = cute_nvgpu.make_atom : !cute_nvgpu.atom.universal_copy<128>
  %tc = cute_nvgpu.make_tiled_copy %atom {thr_layout = "(32,4):(4,1)", val_layout = "(1,4):(4,1)"}
  %g = cute.make_view %p : !cute.memref<f32, gmem, (32,16):(16,1)>
  %o = cute.make_view %q : !cute.memref<f32, gmem, (32,16):(16,1)>
  %s = cute.alloc_smem : !cute.memref<f32, smem, Sw<3,2,3> o 0 o (32,16):(16,1)>
  %r = cute.alloc_rmem : !cute.memref<f32, rmem, (128,4):(4,1)>
  cute_nvgpu.tiled_copy.copy %tc, %g, %s
  cute_nvgpu.arch.sync_threads
  cute_nvgpu.tiled_copy.copy %tc, %s, %r
  cute_nvgpu.tiled_copy.copy %tc, %r, %o
  func.return
}
