"""Warpgroup and cluster synchronisation, register-budget and pack-convert instructions.

The instructions a warp-specialised kernel needs around its MMA and copy atoms (PTX ISA 8.x,
sections "Parallel Synchronization and Communication Instructions: bar/barrier",
"barrier.cluster", "mbarrier.arrive", "Data Movement: mapa", "Miscellaneous: setmaxnreg",
"Data Conversion: cvt"):

* ``setmaxnreg.{inc,dec}.sync.aligned.u32 N``: a warpgroup raises or lowers its per-thread
  register cap (N a multiple of 8 in 24..256; arch-specific targets only: sm_90a, sm_100a...);
* ``bar.sync id, count``: a named barrier among ``count`` threads (a multiple of the warp
  size), e.g. the 128 threads of one warpgroup;
* ``mapa.shared::cluster.u32 d, a, rank``: the shared::cluster address of the same variable
  in CTA ``rank`` of the cluster (sm_90+);
* (arriving on an mbarrier of another CTA of the cluster is
  :func:`nvatom.ptx.tma_emit.mbarrier_arrive_remote`, release at CTA scope by default);
* ``barrier.cluster.arrive[.release|.relaxed][.aligned]`` and
  ``barrier.cluster.wait[.acquire][.aligned]``: the cluster-wide barrier, split (sm_90+);
* ``cvt.rn.{bf16x2,f16x2}.f32 d, hi, lo``: two f32 rounded into one packed 32-bit register,
  ``lo`` in bits 0-15 (sm_80+).

Spellings live in :data:`SYNC_INSTRS` (one row per instruction: template, slot values, the
``nvatom.arch`` feature or minimum compute capability that gates it); the functions below
only check operands and fill the template.  Each takes ``target=``: given, a target that lacks
the instruction is refused with :class:`SyncEmitError` naming the target (ptxas agrees:
tests/ptx/test_sync_emit.py assembles every form on every target family).
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Iterator, Mapping

from nvatom.arch import Target
from nvatom.arch import target as _target
from nvatom.errors import NvatomError, lookup
from nvatom.ptx.builder import Kernel, Reg

__all__ = [
    "SYNC_INSTRS",
    "SyncEmitError",
    "SyncInstr",
    "barrier_cluster_arrive",
    "barrier_cluster_wait",
    "check_target",
    "cvt_pack_f32",
    "mapa_shared_cluster",
    "named_barrier_arrive",
    "named_barrier_sync",
    "setmaxnreg",
    "spell",
    "spellings",
]

Operand = Reg | str | int


class SyncEmitError(NvatomError, ValueError):
    """A synchronisation instruction with bad operands, or one the target lacks."""


@dataclasses.dataclass(frozen=True)
class SyncInstr:
    """One instruction: ``template`` with ``{slot}`` fields, the values each slot takes, and
    what a target needs to have it (an ``nvatom.arch`` feature, else a compute capability)."""

    template: str
    slots: Mapping[str, tuple[str, ...]]
    feature: str | None
    min_cc: int
    operands: tuple[str, ...]  # operand roles, for documentation and the test sweep
    doc: str

    def available_on(self, t: Target | str) -> bool:
        tt = _target(t)
        if self.feature is not None:
            return tt.supports(self.feature)
        return tt.cc >= self.min_cc

    def need(self) -> str:
        if self.feature is not None:
            return f"feature '{self.feature}'"
        return f"sm_{self.min_cc} or newer"


#: The instruction table.  Slot values include the empty string where a qualifier is optional.
SYNC_INSTRS: dict[str, SyncInstr] = {
    "setmaxnreg": SyncInstr(
        "setmaxnreg.{op}.sync.aligned.u32", {"op": ("inc", "dec")}, "setmaxnreg", 90,
        ("imm_regs",), "raise (inc) or lower (dec) the warpgroup's per-thread register cap"),
    "bar.sync": SyncInstr(
        "bar.sync", {}, None, 70, ("id", "count"),
        "named barrier: wait until `count` threads arrived at barrier `id`"),
    "bar.arrive": SyncInstr(
        "bar.arrive", {}, None, 70, ("id", "count"),
        "named barrier: arrive at barrier `id` (of `count` threads) without waiting"),
    "mapa": SyncInstr(
        "mapa.shared::cluster.u32", {}, "cluster", 90, ("d", "addr", "rank"),
        "shared::cluster address of the variable at `addr` in CTA `rank` of the cluster"),
    "barrier.cluster.arrive": SyncInstr(
        "barrier.cluster.arrive{sem}{aligned}",
        {"sem": ("", ".release", ".relaxed"), "aligned": ("", ".aligned")}, "cluster", 90, (),
        "arrive at the cluster barrier"),
    "barrier.cluster.wait": SyncInstr(
        "barrier.cluster.wait{sem}{aligned}",
        {"sem": ("", ".acquire"), "aligned": ("", ".aligned")}, "cluster", 90, (),
        "wait for every thread of the cluster to arrive"),
    "cvt.pack": SyncInstr(
        "cvt.rn.{type}x2.f32", {"type": ("bf16", "f16")}, None, 80, ("d", "hi", "lo"),
        "two f32 rounded to nearest into one packed register (lo in bits 0-15)"),
}


def spell(name: str, **slots: str) -> str:
    """The opcode of row ``name`` with its slots filled (each checked against the table)."""
    row = lookup(SYNC_INSTRS, name, lambda: SyncEmitError(
        f"no synchronisation instruction '{name}' (known: {', '.join(SYNC_INSTRS)})"))
    if set(slots) != set(row.slots):
        raise SyncEmitError(f"{name} takes slots {sorted(row.slots)}, got {sorted(slots)}")
    for s, v in slots.items():
        if v not in row.slots[s]:
            raise SyncEmitError(f"{name}: {s} {v!r} is not one of "
                                f"{', '.join(repr(x) for x in row.slots[s])}")
    return row.template.format(**slots)


def spellings(name: str) -> Iterator[str]:
    """Every opcode row ``name`` can produce."""
    row = SYNC_INSTRS[name]
    keys = list(row.slots)
    for values in itertools.product(*(row.slots[s] for s in keys)):
        yield spell(name, **dict(zip(keys, values, strict=True)))


def check_target(name: str, tgt: Target | str | None, k: Kernel | None = None) -> None:
    """Refuse row ``name`` on a target that lacks it (no check when ``tgt`` is None); with
    ``k``, record the row's feature on the kernel (its module's ``.version`` follows)."""
    row_ = SYNC_INSTRS[name]
    if k is not None and row_.feature is not None:
        k.need_feature(row_.feature, row_.template.split("{")[0].rstrip("."), SyncEmitError)
    if tgt is None:
        return
    t = _target(tgt)
    row = SYNC_INSTRS[name]
    if not row.available_on(t):
        raise SyncEmitError(f"{row.template.split('{')[0].rstrip('.')} is not available on "
                            f"{t.name} (needs {row.need()})")


def _int_in(what: str, v: object, lo: int, hi: int, multiple: int = 1) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi or v % multiple:
        extra = f" and a multiple of {multiple}" if multiple > 1 else ""
        raise SyncEmitError(f"{what} {v!r} must be an int in {lo}..{hi}{extra}")
    return v


def _operand(what: str, v: object) -> Operand:
    if isinstance(v, bool) or not isinstance(v, (Reg, str, int)):
        raise SyncEmitError(f"{what} must be a register, a PTX operand string or an int, "
                            f"got {v!r}")
    return v


#: ``setmaxnreg``'s register count: (least, most, step) (PTX ISA "setmaxnreg")
SETMAXNREG_RANGE = (24, 256, 8)
#: named barriers (``bar.sync``/``bar.arrive``): ids 0..15; thread counts (least, most, step)
NAMED_BARRIERS = 16
BARRIER_THREADS = (32, 1024, 32)


def setmaxnreg(k: Kernel, op: str, nregs: int, *, target: Target | str | None = None) -> None:
    """``setmaxnreg.{op}.sync.aligned.u32 nregs``: all threads of the warpgroup, same value."""
    opcode = spell("setmaxnreg", op=op)
    check_target("setmaxnreg", target, k)
    _int_in("setmaxnreg register count", nregs, *SETMAXNREG_RANGE)
    k.ins(opcode, nregs)


def named_barrier_sync(k: Kernel, bar_id: int | Reg | str, count: int, *,
                       target: Target | str | None = None) -> None:
    """``bar.sync bar_id, count``: barrier ``bar_id`` (0..15) among ``count`` threads (a
    multiple of 32, at most 1024)."""
    _named_barrier(k, "bar.sync", bar_id, count, target)


def named_barrier_arrive(k: Kernel, bar_id: int | Reg | str, count: int, *,
                         target: Target | str | None = None) -> None:
    """``bar.arrive bar_id, count``: arrive at named barrier ``bar_id`` without waiting (the
    producer side of a producer/consumer hand-off; ``count`` as for ``bar.sync``)."""
    _named_barrier(k, "bar.arrive", bar_id, count, target)


def _named_barrier(k: Kernel, op: str, bar_id: int | Reg | str, count: int,
                   target: Target | str | None) -> None:
    """``<op> bar_id, count`` (``bar.sync`` / ``bar.arrive``) with its checks: the row on the
    target, barrier id 0..15 (or a register), thread count a multiple of 32 up to 1024."""
    check_target(op, target, k)
    if isinstance(bar_id, (Reg, str)):
        _operand(f"{op} barrier id", bar_id)
    else:
        _int_in(f"{op} barrier id", bar_id, 0, NAMED_BARRIERS - 1)
    _int_in(f"{op} thread count", count, *BARRIER_THREADS)
    k.ins(spell(op), bar_id, count)


def mapa_shared_cluster(k: Kernel, addr: Operand, rank: Operand, *,
                        target: Target | str | None = None) -> Reg:
    """``mapa.shared::cluster.u32 d, addr, rank``: the address of ``addr``'s variable in CTA
    ``rank`` of the cluster (a new u32 register)."""
    check_target("mapa", target, k)
    _operand("mapa address", addr)
    if isinstance(rank, int) and not isinstance(rank, bool) and rank < 0:
        raise SyncEmitError(f"mapa CTA rank {rank} is negative")
    _operand("mapa CTA rank", rank)
    r = k.reg("u32")
    k.ins(spell("mapa"), r, addr, rank)
    return r


def barrier_cluster_arrive(k: Kernel, *, sem: str = "release", aligned: bool = True,
                           target: Target | str | None = None) -> None:
    """``barrier.cluster.arrive[.release|.relaxed][.aligned]`` (``sem=""``: the default,
    release)."""
    opcode = spell("barrier.cluster.arrive", sem=f".{sem}" if sem else "",
                   aligned=".aligned" if aligned else "")
    check_target("barrier.cluster.arrive", target, k)
    k.ins(opcode)


def barrier_cluster_wait(k: Kernel, *, sem: str = "acquire", aligned: bool = True,
                         target: Target | str | None = None) -> None:
    """``barrier.cluster.wait[.acquire][.aligned]``."""
    opcode = spell("barrier.cluster.wait", sem=f".{sem}" if sem else "",
                   aligned=".aligned" if aligned else "")
    check_target("barrier.cluster.wait", target, k)
    k.ins(opcode)


def cvt_pack_f32(k: Kernel, dtype: str, hi: Operand, lo: Operand, *,
                 target: Target | str | None = None, into: Reg | None = None) -> Reg:
    """``cvt.rn.<dtype>x2.f32 d, hi, lo``: a b32 register (a new one, or ``into``) holding
    ``lo`` rounded to ``dtype`` in bits 0-15 and ``hi`` in bits 16-31."""
    opcode = spell("cvt.pack", type=dtype)
    check_target("cvt.pack", target, k)
    _operand("cvt hi", hi)
    _operand("cvt lo", lo)
    if into is not None and into.type not in ("b32", "u32", "s32"):
        raise SyncEmitError(f"cvt into {into.name} of type .{into.type}: needs a 32-bit "
                            "register")
    r = k.reg("b32") if into is None else into
    k.ins(opcode, r, hi, lo)
    return r
