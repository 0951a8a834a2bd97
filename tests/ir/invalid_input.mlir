// Bad input the IR must reject with a located diagnostic, never an internal error
// xDSL's own checks, out-of-range attribute values and sizes that would make
// the verifier or the lowering allocate or loop without bound.

// An arith op on a type it does not take (xDSL checks it while building the op).
func.func @arith_type(%a: i32) {
  %c = arith.constant 2 : i32
  %f = arith.constant 1.5 : f32
  // expected-error @+1 {{Unexpected attribute f32}}
  %e = arith.muli %f, %f : f32
  func.return
}

// -----

// An scf.for body must end in scf.yield, not in func.return.
func.func @for_return(%n: i32) {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  // expected-error @+1 {{terminates with operation func.return instead of scf.yield}}
  scf.for %i = %c0 to %n step %c1 : i32 {
    func.return
  }
  func.return
}

// -----

// A function header without a body (a declaration, or a file cut off after the header).
// expected-error @+1 {{has no body: nvatom compiles function definitions only}}
func.func @no_body(%a: !cute.ptr<bf16, gmem>)

// -----

func.func @attr_i64() {
  // expected-error @+1 {{Integer value 99999999999999999999999999 is out of range for type i64}}
  %b = cute_nvgpu.arch.mbarrier_init {count = 99999999999999999999999999}
  func.return
}

// -----

func.func @attr_count() {
  // expected-error @+1 {{an mbarrier's arrival count is 1..1048575, got -1}}
  %b = cute_nvgpu.arch.mbarrier_init {count = -1}
  func.return
}

// -----

func.func @attr_pending() {
  // expected-error @+1 {{wgmma.wait_group takes 0..7, got 9223372036854775807}}
  cute_nvgpu.warpgroup.wait {pending = 9223372036854775807}
  func.return
}

// -----

func.func @long_literal() {
  // expected-error @+1 {{integer literal of 45 digits is too long (the limit is 40 digits)}}
  %b = cute_nvgpu.arch.mbarrier_init {count = 999999999999999999999999999999999999999999999}
  func.return
}

// -----

// Layout integers are CuTe's int64_t.
// expected-error @+1 {{integer 9223372036854775808 in layout '(9223372036854775808,2):(1,8)' is out of range (integers must fit in 64 bits: |v| < 2^63)}}
func.func @layout_int(%a: !cute.layout<(9223372036854775808,2):(1,8)>) {
  func.return
}

// -----

// A 2^32 x 128 descriptor view: its check would enumerate 2^37 offsets (1 TiB).
// expected-error @+1 {{has 137438953472 elements, too many to enumerate (the limit is 2^24 = 16777216)}}
func.func @huge_desc(%a: !cute_nvgpu.smem_desc_view<e4m3, K, Sw<3,4,3> o 0 o (4294967296,128):(128,1)>) {
  func.return
}

// -----

// Swizzle masks are 32-bit.
// expected-error @+1 {{Swizzle<3,100000000000,3>: B + M + |S| must be <= 32}}
func.func @huge_swizzle(%a: !cute.composed_layout<Sw<3,100000000000,3> o 0 o (8,8):(8,1)>) {
  func.return
}

// -----

func.func @rmem_registers() {
  // expected-error @+1 {{a fragment of 17179869184 bf16 values per thread needs 8589934592 32-bit registers; a thread has at most 255}}
  %r = cute.alloc_rmem : !cute.memref<bf16, rmem, ((4,8),(2,4294967296,2)):((32,1),(16,8,128))>
  func.return
}

// -----

func.func @rmem_swizzled() {
  // expected-error @+1 {{a register fragment needs a (thread, value) layout, got Sw<3,4,3> o 0 o (8,8):(8,1)}}
  %r = cute.alloc_rmem : !cute.memref<bf16, rmem, Sw<3,4,3> o 0 o (8,8):(8,1)>
  func.return
}


// -----

func.func @long_hex() {
  // expected-error @+1 {{hexadecimal literal of 40 digits is too long (the limit is 32 digits)}}
  %b = cute_nvgpu.arch.mbarrier_init {count = 0xffffffffffffffffffffffffffffffffffffffff}
  func.return
}

// -----

func.func @use_before_def(%n: i32) {
  // expected-error @+1 {{uses %d before its definition}}
  %c = arith.addi %n, %d : i32
  %d = arith.constant 1 : i32
  func.return
}

// -----

// A forward reference that only a nested region defines (xDSL left it without an owner).
func.func @forward_into_region(%n: i32) {
  %c0 = arith.constant 0 : i32
  // expected-error @+1 {{uses a value before its definition}}
  scf.for %i = %c0 to %n step %c1 : i32 {
    %c1 = arith.constant 1 : i32
  }
  func.return
}

// -----

func.func @wide_type() {
  // expected-error @+1 {{integer type i9223372036854775807 is too wide (the limit is 16777215 bits, as in MLIR)}}
  %c = arith.constant 1 : i9223372036854775807
  func.return
}

// -----

// The generic form of our operations would skip their syntax checks (no result here).
func.func @generic_form() {
  // expected-error @+1 {{takes its own syntax only: the generic form}}
  "cute.alloc_rmem"() : () -> ()
  func.return
}

// -----

// expected-error @+1 {{unsupported input: Format not implemented for i256}}
func.func @wide_array() attributes {cluster = array<i256: 2, 1, 1>} {
  func.return
}
