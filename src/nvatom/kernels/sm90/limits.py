"""The limits of sm_90 that the SM90 kernels are built against: dynamic shared memory per
block and registers per SM (CUDA C++ Programming Guide, "Compute Capabilities"), the
``.maxnreg`` a warp-specialised kernel enters with so that ``setmaxnreg`` can move registers
between its warpgroups (PTX ISA "setmaxnreg"), and the 128-byte swizzle of every shared-memory
tile and TMA box."""

from __future__ import annotations

from nvatom.atoms.smem import smem_swizzle

__all__ = ["ENTRY_REGS", "MAX_SMEM", "REGS", "SW128"]

SW128 = smem_swizzle("SW128")
MAX_SMEM = 232448  # sm_90: 227 KB of dynamic shared memory per block
REGS = 65536  # registers per SM
ENTRY_REGS = 168  # .maxnreg at entry (65536 / 384, rounded down to 8): setmaxnreg needs a cap
