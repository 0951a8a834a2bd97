"""b1 (``.and.popc``) WGMMA in the IR: the descriptors of b1 tiles, and an independent check
that the descriptors the lowering emits address the bits the IR's layout puts there.

The IR writes a b1 tile's layout in bits (``Sw<3,7,3>``, the 128-byte swizzle's image on bit
offsets; docs/ir.md, "b1 WGMMA tiles").  The CPU model (nvatom.ref.wgmma) never sees that
layout: it decodes the 64-bit descriptor words found in the lowered PTX and reads shared memory
through the descriptor's byte-level canonical layout and the hardware's swizzle of absolute
byte addresses, with b1 as bytes of eight K bits.  Shared memory is filled from random 0/1
matrices through the IR layout; the model must read back exactly the K-block each
``wgmma.mma_async`` is meant to read, and its popc-AND product must be numpy's.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

from nvatom.atoms import registry as R
from nvatom.descriptors.wgmma import DescriptorError, SmemDescView, make_wgmma_desc
from nvatom.ir import driver
from nvatom.ir.generate import atom_use
from nvatom.ir.lower import lower
from nvatom.ir.syntax import layout_text
from nvatom.ir.types import smem_desc
from nvatom.layout import ComposedLayout
from nvatom.ref import wgmma as ref
from nvatom.ref.mma import layout_table
from nvatom.runtime.ptxas import assemble
from nvatom.tables.swizzles import smem_layout
from tests.ir import wgmma_b1_kernel as B1

WGMMA = next(f for f in R.FAMILIES if f.name == "wgmma")


def _atom(name: str):  # type: ignore[no-untyped-def]
    return next(a for a in WGMMA.atoms(None) if a.name == name)


# ------------------------------------------------------------------ descriptors of b1 tiles
def test_b1_descriptors_match_the_isa() -> None:
    # PTX ISA, Matrix Descriptor Format / Shared Memory Matrix Layout: K-major, 128B swizzle:
    # 8 rows of 128 bytes per pattern, SBO = 1024 bytes between 8-row groups (LBO unused, 1);
    # no swizzle: core matrices of 8 rows x 16 bytes, SBO between 8-row groups, LBO between
    # the two 16-byte K chunks of a 32-byte (256-bit) K-block.
    a = make_wgmma_desc(smem_desc(f"b1, K, {B1.A_TILE}").layout, 1, "K")
    assert (a.lbo, a.sbo, a.layout_type.name) == (16, 1024, "SW128")
    b = make_wgmma_desc(smem_desc(f"b1, K, {B1.B_TILE}").layout, 1, "K")
    assert (b.lbo, b.sbo, b.layout_type.name) == (2048, 128, "INTERLEAVE")
    # the same bytes seen as 8-bit elements (how nvatom.ptx.wgmma_emit lays b1 out) give the
    # same descriptor
    a8 = make_wgmma_desc(smem_desc("u8, K, Sw<3,4,3> o 0 o (64,128):(128,1)").layout, 8, "K")
    assert a8 == a


def test_b1_layout_with_a_byte_swizzle_is_rejected() -> None:
    # Sw<3,4,3> on bit offsets swizzles 16-bit units: no descriptor mode; the IR type is a
    # parse error naming the modes' bit images
    with pytest.raises(DescriptorError, match=r"SW128 = Sw<3,7,3>"):
        smem_desc("b1, K, Sw<3,4,3> o 0 o (64,1024):(1024,1)")
    with pytest.raises(DescriptorError, match="element_bits must be 1, 4, 8, 16, 32 or 64, "
                                              "got 2"):
        make_wgmma_desc(smem_desc(f"b1, K, {B1.B_TILE}").layout, 2, "K")
    SmemDescView.of(smem_desc(f"b1, K, {B1.A_TILE}").layout, 1)  # the view checks itself


# ------------------------------------------------------------------ lowered descriptors
_DESC = re.compile(r"add\.u32 (%r\d+), (%r\d+), (\d+);\s*shr\.u32 \1, \1, 4;\s*"
                   r"and\.b32 \1, \1, 16383;\s*cvt\.u64\.u32 (%rd\d+), \1;\s*"
                   r"or\.b64 \4, \4, (0x[0-9a-f]{16});")
_MMA = re.compile(r"wgmma\.mma_async\S* \{[^}]*\}, (\{[^}]*\}|%rd\d+), (%rd\d+), (%p\d+)")


def _descriptors(ptx: str, bases: dict[str, int]) -> list[tuple[int | None, int, bool]]:
    """(A word or None for rs, B word, scale-d) of each wgmma.mma_async in ``ptx``, with
    the shared symbols at the byte addresses ``bases`` (e.g. {'smem1': 0})."""
    reg_of = {r: bases[s] for r, s in re.findall(r"mov\.u32 (%r\d+), (smem\d+);", ptx)}
    words = {rd: int(const, 16) | (((reg_of[base] + int(off)) >> 4) & 0x3FFF)
             for _, base, off, rd, const in _DESC.findall(ptx)}
    preds = {p: int(re.search(rf"mov\.b32 {r}, (\d+);", ptx).group(1))  # type: ignore[union-attr]
             for p, r in re.findall(r"setp\.ne\.b32 (%p\d+), (%r\d+), 0;", ptx)}
    return [(words.get(a), words[b], bool(preds[p])) for a, b, p in _MMA.findall(ptx)]


def _place(smem: np.ndarray, base: int, tile: str, bits: np.ndarray) -> None:
    """Store the 0/1 matrix through the IR's bit layout of the tile at byte ``base``."""
    lay = smem_desc(f"b1, K, {tile}").layout
    outer = lay.outer if isinstance(lay, ComposedLayout) else lay
    off = layout_table(outer).astype(np.int64)
    if isinstance(lay, ComposedLayout):
        sw = lay.inner
        off = off ^ ((off & sw.yyy_msk) >> sw.shift)
    off = off + 8 * base
    np.bitwise_or.at(smem, off // 8, (bits.astype(np.uint8) << (off % 8)).astype(np.uint8))


def _lower(text: str) -> str:
    mod = driver.parse(text, "b1.mlir")
    out = lower(mod, driver.verify(mod, "sm_90a"))
    assemble(out.ptx, out.target)
    return out.ptx


def _check_k_blocks(atom, text: str) -> None:  # type: ignore[no-untyped-def]
    """Each K-block's lowered descriptors read exactly that K-block of random 0/1 matrices
    placed through the tiles' IR layouts (A at byte 0, B at 8192)."""
    ptx = _lower(text)
    rng = np.random.default_rng(109)
    tiles = re.findall(r"cute\.alloc_smem : !cute\.memref<b1, smem, (.*)>\n", text)
    ops = ["A", "B"] if atom.a_source == "ss" else ["B"]
    rows = {"A": 64, "B": atom.n}
    bases = {"A": 0, "B": 8192}
    smem = np.zeros(8192 + 1024 * atom.n // 8, np.uint8)
    mats = {}
    for op, tile in zip(ops, tiles, strict=True):
        mats[op] = rng.integers(0, 2, (rows[op], 1024))
        _place(smem, bases[op], tile, mats[op])
    syms = {f"smem{i + 1}": bases[op] for i, op in enumerate(ops)}
    steps = _descriptors(ptx, syms)
    assert len(steps) == (4 if atom.a_source == "ss" else 1)
    for s, (wa, wb, _) in enumerate(steps):
        ks = slice(B1.KBLOCK * s, B1.KBLOCK * (s + 1))
        np.testing.assert_array_equal(ref.read_operand(atom, "B", smem, wb), mats["B"][:, ks])
        if wa is not None:
            np.testing.assert_array_equal(ref.read_operand(atom, "A", smem, wa),
                                          mats["A"][:, ks])


@pytest.mark.parametrize("name", [
    "sm90.mma.m64n8k256.ss.s32.b1.b1.and.popc",
    "sm90.mma.m64n24k256.ss.s32.b1.b1.and.popc",
    "sm90.mma.m64n256k256.ss.s32.b1.b1.and.popc",
    "sm90.mma.m64n256k256.rs.s32.b1.b1.and.popc",
])
def test_generated_b1_use_reads_its_k_blocks(name: str) -> None:
    """The invariant's generated use (128-byte-swizzled tiles one 1024-bit K row wide)."""
    atom = _atom(name)
    _check_k_blocks(atom, atom_use(WGMMA, atom, "sm_90a").text)


@pytest.mark.parametrize("swizzle", [0, 32, 64])
def test_b1_tiles_of_every_swizzle_read_their_k_blocks(swizzle: int) -> None:
    """The generated use with CuTe's tiles of the other modes (``tile_to_shape`` of the
    mode's K-major atom in bits: ``Sw<1,7,3>`` / ``Sw<2,7,3>`` / unswizzled core matrices)."""
    atom = _atom("sm90.mma.m64n64k256.ss.s32.b1.b1.and.popc")
    text = atom_use(WGMMA, atom, "sm_90a").text
    tile = layout_text(smem_layout(64, 1024, 1, "K", swizzle))  # A and B: 64 rows
    text = text.replace("Sw<3,7,3> o 0 o (64,1024):(1024,1)", tile)
    assert text.count(tile) == 4 and "Sw<3,7,3>" not in text
    _check_k_blocks(atom, text)


def test_b1_kernel_on_the_cpu_model() -> None:
    """tests/gpu/test_ir_b1_wgmma_gpu.py's kernel, run on the CPU model: the host's
    ISA-swizzled image of A equals A placed through the IR layout; the sub-byte copies
    address whole bytes; the four mma_async on the lowered descriptors give popc(A & B)."""
    ptx = _lower(B1.KERNEL)
    # copies: A, 512 contiguous bits per thread = four 16-byte accesses; B, thread = row,
    # its eight 128-bit K chunks one LBO (2048 bytes) apart in shared memory
    assert re.search(r"ld\.global\.v4\.b32 \{[^}]*\}, \[%rd\d+\+48\];", ptx)
    for j in range(1, 8):
        assert re.search(rf"st\.shared\.v4\.b32 \[%r\d+\+{2048 * j}\]", ptx), j
    rng = np.random.default_rng(164)
    form = _atom("sm90.mma.m64n128k256.ss.s32.b1.b1.and.popc")
    for p in (0.5, 0.9):
        a = (rng.random((B1.M, B1.K)) < p).astype(np.int64)
        b = (rng.random((B1.N, B1.K)) < p).astype(np.int64)
        smem = np.zeros(8192 + 16384, np.uint8)
        _place(smem, 0, B1.A_TILE, a)
        np.testing.assert_array_equal(smem[:8192].reshape(-1, 128), B1.sw128_image(a))
        _place(smem, 8192, B1.B_TILE, b)
        steps = _descriptors(ptx, {"smem1": 0, "smem2": 8192})
        assert [s[2] for s in steps] == [False, True, True, True]
        d = ref.encode_d(form, np.full((64, B1.N), 0x7FFFFFFF))
        for s, (wa, wb, scale_d) in enumerate(steps):
            ks = slice(B1.KBLOCK * s, B1.KBLOCK * (s + 1))
            np.testing.assert_array_equal(ref.read_operand(form, "A", smem, wa), a[:, ks])
            np.testing.assert_array_equal(ref.read_operand(form, "B", smem, wb), b[:, ks])
            d = ref.wgmma(form, d, wa, wb, smem, scale_d=scale_d)
        np.testing.assert_array_equal(ref.decode_d(form, d), B1.popc_and(a, b))
