"""Operations for warp-specialised kernels: thread/block indices, ``setmaxnreg``, arrays of
mbarriers and arrivals (``expect_tx``, counts, a peer CTA's barrier), named barriers, the
async-proxy fence, bulk-group commit/wait, shared-memory views at a run-time index, and the
register-fragment slice/convert an epilogue needs.

They are what an SM90 GEMM written in the IR (tests/ir/gemm_sm90.mlir) needs beyond the
atoms: a producer warpgroup and consumer warpgroups branch on the warpgroup index
(``scf.if``), walk a ring of pipeline stages whose index and mbarrier phase are computed from
the loop counters, and the consumers store their tiles through swizzled shared memory
(``stmatrix``) and TMA.  Lowered by :mod:`nvatom.ir.lower_sync`.

Source: PTX ISA "Special Registers" (%tid, %ctaid, %nctaid), "setmaxnreg", "mbarrier"
(init, arrive, expect_tx, shared::cluster), "bar.sync", "membar/fence" (fence.proxy.async),
"cp.async.bulk.commit_group / wait_group", "cvt" (.bf16x2/.f16x2 from two f32).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from nvatom.atoms import mbarrier as M
from nvatom.ir import types as TY
from nvatom.ir import xdsl_adapter as X
from nvatom.ir.dialect import (
    FragmentOp,
    NvOp,
    VerifyCtx,
    _defining,
    _fail,
    _values_per_thread,
    check_arrival_count,
)
from nvatom.ir.syntax import IRSyntaxError
from nvatom.layout import ComposedLayout, Layout, Swizzle
from nvatom.ptx import sync_emit as SE

__all__ = ["SYNC_CUTE_OPS", "SYNC_NVGPU_OPS"]  # registered by nvatom.ir.ops

DIMS = ("x", "y", "z")


def _i32() -> Any:
    return X.IntegerType(32)


# =========================================================================== indices
class _IndexOp(NvOp):
    """``%r = cute_nvgpu.arch.<index> {dim = "x"}``: a special register, an i32."""

    RESULT = "infer"
    ATTRS: ClassVar[dict[str, Any]] = {"dim": "str"}
    SREG: ClassVar[str] = ""

    @classmethod
    def infer(cls, operands: Sequence[Any], attrs: dict[str, Any]) -> Any:
        return _i32()

    def verify_ir(self, v: VerifyCtx) -> None:
        if self.attr("dim", "x") not in DIMS:
            _fail(f"dim must be x, y or z, got '{self.attr('dim')}'")

    @property
    def sreg(self) -> str:
        return f"%{self.SREG}.{self.attr('dim', 'x')}"


class ThreadIdxOp(_IndexOp):
    """``%t = cute_nvgpu.arch.thread_idx``: ``%tid.x`` (``{dim = "y"}``: ``%tid.y``)."""

    name = "cute_nvgpu.arch.thread_idx"
    SREG = "tid"


class BlockIdxOp(_IndexOp):
    """``%b = cute_nvgpu.arch.block_idx``: the CTA's index in the grid (``%ctaid``)."""

    name = "cute_nvgpu.arch.block_idx"
    SREG = "ctaid"


class GridDimOp(_IndexOp):
    """``%n = cute_nvgpu.arch.grid_dim``: the grid's CTAs along a dimension (``%nctaid``)."""

    name = "cute_nvgpu.arch.grid_dim"
    SREG = "nctaid"


class WarpgroupIdxOp(NvOp):
    """``%w = cute_nvgpu.arch.warpgroup_idx``: ``%tid.x / 128``, uniform in a warpgroup (the
    condition a warp-specialised kernel branches on)."""

    name = "cute_nvgpu.arch.warpgroup_idx"
    RESULT = "infer"

    @classmethod
    def infer(cls, operands: Sequence[Any], attrs: dict[str, Any]) -> Any:
        return _i32()


# =========================================================================== registers
class SetMaxNRegOp(NvOp):
    """``cute_nvgpu.arch.setmaxnreg {action = "inc", regs = 232}``: the warpgroup's register
    budget (``setmaxnreg.{inc,dec}.sync.aligned.u32``; 24..256, a multiple of 8; sm_90a).
    Every thread of the warpgroup must execute it (branch on ``warpgroup_idx``)."""

    name = "cute_nvgpu.arch.setmaxnreg"
    ATTRS: ClassVar[dict[str, Any]] = {"action": "str", "regs": "int"}
    REQUIRED = ("action", "regs")

    def verify_ir(self, v: VerifyCtx) -> None:
        if not v.target.supports("setmaxnreg"):
            _fail(f"setmaxnreg is not available on {v.target.name} (sm_90a, sm_100a, ...)")
        if self.attr("action") not in ("inc", "dec"):
            _fail(f"setmaxnreg action must be 'inc' or 'dec', got '{self.attr('action')}'")
        n = self.attr("regs")
        lo, hi, step = SE.SETMAXNREG_RANGE
        if not lo <= n <= hi or n % step:
            _fail(f"setmaxnreg takes {lo}..{hi} registers in steps of {step}, got {n}")


# =========================================================================== mbarriers
class MbarrierInitArrayOp(NvOp):
    """``%bars = cute_nvgpu.arch.mbarrier_init_array {count = 2, size = 4}``: ``size``
    mbarriers of arrival count ``count`` (thread 0 initialises them, ``fence.mbarrier_init``,
    then a CTA barrier: it must run before the kernel branches).  The value is barrier 0;
    ``mbarrier_at`` picks one by a run-time index."""

    name = "cute_nvgpu.arch.mbarrier_init_array"
    RESULT = "infer"
    ATTRS: ClassVar[dict[str, Any]] = {"count": "int", "size": "int"}
    REQUIRED = ("count", "size")

    @classmethod
    def infer(cls, operands: Sequence[Any], attrs: dict[str, Any]) -> Any:
        return TY.make(TY.MbarrierT)

    def verify_ir(self, v: VerifyCtx) -> None:
        check_arrival_count(self.attr("count"))
        if not 1 <= self.attr("size") <= 1024:
            _fail(f"an mbarrier array holds 1..1024 barriers, got {self.attr('size')}")


class MbarrierAtOp(NvOp):
    """``%b = cute_nvgpu.arch.mbarrier_at %bars, %i``: barrier ``%i`` of an
    ``mbarrier_init_array`` (``%i`` < size is the program's to keep: not checked at run
    time)."""

    name = "cute_nvgpu.arch.mbarrier_at"
    OPERANDS = 2
    RESULT = "infer"

    @classmethod
    def infer(cls, operands: Sequence[Any], attrs: dict[str, Any]) -> Any:
        return TY.make(TY.MbarrierT)

    def verify_ir(self, v: VerifyCtx) -> None:
        bars, i = self.operands
        if not isinstance(_defining(bars), MbarrierInitArrayOp):
            _fail("expects the barriers of a cute_nvgpu.arch.mbarrier_init_array as operand #0")
        if not X.is_integer_like(i.type):
            _fail(f"expects an integer index, but got {TY.type_text(i.type)}")


class MbarrierArriveOp(NvOp):
    """``cute_nvgpu.arch.mbarrier_arrive %bar[, %cta] {count = 1, expect_tx = 49152}``:
    arrive on ``%bar`` (``mbarrier.arrive``, release at CTA scope).  ``count`` arrives that
    many times at once; ``expect_tx = N`` also raises the phase's transaction count by ``N``
    bytes (``mbarrier.arrive.expect_tx``: the bytes of the TMA loads issued with
    ``expect_tx = false`` that complete on it).  With ``%cta`` (an i32 rank in the cluster)
    the thread arrives on that CTA's copy of the barrier (``mapa`` +
    ``mbarrier.arrive.shared::cluster``)."""

    name = "cute_nvgpu.arch.mbarrier_arrive"
    OPERANDS = (1, 2)
    ATTRS: ClassVar[dict[str, Any]] = {"count": "int", "expect_tx": "int"}

    def verify_ir(self, v: VerifyCtx) -> None:
        bar, *cta = self.operands
        if not isinstance(bar.type, TY.MbarrierT):
            _fail(f"expects a !cute_nvgpu.mbarrier, but got {TY.type_text(bar.type)}")
        count, tx = self.attr("count"), self.attr("expect_tx")
        if count is not None and not 1 <= count <= M.MAX_ARRIVAL_COUNT:
            _fail(f"an arrive count is 1..{M.MAX_ARRIVAL_COUNT}, got {count}")
        if tx is not None:
            if not v.target.supports("mbarrier.tx"):
                _fail(f"expect_tx needs mbarrier transaction counts (sm_90+), not "
                      f"{v.target.name}")
            if not 0 <= tx <= M.MAX_TX_COUNT:
                _fail(f"expect_tx is 0..{M.MAX_TX_COUNT} bytes, got {tx}")
            if count is not None:
                _fail("mbarrier.arrive.expect_tx arrives once: drop count or expect_tx")
        if cta:
            if not X.is_integer_like(cta[0].type):
                _fail(f"expects an integer CTA rank, but got {TY.type_text(cta[0].type)}")
            if not v.target.supports("cluster"):
                _fail(f"a remote arrive needs thread-block clusters (sm_90+), not "
                      f"{v.target.name}")
            if count is not None or tx is not None:
                _fail("a remote arrive (mbarrier.arrive.shared::cluster) takes neither count "
                      "nor expect_tx")


# =========================================================================== barriers, fences
class BarrierSyncOp(NvOp):
    """``cute_nvgpu.arch.barrier_sync [%id] {id = 1, threads = 128}``: named barrier ``id``
    (0..15; an i32 operand instead of the attribute) among ``threads`` threads (a multiple
    of 32) (``bar.sync id, threads``): one warpgroup synchronises without the others."""

    name = "cute_nvgpu.arch.barrier_sync"
    OPERANDS = (0, 1)
    ATTRS: ClassVar[dict[str, Any]] = {"id": "int", "threads": "int"}
    REQUIRED = ("threads",)

    def verify_ir(self, v: VerifyCtx) -> None:
        n = self.attr("threads")
        lo, hi, step = SE.BARRIER_THREADS
        if not lo <= n <= hi or n % step:
            _fail(f"bar.sync counts {lo}..{hi} threads in whole warps, got {n}")
        has_id = self.attr("id") is not None
        if has_id == bool(self.operands):
            _fail("give the barrier id as the attribute 'id' or as one i32 operand")
        if has_id and not 0 <= self.attr("id") < SE.NAMED_BARRIERS:
            _fail(f"a named barrier id is 0..{SE.NAMED_BARRIERS - 1}, got {self.attr('id')}")
        if self.operands and not X.is_integer_like(self.operands[0].type):
            _fail(f"expects an integer barrier id, but got "
                  f"{TY.type_text(self.operands[0].type)}")


class FenceProxyAsyncOp(NvOp):
    """``cute_nvgpu.arch.fence_proxy_async``: order this thread's shared-memory writes before
    later async-proxy reads of them (``fence.proxy.async.shared::cta``: st/stmatrix before a
    TMA store of the tile)."""

    name = "cute_nvgpu.arch.fence_proxy_async"

    def verify_ir(self, v: VerifyCtx) -> None:
        if not v.target.supports("tma"):
            _fail(f"fence.proxy.async needs sm_90+, not {v.target.name}")


class BulkCommitGroupOp(NvOp):
    """``cute_nvgpu.arch.bulk_commit_group``: close this thread's group of bulk (TMA store)
    copies (``cp.async.bulk.commit_group``)."""

    name = "cute_nvgpu.arch.bulk_commit_group"

    def verify_ir(self, v: VerifyCtx) -> None:
        if not v.target.supports("tma"):
            _fail(f"bulk async groups need sm_90+, not {v.target.name}")


class BulkWaitGroupOp(NvOp):
    """``cute_nvgpu.arch.bulk_wait_group {pending = 1, read = true}``: wait until at most
    ``pending`` of this thread's bulk groups are outstanding (``read``: only until they have
    read their shared-memory source; ``cp.async.bulk.wait_group[.read]``)."""

    name = "cute_nvgpu.arch.bulk_wait_group"
    ATTRS: ClassVar[dict[str, Any]] = {"pending": "int", "read": "bool"}
    REQUIRED = ("pending",)

    def verify_ir(self, v: VerifyCtx) -> None:
        if not v.target.supports("tma"):
            _fail(f"bulk async groups need sm_90+, not {v.target.name}")
        if not 0 <= self.attr("pending") <= 63:
            _fail(f"cp.async.bulk.wait_group takes 0..63, got {self.attr('pending')}")


# =========================================================================== memory views
def swizzle_span_bytes(layout: Any, element_bits: int) -> int:
    """Bytes after which a swizzled layout's pattern repeats (1 when not swizzled): the
    swizzle reads and writes offset bits below the highest bit of its masks only."""
    if isinstance(layout, ComposedLayout) and isinstance(layout.inner, Swizzle):
        sw = layout.inner
        return (1 << (sw.yyy_msk | sw.zzz_msk).bit_length()) * element_bits // 8
    return 1


class SmemViewOp(NvOp):
    """``%v = cute.smem_view %buf[, %i] {stride = 16384} : !cute.memref<e, smem, L>``: the
    shared memory at ``%buf``'s address + ``%i * stride`` bytes, seen as a tile of layout
    ``L`` (a pipeline stage of a ring buffer, a warpgroup's rows of a tile, a warp's slab
    of a staging tile).  Without ``%i`` it is ``%buf`` under another layout.  A swizzled
    ``L`` needs a stride that is a whole number of its swizzle patterns (and ``%buf`` a
    1024-byte aligned buffer), so the layout's swizzle and the hardware's address-based one
    agree.  ``%i`` stays inside the buffer: the program's to keep (not checked)."""

    name = "cute.smem_view"
    OPERANDS = (1, 2)
    RESULT = "explicit"
    ATTRS: ClassVar[dict[str, Any]] = {"stride": "int"}

    @classmethod
    def check_result_type(cls, t: Any) -> None:
        m = TY.memref_of(t)
        if m is None or m.space != "smem" or not isinstance(m.layout, (Layout, ComposedLayout)):
            raise IRSyntaxError(f"'cute.smem_view' makes a !cute.memref in smem with a static "
                                f"layout, not {TY.type_text(t)}")

    def verify_ir(self, v: VerifyCtx) -> None:
        src = TY.memref_of(self.operands[0].type)
        dst = TY.memref_of(self.results[0].type)
        assert dst is not None
        if src is None or src.space != "smem":
            _fail(f"expects a shared-memory buffer, but got {TY.type_text(self.operands[0].type)}")
        assert src is not None
        if src.element != dst.element:
            _fail(f"a view keeps the element type: {src.element.name} != {dst.element.name}")
        stride = self.attr("stride")
        if (stride is None) != (len(self.operands) == 1):
            _fail("an index operand needs the attribute 'stride' (bytes per index), and "
                  "'stride' an index")
        if stride is not None:
            span = swizzle_span_bytes(dst.layout, dst.element.pack_bits)
            if stride < 0 or stride % max(span, 16):
                _fail(f"the stride {stride} is not a multiple of "
                      f"{max(span, 16)} bytes (the swizzle pattern of {dst.layout}, at least "
                      "16)")
            if not X.is_integer_like(self.operands[1].type):
                _fail(f"expects an integer index, but got {TY.type_text(self.operands[1].type)}")


class FragmentSliceOp(FragmentOp):
    """``%s = cute.fragment_slice %frag {offset = 8} : !cute.memref<e, rmem, TV>``: the
    registers of values ``offset ..`` of a register fragment (no code), seen through the
    (thread, value) layout ``TV`` (as ``cute.retile``, the program states what they hold:
    e.g. the 8 accumulators of a WGMMA fragment that one ``stmatrix.x4`` stores)."""

    name = "cute.fragment_slice"
    ATTRS: ClassVar[dict[str, Any]] = {"offset": "int"}
    REQUIRED = ("offset",)

    def verify_ir(self, v: VerifyCtx) -> None:
        src, dst = self.fragments()
        if src.element != dst.element:
            _fail(f"a slice keeps the element type: {src.element.name} != {dst.element.name}")
        if src.element.pack_bits != 32:
            _fail(f"fragment_slice takes fragments of 32-bit elements (one per register), "
                  f"not {src.element.name}")
        off, n, total = (self.attr("offset"), _values_per_thread(dst.layout),
                         _values_per_thread(src.layout))
        if off < 0 or off + n > total:
            _fail(f"values {off}..{off + n - 1} are outside the fragment's {total} values "
                  "per thread")


CONVERTS = {("f32", "bf16"): "bf16", ("f32", "f16"): "f16"}


class FragmentConvertOp(FragmentOp):
    """``%h = cute.fragment_convert %frag : !cute.memref<bf16, rmem, TV>``: f32 values
    rounded to bf16 or f16 (round to nearest even), two per register, value ``2i`` in the
    low half (``cvt.rn.bf16x2.f32``); the same number of values per thread."""

    name = "cute.fragment_convert"

    def verify_ir(self, v: VerifyCtx) -> None:
        src, dst = self.fragments()
        pair = (src.element.name, dst.element.name)
        if pair not in CONVERTS:
            _fail(f"fragment_convert rounds f32 to bf16 or f16, not {pair[0]} to {pair[1]}")
        ns, nd = _values_per_thread(src.layout), _values_per_thread(dst.layout)
        if ns != nd or ns % 2:
            _fail(f"fragment_convert keeps the values (an even number): {ns} -> {nd}")


SYNC_CUTE_OPS = X.irdl_ops(SmemViewOp, FragmentSliceOp, FragmentConvertOp)
SYNC_NVGPU_OPS = X.irdl_ops(ThreadIdxOp, BlockIdxOp, GridDimOp, WarpgroupIdxOp, SetMaxNRegOp,
                            MbarrierInitArrayOp, MbarrierAtOp, MbarrierArriveOp, BarrierSyncOp,
                            FenceProxyAsyncOp, BulkCommitGroupOp, BulkWaitGroupOp)
