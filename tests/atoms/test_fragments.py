"""Every register-MMA fragment against sources that do not share our code.

For every form of ``registry.mma_forms()``, ``form.tv_layout(op)`` is evaluated for all 32
lanes (the 8 threads of a quad-pair for SM70 m8n8k4) and every value, and compared with

(a) the PTX ISA's fragment formulas, transcribed below from the ISA text ("Matrix Fragments
    for mma.m8n8k4 / m8n8k16 / m8n8k32 / m8n8k128 / m16n8k4 / m16n8k8 / m16n8k16 / m16n8k32 /
    m16n8k64 / m16n8k128 / m16n8k256" and the sparse "Matrix Fragments for sparse mma.*"
    sections; the m16n8k16 .f16 C/D row as c0, c1, c2, c3);
(b) CUTLASS's ``MMA_Traits`` TV layouts (CUTLASS 4.2 headers, typed in as known answers with
    the header and traits name), compared with ``layouts_equivalent``;

and checked to be a bijection onto the operand tile, with the register counts of the ISA's
fragment tables (ptxas 13.0 assembles every form with them).
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from nvatom.atoms import fragments_sm70, registry
from nvatom.atoms.fragments import FragmentError, layout_from_function, rowcol_fragment
from nvatom.atoms.mma import MmaForm
from nvatom.layout import Layout, layouts_equivalent, parse_layout, size

FORMS = registry.mma_forms()
RowCol = Callable[[int, int, int], tuple[int, int]]  # (groupID, threadID_in_group, i)


# ------------------------------------------------------------------------ (a) ISA formulas
def _family(t: str) -> str:
    return {"f16": "f16", "bf16": "f16", "tf32": "tf32", "f64": "f64", "s8": "i8", "u8": "i8",
            "e4m3": "i8", "e5m2": "i8", "s4": "i4", "u4": "i4", "b1": "b1"}[t]


def _c_m16(g: int, t: int, i: int) -> tuple[int, int]:
    return g + 8 * (i >= 2), t * 2 + (i & 1)


def _c_m8(g: int, t: int, i: int) -> tuple[int, int]:
    return g, t * 2 + i


# Dense forms.  Each entry gives (row, col) in the ISA's own orientation: A is M x K (row = m),
# B is K x N (row = k), C is M x N.
ISA_DENSE: dict[tuple[str, str, str], RowCol] = {
    # 9.7.14.5.2 m8n8k4 .f64: row = %laneid >> 2, col = %laneid % 4 (A); B transposed.
    ("m8n8k4", "f64", "A"): lambda g, t, i: (g, t),
    ("m8n8k4", "f64", "B"): lambda g, t, i: (t, g),
    ("m8n8k4", "f64", "C"): _c_m8,
    # 9.7.14.5.3 m8n8k16 .s8/.u8
    ("m8n8k16", "i8", "A"): lambda g, t, i: (g, t * 4 + i),
    ("m8n8k16", "i8", "B"): lambda g, t, i: (t * 4 + i, g),
    ("m8n8k16", "i8", "C"): _c_m8,
    # 9.7.14.5.4 m8n8k32 .s4/.u4
    ("m8n8k32", "i4", "A"): lambda g, t, i: (g, t * 8 + i),
    ("m8n8k32", "i4", "B"): lambda g, t, i: (t * 8 + i, g),
    ("m8n8k32", "i4", "C"): _c_m8,
    # 9.7.14.5.5 m8n8k128 .b1
    ("m8n8k128", "b1", "A"): lambda g, t, i: (g, t * 32 + i),
    ("m8n8k128", "b1", "B"): lambda g, t, i: (t * 32 + i, g),
    ("m8n8k128", "b1", "C"): _c_m8,
    # 9.7.14.5.6 m16n8k4 .tf32 and .f64 (same formulas)
    ("m16n8k4", "tf32", "A"): lambda g, t, i: (g + 8 * i, t),
    ("m16n8k4", "tf32", "B"): lambda g, t, i: (t, g),
    ("m16n8k4", "f64", "A"): lambda g, t, i: (g + 8 * i, t),
    ("m16n8k4", "f64", "B"): lambda g, t, i: (t, g),
    # 9.7.14.5.7 m16n8k8: .f16/.bf16; .tf32 and .f64 share theirs
    ("m16n8k8", "f16", "A"): lambda g, t, i: (g + 8 * (i >= 2), t * 2 + (i & 1)),
    ("m16n8k8", "f16", "B"): lambda g, t, i: (t * 2 + i, g),
    ("m16n8k8", "tf32", "A"): lambda g, t, i: (g + 8 * (i % 2), t + 4 * (i >= 2)),
    ("m16n8k8", "tf32", "B"): lambda g, t, i: (t + 4 * i, g),
    ("m16n8k8", "f64", "A"): lambda g, t, i: (g + 8 * (i % 2), t + 4 * (i >= 2)),
    ("m16n8k8", "f64", "B"): lambda g, t, i: (t + 4 * i, g),
    # 9.7.14.5.8 m16n8k16 floating point
    ("m16n8k16", "f16", "A"): lambda g, t, i: (
        g if i in (0, 1, 4, 5) else g + 8, t * 2 + (i & 1) + 8 * (i >= 4)),
    ("m16n8k16", "f16", "B"): lambda g, t, i: (t * 2 + (i & 1) + 8 * (i >= 2), g),
    ("m16n8k16", "f64", "A"): lambda g, t, i: (
        g if i % 2 == 0 else g + 8, i * 2 + t if i % 2 == 0 else i * 2 - 2 + t),
    ("m16n8k16", "f64", "B"): lambda g, t, i: (t + i * 4, g),
    # 9.7.14.5.9 m16n8k16 integer, also .e4m3/.e5m2
    ("m16n8k16", "i8", "A"): lambda g, t, i: (g if i < 4 else g + 8, t * 4 + (i & 3)),
    ("m16n8k16", "i8", "B"): lambda g, t, i: (t * 4 + i, g),
    # 9.7.14.5.10 m16n8k32
    ("m16n8k32", "i4", "A"): lambda g, t, i: (g if i < 8 else g + 8, t * 8 + (i & 7)),
    ("m16n8k32", "i4", "B"): lambda g, t, i: (t * 8 + (i & 7), g),
    ("m16n8k32", "i8", "A"): lambda g, t, i: (
        g if (i < 4 or 8 <= i < 12) else g + 8, t * 4 + (i & 3) + 16 * (i >= 8)),
    ("m16n8k32", "i8", "B"): lambda g, t, i: (t * 4 + (i & 3) + 16 * (i >= 4), g),
    # 9.7.14.5.11 m16n8k64
    ("m16n8k64", "i4", "A"): lambda g, t, i: (
        g if (i < 8 or 16 <= i < 24) else g + 8, t * 8 + (i & 7) + 32 * (i >= 16)),
    ("m16n8k64", "i4", "B"): lambda g, t, i: (t * 8 + (i & 7) + 32 * (i >= 8), g),
    # 9.7.14.5.12 m16n8k128 .b1
    ("m16n8k128", "b1", "A"): lambda g, t, i: (g if i < 32 else g + 8, t * 32 + (i & 0x1F)),
    ("m16n8k128", "b1", "B"): lambda g, t, i: (t * 32 + i, g),
    # 9.7.14.5.13 m16n8k256 .b1.  The ISA prints col = tig * 32 + i for i < 64, which would
    # put a32..a63 of lane t on lane t+1's columns; like m16n8k128 (and CUTLASS), it is
    # (i & 0x1F): a garble in the ISA text (docs/spec-deviations.md, register MMA atoms).
    ("m16n8k256", "b1", "A"): lambda g, t, i: (
        g if (i < 32 or 64 <= i < 96) else g + 8, t * 32 + (i & 0x1F) + 128 * (i >= 64)),
    ("m16n8k256", "b1", "B"): lambda g, t, i: (t * 32 + (i & 0x1F) + 128 * (i >= 32), g),
}

# Sparse forms: A is the compressed M x K/2 operand.  The ISA gives each register's dense
# column range [firstcol, firstcol + w) holding w/2 kept values in order ("as described in
# Sparse matrix storage"), i.e. compressed columns firstcol/2 + [0, w/2).
def _sparse_a(row: Callable[[int, int, int], int], first: Callable[[int, int], int],
              per: int) -> RowCol:
    return lambda g, t, i: (row(g, t, i), first(t, i) // 2 + i % per)


ISA_SPARSE: dict[tuple[str, str, str], RowCol] = {
    # 9.7.14.6.2.1 m16n8k16 .f16/.bf16: row g for a0, a1; firstcol = tig * 4
    ("m16n8k16", "f16", "A"): _sparse_a(lambda g, t, i: g + 8 * (i >= 2),
                                        lambda t, i: t * 4, 2),
    # 9.7.14.6.2.2 m16n8k32 .f16/.bf16: row g for i in [0,2) u [4,6); firstcol tig*4 (+16)
    ("m16n8k32", "f16", "A"): _sparse_a(lambda g, t, i: g if i in (0, 1, 4, 5) else g + 8,
                                        lambda t, i: t * 4 + 16 * (i >= 4), 2),
    # 9.7.14.6.2.4 m16n8k8 .tf32: row g for a0, g + 8 for a1; firstcol = tig * 2
    ("m16n8k8", "tf32", "A"): _sparse_a(lambda g, t, i: g + 8 * i, lambda t, i: t * 2, 1),
    # 9.7.14.6.2.3 m16n8k16 .tf32: row g for a0, a2; firstcol tig*2 (a0, a1), +8 (a2, a3)
    ("m16n8k16", "tf32", "A"): _sparse_a(lambda g, t, i: g + 8 * (i % 2),
                                         lambda t, i: t * 2 + 8 * (i >= 2), 1),
    # 9.7.14.6.2.5 m16n8k32 .u8/.s8: row g for i < 4; firstcol = tig * 8
    ("m16n8k32", "i8", "A"): _sparse_a(lambda g, t, i: g + 8 * (i >= 4), lambda t, i: t * 8, 4),
    # 9.7.14.6.2.6 m16n8k64 .u8/.s8/.e4m3/.e5m2: row g for [0,4) u [8,12); firstcol tig*8 (+32)
    ("m16n8k64", "i8", "A"): _sparse_a(lambda g, t, i: g if (i < 4 or 8 <= i < 12) else g + 8,
                                       lambda t, i: t * 8 + 32 * (i >= 8), 4),
    # 9.7.14.6.2.7 m16n8k64 .u4/.s4: row g for i < 8; firstcol = tig * 16
    ("m16n8k64", "i4", "A"): _sparse_a(lambda g, t, i: g + 8 * (i >= 8), lambda t, i: t * 16, 8),
    # 9.7.14.6.2.8 m16n8k128 .u4/.s4: row g for [0,8) u [16,24); firstcol tig*16 (+64)
    ("m16n8k128", "i4", "A"): _sparse_a(lambda g, t, i: g if (i < 8 or 16 <= i < 24) else g + 8,
                                        lambda t, i: t * 16 + 64 * (i >= 16), 8),
    # B: "same as mma.m16n8k16 / m16n8k8 / m16n8k32 / m16n8k64" where the ISA says so ...
    ("m16n8k16", "f16", "B"): ISA_DENSE[("m16n8k16", "f16", "B")],
    ("m16n8k8", "tf32", "B"): ISA_DENSE[("m16n8k8", "tf32", "B")],
    ("m16n8k32", "i8", "B"): ISA_DENSE[("m16n8k32", "i8", "B")],
    ("m16n8k64", "i4", "B"): ISA_DENSE[("m16n8k64", "i4", "B")],
    # ... and figure-only layouts (Figures 121, 124, 132-135, 142-145), written as the
    # figures draw them: K blocks of one register each, threadID_in_group inside a block.
    ("m16n8k32", "f16", "B"): lambda g, t, i: (8 * (i // 2) + t * 2 + (i & 1), g),
    ("m16n8k16", "tf32", "B"): lambda g, t, i: (4 * i + t, g),
    ("m16n8k64", "i8", "B"): lambda g, t, i: (16 * (i // 4) + t * 4 + (i & 3), g),
    ("m16n8k128", "i4", "B"): lambda g, t, i: (32 * (i // 8) + t * 8 + (i & 7), g),
}

# 9.7.14.5.1 m8n8k4 .f16, per lane of a quad-pair (hi = lane >= 16).
ISA_M8N8K4: dict[tuple[str, str], Callable[[int, int], tuple[int, int]]] = {
    ("A", "row"): lambda lane, i: (lane % 4 + 4 * (lane >= 16), i),
    ("A", "col"): lambda lane, i: (i % 4 + 4 * (lane >= 16), lane % 4),
    ("B", "row"): lambda lane, i: (lane % 4, i + 4 * (lane >= 16)),
    ("B", "col"): lambda lane, i: (i, lane % 4 + 4 * (lane >= 16)),
    ("C", "f16"): lambda lane, i: (lane % 4 + 4 * (lane >= 16), i),
    ("C", "f32"): lambda lane, i: ((lane & 1) + (i & 2) + 4 * (lane >= 16),
                                   (i & 4) + (lane & 2) + (i & 1)),
}

# Figure-only (no formula in the ISA text): checked against the H200 by the sparse GPU probe.
FIGURE_ONLY = {("m16n8k32", "f16", "B"), ("m16n8k16", "tf32", "B"), ("m16n8k64", "i8", "B"),
               ("m16n8k128", "i4", "B")}


def _is_sm70(form: MmaForm) -> bool:
    return form.shape_str == "m8n8k4" and form.a.name == "f16"


def _isa_rowcol(form: MmaForm, op: str) -> RowCol:
    if op in ("C", "D"):
        return _c_m8 if form.m == 8 else _c_m16
    fam = _family(form.a.name if op == "A" else form.b.name)
    table = ISA_SPARSE if form.is_sparse else ISA_DENSE
    return table[(form.shape_str, fam, op)]


def _index(form: MmaForm, op: str, rowcol: tuple[int, int]) -> int:
    """Column-major index into CuTe's codomain: A (M, K'), B (N, K), C (M, N)."""
    r, c = rowcol
    if op == "A":
        return r + form.m * c
    if op == "B":  # the ISA's B is K x N
        return c + form.n * r
    return r + form.m * c


def _tile(form: MmaForm, op: str) -> int:
    k = form.k // 2 if (form.is_sparse and op == "A") else form.k
    return {"A": form.m * k, "B": form.n * k, "C": form.m * form.n, "D": form.m * form.n}[op]


def _layout_values(lay: Layout) -> list[int]:
    return [int(lay(i)) for i in range(size(lay))]


@pytest.mark.parametrize("op", "ABCD")
@pytest.mark.parametrize("form", FORMS, ids=lambda f: f.name)
def test_fragment_matches_isa_formula(form: MmaForm, op: str) -> None:
    lay = form.tv_layout(op)
    if _is_sm70(form):
        thr_id = fragments_sm70.m8n8k4_thr_id()
        acc = form.d.name if op == "D" else form.c.name
        key = (op if op != "D" else "C",
               {"A": form.alayout, "B": form.blayout}.get(op, acc))
        f = ISA_M8N8K4[key]
        for q in range(fragments_sm70.QUAD_PAIRS):
            for t in range(8):
                lane = int(thr_id(t)) + 4 * q
                assert fragments_sm70.m8n8k4_quad_pair(lane) == (q, t)
                for i in range(form.values(op)):
                    assert lay(t, i) == _index(form, op, f(lane, i)), (lane, i)
        return
    f3 = _isa_rowcol(form, op)
    nval = form.values(op)
    assert size(lay) == 32 * nval
    got = _layout_values(lay)
    want = [_index(form, op, f3(lane >> 2, lane % 4, i)) for i in range(nval)
            for lane in range(32)]
    assert got == want


@pytest.mark.parametrize("op", "ABCD")
@pytest.mark.parametrize("form", FORMS, ids=lambda f: f.name)
def test_fragment_is_a_bijection_onto_the_tile(form: MmaForm, op: str) -> None:
    """Every element of the operand tile is held exactly once (no register MMA replicates)."""
    assert sorted(_layout_values(form.tv_layout(op))) == list(range(_tile(form, op)))


# ------------------------------------------------------------------------ (b) CUTLASS
# CUTLASS 4.2 (cutlass_library/source/include/cute/atom/), typed in.  Codomains: A (M,K),
# B (N,K), C (M,N), column-major, as in our layouts.
_SM80_16x8_ROW = "((4,8),(2,2)):((32,1),(16,8))"
_SM80_8x8_ROW = "((4,8),2):((16,1),8)"
_SM80_8x4 = "((4,8),1):((8,1),0)"
_SM80_8x16_ROW = "((4,8),4):((32,1),8)"
CUTLASS: list[tuple[str, str, tuple[int, int, int], tuple[str, ...], str, str]] = [
    # (header, traits, shape, A types, operand, layout)
    ("mma_traits_sm75.hpp", "SM75_16x8x8_F32F16F16F32_TN", (16, 8, 8), ("f16",), "A",
     "((4,8),(2,2)):((32,1),(16,8))"),
    ("mma_traits_sm75.hpp", "SM75_16x8x8_F32F16F16F32_TN", (16, 8, 8), ("f16",), "B",
     "((4,8),2):((16,1),8)"),
    ("mma_traits_sm75.hpp", "SM75_16x8x8_F32F16F16F32_TN", (16, 8, 8), ("f16",), "C",
     "((4,8),(2,2)):((32,1),(16,8))"),
    ("mma_traits_sm75.hpp", "SM75_8x8x16_S32S8S8S32_TN", (8, 8, 16), ("s8", "u8"), "A",
     "((4,8),4):((32,1),8)"),
    ("mma_traits_sm75.hpp", "SM75_8x8x16_S32S8S8S32_TN", (8, 8, 16), ("s8", "u8"), "B",
     "((4,8),4):((32,1),8)"),
    ("mma_traits_sm75.hpp", "SM75_8x8x16_S32S8S8S32_TN", (8, 8, 16), ("s8", "u8"), "C",
     "((4,8),2):((16,1),8)"),
    ("mma_traits_sm80.hpp", "SM80_16x8x8_F16F16F16F16_TN", (16, 8, 8), ("f16", "bf16"), "A",
     _SM80_16x8_ROW),
    ("mma_traits_sm80.hpp", "SM80_16x8x8_F16F16F16F16_TN", (16, 8, 8), ("f16", "bf16"), "B",
     _SM80_8x8_ROW),
    ("mma_traits_sm80.hpp", "SM80_16x8x8_F16F16F16F16_TN", (16, 8, 8), ("f16", "bf16"), "C",
     _SM80_16x8_ROW),
    ("mma_traits_sm80.hpp", "SM80_16x8x16_F32F16F16F32_TN", (16, 8, 16), ("f16", "bf16"), "A",
     "((4,8),(2,2,2)):((32,1),(16,8,128))"),
    ("mma_traits_sm80.hpp", "SM80_16x8x16_F32F16F16F32_TN", (16, 8, 16), ("f16", "bf16"), "B",
     "((4,8),(2,2)):((16,1),(8,64))"),
    ("mma_traits_sm80.hpp", "SM80_16x8x16_F32F16F16F32_TN", (16, 8, 16), ("f16", "bf16"), "C",
     _SM80_16x8_ROW),
    ("mma_traits_sm80.hpp", "SM80_16x8x4_F32TF32TF32F32_TN", (16, 8, 4), ("tf32",), "A",
     "((4,8),2):((16,1),8)"),
    ("mma_traits_sm80.hpp", "SM80_16x8x4_F32TF32TF32F32_TN", (16, 8, 4), ("tf32",), "B",
     _SM80_8x4),
    ("mma_traits_sm80.hpp", "SM80_16x8x4_F32TF32TF32F32_TN", (16, 8, 4), ("tf32",), "C",
     _SM80_16x8_ROW),
    ("mma_traits_sm80.hpp", "SM80_16x8x8_F32TF32TF32F32_TN", (16, 8, 8), ("tf32",), "A",
     "((4,8),(2,2)):((16,1),(8,64))"),
    ("mma_traits_sm80.hpp", "SM80_16x8x8_F32TF32TF32F32_TN", (16, 8, 8), ("tf32",), "B",
     "((4,8),2):((8,1),32)"),
    ("mma_traits_sm80.hpp", "SM80_8x8x4_F64F64F64F64_TN", (8, 8, 4), ("f64",), "A", _SM80_8x4),
    ("mma_traits_sm80.hpp", "SM80_8x8x4_F64F64F64F64_TN", (8, 8, 4), ("f64",), "B", _SM80_8x4),
    ("mma_traits_sm80.hpp", "SM80_8x8x4_F64F64F64F64_TN", (8, 8, 4), ("f64",), "C",
     _SM80_8x8_ROW),
    ("mma_traits_sm80.hpp", "SM80_8x8x16_S32S8S8S32_TN", (8, 8, 16), ("s8", "u8"), "A",
     _SM80_8x16_ROW),
    ("mma_traits_sm80.hpp", "SM80_16x8x16_S32S8S8S32_TN", (16, 8, 16), ("s8", "u8"), "A",
     "((4,8),(4,2)):((64,1),(16,8))"),
    ("mma_traits_sm80.hpp", "SM80_16x8x16_S32S8S8S32_TN", (16, 8, 16), ("s8", "u8"), "B",
     _SM80_8x16_ROW),
    ("mma_traits_sm80.hpp", "SM80_16x8x32_S32S8S8S32_TN", (16, 8, 32), ("s8", "u8"), "A",
     "((4,8),(4,2,2)):((64,1),(16,8,256))"),
    ("mma_traits_sm80.hpp", "SM80_16x8x32_S32S8S8S32_TN", (16, 8, 32), ("s8", "u8"), "B",
     "((4,8),(4,2)):((32,1),(8,128))"),
    ("mma_traits_sm80.hpp", "SM80_8x8x32_S32S4S4S32_TN", (8, 8, 32), ("s4", "u4"), "A",
     "((4,8),8):((64,1),8)"),
    ("mma_traits_sm80.hpp", "SM80_8x8x32_S32S4S4S32_TN", (8, 8, 32), ("s4", "u4"), "B",
     "((4,8),8):((64,1),8)"),
    ("mma_traits_sm80.hpp", "SM80_16x8x32_S32S4S4S32_TN", (16, 8, 32), ("s4", "u4"), "A",
     "((4,8),(8,2)):((128,1),(16,8))"),
    ("mma_traits_sm80.hpp", "SM80_16x8x64_S32S4S4S32_TN", (16, 8, 64), ("s4", "u4"), "A",
     "((4,8),(8,2,2)):((128,1),(16,8,512))"),
    ("mma_traits_sm80.hpp", "SM80_16x8x64_S32S4S4S32_TN", (16, 8, 64), ("s4", "u4"), "B",
     "((4,8),(8,2)):((64,1),(8,256))"),
    ("mma_traits_sm80.hpp", "SM80_8x8x128_S32U1U1S32_TN_XORPOPC", (8, 8, 128), ("b1",), "A",
     "((4,8),32):((256,1),8)"),
    ("mma_traits_sm80.hpp", "SM80_8x8x128_S32U1U1S32_TN_XORPOPC", (8, 8, 128), ("b1",), "B",
     "((4,8),32):((256,1),8)"),
    ("mma_traits_sm80.hpp", "SM80_8x8x128_S32U1U1S32_TN_XORPOPC", (8, 8, 128), ("b1",), "C",
     _SM80_8x8_ROW),
    # The header writes the A value stride as Stride<Stride<_16,_8>> (a nested typo) for (16, 8).
    ("mma_traits_sm80.hpp", "SM80_16x8x128_S32U1U1S32_TN_XORPOPC", (16, 8, 128), ("b1",), "A",
     "((4,8),(32,2)):((512,1),(16,8))"),
    ("mma_traits_sm80.hpp", "SM80_16x8x128_S32U1U1S32_TN_XORPOPC", (16, 8, 128), ("b1",), "B",
     "((4,8),32):((256,1),8)"),
    ("mma_traits_sm80.hpp", "SM80_16x8x256_S32U1U1S32_TN_XORPOPC", (16, 8, 256), ("b1",), "A",
     "((4,8),(32,2,2)):((512,1),(16,8,2048))"),
    ("mma_traits_sm80.hpp", "SM80_16x8x256_S32U1U1S32_TN_XORPOPC", (16, 8, 256), ("b1",), "B",
     "((4,8),(32,2)):((256,1),(8,1024))"),
    ("mma_traits_sm80.hpp", "SM80_16x8x256_S32U1U1S32_TN_XORPOPC", (16, 8, 256), ("b1",), "C",
     _SM80_16x8_ROW),
    ("mma_traits_sm89.hpp", "SM89_16x8x32_F32E4M3E4M3F32_TN", (16, 8, 32), ("e4m3", "e5m2"), "A",
     "((4,8),(4,2,2)):((64,1),(16,8,256))"),
    ("mma_traits_sm89.hpp", "SM89_16x8x32_F32E4M3E4M3F32_TN", (16, 8, 32), ("e4m3", "e5m2"), "B",
     "((4,8),(4,2)):((32,1),(8,128))"),
    ("mma_traits_sm89.hpp", "SM89_16x8x32_F16E4M3E4M3F16_TN", (16, 8, 32), ("e4m3", "e5m2"), "C",
     _SM80_16x8_ROW),
    ("mma_traits_sm90.hpp", "SM90_16x8x4_F64F64F64F64_TN", (16, 8, 4), ("f64",), "A",
     "((4,8),2):((16,1),8)"),
    ("mma_traits_sm90.hpp", "SM90_16x8x4_F64F64F64F64_TN", (16, 8, 4), ("f64",), "B",
     _SM80_8x4),
    ("mma_traits_sm90.hpp", "SM90_16x8x8_F64F64F64F64_TN", (16, 8, 8), ("f64",), "A",
     "((4,8),(2,2)):((16,1),(8,64))"),
    ("mma_traits_sm90.hpp", "SM90_16x8x8_F64F64F64F64_TN", (16, 8, 8), ("f64",), "B",
     "((4,8),2):((8,1),32)"),
    ("mma_traits_sm90.hpp", "SM90_16x8x16_F64F64F64F64_TN", (16, 8, 16), ("f64",), "A",
     "((4,8),(2,4)):((16,1),(8,64))"),
    ("mma_traits_sm90.hpp", "SM90_16x8x16_F64F64F64F64_TN", (16, 8, 16), ("f64",), "B",
     "((4,8),4):((8,1),32)"),
    ("mma_traits_sm90.hpp", "SM90_16x8x16_F64F64F64F64_TN", (16, 8, 16), ("f64",), "C",
     _SM80_16x8_ROW),
    # Sparse m16n8k64 B (the sparse A is drawn in dense K there; see the test below).
    ("mma_traits_sm120_sparse.hpp", "SM120_SPARSE_16x8x64_TN", (16, 8, 64),
     ("e4m3", "e5m2", "s8", "u8"), "B", "((4,8),(4,4)):((32,1),(8,128))"),
]


def _cutlass_cases() -> list[tuple[str, MmaForm, str, str]]:
    out = []
    for header, traits, shape, atypes, op, lay in CUTLASS:
        sparse = "SPARSE" in traits
        forms = [f for f in FORMS if f.shape == shape and f.a.name in atypes
                 and f.is_sparse == sparse and not _is_sm70(f)]
        assert forms, f"no form for {traits}"
        out += [(f"{header}:{traits}", f, op, lay) for f in forms]
    return out


@pytest.mark.parametrize(("traits", "form", "op", "layout"), _cutlass_cases(),
                         ids=lambda x: x.name if isinstance(x, MmaForm) else str(x))
def test_fragment_matches_cutlass(traits: str, form: MmaForm, op: str, layout: str) -> None:
    assert layouts_equivalent(form.tv_layout(op), parse_layout(layout)), traits


# CUTLASS mma_traits_sm70.hpp: SM70_QuadPair, SM70_8x4_Row/Col, SM70_8x8_16b/32b; the
# suffix names A's and B's majors in BLAS terms (T = K-major: A .row, B .col).
SM70_ROW, SM70_COL = "(8,4):(1,8)", "((4,2),4):((8,4),1)"
SM70_TRAITS = {  # (alayout, blayout) -> (suffix, A, B)
    ("row", "col"): ("TN", SM70_ROW, SM70_ROW),
    ("col", "row"): ("NT", SM70_COL, SM70_COL),
    ("col", "col"): ("NN", SM70_COL, SM70_ROW),
    ("row", "row"): ("TT", SM70_ROW, SM70_COL),
}
SM70_C = {"f16": "(8,8):(1,8)", "f32": "((2,2,2),(2,2,2)):((1,16,4),(8,2,32))"}


@pytest.mark.parametrize("form", [f for f in FORMS if _is_sm70(f)], ids=lambda f: f.name)
def test_m8n8k4_matches_cutlass_sm70_traits(form: MmaForm) -> None:
    suffix, a, b = SM70_TRAITS[(form.alayout, form.blayout)]
    assert str(fragments_sm70.m8n8k4_thr_id()) == "(4,2):(1,16)"  # SM70_QuadPair
    assert layouts_equivalent(form.tv_layout("A"), parse_layout(a)), suffix
    assert layouts_equivalent(form.tv_layout("B"), parse_layout(b)), suffix
    assert layouts_equivalent(form.tv_layout("C"), parse_layout(SM70_C[form.c.name]))
    assert layouts_equivalent(form.tv_layout("D"), parse_layout(SM70_C[form.d.name]))


def test_cutlass_sm80_16x8x32_s4_b_layout_is_not_a_fragment() -> None:
    """CUTLASS 4.2 ``SM80_16x8x32_S32S4S4S32_TN::BLayout`` is ``((4,8),8):((32,1),8)``: lane
    strides of 4 K with 8 values each overlap and reach only K < 20 of 32, so it cannot be
    the hardware's.  The ISA (row = tig * 8 + (i & 7)) and CUTLASS's own SM80_8x8x32 s4
    B (lane stride 64) give ours, ``((4,8),8):((64,1),8)``."""
    theirs = parse_layout("((4,8),8):((32,1),8)")
    assert len(set(_layout_values(theirs))) < size(theirs)
    ours = registry.mma_form("sm80.mma.m16n8k32.s32.s4.s4.s32").tv_layout("B")
    assert layouts_equivalent(ours, parse_layout("((4,8),8):((64,1),8)"))


SM120_SPARSE_A = "((4,8),(8,2,2)):((128,1),(16,8,512))"  # (T32,V32) -> dense (M16,K64)


@pytest.mark.parametrize("form", [f for f in FORMS if f.is_sparse and f.k == 64
                                  and f.a.storage_bits == 8], ids=lambda f: f.name)
def test_sparse_k64_a_matches_cutlass_sm120(form: MmaForm) -> None:
    """CUTLASS draws the sparse A in dense K (two logical values per stored one); the stored
    element of our value i is CUTLASS's even value 2 * (i % 4) + 8 * (i // 4)."""
    dense = parse_layout(SM120_SPARSE_A)
    lay = form.tv_layout("A")
    for lane in range(32):
        for i in range(16):
            idx = int(dense(lane, 2 * (i % 4) + 8 * (i // 4)))
            m, k = idx % 16, idx // 16
            assert lay(lane, i) == m + 16 * (k // 2)


# ------------------------------------------------------------------------ registers
# The ISA's fragment tables: registers per operand, keyed by (shape, A family, sparse).
# ptxas 13.0 assembles exactly these: m16n8k16 f16 {2},{4},{2},{2}; m16n8k8 A 2, B 1; m8n8k4 A 2,
# B 2, C/D 8 f32 or 4 f16x2; sparse m16n8k16 A 2, B 2; sparse s8 m16n8k32 A 2, B 2, C 4.
ISA_REGISTERS: dict[tuple[str, str, bool], tuple[int, int]] = {  # -> (A, B)
    ("m8n8k4", "f16", False): (2, 2), ("m8n8k4", "f64", False): (1, 1),
    ("m8n8k16", "i8", False): (1, 1), ("m8n8k32", "i4", False): (1, 1),
    ("m8n8k128", "b1", False): (1, 1),
    ("m16n8k4", "tf32", False): (2, 1), ("m16n8k4", "f64", False): (2, 1),
    ("m16n8k8", "f16", False): (2, 1), ("m16n8k8", "tf32", False): (4, 2),
    ("m16n8k8", "f64", False): (4, 2),
    ("m16n8k16", "f16", False): (4, 2), ("m16n8k16", "f64", False): (8, 4),
    ("m16n8k16", "i8", False): (2, 1), ("m16n8k32", "i8", False): (4, 2),
    ("m16n8k32", "i4", False): (2, 1), ("m16n8k64", "i4", False): (4, 2),
    ("m16n8k128", "b1", False): (2, 1), ("m16n8k256", "b1", False): (4, 2),
    ("m16n8k16", "f16", True): (2, 2), ("m16n8k32", "f16", True): (4, 4),
    ("m16n8k8", "tf32", True): (2, 2), ("m16n8k16", "tf32", True): (4, 4),
    ("m16n8k32", "i8", True): (2, 2), ("m16n8k64", "i8", True): (4, 4),
    ("m16n8k64", "i4", True): (2, 2), ("m16n8k128", "i4", True): (4, 4),
}


def _isa_acc_registers(form: MmaForm, t: str) -> int:
    if form.shape_str == "m8n8k4" and form.a.name == "f16":
        return 8 if t == "f32" else 4
    if form.m == 8:  # m8n8: c0, c1
        return 2
    return 2 if t == "f16" else 4  # m16n8: four s32/f32/f64, or two f16x2


@pytest.mark.parametrize("form", FORMS, ids=lambda f: f.name)
def test_register_counts(form: MmaForm) -> None:
    a, b = ISA_REGISTERS[(form.shape_str, _family(form.a.name), form.is_sparse)]
    assert (form.registers("A"), form.registers("B")) == (a, b)
    assert form.registers("C") == _isa_acc_registers(form, form.c.name)
    assert form.registers("D") == _isa_acc_registers(form, form.d.name)


def test_every_isa_table_entry_is_used() -> None:
    """The transcriptions cover exactly the forms the registry has (nothing stale)."""
    used = set()
    for f in FORMS:
        if _is_sm70(f):
            continue
        table = "S" if f.is_sparse else "D"
        used |= {(table, f.shape_str, _family(f.a.name if op == "A" else f.b.name), op)
                 for op in "AB"}
    want = {("D", *k) for k in ISA_DENSE if k[2] != "C"} | {("S", *k) for k in ISA_SPARSE}
    assert used == want
    assert FIGURE_ONLY <= set(ISA_SPARSE)


# ------------------------------------------------------------------------ helpers
def test_m8n8k4_lanes_and_quad_pairs() -> None:
    lanes = sorted(fragments_sm70.m8n8k4_lane(t, q) for q in range(4) for t in range(8))
    assert lanes == list(range(32))
    # ISA: computation 1 is lanes 0-3 and 16-19, ..., computation 4 lanes 12-15 and 28-31.
    for q in range(4):
        want = list(range(4 * q, 4 * q + 4)) + list(range(16 + 4 * q, 20 + 4 * q))
        assert [fragments_sm70.m8n8k4_lane(t, q) for t in range(8)] == want
    with pytest.raises(FragmentError):
        fragments_sm70.m8n8k4_lane(8)
    with pytest.raises(FragmentError):
        fragments_sm70.m8n8k4_quad_pair(32)


@pytest.mark.parametrize("ctype", ["f16", "f32"])
@pytest.mark.parametrize("op", "ABC")
def test_m8n8k4_warp_fragment_is_the_atom_on_every_quad_pair(op: str, ctype: str) -> None:
    for al in ("row", "col"):
        for bl in ("row", "col"):
            atom = fragments_sm70.m8n8k4_fragment(op, al, bl, ctype)
            warp = fragments_sm70.m8n8k4_warp_fragment(op, al, bl, ctype)
            assert size(warp) == 4 * size(atom)
            for lane in range(32):
                _, t = fragments_sm70.m8n8k4_quad_pair(lane)
                for i in range(size(atom) // 8):
                    assert warp(lane, i) == atom(t, i)


def test_m8n8k4_bad_arguments() -> None:
    with pytest.raises(FragmentError, match="operand"):
        fragments_sm70.m8n8k4_fragment("E", "row", "col", "f32")
    with pytest.raises(FragmentError, match="row or col"):
        fragments_sm70.m8n8k4_fragment("A", "row", "diag", "f32")
    with pytest.raises(FragmentError, match="f16 or f32"):
        fragments_sm70.m8n8k4_fragment("C", "row", "col", "s32")


def test_layout_from_function_rejects_non_layouts() -> None:
    with pytest.raises(FragmentError, match="not a layout"):
        layout_from_function(4, 2, lambda t, v: (t * t) + 4 * v)
    with pytest.raises(FragmentError, match="thread 0, value 0"):
        layout_from_function(4, 2, lambda t, v: 1 + t + 4 * v)
    with pytest.raises(FragmentError):
        rowcol_fragment("A", 32, 8, 16, 16)
