// Copy-atom diagnostics through cute_nvgpu.atom.copy: seed 004's vectorisation templates and
// the copy atoms' own checks (tier, residency, element width).

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
