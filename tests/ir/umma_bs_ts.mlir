// A block-scaled UMMA with A in tensor memory (sm_100a): D (128 x 64, f32) = (A * SFA) (B * SFB)^T
// for one K-block of 32 e4m3 (kind::mxf8f6f4, one ue8m0 scale per row, .scale_vec::1X).
// * A (128 x 32 bytes, row-major) -> registers (thread t: row t, 8 words) -> tcgen05.st 32x32b.x8
//   into its TMEM buffer (row r in lane r, 4 elements per 32-bit column: 8 columns);
// * B (64 x 32) -> shared memory in the K-major no-swizzle canonical layout (8 x 16-byte core
//   matrices: rows 16 bytes apart, 8-row groups 128 bytes, the second 16 bytes of K 1024 on),
//   the layout read as (thread = row, value = K) by a 128-bit copy;
// * the scale factors, prepared by the host as 32 rows of 16 bytes (byte 4c of row i: the
//   scale of row 32c + i), -> shared memory -> tcgen05.cp 32x128b.warpx4 (the 32 rows into
//   lanes 0-31 of each of the four lane quarters: row r of SFA in lane r % 32, column r / 32);
// * thread 0 issues the MMA after a CTA barrier (tcgen05 fences around it), commits, every warp
//   waits and loads its 32 rows of D (tcgen05.ld 32x32b.x64) and stores them.
// tests/ir/test_ir_gemm_sm100.py assembles it and runs it on the CPU tcgen05 model.
builtin.module attributes {nvatom.target = "sm_100a"} {
  func.func @umma_bs_ts(%pa: !cute.ptr<f32, gmem>, %pb: !cute.ptr<e4m3, gmem>, %psfa: !cute.ptr<ue8m0, gmem>, %psfb: !cute.ptr<ue8m0, gmem>, %pd: !cute.ptr<f32, gmem>) {
    %umma = cute_nvgpu.make_atom : !cute_nvgpu.sm100.mma_bs<mxf8f6f4.cta1.m128n64k32.ts.f32.e4m3.e4m3.ue8m0.vs32>
    %copy = cute_nvgpu.make_atom : !cute_nvgpu.atom.universal_copy<128>
    %ga = cute.make_view %pa : !cute.memref<f32, gmem, (128,8):(8,1)>
    %ra = cute.alloc_rmem : !cute.memref<f32, rmem, (128,8):(8,1)>
    cute_nvgpu.atom.copy %copy, %ga, %ra
    %ta = cute.alloc_tmem : !cute.memref<e4m3, tmem, (128,8):(8,1)>
    %st = cute_nvgpu.make_atom : !cute_nvgpu.atom.tmem_store<32x32b.x8>
    cute_nvgpu.atom.copy %st, %ra, %ta
    %gb = cute.make_view %pb : !cute.memref<e4m3, gmem, (64,32):(32,1)>
    %sb = cute.alloc_smem : !cute.memref<e4m3, smem, ((8,8),(16,2)):((16,128),(1,1024))>
    cute_nvgpu.atom.copy %copy, %gb, %sb
    %b = cute_nvgpu.make_smem_desc %sb : !cute_nvgpu.smem_desc_view<e4m3, K, ((8,8),(16,2)):((16,128),(1,1024))>
    %gsfa = cute.make_view %psfa : !cute.memref<ue8m0, gmem, (32,16):(16,1)>
    %gsfb = cute.make_view %psfb : !cute.memref<ue8m0, gmem, (32,16):(16,1)>
    %ssfa = cute.alloc_smem : !cute.memref<ue8m0, smem, (32,16):(16,1)>
    %ssfb = cute.alloc_smem : !cute.memref<ue8m0, smem, (32,16):(16,1)>
    cute_nvgpu.atom.copy %copy, %gsfa, %ssfa
    cute_nvgpu.atom.copy %copy, %gsfb, %ssfb
    %sfa = cute.alloc_tmem : !cute.memref<ue8m0, tmem, (128,4):(4,1)>
    %sfb = cute.alloc_tmem : !cute.memref<ue8m0, tmem, (128,4):(4,1)>
    %cp = cute_nvgpu.make_atom : !cute_nvgpu.atom.s2t_copy<cta_group::1.32x128b.warpx4>
    %d = cute.alloc_tmem : !cute.memref<f32, tmem, (128,64):(64,1)>
    cute_nvgpu.arch.sync_threads
    cute_nvgpu.atom.copy %cp, %ssfa, %sfa
    cute_nvgpu.atom.copy %cp, %ssfb, %sfb
    cute_nvgpu.atom.mma %umma, %d, %ta, %b, %d, %sfa, %sfb {accumulate = false}
    %done = cute_nvgpu.arch.mbarrier_init {count = 1}
    cute_nvgpu.arch.umma_commit %done
    %c0 = arith.constant 0 : i32
    cute_nvgpu.arch.mbarrier_wait %done, %c0
    %ld = cute_nvgpu.make_atom : !cute_nvgpu.atom.tmem_load<32x32b.x64>
    %rows = cute.alloc_rmem : !cute.memref<f32, rmem, (128,64):(64,1)>
    cute_nvgpu.atom.copy %ld, %d, %rows
    %gd = cute.make_view %pd : !cute.memref<f32, gmem, (128,64):(64,1)>
    cute_nvgpu.atom.copy %copy, %rows, %gd
    func.return
  }
}
