"""The operations of the ``cute``, ``nv_tileas`` and ``cute_nvgpu`` dialects, and their verifiers.

Each operation has a readable custom syntax: operands by name, an attribute dictionary, and a
result type only where it cannot be inferred::

    %atom = cute_nvgpu.make_atom : !cute_nvgpu.sm80.mma<m16n8k16.f32.bf16.bf16.f32>
    cute_nvgpu.atom.mma %atom, %d, %a, %b, %c
    %exec = cute_nvgpu.atom.make_exec_tma %atom, %mbar
        {cache_mode = #cute_nvgpu.load_cache_mode<cg>}

Verification calls the atom layer: an MMA application builds the use the atom's
``verify_instance`` checks (seed 000's common atom contract, seed 004's ladders), the non-exec
TMA atoms run seed 001's eleven-step partition verifier, and a WGMMA descriptor view is
checked against its layout when the type is parsed.  Diagnostics carry the atom layer's text
unchanged; checks that are the IR's own (operand kinds, counts) are our wording.

Source: seeds 000, 001 and 004 (the IR forms and the worked TMA example of seed 001).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from nvatom.arch import Target
from nvatom.atoms import tma as T
from nvatom.atoms.verify import MmaUse, OperandUse
from nvatom.errors import NvatomError
from nvatom.ir import types as TY
from nvatom.ir import xdsl_adapter as X
from nvatom.ir.syntax import IRSyntaxError
from nvatom.layout import ComposedLayout, Layout, layouts_equivalent

__all__ = ["ALL_OPS", "DIALECTS", "IRVerifyError", "NvOp", "VerifyCtx", "is_nv_op"]


class IRVerifyError(NvatomError):
    """An operation that breaks a rule of the IR (the message is the diagnostic)."""


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
    !cute_nvgpu.tma_descriptor_tiled`` (seed 001's worked example).

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
            return  # the partition verifier reports the layout (seed 001, steps 1-3)
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
            from nvatom.atoms.registry import atom_record

            rec = atom_record(atom.mnemonic)
            if not rec.allowed_on(v.target):
                _fail(f"atom '{atom.name}' needs tier {rec.min_tier.label if rec.min_tier else ''}"
                      f", but target {v.target.name} is tier {v.target.tier.label}")
            _fail(f"atom '{atom.name}' is not available on {v.target.name}")


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
        from nvatom.atoms.interfaces import BlockScaleAtom, TmemAtom
        from nvatom.atoms.sm90 import WgmmaForm

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
        descriptor views or TMEM memrefs, D in TMEM; seed 004's UMMA ladder."""
        from nvatom.atoms.sm100 import UmmaUse

        _, d, a, b, c = self.operands[:5]
        uses = [_umma_use(x.type, n) for x, n in ((a, "A"), (b, "B"), (c, "C"), (d, "D"))]
        n_sf = 2 if atom.block_scaled else 0
        if len(extra) != n_sf + (1 if atom.sparse else 0):
            want = (["%sfa, %sfb"] if n_sf else []) + (["%e"] if atom.sparse else [])
            _fail(f"atom '{atom.name}' takes %atom, %d, %a, %b, %c"
                  + "".join(f", {w}" for w in want))
        sf = [_umma_use(x.type, n) for x, n in zip(extra[:n_sf], ("SFA", "SFB"), strict=False)]
        meta = _umma_use(extra[-1].type, "E") if atom.sparse else None
        if self.attr("selector") is not None or self.attr("accumulate") is not None:
            _fail(f"atom '{atom.name}' takes no selector or accumulate attribute")
        atom.verify_instance(v.target, UmmaUse(uses[0], uses[1], uses[2], uses[3],
                                               *(sf or [None, None]), meta))

    def _verify_block_scaled(self, atom: Any, uses: list[OperandUse], extra: list[Any],
                             v: VerifyCtx) -> None:
        """SM120.mma_bs: ``%atom, %d, %a, %b, %c, %sfa, %sfb [, %e]``."""
        from nvatom.atoms.sm120 import MmaBsUse

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
        import dataclasses

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
            from nvatom.atoms.wgmma_fragments import wgmma_tv_layout

            want = wgmma_tv_layout(atom, "D")
            if not isinstance(m.layout, Layout) or not layouts_equivalent(m.layout, want):
                from nvatom import diagnostics as D

                _fail(f"{D.MMA_ATOM_LAYOUT}{want} for operand D, but got {m.layout}")
        v.facts[self] = k_blocks


def _size(x: Any) -> int:
    if isinstance(x, tuple):
        n = 1
        for e in x:
            n *= _size(e)
        return n
    return int(x)


class CopyFragmentOp(NvOp):
    """``cute_nvgpu.atom.copy_fragment %atom, %src, %dst {operand = "A"}``: each lane moves
    its fragment of one MMA operand between a tile (gmem/smem view) and registers."""

    name = "cute_nvgpu.atom.copy_fragment"
    OPERANDS = 3
    ATTRS: ClassVar[dict[str, Any]] = {"operand": "str"}
    REQUIRED = ("operand",)

    def verify_ir(self, v: VerifyCtx) -> None:
        from nvatom.ir.lower import operand_dtype, operand_tv

        atom = _atom_operand(self, "mma")
        op = self.attr("operand")
        if not hasattr(atom, "register_type"):
            _fail(f"copy_fragment supports register and warpgroup MMA atoms, not '{atom.name}'")
        if op not in ("A", "B", "C", "D"):
            _fail(f"operand must be A, B, C or D, got '{op}'")
        src, dst = (TY.memref_of(x.type) for x in self.operands[1:])
        if src is None or dst is None:
            _fail("copy_fragment copies between !cute.memref values")
        assert src is not None and dst is not None
        tile, frag = (src, dst) if dst.space == "rmem" else (dst, src)
        if frag.space != "rmem" or tile.space not in ("gmem", "smem"):
            _fail(f"copy_fragment moves a tile (gmem/smem) to or from registers, got "
                  f"{src.space} -> {dst.space}")
        want = operand_dtype(atom, op)
        for m in (tile, frag):
            if m.element != want:
                _fail(f"expects operand {op.lower()} with element type {want.name}, but get "
                      f"{m.element.name}.")
        tv = operand_tv(atom, op)
        if frag.layout is not None and not (isinstance(frag.layout, Layout) and
                                            layouts_equivalent(frag.layout, tv)):
            from nvatom import diagnostics as D

            _fail(f"{D.MMA_ATOM_LAYOUT}{tv} for operand {op}, but got {frag.layout}")
        if not isinstance(tile.layout, Layout):
            _fail(f"copy_fragment needs a static tile layout, got {tile.layout}")
        from nvatom.ir.lower import fragment_access

        v.facts[self] = fragment_access(atom, op, tile.layout)


class CopyOp(NvOp):
    """``cute_nvgpu.atom.copy %atom, %src, %dst``: apply a copy atom (verified by the atom)."""

    name = "cute_nvgpu.atom.copy"
    OPERANDS = 3

    def verify_ir(self, v: VerifyCtx) -> None:
        from nvatom.atoms.copy import CopyUse

        atom = _atom_operand(self, "copy")
        src, dst = (_operand_use(x.type, n) for x, n in zip(self.operands[1:], ("src", "dst"),
                                                           strict=True))
        atom.verify_instance(v.target, CopyUse(src, dst))


# -- TMA (seed 001)
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

    def verify_ir(self, v: VerifyCtx) -> None:
        desc, tile, vmap = self.operands
        if not isinstance(desc.type, (TY.TmaDescTiledT, TY.TmaDescIm2colT)):
            _fail(f"expects a TMA descriptor as operand #0, but got {TY.type_text(desc.type)}")
        desc_op = _defining(desc)
        if not isinstance(desc_op, MakeTiledTmaDescOp):
            _fail("expects the descriptor of an nv_tileas.make_tiled_tma_desc in this function "
                  "(its GMEM layout is the partition's)")
        gmem = desc_op.gmem_layout
        smem = TY.layout_of(tile.type)
        cta = TY.layout_of(vmap.type)
        smem = smem if smem is not None else _TypeRepr(tile.type)
        cta = cta if cta is not None else _TypeRepr(vmap.type)
        result = T.verify_tma_partition(
            self.KIND, self._mode(desc_op), smem, gmem, cta,
            element_bits=desc_op.element_bits, num_multicast=self.attr("num_multicast"))
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
    ATTRS: ClassVar[dict[str, Any]] = {"cache_mode": TY.CacheModeAttrT}

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
            _fail(f"TMA is not available on {v.target.name}")
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


_EXEC_KIND = {TY.EXEC_TMA[k]: k for k in T.TmaKind}


class _TmaApplyOp(NvOp):
    """``cute_nvgpu.atom.tma_<kind> %exec, %smem_tile, %coord {...}``."""

    OPERANDS = 3
    KIND: ClassVar[T.TmaKind]
    ATTRS: ClassVar[dict[str, Any]] = {"allow_tma": "bool", "inBounds": "bool"}

    def verify_ir(self, v: VerifyCtx) -> None:
        ex, tile, coord = self.operands
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
        if str(m.layout) != str(body.smem):
            _fail(f"the tile's layout {m.layout} is not the partitioned SMEM layout {body.smem}")
        if not isinstance(coord.type, TY.CoordTypeT) or int(coord.type.text) != result.rank:
            _fail(f"expects a !cute.coord<{result.rank}> (the descriptor's rank), but got "
                  f"{TY.type_text(coord.type)}")
        v.facts[self] = result


class TmaLoadOp(_TmaApplyOp):
    name = "cute_nvgpu.atom.tma_load"
    KIND = T.TmaKind.LOAD


class TmaStoreOp(_TmaApplyOp):
    name = "cute_nvgpu.atom.tma_store"
    KIND = T.TmaKind.STORE


class TmaReduceOp(_TmaApplyOp):
    name = "cute_nvgpu.atom.tma_reduce"
    KIND = T.TmaKind.REDUCE


class PrefetchTmaDescOp(NvOp):
    """``cute_nvgpu.prefetch_tma_desc %desc``: bring the descriptor into the cache."""

    name = "cute_nvgpu.prefetch_tma_desc"
    OPERANDS = 1

    def verify_ir(self, v: VerifyCtx) -> None:
        t = self.operands[0].type
        if not isinstance(t, (TY.TmaDescTiledT, TY.TmaDescIm2colT)):
            _fail(f"expects a TMA descriptor, but got {TY.type_text(t)}")


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
        if not 1 <= self.attr("count") < 1 << 20:
            _fail(f"an mbarrier's arrival count is 1..{(1 << 20) - 1}, got {self.attr('count')}")


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


CUTE_OPS = X.irdl_ops(StaticOp, AllocSmemOp, AllocRmemOp, MakeViewOp, MakeCoordOp)
NV_TILEAS_OPS = X.irdl_ops(MakeTiledTmaDescOp)
CUTE_NVGPU_OPS = X.irdl_ops(
    MakeAtomOp, MakeSmemDescOp, MmaOp, CopyFragmentOp, CopyOp, NonExecTmaLoadOp,
    NonExecTmaStoreOp, NonExecTmaReduceOp, MakeExecTmaOp, TmaLoadOp, TmaStoreOp, TmaReduceOp,
    PrefetchTmaDescOp, MbarrierInitOp, MbarrierWaitOp, SyncThreadsOp, WarpgroupFenceOp,
    WarpgroupCommitOp, WarpgroupWaitOp)
ALL_OPS = [*CUTE_OPS, *NV_TILEAS_OPS, *CUTE_NVGPU_OPS]

DIALECTS = [
    ("cute", CUTE_OPS, TY.CUTE_TYPES),
    ("nv_tileas", NV_TILEAS_OPS, []),
    ("cute_nvgpu", CUTE_NVGPU_OPS, [*TY.CUTE_NVGPU_TYPES, *TY.CUTE_NVGPU_ATTRS]),
]


def is_nv_op(op: Any) -> bool:
    return isinstance(op, NvOp)

