"""TMA operations beyond the specification's worked example (issue 16).

* ``cute_nvgpu.atom.tma_partition``: the specification's partition op (seed 001, "Partition
  Op and Mode Enums": the family "rooted at cute_nvgpu.atom.tma_partition routes every
  executable and non-exec TMA atom through one partition op").  One op for the three
  directions: the direction is the mode attribute it carries (``tma_load_mode``,
  ``tma_store_mode`` or a reduce ``kind``), and it runs the same eleven-step partition
  verifier as ``non_exec_tiled_tma_{load,store,reduce}``, whose result type it has::

      %a = cute_nvgpu.atom.tma_partition %desc, %tile, %cta_map
          {tma_load_mode = #cute_nvgpu.tma_load_mode<tiled>, num_multicast = 1}

* ``cute_nvgpu.prefetch_tma_tensor %atom, %coord[, offsets...] {l2_cache_hint = "..."}``:
  ``cp.async.bulk.prefetch.tensor`` of the box a TMA load atom (non-exec or executable) would
  load at ``%coord`` into L2, in the atom's mode (``.tile``, ``.im2col`` with its ``rank - 2``
  offsets, ``.im2col::w[::128]`` with wHalo/wOffset, ``.tile::gather4`` with five
  coordinates), next to ``prefetch_tma_desc`` (``prefetch.tensormap``).
* the ``dst_space`` attribute of ``cute_nvgpu.atom.tma_load``: ``"shared::cluster"`` (the
  default) or ``"shared::cta"``, the load into the issuing CTA's own shared memory without a
  cluster (checked by ``dialect.TmaLoadOp``, whose attribute it is; the table is
  ``ptx.tma_emit.LOAD_DESTINATIONS``).

Facts from ptxas 13.0 (tests/ir/test_ir_tma_forms.py assembles them): a ``.shared::cta``
destination needs PTX ISA 8.6 on every target (sm_90 included: "Feature 'cp.async.bulk.tensor
with destination state space as .shared::cta' requires PTX ISA .version 8.6 or later"), and
cannot multicast ("Illegal modifier '.multicast::cluster' for instruction
'cp.async.bulk.tensor' with '.shared::cta.global'"); ``cp.async.bulk.prefetch.tensor`` takes
``.tile``/``.im2col`` on sm_90 (PTX 8.0) and ``.tile::gather4``/``.im2col::w[::128]`` on the
sm_100a family (PTX 8.6: "Feature '.tile::gather4 with cp.async.bulk.prefetch.tensor' not
supported on .target 'sm_90a'").
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any, ClassVar

from nvatom.arch import feature
from nvatom.atoms import tma as T
from nvatom.ir import dialect as DL
from nvatom.ir import types as TY
from nvatom.ir import xdsl_adapter as X
from nvatom.ir.syntax import IRSyntaxError

__all__ = ["OPS", "PrefetchTmaTensorOp", "TmaPartitionOp", "derive_tma_flags"]

# mode attribute -> (direction, name -> enum member)
_MODE_ATTRS: dict[str, tuple[T.TmaKind, type, dict[str, Any]]] = {
    "tma_load_mode": (T.TmaKind.LOAD, TY.LoadModeAttrT, TY.LOAD_MODES),
    "tma_store_mode": (T.TmaKind.STORE, TY.StoreModeAttrT, TY.STORE_MODES),
    "kind": (T.TmaKind.REDUCE, TY.ReduceKindAttrT, TY.REDUCE_KINDS),
}


def _direction(attrs: dict[str, Any]) -> tuple[str, T.TmaKind]:
    given = [k for k in _MODE_ATTRS if k in attrs]
    if len(given) != 1:
        raise IRSyntaxError("'cute_nvgpu.atom.tma_partition' takes exactly one of "
                            "tma_load_mode, tma_store_mode or kind (a reduction), got "
                            f"{', '.join(given) or 'none'}")
    return given[0], _MODE_ATTRS[given[0]][0]


class TmaPartitionOp(DL._NonExecTmaOp):
    """``%atom = cute_nvgpu.atom.tma_partition %desc, %tile, %cta_map {<mode>, ...}``: the
    partition op of the specification's TMA chapter; its result is the non-exec atom of the
    mode's direction (``make_exec_tma`` binds it as any other)."""

    name = "cute_nvgpu.atom.tma_partition"
    ATTRS: ClassVar[dict[str, Any]] = {"tma_load_mode": TY.LoadModeAttrT,
                                       "tma_store_mode": TY.StoreModeAttrT,
                                       "kind": TY.ReduceKindAttrT, "num_multicast": "int"}

    @classmethod
    def infer(cls, operands: Sequence[Any], attrs: dict[str, Any]) -> Any:
        return TY.make(TY.NON_EXEC_TMA[_direction(attrs)[1]])

    @property
    def direction(self) -> T.TmaKind:
        return _direction(dict(self.attributes))[1]

    def _mode(self, desc_op: Any) -> Any:
        key, _ = _direction(dict(self.attributes))
        return _MODE_ATTRS[key][2][self.attributes[key].text]

    def transfer_kind(self) -> T.TmaKind:
        return self.direction

    def verify_ir(self, v: DL.VerifyCtx) -> None:
        kind = self.direction
        if kind is not T.TmaKind.LOAD and "num_multicast" in self.attributes:
            DL._fail(f"num_multicast applies to TMA loads, not a {kind.value}")
        super().verify_ir(v)


def _load_atom(op: DL.NvOp, v: DL.VerifyCtx) -> tuple[Any, T.TmaPartitionResult]:
    """The non-exec load op behind operand #0 (a non-exec or executable TMA load atom) and
    its partition result."""
    t = op.operands[0].type
    src = DL._defining(op.operands[0])
    if isinstance(src, DL.MakeExecTmaOp):
        src = DL._defining(src.operands[0])
    if not isinstance(src, DL._NonExecTmaOp) or type(t) not in (
            TY.NON_EXEC_TMA[T.TmaKind.LOAD], TY.EXEC_TMA[T.TmaKind.LOAD]):
        DL._fail(f"expects a TMA load atom (non-exec or executable) of this function as "
                 f"operand #0, but got {TY.type_text(t)}")
    r = v.facts.get(src)
    if r is None:
        DL._fail("the TMA load atom did not verify")
    return src, r


class PrefetchTmaTensorOp(DL.NvOp):
    """``cute_nvgpu.prefetch_tma_tensor %atom, %coord[, %o...] {l2_cache_hint = "..."}``:
    prefetch the box the load atom would load at ``%coord`` into L2
    (``cp.async.bulk.prefetch.tensor``; thread 0 issues it, nothing waits for it)."""

    name = "cute_nvgpu.prefetch_tma_tensor"
    OPERANDS = (2, 5)
    ATTRS: ClassVar[dict[str, Any]] = {"l2_cache_hint": "str"}

    def verify_ir(self, v: DL.VerifyCtx) -> None:
        _, r = _load_atom(self, v)
        instr = T.partition_instr(r)
        if not v.target.supports(instr.feature):
            f = feature(instr.feature)
            DL._fail(f"atom 'cp.async.bulk.prefetch.tensor{instr.mode}' is not available on "
                     f"{v.target.name}: it needs {f.description} ({f.rule})")
        coord, *offsets = self.operands[1:]
        want = instr.coords(r.rank)
        if not isinstance(coord.type, TY.CoordTypeT) or int(coord.type.text) != want:
            DL._fail(f"expects a !cute.coord<{want}> (a {instr.mode.lstrip('.')} box of "
                     f"rank {r.rank}), but got {TY.type_text(coord.type)}")
        n = instr.offsets(r.rank)
        if len(offsets) != n:
            DL._fail(f"a {instr.mode.lstrip('.')} prefetch of rank {r.rank} takes {n} im2col "
                     f"offset operand(s) after the coordinate, got {len(offsets)}")
        for i, o in enumerate(offsets):
            if not X.is_integer_like(o.type):
                DL._fail(f"im2col offset #{i} must be an integer, got {TY.type_text(o.type)}")
        hint = self.attr("l2_cache_hint")
        names = [m.value for m in T.CacheMode if m.value]
        if hint is not None and hint not in names:
            DL._fail(f"l2_cache_hint must be one of {', '.join(names)}, got '{hint}'")
        v.facts[self] = r


OPS = [TmaPartitionOp, PrefetchTmaTensorOp]


def _uses(value: Any) -> list[tuple[Any, int]]:
    """(operation, operand index) of each use of an SSA value."""
    return [(u.operation, u.index) for u in getattr(value, "uses", ())]


def derive_tma_flags(module: Any, v: DL.VerifyCtx) -> None:
    """Set the two flags-word bits (the specification's TMA chapter, "Flags Word") that the
    partition verifier cannot see from its operands, from the uses of each TMA load's
    shared-memory destination, once every operation has verified:

    * bit 12 ``s2t_descriptor``: the tile is the source of a ``tcgen05.cp``
      (``cute_nvgpu.atom.copy`` of an ``atom.s2t_copy``), i.e. read through the SMEM-to-TMEM
      descriptor;
    * bit 5 ``sparse``: that copy's TMEM buffer is the sparse-metadata operand (the last) of a
      sparse UMMA (``cute_nvgpu.atom.mma``).

    The partition result is replaced in the verification facts the lowering reads: the
    non-exec atom's, the executable atoms bound from it and the transfers that use them."""
    bits: dict[Any, T.TmaFlags] = {}
    for op in module.walk():
        if op.name != "cute_nvgpu.atom.tma_load":
            continue
        exec_op = DL._defining(op.operands[0])
        part_op = DL._defining(exec_op.operands[0]) if exec_op is not None else None
        if not isinstance(v.facts.get(part_op), T.TmaPartitionResult):
            continue
        b = bits.get(part_op, T.TmaFlags(0))
        for user, idx in _uses(op.operands[1]):
            if user.name != "cute_nvgpu.atom.copy" or idx != 1:
                continue
            atom = TY.atom_of(user.operands[0].type)
            if getattr(atom, "mnemonic", None) != "atom.s2t_copy":
                continue
            b |= T.TmaFlags.S2T_DESCRIPTOR
            for mma, j in _uses(user.operands[2]):
                umma = TY.atom_of(mma.operands[0].type) if mma.name == "cute_nvgpu.atom.mma" \
                    else None
                if getattr(umma, "sparse", False) and getattr(umma, "mnemonic", "").startswith(
                        "sm100.") and j == len(mma.operands) - 1:
                    b |= T.TmaFlags.SPARSE
        bits[part_op] = b
    for part_op, b in bits.items():
        r = v.facts[part_op]
        if not b or r.has(b):
            continue
        new = r.with_flags(b)
        v.facts[part_op] = new
        for exec_op, _ in _uses(part_op.results[0]):
            ex = v.facts.get(exec_op)
            if not isinstance(ex, T.ExecTmaAtom):
                continue
            v.facts[exec_op] = dataclasses.replace(
                ex, atom=dataclasses.replace(ex.atom, partition=new))
            for apply_op, _ in _uses(exec_op.results[0]):
                f = v.facts.get(apply_op)
                if isinstance(f, T.TmaPartitionResult):
                    v.facts[apply_op] = f.with_flags(b)
