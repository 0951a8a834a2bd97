"""CPU reference models of hardware behaviour, for tests that have no GPU to run on.

:mod:`.mma` models the register MMAs ``mma.sync`` / ``mma.sp`` (SM70-SM89) on per-lane
register words; :mod:`.wgmma` models ``wgmma.mma_async`` on per-thread registers and
shared-memory bytes read through decoded descriptors (docs/ref-models.md; both are compared
with the GPU by tests/gpu/test_ref_models_gpu.py).

:mod:`.tcgen05` models SM100 tensor memory, the shared-memory matrix descriptor as the tensor
core reads it, ``tcgen05.mma`` (dense, sparse, block-scaled; cta_group::1 and ::2, ``.ws``;
the ISA's data-path layouts; scale factors in TMEM), ``tcgen05.cp .32x128b.warpx4`` and
``tcgen05.ld/st``.
"""
