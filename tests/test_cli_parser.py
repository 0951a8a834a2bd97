"""The ``nvatom`` parser as a whole: options a newcomer can guess (issue 28, section 4).

Checked on the argparse tree itself, so a new sub-command or option is covered the day it is
added: one meaning per short option in every sub-command, and help text on every argument.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest

from nvatom.cli import _parser

#: The short options nvatom gives and what each means, in every sub-command that has it.
SHORT_OPTIONS = {"-o": "--output", "-t": "--target", "-p": "--operand", "-h": "--help"}


def _subcommands() -> dict[str, argparse.ArgumentParser]:
    p = _parser()
    sub = next(a for a in p._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


def test_the_parser_has_every_subcommand() -> None:
    assert {"targets", "layout", "ptxas", "check", "atoms", "frag", "emit", "banks", "desc",
            "demo", "gemm", "verify", "compile"} <= set(_subcommands())


def test_one_long_name_per_short_option() -> None:
    """``-o`` is ``--output`` and ``-t`` is ``--target`` wherever they exist; no short option
    means two things in two sub-commands."""
    meanings: dict[str, set[str]] = defaultdict(set)
    where: dict[tuple[str, str], list[str]] = defaultdict(list)
    for name, parser in _subcommands().items():
        for action in parser._actions:
            shorts = [s for s in action.option_strings if not s.startswith("--")]
            longs = [s for s in action.option_strings if s.startswith("--")]
            for s in shorts:
                assert len(longs) == 1, f"nvatom {name} {s} has no single long name: {longs}"
                meanings[s].add(longs[0])
                where[(s, longs[0])].append(name)
    clashes = {s: {lg: where[(s, lg)] for lg in longs} for s, longs in meanings.items()
               if len(longs) > 1}
    assert not clashes, f"short options with two meanings: {clashes}"
    for s, longs in meanings.items():
        assert s in SHORT_OPTIONS, f"{s} ({longs}) is a new short option: add it to " \
            "SHORT_OPTIONS with its one meaning"
        assert longs == {SHORT_OPTIONS[s]}


def test_every_argument_has_help() -> None:
    """Every option and positional of every sub-command, and every sub-command in
    ``nvatom --help``, has a help text."""
    missing = [f"nvatom {name} {'/'.join(a.option_strings) or a.dest}"
               for name, parser in _subcommands().items() for a in parser._actions
               if not a.help or a.help == argparse.SUPPRESS]
    sub = next(a for a in _parser()._actions if isinstance(a, argparse._SubParsersAction))
    listed = {a.dest: a.help for a in sub._choices_actions}
    missing += [f"nvatom {name} (in nvatom --help)" for name in _subcommands()
                if not listed.get(name)]
    assert not missing, "arguments without help text:\n" + "\n".join(missing)


def test_every_storage_order_option_speaks_k_and_mn() -> None:
    """One vocabulary for storage order: every ``--*major`` option takes K or MN (K-major /
    MN-major, the specification's UMMA_K / UMMA_MN), whatever older spellings it accepts."""
    found = []
    for name, parser in _subcommands().items():
        for a in parser._actions:
            if any("major" in s for s in a.option_strings):
                found.append(f"{name} {a.option_strings[0]}")
                assert a.type is not None and a.type.__name__ == "major", found[-1]
                assert a.metavar == "K|MN", found[-1]
                assert a.type("K") == "K" and a.type("mn") == "MN", found[-1]
                assert "K-major" in a.help and "MN-major" in a.help, found[-1]
    assert sorted(found) == ["desc --major", "gemm --a-major", "gemm --b-major"]


def _gemm_kernel_line(capsys, *argv: str) -> str:
    from nvatom.cli import main

    assert main(["gemm", "--m", "256", "--n", "256", "--k", "256", "--target", "sm_80",
                 *argv]) == 0
    return next(line for line in capsys.readouterr().out.splitlines()
                if line.startswith("kernel"))


def test_gemm_storage_orders_and_their_older_spellings(capsys) -> None:
    """``--a-major MN`` is the old ``M``, ``--b-major MN`` the old ``N`` (still accepted)."""
    assert "_aM_bN_" in _gemm_kernel_line(capsys, "--a-major", "MN", "--b-major", "MN")
    assert "_aM_bN_" in _gemm_kernel_line(capsys, "--a-major", "M", "--b-major", "N")
    assert "_aK_bK_" in _gemm_kernel_line(capsys, "--a-major", "k", "--b-major", "K")
    assert "_aK_bN_" in _gemm_kernel_line(capsys)  # the defaults: A K-major, B MN-major


def test_a_bad_storage_order_names_the_choices(capsys) -> None:
    from nvatom.cli import main

    with pytest.raises(SystemExit) as e:
        main(["gemm", "--m", "8", "--n", "8", "--k", "8", "--b-major", "M"])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert "--b-major: takes K (K-major) or MN (MN-major); N is MN, got 'M'" in err
    with pytest.raises(SystemExit):
        main(["desc", "wgmma", "encode", "--major", "N"])
    assert "--major: takes K (K-major) or MN (MN-major), got 'N'" in capsys.readouterr().err


# --------------------------------------------------------------------------- without xDSL

_HIDE_XDSL = """
import sys
sys.modules["xdsl"] = None  # `import xdsl` fails as if it were not installed
from nvatom.cli import main
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.parametrize("argv", [["verify", "tests/ir/mma_sm80.mlir"],
                                  ["verify", "tests/ir/invalid_mma.mlir",
                                   "--verify-diagnostics"],
                                  ["compile", "tests/ir/mma_sm80.mlir", "--no-ptxas"]])
def test_ir_commands_without_xdsl_say_how_to_install_it(argv) -> None:
    """``nvatom verify`` / ``compile`` without xDSL: the install hint of ``nvatom check`` in
    one line and status 2, not "internal error" and 70."""
    root = Path(__file__).resolve().parents[1]
    r = subprocess.run([sys.executable, "-c", _HIDE_XDSL, *argv], capture_output=True,
                       text=True, cwd=root, env={**os.environ, "PYTHONPATH": str(root / "src")},
                       timeout=120)
    assert r.returncode == 2, r.stderr
    assert r.stderr.count("\n") == 1, r.stderr
    assert r.stderr.startswith(f"nvatom: error: nvatom {argv[0]} needs xdsl (the cute_nvgpu IR")
    assert "pip install 'nvatom[ir]' (nvatom is tested with 0.74.0)" in r.stderr
    assert "internal error" not in r.stderr and r.stdout == ""


# --------------------------------------------------------------------------- startup

#: Rooms a sub-command imports only when it runs (tests/test_function_imports.py, reason CLI):
#: the GEMM front end and its kernels, the demo, the launcher (numpy's ctypes, the driver).
HEAVY = ("nvatom.gemm", "nvatom.gemm_providers", "nvatom.kernels", "nvatom.demo",
         "nvatom.runtime.launch")


def test_importing_the_cli_loads_no_heavy_room() -> None:
    """`nvatom --help`, `nvatom layout ...` do not pay for the GEMM: ``import nvatom.cli``
    (and building its parser) loads none of :data:`HEAVY` (a fresh interpreter)."""
    root = Path(__file__).resolve().parents[1]
    code = ("import sys, nvatom.cli\nnvatom.cli._parser()\n"
            f"heavy = {HEAVY!r}\n"
            "print(sorted(m for m in sys.modules if m.startswith(heavy)))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=root,
                       env={**os.environ, "PYTHONPATH": str(root / "src")}, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[]"


def test_the_commands_still_find_what_they_import_late(tmp_path, capsys) -> None:
    """The late imports work: gemm (nvatom.gemm), emit --kernel of a UMMA atom
    (kernels.gemm_sm100)."""
    from nvatom.cli import main

    assert main(["gemm", "--m", "128", "--n", "128", "--k", "64", "--target", "sm_80",
                 "--emit", str(tmp_path / "g.ptx")]) == 0
    assert "kernel   gemm_sm80_" in capsys.readouterr().out
    assert main(["emit", "sm100.mma.f16.cta1.m128n64k16.ss.f32.bf16.bf16", "-t", "sm_100a",
                 "--kernel", "-o", str(tmp_path / "u.ptx")]) == 0
    assert "tcgen05.mma" in (tmp_path / "u.ptx").read_text()


def test_the_old_frag_operand_option_says_where_it_went(capsys) -> None:
    from nvatom.cli import main

    with pytest.raises(SystemExit) as e:
        main(["frag", "sm80.mma.m16n8k16.f32.bf16.bf16.f32", "-o", "B"])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert "unrecognized arguments: -o B (frag's operand is -p/--operand; -o is --output in " \
        "every command)" in err
    assert main(["frag", "sm80.mma.m16n8k16.f32.bf16.bf16.f32", "-p", "b", "--no-table"]) == 0
    assert "operand B: bf16" in capsys.readouterr().out
