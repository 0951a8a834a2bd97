"""The SM90 kernels (TMA + WGMMA, warp-specialised), one module per job in the manner of
CUTLASS 3 and FlashAttention-3: a kernel is a short composition of a prologue and exit
(:mod:`.skeleton`), a tile scheduler (:mod:`.scheduler`), a stage ring (:mod:`.pipeline`), a
producer (:mod:`.producer`), main loops (:mod:`.mainloop`, :mod:`.mainloop_promoted`,
:mod:`.mainloop_unrolled`, :mod:`.mainloop_pipelined`, :mod:`.mainloop_rs` over
:mod:`.promotion`) and an epilogue (:mod:`.epilogue`, :mod:`.row_scales`, the fused terms
of :mod:`.fusion` and a user's PTX hook, :mod:`.user_epilogue`), composed by
:func:`.gemm.build_gemm_sm90`.  The host side: :mod:`.config`, :mod:`.plan` (what the layout
algebra derives), :mod:`.tuning` (the one table of measured tiles and schedules) and
:mod:`.launch`.  Both the GEMM and the attention kernel (``attention*``) use :mod:`.emit`
(small PTX emitters) and :mod:`.limits` (sm_90's shared-memory and register limits, the
128-byte swizzle).
"""
