// copy_fragment and tiled_mma.gemm with a tiled MMA (register fragments of the tiled MMA's
// (thread, value) layouts, tiles of a global tensor).
// target: sm_80

func.func @tiled(%pa: !cute.ptr<bf16, gmem>, %pd: !cute.ptr<f32, gmem>, %sa: !cute.memref<bf16, smem, (32,16):(16,1)>) {
  %atom = cute_nvgpu.make_atom : !cute_nvgpu.sm80.mma<m16n8k16.f32.bf16.bf16.f32>
  %t = cute_nvgpu.make_tiled_mma %atom {atom_layout = "(2,1,1)"}
  %ga = cute.make_view %pa : !cute.memref<bf16, gmem, (32,32):(32,1)>
  %gcol = cute.make_view %pa : !cute.memref<bf16, gmem, (32,32):(1,32)>
  %gd = cute.make_view %pd : !cute.memref<f32, gmem, (32,8):(8,1)>
  %ra = cute.alloc_rmem : !cute.memref<bf16, rmem, (((4,8),(2,1,1)),((2,2,2),(1,1))):(((64,1),(16,0,512)),((32,8,256),(32,512)))>
  %bad = cute.alloc_rmem : !cute.memref<bf16, rmem, ((4,8),(2,2,2)):((32,1),(16,8,128))>
  %rd = cute.alloc_rmem : !cute.memref<f32, rmem, (((4,8),(2,1,1)),((2,2),(1,1))):(((64,1),(16,256,0)),((32,8),(32,256)))>
  cute_nvgpu.atom.copy_fragment %t, %ga, %ra {operand = "A", tile = "(0,1)"}
  // expected-error @+1 {{expects Mma atom layout of (((4,8),(2,1,1)),((2,2,2),(1,1))):(((64,1),(16,0,512)),((32,8,256),(32,512))) for operand A, but got ((4,8),(2,2,2)):((32,1),(16,8,128))}}
  cute_nvgpu.atom.copy_fragment %t, %ga, %bad {operand = "A"}
  // expected-error @+1 {{tile (0, 2) is outside the 1 x 2 tiles of (32,32):(32,1)}}
  cute_nvgpu.atom.copy_fragment %t, %ga, %ra {operand = "A", tile = "(0,2)"}
  // expected-error @+1 {{tile must be two integers >= 0 like "(0,1)", got "(0,-1)"}}
  cute_nvgpu.atom.copy_fragment %t, %ga, %ra {operand = "A", tile = "(0,-1)"}
  // expected-error @+1 {{which are not contiguous and 32-bit aligned}}
  cute_nvgpu.atom.copy_fragment %t, %gcol, %ra {operand = "A"}
  // expected-error @+1 {{a tiled MMA's copy_fragment moves a global tensor to or from registers, got smem -> rmem}}
  cute_nvgpu.atom.copy_fragment %t, %sa, %ra {operand = "A"}
  // expected-error @+1 {{tile is an attribute of a tiled MMA's copy_fragment}}
  cute_nvgpu.atom.copy_fragment %atom, %ga, %bad {operand = "A", tile = "(0,0)"}
  // expected-error @+1 {{expects Mma atom layout of (((4,8),(2,1,1)),((2,2,2),(1,1))):(((64,1),(16,0,512)),((32,8,256),(32,512))) for operand A, but got ((4,8),(2,2,2)):((32,1),(16,8,128))}}
  cute_nvgpu.tiled_mma.gemm %t, %rd, %bad, %bad, %rd
  cute_nvgpu.atom.copy_fragment %t, %rd, %gd {operand = "D"}
  func.return
}

// -----
// target: sm_80

func.func @three_warps(%pa: !cute.ptr<bf16, gmem>) {
  %atom = cute_nvgpu.make_atom : !cute_nvgpu.sm80.mma<m16n8k16.f32.bf16.bf16.f32>
  %t = cute_nvgpu.make_tiled_mma %atom {atom_layout = "(3,1,1)"}
  %ga = cute.make_view %pa : !cute.memref<bf16, gmem, (48,16):(16,1)>
  %ra = cute.alloc_rmem : !cute.memref<bf16, rmem, (((4,8),(3,1,1)),((2,2,2),(1,1))):(((96,1),(16,0,768)),((48,8,384),(48,768)))>
  // expected-error @+1 {{copy_fragment of a tiled MMA needs a power-of-two thread count, got 96}}
  cute_nvgpu.atom.copy_fragment %t, %ga, %ra {operand = "A"}
  func.return
}
