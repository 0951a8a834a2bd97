"""Run the op sequence of a verified, lowered SM100 IR kernel on the CPU model of tcgen05
(nvatom.ref.tcgen05), one CTA at a time: the data path of tests/ir/gemm_sm100.mlir, as
nvatom.kernels.gemm_sm100.simulate runs the Python GEMM's plan.

What each operation does in the model, and where its numbers come from:

* ``cute.alloc_smem`` / ``mbarrier_init``: addresses in one CTA's shared window, aligned as
  the lowering aligns them (1024 bytes for swizzled tiles);
* ``mbarrier_init``: an mbarrier with its arrival count and transaction count;
* ``tma_load``: thread 0's ``arrive.expect_tx`` of the bytes the lowering announces (the
  partition's), then the box the lowering hoisted into the kernel's tensor-map parameter
  (``KernelInfo.tma``: box, swizzle bytes, the tensor argument) copied from a row-major 2-D
  tensor at the coordinate (innermost first), written as the CUDA driver's
  ``CU_TENSOR_MAP_SWIZZLE_128B`` stores it: row r at ``128 r``, 16-byte chunk c at chunk
  ``c ^ (r % 8)`` -- not through the IR tile's layout -- whose bytes complete the
  transaction count;
* ``atom.mma`` (UMMA): one model ``tcgen05.mma`` per K-block with the descriptor words the
  lowering emits (``k_block_descriptors`` of the view, relative start, plus the tile's
  address >> 4) and the atom's idesc (the test checks both are in the PTX); the model reads
  shared memory through the words as the PTX ISA defines them;
* ``umma_commit``: one arrival (the model MMA is synchronous); ``mbarrier_wait`` checks
  that the phase of its parity has completed (else the kernel would hang);
* ``atom.copy`` of ``tmem_load``: each warp's ``tcgen05.ld`` at lane ``32 (w % 4)``;
  a register -> global universal copy: thread t's value j to the element its (thread,
  value) layout names.

* ``atom.tmem_store``: each warp's ``tcgen05.st``; ``atom.s2t_copy`` 32x128b.warpx4: the
  model's ``tcgen05.cp`` reading the source through the descriptor word the lowering emits;
* a universal copy: thread t's value j from src (t, j) to dst (t, j), raw bytes, memory at
  its layout's element offset, registers at the value index;
* UMMA with A in TMEM (``ts``) and block-scaled UMMA: A, SFA and SFB at their buffers'
  addresses plus the columns of the K-blocks before (as the lowering steps them).

Only what tests/ir's SM100 kernels use is modelled (2-D TMA loads with the 128-byte swizzle,
dense cta_group::1 UMMA, one CTA at a time); anything else raises ``NotImplementedError``
naming the operation.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from nvatom.descriptors.umma import k_block_descriptors
from nvatom.ir import driver
from nvatom.ir import types as TY
from nvatom.ir import xdsl_adapter as X
from nvatom.ir.lower import Lowered, lower
from nvatom.layout import ComposedLayout, cosize, size
from nvatom.ref import tcgen05 as R


class _Barrier:
    """An mbarrier (PTX ISA "mbarrier"): a phase completes when its pending arrivals reach
    zero and its transaction count is zero; then the next phase expects ``count`` again."""

    def __init__(self, count: int) -> None:
        self.count, self.pending, self.tx, self.completed = count, count, 0, 0

    def _check(self) -> None:
        if self.pending < 0:
            raise AssertionError("more arrivals than the barrier's count in one phase")
        if self.pending == 0 and self.tx == 0:
            self.completed += 1
            self.pending = self.count

    def arrive(self, expect_tx: int = 0) -> None:
        self.pending -= 1
        self.tx += expect_tx
        self._check()

    def complete_tx(self, nbytes: int) -> None:
        self.tx -= nbytes
        self._check()

    def wait(self, parity: int) -> None:
        # try_wait.parity(p) returns once the current phase's parity is no longer p
        if self.completed % 2 == parity % 2:
            raise AssertionError(f"mbarrier wait on parity {parity} would block "
                                 f"({self.completed} phases completed, {self.pending} "
                                 f"arrivals and {self.tx} bytes pending)")


class Cta:
    """One CTA's run of a kernel's operations."""

    def __init__(self, mod: Any, ctx: Any, low: Lowered, fn: Any, args: list[Any]) -> None:
        self.ctx, self.low, self.fn = ctx, low, fn
        self.info = next(k for k in low.kernels if k.name == fn.sym_name.data)
        self.smem, self.tmem = R.Smem(), R.Tmem()
        self.env: dict[Any, Any] = dict(zip(X.block_args(fn), args, strict=True))
        self.args = args
        self.next_smem = 0
        self.next_col = 0
        self.tma_index = 0

    # ---------------------------------------------------------------- helpers
    def _alloc(self, nbytes: int, align: int) -> int:
        addr = -(-self.next_smem // align) * align
        self.next_smem = addr + max(nbytes, 16)
        return addr

    def run(self) -> None:
        self._block(self.fn.body.blocks[0])

    def _block(self, block: Any) -> None:
        for op in block.ops:
            handler = getattr(self, "_" + op.name.replace(".", "_"), None)
            if handler is None:
                raise NotImplementedError(f"the CPU model does not run '{op.name}'")
            handler(op)

    def _val(self, v: Any) -> Any:
        return self.env[v]

    # ---------------------------------------------------------------- builtin
    def _func_return(self, op: Any) -> None:
        pass

    def _arith_constant(self, op: Any) -> None:
        self.env[op.results[0]] = int(X.attr_value(op.value))

    def _arith_muli(self, op: Any) -> None:
        a, b = (self._val(x) for x in op.operands)
        self.env[op.results[0]] = a * b

    def _arith_addi(self, op: Any) -> None:
        a, b = (self._val(x) for x in op.operands)
        self.env[op.results[0]] = a + b

    def _arith_andi(self, op: Any) -> None:
        a, b = (self._val(x) for x in op.operands)
        self.env[op.results[0]] = a & b

    def _scf_for(self, op: Any) -> None:
        lb, ub, step = (self._val(x) for x in op.operands[:3])
        body = op.body.blocks[0]
        for i in range(lb, ub, step):
            self.env[body.args[0]] = i
            self._block(body)

    def _scf_yield(self, op: Any) -> None:
        pass

    # ---------------------------------------------------------------- cute
    def _cute_static(self, op: Any) -> None:
        pass

    def _cute_make_coord(self, op: Any) -> None:
        self.env[op.results[0]] = [self._val(x) for x in op.operands]

    def _cute_alloc_smem(self, op: Any) -> None:
        m = TY.memref_of(op.results[0].type)
        lay = m.layout
        n = cosize(lay.outer if isinstance(lay, ComposedLayout) else lay)
        align = 1024 if isinstance(lay, ComposedLayout) else 128
        self.env[op.results[0]] = self._alloc(n * m.element.pack_bits // 8, align)

    def _cute_alloc_tmem(self, op: Any) -> None:
        m = TY.memref_of(op.results[0].type)
        cols = int(size(m.layout[1]))
        self.env[op.results[0]] = self.next_col  # lane 0, column offset
        self.next_col += max(32, 1 << (cols - 1).bit_length())

    def _cute_alloc_rmem(self, op: Any) -> None:
        self.env[op.results[0]] = None  # written by the copy that fills it

    def _cute_make_view(self, op: Any) -> None:
        self.env[op.results[0]] = self._val(op.operands[0])

    # ---------------------------------------------------------------- TMA, barriers
    def _nv_tileas_make_tiled_tma_desc(self, op: Any) -> None:
        param = self.info.tma[self.tma_index]
        self.tma_index += 1
        self.env[op.results[0]] = param

    def _cute_nvgpu_atom_non_exec_tiled_tma_load(self, op: Any) -> None:
        self.env[op.results[0]] = self._val(op.operands[0])

    def _cute_nvgpu_arch_mbarrier_init(self, op: Any) -> None:
        self._alloc(8, 8)
        self.env[op.results[0]] = _Barrier(int(X.attr_value(op.attributes["count"])))

    def _cute_nvgpu_atom_make_exec_tma(self, op: Any) -> None:
        ex = self.ctx.facts[op]  # the bytes the lowering's expect_tx announces
        nbytes = ex.atom.partition.tile_element_count * ex.atom.element_bits // 8
        self.env[op.results[0]] = (self._val(op.operands[0]), self._val(op.operands[1]),
                                   nbytes)

    def _cute_nvgpu_atom_tma_load(self, op: Any) -> None:
        param, bar, expect = self._val(op.operands[0])
        dst = self._val(op.operands[1])
        c0, c1 = self._val(op.operands[2])
        if param.swizzle_bytes != 128 or len(param.box) != 2:
            raise NotImplementedError("the CPU model runs 2-D TMA loads with the 128-byte "
                                      "swizzle")
        tensor: np.ndarray = self.args[param.tensor_arg]  # rows x inner, row-major codes
        b0, b1 = param.box
        box = np.ascontiguousarray(tensor[c1:c1 + b1, c0:c0 + b0]).view(np.uint8)
        row = box.shape[1]
        if row != 128:
            raise NotImplementedError("the CPU model's SWIZZLE_128B boxes have 128-byte rows")
        for r in range(b1):  # CU_TENSOR_MAP_SWIZZLE_128B: chunk c of row r at c ^ (r % 8)
            for c in range(8):
                at = dst + 128 * r + 16 * (c ^ (r % 8))
                self.smem.data[at:at + 16] = box[r, 16 * c:16 * c + 16]
        bar.arrive(expect_tx=expect)  # thread 0's mbarrier.arrive.expect_tx
        bar.complete_tx(box.size)  # the bytes land

    def _cute_nvgpu_arch_mbarrier_wait(self, op: Any) -> None:
        self._val(op.operands[0]).wait(self._val(op.operands[1]))

    def _cute_nvgpu_arch_umma_commit(self, op: Any) -> None:
        self._val(op.operands[0]).arrive()  # tcgen05.commit ... mbarrier::arrive::one

    # ---------------------------------------------------------------- atoms
    def _cute_nvgpu_make_atom(self, op: Any) -> None:
        self.env[op.results[0]] = TY.atom_of(op.results[0].type)

    def _cute_nvgpu_make_smem_desc(self, op: Any) -> None:
        self.env[op.results[0]] = (self._val(op.operands[0]),
                                   TY.smem_desc(op.results[0].type.text))

    def descriptor_words(self, atom: Any, operand: str, view: tuple[int, Any],
                         k_blocks: int) -> list[int]:
        """The words the lowering emits for a view (relative start) plus address >> 4."""
        addr, desc = view
        words = k_block_descriptors(desc.layout, atom.element_bits(operand), desc.major,
                                    k_blocks, block_k=atom.stored_k(operand))
        return [w.encode() + (addr >> 4) for w in words]

    def _cute_nvgpu_atom_mma(self, op: Any) -> None:
        atom = self._val(op.operands[0])
        if atom.sparse or atom.cta_group != 1:
            raise NotImplementedError(f"the CPU model runs dense cta_group::1 UMMA, not "
                                      f"'{atom.name}'")
        _, d, a, b, _c, *extra = (self._val(x) for x in op.operands)
        k_blocks = self.ctx.facts[op]
        bw = self.descriptor_words(atom, "B", b, k_blocks)
        if atom.a_source == "ss":
            aw: list[Any] = self.descriptor_words(atom, "A", a, k_blocks)
        else:  # A in TMEM: each K-block's columns after the last (as the lowering steps)
            from nvatom.ir.tcgen05 import operand_extent

            step = operand_extent(atom, "A")[2]
            aw = [("tmem", a + j * step) for j in range(k_blocks)]
        sf: dict[str, Any] = {}
        if atom.block_scaled:
            from nvatom.ir.tcgen05 import operand_extent

            for j_name, base in zip(("SFA", "SFB"), extra, strict=True):
                sf[j_name] = [base + j * operand_extent(atom, j_name)[2]
                              for j in range(k_blocks)]
        idesc = atom.idesc().encode()
        form = atom.issued_form(self.low.target)
        for j in range(k_blocks):
            first = j == 0 and op.attributes.get("accumulate") is not None and \
                X.attr_value(op.attributes["accumulate"]) is False
            kw: dict[str, Any] = {}
            if atom.block_scaled:
                kw = dict(sfa=sf["SFA"][j], sfb=sf["SFB"][j], scale_vec=form.scale_vec)
            R.mma(self.tmem, self.smem, kind=atom.kind, d_taddr=d, a=aw[j], b_desc=bw[j],
                  idesc=idesc, enable_input_d=not first, ws=atom.ws, **kw)

    def _cute_nvgpu_atom_copy(self, op: Any) -> None:
        atom = self._val(op.operands[0])
        src, dst = op.operands[1:]
        if atom.mnemonic == "atom.tmem_load":  # each warp's tcgen05.ld at its lane quarter
            taddr = self._val(src)
            regs = np.concatenate([R.tmem_load(self.tmem, atom, taddr + ((32 * w) << 16))
                                   for w in range(4)])
            self.env[dst] = np.ascontiguousarray(regs).view(np.uint8)
            return
        if atom.mnemonic == "atom.tmem_store":
            taddr, regs = self._val(dst), self._val(src).view(np.uint32)
            for w in range(4):
                R.tmem_store(self.tmem, atom, taddr + ((32 * w) << 16), regs[32 * w:32 * w + 32])
            return
        if atom.mnemonic == "atom.s2t_copy":
            if atom.shape != "32x128b.warpx4" or atom.cta_group != 1:
                raise NotImplementedError(f"the CPU model runs tcgen05.cp 32x128b.warpx4, not "
                                          f"'{atom.name}'")
            word = self.ctx.facts[op].encode() + (self._val(src) >> 4)  # as the lowering
            R.tmem_copy_32x128b_warpx4(self.tmem, self.smem, self._val(dst), word)
            return
        if atom.mnemonic == "atom.universal_copy":
            self._universal_copy(src, dst)
            return
        raise NotImplementedError(f"the CPU model does not run '{atom.name}'")

    def _universal_copy(self, src: Any, dst: Any) -> None:
        """Thread t's value j moves from src (t, j) to dst (t, j), raw bytes: a memory side
        at its (thread, value) layout's element offset (rank 1: the same for every thread),
        a register side at its value index."""
        ms, md = TY.memref_of(src.type), TY.memref_of(dst.type)
        eb = ms.element.pack_bits // 8
        threads = max(int(size(m.layout[0])) if m.layout.rank == 2 else 1 for m in (ms, md))
        values = int(size(ms.layout[1] if ms.layout.rank == 2 else ms.layout))
        if md.space == "rmem":
            self.env[dst] = np.zeros((threads, values * eb), np.uint8)
        for t in range(threads):
            for j in range(values):
                self._put(md, dst, t, j, eb, self._get(ms, src, t, j, eb))

    def _offset(self, m: Any, t: int, j: int) -> int:
        lay = m.layout
        if lay.rank != 2:
            return int(lay(j))
        return int(lay((t % int(size(lay[0])), j)))

    def _get(self, m: Any, v: Any, t: int, j: int, eb: int) -> np.ndarray:
        if m.space == "rmem":
            return self._val(v)[t, j * eb:(j + 1) * eb]
        off = self._offset(m, t, j) * eb
        if m.space == "smem":
            return self.smem.data[self._val(v) + off:self._val(v) + off + eb]
        return self._val(v).view(np.uint8).reshape(-1)[off:off + eb]

    def _put(self, m: Any, v: Any, t: int, j: int, eb: int, raw: np.ndarray) -> None:
        if m.space == "rmem":
            self._val(v)[t, j * eb:(j + 1) * eb] = raw
            return
        off = self._offset(m, t, j) * eb
        if m.space == "smem":
            self.smem.data[self._val(v) + off:self._val(v) + off + eb] = raw
            return
        self._val(v).view(np.uint8).reshape(-1)[off:off + eb] = raw

    def _cute_nvgpu_arch_sync_threads(self, op: Any) -> None:
        pass


def compile_module(text: str, name: str = "module.mlir") -> tuple[Any, Any, Lowered]:
    mod = driver.parse(text, name)
    ctx = driver.verify(mod)
    return mod, ctx, lower(mod, ctx)


def run_cta(mod: Any, ctx: Any, low: Lowered, args: list[Any]) -> Cta:
    """Run the module's (first) kernel for one CTA with ``args`` (numpy arrays for pointers:
    TMA sources row-major codes, destinations views that receive the stores; ints)."""
    fn = next(op for op in mod.walk() if isinstance(op, X.FuncOp))
    cta = Cta(mod, ctx, low, fn, args)
    cta.run()
    return cta
