"""The ``nvatom`` commands that are no atom family's: ``targets``, ``layout``, ``ptxas``,
``check``, ``banks``, ``desc`` (the WGMMA descriptor here; TMA tensor maps in
:mod:`nvatom.cli.tma`, the SM100 descriptors in :mod:`nvatom.cli.sm100`) and ``demo``."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from nvatom import layout as L
from nvatom.arch import FEATURES, TARGETS, target
from nvatom.atoms.smem import SMEM_BYTES_LIMIT, bank_conflicts
from nvatom.cli import sm100, tma
from nvatom.cli.common import (
    INT64_MAX,
    add_major,
    add_target,
    bounded_int,
    clip,
    parse_int,
    read_text_file,
    write_output,
)
from nvatom.descriptors import wgmma
from nvatom.errors import NvatomError
from nvatom.layout.svg import layout_svg
from nvatom.runtime.environment import inspect_environment
from nvatom.runtime.ptxas import assemble

# --------------------------------------------------------------------------- targets


def _cmd_targets(args: argparse.Namespace) -> int:
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
    if op in ("complement", "upcast", "downcast"):
        n = parse_int(f"--{op}", arg, 1, INT64_MAX)  # type: ignore[arg-type]
        return getattr(L, op)(layout, n)
    if op in _LAYOUT_OPS:
        other = L.parse_layout(arg)  # type: ignore[arg-type]
        fn = L.composition if op == "compose" else getattr(L, op)
        return fn(layout, other)
    return getattr(L, op)(layout)


def _note_inexact(a, b, result) -> None:  # type: ignore[no-untyped-def]
    """CuTe pads a mode whose stride does not divide it: say so when the result is not A o B."""
    n = L.size(b)
    for i in range(min(n, 4096)):
        if result(i) != a(b(i)):
            print(f"note: CuTe pads non-dividing strides, so this is not A(B(i)): "
                  f"A(B({i})) = {a(b(i))} but the result gives {result(i)}")
            return


def _cmd_layout(args: argparse.Namespace) -> int:
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
    if args.svg is not None:  # the (row, col) -> offset picture (nvatom.layout.svg)
        write_output(args.svg, layout_svg(layout, element_bits=args.element_bits))
        print(f"wrote {args.svg}")
    return 0


# --------------------------------------------------------------------------- ptxas


def _cmd_ptxas(args: argparse.Namespace) -> int:
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
    if args.output is not None:
        write_output(args.output, result.cubin)
        print(f"wrote {args.output}")
    return 0


# --------------------------------------------------------------------------- check


def _cmd_check(args: argparse.Namespace) -> int:
    """What is here, and what each missing piece costs (nvatom.runtime.environment)."""

    env = inspect_environment()
    print(env.text(), end="")
    return 0 if env.ok else 1


def _cmd_banks(args: argparse.Namespace) -> int:
    # banks walks every element: bound the layout by what shared memory can hold first
    # (every access's default element width is at least 8 bits)
    n = L.size(L.parse_layout(args.smem))
    bits = args.element_bits if args.element_bits is not None else 8
    if n * bits > 8 * SMEM_BYTES_LIMIT:
        raise NvatomError(
            f"--smem {clip(args.smem)} has {n} elements, at least {n * bits // 8} bytes: more "
            f"than shared memory holds (the limit is {SMEM_BYTES_LIMIT} bytes = 228 KiB)")
    report = bank_conflicts(args.smem, args.atom, element_bits=args.element_bits,
                            base=args.base)
    print(report.format(args.detail))
    if args.svg is not None:  # the tile's offsets, coloured by bank (nvatom.layout.svg)
        write_output(args.svg, report.svg)
        print(f"wrote {args.svg}")
    return 0


def _cmd_desc(args: argparse.Namespace) -> int:
    if args.kind == "tma":  # TMA tensor maps: nvatom.cli.tma
        return tma.cmd_tma(args)
    # numbers are checked here, before the descriptor codecs see them
    if args.action == "decode" and args.value is not None:
        parse_int(f"desc {args.kind} decode", args.value, 0, 2**64 - 1, "0x4000004000011000")
    start = parse_int("--start", args.start, 0, 2**32 - 1, "0x400")  # a shared-memory address
    if args.kind in sm100.DESC_KINDS:  # SM100 descriptors: nvatom.cli.sm100
        return sm100.cmd_desc(args)
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
    desc = wgmma.make_wgmma_desc(layout, args.element_bits, args.major,
                                start_address=start)
    print(f"0x{desc.encode():016x}  {desc.explain()}")
    return 0


# --------------------------------------------------------------------------- demo


def _cmd_demo(args: argparse.Namespace) -> int:
    if not args.out:  # Path("") is the current directory
        raise NvatomError("--out needs a directory name, got ''")
    if "\0" in args.out:  # no file name holds a NUL (only a Python caller can pass one)
        raise NvatomError(f"--out {args.out!r}: a file name cannot hold a NUL character")
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise NvatomError(f"--out '{args.out}' exists and is not a directory")
    from nvatom.demo import run_demo  # tiers, mma.sync demo, SM90 GEMM (+ GPU run)

    try:
        return run_demo(args.targets, args.out, show_ptx=args.show_ptx)
    except OSError as e:
        where = e.filename if e.filename is not None else args.out
        raise NvatomError(f"cannot write '{where}': {e.strerror or e}") from None


def add_targets(sub: argparse._SubParsersAction) -> None:
    """nvatom targets"""
    t = sub.add_parser("targets", help="list SM targets with tier, minimum PTX version, features")
    t.add_argument("--features", action="store_true", help="show the feature rules and matrix")
    t.add_argument("--json", action="store_true", help="machine-readable output")
    t.set_defaults(func=_cmd_targets)


def add_layout(sub: argparse._SubParsersAction) -> None:
    """nvatom layout"""
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
    lay.add_argument("--eval", type=bounded_int(0, INT64_MAX), nargs="+",
                     metavar="I", help="evaluate L(I)")
    lay.add_argument("--table", action="store_true", help="print index -> offset for every index")
    lay.add_argument("--svg", metavar="FILE", help="write the (row, col) -> offset picture")
    lay.add_argument("--element-bits", type=bounded_int(1, 128), metavar="BITS",
                     help="--svg: colour cells by the bank of BITS-wide elements "
                     "(default: offset %% 32)")
    lay.set_defaults(func=_cmd_layout)


def add_ptxas(sub: argparse._SubParsersAction) -> None:
    """nvatom ptxas"""
    px = sub.add_parser("ptxas", help="assemble a PTX file with ptxas and report resources")
    px.add_argument("file", help="PTX file")
    add_target(px, "e.g. sm_90a", required=True)
    px.add_argument("-o", "--output", help="write the cubin here")
    px.add_argument("--ptxas-arg", dest="ptxas_args", action="append", metavar="ARG",
                    help="extra ptxas option (repeatable)")
    px.set_defaults(func=_cmd_ptxas)


def add_check(sub: argparse._SubParsersAction) -> None:
    """nvatom check"""
    c = sub.add_parser("check", help="show ptxas versions, GPU and optional packages")
    c.set_defaults(func=_cmd_check)


def add_banks(sub: argparse._SubParsersAction) -> None:
    """nvatom banks"""
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
    bk.add_argument("--detail", type=bounded_int(0, INT64_MAX), default=8,
                    help="instructions printed in full")
    bk.add_argument("--svg", metavar="FILE",
                    help="write the tile's picture: offsets, cells coloured by bank")
    bk.set_defaults(func=_cmd_banks)


def add_desc(sub: argparse._SubParsersAction) -> None:
    """nvatom desc (wgmma here; tma, umma, idesc in their modules)"""
    de = sub.add_parser("desc", help="encode/decode tensor-core descriptors")
    de.add_argument("kind", choices=["wgmma", "tma", "umma", "idesc"],
                    help="wgmma: SM90 smem descriptor; tma: a TMA tensor map (CUtensorMap); "
                    "umma: SM100 smem descriptor; idesc: tcgen05 instruction descriptor")
    de.add_argument("action", choices=["encode", "decode"], nargs="?", default="encode",
                    help="encode (default): build the descriptor from options; decode: explain "
                    "a word")
    de.add_argument("value", nargs="?", help="decode: the 64-bit word, e.g. 0x4000004000011000")
    de.add_argument("--layout", help="encode: smem layout, e.g. "
                    "'Sw<3,3,3> o 0 o ((8,8),(64,1)):((64,512),(1,0))' (in elements)")
    de.add_argument("--element-bits", type=bounded_int(1, 128), default=16,
                    help="element width (default 16)")
    add_major(de, "--major", "encode: the tile's storage order, K-major (K contiguous, the "
              "default) or MN-major (M of A or N of B contiguous)", default="K")
    de.add_argument("--start", default="0", help="shared-memory byte address of the tile")
    tma.add_arguments(de)
    sm100.add_desc_arguments(de)
    de.set_defaults(func=_cmd_desc)


def add_demo(sub: argparse._SubParsersAction) -> None:
    """nvatom demo"""
    d = sub.add_parser("demo", help="the main job: tiers, mma.sync kernel, the SM90 GEMM from "
                       "atoms through ptxas, and on a GPU a checked, timed 4096^3 GEMM")
    d.add_argument("--targets", nargs="+", default=["sm_80", "sm_90a"], metavar="TARGET",
                   help="the targets to build the mma.sync kernel for (default sm_80 sm_90a)")
    d.add_argument("--out", default="build/demo", help="where to write PTX and cubins")
    d.add_argument("--show-ptx", action="store_true", help="print the PTX too")
    d.set_defaults(func=_cmd_demo)
