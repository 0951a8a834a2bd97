"""The specification's SM80/SM89 reference-layout synthesizer, corrected.

The specification keys the canonical layouts of the register MMAs on a 5-tuple ``(K, M, sparse, fp8,
trans_a)`` with seven arms, and returns three layout slots (A, B, C) -- four for the sparse
arms, slot 3 being the metadata layout -- plus the per-thread element count.  nvatom keeps the
key and the result shape but answers from the atom tables, so the synthesizer and the
verifier read one source of truth:

* each arm names a real PTX form (arms 3-5 spell the types wrongly in the spec;
docs/spec-deviations.md "Register MMA");
* arm 1 (``trans_a``: ``m16n8k16.row.row``) does not exist -- ptxas: "Illegal blayout '.row'"
  -- and is rejected with a message saying to transpose through ``ldmatrix ... .trans``;
* the specification's stride triples (``{128, 256, 1024}``, metadata ``0x200000 ...``) are not
  hardware facts and are not reproduced: the slots are the atoms' (thread, value) layouts.
"""

from __future__ import annotations

import dataclasses

from nvatom.atoms.interfaces import AtomVerificationError
from nvatom.atoms.register_mma import mma_form
from nvatom.layout import Layout

__all__ = ["ARMS", "MmaLayoutResult", "synthesize_reference_layouts"]

# (K, M, sparse, fp8, trans_a) -> the form each arm stands for.
ARMS: dict[tuple[int, int, bool, bool, bool], str | None] = {
    (16, 16, False, False, False): "sm80.mma.m16n8k16.f16.f16.f16.f16",
    (16, 16, False, False, True): None,  # arm 1: not a PTX form
    (16, 16, True, False, False): "sm80.sparse_mma.m16n8k16.f16.f16.f16.f16",
    (32, 16, False, False, False): "sm80.mma.m16n8k32.s32.s8.s8.s32",
    (32, 16, False, True, False): "sm89.mma.m16n8k32.f32.e4m3.e4m3.f32",
    (32, 16, True, False, False): "sm80.sparse_mma.m16n8k32.s32.s8.s8.s32",
    (8, 16, False, False, False): "sm80.mma.m16n8k8.f16.f16.f16.f16",
}


@dataclasses.dataclass(frozen=True)
class MmaLayoutResult:
    slots: tuple[object, ...]  # A, B, C layouts (+ metadata layout for sparse arms)
    elements_per_thread: int  # of operand A, as the specification's table counts
    form: str

    @property
    def slot_count(self) -> int:
        return len(self.slots)


def synthesize_reference_layouts(
    k: int, m: int, sparse: bool, fp8: bool, trans_a: bool
) -> MmaLayoutResult:
    key = (k, m, bool(sparse), bool(fp8), bool(trans_a))
    if key not in ARMS:
        raise AtomVerificationError(
            f"no reference layout for (K={k}, M={m}, sparse={sparse}, fp8={fp8}, "
            f"trans_a={trans_a}); arms: "
            + ", ".join(str(a) for a in ARMS)
        )
    name = ARMS[key]
    if name is None:
        raise AtomVerificationError(
            "mma.m16n8k16 has no transposed-A form (ptxas: Illegal blayout '.row' for "
            "instruction 'mma'); load A transposed with ldmatrix ... .trans and use the "
            ".row.col form"
        )
    form = mma_form(name)
    slots: list[object] = [form.tv_layout(op) for op in "ABC"]
    if form.is_sparse:
        slots.append(form.metadata_layout(0))  # type: ignore[attr-defined]
    a = slots[0]
    assert isinstance(a, Layout)
    return MmaLayoutResult(tuple(slots), form.values("A"), name)
