// A TMA load into the issuing CTA's own shared memory (sm_90a, no cluster): the partition op
// (cute_nvgpu.atom.tma_partition) makes the load atom, the load takes dst_space =
// "shared::cta" (cp.async.bulk.tensor.2d.shared::cta.global..., PTX ISA 8.6), and a TMA store
// writes the box back to the same place of another tensor (runs on the GPU).
func.func @tma_shared_cta(%src: !cute.ptr<f16, gmem>, %dst: !cute.ptr<f16, gmem>, %n: i32, %m: i32, %ld: i32, %x: i32, %y: i32) {
  %gl = cute.static : !cute.layout<(n,m):(1,ld)>
  %dsrc = nv_tileas.make_tiled_tma_desc %src, %gl shapes(%n, %m) strides(%ld) paddings() {mode = #cute_nvgpu.tma_load_mode<tiled>, elementBitWidth = 16} : !cute_nvgpu.tma_descriptor_tiled
  %ddst = nv_tileas.make_tiled_tma_desc %dst, %gl shapes(%n, %m) strides(%ld) paddings() {mode = #cute_nvgpu.tma_store_mode<tiled>, elementBitWidth = 16} : !cute_nvgpu.tma_descriptor_tiled
  %tile = cute.static : !cute.composed_layout<Sw<3,3,3> o 0 o (64,64):(64,1)>
  %vmap = cute.static : !cute.layout<(64,64):(1@1,1@0)>
  %load = cute_nvgpu.atom.tma_partition %dsrc, %tile, %vmap {tma_load_mode = #cute_nvgpu.tma_load_mode<tiled>, num_multicast = 1}
  %store = cute_nvgpu.atom.tma_partition %ddst, %tile, %vmap {tma_store_mode = #cute_nvgpu.tma_store_mode<tiled>}
  %bar = cute_nvgpu.arch.mbarrier_init {count = 1}
  %exec_load = cute_nvgpu.atom.make_exec_tma %load, %bar
  %exec_store = cute_nvgpu.atom.make_exec_tma %store
  %smem = cute.alloc_smem : !cute.memref<f16, smem, Sw<3,3,3> o 0 o (64,64):(64,1)>
  %coord = cute.make_coord %x, %y
  cute_nvgpu.atom.tma_load %exec_load, %smem, %coord {dst_space = "shared::cta"}
  %c0 = arith.constant 0 : i32
  cute_nvgpu.arch.mbarrier_wait %bar, %c0
  cute_nvgpu.atom.tma_store %exec_store, %smem, %coord
  func.return
}
