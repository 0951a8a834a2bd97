"""The staged-store pieces of nvatom.kernels.ragged / tensor: a tiled universal copy
(memory -> registers -> memory), ``reuse_rings`` (an epilogue tile over a ring's bytes),
``store_tile`` (a whole smem tile into a gmem tile, 16 bytes a thread) and their refusals.
Every emitted module is assembled by ptxas."""

from __future__ import annotations

import re

import pytest

from nvatom.atoms.copy import copy_atom
from nvatom.atoms.registry import mma_form
from nvatom.atoms.smem import smem_layout, smem_swizzle
from nvatom.atoms.tiled_copy import make_tiled_copy
from nvatom.atoms.tiled_mma import make_tiled_mma
from nvatom.kernels import ragged as R
from nvatom.kernels import tensor as T
from nvatom.layout import Layout
from nvatom.ptx.builder import Kernel, Module, Reg
from nvatom.runtime.ptxas import assemble

FORM = mma_form("sm80.mma.m16n8k16.f32.bf16.bf16.f32")
U128 = copy_atom("atom.universal_copy<128>")
#: a 64 x 64 bf16 tile leaves 16 bytes a thread: 8 threads a row, 16 rows a pass
ROWS = make_tiled_copy(U128, Layout((16, 8), (8, 1)), Layout((1, 8)))
SW128 = smem_layout(64, 64, 16, "K", smem_swizzle("SW128"))
SW64 = smem_layout(64, 64, 16, "K", smem_swizzle("SW64"))


def _setup() -> tuple[Kernel, list[Reg]]:
    k = Module("sm_80", features=[FORM.feature]).kernel("t")
    k.maxntid = (128, 1, 1)
    return k, [k.ld_param(k.param(n, "u32")) for n in ("M", "N", "ld")]


def _d(k: Kernel, s: list[Reg]) -> R.GmemMatrix:
    return R.gmem_matrix(k, "D", "bf16", (s[0], s[1]), (s[2], 1))


def _rings(k: Kernel, stages: int = 2) -> tuple[R.StageRing, ...]:
    return R.stage_rings(k, "smem", "bf16", [("sA", smem_layout(64, 32, 16, "K", 64))], stages)


def _staged(k: Kernel, s: list[Reg], layout: object = SW128) -> T.Tensor:
    """The accumulators of a 64 x 64 tiled MMA, converted, written into a staging tile."""
    tiled = make_tiled_mma(FORM, (2, 2, 1), (64, 64, 16))
    acc = T.fragment(k, tiled, "C", name="acc", zero=True)
    out = T.fragment_like(k, acc, dtype="bf16", name="rD")
    T.convert(k, acc, out)
    sD = R.reuse_rings(k, _rings(k, 4), "sD", "bf16", layout)
    T.copy(k, copy_atom("atom.universal_copy<32>"), out, sD)
    k.ins("bar.sync", 0)
    return sD


def test_store_tile_moves_whole_lines_and_assembles() -> None:
    k, s = _setup()
    sD = _staged(k, s)
    tile = _d(k, s).tile_at(k, (64, 64), (0, 0))
    R.store_tile(k, ROWS, sD, tile)
    ptx = k.module.emit()  # type: ignore[union-attr]
    # 64 x 64 x 2 bytes over 128 threads: 4 accesses of 16 bytes each
    assert len(re.findall(r"ld\.shared\.v4\.b32", ptx)) == 4
    assert len(re.findall(r"st\.global\.v4\.b32", ptx)) == 4
    assert assemble(ptx, "sm_80").kernel("t").spills == 0


def test_a_tiled_universal_copy_between_memory_tensors_assembles() -> None:
    k, s = _setup()
    sD = _staged(k, s)
    g = T.gmem_tensor(k, "G", "bf16", (64, 64), (64, 1))
    T.copy(k, ROWS, sD, g)
    ptx = k.module.emit()  # type: ignore[union-attr]
    assert len(re.findall(r"st\.global\.v4\.b32", ptx)) == 4
    assert assemble(ptx, "sm_80").kernel("t").spills == 0


def test_the_reader_of_a_staged_tile_must_use_the_writers_swizzle() -> None:
    k, s = _setup()
    sD = _staged(k, s)
    with pytest.raises(T.TensorError, match=r"reads through Sw<2,.*but buffer 'sD' was "
                       r"written through Sw<3,.*the reader's swizzle must be the writer's"):
        R.store_tile(k, ROWS, sD.with_layout(SW64), _d(k, s).tile_at(k, (64, 64), (0, 0)))


def test_a_staging_tile_beyond_the_rings() -> None:
    k, _ = _setup()
    rings = _rings(k, 1)  # one 4 KB stage; a 64 x 64 bf16 tile needs 8 KB
    with pytest.raises(T.TensorError, match=r"smem tensor 'sD' .* has 4096 elements \(8192 "
                       r"bytes\), more than rings 'sA' holds \(4096 bytes\)"):
        R.reuse_rings(k, rings, "sD", "bf16", SW128)


def test_store_tile_refusals() -> None:
    k, s = _setup()
    sD = _staged(k, s)
    d = _d(k, s)
    tile = d.tile_at(k, (64, 64), (0, 0))
    cp = make_tiled_copy(copy_atom("atom.simt_async_copy<16>"), Layout((16, 8), (8, 1)),
                         Layout((1, 8)))
    with pytest.raises(T.TensorError, match=r"stores a tile with a tiled universal copy"):
        R.store_tile(k, cp, sD, tile)
    g = T.gmem_tensor(k, "G", "bf16", (64, 64), (64, 1))
    with pytest.raises(T.TensorError, match=r"copies an smem tensor into a gmem tile"):
        R.store_tile(k, ROWS, g, tile)
    with pytest.raises(T.TensorError, match=r"shapes differ, \(64, 64\) -> \(64, 32\)"):
        R.store_tile(k, ROWS, sD, d.tile_at(k, (64, 32), (0, 0)))
    col = R.gmem_matrix(k, "E", "bf16", (s[0], s[1]), (1, s[2]))  # contiguous along dim 0
    # the stand-in's vectors would cross lines: the atom's verifier refuses them
    with pytest.raises(T.TensorError, match=r"into ragged gmem tile 'E': 'atom.universal_copy"
                       r"<128>' cannot vectorize copy to 8 elements"):
        R.store_tile(k, ROWS, sD, col.tile_at(k, (64, 64), (0, 0)))


def test_a_tiled_universal_copy_does_not_take_a_fragment() -> None:
    k, _ = _setup()
    tiled = make_tiled_mma(FORM, (2, 2, 1), (64, 64, 16))
    acc = T.fragment(k, tiled, "C", name="acc")
    g = T.gmem_tensor(k, "G", "f32", (64, 64), (64, 1))
    with pytest.raises(T.TensorError, match=r"from fragment 'acc' into gmem tensor 'G': a tiled "
                       r"copy moves memory to memory; a fragment is copied with the bare atom"):
        T.copy(k, ROWS, acc, g)


def test_a_wider_store_than_the_matrix_is_known_aligned_needs_the_check() -> None:
    """D known only pair-aligned (the host's rule for the SM80 output): 16-byte stores are
    refused unless the kernel branched on ragged.aligned (which it then asserts with
    aligned=True); the predicate assembles for a run-time and a static pitch."""
    k, s = _setup()
    sD = _staged(k, s)
    d4 = R.gmem_matrix(k, "D", "bf16", (s[0], s[1]), (s[2], 1), align=4)
    tile = d4.tile_at(k, (64, 64), (0, 0))
    with pytest.raises(T.TensorError, match=r"16-byte accesses, but gmem matrix 'D' is only "
                       r"known to be 4-byte aligned \(base and line pitch\); branch on "
                       r"ragged.aligned\(k, matrix, 16\) and pass aligned=True"):
        R.store_tile(k, ROWS, sD, tile)
    ok = R.aligned(k, d4, 16)
    k.bra("$done", f"!{ok}", uni=True)
    R.store_tile(k, ROWS, sD, tile, aligned=True)
    k.label("$done")
    static = R.gmem_matrix(k, "E", "bf16", (s[0], s[1]), (72, 1), align=4)
    R.aligned(k, static, 16)  # 144-byte lines: the base decides
    odd = R.gmem_matrix(k, "F", "bf16", (s[0], s[1]), (66, 1), align=4)
    R.aligned(k, odd, 16)  # 132-byte lines: never 16-byte aligned
    ptx = k.module.emit()  # type: ignore[union-attr]
    # run-time pitch, static aligned pitch, static misaligned pitch (a false predicate)
    assert "setp.eq.and.b64" in ptx and "setp.eq.b64" in ptx and "setp.ne.b64" in ptx
    assert assemble(ptx, "sm_80").kernel("t").spills == 0


@pytest.mark.parametrize("align", [0, 3, 24, True, "16"])
def test_a_matrix_alignment_is_a_power_of_two(align: object) -> None:
    k, s = _setup()
    with pytest.raises(T.TensorError, match=r"gmem matrix 'D': align is a power of two of "
                       r"bytes, got"):
        R.gmem_matrix(k, "D", "bf16", (s[0], s[1]), (s[2], 1), align=align)  # type: ignore


def test_ragged_copies_keep_to_the_matrix_alignment() -> None:
    """The same contract for copy_ragged: a fragment's 8-byte f32 pairs into a matrix known
    only 4-byte aligned, and 16-byte cp.async chunks from a matrix known 8-byte aligned, are
    refused by name (the checks run on a stand-in with aligned lines)."""
    k, s = _setup()
    tiled = make_tiled_mma(FORM, (2, 2, 1), (64, 64, 16))
    acc = T.fragment(k, tiled, "C", name="acc", zero=True)
    d = R.gmem_matrix(k, "D", "f32", (s[0], s[1]), (s[2], 1), align=4)
    with pytest.raises(T.TensorError, match=r"into ragged gmem tile 'D': 8-byte accesses, but "
                       r"gmem matrix 'D' is only known to be 4-byte aligned \(base and line "
                       r"pitch\)$"):
        R.copy_ragged(k, copy_atom("atom.universal_copy<64>.v2.b32"), acc,
                      d.tile_at(k, (64, 64), (0, 0)))
    a = R.gmem_matrix(k, "A", "bf16", (s[0], s[1]), (s[2], 1), align=8)
    ring = R.stage_ring(k, "sA", "bf16", smem_layout(64, 32, 16, "K", 64), 2)
    cp = make_tiled_copy(copy_atom("atom.simt_async_copy<16>.src_size"),
                         Layout((32, 4), (4, 1)), Layout((1, 8)))
    with pytest.raises(T.TensorError, match=r"16-byte accesses, but gmem matrix 'A' is only "
                       r"known to be 8-byte aligned"):
        R.copy_ragged(k, cp, a.tile_at(k, (64, 32), (0, 0)), ring.at(k, 0))


@pytest.mark.parametrize("nbytes", [0, 12, 2.0])
def test_an_alignment_to_test_is_a_power_of_two(nbytes: object) -> None:
    k, s = _setup()
    with pytest.raises(T.TensorError, match=r"gmem matrix 'D': alignment .* is not a power of "
                       r"two of bytes"):
        R.aligned(k, _d(k, s), nbytes)  # type: ignore[arg-type]


def test_a_staging_tile_whose_layout_reaches_past_the_rings() -> None:
    """Few elements but a layout with holes: 4096 bf16 (8 KB, the rings' two 4 KB stages)
    whose rows lie 256 bytes apart span 16 KB."""
    k, _ = _setup()
    with pytest.raises(T.TensorError, match=r"spans 16256 bytes, beyond the 8192 bytes of the "
                       r"rings 'sA' it reuses"):
        R.reuse_rings(k, _rings(k, 2), "sD", "bf16", Layout((64, 64), (128, 1)))


def test_a_tiled_copy_of_another_atom_is_refused() -> None:
    """Tiled copies emit cp.async or universal ld/st; an ldmatrix repeated over threads is
    applied to a fragment with the bare atom instead."""
    k, s = _setup()
    tc = make_tiled_copy(copy_atom("atom.ldsm<m8n8.x4>"), Layout((16, 8), (8, 1)),
                         Layout((1, 8)))
    g = T.gmem_tensor(k, "G", "bf16", (64, 64), (64, 1))
    with pytest.raises(T.TensorError, match=r"a tiled copy of atom.ldsm<m8n8.x4> is not "
                       r"emitted here \(cp.async or a universal copy\)"):
        T.copy(k, tc, _staged(k, s), g)
