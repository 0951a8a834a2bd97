// The specification's spelling of the tiled builders (000, "If You Know CUTLASS":
// "cute.make_tiled_copy / cute.make_tiled_mma builders consuming atom values"): aliases of
// cute_nvgpu.make_tiled_copy / cute_nvgpu.make_tiled_mma that parse, verify and lower alike
// (tests/ir/test_ir_tiled.py compares the PTX with the cute_nvgpu spelling's).  The kernels
// are copy_forms.mlir's tiled copy and tiled_gemm.mlir's tiled MMA (sm_80 and up).
func.func @tiled_copy(%p: !cute.ptr<f32, gmem>, %q: !cute.ptr<f32, gmem>) {
  %atom = cute_nvgpu.make_atom : !cute_nvgpu.atom.universal_copy<128>
  %tc = cute.make_tiled_copy %atom {thr_layout = "(32,4):(4,1)", val_layout = "(1,4):(4,1)"}
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
func.func @gemm_tile(%pa: !cute.ptr<bf16, gmem>, %pb: !cute.ptr<bf16, gmem>, %pd: !cute.ptr<f32, gmem>) {
  %atom = cute_nvgpu.make_atom : !cute_nvgpu.sm80.mma<m16n8k16.f32.bf16.bf16.f32>
  %tiled = cute.make_tiled_mma %atom {atom_layout = "(2,2,1)", tile = "(64,64,16)"}
  %ga = cute.make_view %pa : !cute.memref<bf16, gmem, (64,64):(64,1)>
  %gb = cute.make_view %pb : !cute.memref<bf16, gmem, (64,64):(64,1)>
  %gd = cute.make_view %pd : !cute.memref<f32, gmem, (64,64):(64,1)>
  %ra = cute.alloc_rmem : !cute.memref<bf16, rmem, (((4,8),(2,2,1)),((2,2,2),(2,1))):(((128,1),(16,0,1024)),((64,8,512),(32,1024)))>
  %rb = cute.alloc_rmem : !cute.memref<bf16, rmem, (((4,8),(2,2,1)),((2,2),(4,1))):(((128,1),(0,8,1024)),((64,512),(16,1024)))>
  %acc = cute.alloc_rmem : !cute.memref<f32, rmem, (((4,8),(2,2,1)),((2,2),(2,4))):(((128,1),(16,512,0)),((64,8),(32,1024)))>
  cute_nvgpu.atom.copy_fragment %tiled, %ga, %ra {operand = "A", tile = "(0,0)"}
  cute_nvgpu.atom.copy_fragment %tiled, %gb, %rb {operand = "B", tile = "(0,0)"}
  cute_nvgpu.tiled_mma.gemm %tiled, %acc, %ra, %rb, %acc
  cute_nvgpu.atom.copy_fragment %tiled, %ga, %ra {operand = "A", tile = "(0,1)"}
  cute_nvgpu.atom.copy_fragment %tiled, %gb, %rb {operand = "B", tile = "(0,1)"}
  cute_nvgpu.tiled_mma.gemm %tiled, %acc, %ra, %rb, %acc
  cute_nvgpu.atom.copy_fragment %tiled, %ga, %ra {operand = "A", tile = "(0,2)"}
  cute_nvgpu.atom.copy_fragment %tiled, %gb, %rb {operand = "B", tile = "(0,2)"}
  cute_nvgpu.tiled_mma.gemm %tiled, %acc, %ra, %rb, %acc
  cute_nvgpu.atom.copy_fragment %tiled, %ga, %ra {operand = "A", tile = "(0,3)"}
  cute_nvgpu.atom.copy_fragment %tiled, %gb, %rb {operand = "B", tile = "(0,3)"}
  cute_nvgpu.tiled_mma.gemm %tiled, %acc, %ra, %rb, %acc
  cute_nvgpu.atom.copy_fragment %tiled, %acc, %gd {operand = "D"}
  func.return
}
