"""Lowering of verified ``cute_nvgpu`` IR to PTX through the project's PTX builder.

Every ``func.func`` becomes one ``.entry`` kernel.  Its arguments become parameters:
``!cute.ptr<e, gmem>`` a ``.u64`` (converted with ``cvta.to.global``), integers a ``.u32``.
Each ``nv_tileas.make_tiled_tma_desc`` is hoisted into a by-value 128-byte parameter (the
kernel-entry ABI of docs/spec-deviations.md#tma-lowering: the host encodes the CUtensorMap,
:class:`TmaParam` says how).

Values map to registers: integers to ``.b32``/``.b64`` registers, a register fragment
(``cute.alloc_rmem``) to its registers (zero-filled), a shared buffer to its 32-bit shared
address, a tensor view to its base address, a TMEM buffer to its tcgen05 address, an atom
to nothing (it is static).  Atom applications call the emitters of ``nvatom.ptx``:
``emit_mma`` (mma.sync), ``emit_wgmma`` with the WGMMA protocol checked by
``WgmmaSequence``, ``copy_emit`` (ld/st, ldmatrix/stmatrix, cp.async; swizzled shared
memory addressed with ``layout_eval.emit_swizzle`` per access), ``tma_emit`` (mbarriers,
``cp.async.bulk.tensor`` with multicast/im2col/cache hints, ``tensormap.replace``) and
``tcgen05_emit`` (TMEM allocation, ``tcgen05.mma``/``commit``/``ld``/``st``).  The
``.version`` is the lowest one the target and every lowered atom accept.  ``scf.for`` becomes
a counted loop (no loop-carried values).

Source: PTX ISA chapters of the emitters used ("cp.async.bulk.tensor", "mbarrier": the
barrier's transaction count is raised by the bytes the transfer completes; "tensormap.replace");
the specification's TMA lowering and descriptor mutation (docs/spec-deviations.md#tma-lowering,
#tma-descriptor-mutation).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from nvatom.arch import Tier
from nvatom.atoms import tma as T
from nvatom.atoms.copy import MatrixCopy, SimtAsyncCopy, UniversalCopy
from nvatom.atoms.interfaces import BlockScaleAtom, TmemAtom
from nvatom.atoms.sm90 import WgmmaForm
from nvatom.atoms.universal import UniversalFma
from nvatom.atoms.wgmma_fragments import WARPGROUP
from nvatom.errors import NvatomError
from nvatom.ir import dialect as DL
from nvatom.ir import lower_sync as LS
from nvatom.ir import types as TY
from nvatom.ir import xdsl_adapter as X
from nvatom.ir.driver import Diagnostic, IRError, Module, internal_error
from nvatom.ir.fragments import WARP, FragmentAccess, fragment_access
from nvatom.ir.lower_ext import LOWERINGS, descriptor_box, generic_shared
from nvatom.ir.lower_umma import Tcgen05Lowering
from nvatom.ir.lower_values import LowerError, _Addr, _footprint, _Frag, _int_bits, arith_bits
from nvatom.ir.syntax import layout_text
from nvatom.layout import ComposedLayout, Layout, Swizzle, size
from nvatom.ptx import copy_emit as CE
from nvatom.ptx import sync_emit as SE
from nvatom.ptx import tiled_mma_emit as tm
from nvatom.ptx import tma_emit as TE
from nvatom.ptx.builder import Kernel, Reg
from nvatom.ptx.builder import Module as PtxModule
from nvatom.ptx.copy_emit import emit_commit_group, emit_wait_group
from nvatom.ptx.layout_eval import emit_layout_offset, emit_swizzle, flat_modes
from nvatom.ptx.mma_emit import emit_mma
from nvatom.ptx.sm120_emit import emit_mma_bs
from nvatom.ptx.wgmma_emit import WgmmaSequence, _desc_regs, emit_scale_d, k_step_descriptors

__all__ = ["FragmentAccess", "LowerError", "Lowered", "TmaParam", "fragment_access", "lower"]


@dataclasses.dataclass(frozen=True)
class TmaParam:
    """A hoisted TMA descriptor parameter: the host encodes it from these facts."""

    param: str  # the kernel parameter's name
    tensor_arg: int | None  # index of the kernel argument holding the tensor's address
    gmem_layout: str
    element_bits: int
    box: tuple[int, ...] | None  # from the partition (innermost first)
    swizzle_bytes: int | None


@dataclasses.dataclass
class KernelInfo:
    name: str
    params: list[str]  # parameter kinds in order: "ptr", "u32", "tma"
    ptx_params: tuple[tuple[str, str], ...]  # (name, PTX type; b8[N]@ALIGN for byte arrays)
    tma: list[TmaParam]
    threads: int  # threads the atoms need per CTA (32 mma.sync, 128 WGMMA)
    shared_bytes: int
    cluster: tuple[int, int, int] | None = None  # the launch's cluster (.reqnctapercluster)
    dynamic_shared: int = 0  # dynamic shared-memory bytes to launch with (lower_sync)


@dataclasses.dataclass
class Lowered:
    ptx: str
    target: str
    kernels: list[KernelInfo]


# --------------------------------------------------------------------------- values
@dataclasses.dataclass
class _Unlowerable:
    reason: str


@dataclasses.dataclass
class _Desc:
    reg: Reg  # generic address of the tensor map parameter
    info: TmaParam


class _KernelLowering(Tcgen05Lowering):
    def __init__(self, mod: Module, vctx: DL.VerifyCtx, ptx: PtxModule, fn: Any) -> None:
        self.mod, self.v, self.fn = mod, vctx, fn
        self.t = vctx.target
        self.k: Kernel = ptx.kernel(fn.sym_name.data)
        self.vals: dict[Any, Any] = {}
        self.threads = 1
        self.shared = 0
        self.params: list[str] = []
        self.tma: list[TmaParam] = []
        self._tid: Reg | None = None
        self._n = 0

        self.wg = WgmmaSequence(self.k)
        self._t5: Any = None  # the tcgen05 emitter, once the kernel uses TMEM
        self.ext: dict[str, Any] = {}  # state of the nvatom.ir.lower_sync lowerings

    def need_threads(self, threads: int) -> None:
        """The kernel needs at least ``threads`` threads (a warp-wide or warpgroup-wide
        instruction); the PTX version each instruction needs is recorded by its emitter on
        the kernel (nvatom.ptx.builder), which sets the module's ``.version``."""
        self.threads = max(self.threads, threads)

    def fresh(self, stem: str) -> str:
        self._n += 1
        return f"{stem}{self._n}"

    def tid(self) -> Reg:
        if self._tid is None:
            self._tid = self.k.reg("u32")
            self.k.ins("mov.u32", self._tid, "%tid.x")
        return self._tid

    # ------------------------------------------------------------------ entry
    def run(self) -> KernelInfo:
        cluster = self._cluster_shape()
        LS.kernel_attributes(self)
        for i, arg in enumerate(X.block_args(self.fn)):
            self._param(i, arg)
        self.tid()
        self._block(self.fn.body.blocks[0])
        self.wg.finish()
        for v in self.vals.values():
            if isinstance(v, _Unlowerable):
                raise LowerError(v.reason)
        ptx_params = tuple((p.name, p.type if p.nbytes is None else f"b8[{p.nbytes}]@{p.align}")
                           for p in self.k.params)
        return KernelInfo(self.k.name, self.params, ptx_params, self.tma,
                          LS.block_threads(self), self.shared, cluster,
                          LS.dynamic_shared_bytes(self))

    def _cluster_shape(self) -> tuple[int, int, int] | None:
        """The kernel attribute ``cluster = [x, y, z]``: the CTAs per cluster the kernel
        requires (``.reqnctapercluster``, PTX ISA "Cluster Dimension Directives")."""
        attr = self.fn.attributes.get("cluster")
        if attr is None:
            return None
        dims = X.int_list(attr)
        if dims is None or not 1 <= len(dims) <= 3 or any(d < 1 for d in dims):
            raise LowerError(f"the kernel attribute cluster = {X.print_attr(attr)} is not a "
                             "list of 1 to 3 positive integers")
        shape = (*dims, 1, 1)[:3]
        if self.t.tier < Tier.SM90:
            raise LowerError(f"a cluster launch needs sm_90 or later, not {self.t.name}")
        if shape[0] * shape[1] * shape[2] > 8:
            raise LowerError(f"a cluster of {shape} has more than 8 CTAs (the portable "
                             "cluster size)")
        self.k.reqnctapercluster = shape
        return shape  # type: ignore[return-value]

    def _param(self, i: int, arg: Any) -> None:
        t = arg.type
        name = f"arg{i}"
        if isinstance(t, TY.PtrTypeT):
            p = self.k.param(name, "u64")
            raw = self.k.ld_param(p)
            g = self.k.reg("u64")
            self.k.ins("cvta.to.global.u64", g, raw)
            self.vals[arg] = g
            self.params.append("ptr")
        elif X.is_integer_like(t) and _int_bits(t) <= 32:
            self.vals[arg] = self.k.ld_param(self.k.param(name, "u32"))
            self.params.append("u32")
        elif isinstance(t, (TY.TmaDescTiledT, TY.TmaDescIm2colT)):
            raise LowerError("a TMA descriptor argument cannot be lowered: make it with "
                             "nv_tileas.make_tiled_tma_desc so its layout is known")
        else:  # reported when used, or at the end of the kernel: the op's reason comes first
            self.vals[arg] = _Unlowerable(f"kernel argument #{i} of type {TY.type_text(t)} has "
                                          "no PTX parameter form (pointers and 32-bit "
                                          "integers do)")

    def _block(self, block: Any) -> None:
        for op in block.ops:
            try:
                self._op(op)
            except IRError:
                raise
            except NvatomError as e:
                raise IRError([self.mod.diag(op, str(e))]) from None
            except Exception as e:  # a bug: reported at the op being lowered

                raise IRError([self.mod.diag(op, internal_error(e))]) from None

    # ------------------------------------------------------------------ ops
    def _op(self, op: Any) -> None:
        name = op.name
        handler = getattr(self, "_" + name.replace(".", "_"), None)
        if handler is None:  # the operations of the ir/ops_*.py modules

            ext = LOWERINGS.get(name)
            if ext is None:
                raise LowerError(f"no lowering for '{name}'")
            ext(self, op)
            return
        handler(op)

    def _reg_of(self, v: Any) -> Any:
        try:
            val = self.vals[v]
        except KeyError:
            raise LowerError(f"value %{v.name_hint or '?'} has no lowered form") from None
        if isinstance(val, _Unlowerable):
            raise LowerError(val.reason)
        return val

    # -- builtin dialects
    def _func_return(self, op: Any) -> None:
        if op.operands:
            raise LowerError("a kernel returns nothing")
        self._tmem_free()

    def _arith_constant(self, op: Any) -> None:
        t = op.results[0].type
        if not X.is_integer_like(t):
            raise LowerError(f"constant of type {TY.type_text(t)} is not supported")
        value = X.attr_value(op.value)
        r = self.k.reg("u64" if _int_bits(t) == 64 else "u32")
        self.k.ins(f"mov.{r.type}", r, int(value))
        self.vals[op.results[0]] = r

    def _binary(self, op: Any, opcode32: str, opcode64: str) -> None:
        a, b = (self._reg_of(x) for x in op.operands)
        wide = arith_bits(op) == 64
        r = self.k.reg("u64" if wide else "u32")
        self.k.ins(opcode64 if wide else opcode32, r, a, b)
        self.vals[op.results[0]] = r

    def _arith_addi(self, op: Any) -> None:
        self._binary(op, "add.s32", "add.s64")

    def _arith_muli(self, op: Any) -> None:
        self._binary(op, "mul.lo.s32", "mul.lo.s64")

    def _arith_andi(self, op: Any) -> None:
        self._binary(op, "and.b32", "and.b64")

    def _scf_for(self, op: Any) -> None:
        if op.results:
            raise LowerError("scf.for with loop-carried values is not supported: keep "
                             "accumulators in register fragments (cute.alloc_rmem)")
        lb, ub, step = (self._reg_of(x) for x in op.operands[:3])
        body = op.body.blocks[0]
        iv = self.k.reg("u32")
        self.k.ins("mov.u32", iv, lb)
        self.vals[body.args[0]] = iv
        top, end = self.k.fresh_label("for"), self.k.fresh_label("endfor")
        p = self.k.reg("pred")
        self.k.label(top)
        self.k.ins("setp.ge.s32", p, iv, ub)
        self.k.bra(end, p)
        self._block(body)
        self.k.ins("add.s32", iv, iv, step)
        self.k.bra(top)
        self.k.label(end)

    def _scf_yield(self, op: Any) -> None:
        if op.operands:
            raise LowerError("scf.yield of values is not supported")

    # -- cute
    def _cute_static(self, op: Any) -> None:
        pass

    def _cute_alloc_smem(self, op: Any) -> None:
        m = TY.memref_of(op.results[0].type)
        assert m is not None
        nbytes = -(-_footprint(m.layout) * m.element.pack_bits // 8)
        align = 1024 if isinstance(m.layout, ComposedLayout) else 128

        if LS.uses_dynamic_shared(self):  # > 48 KB: carved from dynamic shared memory
            self.vals[op.results[0]] = _Addr(LS.dynamic_alloc(self, nbytes, align), "smem")
            return
        sym = self.k.shared(self.fresh("smem"), max(nbytes, 16), align)
        self.shared += nbytes
        self.vals[op.results[0]] = _Addr(TE.shared_address(self.k, sym), "smem")

    def _cute_alloc_rmem(self, op: Any) -> None:
        m = TY.memref_of(op.results[0].type)
        assert m is not None and isinstance(m.layout, Layout)
        bits = m.element.pack_bits
        values = size(m.layout[1]) if m.layout.rank >= 2 else size(m.layout)
        rtype = m.element.name if m.element.name in ("f32", "f64") else "b32"
        count = values if bits >= 32 else -(-values * bits // 32)
        count = max([count, *self._mma_registers(op.results[0])])
        regs = self.k.regs(rtype, count)
        zero = {"f32": "0f00000000", "f64": "0d0000000000000000"}.get(rtype, "0")
        for r in regs:
            self.k.ins(f"mov.{rtype}", r, zero)
        self.vals[op.results[0]] = _Frag(regs)

    @staticmethod
    def _mma_registers(value: Any) -> list[int]:
        """The registers each register-MMA use of ``value`` reads or writes it in: kind::f8f6f4
        keeps each FP6/FP4 element of A and B in a byte of its own (PTX ISA, "Matrix Fragments
        for mma.m16n8k32" of .kind::f8f6f4), not packed as the element width says."""
        out = []
        for use in value.uses:
            user = use.operation
            if user.name == "cute_nvgpu.atom.copy" and use.index in (1, 2):
                # a decompressing ldmatrix (.b8x16.b4x16_p64 / .b6x16_p32) writes each
                # element into a byte of its own: the registers the atom names
                atom = TY.atom_of(user.operands[0].type)
                if getattr(getattr(atom, "fmt", None), "decompresses", False):
                    out.append(atom.registers)
                continue
            if user.name != "cute_nvgpu.atom.mma" or not 1 <= use.index <= 4:
                continue
            atom = TY.atom_of(user.operands[0].type)
            if hasattr(atom, "registers") and hasattr(atom, "opcode"):
                out.append(atom.registers("DABC"[use.index - 1]))
        return out

    def _cute_make_view(self, op: Any) -> None:
        m = TY.memref_of(op.results[0].type)
        assert m is not None
        self.vals[op.results[0]] = _Addr(self._reg_of(op.operands[0]), m.space)

    def _cute_make_coord(self, op: Any) -> None:
        self.vals[op.results[0]] = [self._reg_of(x) for x in op.operands]

    # -- nv_tileas
    def _nv_tileas_make_tiled_tma_desc(self, op: Any) -> None:
        name = f"tmap{len(self.tma)}"
        # .param .align 128 .b8 name[128] and its *generic* address (cvta.param): the bare
        # param-window address faults on an H100 (tests/gpu/test_tma_gpu.py)
        addr = TE.tensormap_param(self.k, name)
        self.params.append("tma")
        head = op.segments()[0]
        args = X.block_args(self.fn)
        tensor = args.index(head[0]) if head[0] in args else None
        gmem = op.gmem_layout
        text = TY.type_text(gmem.t) if isinstance(gmem, DL._TypeRepr) else layout_text(gmem)
        info = TmaParam(name, tensor, text, op.element_bits, None, None)
        self.tma.append(info)
        self.vals[op.results[0]] = _Desc(addr, info)

    # -- cute_nvgpu: atoms
    def _cute_nvgpu_make_atom(self, op: Any) -> None:
        atom = TY.atom_of(op.results[0].type)
        self.vals[op.results[0]] = atom

    def _cute_nvgpu_make_smem_desc(self, op: Any) -> None:
        self.vals[op.results[0]] = (self._reg_of(op.operands[0]),
                                    TY.smem_desc(op.results[0].type.text))

    def _cute_nvgpu_atom_copy_fragment(self, op: Any) -> None:
        acc: FragmentAccess = self.v.facts[op]
        _, src, dst = op.operands
        load = TY.memref_of(dst.type).space == "rmem"  # type: ignore[union-attr]
        tile, frag = (self._reg_of(src), self._reg_of(dst)) if load else \
            (self._reg_of(dst), self._reg_of(src))
        lane = self.k.reg("u32")
        self.k.ins("and.b32", lane, self.tid(), acc.threads - 1)
        off = emit_layout_offset(self.k, acc.lane_bytes, lane)
        if tile.space == "gmem":
            off64 = self.k.reg("u64")
            self.k.ins("cvt.u64.u32", off64, off)
            addr = self.k.reg("u64")
            self.k.ins("add.s64", addr, tile.reg, off64)
            space = "global"
        else:
            addr = self.k.reg("u32")
            self.k.ins("add.u32", addr, tile.reg, off)
            space = "shared"
        if not load:
            self.wg.read(frag.regs)
        for reg, b in zip(frag.regs, acc.reg_bytes, strict=True):
            if load:
                self.k.ins(f"ld.{space}.{acc.ptx_type}", reg, f"[{addr}+{b}]")
            else:
                self.k.ins(f"st.{space}.{acc.ptx_type}", f"[{addr}+{b}]", reg)
        if load:
            self.wg.write(frag.regs)
        self.threads = max(self.threads, acc.threads)

    def _cute_nvgpu_atom_mma(self, op: Any) -> None:
        atom = TY.atom_of(op.operands[0].type)
        if isinstance(atom, WgmmaForm):
            self._wgmma(op, atom)
            return

        if isinstance(atom, TmemAtom):
            self._umma(op, atom)
            return

        if isinstance(atom, UniversalFma):  # one scalar fma/mad per thread
            d, a, b, c = (_one_reg(self._reg_of(x), w)
                          for x, w in zip(op.operands[1:], "DABC", strict=True))
            self.k.ins(atom.instruction, d, a, b, c)
            return
        if not hasattr(atom, "opcode"):
            raise LowerError(f"no lowering for atom '{atom.name}'")

        _, d, a, b, c, *extra = (self._reg_of(x) for x in op.operands)
        scaled = isinstance(atom, BlockScaleAtom)
        scales, rest = (extra[:2], extra[2:]) if scaled else ([], extra)
        regs = [_one_reg(x, what) for x, what in zip(scales, ("scale A", "scale B"),
                                                      strict=False)]
        # the metadata fragment's layout is the atom's (contributor, nibble) layout: its
        # nibbles are packed in one .b32 register (PTX ISA, mma.sp: "e" is a .b32), the
        # fragment's first
        e = rest[0] if rest else None
        meta = _one_reg(_Frag(e.regs[:1]) if isinstance(e, _Frag) else e, "metadata") \
            if rest else None
        sel = op.attr("selector")
        if atom.is_sparse and sel is None:
            sel = atom.selectors[0]
        if scaled:
            emit_mma_bs(self.k, atom, d.regs, a.regs, b.regs, c.regs, regs[0], regs[1],
                        e=meta, selector=sel)
        else:
            emit_mma(self.k, atom, d.regs, a.regs, b.regs, c.regs, e=meta, selector=sel)
        self.need_threads(WARP)

    def _wgmma(self, op: Any, form: Any) -> None:
        _, d, a, b, _c = op.operands
        k_blocks = _unrolled(self.v.facts[op], "K-blocks")
        descs = {}
        for name, x in (("A", a), ("B", b)):
            val = self._reg_of(x)
            if isinstance(val, tuple):
                base, desc = val
                steps = k_step_descriptors(desc.layout, desc.element.pack_bits, form.k, k_blocks)
                descs[name] = _desc_regs(self.k, base.reg, steps)
        acc = self._reg_of(d).regs
        a_ops = descs.get("A") or [self._reg_of(a).regs] * k_blocks
        scale = [emit_scale_d(self.k, 0 if (i == 0 and op.attr("accumulate") is False) else 1)
                 for i in range(min(k_blocks, 2))]
        for i in range(k_blocks):
            self.wg.mma(form, acc, a_ops[i], descs["B"][i], scale[min(i, 1)])
        self.need_threads(WARPGROUP)

    def _cute_nvgpu_warpgroup_fence(self, op: Any) -> None:
        self.wg.fence()

    def _cute_nvgpu_warpgroup_commit_group(self, op: Any) -> None:
        self.wg.commit()

    def _cute_nvgpu_warpgroup_wait(self, op: Any) -> None:
        self.wg.wait(op.attr("pending"))

    def _cute_retile(self, op: Any) -> None:
        self.vals[op.results[0]] = self._reg_of(op.operands[0])

    def _cute_nvgpu_arch_cp_async_commit_group(self, op: Any) -> None:
        emit_commit_group(self.k)

    def _cute_nvgpu_arch_cp_async_wait_group(self, op: Any) -> None:
        emit_wait_group(self.k, op.attr("pending"))

    def _cute_nvgpu_atom_copy(self, op: Any) -> None:
        """One copy atom application.  A memory operand's layout is (thread, value) ->
        element offset (rank 1: the same elements for every thread); registers hold the
        values in value order.  Each thread issues one access per ``atom.bits`` of values."""

        atom = TY.atom_of(op.operands[0].type)
        if atom.mnemonic in ("atom.tmem_load", "atom.tmem_store"):
            self._tmem_copy(atom, *op.operands[1:])
            return
        if atom.mnemonic == "atom.s2t_copy":
            self._s2t_copy(op, atom)
            return
        if not isinstance(atom, (MatrixCopy, SimtAsyncCopy, UniversalCopy)):
            raise LowerError(f"'{atom.name}' verifies in the IR but is not lowered yet")
        sides = [_CopySide.of(self, x) for x in op.operands[1:]]
        self._apply_copy(atom, sides, generic=bool(op.attr("generic")))

    @staticmethod
    def copy_side(space: str, element_bits: int, lane: Any, value: Any, base: Any,
                  swizzle: Any = None, offset: int = 0) -> _CopySide:
        """A copy operand of (thread, value) layouts (for ir/lower_ext.py)."""
        return _CopySide(space, element_bits, lane, value, base, swizzle=swizzle,
                         offset=offset)

    def _apply_copy(self, atom: Any, sides: list[_CopySide], *, generic: bool = False) -> None:
        """A copy atom over (thread, value) -> offset operands (``atom.copy``, and each
        thread's values of a tiled copy: ir/lower_ext.py)."""

        threads = max(s.threads for s in sides)
        for s in sides:
            if s.threads not in (1, threads):
                raise LowerError(f"the copy's operands spread over {sides[0].threads} and "
                                 f"{sides[1].threads} threads")
        src, dst = sides
        self.need_threads(threads)
        if isinstance(atom, MatrixCopy):
            mem, frag = (src, dst) if atom.op == "ldmatrix" else (dst, src)
            regs = frag.frag_regs
            if len(regs) != atom.registers:
                why = (f"; it widens each {atom.fmt.mem_bits}-bit element into a byte, which "
                       f"a fragment of {frag.element_bits}-bit elements does not count"
                       if atom.fmt.decompresses else "")
                raise LowerError(f"'{atom.name}' writes {atom.registers} registers per lane, "
                                 f"the fragment has {len(regs)}{why}")
            if atom.op == "stmatrix":
                self.wg.read(regs)
            if atom.fmt.decompresses:  # the smem layout counts 8-bit slots (element + padding)
                mem.element_bits = atom.fmt.reg_bits
            addr = mem.address(self, 0, ROW_BYTES)
            if generic:
                addr = generic_shared(self.k, addr)
            CE.emit_matrix_copy(self.k, atom, regs, addr, generic=generic)
            if atom.op == "ldmatrix":
                self.wg.write(regs)
            return
        bits = atom.bits
        chunks = src.chunks(bits)
        if dst.chunks(bits) != chunks:
            raise LowerError(f"the copy moves {src.values} values from {dst.values}")
        if isinstance(atom, SimtAsyncCopy):
            fill: str | int | None = None
            if atom.fill == "src_size":
                fill = atom.nbytes  # no zero fill: the whole vector is read
            elif atom.fill == "ignore_src":
                p = self.k.reg("pred")
                self.k.ins("setp.ne.u32", p, 0, 0)  # false: the source is read
                fill = str(p)
            policy = None
            if atom.cache_policy.cache_hint:
                policy = self.k.reg("b64")
                self.k.ins("createpolicy.fractional.L2::evict_last.b64", policy, "1.0")
            for j in range(chunks):
                CE.emit_cp_async(self.k, atom, dst.address(self, j, bits // 8),
                                 src.address(self, j, bits // 8), fill=fill,
                                 cache_policy=policy)
            return
        acc = atom.vector_access
        if src.space == "rmem":
            self.wg.read(src.frag_regs)
        for j in range(chunks):
            if src.space == "rmem":
                regs = src.access_regs(self, j, acc, pack=True)
            elif dst.space == "rmem":
                regs = dst.access_regs(self, j, acc, pack=False)
            else:
                regs = CE.alloc_copy_registers(self.k, atom)
            if src.space != "rmem":
                CE.emit_ld(self.k, atom, src.space, regs, src.address(self, j, bits // 8))
            if dst.space != "rmem":
                CE.emit_st(self.k, atom, dst.space, dst.address(self, j, bits // 8), regs)
                continue
            if src.space == "rmem":  # register to register
                dregs = dst.access_regs(self, j, acc, pack=False)
                for d, s_ in zip(dregs, regs, strict=True):
                    self.k.ins(f"mov.b{acc.elem}", d, s_)
                regs = dregs
            dst.unpack(self, j, acc, regs)
        if dst.space == "rmem":
            self.wg.write(dst.frag_regs)

    # -- cute_nvgpu: TMA and barriers
    def _elect(self) -> tuple[str, str]:
        """Branch so that only thread 0 runs what follows until the returned label."""
        p = self.k.reg("pred")
        self.k.ins("setp.ne.u32", p, self.tid(), 0)
        skip = self.k.fresh_label("elect")
        self.k.bra(skip, p)
        return skip, str(p)

    def _cute_nvgpu_arch_mbarrier_init(self, op: Any) -> None:
        sym = self.k.shared(self.fresh("mbar"), 8, 8)
        self.shared += 8
        bar = TE.shared_address(self.k, sym)
        skip, _ = self._elect()
        TE.mbarrier_init(self.k, bar, op.attr("count"))
        TE.fence_mbarrier_init(self.k)
        self.k.label(skip)
        self.k.ins("bar.sync", 0)
        self.vals[op.results[0]] = bar

    def _cute_nvgpu_arch_mbarrier_wait(self, op: Any) -> None:
        TE.mbarrier_wait_parity(self.k, self._reg_of(op.operands[0]),
                                self._reg_of(op.operands[1]))
        if self._t5 is not None:  # order later tcgen05 work after the wait
            self.t5.fence_after_thread_sync()

    def _cute_nvgpu_arch_sync_threads(self, op: Any) -> None:
        if self._t5 is not None:  # order tcgen05 work around it (tcgen05.fence)
            self.t5.fence_before_thread_sync()
        self.k.ins("bar.sync", 0)
        if self._t5 is not None:
            self.t5.fence_after_thread_sync()

    def _cute_nvgpu_arch_cluster_cta_rank(self, op: Any) -> None:
        self.vals[op.results[0]] = self._cluster_rank()

    def _cluster_rank(self) -> Reg:
        r = self.k.reg("u32")
        self.k.ins("mov.u32", r, "%cluster_ctarank")
        return r

    def _cute_nvgpu_arch_cluster_sync(self, op: Any) -> None:
        SE.barrier_cluster_arrive(self.k, target=self.t)
        SE.barrier_cluster_wait(self.k, target=self.t)

    def _cute_nvgpu_atom_non_exec_tiled_tma_load(self, op: Any) -> None:
        self._non_exec(op)

    def _cute_nvgpu_atom_non_exec_tiled_tma_store(self, op: Any) -> None:
        self._non_exec(op)

    def _cute_nvgpu_atom_non_exec_tiled_tma_reduce(self, op: Any) -> None:
        self._non_exec(op)

    def _non_exec(self, op: Any) -> None:
        r: T.TmaPartitionResult = self.v.facts[op]
        desc: _Desc = self._reg_of(op.operands[0])
        sw = r.non_exec_atom_body.smem.inner

        info = dataclasses.replace(desc.info, box=descriptor_box(r),
                                   swizzle_bytes=T.SWIZZLE_BYTES[sw.bits])
        self.tma[self.tma.index(desc.info)] = info
        desc.info = info
        self.vals[op.results[0]] = (desc, r)

    def _cute_nvgpu_atom_make_exec_tma(self, op: Any) -> None:
        bar = self._reg_of(op.operands[1]) if len(op.operands) == 2 else None
        ex: T.ExecTmaAtom = self.v.facts[op]
        self.vals[op.results[0]] = (*self._reg_of(op.operands[0]), bar, ex)

    def _cute_nvgpu_make_tiled_mma(self, op: Any) -> None:
        self.vals[op.results[0]] = self.v.facts[op]

    def _cute_nvgpu_tiled_mma_gemm(self, op: Any) -> None:
        """Register fragments of the tiled MMA: the atom once per repetition
        (:func:`nvatom.ptx.tiled_mma_emit.emit_tiled_mma`)."""
        tiled = self.v.facts.get(op)
        if tiled is None:
            raise LowerError("cute_nvgpu.tiled_mma.gemm is lowered on register fragments "
                             "(cute.alloc_rmem of the tiled MMA's layouts) only")

        frags = [tm.Fragment("C" if name == "D" else name, tuple(self._reg_of(x).regs),
                             tiled.atom.registers(name), tm.repetitions(tiled, name))
                 for x, name in zip(op.operands[1:], "DABC", strict=True)]
        d, a, b, c = frags
        tm.emit_tiled_mma(self.k, tiled, d, a, b, c)
        self.need_threads(tiled.threads)

    def _cute_nvgpu_update_tma_desc(self, op: Any) -> None:
        """Thread 0 copies the 128-byte map into the workspace, edits it there with
        ``tensormap.replace`` and releases it to the tensormap proxy; after a CTA barrier
        every thread acquires it (PTX ISA "tensormap.replace", "fence.proxy.tensormap")."""
        desc: _Desc = self._reg_of(op.operands[0])
        ws: Reg = self._reg_of(op.operands[1])
        value = self._reg_of(op.operands[2])
        update: T.TmaUpdate = self.v.facts[op]
        if update.kind is not T.TmaUpdateKind.DIM and value.type != "u64":
            wide = self.k.reg("u64")
            self.k.ins("cvt.u64.u32", wide, value)
            value = wide
        skip, _ = self._elect()
        if desc.reg is not ws:  # a map already in the workspace is edited in place
            tmp = self.k.reg("b64")
            for off in range(0, TE.TENSORMAP_BYTES, 8):
                self.k.ins("ld.b64", tmp, f"[{desc.reg}+{off}]")
                self.k.ins("st.global.b64", f"[{ws}+{off}]", tmp)
        TE.tensormap_replace(self.k, ws, dataclasses.replace(update, value=str(value)),
                             space="global", target=self.t)
        TE.fence_tensormap_release(self.k)
        self.k.label(skip)
        self.k.ins("bar.sync", 0)
        TE.fence_tensormap_acquire(self.k, ws)
        self.vals[op.results[0]] = _Desc(ws, desc.info)

    def _cute_nvgpu_prefetch_tma_desc(self, op: Any) -> None:
        TE.prefetch_tensormap(self.k, self._reg_of(op.operands[0]).reg)

    def _tma_apply(self, op: Any) -> tuple[_Desc, T.ExecTmaAtom, Reg | None, Reg,
                                           Sequence[Reg]]:
        desc, _r, bar, ex = self._reg_of(op.operands[0])
        return desc, ex, bar, self._reg_of(op.operands[1]).reg, self._reg_of(op.operands[2])

    def _policy(self, ex: T.ExecTmaAtom) -> Reg | None:
        return None if ex.cache_mode is T.CacheMode.NONE else \
            TE.create_policy(self.k, ex.cache_mode)

    def _cute_nvgpu_atom_tma_load(self, op: Any) -> None:
        """Thread 0 raises its CTA's barrier by the bytes the transfer lands in each
        receiving CTA and issues the copy in the atom's mode: ``.multicast::cluster`` with
        the bound CTA mask, ``.cta_group::2`` for two_cta, the im2col offsets as 16-bit
        operands, ``.L2::cache_hint`` with the bound policy."""
        desc, ex, bar, dst, coord = self._tma_apply(op)
        offsets = []
        for x in op.operands[3:]:
            r16 = self.k.reg("b16")
            self.k.ins("cvt.u16.u32", r16, self._reg_of(x))
            offsets.append(r16)
        r = ex.atom.partition
        if op.attr("multicast_slice"):
            dst, coord = self._slice(ex, r, dst, list(coord))
        collective = op.attr("collective") is not False  # else: the program elected us
        skip = self._elect()[0] if collective else None
        # every CTA of a multicast receives num_multicast slices (the partition result's
        # tile_element_count = size(smem) * num_multicast; spec-deviations.md#tma-lowering)
        if op.attr("expect_tx") is not False:  # else: the program's mbarrier_arrive does
            TE.mbarrier_arrive_expect_tx(self.k, bar,
                                         r.tile_element_count * ex.atom.element_bits // 8)
        mask = None
        if ex.multicast_mask is not None:
            mask = self.k.reg("b16")
            self.k.ins("mov.b16", mask, ex.multicast_mask)
        two_cta = ex.atom.mode is T.TmaLoadMode.TMA_LOAD_TWO_CTA
        dst_space = op.attr("dst_space", "shared::cluster")
        TE.tma_load(self.k, dst, desc.reg, coord, bar, multicast_mask=mask,
                    cache_policy=self._policy(ex), im2col_offsets=offsets or None,
                    mode=ex.atom.ptx_mode, cta_group=2 if two_cta else None, target=self.t,
                    dst_space=dst_space)
        if skip is not None:
            self.k.label(skip)

    def _slice(self, ex: T.ExecTmaAtom, r: T.TmaPartitionResult, dst: Reg,
               coord: list[Any]) -> tuple[Reg, list[Any]]:
        """``multicast_slice``: slice index k = the CTAs of the mask below this CTA's rank
        (``popc(mask & ((1 << rank) - 1))``); the box's outermost coordinate (its last
        mode longer than 1) advances by k box extents and the destination by k slices."""
        assert ex.multicast_mask is not None
        box = r.tma_tensor_type.box
        g = max(i for i, b in enumerate(box) if b > 1) if any(b > 1 for b in box) else 0
        rank = self._cluster_rank()
        below = self.k.reg("b32")
        self.k.ins("shl.b32", below, 1, rank)
        self.k.ins("add.s32", below, below, -1)
        self.k.ins("and.b32", below, below, ex.multicast_mask)
        k = self.k.reg("u32")
        self.k.ins("popc.b32", k, below)
        c = self.k.reg("u32")
        self.k.ins("mad.lo.u32", c, k, box[g], coord[g])
        coord[g] = c
        slice_bytes = size(r.non_exec_atom_body.smem) * ex.atom.element_bits // 8
        d = self.k.reg("u32")
        self.k.ins("mad.lo.u32", d, k, slice_bytes, dst)
        return d, coord

    def _store_like(self, op: Any, red: str | None) -> None:
        desc, ex, _bar, src, coord = self._tma_apply(op)
        if red is None and op.attr("collective") is False:  # the program fences, elects, ...
            TE.tma_store(self.k, desc.reg, coord, src, cache_policy=self._policy(ex),
                         mode=ex.atom.ptx_mode, target=self.t)
            return
        TE.fence_proxy_async(self.k)
        self.k.ins("bar.sync", 0)
        skip, _ = self._elect()
        if red is None:
            TE.tma_store(self.k, desc.reg, coord, src, cache_policy=self._policy(ex),
                         mode=ex.atom.ptx_mode, target=self.t)
        else:
            TE.tma_reduce(self.k, red, desc.reg, coord, src, cache_policy=self._policy(ex),
                          target=self.t)
        TE.bulk_commit_group(self.k)
        TE.bulk_wait_group(self.k, 0, read=False)
        self.k.label(skip)

    def _cute_nvgpu_atom_tma_store(self, op: Any) -> None:
        self._store_like(op, None)

    def _cute_nvgpu_atom_tma_reduce(self, op: Any) -> None:
        r: T.TmaPartitionResult = self.v.facts[op]
        self._store_like(op, T.ptx_qualifiers(r.tma_tensor_type.mode)[0][1:])  # type: ignore


ROW_BYTES = 16  # one ldmatrix/stmatrix row


@dataclasses.dataclass
class _CopySide:
    """One operand of a copy atom: a memory tile (base address, (thread, value) layout) or
    a register fragment."""

    space: str
    element_bits: int
    lane: Layout | None  # thread -> element offset (None: thread-invariant)
    value: Layout  # value index -> element offset
    base: Any  # Reg (address) or _Frag
    lane_addr: Reg | None = None  # base + this thread's offset, once computed
    swizzle: Swizzle | None = None  # smem Sw<B,M,S> o offset o (lane, value)
    offset: int = 0  # the composed layout's offset (elements, before the swizzle)
    lane_lin: Reg | None = None  # swizzled: this thread's unswizzled element offset

    @staticmethod
    def of(low: _KernelLowering, v: Any) -> _CopySide:
        m = TY.memref_of(v.type)
        lay = None if m is None else m.layout
        sw, offset = None, 0
        if isinstance(lay, ComposedLayout) and isinstance(lay.inner, Swizzle) \
                and m.space == "smem":  # type: ignore[union-attr]
            sw, offset, lay = lay.inner, lay.offset, lay.outer
        if m is None or not isinstance(lay, Layout):
            raise LowerError(f"copy atoms lower for !cute.memref operands with a static layout "
                             f"(swizzled ones in smem only), not {TY.type_text(v.type)}")
        if sw is not None and m.element.pack_bits % 8:
            raise LowerError(f"a swizzled copy operand of {m.element.pack_bits}-bit elements "
                             "does not lower: swizzled addresses are scaled by whole element "
                             "bytes (sub-byte elements are not implemented)")
        lane, value = (lay[0], lay[1]) if lay.rank == 2 else (None, lay)
        val = low._reg_of(v)
        base = val if m.space == "rmem" else val.reg
        return _CopySide(m.space, m.element.pack_bits, lane, value, base, swizzle=sw,
                         offset=offset)

    @property
    def threads(self) -> int:
        return 1 if self.lane is None else size(self.lane)

    @property
    def values(self) -> int:
        return size(self.value)

    def chunks(self, bits: int) -> int:
        per, rem = divmod(bits, self.element_bits)
        if rem or self.values % per:
            raise LowerError(f"{self.values} values of {self.element_bits} bits do not split "
                             f"into {bits}-bit accesses")
        return _unrolled(self.values // per, f"{bits}-bit accesses per thread")

    @property
    def frag_regs(self) -> list[Reg]:
        """A register operand's registers, in value order."""
        assert isinstance(self.base, _Frag)
        return self.base.regs

    def address(self, low: _KernelLowering, j: int, nbytes: int) -> str:
        """``base + lane offset + offset of access j`` (``nbytes`` contiguous, aligned)."""
        if self.space == "rmem":
            raise LowerError("a register operand has no address")
        per = nbytes * 8 // self.element_bits
        offs = [self.value(j * per + q) for q in range(per)]
        if offs != list(range(offs[0], offs[0] + per)) or (offs[0] * self.element_bits // 8) \
                % nbytes:
            raise LowerError(f"values {j * per}..{j * per + per - 1} of {self.value} sit at "
                             f"offsets {offs}: not {nbytes} contiguous, aligned bytes")
        eb = self.element_bits // 8
        if self.swizzle is not None:
            return self._swizzled_address(low, offs[0], per, nbytes)
        addr = self.base
        if self.lane_addr is not None:
            addr = self.lane_addr
        elif self.lane is not None and size(self.lane) > 1:
            bad = [d for s, d in flat_modes(self.lane)
                   if s > 1 and (d * self.element_bits) % (8 * nbytes)]
            if bad:
                raise LowerError(f"the thread stride {bad[0]} of {self.lane} is not a multiple "
                                 f"of the {nbytes}-byte access")
            lane = low.k.reg("u32")
            low.k.ins("and.b32", lane, low.tid(), size(self.lane) - 1)
            off = emit_layout_offset(low.k, self.lane, lane, scale=max(eb, 1))
            if not eb:  # sub-byte elements: the lane's offset (whole accesses) in bytes
                low.k.ins("shr.u32", off, off, (8 // self.element_bits).bit_length() - 1)
            if self.space == "gmem":
                off64 = low.k.reg("u64")
                low.k.ins("cvt.u64.u32", off64, off)
                addr = low.k.reg("u64")
                low.k.ins("add.s64", addr, self.base, off64)
            else:
                addr = low.k.reg("u32")
                low.k.ins("add.u32", addr, self.base, off)
            self.lane_addr = addr
        return f"{addr}+{offs[0] * self.element_bits // 8}" if offs[0] else str(addr)

    def _lane_strides_fit(self, nbytes: int) -> None:
        eb = self.element_bits // 8
        bad = [d for s, d in flat_modes(self.lane) if s > 1 and (d * eb) % nbytes]
        if bad:
            raise LowerError(f"the thread stride {bad[0]} of {self.lane} is not a multiple "
                             f"of the {nbytes}-byte access")

    def _swizzled_address(self, low: _KernelLowering, first: int, per: int,
                          nbytes: int) -> str:
        """``base + Sw(offset + lane offset + first) * element bytes``.  The swizzle XORs
        bit fields of the element offset, so it is applied to the whole offset of each access
        (not split into a lane and a value part).  The access's ``per`` elements, contiguous
        and aligned in the unswizzled layout, stay so iff no bit the swizzle reads or writes
        lies below ``per``: then the XOR moves the aligned block as a whole."""
        sw = self.swizzle
        assert sw is not None
        if sw.swizzle_code & (per - 1):
            unit = sw.swizzle_code & -sw.swizzle_code
            raise LowerError(f"the swizzle {sw} permutes units of {unit} {self.element_bits}-bit "
                             f"element(s), less than the {nbytes}-byte access ({per} elements): "
                             "the bytes of one access would not stay contiguous")
        static = self.offset + first
        if static % per:
            raise LowerError(f"the swizzled layout's offset {self.offset} puts the {nbytes}-byte "
                             f"access of value offset {first} at element {static}, not a "
                             f"multiple of {per}")
        eb = self.element_bits // 8
        k = low.k
        if self.lane is None or size(self.lane) == 1:
            return f"{self.base}+{sw(static) * eb}" if sw(static) else str(self.base)
        if self.lane_lin is None:
            self._lane_strides_fit(nbytes)
            lane = k.reg("u32")
            k.ins("and.b32", lane, low.tid(), size(self.lane) - 1)
            self.lane_lin = emit_layout_offset(k, self.lane, lane)
        lin = self.lane_lin
        if static:
            lin = k.reg("u32")
            k.ins("add.u32", lin, self.lane_lin, static)
        off = emit_swizzle(k, lin, sw)
        if eb > 1:
            scaled = k.reg("u32")
            k.ins("shl.b32", scaled, off, eb.bit_length() - 1)
            off = scaled
        addr = k.reg("u32")
        k.ins("add.u32", addr, self.base, off)
        return str(addr)

    def access_regs(self, low: _KernelLowering, j: int, acc: Any, *, pack: bool) -> list[Reg]:
        """The registers access ``j`` moves: the fragment's own registers when the access's
        vector element is their width, else 64-bit ones built from pairs of 32-bit ones
        (``pack``: filled from them; :meth:`unpack` writes them back)."""
        frag = self.frag_regs
        rbits = 64 if frag and frag[0].type in ("f64", "b64", "u64") else 32
        first = j * acc.bits // rbits
        if acc.elem == rbits:
            return frag[first:first + acc.vec]
        if acc.elem == 64 and rbits == 32:
            out = low.k.regs("b64", acc.vec)
            if pack:
                for i, r in enumerate(out):
                    low.k.ins("mov.b64", r, f"{{{frag[first + 2 * i]}, {frag[first + 2 * i + 1]}}}")
            return out
        raise LowerError(f"a {acc.suffix} access cannot move {self.element_bits}-bit values "
                         f"held in {rbits}-bit registers: use an access of 32-bit elements "
                         "(universal_copy<32>, <64>.v2.b32, <128>)")

    def unpack(self, low: _KernelLowering, j: int, acc: Any, regs: Sequence[Reg]) -> None:
        frag = self.frag_regs
        if acc.elem == 64 and frag and frag[0].type not in ("f64", "b64", "u64"):
            first = j * acc.bits // 32
            for i, r in enumerate(regs):
                low.k.ins("mov.b64", f"{{{frag[first + 2 * i]}, {frag[first + 2 * i + 1]}}}", r)


def _one_reg(frag: Any, what: str) -> Reg:
    if not isinstance(frag, _Frag) or len(frag.regs) != 1:
        raise LowerError(f"the {what} fragment must be one 32-bit register")
    return frag.regs[0]


#: most instructions one operation unrolls into (copy accesses per thread, MMA K-blocks): a
#: 228 KiB shared-memory tile copied by one warp in 32-bit accesses is 1824
MAX_UNROLL = 1 << 14


def _unrolled(n: int, what: str) -> int:
    if n > MAX_UNROLL:
        raise LowerError(f"the operation unrolls into {n} {what}; the limit is {MAX_UNROLL}")
    return n


def lower(mod: Module, vctx: DL.VerifyCtx) -> Lowered:
    """PTX for every ``func.func`` of a verified module (raise IRError with a diagnostic)."""
    ptx = PtxModule(vctx.target)
    kernels = []
    fns = [op for op in mod.walk() if isinstance(op, X.FuncOp)]
    if not fns:
        raise IRError([Diagnostic(mod.filename, 1, 1, "the module has no func.func to lower")])
    for fn in fns:
        try:
            low = _KernelLowering(mod, vctx, ptx, fn)  # checks the kernel name
            kernels.append(low.run())
        except IRError:
            raise
        except NvatomError as e:
            raise IRError([mod.diag(fn, str(e))]) from None
        except Exception as e:  # a bug: reported without a traceback
            raise IRError([mod.diag(fn, internal_error(e))]) from None
    return Lowered(ptx.emit(), vctx.target.name, kernels)
