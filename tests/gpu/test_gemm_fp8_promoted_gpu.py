"""FP8 on an sm_90 GPU: the promoted main loop, fast accumulation, row-wise scales, e5m2.

Every output is poisoned with NaN first and compared with the float64 product of the decoded
FP8 inputs (each e4m3/e5m2 value is exact in float64) times the scales:

* per element, ``2^-8 |ref| + 2^-13 (K / 32 + 1) S`` (``S`` the product of the absolute
  values, scaled): the bf16 output rounding with margin plus a worst-case bound for WGMMA's
  FP8 accumulation (about 14 bits kept, DeepSeek-V3 report section 3.3.2), as
  tests/gpu/test_gemm_fp8_gpu.py argues;
* in norm, ``|out - ref| / |ref|``: the promoted loop (the default) must be no worse than
  ``torch._scaled_mm``'s default (cuBLAS, promotion on) on the same inputs, up to 2% of it,
  at K = 4096, 8192 and 16384 (the bf16 rounding alone is about 1.6e-3 there), and clearly
  better than fast accumulation at K = 16384.
"""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.gpu

torch = pytest.importorskip("torch")

from tests.gpu.test_gemm_fp8_gpu import _check  # noqa: E402  (one float64 check for FP8)

E4M3, E5M2 = torch.float8_e4m3fn, torch.float8_e5m2
TYPES = {"e4m3": E4M3, "e5m2": E5M2}


def _require_sm90() -> None:
    if not torch.cuda.is_available() or torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("nvatom's FP8 GEMM needs an sm_90 (Hopper) GPU")


def _gen(seed: int | None = None):
    gen = torch.Generator(device="cuda")
    if seed is None:
        gen.seed()  # fresh inputs every run
    else:
        gen.manual_seed(seed)
    return gen


def _operands(m: int, n: int, k: int, ta, tb, rowwise: bool, gen):
    a = (torch.randn(m, k, device="cuda", generator=gen) * 2).to(ta)
    b = (torch.randn(n, k, device="cuda", generator=gen) * 2).to(tb).t()  # column-major
    if rowwise:
        sa = (torch.rand(m, 1, device="cuda", generator=gen) + 0.5).float()
        sb = (torch.rand(1, n, device="cuda", generator=gen) + 0.5).float()
    else:
        sa = (torch.rand((), device="cuda", generator=gen) + 0.5).float()
        sb = (torch.rand((), device="cuda", generator=gen) + 0.5).float()
    return a, b, sa, sb


def _ref(a, b, sa, sb):
    return (a.double() @ b.double()) * sa.double() * sb.double()


# ragged in M, N and K; one tile; a K of one k-step; N a multiple of 8 only
SHAPES = [(129, 264, 80), (333, 784, 528), (1, 16, 16), (640, 1536, 2064), (256, 512, 4096),
          (7, 1008, 16)]


@pytest.mark.parametrize("rowwise", [False, True], ids=["tensor", "row"])
@pytest.mark.parametrize("fast", [False, True], ids=["promoted", "fast"])
@pytest.mark.parametrize("types", ["e4m3xe4m3", "e4m3xe5m2", "e5m2xe4m3", "e5m2xe5m2"])
def test_fp8_modes_against_float64(types: str, fast: bool, rowwise: bool) -> None:
    _require_sm90()
    import nvatom

    ta, tb = (TYPES[t] for t in types.split("x"))
    gen = _gen()
    for m, n, k in SHAPES:
        a, b, sa, sb = _operands(m, n, k, ta, tb, rowwise, gen)
        out = torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
        assert nvatom.gemm(a, b, out, scale_a=sa, scale_b=sb, fast_accum=fast) is out
        torch.cuda.synchronize()
        _check(out, a, b, sa, sb)


def test_fp8_row_scales_1d_and_default_out() -> None:
    """1-D row-wise scales, no ``out`` (bf16 made), and the route the mode takes."""
    _require_sm90()
    import nvatom
    from nvatom.gemm import explain

    m, n, k = 200, 272, 336
    a, b, sa, sb = _operands(m, n, k, E4M3, E4M3, True, _gen(4))
    d = nvatom.gemm(a, b, scale_a=sa.reshape(-1), scale_b=sb.reshape(-1))
    torch.cuda.synchronize()
    assert d.dtype == torch.bfloat16
    _check(d, a, b, sa, sb)
    r = explain(a, b, scale_a=sa, scale_b=sb)
    assert r.launch.source.name.endswith("_rowscale_staged")  # staged in shared memory
    assert "_pr1" in r.launch.source.name  # promoted by default
    r = explain(a, b, scale_a=sa, scale_b=sb, fast_accum=True)
    assert "_pr" not in r.launch.source.name


@pytest.mark.parametrize("k", [4096, 8192, 16384])
def test_promoted_accuracy_matches_scaled_mm(k: int) -> None:
    """The default (promoted) loop is no less exact than ``torch._scaled_mm``'s default, and
    fast accumulation is no less exact than ``_scaled_mm(use_fast_accum=True)`` (2% slack)."""
    _require_sm90()
    import nvatom

    m = n = 2048
    for rowwise in (False, True):
        a, b, sa, sb = _operands(m, n, k, E4M3, E4M3, rowwise, _gen(k + rowwise))
        ref = _ref(a, b, sa, sb)

        def rel(x, ref=ref):
            assert not torch.isnan(x).any()
            return float((x.double() - ref).norm() / ref.norm())

        ours = rel(nvatom.gemm(a, b, scale_a=sa, scale_b=sb))
        ours_fast = rel(nvatom.gemm(a, b, scale_a=sa, scale_b=sb, fast_accum=True))
        theirs = rel(torch._scaled_mm(a, b, sa, sb, out_dtype=torch.bfloat16))
        theirs_fast = rel(torch._scaled_mm(a, b, sa, sb, out_dtype=torch.bfloat16,
                                           use_fast_accum=True))
        assert ours <= 1.02 * theirs, (rowwise, ours, theirs)
        assert ours_fast <= 1.02 * theirs_fast, (rowwise, ours_fast, theirs_fast)
        if k == 16384:  # where WGMMA's own accumulation shows
            assert ours < 0.8 * ours_fast, (rowwise, ours, ours_fast)


@pytest.mark.parametrize("variant", [
    {"promote": 1, "promote_parts": 2, "promote_temps": 1},
    {"promote": 2, "promote_parts": 2, "promote_temps": 1},
    {"promote": 3, "promote_parts": 4, "promote_temps": 2},
    {"promote": 1, "promote_parts": 4, "promote_temps": 2, "promote_pipelined": True},
    {"promote": 1, "promote_parts": 2, "promote_temps": 2, "block_n": 192},
    {"promote": 1, "promote_parts": 2, "promote_temps": 2, "block_n": 192,
     "promote_pipelined": True},
    {"promote": 1, "promote_parts": 1, "promote_temps": 1, "block_n": 128, "stages": 6},
    {"promote": 1, "promote_parts": 2, "promote_temps": 2, "block_n": 128, "stages": 6,
     "consumers": 1},
    {"promote": 1, "promote_parts": 2, "promote_temps": 2, "block_n": 128, "stages": 6,
     "schedule": "pingpong"},
    {"promote": 2, "promote_parts": 4, "promote_temps": 1, "block_n": 128, "stages": 6,
     "schedule": "pingpong"},
    # A from registers (WGMMA .rs, docs/perf.md "FP8 promoted, session 5"), with and
    # without the next K block's fragment prefetched
    {"promote": 1, "promote_parts": 2, "promote_temps": 1, "promote_rs": True},
    {"promote": 1, "promote_parts": 4, "promote_temps": 2, "promote_rs": True,
     "promote_rs_prefetch": True},
    {"promote": 1, "promote_parts": 2, "promote_temps": 2, "block_n": 192, "promote_rs": True},
    {"promote": 1, "promote_parts": 2, "promote_temps": 2, "block_n": 192, "promote_rs": True,
     "promote_rs_prefetch": True},
    # two or four K blocks per iteration (the K blocks left over one at a time)
    {"promote": 1, "promote_parts": 2, "promote_temps": 2, "block_n": 192,
     "promote_unroll": 2},
    {"promote": 1, "promote_parts": 4, "promote_temps": 2, "promote_unroll": 4},
], ids=lambda v: "_".join(f"{k}{x if isinstance(x, str) else int(x)}"
                          for k, x in v.items()))
def test_promoted_kernel_variants(variant: dict) -> None:
    """Every promoted main-loop shape the config offers, through the direct launcher."""
    _require_sm90()
    from nvatom.gemm_providers import prepare_gemm_sm90
    from nvatom.kernels.sm90.config import GemmSm90Config

    gen = _gen()
    for rowwise in (False, True):
        cfg = GemmSm90Config(in_dtype="e4m3", b_major="K",
                             scale_mode="row" if rowwise else "tensor", **variant)
        for m, n, k in SHAPES:
            a, b, sa, sb = _operands(m, n, k, E4M3, E4M3, rowwise, gen)
            out = torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
            prepare_gemm_sm90(a, b, out, cfg, sa.reshape(-1), sb.reshape(-1))()
            torch.cuda.synchronize()
            _check(out, a, b, sa, sb)


def test_fp8_scale_shape_errors_on_the_gpu() -> None:
    _require_sm90()
    import nvatom
    from nvatom.gemm import GemmError

    m, n, k = 64, 128, 64
    a, b, sa, sb = _operands(m, n, k, E4M3, E5M2, True, _gen(5))
    out = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
    with pytest.raises(GemmError, match=r"scale_a has shape \(1, 64\) and scale_b \(1, 128\)"):
        nvatom.gemm(a, b, out, scale_a=sa.t(), scale_b=sb)
    with pytest.raises(GemmError, match=r"scale_a has shape \(64, 1\) and scale_b \(\)"):
        nvatom.gemm(a, b, out, scale_a=sa, scale_b=torch.tensor(1.0, device="cuda"))
    wide = torch.ones(2 * m, 1, device="cuda")[::2]  # (M, 1) with stride 2
    with pytest.raises(GemmError, match=r"scale_a has strides \(2, 1\)"):
        nvatom.gemm(a, b, out, scale_a=wide, scale_b=sb)
    with pytest.raises(GemmError, match="fast_accum=True given but a and b are bf16"):
        nvatom.gemm(a.bfloat16(), b.bfloat16(), out, fast_accum=True)


# several tiles per persistent CTA (more tiles than SMs), short and long K: the size rule's
# two promoted tiles (docs/perf.md, "FP8 tile by wave count"); K = 64 makes the epilogues of
# consecutive tiles follow each other closely (the staging-buffer race of the 128 x 192 tile's
# odd chunk count showed there: relative error 0.59 before the fix)
MULTI_TILE = [((3000, 3000, 64), "128x192"), ((4000, 4040, 64), "128x256"),
              ((4096, 4096, 384), "128x256"), ((8192, 2056, 128), "128x192"),
              ((2040, 2040, 144), "128x256"),
              # the wide tile's loop runs 4 K blocks per iteration: 9 = 2 x 4 + 1 leftover
              ((4096, 4096, 1152), "128x256")]


@pytest.mark.parametrize("rowwise", [False, True], ids=["tensor", "row"])
@pytest.mark.parametrize(("shape", "tile"), MULTI_TILE, ids=lambda s: "x".join(map(str, s))
                         if isinstance(s, tuple) else s)
def test_promoted_tiles_by_size_many_tiles_per_cta(shape, tile: str, rowwise: bool) -> None:
    _require_sm90()
    import nvatom
    from nvatom.gemm import explain

    if torch.cuda.get_device_properties(0).multi_processor_count != 132:
        pytest.skip("the expected tiles are those of a 132-SM H100/H200")
    m, n, k = shape
    gen = _gen()
    for _ in range(3):  # fresh inputs each time: a timing-dependent fault shows in some
        a, b, sa, sb = _operands(m, n, k, E4M3, E4M3, rowwise, gen)
        out = torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
        nvatom.gemm(a, b, out, scale_a=sa, scale_b=sb)
        torch.cuda.synchronize()
        _check(out, a, b, sa, sb)
    name = explain(a, b, scale_a=sa, scale_b=sb).launch.source.name
    assert f"_{tile}_" in name and "_pr1" in name, name


# A from registers and the unrolled loop with several tiles per persistent CTA: the
# fragment of a tile's first K block is loaded after the previous tile's epilogue, the
# prefetch stops at a tile's last K block, the unrolled loop's leftover blocks run one at a
# time (K = 64 and 128: one block; 144: two, the second ragged; 1024: eight; 1152: nine)
S5_VARIANTS = [
    {"promote_parts": 2, "promote_temps": 1, "promote_rs": True},
    {"promote_parts": 2, "promote_temps": 1, "promote_rs": True, "promote_rs_prefetch": True},
    {"promote_parts": 4, "promote_temps": 2, "promote_rs": True, "promote_rs_prefetch": True},
    {"promote_parts": 2, "promote_temps": 2, "block_n": 192, "promote_rs": True,
     "promote_rs_prefetch": True},
    {"promote_parts": 2, "promote_temps": 2, "block_n": 192, "promote_unroll": 2},
    {"promote_parts": 2, "promote_temps": 2, "block_n": 192, "promote_unroll": 4},
    {"promote_parts": 4, "promote_temps": 2, "promote_unroll": 2},
    {"promote_parts": 4, "promote_temps": 2, "promote_unroll": 4},  # the wide default
]


@pytest.mark.parametrize("variant", S5_VARIANTS, ids=lambda v: "_".join(
    f"{k}{int(x)}" for k, x in v.items()))
def test_promoted_s5_many_tiles_per_cta(variant: dict) -> None:
    _require_sm90()
    from nvatom.gemm_providers import prepare_gemm_sm90
    from nvatom.kernels.sm90.config import GemmSm90Config

    gen = _gen()
    for (m, n, k), rowwise in [((3000, 3000, 64), False), ((4000, 4040, 144), True),
                               ((2040, 4096, 1024), False), ((4096, 2056, 128), True),
                               ((2100, 3000, 1152), True)]:
        cfg = GemmSm90Config(in_dtype="e4m3", b_major="K", promote=1,
                             scale_mode="row" if rowwise else "tensor", **variant)
        a, b, sa, sb = _operands(m, n, k, E4M3, E4M3, rowwise, gen)
        out = torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
        prepare_gemm_sm90(a, b, out, cfg, sa.reshape(-1), sb.reshape(-1))()
        torch.cuda.synchronize()
        _check(out, a, b, sa, sb)


# row_scale_stage: the tile's row-wise scales copied to shared memory with cp.async at its
# start and read there by the epilogue; many tiles per CTA (the next tile's copies overwrite
# the area the last epilogue read), rows and columns past M and N (clamped copies), both
# promoted tiles and fast accumulation
STAGED = [
    {"promote": 1, "promote_parts": 2, "promote_temps": 2, "block_n": 192},
    {"promote": 1, "promote_parts": 4, "promote_temps": 2, "promote_unroll": 4},
    {"promote": 0},
]


@pytest.mark.parametrize("variant", STAGED, ids=lambda v: "_".join(
    f"{k}{int(x)}" for k, x in v.items()))
def test_row_scales_staged_in_shared_memory(variant: dict) -> None:
    _require_sm90()
    from nvatom.gemm_providers import prepare_gemm_sm90
    from nvatom.kernels.sm90.config import GemmSm90Config

    gen = _gen()
    for m, n, k in [(3000, 3000, 64), (4000, 4040, 144), (129, 264, 1024), (1, 8, 32),
                    (2100, 3000, 1152), (8192, 2056, 128)]:
        cfg = GemmSm90Config(in_dtype="e4m3", b_major="K", scale_mode="row",
                             row_scale_stage=True, **variant)
        a, b, sa, sb = _operands(m, n, k, E4M3, E4M3, True, gen)
        out = torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
        prepare_gemm_sm90(a, b, out, cfg, sa.reshape(-1), sb.reshape(-1))()
        torch.cuda.synchronize()
        _check(out, a, b, sa, sb)
