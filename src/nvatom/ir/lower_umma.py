"""The lowering of SM100 tcgen05 IR to PTX: tensor memory, every UMMA form, ``tcgen05.cp``,
``tcgen05.ld/st``, ``tcgen05.shift`` and ``tcgen05.commit`` (a mixin of the kernel lowering,
nvatom.ir.lower).

* A kernel's tcgen05 instructions use one CTA group (ptxas): the group of its UMMA and
  ``s2t_copy`` atoms (:func:`nvatom.ir.tcgen05.kernel_cta_group`), which also picks
  ``tcgen05.alloc/dealloc/relinquish_alloc_permit.cta_group::N`` and ``tcgen05.commit``'s.
* TMEM: all ``cute.alloc_tmem`` buffers of a kernel share one ``tcgen05.alloc`` (warp 0,
  then ``relinquish_alloc_permit``: a CTA may not allocate after relinquishing) of the
  next power of two >= 32 covering them; each buffer (a power of two >= 32 columns, the
  largest first, so each is aligned to its size) is the base address plus its column
  offset; the kernel's return frees the allocation.  With ``cta_group::2`` warp 0 of both
  CTAs of the pair allocates (the instruction is collective over the pair).
* ``cute_nvgpu.atom.mma`` with an UMMA atom: one ``tcgen05.mma`` per K-block (the verifier's
  count), the form the target takes (``atom.issued_form``: ``.scale_vec::NX`` or
  ``.blockN``), A and B descriptors per K-block (``k_block_descriptors`` of the view's
  layout, in the atom's element containers, the K-block's stored K), A of ``ts`` / scale
  factors / metadata at their buffer's address advanced by the columns one K-block takes
  (:func:`nvatom.ir.tcgen05.operand_extent`), the atom's idesc.  Issued by thread 0, or
  with ``cta_group::2`` by thread 0 of the even CTA of each pair (``%cluster_ctarank`` bit
  0 clear: the pair's MMA is issued once, PTX ISA "tcgen05: CTA pair").
* ``umma_commit``: the issuing thread's ``tcgen05.commit``; ``.multicast::cluster`` with the
  op's ``multicast_mask``, or with ``cta_group::2`` to both CTAs of the pair (mask
  ``0b11 << (rank & ~1)``), so both barriers see the pair's MMAs complete.
* ``atom.s2t_copy``: ``tcgen05.cp`` from the shared tile's K-major descriptor
  (:func:`nvatom.ir.tcgen05.s2t_source`) to the buffer, issued like an MMA.
* ``cute_nvgpu.arch.tmem_shift``: ``tcgen05.shift.cta_group::N.down``, issued like an MMA.

Source: PTX ISA "tcgen05.alloc", "tcgen05.mma", "tcgen05.commit", "tcgen05.cp",
"tcgen05.shift", "tcgen05.ld", "tcgen05.fence"; nvatom.ptx.tcgen05_emit for the spelling.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from nvatom.atoms.tmem import COLUMNS as TMEM_COLUMNS
from nvatom.atoms.tmem import LANE_STRIDE, alloc_columns
from nvatom.atoms.wgmma_fragments import WARPGROUP
from nvatom.descriptors.umma import k_block_descriptors
from nvatom.errors import NvatomError
from nvatom.ir import tcgen05 as T5
from nvatom.ir import types as TY
from nvatom.ir.dialect import tmem_columns
from nvatom.ir.fragments import WARP
from nvatom.ptx import tma_emit as TE
from nvatom.ptx.builder import Reg
from nvatom.ptx.tcgen05_emit import Tcgen05

__all__ = ["Tcgen05LowerError", "Tcgen05Lowering", "Tmem"]



class Tcgen05LowerError(NvatomError):
    """A tcgen05 operation the lowering cannot emit (the message says why)."""


@dataclasses.dataclass
class Tmem:
    taddr: Reg  # the buffer's TMEM address (lane 0, its first column)
    columns: int  # 32-bit columns of the buffer


class Tcgen05Lowering:
    """Mixin of ``nvatom.ir.lower._KernelLowering`` (its ``k``, ``fn``, ``t``, ``v``,
    ``vals``, ``tid``, ``need``, ``fresh``, ``shared``, ``_reg_of``, ``_cluster_rank``)."""

    k: Any
    fn: Any
    t: Any
    v: Any
    vals: dict[Any, Any]
    shared: int
    _t5: Any = None
    _tmem_base: Reg | None = None
    _tmem_total = 0
    _tmem_offsets: dict[Any, int]

    # ------------------------------------------------------------------ the emitter
    @property
    def t5(self) -> Any:
        if self._t5 is None:
            self._t5 = Tcgen05(self.k, T5.kernel_cta_group(T5.func_cta_groups(self.fn),
                                                           self.k.name))
        return self._t5

    def _warp0(self) -> str:
        """Branch so that only warp 0 runs what follows until the returned label."""
        p = self.k.reg("pred")
        self.k.ins("setp.ge.u32", p, self.tid(), WARP)  # type: ignore[attr-defined]
        skip = self.k.fresh_label("warp0")
        self.k.bra(skip, p)
        return skip

    def _issuer(self) -> str:
        """Branch so that only the thread issuing the kernel's MMAs runs what follows: thread
        0, and with ``cta_group::2`` thread 0 of the pair's even CTA."""
        p = self.k.reg("pred")
        self.k.ins("setp.ne.u32", p, self.tid(), 0)  # type: ignore[attr-defined]
        if self.t5.cta_group == 2:
            odd = self.k.reg("u32")
            self.k.ins("and.b32", odd, self._cluster_rank(), 1)  # type: ignore[attr-defined]
            q = self.k.reg("pred")
            self.k.ins("setp.ne.or.u32", q, odd, 0, p)
            p = q
        skip = self.k.fresh_label("issue")
        self.k.bra(skip, p)
        return skip

    # ------------------------------------------------------------------ TMEM
    def _tmem_setup(self) -> None:
        allocs = [op for op in self.fn.walk() if op.name == "cute.alloc_tmem"]
        top = self.fn.body.blocks[0]
        for op in allocs:
            if op.parent_block() is not top:
                raise Tcgen05LowerError("cute.alloc_tmem lowers at the kernel's top level only "
                                        "(one tcgen05.alloc per kernel)")
        sizes = {op: tmem_columns(TY.memref_of(op.results[0].type)) for op in allocs}
        self._tmem_offsets, off = {}, 0
        for op in sorted(allocs, key=lambda o: -sizes[o]):
            self._tmem_offsets[op] = off
            off += sizes[op]
        total = alloc_columns(off)
        if total > TMEM_COLUMNS:
            raise Tcgen05LowerError(f"the kernel's TMEM buffers take {off} columns; a CTA has "
                                    f"{TMEM_COLUMNS}")
        self._tmem_total = total
        slot = TE.shared_address(self.k, self.k.shared(self.fresh("tslot"), 8, 8))  # type: ignore[attr-defined]
        self.shared += 8
        skip = self._warp0()
        self.t5.alloc(slot, total)
        self.t5.relinquish()
        self.k.label(skip)
        self.t5.fence_before_thread_sync()
        self.k.ins("bar.sync", 0)
        self.t5.fence_after_thread_sync()
        base = self.k.reg("u32")
        self.k.ins("ld.shared.u32", base, f"[{slot}]")
        self._tmem_base = base
        self.need_threads(WARPGROUP)  # type: ignore[attr-defined]

    def _cute_alloc_tmem(self, op: Any) -> None:
        if self._tmem_base is None:
            self._tmem_setup()
        assert self._tmem_base is not None
        m = TY.memref_of(op.results[0].type)
        off = self._tmem_offsets[op]
        taddr = self._tmem_base
        if off:
            taddr = self.k.reg("u32")
            self.k.ins("add.u32", taddr, self._tmem_base, off)
        self.vals[op.results[0]] = Tmem(taddr, T5.buffer_columns(m.layout))  # type: ignore[union-attr]

    def _tmem_free(self) -> None:
        """At the kernel's return: every warp's tcgen05 work is done, warp 0 frees TMEM."""
        if self._tmem_base is None:
            return
        self.t5.fence_before_thread_sync()
        self.k.ins("bar.sync", 0)
        skip = self._warp0()
        self.t5.dealloc(self._tmem_base, self._tmem_total)
        self.k.label(skip)

    def _tmem_of(self, v: Any, what: str) -> Tmem:
        val = self._reg_of(v)  # type: ignore[attr-defined]
        if not isinstance(val, Tmem):
            raise Tcgen05LowerError(f"the {what} operand lowers from a cute.alloc_tmem buffer")
        return val

    def _at(self, tm: Tmem, columns: int) -> Reg:
        if not columns:
            return tm.taddr
        r = self.k.reg("u32")
        self.k.ins("add.u32", r, tm.taddr, columns)
        return r

    # ------------------------------------------------------------------ UMMA
    def _desc_words(self, atom: Any, operand: str, val: Any, k_blocks: int) -> list[Reg]:
        """One 64-bit descriptor per K-block of a view (start address advanced)."""

        base, desc = val
        bits = atom.element_bits(operand)
        words = k_block_descriptors(desc.layout, bits, desc.major, k_blocks,
                                    block_k=atom.stored_k(operand))
        return self._based_words(base.reg, words)

    def _based_words(self, base: Reg, words: Any) -> list[Reg]:
        """Shared-memory descriptor words with the tile's base address added at run time:
        ``(base >> 4) + word`` (the start-address field is the address in 16-byte units; the
        words encode the offset from the base)."""
        b64 = self.k.reg("u64")
        self.k.ins("cvt.u64.u32", b64, base)
        self.k.ins("shr.u64", b64, b64, 4)
        out = []
        for w in words:
            r = self.k.reg("b64")
            self.k.ins("add.s64", r, b64, str(w.encode()))
            out.append(r)
        return out

    def _check_cta_group(self, atom: Any) -> None:
        """Every tcgen05 instruction of a kernel uses the kernel's one CTA group."""
        if self.t5.cta_group != atom.cta_group:
            raise Tcgen05LowerError(f"'{atom.name}' is cta_group::{atom.cta_group} in a kernel "
                                    f"of cta_group::{self.t5.cta_group}")

    def _umma(self, op: Any, atom: Any) -> None:
        _, d, a, b, _c, *extra = op.operands
        k_blocks = self.v.facts[op]
        form = atom.issued_form(self.t)
        self._check_cta_group(atom)
        acc = self._tmem_of(d, "D")
        a_val = self._reg_of(a)  # type: ignore[attr-defined]
        if atom.a_source == "ss":
            a_ops: list[Any] = self._desc_words(atom, "A", a_val, k_blocks)
        else:
            ta = self._tmem_of(a, "A")
            step = T5.operand_extent(atom, "A")[2]
            a_ops = [self._at(ta, j * step) for j in range(k_blocks)]
        b_ops = self._desc_words(atom, "B", self._reg_of(b), k_blocks)  # type: ignore[attr-defined]
        tmem_ops: dict[str, list[Reg]] = {}
        slots = (["sfa", "sfb"] if atom.block_scaled else []) + (["meta"] if atom.sparse else [])
        for slot, x in zip(slots, extra, strict=True):
            name = {"sfa": "SFA", "sfb": "SFB", "meta": "E"}[slot]
            tm = self._tmem_of(x, name)
            step = T5.operand_extent(atom, name)[2]
            tmem_ops[slot] = [self._at(tm, j * step) for j in range(k_blocks)]
        idesc = self.k.reg("u32")
        self.k.ins("mov.u32", idesc, str(atom.idesc().encode()))
        on, off = self.k.reg("pred"), self.k.reg("pred")
        self.k.ins("setp.eq.u32", on, self.tid(), self.tid())  # type: ignore[attr-defined]
        self.k.ins("setp.ne.u32", off, self.tid(), self.tid())  # type: ignore[attr-defined]
        skip = self._issuer()
        for j in range(k_blocks):
            first = j == 0 and op.attr("accumulate") is False
            self.t5.mma(form, d=acc.taddr, a=a_ops[j], b=b_ops[j], idesc=idesc,
                        enable_input_d=off if first else on,
                        **{s: regs[j] for s, regs in tmem_ops.items()})
        self.k.label(skip)
        self.need_threads(WARPGROUP)  # type: ignore[attr-defined]

    def _cute_nvgpu_arch_umma_commit(self, op: Any) -> None:
        bar = self._reg_of(op.operands[0])  # type: ignore[attr-defined]
        mask = None
        if op.attr("multicast_mask") is not None:  # the program's CTAs
            mask = self.k.reg("b16")
            self.k.ins("mov.b16", mask, op.attr("multicast_mask"))
        elif self.t5.cta_group == 2:  # both CTAs of the pair: 0b11 << (rank & ~1)
            pair = self.k.reg("b32")
            self.k.ins("and.b32", pair, self._cluster_rank(), 0xFFFFFFFE)  # type: ignore[attr-defined]
            m32 = self.k.reg("b32")
            self.k.ins("shl.b32", m32, 3, pair)
            mask = self.k.reg("b16")
            self.k.ins("cvt.u16.u32", mask, m32)
        skip = self._issuer()
        self.t5.commit(bar, multicast_mask=mask)
        self.k.label(skip)

    # ------------------------------------------------------------------ copies, shift
    def _tmem_copy(self, atom: Any, src: Any, dst: Any) -> None:
        """``tcgen05.ld``/``st``: warp w reaches the TMEM lanes 32 (w % 4).. of the buffer."""
        tm_v, frag_v = (src, dst) if atom.direction == "load" else (dst, src)
        tm = self._tmem_of(tm_v, "TMEM")
        frag = self._reg_of(frag_v)  # type: ignore[attr-defined]
        regs = getattr(frag, "regs", None)
        if regs is None:
            raise Tcgen05LowerError(f"'{atom.name}' moves between a cute.alloc_tmem buffer and "
                                    "a register fragment")
        if len(regs) != atom.registers:
            raise Tcgen05LowerError(f"'{atom.name}' moves {atom.registers} registers per "
                                    f"thread, the fragment has {len(regs)}")
        quarter = self.k.reg("u32")
        self.k.ins("shr.u32", quarter, self.tid(), 5)  # type: ignore[attr-defined]
        self.k.ins("and.b32", quarter, quarter, 3)
        # a warp reaches lanes 32 (warp % 4)..: the lane field of the address
        self.k.ins("shl.b32", quarter, quarter, (32 * LANE_STRIDE).bit_length() - 1)
        lane = self.k.reg("u32")
        self.k.ins("add.u32", lane, tm.taddr, quarter)
        if atom.direction == "load":
            self.t5.ld(atom, regs, lane)
            self.t5.wait_ld()
        else:
            self.t5.st(atom, lane, regs)
            self.t5.wait_st()
        self.need_threads(WARPGROUP)  # type: ignore[attr-defined]

    def _s2t_copy(self, op: Any, atom: Any) -> None:
        """``tcgen05.cp``: the shared tile's descriptor (its address >> 4 added at run time)
        to the buffer, issued by the MMA issuer."""
        _, src, dst = op.operands
        desc = self.v.facts[op]
        base = self._reg_of(src).reg  # type: ignore[attr-defined]
        tm = self._tmem_of(dst, "destination")
        self._check_cta_group(atom)
        [word] = self._based_words(base, [desc])
        skip = self._issuer()
        self.t5.cp(atom, tm.taddr, word)
        self.k.label(skip)
        self.need_threads(WARPGROUP)  # type: ignore[attr-defined]

    def _cute_nvgpu_arch_tmem_shift(self, op: Any) -> None:
        tm = self._tmem_of(op.operands[0], "shifted")
        skip = self._issuer()
        self.t5.shift(tm.taddr)
        self.k.label(skip)
        self.need_threads(WARPGROUP)  # type: ignore[attr-defined]
