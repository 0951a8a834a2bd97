"""``nvatom atoms``, ``frag`` and ``emit``: every atom family of the registry.

The families are :data:`nvatom.atoms.registry.FAMILIES`.  Each has one entry in
:data:`COMMANDS`, keyed by the family's name: the function that lists its atoms, the one
that prints an atom's fragment (``frag``) and the one that emits its PTX (``emit``).  The
register MMA, WGMMA, copy, universal-FMA and TMA printers are here; the SM100 (UMMA, TMEM) and
SM120 ones in :mod:`nvatom.cli.sm100` and :mod:`nvatom.cli.sm120`.  ``frag`` and ``emit`` find
the family of an atom name with :func:`nvatom.atoms.registry.family_of_name` (a name no
family claims goes to the register MMA resolver, whose error names the nearest atoms);
tests/atoms/test_registry.py checks that every family has its three commands.

    nvatom atoms [--family NAME|all] [--target T] [--a A --b B --acc C] [--json]

lists one family (default: the register MMA atoms; ``--copy``, ``--wgmma``, ``--umma``,
``--sm120`` are the older spellings of ``--family``); ``--family all`` lists every family,
with its atom kinds and how many of its atoms the target has.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from typing import Any, NamedTuple

from nvatom.arch import TARGETS, Tier, feature
from nvatom.atoms.copy import copy_atom, copy_atoms
from nvatom.atoms.frag_view import fragment_grid
from nvatom.atoms.registry import (
    ATOMS,
    FAMILIES,
    atom_record,
    family,
    family_of_name,
    mma_form,
    mma_forms,
)
from nvatom.atoms.sm90 import FORMS, wgmma_form
from nvatom.atoms.tmem import CP_DECOMPRESS, CP_SHAPES, LDST_SHAPES, S2tCopyAtom, TmemCopyAtom
from nvatom.atoms.wgmma_fragments import WARPGROUP
from nvatom.cli import sm100, sm120
from nvatom.cli.common import (
    add_target,
    atom_on_target,
    bounded_int,
    emit_warp_mma,
    print_kernel,
    show_fragment,
    show_warp_fragment,
    ver,
)
from nvatom.dtypes import dtype
from nvatom.errors import NvatomError
from nvatom.ptx import copy_emit, mma_emit, wgmma_emit

__all__ = ["COMMANDS", "FamilyCommands", "add_atoms", "add_emit", "add_frag"]

Command = Callable[[argparse.Namespace], int]


# --------------------------------------------------------------------------- atoms


def _tmem_copy_atoms(target_: str | None) -> list:
    """The TMEM copy atoms (``tcgen05.ld/st/cp``) as ``nvatom atoms --copy`` lists them: each
    tcgen05.ld / st shape at ``.x1`` (with and without ``.pack::16b``; ``.xN`` up to 128
    registers), each tcgen05.cp shape per CTA group and decompression; none where the target
    lacks tcgen05."""

    atoms: list = [TmemCopyAtom(d, shape, 1, pack, 0 if shape == "16x32bx2" else None)
                   for d in ("load", "store") for shape in LDST_SHAPES for pack in (False, True)]
    atoms += [S2tCopyAtom(shape, cta, dz) for shape in CP_SHAPES for cta in (1, 2)
              for dz in (None, *CP_DECOMPRESS)]
    return [a for a in atoms
            if target_ is None or (atom_record(a.mnemonic).allowed_on(target_)
                                   and a.available_on(target_))]


def _copy_rows(args: argparse.Namespace, copies: bool, tmem: bool) -> int:
    rows = []  # (name, ptx opcode, tier label, min PTX, target rule)
    for a in copy_atoms(args.target) if copies else ():
        rows.append((a.name, getattr(a, "opcode", None), a.tier.label if a.tier else "all",
                     a.min_ptx, feature(a.feature).rule if a.feature else "all"))
    for a in _tmem_copy_atoms(args.target) if tmem else ():
        rec = atom_record(a.mnemonic)
        f = feature(rec.feature or "")
        rows.append((a.name, a.opcode, rec.min_tier.label if rec.min_tier else "all",
                     f.min_ptx, f.rule))
    if not rows:
        raise NvatomError(f"no {'copy' if copies else 'TMEM copy'} atom on {args.target}")
    if args.json:
        print(json.dumps([{"name": n, "ptx": op, "tier": tier, "min_ptx": ver(v)}
                          for n, op, tier, v, _ in rows], indent=2))
        return 0
    width = max(len(r[0]) for r in rows)
    print(f"{'atom':<{width}}  {'PTX':<5} targets")
    for n, _, _, v, rule in rows:
        print(f"{n:<{width}}  {v[0]}.{v[1]:<3} {rule}")
    print(f"{len(rows)} copy atoms")
    return 0


def _copy_and_tmem_atoms(args: argparse.Namespace) -> int:
    return _copy_rows(args, copies=True, tmem=True)


def _copy_atoms(args: argparse.Namespace) -> int:
    return _copy_rows(args, copies=True, tmem=False)


def _tmem_atoms(args: argparse.Namespace) -> int:
    return _copy_rows(args, copies=False, tmem=True)


def _wgmma_atoms(args: argparse.Namespace) -> int:
    def keep(f) -> bool:  # type: ignore[no-untyped-def]
        if args.target and not f.available_on(args.target):
            return False
        return all(getattr(f, op) == dtype(v) for op, v in (("a", args.a), ("b", args.b),
                                                              ("d", args.acc)) if v)

    forms = [f for f in FORMS if keep(f)]
    if not forms:
        raise NvatomError("no WGMMA atom matches the filters")
    if args.json:
        print(json.dumps([{"name": f.name, "ptx": f.opcode, "immediates": list(f.immediates),
                           "registers": {"D": f.registers("D"), "A": f.registers("A")}}
                          for f in forms], indent=2))
        return 0
    width = max(len(f.name) for f in forms)
    print(f"{'atom':<{width}}  regs D/A  immediates")
    for f in forms:
        print(f"{f.name:<{width}}  {f.registers('D'):>3}/{f.registers('A'):<3}  "
              f"{','.join(f.immediates) or '-'}")
    print(f"{len(forms)} WGMMA atoms (sm_90a)")
    return 0


def _register_atoms(args: argparse.Namespace) -> int:
    forms = mma_forms(args.target, a=args.a, b=args.b, acc=args.acc)
    if args.json:
        print(json.dumps([
            {"name": f.name, "ptx": f.opcode, "tier": f.tier.label, "min_ptx": ver(f.min_ptx),
             "targets": [t for t in TARGETS if f.available_on(t)],
             "registers": {op: f.registers(op) for op in "ABCD"}}
            for f in forms
        ], indent=2))
        return 0
    if not forms:
        raise NvatomError("no register MMA atom matches "
                          + " ".join(f"--{k} {v}" for k, v in vars(args).items()
                                     if k in ("target", "a", "b", "acc") and v))
    width = max(len(f.name) for f in forms)
    print(f"{'atom':<{width}}  {'PTX':<5} {'targets':<20} regs A/B/C/D")
    for f in forms:
        regs = "/".join(str(f.registers(op)) for op in "ABCD")
        print(f"{f.name:<{width}}  {ver(f.min_ptx):<5} {feature(f.feature).rule:<20} {regs}")
    print(f"{len(forms)} atoms; families: " + ", ".join(
        f"{m}{'' if r.dialect_mnemonic else ' (intrinsic path)'}"
        for m, r in ATOMS.items() if m.startswith("sm") and r.min_tier != Tier.SM120)
        + "; SM120.mma_bs, sm120.mma, sm120.sparse_mma: nvatom atoms --sm120")
    return 0


def _universal_atoms(args: argparse.Namespace) -> int:
    atoms = family("universal_fma").atoms(args.target)
    if args.json:
        print(json.dumps([{"name": a.name, "element_type": a.element_type.name}
                          for a in atoms], indent=2))
        return 0
    for a in atoms:
        print(a.name)
    print(f"{len(atoms)} atoms: one scalar D = A * B + C per thread, every target")
    return 0


def _tma_atoms(args: argparse.Namespace) -> int:
    fam = family("tma")
    recs = [r for r in fam.records if args.target is None or r.allowed_on(args.target)]
    if not recs:
        raise NvatomError(f"no TMA atom on {args.target} (TMA needs sm_90 or newer)")
    if args.json:
        print(json.dumps([{"mnemonic": r.mnemonic, "tier": r.min_tier.label if r.min_tier
                           else "all", "interfaces": list(r.interfaces),
                           "residency": r.residency} for r in recs], indent=2))
        return 0
    width = max(len(r.mnemonic) for r in recs)
    for r in recs:
        print(f"{r.mnemonic:<{width}}  {r.residency}")
    print(f"{len(recs)} TMA atom kinds; {fam.grammar}")
    return 0


def _all_families(args: argparse.Namespace) -> int:
    """``--family all``: every family, its atom kinds and how many atoms the target has."""

    rows = []
    for fam in FAMILIES:
        kinds = [r.mnemonic for r in fam.records
                 if args.target is None or r.allowed_on(args.target)]
        count = len(fam.atoms(args.target)) if fam.resolve is not None else len(kinds)
        rows.append({"family": fam.name, "kind": fam.kind, "mnemonics": kinds,
                     "atoms": count, "grammar": fam.grammar, "example": fam.example})
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    width = max(len(r["family"]) for r in rows)
    print(f"{'family':<{width}}  {'kind':<4} {'atoms':>6}  mnemonics")
    for r in rows:
        print(f"{r['family']:<{width}}  {r['kind']:<4} {r['atoms']:>6}  "
              f"{', '.join(r['mnemonics']) or '-'}")
    where = f" on {args.target}" if args.target else ""
    print(f"{len(rows)} families{where}; list one with nvatom atoms --family NAME")
    return 0


def _cmd_atoms(args: argparse.Namespace) -> int:
    name = args.family
    if name is None:  # the older flags, in the order they were tested; bare: every family
        type_filter = args.a or args.b or args.acc
        name = ("umma" if args.umma else "copy+tmem" if args.copy else "wgmma" if args.wgmma
                else "sm120" if args.sm120 else "register_mma" if type_filter else "all")
    if name == "all":
        return _all_families(args)
    if name != "copy+tmem":
        family(name)  # an unknown name is one line listing the families
    return COMMANDS[name].atoms(args)


# --------------------------------------------------------------------------- frag


def _copy_frag(args: argparse.Namespace) -> int:
    atom = copy_atom(args.atom)
    print(f"{atom.name}: {getattr(atom, 'opcode', '')}".rstrip(": "))
    for side in ("src", "dst"):
        fn = getattr(atom, f"{side}_layout", None)
        if fn is None:
            continue
        print(f"{side} (thread, bit) -> bit layout (CuTe's Copy_Traits units): {fn(1)}")
    rows = getattr(atom, "address_lanes", None)
    if rows:
        print(f"lanes supplying row addresses: {rows}")
    return 0


def _wgmma_frag(args: argparse.Namespace) -> int:
    fam = family("wgmma")
    form = fam.atom(args.atom)
    op = args.operand.upper()
    tv = fam.fragment(form, op)  # type: ignore[misc]
    dims = (form.m, form.k) if op == "A" else (form.m, form.n)
    print(f"{form.name} operand {op}: {form.registers(op)} {form.register_type(op)} registers "
          f"per thread of the {WARPGROUP}-thread warpgroup")
    print(f"(thread, value) -> element layout: {tv}")
    grid = fragment_grid(tv, op, dims, WARPGROUP)
    return show_fragment(grid, args, f"{form.name}  operand {op}  (T<thread>:V<value>)")


def register_frag(args: argparse.Namespace) -> int:
    """``frag`` of a register MMA form (also the unscaled ``sm120.mma`` forms)."""

    form = mma_form(args.atom)
    op = args.operand.upper()
    return show_warp_fragment(form, op, family("register_mma").fragment(form, op), args)  # type: ignore[misc]


def _universal_frag(args: argparse.Namespace) -> int:
    fam = family("universal_fma")
    atom = fam.atom(args.atom)
    op = args.operand.upper()
    if op not in fam.operands:
        raise NvatomError(f"{atom.name} has operands {', '.join(fam.operands)}, not {op}")
    print(f"{atom.name} operand {op}: one {atom.element_type.name} value per thread")
    print(f"(thread, value) -> element layout: {fam.fragment(atom, op)}")  # type: ignore[misc]
    return 0


def _sm120_frag(args: argparse.Namespace) -> int:
    """Block-scaled ``SM120.mma_bs`` atoms have their own printer (scale factors); the
    unscaled ``sm120.mma`` forms are register MMA forms."""
    return sm120.cmd_frag(args) if sm120.handles(args.atom) else register_frag(args)


def _cmd_frag(args: argparse.Namespace) -> int:
    return _family_commands(args.atom).frag(args)


# --------------------------------------------------------------------------- emit


def _copy_emit(args: argparse.Namespace) -> int:
    atom, t = atom_on_target(args, copy_atom)
    if args.kernel:
        module, _ = copy_emit.build_copy_test_module([atom], t)
        print_kernel(module.emit(), args, t)
        return 0
    asm = copy_emit.inline_asm(atom)
    print(f"// {atom.name} on {t.name}: PTX .version {ver(atom.ptx_version_for(t))} or newer")
    print(f"// constraints: {asm.constraints}")
    print(asm.template)
    return 0


def _wgmma_emit(args: argparse.Namespace) -> int:
    form, t = atom_on_target(args, wgmma_form)
    if args.asm_template:
        asm = wgmma_emit.inline_asm(form)
        print(f"// {form.name}: {asm.outputs} read-write accumulators, {asm.inputs} inputs")
        print(f"// constraints: {asm.constraints}")
        print(asm.template)
        return 0
    if args.kernel:
        print_kernel(wgmma_emit.build_wgmma_test_module(form, "SW128", 1, t).emit(), args, t)
        return 0
    imm = ", ".join("1" if i.startswith("scale") else "0" for i in form.immediates)
    a = "{%r0, %r1, %r2, %r3}" if form.a_source == "rs" else "%rd0"
    print(f"// {form.name} on {t.name}, between wgmma.fence and wgmma.commit_group")
    print(f"{form.opcode} {{...{form.registers('D')} accumulators...}}, {a}, %rd1, %p0"
          + (f", {imm};" if imm else ";"))
    return 0


def register_emit(args: argparse.Namespace) -> int:
    """``emit`` of a register MMA form (also the unscaled ``sm120.mma`` forms)."""

    form, t = atom_on_target(args, mma_form)

    def asm() -> tuple[Any, list[str]]:
        names = mma_emit.asm_operands(form)[2]
        if form.is_sparse and args.selector is not None:
            names[-1] = str(args.selector)
        return mma_emit.inline_asm(form), names

    def emit(k: Any) -> None:
        regs = mma_emit.alloc_mma_registers(k, form)
        mma_emit.emit_mma(k, form, regs.d, regs.a, regs.b, regs.c, e=regs.e,
                          selector=args.selector if form.is_sparse else None)

    return emit_warp_mma(
        args, form, t, asm=asm, emit=emit,
        module=lambda: mma_emit.build_mma_test_module(form, t, selector=args.selector))


def _sm120_emit(args: argparse.Namespace) -> int:
    return sm120.cmd_emit(args) if sm120.handles(args.atom) else register_emit(args)


def _universal_emit(args: argparse.Namespace) -> int:
    atom = family("universal_fma").atom(args.atom)
    raise NvatomError(f"{atom.name} has no PTX instruction of its own: it is one scalar "
                      f"D = A * B + C per thread, which the IR verifies and no emitter lowers")


def _unnamed(args: argparse.Namespace) -> int:
    raise NvatomError("TMA atoms are made from a tensor map, not named: see 'nvatom desc tma'")


def _cmd_emit(args: argparse.Namespace) -> int:
    return _family_commands(args.atom).emit(args)


# --------------------------------------------------------------------------- the table


class FamilyCommands(NamedTuple):
    """The three commands of one atom family."""

    atoms: Command
    frag: Command
    emit: Command


#: One entry per family of nvatom.atoms.registry.FAMILIES (and ``copy+tmem``, what
#: ``--copy`` lists).
COMMANDS: dict[str, FamilyCommands] = {
    "universal_fma": FamilyCommands(_universal_atoms, _universal_frag, _universal_emit),
    "register_mma": FamilyCommands(_register_atoms, register_frag, register_emit),
    "wgmma": FamilyCommands(_wgmma_atoms, _wgmma_frag, _wgmma_emit),
    "umma": FamilyCommands(sm100.cmd_atoms, sm100.cmd_frag, sm100.cmd_emit),
    "sm120": FamilyCommands(sm120.cmd_atoms, _sm120_frag, _sm120_emit),
    "copy": FamilyCommands(_copy_atoms, _copy_frag, _copy_emit),
    "tmem": FamilyCommands(_tmem_atoms, sm100.cmd_tmem_frag, sm100.cmd_tmem_emit),
    "tma": FamilyCommands(_tma_atoms, _unnamed, _unnamed),
    "copy+tmem": FamilyCommands(_copy_and_tmem_atoms, _copy_frag, _copy_emit),
}


def _family_commands(atom: str) -> FamilyCommands:
    """The commands of the family an atom name belongs to; a name no family claims goes to
    the register MMA resolver, whose error names the nearest atoms."""

    fam = family_of_name(atom)
    return COMMANDS[fam.name if fam is not None else "register_mma"]


# --------------------------------------------------------------------------- parsers


def add_atoms(sub: argparse._SubParsersAction) -> None:
    """nvatom atoms"""

    at = sub.add_parser("atoms", help="list the atom families of a target (--family: one "
                        "family's atoms)")
    at.add_argument("--family", choices=[f.name for f in FAMILIES] + ["all"],
                    help="list this atom family's atoms; 'all': every family with its atom "
                    "kinds and counts (the default; with --a/--b/--acc: register_mma)")
    add_target(at, "only atoms available on this target")
    at.add_argument("--a", help="element type of A")
    at.add_argument("--b", help="element type of B")
    at.add_argument("--acc", help="element type of the accumulator C")
    at.add_argument("--copy", action="store_true",
                    help="list the copy atoms (universal copy, ldmatrix, stmatrix, cp.async, "
                    "TMEM tcgen05.ld/st/cp)")
    at.add_argument("--wgmma", action="store_true", help="list the SM90 WGMMA atoms (sm90.mma)")
    at.add_argument("--json", action="store_true", help="machine-readable output")
    sm120.add_options(at)
    sm100.add_atoms_options(at)
    at.set_defaults(func=_cmd_atoms)


def add_frag(sub: argparse._SubParsersAction) -> None:
    """nvatom frag"""
    fr = sub.add_parser("frag", help="show an atom's (thread, value) fragment layout")
    fr.add_argument("atom", help="atom name, e.g. sm80.mma.m16n8k16.f32.bf16.bf16.f32 or "
                    "'atom.ldsm<m8n8.x4>'")
    fr.add_argument("-p", "--operand", default="A", type=str.upper,
                    choices=["A", "B", "C", "D", "SFA", "SFB"],
                    help="operand (default A); SFA/SFB: scale factors of SM120.mma_bs atoms")
    fr.add_argument("--svg", metavar="FILE", help="draw the fragment like the PTX ISA figures")
    fr.add_argument("--no-table", action="store_true", help="omit the lane table")
    fr.set_defaults(func=_cmd_frag)


def add_emit(sub: argparse._SubParsersAction) -> None:
    """nvatom emit"""
    em = sub.add_parser("emit", help="emit an atom's PTX: instruction, inline asm, test kernel")
    em.add_argument("atom", help="atom name, e.g. sm89.mma.m16n8k32.f32.e4m3.e5m2.f32 or "
                    "'atom.simt_async_copy<16>'")
    add_target(em, "e.g. sm_90a", required=True)
    mode = em.add_mutually_exclusive_group()
    mode.add_argument("--asm-template", action="store_true",
                      help="inline-asm template and constraint string")
    mode.add_argument("--kernel", action="store_true",
                      help="a complete one-warp test kernel (loads fragments, runs, stores D)")
    em.add_argument("--selector", type=bounded_int(0, 255),
                    help="sparsity selector (sparse atoms)")
    em.add_argument("--assemble", action="store_true", help="with --kernel: run ptxas on it")
    em.add_argument("-o", "--output", help="with --kernel: write the PTX here")
    em.set_defaults(func=_cmd_emit)

