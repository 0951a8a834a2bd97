"""The tcgen05.mma shape table: legal M and N per kind, CTA group, sparsity and ``.ws``.

PTX ISA 9.7.16.2.1 "Matrix Shape", Table 39 "Various combinations of .kind and shapes" (Table 42
in 9.7.17.2.1 of later ISA versions).  One table read by the SM100 atoms
(:mod:`nvatom.atoms.sm100`: ``legal_m``/``legal_n``, the atom roster) and by the instruction
descriptor's M x N rule (:mod:`nvatom.descriptors.idesc_rules`), so it sits below both.
"""

from __future__ import annotations

__all__ = ["SHAPES"]

_N8 = tuple(range(8, 257, 8))  # N = 8, 16, ... 256 (steps of 8)
_N16 = tuple(range(16, 257, 16))  # N = 16, 32, ... 256 (steps of 16)
_N32 = tuple(range(32, 257, 32))  # N = 32, 64, ... 256 (steps of 32)
_N_I8 = (8, 16, 24, 32, *range(48, 257, 16))  # "8, 16, 24, 32, 48, ... steps of 16 after N > 32"
_N_WS = (64, 128, 256)
_N_WS_SP = (64, 128)

#: PTX ISA 9.7.16.2.1 "Matrix Shape", Table 39 "Various combinations of .kind and shapes"
#: (Table 42 in 9.7.17.2.1 of later ISA versions; same rows), one entry per
#: (kind, cta_group, sparse, ws) -> (legal M, legal N).  K is the kind's dense K, doubled when
#: sparse.  Absent keys are the table's "Invalid" rows (.ws with cta_group::2; .ws of the
#: block-scaled kinds).  Not expressed here: the table's extra ``256xNxK1`` (K1 = 96) dense
#: cta_group::2 shape of kind::mxf4 / mxf4nvf4, selected by the block-scaled idesc's K-size
#: bit 31 (nvatom.descriptors.umma ``k_size``); an atom's K is one value per kind
#: (nvatom.atoms.sm100.KINDS).
SHAPES: dict[tuple[str, int, bool, bool], tuple[tuple[int, ...], tuple[int, ...]]] = {}
for _kind in ("f16", "tf32", "f8f6f4", "i8"):
    for _sp in (False, True):
        SHAPES[(_kind, 1, _sp, False)] = ((64, 128), _N_I8 if _kind == "i8" else _N8)
        SHAPES[(_kind, 2, _sp, False)] = ((128, 256), _N32 if _kind == "i8" else _N16)
        SHAPES[(_kind, 1, _sp, True)] = ((32, 64, 128), _N_WS_SP if _sp else _N_WS)
for _kind in ("mxf8f6f4", "mxf4", "mxf4nvf4"):
    for _sp in (False, True):
        SHAPES[(_kind, 1, _sp, False)] = ((128,), _N8)
        # cta_group::2: dense 128xNxK and 256xNxK; sparse 256xNxK only
        SHAPES[(_kind, 2, _sp, False)] = ((256,) if _sp else (128, 256), _N16)
del _kind, _sp
