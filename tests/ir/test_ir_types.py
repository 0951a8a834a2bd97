"""Every atom of the atom tables has its IR type, spelled from the table and round-tripped;
layout type bodies parse to the atom layer's objects and print as its diagnostics quote them."""

from __future__ import annotations

import itertools
import re

import pytest

from nvatom.atoms.tma import E, LayoutType
from nvatom.ir import driver
from nvatom.ir import types as TY
from nvatom.ir.syntax import IRSyntaxError, layout_text, parse_layout_body
from nvatom.layout import ComposedLayout, Layout


def _atoms(fam: TY.AtomFamily) -> list:
    """The family's table (the SM100 lattice, tens of thousands of atoms: its first 400)."""
    return list(itertools.islice(fam.table(), 400))


@pytest.mark.parametrize("fam", [f for f in TY.ATOM_FAMILIES if f.mnemonic !=
                                 "atom.universal_fma"], ids=lambda f: f.mnemonic)
def test_every_atom_of_the_table_has_a_type_that_round_trips(fam: TY.AtomFamily) -> None:
    atoms = _atoms(fam)
    assert atoms, f"{fam.mnemonic}: empty table"
    types = [f"!{fam.type_name}<{fam.body_of(a)}>" for a in atoms]
    args = ", ".join(f"%a{i}: {t}" for i, t in enumerate(types))
    text = f"func.func @all({args}) {{\n  func.return\n}}\n"
    mod = driver.parse(text, "types.mlir")
    assert driver.print_module(mod) == text
    fn = next(iter(mod.op.body.block.ops))
    for arg, atom in zip(fn.body.blocks[0].args, atoms, strict=True):
        assert TY.atom_of(arg.type) == atom  # the type resolves to the table's row


def test_universal_fma_types() -> None:
    for t in ("f32", "f16", "f64"):
        mod = driver.parse(f"func.func @f(%a: !cute_nvgpu.atom.universal_fma<{t}>) {{\n"
                           "  func.return\n}\n")
        arg = next(iter(mod.op.body.block.ops)).body.blocks[0].args[0]
        assert TY.atom_of(arg.type).element_type.name == t


# Registry records that are operations, not types (docs/spec-deviations.md#tma-worked-example:
# make_exec_tma binds an atom, prefetch_tma_desc prefetches a descriptor).
_OP_RECORDS = {"atom.make_exec_tma": "cute_nvgpu.atom.make_exec_tma",
               "prefetch_tma_desc": "cute_nvgpu.prefetch_tma_desc"}


def _dialect_records() -> list[str]:
    from nvatom.atoms.registry import ATOMS

    return [m for m, r in ATOMS.items() if r.dialect_mnemonic]


@pytest.mark.parametrize("mnemonic", _dialect_records())
def test_every_dialect_spelled_registry_record_parses_and_prints(mnemonic: str) -> None:
    """Each ATOMS record with a dialect spelling is an IR type (its table's atoms checked
    when parsed) or an IR operation; a new record without IR support fails here."""
    from nvatom.ir.dialect import ALL_OPS

    if mnemonic in _OP_RECORDS:
        assert _OP_RECORDS[mnemonic] in {o.name for o in ALL_OPS}
        return
    fams = {f.mnemonic: f for f in TY.ATOM_FAMILIES}
    if mnemonic in fams:
        fam = fams[mnemonic]
        atom = next(iter(fam.table())) if mnemonic != "atom.universal_fma" else None
        t = f"!{fam.type_name}<{fam.body_of(atom) if atom is not None else 'f32'}>"
        bad = f"!{fam.type_name}<no.such.atom>"
        with pytest.raises(driver.IRError, match="invalid"):
            driver.parse(f"func.func @f(%a: {bad}) {{\n  func.return\n}}\n")
    else:  # an unparametrized type (the TMA atoms)
        assert f"cute_nvgpu.{mnemonic}" in {t.name for t in TY.CUTE_NVGPU_TYPES}, mnemonic
        t = f"!cute_nvgpu.{mnemonic}"
    text = f"func.func @f(%a: {t}) {{\n  func.return\n}}\n"
    assert driver.print_module(driver.parse(text)) == text


@pytest.mark.parametrize(("body", "want"), [
    ("(8,64):(64,1)", Layout((8, 64), (64, 1))),
    ("(a,b,c,d,e,f),...", LayoutType(("a", "b", "c", "d", "e", "f"))),
    ("...", LayoutType()),
    ("(n,m):(1,sn)", LayoutType(("n", "m"), (1, "sn"))),
    ("(8,64):(1@1,1@0)", LayoutType((8, 64), (E(1), E(0)))),
    ("(8,64):(2@1,1@0)", LayoutType((8, 64), (E(1, 2), E(0)))),
    ("Sw<3,4,3> o 0 o (8,64):(64,1)", ComposedLayout("Sw<3,4,3> o 0 o (8,64):(64,1)")),
])
def test_layout_bodies(body: str, want: object) -> None:
    got = parse_layout_body(body)
    assert got == want
    assert layout_text(got) == body  # the text the partition verifier prints


@pytest.mark.parametrize(("body", "msg"), [
    ("(8,64):(64)", "not congruent"),
    ("(8,64", "expected ')'"),
    ("(8,64):(64,1) x", "unexpected 'x'"),
    ("(1@0,8):(1,1)", "a scaled basis is a stride"),
    ("(8,64):(1@x,1)", "needs an integer mode"),
    ("(8,$):(1,1)", "unexpected character '$'"),
])
def test_layout_body_errors(body: str, msg: str) -> None:
    with pytest.raises(IRSyntaxError, match=re.escape(msg)):
        parse_layout_body(body)


def test_an_operation_without_operands_does_not_take_the_next_line_s_result() -> None:
    # xDSL's operand parser does not stop at a line end: before the fix, sync_threads took
    # %c as its operand ("SSA value used before assignment")
    text = ("func.func @f() {\n  cute_nvgpu.arch.sync_threads\n"
            "  %c = arith.constant 0 : i32\n  cute_nvgpu.arch.sync_threads\n"
            "  func.return\n}\n")
    mod = driver.parse(text)
    assert driver.print_module(mod) == text
