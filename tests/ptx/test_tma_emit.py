"""nvatom.ptx.tma_emit against ptxas: every form the emitters can produce, on every target
family, in a few batched modules.

* availability: each emitted form (every mbarrier/fence/bulk-group row of SYNC_OPS with
  every slot value, every TMA load/store/reduce mode at every rank with multicast, cache
  hint and cta_group variants, tensormap.replace of the three mutable fields in both state
  spaces, prefetch, createpolicy) assembles exactly on the targets whose feature our tables
  name, and our ``target=`` check refuses it exactly where ptxas does;
* near misses our emitters refuse are refused by ptxas too (rank 6, 2-d im2col, a store in an
  im2col::w mode, a multicast store);
* errors: bad ranks, offset counts, reduce ops and types, counts, parities, scopes.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable

import pytest

from nvatom import arch
from nvatom.atoms import mbarrier as M
from nvatom.atoms import tma as T
from nvatom.ptx import tma_emit as TE
from nvatom.ptx.builder import Kernel, Module
from nvatom.runtime import ptxas
from tests.ptxas_sweep import case_verdicts, kernel_lines, one_kernel_module

# one representative of each target family ptxas 13.0 knows with the TMA surface's edges
TARGETS = ["sm_80", "sm_89", "sm_90", "sm_90a", "sm_100", "sm_100a", "sm_103a", "sm_120a"]
_REGS = ".reg .b32 %r<40>;\n.reg .b64 %rd<20>;\n.reg .b16 %h<10>;\n.reg .pred %p<8>;\n"

Case = tuple[str, str, Callable[..., None]]  # (id, feature, emit(k, target=None))


def _u(field, value, axis=None):
    return T.tma_update(field, value, axis)


def _cases() -> list[Case]:
    out: list[Case] = []
    coords = [f"%r{10 + i}" for i in range(5)]
    for name, op in M.SYNC_OPS.items():
        slot_names = list(op.slots)
        for values in itertools.product(*(op.slots[s] for s in slot_names)) or [()]:
            slots = dict(zip(slot_names, values, strict=True))
            ops = {"[bar]": "[%r1]", "count": "1", "tx": "256", "_": "_", "pred": "%p1",
                   "parity": "0", "[tmap]": "[%rd1]", "128": "128", "[dst]": "[%rd1]",
                   "[src]": "[%r2]", "n": "0"}
            text = M.spell(name, **slots) + (" " + ", ".join(ops[o] for o in op.operands)
                                             if op.operands else "")
            out.append((f"{name}{values}", op.feature_for(**slots),
                        lambda k, target=None, text=text: k.ins(text)))
    # the emitter functions themselves (their spelling path) once each
    out += [
        ("init", "cp.async", lambda k, target=None: TE.mbarrier_init(k, "%r1", 1)),
        ("arrive", "cp.async", lambda k, target=None: TE.mbarrier_arrive(k, "%r1")),
        ("arrive_n", "mbarrier.tx", lambda k, target=None: TE.mbarrier_arrive(k, "%r1", count=2)),
        ("arrive_remote", "mbarrier.tx",
         lambda k, target=None: TE.mbarrier_arrive_remote(k, "%r1")),
        ("expect_tx_arrive", "mbarrier.tx",
         lambda k, target=None: TE.mbarrier_arrive_expect_tx(k, "%r1", 4096, scope="cluster")),
        ("expect_tx", "mbarrier.tx", lambda k, target=None: TE.mbarrier_expect_tx(k, "%r1", 64)),
        ("wait_parity", "mbarrier.tx",
         lambda k, target=None: TE.mbarrier_wait_parity(k, "%r1", "%r3", scope="cluster")),
        ("fence_init", "mbarrier.tx", lambda k, target=None: TE.fence_mbarrier_init(k)),
        ("fence_async", "tma", lambda k, target=None: TE.fence_proxy_async(k)),
        ("fence_async_all", "tma", lambda k, target=None: TE.fence_proxy_async(k, "")),
        ("tmap_release", "tma", lambda k, target=None: TE.fence_tensormap_release(k, "sys")),
        ("tmap_acquire", "tma", lambda k, target=None: TE.fence_tensormap_acquire(k, "%rd1")),
        ("cp_fenceproxy", "tma",
         lambda k, target=None: TE.tensormap_cp_fenceproxy(k, "%rd1", "%r2", "cta")),
        ("commit", "tma", lambda k, target=None: TE.bulk_commit_group(k)),
        ("wait_read", "tma", lambda k, target=None: TE.bulk_wait_group(k, 1)),
        ("wait", "tma", lambda k, target=None: TE.bulk_wait_group(k, 0, read=False)),
        ("cluster_sync", "cluster", lambda k, target=None: TE.cluster_sync(k)),
        ("prefetch", "tma", lambda k, target=None: TE.prefetch_tensormap(k, "%rd1")),
        ("prefetch_param", "tma",
         lambda k, target=None: TE.prefetch_tensormap(k, "tm", space="param")),
    ]
    for mode in T.CacheMode:
        if mode is not T.CacheMode.NONE:
            # createpolicy is sm_80+; nvatom.arch has no feature of its own for it
            out.append((f"policy_{mode.value}", "cp.async",
                        lambda k, target=None, mode=mode: TE.create_policy(k, mode, 0.5)))
    for (direction, mode), ins in T.TMA_INSTRS.items():
        for rank in ins.ranks:
            c = coords[: ins.coords(rank)] if ins.coords(rank) <= 5 else \
                [f"%r{10 + i}" for i in range(ins.coords(rank))]
            offs = [f"%h{2 + i}" for i in range(ins.offsets(rank))]
            tag = f"{direction}{mode}.{rank}d"
            if direction == "load":
                variants = [{}, {"multicast_mask": "%h1"}, {"cache_policy": "%rd3"},
                            {"multicast_mask": "%h1", "cache_policy": "%rd3"}]
                for v in variants:
                    out.append((f"{tag}{sorted(v)}", ins.feature,
                                lambda k, target=None, c=c, offs=offs, mode=mode, v=v:
                                TE.tma_load(k, "%r1", "%rd1", c, "%r2", mode=mode,
                                           im2col_offsets=offs or None, target=target, **v)))
                out.append((f"{tag}.cta_group::2",
                            "tcgen05",  # .cta_group::2 and the sm_100 modes share the rule
                            lambda k, target=None, c=c, offs=offs, mode=mode:
                            TE.tma_load(k, "%r1", "%rd1", c, "%r2", mode=mode, cta_group=2,
                                       im2col_offsets=offs or None, target=target)))
            elif direction == "store":
                for v in ({}, {"cache_policy": "%rd3"}):
                    out.append((f"{tag}{sorted(v)}", ins.feature,
                                lambda k, target=None, c=c, mode=mode, v=v:
                                TE.tma_store(k, "%rd1", c, "%r1", mode=mode, target=target,
                                            **v)))
            else:
                for op in TE.REDUCE_OPS:
                    for v in ({}, {"cache_policy": "%rd3"}):
                        out.append((f"{tag}.{op}{sorted(v)}", ins.feature,
                                    lambda k, target=None, c=c, mode=mode, v=v, op=op:
                                    TE.tma_reduce(k, op, "%rd1", c, "%r1", mode=mode,
                                                 target=target, **v)))
    for space, addr in (("global", "%rd1"), ("shared::cta", "%r1")):
        for u in (_u("base", "%rd4"), _u("dim", "%r5", 3), _u("stride", "%rd5", 4)):
            out.append((f"replace.{u.ptx_field}.{space}", "tensormap.replace",
                        lambda k, target=None, space=space, addr=addr, u=u:
                        TE.tensormap_replace(k, addr, u, space=space, target=target)))
        out.append((f"update_sequence.{space}", "tensormap.replace",
                    lambda k, target=None, space=space:
                    TE.tensormap_update_sequence(
                        k, "%rd1", [_u("stride", "%rd5", 1), _u("base", "%rd4"),
                                    _u("dim", "%r5", 0)],
                        smem_copy="%r1" if space == "shared::cta" else None, target=target)))
    return out


CASES = _cases()


def _lines(case: Case) -> list[str]:
    return kernel_lines(case[2])


def _module(t: arch.Target, lines_by_case: list[list[str]]) -> tuple[str, list[int]]:
    return one_kernel_module(t.ptx_target, max(t.min_ptx, (8, 8)),
                             ".param .align 64 .b8 tm[128]", _REGS, lines_by_case)


def _verdicts(t: arch.Target) -> dict[str, tuple[bool, tuple[str, ...]]]:
    """(accepted, messages) per case id, with as few ptxas calls as ptxas allows."""
    return case_verdicts(lambda groups: _module(t, groups), t.name,
                         {c[0]: _lines(c) for c in CASES})


@pytest.mark.parametrize("tname", TARGETS)
def test_every_form_assembles_exactly_where_its_feature_says(tname: str) -> None:
    t = arch.target(tname)
    verdicts = _verdicts(t)
    wrong = []
    for cid, feature, emit in CASES:
        ok, msgs = verdicts[cid]
        if ok != t.supports(feature):
            wrong.append(f"{cid}: ptxas {'accepts' if ok else 'rejects'} "
                         f"({'; '.join(msgs)}), feature '{feature}' says {t.supports(feature)}")
        gated = True
        try:
            emit(Kernel("g"), target=t)
        except TE.TmaEmitError:
            gated = False
        if _takes_target(cid) and gated != ok:
            wrong.append(f"{cid}: our target check says {gated}, ptxas says {ok}")
    assert not wrong, "\n".join(wrong)


def _takes_target(cid: str) -> bool:
    """The cases whose emitter checks ``target=`` (the TMA copies and tensormap.replace)."""
    return cid.startswith(("load.", "store.", "reduce.", "replace.", "update_sequence."))


def test_sweep_covers_every_table_row() -> None:
    ids = {c[0] for c in CASES}
    assert len(ids) == len(CASES)
    for name in M.SYNC_OPS:
        assert any(i.startswith(name + "(") for i in ids), name
    for (direction, mode), ins in T.TMA_INSTRS.items():
        for r in ins.ranks:
            assert any(i.startswith(f"{direction}{mode}.{r}d") for i in ids)


# near misses: forms the emitters refuse; ptxas must refuse them too (sm_100a has them all)
NEAR_MISSES = {
    "rank6": "cp.async.bulk.tensor.6d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
             " [%r1], [%rd1, {%r10, %r11, %r12, %r13, %r14, %r15}], [%r2];",
    "im2col_2d": "cp.async.bulk.tensor.2d.shared::cluster.global.im2col"
                 ".mbarrier::complete_tx::bytes [%r1], [%rd1, {%r10, %r11}], [%r2], {};",
    "store_im2col_w": "cp.async.bulk.tensor.3d.global.shared::cta.im2col::w.bulk_group"
                      " [%rd1, {%r10, %r11, %r12}], [%r1];",
    # the specification's store modes IM2COL_W / IM2COL_W128: the PTX ISA's store .load_mode
    # set is .tile, .tile::scatter4, .im2col_no_offs (docs/spec-deviations.md)
    "store_im2col_w128": "cp.async.bulk.tensor.3d.global.shared::cta.im2col::w::128.bulk_group"
                         " [%rd1, {%r10, %r11, %r12}], [%r1];",
    "store_multicast": "cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group"
                       ".multicast::cluster [%rd1, {%r10, %r11}], [%r1], %h1;",
    "load_no_completion": "cp.async.bulk.tensor.2d.shared::cluster.global.tile"
                          " [%r1], [%rd1, {%r10, %r11}], [%r2];",
    "reduce_im2col_load_mode": "cp.reduce.async.bulk.tensor.3d.global.shared::cta.add.im2col"
                               ".bulk_group [%rd1, {%r10, %r11, %r12}], [%r1];",
}


@pytest.mark.parametrize("name", sorted(NEAR_MISSES))
def test_near_misses_are_rejected_by_ptxas(name: str) -> None:
    t = arch.target("sm_100a")
    text, _ = _module(t, [[NEAR_MISSES[name]]])
    ok, _ = ptxas.check(text, t.name)
    assert not ok, f"ptxas accepted {NEAR_MISSES[name]}"


def test_emitters_refuse_the_near_misses() -> None:
    k = Kernel("k")
    with pytest.raises(TE.TmaEmitError, match="takes 1..5 coordinates, got 6"):
        TE.tma_load(k, "%r1", "%rd1", ["%r1"] * 6, "%r2")
    with pytest.raises(TE.TmaEmitError, match="im2col needs a tensor of rank 3..5, got rank 2"):
        TE.tma_load(k, "%r1", "%rd1", ["%r1"] * 2, "%r2", im2col_offsets=[])
    with pytest.raises(TE.TmaEmitError, match="TMA store has no mode '.im2col::w'"):
        TE.tma_store(k, "%rd1", ["%r1"] * 3, "%r1", mode="im2col::w")
    with pytest.raises(TE.TmaEmitError, match="TMA reduce has no mode '.im2col'"):
        TE.tma_reduce(k, "add", "%rd1", ["%r1"] * 3, "%r1", mode=".im2col")
    with pytest.raises(TypeError):
        TE.tma_store(k, "%rd1", ["%r1"] * 2, "%r1", multicast_mask="%h1")  # type: ignore


# ----------------------------------------------------------------------------- exact text
def test_spellings() -> None:
    k = Kernel("k")
    TE.tma_load(k, "%r1", "%rd1", ["%r2", "%r3", "%r4", "%r5"], "%r6",
               im2col_offsets=["%h1", "%h2"], multicast_mask="%h3", cache_policy="%rd2")
    TE.tma_reduce(k, T.TmaReduceKind.TMA_REDUCE_XOR, "%rd1", ["%r2"], "%r1")
    TE.tensormap_replace(k, "%rd1", T.tma_update("stride", "%rd3", 2))
    body = k.emit()
    assert ("cp.async.bulk.tensor.4d.shared::cluster.global.im2col.mbarrier::complete_tx::bytes"
            ".multicast::cluster.L2::cache_hint [%r1], [%rd1, {%r2, %r3, %r4, %r5}], [%r6], "
            "{%h1, %h2}, %h3, %rd2;") in body
    assert ("cp.reduce.async.bulk.tensor.1d.global.shared::cta.xor.tile.bulk_group [%rd1, {%r2}],"
            " [%r1];") in body
    # the map stores rank - 1 strides: dimension 2's stride is ordinal 1
    assert "tensormap.replace.tile.global_stride.global.b1024.b64 [%rd1], 1, %rd3;" in body


def test_lowering_from_atoms() -> None:
    from nvatom.layout import ComposedLayout, Layout

    smem = ComposedLayout("Sw<3,4,3> o 0 o (8,64):(64,1)")
    vmap = T.LayoutType((8, 64), (T.E(1), T.E(0)))
    g = Layout((128, 64), (1, 128))
    ne = T.non_exec_tiled_tma_load(T.TmaLoadMode.TMA_LOAD_NO_MULTICAST, smem, g, vmap,
                                   num_multicast=2)
    ex = T.make_exec_tma(ne, T.MBarrier("bar", offset=8), T.CacheMode.EVICT_FIRST, 0b11)
    st = T.make_exec_tma(T.non_exec_tiled_tma_store(T.TmaStoreMode.TMA_STORE_TILED, smem, g,
                                                    vmap))
    rd = T.make_exec_tma(T.non_exec_tiled_tma_reduce("max", smem, g, vmap, data_type="f16"))
    m = Module("sm_90a", features=("tma", "mbarrier.tx"))
    k = m.kernel("k")
    k.shared("bar", 16, align=8)
    dst, tm, c0, c1 = k.reg("u32"), k.reg("u64"), k.reg("s32"), k.reg("s32")
    TE.lower_tma_load(k, ex, dst, tm, [c0, c1], target="sm_90a")
    TE.lower_tma_store(k, st, dst, tm, [c0, c1])
    TE.lower_tma_reduce(k, rd, dst, tm, [c0, c1])
    body = m.emit()
    assert "mov.u32 %r3, bar+8;" in body
    assert f"mbarrier.arrive.expect_tx.release.cta.shared::cta.b64 _, [%r3], {8 * 64 * 2};" in body
    assert "createpolicy.fractional.L2::evict_first.b64" in body
    assert ".multicast::cluster.L2::cache_hint" in body and "mov.b16 %h0, 3;" in body
    assert body.count("cp.async.bulk.commit_group;") == 2
    assert "cp.reduce.async.bulk.tensor.2d.global.shared::cta.max.tile.bulk_group" in body
    ok, diags = ptxas.check(body, "sm_90a")
    assert ok, diags
    with pytest.raises(TE.TmaEmitError, match="rank 2 but 3 coordinates"):
        TE.lower_tma_load(k, ex, "%r1", "%rd1", ["%r2"] * 3)
    with pytest.raises(TE.TmaEmitError, match="lower_tma_store got a atom.tma_load"):
        TE.lower_tma_store(k, ex, "%r1", "%rd1", ["%r2"] * 2)


# ----------------------------------------------------------------------------- errors
@pytest.mark.parametrize(("call", "match"), [
    (lambda k: TE.tma_load(k, "d", "t", [], "b"), r"takes 1..5 coordinates, got 0"),
    (lambda k: TE.tma_load(k, "d", "t", ["c"] * 4, "b", im2col_offsets=["o"]),
     r"im2col on a rank-4 tensor takes 2 offsets, got 1"),
    (lambda k: TE.tma_load(k, "d", "t", ["c"] * 3, "b", mode="im2col::w",
                          im2col_offsets=["o"]), r"im2col::w on a rank-3 tensor takes 2"),
    (lambda k: TE.tma_load(k, "d", "t", ["c"] * 3, "b", mode=".gather4"), r"no mode '.gather4'"),
    (lambda k: TE.tma_load(k, "d", "t", ["c"] * 2, "b", mode=".tile::gather4"),
     r"takes 5 coordinates, got 2"),
    (lambda k: TE.tma_load(k, "d", "t", ["c"], "b", cta_group=3), r"cta_group 3 is not 1 or 2"),
    (lambda k: TE.tma_load(k, "d", "t", ["c"], "b", mode="im2col::w::128",
                          im2col_offsets=["a", "b"]), r"rank 3..5, got rank 1"),
    (lambda k: TE.tma_load(k, "d", "t", ["c"] * 2, "b", cta_group=2, target="sm_90a"),
     r"\.cta_group::2 is not available on sm_90a"),
    (lambda k: TE.tma_load(k, "d", "t", ["c"] * 2, "b", target="sm_89"),
     r"TMA load \.tile is not available on sm_89 \(needs feature 'tma'\)"),
    (lambda k: TE.tma_store(k, "t", ["c"] * 6, "s"), r"takes 1..5 coordinates, got 6"),
    (lambda k: TE.tma_store(k, "t", ["c"] * 2, "s", mode="im2col_no_offs"),
     r"takes 3..5 coordinates, got 2"),
    (lambda k: TE.tma_reduce(k, "mul", "t", ["c"], "s"),
     r"TMA reduction 'mul' is not one of add, min, max, inc, dec, and, or, xor"),
    (lambda k: TE.tma_reduce(k, "inc", "t", ["c"], "s", data_type="int32"),
     r"TMA reduction 'inc' is not defined on int32 elements \(legal: uint32\)"),
    (lambda k: TE.tma_reduce(k, "add", "t", ["c"], "s", data_type="float64"),
     r"'add' is not defined on float64"),
    (lambda k: TE.mbarrier_init(k, "b", 0), r"arrival count 0 outside 1..1048575"),
    (lambda k: TE.mbarrier_init(k, "b", 1 << 20), r"arrival count 1048576 outside"),
    (lambda k: TE.mbarrier_arrive(k, "b", count=0), r"arrive count 0 outside"),
    (lambda k: TE.mbarrier_arrive_expect_tx(k, "b", -1), r"transaction count -1 outside"),
    (lambda k: TE.mbarrier_expect_tx(k, "b", 1 << 20), r"transaction count 1048576 outside"),
    (lambda k: TE.mbarrier_wait_parity(k, "b", 2), r"phase parity 2 is not 0 or 1"),
    (lambda k: TE.mbarrier_wait_parity(k, "b", 0, scope="gpu"),
     r"scope 'gpu' is not one of 'cta', 'cluster'"),
    (lambda k: TE.mbarrier_arrive_expect_tx(k, "b", 8, scope="sys"), r"scope 'sys'"),
    (lambda k: TE.fence_proxy_async(k, "local"), r"space '.local' is not one of"),
    (lambda k: TE.fence_tensormap_release(k, "warp"), r"scope 'warp'"),
    (lambda k: TE.bulk_wait_group(k, -1), r"count -1 is not a non-negative integer"),
    (lambda k: TE.bulk_wait_group(k, True), r"count True is not"),
    (lambda k: TE.prefetch_tensormap(k, "t", space="global"), r"no state space 'global'"),
    (lambda k: TE.create_policy(k, T.CacheMode.NONE), r"NONE has no cache policy"),
    (lambda k: TE.create_policy(k, "evict_last", 1.5), r"fraction 1.5 outside"),
    (lambda k: TE.tensormap_replace(k, "t", ("stride", 1)), r"is not a TmaUpdate"),
    (lambda k: TE.tensormap_replace(k, "t", T.tma_update("base", "%rd1"), space="local"),
     r"no state space 'local'"),
    (lambda k: TE.tensormap_replace(k, "t", T.tma_update("base", "%rd1"), target="sm_90"),
     r"tensormap.replace is not available on sm_90"),
])
def test_errors(call, match) -> None:
    with pytest.raises(TE.TmaEmitError, match=match):
        call(Kernel("k"))


def test_public_names_kept() -> None:
    """The names the SM90 GEMM kernel builder imports keep working."""
    for name in ("TmaEmitError", "bulk_commit_group", "bulk_wait_group", "fence_mbarrier_init",
                 "fence_proxy_async", "mbarrier_arrive", "mbarrier_arrive_expect_tx",
                 "mbarrier_arrive_remote", "mbarrier_expect_tx", "mbarrier_init",
                 "mbarrier_wait_parity", "prefetch_tensormap", "shared_address", "tma_load",
                 "tma_reduce", "tma_store"):
        assert name in TE.__all__ and callable(getattr(TE, name))
    assert TE.REDUCE_OPS == ("add", "min", "max", "inc", "dec", "and", "or", "xor")
    assert set(TE.LOAD_MODES) >= {"tile", "im2col"}
