"""Bit-exact codecs of the descriptors the tensor cores read: the SM90 WGMMA shared-memory
matrix descriptor (:mod:`.wgmma`, re-exported here), the SM100 UMMA shared-memory descriptor
and tcgen05 instruction descriptor (:mod:`.umma`, with the idesc rules in
:mod:`.idesc_rules`), and the validated model of a TMA tensor map (:mod:`.tma`) over the
128-byte ``CUtensorMap`` codec (:mod:`.tma_encode`); :mod:`.base` holds the
``DescriptorType`` interface."""

from __future__ import annotations

from . import wgmma
from .wgmma import *  # noqa: F403  (the package's names are the SM90 descriptor module's)

__all__ = list(wgmma.__all__)
