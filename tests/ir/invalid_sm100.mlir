// SM100 UMMA (tcgen05.mma) atoms through cute_nvgpu.atom.mma: the UMMA ladder (residency, layouts;
// docs/spec-deviations.md#mma-verifier-ladders) and the block-scale checks.  A and B are descriptor
// views or TMEM memrefs, D a TMEM memref.

// target: sm_100a
// A of an ss atom must be a descriptor view.
func.func @residency_a(%a: !cute.memref<f16, tmem>, %b: !cute_nvgpu.smem_desc_view<f16, K, Sw<3,3,3> o 0 o (256,64):(64,1)>, %d: !cute.memref<f32, tmem>) {
  %atom = cute_nvgpu.make_atom : !cute_nvgpu.sm100.mma<f16.cta1.m128n256k16.ss.f32.f16.f16>
  // expected-error @+1 {{expects memref/smem_desc_view for operand A, but gets A:memref<f16, tmem>.}}
  cute_nvgpu.atom.mma %atom, %d, %a, %b, %d
  func.return
}

// -----

// target: sm_100a
func.func @residency_b(%a: !cute_nvgpu.smem_desc_view<f16, K, Sw<3,3,3> o 0 o (128,64):(64,1)>, %b: !cute.memref<f16, tmem>, %d: !cute.memref<f32, tmem>) {
  %atom = cute_nvgpu.make_atom : !cute_nvgpu.sm100.mma<f16.cta1.m128n256k16.ss.f32.f16.f16>
  // expected-error @+1 {{expects smem_desc_view for operand B, but gets B: memref<f16, tmem>.}}
  cute_nvgpu.atom.mma %atom, %d, %a, %b, %d
  func.return
}

// -----

// target: sm_100a
// The accumulator lives in tensor memory, not registers.
func.func @residency_d(%a: !cute_nvgpu.smem_desc_view<f16, K, Sw<3,3,3> o 0 o (128,64):(64,1)>, %b: !cute_nvgpu.smem_desc_view<f16, K, Sw<3,3,3> o 0 o (256,64):(64,1)>, %d: !cute.memref<f32, rmem>) {
  %atom = cute_nvgpu.make_atom : !cute_nvgpu.sm100.mma<f16.cta1.m128n256k16.ss.f32.f16.f16>
  // expected-error @+1 {{expects memref for operand D, but gets D: memref<f32, rmem>.}}
  cute_nvgpu.atom.mma %atom, %d, %a, %b, %d
  func.return
}

// -----

// target: sm_100a
// D's 100 rows are no multiple of the atom's M = 128 (D given as a TMEM-address layout,
// lane << 16 | column; a (lanes, columns):(columns, 1) buffer is checked to fit instead).
func.func @invalid_layout(%a: !cute_nvgpu.smem_desc_view<f16, K, Sw<3,3,3> o 0 o (128,64):(64,1)>, %b: !cute_nvgpu.smem_desc_view<f16, K, Sw<3,3,3> o 0 o (256,64):(64,1)>, %d: !cute.memref<f32, tmem, (100,256):(65536,1)>) {
  %atom = cute_nvgpu.make_atom : !cute_nvgpu.sm100.mma<f16.cta1.m128n256k16.ss.f32.f16.f16>
  // expected-error @+1 {{invalid layout of A/B/D. A: Sw<3,3,3> o 0 o (128,64):(64,1), B: Sw<3,3,3> o 0 o (256,64):(64,1), D:(100,256):(65536,1)}}
  cute_nvgpu.atom.mma %atom, %d, %a, %b, %d
  func.return
}

// -----

// target: sm_100a
// Each tile is a multiple of the atom, but A has 128 rows and D 256.
func.func @not_a_gemm(%a: !cute_nvgpu.smem_desc_view<f16, K, Sw<3,3,3> o 0 o (128,64):(64,1)>, %b: !cute_nvgpu.smem_desc_view<f16, K, Sw<3,3,3> o 0 o (256,64):(64,1)>, %d: !cute.memref<f32, tmem, (256,256):(256,1)>) {
  %atom = cute_nvgpu.make_atom : !cute_nvgpu.sm100.mma<f16.cta1.m128n256k16.ss.f32.f16.f16>
  // expected-error @+1 {{layoutA, layoutB and layoutD fail to form a gemm. A: Sw<3,3,3> o 0 o (128,64):(64,1), B: Sw<3,3,3> o 0 o (256,64):(64,1), D: (256,256):(256,1)}}
  cute_nvgpu.atom.mma %atom, %d, %a, %b, %d
  func.return
}

// -----

// target: sm_100a
// Block-scaled UMMA accumulates in f32.
func.func @bs_c_f32(%a: !cute_nvgpu.smem_desc_view<e4m3, K, Sw<3,4,3> o 0 o (128,128):(128,1)>, %c: !cute.memref<f16, tmem>, %d: !cute.memref<f32, tmem>, %sf: !cute.memref<ue8m0, tmem>) {
  %atom = cute_nvgpu.make_atom : !cute_nvgpu.sm100.mma_bs<mxf8f6f4.cta1.m128n8k32.ss.f32.e4m3.e4m3.ue8m0.vs32>
  // expected-error @+1 {{expects c type to be Float32}}
  cute_nvgpu.atom.mma %atom, %d, %a, %a, %c, %sf, %sf
  func.return
}

// -----

// target: sm_100a
func.func @bs_sf_same(%a: !cute_nvgpu.smem_desc_view<e4m3, K, Sw<3,4,3> o 0 o (128,128):(128,1)>, %d: !cute.memref<f32, tmem>, %sfa: !cute.memref<ue8m0, tmem>, %sfb: !cute.memref<ue4m3, tmem>) {
  %atom = cute_nvgpu.make_atom : !cute_nvgpu.sm100.mma_bs<mxf8f6f4.cta1.m128n8k32.ss.f32.e4m3.e4m3.ue8m0.vs32>
  // expected-error @+1 {{expects sfa/sfb element types to be the same}}
  cute_nvgpu.atom.mma %atom, %d, %a, %a, %d, %sfa, %sfb
  func.return
}

// -----

// target: sm_90a
func.func @tmem_needs_tcgen05() {
  // expected-error @+1 {{tensor memory needs tcgen05, which sm_90a does not have}}
  %t = cute.alloc_tmem : !cute.memref<f32, tmem, (128,64):(64,1)>
  func.return
}

// -----

// target: sm_100a
func.func @tmem_columns(%x: i32) {
  // expected-error @+1 {{(128,1024):(1024,1) needs 1024 TMEM columns; a CTA has 512}}
  %t = cute.alloc_tmem : !cute.memref<f32, tmem, (128,1024):(1024,1)>
  // expected-error @+1 {{a TMEM buffer is (lanes, columns), got 128:1}}
  %u = cute.alloc_tmem : !cute.memref<f32, tmem, 128:1>
  // expected-error @+1 {{expects a !cute_nvgpu.mbarrier, but got i32}}
  cute_nvgpu.arch.umma_commit %x
  func.return
}

// -----

// A cta_group::2 atom runs on a CTA pair of a cluster: the kernel must declare one
// (issue 16: it used to verify and fail only when compiled).
// target: sm_100a
func.func @cta_pair_without_cluster(%a: !cute_nvgpu.smem_desc_view<f16, K, Sw<3,3,3> o 0 o (128,64):(64,1)>, %b: !cute_nvgpu.smem_desc_view<f16, K, Sw<3,3,3> o 0 o (256,64):(64,1)>, %d: !cute.memref<f32, tmem>) {
  %atom = cute_nvgpu.make_atom : !cute_nvgpu.sm100.mma<f16.cta2.m128n256k16.ss.f32.f16.f16>
  // expected-error @+1 {{atom 'sm100.mma.f16.cta2.m128n256k16.ss.f32.f16.f16' runs on a CTA pair (cta_group::2): its kernel needs a cluster of an even number of CTAs (e.g. cluster = [2, 1, 1]), but has no cluster attribute}}
  cute_nvgpu.atom.mma %atom, %d, %a, %b, %d
  func.return
}

// -----

// target: sm_100a
func.func @cta_pair_odd_cluster(%a: !cute_nvgpu.smem_desc_view<f16, K, Sw<3,3,3> o 0 o (128,64):(64,1)>, %b: !cute_nvgpu.smem_desc_view<f16, K, Sw<3,3,3> o 0 o (256,64):(64,1)>, %d: !cute.memref<f32, tmem>) attributes {cluster = [3, 1, 1]} {
  %atom = cute_nvgpu.make_atom : !cute_nvgpu.sm100.mma<f16.cta2.m128n256k16.ss.f32.f16.f16>
  // expected-error @+1 {{but has cluster = [3, 1, 1]}}
  cute_nvgpu.atom.mma %atom, %d, %a, %b, %d
  func.return
}
