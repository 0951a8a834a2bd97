"""The register-MMA tables are exactly what ptxas accepts.

* legal: every form assembles, with the table's register counts and types, on its minimum
  target at its minimum ``.version``, and on sm_90a and sm_120a;
* tight: one PTX version below ``min_ptx`` it is rejected (where the target still accepts
  that version), and on the newest target older than its minimum it is rejected;
* selectors: every legal sparsity selector assembles and the next one is out of range;
* illegal: the candidates around the table (every shape x every type quadruple x
  ``.satfinite`` x bit-op x sparsity, plus each table form with one field changed) that are
  not in the table are rejected on sm_90a, with any register counts.

ptxas reports an error per offending line, so each sweep puts many instructions in one
kernel and reads the verdict of each line from the line numbers of the diagnostics.  ptxas
skips later checks once an earlier pass failed, so lines without an error are assembled
again on their own until the rest assembles: :func:`verdicts`.  Every PTX text is cached by
content (nvatom.runtime.ptxas), so reruns cost no ptxas call.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import math
from collections.abc import Iterable, Sequence

import pytest

from nvatom import arch
from nvatom.atoms import registry
from nvatom.atoms.fragments import FragmentError
from nvatom.atoms.mma import MmaForm
from nvatom.dtypes import dtype
from nvatom.runtime import ptxas
from tests import ptxas_sweep
from tests.ptxas_sweep import groups, vstr

# PTX ISA versions in order (as in tests/test_arch.py); ptxas 13.0 knows up to 9.0.
PTX_VERSIONS = [(6, m) for m in range(6)] + [(7, m) for m in range(9)] + \
    [(8, m) for m in range(9)] + [(9, 0)]
NEWEST_PTX = PTX_VERSIONS[-1]
TARGETS = list(arch.TARGETS.values())  # oldest first
FORMS = registry.mma_forms()
TABLE = {f.opcode for f in FORMS}

_REGS = 256  # of each class, declared once per kernel; instructions reuse them
_PREFIX = {"b32": "r", "f32": "f", "f64": "fd"}


# --------------------------------------------------------------------------- PTX and verdicts


@functools.cache
def _vector(ptx_type: str, count: int, first: int) -> str:
    p = _PREFIX[ptx_type]
    return "{" + ", ".join(f"%{p}{first + i}" for i in range(count)) + "}"


def instruction(opcode: str, counts: Sequence[tuple[int, str]], selector: int | None) -> str:
    """``opcode {D}, {A}, {B}, {C}[, e, f];`` with (count, type) per operand D, A, B, C."""
    ops = [_vector(t, n, 64 * i) for i, (n, t) in enumerate(counts)]
    if selector is not None:
        ops += ["%r255", str(selector)]
    return f"{opcode} {', '.join(ops)};"


def _module(target: str, version: tuple[int, int], body: Sequence[str]) -> tuple[str, int]:
    """PTX text of one kernel holding ``body`` one instruction a line, and the line number of
    the first instruction."""
    head = [
        f".version {vstr(version)}",
        f".target {target}",
        ".address_size 64",
        ".visible .entry sweep()",
        "{",
        f".reg .b32 %r<{_REGS}>;",
        f".reg .f32 %f<{_REGS}>;",
        f".reg .f64 %fd<{_REGS}>;",
    ]
    return "\n".join([*head, *body, "ret;", "}", ""]), len(head) + 1


def verdicts(target: str, version: tuple[int, int], lines: Sequence[str]
             ) -> list[tuple[bool, tuple[str, ...]]]:
    return ptxas_sweep.verdicts(_module, target, version, lines)


def _has_ptxas(target: str) -> bool:
    try:
        ptxas.find_ptxas(target)
    except Exception:
        return False
    return True


# --------------------------------------------------------------------------- the forms


def form_counts(form: MmaForm) -> list[tuple[int, str]]:
    """The table's (register count, register type) of D, A, B and C."""
    return [(form.registers(op), form.register_type(op)) for op in "DABC"]


def form_line(form: MmaForm, selector: int | None = None) -> str:
    sel = (form.selectors[0] if selector is None else selector) if form.is_sparse else None
    return instruction(form.opcode, form_counts(form), sel)


def _fragments_missing(form: MmaForm) -> str | None:
    try:
        form.tv_layout("A")
    except FragmentError as e:
        return f"{form.name}: fragments not available yet ({e})"
    return None


def first_target(form: MmaForm) -> arch.Target:
    return next(t for t in TARGETS if form.available_on(t))


def _older(t: arch.Target) -> arch.Target | None:
    i = TARGETS.index(t)
    return TARGETS[i - 1] if i else None


def _legal_groups() -> list:
    pairs = []
    for f in FORMS:
        targets = {first_target(f).name} | {t for t in ("sm_90a", "sm_120a") if f.available_on(t)}
        pairs += [((t, f.ptx_version_for(t)), f) for t in sorted(targets)]
    return groups(pairs)


def _below_min_groups() -> list:
    pairs = []
    for f in FORMS:
        t = first_target(f)
        below = PTX_VERSIONS[PTX_VERSIONS.index(f.min_ptx) - 1]
        if below >= t.min_ptx:
            pairs.append(((t.name, below), f))
    return groups(pairs)


def _alias_of_older_tier(f: MmaForm) -> bool:
    """An atom of a newer family for an older tier's instruction (sm80.mma.m16n8k8.f16...)."""
    return any(g.opcode == f.opcode and g.tier < f.tier for g in FORMS)


def _older_target_groups() -> list:
    pairs = []
    for f in FORMS:
        older = _older(first_target(f))
        if _alias_of_older_tier(f):
            continue  # ptxas takes it on the older tier's targets, by design
        if older is not None:
            pairs.append(((older.name, max(f.min_ptx, older.min_ptx)), f))
    return groups(pairs)


def _usable(forms: list[MmaForm]) -> list[MmaForm]:
    return [f for f in forms if _fragments_missing(f) is None]


def _skip_missing(forms: list[MmaForm]) -> None:
    reasons = [r for f in forms if (r := _fragments_missing(f))]
    if reasons and len(reasons) == len(forms):
        pytest.skip(reasons[0])


@pytest.mark.parametrize(("target", "version", "forms"), _legal_groups())
def test_every_form_assembles(target: str, version: tuple[int, int], forms: list[MmaForm]
                              ) -> None:
    """One kernel per (target, version) with every form legal there, table register counts."""
    _skip_missing(forms)
    forms = _usable(forms)
    results = verdicts(target, version, [form_line(f) for f in forms])
    rejected = [f"{f.name}: {'; '.join(msgs)}" for f, (ok, msgs) in zip(forms, results,
                                                                          strict=True) if not ok]
    assert not rejected, f"ptxas rejects table forms on {target} at {vstr(version)}:\n" + \
        "\n".join(rejected)


@pytest.mark.parametrize(("target", "version", "forms"), _below_min_groups())
def test_min_ptx_is_tight(target: str, version: tuple[int, int], forms: list[MmaForm]) -> None:
    """One version below each form's min_ptx, on its first target, ptxas asks for more."""
    _skip_missing(forms)
    forms = _usable(forms)
    results = verdicts(target, version, [form_line(f) for f in forms])
    wrong = [
        f"{f.name}: " + ("accepted" if ok else "; ".join(msgs))
        for f, (ok, msgs) in zip(forms, results, strict=True)
        if ok or not any("PTX ISA .version" in m for m in msgs)
    ]
    assert not wrong, f"min_ptx not tight on {target} at {vstr(version)}:\n" + "\n".join(wrong)


@pytest.mark.parametrize(("target", "version", "forms"), _older_target_groups())
def test_rejected_on_the_target_before_the_first(
    target: str, version: tuple[int, int], forms: list[MmaForm]
) -> None:
    """Feature gating: on the newest target older than a form's first, ptxas refuses it."""
    _skip_missing(forms)
    forms = _usable(forms)
    results = verdicts(target, version, [form_line(f) for f in forms])
    accepted = [f.name for f, (ok, _) in zip(forms, results, strict=True) if ok]
    assert not accepted, f"available on {target} already (tables say later): {accepted}"
    for f, (_, msgs) in zip(forms, results, strict=True):
        assert any(".target" in m for m in msgs), (f.name, msgs)


def test_groups_cover_every_form() -> None:
    covered = {f.name for p in _legal_groups() for f in p.values[2]}
    assert covered == {f.name for f in FORMS}
    # Every target older than sm_75 is an sm_70 form's: the gating sweep spares only those.
    gated = {f.name for p in _older_target_groups() for f in p.values[2]}
    assert {f.name for f in FORMS} - gated == {f.name for f in FORMS
                                              if first_target(f).name == "sm_70"
                                              or _alias_of_older_tier(f)}
    assert {f.name for f in FORMS if _alias_of_older_tier(f)} == {
        "sm80.mma.m16n8k8.f16.f16.f16.f16", "sm80.mma.m16n8k8.f32.f16.f16.f32"}


# --------------------------------------------------------------------------- selectors

SPARSE = [f for f in FORMS if f.is_sparse]

# ptxas 13.0 accepts selectors up to these values where the PTX ISA defines only 0..1 (two
# lanes of each group supply the metadata of m16n8k32 16-bit forms); ptxas allows 0..1 for
# the f16-accumulator and bf16 forms of the same shape.  Keyed by atom name.
PTXAS_SELECTOR_MAX_BEYOND_ISA = {
    "sm80.sparse_mma.m16n8k32.f32.f16.f16.f32": 3,
    "sm80.sparse_mma.m16n8k32.ordered_metadata.f32.f16.f16.f32": 3,
}


def _selector_targets() -> list:
    by = sorted({(first_target(f).name, f.ptx_version_for(first_target(f))) for f in SPARSE})
    return [pytest.param(t, v, id=f"{t}-{vstr(v)}") for t, v in by]


@pytest.mark.parametrize(("target", "version"), _selector_targets())
def test_sparsity_selectors(target: str, version: tuple[int, int]) -> None:
    forms = [f for f in SPARSE if (first_target(f).name, f.ptx_version_for(target)) ==
             (target, version)]
    legal = [(f, s) for f in forms for s in f.selectors]
    results = verdicts(target, version, [form_line(f, s) for f, s in legal])
    bad = [f"{f.name} selector {s}: {msgs}" for (f, s), (ok, msgs) in zip(legal, results,
                                                                          strict=True) if not ok]
    assert not bad, "legal selectors rejected:\n" + "\n".join(bad)

    over = [(f, PTXAS_SELECTOR_MAX_BEYOND_ISA.get(f.name, max(f.selectors)) + 1) for f in forms]
    results = verdicts(target, version, [form_line(f, s) for f, s in over])
    for (f, s), (ok, msgs) in zip(over, results, strict=True):
        assert not ok, f"{f.name}: selector {s} accepted; the table stops at {max(f.selectors)}"
        # "value 'N' out of range, expected to be in range [0..M]" (or, where only 0 is
        # legal, "unexpected value 'N', expected to be 0").
        assert any(f"value '{s}'" in m for m in msgs), (f.name, msgs)


# --------------------------------------------------------------------------- illegal sweep

AB_TYPES = ("f16", "bf16", "tf32", "f64", "e4m3", "e5m2", "s8", "u8", "s4", "u4", "b1")
ACC_TYPES = ("f16", "f32", "f64", "s32")
BOPS = (None, "xor.popc", "and.popc")
SPARSITY = (None, "sp", "sp::ordered_metadata")
MAJORS = tuple(itertools.product(("row", "col"), repeat=2))


@dataclasses.dataclass(frozen=True)
class Candidate:
    """An mma spelling that may or may not exist."""

    shape: tuple[int, int, int]
    d: str
    a: str
    b: str
    c: str
    satfinite: bool = False
    bop: str | None = None
    sparse: str | None = None
    alayout: str = "row"
    blayout: str = "col"

    @classmethod
    def of(cls, f: MmaForm) -> Candidate:
        return cls(f.shape, f.d.name, f.a.name, f.b.name, f.c.name, f.satfinite, f.bop,
                   f.sparse, f.alayout, f.blayout)

    @property
    def opcode(self) -> str:
        m, n, k = self.shape
        parts = ["mma" if self.sparse is None else f"mma.{self.sparse}", "sync", "aligned",
                 f"m{m}n{n}k{k}", self.alayout, self.blayout]
        parts += ["satfinite"] if self.satfinite else []
        parts += [self.d, self.a, self.b, self.c]
        parts += [self.bop] if self.bop else []
        return ".".join(parts)

    @functools.cached_property
    def natural_counts(self) -> list[tuple[int, str]]:
        """Register counts a form of this spelling would have (PTX ISA register rules): the
        tile's elements spread over the threads that share one product (8 for the m8n8k4
        quad-pairs, else 32), packed into .b32 registers, one register per f64."""
        m, n, k = self.shape
        threads = 8 if (self.shape == (8, 8, 4) and self.a != "f64") else 32
        ka = k // 2 if self.sparse else k
        sizes = {"d": m * n, "a": m * ka, "b": n * k, "c": m * n}
        out = []
        for op in "dabc":
            t = getattr(self, op)
            values = max(1, sizes[op] // threads)
            regs = values if t == "f64" else max(1, math.ceil(values * dtype(t).pack_bits / 32))
            out.append((regs, _register_type(t)))
        return out

    def line(self, counts: Sequence[tuple[int, str]] | None = None) -> str:
        return instruction(self.opcode, counts or self.natural_counts,
                           0 if self.sparse else None)


def _register_type(t: str) -> str:
    return t if t in ("f32", "f64") else "b32"


def candidates() -> list[Candidate]:
    """Spellings around the table that the table does not hold."""
    shapes = sorted({f.shape for f in FORMS})
    quads = sorted({(f.d.name, f.a.name, f.b.name, f.c.name) for f in FORMS})
    out: set[Candidate] = set()
    for shape, (d, a, b, c), sat, bop, sp in itertools.product(
        shapes, quads, (False, True), BOPS, SPARSITY
    ):
        majors = MAJORS if shape == (8, 8, 4) else (("row", "col"),)  # only m8n8k4 has a choice
        for al, bl in majors:
            out.add(Candidate(shape, d, a, b, c, sat, bop, sp, al, bl))
    for f in FORMS:  # each table form with one field changed
        base = Candidate.of(f)
        out |= {dataclasses.replace(base, a=t) for t in AB_TYPES}
        out |= {dataclasses.replace(base, b=t) for t in AB_TYPES}
        out |= {dataclasses.replace(base, c=t) for t in ACC_TYPES}
        out |= {dataclasses.replace(base, d=t) for t in ACC_TYPES}
        out |= {dataclasses.replace(base, alayout=al, blayout=bl) for al, bl in MAJORS}
    return sorted((c for c in out if c.opcode not in TABLE), key=lambda c: c.opcode)


def _about_operands(msgs: Iterable[str]) -> bool:
    """Rejected only for its operands (count or type), which other counts might satisfy."""
    return all("mismatch" in m or "vector size" in m for m in msgs)


# Spellings ptxas 13.0 accepts that the tables leave out on purpose or by mistake, with
# ptxas's verdict.  Reported to the table owners; the sweep fails when this set changes.
PTXAS_ACCEPTS_BEYOND_TABLE = {
    # ptxas ignores a bit-op modifier on 4-bit integer forms (the PTX ISA allows .bitOp with
    # .b1 only); accepted with the s4/u4 register counts, no warning.
    *(f"mma.sync.aligned.{shape}.row.col.s32.{a}.{b}.s32.{bop}"
      for shape in ("m8n8k32", "m16n8k32", "m16n8k64")
      for a, b in itertools.product(("s4", "u4"), repeat=2)
      for bop in ("xor.popc", "and.popc")),
    # m8n8k4 with bf16 or tf32 inputs and f32 accumulation, every operand major: not in the
    # PTX ISA's mma.m8n8k4 (f16 only), yet accepted on sm_80+ with the quad-pair register
    # counts (A/B 2 b32 for bf16, 4 b32 for tf32; C/D 8 f32).
    *(f"mma.sync.aligned.m8n8k4.{al}.{bl}.f32.{t}.{t}.f32"
      for al, bl in MAJORS for t in ("bf16", "tf32")),
}


def test_only_table_forms_assemble_on_sm90a() -> None:
    """Every candidate outside the table is rejected, whatever registers it is given."""
    cands = candidates()
    assert len(cands) > 5000
    results = verdicts("sm_90a", NEWEST_PTX, [c.line() for c in cands])
    accepted = {c.opcode for c, (ok, _) in zip(cands, results, strict=True) if ok}
    # A rejection of the operands alone is no proof: try every count in 1, 2, 4, 8.
    retry = [c for c, (ok, msgs) in zip(cands, results, strict=True)
             if not ok and _about_operands(msgs)]
    variants = [(c, counts) for c in retry
                for counts in itertools.product((1, 2, 4, 8), repeat=4)]
    lines = [c.line([(n, t) for n, (_, t) in zip(counts, c.natural_counts, strict=True)])
             for c, counts in variants]
    for (c, _counts), (ok, _) in zip(variants, verdicts("sm_90a", NEWEST_PTX, lines),
                                    strict=True):
        if ok:
            accepted.add(c.opcode)
    new = sorted(accepted - PTXAS_ACCEPTS_BEYOND_TABLE)
    gone = sorted(PTXAS_ACCEPTS_BEYOND_TABLE - accepted)
    assert not new, "ptxas accepts forms the tables do not hold:\n" + "\n".join(new)
    assert not gone, "no longer accepted beyond the table (update the list):\n" + \
        "\n".join(gone)


def test_candidates_hold_the_table_neighbours() -> None:
    names = {c.opcode for c in candidates()}
    assert "mma.sync.aligned.m16n8k16.row.col.f32.tf32.tf32.f32" in names  # tf32 is k4/k8
    assert "mma.sync.aligned.m16n8k16.row.row.f16.f16.f16.f16" in names  # only .row.col
    assert "mma.sp.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32" in names  # sparse f16 k16/k32
    assert "mma.sync.aligned.m16n8k16.row.col.satfinite.f32.f16.f16.f32" in names
    assert not names & TABLE
