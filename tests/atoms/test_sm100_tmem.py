"""Tensor memory atoms (nvatom.atoms.tmem) and the tcgen05 emitter (nvatom.ptx.tcgen05_emit).

* (thread, value) layouts of tcgen05.ld/st against CUTLASS's bit-level Copy_Traits of
  cute/atom/copy_traits_sm100.hpp (ValID over (bits, datapath) with DP_b = 2^21 bits per
  lane, DstLayout (thread, bit) -> ValID index), transcribed below and evaluated with the
  layout algebra;
* every ld/st form (shape x .num x pack) assembles on sm_100a, one beyond 128 registers is
  rejected by ptxas and by the constructor; tcgen05.cp shapes and decompressions; alloc,
  dealloc, relinquish, commit (incl. multicast), fences, waits; all rejected on sm_90a;
* the specification's TMEM->SMEM / TMEM->TMEM "copy atoms" are rejected by ptxas and by us;
* a kernel never mixes CTA groups (emitter, text check, ptxas).
"""

from __future__ import annotations

import pytest

from nvatom.atoms.interfaces import AtomVerificationError, interfaces_of
from nvatom.atoms.sm100 import Tcgen05MmaForm, umma_atom
from nvatom.atoms.tmem import (
    CP_DECOMPRESS,
    CP_SHAPES,
    LDST_SHAPES,
    S2tCopyAtom,
    TmemCopyAtom,
    TmemError,
    alloc_instruction,
    check_alloc_columns,
    dealloc_instruction,
    relinquish_instruction,
    spec_only_atom,
    tmem_address,
)
from nvatom.layout import Layout
from nvatom.ptx.builder import Kernel, Module
from nvatom.ptx.tcgen05_emit import (
    FENCE_AFTER,
    FENCE_BEFORE,
    WAIT_LD,
    WAIT_ST,
    Tcgen05,
    Tcgen05EmitError,
    check_kernel,
    commit_instruction,
)
from nvatom.runtime import ptxas
from tests import ptxas_sweep

DP_B = 1 << 21

# (op, (ValID shape, stride), (DstLayout shape, stride)) from copy_traits_sm100.hpp
_CUTLASS = {
    ("32x32b", 1, False): (((32, 32), (1, DP_B)), ((32, 32), (32, 1))),
    ("32x32b", 2, False): (((64, 32), (1, DP_B)), ((32, 64), (64, 1))),
    ("32x32b", 1, True): ((((16, 2), 32), ((1, 32), DP_B)), ((32, 32), (32, 1))),
    ("32x32b", 2, True): ((((16, 4), 32), ((1, 32), DP_B)), ((32, 64), (64, 1))),
    ("16x64b", 1, False): (((64, 16), (1, DP_B)), (((2, 2, 8), 32), ((512, 32, 64), 1))),
    ("16x64b", 2, False): (((128, 16), (1, DP_B)),
                           (((2, 2, 8), (32, 2)), ((1024, 32, 128), (1, 64)))),
    ("16x64b", 1, True): ((((16, 4), 16), ((1, 32), DP_B)), (((2, 2, 8), 32), ((512, 32, 64), 1))),
    ("16x128b", 1, False): (((128, 16), (1, DP_B)), (((4, 8), (32, 2)), ((32, 128), (1, 1024)))),
    ("16x128b", 2, False): (((256, 16), (1, DP_B)),
                            (((4, 8), (32, 2, 2)), ((32, 256), (1, 2048, 128)))),
    ("16x128b", 1, True): ((((16, 8), 16), ((1, 32), DP_B)),
                           (((4, 8), (32, 2)), ((32, 128), (1, 1024)))),
    ("16x256b", 1, False): (((256, 16), (1, DP_B)), (((4, 8), (64, 2)), ((64, 256), (1, 2048)))),
    ("16x256b", 2, False): (((512, 16), (1, DP_B)),
                            (((4, 8), (64, 2, 2)), ((64, 512), (1, 4096, 256)))),
    ("16x256b", 1, True): ((((16, 16), 16), ((1, 32), DP_B)),
                           (((4, 8), (64, 2)), ((64, 256), (1, 2048)))),
    # 16x32bx2: CUTLASS issues immHalfSplitoff = 1 for x1 and 2 for x2
    ("16x32bx2", 1, False): (((64, 16), (1, DP_B)), (((16, 2), 32), ((64, 32), 1))),
    ("16x32bx2", 2, False): (((128, 16), (1, DP_B)), (((16, 2), 64), ((128, 64), 1))),
}


@pytest.mark.parametrize("key", list(_CUTLASS), ids=lambda k: f"{k[0]}.x{k[1]}{'.16b' * k[2]}")
def test_tv_layout_matches_cutlass(key: tuple[str, int, bool]) -> None:
    shape, num, pack = key
    (vs, vd), (ds, dd) = _CUTLASS[key]
    val_id, dst = Layout(vs, vd), Layout(ds, dd)
    atom = TmemCopyAtom("load", shape, num, pack, num if shape == "16x32bx2" else None)
    per = 16 if pack else 32
    for t in range(32):
        for v in range(atom.registers * (2 if pack else 1)):
            bit = val_id(dst(t, v * per))
            want = (bit // DP_B, (bit % DP_B) // 32)
            assert atom.coords(t, v) == want, (t, v)
    # the atom covers exactly lanes x columns, each cell once (per 16-bit half if packed)
    cells = {atom.coords(t, v) for t in range(32)
             for v in range(atom.registers * (2 if pack else 1))}
    assert len(cells) == 32 * atom.registers * (2 if pack else 1)


def test_tmem_address_and_alloc() -> None:
    assert tmem_address(32, 5) == 0x200005
    with pytest.raises(TmemError, match="no cell"):
        tmem_address(128, 0)
    for bad in (16, 48, 1024, True):
        with pytest.raises(TmemError, match="power of two"):
            check_alloc_columns(bad)
    assert check_alloc_columns(512) == 512


def test_ldst_errors() -> None:
    with pytest.raises(TmemError, match="at most 128"):
        TmemCopyAtom("load", "16x256b", 64)
    with pytest.raises(TmemError, match="no tcgen05 shape"):
        TmemCopyAtom("load", "32x64b", 1)
    with pytest.raises(TmemError, match="immHalfSplitoff"):
        TmemCopyAtom("load", "16x32bx2", 1)
    with pytest.raises(TmemError, match="power of two"):
        TmemCopyAtom("store", "32x32b", 3)
    a = TmemCopyAtom("load", "32x32b", 4)
    with pytest.raises(TmemError, match="moves 4 registers"):
        a.instruction(["%r0"], "%r9")
    a.verify_instance("sm_100a", ("tmem", "rmem", 32))
    with pytest.raises(AtomVerificationError, match="copies tmem -> rmem"):
        a.verify_instance("sm_100a", ("smem", "rmem", 32))
    with pytest.raises(AtomVerificationError, match="16-bit"):
        a.verify_instance("sm_100a", ("tmem", "rmem", 16))
    with pytest.raises(AtomVerificationError, match="not available on sm_90a"):
        a.verify_instance("sm_90a", ("tmem", "rmem", 32))
    assert interfaces_of(a) == ("CopyAtom",)
    assert interfaces_of(S2tCopyAtom("128x256b")) == ("CopyAtom", "AsyncCopyAtom")
    # both TMEM atoms name the rule they miss (tcgen05: the sm_100a/sm_101a/... targets)
    for atom, use in ((a, ("tmem", "rmem", 32)), (S2tCopyAtom("128x256b"), ("smem", "tmem"))):
        with pytest.raises(AtomVerificationError, match=r"not available on sm_90a: it needs "
                                                        r"tcgen05 \("):
            atom.verify_instance("sm_90a", use)
        assert not atom.available_on("sm_120a") and atom.available_on("sm_100a")


def test_spec_only_copy_atoms() -> None:
    for name in ("atom.tmem_to_smem_copy", "atom.tcgen05.cp"):
        with pytest.raises(TmemError, match=r"does not exist.*tcgen05.ld.*st.shared"):
            spec_only_atom(name)


# --------------------------------------------------------------------------- ptxas


def _module(target: str, version: tuple[int, int], body: list[str] | tuple[str, ...]
            ) -> tuple[str, int]:
    head = [f".version {version[0]}.{version[1]}", f".target {target}", ".address_size 64",
            ".visible .entry sweep()", "{", ".reg .b32 %r<600>;", ".reg .b64 %rd<10>;",
            ".reg .b16 %rs<4>;", ".reg .pred %p<2>;"]
    return "\n".join([*head, *body, "ret;", "}", ""]), len(head) + 1


def _ldst_atoms(ok: bool) -> list[tuple[str, int, bool, str]]:
    out = []
    for shape, s in LDST_SHAPES.items():
        for num in (1, 2, 4, 8, 16, 32, 64, 128):
            if (s.regs * num <= 128) == ok:
                for pack in (False, True):
                    for d in ("load", "store"):
                        out.append((shape, num, pack, d))
    return out


def _ldst_line(shape: str, num: int, pack: bool, d: str) -> str:
    regs = LDST_SHAPES[shape].regs * num
    split = 2 * num if shape == "16x32bx2" else None
    if regs <= 128:
        a = TmemCopyAtom(d, shape, num, pack, split)
        return a.instruction([f"%r{i}" for i in range(regs)], "%r590")
    # beyond the limit: spelled by hand (the constructor refuses it)
    op = f"tcgen05.{'ld' if d == 'load' else 'st'}.sync.aligned.{shape}.x{num}.b32"
    vec = "{" + ", ".join(f"%r{i}" for i in range(min(regs, 580))) + "}"
    addr = "[%r590]" + (f", {split}" if split else "")
    return f"{op} {vec}, {addr};" if d == "load" else f"{op} {addr}, {vec};"


def test_every_ldst_form_assembles() -> None:
    forms = _ldst_atoms(True)
    lines = [_ldst_line(*f) for f in forms]
    got = ptxas_sweep.verdicts(_module, "sm_100a", (8, 6), lines)
    bad = [f"{line[:90]}: {m}" for line, (ok, m) in zip(lines, got, strict=True) if not ok]
    assert not bad, "\n".join(bad)
    assert len(forms) == 2 * 2 * (8 + 8 + 7 + 6 + 8)


def test_ldst_beyond_128_registers_rejected() -> None:
    forms = _ldst_atoms(False)
    assert forms
    lines = [_ldst_line(*f) for f in forms]
    got = ptxas_sweep.verdicts(_module, "sm_100a", (8, 6), lines)
    assert not any(ok for ok, _ in got)
    for shape, num, pack, d in forms:
        with pytest.raises(TmemError):
            TmemCopyAtom(d, shape, num, pack, 2 if shape == "16x32bx2" else None)


def _other_lines() -> list[str]:
    lines = [S2tCopyAtom(s, c, dz).instruction("%r0", "%rd1") for s in CP_SHAPES
             for dz in (None, *CP_DECOMPRESS) for c in (1,)]
    lines += [alloc_instruction("%r0", 32), alloc_instruction("%r0", "%r1"),
              dealloc_instruction("%r0", 512), relinquish_instruction(),
              commit_instruction("%r0"), commit_instruction("%r0", 1, "%rs0"),
              f"{FENCE_BEFORE};", f"{FENCE_AFTER};", f"{WAIT_LD};", f"{WAIT_ST};"]
    return lines


def test_cp_alloc_commit_fences_assemble_and_are_gated() -> None:
    lines = _other_lines()
    got = ptxas_sweep.verdicts(_module, "sm_100a", (8, 6), lines)
    assert all(ok for ok, _ in got), [m for ok, m in got if not ok]
    two = [x.replace("cta_group::1", "cta_group::2") for x in lines]
    assert all(ok for ok, _ in ptxas_sweep.verdicts(_module, "sm_100a", (8, 6), two))
    off = ptxas_sweep.verdicts(_module, "sm_90a", (8, 6), lines)
    assert not any(ok for ok, _ in off)


def test_cp_shape_needs_warp_qualifier() -> None:
    with pytest.raises(TmemError, match="warpx"):
        S2tCopyAtom("64x128b")
    got = ptxas_sweep.verdicts(_module, "sm_100a", (8, 6),
                               ["tcgen05.cp.cta_group::1.64x128b [%r0], %rd1;"])
    assert got[0] == (False, got[0][1]) and "warptype" in got[0][1][0]


def test_seed_copy_spellings_rejected_by_ptxas() -> None:
    # the specification's s2t / tmem->smem / tmem->tmem spellings (ptxas: Arguments mismatch)
    lines = ["tcgen05.cp.shared::cta.async [%r0], %rd1;",
             "tcgen05.cp.async.shared::cta [%r0], [%r1];",
             "tcgen05.cp.async [%r0], [%r1];",
             "tcgen05.ld.sync.aligned.32x32b.b32 {%r1}, [%r0];"]
    assert not any(ok for ok, _ in ptxas_sweep.verdicts(_module, "sm_100a", (8, 6), lines))


# --------------------------------------------------------------------------- emitter


def test_emitter_refuses_a_second_cta_group() -> None:
    k = Kernel("k")
    Tcgen05(k, 1)
    with pytest.raises(Tcgen05EmitError, match="one CTA group per kernel"):
        Tcgen05(k, 2)
    t = Tcgen05(k, 1)
    with pytest.raises(Tcgen05EmitError, match="cta_group::2"):
        t.mma(Tcgen05MmaForm("f16", 2), d="%r0", a="%rd1", b="%rd2", idesc="%r3",
              enable_input_d="%p0")
    with pytest.raises(Tcgen05EmitError, match="cta_group::2"):
        t.cp(S2tCopyAtom("128x256b", 2), "%r0", "%rd1")


def test_check_kernel_and_ptxas_agree_on_mixing() -> None:
    mod = Module("sm_100a")
    k = mod.kernel("mixed")
    r = k.regs("b32", 4)
    rd = k.regs("b64", 3)
    p = k.reg("pred")
    k.ins("setp.ne.b32", p, r[0], 0)
    t = Tcgen05(k, 1)
    t.mma(umma_atom("sm100.mma.f16.cta1.m128n64k16.ss.f32.f16.f16"), d=r[0], a=rd[0], b=rd[1],
          idesc=r[1], enable_input_d=p)
    assert check_kernel(k) == 1
    assert ptxas.check(mod.emit(), "sm_100a")[0]
    k.raw(alloc_instruction(str(r[2]), 32, 2))  # a raw line with the other group
    with pytest.raises(Tcgen05EmitError, match="mixes tcgen05 CTA groups"):
        check_kernel(k)
    ok, diags = ptxas.check(mod.emit(), "sm_100a")
    assert not ok and any("CTA pair" in d.message or "cta_group" in d.message for d in diags)
