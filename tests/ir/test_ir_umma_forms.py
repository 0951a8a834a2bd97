"""Every UMMA form lowers (issue 16): A from TMEM (``ts``), sparse with its metadata in TMEM,
block-scaled with scale factors in TMEM, ``cta_group::2`` on a CTA pair, ``.ws``; and
``atom.s2t_copy`` (``tcgen05.cp``) and ``cute_nvgpu.arch.tmem_shift`` (``tcgen05.shift``).
The operand lists are checked against the PTX ISA's syntax of tcgen05.mma, written here:

    tcgen05.mma{.ws}{.sp}.cta_group.kind [d-tmem], a-desc|[a-tmem], b-desc{, [sp-meta-tmem]},
        idesc{, [scale-A-tmem], [scale-B-tmem]}, enable-input-d;
    tcgen05.cp.cta_group.shape{.decompress} [taddr], s-desc;
    tcgen05.shift.cta_group.down [taddr];
    tcgen05.commit.cta_group.mbarrier::arrive::one.shared::cluster{.multicast::cluster}.b64
        [mbar]{, ctaMask};

and each kernel is assembled by ptxas."""

from __future__ import annotations

import re

import pytest

from nvatom.atoms.registry import family
from nvatom.ir import driver
from nvatom.ir.generate import atom_use
from nvatom.ir.lower import lower
from nvatom.runtime import ptxas

REG, TM, DESC = r"%r\d+", r"\[%r\d+\]", r"%rd\d+"


def _lowered(text: str, name: str = "t.mlir") -> str:
    mod = driver.parse(text, name)
    out = lower(mod, driver.verify(mod))
    ptxas.assemble(out.ptx, out.target)
    return out.ptx


def _use(atom: str, t: str = "sm_100a") -> str:
    fam = family("umma" if atom.startswith("sm100") else "tmem")
    return _lowered(atom_use(fam, fam.atom(atom), t).text)


def _mma_lines(ptx: str) -> list[str]:
    return [ln.strip() for ln in ptx.splitlines() if ln.strip().startswith("tcgen05.mma")]


@pytest.mark.parametrize(("atom", "operands"), [
    # dense ss: [d], a-desc, b-desc, idesc, p
    ("sm100.mma.f16.cta1.m128n64k16.ss.f32.f16.f16", [TM, DESC, DESC, REG, r"%p\d+"]),
    # ts: A is a TMEM address in brackets
    ("sm100.mma.f16.cta1.m128n64k16.ts.f32.bf16.bf16", [TM, TM, DESC, REG, r"%p\d+"]),
    # sparse: the metadata's TMEM address after b-desc
    ("sm100.mma_sp.f16.cta1.m128n64k32.ss.f32.f16.f16", [TM, DESC, DESC, TM, REG, r"%p\d+"]),
    # block-scaled: scale factors of A and B in TMEM before enable-input-d
    ("sm100.mma_bs.mxf8f6f4.cta1.m128n64k32.ss.f32.e4m3.e4m3.ue8m0.vs32",
     [TM, DESC, DESC, REG, TM, TM, r"%p\d+"]),
    ("sm100.mma_bs_sp.mxf4nvf4.cta1.m128n64k128.ts.f32.e2m1.e2m1.ue4m3.vs32",
     [TM, TM, DESC, TM, REG, TM, TM, r"%p\d+"]),
    ("sm100.mma.tf32.cta1.m64n64k8.ss.ws.f32.tf32.tf32", [TM, DESC, DESC, REG, r"%p\d+"]),
    ("sm100.mma.i8.cta2.m256n64k32.ts.s32.s8.u8", [TM, TM, DESC, REG, r"%p\d+"]),
])
def test_each_form_lowers_with_the_isa_operand_list(atom: str, operands: list[str]) -> None:
    ptx = _use(atom)
    lines = _mma_lines(ptx)
    assert len(lines) == 1, lines
    opcode, args = lines[0].rstrip(";").split(" ", 1)
    got = [a.strip() for a in args.split(",")]
    assert len(got) == len(operands) and all(re.fullmatch(p, g) for p, g in
                                             zip(operands, got, strict=True)), lines[0]
    a = family("umma").atom(atom)
    assert opcode == a.issued_form("sm_100a").opcode
    assert (".ws." in opcode) == a.ws and (".sp." in opcode) == a.sparse
    assert f".cta_group::{a.cta_group}." in opcode


def test_a_cta_pair_allocates_and_commits_for_the_pair() -> None:
    ptx = _use("sm100.mma.f16.cta2.m256n128k16.ss.f32.f16.f16")
    assert ".reqnctapercluster 2, 1, 1" in ptx
    assert re.search(r"tcgen05\.alloc\.cta_group::2\.sync\.aligned\.shared::cta\.b32", ptx)
    assert re.search(r"tcgen05\.dealloc\.cta_group::2\.sync\.aligned\.b32", ptx)
    assert "tcgen05.relinquish_alloc_permit.cta_group::2.sync.aligned;" in ptx
    # the commit reaches both CTAs' barriers: mask 0b11 << (rank & ~1), a 16-bit register
    assert re.search(r"tcgen05\.commit\.cta_group::2\.mbarrier::arrive::one\.shared::cluster"
                     r"\.multicast::cluster\.b64 \[%r\d+\], %h\d+;", ptx)
    assert "%cluster_ctarank" in ptx  # only the pair's even CTA issues the MMA


def test_cta_pair_atoms_with_operand_layouts_verify() -> None:
    # issue 16's known gap: per-CTA views (M/2 = 64 rows of A, N/2 = 64 of B) and a TMEM
    # buffer holding Layout B's D (N split over lanes 0-63 and 64-127) used to fail the
    # GEMM check; each is now checked per CTA
    sw = "Sw<3,3,3> o 0 o ((8,8),(8,2)):((64,512),(1,8))"
    text = f"""func.func @pair() attributes {{cluster = [2, 1, 1]}} {{
  %atom = cute_nvgpu.make_atom : !cute_nvgpu.sm100.mma<f16.cta2.m128n128k16.ss.f32.f16.f16>
  %sa = cute.alloc_smem : !cute.memref<f16, smem, {sw}>
  %sb = cute.alloc_smem : !cute.memref<f16, smem, {sw}>
  %a = cute_nvgpu.make_smem_desc %sa : !cute_nvgpu.smem_desc_view<f16, K, {sw}>
  %b = cute_nvgpu.make_smem_desc %sb : !cute_nvgpu.smem_desc_view<f16, K, {sw}>
  %d = cute.alloc_tmem : !cute.memref<f32, tmem, (128,64):(64,1)>
  cute_nvgpu.atom.mma %atom, %d, %a, %b, %d {{accumulate = false}}
  func.return
}}"""
    text = 'builtin.module attributes {nvatom.target = "sm_100a"} {\n' + text + "\n}"
    assert len(_mma_lines(_lowered(text))) == 1
    # a per-CTA tile of 32 rows, not the pair's M / 2 = 64: the atom's diagnostic
    short = sw.replace("((8,8)", "((8,4)")
    bad = text.replace(f"smem, {sw}>\n  %sb", f"smem, {short}>\n  %sb").replace(
        f"K, {sw}>\n  %b", f"K, {short}>\n  %b")
    assert bad.count("((8,4)") == 2
    with pytest.raises(driver.IRError, match="expects Mma atom layout of"):
        driver.verify(driver.parse(bad))
    # Layout B's D takes 64 columns per CTA: a 32-column buffer does not hold it
    small = text.replace("(128,64):(64,1)", "(128,32):(32,1)")
    with pytest.raises(driver.IRError, match=r"puts operand D in 128 TMEM lanes x 64 32-bit "
                                             r"columns, but its buffer has 128 lanes x 32"):
        driver.verify(driver.parse(small))


def test_one_cta_group_per_kernel_and_one_allocation() -> None:
    text = """builtin.module attributes {nvatom.target = "sm_100a"} {
func.func @mixed() attributes {cluster = [2, 1, 1]} {
  %cp = cute_nvgpu.make_atom : !cute_nvgpu.atom.s2t_copy<cta_group::1.128x256b>
  %s = cute.alloc_smem : !cute.memref<ue8m0, smem, ((8,16),(16,2)):((16,256),(1,128))>
  %t = cute.alloc_tmem : !cute.memref<ue8m0, tmem, (128,8):(8,1)>
  %u = cute.alloc_tmem : !cute.memref<f32, tmem, (128,64):(64,1)>
  cute_nvgpu.atom.copy %cp, %s, %t
  %cp2 = cute_nvgpu.make_atom : !cute_nvgpu.atom.s2t_copy<cta_group::2.128x256b>
  cute_nvgpu.atom.copy %cp2, %s, %t
  func.return
}
}"""
    with pytest.raises(driver.IRError, match="uses tcgen05 with cta_group::1 and cta_group::2"):
        driver.verify(driver.parse(text))
    one = text.replace("  %cp2 = cute_nvgpu.make_atom : !cute_nvgpu.atom.s2t_copy<cta_group::2."
                       "128x256b>\n  cute_nvgpu.atom.copy %cp2, %s, %t\n", "")
    ptx = _lowered(one)
    # both buffers come from one tcgen05.alloc (64 + 32 columns -> 128), the larger first
    assert ptx.count("tcgen05.alloc.") == 1 and "], 128;" in ptx
    assert re.search(r"add\.u32 %r\d+, %r\d+, 64;", ptx)


def test_s2t_copy_is_tcgen05_cp_from_the_tiles_descriptor() -> None:
    ptx = _use("atom.s2t_copy<cta_group::1.128x256b>")
    # PTX ISA shared-memory descriptor (tcgen05 "Shared memory descriptor"): start >> 4 in
    # bits 0-13, LBO >> 4 in 16-29, SBO >> 4 in 32-45, 0b001 in 46-48, layout type 61-63 (0:
    # no swizzle).  The generated K-major no-swizzle tile ((8,16),(16,2)):((16,128),(1,2048))
    # of bytes: core matrices of 8 rows x 16 bytes, the next 8 rows 128 bytes on (SBO), the
    # second 16-byte column 2048 bytes on (LBO)
    word = (2048 >> 4) << 16 | (128 >> 4) << 32 | 1 << 46
    assert re.search(rf"add\.s64 (%rd\d+), %rd\d+, {word};", ptx)
    assert re.search(r"tcgen05\.cp\.cta_group::1\.128x256b \[%r\d+\], %rd\d+;", ptx)
    ptx = _use("atom.s2t_copy<cta_group::2.32x128b.warpx4.b8x16.b4x16_p64>")
    assert re.search(r"tcgen05\.cp\.cta_group::2\.32x128b\.warpx4\.b8x16\.b4x16_p64 "
                     r"\[%r\d+\], %rd\d+;", ptx)


def test_s2t_copy_needs_a_described_source_and_room() -> None:
    text = """builtin.module attributes {nvatom.target = "sm_100a"} {
func.func @cp() {
  %cp = cute_nvgpu.make_atom : !cute_nvgpu.atom.s2t_copy<cta_group::1.128x256b>
  %s = cute.alloc_smem : !cute.memref<ue8m0, smem, (128,32):(32,1)>
  %t = cute.alloc_tmem : !cute.memref<ue8m0, tmem, (128,8):(8,1)>
  cute_nvgpu.atom.copy %cp, %s, %t
  func.return
}
}"""
    # 32-byte rows stored row-major are no canonical K-major layout: no descriptor
    with pytest.raises(driver.IRError, match="reads its source through a shared-memory "
                                             "descriptor"):
        driver.verify(driver.parse(text))
    small = text.replace("(128,32):(32,1)", "((8,16),(16,2)):((16,256),(1,128))").replace(
        "(128,8):(8,1)", "(128,4):(4,1)")
    with pytest.raises(driver.IRError, match="writes 128 TMEM lanes x 8 32-bit columns"):
        driver.verify(driver.parse(small))


SHIFT = """builtin.module attributes {{nvatom.target = "{t}"}} {{
func.func @shift(){attrs} {{
  %t = cute.alloc_tmem : !cute.memref<f32, tmem, (128,32):(32,1)>
{extra}  cute_nvgpu.arch.tmem_shift %t
  %bar = cute_nvgpu.arch.mbarrier_init {{count = 1}}
  cute_nvgpu.arch.umma_commit %bar
  func.return
}}
}}"""


def test_tmem_shift_is_tcgen05_shift_down() -> None:
    ptx = _lowered(SHIFT.format(t="sm_100a", attrs="", extra=""))
    assert re.search(r"tcgen05\.shift\.cta_group::1\.down \[%r\d+\];", ptx)
    # in a CTA-pair kernel it takes the kernel's group
    pair = SHIFT.format(t="sm_110a", attrs=" attributes {cluster = [2, 1, 1]}",
                        extra="  %a = cute_nvgpu.make_atom : !cute_nvgpu.sm100.mma<f16.cta2."
                              "m256n64k16.ss.f32.f16.f16>\n")
    assert re.search(r"tcgen05\.shift\.cta_group::2\.down \[%r\d+\];", _lowered(pair))


@pytest.mark.parametrize("t", ["sm_100f", "sm_103f", "sm_110f"])
def test_tmem_shift_is_for_the_a_targets(t: str) -> None:
    # ptxas 13.0: "Instruction 'tcgen05.shift' not supported on .target 'sm_100f'"
    with pytest.raises(driver.IRError, match=rf"\(tcgen05.shift\) is not available on {t}"):
        driver.verify(driver.parse(SHIFT.format(t=t, attrs="", extra="")))


def test_sparse_k_blocks_advance_by_the_stored_k() -> None:
    # kind::f16 sparse: K = 32 per instruction; A stores half of it (16 elements, 32 bytes),
    # B all of it (64 bytes).  Two K-blocks: the descriptors' start-address field (bits 0-13,
    # 16-byte units; PTX ISA "Shared memory descriptor") advances by 2 for A and 4 for B
    from nvatom.atoms.smem import smem_layout, smem_swizzle
    from nvatom.ir.syntax import layout_text

    la = layout_text(smem_layout(128, 32, 16, "K", smem_swizzle("SW64")))
    lb = layout_text(smem_layout(64, 64, 16, "K", smem_swizzle("SW128")))
    text = f"""builtin.module attributes {{nvatom.target = "sm_100a"}} {{
func.func @sp() {{
  %atom = cute_nvgpu.make_atom : !cute_nvgpu.sm100.mma_sp<f16.cta1.m128n64k32.ss.f32.f16.f16>
  %sa = cute.alloc_smem : !cute.memref<f16, smem, {la}>
  %sb = cute.alloc_smem : !cute.memref<f16, smem, {lb}>
  %a = cute_nvgpu.make_smem_desc %sa : !cute_nvgpu.smem_desc_view<f16, K, {la}>
  %b = cute_nvgpu.make_smem_desc %sb : !cute_nvgpu.smem_desc_view<f16, K, {lb}>
  %d = cute.alloc_tmem : !cute.memref<f32, tmem, (128,64):(64,1)>
  %e = cute.alloc_tmem : !cute.memref<u8, tmem, (128,2):(2,1)>
  cute_nvgpu.atom.mma %atom, %d, %a, %b, %d, %e {{accumulate = false}}
  func.return
}}
}}"""
    ptx = _lowered(text)
    assert len(_mma_lines(ptx)) == 2
    words = [int(w) for w in re.findall(r"add\.s64 %rd\d+, %rd\d+, (\d+);", ptx)]
    assert len(words) == 4
    assert words[1] - words[0] == 2 and words[3] - words[2] == 4
    # the metadata of the second K-block: one column on (K / 8 = 4 bytes per row)
    meta = [ln.split(",")[3].strip() for ln in _mma_lines(ptx)]
    assert meta[0] != meta[1]
    m0, m1 = (re.escape(x.strip("[]")) for x in meta)
    assert re.search(rf"add\.u32 {m1}, {m0}, 1;", ptx), (meta, ptx)


def test_umma_commit_multicasts_to_a_mask_of_the_cluster() -> None:
    body = """builtin.module attributes {{nvatom.target = "sm_100a"}} {{
func.func @c(){attrs} {{
  %bar = cute_nvgpu.arch.mbarrier_init {{count = 1}}
  cute_nvgpu.arch.umma_commit %bar {{multicast_mask = {mask}}}
  func.return
}}
}}"""
    ptx = _lowered(body.format(attrs=" attributes {cluster = [4, 1, 1]}", mask=10))
    assert re.search(r"mov\.b16 (%h\d+), 10;", ptx)
    assert re.search(r"tcgen05\.commit\.cta_group::1\.mbarrier::arrive::one\.shared::cluster"
                     r"\.multicast::cluster\.b64 \[%r\d+\], %h\d+;", ptx)
    for attrs, mask in (("", 2), (" attributes {cluster = [2, 1, 1]}", 4)):
        with pytest.raises(driver.IRError, match=f"multicast_mask = {mask} names no CTAs"):
            driver.verify(driver.parse(body.format(attrs=attrs, mask=mask)))


@pytest.mark.parametrize("atom", [
    # MN-major operands (not in the registry's K-major lattice, but expressible): the tf32
    # one takes the 128-byte swizzle with 32-byte atoms, which has no WGMMA mode
    "sm100.mma.tf32.cta1.m128n64k8.ss.f32.tf32.tf32.amn.bmn",
    "sm100.mma.i8.cta1.m128n64k32.ss.s32.s8.s8.amn.bmn",
    "sm100.mma.f8f6f4.cta2.m128n32k32.ss.f32.e4m3.e5m2.amn.bmn",
    "sm100.mma_sp.f16.cta2.m256n64k32.ts.f32.bf16.bf16.bmn",
])
def test_mn_major_operands_lower(atom: str) -> None:
    from nvatom.arch import target
    from nvatom.atoms.sm100 import umma_atom
    from nvatom.ir.generate_sm100 import umma_use

    assert len(_mma_lines(_lowered(umma_use(umma_atom(atom), target("sm_100a"))))) == 1
