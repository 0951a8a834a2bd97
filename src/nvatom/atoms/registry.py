"""The atom registry: every atom family registers here once.

A family (:class:`AtomFamily`) is a set of atom kinds (registry mnemonics, :data:`ATOMS`) that
share a name grammar and a table: its resolver (name -> atom), its table (the atoms available
on a target), its fragment view (atom, operand -> the (thread, value) layout the
``frag`` command draws) and the mnemonics whose IR type it backs.  :data:`FAMILIES` lists
them; :func:`family` finds one by name and :func:`family_of_name` the family an atom name
belongs to.  Everything that walks atoms reads this table: ``nvatom atoms`` / ``frag`` /
``emit`` (the CLI keys its per-family printers by :attr:`AtomFamily.name`), the IR's atom
types (:mod:`nvatom.ir.types` makes one ``!cute_nvgpu.<mnemonic>`` type per dialect mnemonic of
every family) and the verifier (every atom a family resolves implements an interface of
:mod:`nvatom.atoms.interfaces`, which :func:`~nvatom.atoms.interfaces.verify_atom_instance`
dispatches on).  tests/atoms/test_registry.py walks :data:`FAMILIES` through each of them.

Emitters live above this room (:mod:`nvatom.ptx` imports atoms, never the reverse), so the
registry names no emitter: the CLI, which may import both, keys its emitters by family name,
and the test checks that every family has one (docs/atoms.md, "The atom registry").

Below the families, the atom kinds (:mod:`nvatom.atoms.records`: :data:`ATOMS`, the target
rule of each mnemonic) and the register-MMA forms (:mod:`nvatom.atoms.register_mma`:
:func:`mma_form`, :func:`mma_forms`) are re-exported here.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from typing import Any

from nvatom.arch import Target, Tier, target
from nvatom.atoms import copy, sm90, sm100, sm120, tmem
from nvatom.atoms.records import ATOMS, AtomRecord, UnknownAtomError, atom_record
from nvatom.atoms.register_mma import all_forms, mma_form, mma_forms
from nvatom.atoms.universal import UniversalFma
from nvatom.atoms.wgmma_fragments import wgmma_tv_layout
from nvatom.dtypes import DType, all_dtypes, dtype
from nvatom.errors import NvatomError

__all__ = [
    "ATOMS",
    "FAMILIES",
    "AtomFamily",
    "AtomRecord",
    "UnknownAtomError",
    "atom_record",
    "check_shape_in_lattice",
    "family",
    "family_of_name",
    "mma_form",
    "mma_forms",
]


@dataclasses.dataclass(frozen=True)
class AtomFamily:
    """One atom family: its registry mnemonics, name grammar, resolver, table, fragment view.

    ``prefixes``: the atom names the family resolves start with one of these (the longest
    matching prefix over all families wins, so ``atom.tmem_`` beats ``atom.``).  ``joiner``
    spells a name from a mnemonic and an IR type body: ``"."`` (``sm80.mma`` +
    ``m16n8k16...``) or ``"<>"`` (``atom.ldsm`` + ``m8n8.x4``).  ``parses_names``: names
    carry free parameters or the lattice is too large to list, so a name is resolved by
    parsing it rather than looked up in the table (the IR does the same for a type body).
    """

    name: str
    kind: str  # "mma", "copy" or "tma": the primary interface of its atoms
    mnemonics: tuple[str, ...]
    module: str  # the atoms module that holds the family's table
    grammar: str  # the name grammar (docs/atom-names.md)
    example: str | None  # one atom name (None: the family's atoms are not named, TMA)
    prefixes: tuple[str, ...]
    resolve: Callable[[str], Any] | None
    table: Callable[[Target | None], Iterable[Any]]
    fragment: Callable[[Any, str], Any] | None = None  # (atom, operand) -> TV layout
    operands: tuple[str, ...] = ()  # the operands ``fragment`` answers
    joiner: str = "."
    parses_names: bool = False

    def __post_init__(self) -> None:
        unknown = [m for m in self.mnemonics if m not in ATOMS]
        if unknown:
            raise NvatomError(f"atom family {self.name}: no registry record for {unknown}")

    @property
    def records(self) -> tuple[AtomRecord, ...]:
        return tuple(ATOMS[m] for m in self.mnemonics)

    def allowed_on(self, t: Target | str) -> bool:
        """Does any atom kind of the family exist on ``t`` (the records' target rules)?"""
        return any(r.allowed_on(t) for r in self.records)

    def atoms(self, target_: Target | str | None = None, *, mnemonic: str | None = None
              ) -> list[Any]:
        """The family's atoms available on ``target_`` (None: all), of one mnemonic."""
        t = target(target_) if target_ is not None else None
        return [a for a in self.table(t) if mnemonic is None or a.mnemonic == mnemonic]

    def atom(self, name: str) -> Any:
        """The atom a name spells (raises the family's own error naming the value)."""
        if self.resolve is None:
            raise UnknownAtomError(f"{self.name} atoms are not named: {self.grammar}")
        return self.resolve(name)

    def spell(self, mnemonic: str, body: str) -> str:
        """The atom name of an IR type body: ``mnemonic.body`` or ``mnemonic<body>``."""
        return f"{mnemonic}<{body}>" if self.joiner == "<>" else f"{mnemonic}.{body}"

    def prefix_length(self, name: str) -> int:
        return max((len(p) for p in self.prefixes if name.startswith(p)), default=0)


def _universal_fma(name: str) -> UniversalFma:
    return UniversalFma.of(name.removeprefix(f"{UniversalFma.mnemonic}."))


def _register_mma_table(t: Target | None) -> list[Any]:
    return mma_forms(t)


def _fragment(atom: Any, operand: str) -> Any:
    return atom.tv_layout(operand)


def _copy_fragment(atom: Any, side: str) -> Any:
    return getattr(atom, f"{side.lower()}_layout")(1)


def _tmem_fragment(atom: Any, operand: str) -> Any:
    return atom.tv_layout()


def _umma_fragment(atom: Any, operand: str) -> Any:
    return atom.tmem_layout(operand)


def _tma_table(t: Target | None) -> list[Any]:
    return []  # TMA atoms are made from a tensor map (nvatom.atoms.tma), not named


_REGISTER_MMA = ("sm70.mma", "sm75.mma", "sm80.mma", "sm80.sparse_mma", "sm89.mma",
                 "sm89.sparse_mma")
_TMA = ("atom.tma_load", "atom.tma_store", "atom.tma_reduce", "atom.non_exec_tiled_tma_load",
        "atom.non_exec_tiled_tma_store", "atom.non_exec_tiled_tma_reduce", "atom.make_exec_tma",
        "prefetch_tma_desc")

#: Every atom family, in the order ``nvatom atoms --family all`` lists them.
FAMILIES: tuple[AtomFamily, ...] = (
    AtomFamily("universal_fma", "mma", ("atom.universal_fma",), "nvatom.atoms.universal",
               "atom.universal_fma.<type>", "atom.universal_fma.f32", ("atom.universal_fma",),
               _universal_fma, lambda t: [UniversalFma.of(d) for d in all_dtypes()],
               _fragment, ("A", "B", "C", "D"), parses_names=True),
    AtomFamily("register_mma", "mma", _REGISTER_MMA, "nvatom.atoms.register_mma",
               "<mnemonic>.<shape>[.<alayout>.<blayout>][.satfinite][.ordered_metadata]"
               ".<dtype>.<atype>.<btype>.<ctype>[.<bop>]",
               "sm80.mma.m16n8k16.f32.bf16.bf16.f32", ("sm70.", "sm75.", "sm80.", "sm89."),
               mma_form, _register_mma_table, _fragment, ("A", "B", "C", "D")),
    AtomFamily("wgmma", "mma", ("sm90.mma",), "nvatom.atoms.sm90",
               "sm90.mma.m64n<N>k<K>.<ss|rs>[.satfinite].<dtype>.<atype>.<btype>",
               "sm90.mma.m64n8k16.ss.f32.f16.f16", ("sm90.",), sm90.wgmma_form,
               lambda t: [f for f in sm90.FORMS if t is None or f.available_on(t)],
               wgmma_tv_layout, ("D", "A")),
    AtomFamily("umma", "mma", ("sm100.mma", "sm100.mma_sp", "sm100.mma_bs", "sm100.mma_bs_sp"),
               "nvatom.atoms.sm100",
               "sm100.mma[_sp|_bs|_bs_sp].<kind>.cta<1|2>.m<M>n<N>k<K>.<ss|ts>[.ws]"
               ".<d>.<a>.<b>[.<sf>.vs<V>]",
               "sm100.mma.f16.cta1.m128n64k16.ss.f32.f16.f16", ("sm100.",), sm100.umma_atom,
               lambda t: sm100.umma_atoms(t), _umma_fragment, ("D",), parses_names=True),
    AtomFamily("sm120", "mma", ("SM120.mma_bs", "sm120.mma", "sm120.sparse_mma"),
               "nvatom.atoms.sm120",
               "SM120.mma_bs.<shape>.<kind>.<types>[.sfa_b<byte>t<thread>.sfb_b<byte>t<thread>]"
               " | sm120[.sparse].mma.<shape>...",
               "SM120.mma_bs.m16n8k32.mxf8f6f4.1X.f32.e4m3.e4m3.f32.ue8m0",
               ("SM120.", "sm120."), sm120.sm120_form, lambda t: sm120.forms(t), _fragment,
               ("A", "B", "C", "D"), parses_names=True),
    AtomFamily("copy", "copy",
               ("atom.universal_copy", "atom.ldsm", "atom.stsm", "atom.simt_async_copy"),
               "nvatom.atoms.copy", "<mnemonic><<params>>", "atom.ldsm<m8n8.x4>", ("atom.",),
               copy.copy_atom, lambda t: copy.copy_atoms(t), _copy_fragment, ("SRC", "DST"),
               joiner="<>"),
    AtomFamily("tmem", "copy", ("atom.tmem_load", "atom.tmem_store", "atom.s2t_copy"),
               "nvatom.atoms.tmem",
               "atom.tmem_load|tmem_store<<shape>.x<N>[.pack::16b][@<split>]> | "
               "atom.s2t_copy<cta_group::<1|2>.<shape>[.<decompress>]>",
               "atom.tmem_load<32x32b.x4>", ("atom.tmem_", "atom.s2t_copy", "atom.tcgen05"),
               tmem.tmem_atom, lambda t: tmem.tmem_atoms(t), _tmem_fragment, ("D",),
               joiner="<>", parses_names=True),
    AtomFamily("tma", "tma", _TMA, "nvatom.atoms.tma",
               "made from a tensor map (nvatom.atoms.tma; nvatom desc tma)", None, (), None,
               _tma_table),
)

_BY_NAME: dict[str, AtomFamily] = {f.name: f for f in FAMILIES}


def family(name: str) -> AtomFamily:
    """The family called ``name`` (one line naming the known ones otherwise)."""
    try:
        return _BY_NAME[name]
    except KeyError:
        raise UnknownAtomError(f"unknown atom family '{name}' (one of "
                               f"{', '.join(_BY_NAME)})") from None


def family_of_name(name: str) -> AtomFamily | None:
    """The family whose name grammar an atom name belongs to (longest prefix), or None."""
    key = name.strip()
    best = max(FAMILIES, key=lambda f: f.prefix_length(key))
    return best if best.prefix_length(key) else None


def _tier(tier: Tier | str) -> Tier:
    if isinstance(tier, Tier):
        return tier
    try:
        return Tier[str(tier).upper()]
    except KeyError:
        raise NvatomError(f"unknown tier '{tier}' (one of {', '.join(Tier.__members__)})") \
            from None


def check_shape_in_lattice(
    tier: Tier | str, mnk: tuple[int, int, int], a: DType | str, b: DType | str,
    c: DType | str,
    *,
    sparse: bool = False,
) -> bool:
    """The specification's lattice gate: is there a (dense, or with ``sparse`` a sparse)
    form of this tier with this shape and element types?  Every tier reads its own table:

    * SM70-SM89: the register-MMA forms of that tier (``sm80.mma``, ``sm89.mma``, ...);
    * SM90: the WGMMA forms (``nvatom.atoms.sm90``: M = 64, K = 256 / bits, the ISA's N);
    * SM100 and SM110: the UMMA atoms (``nvatom.atoms.sm100``: the PTX ISA's kind x M x N
      table, K from the kind, doubled when sparse); SM110 targets run the SM100 atoms
      (tcgen05 on sm_110a/f, docs/spec-deviations.md);
    * SM120: the block-scaled and ``kind::f8f6f4`` forms (``nvatom.atoms.sm120``).
    """
    t = _tier(tier)
    shape = tuple(mnk)
    ta, tb, tc = dtype(a), dtype(b), dtype(c)
    if t == Tier.SM90:
        return not sparse and any(f.shape == shape and (f.a, f.b, f.d) == (ta, tb, tc)
                                  for f in sm90.FORMS)
    if t in (Tier.SM100, Tier.SM110):
        if len(shape) != 3:
            return False
        m, n, k = shape
        return any(u.k == k and u.sparse == sparse
                   for u in sm100.umma_atoms(a=ta, b=tb, d=tc, m=m, n=n))
    return any(
        f.tier == t and f.shape == shape and (f.a, f.b, f.c) == (ta, tb, tc)
        and f.is_sparse == sparse
        for f in (*all_forms(), *sm120.MMA_BS_FORMS, *sm120.F8F6F4_FORMS)
    )
