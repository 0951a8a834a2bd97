"""Copy operations beyond one atom application (issue 16).

* ``%tc = cute_nvgpu.make_tiled_copy %atom {thr_layout = "(32,4):(4,1)", val_layout =
  "(1,4):(4,1)"}``: a copy atom repeated over a layout of threads, each thread moving a block
  of values (CuTe's ``make_tiled_copy``, built by :func:`nvatom.atoms.tiled_copy.make_tiled_copy`:
  the tile is ``raked_product(thr_layout, val_layout)``), beside ``make_tiled_mma``.
* ``cute_nvgpu.tiled_copy.copy %tc, %src, %dst``: every thread of the tiled copy moves its
  values of one tile.  A memory operand (gmem/smem, swizzled smem included) is a tile of the
  tiled copy's shape (tile coordinate -> element offset); a register operand holds each
  thread's values, ``(threads, values)``.  Verified by the tiled copy's partition
  (``TiledCopy.partition_pair``: each thread's values vectorise to the atom's width, the
  specification's "cannot vectorize copy" diagnostics) and by the atom's ``verify_instance``
  on thread 0's values; lowered as the atom applied to the (thread, value) -> offset layout
  ``tile o layout_tv`` (``lower_ext._tiled_copy_copy``).  Universal copies and cp.async atoms tile.
* ``cute.make_tiled_copy`` / ``cute.make_tiled_mma``: the specification's spelling of the two
  builders (000, "If You Know CUTLASS": "cute.make_tiled_copy / cute.make_tiled_mma builders
  consuming atom values"), aliases of ``cute_nvgpu.make_tiled_copy`` /
  ``cute_nvgpu.make_tiled_mma`` (subclasses: the same operands, attributes, verifier and
  lowering; docs/spec-deviations.md, "cute_nvgpu textual IR").
* ``generic = true`` on ``cute_nvgpu.atom.copy`` of an ldmatrix/stmatrix atom: the shared
  tile is addressed through a generic address (``cvta.shared``), and the instruction has no
  ``.shared`` state space (``ldmatrix.sync.aligned.m8n8.x4.b16``; PTX ISA "ldmatrix": "If no
  state space is specified, generic addressing is used"; ptxas accepts it from sm_75);
  the attribute is ``dialect.CopyOp``'s.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from nvatom.arch import MAX_CTA_THREADS
from nvatom.atoms.copy import CopyUse, SimtAsyncCopy, UniversalCopy, element_bits
from nvatom.atoms.tiled_copy import make_tiled_copy
from nvatom.atoms.verify import OperandUse
from nvatom.ir import dialect as DL
from nvatom.ir import types as TY
from nvatom.ir.syntax import IRSyntaxError, parse_layout_body
from nvatom.layout import ComposedLayout, Layout, composition, size, zipped_divide

__all__ = ["CUTE_OPS", "OPS", "CuteMakeTiledCopyOp", "CuteMakeTiledMmaOp", "MakeTiledCopyOp",
           "TiledCopyCopyOp", "thread_layout"]


def _layout_attr(op: DL.NvOp, key: str) -> Layout:
    text = op.attr(key)
    if text is None:
        DL._fail(f"'{op.name}' needs the attribute '{key}'")
    try:
        lay = parse_layout_body(text)
    except IRSyntaxError as e:
        DL._fail(f"{key} = \"{text}\" is not a layout: {e}")
        raise AssertionError from None  # unreachable
    if not isinstance(lay, Layout):
        DL._fail(f"{key} must be a static layout like \"(32,4):(4,1)\", got \"{text}\"")
    assert isinstance(lay, Layout)
    if size(lay) > 1 << 16:
        DL._fail(f"{key} {lay} has {size(lay)} coordinates; a tiled copy takes at most "
                 f"{1 << 16}")
    offsets = sorted(lay(i) for i in range(size(lay)))
    if offsets != list(range(size(lay))):  # each thread / value once, densely
        DL._fail(f"{key} {lay} must map its {size(lay)} coordinates one-to-one onto "
                 f"0..{size(lay) - 1}")
    return lay


class MakeTiledCopyOp(DL.NvOp):
    """``%tc = cute_nvgpu.make_tiled_copy %atom {thr_layout = "...", val_layout = "..."}``."""

    name = "cute_nvgpu.make_tiled_copy"
    OPERANDS = 1
    RESULT = "infer"
    ATTRS: ClassVar[dict[str, Any]] = {"thr_layout": "str", "val_layout": "str"}
    REQUIRED = ("thr_layout", "val_layout")

    @classmethod
    def infer(cls, operands: Sequence[Any], attrs: dict[str, Any]) -> Any:
        return TY.make(TY.TiledCopyT)

    def verify_ir(self, v: DL.VerifyCtx) -> None:
        atom = DL._atom_operand(self, "copy")
        if not isinstance(atom, (UniversalCopy, SimtAsyncCopy)):
            DL._fail(f"make_tiled_copy tiles universal copies and cp.async atoms (one thread, "
                     f"one vector), not '{atom.name}'")
        tc = make_tiled_copy(atom, _layout_attr(self, "thr_layout"),
                             _layout_attr(self, "val_layout"))
        n = tc.threads
        if n & (n - 1) or n > MAX_CTA_THREADS:
            DL._fail(f"a tiled copy of {n} threads: the lowering takes a power of two up to "
                     f"{MAX_CTA_THREADS} (the thread index is %tid.x modulo it)")
        v.facts[self] = tc


def thread_layout(tc: Any, m: TY.MemRef) -> tuple[Layout, Any, int]:
    """The (thread, value) -> element offset layout of a tile of the tiled copy (``tile o
    layout_tv``), the swizzle (or None) and its offset."""
    lay = m.layout
    sw, off = None, 0
    if isinstance(lay, ComposedLayout):
        sw, off, lay = lay.inner, lay.offset, lay.outer
    tv = composition(zipped_divide(lay, tc.tiler)[0], tc.layout_tv)
    return tv, sw, off


class TiledCopyCopyOp(DL.NvOp):
    """``cute_nvgpu.tiled_copy.copy %tc, %src, %dst``: each thread of the tiled copy moves
    its values of one tile (or between the tile and its register values)."""

    name = "cute_nvgpu.tiled_copy.copy"
    OPERANDS = 3

    def verify_ir(self, v: DL.VerifyCtx) -> None:
        t, src, dst = self.operands
        if not isinstance(t.type, TY.TiledCopyT):
            DL._fail(f"expects a !cute_nvgpu.tiled_copy as operand #0, but got "
                     f"{TY.type_text(t.type)}")
        tc = v.facts.get(DL._defining(t))
        if tc is None:
            DL._fail("the tiled copy did not verify")
        uses, tvs = [], []
        for x, what in ((src, "src"), (dst, "dst")):
            m = TY.memref_of(x.type)
            if m is None or not isinstance(m.layout, (Layout, ComposedLayout)):
                DL._fail(f"expects a !cute.memref with a static layout as {what}, but got "
                         f"{TY.type_text(x.type)}")
            assert m is not None
            if m.space == "rmem":
                lay = m.layout
                if not (isinstance(lay, Layout) and lay.rank == 2
                        and size(lay[0]) == tc.threads and size(lay[1]) == tc.values):
                    DL._fail(f"a register {what} of the tiled copy holds each thread's values, "
                             f"({tc.threads},{tc.values}), but got {lay}")
                tv = lay
            else:
                if isinstance(m.layout, ComposedLayout) and m.space != "smem":
                    DL._fail(f"a swizzled {what} tile lowers in shared memory only")
                outer = m.layout.outer if isinstance(m.layout, ComposedLayout) else m.layout
                shp = tuple(size(outer[i]) for i in range(outer.rank))
                if shp != tuple(tc.tiler):
                    DL._fail(f"the {what} tile {m.layout} has shape {shp}, not the tiled "
                             f"copy's tile {tuple(tc.tiler)}")
                tv, _, _ = thread_layout(tc, m)
            tvs.append(tv)
            uses.append(OperandUse(m.element.name, m.space, tv[1]))
        if element_bits(uses[0].element_type) != element_bits(uses[1].element_type):
            DL._fail(f"the tiled copy moves {uses[0].element_type} into "
                     f"{uses[1].element_type}")
        # the atom's ladder (residencies, element width, vectorisation of thread 0's values)
        tc.atom.verify_instance(v.target, CopyUse(*uses))
        v.facts[self] = (tc, tvs)


OPS = [MakeTiledCopyOp, TiledCopyCopyOp]



#: what IRDL registration adds to an operation class (xdsl's irdl_op_definition sets these on
#: the class itself, so a registered operation cannot be subclassed into another one)
_IRDL_ADDED = frozenset({"args", "res", "traits", "get_irdl_definition", "verify_",
                         "__abstractmethods__", "_abc_impl", "__dict__", "__weakref__"})


def _alias(cls: type, name: str, doc: str) -> type:
    """A fresh operation class named ``name`` with ``cls``'s own definition (operands,
    attributes, inference, verifier), registered separately."""
    ns = {k: v for k, v in cls.__dict__.items() if k not in _IRDL_ADDED}
    ns.update(name=name, __doc__=doc, __module__=__name__)
    return type("Cute" + cls.__name__, cls.__bases__, ns)


CuteMakeTiledCopyOp = _alias(
    MakeTiledCopyOp, "cute.make_tiled_copy",
    """``%tc = cute.make_tiled_copy %atom {thr_layout = "...", val_layout = "..."}``: the
    specification's spelling of ``cute_nvgpu.make_tiled_copy``, verified and lowered alike.""")
CuteMakeTiledMmaOp = _alias(
    DL.MakeTiledMmaOp, "cute.make_tiled_mma",
    """``%t = cute.make_tiled_mma %atom {atom_layout = "...", tile = "..."}``: the
    specification's spelling of ``cute_nvgpu.make_tiled_mma``, verified and lowered alike.""")

#: the builders under the specification's ``cute.`` names (registered in the cute dialect)
CUTE_OPS = [CuteMakeTiledCopyOp, CuteMakeTiledMmaOp]
