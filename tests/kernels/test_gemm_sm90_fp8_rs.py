"""The promoted FP8 main loop with A from registers (``promote_rs``, docs/perf.md "FP8
promoted, session 5"): the ldmatrix row addresses produce WGMMA's ``.rs`` A fragment (checked
here against the PTX ISA's rules, written out in this file: the 128-byte swizzle, ldmatrix
.x4 and the 8-bit A register fragment), every variant assembles without spills or ptxas
warnings, the PTX has the expected instructions, and the configuration rules."""

from __future__ import annotations

import re

import pytest

from nvatom.kernels.sm90.config import GemmSm90Config, GemmSm90Error
from nvatom.kernels.sm90.gemm import build_gemm_sm90
from nvatom.kernels.sm90.mainloop_rs import _rs_lane_offset
from nvatom.kernels.sm90.plan import gemm_sm90_plan
from nvatom.runtime.ptxas import assemble

FP8 = {"in_dtype": "e4m3", "b_major": "K", "promote": 1}
RS = [
    GemmSm90Config(**FP8, promote_parts=2, promote_temps=1, promote_rs=True),
    GemmSm90Config(**FP8, promote_parts=2, promote_temps=1, promote_rs=True,
                   promote_rs_prefetch=True, scale_mode="row"),
    GemmSm90Config(**FP8, promote_parts=4, promote_temps=2, promote_rs=True),
    GemmSm90Config(**FP8, promote_parts=4, promote_temps=2, promote_rs=True,
                   promote_rs_prefetch=True),
    GemmSm90Config(**FP8, promote_parts=2, promote_temps=2, block_n=192, promote_rs=True,
                   scale_mode="row"),
    GemmSm90Config(**FP8, promote_parts=2, promote_temps=2, block_n=192, promote_rs=True,
                   promote_rs_prefetch=True),
    GemmSm90Config(in_dtype="e5m2", b_dtype="e4m3", b_major="K", promote=1, promote_parts=2,
                   promote_temps=2, block_n=192, promote_rs=True, promote_rs_prefetch=True),
    GemmSm90Config(**FP8, promote_parts=2, promote_temps=2, block_n=128, promote_rs=True,
                   scale_mode="block"),
]


def _sw128(byte: int) -> int:
    """PTX ISA, "Shared memory matrix layout", 128-byte swizzle: within each 1024-byte
    pattern the 16-byte chunk index (address bits 4-6) is xor-ed with the row within the
    pattern (bits 7-9)."""
    return byte ^ (((byte >> 7) & 7) << 4)


def _a_frag_isa(warp: int, lane: int, reg: int, step: int) -> list[tuple[int, int]]:
    """PTX ISA, "Register fragment" of wgmma's A for 8-bit types (m64nNk32): register
    ``reg`` of a thread holds 4 K-consecutive elements of row ``16 warp + groupID +
    8 (reg % 2)``, columns ``16 (reg // 2) + 4 threadID_in_group + 0..3`` of the k-step's
    64 x 32 block (K-step ``step`` is columns ``32 step ..`` of the K block)."""
    gid, tig = lane // 4, lane % 4
    row = 16 * warp + gid + 8 * (reg % 2)
    col = 32 * step + 16 * (reg // 2) + 4 * tig
    return [(row, col + e) for e in range(4)]


@pytest.mark.parametrize("consumer", [0, 1])
def test_ldmatrix_rows_give_the_rs_fragment(consumer: int) -> None:
    """Simulate ldmatrix.x4 (PTX ISA: lanes 8j..8j+7 give the row addresses of matrix j, 16
    bytes a row; lane t receives in register j the 32 bits 4 (t % 4).. of row t / 4 of matrix
    j) on a SW128 K-major A stage whose every byte is tagged with its (row, column), at the
    kernel's row addresses, and compare with the fragment formula."""
    cfg = RS[0]
    plan = gemm_sm90_plan(cfg)
    stage_base = 3 * cfg.a_stage_bytes  # any stage: 1024-byte aligned
    smem = {}
    for r in range(cfg.block_m):
        for c in range(128):  # K-major rows of 128 bytes, 1024-byte patterns of 8 rows
            smem[stage_base + _sw128(r * 128 + c)] = (r, c)
    for warp in range(4):
        for step in range(cfg.k_steps):
            rows = [stage_base + (consumer * plan.a_consumer_offset
                                  + _rs_lane_offset(lane, warp, step))
                    for lane in range(32)]
            for lane in range(32):
                for j in range(4):
                    addr = rows[8 * j + lane // 4] + 4 * (lane % 4)
                    got = [smem[addr + e] for e in range(4)]
                    want = [(64 * consumer + r, c) for r, c in
                            _a_frag_isa(warp, lane, j, step)]
                    assert got == want, (warp, lane, j, step)


@pytest.mark.parametrize("cfg", RS, ids=lambda c: c.name + ("_e5m2" if c.in_dtype == "e5m2"
                                                               else ""))
def test_rs_variants_assemble_without_spills(cfg: GemmSm90Config) -> None:
    res = assemble(build_gemm_sm90(cfg).emit(), "sm_90a")
    k = res.kernels[cfg.name]
    assert k.spill_stores == 0 and k.spill_loads == 0 and k.stack_frame == 0
    assert k.registers <= 168
    # no ptxas diagnostic at all: no injected fence (C7519), no serialised wgmma (C7514)
    assert not res.diagnostics, res.diagnostics


@pytest.mark.parametrize("cfg", RS[:4], ids=lambda c: c.name)
def test_rs_ptx_structure(cfg: GemmSm90Config) -> None:
    text = build_gemm_sm90(cfg).emit()
    pn = cfg.block_n // cfg.promote_parts
    rs = re.findall(rf"wgmma\.mma_async\.sync\.aligned\.m64n{pn}k32\.f32\.e4m3\.e4m3 "
                    r"\{[^}]*\}, \{(%r\d+), (%r\d+), (%r\d+), (%r\d+)\}, %rd\d+", text)
    assert len(rs) == cfg.promote_parts * cfg.k_steps  # every part's WGMMAs read registers
    ld = re.findall(r"ldmatrix\.sync\.aligned\.m8n8\.x4\.shared\.b16 "
                    r"\{(%r\d+), (%r\d+), (%r\d+), (%r\d+)\}", text)
    # once per K block (and the prefetch of the next one, into the same registers)
    assert len(ld) == cfg.k_steps * (2 if cfg.promote_rs_prefetch else 1)
    assert set(rs) == set(ld[:cfg.k_steps]) and len(set(rs)) == cfg.k_steps
    for s, regs in enumerate(ld[:cfg.k_steps]):  # part q's step s reads step s's registers
        assert all(rs[q * cfg.k_steps + s] == regs for q in range(cfg.promote_parts))
    assert text.count("add.f32") == cfg.block_n // 2
    assert "wgmma.wait_group.sync.aligned 0;" in text


def test_rs_names_and_rules() -> None:
    assert RS[0].name.endswith("_pr1n2t1rs")
    assert RS[1].name.endswith("_pr1n2t1rsp_rowscale")
    assert RS[0].part_form.a_source == "rs" and RS[0].part_form.n == 128
    assert GemmSm90Config(**FP8).part_form.a_source == "ss"
    # 192 + 8 (A's fragment for its descriptors) + 32 is just the default 232
    GemmSm90Config(**FP8, promote_parts=2, promote_temps=1, promote_rs=True)


@pytest.mark.parametrize(("kw", "msg"), [
    ({"promote_rs": True, "promote": 0}, "promote_rs loads A's fragment once per K block"),
    ({"promote_rs": True, "promote": 2}, "promote_rs loads A's fragment once per K block"),
    ({"promote_rs": True, "promote_parts": 4, "promote_temps": 2, "promote_pipelined": True},
     "promote_rs loads A's fragment once per K block"),
    ({"promote_rs": True, "schedule": "pingpong", "block_n": 128, "stages": 6},
     "promote_rs loads A's fragment once per K block"),
    ({"promote_rs_prefetch": True}, "promote_rs_prefetch loads A's next fragment early"),
    ({"promote_rs": 1}, "promote_rs and promote_rs_prefetch must be bools"),
    ({"promote_rs": True, "consumer_regs": 224},
     "promoted accumulators need 200 f32 registers.*with A's fragment"),
])
def test_rs_config_errors(kw: dict, msg: str) -> None:
    args = {**FP8, "promote_parts": 2, "promote_temps": 1, **kw}
    with pytest.raises(GemmSm90Error, match=msg):
        GemmSm90Config(**args)


# --------------------------------------------------------------------------- promote_unroll

UNROLLED = [
    GemmSm90Config(**FP8, promote_parts=2, promote_temps=2, block_n=192, promote_unroll=2),
    GemmSm90Config(**FP8, promote_parts=2, promote_temps=2, block_n=192, promote_unroll=4,
                   scale_mode="row"),
    GemmSm90Config(**FP8, promote_parts=4, promote_temps=2, promote_unroll=2),
    GemmSm90Config(**FP8, promote_parts=2, promote_temps=1, promote_unroll=2),
    # not measured yet: the 128 x 192 tile in n64 parts, as the wide default (3 parts)
    GemmSm90Config(**FP8, promote_parts=3, promote_temps=2, block_n=192, promote_unroll=4),
]


@pytest.mark.parametrize("cfg", UNROLLED, ids=lambda c: c.name)
def test_unrolled_assembles_without_spills(cfg: GemmSm90Config) -> None:
    res = assemble(build_gemm_sm90(cfg).emit(), "sm_90a")
    k = res.kernels[cfg.name]
    assert k.spill_stores == 0 and k.spill_loads == 0 and k.stack_frame == 0
    # no serialised wgmma (C7514, which promote_pipelined gets) and no injected fence
    assert not res.diagnostics, res.diagnostics


@pytest.mark.parametrize("cfg", [c for c in UNROLLED if c.promote_temps == 2],
                         ids=lambda c: c.name)
def test_unrolled_ptx_structure(cfg: GemmSm90Config) -> None:
    """The loop body runs ``promote_unroll`` K blocks, the leftover body one: WGMMAs, adds,
    stage releases and barrier waits per block; ``wait_group 0`` once per body; every
    WGMMA group but a body's last is retired with ``wait_group nt - 1`` after the next one
    is issued."""
    text = build_gemm_sm90(cfg).emit()
    loop = text[text.index("promoted main loop,"):text.index("epilogue:")]
    blocks = cfg.promote_unroll + 1
    pn = cfg.block_n // cfg.promote_parts
    assert loop.count(f".m64n{pn}k32.f32.e4m3.e4m3") == blocks * cfg.promote_parts * 4
    assert loop.count("add.f32") == blocks * cfg.block_n // 2
    assert loop.count("mbarrier.try_wait.parity") == blocks  # one full[] wait per block
    assert loop.count("mbarrier.arrive") == blocks  # one release per block
    assert loop.count("wgmma.wait_group.sync.aligned 0;") == 2  # once per body
    units = blocks * cfg.promote_parts
    assert loop.count("wgmma.wait_group.sync.aligned 1;") == units - 2
    assert loop.count("wgmma.commit_group") == units


@pytest.mark.parametrize(("kw", "msg"), [
    ({"promote_unroll": 3}, "promote_unroll 3 is not 1, 2 or 4"),
    ({"promote_unroll": True}, "promote_unroll True is not 1, 2 or 4"),
    ({"promote_unroll": 2, "promote": 2}, "promote_unroll 2 runs several K blocks"),
    ({"promote_unroll": 2, "promote_rs": True}, "promote_unroll 2 runs several K blocks"),
    ({"promote_unroll": 4, "schedule": "pingpong", "consumers": 2, "block_n": 128},
     "promote_unroll 4 runs several K blocks"),
])
def test_unroll_config_errors(kw: dict, msg: str) -> None:
    args = {**FP8, "promote_parts": 2, "promote_temps": 1, **kw}
    with pytest.raises(GemmSm90Error, match=msg):
        GemmSm90Config(**args)
