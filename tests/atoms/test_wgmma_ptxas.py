"""The SM90 WGMMA table (nvatom.atoms.sm90) is exactly what ptxas accepts, around its edges.

* legal: every form assembles on sm_90a at its min_ptx, with the table's register counts
  and immediates, many forms to a kernel;
* gated: one form per family is rejected on sm_90, sm_100a and sm_120a ("not supported on
  .target"); the mixed s8 x u8 forms are rejected at PTX 8.3 (min_ptx 8.4 is tight);
* illegal: near misses (N = 40 for s8, N = 264, M = 128, s4, b1 .xor.popc, tf32 or FP8 with
  transposes, trans-a in rs, bf16 with f16 accumulation) are rejected and not in the table.

Verdicts per line come from ptxas's line numbers, as in test_mma_ptxas.py; all results are
cached by content (nvatom.runtime.ptxas).
"""

from __future__ import annotations

import functools
from collections import defaultdict
from collections.abc import Sequence

import pytest

from nvatom.atoms.sm90 import FORMS, WgmmaForm
from tests import ptxas_sweep

_PREFIX = {"b32": "r", "f32": "f", "b64": "rd"}
_BATCH = 160  # forms per kernel: big enough for few ptxas calls, small enough for 2 cores


def _vstr(v: tuple[int, int]) -> str:
    return f"{v[0]}.{v[1]}"


@functools.cache
def _vector(ptx_type: str, count: int, first: int) -> str:
    p = _PREFIX[ptx_type]
    regs = [f"%{p}{first + i}" for i in range(count)]
    return regs[0] if count == 1 and ptx_type == "b64" else "{" + ", ".join(regs) + "}"


def line(opcode: str, d: tuple[int, str], a: tuple[int, str], imm: Sequence[int]) -> str:
    """``opcode {D}, A, %rd9, %p0, imm...;`` D from register 0, A (vector or descriptor)
    from 130 (.b32) or %rd8."""
    ops = [_vector(d[1], d[0], 0), _vector(a[1], a[0], 8 if a[1] == "b64" else 130), "%rd9",
           "%p0", *(str(i) for i in imm)]
    return f"{opcode} {', '.join(ops)};"


def form_line(f: WgmmaForm) -> str:
    imm = [1 if i.startswith("scale") else 0 for i in f.immediates]
    return line(f.opcode, (f.registers("D"), f.register_type("D")),
                (f.registers("A"), f.register_type("A")), imm)


def _module(target: str, version: tuple[int, int], body: Sequence[str]) -> tuple[str, int]:
    head = [
        f".version {_vstr(version)}",
        f".target {target}",
        ".address_size 64",
        ".visible .entry sweep()",
        "{",
        ".reg .b32 %r<140>;",
        ".reg .f32 %f<130>;",
        ".reg .b64 %rd<10>;",
        ".reg .pred %p<1>;",
        "wgmma.fence.sync.aligned;",
    ]
    tail = ["wgmma.commit_group.sync.aligned;", "wgmma.wait_group.sync.aligned 0;", "ret;", "}",
            ""]
    return "\n".join([*head, *body, *tail]), len(head) + 1


def verdicts(target: str, version: tuple[int, int], lines: Sequence[str]
             ) -> list[tuple[bool, tuple[str, ...]]]:
    return ptxas_sweep.verdicts(_module, target, version, lines)


# --------------------------------------------------------------------------- legal


def _batches() -> list:
    by: dict[tuple[int, int], list[WgmmaForm]] = defaultdict(list)
    for f in FORMS:
        by[f.ptx_version_for("sm_90a")].append(f)
    out = []
    for v, forms in sorted(by.items()):
        for i in range(0, len(forms), _BATCH):
            out.append(pytest.param(v, forms[i:i + _BATCH], id=f"{_vstr(v)}-{i // _BATCH}"))
    return out


@pytest.mark.parametrize(("version", "forms"), _batches())
def test_every_form_assembles_on_sm90a(version: tuple[int, int], forms: list[WgmmaForm]
                                       ) -> None:
    results = verdicts("sm_90a", version, [form_line(f) for f in forms])
    bad = [f"{f.name}: {'; '.join(m)}" for f, (ok, m) in zip(forms, results, strict=True)
           if not ok]
    assert not bad, f"ptxas rejects table forms at {_vstr(version)}:\n" + "\n".join(bad)


def test_batches_cover_the_table() -> None:
    names = [f.name for p in _batches() for f in p.values[1]]
    assert sorted(names) == sorted(f.name for f in FORMS)
    assert len(set(names)) == len(FORMS)


# --------------------------------------------------------------------------- gating


def _samples() -> list[WgmmaForm]:
    """One form per (family, accumulator, A source), mixed integers included."""
    seen: dict[tuple[str, str, str, bool], WgmmaForm] = {}
    for f in FORMS:
        seen.setdefault((f.family, f.d.name, f.a_source, f.mixed_integer), f)
    return list(seen.values())


@pytest.mark.parametrize("target", ["sm_90", "sm_100a", "sm_120a"])
def test_rejected_on_other_targets(target: str) -> None:
    forms = list(FORMS)  # the full legal table: not one form assembles off sm_90a
    assert not any(f.available_on(target) for f in forms)
    by: dict[tuple[int, int], list[WgmmaForm]] = defaultdict(list)
    for f in forms:
        by[f.ptx_version_for(target)].append(f)
    for v, group in by.items():
        results = verdicts(target, v, [form_line(f) for f in group])
        for f, (ok, msgs) in zip(group, results, strict=True):
            assert not ok, f"{f.name} assembles on {target}"
            assert any("not supported on .target" in m for m in msgs), (f.name, msgs)


def test_mixed_integer_min_ptx_is_tight() -> None:
    mixed = [f for f in FORMS if f.mixed_integer]
    assert mixed and all(f.min_ptx == (8, 4) for f in mixed)
    assert all(f.min_ptx == (8, 0) for f in FORMS if not f.mixed_integer)
    sample = [f for f in mixed if f.n in (8, 256)]
    results = verdicts("sm_90a", (8, 3), [form_line(f) for f in sample])
    for f, (ok, msgs) in zip(sample, results, strict=True):
        assert not ok, f"{f.name} assembles at 8.3"
        assert any("requires PTX ISA .version 8.4" in m for m in msgs), (f.name, msgs)


# --------------------------------------------------------------------------- near misses

_OP = "wgmma.mma_async.sync.aligned"
_F32_64 = (64, "f32")
_DESC = (1, "b64")
_RS = (4, "b32")

# (why, opcode, D, A, immediates, the A source the table would hold it under)
NEAR_MISSES = [
    ("s8 N=40", f"{_OP}.m64n40k32.s32.s8.s8", (20, "b32"), _DESC, (), "ss"),
    ("s8 N=248", f"{_OP}.m64n248k32.s32.s8.s8", (124, "b32"), _DESC, (), "ss"),
    ("b1 N=40", f"{_OP}.m64n40k256.s32.b1.b1.and.popc", (20, "b32"), _DESC, (), "ss"),
    ("f16 N=264", f"{_OP}.m64n264k16.f32.f16.f16", (132, "f32"), _DESC, (1, 1, 0, 0), "ss"),
    ("M=128", f"{_OP}.m128n64k16.f32.f16.f16", _F32_64, _DESC, (1, 1, 0, 0), "ss"),
    ("f16 K=32", f"{_OP}.m64n128k32.f32.f16.f16", _F32_64, _DESC, (1, 1, 0, 0), "ss"),
    ("s4", f"{_OP}.m64n64k64.s32.s4.s4", (32, "b32"), _DESC, (), "ss"),
    ("u4", f"{_OP}.m64n64k64.s32.u4.u4", (32, "b32"), _DESC, (), "ss"),
    ("b1 xor.popc", f"{_OP}.m64n64k256.s32.b1.b1.xor.popc", (32, "b32"), _DESC, (), "ss"),
    ("tf32 with trans", f"{_OP}.m64n128k8.f32.tf32.tf32", _F32_64, _DESC, (1, 1, 0, 0), "ss"),
    ("e4m3 with trans", f"{_OP}.m64n128k32.f32.e4m3.e4m3", _F32_64, _DESC, (1, 1, 0, 0), "ss"),
    ("rs with trans-a", f"{_OP}.m64n128k16.f32.f16.f16", _F32_64, _RS, (1, 1, 0, 0), "rs"),
    ("s8 with scales", f"{_OP}.m64n64k32.s32.s8.s8", (32, "b32"), _DESC, (1, 1), "ss"),
    ("bf16 into f16", f"{_OP}.m64n128k16.f16.bf16.bf16", (32, "b32"), _DESC, (1, 1, 0, 0), "ss"),
    ("tf32 into f16", f"{_OP}.m64n128k8.f16.tf32.tf32", (32, "b32"), _DESC, (1, 1), "ss"),
    ("f16 x bf16", f"{_OP}.m64n128k16.f32.f16.bf16", _F32_64, _DESC, (1, 1, 0, 0), "ss"),
    ("e4m3 x f16", f"{_OP}.m64n128k32.f32.e4m3.f16", _F32_64, _DESC, (1, 1), "ss"),
]

_TABLE = {(f.opcode, f.a_source, len(f.immediates)) for f in FORMS}


def test_near_misses_are_rejected_and_not_in_the_table() -> None:
    lines = [line(op, d, a, imm) for _, op, d, a, imm, _ in NEAR_MISSES]
    results = verdicts("sm_90a", (8, 4), lines)
    accepted = [why for (why, *_), (ok, _) in zip(NEAR_MISSES, results, strict=True) if ok]
    assert not accepted, f"ptxas accepts near misses: {accepted}"
    inside = [why for why, op, _, _, imm, src in NEAR_MISSES if (op, src, len(imm)) in _TABLE]
    assert not inside, f"the table holds near misses: {inside}"


def test_near_misses_fail_for_their_reason_not_their_registers() -> None:
    """The immediates misses differ from a table form only there: dropping the extra
    immediates makes each assemble, so the immediates are what ptxas refuses."""
    fixed = {"tf32 with trans": 2, "e4m3 with trans": 2, "rs with trans-a": 3,
             "s8 with scales": 0}
    rows = [r for r in NEAR_MISSES if r[0] in fixed]
    lines = [line(op, d, a, imm[:fixed[why]]) for why, op, d, a, imm, _ in rows]
    results = verdicts("sm_90a", (8, 4), lines)
    assert all(ok for ok, _ in results), results


def test_register_counts_are_exact() -> None:
    """ptxas drops the (unused) results, but it checks operands first: one D register fewer,
    or two A registers in rs, is an argument-size error for every sampled family."""
    forms = _samples()
    lines = []
    for f in forms:
        imm = [1 if i.startswith("scale") else 0 for i in f.immediates]
        d = (f.registers("D") - 1, f.register_type("D"))
        lines.append(line(f.opcode, d, (f.registers("A"), f.register_type("A")), imm))
        if f.a_source == "rs":
            lines.append(line(f.opcode, (f.registers("D"), f.register_type("D")), (2, "b32"),
                              imm))
    results = verdicts("sm_90a", (8, 4), lines)
    accepted = [ln for ln, (ok, _) in zip(lines, results, strict=True) if ok]
    assert not accepted, "ptxas accepts wrong register counts:\n" + "\n".join(accepted)
    assert all(any("mismatch" in m for m in msgs) for _, msgs in results), results
