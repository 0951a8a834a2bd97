"""Run-time tiles and predicated copies for the typed-tensor layer: what a GEMM needs for a
run-time K loop over a ring of shared-memory stages and for problem sizes that are not
multiples of the tile.

* :class:`GmemMatrix` (:func:`gmem_matrix`): a global matrix whose extents and leading
  dimension are run-time ``.u32`` registers (one stride is 1: the contiguous dimension).
  :meth:`GmemMatrix.tile_at` takes a tile at a run-time tile coordinate (registers or ints);
  elements past the extents are *outside* and are never read or written.  An extent known
  to be a multiple of a vector (``multiple_of``, e.g. an even N) never cuts one.
* :class:`StageRing` (:func:`stage_ring`): ``stages`` equal shared buffers in one ``.shared``
  array; :meth:`StageRing.at` is the stage picked by a run-time index register.  Every stage
  has the one layout, so the writer/reader swizzle check of ``nvatom.kernels.tensor`` holds
  for whichever stage runs (one :class:`~nvatom.kernels.tensor.SmemBuffer` records it).
  :func:`stage_rings`: rings in the kernel's dynamic shared memory, each stage holding
  several tensors (a GEMM's A and B tiles), :func:`stages_at` picking a stage of all.
* :func:`copy_ragged`: a tiled ``cp.async`` from a ragged gmem tile with the zero-filling
  atom ``atom.simt_async_copy<16>.src_size``: a chunk's ``src-size`` is the bytes of it
  inside the matrix (0 past the non-contiguous extent), the rest of the 16 bytes is zeros,
  and a chunk that reads nothing points at the matrix's first element (never past it);
  and predicated fragment loads (zeros outside) and stores (nothing outside; a 16-bit pair
  cut by the extent stores its low half) between a fragment and a ragged gmem tile: the
  thread's address once, a row pointer per distinct row, the columns as address
  immediates; the elements left along each dimension once, a predicate per distinct
  constant of one dimension, the other's comparison folded onto it (one ``setp.and`` per
  access).  With ``interior=True`` the copy is also emitted without predicates and a
  uniform branch on the tile's origin picks that one when the whole tile is inside.

Every check of ``nvatom.kernels.tensor`` runs first, on a *stand-in* tensor of the tile's
shape whose run-time leading dimension is replaced by the smallest 16-byte multiple that holds
a tile row (the accesses' contiguity and alignment depend only on the contiguous dimension):
the atoms' verifiers, vectorisation, element types, swizzle agreement and thread counts.  The
run-time leading dimension itself must be a multiple of 16 bytes (the host checks it, as for
``nvatom.kernels.gemm_sm80``).

Loops over tiles use the hoisted forms of these copies (``nvatom.kernels.hoisted``).

Sources: PTX ISA "cp.async" (``cp-size``, ``src-size``: "the remaining bytes ... are filled
with zeros"), "setp" (``setp.CmpOp.BoolOp``), "bra" (``.uni``: the branch is not
divergent), "selp", "mad" (``.wide``), "ld", "st" ("Operand Size Exceeding Instruction-Type
Size": ``st.b16`` of a 32-bit register stores its low half), "Dynamic shared memory"
(``.extern .shared``), "Addresses as Operands" (``[reg+imm]``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from nvatom.atoms.copy import SimtAsyncCopy, UniversalCopy
from nvatom.atoms.tiled_copy import TiledCopy
from nvatom.dtypes import DType
from nvatom.dtypes import dtype as to_dtype
from nvatom.kernels import partition as P
from nvatom.kernels import tensor as T
from nvatom.layout import ComposedLayout, Layout
from nvatom.ptx import copy_emit
from nvatom.ptx.builder import Kernel, Reg
from nvatom.ptx.layout_eval import emit_layout_offset

__all__ = ["GmemMatrix", "GmemTile", "StageRing", "copy_ragged", "gmem_matrix",
           "stage_ring", "stage_rings", "stages_at"]

_U32 = ("u32", "b32", "s32")


def _is_u32(x: object) -> bool:
    return isinstance(x, Reg) and x.type in _U32


def _u32(what: str, x: object, *, allow_int: bool = True, allow_none: bool = False) -> None:
    ok = _is_u32(x) or (allow_int and isinstance(x, int) and not isinstance(x, bool)
                        and x >= 0) or (allow_none and x is None)
    if not ok:
        kinds = ".u32 register" + (" or an int >= 0" if allow_int else "") + \
            (" or None" if allow_none else "")
        got = f"{x.name} of type .{x.type}" if isinstance(x, Reg) else repr(x)
        raise T.TensorError(f"{what} must be a {kinds}, got {got}")


@dataclasses.dataclass(frozen=True, eq=False)
class GmemMatrix:
    """A global matrix with run-time extents (None: unbounded) and strides (one is 1)."""

    name: str
    dtype: DType
    base: Reg
    extents: tuple[Reg | None, Reg | None]
    strides: tuple[Reg | int, Reg | int]
    multiple_of: tuple[int, int] = (1, 1)  # each extent is a multiple of this (host-checked)
    align: int = 16  # bytes the base and every line's start are a multiple of (host-checked)

    @property
    def contiguous(self) -> int:
        return 0 if self.strides[0] == 1 else 1

    def tile_at(self, k: Kernel, tiler: Sequence[int], coord: Sequence[Reg | int]) -> GmemTile:
        """The ``tiler``-shaped tile at tile coordinate ``coord`` (run-time registers or
        ints): CuTe's ``local_tile`` with a run-time coordinate; it may reach past the
        extents (a ragged tile)."""
        if len(tiler) != 2 or len(coord) != 2 or any(t <= 0 for t in tiler):
            raise T.TensorError(f"gmem matrix '{self.name}': a tile takes 2 positive sizes and "
                                f"2 coordinates, got {tuple(tiler)} at {tuple(coord)}")
        origin: list[Reg | int] = []
        for i, (c, t) in enumerate(zip(coord, tiler, strict=True)):
            _u32(f"tile coordinate {i} of gmem matrix '{self.name}'", c)
            if isinstance(c, int):
                origin.append(c * t)
            else:
                r = k.reg("u32")
                k.ins("mul.lo.u32", r, c, t)
                origin.append(r)
        cd = self.contiguous
        shape = (tiler[0], tiler[1])
        row = -(-shape[cd] * self.dtype.storage_bits // 128) * 128 // self.dtype.storage_bits
        strides = [s if isinstance(s, int) else row for s in self.strides]
        stand_in = T.Tensor(self.name, self.dtype, Layout(shape, tuple(strides)), "gmem",
                            self.base)
        return GmemTile(self, shape, (origin[0], origin[1]), stand_in)


@dataclasses.dataclass(frozen=True, eq=False)
class GmemTile:
    """A tile of a :class:`GmemMatrix` at run-time element coordinates ``origin``."""

    matrix: GmemMatrix
    shape: tuple[int, int]
    origin: tuple[Reg | int, Reg | int]
    stand_in: T.Tensor  # the static tensor every check runs on

    @property
    def kind(self) -> str:
        return "ragged gmem tile"

    @property
    def name(self) -> str:
        return self.matrix.name


def gmem_matrix(k: Kernel, name: str, dtype: DType | str, extents: Sequence[Reg | None],
                strides: Sequence[Reg | int], *, multiple_of: Sequence[int] = (1, 1),
                base: Reg | None = None, align: int = 16) -> GmemMatrix:
    """A global matrix passed as the ``.u64`` parameter ``name``; ``extents`` are ``.u32``
    registers (or None: no bound, e.g. a stride-0 broadcast), one of ``strides`` is 1 and the
    other an int or a ``.u32`` register (in elements).
    ``multiple_of``: what each extent is known to be a multiple of (the host checks it, e.g.
    an even N): a vector store that such an extent cannot cut needs no element-wise path.
    ``align``: the bytes the base address and every line's start are known to be a multiple
    of (the host checks it: 16 for cp.async operands); a wider access is refused unless the
    kernel branches on :func:`aligned`.
    ``base``: the matrix's global address, when the kernel declared the parameter itself
    (e.g. to keep its parameter order), instead of the parameter ``name`` declared here."""
    if len(multiple_of) != 2 or any(not isinstance(x, int) or x < 1 for x in multiple_of):
        raise T.TensorError(f"gmem matrix '{name}': multiple_of takes 2 positive ints, got "
                            f"{tuple(multiple_of)}")
    if isinstance(align, bool) or not isinstance(align, int) or align < 1 or align & (align - 1):
        raise T.TensorError(f"gmem matrix '{name}': align is a power of two of bytes, got "
                            f"{align!r}")
    if len(extents) != 2 or len(strides) != 2:
        raise T.TensorError(f"gmem matrix '{name}' is 2-D: 2 extents and 2 strides, got "
                            f"{len(extents)} and {len(strides)}")
    for i, e in enumerate(extents):
        _u32(f"extent {i} of gmem matrix '{name}'", e, allow_int=False, allow_none=True)
    for i, s in enumerate(strides):
        _u32(f"stride {i} of gmem matrix '{name}'", s)
    if 1 not in strides:
        got = ", ".join(str(x) for x in strides)
        raise T.TensorError(f"gmem matrix '{name}': one stride must be 1 (the contiguous "
                            f"dimension the accesses vectorise along), got ({got})")
    if base is None:
        base = T.gmem_tensor(k, name, dtype, (1, 1), (0, 0)).base  # the parameter's address
    elif base.type not in ("u64", "b64", "s64"):
        raise T.TensorError(f"gmem matrix '{name}': its base must be a 64-bit register, got "
                            f"{base.name} of type .{base.type}")
    assert base is not None
    return GmemMatrix(name, to_dtype(dtype), base, (extents[0], extents[1]),
                      (strides[0], strides[1]), (multiple_of[0], multiple_of[1]), align)


def aligned(k: Kernel, m: GmemMatrix, nbytes: int) -> Reg:
    """The predicate "the base of ``m`` and every line's start are multiples of ``nbytes``"
    at run time (``(base | pitch in bytes) & (nbytes - 1) == 0``), for a uniform branch to a
    copy wider than ``m.align`` (:func:`store_tile`'s ``aligned=True``)."""
    if not isinstance(nbytes, int) or nbytes < 1 or nbytes & (nbytes - 1):
        raise T.TensorError(f"gmem matrix '{m.name}': alignment {nbytes!r} is not a power of "
                            "two of bytes")
    esize = m.dtype.storage_bits // 8
    pitch = m.strides[1 - m.contiguous]
    low = k.reg("b64")
    k.ins("and.b64", low, m.base, nbytes - 1)
    p = k.reg("pred")
    if isinstance(pitch, int):  # a static pitch: aligned lines, or never
        k.ins("setp.eq.b64" if pitch * esize % nbytes == 0 else "setp.ne.b64", p, low,
              0 if pitch * esize % nbytes == 0 else low)
        return p
    rest = k.reg("b32")
    k.ins("mul.lo.u32", rest, pitch, esize)
    k.ins("and.b32", rest, rest, nbytes - 1)
    q = k.reg("pred")
    k.ins("setp.eq.b32", q, rest, 0)
    k.ins("setp.eq.and.b64", p, low, 0, q)
    return p


# --------------------------------------------------------------------------- stage ring


@dataclasses.dataclass(frozen=True, eq=False)
class StageRing:
    """``stages`` shared buffers of one layout, ``stage_bytes`` apart in one array."""

    name: str
    stages: int
    stage_bytes: int
    first: T.Tensor  # stage 0; every stage is this tensor at another base

    def stage(self, k: Kernel, i: int) -> T.Tensor:
        """Stage ``i`` (a build-time index)."""
        if not isinstance(i, int) or not 0 <= i < self.stages:
            raise T.TensorError(f"stage {i!r} of the {self.stages}-stage ring '{self.name}'")
        return self.at(k, i) if i else self.first

    def at(self, k: Kernel, stage: Reg | int) -> T.Tensor:
        """The stage whose index the ``.u32`` register ``stage`` holds at run time."""
        _u32(f"the stage index of ring '{self.name}'", stage)
        assert self.first.base is not None
        b = k.reg("u32")
        if isinstance(stage, int):
            k.ins("add.u32", b, self.first.base, stage * self.stage_bytes)
        else:
            k.ins("mad.lo.u32", b, stage, self.stage_bytes, self.first.base)
        return dataclasses.replace(self.first, base=b)

    def advance(self, k: Kernel, stage: Reg) -> None:
        """``stage = (stage + 1) % stages`` in place."""
        _u32(f"the stage index of ring '{self.name}'", stage, allow_int=False)
        wrap = k.reg("pred")
        k.ins("add.u32", stage, stage, 1)
        k.ins("setp.ge.u32", wrap, stage, self.stages)
        k.ins("selp.b32", stage, 0, stage, wrap)


def stage_ring(k: Kernel, name: str, dtype: DType | str,
               layout: Layout | ComposedLayout | Sequence[Layout | ComposedLayout],
               stages: int) -> StageRing:
    """``stages`` shared buffers holding ``layout`` (or one layout per stage: they must be
    the same, since a run-time index picks the buffer and the checks must hold for each)."""
    lays = list(layout) if isinstance(layout, (list, tuple)) else [layout] * stages
    if not isinstance(stages, int) or stages < 1 or len(lays) != stages:
        raise T.TensorError(f"ring '{name}': {stages!r} stages and {len(lays)} layouts")
    for i, lay in enumerate(lays[1:], 1):
        if lay != lays[0]:
            raise T.TensorError(f"ring '{name}': stage {i} has layout {lay}, stage 0 "
                                f"{lays[0]}: every stage of a ring has one layout (a "
                                "run-time index picks the stage)")
    probe = T.Tensor(name, to_dtype(dtype), lays[0], "smem")
    T._check_elements(probe, T.STATIC_SMEM_BYTES, "static shared memory")
    stage_bytes = -(-T._cosize_bytes(probe) // 128) * 128  # whole swizzle rows per stage
    nbytes = stage_bytes * stages
    used = T._SMEM_USED.get(k, 0) + nbytes
    if used > T.STATIC_SMEM_BYTES:
        raise T.TensorError(f"ring '{name}' ({stages} x {stage_bytes} bytes) overflows "
                            f"static shared memory: {used} bytes of {T.STATIC_SMEM_BYTES} in "
                            f"kernel '{k.name}'")
    T._SMEM_USED[k] = used
    k.shared(name, nbytes, align=128)
    base = k.reg("u32")
    k.ins("mov.u32", base, name)
    first = dataclasses.replace(probe, base=base, buffer=T.SmemBuffer(name, stage_bytes),
                                view=lays[0])
    return StageRing(name, stages, stage_bytes, first)


def stage_rings(k: Kernel, name: str, dtype: DType | str,
                parts: Sequence[tuple[str, Layout | ComposedLayout]], stages: int, *,
                align: int = 1024) -> tuple[StageRing, ...]:
    """``stages`` stages in the kernel's dynamic shared memory (``.extern .shared .align
    align .b8 name[]``, sized at launch: ``stages * stage_bytes``), each stage holding the
    tensors ``parts`` -- ``(name, layout)`` -- one after another, each rounded to 128 bytes.
    Ring ``i`` is part ``i`` of every stage (its own buffer record: one writer layout each);
    its stage 0 lies ``offset`` elements past the array's start and its stages
    ``stage_bytes`` apart, so :func:`stages_at` picks a stage of every ring with one
    ``mad``."""
    if not isinstance(stages, int) or stages < 1 or not parts:
        raise T.TensorError(f"rings '{name}': {stages!r} stages of {len(parts)} parts")
    dt = to_dtype(dtype)
    probes = [T.Tensor(n, dt, lay, "smem") for n, lay in parts]
    sizes = [-(-T._cosize_bytes(p) // 128) * 128 for p in probes]
    stage_bytes = sum(sizes)
    k.dynamic_shared(name, align=align)
    base = k.reg("u32")
    k.ins("mov.u32", base, name)
    rings, off = [], 0
    for p, nbytes in zip(probes, sizes, strict=True):
        first = dataclasses.replace(p, base=base, offset=off * 8 // dt.storage_bits,
                                    buffer=T.SmemBuffer(p.name, off + nbytes), view=p.layout)
        rings.append(StageRing(p.name, stages, stage_bytes, first))
        off += nbytes
    return tuple(rings)


def stages_at(k: Kernel, rings: Sequence[StageRing], stage: Reg | int
              ) -> tuple[T.Tensor, ...]:
    """Stage ``stage`` (a ``.u32`` register, or a build-time int) of rings made together by
    :func:`stage_rings`: their tensors at one base register."""
    names = ", ".join(f"'{r.name}'" for r in rings)
    _u32(f"the stage index of rings {names}", stage)
    first = rings[0].first
    if any(r.first.base is not first.base or r.stage_bytes != rings[0].stage_bytes
           or r.stages != rings[0].stages for r in rings):
        raise T.TensorError(f"rings {names} do not share their stages (make them with one "
                            "stage_rings)")
    if isinstance(stage, int) and not stage < rings[0].stages:
        raise T.TensorError(f"stage {stage} of the {rings[0].stages}-stage rings {names}")
    if isinstance(stage, int) and stage == 0:
        return tuple(r.first for r in rings)
    b = k.reg("u32")
    if isinstance(stage, int):
        k.ins("add.u32", b, first.base, stage * rings[0].stage_bytes)
    else:
        k.ins("mad.lo.u32", b, stage, rings[0].stage_bytes, first.base)
    return tuple(dataclasses.replace(r.first, base=b) for r in rings)


# --------------------------------------------------------------------------- predicated copies


def _thread_coords(k: Kernel, tile: GmemTile, acc: P.Accesses, what: str
                   ) -> tuple[list[Reg], list[tuple[int, int]]]:
    """The matrix coordinates of every access's first element as (dim 0, dim 1) registers of
    the thread (the tile origin plus a layout of the thread index) and a constant (row,
    column) per access, checked for every thread."""
    rows = tile.shape[0]
    n = acc.threads
    lays = [P.affine_layout([f(acc.thread(t)) for t in range(n)])
            for f in (lambda x: x % rows, lambda x: x // rows)]
    for s in acc.starts:
        for t in range(n):
            x, b = acc.thread(t) + s, acc.thread(t)
            if lays[0] is None or lays[1] is None or \
                    (x % rows - b % rows, x // rows - b // rows) != (s % rows, s // rows):
                raise T.TensorError(f"{what}: the accesses are not a layout of the thread "
                                    "index plus a constant row and column")
    tid = T.thread_index(k)
    base = []
    for d in (0, 1):
        r = emit_layout_offset(k, lays[d], tid)  # type: ignore[arg-type]
        o = tile.origin[d]
        if o != 0:
            k.ins("add.u32", r, r, o)
        base.append(r)
    return base, [(s % rows, s // rows) for s in acc.starts]


def _coords(k: Kernel, tile: GmemTile, acc: P.Accesses, what: str
            ) -> list[tuple[Reg, Reg]]:
    """(dim 0, dim 1) matrix coordinates of every access's first element, as registers."""
    base, consts = _thread_coords(k, tile, acc, what)
    out = []
    for cs in consts:
        pair = []
        for d, c in enumerate(cs):
            if c:
                r = k.reg("u32")
                k.ins("add.u32", r, base[d], c)
                pair.append(r)
            else:
                pair.append(base[d])
        out.append((pair[0], pair[1]))
    return out


def _inside(k: Kernel, idx: Reg, extent: Reg | None, extra: int = 0) -> Reg | None:
    """``idx + extra < extent`` as a predicate (None: no bound)."""
    if extent is None:
        return None
    if extra:
        r = k.reg("u32")
        k.ins("add.u32", r, idx, extra)
        idx = r
    p = k.reg("pred")
    k.ins("setp.lt.u32", p, idx, extent)
    return p


def _gaddr(k: Kernel, m: GmemMatrix, idx: tuple[Reg, Reg]) -> Reg:
    """``base + (i0 * stride0 + i1 * stride1) * bytes`` in 64 bits: the unit-stride index
    widened, the other multiplied onto it (``mad.wide``), scaled to bytes, added to the base."""
    off: Reg | None = None
    for d in sorted((0, 1), key=lambda d: m.strides[d] != 1):  # the unit stride first
        i, s = idx[d], m.strides[d]
        if s == 0:
            continue
        if s == 1 and off is None:
            off = k.reg("u64")
            k.ins("cvt.u64.u32", off, i)
        elif off is None:
            off = k.reg("u64")
            k.ins("mul.wide.u32", off, i, s)
        else:
            k.ins("mad.wide.u32", off, i, s, off)
    a = k.reg("u64")
    if off is None:
        k.ins("mov.u64", a, m.base)
        return a
    esize = m.dtype.storage_bits // 8
    if esize & (esize - 1):
        k.ins("mul.lo.u64", off, off, esize)
    elif esize > 1:
        k.ins("shl.b64", off, off, esize.bit_length() - 1)
    k.ins("add.s64", a, m.base, off)
    return a


def copy_ragged(k: Kernel, atom: TiledCopy | UniversalCopy, src: GmemTile | T.Tensor,
                dst: GmemTile | T.Tensor, *, interior: bool = False) -> None:
    """A tiled zero-filling cp.async from a ragged gmem tile into a smem tensor, or a
    predicated universal copy between a fragment and a ragged gmem tile.

    ``interior`` (fragment copies): also emit the copy without predicates, taken when the
    whole tile lies inside the matrix -- one ``setp`` on the tile's origin and a ``bra.uni``
    choose it or the predicated copy, so the tile coordinates must be the same for every
    thread of the CTA (as a tile picked from ``%ctaid`` is)."""
    name = getattr(atom, "atom", atom).name
    what = f"copy {name} from {src.kind} '{src.name}' into {dst.kind} '{dst.name}'"
    try:
        if isinstance(atom, TiledCopy):
            if interior:
                raise T.TensorError(f"{what}: interior= takes a fragment copy; a cp.async "
                                    "of a ragged tile needs no branch (it zero-fills)")
            _cp_async_ragged(k, atom, src, dst, what)
        elif isinstance(atom, UniversalCopy):
            _fragment_ragged(k, atom, src, dst, what, interior)
        else:
            raise T.TensorError(f"{what}: ragged tiles take a tiled cp.async or a universal "
                                "copy")
    except P.PartitionError as e:
        raise T.TensorError(f"{what}: {e}") from None


def _cp_async_ragged(k: Kernel, tc: TiledCopy, src: GmemTile | T.Tensor,
                     dst: GmemTile | T.Tensor, what: str) -> None:
    cp = tc.atom
    if not isinstance(src, GmemTile) or not isinstance(dst, T.Tensor):
        raise T.TensorError(f"{what}: copies a ragged gmem tile (GmemMatrix.tile_at) into an "
                            "smem tensor")
    if not isinstance(cp, SimtAsyncCopy) or cp.fill != "src_size":
        raise T.TensorError(f"{what}: a ragged tile needs the zero-filling atom "
                            "'atom.simt_async_copy<16>.src_size' (src-size bytes past the "
                            "matrix read as zeros)")
    acc = T.tiled_copy_plan(k, tc, src.stand_in, dst, what)
    m, vec = src.matrix, acc.vector
    _check_align(what, m, cp.bits // 8)
    cd, esize = m.contiguous, m.dtype.storage_bits // 8
    dsts = T._addresses(k, dst, acc)
    for d, idx in zip(dsts, _coords(k, src, acc, what), strict=True):
        line_ok = _inside(k, idx[1 - cd], m.extents[1 - cd])
        fill = k.reg("u32")
        if m.extents[cd] is None:
            k.ins("mov.u32", fill, vec * esize)
        else:
            left = k.reg("s32")
            k.ins("sub.s32", left, m.extents[cd], idx[cd])
            k.ins("max.s32", left, left, 0)
            k.ins("min.s32", left, left, vec)
            k.ins("mul.lo.u32", fill, left, esize)
        if line_ok is not None:
            k.ins("selp.b32", fill, fill, 0, line_ok)
        src_addr = _gaddr(k, m, idx)
        if line_ok is not None or m.extents[cd] is not None:
            reads = k.reg("pred")  # a chunk that reads nothing points at the matrix itself
            k.ins("setp.ne.u32", reads, fill, 0)
            k.ins("selp.b64", src_addr, src_addr, m.base, reads)
        copy_emit.emit_cp_async(k, cp, d, src_addr, fill=fill)


class _Memo:
    """Per-thread values derived once: the elements left along each dimension (``extent -
    coordinate``, s32), the predicates ``left > c`` of the dimension ``memo`` per distinct
    constant, the addresses of the strided dimension's rows."""

    def __init__(self, k: Kernel, m: GmemMatrix, base: list[Reg], memo: int) -> None:
        self.k, self.m, self.base, self.memo = k, m, base, memo
        self.lefts: dict[int, Reg] = {}
        self.preds: dict[int, Reg | None] = {}
        self.rows: dict[int, Reg] = {}
        self.addr = _gaddr(k, m, (base[0], base[1]))

    def left(self, d: int) -> Reg:
        if d not in self.lefts:
            self.lefts[d] = r = self.k.reg("s32")
            self.k.ins("sub.s32", r, self.m.extents[d], self.base[d])
        return self.lefts[d]

    def inside(self, c: tuple[int, int]) -> Reg | None:
        """Element ``c`` (from the thread's first) inside the matrix: the memoized predicate
        of one dimension, the other's comparison folded onto it (``setp.gt.and``)."""
        d, f = self.memo, 1 - self.memo
        if self.m.extents[d] is None:
            p = None
        elif c[d] not in self.preds:
            p = self.preds[c[d]] = self.k.reg("pred")
            self.k.ins("setp.gt.s32", p, self.left(d), c[d])
        else:
            p = self.preds[c[d]]
        if self.m.extents[f] is None:
            return p
        q = self.k.reg("pred")
        if p is None:
            self.k.ins("setp.gt.s32", q, self.left(f), c[f])
        else:
            self.k.ins("setp.gt.and.s32", q, self.left(f), c[f], p)
        return q

    def address(self, c: tuple[int, int], extra: int = 0) -> str:
        """``[reg+imm]`` of the element ``c`` (plus ``extra`` bytes) from the thread's."""
        m, k = self.m, self.k
        esize = m.dtype.storage_bits // 8
        imm, reg = extra, self.addr
        for d in (0, 1):
            s = m.strides[d]
            if isinstance(s, int):
                imm += c[d] * s * esize
            elif c[d]:
                if c[d] not in self.rows:
                    self.rows[c[d]] = k.reg("u64")
                    k.ins("mad.wide.u32", self.rows[c[d]], s, c[d] * esize, self.addr)
                reg = self.rows[c[d]]
        return f"[{reg}+{imm}]" if imm else f"[{reg}]"


def tile_inside(k: Kernel, tile: GmemTile) -> Reg | None:
    """The whole tile inside the matrix (``extent - origin >= size`` along both dimensions),
    as one predicate; None when no extent bounds it."""
    p: Reg | None = None
    for d in (0, 1):
        extent = tile.matrix.extents[d]
        if extent is None:
            continue
        rest, q = k.reg("s32"), k.reg("pred")
        k.ins("sub.s32", rest, extent, tile.origin[d])
        if p is None:
            k.ins("setp.gt.s32", q, rest, tile.shape[d] - 1)
        else:
            k.ins("setp.gt.and.s32", q, rest, tile.shape[d] - 1, p)
        p = q
    return p


def _fragment_ragged(k: Kernel, atom: UniversalCopy, src: GmemTile | T.Tensor,
                     dst: GmemTile | T.Tensor, what: str, interior: bool) -> None:
    tile, frag = (src, dst) if isinstance(src, GmemTile) else (dst, src)
    if not isinstance(tile, GmemTile) or not isinstance(frag, T.Tensor):
        raise T.TensorError(f"{what}: moves a fragment to or from a ragged gmem tile")
    store = frag is src
    s, d = (frag, tile.stand_in) if store else (tile.stand_in, frag)
    acc, groups = T.fragment_copy_plan(k, atom, s, d, what)
    m, vec = tile.matrix, acc.vector
    _check_align(what, m, atom.bits // 8)
    cd = m.contiguous
    packed = frag.bits < 32
    if cd == 0 and vec > 1:
        raise T.TensorError(f"{what}: a fragment's vectors run along dimension 1; gmem "
                            f"matrix '{m.name}' is contiguous along dimension 0")
    # a vector is never cut when the extent and the vector's start are multiples of it
    whole = m.extents[cd] is None or vec == 1 or m.multiple_of[cd] % vec == 0
    if not store and packed and not whole:
        raise T.TensorError(f"{what}: a ragged load of packed {frag.dtype.name} pairs could "
                            "cut a register; load 32-bit values")
    k.need_atom(atom, T.TensorError, name_feature=False)
    base, consts = _thread_coords(k, tile, acc, what)
    # memoize the predicates of the dimension with fewer distinct constants, fold the other
    memo = _Memo(k, m, base, min((0, 1), key=lambda d: len({c[d] for c in consts})))
    ebytes = frag.bits // 8
    addrs = [(memo.address(c), [memo.address(c, e * ebytes) for e in range(vec - 1)])
             for c in consts]  # before any branch: both paths use them
    ld, st = atom.ld_opcode("gmem"), atom.st_opcode("gmem")
    # row by row, along the contiguous dimension within a row: a thread's consecutive
    # accesses touch neighbouring bytes of one line (measured: bench/gemm_sm80_port.py)
    order = sorted(range(len(consts)), key=lambda i: (consts[i][1 - cd], consts[i][cd]))
    whole_tile = tile_inside(k, tile) if interior else None
    if whole_tile is not None:
        edge, done = k.fresh_label("EDGE_TILE"), k.fresh_label("TILE_DONE")
        k.bra(edge, f"!{whole_tile}", uni=True)
        for i in order:
            regs, addr = groups[i], addrs[i][0]
            k.ins(*((st, addr, _vec(regs)) if store else (ld, _vec(regs), addr)))
        k.bra(done, uni=True)
        k.label(edge)
    for i in order:
        regs, c, (addr, eaddrs) = groups[i], consts[i], addrs[i]
        full = memo.inside((c[0], c[1] + (0 if whole else vec - 1)))
        guard = str(full) if full is not None else None
        if store:
            k.ins(st, addr, _vec(regs), pred=guard)
        else:
            for r in regs:
                k.ins(f"mov.b{max(32, frag.bits)}", r, 0)
            k.ins(ld, _vec(regs), addr, pred=guard)
        if whole:
            continue
        # a vector cut by the extent: its elements inside, one at a time (stores only)
        for e in range(vec - 1):
            ok = memo.inside((c[0], c[1] + e))
            cut = k.reg("pred")
            k.ins("xor.pred", cut, ok, full)  # element e inside, the whole vector not
            if packed and e % 2:
                raise T.TensorError(f"{what}: a cut vector of more than one packed pair")
            r = regs[e // 2] if packed else regs[e]  # st.b16 of a .b32 stores its low half
            op = "st" if store else "ld"
            k.ins(f"{op}.global.b{frag.bits}", *((eaddrs[e], r) if store else (r, eaddrs[e])),
                  pred=str(cut))
    if whole_tile is not None:
        k.label(done)


def _check_align(what: str, m: GmemMatrix, width: int, escape: bool = False) -> None:
    """Accesses of ``width`` bytes into ``m`` need its base and line pitch to be known
    multiples of ``width`` (``m.align``, host-checked): the checks run on a stand-in with
    aligned lines, so nothing else would catch a wider access (it faults on the GPU)."""
    if width > m.align:
        how = (f"; branch on ragged.aligned(k, matrix, {width}) and pass aligned=True"
               if escape else "")
        raise T.TensorError(f"{what}: {width}-byte accesses, but gmem matrix '{m.name}' is "
                            f"only known to be {m.align}-byte aligned (base and line "
                            f"pitch){how}")


def store_tile(k: Kernel, tc: TiledCopy, src: T.Tensor, dst: GmemTile, *,
               aligned: bool = False) -> None:
    """A tiled universal copy of a whole smem tile into a gmem tile, unpredicated: each
    access ``ld.shared`` into registers, then ``st.global`` (``atom.universal_copy<128>``:
    16 bytes a thread, whole lines a warp).  The tile must lie inside the matrix: call it on
    the taken side of :func:`tile_inside` (a ragged tile's edge is stored from the fragment
    with :func:`copy_ragged`).  An access wider than the matrix's known ``align`` is refused
    unless ``aligned`` says the caller branched on :func:`aligned` for that width."""
    name = getattr(tc, "atom", tc).name
    what = f"copy {name} from {src.kind} '{src.name}' into {dst.kind} '{dst.name}'"
    try:
        if not isinstance(tc, TiledCopy) or not isinstance(tc.atom, UniversalCopy):
            raise T.TensorError(f"{what}: stores a tile with a tiled universal copy")
        if not isinstance(src, T.Tensor) or src.space != "smem" or \
                not isinstance(dst, GmemTile):
            raise T.TensorError(f"{what}: copies an smem tensor into a gmem tile "
                                "(GmemMatrix.tile_at)")
        acc = T.tiled_copy_plan(k, tc, src, dst.stand_in, what)
        if not aligned:
            _check_align(what, dst.matrix, tc.atom.bits // 8, escape=True)
        base, consts = _thread_coords(k, dst, acc, what)
        memo = _Memo(k, dst.matrix, base, 0)
        for s_addr, c in zip(T._addresses(k, src, acc), consts, strict=True):
            regs = T.staging_registers(k, tc.atom)
            copy_emit.emit_ld(k, tc.atom, "smem", regs, s_addr)
            copy_emit.emit_st(k, tc.atom, "gmem", memo.address(c)[1:-1], regs)
    except P.PartitionError as e:
        raise T.TensorError(f"{what}: {e}") from None


def reuse_rings(k: Kernel, rings: Sequence[StageRing], name: str, dtype: DType | str,
                layout: Layout | ComposedLayout) -> T.Tensor:
    """A tensor over the bytes of ``rings`` (one dynamic array, :func:`stage_rings`) for use
    after the last read of every stage -- an epilogue's staging tile; the caller's barrier
    orders it after those reads.  It is a buffer of its own (its own writer layout)."""
    first = rings[0].first
    total = rings[0].stages * rings[0].stage_bytes
    t = T.Tensor(name, to_dtype(dtype), layout, "smem", first.base)
    T._check_elements(t, total, f"rings '{rings[0].name}'")
    need = T._cosize_bytes(t)
    if need > total:
        raise T.TensorError(f"{t} spans {need} bytes, beyond the {total} bytes of the rings "
                            f"'{rings[0].name}' it reuses")
    return dataclasses.replace(t, buffer=T.SmemBuffer(name, need), view=layout)


def _vec(regs: Sequence[Reg]) -> Reg | list[Reg]:
    return regs[0] if len(regs) == 1 else list(regs)
