// An SM120 block-scaled MMA (consumer Blackwell, sm_120a): D = (A * SFA) x (B * SFB) + C with
// NVFP4 operands (e2m1, two per byte) and ue4m3 scale factors, one scale per 16 K elements.
// The uppercase SM120 of the atom type is the specification's spelling (its atom registry).
builtin.module attributes {nvatom.target = "sm_120a"} {
  func.func @mma_bs_nvfp4(%pd: !cute.ptr<f32, gmem>) {
    %atom = cute_nvgpu.make_atom : !cute_nvgpu.SM120.mma_bs<m16n8k64.mxf4nvf4.4X.f32.e2m1.e2m1.f32.ue4m3>
    %a = cute.alloc_rmem : !cute.memref<e2m1, rmem, ((4,8),(8,2,2)):((128,1),(16,8,512))>
    %b = cute.alloc_rmem : !cute.memref<e2m1, rmem, ((4,8),(8,2)):((64,1),(8,256))>
    %c = cute.alloc_rmem : !cute.memref<f32, rmem, ((4,8),(2,2)):((32,1),(16,8))>
    %d = cute.alloc_rmem : !cute.memref<f32, rmem, ((4,8),(2,2)):((32,1),(16,8))>
    %sfa = cute.alloc_rmem : !cute.memref<ue4m3, rmem, ((2,2,8),4):((8,0,1),16)>
    %sfb = cute.alloc_rmem : !cute.memref<ue4m3, rmem, ((4,8),4):((0,1),8)>
    cute_nvgpu.atom.mma %atom, %d, %a, %b, %c, %sfa, %sfb
    %gd = cute.make_view %pd : !cute.memref<f32, gmem, (16,8):(8,1)>
    cute_nvgpu.atom.copy_fragment %atom, %d, %gd {operand = "D"}
    func.return
  }
}
