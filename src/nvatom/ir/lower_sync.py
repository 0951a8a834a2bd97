"""Lowering of the warp-specialisation operations (:mod:`nvatom.ir.ops_sync`), of ``scf.if``
and of the ``arith`` integer operations beyond add/mul/and, and the kernel-level facts they
need: the ``func.func`` attributes ``threads`` (``.reqntid``) and ``max_registers``
(``.maxnreg``, the entry budget ``setmaxnreg`` redistributes), and dynamic shared memory
for kernels whose buffers exceed the 48 KB a static ``.shared`` declaration may hold.

``scf.if`` becomes a branch around its regions (conditions are ``.pred`` registers set by
``arith.cmpi``); the thread-block special registers are read where the op stands; an
``mbarrier_init_array`` is ``size`` consecutive 8-byte barriers initialised by thread 0 (then
``fence.mbarrier_init`` and a CTA barrier), ``mbarrier_at`` their address plus 8 x index.

Source: PTX ISA "setp", "selp", "bra", "Special Registers", "setmaxnreg", "mbarrier",
"bar.sync", "fence.proxy.async", "cp.async.bulk.commit_group/wait_group", "cvt" (packed
.bf16x2/.f16x2), "Performance-Tuning Directives" (.reqntid, .maxnreg), "Kernel and Function
Directives: .shared" (extern dynamic shared memory).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from nvatom.arch import MAX_CTA_THREADS, MAX_THREAD_REGISTERS
from nvatom.atoms.wgmma_fragments import WARPGROUP
from nvatom.ir import types as TY
from nvatom.ir import xdsl_adapter as X
from nvatom.ir.lower_values import LowerError, _Addr, _footprint, _Frag, _int_bits, arith_bits
from nvatom.ir.ops_sync import CONVERTS
from nvatom.layout import size
from nvatom.ptx import sync_emit as SE
from nvatom.ptx import tma_emit as TE
from nvatom.ptx.builder import Reg

__all__ = ["LOWERINGS", "STATIC_SHARED_LIMIT", "block_threads", "dynamic_alloc",
           "dynamic_shared_bytes", "kernel_attributes", "uses_dynamic_shared"]

#: the most shared memory a kernel may declare statically (CUDA: 48 KB); more comes from
#: dynamic shared memory, sized at launch (KernelInfo.dynamic_shared)
STATIC_SHARED_LIMIT = 48 * 1024

Low = Any  # nvatom.ir.lower._KernelLowering (not imported: it imports this module)


# =========================================================================== kernel facts
def _fn_int(low: Low, key: str, lo: int, hi: int, multiple: int = 1) -> int | None:
    attr = low.fn.attributes.get(key)
    if attr is None:
        return None
    v = X.attr_value(attr) if isinstance(attr, X.IntegerAttr) else None
    if not isinstance(v, int) or isinstance(v, bool) or not lo <= v <= hi or v % multiple:
        raise LowerError(f"the kernel attribute {key} = {X.print_attr(attr)} is not an "
                         f"integer in {lo}..{hi}" + (f", a multiple of {multiple}"
                                                     if multiple > 1 else ""))
    return v


def kernel_attributes(low: Low) -> None:
    """``threads = N`` (the CTA's threads: ``.reqntid N``, the launch's block) and
    ``max_registers = R`` (``.maxnreg R``: the budget at entry, needed with setmaxnreg)."""
    n = _fn_int(low, "threads", 1, MAX_CTA_THREADS)
    if n is not None:
        low.k.reqntid = (n, 1, 1)
        low.ext["threads"] = n
    r = _fn_int(low, "max_registers", 24, MAX_THREAD_REGISTERS)
    if r is not None:
        low.k.maxnreg = r


def block_threads(low: Low) -> int:
    """The CTA size: the ``threads`` attribute (checked against what the atoms need), else
    what the atoms need."""
    n = low.ext.get("threads")
    if n is None:
        return int(low.threads)
    if n < low.threads or n % 32:
        raise LowerError(f"the kernel attribute threads = {n} is not a whole number of warps "
                         f"covering the {low.threads} threads its operations need")
    return int(n)


def uses_dynamic_shared(low: Low) -> bool:
    """Whether the kernel's ``cute.alloc_smem`` buffers (aligned) exceed
    :data:`STATIC_SHARED_LIMIT`: then all of them come from dynamic shared memory."""
    if "dyn" not in low.ext:
        total = 0
        for op in low.fn.walk():
            if op.name == "cute.alloc_smem":
                m = TY.memref_of(op.results[0].type)
                align = 1024 if m.layout is not None and hasattr(m.layout, "inner") else 128
                total = -(-total // align) * align
                total += -(-_footprint(m.layout) * m.element.pack_bits // 8)
        low.ext["dyn"] = None if total <= STATIC_SHARED_LIMIT else [None, 0]
    return low.ext["dyn"] is not None


def dynamic_alloc(low: Low, nbytes: int, align: int) -> Reg:
    """The address of ``nbytes`` of dynamic shared memory (``.extern .shared`` of the
    kernel, 1024-byte aligned) at the next ``align``-ed offset."""
    dyn = low.ext["dyn"]
    if dyn[0] is None:
        dyn[0] = low.k.dynamic_shared(f"dsmem_{low.k.name}", 1024)
    off = -(-dyn[1] // align) * align
    dyn[1] = off + nbytes
    return TE.shared_address(low.k, dyn[0], off)


def dynamic_shared_bytes(low: Low) -> int:
    dyn = low.ext.get("dyn")
    return 0 if dyn is None else int(dyn[1])


# =========================================================================== scf / arith
def _scf_if(low: Low, op: Any) -> None:
    if op.results:
        raise LowerError("scf.if with results is not supported (no values leave its regions)")
    p = low._reg_of(op.cond)
    if not isinstance(p, Reg) or p.type != "pred":
        raise LowerError("the scf.if condition must be an i1 of arith.cmpi")
    els, end = low.k.fresh_label("else"), low.k.fresh_label("endif")
    has_else = bool(op.false_region.blocks)
    low.k.bra(els if has_else else end, f"!{p}")
    low._block(op.true_region.blocks[0])
    if has_else:
        low.k.bra(end)
        low.k.label(els)
        low._block(op.false_region.blocks[0])
    low.k.label(end)


#: MLIR's arith.cmpi predicates (their integer encoding) -> setp comparison
_CMP = {0: "eq.u", 1: "ne.u", 2: "lt.s", 3: "le.s", 4: "gt.s", 5: "ge.s", 6: "lt.u",
        7: "le.u", 8: "gt.u", 9: "ge.u"}


def _cmpi(low: Low, op: Any) -> None:
    a, b = (low._reg_of(x) for x in op.operands)
    pred = X.attr_value(op.predicate)
    cmp, sign = _CMP[int(pred)].split(".")
    bits = _int_bits(op.operands[0].type)
    p = low.k.reg("pred")
    low.k.ins(f"setp.{cmp}.{sign}{bits}", p, a, b)
    low.vals[op.results[0]] = p


def _select(low: Low, op: Any) -> None:
    c, a, b = (low._reg_of(x) for x in op.operands)
    bits = _int_bits(op.results[0].type)
    r = low.k.reg(f"b{bits}")
    low.k.ins(f"selp.b{bits}", r, a, b, c)
    low.vals[op.results[0]] = r


def _binary(opcode: str, signed: bool = False) -> Callable[[Low, Any], None]:
    """An arith op as one PTX instruction of the result's width (``opcode`` takes the type
    suffix: u/s/b for the signedness the op has)."""

    def lower(low: Low, op: Any) -> None:
        a, b = (low._reg_of(x) for x in op.operands)
        bits = arith_bits(op)
        kind = "s" if signed else "u"
        r = low.k.reg(f"{kind}{bits}")
        low.k.ins(opcode.format(t=f"{kind}{bits}", b=f"b{bits}"), r, a, b)
        low.vals[op.results[0]] = r

    return lower


# =========================================================================== special registers
def _sreg(low: Low, op: Any) -> None:
    r = low.k.reg("u32")
    low.k.ins("mov.u32", r, op.sreg)
    low.vals[op.results[0]] = r


def _warpgroup_idx(low: Low, op: Any) -> None:
    r = low.k.reg("u32")
    low.k.ins("shr.u32", r, low.tid(), 7)
    low.vals[op.results[0]] = r


def _setmaxnreg(low: Low, op: Any) -> None:
    SE.setmaxnreg(low.k, op.attr("action"), op.attr("regs"), target=low.t)
    low.need_threads(WARPGROUP)  # .sync.aligned over a whole warpgroup


# =========================================================================== mbarriers
def _mbarrier_init_array(low: Low, op: Any) -> None:
    n = op.attr("size")
    sym = low.k.shared(low.fresh("mbars"), 8 * n, 8)
    low.shared += 8 * n
    base = TE.shared_address(low.k, sym)
    skip, _ = low._elect()
    for i in range(n):
        TE.mbarrier_init(low.k, f"{base}+{8 * i}" if i else base, op.attr("count"))
    TE.fence_mbarrier_init(low.k)
    low.k.label(skip)
    low.k.ins("bar.sync", 0)
    low.vals[op.results[0]] = base


def _mbarrier_at(low: Low, op: Any) -> None:
    base, i = (low._reg_of(x) for x in op.operands)
    r = low.k.reg("u32")
    low.k.ins("mad.lo.u32", r, i, 8, base)
    low.vals[op.results[0]] = r


def _mbarrier_arrive(low: Low, op: Any) -> None:
    bar, *cta = (low._reg_of(x) for x in op.operands)
    tx = op.attr("expect_tx")
    if cta:
        TE.mbarrier_arrive_remote(low.k, SE.mapa_shared_cluster(low.k, bar, cta[0],
                                                                target=low.t))
    elif tx is not None:
        TE.mbarrier_arrive_expect_tx(low.k, bar, tx)
    else:
        TE.mbarrier_arrive(low.k, bar, count=op.attr("count"))


def _barrier_sync(low: Low, op: Any) -> None:
    bid = low._reg_of(op.operands[0]) if op.operands else op.attr("id")
    SE.named_barrier_sync(low.k, bid, op.attr("threads"), target=low.t)


def _fence_proxy_async(low: Low, op: Any) -> None:
    TE.fence_proxy_async(low.k)


def _bulk_commit_group(low: Low, op: Any) -> None:
    TE.bulk_commit_group(low.k)


def _bulk_wait_group(low: Low, op: Any) -> None:
    TE.bulk_wait_group(low.k, op.attr("pending"), read=bool(op.attr("read", False)))


# =========================================================================== views, fragments
def _smem_view(low: Low, op: Any) -> None:
    base = low._reg_of(op.operands[0])
    if len(op.operands) == 1:
        low.vals[op.results[0]] = _Addr(base.reg, "smem")
        return
    i = low._reg_of(op.operands[1])
    r = low.k.reg("u32")
    low.k.ins("mad.lo.u32", r, i, op.attr("stride"), base.reg)
    low.vals[op.results[0]] = _Addr(r, "smem")


def _fragment_slice(low: Low, op: Any) -> None:
    frag = low._reg_of(op.operands[0])
    m = TY.memref_of(op.results[0].type)
    n = m.layout[1] if m.layout.rank >= 2 else m.layout

    off = op.attr("offset")
    if not isinstance(frag, _Frag):
        raise LowerError("fragment_slice takes a register fragment")
    low.vals[op.results[0]] = _Frag(frag.regs[off:off + size(n)])


def _fragment_convert(low: Low, op: Any) -> None:
    frag = low._reg_of(op.operands[0])
    src, dst = (TY.memref_of(x.type) for x in (op.operands[0], op.results[0]))
    dtype = CONVERTS[(src.element.name, dst.element.name)]
    low.wg.read(frag.regs)  # the accumulators a WGMMA wrote must have retired
    regs = [SE.cvt_pack_f32(low.k, dtype, frag.regs[i + 1], frag.regs[i], target=low.t)
            for i in range(0, len(frag.regs), 2)]
    low.vals[op.results[0]] = _Frag(regs)


LOWERINGS: dict[str, Callable[[Low, Any], None]] = {
    "scf.if": _scf_if,
    "arith.cmpi": _cmpi,
    "arith.select": _select,
    "arith.subi": _binary("sub.{t}", signed=True),
    "arith.divui": _binary("div.{t}"),
    "arith.remui": _binary("rem.{t}"),
    "arith.divsi": _binary("div.{t}", signed=True),
    "arith.remsi": _binary("rem.{t}", signed=True),
    "arith.minui": _binary("min.{t}"),
    "arith.maxui": _binary("max.{t}"),
    "arith.minsi": _binary("min.{t}", signed=True),
    "arith.maxsi": _binary("max.{t}", signed=True),
    "arith.shli": _binary("shl.{b}"),
    "arith.shrui": _binary("shr.{t}"),
    "arith.shrsi": _binary("shr.{t}", signed=True),
    "arith.ori": _binary("or.{b}"),
    "arith.xori": _binary("xor.{b}"),
    "cute_nvgpu.arch.thread_idx": _sreg,
    "cute_nvgpu.arch.block_idx": _sreg,
    "cute_nvgpu.arch.grid_dim": _sreg,
    "cute_nvgpu.arch.warpgroup_idx": _warpgroup_idx,
    "cute_nvgpu.arch.setmaxnreg": _setmaxnreg,
    "cute_nvgpu.arch.mbarrier_init_array": _mbarrier_init_array,
    "cute_nvgpu.arch.mbarrier_at": _mbarrier_at,
    "cute_nvgpu.arch.mbarrier_arrive": _mbarrier_arrive,
    "cute_nvgpu.arch.barrier_sync": _barrier_sync,
    "cute_nvgpu.arch.fence_proxy_async": _fence_proxy_async,
    "cute_nvgpu.arch.bulk_commit_group": _bulk_commit_group,
    "cute_nvgpu.arch.bulk_wait_group": _bulk_wait_group,
    "cute.smem_view": _smem_view,
    "cute.fragment_slice": _fragment_slice,
    "cute.fragment_convert": _fragment_convert,
}
