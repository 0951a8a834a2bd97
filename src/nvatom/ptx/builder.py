"""A small PTX module/kernel builder: typed virtual registers, parameters, labels, text.

PTX is a virtual ISA with unlimited typed registers; ptxas does the register allocation.
The builder therefore only has to keep names unique and declarations consistent:

* :class:`Module` holds the ``.version``/``.target``/``.address_size`` header and kernels;
  its ``.version`` is the lowest one that the target and everything the module contains
  accept: every emitter records what its instruction needs (:meth:`Kernel.need_feature` for a
  row of :data:`nvatom.arch.FEATURES`, :meth:`Kernel.need_atom` / :meth:`Module.require` for an
  atom-table form, whose row carries its own minimum), and the version is the maximum over
  those records and the target's minimum.  A form the target cannot run at all (``wgmma`` on
  plain ``sm_90``) is refused when it is emitted, naming the targets of that GPU that have it.
  A version given explicitly (``Module(t, version=(8, 0))``) is pinned: a form needing more is
  refused, naming the form and the version it needs.
* :class:`Kernel` hands out registers by PTX type (``k.reg("f32")`` -> ``%f3``), declares
  ``.param``s, static ``.shared`` buffers and labels, and appends instructions.  Each register
  class (``%r``, ``%rd``, ``%f``, ...) is declared once with the count used.

Source: PTX ISA, chapters "PTX Machine Model", "Syntax" and "State Spaces, Types and
Variables".  Instruction spellings come from the atom tables, never from this module.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from nvatom.arch import TARGETS, PtxVersion, Target, feature, target
from nvatom.errors import NvatomError

__all__ = ["Kernel", "Module", "Need", "Param", "Reg"]

# PTX type -> register name prefix.  Types sharing a width share a class, as nvcc does.
_REG_CLASS = {
    "pred": "p",
    "b16": "h", "u16": "h", "s16": "h", "f16": "h", "bf16": "h",
    "b32": "r", "u32": "r", "s32": "r", "f16x2": "r", "bf16x2": "r",
    "b64": "rd", "u64": "rd", "s64": "rd",
    "f32": "f",
    "f64": "fd",
}
# The declared type of each class.
_CLASS_TYPE = {"p": "pred", "h": "b16", "r": "b32", "rd": "b64", "f": "f32", "fd": "f64"}


class PtxBuildError(NvatomError):
    """Misuse of the PTX builder (unknown type, duplicate name, ...)."""


@dataclasses.dataclass(frozen=True)
class Reg:
    name: str
    type: str

    def __str__(self) -> str:
        return self.name


@dataclasses.dataclass(frozen=True)
class Param:
    """A kernel parameter: a scalar (``type``) or, with ``nbytes``, an aligned byte array
    passed by value (a CUtensorMap is ``.param .align 64 .b8 tmap[128]``)."""

    name: str
    type: str
    nbytes: int | None = None
    align: int | None = None

    def __str__(self) -> str:
        return self.name

    def declaration(self) -> str:
        if self.nbytes is None:
            return f".param .{self.type} {self.name}"
        return f".param .align {self.align} .b8 {self.name}[{self.nbytes}]"


Operand = Reg | Param | str | int

ErrorType = Callable[[str], Exception]


@dataclasses.dataclass(frozen=True)
class Need:
    """What one emitted form needs of its module: a target that has it and a ``.version``.

    ``form`` names the form in diagnostics; ``version_for(t)`` is the lowest ``.version`` it
    assembles with on ``t`` (never below ``t``'s own minimum); ``available_on(t)`` says whether
    ``t`` can run it at all; ``needs`` says why not, in words."""

    form: str
    version_for: Callable[[Target], PtxVersion]
    available_on: Callable[[Target], bool]
    needs: str

    @classmethod
    def of_feature(cls, name: str, form: str | None = None) -> Need:
        """The need of a row of :data:`nvatom.arch.FEATURES` (its ``min_ptx`` and rule)."""
        f = feature(name)
        return cls(form or f.description, lambda t: max(f.min_ptx, t.min_ptx), f.available_on,
                   f"feature '{f.name}': {f.rule}")

    @classmethod
    def of_atom(cls, atom: Any, name_feature: bool = True) -> Need:
        """The need of an atom-table form (anything with ``name``, ``available_on`` and
        ``ptx_version_for`` or ``min_ptx``; ``feature`` when ``name_feature``)."""
        f = getattr(atom, "feature", None) if name_feature else None
        version_for = getattr(atom, "ptx_version_for", None)
        if version_for is None:
            def version_for(t: Target) -> PtxVersion:
                return max(atom.min_ptx, t.min_ptx)
        return cls(atom.name, version_for, atom.available_on, f"{f}" if f else "")

    def check(self, t: Target, pinned: PtxVersion | None, error: ErrorType) -> None:
        """Raise ``error(text)`` unless ``t`` runs the form (at the ``pinned`` version)."""
        if not self.available_on(t):
            needs = f" (needs {self.needs})" if self.needs else ""
            raise error(f"{self.form} is not available on {t.name}{needs}{_siblings(self, t)}")
        need = self.version_for(t)
        if pinned is not None and pinned < need:
            raise error(f"{self.form} needs PTX .version {need[0]}.{need[1]} on {t.name}; "
                        f"the module has {pinned[0]}.{pinned[1]}")


def _siblings(need: Need, t: Target) -> str:
    """'; sm_90a has it': the targets of the same GPU (compute capability) that run the form,
    the usual fix when only the suffix is wrong."""
    names = [o.name for o in TARGETS.values() if o.cc == t.cc and o != t and need.available_on(o)]
    if not names:
        return ""
    return f"; {' and '.join(names)} {'has' if len(names) == 1 else 'have'} it"


def _fmt(op: Operand | Sequence[Operand]) -> str:
    if isinstance(op, (list, tuple)):
        return "{" + ", ".join(_fmt(o) for o in op) + "}"
    return str(op)


class Kernel:
    """One ``.entry`` function under construction."""

    def __init__(self, name: str) -> None:
        if not name.isidentifier():
            raise PtxBuildError(f"kernel name '{name}' is not a valid PTX identifier")
        self.name = name
        self.params: list[Param] = []
        self._counts: dict[str, int] = {}
        self._shared: list[str] = []
        self._body: list[str] = []
        self._labels: set[str] = set()
        self._label_counter = 0
        self._dynamic_shared: str | None = None
        self.module_decls: list[str] = []
        # Performance directives (PTX ISA "Performance-Tuning Directives", "Cluster Dimension
        # Directives"): each is printed after the parameter list when set.
        self.maxntid: tuple[int, ...] | None = None
        self.reqntid: tuple[int, ...] | None = None
        self.minnctapersm: int | None = None
        self.maxnreg: int | None = None
        self.reqnctapercluster: tuple[int, ...] | None = None
        self.explicitcluster: bool = False
        # What the emitted instructions need (Need records); the module this kernel belongs
        # to checks each as it is recorded and takes its .version from them.
        self.needs: list[Need] = []
        self.module: Module | None = None

    # ----------------------------------------------------------------- what it needs
    def need(self, need: Need, error: ErrorType = PtxBuildError) -> None:
        """Record that an emitted instruction needs ``need`` (checked against the module's
        target and a pinned ``.version`` at once when the kernel belongs to a module)."""
        if self.module is not None:
            self.module.check(need, error)
        self.needs.append(need)

    def need_feature(self, name: str, form: str | None = None,
                     error: ErrorType = PtxBuildError) -> None:
        """Record a row of :data:`nvatom.arch.FEATURES` (``form`` names the instruction)."""
        self.need(Need.of_feature(name, form), error)

    def need_atom(self, atom: Any, error: ErrorType = PtxBuildError, *,
                  name_feature: bool = True) -> None:
        """Record an atom-table form (its row's ``ptx_version_for`` and ``available_on``)."""
        self.need(Need.of_atom(atom, name_feature), error)

    # ----------------------------------------------------------------- declarations
    def param(self, name: str, type: str = "u64") -> Param:
        if any(p.name == name for p in self.params):
            raise PtxBuildError(f"kernel '{self.name}' already has a parameter '{name}'")
        p = Param(name, type)  # scalar
        self.params.append(p)
        return p

    def byte_param(self, name: str, nbytes: int, align: int) -> Param:
        """A by-value byte-array parameter (``.param .align A .b8 name[N]``), e.g. a 128-byte
        CUtensorMap passed like a ``__grid_constant__`` argument."""
        if nbytes <= 0 or align <= 0 or align & (align - 1):
            raise PtxBuildError(
                f"byte parameter '{name}': size {nbytes} and alignment {align} must be positive "
                "and the alignment a power of two"
            )
        if any(p.name == name for p in self.params):
            raise PtxBuildError(f"kernel '{self.name}' already has a parameter '{name}'")
        p = Param(name, "b8", nbytes, align)
        self.params.append(p)
        return p

    def reg(self, type: str) -> Reg:
        try:
            cls = _REG_CLASS[type]
        except KeyError:
            raise PtxBuildError(
                f"no PTX register type '{type}' (known: {', '.join(_REG_CLASS)})"
            ) from None
        n = self._counts.get(cls, 0)
        self._counts[cls] = n + 1
        return Reg(f"%{cls}{n}", type)

    def regs(self, type: str, count: int) -> list[Reg]:
        return [self.reg(type) for _ in range(count)]

    def shared(self, name: str, nbytes: int, align: int = 16) -> str:
        self._shared.append(f".shared .align {align} .b8 {name}[{nbytes}];")
        return name

    def dynamic_shared(self, name: str = "dsmem", align: int = 1024) -> str:
        """Declare the kernel's dynamic shared memory (``.extern .shared .align A .b8 name[]``);
        its size is given at launch.  One per kernel."""
        if self._dynamic_shared is not None:
            raise PtxBuildError(
                f"kernel '{self.name}' already declares dynamic shared memory "
                f"'{self._dynamic_shared}'"
            )
        self._dynamic_shared = name
        # An extern shared array lives at module scope (ptxas rejects it in a body).
        self.module_decls.append(f".extern .shared .align {align} .b8 {name}[];")
        return name

    def fresh_label(self, stem: str = "L") -> str:
        """A new unique label name (not yet placed; place it with :meth:`label`)."""
        while True:
            self._label_counter += 1
            name = f"${stem}_{self._label_counter}"
            if name not in self._labels:
                return name

    def label(self, name: str) -> str:
        if name in self._labels:
            raise PtxBuildError(f"label '{name}' defined twice in kernel '{self.name}'")
        self._labels.add(name)
        self._body.append(f"{name}:")
        return name

    # ----------------------------------------------------------------- instructions
    def ins(
        self, opcode: str, *operands: Operand | Sequence[Operand], pred: str | None = None
    ) -> None:
        """Append ``[@pred] opcode op, op, ...;`` (a sequence operand prints as {a, b})."""
        guard = f"@{pred} " if pred else ""
        ops = ", ".join(_fmt(o) for o in operands)
        self._body.append(f"{guard}{opcode}{' ' + ops if ops else ''};")

    def comment(self, text: str) -> None:
        for line in text.splitlines():
            self._body.append(f"// {line}")

    def raw(self, lines: str | Iterable[str]) -> None:
        """Append pre-formed PTX lines (used by emitters that own their syntax)."""
        self._body.extend([lines] if isinstance(lines, str) else lines)

    def bra(self, label: str, pred: str | Reg | None = None, *, uni: bool = False) -> None:
        """Branch to ``label`` (``bra.uni`` when every thread takes the same path)."""
        self.ins("bra.uni" if uni else "bra", label, pred=str(pred) if pred else None)

    def param_address(self, p: Param) -> Reg:
        """The ``.param``-window address of a by-value parameter (``mov.u64 r, name``).  A TMA
        instruction needs the *generic* address (``cvta.param.u64`` of this; see
        :func:`nvatom.ptx.tma_emit.param_generic_address`): given this one as its tensor map
        it faulted with a misaligned address on an H100 (tests/gpu/test_tma_gpu.py)."""
        r = self.reg("u64")
        self.ins("mov.u64", r, p.name)
        return r

    def ld_param(self, p: Param) -> Reg:
        if p.nbytes is not None:
            raise PtxBuildError(
                f"parameter '{p.name}' is a {p.nbytes}-byte array; take its address with "
                "param_address()"
            )
        r = self.reg(p.type)
        self.ins(f"ld.param.{p.type}", r, f"[{p.name}]")
        return r

    # ----------------------------------------------------------------- text
    def emit(self) -> str:
        params = ",\n".join(f"    {p.declaration()}" for p in self.params)
        head = f".visible .entry {self.name}"
        head += f"(\n{params}\n)" if params else "()"
        for directive, value in (("maxntid", self.maxntid), ("reqntid", self.reqntid),
                                 ("minnctapersm", self.minnctapersm),
                                 ("maxnreg", self.maxnreg),
                                 ("reqnctapercluster", self.reqnctapercluster)):
            if value:
                vals = value if isinstance(value, tuple) else (value,)
                head += f"\n.{directive} " + ", ".join(map(str, vals))
        if self.explicitcluster:
            head += "\n.explicitcluster"
        lines = [head, "{"]
        for cls, n in self._counts.items():
            lines.append(f"    .reg .{_CLASS_TYPE[cls]} %{cls}<{n}>;")
        lines += [f"    {s}" for s in self._shared]
        for b in self._body:
            lines.append(b if b.endswith(":") else f"    {b}")
        lines.append("    ret;")
        lines.append("}")
        return "\n".join(lines) + "\n"


class Module:
    """A PTX module: header plus kernels."""

    def __init__(
        self,
        target_: Target | str,
        *,
        features: Iterable[str] = (),
        version: PtxVersion | None = None,
    ) -> None:
        self.target = target(target_)
        self.features = tuple(features)
        for f in self.features:
            if not self.target.supports(f):
                raise PtxBuildError(f"target {self.target.name} does not support '{f}'")
        self._floor: PtxVersion = self.target.ptx_version_for(*self.features)
        self._pinned: PtxVersion | None = version
        self.needs: list[Need] = []
        self.kernels: list[Kernel] = []

    @property
    def version(self) -> PtxVersion:
        """The ``.version``: the pinned one, else the maximum of the target's minimum, the
        features named at construction and what every emitted form recorded."""
        if self._pinned is not None:
            return self._pinned
        t = self.target
        return max([self._floor, *(n.version_for(t) for n in self.all_needs())])

    @version.setter
    def version(self, value: PtxVersion) -> None:
        """Pin the ``.version`` (every recorded form is checked against it)."""
        for n in self.all_needs():
            n.check(self.target, value, PtxBuildError)
        self._pinned = value

    @property
    def pinned(self) -> bool:
        return self._pinned is not None

    def at_least(self, version: PtxVersion) -> None:
        """Raise the lowest ``.version`` the module may have (a pinned one is checked)."""
        if self._pinned is not None and self._pinned < version:
            raise PtxBuildError(f"the module pins PTX .version {self._pinned[0]}."
                                f"{self._pinned[1]}, below the {version[0]}.{version[1]} "
                                "asked for")
        self._floor = max(self._floor, version)

    def all_needs(self) -> list[Need]:
        return [*self.needs, *(n for k in self.kernels for n in k.needs)]

    def check(self, need: Need, error: ErrorType = PtxBuildError) -> None:
        """Raise ``error(text)`` unless this module's target runs ``need`` (at the pinned
        ``.version``, when one is pinned)."""
        need.check(self.target, self._pinned, error)

    def require(self, atom: Any, error: Callable[[str], Exception], *,
                name_feature: bool = True) -> None:
        """Raise ``error(text)`` unless ``atom`` (anything with ``name``, ``available_on`` and
        ``ptx_version_for``; ``feature`` when ``name_feature``) is available on this module's
        target, and at a pinned ``.version``; record it, so an unpinned module's ``.version``
        is high enough for it.  The check of every emitter's test kernels."""
        need = Need.of_atom(atom, name_feature)
        self.check(need, error)
        self.needs.append(need)

    def kernel(self, name: str) -> Kernel:
        if any(k.name == name for k in self.kernels):
            raise PtxBuildError(f"module already has a kernel '{name}'")
        k = Kernel(name)
        k.module = self
        self.kernels.append(k)
        return k

    def emit(self) -> str:
        header = (
            f".version {self.version[0]}.{self.version[1]}\n"
            f".target {self.target.ptx_target}\n"
            ".address_size 64\n"
        )
        decls: list[str] = []
        for k in self.kernels:
            for d in k.module_decls:
                if d in decls:
                    continue
                name = d.rsplit(" ", 1)[-1].split("[")[0]
                if any(x.rsplit(" ", 1)[-1].split("[")[0] == name for x in decls):
                    raise PtxBuildError(
                        f"module-scope symbol '{name}' declared differently by two kernels"
                    )
                decls.append(d)
        body = "".join("\n" + d + "\n" for d in decls)
        return header + body + "".join("\n" + k.emit() for k in self.kernels)
