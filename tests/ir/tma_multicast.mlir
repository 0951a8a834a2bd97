// A multicast TMA load that runs (sm_90a): a cluster of two CTAs (the kernel attribute
// `cluster`, .reqnctapercluster) loads one 64 x 64 bf16 box.  The atom partitions a 32-row
// slice multicast to both CTAs (mask 3); with `multicast_slice = true` the CTA of slice k
// loads rows [32k, 32k + 32) of the box into slice k of the 64 x 64 tile of every CTA of
// the mask, and each CTA's barrier expects the whole box (2 slices).  A cluster barrier
// makes both CTAs' mbarriers initialised before any slice lands, and another keeps every
// CTA alive until the cluster is done.  Each CTA then stores its tile to row 64 * rank of
// the output (its rank from cute_nvgpu.arch.cluster_cta_rank).
func.func @tma_multicast_slices(%src: !cute.ptr<bf16, gmem>, %dst: !cute.ptr<bf16, gmem>, %n: i32, %m: i32, %mo: i32, %ld: i32, %x: i32, %y: i32) attributes {cluster = array<i32: 2, 1, 1>} {
  %gl = cute.static : !cute.layout<(n,m):(1,ld)>
  %go = cute.static : !cute.layout<(n,mo):(1,ld)>
  %dsrc = nv_tileas.make_tiled_tma_desc %src, %gl shapes(%n, %m) strides(%ld) paddings() {mode = #cute_nvgpu.tma_load_mode<tiled>, elementBitWidth = 16} : !cute_nvgpu.tma_descriptor_tiled
  %ddst = nv_tileas.make_tiled_tma_desc %dst, %go shapes(%n, %mo) strides(%ld) paddings() {mode = #cute_nvgpu.tma_store_mode<tiled>, elementBitWidth = 16} : !cute_nvgpu.tma_descriptor_tiled
  %half = cute.static : !cute.composed_layout<Sw<3,3,3> o 0 o (32,64):(64,1)>
  %hmap = cute.static : !cute.layout<(32,64):(1@1,1@0)>
  %box = cute.static : !cute.composed_layout<Sw<3,3,3> o 0 o (64,64):(64,1)>
  %bmap = cute.static : !cute.layout<(64,64):(1@1,1@0)>
  %load = cute_nvgpu.atom.non_exec_tiled_tma_load %dsrc, %half, %hmap {num_multicast = 2}
  %store = cute_nvgpu.atom.non_exec_tiled_tma_store %ddst, %box, %bmap
  %bar = cute_nvgpu.arch.mbarrier_init {count = 1}
  cute_nvgpu.arch.cluster_sync
  %exec_load = cute_nvgpu.atom.make_exec_tma %load, %bar {multicast_mask = 3}
  %exec_store = cute_nvgpu.atom.make_exec_tma %store
  %smem = cute.alloc_smem : !cute.memref<bf16, smem, Sw<3,3,3> o 0 o (64,64):(64,1)>
  %coord = cute.make_coord %x, %y
  cute_nvgpu.atom.tma_load %exec_load, %smem, %coord {multicast_slice = true}
  %c0 = arith.constant 0 : i32
  cute_nvgpu.arch.mbarrier_wait %bar, %c0
  %rank = cute_nvgpu.arch.cluster_cta_rank
  %c64 = arith.constant 64 : i32
  %row = arith.muli %rank, %c64 : i32
  %y2 = arith.addi %y, %row : i32
  %out = cute.make_coord %x, %y2
  cute_nvgpu.atom.tma_store %exec_store, %smem, %out
  cute_nvgpu.arch.cluster_sync
  func.return
}
