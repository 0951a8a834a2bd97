"""The SM90 GEMM kernel on the CPU: every offered configuration assembles for
sm_90a without spills and with setmaxnreg honoured; the descriptors the kernel derives from
its shared-memory layouts have the strides the PTX ISA's canonical SW128 forms prescribe;
launch specs and tensor maps; every configuration and problem error."""

from __future__ import annotations

import dataclasses
import re

import pytest

from nvatom.descriptors.wgmma import check_desc_matches
from nvatom.kernels.sm90.config import GemmSm90Config, GemmSm90Error, b_major_of
from nvatom.kernels.sm90.gemm import build_gemm_sm90
from nvatom.kernels.sm90.launch import default_config, gemm_sm90_launch_spec, kernel_params
from nvatom.kernels.sm90.plan import gemm_sm90_plan
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
    # the ping-pong schedule (the bf16/f16 default): 128 x 128 per consumer warpgroup
    GemmSm90Config(schedule="pingpong", block_n=128, stages=6),
    GemmSm90Config(schedule="pingpong", block_n=128, stages=6, in_dtype="f16", out_dtype="f32",
                   b_major="K"),
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
    # one K block of wgmma per stage (ping-pong: for each of the warpgroup's two 64-row halves)
    assert text.count(cfg.form.opcode) == cfg.k_steps * (2 if cfg.pingpong else 1)
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
    (2048 bytes).  (PTX ISA "Matrix Descriptor Format"; CUTLASS make_wgmma_desc.)"""
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
    cfg = default_config(m=8192, n=8192)  # the schedule by wave count: ping-pong 128 x 192
    assert (cfg.schedule, cfg.block_n) == ("pingpong", 192)
    assert launch.shmem == cfg.smem_bytes and launch.cluster is None
    assert launch.source.params == kernel_params(cfg)
    assert ".entry " + cfg.name in launch.source.build(target)
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


# --------------------------------------------------------------------------- FP8 (issue 18)

from nvatom.kernels.sm90.promotion import _promote_map  # noqa: E402
from nvatom.kernels.sm90.row_scales import _check_row_cols, _row_col_base  # noqa: E402

FP8 = {"in_dtype": "e4m3", "b_major": "K"}
# every FP8 main loop and epilogue the kernel offers: the default (promoted, 128 x 192, two
# parts, two temporaries) with per-tensor and row-wise scales, fast accumulation, e5m2 on
# either side, one temporary, a multi-block promotion group (runtime loop), the pipelined
# form, one consumer, a 2-CTA cluster
FP8_CONFIGS = [
    default_config("e4m3"),
    default_config("e4m3", scale_mode="row"),
    default_config("e4m3", scale_mode="row", m=4096, n=4096),  # the wide tile by wave count
    default_config("e4m3", fast_accum=True, scale_mode="row"),
    default_config("e4m3", b_dtype="e5m2"),
    default_config("e5m2", b_dtype="e4m3", scale_mode="row"),
    default_config("e5m2", fast_accum=True),
    GemmSm90Config(**FP8, promote=1, promote_parts=2, promote_temps=1),
    GemmSm90Config(**FP8, promote=3, promote_parts=4, promote_temps=2),
    GemmSm90Config(**FP8, promote=1, promote_parts=2, promote_temps=2, block_n=192,
                   promote_pipelined=True),
    GemmSm90Config(**FP8, promote=1, promote_parts=2, promote_temps=2, block_n=128, stages=6,
                   consumers=1),
    GemmSm90Config(**FP8, promote=1, promote_parts=2, promote_temps=2, block_n=192,
                   cluster_m=2, scale_mode="row"),
]


@pytest.mark.parametrize("cfg", FP8_CONFIGS, ids=lambda c: c.name)
def test_fp8_configs_assemble(cfg: GemmSm90Config) -> None:
    res = assemble(build_gemm_sm90(cfg).emit(), "sm_90a")
    k = res.kernels[cfg.name]
    assert k.spill_stores == 0 and k.spill_loads == 0 and k.stack_frame == 0
    assert k.registers <= 168
    assert not [d for d in res.diagnostics if d.severity != "info"], res.diagnostics
    codes = " ".join(d.message for d in res.diagnostics)
    # no fence injected by ptxas where promotion is every K block (the fence follows the
    # barrier wait); a multi-block group's runtime loop still gets some (docs/gemm-sm90.md)
    assert ("C7519" in codes) == (cfg.promote > 1)
    # the pipelined form is serialised by ptxas (C7514): why it is not the default
    assert ("C7514" in codes) == cfg.promote_pipelined


def _acc_formula(n: int, t: int, i: int) -> tuple[int, int]:
    """PTX ISA, "wgmma ... Matrix fragments for the accumulator D" (m64nNk*, f32): thread t
    of the warpgroup holds rows 16 * warp + t % 32 // 4 (+ 8 for the second pair of each
    four) and columns 8 * (i // 4) + 2 * (t % 4) + i % 2."""
    return 16 * (t // 32) + (t % 32) // 4 + 8 * ((i // 2) % 2), 8 * (i // 4) + 2 * (t % 4) + i % 2


@pytest.mark.parametrize(("bn", "parts"), [(256, 2), (192, 2), (192, 4), (128, 1)])
def test_promote_map_is_the_fragment_formula(bn: int, parts: int) -> None:
    pn = bn // parts
    for q in range(parts):
        got = _promote_map(bn, pn, q)
        for t in (0, 5, 37, 127):
            where = {_acc_formula(bn, t, j): j for j in range(bn // 2)}
            for i in range(pn // 2):
                r, c = _acc_formula(pn, t, i)
                assert got[i] == where[(r, c + q * pn)]
        assert sorted(got) == list(range(q * pn // 2, (q + 1) * pn // 2))


def test_promoted_ptx_structure() -> None:
    cfg = default_config("e4m3")
    assert (cfg.block_n, cfg.promote, cfg.promote_parts, cfg.promote_temps) == (192, 1, 2, 2)
    text = build_gemm_sm90(cfg).emit()
    part = cfg.part_form
    assert part.opcode.startswith("wgmma.mma_async.sync.aligned.m64n96k32.f32.e4m3.e4m3")
    assert text.count(part.opcode) == cfg.promote_parts * cfg.k_steps
    assert text.count("add.f32") == cfg.block_n // 2  # every accumulator once per K block
    assert "wgmma.wait_group.sync.aligned 1;" in text  # part 1 runs while part 0 is added
    # the B part offsets come from the smem layout: part q starts at row q * 96 (K-major)
    assert gemm_sm90_plan(cfg).b_part_offsets == (0, 96 * 128)
    fast = build_gemm_sm90(default_config("e4m3", fast_accum=True)).emit()
    assert "add.f32" not in fast


def test_row_scale_epilogue_ptx() -> None:
    staged = default_config("e4m3", scale_mode="row")
    assert staged.row_scale_stage  # the default: scales staged in shared memory
    cfg = dataclasses.replace(staged, row_scale_stage=False)
    text = build_gemm_sm90(cfg).emit()
    assert text.count("ld.global.nc.v2.f32") == cfg.block_n // 8  # scale_b pairs
    assert text.count("mad.wide.u32") == 2 + cfg.block_n // 8  # 2 rows + column pairs
    assert text.count("min.u32") >= 2  # rows past M read scale_a[M - 1]
    tensor = build_gemm_sm90(default_config("e4m3")).emit()
    assert "ld.global.nc.v2.f32" not in tensor and tensor.count("ld.global.nc.f32") == 2
    # staged: one 4-byte copy of scale_a a thread (threads 0..63), block_n / 256 rounds of
    # 8-byte scale_b pairs, one commit; the epilogue waits, syncs and reads shared memory
    st = build_gemm_sm90(staged).emit()
    assert "ld.global.nc" not in st.split("row-wise scales: acc")[1].split("epilogue")[0]
    assert st.count("cp.async.ca.shared.global [") == 1 + -(-staged.block_n // 256)
    assert re.search(r"cp\.async\.ca\.shared\.global \[%r\d+\], \[%rd\d+\], 4;", st)
    assert len(re.findall(r"cp\.async\.ca\.shared\.global \[%r\d+\], \[%rd\d+\], 8;",
                          st)) == -(-staged.block_n // 256)
    assert st.count("cp.async.commit_group") == 1 and st.count("cp.async.wait_all") == 1
    assert st.count("ld.shared.v2.f32") == staged.block_n // 8
    assert st.count("ld.shared.f32") == 2
    assert staged.smem_bytes == cfg.smem_bytes + 2 * 4 * (64 + staged.block_n)
    res = assemble(st, "sm_90a")  # the cp.async forms and the wait, through ptxas
    assert res.kernel().spills == 0 and not res.diagnostics
    _check_row_cols(256)  # the epilogue's row/column offsets against the fragment formula
    for t in range(128):
        assert _row_col_base(t) == _acc_formula(256, t, 0)


def test_fp8_names_params_and_defaults() -> None:
    assert default_config("e4m3", b_dtype="e5m2").name.startswith("gemm_sm90_e4m3xe5m2_bf16")
    assert default_config("e5m2", b_dtype="e5m2").b_dtype == ""
    assert default_config("e4m3", scale_mode="row").name.endswith("_pr1n2t2_rowscale_staged")
    fast = default_config("e4m3", fast_accum=True)
    assert (fast.promote, fast.block_n) == (0, 256)
    for c in FP8_CONFIGS:
        assert kernel_params(c)[-2:] == (("scale_a", "u64"), ("scale_b", "u64"))
    assert default_config("e5m2").form.opcode.endswith(".e5m2.e5m2")
    assert GemmSm90Config(**FP8, b_dtype="e5m2").form.opcode.endswith(".e4m3.e5m2")


@pytest.mark.parametrize(("kw", "msg"), [
    ({"promote": 1}, "the promoted main loop is for FP8 operands"),
    ({**FP8, "promote": 4}, "promote 4 is not in 1..3"),
    ({**FP8, "promote": 1, "promote_parts": 3}, "promote_parts 3 does not split block_n 256"),
    ({**FP8, "promote": 1, "promote_parts": 64}, "promote_parts 64 does not split"),
    ({**FP8, "promote": 1, "promote_temps": 3}, "promote_temps 3 is not 1 or 2"),
    ({**FP8, "promote": 1, "promote_parts": 1, "promote_temps": 2}, "promote_temps 2 > "),
    ({**FP8, "promote": 1, "promote_parts": 1}, "promoted accumulators need 256 f32"),
    ({**FP8, "promote": 2, "promote_parts": 4, "promote_temps": 2, "promote_pipelined": True},
     "promote_pipelined needs promote 1, promote_temps 2 and an even promote_parts"),
    ({**FP8, "promote_pipelined": True}, "promote_pipelined needs the promoted main loop"),
    ({**FP8, "promote": 1, "promote_pipelined": 1}, "promote_pipelined must be a bool"),
    ({**FP8, "promote": True}, "promote must be an int"),
    ({"b_dtype": "e5m2"}, "b_dtype 'e5m2': a separate B type is one of e4m3, e5m2, with FP8 A"),
    ({**FP8, "b_dtype": "bf16"}, "b_dtype 'bf16'"),
    ({**FP8, "scale_mode": "blocks"}, "scale_mode 'blocks' is not one of tensor, row, block"),
    ({"scale_mode": "row"}, "scale_mode 'row' applies to FP8 operands only"),
    ({"in_dtype": "e5m2", "b_major": "MN"}, "e5m2 WGMMA reads K-major operands only"),
    ({"in_dtype": "e5m2", "b_major": "K", "out_dtype": "f32"}, "e5m2 inputs give bf16"),
    # staged row-wise scales: row-wise, plain, cooperative only
    ({**FP8, "row_scale_stage": True}, "row_scale_stage stages row-wise scales of the "
     r"cooperative plain kernel \(got scale_mode 'tensor', grouped False, schedule "
     "'cooperative'\\)"),
    ({**FP8, "scale_mode": "row", "row_scale_stage": True, "grouped": True},
     "grouped True"),
    ({**FP8, "scale_mode": "row", "row_scale_stage": True, "schedule": "pingpong",
      "block_n": 128, "stages": 6}, "schedule 'pingpong'"),
])
def test_fp8_config_errors(kw: dict, msg: str) -> None:
    with pytest.raises(GemmSm90Error, match=msg):
        GemmSm90Config(**kw)


def test_fp8_provider_configs() -> None:
    """The provider maps the problem's FP8 options onto the kernel's configuration."""
    from nvatom.gemm import GemmProblem, plan
    from nvatom.gemm_providers import Sm90Provider

    pv = Sm90Provider()
    base = GemmProblem(256, 384, 512, "e4m3", "bf16", "K", "K", scale_mode="tensor")
    assert pv._config(base) == default_config("e4m3")
    row = GemmProblem(256, 384, 512, "e5m2", "bf16", "K", "K", b_dtype="e4m3",
                      scale_mode="row", fast_accum=True)
    assert pv._config(row) == default_config("e5m2", b_dtype="e4m3", scale_mode="row",
                                             fast_accum=True)
    tuned = Sm90Provider(GemmSm90Config(**FP8, promote=1, promote_parts=4, promote_temps=2))
    assert tuned._config(row).promote == 0 and tuned._config(row).scale_mode == "row"
    assert tuned._config(base).promote == 1
    launch = plan(row, (9, 0), [pv])[0]
    assert launch.source.name == default_config("e5m2", b_dtype="e4m3", scale_mode="row",
                                                fast_accum=True).name
    bad = GemmProblem(256, 384, 512, "e4m3", "bf16", "K", "K", b_dtype="bf16")
    assert pv.reject(bad, (9, 0)) == "no kernel for e4m3 x bf16"
