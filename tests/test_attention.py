"""The SM90 attention kernel on the CPU: the P retile against the PTX ISA's fragment formulas
(written out here, independently of nvatom.atoms.wgmma_fragments), the shared-memory plan
against the SW128 address formula, the TMA epilogue's stmatrix placement (registers and row
addresses) against the ISA's D and stmatrix formulas and the SW128 formula, every
configuration we ship (and both epilogues) assembled by ptxas for sm_90a (no spills, no
stack), and bad input refused with AttentionError naming the value."""

from __future__ import annotations

import dataclasses
import importlib
from typing import Any

import pytest

from nvatom.errors import NvatomError
from nvatom.kernels.sm90.attention import build_attention_sm90
from nvatom.kernels.sm90.attention_config import (
    EPILOGUES,
    HEAD_DIMS,
    AttentionSm90Config,
    AttentionSm90Error,
    default_config,
)
from nvatom.kernels.sm90.attention_launch import kernel_params, tensor_maps
from nvatom.kernels.sm90.attention_plan import attention_plan, o_retile, p_retile, stsm_lane_offset
from nvatom.runtime.ptxas import assemble

A = importlib.import_module("nvatom.attention")  # the module (nvatom.attention: the function)


# ----------------------------------------------------------------------------- ISA formulas
def _isa_d(thread: int, i: int) -> tuple[int, int]:
    """PTX ISA, wgmma "Register Fragments", D (m64nN, f32): row, column of d_i."""
    warp, lane = thread // 32, thread % 32
    group, tig = lane // 4, lane % 4
    return 16 * warp + group + 8 * ((i // 2) % 2), 8 * (i // 4) + 2 * tig + i % 2


def _isa_a16(thread: int, reg: int, half: int) -> tuple[int, int]:
    """PTX ISA, wgmma A in registers, 16-bit (m64k16): row, column of the ``half``-th element
    (0: bits 0-15) of register ``reg`` (a0..a3)."""
    warp, lane = thread // 32, thread % 32
    group, tig = lane // 4, lane % 4
    return 16 * warp + group + 8 * (reg % 2), 8 * (reg // 2) + 2 * tig + half


@pytest.mark.parametrize("bn", [64, 128, 176])
def test_p_retile_is_the_isa_packing(bn: int) -> None:
    retile = p_retile(bn)
    assert len(retile) == bn // 16
    for t in (0, 1, 5, 31, 32, 77, 127):
        where = {_isa_d(t, i): i for i in range(bn // 2)}
        for kk in range(bn // 16):
            for r in range(4):
                for h in range(2):
                    row, col = _isa_a16(t, r, h)
                    assert retile[kk][r][h] == where[(row, col + 16 * kk)]
    # ... which is the identity packing: A register r of K step kk = (S[8kk+2r], S[8kk+2r+1])
    assert retile == tuple(tuple((8 * kk + 2 * r, 8 * kk + 2 * r + 1) for r in range(4))
                           for kk in range(bn // 16))


def _sw128(row: int, col: int, rows: int) -> int:
    """Byte address of 16-bit (row, col) of a K-major tile stored as 64-column chunks of
    ``rows`` x 128 bytes, each row's 16-byte units XOR-swizzled by row % 8 (SW128)."""
    chunk, c = divmod(col, 64)
    return chunk * rows * 128 + row * 128 + ((c * 2 // 16) ^ (row % 8)) * 16 + (c * 2) % 16


@pytest.mark.parametrize("d", [64, 128, 256])
def test_plan_matches_the_sw128_formula(d: int) -> None:
    cfg = default_config("bf16", d)
    plan = attention_plan(cfg)
    bn = cfg.block_n
    for r, c in ((0, 0), (5, 17), (64, 0), (127, d - 1), (9, 70 % d)):
        assert plan.q_layout((r, c)) * 2 == _sw128(r, c, 128)
    for r, c in ((0, 0), (bn - 1, d - 1), (13, 33)):
        assert plan.k_layout((r, c)) * 2 == _sw128(r, c, bn)
    # V is (N = d, K = bn) MN-major: element (n, k) in 64-wide chunks of bn rows (k) of 128 B
    for n, kk in ((0, 0), (63, 1), (min(64, d - 1), 0), (d - 1, bn - 1)):
        chunk, nn = divmod(n, 64)
        want = chunk * bn * 128 + kk * 128 + ((nn * 2 // 16) ^ (kk % 8)) * 16 + (nn * 2) % 16
        assert plan.v_layout((n, kk)) * 2 == want
    assert plan.q_consumer_offset == 64 * 128
    assert [dd.start_address for dd in plan.q_descs] == [_sw128(0, 16 * s, 128)
                                                         for s in range(d // 16)]
    assert [dd.start_address for dd in plan.v_descs] == [16 * s * 128 for s in range(bn // 16)]
    assert {dd.sbo for dd in plan.q_descs + plan.k_descs + plan.v_descs} == {1024}


def _isa_stsm(lane: int, reg: int, half: int) -> tuple[int, int, int]:
    """PTX ISA, stmatrix .m8n8.x4 .b16: (matrix, row, column) of the ``half``-th element of
    register ``reg`` (r0..r3 go to matrices 0..3): "a group of four threads" holds a row,
    lane l elements 2 (l % 4) and 2 (l % 4) + 1 of row l / 4; lane 8 j + r gives the
    address of row r of matrix j."""
    return reg, lane // 4, 2 * (lane % 4) + half


@pytest.mark.parametrize("d", [64, 128, 256])
def test_tma_epilogue_places_every_o_value(d: int) -> None:
    """End to end: every O value of every thread, through the stmatrix register it is packed
    into (o_retile) and the row address of the lane that names its matrix row (the kernel's
    stsm_lane_offset, one XOR per 16-column block, plus the consumer's half and the chunk),
    lands at the SW128 address of its (row, column) -- in both consumers' halves."""
    plan = attention_plan(default_config("bf16", d))
    retile = o_retile(d)
    assert len(retile) == d // 16
    for cw in (0, 1):
        for t in (0, 1, 6, 31, 32, 45, 99, 127):
            warp, lane = divmod(t, 32)
            where = {_isa_d(t, i): i for i in range(d // 2)}
            for blk in range(d // 16):
                chunk, q = divmod(blk, 4)
                for reg in range(4):
                    for half in range(2):
                        j, r, c = _isa_stsm(lane, reg, half)
                        row_lane = 8 * j + r  # the lane whose address is matrix j's row r
                        addr = (cw * plan.q_consumer_offset + plan.q_boxes[chunk]
                                + (stsm_lane_offset(warp, row_lane) ^ (32 * q)) + 2 * c)
                        i = retile[blk][reg][half]  # the O value packed there
                        orow, ocol = _isa_d(t, i)
                        assert where[(orow, ocol)] == i
                        assert addr == _sw128(64 * cw + orow, ocol, 128), (cw, t, blk, reg)
    # the 64 x 64 TMA box of consumer cw, chunk c: contiguous 8 KB, the SW128 box layout
    for cw in (0, 1):
        for c in range(d // 64):
            start = cw * plan.q_consumer_offset + plan.q_boxes[c]
            assert start % 1024 == 0
            for r, x in ((0, 0), (7, 9), (63, 63), (40, 17)):
                assert _sw128(64 * cw + r, 64 * c + x, 128) == start + _sw128(r, x, 64)


def test_o_retile_is_the_identity_packing() -> None:
    assert o_retile(128) == tuple(tuple((8 * b + 2 * r, 8 * b + 2 * r + 1) for r in range(4))
                                  for b in range(8))


def test_tensor_map_of_o() -> None:
    cfg = default_config("bf16", 128)
    shape = (2, 8, 100, 128)
    strides = (8 * 100 * 128, 100 * 128, 128, 1)
    kv = (1 << 21, (2, 2, 120, 128), (2 * 120 * 128, 120 * 128, 128, 1))
    maps = tensor_maps(cfg, (1 << 20, shape, strides), kv, kv, (1 << 22, shape, strides))
    assert len(maps) == 4
    o = maps[3]
    assert o.global_address == 1 << 22
    assert tuple(o.global_dims) == (128, 100, 8, 2)
    assert tuple(o.box_dims) == (64, 64, 1, 1)
    assert len(tensor_maps(cfg, (1 << 20, shape, strides), kv, kv)) == 3
    assert [n for n, _ in kernel_params()][:4] == ["tmap_q", "tmap_k", "tmap_v", "tmap_o"]


_SHIPPED = [default_config(t, d, c) for t in ("bf16", "f16") for d in HEAD_DIMS
            for c in (False, True)]


_VARIANTS = [
    dataclasses.replace(default_config("bf16", 128), pingpong=True),
    dataclasses.replace(default_config("bf16", 128), overlap=False),
    dataclasses.replace(default_config("bf16", 128), split_release=False, block_n=176),
    *(dataclasses.replace(default_config("bf16", d, d == 256), epilogue=e)
      for d in HEAD_DIMS for e in EPILOGUES
      if e != default_config("bf16", d, d == 256).epilogue),
]


@pytest.mark.parametrize("cfg", [*_SHIPPED, *_VARIANTS], ids=lambda c: c.name)
def test_every_config_assembles_without_spills(cfg: AttentionSm90Config) -> None:
    res = assemble(build_attention_sm90(cfg).emit(), "sm_90a").kernel(cfg.name)
    assert res.spills == 0 and res.stack_frame == 0, res


@pytest.mark.parametrize(("kw", "needle"), [
    (dict(dtype="f32"), "'f32'"),
    (dict(head_dim=96), "96"),
    (dict(block_n=100), "100"),
    (dict(stages=1), "stages 1"),
    (dict(head_dim=256, block_n=192, stages=4), "shared memory"),
    (dict(overlap=False, pingpong=True), "pingpong"),
    (dict(consumer_regs=256, producer_regs=32), "registers"),
    (dict(epilogue="smem"), "epilogue 'smem'"),
])
def test_config_errors(kw: dict[str, Any], needle: str) -> None:
    with pytest.raises(AttentionSm90Error) as ei:
        AttentionSm90Config(**kw)
    assert needle in str(ei.value)


# ----------------------------------------------------------------------------- bad input
@dataclasses.dataclass(frozen=True)
class _Dev:
    type: str
    index: int = 0

    def __str__(self) -> str:
        return self.type if self.type == "cpu" else f"{self.type}:{self.index}"


@dataclasses.dataclass
class _Fake:
    """What the checks read of a torch tensor."""

    shape: tuple[int, ...]
    dtype: str = "torch.bfloat16"
    dev: str = "cuda"
    strides: tuple[int, ...] | None = None
    ptr: int = 1 << 20
    index: int = 0

    @property
    def device(self) -> Any:
        return _Dev(self.dev, self.index)

    def stride(self) -> tuple[int, ...]:
        if self.strides is not None:
            return self.strides
        out, acc = [], 1
        for n in reversed(self.shape):
            out.append(acc)
            acc *= n
        return tuple(reversed(out))

    def data_ptr(self) -> int:
        return self.ptr


def _qkv(**over: Any) -> dict[str, Any]:
    t = {"q": _Fake((2, 8, 100, 128)), "k": _Fake((2, 2, 120, 128)),
         "v": _Fake((2, 2, 120, 128))}
    t.update(over)
    return t


def test_good_input_is_accepted() -> None:
    p = A.check_inputs(**_qkv(), causal=True)
    assert (p.batch, p.heads, p.kv_heads, p.group, p.seqlen_q, p.seqlen_k, p.head_dim) == \
        (2, 8, 2, 4, 100, 120, 128)
    assert p.scale == pytest.approx(128 ** -0.5)
    # (B, S, H, D) storage seen as (B, H, S, D): the strides transpose() gives
    q = _Fake((2, 8, 100, 128), strides=(100 * 8 * 128, 128, 8 * 128, 1))
    assert A.check_inputs(**_qkv(q=q)).heads == 8


@pytest.mark.parametrize(("over", "kw", "needle"), [
    (dict(q=_Fake((2, 8, 100, 128), dev="cpu")), {}, "q is on device 'cpu'"),
    (dict(k=_Fake((2, 2, 120, 128), dtype="torch.float32")), {}, "k has dtype float32"),
    (dict(v=_Fake((2, 2, 120, 128), dtype="torch.float16")), {}, "bf16, bf16, f16"),
    (dict(q=_Fake((8, 100, 128))), {}, "q has shape (8, 100, 128)"),
    (dict(v=_Fake((2, 2, 121, 128))), {}, "v has (2, 2, 121, 128)"),
    (dict(k=_Fake((3, 2, 120, 128)), v=_Fake((3, 2, 120, 128))), {}, "batch 2"),
    (dict(k=_Fake((2, 2, 120, 64)), v=_Fake((2, 2, 120, 64))), {}, "head_dim 128 but"),
    (dict(q=_Fake((2, 8, 100, 96)), k=_Fake((2, 2, 120, 96)), v=_Fake((2, 2, 120, 96))), {},
     "head_dim 96 is not supported"),
    (dict(k=_Fake((2, 3, 120, 128)), v=_Fake((2, 3, 120, 128))), {}, "8 heads and k, v have 3"),
    (dict(q=_Fake((2, 8, 100, 128), strides=(204800, 25600, 1, 100))), {},
     "head dimension must be contiguous"),
    (dict(k=_Fake((2, 2, 120, 128), strides=(30736, 15362, 128, 1))), {},
     "head stride (15362 elements)"),
    (dict(v=_Fake((2, 2, 120, 128), ptr=(1 << 20) + 2)), {}, "not 16-byte aligned"),
    (dict(q=[[1.0]]), {}, "q is a list"),
    ({}, dict(scale=-1.0), "scale = -1.0"),
    ({}, dict(scale=float("nan")), "scale = nan"),
    ({}, dict(causal=1), "causal = 1"),
    ({}, dict(scale=True), "scale = True"),
    # fuzz finding (issue 28): 10**400 raised OverflowError from math.isfinite
    ({}, dict(scale=10**400), "scale = an integer of 1329 bits must be a positive finite"),
    ({}, dict(scale=-(10**400)), "scale = an integer of 1329 bits"),
    ({}, dict(scale=3e38), "scale = 3e+38 must be a positive finite number below 2.359e+38"),
    ({}, dict(scale=float("inf")), "scale = inf"),
    ({}, dict(scale="0.1"), "scale = '0.1'"),
    ({}, dict(window=(1, 2, 3)), "window = (1, 2, 3): a pair (left, right)"),
    ({}, dict(window=5), "window = 5: a pair"),
    ({}, dict(window=(-2, 0)), "window left = -2: an int, -1 (unbounded)"),
    ({}, dict(window=(0, True)), "window right = True"),
    ({}, dict(window=(0, 2**31)), "window right = 2147483648"),
    ({}, dict(softcap=-1.0), "softcap = -1.0 must be 0 (none) or a positive"),
    ({}, dict(softcap=float("inf")), "softcap = inf"),
    ({}, dict(softcap=1e-45), "softcap = 1e-45"),
    ({}, dict(softcap="30"), "softcap = '30'"),
    (dict(v=_Fake((2, 2, 120, 128), index=1)), {}, "cuda:0, cuda:0, cuda:1; they must share"),
    (dict(k=_Fake((2, 2, 0, 128)), v=_Fake((2, 2, 0, 128))), {},
     "k and v have sequence length 0: at least one key"),
    (dict(k=_Fake((2, 0, 120, 128)), v=_Fake((2, 0, 120, 128))), {}, "8 heads and k, v have 0"),
    (dict(q=_Fake((4096, 64, 64, 128)), k=_Fake((4096, 64, 64, 128)),
          v=_Fake((4096, 64, 64, 128))), {}, "more than 2^31 - 1 elements"),
    (dict(q=_Fake((2, 8, 100, 128), strides=(102400, 12800, 0, 1))), {},
     "the sequence stride must be positive"),
    (dict(q=_Fake((2, 8, 100, 128), strides=(51200, 6400, 64, 1))), {},
     "rows overlap (sequence stride 64 < head_dim 128)"),
])
def test_bad_input_is_named(over: dict[str, Any], kw: dict[str, Any], needle: str) -> None:
    with pytest.raises(A.AttentionError) as ei:
        A.check_inputs(**_qkv(**over), **kw)
    assert isinstance(ei.value, NvatomError)
    assert needle in str(ei.value), str(ei.value)


def test_nvatom_attention_is_lazy_and_callable() -> None:
    import nvatom

    # the function, or this module (callable) once nvatom.attention was imported as a module
    assert nvatom.attention in (A.attention, A)
    assert "attention" in nvatom.__all__
    with pytest.raises(A.AttentionError, match="q is on device 'cpu'"):
        A(**_qkv(q=_Fake((2, 8, 100, 128), dev="cpu")))


@pytest.mark.parametrize(("d", "causal"), [(64, False), (128, True), (256, False)])
def test_softcap_kernel(d: int, causal: bool) -> None:
    """A softcap configuration: one more f32 parameter (scale / softcap), every S score
    multiplied by it and passed through tanh.approx.f32 before the mask (PTX ISA "tanh"),
    assembled without spills; the other configurations' PTX is unchanged (the fingerprint)."""
    cfg = default_config("bf16", d, causal, softcap=True)
    assert cfg.name.endswith("_cap")
    ptx = build_attention_sm90(cfg).emit()
    res = assemble(ptx, "sm_90a").kernel(cfg.name)
    assert res.spills == 0 and res.stack_frame == 0, res
    assert kernel_params(cfg)[-1] == ("softcap_pre", "f32")
    assert kernel_params(default_config("bf16", d, causal))[-1] == ("scale_log2", "f32")
    assert ".param .f32 softcap_pre" in ptx
    # per S tile a consumer holds block_n / 2 scores; two mask sites (the first tile and the
    # loop body, overlapped or not) each cap all of them
    assert ptx.count("tanh.approx.f32") == 2 * cfg.block_n // 2
    assert "tanh.approx" not in build_attention_sm90(default_config("bf16", d, causal)).emit()
    plain = dataclasses.replace(cfg, overlap=False, pingpong=False)  # the other loop body
    ptx = build_attention_sm90(plain).emit()
    assert ptx.count("tanh.approx.f32") == cfg.block_n
    assert assemble(ptx, "sm_90a").kernel(plain.name).spills == 0


def test_softcap_problem() -> None:
    p = A.check_inputs(**_qkv(), softcap=30)
    assert p.softcap == 30.0 and "softcap=30.0" in repr(p)
    assert A.check_inputs(**_qkv(), softcap=0).softcap == 0.0


@pytest.mark.parametrize(("d", "causal", "softcap"), [(64, False, False), (128, True, False),
                                                       (256, False, True)])
def test_window_kernel(d: int, causal: bool, softcap: bool) -> None:
    """A sliding-window configuration: two more u32 parameters (left, right), the KV walk
    starting at the window's first tile (the producer's coordinates and the consumers' mask
    offset both shifted), both edges masked; assembled without spills, both loop bodies;
    the other configurations' PTX unchanged (the fingerprint)."""
    cfg = default_config("bf16", d, causal, softcap=softcap, window=True)
    assert cfg.name.endswith("_win")
    assert kernel_params(cfg)[-2:] == (("win_left", "u32"), ("win_right", "u32"))
    for c in (cfg, dataclasses.replace(cfg, overlap=False, pingpong=False)):
        ptx = build_attention_sm90(c).emit()
        assert assemble(ptx, "sm_90a").kernel(c.name).spills == 0
        assert ".param .u32 win_left" in ptx and ".param .u32 win_right" in ptx
        # the left edge: one setp.ge.and per score of each of the two mask sites
        assert ptx.count("setp.ge.and.s32") == 2 * c.block_n // 2


def test_window_problem() -> None:
    """Effective window edges: -1 (unbounded) as far as the sequences reach, the right edge
    0 under a causal mask (the diagonal); a window that covers everything is none."""
    qkv = _qkv()  # Sq 100, Sk 120
    p = A.check_inputs(**qkv, window=(16, -1))
    assert p.windowed and p.window_params() == (16, 120)
    p = A.check_inputs(**qkv, window=(-1, 4))
    assert p.windowed and p.window_params() == (220, 4)
    p = A.check_inputs(**qkv, window=(-1, 4), causal=True)
    assert not p.windowed  # the causal mask is stricter than right = 4
    p = A.check_inputs(**qkv, window=(7, 3), causal=True)
    assert p.windowed and p.window_params() == (7, 0)
    assert not A.check_inputs(**qkv).windowed
    # Sq 100 > Sk 120 + left never: rows past Sk + left would have no key
    q = _Fake((2, 8, 200, 128))
    with pytest.raises(A.AttentionError, match="leaves query rows 130 .. 199 without a key"):
        A.check_inputs(**_qkv(q=q), window=(10, 0))


# ----------------------------------------------------------------------------- varlen
@pytest.mark.parametrize("d", HEAD_DIMS)
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize(("softcap", "window"), [(False, False), (True, True)])
def test_varlen_kernel_assembles(d: int, causal: bool, softcap: bool, window: bool) -> None:
    """The packed variable-length forward: ptxas-clean without spills, its parameters in
    kernel_params' order (the host packs them so), the per-thread epilogue only; every other
    configuration's PTX is unchanged by it (tests/test_ptx_fingerprint.py)."""
    import re

    cfg = dataclasses.replace(default_config("bf16", d, causal, softcap=softcap,
                                             window=window), epilogue="direct", varlen=True)
    ptx = build_attention_sm90(cfg).emit()
    res = assemble(ptx, "sm_90a")
    kr = res.kernel(cfg.name)
    assert kr.spills == 0 and kr.stack_frame == 0 and not res.warnings
    header = ptx[ptx.index(".entry"):ptx.index(")")]
    assert re.findall(r"\.param [^\n]*? (\w+)(?:\[\d+\])?,?\n", header + "\n") == [
        n for n, _ in kernel_params(cfg)]
    # the sequence's rows come from the offsets, clamped; a CTA past them returns
    assert ptx.count("ld.global.nc.u32") == 4 and "@%p" in ptx.split("setp.ge.u32")[1][:80]
    assert "st.global.b32" in ptx and "cp.async.bulk.tensor.4d.global" not in ptx


def test_varlen_needs_the_direct_epilogue() -> None:
    with pytest.raises(AttentionSm90Error, match="varlen stores O per thread"):
        AttentionSm90Config(varlen=True, epilogue="tma")
