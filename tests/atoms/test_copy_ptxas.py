"""The copy-atom tables are exactly what ptxas accepts.

* legal: every atom's instruction assembles on its first target at its minimum ``.version``,
  and on sm_90a where it is available there;
* tight: one PTX version below ``min_ptx`` (where the target still accepts that version)
  ptxas asks for a newer ``.version``;
* availability: on every target, at the newest ``.version`` its ptxas knows, each atom's
  instruction assembles exactly when ``atom.available_on(target)`` says so, and the verifier's
  target check agrees (so what our verifier rejects for a target, ptxas rejects);
* illegal: the near misses around the tables (other ldmatrix/stmatrix shape, count,
  transposition and type combinations with any register count; cp.async sizes 1, 2, 32 and
  ``.cg`` with 4/8; other prefetch sizes; 256-bit ld/st before sm_100) are rejected;
* the ptxas messages docs/copy-atoms.md quotes.

Each sweep puts many instructions in one kernel and reads each line's verdict from the line
numbers of ptxas's errors (:func:`verdicts`); results are cached by content.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import pytest

from nvatom import arch
from nvatom.atoms import copy as C
from nvatom.atoms.interfaces import AtomVerificationError
from nvatom.runtime import ptxas
from tests import ptxas_sweep
from tests.ptxas_sweep import groups, marks, vstr

PTX_VERSIONS = [(6, m) for m in range(6)] + [(7, m) for m in range(9)] + \
    [(8, m) for m in range(9)] + [(9, 0)]
TARGETS = list(arch.TARGETS.values())  # oldest first
ATOMS = C.COPY_ATOMS
_PREFIX = {"b16": "%h", "b32": "%r", "b64": "%rd"}


def _regs(prefix: str, n: int, first: int = 0) -> str:
    names = [f"{prefix}{first + i}" for i in range(n)]
    return "{" + ", ".join(names) + "}"


def lines_of(atom: C.UniversalCopy | C.MatrixCopy | C.SimtAsyncCopy) -> list[str]:
    """The instruction(s) of an atom with registers from the sweep kernel's pools."""
    if isinstance(atom, C.MatrixCopy):
        regs = _regs("%r", atom.registers)
        if atom.op == "ldmatrix":
            return [f"{atom.opcode} {regs}, [%rd0];"]
        return [f"{atom.opcode} [%rd0], {regs};"]
    if isinstance(atom, C.UniversalCopy):
        acc = atom.vector_access
        p = _PREFIX[acc.register_type]
        regs = _regs(p, acc.vec, 8) if acc.vec > 1 else f"{p}8"
        out = []
        for res in C.STATE_SPACE:
            out += [f"{atom.ld_opcode(res)} {regs}, [%rd1];",
                    f"{atom.st_opcode(res)} [%rd1], {regs};"]
        return out
    fill = {"src_size": "%r20", "ignore_src": "%p0", None: None}[atom.fill]
    pol = "%rd9" if atom.cache_policy.cache_hint else None
    return [f"{atom.opcode} {', '.join(atom.operands('%r4', '%rd2', fill, pol))};"]


def _module(target: str, version: tuple[int, int], body: Sequence[str]) -> tuple[str, int]:
    head = [
        f".version {vstr(version)}",
        f".target {target}",
        ".address_size 64",
        ".visible .entry sweep()",
        "{",
        ".reg .b16 %h<64>;",
        ".reg .b32 %r<64>;",
        ".reg .b64 %rd<64>;",
        ".reg .pred %p<4>;",
    ]
    return "\n".join([*head, *body, "ret;", "}", ""]), len(head) + 1


def verdicts(target: str, version: tuple[int, int], lines: Sequence[str]
             ) -> list[tuple[bool, tuple[str, ...]]]:
    return ptxas_sweep.verdicts(_module, target, version, lines)


def _newest(t: arch.Target) -> tuple[int, int]:
    tool = ptxas.find_ptxas(t.name)
    return (9, 0) if tool.version >= (13, 0) else (8, 8)


def first_target(atom: C._CopyBase) -> arch.Target:
    return next(t for t in TARGETS if atom.available_on(t))


def _legal_groups() -> list:
    pairs = []
    for a in ATOMS:
        targets = {first_target(a).name} | ({"sm_90a"} if a.available_on("sm_90a") else set())
        pairs += [((t, a.ptx_version_for(t)), a) for t in sorted(targets)]
    return groups(pairs)


def _below_min_groups() -> list:
    pairs = []
    for a in ATOMS:
        t = first_target(a)
        if a.min_ptx in PTX_VERSIONS:
            below = PTX_VERSIONS[PTX_VERSIONS.index(a.min_ptx) - 1]
            if below >= t.min_ptx:
                pairs.append(((t.name, below), a))
    return groups(pairs)


def _flat_lines(atoms: Sequence[C._CopyBase]) -> tuple[list[str], list[C._CopyBase]]:
    lines, owners = [], []
    for a in atoms:
        for line in lines_of(a):  # type: ignore[arg-type]
            lines.append(line)
            owners.append(a)
    return lines, owners


@pytest.mark.parametrize(("target", "version", "atoms"), _legal_groups())
def test_every_form_assembles(target: str, version: tuple[int, int], atoms: list) -> None:
    lines, owners = _flat_lines(atoms)
    bad = [f"{a.name}: {line}: {'; '.join(m)}"
           for line, a, (ok, m) in zip(lines, owners, verdicts(target, version, lines),
                                       strict=True) if not ok]
    assert not bad, f"ptxas rejects table forms on {target} at {vstr(version)}:\n" + \
        "\n".join(bad)


def test_groups_cover_the_minimum_targets() -> None:
    firsts = {a.mnemonic: set() for a in ATOMS}  # type: dict[str, set[str]]
    for a in ATOMS:
        firsts[a.mnemonic].add(first_target(a).name)
    assert firsts == {"atom.universal_copy": {"sm_70"}, "atom.ldsm": {"sm_75", "sm_100a"},
                      "atom.stsm": {"sm_90", "sm_100a"}, "atom.simt_async_copy": {"sm_80"}}


@pytest.mark.parametrize(("target", "version", "atoms"), _below_min_groups())
def test_min_ptx_is_tight(target: str, version: tuple[int, int], atoms: list) -> None:
    lines, owners = _flat_lines(atoms)
    wrong = [f"{a.name}: " + ("accepted" if ok else "; ".join(m))
             for a, (ok, m) in zip(owners, verdicts(target, version, lines), strict=True)
             if ok or not any("PTX ISA .version" in x for x in m)]
    assert not wrong, f"below min_ptx on {target} at {vstr(version)}:\n" + "\n".join(wrong)


def _verifier_allows(atom: C._CopyBase, t: arch.Target) -> bool:
    try:
        atom._verify_target(t)
    except AtomVerificationError:
        return False
    return True


@pytest.mark.parametrize("t", [pytest.param(t, id=t.name, marks=marks(t)) for t in TARGETS])
def test_availability_matches_ptxas(t: arch.Target) -> None:
    lines, owners = _flat_lines(ATOMS)
    got = verdicts(t.name, _newest(t), lines)
    wrong = []
    for line, a, (ok, msgs) in zip(lines, owners, got, strict=True):
        if ok != a.available_on(t):
            wrong.append(f"{a.name}: table says {a.available_on(t)}, ptxas "
                         f"{'accepts' if ok else 'rejects: ' + '; '.join(msgs)}: {line}")
        if _verifier_allows(a, t) != a.available_on(t):
            wrong.append(f"{a.name}: the verifier disagrees with available_on on {t.name}")
    assert not wrong, "\n".join(wrong)


# --------------------------------------------------------------------------- near misses


def _matrix_candidates() -> list[str]:
    table = {a.opcode for a in C.MATRIX_COPIES}
    out = []
    for op, shape, num, trans, fmt in itertools.product(
            ("ldmatrix", "stmatrix"), ("m8n8", "m16n16", "m8n16", "m16n8"), (1, 2, 4),
            ("", ".trans"), ("b16", "b8", "b8x16.b6x16_p32", "b8x16.b4x16_p64")):
        opcode = f"{op}.sync.aligned.{shape}.x{num}{trans}.shared.{fmt}"
        if opcode in table:
            continue
        for n in (1, 2, 4, 8):
            regs = _regs("%r", n)
            out.append(f"{opcode} {regs}, [%rd0];" if op == "ldmatrix" else
                       f"{opcode} [%rd0], {regs};")
    return out


def _cp_async_candidates() -> list[str]:
    out = []
    for cache, n in itertools.product(("ca", "cg"), (1, 2, 4, 8, 16, 32)):
        if n not in C.CP_ASYNC_SIZES[cache]:
            out.append(f"cp.async.{cache}.shared.global [%r4], [%rd2], {n};")
    for size in (16, 32, 512):
        out.append(f"cp.async.cg.shared.global.L2::{size}B [%r4], [%rd2], 16;")
    out.append("cp.async.ca.shared.local [%r4], [%rd2], 16;")  # global -> shared only
    out.append("cp.async.ca.global.shared [%rd2], [%r4], 16;")
    return out


def _ld_st_candidates() -> list[str]:
    return ["ld.global.v4.b64 {%rd0, %rd1, %rd2, %rd3}, [%rd8];",  # 256 bits: sm_100+ only
            # (ld.*.v8.b16 is not here: ptxas 13.0 dies with SIGSEGV on it, docs/copy-atoms.md)
            "st.local.v4.b64 [%rd8], {%rd0, %rd1, %rd2, %rd3};",
            "ld.global.v2.b8 %h0, [%rd8];"]


def test_near_misses_are_rejected() -> None:
    cands = _matrix_candidates() + _cp_async_candidates()
    for target in ("sm_100a", "sm_120a"):
        accepted = [line for line, (ok, _) in zip(cands, verdicts(target, (9, 0), cands),
                                                   strict=True) if ok]
        assert not accepted, f"{target} accepts forms outside the tables:\n" + \
            "\n".join(accepted)
    ld = _ld_st_candidates()
    accepted = [line for line, (ok, _) in zip(ld, verdicts("sm_90a", (9, 0), ld), strict=True)
                if ok]
    assert not accepted, accepted


def test_ptxas_accepts_counts_the_isa_does_not_have() -> None:
    """ptxas 13.0 lets ``.x8`` ... ``.x128`` through for m8n8 ldmatrix/stmatrix with one to
    four registers, although the PTX ISA defines only .x1/.x2/.x4 (its .num table); the
    tables follow the ISA.  If this starts failing, ptxas has become strict: good news."""
    lines = [f"ldmatrix.sync.aligned.m8n8.x{n}.shared.b16 {_regs('%r', r)}, [%rd0];"
             for n in (8, 16, 128) for r in (1, 2, 4)]
    lines.append("stmatrix.sync.aligned.m8n8.x8.shared.b16 [%rd0], {%r0};")
    assert all(ok for ok, _ in verdicts("sm_90a", (8, 0), lines))
    ((ok, msgs),) = verdicts("sm_90a", (8, 0),
                             ["ldmatrix.sync.aligned.m8n8.x8.shared.b16 "
                              "{%r0, %r1, %r2, %r3, %r4, %r5, %r6, %r7}, [%rd0];"])
    assert not ok and "Illegal vector size: 8" in msgs


# --------------------------------------------------------------------------- quoted messages


@pytest.mark.parametrize(("target", "version", "line", "message"), [
    ("sm_80", (7, 0), "cp.async.ca.shared.global [%r4], [%rd2], 2;",
     "unexpected value '2', expected to be 4 or 8 or 16"),
    ("sm_80", (7, 0), "cp.async.cg.shared.global [%r4], [%rd2], 4;",
     "unexpected value '4', expected to be 16"),
    ("sm_75", (7, 0), "cp.async.ca.shared.global [%r4], [%rd2], 4;",
     "Feature 'cp.async' requires .target sm_80 or higher"),
    ("sm_89", (7, 8), "stmatrix.sync.aligned.m8n8.x1.shared.b16 [%rd0], {%r0};",
     "Feature 'stmatrix' requires .target sm_90 or higher"),
    ("sm_90a", (8, 0), "ldmatrix.sync.aligned.m16n16.x1.trans.shared.b8 {%r0, %r1}, [%rd0];",
     "Feature '.m16n16' not supported on .target 'sm_90a'"),
    ("sm_100a", (8, 6), "ldmatrix.sync.aligned.m16n16.x1.shared.b8 {%r0, %r1}, [%rd0];",
     "Modifier '.trans' require for instruction ldmatrix with shape '.m16n16'"),
    ("sm_100a", (8, 6), "stmatrix.sync.aligned.m16n8.x1.shared.b8 [%rd0], {%r0};",
     "Modifier '.trans' require for instruction stmatrix with shape '.m16n8'"),
    ("sm_100a", (8, 6),
     "ldmatrix.sync.aligned.m8n16.x1.trans.shared.b8x16.b6x16_p32 {%r0}, [%rd0];",
     "Modifier .trans not allowed for shape '.m8n16'"),
    ("sm_100", (8, 6), "ldmatrix.sync.aligned.m8n16.x1.shared.b8x16.b6x16_p32 {%r0}, [%rd0];",
     "Feature 'ldmatrix with format conversion' not supported on .target 'sm_100'"),
    ("sm_80", (7, 3), "cp.async.cg.shared.global.L2::128B [%r4], [%rd2], 16;",
     "requires PTX ISA .version 7.4"),
    ("sm_80", (7, 4), "cp.async.ca.shared.global [%r4], [%rd2], 4, %p0;",
     "requires PTX ISA .version 7.5"),
    pytest.param("sm_72", (6, 5), "ldmatrix.sync.aligned.m8n8.x1.shared.b16 {%r0}, [%rd0];",
                 "Feature 'ldmatrix' requires .target sm_75 or higher",
                 marks=pytest.mark.sm70),
])
def test_ptxas_messages(target: str, version: tuple[int, int], line: str, message: str) -> None:
    ((ok, msgs),) = verdicts(target, version, [line])
    assert not ok and any(message in m for m in msgs), msgs


def test_layout_gpu_kernels_assemble() -> None:
    """The module tests/gpu/test_copy_layouts_gpu.py runs on the GPU (m8n8 ldmatrix/stmatrix
    and cp.async test kernels), assembled for sm_90a here, where that file is skipped."""
    from nvatom.ptx.copy_emit import build_copy_test_module
    from tests.gpu.test_copy_layouts_gpu import ATOMS as GPU_ATOMS
    from tests.gpu.test_copy_layouts_gpu import layout_test_atoms

    atoms = layout_test_atoms()
    module, names = build_copy_test_module(atoms, "sm_90a")
    text = module.emit()
    asm = ptxas.assemble(text, "sm_90a")
    assert set(asm.kernels) == set(names) and len(names) == len(GPU_ATOMS)
    for a in atoms:
        assert a.opcode in text  # type: ignore[attr-defined]
    for name in names:
        assert asm.kernel(name).spills == 0
