"""The tcgen05.mma form table (nvatom.atoms.sm100.FORMS) is exactly what ptxas 13.0 accepts.

* sm_100a: a candidate space generated here, independently of the table (every kind x
  .sp x .ws x cta_group x A source x scale-vector qualifier x .ashift x collector usage x the
  optional operands: 54k lines), is judged by ptxas; the accepted lines must be exactly the
  table's, except the one documented laxity (ptxas accepts scale-input-d on kind::i8, which
  the PTX ISA restricts to f16/tf32: docs/spec-deviations.md);
* every other target: the whole table is judged, and a form assembles iff
  ``available_on`` says so (sm_100, sm_100f, sm_103a/f, sm_110a/f, sm_120a, sm_90a);
* the minimum PTX version of each group of forms is tight (one below is rejected);
* all tcgen05 instructions of one kernel share a cta_group (ptxas rejects a mix).

ptxas verdicts per line come from its line numbers (tests/ptxas_sweep.py).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import pytest

from nvatom.atoms.sm100 import FORMS, Tcgen05MmaForm
from nvatom.runtime import ptxas
from tests import ptxas_sweep

_KINDS = ("f16", "tf32", "f8f6f4", "i8", "mxf8f6f4", "mxf4", "mxf4nvf4")
_BS = {"mxf8f6f4", "mxf4", "mxf4nvf4"}
_SV = (None, "scale_vec::1X", "scale_vec::2X", "scale_vec::4X", "block16", "block32")
_OPS = ("fill", "use", "lastuse", "discard")
_COLL_A = (None, *(f"collector::a::{o}" for o in _OPS))
_COLL_B = (None, *(f"collector::b{i}::{o}" for i in range(4) for o in _OPS))


def _candidate(kind: str, cta: int, sp: bool, ws: bool, src: str, ashift: bool,
               sv: str | None, coll: str | None, dol: bool, sid: bool, zcm: bool) -> str:
    """One candidate line, spelled from the PTX ISA syntax (not from the table)."""
    q = "tcgen05.mma" + (".ws" if ws else "") + (".sp" if sp else "") + \
        f".cta_group::{cta}.kind::{kind}"
    if kind in _BS:
        q += ".block_scale"
    q += "".join(f".{x}" for x in (sv, "ashift" if ashift else None, coll) if x)
    ops = ["[%r0]", "%rd1" if src == "ss" else "[%r1]", "%rd2"]
    ops += ["[%r5]"] if sp else []
    ops.append("%r3")
    ops += ["{" + ", ".join(f"%r{10 + i}" for i in range(4 * cta)) + "}"] if dol else []
    ops += ["[%r6]", "[%r7]"] if kind in _BS else []
    ops.append("%p0")
    ops += ["3"] if sid else []
    ops += ["%rd4"] if zcm else []
    return f"{q} {', '.join(ops)};"


def _candidates(cta: int) -> list[str]:
    out = []
    for kind, sp, ws, src, ashift in itertools.product(_KINDS, (False, True), (False, True),
                                                       ("ss", "ts"), (False, True)):
        for sv, coll, dol, sid, zcm in itertools.product(
                _SV if kind in _BS else (None,), _COLL_B if ws else _COLL_A, (False, True),
                (False, True) if not ws else (False,), (False, True) if ws else (False,)):
            out.append(_candidate(kind, cta, sp, ws, src, ashift, sv, coll, dol, sid, zcm))
    return out


def form_line(f: Tcgen05MmaForm) -> str:
    ops: dict[str, object] = {"d": "%r0", "a": "%rd1" if f.a_source == "ss" else "%r1",
                              "b": "%rd2", "meta": "%r5", "idesc": "%r3",
                              "dol": [f"%r{10 + i}" for i in range(f.disable_output_lane_regs)],
                              "sfa": "%r6", "sfb": "%r7", "enable_input_d": "%p0",
                              "scale_input_d": 3, "zero_column_mask": "%rd4"}
    return f.instruction(**{k: v for k, v in ops.items() if k in f.operands})


def _module(target: str, version: tuple[int, int], body: Sequence[str]) -> tuple[str, int]:
    head = [f".version {version[0]}.{version[1]}", f".target {target}", ".address_size 64",
            ".visible .entry sweep()", "{", ".reg .b32 %r<40>;", ".reg .b64 %rd<10>;",
            ".reg .pred %p<2>;"]
    return "\n".join([*head, *body, "ret;", "}", ""]), len(head) + 1


def _verdicts(target: str, version: tuple[int, int], lines: Sequence[str]) -> list[bool]:
    return [ok for ok, _ in ptxas_sweep.verdicts(_module, target, version, lines)]


def _lax(line: str) -> bool:
    """ptxas 13.0 accepts scale-input-d on kind::i8; the PTX ISA allows it for f16/tf32."""
    return "kind::i8" in line and line.endswith(", %p0, 3;")


@pytest.mark.parametrize("cta", [1, 2])
def test_table_is_what_ptxas_accepts_on_sm100a(cta: int) -> None:
    cands = _candidates(cta)
    accepted = {c for c, ok in zip(cands, _verdicts("sm_100a", (9, 0), cands), strict=True)
                if ok}
    table = {form_line(f) for f in FORMS if f.cta_group == cta}
    assert table <= set(cands), "the test's candidate space must cover the table"
    missing = sorted(table - accepted)
    extra = sorted(x for x in accepted - table if not _lax(x))
    assert not missing, "table forms ptxas rejects:\n" + "\n".join(missing[:20])
    assert not extra, "ptxas accepts forms missing from the table:\n" + "\n".join(extra[:20])
    assert any(_lax(x) for x in accepted), "ptxas no longer accepts i8 scale-input-d: " \
        "drop the laxity note"


_GATE_TARGETS = ["sm_90a", "sm_100", "sm_100f", "sm_103a", "sm_103f", "sm_110a", "sm_110f",
                 "sm_120a"]


@pytest.mark.parametrize("tname", _GATE_TARGETS)
def test_gating_matches_ptxas(tname: str) -> None:
    bad = []
    for cta in (1, 2):
        forms = [f for f in FORMS if f.cta_group == cta]
        # the highest PTX ptxas knows: gating, not versions, is under test here
        got = _verdicts(tname, (9, 0), [form_line(f) for f in forms])
        bad += [f"{f.name}: ptxas {'accepts' if ok else 'rejects'}, table says "
                f"{f.available_on(tname)}" for f, ok in zip(forms, got, strict=True)
                if ok != f.available_on(tname)]
    assert not bad, f"{len(bad)} gating mismatches on {tname}:\n" + "\n".join(bad[:20])


def test_some_forms_on_every_blackwell_datacenter_target() -> None:
    for t in ("sm_100a", "sm_100f", "sm_103a", "sm_103f", "sm_110a", "sm_110f"):
        assert any(f.available_on(t) for f in FORMS)
    for t in ("sm_100", "sm_90a", "sm_120a", "sm_121a"):
        assert not any(f.available_on(t) for f in FORMS)


def _version_groups() -> list[tuple[tuple[int, int], list[Tcgen05MmaForm]]]:
    by: dict[tuple[int, int], list[Tcgen05MmaForm]] = {}
    for f in FORMS:
        if f.cta_group == 1:
            by.setdefault(f.ptx_version_for("sm_100a"), []).append(f)
    return sorted(by.items())


@pytest.mark.parametrize(("version", "forms"), _version_groups(),
                         ids=[f"{v[0]}.{v[1]}" for v, _ in _version_groups()])
def test_min_ptx_is_tight(version: tuple[int, int], forms: list[Tcgen05MmaForm]) -> None:
    lines = [form_line(f) for f in forms]
    assert all(_verdicts("sm_100a", version, lines))
    below = (version[0], version[1] - 1)
    if below >= (8, 6):
        assert not any(_verdicts("sm_100a", below, lines))


def test_one_cta_group_per_kernel() -> None:
    one = form_line(Tcgen05MmaForm("f16", 1))
    two = form_line(Tcgen05MmaForm("f16", 2))
    text, _ = _module("sm_100a", (8, 6), [one, two])
    ok, diags = ptxas.check(text, "sm_100a")
    assert not ok
    assert any("cta_group" in d.message for d in diags)
