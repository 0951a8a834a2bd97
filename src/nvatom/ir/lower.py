"""Lowering of verified ``cute_nvgpu`` IR to PTX through the project's PTX builder.

Every ``func.func`` becomes one ``.entry`` kernel.  Its arguments become parameters:
``!cute.ptr<e, gmem>`` a ``.u64`` (converted with ``cvta.to.global``), integers a ``.u32``.
Each ``nv_tileas.make_tiled_tma_desc`` is hoisted into a by-value 128-byte parameter (the
kernel-entry ABI of seed 001: the host encodes the CUtensorMap, :class:`TmaParam` says how).

Values map to registers: integers to ``.b32``/``.b64`` registers, a register fragment
(``cute.alloc_rmem``) to its registers (zero-filled), a shared buffer to its 32-bit shared
address, a tensor view to its base address, an atom to nothing (it is static).  Atom
applications call the emitters of ``nvatom.ptx``: ``emit_mma`` (mma.sync), ``emit_wgmma``
with the WGMMA protocol checked by ``WgmmaSequence``, ``tma_emit`` (mbarriers,
``cp.async.bulk.tensor``).  The ``.version`` is the lowest one the target and every lowered
atom accept.  ``scf.for`` becomes a counted loop (no loop-carried values).

Source: PTX ISA chapters of the emitters used; seed 001 "Lowering Shape" and "Executable Atom
Binding" (the barrier's transaction count is raised by the bytes the transfer completes).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from nvatom.arch import PtxVersion
from nvatom.atoms import tma as T
from nvatom.errors import NvatomError
from nvatom.ir import dialect as DL
from nvatom.ir import types as TY
from nvatom.ir import xdsl_adapter as X
from nvatom.ir.driver import Diagnostic, IRError, Module
from nvatom.ir.syntax import layout_text
from nvatom.layout import ComposedLayout, Layout, composition, cosize, size
from nvatom.ptx import tma_emit as TE
from nvatom.ptx.builder import Kernel, Reg
from nvatom.ptx.builder import Module as PtxModule
from nvatom.ptx.layout_eval import emit_layout_offset, flat_modes

__all__ = ["FragmentAccess", "LowerError", "Lowered", "TmaParam", "fragment_access", "lower"]

WARP = 32


class LowerError(NvatomError):
    """An operation the lowering cannot turn into PTX (the message says why)."""


@dataclasses.dataclass(frozen=True)
class FragmentAccess:
    """How each lane reaches its registers of one MMA operand in a tile: byte address of
    register ``r`` of lane ``l`` is ``base + lane_bytes(l) + reg_bytes[r]``."""

    ptx_type: str  # b32, f32 or f64: one load/store per register
    lane_bytes: Layout
    reg_bytes: tuple[int, ...]
    threads: int  # 32 (a warp) or 128 (a warpgroup)


def operand_tv(form: Any, op: str) -> Layout:
    """(thread, value) -> element of a register operand (WGMMA: its fragment layouts)."""
    from nvatom.atoms.sm90 import WgmmaForm

    if isinstance(form, WgmmaForm):
        from nvatom.atoms.wgmma_fragments import wgmma_tv_layout

        return wgmma_tv_layout(form, op)
    return form.tv_layout(op)


def operand_dtype(form: Any, op: str) -> Any:
    if hasattr(form, "operand_type"):
        return form.operand_type(op)
    return {"A": form.a, "B": form.b, "C": form.d, "D": form.d}[op]


def fragment_access(form: Any, op: str, tile: Layout) -> FragmentAccess:
    """Compose the tile's layout with the atom's (thread, value) layout and check that each
    register's values are contiguous and aligned, so one load/store moves a register."""
    from nvatom.ir.dialect import IRVerifyError

    tv = operand_tv(form, op)
    if size(tile) != cosize(tv) and size(tile) < cosize(tv):
        raise IRVerifyError(f"the tile {tile} has {size(tile)} elements, the atom's operand {op} "
                            f"covers {cosize(tv)}")
    mem = composition(tile, tv)
    threads = size(mem[0])
    if threads not in (WARP, 4 * WARP):
        raise IRVerifyError(f"copy_fragment supports warp and warpgroup atoms; '{form.name}' "
                            f"spreads operand {op} over {threads} threads")
    lane, value = mem[0], mem[1]
    bits = operand_dtype(form, op).pack_bits
    per_reg = 1 if bits >= 32 else 32 // bits
    align = max(bits, 32)
    nregs = form.registers(op)
    if size(value) != nregs * per_reg:
        raise IRVerifyError(f"operand {op} of '{form.name}' has {size(value)} values per lane "
                            f"for {nregs} registers")
    reg_bytes = []
    for r in range(nregs):
        offs = [value(r * per_reg + j) for j in range(per_reg)]
        if offs != list(range(offs[0], offs[0] + per_reg)) or (offs[0] * bits) % align:
            raise IRVerifyError(
                f"register {r} of operand {op} holds the elements at offsets {offs} of the "
                f"tile {tile}: not contiguous and {align}-bit aligned, so one access per "
                "register is impossible")
        reg_bytes.append(offs[0] * bits // 8)
    bad = [t for t in range(threads) if (lane(t) * bits) % align]
    if bad:
        raise IRVerifyError(f"lane {bad[0]}'s fragment of operand {op} starts at element "
                            f"{lane(bad[0])} of {tile}, not on a {align}-bit boundary")
    modes = [(s, d * bits // 8 if s > 1 else 0) for s, d in flat_modes(lane)]
    lane_bytes = Layout(tuple(s for s, _ in modes), tuple(d for _, d in modes))
    return FragmentAccess(form.register_type(op), lane_bytes, tuple(reg_bytes), threads)


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
class _Frag:
    regs: list[Reg]


@dataclasses.dataclass
class _Addr:
    reg: Reg  # u64 global or u32 shared address
    space: str  # "gmem" or "smem"


@dataclasses.dataclass
class _Desc:
    reg: Reg  # generic address of the tensor map parameter
    info: TmaParam


class _KernelLowering:
    def __init__(self, mod: Module, vctx: DL.VerifyCtx, ptx: PtxModule, fn: Any) -> None:
        self.mod, self.v, self.fn = mod, vctx, fn
        self.t = vctx.target
        self.k: Kernel = ptx.kernel(fn.sym_name.data)
        self.vals: dict[Any, Any] = {}
        self.version: PtxVersion = self.t.min_ptx
        self.threads = 1
        self.shared = 0
        self.params: list[str] = []
        self.tma: list[TmaParam] = []
        self._tid: Reg | None = None
        self._n = 0
        from nvatom.ptx.wgmma_emit import WgmmaSequence

        self.wg = WgmmaSequence(self.k)

    def need(self, version: PtxVersion, threads: int = 1) -> None:
        self.version = max(self.version, version)
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
        return KernelInfo(self.k.name, self.params, ptx_params, self.tma, self.threads,
                          self.shared)

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

    # ------------------------------------------------------------------ ops
    def _op(self, op: Any) -> None:
        name = op.name
        handler = getattr(self, "_" + name.replace(".", "_"), None)
        if handler is None:
            raise LowerError(f"no lowering for '{name}'")
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
        wide = _int_bits(op.results[0].type) == 64
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
        nbytes = -(-cosize(m.layout) * m.element.pack_bits // 8)
        align = 1024 if isinstance(m.layout, ComposedLayout) else 128
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
        regs = self.k.regs(rtype, count)
        zero = {"f32": "0f00000000", "f64": "0d0000000000000000"}.get(rtype, "0")
        for r in regs:
            self.k.ins(f"mov.{rtype}", r, zero)
        self.vals[op.results[0]] = _Frag(regs)

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
        # param-window address faults on an H100 (issue 6's tests/gpu/test_tma_gpu.py)
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
        if hasattr(atom, "ptx_version_for"):
            self.need(atom.ptx_version_for(self.t))

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
        self.need((0, 0), acc.threads)

    def _cute_nvgpu_atom_mma(self, op: Any) -> None:
        from nvatom.atoms.sm90 import WgmmaForm

        atom = TY.atom_of(op.operands[0].type)
        if isinstance(atom, WgmmaForm):
            self._wgmma(op, atom)
            return
        from nvatom.atoms.interfaces import TmemAtom

        if isinstance(atom, TmemAtom):
            raise LowerError(f"SM100 UMMA atoms ('{atom.name}') verify in the IR but are not "
                             "lowered yet: tcgen05.mma needs TMEM allocation ops the IR lacks")
        if not hasattr(atom, "opcode"):
            raise LowerError(f"no lowering for atom '{atom.name}'")
        from nvatom.atoms.interfaces import BlockScaleAtom

        _, d, a, b, c, *extra = (self._reg_of(x) for x in op.operands)
        scaled = isinstance(atom, BlockScaleAtom)
        scales, rest = (extra[:2], extra[2:]) if scaled else ([], extra)
        regs = [_one_reg(x, what) for x, what in zip([*scales, *rest],
                                                      ("scale A", "scale B", "metadata"),
                                                      strict=False)]
        meta = regs[-1] if rest else None
        sel = op.attr("selector")
        if atom.is_sparse and sel is None:
            sel = atom.selectors[0]
        if scaled:
            from nvatom.ptx.sm120_emit import emit_mma_bs

            emit_mma_bs(self.k, atom, d.regs, a.regs, b.regs, c.regs, regs[0], regs[1],
                        e=meta, selector=sel)
        else:
            from nvatom.ptx.mma_emit import emit_mma

            emit_mma(self.k, atom, d.regs, a.regs, b.regs, c.regs, e=meta, selector=sel)
        self.need(atom.ptx_version_for(self.t), WARP)

    def _wgmma(self, op: Any, form: Any) -> None:
        from nvatom.ptx.wgmma_emit import _desc_regs, emit_scale_d, k_step_descriptors

        _, d, a, b, _c = op.operands
        k_blocks = self.v.facts[op]
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
        self.need(form.ptx_version_for(self.t), 128)

    def _cute_nvgpu_warpgroup_fence(self, op: Any) -> None:
        self.wg.fence()

    def _cute_nvgpu_warpgroup_commit_group(self, op: Any) -> None:
        self.wg.commit()

    def _cute_nvgpu_warpgroup_wait(self, op: Any) -> None:
        self.wg.wait(op.attr("pending"))

    def _cute_nvgpu_atom_copy(self, op: Any) -> None:
        raise LowerError("copy atoms are verified in the IR but not lowered yet; "
                         "use cute_nvgpu.atom.copy_fragment or the TMA atoms")

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
        self.need((8, 0))

    def _cute_nvgpu_arch_mbarrier_wait(self, op: Any) -> None:
        TE.mbarrier_wait_parity(self.k, self._reg_of(op.operands[0]),
                                self._reg_of(op.operands[1]))

    def _cute_nvgpu_arch_sync_threads(self, op: Any) -> None:
        self.k.ins("bar.sync", 0)

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
        info = dataclasses.replace(desc.info, box=r.tma_tensor_type.box,
                                   swizzle_bytes=16 << sw.bits if sw.bits else None)
        self.tma[self.tma.index(desc.info)] = info
        desc.info = info
        if r.tma_tensor_type.kind is T.TmaKind.LOAD and \
                r.tma_tensor_type.mode is not T.TmaLoadMode.TMA_LOAD_NO_MULTICAST:
            raise LowerError(f"TMA load mode {r.tma_tensor_type.mode.name} is not lowered yet")
        if r.non_exec_atom_body.num_multicast > 1:
            raise LowerError("multicast TMA loads (.multicast::cluster) are not lowered yet")
        self.vals[op.results[0]] = (desc, r)
        self.need((8, 0))

    def _cute_nvgpu_atom_make_exec_tma(self, op: Any) -> None:
        bar = self._reg_of(op.operands[1]) if len(op.operands) == 2 else None
        self.vals[op.results[0]] = (*self._reg_of(op.operands[0]), bar)

    def _cute_nvgpu_prefetch_tma_desc(self, op: Any) -> None:
        TE.prefetch_tensormap(self.k, self._reg_of(op.operands[0]).reg)

    def _tma_apply(self, op: Any) -> tuple[_Desc, T.TmaPartitionResult, Reg | None, Reg,
                                           Sequence[Reg]]:
        desc, r, bar = self._reg_of(op.operands[0])
        return desc, r, bar, self._reg_of(op.operands[1]).reg, self._reg_of(op.operands[2])

    def _cute_nvgpu_atom_tma_load(self, op: Any) -> None:
        desc, r, bar, dst, coord = self._tma_apply(op)
        nbytes = r.tile_element_count * r.tma_tensor_type.element_bits // 8
        skip, _ = self._elect()
        TE.mbarrier_arrive_expect_tx(self.k, bar, nbytes)
        TE.tma_load(self.k, dst, desc.reg, coord, bar)
        self.k.label(skip)

    def _store_like(self, op: Any, red: str | None) -> None:
        desc, _r, _bar, src, coord = self._tma_apply(op)
        TE.fence_proxy_async(self.k)
        self.k.ins("bar.sync", 0)
        skip, _ = self._elect()
        if red is None:
            TE.tma_store(self.k, desc.reg, coord, src)
        else:
            TE.tma_reduce(self.k, red, desc.reg, coord, src)
        TE.bulk_commit_group(self.k)
        TE.bulk_wait_group(self.k, 0, read=False)
        self.k.label(skip)

    def _cute_nvgpu_atom_tma_store(self, op: Any) -> None:
        self._store_like(op, None)

    def _cute_nvgpu_atom_tma_reduce(self, op: Any) -> None:
        r: T.TmaPartitionResult = self.v.facts[op]
        self._store_like(op, T.ptx_qualifiers(r.tma_tensor_type.mode)[0][1:])  # type: ignore


def _one_reg(frag: Any, what: str) -> Reg:
    if not isinstance(frag, _Frag) or len(frag.regs) != 1:
        raise LowerError(f"the {what} fragment must be one 32-bit register")
    return frag.regs[0]


def _int_bits(t: Any) -> int:
    w = getattr(t, "width", None)
    return 32 if w is None else int(w.data)


def lower(mod: Module, vctx: DL.VerifyCtx) -> Lowered:
    """PTX for every ``func.func`` of a verified module (raise IRError with a diagnostic)."""
    ptx = PtxModule(vctx.target)
    kernels = []
    version = vctx.target.min_ptx
    fns = [op for op in mod.walk() if isinstance(op, X.FuncOp)]
    if not fns:
        raise IRError([Diagnostic(mod.filename, 1, 1, "the module has no func.func to lower")])
    for fn in fns:
        low = _KernelLowering(mod, vctx, ptx, fn)
        try:
            kernels.append(low.run())
        except IRError:
            raise
        except NvatomError as e:
            raise IRError([mod.diag(fn, str(e))]) from None
        except Exception as e:  # a bug: reported without a traceback
            from nvatom.ir.driver import internal_error

            raise IRError([mod.diag(fn, internal_error(e))]) from None
        version = max(version, low.version)
    ptx.version = version
    return Lowered(ptx.emit(), vctx.target.name, kernels)
