"""The SM90 GEMM kernel on an sm_90 GPU against torch in float64.

Every dtype combination offered (bf16/f16 inputs with bf16/f16/f32 output, e4m3 x e4m3 with
per-tensor scales and bf16 output), both B majors, the 2-CTA multicast cluster, the
non-persistent grid, one consumer warpgroup and the ping-pong schedule, on random shapes
including ragged (not a multiple of any tile) and skinny ones (M = 1, N = 8, K = 8).
Fresh random inputs per case; the output is poisoned with NaN first, so an element the
kernel does not write fails; the reference is the float64 product of the exactly
representable inputs."""

from __future__ import annotations

import pytest

from nvatom.gemm_providers import prepare_gemm_sm90, run_gemm_sm90
from nvatom.kernels.sm90.config import GemmSm90Config, GemmSm90Error

pytestmark = pytest.mark.gpu

torch = pytest.importorskip("torch")


def _require_sm90() -> None:
    if not torch.cuda.is_available() or torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("the SM90 GEMM needs an sm_90 (Hopper) GPU")


_T = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32,
      "e4m3": torch.float8_e4m3fn}

CONFIGS = {
    "bf16-bf16": GemmSm90Config(),
    "bf16-bf16-Kmajor": GemmSm90Config(b_major="K"),
    "bf16-f16": GemmSm90Config(out_dtype="f16"),
    "bf16-f32": GemmSm90Config(out_dtype="f32", stages=3),
    "f16-f16": GemmSm90Config(in_dtype="f16", out_dtype="f16"),
    "f16-bf16": GemmSm90Config(in_dtype="f16", out_dtype="bf16"),
    "f16-f32": GemmSm90Config(in_dtype="f16", out_dtype="f32", stages=3, b_major="K"),
    "e4m3-bf16": GemmSm90Config(in_dtype="e4m3", b_major="K"),
    "bf16-cluster2": GemmSm90Config(cluster_m=2),
    "bf16-cluster2-K": GemmSm90Config(cluster_m=2, b_major="K"),
    "e4m3-cluster2": GemmSm90Config(in_dtype="e4m3", b_major="K", cluster_m=2),
    "bf16-nonpersistent": GemmSm90Config(persistent=False, wgmma_inflight=0),
    "bf16-1consumer": GemmSm90Config(consumers=1, block_n=128, stages=6),
    # the ping-pong schedule: each consumer warpgroup its own 128 x 128 tile
    "bf16-pingpong": GemmSm90Config(schedule="pingpong", block_n=128, stages=6),
    "bf16-pingpong-K-w0": GemmSm90Config(schedule="pingpong", block_n=128, stages=6,
                                         b_major="K", wgmma_inflight=0),
    "f16-f32-pingpong": GemmSm90Config(in_dtype="f16", out_dtype="f32", stages=5,
                                       schedule="pingpong", block_n=128),
    "e4m3-pingpong-fast": GemmSm90Config(in_dtype="e4m3", b_major="K", schedule="pingpong",
                                         block_n=128, stages=6),
    # ping-pong 128 x 192 per warpgroup (the plain 16-bit choice at 8192^3; odd chunk count)
    "bf16-pingpong192": GemmSm90Config(schedule="pingpong", block_n=192, stages=4),
    "f16-f32-pingpong192-K": GemmSm90Config(in_dtype="f16", out_dtype="f32", b_major="K",
                                            schedule="pingpong", block_n=192, stages=4),
}

# (M, N, K): tile-aligned, ragged in every dimension, skinny, K below one K block.
SHAPES = [(128, 256, 64), (256, 512, 1024), (129, 264, 72), (1, 8, 16), (1, 4096, 2048),
          (4096, 8, 1024), (7, 1000, 16), (333, 776, 528), (2048, 2048, 16),
          (640, 1536, 2064), (3000, 3000, 64)]


def _operands(cfg: GemmSm90Config, m: int, n: int, k: int, gen):
    dev = "cuda"
    if cfg.in_dtype == "e4m3":
        a = (torch.randn(m, k, device=dev, generator=gen) * 2).to(torch.float8_e4m3fn)
        b = (torch.randn(n, k, device=dev, generator=gen) * 2).to(torch.float8_e4m3fn).t()
        sa = (torch.rand((), device=dev, generator=gen) + 0.5).float()
        sb = (torch.rand((), device=dev, generator=gen) + 0.5).float()
        return a, b, sa, sb
    dt = _T[cfg.in_dtype]
    a = torch.randn(m, k, device=dev, generator=gen).to(dt)
    if cfg.b_major == "MN":
        b = torch.randn(k, n, device=dev, generator=gen).to(dt)
    else:
        b = torch.randn(n, k, device=dev, generator=gen).to(dt).t()
    return a, b, None, None


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("name", list(CONFIGS))
def test_gemm_against_float64(name: str, shape: tuple[int, int, int]) -> None:
    _require_sm90()
    cfg = CONFIGS[name]
    m, n, k = shape
    gen = torch.Generator(device="cuda")
    gen.seed()  # fresh inputs every run
    a, b, sa, sb = _operands(cfg, m, n, k, gen)
    out = torch.full((m, n), float("nan"), device="cuda", dtype=_T[cfg.out_dtype])
    if k * cfg.in_bytes % 16:  # TMA's 16-byte row pitch rule: refused before any launch
        with pytest.raises(GemmSm90Error, match=f"K = {k}: a row of A"):
            prepare_gemm_sm90(a, b, out, cfg, sa, sb)
        return
    prepare_gemm_sm90(a, b, out, cfg, sa, sb)()
    torch.cuda.synchronize()
    ref = a.double() @ b.double()
    if sa is not None:
        ref = ref * (sa.double() * sb.double())
    assert not torch.isnan(out).any(), "elements left unwritten (NaN poison)"
    err = float((out.double() - ref).norm() / ref.norm())
    # f32 output: f32 accumulation of exact products; 16-bit output: one rounding (2^-8)
    tol = 1e-5 if cfg.out_dtype == "f32" else 8e-3
    assert err < tol, (name, shape, err)


def test_torch_rejects_mismatches() -> None:
    _require_sm90()
    cfg = GemmSm90Config()
    a = torch.randn(64, 64, device="cuda").bfloat16()
    b = torch.randn(64, 64, device="cuda").bfloat16()
    out = torch.empty(64, 64, device="cuda", dtype=torch.bfloat16)
    with pytest.raises(GemmSm90Error, match="the config wants a MN-major b"):
        prepare_gemm_sm90(a, b.t(), out, cfg)
    with pytest.raises(GemmSm90Error, match="is torch.float16, the config wants"):
        prepare_gemm_sm90(a, b, out.half(), cfg)
    with pytest.raises(GemmSm90Error, match="do not match"):
        prepare_gemm_sm90(a, b[:32], out, cfg)


@pytest.mark.parametrize(("ind", "outd", "b_col_major"), [
    ("bf16", "bf16", False), ("bf16", "bf16", True), ("f16", "f32", False),
    ("e4m3", "bf16", True),
])
def test_run_gemm_sm90_defaults(ind: str, outd: str, b_col_major: bool) -> None:
    """The entry the dispatcher calls: config chosen from the tensors (default_config)."""
    _require_sm90()
    m, n, k = 517, 392, 1040
    a = torch.randn(m, k, device="cuda")
    b = torch.randn(n, k, device="cuda").t() if b_col_major else \
        torch.randn(k, n, device="cuda")
    a, b = a.to(_T[ind]), b.to(_T[ind])
    out = torch.full((m, n), float("nan"), device="cuda", dtype=_T[outd])
    sa = sb = None
    if ind == "e4m3":
        sa = torch.tensor(0.75, device="cuda")
        sb = torch.tensor(1.25, device="cuda")
    run_gemm_sm90(a, b, out, scale_a=sa, scale_b=sb)
    torch.cuda.synchronize()
    ref = a.double() @ b.double()
    if sa is not None:
        ref = ref * (0.75 * 1.25)
    assert not torch.isnan(out).any()
    err = float((out.double() - ref).norm() / ref.norm())
    assert err < (1e-5 if outd == "f32" else 8e-3), err


@pytest.mark.parametrize(("outd", "b_col_major", "pad"), [
    ("bf16", False, 0), ("f32", True, 0), ("f16", False, 64),
])
def test_nvatom_gemm_dispatches_here(outd: str, b_col_major: bool, pad: int) -> None:
    """``nvatom.gemm`` on an sm_90 GPU runs this kernel (through nvatom.runtime.launch, tensor
    maps passed by value), including operands with leading dimensions wider than a row."""
    _require_sm90()
    import nvatom
    from nvatom.gemm import check_operands, plan

    m, n, k = 300, 520, 776
    ind = "f16" if outd == "f16" else "bf16"
    a = torch.randn(m, k + pad, device="cuda").to(_T[ind])[:, :k]
    b = (torch.randn(n, k, device="cuda").t() if b_col_major else
         torch.randn(k, n + pad, device="cuda")[:, :n]).to(_T[ind])
    out = torch.full((m, n), float("nan"), device="cuda", dtype=_T[outd])
    problem = check_operands(a, b, out)[3]
    assert plan(problem, (9, 0))[0].provider == "sm90"
    nvatom.gemm(a, b, out)
    torch.cuda.synchronize()
    ref = a.double() @ b.double()
    assert not torch.isnan(out).any()
    err = float((out.double() - ref).norm() / ref.norm())
    assert err < (1e-5 if outd == "f32" else 8e-3), err


@pytest.mark.parametrize("b_col_major", [False, True], ids=["Bkn", "Bnk"])
def test_grouped_pingpong_against_float64(b_col_major: bool) -> None:
    """``nvatom.grouped_gemm`` planned on the ping-pong kernel (``grouped_plan(config=)``):
    ragged and empty groups, more tiles than SMs, NaN-poisoned output with rows past the
    last group that must stay untouched."""
    _require_sm90()
    import importlib

    import nvatom

    ng = importlib.import_module("nvatom.gemm")

    sizes = [0, 300, 1, 0, 2048, 777, 129, 0, 1500, 64]
    n, k, g = 520, 776, len(sizes)
    ends = [sum(sizes[:i + 1]) for i in range(g)]
    total = ends[-1]
    a = torch.randn(total + 8, k, device="cuda").bfloat16()
    b = (torch.randn(g, n, k, device="cuda").transpose(1, 2) if b_col_major else
         torch.randn(g, k, n, device="cuda")).bfloat16()
    out = torch.full((total + 8, n), float("nan"), device="cuda", dtype=torch.bfloat16)
    cfg = GemmSm90Config(schedule="pingpong", block_n=128, stages=6,
                         b_major="K" if b_col_major else "MN")
    with ng.grouped_variant(config=cfg) as calls:
        nvatom.grouped_gemm(a, b, ends, out=out)
        assert next(iter(calls.values()))  # planned (on the ping-pong kernel)
    torch.cuda.synchronize()
    from tests.gpu.test_grouped_gemm_gpu import _check_groups

    _check_groups(a, b, ends, out, 8e-3)  # every group's rows right, the tail untouched
