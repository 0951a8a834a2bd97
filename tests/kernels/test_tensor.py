"""Typed tensors in the kernel builder (nvatom.kernels.tensor): misuse is a TensorError naming
the tensors, the atom and the mismatch -- before any PTX is emitted.

The first three cases are the mistakes a new user made writing the 64 x 64 sm_80 tile with
raw addresses (PTX that ptxas accepts, wrong results): a wrong thread layout for ldmatrix, a
reader swizzle other than the writer's, a wrong register element type.  The rest are the other
ways to compose the pieces wrongly.  Facts in the expected texts come from the PTX ISA (cp.async
is an sm_80 instruction of 16 bytes; ldmatrix rows are 16 bytes; m16n8k16 bf16 takes bf16 A/B
and f32 C/D; static shared memory is 48 KB) or from the arguments of the case.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import pytest

from nvatom.atoms.copy import copy_atom
from nvatom.atoms.registry import mma_form
from nvatom.atoms.smem import smem_layout
from nvatom.atoms.tiled_copy import make_tiled_copy
from nvatom.atoms.tiled_mma import TiledMma, make_tiled_mma
from nvatom.kernels import partition as P
from nvatom.kernels import tensor as T
from nvatom.layout import ComposedLayout, Layout, Swizzle
from nvatom.ptx.builder import Kernel, Module
from nvatom.runtime.ptxas import assemble

FORM = mma_form("sm80.mma.m16n8k16.f32.bf16.bf16.f32")
CP = copy_atom("atom.simt_async_copy<16>")
CP_A = make_tiled_copy(CP, Layout((32, 4), (4, 1)), Layout((1, 8)))  # 32 x 32 per pass
LDSM_X4 = copy_atom("atom.ldsm<m8n8.x4>")
SW64 = smem_layout(64, 32, 16, "K", 64)  # 64 x 32 bf16, K-major: 64-byte rows
SW32 = smem_layout(64, 32, 16, "K", 32)


def _setup(target: str = "sm_80") -> tuple[Kernel, TiledMma]:
    feats = [FORM.feature, "cp.async", "ldmatrix"] if target >= "sm_80" else []
    k = Module(target, features=feats).kernel("t")
    k.maxntid = (128, 1, 1)
    return k, make_tiled_mma(FORM, (2, 2, 1), (64, 64, 16))


def _frags(k: Kernel, tiled: TiledMma, **dtypes: str) -> tuple[T.Tensor, ...]:
    return tuple(T.fragment(k, tiled, op, name=n, dtype=dtypes.get(n))
                 for op, n in (("A", "rA"), ("B", "rB"), ("C", "acc")))


def _gA(k: Kernel, shape: tuple[int, int] = (64, 32), dt: str = "bf16") -> T.Tensor:
    return T.gmem_tensor(k, "A", dt, shape, (shape[1], 1))


# --------------------------------------------------------------------------- the three mistakes


def mistake_ldsm_thread_layout() -> None:
    """The fragment declared with one atom's layout (32 lanes) for a 4-warp tiled MMA."""
    k, tiled = _setup()
    s_a = T.smem_tensor(k, "sA", "bf16", SW64)
    r_a = T.fragment(k, tiled, "A", name="rA", layout=FORM.tv_layout("A"))
    T.copy(k, LDSM_X4, s_a, r_a)


def mistake_ldsm_without_trans() -> None:
    """B is N-major in shared memory: ldmatrix without .trans does not produce its fragment."""
    k, tiled = _setup()
    s_b = T.smem_tensor(k, "sB", "bf16", smem_layout(64, 32, 16, "MN", 128))
    T.copy(k, copy_atom("atom.ldsm<m8n8.x2>"), s_b, T.fragment(k, tiled, "B", name="rB"))


def mistake_reader_swizzle() -> None:
    k, tiled = _setup()
    s_a = T.smem_tensor(k, "sA", "bf16", SW64)
    T.copy(k, CP_A, _gA(k), s_a)
    T.copy(k, LDSM_X4, s_a.with_layout(SW32, "sA_read"), T.fragment(k, tiled, "A", name="rA"))


def mistake_register_type() -> None:
    k, tiled = _setup()
    r_a, r_b, acc = _frags(k, tiled, rA="f16")
    T.mma(k, tiled, acc, r_a, r_b, acc)


def mistake_register_type_at_the_load() -> None:
    k, tiled = _setup()
    s_a = T.smem_tensor(k, "sA", "bf16", SW64)
    T.copy(k, LDSM_X4, s_a, T.fragment(k, tiled, "A", name="rA", dtype="f16"))


# --------------------------------------------------------------------------- more misuse


def gmem_for_ldmatrix() -> None:
    k, tiled = _setup()
    T.copy(k, LDSM_X4, _gA(k), T.fragment(k, tiled, "A", name="rA"))


def cp_async_the_wrong_way() -> None:
    k, _ = _setup()
    T.copy(k, CP_A, T.smem_tensor(k, "sA", "bf16", SW64), _gA(k))


def cp_async_misaligned_rows() -> None:
    """Rows of 36 bf16 are 72 bytes apart: row 1 (thread 4's chunk) is not 16-byte aligned."""
    k, _ = _setup()
    T.copy(k, CP_A, _gA(k, (64, 36)).tile((64, 32), (0, 0)), T.smem_tensor(k, "sA", "bf16", SW64))


def cp_async_on_sm75() -> None:
    k, _ = _setup("sm_75")
    T.copy(k, CP_A, _gA(k), T.smem_tensor(k, "sA", "bf16", SW64))


def copy_converts() -> None:
    k, _ = _setup()
    T.copy(k, CP_A, _gA(k, dt="f16"), T.smem_tensor(k, "sA", "bf16", SW64))


def cp_async_wider_than_each_threads_values() -> None:
    """Each thread owns 4 consecutive bf16 (8 bytes); a 16-byte cp.async moves 8."""
    k, _ = _setup()
    narrow = make_tiled_copy(CP, Layout((32, 4), (4, 1)), Layout((1, 4)))
    T.copy(k, narrow, T.gmem_tensor(k, "A", "bf16", (32, 16), (16, 1)),
           T.smem_tensor(k, "sA", "bf16", Layout((32, 16), (16, 1))))


def copy_partition_of_other_threads() -> None:
    k, _ = _setup()
    half = make_tiled_copy(CP, Layout((16, 4), (4, 1)), Layout((1, 8)))
    T.copy(k, half, _gA(k), T.smem_tensor(k, "sA", "bf16", SW64))


def fragment_register_count() -> None:
    k, tiled = _setup()
    r_a, r_b, acc = _frags(k, tiled)
    T.mma(k, tiled, acc, r_a, r_b, dataclasses.replace(acc, regs=acc.regs[:16], name="acc16"))


def mma_shape_mismatch() -> None:
    k, tiled = _setup()
    k8 = make_tiled_mma(mma_form("sm80.mma.m16n8k8.f32.bf16.bf16.f32"), (2, 2, 1), (64, 64, 8))
    r_a, r_b, acc = _frags(k, k8)
    T.mma(k, tiled, acc, r_a, r_b, acc)


def b_type_not_the_forms() -> None:
    k, tiled = _setup()
    r_a, r_b, acc = _frags(k, tiled, rB="f16")
    T.mma(k, tiled, acc, r_a, r_b, acc)


def accumulator_type() -> None:
    k, tiled = _setup()
    r_a, r_b, acc = _frags(k, tiled, acc="f16")
    T.mma(k, tiled, acc, r_a, r_b, acc)


def gmem_as_mma_operand() -> None:
    k, tiled = _setup()
    _, r_b, acc = _frags(k, tiled)
    T.mma(k, tiled, acc, _gA(k, (64, 16)), r_b, acc)


def static_smem_overflow() -> None:
    k, _ = _setup()
    for i in range(7):  # 7 x 8 KB > 48 KB
        T.smem_tensor(k, f"s{i}", "bf16", smem_layout(64, 64, 16, "K", 128))


def smem_tensor_of_a_huge_layout() -> None:
    """Fuzz finding (issue 28's campaign): 2^31 elements were evaluated one by one (a hang)
    before the 48 KB check; the element count is checked first."""
    k, _ = _setup()
    T.smem_tensor(k, "sHuge", "bf16", Layout((1 << 16, 1 << 15), (1 << 15, 1)))


def huge_view_of_a_buffer() -> None:
    k, _ = _setup()
    T.smem_tensor(k, "sA", "bf16", SW64).with_layout(Layout((1 << 16, 1 << 15), (1 << 15, 1)),
                                                      "view")


def fragment_past_the_register_file() -> None:
    """Fuzz finding: a (thread, value) layout of 2^31 values allocated one register each."""
    k, tiled = _setup()
    T.fragment(k, tiled, "A", name="rHuge", layout=Layout((128, 1 << 24), (1 << 24, 1)))


def fragment_of_more_threads_than_a_cta() -> None:
    k, tiled = _setup()
    T.fragment(k, tiled, "A", name="rWide", layout=Layout((1 << 31, 2), (2, 1)))


def fragment_layout_not_thread_value() -> None:
    k, tiled = _setup()
    T.fragment(k, tiled, "A", name="rFlat", layout=Layout(64, 1))


def tensor_out_of_its_buffer() -> None:
    k, _ = _setup()
    # 1,024 elements (2 KB) fit the 4 KB buffer, but the row stride spans
    # (31 * 128 + 31 + 1) x 2 = 8,000 bytes
    T.smem_tensor(k, "sA", "bf16", SW64).with_layout(Layout((32, 32), (128, 1)), "big")


def copy_width_does_not_hold_elements() -> None:
    k, tiled = _setup()
    out = T.fragment_like(k, T.fragment(k, tiled, "C", name="acc"), dtype="bf16", name="rD")
    T.copy(k, copy_atom("atom.universal_copy<8>"), out, T.gmem_tensor(k, "D", "bf16", (64, 64),
                                                                        (64, 1)))


def copy_width_does_not_vectorize() -> None:
    """Accumulator values 2 and 3 are 8 rows below 0 and 1: no 4-wide vector."""
    k, tiled = _setup()
    acc = T.fragment(k, tiled, "C", name="acc")
    T.copy(k, copy_atom("atom.universal_copy<128>"), acc,
           T.gmem_tensor(k, "D", "f32", (64, 64), (64, 1)))


def second_writer_other_swizzle() -> None:
    k, _ = _setup()
    s_a, g_a = T.smem_tensor(k, "sA", "bf16", SW64), _gA(k)
    T.copy(k, CP_A, g_a, s_a)
    T.copy(k, CP_A, g_a, s_a.with_layout(SW32, "sA_sw32"))


def tmem_on_sm80() -> None:
    k, _ = _setup()
    T.tmem_tensor(k, "tAcc", "f32", Layout((128, 64), (1, 128)))


def tile_outside_the_tensor() -> None:
    k, _ = _setup()
    _gA(k, (64, 64)).tile((64, 32), (0, 2))


def ldsm_k_step_outside() -> None:
    k, tiled = _setup()
    s_a = T.smem_tensor(k, "sA", "bf16", SW64)
    T.copy(k, LDSM_X4, s_a, T.fragment(k, tiled, "A", name="rA"), tile=(0, 2))


def swizzle_splits_ldmatrix_rows() -> None:
    """Sw<2,2,3> permutes 4-element units: a 16-byte row (8 bf16) does not stay whole."""
    k, tiled = _setup()
    lay = ComposedLayout(Swizzle(2, 2, 3), 0, Layout((64, 32), (32, 1)))
    T.copy(k, LDSM_X4, T.smem_tensor(k, "sA", "bf16", lay), T.fragment(k, tiled, "A", name="rA"))


def ldsm_into_a_short_fragment() -> None:
    k, tiled = _setup()
    r_a = T.fragment(k, tiled, "A", name="rA")
    T.copy(k, LDSM_X4, T.smem_tensor(k, "sA", "bf16", SW64),
           dataclasses.replace(r_a, regs=r_a.regs[:4], name="rA4"))


def epilogue_on_packed_registers() -> None:
    k, tiled = _setup()
    out = T.fragment_like(k, T.fragment(k, tiled, "C", name="acc"), dtype="bf16", name="rD")
    T.elementwise(k, "max.f32", out, out, 0.0)


CASES: list[tuple[Callable[[], None], str]] = [
    (mistake_ldsm_thread_layout,
     "copy atom.ldsm<m8n8.x4> from smem tensor 'sA' into fragment 'rA': expects Mma atom "
     "layout of (((4,8),(2,2,1)),((2,2,2),(2,1))):(((128,1),(16,0,1024)),((64,8,512),"
     "(32,1024))) for operand A, but got ((4,8),(2,2,2)):((32,1),(16,8,128))"),
    (mistake_ldsm_without_trans,
     "copy atom.ldsm<m8n8.x2> from smem tensor 'sB' into fragment 'rB': the atom's thread "
     "layout (32,(2,2)):(2,(1,64)) does not produce operand B of "
     "sm80.mma.m16n8k16.f32.bf16.bf16.f32 ((4,8),(2,2)):((16,1),(8,64)) from a N-major tile"),
    (mistake_reader_swizzle,
     "copy atom.ldsm<m8n8.x4> from smem tensor 'sA_read' into fragment 'rA': reads through "
     "Sw<1,3,3> o 0 o ((8,8),(16,2)):((16,128),(1,1024)), but buffer 'sA' was written through "
     "Sw<2,3,3> o 0 o ((8,8),(32,1)):((32,256),(1,0)) (by 'sA'): the reader's swizzle must be "
     "the writer's"),
    (mistake_register_type,
     "mma sm80.mma.m16n8k16.f32.bf16.bf16.f32 on fragment 'rA', fragment 'rB', fragment 'acc' "
     "-> fragment 'acc': expects operand a with element type bf16, but get f16."),
    (mistake_register_type_at_the_load,
     "copy atom.ldsm<m8n8.x4> from smem tensor 'sA' into fragment 'rA': element types differ, "
     "bf16 -> f16 (a copy does not convert; use convert)"),
    (gmem_for_ldmatrix,
     "copy atom.ldsm<m8n8.x4> from gmem tensor 'A' into fragment 'rA': ldmatrix reads shared "
     "memory, not gmem tensor 'A' (bf16, (64,32):(32,1))"),
    (cp_async_the_wrong_way,
     "copy atom.simt_async_copy<16> from smem tensor 'sA' into gmem tensor 'A': "
     "'atom.simt_async_copy<16>' copies gmem -> smem, but got src: memref<bf16, smem, 8:1>, "
     "dst: memref<bf16, gmem, 8:1>"),
    (cp_async_misaligned_rows,
     "copy atom.simt_async_copy<16> from gmem tensor 'A' into smem tensor 'sA': thread 4's "
     "access 0 at byte 72 of gmem tensor 'A' (bf16, (64,32):(36,1)) is not 8 contiguous "
     "elements on a 16-byte boundary"),
    (cp_async_on_sm75,
     "copy atom.simt_async_copy<16> from gmem tensor 'A' into smem tensor 'sA': atom "
     "'atom.simt_async_copy<16>' needs tier SM80, but target sm_75 is tier SM75"),
    (copy_converts,
     "copy atom.simt_async_copy<16> from gmem tensor 'A' into smem tensor 'sA': element types "
     "differ, f16 -> bf16"),
    (cp_async_wider_than_each_threads_values,
     "copy atom.simt_async_copy<16> from gmem tensor 'A' into smem tensor 'sA': "
     "'atom.simt_async_copy<16>' cannot vectorize copy to 8 elements (static strides must be 1)"),
    (copy_partition_of_other_threads,
     "the atom's partition spans 64 threads, the kernel 't' runs 128 (.maxntid)"),
    (fragment_register_count,
     "-> fragment 'acc': fragment 'acc16' has 16 registers, operand C needs 32"),
    (mma_shape_mismatch,
     "atom 'sm80.mma.m16n8k16.f32.bf16.bf16.f32' has shape (16, 8, 16), but the use has shape "
     "(16, 8, 8)"),
    (b_type_not_the_forms, "expects operand b with element type bf16, but get f16."),
    (accumulator_type, "expects operand c with element type f32, but get f16."),
    (gmem_as_mma_operand,
     "mma sm80.mma.m16n8k16.f32.bf16.bf16.f32 on gmem tensor 'A', fragment 'rB', fragment "
     "'acc' -> fragment 'acc': expects rmem for input operands, but got A: memref<bf16, gmem>, "
     "B: memref<bf16, rmem>, D: memref<f32, rmem>"),
    (static_smem_overflow,
     "smem tensor 's6' (8192 bytes) overflows static shared memory: 57344 bytes of 49152 in "
     "kernel 't'"),
    (smem_tensor_of_a_huge_layout,
     "smem tensor 'sHuge' (bf16, (65536,32768):(32768,1)) has 2147483648 elements (4294967296 "
     "bytes), more than static shared memory holds (49152 bytes)"),
    (huge_view_of_a_buffer,
     "has 2147483648 elements (4294967296 bytes), more than its buffer 'sA' holds (4096 "
     "bytes)"),
    (fragment_past_the_register_file,
     "fragment 'rHuge' of 16777216 bf16 values a thread needs 8388608 registers; a thread has "
     "at most 255"),
    (fragment_of_more_threads_than_a_cta,
     "fragment 'rWide': its layout (2147483648,2):(2,1) spans 2147483648 threads; a CTA has at "
     "most 1024"),
    (fragment_layout_not_thread_value,
     "fragment 'rFlat': its layout must be a (thread, value) layout of rank 2, got 64:1"),
    (tensor_out_of_its_buffer,
     "smem tensor 'big' (bf16, (32,32):(128,1)) spans 8000 bytes, beyond its buffer 'sA' of "
     "4096 bytes"),
    (copy_width_does_not_hold_elements,
     "copy atom.universal_copy<8> from fragment 'rD' into gmem tensor 'D': 8-bit accesses do "
     "not hold whole bf16 elements"),
    (copy_width_does_not_vectorize,
     "copy atom.universal_copy<128> from fragment 'acc' into gmem tensor 'D': "
     "'atom.universal_copy<128>' cannot vectorize copy to 4 elements (static strides must be 1)"),
    (second_writer_other_swizzle,
     "from gmem tensor 'A' into smem tensor 'sA_sw32': writes through Sw<1,3,3> o 0 o "
     "((8,8),(16,2)):((16,128),(1,1024)), but buffer 'sA' was written through Sw<2,3,3> o 0 o "
     "((8,8),(32,1)):((32,256),(1,0)) (by 'sA'): one buffer, one layout"),
    (tmem_on_sm80,
     "tmem tensor 'tAcc' needs tensor memory (tcgen05), which sm_80 does not have"),
    (tile_outside_the_tensor,
     "tile (0, 2) of (64, 32) tiles is outside gmem tensor 'A' (bf16, (64,64):(64,1)) of "
     "shape (64, 64) ((1, 2) tiles)"),
    (ldsm_k_step_outside,
     "into fragment 'rA': tile (0, 2) is outside the (1, 2) 64 x 16 tiles of operand A"),
    (swizzle_splits_ldmatrix_rows,
     "copy atom.ldsm<m8n8.x4> from smem tensor 'sA' into fragment 'rA': thread 1's access 0 at "
     "byte 72 of smem tensor 'sA' (bf16, Sw<2,2,3> o 0 o (64,32):(32,1)) is not 8 contiguous "
     "elements on a 16-byte boundary"),
    (ldsm_into_a_short_fragment,
     "copy atom.ldsm<m8n8.x4> from smem tensor 'sA' into fragment 'rA4': fragment 'rA4' has 4 "
     "registers, its values need 8"),  # 2 M repetitions x 4 .b32 of the m16n8k16 A fragment
    (epilogue_on_packed_registers,
     "max.f32 into fragment 'rD': 'rD' holds bf16; elementwise works on one 32-bit value per "
     "register"),
]


@pytest.mark.parametrize(("case", "message"), CASES, ids=[c.__name__ for c, _ in CASES])
def test_misuse_names_tensor_atom_and_mismatch(case: Callable[[], None], message: str) -> None:
    with pytest.raises(T.TensorError) as e:
        case()
    assert message in str(e.value)


def test_at_least_thirteen_misuse_cases() -> None:
    assert len(CASES) >= 13


# --------------------------------------------------------------------------- what works


def test_tile_of_a_swizzled_tensor_keeps_the_swizzle_and_moves_its_offset() -> None:
    k, _ = _setup()
    s = T.smem_tensor(k, "s", "bf16", smem_layout(64, 64, 16, "K", 128))
    sub = s.tile((64, 32), (0, 1))
    assert isinstance(sub.layout, ComposedLayout) and sub.view == s.layout
    # element (r, c) of the tile is element (r, 32 + c) of the tensor, through the swizzle
    for r, c in ((0, 0), (5, 3), (63, 31)):
        assert sub.layout(r + 64 * c) == s.layout(r + 64 * (32 + c))


def test_affine_layout_is_exact() -> None:
    assert P.affine_layout([0, 8, 16, 24]) == Layout(4, 8)
    assert P.affine_layout([0, 1, 3, 2]) is None  # an XOR is not a layout
    assert P.affine_layout([0, 1, 2]) is None


def test_ldsm_rows_of_warp_0_are_the_isa_rows() -> None:
    """ldmatrix.x4 for A of m16n8k16 (PTX ISA: lanes 0-15 point at rows 0-15 of the first 8
    columns, lanes 16-31 at the same rows, columns 8-15) in a row-major 64 x 16 tile."""
    tiled = make_tiled_mma(FORM, (2, 2, 1), (64, 64, 16))
    acc = P.ldsm_partition(LDSM_X4, tiled, "A", "K", (64, 16), (0, 0))
    for lane in range(32):
        r, c = lane % 16, 8 * (lane // 16)
        assert acc.thread(lane) + acc.deltas[0][0] == r + 64 * c
    # warp 1 is the next 16 rows along M (atom layout 2 x 2: warps 0, 1 along M)
    assert acc.thread(32) - acc.thread(0) == 16
    assert acc.deltas[1][0] - acc.deltas[0][0] == 32  # repetition 1: 32 rows further


def test_copies_emit_what_ptxas_accepts() -> None:
    """A tiled cp.async, ldmatrix.x4, mma and a vector store, each once, assemble."""
    mod = Module("sm_80", features=[FORM.feature, "cp.async", "ldmatrix"])
    k = mod.kernel("pieces")
    k.maxntid = (128, 1, 1)
    tiled = make_tiled_mma(FORM, (2, 2, 1), (64, 64, 16))
    s_a = T.smem_tensor(k, "sA", "bf16", SW64)
    T.copy(k, CP_A, _gA(k), s_a)
    r_a, r_b, acc = _frags(k, tiled)
    T.copy(k, LDSM_X4, s_a, r_a)
    T.mma(k, tiled, acc, r_a, r_b, acc)
    T.copy(k, copy_atom("atom.universal_copy<64>.v2.b32"), acc,
           T.gmem_tensor(k, "D", "f32", (64, 64), (64, 1)))
    ptx = mod.emit()
    assert ptx.count("st.global.v2.b32") == 16  # 32 accumulators, pairs of columns
    assert assemble(ptx, "sm_80").kernel("pieces").spills == 0


def test_a_single_atom_is_a_one_warp_tiled_mma() -> None:
    """fragment/mma take a bare MmaForm: one warp, the atom's own fragments (A: 4 .b32,
    B: 2 .b32, C: 4 .f32 for m16n8k16 bf16 -> f32, PTX ISA)."""
    mod = Module("sm_80", features=[FORM.feature])
    k = mod.kernel("one_atom")
    k.maxntid = (32, 1, 1)
    r_a, r_b, acc = (T.fragment(k, FORM, op, zero=True) for op in "ABC")
    assert [len(x.regs) for x in (r_a, r_b, acc)] == [4, 2, 4]
    assert [x.regs[0].type for x in (r_a, r_b, acc)] == ["b32", "b32", "f32"]
    T.mma(k, FORM, acc, r_a, r_b, acc)
    ptx = mod.emit()
    assert ptx.count("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32") == 1
    assert "one_atom" in assemble(ptx, "sm_80").kernels


def test_one_diagnostic_two_front_ends() -> None:
    """The IR's tiled_mma.gemm and the kernel layer's mma refuse the same wrong fragment with
    the same text (one check, atoms.tiled_mma.check_fragment_layout; the IR's expectation is
    tests/ir/invalid_tiled_fragment.mlir's)."""
    pytest.importorskip("xdsl")
    from nvatom.ir import driver

    bad = "((4,8),(2,2,2)):((32,1),(16,8,128))"
    tiled = make_tiled_mma(FORM, (2, 1, 1))
    ir = f"""
func.func @f() {{
  %atom = cute_nvgpu.make_atom : !cute_nvgpu.sm80.mma<m16n8k16.f32.bf16.bf16.f32>
  %t = cute_nvgpu.make_tiled_mma %atom {{atom_layout = "(2,1,1)"}}
  %bad = cute.alloc_rmem : !cute.memref<bf16, rmem, {bad}>
  %rb = cute.alloc_rmem : !cute.memref<bf16, rmem, {tiled.tv_layout("B")}>
  %rd = cute.alloc_rmem : !cute.memref<f32, rmem, {tiled.tv_layout("C")}>
  cute_nvgpu.tiled_mma.gemm %t, %rd, %bad, %rb, %rd
  func.return
}}
"""
    with pytest.raises(driver.IRError) as ir_err:
        driver.verify(driver.parse(ir, "f.mlir"), "sm_80")
    ir_text = str(ir_err.value.diagnostics[0])
    k = Module("sm_80", features=[FORM.feature]).kernel("f")
    r_a = T.fragment(k, tiled, "A", name="bad", layout=Layout(((4, 8), (2, 2, 2)),
                                                               ((32, 1), (16, 8, 128))))
    r_b, acc = T.fragment(k, tiled, "B"), T.fragment(k, tiled, "C")
    with pytest.raises(T.TensorError) as tensor_err:
        T.mma(k, tiled, acc, r_a, r_b, acc)
    shared = (f"expects Mma atom layout of {tiled.tv_layout('A')} for operand A, but got {bad}")
    assert shared in ir_text and str(tensor_err.value).endswith(shared)


@pytest.mark.parametrize("operand", ["", "AB", "x"])
def test_fragment_of_an_unknown_operand_is_named(operand: str) -> None:
    """Found by the api fuzz target: ``MmaForm.operand_type`` raised ``KeyError: ''``."""
    from nvatom.atoms.mma import MmaFormError

    k, tiled = _setup()
    with pytest.raises(MmaFormError, match=f"{FORM.name} has no operand '{operand.upper()}' "
                                           r"\(A, B, C or D\)"):
        T.fragment(k, tiled, operand)
