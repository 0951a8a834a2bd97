"""The types and attributes of the ``cute``, ``cute_nvgpu`` and ``nv_tileas`` dialects.

Every type is a text-bodied type (:func:`nvatom.ir.xdsl_adapter.define_text_type`) whose body a
decoder of the atom layer checks and canonicalises, so a malformed type is a parse error that
points at its parameters, and a type prints exactly as the atom layer's diagnostics quote it.

The atom types are *generated from the atom registry* (data, not code): :data:`ATOM_FAMILIES`
has one row per dialect mnemonic of every family of ``nvatom.atoms.registry.FAMILIES`` (the
mnemonics whose ``nvatom.atoms.registry.ATOMS`` record has a cute_nvgpu spelling), with the
family's table, or its resolver where the family parses names.  Each row is one parametrized
type ``!cute_nvgpu.<mnemonic><body>`` where the body is the atom's name in the table without
the mnemonic (``<`` and ``>`` of copy-atom names dropped)::

    sm80.mma.m16n8k16.f32.bf16.bf16.f32   ->  !cute_nvgpu.sm80.mma<m16n8k16.f32.bf16.bf16.f32>
    sm90.mma.m64n128k16.ss.f32.f16.f16    ->  !cute_nvgpu.sm90.mma<m64n128k16.ss.f32.f16.f16>
    atom.ldsm<m8n8.x4.trans>              ->  !cute_nvgpu.atom.ldsm<m8n8.x4.trans>

A new atom family registered in nvatom.atoms.registry is a type here with no change to this
module.  Source: the specification's "Atom TypeID Registry", its operand contract by tier
(register fragments, ``!cute_nvgpu.smem_desc_view``) and its TMA descriptor and atom types and
mode enums; where nvatom departs from them, docs/spec-deviations.md, "cute_nvgpu textual IR".
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import re
from collections.abc import Callable, Iterable
from typing import Any

from nvatom.atoms import registry as R
from nvatom.atoms import tma as T
from nvatom.descriptors.umma import make_umma_desc
from nvatom.descriptors.wgmma import SmemDescView
from nvatom.dtypes import DType, dtype
from nvatom.errors import NvatomError
from nvatom.ir import xdsl_adapter as X
from nvatom.ir.syntax import IRSyntaxError, layout_text, parse_layout_body, split_top_level
from nvatom.layout import ComposedLayout, Layout
from nvatom.layout.swizzle import Swizzle

__all__ = [
    "ATOM_FAMILIES",
    "AtomFamily",
    "MemRef",
    "atom_of",
    "layout_of",
    "memref_of",
]

SPACES = ("rmem", "smem", "gmem", "tmem")


# --------------------------------------------------------------------------- cute types
def _layout_decoder(kind: type) -> Callable[[str], str]:
    def decode(body: str) -> str:
        lay = parse_layout_body(body)
        if kind is ComposedLayout and not isinstance(lay, ComposedLayout):
            raise IRSyntaxError(f"'{body.strip()}' is not a composed (swizzled) layout; "
                                "use !cute.layout")
        if kind is not ComposedLayout and isinstance(lay, ComposedLayout):
            raise IRSyntaxError(f"'{body.strip()}' is a composed layout; use "
                                "!cute.composed_layout")
        return layout_text(lay)
    return decode


LayoutTypeT = X.define_text_type("cute.layout", _layout_decoder(Layout))
ComposedLayoutTypeT = X.define_text_type("cute.composed_layout", _layout_decoder(ComposedLayout))


_SWIZZLE = re.compile(r"\s*Sw<(\d+),(\d+),(\d+)>\s*$")


def _swizzle(body: str) -> Swizzle:
    m = _SWIZZLE.match(body)
    if m is None:
        raise IRSyntaxError(f"expected 'Sw<bits,base,shift>', got <{body.strip()}>")
    try:
        return Swizzle(*(int(g) for g in m.groups()))
    except (NvatomError, ValueError) as e:
        raise IRSyntaxError(str(e)) from None


SwizzleTypeT = X.define_text_type("cute.swizzle", lambda b: str(_swizzle(b)))


@dataclasses.dataclass(frozen=True)
class MemRef:
    """``!cute.memref<elem, space[, layout]>``: a tensor in one memory.

    For ``rmem`` the layout is the (thread, value) -> element layout of a register fragment
    (what the MMA verifiers compare with an atom's); for ``smem``/``gmem`` it maps a tile
    coordinate to an element offset.
    """

    element: DType
    space: str
    layout: Layout | ComposedLayout | T.LayoutType | None

    def __str__(self) -> str:
        lay = "" if self.layout is None else f", {layout_text(self.layout)}"
        return f"!cute.memref<{self.element.name}, {self.space}{lay}>"


def _elem(text: str) -> DType:
    try:
        return dtype(text.strip())
    except NvatomError as e:
        raise IRSyntaxError(str(e)) from None


@functools.lru_cache(maxsize=4096)
def _memref(body: str) -> MemRef:
    parts = split_top_level(body, 2)
    if len(parts) < 2:
        raise IRSyntaxError(f"expected '<element, space[, layout]>', got <{body.strip()}>")
    space = parts[1]
    if space not in SPACES:
        raise IRSyntaxError(f"unknown memory '{space}' (one of {', '.join(SPACES)})")
    lay = parse_layout_body(parts[2]) if len(parts) == 3 else None
    return MemRef(_elem(parts[0]), space, lay)


MemRefTypeT = X.define_text_type("cute.memref", lambda b: str(_memref(b))[13:-1])


@functools.lru_cache(maxsize=1024)
def _ptr(body: str) -> tuple[DType, str]:
    parts = split_top_level(body, 1)
    if len(parts) != 2 or parts[1] not in ("gmem", "smem"):
        raise IRSyntaxError(f"expected '<element, gmem|smem>', got <{body.strip()}>")
    return _elem(parts[0]), parts[1]


PtrTypeT = X.define_text_type("cute.ptr", lambda b: f"{_ptr(b)[0].name}, {_ptr(b)[1]}")


def _coord(body: str) -> str:
    b = body.strip()
    if not b.isdigit() or not 1 <= int(b) <= 5:
        raise IRSyntaxError(f"a coordinate has rank 1..5, got <{b}>")
    return str(int(b))


CoordTypeT = X.define_text_type("cute.coord", _coord)


# --------------------------------------------------------------------------- atom types
@dataclasses.dataclass(frozen=True)
class AtomFamily:
    """One parametrized atom type: a registry mnemonic and the table of its atoms."""

    mnemonic: str  # registry mnemonic, the type is !cute_nvgpu.<mnemonic><body>
    kind: str  # "mma" or "copy"
    table: Callable[[], Iterable[Any]]  # the atoms (each has .name)
    resolve: Callable[[str], Any] | None = None  # body -> atom, for families without a table

    @property
    def type_name(self) -> str:
        return f"cute_nvgpu.{self.mnemonic}"

    def body_of(self, atom: Any) -> str:
        rest = atom.name[len(self.mnemonic):]
        return rest.lstrip(".").replace("<", "").replace(">", "")

    @functools.cached_property
    def _by_body(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for a in self.table():
            b = self.body_of(a)
            if b in out:
                raise NvatomError(f"atom family {self.mnemonic}: two atoms spell <{b}>")
            out[b] = a
        return out

    def atom(self, body: str) -> Any:
        key = body.strip()
        if self.resolve is not None:
            return self.resolve(key)
        try:
            return self._by_body[key]
        except KeyError:
            near = difflib.get_close_matches(key, list(self._by_body), n=3, cutoff=0.6)
            hint = f"; nearest: {', '.join(near)}" if near else ""
            raise R.UnknownAtomError(f"no {self.mnemonic} atom <{key}>{hint}") from None


def _family_row(fam: R.AtomFamily, mnemonic: str) -> AtomFamily:
    """The IR type of one dialect mnemonic of a registry family: its table, or, where the
    family parses names (free parameters, lattices too large to list), its resolver."""
    resolve = None
    if fam.parses_names:
        def resolve(body: str) -> Any:
            atom = fam.atom(fam.spell(mnemonic, body))
            if atom.mnemonic != mnemonic:
                raise R.UnknownAtomError(f"no {mnemonic} atom <{body}>")
            return atom
    return AtomFamily(mnemonic, fam.kind, lambda: fam.atoms(mnemonic=mnemonic), resolve)


#: One row per dialect mnemonic of every registry family (nvatom.atoms.registry.FAMILIES);
#: the type name is the registry mnemonic.  TMA atoms are not named: their types follow.
ATOM_FAMILIES: tuple[AtomFamily, ...] = tuple(
    _family_row(fam, m) for fam in R.FAMILIES if fam.resolve is not None
    for m in fam.mnemonics if R.ATOMS[m].dialect_mnemonic
)

_FAMILY_OF_TYPE: dict[type, AtomFamily] = {}


def _atom_decoder(fam: AtomFamily) -> Callable[[str], str]:
    def decode(body: str) -> str:
        fam.atom(body)
        return body.strip()
    return decode


ATOM_TYPES: list[type] = []
for _fam in ATOM_FAMILIES:
    _cls = X.define_text_type(_fam.type_name, _atom_decoder(_fam))
    _FAMILY_OF_TYPE[_cls] = _fam
    ATOM_TYPES.append(_cls)


def atom_of(t: Any) -> Any | None:
    """The atom an atom type names, or None for a type that is no atom type."""
    fam = _FAMILY_OF_TYPE.get(type(t))
    return None if fam is None else fam.atom(t.text)


def family_of(t: Any) -> AtomFamily | None:
    return _FAMILY_OF_TYPE.get(type(t))


# --------------------------------------------------------------------------- descriptors
@dataclasses.dataclass(frozen=True)
class SmemDesc:
    element: DType
    major: str
    layout: Layout | ComposedLayout
    view: Any  # nvatom.descriptors.wgmma.SmemDescView

    def body(self) -> str:
        return f"{self.element.name}, {self.major}, {layout_text(self.layout)}"


@functools.lru_cache(maxsize=1024)
def smem_desc(body: str) -> SmemDesc:
    parts = split_top_level(body, 2)
    if len(parts) != 3 or parts[1] not in ("K", "MN"):
        raise IRSyntaxError(f"expected '<element, K|MN, layout>', got <{body.strip()}>")
    el = _elem(parts[0])
    lay = parse_layout_body(parts[2])
    if not isinstance(lay, (Layout, ComposedLayout)):
        raise IRSyntaxError(f"a descriptor needs a static layout, got '{parts[2]}'")
    try:
        view = SmemDescView.of(lay, el.pack_bits, parts[1])
    except NvatomError as e:
        view = _umma_only_view(lay, el.pack_bits, parts[1], e)
    return SmemDesc(el, parts[1], lay, view)


def _umma_only_view(lay: Any, bits: int, major: str, err: NvatomError) -> Any:
    """A tile only UMMA can describe: FP6/FP4 of kind::f8f6f4 one per byte (PTX ISA
    9.7.16.10.4.4, padded packing: the layout counts 8-bit containers), or the 128-byte
    swizzle with 32-byte atoms (tf32 MN-major), which has no WGMMA mode (view None)."""

    if bits < 8:
        try:
            return SmemDescView.of(lay, 8, major)
        except NvatomError:
            pass
    if bits != 32 or major != "MN":  # SW128_32B is for tf32 MN-major operands only
        raise err
    try:
        make_umma_desc(lay, bits, major)
    except NvatomError:
        raise err from None
    return None


SmemDescViewTypeT = X.define_text_type("cute_nvgpu.smem_desc_view",
                                       lambda b: smem_desc(b).body())


def _bare(body: str) -> str:
    if body.strip():
        raise IRSyntaxError(f"this type takes no parameters, got <{body.strip()}>")
    return ""


TmaDescTiledT = X.define_text_type("cute_nvgpu.tma_descriptor_tiled", _bare, bare="")
TmaDescIm2colT = X.define_text_type("cute_nvgpu.tma_descriptor_im2col", _bare, bare="")
MbarrierT = X.define_text_type("cute_nvgpu.mbarrier", _bare, bare="")
#: a tiled MMA (cute_nvgpu.make_tiled_mma): its atom, atom layout and tile are the defining
#: operation's
TiledMmaT = X.define_text_type("cute_nvgpu.tiled_mma", _bare, bare="")
#: a tiled copy (cute_nvgpu.make_tiled_copy): its atom, thread and value layouts are the
#: defining operation's
TiledCopyT = X.define_text_type("cute_nvgpu.tiled_copy", _bare, bare="")
#: non-exec TMA atoms (partition-verified, waiting for barrier and cache binding) and the
#: executable TMA atoms they become; kind -> type
NON_EXEC_TMA: dict[T.TmaKind, type] = {
    k: X.define_text_type(f"cute_nvgpu.atom.non_exec_tiled_{k.value}", _bare, bare="")
    for k in T.TmaKind
}
EXEC_TMA: dict[T.TmaKind, type] = {
    k: X.define_text_type(f"cute_nvgpu.atom.{k.value}", _bare, bare="") for k in T.TmaKind
}


# --------------------------------------------------------------------------- enum attributes
def _enum_decoder(values: dict[str, Any]) -> Callable[[str], str]:
    def decode(body: str) -> str:
        b = body.strip()
        if b not in values:
            raise IRSyntaxError(f"'{b}' is not one of {', '.join(values)}")
        return b
    return decode


#: spellings of the spec's mode enums (the load enum's mode 0 is the worked example's "tiled")
LOAD_MODES = {"tiled": T.TmaLoadMode.TMA_LOAD_NO_MULTICAST,
              "two_cta": T.TmaLoadMode.TMA_LOAD_TWO_CTA,
              "w_multicast": T.TmaLoadMode.TMA_LOAD_W_MULTICAST,
              "w128_multicast": T.TmaLoadMode.TMA_LOAD_W128_MULTICAST,
              # nvatom's values, outside the spec's enum (spec-deviations.md#tma-mode-enums)
              "im2col": T.TmaLoadMode.TMA_LOAD_IM2COL,
              "gather4": T.TmaLoadMode.TMA_LOAD_GATHER4}
STORE_MODES = {m.name.removeprefix("TMA_STORE_").lower(): m for m in T.TmaStoreMode}
REDUCE_KINDS = {m.name.removeprefix("TMA_REDUCE_").lower(): m for m in T.TmaReduceKind}
#: TMA reads global memory through L2 only: "cg" (cache global) is its one behaviour
LOAD_CACHE_MODES = {"cg": None}

LoadModeAttrT = X.define_text_attr("cute_nvgpu.tma_load_mode", _enum_decoder(LOAD_MODES))
StoreModeAttrT = X.define_text_attr("cute_nvgpu.tma_store_mode", _enum_decoder(STORE_MODES))
ReduceKindAttrT = X.define_text_attr("cute_nvgpu.tma_reduce_kind", _enum_decoder(REDUCE_KINDS))
CacheModeAttrT = X.define_text_attr("cute_nvgpu.load_cache_mode",
                                    _enum_decoder(LOAD_CACHE_MODES))


# --------------------------------------------------------------------------- type queries
def memref_of(t: Any) -> MemRef | None:
    return _memref(t.text) if isinstance(t, MemRefTypeT) else None


def layout_of(t: Any) -> Any:
    """The layout a ``!cute.layout``/``!cute.composed_layout`` type names, else None."""
    if isinstance(t, (LayoutTypeT, ComposedLayoutTypeT)):
        return parse_layout_body(t.text)
    if isinstance(t, SwizzleTypeT):
        return _swizzle(t.text)
    return None


def type_text(t: Any) -> str:
    """An IR type as text (what diagnostics print for a non-layout operand)."""
    return X.print_attr(t)


def make(cls: type, body: str = "") -> Any:
    return X.make_type(cls, body)


CUTE_TYPES = [LayoutTypeT, ComposedLayoutTypeT, SwizzleTypeT, MemRefTypeT, PtrTypeT, CoordTypeT]
CUTE_NVGPU_TYPES = [*ATOM_TYPES, SmemDescViewTypeT, TmaDescTiledT, TmaDescIm2colT, MbarrierT,
                    TiledMmaT, TiledCopyT,
                    *NON_EXEC_TMA.values(), *EXEC_TMA.values()]
CUTE_NVGPU_ATTRS = [LoadModeAttrT, StoreModeAttrT, ReduceKindAttrT, CacheModeAttrT]
