"""The one module of nvatom that imports xDSL (pinned: xdsl==0.74.0).

xDSL changes its API between releases, so everything nvatom needs from it goes through the
few names and helpers here; an upgrade touches this file only.  What it provides:

* :class:`TextType` / :class:`TextAttr` and :func:`define_text_type` / :func:`define_text_attr`:
  dialect types and attributes whose parameters are one text body ``<...>`` that a decoder
  from the atom layer checks and canonicalises (the ``cute_nvgpu`` types are generated from
  the atom tables this way);
* :class:`CustomOp`: an operation with one variadic operand list, at most one result and a
  custom syntax described by its subclass (parse/print hooks below);
* :func:`parse_text`: parse a module, recording the source offset of every operation (MLIR's
  op location: the start of its result list), and turning every xDSL parse failure into an
  :class:`XdslParseFailure` with an offset and message;
* :func:`print_ops`: the custom-syntax text of top-level operations;
* the builtin/func/arith/scf operation classes the lowering understands.

Source: xDSL 0.74.0 (``xdsl.parser``, ``xdsl.irdl``, ``xdsl.printer``).
"""

from __future__ import annotations

import inspect
import io
import re
from collections.abc import Callable, Iterable, Sequence
from typing import Any, ClassVar

from xdsl.context import Context
from xdsl.dialects import arith, func, scf
from xdsl.dialects.builtin import (
    ArrayAttr,
    Builtin,
    DenseArrayBase,
    DictionaryAttr,
    IndexType,
    IntegerAttr,
    IntegerType,
    ModuleOp,
    StringAttr,
    i1,
    i64,
)
from xdsl.ir import (
    Attribute,
    Dialect,
    Operation,
    OpResult,
    ParametrizedAttribute,
    SSAValue,
    TypeAttribute,
)
from xdsl.irdl import (
    IRDLOperation,
    irdl_attr_definition,
    irdl_op_definition,
    var_operand_def,
    var_result_def,
)
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.utils.exceptions import ParseError, VerifyException

from nvatom.errors import NvatomError

__all__ = [
    "AddiOp",
    "Attribute",
    "BlockArgument",
    "ConstantOp",
    "CustomOp",
    "Dialect",
    "ForOp",
    "FuncOp",
    "IndexType",
    "IntegerAttr",
    "IntegerType",
    "ModuleOp",
    "MuliOp",
    "OpParser",
    "OpPrinter",
    "Operation",
    "ReturnOp",
    "SSAValue",
    "StringAttr",
    "TextAttr",
    "TextType",
    "XdslParseFailure",
    "YieldOp",
    "attr_value",
    "define_text_attr",
    "define_text_type",
    "make_context",
    "parse_text",
    "print_ops",
    "structural_verify",
]

FuncOp = func.FuncOp
ReturnOp = func.ReturnOp
ConstantOp = arith.ConstantOp
AddiOp = arith.AddiOp
MuliOp = arith.MuliOp
ForOp = scf.ForOp
YieldOp = scf.YieldOp
OpParser = Parser
OpPrinter = Printer

from xdsl.ir import BlockArgument  # noqa: E402  (re-exported)


class XdslParseFailure(Exception):
    """A parse failure at a source offset (an internal carrier; see nvatom.ir.driver).

    ``cause`` is set when the failure is an unexpected exception (a bug in nvatom or xDSL)
    raised while the operation that starts at ``offset`` was being parsed."""

    def __init__(self, offset: int, message: str, cause: BaseException | None = None,
                 op: str | None = None) -> None:
        super().__init__(message)
        self.offset = offset
        self.message = message
        self.cause = cause
        #: the name of the operation being parsed, when known
        self.op = op


# --------------------------------------------------------------------------- text bodies
class _TextBody:
    """Shared machinery of text-bodied types and attributes."""

    #: body text -> canonical body text; raises an error with a message on bad input
    DECODE: ClassVar[Callable[[str], str]]
    #: the canonical body the spelling without <...> stands for (None: not allowed)
    BARE: ClassVar[str | None] = None

    @classmethod
    def parse_parameters(cls, parser: Any) -> Sequence[Attribute]:
        if parser._current_token.text != "<":
            if cls.BARE is None:
                parser.raise_error(f"'{cls.name}' expects parameters in '<...>'")
            return (StringAttr(cls.BARE),)
        start = parser.pos + 1
        body = parser._parse_dialect_symbol_body()
        try:
            canonical = cls.DECODE(body)  # type: ignore[attr-defined]
        except (NvatomError, ValueError, KeyError, TypeError) as e:  # decoder's message
            parser.raise_error(f"invalid '{cls.name}' parameters <{body.strip()}>: {e}",
                               at_position=start)
        return (StringAttr(canonical),)

    def print_parameters(self, printer: Printer) -> None:
        body = self.body.data  # type: ignore[attr-defined]
        if body == self.BARE and self.BARE is not None:
            return
        printer.print_string(f"<{body}>")

    @property
    def text(self) -> str:
        return self.body.data  # type: ignore[attr-defined]


class TextType(_TextBody, ParametrizedAttribute, TypeAttribute):
    """A type with a text body (subclassed by :func:`define_text_type`)."""

    name = "nvatom.text_type"
    body: StringAttr


class TextAttr(_TextBody, ParametrizedAttribute):
    """An attribute with a text body (subclassed by :func:`define_text_attr`)."""

    name = "nvatom.text_attr"
    body: StringAttr


def _define(base: type, name: str, decode: Callable[[str], str], bare: str | None,
            extra: dict[str, Any] | None) -> type:
    cls_name = "".join(p.capitalize() for p in name.replace("<", ".").split(".")) + "Type"
    ns = {"name": name, "DECODE": staticmethod(decode), "BARE": bare, **(extra or {}),
          "__annotations__": {"DECODE": ClassVar[Callable[[str], str]],
                              "BARE": ClassVar[str | None]}}
    return irdl_attr_definition(type(cls_name, (base,), ns))


def define_text_type(name: str, decode: Callable[[str], str], *, bare: str | None = None,
                     extra: dict[str, Any] | None = None) -> type:
    """A new type class ``!name<body>``; ``decode`` checks a body and returns it canonical;
    ``bare``: the canonical body the spelling without ``<...>`` stands for."""
    return _define(TextType, name, decode, bare, extra)


def define_text_attr(name: str, decode: Callable[[str], str], *, bare: str | None = None,
                     extra: dict[str, Any] | None = None) -> type:
    """A new attribute class ``#name<body>``."""
    return _define(TextAttr, name, decode, bare, extra)


def make_type(cls: type, body: str) -> Attribute:
    return cls(StringAttr(body))


# --------------------------------------------------------------------------- operations
class CustomOp(IRDLOperation):
    """Base of the nvatom operations: operands, optional result, attributes.

    Subclasses set ``name`` and implement ``parse_custom(parser)`` returning
    ``(operands, result_type or None, attributes)`` and ``print_custom(printer)``.
    """

    name = "nvatom.custom"
    args = var_operand_def()
    res = var_result_def()

    @classmethod
    def parse(cls, parser: Parser) -> CustomOp:
        operands, rtype, attrs = cls.parse_custom(parser)
        op = cls.build(operands=[list(operands)], result_types=[[rtype] if rtype else []])
        op.attributes.update(attrs)
        return op

    @classmethod
    def parse_custom(cls, parser: Parser) -> tuple[list[SSAValue], Attribute | None,
                                                  dict[str, Attribute]]:
        raise NotImplementedError

    def print(self, printer: Printer) -> None:
        self.print_custom(printer)

    def print_custom(self, printer: Printer) -> None:
        raise NotImplementedError

    @property
    def result(self) -> SSAValue | None:
        return self.results[0] if self.results else None


def define_op(name: str, base: type, ns: dict[str, Any]) -> type:
    cls_name = "".join(p.capitalize() for p in name.replace("_", ".").split(".")) + "Op"
    return irdl_op_definition(type(cls_name, (base,), {"name": name, **ns}))


# -- parse helpers for the custom syntax
def parse_operand_list(parser: Parser) -> list[SSAValue]:
    """``%a, %b, ...`` (possibly empty): values already defined (their types are known, so
    our syntax never repeats them; a use before the definition is a parse error).  A value
    that starts a line is the next statement's result, not an operand: an operation without
    operands (``cute_nvgpu.arch.sync_threads``) followed by ``%x = ...`` has none."""
    tok = parser._current_token
    text = tok.span.input.content
    line_start = text.rfind("\n", 0, tok.span.start) + 1
    if not text[line_start:tok.span.start].strip():
        return []
    first = parser._parse_optional_operand_without_type()
    if first is None:
        return []
    out = [first]
    while parser.parse_optional_punctuation(",") is not None:
        out.append(parser.expect(parser._parse_optional_operand_without_type,
                                 "Expected an operand."))
    return out


def parse_paren_operands(parser: Parser, keyword: str) -> list[SSAValue]:
    """``keyword(%a, %b)``."""
    parser.parse_keyword(keyword)
    parser.parse_punctuation("(")
    vals = parse_operand_list(parser)
    parser.parse_punctuation(")")
    return vals


def parse_attr_dict(parser: Parser) -> dict[str, Attribute]:
    return dict(parser.parse_optional_attr_dict())


def parse_optional_colon_type(parser: Parser) -> Attribute | None:
    if parser.parse_optional_punctuation(":") is None:
        return None
    return parser.parse_type()


def parse_colon_type(parser: Parser) -> Attribute:
    parser.parse_punctuation(":")
    return parser.parse_type()


def raise_at(parser: Parser, message: str, offset: int | None = None) -> None:
    parser.raise_error(message, at_position=offset)


def attr_value(a: Attribute) -> Any:
    """A Python value of a simple attribute: int, bool, str; else the attribute itself."""
    if isinstance(a, IntegerAttr):
        v = a.value.data
        if a.type == i1:
            return bool(v)
        return v
    if isinstance(a, StringAttr):
        return a.data
    return a


def _print_attr_value(printer: Printer, a: Attribute) -> None:
    if isinstance(a, IntegerAttr) and a.type == i1:
        printer.print_string("true" if a.value.data else "false")
    elif isinstance(a, IntegerAttr) and a.type == i64:
        printer.print_string(str(a.value.data))
    else:
        printer.print_attribute(a)


def print_attr_dict(printer: Printer, attrs: dict[str, Attribute],
                    skip: Iterable[str] = ()) -> None:
    items = [(k, v) for k, v in attrs.items() if k not in set(skip)]
    if not items:
        return
    printer.print_string(" {")
    for i, (k, v) in enumerate(items):
        if i:
            printer.print_string(", ")
        printer.print_string(f"{k} = ")
        _print_attr_value(printer, v)
    printer.print_string("}")


def print_operands(printer: Printer, vals: Sequence[SSAValue]) -> None:
    for i, v in enumerate(vals):
        printer.print_string(", " if i else "")
        printer.print_operand(v)


# --------------------------------------------------------------------------- context, parse
def make_context(dialects: Iterable[tuple[str, list[type], list[type]]]) -> Context:
    ctx = Context()
    for d in (Builtin, func.Func, arith.Arith, scf.Scf):
        ctx.load_dialect(d)
    for name, ops, attrs in dialects:
        ctx.load_dialect(Dialect(name, ops, attrs))
    return ctx


class _LocatingParser(Parser):
    """Records the source offset of every operation it parses."""

    def __init__(self, ctx: Context, text: str, name: str) -> None:
        super().__init__(ctx, text, name)
        self.locations: dict[Operation, int] = {}

    def parse_operation(self) -> Operation:
        pos = self.pos
        try:
            op = super().parse_operation()
        except (ParseError, XdslParseFailure, RecursionError):
            raise
        except VerifyException as e:  # xDSL checks some operations as it builds them
            raise XdslParseFailure(pos, _first_line(e, "operation does not verify"),
                                   op=self._op_name(pos)) from None
        except NvatomError as e:  # a decoder's error that escaped a type parser
            raise XdslParseFailure(pos, _first_line(e, type(e).__name__),
                                   op=self._op_name(pos)) from None
        except NotImplementedError as e:  # xDSL's way to refuse a form (array<i256: ...>)
            raise XdslParseFailure(pos, f"unsupported input: {_first_line(e, 'not implemented')}",
                                   op=self._op_name(pos)) from None
        except Exception as e:  # a bug: located at the operation being parsed
            raise XdslParseFailure(pos, f"{type(e).__name__}: {e}", cause=e,
                                   op=self._op_name(pos)) from None
        if isinstance(op, CustomOp) and self._generic(pos):
            raise XdslParseFailure(pos, f"'{op.name}' takes its own syntax only: the generic "
                                        "form \"name\"(...) would skip its checks", op=op.name)
        self.locations[op] = pos
        return op

    def _generic(self, pos: int) -> bool:
        m = _OP_NAME.match(self.lexer.input.content, pos)
        return m is not None and self.lexer.input.content[m.start(1) - 1] == '"'

    def _op_name(self, pos: int) -> str | None:
        m = _OP_NAME.match(self.lexer.input.content, pos)
        return m.group(1) if m else None


#: the name of the operation that starts at an offset, after its result list
_OP_NAME = re.compile(r'(?:%[\w$.-]+(?::\d+)?(?:\s*,\s*%[\w$.-]+(?::\d+)?)*\s*=\s*)?"?'
                      r"([A-Za-z_][\w$]*(?:\.[\w$]+)+)")


def _first_line(e: BaseException, default: str) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else default


_HEX = set("0123456789abcdefABCDEF")
#: longest decimal literal accepted: i128 needs 39 digits; Python refuses to convert
#: more than 4300 and the lexer would try
MAX_DECIMAL_DIGITS = 40
#: longest hexadecimal literal accepted (i128: 32 digits)
MAX_HEX_DIGITS = 32
#: widest integer type (MLIR's IntegerType::kMaxWidth); xDSL would compute 2^width
MAX_INT_WIDTH = (1 << 24) - 1
#: deepest nesting of {}, () and [] (regions, operand lists, arrays); Python's recursion
#: limit stops xDSL's parser at about 140 nested regions
MAX_NESTING = 64
_INT_TYPE = re.compile(r"(?:si|ui|i)(\d+)")


def _check_string_literals(text: str) -> None:
    """Reject malformed string literals before xDSL's lexer sees them.

    xDSL 0.74 lexes a string with the regex ``"(?:[^"\\\n\v\f]+|\\(...))*"``, whose nested
    quantifier backtracks exponentially on a literal that is not closed on its line or holds
    an unknown escape: a few dozen characters make parsing hang (found by the fuzz test).
    This linear scan accepts exactly the literals that regex accepts and fails fast on the
    others, at the offending offset.  It also rejects decimal literals longer than
    :data:`MAX_DECIMAL_DIGITS` digits outside strings and comments, naming the limit.
    """
    i, n = 0, len(text)
    depth = 0
    while i < n:
        c = text[i]
        if c == "/" and text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j + 1
            continue
        if c.isalpha() or c in "_$%@#^!":  # a name or keyword: its digits are no literal
            j = i + 1  # the bare-id part, as xDSL's lexer ends it: ASCII only, no '-'
            while j < n and ((text[j].isascii() and text[j].isalnum()) or text[j] in "_$."):
                j += 1
            m = _INT_TYPE.fullmatch(text, i, j)  # so `i16000000000-1` and `i16000000000é` too
            if m and (len(m.group(1)) > 8 or int(m.group(1)) > MAX_INT_WIDTH):
                raise XdslParseFailure(i, f"integer type {text[i:j][:40]} is too wide (the "
                                          f"limit is {MAX_INT_WIDTH} bits, as in MLIR)")
            while j < n and (text[j].isalnum() or text[j] in "_$.-"):
                j += 1
            i = j
            continue
        if "0" <= c <= "9":
            j = i
            if text.startswith(("0x", "0X"), i):
                j = i + 2
                while j < n and text[j] in _HEX:
                    j += 1
                if j - i - 2 > MAX_HEX_DIGITS:
                    raise XdslParseFailure(i, f"hexadecimal literal of {j - i - 2} digits is "
                                              f"too long (the limit is {MAX_HEX_DIGITS} digits)")
            while j < n and "0" <= text[j] <= "9":
                j += 1
            if j - i > MAX_DECIMAL_DIGITS:
                raise XdslParseFailure(i, f"integer literal of {j - i} digits is too long (the "
                                          f"limit is {MAX_DECIMAL_DIGITS} digits)")
            i = j
            continue
        if c in "{([":
            depth += 1
            if depth > MAX_NESTING:
                raise XdslParseFailure(i, f"brackets nest deeper than {MAX_NESTING} levels "
                                          "(the limit)")
        elif c in "})]":
            depth = max(depth - 1, 0)
        if c != '"':
            i += 1
            continue
        start, i = i, i + 1
        while True:
            if i >= n or text[i] in "\n\v\f":
                raise XdslParseFailure(start, "string literal is not closed on its line")
            c = text[i]
            if c == '"':
                i += 1
                break
            if c == "\\":
                nxt = text[i + 1:i + 3]
                if nxt[:1] in ('"', "n", "t", "\\") and nxt[:1]:
                    i += 2
                elif len(nxt) == 2 and set(nxt) <= _HEX:
                    i += 3
                else:
                    raise XdslParseFailure(i, "unknown escape sequence in string literal")
                continue
            i += 1


def parse_text(ctx: Context, text: str, name: str) -> tuple[ModuleOp, dict[Operation, int]]:
    """Parse a module; raise :class:`XdslParseFailure` on any parse error."""
    _check_string_literals(text)
    try:
        p = _LocatingParser(ctx, text, name)  # lexes the first token: may fail already
    except ParseError as e:
        raise XdslParseFailure(int(e.span.start), e.msg) from None
    try:
        module = p.parse_module()
    except ParseError as e:
        raise XdslParseFailure(int(e.span.start), _parse_message(text, e)) from None
    except RecursionError:
        raise XdslParseFailure(p.pos, "input nests too deeply for the parser (Python's "
                                      "recursion limit)") from None
    except VerifyException as e:  # raised outside any operation (the implicit module)
        raise XdslParseFailure(p.pos, _first_line(e, "module does not verify")) from None
    return module, p.locations


def _parse_message(text: str, e: ParseError) -> str:
    """xDSL's message; some of its messages are a bare suffix (" in block definition") that
    expects the token in front: give it."""
    msg = e.msg
    if msg.startswith(" "):
        start, end = int(e.span.start), int(e.span.end)
        tok = text[start:end].strip()
        msg = f"unexpected {repr(tok[:40]) if tok else 'end of file'}{msg}"
    return msg


def use_before_definition(module: ModuleOp) -> tuple[Operation, str] | None:
    """The first operation that uses a value defined after it (or never: xDSL leaves a
    forward reference that a nested region defines unresolved), with the value's name."""
    seen: set[Operation] = set()
    for op in module.walk():
        for v in op.operands:
            if isinstance(v, BlockArgument):
                continue
            owner = v.op if isinstance(v, OpResult) else None
            if owner is None or owner not in seen:
                return op, f"%{v.name_hint}" if v.name_hint else "a value"
        seen.add(op)
    return None


def structural_verify(module: ModuleOp) -> tuple[Operation, str, bool] | None:
    """xDSL's own structural checks (terminators, types of builtin ops).

    None when they pass; else ``(op, message, internal)``: the first operation that fails
    them (the module when the failure is a block's or region's own), the message, and
    whether it was an unexpected exception rather than a verification failure."""
    try:
        module.verify()
        return None
    except VerifyException as e:
        whole = (module, _first_line(e, "verification failed"), False)
    except Exception as e:  # a bug in xDSL or in one of our verify_ hooks
        whole = (module, f"{type(e).__name__}: {e}", True)
    for op in module.walk():  # find the operation: each one without its nested operations
        try:
            op.verify(verify_nested_ops=False)
        except VerifyException as e:
            return op, _first_line(e, "verification failed"), False
        except Exception as e:
            return op, f"{type(e).__name__}: {e}", True
    return whole


def print_ops(ops: Iterable[Operation]) -> str:
    out = io.StringIO()
    printer = Printer(stream=out)
    for op in ops:
        printer.print_op(op)
        out.write("\n")
    return out.getvalue()


def enclosing_func(op: Operation) -> Operation | None:
    """The ``func.func`` (kernel) an operation sits in, however deeply nested; None outside."""
    fn = op.parent_op()
    while fn is not None and fn.name != "func.func":
        fn = fn.parent_op()
    return fn


def kernel_cluster(op: Operation) -> tuple[Attribute | None, list[int] | None]:
    """The ``cluster`` attribute of the operation's kernel and its integers (None, None
    without one; the attribute and None when it is no integer list)."""
    fn = enclosing_func(op)
    attr = None if fn is None else fn.attributes.get("cluster")
    return attr, (None if attr is None else int_list(attr))


def module_attr(module: ModuleOp, key: str) -> Any:
    a = module.attributes.get(key)
    return None if a is None else attr_value(a)


def block_args(op: Operation) -> list[SSAValue]:
    return list(op.regions[0].blocks[0].args) if op.regions and op.regions[0].blocks else []


def index_type() -> Attribute:
    return IndexType()


def dict_attr(d: dict[str, Attribute]) -> DictionaryAttr:
    return DictionaryAttr(d)


def print_attr(a: Attribute) -> str:
    out = io.StringIO()
    Printer(stream=out).print_attribute(a)
    return out.getvalue()


def int_list(a: Attribute) -> list[int] | None:
    """The integers of an ``[1, 2, 3]`` array attribute (or ``array<i32: 1, 2, 3>``), else
    None."""
    if isinstance(a, DenseArrayBase):
        try:
            vals = a.get_values()
        except (NotImplementedError, ValueError):  # xDSL unpacks i8/i16/i32/i64 arrays only
            return None
        return [int(v) for v in vals] if all(isinstance(v, int) for v in vals) else None
    if isinstance(a, ArrayAttr) and all(isinstance(x, IntegerAttr) for x in a.data):
        return [int(x.value.data) for x in a.data]  # type: ignore[attr-defined]
    return None


def is_integer_like(t: Attribute) -> bool:
    return isinstance(t, (IntegerType, IndexType))


def irdl_ops(*classes: type) -> list[type]:
    """Register operation classes (subclasses of :class:`CustomOp`) with IRDL."""
    out = []
    for c in classes:
        # xDSL wants class constants (upper-case names) annotated as ClassVar
        for base in c.__mro__:
            if not base.__module__.startswith("nvatom"):
                continue
            ann = dict(inspect.get_annotations(base))
            for k in list(base.__dict__):
                if k.isupper() and k not in ann:
                    ann[k] = ClassVar[Any]
            base.__annotations__ = ann
        out.append(irdl_op_definition(c))
    return out
