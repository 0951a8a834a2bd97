"""Grammar-based input generators for nvatom's fuzzing (issue 17, "Bad input never crashes").

One place for the generators that both the bounded CI fuzz tests (tests/test_bad_input.py,
tests/ir/test_ir_fuzz.py, tests/test_fuzz_campaign.py) and the long campaigns of
``scripts/fuzz.py`` use.  Every generator is a function of a ``random.Random``-like object
``r`` (it calls ``r.random``, ``r.randint``, ``r.choice``, ``r.getrandbits``), so:

* ``scripts/fuzz.py`` calls it with ``random.Random(<seed>:<target>:<index>)``: each input is
  a pure function of the campaign seed, the target and its index, and replays alone;
* hypothesis tests wrap it as ``st.randoms(use_true_random=False).map(gen)`` (see
  :func:`hypothesis_strategy`), so hypothesis drives (and shrinks) the same choices.

The grammars follow the real inputs: CuTe layout notation (``nvatom.layout.notation``),
``Swizzle<B,M,S>``, atom names (the names the registry lists, split into their dot-separated
components and recombined or damaged), descriptor words built field by field from the
descriptor tables (``nvatom.descriptors``; SM90 "Matrix Descriptor Format", SM100 shared
memory descriptor and tcgen05 instruction descriptor, PTX ISA 9.7.15.5.1 and 9.7.16.4) and
CUDA ``CUtensorMap`` bytes recorded from the driver (tests/data/tma_driver_corpus.json.gz),
CLI argument vectors (``nvatom --help``'s sub-commands and options), MLIR modules (the
files under tests/ir, mutated, spliced, or generated around layouts from the layout grammar),
and calls of the Python APIs (GEMM, grouped GEMM, attention, torch operators, the kernel
layer's tensors, ``EpilogueSpec``) on duck-typed tensors (:class:`FakeTensor`).

This module imports only the standard library and nvatom (hypothesis only inside
:func:`hypothesis_strategy`, numpy, nvatom's dependency, only inside :func:`materialize`), so
the campaign script and the CPU tests share it.
"""

from __future__ import annotations

import dataclasses
import functools
import gzip
import json
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

ROOT = Path(__file__).resolve().parent.parent
IR_DIR = ROOT / "tests" / "ir"
TMA_CORPUS = ROOT / "tests" / "data" / "tma_driver_corpus.json.gz"


class Rng(Protocol):
    def random(self) -> float: ...
    def randint(self, a: int, b: int) -> int: ...
    def choice(self, seq: Sequence[Any]) -> Any: ...
    def getrandbits(self, k: int) -> int: ...


def _p(r: Rng, prob: float) -> bool:
    return r.random() < prob


# --------------------------------------------------------------------------- numbers

#: Integers as text: the usual sizes, boundaries of every limit the parsers check (int64,
#: 32-bit masks, digit counts), spellings Python's int() takes or refuses.
NUMBERS = ["0", "1", "-1", "2", "3", "4", "8", "16", "32", "64", "128", "256", "-8",
           "100000000000", "10" * 16, "9" * 25, "1e3", "0x10", "0b101", "_8", "8_0",
           "4294967296", "4294967295", "9223372036854775807", "9223372036854775808",
           "-9223372036854775808", "", "x", " 8", "+4", "007", "\u0663", "1.5", "nan",
           # past Python's 4,300-digit int/str limit (hex is not limited: issue 28's finding)
           "0x" + "f" * 5000, "0X" + "9" * 5000, "9" * 5000]


def number_text(r: Rng) -> str:
    """A number as text: mostly small, sometimes a boundary or a non-number."""
    x = r.random()
    if x < 0.55:
        return str(r.choice([1, 2, 4, 8, 16, 32, 64, 128, 3, 5, 6, 12, 0, 256]))
    if x < 0.9:
        return r.choice(NUMBERS)
    return str(r.randint(-(2**70), 2**70))


def int_value(r: Rng) -> int:
    """An integer for API calls: small, powers of two, boundaries, huge."""
    x = r.random()
    if x < 0.5:
        return r.randint(-4, 40)
    if x < 0.75:
        return 1 << r.randint(0, 70)
    if x < 0.9:
        return r.choice([2**31 - 1, 2**31, 2**32 - 1, 2**32, 2**63 - 1, 2**63, -(2**63),
                         2**64 - 1, 2**64])
    return r.randint(-(2**80), 2**80)


# --------------------------------------------------------------------------- layouts


def int_tuple_text(r: Rng, depth: int = 0, width: int = 3) -> str:
    if depth > 2 or _p(r, 0.5):
        return number_text(r) if _p(r, 0.15) else str(r.choice([1, 2, 3, 4, 8, 16, 32, 64]))
    n = r.randint(0, width)
    return "(" + ",".join(int_tuple_text(r, depth + 1) for _ in range(n)) + ")"


def _congruent_stride(r: Rng, shape: str) -> str:
    """A stride with the shape's parentheses (mostly congruent), fresh numbers."""
    out, i = [], 0
    while i < len(shape):
        c = shape[i]
        if c in "(),":
            out.append(c)
            i += 1
            continue
        j = i
        while j < len(shape) and shape[j] not in "(),":
            j += 1
        out.append(str(r.choice([0, 1, 2, 4, 8, 16, 64, 128, 3])) if _p(r, 0.85)
                   else number_text(r))
        i = j
    return "".join(out)


DAMAGE = [*list("(),:o<>Sw -_x9"), "Sw<", " o ", "((", "))", ",,", "::", "\x00", "\u00e9"]


def damage(r: Rng, text: str, alphabet: Sequence[str] = DAMAGE) -> str:
    """One to three character-level edits: replace, insert, delete, or cut the text."""
    chars = list(text)
    for _ in range(r.randint(1, 3)):
        i = r.randint(0, max(len(chars) - 1, 0))
        kind = r.randint(0, 3)
        if kind == 0:
            chars[i:i + 1] = [r.choice(alphabet)]
        elif kind == 1:
            chars.insert(i, r.choice(alphabet))
        elif kind == 2:
            del chars[i:i + 1]
        else:
            chars = chars[:i]
    return "".join(chars)


def layout_text(r: Rng) -> str:
    """CuTe layout notation ``SHAPE[:STRIDE]``, sometimes ``Sw<B,M,S> o OFF o ...``, sometimes
    damaged."""
    shape = int_tuple_text(r)
    if _p(r, 0.6):
        stride = _congruent_stride(r, shape) if _p(r, 0.7) else int_tuple_text(r)
        text = f"{shape}:{stride}"
    else:
        text = shape
    if _p(r, 0.25):
        if _p(r, 0.7):
            b, m, s = r.randint(0, 3), r.randint(0, 6), r.randint(0, 4)
            text = f"Sw<{b},{m},{s}> o {r.choice(['0', '0', '8', number_text(r)])} o {text}"
        else:
            b, m, s, off = (number_text(r) for _ in range(4))
            text = f"Sw<{b},{m},{s}> o {off} o {text}"
    if _p(r, 0.2):
        text = damage(r, text)
    return text


#: The algebra operations of the ``layout`` target: name -> kind of argument.
LAYOUT_OPS: dict[str, str] = {
    "coalesce": "", "filter": "", "right_inverse": "", "left_inverse": "", "flatten": "",
    "complement": "int", "upcast": "int", "downcast": "int",
    "composition": "layout", "logical_divide": "layout", "zipped_divide": "layout",
    "logical_product": "layout", "blocked_product": "layout", "raked_product": "layout",
    "tiled_divide": "layout",
    "call": "int", "size": "", "cosize": "", "roundtrip": "",
}


def layout_case(r: Rng) -> dict[str, Any]:
    """A layout string and up to three algebra operations on it."""
    ops = []
    for _ in range(r.randint(0, 3)):
        op = r.choice(sorted(LAYOUT_OPS))
        kind = LAYOUT_OPS[op]
        arg: Any = None
        if kind == "int":
            arg = int_value(r) if _p(r, 0.6) else r.randint(0, 64)
        elif kind == "layout":
            arg = layout_text(r)
        ops.append([op, arg])
    return {"text": layout_text(r), "ops": ops}


# --------------------------------------------------------------------------- swizzles


def swizzle_case(r: Rng) -> dict[str, Any]:
    """Swizzle parameters (as ints, or as ``Sw<B,M,S>`` text) and offsets to apply."""
    def param() -> int:
        return r.randint(0, 5) if _p(r, 0.8) else r.randint(-2, 12) if _p(r, 0.5) else \
            int_value(r)

    case: dict[str, Any] = {"b": param(), "m": param(), "s": param(),
                            "x": [int_value(r) if _p(r, 0.3) else r.randint(0, 1 << 20)
                                  for _ in range(r.randint(0, 3))]}
    if _p(r, 0.3):
        text = f"Sw<{number_text(r)},{number_text(r)},{number_text(r)}>"
        case["text"] = damage(r, text) if _p(r, 0.3) else text
    return case


# --------------------------------------------------------------------------- atom names


def _cli_out(argv: list[str]) -> str:
    import contextlib
    import io

    from nvatom.cli import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        code = main(argv)
    if code != 0:
        raise RuntimeError(f"nvatom {' '.join(argv)} exited {code}")
    return out.getvalue()


@functools.cache
def real_atom_names() -> tuple[str, ...]:
    """Every atom name the registry lists (``nvatom atoms --family register_mma|--copy|
    --wgmma|--umma [--forms]|--sm120 --json``), read once through the CLI (its listing
    options are the stable surface); UMMA families are listed by shape range: one name per M
    at the first N."""
    names: list[str] = []
    for flag in (["--family", "register_mma"], ["--copy"], ["--wgmma"], ["--umma"],
                 ["--sm120"]):
        for row in json.loads(_cli_out(["atoms", *flag, "--json"])):
            if "name" in row:
                names.append(row["name"])
            elif {"mnemonic", "kind", "cta_group", "m", "n", "k", "a_source", "ws",
                  "types"} <= set(row):
                # a UMMA family row: its atoms are named MNEMONIC.KIND.ctaG.mMnNkK.SRC...
                n = int(re.split(r"[.,]", str(row["n"]))[0])
                names += [f"{row['mnemonic']}.{row['kind']}.cta{row['cta_group']}.m{m}n{n}"
                          f"k{row['k']}.{row['a_source']}{'.ws' if row['ws'] else ''}."
                          f"{row['types']}" for m in row["m"]]
    for row in json.loads(_cli_out(["atoms", "--umma", "--forms", "--json"])):
        names.append(row["name"])  # tcgen05 forms
    return tuple(sorted(set(names)))


@functools.cache
def atom_name_parts() -> tuple[str, ...]:
    return tuple(sorted({p for n in real_atom_names() for p in n.split(".")}))


NAME_NOISE = ["", " ", "x", "sm80", "sm_90a", "mma", "m16n8k16", "m0n0k0", "m99999n8k16",
              "f32", "bf16", "e4m3", "fp8", "..", "\u00e9", "\x00", "SM120", "sm100", "atom",
              "tmem_load", "cta1", "cta3", "k" + "9" * 30]


def atom_name(r: Rng) -> str:
    """A real atom name, or one recombined from real components, or one damaged."""
    name = r.choice(real_atom_names())
    x = r.random()
    if x < 0.15:
        return name
    parts = name.split(".")
    if x < 0.75:
        for _ in range(r.randint(1, 2)):
            i = r.randint(0, len(parts) - 1)
            kind = r.randint(0, 5)
            pool = atom_name_parts() if _p(r, 0.8) else NAME_NOISE
            if kind <= 1:
                parts[i] = r.choice(pool)
            elif kind == 2:
                del parts[i:i + 1]
            elif kind == 3:
                parts.insert(i, r.choice(pool))
            elif kind == 4:
                j = r.randint(0, len(parts) - 1)
                parts[i], parts[j] = parts[j], parts[i]
            else:
                parts[i] = parts[i].upper() if _p(r, 0.5) else parts[i] + r.choice(NUMBERS)
        return ".".join(parts)
    if x < 0.9:
        return damage(r, name, list(".abcdefmnkx0123456789_ ") + NAME_NOISE)
    # the grammar of register MMA names from scratch
    return (f"sm{r.choice(['70', '75', '80', '89', '90', '100', '120', '7'])}."
            f"{r.choice(['mma', 'sparse_mma', 'mma_bs', 'wgmma'])}."
            f"m{r.choice(NUMBERS)}n{r.choice(NUMBERS)}k{r.choice(NUMBERS)}."
            + ".".join(r.choice(["f32", "f16", "bf16", "s32", "s8", "u8", "e4m3", "e5m2",
                                 "tf32", "f64", "b1", "row", "col"])
                       for _ in range(r.randint(0, 5))))


# --------------------------------------------------------------------------- descriptors


def _field_word(r: Rng, fields: Sequence[Any], allowed: dict[str, Any] | None = None) -> int:
    """A word built field by field: each field a listed value (or any of its width)."""
    word = 0
    for f in fields:
        vals = (allowed or {}).get(f.name)
        if vals and _p(r, 0.9):
            v = r.choice(sorted(vals))
        elif _p(r, 0.3):
            v = r.choice([0, 1, (1 << f.width) - 1])
        else:
            v = r.getrandbits(f.width)
        word |= (v & ((1 << f.width) - 1)) << f.lsb
    return word


def _flip(r: Rng, word: int, bits: int) -> int:
    for _ in range(r.randint(1, 3)):
        word ^= 1 << r.randint(0, bits - 1)
    return word


@functools.cache
def tma_corpus() -> tuple[str, ...]:
    """The hex of the tensor maps the CUDA driver wrote (tests/data)."""
    data = json.load(gzip.open(TMA_CORPUS))
    return tuple(e["bytes"] for e in data["entries"] if e.get("result") == "CUDA_SUCCESS"
                 and e.get("bytes"))


def descriptor_case(r: Rng) -> dict[str, Any]:
    """A descriptor to decode: ``wgmma``/``umma`` 64-bit smem descriptors, ``idesc`` 32-bit
    instruction descriptors of a kind, ``tma`` 128-byte tensor maps (hex); field-built
    (mostly valid), mutated (bit flips) or random."""
    from nvatom.descriptors import idesc_rules, umma, wgmma

    kind = r.choice(["wgmma", "umma", "idesc", "tma", "tma"])
    how = r.choice(["fields", "fields", "flip", "random"])
    if kind == "tma":
        corpus = tma_corpus()
        if how == "random":
            data = bytes(r.getrandbits(8) for _ in range(r.choice([128, 128, 127, 129, 0, 64])))
        else:
            data = bytearray(bytes.fromhex(r.choice(corpus)))
            if how == "flip":
                for _ in range(r.randint(1, 4)):
                    i = r.randint(0, len(data) - 1)
                    data[i] = data[i] ^ (1 << r.randint(0, 7)) if _p(r, 0.7) else r.getrandbits(8)
            data = bytes(data)
        return {"kind": "tma", "hex": data.hex() if _p(r, 0.5) else data.hex().upper()}
    if kind == "idesc":
        sub = r.choice(sorted(idesc_rules.IDESC_TABLES)) if _p(r, 0.95) else r.choice(
            ["", "f8", "kind::f16", "F16", "mxf8"])
        table = idesc_rules.IDESC_TABLES.get(sub, idesc_rules.IDESC_FIELDS)
        word = (_field_word(r, table, idesc_rules.IDESC_VALUES.get(sub))
                if how != "random" else r.getrandbits(32))
        if how == "flip":
            word = _flip(r, word, 32)
        if _p(r, 0.02):
            word = int_value(r)
        return {"kind": "idesc", "mma_kind": sub, "word": word}
    if kind == "wgmma":
        word = _field_word(r, wgmma.FIELDS) if how != "random" else r.getrandbits(64)
    else:
        allowed = {"fixed": [umma.SMEM_FIXED_VALUE]}
        word = _field_word(r, umma.SMEM_FIELDS, allowed) if how != "random" else r.getrandbits(64)
    if how == "flip":
        word = _flip(r, word, 64)
    if _p(r, 0.02):
        word = int_value(r)
    return {"kind": kind, "word": word}


# --------------------------------------------------------------------------- CLI argv

TARGETS = ["sm_70", "sm_75", "sm_80", "sm_86", "sm_89", "sm_90", "sm_90a", "sm_100a",
           "sm_103a", "sm_120a", "sm_121a", "sm_100", "sm_9", "x", "", "SM_90A", "sm_90a "]
DTYPES = ["bf16", "f16", "f32", "e4m3", "e5m2", "e2m1", "s8", "u8", "tf32", "f64", "x", ""]
MMA_KINDS = ["f16", "tf32", "f8f6f4", "i8", "mxf8f6f4", "mxf4", "mxf4nvf4", "x"]
WGMMA_LAYOUT = "Sw<3,4,3> o 0 o ((8,8),(64,1)):((64,512),(1,0))"


def _shape_list(r: Rng) -> str:
    return ",".join(number_text(r) if _p(r, 0.3) else str(r.choice([1, 8, 64, 128, 256, 1000]))
                    for _ in range(r.randint(0, 6)))


def _atom_or_name(r: Rng) -> str:
    return r.choice(real_atom_names()) if _p(r, 0.6) else atom_name(r)


def argv_case(r: Rng) -> list[str]:
    """An ``nvatom`` argument vector: a sub-command with options from its grammar, then
    sometimes damaged (an argument dropped, duplicated, swapped or replaced).  Output files
    are never named (no ``-o``/``--svg``/``--emit``): the campaign must not write files."""
    lay = layout_text(r)
    num = number_text(r)
    # `atoms` lists (and checks) every form: about 0.5 s a run, so it comes rarely
    cmd = "atoms" if _p(r, 0.01) else r.choice(
        ["layout", "layout", "layout", "banks", "desc", "desc", "desc", "emit", "emit", "frag",
         "targets", "gemm", "other"])
    argv: list[str]
    if cmd == "layout":
        argv = ["layout", lay]
        for _ in range(r.randint(0, 3)):
            op = r.choice(["--complement", "--upcast", "--downcast", "--coalesce",
                           "--right-inverse", "--filter", "--left-inverse", "--table",
                           "--compose", "--logical-divide", "--zipped-divide",
                           "--logical-product", "--blocked-product", "--eval"])
            argv.append(op)
            if op in ("--complement", "--upcast", "--downcast", "--eval"):
                argv.append(number_text(r))
            elif op in ("--compose", "--logical-divide", "--zipped-divide",
                        "--logical-product", "--blocked-product"):
                argv.append(layout_text(r))
    elif cmd == "banks":
        argv = ["banks", r.choice(["ldsm.x4", "ldsm.x2.trans", "ldsm.x1", "lds.32", "lds.128",
                                   "sts.128", "stsm.x4", "x", _atom_or_name(r)]),
                "--smem", lay if _p(r, 0.6) else "Sw<3,4,3> o 0 o (16,64):(64,1)"]
        for _ in range(r.randint(0, 2)):
            argv += [r.choice(["--base", "--element-bits", "--detail"]), num]
    elif cmd == "desc":
        kind = r.choice(["wgmma", "umma", "idesc", "tma", "x"])
        action = r.choice(["encode", "decode", "decode", "x"])
        argv = ["desc", kind, action]
        if action == "decode":
            if kind == "tma":
                argv.append(r.choice(tma_corpus()) if _p(r, 0.5) else
                            bytes(r.getrandbits(8) for _ in range(128)).hex())
            else:
                argv.append(hex(descriptor_case(r).get("word", 0)) if _p(r, 0.7) else num)
            if kind == "idesc" or _p(r, 0.1):
                argv += ["--mma-kind", r.choice(MMA_KINDS)]
        else:
            if kind == "tma":
                argv += ["--shape", _shape_list(r), "--box", _shape_list(r), "--no-driver"]
                for _ in range(r.randint(0, 3)):
                    opt = r.choice(["--dtype", "--strides", "--elem-strides", "--interleave",
                                    "--swizzle", "--l2", "--oob", "--address", "--im2col",
                                    "--lower", "--upper"])
                    argv += [opt, r.choice(DTYPES) if opt == "--dtype" else
                             (_shape_list(r) if _p(r, 0.5) else num)]
            elif kind == "idesc":
                argv += ["--atom", _atom_or_name(r)]
                for _ in range(r.randint(0, 2)):
                    argv.append(r.choice(["--negate-a", "--negate-b", "--saturate"]))
                if _p(r, 0.3):
                    argv += ["--mma-kind", r.choice(MMA_KINDS)]
            else:
                argv += ["--layout", lay if _p(r, 0.6) else WGMMA_LAYOUT]
                for _ in range(r.randint(0, 2)):
                    opt = r.choice(["--element-bits", "--major", "--start"])
                    argv += [opt, r.choice(["K", "MN", "k"]) if opt == "--major" else num]
    elif cmd == "emit":
        argv = ["emit", _atom_or_name(r), "-t", r.choice(TARGETS)]
        x = r.random()
        if x < 0.3:
            argv.append("--asm-template")
        elif x < 0.45:
            argv.append("--kernel")
        if _p(r, 0.2):
            argv += ["--selector", num]
    elif cmd == "frag":
        argv = ["frag", _atom_or_name(r), "--no-table" if _p(r, 0.7) else "--operand"]
        if argv[-1] == "--operand":
            argv.append(r.choice(["A", "B", "C", "D", "SFA", "SFB", "a", "x"]))
        elif _p(r, 0.3):
            argv += ["--operand", r.choice(["A", "B", "C", "D", "SFA", "SFB"])]
    elif cmd == "atoms":
        argv = ["atoms"]
        for _ in range(r.randint(0, 3)):
            opt = r.choice(["--target", "--a", "--b", "--acc", "--copy", "--wgmma", "--json",
                            "--sm120", "--sf", "--umma", "--kind", "--forms"])
            argv.append(opt)
            if opt == "--target":
                argv.append(r.choice(TARGETS))
            elif opt in ("--a", "--b", "--acc", "--sf"):
                argv.append(r.choice(DTYPES))
            elif opt == "--kind":
                argv.append(r.choice(MMA_KINDS))
    elif cmd == "targets":
        argv = ["targets", *r.choice([[], ["--features"], ["--json"], ["--x"]])]
    elif cmd == "gemm":
        argv = ["gemm"]
        for opt in ("--m", "--n", "--k"):
            if _p(r, 0.9):
                argv += [opt, r.choice([num, "128", "64", "256", "0", "-64"])]
        for _ in range(r.randint(0, 3)):
            opt = r.choice(["--dtype", "--out-dtype", "--a-major", "--b-major", "--target",
                            "--iters", "--run"])
            argv.append(opt)
            if opt == "--target":
                argv.append(r.choice(TARGETS))
            elif opt in ("--dtype", "--out-dtype"):
                argv.append(r.choice(DTYPES))
            elif opt in ("--a-major", "--b-major"):
                argv.append(r.choice(["K", "M", "N", "x"]))
            elif opt == "--iters":
                argv.append(num)
    else:
        argv = r.choice([[], ["--version"], ["x"], ["layout"], ["emit"], ["desc"],
                         ["verify", "/nonexistent.mlir"], ["compile", ""],
                         ["verify", str(IR_DIR)], ["ptxas", "/nonexistent.ptx", "-t", "sm_80"],
                         ["compile", str(IR_DIR / "mma_sm80.mlir"), "-t", "bogus"],
                         ["verify", str(IR_DIR / "mma_sm80.mlir"), "--target", "sm_91"],
                         ["frag"], ["-h"], ["layout", "--help"], ["--x"]])
    if _p(r, 0.15) and argv:  # damage the vector
        i = r.randint(0, len(argv) - 1)
        kind = r.randint(0, 3)
        if kind == 0:
            del argv[i]
        elif kind == 1:
            argv.insert(i, argv[i])
        elif kind == 2:
            j = r.randint(0, len(argv) - 1)
            argv[i], argv[j] = argv[j], argv[i]
        else:
            argv[i] = r.choice(["--", "-", "--x", "", "-t", "--json", "\x00", num, lay])
    return argv


# --------------------------------------------------------------------------- IR modules

IR_TOKENS = ["%", "%a", "%0", "<", ">", "(", ")", "{", "}", ":", ",", "@", "...", "=", "!",
             "#", '"', "0", "1", "-1", "7", "4294967296", "99999999999999999999999", "1@0",
             "Sw<3,4,3> o 0 o ", "!cute.layout<", "!cute.memref<f32, rmem", "rmem", "smem",
             "gmem", "tmem", "e4m3", "f16", "i32", "index", "cute_nvgpu.atom.mma",
             "func.return", "scf.for", "\n", " ", "\u00e9", "\x00", "// -----",
             "{num_multicast = 0}", "!cute_nvgpu.sm90.mma<", "!cute_nvgpu.SM120.mma_bs<", "K",
             "MN"]


@functools.cache
def ir_seeds() -> tuple[str, ...]:
    """The cases of every tests/ir/*.mlir file (split at ``// -----``)."""
    from nvatom.ir import checker

    return tuple(c.text.lstrip("\n") for p in sorted(IR_DIR.glob("*.mlir"))
                 for c in checker.split_cases(p.read_text()))


@functools.cache
def _ir_op_lines() -> tuple[str, ...]:
    return tuple(line for s in ir_seeds() for line in s.splitlines()
                 if line.startswith("  ") and not line.strip().startswith("//"))


def mutate_ir(r: Rng, text: str, rounds: int | None = None) -> str:
    """Delete, insert a token, replace, duplicate a line or swap two lines; 1-3 times."""
    for _ in range(rounds if rounds is not None else r.randint(1, 3)):
        n = len(text)
        i = r.randint(0, max(n - 1, 0))
        kind = r.choice(["delete", "insert", "replace", "duplicate", "swap"])
        if kind == "delete":
            j = min(n, i + r.randint(1, 12))
            text = text[:i] + text[j:]
        elif kind == "insert":
            text = text[:i] + r.choice(IR_TOKENS) + text[i:]
        elif kind == "replace":
            j = min(n, i + r.randint(1, 4))
            text = text[:i] + r.choice(IR_TOKENS) + text[j:]
        elif kind == "duplicate":
            lines = text.split("\n")
            k = r.randint(0, len(lines) - 1)
            lines.insert(k, lines[k])
            text = "\n".join(lines)
        else:
            lines = text.split("\n")
            a, b = r.randint(0, len(lines) - 1), r.randint(0, len(lines) - 1)
            lines[a], lines[b] = lines[b], lines[a]
            text = "\n".join(lines)
    return text


def mutated_ir(r: Rng) -> str:
    """A tests/ir case with 1-3 mutations (tests/ir/test_ir_fuzz.py's generator)."""
    return mutate_ir(r, r.choice(ir_seeds()))


IR_ELEMS = ["f16", "bf16", "f32", "e4m3", "e5m2", "i8", "i32", "tf32", "f64", "e2m1", "x"]
IR_SPACES = ["gmem", "smem", "rmem", "tmem", "x"]


def generated_ir(r: Rng) -> str:
    """A module made from the grammar: a kernel taking pointers, views of them with layouts
    from the layout grammar, and operation lines drawn from the tests/ir corpus (spliced),
    sometimes mutated."""
    nptr = r.randint(0, 3)
    elems = [r.choice(IR_ELEMS) for _ in range(nptr)]
    params = ", ".join(f"%p{i}: !cute.ptr<{e}, {r.choice(IR_SPACES)}>"
                       for i, e in enumerate(elems))
    lines = [f"func.func @{r.choice(['k', 'kernel', 'f', 'a.b', '0k'])}({params}) {{"]
    for i, e in enumerate(elems):
        if _p(r, 0.8):
            lines.append(f"  %v{i} = cute.make_view %p{i} : !cute.memref<{e}, "
                         f"{r.choice(IR_SPACES)}, {layout_text(r)}>")
    lines += [r.choice(_ir_op_lines()) for _ in range(r.randint(0, 6))]
    if _p(r, 0.9):
        lines.append("  func.return")
    lines.append("}")
    text = "\n".join(lines) + "\n"
    return mutate_ir(r, text, 1) if _p(r, 0.3) else text


def spliced_ir(r: Rng) -> str:
    """One corpus case with some of its operation lines replaced by lines of others."""
    lines = r.choice(ir_seeds()).split("\n")
    pool = _ir_op_lines()
    for _ in range(r.randint(1, 3)):
        i = r.randint(0, len(lines) - 1)
        if lines[i].startswith("  "):
            lines[i] = r.choice(pool)
        else:
            lines.insert(i, r.choice(pool))
    return "\n".join(lines)


def ir_case(r: Rng) -> dict[str, Any]:
    """An IR module (mutated 60%, spliced 20%, generated 20%) and the target to verify for."""
    x = r.random()
    text = mutated_ir(r) if x < 0.6 else spliced_ir(r) if x < 0.8 else generated_ir(r)
    return {"text": text,
            "target": r.choice([None, None, None, "sm_80", "sm_90a", "sm_100a", "sm_120a"])}


# --------------------------------------------------------------------------- Python APIs
#
# The ``api`` target calls nvatom's Python entry points (``nvatom.gemm`` with its fused
# epilogue, ``nvatom.grouped_gemm``, ``nvatom.attention`` and ``attention.check_inputs``,
# the torch operators' implementations and fakes of ``nvatom.torch_ops``, the kernel layer's
# ``gmem_tensor`` / ``smem_tensor`` / ``fragment`` and ``EpilogueSpec``) with duck-typed
# tensors.  A case is JSON (so a failure is saved and replayed like any other input): values
# are plain JSON, or one-key objects that :func:`materialize` turns into Python objects
# (``{"tensor": ...}`` a :class:`FakeTensor`, ``{"np": "float32", "v": 2.0}`` a numpy
# scalar, ``{"nparray": ...}``, ``{"tuple": [...]}``, ``{"layout": "(4,8):(8,1)"}``, ...).


@dataclasses.dataclass(frozen=True)
class FakeDevice:
    """``torch.device``'s duck surface: ``.type`` and ``.index``."""

    type: str = "cuda"
    index: int | None = 0

    def __str__(self) -> str:
        return self.type if self.index is None else f"{self.type}:{self.index}"


#: Bytes per element of the torch dtypes the fakes know (others: 4).
_ELEMENT_SIZE = {"bfloat16": 2, "float16": 2, "float32": 4, "float64": 8, "float8_e4m3fn": 1,
                 "float8_e5m2": 1, "int8": 1, "uint8": 1, "int32": 4, "int64": 8, "bool": 1,
                 "int16": 2, "complex64": 8}


@dataclasses.dataclass(eq=False)
class FakeTensor:
    """The duck-typed surface of a torch tensor that nvatom's checks and launch paths read
    (``shape``, ``stride()``, ``dtype`` as ``"torch.<name>"``, ``data_ptr()``, ``device``,
    ``dim()``, ``b[g]``, ``tolist()``, ``new_empty``/``copy_``/``zero_``/``as_strided``):
    the stand-in the CPU tests and the ``api`` fuzz target use where torch is absent."""

    shape: tuple[Any, ...]
    strides: tuple[Any, ...]
    dtype: Any = "torch.bfloat16"
    ptr: int = 0x7F0000000000
    device: Any = dataclasses.field(default_factory=FakeDevice)
    values: list[Any] | None = None  # what tolist() gives (offsets)

    def stride(self, i: int | None = None) -> Any:
        return self.strides if i is None else self.strides[i]

    def data_ptr(self) -> int:
        return self.ptr

    def dim(self) -> int:
        return len(self.shape)

    def element_size(self) -> int:
        return _ELEMENT_SIZE.get(str(self.dtype).removeprefix("torch."), 4)

    def numel(self) -> int:
        n = 1
        for s in self.shape:
            n *= int(s)
        return n

    def is_contiguous(self) -> bool:
        want, step = [], 1
        for s in reversed(self.shape):
            want.insert(0, step)
            step *= int(s)
        return all(int(s) <= 1 or st == w for s, st, w in
                   zip(self.shape, self.strides, want, strict=False))

    @property
    def is_cuda(self) -> bool:
        return getattr(self.device, "type", None) == "cuda"

    @property
    def T(self) -> FakeTensor:  # torch's name
        return dataclasses.replace(self, shape=self.shape[::-1], strides=self.strides[::-1])

    def view(self, *shape: Any) -> FakeTensor:
        """torch's ``view`` of a contiguous tensor (any other raises as torch does)."""
        shape = tuple(int(x) for x in (shape[0] if len(shape) == 1 and isinstance(
            shape[0], (tuple, list)) else shape))
        if -1 in shape:
            rest = 1
            for x in shape:
                rest *= x if x != -1 else 1
            shape = tuple(self.numel() // max(rest, 1) if x == -1 else x for x in shape)
        n = 1
        for x in shape:
            n *= x
        if n != self.numel() or not self.is_contiguous():
            raise RuntimeError(f"view size {shape} is not compatible with input tensor's size "
                               f"{self.shape} and stride {self.strides}")
        strides, step = [], 1
        for x in reversed(shape):
            strides.insert(0, step)
            step *= x
        return dataclasses.replace(self, shape=shape, strides=tuple(strides))

    def __getitem__(self, i: Any) -> FakeTensor:
        if isinstance(i, slice):  # x[start:] along dimension 0
            start, stop, _ = i.indices(int(self.shape[0]))
            return dataclasses.replace(
                self, shape=(max(stop - start, 0), *self.shape[1:]),
                ptr=self.ptr + start * int(self.strides[0]) * self.element_size())
        if not self.shape or not -int(self.shape[0]) <= i < int(self.shape[0]):
            raise IndexError(f"index {i} is out of bounds for dimension 0 with size "
                             f"{self.shape[0] if self.shape else 0}")
        i %= int(self.shape[0])
        return dataclasses.replace(self, shape=self.shape[1:], strides=self.strides[1:],
                                   ptr=self.ptr + i * int(self.strides[0]) * self.element_size())

    def __len__(self) -> int:
        return int(self.shape[0]) if self.shape else 0

    def tolist(self) -> list[Any]:
        if self.values is not None:
            return list(self.values)
        return [0] * (int(self.shape[0]) if len(self.shape) == 1 else 0)

    def new_empty(self, shape: Sequence[int], dtype: Any = None) -> FakeTensor:
        return contiguous(tuple(shape), dtype or self.dtype, self.device)

    def copy_(self, other: Any) -> FakeTensor:
        return self

    def zero_(self) -> FakeTensor:
        return self

    def float(self) -> FakeTensor:
        return dataclasses.replace(self, dtype="torch.float32")

    def as_strided(self, shape: Sequence[int], strides: Sequence[int],
                   offset: int = 0) -> FakeTensor:
        return dataclasses.replace(self, shape=tuple(shape), strides=tuple(strides),
                                   ptr=self.ptr + offset * self.element_size())

    def to(self, *args: Any, **kwargs: Any) -> FakeTensor:
        return self


_NEXT_PTR = [0x7E0000000000]


def contiguous(shape: Any, dtype: Any = "torch.bfloat16", device: Any = None) -> FakeTensor:
    """A fresh contiguous fake (``torch.empty``'s), 256-byte aligned as torch's allocator."""
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    if any(int(s) < 0 for s in shape):
        raise RuntimeError(f"Trying to create tensor with negative dimension: {shape}")
    strides, step = [], 1
    for s in reversed(shape):
        strides.insert(0, step)
        step *= max(int(s), 1)
    _NEXT_PTR[0] += 1 << 20
    return FakeTensor(tuple(shape), tuple(strides), dtype, _NEXT_PTR[0],
                      device if device is not None else FakeDevice())


def materialize(spec: Any) -> Any:
    """A case's value as the Python object it describes (see the section comment)."""
    if isinstance(spec, list):
        return [materialize(x) for x in spec]
    if not isinstance(spec, dict):
        return spec
    (kind, v), = spec.items() if len(spec) == 1 else (("", spec),)
    if kind == "tensor":
        dev = v.get("device", ["cuda", 0])
        return FakeTensor(tuple(v["shape"]), tuple(v["strides"]), v.get("dtype"), v["ptr"],
                          FakeDevice(dev[0], dev[1]) if isinstance(dev, list) else dev,
                          v.get("values"))
    if kind == "np":  # a value outside the type's range wraps, as numpy's casts do
        import numpy as np

        with np.errstate(all="ignore"):
            return np.array(v["v"], dtype=object).astype(np.float64).astype(v["type"])[()] \
                if not isinstance(v["v"], bool) else getattr(np, v["type"])(v["v"])
    if kind == "nparray":
        import numpy as np

        with np.errstate(all="ignore"):
            return np.array(v["v"], dtype=np.float64).astype(v["type"]).reshape(
                v.get("shape", -1))
    if kind == "tuple":
        return tuple(materialize(x) for x in v)
    if kind == "object":
        return object()
    if kind == "layout":
        from nvatom.layout import parse_layout

        return parse_layout(v)
    if kind == "mma_form":
        from nvatom.atoms.registry import mma_form

        return mma_form(v)
    if kind == "tiled_mma":
        from nvatom.atoms.registry import mma_form
        from nvatom.atoms.tiled_mma import make_tiled_mma

        return make_tiled_mma(mma_form(v["form"]), tuple(v["atoms"]),
                              warp_order=v.get("order", "interleaved"))
    return {k: materialize(x) for k, x in spec.items()}


TORCH_DTYPE_NAMES = ("bfloat16", "float16", "float32", "float8_e4m3fn", "float8_e5m2")
ODD_DTYPES = ("float64", "int32", "int64", "uint8", "bool", "complex64", "float8_e4m3fnuz",
              "", "bf16", "torch.bfloat16")
_SIZES = (0, 1, 2, 3, 7, 8, 16, 24, 40, 63, 64, 96, 100, 128, 129, 192, 256, 384, 1000)
_HUGE = (2**31 - 1, 2**31, 2**32, 2**40, 2**63 - 1, 2**64, 10**30)
_BASE = 0x7F0000000000


def _size(r: Rng) -> int:
    x = r.random()
    if x < 0.85:
        return r.choice(_SIZES)
    if x < 0.95:
        return r.randint(0, 5000)
    return r.choice(_HUGE)


def _ptr(r: Rng) -> int:
    x = r.random()
    if x < 0.8:
        return _BASE + (r.randint(0, 1 << 16) << 8)
    if x < 0.95:
        return _BASE + r.choice([1, 2, 4, 8, 16, 32, 64, 128]) * r.randint(1, 1000)
    return r.choice([0, 1, 2**48, 2**64 - 16, 2**64, 2**70])


def _device(r: Rng) -> list[Any]:
    x = r.random()
    if x < 0.92:
        return ["cuda", r.choice([0, 0, 0, None])]
    return r.choice([["cpu", None], ["cuda", 1], ["meta", None], ["cuda", -1], ["mps", 0]])


def tensor_spec(r: Rng, shape: Sequence[int], dtype: str, major: str = "row",
                ld_pad: int = 0) -> dict[str, Any]:
    """A matrix (or N-D tensor) of ``shape``: row-major (last dim contiguous, rows padded
    by ``ld_pad`` elements) or column-major (2-D, ``x.t()`` of a row-major one)."""
    shape = list(shape)
    if major == "col" and len(shape) >= 2:
        rows, cols = shape[-2], shape[-1]
        ld = rows + ld_pad
        strides = [1, ld]
        outer = cols * ld
    else:
        strides, step = [], 1
        for i, s in enumerate(reversed(shape)):
            strides.insert(0, step)
            step *= max(s, 1) + (ld_pad if i == 0 else 0)
        outer = step
    if len(shape) > 2 and major == "col":
        for s in reversed(shape[:-2]):
            strides.insert(0, outer)
            outer *= max(s, 1)
    return {"tensor": {"shape": shape, "strides": strides, "dtype": f"torch.{dtype}",
                       "ptr": _ptr(r), "device": ["cuda", 0]}}


def _number(r: Rng, usual: Sequence[Any] = (1.0, 0.5, 2.0, 2)) -> Any:
    """A Python or numpy number: usually plausible, sometimes at or past a limit."""
    x = r.random()
    if x < 0.6:
        return r.choice(list(usual))
    if x < 0.75:
        return {"np": {"type": r.choice(["float32", "float64", "float16", "int32", "int64",
                                         "uint8", "bool_"]),
                       "v": r.choice([1.0, 0.5, 3.0, -1.0, 0.0, 1e30, 7e38, 70000.0, 2.0])}}
    if x < 0.95:
        return r.choice([0, 0.0, -1.0, -0.0, 1e-45, 3.4e38, 3.5e38, 1.7e308, float("nan"),
                         float("inf"), -float("inf"), 10**400, -(10**400), 2**64, 2**31,
                         True, False, 1e-300, 5e-324])
    return weird_value(r)


def weird_value(r: Rng) -> Any:
    """Something of the wrong kind for almost any argument."""
    return r.choice([None, True, 0, -1, 1.5, float("nan"), 10**400, "x", "", "bf16",
                     [], [1, 2], {"tuple": [1, 2]}, {"object": 1},
                     {"np": {"type": "float32", "v": 2.0}}, {"np": {"type": "int64", "v": 3}},
                     {"nparray": {"type": "float32", "v": [1.0]}},
                     {"tensor": {"shape": [], "strides": [], "dtype": "torch.float32",
                                 "ptr": _BASE, "device": ["cuda", 0]}}])


def mutate_tensor(r: Rng, spec: dict[str, Any]) -> dict[str, Any]:
    """One field of a tensor spec changed: a size, a stride, the dtype, the address, the
    device, or a dimension added or dropped."""
    t = json.loads(json.dumps(spec["tensor"]))
    what = r.choice(["shape", "strides", "dtype", "ptr", "device", "rank"])
    if what in ("shape", "strides") and t[what]:
        i = r.randint(0, len(t[what]) - 1)
        t[what][i] = (r.choice([0, 1, 2, 3, 7, 9, 2**31, 2**32 + 1, 2**63, 10**20])
                      if _p(r, 0.7) else r.randint(0, 4096))
    elif what == "dtype":
        t["dtype"] = (f"torch.{r.choice(TORCH_DTYPE_NAMES + ODD_DTYPES)}" if _p(r, 0.9)
                      else r.choice([None, 5, "torch."]))
    elif what == "ptr":
        t["ptr"] = t["ptr"] + r.choice([1, 2, 4, 8, 3, 17]) if _p(r, 0.8) else _ptr(r)
    elif what == "device":
        t["device"] = r.choice([["cpu", None], ["cuda", 1], ["meta", None], ["cuda", None],
                                "cuda:0", None])
    else:
        if t["shape"] and _p(r, 0.5):
            t["shape"].pop()
            t["strides"].pop()
        else:
            t["shape"].append(r.choice([1, 2, 8]))
            t["strides"].append(1)
    return {"tensor": t}


def _mutate_call(r: Rng, args: list[Any], kw: dict[str, Any], rounds: int) -> None:
    """``rounds`` changes to a call: a tensor argument's field, or an argument replaced by a
    weird value or a number."""
    for _ in range(rounds):
        slots = [("a", i) for i in range(len(args))] + [("k", k) for k in kw]
        if not slots:
            return
        where, key = r.choice(slots)
        cur = args[key] if where == "a" else kw[key]
        if isinstance(cur, dict) and "tensor" in cur and _p(r, 0.75):
            new = mutate_tensor(r, cur)
        elif _p(r, 0.5):
            new = weird_value(r)
        else:
            new = _number(r)
        if where == "a":
            args[key] = new
        else:
            kw[key] = new


_FP8 = ("float8_e4m3fn", "float8_e5m2")


def _scales(r: Rng, m: int, n: int, k: int, groups: int | None = None
            ) -> tuple[Any, Any]:
    """FP8 scales of a mode: per-tensor (numbers or one-element tensors), row-wise or block
    (``groups``: grouped_gemm's shapes)."""
    def f32(shape: Sequence[int], major: str = "row") -> dict[str, Any]:
        return tensor_spec(r, shape, "float32", major)

    mode = r.choice(["tensor", "tensor", "row", "block"])
    kb, nb = -(-k // 128), -(-n // 128)
    if mode == "tensor":
        one = [lambda: _number(r), lambda: f32([1]), lambda: f32([]), lambda: f32([1, 1])]
        sa = r.choice(one)()
        sb = f32([groups]) if groups and _p(r, 0.3) else r.choice(one)()
    elif mode == "row":
        sa = f32([m, 1] if groups is None or _p(r, 0.5) else [m])
        sb = f32([1, n] if groups is None else [groups, n])
    else:
        sa = f32([m, kb])
        sb = f32([kb, nb], "col") if groups is None else f32([groups, kb, nb], "col")
    return sa, sb


def _epilogue(r: Rng, m: int, n: int, out_dtype: str) -> dict[str, Any]:
    kw: dict[str, Any] = {}
    if _p(r, 0.4):
        kind = r.choice(["col", "col1", "row"])
        shape = {"col": [n], "col1": [1, n], "row": [m, 1]}[kind]
        kw["bias"] = tensor_spec(r, shape, r.choice([out_dtype, "float32"]))
    if _p(r, 0.4):
        kw["activation"] = r.choice(["relu", "gelu", "gelu_tanh", "silu", None, "tanh",
                                     "RELU", "", 5])
    if _p(r, 0.3):
        kw["alpha"] = _number(r)
    if _p(r, 0.3):
        kw["c"] = tensor_spec(r, [m, n], out_dtype, ld_pad=r.choice([0, 0, 2, 1]))
        if _p(r, 0.5):
            kw["beta"] = _number(r, (1.0, 0.0, 0.5))
    elif _p(r, 0.05):
        kw["beta"] = _number(r)
    if _p(r, 0.25):
        kw["residual"] = tensor_spec(r, [m, n], out_dtype)
    return kw


def _gemm_call(r: Rng) -> tuple[list[Any], dict[str, Any], str]:
    """``gemm(a, b, out, **kw)``'s arguments for a plausible problem; the output dtype."""
    m, n, k = _size(r), _size(r), _size(r)
    if _p(r, 0.7):
        n += n % 2
    fp8 = _p(r, 0.3)
    dt = r.choice(_FP8) if fp8 else r.choice(["bfloat16", "float16", "bfloat16"])
    bdt = r.choice(_FP8) if fp8 else dt
    a = tensor_spec(r, [m, k], dt, "row" if fp8 or _p(r, 0.8) else "col",
                    ld_pad=r.choice([0, 0, 0, 8, 1]))
    b = tensor_spec(r, [k, n], bdt, "col" if fp8 or _p(r, 0.3) else "row",
                    ld_pad=r.choice([0, 0, 0, 8, 1]))
    out_dt = "bfloat16" if fp8 else r.choice([dt, dt, "float32"])
    args: list[Any] = [a, b]
    kw: dict[str, Any] = {}
    if _p(r, 0.5):
        args.append(tensor_spec(r, [m, n], out_dt, ld_pad=r.choice([0, 0, 8, 1])))
    else:
        out_dt = "bfloat16" if fp8 else dt
    if fp8:
        kw["scale_a"], kw["scale_b"] = _scales(r, m, n, k)
        if _p(r, 0.2):
            kw["fast_accum"] = r.choice([True, False, 1, None])
    if _p(r, 0.4):
        kw.update(_epilogue(r, m, n, out_dt))
    if _p(r, 0.1):
        kw["provider"] = r.choice(["sm90", "sm80", "sm100", "", None])
    if _p(r, 0.03):
        kw["acc"] = r.choice(["f32", "f16", "bf16", None])
    return args, kw, out_dt


def _offsets(r: Rng, total: int, groups: int) -> Any:
    """Cumulative row ends of ``groups`` groups: sorted cuts (odd, empty groups), then as a
    list, tuple, numpy array or tensor, sometimes with odd elements."""
    cuts = sorted(r.randint(0, max(total, 0)) for _ in range(max(groups - 1, 0)))
    ends: list[Any] = [*cuts, total if _p(r, 0.8) else r.randint(0, max(total, 0))][:groups]
    if _p(r, 0.15) and ends:
        i = r.randint(0, len(ends) - 1)
        ends[i] = r.choice([-1, total + 1, 2**31, 2**63, 10**30, 1.0, float("nan"), True,
                            None, "8", {"np": {"type": "int32", "v": 4}},
                            {"np": {"type": "int64", "v": total}},
                            {"np": {"type": "float32", "v": 4.0}}])
    x = r.random()
    if x < 0.45:
        return ends
    if x < 0.55:
        return {"tuple": ends}
    plain = [e for e in ends if type(e) is int and abs(e) < 2**62]
    if len(plain) != len(ends):
        return ends
    if x < 0.8:
        return {"nparray": {"type": r.choice(["int32", "int64", "int32", "uint32", "float32",
                                              "int8"]), "v": plain}}
    t = tensor_spec(r, [len(plain)], r.choice(["int32", "int32", "int64", "float32"]))
    t["tensor"]["values"] = plain
    t["tensor"]["device"] = r.choice([["cpu", None], ["cpu", None], ["cuda", 0], ["cuda", 0],
                                      ["cuda", None], ["cuda", 1]])
    if _p(r, 0.1):
        t["tensor"]["shape"] = [1, len(plain)]
        t["tensor"]["strides"] = [len(plain), 1]
    return t


def _grouped_call(r: Rng) -> tuple[list[Any], dict[str, Any]]:
    groups = r.choice([1, 2, 3, 4, 8, 0, 16, 1])
    total, n, k = _size(r), _size(r), _size(r)
    if _p(r, 0.7):
        n, k = n - n % 8, k - k % 8
    fp8 = _p(r, 0.3)
    dt = r.choice(_FP8) if fp8 else r.choice(["bfloat16", "float16"])
    a = tensor_spec(r, [total, k], dt, ld_pad=r.choice([0, 0, 0, 8, 3]))
    b = tensor_spec(r, [groups, k, n], r.choice(_FP8) if fp8 else dt,
                    "col" if fp8 or _p(r, 0.3) else "row")
    args: list[Any] = [a, b, _offsets(r, total, groups)]
    kw: dict[str, Any] = {}
    if _p(r, 0.5):
        kw["out"] = tensor_spec(r, [total, n], "bfloat16" if fp8 else
                                r.choice([dt, dt, "float32"]))
    if fp8:
        kw["scale_a"], kw["scale_b"] = _scales(r, total, n, k, groups)
        if _p(r, 0.2):
            kw["fast_accum"] = r.choice([True, False, 1])
    if _p(r, 0.15):
        kw["status"] = _status(r)
    return args, kw


def _status(r: Rng) -> Any:
    """``status=``: an int32 CUDA word, or something that is not one."""
    t = tensor_spec(r, [r.choice([1, 1, 4, 0])], r.choice(["int32", "int32", "int64",
                                                           "float32"]))
    if _p(r, 0.2):
        t["tensor"]["device"] = r.choice([["cpu", None], ["cuda", 1], ["cuda", None]])
    return t if _p(r, 0.85) else r.choice([None, [0], 0, "status"])


def _masked_call(r: Rng) -> tuple[list[Any], dict[str, Any]]:
    """``grouped_gemm_masked(a (G, M_max, K), b (G, K, N), counts, out, ...)``."""
    groups = r.choice([1, 2, 3, 4, 8, 0, 16])
    m_max, n, k = _size(r), _size(r), _size(r)
    if _p(r, 0.7):
        n, k = n - n % 16, k - k % 16
    fp8 = _p(r, 0.3)
    dt = r.choice(_FP8) if fp8 else r.choice(["bfloat16", "float16"])
    a = tensor_spec(r, [groups, m_max, k], dt, ld_pad=r.choice([0, 0, 8, 3]))
    b = tensor_spec(r, [groups, k, n], r.choice(_FP8) if fp8 else dt,
                    "col" if fp8 or _p(r, 0.3) else "row")
    counts: Any = [r.randint(0, max(m_max, 0)) for _ in range(groups)]
    if _p(r, 0.15) and counts:
        counts[r.randint(0, len(counts) - 1)] = r.choice([-1, m_max + 1, 2**40, 1.5, None])
    if _p(r, 0.6) and all(type(c) is int and abs(c) < 2**31 for c in counts):
        t = tensor_spec(r, [len(counts)], r.choice(["int32", "int32", "int32", "int64"]))
        t["tensor"]["values"] = counts
        t["tensor"]["device"] = r.choice([["cuda", 0], ["cuda", 0], ["cpu", None]])
        counts = t
    kw: dict[str, Any] = {}
    if _p(r, 0.5):
        kw["out"] = tensor_spec(r, [groups, m_max, n], "bfloat16" if fp8 else
                                r.choice([dt, dt, "float32"]))
    if fp8:
        kw["scale_a"], kw["scale_b"] = _scales(r, groups * m_max, n, k, groups)
        if _p(r, 0.5) and isinstance(kw["scale_a"], dict) and "tensor" in kw["scale_a"]:
            sa = kw["scale_a"]["tensor"]  # the masked form: (G, M_max[, Kb])
            if sa["shape"] and sa["shape"][0] == groups * m_max:
                sa["shape"] = [groups, m_max, *sa["shape"][1:]]
                sa["strides"] = [m_max * (sa["strides"][0] or 1), *sa["strides"]]
        if _p(r, 0.2):
            kw["fast_accum"] = r.choice([True, False, 1])
    if _p(r, 0.2):
        kw["status"] = _status(r)
    return [a, b, counts], kw


#: a user epilogue's instructions: (opcode, operand roles); roles name registers the hook
#: made ("f", "u", "p"), x/row/col, a parameter, or an immediate
_HOOK_OPS = [("max.f32", "xxf"), ("mul.f32", "xxf"), ("add.f32", "fxf"), ("fma.rn.f32", "xxff"),
             ("mul.f32", "ff1"), ("setp.lt.f32", "pxf"), ("selp.f32", "xxfp"),
             ("cvt.rn.f32.u32", "fr"), ("cvt.rn.f32.u32", "fc"), ("mov.f32", "f1"),
             ("ex2.approx.ftz.f32", "xx"), ("rcp.approx.ftz.f32", "ff"), ("abs.f32", "xx"),
             ("neg.f32", "ff"), ("add.u32", "urc"), ("setp.lt.u32", "prc"),
             ("mov.f32", "xs"), ("mul.f32", "xxl"), ("max.u32", "uur"), ("mov.b32", "xu"),
             ("mul.f32", "xx1"),
             # refused: memory, control, barriers, wrong types, nonsense
             ("ld.global.f32", "fu"), ("st.shared.f32", "ux"), ("bar.sync", "1"), ("bra", "L"),
             ("mul.f32", "ru1"), ("add.f64", "xxx"), ("cvt.f32.f16", "xx"), ("mov.f32", "r1"),
             ("garbage", "x"), ("mul.f32.f32", "xxx"), ("mul.f32", "xx"), ("fma.rn.f32", "xxx1"),
             ("max.f32", "x?x")]


_HOOK_LEGAL = 21  # the legal forms lead _HOOK_OPS


def _hook_call(r: Rng) -> dict[str, Any]:
    """``UserEpilogue(name, fn, scalars=, tensors=)`` with ``fn`` a random program of
    :data:`_HOOK_OPS` (mostly legal, sometimes refused forms, guards, a raise or a return)."""
    legal = _HOOK_OPS[:_HOOK_LEGAL]
    n = r.choice([1, 2, 3, 5, 8]) if _p(r, 0.95) else r.choice([0, 200])
    prog = [list(r.choice(legal if _p(r, 0.97) else _HOOK_OPS)) for _ in range(n)]
    if prog and _p(r, 0.9):  # registers written before they are read, x written last
        prog = [["mov.f32", "f1"], ["add.u32", "urc"], ["setp.lt.u32", "prc"], *prog,
                ["mul.f32", "xx1"]]
    for step in prog:
        if _p(r, 0.02):
            step.append(r.choice(["p", "!p", "%p9"]))  # a guard: refused
    kw: dict[str, Any] = {}
    uses = {role for _, roles, *_ in prog for role in roles}
    if "s" in uses or _p(r, 0.2):
        kw["scalars"] = ["s"] if _p(r, 0.9) else r.choice(
            [["s", "t"], [], ["s", "s"], ["1s"], "s"])
    if "l" in uses or _p(r, 0.2):
        kw["tensors"] = r.choice([{"l": ["row", "f32"]}, {"l": ["col", "bf16"]},
                                  {"l": ["col", "f16"]}]) if _p(r, 0.9) else r.choice(
            [{"l": ["diag", "f32"]}, {"l": ["row", "e4m3"]}, {"s": ["row", "f32"]},
             {"l": "row"}])
    end = r.choice(["none"] * 30 + ["raise", "return"])
    name = r.choice(["h", "relu2", "my_hook", "hook_2"]) if _p(r, 0.9) else r.choice(
        ["", "1h", "h" * 40, "h-1", "\u00e9"])
    return {"name": name, "program": prog, "end": end, "kw": kw}


def _attention_call(r: Rng) -> tuple[list[Any], dict[str, Any]]:
    b = r.choice([1, 1, 2, 3, 0, 4])
    h = r.choice([1, 2, 4, 8, 3, 16])
    hkv = r.choice([h, h, 1, 2, max(h // 2, 1), 0, 3])
    sq, sk = _size(r), _size(r)
    d = r.choice([64, 128, 256]) if _p(r, 0.8) else r.choice([32, 96, 0, 512, 1])
    dt = r.choice(["bfloat16", "float16"]) if _p(r, 0.85) else r.choice(["float32",
                                                                          "float8_e4m3fn"])

    def qkv(heads: int, seq: int) -> dict[str, Any]:
        t = tensor_spec(r, [b, heads, seq, d], dt)
        if _p(r, 0.3):  # x.transpose(1, 2) of a (B, S, H, D) tensor
            t["tensor"]["strides"] = [seq * heads * d, d, heads * d, 1]
        return t

    args = [qkv(h, sq), qkv(hkv, sk), qkv(hkv, sk)]
    kw: dict[str, Any] = {}
    if _p(r, 0.5):
        kw["causal"] = r.choice([True, False, True, 1, None, "yes"])
    if _p(r, 0.5):
        kw["scale"] = _number(r, (None, 0.125, 0.088, 1.0, 1e-3))
    if _p(r, 0.2):
        kw["softcap"] = _number(r, (0.0, 30.0, 50.0, 1.5, 0))
    if _p(r, 0.2):
        kw["window"] = r.choice([(-1, -1), (64, 0), (-1, 16), (0, 0), (128, 128), [8, 8],
                                 (-2, 0), (1, 2, 3), 5, (2**31, 0), (True, 0), None])
    return args, kw


_KERNEL_TARGETS = ["sm_80", "sm_80", "sm_90a", "sm_86", "sm_100a", "sm_70", "sm_120a", "x"]
_MMA_NAMES = ["sm80.mma.m16n8k16.f32.bf16.bf16.f32", "sm80.mma.m16n8k16.f32.f16.f16.f32",
              "sm80.mma.m16n8k8.f32.bf16.bf16.f32", "sm80.mma.m16n8k32.s32.s8.s8.s32",
              "sm80.mma.m16n8k8.f32.tf32.tf32.f32", "sm70.mma.m8n8k4.row.col.f32.f16.f16.f32",
              "sm89.mma.m16n8k32.f32.e4m3.e4m3.f32", "sm80.mma.m8n8k4.f64.f64.f64.f64",
              "sm80.mma.m16n8k16.f16.f16.f16.f16", "no.such.mma"]
_KDTYPES = ["bf16", "f16", "f32", "e4m3", "e5m2", "s8", "u8", "tf32", "f64", "e2m1", "b1",
            "s32", "x", "", "BF16"]


def _kernel_layout(r: Rng, huge: float = 0.1) -> dict[str, Any]:
    """A layout that parses: a 1-3 mode shape with plausible strides, sometimes large
    (``huge``: the chance of a mode of 2^12 to 2^40 elements), sometimes swizzled."""
    rank = r.randint(1, 3)
    shape = [r.choice([1, 2, 4, 8, 16, 32, 64, 128, 3]) if not _p(r, huge)
             else r.choice([1 << 12, 1 << 20, 1 << 31, 1 << 40]) for _ in range(rank)]
    strides, step = [], 1
    for s in reversed(shape):
        strides.insert(0, step if _p(r, 0.85) else r.choice([0, 1, 2, 1 << 20, 1 << 40]))
        step *= s
    text = f"({','.join(map(str, shape))}):({','.join(map(str, strides))})"
    if _p(r, 0.3):
        text = f"Sw<{r.randint(0, 3)},{r.randint(3, 4)},3> o 0 o {text}"
    return {"layout": text}


def _kernel_call(r: Rng) -> tuple[str, list[Any], dict[str, Any]]:
    fn = r.choice(["gmem_tensor", "smem_tensor", "fragment", "fragment"])
    name = r.choice(["A", "sA", "t", "", "a b", "1x", "\u00e9", "x" * 300, "%r", "A.B"])
    dtype: Any = r.choice(_KDTYPES) if _p(r, 0.95) else r.choice([None, 5])
    if fn == "gmem_tensor":
        rank = r.randint(0, 4)
        shape = [_size(r) for _ in range(rank)]
        strides = [r.choice([1, 8, 64, 0, 2**40]) for _ in range(rank if _p(r, 0.9)
                                                                 else r.randint(0, 4))]
        return fn, [name, dtype, shape, strides], {}
    if fn == "smem_tensor":
        # huge layouts rarely: smem_tensor evaluates every element before its 48 KB check
        # (an open finding, docs/reliability.md), so each costs the per-input time limit
        return fn, [name, dtype, _kernel_layout(r, huge=0.001)], {}
    form = r.choice(_MMA_NAMES)
    mma: Any = ({"mma_form": form} if _p(r, 0.5) else
                {"tiled_mma": {"form": form, "atoms": r.choice([[1, 1, 1], [2, 2, 1],
                                                                [4, 1, 1], [2, 2, 2]]),
                               "order": r.choice(["interleaved", "blocked"])}})
    kw: dict[str, Any] = {}
    if _p(r, 0.3):
        kw["dtype"] = dtype
    if _p(r, 0.3):  # huge rarely: fragment allocates a register per value (open finding)
        kw["layout"] = _kernel_layout(r, huge=0.003)
    if _p(r, 0.3):
        kw["zero"] = r.choice([True, False])
    if _p(r, 0.2):
        kw["name"] = name
    return fn, [mma, r.choice(["A", "B", "C", "D", "a", "c", "x", "", "AB"])], kw


def _epilogue_spec_call(r: Rng) -> dict[str, Any]:
    kw: dict[str, Any] = {}
    for name in ("alpha", "c", "residual"):
        if _p(r, 0.5):
            kw[name] = r.choice([True, False, True, 1, 0, None, "yes"])
    if _p(r, 0.6):
        kw["bias"] = r.choice(["col", "row", "", "COL", "both", None, 1])
    if _p(r, 0.6):
        kw["bias_dtype"] = r.choice(["bf16", "f16", "f32", "", "e4m3", "f64", None])
    if _p(r, 0.5):
        kw["activation"] = r.choice(["relu", "gelu", "gelu_tanh", "silu", "", "tanh", None])
    return kw


#: The ``api`` target's calls, and the share of the inputs each gets.
API_CALLS = {"gemm": 0.28, "grouped_gemm": 0.18, "grouped_gemm_masked": 0.05,
             "attention": 0.1, "check_inputs": 0.05, "explain": 0.04, "torch_ops": 0.1,
             "kernel_tensor": 0.12, "epilogue_spec": 0.05, "user_epilogue": 0.03}
_TORCH_OPS = ("_gemm_impl", "_gemm_fake", "_gemm_out_impl", "_gemm_out_fake",
              "_gemm_epilogue_impl", "_gemm_epilogue_fake", "gemm_output_spec",
              "epilogue_output_spec", "attention_output_spec")


def api_case(r: Rng) -> dict[str, Any]:
    """One call of a Python API: ``{"fn", "args", "kw", "capability"}`` (``capability``: what
    the fake ``torch.cuda.get_device_capability`` answers), mutated (1-2 changes) half the
    time."""
    x, acc, which = r.random(), 0.0, "gemm"
    for name, w in API_CALLS.items():
        acc += w
        if x < acc:
            which = name
            break
    kw: dict[str, Any]
    case: dict[str, Any] = {"capability": [9, 0] if _p(r, 0.85) else
                            r.choice([[8, 0], [8, 9], [10, 0], [12, 0], [9, 0]])}
    if which == "gemm":
        args, kw, _ = _gemm_call(r)
        fn = "gemm"
    elif which == "explain":
        args, kw, _ = _gemm_call(r)
        for name in ("bias", "activation", "alpha", "beta", "c", "residual"):
            kw.pop(name, None)
        if _p(r, 0.5):
            kw["capability"] = r.choice([{"tuple": [9, 0]}, {"tuple": [8, 0]},
                                         {"tuple": [12, 0]}, {"tuple": [10, 0]}])
        fn = "explain"
    elif which == "grouped_gemm":
        args, kw = _grouped_call(r)
        fn = "grouped_gemm"
    elif which == "grouped_gemm_masked":
        args, kw = _masked_call(r)
        fn = "grouped_gemm_masked"
    elif which == "user_epilogue":
        args, kw = [_hook_call(r)], {}
        fn = "UserEpilogue"
    elif which in ("attention", "check_inputs"):
        args, kw = _attention_call(r)
        fn = which
    elif which == "torch_ops":
        fn = r.choice(_TORCH_OPS)
        gargs, gkw, _ = _gemm_call(r)
        a, b = gargs[:2]
        sa, sb = gkw.get("scale_a"), gkw.get("scale_b")
        if any(v is not None and not (isinstance(v, dict) and "tensor" in v) for v in (sa, sb)):
            sa, sb = tensor_spec(r, [1], "float32"), tensor_spec(r, [1], "float32")  # Tensor?
        kw = {}
        if fn == "attention_output_spec":
            aargs, _ = _attention_call(r)
            args = [t["tensor"]["shape"] if isinstance(t, dict) and "tensor" in t else t
                    for t in aargs]
        elif fn in ("gemm_output_spec", "epilogue_output_spec"):
            ta, tb = a["tensor"], b["tensor"]
            args = [ta["shape"], ta["dtype"], tb["shape"], tb["dtype"]]
            kw["scaled"] = sa is not None
            if fn == "epilogue_output_spec":
                for name in ("bias", "c", "residual"):
                    if name in gkw and _p(r, 0.8):
                        kw[f"{name}_shape"] = gkw[name]["tensor"]["shape"]
        elif fn.startswith("_gemm_out"):
            out = gargs[2] if len(gargs) > 2 else tensor_spec(r, [1, 1], "bfloat16")
            args = [a, b, out, sa, sb]
        else:
            args = [a, b, sa, sb]
            if fn.startswith("_gemm_epilogue"):
                args += [gkw.get("bias"), gkw.get("c"), gkw.get("residual")]
                for name in ("activation", "alpha", "beta"):  # as the schema types them
                    v = gkw.get(name)
                    if name == "activation" and (v is None or isinstance(v, str)):
                        kw[name] = v
                    elif name != "activation" and type(v) is float:
                        kw[name] = v
        if _p(r, 0.4) and not fn.startswith(("_gemm_out", "attention_output_spec")):
            kw["out_dtype"] = r.choice(["torch.bfloat16", "torch.float16", "torch.float32",
                                        "float32", "torch.float8_e4m3fn", "torch.int8"])
        fn = f"torch_ops.{fn}"
    elif which == "kernel_tensor":
        name, args, kw = _kernel_call(r)
        case["target"] = r.choice(_KERNEL_TARGETS)
        fn = f"kernels.tensor.{name}"
    else:
        args, kw = [], _epilogue_spec_call(r)
        fn = "EpilogueSpec"
    if fn.startswith("torch_ops."):
        # torch's dispatcher enforces the schema: tensors stay tensors, only their fields vary
        for i, v in enumerate(args):
            if isinstance(v, dict) and "tensor" in v and _p(r, 0.2):
                args[i] = mutate_tensor(r, v)
    elif fn in ("gemm", "grouped_gemm", "grouped_gemm_masked", "attention") and _p(r, 0.2):
        # the same call twice, the second changed in one place: the call caches must tell
        then = {"args": json.loads(json.dumps(args)), "kw": json.loads(json.dumps(kw))}
        _mutate_call(r, then["args"], then["kw"], 1)
        case["then"] = then
    elif _p(r, 0.5) and not fn.startswith(("kernels.", "EpilogueSpec", "UserEpilogue")):
        _mutate_call(r, args, kw, r.randint(1, 2))
    case.update({"fn": fn, "args": args, "kw": kw})
    return case



# --------------------------------------------------------------------------- hypothesis


def hypothesis_strategy(gen: Callable[[Any], Any]) -> Any:
    """``gen`` as a hypothesis strategy: hypothesis supplies (and shrinks) the random choices."""
    from hypothesis import strategies as st

    return st.randoms(use_true_random=False).map(gen)


#: Every generator by target name (scripts/fuzz.py's targets).
GENERATORS: dict[str, Callable[[Any], Any]] = {
    "layout": layout_case,
    "swizzle": swizzle_case,
    "atom_name": atom_name,
    "descriptor": descriptor_case,
    "cli": argv_case,
    "ir": ir_case,
    "api": api_case,
}
