"""The production SM80 GEMM (nvatom.kernels.gemm_sm80, what ``nvatom.gemm(provider="sm80")``
launches) run on the CPU by the PTX interpreter (tests/kernels/ptx_interp.py), against numpy.

Every storage order of A and B, both shipped tilings, every output type, on ragged problems:
M, N and K that are not multiples of the tile (a partial last k-tile included), within one
CTA tile and spanning several, where only the corner CTAs run (the CTA index -> tile order
below is the group-M raster, written here from its definition).  The storage of A, B and D
is padded to the leading dimensions with NaN: a chunk that reads past K, M or N (a wrong
src-size) makes D NaN, a store outside the CTA's tile or outside M x N leaves a non-NaN where
D must stay NaN; the interpreter fails a cp.async whose source is not inside its array, even
one that reads nothing (src-size 0), or that is not 16-byte aligned.  Small integer inputs
keep every product, sum and rounding exact, so D must equal the float64 product exactly.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable

import numpy as np
import pytest

from nvatom.kernels.gemm_sm80 import GemmSm80Config, GemmSm80Spec, emit_ptx
from tests.kernels.ptx_interp import Machine, planted_bugs

BIG = GemmSm80Config()  # 128 x 128 x 32, 2 x 2 warps, 4 stages, group 8: the default
WIDE = GemmSm80Config(bm=64, bn=128, bk=64, warps_m=1, warps_n=2, stages=3)
SMALL = GemmSm80Config(bm=32, bn=64, bk=32, warps_m=2, warps_n=1, stages=2, group_m=2)


def _ld(n: int) -> int:
    return -(-n // 8) * 8 + 8  # 16-byte rows of 16-bit elements, with NaN padding


def _tile_of(cta: int, tiles_m: int, tiles_n: int, group: int) -> tuple[int, int]:
    """Group-M raster: groups of ``group`` M tiles (fewer in the last), M fastest within a
    group, the groups one after the other."""
    per_group = group * tiles_n
    first = cta // per_group * group
    size = min(tiles_m - first, group)
    return first + cta % per_group % size, cta % per_group // size


def _run(spec: GemmSm80Spec, m: int, n: int, kk: int, *, corners: int = 0, seed: int = 0,
         plant: Callable[[str], str] = lambda p: p, ldd: int | None = None) -> None:
    """Run the CTAs of the grid (``corners`` 4: the four corner tiles'; 2: the first and the
    last tile's) and compare D with the product where they write, NaN elsewhere."""
    rng = np.random.default_rng(seed)
    a = rng.integers(-2, 3, (m, kk)).astype(np.float64)
    b = rng.integers(-2, 3, (kk, n)).astype(np.float64)

    def stored(x: np.ndarray) -> tuple[np.ndarray, int]:  # row-major, NaN past the columns
        ld = _ld(x.shape[1])
        mem = np.full((x.shape[0], ld), np.nan)
        mem[:, :x.shape[1]] = x
        return mem.ravel(), ld

    a_mem, lda = stored(a if spec.a_major == "K" else a.T)
    b_mem, ldb = stored(b if spec.b_major == "N" else b.T)
    ldd = _ld(n) if ldd is None else ldd
    d = np.full(m * ldd, np.nan)
    params = {"A": (a_mem, 2), "B": (b_mem, 2), "D": (d, spec.out_bytes), "M": m, "N": n,
              "K": kk, "lda": lda, "ldb": ldb, "ldd": ldd}
    cfg = spec.config
    mach = Machine(plant(emit_ptx(spec)), params, threads=cfg.threads,
                   dynamic_smem=cfg.smem_bytes())
    tiles = (-(-m // cfg.bm), -(-n // cfg.bn))
    ctas = range(spec.grid(m, n)[0])
    want = np.full((m, ldd), np.nan)
    ref = a @ b
    for cta in ctas:
        tm, tn = _tile_of(cta, *tiles, cfg.group_m)
        edges = (tm in (0, tiles[0] - 1), tn in (0, tiles[1] - 1))
        ends = (tm, tn) in ((0, 0), (tiles[0] - 1, tiles[1] - 1))
        if (corners == 4 and not all(edges)) or (corners == 2 and not ends):
            continue
        mach.run((cta, 0))
        rows, cols = slice(tm * cfg.bm, (tm + 1) * cfg.bm), slice(tn * cfg.bn, (tn + 1) * cfg.bn)
        want[rows, :n][:, cols] = ref[rows, cols]
    got = d.reshape(m, ldd)
    assert np.isnan(got[:, n:]).all(), "a store past N"
    np.testing.assert_array_equal(got, want)  # NaN where no CTA that ran may write


@pytest.mark.parametrize(("a_major", "b_major"), [("K", "N"), ("K", "K"), ("M", "N"),
                                                  ("M", "K")])
@pytest.mark.parametrize(("config", "dtypes"), [(BIG, ("bf16", "bf16")),
                                                (WIDE, ("f16", "f32"))],
                         ids=["128x128x32", "64x128x64"])
def test_ragged_problem_within_a_tile(a_major: str, b_major: str, config: GemmSm80Config,
                                      dtypes: tuple[str, str]) -> None:
    """M = 77, N = 46, K = 40: ragged in every dimension, K in two k-tiles of 32 (the second
    partial) or one partial of 64; every CTA of the grid (one, or two M tiles of 64)."""
    _run(GemmSm80Spec(*dtypes, a_major, b_major, config), 77, 46, 40)


@pytest.mark.parametrize(("config", "dtypes", "majors", "shape", "corners"), [
    (BIG, ("bf16", "f32"), ("K", "N"), (300, 270, 100), 2),
    (BIG, ("f16", "f16"), ("M", "K"), (300, 270, 100), 2),
    (WIDE, ("bf16", "bf16"), ("M", "N"), (150, 270, 136), 2),
    (WIDE, ("f16", "f32"), ("K", "K"), (150, 270, 136), 2),
    (SMALL, ("bf16", "bf16"), ("M", "N"), (100, 150, 75), 4),
    # the blocked warp order (each warp one contiguous block; atoms.tiled_mma.WARP_ORDERS)
    (dataclasses.replace(BIG, warp_order="blocked"), ("bf16", "bf16"), ("K", "N"),
     (300, 270, 100), 2),
    (dataclasses.replace(WIDE, warp_order="blocked"), ("f16", "f32"), ("M", "K"),
     (150, 270, 136), 2),
    # the direct epilogue (the fragments' pairs straight to gmem on interior tiles too)
    (dataclasses.replace(BIG, epilogue="direct"), ("bf16", "bf16"), ("K", "N"),
     (300, 270, 100), 2),
    (dataclasses.replace(WIDE, epilogue="direct"), ("f16", "f32"), ("K", "K"),
     (150, 270, 136), 2),
], ids=["128-KN", "128-MK", "64-MN", "64-KK", "32-MN", "128-KN-blocked", "64-MK-blocked",
        "128-KN-direct", "64-KK-direct"])
def test_ragged_problem_spanning_tiles(config: GemmSm80Config, dtypes: tuple[str, str],
                                       majors: tuple[str, str], shape: tuple[int, int, int],
                                       corners: int) -> None:
    """Several tiles along M and N (3 x 3; 4 x 3 with group-M 2), the last ones ragged, and
    K over several k-tiles with a partial last one: the first and the last tile's CTAs run
    (all four corners' on the small tiling)."""
    _run(GemmSm80Spec(*dtypes, *majors, config), *shape, corners=corners, seed=sum(shape))


_PLANTED = {
    **planted_bugs(BIG.stages),
    "a chunk past the tensor keeps its address": lambda p: re.sub(
        r"selp\.b64 (%rd\d+), (%rd\d+), %rd\d+, %p\d+;", r"mov.b64 \1, \2;", p),
}


@pytest.mark.parametrize("bug", sorted(_PLANTED))
def test_the_interpreter_catches_planted_bugs(bug: str) -> None:
    """The check is not vacuous: each planted PTX bug fails it (an address past the tensor,
    NaN padding read, a stage read before it lands, a store past M or N, K cut short)."""
    with pytest.raises(AssertionError):
        _run(GemmSm80Spec("bf16", "bf16", "K", "N", BIG), 77, 46, 100,
             plant=_PLANTED[bug])


#: Edits that break one path of the epilogue: a uniform branch on the tile's origin sends an
#: interior tile to stores without predicates and an edge tile to the predicated ones.
_ONE_PATH = {
    "every tile takes the interior path": lambda p: re.sub(
        r"@!%p\d+ bra\.uni \$EDGE_TILE_\d+;", "", p),
    "the interior path stores nothing": lambda p: re.sub(
        r"\n\s*st\.global[^;]*;", "", p),
    # the staged epilogue (the default): smem words written, read back 16 bytes at a time
    "the staging tile is never written": lambda p: re.sub(r"\n\s*st\.shared[^;]*;", "", p),
    "a staged read's words in the wrong order": lambda p: re.sub(
        r"ld\.shared\.v4\.b32 \{(%r\d+), (%r\d+), (%r\d+), (%r\d+)\}",
        r"ld.shared.v4.b32 {\2, \1, \3, \4}", p, count=1),
    "one staged store missing": lambda p: re.sub(
        r"\n\s*st\.global\.v4\.b32[^;]*;", "", p, count=1),
}


@pytest.mark.parametrize("bug", [None, *sorted(_ONE_PATH)])
def test_interior_and_edge_tiles_take_their_paths(bug: str | None) -> None:
    """Tile (0, 0) of a 300 x 270 problem lies inside M and N, the last one does not: the
    first stores through the unpredicated sequence, the last through the predicated one.
    Both run and are checked: removing the interior path's stores fails the run (the
    interior tile took it), and so does sending the edge tile down it."""
    spec = GemmSm80Spec("bf16", "bf16", "K", "N", BIG)
    plant = (lambda p: p) if bug is None else _ONE_PATH[bug]
    if bug is None:
        _run(spec, 300, 270, 40, corners=2, plant=plant)
    else:
        with pytest.raises(AssertionError):
            _run(spec, 300, 270, 40, corners=2, plant=plant)


#: the staged epilogue's run-time alignment test ignored: interior tiles store 16 bytes at
#: a time whatever D's pitch
_NO_ALIGNMENT_TEST = {"the staged path ignores D's alignment": lambda p: re.sub(
    r"and\.pred (%p\d+), (%p\d+), %p\d+;(\s*@!\1 bra\.uni \$EDGE_TILE)",
    r"and.pred \1, \2, \2;\3", p)}


@pytest.mark.parametrize("bug", [None, *_NO_ALIGNMENT_TEST])
def test_a_d_pitch_not_16_byte_aligned_takes_the_pair_stores(bug: str | None) -> None:
    """D need only be pair-aligned (the host's rule): with a pitch of 258 bf16 (516 bytes)
    every interior tile takes the predicated pair stores, since a 16-byte store there would
    be misaligned (it faults on the GPU; the interpreter checks every store's alignment);
    with the run-time check planted away the run fails."""
    spec = GemmSm80Spec("bf16", "bf16", "K", "N", BIG)
    if bug is None:
        _run(spec, 256, 256, 64, ldd=258)
    else:
        with pytest.raises(AssertionError, match="not 16-byte aligned"):
            _run(spec, 256, 256, 64, ldd=258, plant=_NO_ALIGNMENT_TEST[bug])


def test_a_problem_of_interior_tiles_only() -> None:
    """M and N multiples of the tile: every CTA takes the unpredicated stores (f32 pairs)."""
    _run(GemmSm80Spec("f16", "f32", "M", "K", WIDE), 128, 256, 72)
