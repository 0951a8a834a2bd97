"""SM80 (Ampere) register MMA: dense ``sm80.mma`` and structured-sparse ``sm80.sparse_mma``.

Dense: f16 (f16 or f32 accumulation; m16n8k16, and m16n8k8 -- the SM75 instruction, which
the spec's synthesizer lists "at SM80 and above"), bf16 and tf32 (f32), f64 m8n8k4, s8/u8 and
s4/u4 in every signedness pair with optional ``.satfinite``, b1 with ``.xor.popc`` / ``.and.popc``
(``.and`` needs PTX 7.1), and the f64 m16n8k{4,8,16} shapes that ptxas gates to sm_90.
Sparse: ``mma.sp`` (7.1) and ``mma.sp::ordered_metadata`` (8.5), A compressed 2:4 (1:2 for
tf32), a ``.b32`` metadata register and a sparsity-selector immediate whose legal range
ptxas enforces per shape: the specification's 0-3 for m16n8k32 f16/bf16 is 0-1 (ptxas 13.0:
"value '2' out of range, expected to be in range [0..1]" for f16.f16 and bf16; it lets
f32.f16.f16.f32 through up to 3, but the PTX ISA defines 0-1 there too).
"""

from __future__ import annotations

import itertools

from nvatom.arch import Tier
from nvatom.atoms.mma import MmaForm, SparseMmaForm
from nvatom.dtypes import dtype

F16, BF16, TF32, F32, F64 = (dtype(n) for n in ("f16", "bf16", "tf32", "f32", "f64"))
S32, B1 = dtype("s32"), dtype("b1")
INT8 = (dtype("s8"), dtype("u8"))
INT4 = (dtype("s4"), dtype("u4"))
_F16_ACC = ((F16, F16), (F32, F32))
_SAT = (False, True)


def _dense(m, n, k, d, a, b, c, ptx=(7, 0), feat="mma.sm80", **kw) -> MmaForm:  # type: ignore[no-untyped-def]
    return MmaForm("sm80.mma", Tier.SM80, m, n, k, d, a, b, c, ptx, feat, **kw)


DENSE: tuple[MmaForm, ...] = (
    *(_dense(16, 8, 16, d, F16, F16, c) for d, c in _F16_ACC),
    # The SM75 m16n8k8 f16 instruction is an sm80.mma atom too: the spec's synthesizer arm 6
    # applies "at SM80 and above" (same PTX as sm75.mma.m16n8k8.*; sm_80 needs .version 7.0).
    *(_dense(16, 8, 8, d, F16, F16, c) for d, c in _F16_ACC),
    *(_dense(16, 8, k, F32, BF16, BF16, F32) for k in (8, 16)),
    *(_dense(16, 8, k, F32, TF32, TF32, F32) for k in (4, 8)),
    _dense(8, 8, 4, F64, F64, F64, F64),
    *(_dense(16, 8, k, F64, F64, F64, F64, (7, 8), "mma.f64.m16n8") for k in (4, 8, 16)),
    *(_dense(16, 8, k, S32, a, b, S32, satfinite=sat)
      for (k, types), sat in itertools.product(
          ((16, INT8), (32, INT8), (32, INT4), (64, INT4)), _SAT)
      for a, b in itertools.product(types, repeat=2)),
    *(_dense(m, 8, k, S32, B1, B1, S32, (7, 0) if bop == "xor.popc" else (7, 1), bop=bop)
      for (m, k), bop in itertools.product(((8, 128), (16, 128), (16, 256)),
                                           ("xor.popc", "and.popc"))
      if (m, bop) != (8, "xor.popc")),  # m8n8k128.xor.popc is the SM75 form
)

# (k, types, accumulators, selector range) of every sparse shape; A is M x K/2 compressed.
_SPARSE_SHAPES = (
    (16, (F16,), _F16_ACC, 4), (32, (F16,), _F16_ACC, 2),
    (16, (BF16,), ((F32, F32),), 4), (32, (BF16,), ((F32, F32),), 2),
    (8, (TF32,), ((F32, F32),), 4), (16, (TF32,), ((F32, F32),), 2),
    (32, INT8, ((S32, S32),), 2), (64, INT8, ((S32, S32),), 1),
    (64, INT4, ((S32, S32),), 2), (128, INT4, ((S32, S32),), 1),
)


def _sparse() -> list[MmaForm]:
    forms = []
    for k, types, accs, nsel in _SPARSE_SHAPES:
        integer = types[0].name in ("s8", "u8", "s4", "u4")
        for variant, ptx in (("sp", (7, 1)), ("sp::ordered_metadata", (8, 5))):
            for (d, c), (a, b), sat in itertools.product(
                accs, itertools.product(types, repeat=2), _SAT if integer else (False,)
            ):
                forms.append(SparseMmaForm("sm80.sparse_mma", Tier.SM80, 16, 8, k, d, a, b, c, ptx,
                                     "mma.sp", satfinite=sat, sparse=variant,
                                     selectors=tuple(range(nsel))))
    return forms


SPARSE: tuple[MmaForm, ...] = tuple(_sparse())
FORMS: tuple[MmaForm, ...] = DENSE + SPARSE
