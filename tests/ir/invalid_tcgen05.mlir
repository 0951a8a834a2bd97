// SM100 tcgen05 uses the IR checks beyond the atoms' ladders (nvatom.ir.tcgen05; docs/ir.md,
// "Verification"): TMEM buffers, operands that must fit them, one CTA group per kernel,
// tcgen05.cp sources, tcgen05.shift targets, commit multicast masks.

// target: sm_100a
func.func @buffer_form() {
  // expected-error @+1 {{a TMEM buffer is (lanes, columns):(columns, 1) of at most 128 lanes, got (128,64):(1,128)}}
  %t = cute.alloc_tmem : !cute.memref<f32, tmem, (128,64):(1,128)>
  func.return
}

// -----

// target: sm_100a
// An M = 128 D of N = 64 takes 64 columns of the 128 lanes.
func.func @d_does_not_fit() {
  %atom = cute_nvgpu.make_atom : !cute_nvgpu.sm100.mma<f16.cta1.m128n64k16.ss.f32.f16.f16>
  %sa = cute.alloc_smem : !cute.memref<f16, smem, Sw<1,3,3> o 0 o ((8,16),(8,2)):((16,128),(1,8))>
  %a = cute_nvgpu.make_smem_desc %sa : !cute_nvgpu.smem_desc_view<f16, K, Sw<1,3,3> o 0 o ((8,16),(8,2)):((16,128),(1,8))>
  %sb = cute.alloc_smem : !cute.memref<f16, smem, Sw<1,3,3> o 0 o ((8,8),(8,2)):((16,128),(1,8))>
  %b = cute_nvgpu.make_smem_desc %sb : !cute_nvgpu.smem_desc_view<f16, K, Sw<1,3,3> o 0 o ((8,8),(8,2)):((16,128),(1,8))>
  %d = cute.alloc_tmem : !cute.memref<f32, tmem, (128,32):(32,1)>
  // expected-error @+1 {{puts operand D in 128 TMEM lanes x 64 32-bit columns, but its buffer has 128 lanes x 32 columns}}
  cute_nvgpu.atom.mma %atom, %d, %a, %b, %d
  %e = cute.alloc_tmem : !cute.memref<f32, tmem, (128,64):(64,1)>
  // expected-error @+1 {{accumulates in place in tensor memory: C must be D}}
  cute_nvgpu.atom.mma %atom, %e, %a, %b, %d
  func.return
}

// -----

// target: sm_100a
func.func @one_cta_group() attributes {cluster = [2, 1, 1]} {
  %s = cute.alloc_smem : !cute.memref<ue8m0, smem, ((8,16),(16,2)):((16,128),(1,2048))>
  %t = cute.alloc_tmem : !cute.memref<ue8m0, tmem, (128,8):(8,1)>
  %cp1 = cute_nvgpu.make_atom : !cute_nvgpu.atom.s2t_copy<cta_group::1.128x256b>
  %cp2 = cute_nvgpu.make_atom : !cute_nvgpu.atom.s2t_copy<cta_group::2.128x256b>
  // expected-error @+1 {{kernel 'one_cta_group' uses tcgen05 with cta_group::1 and cta_group::2}}
  cute_nvgpu.atom.copy %cp1, %s, %t
  func.return
}

// -----

// target: sm_100a
func.func @cp_source() {
  %cp = cute_nvgpu.make_atom : !cute_nvgpu.atom.s2t_copy<cta_group::1.128x256b>
  %s = cute.alloc_smem : !cute.memref<ue8m0, smem, (128,16):(16,1)>
  %t = cute.alloc_tmem : !cute.memref<ue8m0, tmem, (128,8):(8,1)>
  // expected-error @+1 {{copies 128 rows of 256 bits: its shared-memory source is a 128 x 32 tile of 8-bit elements}}
  cute_nvgpu.atom.copy %cp, %s, %t
  func.return
}

// -----

// target: sm_100f
func.func @shift_on_f() {
  %t = cute.alloc_tmem : !cute.memref<f32, tmem, (128,32):(32,1)>
  // expected-error @+1 {{'cute_nvgpu.arch.tmem_shift' (tcgen05.shift) is not available on sm_100f}}
  cute_nvgpu.arch.tmem_shift %t
  func.return
}

// -----

// target: sm_100a
func.func @commit_mask() attributes {cluster = [2, 1, 1]} {
  %bar = cute_nvgpu.arch.mbarrier_init {count = 1}
  // expected-error @+1 {{multicast_mask = 4 names no CTAs of the kernel's cluster of 2}}
  cute_nvgpu.arch.umma_commit %bar {multicast_mask = 4}
  func.return
}

// -----

// target: sm_100a
func.func @alloc_placement(%n: i32) {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  scf.for %i = %c0 to %n step %c1 : i32 {
    // expected-error @+1 {{cute.alloc_tmem is made at the kernel's top level}}
    %t = cute.alloc_tmem : !cute.memref<f32, tmem, (128,32):(32,1)>
  }
  %a = cute.alloc_tmem : !cute.memref<f32, tmem, (128,256):(256,1)>
  // expected-error @+1 {{the kernel's TMEM buffers take 544 columns (each a power of two >= 32); a CTA has 512}}
  %b = cute.alloc_tmem : !cute.memref<f32, tmem, (128,256):(256,1)>
  func.return
}
