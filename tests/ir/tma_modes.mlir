// TMA forms beyond the tiled load (sm_90a): a load multicast to two CTAs of a cluster (the
// CTA mask bound by make_exec_tma, .multicast::cluster), an L2 eviction hint bound to a load
// and a store (createpolicy, .L2::cache_hint), an im2col store (.im2col_no_offs) and a
// reduction of every kind.  Each CTA of the mask issues its slice; its barrier expects the
// bytes of all num_multicast slices.
func.func @tma_multicast(%src: !cute.ptr<f16, gmem>, %n: i32, %m: i32, %ld: i32, %x: i32, %y: i32) {
  %gl = cute.static : !cute.layout<(n,m):(1,ld)>
  %d = nv_tileas.make_tiled_tma_desc %src, %gl shapes(%n, %m) strides(%ld) paddings() {mode = #cute_nvgpu.tma_load_mode<tiled>, elementBitWidth = 16} : !cute_nvgpu.tma_descriptor_tiled
  %tile = cute.static : !cute.composed_layout<Sw<3,4,3> o 0 o (8,64):(64,1)>
  %vmap = cute.static : !cute.layout<(8,64):(1@1,1@0)>
  %load = cute_nvgpu.atom.non_exec_tiled_tma_load %d, %tile, %vmap {num_multicast = 2}
  %bar = cute_nvgpu.arch.mbarrier_init {count = 1}
  %exec = cute_nvgpu.atom.make_exec_tma %load, %bar {multicast_mask = 3, l2_cache_hint = "evict_last"}
  %smem = cute.alloc_smem : !cute.memref<f16, smem, Sw<3,4,3> o 0 o (8,64):(64,1)>
  %coord = cute.make_coord %x, %y
  cute_nvgpu.atom.tma_load %exec, %smem, %coord
  %c0 = arith.constant 0 : i32
  cute_nvgpu.arch.mbarrier_wait %bar, %c0
  func.return
}
func.func @tma_store_modes(%dst: !cute.ptr<f32, gmem>, %a: i32, %b: i32, %c: i32, %sb: i32, %sc: i32, %x: i32, %y: i32, %z: i32) {
  %gl = cute.static : !cute.layout<(a,b,c):(1,sb,sc)>
  %d = nv_tileas.make_tiled_tma_desc %dst, %gl shapes(%a, %b, %c) strides(%sb, %sc) paddings() {mode = #cute_nvgpu.tma_store_mode<im2col>, elementBitWidth = 32} : !cute_nvgpu.tma_descriptor_im2col
  %tile = cute.static : !cute.composed_layout<Sw<0,4,3> o 0 o (32,4,2):(1,32,128)>
  %vmap = cute.static : !cute.layout<(32,4,2):(1@0,1@1,1@2)>
  %store = cute_nvgpu.atom.non_exec_tiled_tma_store %d, %tile, %vmap
  %exec = cute_nvgpu.atom.make_exec_tma %store {l2_cache_hint = "evict_first"}
  %smem = cute.alloc_smem : !cute.memref<f32, smem, Sw<0,4,3> o 0 o (32,4,2):(1,32,128)>
  %coord = cute.make_coord %x, %y, %z
  cute_nvgpu.atom.tma_store %exec, %smem, %coord
  func.return
}
func.func @tma_reduce_max(%dst: !cute.ptr<f16, gmem>, %n: i32, %m: i32, %ld: i32, %x: i32, %y: i32) {
  %gl = cute.static : !cute.layout<(n,m):(1,ld)>
  %d = nv_tileas.make_tiled_tma_desc %dst, %gl shapes(%n, %m) strides(%ld) paddings() {mode = #cute_nvgpu.tma_store_mode<tiled>, elementBitWidth = 16} : !cute_nvgpu.tma_descriptor_tiled
  %tile = cute.static : !cute.composed_layout<Sw<3,4,3> o 0 o (8,64):(64,1)>
  %vmap = cute.static : !cute.layout<(8,64):(1@1,1@0)>
  %red = cute_nvgpu.atom.non_exec_tiled_tma_reduce %d, %tile, %vmap {kind = #cute_nvgpu.tma_reduce_kind<max>}
  %exec = cute_nvgpu.atom.make_exec_tma %red {l2_cache_hint = "evict_normal"}
  %smem = cute.alloc_smem : !cute.memref<f16, smem, Sw<3,4,3> o 0 o (8,64):(64,1)>
  %coord = cute.make_coord %x, %y
  cute_nvgpu.atom.tma_reduce %exec, %smem, %coord
  func.return
}
