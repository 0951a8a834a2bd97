"""The SM90 GEMM and attention kernels built through the pipeline objects
(nvatom.kernels.pipeline): their staging buffers are EpilogueRings and their stages Pipelines,
so the kernels' store/wait discipline is checked while they are built (the attention
backward's dQ staging and Q/dO ring included).  Each test weakens the real kernel the way a
bug would and expects the build to be refused with the ring's (or the stage ring's) message;
the unmodified kernels build (and their PTX is pinned by tests/test_ptx_fingerprint.py)."""

from __future__ import annotations

import dataclasses

import pytest

from nvatom.kernels.pipeline import (
    ConsumerRole,
    EpilogueRing,
    PingPongOrder,
    Pipeline,
    PipelineError,
    ProducerRole,
)
from nvatom.kernels.sm90 import consumer as CONS
from nvatom.kernels.sm90 import epilogue as EPI
from nvatom.kernels.sm90 import mainloop as MAIN
from nvatom.kernels.sm90 import pipeline as SM90P
from nvatom.kernels.sm90 import producer as PROD
from nvatom.kernels.sm90.attention_bwd_config import default_bwd_config
from nvatom.kernels.sm90.config import GemmSm90Config, GemmSm90Error
from nvatom.kernels.sm90.gemm import build_gemm_sm90
from nvatom.ptx import tma_emit as TE

# the FP8 tile of docs/perf.md ("FP8 tile by wave count"): 192 columns of bf16 output are
# three 64-column chunks, so a tile's first chunk reuses buffer 0 of the previous tile's last
FP8_ODD = GemmSm90Config(in_dtype="e4m3", out_dtype="bf16", b_major="K", block_n=192,
                         promote=1)
ODD = [FP8_ODD, GemmSm90Config(block_n=64, schedule="pingpong"),
       GemmSm90Config(block_n=192)]


def test_odd_chunk_tiles_build() -> None:
    for cfg in ODD:
        assert cfg.block_n // cfg.c_chunk_cols % 2 == 1
        build_gemm_sm90(cfg)


def test_fp8_epilogue_race_is_refused_in_the_real_kernel(monkeypatch: pytest.MonkeyPatch
                                                          ) -> None:
    """Last round's race: keeping one store in flight on an odd-chunk tile's first chunk
    lets the tile's first stmatrix rewrite buffer 0 while the previous tile's last TMA store
    still reads it.  The ring sees it at the tile loop's back edge (ping-pong with one
    chunk per 64-row half: already at the tile's second half)."""
    monkeypatch.setattr(EPI, "_store_wait", lambda ch, nchunks: 1)
    for cfg in ODD:
        with pytest.raises(PipelineError, match=(
                r"staging ring 'gemm_staging', buffer 0( \(next tile, at the loop's back "
                r"edge\))?: written while its previous TMA store may still read it: the last "
                r"cp.async.bulk.wait_group.read 1 left 1 store group in flight, 0 newer than "
                r"buffer 0's")) as e:
            build_gemm_sm90(cfg)
        assert ("back edge" in str(e.value)) == (cfg.schedule == "cooperative")
    build_gemm_sm90(GemmSm90Config(block_n=256))  # even chunks: one store may stay in flight


def test_dropped_store_wait_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(EpilogueRing, "wait", lambda self, pending: None)
    with pytest.raises(PipelineError, match=r"staging ring 'gemm_staging', buffer 0: written "
                       r"while its previous TMA store may still read it"):
        build_gemm_sm90(GemmSm90Config())


def test_write_before_the_warpgroup_syncs_with_the_lead_is_refused(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Only the lead thread waits: the other threads may write a buffer only after a
    bar.sync with it.  Dropping the first barrier of each chunk is refused."""
    real = EpilogueRing.sync
    calls = []

    def sync(self, bar, threads, **kw):  # type: ignore[no-untyped-def]
        calls.append(1)
        if len(calls) % 2 == 0:  # keep the barrier before the store
            real(self, bar, threads, **kw)

    monkeypatch.setattr(EpilogueRing, "sync", sync)
    with pytest.raises(PipelineError, match=r"staging ring 'gemm_staging', buffer 0: "
                       r"written before the writers synchronised with the lead thread's "
                       r"cp.async.bulk.wait_group.read"):
        build_gemm_sm90(GemmSm90Config())


def test_store_before_fence_and_sync_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(EpilogueRing, "fence", lambda self: None)
    with pytest.raises(PipelineError, match=r"staging ring 'gemm_staging', buffer 0: stored "
                       r"before its writes were fenced \(fence.proxy.async\)"):
        build_gemm_sm90(GemmSm90Config())


# ------------------------------------------------------------------ the stage ring
def test_release_under_an_in_flight_wgmma_group_is_refused(monkeypatch: pytest.MonkeyPatch
                                                           ) -> None:
    """wgmma_inflight 1 keeps the newest WGMMA group pending: releasing the current stage
    instead of the previous one hands the producer a stage the group still reads."""
    monkeypatch.setattr(MAIN, "_release_lag", lambda cfg: 0)
    for cfg in (GemmSm90Config(), GemmSm90Config(schedule="pingpong", block_n=128)):
        name = "consumer" if cfg.pingpong else "consumers"
        with pytest.raises(PipelineError, match=(
                rf"pipeline 'gemm_stages', consumer '{name}', stage s \(next iteration, at the "
                r"loop's back edge\): released while a WGMMA "
                r"group still reads it \(1 group pending after wgmma.wait_group\): stage "
                r"reused before its consumer release is done")):
            build_gemm_sm90(cfg)


def test_producer_skipping_its_empty_wait_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """The producer announces the stage's bytes and loads it without waiting for the
    consumers' release (the hand-assembled form minus its mbarrier.try_wait)."""
    def no_wait(prod):  # type: ignore[no-untyped-def]
        p = prod.pipe
        bar = SM90P._barrier(p.k, p.barriers.smem, p.barriers.off_full, prod.stage)
        TE.mbarrier_arrive_expect_tx(p.k, bar, p.spec.tx_bytes)
        prod.full = bar
        return bar

    monkeypatch.setattr(PROD, "_acquire", no_wait)
    with pytest.raises(PipelineError, match=(
            r"pipeline 'gemm_stages', producer 'producer', stage s: filled by TMA before the "
            r"producer acquired it \(acquire before fill: the consumers may still read it\)")):
        build_gemm_sm90(GemmSm90Config())


def test_short_stage_load_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """A stage whose loads deliver fewer bytes than expect_tx announced never completes:
    the check that refused block_n 192 with an MN-major multicast B (config.py)."""
    real = ProducerRole.load

    def load(self, dst, tmap, coords, nbytes, **kw):  # type: ignore[no-untyped-def]
        real(self, dst, tmap, coords, nbytes, **kw)
        if not getattr(self, "_skipped", False):  # one load of each K block goes missing
            self._skipped = True
            self.state.load(-nbytes)

    monkeypatch.setattr(ProducerRole, "load", load)
    with pytest.raises(PipelineError, match=r"producer 'producer', stage s: its loads deliver "
                       r"\d+ bytes but expect_tx announced \d+"):
        build_gemm_sm90(GemmSm90Config())
    with pytest.raises(GemmSm90Error, match="block_n 192 has an odd number"):
        GemmSm90Config(block_n=192, cluster_m=2)


def test_pingpong_wait_outside_its_turn_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(PingPongOrder, "wait", lambda self, role, wg, **kw: None)
    with pytest.raises(PipelineError, match=r"consumer 'consumer', stage s: a ping-pong "
                       r"consumer waits on a stage outside its turn"):
        build_gemm_sm90(GemmSm90Config(schedule="pingpong", block_n=128))


def test_unreleased_last_stage_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """Dropping the release of a tile's last stage (after wait_group 0)."""
    monkeypatch.setattr(CONS, "_drain", lambda b, seq, cons, prev, is_lead: (
        seq.wait(0), cons.wgmma_wait(0)))
    with pytest.raises(PipelineError, match=r"pipeline 'gemm_stages', consumer 'consumers', "
                       r"stage s(-\d)?( \(next iteration, at the loop's back edge\))?: "
                       r"(never released|still held)"):
        build_gemm_sm90(GemmSm90Config())


class _ReleaseEarly:
    """A consumer whose lagged releases release the current stage instead (the bug of
    releasing the stage an in-flight WGMMA group still reads), as the promoted loops emit."""

    def __init__(self, cons):  # type: ignore[no-untyped-def]
        self.cons = cons

    def __getattr__(self, name):  # type: ignore[no-untyped-def]
        return getattr(self.cons, name)

    def release(self, lag=0, **kw):  # type: ignore[no-untyped-def]
        self.cons.release(0, **kw)


FP8 = dict(in_dtype="e4m3", b_major="K", promote=1)
PROMOTED = {
    "pipelined": GemmSm90Config(**FP8, block_n=128, promote_parts=2, promote_temps=2,
                                promote_pipelined=True),
    "unrolled": GemmSm90Config(**FP8, block_n=192, promote_unroll=2, promote_temps=2),
    "group of 2": GemmSm90Config(**{**FP8, "promote": 2}, block_n=128, promote_temps=2,
                                 stages=6),
}
RS_PREFETCH = GemmSm90Config(**FP8, block_n=128, promote_temps=2, promote_rs=True,
                             promote_rs_prefetch=True)


@pytest.mark.parametrize("variant", sorted(PROMOTED))
def test_promoted_loops_release_only_retired_stages(variant: str,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = PROMOTED[variant]
    build_gemm_sm90(cfg)  # as shipped: every release lags its stage's last WGMMA group
    real = Pipeline.consumer
    monkeypatch.setattr(Pipeline, "consumer",
                        lambda self, *a, **kw: _ReleaseEarly(real(self, *a, **kw)))
    with pytest.raises(PipelineError, match=r"pipeline 'gemm_stages', consumer 'consumers', "
                       r"stage s.*: released (while a WGMMA group still reads it|twice)"):
        build_gemm_sm90(cfg)


def test_promoted_loop_checks_its_waits(monkeypatch: pytest.MonkeyPatch) -> None:
    """The basic promoted loop (FP8 128 x 192, two temporaries) and the one with A from
    registers prefetched a block ahead: a block that skips the stage's full-barrier wait
    reads a stage TMA may still be writing."""
    build_gemm_sm90(RS_PREFETCH)
    monkeypatch.setattr(ConsumerRole, "wait", lambda self, emit=True: None)
    for cfg in (dataclasses.replace(FP8_ODD, promote_temps=2), RS_PREFETCH):
        with pytest.raises(PipelineError, match=r"consumer 'consumers', stage s: read before "
                           r"its full barrier was waited on"):
            build_gemm_sm90(cfg)


# ------------------------------------------------------------------ attention's K/V rings
def test_attention_producer_builds_through_the_kv_rings(monkeypatch: pytest.MonkeyPatch
                                                        ) -> None:
    from nvatom.kernels.sm90.attention import build_attention_sm90
    from nvatom.kernels.sm90.attention_config import default_config

    for split in (True, False):
        cfg = dataclasses.replace(default_config("bf16", 128, False), split_release=split)
        build_attention_sm90(cfg)
    monkeypatch.setattr(ProducerRole, "acquire", lambda self: None)  # no empty wait
    with pytest.raises(PipelineError, match=r"pipeline 'attention_k', producer "
                       r"'attention_k_producer', stage s: filled by TMA before the producer "
                       r"acquired it"):
        build_attention_sm90(default_config("bf16", 128, False))


def test_attention_consumer_releases_only_retired_k_stages(monkeypatch: pytest.MonkeyPatch
                                                          ) -> None:
    """FA3's overlap issues S_j (K stage) then O += P V (V stage) and waits ``wait_group 1``
    before releasing K's stage: S, the older group, retired.  Waiting for less (2 pending)
    releases a K stage S still reads (the message counts the K ring's own pending groups;
    both rings' groups share one queue: WgmmaGroups)."""
    from nvatom.kernels.sm90 import attention_consumer as AC
    from nvatom.kernels.sm90.attention import build_attention_sm90
    from nvatom.kernels.sm90.attention_config import default_config

    cfg = dataclasses.replace(default_config("bf16", 128, False), split_release=True,
                              overlap=True)
    build_attention_sm90(cfg)
    real = AC._Consumer.wait
    monkeypatch.setattr(AC._Consumer, "wait",
                        lambda self, n: real(self, 2 if n == 1 else n))
    with pytest.raises(PipelineError, match=r"pipeline 'attention_k', consumer 'consumers', "
                       r"stage s: released while a WGMMA group still reads it \(1 group "
                       r"pending after wgmma.wait_group\)"):
        build_attention_sm90(cfg)


def test_promoted_group_reads_all_its_stages() -> None:
    """``promote`` 2: one WGMMA group per part reads both K blocks' stages; releasing the
    group's stages while a part's group is pending is refused for the older stage too."""
    from nvatom.ptx.pipeline_state import ConsumerState

    c = ConsumerState("p", "c", 4)
    for _ in range(2):
        c.begin()
        c.wait()
    c.read(span=2)  # part 0
    c.read(span=2)  # part 1
    c.wgmma_wait(1)
    with pytest.raises(PipelineError, match=r"stage s-1: released while a WGMMA group still "
                       r"reads it"):
        c.release(1)
    c.wgmma_wait(0)
    c.release(1)
    c.release(0)
    c.finish()


def test_attention_o_staging_is_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    """The "tma" epilogue writes O into the Q tile's chunks, fences, synchronises and stores
    them as one bulk group: dropping the fence is refused for its first chunk."""
    from nvatom.kernels.sm90.attention import build_attention_sm90
    from nvatom.kernels.sm90.attention_config import default_config

    cfg = dataclasses.replace(default_config("bf16", 128, False), epilogue="tma")
    build_attention_sm90(cfg)
    monkeypatch.setattr(EpilogueRing, "fence", lambda self: None)
    with pytest.raises(PipelineError, match=r"staging ring 'attention_o', buffer 0: stored "
                       r"before its writes were fenced"):
        build_attention_sm90(cfg)


# ------------------------------------------------- attention's Q tile and ping-pong turns
def _attention(**kw: object) -> object:
    from nvatom.kernels.sm90.attention_config import default_config

    return dataclasses.replace(default_config("bf16", 128, False), **kw)


def test_attention_q_read_before_its_wait_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """The consumers' wait on Q's barrier dropped: the first S group reads a Q tile TMA may
    still be writing."""
    from nvatom.kernels.pipeline import SingleBuffer
    from nvatom.kernels.sm90.attention import build_attention_sm90

    build_attention_sm90(_attention())
    monkeypatch.setattr(SingleBuffer, "wait", lambda self: None)
    with pytest.raises(PipelineError, match=r"^buffer 'attention_q', consumer 'consumers': "
                       r"read before its barrier was waited on \(wait before read: TMA may "
                       r"still be writing it\)$"):
        build_attention_sm90(_attention())


def test_attention_q_short_load_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """A Q box missing: Q's barrier expects q_bytes, the loads deliver less."""
    from nvatom.kernels.pipeline import SingleBuffer
    from nvatom.kernels.sm90.attention import build_attention_sm90

    real = SingleBuffer.load
    seen: list[int] = []

    def load(self: SingleBuffer, *args: object, **kw: object) -> None:
        seen.append(1)
        if len(seen) > 1:  # the first box only
            real(self, *args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(SingleBuffer, "load", load)
    with pytest.raises(PipelineError, match=r"^buffer 'attention_q', producer "
                       r"'attention_q_producer': its loads deliver 16384 bytes but expect_tx "
                       r"announced 32768"):
        build_attention_sm90(_attention())


@pytest.mark.parametrize("overlap", [True, False])
def test_attention_o_written_into_q_before_s_retired_is_refused(
        overlap: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """The O staging's write into the Q tile moved before the ``wgmma.wait_group`` that
    retires the S group reading Q (here: right after an S group's commit, as an epilogue
    overlapping the next S would): refused by the Q buffer, not left to the accumulators."""
    from nvatom.kernels.sm90 import attention_consumer as AC
    from nvatom.kernels.sm90.attention import build_attention_sm90

    cfg = _attention(overlap=overlap, epilogue="tma")
    build_attention_sm90(cfg)
    real = AC._Consumer.issue_s

    def issue_s(self: AC._Consumer, stage: object, phase: object) -> None:
        real(self, stage, phase)  # type: ignore[arg-type]
        self.b.q.write()

    monkeypatch.setattr(AC._Consumer, "issue_s", issue_s)
    with pytest.raises(PipelineError, match=r"^buffer 'attention_q', consumer 'consumers': "
                       r"overwritten while a WGMMA group still reads it \(1 group pending "
                       r"after wgmma.wait_group\): write it only after every group reading "
                       r"it retired$"):
        build_attention_sm90(cfg)


def test_attention_q_read_after_the_o_write_is_refused() -> None:
    """The buffer's rules on their own: Q overwritten, then read by another S group."""
    from nvatom.ptx.pipeline_state import BufferState

    q = BufferState("attention_q", 32768, "p", "consumers")
    q.wait()
    q.read()
    q.wgmma_wait(0)
    q.write()
    with pytest.raises(PipelineError, match=r"^buffer 'attention_q', consumer 'consumers': "
                       r"read after the threads overwrote it"):
        q.read()
    fresh = BufferState("attention_q", 32768, "p", "consumers")
    with pytest.raises(PipelineError, match=r"overwritten before its barrier was waited on"):
        fresh.write()


def test_attention_pingpong_wait_outside_its_turn_is_refused(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Ping-pong attention: the first S issued without the order barrier's wait; then the
    tail's P V without it (the turn of the other calls kept)."""
    from nvatom.kernels.sm90 import attention_consumer as AC
    from nvatom.kernels.sm90.attention import build_attention_sm90

    cfg = _attention(pingpong=True, overlap=True)
    build_attention_sm90(cfg)
    with monkeypatch.context() as m:
        m.setattr(PingPongOrder, "wait", lambda self, role, wg, **kw: None)
        with pytest.raises(PipelineError, match=r"^pipeline 'attention_k', consumer "
                           r"'consumers', stage s: a ping-pong consumer waits on a stage "
                           r"outside its turn \(wait on its order barrier first\)$"):
            build_attention_sm90(cfg)
    real = AC._Consumer.turn_begin
    calls: list[int] = []

    def turn_begin(self: AC._Consumer) -> None:
        calls.append(1)
        if len(calls) != 3:  # the first tile's, the KV loop's, not the tail's
            real(self)

    monkeypatch.setattr(AC._Consumer, "turn_begin", turn_begin)
    with pytest.raises(PipelineError, match=r"^pipeline 'attention_v', consumer 'consumers', "
                       r"stage s( \(on the path where the loop runs zero times\))?: a "
                       r"ping-pong consumer waits on a stage outside its turn"):
        build_attention_sm90(cfg)


def test_attention_pingpong_signal_without_its_turn_is_refused(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A hand-off (``bar.arrive`` on the other's barrier) by a warpgroup that never waited
    for its turn."""
    from nvatom.kernels.sm90 import attention_consumer as AC
    from nvatom.kernels.sm90.attention import build_attention_sm90

    cfg = _attention(pingpong=True, overlap=True)
    real = AC._Consumer.turn_end
    monkeypatch.setattr(AC._Consumer, "turn_end",
                        lambda self, last=False: (real(self, last), real(self, last)))
    with pytest.raises(PipelineError, match=r"^ping-pong consumer 'consumers' of pipeline "
                       r"'attention_k' ends a turn it never waited for"):
        build_attention_sm90(cfg)


def test_a_loop_that_may_run_zero_times_is_checked_on_both_paths() -> None:
    """``loop(may_skip=True)``: what follows the loop is checked from the state before it
    too.  S_0's group retired only inside the KV loop: with one KV tile the loop is skipped
    and O overwrites Q while S_0 still reads it (the loop path alone is correct)."""
    from nvatom.ptx.pipeline_state import BufferState

    def kernel(may_skip: bool) -> None:
        q = BufferState("attention_q", 32768, "p", "consumers")
        q.wait()
        q.read()  # S_0, no wgmma.wait_group before the loop
        with q.loop(may_skip=may_skip):
            q.wgmma_wait(0)  # retires the previous S
            q.read()
            q.wgmma_wait(0)
        q.write()

    kernel(may_skip=False)
    with pytest.raises(PipelineError, match=r"^buffer 'attention_q', consumer 'consumers' \(on "
                       r"the path where the loop runs zero times\): overwritten while a WGMMA "
                       r"group still reads it \(1 group pending"):
        kernel(may_skip=True)


# ----------------------------------------------------------------------- attention backward
STATS_BYTES = default_bwd_config().stats_bytes  # the stage's stats tile


def _bwd(d: int = 128) -> None:
    from nvatom.kernels.sm90.attention_bwd import build_attention_bwd_sm90

    build_attention_bwd_sm90(default_bwd_config("bf16", d, causal=True))


def _skip_for(method: str, ring: str) -> object:
    orig = getattr(EpilogueRing, method)

    def patched(self: EpilogueRing, *args: object, **kwargs: object) -> None:
        if self.name != ring:
            orig(self, *args, **kwargs)
        elif method == "fence":  # the record without the instruction's model
            return

    return patched


@pytest.mark.parametrize("d", [64, 128])
def test_attention_bwd_dq_staging_without_its_wait_is_refused(
        monkeypatch: pytest.MonkeyPatch, d: int) -> None:
    """The backward's dQ staging tile: dropping the lead's wait for the previous block's TMA
    reductions lets the next block's dQ overwrite a tile they may still read."""
    _bwd(d)
    monkeypatch.setattr(EpilogueRing, "wait", _skip_for("wait", "attention_bwd_dq"))
    with pytest.raises(PipelineError, match=r"staging ring 'attention_bwd_dq', buffer 0.*"
                                            r"written while its previous TMA store"):
        _bwd(d)


def test_attention_bwd_dq_reduce_before_the_fence_is_refused(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(EpilogueRing, "fence", _skip_for("fence", "attention_bwd_dq"))
    with pytest.raises(PipelineError, match=r"staging ring 'attention_bwd_dq', buffer 0: "
                                            r"stored before its writes were fenced"):
        _bwd()


def test_attention_bwd_stage_without_its_stats_load_is_refused(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A stage whose TMA loads deliver fewer bytes than its expect_tx (the stats tile left
    out) never completes its full barrier: refused where the stage is committed."""
    orig = ProducerRole.load

    def load(self: ProducerRole, dst: object, tmap: object, coords: object, nbytes: int,
             **kw: object) -> None:
        if self.pipe.spec.name == "attention_bwd_qdo" and nbytes == STATS_BYTES:
            return
        orig(self, dst, tmap, coords, nbytes, **kw)

    monkeypatch.setattr(ProducerRole, "load", load)
    with pytest.raises(PipelineError, match="attention_bwd_qdo"):
        _bwd()
