// An SM100 UMMA GEMM written in the IR (sm_100a; after nvatom.kernels.gemm_sm100): one CTA of
// four warps computes the 128 x 64 f32 tile (%m0, %n0) of D = A * B^T, A (M x K) and B (N x K)
// bf16 row-major, D row-major with N = 128 columns (the D view's row stride); %pd points at the
// tile's first element.  Per 64-element K tile: thread 0 TMA-loads A (128 x 64) and B (64 x 64),
// K-major with the 128-byte swizzle (Sw<3,3,3> in 16-bit elements), onto %full; after the wait
// it issues the kind::f16 UMMA over the tile's four K-blocks into the TMEM accumulator (the
// first tile with accumulate = false) and commits to %done; everyone waits on %done before
// the single stage is reloaded.  Epilogue: each warp loads its 32 TMEM lanes (tcgen05.ld
// 32x32b.x64: thread t of warp w holds row 32 w + t) and stores the row with 128-bit copies.
// tests/ir/test_ir_gemm_sm100.py assembles it and runs its op sequence on the CPU model.
builtin.module attributes {nvatom.target = "sm_100a"} {
  func.func @gemm_sm100(%pa: !cute.ptr<bf16, gmem>, %pb: !cute.ptr<bf16, gmem>, %pd: !cute.ptr<f32, gmem>, %m: i32, %n: i32, %k: i32, %m0: i32, %n0: i32, %ktiles: i32) {
    %la = cute.static : !cute.layout<(k,m):(1,k)>
    %lb = cute.static : !cute.layout<(k,n):(1,k)>
    %desc_a = nv_tileas.make_tiled_tma_desc %pa, %la shapes(%k, %m) strides(%k) paddings() {mode = #cute_nvgpu.tma_load_mode<tiled>, elementBitWidth = 16} : !cute_nvgpu.tma_descriptor_tiled
    %desc_b = nv_tileas.make_tiled_tma_desc %pb, %lb shapes(%k, %n) strides(%k) paddings() {mode = #cute_nvgpu.tma_load_mode<tiled>, elementBitWidth = 16} : !cute_nvgpu.tma_descriptor_tiled
    %tile_a = cute.static : !cute.composed_layout<Sw<3,3,3> o 0 o (128,64):(64,1)>
    %tile_b = cute.static : !cute.composed_layout<Sw<3,3,3> o 0 o (64,64):(64,1)>
    %vmap_a = cute.static : !cute.layout<(128,64):(1@1,1@0)>
    %vmap_b = cute.static : !cute.layout<(64,64):(1@1,1@0)>
    %atom_a = cute_nvgpu.atom.non_exec_tiled_tma_load %desc_a, %tile_a, %vmap_a {num_multicast = 1}
    %atom_b = cute_nvgpu.atom.non_exec_tiled_tma_load %desc_b, %tile_b, %vmap_b {num_multicast = 1}
    %full = cute_nvgpu.arch.mbarrier_init {count = 2}
    %done = cute_nvgpu.arch.mbarrier_init {count = 1}
    %exec_a = cute_nvgpu.atom.make_exec_tma %atom_a, %full
    %exec_b = cute_nvgpu.atom.make_exec_tma %atom_b, %full
    %sa = cute.alloc_smem : !cute.memref<bf16, smem, Sw<3,3,3> o 0 o (128,64):(64,1)>
    %sb = cute.alloc_smem : !cute.memref<bf16, smem, Sw<3,3,3> o 0 o (64,64):(64,1)>
    %da = cute_nvgpu.make_smem_desc %sa : !cute_nvgpu.smem_desc_view<bf16, K, Sw<3,3,3> o 0 o (128,64):(64,1)>
    %db = cute_nvgpu.make_smem_desc %sb : !cute_nvgpu.smem_desc_view<bf16, K, Sw<3,3,3> o 0 o (64,64):(64,1)>
    %umma = cute_nvgpu.make_atom : !cute_nvgpu.sm100.mma<f16.cta1.m128n64k16.ss.f32.bf16.bf16>
    %acc = cute.alloc_tmem : !cute.memref<f32, tmem, (128,64):(64,1)>
    %c0 = arith.constant 0 : i32
    %c1 = arith.constant 1 : i32
    %c64 = arith.constant 64 : i32
    %ca0 = cute.make_coord %c0, %m0
    %cb0 = cute.make_coord %c0, %n0
    cute_nvgpu.atom.tma_load %exec_a, %sa, %ca0
    cute_nvgpu.atom.tma_load %exec_b, %sb, %cb0
    cute_nvgpu.arch.mbarrier_wait %full, %c0
    cute_nvgpu.atom.mma %umma, %acc, %da, %db, %acc {accumulate = false}
    cute_nvgpu.arch.umma_commit %done
    cute_nvgpu.arch.mbarrier_wait %done, %c0
    scf.for %kt = %c1 to %ktiles step %c1 : i32 {
      %kc = arith.muli %kt, %c64 : i32
      %ca = cute.make_coord %kc, %m0
      %cb = cute.make_coord %kc, %n0
      cute_nvgpu.atom.tma_load %exec_a, %sa, %ca
      cute_nvgpu.atom.tma_load %exec_b, %sb, %cb
      %phase = arith.andi %kt, %c1 : i32
      cute_nvgpu.arch.mbarrier_wait %full, %phase
      cute_nvgpu.atom.mma %umma, %acc, %da, %db, %acc
      cute_nvgpu.arch.umma_commit %done
      cute_nvgpu.arch.mbarrier_wait %done, %phase
    }
    %ld = cute_nvgpu.make_atom : !cute_nvgpu.atom.tmem_load<32x32b.x64>
    %rows = cute.alloc_rmem : !cute.memref<f32, rmem, (128,64):(64,1)>
    cute_nvgpu.atom.copy %ld, %acc, %rows
    %st = cute_nvgpu.make_atom : !cute_nvgpu.atom.universal_copy<128>
    %gd = cute.make_view %pd : !cute.memref<f32, gmem, (128,64):(128,1)>
    cute_nvgpu.atom.copy %st, %rows, %gd
    func.return
  }
}
