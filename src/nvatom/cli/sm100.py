"""``nvatom`` subcommand parts for SM100 tcgen05 (docs/sm100.md).

* ``nvatom atoms --umma [--target T] [--kind K] [--a A --b B --acc D] [--forms] [--json]``:
  the UMMA atoms grouped by (mnemonic, kind, CTA group, A source, types) with their M/N
  lattice and targets; ``--forms`` lists the tcgen05.mma instruction forms instead;
* ``nvatom frag sm100.mma...``: operand tiles, TMEM footprint and idesc of an atom;
  ``nvatom frag 'atom.tmem_load<32x32b.x4>'``: its (thread, value) -> (lane, column) table;
* ``nvatom emit sm100.mma... --target T [--kernel [--assemble]]``: the instruction (or a
  complete GEMM kernel for f16/bf16 atoms of M = 128); also for TMEM atoms;
* ``nvatom desc umma encode --layout L --element-bits B --major K|MN [--start S]`` /
  ``nvatom desc umma decode WORD``: the SM100 shared-memory descriptor;
* ``nvatom desc idesc encode --atom NAME [--negate-a] [--negate-b] [--saturate]`` /
  ``nvatom desc idesc decode WORD --mma-kind K``: the instruction descriptor.
"""

from __future__ import annotations

import argparse
import itertools
import json
from collections import defaultdict

from nvatom import layout as L
from nvatom.arch import TARGETS
from nvatom.atoms import sm100
from nvatom.atoms.sm100 import DATAPATH_LAYOUTS, sf_datapath, tmem_copies, umma_atom
from nvatom.atoms.smem import umma_canonical_text
from nvatom.atoms.tmem import S2tCopyAtom, tmem_atom
from nvatom.cli.common import atom_on_target, parse_int, print_kernel, ver
from nvatom.descriptors import umma
from nvatom.errors import NvatomError

__all__ = ["DESC_KINDS", "add_atoms_options", "add_desc_arguments", "cmd_atoms", "cmd_desc",
           "cmd_emit", "cmd_frag", "cmd_tmem_emit", "cmd_tmem_frag"]

DESC_KINDS = ("umma", "idesc")


def add_atoms_options(at: argparse.ArgumentParser) -> None:
    at.add_argument("--umma", action="store_true",
                    help="list the SM100 UMMA atoms (sm100.mma, _sp, _bs, _bs_sp)")
    at.add_argument("--kind", help="with --umma: tcgen05 kind (f16, tf32, f8f6f4, i8, mxf8f6f4, "
                    "mxf4, mxf4nvf4)")
    at.add_argument("--forms", action="store_true",
                    help="with --umma: list the tcgen05.mma instruction forms instead")


def add_desc_arguments(de: argparse.ArgumentParser) -> None:
    g = de.add_argument_group("umma / idesc (SM100 tcgen05)")
    g.add_argument("--atom", help="idesc encode: a UMMA atom name")
    g.add_argument("--mma-kind", help="idesc decode: the tcgen05 kind of the instruction")
    g.add_argument("--negate-a", action="store_true", help="idesc encode: negate A")
    g.add_argument("--negate-b", action="store_true", help="idesc encode: negate B")
    g.add_argument("--saturate", action="store_true", help="idesc encode: saturate (i8)")


def _targets(available: object) -> str:
    names = [t for t in TARGETS if available(t)]  # type: ignore[operator]
    return ",".join(names) or "-"


def _ranges(values: list[int]) -> str:
    vs = sorted(set(values))
    if len(vs) <= 3:
        return ",".join(map(str, vs))
    steps = {b - a for a, b in itertools.pairwise(vs)}
    if len(steps) == 1:
        return f"{vs[0]}..{vs[-1]}/{steps.pop()}"
    return ",".join(map(str, vs))


def cmd_atoms(args: argparse.Namespace) -> int:
    if args.forms:
        forms = [f for f in sm100.FORMS if (not args.kind or f.kind == args.kind)
                 and (not args.target or f.available_on(args.target))]
        if not forms:
            raise NvatomError("no tcgen05.mma form matches the filters")
        if args.json:
            print(json.dumps([{"name": f.name, "ptx": f.opcode, "operands": f.operands,
                               "min_ptx": ver(f.min_ptx), "features": f.features,
                               "targets": _targets(f.available_on).split(",")}
                              for f in forms], indent=2))
            return 0
        for f in forms:
            print(f"{f.name:<90} {ver(f.min_ptx)}  {_targets(f.available_on)}")
        print(f"{len(forms)} forms")
        return 0
    groups: dict[tuple, list] = defaultdict(list)
    for a in sm100.umma_atoms(args.target, kind=args.kind, a=args.a, b=args.b, d=args.acc):
        key = (a.mnemonic, a.kind, a.cta_group, a.a_source, a.ws, a.d.name, a.a.name, a.b.name,
               a.sf.name if a.sf else "", a.vec_size or 0, a.k)
        groups[key].append(a)
    if not groups:
        raise NvatomError("no UMMA atom matches the filters")
    rows = []
    for key, atoms in groups.items():
        mn, kind, cta, src, ws, d, ta, tb, sf, vs, k = key
        rows.append({"mnemonic": mn, "kind": kind, "cta_group": cta, "a_source": src,
                     "ws": ws, "types": f"{d}.{ta}.{tb}" + (f".{sf}.vs{vs}" if sf else ""),
                     "k": k, "m": sorted({x.m for x in atoms}),
                     "n": _ranges([x.n for x in atoms]),
                     "opcode": atoms[0].form().opcode,
                     "targets": _targets(atoms[0].available_on), "count": len(atoms)})
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    for r in rows:
        ws = ".ws" if r["ws"] else ""
        print(f"{r['mnemonic']:<16} {r['kind']:<9} cta{r['cta_group']} {r['a_source']}{ws:<3} "
              f"{r['types']:<28} M {','.join(map(str, r['m'])):<11} N {r['n']:<12} "
              f"K {r['k']:<4} {r['targets']}")
    print(f"{sum(r['count'] for r in rows)} atoms in {len(rows)} groups; name one as "
          "sm100.mma[_sp|_bs|_bs_sp].<kind>.cta<1|2>.m<M>n<N>k<K>.<ss|ts>[.ws].<d>.<a>.<b>"
          "[.<sf>.vs<V>]")
    return 0


def cmd_tmem_frag(args: argparse.Namespace) -> int:
    """``frag`` of a TMEM copy atom: its (thread, value) -> (lane, column) table."""

    atom = tmem_atom(args.atom)
    if isinstance(atom, S2tCopyAtom):
        print(f"{atom.name}: {atom.opcode} [taddr], s-desc")
        print(f"shared memory -> TMEM: {atom.rows} rows x {atom.columns} columns "
              f"({atom.smem_bytes} bytes); asynchronous, completes through tcgen05.commit")
        return 0
    print(f"{atom.name}: {atom.opcode}")
    print(f"{atom.registers} registers per thread; lanes {atom.lanes}, columns {atom.columns} "
          f"from the warp's base address; {atom.element_bits}-bit values")
    print(f"(thread, value) -> lane * 2^16 + column: {atom.tv_layout()}")
    nv = atom.registers * (2 if atom.pack16 else 1)
    show = min(nv, 8)
    print("thread " + " ".join(f"{'v' + str(v):>9}" for v in range(show)))
    for t in range(32):
        cells = [f"({ln},{c})" for ln, c in (atom.coords(t, v) for v in range(show))]
        print(f"{t:>6} " + " ".join(f"{x:>9}" for x in cells))
    if nv > show:
        print(f"... {nv - show} more values per thread")
    return 0


def _frag_smem(a: object, op: str) -> None:
    """A or B in shared memory: the ISA's canonical form of each legal swizzle mode, with T, m
    and k, and the compact tile (nvatom.atoms.smem.UMMA_SMEM_CANONICAL)."""

    major = a.a_major if op == "A" else a.b_major  # type: ignore[attr-defined]
    bits = a.element_bits(op)  # type: ignore[attr-defined]
    rows, k = a.smem_rows(op), a.stored_k(op)  # type: ignore[attr-defined]
    per = " per CTA" if a.cta_group == 2 else ""  # type: ignore[attr-defined]
    print(f"{op} in shared memory: {major}-major, {bits}-bit elements, {rows} x {k}{per}; "
          f"canonical layouts (PTX ISA, elements, T = {128 // bits}):")
    for sw in a.smem_swizzles(op):  # type: ignore[attr-defined]
        lay = a.smem_layout(op, sw)  # type: ignore[attr-defined]
        print(f"  {sw.name:<10} {umma_canonical_text(major, sw)}")
        print(f"  {'':<10} compact: {lay}")


def _frag_tmem(a: object, op: str) -> None:
    lay = a.tmem_layout(op)  # type: ignore[attr-defined]
    rows, cols = a.tmem_tile(op)  # type: ignore[attr-defined]
    what = {"D": "(row, column n)", "A": "(row, k)"}.get(op, "(row, scale factor j)")
    print(f"{op} in TMEM, {rows} x {cols} per CTA, {what} -> lane << 16 | column: {lay}")
    if op == "A":
        bits = a.element_bits("A")  # type: ignore[attr-defined]
        copies = tmem_copies(a.m, a.n, a.cta_group, a.sparse, a.ws)  # type: ignore[attr-defined]
        print(f"  {32 // bits} elements of K per 32-bit column, low first"
              + (f"; each row also at lanes + {', '.join(str(c >> 16) for c in copies[1:])}"
                 if len(copies) > 1 else ""))
    if op in ("SFA", "SFB"):
        dp = sf_datapath(op, a.m, a.cta_group, a.sparse)  # type: ignore[attr-defined]
        print(f"  {dp} data path: the {cols} scale factor(s) of a row share one word (bytes "
              "sf_id ..), copied to every 32-lane partition"
              + (" of its half" if dp == "2x2" else ""))
    cells = [(r, c) for r in (0, 1, rows // 2, rows - 1) for c in (0, cols - 1)]
    print("  " + "  ".join(f"({r},{c})->lane {int(lay((r, c))) >> 16} col "
                           f"{int(lay((r, c))) & 0xFFFF}" for r, c in dict.fromkeys(cells)))


def cmd_frag(args: argparse.Namespace) -> int:
    a = umma_atom(args.atom)
    print(f"{a.name}: {a.form().opcode}")
    for op in ("A", "B", "D") + (("SFA", "SFB") if a.block_scaled else ()):
        rows, cols = a.operand_shape(op)
        where = {"A": "shared memory (descriptor)" if a.a_source == "ss" else "TMEM",
                 "B": "shared memory (descriptor)", "D": "TMEM"}.get(op, "TMEM")
        print(f"  {op:<3} {rows} x {cols} in {where}")
    lid = a.datapath
    print(f"data path: layout {lid} (PTX ISA 9.7.16.10.5; D / A address lane "
          f"{' or '.join(map(str, DATAPATH_LAYOUTS[lid][1]))})")
    if a.a_source == "ss":
        _frag_smem(a, "A")
    _frag_smem(a, "B")
    for op in ("D",) + (("A",) if a.a_source == "ts" else ()) + \
            (("SFA", "SFB") if a.block_scaled else ()):
        _frag_tmem(a, op)
    d = a.idesc()
    print(f"idesc {d}")
    return 0


def cmd_tmem_emit(args: argparse.Namespace) -> int:
    """``emit`` of a TMEM copy atom: its instruction."""

    atom, _ = atom_on_target(args, tmem_atom,
                             lambda a, t: f"{a.name} is not available on {t.name} (needs tcgen05)")
    if isinstance(atom, S2tCopyAtom):
        print(atom.instruction("%r_taddr", "%rd_sdesc"))
    else:
        print(atom.instruction([f"%r{i}" for i in range(atom.registers)], "%r_taddr"))
    return 0


def cmd_emit(args: argparse.Namespace) -> int:
    a, t = atom_on_target(args, umma_atom,
                          lambda a, t: f"atom '{a.name}' is not available on {t.name}")
    if args.kernel:
        from nvatom.kernels.gemm_sm100 import build_gemm_sm100_module, gemm_sm100_plan

        if a.kind != "f16" or a.m != 128 or a.cta_group != 1 or a.sparse or a.ws or \
                a.a_source != "ss" or a.d.name != "f32" or a.n not in (16, 32, 64, 128):
            raise NvatomError(f"--kernel builds the SM100 GEMM: an f16/bf16 -> f32 cta1 ss atom "
                              f"of M = 128, N in 16/32/64/128, not {a.name}")
        print_kernel(build_gemm_sm100_module(gemm_sm100_plan(a.n, a.a.name), 2, t.name).emit(),
                     args, t)
        return 0
    f = a.issued_form(t)
    ops = {"d": "%r_d", "a": "%rd_a" if a.a_source == "ss" else "%r_a", "b": "%rd_b",
           "meta": "%r_meta", "idesc": "%r_idesc", "sfa": "%r_sfa", "sfb": "%r_sfb",
           "enable_input_d": "%p_acc"}
    print(f.instruction(**{k: v for k, v in ops.items() if k in f.operands}))
    print(f"// idesc {a.idesc()}; PTX {ver(f.ptx_version_for(t))} on {t.name}")
    return 0


def cmd_desc(args: argparse.Namespace) -> int:
    if args.kind == "umma":
        if args.action == "decode":
            word = _int(args.value, "0x4000404000011000")
            print(umma.decode_smem_desc(word))
            return 0
        if not args.layout:
            raise NvatomError("desc umma encode needs --layout")
        lay = L.parse_layout(args.layout)
        d = umma.make_umma_desc(lay, args.element_bits, args.major, _int(args.start, "0x400"))
        print(d)
        return 0
    if args.action == "decode":
        if not args.mma_kind:
            raise NvatomError("desc idesc decode needs --mma-kind (the kind is an instruction "
                              "qualifier, not an idesc field)")
        print(umma.decode_idesc(_int(args.value, "0x08400010"), args.mma_kind))
        return 0
    if not args.atom:
        raise NvatomError("desc idesc encode needs --atom (a UMMA atom name)")

    fields = {"a_negate": args.negate_a, "b_negate": args.negate_b}
    if args.saturate:
        fields["saturate"] = True
    print(umma_atom(args.atom).idesc(**fields))
    return 0


def _int(text: str | None, example: str) -> int:
    if text is None:
        raise NvatomError(f"a value is needed (e.g. {example})")
    return parse_int("", text, 0, 2**64 - 1, example)
