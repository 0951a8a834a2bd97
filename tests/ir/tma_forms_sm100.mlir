// TMA modes outside the specification's enums (nvatom's values, docs/spec-deviations.md):
// gather4 (.tile::gather4: four rows of a 2-d map at four row coordinates) into shared::cta,
// scatter4 (.tile::scatter4), and the bulk tensor prefetch of a gather4 and an im2col::w box
// (sm_100a; assembled, not run).
builtin.module attributes {nvatom.target = "sm_100a"} {
  func.func @tma_gather_scatter(%src: !cute.ptr<f16, gmem>, %dst: !cute.ptr<f16, gmem>, %n: i32, %m: i32, %ld: i32, %x: i32, %r0: i32, %r1: i32, %r2: i32, %r3: i32) {
    %gl = cute.static : !cute.layout<(n,m):(1,ld)>
    %dsrc = nv_tileas.make_tiled_tma_desc %src, %gl shapes(%n, %m) strides(%ld) paddings() {mode = #cute_nvgpu.tma_load_mode<gather4>, elementBitWidth = 16} : !cute_nvgpu.tma_descriptor_tiled
    %ddst = nv_tileas.make_tiled_tma_desc %dst, %gl shapes(%n, %m) strides(%ld) paddings() {mode = #cute_nvgpu.tma_store_mode<scatter4>, elementBitWidth = 16} : !cute_nvgpu.tma_descriptor_tiled
    %tile = cute.static : !cute.composed_layout<Sw<3,4,3> o 0 o (4,64):(64,1)>
    %vmap = cute.static : !cute.layout<(4,64):(1@1,1@0)>
    %load = cute_nvgpu.atom.tma_partition %dsrc, %tile, %vmap {tma_load_mode = #cute_nvgpu.tma_load_mode<gather4>}
    %store = cute_nvgpu.atom.tma_partition %ddst, %tile, %vmap {tma_store_mode = #cute_nvgpu.tma_store_mode<scatter4>}
    %rows = cute.make_coord %x, %r0, %r1, %r2, %r3
    cute_nvgpu.prefetch_tma_tensor %load, %rows
    %bar = cute_nvgpu.arch.mbarrier_init {count = 1}
    %exec_load = cute_nvgpu.atom.make_exec_tma %load, %bar
    %exec_store = cute_nvgpu.atom.make_exec_tma %store
    %smem = cute.alloc_smem : !cute.memref<f16, smem, Sw<3,4,3> o 0 o (4,64):(64,1)>
    cute_nvgpu.atom.tma_load %exec_load, %smem, %rows {dst_space = "shared::cta"}
    %c0 = arith.constant 0 : i32
    cute_nvgpu.arch.mbarrier_wait %bar, %c0
    cute_nvgpu.atom.tma_store %exec_store, %smem, %rows
    func.return
  }
  func.func @tma_prefetch_im2col_w(%src: !cute.ptr<f16, gmem>, %a: i32, %b: i32, %c: i32, %sb: i32, %sc: i32, %x: i32, %y: i32, %z: i32, %halo: i32, %off: i32) {
    %gl = cute.static : !cute.layout<(a,b,c):(1,sb,sc)>
    %d = nv_tileas.make_tiled_tma_desc %src, %gl shapes(%a, %b, %c) strides(%sb, %sc) paddings() {mode = #cute_nvgpu.tma_load_mode<w_multicast>, elementBitWidth = 16} : !cute_nvgpu.tma_descriptor_im2col
    %tile = cute.static : !cute.composed_layout<Sw<3,4,3> o 0 o (64,8,1):(1,64,512)>
    %vmap = cute.static : !cute.layout<(64,8,1):(1@0,1@1,1@2)>
    %load = cute_nvgpu.atom.non_exec_tiled_tma_load %d, %tile, %vmap {num_multicast = 1}
    %coord = cute.make_coord %x, %y, %z
    cute_nvgpu.prefetch_tma_tensor %load, %coord, %halo, %off {l2_cache_hint = "evict_first"}
    func.return
  }
}
