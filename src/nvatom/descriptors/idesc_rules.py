"""Which 32-bit tcgen05 instruction descriptors (idesc) are valid: the PTX ISA's tables as data,
and one predicate, :func:`idesc_problems`, that ``InstrDescriptor`` (encode), ``decode_idesc``
and ``UmmaAtom.idesc`` all go through (:mod:`nvatom.descriptors.umma`).

Sources (PTX ISA 9.7.16, "TensorCore 5th Generation Family Instructions"):

* 9.7.16.4.2 "Instruction descriptor": Table 42 (``.kind::tf32``, ``f16``, ``f8f6f4``,
  ``i8``), Table 43 (``.kind::mxf8f6f4``), Table 44 (``.kind::mxf4``, ``mxf4nvf4``).  Each
  kind's table gives its field layout (:data:`IDESC_TABLES`) and the values each field may hold
  (:data:`IDESC_VALUES`); every bit a kind's table does not assign is reserved and must be 0.
  The block-scaled tables differ from the plain one (and from CUTLASS's
  ``InstrDescriptorBlockScaled``, which keeps the plain layout): bits 0-1, 3, 6 and 24-26 are
  reserved, M is ``M >> 7`` in bits 27-28 (so only M = 128 and 256 are expressible), the B
  format of mxf4/mxf4nvf4 is two bits (10-11; bit 12 reserved) and bit 31 is the K size of
  mxf4/mxf4nvf4 but reserved for mxf8f6f4.
* 9.7.16.2.1 "Matrix Shape", Table 39: the (M, N) of each kind (read from
  :data:`nvatom.tables.umma_shapes.SHAPES`, the one shape table), for any CTA group and with or
  without ``.ws``, which the idesc does not encode; its sparsity bit does select the sparse
  rows.  The extra dense ``256xNx96`` shape of mxf4/mxf4nvf4 is the idesc's K-size bit.
  Table 39 also pairs the types of ``.kind::f16``: D f16 takes f16 A/B only (bf16
  accumulates in f32), and each row names one A/B type (f16 x f16 or bf16 x bf16).
* 9.7.16.10.8.4 "Sparsity selector": it must be 0 for ``.kind::i8`` and ``.kind::f8f6f4``.
  Table 42 gives the selector "if Sparsity is enabled"; a dense idesc with a selector is
  refused (our reading).

Not idesc rules, so not here: what the *instruction* adds (cta_group, ``.ws``, the scale-vector
qualifier that fixes the scale-factor id of mxf4nvf4 ``scale_vec::4X`` to 0) and what the shared
memory layout must satisfy (the 8-bit transpose-B N rule of Table 50; checked by the atoms).
"""

from __future__ import annotations

import functools

from nvatom.descriptors.wgmma import DescriptorField
from nvatom.tables.umma_shapes import SHAPES

__all__ = [
    "BS_KINDS",
    "D_FORMAT",
    "FORMAT_CODES",
    "IDESC_BS_FIELDS",
    "IDESC_FIELDS",
    "IDESC_MXF4_FIELDS",
    "IDESC_TABLES",
    "IDESC_VALUES",
    "MAX_SHIFT",
    "SCALE_FORMAT",
    "idesc_mn",
    "idesc_problems",
    "reserved_mask",
]

_M32 = (1 << 32) - 1


def _table(*fields: DescriptorField) -> tuple[DescriptorField, ...]:
    return tuple(sorted(fields, key=lambda f: f.lsb))


_OPERANDS = (  # bits 7-16 and N: the same place in every table
    DescriptorField("a_format", 7, 3),
    DescriptorField("a_negate", 13, 1),
    DescriptorField("b_negate", 14, 1),
    DescriptorField("a_major", 15, 1),
    DescriptorField("b_major", 16, 1),
    DescriptorField("n", 17, 6, 3),
)
#: Table 42 (.kind::tf32, f16, f8f6f4, i8); the same fields as CUTLASS UMMA::InstrDescriptor.
IDESC_FIELDS = _table(
    *_OPERANDS,
    DescriptorField("sparse_id2", 0, 2),
    DescriptorField("sparse", 2, 1),
    DescriptorField("saturate", 3, 1),
    DescriptorField("d_format", 4, 2),
    DescriptorField("b_format", 10, 3),
    DescriptorField("m", 24, 5, 4),
    DescriptorField("max_shift", 30, 2),
)
_BS = (
    DescriptorField("sparse", 2, 1),
    DescriptorField("b_sf_id", 4, 2),
    DescriptorField("scale_format", 23, 1),
    DescriptorField("m", 27, 2, 7),
    DescriptorField("a_sf_id", 29, 2),
)
#: Table 43 (.kind::mxf8f6f4).
IDESC_BS_FIELDS = _table(*_OPERANDS, *_BS, DescriptorField("b_format", 10, 3))
#: Table 44 (.kind::mxf4, mxf4nvf4): a two-bit B format and the K size in bit 31.
IDESC_MXF4_FIELDS = _table(*_OPERANDS, *_BS, DescriptorField("b_format", 10, 2),
                           DescriptorField("k_size", 31, 1))

BS_KINDS = ("mxf8f6f4", "mxf4", "mxf4nvf4")
#: The field layout of each kind.
IDESC_TABLES: dict[str, tuple[DescriptorField, ...]] = {
    "tf32": IDESC_FIELDS, "f16": IDESC_FIELDS, "f8f6f4": IDESC_FIELDS, "i8": IDESC_FIELDS,
    "mxf8f6f4": IDESC_BS_FIELDS, "mxf4": IDESC_MXF4_FIELDS, "mxf4nvf4": IDESC_MXF4_FIELDS,
}

_E = {"e4m3": 0, "e5m2": 1, "e2m3": 3, "e3m2": 4, "e2m1": 5}
#: A/B format codes by kind (the atype/btype rows of Tables 42-44).
FORMAT_CODES: dict[str, dict[str, int]] = {
    "f16": {"f16": 0, "bf16": 1},
    "tf32": {"tf32": 2},
    "f8f6f4": _E,
    "i8": {"u8": 0, "s8": 1},
    "mxf8f6f4": _E,
    "mxf4": {"e2m1": 1},
    "mxf4nvf4": {"e2m1": 1},
}
#: D format codes (Table 42 dtype row); which kind takes which is in :data:`IDESC_VALUES`.
D_FORMAT = {"f16": 0, "f32": 1, "s32": 2}
#: Scale format codes (Tables 43/44 bit 23).
SCALE_FORMAT = {"ue4m3": 0, "ue8m0": 1}
#: Maximum shift of ``.ws`` -> code (Table 42 bits 30-31).
MAX_SHIFT = {0: 0, 8: 1, 16: 2, 32: 3}


def _fmt(kind: str) -> frozenset[int]:
    return frozenset(FORMAT_CODES[kind].values())


_NO = frozenset({0})
#: The values the tables list for each restricted field, by kind (raw codes; a field of the
#: kind's table that is absent here takes every value of its width, e.g. majors of f16).
IDESC_VALUES: dict[str, dict[str, frozenset[int]]] = {
    "tf32": {"saturate": _NO, "d_format": frozenset({1})},
    "f16": {"saturate": _NO, "d_format": frozenset({0, 1})},
    "f8f6f4": {"saturate": _NO, "d_format": frozenset({0, 1})},
    "i8": {"d_format": frozenset({2}), "a_negate": _NO, "b_negate": _NO},
    "mxf8f6f4": {"scale_format": frozenset({1})},
    "mxf4": {"scale_format": frozenset({1}), "a_major": _NO, "b_major": _NO,
             "a_sf_id": frozenset({0, 2}), "b_sf_id": frozenset({0, 2})},
    "mxf4nvf4": {"scale_format": frozenset({0, 1}), "a_major": _NO, "b_major": _NO,
                 "a_sf_id": frozenset({0, 2}), "b_sf_id": frozenset({0, 2})},
}
for _k, _v in IDESC_VALUES.items():
    _v.update(a_format=_fmt(_k), b_format=_fmt(_k))
del _k, _v

#: Kinds whose sparsity selector must be 0 (9.7.16.10.8.4).
_SELECTOR_ZERO = ("i8", "f8f6f4")
#: Kinds with the extra dense 256 x N x 96 shape chosen by the K-size bit (Table 39).
_K96_KINDS = ("mxf4", "mxf4nvf4")

_NAMES: dict[str, dict[int, str]] = {
    "d_format": {v: k for k, v in D_FORMAT.items()},
    "scale_format": {v: k for k, v in SCALE_FORMAT.items()},
}


def reserved_mask(kind: str) -> int:
    """The bits of ``kind``'s idesc that its table does not assign (they must be 0)."""
    return _M32 & ~sum(f.mask for f in IDESC_TABLES[kind])


@functools.cache
def idesc_mn(kind: str, sparse: bool, k96: bool = False) -> frozenset[tuple[int, int]]:
    """The (M, N) an idesc of ``kind`` may describe: Table 39's shapes for any CTA group and
    ``.ws`` with that sparsity (``k96``: the dense cta_group::2 ``256xNx96`` shape of
    mxf4/mxf4nvf4, idesc K size 1)."""
    if k96:
        if kind not in _K96_KINDS or sparse:
            return frozenset()
        return frozenset((256, n) for n in SHAPES[(kind, 2, False, False)][1] if 256 in
                         SHAPES[(kind, 2, False, False)][0])
    return frozenset((m, n) for (k, _cta, sp, _ws), (ms, ns) in SHAPES.items()
                     if k == kind and sp == sparse for m in ms for n in ns)


def _spell(field: str, kind: str, code: int) -> str:
    names = ({v: k for k, v in FORMAT_CODES[kind].items()} if field in ("a_format", "b_format")
             else _NAMES.get(field, {}))
    return f"{code} ({names[code]})" if code in names else str(code)


def _listed(field: str, kind: str, values: frozenset[int]) -> str:
    return ", ".join(_spell(field, kind, v) for v in sorted(values))


def idesc_problems(word: int, kind: str) -> list[str]:
    """Every reason the 32-bit ``word`` is not a valid ``kind`` idesc (empty: valid).

    ``word`` must be an int in 0..2^32-1 and ``kind`` a key of :data:`IDESC_TABLES` (the
    callers check both)."""
    table = IDESC_TABLES[kind]
    out: list[str] = []
    bad = word & reserved_mask(kind)
    if bad:
        bits = ", ".join(str(i) for i in range(32) if bad >> i & 1)
        out.append(f"reserved bit(s) {bits} set (kind::{kind})")
    raw = {f.name: (word & f.mask) >> f.lsb for f in table}
    for f in table:
        legal = IDESC_VALUES[kind].get(f.name)
        if legal is not None and raw[f.name] not in legal:
            what = "names no" if f.name in ("a_format", "b_format") else "is not a"
            out.append(f"{f.name} code {_spell(f.name, kind, raw[f.name])} in bits {f.bits} "
                       f"{what} kind::{kind} value (legal: {_listed(f.name, kind, legal)})")
    sparse = bool(raw["sparse"])
    sel = raw.get("sparse_id2", 0)
    if sel and not sparse:
        out.append(f"sparse_id2 (sparsity selector) {sel} on a dense idesc")
    elif sel and kind in _SELECTOR_ZERO:
        out.append(f"sparse_id2 (sparsity selector) {sel}: must be 0 for kind::{kind}")
    if kind == "f16":
        a, b, d = raw["a_format"], raw["b_format"], raw["d_format"]
        if a != b and {a, b} <= _fmt(kind):
            out.append(f"kind::f16 takes A and B of one type, got a_format "
                       f"{_spell('a_format', kind, a)} and b_format {_spell('b_format', kind, b)}")
        elif d == D_FORMAT["f16"] and a == FORMAT_CODES["f16"]["bf16"]:
            out.append("kind::f16 with bf16 A/B accumulates in f32 only (d_format 0, f16)")
    k96 = bool(raw.get("k_size", 0))
    m = raw["m"] << next(f.shift for f in table if f.name == "m")
    n = raw["n"] << 3
    if (m, n) not in idesc_mn(kind, sparse, k96):
        shape = f"M x N = {m} x {n}" + (" x K 96 (k_size 1)" if k96 else "")
        ms = sorted({mm for mm, _ in idesc_mn(kind, sparse, k96)})
        out.append(f"{shape} is no {'sparse ' if sparse else ''}kind::{kind} shape "
                   f"(M in {ms or 'none'}; PTX ISA Table 39)")
    return out
