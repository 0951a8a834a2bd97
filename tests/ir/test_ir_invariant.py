"""Issue 16's invariant on a sample: every generated atom use (nvatom.ir.generate, one per
registry atom and target) fails ``verify`` with a known diagnostic, or verifies, lowers and
assembles with ptxas for its target.  The sample is a fixed part (seed 16) and a random part
whose seed is printed (set NVATOM_IR_INVARIANT_SEED to replay it); the whole sweep is
scripts/ir_invariant_sweep.py."""

from __future__ import annotations

import hashlib
import os
import random
import sys
from pathlib import Path

import pytest

from nvatom.arch import TARGETS, feature
from nvatom.atoms.registry import FAMILIES
from nvatom.ir.generate import NOT_GENERATED, atom_use, cases

sys.path.insert(0, str(Path(__file__).parent))
from invariant import XFAIL, assert_invariant, known, sample

FIXED, RANDOM = 120, 80
#: the SM100 tcgen05 families, sampled apart (umma has 29,804 atoms, 20 times the others
#: together): (fixed on a tcgen05 target, fixed on any target, random on any target)
SM100: dict[str, tuple[int, int, int]] = {"umma": (40, 10, 30), "tmem": (16, 4, 10)}
TCGEN05_TARGETS = tuple(n for n in TARGETS if feature("tcgen05").available_on(n))


def _seed() -> int:
    """NVATOM_IR_INVARIANT_SEED, else one per run: pytest-xdist's workers must collect the
    same sample, so under xdist the seed comes from the run's id, which they share."""
    if "NVATOM_IR_INVARIANT_SEED" in os.environ:
        return int(os.environ["NVATOM_IR_INVARIANT_SEED"])
    run = os.environ.get("PYTEST_XDIST_TESTRUNUID")
    if run:
        return int(hashlib.sha256(run.encode()).hexdigest()[:7], 16)
    return random.SystemRandom().randrange(1 << 28)


_SEED = _seed()
print(f"ir invariant: random seed {_SEED} (NVATOM_IR_INVARIANT_SEED)")


def _sample() -> list[tuple[object, object, str]]:
    all_ = cases()
    out = sample([c for c in all_ if c[0].name not in SM100], FIXED, RANDOM, _SEED)
    for fam, (on, anywhere, rand) in SM100.items():
        mine = [c for c in all_ if c[0].name == fam]
        picked = random.Random(16).sample([c for c in mine if c[2] in TCGEN05_TARGETS], on)
        picked += random.Random(17).sample(mine, anywhere)
        seen = {(c[1].name, c[2]) for c in picked}
        rest = [c for c in random.Random(_SEED).sample(mine, rand + len(picked))
                if (c[1].name, c[2]) not in seen]
        out += picked + rest[:rand]
    return out


SAMPLE = _sample()


@pytest.mark.parametrize("case", SAMPLE, ids=lambda c: f"{c[1].name}@{c[2]}")
def test_atom_use_verifies_and_assembles_or_is_rejected(case: tuple) -> None:
    assert_invariant(case, _SEED)


def test_the_sample_seed_is_reported() -> None:
    # the random part of the sample is replayable: its seed is in every failure message and
    # in this test's output (pytest -rA)
    print(f"ir invariant: random seed {_SEED}; replay with NVATOM_IR_INVARIANT_SEED={_SEED}")
    n = FIXED + RANDOM + sum(sum(x) for x in SM100.values())
    assert len(SAMPLE) == n == len({(c[1].name, c[2]) for c in SAMPLE})


def test_every_family_is_generated_or_documented() -> None:
    for fam in FAMILIES:
        assert fam.name in NOT_GENERATED or any(c[0] is fam for c in cases()), fam.name
    assert set(NOT_GENERATED) <= {f.name for f in FAMILIES}
    for why in XFAIL.values():
        assert why.strip()


def test_the_classifier_tells_known_diagnostics() -> None:
    assert known("atom 'sm80.mma.m16n8k8.f16.f16.f16.f16' needs tier SM80, but target sm_75 "
                 "is tier SM70/75")
    assert known("expects all mma operands to have element type f32, but got A: f16")
    assert not known("no lowering for atom 'x'")
    assert not known("internal error (please report): KeyError: 1")


@pytest.mark.parametrize(("elem", "line"), [
    # PTX ISA: fma.rn{.f32,.f64}; fma.rn.f16x2 / .bf16x2 (the value in the low half);
    # mad.lo.s32 / .u32 (integers, the low bits wrap as the narrow type's)
    ("f32", "fma.rn.f32"), ("f64", "fma.rn.f64"), ("tf32", "fma.rn.f32"),
    ("f16", "fma.rn.f16x2"), ("bf16", "fma.rn.bf16x2"), ("s32", "mad.lo.s32"),
    ("s8", "mad.lo.s32"), ("u4", "mad.lo.u32")])
def test_universal_fma_lowers_to_one_scalar_fma(elem: str, line: str) -> None:
    from nvatom.atoms.registry import family
    from nvatom.ir import driver
    from nvatom.ir.lower import lower

    fam = family("universal_fma")
    use = atom_use(fam, fam.atom(f"atom.universal_fma.{elem}"), "sm_90")
    mod = driver.parse(use.text)
    ptx = lower(mod, driver.verify(mod)).ptx
    fmas = [ln.strip() for ln in ptx.splitlines() if ln.strip().startswith(("fma.", "mad."))]
    assert len(fmas) == 1 and fmas[0].startswith(line + " "), fmas


@pytest.mark.parametrize(("elem", "tgt", "msg"), [
    ("e4m3", "sm_90", "has no scalar PTX fma/mad for e4m3"),
    ("bf16", "sm_75", "is not available on sm_75: fma.rn.bf16x2 needs sm_80 or later")])
def test_universal_fma_without_a_ptx_fma_is_rejected(elem: str, tgt: str, msg: str) -> None:
    from nvatom.atoms.registry import family
    from nvatom.ir import driver

    fam = family("universal_fma")
    use = atom_use(fam, fam.atom(f"atom.universal_fma.{elem}"), tgt)
    with pytest.raises(driver.IRError, match=msg):
        driver.verify(driver.parse(use.text))
