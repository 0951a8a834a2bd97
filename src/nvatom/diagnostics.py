"""Every user-visible diagnostic of the specification, in one catalogue.

The strings are the specification's textual contract (its MMA verifier ladders, copy-atom
contracts and TMA partition verifier, quoted in docs/spec-deviations.md, section "The
specification's contracts that nvatom keeps") and are kept byte for byte; ``{0}``-style
slots are filled with ``str.format``.  Where the specification gives only a prefix ("... but
got A: ") the printed values follow it, as the specification describes.  Tests match these
texts, and each has a negative test.
"""

from __future__ import annotations

# -- interface dispatch (verify_atom_instance; spec-deviations.md#atom-registry)
NO_KNOWN_INTERFACE = "atom type does not implement a known cute_nvgpu interface"

# -- non-UMMA shared verifier (SM70/75/80/89; spec-deviations.md#mma-verifier-ladders)
ALL_OPERANDS_ELEMENT_TYPE = "expects all mma operands to have element type"
RMEM_INPUTS = "expects rmem for input operands, but got A: "
OPERAND_ELEMENT_TYPE = "expects operand {0} with element type {1}, but get {2}."
MMA_ATOM_LAYOUT = "expects Mma atom layout of "
STATIC_LAYOUT = "expects static and no scaled basis layout for"

# -- composed-layout rejection and rank checks of the tiled builders (#mma-verifier-ladders)
COMPOSED_LAYOUT = "doesn't support composed layout for "
COMPOSED_LAYOUT_ABD = "A/B/D, but got: A: {0}, B: {1}, D:{2}"
SAME_RANK_AB = "expects A, B to have the same rank, but got A: "
SAME_RANK_CD = "expects C, D to have the same rank, but got C: "
C_RANK_1_OR_2 = "expects C to have rank 1 or 2, but got C: "
C_RANK_2_OR_3 = "expects C to have rank 2 or 3, but got C: "
C_RANK_3 = "expects C to have rank 3, but got C: "

# -- copy atoms (spec-deviations.md#copy-atom-contracts); {0}: atom, {1}: elements
VECTORIZE_STRIDES_ONE = "'{0}' cannot vectorize copy to {1} elements (static strides must be 1)"
VECTORIZE_STRIDES_MATCH = (
    "'{0}' cannot vectorize copy to {1} elements (static strides must match)"
)
# -- a swizzled smem operand whose swizzle permutes units smaller than one access (an ldmatrix
# row, a vector): the specification's template, then why ({2}: the swizzle, {3} elements of
# {4} bits in a unit, {5} bytes an access)
SWIZZLE_TOO_FINE = (
    "'{0}' cannot vectorize copy to {1} elements (static strides must be 1): the swizzle {2} "
    "permutes units of {3} {4}-bit element(s), less than the {5}-byte access"
)
# -- copy atoms, our wording (the specification has no string for these)
VECTOR_WIDTH = "'{0}' cannot vectorize copy to {1} elements ({2} bits): legal widths are {3}"
COPY_TIER = "atom '{0}' needs tier {1}, but target {2} is tier {3}"
COPY_FEATURE = "atom '{0}' is not available on {1}: it needs {2} ({3})"
COPY_RESIDENCY = "'{0}' copies {1} -> {2}, but got src: {3}, dst: {4}"
COPY_ELEMENT_WIDTH = "'{0}' moves {1}, but got {2} ({3} bits)"
COPY_ELEMENT_MISMATCH = "'{0}' copies one element type, but got src: {1}, dst: {2}"
COPY_LAYOUT = "'{0}' expects {1} layout {2}, but got {3}"

# -- UMMA family (SM100 tcgen05; #mma-verifier-ladders, #block-scale-packed-value)
UMMA_RESIDENCY_A = "expects memref/smem_desc_view for operand A, but gets A:{0}."
UMMA_RESIDENCY_B = "expects smem_desc_view for operand B, but gets B: {0}."
UMMA_RESIDENCY_D = "expects memref for operand D, but gets D: {0}."
UMMA_INVALID_LAYOUT = "invalid layout of A/B/D. A: {0}, B: {1}, D:{2}"
UMMA_NOT_A_GEMM = "layoutA, layoutB and layoutD fail to form a gemm. A: {0}, B: {1}, D: {2}"
UMMA_BS_C_F32 = "expects c type to be Float32"
UMMA_BS_SF_SAME = "expects sfa/sfb element types to be the same"

# -- SM90 WGMMA operand-type pairs (#mma-verifier-ladders); the s4/u4 one always fires (no
#    4-bit WGMMA)
WGMMA_INT8_TYPES = "expects A/B of type s8/u8 and D of type i32"
WGMMA_INT4_TYPES = "expects A/B of type s4/u4 and D of type i32"
WGMMA_B1_TYPES = "expects A/B of type u1 and D of type i32"
WGMMA_FP8_TYPES = "expects A/B of the e5m2/e4m3 type"

# -- TMA partition verifier (spec-deviations.md#tma-partition-verifier, eleven steps, in order)
#    and its companion string
TMA_INVALID_OPERAND_TYPES = "invalid operand types, got "
TMA_INVALID_SMEM_LAYOUT_TYPE = (
    "invalid smem layout type, expected LayoutType or ComposedLayoutType, got "
)
TMA_UNSUPPORTED_GMEM_LAYOUT = "unsupported layout for the GMEM tensor, got "
TMA_INTEGER_STRIDES = (
    "expected the GMEM and SMEM layouts to have integer stride elements, but got "
)
TMA_SMEM_SWIZZLE = "expected the SMEM layout to be a swizzle layout, but got "
TMA_STATIC_SMEM_VMAP = "expected the SMEM layout and the CTA V-map to be static, but got "
TMA_SHAPE_EQUIVALENCE = (
    "expected top-level shape equivalence between the SMEM layout and the CTA V-map, but got "
)
TMA_G_BASIS = "failed to compute the TMA G-basis, got "
TMA_INVALID_TMA_LAYOUT = "Computed TMA layout is invalid, got "
TMA_TENSOR_TYPE = "Failed to construct the TMA tensor type"
TMA_MISSING_NUM_MULTICAST = "missing or invalid num_multicast for a multicast TMA load"
TMA_NUM_MULTICAST_OF = "got num_multicast of "
# -- TMA descriptor mutation (spec-deviations.md#tma-descriptor-mutation; the field follows ": ")
TMA_FIELD_NOT_MUTABLE = "TMA descriptor field is not device-mutable"
# -- TMA reduce element types (our wording; PTX ISA "cp.reduce.async.bulk.tensor")
TMA_REDUCE_TYPE = "TMA reduction '{0}' is not defined on {1} elements (legal: {2})"

# -- SM120/SM121 block-scaled mma.sync (SM120.mma_bs), our wording: the specification gives
#    the contract (verify_sm120_block_scaled, #mma-verifier-ladders) but no strings
SM120_NO_FAMILY = "SM120.mma_bs has no form with {0}; legal families: {1}"
SM120_SELECTOR = "SM120.mma_bs: {0} = {1} is out of range for {2} (legal: {3})"
SM120_TARGET = "atom '{0}' is not available on {1}: SM120 block-scaled mma.sync needs {2}"
SM120_NO_TCGEN05 = (
    "SM120.mma_bs has no {0}: A, B, D and both scale factors live in registers "
    "(no tensor memory, cta group, collector, weight-stationary mode or scale-input accumulator)"
)
SM120_SCALE_OPERANDS = (
    "SM120.mma_bs expects two register scale-factor operands of type {0}, but got "
    "scale_a: {1}, scale_b: {2}"
)
