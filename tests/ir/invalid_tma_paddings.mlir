// Padding values of nv_tileas.make_tiled_tma_desc are refused in every mode.  The
// specification (001, "Descriptor Builder"): "Padding values are restricted — non-zero
// padding requires a mode that explicitly supports it"; no TMA mode does: a CUtensorMap
// (cuTensorMapEncodeTiled / cuTensorMapEncodeIm2col) has no padding value, only the
// out-of-bounds fill mode (CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE fills zeros,
// _NAN_REQUEST_ZERO_FMA NaNs), and cp.async.bulk.tensor takes none
// (docs/spec-deviations.md, "TMA tensor maps").

func.func @tiled_load(%t: !cute.ptr<f16, gmem>, %n: i32, %m: i32, %ld: i32, %p: i32) {
  %gl = cute.static : !cute.layout<(n,m):(1,ld)>
  // expected-error @+1 {{mode #cute_nvgpu.tma_load_mode<tiled> takes no padding values}}
  %d = nv_tileas.make_tiled_tma_desc %t, %gl shapes(%n, %m) strides(%ld) paddings(%p) {mode = #cute_nvgpu.tma_load_mode<tiled>, elementBitWidth = 16} : !cute_nvgpu.tma_descriptor_tiled
  func.return
}

// -----

func.func @zero_padding(%t: !cute.ptr<f16, gmem>, %n: i32, %m: i32, %ld: i32) {
  %gl = cute.static : !cute.layout<(n,m):(1,ld)>
  %z = arith.constant 0 : i32
  // expected-error @+1 {{mode #cute_nvgpu.tma_store_mode<tiled> takes no padding values}}
  %d = nv_tileas.make_tiled_tma_desc %t, %gl shapes(%n, %m) strides(%ld) paddings(%z, %z) {mode = #cute_nvgpu.tma_store_mode<tiled>, elementBitWidth = 16} : !cute_nvgpu.tma_descriptor_tiled
  func.return
}

// -----

func.func @im2col(%t: !cute.ptr<f16, gmem>, %c: i32, %w: i32, %n: i32, %s: i32, %p: i32) {
  %gl = cute.static : !cute.layout<(c,w,n):(1,64,s)>
  // expected-error @+1 {{mode #cute_nvgpu.tma_store_mode<im2col> takes no padding values}}
  %d = nv_tileas.make_tiled_tma_desc %t, %gl shapes(%c, %w, %n) strides(%w, %s) paddings(%p) {mode = #cute_nvgpu.tma_store_mode<im2col>, elementBitWidth = 16} : !cute_nvgpu.tma_descriptor_im2col
  func.return
}

// -----

func.func @im2col_w(%t: !cute.ptr<f16, gmem>, %c: i32, %w: i32, %n: i32, %s: i32, %p: i32) {
  %gl = cute.static : !cute.layout<(c,w,n):(1,64,s)>
  // expected-error @+1 {{mode #cute_nvgpu.tma_load_mode<w_multicast> takes no padding values}}
  %d = nv_tileas.make_tiled_tma_desc %t, %gl shapes(%c, %w, %n) strides(%w, %s) paddings(%p) {mode = #cute_nvgpu.tma_load_mode<w_multicast>, elementBitWidth = 16} : !cute_nvgpu.tma_descriptor_im2col
  func.return
}

// -----

func.func @float_padding(%t: !cute.ptr<f16, gmem>, %n: i32, %m: i32, %ld: i32, %f: f32) {
  %gl = cute.static : !cute.layout<(n,m):(1,ld)>
  // expected-error @+1 {{shapes, strides and paddings are integers, got f32}}
  %d = nv_tileas.make_tiled_tma_desc %t, %gl shapes(%n, %m) strides(%ld) paddings(%f) {mode = #cute_nvgpu.tma_load_mode<tiled>, elementBitWidth = 16} : !cute_nvgpu.tma_descriptor_tiled
  func.return
}
