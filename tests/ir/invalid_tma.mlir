// The eleven-step TMA partition verifier (docs/spec-deviations.md#tma-partition-verifier), one
// case per diagnostic in step order, via cute_nvgpu.atom.non_exec_tiled_tma_* (text byte for byte).

// Step 1, the specification's rank-6 worked example.
func.func @rank6(%t: !cute.ptr<f16, gmem>, %a: i32) {
  %l6 = cute.static : !cute.layout<(a,b,c,d,e,f),...>
  %desc_r6 = nv_tileas.make_tiled_tma_desc %t, %l6 shapes(%a, %a, %a, %a, %a, %a) strides(%a, %a, %a, %a, %a) paddings() {mode = #cute_nvgpu.tma_load_mode<tiled>, elementBitWidth = 16} : !cute_nvgpu.tma_descriptor_tiled
  %tile_r6 = cute.static : !cute.layout<(a,b,c,d,e,f),...>
  %cta_map_r6 = cute.static : !cute.layout<...>
  // expected-error @+1 {{invalid operand types, got !cute.layout<(a,b,c,d,e,f),...>, !cute.layout<(a,b,c,d,e,f),...>, and !cute.layout<...>}}
  %bad = cute_nvgpu.atom.non_exec_tiled_tma_load %desc_r6, %tile_r6, %cta_map_r6 : !cute_nvgpu.tma_descriptor_tiled
  func.return
}

// -----

// Step 2: the SMEM operand is a swizzle, not a layout.
func.func @smem_kind(%t: !cute.ptr<f16, gmem>, %m: i32, %n: i32, %s: i32) {
  %g = cute.static : !cute.layout<(n,m):(1,s)>
  %d = nv_tileas.make_tiled_tma_desc %t, %g shapes(%n, %m) strides(%s) paddings() {mode = #cute_nvgpu.tma_load_mode<tiled>, elementBitWidth = 16} : !cute_nvgpu.tma_descriptor_tiled
  %tile = cute.static : !cute.swizzle<Sw<3,4,3>>
  %v = cute.static : !cute.layout<(8,64):(1@1,1@0)>
  // expected-error @+1 {{invalid smem layout type, expected LayoutType or ComposedLayoutType, got !cute.swizzle<Sw<3,4,3>>}}
  %a = cute_nvgpu.atom.non_exec_tiled_tma_load %d, %tile, %v {num_multicast = 1}
  func.return
}

// -----

// Step 3: a swizzled GMEM layout.
func.func @gmem_kind(%t: !cute.ptr<f16, gmem>, %m: i32, %n: i32, %s: i32) {
  %g = cute.static : !cute.composed_layout<Sw<3,4,3> o 0 o (64,64):(1,64)>
  %d = nv_tileas.make_tiled_tma_desc %t, %g shapes() strides() paddings() {mode = #cute_nvgpu.tma_load_mode<tiled>, elementBitWidth = 16} : !cute_nvgpu.tma_descriptor_tiled
  %tile = cute.static : !cute.composed_layout<Sw<3,4,3> o 0 o (8,64):(64,1)>
  %v = cute.static : !cute.layout<(8,64):(1@1,1@0)>
  // expected-error @+1 {{unsupported layout for the GMEM tensor, got !cute.composed_layout<Sw<3,4,3> o 0 o (64,64):(1,64)>}}
  %a = cute_nvgpu.atom.non_exec_tiled_tma_load %d, %tile, %v {num_multicast = 1}
  func.return
}

// -----

// Step 4: a 4-byte (not 16-byte) row stride of f16.
func.func @strides(%t: !cute.ptr<f16, gmem>, %m: i32, %n: i32, %s: i32) {
  %g = cute.static : !cute.layout<(n,m):(1,2)>
  %d = nv_tileas.make_tiled_tma_desc %t, %g shapes(%n, %m) strides(%s) paddings() {mode = #cute_nvgpu.tma_load_mode<tiled>, elementBitWidth = 16} : !cute_nvgpu.tma_descriptor_tiled
  %tile = cute.static : !cute.composed_layout<Sw<3,4,3> o 0 o (8,64):(64,1)>
  %v = cute.static : !cute.layout<(8,64):(1@1,1@0)>
  // expected-error @+1 {{expected the GMEM and SMEM layouts to have integer stride elements, but got !cute.layout<(n,m):(1,2)>, and !cute.composed_layout<Sw<3,4,3> o 0 o (8,64):(64,1)>}}
  %a = cute_nvgpu.atom.non_exec_tiled_tma_load %d, %tile, %v {num_multicast = 1}
  func.return
}

// -----

// Step 5: the SMEM layout has no swizzle.
func.func @swizzle(%t: !cute.ptr<f16, gmem>, %m: i32, %n: i32, %s: i32) {
  %g = cute.static : !cute.layout<(n,m):(1,s)>
  %d = nv_tileas.make_tiled_tma_desc %t, %g shapes(%n, %m) strides(%s) paddings() {mode = #cute_nvgpu.tma_load_mode<tiled>, elementBitWidth = 16} : !cute_nvgpu.tma_descriptor_tiled
  %tile = cute.static : !cute.layout<(8,64):(64,1)>
  %v = cute.static : !cute.layout<(8,64):(1@1,1@0)>
  // expected-error @+1 {{expected the SMEM layout to be a swizzle layout, but got !cute.layout<(8,64):(64,1)>}}
  %a = cute_nvgpu.atom.non_exec_tiled_tma_load %d, %tile, %v {num_multicast = 1}
  func.return
}

// -----

// Step 6: a dynamic extent in the CTA V-map.
func.func @static(%t: !cute.ptr<f16, gmem>, %m: i32, %n: i32, %s: i32) {
  %g = cute.static : !cute.layout<(n,m):(1,s)>
  %d = nv_tileas.make_tiled_tma_desc %t, %g shapes(%n, %m) strides(%s) paddings() {mode = #cute_nvgpu.tma_load_mode<tiled>, elementBitWidth = 16} : !cute_nvgpu.tma_descriptor_tiled
  %tile = cute.static : !cute.composed_layout<Sw<3,4,3> o 0 o (8,64):(64,1)>
  %v = cute.static : !cute.layout<(8,k):(1@1,1@0)>
  // expected-error @+1 {{expected the SMEM layout and the CTA V-map to be static, but got !cute.composed_layout<Sw<3,4,3> o 0 o (8,64):(64,1)>, and !cute.layout<(8,k):(1@1,1@0)>}}
  %a = cute_nvgpu.atom.non_exec_tiled_tma_load %d, %tile, %v {num_multicast = 1}
  func.return
}

// -----

// Step 7: the V-map's modes are transposed against the SMEM layout.
func.func @shapes(%t: !cute.ptr<f16, gmem>, %m: i32, %n: i32, %s: i32) {
  %g = cute.static : !cute.layout<(n,m):(1,s)>
  %d = nv_tileas.make_tiled_tma_desc %t, %g shapes(%n, %m) strides(%s) paddings() {mode = #cute_nvgpu.tma_load_mode<tiled>, elementBitWidth = 16} : !cute_nvgpu.tma_descriptor_tiled
  %tile = cute.static : !cute.composed_layout<Sw<3,4,3> o 0 o (8,64):(64,1)>
  %v = cute.static : !cute.layout<(64,8):(1@0,1@1)>
  // expected-error @+1 {{expected top-level shape equivalence between the SMEM layout and the CTA V-map, but got !cute.composed_layout<Sw<3,4,3> o 0 o (8,64):(64,1)>, and !cute.layout<(64,8):(1@0,1@1)>}}
  %a = cute_nvgpu.atom.non_exec_tiled_tma_load %d, %tile, %v {num_multicast = 1}
  func.return
}

// -----

// Step 8: the V-map walks a GMEM mode (2) the rank-2 tensor does not have.
func.func @g_basis(%t: !cute.ptr<f16, gmem>, %m: i32, %n: i32, %s: i32) {
  %g = cute.static : !cute.layout<(n,m):(1,s)>
  %d = nv_tileas.make_tiled_tma_desc %t, %g shapes(%n, %m) strides(%s) paddings() {mode = #cute_nvgpu.tma_load_mode<tiled>, elementBitWidth = 16} : !cute_nvgpu.tma_descriptor_tiled
  %tile = cute.static : !cute.composed_layout<Sw<3,4,3> o 0 o (8,64):(64,1)>
  %v = cute.static : !cute.layout<(8,64):(1@2,1@0)>
  // expected-error @+1 {{failed to compute the TMA G-basis, got !cute.layout<(n,m):(1,s)>, and !cute.layout<(8,64):(1@2,1@0)>}}
  %a = cute_nvgpu.atom.non_exec_tiled_tma_load %d, %tile, %v {num_multicast = 1}
  func.return
}

// -----

// Step 9: a stride-2 inner mode makes a 127-element (254-byte) inner box: over 128 B.
func.func @tma_layout(%t: !cute.ptr<f16, gmem>, %m: i32, %n: i32, %s: i32) {
  %g = cute.static : !cute.layout<(n,m):(1,s)>
  %d = nv_tileas.make_tiled_tma_desc %t, %g shapes(%n, %m) strides(%s) paddings() {mode = #cute_nvgpu.tma_load_mode<tiled>, elementBitWidth = 16} : !cute_nvgpu.tma_descriptor_tiled
  %tile = cute.static : !cute.composed_layout<Sw<3,4,3> o 0 o (8,64):(64,1)>
  %v = cute.static : !cute.layout<(8,64):(1@1,2@0)>
  // expected-error @+1 {{Computed TMA layout is invalid, got !cute.layout<(127,8):(1@0,1@1)>}}
  %a = cute_nvgpu.atom.non_exec_tiled_tma_load %d, %tile, %v {num_multicast = 1}
  func.return
}

// -----

// Step 10: store mode IM2COL_W has no PTX form, so no TMA tensor type exists for it.
func.func @tensor_type(%t: !cute.ptr<f16, gmem>, %c: i32, %w: i32, %n: i32, %s: i32) {
  %g = cute.static : !cute.layout<(c,w,n):(1,64,s)>
  %d = nv_tileas.make_tiled_tma_desc %t, %g shapes(%c, %w, %n) strides(%w, %s) paddings() {mode = #cute_nvgpu.tma_store_mode<im2col_w>, elementBitWidth = 16} : !cute_nvgpu.tma_descriptor_im2col
  %tile = cute.static : !cute.composed_layout<Sw<3,4,3> o 0 o (8,64,1):(64,1,512)>
  %v = cute.static : !cute.layout<(8,64,1):(1@1,1@0,1@2)>
  // expected-error @+1 {{Failed to construct the TMA tensor type}}
  %a = cute_nvgpu.atom.non_exec_tiled_tma_store %d, %tile, %v
  func.return
}

// -----

// Step 11: a multicast load mode without num_multicast.
func.func @multicast(%t: !cute.ptr<f16, gmem>, %m: i32, %n: i32, %s: i32) {
  %g = cute.static : !cute.layout<(n,m):(1,s)>
  %d = nv_tileas.make_tiled_tma_desc %t, %g shapes(%n, %m) strides(%s) paddings() {mode = #cute_nvgpu.tma_load_mode<two_cta>, elementBitWidth = 16} : !cute_nvgpu.tma_descriptor_tiled
  %tile = cute.static : !cute.composed_layout<Sw<3,4,3> o 0 o (8,64):(64,1)>
  %v = cute.static : !cute.layout<(8,64):(1@1,1@0)>
  // expected-error @+1 {{missing or invalid num_multicast for a multicast TMA load}}
  %a = cute_nvgpu.atom.non_exec_tiled_tma_load %d, %tile, %v
  func.return
}

// -----

// Step 11's companion: a count outside a cluster's 1..16 CTAs.
func.func @num_multicast(%t: !cute.ptr<f16, gmem>, %m: i32, %n: i32, %s: i32) {
  %g = cute.static : !cute.layout<(n,m):(1,s)>
  %d = nv_tileas.make_tiled_tma_desc %t, %g shapes(%n, %m) strides(%s) paddings() {mode = #cute_nvgpu.tma_load_mode<tiled>, elementBitWidth = 16} : !cute_nvgpu.tma_descriptor_tiled
  %tile = cute.static : !cute.composed_layout<Sw<3,4,3> o 0 o (8,64):(64,1)>
  %v = cute.static : !cute.layout<(8,64):(1@1,1@0)>
  // expected-error @+1 {{got num_multicast of 17}}
  %a = cute_nvgpu.atom.non_exec_tiled_tma_load %d, %tile, %v {num_multicast = 17}
  func.return
}

// -----

// The descriptor type names the mode's kind (issue 16: a tiled mode typed _im2col verified).
func.func @tiled_mode_im2col_type(%t: !cute.ptr<f16, gmem>, %n: i32, %m: i32, %ld: i32) {
  %g = cute.static : !cute.layout<(n,m):(1,ld)>
  // expected-error @+1 {{mode #cute_nvgpu.tma_load_mode<tiled> makes a !cute_nvgpu.tma_descriptor_tiled, but the result type is !cute_nvgpu.tma_descriptor_im2col}}
  %d = nv_tileas.make_tiled_tma_desc %t, %g shapes(%n, %m) strides(%ld) paddings() {mode = #cute_nvgpu.tma_load_mode<tiled>, elementBitWidth = 16} : !cute_nvgpu.tma_descriptor_im2col
  func.return
}

// -----

func.func @im2col_mode_tiled_type(%t: !cute.ptr<f16, gmem>, %c: i32, %w: i32, %n: i32, %s: i32) {
  %g = cute.static : !cute.layout<(c,w,n):(1,64,s)>
  // expected-error @+1 {{mode #cute_nvgpu.tma_store_mode<im2col> makes a !cute_nvgpu.tma_descriptor_im2col, but the result type is !cute_nvgpu.tma_descriptor_tiled}}
  %d = nv_tileas.make_tiled_tma_desc %t, %g shapes(%c, %w, %n) strides(%w, %s) paddings() {mode = #cute_nvgpu.tma_store_mode<im2col>, elementBitWidth = 16} : !cute_nvgpu.tma_descriptor_tiled
  func.return
}
