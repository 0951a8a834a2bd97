"""``nvatom.grouped_gemm`` (MoE grouped GEMM) without a GPU: the grouped SM90 kernel's PTX
assembled by ptxas, its per-group tensor maps against the plain kernel's launch spec at each
group's rows (so TMA clips at group boundaries), the cumulative tile counts the scheduler
walks, and every wrong shape, dtype, layout or offset named."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from nvatom import gemm_providers as gp
from nvatom.gemm import GemmError, grouped_gemm
from nvatom.kernels.sm90.config import GROUP_SCHEDS, GemmSm90Config, GemmSm90Error
from nvatom.kernels.sm90.gemm import build_gemm_sm90
from nvatom.kernels.sm90.launch import default_config, gemm_sm90_launch_spec, kernel_params
from nvatom.runtime.ptxas import assemble
from nvatom.runtime.torch_interop import TensorArgumentError

from .runtime.test_launch import FakeTensor


@pytest.mark.parametrize(("ind", "outd", "bmaj"), [("bf16", "bf16", "MN"), ("f16", "f16", "K"),
                                                   ("bf16", "f32", "K")])
def test_grouped_kernel_assembles(ind: str, outd: str, bmaj: str) -> None:
    cfg = dataclasses.replace(default_config(ind, outd, bmaj, schedule="cooperative"),
                              grouped=True)
    ptx = build_gemm_sm90(cfg).emit()
    res = assemble(ptx, "sm_90a").kernel()
    assert res.spills == 0
    assert "fence.proxy.tensormap::generic.acquire.gpu" in ptx
    assert kernel_params(cfg) == (("tmaps", "u64"), ("tile_ends", "u64"), ("G", "u32"),
                                       ("N", "u32"), ("K", "u32"))


@pytest.mark.parametrize("sched", GROUP_SCHEDS)
def test_grouped_schedules_assemble(sched: str) -> None:
    """Every ``group_sched`` assembles without spills; the acquire fences are where the
    schedule says: "scan" 3 per warpgroup path (every tile), the "resume" family one per map
    the warpgroup uses (producer A and B, consumer D), "prefetch" those again for the next
    group plus a prefetch of each, "nofence" none."""
    cfg = GemmSm90Config(grouped=True, group_sched=sched)
    ptx = build_gemm_sm90(cfg).emit()
    assert assemble(ptx, "sm_90a").kernel().spills == 0
    fences = ptx.count("fence.proxy.tensormap::generic.acquire.gpu")
    want = {"scan": 6, "resume": 3, "prefetch": 6, "nofence": 0, "late": 3}[sched]
    assert fences == want
    assert ptx.count("prefetch.tensormap") == (3 if sched == "prefetch" else 0)
    assert (sched == "scan") == ("g_walk" not in ptx)


def test_grouped_config_rules() -> None:
    with pytest.raises(GemmSm90Error, match="group_sched 'bogus' is not one of"):
        GemmSm90Config(grouped=True, group_sched="bogus")
    for bad in (dict(cluster_m=2), dict(persistent=False)):
        with pytest.raises(GemmSm90Error, match="grouped GEMM runs persistent"):
            GemmSm90Config(grouped=True, **bad)


def _norm(args: dict) -> dict:
    return {k: tuple(v) if isinstance(v, (list, tuple)) else v for k, v in args.items()}


@pytest.mark.parametrize("b_major", ["N", "K"])
def test_grouped_plan_maps_are_the_kernels_at_each_group(b_major: str) -> None:
    sizes = [0, 1, 300, 0, 128, 4096, 7, 0]
    ends, acc = [], 0
    for s in sizes:
        acc += s
        ends.append(acc)
    n, k = 520, 136
    lda, ldd = k + 8, n + 16
    ldb = n if b_major == "N" else k
    gstride = k * n * 2 + 64
    a_ptr, b_ptr, d_ptr = 0x7F0000000000, 0x7F4000000000, 0x7F8000000000
    seen: list = []
    plan = gp.grouped_plan("bf16", "bf16", b_major, ends, n, k, a_ptr, lda, b_ptr, gstride, ldb,
                           d_ptr, ldd, 132, encode=lambda args: seen.append(_norm(args))
                           or bytes(128))
    # the schedule rule (SCHEDULE_RULES["grouped"]): 5 non-empty groups <= 8, K 136 <= 8192,
    # 906 rows a group >= 512, bf16 output: ping-pong with 128 x 192 tiles for a row-major
    # B, cooperative for a K-major one (not measured on that tile)
    cfg = default_config("bf16", "bf16", "MN" if b_major == "N" else "K",
                         schedule="pingpong192" if b_major == "N" else "cooperative")
    assert plan.cfg == dataclasses.replace(cfg, grouped=True)
    assert len(plan.maps) == 3 * 128 * len(sizes)
    want, tiles, start = [], [], 0
    tiles_n = -(-n // cfg.block_n)
    total = 0
    for g, end in enumerate(ends):
        m = end - start
        if m:
            spec = gemm_sm90_launch_spec(cfg, m, n, k, a_ptr + start * lda * 2,
                                         b_ptr + g * gstride, d_ptr + start * ldd * 2,
                                         132, lda=lda, ldb=ldb, ldd=ldd)
            want += [_norm(tm.driver_args()) for tm in spec.tensor_maps]
            total += -(-m // cfg.block_m) * tiles_n
        tiles.append(total)
        start = end
    assert seen == want
    assert plan.tile_ends == tuple(tiles) and plan.grid == min(total, 132)


@dataclasses.dataclass
class Fake3:
    """A (G, K, N) duck tensor: ``b[g]`` is its K x N matrix g."""

    shape: tuple[int, int, int]
    strides: tuple[int, int, int]
    dtype: str = "torch.bfloat16"
    ptr: int = 0x7F4000000000

    def dim(self) -> int:
        return 3

    def stride(self, i: int | None = None):
        return self.strides if i is None else self.strides[i]

    def data_ptr(self) -> int:
        return self.ptr

    def __getitem__(self, g: int) -> FakeTensor:
        return FakeTensor(self.shape[1:], self.strides[1:], dtype=self.dtype,
                          ptr=self.ptr + g * self.strides[0] * 2)


def _a(m: int, k: int, **kw) -> FakeTensor:
    return FakeTensor((m, k), (k, 1), **kw)


@pytest.mark.parametrize(("args", "err", "match"), [
    ((_a(64, 128), FakeTensor((128, 64), (64, 1)), [64]), GemmError, r"b has shape \(128, 64\)"),
    ((_a(64, 128), Fake3((2, 96, 64), (96 * 64, 64, 1)), [32, 64]), GemmError,
     r"shapes do not chain: a is 64x128, b is 2x96x64"),
    ((_a(64, 128), Fake3((2, 128, 64), (128 * 64, 64, 1), dtype="torch.float16"), [32, 64]),
     TensorArgumentError, "a is bf16 but b is f16"),
    ((_a(64, 128), Fake3((2, 128, 64), (128 * 64, 64, 1)), [32]), GemmError,
     "offsets has 1 entries but b has 2 groups"),
    ((_a(64, 128), Fake3((2, 128, 64), (128 * 64, 64, 1)), [40, 32]), GemmError,
     r"offsets\[1\] = 32: the cumulative row ends are non-decreasing"),
    ((_a(64, 128), Fake3((2, 128, 64), (128 * 64, 64, 1)), [32, 65]), GemmError,
     r"offsets\[1\] = 65: .* total_M = 64"),
    ((_a(64, 128), Fake3((2, 128, 64), (128 * 64, 64, 1)), [32.0, 64]), GemmError,
     r"offsets holds 32\.0"),
    ((_a(64, 128), Fake3((2, 128, 64), (128 * 64 + 3, 64, 1)), [32, 64]), TensorArgumentError,
     "group stride 8195 elements"),
    ((_a(64, 128), Fake3((2, 128, 64), (128 * 64, 1, 64)), [32, 64]), TensorArgumentError,
     r"b\[g\]'s lines overlap \(leading stride 64 < 128"),
    ((_a(64, 128), Fake3((0, 128, 64), (128 * 64, 64, 1)), []), GemmError, "b has 0 groups"),
])
def test_grouped_errors(args, err, match) -> None:
    out = FakeTensor((64, 64), (64, 1), ptr=0x7F8000000000)
    with pytest.raises(err, match=match):
        grouped_gemm(*args, out=out)


def test_grouped_unhashable_fast_accum_is_named() -> None:
    """Found by the api fuzz target: an unhashable ``fast_accum`` went into the unchecked
    call-cache key (TypeError: unhashable type: 'list') instead of reaching the check."""
    out = FakeTensor((64, 64), (64, 1), ptr=0x7F8000000000)
    with pytest.raises(GemmError, match=r"fast_accum = \[1\]: True or False"):
        grouped_gemm(_a(64, 128), Fake3((2, 128, 64), (128 * 64, 64, 1)), [32, 64], out=out,
                     fast_accum=[1])


class _T:
    """A hashable stand-in for a tensor (what the call-cache key reads)."""

    def __init__(self, shape: tuple, ptr: int, cuda: bool = True, vals: tuple = ()) -> None:
        self.shape, self.ptr, self.is_cuda, self.vals = shape, ptr, cuda, vals
        self.dtype, self.device = "bf16", ("cuda", 0)

    def data_ptr(self) -> int:
        return self.ptr

    def stride(self) -> tuple:
        return (self.shape[-1], 1)

    def dim(self) -> int:
        return len(self.shape)

    def tolist(self) -> list:
        return list(self.vals)


def test_grouped_call_cache_key() -> None:
    """The unchecked key of the grouped call cache holds host offsets' values and CUDA
    offsets' address (the GPU reads them; their values may change between calls); non-int
    lists and calls without ``out`` get no key."""
    from nvatom.gemm import _grouped_fast_key

    a, b, out = _T((900, 64), 1 << 40), _T((2, 64, 32), 2 << 40), _T((900, 32), 3 << 40)
    k1 = _grouped_fast_key(a, b, [300, 900], out)
    assert k1 is not None and k1 != _grouped_fast_key(a, b, [301, 900], out)
    assert _grouped_fast_key(a, b, [300, 900], None) is None
    assert _grouped_fast_key(a, b, [300.0, 900], out) is None
    kc = _grouped_fast_key(a, b, _T((2,), 5 << 40, cuda=True, vals=(300, 900)), out)
    assert kc is not None and kc != k1
    # new values at the same address: the same key (never read on the host) ...
    assert kc == _grouped_fast_key(a, b, _T((2,), 5 << 40, cuda=True, vals=(1, 2)), out)
    # ... another tensor: another key
    assert kc != _grouped_fast_key(a, b, _T((2,), 6 << 40, cuda=True, vals=(300, 900)), out)
    kt = _grouped_fast_key(a, b, _T((2,), 0, cuda=False, vals=(300, 900)), out)
    assert kt is not None and kt != k1
    assert kt != _grouped_fast_key(a, b, _T((2,), 0, cuda=False, vals=(300, 899)), out)


def test_grouped_variant_plans_with_its_arguments_and_restores() -> None:
    """``grouped_variant(**kw)``: inside, ``grouped_plan`` is called with ``kw`` added and the
    grouped call caches start empty; after (also after an error), the provider's function
    is back and the caches are empty again."""
    import nvatom.gemm as ng
    import nvatom.gemm_providers as gp

    orig = gp.grouped_plan
    ng.CACHES.grouped_calls[("stale",)] = (None, None, None)
    ng.CACHES.grouped_fast[("stale",)] = (None, None, None, None)
    seen: dict[str, object] = {}
    with pytest.raises(RuntimeError, match="inside"):
        with ng.grouped_variant(group_sched="scan") as calls:
            assert calls is ng.CACHES.grouped_calls and not calls and not ng.CACHES.grouped_fast
            assert gp.grouped_plan is not orig
            seen.update(gp.grouped_plan.keywords)  # the partial's fixed arguments
            calls[("new",)] = (None, None, None)
            raise RuntimeError("inside")
    assert seen == {"group_sched": "scan"}
    assert gp.grouped_plan is orig
    assert not ng.CACHES.grouped_calls and not ng.CACHES.grouped_fast


_B2 = Fake3((2, 128, 64), (128 * 64, 64, 1))


@pytest.mark.parametrize(("offsets", "match"), [
    (np.array([32.0, 64.0]), "offsets has dtype float64: group offsets are integers"),
    (np.array([[32, 64]]), r"offsets has shape \(1, 2\): one cumulative row end per group"),
    ({32, 64}, "offsets is a set: pass the groups' cumulative row ends"),
])
def test_grouped_offsets_errors(offsets, match) -> None:
    out = FakeTensor((64, 64), (64, 1), ptr=0x7F8000000000)
    with pytest.raises(GemmError, match=match):
        grouped_gemm(_a(64, 128), _B2, offsets, out=out)


@pytest.mark.parametrize(("out", "err", "match"), [
    (FakeTensor((64, 32), (32, 1), ptr=0x7F8000000000), GemmError,
     r"out has shape \(64, 32\), the product is 64x64"),
    (FakeTensor((64, 64), (32, 1), ptr=0x7F8000000000), TensorArgumentError,
     r"out's rows overlap \(row stride 32 < N = 64\)"),
])
def test_grouped_out_errors(out, err, match) -> None:
    with pytest.raises(err, match=match):
        grouped_gemm(_a(64, 128), _B2, [32, 64], out=out)
