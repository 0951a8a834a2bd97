"""Bit-exact codecs of the descriptors the tensor cores read: today the SM90 WGMMA
shared-memory matrix descriptor (:mod:`.wgmma`)."""

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
