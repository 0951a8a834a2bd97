"""Bit-exact codecs of the descriptors the tensor cores read: the SM90 WGMMA shared-memory
matrix descriptor (:mod:`.wgmma`) and the validated model of a TMA tensor map (:mod:`.tma`)."""

from __future__ import annotations

from .wgmma import (
    FIELDS,
    RESERVED_MASK,
    SM90_LAYOUT_TYPE,
    DescriptorError,
    DescriptorField,
    GmmaDescriptor,
    SmemDescView,
    canonical_gmma_layout,
    check_desc_matches,
    decode,
    decode_fields,
    make_gmma_desc,
)

__all__ = [
    "FIELDS",
    "RESERVED_MASK",
    "SM90_LAYOUT_TYPE",
    "DescriptorError",
    "DescriptorField",
    "GmmaDescriptor",
    "SmemDescView",
    "canonical_gmma_layout",
    "check_desc_matches",
    "decode",
    "decode_fields",
    "make_gmma_desc",
]
