// The MMA verifier diagnostics (docs/spec-deviations.md#mma-verifier-ladders), reached through
// cute_nvgpu.atom.mma: the register-MMA ladder (sm80/sm89), the universal FMA, and the WGMMA type
// pairs (sm90). Fragments are function arguments: only their types matter to the verifier.

// Non-UMMA verifier: a composed (swizzled) register layout.
func.func @composed(%a: !cute.memref<bf16, rmem, Sw<1,2,3> o 0 o ((4,8),(2,2,2)):((32,1),(16,8,128))>, %b: !cute.memref<bf16, rmem>, %c: !cute.memref<f32, rmem>) {
  %atom = cute_nvgpu.make_atom : !cute_nvgpu.sm80.mma<m16n8k16.f32.bf16.bf16.f32>
  // expected-error @+1 {{doesn't support composed layout for A/B/D, but got: A: Sw<1,2,3> o 0 o ((4,8),(2,2,2)):((32,1),(16,8,128)), B: None, D:None}}
  cute_nvgpu.atom.mma %atom, %c, %a, %b, %c
  func.return
}

// -----

// Non-UMMA verifier: A in shared memory.
func.func @rmem(%a: !cute.memref<bf16, smem>, %b: !cute.memref<bf16, rmem>, %c: !cute.memref<f32, rmem>) {
  %atom = cute_nvgpu.make_atom : !cute_nvgpu.sm80.mma<m16n8k16.f32.bf16.bf16.f32>
  // expected-error @+1 {{expects rmem for input operands, but got A: memref<bf16, smem>, B: memref<bf16, rmem>, D: memref<f32, rmem>}}
  cute_nvgpu.atom.mma %atom, %c, %a, %b, %c
  func.return
}

// -----

// Element-type ladder, operand a.
func.func @type_a(%a: !cute.memref<f16, rmem>, %b: !cute.memref<bf16, rmem>, %c: !cute.memref<f32, rmem>) {
  %atom = cute_nvgpu.make_atom : !cute_nvgpu.sm80.mma<m16n8k16.f32.bf16.bf16.f32>
  // expected-error @+1 {{expects operand a with element type bf16, but get f16.}}
  cute_nvgpu.atom.mma %atom, %c, %a, %b, %c
  func.return
}

// -----

// Element-type ladder, operand b (an sm89 FP8 atom).
func.func @type_b(%a: !cute.memref<e4m3, rmem>, %b: !cute.memref<e4m3, rmem>, %c: !cute.memref<f32, rmem>) {
  %atom = cute_nvgpu.make_atom : !cute_nvgpu.sm89.mma<m16n8k32.f32.e4m3.e5m2.f32>
  // expected-error @+1 {{expects operand b with element type e5m2, but get e4m3.}}
  cute_nvgpu.atom.mma %atom, %c, %a, %b, %c
  func.return
}

// -----

// Element-type ladder, operand c.
func.func @type_c(%a: !cute.memref<bf16, rmem>, %b: !cute.memref<bf16, rmem>, %c: !cute.memref<f16, rmem>, %d: !cute.memref<f32, rmem>) {
  %atom = cute_nvgpu.make_atom : !cute_nvgpu.sm80.mma<m16n8k16.f32.bf16.bf16.f32>
  // expected-error @+1 {{expects operand c with element type f32, but get f16.}}
  cute_nvgpu.atom.mma %atom, %d, %a, %b, %c
  func.return
}

// -----

// A dynamic (non-static) fragment layout.
func.func @static(%a: !cute.memref<bf16, rmem, (t,v):(1,32)>, %b: !cute.memref<bf16, rmem>, %c: !cute.memref<f32, rmem>) {
  %atom = cute_nvgpu.make_atom : !cute_nvgpu.sm80.mma<m16n8k16.f32.bf16.bf16.f32>
  // expected-error @+1 {{expects static and no scaled basis layout for}}
  cute_nvgpu.atom.mma %atom, %c, %a, %b, %c
  func.return
}

// -----

// A fragment layout that is not the atom's (B's layout given for A).
func.func @layout(%a: !cute.memref<bf16, rmem, ((4,8),(2,2)):((16,1),(8,64))>, %b: !cute.memref<bf16, rmem>, %c: !cute.memref<f32, rmem>) {
  %atom = cute_nvgpu.make_atom : !cute_nvgpu.sm80.mma<m16n8k16.f32.bf16.bf16.f32>
  // expected-error @+1 {{expects Mma atom layout of ((4,8),(2,2,2)):((32,1),(16,8,128)) for operand A}}
  cute_nvgpu.atom.mma %atom, %c, %a, %b, %c
  func.return
}

// -----

// Universal FMA: all operands of one element type.
func.func @fma(%a: !cute.memref<f16, rmem>, %b: !cute.memref<f32, rmem>, %c: !cute.memref<f32, rmem>) {
  %atom = cute_nvgpu.make_atom : !cute_nvgpu.atom.universal_fma<f32>
  // expected-error @+1 {{expects all mma operands to have element type f32, but got A: f16}}
  cute_nvgpu.atom.mma %atom, %c, %a, %b, %c
  func.return
}

// -----

// WGMMA: s8 A with an f32 accumulator.
func.func @wgmma_int8(%a: !cute.memref<s8, rmem>, %b: !cute_nvgpu.smem_desc_view<s8, K, Sw<3,4,3> o 0 o (64,128):(128,1)>, %d: !cute.memref<f32, rmem>) {
  %atom = cute_nvgpu.make_atom : !cute_nvgpu.sm90.mma<m64n64k32.rs.s32.s8.s8>
  // expected-error @+1 {{expects A/B of type s8/u8 and D of type i32}}
  cute_nvgpu.atom.mma %atom, %d, %a, %b, %d
  func.return
}

// -----

// WGMMA: 4-bit integers (WGMMA has none).
func.func @wgmma_int4(%a: !cute.memref<s4, rmem>, %b: !cute_nvgpu.smem_desc_view<s8, K, Sw<3,4,3> o 0 o (64,128):(128,1)>, %d: !cute.memref<s32, rmem>) {
  %atom = cute_nvgpu.make_atom : !cute_nvgpu.sm90.mma<m64n64k32.rs.s32.s8.s8>
  // expected-error @+1 {{expects A/B of type s4/u4 and D of type i32}}
  cute_nvgpu.atom.mma %atom, %d, %a, %b, %d
  func.return
}

// -----

// WGMMA: b1 A with an f16 B.
func.func @wgmma_b1(%a: !cute.memref<b1, rmem>, %b: !cute_nvgpu.smem_desc_view<f16, K, Sw<3,3,3> o 0 o (64,64):(64,1)>, %d: !cute.memref<s32, rmem>) {
  %atom = cute_nvgpu.make_atom : !cute_nvgpu.sm90.mma<m64n64k256.rs.s32.b1.b1.and.popc>
  // expected-error @+1 {{expects A/B of type u1 and D of type i32}}
  cute_nvgpu.atom.mma %atom, %d, %a, %b, %d
  func.return
}

// -----

// WGMMA: e4m3 A with an f16 B.
func.func @wgmma_fp8(%a: !cute_nvgpu.smem_desc_view<e4m3, K, Sw<3,4,3> o 0 o (64,128):(128,1)>, %b: !cute_nvgpu.smem_desc_view<f16, K, Sw<3,3,3> o 0 o (64,64):(64,1)>, %d: !cute.memref<f32, rmem>) {
  %atom = cute_nvgpu.make_atom : !cute_nvgpu.sm90.mma<m64n64k32.ss.f32.e4m3.e4m3>
  // expected-error @+1 {{expects A/B of the e5m2/e4m3 type}}
  cute_nvgpu.atom.mma %atom, %d, %a, %b, %d
  func.return
}

// -----

// WGMMA element-type ladder: operand b.
func.func @wgmma_type_b(%a: !cute_nvgpu.smem_desc_view<f16, K, Sw<3,3,3> o 0 o (64,64):(64,1)>, %b: !cute_nvgpu.smem_desc_view<bf16, K, Sw<3,3,3> o 0 o (64,64):(64,1)>, %d: !cute.memref<f32, rmem>) {
  %atom = cute_nvgpu.make_atom : !cute_nvgpu.sm90.mma<m64n64k16.ss.f32.f16.f16>
  // expected-error @+1 {{expects operand b with element type f16, but get bf16.}}
  cute_nvgpu.atom.mma %atom, %d, %a, %b, %d
  func.return
}
