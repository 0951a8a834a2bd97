"""Runtime: ptxas discovery and assembly (:mod:`.ptxas`), the kernel cache, cubin loading and
launch (:mod:`.launch`, through ``cuda.core``; :mod:`.driver_launch`, a direct
``cuLaunchKernelEx``), torch argument checks (:mod:`.torch_interop`) and the types the GEMM
providers share (:mod:`.gemm_plan`)."""
