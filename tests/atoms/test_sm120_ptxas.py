"""The SM120 tables (``SM120.mma_bs``, ``sm120.mma``, ``sm120.sparse_mma``) are exactly what
ptxas 13.0 accepts.

* legal: every form assembles, with the table's register counts, on sm_120a, sm_120f,
  sm_121a and sm_121f at the form's version there; it is rejected for its target on sm_100a,
  sm_100f, sm_103a, sm_110a, sm_90a, sm_89 and on plain sm_120 / sm_121; at .version 8.6 on
  sm_120a ptxas asks for 8.7;
* selectors: every (byte-id, thread-id) tuple our forms allow assembles; every value just
  outside is rejected by ptxas ("value 'N' ...") and by our constructor;
* illegal: a sweep over kind x shape x sparsity x scale_vec x stype x A/B types (and, for
  kind::f8f6f4, the accumulator types) finds no accepted spelling outside the tables, and
  our verifier rejects each of those combinations too.

Each sweep is one kernel per (target, version), read line by line (tests/ptxas_sweep.py).
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
from collections.abc import Sequence

import pytest

from nvatom import arch
from nvatom.atoms import sm120
from nvatom.atoms.interfaces import AtomVerificationError
from nvatom.atoms.sm120 import MmaBsForm
from tests import ptxas_sweep
from tests.ptxas_sweep import vstr

LEGAL_TARGETS = ("sm_120a", "sm_120f", "sm_121a", "sm_121f")
REJECTING_TARGETS = (("sm_100a", (8, 8)), ("sm_100f", (8, 8)), ("sm_103a", (8, 8)),
                     ("sm_110a", (9, 0)), ("sm_90a", (8, 8)), ("sm_89", (8, 8)),
                     ("sm_120", (8, 8)), ("sm_121", (8, 8)))
NEWEST = (9, 0)
BS = sm120.mma_bs_forms()
F864 = sm120.f8f6f4_forms()
_PREFIX = {"b32": "r", "f32": "f"}


def _vec(t: str, n: int, first: int) -> str:
    return "{" + ", ".join(f"%{_PREFIX[t]}{first + i}" for i in range(n)) + "}"


def _module(target: str, version: tuple[int, int], body: Sequence[str]) -> tuple[str, int]:
    head = [f".version {vstr(version)}", f".target {target}", ".address_size 64",
            ".visible .entry sweep()", "{", ".reg .b32 %r<256>;", ".reg .f32 %f<256>;"]
    return "\n".join([*head, *body, "ret;", "}", ""]), len(head) + 1


def verdicts(target: str, version: tuple[int, int], lines: Sequence[str]
             ) -> list[tuple[bool, tuple[str, ...]]]:
    return ptxas_sweep.verdicts(_module, target, version, lines)


def _operands(counts: Sequence[tuple[int, str]]) -> list[str]:
    return [_vec(t, n, 64 * i) for i, (n, t) in enumerate(counts)]


def bs_line(form: MmaBsForm) -> str:
    """The instruction with the form's own register counts (D, A, B, C from the table)."""
    d, a, b, c = _operands([(form.registers(op), form.register_type(op)) for op in "DABC"])
    return form.instruction(d, a, b, c, "%r250", "%r251", "%r252" if form.is_sparse else None)


def f864_line(form: object) -> str:
    counts = [(form.registers(op), form.register_type(op)) for op in "DABC"]  # type: ignore
    ops = _operands(counts)
    if form.is_sparse:  # type: ignore[attr-defined]
        ops += ["%r252", "0"]
    return f"{form.opcode} {', '.join(ops)};"  # type: ignore[attr-defined]


ALL_LINES = [(f.name, bs_line(f)) for f in BS] + [(f.name, f864_line(f)) for f in F864]
FORMS_AND_LINES = list(zip([*BS, *F864], ALL_LINES, strict=True))


def test_table_sizes() -> None:
    # mxf8f6f4: 25 pairs dense + 25 sparse; mxf4: 1 + 1; mxf4nvf4: (2X, 4X) x (dense, sparse)
    assert len(BS) == 56
    assert len(F864) == 100  # 25 pairs x (f32, f16) x (dense, sparse)
    assert len({f.name for f in [*BS, *F864]}) == 156


@pytest.mark.parametrize("target", LEGAL_TARGETS)
def test_every_form_assembles(target: str) -> None:
    """Legal where the tables say, rejected for the target where they do not (the sparse
    kind::mxf4* forms: 'a' targets only)."""
    version = (8, 7) if target == "sm_120a" else (8, 8)
    assert all(f.ptx_version_for(target) == version for f, _ in FORMS_AND_LINES)
    results = verdicts(target, version, [line for _, (_, line) in FORMS_AND_LINES])
    bad = [f"{f.name}: {msgs}" for (f, _), (ok, msgs) in zip(FORMS_AND_LINES, results,
                                                              strict=True)
           if ok != f.available_on(target)
           or (not ok and not any("not supported on .target" in m for m in msgs))]
    assert not bad, f"ptxas disagrees with the tables on {target}:\n" + "\n".join(bad)
    unavailable = {f.name for f, _ in FORMS_AND_LINES if not f.available_on(target)}
    expect = set() if target.endswith("a") else {f.name for f in BS if f.is_sparse and
                                                 f.kind_name != "mxf8f6f4"}
    assert unavailable == expect


@pytest.mark.parametrize(("target", "version"), REJECTING_TARGETS,
                         ids=[t for t, _ in REJECTING_TARGETS])
def test_rejected_on_other_targets(target: str, version: tuple[int, int]) -> None:
    """Every block-scaled and every FP6/FP4 form is refused for the target; only the
    e4m3/e5m2 kind::f8f6f4 forms assemble, on the sm_100/sm_110 'a'/'f' targets."""
    results = verdicts(target, version, [line for _, (_, line) in FORMS_AND_LINES])
    for (f, _), (ok, msgs) in zip(FORMS_AND_LINES, results, strict=True):
        assert ok == f.available_on(target), (f.name, target, msgs)
        assert ok or any("not supported on .target" in m for m in msgs), (f.name, msgs)
    fp8_only = {f.name for f in F864 if f.feature == "mma.f8f6f4.fp8"}
    assert len(fp8_only) == 4 * 3  # 4 pairs x (dense f32, dense f16, sparse f32)
    accepted = {f.name for f, _ in FORMS_AND_LINES if f.available_on(target)}
    t = arch.target(target)
    assert accepted == (fp8_only if t.suffix in ("a", "f") and t.cc >= 100 else set())


def test_min_ptx_is_tight() -> None:
    """On sm_120a at .version 8.6 every form with min_ptx 8.7 asks for 8.7; the e4m3/e5m2
    kind::f8f6f4 forms (min_ptx 8.6) assemble at 8.6 on sm_100a."""
    late = [(f, line) for f, (_, line) in FORMS_AND_LINES if f.min_ptx == (8, 7)]
    results = verdicts("sm_120a", (8, 6), [line for _, line in late])
    for (f, _), (ok, msgs) in zip(late, results, strict=True):
        assert not ok and any("requires PTX ISA .version 8.7" in m for m in msgs), \
            (f.name, msgs)
    early = [(f, line) for f, (_, line) in FORMS_AND_LINES if f.min_ptx == (8, 6)]
    assert early and all(ok for ok, _ in verdicts("sm_100a", (8, 6),
                                                   [line for _, line in early]))


# --------------------------------------------------------------------------- selectors


def _representatives() -> list[MmaBsForm]:
    """One form per (kind, scale_vec, sparse): the selector rules depend on nothing else."""
    seen: dict[tuple[str, int, bool], MmaBsForm] = {}
    for f in BS:
        seen.setdefault((f.kind_name, f.scale_vec, f.is_sparse), f)
    return list(seen.values())


def test_every_selector_tuple_assembles() -> None:
    forms = [g for f in _representatives() for g in f.selector_choices()]
    assert len(forms) == 4 * (2 * 4 * 2 * 4) + 4 * (2 * 2 * 2 * 4) + 2 * (1 * 2 * 1 * 4)
    results = verdicts("sm_120a", (8, 7), [bs_line(f) for f in forms])
    bad = [f.name for f, (ok, _) in zip(forms, results, strict=True) if not ok]
    assert not bad, "legal selectors rejected:\n" + "\n".join(bad)


def _raw_line(form: MmaBsForm, sel: tuple[int, int, int, int]) -> str:
    """The form's line with selectors spliced in unchecked (our constructor would refuse)."""
    head, tail = bs_line(form).rsplit(", %r250, ", 1)
    assert tail == "{0, 0}, %r251, {0, 0};", tail
    return head + f", %r250, {{{sel[0]}, {sel[1]}}}, %r251, {{{sel[2]}, {sel[3]}}};"


def _outside() -> list[tuple[MmaBsForm, tuple[int, int, int, int], int]]:
    """(form, selector tuple, offending value) just outside each legal range."""
    out = []
    for f in _representatives():
        bids = sorted(sm120.fragments_sm120.BYTE_IDS[f.scale_vec])
        bad_bids = sorted(set(range(5)) - set(bids))
        for b in bad_bids:
            out.append((f, (b, 0, 0, 0), b))
            out.append((f, (0, 0, b, 0), b))
        out.append((f, (0, 2, 0, 0), 2))
        out.append((f, (0, 0, 0, 4), 4))
    return out


def test_selectors_outside_the_range_are_rejected_by_ptxas_and_us() -> None:
    cases = _outside()
    results = verdicts("sm_120a", (8, 7), [_raw_line(f, sel) for f, sel, _ in cases])
    for (f, sel, value), (ok, msgs) in zip(cases, results, strict=True):
        assert not ok, f"{f.name} with selectors {sel} assembles"
        assert any(f"value '{value}'" in m for m in msgs), (f.name, sel, msgs)
        with pytest.raises(AtomVerificationError, match=r"out of range"):
            f.with_selectors(*sel)


# --------------------------------------------------------------------------- illegal sweep

TYPES = ("e4m3", "e5m2", "e3m2", "e2m3", "e2m1")
KIND_NAMES = ("mxf8f6f4", "mxf4", "mxf4nvf4")
KS = (16, 32, 64, 128)
XS = (1, 2, 4)
STYPES = ("ue8m0", "ue4m3")
SPARSITY = (None, "sp::ordered_metadata", "sp")


@dataclasses.dataclass(frozen=True)
class BsCandidate:
    kind: str
    k: int
    sparse: str | None
    x: int
    stype: str
    a: str
    b: str

    @property
    def opcode(self) -> str:
        head = "mma" if self.sparse is None else f"mma.{self.sparse}"
        return ".".join([head, "sync", "aligned", f"m16n8k{self.k}", "row", "col",
                         f"kind::{self.kind}", "block_scale", f"scale_vec::{self.x}X", "f32",
                         self.a, self.b, "f32", self.stype])

    def line(self, a_regs: int, b_regs: int) -> str:
        d, a, b, c = _operands([(4, "f32"), (a_regs, "b32"), (b_regs, "b32"), (4, "f32")])
        sp = ", %r252, 0" if self.sparse else ""
        return f"{self.opcode} {d}, {a}, {b}, {c}{sp}, %r250, {{0, 0}}, %r251, {{0, 0}};"

    def natural(self) -> str:
        return self.line(4, 4 if self.sparse else 2)

    def verify(self) -> MmaBsForm:
        if self.sparse == "sp":  # our forms spell only .sp::ordered_metadata
            raise AtomVerificationError("plain .sp")
        form = sm120.verify_sm120_mma_bs(
            a_type=self.a, b_type=self.b, byte_id_a=0, byte_id_b=0, sf_type=self.stype,
            shape_MNK=(16, 8, self.k), thread_id_a=0, thread_id_b=0,
            vec_size=max(1, self.k // self.x), kind=self.kind)
        if form.is_sparse != (self.sparse is not None):
            raise AtomVerificationError("sparsity differs")
        return form


@functools.cache
def bs_candidates() -> tuple[BsCandidate, ...]:
    return tuple(BsCandidate(*c) for c in itertools.product(
        KIND_NAMES, KS, SPARSITY, XS, STYPES, TYPES, TYPES))


def _about_operands(msgs: Sequence[str]) -> bool:
    return all("mismatch" in m or "vector size" in m for m in msgs)


def test_block_scaled_sweep_matches_the_table() -> None:
    cands = bs_candidates()
    table = {f.opcode for f in BS}
    results = verdicts("sm_120a", NEWEST, [c.natural() for c in cands])
    accepted = {c.opcode for c, (ok, _) in zip(cands, results, strict=True) if ok}
    retry = [c for c, (ok, msgs) in zip(cands, results, strict=True)
             if not ok and _about_operands(msgs)]
    variants = [(c, a, b) for c in retry for a, b in itertools.product((2, 4), repeat=2)]
    for (c, _, _), (ok, _) in zip(variants, verdicts(
            "sm_120a", NEWEST, [c.line(a, b) for c, a, b in variants]), strict=True):
        if ok:
            accepted.add(c.opcode)
    assert accepted == table, (sorted(accepted - table), sorted(table - accepted))
    # our verifier agrees on every candidate
    for c in cands:
        legal = c.opcode in table
        try:
            c.verify()
            ours = True
        except AtomVerificationError:
            ours = False
        assert ours == legal, c.opcode


@dataclasses.dataclass(frozen=True)
class F864Candidate:
    k: int
    sparse: str | None
    d: str
    c: str
    a: str
    b: str

    @property
    def opcode(self) -> str:
        head = "mma" if self.sparse is None else f"mma.{self.sparse}"
        return ".".join([head, "sync", "aligned", f"m16n8k{self.k}", "row", "col",
                         "kind::f8f6f4", self.d, self.a, self.b, self.c])

    def line(self) -> str:
        def acc(t: str, first: int) -> str:
            return _vec("f32", 4, first) if t == "f32" else _vec("b32", 2, first)

        sp = ", %r252, 0" if self.sparse else ""
        b = _vec("b32", 4 if self.sparse else 2, 128)
        return f"{self.opcode} {acc(self.d, 0)}, {_vec('b32', 4, 64)}, {b}, {acc(self.c, 192)}{sp};"


def test_f8f6f4_sweep_matches_the_table() -> None:
    cands = [F864Candidate(*c) for c in itertools.product(
        (16, 32, 64, 128), SPARSITY, ("f32", "f16"), ("f32", "f16"), TYPES, TYPES)]
    table = {f.opcode for f in F864}
    results = verdicts("sm_120a", NEWEST, [c.line() for c in cands])
    accepted = {c.opcode for c, (ok, _) in zip(cands, results, strict=True) if ok}
    assert accepted == table, (sorted(accepted - table)[:5], sorted(table - accepted)[:5])


def test_sweep_holds_the_errata_neighbours() -> None:
    ops = {c.opcode for c in bs_candidates()}
    # ptxas 13.0 vs the ISA: 4X with ue8m0 (ISA Table 36 has it, ptxas 13.0 not), mxf4 with ue4m3,
    # sparse m16n8k64 for mxf4nvf4, plain .sp with block_scale.
    for spelled in (
        "mma.sync.aligned.m16n8k64.row.col.kind::mxf4nvf4.block_scale.scale_vec::4X.f32.e2m1"
        ".e2m1.f32.ue8m0",
        "mma.sync.aligned.m16n8k64.row.col.kind::mxf4.block_scale.scale_vec::2X.f32.e2m1.e2m1"
        ".f32.ue4m3",
        "mma.sp::ordered_metadata.sync.aligned.m16n8k64.row.col.kind::mxf4nvf4.block_scale"
        ".scale_vec::4X.f32.e2m1.e2m1.f32.ue4m3",
        "mma.sp.sync.aligned.m16n8k64.row.col.kind::mxf8f6f4.block_scale.scale_vec::1X.f32"
        ".e4m3.e4m3.f32.ue8m0",
    ):
        assert spelled in ops
        assert spelled not in {f.opcode for f in BS}
