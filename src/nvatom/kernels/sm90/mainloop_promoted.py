"""The promoted FP8 main loop of one tile (docs/perf.md "FP8 promotion"): per group of
``promote`` K blocks and per N part, WGMMA sums into a temporary that ``add.f32`` adds into the
tile's f32 accumulators; dispatches to the pipelined and unrolled forms (PTX ISA
"wgmma.mma_async", "mbarrier")."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from nvatom.kernels.sm90.emit import next_stage as _next_stage
from nvatom.kernels.sm90.emit import u32 as _u32
from nvatom.kernels.sm90.mainloop_pipelined import _mainloop_pipelined
from nvatom.kernels.sm90.mainloop_rs import _load_a_frag, _rs_lane_base
from nvatom.kernels.sm90.mainloop_unrolled import _mainloop_unrolled
from nvatom.kernels.sm90.promotion import _add_part, _part_mmas, _promotion_start
from nvatom.kernels.sm90.scales import _block_scales, part_scale_block
from nvatom.kernels.sm90.skeleton import _Build
from nvatom.ptx.builder import Reg
from nvatom.ptx.wgmma_emit import WgmmaSequence


def _mainloop_promoted(b: _Build, seq: WgmmaSequence, acc: Sequence[Reg],
                       temps: Sequence[Sequence[Reg]], a_desc0: Sequence[Reg],
                       b_desc0: Sequence[Reg], stage: Reg, phase: Reg, is_lead: Reg,
                       p_true: Reg, p_first: Reg | None,
                       block_rows: Sequence[Reg] | None = None,
                       halves: Sequence[tuple[Sequence[Reg], Sequence[Reg]]] | None = None,
                       cons: Any = None) -> None:
    """The promoted FP8 main loop of one tile: per group of ``promote`` K blocks and per N
    part, WGMMA sums the group into a temporary (scale-d 0 on its first instruction), and
    ``add.f32`` adds the retired temporary into the tile's accumulators (:func:`_promote_map`);
    with two temporaries the next part's WGMMA runs while the last one's sum is added.  Then
    the group's stages are released.  Block scales (``block_rows``, :func:`_block_scale_rows`;
    ``promote`` 1): each K block's scales (two rows, per 128-column block of the tile) are
    loaded before its WGMMAs and each part's partial sums are added scaled by its column
    block's (``fma.rn.f32``).  ``halves`` (the ping-pong schedule): the
    (accumulators, A descriptors) of each 64-row half of the warpgroup's tile; the N parts
    run per half, in that order (else one half: ``acc``, ``a_desc0``).  ``cons``: the stage
    ring's consumer role."""
    k, cfg = b.k, b.cfg
    assert p_first is not None and cons is not None
    if halves is None:
        halves = [(acc, a_desc0)]
    if cfg.pipelined:
        _mainloop_pipelined(b, seq, acc, temps, a_desc0, b_desc0, stage, phase, is_lead, p_true,
                            cons)
        return
    if cfg.promote_unroll > 1:
        _mainloop_unrolled(b, seq, acc, temps, a_desc0, b_desc0, stage, phase, is_lead, p_true,
                           cons, block_rows)
        return
    group, parts, nt = cfg.promote, cfg.promote_parts, len(temps)
    k.comment(f"promoted main loop: {group} K block(s) x {parts} part(s) of "
              f"n{cfg.block_n // parts} per promotion into the f32 accumulators")
    maps, p_zero = _promotion_start(k, cfg, [r for h in halves for r in h[0]])
    units = [(h, q) for h in range(len(halves)) for q in range(parts)]
    rs = _ALoads(b, seq, cons, stage, phase) if cfg.promote_rs else None
    kt = _u32(k, "mov.u32", 0)
    a_frag = None
    if rs is not None and cfg.promote_rs_prefetch:  # the tile's first K block
        a_frag = rs.load(stage, phase, record=False)
    kloop = k.fresh_label("c_k")
    with cons.loop():  # the K loop (a group of K blocks per iteration)
        k.label(kloop)
        if rs is not None and not cfg.promote_rs_prefetch:
            a_frag = rs.load(stage, phase)  # A's fragment of this K block, for every part
        elif rs is not None:  # its wait and ldmatrix, emitted before the loop or prefetched
            rs.record(stage, phase)
        cnt = None
        if group > 1:  # the last group of a tile may be short (ragged K)
            cnt = _u32(k, "sub.u32", b.ktiles, kt)
            k.ins("min.u32", cnt, cnt, group)
        pending: list[int] = []
        scales = None
        if block_rows is not None:
            assert group == 1
            scales = _block_scales(k, block_rows, kt)

        def add(u: int) -> None:
            h, q = units[u]
            _add_part(k, seq, halves[h][0], temps[u % nt], maps[q],
                      None if scales is None else scales[part_scale_block(cfg, q)])

        def prefetch() -> None:
            if rs is not None and cfg.promote_rs_prefetch:
                assert a_frag is not None
                rs.prefetch(kt, a_frag)

        for u, (h, q) in enumerate(units):
            t = temps[u % nt]
            ad = halves[h][1]
            if cnt is None:
                _part_mmas(b, seq, t, ad, b_desc0, stage,
                           phase if u == 0 and a_frag is None else None, q, p_zero, p_true,
                           a_frag, cons)
            else:
                _group_part_mmas(b, seq, t, ad, b_desc0, stage, phase, q, u == 0, p_first,
                                 p_true, cnt, cons)
            seq.commit()
            cons.read(span=1 if cnt is None else group)  # a group: its K blocks' stages
            pending.append(u)
            if len(pending) == nt:
                seq.wait(nt - 1)
                cons.wgmma_wait(nt - 1)
                if nt == 1 and u == len(units) - 1:
                    prefetch()
                add(pending.pop(0))
        if pending:
            seq.wait(0)
            cons.wgmma_wait(0)
            prefetch()
        for u in pending:
            add(u)
        _release_group(b, stage, phase, is_lead, kt, cnt, cons)
        pk_ = k.reg("pred")
        k.ins("setp.lt.u32", pk_, kt, b.ktiles)
        k.bra(kloop, pk_)


class _ALoads:
    """``promote_rs``: A's fragment of a K block by ``ldmatrix`` (:func:`_load_a_frag`)
    after the wait for its stage's ``full`` barrier (the consumer role's iteration); with
    ``promote_rs_prefetch`` the next K block's, once the current block's last part retired."""

    def __init__(self, b: _Build, seq: WgmmaSequence, cons: Any, stage: Reg,
                 phase: Reg) -> None:
        self.b, self.seq, self.cons, self.stage, self.phase = b, seq, cons, stage, phase
        self.lane_base = _rs_lane_base(b)

    def load(self, st: Reg, ph: Reg, into: list[list[Reg]] | None = None,
             record: bool = True) -> list[list[Reg]]:
        """Wait for the stage, ``ldmatrix`` its A; ``record`` False: the wait emitted without
        the role (``promote_rs_prefetch``: :meth:`record` notes it at the block's start)."""
        if record:
            self.cons.begin(at=(st, ph))
            self.cons.wait()
        else:
            self.cons.pipe.barriers.wait(self.cons.pipe, st, ph)
        frag = _load_a_frag(self.b, self.seq, self.lane_base, st, into)
        if record:
            self.cons.read(synchronous=True)  # ldmatrix: done when it returns
        return frag

    def record(self, st: Reg, ph: Reg) -> None:
        """``promote_rs_prefetch``: the K block's wait and ``ldmatrix`` were emitted before
        the loop or by the previous block's :meth:`prefetch`; the role records them at the
        block's start (each stage's own order is the PTX's; only the next stage's wait moves
        after the current one's release in the model)."""
        self.cons.begin(at=(st, ph))
        self.cons.wait(emit=False)
        self.cons.read(synchronous=True)

    def prefetch(self, kt: Reg, a_frag: list[list[Reg]]) -> None:
        """The next K block's A, if there is one (its stage: this one advanced)."""
        k, cfg = self.b.k, self.b.cfg
        skip = k.fresh_label("no_prefetch")
        more = k.reg("pred")
        kn = _u32(k, "add.u32", kt, 1)
        k.ins("setp.lt.u32", more, kn, self.b.ktiles)
        k.bra(skip, f"!{more}")
        st, ph = _u32(k, "mov.u32", self.stage), _u32(k, "mov.u32", self.phase)
        _next_stage(k, st, ph, cfg.stages)
        self.load(st, ph, a_frag, record=False)
        k.label(skip)


def _group_part_mmas(b: _Build, seq: WgmmaSequence, t: Sequence[Reg], a_desc0: Sequence[Reg],
                     b_desc0: Sequence[Reg], stage: Reg, phase: Reg, part: int, wait: bool,
                     p_first: Reg, p_true: Reg, cnt: Reg, cons: Any) -> None:
    """``promote`` > 1: one N part's WGMMAs over the ``cnt`` K blocks of a group (stages
    ``stage``, ``stage + 1``, ...) into temporary ``t``, the group's first WGMMA overwriting
    it (``p_first`` false); each K block waits for its ``full`` barrier when ``wait`` (the
    tile's first unit)."""
    k, cfg = b.k, b.cfg
    st = _u32(k, "mov.u32", stage)
    ph = _u32(k, "mov.u32", phase)
    j = _u32(k, "mov.u32", 0)
    k.ins("setp.ne.u32", p_first, 0, 0)
    jl = k.fresh_label("c_kg")
    k.label(jl)
    _part_mmas(b, seq, t, a_desc0, b_desc0, st, ph if wait else None, part, p_first, p_true,
               cons=cons)
    for _ in range(cfg.promote - 1 if wait else 0):  # the loop's other K blocks (a full
        cons.begin(at=(st, ph))                      # group; a ragged one has fewer)
        cons.wait(emit=False)
    k.ins("setp.ne.u32", p_first, 1, 0)
    _next_stage(k, st, ph, cfg.stages)
    k.ins("add.u32", j, j, 1)
    pj = k.reg("pred")
    k.ins("setp.lt.u32", pj, j, cnt)
    k.bra(jl, pj)


def _release_group(b: _Build, stage: Reg, phase: Reg, is_lead: Reg, kt: Reg,
                   cnt: Reg | None, cons: Any) -> None:
    """The end of a group of the promoted loop: its stages (one, or ``cnt`` when ``promote``
    > 1) released to the producer, the ring position and the K block ``kt`` advanced past
    them."""
    k, cfg = b.k, b.cfg
    if cnt is None:
        cons.release(0, stage=stage, pred=is_lead)
        _next_stage(k, stage, phase, cfg.stages)
        k.ins("add.u32", kt, kt, 1)
        return
    j = _u32(k, "mov.u32", 0)
    rl = k.fresh_label("c_rel")
    k.label(rl)
    cons.release(cfg.promote - 1, stage=stage, pred=is_lead)  # the group's oldest first
    for lag in range(cfg.promote - 2, -1, -1):  # the loop's other K blocks (a full group)
        cons.release(lag, stage=stage, pred=is_lead, emit=False)
    _next_stage(k, stage, phase, cfg.stages)
    k.ins("add.u32", j, j, 1)
    pj = k.reg("pred")
    k.ins("setp.lt.u32", pj, j, cnt)
    k.bra(rl, pj)
    k.ins("add.u32", kt, kt, cnt)
