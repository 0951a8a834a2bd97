"""SM70 (Volta) register MMA: mma.sync.m8n8k4 with f16 inputs, every operand-major pair.

The specification gives SM70/SM75 no dedicated cute_nvgpu mnemonic (they lower through the
NVVM intrinsic path); nvatom names these forms ``sm70.mma.*``.  A warp executing m8n8k4
computes four independent 8x8x4 products, one per quad-pair.  ptxas: .version 6.4, sm_70; an
f32 C needs an f32 D (``.dtype must be '.f32' when .ctype is '.f32'``).
"""

from __future__ import annotations

import itertools

from nvatom.arch import Tier
from nvatom.atoms.mma import MmaForm
from nvatom.dtypes import dtype

F16, F32 = dtype("f16"), dtype("f32")

# (D, C) pairs ptxas accepts for m8n8k4.
_ACCUMULATORS = ((F16, F16), (F32, F16), (F32, F32))

FORMS: tuple[MmaForm, ...] = tuple(
    MmaForm("sm70.mma", Tier.SM70, 8, 8, 4, d, F16, F16, c, (6, 4), "mma.m8n8k4",
            alayout=al, blayout=bl)
    for (al, bl), (d, c) in itertools.product(
        itertools.product(("row", "col"), repeat=2), _ACCUMULATORS)
)
