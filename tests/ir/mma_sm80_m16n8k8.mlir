// Synthesizer arm 6 (docs/spec-deviations.md#reference-layout-synthesizer) as an sm80.mma atom: one
// warp computes D = A * B + C with mma.sync m16n8k8 f16 (f16 accumulation).  A is M x K, B is N x K
// (the ".col" operand), C and D are M x N, all row-major.  The register layouts are the PTX ISA's
// m16n8k8 f16 fragments (groupID g = lane >> 2, tig = lane % 4): A a0,a1 at (g, 2 tig + i), a2,a3
// at row g + 8; B b0,b1 at (k = 2 tig + i, n = g); C/D c0,c1 at (g, 2 tig + i), c2,c3 at row g + 8.
func.func @mma_m16n8k8_f16(%pa: !cute.ptr<f16, gmem>, %pb: !cute.ptr<f16, gmem>, %pc: !cute.ptr<f16, gmem>, %pd: !cute.ptr<f16, gmem>) {
  %atom = cute_nvgpu.make_atom : !cute_nvgpu.sm80.mma<m16n8k8.f16.f16.f16.f16>
  %ga = cute.make_view %pa : !cute.memref<f16, gmem, (16,8):(8,1)>
  %gb = cute.make_view %pb : !cute.memref<f16, gmem, (8,8):(8,1)>
  %gc = cute.make_view %pc : !cute.memref<f16, gmem, (16,8):(8,1)>
  %gd = cute.make_view %pd : !cute.memref<f16, gmem, (16,8):(8,1)>
  %ra = cute.alloc_rmem : !cute.memref<f16, rmem, ((4,8),(2,2)):((32,1),(16,8))>
  %rb = cute.alloc_rmem : !cute.memref<f16, rmem, ((4,8),2):((16,1),8)>
  %rc = cute.alloc_rmem : !cute.memref<f16, rmem, ((4,8),(2,2)):((32,1),(16,8))>
  %rd = cute.alloc_rmem : !cute.memref<f16, rmem, ((4,8),(2,2)):((32,1),(16,8))>
  cute_nvgpu.atom.copy_fragment %atom, %ga, %ra {operand = "A"}
  cute_nvgpu.atom.copy_fragment %atom, %gb, %rb {operand = "B"}
  cute_nvgpu.atom.copy_fragment %atom, %gc, %rc {operand = "C"}
  cute_nvgpu.atom.mma %atom, %rd, %ra, %rb, %rc
  cute_nvgpu.atom.copy_fragment %atom, %rd, %gd {operand = "D"}
  func.return
}
