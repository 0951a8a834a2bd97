// Descriptor mutation (docs/spec-deviations.md#tma-descriptor-mutation): the kernel rebinds its
// load descriptor on the device (row count, base pointer, row stride in bytes) in a 128-byte
// global workspace, loads a 64 x 64 f16 box through the edited map and TMA-stores it with a
// second descriptor (as tma_copy); the host encodes the map for %src, the kernel rebinds to %src2.
func.func @tma_rebind(%src: !cute.ptr<f16, gmem>, %src2: !cute.ptr<f16, gmem>, %dst: !cute.ptr<f16, gmem>, %ws: !cute.ptr<u8, gmem>, %n: i32, %m: i32, %ld: i32, %m2: i32, %sb_bytes: i32, %x: i32, %y: i32) {
  %gl = cute.static : !cute.layout<(n,m):(1,ld)>
  %d = nv_tileas.make_tiled_tma_desc %src, %gl shapes(%n, %m) strides(%ld) paddings() {mode = #cute_nvgpu.tma_load_mode<tiled>, elementBitWidth = 16} : !cute_nvgpu.tma_descriptor_tiled
  %ddst = nv_tileas.make_tiled_tma_desc %dst, %gl shapes(%n, %m) strides(%ld) paddings() {mode = #cute_nvgpu.tma_store_mode<tiled>, elementBitWidth = 16} : !cute_nvgpu.tma_descriptor_tiled
  %d2 = cute_nvgpu.update_tma_desc %d, %ws, %m2 {field = "global_dim", axis = 1}
  %d3 = cute_nvgpu.update_tma_desc %d2, %ws, %src2 {field = "global_address"}
  %d4 = cute_nvgpu.update_tma_desc %d3, %ws, %sb_bytes {field = "global_stride", axis = 1}
  %tile = cute.static : !cute.composed_layout<Sw<3,3,3> o 0 o (64,64):(64,1)>
  %vmap = cute.static : !cute.layout<(64,64):(1@1,1@0)>
  %load = cute_nvgpu.atom.non_exec_tiled_tma_load %d4, %tile, %vmap {num_multicast = 1}
  %store = cute_nvgpu.atom.non_exec_tiled_tma_store %ddst, %tile, %vmap
  %bar = cute_nvgpu.arch.mbarrier_init {count = 1}
  %exec = cute_nvgpu.atom.make_exec_tma %load, %bar
  %exec_store = cute_nvgpu.atom.make_exec_tma %store
  %smem = cute.alloc_smem : !cute.memref<f16, smem, Sw<3,3,3> o 0 o (64,64):(64,1)>
  %coord = cute.make_coord %x, %y
  cute_nvgpu.atom.tma_load %exec, %smem, %coord
  %c0 = arith.constant 0 : i32
  cute_nvgpu.arch.mbarrier_wait %bar, %c0
  cute_nvgpu.atom.tma_store %exec_store, %smem, %coord
  func.return
}
