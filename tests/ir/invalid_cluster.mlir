// Cluster operations and multicast slices (tests/ir/tma_multicast.mlir is the valid form).

// target: sm_80
func.func @rank_sm80() {
  // expected-error @+1 {{'cute_nvgpu.arch.cluster_cta_rank' needs thread-block clusters (sm_90 and later), not sm_80}}
  %r = cute_nvgpu.arch.cluster_cta_rank
  func.return
}

// -----

// target: sm_89
func.func @sync_sm89() {
  // expected-error @+1 {{'cute_nvgpu.arch.cluster_sync' needs thread-block clusters (sm_90 and later), not sm_89}}
  cute_nvgpu.arch.cluster_sync
  func.return
}

// -----

// A slice load needs a multicast atom.
func.func @slice_no_multicast(%src: !cute.ptr<bf16, gmem>, %n: i32, %m: i32, %ld: i32, %x: i32, %y: i32) {
  %gl = cute.static : !cute.layout<(n,m):(1,ld)>
  %d = nv_tileas.make_tiled_tma_desc %src, %gl shapes(%n, %m) strides(%ld) paddings() {mode = #cute_nvgpu.tma_load_mode<tiled>, elementBitWidth = 16} : !cute_nvgpu.tma_descriptor_tiled
  %half = cute.static : !cute.composed_layout<Sw<3,3,3> o 0 o (32,64):(64,1)>
  %hmap = cute.static : !cute.layout<(32,64):(1@1,1@0)>
  %load = cute_nvgpu.atom.non_exec_tiled_tma_load %d, %half, %hmap {num_multicast = 1}
  %bar = cute_nvgpu.arch.mbarrier_init {count = 1}
  %exec = cute_nvgpu.atom.make_exec_tma %load, %bar
  %smem = cute.alloc_smem : !cute.memref<bf16, smem, Sw<3,3,3> o 0 o (64,64):(64,1)>
  %coord = cute.make_coord %x, %y
  // expected-error @+1 {{multicast_slice = true needs a multicast atom (num_multicast >= 2), got num_multicast = 1}}
  cute_nvgpu.atom.tma_load %exec, %smem, %coord {multicast_slice = true}
  func.return
}

// -----

// The tile must hold the two slices one after another: here it is longer in the column mode.
func.func @slice_wrong_mode(%src: !cute.ptr<bf16, gmem>, %n: i32, %m: i32, %ld: i32, %x: i32, %y: i32) {
  %gl = cute.static : !cute.layout<(n,m):(1,ld)>
  %d = nv_tileas.make_tiled_tma_desc %src, %gl shapes(%n, %m) strides(%ld) paddings() {mode = #cute_nvgpu.tma_load_mode<tiled>, elementBitWidth = 16} : !cute_nvgpu.tma_descriptor_tiled
  %half = cute.static : !cute.composed_layout<Sw<3,3,3> o 0 o (32,64):(64,1)>
  %hmap = cute.static : !cute.layout<(32,64):(1@1,1@0)>
  %load = cute_nvgpu.atom.non_exec_tiled_tma_load %d, %half, %hmap {num_multicast = 2}
  %bar = cute_nvgpu.arch.mbarrier_init {count = 1}
  %exec = cute_nvgpu.atom.make_exec_tma %load, %bar {multicast_mask = 3}
  %smem = cute.alloc_smem : !cute.memref<bf16, smem, Sw<3,3,3> o 0 o (32,128):(64,1)>
  %coord = cute.make_coord %x, %y
  // expected-error @+1 {{multicast_slice = true: the tile's layout Sw<3,3,3> o 0 o (32,128):(64,1) is not 2 slices of the partitioned SMEM layout Sw<3,3,3> o 0 o (32,64):(64,1), one after another}}
  cute_nvgpu.atom.tma_load %exec, %smem, %coord {multicast_slice = true}
  func.return
}

// -----

// A slice of 4 rows of 64 bf16 (256 elements) is half a 128-byte swizzle pattern (512).
func.func @slice_splits_swizzle(%src: !cute.ptr<bf16, gmem>, %n: i32, %m: i32, %ld: i32, %x: i32, %y: i32) {
  %gl = cute.static : !cute.layout<(n,m):(1,ld)>
  %d = nv_tileas.make_tiled_tma_desc %src, %gl shapes(%n, %m) strides(%ld) paddings() {mode = #cute_nvgpu.tma_load_mode<tiled>, elementBitWidth = 16} : !cute_nvgpu.tma_descriptor_tiled
  %half = cute.static : !cute.composed_layout<Sw<3,3,3> o 0 o (4,64):(64,1)>
  %hmap = cute.static : !cute.layout<(4,64):(1@1,1@0)>
  %load = cute_nvgpu.atom.non_exec_tiled_tma_load %d, %half, %hmap {num_multicast = 2}
  %bar = cute_nvgpu.arch.mbarrier_init {count = 1}
  %exec = cute_nvgpu.atom.make_exec_tma %load, %bar {multicast_mask = 3}
  %smem = cute.alloc_smem : !cute.memref<bf16, smem, Sw<3,3,3> o 0 o (8,64):(64,1)>
  %coord = cute.make_coord %x, %y
  // expected-error @+1 {{multicast_slice = true: a slice of 256 elements does not span whole patterns of Sw<3,3,3> (512 elements)}}
  cute_nvgpu.atom.tma_load %exec, %smem, %coord {multicast_slice = true}
  func.return
}
