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
CLI argument vectors (``nvatom --help``'s sub-commands and options), and MLIR modules (the
files under tests/ir, mutated, spliced, or generated around layouts from the layout grammar).

This module imports only the standard library and nvatom (hypothesis only inside
:func:`hypothesis_strategy`), so the campaign script and the CPU tests share it.
"""

from __future__ import annotations

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
}
