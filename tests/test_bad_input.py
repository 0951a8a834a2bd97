"""Bad input never crashes: every class of bad input is one line
``nvatom: error: ...`` with exit status 2 that names the offending value and the limit.

The classes: numbers that work or memory grow with (checked before any work), parser limits
(nesting, digits, length), files (directories, unwritable paths, a full disk, existing
non-directories, non-UTF-8 text), number options, and IR input (located diagnostics, never
an internal error at 1:1).  A bounded hypothesis fuzz over layout strings, swizzles and CLI
argv closes the file (generators: scripts/fuzz_grammars.py, shared with scripts/fuzz.py): it
runs a fixed seed and a random one, printed so a failure can be replayed with
``NVATOM_FUZZ_SEED=<seed>``.
"""

from __future__ import annotations

import os
import random
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

from nvatom.cli import SMEM_BYTES_LIMIT, main
from nvatom.errors import LayoutError, NvatomError
from nvatom.ir import driver
from nvatom.layout import parse_layout
from tests.fuzz_support import grammars

HERE = Path(__file__).parent
WGMMA_LAYOUT = "Sw<3,3,3> o 0 o ((8,8),(64,1)):((64,512),(1,0))"
MMA = "sm80.mma.m16n8k16.f32.bf16.bf16.f32"


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def one_line_error(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    """Run argv; it must fail with one ``nvatom: error:`` line and status 2 (argparse's usage
    errors exit through SystemExit(2) with the same one line)."""
    try:
        code, _, err = run(capsys, *argv)
    except SystemExit as e:
        code, err = int(e.code or 0), capsys.readouterr().err
    assert code == 2, (code, err)
    assert err.startswith("nvatom: error: ") and err.count("\n") == 1, err
    assert "Traceback" not in err and "internal error" not in err
    return err


# --------------------------------------------------------------------------- sizes and numbers

DEEP = "(" * 500 + "8" + ")" * 500


@pytest.mark.parametrize(
    ("argv", "parts"),
    [
        # swizzle parameters: CuTe's masks are 32-bit, so B + M + |S| <= 32
        (["layout", "Sw<3,100000000000,3> o 0 o 8:1"],
         ["Swizzle<3,100000000000,3>", "B + M + |S| must be <= 32"]),
        (["layout", "Sw<3,27,3> o 0 o 8:1"], ["Swizzle<3,27,3>", "<= 32"]),
        (["layout", "Sw<3,4," + "1" + "0" * 30 + "> o 0 o 8:1"],
         ["integer of 31 digits is out of range", "|v| < 2^63"]),
        (["layout", "Sw<3,4,3> o 0 o 8:1", "--downcast", str(2**30)],
         ["Swizzle<3,34,3>", "<= 32"]),
        # parser limits
        (["layout", DEEP], ["tuples nest deeper than 32 levels (the limit)", "1001 characters"]),
        (["layout", "9" * 5000], ["integer of 5000 digits is out of range", "5000 characters"]),
        (["layout", "9223372036854775808:1"], ["integer 9223372036854775808 is out of range"]),
        (["layout", "(" + ",".join(["2"] * 10_001) + ")"], ["more than 10000 integers"]),
        (["layout", "1" * 100_001], ["text of 100001 characters is longer than the limit"]),
        # banks walks every element: shared memory bounds it
        (["banks", "lds.32", "--smem", "(1000000,8)"],
         ["'(1000000,8)' has 8000000 elements", f"the limit is {SMEM_BYTES_LIMIT} bytes"]),
        (["banks", "ldsm.x4", "--smem", "(64,64):(64,1)", "--base", "300000"],
         ["--base", "300000 is out of range", f"0 to {SMEM_BYTES_LIMIT - 1}"]),
        (["banks", "ldsm.x4", "--smem", "(64,64):(64,1)", "--detail", "-1"],
         ["--detail", "-1 is out of range"]),
        (["banks", "lds.32", "--smem", "64:1", "--element-bits", "0"],
         ["--element-bits", "0 is out of range: the limit is 1 to 128"]),
        # number options
        (["desc", "wgmma", "encode", "--start", "1e3", "--layout", WGMMA_LAYOUT],
         ["--start takes an integer from 0 to 4294967295", "'1e3'"]),
        (["desc", "umma", "encode", "--start", "-16", "--layout", WGMMA_LAYOUT],
         ["--start -16 is out of range"]),
        (["desc", "wgmma", "decode", "9" * 5000],
         ["desc wgmma decode takes an integer from 0 to 18446744073709551615",
          "(5000 characters)"]),
        (["desc", "umma", "decode", "0x" + "f" * 20],
         ["desc umma decode 0x" + "f" * 20 + " is out of range", "0 to 18446744073709551615"]),
        (["desc", "wgmma", "decode"], ["needs the 64-bit word"]),
        (["layout", "8:1", "--upcast", "0"], ["--upcast 0 is out of range"]),
        (["layout", "8:1", "--complement", "1e3"], ["--complement takes an integer", "'1e3'"]),
        (["layout", "8:1", "--eval", "9" * 30], ["--eval", "out of range"]),
        (["emit", MMA, "-t", "sm_80", "--selector", "300"],
         ["--selector", "300 is out of range: the limit is 0 to 255"]),
    ],
)
def test_numbers_and_parser_limits(capsys: pytest.CaptureFixture[str], argv: list[str],
                                   parts: list[str]) -> None:
    err = one_line_error(capsys, *argv)
    assert len(err) < 400, err  # a 100,000-character input is not echoed back whole
    for part in parts:
        assert part in err, (part, err)


def test_bounds_are_checked_before_the_work(capsys: pytest.CaptureFixture[str]) -> None:
    """banks on a 1M x 8 layout took 23 s and 1.8 GB; the check is immediate."""
    t0 = time.perf_counter()
    one_line_error(capsys, "banks", "ldsm.x4", "--smem", "(1000000,8):(8,1)")
    one_line_error(capsys, "layout", "Sw<3,100000000000,3> o 0 o 8:1")
    assert time.perf_counter() - t0 < 2.0


def test_limits_still_admit_the_largest_legal_values(capsys: pytest.CaptureFixture[str]) -> None:
    # the widest swizzle CuTe can express, and int64's largest value
    code, out, _ = run(capsys, "layout", "Sw<3,26,3> o 0 o 8:1")
    assert code == 0 and "Sw<3,26,3>" in out
    code, out, _ = run(capsys, "layout", f"1:{2**63 - 1}", "--eval", "0")
    assert code == 0 and "L(0) = 0" in out
    # a tile that fills shared memory exactly: 228 KiB of 32-bit elements
    code, out, _ = run(capsys, "banks", "lds.32", "--smem", f"({SMEM_BYTES_LIMIT // 4 // 32},32)",
                       "--detail", "0")
    assert code == 0 and "total:" in out


def test_desc_help_example_encodes_with_the_default_width(
        capsys: pytest.CaptureFixture[str]) -> None:
    """The example in `nvatom desc --help` must work as printed (16-bit elements)."""
    with pytest.raises(SystemExit):
        main(["desc", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    start = help_text.index("--layout LAYOUT")
    example = help_text[start:].split("'")[1]
    assert example.startswith("Sw<")
    code, out, err = run(capsys, "desc", "wgmma", "encode", "--layout", example)
    assert code == 0, err
    assert "swizzle=128B" in out


# --------------------------------------------------------------------------- files


def _kernel_argv(out: str) -> list[str]:
    return ["emit", MMA, "-t", "sm_80", "--kernel", "-o", out]


@pytest.mark.parametrize("where", ["directory", "under_a_file", "dev_full"])
def test_output_files(capsys: pytest.CaptureFixture[str], tmp_path: Path, where: str) -> None:
    (tmp_path / "file").write_text("x")
    path, reason = {
        "directory": (str(tmp_path), "it is a directory"),
        "under_a_file": (str(tmp_path / "file" / "out"), "Not a directory"),
        "dev_full": ("/dev/full", "No space left on device"),
    }[where]
    if where == "dev_full" and not Path("/dev/full").exists():
        pytest.skip("no /dev/full here")
    for argv in (_kernel_argv(path),
                 ["frag", MMA, "--no-table", "--svg", path],
                 ["layout", "(8,8):(8,1)", "--svg", path],
                 ["banks", "ldsm.x4", "--smem", "(16,64):(64,1)", "--detail", "0", "--svg", path],
                 ["compile", str(HERE / "ir" / "mma_sm80.mlir"), "--no-ptxas", "-o", path]):
        err = one_line_error(capsys, *argv)
        assert f"cannot write '{path}': {reason}" in err, err


def test_other_writers_fall_into_the_oserror_net(capsys: pytest.CaptureFixture[str],
                                                  tmp_path: Path) -> None:
    """Sub-commands that write files themselves (gemm --emit) still end in one line naming
    the path; SM100 --kernel -o goes through the one kernel printer like every family."""
    err = one_line_error(capsys, "emit", "sm100.mma.f16.cta1.m128n64k16.ss.f32.bf16.bf16",
                         "-t", "sm_100a", "--kernel", "-o", str(tmp_path))
    assert err == f"nvatom: error: cannot write '{tmp_path}': it is a directory\n"
    err = one_line_error(capsys, "gemm", "--m", "128", "--n", "128", "--k", "64", "--emit",
                         str(tmp_path))
    assert err == f"nvatom: error: cannot write '{tmp_path}': it is a directory\n"


def _writers(path: str) -> list[list[str]]:
    """Every sub-command that writes a file the user names."""
    return [_kernel_argv(path),
            ["frag", MMA, "--no-table", "--svg", path],
            ["layout", "(8,8):(8,1)", "--svg", path],
            ["banks", "ldsm.x4", "--smem", "(16,64):(64,1)", "--detail", "0", "--svg", path],
            ["compile", str(HERE / "ir" / "mma_sm80.mlir"), "--no-ptxas", "-o", path],
            ["gemm", "--m", "128", "--n", "128", "--k", "64", "--emit", path]]


def test_a_failed_write_keeps_the_old_file(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """Fuzz finding (issue 28): out of disk space mid-write lost the old file and left a
    truncated one.  Outputs go to a temporary file beside the target and are renamed."""
    import errno
    import os

    import nvatom.cli.common as C

    out = tmp_path / "out"
    for argv in _writers(str(out)):
        out.write_text("the old contents")
        out.chmod(0o640)

        def full(src: str, dst: object) -> None:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

        monkeypatch.setattr(C.os, "replace", full)
        err = one_line_error(capsys, *argv)
        assert f"cannot write '{out}': No space left on device" in err, argv
        assert out.read_text() == "the old contents", argv
        assert sorted(p.name for p in tmp_path.iterdir()) == ["out"], argv  # no temporary left
        monkeypatch.undo()
        code, _, _ = run(capsys, *argv)  # and with room on the disk, it is replaced whole
        assert code == 0 and out.read_bytes() != b"the old contents", argv
        assert (out.stat().st_mode & 0o777) == 0o640, argv  # the old file's mode is kept
        assert sorted(p.name for p in tmp_path.iterdir()) == ["out"], argv


def test_empty_output_names_are_refused(capsys: pytest.CaptureFixture[str]) -> None:
    """Fuzz finding (issue 28): ``-o ''`` (and --svg '', --emit '') was silently ignored."""
    for argv in _writers(""):
        err = one_line_error(capsys, *argv)
        assert err == "nvatom: error: an empty output file name\n", argv


@pytest.mark.parametrize("argv", [
    ["compile", str(HERE / "ir" / "mma_sm80.mlir"), "--target", "bogus"],
    ["verify", str(HERE / "ir" / "mma_sm80.mlir"), "-t", "bogus"],
    ["gemm", "--m", "128", "--n", "128", "--k", "64", "-t", "bogus"],
    ["emit", MMA, "-t", "bogus"],
    ["atoms", "-t", "bogus"],
])
def test_an_unknown_target_is_a_usage_error(capsys: pytest.CaptureFixture[str],
                                            argv: list[str]) -> None:
    """Fuzz finding (issue 28): ``compile --target bogus`` reported ``FILE:1:1``; every
    ``-t/--target`` is checked by argparse, naming the known targets."""
    err = one_line_error(capsys, *argv)
    assert err.startswith("nvatom: error: argument -t/--target: unknown target 'bogus'; "
                          "known targets: sm_70, "), err
    assert f"(see 'nvatom {argv[0]} --help')" in err


def test_llvm_emission_failure_is_one_line(capsys: pytest.CaptureFixture[str],
                                           tmp_path: Path) -> None:
    """Fuzz finding (issue 28): ``compile --emit llvm`` printed its informational line to
    stderr before failing; the note comes last, on success only."""
    pytest.importorskip("xdsl")
    err = one_line_error(capsys, "compile", str(HERE / "ir" / "mma_sm80.mlir"), "--emit",
                         "llvm", "--no-ptxas", "-o", str(tmp_path / "no" / "x.ll"))
    assert err.startswith(f"nvatom: error: cannot write '{tmp_path / 'no' / 'x.ll'}'")


def test_ptxas_output_and_non_utf8_input(capsys: pytest.CaptureFixture[str],
                                         tmp_path: Path) -> None:
    ptx = tmp_path / "k.ptx"
    code, _, _ = run(capsys, *_kernel_argv(str(ptx)))
    assert code == 0
    err = one_line_error(capsys, "ptxas", str(ptx), "-t", "sm_80", "-o", str(tmp_path))
    assert f"cannot write '{tmp_path}': it is a directory" in err
    bad = tmp_path / "bad.ptx"
    bad.write_bytes(b"// \xff\xfe\n" + ptx.read_bytes())
    err = one_line_error(capsys, "ptxas", str(bad), "-t", "sm_80")
    assert f"cannot read '{bad}': not UTF-8 text" in err and "byte 0xff at offset 3" in err
    for cmd in ("verify", "compile"):
        err = one_line_error(capsys, cmd, str(bad))
        assert "not UTF-8 text (byte 0xff at offset 3)" in err
    err = one_line_error(capsys, "ptxas", str(tmp_path), "-t", "sm_80")
    assert f"cannot read '{tmp_path}': Is a directory" in err


def test_demo_out_must_be_a_directory(capsys: pytest.CaptureFixture[str],
                                      tmp_path: Path) -> None:
    err = one_line_error(capsys, "demo", "--out", "")
    assert "--out needs a directory name, got ''" in err  # not the current directory
    err = one_line_error(capsys, "ptxas", "", "-t", "sm_80")
    assert "an empty input file name" in err
    err = one_line_error(capsys, "compile", str(HERE / "ir" / "mma_sm80.mlir"), "--no-ptxas",
                         "-o", "")
    assert "an empty output file name" in err
    err = one_line_error(capsys, "demo", "--out", "/dev/null")
    assert "--out '/dev/null' exists and is not a directory" in err
    (tmp_path / "file").write_text("x")
    err = one_line_error(capsys, "demo", "--out", str(tmp_path / "file" / "sub"))
    assert f"cannot write '{tmp_path / 'file' / 'sub'}'" in err


def test_error_lines_are_bounded(capsys: pytest.CaptureFixture[str]) -> None:
    """A message that quotes a huge input (here desc tma's own) is cut, with its length."""
    err = one_line_error(capsys, "desc", "tma", "encode", "--shape", "9" * 5000 + ",64",
                         "--box", "64,64", "--no-driver")
    assert "--shape takes comma-separated integers" in err
    assert len(err) < 1100 and "characters)" in err


def test_a_bug_is_one_line_with_exit_70(capsys: pytest.CaptureFixture[str],
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """The safety net: an unexpected exception is one line (a report, not a traceback)."""
    import nvatom.layout as L

    def boom(text: str) -> None:
        raise ZeroDivisionError("planted")

    monkeypatch.setattr(L, "parse_layout", boom)
    code, _, err = run(capsys, "layout", "8:1")
    assert code == 70 and err.count("\n") == 1
    assert err.startswith("nvatom: internal error (please report") and "planted" in err


# --------------------------------------------------------------------------- IR


def _diags(text: str, *, lower: bool = False) -> list[driver.Diagnostic]:
    try:
        mod = driver.parse(text, "t.mlir")
        ctx = driver.verify(mod)
        if lower:
            from nvatom.ir.lower import lower as lower_

            lower_(mod, ctx)
    except driver.IRError as e:
        return e.diagnostics
    return []


def test_ir_truncated_header_is_located(capsys: pytest.CaptureFixture[str],
                                        tmp_path: Path) -> None:
    """`verify` said "verified" and `compile` raised IndexError on a cut-off file."""
    f = tmp_path / "cut.mlir"
    f.write_text("func.func @f(%a: !cute.ptr<bf16, gmem>)\n")
    for cmd in ("verify", "compile"):
        code, _, err = run(capsys, cmd, str(f))
        assert code == 1
        assert err == (f"{f}:1:1: error: 'func.func' op has no body: nvatom compiles "
                       "function definitions only (is the file cut off after the header?)\n")
    f.write_text("func.func @f(%a: !cute.ptr<bf16, gmem>) {\n  func.return\n")
    code, _, err = run(capsys, "verify", str(f))
    assert code == 1 and err == f"{f}:3:1: error: unexpected end of file in block definition\n"


def test_ir_lowering_unrolls_a_bounded_number_of_instructions() -> None:
    """A copy of a million accesses per thread took 24 s and wrote 175 MB of PTX."""
    text = (
        "func.func @f(%pa: !cute.ptr<f16, gmem>, %pd: !cute.ptr<f16, gmem>) {\n"
        "  %out = cute_nvgpu.make_atom : !cute_nvgpu.atom.universal_copy<128>\n"
        "  %ga = cute.make_view %pa : !cute.memref<f16, gmem, (32,(8,N)):(8,(1,256))>\n"
        "  %gd = cute.make_view %pd : !cute.memref<f16, gmem, (32,(8,N)):(8,(1,256))>\n"
        "  cute_nvgpu.atom.copy %out, %ga, %gd\n"
        "  func.return\n"
        "}\n")
    t0 = time.perf_counter()
    (d,) = _diags(text.replace("N", "1048576"), lower=True)
    assert time.perf_counter() - t0 < 2.0
    assert (d.line, d.col, d.op) == (5, 3, "cute_nvgpu.atom.copy")
    assert d.message == ("the operation unrolls into 1048576 128-bit accesses per thread; "
                         "the limit is 16384")
    assert _diags(text.replace("N", "4"), lower=True) == []  # 4 accesses: lowers


def test_ir_nesting_is_bounded() -> None:
    """300 nested scf.for: a located limit, not Python's recursion limit."""
    n = 300
    lines = ["func.func @f(%n: i32) {", "  %c0 = arith.constant 0 : i32",
             "  %c1 = arith.constant 1 : i32"]
    lines += [f"scf.for %i{i} = %c0 to %n step %c1 : i32 {{" for i in range(n)]
    lines += ["}"] * n + ["  func.return", "}"]
    (d,) = _diags("\n".join(lines))
    assert d.message == "brackets nest deeper than 64 levels (the limit)"
    assert (d.line, d.col) == (3 + 64, len("scf.for %i63 = %c0 to %n step %c1 : i32 {"))
    (d,) = _diags("func.func @f(%a: " + "tuple<" * 3000 + "i32" + ">" * 3000 + ") {\n}\n")
    assert d.message == "input nests too deeply for the parser (Python's recursion limit)"


def test_ir_kernel_name_error_is_located() -> None:
    text = "func.func @a.b() {\n  func.return\n}\n"
    (d,) = _diags(text, lower=True)
    assert (d.line, d.col, d.op) == (1, 1, "func.func")
    assert d.message == "kernel name 'a.b' is not a valid PTX identifier"


def test_ir_internal_errors_carry_the_op_location(monkeypatch: pytest.MonkeyPatch) -> None:
    """A bug in the lowering of one op is reported at that op, not at 1:1 or its function."""
    from nvatom.ir import lower as LW

    text = (HERE / "ir" / "mma_sm80.mlir").read_text()
    line = next(i for i, s in enumerate(text.splitlines(), 1) if "cute_nvgpu.atom.mma " in s)

    def boom(self: object, op: object) -> None:
        raise KeyError("planted")

    monkeypatch.setattr(LW._KernelLowering, "_cute_nvgpu_atom_mma", boom)
    (d,) = _diags(text, lower=True)
    assert (d.line, d.col, d.op) == (line, 3, "cute_nvgpu.atom.mma")
    assert d.message.startswith(driver.INTERNAL) and "KeyError: 'planted'" in d.message


def test_ir_parse_bug_is_located_at_the_op(monkeypatch: pytest.MonkeyPatch) -> None:
    from nvatom.ir import dialect as DL

    text = "func.func @f() {\n  %b = cute_nvgpu.arch.mbarrier_init {count = 1}\n  func.return\n}\n"
    op = next(c for c in DL.ALL_OPS if c.name == "cute_nvgpu.arch.mbarrier_init")

    def boom(cls: object, parser: object) -> None:
        raise IndexError("planted")

    monkeypatch.setattr(op, "parse_custom", classmethod(boom))
    (d,) = _diags(text)
    assert (d.line, d.col) == (2, 3) and d.op == "cute_nvgpu.arch.mbarrier_init"
    assert d.message == f"{driver.INTERNAL} IndexError: planted"


# --------------------------------------------------------------------------- bounded fuzz

FUZZ_EXAMPLES = int(os.environ.get("NVATOM_FUZZ_EXAMPLES", "120"))
RANDOM_SEED = int(os.environ.get("NVATOM_FUZZ_SEED", str(random.randrange(1 << 32))))
# the generators are scripts/fuzz_grammars.py's (shared with scripts/fuzz.py), driven by hypothesis
layout_texts = grammars.hypothesis_strategy(grammars.layout_text)
argvs = grammars.hypothesis_strategy(grammars.argv_case)


def _no_traceback(argv: list[str]) -> None:
    import contextlib
    import io

    out, err = io.StringIO(), io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(argv)
    except SystemExit as e:  # argparse's usage errors
        code = int(e.code or 0)
    text = err.getvalue()
    assert code in (0, 2), (argv, code, text)
    assert "Traceback" not in text and "internal error" not in text, (argv, text)
    if code == 2:
        assert text.startswith("nvatom: error: ") and text.count("\n") == 1, (argv, text)


def _layout_or_error(text: str) -> None:
    try:
        parse_layout(text)
    except LayoutError:
        pass


_SETTINGS = settings(max_examples=FUZZ_EXAMPLES, deadline=None, database=None,
                     suppress_health_check=list(HealthCheck))


@pytest.mark.parametrize("which", ["fixed", "random"])
def test_fuzz_cli_and_layouts(which: str, capsys: pytest.CaptureFixture[str]) -> None:
    """Random argv and layout strings: success or one-line errors, never a traceback."""
    s = 20261125 if which == "fixed" else RANDOM_SEED
    with capsys.disabled():
        print(f"\n[bad-input fuzz] {which} seed {s} (replay: NVATOM_FUZZ_SEED={s}), "
              f"{FUZZ_EXAMPLES} argv + {FUZZ_EXAMPLES} layout strings")
    seed(s)(_SETTINGS(given(argvs)(_no_traceback)))()
    seed(s)(_SETTINGS(given(layout_texts)(_layout_or_error)))()


def test_fuzz_swizzle_parameters() -> None:
    """Any B, M, S: a Swizzle or a LayoutError, decided without building huge masks."""
    from nvatom.layout import Swizzle

    big = st.integers(-(2**70), 2**70)
    small = st.integers(-40, 40)

    @seed(20261125)
    @_SETTINGS
    @given(st.one_of(small, big), st.one_of(small, big), st.one_of(small, big))
    def check(b: int, m: int, s: int) -> None:
        try:
            sw = Swizzle(b, m, s)
        except LayoutError as e:
            assert len(str(e)) < 300
            return
        assert sw.swizzle_code < 2**32 and sw(sw(12345)) == 12345

    check()


def test_nvatom_error_is_the_base_of_what_the_cli_prints() -> None:
    assert issubclass(LayoutError, NvatomError) and issubclass(driver.IRError, NvatomError)
