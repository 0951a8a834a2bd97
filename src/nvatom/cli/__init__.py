"""The ``nvatom`` command (the package's modules: :mod:`~nvatom.cli.common` the input helpers
and the one printer of fragments and kernels; :mod:`~nvatom.cli.tools` targets, layout, ptxas,
check, banks, desc, demo; :mod:`~nvatom.cli.atoms` atoms, frag, emit for every family of the
atom registry, with :mod:`~nvatom.cli.sm100` and :mod:`~nvatom.cli.sm120`;
:mod:`~nvatom.cli.tma` desc tma; :mod:`~nvatom.cli.gemm` gemm; :mod:`~nvatom.cli.ir` verify
and compile).

Sub-commands:
  targets   the SM target roster: tier, minimum PTX ISA version, assembler, features
  layout    evaluate the CuTe layout algebra from the shell
  ptxas     assemble a PTX file for a target and print its resource use
  check     what this machine has: ptxas versions, GPU, optional packages
  atoms     the legal atoms of a family (filter by target and element types; --family all)
  frag      an atom's (thread, value) fragment: CuTe layout, lane table, SVG picture
  emit      an atom's PTX instruction, inline-asm template or complete test kernel
  banks     shared-memory bank conflicts of an access pattern over a smem layout
  desc      encode/decode a WGMMA smem descriptor or a TMA tensor map (desc tma)
  gemm      build, assemble, run and time the GEMM kernel for one problem
  demo      the main job (``make demo``): tiers, mma.sync kernel, SM90 GEMM from atoms (+ GPU run)

``import nvatom.cli`` loads no GEMM, kernel, demo or launcher module: ``gemm``, ``demo`` and
``emit --kernel`` of a UMMA atom import theirs when they run (tests/test_cli_parser.py).
Short options mean one thing in every sub-command (``-t`` --target, ``-o`` --output, ``-p``
--operand), storage order is ``K`` or ``MN`` everywhere, and every argument has help.

Errors print one line (``nvatom: error: ...``) and exit with status 2.  Every number that
work or memory grows with is checked against a stated limit first (docs/reliability.md).  A
bug prints one line ``nvatom: internal error (please report; ...)`` and exits with status 70
(``NVATOM_TRACEBACK=1`` shows the traceback).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import NoReturn

from nvatom import __version__
from nvatom.atoms.smem import SMEM_BYTES_LIMIT
from nvatom.cli import atoms, gemm, ir, tools
from nvatom.cli.common import MESSAGE_LIMIT
from nvatom.errors import NvatomError

__all__ = ["SMEM_BYTES_LIMIT", "main"]


class _Parser(argparse.ArgumentParser):
    """argparse, but usage errors are one line like every other nvatom error."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"nvatom: error: {message} (see '{self.prog} --help')\n")


#: Every sub-command, in the order ``nvatom --help`` lists them: each adds its parser and
#: sets ``func``, the one function ``main`` calls.
SUBCOMMANDS = (
    tools.add_targets, tools.add_layout, tools.add_ptxas, tools.add_check,
    atoms.add_atoms, atoms.add_frag, atoms.add_emit,
    tools.add_banks, tools.add_desc, tools.add_demo,
    gemm.add_parser, ir.add_parser,
)


def _parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="nvatom",
        description="nvatom: an open atom layer for NVIDIA tensor cores.",
    )
    p.add_argument("--version", action="version", version=f"nvatom {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True
    for add in SUBCOMMANDS:
        add(sub)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args, extra = parser.parse_known_args(argv)  # parse_args, with a hint for an old option
    if extra:
        moved = " (frag's operand is -p/--operand; -o is --output in every command)" \
            if args.command == "frag" and "-o" in extra else ""
        parser.error(f"unrecognized arguments: {' '.join(extra)}{moved}")
    try:
        rc = int(args.func(args) or 0)
        sys.stdout.flush()  # a full disk or closed pipe on stdout fails here, not at exit
        return rc
    except NvatomError as err:
        msg = str(err).splitlines()[0] if str(err) else type(err).__name__
        if len(msg) > MESSAGE_LIMIT:  # a message that quotes a huge input whole
            msg = f"{msg[:MESSAGE_LIMIT]}... ({len(msg)} characters)"
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

