"""SM89 (Ada) register MMA: FP8 inputs (``sm89.mma``) and sparse FP8 (``sm89.sparse_mma``).

All four e4m3/e5m2 pairs.  m16n8k32 with f32 accumulation needs PTX 8.4; f16 accumulation
and the m16n8k16 shape need 8.7 (docs/spec-deviations.md "Register MMA": the spec's "no f16
accumulator, K = 32
only" is wrong).  Sparse m16n8k64 takes f32 accumulation only on sm_89 and a selector of 0.
"""

from __future__ import annotations

import itertools

from nvatom.arch import Tier
from nvatom.atoms.mma import MmaForm, SparseMmaForm
from nvatom.dtypes import dtype

F16, F32 = dtype("f16"), dtype("f32")
FP8 = (dtype("e4m3"), dtype("e5m2"))
_PAIRS = tuple(itertools.product(FP8, repeat=2))

DENSE: tuple[MmaForm, ...] = tuple(
    MmaForm("sm89.mma", Tier.SM89, 16, 8, k, acc, a, b, acc,
            (8, 4) if (k, acc) == (32, F32) else (8, 7), "mma.fp8")
    for k, acc, (a, b) in itertools.product((32, 16), (F32, F16), _PAIRS)
)

SPARSE: tuple[MmaForm, ...] = tuple(
    SparseMmaForm("sm89.sparse_mma", Tier.SM89, 16, 8, 64, F32, a, b, F32, ptx, "mma.fp8",
            sparse=variant, selectors=(0,))
    for (variant, ptx), (a, b) in itertools.product(
        (("sp", (8, 4)), ("sp::ordered_metadata", (8, 5))), _PAIRS)
)

FORMS: tuple[MmaForm, ...] = DENSE + SPARSE
