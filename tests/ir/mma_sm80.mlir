// One warp computes D = A * B + C with one sm80 mma.sync atom (bf16 inputs, f32
// accumulation).  A is M x K row-major, B is N x K row-major (the ".col" operand), C and D
// are M x N row-major; each tile layout maps (row, col) to an element offset.
func.func @mma_m16n8k16_bf16(%pa: !cute.ptr<bf16, gmem>, %pb: !cute.ptr<bf16, gmem>, %pc: !cute.ptr<f32, gmem>, %pd: !cute.ptr<f32, gmem>) {
  %atom = cute_nvgpu.make_atom : !cute_nvgpu.sm80.mma<m16n8k16.f32.bf16.bf16.f32>
  %ga = cute.make_view %pa : !cute.memref<bf16, gmem, (16,16):(16,1)>
  %gb = cute.make_view %pb : !cute.memref<bf16, gmem, (8,16):(16,1)>
  %gc = cute.make_view %pc : !cute.memref<f32, gmem, (16,8):(8,1)>
  %gd = cute.make_view %pd : !cute.memref<f32, gmem, (16,8):(8,1)>
  %ra = cute.alloc_rmem : !cute.memref<bf16, rmem, ((4,8),(2,2,2)):((32,1),(16,8,128))>
  %rb = cute.alloc_rmem : !cute.memref<bf16, rmem, ((4,8),(2,2)):((16,1),(8,64))>
  %rc = cute.alloc_rmem : !cute.memref<f32, rmem, ((4,8),(2,2)):((32,1),(16,8))>
  %rd = cute.alloc_rmem : !cute.memref<f32, rmem, ((4,8),(2,2)):((32,1),(16,8))>
  cute_nvgpu.atom.copy_fragment %atom, %ga, %ra {operand = "A"}
  cute_nvgpu.atom.copy_fragment %atom, %gb, %rb {operand = "B"}
  cute_nvgpu.atom.copy_fragment %atom, %gc, %rc {operand = "C"}
  cute_nvgpu.atom.mma %atom, %rd, %ra, %rb, %rc
  cute_nvgpu.atom.copy_fragment %atom, %rd, %gd {operand = "D"}
  func.return
}
