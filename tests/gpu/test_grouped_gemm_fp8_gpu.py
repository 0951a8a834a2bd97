"""``nvatom.grouped_gemm`` with FP8 operands (MoE layers in e4m3) on an sm_90 GPU against float64.

Every scaling mode the grouped kernel takes -- per-tensor (one ``scale_b`` for all experts or one
per expert), row-wise (``scale_a`` per stacked row, ``scale_b`` per expert and column, as
``torch._scaled_grouped_mm``) and DeepSeek-V3 block scales (per row and 128 K elements of A, per
expert and 128 x 128 block of B) -- promoted and fast accumulation, e4m3 and e4m3 x e5m2, on
ragged and empty groups (group sizes not a multiple of the 128-row tile, groups of one row,
empty groups first, in the middle and last), with more tiles than SMs in one case (so a CTA
runs tiles of several groups and its per-tile scale lookup changes group).

Reference: the decoded FP8 inputs (exact in float64) times the scales expanded to the
operands' shapes, multiplied in float64 per group.  The output is poisoned with NaN first:
every row of a group must be written, and the rows past the last group must keep their
poison.  Where ``torch._scaled_grouped_mm`` exists (row-wise scales), our relative error must
be within 1.25x of its error on the same inputs (both promote every 128 K elements)."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.gpu

torch = pytest.importorskip("torch")

_F8 = {"e4m3": torch.float8_e4m3fn, "e5m2": torch.float8_e5m2}


def _require_sm90() -> None:
    if not torch.cuda.is_available() or torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("grouped_gemm runs on the SM90 kernel (an sm_90 GPU)")


def _inputs(sizes, n, k, ta, tb, mode, seed, shared_b_scale=False):
    """A (stacked rows + a 29-row tail no group owns), B (G, K, N) K-major, the scales of
    ``mode`` and their expansions to A's (total_M, K) and B's (G, K, N) shapes."""
    gen = torch.Generator(device="cuda").manual_seed(seed)
    g = len(sizes)
    total = sum(sizes) + 29
    kb, nb = -(-k // 128), -(-n // 128)
    a = (torch.randn(total, k, device="cuda", generator=gen) * 0.5).to(_F8[ta])
    w = (torch.randn(g, n, k, device="cuda", generator=gen) * 0.5).to(_F8[tb])
    b = w.transpose(1, 2)  # (G, K, N), each b[g] K-major

    def rnd(*shape):
        return torch.rand(*shape, device="cuda", generator=gen) + 0.25

    if mode == "tensor":
        sa = rnd(())
        sb = rnd(()) if shared_b_scale else rnd(g)
        ea = sa.double().expand(total, k)
        eb = (sb.double().expand(g) if sb.dim() == 0 else sb.double()).view(g, 1, 1)
        eb = eb.expand(g, k, n)
    elif mode == "row":
        sa, sb = rnd(total), rnd(g, n)
        ea = sa.double()[:, None].expand(total, k)
        eb = sb.double()[:, None, :].expand(g, k, n)
    else:  # block: scale_b (G, Kb, Nb), each group's K-major (DeepSeek's w_scale (Nb, Kb).t())
        sa = rnd(total, kb)
        w_scale = rnd(g, nb, kb)
        sb = w_scale.transpose(1, 2)
        ea = sa.double().repeat_interleave(128, 1)[:, :k]
        eb = sb.double().repeat_interleave(128, 1)[:, :k].repeat_interleave(128, 2)[:, :, :n]
    return a, b, sa, sb, ea, eb


def _check(out, a, b, ends, ea, eb, tol=6e-3) -> float:
    """Each group's rows against float64; the tail untouched; returns the worst relative error."""
    ad = a.double() * ea
    worst, start = 0.0, 0
    for i, end in enumerate(ends):
        if end > start:
            ref = ad[start:end] @ (b[i].double() * eb[i])
            got = out[start:end].double()
            assert not torch.isnan(got).any(), f"group {i} of {ends}: unwritten rows"
            err = ((got - ref).norm() / ref.norm()).item()
            assert err < tol, (ends, i, err)  # bf16 output rounding (2^-9) dominates
            worst = max(worst, err)
        start = end
    assert torch.isnan(out[ends[-1]:]).all(), "rows past the last group were written"
    return worst


CASES = [
    # (sizes, N, K): ragged, one-row and empty groups; N not a multiple of the tile or of 128
    ([0, 200, 1, 128, 0, 517, 64, 0], 264, 384),
    ([300, 0, 0, 1000], 512, 1024),
    ([17] * 5 + [0] * 3 + [257], 136, 272),
]
MODES = [("tensor", False), ("tensor", True), ("row", False), ("row", True), ("block", False)]


@pytest.mark.parametrize("case", range(len(CASES)))
@pytest.mark.parametrize(("mode", "fast"), MODES, ids=lambda v: str(v))
def test_grouped_fp8_against_float64(case: int, mode: str, fast: bool) -> None:
    _require_sm90()
    import nvatom

    sizes, n, k = CASES[case]
    ends = [sum(sizes[: i + 1]) for i in range(len(sizes))]
    a, b, sa, sb, ea, eb = _inputs(sizes, n, k, "e4m3", "e4m3", mode, seed=case * 10 + len(mode))
    out = torch.full((a.shape[0], n), float("nan"), device="cuda", dtype=torch.bfloat16)
    nvatom.grouped_gemm(a, b, ends, out=out, scale_a=sa, scale_b=sb, fast_accum=fast)
    torch.cuda.synchronize()
    _check(out, a, b, ends, ea, eb)


@pytest.mark.parametrize("mode", ["tensor", "row", "block"])
def test_grouped_fp8_mixed_types_shared_scale_and_many_tiles(mode: str) -> None:
    """e4m3 x e5m2, 24 experts of up to 700 tokens (about 2 tiles per SM per CTA: a CTA's
    tiles span several groups), a CUDA offsets tensor and a fresh output; per-tensor with one
    scale_b shared by every expert."""
    _require_sm90()
    import nvatom

    gen = torch.Generator().manual_seed(5)
    sizes = [int(x) for x in torch.randint(0, 700, (24,), generator=gen)]
    sizes[3] = 0
    n, k = 1024, 512
    ends = [sum(sizes[: i + 1]) for i in range(len(sizes))]
    a, b, sa, sb, ea, eb = _inputs(sizes, n, k, "e4m3", "e5m2", mode, seed=11,
                                   shared_b_scale=True)
    offs = torch.tensor(ends, dtype=torch.int32, device="cuda")
    out = nvatom.grouped_gemm(a, b, offs, scale_a=sa, scale_b=sb)
    torch.cuda.synchronize()
    assert out.dtype == torch.bfloat16 and out.shape == (a.shape[0], n)
    assert (out[ends[-1]:] == 0).all()  # a fresh output's rows past the last group are zero
    out[ends[-1]:] = float("nan")
    _check(out, a, b, ends, ea, eb)


def test_grouped_fp8_matches_scaled_grouped_mm_accuracy() -> None:
    """Row-wise scales at an MoE-like size (8 experts, 0-1500 tokens, 2048 -> 1024, K = 2048):
    our error against float64 within 1.25x of ``torch._scaled_grouped_mm``'s, whose output is
    checked too; a scale tensor changed in place is read by the next (cached) call."""
    _require_sm90()
    import nvatom

    sgm = getattr(torch, "_scaled_grouped_mm", None)
    sizes = [700, 0, 1500, 33, 1024, 0, 256, 900]
    n, k = 1024, 2048
    ends = [sum(sizes[: i + 1]) for i in range(len(sizes))]
    a, b, sa, sb, ea, eb = _inputs(sizes, n, k, "e4m3", "e4m3", "row", seed=3)
    out = torch.full((a.shape[0], n), float("nan"), device="cuda", dtype=torch.bfloat16)
    nvatom.grouped_gemm(a, b, ends, out=out, scale_a=sa, scale_b=sb)
    torch.cuda.synchronize()
    ours = _check(out, a, b, ends, ea, eb)
    sb.mul_(2.0)  # in place: the call cache's launch reads the new values
    out.fill_(float("nan"))
    nvatom.grouped_gemm(a, b, ends, out=out, scale_a=sa, scale_b=sb)
    torch.cuda.synchronize()
    _check(out, a, b, ends, ea, eb * 2.0)
    if sgm is None:
        pytest.skip("torch._scaled_grouped_mm is not in this torch: our error checked only")
    na = ends[-1]
    offs = torch.tensor(ends, dtype=torch.int32, device="cuda")
    theirs_out = sgm(a[:na], b, sa[:na], sb, offs=offs, out_dtype=torch.bfloat16)
    torch.cuda.synchronize()
    full = torch.full_like(out, float("nan"))
    full[:na] = theirs_out
    theirs = _check(full, a, b, ends, ea, eb * 2.0)
    out.fill_(float("nan"))
    nvatom.grouped_gemm(a, b, ends, out=out, scale_a=sa, scale_b=sb)
    torch.cuda.synchronize()
    ours = _check(out, a, b, ends, ea, eb * 2.0)
    assert ours <= 1.25 * theirs, (ours, theirs)
