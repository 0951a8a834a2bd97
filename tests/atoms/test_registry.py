"""The atom registry (nvatom.atoms.registry.FAMILIES): every family is reachable from each
thing that walks atoms -- its name grammar and resolver, its table, its fragment view, the
verifier's interface dispatch, the IR's atom types, and the CLI's ``atoms`` / ``frag`` /
``emit``.  A family added to the registry without one of them fails here."""

from __future__ import annotations

import json

import pytest

from nvatom.arch import TARGETS
from nvatom.atoms import registry as R
from nvatom.atoms.interfaces import interfaces_of
from nvatom.cli import main
from nvatom.cli.atoms import COMMANDS
from nvatom.layout import Layout

NAMED = [f for f in R.FAMILIES if f.resolve is not None]
IDS = [f.name for f in R.FAMILIES]


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def _home(fam: R.AtomFamily) -> str:
    """The first target the family's first atom kind exists on."""
    return next(t for t in TARGETS if fam.records[0].allowed_on(t))


def test_every_atom_kind_has_one_family() -> None:
    owners: dict[str, list[str]] = {}
    for f in R.FAMILIES:
        for m in f.mnemonics:
            owners.setdefault(m, []).append(f.name)
    assert set(owners) == set(R.ATOMS), "registry records without a family (or the reverse)"
    assert all(len(v) == 1 for v in owners.values()), owners
    assert len({f.name for f in R.FAMILIES}) == len(R.FAMILIES)
    # only TMA atoms are unnamed: they are made from a tensor map
    assert [f.name for f in R.FAMILIES if f.resolve is None] == ["tma"]


@pytest.mark.parametrize("fam", NAMED, ids=[f.name for f in NAMED])
def test_resolver_table_and_grammar_agree(fam: R.AtomFamily) -> None:
    """The example resolves to an atom of the family; atoms of the table resolve by their own
    name to themselves, and the name grammar (prefixes) sends each name to this family."""
    assert fam.example is not None
    atom = fam.atom(fam.example)
    assert atom.name == fam.example and atom.mnemonic in fam.mnemonics
    assert R.family_of_name(fam.example) is fam
    table = fam.atoms()
    assert table, f"{fam.name}: empty table"
    step = max(1, len(table) // 25)
    for a in table[::step]:
        assert R.family_of_name(a.name) is fam, a.name
        assert fam.atom(a.name).name == a.name
    # the table of a target holds only atoms of that target
    home = _home(fam)
    on_home = fam.atoms(home)
    assert on_home and all(getattr(a, "available_on", lambda t: True)(home) for a in on_home)


@pytest.mark.parametrize("fam", NAMED, ids=[f.name for f in NAMED])
def test_fragment_view_and_verifier_dispatch(fam: R.AtomFamily) -> None:
    """The fragment view answers for the family's first operand, and the atom implements the
    interfaces its record names (what verify_atom_instance dispatches on)."""
    atom = fam.atom(fam.example)
    assert fam.fragment is not None and fam.operands
    assert isinstance(fam.fragment(atom, fam.operands[0]), Layout)
    primary = {"mma": "MmaAtom", "copy": "CopyAtom"}[fam.kind]
    have = set(interfaces_of(atom))
    assert primary in have
    assert set(R.ATOMS[atom.mnemonic].interfaces) <= have, (atom.name, have)


@pytest.mark.parametrize("fam", NAMED, ids=[f.name for f in NAMED])
def test_ir_type_of_every_dialect_mnemonic(fam: R.AtomFamily) -> None:
    """Every mnemonic with a cute_nvgpu spelling is an IR atom type that resolves the
    example's body back to the same atom."""
    from nvatom.ir import types as TY

    rows = {row.mnemonic: row for row in TY.ATOM_FAMILIES}
    for m in fam.mnemonics:
        assert (m in rows) == R.ATOMS[m].dialect_mnemonic, m
    atom = fam.atom(fam.example)
    if atom.mnemonic in rows:
        row = rows[atom.mnemonic]
        assert row.kind == fam.kind
        assert row.atom(row.body_of(atom)).name == atom.name


def test_cli_has_the_commands_of_every_family() -> None:
    assert {f.name for f in R.FAMILIES} <= set(COMMANDS)


@pytest.mark.parametrize("fam", R.FAMILIES, ids=IDS)
def test_cli_atoms_lists_every_family(fam: R.AtomFamily,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    home = _home(fam)
    rc, out, err = _run(capsys, "atoms", "--family", fam.name, "--target", home, "--json")
    assert rc == 0, err
    assert len(json.loads(out)) >= 1


@pytest.mark.parametrize("fam", NAMED, ids=[f.name for f in NAMED])
def test_cli_frag_and_emit_reach_every_named_family(fam: R.AtomFamily,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    assert fam.example is not None
    operand = ["--operand", fam.operands[0]] if fam.operands[0] in "ABCD" else []
    rc, out, err = _run(capsys, "frag", fam.example, *operand, "--no-table")
    assert rc == 0, err
    assert fam.example in out
    atom = fam.atom(fam.example)
    home = next(t for t in TARGETS
                if getattr(atom, "available_on", fam.records[0].allowed_on)(t))
    rc, out, err = _run(capsys, "emit", fam.example, "--target", home)
    if fam.name == "universal_fma":  # no PTX instruction of its own
        assert rc == 2 and "no PTX instruction of its own" in err
    else:
        assert rc == 0, err
        assert out.strip()


def test_cli_atoms_family_all(capsys: pytest.CaptureFixture[str]) -> None:
    """``--family all`` names every family; on sm_100a the TMEM and TMA atoms are there, on
    sm_80 neither (tcgen05 and TMA need sm_100a / sm_90)."""
    rc, out, _ = _run(capsys, "atoms", "--family", "all", "--target", "sm_100a", "--json")
    assert rc == 0
    rows = {r["family"]: r for r in json.loads(out)}
    assert list(rows) == IDS
    assert rows["tmem"]["atoms"] > 0 and rows["tma"]["atoms"] > 0
    assert "atom.tma_load" in rows["tma"]["mnemonics"]
    rc, out, _ = _run(capsys, "atoms", "--family", "all", "--target", "sm_80", "--json")
    rows = {r["family"]: r for r in json.loads(out)}
    assert rows["tmem"]["atoms"] == 0 and rows["tma"]["atoms"] == 0
    assert rows["register_mma"]["atoms"] > 0
    # a bare `nvatom atoms` is that listing; a type filter narrows to the register MMA family
    assert _run(capsys, "atoms", "--target", "sm_80", "--json")[1] == out
    rc, out, _ = _run(capsys, "atoms", "--target", "sm_80", "--a", "f16", "--json")
    names = [a["name"] for a in json.loads(out)]
    assert rc == 0 and names and all(n.startswith(("sm70.", "sm75.", "sm80.")) and ".f16." in n
                                     for n in names)
    rc, out, _ = _run(capsys, "atoms", "--family", "all")
    assert rc == 0 and out.splitlines()[-1].startswith(f"{len(IDS)} families")


def test_unknown_family_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:  # argparse's choices, one line
        main(["atoms", "--family", "nope"])
    err = capsys.readouterr().err
    assert e.value.code == 2 and err.count("\n") == 1 and "'nope'" in err
    with pytest.raises(R.UnknownAtomError, match="one of universal_fma"):
        R.family("nope")
