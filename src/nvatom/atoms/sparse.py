"""Structured sparsity of ``mma.sp`` / ``mma.sp::ordered_metadata``: patterns, metadata, selector.

Source: PTX ISA "Sparse matrix storage" and "Matrix fragments for multiply-accumulate
operation with sparse matrix A" (sparse m16n8k8/k16/k32/k64/k128).  The metadata bit layout
is drawn only as figures there; :func:`metadata_layout` states it as a formula, settled on
the GPU (docs/fragments.md lists the experiment and the sources).

**Sparsity.**  Each row of the dense M x K operand A is cut into *chunks*, and A's operand
holds only the kept elements of each chunk, in increasing column order (the M x K/2
*compressed* tile):

* 16-bit and 8-bit types (f16, bf16, s8, u8, e4m3, e5m2): 2:4, chunks of 4, two kept;
* tf32: 1:2, chunks of 2, one kept;
* 4-bit types (s4, u4): 4:8 in pairs, chunks of 8 made of four 2-element sub-chunks, two
  sub-chunks kept.

**Nibbles.**  Each chunk has a 4-bit *nibble* ``i0 | i1 << 2``: two 2-bit indices into the
chunk's four slots (elements for 2:4, sub-chunks for 4-bit types; for tf32 the slots are the
16-bit halves, so the only nibbles are 0b0100 = element 0 and 0b1110 = element 1).  The
first kept value goes to slot ``i0``, the second to ``i1``.  ``.sp::ordered_metadata``
requires ``i0 < i1`` (0b0100, 0b1000, 0b1001, 0b1100, 0b1101, 0b1110); plain ``.sp`` rejects
only ``i0 == i1`` (0b0000, 0b0101, 0b1010, 0b1111).  We generate ordered nibbles, valid for
both.

**Metadata and selector.**  The nibbles of a group of four lanes (``g = lane >> 2``) cover
rows ``g`` and ``g + 8``: ``2 * K / chunk`` nibbles, i.e. ``T = K / chunk / 4`` registers of
eight nibbles.  The sparsity selector ``f`` picks which ``T`` lanes of each group supply
them: lanes ``4 * g + f * T + j``, ``j < T`` (T = 1: any one lane, f in 0..3; T = 2: pair 0-1
or 2-3; T = 4: all, f = 0).  Nibble ``v`` (bits ``[4v, 4v + 4)``) of contributing lane ``j``
holds the chunk

* 16- and 32-bit types: row ``g + 8 * (v // 4)``, chunk ``4 * j + v % 4`` (a register is
  two rows of four chunks);
* 8- and 4-bit types: row ``g + 8 * (j % 2)``, chunk ``8 * (j // 2) + v`` (a register is one
  row of eight chunks).

The other lanes' metadata registers are not read.  The two conventions were measured on an
H200 (every lane, nibble and selector of every shape; docs/fragments.md) and agree with
CUTLASS's ``ELayout`` of ``SM120_SPARSE_16x8x64_TN`` (8-bit) and the wgmma.sp ELayouts
(``mma_traits_sm90_gmma_sparse.hpp``).  Selectors 2 and 3 of the f16 m16n8k32 form, which
ptxas 13.0 accepts, stopped the H200 with an illegal-instruction error.

**Contract of** :func:`random_sparse_problem` **(the GPU tests rely on it).**  A
:class:`SparseProblem` holds ``a_dense`` (M x K, zeros where pruned; int64 for integer types,
float64 of small integers otherwise, so that every product and partial sum is exact in f32),
``a_compressed`` (M x K/2, the kept values in order), ``nibbles`` (M x K/chunk) and
``metadata`` (``np.uint32[32]``).  A kernel loads lane ``l``'s A fragment from
``a_compressed`` through ``form.tv_layout('A')`` (index ``m + M * k`` of the column-major
M x K/2 tile), its metadata register ``e`` from ``metadata[l]`` and passes ``selector`` as
the immediate ``f``; then D = ``a_dense @ B`` + C.  Lanes the selector does not read hold a
decoy: the word of their group's reading lane with every nibble replaced by its complement
(the other two slots), so a wrong selector model gives a wrong product.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Protocol

import numpy as np

from nvatom.atoms.fragments import layout_from_function
from nvatom.dtypes import DType, dtype
from nvatom.errors import NvatomError
from nvatom.layout import Layout, get, layouts_equivalent

__all__ = [
    "ORDERED_NIBBLES",
    "MetadataLayout",
    "SparseError",
    "SparsePattern",
    "SparseProblem",
    "complement_nibble",
    "compress",
    "decompress",
    "isa_selectors",
    "metadata_layout",
    "metadata_words",
    "nibble_targets",
    "nibbles_from_words",
    "pattern",
    "random_sparse_problem",
    "small_exact_values",
    "valid_nibbles",
]

ROWS = 16  # every sparse register MMA is m16n8
LANES = 32
NIBBLES_PER_WORD = 8


class SparseError(NvatomError):
    """A dense A that does not fit the pattern, bad metadata, or a selector the ISA leaves
    undefined."""


# ------------------------------------------------------------------------------ patterns
@dataclasses.dataclass(frozen=True)
class SparsePattern:
    """How one element type is pruned: ``keep`` of every ``chunk`` dense elements."""

    name: str  # "2:4", "1:2", "4:8 pairs"
    chunk: int  # dense elements per chunk (one nibble each)
    keep: int  # stored elements per chunk


_PATTERNS = {
    16: SparsePattern("2:4", 4, 2),
    8: SparsePattern("2:4", 4, 2),
    32: SparsePattern("1:2", 2, 1),  # tf32
    4: SparsePattern("4:8 pairs", 8, 4),
}

#: nibbles with i0 < i1: the only ones .sp::ordered_metadata accepts (2:4 and 4:8 pairs).
ORDERED_NIBBLES = (0b0100, 0b1000, 0b1001, 0b1100, 0b1101, 0b1110)
_TF32_NIBBLES = (0b0100, 0b1110)


class SparseForm(Protocol):
    """What this module reads of a sparse MMA form (:class:`nvatom.atoms.mma.SparseMmaForm`,
    the sparse SM120 forms): its name, K, A's element type, variant and selectors."""

    name: str
    k: int
    a: DType
    sparse: str | None
    selectors: tuple[int, ...]

    @property
    def is_sparse(self) -> bool: ...

    def tv_layout(self, operand: str) -> Layout: ...


def _require_sparse(form: SparseForm) -> None:
    if not form.is_sparse:
        raise SparseError(f"{form.name} is not a sparse MMA form")


def pattern(form: SparseForm) -> SparsePattern:
    """The sparsity pattern of the form's A type."""
    _require_sparse(form)
    bits = form.a.storage_bits
    if bits not in _PATTERNS:
        raise SparseError(f"{form.name}: no sparsity pattern for {form.a.name}")
    return _PATTERNS[bits]


def valid_nibbles(form: SparseForm) -> tuple[int, ...]:
    """Nibbles the form's variant accepts (ordered ones first)."""
    if pattern(form).chunk == 2:
        return _TF32_NIBBLES
    if form.sparse == "sp::ordered_metadata":
        return ORDERED_NIBBLES
    unordered = tuple(i0 | i1 << 2 for i0 in range(4) for i1 in range(4) if i0 > i1)
    return ORDERED_NIBBLES + unordered


def _fields(nibble: int) -> tuple[int, int]:
    return nibble & 3, (nibble >> 2) & 3


def nibble_targets(form: SparseForm, nibble: int) -> tuple[int, ...]:
    """Dense positions in the chunk of the chunk's kept values, in compressed order."""
    if nibble not in valid_nibbles(form):
        raise SparseError(f"{form.name}: metadata nibble {nibble:#06b} is not valid for "
                          f".{form.sparse} (valid: {_show(valid_nibbles(form))})")
    p = pattern(form)
    i0, i1 = _fields(nibble)
    if p.chunk == 2:
        return (i0 // 2,)
    if p.chunk == 8:
        return (2 * i0, 2 * i0 + 1, 2 * i1, 2 * i1 + 1)
    return (i0, i1)


def complement_nibble(nibble: int) -> int:
    """The ordered nibble of the two slots ``nibble`` does not name (the decoy pattern)."""
    i0, i1 = _fields(nibble)
    rest = [s for s in range(4) if s not in (i0, i1)]
    if len(rest) != 2:
        raise SparseError(f"nibble {nibble:#06b} names one slot twice")
    return rest[0] | rest[1] << 2


def _show(nibbles: tuple[int, ...]) -> str:
    return ", ".join(f"{n:#06b}" for n in nibbles)


# ------------------------------------------------------------------------------ layout
def _threads_per_group(form: SparseForm) -> int:
    chunks = form.k // pattern(form).chunk
    return max(1, chunks // 4)


def isa_selectors(form: SparseForm) -> tuple[int, ...]:
    """Selector values the PTX ISA defines for the form (ptxas may accept more)."""
    return tuple(range(4 // _threads_per_group(form)))


@dataclasses.dataclass(frozen=True)
class MetadataLayout:
    """Which lanes hold which metadata nibbles: slot 3 of the synthesized layouts.

    ``layout`` maps (contributor ``t``, nibble ``v``) to ``row + 16 * chunk`` of the 16 x
    ``chunks`` nibble tile (column-major, like the fragment layouts); nibble ``v`` occupies
    bits ``[4v, 4v + 4)`` of the register.  ``thr_id`` maps contributor ``t`` to
    ``lane - first_lane``, as CuTe's ThrID maps atom threads to lanes.
    """

    form_name: str
    selector: int
    threads_per_group: int
    first_lane: int
    chunks: int
    thr_id: Layout
    layout: Layout

    @property
    def contributors(self) -> int:
        return 8 * self.threads_per_group

    def __str__(self) -> str:
        """``<layout> on lanes <first_lane> + <thr_id>``: the (contributor, nibble) layout
        and where the contributors sit (what the verifier prints)."""
        return f"{self.layout} on lanes {self.first_lane} + {self.thr_id}"

    def equivalent(self, other: object) -> bool:
        """The verifier's slot-3 predicate (the specification's ``layouts_equivalent``): a
        :class:`MetadataLayout` must read the same lanes (``first_lane`` and ``thr_id``) and
        put the same nibble in each (``layout``); a bare :class:`Layout` is compared with the
        (contributor, nibble) layout alone."""
        if isinstance(other, MetadataLayout):
            return (self.first_lane == other.first_lane
                    and layouts_equivalent(self.thr_id, other.thr_id)
                    and layouts_equivalent(self.layout, other.layout))
        if isinstance(other, Layout):
            return layouts_equivalent(self.layout, other)
        return False

    def lane(self, t: int) -> int:
        """The lane of contributor ``t``."""
        return self.first_lane + int(self.thr_id(t))

    @property
    def lanes(self) -> tuple[int, ...]:
        """Lanes whose metadata register the instruction reads, in increasing order."""
        return tuple(sorted(self.lane(t) for t in range(self.contributors)))

    def owner(self, row: int, chunk: int) -> tuple[int, int]:
        """(lane, nibble position) that holds the nibble of (row, chunk)."""
        target = row + ROWS * chunk
        for t in range(self.contributors):
            for v in range(NIBBLES_PER_WORD):
                if self.layout(t, v) == target:
                    return self.lane(t), v
        raise SparseError(f"{self.form_name}: no nibble for row {row}, chunk {chunk}")

    def table(self) -> list[tuple[int, int, int, int]]:
        """(lane, lowest bit, row, chunk) for every nibble that is read."""
        out = []
        for t in range(self.contributors):
            for v in range(NIBBLES_PER_WORD):
                idx = int(self.layout(t, v))
                out.append((self.lane(t), 4 * v, idx % ROWS, idx // ROWS))
        return sorted(out)


def metadata_layout(form: SparseForm, selector: int = 0) -> MetadataLayout:
    """The metadata layout of a sparse form for one sparsity-selector value."""
    _require_sparse(form)
    if selector not in form.selectors:
        raise SparseError(f"{form.name}: selector {selector} is out of range "
                          f"{form.selectors[0]}..{form.selectors[-1]}")
    if selector not in isa_selectors(form):
        raise SparseError(
            f"{form.name}: the PTX ISA leaves selector {selector} undefined (it defines "
            f"{_range(isa_selectors(form))}: {_threads_per_group(form)} lane(s) per group)")
    tpg = _threads_per_group(form)
    chunks = form.k // pattern(form).chunk
    wide = form.a.storage_bits >= 16

    def lane_offset(t: int) -> int:
        return t % tpg + 4 * (t // tpg)

    def nibble_index(t: int, v: int) -> int:
        j, g = t % tpg, t // tpg
        if wide:  # a register: rows g and g + 8, four chunks each
            row, chunk = g + 8 * (v // 4), 4 * j + v % 4
        else:  # a register: one row, eight chunks
            row, chunk = g + 8 * (j % 2), 8 * (j // 2) + v
        return row + ROWS * chunk

    # One mode per bit of the contributor index where the formula needs it.
    thr: Any = 8 if tpg == 1 else (tpg, 8) if (wide or tpg == 2) else (2, 2, 8)
    val: Any = (4, 2) if wide else 8
    name = f"{form.name} metadata (selector {selector})"
    thr_id = get(layout_from_function(thr, 1, lambda t, _v: lane_offset(t), name), 0)
    lay = layout_from_function(thr, val, nibble_index, name)
    return MetadataLayout(form.name, selector, tpg, selector * tpg, chunks, thr_id, lay)


def _range(sel: tuple[int, ...]) -> str:
    return str(sel[0]) if len(sel) == 1 else f"{sel[0]}..{sel[-1]}"


# ------------------------------------------------------------------------------ words
def metadata_words(form: SparseForm, nibbles: np.ndarray, selector: int = 0, *,
                   decoy: bool = True) -> np.ndarray:
    """The metadata register of each of the 32 lanes (``np.uint32[32]``).

    ``nibbles`` is the 16 x chunks tile.  Lanes the selector does not read get the decoy
    (complement nibbles of their group's reading lane) or, with ``decoy=False``, zero.
    """
    ml = metadata_layout(form, selector)
    nib = np.asarray(nibbles)
    if nib.shape != (ROWS, ml.chunks):
        raise SparseError(f"{form.name}: nibble tile must be {ROWS} x {ml.chunks}, "
                          f"not {nib.shape}")
    words = np.zeros(LANES, dtype=np.uint32)
    true_word: dict[int, int] = {}
    for t in range(ml.contributors):
        w = 0
        for v in range(NIBBLES_PER_WORD):
            idx = int(ml.layout(t, v))
            w |= int(nib[idx % ROWS, idx // ROWS]) << (4 * v)
        true_word[ml.lane(t)] = w
        words[ml.lane(t)] = w
    if decoy:
        tpg = ml.threads_per_group
        for lane in range(LANES):
            if lane in true_word:
                continue
            reader = 4 * (lane // 4) + ml.first_lane + (lane % 4) % tpg
            w = true_word[reader]
            words[lane] = sum(complement_nibble((w >> (4 * v)) & 0xF) << (4 * v)
                              for v in range(NIBBLES_PER_WORD))
    return words


def nibbles_from_words(form: SparseForm, words: np.ndarray, selector: int = 0) -> np.ndarray:
    """The 16 x chunks nibble tile the instruction reads from the lanes' metadata registers."""
    ml = metadata_layout(form, selector)
    w = np.asarray(words, dtype=np.uint64)
    if w.shape != (LANES,):
        raise SparseError(f"metadata must be one word per lane (32), not shape {w.shape}")
    nib = np.zeros((ROWS, ml.chunks), dtype=np.uint8)
    for t in range(ml.contributors):
        word = int(w[ml.lane(t)])
        for v in range(NIBBLES_PER_WORD):
            idx = int(ml.layout(t, v))
            nib[idx % ROWS, idx // ROWS] = (word >> (4 * v)) & 0xF
    return nib


# ------------------------------------------------------------------------------ compress
def _dims(form: SparseForm) -> tuple[int, int, SparsePattern]:
    p = pattern(form)
    return form.k // p.chunk, form.k // 2, p


def decompress(form: SparseForm, a_compressed: np.ndarray, words: np.ndarray,
               selector: int = 0) -> np.ndarray:
    """The dense M x K operand the instruction multiplies: the CPU model of mma.sp's A."""
    chunks, kc, p = _dims(form)
    ac = np.asarray(a_compressed)
    if ac.shape != (ROWS, kc):
        raise SparseError(f"{form.name}: compressed A must be {ROWS} x {kc}, not {ac.shape}")
    nib = nibbles_from_words(form, words, selector)
    dense = np.zeros((ROWS, form.k), dtype=ac.dtype)
    for r in range(ROWS):
        for c in range(chunks):
            for j, pos in enumerate(nibble_targets(form, int(nib[r, c]))):
                dense[r, c * p.chunk + pos] = ac[r, c * p.keep + j]
    return dense


def compress(form: SparseForm, a_dense: np.ndarray, selector: int = 0
             ) -> tuple[np.ndarray, np.ndarray, int]:
    """(a_compressed, metadata words, selector) of a dense A that fits the form's pattern.

    Where a chunk has fewer non-zeros than it keeps, the lowest free slots are kept too, so
    every nibble is ordered (valid for both ``.sp`` variants).
    """
    chunks, kc, p = _dims(form)
    a = np.asarray(a_dense)
    if a.shape != (ROWS, form.k):
        raise SparseError(f"{form.name}: dense A must be {ROWS} x {form.k}, not {a.shape}")
    # A chunk is made of units that are kept or dropped whole: elements, or pairs for 4:8.
    nunits, width = (2, 1) if p.chunk == 2 else (4, p.chunk // 4)
    kept = p.keep // width
    comp = np.zeros((ROWS, kc), dtype=a.dtype)
    nib = np.zeros((ROWS, chunks), dtype=np.uint8)
    for r in range(ROWS):
        for c in range(chunks):
            block = a[r, c * p.chunk:(c + 1) * p.chunk]
            units = [u for u in range(nunits) if np.any(block[u * width:(u + 1) * width])]
            if len(units) > kept:
                what = "pairs" if width > 1 else "elements"
                raise SparseError(
                    f"{form.name}: row {r}, columns {c * p.chunk}..{(c + 1) * p.chunk - 1} "
                    f"has {len(units)} non-zero {what}; the {p.name} pattern keeps {kept}")
            units += [u for u in range(nunits) if u not in units][:kept - len(units)]
            units.sort()
            nib[r, c] = _TF32_NIBBLES[units[0]] if p.chunk == 2 else units[0] | units[1] << 2
            pos = nibble_targets(form, int(nib[r, c]))
            comp[r, c * p.keep:(c + 1) * p.keep] = block[list(pos)]
    return comp, metadata_words(form, nib, selector), selector


# ------------------------------------------------------------------------------ problems
def small_exact_values(dt: DType | str, rng: np.random.Generator, shape: Any, *,
                       nonzero: bool = False) -> np.ndarray:
    """Random values exactly representable in ``dt`` whose products and sums of up to 128
    terms are exact in f32: integers in [-8, 8] for floats (float64), the full range for
    integer types (int64)."""
    d = dtype(dt)
    if d.kind == "int":
        lo, hi = int(d.int_min or 0), int(d.int_max or 0)
        vals = rng.integers(lo, hi + 1, size=shape, dtype=np.int64)
        if nonzero:
            while np.any(vals == 0):
                vals = np.where(vals == 0, rng.integers(lo, hi + 1, size=shape), vals)
        return vals
    choices = np.array([v for v in range(-8, 9) if v or not nonzero], dtype=np.float64)
    return rng.choice(choices, size=shape)


@dataclasses.dataclass(frozen=True)
class SparseProblem:
    """A random sparse A for one form and selector, with what each lane must hold."""

    form: SparseForm
    selector: int
    a_dense: np.ndarray  # M x K, zeros where pruned
    a_compressed: np.ndarray  # M x K/2, kept values in order
    nibbles: np.ndarray  # M x K/chunk
    metadata: np.ndarray  # np.uint32[32]: lane l's metadata register


def random_sparse_problem(form: SparseForm, rng: np.random.Generator, selector: int = 0
                          ) -> SparseProblem:
    """A random A obeying the form's pattern with ordered nibbles (valid for both variants)
    and non-zero kept values; see the module docstring for the contract."""
    chunks, kc, _ = _dims(form)
    allowed = _TF32_NIBBLES if pattern(form).chunk == 2 else ORDERED_NIBBLES
    nib = rng.choice(np.array(allowed, dtype=np.uint8), size=(ROWS, chunks))
    comp = small_exact_values(form.a, rng, (ROWS, kc), nonzero=True)
    words = metadata_words(form, nib, selector)
    dense = decompress(form, comp, words, selector)
    return SparseProblem(form, selector, dense, comp, nib, words)
