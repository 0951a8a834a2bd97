// SM120 block-scaled MMA (SM120.mma_bs) through cute_nvgpu.atom.mma: the uppercase spelling
// is the textual contract, and the atom layer's SM120 verifier runs on each use.

// target: sm_120a
// The lowercase spelling is another (unregistered) type: a parser that lowercases cannot
// round-trip this dialect (docs/spec-deviations.md#atom-registry).
// expected-error @+1 {{'cute_nvgpu.sm120.mma_bs' is not registered}}
func.func @lowercase(%a: !cute_nvgpu.sm120.mma_bs<m16n8k64.mxf4nvf4.4X.f32.e2m1.e2m1.f32.ue4m3>) {
  func.return
}

// -----

// target: sm_120a
// 4X scale factors are ue4m3 for this form, not ue8m0.
func.func @scale_type(%a: !cute.memref<e2m1, rmem>, %b: !cute.memref<e2m1, rmem>, %c: !cute.memref<f32, rmem>, %sf: !cute.memref<ue8m0, rmem>) {
  %atom = cute_nvgpu.make_atom : !cute_nvgpu.SM120.mma_bs<m16n8k64.mxf4nvf4.4X.f32.e2m1.e2m1.f32.ue4m3>
  // expected-error @+1 {{SM120.mma_bs expects two register scale-factor operands of type ue4m3, but got scale_a: memref<ue8m0, rmem>, scale_b: memref<ue8m0, rmem>}}
  cute_nvgpu.atom.mma %atom, %c, %a, %b, %c, %sf, %sf
  func.return
}

// -----

// target: sm_120a
// Block-scaled atoms accumulate in f32 only.
func.func @accumulator(%a: !cute.memref<e2m1, rmem>, %b: !cute.memref<e2m1, rmem>, %c: !cute.memref<f16, rmem>, %sf: !cute.memref<ue4m3, rmem>) {
  %atom = cute_nvgpu.make_atom : !cute_nvgpu.SM120.mma_bs<m16n8k64.mxf4nvf4.4X.f32.e2m1.e2m1.f32.ue4m3>
  // expected-error @+1 {{expects operand c with element type f32, but get f16.}}
  cute_nvgpu.atom.mma %atom, %c, %a, %b, %c, %sf, %sf
  func.return
}

// -----

// target: sm_120a
// The scale factors are operands of the block-scaled atom.
func.func @no_scales(%a: !cute.memref<e2m1, rmem>, %b: !cute.memref<e2m1, rmem>, %c: !cute.memref<f32, rmem>) {
  %atom = cute_nvgpu.make_atom : !cute_nvgpu.SM120.mma_bs<m16n8k64.mxf4nvf4.4X.f32.e2m1.e2m1.f32.ue4m3>
  // expected-error @+1 {{takes the scale-factor fragments of A and B after C}}
  cute_nvgpu.atom.mma %atom, %c, %a, %b, %c
  func.return
}

// -----

// Consumer-Blackwell atoms are not available on sm_90a.
func.func @target() {
  // expected-error @+1 {{needs tier SM120/SM121, but target sm_90a is tier SM90}}
  %atom = cute_nvgpu.make_atom : !cute_nvgpu.SM120.mma_bs<m16n8k64.mxf4nvf4.4X.f32.e2m1.e2m1.f32.ue4m3>
  func.return
}
