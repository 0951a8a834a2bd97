"""The SM80 GEMM kernel without a GPU: its data movement (the kernel layer's partitions of the
production tiles) checked against the PTX ISA's semantics of cp.async and ldmatrix, every
variant assembled by ptxas, and its K loop no longer than the hand-written kernel's was.

The model: each thread's cp.async chunk lands at ``tile(coordinate)``; the chunks must be 16
contiguous bytes in shared memory and cover the tile once.  ldmatrix (PTX ISA "ldmatrix"):
matrix q takes its 8 row addresses from lanes 8q..8q+7; lane l receives in register q the
elements (row l/4, columns 2(l%4), 2(l%4)+1) of matrix q, or with ``.trans`` (rows 2(l%4),
2(l%4)+1; column l/4).  Following the row addresses through the shared tile must give each
lane exactly the (m|n, k) elements the tiled MMA's fragment (its (thread, value) layout)
wants, B's ``.x4`` loading two n8 fragments.  The whole kernel runs on the CPU in
tests/kernels/test_gemm_sm80_run.py.
"""

from __future__ import annotations

import dataclasses
import itertools
import re

import pytest

from nvatom.kernels import partition as P
from nvatom.kernels.gemm_sm80 import (
    GemmSm80Config,
    GemmSm80Error,
    GemmSm80Spec,
    Operand,
    emit_ptx,
    operands,
    tiled_mma,
)
from nvatom.layout import size
from nvatom.runtime.ptxas import assemble

LAYOUTS = list(itertools.product(("K", "M"), ("N", "K")))
CONFIGS = [GemmSm80Config(), GemmSm80Config(bm=64, bn=128, bk=64, warps_m=1, warps_n=2,
                                            stages=3)]


def _smem_map(op: Operand, threads: int) -> dict[int, tuple[int, int]]:
    """smem element offset -> (mn, k) the copy stage puts there (checked to be a bijection)."""
    acc = P.tiled_copy_partition(op.copy, (op.mn, op.bk), 8)
    assert acc.threads == threads
    where: dict[int, tuple[int, int]] = {}
    for t in range(threads):
        for d in acc.deltas:
            base = int(op.layout(acc.thread(t) + d[0]))
            for e, dx in enumerate(d):  # 8 consecutive 16-bit elements along the contiguous dim
                x = acc.thread(t) + dx
                coord = (x % op.mn, x // op.mn)
                off = int(op.layout(x))
                assert off == base + e, "a 16-byte chunk is not contiguous in shared memory"
                assert off not in where, f"two chunks write smem element {off}"
                where[off] = coord
    assert len(where) == op.mn * op.bk
    return where


def _ldsm_rows(op: Operand, where: dict[int, tuple[int, int]], addr: list[int], ln: int,
               q: int, trans: bool) -> list[tuple[int, int]]:
    """The (mn, k) elements lane ``ln`` receives in register ``q`` (PTX ISA "ldmatrix")."""
    got = []
    for e in range(2):
        r, c = (2 * (ln % 4) + e, ln // 4) if trans else (ln // 4, 2 * (ln % 4) + e)
        mn0, k0 = where[addr[8 * q + r]]  # element c of the 8-element row at that address
        mn, kk = (mn0, k0 + c) if op.major == "K" else (mn0 + c, k0)
        assert where[int(op.layout(mn + op.mn * kk))] == (mn, kk)
        got.append((mn, kk))
    return got


@pytest.mark.parametrize("config", CONFIGS, ids=["128x128x32", "64x128x64"])
@pytest.mark.parametrize(("a_major", "b_major"), LAYOUTS)
def test_ldmatrix_delivers_mma_fragments(a_major: str, b_major: str,
                                         config: GemmSm80Config) -> None:
    spec = GemmSm80Spec("bf16", "f32", a_major, b_major, config)
    tiled, form = tiled_mma(spec), spec.form
    for op in operands(spec):
        where = _smem_map(op, config.threads)
        trans = op.ldsm.name.endswith(".trans>")
        per = form.registers(op.name)  # registers of one fragment (A: 4, B: 2)
        tv = tiled.tv_layout(op.name)  # (thread, value) -> row + op.mn * k of the k16 tile
        nval = size(form.tv_layout(op.name)[1])  # values of one atom's fragment
        for ks in range(config.bk // 16):
            acc = P.ldsm_partition(op.ldsm, tiled, op.name, op.major, (op.mn, op.bk), (0, ks))
            for warp, (j, s) in itertools.product(range(config.threads // 32),
                                                  enumerate(acc.starts)):
                addr = [int(op.layout(acc.thread(32 * warp + ln) + s)) for ln in range(32)]
                for ln, q in itertools.product(range(32), range(op.ldsm.registers)):
                    got = _ldsm_rows(op, where, addr, ln, q, trans)
                    # the fragment value pair register q of instruction j holds
                    rep, reg = j * (op.ldsm.registers // per) + q // per, q % per
                    want = []
                    for e in range(2):
                        x = int(tv(32 * warp + ln, rep * nval + 2 * reg + e))
                        want.append((x % op.mn, ks * 16 + x // op.mn))
                    assert got == want, (op.name, warp, ks, j, ln, q)


def test_all_variants_assemble() -> None:
    """Every dtype pair and storage order the kernel offers, through ptxas for sm_80."""
    for (a_major, b_major), in_t, out_t in itertools.product(LAYOUTS, ("bf16", "f16"),
                                                              ("bf16", "f16", "f32")):
        spec = GemmSm80Spec(in_t, out_t, a_major, b_major)
        res = assemble(emit_ptx(spec, "sm_80"), "sm_80")
        r = res.kernel(spec.kernel_name)
        assert r.spills == 0 and r.stack_frame == 0, r.summary()
        assert r.registers <= 255


@pytest.mark.parametrize("config", CONFIGS, ids=["128x128x32", "64x128x64"])
@pytest.mark.parametrize(("a_major", "b_major"), LAYOUTS)
def test_shipped_configs_assemble_for_sm_90a_without_spills(a_major: str, b_major: str,
                                                           config: GemmSm80Config) -> None:
    spec = GemmSm80Spec("f16", "f32", a_major, b_major, config)
    r = assemble(emit_ptx(spec, "sm_90a"), "sm_90a").kernel(spec.kernel_name)
    assert r.spills == 0 and r.stack_frame == 0, r.summary()


def loop_body(ptx: str) -> list[str]:
    """The instructions between the K loop's label and its back-branch (both included)."""
    lines = [ln.strip() for ln in ptx.splitlines()]
    m = re.search(r"bra\.uni (\$K_LOOP_\d+);", ptx)
    assert m is not None and ptx.count(m.group(1)) == 2, "the K loop: a label, a back edge"
    start = lines.index(f"{m.group(1)}:")
    end = next(i for i, ln in enumerate(lines) if ln.endswith(f"bra.uni {m.group(1)};"))
    body = [ln for ln in lines[start + 1:end + 1] if ln and not ln.startswith("//")]
    assert sum("bra" in ln for ln in body) == 1, "one branch in the loop: its back edge"
    return body


def epilogue_paths(ptx: str) -> dict[str, list[str]]:
    """The instructions after the K loop's back-branch that an interior tile and an edge tile
    execute (the epilogue's uniform branch on the tile's origin picks one store sequence)."""
    lines = [ln.strip() for ln in ptx.splitlines()]
    back = next(i for i, ln in enumerate(lines) if re.search(r"bra\.uni \$K_LOOP_\d+;", ln))
    rest = [ln for ln in lines[back + 1:] if ln and ln != "}" and not ln.startswith("//")]
    (edge,) = re.findall(r"@!%p\d+ bra\.uni (\$EDGE_TILE_\d+);", ptx)
    (done,) = re.findall(r"^\s*bra\.uni (\$TILE_DONE_\d+);", ptx, re.M)
    fork = next(i for i, ln in enumerate(rest) if ln.endswith(f"{edge};"))
    at_edge, at_done = rest.index(f"{edge}:"), rest.index(f"{done}:")
    return {"interior": rest[:at_edge] + rest[at_done + 1:],
            "edge": rest[:fork + 1] + rest[at_edge + 1:at_done] + rest[at_done + 1:]}


#: PTX instructions of the K loop body of the hand-written kernel this one replaced (commit
#: b436a5b, its loop from K_LOOP to the back-branch), per (config, A major, B major): the
#: typed kernel's must not be longer.
HAND_WRITTEN_LOOP = {("128x128x32", "K", "N"): 196, ("128x128x32", "K", "K"): 192,
                     ("128x128x32", "M", "N"): 200, ("128x128x32", "M", "K"): 196,
                     ("64x128x64", "K", "N"): 444, ("64x128x64", "K", "K"): 416,
                     ("64x128x64", "M", "N"): 456, ("64x128x64", "M", "K"): 428}


@pytest.mark.parametrize("config", CONFIGS, ids=["128x128x32", "64x128x64"])
@pytest.mark.parametrize(("a_major", "b_major"), LAYOUTS)
def test_k_loop_is_no_longer_than_the_hand_written_one(a_major: str, b_major: str,
                                                       config: GemmSm80Config) -> None:
    spec = GemmSm80Spec("bf16", "bf16", a_major, b_major, config)
    body = loop_body(emit_ptx(spec))
    ops = [ln.split()[1] if ln.startswith("@") else ln.split()[0] for ln in body]
    ksteps = config.bk // 16
    mma = ksteps * (config.warp_m // 16) * (config.warp_n // 8)
    assert sum(o.startswith("mma.sync") for o in ops) == mma
    assert sum(o.startswith("ldmatrix") for o in ops) == ksteps * (config.warp_m // 16
                                                                   + config.warp_n // 16)
    chunks = (config.bm + config.bn) * config.bk * 2 // 16 // config.threads
    assert sum(o.startswith("cp.async.cg") for o in ops) == chunks
    key = (f"{config.bm}x{config.bn}x{config.bk}", a_major, b_major)
    assert len(body) <= HAND_WRITTEN_LOOP[key], (len(body), HAND_WRITTEN_LOOP[key])


#: PTX instructions after the K loop of the hand-written kernel (commit b436a5b), per output
#: width (the same for both shipped tilings): each path of the typed kernel's epilogue must
#: not be longer.
HAND_WRITTEN_EPILOGUE = {"bf16": 273, "f32": 209}


@pytest.mark.parametrize("config", CONFIGS, ids=["128x128x32", "64x128x64"])
@pytest.mark.parametrize("out", ["bf16", "f32"])
def test_epilogue_is_no_longer_than_the_hand_written_one(out: str,
                                                         config: GemmSm80Config) -> None:
    """The direct epilogue: interior tiles store without predicates; edge tiles fold both
    bounds into one ``setp`` per store; neither path is longer than the hand-written
    epilogue."""
    config = dataclasses.replace(config, epilogue="direct")
    spec = GemmSm80Spec("bf16", out, "K", "N", config)
    paths = epilogue_paths(emit_ptx(spec))
    stores = config.bm * config.bn // config.threads // 2  # one per column pair
    for name, body in paths.items():
        ops = [ln.split()[1] if ln.startswith("@") else ln.split()[0] for ln in body]
        assert sum(o.startswith("st.global") for o in ops) == stores, name
        assert len(body) <= HAND_WRITTEN_EPILOGUE[out], (name, len(body))
    interior = paths["interior"]
    assert not [ln for ln in interior if ln.startswith("@") and "bra.uni" not in ln]
    assert sum(ln.startswith("setp") for ln in interior) == 2  # the tile inside M and N
    edge = paths["edge"]
    assert sum(ln.startswith("@%p") and "st.global" in ln for ln in edge) == stores


@pytest.mark.parametrize("config", CONFIGS, ids=["128x128x32", "64x128x64"])
@pytest.mark.parametrize("out", ["bf16", "f32"])
def test_staged_epilogue_stores_whole_lines(out: str, config: GemmSm80Config) -> None:
    """The staged epilogue (the default): an interior tile writes its pairs to shared memory
    between two barriers and leaves it in 16-byte stores, none predicated; an edge tile
    stores the pairs predicated, as the direct epilogue does."""
    spec = GemmSm80Spec("bf16", out, "K", "N", config)
    assert config.epilogue == "staged"
    paths = epilogue_paths(emit_ptx(spec))
    ebytes = 2 if out == "bf16" else 4
    pairs = config.bm * config.bn // config.threads // 2
    chunks = config.bm * config.bn * ebytes // 16 // config.threads  # per thread
    ops = [ln.split()[1] if ln.startswith("@") else ln.split()[0]
           for ln in paths["interior"]]
    assert sum(o.startswith("st.shared") for o in ops) == pairs
    assert ops.count("ld.shared.v4.b32") == chunks
    assert [o for o in ops if o.startswith("st.global")] == ["st.global.v4.b32"] * chunks
    assert ops.count("bar.sync") == 2
    assert not [ln for ln in paths["interior"] if ln.startswith("@") and "bra.uni" not in ln]
    edge = paths["edge"]
    assert sum(ln.startswith("@%p") and "st.global" in ln for ln in edge) == pairs
    assert not [ln for ln in edge if "shared" in ln or "bar.sync" in ln]


def test_staged_epilogue_refusals() -> None:
    with pytest.raises(GemmSm80Error, match="epilogue='fused': one of staged, direct"):
        GemmSm80Config(epilogue="fused")
    # a 64x256 f32 tile (64 KB) does not fit two stages of 64x256x32 (2 x 20 KB)
    cfg = GemmSm80Config(bm=64, bn=256, warps_m=1, warps_n=4, stages=2)
    with pytest.raises(GemmSm80Error, match="does not fit the ring's 40960 bytes; use "
                                            "epilogue='direct'"):
        emit_ptx(GemmSm80Spec("bf16", "f32", "K", "N", cfg))
    emit_ptx(GemmSm80Spec("bf16", "f32", "K", "N",
                          dataclasses.replace(cfg, epilogue="direct")))
    # a 96-column bf16 row is 12 chunks of 16 bytes: 32 threads are not whole rows of them
    odd = GemmSm80Config(bm=32, bn=96, warps_m=1, warps_n=1, stages=3)
    with pytest.raises(GemmSm80Error, match=r"epilogue='staged': a 32x96 bf16 tile does not "
                       r"split into 16-byte row chunks over 32 threads; use "
                       r"epilogue='direct'"):
        emit_ptx(GemmSm80Spec("bf16", "bf16", "K", "K", odd))
    emit_ptx(GemmSm80Spec("bf16", "bf16", "K", "K", dataclasses.replace(odd, epilogue="direct")))


def test_config_and_spec_errors() -> None:
    with pytest.raises(GemmSm80Error, match="bk=48"):
        GemmSm80Config(bk=48)
    with pytest.raises(GemmSm80Error, match="stages=1"):
        GemmSm80Config(stages=1)
    with pytest.raises(GemmSm80Error, match="does not split"):
        GemmSm80Config(bm=96, warps_m=4)
    with pytest.raises(GemmSm80Error, match="warps_n must be a positive int"):
        GemmSm80Config(warps_n=0)
    with pytest.raises(GemmSm80Error, match="input dtype 'f32'"):
        GemmSm80Spec("f32")
    with pytest.raises(GemmSm80Error, match="output dtype 'e4m3'"):
        GemmSm80Spec("bf16", "e4m3")
    with pytest.raises(GemmSm80Error, match="b_major 'M'"):
        GemmSm80Spec(b_major="M")
    with pytest.raises(GemmSm80Error, match="warp_order='rows': one of interleaved, blocked"):
        GemmSm80Config(warp_order="rows")


def test_launch_shape() -> None:
    spec = GemmSm80Spec()
    assert spec.grid(4096, 4096) == (32 * 32, 1, 1)
    assert spec.grid(129, 8) == (2, 1, 1)
    assert spec.block() == (128, 1, 1)
    assert spec.config.smem_bytes() == 4 * (128 + 128) * 32 * 2


def test_cli_gemm_assembles(tmp_path, capsys) -> None:
    from nvatom.cli import main

    out = tmp_path / "g.ptx"
    assert main(["gemm", "--m", "300", "--n", "136", "--k", "72", "--dtype", "f16",
                 "--out-dtype", "f32", "--b-major", "K", "--target", "sm_80",
                 "--emit", str(out)]) == 0
    text = capsys.readouterr().out
    assert "gemm_sm80_f16_f32_aK_bK_128x128x32" in text
    assert "grid (6, 1, 1), block (128, 1, 1), 65536 B dynamic smem" in text
    assert "0/0 B spill" in text
    ptx = out.read_text()
    assert ".extern .shared .align 1024 .b8 gemm_smem[];" in ptx
    assert "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32" in ptx
    assert "ldmatrix.sync.aligned.m8n8.x4.shared.b16" in ptx  # B K-major: no .trans


def test_cli_gemm_errors(capsys) -> None:
    from nvatom.cli import main

    assert main(["gemm", "--m", "0", "--n", "8", "--k", "8"]) == 2
    assert "nvatom: error: --m must be >= 1, got 0" in capsys.readouterr().err
    assert main(["gemm", "--m", "8", "--n", "8", "--k", "8", "--target", "sm_75"]) == 2
    assert "no nvatom GEMM kernel for bf16 x bf16 -> bf16 (acc f32) on compute capability 7.5" \
        in capsys.readouterr().err
