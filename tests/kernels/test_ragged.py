"""Run-time tiles, stage rings and predicated copies (nvatom.kernels.ragged): misuse is a
TensorError naming the use, before any PTX is emitted -- one test per diagnostic -- and the
checks of nvatom.kernels.tensor (element types, swizzle agreement, vectorisation) keep
working on run-time tiles and ring stages.  The kernel built from them is
tests/kernels/test_sm80_gemm_tiled.py (run by the PTX interpreter).
"""

from __future__ import annotations

import pytest

from nvatom.atoms.copy import copy_atom
from nvatom.atoms.registry import mma_form
from nvatom.atoms.smem import smem_layout
from nvatom.atoms.tiled_copy import make_tiled_copy
from nvatom.atoms.tiled_mma import TiledMma, make_tiled_mma
from nvatom.kernels import ragged as R
from nvatom.kernels import tensor as T
from nvatom.layout import Layout
from nvatom.ptx.builder import Kernel, Module, Reg
from nvatom.runtime.ptxas import assemble

FORM = mma_form("sm80.mma.m16n8k16.f32.bf16.bf16.f32")
CP_SS = copy_atom("atom.simt_async_copy<16>.src_size")
ALONG_K = make_tiled_copy(CP_SS, Layout((32, 4), (4, 1)), Layout((1, 8)))
SW64 = smem_layout(64, 32, 16, "K", 64)
SW32 = smem_layout(64, 32, 16, "K", 32)


def _setup() -> tuple[Kernel, TiledMma, list[Reg]]:
    k = Module("sm_80", features=[FORM.feature, "cp.async", "ldmatrix"]).kernel("t")
    k.maxntid = (128, 1, 1)
    sizes = [k.ld_param(k.param(n, "u32")) for n in ("M", "K", "ld", "kt")]
    return k, make_tiled_mma(FORM, (2, 2, 1), (64, 64, 16)), sizes


def _a(k: Kernel, s: list[Reg], dt: str = "bf16") -> R.GmemMatrix:
    return R.gmem_matrix(k, "A", dt, (s[0], s[1]), (s[2], 1))


def test_a_ring_stage_at_a_run_time_index_assembles() -> None:
    k, tiled, s = _setup()
    ring = R.stage_ring(k, "sA", "bf16", SW64, 3)
    R.copy_ragged(k, ALONG_K, _a(k, s).tile_at(k, (64, 32), (0, s[3])), ring.at(k, s[3]))
    copy_emit_wait(k)
    rA = T.fragment(k, tiled, "A", name="rA")
    T.copy(k, copy_atom("atom.ldsm<m8n8.x4>"), ring.at(k, s[3]), rA, tile=(0, 1))
    ptx = k.module.emit()  # type: ignore[union-attr]
    assert "cp.async.cg.shared.global" in ptx and ".b8 sA[12288]" in ptx
    assert assemble(ptx, "sm_80").kernel("t").spills == 0


def copy_emit_wait(k: Kernel) -> None:
    from nvatom.ptx.copy_emit import emit_commit_group, emit_wait_group

    emit_commit_group(k)
    emit_wait_group(k, 0)
    k.ins("bar.sync", 0)


def test_an_extent_must_be_a_u32_register() -> None:
    k, _, s = _setup()
    with pytest.raises(T.TensorError, match=r"extent 0 of gmem matrix 'A' must be a \.u32 "
                       r"register or None, got 64"):
        R.gmem_matrix(k, "A", "bf16", (64, s[1]), (s[2], 1))
    wide = k.reg("u64")
    with pytest.raises(T.TensorError, match=r"extent 1 of gmem matrix 'A' must be .* got "
                       r"%rd\d+ of type \.u64"):
        R.gmem_matrix(k, "A", "bf16", (s[0], wide), (s[2], 1))


def test_a_matrix_needs_a_unit_stride() -> None:
    k, _, s = _setup()
    with pytest.raises(T.TensorError, match=r"one stride must be 1 .* got \(%r\d+, 2\)"):
        R.gmem_matrix(k, "A", "bf16", (s[0], s[1]), (s[2], 2))


def test_a_tile_coordinate_must_be_u32() -> None:
    k, _, s = _setup()
    p, a = k.reg("pred"), _a(k, s)
    with pytest.raises(T.TensorError, match=r"tile coordinate 1 of gmem matrix 'A' must be a "
                       r"\.u32 register or an int >= 0, got %p\d+ of type \.pred"):
        a.tile_at(k, (64, 32), (0, p))
    with pytest.raises(T.TensorError, match=r"a tile takes 2 positive sizes"):
        a.tile_at(k, (64, 32, 1), (0, 0, 0))


def test_a_ring_whose_stages_differ_in_layout() -> None:
    k, _, _ = _setup()
    with pytest.raises(T.TensorError, match=r"ring 'sA': stage 1 has layout Sw<1,.*stage 0 "
                       r"Sw<2,.*every stage of a ring has one layout"):
        R.stage_ring(k, "sA", "bf16", [SW64, SW32], 2)


def test_a_ring_stage_index_must_be_u32() -> None:
    k, _, _ = _setup()
    ring = R.stage_ring(k, "sA", "bf16", SW64, 2)
    with pytest.raises(T.TensorError, match=r"the stage index of ring 'sA' must be a \.u32 "
                       r"register or an int >= 0, got %rd\d+ of type \.u64"):
        ring.at(k, k.reg("u64"))
    with pytest.raises(T.TensorError, match=r"stage 2 of the 2-stage ring 'sA'"):
        ring.stage(k, 2)


def test_a_ring_overflowing_static_shared_memory() -> None:
    k, _, _ = _setup()
    with pytest.raises(T.TensorError, match=r"ring 'sA' \(13 x 4096 bytes\) overflows static "
                       r"shared memory: 53248 bytes of 49152"):
        R.stage_ring(k, "sA", "bf16", SW64, 13)


def test_a_ragged_tile_needs_the_src_size_atom() -> None:
    k, _, s = _setup()
    plain = make_tiled_copy(copy_atom("atom.simt_async_copy<16>"), Layout((32, 4), (4, 1)),
                            Layout((1, 8)))
    ring = R.stage_ring(k, "sA", "bf16", SW64, 2)
    with pytest.raises(T.TensorError, match=r"a ragged tile needs the zero-filling atom "
                       r"'atom.simt_async_copy<16>.src_size'"):
        R.copy_ragged(k, plain, _a(k, s).tile_at(k, (64, 32), (0, 0)), ring.at(k, 0))


def test_interior_takes_a_fragment_copy() -> None:
    k, _, s = _setup()
    ring = R.stage_ring(k, "sA", "bf16", SW64, 2)
    with pytest.raises(T.TensorError, match=r"interior= takes a fragment copy; a cp.async of "
                       r"a ragged tile needs no branch"):
        R.copy_ragged(k, ALONG_K, _a(k, s).tile_at(k, (64, 32), (0, 0)), ring.at(k, 0),
                      interior=True)


def test_element_types_are_checked_on_ragged_tiles() -> None:
    k, _, s = _setup()
    ring = R.stage_ring(k, "sA", "f16", SW64, 2)
    with pytest.raises(T.TensorError, match=r"element types differ, bf16 -> f16"):
        R.copy_ragged(k, ALONG_K, _a(k, s).tile_at(k, (64, 32), (0, s[3])), ring.at(k, s[3]))


def test_the_swizzle_check_holds_for_a_run_time_stage() -> None:
    """Stage 0 written through one swizzle, the stage picked at run time read through another:
    the ring is one buffer record, so the reader is refused whichever stage runs."""
    k, tiled, s = _setup()
    ring = R.stage_ring(k, "sA", "bf16", SW64, 2)
    R.copy_ragged(k, ALONG_K, _a(k, s).tile_at(k, (64, 32), (0, 0)), ring.stage(k, 0))
    other = ring.at(k, s[3]).with_layout(SW32)
    with pytest.raises(T.TensorError, match=r"reads through Sw<1,.*but buffer 'sA' was written "
                       r"through Sw<2,.*the reader's swizzle must be the writer's"):
        T.copy(k, copy_atom("atom.ldsm<m8n8.x4>"), other, T.fragment(k, tiled, "A"))


def test_a_ragged_tile_of_the_wrong_shape() -> None:
    k, _, s = _setup()
    ring = R.stage_ring(k, "sA", "bf16", SW64, 2)
    with pytest.raises(T.TensorError, match=r"shapes differ, \(64, 16\) -> \(64, 32\)"):
        R.copy_ragged(k, ALONG_K, _a(k, s).tile_at(k, (64, 16), (0, 0)), ring.at(k, 0))


def test_fragment_vectors_across_the_contiguous_dimension() -> None:
    """The verifier of nvatom.atoms runs on the tile's stand-in (run-time ld -> 64)."""
    k, tiled, s = _setup()
    acc = T.fragment(k, tiled, "C", name="acc")
    out = T.fragment_like(k, acc, dtype="bf16", name="rD")
    d = R.gmem_matrix(k, "D", "bf16", (s[0], s[1]), (1, s[2]))  # column-major D
    with pytest.raises(T.TensorError, match=r"copy atom.universal_copy<32> from fragment 'rD' "
                       r"into ragged gmem tile 'D': 'atom.universal_copy<32>' cannot "
                       r"vectorize copy to 2 elements \(static strides must be 1\)"):
        R.copy_ragged(k, copy_atom("atom.universal_copy<32>"), out,
                      d.tile_at(k, (64, 64), (0, 0)))


def test_a_ragged_load_of_packed_pairs() -> None:
    k, tiled, s = _setup()
    acc = T.fragment(k, tiled, "C", name="acc")
    r16 = T.fragment_like(k, acc, dtype="bf16", name="r16")
    d = R.gmem_matrix(k, "D", "bf16", (s[0], s[1]), (s[2], 1))
    with pytest.raises(T.TensorError, match=r"a ragged load of packed bf16 pairs could cut a "
                       r"register"):
        R.copy_ragged(k, copy_atom("atom.universal_copy<32>"), d.tile_at(k, (64, 64), (0, 0)),
                      r16)


def test_ldmatrix_is_not_a_ragged_copy() -> None:
    k, tiled, s = _setup()
    with pytest.raises(T.TensorError, match=r"ragged tiles take a tiled cp.async or a "
                       r"universal copy"):
        R.copy_ragged(k, copy_atom("atom.ldsm<m8n8.x4>"), _a(k, s).tile_at(k, (64, 32),
                      (0, 0)), T.fragment(k, tiled, "A"))
