// make_exec_tma binds what the atom layer's make_exec_tma checks (CTA mask, cache hint), and
// tma_load takes the im2col offsets its mode needs.

func.func @mask(%src: !cute.ptr<f16, gmem>, %n: i32, %m: i32, %ld: i32) {
  %gl = cute.static : !cute.layout<(n,m):(1,ld)>
  %d = nv_tileas.make_tiled_tma_desc %src, %gl shapes(%n, %m) strides(%ld) paddings() {mode = #cute_nvgpu.tma_load_mode<tiled>, elementBitWidth = 16} : !cute_nvgpu.tma_descriptor_tiled
  %tile = cute.static : !cute.composed_layout<Sw<3,4,3> o 0 o (8,64):(64,1)>
  %vmap = cute.static : !cute.layout<(8,64):(1@1,1@0)>
  %load = cute_nvgpu.atom.non_exec_tiled_tma_load %d, %tile, %vmap {num_multicast = 2}
  %bar = cute_nvgpu.arch.mbarrier_init {count = 1}
  // expected-error @+1 {{CTA mask 7 must be a 16-bit mask with 2 bits set (num_multicast = 2)}}
  %e1 = cute_nvgpu.atom.make_exec_tma %load, %bar {multicast_mask = 7}
  // expected-error @+1 {{the atom multicasts to 2 CTAs but no CTA mask was bound}}
  %e2 = cute_nvgpu.atom.make_exec_tma %load, %bar
  // expected-error @+1 {{l2_cache_hint must be one of evict_normal, evict_first, evict_last, evict_unchanged, got 'evict_most'}}
  %e3 = cute_nvgpu.atom.make_exec_tma %load, %bar {multicast_mask = 3, l2_cache_hint = "evict_most"}
  func.return
}

// -----

func.func @store_mask(%dst: !cute.ptr<f16, gmem>, %n: i32, %m: i32, %ld: i32) {
  %gl = cute.static : !cute.layout<(n,m):(1,ld)>
  %d = nv_tileas.make_tiled_tma_desc %dst, %gl shapes(%n, %m) strides(%ld) paddings() {mode = #cute_nvgpu.tma_store_mode<tiled>, elementBitWidth = 16} : !cute_nvgpu.tma_descriptor_tiled
  %tile = cute.static : !cute.composed_layout<Sw<3,4,3> o 0 o (8,64):(64,1)>
  %vmap = cute.static : !cute.layout<(8,64):(1@1,1@0)>
  %store = cute_nvgpu.atom.non_exec_tiled_tma_store %d, %tile, %vmap
  // expected-error @+1 {{a TMA store completes through bulk groups and never multicasts: bind neither an mbarrier nor a CTA mask}}
  %e = cute_nvgpu.atom.make_exec_tma %store {multicast_mask = 1}
  func.return
}

// -----

// target: sm_100a
func.func @offsets(%src: !cute.ptr<f16, gmem>, %a: i32, %b: i32, %c: i32, %sb: i32, %sc: i32, %x: i32) {
  %gl = cute.static : !cute.layout<(a,b,c):(1,sb,sc)>
  %d = nv_tileas.make_tiled_tma_desc %src, %gl shapes(%a, %b, %c) strides(%sb, %sc) paddings() {mode = #cute_nvgpu.tma_load_mode<w_multicast>, elementBitWidth = 16} : !cute_nvgpu.tma_descriptor_im2col
  %tile = cute.static : !cute.composed_layout<Sw<3,4,3> o 0 o (64,8,1):(1,64,512)>
  %vmap = cute.static : !cute.layout<(64,8,1):(1@0,1@1,1@2)>
  %load = cute_nvgpu.atom.non_exec_tiled_tma_load %d, %tile, %vmap {num_multicast = 1}
  %bar = cute_nvgpu.arch.mbarrier_init {count = 1}
  %exec = cute_nvgpu.atom.make_exec_tma %load, %bar
  %smem = cute.alloc_smem : !cute.memref<f16, smem, Sw<3,4,3> o 0 o (64,8,1):(1,64,512)>
  %coord = cute.make_coord %x, %x, %x
  // expected-error @+1 {{a TMA load im2col::w of rank 3 takes 2 im2col offset operand(s) after the coordinate, got 1}}
  cute_nvgpu.atom.tma_load %exec, %smem, %coord, %x
  func.return
}
