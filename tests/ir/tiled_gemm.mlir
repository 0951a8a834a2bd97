// docs/tutorial.md's kernel: one CTA of 2 x 2 warps computes a 64 x 64 f32 tile D = A * B with
// the sm80 bf16 mma.sync m16n8k16 atom tiled to (64,64,16), K = 64 in four steps.  A is M x K
// row-major, B is given as N x K row-major (the ".col" operand), D is M x N row-major; each
// copy_fragment moves every thread's fragment of K tile (0,k) of A or B; the register
// fragments' layouts are the tiled MMA's (thread, value) layouts.
func.func @gemm_tile(%pa: !cute.ptr<bf16, gmem>, %pb: !cute.ptr<bf16, gmem>, %pd: !cute.ptr<f32, gmem>) {
  %atom = cute_nvgpu.make_atom : !cute_nvgpu.sm80.mma<m16n8k16.f32.bf16.bf16.f32>
  %tiled = cute_nvgpu.make_tiled_mma %atom {atom_layout = "(2,2,1)", tile = "(64,64,16)"}
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
