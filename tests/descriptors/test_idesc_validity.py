"""Which tcgen05 instruction descriptors nvatom accepts: exactly those the PTX ISA defines.

The golden predicate :func:`_isa_valid` is transcribed here, independently of
``nvatom.descriptors.idesc_rules`` (and of ``nvatom.atoms.sm100.SHAPES``), from the PTX ISA:

* 9.7.16.4.2 "Instruction descriptor", Table 42 (.kind::tf32/f16/f8f6f4/i8), Table 43
  (.kind::mxf8f6f4), Table 44 (.kind::mxf4/mxf4nvf4): bit ranges, the values each kind's
  column lists, and the rows marked "Reserved" (must be 0).
* 9.7.16.2.1 "Matrix Shape", Table 39: the M x N of each kind, CTA group, sparsity and .ws
  (the idesc knows only the sparsity: a word is valid if some CTA group / .ws has its shape),
  the dense 256xNxK1 (K1 = 96) shape of mxf4/mxf4nvf4 selected by Table 44's K dimension bit,
  and the kind::f16 rows that pair D f16 with f16 A/B and name one A/B type per row.
* 9.7.16.10.8.4 "Sparsity selector": must be 0 for .kind::i8 and .kind::f8f6f4.  Table 42
  gives the selector "if Sparsity is enabled": a dense word must leave it 0 (our reading).

Random words are swept through ``decode_idesc`` (accept iff the transcription accepts), and
each class of invalid word the review found is refused by ``decode_idesc``, by
``InstrDescriptor`` (encode) and by ``UmmaAtom.idesc``.
"""

from __future__ import annotations

import random
from collections import Counter

import pytest

from nvatom.atoms.sm100 import make_umma_atom
from nvatom.descriptors.umma import InstrDescriptor, decode_idesc
from nvatom.errors import DescriptorError

# ============================================================================ the ISA, transcribed

_COMMON = {"atype": (7, 9), "nega": (13, 13), "negb": (14, 14), "ta": (15, 15),
           "tb": (16, 16), "n": (17, 22)}
# Table 42: bits (lo, hi); bits 6, 23 and 29 are Reserved.
_T42 = {**_COMMON, "sel": (0, 1), "sparse": (2, 2), "sat": (3, 3), "dtype": (4, 5),
        "btype": (10, 12), "m": (24, 28), "shift": (30, 31)}
# Table 43: bits 0-1, 3, 6, 24-26 and 31 are Reserved; M is M >> 7 in 27-28.
_T43 = {**_COMMON, "sparse": (2, 2), "sfb": (4, 5), "btype": (10, 12), "scale": (23, 23),
        "m": (27, 28), "sfa": (29, 30)}
# Table 44: as 43, but btype is 10-11 (12 Reserved) and bit 31 is the K dimension.
_T44 = {**_COMMON, "sparse": (2, 2), "sfb": (4, 5), "btype": (10, 11), "scale": (23, 23),
        "m": (27, 28), "sfa": (29, 30), "k": (31, 31)}
_LAYOUT = {"tf32": _T42, "f16": _T42, "f8f6f4": _T42, "i8": _T42, "mxf8f6f4": _T43,
           "mxf4": _T44, "mxf4nvf4": _T44}
_M_SHIFT = {"tf32": 4, "f16": 4, "f8f6f4": 4, "i8": 4, "mxf8f6f4": 7, "mxf4": 7,
            "mxf4nvf4": 7}

_F8 = {0, 1, 3, 4, 5}  # E4M3 0, E5M2 1, E2M3 3, E3M2 4, E2M1 5
# The "Values" column of each kind (fields not listed take any value of their width).
_VALUES: dict[str, dict[str, set[int]]] = {
    "tf32": {"sat": {0}, "dtype": {1}, "atype": {2}, "btype": {2}},
    "f16": {"sat": {0}, "dtype": {0, 1}, "atype": {0, 1}, "btype": {0, 1}},
    "f8f6f4": {"sat": {0}, "dtype": {0, 1}, "atype": _F8, "btype": _F8},
    "i8": {"dtype": {2}, "atype": {0, 1}, "btype": {0, 1}, "nega": {0}, "negb": {0}},
    "mxf8f6f4": {"atype": _F8, "btype": _F8, "scale": {1}},
    "mxf4": {"atype": {1}, "btype": {1}, "ta": {0}, "tb": {0}, "scale": {1},
             "sfa": {0, 2}, "sfb": {0, 2}},
    "mxf4nvf4": {"atype": {1}, "btype": {1}, "ta": {0}, "tb": {0}, "scale": {0, 1},
                 "sfa": {0, 2}, "sfb": {0, 2}},
}

# Table 39, row by row.
_N8 = set(range(8, 257, 8))  # {8, 16, 24, ... 256} steps of 8
_N16 = set(range(16, 257, 16))  # {16, 32, ... 256} steps of 16
_N32 = set(range(32, 257, 32))  # {32, 64, ... 256} steps of 32
_N_I8 = {8, 16, 24, 32} | set(range(48, 257, 16))  # "8, 16, 24, 32, 48, ... 256" (16 after 32)
_WS, _WS_SP = {64, 128, 256}, {64, 128}


def _rows(kind: str, sparse: bool) -> list[tuple[set[int], set[int]]]:
    """(M values, N values) of every Table 39 row of ``kind`` with this sparsity."""
    if kind in ("f16", "tf32", "f8f6f4", "i8"):
        i8 = kind == "i8"
        return [({64, 128}, _N_I8 if i8 else _N8),  # cta_group::1
                ({128, 256}, _N32 if i8 else _N16),  # cta_group::2
                ({32, 64, 128}, _WS_SP if sparse else _WS)]  # .ws (cta_group::1)
    return [({128}, _N8), ({256} if sparse else {128, 256}, _N16)]


def _field(word: int, bits: tuple[int, int]) -> int:
    lo, hi = bits
    return word >> lo & ((1 << (hi - lo + 1)) - 1)


def _isa_valid(word: int, kind: str) -> bool:
    layout = _LAYOUT[kind]
    used = 0
    for lo, hi in layout.values():
        used |= ((1 << (hi - lo + 1)) - 1) << lo
    if word & ~used & 0xFFFFFFFF:
        return False  # a Reserved bit
    f = {name: _field(word, bits) for name, bits in layout.items()}
    for name, legal in _VALUES[kind].items():
        if f[name] not in legal:
            return False
    sparse = f["sparse"] == 1
    if f.get("sel", 0) and (not sparse or kind in ("i8", "f8f6f4")):
        return False
    if kind == "f16" and (f["atype"] != f["btype"] or (f["dtype"] == 0 and f["atype"] != 0)):
        return False
    m, n = f["m"] << _M_SHIFT[kind], f["n"] << 3
    if f.get("k", 0):  # K = 96: dense cta_group::2 256 x N x 96 of mxf4/mxf4nvf4
        return not sparse and m == 256 and n in _N16
    return any(m in ms and n in ns for ms, ns in _rows(kind, sparse))


# ============================================================================ the sweep


def _accepts(word: int, kind: str) -> bool:
    try:
        d = decode_idesc(word, kind)
    except DescriptorError:
        return False
    assert d.encode() == word, (hex(word), kind, d.explain())  # decode/encode round trip
    return True


def _random_word(rng: random.Random, kind: str) -> int:
    """Fields mostly from the legal values and shapes, sometimes anything; reserved bits
    rarely set: about half the words are valid."""
    layout = _LAYOUT[kind]
    w = 0
    for name, (lo, hi) in layout.items():
        width = hi - lo + 1
        legal = _VALUES[kind].get(name)
        if name in ("m", "n"):
            continue
        if legal is not None and rng.random() < 0.9:
            v = rng.choice(sorted(legal))
        elif name in ("sel", "shift", "sfa", "sfb", "k") and rng.random() < 0.6:
            v = 0 if rng.random() < 0.5 else rng.randrange(1 << width)
        else:
            v = rng.randrange(1 << width)
        w |= v << lo
    rows = _rows(kind, bool(_field(w, layout["sparse"])))
    ms, ns = rng.choice(rows)
    if rng.random() < 0.85:
        m, n = rng.choice(sorted(ms)), rng.choice(sorted(ns))
    else:
        m, n = rng.randrange(32) << 4, rng.randrange(64) << 3
    w |= (m >> _M_SHIFT[kind] & ((1 << (layout["m"][1] - layout["m"][0] + 1)) - 1)) \
        << layout["m"][0]
    w |= (n >> 3) << 17
    if kind == "f16" and rng.random() < 0.5:  # make A == B often (else half are refused)
        w = (w & ~(7 << 10)) | (_field(w, (7, 9)) << 10)
    if rng.random() < 0.04:
        w ^= 1 << rng.randrange(32)
    return w & 0xFFFFFFFF


def test_random_words_accepted_iff_the_isa_tables_accept() -> None:
    rng = random.Random(14)
    tally: Counter[tuple[str, bool]] = Counter()
    kinds = list(_LAYOUT)
    for i in range(20000):
        kind = kinds[i % len(kinds)]
        w = _random_word(rng, kind) if i % 10 else rng.getrandbits(32)
        want = _isa_valid(w, kind)
        assert _accepts(w, kind) == want, (f"{w:#010x}", kind, want)
        tally[(kind, want)] += 1
    for kind in kinds:  # the sweep saw both sides of every kind
        assert tally[(kind, True)] > 300 and tally[(kind, False)] > 300, tally


def test_every_single_bit_flip_of_valid_words() -> None:
    """Each bit of a few valid words of each kind, flipped: accept iff the ISA accepts."""
    words = {
        "f16": 1 << 4 | 16 << 17 | 8 << 24,  # f16 x f16 -> f32, 128 x 128
        "tf32": 1 << 4 | 2 << 7 | 2 << 10 | 1 << 2 | 3 << 0 | 8 << 17 | 4 << 24,  # sparse, sel 3
        "f8f6f4": 0 << 4 | 5 << 7 | 3 << 10 | 1 << 15 | 2 << 17 | 16 << 24,
        "i8": 2 << 4 | 1 << 3 | 1 << 7 | 3 << 17 | 4 << 24 | 3 << 30,  # N 24, saturate
        "mxf8f6f4": 4 << 7 | 1 << 10 | 3 << 4 | 1 << 23 | 32 << 17 | 1 << 27 | 1 << 29,
        "mxf4": 1 << 7 | 1 << 10 | 2 << 4 | 1 << 23 | 8 << 17 | 2 << 27 | 2 << 29,
        "mxf4nvf4": 1 << 7 | 1 << 10 | 4 << 17 | 2 << 27 | 1 << 31,  # ue4m3, K 96
    }
    for kind, w in words.items():
        assert _isa_valid(w, kind) and _accepts(w, kind), kind
        for bit in range(32):
            v = w ^ 1 << bit
            assert _accepts(v, kind) == _isa_valid(v, kind), (kind, bit, f"{v:#010x}")


# ============================================================================ the review's classes

_F16 = dict(kind="f16", m=128, n=128, a="f16", b="f16", d="f32")
_MX8 = dict(kind="mxf8f6f4", m=128, n=128, a="e4m3", b="e4m3", sf="ue8m0")
_MX4 = dict(kind="mxf4", m=128, n=128, a="e2m1", b="e2m1", sf="ue8m0")


@pytest.mark.parametrize(("fields", "match"), [
    # M values a kind does not list (block-scaled: M >> 7 in bits 27-28, 24-26 reserved)
    ({**_MX8, "m": 64}, "M = 64 is not a multiple of 128"),
    ({**_MX4, "m": 384}, "384 x 128 is no kind::mxf4 shape"),
    ({**_F16, "m": 16}, "16 x 128 is no kind::f16 shape"),
    ({**_F16, "m": 256, "n": 24}, "256 x 24 is no kind::f16 shape"),
    ({**_F16, "kind": "i8", "a": "s8", "b": "s8", "d": "s32", "n": 40}, "no kind::i8 shape"),
    ({**_F16, "n": 264}, "264 is no kind::f16 shape"),
    # D formats a kind does not allow
    ({**_F16, "d": "s32"}, "d_format code 2 \\(s32\\)"),
    ({**_F16, "kind": "tf32", "a": "tf32", "b": "tf32", "d": "f16"}, "d_format code 0"),
    ({**_F16, "kind": "i8", "a": "s8", "b": "u8", "d": "f32"}, "d_format code 1"),
    ({**_F16, "kind": "i8", "a": "s8", "b": "u8", "d": "f16"}, "d_format code 0"),
    ({**_F16, "kind": "f8f6f4", "a": "e4m3", "b": "e2m1", "d": "s32"}, "d_format code 2"),
    ({**_F16, "a": "bf16", "b": "bf16", "d": "f16"}, "bf16 A/B accumulates in f32"),
    ({**_F16, "a": "f16", "b": "bf16"}, "A and B of one type"),
    # negate on i8
    ({**_F16, "kind": "i8", "a": "s8", "b": "s8", "d": "s32", "b_negate": True}, "b_negate"),
    # scale types per kind, scale-factor ids, transpose on mxf4
    ({**_MX8, "sf": "ue4m3"}, "scale_format code 0 \\(ue4m3\\)"),
    ({**_MX4, "sf": "ue4m3"}, "scale_format code 0"),
    ({**_MX4, "a_sf_id": 1}, "a_sf_id code 1"),
    ({**_MX4, "kind": "mxf4nvf4", "b_sf_id": 3}, "b_sf_id code 3"),
    ({**_MX4, "a_major": "MN"}, "a_major code 1"),
    ({**_MX4, "kind": "mxf4nvf4", "b_major": "MN"}, "b_major code 1"),
    # reserved bits / selector
    ({**_MX8, "sparse": True, "sparse_id2": 1}, "bits 0-1 are reserved"),
    ({**_MX8, "k_size": 1}, "bit 31 is reserved"),
    ({**_F16, "kind": "f8f6f4", "a": "e4m3", "b": "e4m3", "sparse": True, "sparse_id2": 2},
     "must be 0 for kind::f8f6f4"),
    ({**_F16, "sparse_id2": 1}, "dense idesc"),
    ({**_MX4, "k_size": 1}, "x K 96"),  # K = 96 is the 256 x N shape only
    ({**_MX4, "m": 256, "sparse": True, "k_size": 1}, "x K 96"),
])
def test_encode_refuses_the_invalid_classes(fields: dict, match: str) -> None:
    with pytest.raises(DescriptorError, match=match):
        InstrDescriptor(**fields)


@pytest.mark.parametrize(("word", "kind", "match"), [
    (1 << 7 | 1 << 10 | 16 << 17 | 1 << 23 | 4 << 24, "mxf4", "reserved bit\\(s\\) 26"),  # M 64
    (1 << 7 | 1 << 10 | 16 << 17 | 1 << 23 | 2 << 27 | 1 << 12, "mxf4nvf4", "reserved bit"),
    (1 << 7 | 1 << 10 | 16 << 17 | 1 << 23 | 1 << 27 | 1 << 0, "mxf8f6f4", "reserved bit"),
    (2 << 4 | 16 << 17 | 8 << 24, "f16", "d_format code 2"),
    (0 << 4 | 2 << 7 | 2 << 10 | 16 << 17 | 8 << 24, "tf32", "d_format code 0"),
    (1 << 4 | 1 << 7 | 1 << 13 | 16 << 17 | 8 << 24, "i8", "a_negate code 1"),
    (1 << 7 | 1 << 10 | 16 << 17 | 1 << 27 | 1 << 15, "mxf4", "a_major code 1"),
    (1 << 7 | 1 << 10 | 16 << 17 | 1 << 23 | 1 << 27 | 3 << 29, "mxf4", "a_sf_id code 3"),
    (1 << 4 | 16 << 17 | 1 << 24, "f16", "M x N = 16 x 128"),
])
def test_decode_refuses_the_invalid_classes(word: int, kind: str, match: str) -> None:
    assert not _isa_valid(word, kind)
    with pytest.raises(DescriptorError, match=match):
        decode_idesc(word, kind)


def test_atom_idesc_refuses_what_the_tables_do_not_define() -> None:
    i8 = make_umma_atom("i8", 1, 128, 64, "s32", "s8", "s8")
    with pytest.raises(DescriptorError, match="a_negate"):
        i8.idesc(a_negate=True)
    assert i8.idesc(saturate=True).encode() >> 3 & 1
    mx4 = make_umma_atom("mxf4", 1, 128, 64, "f32", "e2m1", "e2m1", sf="ue8m0", vec_size=32)
    with pytest.raises(DescriptorError, match="b_sf_id code 1"):
        mx4.idesc(b_sf_id=1)
    assert mx4.idesc(a_sf_id=2, b_sf_id=2).encode() >> 29 & 3 == 2
    with pytest.raises(DescriptorError, match="x K 96"):
        mx4.idesc(k_size=1)  # M = 128: the K = 96 shape is 256 x N
