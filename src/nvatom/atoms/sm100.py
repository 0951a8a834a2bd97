"""SM100-family (datacenter Blackwell, also SM103 and SM110) tensor-core MMA: ``tcgen05.mma``.

One CTA (``cta_group::1``) or a CTA pair (``cta_group::2``) computes D (M x N) in tensor memory
(TMEM) += A (M x K) * B (K x N).  B is always read through a 64-bit shared-memory descriptor;
A through a descriptor (``ss``) or from TMEM (``ts``).  Element types, majors, negation, M and N
are *not* spelled in the instruction: they live in the 32-bit instruction descriptor (idesc,
:mod:`nvatom.descriptors.umma`), so ptxas checks the qualifiers and operand list and the idesc
rules below are ours to check (PTX ISA "tcgen05 Matrix shape", "Instruction descriptor").

Two levels, both data:

* :class:`Tcgen05MmaForm` -- one PTX *instruction form*: ``.sp``, ``.ws``, ``.cta_group``,
  ``.kind``, ``.block_scale`` with its scale-vector qualifier, ``.ashift``, the collector usage,
  and the optional operands (disable-output-lane, scale-input-d, zero-column-mask).
  :data:`FORMS` is every form ptxas 13.0 accepts (tests/atoms/test_sm100_ptxas.py sweeps the
  whole table on every target and the near misses).  :meth:`Tcgen05MmaForm.available_on` is the
  target gating, from the feature rules of :mod:`nvatom.arch`.
* :class:`UmmaAtom` -- one *atom* of the specification: ``sm100.mma``, ``sm100.mma_sp``,
  ``sm100.mma_bs`` or ``sm100.mma_bs_sp`` with kind, CTA group, (M, N, K), element types,
  A source, majors and (block-scaled) scale-factor type and vector size.  Its
  :meth:`~UmmaAtom.form` is the instruction it issues and :meth:`~UmmaAtom.idesc` the
  instruction descriptor.

API for other rooms (the cute_nvgpu dialect, docs/ir.md, builds ``!cute_nvgpu.sm100.mma<...>`` from
it): :class:`UmmaAtom` (frozen; fields are the type parameters), :func:`umma_atom` (parse a
name), :func:`umma_atoms` (generate/filter the atoms), :func:`verify_umma` (the spec's ladder
with its diagnostics byte for byte), :func:`block_scale_packed` (the specification's
``(atom_K << 32) | vecSize``), :data:`FORMS` / :func:`tcgen05_form` (instruction forms).

Atom names: ``sm100.mma[_sp|_bs|_bs_sp].<kind>.cta<1|2>.m<M>n<N>k<K>.<ss|ts>[.ws].<d>.<a>.<b>``
then, for block-scaled atoms, ``.<sf>.vs<V>`` and, when not K-major, ``.amn`` / ``.bmn``; e.g.
``sm100.mma.f16.cta1.m128n256k16.ss.f32.bf16.bf16`` or
``sm100.mma_bs.mxf4nvf4.cta1.m128n128k64.ss.f32.e2m1.e2m1.ue4m3.vs16``.

Operand layouts (one table each; the verifier, ``nvatom frag`` and the CPU model
:mod:`nvatom.ref.tcgen05` read them): A and B in shared memory are the PTX ISA's canonical
layouts (9.7.16.3.3; :data:`nvatom.tables.swizzles.UMMA_SMEM_CANONICAL`,
:meth:`UmmaAtom.smem_layout`)
for the swizzle modes the operand may use (tf32 MN-major: only the 128-byte swizzle with 32-byte
atomicity); D, A (``ts``) and the scale factors in TMEM follow the data-path layouts of
9.7.16.10.5 and the scale-factor placement of 9.7.16.10.7 (:data:`DATAPATH_LAYOUTS`,
:func:`d_tmem_layout`, :func:`a_tmem_layout`, :func:`sf_tmem_layout`, :meth:`UmmaAtom.tmem_layout`).
:func:`verify_umma` compares declared layouts with them ("expects Mma atom layout of ...") and
checks the specification's :func:`scale_factor_layout_is_legal`.

Shapes: PTX ISA 9.7.16.2.1 "Matrix Shape", Table 39 "Various combinations of .kind and
shapes", for every kind x cta_group x dense/sparse x .ws: see :data:`SHAPES` and
:func:`legal_mn` (docs/spec-deviations.md lists where CUTLASS's static_asserts differ).
SM110 has no mnemonic of its own (the spec's registry): the sm100 atoms serve sm_110a/f where ptxas
allows them.
"""

from __future__ import annotations

import dataclasses
import itertools
import re
from collections.abc import Iterator
from typing import Any

from nvatom import diagnostics as D
from nvatom.arch import PtxVersion, Target, feature, target
from nvatom.atoms.interfaces import (
    AtomVerificationError,
    BlockScaleAtom,
    MmaAtom,
    SmemDescriptorAtom,
    SparseMetadataAtom,
    TmemAtom,
)
from nvatom.atoms.verify import OperandUse, check_target_and_shape
from nvatom.descriptors.umma import instr_desc_for
from nvatom.dtypes import DType, dtype
from nvatom.errors import NvatomError, lookup
from nvatom.layout import ComposedLayout, Layout, is_int, parse_layout, rank, size
from nvatom.tables import swizzles
from nvatom.tables.umma_shapes import SHAPES

__all__ = [
    "DATAPATH_LAYOUTS",
    "DATAPATH_OF",
    "FORMS",
    "KINDS",
    "MNEMONICS",
    "SF_DATAPATHS",
    "SHAPES",
    "Tcgen05MmaForm",
    "UmmaAtom",
    "UmmaError",
    "UmmaKind",
    "UmmaUse",
    "a_tmem_layout",
    "block_scale_kind",
    "block_scale_packed",
    "block_scale_tag",
    "d_tmem_layout",
    "layout_id",
    "legal_m",
    "legal_mn",
    "legal_n",
    "make_umma_atom",
    "scale_factor_layout_is_legal",
    "sf_datapath",
    "sf_tmem_layout",
    "tcgen05_form",
    "tmem_copies",
    "umma_atom",
    "umma_atoms",
    "verify_umma",
]


class UmmaError(NvatomError):
    """An impossible tcgen05 form or UMMA atom (names the offending value)."""


def _t(*names: str) -> tuple[DType, ...]:
    return tuple(dtype(n) for n in names)


F16, BF16, TF32, F32, S32 = _t("f16", "bf16", "tf32", "f32", "s32")
F8F6F4 = _t("e4m3", "e5m2", "e2m3", "e3m2", "e2m1")
INT8 = _t("s8", "u8")
E2M1 = dtype("e2m1")
UE8M0, UE4M3 = _t("ue8m0", "ue4m3")

#: Scale-vector qualifiers: qualifier -> scale factors per row per *dense* K-block (blockN is
#: per N elements of K, so it is resolved against the kind's dense K).  ``None``: omitted.
SCALE_VEC_COUNT: dict[str, int] = {"scale_vec::1X": 1, "scale_vec::2X": 2, "scale_vec::4X": 4}
SCALE_VEC_BLOCK: dict[str, int] = {"block16": 16, "block32": 32}


@dataclasses.dataclass(frozen=True)
class UmmaKind:
    """One ``.kind`` of tcgen05.mma and the rules the idesc must follow for it."""

    name: str
    block_scaled: bool
    ab: tuple[DType, ...]  # legal A and B element types
    d: tuple[DType, ...]  # legal accumulators
    k_bits: int  # element container bits for K: dense K = 256 / k_bits
    min_ptx: PtxVersion
    feature: str  # nvatom.arch feature gating the kind
    ws: bool  # has a .ws form
    scale_input_d: bool  # takes the scale-input-d immediate (PTX ISA: f16 and tf32 only)
    scale_vecs: tuple[str | None, ...] = ()  # block-scaled: legal qualifiers (None: omitted)
    sf_types: tuple[DType, ...] = ()
    mixed_ab: bool = True  # A and B may differ

    @property
    def k_dense(self) -> int:
        return 256 // self.k_bits

    def scale_count(self, qualifier: str | None) -> int:
        """Scale factors per row per dense K-block for a scale-vector qualifier."""
        if not self.block_scaled:
            raise UmmaError(f"kind::{self.name} is not block-scaled")
        if qualifier not in self.scale_vecs:
            legal = ", ".join(str(q) for q in self.scale_vecs)
            raise UmmaError(f"kind::{self.name} takes scale-vector qualifiers {legal}; "
                            f"got {qualifier}")
        if qualifier is None:  # omitted: .block32 (PTX ISA; ptxas: needs 8.8 like .block32)
            qualifier = "block32"
        if qualifier in SCALE_VEC_BLOCK:
            return self.k_dense // SCALE_VEC_BLOCK[qualifier]
        return SCALE_VEC_COUNT[qualifier]


KINDS: dict[str, UmmaKind] = {k.name: k for k in (
    UmmaKind("f16", False, (F16, BF16), (F16, F32), 16, (8, 6), "tcgen05", True, True,
             mixed_ab=False),
    UmmaKind("tf32", False, (TF32,), (F32,), 32, (8, 6), "tcgen05", True, True),
    UmmaKind("f8f6f4", False, F8F6F4, (F16, F32), 8, (8, 6), "tcgen05", True, False),
    UmmaKind("i8", False, INT8, (S32,), 8, (8, 6), "tcgen05.kind::i8", True, False),
    UmmaKind("mxf8f6f4", True, F8F6F4, (F32,), 8, (8, 6), "tcgen05", False, False,
             (None, "scale_vec::1X", "block32"), (UE8M0,)),
    UmmaKind("mxf4", True, (E2M1,), (F32,), 4, (8, 6), "tcgen05", False, False,
             (None, "scale_vec::2X", "block32"), (UE8M0,)),
    UmmaKind("mxf4nvf4", True, (E2M1,), (F32,), 4, (8, 7), "tcgen05", False, False,
             ("scale_vec::2X", "scale_vec::4X", "block16", "block32"), (UE8M0, UE4M3)),
)}

COLLECTOR_OPS = ("fill", "use", "lastuse", "discard")
COLLECTORS_A = tuple(f"a::{op}" for op in COLLECTOR_OPS)
COLLECTORS_B = tuple(f"b{i}::{op}" for i in range(4) for op in COLLECTOR_OPS)
MNEMONICS = ("sm100.mma", "sm100.mma_sp", "sm100.mma_bs", "sm100.mma_bs_sp")


# ============================================================================ instruction forms


def _kind_and_group_problems(kind: str, cta_group: int) -> Iterator[str]:
    """What a form's or an atom's kind and cta_group get wrong (the checks both start with)."""
    if kind not in KINDS:
        yield f"unknown kind '{kind}' (one of {', '.join(KINDS)})"
    elif cta_group not in (1, 2):
        yield f"cta_group {cta_group} (1 or 2)"


@dataclasses.dataclass(frozen=True)
class Tcgen05MmaForm:
    """One ``tcgen05.mma`` instruction form: qualifiers and the operand list they imply.

    Operands in order (PTX ISA "tcgen05.mma"; docs/spec-deviations.md, "SM100 tcgen05"): ``[d-tmem],
    a-desc | [a-tmem],
    b-desc, [sp-meta-tmem] (sparse), idesc, {disable-output-lane} (optional, 4 or 8 .b32),
    [scale-A-tmem], [scale-B-tmem] (block-scaled), enable-input-d (predicate),
    scale-input-d (immediate 0..15) | zero-column-mask-desc (.ws, .b64)``.
    """

    kind: str
    cta_group: int = 1
    a_source: str = "ss"  # "ss": A by smem descriptor; "ts": A in TMEM
    sparse: bool = False
    ws: bool = False
    scale_vec: str | None = None  # block-scaled kinds only
    ashift: bool = False
    collector: str | None = None  # "a::fill" ... (non-.ws) or "b0::fill" ... (.ws)
    disable_output_lane: bool = False
    scale_input_d: bool = False
    zero_column_mask: bool = False

    def __post_init__(self) -> None:
        problems = list(self._problems())
        if problems:
            raise UmmaError(f"no tcgen05.mma form {self._spelled()}: {'; '.join(problems)}")

    def _problems(self) -> Iterator[str]:
        k = KINDS.get(self.kind)
        yield from _kind_and_group_problems(self.kind, self.cta_group)
        if k is None:
            return
        if self.a_source not in ("ss", "ts"):
            yield f"A source '{self.a_source}' (ss or ts)"
        if self.ws:
            if not k.ws:
                yield f"kind::{self.kind} has no .ws form"
            if self.cta_group != 1:
                yield ".ws takes cta_group::1 only"
            if self.ashift or self.disable_output_lane or self.scale_input_d:
                yield ".ws takes no .ashift, disable-output-lane or scale-input-d"
            if self.collector is not None and self.collector not in COLLECTORS_B:
                yield f".ws collector usage is collector::b<0-3>::<op>, got {self.collector}"
        else:
            if self.zero_column_mask:
                yield "only .ws takes a zero-column-mask descriptor"
            if self.collector is not None and self.collector not in COLLECTORS_A:
                yield f"collector usage is collector::a::<op>, got {self.collector}"
        if k.block_scaled:
            if self.scale_vec not in k.scale_vecs:
                yield (f"kind::{self.kind} takes scale-vector qualifiers "
                       f"{', '.join(str(q) for q in k.scale_vecs)}, got {self.scale_vec}")
            if self.ashift or self.disable_output_lane or self.scale_input_d:
                yield "block-scaled forms take no .ashift, disable-output-lane or scale-input-d"
        elif self.scale_vec is not None:
            yield f"kind::{self.kind} is not block-scaled; no {self.scale_vec}"
        if self.scale_input_d and not k.scale_input_d:
            yield f"scale-input-d is for kind::f16 and kind::tf32, not kind::{self.kind}"
        if self.ashift:
            if self.a_source != "ts":
                yield ".ashift needs A in tensor memory (ts)"
            if self.collector in ("a::fill", "a::use"):
                yield f".ashift cannot be combined with collector::{self.collector}"

    def _spelled(self) -> str:
        try:
            return self.opcode
        except Exception:
            return repr(self)

    # ------------------------------------------------------------------ spelling
    @property
    def kind_spec(self) -> UmmaKind:
        return KINDS[self.kind]

    @property
    def block_scaled(self) -> bool:
        return KINDS[self.kind].block_scaled

    @property
    def opcode(self) -> str:
        q = ["tcgen05.mma"]
        if self.ws:
            q.append("ws")
        if self.sparse:
            q.append("sp")
        q += [f"cta_group::{self.cta_group}", f"kind::{self.kind}"]
        if self.block_scaled:
            q.append("block_scale")
            if self.scale_vec:
                q.append(self.scale_vec)
        if self.ashift:
            q.append("ashift")
        if self.collector:
            q.append(f"collector::{self.collector}")
        return ".".join(q)

    @property
    def name(self) -> str:
        """The opcode plus the optional operands, e.g. ``...kind::f16+dol+sid``."""
        extra = [n for n, on in (("dol", self.disable_output_lane), ("sid", self.scale_input_d),
                                 ("zcm", self.zero_column_mask), (self.a_source, True)) if on]
        return "+".join([self.opcode, *extra])

    @property
    def operands(self) -> tuple[str, ...]:
        """Operand slots in order: d, a, b, meta, idesc, dol, sfa, sfb, p, sid, zcm."""
        ops = ["d", "a", "b"]
        if self.sparse:
            ops.append("meta")
        ops.append("idesc")
        if self.disable_output_lane:
            ops.append("dol")
        if self.block_scaled:
            ops += ["sfa", "sfb"]
        ops.append("enable_input_d")
        if self.scale_input_d:
            ops.append("scale_input_d")
        if self.zero_column_mask:
            ops.append("zero_column_mask")
        return tuple(ops)

    @property
    def disable_output_lane_regs(self) -> int:
        return 4 * self.cta_group

    def instruction(self, **ops: Any) -> str:
        """``opcode ops;`` from operand values by slot name (TMEM addresses are wrapped in
        brackets; ``dol`` is a sequence of registers; ``scale_input_d`` an int 0..15)."""
        missing = [o for o in self.operands if o not in ops]
        extra = [o for o in ops if o not in self.operands]
        if missing or extra:
            raise UmmaError(f"{self.name}: operands are {', '.join(self.operands)}; "
                            f"missing {missing}, unexpected {extra}")
        out = []
        for slot in self.operands:
            v = ops[slot]
            if slot in ("d", "meta", "sfa", "sfb") or (slot == "a" and self.a_source == "ts"):
                out.append(f"[{v}]")
            elif slot == "dol":
                regs = list(v)
                if len(regs) != self.disable_output_lane_regs:
                    raise UmmaError(f"{self.name}: disable-output-lane is "
                                    f"{self.disable_output_lane_regs} .b32 registers, got "
                                    f"{len(regs)}")
                out.append("{" + ", ".join(str(r) for r in regs) + "}")
            elif slot == "scale_input_d":
                if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= 15:
                    raise UmmaError(f"{self.name}: scale-input-d is an immediate 0..15, got {v!r}")
                out.append(str(v))
            else:
                out.append(str(v))
        return f"{self.opcode} {', '.join(out)};"

    # ------------------------------------------------------------------ availability
    @property
    def features(self) -> tuple[str, ...]:
        """The nvatom.arch features this form needs on a target."""
        fs = ["tcgen05", KINDS[self.kind].feature]
        if self.scale_vec in SCALE_VEC_COUNT:
            fs.append("tcgen05.scale_vec")
        if self.block_scaled and self.scale_vec not in SCALE_VEC_COUNT:
            fs.append("tcgen05.block16/32")  # .block16/.block32 or the omitted default
        if self.scale_input_d:
            fs.append("tcgen05.scale_input_d")
        if self.sparse and self.kind in ("mxf4", "mxf4nvf4"):
            fs.append("tcgen05.mxf4.sp")
        return tuple(dict.fromkeys(fs))

    @property
    def min_ptx(self) -> PtxVersion:
        return max([KINDS[self.kind].min_ptx, *(feature(f).min_ptx for f in self.features)])

    def available_on(self, t: Target | str) -> bool:
        tt = target(t)
        return all(feature(f).available_on(tt) for f in self.features)

    def ptx_version_for(self, t: Target | str) -> PtxVersion:
        return max(self.min_ptx, target(t).min_ptx)


def _all_forms() -> tuple[Tcgen05MmaForm, ...]:
    out = []
    for kind, k in KINDS.items():
        for cta, src, sp, ws in itertools.product((1, 2), ("ss", "ts"), (False, True),
                                                  (False, True)):
            if ws and (cta != 1 or not k.ws):
                continue
            colls = (None, *(COLLECTORS_B if ws else COLLECTORS_A))
            svs = k.scale_vecs if k.block_scaled else (None,)
            plain = not ws and not k.block_scaled
            for sv, coll, ashift, dol, sid, zcm in itertools.product(
                    svs, colls, (False, True) if plain and src == "ts" else (False,),
                    (False, True) if plain else (False,),
                    (False, True) if plain and k.scale_input_d else (False,),
                    (False, True) if ws else (False,)):
                if ashift and coll in ("a::fill", "a::use"):
                    continue
                out.append(Tcgen05MmaForm(kind, cta, src, sp, ws, sv, ashift, coll, dol, sid,
                                          zcm))
    return tuple(out)


FORMS: tuple[Tcgen05MmaForm, ...] = _all_forms()
_FORM_BY_NAME = {f.name: f for f in FORMS}


def tcgen05_form(name: str) -> Tcgen05MmaForm:
    """A form by :attr:`Tcgen05MmaForm.name` (``<opcode>[+dol][+sid][+zcm]+<ss|ts>``)."""
    return lookup(_FORM_BY_NAME, name.strip(),
                  lambda: UmmaError(f"unknown tcgen05.mma form '{name}'"))


# ============================================================================ shapes


# SHAPES (PTX ISA Table 39, legal M and N per kind) is nvatom.tables.umma_shapes.SHAPES.


def _spans(ns: tuple[int, ...]) -> str:
    """``8, 16, 24, 32, 48..256/16`` style text of a legal-N tuple (for diagnostics)."""
    out, i = [], 0
    while i < len(ns):  # greedy runs of one step; runs of 4 or more are abbreviated
        step = ns[i + 1] - ns[i] if i + 1 < len(ns) else 0
        j = i
        while j + 1 < len(ns) and ns[j + 1] - ns[j] == step:
            j += 1
        out += [f"{ns[i]}..{ns[j]}/{step}"] if j - i >= 3 else [str(x) for x in ns[i:j + 1]]
        i = j + 1
    return "{" + ", ".join(out) + "}"


def legal_m(kind: str, cta_group: int, ws: bool = False, sparse: bool = False
            ) -> tuple[int, ...]:
    """Legal M of a kind (PTX ISA Table 39); () where the table says "Invalid"."""
    if kind not in KINDS:
        raise UmmaError(f"unknown kind '{kind}' (one of {', '.join(KINDS)})")
    return SHAPES.get((kind, cta_group, sparse, ws), ((), ()))[0]


def legal_n(kind: str, cta_group: int, sparse: bool = False, ws: bool = False
            ) -> tuple[int, ...]:
    """Legal N of a kind (PTX ISA Table 39); () where the table says "Invalid"."""
    if kind not in KINDS:
        raise UmmaError(f"unknown kind '{kind}' (one of {', '.join(KINDS)})")
    return SHAPES.get((kind, cta_group, sparse, ws), ((), ()))[1]


def legal_mn(kind: str, cta_group: int, sparse: bool = False, ws: bool = False
             ) -> tuple[tuple[int, int], ...]:
    """Every legal (M, N) of a kind (PTX ISA 9.7.16.2.1, Table 39)."""
    return tuple((m, n) for m in legal_m(kind, cta_group, ws, sparse)
                 for n in legal_n(kind, cta_group, sparse, ws))


# ============================================================================ operand layouts


class _Tmem:
    """TMEM addresses are ``lane << 16 | column`` (PTX ISA 9.7.16.2 "Tensor Memory
    addressing"); the layouts below map coordinates to offsets from the operand's address."""

    L = 1 << 16  # one lane


#: PTX ISA 9.7.16.10.5 "Data Path Layout Organization": layout id -> (where element (r, n) of D
#: sits in one CTA's TMEM as CuTe text, the lane alignments the D / A address may have).  ``r``
#: counts this CTA's M / cta_group rows (symbol ``R``), ``n`` the N columns (``N``); ``L`` is
#: one lane (2^16).  A, D: row r in lane r.  F (M 64, half the data path): 16-lane groups at
#: the start of each 32-lane partition.  B, E: N split in halves stacked over lanes 0-63 and
#: 64-127.  G (.ws M 32): N in quarters over the four 32-lane partitions.  The ISA draws them
#: as figures; the placement matches CUTLASS's ``tmem_frg`` / ``tmem_frg_ws`` (the tests check
#: each rule as an independent per-element formula).  C (M 128, cta_group::2, sparse A): the
#: ISA's table gives it F's organization ("4x1 (1/2 datapath utilized)", lane alignment 0 or
#: 16) over each CTA's 64 rows, so it is F's rule with R = 64.
DATAPATH_LAYOUTS: dict[str, tuple[str, tuple[int, ...]]] = {
    "A": ("(R,N):(L,1)", (0,)),
    "B": ("(R,(N/2,2)):(L,(1,64L))", (0,)),
    "C": ("((16,R/16),N):((L,32L),1)", (0, 16)),
    "D": ("(R,N):(L,1)", (0,)),
    "E": ("(R,(N/2,2)):(L,(1,64L))", (0,)),
    "F": ("((16,R/16),N):((L,32L),1)", (0, 16)),
    "G": ("(R,(N/4,4)):(L,(1,32L))", (0,)),
}
#: (cta_group, .ws, M) -> data-path layout id; cta_group::2 M 128 is B dense and C sparse.
DATAPATH_OF: dict[tuple[int, bool, int], str] = {
    (1, True, 32): "G", (1, True, 64): "E", (1, True, 128): "D",
    (1, False, 64): "F", (1, False, 128): "D",
    (2, False, 128): "B", (2, False, 256): "A",
}
_SYM = re.compile(r"(\d*)(L|R|N)(?:/(\d+))?")


def layout_id(m: int, cta_group: int, sparse: bool = False, ws: bool = False) -> str:
    """The ISA's data-path layout (A..G) of a tcgen05.mma of M rows (:data:`DATAPATH_OF`)."""
    if ws and cta_group != 1:
        raise UmmaError(".ws is cta_group::1 only")
    if cta_group not in (1, 2):
        raise UmmaError(f"cta_group::{cta_group} (1 or 2)")
    lid = DATAPATH_OF.get((cta_group, ws, m))
    if lid is None:
        ms = sorted(mm for (c, w, mm) in DATAPATH_OF if (c, w) == (cta_group, ws))
        raise UmmaError(f"no data-path layout for M = {m}, cta_group::{cta_group}"
                        f"{' .ws' if ws else ''} (M in {ms})")
    return "C" if lid == "B" and sparse else lid


def _tmem_text(text: str, rows: int, n: int) -> Layout:
    vals = {"L": _Tmem.L, "R": rows, "N": n}

    def sub(mo: re.Match[str]) -> str:
        v = int(mo.group(1) or 1) * vals[mo.group(2)]
        div = int(mo.group(3) or 1)
        if v % div:
            raise UmmaError(f"data-path layout {text}: {mo.group(0)} with R = {rows}, N = {n} "
                            "is not whole")
        return str(v // div)

    lay = parse_layout(_SYM.sub(sub, text))
    assert isinstance(lay, Layout)
    return lay


def d_tmem_layout(m: int, n: int, cta_group: int = 1, sparse: bool = False,
                  ws: bool = False) -> Layout:
    """D in one CTA's TMEM: (row of this CTA's M / cta_group, column n) -> offset from the D
    address (``lane << 16 | column``), from :data:`DATAPATH_LAYOUTS`.  Every D type takes one
    32-bit column per element (an f16 D sits in the low half; PTX ISA 9.7.16.10.4.1)."""
    lid = layout_id(m, cta_group, sparse, ws)
    text = DATAPATH_LAYOUTS[lid][0]
    return _tmem_text(text, m // cta_group, n)


def a_tmem_layout(m: int, n: int, k: int, a_bits: int, cta_group: int = 1,
                  sparse: bool = False, ws: bool = False) -> Layout:
    """A in TMEM (``ts``): (row, k) -> offset from the A address.  Each data-path lane multiplies
    the A row of the D row it holds, so row r sits in D's lane for row r (mode 0 of
    :func:`d_tmem_layout`); K is packed low element first, ``32 / a_bits`` to a 32-bit column:
    element k is in column ``k // P`` at bits ``a_bits * (k % P)`` (P = 32 / a_bits, the
    stride-0 inner K mode).  Layouts B and E need each row also in the lanes + 64, G in + 32,
    + 64, + 96 (the lanes of D's other column blocks: :func:`tmem_copies`).  ``k`` is A's
    stored K (half the logical K when sparse)."""
    d = d_tmem_layout(m, n, cta_group, sparse, ws)
    per = 32 // a_bits
    if k % per:
        raise UmmaError(f"A in TMEM: K = {k} {a_bits}-bit elements do not fill 32-bit columns")
    return Layout((d.shape[0], (per, k // per)), (d.stride[0], (0, 1)))  # type: ignore[index]


def tmem_copies(m: int, n: int, cta_group: int = 1, sparse: bool = False,
                ws: bool = False) -> tuple[int, ...]:
    """Lane offsets (``<< 16``) at which A in TMEM must repeat its rows: those that D's column
    mode adds (0 only for Layouts A, D and F)."""
    d = d_tmem_layout(m, n, cta_group, sparse, ws)
    cols = d[1]
    offs = sorted({int(cols(c)) & ~(_Tmem.L - 1) for c in range(size(cols))})
    return tuple(offs)


def _sf_rows_layout(rows: int) -> Layout:
    """Row r of a scale-factor operand in lane r % 32, column r // 32 (rows past a multiple of
    32 pad the last column)."""
    if rows <= 32:
        return Layout(rows, _Tmem.L)
    return Layout((32, -(-rows // 32)), (_Tmem.L, 1))


#: Scale-factor data paths (PTX ISA 9.7.16.10.7, "the scale factors need to be duplicated to all
#: 32 lane partitions"; placement as CUTLASS's ``tmem_sf_frg``): name -> (lane offsets of the
#: copies, whether the rows split in two halves over partitions {0,1} and {2,3}).
SF_DATAPATHS: dict[str, tuple[tuple[int, ...], bool]] = {
    "4x1": ((0, 32, 64, 96), False),
    "2x2": ((0, 32), True),
}


def sf_tmem_layout(rows: int, count: int, datapath: str = "4x1") -> Layout:
    """Scale factors in TMEM: (row, j) -> offset from the SFA / SFB address, j < ``count`` the
    scale factors of a row per MMA, which share one 32-bit word: byte ``sf_id + j`` (the idesc's
    scale-factor id; PTX ISA 9.7.16.10.7.2/3), hence the stride-0 mode.  ``"4x1"``: row r in
    lane r % 32, column r // 32, copied to each 32-lane partition; ``"2x2"`` (SFB of Layout B):
    the first half of the rows in partitions 0-1, the second half in 2-3, each half as 4x1.
    :data:`SF_DATAPATHS` lists the copies."""
    if datapath not in SF_DATAPATHS:
        raise UmmaError(f"scale-factor data path '{datapath}' (one of {', '.join(SF_DATAPATHS)})")
    if SF_DATAPATHS[datapath][1]:
        if rows % 2:
            raise UmmaError(f"the 2x2 scale-factor data path splits rows in halves, got {rows}")
        half = _sf_rows_layout(rows // 2)
        rmode = Layout((half.shape, 2), (half.stride, 64 * _Tmem.L))
    else:
        rmode = _sf_rows_layout(rows)
    return Layout((rmode.shape, count), (rmode.stride, 0))


def sf_datapath(operand: str, m: int, cta_group: int, sparse: bool = False) -> str:
    """'4x1' (SFA, and SFB of Layouts A and D) or '2x2' (SFB of Layout B)."""
    if operand.upper() == "SFB" and layout_id(m, cta_group, sparse) == "B":
        return "2x2"
    return "4x1"


def _tile_offsets(layout: Any, rows: int, cols: int) -> list[list[int]] | None:
    """Offsets of a rank-2 Layout over ``rows x cols`` relative to its (0, 0); None when it is
    not a static rank-2 Layout covering that tile."""
    if isinstance(layout, ComposedLayout) or not isinstance(layout, Layout) or rank(layout) != 2:
        return None
    if size(layout[0]) < rows or size(layout[1]) < cols:
        return None
    # a Layout's offset is the sum of its modes' (no swizzle): rows + cols evaluations
    r0 = [int(layout[0](r)) for r in range(rows)]
    c0 = [int(layout[1](c)) for c in range(cols)]
    return [[r + c - r0[0] - c0[0] for c in c0] for r in r0]


def _same_on(got: Any, want: Layout, rows: int, cols: int) -> bool:
    g = _tile_offsets(got, rows, cols)
    w = _tile_offsets(want, rows, cols)
    return g is not None and g == w


# ============================================================================ atoms


@dataclasses.dataclass(frozen=True)
class UmmaAtom(MmaAtom, SmemDescriptorAtom, TmemAtom):
    """One UMMA atom: the type parameters of ``!cute_nvgpu.sm100.mma...``."""

    kind: str
    cta_group: int
    m: int
    n: int
    d: DType
    a: DType
    b: DType
    a_source: str = "ss"
    sparse: bool = False
    ws: bool = False
    a_major: str = "K"
    b_major: str = "K"
    sf: DType | None = None  # block-scaled: scale-factor element type
    vec_size: int | None = None  # block-scaled: elements of K per scale factor

    def __post_init__(self) -> None:
        for f in ("d", "a", "b", "sf"):
            v = getattr(self, f)
            if isinstance(v, str):
                object.__setattr__(self, f, dtype(v))
        problems = list(self._problems())
        if problems:
            raise UmmaError(f"bad UMMA atom {self._name_or_repr()}: {'; '.join(problems)}")

    def _name_or_repr(self) -> str:
        try:
            return self.name
        except Exception:
            return repr(self)

    def _problems(self) -> Iterator[str]:
        k = KINDS.get(self.kind)
        yield from _kind_and_group_problems(self.kind, self.cta_group)
        if k is None:
            return
        if (self.m, self.n) not in legal_mn(self.kind, self.cta_group, self.sparse, self.ws):
            yield (f"M x N = {self.m} x {self.n} is not a kind::{self.kind} "
                   f"cta_group::{self.cta_group}{' .ws' if self.ws else ''} shape "
                   f"(M in {legal_m(self.kind, self.cta_group, self.ws, self.sparse)}, "
                   f"N in {_spans(legal_n(self.kind, self.cta_group, self.sparse, self.ws))})")
        for slot, t in (("A", self.a), ("B", self.b)):
            if t not in k.ab:
                yield (f"{slot} type {t.name} (kind::{self.kind} takes "
                       f"{', '.join(x.name for x in k.ab)})")
        if not k.mixed_ab and self.a != self.b:
            yield f"kind::{self.kind} takes A and B of one type, got {self.a.name}, {self.b.name}"
        if self.d not in k.d:
            yield f"D type {self.d.name} (kind::{self.kind}: {', '.join(x.name for x in k.d)})"
        if self.kind == "f16" and BF16 in (self.a, self.b) and self.d != F32:
            yield "bf16 accumulates in f32 only"
        for slot, mj in (("A", self.a_major), ("B", self.b_major)):
            if mj not in ("K", "MN"):
                yield f"{slot} major '{mj}' (K or MN)"
            elif mj == "MN" and self.kind in ("mxf4", "mxf4nvf4"):
                # PTX ISA 9.7.16.10.1, Table 49: no transpose for kind::mxf4 / mxf4nvf4 (their
                # E2M1 is packed two per byte); idesc bits 15-16 must be 0 (Table 43)
                yield (f"{slot} of kind::{self.kind} must be K-major (PTX ISA Table 49: no "
                       f"transpose for kind::mxf4 / mxf4nvf4)")
        # FP4/FP6 of kind::f8f6f4 / mxf8f6f4 may be MN-major: Table 49 allows transpose for
        # both kinds with no sub-byte exception; in shared memory they sit in 8-bit containers
        # (the padded-packed units of 9.7.16.10.4.4, 16 elements along the contiguous
        # dimension), so the 8-bit rules apply (docs/spec-deviations.md, "SM100 tcgen05")
        if self.b_major == "MN" and self.element_bits("B") == 8 and \
                self.n % (16 * self.cta_group):
            # PTX ISA 9.7.16.10.1, Table 50 "N shape with .cta_group for 8bit transpose B"
            yield (f"8-bit MN-major (transposed) B needs N a multiple of "
                   f"{16 * self.cta_group} (cta_group::{self.cta_group}), got N = {self.n}")
        if self.a_source == "ts" and self.a_major != "K":
            yield "A from tensor memory is K-major"
        if self.a_source not in ("ss", "ts"):
            yield f"A source '{self.a_source}'"
        if self.ws and (not k.ws or self.cta_group != 1):
            yield ".ws needs cta_group::1 and a kind with a .ws form"
        if k.block_scaled:
            if self.sf not in k.sf_types:
                yield (f"scale type {self.sf.name if self.sf else None} (kind::{self.kind}: "
                       f"{', '.join(x.name for x in k.sf_types)})")
            elif self.scale_vec is None and self.vec_size is not None:
                yield (f"vector size {self.vec_size} with {self.sf.name} is not a "
                       f"kind::{self.kind} scale vector (K = {self.k})")
            if self.vec_size is None:
                yield "block-scaled atoms need a vector size"
        elif self.sf is not None or self.vec_size is not None:
            yield f"kind::{self.kind} is not block-scaled"

    # ------------------------------------------------------------------ shape
    @property
    def k(self) -> int:
        return KINDS[self.kind].k_dense * (2 if self.sparse else 1)

    @property
    def shape_mnk(self) -> tuple[int, int, int]:
        return (self.m, self.n, self.k)

    @property
    def shape(self) -> tuple[int, int, int]:
        return self.shape_mnk

    @property
    def block_scaled(self) -> bool:
        return KINDS[self.kind].block_scaled

    @property
    def block_scale_tag(self) -> int:
        """The block-scaled variant this atom carries, as the specification's atom builder
        records it: :func:`block_scale_tag` of :func:`block_scale_packed` at the atom's dense
        (atom_K, vecSize); 0 for an atom that is not block-scaled."""
        if not self.block_scaled or self.sf is None or self.vec_size is None:
            return 0
        dense_vec = self.vec_size // (2 if self.sparse else 1)
        return block_scale_tag(block_scale_packed(self.a, self.b, self.sf, self.sf,
                                                  KINDS[self.kind].k_dense, dense_vec))

    @property
    def mnemonic(self) -> str:
        return "sm100.mma" + ("_bs" if self.block_scaled else "") + \
            ("_sp" if self.sparse else "")

    @property
    def scale_vec(self) -> str | None:
        """The scale-vector qualifier this atom issues (``.scale_vec::NX``, the form ptxas
        accepts on 'a' targets; :meth:`form` can spell ``.blockN`` instead)."""
        if not self.block_scaled or self.vec_size is None:
            return None
        k = KINDS[self.kind]
        count = self.k // self.vec_size if self.k % self.vec_size == 0 else 0
        q = next((q for q, c in SCALE_VEC_COUNT.items() if c == count and q in k.scale_vecs),
                 None)
        if q is None:
            return None
        if q == "scale_vec::4X" and self.sf not in (UE4M3, UE8M0):
            return None
        if q != "scale_vec::4X" and self.sf != UE8M0:
            return None  # 1X/2X carry E8M0 scales (MX formats)
        return q

    @property
    def block_qualifier(self) -> str | None:
        """The ``.blockN`` spelling of the scale vector (``.block16``/``.block32``), which
        sm_100f/103f/110f accept; None when the vector size has no such spelling."""
        if not self.block_scaled or self.scale_vec is None:
            return None
        per_dense = KINDS[self.kind].k_dense // SCALE_VEC_COUNT[self.scale_vec]
        q = f"block{per_dense}"
        return q if q in KINDS[self.kind].scale_vecs else None

    @property
    def name(self) -> str:
        parts = [self.mnemonic, self.kind, f"cta{self.cta_group}",
                 f"m{self.m}n{self.n}k{self.k}", self.a_source]
        if self.ws:
            parts.append("ws")
        parts += [self.d.name, self.a.name, self.b.name]
        if self.block_scaled:
            parts += [self.sf.name if self.sf else "?", f"vs{self.vec_size}"]
        if self.a_major == "MN":
            parts.append("amn")
        if self.b_major == "MN":
            parts.append("bmn")
        return ".".join(parts)

    def __str__(self) -> str:
        return self.name

    def form(self, *, block_spelling: bool = False, **qualifiers: Any) -> Tcgen05MmaForm:
        """The instruction form this atom issues; ``block_spelling`` picks ``.blockN`` over
        ``.scale_vec::NX``; other optional qualifiers/operands pass through."""
        sv = None
        if self.block_scaled:
            sv = self.block_qualifier if block_spelling else self.scale_vec
            if sv is None:
                raise UmmaError(f"{self.name}: no {'.blockN' if block_spelling else 'scale_vec'}"
                                " spelling for this vector size")
        return Tcgen05MmaForm(self.kind, self.cta_group, self.a_source, self.sparse, self.ws,
                              sv, **qualifiers)

    def idesc(self, **fields: Any) -> Any:
        """The instruction descriptor (nvatom.descriptors.umma) of this atom."""
        return instr_desc_for(self, **fields)

    # ------------------------------------------------------------------ availability
    @property
    def feature(self) -> str:
        """The most specific nvatom.arch feature the atom needs (named in diagnostics)."""
        if self.sparse and self.kind in ("mxf4", "mxf4nvf4"):
            return "tcgen05.mxf4.sp"
        return KINDS[self.kind].feature

    def available_on(self, t: Target | str) -> bool:
        """Some spelling of the atom assembles on ``t``: ``.scale_vec::NX`` ('a' targets) or,
        for block-scaled atoms, ``.blockN`` (also the 'f' targets, PTX 8.8)."""
        if self.form().available_on(t):
            return True
        return self.block_qualifier is not None and \
            self.form(block_spelling=True).available_on(t)

    def issued_form(self, t: Target | str) -> Tcgen05MmaForm:
        """The form to emit on ``t`` (``.scale_vec::NX`` where it exists, else ``.blockN``)."""
        f = self.form()
        if not f.available_on(t) and self.block_qualifier is not None:
            f = self.form(block_spelling=True)
        if not f.available_on(t):
            raise UmmaError(f"atom '{self.name}' is not available on {target(t).name}")
        return f

    def ptx_version_for(self, t: Target | str) -> PtxVersion:
        return self.issued_form(t).ptx_version_for(t)

    def verify_instance(self, target_: Target | str, use: Any) -> None:
        verify_umma(self, target_, use)

    # ------------------------------------------------------------------ operand extents
    def operand_shape(self, operand: str) -> tuple[int, int]:
        """(rows, cols) of the operand tile one instruction reads/writes: A (M, K), B (N, K),
        D (M, N); SFA (M, K/vec), SFB (N, K/vec); sparse A is (M, K/2) stored."""
        op = operand.upper()
        if op == "A":
            return (self.m, self.k // 2 if self.sparse else self.k)
        if op == "B":
            return (self.n, self.k)
        if op in ("C", "D"):
            return (self.m, self.n)
        if op in ("SFA", "SFB") and self.block_scaled and self.vec_size:
            return (self.m if op == "SFA" else self.n, self.k // self.vec_size)
        raise UmmaError(f"{self.name}: no operand '{operand}'")


    # ------------------------------------------------------------------ operand layouts
    @property
    def datapath(self) -> str:
        """The ISA's data-path layout id (A..G) of this atom's D (:data:`DATAPATH_OF`)."""
        return layout_id(self.m, self.cta_group, self.sparse, self.ws)

    def element_bits(self, operand: str) -> int:
        """Bits per element of A or B as the MMA addresses it: in shared memory FP6/FP4 of
        kind::f8f6f4 / mxf8f6f4 take an 8-bit container (PTX ISA 9.7.16.10.4.4, padded
        packing); in TMEM every f8f6f4 / mxf8f6f4 element is an 8-bit container (9.7.16.10.4.3);
        mxf4 / mxf4nvf4 E2M1 are packed 4-bit."""
        op = operand.upper()
        t = {"A": self.a, "B": self.b}.get(op)
        if t is None:
            raise UmmaError(f"{self.name}: element_bits of A or B, not '{operand}'")
        if self.kind in ("mxf4", "mxf4nvf4"):
            return 4
        if self.kind in ("f8f6f4", "mxf8f6f4"):
            return 8
        return t.storage_bits

    def smem_rows(self, operand: str) -> int:
        """Rows of A (M) or B (N) in each CTA's shared memory: a CTA pair splits them."""
        op = operand.upper()
        return (self.m if op == "A" else self.n) // self.cta_group

    def stored_k(self, operand: str) -> int:
        """K elements of A or B one instruction reads (A of a sparse atom: half)."""
        return self.operand_shape(operand)[1]

    def smem_swizzles(self, operand: str) -> tuple[Any, ...]:
        """The swizzle modes A or B may use in shared memory (nvatom.tables.swizzles)."""
        op = operand.upper()
        major = self.a_major if op == "A" else self.b_major
        bits = self.element_bits(op)
        kbytes = self.stored_k(op) * bits // 8
        # K-major swizzled rows hold row_bytes of K: the 64-byte K of a sparse B does not fit
        # a 32-byte row (one canonical layout per instruction; not modelled otherwise)
        return tuple(sw for sw in swizzles.umma_swizzles_for(major, bits)
                     if major == "MN" or not sw.nbytes or kbytes <= sw.row_bytes)

    def smem_layout(self, operand: str, swizzle: Any, lbo: int | None = None,
                    sbo: int | None = None) -> Any:
        """The PTX ISA's canonical shared-memory layout of A or B for one instruction, per CTA:
        ``(mn, k)`` -> element offset (nvatom.tables.swizzles.UMMA_SMEM_CANONICAL), LBO / SBO in
        elements (None: a compact tile's).  Raises for a swizzle the operand cannot use (tf32
        MN-major takes only SW128_32B)."""
        op = operand.upper()
        if op == "A" and self.a_source != "ss":
            raise UmmaError(f"{self.name}: A is in tensor memory (ts), not shared memory")
        sw = swizzles.smem_swizzle(swizzle, umma=True)
        legal = self.smem_swizzles(op)
        major = self.a_major if op == "A" else self.b_major
        if sw not in legal:
            raise UmmaError(
                f"{self.name}: {major}-major {op} of {self.element_bits(op)}-bit elements takes "
                f"the swizzle modes {', '.join(x.name for x in legal)}, not {sw.name}"
                + (" (tf32 MN-major exists only with the 128-byte swizzle of 32-byte atomicity)"
                   if major == "MN" and self.element_bits(op) == 32 else ""))
        return swizzles.umma_canonical_layout(major, sw, self.element_bits(op),
                                              self.smem_rows(op), self.stored_k(op), lbo, sbo)

    def scale_count(self) -> int:
        """Scale factors per row per instruction (K / vector size)."""
        if not self.block_scaled or not self.vec_size:
            raise UmmaError(f"{self.name} is not block-scaled")
        return self.k // self.vec_size

    def tmem_layout(self, operand: str) -> Layout:
        """Where an operand in TMEM sits, per CTA: ``D`` (:func:`d_tmem_layout`), ``A`` of a
        ``ts`` atom (:func:`a_tmem_layout`), ``SFA`` / ``SFB`` (:func:`sf_tmem_layout`);
        coordinates -> offset from the operand's TMEM address (``lane << 16 | column``)."""
        op = operand.upper()
        args = (self.m, self.n, self.cta_group, self.sparse, self.ws)
        if op in ("C", "D"):
            return d_tmem_layout(*args)
        if op == "A":
            if self.a_source != "ts":
                raise UmmaError(f"{self.name}: A is in shared memory (ss), not tensor memory")
            return a_tmem_layout(self.m, self.n, self.stored_k("A"), self.element_bits("A"),
                                 self.cta_group, self.sparse, self.ws)
        if op in ("SFA", "SFB") and self.block_scaled:
            rows = self.m // self.cta_group if op == "SFA" else self.n
            return sf_tmem_layout(rows, self.scale_count(),
                                  sf_datapath(op, self.m, self.cta_group, self.sparse))
        raise UmmaError(f"{self.name}: no operand '{operand}' in tensor memory")

    def tmem_tile(self, operand: str) -> tuple[int, int]:
        """(rows, cols) of :meth:`tmem_layout`'s tile in one CTA."""
        op = operand.upper()
        if op in ("C", "D"):
            return (self.m // self.cta_group, self.n)
        if op == "A":
            return (self.m // self.cta_group, self.stored_k("A"))
        rows = self.m // self.cta_group if op == "SFA" else self.n
        return (rows, self.scale_count())


# Capability interfaces by mnemonic (the specification's registry): sparse -> SparseMetadataAtom,
# block-scaled -> BlockScaleAtom.  Python classes carry them, so the atom's class is chosen
# when it is made.
class _SparseUmmaAtom(UmmaAtom, SparseMetadataAtom):
    def metadata_layout(self, selector: int = 0) -> Any:
        return (self.m, self.k // 8)  # 2:4: two 2-bit indices per group of 4 -> K/8 bytes


class _BsUmmaAtom(UmmaAtom, BlockScaleAtom):
    pass


class _BsSparseUmmaAtom(UmmaAtom, BlockScaleAtom, SparseMetadataAtom):
    def metadata_layout(self, selector: int = 0) -> Any:
        return (self.m, self.k // 8)


def make_umma_atom(kind: str, cta_group: int, m: int, n: int, d: DType | str, a: DType | str,
                   b: DType | str, *, a_source: str = "ss", sparse: bool = False,
                   ws: bool = False, a_major: str = "K", b_major: str = "K",
                   sf: DType | str | None = None, vec_size: int | None = None) -> UmmaAtom:
    """An atom with the right capability interfaces for its mnemonic."""
    bs = kind in KINDS and KINDS[kind].block_scaled
    cls: type[UmmaAtom] = {(False, False): UmmaAtom, (True, False): _SparseUmmaAtom,
                           (False, True): _BsUmmaAtom, (True, True): _BsSparseUmmaAtom}[
        (sparse, bs)]
    return cls(kind, cta_group, m, n, dtype(d), dtype(a), dtype(b), a_source, sparse, ws,
               a_major, b_major, dtype(sf) if sf is not None else None, vec_size)


# numbers of at most 9 digits: a longer one is no atom, and int() of 4,300+ digits raises
# (the 1M fuzz campaign, seed 20261201, atom_name:17885: a 5,002-digit vs)
_NAME_RE = re.compile(
    r"(?P<mn>sm100\.mma(?:_bs)?(?:_sp)?)\.(?P<kind>\w+)\.cta(?P<cta>[12])\."
    r"m(?P<m>\d{1,9})n(?P<n>\d{1,9})k(?P<k>\d{1,9})\.(?P<src>ss|ts)(?P<ws>\.ws)?\."
    r"(?P<d>\w+)\.(?P<a>\w+)\.(?P<b>\w+)(?:\.(?P<sf>ue8m0|ue4m3)\.vs(?P<vs>\d{1,9}))?"
    r"(?P<amn>\.amn)?(?P<bmn>\.bmn)?$"
)


def umma_atom(name: str) -> UmmaAtom:
    """Parse an atom name (see the module docstring); the name must round-trip."""
    m = _NAME_RE.match(name.strip())
    if not m:
        raise UmmaError(f"'{name}' is not a UMMA atom name (e.g. "
                        "sm100.mma.f16.cta1.m128n256k16.ss.f32.f16.f16)")
    g = m.groupdict()
    atom = make_umma_atom(
        g["kind"], int(g["cta"]), int(g["m"]), int(g["n"]), g["d"], g["a"], g["b"],
        a_source=g["src"], sparse=g["mn"].endswith("_sp"), ws=bool(g["ws"]),
        a_major="MN" if g["amn"] else "K", b_major="MN" if g["bmn"] else "K",
        sf=g["sf"], vec_size=int(g["vs"]) if g["vs"] else None)
    if atom.name != name.strip():
        raise UmmaError(f"'{name}' does not name a UMMA atom: it reads as {atom.name}")
    return atom


def _vec_sizes(k: UmmaKind, sparse: bool) -> list[tuple[DType, int]]:
    kk = k.k_dense * (2 if sparse else 1)
    out = []
    for q in k.scale_vecs:
        if q is None or q in SCALE_VEC_BLOCK:
            continue
        vs = kk // SCALE_VEC_COUNT[q]
        for sf in k.sf_types:
            if (q == "scale_vec::4X") or sf == UE8M0:
                out.append((sf, vs))
    return out


def umma_atoms(target_: Target | str | None = None, *, mnemonic: str | None = None,
               kind: str | None = None, cta_group: int | None = None,
               a: DType | str | None = None, b: DType | str | None = None,
               d: DType | str | None = None, m: int | None = None, n: int | None = None,
               a_source: str | None = None, ws: bool | None = None) -> Iterator[UmmaAtom]:
    """Every K-major UMMA atom matching the filters (a generator: the lattice is large)."""
    ta, tb, td = (dtype(x) if x is not None else None for x in (a, b, d))
    tt = target(target_) if target_ is not None else None
    for kname, k in KINDS.items():
        if kind is not None and kname != kind:
            continue
        for cta, sp, is_ws, src in itertools.product((1, 2), (False, True), (False, True),
                                                     ("ss", "ts")):
            if is_ws and (not k.ws or cta != 1):
                continue
            if (cta_group is not None and cta != cta_group) or \
                    (ws is not None and is_ws != ws) or (a_source is not None and src != a_source):
                continue
            mnem = "sm100.mma" + ("_bs" if k.block_scaled else "") + ("_sp" if sp else "")
            if mnemonic is not None and mnem != mnemonic:
                continue
            pairs = [(x, y) for x in k.ab for y in k.ab if k.mixed_ab or x == y]
            sfs: list[tuple[DType | None, int | None]] = \
                list(_vec_sizes(k, sp)) if k.block_scaled else [(None, None)]
            for (xa, xb), xd, (mm, nn), (sf, vs) in itertools.product(
                    pairs, k.d, legal_mn(kname, cta, sp, is_ws), sfs):
                if (ta and xa != ta) or (tb and xb != tb) or (td and xd != td):
                    continue
                if (m is not None and mm != m) or (n is not None and nn != n):
                    continue
                if kname == "f16" and xa == BF16 and xd != F32:
                    continue
                atom = make_umma_atom(kname, cta, mm, nn, xd, xa, xb, a_source=src, sparse=sp,
                                      ws=is_ws, sf=sf, vec_size=vs)
                if tt is not None and not atom.available_on(tt):
                    continue
                yield atom


# ============================================================================ verification


@dataclasses.dataclass(frozen=True)
class UmmaUse:
    """What surrounding code feeds a UMMA atom (the specification's ladder inputs).

    ``residency``: ``smem_desc_view``, ``tmem`` (a memref in tensor memory), ``rmem``,
    ``smem`` or ``gmem``; ``layout``: an (mn, k) / (m, n) layout of the operand tile, or None.
    """

    a: Any  # nvatom.atoms.verify.OperandUse
    b: Any
    c: Any
    d: Any = None
    sfa: Any = None
    sfb: Any = None
    metadata: Any = None
    shape: tuple[int, int, int] | None = None

    @property
    def d_(self) -> Any:
        return self.d if self.d is not None else self.c

    @classmethod
    def canonical(cls, atom: UmmaAtom) -> UmmaUse:
        a_res = "smem_desc_view" if atom.a_source == "ss" else "tmem"
        sfa = sfb = meta = None
        if atom.block_scaled:
            sfa = sfb = OperandUse(atom.sf.name if atom.sf else "ue8m0", "tmem")
        if atom.sparse:
            meta = OperandUse("u32", "tmem")
        return cls(OperandUse(atom.a.name, a_res, atom.operand_shape("A")),
                   OperandUse(atom.b.name, "smem_desc_view", atom.operand_shape("B")),
                   OperandUse(atom.d.name, "tmem", atom.operand_shape("D")),
                   OperandUse(atom.d.name, "tmem", atom.operand_shape("D")),
                   sfa, sfb, meta, atom.shape_mnk)


def _fail(msg: str) -> None:
    raise AtomVerificationError(msg)


def _layout_shape(layout: Any) -> tuple[int, int] | None:
    """(rows, cols) of an operand layout: a (rows, cols) tuple or a rank-2 Layout."""
    if layout is None:
        return None
    if isinstance(layout, tuple) and len(layout) == 2 and all(isinstance(x, int) for x in layout):
        return layout
    lay = layout.outer if isinstance(layout, ComposedLayout) else layout
    if isinstance(lay, Layout) and rank(lay) == 2:
        return (size(lay[0]), size(lay[1]))
    return None


def verify_umma(atom: UmmaAtom, target_: Target | str, use: UmmaUse) -> None:
    """The specification's UMMA ladder, first failure wins: target and shape; element types a, b, c
    (c for both C and D); residency A, B, D; block-scale checks (c type, sfa/sfb types, the
    (atom_K, vecSize) pair); sparse metadata; per-operand layouts, then their composition."""

    t = target(target_)
    check_target_and_shape(atom, t, use)
    a, b, c, d = use.a, use.b, use.c, use.d_
    if atom.block_scaled and (c.dtype != F32 or d.dtype != F32):
        _fail(D.UMMA_BS_C_F32)
    for slot, got, want in (("a", a, atom.a), ("b", b, atom.b), ("c", c, atom.d),
                            ("c", d, atom.d)):
        if got.dtype != want:
            _fail(D.OPERAND_ELEMENT_TYPE.format(slot, want.name, got.dtype.name))
    a_ok = ("smem_desc_view",) if atom.a_source == "ss" else ("tmem",)
    if a.residency not in a_ok:
        _fail(D.UMMA_RESIDENCY_A.format(a))
    if b.residency != "smem_desc_view":
        _fail(D.UMMA_RESIDENCY_B.format(b))
    if d.residency != "tmem":
        _fail(D.UMMA_RESIDENCY_D.format(d))
    if atom.block_scaled:
        if use.sfa is None or use.sfb is None:
            _fail(f"atom '{atom.name}' expects scale-factor operands sfa and sfb in tmem")
        if use.sfa.dtype != use.sfb.dtype:
            _fail(D.UMMA_BS_SF_SAME)
        if use.sfa.residency != "tmem" or use.sfb.residency != "tmem":
            _fail(f"atom '{atom.name}' expects sfa/sfb in tmem, but got sfa: {use.sfa}, "
                  f"sfb: {use.sfb}")
        # the specification's (atom_K, vecSize) pairs are dense; a sparse atom has the same scale
        # count over twice the logical K, so it is checked at its dense K.
        dense_vec = (atom.vec_size or 0) // (2 if atom.sparse else 1)
        if block_scale_packed(a.dtype, b.dtype, use.sfa.dtype, use.sfb.dtype,
                              KINDS[atom.kind].k_dense, dense_vec) == 0:
            _fail(f"atom '{atom.name}': no block-scaled MMA for A {a.dtype.name}, B "
                  f"{b.dtype.name}, scale {use.sfa.dtype.name}, vector size {atom.vec_size}")
        if use.sfa.dtype != atom.sf:
            _fail(f"atom '{atom.name}' expects scale factors of type {atom.sf.name}, but got "
                  f"{use.sfa.dtype.name}")
    elif use.sfa is not None or use.sfb is not None:
        _fail(f"atom '{atom.name}' is not block-scaled and takes no scale factors")
    if atom.sparse:
        if use.metadata is None or use.metadata.residency != "tmem":
            _fail(f"atom '{atom.name}' expects the sparse metadata in tmem, but got "
                  f"{use.metadata}")
    elif use.metadata is not None:
        _fail(f"atom '{atom.name}' is dense and takes no metadata")
    # Layouts: an operand without one (None) is not checked.  Each given layout must be a
    # rank-2 tile of whole atoms (A: M x K, B: N x K, D: M x N); then the given ones must agree
    # on M, N and K (A's K counts stored elements: half the logical K when sparse).
    given = [x.layout is not None for x in (a, b, d)]
    if any(given):
        shapes = [_layout_shape(x.layout) if g else None for x, g in zip((a, b, d), given,
                                                                          strict=True)]
        want = [atom.operand_shape(o) for o in ("A", "B", "D")]
        for g, s_, w in zip(given, shapes, want, strict=True):
            if g and (s_ is None or s_[0] % w[0] or s_[1] % w[1]):
                _fail(D.UMMA_INVALID_LAYOUT.format(a.layout, b.layout, d.layout))
        sa, sb, sd = shapes
        a_mk = (sa[0], sa[1] * (2 if atom.sparse else 1)) if sa else None
        if (a_mk and sd and a_mk[0] != sd[0]) or (sb and sd and sb[0] != sd[1]) or \
                (a_mk and sb and a_mk[1] != sb[1]):
            _fail(D.UMMA_NOT_A_GEMM.format(a.layout, b.layout, d.layout))
    # Then each declared layout against the atom's own (the spec: "expects Mma atom layout of
    # " + the canonical reference layout): A / B in shared memory against the ISA's canonical
    # form of their swizzle, A / D in TMEM against the data-path layout (first atom tile of
    # this CTA, relative to its address), the scale factors through scale_factor_layout_is_legal.
    for name, op in (("A", a), ("B", b), ("D", d)):
        want = _layout_mismatch(atom, name, op.layout)
        if want is not None:
            _fail(f"{D.MMA_ATOM_LAYOUT}{want} for operand {name}, but got {op.layout}")
    if atom.block_scaled and not scale_factor_layout_is_legal(atom, use.sfa.layout,
                                                              use.sfb.layout):
        for name, op in (("SFA", use.sfa), ("SFB", use.sfb)):
            want = _layout_mismatch(atom, name, op.layout)
            if want is not None:
                _fail(f"{D.MMA_ATOM_LAYOUT}{want} for operand {name}, but got {op.layout}")


def _layout_mismatch(atom: UmmaAtom, operand: str, layout: Any) -> Any:
    """None when ``layout`` (or its absence, or a bare (rows, cols) shape) agrees with the
    atom's layout of ``operand``; else the layout the atom expects (for the diagnostic)."""
    if layout is None or (isinstance(layout, tuple) and all(isinstance(x, int)
                                                            for x in layout)):
        return None
    if operand in ("A", "B") and (operand == "B" or atom.a_source == "ss"):
        return _smem_mismatch(atom, operand, layout)
    want = atom.tmem_layout(operand)
    rows, cols = atom.tmem_tile(operand)
    if isinstance(layout, Layout) and layout.rank == 2 and is_int(layout.shape[0]) and \
            is_int(layout.shape[1]) and layout.stride == (layout.shape[1], 1):
        # a TMEM buffer of (lanes, columns) stored row-major (the IR's cute.alloc_tmem
        # memref): element (lane, column) is at address lane << 16 | column
        layout = Layout(layout.shape, (_Tmem.L, 1))
    if isinstance(layout, ComposedLayout) or not _same_on(layout, want, rows, cols):
        return want
    return None


def _smem_mismatch(atom: UmmaAtom, operand: str, layout: Any) -> Any:
    bits = atom.element_bits(operand)
    major = atom.a_major if operand == "A" else atom.b_major
    rows, k = atom.smem_rows(operand), atom.stored_k(operand)
    legal = atom.smem_swizzles(operand)
    sw = swizzles.smem_swizzle_of(layout, bits, umma=True) \
        if isinstance(layout, (Layout, ComposedLayout)) else None
    if sw is None or sw not in legal:
        return atom.smem_layout(operand, legal[-1])
    lbo, sbo = swizzles.umma_canonical_params(layout, major, sw, bits, rows, k)
    want = swizzles.umma_canonical_layout(major, sw, bits, rows, k, lbo, sbo)
    outer = layout.outer if isinstance(layout, ComposedLayout) else layout
    want_outer = want.outer if isinstance(want, ComposedLayout) else want
    return None if _same_on(outer, want_outer, rows, k) else want


def scale_factor_layout_is_legal(atom: UmmaAtom, sfa_layout: Any, sfb_layout: Any) -> bool:
    """The specification's ``scale_factor_layout_is_legal(atom, use.scale_factors)`` for SM100
    block-scaled atoms: each given scale-factor layout places this CTA's first instruction's
    scale factors where tcgen05.mma reads them (:func:`sf_tmem_layout`: row r in lane r % 32,
    column r // 32, the ``K / vec`` factors of a row in one word; SFB of Layout B split 2x2),
    relative to its TMEM address.  Layouts not given (None) or given only as a shape pass."""
    if not atom.block_scaled:
        return sfa_layout is None and sfb_layout is None
    return all(_layout_mismatch(atom, name, lay) is None
               for name, lay in (("SFA", sfa_layout), ("SFB", sfb_layout)))


# ============================================================================ block scaling


_FP8 = _t("e4m3", "e5m2")
_FP6 = _t("e2m3", "e3m2")


def block_scale_packed(a: DType | str, b: DType | str, sfa: DType | str, sfb: DType | str,
                       atom_k: int, vec_size: int) -> int:
    """The specification's block-scale verifier result: ``(atom_K << 32) | vecSize`` for its three
    legal (atom_K, vecSize) pairs, else 0.  Accepted: A and B both FP8/FP6/FP4-in-8-bit at
    K = 32, or both E2M1 at K = 64; (sf, vec) in (E8M0, 32), (E8M0, 16), (E4M3, 16); sfa and
    sfb of one type.  The PTX kind each pair really issues is :func:`block_scale_kind`."""
    ta, tb, sa, sb = dtype(a), dtype(b), dtype(sfa), dtype(sfb)
    if sa != sb:
        return 0
    if atom_k == 32 and ta in F8F6F4 and tb in F8F6F4 and (sa, vec_size) == (UE8M0, 32):
        return (32 << 32) | 32
    if atom_k == 64 and ta == tb == E2M1 and (sa, vec_size) in ((UE8M0, 32), (UE8M0, 16),
                                                                 (UE4M3, 16)):
        return (64 << 32) | vec_size
    return 0


def block_scale_tag(packed: int) -> int:
    """The variant tag of a :func:`block_scale_packed` result, as the specification computes it:
    "Callers mask the result with ~7" (000, "SM100 UMMA Block-Scaled (atom_K, vecSize) Atoms").

    The specification also calls it "a 3-bit tag from the low bits"; the two readings
    contradict each other, and the low three bits carry nothing: every legal packed value
    has a vecSize of 16 or 32, so ``packed & 7`` is 0 for all three variants and ``packed & ~7``
    is the packed value itself.  nvatom keeps the written operation (``& ~7``), which tells
    the three variants apart (and is 0 for an illegal combination); no 3-bit field exists
    (docs/spec-deviations.md, "Block-scale packed value")."""
    return packed & ~7


def block_scale_kind(a: DType | str, b: DType | str, sf: DType | str, vec_size: int
                     ) -> tuple[str, str, str]:
    """(kind, scale-vector qualifier, block qualifier) tcgen05 issues for a block-scaled
    (A, B, scale type, vector size) -- docs/spec-deviations.md, "SM100 tcgen05": vec 32 E8M0 FP8/FP6
    -> mxf8f6f4 1X; vec 32
    E8M0 FP4 -> mxf4 2X (MXFP4); vec 16 FP4 -> mxf4nvf4 4X (NVFP4, normally UE4M3)."""
    ta, tb, s = dtype(a), dtype(b), dtype(sf)
    if ta == tb == E2M1:
        if vec_size == 32 and s == UE8M0:
            return ("mxf4", "scale_vec::2X", "block32")
        if vec_size == 16 and s in (UE8M0, UE4M3):
            return ("mxf4nvf4", "scale_vec::4X", "block16")
    elif ta in F8F6F4 and tb in F8F6F4 and vec_size == 32 and s == UE8M0:
        return ("mxf8f6f4", "scale_vec::1X", "block32")
    raise UmmaError(f"no tcgen05 block-scaled kind for A {ta.name}, B {tb.name}, scale "
                    f"{s.name}, vector size {vec_size}")
