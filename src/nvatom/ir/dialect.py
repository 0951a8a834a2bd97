"""The operations of the ``cute``, ``nv_tileas`` and ``cute_nvgpu`` dialects, and their verifiers.

Each operation has a readable custom syntax: operands by name, an attribute dictionary, and a
result type only where it cannot be inferred::

    %atom = cute_nvgpu.make_atom : !cute_nvgpu.sm80.mma<m16n8k16.f32.bf16.bf16.f32>
    cute_nvgpu.atom.mma %atom, %d, %a, %b, %c
    %exec = cute_nvgpu.atom.make_exec_tma %atom, %mbar
        {cache_mode = #cute_nvgpu.load_cache_mode<cg>}

Verification calls the atom layer: an MMA application builds the use the atom's
``verify_instance`` checks (the specification's common atom contract and verifier ladders),
the non-exec TMA atoms run its eleven-step partition verifier, and a WGMMA descriptor view is
checked against its layout when the type is parsed.  Diagnostics carry the atom layer's text
unchanged; checks that are the IR's own (operand kinds, counts) are our wording.

Source: the specification's IR forms and contracts, quoted in docs/spec-deviations.md
(#mma-verifier-ladders, #tma-partition-verifier, #tma-worked-example, #atom-registry).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

from nvatom import diagnostics as D
from nvatom.arch import MAX_THREAD_REGISTERS, Target, Tier, feature
from nvatom.atoms import tma as T
from nvatom.atoms.copy import (
    CopyUse,
    MatrixCopy,
    check_swizzled_rows,
    element_bits,
    swizzle_too_fine,
)
from nvatom.atoms.interfaces import BlockScaleAtom, TmemAtom
from nvatom.atoms.mbarrier import MAX_ARRIVAL_COUNT
from nvatom.atoms.registry import atom_record
from nvatom.atoms.sm90 import WgmmaForm
from nvatom.atoms.sm100 import UmmaUse
from nvatom.atoms.sm120 import MmaBsUse
from nvatom.atoms.tiled_mma import check_fragment_layout, check_gemm_operands, make_tiled_mma
from nvatom.atoms.tmem import COLUMNS as TMEM_COLUMNS
from nvatom.atoms.tmem import alloc_columns
from nvatom.atoms.verify import MmaUse, OperandUse
from nvatom.atoms.wgmma_fragments import wgmma_tv_layout
from nvatom.ir import tcgen05 as T5
from nvatom.ir import types as TY
from nvatom.ir import xdsl_adapter as X
from nvatom.ir.fragments import (
    IRVerifyError,
    fragment_access,
    operand_dtype,
    operand_tv,
    tiled_fragment_access,
)
from nvatom.ir.syntax import IRSyntaxError
from nvatom.ir.tcgen05 import check_one_cta_group, cluster_size, tmem_buffer, verify_tmem_copy
from nvatom.layout import ComposedLayout, Layout, cosize, layouts_equivalent, size
from nvatom.ptx import tma_emit as TE

__all__ = ["ALL_OPS", "DIALECTS", "IRVerifyError", "NvOp", "VerifyCtx", "is_nv_op"]


class VerifyCtx:
    """What verification of one module knows: the target, and per-op facts for lowering."""

    def __init__(self, target: Target) -> None:
        self.target = target
        #: facts computed while verifying, read by the lowering (op -> value)
        self.facts: dict[Any, Any] = {}


def _fail(msg: str) -> None:
    raise IRVerifyError(msg)


class _TypeRepr:
    """An operand type the partition verifier prints but cannot use (its repr is IR text)."""

    def __init__(self, t: Any) -> None:
        self.t = t

    def __repr__(self) -> str:
        return TY.type_text(self.t)


_ATTR_KINDS = {"int", "bool", "str"}


def _attr_ok(kind: Any, a: Any) -> bool:
    if kind == "int":
        return isinstance(a, X.IntegerAttr) and not isinstance(X.attr_value(a), bool)
    if kind == "bool":
        return isinstance(X.attr_value(a), bool)
    if kind == "str":
        return isinstance(a, X.StringAttr)
    return isinstance(a, kind)


def _kind_name(kind: Any) -> str:
    if isinstance(kind, tuple):
        return " or ".join(_kind_name(k) for k in kind)
    if kind in _ATTR_KINDS:
        return {"int": "an integer", "bool": "true or false", "str": "a string"}[kind]
    return f"#{kind.name}<...>"


class NvOp(X.CustomOp):
    """Base of our operations: syntax ``[operands] [{attrs}] [: type]`` driven by class data."""

    name = "nvatom.op"
    #: operand count, or (min, max)
    OPERANDS: ClassVar[int | tuple[int, int]] = 0
    #: "none", "explicit" (``: type``) or "infer"
    RESULT: ClassVar[str] = "none"
    #: attribute name -> kind ("int", "bool", "str" or an attribute class); REQUIRED subset
    ATTRS: ClassVar[dict[str, Any]] = {}
    REQUIRED: ClassVar[tuple[str, ...]] = ()
    #: accept (and check, but not print) a trailing ``: type`` of the first operand
    TRAILING_OPERAND_TYPE: ClassVar[bool] = False

    @classmethod
    def parse_custom(cls, parser: Any) -> tuple[list[Any], Any, dict[str, Any]]:
        start = parser.pos
        operands = cls.parse_operands(parser)
        lo, hi = (cls.OPERANDS, cls.OPERANDS) if isinstance(cls.OPERANDS, int) else cls.OPERANDS
        if not lo <= len(operands) <= hi:
            want = str(lo) if lo == hi else f"{lo} to {hi}"
            X.raise_at(parser, f"'{cls.name}' expects {want} operands, got {len(operands)}",
                       start)
        attr_pos = parser.pos
        attrs = X.parse_attr_dict(parser)
        for k, v in attrs.items():
            if k not in cls.ATTRS:
                known = ", ".join(cls.ATTRS) or "none"
                X.raise_at(parser, f"'{cls.name}' has no attribute '{k}' (known: {known})",
                           attr_pos)
            if not _attr_ok(cls.ATTRS[k], v):
                X.raise_at(parser, f"'{cls.name}' attribute '{k}' must be "
                           f"{_kind_name(cls.ATTRS[k])}", attr_pos)
        for k in cls.REQUIRED:
            if k not in attrs:
                X.raise_at(parser, f"'{cls.name}' needs the attribute '{k}'", attr_pos)
        rtype = None
        if cls.RESULT == "explicit":
            rtype = X.parse_colon_type(parser)
            try:
                cls.check_result_type(rtype)
            except IRSyntaxError as e:
                X.raise_at(parser, str(e), attr_pos)
        elif cls.RESULT == "infer" or cls.TRAILING_OPERAND_TYPE:
            tpos = parser.pos
            trailing = X.parse_optional_colon_type(parser) if cls.TRAILING_OPERAND_TYPE else None
            if trailing is not None and operands and trailing != operands[0].type:
                X.raise_at(parser, f"type {TY.type_text(trailing)} does not match operand #0 "
                           f"of type {TY.type_text(operands[0].type)}", tpos)
            if cls.RESULT == "infer":
                try:
                    rtype = cls.infer(operands, attrs)
                except IRSyntaxError as e:
                    X.raise_at(parser, str(e), start)
        return operands, rtype, attrs

    @classmethod
    def parse_operands(cls, parser: Any) -> list[Any]:
        return X.parse_operand_list(parser)

    @classmethod
    def check_result_type(cls, t: Any) -> None:
        """Raise IRSyntaxError when ``t`` is no legal explicit result type."""

    @classmethod
    def infer(cls, operands: Sequence[Any], attrs: dict[str, Any]) -> Any:
        raise NotImplementedError

    def print_custom(self, printer: Any) -> None:
        if self.operands:
            printer.print_string(" ")
            self.print_operands(printer)
        X.print_attr_dict(printer, dict(self.attributes))
        if self.RESULT == "explicit" and self.results:
            printer.print_string(" : ")
            printer.print_attribute(self.results[0].type)

    def print_operands(self, printer: Any) -> None:
        X.print_operands(printer, list(self.operands))

    # -- verification
    def verify_ir(self, v: VerifyCtx) -> None:
        """Raise IRVerifyError / AtomVerificationError / NvatomError with the diagnostic."""

    def attr(self, key: str, default: Any = None) -> Any:
        a = self.attributes.get(key)
        return default if a is None else X.attr_value(a)


def _defining(v: Any) -> Any:
    return getattr(v, "op", None)


def _operand_use(t: Any, what: str) -> OperandUse:
    """How an MMA verifier sees an operand: element type, residency, layout."""
    m = TY.memref_of(t)
    if m is not None:
        return OperandUse(m.element.name, m.space, m.layout)
    if isinstance(t, TY.SmemDescViewTypeT):
        return OperandUse(TY.smem_desc(t.text).element.name, "smem_desc_view", None)
    _fail(f"expects a !cute.memref or !cute_nvgpu.smem_desc_view for operand {what}, but got "
          f"{TY.type_text(t)}")
    raise AssertionError  # unreachable


def _umma_use(t: Any, what: str) -> OperandUse:
    """A UMMA operand: as :func:`_operand_use`, with a descriptor view's layout (the UMMA
    ladder checks that the operand tiles form a GEMM)."""
    if isinstance(t, TY.SmemDescViewTypeT):
        d = TY.smem_desc(t.text)
        return OperandUse(d.element.name, "smem_desc_view", d.layout)
    return _operand_use(t, what)


def _atom_operand(op: NvOp, kind: str) -> Any:
    t = op.operands[0].type
    atom = TY.atom_of(t)
    fam = TY.family_of(t)
    if atom is None or fam is None or fam.kind != kind:
        _fail(f"expects a {kind} atom as operand #0, but got {TY.type_text(t)}")
    return atom


# =========================================================================== cute
class StaticOp(NvOp):
    """``%l = cute.static : !cute.layout<...>``: a value of a static layout/coordinate type."""

    name = "cute.static"
    RESULT = "explicit"

    @classmethod
    def check_result_type(cls, t: Any) -> None:
        if not isinstance(t, (TY.LayoutTypeT, TY.ComposedLayoutTypeT, TY.SwizzleTypeT,
                              TY.CoordTypeT)):
            raise IRSyntaxError("'cute.static' makes a !cute.layout, !cute.composed_layout, "
                                f"!cute.swizzle or !cute.coord, not {TY.type_text(t)}")


class _AllocOp(NvOp):
    RESULT = "explicit"
    SPACE: ClassVar[str] = ""

    @classmethod
    def check_result_type(cls, t: Any) -> None:
        m = TY.memref_of(t)
        if m is None or m.space != cls.SPACE or not isinstance(m.layout,
                                                                 (Layout, ComposedLayout)):
            raise IRSyntaxError(f"'{cls.name}' makes a !cute.memref in {cls.SPACE} with a "
                                f"static layout, not {TY.type_text(t)}")


class AllocSmemOp(_AllocOp):
    """``%s = cute.alloc_smem : !cute.memref<e, smem, L>``: a static shared-memory buffer."""

    name = "cute.alloc_smem"
    SPACE = "smem"


class AllocRmemOp(_AllocOp):
    """``%r = cute.alloc_rmem : !cute.memref<e, rmem, TV>``: a zero-filled register fragment
    (TV: its (thread, value) -> element layout)."""

    name = "cute.alloc_rmem"
    SPACE = "rmem"
    #: registers a thread can have (nvatom.arch.MAX_THREAD_REGISTERS)
    MAX_REGISTERS: ClassVar[int] = MAX_THREAD_REGISTERS

    def verify_ir(self, v: VerifyCtx) -> None:
        m = TY.memref_of(self.results[0].type)
        assert m is not None
        if not isinstance(m.layout, Layout):
            _fail(f"a register fragment needs a (thread, value) layout, got {m.layout}")
        values = size(m.layout[1]) if m.layout.rank >= 2 else size(m.layout)
        regs = -(-values * m.element.pack_bits // 32)
        if regs > self.MAX_REGISTERS:
            _fail(f"a fragment of {values} {m.element.name} values per thread needs {regs} "
                  f"32-bit registers; a thread has at most {self.MAX_REGISTERS}")


class AllocTmemOp(_AllocOp):
    """``%t = cute.alloc_tmem : !cute.memref<f32, tmem, (128,N):(N,1)>``: tensor-memory
    columns for an UMMA accumulator (rows = TMEM lanes, N 32-bit columns; ``tcgen05.alloc``
    of the next power of two >= 32, freed when the kernel returns)."""

    name = "cute.alloc_tmem"
    SPACE = "tmem"

    def verify_ir(self, v: VerifyCtx) -> None:
        if not v.target.supports("tcgen05"):
            _fail(f"tensor memory needs tcgen05, which {v.target.name} does not have")
        m = TY.memref_of(self.results[0].type)
        assert m is not None
        if not isinstance(m.layout, Layout) or m.layout.rank != 2:
            _fail(f"a TMEM buffer is (lanes, columns), got {m.layout}")

        if tmem_buffer(m.layout) is None:
            _fail(f"a TMEM buffer is (lanes, columns):(columns, 1) of at most 128 lanes, got "
                  f"{m.layout}")
        cols = tmem_columns(m)
        if cols > TMEM_COLUMNS:
            _fail(f"{m.layout} needs {cols} TMEM columns; a CTA has {TMEM_COLUMNS}")
        fn = self.parent_op()
        if fn is None or fn.name != "func.func":
            _fail("cute.alloc_tmem is made at the kernel's top level (its buffers share one "
                  "tcgen05.alloc), not inside a loop or branch")
        total = 0  # reported at the buffer that takes the kernel past TMEM_COLUMNS
        for o in fn.walk():
            om = TY.memref_of(o.results[0].type) if o.name == self.name else None
            if om is not None and tmem_buffer(om.layout) is not None:
                total += tmem_columns(om)
            if o is self:
                break
        if total > TMEM_COLUMNS >= total - cols:
            _fail(f"the kernel's TMEM buffers take {total} columns (each a power of two >= 32); "
                  f"a CTA has {TMEM_COLUMNS}")


def tmem_columns(m: Any) -> int:
    """TMEM columns ``tcgen05.alloc`` takes for a (lanes, columns) buffer: a power of two
    in 32..512 covering its columns (32-bit cells, whatever the element type:
    nvatom.ir.tcgen05)."""

    return alloc_columns(size(m.layout[1]))


class FragmentOp(NvOp):
    """Base of the ops that make a register fragment (static layout) from one: ``cute.retile``
    here, ``cute.fragment_slice`` and ``cute.fragment_convert`` (nvatom.ir.ops_sync); the
    result-type and operand checks they share."""

    OPERANDS = 1
    RESULT = "explicit"

    @classmethod
    def check_result_type(cls, t: Any) -> None:
        m = TY.memref_of(t)
        if m is None or m.space != "rmem" or not isinstance(m.layout, Layout):
            raise IRSyntaxError(f"'{cls.name}' makes a !cute.memref in rmem with a static "
                                f"layout, not {TY.type_text(t)}")

    def fragments(self) -> tuple[TY.MemRef, TY.MemRef]:
        """(operand, result) memrefs; fails unless the operand is a static register fragment."""
        src = TY.memref_of(self.operands[0].type)
        dst = TY.memref_of(self.results[0].type)
        assert dst is not None
        if src is None or src.space != "rmem" or not isinstance(src.layout, Layout):
            _fail(f"expects a register fragment with a static layout, but got "
                  f"{TY.type_text(self.operands[0].type)}")
        assert src is not None
        return src, dst


class RetileOp(FragmentOp):
    """``%b = cute.retile %a : !cute.memref<e, rmem, TV2>``: the same registers seen through
    another (thread, value) layout (no code; CuTe's ``retile``): an ldmatrix result, whose
    layout is the copy atom's reference space, becomes the MMA operand fragment it is."""

    name = "cute.retile"

    def verify_ir(self, v: VerifyCtx) -> None:
        src, dst = self.fragments()
        if src.element != dst.element:
            _fail(f"retile keeps the element type: {src.element.name} != {dst.element.name}")
        ns, nd = (_values_per_thread(m.layout) for m in (src, dst))
        if ns != nd:
            _fail(f"retile keeps the registers: {src.layout} holds {ns} values per thread, "
                  f"{dst.layout} {nd}")


def _values_per_thread(layout: Any) -> int:
    return size(layout[1]) if layout.rank >= 2 else size(layout)


class MakeViewOp(NvOp):
    """``%v = cute.make_view %ptr : !cute.memref<e, gmem, L>``: a tensor at a pointer."""

    name = "cute.make_view"
    OPERANDS = 1
    RESULT = "explicit"

    @classmethod
    def check_result_type(cls, t: Any) -> None:
        m = TY.memref_of(t)
        if m is None or m.space not in ("gmem", "smem") or m.layout is None:
            raise IRSyntaxError(f"'cute.make_view' makes a !cute.memref in gmem or smem with a "
                                f"layout, not {TY.type_text(t)}")

    def verify_ir(self, v: VerifyCtx) -> None:
        pt = self.operands[0].type
        m = TY.memref_of(self.results[0].type)
        assert m is not None
        if not isinstance(pt, TY.PtrTypeT) or TY._ptr(pt.text) != (m.element, m.space):
            _fail(f"expects a !cute.ptr<{m.element.name}, {m.space}> operand, but got "
                  f"{TY.type_text(pt)}")


class MakeCoordOp(NvOp):
    """``%c = cute.make_coord %i, %j``: a coordinate of 1..5 integers."""

    name = "cute.make_coord"
    OPERANDS = (1, 5)
    RESULT = "infer"

    @classmethod
    def infer(cls, operands: Sequence[Any], attrs: dict[str, Any]) -> Any:
        for i, o in enumerate(operands):
            if not X.is_integer_like(o.type):
                raise IRSyntaxError(f"coordinate #{i} must be an integer, got "
                                    f"{TY.type_text(o.type)}")
        return TY.make(TY.CoordTypeT, str(len(operands)))


# =========================================================================== nv_tileas
class MakeTiledTmaDescOp(NvOp):
    """``%d = nv_tileas.make_tiled_tma_desc %tensor, %layout shapes(...) strides(...)
    paddings(...) {mode = #cute_nvgpu.tma_load_mode<tiled>, elementBitWidth = 16} :
    !cute_nvgpu.tma_descriptor_tiled`` (spec-deviations.md#tma-worked-example).

    ``%layout`` is the GMEM layout type (dynamic extents and strides by name); ``shapes``
    binds one value per mode and ``strides`` one per non-leading mode (the leading stride is
    the element, as in the descriptor).  The descriptor is a kernel parameter built on the
    host (``cuTensorMapEncodeTiled``): the lowering hoists it.
    """

    name = "nv_tileas.make_tiled_tma_desc"
    OPERANDS = (0, 64)
    RESULT = "explicit"
    ATTRS: ClassVar[dict[str, Any]] = {"mode": (TY.LoadModeAttrT, TY.StoreModeAttrT),
                                       "elementBitWidth": "int", "segments": "str"}
    REQUIRED = ("mode", "elementBitWidth")
    GROUPS = ("shapes", "strides", "paddings")

    @classmethod
    def parse_operands(cls, parser: Any) -> list[Any]:
        head = X.parse_operand_list(parser)
        groups = [X.parse_paren_operands(parser, g) for g in cls.GROUPS]
        cls._pending_segments = ",".join(str(len(g)) for g in (head, *groups))
        return head + [v for g in groups for v in g]

    @classmethod
    def parse_custom(cls, parser: Any) -> tuple[list[Any], Any, dict[str, Any]]:
        ops, rtype, attrs = super().parse_custom(parser)
        attrs["segments"] = X.StringAttr(cls._pending_segments)
        return ops, rtype, attrs

    @classmethod
    def check_result_type(cls, t: Any) -> None:
        if not isinstance(t, (TY.TmaDescTiledT, TY.TmaDescIm2colT)):
            raise IRSyntaxError("'nv_tileas.make_tiled_tma_desc' makes a "
                                "!cute_nvgpu.tma_descriptor_tiled or _im2col, not "
                                f"{TY.type_text(t)}")

    def segments(self) -> list[list[Any]]:
        sizes = [int(s) for s in self.attr("segments").split(",")]
        out, i = [], 0
        for n in sizes:
            out.append(list(self.operands[i:i + n]))
            i += n
        return out

    def print_custom(self, printer: Any) -> None:
        head, *groups = self.segments()
        printer.print_string(" ")
        X.print_operands(printer, head)
        for g, vals in zip(self.GROUPS, groups, strict=True):
            printer.print_string(f" {g}(")
            X.print_operands(printer, vals)
            printer.print_string(")")
        X.print_attr_dict(printer, dict(self.attributes), skip=("segments",))
        printer.print_string(" : ")
        printer.print_attribute(self.results[0].type)

    @property
    def gmem_layout(self) -> Any:
        head = self.segments()[0]
        lay = TY.layout_of(head[1].type) if len(head) == 2 else None
        return lay if lay is not None else _TypeRepr(head[1].type if len(head) == 2 else None)

    @property
    def element_bits(self) -> int:
        return int(self.attr("elementBitWidth"))

    def verify_ir(self, v: VerifyCtx) -> None:
        head, shapes, strides, pads = self.segments()
        if len(head) != 2:
            _fail(f"expects a tensor and a layout operand, got {len(head)} operands")
        pt = head[0].type
        if not isinstance(pt, TY.PtrTypeT) or TY._ptr(pt.text)[1] != "gmem":
            _fail(f"expects a !cute.ptr<..., gmem> tensor, but got {TY.type_text(pt)}")
        el = TY._ptr(pt.text)[0]
        if el.pack_bits != self.element_bits:
            _fail(f"elementBitWidth = {self.element_bits}, but the tensor holds {el.name} "
                  f"({el.pack_bits} bits)")
        lay = TY.layout_of(head[1].type)
        if lay is None:
            return  # the partition verifier reports the layout (#tma-partition-verifier, steps 1-3)
        rank = lay.rank if isinstance(lay, (Layout, T.LayoutType)) else None
        if rank is not None and 1 <= rank <= 5:
            if len(shapes) != rank or len(strides) != rank - 1:
                _fail(f"a rank-{rank} descriptor takes {rank} shapes and {rank - 1} strides "
                      f"(the leading stride is the element), got {len(shapes)} and "
                      f"{len(strides)}")
        for x in (*shapes, *strides, *pads):
            if not X.is_integer_like(x.type):
                _fail(f"shapes, strides and paddings are integers, got {TY.type_text(x.type)}")
        if pads:
            _fail(f"mode {X.print_attr(self.attributes['mode'])} takes no padding values")
        self._verify_descriptor_type()

    def _verify_descriptor_type(self) -> None:
        """The result type names the mode's descriptor kind: the im2col modes (load
        ``w_multicast``/``w128_multicast``, PTX ``.im2col::w``/``::128``; store ``im2col*``)
        make a ``!cute_nvgpu.tma_descriptor_im2col`` (``cuTensorMapEncodeIm2col``), the
        others a ``!cute_nvgpu.tma_descriptor_tiled`` (``cuTensorMapEncodeTiled``)."""
        attr = self.attributes["mode"]
        name = str(attr.text).strip()
        mode = (TY.LOAD_MODES if isinstance(attr, TY.LoadModeAttrT) else TY.STORE_MODES)[name]
        _check_descriptor_kind(mode, self.results[0].type, X.print_attr(attr), "the result type")


def descriptor_kind(mode: Any) -> str:
    """``"im2col"`` for the im2col modes (``cuTensorMapEncodeIm2col``), else ``"tiled"``."""
    q = T.ptx_qualifiers(mode)
    return "im2col" if "IM2COL" in mode.name or bool(q and q[0].startswith(".im2col")) \
        else "tiled"


def _mode_text(mode: Any) -> str:
    """A mode enum member as its IR attribute (``#cute_nvgpu.tma_load_mode<im2col>``)."""
    for attr, table in (("tma_load_mode", TY.LOAD_MODES), ("tma_store_mode", TY.STORE_MODES),
                        ("tma_reduce_kind", TY.REDUCE_KINDS)):
        for k, m in table.items():
            if m is mode:  # identity: the enums' integer values overlap
                return f"#cute_nvgpu.{attr}<{k}>"
    return str(mode)


def _check_descriptor_kind(mode: Any, got: Any, mode_text: str, what: str) -> None:
    want = descriptor_kind(mode)
    if not isinstance(got, TY.TmaDescIm2colT if want == "im2col" else TY.TmaDescTiledT):
        _fail(f"mode {mode_text} makes a !cute_nvgpu.tma_descriptor_{want}, but {what} is "
              f"{TY.type_text(got)}")


# =========================================================================== cute_nvgpu
class MakeAtomOp(NvOp):
    """``%a = cute_nvgpu.make_atom : !cute_nvgpu.<atom type>``."""

    name = "cute_nvgpu.make_atom"
    RESULT = "explicit"

    @classmethod
    def check_result_type(cls, t: Any) -> None:
        if TY.family_of(t) is None:
            raise IRSyntaxError(f"'cute_nvgpu.make_atom' makes an atom type, not "
                                f"{TY.type_text(t)}")

    def verify_ir(self, v: VerifyCtx) -> None:
        atom = TY.atom_of(self.results[0].type)
        check = getattr(atom, "available_on", None)
        if check is not None and not check(v.target):
            why = atom_record(atom.mnemonic).rejection(v.target, atom.name)
            _fail(why or f"atom '{atom.name}' is not available on {v.target.name}")


class MakeSmemDescOp(NvOp):
    """``%d = cute_nvgpu.make_smem_desc %smem : !cute_nvgpu.smem_desc_view<e, K|MN, L>``: the
    WGMMA descriptor of a shared-memory tile (checked against the layout when parsed)."""

    name = "cute_nvgpu.make_smem_desc"
    OPERANDS = 1
    RESULT = "explicit"

    @classmethod
    def check_result_type(cls, t: Any) -> None:
        if not isinstance(t, TY.SmemDescViewTypeT):
            raise IRSyntaxError(f"'{cls.name}' makes a !cute_nvgpu.smem_desc_view, not "
                                f"{TY.type_text(t)}")

    def verify_ir(self, v: VerifyCtx) -> None:
        d = TY.smem_desc(self.results[0].type.text)
        m = TY.memref_of(self.operands[0].type)
        if m is None or m.space != "smem" or m.element != d.element or \
                str(m.layout) != str(d.layout):
            _fail(f"expects a !cute.memref<{d.body().replace(f', {d.major}', ', smem')}> "
                  f"operand, but got {TY.type_text(self.operands[0].type)}")


class MmaOp(NvOp):
    """``cute_nvgpu.atom.mma %atom, %d, %a, %b, %c [, %e] {selector = 0}``: D = A * B + C.

    Register MMA (sm80/sm89, SM120): A, B, C, D register fragments (``!cute.memref<e, rmem,
    TV>``), a sparse form adds the metadata fragment ``%e`` and the selector.  WGMMA (sm90):
    D is the accumulator fragment and must be C itself; A a descriptor view (``ss``) or a
    fragment (``rs``), B a descriptor view; the tile's K may hold several K-blocks of the
    atom, issued one after the other.  ``accumulate = false`` computes D = A * B.
    """

    name = "cute_nvgpu.atom.mma"
    OPERANDS = (5, 8)
    ATTRS: ClassVar[dict[str, Any]] = {"selector": "int", "accumulate": "bool"}

    def verify_ir(self, v: VerifyCtx) -> None:
        atom = _atom_operand(self, "mma")
        _, d, a, b, c, *extra = self.operands
        uses = [_operand_use(x.type, n) for x, n in ((a, "A"), (b, "B"), (c, "C"), (d, "D"))]
        if isinstance(atom, TmemAtom):
            self._verify_umma(atom, extra, v)
            return
        if isinstance(atom, BlockScaleAtom):
            self._verify_block_scaled(atom, uses, extra, v)
            return
        if len(extra) > 1:
            _fail(f"atom '{atom.name}' takes A, B, C, D and at most a metadata operand, got "
                  f"{len(self.operands) - 1} operands")
        meta = _operand_use(extra[0].type, "E") if extra else None
        use = MmaUse(uses[0], uses[1], uses[2], uses[3], meta, self.attr("selector"))
        if isinstance(atom, WgmmaForm):
            self._verify_wgmma(atom, use, v)
            return
        if self.attr("accumulate") is not None:
            _fail(f"'accumulate' applies to WGMMA atoms only, not '{atom.name}'")
        if not hasattr(atom, "is_sparse"):  # the universal FMA
            atom.verify_instance(v.target, use)
            return
        if not atom.is_sparse and (meta is not None or use.selector is not None):
            _fail(f"atom '{atom.name}' is dense and takes no metadata or selector")
        if atom.is_sparse and use.selector is None:
            use = MmaUse(use.a, use.b, use.c, use.d, use.metadata, atom.selectors[0])
        atom.verify_instance(v.target, use)

    def _verify_umma(self, atom: Any, extra: list[Any], v: VerifyCtx) -> None:
        """SM100 UMMA (tcgen05.mma): ``%atom, %d, %a, %b, %c[, %sfa, %sfb][, %e]``; A, B as
        descriptor views or TMEM memrefs, D in TMEM; the UMMA ladder
        (docs/spec-deviations.md#mma-verifier-ladders)."""

        _, d, a, b, c = self.operands[:5]
        uses = [_umma_use(x.type, n) for x, n in ((a, "A"), (b, "B"), (c, "C"), (d, "D"))]
        n_sf = 2 if atom.block_scaled else 0
        if len(extra) != n_sf + (1 if atom.sparse else 0):
            want = (["%sfa, %sfb"] if n_sf else []) + (["%e"] if atom.sparse else [])
            _fail(f"atom '{atom.name}' takes %atom, %d, %a, %b, %c"
                  + "".join(f", {w}" for w in want))
        sf = [_umma_use(x.type, n) for x, n in zip(extra[:n_sf], ("SFA", "SFB"), strict=False)]
        meta = _umma_use(extra[-1].type, "E") if atom.sparse else None
        if self.attr("selector") is not None:  # accumulate = false: enable-input-d off
            _fail(f"atom '{atom.name}' takes no selector attribute")
        # TMEM buffers and cta_group::2 descriptor views (nvatom.ir.tcgen05)

        k_blocks = T5.umma_k_blocks(atom, uses[1].layout) if uses[1].layout is not None else 1
        ops = T5.umma_uses(atom, dict(zip(("A", "B", "C", "D", "SFA", "SFB", "E"),
                                          (*uses, *(sf or [None, None]), meta), strict=True)),
                           k_blocks)
        atom.verify_instance(v.target, UmmaUse(*(ops[n] for n in ("A", "B", "C", "D", "SFA",
                                                                  "SFB", "E"))))
        if c is not d:
            _fail(f"atom '{atom.name}' accumulates in place in tensor memory: C must be D")
        if atom.cta_group == 2:
            _need_cta_pair(self, atom.name)
        T5.check_one_cta_group(self)
        v.facts[self] = k_blocks

    def _verify_block_scaled(self, atom: Any, uses: list[OperandUse], extra: list[Any],
                             v: VerifyCtx) -> None:
        """SM120.mma_bs: ``%atom, %d, %a, %b, %c, %sfa, %sfb [, %e]``."""

        if len(extra) < 2:
            _fail(f"atom '{atom.name}' takes the scale-factor fragments of A and B after C "
                  f"(%atom, %d, %a, %b, %c, %sfa, %sfb[, %e])")
        sfa, sfb = (_operand_use(x.type, n) for x, n in zip(extra[:2], ("SFA", "SFB"),
                                                            strict=True))
        meta = _operand_use(extra[2].type, "E") if len(extra) > 2 else None
        sel = self.attr("selector")
        if atom.is_sparse and sel is None:
            sel = 0
        if self.attr("accumulate") is not None:
            _fail(f"'accumulate' applies to WGMMA atoms only, not '{atom.name}'")
        atom.verify_instance(v.target, MmaBsUse(uses[0], uses[1], uses[2], uses[3], sfa, sfb,
                                                meta, sel))

    def _verify_wgmma(self, atom: Any, use: MmaUse, v: VerifyCtx) -> None:
        _, d, a, b, c, *e = self.operands
        if e or use.selector is not None:
            _fail(f"atom '{atom.name}' is dense and takes no metadata or selector")
        if c is not d:
            _fail(f"atom '{atom.name}' accumulates in place: C must be D")
        # the tile's K may be a multiple of the atom's: verify one K-block, as issued
        atom.verify_instance(v.target, dataclasses.replace(use, shape=None))
        k_blocks = 1
        for x, name in ((a, "A"), (b, "B")):
            if isinstance(x.type, TY.SmemDescViewTypeT):
                desc = TY.smem_desc(x.type.text)
                lay = desc.layout
                shp = (lay.outer if isinstance(lay, ComposedLayout) else lay).shape
                rows = (atom.m if name == "A" else atom.n)
                if desc.major != "K":
                    _fail(f"atom '{atom.name}' lowering supports K-major tiles; operand {name} "
                          f"is {desc.major}-major")
                if not isinstance(shp, tuple) or len(shp) != 2 or _size(shp[0]) != rows or \
                        _size(shp[1]) % atom.k:
                    _fail(f"atom '{atom.name}' expects operand {name} as a {rows} x (n * "
                          f"{atom.k}) K-major tile, but got {desc.layout}")
                k_blocks = _size(shp[1]) // atom.k
        if atom.a_source == "rs":
            k_blocks = 1
        m = TY.memref_of(d.type)
        assert m is not None
        if m.layout is not None:
            want = wgmma_tv_layout(atom, "D")
            if not isinstance(m.layout, Layout) or not layouts_equivalent(m.layout, want):
                _fail(f"{D.MMA_ATOM_LAYOUT}{want} for operand D, but got {m.layout}")
        v.facts[self] = k_blocks


def _size(x: Any) -> int:
    if isinstance(x, tuple):
        n = 1
        for e in x:
            n *= _size(e)
        return n
    return int(x)


def _int_tuple(op: NvOp, key: str, n: int) -> tuple[int, ...] | None:
    """An attribute ``key = "(2,2,1)"``: ``n`` positive integers."""
    text = op.attr(key)
    if text is None:
        return None
    parts = text.strip().removeprefix("(").removesuffix(")").split(",")
    try:
        vals = tuple(int(x) for x in parts)
    except ValueError:
        vals = ()
    if len(vals) != n or min(vals) < 1:
        _fail(f"{key} must be {n} positive integers like \"(2,2,1)\", got \"{text}\"")
    return vals


class MakeTiledMmaOp(NvOp):
    """``%t = cute_nvgpu.make_tiled_mma %atom {atom_layout = "(2,2,1)", tile = "(64,32,16)"}``:
    the atom repeated over a (M, N, K) layout of warps and tile (CuTe's ``make_tiled_mma``,
    built by ``nvatom.atoms.tiled_mma``)."""

    name = "cute_nvgpu.make_tiled_mma"
    OPERANDS = 1
    RESULT = "infer"
    ATTRS: ClassVar[dict[str, Any]] = {"atom_layout": "str", "tile": "str"}

    @classmethod
    def infer(cls, operands: Sequence[Any], attrs: dict[str, Any]) -> Any:
        return TY.make(TY.TiledMmaT)

    def verify_ir(self, v: VerifyCtx) -> None:
        atom = _atom_operand(self, "mma")
        if not hasattr(atom, "tv_layout") or not hasattr(atom, "shape_mnk"):
            _fail(f"make_tiled_mma tiles register MMA atoms, not '{atom.name}'")
        v.facts[self] = make_tiled_mma(atom, _int_tuple(self, "atom_layout", 3) or (1, 1, 1),
                                       _int_tuple(self, "tile", 3))


class TiledGemmOp(NvOp):
    """``cute_nvgpu.tiled_mma.gemm %tiled, %d, %a, %b, %c``: D = A * B + C over tensors of the
    tiled MMA's tile (CuTe's ``gemm``).  Verified by the tiled builders' operand checks
    (``check_gemm_operands``: no composed layouts, A/B and C/D ranks, C's rank against A's);
    not lowered (apply the atom with ``cute_nvgpu.atom.mma``)."""

    name = "cute_nvgpu.tiled_mma.gemm"
    OPERANDS = 5

    def verify_ir(self, v: VerifyCtx) -> None:
        t, *ops = self.operands
        if not isinstance(t.type, TY.TiledMmaT):
            _fail(f"expects a !cute_nvgpu.tiled_mma as operand #0, but got "
                  f"{TY.type_text(t.type)}")
        layouts = []
        for x, n in zip(ops, "DABC", strict=True):
            m = TY.memref_of(x.type)
            if m is None or m.layout is None:
                _fail(f"expects a !cute.memref with a layout for operand {n}, but got "
                      f"{TY.type_text(x.type)}")
            assert m is not None
            layouts.append(m.layout)
        d, a, b, c = layouts
        check_gemm_operands(a, b, c, d)
        # Register fragments (the lowerable form): each must be the tiled MMA's own.
        tiled = v.facts.get(_defining(t))
        spaces = {TY.memref_of(x.type).space for x in ops}  # type: ignore[union-attr]
        if tiled is not None and spaces == {"rmem"}:
            for lay, n in zip(layouts, "DABC", strict=True):
                check_fragment_layout(n, tiled.tv_layout(n), lay)
            v.facts[self] = tiled


class CopyFragmentOp(NvOp):
    """``cute_nvgpu.atom.copy_fragment %atom, %src, %dst {operand = "A"}``: each lane moves
    its fragment of one MMA operand between a tile (gmem/smem view) and registers.  With a
    tiled MMA (``make_tiled_mma``) instead of an atom, each thread of the tiled MMA moves its
    fragment of tile ``tile = "(i,j)"`` (default ``"(0,0)"``) of a global tensor made of
    whole tiles of the operand."""

    name = "cute_nvgpu.atom.copy_fragment"
    OPERANDS = 3
    ATTRS: ClassVar[dict[str, Any]] = {"operand": "str", "tile": "str"}
    REQUIRED = ("operand",)

    def verify_ir(self, v: VerifyCtx) -> None:
        if isinstance(self.operands[0].type, TY.TiledMmaT):
            self._verify_tiled(v)
            return
        if self.attr("tile") is not None:
            _fail("tile is an attribute of a tiled MMA's copy_fragment (the atom's covers one "
                  "atom tile)")
        atom = _atom_operand(self, "mma")
        op = self.attr("operand")
        if not hasattr(atom, "register_type"):
            _fail(f"copy_fragment supports register and warpgroup MMA atoms, not '{atom.name}'")
        src, dst, tile, frag = self._tile_and_fragment(op)
        if frag.space != "rmem" or tile.space not in ("gmem", "smem"):
            _fail(f"copy_fragment moves a tile (gmem/smem) to or from registers, got "
                  f"{src.space} -> {dst.space}")
        self._check_fragment(op, operand_dtype(atom, op), tile, frag,
                             lambda: operand_tv(atom, op), required=False)
        if not isinstance(tile.layout, Layout):
            _fail(f"copy_fragment needs a static tile layout, got {tile.layout}")
        v.facts[self] = fragment_access(atom, op, tile.layout)

    def _tile_and_fragment(self, op: str) -> tuple[Any, Any, Any, Any]:
        """(src, dst, tile, fragment) memrefs of a copy_fragment of operand ``op``."""
        if op not in ("A", "B", "C", "D"):
            _fail(f"operand must be A, B, C or D, got '{op}'")
        src, dst = (TY.memref_of(x.type) for x in self.operands[1:])
        if src is None or dst is None:
            _fail("copy_fragment copies between !cute.memref values")
        assert src is not None and dst is not None
        tile, frag = (src, dst) if dst.space == "rmem" else (dst, src)
        return src, dst, tile, frag

    @staticmethod
    def _check_fragment(op: str, want: Any, tile: Any, frag: Any,
                        tv_of: Callable[[], Layout], *, required: bool) -> None:
        """Element types of both sides, then the fragment's layout against the atom's (or
        the tiled MMA's) ``tv_of()`` (``required``: a fragment must declare it)."""
        for m in (tile, frag):
            if m.element != want:
                _fail(f"expects operand {op.lower()} with element type {want.name}, but get "
                      f"{m.element.name}.")
        if required or frag.layout is not None:
            check_fragment_layout(op, tv_of(), frag.layout)

    def _verify_tiled(self, v: VerifyCtx) -> None:
        tiled = v.facts.get(_defining(self.operands[0]))
        if tiled is None:
            _fail("copy_fragment needs the tiled MMA of a cute_nvgpu.make_tiled_mma")
        op = self.attr("operand")
        src, dst, tile, frag = self._tile_and_fragment(op)
        if frag.space != "rmem" or tile.space != "gmem":
            _fail(f"a tiled MMA's copy_fragment moves a global tensor to or from registers, "
                  f"got {src.space} -> {dst.space}")
        self._check_fragment(op, operand_dtype(tiled.atom, op), tile, frag,
                             lambda: tiled.tv_layout(op), required=True)
        if not isinstance(tile.layout, Layout):
            _fail(f"copy_fragment needs a static tensor layout, got {tile.layout}")
        text = self.attr("tile") or "(0,0)"
        try:
            coord = tuple(int(x) for x in text.strip().removeprefix("(").removesuffix(")")
                          .split(","))
        except ValueError:
            coord = ()
        if len(coord) != 2 or min(coord) < 0:
            _fail(f"tile must be two integers >= 0 like \"(0,1)\", got \"{text}\"")
        v.facts[self] = tiled_fragment_access(tiled, op, tile.layout, coord)  # type: ignore[arg-type]


class CopyOp(NvOp):
    """``cute_nvgpu.atom.copy %atom, %src, %dst``: apply a copy atom (verified by the atom)."""

    name = "cute_nvgpu.atom.copy"
    OPERANDS = 3
    ATTRS: ClassVar[dict[str, Any]] = {"generic": "bool"}

    def verify_ir(self, v: VerifyCtx) -> None:
        atom = _atom_operand(self, "copy")
        if self.attr("generic"):
            self._check_generic(atom)
        src, dst = (_operand_use(x.type, n) for x, n in zip(self.operands[1:], ("src", "dst"),
                                                           strict=True))
        if atom.mnemonic in ("atom.tmem_load", "atom.tmem_store", "atom.s2t_copy"):
            # the TMEM atoms (nvatom.atoms.tmem) take (src, dst residency, element bits)
            atom.verify_instance(v.target, (src.residency, dst.residency,
                                            element_bits(src.element_type)))

            v.facts[self] = verify_tmem_copy(atom, self.operands[1].type, self.operands[2].type)
            if atom.mnemonic == "atom.s2t_copy":
                if atom.cta_group == 2:
                    _need_cta_pair(self, atom.name)
                check_one_cta_group(self)
            return

        if isinstance(atom, MatrixCopy):
            # a swizzle finer than the 16-byte row: the specification's "cannot vectorize
            # copy" with the reason, at verification (the lowering would refuse it too)
            smem = src if atom.op == "ldmatrix" else dst
            if smem.layout is not None and smem.residency == "smem":
                bits = element_bits(smem.element_type)
                swizzle_too_fine(atom.name, smem.layout, 128 // bits, bits)
            if atom.op == "ldmatrix":
                src = check_swizzled_rows(atom, src, "src")
            else:
                dst = check_swizzled_rows(atom, dst, "dst")
        atom.verify_instance(v.target, CopyUse(src, dst))

    def _check_generic(self, atom: Any) -> None:
        """``generic = true`` applies to ldmatrix/stmatrix, whose shared tile it addresses
        generically (the instruction without ``.shared``)."""

        if not isinstance(atom, MatrixCopy):
            _fail(f"generic = true addresses an ldmatrix/stmatrix tile generically; "
                  f"'{atom.name}' names its state spaces")
        mem = self.operands[1] if atom.op == "ldmatrix" else self.operands[2]
        m = TY.memref_of(mem.type)
        if m is None or m.space != "smem":
            _fail(f"generic = true: the {atom.op} tile must be a shared-memory memref (a "
                  f"generic address of shared memory), but got {TY.type_text(mem.type)}")


class UmmaCommitOp(NvOp):
    """``cute_nvgpu.arch.umma_commit %bar``: the barrier completes (one arrival) when the
    tcgen05 operations the issuing thread started so far have (``tcgen05.commit``)."""

    name = "cute_nvgpu.arch.umma_commit"
    OPERANDS = 1
    #: ``multicast_mask``: the arrival also reaches the same barrier in these CTAs of the
    #: cluster (``.multicast::cluster`` with a 16-bit CTA mask)
    ATTRS: ClassVar[dict[str, Any]] = {"multicast_mask": "int"}

    def verify_ir(self, v: VerifyCtx) -> None:
        if not v.target.supports("tcgen05"):
            _fail(f"'{self.name}' needs tcgen05, which {v.target.name} does not have")
        if not isinstance(self.operands[0].type, TY.MbarrierT):
            _fail(f"expects a !cute_nvgpu.mbarrier, but got "
                  f"{TY.type_text(self.operands[0].type)}")
        mask = self.attr("multicast_mask")
        if mask is not None:
            n = cluster_size(self)
            if not 0 < mask < (1 << min(n, 16)):
                _fail(f"multicast_mask = {mask} names no CTAs of the kernel's cluster of {n} "
                      f"(a mask of 1 to 2^{n} - 1; declare the kernel's cluster)")


class TmemShiftOp(NvOp):
    """``cute_nvgpu.arch.tmem_shift %t``: ``tcgen05.shift.down`` -- the rows of the TMEM
    matrix at the buffer ``%t`` move down by one lane (asynchronous; one thread issues it, a
    later ``umma_commit`` tracks it; the kernel's CTA group; 'a' targets)."""

    name = "cute_nvgpu.arch.tmem_shift"
    OPERANDS = 1

    def verify_ir(self, v: VerifyCtx) -> None:
        f = feature("tcgen05.shift")
        if not f.available_on(v.target):
            _fail(f"'{self.name}' (tcgen05.shift) is not available on {v.target.name}: it "
                  f"needs {f.rule}")
        m = TY.memref_of(self.operands[0].type)
        if m is None or m.space != "tmem" or tmem_buffer(m.layout) is None:
            _fail(f"'{self.name}' shifts a TMEM buffer (cute.alloc_tmem), not "
                  f"{TY.type_text(self.operands[0].type)}")


class CpAsyncCommitOp(NvOp):
    """``cute_nvgpu.arch.cp_async_commit_group``: close a group of cp.async copies."""

    name = "cute_nvgpu.arch.cp_async_commit_group"

    def verify_ir(self, v: VerifyCtx) -> None:
        _need_cp_async(self, v)


class CpAsyncWaitOp(NvOp):
    """``cute_nvgpu.arch.cp_async_wait_group {pending = 0}``: wait until at most N cp.async
    groups are pending (``cp.async.wait_group N``)."""

    name = "cute_nvgpu.arch.cp_async_wait_group"
    ATTRS: ClassVar[dict[str, Any]] = {"pending": "int"}
    REQUIRED = ("pending",)

    def verify_ir(self, v: VerifyCtx) -> None:
        _need_cp_async(self, v)
        if self.attr("pending") < 0:
            _fail(f"cp.async.wait_group takes a count >= 0, got {self.attr('pending')}")


def _need_cp_async(op: NvOp, v: VerifyCtx) -> None:
    if v.target.tier < Tier.SM80:
        _fail(f"'{op.name}' needs cp.async (sm_80 and later), not {v.target.name}")


# -- TMA (spec-deviations.md#tma-partition-verifier, #tma-descriptor-mutation)
class _NonExecTmaOp(NvOp):
    """``%atom = cute_nvgpu.atom.non_exec_tiled_tma_<kind> %desc, %tile, %cta_map {...}``."""

    OPERANDS = 3
    RESULT = "infer"
    TRAILING_OPERAND_TYPE = True
    KIND: ClassVar[T.TmaKind]

    @classmethod
    def infer(cls, operands: Sequence[Any], attrs: dict[str, Any]) -> Any:
        return TY.make(TY.NON_EXEC_TMA[cls.KIND])

    def _mode(self, desc_op: Any) -> Any:
        raise NotImplementedError

    def transfer_kind(self) -> T.TmaKind:
        return self.KIND

    def verify_ir(self, v: VerifyCtx) -> None:
        desc, tile, vmap = self.operands
        if not isinstance(desc.type, (TY.TmaDescTiledT, TY.TmaDescIm2colT)):
            _fail(f"expects a TMA descriptor as operand #0, but got {TY.type_text(desc.type)}")
        desc_op = _desc_origin(desc)
        if not isinstance(desc_op, MakeTiledTmaDescOp):
            _fail("expects the descriptor of an nv_tileas.make_tiled_tma_desc in this function "
                  "(its GMEM layout is the partition's)")
        gmem = desc_op.gmem_layout
        smem = TY.layout_of(tile.type)
        cta = TY.layout_of(vmap.type)
        smem = smem if smem is not None else _TypeRepr(tile.type)
        cta = cta if cta is not None else _TypeRepr(vmap.type)
        mode = self._mode(desc_op)
        # the descriptor's type names the kind of map the mode reads (tiled or im2col)
        _check_descriptor_kind(mode, desc.type, _mode_text(mode), "the descriptor")
        result = T.verify_tma_partition(
            self.transfer_kind(), mode, smem, gmem, cta,
            element_bits=desc_op.element_bits, num_multicast=self.attr("num_multicast"))
        if self.transfer_kind() is T.TmaKind.REDUCE:  # defined on the map's element type?
            T.check_reduce_type(mode, TY._ptr(desc_op.segments()[0][0].type.text)[0].name)
        v.facts[self] = result


class NonExecTmaLoadOp(_NonExecTmaOp):
    name = "cute_nvgpu.atom.non_exec_tiled_tma_load"
    KIND = T.TmaKind.LOAD
    ATTRS: ClassVar[dict[str, Any]] = {"num_multicast": "int",
                                       "tma_load_mode": TY.LoadModeAttrT}

    def _mode(self, desc_op: Any) -> Any:
        a = self.attributes.get("tma_load_mode") or desc_op.attributes["mode"]
        if not isinstance(a, TY.LoadModeAttrT):
            _fail(f"a TMA load needs a #cute_nvgpu.tma_load_mode, the descriptor has "
                  f"{X.print_attr(a)}")
        return TY.LOAD_MODES[a.text]


class NonExecTmaStoreOp(_NonExecTmaOp):
    name = "cute_nvgpu.atom.non_exec_tiled_tma_store"
    KIND = T.TmaKind.STORE
    ATTRS: ClassVar[dict[str, Any]] = {"tma_store_mode": TY.StoreModeAttrT}

    def _mode(self, desc_op: Any) -> Any:
        a = self.attributes.get("tma_store_mode")
        if a is None:
            d = desc_op.attributes["mode"]
            if isinstance(d, TY.StoreModeAttrT):
                a = d
            elif isinstance(d, TY.LoadModeAttrT) and d.text == "tiled":
                return T.TmaStoreMode.TMA_STORE_TILED
            else:
                _fail(f"a TMA store needs a #cute_nvgpu.tma_store_mode, the descriptor has "
                      f"{X.print_attr(d)}")
        return TY.STORE_MODES[a.text]


class NonExecTmaReduceOp(_NonExecTmaOp):
    name = "cute_nvgpu.atom.non_exec_tiled_tma_reduce"
    KIND = T.TmaKind.REDUCE
    ATTRS: ClassVar[dict[str, Any]] = {"kind": TY.ReduceKindAttrT}
    REQUIRED = ("kind",)

    def _mode(self, desc_op: Any) -> Any:
        return TY.REDUCE_KINDS[self.attributes["kind"].text]


_NON_EXEC_KIND = {TY.NON_EXEC_TMA[k]: k for k in T.TmaKind}


class MakeExecTmaOp(NvOp):
    """``%exec = cute_nvgpu.atom.make_exec_tma %atom[, %mbar] {cache_mode = ...}``: bind a
    non-exec TMA atom to its mbarrier (loads) and cache mode."""

    name = "cute_nvgpu.atom.make_exec_tma"
    OPERANDS = (1, 2)
    RESULT = "infer"
    ATTRS: ClassVar[dict[str, Any]] = {"cache_mode": TY.CacheModeAttrT, "multicast_mask": "int",
                                       "l2_cache_hint": "str"}

    @classmethod
    def infer(cls, operands: Sequence[Any], attrs: dict[str, Any]) -> Any:
        kind = _NON_EXEC_KIND.get(type(operands[0].type))
        if kind is None:
            raise IRSyntaxError("'cute_nvgpu.atom.make_exec_tma' binds a non-exec TMA atom, "
                                f"not {TY.type_text(operands[0].type)}")
        return TY.make(TY.EXEC_TMA[kind])

    @property
    def kind(self) -> T.TmaKind:
        return _NON_EXEC_KIND[type(self.operands[0].type)]

    def verify_ir(self, v: VerifyCtx) -> None:
        if not v.target.supports("tma"):
            # the registry's target rule ("atom 'atom.make_exec_tma' needs tier SM90, ...")
            _fail(atom_record(self.name.removeprefix("cute_nvgpu.")).rejection(
                v.target, self.name.removeprefix("cute_nvgpu."))
                or f"TMA is not available on {v.target.name}")
        has_bar = len(self.operands) == 2
        if self.kind is T.TmaKind.LOAD:
            if not has_bar or not isinstance(self.operands[1].type, TY.MbarrierT):
                _fail("a TMA load completes on an mbarrier: expects a !cute_nvgpu.mbarrier "
                      "operand")
        elif has_bar:
            _fail(f"a TMA {self.kind.value.split('_')[1]} completes through bulk groups and "
                  "takes no mbarrier")
        if self.kind is not T.TmaKind.LOAD and "cache_mode" in self.attributes:
            _fail("cache_mode applies to TMA loads")
        hint = self.attr("l2_cache_hint")
        cache = T.CacheMode.NONE
        if hint is not None:
            names = [m.value for m in T.CacheMode if m.value]
            if hint not in names:
                _fail(f"l2_cache_hint must be one of {', '.join(names)}, got '{hint}'")
            cache = T.CacheMode(hint)
        part_op = _defining(self.operands[0])
        result = v.facts.get(part_op) if isinstance(part_op, _NonExecTmaOp) else None
        if result is None:
            return  # the non-exec atom failed (reported there) or is not from this function
        desc_op = _desc_origin(part_op.operands[0])
        atom = T.NonExecTmaAtom(result, desc_op.element_bits)
        # the atom layer's binding rules: barrier for loads, the CTA mask's population
        ex = T.make_exec_tma(atom, T.MBarrier() if self.kind is T.TmaKind.LOAD else None,
                             cache, self.attr("multicast_mask"))
        # the atom's target rule: the record's, and the features of its mode (the sm_100a
        # family's im2col::w, gather4/scatter4 and cta_group::2)
        spaces = ("gmem", "smem") if self.kind is T.TmaKind.LOAD else ("smem", "gmem")
        ex.verify_instance(v.target, T.TmaCopyUse(*spaces))
        v.facts[self] = ex


_EXEC_KIND = {TY.EXEC_TMA[k]: k for k in T.TmaKind}


class _TmaApplyOp(NvOp):
    """``cute_nvgpu.atom.tma_<kind> %exec, %smem_tile, %coord {...}``."""

    OPERANDS: ClassVar[int | tuple[int, int]] = 3
    KIND: ClassVar[T.TmaKind]
    ATTRS: ClassVar[dict[str, Any]] = {"allow_tma": "bool", "inBounds": "bool"}

    def verify_ir(self, v: VerifyCtx) -> None:
        ex, tile, coord, *offsets = self.operands
        if _EXEC_KIND.get(type(ex.type)) is not self.KIND:
            _fail(f"expects an executable {self.KIND.value} atom (make_exec_tma), but got "
                  f"{TY.type_text(ex.type)}")
        m = TY.memref_of(tile.type)
        if m is None or m.space != "smem":
            _fail(f"expects the shared-memory tile as operand #1, but got "
                  f"{TY.type_text(tile.type)}")
        if self.attr("allow_tma") is False:
            _fail("allow_tma = false: this transfer may not use TMA")
        exec_op = _defining(ex)
        part_op = _defining(exec_op.operands[0]) if isinstance(exec_op, MakeExecTmaOp) else None
        if not isinstance(part_op, _NonExecTmaOp):
            _fail("expects the atom of a make_exec_tma of a non-exec TMA atom in this function")
        result = v.facts.get(part_op)
        if result is None:
            _fail("the non-exec TMA atom did not verify")
        assert m is not None
        body = result.non_exec_atom_body
        if self.attr("multicast_slice"):
            _check_slice_tile(m.layout, body)
        elif str(m.layout) != str(body.smem):
            _fail(f"the tile's layout {m.layout} is not the partitioned SMEM layout {body.smem}")
        # the mode's coordinate count (gather4/scatter4: a column and four rows)
        n_coords = T.partition_instr(result).coords(result.rank)
        if not isinstance(coord.type, TY.CoordTypeT) or int(coord.type.text) != n_coords:
            how = "the descriptor's rank" if n_coords == result.rank else \
                f"a column and four rows of the rank-{result.rank} map"
            _fail(f"expects a !cute.coord<{n_coords}> ({how}), but got "
                  f"{TY.type_text(coord.type)}")
        if self.KIND is T.TmaKind.LOAD:
            mode = T.partition_ptx_mode(result)
            want = T.tma_instr("load", mode).offsets(result.rank)
            if len(offsets) != want:
                _fail(f"a TMA load {mode.lstrip('.')} of rank {result.rank} takes {want} "
                      f"im2col offset operand(s) after the coordinate, got {len(offsets)}")
            for i, o in enumerate(offsets):
                if not X.is_integer_like(o.type):
                    _fail(f"im2col offset #{i} must be an integer, got {TY.type_text(o.type)}")
        v.facts[self] = result


def _check_slice_tile(full: Any, body: Any) -> None:
    """``multicast_slice``: the tile holds the ``num_multicast`` slices of the multicast
    box one after another, each laid out as the partitioned SMEM layout (slice ``k`` is
    slice 0 moved by ``k * size(slice)`` elements), and a slice spans whole swizzle
    patterns, so moving the destination by a slice keeps the swizzle."""
    part, n = body.smem, body.num_multicast
    if n < 2:
        _fail("multicast_slice = true needs a multicast atom (num_multicast >= 2), got "
              f"num_multicast = {n}")

    def split(lay: Any) -> tuple[str, int, Any]:
        if hasattr(lay, "outer"):
            return str(lay.inner), lay.offset, lay.outer
        return "", 0, lay

    sw_f, off_f, lf = split(full)
    sw_p, off_p, lp = split(part)
    step = size(lp)
    fs, fd, ps, pd = (tuple(x) if isinstance(x, tuple) else (x,)
                      for x in (lf.shape, lf.stride, lp.shape, lp.stride))
    ok = ((sw_f, off_f) == (sw_p, off_p) and fd == pd and len(fs) == len(ps)
          and all(isinstance(x, int) for x in (*fs, *fd, *ps, *pd)) and cosize(lp) == step)
    if ok:  # one mode, the slowest of the dense slice, is n times longer
        diff = [j for j in range(len(ps)) if fs[j] != ps[j]]
        ok = (len(diff) == 1 and fs[diff[0]] == n * ps[diff[0]]
              and pd[diff[0]] * ps[diff[0]] == step)
    if not ok:
        _fail(f"multicast_slice = true: the tile's layout {full} is not {n} slices of the "
              f"partitioned SMEM layout {part}, one after another")
    if sw_p and hasattr(part, "inner"):
        sw = part.inner
        pattern = 1 << (sw.bits + sw.base + sw.shift)
        if sw.bits and step % pattern:
            _fail(f"multicast_slice = true: a slice of {step} elements does not span whole "
                  f"patterns of {sw_p} ({pattern} elements)")


class TmaLoadOp(_TmaApplyOp):
    """A TMA load; the im2col modes (``.im2col::w``, ``::128``) take their 16-bit offsets
    (wHalo, wOffset) as operands after the coordinate.  ``multicast_slice = true``: the CTA
    of slice index ``k`` (its position among the mask's CTAs) loads slice ``k`` of the
    multicast box (the box's outermost coordinate advanced by ``k`` slice extents) into
    slice ``k`` of a tile that holds all ``num_multicast`` slices.  ``expect_tx = false``:
    the load does not raise its barrier's transaction count (the program does, once for
    several loads: ``mbarrier_arrive {expect_tx = N}``); ``collective = false``: every thread
    that executes the op issues it (the program elects the thread), as for stores, which
    then also leave the proxy fence, the barrier and the bulk-group commit/wait to the
    program (nvatom.ir.ops_sync)."""

    name = "cute_nvgpu.atom.tma_load"
    KIND = T.TmaKind.LOAD
    OPERANDS = (3, 6)
    ATTRS: ClassVar[dict[str, Any]] = {"allow_tma": "bool", "inBounds": "bool",
                                       "multicast_slice": "bool", "dst_space": "str",
                                       "expect_tx": "bool", "collective": "bool"}

    def verify_ir(self, v: VerifyCtx) -> None:
        super().verify_ir(v)
        _check_load_destination(self, v.facts.get(_defining(self.operands[0])))


def _check_load_destination(op: NvOp, ex: Any) -> None:
    """The ``dst_space`` of a ``tma_load`` (``shared::cluster`` by default): ``shared::cta``
    takes no CTA mask and no multicast slice."""
    space = op.attr("dst_space", "shared::cluster")
    if space not in TE.LOAD_DESTINATIONS:
        _fail(f"dst_space must be one of {', '.join(TE.LOAD_DESTINATIONS)}, got '{space}'")
    if not TE.LOAD_DESTINATIONS[space][1] and (
            op.attr("multicast_slice") or (ex is not None and ex.multicast_mask is not None)):
        _fail(f"a TMA load into {space} cannot multicast (cp.async.bulk.tensor has no "
              f".multicast::cluster with a .{space} destination): bind no multicast_mask")


class TmaStoreOp(_TmaApplyOp):
    name = "cute_nvgpu.atom.tma_store"
    KIND = T.TmaKind.STORE
    ATTRS: ClassVar[dict[str, Any]] = {"allow_tma": "bool", "inBounds": "bool",
                                       "collective": "bool"}


class TmaReduceOp(_TmaApplyOp):
    name = "cute_nvgpu.atom.tma_reduce"
    KIND = T.TmaKind.REDUCE


def _desc_origin(v: Any) -> Any:
    """The make_tiled_tma_desc a descriptor value comes from (through its updates)."""
    op = _defining(v)
    while isinstance(op, UpdateTmaDescOp):
        op = _defining(op.operands[0])
    return op


class UpdateTmaDescOp(NvOp):
    """``%d2 = cute_nvgpu.update_tma_desc %desc, %workspace, %value {field = "global_dim",
    axis = 1}``: device-side descriptor mutation (docs/spec-deviations.md#tma-descriptor-mutation).
    Only the base pointer (``global_address``), a dimension (``global_dim``) and a non-leading
    stride (``global_stride``) are mutable (``nvatom.atoms.tma.tma_update``).  The map is copied to
    the 128 global bytes at ``%workspace`` and edited there with ``tensormap.replace``
    (release/acquire fences around it); ``%d2`` is that map."""

    name = "cute_nvgpu.update_tma_desc"
    OPERANDS = 3
    RESULT = "infer"
    ATTRS: ClassVar[dict[str, Any]] = {"field": "str", "axis": "int"}
    REQUIRED = ("field",)

    @classmethod
    def infer(cls, operands: Sequence[Any], attrs: dict[str, Any]) -> Any:
        t = operands[0].type
        if not isinstance(t, (TY.TmaDescTiledT, TY.TmaDescIm2colT)):
            raise IRSyntaxError(f"'cute_nvgpu.update_tma_desc' updates a TMA descriptor, not "
                                f"{TY.type_text(t)}")
        return t

    def verify_ir(self, v: VerifyCtx) -> None:
        desc, ws, value = self.operands
        origin = _desc_origin(desc)
        if not isinstance(origin, MakeTiledTmaDescOp):
            _fail("expects a descriptor of an nv_tileas.make_tiled_tma_desc in this function")
        if not isinstance(ws.type, TY.PtrTypeT) or TY._ptr(ws.type.text)[1] != "gmem":
            _fail(f"expects a !cute.ptr<..., gmem> workspace (128 bytes, 64-byte aligned) as "
                  f"operand #1, but got {TY.type_text(ws.type)}")
        if not (X.is_integer_like(value.type) or isinstance(value.type, TY.PtrTypeT)):
            _fail(f"expects an integer or pointer value, but got {TY.type_text(value.type)}")
        rank = len(origin.segments()[1])
        v.facts[self] = T.tma_update(self.attr("field"), _RuntimeValue(), self.attr("axis"),
                                     rank=rank)


class _RuntimeValue:
    """A value known at run time only (the mutation rule checks its range when static)."""


class PrefetchTmaDescOp(NvOp):
    """``cute_nvgpu.prefetch_tma_desc %desc``: bring the descriptor into the cache."""

    name = "cute_nvgpu.prefetch_tma_desc"
    OPERANDS = 1

    def verify_ir(self, v: VerifyCtx) -> None:
        t = self.operands[0].type
        if not isinstance(t, (TY.TmaDescTiledT, TY.TmaDescIm2colT)):
            _fail(f"expects a TMA descriptor, but got {TY.type_text(t)}")
        # the atom's target rule (prefetch.tensormap: sm_90, PTX 8.0); the map is a parameter
        T.PrefetchTmaDesc().verify_prefetch(v.target, T.TmaPrefetchUse("param"))


# -- synchronisation
class MbarrierInitOp(NvOp):
    """``%b = cute_nvgpu.arch.mbarrier_init {count = 1}``: a shared-memory mbarrier."""

    name = "cute_nvgpu.arch.mbarrier_init"
    RESULT = "infer"
    ATTRS: ClassVar[dict[str, Any]] = {"count": "int"}
    REQUIRED = ("count",)

    @classmethod
    def infer(cls, operands: Sequence[Any], attrs: dict[str, Any]) -> Any:
        return TY.make(TY.MbarrierT)

    def verify_ir(self, v: VerifyCtx) -> None:
        check_arrival_count(self.attr("count"))


def check_arrival_count(count: int) -> None:
    """An mbarrier's expected arrival count is 1 .. 2^20 - 1 (PTX ISA "mbarrier.init";
    :data:`nvatom.atoms.mbarrier.MAX_ARRIVAL_COUNT`)."""
    if not 1 <= count <= MAX_ARRIVAL_COUNT:
        _fail(f"an mbarrier's arrival count is 1..{MAX_ARRIVAL_COUNT}, got {count}")


class MbarrierWaitOp(NvOp):
    """``cute_nvgpu.arch.mbarrier_wait %bar, %phase``: wait until the phase of that parity
    has completed."""

    name = "cute_nvgpu.arch.mbarrier_wait"
    OPERANDS = 2

    def verify_ir(self, v: VerifyCtx) -> None:
        b, p = self.operands
        if not isinstance(b.type, TY.MbarrierT) or not X.is_integer_like(p.type):
            _fail(f"expects an mbarrier and an integer phase, but got {TY.type_text(b.type)} "
                  f"and {TY.type_text(p.type)}")


class SyncThreadsOp(NvOp):
    """``cute_nvgpu.arch.sync_threads``: a CTA-wide barrier (``bar.sync 0``)."""

    name = "cute_nvgpu.arch.sync_threads"


def _need_cta_pair(op: NvOp, what: str) -> None:
    """A ``cta_group::2`` operation runs on a CTA pair: the peer CTA is the one whose
    ``%cluster_ctarank`` differs in bit 0 (PTX ISA, "tcgen05: CTA pair"), so the kernel must
    declare a cluster (``cluster = [2, 1, 1]``) of an even number of CTAs."""
    attr, dims = X.kernel_cluster(op)
    if not dims or any(d < 1 for d in dims) or math.prod(dims) % 2:
        got = ("no cluster attribute" if attr is None else
               f"cluster = {list(dims) if dims else X.print_attr(attr)}")
        _fail(f"atom '{what}' runs on a CTA pair (cta_group::2): its kernel needs a cluster "
              f"of an even number of CTAs (e.g. cluster = [2, 1, 1]), but has {got}")


def _need_cluster(op: NvOp, v: VerifyCtx) -> None:
    if v.target.tier < Tier.SM90:
        _fail(f"'{op.name}' needs thread-block clusters (sm_90 and later), not {v.target.name}")


class ClusterCtaRankOp(NvOp):
    """``%r = cute_nvgpu.arch.cluster_cta_rank``: the CTA's rank in its cluster, an i32
    (``%cluster_ctarank``, PTX ISA "Special Registers")."""

    name = "cute_nvgpu.arch.cluster_cta_rank"
    RESULT = "infer"

    @classmethod
    def infer(cls, operands: Sequence[Any], attrs: dict[str, Any]) -> Any:
        return X.IntegerType(32)

    def verify_ir(self, v: VerifyCtx) -> None:
        _need_cluster(self, v)


class ClusterSyncOp(NvOp):
    """``cute_nvgpu.arch.cluster_sync``: a cluster-wide barrier (``barrier.cluster.arrive``
    with release, ``barrier.cluster.wait`` with acquire; PTX ISA "barrier.cluster")."""

    name = "cute_nvgpu.arch.cluster_sync"

    def verify_ir(self, v: VerifyCtx) -> None:
        _need_cluster(self, v)


class _WarpgroupOp(NvOp):
    def verify_ir(self, v: VerifyCtx) -> None:
        if not v.target.supports("wgmma"):
            _fail(f"'{self.name}' needs WGMMA, which {v.target.name} does not have")


class WarpgroupFenceOp(_WarpgroupOp):
    """``cute_nvgpu.warpgroup.fence``: order register accesses before WGMMA (wgmma.fence)."""

    name = "cute_nvgpu.warpgroup.fence"


class WarpgroupCommitOp(_WarpgroupOp):
    """``cute_nvgpu.warpgroup.commit_group``: close a group of WGMMAs."""

    name = "cute_nvgpu.warpgroup.commit_group"


class WarpgroupWaitOp(_WarpgroupOp):
    """``cute_nvgpu.warpgroup.wait {pending = 0}``: wait until at most N groups are pending."""

    name = "cute_nvgpu.warpgroup.wait"
    ATTRS: ClassVar[dict[str, Any]] = {"pending": "int"}
    REQUIRED = ("pending",)

    def verify_ir(self, v: VerifyCtx) -> None:
        super().verify_ir(v)
        if not 0 <= self.attr("pending") <= 7:
            _fail(f"wgmma.wait_group takes 0..7, got {self.attr('pending')}")


CUTE_OPS = X.irdl_ops(StaticOp, AllocSmemOp, AllocRmemOp, AllocTmemOp, RetileOp, MakeViewOp,
                      MakeCoordOp)
NV_TILEAS_OPS = X.irdl_ops(MakeTiledTmaDescOp)
CUTE_NVGPU_OPS = X.irdl_ops(
    MakeAtomOp, MakeSmemDescOp, MmaOp, MakeTiledMmaOp, TiledGemmOp, CopyFragmentOp, CopyOp,
    NonExecTmaLoadOp, NonExecTmaStoreOp, NonExecTmaReduceOp, MakeExecTmaOp, TmaLoadOp,
    TmaStoreOp, TmaReduceOp, UpdateTmaDescOp, PrefetchTmaDescOp, MbarrierInitOp, MbarrierWaitOp,
    SyncThreadsOp, ClusterCtaRankOp, ClusterSyncOp, UmmaCommitOp, TmemShiftOp, CpAsyncCommitOp,
    CpAsyncWaitOp,
    WarpgroupFenceOp, WarpgroupCommitOp, WarpgroupWaitOp)
ALL_OPS = [*CUTE_OPS, *NV_TILEAS_OPS, *CUTE_NVGPU_OPS]

DIALECTS = [
    ("cute", CUTE_OPS, TY.CUTE_TYPES),
    ("nv_tileas", NV_TILEAS_OPS, []),
    ("cute_nvgpu", CUTE_NVGPU_OPS, [*TY.CUTE_NVGPU_TYPES, *TY.CUTE_NVGPU_ATTRS]),
]


def is_nv_op(op: Any) -> bool:
    return isinstance(op, NvOp)

