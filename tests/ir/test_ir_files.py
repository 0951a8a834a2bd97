"""The .mlir files of tests/ir: negative cases against their expected-error annotations,
the specification's diagnostics each covered by one, and exact print/parse round trips."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from nvatom import diagnostics as D
from nvatom.ir import checker, driver

HERE = Path(__file__).parent
INVALID = sorted(HERE.glob("invalid_*.mlir"))
VALID = sorted(p for p in HERE.glob("*.mlir") if not p.name.startswith("invalid_"))


@pytest.mark.parametrize("path", INVALID, ids=lambda p: p.name)
def test_expected_errors(path: Path) -> None:
    results = checker.check_file(str(path))
    problems = [p for r in results for p in r.problems]
    assert not problems, "\n".join(problems)
    # every case of a negative file fails, and says so with an annotation
    assert all(r.diagnostics for r in results), [r.case.first_line for r in results
                                                 if not r.diagnostics]


# The specification's diagnostics (nvatom.diagnostics) in the catalogue, by name.  Our own
# wordings in the catalogue (COPY_*, SM120_*, ...) are not listed: they have no spec text.
SPEC = (
    "NO_KNOWN_INTERFACE", "ALL_OPERANDS_ELEMENT_TYPE", "RMEM_INPUTS", "OPERAND_ELEMENT_TYPE",
    "MMA_ATOM_LAYOUT", "STATIC_LAYOUT", "COMPOSED_LAYOUT", "COMPOSED_LAYOUT_ABD",
    "SAME_RANK_AB", "SAME_RANK_CD", "C_RANK_1_OR_2", "C_RANK_2_OR_3", "C_RANK_3",
    "VECTORIZE_STRIDES_ONE", "VECTORIZE_STRIDES_MATCH",
    "UMMA_RESIDENCY_A", "UMMA_RESIDENCY_B", "UMMA_RESIDENCY_D", "UMMA_INVALID_LAYOUT",
    "UMMA_NOT_A_GEMM", "UMMA_BS_C_F32", "UMMA_BS_SF_SAME",
    "WGMMA_INT8_TYPES", "WGMMA_INT4_TYPES", "WGMMA_B1_TYPES", "WGMMA_FP8_TYPES",
    "TMA_INVALID_OPERAND_TYPES", "TMA_INVALID_SMEM_LAYOUT_TYPE", "TMA_UNSUPPORTED_GMEM_LAYOUT",
    "TMA_INTEGER_STRIDES", "TMA_SMEM_SWIZZLE", "TMA_STATIC_SMEM_VMAP", "TMA_SHAPE_EQUIVALENCE",
    "TMA_G_BASIS", "TMA_INVALID_TMA_LAYOUT", "TMA_TENSOR_TYPE", "TMA_MISSING_NUM_MULTICAST",
    "TMA_NUM_MULTICAST_OF", "TMA_FIELD_NOT_MUTABLE",
)
UNREACHABLE = {
    "NO_KNOWN_INTERFACE": "every IR atom type is an MMA or copy atom, so the dispatcher's "
                          "fallback cannot be reached from the IR",
}


def _pattern(template: str) -> re.Pattern[str]:
    """The template with each {n} slot matching anything."""
    parts = re.split(r"\{\d\}", template.strip())
    return re.compile(".*".join(re.escape(p) for p in parts))


def test_no_known_interface_is_unreachable_from_the_ir() -> None:
    """UNREACHABLE's claim, checked: every atom the IR can name (each registry family's atoms;
    TMA atoms are built from tensor maps, not named) is an MMA or copy atom, so the
    dispatcher's fallback never fires from the IR (tests/atoms/test_verify.py fires it)."""
    from nvatom.atoms import registry as R
    from nvatom.atoms.interfaces import CopyAtom, MmaAtom

    assert set(UNREACHABLE) == {"NO_KNOWN_INTERFACE"}
    named = [a for fam in R.FAMILIES if fam.name != "tma" for a in fam.atoms(None)]
    assert len(named) > 1000
    assert [a for a in named if not isinstance(a, (MmaAtom, CopyAtom))] == []


@pytest.mark.parametrize("name", [n for n in SPEC if n not in UNREACHABLE])
def test_every_spec_diagnostic_has_a_negative_case(name: str) -> None:
    texts = [m.group(1) for p in INVALID for m in re.finditer(r"\{\{(.*?)\}\}", p.read_text())]
    template = getattr(D, name)
    variants = ([template.replace("{0}", s, 1) for s in "abc"]
                if name == "OPERAND_ELEMENT_TYPE" else [template])
    for t in variants:
        pat = _pattern(t)
        assert any(pat.search(x) for x in texts), f"no tests/ir/invalid_*.mlir case for {t!r}"


def _code_lines(text: str) -> str:
    lines = [ln for ln in text.splitlines() if ln.strip() and not ln.strip().startswith("//")]
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("path", VALID, ids=lambda p: p.name)
def test_round_trip_is_exact(path: Path) -> None:
    text = path.read_text()
    mod = driver.parse(text, path.name)
    printed = driver.print_module(mod)
    assert printed == _code_lines(text)
    assert driver.print_module(driver.parse(printed, "printed")) == printed
    driver.verify(mod)


@pytest.mark.parametrize("path", VALID, ids=lambda p: p.name)
def test_valid_files_verify_and_compile(path: Path) -> None:
    results = checker.check_file(str(path), lower=True)
    assert all(r.ok and not r.diagnostics for r in results), [str(d) for r in results
                                                               for d in r.diagnostics]
