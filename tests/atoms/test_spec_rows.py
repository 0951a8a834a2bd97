"""The last specification rows of issue 28 that were neither tested nor recorded: each test
pins the hardware / PTX ISA / CUTLASS fact that docs/spec-deviations.md records against the
specification's text (golden values from those sources, not from nvatom's output).

* 000 "The legacy SM70 m8n8k4 form ... 4 elements per thread total across A and B combined":
  PTX ISA 9.7.14.5.1 (m8n8k4 .f16: A and B are "A vector expression containing two .f16x2
  registers", four elements each; C/D eight .f32 or four .f16x2), CUTLASS
  ``SM70_8x8x4_F32F16F16F32_TN`` (``uint32_t[2]`` A and B, ``float[8]`` C/D).
* 002 m16n8k16 ``.f16`` C/D element list printed "c0, c1, c1, c2": PTX ISA 9.7.14.5.8 lists
  c0, c1, c2, c3 (two .f16x2 registers), c0/c1 in row groupID, c2/c3 in row groupID + 8.
* 004 ``MmaAtomContract`` (min tier, mnk, types, residencies, supports_sparse,
  supports_block_scale).
* 000 block-scale packed value "masked with ~7 to extract a 3-bit tag".
"""

from __future__ import annotations

import pytest

from nvatom.arch import Tier
from nvatom.atoms import registry, sm90, sm120
from nvatom.atoms.interfaces import BlockScaleAtom, MmaAtom, MmaAtomContract, SparseMetadataAtom
from nvatom.atoms.sm70 import FORMS as SM70
from nvatom.atoms.sm100 import block_scale_packed, block_scale_tag, make_umma_atom
from nvatom.atoms.universal import UniversalFma
from nvatom.dtypes import dtype


# ------------------------------------------------------------------ SM70 m8n8k4 counts
@pytest.mark.parametrize("form", SM70, ids=lambda f: f.name)
def test_sm70_m8n8k4_counts_are_the_isa_s(form) -> None:  # type: ignore[no-untyped-def]
    # four f16 of A and four of B per thread (2 + 2 .f16x2 registers: 8 elements, not the
    # specification's 4 "across A and B combined"); C/D eight values
    assert (form.values("A"), form.values("B")) == (4, 4)
    assert (form.registers("A"), form.registers("B")) == (2, 2)
    for op, t in (("C", form.c), ("D", form.d)):
        assert form.values(op) == 8
        assert form.registers(op) == (8 if t.name == "f32" else 4)
    assert form.values("A") + form.values("B") != 4  # the specification's count


# ------------------------------------------------------------------ m16n8k16 .f16 C/D
def test_m16n8k16_f16_accumulator_holds_c0_to_c3() -> None:
    form = registry.mma_form("sm80.mma.m16n8k16.f16.f16.f16.f16")
    lay = form.tv_layout("C")
    assert form.values("C") == 4 and form.registers("C") == 2  # c0, c1, c2, c3 in 2 .f16x2
    for lane in range(32):
        g, tig = lane >> 2, lane % 4
        # PTX ISA: row = groupID for c0, c1 and groupID + 8 for c2, c3;
        # col = threadID_in_group * 2 + (i & 0x1); C is M x N = 16 x 8, column-major index
        want = [(g + 8 * (i >= 2)) + 16 * (tig * 2 + (i & 1)) for i in range(4)]
        got = [int(lay(lane, i)) for i in range(4)]
        assert got == want, lane
        assert len(set(got)) == 4  # c1 is not held twice (the garbled "c0, c1, c1, c2")


# ------------------------------------------------------------------ MmaAtomContract
def test_mma_atom_contract_of_each_family() -> None:
    c = UniversalFma.of("f32").contract()
    assert c == MmaAtomContract(None, (1, 1, 1), dtype("f32"), dtype("f32"), dtype("f32"),
                                "rmem", "rmem", "rmem", False, False)
    c = registry.mma_form("sm70.mma.m8n8k4.row.col.f32.f16.f16.f32").contract()
    assert (c.min_tier, c.mnk, c.a_residency, c.supports_sparse) == (Tier.SM70, (8, 8, 4),
                                                                      "rmem", False)
    c = registry.mma_form("sm80.sparse_mma.m16n8k32.s32.s8.s8.s32").contract()
    assert (c.min_tier, c.mnk, c.c_type, c.supports_sparse, c.supports_block_scale) == (
        Tier.SM80, (16, 8, 32), dtype("s32"), True, False)
    # the register accumulator type is C's: f32 D over an f16 C
    c = registry.mma_form("sm70.mma.m8n8k4.row.col.f32.f16.f16.f16").contract()
    assert c.c_type == dtype("f16")
    # UMMA: A by descriptor or in TMEM, B by descriptor, D in TMEM
    c = make_umma_atom("f16", 1, 128, 64, "f32", "f16", "f16", a_source="ts",
                       sparse=True).contract()
    assert (c.min_tier, c.a_residency, c.b_residency, c.d_residency) == (
        Tier.SM100, "tmem", "smem_desc_view", "tmem")
    assert (c.supports_sparse, c.supports_block_scale) == (True, False)
    c = make_umma_atom("mxf4nvf4", 1, 128, 64, "f32", "e2m1", "e2m1", sf="ue4m3",
                       vec_size=16).contract()
    assert (c.a_residency, c.supports_sparse, c.supports_block_scale, c.mnk) == (
        "smem_desc_view", False, True, (128, 64, 64))


def _every_mma_atom() -> list[MmaAtom]:
    atoms: list[MmaAtom] = [UniversalFma.of("f32")]
    every = [*registry.mma_forms(), *sm90.FORMS, *sm120.F8F6F4_FORMS, *sm120.MMA_BS_FORMS]
    for fam in ("sm70.mma", "sm75.mma", "sm80.mma", "sm80.sparse_mma", "sm89.mma",
                "sm89.sparse_mma", "sm90.mma", "sm120.mma", "sm120.sparse_mma", "SM120.mma_bs"):
        forms = [f for f in every if f.mnemonic == fam]
        assert forms, fam
        atoms += forms[:3] + forms[-3:]
    return atoms


@pytest.mark.parametrize("atom", _every_mma_atom(), ids=lambda a: a.name)
def test_contract_agrees_with_the_registry(atom: MmaAtom) -> None:
    c = atom.contract()
    rec = registry.atom_record(atom.mnemonic)  # type: ignore[attr-defined]
    assert c.min_tier == rec.min_tier
    assert c.mnk == atom.shape_mnk
    assert c.supports_sparse == isinstance(atom, SparseMetadataAtom)
    assert c.supports_block_scale == isinstance(atom, BlockScaleAtom)
    # 004 registry: "sparse" in the mnemonic <-> a metadata operand; SM120.mma_bs is the
    # block-scaled register MMA; sm90.mma has B (and A unless .rs) behind descriptors
    assert c.supports_sparse == ("sparse" in atom.mnemonic  # type: ignore[attr-defined]
                                 or getattr(atom, "is_sparse", False))
    assert c.supports_block_scale == (atom.mnemonic == "SM120.mma_bs")  # type: ignore
    if atom.mnemonic == "sm90.mma":  # type: ignore[attr-defined]
        assert c.b_residency == "smem_desc_view" and c.d_residency == "rmem"
    else:
        assert (c.a_residency, c.b_residency, c.d_residency) == ("rmem",) * 3


# ------------------------------------------------------------------ block-scale tag
def test_block_scale_tag_is_the_packed_value_masked_with_not_7() -> None:
    # the specification's three packed values (000): (atom_K << 32) | vecSize
    golden = {(32, 32): 0x2000000020, (64, 16): 0x4000000010, (64, 32): 0x4000000020}
    got = {(32, 32): block_scale_packed("e4m3", "e2m3", "ue8m0", "ue8m0", 32, 32),
           (64, 16): block_scale_packed("e2m1", "e2m1", "ue4m3", "ue4m3", 64, 16),
           (64, 32): block_scale_packed("e2m1", "e2m1", "ue8m0", "ue8m0", 64, 32)}
    assert got == golden
    for v in golden.values():
        assert v & 7 == 0  # no 3-bit field in the low bits: vecSize is 16 or 32
        assert block_scale_tag(v) == v & ~7 == v
    assert len({block_scale_tag(v) for v in golden.values()}) == 3
    assert block_scale_tag(0) == 0  # the verifier's error value stays 0
    # the atom builder records the tag of its variant (dense atom_K, vecSize)
    assert make_umma_atom("mxf8f6f4", 1, 128, 64, "f32", "e4m3", "e2m1", sf="ue8m0",
                          vec_size=32).block_scale_tag == 0x2000000020
    assert make_umma_atom("mxf4", 1, 128, 64, "f32", "e2m1", "e2m1", sf="ue8m0",
                          vec_size=32).block_scale_tag == 0x4000000020
    assert make_umma_atom("mxf4nvf4", 1, 128, 64, "f32", "e2m1", "e2m1", sf="ue4m3",
                          vec_size=16).block_scale_tag == 0x4000000010
    assert make_umma_atom("f16", 1, 128, 64, "f32", "f16", "f16").block_scale_tag == 0
