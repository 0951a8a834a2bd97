"""User epilogues: a Python hook that emits PTX on each f32 accumulator of the SM90 GEMM.

A :class:`UserEpilogue` is a name and a function ``fn(k, x, row, col)`` that writes PTX
through ``k`` to transform the f32 register ``x`` in place.  ``k`` is a
:class:`HookBuilder`, the part of the PTX builder (:class:`nvatom.ptx.builder.Kernel`) that
is safe here: ``k.reg(type)`` makes a register, ``k.ins(opcode, *operands)`` appends an
instruction, ``k.arg(name)`` is the register of a declared f32 scalar parameter,
``k.load(name)`` the f32 value of a declared per-row or per-column tensor at this element,
``k.comment(text)`` a comment.  ``row`` and ``col`` are the element's global row and column
(``.u32`` registers; for the elements past M or N of a ragged edge tile, whose results the
TMA store drops, the last row M - 1 and column N - 1, so a hook indexing a tensor with them
stays inside it); they are computed only when the hook reads them (or loads a tensor that
needs them).  The fused epilogue (:mod:`nvatom.kernels.sm90.fusion`) runs the hook last,
after the activation and the residual::

    out = hook(act(alpha * acc * s + beta * C + bias) + residual)

``fn`` runs once, when the UserEpilogue is made: what it emits is recorded
(:attr:`UserEpilogue.program`), checked, fingerprinted, and replayed for every accumulator
element with fresh registers (so it must emit the same code whatever Python state it sees
later).  The checks (each failure an :class:`EpilogueError` naming the hook and the
instruction):

* the opcode is one of the straight-line ALU forms of :data:`OPS` (f32/f64 and integer
  arithmetic, logic, ``cvt``, ``mov``, ``setp``, ``selp``, ``slct``) with modifiers that
  form takes; branches, labels, guards (``@p``), barriers, shared or any other memory access
  (the hook reads memory through ``k.load`` only) are refused;
* the operand count is the form's; every register operand is one the hook made, ``x``,
  ``row``, ``col`` or a parameter, of a type that the position takes (same size, and the same
  kind unless one side is a bit type ``.bN``; ``u`` and ``s`` mix); immediates are numbers
  (a float becomes an exact ``0f``/``0d`` literal) or PTX integer / float literals;
* the destination is a register the hook made, or ``x`` (which stays ``.f32``: only an
  ``.f32`` or ``.b32`` form writes it); ``row``, ``col``, parameters and loaded values are
  read-only; no register is read before it is written;
* the hook emits at least one instruction, writes ``x``, returns nothing, and stays within
  :data:`MAX_INSTRUCTIONS`; an exception it raises becomes an EpilogueError;
* last, ptxas assembles the recorded program in a small sm_90a kernel of its own
  (:meth:`UserEpilogue._probe`; skipped where no ptxas is found): what the table above lets
  through and ptxas refuses (modifiers in the wrong order, a ``cvt`` form that does not
  exist, ...) is an EpilogueError naming the instruction and ptxas's message.

The kernel's name carries :attr:`UserEpilogue.tag` (the name and a fingerprint of the
recorded program and parameters) and its build-cache key the whole fingerprint, so two hooks
that emit different code never share a kernel.
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
import struct
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from nvatom.errors import NvatomError, PtxasError
from nvatom.ptx.builder import Kernel, Module, Reg
from nvatom.runtime import ptxas

__all__ = [
    "MAX_INSTRUCTIONS",
    "OPS",
    "TENSOR_DTYPES",
    "TENSOR_KINDS",
    "EpilogueError",
    "HookBuilder",
    "UserEpilogue",
]


class EpilogueError(NvatomError, ValueError):
    """An epilogue description the SM90 GEMM cannot fuse."""


#: How a hook's tensor parameter is indexed: ``"row"`` one value per output row (M),
#: ``"col"`` one per output column (N).
TENSOR_KINDS = ("row", "col")
#: Element types of a hook's tensors (read as f32).
TENSOR_DTYPES = ("bf16", "f16", "f32")
#: The most instructions a hook may emit (it is replayed for every accumulator element).
MAX_INSTRUCTIONS = 128

_SIZE = {"pred": 1, "b16": 16, "u16": 16, "s16": 16, "f16": 16, "bf16": 16,
         "b32": 32, "u32": 32, "s32": 32, "f32": 32, "f16x2": 32, "bf16x2": 32,
         "b64": 64, "u64": 64, "s64": 64, "f64": 64}
#: Register types a hook may make (the builder's).
REG_TYPES = tuple(_SIZE)
_FLOATS = ("f32", "f64")
_INTS = ("u16", "s16", "u32", "s32", "u64", "s64")
_SIGNED = ("s16", "s32", "s64")
_BITS = ("b16", "b32", "b64")
_ROUND = frozenset({"rn", "rz", "rm", "rp"})
_IROUND = frozenset({"rni", "rzi", "rmi", "rpi"})
_CMP = frozenset({"eq", "ne", "lt", "le", "gt", "ge", "lo", "ls", "hi", "hs", "equ", "neu",
                  "ltu", "leu", "gtu", "geu", "num", "nan"})
_WIDE = {"u16": "u32", "s16": "s32", "u32": "u64", "s32": "s64"}


@dataclasses.dataclass(frozen=True)
class OpForm:
    """One opcode a hook may use: its operand ``shape`` (``bin`` d = a op b, ``un`` d = op a,
    ``tern`` d = a * b + c, ``shift`` d = a << u32, ``cvt``, ``setp``, ``selp``, ``slct``),
    the types it takes, the modifiers allowed with a float and with an integer type, and the
    modifiers of which a float form needs one (``fma.f32`` needs a rounding, ``ex2`` .approx)."""

    shape: str
    types: tuple[str, ...]
    float_mods: frozenset[str] = frozenset()
    int_mods: frozenset[str] = frozenset()
    float_needs: frozenset[str] = frozenset()
    int_needs: frozenset[str] = frozenset()


def _f(shape: str, mods: set[str] | frozenset[str] = frozenset(),
       needs: set[str] | frozenset[str] = frozenset()) -> OpForm:
    return OpForm(shape, _FLOATS, frozenset(mods), frozenset(), frozenset(needs))


def _f32(shape: str, mods: set[str], needs: set[str]) -> OpForm:
    return OpForm(shape, ("f32",), frozenset(mods), frozenset(), frozenset(needs))


#: Comparisons by the kind of the compared type (PTX ISA "setp"): bit types eq/ne only,
#: unsigned types also lo/ls/hi/hs, floats the unordered forms and num/nan.
_CMP_OF = {"b": frozenset({"eq", "ne"}), "s": frozenset({"eq", "ne", "lt", "le", "gt", "ge"}),
           "u": frozenset({"eq", "ne", "lt", "le", "gt", "ge", "lo", "ls", "hi", "hs"}),
           "f": frozenset({"eq", "ne", "lt", "le", "gt", "ge", "equ", "neu", "ltu", "leu",
                           "gtu", "geu", "num", "nan"})}
#: Modifiers only an .f32 form takes (not .f64), and .sat of an integer only .s32 takes.
_F32_ONLY = frozenset({"ftz", "sat", "NaN", "approx", "full"})


def _type_rule(base: str, types: list[str], mods: frozenset[str]) -> str | None:
    """What the modifiers ``mods`` of ``base`` break for its ``types`` beyond the table, or
    None: one rounding at most; .ftz/.sat/.NaN/.approx/.full on .f32 only (of the floats),
    .sat of an integer on .s32 only; a comparison of the compared type's kind; .ftz of slct
    with an .f32 selector only."""
    t = types[0]
    if len(mods & (_ROUND | _IROUND)) > 1:
        return "takes one rounding modifier"
    if base not in ("cvt", "setp", "slct") and t == "f64" and mods & _F32_ONLY:
        return f"with .f64 does not take .{sorted(mods & _F32_ONLY)[0]}"
    if base not in ("cvt",) and _kind(t) in "su" and "sat" in mods and t != "s32":
        return f"takes .sat with .s32 only, not .{t}"
    if base == "setp":
        cmp = mods & _CMP
        kind = _kind(t)
        if cmp - _CMP_OF[kind] or ("ftz" in mods and t != "f32"):
            return f"with .{t} does not take .{sorted((cmp - _CMP_OF[kind]) or {'ftz'})[0]}"
    if base == "slct" and "ftz" in mods and types[1] != "f32":
        return "takes .ftz with an .f32 selector only"
    return None


_ARITH = {"ftz", "sat"} | _ROUND
#: The opcodes a hook may use (the first word of the opcode; see :class:`OpForm`).
OPS: dict[str, OpForm] = {
    "add": OpForm("bin", _FLOATS + _INTS, frozenset(_ARITH), frozenset({"sat"})),
    "sub": OpForm("bin", _FLOATS + _INTS, frozenset(_ARITH), frozenset({"sat"})),
    "mul": OpForm("bin", _FLOATS + _INTS, frozenset(_ARITH), frozenset({"lo", "hi", "wide"}),
                  int_needs=frozenset({"lo", "hi", "wide"})),
    "mad": OpForm("tern", _FLOATS + _INTS, frozenset(_ARITH), frozenset({"lo", "hi", "wide"}),
                  _ROUND, frozenset({"lo", "hi", "wide"})),
    "fma": _f("tern", _ARITH, _ROUND),
    "div": OpForm("bin", _FLOATS + _INTS, frozenset({"approx", "full", "ftz"} | _ROUND),
                  float_needs=frozenset({"approx", "full"} | _ROUND)),
    "rem": OpForm("bin", _INTS),
    "min": OpForm("bin", _FLOATS + _INTS, frozenset({"ftz", "NaN"})),
    "max": OpForm("bin", _FLOATS + _INTS, frozenset({"ftz", "NaN"})),
    "abs": OpForm("un", _FLOATS + _SIGNED, frozenset({"ftz"})),
    "neg": OpForm("un", _FLOATS + _SIGNED, frozenset({"ftz"})),
    "copysign": _f("bin"),
    "rcp": _f("un", {"approx", "ftz"} | _ROUND, {"approx"} | _ROUND),
    "sqrt": _f("un", {"approx", "ftz"} | _ROUND, {"approx"} | _ROUND),
    "rsqrt": _f32("un", {"approx", "ftz"}, {"approx"}),
    "sin": _f32("un", {"approx", "ftz"}, {"approx"}),
    "cos": _f32("un", {"approx", "ftz"}, {"approx"}),
    "lg2": _f32("un", {"approx", "ftz"}, {"approx"}),
    "ex2": _f32("un", {"approx", "ftz"}, {"approx"}),
    "tanh": OpForm("un", ("f32",), frozenset({"approx"}), float_needs=frozenset({"approx"})),
    "and": OpForm("bin", (*_BITS, "pred")),
    "or": OpForm("bin", (*_BITS, "pred")),
    "xor": OpForm("bin", (*_BITS, "pred")),
    "not": OpForm("un", (*_BITS, "pred")),
    "cnot": OpForm("un", _BITS),
    "shl": OpForm("shift", _BITS),
    "shr": OpForm("shift", _BITS + _INTS),
    "mov": OpForm("un", (*_FLOATS, *_INTS, *_BITS, "pred")),
    "cvt": OpForm("cvt", (*_FLOATS, "f16", "bf16", *_INTS), frozenset(
        {"ftz", "sat"} | _ROUND | _IROUND), frozenset({"sat"} | _IROUND)),
    "setp": OpForm("setp", _FLOATS + _INTS + _BITS, frozenset({"ftz"} | _CMP), _CMP,
                   _CMP, _CMP),
    "selp": OpForm("selp", _FLOATS + _INTS + _BITS),
    "slct": OpForm("slct", _FLOATS + _INTS + _BITS, frozenset({"ftz"}), frozenset({"ftz"})),
}
#: Opcodes refused with a reason of their own (a few words of why).
_REFUSED = {
    **dict.fromkeys(("bra", "brx", "call", "ret", "exit", "trap"),
                    "branches and calls are refused: a hook is straight-line code (choose a "
                    "value with selp or slct)"),
    **dict.fromkeys(("bar", "barrier", "membar", "fence", "mbarrier", "elect", "griddepcontrol"),
                    "barriers and fences are refused: the epilogue's synchronisation is the "
                    "kernel's"),
    **dict.fromkeys(("ld", "ldu", "st", "atom", "red", "cp", "prefetch", "prefetchu", "cvta",
                     "isspacep", "ldmatrix", "stmatrix", "tex", "suld", "sust", "mapa"),
                    "memory instructions are refused: a hook reads memory through "
                    "k.load(name) only and writes nothing but registers"),
    **dict.fromkeys(("shfl", "vote", "match", "redux", "activemask", "wgmma", "mma",
                     "setmaxnreg", "tcgen05"),
                    "warp-wide and tensor-core instructions are refused"),
}
_INT_LITERAL = re.compile(r"-?(?:0[xX][0-9a-fA-F]+|0[0-7]*|[1-9][0-9]*)U?")
_HOOK_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,31}")


def _kind(t: str) -> str:
    return "p" if t == "pred" else "f" if t.startswith(("f", "bf")) else t[0]


def compatible(reg: str, want: str) -> bool:
    """Whether a register of type ``reg`` may stand where an instruction wants ``want``:
    the same type, or the same size with a bit type on one side, or two integer types."""
    if reg == want:
        return True
    if "pred" in (reg, want) or _SIZE[reg] != _SIZE[want]:
        return False
    kinds = {_kind(reg), _kind(want)}
    return "b" in kinds or kinds == {"u", "s"}


def _imm(value: Any, want: str) -> str | None:
    """``value`` as a PTX immediate for a ``want`` operand, or None when it cannot be one:
    a number for an f32 / f64 operand (the exact ``0f`` / ``0d`` literal of its rounding),
    an int or an integer literal for an integer or bit operand, a ``0f`` (``0d``) literal
    for a 32-bit (64-bit) float or bit operand.  16-bit floats and predicates take none."""
    if isinstance(value, bool) or want in ("pred", "f16", "bf16"):
        return None
    if isinstance(value, (int, float)) and want in _FLOATS:
        try:
            return ("0f" + struct.pack(">f", float(value)).hex().upper() if want == "f32"
                    else "0d" + struct.pack(">d", float(value)).hex().upper())
        except (OverflowError, struct.error):
            return None
    if isinstance(value, int):
        return None if value.bit_length() > _SIZE[want] else str(value)
    if not isinstance(value, str):
        return None
    if re.fullmatch(r"0[fF][0-9a-fA-F]{8}", value):
        return value if want in ("f32", "b32") else None
    if re.fullmatch(r"0[dD][0-9a-fA-F]{16}", value):
        return value if want in ("f64", "b64") else None
    return value if _INT_LITERAL.fullmatch(value) and want not in _FLOATS else None


@dataclasses.dataclass(frozen=True)
class HookIns:
    """One recorded instruction: ``opcode`` and its operands as tokens: ``("t", i)`` the
    hook's register i, ``("x",)``, ``("row",)``, ``("col",)``, ``("arg", name)``, ``("imm",
    text)``.  Two pseudo-opcodes: ``load`` (``("t", i), ("tensor", name)``: register i is
    the tensor's value at this element) and ``//`` (a comment: ``("imm", text)``)."""

    opcode: str
    operands: tuple[tuple[str, ...], ...]


def _token_text(tok: tuple[str, ...]) -> str:
    kind = tok[0]
    if kind == "t":
        return f"%t{tok[1]}"
    if kind in ("x", "row", "col"):
        return f"%{kind}"
    if kind == "arg":
        return f"%arg_{tok[1]}"
    return tok[1]


def program_text(program: Sequence[HookIns]) -> list[str]:
    """The recorded instructions as text (the fingerprint is a hash of it)."""
    out = []
    for ins in program:
        ops = [_token_text(t) for t in ins.operands]
        if ins.opcode == "//":
            out.append(f"// {ops[0]}")
        elif ins.opcode == "load":
            out.append(f"{ops[0]} = load {ops[1]};")
        else:
            out.append(f"{ins.opcode} {', '.join(ops)};")
    return out


def _cvt_rounding(dst: str, src: str, mods: frozenset[str]) -> str | None:
    """What ``cvt.dst.src`` misses or has too much of in rounding (PTX ISA "cvt"), or None:
    float -> integer needs an integer rounding (.rni ...), integer -> float and a narrowing
    float conversion a float rounding (.rn ...), a widening one none."""
    fr, ir = mods & _ROUND, mods & _IROUND
    df, sf = _kind(dst) == "f", _kind(src) == "f"
    if len(fr) + len(ir) > 1:
        return "takes one rounding modifier"
    if sf and not df:
        return None if ir else "float -> integer needs one of .rni .rzi .rmi .rpi"
    if df and not sf:
        return None if fr else "integer -> float needs one of .rn .rz .rm .rp"
    if df and _SIZE[dst] < _SIZE[src]:
        return None if fr else "a narrowing float conversion needs one of .rn .rz .rm .rp"
    if df and dst == src:
        return None if not fr else "f -> same f rounds to an integer: .rni .rzi .rmi .rpi"
    return None if not (fr or ir) else "takes no rounding modifier here"


def _signature(base: str, form: OpForm, parts: list[str]) -> tuple[str, tuple[str, ...]]:
    """(destination type, source types) of ``base.parts``; raises ValueError with the reason
    when the modifiers or types are not ones the form takes."""
    types = [p for p in parts if p in _SIZE]
    mods = frozenset(p for p in parts if p not in _SIZE)
    n_types = 2 if form.shape in ("cvt", "slct") else 1
    if len(types) != n_types:
        raise ValueError(f"'{base}' takes {n_types} type suffix{'es' if n_types > 1 else ''} "
                         f"here, got {len(types)}")
    bad = [t for t in types[:1] if t not in form.types]
    if form.shape == "cvt":
        bad = [t for t in types if t not in form.types]
    if bad:
        raise ValueError(f"'{base}' does not take .{bad[0]} here (takes "
                         f"{' '.join('.' + t for t in form.types)})")
    t = types[0]
    fl = any(_kind(x) == "f" for x in types)
    allowed, needs = ((form.float_mods, form.float_needs) if fl else
                      (form.int_mods, form.int_needs))
    extra = sorted(mods - allowed)
    if extra:
        raise ValueError(f"'{base}' with .{t} does not take .{extra[0]}")
    if needs and len(mods & needs) != 1:
        raise ValueError(f"'{base}' with .{t} needs one of "
                         f"{' '.join('.' + m for m in sorted(needs))}")
    why = _type_rule(base, types, mods)
    if why:
        raise ValueError(f"'{base}' {why}")
    if form.shape == "cvt":
        why = _cvt_rounding(types[0], types[1], mods)
        if why:
            raise ValueError(f"cvt.{types[0]}.{types[1]} {why}")
        return types[0], (types[1],)
    wide = "wide" in mods
    if wide and t not in _WIDE:
        raise ValueError(f"'{base}.wide' takes a 16- or 32-bit integer type, not .{t}")
    w = _WIDE.get(t, t) if wide else t
    if form.shape == "slct":
        return t, (t, t, types[1])
    return {"bin": (w, (t, t)), "un": (t, (t,)), "tern": (w, (t, t, w)),
            "shift": (t, (t, "u32")), "setp": ("pred", (t, t)),
            "selp": (t, (t, t, "pred"))}[form.shape]


class HookBuilder:
    """What a hook's ``k`` offers: :meth:`reg`, :meth:`ins`, :meth:`arg`, :meth:`load` and
    :meth:`comment`, recorded and checked as they are called (any other builder method is
    an :class:`EpilogueError`)."""

    def __init__(self, hook: UserEpilogue) -> None:
        self._hook = hook
        self.program: list[HookIns] = []
        self.reg_types: list[str] = []
        self.uses_row = self.uses_col = False
        # register name -> (token, type, writable)
        self._known: dict[str, tuple[tuple[str, ...], str, bool]] = {
            "%x": (("x",), "f32", True), "%row": (("row",), "u32", False),
            "%col": (("col",), "u32", False)}
        self._known.update({f"%arg_{s}": (("arg", s), "f32", False) for s in hook.scalars})
        self._written: set[int] = set()
        self.writes_x = False

    def _error(self, text: str, where: str | None = None) -> EpilogueError:
        at = f" (in `{where}`)" if where else ""
        return EpilogueError(f"user epilogue '{self._hook.name}': {text}{at}")

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):  # private and special names: the usual AttributeError
            raise AttributeError(name)
        why = {"label": "labels", "bra": "branches", "fresh_label": "labels",
               "shared": "shared memory", "dynamic_shared": "shared memory",
               "param": "kernel parameters (declare scalars= or tensors=)",
               "ld_param": "kernel parameters (read one with k.arg)",
               "raw": "raw PTX lines"}.get(name, f"'{name}'")
        raise self._error(f"a hook cannot use {why}: its k offers reg, ins, arg, load and "
                          "comment")

    def _count(self, where: str) -> None:
        if len(self.program) >= MAX_INSTRUCTIONS:
            raise self._error(f"more than {MAX_INSTRUCTIONS} instructions (the hook runs for "
                              "every accumulator element)", where)

    def reg(self, type: str) -> Reg:
        """A new register of PTX type ``type`` (one of the builder's: f32, u32, pred, ...)."""
        if type not in REG_TYPES:
            raise self._error(f"no register type {type!r} (one of {', '.join(REG_TYPES)})")
        i = len(self.reg_types)
        self.reg_types.append(type)
        r = Reg(f"%t{i}", type)
        self._known[r.name] = (("t", str(i)), type, True)
        return r

    def arg(self, name: str) -> Reg:
        """The f32 register holding scalar parameter ``name`` (read-only)."""
        if name not in self._hook.scalars:
            kind = "a tensor: read it with k.load" if name in self._hook.tensor_names else \
                f"not one of its scalars ({', '.join(self._hook.scalars) or 'none'})"
            raise self._error(f"k.arg({name!r}): {kind}")
        return Reg(f"%arg_{name}", "f32")

    def load(self, name: str) -> Reg:
        """A new f32 register holding tensor ``name``'s value at this element's row (a
        ``"row"`` tensor) or column (``"col"``); read-only."""
        if name not in self._hook.tensor_names:
            kind = "a scalar: read it with k.arg" if name in self._hook.scalars else \
                f"not one of its tensors ({', '.join(self._hook.tensor_names) or 'none'})"
            raise self._error(f"k.load({name!r}): {kind}")
        self._count(f"k.load({name!r})")
        kind = self._hook.tensor(name)[0]
        self.uses_row |= kind == "row"
        self.uses_col |= kind == "col"
        i = len(self.reg_types)
        self.reg_types.append("f32")
        r = Reg(f"%t{i}", "f32")
        self._known[r.name] = (("t", str(i)), "f32", False)
        self._written.add(i)
        self.program.append(HookIns("load", (("t", str(i)), ("tensor", name))))
        return r

    def comment(self, text: str) -> None:
        """A PTX comment (part of the fingerprint: it is in the kernel's text)."""
        self.program.append(HookIns("//", (("imm", str(text)),)))

    def ins(self, opcode: str, *operands: Any, pred: Any = None) -> None:
        """Append ``opcode op, op, ...;`` after checking it (see the module docstring)."""
        where = f"{opcode} {', '.join(str(o) for o in operands)}".strip()
        if pred is not None or (isinstance(opcode, str) and opcode.startswith("@")):
            raise self._error("a guarded instruction (@p) is refused: a hook runs every "
                              "instruction (choose a value with selp or slct)", where)
        if not isinstance(opcode, str) or not opcode:
            raise self._error(f"the opcode must be a string, got {opcode!r}", where)
        self._count(where)
        parts = opcode.split(".")
        base = parts[0]
        if "shared" in parts or base in _REFUSED:
            raise self._error("shared memory is refused" if "shared" in parts
                              else _REFUSED[base], where)
        form = OPS.get(base)
        if form is None:
            raise self._error(f"'{base}' is not an instruction a hook may use (one of "
                              f"{', '.join(OPS)})", where)
        try:
            dst, srcs = _signature(base, form, parts[1:])
        except ValueError as e:
            raise self._error(str(e), where) from None
        if len(operands) != 1 + len(srcs):
            raise self._error(f"'{opcode}' takes {1 + len(srcs)} operands, got "
                              f"{len(operands)}", where)
        toks = [self._source(o, want, where) for o, want in zip(operands[1:], srcs, strict=True)]
        self.program.append(HookIns(opcode, (self._dest(operands[0], dst, where), *toks)))

    def _register(self, o: Any, where: str) -> tuple[tuple[str, ...], str, bool]:
        if isinstance(o, Reg):
            got = self._known.get(o.name)
            if got is not None and got[1] == o.type:
                return got
            raise self._error(f"register {o.name} (.{o.type}) is not one of this hook's "
                              "(make registers with k.reg)", where)
        what = ("a kernel parameter: read a scalar with k.arg" if hasattr(o, "declaration")
                else "a vector operand: a hook takes one register per operand"
                if isinstance(o, (list, tuple)) else f"{o!r} is not a register")
        raise self._error(what, where)

    def _source(self, o: Any, want: str, where: str) -> tuple[str, ...]:
        if not isinstance(o, Reg) and not isinstance(o, (list, tuple)) \
                and not hasattr(o, "declaration"):
            text = _imm(o, want)
            if text is None:
                raise self._error(f"{o!r} is not an immediate a .{want} operand takes (a "
                                  "number, or a PTX literal such as 0f3F800000; registers "
                                  "come from k.reg)", where)
            return ("imm", text)
        tok, ty, _ = self._register(o, where)
        if not compatible(ty, want):
            raise self._error(f"{o.name} is .{ty}; this operand is .{want}", where)
        if tok[0] == "t" and int(tok[1]) not in self._written:
            raise self._error(f"{o.name} is read before it is written", where)
        self.uses_row |= tok[0] == "row"
        self.uses_col |= tok[0] == "col"
        return tok

    def _dest(self, o: Any, want: str, where: str) -> tuple[str, ...]:
        tok, ty, writable = self._register(o, where)
        if not writable:
            raise self._error(f"{o.name} is read-only (the hook writes x and the registers "
                              "it made with k.reg)", where)
        if not compatible(ty, want):
            stay = " (x stays .f32: write it with an .f32 or .b32 form)" if tok == ("x",) \
                else ""
            raise self._error(f"writes .{want} into {o.name}, a .{ty} register{stay}", where)
        if tok[0] == "t":
            self._written.add(int(tok[1]))
        self.writes_x |= tok == ("x",)
        return tok


#: The function a :class:`UserEpilogue` records: ``fn(k, x, row, col)``.
HookFn = Callable[[HookBuilder, Reg, Reg, Reg], None]


class UserEpilogue:
    """A named hook ``fn(k, x, row, col)`` that transforms the f32 accumulator ``x`` in place
    (the module docstring says what ``k`` offers and what is checked), with the kernel
    parameters it declares: ``scalars``, names of f32 numbers (read with ``k.arg(name)``),
    and ``tensors``, name -> (kind, dtype): a vector of one value per output ``"row"`` (M)
    or ``"col"`` (N) of type bf16, f16 or f32 (read as f32 with ``k.load(name)``).  They
    become the kernel parameters :attr:`params` (``u_<name>``: the scalars, then the tensors'
    addresses), whose values ``nvatom.gemm`` takes as ``epilogue_args={name: value}``.

    ``fn`` runs here, once: what it emits is checked and recorded (:attr:`program`).  Two
    UserEpilogues are equal when their name, parameters and recorded program are (they build
    the same kernel); :attr:`fingerprint` hashes those, :attr:`tag` (in the kernel's name)
    is the name and the fingerprint's first 10 hex digits.  A UserEpilogue is immutable."""

    def __init__(self, name: str, fn: HookFn, *, scalars: Sequence[str] = (),
                 tensors: Mapping[str, tuple[str, str]] | None = None) -> None:
        if not isinstance(name, str) or not _HOOK_NAME.fullmatch(name):
            raise EpilogueError(f"a user epilogue's name must be a letter then up to 31 "
                                f"letters, digits or '_' (it is part of the kernel's name), "
                                f"got {name!r}")
        self.name = name
        if not callable(fn):
            raise EpilogueError(f"user epilogue '{name}': fn must be callable "
                                f"fn(k, x, row, col), got {fn!r}")
        self.fn = fn
        self.scalars = self._names(scalars, "scalars")
        self.tensors = self._tensors(tensors)
        if set(self.scalars) & set(self.tensor_names):
            raise EpilogueError(f"user epilogue '{name}': "
                                f"{sorted(set(self.scalars) & set(self.tensor_names))[0]!r} "
                                "is both a scalar and a tensor")
        b = HookBuilder(self)
        try:
            ret = fn(b, Reg("%x", "f32"), Reg("%row", "u32"), Reg("%col", "u32"))
        except EpilogueError:
            raise
        except Exception as e:
            last = program_text(b.program)[-1:] or ["none"]
            raise EpilogueError(f"user epilogue '{name}' raised {type(e).__name__}: {e} "
                                f"(after {len(b.program)} instructions; the last: "
                                f"{last[0]})") from e
        if ret is not None:
            raise b._error(f"fn returned {ret!r}: a hook transforms x in place (write the "
                           "result into x) and returns None")
        if not any(i.opcode not in ("//", "load") for i in b.program):
            raise b._error("the hook emitted no instruction")
        if not b.writes_x:
            raise b._error("the hook never writes x (its result is x)")
        self.program = tuple(b.program)
        self.reg_types = tuple(b.reg_types)
        self.uses_row, self.uses_col = b.uses_row, b.uses_col
        text = "\n".join([name, repr(self.scalars), repr(self.tensors), self.text])
        self.fingerprint = hashlib.sha256(text.encode()).hexdigest()
        self._probe()
        self._frozen = True

    def __setattr__(self, name: str, value: Any) -> None:
        if getattr(self, "_frozen", False):
            raise AttributeError(f"a UserEpilogue is immutable (its fingerprint names its "
                                 f"kernel): make a new one instead of setting {name!r}")
        super().__setattr__(name, value)

    def _names(self, names: Sequence[str], what: str) -> tuple[str, ...]:
        if not isinstance(names, (tuple, list)) or not all(
                isinstance(n, str) and n.isidentifier() and n.isascii() and len(n) <= 32
                for n in names):
            raise EpilogueError(f"user epilogue '{self.name}': {what} must be a sequence of "
                                f"parameter names (identifiers), got {names!r}")
        out = tuple(names)
        if len(set(out)) != len(out):
            raise EpilogueError(f"user epilogue '{self.name}': {what} {out!r} repeat a name")
        return out

    def _tensors(self, tensors: Mapping[str, tuple[str, str]] | None
                 ) -> tuple[tuple[str, str, str], ...]:
        if tensors is None:
            return ()
        if not isinstance(tensors, Mapping):
            raise EpilogueError(f"user epilogue '{self.name}': tensors must be a mapping "
                                f"name -> (kind, dtype), got {tensors!r}")
        names = self._names(tuple(tensors), "tensors")
        out = []
        for n in names:
            spec = tensors[n]
            if (not isinstance(spec, (tuple, list)) or len(spec) != 2
                    or spec[0] not in TENSOR_KINDS or spec[1] not in TENSOR_DTYPES):
                raise EpilogueError(
                    f"user epilogue '{self.name}': tensor {n!r} is {spec!r}; a tensor is "
                    f"(kind, dtype) with kind one of {', '.join(TENSOR_KINDS)} and dtype one "
                    f"of {', '.join(TENSOR_DTYPES)}")
            out.append((n, spec[0], spec[1]))
        return tuple(out)

    @property
    def tensor_names(self) -> tuple[str, ...]:
        return tuple(n for n, _, _ in self.tensors)

    def tensor(self, name: str) -> tuple[str, str]:
        """(kind, dtype) of tensor ``name``."""
        return next((k, d) for n, k, d in self.tensors if n == name)

    @property
    def arg_names(self) -> tuple[str, ...]:
        """The names of ``epilogue_args``, in :attr:`params` order."""
        return self.scalars + self.tensor_names

    @property
    def params(self) -> tuple[tuple[str, str], ...]:
        """The kernel parameters the hook adds, ``(name, PTX type)``: ``u_<scalar>`` .f32,
        then ``u_<tensor>`` .u64 (an address)."""
        return (*((f"u_{s}", "f32") for s in self.scalars),
                *((f"u_{n}", "u64") for n in self.tensor_names))

    @property
    def text(self) -> str:
        """The recorded program as text (registers: ``%x``, ``%row``, ``%col``, the hook's
        ``%t<i>``, a scalar ``%arg_<name>``): what the fingerprint hashes."""
        return "\n".join(program_text(self.program))

    @property
    def registers(self) -> int:
        """About how many registers the hook keeps beside the accumulators: its scalars,
        its tensors' addresses (two each), a row tensor's two rows of values, N - 1 when it
        reads columns, and every register it makes (an upper bound: some die early)."""
        rows = sum(k == "row" for _, k, _ in self.tensors)
        return (len(self.scalars) + 2 * len(self.tensors) + 2 * rows + int(self.uses_col)
                + len(self.reg_types))

    @property
    def tag(self) -> str:
        """The kernel-name part: ``u<name>_<10 hex digits of the fingerprint>``."""
        return f"u{self.name}_{self.fingerprint[:10]}"

    @property
    def key(self) -> tuple[Any, ...]:
        return (self.name, self.scalars, self.tensors, self.fingerprint)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, UserEpilogue) and other.key == self.key

    def __hash__(self) -> int:
        return hash(self.key)

    def __repr__(self) -> str:
        return (f"UserEpilogue({self.name!r}, scalars={self.scalars!r}, "
                f"tensors={self.tensors!r}, fingerprint={self.fingerprint!r})")

    def _probe(self) -> None:
        """Assemble the recorded program for sm_90a in a small kernel of its own (``x`` read
        from memory, ``row``, ``col`` and the scalars from parameters, each ``k.load`` one
        ``ld.global.f32``), so that a form ptxas refuses (a modifier in the wrong order or
        on a type that has none, ...) is an EpilogueError naming the instruction now, not a
        ptxas error when the GEMM is first built.  Skipped where no ptxas is found (building
        the GEMM needs one).  ptxas's results are cached by content: once per hook."""
        mod = Module("sm_90a")
        k = mod.kernel(f"user_epilogue_{self.name}")
        ptr = k.ld_param(k.param("p", "u64"))
        x = k.reg("f32")
        k.ins("ld.global.f32", x, f"[{ptr}]")
        row, col = (k.ld_param(k.param(n, "u32")) for n in ("row", "col"))
        args = {s: k.ld_param(k.param(f"u_{s}", "f32")) for s in self.scalars}

        def load(name: str) -> Reg:
            r = k.reg("f32")
            k.ins("ld.global.f32", r, f"[{ptr}+4]")
            return r

        self.emit(k, x, row, col, args, load, lambda i: k.comment(f"hook instruction {i}"))
        k.ins("st.global.f32", f"[{ptr}]", x)
        text = mod.emit()
        try:
            ok, diags = ptxas.check(text, "sm_90a")
        except PtxasError:  # no ptxas that takes sm_90a here
            return
        if ok:
            return
        err = next((d for d in diags if d.severity in ("error", "fatal")), None)
        lines = text.splitlines()
        at = err.line if err is not None and err.line else len(lines)
        mark = next((m for m in (re.search(r"// hook instruction (\d+)$", ln)
                                 for ln in lines[at - 1:]) if m), None)
        where = program_text(self.program)[int(mark.group(1))] if mark else None
        raise EpilogueError(f"user epilogue '{self.name}': ptxas refuses it: "
                            f"{err.message if err else 'failed'}"
                            + (f" (in `{where}`)" if where else ""))

    def emit(self, k: Kernel, x: Reg, row: Reg | None, col: Reg | None,
             args: Mapping[str, Reg], load: Callable[[str], Reg],
             mark: Callable[[int], None] | None = None) -> None:
        """Replay :attr:`program` on accumulator ``x`` (``row`` and ``col``: the element's,
        needed when :attr:`uses_row` / :attr:`uses_col`; ``args``: scalar name -> its f32
        register; ``load(name)``: tensor ``name``'s f32 value at this element), with fresh
        registers for the hook's own; ``mark(i)`` (if given) after instruction ``i``."""
        regs: dict[str, Reg] = {}
        fixed: dict[str, Any] = {"x": x, "row": row, "col": col}

        def op(tok: tuple[str, ...]) -> Any:
            if tok[0] == "t":
                return regs[tok[1]]
            if tok[0] == "arg":
                return args[tok[1]]
            return tok[1] if tok[0] == "imm" else fixed[tok[0]]

        for i, ins in enumerate(self.program):
            first = ins.operands[0]
            if ins.opcode == "//":
                k.comment(first[1])
            elif ins.opcode == "load":
                regs[first[1]] = load(ins.operands[1][1])
            else:
                if first[0] == "t" and first[1] not in regs:
                    regs[first[1]] = k.reg(self.reg_types[int(first[1])])
                k.ins(ins.opcode, *(op(t) for t in ins.operands))
            if mark is not None:
                mark(i)
