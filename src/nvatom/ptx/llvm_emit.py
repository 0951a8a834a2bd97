"""LLVM IR from nvatom's PTX: NVVM intrinsics where LLVM has them, inline asm elsewhere.

This is how nvatom feeds an LLVM (or MLIR -> LLVM) pipeline: ``nvatom compile FILE.mlir
--emit llvm`` lowers the IR to PTX as usual and then writes each kernel as an LLVM function
(``define ptx_kernel void @name(...)``) for the NVPTX backend:

* PTX registers become ``alloca`` slots (a front end's usual form; ``mem2reg`` promotes them);
  kernel parameters become arguments (a by-value tensor map is
  ``ptr byval([128 x i8]) align A "nvvm.grid_constant"``), ``.shared`` variables
  ``addrspace(3)`` globals, labels and branches basic blocks, ``ret`` ``ret void``; the
  kernel's ``.maxntid``/``.reqntid``/``.reqnctapercluster``/``.minnctapersm``/``.maxnreg`` become
  the ``nvvm.*`` function attributes, and the module's ``.target`` and ``.version`` the
  function's ``target-cpu`` and ``target-features`` (``+ptxXY``);
* instructions LLVM has an NVVM intrinsic for become calls: the special registers
  (:data:`SREG_INTRINSICS`), ``bar.sync`` (``llvm.nvvm.barrier.cta.sync.aligned.*``), the
  m8n8 b16 ``ldmatrix``/``stmatrix`` and, on the NVVM path, the dense ``mma.sync`` forms
  (``llvm.nvvm.mma.*``, named by :func:`nvatom.ptx.nvvm.intrinsic_name`);
* every other instruction is ``call ... asm sideeffect "..."`` of the PTX text itself, each
  register a tied read-write operand of its class's constraint (``r``, ``l``, ``h``, ``f``,
  ``d``, ``b`` for predicates), a shared variable an ``r`` input, and a ``memory`` clobber.

The MMA instructions take the emission path of the module's tier (:data:`TIER_PATHS`, the
specification's table: seed 003 "Per-SM Emission Templates"); ``paths=`` selects another per
tier.  :func:`compile_llvm` runs LLVM's NVPTX backend (llvmlite, optional extra
``nvatom[llvm]``) on the result: parse, verify, ``mem2reg``-level optimisation, PTX.
"""

from __future__ import annotations

import dataclasses
import enum
import importlib.util
import json
import re
import subprocess
import sys
from collections.abc import Mapping, Sequence
from functools import cache

from nvatom.arch import PtxVersion, Target, Tier, target
from nvatom.atoms.registry import mma_forms
from nvatom.errors import NvatomError
from nvatom.ptx import nvvm

__all__ = [
    "SREG_INTRINSICS",
    "TIER_PATHS",
    "EmissionPath",
    "LlvmEmitError",
    "LlvmModule",
    "compile_llvm",
    "llvm_available",
    "parse_paths",
    "ptx_to_llvm",
]


class LlvmEmitError(NvatomError):
    """PTX that the LLVM emission cannot carry, or LLVM refusing the result."""


class EmissionPath(enum.Enum):
    """How an MMA instruction reaches the NVPTX backend."""

    NVVM = "nvvm-intrinsic"  # a call of llvm.nvvm.*; the backend picks the PTX spelling
    INLINE_ASM = "inline-asm"  # call asm sideeffect "<the PTX>"
    MACHINE_INSTR = "machine-instr"  # the backend's own instruction (nvatom: inline asm, below)


#: The emission path of each tier's MMA instructions: the specification's capability matrix
#: (seed 003).  SM110 is not in the seed's table; it is the tcgen05 family of SM100.  In LLVM
#: output a MACHINE_INSTR tier is carried as inline asm: nvatom maps no tcgen05 or block-scale
#: MMA to an intrinsic (docs/spec-deviations.md, "Emission paths").
TIER_PATHS: dict[Tier, EmissionPath] = {
    Tier.SM70: EmissionPath.NVVM,
    Tier.SM75: EmissionPath.NVVM,
    Tier.SM80: EmissionPath.INLINE_ASM,
    Tier.SM89: EmissionPath.INLINE_ASM,
    Tier.SM90: EmissionPath.INLINE_ASM,
    Tier.SM100: EmissionPath.MACHINE_INSTR,
    Tier.SM110: EmissionPath.MACHINE_INSTR,
    Tier.SM120: EmissionPath.MACHINE_INSTR,
}

#: PTX special register -> the NVVM intrinsic reading it (LLVM ``IntrinsicsNVVM.td``).
SREG_INTRINSICS: dict[str, str] = {
    **{f"%{r}.{c}": f"llvm.nvvm.read.ptx.sreg.{r}.{c}"
       for r in ("tid", "ntid", "ctaid", "nctaid", "clusterid", "nclusterid", "cluster_ctaid",
                 "cluster_nctaid")
       for c in "xyz"},
    "%laneid": "llvm.nvvm.read.ptx.sreg.laneid",
    "%warpid": "llvm.nvvm.read.ptx.sreg.warpid",
    "%cluster_ctarank": "llvm.nvvm.read.ptx.sreg.cluster.ctarank",
    "%cluster_nctarank": "llvm.nvvm.read.ptx.sreg.cluster.nctarank",
}

_MMA_OPCODES = ("mma.", "wgmma.mma_async", "tcgen05.mma")

# PTX register class (the builder's) -> LLVM type; LLVM type -> inline-asm constraint
_CLASS_TYPE = {"pred": "i1", "b16": "i16", "b32": "i32", "b64": "i64", "f32": "float",
               "f64": "double"}
_CONSTRAINT = {"i1": "b", "i16": "h", "i32": "r", "i64": "l", "float": "f", "double": "d"}
_PARAM_TYPE = {"u64": "i64", "s64": "i64", "b64": "i64", "u32": "i32", "s32": "i32",
               "b32": "i32", "u16": "i16", "s16": "i16", "b16": "i16", "f32": "float",
               "f64": "double"}

_REG = re.compile(r"%(?:rd|fd|p|h|r|f)\d+\b")
_DIRECTIVES = {"maxntid": "nvvm.maxntid", "reqntid": "nvvm.reqntid",
               "reqnctapercluster": "nvvm.cluster_dim", "minnctapersm": "nvvm.minctasm",
               "maxnreg": "nvvm.maxnreg"}


def parse_paths(specs: Sequence[str]) -> dict[Tier, EmissionPath]:
    """``["SM80=nvvm-intrinsic", ...]`` (a tier name or label, a path value) -> overrides."""
    out: dict[Tier, EmissionPath] = {}
    for spec in specs:
        tier_s, _, path_s = spec.partition("=")
        tier = next((t for t in Tier if tier_s.strip().upper() in (t.name, t.label)), None)
        path = next((p for p in EmissionPath if path_s.strip() == p.value), None)
        if tier is None or path is None:
            raise LlvmEmitError(
                f"bad emission path '{spec}': expected TIER=PATH with TIER one of "
                f"{', '.join(t.name for t in Tier)} and PATH one of "
                f"{', '.join(p.value for p in EmissionPath)}")
        out[tier] = path
    return out


@dataclasses.dataclass(frozen=True)
class LlvmModule:
    """LLVM IR text for one PTX module, and what the backend needs to compile it."""

    text: str
    target: Target
    version: PtxVersion
    path: EmissionPath  # the MMA instructions' path
    intrinsics: tuple[str, ...]  # the NVVM intrinsics called

    @property
    def features(self) -> str:
        return f"+ptx{self.version[0]}{self.version[1]}"


# --------------------------------------------------------------------------- helpers


def _escape(text: str) -> str:
    """An LLVM string body: ``\\``, ``"`` and control characters as ``\\XX``."""
    return "".join(c if 32 <= ord(c) < 127 and c not in '\\"' else f"\\{ord(c):02X}"
                   for c in text)


def _split_operands(text: str) -> list[str]:
    """Top-level comma-separated operands (``{...}`` and ``[...]`` kept whole)."""
    out, depth, cur = [], 0, ""
    for c in text:
        if c in "{[":
            depth += 1
        elif c in "}]":
            depth -= 1
        if c == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
        else:
            cur += c
    if cur.strip():
        out.append(cur.strip())
    return out


@cache
def _mma_forms_by_opcode() -> dict[str, object]:
    return {f.opcode: f for f in mma_forms(None) if not f.is_sparse}


# --------------------------------------------------------------------------- one kernel


class _Function:
    """The LLVM function of one PTX ``.entry``."""

    def __init__(self, name: str, tgt: Target, version: PtxVersion, path: EmissionPath,
                 module_symbols: set[str]) -> None:
        self.name = name
        self.t = tgt
        self.version = version
        self.path = path
        self.params: list[tuple[str, str, str]] = []  # (name, llvm arg decl, kind)
        self.attrs: dict[str, str] = {}
        self.reg_type: dict[str, str] = {}  # register class prefix -> llvm type
        self.reg_count: dict[str, int] = {}  # register class prefix -> registers declared
        self.shared: dict[str, str] = {}  # symbol -> global definition ("": module's)
        self.symbols = set(module_symbols)
        self.allocas: dict[str, str] = {}
        self.body: list[str] = []
        self.n = 0
        self.blocks = 0
        self.terminated = False
        self.param_addr: dict[str, str] = {}  # register -> the byte parameter it addresses
        self.intrinsics: dict[str, str] = {}  # name -> declaration
        self.tail: list[str] = []  # blocks placed after the body (guarded returns)

    # ------------------------------------------------------------------ values
    def fresh(self) -> str:
        self.n += 1
        return f"%v{self.n}"

    def emit(self, line: str) -> None:
        if self.terminated:
            self.blocks += 1
            self.body.append(f"b{self.blocks}:")
            self.terminated = False
        self.body.append(f"  {line}")

    def _type(self, reg: str) -> str:
        m = re.fullmatch(r"%([a-z]+)(\d+)", reg)
        if m is None or m.group(1) not in self.reg_type or \
                int(m.group(2)) >= self.reg_count[m.group(1)]:
            raise LlvmEmitError(f"kernel '{self.name}': register {reg} is not declared")
        return self.reg_type[m.group(1)]

    def slot(self, reg: str) -> str:
        if reg not in self.allocas:
            self.allocas[reg] = f"  %R{reg[1:]} = alloca {self._type(reg)}"
        return f"%R{reg[1:]}"

    def load(self, reg: str) -> tuple[str, str]:
        ty = self._type(reg)
        v = self.fresh()
        self.emit(f"{v} = load {ty}, ptr {self.slot(reg)}")
        return v, ty

    def store(self, reg: str, value: str) -> None:
        self.emit(f"store {self._type(reg)} {value}, ptr {self.slot(reg)}")

    def value(self, op: str, ty: str = "i32") -> str:
        """An operand as an LLVM value of ``ty`` (register or integer immediate)."""
        if _REG.fullmatch(op):
            v, vty = self.load(op)
            if vty != ty:
                raise LlvmEmitError(f"kernel '{self.name}': {op} is {vty}, expected {ty}")
            return v
        try:
            return str(int(op, 0))
        except ValueError:
            raise LlvmEmitError(f"kernel '{self.name}': operand '{op}' is not a register "
                                "or an integer") from None

    def declare(self, name: str, ret: str, args: Sequence[str]) -> None:
        self.intrinsics[name] = f"declare {ret} @{name}({', '.join(args)})"

    def global_name(self, sym: str) -> str:
        """A kernel's ``.shared`` variable is function-local in PTX, module-level in LLVM:
        prefixed with the kernel's name (the extern dynamic shared memory is the module's)."""
        return f"@{sym}" if self.shared.get(sym) == "" else f"@{self.name}.{sym}"

    def shared_address(self, sym: str, ty: str = "i32") -> str:
        v = self.fresh()
        self.emit(f"{v} = ptrtoint ptr addrspace(3) {self.global_name(sym)} to {ty}")
        return v

    def smem_pointer(self, operand: str) -> str:
        """``[%r5]`` / ``[%r5+16]`` / ``[sym+16]`` (a shared-window address) -> a pointer."""
        m = re.fullmatch(r"\[\s*([%\w.$]+)\s*(?:\+\s*(-?\w+))?\s*\]", operand)
        if not m:
            raise LlvmEmitError(f"kernel '{self.name}': address '{operand}' not understood")
        base, off = m.groups()
        if base in self.shared:
            addr = self.shared_address(base)
        else:
            addr = self.value(base)
        if off:
            a2 = self.fresh()
            self.emit(f"{a2} = add i32 {addr}, {int(off, 0)}")
            addr = a2
        p = self.fresh()
        self.emit(f"{p} = inttoptr i32 {addr} to ptr addrspace(3)")
        return p

    # ------------------------------------------------------------------ instructions
    def instruction(self, text: str) -> None:
        """One PTX instruction (without its ``;``) or a ``{ ... }`` block."""
        if text.startswith("{"):
            self.asm(text)
            return
        m = re.fullmatch(r"(@!?%p\d+\s+)?(\S+)\s*(.*)", text, re.S)
        if not m:
            raise LlvmEmitError(f"kernel '{self.name}': cannot read '{text}'")
        guard, opcode, rest = m.group(1), m.group(2), m.group(3).strip()
        ops = _split_operands(rest)
        if opcode in ("bra", "bra.uni"):
            self.branch(guard, ops[0])
            return
        if opcode in ("ret", "exit") and guard is not None:  # a guarded return: a branch
            name = f"ret{len(self.tail)}"
            self.tail += [f"{_label(name)}:", "  ret void"]
            self.branch(guard, name)
            return
        if guard is None:
            if opcode in ("ret", "exit"):
                self.emit("ret void")
                self.terminated = True
                return
            if self.native(opcode, ops):
                return
        self.asm(text)

    def branch(self, guard: str | None, label: str) -> None:
        dest = _label(label)
        if guard is None:
            self.emit(f"br label %{dest}")
        else:
            neg = "!" in guard
            c, _ = self.load(guard.strip().lstrip("@!"))
            self.blocks += 1
            nxt = f"b{self.blocks}"
            a, b = (nxt, dest) if neg else (dest, nxt)
            self.emit(f"br i1 {c}, label %{a}, label %{b}")
            self.body.append(f"{nxt}:")
            return
        self.terminated = True

    def label(self, name: str) -> None:
        lab = _label(name)
        if not self.terminated:
            self.emit(f"br label %{lab}")
        self.body.append(f"{lab}:")
        self.terminated = False

    def native(self, opcode: str, ops: list[str]) -> bool:
        """Instructions with an LLVM form (True when handled)."""
        parts = opcode.split(".")
        if parts[0] == "ld" and parts[1:2] == ["param"] and len(ops) == 2:
            pname = ops[1].strip("[] ")
            p = next((x for x in self.params if x[0] == pname), None)
            if p is None or p[2] != "scalar":
                raise LlvmEmitError(f"kernel '{self.name}': ld.param of '{pname}'")
            ty = self._type(ops[0])
            arg_ty = p[1].split()[0]
            v = f"%{pname}"
            if arg_ty != ty:
                v2 = self.fresh()
                conv = "zext" if _bits(arg_ty) < _bits(ty) else "trunc" \
                    if _bits(arg_ty) > _bits(ty) else "bitcast"
                self.emit(f"{v2} = {conv} {arg_ty} {v} to {ty}")
                v = v2
            self.store(ops[0], v)
            return True
        if parts[0] == "mov" and len(ops) == 2 and _REG.fullmatch(ops[0]):
            src = ops[1]
            if src in SREG_INTRINSICS:
                name = SREG_INTRINSICS[src]
                self.declare(name, "i32", [])
                v = self.fresh()
                self.emit(f"{v} = call i32 @{name}()")
                self.store(ops[0], v)
                return True
            if src in self.shared:
                self.store(ops[0], self.shared_address(src, self._type(ops[0])))
                return True
            p = next((x for x in self.params if x[0] == src and x[2] == "bytes"), None)
            if p is not None:  # a by-value parameter's .param-window address
                w, v = self.fresh(), self.fresh()
                self.emit(f"{w} = addrspacecast ptr %{src} to ptr addrspace(101)")
                self.emit(f"{v} = ptrtoint ptr addrspace(101) {w} to i64")
                self.store(ops[0], v)
                self.param_addr[ops[0]] = src
                return True
        if opcode == "cvta.param.u64" and len(ops) == 2 and ops[1] in self.param_addr:
            v = self.fresh()  # its generic address (the form a TMA instruction needs)
            self.emit(f"{v} = ptrtoint ptr %{self.param_addr[ops[1]]} to i64")
            self.store(ops[0], v)
            return True
        if opcode == "bar.sync" and len(ops) in (1, 2):
            if len(ops) == 1:
                name = "llvm.nvvm.barrier.cta.sync.aligned.all"
                self.declare(name, "void", ["i32"])
                self.emit(f"call void @{name}(i32 {self.value(ops[0])})")
            else:
                name = "llvm.nvvm.barrier.cta.sync.aligned.count"
                self.declare(name, "void", ["i32", "i32"])
                self.emit(f"call void @{name}(i32 {self.value(ops[0])}, "
                          f"i32 {self.value(ops[1])})")
            return True
        m = re.fullmatch(r"(ld|st)matrix\.sync\.aligned\.m8n8\.(x[124])(\.trans)?\.shared\.b16",
                         opcode)
        if m:
            self.matrix(m.group(1), m.group(2), m.group(3) or "", ops)
            return True
        if opcode.startswith(_MMA_OPCODES):
            return self.mma(opcode, ops)
        return False

    def matrix(self, kind: str, num: str, trans: str, ops: list[str]) -> None:
        name = f"llvm.nvvm.{kind}matrix.sync.aligned.m8n8.{num}{trans}.b16"
        n = int(num[1:])
        regs_op, addr_op = (ops[0], ops[1]) if kind == "ld" else (ops[1], ops[0])
        regs = _REG.findall(regs_op)
        if len(regs) != n:
            raise LlvmEmitError(f"kernel '{self.name}': {name} takes {n} registers")
        ptr = self.smem_pointer(addr_op)
        if kind == "ld":
            ret = "i32" if n == 1 else "{" + ", ".join(["i32"] * n) + "}"
            self.declare(name, ret, ["ptr addrspace(3)"])
            r = self.fresh()
            self.emit(f"{r} = call {ret} @{name}(ptr addrspace(3) {ptr})")
            for i, reg in enumerate(regs):
                if n == 1:
                    self.store(reg, r)
                else:
                    e = self.fresh()
                    self.emit(f"{e} = extractvalue {ret} {r}, {i}")
                    self.store(reg, e)
        else:
            self.declare(name, "void", ["ptr addrspace(3)", *["i32"] * n])
            vals = [self.value(r) for r in regs]
            self.emit(f"call void @{name}(ptr addrspace(3) {ptr}, "
                      + ", ".join(f"i32 {v}" for v in vals) + ")")

    def mma(self, opcode: str, ops: list[str]) -> bool:
        """An MMA instruction on the module's path (False: carry it as inline asm)."""
        if self.path is not EmissionPath.NVVM:
            return False
        form = _mma_forms_by_opcode().get(opcode)
        if form is None or len(ops) != 4:
            raise LlvmEmitError(
                f"kernel '{self.name}': {opcode} has no NVVM intrinsic in nvatom's mapping "
                f"(only the dense mma.sync forms); select the {EmissionPath.INLINE_ASM.value} "
                f"path for {self.t.tier.name}")
        name = nvvm.intrinsic_name(form)  # type: ignore[arg-type]
        groups = {op: _REG.findall(text) for op, text in zip("DABC", ops, strict=True)}
        args: list[str] = []
        arg_types: list[str] = []
        for op in "ABC":
            ty = nvvm.llvm_type(form, op)  # type: ignore[arg-type]
            for reg in groups[op]:
                v, vty = self.load(reg)
                args.append(f"{ty} {self._convert(v, vty, ty)}")
                arg_types.append(ty)
        d_ty = nvvm.llvm_type(form, "D")  # type: ignore[arg-type]
        ret = "{" + ", ".join([d_ty] * len(groups["D"])) + "}"
        self.declare(name, ret, arg_types)
        r = self.fresh()
        self.emit(f"{r} = call {ret} @{name}({', '.join(args)})")
        for i, reg in enumerate(groups["D"]):
            e = self.fresh()
            self.emit(f"{e} = extractvalue {ret} {r}, {i}")
            self.store(reg, self._convert(e, d_ty, self._type(reg)))
        return True

    def _convert(self, v: str, src: str, dst: str) -> str:
        if src == dst:
            return v
        if _bits(src) != _bits(dst):
            raise LlvmEmitError(f"kernel '{self.name}': cannot pass a {src} as {dst}")
        c = self.fresh()
        self.emit(f"{c} = bitcast {src} {v} to {dst}")
        return c

    def asm(self, text: str) -> None:
        """``text`` as ``call asm sideeffect``: registers tied read-write, shared variables
        ``r`` inputs."""
        body = text.replace("$", "$$")
        regs: list[str] = []
        syms: list[str] = []

        def reg_ref(m: re.Match[str]) -> str:
            tok = m.group(0)
            if tok not in regs:
                regs.append(tok)
            return f"${regs.index(tok)}"

        body = _REG.sub(reg_ref, body)
        words = re.compile(r"(?<![%\w.$])([A-Za-z_]\w*)\b")

        def sym_ref(m: re.Match[str]) -> str:
            tok = m.group(1)
            if tok in self.shared:
                if tok not in syms:
                    syms.append(tok)
                return f"${{{len(regs) * 2 + syms.index(tok)}}}"
            if any(tok == p[0] for p in self.params):
                raise LlvmEmitError(f"kernel '{self.name}': parameter '{tok}' used in "
                                    f"'{text}'; only ld.param and mov of a by-value "
                                    "parameter are carried")
            return tok

        body = words.sub(sym_ref, body)
        body = re.sub(r"\$\{(\d+)\}", lambda m: f"${m.group(1)}", body)
        types = [self._type(r) for r in regs]
        ins = [self.load(r)[0] for r in regs]
        sym_vals = [self.shared_address(s) for s in syms]
        cons = [f"={_CONSTRAINT[t]}" for t in types] + [str(i) for i in range(len(regs))] \
            + ["r"] * len(syms) + ["~{memory}"]
        args = [f"{t} {v}" for t, v in zip(types, ins, strict=True)] + \
            [f"i32 {v}" for v in sym_vals]
        call = f'asm sideeffect "{_escape(body)};", "{",".join(cons)}"({", ".join(args)})'
        if not regs:
            self.emit(f"call void {call}")
            return
        ret = types[0] if len(regs) == 1 else "{" + ", ".join(types) + "}"
        r = self.fresh()
        self.emit(f"{r} = call {ret} {call}")
        for i, reg in enumerate(regs):
            if len(regs) == 1:
                self.store(reg, r)
            else:
                e = self.fresh()
                self.emit(f"{e} = extractvalue {ret} {r}, {i}")
                self.store(reg, e)

    # ------------------------------------------------------------------ text
    def attributes(self) -> str:
        attrs = dict(self.attrs)
        attrs["target-cpu"] = self.t.name
        attrs["target-features"] = f"+ptx{self.version[0]}{self.version[1]}"
        return " ".join(f'"{k}"="{v}"' for k, v in attrs.items())

    def text(self, group: int) -> str:
        args = ", ".join(f"{decl} %{name}" for name, decl, _kind in self.params)
        lines = [f"define ptx_kernel void @{self.name}({args}) #{group} {{",
                 "entry:", *self.allocas.values(), *self.body]
        if not self.terminated:
            lines.append("  ret void")
        lines += [*self.tail, "}"]
        return "\n".join(lines) + "\n"


def _bits(ty: str) -> int:
    return {"i1": 1, "i16": 16, "i32": 32, "i64": 64, "float": 32, "double": 64,
            "<2 x half>": 32}[ty]


def _label(name: str) -> str:
    return "L." + re.sub(r"[^\w.]", "_", name.lstrip("$"))


# --------------------------------------------------------------------------- a module


def _statements(body: str) -> list[str]:
    """Split a kernel body into labels, instructions and ``{...}`` blocks (comments dropped)."""
    out: list[str] = []
    block: list[str] = []
    depth = 0
    for raw in body.splitlines():
        line = raw.split("//", 1)[0].strip()
        if not line:
            continue
        if depth or line == "{":
            block.append(line)
            depth += line.count("{") - line.count("}")
            if depth == 0:
                out.append("\n".join(block).rstrip(";"))
                block = []
            continue
        if line.startswith("."):
            raise LlvmEmitError(f"the directive '{line}' inside a kernel body is not carried "
                                "(only .reg and .shared are)")
        for stmt in re.findall(r"[^;]+;|[^;]+$", line):
            stmt = stmt.strip()
            if stmt:
                out.append(stmt)
    if block:
        raise LlvmEmitError("unbalanced '{' in a kernel body")
    return out


def ptx_to_llvm(ptx: str, paths: Mapping[Tier, EmissionPath] | None = None) -> LlvmModule:
    """The LLVM IR of a PTX module written by :mod:`nvatom.ptx.builder`."""
    vm = re.search(r"^\.version (\d+)\.(\d+)", ptx, re.M)
    tm = re.search(r"^\.target (\S+)", ptx, re.M)
    if not vm or not tm:
        raise LlvmEmitError("not a PTX module: no .version/.target header")
    version = (int(vm.group(1)), int(vm.group(2)))
    t = target(tm.group(1))
    path = {**TIER_PATHS, **(paths or {})}[t.tier]
    globals_: list[str] = []
    externs: set[str] = set()
    for m in re.finditer(r"^\.extern \.shared \.align (\d+) \.b8 (\w+)\[\];", ptx, re.M):
        globals_.append(f"@{m.group(2)} = external addrspace(3) global [0 x i8], "
                        f"align {m.group(1)}")
        externs.add(m.group(2))
    functions: list[_Function] = []
    for m in re.finditer(r"^\.visible \.entry (\w+)(?:\((.*?)\n?\))?(.*?)^\{\n(.*?)^\}",
                         ptx, re.M | re.S):
        name, params, directives, body = m.groups()
        fn = _Function(name, t, version, path, externs)
        fn.shared.update({s: "" for s in externs})
        for p in re.findall(r"\.param[^,\n]*", params or ""):
            pm = re.fullmatch(r"\.param \.(\w+) (\w+)", p.strip())
            bm = re.fullmatch(r"\.param \.align (\d+) \.b8 (\w+)\[(\d+)\]", p.strip())
            if pm and pm.group(1) in _PARAM_TYPE:
                fn.params.append((pm.group(2), _PARAM_TYPE[pm.group(1)], "scalar"))
            elif bm:
                fn.params.append((bm.group(2), f'ptr byval([{bm.group(3)} x i8]) align '
                                  f'{bm.group(1)} "nvvm.grid_constant"', "bytes"))
            else:
                raise LlvmEmitError(f"kernel '{name}': parameter '{p.strip()}' not understood")
        for d in re.findall(r"^\.(\w+)(.*)$", directives, re.M):
            key, value = d[0], d[1].strip()
            if key == "explicitcluster":
                continue  # LLVM writes it with the cluster shape
            if key not in _DIRECTIVES:
                raise LlvmEmitError(f"kernel '{name}': directive .{key} has no LLVM attribute")
            fn.attrs[_DIRECTIVES[key]] = ",".join(v.strip() for v in value.split(","))
        stmts = []
        for line in body.splitlines():
            s = line.strip()
            rm = re.fullmatch(r"\.reg \.(\w+) %(\w+)<(\d+)>;", s)
            sm = re.fullmatch(r"\.shared \.align (\d+) \.b8 (\w+)\[(\d+)\];", s)
            if rm:
                if rm.group(1) not in _CLASS_TYPE:
                    raise LlvmEmitError(f"kernel '{name}': register class .{rm.group(1)} is not "
                                        f"one of {', '.join(_CLASS_TYPE)}")
                fn.reg_type[rm.group(2)] = _CLASS_TYPE[rm.group(1)]
                fn.reg_count[rm.group(2)] = int(rm.group(3))
            elif sm:
                fn.shared[sm.group(2)] = (f"@{name}.{sm.group(2)} = internal addrspace(3) "
                                          f"global [{sm.group(3)} x i8] undef, "
                                          f"align {sm.group(1)}")
            else:
                stmts.append(line)
        for st in _statements("\n".join(stmts)):
            if re.fullmatch(r"[$\w.]+:", st):
                fn.label(st[:-1])
            else:
                fn.instruction(st.rstrip(";").strip())
        functions.append(fn)
    if not functions:
        raise LlvmEmitError("the PTX module has no .entry kernel")
    decls: dict[str, str] = {}
    for fn in functions:
        globals_ += [g for g in fn.shared.values() if g]
        decls.update(fn.intrinsics)
    head = [f"; nvatom: LLVM IR for {t.name}, PTX ISA {version[0]}.{version[1]}; MMA "
            f"instructions on the {path.value} path ({t.tier.name})",
            'target triple = "nvptx64-nvidia-cuda"', ""]
    text = "\n".join(head + globals_ + [""] + sorted(decls.values()) + [""]) + "\n" + \
        "\n".join(fn.text(i) for i, fn in enumerate(functions)) + "\n" + \
        "".join(f"attributes #{i} = {{ {fn.attributes()} }}\n" for i, fn in enumerate(functions))
    return LlvmModule(text, t, version, path, tuple(sorted(decls)))


# --------------------------------------------------------------------------- LLVM itself


def llvm_available() -> bool:
    return importlib.util.find_spec("llvmlite") is not None


_COMPILE = r"""
import json, sys
import llvmlite.binding as llvm
llvm.initialize_all_targets()
llvm.initialize_all_asmprinters()
out = []
for job in json.load(sys.stdin):
    try:
        mod = llvm.parse_assembly(job["ir"])
        mod.verify()
        tm = llvm.Target.from_triple("nvptx64-nvidia-cuda").create_target_machine(
            cpu=job["cpu"], features=job["features"], opt=2)
        pto = llvm.create_pipeline_tuning_options(speed_level=1)
        pb = llvm.create_pass_builder(tm, pto)
        pb.getModulePassManager().run(mod, pb)
        out.append({"ptx": str(tm.emit_assembly(mod))})
    except Exception as e:  # parse/verify errors: reported per module
        out.append({"error": f"{type(e).__name__}: {e}"})
json.dump(out, sys.stdout)
"""


def compile_llvm(modules: Sequence[LlvmModule], timeout: float = 300) -> list[str]:
    """PTX from LLVM's NVPTX backend for each module (llvmlite, in one child process: LLVM
    aborts the process on an instruction it cannot select, which must be an error here)."""
    if not llvm_available():
        raise LlvmEmitError("llvmlite is not installed: pip install 'nvatom[llvm]'")
    jobs = [{"ir": m.text, "cpu": m.target.name, "features": m.features} for m in modules]
    proc = subprocess.run([sys.executable, "-c", _COMPILE], input=json.dumps(jobs),
                          capture_output=True, text=True, timeout=timeout, check=False)
    if proc.returncode != 0:
        lines = proc.stderr.strip().splitlines()
        err = next((x for x in lines if "LLVM ERROR" in x or "error" in x.lower()),
                   lines[-1] if lines else "failed")
        raise LlvmEmitError(f"LLVM's NVPTX backend failed: {err}")
    out = []
    for m, r in zip(modules, json.loads(proc.stdout), strict=True):
        if "error" in r:
            raise LlvmEmitError(f"LLVM refused the IR for {m.target.name}: {r['error']}")
        out.append(r["ptx"])
    return out
