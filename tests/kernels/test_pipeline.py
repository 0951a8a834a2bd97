"""The pipeline layer (nvatom.kernels.pipeline): the stage state machine's rules, each broken
once and refused with a message naming the pipeline, the stage or buffer and the rule; the
staging ring's race of docs/perf.md ("FP8 tile by wave count") rebuilt and refused; the
correct demo kernels assembled by ptxas for sm_90a."""

from __future__ import annotations

import pytest

from nvatom.kernels.pipeline import (
    Barriers,
    EpilogueRing,
    PingPongOrder,
    Pipeline,
    PipelineError,
    PipelineSpec,
)
from nvatom.kernels.pipeline_demo import build_pipeline_demo
from nvatom.ptx.builder import Kernel, Module
from nvatom.runtime.ptxas import assemble


def _kernel() -> Kernel:
    return Module("sm_90a").kernel("t")


def _pipe(stages: int = 4, consumers: int = 1, **kw: object) -> tuple[Kernel, Pipeline]:
    k = _kernel()
    spec = PipelineSpec("p", stages, 512, consumers=consumers, **kw)  # type: ignore[arg-type]
    return k, Pipeline(k, spec, k.reg("u32"), k.reg("u32"))


# ------------------------------------------------------------------ the correct programs
@pytest.mark.parametrize("kw", [{}, {"consumers": 2, "chunks": 4}, {"chunks": 2},
                                {"stages": 5, "chunks": 1}])
def test_demo_kernel_assembles(kw: dict) -> None:
    res = assemble(build_pipeline_demo(**kw).emit(), "sm_90a")
    k = res.kernel("pipeline_demo")
    assert (k.spills, k.stack_frame) == (0, 0)
    assert not res.warnings


def test_demo_kernel_ptx_has_the_pipeline() -> None:
    ptx = build_pipeline_demo(stages=3, chunks=3).emit()
    assert ptx.count("mbarrier.init.shared::cta.b64") == 6  # full[3] + empty[3]
    assert ptx.count("mbarrier.arrive.expect_tx.release.cta.shared::cta.b64") == 1
    assert ptx.count("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier") == 1
    assert ptx.count("cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group") == 3
    # the safe wait: all stores read before the tile's first (odd-count) chunk, then 1
    assert ptx.count("cp.async.bulk.wait_group.read 0;") == 1
    assert ptx.count("cp.async.bulk.wait_group.read 1;") == 2


# ------------------------------------------------------------------ the races, refused
def test_fp8_epilogue_race_is_refused() -> None:
    """Three chunks per tile, every write after wait_group.read 1: the next tile's chunk 0
    writes buffer 0 while this tile's last store (chunk 2, buffer 0) may still read it."""
    with pytest.raises(PipelineError) as e:
        build_pipeline_demo(chunks=3, epilogue_wait="one_in_flight")
    msg = str(e.value)
    assert "staging ring 'demo_staging', buffer 0 (next tile, at the loop's back edge)" in msg
    assert "cp.async.bulk.wait_group.read 1" in msg
    assert "write a staging buffer only after its store's read was waited for" in msg


def test_even_chunks_may_keep_one_store_in_flight() -> None:
    assert "pipeline_demo" in build_pipeline_demo(chunks=4, epilogue_wait="one_in_flight").emit()


def test_stage_reused_before_consumer_release_is_refused() -> None:
    """Two consumer warpgroups read each stage but empty[s] completes on one arrival."""
    with pytest.raises(PipelineError, match=r"pipeline 'demo', every stage: empty\[s\] "
                       r"completes after 1 arrival\(s\) but 2 consumer warpgroup\(s\).*stage "
                       r"reused before its consumer release"):
        build_pipeline_demo(consumers=2, empty_arrivals=1)


def test_too_few_arrivals_never_complete() -> None:
    _, p = _pipe(consumers=2)
    p.consumer(arrivals=1)
    with pytest.raises(PipelineError, match="acquire never completes"):
        p.check_arrivals()


# ------------------------------------------------------------------ consumer rules
def test_release_while_wgmma_reads_is_refused() -> None:
    """Releasing the current stage while its WGMMA group is still pending (wait_group 1)."""
    k, p = _pipe()
    c = p.consumer()
    it = k.reg("u32")
    with pytest.raises(PipelineError) as e:
        c.begin(it)
        c.wait()
        c.read()
        c.wgmma_wait(1)
        c.release()
    assert str(e.value).startswith("pipeline 'p', consumer 'consumer', stage s: released "
                                   "while a WGMMA group still reads it")


def test_lagged_release_is_legal_across_iterations() -> None:
    """The GEMM's K loop: peeled block 0, then wait/read/wait_group 1/release(s-1)."""
    k, p = _pipe()
    c = p.consumer()
    it = k.reg("u32")
    c.begin(it)
    c.wait()
    c.read()
    c.wgmma_wait(1)
    with c.loop():
        c.begin(it)
        c.wait()
        c.read()
        c.wgmma_wait(1)
        c.release(1)
    c.wgmma_wait(0)
    c.release(0)
    c.finish()


def test_release_unless_first_inside_nested_loops() -> None:
    """The GEMM's fast K loop: the release of s-1 is predicated on ``kt != 0`` (``start``
    resets the counter), inside a tile loop whose record equals the K loop's (nested records
    are told apart by identity); the kernel's own ring registers (``at=``)."""
    k, p = _pipe()
    c = p.consumer()
    stage, phase = k.reg("u32"), k.reg("u32")
    with c.loop():  # tiles
        c.start()
        with c.loop():  # K blocks
            c.begin(at=(stage, phase))
            c.wait()
            c.read()
            c.wgmma_wait(1)
            c.release(1, stage=k.reg("u32"), unless_first=True)
        c.wgmma_wait(0)
        c.release(0, stage=stage)
    c.finish()
    c2 = p.consumer("late", arrivals=0)
    with c2.loop(), c2.loop():  # identical (empty) records, nested
        pass


def test_missing_start_makes_the_first_lagged_release_wrong() -> None:
    k, p = _pipe()
    c = p.consumer()
    c.begin(at=(k.reg("u32"), k.reg("u32")))
    c.wait()
    c.read()
    c.wgmma_wait(1)
    with pytest.raises(PipelineError, match="stage s-1: released but never read"):
        c.release(1, stage=k.reg("u32"), unless_first=True)  # no start(): not the first


def test_custom_barriers_and_cluster_counts() -> None:
    """A kernel's own barrier spelling (Barriers subclass) is what the roles emit; a 2-CTA
    cluster counts each consumer warpgroup's arrival on both CTAs."""
    calls: list[str] = []

    class Mine(Barriers):
        def acquire(self, pipe, stage, phase):  # type: ignore[no-untyped-def]
            calls.append("acquire")
            return stage

        def wait(self, pipe, stage, phase):  # type: ignore[no-untyped-def]
            calls.append("wait")

        def release(self, pipe, stage, pred):  # type: ignore[no-untyped-def]
            calls.append("release")

    k = _kernel()
    spec = PipelineSpec("c", 4, 512, consumers=2, cluster=2)
    assert spec.empty_count == 4
    p = Pipeline(k, spec, 0, 32, barriers=Mine())
    pr = p.producer()
    pr.begin(at=(k.reg("u32"), k.reg("u32")))
    pr.acquire()
    c = p.consumer(arrivals=2)
    p.check_arrivals()
    c.begin(at=(k.reg("u32"), k.reg("u32")))
    c.wait()
    c.read(synchronous=True)
    c.release(pred=k.reg("pred"))
    assert calls == ["acquire", "wait", "release"]
    with pytest.raises(PipelineError, match="empty\\[s\\] completes after 4 arrival"):
        p.consumer(arrivals=1)
    with pytest.raises(PipelineError, match="cluster of 2 CTAs"):
        PipelineSpec("x", 2, 512, consumers=2, kind="pingpong", cluster=2)


def test_first_block_release_of_previous_is_refused() -> None:
    k, p = _pipe()
    c = p.consumer()
    c.begin(k.reg("u32"))
    c.wait()
    c.read()
    c.wgmma_wait(0)
    with pytest.raises(PipelineError, match="stage s-1: released but never read"):
        c.release(1)


def test_read_before_wait_is_refused() -> None:
    k, p = _pipe()
    c = p.consumer()
    c.begin(k.reg("u32"))
    with pytest.raises(PipelineError, match="stage s: read before its full barrier was "
                       "waited on"):
        c.read()


def test_read_after_release_is_refused() -> None:
    k, p = _pipe()
    c = p.consumer()
    c.begin(k.reg("u32"))
    c.wait()
    c.read()
    c.wgmma_wait(0)
    c.release()
    with pytest.raises(PipelineError, match="stage s: read after its release"):
        c.read()


def test_double_release_is_refused() -> None:
    k, p = _pipe()
    c = p.consumer()
    c.begin(k.reg("u32"))
    c.wait()
    c.read()
    c.wgmma_wait(0)
    c.release()
    with pytest.raises(PipelineError, match="released twice"):
        c.release()


def test_unreleased_stage_at_the_back_edge_is_refused() -> None:
    """A loop body that never releases: after a whole ring the producer waits forever."""
    k, p = _pipe(stages=1)
    c = p.consumer()
    with pytest.raises(PipelineError, match=r"back edge.*a whole ring of 1 stages later"):
        with c.loop():
            c.begin(k.reg("u32"))
            c.wait()
            c.read()
            c.wgmma_wait(0)


def test_never_released_at_finish_is_refused() -> None:
    k, p = _pipe()
    c = p.consumer()
    c.begin(k.reg("u32"))
    c.wait()
    with pytest.raises(PipelineError, match="stage s: never released"):
        c.finish()


# ------------------------------------------------------------------ producer rules
def test_fill_before_acquire_is_refused() -> None:
    k, p = _pipe()
    pr = p.producer()
    pr.begin(k.reg("u32"))
    with pytest.raises(PipelineError, match="producer 'producer', stage s: filled by TMA "
                       "before the producer acquired it"):
        pr.load(k.reg("u32"), k.reg("u64"), [0, 0], 512)


def test_double_acquire_is_refused() -> None:
    k, p = _pipe()
    pr = p.producer()
    pr.begin(k.reg("u32"))
    pr.acquire()
    with pytest.raises(PipelineError, match="acquired twice in one iteration"):
        pr.acquire()


def test_expect_tx_mismatch_is_refused() -> None:
    k, p = _pipe()
    pr = p.producer()
    pr.begin(k.reg("u32"))
    pr.acquire()
    pr.load(k.reg("u32"), k.reg("u64"), [0, 0], 256)
    with pytest.raises(PipelineError, match="deliver 256 bytes but expect_tx announced 512"):
        pr.commit()


def test_uncommitted_stage_at_the_back_edge_is_refused() -> None:
    k, p = _pipe()
    pr = p.producer()
    with pytest.raises(PipelineError, match="back edge.*acquired but never committed"):
        with pr.loop():
            pr.begin(k.reg("u32"))
            pr.acquire()


# ------------------------------------------------------------------ ping-pong
def test_pingpong_consumer_waits_only_in_its_turn() -> None:
    k = _kernel()
    spec = PipelineSpec("pp", 4, 512, consumers=2, kind="pingpong")
    p = Pipeline(k, spec, k.reg("u32"), k.reg("u32"))
    order = PingPongOrder(k, 3)
    c = p.consumer("wg", order=order)
    c.begin(k.reg("u32"))
    with pytest.raises(PipelineError, match="outside its turn"):
        c.wait()
    order.wait(c, 0)
    c.wait()
    c.read()
    c.wgmma_wait(0)
    order.signal(c, 0)
    c.release()
    body = k.emit()
    assert "bar.sync 3, 256;" in body and "bar.arrive 4, 256;" in body
    with pytest.raises(PipelineError, match="never waited for"):
        order.signal(c, 0)


def test_pingpong_needs_one_release_per_stage() -> None:
    k = _kernel()
    with pytest.raises(PipelineError, match="completes after 2 arrival"):
        spec = PipelineSpec("pp", 4, 512, consumers=2, kind="pingpong", empty_arrivals=2)
        Pipeline(k, spec, 0, 0).consumer(order=PingPongOrder(k, 3))


def test_spec_checks() -> None:
    with pytest.raises(PipelineError, match="0 stages"):
        PipelineSpec("x", 0, 512)
    with pytest.raises(PipelineError, match="ping-pong alternates 2"):
        PipelineSpec("x", 2, 512, consumers=1, kind="pingpong")


# ------------------------------------------------------------------ staging ring
def test_ring_intra_tile_race_is_refused() -> None:
    k = _kernel()
    ring = EpilogueRing(k, "r", [k.reg("u32")], k.reg("pred"))
    ring.wait(0)
    ring.write(0)
    ring.store(0, k.reg("u64"), [0, 0])
    ring.wait(1)
    with pytest.raises(PipelineError, match=r"staging ring 'r', buffer 0: written while its "
                       r"previous TMA store may still read it"):
        ring.write(0)


def test_ring_store_before_write_is_refused() -> None:
    k = _kernel()
    ring = EpilogueRing(k, "r", [k.reg("u32"), k.reg("u32")], k.reg("pred"))
    with pytest.raises(PipelineError, match="buffer 1: stored before it was written"):
        ring.store(1, k.reg("u64"), [0, 0])


def test_ring_lead_only_needs_a_sync_after_the_wait() -> None:
    """The lead's wait frees a buffer for the lead only: the writers need a bar.sync."""
    k = _kernel()
    ring = EpilogueRing(k, "r", [k.reg("u32")], k.reg("pred"), lead_only=True)
    ring.write(0)
    ring.fence()
    ring.sync(1, 128)
    ring.store(0, k.reg("u64"), [0, 0])
    ring.wait(0)
    with pytest.raises(PipelineError, match=r"buffer 0: written before the writers "
                       r"synchronised with the lead thread's cp.async.bulk.wait_group.read"):
        ring.write(0)
    ring.sync(1, 128)
    ring.write(0)


def test_ring_lead_only_store_needs_fence_then_sync() -> None:
    k = _kernel()
    ring = EpilogueRing(k, "r", [k.reg("u32")], k.reg("pred"), lead_only=True)
    ring.write(0)
    ring.sync(1, 128)
    with pytest.raises(PipelineError, match=r"buffer 0: stored before its writes were fenced"):
        ring.store(0, k.reg("u64"), [0, 0])
    ring.fence()
    with pytest.raises(PipelineError, match=r"buffer 0: stored before its writes were fenced"):
        ring.store(0, k.reg("u64"), [0, 0])  # fenced but not synchronised
    ring.sync(1, 128)
    ring.store(0, k.reg("u64"), [0, 0])


def test_strided_ring_addresses_and_lazy_coords() -> None:
    mod = Module("sm_90a")
    k = mod.kernel("t")
    base = k.reg("u32")
    ring = EpilogueRing.strided(k, "r", base, 8192, 2, k.reg("pred"))
    a1 = ring.address(1)  # add.u32 a1, base, 8192 (emitted now)
    assert ring.write(1) is a1
    cx = k.reg("u32")
    ring.store(1, k.reg("u64"), lambda: [cx, 0])
    text = mod.emit()
    assert f"add.u32 {a1}, {base}, 8192;" in text
    # the coordinates are evaluated inside the lead thread's branch, before the store
    assert text.index("@!") < text.index("cp.async.bulk.tensor")


def test_ring_stores_in_one_group_and_a_lead_section() -> None:
    """Several stores committed as one bulk group (the attention's O chunks) inside one
    lead branch: a wait keeping that group pending keeps all its buffers busy."""
    mod = Module("sm_90a")
    k = mod.kernel("t")
    go = k.reg("pred")
    ring = EpilogueRing.at_offsets(k, "r", k.reg("u32"), [0, 4096, 8192], None,
                                   lead_only=True)
    for b in (0, 1, 2):
        ring.write(b)
    ring.fence()
    ring.sync(3, 128)
    with ring.lead_section(go, "no_o_store"):
        for b in (0, 1):
            ring.address(b)
            ring.store(b, k.reg("u64"), [0, 0], commit=False)
        with pytest.raises(PipelineError, match=r"buffer 1: written while its TMA store, not "
                           r"yet committed, may still read it"):
            ring.state.write(1)
        ring.commit()
        ring.wait(1)
    ring.sync(3, 128)
    with pytest.raises(PipelineError, match=r"buffer 1: written while its previous TMA store "
                       r"may still read it: the last cp.async.bulk.wait_group.read 1 left 1 "
                       r"store group in flight, 0 newer"):
        ring.write(1)
    text = mod.emit()
    assert text.count("@!") == 1 and text.count("cp.async.bulk.commit_group") == 1


def test_pingpong_demo_assembles() -> None:
    """Two consumer warpgroups on alternate tiles, one release per stage, ordered by named
    barriers 3 and 4 (bar.sync / bar.arrive over both warpgroups' 256 threads)."""
    ptx = build_pipeline_demo(consumers=2, schedule="pingpong", chunks=2).emit()
    assert "bar.sync %r" in ptx and "bar.arrive %r" in ptx and ", 256;" in ptx
    assert ptx.count("mbarrier.init.shared::cta.b64") == 6
    res = assemble(ptx, "sm_90a")
    assert res.kernel("pipeline_demo").spills == 0 and not res.warnings


def test_pingpong_with_two_arrivals_is_refused() -> None:
    with pytest.raises(PipelineError, match="stage reused before its consumer release"):
        build_pipeline_demo(consumers=2, schedule="pingpong", empty_arrivals=2)
