"""The SM100 parts of the ``nvatom`` command (nvatom.cli.sm100, reached through nvatom.cli)."""

from __future__ import annotations

import pytest

from nvatom.cli import main

F16 = "sm100.mma.f16.cta1.m128n256k16.ss.f32.f16.f16"


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    rc = main(list(argv))
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_atoms_umma(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = _run(capsys, "atoms", "--umma", "--kind", "i8", "--target", "sm_103a")
    assert rc == 2  # kind::i8 is not on sm_103a
    rc, out, _ = _run(capsys, "atoms", "--umma", "--kind", "i8", "--target", "sm_110a")
    assert rc == 0 and "sm100.mma_sp" in out and "s32.s8.u8" in out
    rc, out, _ = _run(capsys, "atoms", "--umma", "--forms", "--kind", "mxf4", "--target",
                      "sm_100f")
    assert rc == 0 and "scale_vec" not in out and "block32" in out


def test_desc_umma_and_idesc(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = _run(capsys, "desc", "umma", "decode", "0x4000404000011000")
    assert rc == 0 and "sbo=1024" in out and "SW128" in out
    rc, _, err = _run(capsys, "desc", "umma", "decode", "0x4000004000011000")
    assert rc == 2 and "0b001" in err
    rc, out, _ = _run(capsys, "desc", "umma", "encode", "--layout",
                      "Sw<3,3,3> o 0 o ((8,8),(64,1)):((64,512),(1,0))", "--start", "0x10000")
    assert rc == 0 and out.startswith("0x4000404000011000")
    rc, out, _ = _run(capsys, "desc", "idesc", "encode", "--atom", F16)
    assert rc == 0 and out.startswith("0x08400010")
    rc, out, _ = _run(capsys, "desc", "idesc", "decode", "0x08400010", "--mma-kind", "f16")
    assert rc == 0 and "M=128 N=256" in out
    rc, _, err = _run(capsys, "desc", "idesc", "decode", "0x08400010")
    assert rc == 2 and "--mma-kind" in err


def test_frag_and_emit(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = _run(capsys, "frag", "atom.tmem_load<16x256b.x1>")
    assert rc == 0 and "(8,0)" in out and "4 registers" in out
    rc, out, _ = _run(capsys, "frag", F16)
    assert rc == 0 and "idesc 0x08400010" in out
    rc, out, _ = _run(capsys, "emit", "sm100.mma_bs.mxf4nvf4.cta1.m128n128k64.ss.f32.e2m1.e2m1."
                      "ue4m3.vs16", "--target", "sm_100f")
    assert rc == 0 and ".block16 [%r_d]" in out  # sm_100f has no .scale_vec::4X
    rc, out, _ = _run(capsys, "emit", "atom.tmem_store<32x32b.x2>", "--target", "sm_100a")
    assert rc == 0 and out.strip() == \
        "tcgen05.st.sync.aligned.32x32b.x2.b32 [%r_taddr], {%r0, %r1};"
    rc, _, err = _run(capsys, "emit", F16, "--target", "sm_90a")
    assert rc == 2 and "not available on sm_90a" in err
    rc, _, err = _run(capsys, "frag", "atom.tmem_to_smem_copy")
    assert rc == 2 and "does not exist" in err


def test_frag_shows_the_operand_layouts(capsys: pytest.CaptureFixture[str]) -> None:
    # tf32 with MN-major B: only the 128-byte swizzle with 32-byte atomicity (PTX ISA), whose
    # compact 64 x 8 tile has atoms of 32 MN elements (T = 4, 8 units) x 4 K rows
    rc, out, _ = _run(capsys, "frag", "sm100.mma.tf32.cta1.m64n64k8.ts.f32.tf32.tf32.bmn")
    assert rc == 0
    assert "data path: layout F" in out and "lane 0 or 16" in out
    assert "SW128_32B  Sw<2,5,2> o ((T,8,m),(4,k)):((1,T,LBO),(8T,SBO))" in out
    assert "compact: Sw<2,3,2> o 0 o ((4,8,2),(4,2)):((1,4,128),(32,256))" in out
    assert "SW128 " not in out.split("B in shared memory")[1].split("D in TMEM")[0]
    # Layout F: row 16 is in lane 32 (16 lanes at the start of each 32-lane partition)
    assert "D in TMEM, 64 x 64 per CTA, (row, column n) -> lane << 16 | column: " \
        "((16,4),64):((65536,2097152),1)" in out
    assert "(32,0)->lane 64 col 0" in out and "A in TMEM, 64 x 8 per CTA" in out
    rc, out, _ = _run(capsys, "frag", "sm100.mma_bs.mxf4nvf4.cta2.m128n128k64.ss.f32.e2m1.e2m1."
                      "ue4m3.vs16")
    assert rc == 0 and "data path: layout B" in out
    assert "SFB in TMEM, 128 x 4 per CTA" in out and "2x2 data path" in out
    assert "(127,0)->lane 95 col 1" in out  # second half: partitions 2-3, row 63 of the half
    rc, out, _ = _run(capsys, "frag", "sm100.mma_sp.f16.cta2.m128n64k32.ss.f32.f16.f16")
    assert rc == 0 and "data path: layout C" in out
    assert "(32,0)->lane 64 col 0" in out and "(63,0)->lane 111" in out  # F per CTA
    rc, out, _ = _run(capsys, "desc", "umma", "encode", "--layout",
                      "Sw<2,3,2> o 0 o ((4,8,4),(4,2)):((1,4,128),(32,512))",
                      "--element-bits", "32", "--major", "MN", "--start", "0x400")
    assert rc == 0 and "swizzle=SW128_32B" in out and "lbo=512 sbo=2048" in out
    assert int(out.split()[0], 16) >> 61 == 1
    rc, _, err = _run(capsys, "desc", "umma", "encode", "--layout",
                      "Sw<3,2,3> o 0 o ((32,4),(8,1)):((1,256),(32,0))", "--element-bits", "32",
                      "--major", "MN")
    assert rc == 2 and "not SW128" in err and "tf32 MN-major" in err
