// The IR's own diagnostics (our wording): malformed types, operands and attributes, and the
// operation rules that sit around the atom verifiers.

// An atom type the sm80 table does not have (f16 accumulator with f32 D).
// expected-error @+1 {{no sm80.mma atom <m16n8k16.f32.bf16.bf16.f16>; nearest: m16n8k16.f32.bf16.bf16.f32}}
func.func @unknown_atom(%a: !cute_nvgpu.sm80.mma<m16n8k16.f32.bf16.bf16.f16>) {
  func.return
}

// -----

// A WGMMA descriptor view whose layout no WGMMA descriptor can describe.
// expected-error @+1 {{not a canonical WGMMA K-major SW128 layout}}
func.func @bad_desc(%a: !cute_nvgpu.smem_desc_view<e4m3, K, Sw<3,4,3> o 0 o (64,32):(32,1)>) {
  func.return
}

// -----

// Shape and stride of a layout type must be congruent.
// expected-error @+1 {{shape and stride of '(8,64):(64)' are not congruent}}
func.func @layout(%a: !cute.layout<(8,64):(64)>) {
  func.return
}

// -----

func.func @operand_count(%a: !cute.memref<f32, rmem>) {
  %atom = cute_nvgpu.make_atom : !cute_nvgpu.sm80.mma<m16n8k16.f32.bf16.bf16.f32>
  // expected-error @+1 {{'cute_nvgpu.atom.mma' expects 5 to 8 operands, got 3}}
  cute_nvgpu.atom.mma %atom, %a, %a
  func.return
}

// -----

func.func @attribute(%t: !cute.ptr<f16, gmem>) {
  // expected-error @+1 {{'cute_nvgpu.arch.mbarrier_init' has no attribute 'cnt' (known: count)}}
  %b = cute_nvgpu.arch.mbarrier_init {cnt = 1}
  func.return
}

// -----

func.func @undefined() {
  // expected-error @+1 {{SSA value used before assignment}}
  cute_nvgpu.arch.mbarrier_wait %bar, %phase
  func.return
}

// -----

// WGMMA accumulates in place.
func.func @wgmma_c_is_d(%a: !cute_nvgpu.smem_desc_view<f16, K, Sw<3,3,3> o 0 o (64,64):(64,1)>, %c: !cute.memref<f32, rmem>, %d: !cute.memref<f32, rmem>) {
  %atom = cute_nvgpu.make_atom : !cute_nvgpu.sm90.mma<m64n64k16.ss.f32.f16.f16>
  // expected-error @+1 {{atom 'sm90.mma.m64n64k16.ss.f32.f16.f16' accumulates in place: C must be D}}
  cute_nvgpu.atom.mma %atom, %d, %a, %a, %c
  func.return
}

// -----

// target: sm_90
// WGMMA atoms need sm_90a (the arch-specific target), not plain sm_90.
func.func @wgmma_target() {
  // expected-error @+1 {{atom 'sm90.mma.m64n64k16.ss.f32.f16.f16' is not available on sm_90}}
  %atom = cute_nvgpu.make_atom : !cute_nvgpu.sm90.mma<m64n64k16.ss.f32.f16.f16>
  // expected-error @+1 {{'cute_nvgpu.warpgroup.fence' needs WGMMA, which sm_90 does not have}}
  cute_nvgpu.warpgroup.fence
  func.return
}

// -----

// A TMA load completes on an mbarrier; the coordinate has the descriptor's rank.
func.func @tma_binding(%t: !cute.ptr<f16, gmem>, %m: i32, %n: i32, %s: i32) {
  %g = cute.static : !cute.layout<(n,m):(1,s)>
  %d = nv_tileas.make_tiled_tma_desc %t, %g shapes(%n, %m) strides(%s) paddings() {mode = #cute_nvgpu.tma_load_mode<tiled>, elementBitWidth = 16} : !cute_nvgpu.tma_descriptor_tiled
  %tile = cute.static : !cute.composed_layout<Sw<3,4,3> o 0 o (8,64):(64,1)>
  %v = cute.static : !cute.layout<(8,64):(1@1,1@0)>
  %atom = cute_nvgpu.atom.non_exec_tiled_tma_load %d, %tile, %v {num_multicast = 1}
  // expected-error @+1 {{a TMA load completes on an mbarrier: expects a !cute_nvgpu.mbarrier operand}}
  %e0 = cute_nvgpu.atom.make_exec_tma %atom
  %bar = cute_nvgpu.arch.mbarrier_init {count = 1}
  %e1 = cute_nvgpu.atom.make_exec_tma %atom, %bar
  %smem = cute.alloc_smem : !cute.memref<f16, smem, Sw<3,4,3> o 0 o (8,64):(64,1)>
  %c = cute.make_coord %m
  // expected-error @+1 {{expects a !cute.coord<2> (the descriptor's rank), but got !cute.coord<1>}}
  cute_nvgpu.atom.tma_load %e1, %smem, %c
  func.return
}

// -----

// The descriptor's shapes and strides follow its layout's rank.
func.func @desc_rank(%t: !cute.ptr<f16, gmem>, %m: i32, %n: i32, %s: i32) {
  %g = cute.static : !cute.layout<(n,m):(1,s)>
  // expected-error @+1 {{a rank-2 descriptor takes 2 shapes and 1 strides (the leading stride is the element), got 2 and 2}}
  %d = nv_tileas.make_tiled_tma_desc %t, %g shapes(%n, %m) strides(%s, %s) paddings() {mode = #cute_nvgpu.tma_load_mode<tiled>, elementBitWidth = 16} : !cute_nvgpu.tma_descriptor_tiled
  func.return
}

// -----

// A fragment copy needs registers contiguous in the tile: here A is column-major.
func.func @fragment(%pa: !cute.ptr<bf16, gmem>) {
  %atom = cute_nvgpu.make_atom : !cute_nvgpu.sm80.mma<m16n8k16.f32.bf16.bf16.f32>
  %ga = cute.make_view %pa : !cute.memref<bf16, gmem, (16,16):(1,16)>
  %ra = cute.alloc_rmem : !cute.memref<bf16, rmem, ((4,8),(2,2,2)):((32,1),(16,8,128))>
  // expected-error @+1 {{register 0 of operand A holds the elements at offsets [0, 16]}}
  cute_nvgpu.atom.copy_fragment %atom, %ga, %ra {operand = "A"}
  func.return
}
