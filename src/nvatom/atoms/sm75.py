"""SM75 (Turing) register MMA: m16n8k8 f16 and the m8n8 integer / single-bit shapes.

No dedicated cute_nvgpu mnemonic (NVVM intrinsic path); nvatom names them ``sm75.mma.*``.
PTX ISA minimum versions measured with ptxas: 6.5, and 7.0 for m8n8k128 ``.xor.popc``.
"""

from __future__ import annotations

import itertools

from nvatom.arch import Tier
from nvatom.atoms.mma import MmaForm
from nvatom.dtypes import dtype

F16, F32, S32, B1 = dtype("f16"), dtype("f32"), dtype("s32"), dtype("b1")
INT8 = (dtype("s8"), dtype("u8"))
INT4 = (dtype("s4"), dtype("u4"))

# D and C must agree for m16n8k8 (`.dtype must be '.f16' when .ctype is '.f16'`).
_F16_ACC = ((F16, F16), (F32, F32))

FORMS: tuple[MmaForm, ...] = (
    *(MmaForm("sm75.mma", Tier.SM75, 16, 8, 8, d, F16, F16, c, (6, 5), "mma.m16n8k8")
      for d, c in _F16_ACC),
    *(MmaForm("sm75.mma", Tier.SM75, 8, 8, k, S32, a, b, S32, (6, 5), "mma.int.m8n8",
              satfinite=sat)
      for (k, types), sat in itertools.product(((16, INT8), (32, INT4)), (False, True))
      for a, b in itertools.product(types, repeat=2)),
    MmaForm("sm75.mma", Tier.SM75, 8, 8, 128, S32, B1, B1, S32, (7, 0), "mma.int.m8n8",
            bop="xor.popc"),
)
