"""What every ``nvatom`` command shares: reading numbers, files and output paths, with one-line
errors naming the value (docs/reliability.md), and the one printer of fragments, inline-asm
templates and kernels that every atom family's ``frag`` / ``emit`` uses."""

from __future__ import annotations

import argparse
import contextlib
import os
import stat
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from nvatom.arch import feature, target
from nvatom.atoms.frag_view import fragment_svg, fragment_table, warp_fragment_view
from nvatom.errors import NvatomError
from nvatom.layout import size
from nvatom.ptx.builder import Kernel
from nvatom.runtime.ptxas import assemble

#: the most shared memory one SM has (228 KiB on sm_90 and sm_100; CUDA C++ Programming
#: Guide, "Technical Specifications per Compute Capability"): a bigger smem layout is no
#: shared-memory layout, and `banks` walks every element of it
#: CuTe's integers are int64_t (as in the layout notation)
INT64_MAX = 2**63 - 1
#: longest error line printed (messages that quote a huge input are cut here)
MESSAGE_LIMIT = 1000
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


def target_name(text: str) -> str:
    """An argparse ``type=`` for ``-t/--target``: the text when it names a target of
    :data:`nvatom.arch.TARGETS`, else a usage error listing them (never a ``FILE:1:1``
    diagnostic or a traceback later on)."""
    try:
        return target(text.strip()).name
    except NvatomError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def add_target(p: argparse.ArgumentParser, help: str, **kw: Any) -> None:
    """The one spelling of the target option: ``-t/--target`` (:func:`target_name`)."""
    p.add_argument("-t", "--target", type=target_name, help=help, **kw)


#: The one vocabulary of storage order, the specification's ("UMMA_K orientation" and
#: "UMMA_MN") and CuTe's (``GMMA::Major::K`` / ``GMMA::Major::MN``): a K-major tile has K
#: contiguous (A row-major M x K, B column-major K x N); an MN-major tile has M (of A) or N
#: (of B) contiguous.
MAJORS = ("K", "MN")


def major_name(aliases: dict[str, str] | None = None):  # type: ignore[no-untyped-def]
    """An argparse ``type=`` for a storage-order option: ``K`` or ``MN`` (any case), or one of
    ``aliases`` (an older spelling such as ``M`` for A's MN-major), given back as ``K`` or
    ``MN``; anything else is a usage error naming the choices."""
    table = {m: m for m in MAJORS} | {k.upper(): v for k, v in (aliases or {}).items()}

    def convert(text: str) -> str:
        got = table.get(text.strip().upper())
        if got is None:
            old = "".join(f"; {k} is {v}" for k, v in (aliases or {}).items())
            raise argparse.ArgumentTypeError(
                f"takes K (K-major) or MN (MN-major){old}, got {clip(text)}")
        return got

    convert.__name__ = "major"
    return convert


def add_major(p: Any, option: str, help: str, aliases: dict[str, str] | None = None,
              **kw: Any) -> None:
    """A storage-order option (:data:`MAJORS`, :func:`major_name`); ``help`` says what each
    means for this operand."""
    p.add_argument(option, type=major_name(aliases), metavar="K|MN", help=help, **kw)


def write_output(path: str, data: str | bytes) -> None:
    """Write an output file (``-o``, ``--svg``); any failure is one line naming the path."""
    if not path:
        raise NvatomError("an empty output file name")
    p = Path(path)
    if p.is_dir():
        raise NvatomError(f"cannot write '{path}': it is a directory")
    raw = data if isinstance(data, bytes) else data.encode("utf-8")
    try:
        if p.exists() and not p.is_file():  # /dev/stdout, a pipe: written in place
            p.write_bytes(raw)
        else:
            _replace_file(p, raw)
    except (OSError, ValueError) as e:
        raise NvatomError(f"cannot write '{path}': {getattr(e, 'strerror', None) or e}") \
            from None


def _replace_file(p: Path, raw: bytes) -> None:
    """Write a regular file through a temporary file beside it and ``os.replace``: a full
    disk or a kill mid-write leaves the old file whole and no truncated one (fuzz finding,
    issue 28).  The new file gets the old one's mode, or the umask's default."""
    fd, tmp = tempfile.mkstemp(dir=p.parent, prefix=f".{p.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(raw)
        try:
            mode = stat.S_IMODE(p.stat().st_mode)
        except FileNotFoundError:
            mask = os.umask(0)
            os.umask(mask)
            mode = 0o666 & ~mask
        os.chmod(tmp, mode)
        os.replace(tmp, p)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def read_text_file(path: str, what: str = "") -> str:
    """A UTF-8 input file's text; unreadable or non-UTF-8 input is one line naming the path."""
    if not path:
        raise NvatomError("an empty input file name")
    try:
        data = Path(path).read_bytes()
    except (OSError, ValueError) as e:  # ValueError: an embedded NUL
        raise NvatomError(f"cannot read {path!r}: {getattr(e, 'strerror', None) or e}") \
            from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise NvatomError(f"cannot read '{path}': not UTF-8 text{what} (byte "
                          f"{data[e.start]:#04x} at offset {e.start})") from None


# --------------------------------------------------------------------------- printers


def ver(v: tuple[int, int]) -> str:
    """A PTX ISA version as ``major.minor``."""
    return f"{v[0]}.{v[1]}"


def require_available(atom: Any, t: Any) -> None:
    """One line when ``atom`` does not exist on target ``t``, naming the feature it needs."""

    if not atom.available_on(t):
        f = feature(atom.feature)
        raise NvatomError(f"{atom.name} is not available on {t.name} "
                          f"(needs {f.description}: {f.rule})")


def atom_on_target(args: argparse.Namespace, resolve: Callable[[str], Any],
                   unavailable: Callable[[Any, Any], str] | None = None) -> tuple[Any, Any]:
    """``emit``'s atom (``args.atom`` through the family's resolver) and target
    (``args.target``), or one line when the atom does not exist there: ``unavailable``'s
    message, by default :func:`require_available`'s."""

    atom = resolve(args.atom)
    t = target(args.target)
    if unavailable is None:
        require_available(atom, t)
    elif not atom.available_on(t):
        raise NvatomError(unavailable(atom, t))
    return atom, t


def show_fragment(grid: list, args: argparse.Namespace, title: str) -> int:
    """The lane table (unless --no-table) and the --svg picture of a fragment grid."""

    if not args.no_table:
        print(fragment_table(grid))
    if args.svg is not None:
        write_output(args.svg, fragment_svg(grid, title))
        print(f"wrote {args.svg}")
    return 0


def show_warp_fragment(form: Any, op: str, tv: Any, args: argparse.Namespace,
                       detail: str = "") -> int:
    """``frag`` of a one-warp MMA form (register MMA, SM120): header, layout, lane table."""

    print(f"{form.name} operand {op}: {form.operand_type(op).name}, {form.values(op)} values "
          f"in {form.registers(op)} {form.register_type(op)} registers per lane{detail}")
    print(f"(thread, value) -> element layout: {tv}")
    threads = size(tv[0])  # 32 lanes; 8 for SM70 m8n8k4 (one quad-pair's threads)
    if threads != 32:
        print(f"thread mode: {threads} threads of one quad-pair (thread t is lane "
              "t % 4 + 16 (t // 4), plus 4 q in quad-pair q; each quad-pair its own tile)")
    view = warp_fragment_view(form, op, tv)  # the tile as the PTX ISA draws it
    return show_fragment(view.grid(), args, view.title)


def emit_warp_mma(args: argparse.Namespace, form: Any, t: Any, *,
                  asm: Callable[[], tuple[Any, list[str]]], module: Callable[[], Any],
                  emit: Callable[[Any], None]) -> int:
    """``emit`` of a warp MMA form (register MMA, SM120 mma_bs) in its three modes:
    ``--asm-template``: the asm statement ``asm()`` gives, its operands bound to their C++
    names; ``--kernel``: the test module ``module()``; neither: the one instruction
    ``emit(k)`` appends to a snippet kernel, with its PTX version."""
    if args.asm_template:
        a, names = asm()
        bound = [f'"{c}"({n})' for c, n in zip(a.constraint_list, names, strict=True)]
        print(f"// {form.name}: {a.outputs} outputs, {a.inputs} inputs")
        print(f"// constraints: {a.constraints}")
        print(f'asm volatile("{a.template}"')
        print(f"    : {', '.join(bound[:a.outputs])}")
        print(f"    : {', '.join(bound[a.outputs:])});")
        return 0
    if args.kernel:
        print_kernel(module().emit(), args, t)
        return 0

    k = Kernel("snippet")
    emit(k)
    version = form.ptx_version_for(t)
    print(f"// {form.name} on {t.name}: PTX .version {version[0]}.{version[1]} or newer")
    print(k.emit().splitlines()[-3].strip())
    return 0


def print_kernel(text: str, args: argparse.Namespace, t: Any) -> None:
    """--kernel output: the PTX to stdout or -o FILE, and with --assemble ptxas's resources."""
    if args.output is not None:
        write_output(args.output, text)
        print(f"wrote {args.output}")
    else:
        print(text, end="")
    if args.assemble:
        res = assemble(text, t)
        for kr in res.kernels.values():
            print(f"// ptxas {res.ptxas_version} {res.target}: {kr.name}: {kr.summary()}")
