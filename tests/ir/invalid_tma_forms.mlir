// The TMA forms of issue 16: the .shared::cta destination, the partition op, the bulk tensor
// prefetch, nvatom's own modes (im2col, gather4, scatter4) and the descriptor kind each mode
// reads.

func.func @shared_cta_multicast(%src: !cute.ptr<f16, gmem>, %n: i32, %m: i32, %ld: i32, %x: i32, %y: i32) {
  %gl = cute.static : !cute.layout<(n,m):(1,ld)>
  %d = nv_tileas.make_tiled_tma_desc %src, %gl shapes(%n, %m) strides(%ld) paddings() {mode = #cute_nvgpu.tma_load_mode<tiled>, elementBitWidth = 16} : !cute_nvgpu.tma_descriptor_tiled
  %tile = cute.static : !cute.composed_layout<Sw<3,4,3> o 0 o (8,64):(64,1)>
  %vmap = cute.static : !cute.layout<(8,64):(1@1,1@0)>
  %load = cute_nvgpu.atom.non_exec_tiled_tma_load %d, %tile, %vmap {num_multicast = 2}
  %bar = cute_nvgpu.arch.mbarrier_init {count = 1}
  %exec = cute_nvgpu.atom.make_exec_tma %load, %bar {multicast_mask = 3}
  %smem = cute.alloc_smem : !cute.memref<f16, smem, Sw<3,4,3> o 0 o (8,64):(64,1)>
  %coord = cute.make_coord %x, %y
  // expected-error @+1 {{a TMA load into shared::cta cannot multicast}}
  cute_nvgpu.atom.tma_load %exec, %smem, %coord {dst_space = "shared::cta"}
  // expected-error @+1 {{dst_space must be one of shared::cluster, shared::cta, got 'global'}}
  cute_nvgpu.atom.tma_load %exec, %smem, %coord {dst_space = "global"}
  func.return
}

// -----

// a mode that reads an im2col map on a tiled descriptor, and the reverse
func.func @descriptor_kind(%src: !cute.ptr<f16, gmem>, %a: i32, %b: i32, %c: i32, %sb: i32, %sc: i32) {
  %gl = cute.static : !cute.layout<(a,b,c):(1,sb,sc)>
  %dt = nv_tileas.make_tiled_tma_desc %src, %gl shapes(%a, %b, %c) strides(%sb, %sc) paddings() {mode = #cute_nvgpu.tma_load_mode<tiled>, elementBitWidth = 16} : !cute_nvgpu.tma_descriptor_tiled
  %di = nv_tileas.make_tiled_tma_desc %src, %gl shapes(%a, %b, %c) strides(%sb, %sc) paddings() {mode = #cute_nvgpu.tma_load_mode<im2col>, elementBitWidth = 16} : !cute_nvgpu.tma_descriptor_im2col
  %tile = cute.static : !cute.composed_layout<Sw<3,4,3> o 0 o (64,8,1):(1,64,512)>
  %vmap = cute.static : !cute.layout<(64,8,1):(1@0,1@1,1@2)>
  // expected-error @+1 {{mode #cute_nvgpu.tma_load_mode<im2col> makes a !cute_nvgpu.tma_descriptor_im2col, but the descriptor is !cute_nvgpu.tma_descriptor_tiled}}
  %l1 = cute_nvgpu.atom.tma_partition %dt, %tile, %vmap {tma_load_mode = #cute_nvgpu.tma_load_mode<im2col>}
  // expected-error @+1 {{mode #cute_nvgpu.tma_load_mode<tiled> makes a !cute_nvgpu.tma_descriptor_tiled, but the descriptor is !cute_nvgpu.tma_descriptor_im2col}}
  %l2 = cute_nvgpu.atom.non_exec_tiled_tma_load %di, %tile, %vmap {tma_load_mode = #cute_nvgpu.tma_load_mode<tiled>}
  // expected-error @+1 {{mode #cute_nvgpu.tma_load_mode<gather4> makes a !cute_nvgpu.tma_descriptor_tiled, but the result type is !cute_nvgpu.tma_descriptor_im2col}}
  %dg = nv_tileas.make_tiled_tma_desc %src, %gl shapes(%a, %b, %c) strides(%sb, %sc) paddings() {mode = #cute_nvgpu.tma_load_mode<gather4>, elementBitWidth = 16} : !cute_nvgpu.tma_descriptor_im2col
  func.return
}

// -----

// the four-row modes: a 2-d map, a tile of four rows
func.func @four_rows(%src: !cute.ptr<f16, gmem>, %n: i32, %m: i32, %ld: i32) {
  %gl = cute.static : !cute.layout<(n,m):(1,ld)>
  %d = nv_tileas.make_tiled_tma_desc %src, %gl shapes(%n, %m) strides(%ld) paddings() {mode = #cute_nvgpu.tma_load_mode<gather4>, elementBitWidth = 16} : !cute_nvgpu.tma_descriptor_tiled
  %tile = cute.static : !cute.composed_layout<Sw<3,4,3> o 0 o (8,64):(64,1)>
  %vmap = cute.static : !cute.layout<(8,64):(1@1,1@0)>
  // expected-error @+1 {{Computed TMA layout is invalid, got !cute.layout<(64,8):(1@0,1@1)>}}
  %g = cute_nvgpu.atom.tma_partition %d, %tile, %vmap {tma_load_mode = #cute_nvgpu.tma_load_mode<gather4>}
  // expected-error @+1 {{num_multicast applies to TMA loads, not a tma_store}}
  %s = cute_nvgpu.atom.tma_partition %d, %tile, %vmap {tma_store_mode = #cute_nvgpu.tma_store_mode<tiled>, num_multicast = 1}
  func.return
}

// -----

// target: sm_90a
// gather4, scatter4 and im2col::w are sm_100a-family modes: the executable atom and the
// prefetch say so on sm_90a
func.func @sm100_modes(%src: !cute.ptr<f16, gmem>, %n: i32, %m: i32, %ld: i32, %x: i32, %y: i32) {
  %gl = cute.static : !cute.layout<(n,m):(1,ld)>
  %d = nv_tileas.make_tiled_tma_desc %src, %gl shapes(%n, %m) strides(%ld) paddings() {mode = #cute_nvgpu.tma_load_mode<gather4>, elementBitWidth = 16} : !cute_nvgpu.tma_descriptor_tiled
  %tile = cute.static : !cute.composed_layout<Sw<3,4,3> o 0 o (4,64):(64,1)>
  %vmap = cute.static : !cute.layout<(4,64):(1@1,1@0)>
  %g = cute_nvgpu.atom.tma_partition %d, %tile, %vmap {tma_load_mode = #cute_nvgpu.tma_load_mode<gather4>}
  %rows = cute.make_coord %x, %y, %y, %y, %y
  // expected-error @+1 {{atom 'cp.async.bulk.prefetch.tensor.tile::gather4' is not available on sm_90a}}
  cute_nvgpu.prefetch_tma_tensor %g, %rows
  %bar = cute_nvgpu.arch.mbarrier_init {count = 1}
  // expected-error @+1 {{atom 'atom.tma_load<2d.tile::gather4>' is not available on sm_90a}}
  %e = cute_nvgpu.atom.make_exec_tma %g, %bar
  %s = cute_nvgpu.atom.tma_partition %d, %tile, %vmap {tma_store_mode = #cute_nvgpu.tma_store_mode<scatter4>}
  // expected-error @+1 {{atom 'atom.tma_store<2d.tile::scatter4>' is not available on sm_90a}}
  %es = cute_nvgpu.atom.make_exec_tma %s
  func.return
}

// -----

// the prefetch takes the load mode's coordinates and im2col offsets, of a load atom
func.func @prefetch_operands(%src: !cute.ptr<f16, gmem>, %a: i32, %b: i32, %c: i32, %sb: i32, %sc: i32, %x: i32, %y: i32, %z: i32) {
  %gl = cute.static : !cute.layout<(a,b,c):(1,sb,sc)>
  %d = nv_tileas.make_tiled_tma_desc %src, %gl shapes(%a, %b, %c) strides(%sb, %sc) paddings() {mode = #cute_nvgpu.tma_load_mode<im2col>, elementBitWidth = 16} : !cute_nvgpu.tma_descriptor_im2col
  %tile = cute.static : !cute.composed_layout<Sw<3,4,3> o 0 o (64,8,1):(1,64,512)>
  %vmap = cute.static : !cute.layout<(64,8,1):(1@0,1@1,1@2)>
  %l = cute_nvgpu.atom.tma_partition %d, %tile, %vmap {tma_load_mode = #cute_nvgpu.tma_load_mode<im2col>}
  %c3 = cute.make_coord %x, %y, %z
  %c2 = cute.make_coord %x, %y
  // expected-error @+1 {{a im2col prefetch of rank 3 takes 1 im2col offset operand(s) after the coordinate, got 0}}
  cute_nvgpu.prefetch_tma_tensor %l, %c3
  // expected-error @+1 {{expects a !cute.coord<3> (a im2col box of rank 3), but got !cute.coord<2>}}
  cute_nvgpu.prefetch_tma_tensor %l, %c2, %x
  // expected-error @+1 {{expects a TMA load atom (non-exec or executable) of this function as operand #0}}
  cute_nvgpu.prefetch_tma_tensor %d, %c3, %x
  func.return
}

// -----

// a reduction is checked against the map's element type
func.func @reduce_type(%dst: !cute.ptr<f16, gmem>, %n: i32, %m: i32, %ld: i32) {
  %gl = cute.static : !cute.layout<(n,m):(1,ld)>
  %d = nv_tileas.make_tiled_tma_desc %dst, %gl shapes(%n, %m) strides(%ld) paddings() {mode = #cute_nvgpu.tma_store_mode<tiled>, elementBitWidth = 16} : !cute_nvgpu.tma_descriptor_tiled
  %tile = cute.static : !cute.composed_layout<Sw<3,4,3> o 0 o (8,64):(64,1)>
  %vmap = cute.static : !cute.layout<(8,64):(1@1,1@0)>
  // expected-error @+1 {{TMA reduction 'inc' is not defined on float16 elements (legal: uint32)}}
  %r = cute_nvgpu.atom.tma_partition %d, %tile, %vmap {kind = #cute_nvgpu.tma_reduce_kind<inc>}
  func.return
}

// -----

// generic addressing is for ldmatrix/stmatrix of a shared tile; a tiled copy's tile has its shape
func.func @copies(%p: !cute.ptr<f32, gmem>) {
  %u = cute_nvgpu.make_atom : !cute_nvgpu.atom.universal_copy<128>
  %g = cute.make_view %p : !cute.memref<f32, gmem, (32,4):(4,1)>
  %s = cute.alloc_smem : !cute.memref<f32, smem, (32,4):(4,1)>
  // expected-error @+1 {{generic = true addresses an ldmatrix/stmatrix tile generically; 'atom.universal_copy<128>' names its state spaces}}
  cute_nvgpu.atom.copy %u, %g, %s {generic = true}
  %tc = cute_nvgpu.make_tiled_copy %u {thr_layout = "(32,4):(4,1)", val_layout = "(1,4):(4,1)"}
  // expected-error @+1 {{the src tile (32,4):(4,1) has shape (32, 4), not the tiled copy's tile (32, 16)}}
  cute_nvgpu.tiled_copy.copy %tc, %g, %s
  // expected-error @+1 {{a tiled copy of 12 threads: the lowering takes a power of two up to 1024}}
  %t12 = cute_nvgpu.make_tiled_copy %u {thr_layout = "(3,4):(4,1)", val_layout = "(1,4):(4,1)"}
  // expected-error @+1 {{val_layout (1,4):(0,0) must map its 4 coordinates one-to-one onto 0..3}}
  %t0 = cute_nvgpu.make_tiled_copy %u {thr_layout = "(32,4):(4,1)", val_layout = "(1,4):(0,0)"}
  %t2 = cute_nvgpu.make_tiled_copy %u {thr_layout = "(32,4):(4,1)", val_layout = "(1,2):(2,1)"}
  %g2 = cute.make_view %p : !cute.memref<f32, gmem, (32,8):(8,1)>
  %s2 = cute.alloc_smem : !cute.memref<f32, smem, (32,8):(8,1)>
  // expected-error @+1 {{cannot vectorize copy to 4 elements}}
  cute_nvgpu.tiled_copy.copy %t2, %g2, %s2
  func.return
}

// -----

// target: sm_100a
// a gather4 load names a column and four rows
func.func @gather4_coords(%src: !cute.ptr<f16, gmem>, %n: i32, %m: i32, %ld: i32, %x: i32, %y: i32) {
  %gl = cute.static : !cute.layout<(n,m):(1,ld)>
  %d = nv_tileas.make_tiled_tma_desc %src, %gl shapes(%n, %m) strides(%ld) paddings() {mode = #cute_nvgpu.tma_load_mode<gather4>, elementBitWidth = 16} : !cute_nvgpu.tma_descriptor_tiled
  %tile = cute.static : !cute.composed_layout<Sw<3,4,3> o 0 o (4,64):(64,1)>
  %vmap = cute.static : !cute.layout<(4,64):(1@1,1@0)>
  %g = cute_nvgpu.atom.tma_partition %d, %tile, %vmap {tma_load_mode = #cute_nvgpu.tma_load_mode<gather4>}
  %bar = cute_nvgpu.arch.mbarrier_init {count = 1}
  %e = cute_nvgpu.atom.make_exec_tma %g, %bar
  %smem = cute.alloc_smem : !cute.memref<f16, smem, Sw<3,4,3> o 0 o (4,64):(64,1)>
  %c2 = cute.make_coord %x, %y
  // expected-error @+1 {{expects a !cute.coord<5> (a column and four rows of the rank-2 map), but got !cute.coord<2>}}
  cute_nvgpu.atom.tma_load %e, %smem, %c2
  func.return
}
