"""Kernels built only from nvatom's atoms and layouts: PTX text and launch specs, no launcher.

:mod:`.mma_demo` (one ``mma.sync``), :mod:`.copy_pipeline` (the copy atoms of one warp),
:mod:`.gemm_sm80` (cp.async + ldmatrix + mma.sync), :mod:`.sm90` (TMA + WGMMA: the GEMM and
the attention forward, one module per piece; :mod:`.gemm_sm90` and :mod:`.attention_sm90`
re-export their public names) and :mod:`.gemm_sm100` (TMA + tcgen05.mma; with a CPU run of
its data path on ``nvatom.ref``).  ``nvatom.gemm`` and ``nvatom.runtime.launch`` compile and
launch them.
"""
