// SM100 UMMA (sm_100a): one CTA of four warps computes a 128 x 64 f32 tile of D = A * B^T
// for one 128-element K tile of e4m3.  TMA loads A (128 x 128) and B (64 x 128), K-major
// with the 128-byte swizzle, onto an mbarrier; thread 0 issues the f8f6f4 atom over the four
// K-blocks into a TMEM accumulator (cute.alloc_tmem: tcgen05.alloc, freed at the return) and
// commits to a second mbarrier; then each warp loads its 32 TMEM lanes (tcgen05.ld 32x32b,
// thread t of warp w holds row 32 w + t) and stores its row of D with 128-bit copies.
builtin.module attributes {nvatom.target = "sm_100a"} {
  func.func @umma_e4m3(%pa: !cute.ptr<e4m3, gmem>, %pb: !cute.ptr<e4m3, gmem>, %pd: !cute.ptr<f32, gmem>, %m: i32, %n: i32, %k: i32) {
    %la = cute.static : !cute.layout<(k,m):(1,k)>
    %lb = cute.static : !cute.layout<(k,n):(1,k)>
    %desc_a = nv_tileas.make_tiled_tma_desc %pa, %la shapes(%k, %m) strides(%k) paddings() {mode = #cute_nvgpu.tma_load_mode<tiled>, elementBitWidth = 8} : !cute_nvgpu.tma_descriptor_tiled
    %desc_b = nv_tileas.make_tiled_tma_desc %pb, %lb shapes(%k, %n) strides(%k) paddings() {mode = #cute_nvgpu.tma_load_mode<tiled>, elementBitWidth = 8} : !cute_nvgpu.tma_descriptor_tiled
    %tile_a = cute.static : !cute.composed_layout<Sw<3,4,3> o 0 o (128,128):(128,1)>
    %tile_b = cute.static : !cute.composed_layout<Sw<3,4,3> o 0 o (64,128):(128,1)>
    %vmap_a = cute.static : !cute.layout<(128,128):(1@1,1@0)>
    %vmap_b = cute.static : !cute.layout<(64,128):(1@1,1@0)>
    %atom_a = cute_nvgpu.atom.non_exec_tiled_tma_load %desc_a, %tile_a, %vmap_a {num_multicast = 1}
    %atom_b = cute_nvgpu.atom.non_exec_tiled_tma_load %desc_b, %tile_b, %vmap_b {num_multicast = 1}
    %full = cute_nvgpu.arch.mbarrier_init {count = 2}
    %done = cute_nvgpu.arch.mbarrier_init {count = 1}
    %exec_a = cute_nvgpu.atom.make_exec_tma %atom_a, %full
    %exec_b = cute_nvgpu.atom.make_exec_tma %atom_b, %full
    %sa = cute.alloc_smem : !cute.memref<e4m3, smem, Sw<3,4,3> o 0 o (128,128):(128,1)>
    %sb = cute.alloc_smem : !cute.memref<e4m3, smem, Sw<3,4,3> o 0 o (64,128):(128,1)>
    %da = cute_nvgpu.make_smem_desc %sa : !cute_nvgpu.smem_desc_view<e4m3, K, Sw<3,4,3> o 0 o (128,128):(128,1)>
    %db = cute_nvgpu.make_smem_desc %sb : !cute_nvgpu.smem_desc_view<e4m3, K, Sw<3,4,3> o 0 o (64,128):(128,1)>
    %umma = cute_nvgpu.make_atom : !cute_nvgpu.sm100.mma<f8f6f4.cta1.m128n64k32.ss.f32.e4m3.e4m3>
    %acc = cute.alloc_tmem : !cute.memref<f32, tmem, (128,64):(64,1)>
    %c0 = arith.constant 0 : i32
    %coord = cute.make_coord %c0, %c0
    cute_nvgpu.atom.tma_load %exec_a, %sa, %coord
    cute_nvgpu.atom.tma_load %exec_b, %sb, %coord
    cute_nvgpu.arch.mbarrier_wait %full, %c0
    cute_nvgpu.atom.mma %umma, %acc, %da, %db, %acc {accumulate = false}
    cute_nvgpu.arch.umma_commit %done
    cute_nvgpu.arch.mbarrier_wait %done, %c0
    %ld = cute_nvgpu.make_atom : !cute_nvgpu.atom.tmem_load<32x32b.x64>
    %rows = cute.alloc_rmem : !cute.memref<f32, rmem, (128,64):(64,1)>
    cute_nvgpu.atom.copy %ld, %acc, %rows
    %st = cute_nvgpu.make_atom : !cute_nvgpu.atom.universal_copy<128>
    %gd = cute.make_view %pd : !cute.memref<f32, gmem, (128,64):(64,1)>
    cute_nvgpu.atom.copy %st, %rows, %gd
    func.return
  }
}
