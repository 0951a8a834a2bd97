"""Runtime: ptxas discovery and assembly (later: cubin loading, launch, torch interop)."""
