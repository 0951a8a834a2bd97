"""CPU reference models of hardware behaviour, for tests that have no GPU to run on.

:mod:`.tcgen05` models SM100 tensor memory, the shared-memory matrix descriptor as the tensor
core reads it, ``tcgen05.mma`` (dense, sparse, block-scaled; cta_group::1 and ::2, ``.ws``;
the ISA's data-path layouts; scale factors in TMEM), ``tcgen05.cp .32x128b.warpx4`` and
``tcgen05.ld/st``.
"""
