"""The nvatom command: output of each sub-command and one-line errors with status 2."""

from __future__ import annotations

import subprocess
import sys

import pytest

from nvatom.cli import main


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_targets_table(capsys) -> None:
    code, out, _ = run(capsys, "targets")
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split()[:2] == ["target", "tier"]
    row = next(line for line in lines if line.startswith("sm_90a "))
    assert "SM90" in row and "8.0" in row and "wgmma" in row
    row = next(line for line in lines if line.startswith("sm_90 "))
    assert "wgmma" not in row and "tma" in row
    assert sum(1 for line in lines if line.startswith("sm_")) == 25


def test_targets_features_and_json(capsys) -> None:
    code, out, _ = run(capsys, "targets", "--features")
    assert code == 0 and "tcgen05.kind::i8" in out and "only sm_100a, sm_110a" in out
    import json

    code, out, _ = run(capsys, "targets", "--json")
    data = {d["name"]: d for d in json.loads(out)}
    assert data["sm_120a"]["tier"] == "SM120/SM121"
    assert "mma.block_scale" in data["sm_120a"]["features"]
    assert "mma.block_scale" not in data["sm_120"]["features"]


def test_ptxas_command(capsys, tmp_path) -> None:
    ptx = tmp_path / "k.ptx"
    ptx.write_text(".version 7.8\n.target sm_90\n.address_size 64\n"
                   ".visible .entry k()\n{\n.shared .align 16 .b8 s[256];\n"
                   ".reg .b32 %r<2>;\nmov.u32 %r0, s;\nst.shared.u32 [%r0], %r0;\nret;\n}\n")
    cubin = tmp_path / "k.cubin"
    code, out, _ = run(capsys, "ptxas", str(ptx), "--target", "sm_90", "-o", str(cubin))
    assert code == 0
    assert "k: " in out and "256 B smem" in out
    assert cubin.read_bytes()[:4] == b"\x7fELF"


@pytest.mark.parametrize(
    "argv, message",
    [
        (["targets", "--json", "--bogus"], None),  # argparse's own usage error
        (["ptxas", "missing.ptx", "--target", "sm_90"], "cannot read 'missing.ptx'"),
        (["ptxas", "missing.ptx", "--target", "sm_91"], "unknown target 'sm_91'"),
    ],
)
def test_errors_are_one_line_with_status_2(capsys, argv, message) -> None:
    if message is None:
        with pytest.raises(SystemExit) as ei:
            main(argv)
        assert ei.value.code == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1
        assert err.startswith("nvatom: error: unrecognized arguments: --bogus")
        return
    try:  # an unknown target is a usage error now (argparse's SystemExit, the same one line)
        code, _, err = run(capsys, *argv)
    except SystemExit as e:
        code, err = int(e.code or 0), capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1 and err.startswith("nvatom: error: ") and message in err


def test_ptxas_rejection_is_one_line(capsys, tmp_path) -> None:
    ptx = tmp_path / "bad.ptx"
    ptx.write_text(".version 8.0\n.target sm_90\n.address_size 64\n"
                   ".visible .entry k()\n{\nwgmma.fence.sync.aligned;\nret;\n}\n")
    code, _, err = run(capsys, "ptxas", str(ptx), "--target", "sm_90")
    assert code == 2
    assert err == ("nvatom: error: ptxas 13.0 rejected the PTX for sm_90: line 6: error: "
                   "Instruction 'wgmma.fence' not supported on .target 'sm_90'\n")


def test_check_lists_ptxas(capsys) -> None:
    code, out, _ = run(capsys, "check")
    assert code == 0 and "ptxas 13.0" in out and "targets assemblable:" in out
    # the environment report: each piece present, or what its absence costs
    assert "present:" in out and "can:" in out and "assemble   yes" in out


def test_console_script_entry_point() -> None:
    proc = subprocess.run([sys.executable, "-m", "nvatom.cli", "--version"],
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 0 and proc.stdout.startswith("nvatom ")


def test_layout_command_applies_operations_in_order(capsys) -> None:
    # Known answers from CuTe's docs (media/docs/cute/02_layout_algebra.md).
    code, out, _ = run(capsys, "layout", "(6,2):(8,2)", "--compose", "(4,3):(3,1)")
    assert code == 0
    assert out.splitlines()[1].split()[-1] == "((2,2),3):((24,2),8)"
    code, out, _ = run(capsys, "layout", "4:1", "--complement", "24", "--eval", "0", "5")
    assert out.splitlines()[1].split()[-1] == "6:4"
    assert "L(5) = 20" in out
    code, out, _ = run(capsys, "layout", "(4,2,3):(2,1,8)", "--logical-divide", "4:2",
                       "--coalesce")
    lines = out.splitlines()
    assert lines[1].split()[-1] == "((2,2),(2,3)):((4,1),(2,8))"
    assert lines[2].startswith("coalesce ")


@pytest.mark.parametrize(
    "argv, message",
    [
        (["layout", "(4,8):(8,1"], "cannot parse layout '(4,8):(8,1'"),
        (["layout", "4:1", "--eval", "4"], "--eval 4: index out of range"),
        (["layout", "4:1", "--complement", "x"], "--complement takes an integer from 1 to"),
    ],
)
def test_layout_errors(capsys, argv, message) -> None:
    code, _, err = run(capsys, *argv)
    assert code == 2 and err.startswith("nvatom: error: ") and message in err
    assert err.count("\n") == 1


def test_compose_notes_cute_padding(capsys) -> None:
    # Compiled CuTe 4.2 gives (2,2):(3,9) here (tests/layout/test_cute_oracle.py), which is
    # not function composition: B(3) = 4, and A(4) = A(0,1) = 1 for A = (4,3):(3,1).
    code, out, _ = run(capsys, "layout", "(4,3):(3,1)", "--compose", "(2,2):(1,3)")
    assert code == 0
    lines = out.splitlines()
    assert lines[1].split()[-1] == "(2,2):(3,9)"
    assert lines[2] == ("note: CuTe pads non-dividing strides, so this is not A(B(i)): "
                        "A(B(3)) = 1 but the result gives 12")


def test_atoms_filters_by_target_and_types(capsys) -> None:
    code, out, _ = run(capsys, "atoms", "--target", "sm_89", "--a", "e4m3", "--b", "e5m2",
                       "--acc", "f16")
    assert code == 0
    names = [line.split()[0] for line in out.splitlines()[1:-1]]
    assert names == ["sm89.mma.m16n8k32.f16.e4m3.e5m2.f16", "sm89.mma.m16n8k16.f16.e4m3.e5m2.f16"]
    code, _, err = run(capsys, "atoms", "--target", "sm_80", "--a", "e4m3")
    assert code == 2 and "no register MMA atom matches" in err


def test_frag_prints_layout_and_isa_grid(capsys, tmp_path) -> None:
    svg = tmp_path / "a.svg"
    code, out, _ = run(capsys, "frag", "sm80.mma.m16n8k16.f32.bf16.bf16.f32", "--operand", "A",
                       "--svg", str(svg))
    assert code == 0
    assert "((4,8),(2,2,2)):((32,1),(16,8,128))" in out
    rows = [line.split() for line in out.splitlines() if line[:4].strip().isdigit()]
    # PTX ISA m16n8k16 A: row 0 holds a0,a1 of lanes 0..3 then a4,a5 from column 8.
    assert rows[0][1:5] == ["T0:V0", "T0:V1", "T1:V0", "T1:V1"]
    assert rows[0][9:11] == ["T0:V4", "T0:V5"]
    assert rows[8][1] == "T0:V2"
    text = svg.read_text()
    assert text.startswith("<svg") and text.count('<rect class="cell"') == 256 and "T31:V7" in text


def test_frag_bad_name(capsys) -> None:
    code, _, err = run(capsys, "frag", "sm80.mma.m16n8k16.f32.bf16.bf16.f16")
    assert code == 2 and "nearest: sm80.mma.m16n8k16.f32.bf16.bf16.f32" in err


def test_emit_instruction_template_and_kernel(capsys, tmp_path) -> None:
    code, out, _ = run(capsys, "emit", "sm80.sparse_mma.m16n8k32.s32.s8.s8.s32", "-t", "sm_80",
                       "--selector", "1")
    assert code == 0
    assert out.splitlines()[1].startswith("mma.sp.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {")
    assert out.splitlines()[1].endswith(", 0x1;")
    code, out, _ = run(capsys, "emit", "sm80.mma.m16n8k16.f32.f16.f16.f32", "-t", "sm_90a",
                       "--asm-template")
    assert "// constraints: =f,=f,=f,=f,r,r,r,r,r,r,f,f,f,f" in out
    ptx = tmp_path / "k.ptx"
    code, out, _ = run(capsys, "emit", "sm89.mma.m16n8k32.f32.e4m3.e5m2.f32", "-t", "sm_89",
                       "--kernel", "-o", str(ptx), "--assemble")
    assert code == 0 and ptx.read_text().startswith(".version 8.4\n.target sm_89\n")
    assert "// ptxas 13.0" in out


@pytest.mark.parametrize("argv, message", [
    (["emit", "sm89.mma.m16n8k32.f32.e4m3.e5m2.f32", "-t", "sm_80"],
     "is not available on sm_80 (needs mma.sync with e4m3/e5m2 inputs: sm_89+)"),
    (["emit", "sm80.sparse_mma.m16n8k32.s32.s8.s8.s32", "-t", "sm_80", "--selector", "3"],
     "sparsity selector 3 is not legal (ptxas accepts 0, 1)"),
    (["emit", "sm80.mma.m16n8k16.f32.f16", "-t", "sm_80"], "unknown MMA atom"),
])
def test_emit_errors(capsys, argv, message) -> None:
    code, _, err = run(capsys, *argv)
    assert code == 2 and message in err and err.count("\n") == 1


def test_banks_counts_conflicts(capsys) -> None:
    # 16-bit row-major 16x64 tile (128-byte rows): every ldmatrix phase hits banks 0-3 or 4-7
    # 8 times (8-way); the 128-byte swizzle removes all of it (docs/shared-memory.md).
    code, out, _ = run(capsys, "banks", "ldsm.x4", "--smem", "(16,64):(64,1)", "--detail", "0")
    assert code == 0 and out.rstrip().endswith(
        "128 wavefronts = 16 ideal + 112 conflicts (8.00x ideal)")
    code, out, _ = run(capsys, "banks", "ldsm.x4", "--smem", "Sw<3,3,3> o 0 o (16,64):(64,1)",
                       "--detail", "1")
    assert "phase 0: lanes 0-7 (matrix 0): 1 wavefront" in out
    assert out.rstrip().endswith("16 wavefronts = 16 ideal + 0 conflicts (1.00x ideal)")
    code, _, err = run(capsys, "banks", "ldsm.x9", "--smem", "(16,64):(64,1)")
    assert code == 2 and "unknown shared-memory access 'ldsm.x9'" in err


def test_copy_atoms_in_atoms_frag_emit(capsys) -> None:
    code, out, _ = run(capsys, "atoms", "--copy", "--target", "sm_75")
    names = [line.split()[0] for line in out.splitlines()[1:-1]]
    assert "atom.ldsm<m8n8.x4.trans>" in names
    assert not any(n.startswith(("atom.stsm", "atom.simt_async_copy")) for n in names)
    # CUTLASS copy_traits_sm75.hpp, SM75_U32x1_LDSM_N: SrcLayout ((8,4),128):((128,0),1) in
    # bits (eight lanes address 16-byte rows, the others repeat), DstLayout (32,32):(32,1).
    code, out, _ = run(capsys, "frag", "atom.ldsm<m8n8.x1>")
    assert code == 0 and "ldmatrix.sync.aligned.m8n8.x1.shared.b16" in out
    assert "src (thread, bit) -> bit layout (CuTe's Copy_Traits units): ((8,4),128):((128,0),1)" \
        in out
    assert out.splitlines()[2].endswith(": (32,32):(32,1)")
    code, out, _ = run(capsys, "emit", "atom.simt_async_copy<16>", "-t", "sm_80")
    assert out.splitlines()[-1] == "cp.async.cg.shared.global [%0], [%1], %2;"
    assert "// constraints: r,l,n" in out
    code, _, err = run(capsys, "emit", "atom.stsm<m8n8.x4>", "-t", "sm_89")
    assert code == 2 and "is not available on sm_89" in err


def test_desc_wgmma_encode_decode(capsys) -> None:
    from nvatom.atoms.smem import smem_layout

    # CUTLASS's canonical K-major SW128 f16 tile: LBO 1 (16 B, unused), SBO 1024 B (PTX ISA "Matrix
    # Descriptor Format").
    code, out, _ = run(capsys, "desc", "wgmma", "encode", "--layout",
                       str(smem_layout(64, 64, 16, "K", 128)), "--start", "0x10000")
    assert code == 0 and out.split()[0] == "0x4000004000011000"
    code, out, _ = run(capsys, "desc", "wgmma", "decode", "0x4000004000011000")
    assert out.splitlines()[-1] == "start=0x10000 lbo=16 sbo=1024 base_offset=0 swizzle=128B"
    # The specification's worked example: hardware fields, then the reserved bit 52 refusal.
    code, out, err = run(capsys, "desc", "wgmma", "decode", "0x0010_0000_0200_1000")
    assert code == 2 and "lbo=0x200" in out and "layout_type=0x0" in out
    assert "reserved bit 52 set" in err


def test_wgmma_atoms_frag_emit(capsys) -> None:
    code, out, _ = run(capsys, "atoms", "--wgmma", "--a", "s8", "--b", "u8")
    names = [line.split()[0] for line in out.splitlines()[1:-1]]
    # N = 8, 16, 24, then multiples of 16 to 256 (PTX ISA wgmma "Matrix shape"; ptxas): 18 sizes x
    # rs/ss x satfinite.
    assert len(names) == 18 * 2 * 2 and "sm90.mma.m64n24k32.ss.s32.s8.u8" in names
    assert "sm90.mma.m64n40k32.ss.s32.s8.u8" not in names
    # CUTLASS mma_traits_sm90_gmma.hpp CLayout_64x8: ((4,8,4),(2,2)):((128,1,16),(64,8)).
    code, out, _ = run(capsys, "frag", "sm90.mma.m64n8k16.ss.f32.f16.f16", "--operand", "D",
                       "--no-table")
    assert out.splitlines()[1].endswith("((4,8,4),(2,2)):((128,1,16),(64,8))")
    code, out, _ = run(capsys, "emit", "sm90.mma.m64n128k16.ss.f32.f16.f16", "-t", "sm_90a",
                       "--asm-template")
    assert "// 64 read-write" not in out and "64 read-write accumulators" in out
    assert "setp.ne.b32" in out
    code, _, err = run(capsys, "emit", "sm90.mma.m64n64k16.ss.f32.f16.f16", "-t", "sm_90")
    assert code == 2 and "is not available on sm_90" in err


def test_demo_builds_the_sm90_gemm(capsys, tmp_path) -> None:
    from nvatom.demo import gpu_skip_reason

    code, out, _ = run(capsys, "demo", "--out", str(tmp_path))
    assert code == 0
    assert "  SM90         sm_90 sm_90a\n" in out
    gemm = next(line for line in out.splitlines() if line.strip().startswith("ptxas    sm_90a"))
    # ptxas's own report of the kernel's resources (0 spills; the entry cap is .maxnreg 168)
    assert "168 registers at entry" in gemm and "0 spill stores, 0 spill loads" in gemm
    # the bf16 default: ping-pong, 128 x 128 per consumer warpgroup (docs/perf.md)
    assert (tmp_path / "gemm_sm90_bf16_bf16_128x128_s6_bMN_p_g8_c1_w1_pp.cubin").stat().st_size
    assert "Python build+emit" in out
    if gpu_skip_reason() is not None:
        assert "no GPU present" in out


def test_frag_of_the_sm80_m16n8k8_atom(capsys) -> None:
    """Synthesizer arm 6 (docs/spec-deviations.md#reference-layout-synthesizer) is an sm80.mma atom:
    PTX ISA m16n8k8 f16 A fragment, lane 4 g + tig holds (g, 2 tig + i) and (g + 8, 2 tig + i)."""
    code, out, _ = run(capsys, "frag", "sm80.mma.m16n8k8.f16.f16.f16.f16", "--operand", "A")
    assert code == 0
    assert out.startswith("sm80.mma.m16n8k8.f16.f16.f16.f16 operand A: f16, 4 values in 2 b32")
    rows = {int(line.split()[0]): line.split()[1:] for line in out.splitlines()[3:19]}
    for lane in range(32):
        g, tig = lane // 4, lane % 4
        for i in range(2):
            assert rows[g][2 * tig + i] == f"T{lane}:V{i}"
            assert rows[g + 8][2 * tig + i] == f"T{lane}:V{2 + i}"
    code, out, _ = run(capsys, "atoms", "--target", "sm_80", "--a", "f16")
    assert "sm80.mma.m16n8k8.f32.f16.f16.f32" in out and "sm75.mma.m16n8k8.f32.f16.f16.f32" in out
    code, out, _ = run(capsys, "atoms", "--target", "sm_75", "--a", "f16")
    assert "sm80.mma.m16n8k8" not in out and "sm75.mma.m16n8k8.f16.f16.f16.f16" in out


def test_atoms_copy_lists_the_tmem_atoms_where_tcgen05_is(capsys) -> None:
    """tcgen05.ld/st/cp are listed for exactly the targets with tcgen05 (ptxas's rule,
    tests/test_arch.py), and every listed one assembles there."""
    import json

    from nvatom.arch import TARGETS
    from nvatom.atoms.tmem import tmem_atom
    from nvatom.runtime import ptxas

    def tmem_names(t: str) -> list[str]:
        code, out, _ = run(capsys, "atoms", "--copy", "--target", t, "--json")
        assert code == 0
        return [d["name"] for d in json.loads(out)
                if d["name"].startswith(("atom.tmem_load", "atom.tmem_store", "atom.s2t_copy"))]

    have = {t: tmem_names(t) for t in ("sm_90a", "sm_100", "sm_100a", "sm_100f", "sm_103a",
                                       "sm_110f", "sm_120a", "sm_121f")}
    for t, names in have.items():
        assert bool(names) == TARGETS[t].supports("tcgen05"), t
    names = have["sm_100a"]
    assert {"atom.tmem_load<32x32b.x1>", "atom.tmem_store<16x256b.x1.unpack::16b>",
            "atom.tmem_load<16x32bx2.x1@0>", "atom.s2t_copy<cta_group::2.128x256b>",
            "atom.s2t_copy<cta_group::1.32x128b.warpx4.b8x16.b4x16_p64>"} <= set(names)
    assert names == have["sm_110f"]
    lines = []
    for n in names:
        a = tmem_atom(n)
        if a.mnemonic == "atom.s2t_copy":
            lines.append(a.instruction("%r0", "%rd0"))
        else:
            lines.append(a.instruction([f"%r{i + 1}" for i in range(a.registers)], "%r0"))
    # A kernel may not mix .cta_group::1 and ::2 (ptxas): one kernel per CTA group.
    pair = [line for line in lines if "cta_group::2" in line]
    for t in ("sm_100a", "sm_110f"):
        v = TARGETS[t].ptx_version_for("tcgen05")
        for body in ([line for line in lines if line not in pair], pair):
            ptx = (f".version {v[0]}.{v[1]}\n.target {t}\n.address_size 64\n"
                   ".visible .entry k()\n{\n.reg .b32 %r<16>;\n.reg .b64 %rd<2>;\n"
                   + "\n".join(body) + "\nret;\n}\n")
            ok, log = ptxas.check(ptx, t)
            assert ok, log
    code, out, _ = run(capsys, "atoms", "--copy", "--target", "sm_100a")
    assert code == 0
    row = next(line for line in out.splitlines() if line.startswith("atom.tmem_load<32x32b.x1>"))
    assert row.split()[1:] == ["8.6", "sm_10x/11x,", "'a'/'f'", "targets"]


def test_frag_of_every_sm70_operand(capsys) -> None:
    # m8n8k4's thread mode is one quad-pair's 8 threads: frag draws them (it used to index
    # 32 lanes into an 8-thread layout and raise IndexError on half of the A/B operands)
    from nvatom.atoms.registry import mma_forms

    forms = [f for f in mma_forms() if f.name.startswith("sm70.")]
    assert len(forms) >= 12
    for f in forms:
        for op in "ABCD":
            code, out, err = run(capsys, "frag", f.name, "--operand", op)
            assert code == 0 and err == "", (f.name, op, err)
            assert "thread mode: 8 threads of one quad-pair" in out
            cells = [c for line in out.splitlines()[4:] for c in line.split()[1:]]
            # every element of the 8x4 / 4x8 / 8x8 tile has exactly one owner thread < 8
            assert cells and all(c.count(":") == 1 and int(c[1:c.index(":")]) < 8
                                 for c in cells), (f.name, op)
