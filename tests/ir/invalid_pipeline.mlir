// The cutlass dialect's pipelines and tile schedulers (tests/ir/gemm_sm90.mlir is the valid
// form; docs/pipelines.md): one case per diagnostic.

// target: sm_80
func.func @pipeline_sm80(%it: i32) {
  // expected-error @+1 {{a TMA pipeline needs mbarrier transaction counts (sm_90+), not sm_80}}
  %r = cutlass.pipeline.create {kind = "tma_async", stages = 4}
  %p = cutlass.pipeline.init %r {producer = "tma", producer_arrivals = 1, consumer = "wgmma", consumer_arrivals = 1, tx_bytes = 1024}
  %b = cutlass.pipeline.producer_acquire %p, %it
  cutlass.pipeline.consumer_wait %p, %it
  cutlass.pipeline.consumer_release %p, %it
  func.return
}

// -----

func.func @stages() {
  // expected-error @+1 {{a pipeline has 1..32 stages, not 33}}
  %r = cutlass.pipeline.create {stages = 33}
  func.return
}

// -----

func.func @kind() {
  // expected-error @+1 {{a pipeline type is <kind, stages> with kind tma_async, not <cp_async, 2>}}
  %r = cutlass.pipeline.create {kind = "cp_async", stages = 2}
  func.return
}

// -----

func.func @never_initialised() {
  // expected-error @+1 {{a pipeline is initialised by exactly one cutlass.pipeline.init, not 0}}
  %r = cutlass.pipeline.create {stages = 2}
  func.return
}

// -----

func.func @producer_arrivals(%it: i32) {
  %r = cutlass.pipeline.create {stages = 2}
  // expected-error @+1 {{a TMA producer arrives once per stage (mbarrier.arrive.expect_tx), so producer_arrivals is 1, not 2}}
  %p = cutlass.pipeline.init %r {producer = "tma", producer_arrivals = 2, consumer = "wgmma", consumer_arrivals = 1, tx_bytes = 1024}
  %b = cutlass.pipeline.producer_acquire %p, %it
  cutlass.pipeline.consumer_wait %p, %it
  cutlass.pipeline.consumer_release %p, %it
  func.return
}

// -----

func.func @roles(%it: i32) {
  %r = cutlass.pipeline.create {stages = 2}
  // expected-error @+1 {{producer must be 'tma', got 'cp_async'}}
  %p = cutlass.pipeline.init %r {producer = "cp_async", producer_arrivals = 1, consumer = "wgmma", consumer_arrivals = 1, tx_bytes = 1024}
  %b = cutlass.pipeline.producer_acquire %p, %it
  cutlass.pipeline.consumer_wait %p, %it
  cutlass.pipeline.consumer_release %p, %it
  func.return
}

// -----

func.func @pingpong_arrivals(%it: i32) {
  %r = cutlass.pipeline.create {stages = 4}
  // expected-error @+1 {{a ping-pong pipeline's stage is read and released by one warpgroup, so consumer_arrivals is 1, not 2}}
  %p = cutlass.pipeline.init %r {producer = "tma", producer_arrivals = 1, consumer = "wgmma", consumer_arrivals = 2, tx_bytes = 1024, schedule = "pingpong"}
  %b = cutlass.pipeline.producer_acquire %p, %it
  cutlass.pipeline.consumer_wait %p, %it
  cutlass.pipeline.consumer_release %p, %it
  func.return
}

// -----

func.func @tx_bytes(%it: i32) {
  %r = cutlass.pipeline.create {stages = 4}
  // expected-error @+1 {{tx_bytes is 1..1048575, got 0}}
  %p = cutlass.pipeline.init %r {producer = "tma", producer_arrivals = 1, consumer = "wgmma", consumer_arrivals = 2, tx_bytes = 0}
  %b = cutlass.pipeline.producer_acquire %p, %it
  cutlass.pipeline.consumer_wait %p, %it
  cutlass.pipeline.consumer_release %p, %it
  func.return
}

// -----

func.func @no_release(%it: i32) {
  %r = cutlass.pipeline.create {stages = 4}
  // expected-error @+1 {{the pipeline has no cutlass.pipeline.consumer_release: its consumer never takes part, and the other role waits forever}}
  %p = cutlass.pipeline.init %r {producer = "tma", producer_arrivals = 1, consumer = "wgmma", consumer_arrivals = 2, tx_bytes = 1024}
  %b = cutlass.pipeline.producer_acquire %p, %it
  cutlass.pipeline.consumer_wait %p, %it
  func.return
}

// -----

func.func @uninitialised_use(%it: i32) {
  %r = cutlass.pipeline.create {stages = 4}
  %p = cutlass.pipeline.init %r {producer = "tma", producer_arrivals = 1, consumer = "wgmma", consumer_arrivals = 2, tx_bytes = 1024}
  %b = cutlass.pipeline.producer_acquire %p, %it
  cutlass.pipeline.consumer_wait %p, %it
  cutlass.pipeline.consumer_release %p, %it
  // expected-error @+1 {{expects a pipeline of cutlass.pipeline.init as operand #0}}
  cutlass.pipeline.consumer_wait %r, %it
  func.return
}

// -----

func.func @iteration_type(%it: i32) {
  %r = cutlass.pipeline.create {stages = 4}
  %p = cutlass.pipeline.init %r {producer = "tma", producer_arrivals = 1, consumer = "wgmma", consumer_arrivals = 2, tx_bytes = 1024}
  %b = cutlass.pipeline.producer_acquire %p, %it
  cutlass.pipeline.consumer_wait %p, %it
  // expected-error @+1 {{expects an integer iteration as operand #1, but got !cute_nvgpu.mbarrier}}
  cutlass.pipeline.consumer_release %p, %b
  func.return
}

// -----

func.func @init_type(%it: i32) {
  %b = cute_nvgpu.arch.mbarrier_init {count = 1}
  // expected-error @+1 {{'cutlass.pipeline.init' initialises a !cutlass.pipeline, not !cute_nvgpu.mbarrier}}
  %p = cutlass.pipeline.init %b {producer = "tma", producer_arrivals = 1, consumer = "wgmma", consumer_arrivals = 2, tx_bytes = 1024}
  func.return
}

// -----

func.func @raster_group(%m: i32, %n: i32) {
  // expected-error @+1 {{raster_group is 1..64 M blocks, got 0}}
  %s = cutlass.tile_scheduler.create_static_persistent_params %m, %n {raster_group = 0}
  func.return
}

// -----

func.func @tile_counts(%m: i32) {
  %b = cute_nvgpu.arch.mbarrier_init {count = 1}
  // expected-error @+1 {{expects an integer N tile count as operand #1, but got !cute_nvgpu.mbarrier}}
  %s = cutlass.tile_scheduler.create_static_persistent_params %m, %b {raster_group = 8}
  func.return
}

// -----

func.func @scheduler_operand(%m: i32, %n: i32) {
  // expected-error @+1 {{expects a !cutlass.tile_scheduler as operand #0, but got i32}}
  %t = cutlass.tile_scheduler.tile_m %m, %n
  func.return
}

// -----

func.func @scheduler_type() {
  // expected-error @+1 {{a tile scheduler type is <static_persistent>, not <dynamic>}}
  %c = cute.static : !cutlass.tile_scheduler<dynamic>
  func.return
}

// -----

// The stage-state rules (nvatom.ptx.pipeline_state, as in the Python layer): releasing the
// stage whose WGMMA group is still in flight (wait {pending = 1}) lets the producer refill it.
func.func @release_in_flight(%n: i32) {
  %r = cutlass.pipeline.create {stages = 4}
  %p = cutlass.pipeline.init %r {producer = "tma", producer_arrivals = 1, consumer = "wgmma", consumer_arrivals = 1, tx_bytes = 1024}
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  scf.for %it = %c0 to %n step %c1 : i32 {
    %b = cutlass.pipeline.producer_acquire %p, %it
    cutlass.pipeline.producer_commit %p, %it
  }
  scf.for %it = %c0 to %n step %c1 : i32 {
    cutlass.pipeline.consumer_wait %p, %it
    cute_nvgpu.warpgroup.fence
    cute_nvgpu.warpgroup.commit_group
    cute_nvgpu.warpgroup.wait {pending = 1}
    // expected-error @+1 {{pipeline 'p', consumer 'consumer', stage s: released while a WGMMA group still reads it (1 group pending after wgmma.wait_group): stage reused before its consumer release is done}}
    cutlass.pipeline.consumer_release %p, %it
  }
  cute_nvgpu.warpgroup.wait {pending = 0}
  func.return
}

// -----

// A producer iteration that acquires a stage and never commits it.
func.func @acquire_without_commit(%n: i32) {
  %r = cutlass.pipeline.create {stages = 4}
  %p = cutlass.pipeline.init %r {producer = "tma", producer_arrivals = 1, consumer = "wgmma", consumer_arrivals = 1, tx_bytes = 1024}
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  scf.for %it = %c0 to %n step %c1 : i32 {
    // expected-error @+1 {{pipeline 'p', producer 'producer', stage s (next iteration, at the loop's back edge): acquired but never committed before the next iteration}}
    %b = cutlass.pipeline.producer_acquire %p, %it
  }
  scf.for %it = %c0 to %n step %c1 : i32 {
    cutlass.pipeline.consumer_wait %p, %it
    cutlass.pipeline.consumer_release %p, %it
  }
  func.return
}

// -----

// Two releases of one stage: empty[s] completes early, the producer refills it.
func.func @double_release(%n: i32) {
  %r = cutlass.pipeline.create {stages = 4}
  %p = cutlass.pipeline.init %r {producer = "tma", producer_arrivals = 1, consumer = "wgmma", consumer_arrivals = 1, tx_bytes = 1024}
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  scf.for %it = %c0 to %n step %c1 : i32 {
    %b = cutlass.pipeline.producer_acquire %p, %it
    cutlass.pipeline.producer_commit %p, %it
  }
  scf.for %it = %c0 to %n step %c1 : i32 {
    cutlass.pipeline.consumer_wait %p, %it
    cutlass.pipeline.consumer_release %p, %it
    // expected-error @+1 {{stage s: released twice: the producer may refill it while another consumer still reads it (stage reused before its consumer release)}}
    cutlass.pipeline.consumer_release %p, %it
  }
  func.return
}
