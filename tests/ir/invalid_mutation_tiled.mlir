// Descriptor mutation (docs/spec-deviations.md#tma-descriptor-mutation), tiled-MMA operand checks.

func.func @mutation(%src: !cute.ptr<f16, gmem>, %ws: !cute.ptr<u8, gmem>, %n: i32, %m: i32, %ld: i32, %v: i32) {
  %gl = cute.static : !cute.layout<(n,m):(1,ld)>
  %d = nv_tileas.make_tiled_tma_desc %src, %gl shapes(%n, %m) strides(%ld) paddings() {mode = #cute_nvgpu.tma_load_mode<tiled>, elementBitWidth = 16} : !cute_nvgpu.tma_descriptor_tiled
  // expected-error @+1 {{TMA descriptor field is not device-mutable: swizzle_mode}}
  %d1 = cute_nvgpu.update_tma_desc %d, %ws, %v {field = "swizzle_mode"}
  // expected-error @+1 {{TMA descriptor field is not device-mutable: leading stride}}
  %d2 = cute_nvgpu.update_tma_desc %d, %ws, %v {field = "global_stride", axis = 0}
  // expected-error @+1 {{global_dim: axis 2 is not a dimension of a rank-2 map}}
  %d3 = cute_nvgpu.update_tma_desc %d, %ws, %v {field = "global_dim", axis = 2}
  // expected-error @+1 {{expects a !cute.ptr<..., gmem> workspace (128 bytes, 64-byte aligned) as operand #1, but got i32}}
  %d4 = cute_nvgpu.update_tma_desc %d, %v, %v {field = "global_dim", axis = 1}
  func.return
}

// -----

func.func @ranks(%a2: !cute.memref<f16, smem, (16,16):(16,1)>, %b1: !cute.memref<f16, smem, 16:1>, %b2: !cute.memref<f16, smem, (8,16):(16,1)>, %c2: !cute.memref<f32, smem, (16,8):(8,1)>, %c1: !cute.memref<f32, smem, 16:1>, %c3: !cute.memref<f32, smem, (2,16,8):(128,8,1)>, %a3: !cute.memref<f16, smem, (2,16,16):(256,16,1)>, %b3: !cute.memref<f16, smem, (2,8,16):(128,16,1)>) {
  %atom = cute_nvgpu.make_atom : !cute_nvgpu.sm80.mma<m16n8k16.f32.f16.f16.f32>
  %t = cute_nvgpu.make_tiled_mma %atom {atom_layout = "(1,1,1)"}
  // expected-error @+1 {{expects A, B to have the same rank, but got A: (16,16):(16,1), B: 16:1}}
  cute_nvgpu.tiled_mma.gemm %t, %c2, %a2, %b1, %c2
  // expected-error @+1 {{expects C, D to have the same rank, but got C: 16:1, D: (16,8):(8,1)}}
  cute_nvgpu.tiled_mma.gemm %t, %c2, %a2, %b2, %c1
  // expected-error @+1 {{expects C to have rank 2 or 3, but got C: 16:1}}
  cute_nvgpu.tiled_mma.gemm %t, %c1, %a2, %b2, %c1
  // expected-error @+1 {{expects C to have rank 3, but got C: (16,8):(8,1)}}
  cute_nvgpu.tiled_mma.gemm %t, %c2, %a3, %b3, %c2
  func.return
}

// -----

func.func @rank1(%a: !cute.memref<f16, smem, 16:1>, %b: !cute.memref<f16, smem, 16:1>, %c: !cute.memref<f32, smem, (2,16,8):(128,8,1)>) {
  %atom = cute_nvgpu.make_atom : !cute_nvgpu.sm80.mma<m16n8k16.f32.f16.f16.f32>
  %t = cute_nvgpu.make_tiled_mma %atom
  // expected-error @+1 {{expects C to have rank 1 or 2, but got C: (2,16,8):(128,8,1)}}
  cute_nvgpu.tiled_mma.gemm %t, %c, %a, %b, %c
  func.return
}

// -----

func.func @tiled_builder() {
  %atom = cute_nvgpu.make_atom : !cute_nvgpu.sm80.mma<m16n8k16.f32.f16.f16.f32>
  // expected-error @+1 {{tile (24, 8, 16) is not a multiple of the atom tile times the atom layout (16, 8, 16)}}
  %t = cute_nvgpu.make_tiled_mma %atom {tile = "(24,8,16)"}
  // expected-error @+1 {{atom_layout must be 3 positive integers like "(2,2,1)", got "(2,0)"}}
  %u = cute_nvgpu.make_tiled_mma %atom {atom_layout = "(2,0)"}
  func.return
}
