"""Register MMA forms (mma.sync / mma.sp) emitted three ways, all read off one MmaForm.

1. :func:`emit_mma` appends the instruction to a :class:`~nvatom.ptx.builder.Kernel`, given
   register lists whose counts and types it checks against ``form.registers(op)`` and
   ``form.register_type(op)``; sparse forms add the metadata register ``e`` and the
   sparsity-selector immediate ``f``.
2. :func:`inline_asm` gives the same instruction as an inline-asm template with its
   constraint string, for CUDA C++ ``asm volatile`` or Triton ``inline_asm_elementwise``.
   Constraints follow CUTLASS's convention (cute/arch/mma_sm80.hpp): outputs ``=f`` (f32),
   ``=r`` (b32: packed f16x2 and s32), ``=d`` (f64); inputs ``r``, ``f``, ``d`` alike; the
   metadata ``r`` and the selector ``n`` (an immediate).
3. :func:`build_mma_test_module` builds a kernel ``mma_test(A, B, C, D[, E])`` in which one
   warp loads its fragments from global memory, executes the instruction once and stores D.

Memory contract of the test kernel.  A is the M x K tile (sparse forms: the compressed
M x K/2 tile), row-major; B is given as its transpose, N x K row-major (the "col" operand of
``.row.col``); C and D are M x N row-major in their own types.  Sub-byte elements are packed
along K, element 0 in the lowest bits (as ``nvatom.dtypes.pack_b32`` packs them).  Sparse
forms take E: 32 ``.b32`` metadata words, lane ``l`` loading ``E[l]``; the selector is an
immediate chosen when the kernel is built.  m8n8k4 (SM70) is the exception on two counts:
its operand majors are part of the form (A ``.col`` is stored column-major, B ``.row`` as
K x N row-major; :func:`operand_major`), and a warp computes four independent 8x8x4
products, one per quad-pair, so each operand is four tiles stored one after the other,
quad-pair ``q`` using the ``q``-th (:func:`warp_products`).

Every address comes from the layout algebra: composing the tile's memory layout (row- or
column-major, :func:`operand_major`) with the atom's (lane, value) layout
``form.tv_layout(op)`` gives (lane, value) -> element offset; its lane part is evaluated at
run time (:func:`nvatom.ptx.layout_eval.emit_layout_offset`) and its value part is folded
into constant offsets.  A register is loaded with one ``ld.global.b32`` (``.f32``, or
``.f64`` for f64 elements), which needs the values it packs to be contiguous and 32-bit
aligned in memory.  They are for every form with its tiles packed along K (m8n8k4: along
its registers' major), and :func:`operand_access` fails with a clear error otherwise.

Source: PTX ISA, "Warp Level Matrix Multiply-Accumulate Instructions" (mma, mma.sp, their
fragment figures); the inline-asm conventions of CUTLASS's cute/arch/mma_sm80.hpp.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

from nvatom.arch import Target, target
from nvatom.atoms import fragments_sm70
from nvatom.atoms.mma import MmaForm
from nvatom.errors import NvatomError
from nvatom.layout import Layout, composition, make_layout, right_inverse, size
from nvatom.ptx.builder import Kernel, Module, Reg
from nvatom.ptx.layout_eval import emit_layout_offset, register_bytes

__all__ = [
    "InlineAsm",
    "MmaEmitError",
    "MmaRegisters",
    "OperandAccess",
    "add_mma_test_kernel",
    "alloc_mma_registers",
    "build_mma_test_module",
    "emit_mma",
    "inline_asm",
    "operand_access",
    "operand_major",
    "operand_memory_layout",
    "operand_tile",
    "warp_products",
]

OPERANDS = ("A", "B", "C", "D")
WARP = 32

# PTX register type of an operand -> the register types that may stand for it.
_REG_TYPES = {"b32": ("b32", "u32", "s32"), "f32": ("f32",), "f64": ("f64",)}
# PTX register type -> inline-asm constraint letter (GCC/NVCC: r = 32-bit int, f = f32,
# d = f64).
_CONSTRAINT = {"b32": "r", "f32": "f", "f64": "d"}


class MmaEmitError(NvatomError):
    """A register MMA form that cannot be emitted as asked (operands, selector, target)."""


# --------------------------------------------------------------------------- (1) instruction


@dataclasses.dataclass(frozen=True)
class MmaRegisters:
    """One set of operand registers for a form: D, A, B, C and the metadata register E."""

    d: list[Reg]
    a: list[Reg]
    b: list[Reg]
    c: list[Reg]
    e: Reg | None = None


def alloc_mma_registers(k: Kernel, form: MmaForm) -> MmaRegisters:
    """Fresh registers of the right types and counts for every operand of ``form``."""
    regs = {op: k.regs(form.register_type(op), form.registers(op)) for op in OPERANDS}
    e = k.reg("b32") if form.is_sparse else None
    return MmaRegisters(regs["D"], regs["A"], regs["B"], regs["C"], e)


def check_operand(form: Any, op: str, regs: Sequence[Reg | str],
                  error: Callable[[str], Exception] = MmaEmitError) -> None:
    """``regs`` are as many registers of ``form``'s type for operand ``op`` as the form takes
    (any form with ``name``, ``registers`` and ``register_type``: mma.sync, SM120 mma_bs)."""
    want_n, want_t = form.registers(op), form.register_type(op)
    if len(regs) != want_n:
        raise error(
            f"{form.name}: operand {op} takes {want_n} .{want_t} register(s), got {len(regs)}"
        )
    for r in regs:
        if isinstance(r, Reg) and r.type not in _REG_TYPES[want_t]:
            raise error(
                f"{form.name}: operand {op} takes .{want_t} registers, got {r.name} "
                f"of type .{r.type}"
            )


def _selector(form: MmaForm, selector: int | None) -> int:
    if selector is None:
        return form.selectors[0]
    if selector not in form.selectors:
        legal = ", ".join(map(str, form.selectors))
        raise MmaEmitError(
            f"{form.name}: sparsity selector {selector} is not legal (ptxas accepts {legal})"
        )
    return selector


def emit_mma(
    k: Kernel,
    form: MmaForm,
    d: Sequence[Reg | str],
    a: Sequence[Reg | str],
    b: Sequence[Reg | str],
    c: Sequence[Reg | str],
    *,
    e: Reg | str | None = None,
    selector: int | None = None,
) -> None:
    """Append ``form``'s instruction with these operand registers to ``k``.

    Register counts and types are checked against the form.  A sparse form needs the
    metadata register ``e``; ``selector`` defaults to the form's first legal value.
    """
    for op, regs in zip(OPERANDS, (a, b, c, d), strict=True):
        check_operand(form, op, regs)
    k.need_atom(form, MmaEmitError)
    if not form.is_sparse:
        if e is not None or selector is not None:
            raise MmaEmitError(f"{form.name} is dense: it takes no metadata or selector")
        k.ins(form.opcode, list(d), list(a), list(b), list(c))
        return
    if e is None:
        raise MmaEmitError(f"{form.name}: a sparse form needs the metadata register e")
    if isinstance(e, Reg) and e.type not in _REG_TYPES["b32"]:
        raise MmaEmitError(f"{form.name}: the metadata register is .b32, got .{e.type}")
    k.ins(form.opcode, list(d), list(a), list(b), list(c), e, f"0x{_selector(form, selector):x}")


# --------------------------------------------------------------------------- (2) inline asm


@dataclasses.dataclass(frozen=True)
class InlineAsm:
    """An inline-asm template: operands ``%0 ...`` are the outputs, then the inputs."""

    template: str
    constraints: str  # comma-separated, outputs first: "=f,=f,...,r,r,...,f,f"
    outputs: int  # number of output operands (D registers)
    inputs: int  # number of input operands (A, B, C registers; sparse: e and the selector)
    names: tuple[str, ...] = ()  # C++ expressions bound to each constraint (SM120 mma_bs)

    @property
    def constraint_list(self) -> tuple[str, ...]:
        return tuple(self.constraints.split(","))


def asm_operands(form: Any) -> tuple[list[str], list[str], list[str]]:
    """The operands of a warp MMA's inline asm, numbered from ``%0``: the D, A, B, C register
    groups (``{%0,%1,...}``), a sparse form's metadata and selector immediate (``%e, %f``);
    their constraint letters (outputs ``=``; selector ``n``) and the C++ names bound to them
    (``d[0]`` ..., ``e`` and the form's first legal selector).  Shared by the register MMA
    and the SM120 block-scaled forms (:mod:`nvatom.ptx.sm120_emit` adds the scales)."""
    groups: list[str] = []
    letters: list[str] = []
    names: list[str] = []
    n = 0
    for op in ("D", "A", "B", "C"):
        count = form.registers(op)
        groups.append("{" + ",".join(f"%{n + i}" for i in range(count)) + "}")
        letters += [("=" if op == "D" else "") + _CONSTRAINT[form.register_type(op)]] * count
        names += [f"{op.lower()}[{i}]" for i in range(count)]
        n += count
    if form.is_sparse:
        groups += [f"%{n}", f"%{n + 1}"]
        letters += ["r", "n"]
        names += ["e", str(form.selectors[0])]
    return groups, letters, names


def inline_asm(form: MmaForm) -> InlineAsm:
    """The inline-asm template and constraint string of ``form``.

    e.g. for sm80.mma.m16n8k16.f32.f16.f16.f32: ``mma.sync.aligned.m16n8k16.row.col.f32.f16
    .f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%10,%11,%12,%13};`` with
    ``=f,=f,=f,=f,r,r,r,r,r,r,f,f,f,f``.  Sparse forms end with ``%e, %f`` constrained
    ``r`` (metadata) and ``n`` (selector immediate).
    """
    groups, letters, _ = asm_operands(form)
    n = len(letters)
    outputs = form.registers("D")
    return InlineAsm(
        template=f"{form.opcode} {', '.join(groups)};",
        constraints=",".join(letters),
        outputs=outputs,
        inputs=n - outputs,
    )


# --------------------------------------------------------------------------- (3) test kernel


def operand_tile(form: MmaForm, op: str) -> tuple[int, int]:
    """(rows, cols) of one product's operand tile, in the atom's codomain orientation:
    A M x K (sparse: the compressed M x K/2), B N x K, C and D M x N."""
    op = op.upper()
    if op == "A":
        return form.m, form.k // 2 if form.is_sparse else form.k
    if op == "B":
        return form.n, form.k
    if op in ("C", "D"):
        return form.m, form.n
    raise MmaEmitError(f"{form.name}: unknown operand '{op}' (A, B, C or D)")


def operand_major(form: MmaForm, op: str) -> str:
    """Which way the operand's tile is stored: "row" (row-major rows x cols) or "col".

    A follows ``.alayout``; B, an N x K tile, is row-major for ``.col`` (K x N column-major)
    and column-major for ``.row``; C and D are row-major.  Only m8n8k4 has a choice: every
    other form is ``.row.col``, i.e. A and B packed along K.
    """
    op = op.upper()
    if op == "A":
        return form.alayout
    if op == "B":
        return "row" if form.blayout == "col" else "col"
    operand_tile(form, op)  # validates the name
    return "row"


def warp_products(form: MmaForm) -> int:
    """Independent products a warp computes with one instruction: 4 for m8n8k4 (one per
    quad-pair), 1 otherwise."""
    return WARP // size(form.tv_layout("A")[0])


def _tile_memory(form: MmaForm, op: str) -> Layout:
    """Column-major tile coordinate ``r + rows * c`` -> element offset in memory."""
    rows, cols = operand_tile(form, op)
    if operand_major(form, op) == "row":
        return Layout((rows, cols), (cols, 1))
    return Layout((rows, cols), (1, rows))


def _lanes_of_threads(form: MmaForm, nthreads: int) -> Layout:
    """(atom thread, product) -> lane, for atoms narrower than a warp (m8n8k4 quad-pairs)."""

    if nthreads != 8 or form.shape_str != "m8n8k4":
        raise MmaEmitError(
            f"{form.name}: the (lane, value) layout covers {nthreads} threads; only warp-wide "
            "atoms and the m8n8k4 quad-pair atoms are known"
        )
    products = fragments_sm70.QUAD_PAIRS
    step = fragments_sm70.m8n8k4_lane(0, 1) - fragments_sm70.m8n8k4_lane(0, 0)
    return make_layout(fragments_sm70.m8n8k4_thr_id(), Layout(products, step))


def operand_memory_layout(form: MmaForm, op: str) -> Layout:
    """(lane, value) -> element offset of operand ``op`` in the test kernel's memory.

    The atom's (thread, value) layout maps to a column-major coordinate ``r + rows * c`` of
    the tile; composing the tile's memory layout with it gives the element offset.  Mode 0
    is the lane part, mode 1 the value part.  For m8n8k4 the atom's 8 threads are one
    quad-pair: the (thread, quad-pair) -> lane map is inverted, and quad-pair ``q`` works on
    the ``q``-th of four tiles stored one after the other.
    """
    op = op.upper()
    mem = composition(_tile_memory(form, op), form.tv_layout(op))
    nthreads = size(mem[0])
    if nthreads == WARP:
        return mem
    lanes = _lanes_of_threads(form, nthreads)
    rows, cols = operand_tile(form, op)
    products = size(lanes) // nthreads
    thread_or_product = make_layout(mem[0], Layout(products, rows * cols))
    return make_layout(composition(thread_or_product, right_inverse(lanes)), mem[1])


def _bits(form: MmaForm, op: str) -> int:
    # Forms whose elements sit in wider containers than their packed pitch (SM120
    # kind::f8f6f4: one e2m1 per byte) state the width themselves.
    element_bits = getattr(form, "element_bits", None)
    return element_bits(op) if element_bits else form.operand_type(op).pack_bits


@dataclasses.dataclass(frozen=True)
class OperandAccess:
    """How one lane reaches its registers of one operand in the test kernel's memory.

    The byte address of register ``r`` of lane ``l`` is ``base + lane_bytes(l) +
    reg_bytes[r]``; each register is one load or store of ``width`` bytes.
    """

    operand: str
    rows: int  # one product's tile, in the codomain orientation (operand_tile)
    cols: int
    major: str  # "row" or "col" (operand_major)
    products: int  # tiles stored one after the other (warp_products)
    bits: int  # element width in memory (packed)
    ptx_type: str  # register / memory access type: b32, f32 or f64
    lane_bytes: Layout  # lane -> byte offset (flat modes)
    reg_bytes: tuple[int, ...]

    @property
    def width(self) -> int:
        return 8 if self.ptx_type == "f64" else 4

    @property
    def nbytes(self) -> int:
        """Bytes of all the operand's tiles in memory."""
        return self.products * self.rows * self.cols * self.bits // 8

    def address(self, lane: int, reg: int) -> int:
        return self.lane_bytes(lane) + self.reg_bytes[reg]


def operand_access(form: MmaForm, op: str) -> OperandAccess:
    """Lane and register byte offsets of operand ``op``; fails unless every register's values
    are contiguous and aligned in memory (one whole-register load per register)."""
    op = op.upper()
    mem = operand_memory_layout(form, op)
    rows, cols = operand_tile(form, op)
    major = operand_major(form, op)
    bits, ptx_type = _bits(form, op), form.register_type(op)
    lane, value = mem[0], mem[1]
    # Elements per register: f64 takes a register of its own; narrower types pack a .b32.
    per_reg = 1 if bits == 64 else 32 // bits
    nregs = form.registers(op)
    if size(value) != nregs * per_reg:
        raise MmaEmitError(
            f"{form.name}: operand {op} has {size(value)} values per lane, which do not fill "
            f"{nregs} register(s) of {per_reg} {bits}-bit element(s)"
        )
    where = f"the {major}-major {rows} x {cols} tile"
    lane_bytes, reg_bytes = register_bytes(
        lane, value, bits=bits, per_reg=per_reg, nregs=nregs, threads=WARP, error=MmaEmitError,
        operand=op, where=where, prefix=f"{form.name}: ")
    return OperandAccess(op, rows, cols, major, warp_products(form), bits, ptx_type, lane_bytes,
                         reg_bytes)


def _global_ptr(k: Kernel, name: str) -> Reg:
    raw = k.ld_param(k.param(name))
    g = k.reg("u64")
    k.ins("cvta.to.global.u64", g, raw)
    return g


def _lane_address(k: Kernel, base: Reg, access: OperandAccess, lane: Reg) -> Reg:
    off = emit_layout_offset(k, access.lane_bytes, lane)
    off64 = k.reg("u64")
    k.ins("cvt.u64.u32", off64, off)
    addr = k.reg("u64")
    k.ins("add.s64", addr, base, off64)
    return addr


def _word_address(k: Kernel, base: Reg, lane: Reg) -> Reg:
    """``base + 4 * lane``: lane's 32-bit word of a per-lane array (metadata, scale factors)."""
    off = k.reg("u32")
    k.ins("shl.b32", off, lane, 2)
    off64 = k.reg("u64")
    k.ins("cvt.u64.u32", off64, off)
    addr = k.reg("u64")
    k.ins("add.s64", addr, base, off64)
    return addr


def _load(k: Kernel, base: Reg, access: OperandAccess, lane: Reg, regs: list[Reg]) -> None:
    addr = _lane_address(k, base, access, lane)
    for reg, off in zip(regs, access.reg_bytes, strict=True):
        k.ins(f"ld.global.{access.ptx_type}", reg, f"[{addr}+{off}]")


def _store(k: Kernel, base: Reg, access: OperandAccess, lane: Reg, regs: list[Reg]) -> None:
    addr = _lane_address(k, base, access, lane)
    for reg, off in zip(regs, access.reg_bytes, strict=True):
        k.ins(f"st.global.{access.ptx_type}", f"[{addr}+{off}]", reg)


def add_mma_test_kernel(
    module: Module, form: MmaForm, name: str = "mma_test", *, selector: int | None = None
) -> Kernel:
    """Add kernel ``name(A, B, C, D[, E])`` for one warp to ``module`` (see the module doc).

    The module's target must have the form and its ``.version`` must be at least
    ``form.ptx_version_for(target)``; a sparse form's ``selector`` defaults to its first.
    """
    module.require(form, MmaEmitError)
    access = {op: operand_access(form, op) for op in OPERANDS}
    sel = _selector(form, selector) if form.is_sparse else None

    k = module.kernel(name)
    k.maxntid = (WARP, 1, 1)
    ptrs = {op: _global_ptr(k, op) for op in OPERANDS}
    e_ptr = _global_ptr(k, "E") if form.is_sparse else None
    rows_a, cols_a = operand_tile(form, "A")
    products = access["A"].products
    k.comment(
        f"{form.name}: D[{form.m}x{form.n}] = A[{rows_a}x{cols_a}] @ B[{form.n}x{form.k}]^T "
        f"+ C" + (f" ({products} products per warp)" if products > 1 else "")
        + (f", selector {sel}" if sel is not None else "")
    )
    lane = k.reg("u32")
    k.ins("mov.u32", lane, "%laneid")

    regs = alloc_mma_registers(k, form)
    for op, rs in (("A", regs.a), ("B", regs.b), ("C", regs.c)):
        _load(k, ptrs[op], access[op], lane, rs)
    if regs.e is not None and e_ptr is not None:
        k.ins("ld.global.b32", regs.e, f"[{_word_address(k, e_ptr, lane)}]")
    emit_mma(k, form, regs.d, regs.a, regs.b, regs.c, e=regs.e, selector=sel)
    _store(k, ptrs["D"], access["D"], lane, regs.d)
    return k


def build_mma_test_module(
    form: MmaForm, target_: Target | str, *, selector: int | None = None
) -> Module:
    """A module with one kernel ``mma_test(A, B, C, D[, E])`` for ``form`` on ``target_``,
    at the lowest ``.version`` the form accepts there."""
    t = target(target_)
    if not form.available_on(t):
        raise MmaEmitError(f"{form.name} is not available on {t.name} (needs {form.feature})")
    module = Module(t, features=[form.feature], version=form.ptx_version_for(t))
    add_mma_test_kernel(module, form, "mma_test", selector=selector)
    return module

