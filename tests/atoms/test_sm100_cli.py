"""The SM100 parts of the ``nvatom`` command (nvatom.cli_sm100 through nvatom.cli)."""

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
