"""The 16-bit consumer schedule chosen by shape (``nvatom.kernels.sm90.tuning.SCHEDULE_RULES``)
on an sm_90 GPU: ``nvatom.grouped_gemm`` and ``nvatom.gemm`` on shapes where the rule picks
ping-pong and where it picks cooperative, against float64.

Fresh random inputs; ragged and empty groups; outputs poisoned with NaN first (every row of
a group written, the rows past the last group untouched); the reference is the float64
product of the exactly representable inputs.  Which schedule a shape gets is the CPU test's
business (tests/runtime/test_gemm_schedule_rule.py); here it is checked, from the rule's
stated thresholds, that both kinds of shape are among those computed."""

from __future__ import annotations

import random

import pytest

from nvatom.kernels.sm90.tuning import grouped_schedule, plain_schedule

pytestmark = pytest.mark.gpu

torch = pytest.importorskip("torch")


def _require_sm90() -> None:
    if not torch.cuda.is_available() or torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("the schedule rule's kernels run on an sm_90 GPU")


GROUPED = [
    # (sizes, N, K, dtype, b K-major, out dtype); the rule's pick in the comment
    ([0, 700, 1, 1500, 0, 129, 2048, 300], 520, 776, torch.bfloat16, False, None),  # pp192
    ([600, 0, 1030, 257], 264, 4104, torch.bfloat16, False, None),                 # pp192
    ([0, 100, 3, 511, 0, 64], 136, 264, torch.float16, False, None),  # cooperative (rows)
    ([900] * 3 + [0] + [1100] * 3, 1000, 1024, torch.float16, False, None),        # pp192
    ([700] * 9 + [0, 5], 392, 520, torch.bfloat16, False, None),   # cooperative (10 groups)
    ([900] * 3 + [0] + [1100] * 3, 1000, 1024, torch.float16, True, None),  # coop (K-major)
    ([600, 0, 1030, 257], 264, 4104, torch.bfloat16, False, torch.float32),  # coop (f32)
]


@pytest.mark.parametrize("case", range(len(GROUPED)))
def test_grouped_gemm_on_the_rules_schedule(case: int) -> None:
    _require_sm90()
    import nvatom

    sizes, n, k, dt, kmajor, odt = GROUPED[case]
    g = len(sizes)
    ends = [sum(sizes[: i + 1]) for i in range(g)]
    live = [s for s in sizes if s]
    # the stated thresholds: at most 8 groups, K <= 8192, 512 rows a group on average, a
    # 16-bit output and a row-major B
    ok = (len(live) <= 8 and k <= 8192 and sum(live) / len(live) >= 512 and odt is None
          and not kmajor)
    types = ("bf16", "f32" if odt is torch.float32 else "bf16", "K" if kmajor else "N")
    assert grouped_schedule(types, ends, n, k) == ("pingpong192" if ok else "cooperative")
    tail = 9
    a = torch.randn(ends[-1] + tail, k, device="cuda").to(dt)
    b = (torch.randn(g, n, k, device="cuda").to(dt).transpose(1, 2) if kmajor else
         torch.randn(g, k, n, device="cuda").to(dt))
    out = torch.full((ends[-1] + tail, n), float("nan"), device="cuda", dtype=odt or dt)
    nvatom.grouped_gemm(a, b, ends, out=out)
    torch.cuda.synchronize()
    from tests.gpu.test_grouped_gemm_gpu import _check_groups

    _check_groups(a, b, ends, out, 1e-5 if odt is torch.float32 else 5e-3)


def test_both_picks_are_covered() -> None:
    picks = set()
    for sizes, n, k, _, kmajor, odt in GROUPED:
        ends = [sum(sizes[: i + 1]) for i in range(len(sizes))]
        types = ("bf16", "f32" if odt is torch.float32 else "bf16", "K" if kmajor else "N")
        picks.add(grouped_schedule(types, ends, n, k))
    assert picks == {"pingpong192", "cooperative"}


@pytest.mark.parametrize(("m", "n", "k", "want"), [
    (9000, 8200, 264, "pingpong192"),    # 71 x 43 tiles: 24 waves (128 x 128: > 4608 tiles)
    (2000, 1000, 4160, "pingpong"),      # 16 x 8 = 128 tiles: one wave
    (3000, 2056, 1000, "pingpong192"),   # 24 x 11 tiles: 2 waves (128 x 128: 4)
    (33792, 4096, 256, "cooperative"),   # 264 x 16 = 4224 tiles: 32 whole waves
])
def test_nvatom_gemm_on_the_rules_schedule(m: int, n: int, k: int, want: str) -> None:
    _require_sm90()
    import nvatom
    from nvatom.gemm import explain
    from nvatom.kernels.sm90.launch import default_config

    assert plain_schedule(m, n, 132) == want  # an H100's 132 SMs (the comments' waves)
    a = torch.randn(m, k, device="cuda").to(torch.bfloat16)
    b = torch.randn(k, n, device="cuda").to(torch.bfloat16)
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    kernel = default_config("bf16", schedule=plain_schedule(m, n, sms)).name
    assert explain(a, b).launch.source.name == kernel
    out = torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
    for _ in range(2):  # the planned call, then the call-cached one
        out.fill_(float("nan"))
        nvatom.gemm(a, b, out=out)
        torch.cuda.synchronize()
        assert not torch.isnan(out).any()
        rows = sorted({*random.Random(m).sample(range(m), min(m, 384)), m - 1})
        idx = torch.tensor(rows, device="cuda")
        ref = a[idx].double() @ b.double()
        got = out[idx].double()
        assert float((got - ref).norm() / ref.norm()) < 5e-3
