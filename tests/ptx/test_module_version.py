"""A plain ``Module(target)`` picks the ``.version`` its contents need (issue 16).

Every emitter records what its instruction needs (a row of ``nvatom.arch.FEATURES`` or an
atom-table form); the module's ``.version`` is the maximum over those and the target's own
minimum.  Checked against ptxas (the ground truth):

* for every family of emitted forms and every target of a sample, a plain ``Module(t)``
  holding a sample of the forms the target has (fixed seed) assembles;
* where that version is above the target's minimum, ptxas rejects the same text at the
  target's minimum (the version a plain module used to write), so the derivation matters;
* a pinned version too low is refused naming the form and the version it needs, and a form
  the target cannot run at all is refused naming the targets of that GPU that have it.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Sequence
from typing import Any

import pytest

from nvatom import arch
from nvatom.atoms import copy as C
from nvatom.atoms import sm90, sm100, sm120
from nvatom.atoms import tma as T
from nvatom.atoms.registry import mma_forms
from nvatom.ptx import copy_emit, mma_emit, sm120_emit, sync_emit
from nvatom.ptx import tma_emit as TE
from nvatom.ptx.builder import Kernel, Module, PtxBuildError
from nvatom.ptx.tcgen05_emit import Tcgen05, Tcgen05EmitError
from nvatom.ptx.wgmma_emit import WgmmaEmitError, WgmmaSequence, emit_scale_d, emit_wgmma
from nvatom.runtime import ptxas

SEED = 16
PER_CELL = 2  # forms per (family, target)
# one target of each kind ptxas 13.0 knows where the families' rules differ
TARGETS = ("sm_75", "sm_80", "sm_86", "sm_89", "sm_90", "sm_90a", "sm_100", "sm_100a",
           "sm_100f", "sm_103a", "sm_110a", "sm_120", "sm_120a", "sm_121a")


# --------------------------------------------------------------------------- families


def _register_mma(m: Module, form: Any, name: str) -> None:
    mma_emit.add_mma_test_kernel(m, form, name)


def _sm120(m: Module, form: Any, name: str) -> None:
    if isinstance(form, sm120.MmaBsForm):
        sm120_emit.add_mma_bs_test_kernel(m, form, name)
    else:
        mma_emit.add_mma_test_kernel(m, form, name)


def _copy(m: Module, atom: Any, name: str) -> None:
    if isinstance(atom, C.MatrixCopy):
        copy_emit.add_matrix_copy_test_kernel(m, atom, name)
    elif isinstance(atom, C.SimtAsyncCopy):
        copy_emit.add_cp_async_test_kernel(m, atom, name)
    else:
        copy_emit.add_universal_copy_test_kernel(m, atom, name)


def _wgmma(m: Module, form: sm90.WgmmaForm, name: str) -> None:
    k = m.kernel(name)
    d = k.regs(form.register_type("D"), form.registers("D"))
    a: Any = k.regs("b32", form.registers("A")) if form.a_source == "rs" else k.reg("b64")
    b = k.reg("b64")
    seq = WgmmaSequence(k)
    seq.fence()
    seq.mma(form, d, a, b, emit_scale_d(k, 1))
    seq.commit()
    seq.wait(0)


def _tcgen05(m: Module, form: sm100.Tcgen05MmaForm, name: str) -> None:
    k = m.kernel(name)
    r = k.regs("b32", 8)
    p = k.reg("pred")
    ops: dict[str, Any] = {"d": r[0], "a": k.reg("b64") if form.a_source == "ss" else r[1],
                           "b": k.reg("b64"), "idesc": r[2], "sfa": r[3], "sfb": r[4],
                           "meta": r[5], "enable_input_d": p, "scale_input_d": 1,
                           "dol": k.regs("b32", form.disable_output_lane_regs),
                           "zero_column_mask": k.reg("b64")}
    Tcgen05(k, form.cta_group).mma(form, **{o: ops[o] for o in form.operands})


def _tma(m: Module, mode: str, name: str) -> None:
    """An mbarrier-completed TMA load of ``mode`` (e.g. ``.tile``) and its wait."""
    instr = T.TMA_INSTRS["load", mode]
    rank = 3 if 3 in instr.ranks else instr.ranks[0]
    k = m.kernel(name)
    tmap = TE.tensormap_param(k, "tmap")
    bar, dst = k.reg("u32"), k.reg("u32")
    coords = k.regs("b32", instr.coords(rank))
    offsets = k.regs("b16", instr.offsets(rank)) or None
    TE.mbarrier_init(k, bar, 1)
    TE.fence_mbarrier_init(k)
    TE.mbarrier_arrive_expect_tx(k, bar, 256)
    TE.tma_load(k, dst, tmap, coords, bar, im2col_offsets=offsets, mode=mode)
    TE.mbarrier_wait_parity(k, bar, 0)
    TE.prefetch_tensormap(k, tmap)


def _sync(m: Module, which: str, name: str) -> None:
    k = m.kernel(name)
    if which == "setmaxnreg":
        sync_emit.setmaxnreg(k, "inc", 232)
    elif which == "mapa":
        sync_emit.mapa_shared_cluster(k, k.reg("u32"), 1)
    elif which == "cluster":
        TE.cluster_sync(k)
        TE.cluster_ctarank(k)
    elif which == "createpolicy":
        TE.create_policy(k, "evict_last")
    elif which == "mbarrier":
        bar = k.reg("u32")
        TE.mbarrier_init(k, bar, 1)
        TE.mbarrier_arrive(k, bar)


FAMILIES: dict[str, tuple[Callable[[arch.Target], Sequence[Any]],
                          Callable[[Module, Any, str], None]]] = {
    "register_mma": (lambda t: mma_forms(t), _register_mma),
    "sm120": (lambda t: sm120.forms(t), _sm120),
    "copy": (lambda t: C.copy_atoms(t), _copy),
    "wgmma": (lambda t: [f for f in sm90.FORMS if f.available_on(t)], _wgmma),
    "tcgen05": (lambda t: [f for f in sm100.FORMS if f.cta_group == 1 and f.available_on(t)],
                _tcgen05),
    "tma": (lambda t: [mode for d, mode in T.TMA_INSTRS
                       if d == "load" and T.TMA_INSTRS[d, mode].available_on(t)], _tma),
    "sync": (lambda t: [w for w, f in (("setmaxnreg", "setmaxnreg"), ("mapa", "cluster"),
                                       ("cluster", "cluster"), ("mbarrier", "mbarrier"),
                                       ("createpolicy", "createpolicy"))
                        if t.supports(f)], _sync),
}


def _cells() -> list[tuple[str, str]]:
    return [(fam, t) for fam in FAMILIES for t in TARGETS
            if FAMILIES[fam][0](arch.target(t))]


def _plain_module(fam: str, tname: str) -> tuple[Module, list[Any]]:
    t = arch.target(tname)
    table, build = FAMILIES[fam]
    forms = list(table(t))
    n = len(forms) if fam == "sync" else min(PER_CELL, len(forms))  # sync: every row
    pick = random.Random(f"{SEED}/{fam}/{tname}").sample(forms, n)
    m = Module(t)
    for i, form in enumerate(pick):
        build(m, form, f"k{i}")
    return m, pick


@pytest.mark.parametrize(("fam", "tname"), _cells())
def test_a_plain_module_assembles_what_it_holds(fam: str, tname: str) -> None:
    m, pick = _plain_module(fam, tname)
    text = m.emit()
    ok, diags = ptxas.check(text, tname)
    assert ok, f"{fam} on {tname} ({[getattr(f, 'name', f) for f in pick]}):\n" + \
        "\n".join(map(str, diags))
    t = arch.target(tname)
    if m.version > t.min_ptx:
        # what a plain module wrote before issue 16: the target's minimum; ptxas refuses it
        low = re.sub(r"^\.version \S+", f".version {t.min_ptx_str}", text, count=1)
        assert not ptxas.check(low, tname)[0], f"{fam} on {tname} assembles at {t.min_ptx}"


def test_the_version_is_the_maximum_of_what_the_module_holds() -> None:
    # PTX ISA: cp.async.bulk.tensor needs PTX 8.0 and sm_90; sm_90's own minimum is 7.8
    m = Module("sm_90")
    assert m.version == (7, 8)
    _tma(m, ".tile", "k")
    assert m.version == (8, 0)
    assert m.emit().startswith(".version 8.0\n.target sm_90\n")
    # block16/32 block scaling: PTX 8.8 on sm_100a, whose minimum is 8.6
    f = sm100.tcgen05_form("tcgen05.mma.cta_group::1.kind::mxf8f6f4.block_scale+ss")
    m = Module("sm_100a")
    _tcgen05(m, f, "k")
    assert m.version == (8, 8)
    assert ptxas.check(m.emit(), "sm_100a")[0]


def test_a_pinned_version_too_low_names_the_form_and_its_version() -> None:
    k = Module("sm_90", version=(7, 8)).kernel("k")
    with pytest.raises(TE.TmaEmitError,
                       match=r"^TMA load \.tile needs PTX \.version 8\.0 on sm_90; "
                             r"the module has 7\.8$"):
        TE.tma_load(k, "%r0", "%rd0", ["%r1", "%r2"], "%r3")
    with pytest.raises(TE.TmaEmitError, match=r"^mbarrier.init.shared::cta.b64 needs PTX "
                                               r"\.version 8\.0 on sm_90; the module has 7\.8$"):
        TE.mbarrier_init(k, "%r0", 1)
    m = Module("sm_100a", version=(8, 6))
    f = sm100.tcgen05_form("tcgen05.mma.cta_group::1.kind::mxf8f6f4.block_scale+ss")
    with pytest.raises(Tcgen05EmitError, match=re.escape(
            f"{f.name} needs PTX .version 8.8 on sm_100a; the module has 8.6")):
        _tcgen05(m, f, "k")
    # pinning after the fact is checked too
    m = Module("sm_90")
    _tma(m, ".tile", "k")
    with pytest.raises(PtxBuildError, match=r"needs PTX \.version 8\.0 on sm_90"):
        m.version = (7, 8)
    with pytest.raises(PtxBuildError, match=r"pins PTX \.version 7\.8, below the 8\.0"):
        Module("sm_90", version=(7, 8)).at_least((8, 0))


def test_a_form_the_target_cannot_run_names_the_targets_that_can() -> None:
    form = sm90.wgmma_form("sm90.mma.m64n8k16.ss.f32.f16.f16")
    with pytest.raises(WgmmaEmitError, match=r"^wgmma.fence.sync.aligned is not available on "
                                             r"sm_90 \(needs feature 'wgmma': sm_9x, 'a' "
                                             r"targets\); sm_90a has it$"):
        _wgmma(Module("sm_90"), form, "k")
    with pytest.raises(WgmmaEmitError, match=rf"^{re.escape(form.name)} is not available on "
                                             r"sm_90 \(needs wgmma\); sm_90a has it$"):
        emit_wgmma(Module("sm_90").kernel("k"), form, [f"%f{i}" for i in range(4)],
                   "%rd0", "%rd1", "%p0")
    with pytest.raises(sync_emit.SyncEmitError,
                       match=r"^setmaxnreg is not available on sm_100 \(needs feature "
                             r"'setmaxnreg': sm_90\+, 'a'/'f' targets\); sm_100a and sm_100f "
                             r"have it$"):
        _sync(Module("sm_100"), "setmaxnreg", "k")
    with pytest.raises(TE.TmaEmitError, match=r"^TMA load \.tile is not available on sm_80 "
                                               r"\(needs feature 'tma': sm_90\+\)$"):
        TE.tma_load(Module("sm_80").kernel("k"), "%r0", "%rd0", ["%r1", "%r2"], "%r3")


def test_a_kernel_outside_a_module_records_and_its_module_checks_later() -> None:
    k = Kernel("k")
    TE.cluster_ctarank(k)  # no module: recorded only
    assert [n.form for n in k.needs] == ["%cluster_ctarank"]
    m = Module("sm_80")
    with pytest.raises(PtxBuildError, match="not available on sm_80"):
        m.check(k.needs[0])
