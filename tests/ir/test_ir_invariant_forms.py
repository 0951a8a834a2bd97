"""Issue 16's invariant on the ``copy`` and ``tma`` families (nvatom.ir.generate_forms): every
generated use of a copy atom or a TMA form fails ``verify`` with a known diagnostic, or
verifies, lowers and assembles.  A sample per CI run: a fixed part (seed 16) and a random part
whose seed is printed (NVATOM_IR_INVARIANT_SEED replays it); the whole sweep is
``scripts/ir_invariant_sweep.py --family copy`` / ``--family tma``."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from nvatom.ir.generate import NOT_GENERATED, atom_use, cases

sys.path.insert(0, str(Path(__file__).parent))
from invariant import assert_invariant, check, sample

from tests.ir.test_ir_invariant import _SEED  # one random seed per run, printed there

FAMILIES = ("copy", "tma")
FIXED, RANDOM = 30, 15  # per family


def _sample() -> list[tuple[object, object, str]]:
    out = []
    for name in FAMILIES:
        out += sample([c for c in cases() if c[0].name == name], FIXED, RANDOM, _SEED)
    return out


SAMPLE = _sample()


@pytest.mark.parametrize("case", SAMPLE, ids=lambda c: f"{c[1].name}@{c[2]}")
def test_copy_and_tma_use_verifies_and_assembles_or_is_rejected(case: tuple) -> None:
    assert_invariant(case, _SEED)


def test_copy_and_tma_are_generated() -> None:
    assert not set(FAMILIES) & set(NOT_GENERATED)
    names = {c[1].name for c in cases() if c[0].name == "tma"}
    assert {"tma.load.tiled.shared::cta", "tma.prefetch_tensor.im2col", "prefetch_tma_desc",
            "tma.partition.load.tiled", "tma.store.scatter4"} <= names


@pytest.mark.parametrize(("name", "target", "status"), [
    # the ptxas facts the forms rest on (ir/ops_tma.py): shared::cta from sm_90 (PTX 8.6),
    # no multicast into it; gather4/scatter4 on the sm_100a family only
    ("tma.load.tiled.shared::cta", "sm_90", "assembled"),
    ("tma.load.tiled.multicast2.shared::cta", "sm_90a", "rejected"),
    ("tma.load.gather4.shared::cta", "sm_100a", "assembled"),
    ("tma.load.gather4", "sm_90a", "rejected"),
    ("tma.prefetch_tensor.im2col", "sm_90", "assembled"),
    ("tma.store.scatter4", "sm_100a", "assembled"),
    ("prefetch_tma_desc", "sm_89", "rejected"),
])
def test_tma_forms_on_targets(name: str, target: str, status: str) -> None:
    fam, atom, t = next(c for c in cases() if c[1].name == name and str(c[2]) == target)
    assert check(atom_use(fam, atom, t))[0] == status
