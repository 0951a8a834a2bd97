"""SM100 GEMM: TMA -> 128B-swizzled shared memory -> ``tcgen05.mma`` into TMEM ->
``tcgen05.ld`` -> global stores, built only from nvatom's atoms; and a CPU run of the same
plan on the reference model (:mod:`nvatom.ref.tcgen05`).

``D (M x N, f32, row-major) = A (M x K, row-major) @ B (N x K, row-major)^T`` for f16 or
bf16 inputs.  One CTA (4 warps, ``cta_group::1``) computes one 128 x BN tile:

1. warp 0 allocates ``BN`` (rounded up to a power of two >= 32) TMEM columns
   (``tcgen05.alloc``, address -> shared memory) and relinquishes the permit; thread 0
   initialises two mbarriers (``full``: TMA bytes, ``done``: MMA completion);
   ``tcgen05.fence::before_thread_sync`` / ``bar.sync`` / ``after_thread_sync``;
2. per 64-element K tile: thread 0 arms ``full`` with the tile's bytes and issues two TMA
   loads (:mod:`nvatom.ptx.tma_emit`: A box 64 x 128, B box 64 x BN, SW128); everyone waits
   on ``full``; thread 0 issues four ``tcgen05.mma`` (one per 16-element K-block; the first of
   the kernel with enable-input-d false) and ``tcgen05.commit`` to ``done``; everyone waits on
   ``done`` (so the single stage may be overwritten);
3. epilogue: warp w loads TMEM lanes 32w..32w+31 with ``tcgen05.ld.32x32b.x<BN>`` (thread t:
   row 32w + t, register j: column j), ``tcgen05.wait::ld``, and stores the row to D;
4. ``tcgen05.fence::before_thread_sync``, ``bar.sync``, warp 0 deallocates.

Every number the kernel needs is in :class:`GemmSm100Plan`: the UMMA atom
(``sm100.mma.f16.cta1.m128n<BN>k16.ss.f32.<t>.<t>``), the smem layouts
(:func:`nvatom.atoms.smem.smem_layout`), the per-K-block descriptors derived from them
(:func:`nvatom.descriptors.umma.k_block_descriptors`, start addresses relative to the
1024-byte aligned dynamic shared memory, whose address the kernel adds at run time), the
idesc word, the TMEM load atom and the TMA boxes.  :func:`simulate` executes the *same plan*
on the CPU model: TMA writes the boxes as the CUDA driver's SWIZZLE_128B defines (row-major
128-byte rows, 16-byte chunk ``c`` of row ``r`` stored at chunk ``c ^ (r % 8)``), the model
MMA reads them through the plan's descriptor words and idesc, and the plan's ``tcgen05.ld``
atom reads the accumulator back.

Single-stage and non-persistent on purpose: the point is a complete, checked data path
(no Blackwell GPU was available; nothing here has run on hardware).  Sources: PTX ISA
"tcgen05.alloc", "tcgen05.mma", "tcgen05.commit", "tcgen05.ld", "tcgen05.fence",
"cp.async.bulk.tensor", "mbarrier"; CUDA driver "cuTensorMapEncodeTiled".
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from nvatom.atoms.sm100 import UmmaAtom, make_umma_atom
from nvatom.atoms.smem import smem_layout, smem_swizzle
from nvatom.atoms.tmem import LANE_STRIDE, TmemCopyAtom
from nvatom.descriptors.tma import TensorMap
from nvatom.descriptors.umma import UmmaSmemDescriptor, k_block_descriptors
from nvatom.dtypes import dtype as element_type
from nvatom.errors import NvatomError
from nvatom.ptx import tma_emit as TE
from nvatom.ptx.builder import Kernel, Module, Reg
from nvatom.ptx.tcgen05_emit import Tcgen05, check_kernel
from nvatom.ref.tcgen05 import Smem, Tmem, mma, tmem_load

__all__ = ["GemmSm100Error", "GemmSm100Plan", "build_gemm_sm100_module", "gemm_sm100_plan",
           "simulate"]

#: The operand types (16-bit: the kind::f16 UMMA, f32 accumulation).
IN_DTYPES = ("f16", "bf16")
_BITS = element_type(IN_DTYPES[0]).storage_bits  # element width of every IN_DTYPES type (16)
assert all(element_type(t).storage_bits == _BITS for t in IN_DTYPES)
_SW128 = smem_swizzle("SW128")
#: rows per CTA (UMMA M), K elements per TMA box (one SW128 row of 16-bit elements)
BM, BK = 128, _SW128.row_bytes * 8 // _BITS
THREADS = 128


class GemmSm100Error(NvatomError):
    """A configuration the SM100 GEMM does not support (names the value)."""


@dataclasses.dataclass(frozen=True)
class GemmSm100Plan:
    """Everything the kernel and the CPU run share."""

    dtype: str
    bn: int
    atom: UmmaAtom
    a_layout: Any
    b_layout: Any
    a_offset: int  # byte offsets in dynamic shared memory
    b_offset: int
    bar_offset: int  # two 8-byte mbarriers: full, done
    slot_offset: int  # 4 bytes: the TMEM address tcgen05.alloc writes
    smem_bytes: int
    a_descs: tuple[UmmaSmemDescriptor, ...]  # per 16-element K-block, relative start
    b_descs: tuple[UmmaSmemDescriptor, ...]
    idesc: int
    tmem_columns: int
    ld_atom: TmemCopyAtom

    @property
    def k_blocks(self) -> int:
        return BK // self.atom.k

    @property
    def tile_bytes(self) -> int:
        return (BM + self.bn) * BK * 2

    def epilogue_coord(self, warp: int, thread: int, reg: int) -> tuple[int, int]:
        """(row, column) of the D tile that register ``reg`` of ``thread`` in ``warp`` holds
        after the epilogue's tcgen05.ld (the ld atom's layout at lane base 32 * warp)."""
        lane, col = self.ld_atom.coords(thread, reg)
        return 32 * warp + lane, col


def gemm_sm100_plan(bn: int = 128, dtype: str = "bf16") -> GemmSm100Plan:
    if dtype not in IN_DTYPES:
        raise GemmSm100Error(f"dtype {dtype!r}: the SM100 GEMM takes f16 or bf16")
    if bn not in (16, 32, 64, 128):
        raise GemmSm100Error(f"BN = {bn}: one 32x32b.x<BN> load per warp takes BN in 16, 32, "
                             "64, 128")
    atom = make_umma_atom("f16", 1, BM, bn, "f32", dtype, dtype)
    a_lay = smem_layout(BM, BK, _BITS, "K", _SW128)
    b_lay = smem_layout(bn, BK, _BITS, "K", _SW128)
    a_off, b_off = 0, BM * BK * _BITS // 8
    bar_off = b_off + bn * BK * _BITS // 8
    kb = BK // atom.k
    return GemmSm100Plan(
        dtype=dtype, bn=bn, atom=atom, a_layout=a_lay, b_layout=b_lay, a_offset=a_off,
        b_offset=b_off, bar_offset=bar_off, slot_offset=bar_off + 16,
        smem_bytes=bar_off + 32,
        a_descs=k_block_descriptors(a_lay, _BITS, "K", kb, a_off),
        b_descs=k_block_descriptors(b_lay, _BITS, "K", kb, b_off),
        idesc=atom.idesc().encode(), tmem_columns=max(32, 1 << (bn - 1).bit_length()),
        ld_atom=TmemCopyAtom("load", "32x32b", bn))


def tensor_maps(plan: GemmSm100Plan, m: int, n: int, k: int, a_ptr: int = 0,
                b_ptr: int = 0) -> tuple[TensorMap, TensorMap]:
    """The host's tensor maps for A (M x K) and B (N x K), row-major, SW128 boxes."""
    if k % BK or m % BM or n % plan.bn:
        raise GemmSm100Error(f"M, N, K = {m}, {n}, {k} must be multiples of {BM}, {plan.bn}, "
                             f"{BK}")
    t, pitch = plan.dtype, k * _BITS // 8  # the driver's type of f16 / bf16 (tma_data_type)
    ta = TensorMap("tiled", t, a_ptr, (k, m), (pitch,), box_dims=(BK, BM), swizzle=_SW128)
    tb = TensorMap("tiled", t, b_ptr, (k, n), (pitch,), box_dims=(BK, plan.bn),
                   swizzle=_SW128)
    return ta, tb


# ============================================================================ PTX


def _u64_const_plus(k: Kernel, word: int, base16: Reg) -> Reg:
    r = k.reg("b64")
    k.ins("add.s64", r, base16, str(word))
    return r


def build_gemm_sm100_module(plan: GemmSm100Plan, k_tiles: int = 2,
                            target: str = "sm_100a") -> Module:
    """``gemm_sm100(tmap_a, tmap_b, D, N)`` for K = 64 * k_tiles (the loop is unrolled)."""
    if k_tiles < 1:
        raise GemmSm100Error(f"k_tiles = {k_tiles} must be >= 1")
    mod = Module(target, features=("tcgen05", "tma", "mbarrier.tx"))
    k = mod.kernel("gemm_sm100")
    k.reqntid = (THREADS,)
    pa, pb = (k.byte_param(n, TE.TENSORMAP_BYTES, TE.GEMM_TENSORMAP_ALIGN)
              for n in ("tmap_a", "tmap_b"))
    pd, pn = k.param("D", "u64"), k.param("N", "u32")
    smem = k.dynamic_shared("dsmem", 1024)
    t5 = Tcgen05(k, 1)

    tid, warp, m0, n0 = k.reg("u32"), k.reg("u32"), k.reg("u32"), k.reg("u32")
    k.ins("mov.u32", tid, "%tid.x")
    k.ins("shr.u32", warp, tid, 5)
    k.ins("mov.u32", m0, "%ctaid.x")
    k.ins("mul.lo.u32", m0, m0, BM)
    k.ins("mov.u32", n0, "%ctaid.y")
    k.ins("mul.lo.u32", n0, n0, plan.bn)
    leader, warp0 = k.reg("pred"), k.reg("pred")
    k.ins("setp.eq.u32", leader, tid, 0)
    k.ins("setp.eq.u32", warp0, warp, 0)
    base = TE.shared_address(k, smem)
    a_s, b_s = TE.shared_address(k, smem, plan.a_offset), TE.shared_address(k, smem,
                                                                                plan.b_offset)
    full = TE.shared_address(k, smem, plan.bar_offset)
    done = TE.shared_address(k, smem, plan.bar_offset + 8)
    slot = TE.shared_address(k, smem, plan.slot_offset)
    tmap_a, tmap_b = k.param_address(pa), k.param_address(pb)

    # -- setup: TMEM allocation (warp 0), barriers (thread 0)
    skip = k.fresh_label("no_alloc")
    k.bra(skip, f"!{warp0}")
    t5.alloc(slot, plan.tmem_columns)
    t5.relinquish()
    k.label(skip)
    skip = k.fresh_label("no_init")
    k.bra(skip, f"!{leader}")
    TE.mbarrier_init(k, full, 1)
    TE.mbarrier_init(k, done, 1)
    TE.fence_mbarrier_init(k)
    k.label(skip)
    t5.fence_before_thread_sync()
    k.ins("bar.sync", 0)
    t5.fence_after_thread_sync()
    taddr = k.reg("u32")
    k.ins("ld.shared.u32", taddr, f"[{slot}]")

    # -- descriptors: plan words (relative start) + (dynamic smem address >> 4)
    b64 = k.reg("u64")
    k.ins("cvt.u64.u32", b64, base)
    k.ins("shr.u64", b64, b64, 4)
    adesc = [_u64_const_plus(k, d.encode(), b64) for d in plan.a_descs]
    bdesc = [_u64_const_plus(k, d.encode(), b64) for d in plan.b_descs]
    idesc = k.reg("u32")
    k.ins("mov.u32", idesc, str(plan.idesc))
    p_acc, p_first = k.reg("pred"), k.reg("pred")
    k.ins("setp.eq.u32", p_acc, tid, tid)  # true
    k.ins("setp.ne.u32", p_first, tid, tid)  # false: the kernel's first MMA overwrites D

    kx = k.reg("u32")
    for kt in range(k_tiles):
        skip = k.fresh_label("no_load")
        k.bra(skip, f"!{leader}")
        TE.mbarrier_arrive_expect_tx(k, full, plan.tile_bytes)
        k.ins("mov.u32", kx, kt * BK)
        TE.tma_load(k, a_s, tmap_a, (kx, m0), full, target=target)
        TE.tma_load(k, b_s, tmap_b, (kx, n0), full, target=target)
        k.label(skip)
        TE.mbarrier_wait_parity(k, full, kt % 2)
        t5.fence_after_thread_sync()
        skip = k.fresh_label("no_mma")
        k.bra(skip, f"!{leader}")
        for j in range(plan.k_blocks):
            t5.mma(plan.atom, d=taddr, a=adesc[j], b=bdesc[j], idesc=idesc,
                   enable_input_d=p_first if kt == 0 and j == 0 else p_acc)
        t5.commit(done)
        k.label(skip)
        TE.mbarrier_wait_parity(k, done, kt % 2)
        t5.fence_after_thread_sync()

    _epilogue(k, t5, plan, warp, taddr, (tid, m0, n0), pn, pd)

    # -- teardown
    t5.fence_before_thread_sync()
    k.ins("bar.sync", 0)
    skip = k.fresh_label("no_dealloc")
    k.bra(skip, f"!{warp0}")
    t5.dealloc(taddr, plan.tmem_columns)
    k.label(skip)
    check_kernel(k)
    return mod


def _epilogue(k: Kernel, t5: Tcgen05, plan: GemmSm100Plan, warp: Reg, taddr: Reg,
              coords: tuple[Reg, Reg, Reg], pn: Any, pd: Any) -> None:
    """Warp ``w`` reads TMEM lanes 32w.. (thread t: row 32w + t) and stores its row of D."""
    tid, m0, n0 = coords
    lane_addr = k.reg("u32")
    # the warp's first lane, 32 * warp, in the address's lane field (LANE_STRIDE = 1 << 16)
    k.ins("shl.b32", lane_addr, warp, (32 * LANE_STRIDE).bit_length() - 1)
    k.ins("add.u32", lane_addr, lane_addr, taddr)
    acc = k.regs("b32", plan.bn)
    t5.ld(plan.ld_atom, acc, lane_addr)
    t5.wait_ld()
    row, off = k.reg("u32"), k.reg("u64")
    k.ins("add.u32", row, m0, tid)
    n_ = k.ld_param(pn)
    k.ins("mad.lo.u32", row, row, n_, n0)  # element index of D[row, n0]
    k.ins("mul.wide.u32", off, row, 4)
    dptr = k.ld_param(pd)
    k.ins("cvta.to.global.u64", dptr, dptr)
    k.ins("add.s64", dptr, dptr, off)
    for j in range(0, plan.bn, 4):
        k.ins("st.global.v4.b32", f"[{dptr}+{4 * j}]", acc[j:j + 4])


# ============================================================================ CPU run


def _tma_sw128_load(smem: Any, addr: int, box: np.ndarray) -> None:
    """A TMA load of a (rows x 64) 16-bit box with CU_TENSOR_MAP_SWIZZLE_128B: row r is 128
    bytes at ``addr + 128 r``; each 16-byte chunk lands where the SW128 swizzle of the
    table (:data:`nvatom.atoms.smem.SMEM_SWIZZLES`) puts its byte offset: chunk c of row r at
    chunk ``c ^ (r % 8)`` (``addr`` 1024-byte aligned)."""
    raw = np.ascontiguousarray(box.astype(np.uint16)).view(np.uint8)
    rows, row, unit = raw.shape[0], _SW128.row_bytes, _SW128.atom_bytes
    for r in range(rows):
        for c in range(row // unit):
            dst = addr + _SW128.swizzle(row * r + unit * c)
            smem.data[dst:dst + unit] = raw[r, unit * c:unit * c + unit]


def simulate(plan: GemmSm100Plan, a_codes: np.ndarray, b_codes: np.ndarray) -> np.ndarray:
    """Run the kernel's data path on the CPU model: ``a_codes`` (M x K) and ``b_codes``
    (N x K) are 16-bit codes of ``plan.dtype``; returns D (M x N, float32)."""

    m, kk = a_codes.shape
    n = b_codes.shape[0]
    tensor_maps(plan, m, n, kk)  # the same shape rules as the host
    d = np.zeros((m, n), np.float32)
    for m0 in range(0, m, BM):
        for n0 in range(0, n, plan.bn):
            smem, tmem = Smem(), Tmem()
            first = True
            for kt in range(kk // BK):
                _tma_sw128_load(smem, plan.a_offset, a_codes[m0:m0 + BM, kt * BK:(kt + 1) * BK])
                _tma_sw128_load(smem, plan.b_offset,
                                b_codes[n0:n0 + plan.bn, kt * BK:(kt + 1) * BK])
                for j in range(plan.k_blocks):
                    mma(tmem, smem, kind="f16", d_taddr=0, a=plan.a_descs[j].encode(),
                        b_desc=plan.b_descs[j].encode(), idesc=plan.idesc,
                        enable_input_d=not first)
                    first = False
            for w in range(4):
                regs = tmem_load(tmem, plan.ld_atom, (32 * w) << 16)
                for t in range(32):
                    for j in range(plan.ld_atom.registers):
                        r, c = plan.epilogue_coord(w, t, j)
                        d[m0 + r, n0 + c] = regs[t, j:j + 1].view(np.float32)[0]
    return d
