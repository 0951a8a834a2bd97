"""Grouped GEMM with the group table built on the GPU (issue 27: MoE without a host
synchronisation) on an sm_90 GPU: device offsets and masked counts, against float64 with
NaN-poisoned outputs; the table's tile counts against the Python reference and its tensor
maps against the driver's own encoding; no host synchronisation; CUDA-graph capture whose
replays follow new offsets written on the device; bad offsets clamped and flagged."""

from __future__ import annotations

import dataclasses
import random
import re

import pytest

from tests.gpu.test_grouped_gemm_fp8_gpu import MODES
from tests.gpu.test_grouped_gemm_fp8_gpu import _check as _check_fp8
from tests.gpu.test_grouped_gemm_fp8_gpu import _inputs as _fp8_inputs
from tests.gpu.test_grouped_gemm_gpu import _check_groups

pytestmark = pytest.mark.gpu

torch = pytest.importorskip("torch")


def _require_sm90() -> None:
    if not torch.cuda.is_available() or torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("grouped_gemm runs on the SM90 kernel (an sm_90 GPU)")


def _ends(sizes: list[int]) -> list[int]:
    return [sum(sizes[: i + 1]) for i in range(len(sizes))]


def _offs(ends: list[int]) -> object:
    return torch.tensor(ends, dtype=torch.int32, device="cuda")


def _bf16(total: int, g: int, n: int, k: int, kmajor: bool = False, seed: int = 0):
    gen = torch.Generator(device="cuda").manual_seed(seed)
    a = torch.randn(total, k, device="cuda", generator=gen).to(torch.bfloat16)
    if kmajor:
        b = torch.randn(g, n, k, device="cuda", generator=gen).to(torch.bfloat16).transpose(1, 2)
    else:
        b = torch.randn(g, k, n, device="cuda", generator=gen).to(torch.bfloat16)
    return a, b


def _device_entry(ng: object) -> tuple:
    """The (launcher, packed, keep) of the one device-table call in the call cache."""
    hits = [v for key, v in ng.CACHES.grouped_calls.items() if key[0] == "device"]
    assert len(hits) == 1, len(hits)
    return hits[0]


def test_table_matches_reference_and_driver_maps() -> None:
    """The table the GPU wrote: tile_ends equal the Python reference; each non-empty group's
    A, B and D maps are byte for byte what cuTensorMapEncodeTiled gives for that group."""
    _require_sm90()
    import nvatom
    import nvatom.gemm as ng
    from nvatom.gemm_providers import _grouped_symbols, grouped_device_plan
    from nvatom.kernels.sm90.group_table import ENTRY_BYTES, reference_table
    from nvatom.runtime.gemm_recipe import _encode_tiled, evaluate_maps

    ng.clear_caches()
    sizes = [0, 300, 1, 0, 517, 129]
    g, n, k, tail = len(sizes), 264, 136, 11
    ends = _ends(sizes)
    a, b = _bf16(ends[-1] + tail, g, n, k)
    out = torch.full((a.shape[0], n), float("nan"), device="cuda", dtype=torch.bfloat16)
    nvatom.grouped_gemm(a, b, _offs(ends), out=out)
    torch.cuda.synchronize()
    _check_groups(a, b, ends, out)
    table = _device_entry(ng)[2][0].cpu().numpy().tobytes()
    plan = grouped_device_plan("bf16", "bf16", "N", a.shape[0], g, n, k, a.data_ptr(), k,
                               b.data_ptr(), b.stride(0) * 2, n, out.data_ptr(), n,
                               torch.cuda.get_device_properties(0).multi_processor_count)
    groups, tile_ends, bad = reference_table(ends, a.shape[0], False, plan.cfg.block_m,
                                             plan.tiles_n)
    assert not bad
    got_ends = [int.from_bytes(table[g * ENTRY_BYTES + 4 * i:][:4], "little")
                for i in range(g)]
    assert got_ends == tile_ends
    sym = _grouped_symbols(dataclasses.replace(plan.cfg, grouped=False),
                           torch.cuda.get_device_properties(0).multi_processor_count)
    for i, (start, m) in enumerate(groups):
        if not m:
            continue
        env = {"m": m, "n": n, "k": k, "lda": k, "ldb": n, "ldd": n,
               "a": a.data_ptr() + start * k * 2, "b": b.data_ptr() + i * b.stride(0) * 2,
               "out": out.data_ptr() + start * n * 2}
        want = b"".join(_encode_tiled(args) for args in evaluate_maps(sym, env))
        assert table[i * ENTRY_BYTES:(i + 1) * ENTRY_BYTES] == want, f"group {i}"


@pytest.mark.parametrize(("mode", "fast"), MODES, ids=lambda v: str(v))
def test_fp8_device_offsets(mode: str, fast: bool) -> None:
    """Every FP8 scale mode with offsets on the GPU (the table also writes the row ends
    that index the stacked rows' scales)."""
    _require_sm90()
    import nvatom

    sizes = [0, 200, 1, 128, 0, 517, 64, 0]
    n, k = 264, 384
    ends = _ends(sizes)
    a, b, sa, sb, ea, eb = _fp8_inputs(sizes, n, k, "e4m3", "e4m3", mode, seed=7)
    out = torch.full((a.shape[0], n), float("nan"), device="cuda", dtype=torch.bfloat16)
    nvatom.grouped_gemm(a, b, _offs(ends), out=out, scale_a=sa, scale_b=sb, fast_accum=fast)
    torch.cuda.synchronize()
    _check_fp8(out, a, b, ends, ea, eb)


def test_no_host_synchronisation() -> None:
    """The call returns while a long kernel queued before it still runs: nothing waited."""
    _require_sm90()
    import nvatom

    sizes = [100, 0, 700, 33]
    ends = _ends(sizes)
    a, b = _bf16(ends[-1], len(sizes), 256, 128)
    offs = _offs(ends)
    out = torch.full((ends[-1], 256), float("nan"), device="cuda", dtype=torch.bfloat16)
    nvatom.grouped_gemm(a, b, offs, out=out)  # planned and built once
    torch.cuda.synchronize()
    out.fill_(float("nan"))
    stream = torch.cuda.current_stream()
    torch.cuda._sleep(2_000_000_000)  # about a second of GPU time
    nvatom.grouped_gemm(a, b, offs, out=out)
    assert not stream.query(), "grouped_gemm waited for the GPU"
    torch.cuda.synchronize()
    _check_groups(a, b, ends, out)


@pytest.mark.parametrize("kind", ["bf16", "f16", "e4m3-tensor", "e4m3-row", "e4m3-block"])
def test_graph_replay_follows_new_offsets(kind: str) -> None:
    """Captured once; each replay after new offsets are written on the device (including
    empty groups and all rows in one group) computes the new grouping: bf16, f16 and e4m3
    with per-tensor, row-wise and block scales."""
    _require_sm90()
    import nvatom

    g, n, k, total = 6, 264, 256, 900
    fp8 = kind.startswith("e4m3")
    if fp8:
        a, b, sa, sb, ea, eb = _fp8_inputs([total - 29] + [0] * (g - 1), n, k, "e4m3", "e4m3",
                                           kind.split("-")[1], seed=3)
        kw = dict(scale_a=sa, scale_b=sb)
    else:
        a, b = _bf16(total, g, n, k, kmajor=True, seed=3)
        if kind == "f16":
            a, b = a.to(torch.float16), b.to(torch.float16)
        kw = {}
    rows = a.shape[0]
    splits = [[0, 300, 300, 450, 860, 871], [129, 129, 600, 601, 700, rows - 3],
              [0, 0, 0, 0, 0, rows], [rows] * g]
    offs = _offs(splits[0])
    out = torch.full((rows, n), float("nan"), device="cuda",
                     dtype=torch.float16 if kind == "f16" else torch.bfloat16)
    nvatom.grouped_gemm(a, b, offs, out=out, **kw)  # warm-up outside the capture
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        nvatom.grouped_gemm(a, b, offs, out=out, **kw)
    for ends in splits:
        offs.copy_(torch.tensor(ends, dtype=torch.int32))
        out.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        # (the checks' "rows past the last group are NaN" holds trivially with no tail)
        if fp8:
            _check_fp8(out, a, b, ends, ea, eb)
        else:
            _check_groups(a, b, ends, out)


def test_masked_layout_and_graph() -> None:
    """DeepGEMM's masked layout: rows past each group's count stay NaN; a captured call's
    replays follow new counts (0 and M_max included)."""
    _require_sm90()
    import nvatom

    g, m_max, n, k = 5, 200, 264, 136
    gen = torch.Generator(device="cuda").manual_seed(9)
    a = torch.randn(g, m_max, k, device="cuda", generator=gen).to(torch.bfloat16)
    b = torch.randn(g, n, k, device="cuda", generator=gen).to(torch.bfloat16).transpose(1, 2)
    out = torch.full((g, m_max, n), float("nan"), device="cuda", dtype=torch.bfloat16)

    def check(counts: list[int]) -> None:
        for i, c in enumerate(counts):
            if c:
                ref = a[i, :c].double() @ b[i].double()
                err = ((out[i, :c].double() - ref).norm() / ref.norm()).item()
                assert err < 5e-3, (counts, i, err)
            assert torch.isnan(out[i, c:]).all(), f"group {i}: rows past {c} written"

    counts = torch.tensor([3, 0, 200, 129, 1], dtype=torch.int32, device="cuda")
    nvatom.grouped_gemm_masked(a, b, counts, out=out)
    torch.cuda.synchronize()
    check([3, 0, 200, 129, 1])
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        nvatom.grouped_gemm_masked(a, b, counts, out=out)
    rng = random.Random(4)
    for new in ([0, 0, 0, 0, 0], [200] * 5, [rng.randrange(0, 201) for _ in range(5)]):
        counts.copy_(torch.tensor(new, dtype=torch.int32))
        out.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        check(new)


def test_repeated_calls_skip_the_checks_and_follow_device_counts(monkeypatch) -> None:
    """A call repeated with the same tensors (``out`` given) is served by the unchecked call
    cache -- no check runs (they are made to fail after the first call) -- and still
    computes the grouping the GPU holds now: counts / offsets rewritten on the device between
    the calls are followed (masked layout and device offsets)."""
    _require_sm90()
    import nvatom
    import nvatom.gemm as ng

    ng.clear_caches()
    g, m_max, n, k = 3, 160, 264, 136
    gen = torch.Generator(device="cuda").manual_seed(11)
    a = torch.randn(g, m_max, k, device="cuda", generator=gen).to(torch.bfloat16)
    b = torch.randn(g, n, k, device="cuda", generator=gen).to(torch.bfloat16).transpose(1, 2)
    out = torch.full((g, m_max, n), float("nan"), device="cuda", dtype=torch.bfloat16)
    counts = torch.tensor([5, 160, 0], dtype=torch.int32, device="cuda")
    flat_a, flat_out = a.view(g * m_max, k), out.view(g * m_max, n)
    offs = _offs([100, 300, 480])
    nvatom.grouped_gemm_masked(a, b, counts, out=out)
    nvatom.grouped_gemm(flat_a, b, offs, out=flat_out)
    torch.cuda.synchronize()
    assert len(ng.CACHES.grouped_fast) == 2

    def no_checks(*args, **kw):
        raise AssertionError("a cached call ran the checks")

    monkeypatch.setattr(ng, "check_matrix", no_checks)
    new_counts, new_ends = [160, 1, 77], [0, 250, 480]
    counts.copy_(torch.tensor(new_counts, dtype=torch.int32))
    offs.copy_(torch.tensor(new_ends, dtype=torch.int32))
    out.fill_(float("nan"))
    nvatom.grouped_gemm_masked(a, b, counts, out=out)
    torch.cuda.synchronize()
    for i, c in enumerate(new_counts):
        ref = a[i, :c].double() @ b[i].double()
        err = ((out[i, :c].double() - ref).norm() / ref.norm()).item()
        assert err < 5e-3, (i, err)
        assert torch.isnan(out[i, c:]).all(), f"group {i}: rows past {c} written"
    flat_out.fill_(float("nan"))
    nvatom.grouped_gemm(flat_a, b, offs, out=flat_out)
    torch.cuda.synchronize()
    monkeypatch.undo()
    _check_groups(flat_a, b, new_ends, flat_out)
    ng.clear_caches()


def test_bad_offsets_are_clamped_and_flagged() -> None:
    """Offsets the host never sees: decreasing, negative, past total_M.  The GEMM computes
    the clamped grouping (nothing outside the tensors is touched), and status[0] is 1; good
    offsets leave it 0."""
    _require_sm90()
    import nvatom
    from nvatom.kernels.sm90.group_table import reference_table

    total, n, k = 1000, 264, 136
    a, b = _bf16(total, 4, n, k, seed=5)
    for raw, flagged in (([100, 50, -7, 5000], True), ([100, 100, 700, 1000], False)):
        status = torch.zeros(1, dtype=torch.int32, device="cuda")
        out = torch.full((total, n), float("nan"), device="cuda", dtype=torch.bfloat16)
        nvatom.grouped_gemm(a, b, _offs(raw), out=out, status=status)
        torch.cuda.synchronize()
        assert int(status[0]) == int(flagged), raw
        groups, _, bad = reference_table(raw, total, False, 128, 1)
        assert bad is flagged
        _check_groups(a, b, [s + m for s, m in groups], out)
    status = torch.zeros(1, dtype=torch.int32, device="cuda")
    am = torch.randn(2, 64, k, device="cuda").to(torch.bfloat16)
    bm = torch.randn(2, k, n, device="cuda").to(torch.bfloat16)
    out = torch.full((2, 64, n), float("nan"), device="cuda", dtype=torch.bfloat16)
    nvatom.grouped_gemm_masked(am, bm, _offs([65, -1]), out=out, status=status)
    torch.cuda.synchronize()
    assert int(status[0]) == 1
    ref = am[0].double() @ bm[0].double()  # 65 clamped to M_max = 64; -1 to 0
    assert ((out[0].double() - ref).norm() / ref.norm()).item() < 5e-3
    assert torch.isnan(out[1]).all()


@pytest.mark.parametrize(("offs", "status", "msg"), [
    (lambda: torch.tensor([1, 2], dtype=torch.int64, device="cuda"), None, "dtype int64"),
    (lambda: torch.tensor([1, 2, 3], dtype=torch.int32, device="cuda"), None, "shape (3,)"),
    (lambda: torch.tensor([[1, 2]], dtype=torch.int32, device="cuda"), None, "shape (1, 2)"),
    (lambda: torch.tensor([1, 2, 3, 4], dtype=torch.int32, device="cuda")[::2], None,
     "stride 2"),
    (lambda: torch.tensor([1, 2], dtype=torch.int32, device="cuda"),
     lambda: torch.zeros(1, dtype=torch.int64, device="cuda"), "status is int64"),
    (lambda: torch.tensor([1, 2], dtype=torch.int32, device="cuda"), lambda: [0],
     "status is a list"),
])
def test_device_offsets_refused_on_the_host(offs, status, msg: str) -> None:
    _require_sm90()
    import nvatom
    from nvatom.gemm import GemmError

    a, b = _bf16(64, 2, 64, 64)
    with pytest.raises(GemmError, match=re.escape(msg)):
        nvatom.grouped_gemm(a, b, offs(), status=None if status is None else status())


@pytest.mark.parametrize(("mode", "fast"), MODES, ids=lambda v: str(v))
def test_masked_fp8(mode: str, fast: bool) -> None:
    """The masked layout in FP8: A's scales as (G, M_max) rows (row-wise (G, M_max), block
    (G, M_max, ceil(K/128))), B's as grouped_gemm's; rows past each count stay NaN."""
    _require_sm90()
    import nvatom

    g, m_max, n, k = 4, 192, 264, 384
    counts = [0, 192, 77, 1]
    gen = torch.Generator(device="cuda").manual_seed(21)
    a = (torch.randn(g, m_max, k, device="cuda", generator=gen) * 0.5).to(torch.float8_e4m3fn)
    w = (torch.randn(g, n, k, device="cuda", generator=gen) * 0.5).to(torch.float8_e4m3fn)
    b = w.transpose(1, 2)
    kb, nb = -(-k // 128), -(-n // 128)

    def rnd(*shape):
        return torch.rand(*shape, device="cuda", generator=gen) + 0.25

    if mode == "tensor":
        sa, sb = rnd(()), rnd(g)
        ea = sa.double().expand(g, m_max, k)
        eb = sb.double().view(g, 1, 1).expand(g, k, n)
    elif mode == "row":
        sa, sb = rnd(g, m_max), rnd(g, n)
        ea = sa.double()[:, :, None].expand(g, m_max, k)
        eb = sb.double()[:, None, :].expand(g, k, n)
    else:
        sa, sb = rnd(g, m_max, kb), rnd(g, nb, kb).transpose(1, 2)
        ea = sa.double().repeat_interleave(128, 2)[:, :, :k]
        eb = sb.double().repeat_interleave(128, 1)[:, :k].repeat_interleave(128, 2)[:, :, :n]
    out = torch.full((g, m_max, n), float("nan"), device="cuda", dtype=torch.bfloat16)
    nvatom.grouped_gemm_masked(a, b, _offs(counts), out=out, scale_a=sa, scale_b=sb,
                               fast_accum=fast)
    torch.cuda.synchronize()
    for i, c in enumerate(counts):
        if c:
            ref = (a[i, :c].double() * ea[i, :c]) @ (b[i].double() * eb[i])
            err = ((out[i, :c].double() - ref).norm() / ref.norm()).item()
            assert err < 6e-3, (mode, i, err)
        assert torch.isnan(out[i, c:]).all(), f"group {i}: rows past {c} written"
