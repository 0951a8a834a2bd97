"""The SM90 GEMM kernel (issue 7) on the CPU: every offered configuration assembles for
sm_90a without spills and with setmaxnreg honoured; the descriptors the kernel derives from
its shared-memory layouts have the strides the PTX ISA's canonical SW128 forms prescribe;
launch specs and tensor maps; every configuration and problem error."""

from __future__ import annotations

import pytest

from nvatom.descriptors.wgmma import check_desc_matches
from nvatom.kernels.gemm_sm90 import (
    GemmSm90Config,
    GemmSm90Error,
    b_major_of,
    build_gemm_sm90,
    default_config,
    gemm_sm90_launch_spec,
    gemm_sm90_plan,
    kernel_params,
)
from nvatom.runtime.ptxas import assemble

# The configurations the GPU tests and the bench use (dtype combinations, B majors, cluster,
# one consumer warpgroup, no wgmma in flight, non-persistent).
CONFIGS = [
    GemmSm90Config(),
    GemmSm90Config(b_major="K"),
    GemmSm90Config(in_dtype="f16", out_dtype="f16"),
    GemmSm90Config(in_dtype="f16", out_dtype="f32", stages=3),
    GemmSm90Config(in_dtype="bf16", out_dtype="f16"),
    GemmSm90Config(in_dtype="bf16", out_dtype="f32", stages=3),
    GemmSm90Config(in_dtype="e4m3", b_major="K"),
    GemmSm90Config(cluster_m=2),
    GemmSm90Config(in_dtype="e4m3", b_major="K", cluster_m=2),
    GemmSm90Config(consumers=1, block_n=128, stages=6, b_major="K"),
    GemmSm90Config(wgmma_inflight=0, persistent=False),
]


@pytest.fixture(scope="module")
def assembled() -> dict[str, object]:
    # one ptxas call per config (each module holds one kernel; results are cached by hash)
    return {c.name: assemble(build_gemm_sm90(c).emit(), "sm_90a") for c in CONFIGS}


@pytest.mark.parametrize("cfg", CONFIGS, ids=lambda c: c.name)
def test_assembles_without_spills(cfg: GemmSm90Config, assembled) -> None:
    res = assembled[cfg.name]
    k = res.kernels[cfg.name]
    assert k.spill_stores == 0 and k.spill_loads == 0 and k.stack_frame == 0
    assert k.registers <= 168  # the entry cap (.maxnreg) that setmaxnreg starts from
    # ptxas says C7508 when it ignores setmaxnreg; no warning of any kind is accepted
    assert not [d for d in res.diagnostics if d.severity != "info"], res.diagnostics


@pytest.mark.parametrize("cfg", CONFIGS, ids=lambda c: c.name)
def test_ptx_uses_the_atoms(cfg: GemmSm90Config) -> None:
    text = build_gemm_sm90(cfg).emit()
    assert text.count(cfg.form.opcode) == cfg.k_steps  # one K block of wgmma per stage
    assert f"setmaxnreg.dec.sync.aligned.u32 {cfg.producer_regs};" in text
    assert f"setmaxnreg.inc.sync.aligned.u32 {cfg.consumer_regs};" in text
    assert "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes" \
        in text
    assert "cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group" in text
    assert f"wgmma.wait_group.sync.aligned {cfg.wgmma_inflight};" in text
    assert ".maxnreg 168" in text and f".reqntid {cfg.threads}, 1, 1" in text
    if cfg.out_bytes == 2:
        assert "stmatrix.sync.aligned.m8n8.x4.shared.b16" in text
    else:
        assert "st.shared.v2.f32" in text
    if cfg.cluster_m == 2:
        assert ".multicast::cluster" in text and "mapa.shared::cluster.u32" in text
        assert ".reqnctapercluster 2, 1, 1" in text
    else:
        assert "multicast" not in text and "mapa" not in text
    assert "cvta.param.u64" in text  # the tensor maps' generic addresses


def test_descriptors_match_canonical_sw128_forms() -> None:
    """K-major SW128: 8 rows of 128 bytes per core-matrix group, so SBO = 1024 and LBO
    unused (16); the K step (16 bf16 = 32 bytes) moves the start address by 32 bytes.
    MN-major SW128 with 64-wide atoms tiled K-first: 8 K rows = 1024 bytes (SBO), the next
    64 columns of N one whole 64 x 128-byte box further (LBO = 8192); a K step is 16 rows
    (2048 bytes).  (PTX ISA "Matrix Descriptor Format"; CUTLASS make_gmma_desc.)"""
    p = gemm_sm90_plan(GemmSm90Config())
    a0, b0 = p.a_descs[0], p.b_descs[0]
    assert (a0.layout_type.name, a0.lbo, a0.sbo) == ("SW128", 16, 1024)
    assert (b0.layout_type.name, b0.lbo, b0.sbo) == ("SW128", 8192, 1024)
    assert [d.start_address for d in p.a_descs] == [0, 32, 64, 96]
    assert [d.start_address for d in p.b_descs] == [0, 2048, 4096, 6144]
    assert p.b_box_offsets == (0, 8192, 16384, 24576) and p.b_box == (64, 64)
    assert p.a_consumer_offset == 64 * 128
    check_desc_matches(b0, p.b_layout, 16, "MN")
    pk = gemm_sm90_plan(GemmSm90Config(b_major="K"))
    assert (pk.b_descs[0].lbo, pk.b_descs[0].sbo) == (16, 1024) and pk.b_box == (64, 256)
    check_desc_matches(pk.b_descs[0], pk.b_layout, 16, "K")
    p8 = gemm_sm90_plan(GemmSm90Config(in_dtype="e4m3", b_major="K"))
    # e4m3: K step = 32 elements = 32 bytes, BK = 128 elements
    assert [d.start_address for d in p8.b_descs] == [0, 32, 64, 96]
    assert p8.b_box == (128, 256)
    pc = gemm_sm90_plan(GemmSm90Config(b_major="K", cluster_m=2))
    assert pc.b_box == (64, 128) and pc.b_box_offsets == (128 * 128,)


def test_launch_spec_8192() -> None:
    cfg = GemmSm90Config()
    s = gemm_sm90_launch_spec(cfg, 8192, 8192, 8192, 1 << 20, 2 << 20, 3 << 20)
    assert s.grid == (132, 1, 1) and s.block == (384, 1, 1) and s.cluster == (1, 1, 1)
    assert s.smem_bytes == cfg.smem_bytes <= 232448
    ta, tb, td = s.tensor_maps
    assert ta.global_dims == (8192, 8192) and ta.box_dims == (64, 128)
    assert tb.box_dims == (64, 64) and td.box_dims == (64, 64)
    assert ta.swizzle.name == tb.swizzle.name == td.swizzle.name == "SW128"
    np_ = gemm_sm90_launch_spec(GemmSm90Config(persistent=False), 8192, 8192, 8192)
    assert np_.grid == (64 * 32, 1, 1)
    rag = gemm_sm90_launch_spec(GemmSm90Config(persistent=False, cluster_m=2), 257, 264, 72)
    # 3 M blocks -> 4 (whole pairs) x 2 N blocks
    assert rag.grid == (4 * 2, 1, 1) and rag.cluster == (2, 1, 1)
    f32 = gemm_sm90_launch_spec(GemmSm90Config(out_dtype="f32", stages=3, b_major="K"), 64, 4, 8)
    assert f32.tensor_maps[2].box_dims == (32, 64)


@pytest.mark.parametrize(("m", "n", "k", "cfg", "msg"), [
    (64, 64, 12, GemmSm90Config(), "K = 12: a row of A"),
    (64, 12, 64, GemmSm90Config(), "N = 12: a row of B"),
    (64, 12, 64, GemmSm90Config(b_major="K", out_dtype="f32", stages=3), None),
    (64, 6, 64, GemmSm90Config(b_major="K", out_dtype="f32", stages=3), "N = 6: a row of D"),
    (64, 64, 8, GemmSm90Config(in_dtype="e4m3", b_major="K"), "K must be a multiple of 16"),
    (0, 64, 64, GemmSm90Config(), "M = 0 must be a positive int"),
])
def test_problem_errors(m: int, n: int, k: int, cfg: GemmSm90Config, msg: str | None) -> None:
    if msg is None:
        gemm_sm90_launch_spec(cfg, m, n, k)
        return
    with pytest.raises(GemmSm90Error, match=msg):
        gemm_sm90_launch_spec(cfg, m, n, k)


@pytest.mark.parametrize(("kw", "msg"), [
    (dict(in_dtype="f64"), "in_dtype 'f64' is not one of"),
    (dict(out_dtype="s8"), "out_dtype 's8' is not one of"),
    (dict(in_dtype="e4m3", out_dtype="f32"), "e4m3 inputs give bf16 output"),
    (dict(b_major="X"), "b_major 'X'"),
    (dict(in_dtype="e4m3"), "e4m3 WGMMA reads K-major operands only"),
    (dict(block_n=96), "block_n 96 is not a multiple of 64"),
    (dict(block_n=320), "block_n 320"),
    (dict(consumers=3), "consumers 3 is not 1 or 2"),
    (dict(stages=1), "stages 1 is not in 2..8"),
    (dict(raster_group=0), "raster_group 0 is not positive"),
    (dict(cluster_m=4), "cluster_m 4 is not 1 or 2"),
    (dict(cluster_m=2, raster_group=3), "cluster_m 2 needs an even raster_group"),
    (dict(cluster_m=2, block_n=64), "block_n must be at least 128"),
    (dict(wgmma_inflight=2), "wgmma_inflight 2 is not 0 or 1"),
    (dict(wgmma_inflight=1, stages=2), "needs at least 3 stages"),
    (dict(producer_regs=44), "producer_regs 44 is not a multiple of 8"),
    (dict(consumer_regs=160), "setmaxnreg: producer_regs 40 must be <= 168"),
    (dict(consumer_regs=248), "setmaxnreg budget"),
    (dict(tmap_address="ld"), "tmap_address 'ld'"),
    (dict(stages=5), "5 stages need 278624 bytes of shared memory"),
    (dict(block_n="256"), "block_n must be an int"),
])
def test_config_errors(kw: dict, msg: str) -> None:
    with pytest.raises(GemmSm90Error, match=msg):
        GemmSm90Config(**kw)


def test_b_major_of() -> None:
    assert b_major_of((64, 128), (128, 1)) == "MN"
    assert b_major_of((64, 128), (1, 64)) == "K"
    assert b_major_of((64, 128), (256, 2)) is None


def test_gemm_provider_dispatch() -> None:
    """nvatom.gemm picks this kernel on sm_90 for what TMA can describe, else the SM80 one."""
    from nvatom.gemm import GemmProblem, plan

    launch, target = plan(GemmProblem(8192, 8192, 8192, "bf16", "bf16", "K", "N"), (9, 0))
    assert (launch.provider, target) == ("sm90", "sm_90a")
    assert launch.grid == (132, 1, 1) and launch.block == (384, 1, 1)
    assert launch.shmem == default_config().smem_bytes and launch.cluster is None
    assert launch.source.params == kernel_params(default_config())
    assert ".entry " + default_config().name in launch.source.build(target)
    col = plan(GemmProblem(64, 64, 64, "f16", "f32", "K", "K"), (9, 0))[0]
    assert col.provider == "sm90" and "bK" in col.source.name
    for p in (GemmProblem(100, 104, 100, "bf16", "bf16", "K", "N"),  # K pitch 200 bytes
              GemmProblem(64, 64, 64, "bf16", "bf16", "M", "N")):  # column-major A
        assert plan(p, (9, 0))[0].provider == "sm80"
    assert plan(GemmProblem(64, 64, 64, "bf16", "bf16", "K", "N"), (8, 9))[0].provider == "sm80"


def test_leading_dimensions() -> None:
    s = gemm_sm90_launch_spec(GemmSm90Config(), 64, 128, 64, lda=72, ldb=136, ldd=192)
    assert [t.global_strides for t in s.tensor_maps] == [(144,), (272,), (384,)]
    with pytest.raises(GemmSm90Error, match="lda = 68 must be an int >= 64"):
        gemm_sm90_launch_spec(GemmSm90Config(), 64, 128, 64, lda=68)
    with pytest.raises(GemmSm90Error, match="ldd = 64 must be an int >= 128"):
        gemm_sm90_launch_spec(GemmSm90Config(), 64, 128, 64, ldd=64)
