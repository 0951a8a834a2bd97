"""Typed tensors in the kernel builder: copy and MMA atoms applied to tensors, every address
derived from layouts, every use verified by the atoms' own verifiers before PTX is emitted.

A :class:`Tensor` is what the PTX builder lacked: an element type (``nvatom.dtypes``), a
layout (``nvatom.layout``, a swizzle included), a memory space (``gmem``, ``smem``, ``rmem``,
``tmem``), a base (an address register, or a fragment's registers) and a name for the
diagnostics.  It is the builder-side twin of the IR's ``!cute.memref<type, space, layout>``,
and the same checks run on both (one implementation in ``nvatom.atoms``, two front ends):

* :func:`copy` applies a copy atom to two tensors: a tiled ``cp.async`` (``make_tiled_copy``;
  ``TiledCopy.partition_pair`` and the atom's ``verify_instance``, as the IR's
  ``tiled_copy.copy``), an ``ldmatrix`` into an MMA fragment (``check_fragment_layout``,
  ``ldsm_matches_mma``, ``row_addresses``, ``check_swizzled_rows`` and ``verify_instance``, as
  the IR's ``atom.copy`` and ``copy_fragment``) or a vector ``ld``/``st`` between a fragment
  and memory (``verify_instance``: the specification's "cannot vectorize copy" diagnostics).
* :func:`mma` applies a tiled register MMA (``verify_register_mma``, ``check_fragment_layout``
  per operand and ``check_gemm_operands``, as the IR's ``tiled_mma.gemm``) and emits it with
  ``nvatom.ptx.tiled_mma_emit``.
* a shared-memory buffer remembers the layout it was written through; a reader (or a later
  writer) through another layout -- a different swizzle -- is an error: the mistake that
  ptxas cannot see.

Addresses: a partition (``nvatom.kernels.partition``) splits each access into a thread part
(a layout evaluated once from ``%tid.x`` by ``nvatom.ptx.layout_eval``) and constants; after
the tensor's layout (the swizzle) each access is an ``add`` or ``xor`` of a constant when that
holds for every thread (checked here, :func:`thread_offsets`), else evaluated afresh.  Every
access is checked, for every thread, to be contiguous and aligned after the swizzle (16 bytes
for cp.async and ldmatrix rows).  Errors are :class:`TensorError`, naming the tensors, the
atom and the mismatch.  See docs/kernel-layer.md.

Sources: PTX ISA "cp.async", "ldmatrix", "mma" (m16n8k16), "ld", "st", "cvt"; CuTe's
``Tensor``, ``partition_S/D`` and ``retile`` (cute/tensor.hpp, cute/atom/copy_atom.hpp).
"""

from __future__ import annotations

import dataclasses
import functools
import struct
import weakref
from collections.abc import Sequence
from typing import Any

from nvatom.arch import MAX_CTA_THREADS, MAX_THREAD_REGISTERS
from nvatom.atoms.copy import (
    CopyUse,
    MatrixCopy,
    SimtAsyncCopy,
    UniversalCopy,
    check_swizzled_rows,
    ldsm_matches_mma,
)
from nvatom.atoms.mma import MmaForm
from nvatom.atoms.tiled_copy import TiledCopy
from nvatom.atoms.tiled_mma import (
    TiledMma,
    check_fragment_layout,
    check_gemm_operands,
    make_tiled_mma,
)
from nvatom.atoms.verify import MmaUse, OperandUse, verify_register_mma
from nvatom.dtypes import DType
from nvatom.dtypes import dtype as to_dtype
from nvatom.errors import NvatomError
from nvatom.kernels import partition as P
from nvatom.layout import (
    ComposedLayout,
    Layout,
    composition,
    layouts_equivalent,
    size,
    zipped_divide,
)
from nvatom.ptx import copy_emit
from nvatom.ptx import sync_emit as SE
from nvatom.ptx.builder import Kernel, Reg
from nvatom.ptx.layout_eval import emit_composed_offset, emit_layout_offset
from nvatom.ptx.tiled_mma_emit import Fragment, emit_tiled_mma, repetitions

__all__ = ["SPACES", "SmemBuffer", "Tensor", "TensorError", "as_tiled", "convert", "copy",
           "elementwise", "fragment", "fragment_copy_plan", "fragment_like", "gmem_tensor",
           "ldsm_plan", "mma", "smem_tensor", "thread_index", "thread_offsets",
           "tiled_copy_plan", "tmem_tensor"]

SPACES = ("gmem", "smem", "rmem", "tmem")
#: Static shared memory a CTA may declare (PTX ISA ".shared": 48 KB without the opt-in).
STATIC_SMEM_BYTES = 48 * 1024
_KINDS = {"gmem": "gmem tensor", "smem": "smem tensor", "rmem": "fragment", "tmem": "tmem tensor"}


class TensorError(NvatomError, ValueError):
    """A tensor used in a way its atom, layout, type or memory forbids; names them."""


@dataclasses.dataclass(eq=False)
class SmemBuffer:
    """One ``.shared`` array; remembers the layout its first writer used."""

    name: str
    nbytes: int
    written: Layout | ComposedLayout | None = None
    writer: str | None = None


@dataclasses.dataclass(frozen=True, eq=False)
class Tensor:
    """Element type + layout + memory space + base; see the module doc."""

    name: str
    dtype: DType
    layout: Layout | ComposedLayout  # coordinate -> element offset from base (+ offset)
    space: str
    base: Reg | None = None  # gmem: u64 global address; smem: u32 shared address
    regs: tuple[Reg, ...] = ()  # rmem: the fragment's registers, in value order
    offset: int = 0  # elements from base (a tile of a plain-layout tensor)
    buffer: SmemBuffer | None = None  # smem: the buffer the tensor is a view of
    view: Layout | ComposedLayout | None = None  # smem: the buffer's layout as seen here
    mma: TiledMma | None = None  # rmem: the tiled MMA whose fragment this is
    operand: str | None = None  # rmem: "A", "B" or "C"

    @property
    def kind(self) -> str:
        return _KINDS[self.space]

    @property
    def outer(self) -> Layout:
        return self.layout.outer if isinstance(self.layout, ComposedLayout) else self.layout

    @property
    def shape(self) -> tuple[int, ...]:
        o = self.outer
        return tuple(size(o[i]) for i in range(o.rank))

    @property
    def bits(self) -> int:
        return self.dtype.storage_bits

    def __str__(self) -> str:
        return f"{self.kind} '{self.name}' ({self.dtype.name}, {self.layout})"

    def tile(self, tiler: Sequence[int], coord: Sequence[int]) -> Tensor:
        """The ``tiler``-shaped tile at tile coordinate ``coord`` (CuTe's ``local_tile``)."""
        if self.space == "rmem":
            raise TensorError(f"fragment '{self.name}' has no tiles: partition a memory tensor")
        tiles = zipped_divide(self.outer, tuple(tiler))
        grid = tuple(size(tiles[1][i]) for i in range(tiles[1].rank))
        if len(coord) != len(grid) or any(not 0 <= c < g for c, g in zip(coord, grid,
                                                                         strict=True)):
            raise TensorError(f"tile {tuple(coord)} of {tuple(tiler)} tiles is outside {self} "
                              f"of shape {self.shape} ({grid} tiles)")
        start = tiles[1](*coord)
        sub = tiles[0]
        if isinstance(self.layout, ComposedLayout):
            lay: Layout | ComposedLayout = ComposedLayout(self.layout.inner,
                                                          self.layout.offset + start, sub)
            off = self.offset
        else:
            lay, off = sub, self.offset + start
        return dataclasses.replace(self, layout=lay, offset=off)

    def with_layout(self, layout: Layout | ComposedLayout, name: str | None = None) -> Tensor:
        """Another view of the same shared-memory buffer (a reinterpretation)."""
        if self.space != "smem" or self.buffer is None:
            raise TensorError(f"only smem tensors are re-viewed, not {self}")
        t = dataclasses.replace(self, name=name or self.name, layout=layout, view=layout,
                                offset=0)
        _check_fits(t, self.buffer)
        return t


# --------------------------------------------------------------------------- constructors

_TID: weakref.WeakKeyDictionary[Kernel, Reg] = weakref.WeakKeyDictionary()


def thread_index(k: Kernel) -> Reg:
    """``%tid.x`` in a register, read once per kernel where it is first needed (a kernel that
    branches before its first tensor access calls this at its start, so the register is
    defined on every path)."""
    if k not in _TID:
        r = k.reg("u32")
        k.ins("mov.u32", r, "%tid.x")
        _TID[k] = r
    return _TID[k]


def _target(k: Kernel) -> Any:
    if k.module is None:
        raise TensorError(f"kernel '{k.name}' belongs to no Module (make it with "
                          "Module.kernel): tensors verify against the module's target")
    return k.module.target


def gmem_tensor(k: Kernel, name: str, dtype: DType | str, shape: Sequence[int],
                strides: Sequence[int]) -> Tensor:
    """A global tensor passed as the ``.u64`` kernel parameter ``name``."""
    base = k.reg("u64")
    k.ins("cvta.to.global.u64", base, k.ld_param(k.param(name)))
    return Tensor(name, to_dtype(dtype), Layout(tuple(shape), tuple(strides)), "gmem", base)


def _cosize_bytes(t: Tensor) -> int:
    lay = t.layout
    top = max(int(lay(i)) for i in range(size(t.outer))) + t.offset
    return (top + 1) * t.bits // 8


def _check_elements(t: Tensor, limit_bytes: int, where: str) -> None:
    """Refuse a memory tensor with more elements than ``limit_bytes`` can hold before its
    offsets are evaluated one by one (a user's 2^31-element layout must not hang)."""
    n = size(t.outer)
    if n * t.bits > 8 * limit_bytes:
        raise TensorError(f"{t} has {n} elements ({n * t.bits // 8} bytes), more than "
                          f"{where} holds ({limit_bytes} bytes)")


def _check_fits(t: Tensor, buf: SmemBuffer) -> None:
    _check_elements(t, buf.nbytes, f"its buffer '{buf.name}'")
    need = _cosize_bytes(t)
    if need > buf.nbytes:
        raise TensorError(f"{t} spans {need} bytes, beyond its buffer '{buf.name}' of "
                          f"{buf.nbytes} bytes")


_SMEM_USED: weakref.WeakKeyDictionary[Kernel, int] = weakref.WeakKeyDictionary()


def smem_tensor(k: Kernel, name: str, dtype: DType | str,
                layout: Layout | ComposedLayout) -> Tensor:
    """A static ``.shared`` buffer (128-byte aligned: whole swizzle rows) holding ``layout``."""
    t = Tensor(name, to_dtype(dtype), layout, "smem")
    _check_elements(t, STATIC_SMEM_BYTES, "static shared memory")
    nbytes = _cosize_bytes(t)
    used = _SMEM_USED.get(k, 0) + nbytes
    if used > STATIC_SMEM_BYTES:
        raise TensorError(f"smem tensor '{name}' ({nbytes} bytes) overflows static shared "
                          f"memory: {used} bytes of {STATIC_SMEM_BYTES} in kernel '{k.name}'")
    _SMEM_USED[k] = used
    k.shared(name, nbytes, align=128)
    base = k.reg("u32")
    k.ins("mov.u32", base, name)
    return dataclasses.replace(t, base=base, buffer=SmemBuffer(name, nbytes), view=layout)


def tmem_tensor(k: Kernel, name: str, dtype: DType | str, layout: Layout) -> Tensor:
    """A tensor-memory tensor (tcgen05, SM100): refused on targets without tensor memory."""
    t = _target(k)
    if not t.supports("tcgen05"):
        raise TensorError(f"tmem tensor '{name}' needs tensor memory (tcgen05), which "
                          f"{t.name} does not have")
    return Tensor(name, to_dtype(dtype), layout, "tmem")


def _register_type(dt: DType) -> tuple[str, int]:
    """(PTX register type, values per register): 32-bit registers, narrow types packed."""
    if dt.storage_bits >= 32:
        return ("f32" if dt.name == "f32" else f"b{dt.storage_bits}"), 1
    return "b32", 32 // dt.storage_bits


def as_tiled(mma: TiledMma | MmaForm) -> TiledMma:
    """A tiled MMA as given, or one warp of a single register MMA atom."""
    return mma if isinstance(mma, TiledMma) else make_tiled_mma(mma)


def fragment(k: Kernel, mma: TiledMma | MmaForm, operand: str, *, name: str | None = None,
             dtype: DType | str | None = None, layout: Layout | None = None,
             zero: bool = False) -> Tensor:
    """Thread-local registers of ``operand`` of a tiled MMA (or of one atom: a warp), in the
    atom's register order (repetition ``i + reps_0 * j`` holds registers ``[per_atom * (i +
    reps_0 * j), ...)``).  ``dtype`` and ``layout`` default to the MMA's; other ones are
    declared as given and refused when used (as the IR's ``alloc_rmem``)."""
    mma = as_tiled(mma)
    op = operand.upper()
    op = "C" if op == "D" else op
    form = mma.atom
    dt = to_dtype(dtype if dtype is not None else form.operand_type(op).name)  # type: ignore[attr-defined]
    lay = layout if layout is not None else mma.tv_layout(op)
    if not isinstance(lay, Layout) or lay.rank != 2:
        raise TensorError(f"fragment '{name or 'r' + op}': its layout must be a (thread, "
                          f"value) layout of rank 2, got {lay}")
    if size(lay[0]) > MAX_CTA_THREADS:
        raise TensorError(f"fragment '{name or 'r' + op}': its layout {lay} spans "
                          f"{size(lay[0])} threads; a CTA has at most {MAX_CTA_THREADS}")
    rtype, per = _register_type(dt)
    nregs = -(-size(lay[1]) // per)
    if nregs > MAX_THREAD_REGISTERS:
        raise TensorError(f"fragment '{name or 'r' + op}' of {size(lay[1])} {dt.name} values "
                          f"a thread needs {nregs} registers; a thread has at most "
                          f"{MAX_THREAD_REGISTERS}")
    regs = tuple(k.regs(rtype, nregs))
    if zero:
        for r in regs:
            k.ins(f"mov.{rtype}", r, "0f00000000" if rtype == "f32" else 0)
    return Tensor(name or f"r{op}", dt, lay, "rmem", regs=regs, mma=mma, operand=op)


def fragment_like(k: Kernel, t: Tensor, *, dtype: DType | str | None = None,
                  name: str | None = None) -> Tensor:
    """Fresh registers holding ``t``'s values (same layout), as ``dtype``."""
    if t.space != "rmem" or t.mma is None or t.operand is None:
        raise TensorError(f"fragment_like takes a fragment, not {t}")
    return fragment(k, t.mma, t.operand, name=name or f"{t.name}_like",
                    dtype=dtype or t.dtype, layout=t.outer)


# --------------------------------------------------------------------------- addresses


def thread_offsets(k: Kernel, tid: Reg, nthreads: int, tile: Layout | ComposedLayout,
                   thread_idx: Layout, deltas: Sequence[int]) -> list[Reg]:
    """Element offsets ``tile(thread_idx(t) + delta)`` of thread ``t`` for every delta.

    The first is evaluated in PTX (the thread layout, then the tile's layout and swizzle); each
    other is derived from it by an ``add`` or ``xor`` of a constant when that is right for
    every thread (checked here), else evaluated afresh.  Every access of the kernel layer
    (direct, ragged and hoisted) derives its addresses here.
    """
    def py(t: int, d: int) -> int:
        return int(tile(thread_idx(t) + d))

    base_idx = emit_layout_offset(k, thread_idx, tid)
    if deltas[0]:
        base_idx = _add32(k, base_idx, deltas[0])
    base = emit_composed_offset(k, tile, base_idx)
    out = [base]
    ref = [py(t, deltas[0]) for t in range(nthreads)]
    for d in deltas[1:]:
        vals = [py(t, d) for t in range(nthreads)]
        add = {v - r for v, r in zip(vals, ref, strict=True)}
        xor = {v ^ r for v, r in zip(vals, ref, strict=True)}
        r = k.reg("u32")
        if len(add) == 1:
            k.ins("add.u32", r, base, add.pop())
        elif len(xor) == 1:
            k.ins("xor.b32", r, base, xor.pop())
        else:
            idx = _add32(k, emit_layout_offset(k, thread_idx, tid), d)
            r = emit_composed_offset(k, tile, idx)
        out.append(r)
    return out


def _add32(k: Kernel, a: Reg | int, b: Reg | int) -> Reg:
    out = k.reg("u32")
    k.ins("add.u32", out, a, b)
    return out


def _emit_offsets(k: Kernel, lay: Layout | ComposedLayout, offset: int, acc: P.Accesses,
                  scale: int) -> list[tuple[Reg, int]]:
    """Byte offsets ``(lay(thread(t) + start_j) + offset) * scale`` of every access start, as
    (register, constant): one layout of the thread index when the first access's offsets are
    one (no swizzle in the way) and the others that plus a constant (an address immediate),
    else :func:`thread_offsets`' folding."""
    n, tid = acc.threads, thread_index(k)

    def byte_offsets(d: int) -> list[int]:
        return [(int(lay(acc.thread(t) + d)) + offset) * scale for t in range(n)]

    def scaled(starts: Sequence[int]) -> list[tuple[Reg, int]]:
        out = []
        for r in thread_offsets(k, tid, n, lay, acc.thread, starts):
            b = k.reg("u32")
            if scale & (scale - 1):
                k.ins("mul.lo.u32", b, r, scale)
            else:
                k.ins("shl.b32", b, r, scale.bit_length() - 1)
            if offset:
                k.ins("add.u32", b, b, offset * scale)
            out.append((b, 0))
        return out

    first = byte_offsets(acc.starts[0])
    direct = P.affine_layout(first) if isinstance(lay, Layout) else None
    if direct is None:
        return scaled(acc.starts)
    base = emit_layout_offset(k, direct, tid)
    if first[0]:
        k.ins("add.u32", base, base, first[0])
    out = [(base, 0)]
    for d in acc.starts[1:]:
        diff = {v - f for v, f in zip(byte_offsets(d), first, strict=True)}
        c = diff.pop() if len(diff) == 1 else -1
        out.append((base, c) if c >= 0 else scaled([d])[0])
    return out


@functools.lru_cache(maxsize=256)
def _first_split(lay: Layout | ComposedLayout, offset: int, acc: P.Accesses, bits: int,
                 align: int) -> tuple[int, int, int] | None:
    """The first (thread, access, byte offset) whose elements are not contiguous and
    ``align``-byte aligned after the layout, or None (checked for every thread)."""
    for t in range(acc.threads):
        base = acc.thread(t)
        for j, d in enumerate(acc.deltas):
            offs = [int(lay(base + x)) + offset for x in d]
            if offs != list(range(offs[0], offs[0] + len(offs))) or \
                    (offs[0] * bits // 8) % align:
                return t, j, offs[0] * bits // 8
    return None


def _check_accesses(what: str, t: Tensor, acc: P.Accesses, align: int) -> None:
    bad = _first_split(t.layout, t.offset, acc, t.bits, align)
    if bad is not None:
        th, j, b = bad
        raise TensorError(f"{what}: thread {th}'s access {j} at byte {b} of {t} is not "
                          f"{acc.vector} contiguous elements on a {align}-byte boundary")


def _address(k: Kernel, t: Tensor, off: Reg) -> Reg:
    assert t.base is not None
    if t.space == "gmem":
        o64, a = k.reg("u64"), k.reg("u64")
        k.ins("cvt.u64.u32", o64, off)
        k.ins("add.s64", a, t.base, o64)
        return a
    a = k.reg("u32")
    k.ins("add.u32", a, t.base, off)
    return a


def _addresses(k: Kernel, t: Tensor, acc: P.Accesses) -> list[str]:
    """``reg`` or ``reg+imm`` per access: one full address per distinct offset register, the
    constant parts as address immediates (PTX ISA "Addresses as Operands": [reg+imm])."""
    full: dict[str, Reg] = {}
    out = []
    for r, c in _emit_offsets(k, t.layout, t.offset, acc, t.bits // 8):
        if r.name not in full:
            full[r.name] = _address(k, t, r)
        out.append(f"{full[r.name]}+{c}" if c else str(full[r.name]))
    return out


# --------------------------------------------------------------------------- smem writers/readers


def _note_write(what: str, t: Tensor) -> None:
    buf = t.buffer
    if buf is None:
        return
    if buf.written is not None and buf.written != t.view:
        raise TensorError(f"{what}: writes through {t.view}, but buffer '{buf.name}' was "
                          f"written through {buf.written} (by '{buf.writer}'): one buffer, one "
                          "layout")
    buf.written, buf.writer = t.view, t.name


def _check_read(what: str, t: Tensor) -> None:
    buf = t.buffer
    if buf is not None and buf.written is not None and buf.written != t.view:
        raise TensorError(f"{what}: reads through {t.view}, but buffer '{buf.name}' was "
                          f"written through {buf.written} (by '{buf.writer}'): the reader's "
                          "swizzle must be the writer's")


# --------------------------------------------------------------------------- copy


def _use(t: Tensor, layout: Any) -> OperandUse:
    return OperandUse(t.dtype.name, t.space, layout)


def _verify(what: str, fn: Any, *args: Any) -> None:
    """Run an atom-layer verifier; its diagnostic becomes a TensorError naming the use."""
    try:
        fn(*args)
    except TensorError:
        raise
    except NvatomError as e:
        raise TensorError(f"{what}: {e}") from None


def _check_types(what: str, src: Tensor, dst: Tensor) -> None:
    if src.dtype != dst.dtype:
        raise TensorError(f"{what}: element types differ, {src.dtype.name} -> "
                          f"{dst.dtype.name} (a copy does not convert; use convert)")


def copy(k: Kernel, atom: Any, src: Tensor, dst: Tensor, *,
         tile: Sequence[int] = (0, 0)) -> None:
    """Apply a copy atom (or a tiled cp.async/universal copy) to ``src`` -> ``dst``.

    * ``TiledCopy`` of cp.async: gmem -> smem, tensors of the same shape made of whole tiles;
    * ``MatrixCopy`` (ldmatrix): smem -> the fragment of a tiled MMA; ``tile`` picks the
      operand tile of the smem tensor (``(0, k)``: the k-th K step); an atom moving several
      fragments' registers (``.x4`` for two B fragments) loads consecutive repetitions;
    * ``UniversalCopy``: a fragment <-> a gmem/smem tensor of the operand tile's shape.
    """
    name = getattr(atom, "atom", atom).name
    what = f"copy {name} from {src.kind} '{src.name}' into {dst.kind} '{dst.name}'"
    try:
        _copy(k, atom, src, dst, tile, what)
    except P.PartitionError as e:  # a partition that is not thread-uniform, named by the use
        raise TensorError(f"{what}: {e}") from None


def _copy(k: Kernel, atom: Any, src: Tensor, dst: Tensor, tile: Sequence[int],
          what: str) -> None:
    if isinstance(atom, TiledCopy):
        _copy_tiled(k, atom, src, dst, what)
    elif isinstance(atom, MatrixCopy) and atom.op == "ldmatrix":
        _copy_ldsm(k, atom, src, dst, tile, what)
    elif isinstance(atom, UniversalCopy):
        _copy_fragment(k, atom, src, dst, what)
    else:
        raise TensorError(f"{what}: the tensor layer applies tiled copies, ldmatrix and "
                          "universal copies, not this atom")


def _copy_tiled(k: Kernel, tc: TiledCopy, src: Tensor, dst: Tensor, what: str) -> None:
    if "rmem" in (src.space, dst.space):
        raise TensorError(f"{what}: a tiled copy moves memory to memory; a fragment is "
                          "copied with the bare atom (its layout is the tiled MMA's)")
    acc = tiled_copy_plan(k, tc, src, dst, what)
    if isinstance(tc.atom, UniversalCopy):  # memory -> registers -> memory, per access
        for d, s in zip(_addresses(k, dst, acc), _addresses(k, src, acc), strict=True):
            regs = staging_registers(k, tc.atom)
            copy_emit.emit_ld(k, tc.atom, src.space, regs, s)
            copy_emit.emit_st(k, tc.atom, dst.space, d, regs)
        return
    for d, s in zip(_addresses(k, dst, acc), _addresses(k, src, acc), strict=True):
        copy_emit.emit_cp_async(k, tc.atom, d, s)  # type: ignore[arg-type]


def staging_registers(k: Kernel, atom: UniversalCopy) -> list[Reg]:
    """Fresh registers for one access of ``atom`` (``.v4.b32``: four ``.b32``)."""
    va = atom.vector_access
    return [k.reg(f"b{va.elem}") for _ in range(va.vec)]


def tiled_copy_plan(k: Kernel, tc: TiledCopy, src: Tensor, dst: Tensor,
                    what: str) -> P.Accesses:
    """Every check of a tiled copy ``src`` -> ``dst`` (cp.async, or a universal copy between
    memory tensors; the buffers' writer/reader layouts noted), and its partition; shared with
    the ragged copies of ``nvatom.kernels.ragged``."""
    atom = tc.atom
    if not isinstance(atom, (SimtAsyncCopy, UniversalCopy)):
        raise TensorError(f"{what}: a tiled copy of {atom.name} is not emitted here (cp.async "
                          "or a universal copy)")
    _check_types(what, src, dst)
    if src.shape != dst.shape:
        raise TensorError(f"{what}: shapes differ, {src.shape} -> {dst.shape}")
    _check_threads(k, what, tc.threads)
    # the IR's tiled_copy.copy: partition_pair (vectorisation), then the atom's ladder on
    # thread 0's values (residencies, element width)
    tv = [composition(zipped_divide(x.outer, tc.tiler)[0], tc.layout_tv) for x in (src, dst)]
    _verify(what, tc.partition_pair, src.outer, dst.outer, 0, src.bits)
    _verify(what, atom.verify_instance, _target(k),
            CopyUse(_use(src, tv[0][1]), _use(dst, tv[1][1])))
    vec = atom.bits // src.bits
    acc = P.tiled_copy_partition(tc, src.shape[:2], vec)  # type: ignore[arg-type]
    for t in (src, dst):
        _check_accesses(what, t, acc, atom.bits // 8)
    _check_read(what, src)
    _note_write(what, dst)
    return acc


def _check_threads(k: Kernel, what: str, n: int) -> None:
    if k.maxntid is not None and k.maxntid[0] != n:
        raise TensorError(f"{what}: the atom's partition spans {n} threads, the kernel "
                          f"'{k.name}' runs {k.maxntid[0]} (.maxntid)")


def _check_fragment(what: str, frag: Tensor) -> tuple[TiledMma, str, MmaForm]:
    if frag.space != "rmem" or frag.mma is None or frag.operand is None:
        raise TensorError(f"{what}: expects a fragment of a tiled MMA (rmem), got {frag}")
    _verify(what, check_fragment_layout, frag.operand, frag.mma.tv_layout(frag.operand),
            frag.layout)
    return frag.mma, frag.operand, frag.mma.atom  # type: ignore[return-value]


def _check_register_count(what: str, frag: Tensor, want: int) -> None:
    if len(frag.regs) != want:
        raise TensorError(f"{what}: fragment '{frag.name}' has {len(frag.regs)} registers, its "
                          f"values need {want}")


def _major(t: Tensor, operand: str) -> str:
    """The contiguous dimension of an operand tile (rows: M or N, cols: K)."""
    o = t.outer
    rows = t.shape[0]
    if o(rows) == 1:
        return "K"
    if o(1) == 1:
        return "M" if operand == "A" else "N"
    raise TensorError(f"{t}: neither dimension is contiguous (a 16-byte row needs one)")


def _copy_ldsm(k: Kernel, atom: MatrixCopy, src: Tensor, dst: Tensor, tile: Sequence[int],
               what: str) -> None:
    acc, per = ldsm_plan(k, atom, src, dst, tile, what)
    for j, addr in enumerate(_addresses(k, src, acc)):
        copy_emit.emit_matrix_copy(k, atom, list(dst.regs[j * per:(j + 1) * per]), addr)


def ldsm_plan(k: Kernel, atom: MatrixCopy, src: Tensor, dst: Tensor, tile: Sequence[int],
              what: str) -> tuple[P.Accesses, int]:
    """Every check of an ldmatrix ``src`` -> fragment ``dst`` (tile ``tile`` of ``src``), its
    partition and the registers one instruction moves (an ``.x4`` may load two consecutive
    ``.x2`` fragments: :func:`nvatom.kernels.partition.ldsm_group`); shared with the hoisted
    readers of ``nvatom.kernels.hoisted``."""
    if src.space != "smem":
        raise TensorError(f"{what}: ldmatrix reads shared memory, not {src}")
    mma, op, form = _check_fragment(what, dst)
    _check_types(what, src, dst)
    major = _major(src, op)
    per = form.registers(op)
    sub, group = (P.ldsm_group(atom, form, op) if atom.registers > per
                  and atom.registers % per == 0 else (atom, 1))
    if not ldsm_matches_mma(sub, form, op, major):
        raise TensorError(f"{what}: the atom's thread layout {atom.register_layout()} does not "
                          f"produce operand {op} of {form.name} {form.tv_layout(op)} from a "
                          f"{major}-major tile")
    if atom.registers != per * group:
        raise TensorError(f"{what}: the atom moves {atom.registers} registers, one {op} "
                          f"fragment of {form.name} is {per}")
    _check_threads(k, what, mma.threads)
    rows, cols = P.operand_tile(mma, op)
    tiles = (src.shape[0] // rows, src.shape[1] // cols)
    if len(tile) != 2 or not (0 <= tile[0] < tiles[0] and 0 <= tile[1] < tiles[1]):
        raise TensorError(f"{what}: tile {tuple(tile)} is outside the {tiles} {rows} x {cols} "
                          f"tiles of operand {op}")
    acc = P.ldsm_partition(atom, mma, op, major, src.shape[:2], tile)  # type: ignore[arg-type]
    # the IR's atom.copy: the swizzled smem side's lanes and row (check_swizzled_rows), then
    # the atom's ladder (target, residencies, element width)
    lanes = P.affine_layout([int(src.outer(acc.thread(t))) for t in range(P.WARP)])
    row = P.affine_layout([int(src.outer(acc.thread(0) + d)) for d in acc.deltas[0]])
    smem_use = _use(src, None)
    if lanes is not None and row is not None and isinstance(src.layout, ComposedLayout):
        outer = Layout((lanes.shape, row.shape), (lanes.stride, row.stride))
        smem_use = _use(src, ComposedLayout(src.layout.inner, src.layout.offset, outer))
    _verify(what, lambda: atom.verify_instance(
        _target(k), CopyUse(check_swizzled_rows(atom, smem_use, "src"), _use(dst, None))))
    _check_accesses(what, src, acc, 16)
    _check_read(what, src)
    _check_register_count(what, dst, atom.registers * len(acc.deltas))
    return acc, atom.registers


def _copy_fragment(k: Kernel, atom: UniversalCopy, src: Tensor, dst: Tensor, what: str) -> None:
    frag, mem = (src, dst) if src.space == "rmem" else (dst, src)
    acc, groups = fragment_copy_plan(k, atom, src, dst, what)
    for regs, addr in zip(groups, _addresses(k, mem, acc), strict=True):
        space = mem.space
        if frag is src:
            copy_emit.emit_st(k, atom, space, addr, regs)
        else:
            copy_emit.emit_ld(k, atom, space, regs, addr)


def fragment_copy_plan(k: Kernel, atom: UniversalCopy, src: Tensor, dst: Tensor,
                       what: str) -> tuple[P.Accesses, list[list[Any]]]:
    """Every check of a fragment <-> memory copy, its partition and the registers each access
    moves; shared with the predicated copies of ``nvatom.kernels.ragged``."""
    frag, mem = (src, dst) if src.space == "rmem" else (dst, src)
    if mem.space not in ("gmem", "smem"):
        raise TensorError(f"{what}: moves a fragment to or from gmem/smem, not {mem}")
    mma, op, _ = _check_fragment(what, frag)
    _check_types(what, src, dst)
    shape = P.operand_tile(mma, op)
    if mem.shape[:2] != shape:
        raise TensorError(f"{what}: {mem} has shape {mem.shape}, not the operand {op} tile "
                          f"{shape} (take .tile() of it)")
    if atom.bits % frag.bits:
        raise TensorError(f"{what}: {atom.bits}-bit accesses do not hold whole "
                          f"{frag.dtype.name} elements")
    vec = atom.bits // frag.bits
    nval = size(frag.layout[1])
    if nval % vec:
        raise TensorError(f"{what}: {vec}-element accesses do not divide the {nval} values "
                          "each thread holds")
    rtype, per_reg = _register_type(frag.dtype)
    va = atom.vector_access
    if va.elem != max(32, frag.bits) or va.vec * per_reg != vec:
        raise TensorError(f"{what}: the atom moves {va.vec} .b{va.elem} register(s), the "
                          f"fragment's {vec} values are in {vec // per_reg or 1} .{rtype}")
    _check_threads(k, what, mma.threads)
    mem_tv = composition(mem.outer, frag.layout)
    regs_use = _use(frag, Layout(nval, 1))
    mem_use = _use(mem, mem_tv[1])
    use = CopyUse(regs_use, mem_use) if frag is src else CopyUse(mem_use, regs_use)
    _verify(what, atom.verify_instance, _target(k), use)
    acc = P.fragment_partition(mma, op, frag.layout, vec)  # type: ignore[arg-type]
    _check_accesses(what, mem, acc, atom.bits // 8)
    if mem is src:
        _check_read(what, mem)
    else:
        _note_write(what, mem)
    _check_register_count(what, frag, -(-nval // per_reg))
    return acc, P.retile(frag.regs, len(acc.deltas))


# --------------------------------------------------------------------------- mma


def mma(k: Kernel, tiled: TiledMma | MmaForm, d: Tensor, a: Tensor, b: Tensor,
        c: Tensor) -> None:
    """``D = A @ B^T + C`` over the tiled MMA's tile (``d`` may be ``c``), after the register
    MMA verifier, the tiled builders' operand checks and the tiled (thread, value) layouts."""
    tiled = as_tiled(tiled)
    form = tiled.atom
    what = (f"mma {form.name} on {a.kind} '{a.name}', {b.kind} '{b.name}', {c.kind} "
            f"'{c.name}' -> {d.kind} '{d.name}'")
    shapes = {x.mma.atom.shape for x in (a, b, c, d) if x.mma is not None}  # type: ignore[attr-defined]
    use = MmaUse(_use(a, None), _use(b, None), _use(c, None), _use(d, None),
                 shape=next(iter(shapes - {form.shape}), None))  # type: ignore[attr-defined]
    _verify(what, verify_register_mma, form, _target(k), use)
    for x, op in ((d, "D"), (a, "A"), (b, "B"), (c, "C")):  # the IR's tiled_mma.gemm order
        _verify(what, check_fragment_layout, op, tiled.tv_layout(op), x.layout)
    _verify(what, check_gemm_operands, a.layout, b.layout, c.layout, d.layout)
    frags = []
    for x, op in ((d, "C"), (a, "A"), (b, "B"), (c, "C")):
        reps = repetitions(tiled, op)
        want_n = form.registers(op) * reps[0] * reps[1]  # type: ignore[attr-defined]
        if len(x.regs) != want_n:
            raise TensorError(f"{what}: fragment '{x.name}' has {len(x.regs)} registers, "
                              f"operand {op} needs {want_n}")
        frags.append(Fragment(op, x.regs, form.registers(op), reps))  # type: ignore[attr-defined]
    _check_threads(k, what, tiled.threads)
    emit_tiled_mma(k, tiled, *frags)


# --------------------------------------------------------------------------- epilogue


def _same_values(what: str, *ts: Tensor) -> None:
    for t in ts:
        if t.space != "rmem":
            raise TensorError(f"{what}: expects fragments, got {t}")
        if not layouts_equivalent(t.outer, ts[0].outer):
            raise TensorError(f"{what}: '{t.name}' has layout {t.layout}, '{ts[0].name}' "
                              f"{ts[0].layout}: values do not correspond")


def elementwise(k: Kernel, opcode: str, dst: Tensor, *srcs: Tensor | float) -> None:
    """``opcode dst[i], srcs...[i]`` for every register (``add.f32``, ``max.f32``, ...);
    a float source is an immediate.  The fragments must hold the same values, 32-bit each."""
    frags = [s for s in srcs if isinstance(s, Tensor)]
    what = f"{opcode} into fragment '{dst.name}'"
    _same_values(what, dst, *frags)
    for t in (dst, *frags):
        if t.dtype.storage_bits != 32:
            raise TensorError(f"{what}: '{t.name}' holds {t.dtype.name}; elementwise works on "
                              "one 32-bit value per register")
    for i, r in enumerate(dst.regs):
        ops = [s.regs[i] if isinstance(s, Tensor) else _immediate(s) for s in srcs]
        k.ins(opcode, r, *ops)


def _immediate(x: float) -> str:
    return "0f" + struct.pack(">f", x).hex().upper()


def convert(k: Kernel, src: Tensor, dst: Tensor) -> None:
    """Round an f32 fragment into a bf16/f16 one of the same values (``cvt.rn.*x2.f32``: each
    register packs value ``2i`` low and ``2i + 1`` high, the fragments' value order)."""
    what = f"convert fragment '{src.name}' into fragment '{dst.name}'"
    _same_values(what, src, dst)
    if src.dtype.name != "f32" or dst.dtype.name not in ("bf16", "f16"):
        raise TensorError(f"{what}: converts f32 to bf16/f16, not {src.dtype.name} -> "
                          f"{dst.dtype.name}")
    for i, r in enumerate(dst.regs):
        lo, hi = src.regs[2 * i], src.regs[2 * i + 1]
        SE.cvt_pack_f32(k, dst.dtype.name, hi, lo, into=r)  # cvt packs its first source high
