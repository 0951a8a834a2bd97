"""SM120 block-scaled ``mma.sync`` (``SM120.mma_bs``) emitted three ways, read off one
:class:`~nvatom.atoms.sm120.MmaBsForm` (the unscaled ``kind::f8f6f4`` forms go through
:mod:`nvatom.ptx.mma_emit` like every other register MMA).

1. :func:`emit_mma_bs` appends the instruction to a kernel: ``d, a, b, c[, e, 0], sfa,
   {byte-id-a, thread-id-a}, sfb, {byte-id-b, thread-id-b}`` with the selectors as
   immediates (ptxas also takes ``.b16`` registers there).
2. :func:`inline_asm` gives the inline-asm template: outputs ``=f`` x 4, inputs ``r`` (A, B),
   ``f`` (C), then sparse ``r`` (metadata) and the selector ``n``, then ``r`` (scale A), two
   ``n`` (byte-id-a, thread-id-a), ``r`` (scale B), two ``n``.  CUTLASS
   (``cute/arch/mma_sm120.hpp``) passes the selectors as ``h`` registers; immediates give
   the same instruction with fewer live registers.
3. :func:`build_mma_bs_test_module` builds ``mma_bs_test(A, B, C, D, SFA, SFB[, E])``: one
   warp loads its A/B/C fragments through the layouts exactly as
   :func:`nvatom.ptx.mma_emit.add_mma_test_kernel` does (A M x K row-major, B as N x K
   row-major, C and D M x N row-major; elements in their register width: one byte per
   element for kind::mxf8f6f4, two e2m1 per byte for kind::mxf4*), lane ``l`` loads its
   scale registers from ``SFA[l]``, ``SFB[l]`` (and the metadata from ``E[l]``), executes the
   instruction and stores D.  :mod:`nvatom.atoms.block_scale_ref` builds the matching
   ``SFA``/``SFB`` words and computes the expected D.

Source: PTX ISA "mma" (block-scale syntax) and "Block Scaling for mma.sync".
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from nvatom.arch import Target, target
from nvatom.atoms.sm120 import MmaBsForm
from nvatom.errors import NvatomError
from nvatom.ptx import mma_emit
from nvatom.ptx.builder import Kernel, Module, Reg
from nvatom.ptx.mma_emit import InlineAsm

__all__ = [
    "MmaBsEmitError",
    "MmaBsRegisters",
    "add_mma_bs_test_kernel",
    "alloc_mma_bs_registers",
    "build_mma_bs_test_module",
    "emit_mma_bs",
    "inline_asm",
]

OPERANDS = ("A", "B", "C", "D")
WARP = 32
_B32 = mma_emit._REG_TYPES["b32"]


class MmaBsEmitError(NvatomError):
    """An SM120 block-scaled form that cannot be emitted as asked."""


@dataclasses.dataclass(frozen=True)
class MmaBsRegisters:
    d: list[Reg]
    a: list[Reg]
    b: list[Reg]
    c: list[Reg]
    sfa: Reg
    sfb: Reg
    e: Reg | None = None


def alloc_mma_bs_registers(k: Kernel, form: MmaBsForm) -> MmaBsRegisters:
    """:func:`nvatom.ptx.mma_emit.alloc_mma_registers`'s, then the two scale registers."""
    r = mma_emit.alloc_mma_registers(k, form)  # type: ignore[arg-type]
    return MmaBsRegisters(r.d, r.a, r.b, r.c, k.reg("b32"), k.reg("b32"), r.e)


def _fmt(r: Reg | str) -> str:
    return r.name if isinstance(r, Reg) else str(r)


def _vec(regs: Sequence[Reg | str]) -> str:
    return "{" + ", ".join(_fmt(r) for r in regs) + "}"


def emit_mma_bs(
    k: Kernel,
    form: MmaBsForm,
    d: Sequence[Reg | str],
    a: Sequence[Reg | str],
    b: Sequence[Reg | str],
    c: Sequence[Reg | str],
    sfa: Reg | str,
    sfb: Reg | str,
    *,
    e: Reg | str | None = None,
    selector: int | None = None,
) -> None:
    """Append ``form``'s instruction (its selectors as immediates) to ``k``."""
    for op, regs in zip(OPERANDS, (a, b, c, d), strict=True):
        mma_emit.check_operand(form, op, regs, MmaBsEmitError)
    for what, r in (("scale A", sfa), ("scale B", sfb), ("metadata", e)):
        if isinstance(r, Reg) and r.type not in _B32:
            raise MmaBsEmitError(f"{form.name}: the {what} register is .b32, got .{r.type}")
    if form.is_sparse and e is None:
        raise MmaBsEmitError(f"{form.name}: a sparse form needs the metadata register e")
    try:
        text = form.instruction(_vec(d), _vec(a), _vec(b), _vec(c), _fmt(sfa), _fmt(sfb),
                                None if e is None else _fmt(e), selector)
    except NvatomError as err:
        raise MmaBsEmitError(str(err)) from None
    k.need_atom(form, MmaBsEmitError)
    k.raw(text)


def inline_asm(form: MmaBsForm) -> InlineAsm:
    """Template and constraints; the scale selectors are ``n`` immediates bound to the
    form's byte-id/thread-id values."""
    groups, letters, names = mma_emit.asm_operands(form)
    n = len(letters)
    for sf, bid, tid in (("sfa", form.byte_id_a, form.thread_id_a),
                         ("sfb", form.byte_id_b, form.thread_id_b)):
        groups += [f"%{n}", f"{{%{n + 1}, %{n + 2}}}"]
        letters += ["r", "n", "n"]
        names += [sf, str(bid), str(tid)]
        n += 3
    outputs = form.registers("D")
    return InlineAsm(f"{form.opcode} {', '.join(groups)};", ",".join(letters), outputs,
                     n - outputs, tuple(names))


def add_mma_bs_test_kernel(module: Module, form: MmaBsForm, name: str = "mma_bs_test"
                           ) -> Kernel:
    """Add ``name(A, B, C, D, SFA, SFB[, E])`` for one warp to ``module`` (module doc)."""
    module.require(form, MmaBsEmitError)
    access = {op: mma_emit.operand_access(form, op) for op in OPERANDS}  # type: ignore[arg-type]
    k = module.kernel(name)
    k.maxntid = (WARP, 1, 1)
    ptrs = {op: mma_emit._global_ptr(k, op) for op in OPERANDS}
    sf_ptrs = {op: mma_emit._global_ptr(k, op) for op in ("SFA", "SFB")}
    e_ptr = mma_emit._global_ptr(k, "E") if form.is_sparse else None
    k.comment(f"{form.name}: D = (A * scale_A) @ (B * scale_B)^T + C, "
              f"scale_vec::{form.scale_vec}X, selectors a{{{form.byte_id_a}, "
              f"{form.thread_id_a}}} b{{{form.byte_id_b}, {form.thread_id_b}}}")
    lane = k.reg("u32")
    k.ins("mov.u32", lane, "%laneid")
    regs = alloc_mma_bs_registers(k, form)
    for op, rs in (("A", regs.a), ("B", regs.b), ("C", regs.c)):
        mma_emit._load(k, ptrs[op], access[op], lane, rs)
    for op, reg in (("SFA", regs.sfa), ("SFB", regs.sfb), ("E", regs.e)):
        base = e_ptr if op == "E" else sf_ptrs[op]
        if reg is None or base is None:
            continue
        k.ins("ld.global.b32", reg, f"[{mma_emit._word_address(k, base, lane)}]")
    emit_mma_bs(k, form, regs.d, regs.a, regs.b, regs.c, regs.sfa, regs.sfb, e=regs.e)
    mma_emit._store(k, ptrs["D"], access["D"], lane, regs.d)
    return k


def build_mma_bs_test_module(form: MmaBsForm, target_: Target | str) -> Module:
    """A module with one kernel ``mma_bs_test`` for ``form`` on ``target_`` at the lowest
    ``.version`` the form accepts there."""
    t = target(target_)
    if not form.available_on(t):
        raise MmaBsEmitError(f"{form.name} is not available on {t.name} (needs {form.feature})")
    module = Module(t, features=[form.feature], version=form.ptx_version_for(t))
    add_mma_bs_test_kernel(module, form)
    return module
