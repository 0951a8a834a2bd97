"""FP8 promotion, the pieces every promoted main loop shares: a part's WGMMAs into a
temporary f32 fragment, the temporary -> accumulator map from the fragment formula, and the
``add.f32`` (or block-scaled ``fma.rn.f32``) of a retired temporary into the tile's
accumulators (PTX ISA "wgmma.mma_async", "wgmma.wait_group")."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

from nvatom.atoms.wgmma_fragments import WARPGROUP, accumulator_coord
from nvatom.kernels.sm90.config import GemmSm90Config, GemmSm90Error
from nvatom.kernels.sm90.emit import u32 as _u32
from nvatom.kernels.sm90.skeleton import _Build
from nvatom.ptx.builder import Kernel, Reg
from nvatom.ptx.wgmma_emit import WgmmaSequence


@functools.cache
def _promote_map(bn: int, pn: int, part: int) -> tuple[int, ...]:
    """For each element ``i`` of a part's temporary (``m64n<pn>``, the tile's columns
    ``part * pn ..``), the index of the tile accumulator (``m64n<bn>``) holding the same
    (row, column): from the accumulator fragment formula
    (:func:`nvatom.atoms.wgmma_fragments.accumulator_coord`), and the same for every thread
    of the warpgroup (else the promotion could not be one unrolled sequence)."""
    want: tuple[int, ...] | None = None
    for t in range(WARPGROUP):
        where = {accumulator_coord(bn, t, j): j for j in range(bn // 2)}
        got = tuple(where[(r, c + part * pn)]
                    for r, c in (accumulator_coord(pn, t, i) for i in range(pn // 2)))
        if want is None:
            want = got
        elif got != want:  # pragma: no cover - fragment formula guard
            raise GemmSm90Error(f"promotion map of thread {t} differs from thread 0's")
    assert want is not None
    return want


def _part_mmas(b: _Build, seq: WgmmaSequence, t: Sequence[Reg], a_desc0: Sequence[Reg],
               b_desc0: Sequence[Reg], stage: Reg, phase: Reg | None, part: int, first: Reg,
               p_true: Reg, a_frag: Sequence[Sequence[Reg]] | None = None,
               cons: Any = None) -> None:
    """One K block of one N part: wait ``full[stage]`` (when ``phase`` is given: the
    consumer role ``cons`` begins its iteration at ``stage`` and waits), then the
    K block's WGMMAs into temporary ``t`` (the first with scale-d ``first``); A by
    descriptor, or (``promote_rs``) from ``a_frag``, each k-step's 4 registers
    (:func:`_load_a_frag`)."""
    k, cfg, plan = b.k, b.cfg, b.plan
    form = cfg.part_form
    if phase is not None:
        cons.begin(at=(stage, phase))
        cons.wait()
    if a_frag is None:
        sa_off = _u32(k, "mul.lo.u32", stage, cfg.a_stage_bytes >> 4)
    sb_off = _u32(k, "mul.lo.u32", stage, cfg.b_stage_bytes >> 4)
    if plan.b_part_offsets[part]:
        k.ins("add.u32", sb_off, sb_off, plan.b_part_offsets[part] >> 4)
    if a_frag is None:
        da64, db64 = k.reg("b64"), k.reg("b64")
        k.ins("cvt.u64.u32", da64, sa_off)
    else:
        db64 = k.reg("b64")
    k.ins("cvt.u64.u32", db64, sb_off)
    imm = tuple(1 if w.startswith("scale") else 0 for w in form.immediates)  # K-major B
    seq.fence()  # the temporary was read by add.f32 (fenced after the barrier wait: C7519)
    for s in range(cfg.k_steps):
        a: Reg | Sequence[Reg]
        if a_frag is None:
            a, db = k.reg("b64"), k.reg("b64")
            k.ins("add.s64", a, a_desc0[s], da64)
        else:
            a, db = a_frag[s], k.reg("b64")
        k.ins("add.s64", db, b_desc0[s], db64)
        seq.mma(form, t, a, db, first if s == 0 else p_true, imm)


def _promotion_start(k: Kernel, cfg: GemmSm90Config,
                     acc: Sequence[Reg]) -> tuple[list[tuple[int, ...]], Reg]:
    """How both promoted main loops begin: the accumulator map of each of the
    ``promote_parts`` N parts (:func:`_promote_map`), the tile's f32 accumulators zeroed, and
    a false predicate (scale-d 0: a part's first WGMMA overwrites its temporary)."""
    pn = cfg.block_n // cfg.promote_parts
    maps = [_promote_map(cfg.block_n, pn, q) for q in range(cfg.promote_parts)]
    for r in acc:
        k.ins("mov.f32", r, "0f00000000")
    p_zero = k.reg("pred")
    k.ins("setp.ne.u32", p_zero, 0, 0)
    return maps, p_zero


def _add_part(k: Kernel, seq: WgmmaSequence, acc: Sequence[Reg], t: Sequence[Reg],
              part_map: tuple[int, ...], scales: Sequence[Reg] | None = None) -> None:
    """Retire temporary ``t`` and add it into the tile's accumulators: ``t[i]`` into
    ``acc[part_map[i]]``; with block ``scales`` (one f32 per row half of the fragment,
    :func:`_block_scales`) ``t[i] * scales[(i // 2) % 2]`` (one ``fma.rn.f32``)."""
    seq.read(t)
    for i, j in enumerate(part_map):
        if scales is None:
            k.ins("add.f32", acc[j], acc[j], t[i])
        else:
            k.ins("fma.rn.f32", acc[j], t[i], scales[(i // 2) % 2], acc[j])
