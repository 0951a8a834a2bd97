"""The SM90 attention backward kernel without a GPU: its operand views, packings and staging
addresses against the PTX ISA's formulas written out here (wgmma D and 16-bit A fragments,
stmatrix, the 128-byte swizzle for 16- and 32-bit elements), every configuration assembled by
ptxas for sm_90a (no spills, no stack, no ptxas warning), the configuration's refusals, and
the host's refusals of what the kernel cannot run (checked before any GPU is touched)."""

from __future__ import annotations

import dataclasses
import importlib
import itertools
from typing import Any

import pytest

from nvatom.kernels.sm90.attention_bwd import build_attention_bwd_sm90
from nvatom.kernels.sm90.attention_bwd_config import (
    AttentionBwdSm90Config,
    default_bwd_config,
)
from nvatom.kernels.sm90.attention_bwd_plan import (
    attention_bwd_plan,
    dq_stage_offset,
    pack_retile,
)
from nvatom.kernels.sm90.attention_config import AttentionSm90Error
from nvatom.kernels.sm90.attention_plan import stsm_lane_offset
from nvatom.runtime.ptxas import assemble
from tests.test_attention import _Fake, _isa_a16, _isa_d, _isa_stsm, _sw128

A = importlib.import_module("nvatom.attention")


def _sw128_f32(row: int, col: int, rows: int) -> int:
    """Byte address of f32 (row, col) of a K-major tile stored as 32-column boxes of ``rows``
    x 128 bytes, each row's 16-byte units XOR-swizzled by row % 8 (SW128)."""
    box, c = divmod(col, 32)
    return box * rows * 128 + row * 128 + ((c * 4 // 16) ^ (row % 8)) * 16 + (c * 4) % 16


def test_one_packing_serves_the_rs_a_fragment_and_stmatrix() -> None:
    """P^T and dS^T (m64n64 f32) are packed once: register r of 16-column block kk holds the
    D values at the A fragment's (row, column + 16 kk) (the rs MMAs' A) and at stmatrix's
    (row, column) of matrix r of the block (the dS^T store), per the ISA's formulas."""
    retile = pack_retile(64)
    for t in (0, 3, 17, 31, 32, 70, 127):
        where = {_isa_d(t, i): i for i in range(32)}
        for kk in range(4):
            for r in range(4):
                for h in range(2):
                    row, col = _isa_a16(t, r, h)
                    assert retile[kk][r][h] == where[(row, col + 16 * kk)]
    # the identity packing (S[8kk+2r], S[8kk+2r+1]): what the stmatrix placement below uses
    assert retile == tuple(tuple((8 * kk + 2 * r, 8 * kk + 2 * r + 1) for r in range(4))
                           for kk in range(4))


@pytest.mark.parametrize("d", [64, 128])
def test_operand_views_and_ds_store_match_the_isa(d: int) -> None:
    """Q / dO and K tiles are the SW128 K-major tiles TMA writes, also read as MN-major B
    (element (n, k) of the view = (row k, column n) of the tile); every dS^T value lands,
    through its stmatrix register and the lane that names its matrix row, at the SW128
    address of (KV row, Q column) in the dS tile, which the dQ MMA reads as (Q, KV)."""
    cfg = default_bwd_config("bf16", d)
    plan = attention_bwd_plan(cfg)
    for r, c in ((0, 0), (5, 17), (63, d - 1), (9, 40)):
        assert plan.tile_layout((r, c)) * 2 == _sw128(r, c, 64)
    for r, c in ((0, 0), (127, d - 1), (64, 3), (13, 33)):
        assert plan.kv_layout((r, c)) * 2 == _sw128(r, c, 128)
    for q, kv in ((0, 0), (63, 127), (8, 64), (17, 5)):
        assert plan.ds_layout((q, kv)) * 2 == _sw128(kv, q, 128)
    assert plan.kv_consumer_offset == 64 * 128
    for cw in (0, 1):
        for t in (0, 1, 6, 31, 32, 45, 99, 127):
            warp, lane = divmod(t, 32)
            for blk in range(4):
                for reg in range(4):
                    for half in range(2):
                        j, r, c = _isa_stsm(lane, reg, half)
                        addr = 64 * cw * 128 + (stsm_lane_offset(warp, 8 * j + r) ^ (32 * blk))
                        i = plan.retile[blk][reg][half]
                        kv_row, q_col = _isa_d(t, i)
                        assert addr + 2 * c == _sw128(64 * cw + kv_row, q_col, 128)


@pytest.mark.parametrize("d", [64, 128])
def test_dq_staging_places_every_value(d: int) -> None:
    """Each dQ value (the D fragment of m64n<dq_n>) is stored at its (Q row, column) of the
    f32 SW128 staging tile that the TMA reduction reads as 32-column boxes."""
    cfg = default_bwd_config("bf16", d)
    plan = attention_bwd_plan(cfg)
    n = cfg.dq_n
    assert plan.dq_boxes == tuple(64 * 128 * b for b in range(n // 32))
    for t in range(0, 128, 7):
        warp, lane = divmod(t, 32)
        for i in range(0, n // 2, 2):
            row, col = _isa_d(t, i)
            assert dq_stage_offset(warp, lane, i) == _sw128_f32(row, col, 64)
            assert _isa_d(t, i + 1) == (row, col + 1)


def _configs() -> list[AttentionBwdSm90Config]:
    out = []
    for dt, d, causal, red in itertools.product(("bf16", "f16"), (64, 128), (False, True),
                                                ("tma", "red")):
        out.append(dataclasses.replace(default_bwd_config(dt, d, causal), dq_reduce=red))
    out += [default_bwd_config(dt, d, causal, window=True)
            for dt, d, causal in itertools.product(("bf16", "f16"), (64, 128), (False, True))]
    out += [default_bwd_config(dt, d, causal, window=w, softcap=True)
            for dt, d, causal, w in itertools.product(("bf16", "f16"), (64, 128),
                                                      (False, True), (False, True))]
    out += [dataclasses.replace(default_bwd_config("bf16", 128), dq_split="k"),
            dataclasses.replace(default_bwd_config("bf16", 128), stages=1),
            dataclasses.replace(default_bwd_config("bf16", 128, True), stages=3,
                                dq_reduce="red")]
    return out


@pytest.mark.parametrize("cfg", _configs(), ids=lambda c: c.name)
def test_every_config_assembles_without_spills(cfg: AttentionBwdSm90Config) -> None:
    res = assemble(build_attention_bwd_sm90(cfg).emit(), "sm_90a")
    k = res.kernel(cfg.name)
    assert k.spills == 0 and k.stack_frame == 0, k
    assert not res.warnings, res.warnings  # e.g. C7519: ptxas injected warpgroup.arrive


@pytest.mark.parametrize(("kw", "needle"), [
    (dict(dtype="f32"), "'f32'"),
    (dict(head_dim=256), "head_dim 256"),
    (dict(head_dim=64, dq_split="n"), "use 'k'"),
    (dict(dq_split="m"), "dq_split 'm'"),
    (dict(dq_reduce="atomic"), "dq_reduce 'atomic'"),
    (dict(stages=0), "stages 0"),
    (dict(stages=4), "shared memory"),
    (dict(consumer_regs=256), "registers"),
])
def test_config_errors(kw: dict[str, Any], needle: str) -> None:
    with pytest.raises(AttentionSm90Error) as ei:
        AttentionBwdSm90Config(**kw)
    assert needle in str(ei.value)


class _Grad(_Fake):
    def is_contiguous(self) -> bool:
        return True


def _call(**kw: Any) -> None:
    q = _Fake((2, 8, 100, 128))
    k, v = _Fake((2, 2, 120, 128)), _Fake((2, 2, 120, 128))
    A.attention_backward(_Fake((2, 8, 100, 128)), q, k, v, _Fake((2, 8, 100, 128)),
                         _Fake((2, 8, 100), dtype="torch.float32"), **kw)


@pytest.mark.parametrize(("kw", "needle"), [
    (dict(backend="cuda"), "backend = 'cuda'"),
    (dict(config=default_bwd_config("bf16", 128), softcap=30.0), "does not fit"),
    (dict(config=default_bwd_config("bf16", 128, softcap=True)), "does not fit"),
    (dict(config=default_bwd_config("bf16", 128), window=(16, 0)), "does not fit"),
    (dict(config=default_bwd_config("bf16", 128, window=True)), "does not fit"),
    (dict(config=default_bwd_config("bf16", 64)), "does not fit"),
    (dict(config=default_bwd_config("f16", 128)), "does not fit"),
    (dict(causal=True, config=default_bwd_config("bf16", 128)), "does not fit"),
    (dict(out_grads=(1, 2)), "out_grads"),
    (dict(out_grads=(_Grad((2, 8, 100, 128)), _Grad((2, 2, 120, 64)),
                     _Grad((2, 2, 120, 128)))), "out_grads' dk"),
    (dict(out_grads=(_Grad((2, 8, 100, 128)), _Grad((2, 2, 120, 128)),
                     _Grad((2, 2, 120, 128), dtype="torch.float16"))), "out_grads' dv"),
])
def test_host_refusals(kw: dict[str, Any], needle: str) -> None:
    with pytest.raises(A.AttentionError) as ei:
        _call(**kw)
    assert needle in str(ei.value)


def test_head_dim_256_is_refused_by_the_kernel_backend() -> None:
    q = _Fake((1, 2, 10, 256))
    kv = _Fake((1, 2, 10, 256))
    with pytest.raises(A.AttentionError, match="head_dim 256"):
        A.attention_backward(q, q, kv, kv, q, _Fake((1, 2, 10), dtype="torch.float32"),
                             backend="kernel")


@pytest.mark.parametrize("dt", ["bf16", "f16"])
@pytest.mark.parametrize("d", [64, 128])
@pytest.mark.parametrize("dlse", [False, True])
def test_preprocess_kernel_assembles(dt: str, d: int, dlse: bool) -> None:
    """The preprocess kernel of each type, head dim and dlse choice: ptxas-clean, its
    parameters in the order the host packs them, one thread group of head_dim / 8 lanes per
    row (a power of two inside a warp, for the shuffles)."""
    from nvatom.kernels.sm90.attention_bwd_pre import (
        PRE_THREADS,
        BwdPreConfig,
        build_attention_bwd_pre,
        pre_kernel_params,
        pre_launch_geometry,
    )

    cfg = BwdPreConfig(dt, d, dlse)
    ptx = build_attention_bwd_pre(cfg).emit()
    res = assemble(ptx, "sm_90a")
    kr = res.kernel(cfg.name)
    assert kr.spills == 0 and kr.stack_frame == 0 and not res.warnings
    names = [n for n, _ in pre_kernel_params()]
    assert [ptx.index(f" {n}") for n in names] == sorted(ptx.index(f" {n}") for n in names)
    assert cfg.lanes == d // 8 and 32 % cfg.lanes == 0
    assert (ptx.count("ld.global.nc.f32") == 2) == dlse
    grid, block, smem = pre_launch_geometry(cfg, 2, 3, 128)
    assert block == (PRE_THREADS, 1, 1) and smem == 0
    assert grid[0] * cfg.rows_per_block >= 2 * 3 * 128 > (grid[0] - 1) * cfg.rows_per_block


def test_preprocess_config_errors() -> None:
    from nvatom.kernels.sm90.attention_bwd_pre import BwdPreConfig

    with pytest.raises(AttentionSm90Error, match="head_dim 256"):
        BwdPreConfig("bf16", 256)
    with pytest.raises(AttentionSm90Error, match="'f32'"):
        BwdPreConfig("f32", 64)


@pytest.mark.parametrize("d", [64, 128])
@pytest.mark.parametrize(("causal", "window", "softcap"), [(False, False, False),
                                                           (True, True, True)])
def test_varlen_backward_kernels_assemble(d: int, causal: bool, window: bool,
                                          softcap: bool) -> None:
    """The packed variable-length backward and preprocess kernels: ptxas-clean, parameters
    in the order the host packs them, the offsets read on the device (a CTA past its keys
    returns), KV rows past the sequence masked; the dense kernels' PTX is unchanged by them
    (tests/test_ptx_fingerprint.py)."""
    import re

    from nvatom.kernels.sm90.attention_bwd_pre import (
        BwdPreConfig,
        build_attention_bwd_pre,
        pre_kernel_params,
    )
    from nvatom.kernels.sm90.attention_bwd_skeleton import bwd_kernel_params

    cfg = dataclasses.replace(default_bwd_config("bf16", d, causal, window, softcap),
                              varlen=True)
    pre = BwdPreConfig("bf16", d, True, varlen=True)
    for ptx, name, params in ((build_attention_bwd_sm90(cfg).emit(), cfg.name,
                               bwd_kernel_params(cfg)),
                              (build_attention_bwd_pre(pre).emit(), pre.name,
                               pre_kernel_params(pre))):
        res = assemble(ptx, "sm_90a")
        kr = res.kernel(name)
        assert kr.spills == 0 and kr.stack_frame == 0 and not res.warnings
        header = ptx[ptx.index(".entry"):ptx.index(")")]
        assert re.findall(r"\.param [^\n]*? (\w+)(?:\[\d+\])?,?\n", header + "\n") == [
            n for n, _ in params]
        assert "cu_seqlens_q" in header
    kernel = build_attention_bwd_sm90(cfg).emit()
    assert kernel.count("ld.global.nc.u32") == 4 and "ret;" in kernel
