"""The ``nvatom`` command.

Sub-commands:
  targets   the SM target roster: tier, minimum PTX ISA version, assembler, features
  layout    evaluate the CuTe layout algebra from the shell
  ptxas     assemble a PTX file for a target and print its resource use
  check     what this machine has: ptxas versions, GPU, optional packages
  atoms     the legal register MMA atoms (filter by target and element types)
  frag      an atom's (thread, value) fragment: CuTe layout, lane table, SVG picture
  emit      an atom's PTX instruction, inline-asm template or complete test kernel
  banks     shared-memory bank conflicts of an access pattern over a smem layout
  desc      encode/decode a WGMMA smem descriptor or a TMA tensor map (desc tma)
  gemm      build, assemble, run and time the GEMM kernel for one problem
  demo      the main job (``make demo``): tiers, mma.sync kernel, SM90 GEMM from atoms (+ GPU run)

Errors print one line (``nvatom: error: ...``) and exit with status 2.  Every number that
work or memory grows with is checked against a stated limit first (docs/reliability.md).  A
bug prints one line ``nvatom: internal error (please report; ...)`` and exits with status 70
(``NVATOM_TRACEBACK=1`` shows the traceback).
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn

from nvatom import __version__, cli_sm120
from nvatom.errors import NvatomError

# --------------------------------------------------------------------------- input helpers

#: the most shared memory one SM has (228 KiB on sm_90 and sm_100; CUDA C++ Programming
#: Guide, "Technical Specifications per Compute Capability"): a bigger smem layout is no
#: shared-memory layout, and `banks` walks every element of it
SMEM_BYTES_LIMIT = 228 * 1024
#: CuTe's integers are int64_t (as in the layout notation)
_INT64_MAX = 2**63 - 1
#: longest error line printed (messages that quote a huge input are cut here)
_MESSAGE_LIMIT = 1000
#: longest text of a number option (a 64-bit value in binary with its prefix is 66)
_NUMBER_TEXT_LIMIT = 80


def clip(text: str, limit: int = 60) -> str:
    """``text`` quoted for an error message, shortened when long."""
    if len(text) <= limit:
        return f"'{text}'"
    return f"'{text[:limit - 20]}...' ({len(text)} characters)"


def parse_int(option: str, text: str, lo: int, hi: int, example: str = "") -> int:
    """The integer an option's text spells (``0x``/``0b``/``0o`` prefixes and ``_`` allowed),
    checked to lie in ``[lo, hi]``; otherwise a one-line :class:`NvatomError` naming both."""
    t = text.strip().replace("_", "")
    value: int | None = None
    if len(t) <= _NUMBER_TEXT_LIMIT:
        try:
            value = int(t, 0)
        except ValueError:
            value = None
    if value is None:
        eg = f" (e.g. {example})" if example else ""
        what = f"{option} takes" if option else "expected"
        raise NvatomError(f"{what} an integer from {lo} to {hi}{eg}, got {clip(text)}")
    if not lo <= value <= hi:
        raise NvatomError(f"{option + ' ' if option else ''}{text.strip()} is out of range: "
                          f"the limit is {lo} to {hi}")
    return value


def bounded_int(lo: int, hi: int):  # type: ignore[no-untyped-def]
    """An argparse ``type=`` that accepts the integers ``lo..hi`` (see :func:`parse_int`);
    argparse names the option in its message."""

    def convert(text: str) -> int:
        try:
            return parse_int("", text, lo, hi)
        except NvatomError as e:
            raise argparse.ArgumentTypeError(str(e)) from None

    convert.__name__ = "integer"
    return convert


def write_output(path: str, data: str | bytes) -> None:
    """Write an output file (``-o``, ``--svg``); any failure is one line naming the path."""
    if not path:
        raise NvatomError("an empty output file name")
    p = Path(path)
    if p.is_dir():
        raise NvatomError(f"cannot write '{path}': it is a directory")
    try:
        if isinstance(data, bytes):
            p.write_bytes(data)
        else:
            p.write_text(data, encoding="utf-8")
    except (OSError, ValueError) as e:
        raise NvatomError(f"cannot write '{path}': {getattr(e, 'strerror', None) or e}") \
            from None


def read_text_file(path: str, what: str = "") -> str:
    """A UTF-8 input file's text; unreadable or non-UTF-8 input is one line naming the path."""
    if not path:
        raise NvatomError("an empty input file name")
    try:
        data = Path(path).read_bytes()
    except OSError as e:
        raise NvatomError(f"cannot read '{path}': {e.strerror or e}") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise NvatomError(f"cannot read '{path}': not UTF-8 text{what} (byte "
                          f"{data[e.start]:#04x} at offset {e.start})") from None


# --------------------------------------------------------------------------- targets


def _cmd_targets(args: argparse.Namespace) -> int:
    from nvatom.arch import FEATURES, TARGETS

    rows = list(TARGETS.values())
    if args.json:
        print(json.dumps([
            {"name": t.name, "tier": t.tier.label, "min_ptx": t.min_ptx_str,
             "ptxas": t.ptxas, "features": t.features()}
            for t in rows
        ], indent=2))
        return 0
    if args.features:
        names = [f.name for f in FEATURES]
        width = max(len(n) for n in names)
        print(f"{'feature':<{width}}  rule (from ptxas)".rstrip())
        for f in FEATURES:
            print(f"{f.name:<{width}}  {f.rule:<32} {f.description}")
        print()
        print(f"{'target':<8} " + " ".join(f"{i:>2}" for i in range(len(names))))
        for t in rows:
            marks = " ".join(f"{'x' if f.available_on(t) else '.':>2}" for f in FEATURES)
            print(f"{t.name:<8} {marks}")
        print("columns: " + ", ".join(f"{i}={n}" for i, n in enumerate(names)))
        return 0
    print(f"{'target':<8} {'tier':<12} {'min PTX':<8} {'ptxas':<6} features")
    for t in rows:
        feats = t.features()
        print(f"{t.name:<8} {t.tier.label:<12} {t.min_ptx_str:<8} {t.ptxas:<6} "
              f"{', '.join(feats) if feats else '-'}")
    return 0


# --------------------------------------------------------------------------- layout


class _OpAction(argparse.Action):
    """Collect layout operations in command-line order."""

    def __call__(self, parser, namespace, values, option_string=None):  # type: ignore[override]
        ops = list(getattr(namespace, "ops", None) or [])
        ops.append((self.dest, values))
        namespace.ops = ops


_LAYOUT_OPS = {
    "compose": ("LAYOUT", "compose with a layout on the right: L o B"),
    "complement": ("N", "complement with respect to cotarget N"),
    "logical_divide": ("TILER", "logical_divide by a layout"),
    "zipped_divide": ("TILER", "zipped_divide by a layout"),
    "logical_product": ("LAYOUT", "logical_product with a layout"),
    "blocked_product": ("LAYOUT", "blocked_product with a layout"),
    "raked_product": ("LAYOUT", "raked_product with a layout"),
    "upcast": ("N", "re-express in units of N elements"),
    "downcast": ("N", "re-express in units of 1/N element"),
}
_LAYOUT_FLAGS = {
    "coalesce": "coalesce",
    "filter": "remove stride-0 and size-1 modes",
    "right_inverse": "right inverse",
    "left_inverse": "left inverse",
}


def _apply_layout_op(layout, op: str, arg: str | None):  # type: ignore[no-untyped-def]
    import nvatom.layout as L

    if op in ("complement", "upcast", "downcast"):
        n = parse_int(f"--{op}", arg, 1, _INT64_MAX)  # type: ignore[arg-type]
        return getattr(L, op)(layout, n)
    if op in _LAYOUT_OPS:
        other = L.parse_layout(arg)  # type: ignore[arg-type]
        fn = L.composition if op == "compose" else getattr(L, op)
        return fn(layout, other)
    return getattr(L, op)(layout)


def _note_inexact(a, b, result) -> None:  # type: ignore[no-untyped-def]
    """CuTe pads a mode whose stride does not divide it: say so when the result is not A o B."""
    import nvatom.layout as L

    n = L.size(b)
    for i in range(min(n, 4096)):
        if result(i) != a(b(i)):
            print(f"note: CuTe pads non-dividing strides, so this is not A(B(i)): "
                  f"A(B({i})) = {a(b(i))} but the result gives {result(i)}")
            return


def _cmd_layout(args: argparse.Namespace) -> int:
    import nvatom.layout as L

    layout = L.parse_layout(args.layout)
    print(f"layout        {layout}")
    for op, arg in getattr(args, "ops", None) or []:
        before = layout
        layout = _apply_layout_op(layout, op, arg)
        label = op if not isinstance(arg, str) else f"{op} {arg}"
        print(f"{label:<13} {layout}")
        if op == "compose":
            _note_inexact(before, L.parse_layout(arg), layout)
    print(f"size={L.size(layout)} cosize={L.cosize(layout)}")
    if args.eval is not None:
        n = L.size(layout)
        for i in args.eval:
            if not 0 <= i < n:
                raise NvatomError(f"--eval {i}: index out of range for a layout of size {n}")
            print(f"L({i}) = {layout(i)}")
    if args.table:
        n = L.size(layout)
        if n > 4096:
            raise NvatomError(f"--table: layout of size {n} is too large to print (limit 4096)")
        print("index -> offset:")
        print(" ".join(f"{i}:{layout(i)}" for i in range(n)))
    return 0


# --------------------------------------------------------------------------- ptxas


def _cmd_ptxas(args: argparse.Namespace) -> int:
    from nvatom.arch import target
    from nvatom.runtime.ptxas import assemble

    t = target(args.target)
    path = Path(args.file)
    text = read_text_file(args.file, " (PTX is ASCII)")
    result = assemble(text, t, args=args.ptxas_args or ())
    print(f"ptxas {result.ptxas_version}: {path} assembled for {t.name} "
          f"({len(result.cubin)} byte cubin{', cached' if result.cached else ''})")
    for d in result.diagnostics:
        print(f"  {d}")
    for kr in result.kernels.values():
        print(f"  {kr.name}: {kr.summary()}")
    if args.output:
        write_output(args.output, result.cubin)
        print(f"wrote {args.output}")
    return 0


# --------------------------------------------------------------------------- check


def _gpu_info() -> list[str]:
    smi = shutil.which("nvidia-smi")
    if not smi:
        return []
    try:
        out = subprocess.run(
            [smi, "--query-gpu=name,driver_version,compute_cap", "--format=csv,noheader"],
            capture_output=True, text=True, timeout=30, check=False,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    return [line.strip() for line in out.splitlines() if line.strip()]


def _cmd_check(args: argparse.Namespace) -> int:
    from nvatom.arch import TARGETS
    from nvatom.runtime.ptxas import cache_dir, discover

    print(f"nvatom {__version__} on Python {sys.version.split()[0]}")
    tools = discover()
    if not tools:
        print("ptxas: none found (install the CUDA toolkit or 'pip install nvatom[ptxas]')")
    for tool in tools:
        print(f"ptxas {tool.build:<10} {tool.source:<28} {tool.path}")
    covered = {n for n in TARGETS if any(t.accepts(n) for t in tools)}
    missing = [n for n in TARGETS if n not in covered]
    print(f"targets assemblable: {len(covered)}/{len(TARGETS)}"
          + (f" (missing: {', '.join(missing)})" if missing else ""))
    print(f"ptxas cache: {cache_dir() or 'disabled'}")
    gpus = _gpu_info()
    print("GPU: " + ("; ".join(gpus) if gpus else "none"))
    for mod in ("numpy", "torch", "cupy", "cuda.core", "cuda.bindings", "xdsl", "pycute",
                "ml_dtypes", "hypothesis", "pytest"):
        try:
            m = importlib.import_module(mod)
            ver = getattr(m, "__version__", "") or "installed"
        except Exception:
            ver = "-"
        print(f"  {mod:<14} {ver}")
    return 0


# --------------------------------------------------------------------------- atoms


def _tmem_copy_atoms(target_: str | None) -> list:
    """The TMEM copy atoms (``tcgen05.ld/st/cp``) for ``nvatom atoms --copy``: each tcgen05.ld /
    st shape at ``.x1`` (with and without ``.pack::16b``; ``.xN`` up to 128 registers), each
    tcgen05.cp shape per CTA group and decompression; none where the target lacks tcgen05."""
    from nvatom.atoms.registry import atom_record
    from nvatom.atoms.tmem import CP_DECOMPRESS, CP_SHAPES, LDST_SHAPES, S2tCopyAtom, TmemCopyAtom

    atoms: list = [TmemCopyAtom(d, shape, 1, pack, 0 if shape == "16x32bx2" else None)
                   for d in ("load", "store") for shape in LDST_SHAPES for pack in (False, True)]
    atoms += [S2tCopyAtom(shape, cta, dz) for shape in CP_SHAPES for cta in (1, 2)
              for dz in (None, *CP_DECOMPRESS)]
    return [a for a in atoms
            if target_ is None or (atom_record(a.mnemonic).allowed_on(target_)
                                   and a.available_on(target_))]


def _cmd_copy_atoms(args: argparse.Namespace) -> int:
    from nvatom.arch import feature
    from nvatom.atoms.copy import copy_atoms
    from nvatom.atoms.registry import atom_record

    rows = []  # (name, ptx opcode, tier label, min PTX, target rule)
    for a in copy_atoms(args.target):
        rows.append((a.name, getattr(a, "opcode", None), a.tier.label if a.tier else "all",
                     a.min_ptx, feature(a.feature).rule if a.feature else "all"))
    for a in _tmem_copy_atoms(args.target):
        rec = atom_record(a.mnemonic)
        f = feature(rec.feature or "")
        rows.append((a.name, a.opcode, rec.min_tier.label if rec.min_tier else "all",
                     f.min_ptx, f.rule))
    if args.json:
        print(json.dumps([{"name": n, "ptx": op, "tier": tier, "min_ptx": f"{v[0]}.{v[1]}"}
                          for n, op, tier, v, _ in rows], indent=2))
        return 0
    width = max(len(r[0]) for r in rows)
    print(f"{'atom':<{width}}  {'PTX':<5} targets")
    for n, _, _, v, rule in rows:
        print(f"{n:<{width}}  {v[0]}.{v[1]:<3} {rule}")
    print(f"{len(rows)} copy atoms")
    return 0


def _cmd_wgmma_atoms(args: argparse.Namespace) -> int:
    from nvatom.atoms.sm90 import FORMS
    from nvatom.dtypes import dtype

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


def _cmd_atoms(args: argparse.Namespace) -> int:
    from nvatom.arch import TARGETS, Tier, feature
    from nvatom.atoms.registry import ATOMS, mma_forms

    if args.umma:  # SM100 UMMA atoms: src/nvatom/cli_sm100.py
        return importlib.import_module("nvatom.cli_sm100").cmd_atoms(args)
    if args.copy:
        return _cmd_copy_atoms(args)
    if args.wgmma:
        return _cmd_wgmma_atoms(args)
    if args.sm120:
        return cli_sm120.cmd_atoms(args)
    forms = mma_forms(args.target, a=args.a, b=args.b, acc=args.acc)
    if args.json:
        print(json.dumps([
            {"name": f.name, "ptx": f.opcode, "tier": f.tier.label,
             "min_ptx": f"{f.min_ptx[0]}.{f.min_ptx[1]}",
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
        ptx = f"{f.min_ptx[0]}.{f.min_ptx[1]}"
        print(f"{f.name:<{width}}  {ptx:<5} {feature(f.feature).rule:<20} {regs}")
    print(f"{len(forms)} atoms; families: " + ", ".join(
        f"{m}{'' if r.dialect_mnemonic else ' (intrinsic path)'}"
        for m, r in ATOMS.items() if m.startswith("sm") and r.min_tier != Tier.SM120)
        + "; SM120.mma_bs, sm120.mma, sm120.sparse_mma: nvatom atoms --sm120")
    return 0


def _cmd_copy_frag(args: argparse.Namespace) -> int:
    from nvatom.atoms.copy import copy_atom

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


def _show_fragment(grid: list, args: argparse.Namespace, title: str) -> int:
    """The lane table (unless --no-table) and the --svg picture of a fragment grid."""
    from nvatom.atoms.frag_view import fragment_svg, fragment_table

    if not args.no_table:
        print(fragment_table(grid))
    if args.svg:
        write_output(args.svg, fragment_svg(grid, title))
        print(f"wrote {args.svg}")
    return 0


def _cmd_wgmma_frag(args: argparse.Namespace) -> int:
    from nvatom.atoms.frag_view import fragment_grid
    from nvatom.atoms.sm90 import wgmma_form
    from nvatom.atoms.wgmma_fragments import WARPGROUP, wgmma_tv_layout

    form = wgmma_form(args.atom)
    op = args.operand.upper()
    tv = wgmma_tv_layout(form, op)
    dims = (form.m, form.k) if op == "A" else (form.m, form.n)
    print(f"{form.name} operand {op}: {form.registers(op)} {form.register_type(op)} registers "
          f"per thread of the {WARPGROUP}-thread warpgroup")
    print(f"(thread, value) -> element layout: {tv}")
    grid = fragment_grid(tv, op, dims, WARPGROUP)
    return _show_fragment(grid, args, f"{form.name}  operand {op}  (T<thread>:V<value>)")


def _family_command(atom: str, verb: str):  # type: ignore[no-untyped-def]
    """The ``frag``/``emit`` handler of the atom family an atom name belongs to, or None for
    the register MMA forms handled here.  Order matters: sm100 names include TMEM copy atoms
    spelled ``atom.*``."""
    sm100 = importlib.import_module("nvatom.cli_sm100")
    if sm100.handles(atom):
        return getattr(sm100, f"cmd_{verb}")
    if atom.startswith("atom."):
        return {"frag": _cmd_copy_frag, "emit": _cmd_copy_emit}[verb]
    if atom.startswith("sm90."):
        return {"frag": _cmd_wgmma_frag, "emit": _cmd_wgmma_emit}[verb]
    if cli_sm120.handles(atom):
        return getattr(cli_sm120, f"cmd_{verb}")
    return None


def _cmd_frag(args: argparse.Namespace) -> int:
    from nvatom.atoms.frag_view import fragment_grid
    from nvatom.atoms.registry import mma_form

    family = _family_command(args.atom, "frag")
    if family is not None:
        return family(args)
    form = mma_form(args.atom)
    op = args.operand.upper()
    tv = form.tv_layout(op)
    dims = {"A": (form.m, form.k // 2 if form.is_sparse else form.k), "B": (form.k, form.n),
            "C": (form.m, form.n), "D": (form.m, form.n)}[op]
    threads = 32
    print(f"{form.name} operand {op}: {form.operand_type(op).name}, "
          f"{form.values(op)} values in {form.registers(op)} "
          f"{form.register_type(op)} registers per lane")
    print(f"(thread, value) -> element layout: {tv}")
    grid = fragment_grid(tv, op, dims, threads)
    return _show_fragment(grid, args, f"{form.name}  operand {op}  (T<lane>:V<value>)")


def _require_available(atom: object, t: object) -> None:
    from nvatom.arch import feature

    if not atom.available_on(t):  # type: ignore[attr-defined]
        f = feature(atom.feature)  # type: ignore[attr-defined]
        raise NvatomError(f"{atom.name} is not available on {t.name} "  # type: ignore[attr-defined]
                          f"(needs {f.description}: {f.rule})")


def _print_kernel(text: str, args: argparse.Namespace, t: object) -> None:
    """--kernel output: the PTX to stdout or -o FILE, and with --assemble ptxas's resources."""
    if args.output:
        write_output(args.output, text)
        print(f"wrote {args.output}")
    else:
        print(text, end="")
    if args.assemble:
        from nvatom.runtime.ptxas import assemble

        res = assemble(text, t)
        for kr in res.kernels.values():
            print(f"// ptxas {res.ptxas_version} {res.target}: {kr.name}: {kr.summary()}")


def _cmd_copy_emit(args: argparse.Namespace) -> int:
    from nvatom.arch import target
    from nvatom.atoms.copy import copy_atom
    from nvatom.ptx import copy_emit

    atom = copy_atom(args.atom)
    t = target(args.target)
    _require_available(atom, t)
    if args.kernel:
        module, _ = copy_emit.build_copy_test_module([atom], t)
        _print_kernel(module.emit(), args, t)
        return 0
    asm = copy_emit.inline_asm(atom)
    v = atom.ptx_version_for(t)
    print(f"// {atom.name} on {t.name}: PTX .version {v[0]}.{v[1]} or newer")
    print(f"// constraints: {asm.constraints}")
    print(asm.template)
    return 0


def _cmd_wgmma_emit(args: argparse.Namespace) -> int:
    from nvatom.arch import target
    from nvatom.atoms.sm90 import wgmma_form
    from nvatom.ptx import wgmma_emit

    form = wgmma_form(args.atom)
    t = target(args.target)
    _require_available(form, t)
    if args.asm_template:
        asm = wgmma_emit.inline_asm(form)
        print(f"// {form.name}: {asm.outputs} read-write accumulators, {asm.inputs} inputs")
        print(f"// constraints: {asm.constraints}")
        print(asm.template)
        return 0
    if args.kernel:
        _print_kernel(wgmma_emit.build_wgmma_test_module(form, "SW128", 1, t).emit(), args, t)
        return 0
    imm = ", ".join("1" if i.startswith("scale") else "0" for i in form.immediates)
    a = "{%r0, %r1, %r2, %r3}" if form.a_source == "rs" else "%rd0"
    print(f"// {form.name} on {t.name}, between wgmma.fence and wgmma.commit_group")
    print(f"{form.opcode} {{...{form.registers('D')} accumulators...}}, {a}, %rd1, %p0"
          + (f", {imm};" if imm else ";"))
    return 0


def _cmd_emit(args: argparse.Namespace) -> int:
    from nvatom.arch import target
    from nvatom.atoms.registry import mma_form
    from nvatom.ptx import mma_emit
    from nvatom.ptx.builder import Kernel

    family = _family_command(args.atom, "emit")
    if family is not None:
        return family(args)
    form = mma_form(args.atom)
    t = target(args.target)
    _require_available(form, t)
    if args.asm_template:
        asm = mma_emit.inline_asm(form)
        names = [f"d[{i}]" for i in range(form.registers("D"))]
        for op in "ABC":
            names += [f"{op.lower()}[{i}]" for i in range(form.registers(op))]
        if form.is_sparse:
            sel = args.selector if args.selector is not None else form.selectors[0]
            names += ["e", str(sel)]
        bound = [f'"{c}"({n})' for c, n in zip(asm.constraint_list, names, strict=True)]
        print(f"// {form.name}: {asm.outputs} outputs, {asm.inputs} inputs")
        print(f"// constraints: {asm.constraints}")
        print(f'asm volatile("{asm.template}"')
        print(f"    : {', '.join(bound[:asm.outputs])}")
        print(f"    : {', '.join(bound[asm.outputs:])});")
        return 0
    if args.kernel:
        _print_kernel(mma_emit.build_mma_test_module(form, t, selector=args.selector).emit(),
                      args, t)
        return 0
    k = Kernel("snippet")
    regs = mma_emit.alloc_mma_registers(k, form)
    mma_emit.emit_mma(k, form, regs.d, regs.a, regs.b, regs.c, e=regs.e,
                      selector=args.selector if form.is_sparse else None)
    v = form.ptx_version_for(t)
    print(f"// {form.name} on {t.name}: PTX .version {v[0]}.{v[1]} or newer")
    print(k.emit().splitlines()[-3].strip())
    return 0


def _cmd_banks(args: argparse.Namespace) -> int:
    from nvatom import layout as L
    from nvatom.atoms.smem import banks_report

    # banks walks every element: bound the layout by what shared memory can hold first
    # (every access's default element width is at least 8 bits)
    n = L.size(L.parse_layout(args.smem))
    bits = args.element_bits if args.element_bits is not None else 8
    if n * bits > 8 * SMEM_BYTES_LIMIT:
        raise NvatomError(
            f"--smem {clip(args.smem)} has {n} elements, at least {n * bits // 8} bytes: more "
            f"than shared memory holds (the limit is {SMEM_BYTES_LIMIT} bytes = 228 KiB)")
    print(banks_report(args.atom, args.smem, element_bits=args.element_bits, base=args.base,
                       max_detailed=args.detail))
    return 0


def _cmd_desc(args: argparse.Namespace) -> int:
    from nvatom import layout as L
    from nvatom.descriptors import wgmma

    if args.kind == "tma":  # TMA tensor maps: src/nvatom/cli_tma.py
        return importlib.import_module("nvatom.cli_tma").cmd_tma(args)
    # numbers are checked here, before the descriptor codecs see them
    if args.action == "decode" and args.value is not None:
        parse_int(f"desc {args.kind} decode", args.value, 0, 2**64 - 1, "0x4000004000011000")
    start = parse_int("--start", args.start, 0, 2**32 - 1, "0x400")  # a shared-memory address
    if args.kind in ("umma", "idesc"):  # SM100 descriptors: src/nvatom/cli_sm100.py
        return importlib.import_module("nvatom.cli_sm100").cmd_desc(args)
    if args.action == "decode":
        if args.value is None:
            raise NvatomError("desc wgmma decode needs the 64-bit word, e.g. 0x4000004000011000")
        word = int(args.value.strip().replace("_", ""), 0)
        fields = wgmma.decode_fields(word)
        print(f"0x{word:016x} raw fields: " + " ".join(f"{k}={v:#x}" for k, v in fields.items()))
        desc = wgmma.decode(word)  # raises on reserved bits, after the raw fields are shown
        print(desc.explain())
        return 0
    if args.layout is None:
        raise NvatomError("desc wgmma encode needs --layout '<smem layout>'")
    layout = L.parse_layout(args.layout)
    desc = wgmma.make_gmma_desc(layout, args.element_bits, args.major,
                                start_address=start)
    print(f"0x{desc.encode():016x}  {desc.explain()}")
    return 0


# --------------------------------------------------------------------------- demo


def _cmd_demo(args: argparse.Namespace) -> int:
    from nvatom.demo import run_demo  # tiers, mma.sync demo, SM90 GEMM (+ GPU run): issue 7

    if not args.out:  # Path("") is the current directory
        raise NvatomError("--out needs a directory name, got ''")
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise NvatomError(f"--out '{args.out}' exists and is not a directory")
    try:
        return run_demo(args.targets, args.out, show_ptx=args.show_ptx)
    except OSError as e:
        where = e.filename if e.filename is not None else args.out
        raise NvatomError(f"cannot write '{where}': {e.strerror or e}") from None


# --------------------------------------------------------------------------- main


class _Parser(argparse.ArgumentParser):
    """argparse, but usage errors are one line like every other nvatom error."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"nvatom: error: {message} (see '{self.prog} --help')\n")


def _parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="nvatom",
        description="nvatom: an open atom layer for NVIDIA tensor cores.",
    )
    p.add_argument("--version", action="version", version=f"nvatom {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True

    t = sub.add_parser("targets", help="list SM targets with tier, minimum PTX version, features")
    t.add_argument("--features", action="store_true", help="show the feature rules and matrix")
    t.add_argument("--json", action="store_true", help="machine-readable output")
    t.set_defaults(func=_cmd_targets)

    lay = sub.add_parser(
        "layout",
        help="evaluate the CuTe layout algebra",
        description="Parse a layout in CuTe notation, e.g. '((4,8),(2,2,2)):((32,1),(16,8,128))', "
        "apply operations in the order given, and print each result.",
    )
    lay.add_argument("layout", help="a layout in CuTe notation")
    for name, (metavar, helptext) in _LAYOUT_OPS.items():
        lay.add_argument(f"--{name.replace('_', '-')}", dest=name, metavar=metavar,
                         action=_OpAction, help=helptext)
    for name, helptext in _LAYOUT_FLAGS.items():
        lay.add_argument(f"--{name.replace('_', '-')}", dest=name, nargs=0, action=_OpAction,
                         help=helptext)
    lay.add_argument("--eval", type=bounded_int(0, _INT64_MAX), nargs="+",
                     metavar="I", help="evaluate L(I)")
    lay.add_argument("--table", action="store_true", help="print index -> offset for every index")
    lay.set_defaults(func=_cmd_layout)

    px = sub.add_parser("ptxas", help="assemble a PTX file with ptxas and report resources")
    px.add_argument("file", help="PTX file")
    px.add_argument("--target", "-t", required=True, help="e.g. sm_90a")
    px.add_argument("-o", "--output", help="write the cubin here")
    px.add_argument("--ptxas-arg", dest="ptxas_args", action="append", metavar="ARG",
                    help="extra ptxas option (repeatable)")
    px.set_defaults(func=_cmd_ptxas)

    c = sub.add_parser("check", help="show ptxas versions, GPU and optional packages")
    c.set_defaults(func=_cmd_check)

    at = sub.add_parser("atoms", help="list the legal register MMA atoms")
    at.add_argument("--target", "-t", help="only atoms available on this target")
    at.add_argument("--a", help="element type of A")
    at.add_argument("--b", help="element type of B")
    at.add_argument("--acc", help="element type of the accumulator C")
    at.add_argument("--copy", action="store_true",
                    help="list the copy atoms (universal copy, ldmatrix, stmatrix, cp.async, "
                    "TMEM tcgen05.ld/st/cp)")
    at.add_argument("--wgmma", action="store_true", help="list the SM90 WGMMA atoms (sm90.mma)")
    at.add_argument("--json", action="store_true", help="machine-readable output")
    cli_sm120.add_options(at)
    importlib.import_module("nvatom.cli_sm100").add_atoms_options(at)
    at.set_defaults(func=_cmd_atoms)

    fr = sub.add_parser("frag", help="show an atom's (thread, value) fragment layout")
    fr.add_argument("atom", help="atom name, e.g. sm80.mma.m16n8k16.f32.bf16.bf16.f32 or "
                    "'atom.ldsm<m8n8.x4>'")
    fr.add_argument("--operand", "-o", default="A", type=str.upper,
                    choices=["A", "B", "C", "D", "SFA", "SFB"],
                    help="operand; SFA/SFB: scale factors of SM120.mma_bs atoms")
    fr.add_argument("--svg", metavar="FILE", help="draw the fragment like the PTX ISA figures")
    fr.add_argument("--no-table", action="store_true", help="omit the lane table")
    fr.set_defaults(func=_cmd_frag)

    em = sub.add_parser("emit", help="emit an atom's PTX: instruction, inline asm, test kernel")
    em.add_argument("atom", help="atom name, e.g. sm89.mma.m16n8k32.f32.e4m3.e5m2.f32 or "
                    "'atom.simt_async_copy<16>'")
    em.add_argument("--target", "-t", required=True, help="e.g. sm_90a")
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

    bk = sub.add_parser(
        "banks", help="shared-memory bank conflicts of an access over a smem layout",
        description="Which bank each lane touches, per phase, and the replays each instruction "
        "costs. ATOM: ldsm.x1|x2|x4[.trans], stsm.x1|x2|x4[.trans], lds.32|64|128, "
        "sts.32|64|128 (docs/shared-memory.md).")
    bk.add_argument("atom", help="access, e.g. ldsm.x4")
    bk.add_argument("--smem", required=True, metavar="LAYOUT",
                    help="smem layout in CuTe notation, e.g. 'Sw<3,3,3> o 0 o (16,64):(64,1)'")
    bk.add_argument("--element-bits", type=bounded_int(1, 128),
                    help="element width (default: 16 for ldsm/stsm)")
    bk.add_argument("--base", type=bounded_int(0, SMEM_BYTES_LIMIT - 1), default=0,
                    help="byte address of element 0")
    bk.add_argument("--detail", type=bounded_int(0, _INT64_MAX), default=8,
                    help="instructions printed in full")
    bk.set_defaults(func=_cmd_banks)

    de = sub.add_parser("desc", help="encode/decode tensor-core descriptors")
    de.add_argument("kind", choices=["wgmma", "tma", "umma", "idesc"],
                    help="wgmma: SM90 smem descriptor; tma: a TMA tensor map (CUtensorMap); "
                    "umma: SM100 smem descriptor; idesc: tcgen05 instruction descriptor")
    de.add_argument("action", choices=["encode", "decode"], nargs="?", default="encode")
    de.add_argument("value", nargs="?", help="decode: the 64-bit word, e.g. 0x4000004000011000")
    de.add_argument("--layout", help="encode: smem layout, e.g. "
                    "'Sw<3,3,3> o 0 o ((8,8),(64,1)):((64,512),(1,0))' (in elements)")
    de.add_argument("--element-bits", type=bounded_int(1, 128), default=16,
                    help="element width (default 16)")
    de.add_argument("--major", choices=["K", "MN"], default="K")
    de.add_argument("--start", default="0", help="shared-memory byte address of the tile")
    importlib.import_module("nvatom.cli_tma").add_arguments(de)
    importlib.import_module("nvatom.cli_sm100").add_desc_arguments(de)
    de.set_defaults(func=_cmd_desc)

    d = sub.add_parser("demo", help="the main job: tiers, mma.sync kernel, the SM90 GEMM from "
                       "atoms through ptxas, and on a GPU a checked, timed 4096^3 GEMM")
    d.add_argument("--targets", nargs="+", default=["sm_80", "sm_90a"], metavar="TARGET")
    d.add_argument("--out", default="build/demo", help="where to write PTX and cubins")
    d.add_argument("--show-ptx", action="store_true", help="print the PTX too")
    d.set_defaults(func=_cmd_demo)

    from nvatom.cli_gemm import add_parser as _add_gemm  # nvatom gemm (issue 7)
    _add_gemm(sub)
    from nvatom.cli_ir import add_parser as _add_ir  # nvatom verify/compile (issue 8)
    _add_ir(sub)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    try:
        rc = int(args.func(args) or 0)
        sys.stdout.flush()  # a full disk or closed pipe on stdout fails here, not at exit
        return rc
    except NvatomError as err:
        msg = str(err).splitlines()[0] if str(err) else type(err).__name__
        if len(msg) > _MESSAGE_LIMIT:  # a message that quotes a huge input whole
            msg = f"{msg[:_MESSAGE_LIMIT]}... ({len(msg)} characters)"
        print(f"nvatom: error: {msg}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # output piped into `head` and closed early
        sys.stdout = open(os.devnull, "w")  # silence the flush at exit
        return 0
    except OSError as e:  # the environment (a file, a permission, a full disk): one line too
        where = f"'{e.filename}': " if e.filename is not None else ""
        print(f"nvatom: error: {where}{e.strerror or e}", file=sys.stderr)
        return 2
    except Exception as e:  # a bug in nvatom: one line, unless NVATOM_TRACEBACK=1 asks
        if os.environ.get("NVATOM_TRACEBACK") == "1":
            raise
        text = str(e).splitlines()[0][:300] if str(e) else ""
        print(f"nvatom: internal error (please report; NVATOM_TRACEBACK=1 shows where): "
              f"{type(e).__name__}: {text}", file=sys.stderr)
        return 70


if __name__ == "__main__":
    sys.exit(main())
