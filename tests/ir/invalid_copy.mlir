// Copy-atom diagnostics through cute_nvgpu.atom.copy: the vectorisation templates of
// docs/spec-deviations.md#copy-atom-contracts and the atoms' own checks (tier, residency, width).

// A strided source cannot be moved by one 128-bit access.
func.func @strides_one(%s: !cute.memref<f32, gmem, 4:2>, %d: !cute.memref<f32, rmem, 4:1>) {
  %atom = cute_nvgpu.make_atom : !cute_nvgpu.atom.universal_copy<128>
  // expected-error @+1 {{'atom.universal_copy<128>' cannot vectorize copy to 4 elements (static strides must be 1)}}
  cute_nvgpu.atom.copy %atom, %s, %d
  func.return
}

// -----

// Source and destination disagree on the order of the values.
func.func @strides_match(%s: !cute.memref<f32, gmem, (2,2):(1,2)>, %d: !cute.memref<f32, rmem, (2,2):(2,1)>) {
  %atom = cute_nvgpu.make_atom : !cute_nvgpu.atom.universal_copy<128>
  // expected-error @+1 {{'atom.universal_copy<128>' cannot vectorize copy to 4 elements (static strides must match)}}
  cute_nvgpu.atom.copy %atom, %s, %d
  func.return
}

// -----

// target: sm_80
// stmatrix needs sm_90.
func.func @tier(%s: !cute.memref<f16, rmem>, %d: !cute.memref<f16, smem>) {
  // expected-error @+1 {{atom 'atom.stsm<m8n8.x4>' needs tier SM90, but target sm_80 is tier SM80}}
  %atom = cute_nvgpu.make_atom : !cute_nvgpu.atom.stsm<m8n8.x4>
  cute_nvgpu.atom.copy %atom, %s, %d
  func.return
}

// -----

// cp.async copies global to shared memory only.
func.func @residency(%s: !cute.memref<f32, smem>, %d: !cute.memref<f32, smem>) {
  %atom = cute_nvgpu.make_atom : !cute_nvgpu.atom.simt_async_copy<16>
  // expected-error @+1 {{'atom.simt_async_copy<16>' copies gmem -> smem}}
  cute_nvgpu.atom.copy %atom, %s, %d
  func.return
}

// -----

// target: sm_75
// cp.async groups need sm_80.
func.func @cp_async_tier() {
  // expected-error @+1 {{'cute_nvgpu.arch.cp_async_commit_group' needs cp.async (sm_80 and later), not sm_75}}
  cute_nvgpu.arch.cp_async_commit_group
  // expected-error @+1 {{'cute_nvgpu.arch.cp_async_wait_group' needs cp.async (sm_80 and later), not sm_75}}
  cute_nvgpu.arch.cp_async_wait_group {pending = 0}
  func.return
}

// -----

func.func @wait_count() {
  // expected-error @+1 {{cp.async.wait_group takes a count >= 0, got -1}}
  cute_nvgpu.arch.cp_async_wait_group {pending = -1}
  func.return
}

// -----

// cute.retile keeps the element type and the registers of each thread.
func.func @retile() {
  %r = cute.alloc_rmem : !cute.memref<f16, rmem, (32,(2,4)):(2,(1,64))>
  // expected-error @+1 {{retile keeps the registers: (32,(2,4)):(2,(1,64)) holds 8 values per thread, ((4,8),(2,2)):((32,1),(16,8)) 4}}
  %a = cute.retile %r : !cute.memref<f16, rmem, ((4,8),(2,2)):((32,1),(16,8))>
  // expected-error @+1 {{retile keeps the element type: f16 != bf16}}
  %b = cute.retile %r : !cute.memref<bf16, rmem, (32,(2,4)):(2,(1,64))>
  func.return
}

// -----

// target: sm_100a
// TMEM copy atoms (tcgen05.ld/st/cp) check direction and element width.
func.func @tmem(%t: !cute.memref<f32, tmem>, %r: !cute.memref<f32, rmem>, %s: !cute.memref<f16, smem>) {
  %ld = cute_nvgpu.make_atom : !cute_nvgpu.atom.tmem_load<32x32b.x4>
  // expected-error @+1 {{'atom.tmem_load<32x32b.x4>' copies tmem -> rmem, but got src: rmem, dst: tmem}}
  cute_nvgpu.atom.copy %ld, %r, %t
  %cp = cute_nvgpu.make_atom : !cute_nvgpu.atom.s2t_copy<cta_group::1.128x256b>
  // expected-error @+1 {{'atom.s2t_copy<cta_group::1.128x256b>' copies smem -> tmem, but got src: rmem, dst: tmem}}
  cute_nvgpu.atom.copy %cp, %r, %t
  func.return
}

// -----

// target: sm_90a
func.func @tmem_tier() {
  // expected-error @+1 {{atom 'atom.tmem_store<16x64b.x2>' needs tier SM100/SM103, but target sm_90a is tier SM90}}
  %st = cute_nvgpu.make_atom : !cute_nvgpu.atom.tmem_store<16x64b.x2>
  func.return
}

// -----

// A swizzle too fine for the atom's rows: Sw<3,2,3> permutes 4-element units of f16, but an
// ldmatrix row (and a 16-byte cp.async) is 8 contiguous elements.  The verifier says so in
// the specification's words, not the layout algebra's (which had no right inverse to give).
func.func @swizzle_too_fine_for_ldsm_rows() {
  %ld = cute_nvgpu.make_atom : !cute_nvgpu.atom.ldsm<m8n8.x4>
  %sa = cute.alloc_smem : !cute.memref<f16, smem, Sw<3,2,3> o 0 o (32,8):(64,1)>
  %r = cute.alloc_rmem : !cute.memref<f16, rmem, (32,(2,4)):(2,(1,64))>
  // expected-error @+1 {{'atom.ldsm<m8n8.x4>' cannot vectorize copy to 8 elements (static strides must be 1): the swizzle Sw<3,2,3> permutes units of 4 16-bit element(s), less than the 16-byte access}}
  cute_nvgpu.atom.copy %ld, %sa, %r
  func.return
}

// -----

func.func @swizzle_too_fine_for_cp_async(%pa: !cute.ptr<f16, gmem>) {
  %cp = cute_nvgpu.make_atom : !cute_nvgpu.atom.simt_async_copy<16>
  %ga = cute.make_view %pa : !cute.memref<f16, gmem, ((8,2,2),8):((16,128,8),1)>
  %sa = cute.alloc_smem : !cute.memref<f16, smem, Sw<3,2,3> o 0 o ((8,2,2),8):((64,512,8),1)>
  // expected-error @+1 {{'atom.simt_async_copy<16>' cannot vectorize copy to 8 elements (static strides must be 1): the swizzle Sw<3,2,3> permutes units of 4 16-bit element(s), less than the 16-byte access}}
  cute_nvgpu.atom.copy %cp, %ga, %sa
  func.return
}

// -----

func.func @swizzle_too_fine_for_stsm_rows() {
  %st = cute_nvgpu.make_atom : !cute_nvgpu.atom.stsm<m8n8.x4>
  %sd = cute.alloc_smem : !cute.memref<f16, smem, Sw<1,1,3> o 0 o (32,8):(64,1)>
  %r = cute.alloc_rmem : !cute.memref<f16, rmem, (32,(2,4)):(2,(1,64))>
  // expected-error @+1 {{'atom.stsm<m8n8.x4>' cannot vectorize copy to 8 elements (static strides must be 1): the swizzle Sw<1,1,3> permutes units of 2 16-bit element(s), less than the 16-byte access}}
  cute_nvgpu.atom.copy %st, %r, %sd
  func.return
}
