"""Copy atoms (nvatom.atoms.copy) emitted as PTX, three ways, all read off the atom's row.

1. Instructions in a :class:`~nvatom.ptx.builder.Kernel`: :func:`emit_matrix_copy`
   (ldmatrix/stmatrix), :func:`emit_ld` / :func:`emit_st` / :func:`emit_universal_copy`
   (``atom.universal_copy``), :func:`emit_cp_async` with :func:`emit_commit_group`,
   :func:`emit_wait_group` and :func:`emit_wait_all`.  Register counts and types are checked
   against the atom; :func:`alloc_copy_registers` hands out the right ones.
2. Inline asm: :func:`inline_asm` gives the template and constraint string for CUDA C++
   ``asm volatile`` or Triton ``inline_asm_elementwise``, after CUTLASS's cute/arch/copy_sm75,
   _sm80 and _sm90 headers: data registers ``r`` (``h`` for 16-bit, ``l`` for 64-bit), a
   shared-memory address as a 32-bit ``r`` (``cast_smem_ptr_to_uint``), global and local
   addresses as 64-bit ``l``, the cp.async size as an ``n`` immediate.
3. Test kernels, one warp each, whose results the GPU tests compare with the atom's layouts:
   :func:`add_matrix_copy_test_kernel` (ldmatrix: global -> the smem reference space ->
   registers -> global in (lane, register) order; stmatrix the other way),
   :func:`add_cp_async_test_kernel` (32 lanes each copy one vector through cp.async with the
   atom's zero fill and cache policy) and :func:`add_universal_copy_test_kernel` (each lane
   moves one vector global -> shared -> local -> global with the atom's ld/st).

Source: PTX ISA "ldmatrix", "stmatrix", "ld", "st", "cp.async", "cp.async.commit_group",
"cp.async.wait_group", "createpolicy"; the inline-asm conventions of CUTLASS's
cute/arch/copy_sm75.hpp, copy_sm80.hpp, copy_sm90.hpp.
"""

from __future__ import annotations

from collections.abc import Sequence

from nvatom.arch import Target, target
from nvatom.atoms.copy import (
    COMMIT_GROUP,
    GMEM,
    LMEM,
    RMEM,
    ROW_BITS,
    SMEM,
    STATE_SPACE,
    WAIT_ALL,
    WAIT_GROUP,
    MatrixCopy,
    SimtAsyncCopy,
    UniversalCopy,
)
from nvatom.errors import NvatomError
from nvatom.ptx.builder import Kernel, Module, Reg
from nvatom.ptx.mma_emit import InlineAsm

__all__ = [
    "CopyEmitError",
    "add_cp_async_test_kernel",
    "add_matrix_copy_test_kernel",
    "add_universal_copy_test_kernel",
    "alloc_copy_registers",
    "build_copy_test_module",
    "cp_async_zero_fill",
    "emit_commit_group",
    "emit_cp_async",
    "emit_ld",
    "emit_matrix_copy",
    "emit_st",
    "emit_universal_copy",
    "emit_wait_all",
    "emit_wait_group",
    "inline_asm",
]

WARP = 32
Atom = MatrixCopy | UniversalCopy | SimtAsyncCopy
Address = Reg | str

# PTX register type of a data register -> the register types that may stand for it (a .bN
# access takes any register of N bits).
_REG_TYPES = {
    "b16": ("b16", "u16", "s16", "f16", "bf16"),
    "b32": ("b32", "u32", "s32", "f32", "f16x2", "bf16x2"),
    "b64": ("b64", "u64", "s64", "f64"),
}
# PTX register type -> inline-asm constraint letter (h: 16-bit, r: 32-bit, l: 64-bit).
_CONSTRAINT = {"b16": "h", "b32": "r", "b64": "l"}
# Address constraint per memory residency.
_ADDRESS_CONSTRAINT = {SMEM: "r", GMEM: "l", LMEM: "l"}


class CopyEmitError(NvatomError):
    """A copy atom that cannot be emitted as asked (registers, operands, target)."""


def _addr(a: Address) -> str:
    return f"[{a}]"


def _register_type(atom: Atom) -> str:
    if isinstance(atom, MatrixCopy):
        return "b32"
    if isinstance(atom, UniversalCopy):
        return atom.vector_access.register_type
    raise CopyEmitError(f"{atom.name} moves no data through registers")


def _register_count(atom: Atom) -> int:
    if isinstance(atom, MatrixCopy):
        return atom.registers
    if isinstance(atom, UniversalCopy):
        return atom.vector_access.vec
    raise CopyEmitError(f"{atom.name} moves no data through registers")


def alloc_copy_registers(k: Kernel, atom: Atom) -> list[Reg]:
    """Fresh data registers of the atom's type and count (none for cp.async)."""
    if isinstance(atom, SimtAsyncCopy):
        return []
    return k.regs(_register_type(atom), _register_count(atom))


def _check_registers(atom: Atom, regs: Sequence[Reg | str]) -> None:
    want_n, want_t = _register_count(atom), _register_type(atom)
    if len(regs) != want_n:
        raise CopyEmitError(f"{atom.name} takes {want_n} .{want_t} register(s), got {len(regs)}")
    for r in regs:
        if isinstance(r, Reg) and r.type not in _REG_TYPES[want_t]:
            raise CopyEmitError(
                f"{atom.name} takes .{want_t} registers, got {r.name} of type .{r.type}")


# --------------------------------------------------------------------------- (1) instructions


def emit_matrix_copy(k: Kernel, atom: MatrixCopy, regs: Sequence[Reg | str],
                     addr: Address, *, generic: bool = False) -> None:
    """``ldmatrix... {regs}, [addr];`` or ``stmatrix... [addr], {regs};``.  ``addr`` is this
    lane's row address in shared memory (lanes past ``atom.address_lanes`` are ignored);
    with ``generic`` a 64-bit generic address of shared memory, and the instruction has no
    ``.shared`` state space (PTX ISA "ldmatrix"/"stmatrix": without a state space the
    address is generic)."""
    _check_registers(atom, regs)
    k.need_atom(atom, CopyEmitError, name_feature=False)
    opcode = atom.opcode.replace(".shared.", ".") if generic else atom.opcode
    if atom.op == "ldmatrix":
        k.ins(opcode, list(regs), _addr(addr))
    else:
        k.ins(opcode, _addr(addr), list(regs))


def _check_memory(atom: UniversalCopy, residency: str) -> None:
    if residency not in STATE_SPACE:
        raise CopyEmitError(f"{atom.name} loads and stores gmem, smem or lmem, not "
                            f"'{residency}'")


def _vector(regs: Sequence[Reg | str]) -> Reg | str | list[Reg | str]:
    return regs[0] if len(regs) == 1 else list(regs)


def emit_ld(k: Kernel, atom: UniversalCopy, residency: str, regs: Sequence[Reg | str],
            addr: Address) -> None:
    """``ld.<space>[.vN].bW regs, [addr];``"""
    _check_memory(atom, residency)
    _check_registers(atom, regs)
    k.need_atom(atom, CopyEmitError, name_feature=False)
    k.ins(atom.ld_opcode(residency), _vector(regs), _addr(addr))


def emit_st(k: Kernel, atom: UniversalCopy, residency: str, addr: Address,
            regs: Sequence[Reg | str]) -> None:
    """``st.<space>[.vN].bW [addr], regs;``"""
    _check_memory(atom, residency)
    _check_registers(atom, regs)
    k.need_atom(atom, CopyEmitError, name_feature=False)
    k.ins(atom.st_opcode(residency), _addr(addr), _vector(regs))


def emit_universal_copy(
    k: Kernel,
    atom: UniversalCopy,
    src: tuple[str, Address | Sequence[Reg | str]],
    dst: tuple[str, Address | Sequence[Reg | str]],
) -> list[Reg | str]:
    """One universal copy: each side is ``(residency, address)`` for memory or ``("rmem",
    registers)``.  Memory to memory goes through fresh registers (ld then st); registers to
    registers is one ``mov`` per register.  Returns the registers that held the value."""
    (sres, sval), (dres, dval) = src, dst
    for res in (sres, dres):
        if res not in (RMEM, *STATE_SPACE):
            raise CopyEmitError(f"{atom.name} copies between rmem, gmem, smem and lmem, "
                                f"not '{res}'")
    if sres == RMEM:
        regs = list(sval)  # type: ignore[arg-type]
        _check_registers(atom, regs)
    else:
        regs = dval if dres == RMEM else alloc_copy_registers(k, atom)  # type: ignore[assignment]
        emit_ld(k, atom, sres, regs, sval)  # type: ignore[arg-type]
    if dres == RMEM:
        if sres == RMEM:
            dregs = list(dval)  # type: ignore[arg-type]
            _check_registers(atom, dregs)
            for d, s in zip(dregs, regs, strict=True):
                k.ins(f"mov.{_register_type(atom)}", d, s)
            return dregs  # type: ignore[return-value]
        return list(regs)
    emit_st(k, atom, dres, dval, regs)  # type: ignore[arg-type]
    return list(regs)


def emit_cp_async(
    k: Kernel,
    atom: SimtAsyncCopy,
    dst: Address,
    src: Address,
    *,
    fill: Reg | str | int | None = None,
    cache_policy: Reg | str | None = None,
) -> None:
    """``cp.async.<cache>.shared.global[...] [dst], [src], N[, fill][, cache-policy];``

    ``dst`` is a shared-memory address, ``src`` a global one.  ``fill`` is the zero-fill
    operand the atom takes: the source size in bytes (a ``.b32`` register or an immediate,
    at most N) for ``src_size``, a predicate for ``ignore_src``.  ``cache_policy`` is the
    64-bit ``createpolicy`` result the ``.L2::cache_hint`` atoms take.
    """
    if isinstance(fill, Reg):
        want = ("pred",) if atom.fill == "ignore_src" else _REG_TYPES["b32"]
        if fill.type not in want:
            raise CopyEmitError(f"{atom.name}: the {atom.fill} operand is .{want[0]}, got "
                                f"{fill.name} of type .{fill.type}")
    if isinstance(fill, int):
        if atom.fill != "src_size":
            raise CopyEmitError(f"{atom.name}: only src-size may be an immediate")
        if not 0 <= fill <= atom.nbytes:
            raise CopyEmitError(f"{atom.name}: src-size {fill} is not in [0, {atom.nbytes}]")
    if isinstance(cache_policy, Reg) and cache_policy.type not in _REG_TYPES["b64"]:
        raise CopyEmitError(f"{atom.name}: the cache policy is .b64, got {cache_policy.name}")
    try:
        ops = atom.operands(str(dst), str(src), None if fill is None else str(fill),
                            None if cache_policy is None else str(cache_policy))
    except NvatomError as e:
        raise CopyEmitError(str(e)) from None
    k.need_atom(atom, CopyEmitError, name_feature=False)
    k.ins(atom.opcode, *ops)


def emit_commit_group(k: Kernel) -> None:
    k.need_feature("cp.async", COMMIT_GROUP, CopyEmitError)
    k.ins(COMMIT_GROUP)


def emit_wait_group(k: Kernel, n: int) -> None:
    """Wait until at most ``n`` committed cp.async groups are pending (``n`` >= 0; ptxas
    itself does not range-check the immediate)."""
    if not isinstance(n, int) or n < 0:
        raise CopyEmitError(f"cp.async.wait_group takes an immediate >= 0, got {n!r}")
    k.need_feature("cp.async", WAIT_GROUP, CopyEmitError)
    k.ins(WAIT_GROUP, n)


def emit_wait_all(k: Kernel) -> None:
    k.ins(WAIT_ALL)


def cp_async_zero_fill(atom: SimtAsyncCopy, lane: int) -> int:
    """Bytes the test kernel's lane ``lane`` really reads (the rest are zero-filled): src-size
    ``lane % (N + 1)``; ignore-src on odd lanes; all N otherwise."""
    if atom.fill == "src_size":
        return lane % (atom.nbytes + 1)
    if atom.fill == "ignore_src":
        return 0 if lane % 2 else atom.nbytes
    return atom.nbytes


# --------------------------------------------------------------------------- (2) inline asm


def _group(start: int, count: int) -> str:
    return "{" + ",".join(f"%{start + i}" for i in range(count)) + "}"


def inline_asm(atom: Atom, residency: str | None = None, *, store: bool = False) -> InlineAsm:
    """The inline-asm template and constraints of ``atom``.

    * ldmatrix ``x4``: ``ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];`` with
      ``=r,=r,=r,=r,r``; stmatrix: ``[%0], {%1,...}`` with ``r,r,...``.
    * universal copy: a load (``store=False``) or store from ``residency`` (gmem, smem, lmem),
      e.g. ``ld.global.v4.b32 {%0,%1,%2,%3}, [%4];`` with ``=r,=r,=r,=r,l``.
    * cp.async: ``[%0], [%1], %2`` with ``r,l,n`` (pass N for ``%2``), then ``r`` for src-size,
      an ``r`` that is nonzero to ignore the source (turned into a predicate inside the
      template), and ``l`` for the cache policy.
    """
    if isinstance(atom, MatrixCopy):
        n = atom.registers
        if atom.op == "ldmatrix":
            return InlineAsm(f"{atom.opcode} {_group(0, n)}, [%{n}];",
                             ",".join(["=r"] * n + ["r"]), n, 1)
        return InlineAsm(f"{atom.opcode} [%0], {_group(1, n)};", ",".join(["r"] * (n + 1)),
                         0, n + 1)
    if isinstance(atom, UniversalCopy):
        if residency not in STATE_SPACE:
            raise CopyEmitError(f"{atom.name}: name the memory side (gmem, smem or lmem), not "
                                f"{residency!r}")
        n = atom.vector_access.vec
        letter = _CONSTRAINT[atom.vector_access.register_type]
        regs = _group(1 if store else 0, n) if n > 1 else f"%{1 if store else 0}"
        addr_c = _ADDRESS_CONSTRAINT[residency]
        if store:
            return InlineAsm(f"{atom.st_opcode(residency)} [%0], {regs};",
                             ",".join([addr_c] + [letter] * n), 0, n + 1)
        return InlineAsm(f"{atom.ld_opcode(residency)} {regs}, [%{n}];",
                         ",".join([f"={letter}"] * n + [addr_c]), n, 1)
    ops = ["[%0]", "[%1]", "%2"]
    letters = ["r", "l", "n"]
    pre = post = ""
    if atom.fill == "src_size":
        ops.append("%3")
        letters.append("r")
    elif atom.fill == "ignore_src":
        pre, post = f"{{ .reg .pred p; setp.ne.b32 p, %{len(ops)}, 0; ", " }"
        ops.append("p")
        letters.append("r")
    if atom.cache_policy.cache_hint:
        ops.append(f"%{len(letters)}")
        letters.append("l")
    return InlineAsm(f"{pre}{atom.opcode} {', '.join(ops)};{post}", ",".join(letters), 0,
                     len(letters))


# --------------------------------------------------------------------------- (3) test kernels


def _global_ptr(k: Kernel, name: str) -> Reg:
    raw = k.ld_param(k.param(name))
    g = k.reg("u64")
    k.ins("cvta.to.global.u64", g, raw)
    return g


def _offset(k: Kernel, base: Reg, lane: Reg, scale: int, *, modulo: int | None = None) -> Reg:
    """``base + (lane [% modulo]) * scale`` with ``base`` 32- or 64-bit."""
    idx = lane
    if modulo is not None:
        idx = k.reg("u32")
        k.ins("rem.u32", idx, lane, modulo)
    if base.type == "u64":
        out = k.reg("u64")
        k.ins("mad.wide.u32", out, idx, scale, base)
    else:
        out = k.reg("u32")
        k.ins("mad.lo.u32", out, idx, scale, base)
    return out


def _shared_base(k: Kernel, name: str, nbytes: int) -> Reg:
    k.shared(name, nbytes)
    base = k.reg("u32")
    k.ins("mov.u32", base, name)
    return base


def _warp_kernel(module: Module, atom: Atom, name: str, comment: str | None = None
                 ) -> tuple[Kernel, Reg, Reg, Reg]:
    """A one-warp kernel ``name(IN, OUT)``: (kernel, IN, OUT global pointers, %laneid); the
    kernel's first line is the comment ``atom.name: comment`` (default: the opcode)."""
    module.require(atom, CopyEmitError, name_feature=False)
    k = module.kernel(name)
    k.maxntid = (WARP, 1, 1)
    src, dst = _global_ptr(k, "IN"), _global_ptr(k, "OUT")
    k.comment(f"{atom.name}: {comment or getattr(atom, 'opcode', atom.name)}")
    lane = k.reg("u32")
    k.ins("mov.u32", lane, "%laneid")
    return k, src, dst, lane


def add_matrix_copy_test_kernel(module: Module, atom: MatrixCopy, name: str) -> Kernel:
    """Kernel ``name(IN, OUT)`` for one warp.

    ldmatrix: IN is the smem reference space (``atom.address_lanes`` rows of 16 bytes, the
    matrices one after the other); the warp copies it to shared memory, lane ``l`` passes the
    address of row ``l % address_lanes`` and the registers go to OUT, lane ``l``'s register
    ``r`` at word ``l * registers + r``.  stmatrix: IN holds the registers that way and OUT
    receives the reference space.  So OUT bit ``b`` of lane ``l``'s registers is reference bit
    ``atom.register_layout(1)(l, b)`` (ldmatrix), and the other way round for stmatrix.
    """
    k, src, dst, lane = _warp_kernel(module, atom, name)
    rows = atom.address_lanes
    smem = _shared_base(k, "tile", rows * ROW_BITS // 8)
    row = UniversalCopy(ROW_BITS)
    regs = alloc_copy_registers(k, atom)
    words = atom.registers
    active = k.reg("pred")
    k.ins("setp.lt.u32", active, lane, rows)
    row_addr = _offset(k, smem, lane, ROW_BITS // 8, modulo=rows)
    if atom.op == "ldmatrix":
        data = alloc_copy_registers(k, row)
        k.ins("bra", "SKIP_IN", pred=f"!{active}")
        emit_ld(k, row, GMEM, data, _offset(k, src, lane, ROW_BITS // 8))
        emit_st(k, row, SMEM, row_addr, data)
        k.label("SKIP_IN")
        k.ins("bar.warp.sync", -1)
        emit_matrix_copy(k, atom, regs, row_addr)
        out = _offset(k, dst, lane, 4 * words)
        for r, reg in enumerate(regs):
            k.ins("st.global.b32", f"[{out}+{4 * r}]", reg)
        return k
    inp = _offset(k, src, lane, 4 * words)
    for r, reg in enumerate(regs):
        k.ins("ld.global.b32", reg, f"[{inp}+{4 * r}]")
    emit_matrix_copy(k, atom, regs, row_addr)
    k.ins("bar.warp.sync", -1)
    data = alloc_copy_registers(k, row)
    k.ins("bra", "SKIP_OUT", pred=f"!{active}")
    emit_ld(k, row, SMEM, data, row_addr)
    emit_st(k, row, GMEM, _offset(k, dst, lane, ROW_BITS // 8), data)
    k.label("SKIP_OUT")
    return k


def add_cp_async_test_kernel(module: Module, atom: SimtAsyncCopy, name: str) -> Kernel:
    """Kernel ``name(IN, OUT)`` for one warp: lane ``l`` copies N bytes at ``IN + l * N`` to
    shared memory with the atom (zero fill per :func:`cp_async_zero_fill`; an evict-last
    ``createpolicy`` when the atom takes a cache policy), commits, waits for the group, and
    copies the shared bytes to ``OUT + l * N``."""
    k, src, dst, lane = _warp_kernel(module, atom, name)
    n = atom.nbytes
    smem = _shared_base(k, "buf", WARP * n)
    s_addr = _offset(k, smem, lane, n)
    fill: Reg | None = None
    if atom.fill == "src_size":
        fill = k.reg("u32")
        k.ins("rem.u32", fill, lane, n + 1)
    elif atom.fill == "ignore_src":
        odd = k.reg("u32")
        k.ins("and.b32", odd, lane, 1)
        fill = k.reg("pred")
        k.ins("setp.ne.u32", fill, odd, 0)
    policy: Reg | None = None
    if atom.cache_policy.cache_hint:
        policy = k.reg("b64")
        k.ins("createpolicy.fractional.L2::evict_last.b64", policy, "1.0")
    emit_cp_async(k, atom, s_addr, _offset(k, src, lane, n), fill=fill, cache_policy=policy)
    emit_commit_group(k)
    emit_wait_group(k, 0)
    k.ins("bar.warp.sync", -1)
    uc = UniversalCopy(atom.bits)
    emit_universal_copy(k, uc, (SMEM, s_addr), (GMEM, _offset(k, dst, lane, n)))
    return k


def add_universal_copy_test_kernel(module: Module, atom: UniversalCopy, name: str) -> Kernel:
    """Kernel ``name(IN, OUT)`` for one warp: lane ``l`` moves ``bits / 8`` bytes from
    ``IN + l * bytes`` through shared and local memory to ``OUT + l * bytes``, every step with
    the atom's ld/st (so OUT must equal IN)."""
    k, src, dst, lane = _warp_kernel(module, atom, name,
                                     f"{atom.ld_opcode(GMEM)} -> shared -> local -> global")
    n = atom.bits // 8
    smem = _shared_base(k, "buf", WARP * n)
    s_addr = _offset(k, smem, lane, n)
    k.raw(f".local .align 16 .b8 scratch[{n}];")
    l_addr = k.reg("u64")
    k.ins("mov.u64", l_addr, "scratch")
    emit_universal_copy(k, atom, (GMEM, _offset(k, src, lane, n)), (SMEM, s_addr))
    emit_universal_copy(k, atom, (SMEM, s_addr), (LMEM, l_addr))
    emit_universal_copy(k, atom, (LMEM, l_addr), (GMEM, _offset(k, dst, lane, n)))
    return k


def build_copy_test_module(atoms: Sequence[Atom], target_: Target | str) -> tuple[Module,
                                                                                  list[str]]:
    """One module with a test kernel per atom (``copy_test_<i>``) at the lowest ``.version``
    all of them accept on ``target_``; returns it and the kernel names in order."""
    t = target(target_)
    version = max([t.min_ptx, *(a.ptx_version_for(t) for a in atoms)])
    module = Module(t, version=version)
    names = []
    for i, a in enumerate(atoms):
        name = f"copy_test_{i}"
        if isinstance(a, MatrixCopy):
            add_matrix_copy_test_kernel(module, a, name)
        elif isinstance(a, SimtAsyncCopy):
            add_cp_async_test_kernel(module, a, name)
        else:
            add_universal_copy_test_kernel(module, a, name)
        names.append(name)
    return module, names
