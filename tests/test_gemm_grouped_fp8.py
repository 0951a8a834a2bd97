"""FP8 ``nvatom.grouped_gemm`` without a GPU: every grouped FP8 kernel (scaling mode x
accumulation x group schedule, mixed e4m3/e5m2) assembled by ptxas without spills, its
parameters, the plan's device buffer (maps, tile counts, then the row ends the kernel indexes
the stacked rows' scales with), the scale shapes each mode takes with the byte step between
groups' ``scale_b``, and every wrong scale, layout or flag named.  Numerics: the GPU tests
(tests/gpu/test_grouped_gemm_fp8_gpu.py)."""

from __future__ import annotations

import dataclasses
import struct

import numpy as np
import pytest

from nvatom import gemm_providers as gp
from nvatom.gemm import GemmError, check_group_scales, grouped_gemm
from nvatom.kernels.sm90.config import GemmSm90Config, GemmSm90Error
from nvatom.kernels.sm90.gemm import build_gemm_sm90
from nvatom.kernels.sm90.launch import default_config, kernel_params
from nvatom.runtime.ptxas import assemble
from nvatom.runtime.torch_interop import TensorArgumentError

from .runtime.test_launch import FakeDevice, FakeTensor
from .test_gemm_grouped import Fake3

E4M3 = "torch.float8_e4m3fn"
F32 = "torch.float32"


def _cfg(mode: str, fast: bool, sched: str, b_dtype: str = "") -> GemmSm90Config:
    """The grouped kernel grouped_plan builds: the plain FP8 default, grouped."""
    ends = [100, 300]
    return dataclasses.replace(
        gp.grouped_plan("e4m3", "bf16", "K", ends, 256, 256, 0, 256, 0, 65536, 256, 0, 256, 132,
                        b_dtype=b_dtype, scale_mode=mode, fast_accum=fast,
                        encode=lambda args: bytes(128)).cfg, group_sched=sched)


def test_grouped_fp8_config_is_the_plain_default() -> None:
    """Grouped FP8 takes the plain default's tile (no per-size choice: the groups differ),
    except the fast row-wise kernel, whose 128 x 256 tile spills when grouped: 128 x 192."""
    for mode, fast in (("tensor", False), ("tensor", True), ("row", False), ("block", False)):
        plain = default_config("e4m3", "bf16", "K", fast_accum=fast, scale_mode=mode)
        assert _cfg(mode, fast, "resume") == dataclasses.replace(plain, grouped=True,
                                                                 row_scale_stage=False)
    plain = default_config("e4m3", "bf16", "K", fast_accum=True, scale_mode="row")
    cfg = _cfg("row", True, "resume")
    assert plain.block_n == 256 and cfg == dataclasses.replace(plain, grouped=True, block_n=192,
                                                               row_scale_stage=False)
    spilling = dataclasses.replace(cfg, block_n=256)
    assert assemble(build_gemm_sm90(spilling).emit(), "sm_90a").kernel().spills > 0


@pytest.mark.parametrize(("mode", "fast"), [("tensor", False), ("tensor", True), ("row", False),
                                            ("row", True), ("block", False)])
@pytest.mark.parametrize("sched", ["resume", "scan"])
def test_grouped_fp8_kernels_assemble(mode: str, fast: bool, sched: str) -> None:
    cfg = _cfg(mode, fast, sched, b_dtype="e5m2" if fast else "")
    ptx = build_gemm_sm90(cfg).emit()
    assert assemble(ptx, "sm_90a").kernel().spills == 0
    assert kernel_params(cfg) == (
        ("tmaps", "u64"), ("tile_ends", "u64"), ("G", "u32"), ("N", "u32"), ("K", "u32"),
        ("scale_a", "u64"), ("scale_b", "u64"), ("scale_b_step", "u32"))
    # the per-tile group lookup reads the row ends (G u32 after tile_ends) at the group
    # index, and the group before it for the group's first row
    assert "[%" in ptx and "+-4]" in ptx
    form = "e4m3.e5m2" if fast else "e4m3.e4m3"
    assert f".{form}" in ptx


def test_grouped_fp8_config_rules() -> None:
    with pytest.raises(GemmSm90Error, match="grouped FP8 kernel is cooperative"):
        dataclasses.replace(default_config("e4m3"), grouped=True, schedule="pingpong",
                            block_n=128)
    with pytest.raises(GemmSm90Error, match="grouped GEMM runs persistent"):
        dataclasses.replace(default_config("e4m3"), grouped=True, cluster_m=2)


def test_grouped_fp8_plan_buffer() -> None:
    sizes = [0, 300, 1, 0, 4096]
    ends = [sum(sizes[: i + 1]) for i in range(len(sizes))]
    n, k = 520, 256
    seen: list = []
    plan = gp.grouped_plan("e4m3", "bf16", "K", ends, n, k, 0x7F0000000000, k, 0x7F4000000000,
                           k * n, k, 0x7F8000000000, n, 132, b_dtype="e5m2",
                           scale_mode="row",
                           encode=lambda args: seen.append(args) or bytes(128))
    assert plan.cfg == _cfg("row", False, "resume", "e5m2")
    assert len(seen) == 3 * 3  # three non-empty groups, three maps each
    buf = plan.buffer()
    g = len(sizes)
    assert buf[: 3 * 128 * g] == plan.maps
    words = struct.unpack(f"<{2 * g}I", buf[3 * 128 * g:])
    tiles_n = -(-n // plan.cfg.block_n)
    want_tiles, t = [], 0
    for i, s in enumerate(sizes):
        t += -(-s // 128) * tiles_n
        want_tiles.append(t)
        assert words[g + i] == ends[i]  # the cumulative row ends follow the tile counts
    assert list(words[:g]) == want_tiles
    plain = gp.grouped_plan("bf16", "bf16", "K", ends, n, k, 0, k, 0, k * n * 2, k, 0, n, 132,
                            encode=lambda args: bytes(128))
    assert plain.row_ends == () and len(plain.buffer()) == 3 * 128 * g + 4 * g


def _s(shape: tuple[int, ...], strides: tuple[int, ...] | None = None) -> FakeTensor:
    if strides is None:  # contiguous
        strides, acc = [], 1
        for d in reversed(shape):
            strides.insert(0, acc)
            acc *= d
    return FakeTensor(shape, tuple(strides), dtype=F32, ptr=0x7F0000100000)


G, M, N, K = 6, 1000, 520, 300
KB, NB = 3, 5  # ceil(300 / 128), ceil(520 / 128)


@pytest.mark.parametrize(("sa", "sb", "want"), [
    (1.5, 2.0, ("tensor", 0)),
    (_s(()), _s((1,)), ("tensor", 0)),
    (_s((1,)), _s((G,)), ("tensor", 4)),  # one per expert, contiguous: 4 bytes apart
    (_s(()), _s((G,), (0,)), ("tensor", 0)),  # an expanded scalar
    (_s((M,)), _s((G, N)), ("row", 4 * N)),  # torch._scaled_grouped_mm's shapes
    (_s((M, 1)), _s((G, N), (N + 8, 1)), ("row", 4 * (N + 8))),
    (_s((M,)), _s((1, N)), ("row", 0)),  # one scale_b row for every expert
    # block: scale_b (G, Kb, Nb), each group's K-major (w_scale (G, Nb, Kb) transposed)
    (_s((M, KB)), _s((G, KB, NB), (KB * NB, 1, KB)), ("block", 4 * KB * NB)),
    (_s((M, KB)), _s((KB, NB), (1, KB)), ("block", 0)),
])
def test_group_scale_modes(sa, sb, want) -> None:
    assert check_group_scales(sa, sb, "e4m3", 0, G, M, N, K) == want


@pytest.mark.parametrize(("sa", "sb", "match"), [
    (_s((M,)), _s((N,)), r"scale_a has shape \(1000,\) and scale_b \(520,\): grouped scales"),
    (_s((M,)), _s((G + 1, N)), r"scale_b \(7, 520\)"),
    (_s((1,)), _s((G, 1)), r"scale_b \(6, 1\)"),
    (_s((M,)), _s((G, N), (1, G)), r"scale_b has strides \(1, 6\): row-wise scales are read"),
    (_s((M, KB)), _s((G, KB, NB)), r"scale_b \(3 x 5 block scales\) has strides \(5, 1\)"),
    (_s((M, KB), (1, M)), _s((G, KB, NB), (KB * NB, 1, KB)), r"scale_a \(1000 x 3 block"),
    (None, _s((G,)), "scale_a is missing"),
    # the kernel steps scale_b by a 32-bit byte offset per group
    (_s((1,)), _s((G,), (2**30,)), r"group stride 1073741824 elements is outside 0..2\^30"),
    (_s((1,)), _s((G,), (-1,)), r"group stride -1 elements is outside"),
    # row-wise scale_b is read in column pairs: an odd group stride or base would fault
    (_s((M,)), _s((G, N), (N + 1, 1)), r"scale_b's group stride 521 elements is odd"),
    (_s((M,)), dataclasses.replace(_s((G, N)), ptr=0x7F0000100004),
     "scale_b's data pointer 0x7f0000100004 is not 8-byte aligned"),
    (True, 1.0, "not a bool"),
])
def test_group_scale_errors(sa, sb, match) -> None:
    with pytest.raises(GemmError, match=match):
        check_group_scales(sa, sb, "e4m3", 0, G, M, N, K)


def test_group_scales_only_for_fp8() -> None:
    assert check_group_scales(None, None, "bf16", 0, G, M, N, K) == ("", 0)
    with pytest.raises(GemmError, match="scale_a given but a and b are bf16"):
        check_group_scales(1.0, None, "bf16", 0, G, M, N, K)
    with pytest.raises(GemmError, match="scale_b is on cuda:1"):
        bad = dataclasses.replace(_s((G,)), device=FakeDevice("cuda", 1))
        check_group_scales(1.0, bad, "e4m3", 0, G, M, N, K)


def _a8(m: int, k: int) -> FakeTensor:
    return FakeTensor((m, k), (k, 1), dtype=E4M3)


def _b8(g: int, k: int, n: int, dtype: str = E4M3) -> Fake3:
    return Fake3((g, k, n), (n * k, 1, k), dtype=dtype)


_OUT = FakeTensor((64, 64), (64, 1), ptr=0x7F8000000000)


@pytest.mark.parametrize(("args", "kw", "err", "match"), [
    ((_a8(64, 128), Fake3((2, 128, 64), (128 * 64, 64, 1), dtype=E4M3), [32, 64]),
     dict(scale_a=1.0, scale_b=1.0), TensorArgumentError,
     r"b has strides \(8192, 64, 1\): FP8 WGMMA reads K-major operands only"),
    ((_a8(64, 128), _b8(2, 128, 64), [32, 64]), {}, GemmError,
     "scale_a and scale_b is missing"),
    ((_a8(64, 128), _b8(2, 128, 64, dtype="torch.bfloat16"), [32, 64]),
     dict(scale_a=1.0, scale_b=1.0), TensorArgumentError, "a is e4m3 but b is bf16"),
    ((FakeTensor((64, 128), (128, 1)), Fake3((2, 128, 64), (128 * 64, 64, 1)), [32, 64]),
     dict(fast_accum=True), GemmError, "fast_accum applies to FP8 operands; a and b are bf16"),
    ((_a8(64, 128), _b8(2, 128, 64), [32, 64]), dict(scale_a=1.0, scale_b=1.0, fast_accum=1),
     GemmError, "fast_accum = 1: True or False"),
    # fuzz findings (issue 28): a numpy scalar reached the call-cache key (AttributeError), a
    # huge int float() (OverflowError); both are named errors now
    ((_a8(64, 128), _b8(2, 128, 64), [32, 64]), dict(scale_a=np.float32(1.0), scale_b=1.0),
     GemmError, r"scale_a = np.float32\(1.0\) \(float32\) is neither a float nor a float32 "
                "CUDA tensor"),
    ((_a8(64, 128), _b8(2, 128, 64), [32, 64]), dict(scale_a=1.0, scale_b=10**400),
     GemmError, "scale_b = an integer of 1329 bits: a number scale must be finite and within "
                "float32's range"),
    ((_a8(64, 128), _b8(2, 128, 64), [32, 64]), dict(scale_a=float("nan"), scale_b=1.0),
     GemmError, "scale_a = nan: a number scale must be finite"),
])
def test_grouped_fp8_errors(args, kw, err, match) -> None:
    with pytest.raises(err, match=match):
        grouped_gemm(*args, out=_OUT, **kw)


def test_grouped_fp8_output_is_bf16() -> None:
    out = FakeTensor((64, 64), (64, 1), dtype="torch.float16", ptr=0x7F8000000000)
    with pytest.raises(TensorArgumentError, match=r"out has dtype float16 \(f16\); this kernel "
                                                  "takes bf16"):
        grouped_gemm(_a8(64, 128), _b8(2, 128, 64), [32, 64], out=out, scale_a=1.0,
                     scale_b=1.0)
