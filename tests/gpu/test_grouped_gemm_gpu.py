"""``nvatom.grouped_gemm`` (one persistent launch over MoE groups) on an sm_90 GPU against float64.

Random group sizes including empty groups and ragged ones (not a multiple of the 128-row tile),
bf16 and f16, B row-major and K-major per group, f32 output, offsets as a list and as a CUDA
int32 tensor; the output is poisoned with NaN first: every row of a group must be written
correctly and the rows past the last offset must stay untouched (so no tile of one group
writes into another's rows)."""

from __future__ import annotations

import random

import pytest

pytestmark = pytest.mark.gpu

torch = pytest.importorskip("torch")


def _require_sm90() -> None:
    if not torch.cuda.is_available() or torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("grouped_gemm runs on the SM90 kernel (an sm_90 GPU)")


def _check_groups(a, b, ends: list[int], out, tol: float = 5e-3) -> None:
    """Rows ``ends[i-1]:ends[i]`` of ``out`` hold group ``i``'s product ``a @ b[i]`` (every
    row written, relative error against float64 below ``tol``) and the rows past the last
    group keep their NaN poison."""
    start = 0
    for i, end in enumerate(ends):
        if end > start:
            ref = a[start:end].double() @ b[i].double()
            got = out[start:end].double()
            assert not torch.isnan(got).any(), f"group {i} of {ends}: unwritten rows"
            err = ((got - ref).norm() / ref.norm()).item()
            assert err < tol, (ends, i, err)
        start = end
    assert torch.isnan(out[ends[-1]:]).all(), "rows past the last group were written"


CASES = [
    # (sizes, N, K, dtype, b K-major, out dtype)
    ([0, 200, 1, 128, 0, 517, 64, 0], 264, 136, torch.bfloat16, False, None),
    ([300, 0, 0, 1000], 512, 1024, torch.float16, True, None),
    ([17] * 5 + [0] * 3 + [257], 136, 264, torch.bfloat16, True, torch.float32),
]


@pytest.mark.parametrize("case", range(len(CASES)))
@pytest.mark.parametrize("cuda_offsets", [False, True])
def test_grouped_gemm_against_float64(case: int, cuda_offsets: bool) -> None:
    _require_sm90()
    import nvatom

    sizes, n, k, dt, kmajor, odt = CASES[case]
    g = len(sizes)
    tail = 37  # rows past the last group: never written
    total = sum(sizes) + tail
    a = torch.randn(total, k, device="cuda").to(dt)
    if kmajor:
        b = torch.randn(g, n, k, device="cuda").to(dt).transpose(1, 2)  # (G, K, N), K-major
    else:
        b = torch.randn(g, k, n, device="cuda").to(dt)
    ends = [sum(sizes[: i + 1]) for i in range(g)]
    offs = torch.tensor(ends, dtype=torch.int32, device="cuda") if cuda_offsets else ends
    out = torch.full((total, n), float("nan"), device="cuda", dtype=odt or dt)
    nvatom.grouped_gemm(a, b, offs, out=out)
    torch.cuda.synchronize()
    _check_groups(a, b, ends, out, 1e-5 if odt is torch.float32 else 5e-3)


def test_grouped_gemm_many_experts_fresh_output() -> None:
    _require_sm90()
    import nvatom

    rng = random.Random(3)
    g, n, k = 64, 256, 512
    sizes = [rng.choice([0, 0, 1, 5, 64, 129, 300]) for _ in range(g)]
    ends = [sum(sizes[: i + 1]) for i in range(g)]
    a = torch.randn(ends[-1], k, device="cuda").to(torch.bfloat16)
    b = torch.randn(g, k, n, device="cuda").to(torch.bfloat16)
    out = nvatom.grouped_gemm(a, b, torch.tensor(ends, dtype=torch.int32))
    ref = torch.cat([a[(ends[i - 1] if i else 0):ends[i]].double() @ b[i].double()
                     for i in range(g)])
    assert not torch.isnan(out).any()
    assert ((out.double() - ref).norm() / ref.norm()).item() < 5e-3


@pytest.mark.parametrize("sched", ["scan", "resume", "prefetch", "late"])
def test_grouped_gemm_every_group_schedule(sched: str) -> None:
    """Each way a tile finds its group (``GemmSm90Config.group_sched``) on ragged and empty
    groups, more tiles than SMs (so CTAs cross groups, and resume their walk), NaN-poisoned."""
    _require_sm90()
    import nvatom
    import nvatom.gemm as ng

    rng = random.Random(11)
    sizes = [rng.choice([0, 1, 127, 129, 300, 700]) for _ in range(40)] + [0, 0]
    n, k = 520, 264  # ragged N: 3 column tiles of 256
    g = len(sizes)
    ends = [sum(sizes[: i + 1]) for i in range(g)]
    tail = 5
    a = torch.randn(ends[-1] + tail, k, device="cuda").to(torch.bfloat16)
    b = torch.randn(g, k, n, device="cuda").to(torch.bfloat16)
    out = torch.full((ends[-1] + tail, n), float("nan"), device="cuda", dtype=torch.bfloat16)
    with ng.grouped_variant(group_sched=sched):
        nvatom.grouped_gemm(a, b, ends, out=out)
    torch.cuda.synchronize()
    _check_groups(a, b, ends, out)


def test_grouped_gemm_call_cache_follows_offsets() -> None:
    """The call cache (``out`` given: no checks on a hit) runs again on a poisoned output, and
    new offset values with the same tensors (a list, then a CPU tensor) are planned anew."""
    _require_sm90()
    import importlib

    import nvatom

    ng = importlib.import_module("nvatom.gemm")
    g, n, k = 6, 264, 136
    a = torch.randn(900, k, device="cuda").to(torch.bfloat16)
    b = torch.randn(g, k, n, device="cuda").to(torch.bfloat16)
    out = torch.empty(900, n, device="cuda", dtype=torch.bfloat16)
    splits = [[0, 300, 300, 450, 899, 899], [129, 129, 600, 601, 700, 900],
              [0, 0, 0, 0, 0, 900]]
    for ends in splits + splits[:1]:
        for offs in (ends, torch.tensor(ends, dtype=torch.int32)):
            for _ in range(2):  # the second call is a call-cache hit
                out.fill_(float("nan"))
                nvatom.grouped_gemm(a, b, offs, out=out)
                torch.cuda.synchronize()
                _check_groups(a, b, ends, out)
    assert len(ng.CACHES.grouped_fast) >= 2 * len(splits)
