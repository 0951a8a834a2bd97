// A 3-stage cutlass.pipeline (a ring that is not a power of two: rem/div, not and/shift) and a
// static persistent tile scheduler, lowered by tests/ir/test_ir_pipeline.py.
func.func @ring3(%out: !cute.ptr<f32, gmem>, %tm: i32, %tn: i32) attributes {threads = 256 : i32} {
  %r = cutlass.pipeline.create {kind = "tma_async", stages = 3}
  %p = cutlass.pipeline.init %r {producer = "tma", producer_arrivals = 1, consumer = "wgmma", consumer_arrivals = 1, tx_bytes = 4096}
  %s = cutlass.tile_scheduler.create_static_persistent_params %tm, %tn {raster_group = 4}
  %n = cutlass.tile_scheduler.num_tiles %s
  %t0 = cutlass.tile_scheduler.first_tile %s
  %dt = cutlass.tile_scheduler.tile_step %s
  %c0 = arith.constant 0 : i32
  %wg = cute_nvgpu.arch.warpgroup_idx
  %tid = cute_nvgpu.arch.thread_idx
  %is_p = arith.cmpi eq, %wg, %c0 : i32
  scf.for %t = %t0 to %n step %dt : i32 {
    %i = cutlass.tile_scheduler.local_index %s, %t
    %mb = cutlass.tile_scheduler.tile_m %s, %t
    %nb = cutlass.tile_scheduler.tile_n %s, %t
    scf.if %is_p {
      %fb = cutlass.pipeline.producer_acquire %p, %i
      %st = cutlass.pipeline.stage %p, %i
      cute_nvgpu.arch.mbarrier_arrive %fb
      cutlass.pipeline.producer_commit %p, %i
    } else {
      cutlass.pipeline.consumer_wait %p, %i
      cutlass.pipeline.consumer_release %p, %i
    }
  }
  func.return
}
