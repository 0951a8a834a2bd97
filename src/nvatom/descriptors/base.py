"""The interface every descriptor object implements: :class:`DescriptorType`.

The specification's registry model (docs/spec-deviations.md#atom-registry) has four *primary*
interfaces (MMA atom, copy atom, prefetch atom,
descriptor type).  The descriptor type lives here, with the descriptors that implement it, so
that ``nvatom.descriptors`` needs nothing of ``nvatom.atoms``;
:mod:`nvatom.atoms.interfaces` lists it with the other interfaces (and re-exports it).
"""

from __future__ import annotations

__all__ = ["DescriptorType"]


class DescriptorType:  # a marker: no methods of its own
    """Carries hardware descriptor state: SMEM descriptor views
    (:class:`nvatom.descriptors.wgmma.SmemDescView`) and TMA descriptors
    (:class:`nvatom.descriptors.tma.TensorMap`)."""
