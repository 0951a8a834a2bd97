// The worked example of docs/spec-deviations.md#tma-worked-example inside a kernel: a rank-2
// f16 tensor of m x n elements with row stride sn, one 64 x 64 box, 128-byte swizzle.
func.func @tma_worked_example(%tensor: !cute.ptr<f16, gmem>, %m: i32, %n: i32, %sn: i32, %x: i32, %y: i32) {
  %layout = cute.static : !cute.layout<(n,m):(1,sn)>
  %desc = nv_tileas.make_tiled_tma_desc %tensor, %layout shapes(%n, %m) strides(%sn) paddings() {mode = #cute_nvgpu.tma_load_mode<tiled>, elementBitWidth = 16} : !cute_nvgpu.tma_descriptor_tiled
  %tile = cute.static : !cute.composed_layout<Sw<3,4,3> o 0 o (8,64):(64,1)>
  %cta_map = cute.static : !cute.layout<(8,64):(1@1,1@0)>
  %atom = cute_nvgpu.atom.non_exec_tiled_tma_load %desc, %tile, %cta_map {num_multicast = 1}
  %mbar = cute_nvgpu.arch.mbarrier_init {count = 1}
  %exec = cute_nvgpu.atom.make_exec_tma %atom, %mbar {cache_mode = #cute_nvgpu.load_cache_mode<cg>}
  %smem_tile = cute.alloc_smem : !cute.memref<f16, smem, Sw<3,4,3> o 0 o (8,64):(64,1)>
  %coord = cute.make_coord %x, %y
  cute_nvgpu.prefetch_tma_desc %desc
  cute_nvgpu.atom.tma_load %exec, %smem_tile, %coord {allow_tma = true, inBounds = true}
  %c0 = arith.constant 0 : i32
  cute_nvgpu.arch.mbarrier_wait %mbar, %c0
  func.return
}
