"""What the IR checks about SM100 tcgen05 uses beyond the atom layer's verifiers: TMEM buffers,
the operands of every UMMA form, ``tcgen05.cp`` sources, and a kernel's CTA group.

A TMEM operand of the IR is a *buffer*: ``!cute.memref<e, tmem, (lanes, columns):(columns, 1)>``
(what ``cute.alloc_tmem`` makes) of at most 128 lanes and ``columns`` 32-bit cells, whatever
the element type (TMEM is addressed in 32-bit cells, PTX ISA "Tensor Memory"; how an operand
packs its elements into the cells is its atom's data-path layout).  An UMMA operand in a
buffer (D, A of ``ts``, the scale factors, the sparse metadata) must *fit*: every cell the
atom's layout of it (``UmmaAtom.tmem_layout``, its copies over the lane partitions,
``tmem_copies`` / ``SF_DATAPATHS``) touches for each K-block the operation issues lies inside
the buffer.  The atom's verifier then sees the operand's tile shape (D: M x N; A: M x K) --
the buffer holds one CTA's part, so the GEMM checks run on the logical tile (this is what
lets a ``cta_group::2`` atom verify with its operands laid out; docs/ir.md, "Known gaps").

A ``cta_group::2`` atom's descriptor views are each CTA's half (M / 2 rows of A, N / 2 of B):
they are checked against the canonical layouts per CTA (the atom's ``smem_layout``) and
given to the GEMM checks as the pair's M x K and N x K.

Source: PTX ISA "Tensor Memory", "tcgen05.mma" (Data Path Layout Organization, the scale
factor and metadata placement), "tcgen05.cp", "tcgen05.shift"; nvatom.atoms.sm100,
nvatom.atoms.tmem for every layout.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import Any

from nvatom import diagnostics as D
from nvatom.atoms import sm100
from nvatom.atoms.tmem import LANE_STRIDE, LANES
from nvatom.descriptors.umma import make_umma_desc
from nvatom.errors import NvatomError
from nvatom.layout import ComposedLayout, Layout, cosize, size
from nvatom.ptx.layout_eval import flat_modes

__all__ = [
    "Tcgen05VerifyError",
    "TmemBuffer",
    "extents",
    "kernel_cta_group",
    "operand_extent",
    "s2t_extent",
    "tmem_buffer",
    "umma_k_blocks",
]


class Tcgen05VerifyError(NvatomError):
    """An IR use of a tcgen05 atom the lowering could not honour (the message says why)."""


class TmemBuffer:
    """A TMEM buffer: ``lanes`` x ``columns`` 32-bit cells from its address (lane 0)."""

    def __init__(self, lanes: int, columns: int) -> None:
        self.lanes, self.columns = lanes, columns

    def __repr__(self) -> str:
        return f"{self.lanes} lanes x {self.columns} columns"


def tmem_buffer(layout: Any) -> TmemBuffer | None:
    """The buffer a TMEM memref's layout describes, or None when it is not one
    (``(lanes, columns):(columns, 1)``, 1 <= lanes <= 128)."""
    if not isinstance(layout, Layout) or layout.rank != 2:
        return None
    lanes, cols = layout.shape
    if not isinstance(lanes, int) or not isinstance(cols, int):
        return None
    if layout.stride != (cols, 1) and not (cols == 1 and layout.stride[0] == 1):
        return None
    if not 1 <= lanes <= LANES:
        return None
    return TmemBuffer(lanes, cols)


def buffer_columns(layout: Any) -> int:
    """32-bit TMEM columns of a buffer layout (its second mode)."""
    return int(size(layout[1]))


def _cells(layout: Layout, rows: int, cols: int) -> tuple[int, int]:
    """(max lane + 1, max column + 1) a TMEM layout (``lane << 16 | column`` offsets, strides
    >= 0, columns < 2^16) touches over a rows x cols tile: each flat mode of a tile-sized
    layout adds (extent - 1) x its lane and column strides."""

    if (size(layout[0]), size(layout[1])) != (rows, cols):
        offs = [int(layout((r, c))) for r in range(rows) for c in range(cols)]
        return (max(o // LANE_STRIDE for o in offs) + 1,
                max(o % LANE_STRIDE for o in offs) + 1)
    lanes = columns = 0
    for s, d in flat_modes(layout):
        lanes += (s - 1) * (d // LANE_STRIDE)
        columns += (s - 1) * (d % LANE_STRIDE)
    return lanes + 1, columns + 1


def _copies_lanes(atom: Any, operand: str) -> int:
    """Lanes an operand's copies add (A of Layouts B/E/G; scale factors in every partition)."""

    if operand == "A":
        return max(sm100.tmem_copies(atom.m, atom.n, atom.cta_group, atom.sparse,
                                     atom.ws)) >> 16
    if operand in ("SFA", "SFB"):
        dp = sm100.sf_datapath(operand, atom.m, atom.cta_group, atom.sparse)
        return max(sm100.SF_DATAPATHS[dp][0])
    return 0


@functools.lru_cache(maxsize=4096)
def operand_extent(atom: Any, operand: str, k_blocks: int = 1) -> tuple[int, int, int]:
    """(lanes, columns, columns per K-block) of one CTA's TMEM an UMMA operand of ``k_blocks``
    K-blocks occupies: ``D`` (one K-block's D is all of it), ``A`` (``ts``), ``SFA``/``SFB``
    and ``E`` (sparse metadata: a row's ``K / 8`` bytes -- the atom's ``metadata_layout`` --
    in the row's lane, so ``ceil(K / 32)`` columns over the 128 lanes)."""
    if operand == "E":
        _rows, nbytes = atom.metadata_layout()
        per = max(1, math.ceil(nbytes / 4))
        return LANES, per * k_blocks, per
    rows, cols = atom.tmem_tile(operand)
    lanes, per = _cells(atom.tmem_layout(operand), rows, cols)
    lanes += _copies_lanes(atom, operand)
    if operand in ("C", "D"):
        return lanes, per, 0
    return lanes, per * k_blocks, per


def _outer(layout: Any) -> Any:
    return layout.outer if isinstance(layout, ComposedLayout) else layout


def extents(layout: Any) -> tuple[int, int] | None:
    """(MN, K) of a view's (mn, k) layout."""
    lay = _outer(layout)
    if not isinstance(lay, Layout) or lay.rank != 2:
        return None
    return int(size(lay[0])), int(size(lay[1]))


def umma_k_blocks(atom: Any, b_layout: Any) -> int:
    """K-blocks of one ``cute_nvgpu.atom.mma``: B's descriptor view holds ``n * K`` of K."""
    ext = extents(b_layout)
    return max(1, ext[1] // atom.stored_k("B")) if ext else 1


def check_fit(atom: Any, operand: str, buf: TmemBuffer, k_blocks: int) -> None:
    lanes, cols, _ = operand_extent(atom, operand, k_blocks)
    if buf.lanes < lanes or buf.columns < cols:
        blocks = f" ({k_blocks} K-blocks)" if k_blocks > 1 and operand not in ("C", "D") else ""
        raise Tcgen05VerifyError(
            f"atom '{atom.name}' puts operand {operand}{blocks} in {lanes} TMEM lanes x {cols} "
            f"32-bit columns, but its buffer has {buf!r} (a TMEM buffer counts 32-bit "
            "columns whatever its element type)")


def s2t_extent(atom: Any) -> tuple[int, int]:
    """(lanes, columns) ``tcgen05.cp`` writes from its TMEM address: ``rows`` lanes (all four
    32-lane partitions for the .warpx2/.warpx4 multicasts), ``bits / 32`` columns."""
    lanes = LANES if ".warpx" in atom.shape else atom.rows
    return lanes, atom.columns


def s2t_source(atom: Any, element_bits: int, layout: Any) -> Any:
    """The shared-memory descriptor of a ``tcgen05.cp`` source tile (K-major canonical,
    ``nvatom.descriptors.umma.make_umma_desc``); the tile is ``max(rows, 8)`` x (the row's
    bits / ``element_bits``) elements (8-bit containers for sub-byte types: a decompressing
    copy's 4/6-bit values fill 16-byte units, 16 values each, padded)."""

    rows, bits = atom.rows, atom.columns * 32
    want = (max(rows, 8), bits // element_bits)
    outer = layout.outer if isinstance(layout, ComposedLayout) else layout
    shape = (int(size(outer[0])), int(size(outer[1]))) if isinstance(outer, Layout) and \
        outer.rank == 2 else None
    if shape != want:
        raise Tcgen05VerifyError(
            f"'{atom.name}' copies {rows} rows of {bits} bits: its shared-memory source is a "
            f"{want[0]} x {want[1]} tile of {element_bits}-bit elements (at least 8 rows: the "
            f"descriptor's core matrices), got {layout}")
    desc_layout = layout
    if isinstance(layout, ComposedLayout) and not layout.offset and \
            getattr(layout.inner, "bits", None) == 0:
        # the identity swizzle Sw<0,...>: how a TMA tile without swizzle is written (the TMA
        # partition verifier's step 5 wants a swizzle layout); the descriptor sees the layout
        desc_layout = layout = layout.outer
    if bits == 128 and isinstance(layout, Layout):
        # a 16-byte row is half of the descriptor's 32-byte K-block: describe the tile with a
        # second 16-byte column after it (its LBO; the copy does not read it)

        desc_layout = Layout((layout[0].shape, (layout[1].shape, 2)),
                             (layout[0].stride, (layout[1].stride, cosize(layout))))
    try:
        return make_umma_desc(desc_layout, element_bits, "K")
    except NvatomError as e:
        raise Tcgen05VerifyError(f"'{atom.name}' reads its source through a shared-memory "
                                 f"descriptor, and {layout} has none: {e}") from None


def kernel_cta_group(groups: set[int], name: str) -> int:
    """The one CTA group of a kernel's tcgen05 work (1 when it has none of group 2)."""
    if len(groups) > 1:
        raise Tcgen05VerifyError(
            f"kernel '{name}' uses tcgen05 with cta_group::1 and cta_group::2; every tcgen05 "
            "instruction of a kernel takes one CTA group (ptxas)")
    return next(iter(groups), 1)


def umma_uses(atom: Any, uses: dict[str, Any], k_blocks: int) -> dict[str, Any]:
    """The operand uses the atom's verifier sees: TMEM buffers checked to fit (then given as
    their operand's tile shape), a ``cta_group::2`` atom's per-CTA descriptor views checked
    against the canonical layouts (then given as the pair's tiles); others unchanged."""

    out = dict(uses)
    for name, use in uses.items():
        if use is None:
            continue
        if use.residency == "tmem":
            buf = tmem_buffer(use.layout)
            if buf is None:
                continue
            if name != "C":  # C must be D (checked after the atom's ladder)
                check_fit(atom, name, buf, k_blocks)
            if name in ("C", "D"):
                shape: Any = (atom.m, atom.n)
            elif name == "A":
                shape = (atom.m, atom.stored_k("A") * k_blocks)
            elif name == "E":
                shape = None
            else:
                rows, cols = atom.operand_shape(name)
                shape = (rows, cols * k_blocks)
            out[name] = dataclasses.replace(use, layout=shape)
        elif use.residency == "smem_desc_view" and atom.cta_group == 2 and \
                use.layout is not None:
            want = sm100._layout_mismatch(atom, name, use.layout)
            if want is not None:
                raise Tcgen05VerifyError(f"{D.MMA_ATOM_LAYOUT}{want} for operand {name}, but "
                                         f"got {use.layout}")
            ext = extents(use.layout)
            k = ext[1] if ext else atom.stored_k(name)
            out[name] = dataclasses.replace(use, layout=(atom.smem_rows(name) * atom.cta_group,
                                                         k))
    return out


def func_cta_groups(fn: Any) -> set[int]:
    """The CTA groups of a kernel's tcgen05 atoms (UMMA and ``s2t_copy`` made in it)."""
    from nvatom.ir import types as TY

    groups: set[int] = set()
    for op in fn.walk():
        if op.name == "cute_nvgpu.make_atom":
            atom = TY.atom_of(op.results[0].type)
            if atom is not None and atom.mnemonic.startswith(("sm100.", "atom.s2t_copy")):
                groups.add(atom.cta_group)
    return groups


def verify_tmem_copy(atom: Any, src_t: Any, dst_t: Any) -> Any:
    """The IR's checks of a TMEM copy beyond the atom's residency/width check: the TMEM side
    is a buffer the copy fits in, a register side holds the atom's registers, a
    ``tcgen05.cp`` source has a descriptor (returned, for the lowering)."""
    from nvatom.ir import types as TY

    src, dst = TY.memref_of(src_t), TY.memref_of(dst_t)
    if src is None or dst is None:
        return None  # the atom's residency check has reported it
    if atom.mnemonic == "atom.s2t_copy":
        tm, lanes_cols = dst, s2t_extent(atom)
    else:
        tm = src if atom.direction == "load" else dst
        lanes_cols = (1, atom.columns)
        frag = dst if atom.direction == "load" else src
        if isinstance(frag.layout, Layout):
            lay = frag.layout
            values = size(lay[1]) if lay.rank >= 2 else size(lay)
            regs = -(-values * frag.element.pack_bits // 32)
            if regs != atom.registers:
                raise Tcgen05VerifyError(
                    f"'{atom.name}' moves {atom.registers} 32-bit registers per thread, but "
                    f"the fragment {frag.layout} of {frag.element.name} holds {regs}")
    buf = tmem_buffer(tm.layout)
    if buf is None:
        raise Tcgen05VerifyError(f"'{atom.name}' takes a TMEM buffer (lanes, columns):(columns, "
                                 f"1) of at most 128 lanes, got {tm.layout}")
    lanes, cols = lanes_cols
    if buf.lanes < lanes or buf.columns < cols:
        raise Tcgen05VerifyError(f"'{atom.name}' writes {lanes} TMEM lanes x {cols} 32-bit "
                                 f"columns, but its buffer has {buf!r}"
                                 if atom.mnemonic == "atom.s2t_copy" else
                                 f"'{atom.name}' reaches {cols} 32-bit TMEM columns, but its "
                                 f"buffer has {buf!r}")
    if atom.mnemonic == "atom.s2t_copy":
        bits = max(8, src.element.pack_bits)
        return s2t_source(atom, bits, src.layout)
    return None


def check_one_cta_group(op: Any) -> None:
    """A tcgen05 operation's kernel must issue every tcgen05 instruction with one CTA group."""
    from nvatom.ir import xdsl_adapter as X

    fn = X.enclosing_func(op)
    if fn is not None:
        kernel_cta_group(func_cta_groups(fn), fn.sym_name.data)


def cluster_size(op: Any) -> int:
    """CTAs in the cluster the operation's kernel declares (1 without one)."""
    from nvatom.ir import xdsl_adapter as X

    _, dims = X.kernel_cluster(op)
    return math.prod(dims) if dims and all(d >= 1 for d in dims) else 1
