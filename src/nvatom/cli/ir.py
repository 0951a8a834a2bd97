"""``nvatom verify`` and ``nvatom compile``: the cute_nvgpu textual IR from the command line.

    nvatom verify FILE.mlir [--target sm_90a] [--split-input-file] [--verify-diagnostics]
    nvatom compile FILE.mlir --target sm_90a -o out.ptx [--no-ptxas] [--print-ir]
                   [--emit ptx|llvm] [--path TIER=PATH ...]

``verify`` parses and verifies; diagnostics print MLIR-style (``FILE:LINE:COL: error: 'op' op
message``) on stderr, and the exit status is 1 when there are any.  With
``--verify-diagnostics`` it checks the file's ``// expected-error {{...}}`` annotations
instead (each ``// -----`` split on its own) and exits 1 on a mismatch.  ``compile`` also
lowers every ``func.func`` to a PTX kernel, writes it (``-o -``: stdout) and, unless
``--no-ptxas``, assembles it with ptxas for the target.  ``--emit llvm`` writes LLVM IR
instead (:mod:`nvatom.ptx.llvm_emit`: NVVM intrinsics where LLVM has them, inline asm
elsewhere; the MMA instructions on their tier's emission path, ``--path`` selecting another),
checked, unless ``--no-ptxas``, by LLVM's NVPTX backend (llvmlite) and ptxas on its PTX.  Bad
input never shows a traceback.
"""

from __future__ import annotations

import argparse
import sys
from types import ModuleType

from nvatom.cli.common import add_target, read_text_file, write_output
from nvatom.errors import NvatomError
from nvatom.ptx import llvm_emit
from nvatom.ptx.llvm_emit import TIER_PATHS, EmissionPath
from nvatom.runtime.environment import missing_piece
from nvatom.runtime.ptxas import assemble

__all__ = ["add_parser"]


def _print_diags(diags: list) -> None:
    for d in diags:
        print(d, file=sys.stderr)


def _ir(command: str) -> tuple[ModuleType, ModuleType, ModuleType]:
    """The IR's checker, driver and lowering, which need xDSL (an optional dependency):
    without it, one line with the install hint ``nvatom check`` gives, not a traceback."""
    try:
        from nvatom.ir import checker, driver, lower
    except ImportError as e:
        if not (e.name or "").startswith("xdsl"):
            raise
        raise NvatomError(missing_piece("xdsl", f"nvatom {command}")) from None
    return checker, driver, lower


def _cmd_verify(args: argparse.Namespace) -> int:
    checker, driver, _ = _ir("verify")
    text = read_text_file(args.file)
    if args.verify_diagnostics:
        results = checker.check_text(text, args.file)
        bad = [p for r in results for p in r.problems]
        for p in bad:
            print(p, file=sys.stderr)
        n = len(results)
        print(f"{args.file}: {n - sum(1 for r in results if not r.ok)}/{n} case(s) as expected")
        return 1 if bad else 0
    cases = checker.split_cases(text) if args.split_input_file else [checker.Case(1, text)]
    status = 0
    for case in cases:
        try:
            mod = driver.parse(case.text, args.file)
            driver.verify(mod, args.target)
        except driver.IRError as e:
            _print_diags(e.diagnostics)
            status = 1
    if status == 0:
        print(f"{args.file}: verified ({len(cases)} case(s))")
    return status


def _cmd_compile(args: argparse.Namespace) -> int:
    _, driver, lower = _ir("compile")
    text = read_text_file(args.file)
    try:
        mod = driver.parse(text, args.file)
        ctx = driver.verify(mod, args.target)
        out = lower.lower(mod, ctx)
    except driver.IRError as e:
        _print_diags(e.diagnostics)
        return 1
    if args.print_ir:
        print(driver.print_module(mod), end="", file=sys.stderr)
    text, ptx = out.ptx, out.ptx
    notes: list[str] = []
    if args.path and args.emit != "llvm":
        print("nvatom: error: --path selects emission paths for --emit llvm", file=sys.stderr)
        return 2
    if args.emit == "llvm":
        llmod = llvm_emit.ptx_to_llvm(out.ptx, llvm_emit.parse_paths(args.path or []))
        text = llmod.text
        notes.append(f"// MMA instructions on the {llmod.path.value} path "
                     f"({llmod.target.tier.name}); NVVM intrinsics: "
                     f"{', '.join(llmod.intrinsics) or 'none'}")
        if not args.no_ptxas:
            if not llvm_emit.llvm_available():
                notes.append("llvmlite is not installed (pip install 'nvatom[llvm]'): the LLVM "
                             "IR is not checked")
                args.no_ptxas = True
            else:
                ptx = llvm_emit.compile_llvm([llmod])[0]
    if args.output == "-":
        sys.stdout.write(text)
    else:
        write_output(args.output, text)
    if not args.no_ptxas:
        res = assemble(ptx, out.target)
        dyn = {k.name: k.dynamic_shared for k in out.kernels}
        for name, r in res.kernels.items():
            extra = f" + {dyn[name]} B dynamic (launch with it)" if dyn.get(name) else ""
            print(f"{name}: {r.registers} registers, {r.shared_bytes} B shared{extra}, "
                  f"{r.spill_stores} spill stores ({out.target}, ptxas {res.ptxas_version})",
                  file=sys.stderr)
    for note in notes:  # informational, so printed last: a failure's stderr stays one line
        print(note, file=sys.stderr)
    return 0


def _path_table() -> str:
    return ", ".join(f"{t.name}={p.value}" for t, p in TIER_PATHS.items())


def _path_names() -> str:
    return ", ".join(p.value for p in EmissionPath)


def add_parser(sub: argparse._SubParsersAction) -> None:
    v = sub.add_parser("verify", help="parse and verify a cute_nvgpu .mlir file")
    v.add_argument("file", help="the .mlir file")
    add_target(v, "SM target (default: the module's nvatom.target, else sm_90a)", default=None)
    v.add_argument("--split-input-file", action="store_true",
                   help="verify each '// -----' section on its own")
    v.add_argument("--verify-diagnostics", action="store_true",
                   help="check the file's '// expected-error {{...}}' annotations")
    v.set_defaults(func=_cmd_verify)

    c = sub.add_parser("compile", help="lower a cute_nvgpu .mlir file to PTX")
    c.add_argument("file", help="the .mlir file")
    add_target(c, "SM target (default: the module's nvatom.target, else sm_90a)", default=None)
    c.add_argument("-o", "--output", default="-", help="output file, PTX or LLVM IR ('-': stdout)")
    c.add_argument("--no-ptxas", action="store_true", help="do not assemble the PTX")
    c.add_argument("--print-ir", action="store_true", help="print the parsed IR to stderr")
    c.add_argument("--emit", choices=("ptx", "llvm"), default="ptx",
                   help="ptx (default) or llvm: LLVM IR for the NVPTX backend, NVVM intrinsics "
                   "where LLVM has them (special registers, bar.sync, m8n8 ldmatrix/stmatrix, "
                   "mma.sync on the NVVM path) and inline asm elsewhere; checked by llvmlite "
                   "and ptxas unless --no-ptxas")
    c.add_argument("--path", action="append", metavar="TIER=PATH",
                   help="the emission path of a tier's MMA instructions with --emit llvm "
                   f"(default: {_path_table()}; paths: {_path_names()})")
    c.set_defaults(func=_cmd_compile)
