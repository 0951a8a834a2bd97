// TMA load modes of sm_100a: two_cta (.tile with .cta_group::2) and the im2col::w mode
// (the spec's w_multicast: .im2col::w, which takes the 16-bit wHalo and wOffset operands
// after the coordinate).
builtin.module attributes {nvatom.target = "sm_100a"} {
  func.func @tma_two_cta(%src: !cute.ptr<f16, gmem>, %n: i32, %m: i32, %ld: i32, %x: i32, %y: i32) {
    %gl = cute.static : !cute.layout<(n,m):(1,ld)>
    %d = nv_tileas.make_tiled_tma_desc %src, %gl shapes(%n, %m) strides(%ld) paddings() {mode = #cute_nvgpu.tma_load_mode<two_cta>, elementBitWidth = 16} : !cute_nvgpu.tma_descriptor_tiled
    %tile = cute.static : !cute.composed_layout<Sw<3,4,3> o 0 o (8,64):(64,1)>
    %vmap = cute.static : !cute.layout<(8,64):(1@1,1@0)>
    %load = cute_nvgpu.atom.non_exec_tiled_tma_load %d, %tile, %vmap {num_multicast = 1}
    %bar = cute_nvgpu.arch.mbarrier_init {count = 1}
    %exec = cute_nvgpu.atom.make_exec_tma %load, %bar
    %smem = cute.alloc_smem : !cute.memref<f16, smem, Sw<3,4,3> o 0 o (8,64):(64,1)>
    %coord = cute.make_coord %x, %y
    cute_nvgpu.atom.tma_load %exec, %smem, %coord
    func.return
  }
  func.func @tma_im2col_w(%src: !cute.ptr<f16, gmem>, %a: i32, %b: i32, %c: i32, %sb: i32, %sc: i32, %x: i32, %y: i32, %z: i32, %halo: i32, %off: i32) {
    %gl = cute.static : !cute.layout<(a,b,c):(1,sb,sc)>
    %d = nv_tileas.make_tiled_tma_desc %src, %gl shapes(%a, %b, %c) strides(%sb, %sc) paddings() {mode = #cute_nvgpu.tma_load_mode<w_multicast>, elementBitWidth = 16} : !cute_nvgpu.tma_descriptor_im2col
    %tile = cute.static : !cute.composed_layout<Sw<3,4,3> o 0 o (64,8,1):(1,64,512)>
    %vmap = cute.static : !cute.layout<(64,8,1):(1@0,1@1,1@2)>
    %load = cute_nvgpu.atom.non_exec_tiled_tma_load %d, %tile, %vmap {num_multicast = 1}
    %bar = cute_nvgpu.arch.mbarrier_init {count = 1}
    %exec = cute_nvgpu.atom.make_exec_tma %load, %bar
    %smem = cute.alloc_smem : !cute.memref<f16, smem, Sw<3,4,3> o 0 o (64,8,1):(1,64,512)>
    %coord = cute.make_coord %x, %y, %z
    cute_nvgpu.atom.tma_load %exec, %smem, %coord, %halo, %off
    func.return
  }
}
