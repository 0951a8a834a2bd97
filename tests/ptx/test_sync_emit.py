"""nvatom.ptx.sync_emit against ptxas: every spelling of every table row on one target of each
family (batched: one module per target), our ``target=`` gate agreeing with ptxas, near
misses our checks refuse being refused by ptxas too, and each error naming its value.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from nvatom import arch
from nvatom.ptx import sync_emit as SE
from nvatom.ptx.builder import Kernel
from tests.ptxas_sweep import case_verdicts, kernel_lines, one_kernel_module

TARGETS = ["sm_75", "sm_80", "sm_89", "sm_90", "sm_90a", "sm_100a", "sm_120", "sm_120a"]
_REGS = ".reg .b32 %r<20>;\n.reg .f32 %f<8>;\n.reg .pred %p<4>;\n"

Case = tuple[str, str, Callable[..., None]]  # (id, table row, emit(k, target=None))


def _cases() -> list[Case]:
    out: list[Case] = []
    for op in ("inc", "dec"):
        for n in (24, 40, 232, 256):
            out.append((f"setmaxnreg.{op}.{n}", "setmaxnreg",
                        lambda k, target=None, op=op, n=n: SE.setmaxnreg(k, op, n, target=target)))
    for bid, cnt in ((0, 384), (1, 128), (15, 32), (0, 1024)):
        out.append((f"bar.sync.{bid}.{cnt}", "bar.sync",
                    lambda k, target=None, b=bid, c=cnt:
                    SE.named_barrier_sync(k, b, c, target=target)))
    out.append(("bar.sync.reg", "bar.sync",
                lambda k, target=None: SE.named_barrier_sync(k, "%r3", 128, target=target)))
    for bid, cnt in ((1, 256), ("%r3", 256)):
        out.append((f"bar.arrive.{bid}.{cnt}", "bar.arrive",
                    lambda k, target=None, b=bid, c=cnt:
                    SE.named_barrier_arrive(k, b, c, target=target)))
    for rank in (0, 1, "%r2"):
        out.append((f"mapa.{rank}", "mapa",
                    lambda k, target=None, r=rank: SE.mapa_shared_cluster(k, "%r1", r,
                                                                         target=target)))
    for sem in ("", "release", "relaxed"):
        for al in (True, False):
            out.append((f"cluster.arrive.{sem}.{al}", "barrier.cluster.arrive",
                        lambda k, target=None, s=sem, a=al:
                        SE.barrier_cluster_arrive(k, sem=s, aligned=a, target=target)))
    for sem in ("", "acquire"):
        for al in (True, False):
            out.append((f"cluster.wait.{sem}.{al}", "barrier.cluster.wait",
                        lambda k, target=None, s=sem, a=al:
                        SE.barrier_cluster_wait(k, sem=s, aligned=a, target=target)))
    for t in ("bf16", "f16"):
        out.append((f"cvt.{t}", "cvt.pack",
                    lambda k, target=None, t=t: SE.cvt_pack_f32(k, t, "%f1", "%f2",
                                                               target=target)))
    return out


CASES = _cases()


def _lines(case: Case) -> list[str]:
    return kernel_lines(case[2])


def _module(t: arch.Target, lines_by_case: list[list[str]]) -> tuple[str, list[int]]:
    return one_kernel_module(t.ptx_target, max(t.min_ptx, (8, 0)), "", _REGS,
                             lines_by_case)


def _verdicts(t: arch.Target, cases: list[Case]) -> dict[str, tuple[bool, tuple[str, ...]]]:
    """(accepted, messages) per case id, with as few ptxas calls as ptxas allows."""
    return case_verdicts(lambda groups: _module(t, groups), t.name,
                         {c[0]: _lines(c) for c in cases})


@pytest.mark.parametrize("tname", TARGETS)
def test_every_form_assembles_exactly_where_the_table_says(tname: str) -> None:
    t = arch.target(tname)
    verdicts = _verdicts(t, CASES)
    wrong = []
    for cid, row, emit in CASES:
        ok, msgs = verdicts[cid]
        want = SE.SYNC_INSTRS[row].available_on(t)
        if ok != want:
            wrong.append(f"{cid}: ptxas {'accepts' if ok else 'rejects'} ({'; '.join(msgs)}), "
                         f"our table says {want}")
        try:
            emit(Kernel("g"), target=t)
            gated = True
        except SE.SyncEmitError as e:
            gated = False
            assert t.name in str(e), str(e)
        if gated != ok:
            wrong.append(f"{cid}: our target check says {gated}, ptxas says {ok}")
    assert not wrong, "\n".join(wrong)


def test_sweep_covers_every_spelling() -> None:
    emitted = set()
    for case in CASES:
        for ln in _lines(case):
            emitted.add(ln.split()[0].rstrip(";"))
    for name in SE.SYNC_INSTRS:
        for sp in SE.spellings(name):
            assert sp in emitted, f"{sp} is never emitted by the sweep"


def test_near_misses_refused_by_us_and_by_ptxas() -> None:
    """Operand values our checks refuse are refused by ptxas as well (sm_90a)."""
    misses = {
        "setmaxnreg 20": ("setmaxnreg.inc.sync.aligned.u32 20;",
                          lambda k: SE.setmaxnreg(k, "inc", 20)),
        "setmaxnreg 100": ("setmaxnreg.dec.sync.aligned.u32 100;",
                           lambda k: SE.setmaxnreg(k, "dec", 100)),
        "setmaxnreg 264": ("setmaxnreg.inc.sync.aligned.u32 264;",
                           lambda k: SE.setmaxnreg(k, "inc", 264)),
        "bar.sync id 16": ("bar.sync 16, 128;", lambda k: SE.named_barrier_sync(k, 16, 128)),
        "bar.sync count 100": ("bar.sync 1, 100;", lambda k: SE.named_barrier_sync(k, 1, 100)),
    }
    t = arch.target("sm_90a")
    cases = [(cid, "x", lambda k, target=None, text=text: k.ins(text.rstrip(";")))
             for cid, (text, _) in misses.items()]
    verdicts = _verdicts(t, cases)
    for cid, (_, ours) in misses.items():
        assert not verdicts[cid][0], f"ptxas accepts {cid}"
        with pytest.raises(SE.SyncEmitError):
            ours(Kernel("g"))


def test_gemm_uses_the_shared_emitters() -> None:
    """The SM90 GEMM's synchronisation lines are exactly the table's spellings."""
    from nvatom.kernels.sm90.config import GemmSm90Config
    from nvatom.kernels.sm90.gemm import build_gemm_sm90

    text = build_gemm_sm90(GemmSm90Config(cluster_m=2)).emit()
    for sp in ("setmaxnreg.inc.sync.aligned.u32 232;", "setmaxnreg.dec.sync.aligned.u32 40;",
               "barrier.cluster.arrive.release.aligned;", "barrier.cluster.wait.acquire;",
               "mbarrier.arrive.release.cta.shared::cluster.b64 _, [", "mapa.shared::cluster.u32 ",
               "cvt.rn.bf16x2.f32 "):
        assert sp in text, sp


def test_cvt_pack_into_a_given_register() -> None:
    k = Kernel("c")
    r = k.reg("b32")
    assert SE.cvt_pack_f32(k, "bf16", "%f1", "%f2", into=r) is r
    assert f"cvt.rn.bf16x2.f32 {r}, %f1, %f2;" in k.emit()
    with pytest.raises(SE.SyncEmitError, match="needs a 32-bit register"):
        SE.cvt_pack_f32(k, "bf16", "%f1", "%f2", into=k.reg("u64"))


@pytest.mark.parametrize(("call", "needle"), [
    (lambda k: SE.setmaxnreg(k, "up", 40), "'up'"),
    (lambda k: SE.setmaxnreg(k, "inc", 41), "41"),
    (lambda k: SE.setmaxnreg(k, "inc", True), "True"),
    (lambda k: SE.setmaxnreg(k, "inc", 40, target="sm_90"), "sm_90 "),
    (lambda k: SE.setmaxnreg(k, "inc", 40, target="sm_120"), "sm_120 "),
    (lambda k: SE.named_barrier_sync(k, -1, 128), "-1"),
    (lambda k: SE.named_barrier_sync(k, 0, 0), "count 0"),
    (lambda k: SE.named_barrier_sync(k, 0, 2048), "2048"),
    (lambda k: SE.mapa_shared_cluster(k, "%r1", -1), "-1"),
    (lambda k: SE.mapa_shared_cluster(k, 1.5, 0), "1.5"),
    (lambda k: SE.mapa_shared_cluster(k, "%r1", 0, target="sm_89"), "sm_89"),
    (lambda k: SE.barrier_cluster_arrive(k, sem="acquire"), "'.acquire'"),
    (lambda k: SE.barrier_cluster_arrive(k, target="sm_80"), "sm_80"),
    (lambda k: SE.barrier_cluster_wait(k, sem="release"), "'.release'"),
    (lambda k: SE.barrier_cluster_wait(k, target="sm_89"), "sm_89"),
    (lambda k: SE.cvt_pack_f32(k, "e4m3", "%f1", "%f2"), "'e4m3'"),
    (lambda k: SE.cvt_pack_f32(k, "bf16", "%f1", "%f2", target="sm_75"), "sm_75"),
    (lambda k: SE.cvt_pack_f32(k, "bf16", None, "%f2"), "None"),
    (lambda k: SE.spell("bar.red"), "'bar.red'"),
    (lambda k: SE.named_barrier_arrive(k, 16, 256), "16"),
    (lambda k: SE.named_barrier_arrive(k, 1, 100), "100"),
    (lambda k: SE.spell("cvt.pack"), "slots"),
])
def test_errors_name_the_value(call: Callable[[Kernel], object], needle: str) -> None:
    k = Kernel("e")
    with pytest.raises(SE.SyncEmitError) as ei:
        call(k)
    assert needle in str(ei.value)
    body = [ln.strip() for ln in k.emit().splitlines()[2:-2]]
    assert body == [], f"a refused instruction still emitted {body}"
