// A WGMMA tile loop (sm_90a): one warpgroup computes a 64 x 128 f32 tile of D = A * B^T over
// K in steps of 128 e4m3 elements.  Each step TMA-loads a 64 x 128 tile of A and a 128 x 128
// tile of B (both K-major, 128-byte swizzle) on their own mbarriers, waits for them, and
// issues the sm90 atom over the tile's four K-blocks (fence, mma, commit, wait).
func.func @wgmma_fp8_tile_loop(%pa: !cute.ptr<e4m3, gmem>, %pb: !cute.ptr<e4m3, gmem>, %pd: !cute.ptr<f32, gmem>, %m: i32, %n: i32, %k: i32, %ktiles: i32) {
  %la = cute.static : !cute.layout<(k,m):(1,k)>
  %lb = cute.static : !cute.layout<(k,n):(1,k)>
  %desc_a = nv_tileas.make_tiled_tma_desc %pa, %la shapes(%k, %m) strides(%k) paddings() {mode = #cute_nvgpu.tma_load_mode<tiled>, elementBitWidth = 8} : !cute_nvgpu.tma_descriptor_tiled
  %desc_b = nv_tileas.make_tiled_tma_desc %pb, %lb shapes(%k, %n) strides(%k) paddings() {mode = #cute_nvgpu.tma_load_mode<tiled>, elementBitWidth = 8} : !cute_nvgpu.tma_descriptor_tiled
  %tile_a = cute.static : !cute.composed_layout<Sw<3,4,3> o 0 o (64,128):(128,1)>
  %tile_b = cute.static : !cute.composed_layout<Sw<3,4,3> o 0 o (128,128):(128,1)>
  %vmap_a = cute.static : !cute.layout<(64,128):(1@1,1@0)>
  %vmap_b = cute.static : !cute.layout<(128,128):(1@1,1@0)>
  %atom_a = cute_nvgpu.atom.non_exec_tiled_tma_load %desc_a, %tile_a, %vmap_a {num_multicast = 1}
  %atom_b = cute_nvgpu.atom.non_exec_tiled_tma_load %desc_b, %tile_b, %vmap_b {num_multicast = 1}
  %bar_a = cute_nvgpu.arch.mbarrier_init {count = 1}
  %bar_b = cute_nvgpu.arch.mbarrier_init {count = 1}
  %exec_a = cute_nvgpu.atom.make_exec_tma %atom_a, %bar_a {cache_mode = #cute_nvgpu.load_cache_mode<cg>}
  %exec_b = cute_nvgpu.atom.make_exec_tma %atom_b, %bar_b {cache_mode = #cute_nvgpu.load_cache_mode<cg>}
  %sa = cute.alloc_smem : !cute.memref<e4m3, smem, Sw<3,4,3> o 0 o (64,128):(128,1)>
  %sb = cute.alloc_smem : !cute.memref<e4m3, smem, Sw<3,4,3> o 0 o (128,128):(128,1)>
  %da = cute_nvgpu.make_smem_desc %sa : !cute_nvgpu.smem_desc_view<e4m3, K, Sw<3,4,3> o 0 o (64,128):(128,1)>
  %db = cute_nvgpu.make_smem_desc %sb : !cute_nvgpu.smem_desc_view<e4m3, K, Sw<3,4,3> o 0 o (128,128):(128,1)>
  %wg = cute_nvgpu.make_atom : !cute_nvgpu.sm90.mma<m64n128k32.ss.f32.e4m3.e4m3>
  %acc = cute.alloc_rmem : !cute.memref<f32, rmem, ((4,8,4),(2,2,16)):((128,1,16),(64,8,512))>
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %c128 = arith.constant 128 : i32
  cute_nvgpu.prefetch_tma_desc %desc_a
  cute_nvgpu.prefetch_tma_desc %desc_b
  scf.for %kt = %c0 to %ktiles step %c1 : i32 {
    %kc = arith.muli %kt, %c128 : i32
    %ca = cute.make_coord %kc, %c0
    cute_nvgpu.atom.tma_load %exec_a, %sa, %ca {allow_tma = true}
    cute_nvgpu.atom.tma_load %exec_b, %sb, %ca {allow_tma = true}
    %phase = arith.andi %kt, %c1 : i32
    cute_nvgpu.arch.mbarrier_wait %bar_a, %phase
    cute_nvgpu.arch.mbarrier_wait %bar_b, %phase
    cute_nvgpu.warpgroup.fence
    cute_nvgpu.atom.mma %wg, %acc, %da, %db, %acc
    cute_nvgpu.warpgroup.commit_group
    cute_nvgpu.warpgroup.wait {pending = 0}
    cute_nvgpu.arch.sync_threads
  }
  %gd = cute.make_view %pd : !cute.memref<f32, gmem, (64,128):(128,1)>
  cute_nvgpu.atom.copy_fragment %wg, %acc, %gd {operand = "D"}
  func.return
}
