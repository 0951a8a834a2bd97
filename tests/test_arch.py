"""SM targets and feature gating, checked against ptxas itself.

Every rule in nvatom.arch is re-derived here by assembling probes: each target at its minimum
PTX version (accepted) and one version below (rejected); each (code target, GPU target) pair
for the runs-on relation; each feature's probe on every target, on both sides of its boundary.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from nvatom import arch
from nvatom.errors import TargetError
from nvatom.runtime import ptxas

# PTX ISA versions, in order; ptxas 13.0 knows up to 9.0.
PTX_VERSIONS = [(6, m) for m in range(6)] + [(7, m) for m in range(9)] + \
    [(8, m) for m in range(9)] + [(9, 0)]

_HEADER = ".version {v}\n.target {t}\n.address_size 64\n"
_REGS = (".reg .b32 r<16>; .reg .f32 f<16>; .reg .b64 rd<8>; .reg .pred p<4>; .reg .b16 h<4>;\n"
         ".reg .f64 fd<8>;\n"
         ".shared .align 128 .b8 smem[1024];\n")

# One instruction per feature, written from the PTX ISA's syntax sections.
PROBES = {
    "mma.m8n8k4": "mma.sync.aligned.m8n8k4.row.col.f32.f16.f16.f32 {f0,f1,f2,f3,f4,f5,f6,f7}, "
                  "{r0,r1}, {r2,r3}, {f8,f9,f10,f11,f12,f13,f14,f15};",
    "ldmatrix": "ldmatrix.sync.aligned.m8n8.x1.shared.b16 {r0}, [r1];",
    "mma.m16n8k8": "mma.sync.aligned.m16n8k8.row.col.f16.f16.f16.f16 {r0,r1}, {r2,r3}, {r4}, "
                   "{r5,r6};",
    "mma.int.m8n8": "mma.sync.aligned.m8n8k16.row.col.s32.s8.s8.s32 {r0,r1}, {r2}, {r3}, {r4,r5};",
    "cp.async": "cp.async.ca.shared.global [r0], [rd0], 4;",
    "mbarrier": "mbarrier.arrive.release.cta.shared::cta.b64 _, [r0];",
    "createpolicy": "createpolicy.fractional.L2::evict_last.b64 rd0, 1.0;",
    "mma.sm80": "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {f0,f1,f2,f3}, "
                "{r0,r1,r2,r3}, {r4,r5}, {f4,f5,f6,f7};",
    "mma.sp": "mma.sp.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {f0,f1,f2,f3}, {r0,r1}, "
              "{r2,r3}, {f4,f5,f6,f7}, r8, 0x0;",
    "mma.fp8": "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {f0,f1,f2,f3}, "
               "{r0,r1,r2,r3}, {r4,r5}, {f4,f5,f6,f7};",
    "mma.f64.m16n8": "mma.sync.aligned.m16n8k4.row.col.f64.f64.f64.f64 {fd0,fd1,fd2,fd3}, "
                     "{fd4,fd5}, {fd6}, {fd0,fd1,fd2,fd3};",
    "ldmatrix.b8": "ldmatrix.sync.aligned.m16n16.x1.trans.shared.b8 {r0,r1}, [r2];",
    "stmatrix.b8": "stmatrix.sync.aligned.m16n8.x1.trans.shared.b8 [r0], {r1};",
    "stmatrix": "stmatrix.sync.aligned.m8n8.x1.shared.b16 [r0], {r1};",
    "red.vec.f32": "red.global.add.v2.f32 [rd0], {f0, f1};",
    "cluster": "barrier.cluster.arrive;",
    "tma": "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes "
           "[r0], [rd0, {r1, r2}], [r3];",
    "tma.shared_cta": "cp.async.bulk.tensor.2d.shared::cta.global.tile"
                      ".mbarrier::complete_tx::bytes [r0], [rd0, {r1, r2}], [r3];",
    "mbarrier.tx": "mbarrier.arrive.expect_tx.shared.b64 rd1, [r0], 16;",
    "elect.sync": "elect.sync r1|p1, 0xffffffff;",
    "wgmma": "wgmma.fence.sync.aligned;",
    "setmaxnreg": "setmaxnreg.inc.sync.aligned.u32 232;",
    "tensormap.replace": "tensormap.replace.tile.global_address.shared::cta.b1024.b64 [r0], rd0;",
    "tcgen05": "tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [r0], 32;",
    "tcgen05.kind::i8": "tcgen05.mma.cta_group::1.kind::i8 [r0], rd0, rd1, r1, p0;",
    "tcgen05.scale_vec": "tcgen05.mma.cta_group::1.kind::mxf8f6f4.block_scale.scale_vec::1X "
                         "[r0], rd0, rd1, r1, [r2], [r3], p0;",
    "tcgen05.block16/32": "tcgen05.mma.cta_group::1.kind::mxf8f6f4.block_scale.block32 "
                          "[r0], rd0, rd1, r1, [r2], [r3], p0;",
    "tcgen05.scale_input_d": "tcgen05.mma.cta_group::1.kind::f16 [r0], rd0, rd1, r1, p0, 3;",
    "tcgen05.shift": "tcgen05.shift.cta_group::1.down [r0];",
    "tcgen05.mxf4.sp": "tcgen05.mma.sp.cta_group::1.kind::mxf4.block_scale.scale_vec::2X"
                       " [r0], rd0, rd1, [r4], r1, [r2], [r3], p0;",
    "mma.block_scale": "mma.sync.aligned.m16n8k32.row.col.kind::mxf8f6f4.block_scale.scale_vec::1X"
                       ".f32.e4m3.e4m3.f32.ue8m0 {f0,f1,f2,f3}, {r0,r1,r2,r3}, {r4,r5}, "
                       "{f4,f5,f6,f7}, r6, {0,0}, r7, {0,0};",
    "mma.block_scale.mxf4.sp": "mma.sp::ordered_metadata.sync.aligned.m16n8k128.row.col"
                               ".kind::mxf4.block_scale.scale_vec::2X.f32.e2m1.e2m1.f32.ue8m0 "
                               "{f0,f1,f2,f3}, {r0,r1,r2,r3}, {r4,r5,r8,r9}, {f4,f5,f6,f7}, "
                               "r10, 0, r6, {0,0}, r7, {0,0};",
    "mma.f8f6f4.fp8": "mma.sync.aligned.m16n8k32.row.col.kind::f8f6f4.f32.e4m3.e5m2.f32 "
                      "{f0,f1,f2,f3}, {r0,r1,r2,r3}, {r4,r5}, {f4,f5,f6,f7};",
    "mma.f8f6f4": "mma.sync.aligned.m16n8k32.row.col.kind::f8f6f4.f32.e3m2.e2m1.f32 "
                  "{f0,f1,f2,f3}, {r0,r1,r2,r3}, {r4,r5}, {f4,f5,f6,f7};",
}


def _ptx(t: arch.Target, version: tuple[int, int], body: str = "") -> str:
    return (_HEADER.format(v=f"{version[0]}.{version[1]}", t=t.name)
            + ".visible .entry probe()\n{\n" + (_REGS + body if body else "") + "\nret;\n}\n")


def _available(t: arch.Target) -> bool:
    try:
        ptxas.find_ptxas(t.name)
    except Exception:
        return False
    return True


def _accepts(
    t: arch.Target, version: tuple[int, int], body: str = "", gpu: str | None = None
) -> bool:
    ok, _ = ptxas.check(_ptx(t, version, body), gpu or t.name)
    return ok


def _params(targets):
    out = []
    for t in targets:
        marks = [pytest.mark.sm70] if t.ptxas == "12.9" else []
        out.append(pytest.param(t, id=t.name, marks=marks))
    return out


ALL = list(arch.TARGETS.values())


def test_feature_probes_cover_every_feature() -> None:
    assert set(PROBES) == {f.name for f in arch.FEATURES}


def test_roster_matches_what_ptxas_knows() -> None:
    known: set[str] = set()
    for tool in ptxas.discover():
        known |= {n for n in tool.gpu_names if 70 <= arch.target(n).cc <= 121} \
            if tool.version >= (13, 0) else set()
    assert known, "no CUDA 13 ptxas"
    thirteen = {t.name for t in ALL if t.ptxas == "13.0"}
    assert known == thirteen
    # sm_101 was renamed sm_110 in CUDA 13 and is not a target of ours.
    with pytest.raises(TargetError, match="unknown target 'sm_101'"):
        arch.target("sm_101")


@pytest.mark.sm70
def test_cuda12_9_ptxas_covers_the_dropped_targets() -> None:
    tool = ptxas.find_ptxas("sm_70")
    assert tool.version == (12, 9)
    assert {"sm_70", "sm_72"} <= tool.gpu_names


@pytest.mark.parametrize("t", _params(ALL))
def test_minimum_ptx_version(t: arch.Target) -> None:
    assert _accepts(t, t.min_ptx)
    below = PTX_VERSIONS[PTX_VERSIONS.index(t.min_ptx) - 1]
    assert not _accepts(t, below), f"{t.name} also accepts .version {below}"


def test_runs_on_matches_ptxas() -> None:
    """PTX for .target X compiles to GPU Y exactly when X.runs_on(Y) (CUDA 13 targets)."""
    ts = [t for t in ALL if t.ptxas == "13.0"]
    pairs = [(x, y) for x in ts for y in ts]
    with ThreadPoolExecutor(4) as ex:
        got = list(ex.map(lambda p: _accepts(p[0], p[0].min_ptx, gpu=p[1].name), pairs))
    wrong = [f"{x.name}->{y.name}: ptxas {'accepts' if ok else 'rejects'}"
             for (x, y), ok in zip(pairs, got, strict=True) if ok != x.runs_on(y)]
    assert not wrong, wrong


@pytest.mark.parametrize("name", list(PROBES))
def test_feature_rule_matches_ptxas(name: str) -> None:
    f = arch.feature(name)
    # ptxas 12.9 (sm_70/72) knows PTX up to 8.8; features newer than that are far above them.
    ts = [t for t in ALL if _available(t)
          and (t.ptxas == "13.0" or t.ptx_version_for(name) <= (8, 8))]
    with ThreadPoolExecutor(4) as ex:
        got = list(ex.map(lambda t: _accepts(t, t.ptx_version_for(name), PROBES[name]), ts))
    wrong = [f"{t.name}: ptxas {'accepts' if ok else 'rejects'}, rule says "
             f"{'yes' if f.available_on(t) else 'no'}"
             for t, ok in zip(ts, got, strict=True) if ok != f.available_on(t)]
    assert not wrong, wrong
    # Both sides of the boundary were exercised (mma.m8n8k4 exists on every target we know).
    assert any(got)
    assert not all(got) or name == "mma.m8n8k4"


def test_feature_min_ptx_is_tight() -> None:
    """Each feature's minimum PTX version: accepted there, rejected one below (on a target
    whose own minimum is lower)."""
    checked = 0
    for f in arch.FEATURES:
        hosts = [t for t in ALL
                 if f.available_on(t) and t.ptxas == "13.0" and t.min_ptx < f.min_ptx]
        if not hosts:
            continue  # the target minimum binds first: nothing to separate
        t = hosts[0]
        below = PTX_VERSIONS[PTX_VERSIONS.index(f.min_ptx) - 1]
        assert _accepts(t, f.min_ptx, PROBES[f.name]), f.name
        assert not _accepts(t, below, PROBES[f.name]), f"{f.name} accepted at {below} on {t.name}"
        checked += 1
    assert checked >= 10


def test_tiers_follow_the_roster() -> None:
    tiers = {t.name: t.tier.label for t in ALL}
    assert tiers["sm_70"] == tiers["sm_75"] == "SM70/75"
    assert {tiers[n] for n in ("sm_80", "sm_86", "sm_87", "sm_88")} == {"SM80"}
    assert tiers["sm_89"] == "SM89"
    assert tiers["sm_90"] == tiers["sm_90a"] == "SM90"
    assert {tiers[n] for n in ("sm_100", "sm_100a", "sm_103f")} == {"SM100/SM103"}
    assert {tiers[n] for n in ("sm_110", "sm_110a", "sm_110f")} == {"SM110"}
    assert {tiers[n] for n in ("sm_120", "sm_121a", "sm_121f")} == {"SM120/SM121"}
    assert arch.Tier.SM89 < arch.Tier.SM90 < arch.Tier.SM100


@pytest.mark.parametrize("alias", ["sm_90a", "sm90a", "90a", "compute_90a", " SM_90A "])
def test_target_aliases(alias: str) -> None:
    assert arch.target(alias).name == "sm_90a"


@pytest.mark.parametrize("bad", ["sm_91", "sm_90b", "hopper", "", "sm_"])
def test_unknown_target_names_the_value(bad: str) -> None:
    with pytest.raises(TargetError, match=f"'{bad}'"):
        arch.target(bad)


def test_unknown_feature() -> None:
    with pytest.raises(TargetError, match="unknown feature 'warp.magic'"):
        arch.target("sm_90a").supports("warp.magic")


def test_runs_on_rules_in_words() -> None:
    t = arch.target
    assert t("sm_80").runs_on("sm_90a") and t("sm_80").runs_on("sm_121f")
    assert not t("sm_90a").runs_on("sm_100a")
    assert t("sm_100f").runs_on("sm_103a") and not t("sm_100f").runs_on("sm_110")
    assert not t("sm_103f").runs_on("sm_100")


@pytest.mark.parametrize("cc, name", [("9.0", "sm_90a"), ("90", "sm_90a"), ((8, 0), "sm_80"),
                                      ("8.6", "sm_86"), ("12.1", "sm_121a"), ("7.0", "sm_70")])
def test_device_target(cc, name) -> None:
    assert arch.device_target(cc).name == name


@pytest.mark.parametrize("cc", ["9.1", "abc", "5.0"])
def test_device_target_errors(cc) -> None:
    with pytest.raises(TargetError, match="compute capability"):
        arch.device_target(cc)
