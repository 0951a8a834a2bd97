// Prefetches before a TMA load (sm_90a): the descriptor (prefetch.tensormap) and the box the
// load will read (cp.async.bulk.prefetch.tensor.2d.L2.global.tile with an evict_last L2
// hint), then the load and a TMA store of the box to another tensor (runs on the GPU).
func.func @tma_prefetch(%src: !cute.ptr<f16, gmem>, %dst: !cute.ptr<f16, gmem>, %n: i32, %m: i32, %ld: i32, %x: i32, %y: i32) {
  %gl = cute.static : !cute.layout<(n,m):(1,ld)>
  %dsrc = nv_tileas.make_tiled_tma_desc %src, %gl shapes(%n, %m) strides(%ld) paddings() {mode = #cute_nvgpu.tma_load_mode<tiled>, elementBitWidth = 16} : !cute_nvgpu.tma_descriptor_tiled
  %ddst = nv_tileas.make_tiled_tma_desc %dst, %gl shapes(%n, %m) strides(%ld) paddings() {mode = #cute_nvgpu.tma_store_mode<tiled>, elementBitWidth = 16} : !cute_nvgpu.tma_descriptor_tiled
  cute_nvgpu.prefetch_tma_desc %dsrc
  %tile = cute.static : !cute.composed_layout<Sw<3,3,3> o 0 o (64,64):(64,1)>
  %vmap = cute.static : !cute.layout<(64,64):(1@1,1@0)>
  %load = cute_nvgpu.atom.non_exec_tiled_tma_load %dsrc, %tile, %vmap {num_multicast = 1}
  %store = cute_nvgpu.atom.non_exec_tiled_tma_store %ddst, %tile, %vmap
  %coord = cute.make_coord %x, %y
  cute_nvgpu.prefetch_tma_tensor %load, %coord {l2_cache_hint = "evict_last"}
  %bar = cute_nvgpu.arch.mbarrier_init {count = 1}
  %exec_load = cute_nvgpu.atom.make_exec_tma %load, %bar
  %exec_store = cute_nvgpu.atom.make_exec_tma %store
  %smem = cute.alloc_smem : !cute.memref<f16, smem, Sw<3,3,3> o 0 o (64,64):(64,1)>
  cute_nvgpu.atom.tma_load %exec_load, %smem, %coord
  %c0 = arith.constant 0 : i32
  cute_nvgpu.arch.mbarrier_wait %bar, %c0
  cute_nvgpu.atom.tma_store %exec_store, %smem, %coord
  func.return
}
