"""Hoisted copies for a K loop: the typed layer's copies split into what a thread computes once,
before the loop, and what each k-tile costs.

A K loop moves the same partition over a new k-tile and a new ring stage every iteration; what
depends on the thread alone (its coordinates, its swizzled shared-memory offsets, the
predicates along the dimension that does not move, its 64-bit global address) is the same
each time.  :mod:`nvatom.kernels.ragged` and :func:`nvatom.kernels.tensor.copy` evaluate it
at every call; the forms here evaluate it once:

* :func:`ragged_loader`: a tiled zero-filling ``cp.async`` of consecutive tiles of a
  :class:`~nvatom.kernels.ragged.GmemMatrix` along one dimension (``along``: K) into the
  stages of a ring, as :func:`nvatom.kernels.ragged.copy_ragged` would copy each.  Before
  the loop: the thread's global address (one pointer per distinct address immediate), its
  shared offsets, its rows or columns left along the fixed dimension (the fixed extent's
  src-size when that dimension is the contiguous one), the step of one tile.  Per tile
  (:meth:`RaggedLoader.copy`): the K tail's src-size (one ``min`` and a scale per distinct
  column, or one ``setp`` per chunk when K runs across lines), per chunk one ``setp.and``
  (inside along both dimensions), a ``selp`` of the src-size and of the address, a ``mad``
  for a chunk on another line (a run-time leading dimension) and the ``cp.async``; then the
  pointers move by one tile.  A chunk that reads nothing (src-size 0, past the matrix along
  either dimension) is given the matrix's base address, never one past it.
* :func:`ldsm_reader`: ``ldmatrix`` of a fragment from any stage of a ring, as
  :func:`nvatom.kernels.tensor.copy` would load it: the row offsets of every listed operand
  tile (the K steps) are computed before the loop; :meth:`LdsmReader.at` adds a stage's base
  once per distinct offset register, the rest are address immediates.

Every check of the un-hoisted copy runs once, when the copy is hoisted (they depend on the
layouts, not on the tile or the stage), and each use checks that it is given a stage of the
buffer it was hoisted for, through the same layout, and a fragment like the planned one.

Sources: PTX ISA "cp.async" (src-size: "the remaining bytes ... are filled with zeros"),
"setp" (``setp.CmpOp.BoolOp``: ``p = (a CmpOp b) BoolOp c``), "selp", "mad" (``.wide``),
"min", "ldmatrix", "Addresses as Operands" (``[reg+imm]``).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Sequence

from nvatom.atoms.copy import MatrixCopy, SimtAsyncCopy
from nvatom.atoms.tiled_copy import TiledCopy
from nvatom.kernels import partition as P
from nvatom.kernels import ragged as R
from nvatom.kernels import tensor as T
from nvatom.layout import ComposedLayout, Layout
from nvatom.ptx import copy_emit
from nvatom.ptx.builder import Kernel, Reg

__all__ = ["LdsmReader", "RaggedLoader", "StageReader", "ldsm_reader", "ragged_loader"]

Offsets = list[tuple[Reg, int]]  # per access: a byte-offset register and an immediate


def _smem_offsets(k: Kernel, t: T.Tensor, acc: P.Accesses) -> Offsets:
    """Byte offsets from ``t``'s base of every access: an access that lies a constant number
    of bytes after an earlier one for every thread (checked; the swizzle included) shares its
    register, the difference (and ``t``'s ``offset``) an address immediate."""
    scale = t.bits // 8
    reps, owner = _fold(t.layout, acc, scale)
    regs = T._emit_offsets(k, t.layout, 0, P.Accesses(acc.threads, acc.thread, tuple(
        acc.deltas[i] for i in reps)), scale)
    at = dict(zip(reps, regs, strict=True))
    return [(at[i][0], at[i][1] + d + t.offset * scale) for i, d in owner]


@functools.lru_cache(maxsize=256)  # pure: the layouts' arithmetic for every thread
def _fold(lay: Layout | ComposedLayout, acc: P.Accesses, scale: int
          ) -> tuple[tuple[int, ...], tuple[tuple[int, int], ...]]:
    """The accesses whose offsets are emitted, and per access (its representative, the
    constant difference in bytes, the same for every thread)."""
    values = [[int(lay(acc.thread(th) + s)) * scale for th in range(acc.threads)]
              for s in acc.starts]
    owner: list[tuple[int, int]] = []
    reps: list[int] = []
    for j, v in enumerate(values):
        for i in reps:
            diff = {a - b for a, b in zip(v, values[i], strict=True)}
            if len(diff) == 1 and min(diff) >= 0:
                owner.append((i, diff.pop()))
                break
        else:
            owner.append((j, 0))
            reps.append(j)
    return tuple(reps), tuple(owner)


def _rebase(k: Kernel, base: Reg, offsets: Offsets) -> list[str]:
    """``reg+imm`` per access from ``base``: one ``add`` per distinct offset register."""
    full: dict[str, Reg] = {}
    out = []
    for r, c in offsets:
        if r.name not in full:
            full[r.name] = k.reg("u32")
            k.ins("add.u32", full[r.name], base, r)
        out.append(f"{full[r.name]}+{c}" if c else str(full[r.name]))
    return out


def _same_stage(what: str, planned: T.Tensor, t: T.Tensor) -> None:
    if t.space != "smem" or t.buffer is not planned.buffer or t.layout != planned.layout \
            or t.offset != planned.offset or t.view != planned.view or t.base is None:
        raise T.TensorError(f"{what}: {t} is not a stage of the buffer '{planned.name}' "
                            f"({planned.layout}) the copy was hoisted for")


def _scale(k: Kernel, dst: Reg, src: Reg, factor: int) -> None:
    if factor & (factor - 1):
        k.ins("mul.lo.u32", dst, src, factor)
    else:
        k.ins("shl.b32", dst, src, factor.bit_length() - 1)


# --------------------------------------------------------------------------- gmem -> smem


@dataclasses.dataclass(frozen=True)
class _Chunk:
    """One access: its constants across lines (``line``) and along the contiguous dimension
    (``col``), its pointer (by address immediate) and its shared-memory offset."""

    line: int
    col: int
    ptr: int
    smem: tuple[Reg, int]


@dataclasses.dataclass(eq=False)
class RaggedLoader:
    """A ragged tiled cp.async hoisted out of a loop over tiles along ``along``; see
    :func:`ragged_loader`."""

    what: str
    atom: SimtAsyncCopy
    matrix: R.GmemMatrix
    planned: T.Tensor  # the smem tensor the copy was hoisted for
    along: int
    tile: int  # elements one tile moves along `along`
    vec: int  # elements one access moves
    chunks: list[_Chunk]
    ptrs: list[Reg]  # the thread's address (+ an immediate), of the current tile
    step: Reg | int  # bytes the pointers move per tile
    left: Reg | None  # (s32) elements from the thread's first to the extent along `along`
    lines_left: Reg | None  # (s32) the same across lines when the fixed dim is not contiguous
    fixed_cols: dict[int, tuple[Reg | int, Reg | None]]  # col -> (src-size, inside) if fixed

    def copy(self, k: Kernel, dst: T.Tensor) -> None:
        """cp.async the current tile into ``dst`` (a stage of the planned buffer), zero
        filled past the matrix; then move to the next tile."""
        _same_stage(self.what, self.planned, dst)
        m, esize = self.matrix, _esize(self.matrix)
        assert dst.base is not None
        cols = self._cols(k)
        lines = self.left if self.along != m.contiguous else self.lines_left
        addrs: dict[tuple[int, int], Reg] = {}
        stride = m.strides[1 - m.contiguous]
        for ch, d in zip(self.chunks, _rebase(k, dst.base, [c.smem for c in self.chunks]),
                         strict=True):
            nbytes, inside = cols[ch.col]
            reads = inside
            if lines is not None:
                reads = k.reg("pred")
                if inside is None:
                    k.ins("setp.gt.s32", reads, lines, ch.line)
                else:
                    k.ins("setp.gt.and.s32", reads, lines, ch.line, inside)
            src = self.ptrs[ch.ptr]
            if ch.line and isinstance(stride, Reg):
                if (ch.line, ch.ptr) not in addrs:
                    addrs[ch.line, ch.ptr] = k.reg("u64")
                    k.ins("mad.wide.u32", addrs[ch.line, ch.ptr], stride, ch.line * esize, src)
                src = addrs[ch.line, ch.ptr]
            fill: Reg | int = nbytes
            if reads is not None:
                fill, addr = k.reg("u32"), k.reg("u64")
                k.ins("selp.b32", fill, nbytes, 0, reads)
                k.ins("selp.b64", addr, src, m.base, reads)  # reads nothing: the base
                src = addr
            copy_emit.emit_cp_async(k, self.atom, d, src, fill=fill)
        for p in self.ptrs:
            k.ins("add.s64", p, p, self.step)
        if self.left is not None:
            k.ins("sub.s32", self.left, self.left, self.tile)

    def _cols(self, k: Kernel) -> dict[int, tuple[Reg | int, Reg | None]]:
        """Per distinct contiguous constant: (src-size, inside predicate or None)."""
        m = self.matrix
        if self.along != m.contiguous:
            return self.fixed_cols
        out: dict[int, tuple[Reg | int, Reg | None]] = {}
        esize = _esize(m)
        for col in sorted({c.col for c in self.chunks}):
            if self.left is None:
                out[col] = (self.vec * esize, None)
                continue
            rest, nbytes, inside = k.reg("s32"), k.reg("u32"), k.reg("pred")
            if col:
                k.ins("sub.s32", rest, self.left, col)
            else:
                rest = self.left
            k.ins("setp.gt.s32", inside, rest, 0)
            k.ins("min.s32", nbytes, rest, self.vec)  # negative: unused (inside is false)
            _scale(k, nbytes, nbytes, esize)
            out[col] = (nbytes, inside)
        return out


def _esize(m: R.GmemMatrix) -> int:
    return m.dtype.storage_bits // 8


def ragged_loader(k: Kernel, tc: TiledCopy, tile: R.GmemTile, dst: T.Tensor,
                  along: int = 1) -> RaggedLoader:
    """Hoist :func:`~nvatom.kernels.ragged.copy_ragged` of ``tile`` and the tiles after it
    along dimension ``along`` into ``dst``'s buffer (the stages of a ring): every check and
    the per-thread setup are emitted here, once; :meth:`RaggedLoader.copy` issues one tile
    and moves to the next."""
    what = f"copy {tc.atom.name} from {tile.kind} '{tile.name}' into {dst.kind} '{dst.name}'"
    try:
        return _loader(k, tc, tile, dst, along, what)
    except P.PartitionError as e:
        raise T.TensorError(f"{what}: {e}") from None


def _loader(k: Kernel, tc: TiledCopy, tile: R.GmemTile, dst: T.Tensor, along: int,
            what: str) -> RaggedLoader:
    if not isinstance(tile, R.GmemTile) or not isinstance(dst, T.Tensor) or along not in (0, 1):
        raise T.TensorError(f"{what}: hoists a copy of a ragged gmem tile (GmemMatrix.tile_at) "
                            f"into an smem tensor along dimension 0 or 1, got along={along!r}")
    cp = tc.atom
    if not isinstance(cp, SimtAsyncCopy) or cp.fill != "src_size":
        raise T.TensorError(f"{what}: a ragged tile needs the zero-filling atom "
                            "'atom.simt_async_copy<16>.src_size' (src-size bytes past the "
                            "matrix read as zeros)")
    acc = T.tiled_copy_plan(k, tc, tile.stand_in, dst, what)
    m, esize = tile.matrix, _esize(tile.matrix)
    cd, fixed = m.contiguous, 1 - along
    base, consts = R._thread_coords(k, tile, acc, what)
    smem = _smem_offsets(k, dst, acc)
    thread_addr = R._gaddr(k, m, (base[0], base[1]))
    # per access: its line (the strided dimension's constant) and column; every constant
    # along a dimension of static stride is an address immediate, one pointer each
    ptr_of: dict[int, int] = {}
    ptrs: list[Reg] = []
    chunks = []
    for c, s in zip(consts, smem, strict=True):
        imm = sum(c[d] * st * esize for d, st in enumerate(m.strides) if isinstance(st, int))
        if imm not in ptr_of:
            ptr_of[imm] = len(ptrs)
            p = thread_addr
            if imm:
                p = k.reg("u64")
                k.ins("add.s64", p, thread_addr, imm)
            ptrs.append(p)
        chunks.append(_Chunk(c[1 - cd], c[cd], ptr_of[imm], s))
    step = _step(k, m, along, tile.shape[along] * esize)
    left = _left(k, m.extents[along], base[along])
    lines_left = _left(k, m.extents[fixed], base[fixed]) if fixed != cd else None
    fixed_cols: dict[int, tuple[Reg | int, Reg | None]] = {}
    if fixed == cd:
        rest = _left(k, m.extents[fixed], base[fixed])
        for col in sorted({ch.col for ch in chunks}):
            fixed_cols[col] = _fixed_col(k, rest, col, acc.vector, esize)
    return RaggedLoader(what, cp, m, dst, along, tile.shape[along], acc.vector, chunks, ptrs,
                        step, left, lines_left, fixed_cols)


def _step(k: Kernel, m: R.GmemMatrix, along: int, nbytes: int) -> Reg | int:
    """Bytes one tile moves along ``along``: an immediate, or ``ld * bytes`` (hoisted)."""
    s = m.strides[along]
    if isinstance(s, int):
        return s * nbytes
    r = k.reg("u64")
    k.ins("mul.wide.u32", r, s, nbytes)
    return r


def _left(k: Kernel, extent: Reg | None, coord: Reg) -> Reg | None:
    """``extent - coord`` (s32): elements from the thread's first to the extent."""
    if extent is None:
        return None
    r = k.reg("s32")
    k.ins("sub.s32", r, extent, coord)
    return r


def _fixed_col(k: Kernel, rest: Reg | None, col: int, vec: int, esize: int
               ) -> tuple[Reg | int, Reg | None]:
    """(src-size, inside) of the chunks ``col`` elements along a fixed contiguous extent."""
    if rest is None:
        return vec * esize, None
    n, inside = k.reg("s32"), k.reg("pred")
    k.ins("setp.gt.s32", inside, rest, col)
    if col:
        k.ins("sub.s32", n, rest, col)
    k.ins("max.s32", n, n if col else rest, 0)
    k.ins("min.s32", n, n, vec)
    _scale(k, n, n, esize)
    return n, inside


# --------------------------------------------------------------------------- smem -> registers


@dataclasses.dataclass(eq=False)
class LdsmReader:
    """ldmatrix of a fragment from any stage of a ring; see :func:`ldsm_reader`."""

    what: str
    atom: MatrixCopy
    planned: T.Tensor
    frag: T.Tensor
    per: int  # registers one instruction moves
    offsets: dict[tuple[int, int], Offsets]  # per operand tile: the accesses' offsets

    def at(self, k: Kernel, src: T.Tensor) -> StageReader:
        """The reader of stage ``src`` (a stage of the planned buffer): its row addresses,
        one ``add`` of the stage's base per distinct offset register of all hoisted tiles."""
        _same_stage(self.what, self.planned, src)
        assert src.base is not None
        keys = list(self.offsets)
        flat = _rebase(k, src.base, [o for key in keys for o in self.offsets[key]])
        n = len(self.offsets[keys[0]])
        return StageReader(self, {key: flat[i * n:(i + 1) * n] for i, key in enumerate(keys)})


@dataclasses.dataclass(eq=False)
class StageReader:
    """An :class:`LdsmReader` at one stage: ``ldmatrix`` with the addresses computed."""

    reader: LdsmReader
    addresses: dict[tuple[int, int], list[str]]

    def copy(self, k: Kernel, frag: T.Tensor, tile: Sequence[int]) -> None:
        """ldmatrix operand tile ``tile`` of the stage into ``frag`` (a fragment like the
        planned one)."""
        rd, p = self.reader, self.reader.frag
        if (frag.mma, frag.operand, frag.layout, frag.dtype, len(frag.regs)) != \
                (p.mma, p.operand, p.layout, p.dtype, len(p.regs)):
            raise T.TensorError(f"{rd.what}: fragment '{frag.name}' is not like '{p.name}', "
                                "the fragment the copy was hoisted for")
        key = (tile[0], tile[1])
        if key not in self.addresses:
            raise T.TensorError(f"{rd.what}: tile {key} was not hoisted (tiles "
                                f"{sorted(self.addresses)})")
        for j, addr in enumerate(self.addresses[key]):
            regs = list(frag.regs[j * rd.per:(j + 1) * rd.per])
            copy_emit.emit_matrix_copy(k, rd.atom, regs, addr)


def ldsm_reader(k: Kernel, atom: MatrixCopy, src: T.Tensor, frag: T.Tensor,
                tiles: Sequence[Sequence[int]]) -> LdsmReader:
    """Hoist ``copy(k, atom, src, frag, tile=t)`` for every ``t`` of ``tiles``: the checks
    and the row offsets (one evaluation for all tiles when they share the thread part),
    emitted here; :meth:`LdsmReader.copy` loads one tile from a stage."""
    what = f"copy {atom.name} from {src.kind} '{src.name}' into {frag.kind} '{frag.name}'"
    plans = []
    try:
        for t in tiles:
            plans.append(T.ldsm_plan(k, atom, src, frag, t, what))
    except P.PartitionError as e:
        raise T.TensorError(f"{what}: {e}") from None
    keys = [(t[0], t[1]) for t in tiles]
    first = plans[0][0]
    offsets: dict[tuple[int, int], Offsets] = {}
    if all(a.thread == first.thread for a, _ in plans):
        merged = P.Accesses(first.threads, first.thread,
                            tuple(d for a, _ in plans for d in a.deltas))
        flat = _smem_offsets(k, src, merged)
        n = len(first.deltas)
        for i, key in enumerate(keys):
            offsets[key] = flat[i * n:(i + 1) * n]
    else:
        for key, (a, _) in zip(keys, plans, strict=True):
            offsets[key] = _smem_offsets(k, src, a)
    return LdsmReader(what, atom, src, frag, plans[0][1], offsets)
