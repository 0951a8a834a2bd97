"""The TMA partition result's flags word in the IR (the specification's TMA chapter, "Flags
Word"): bits 5 (sparse) and 12 (s2t_descriptor) are set by the IR from the uses of a load's
shared-memory tile (``nvatom.ir.ops_tma.derive_tma_flags``), and read by the executable
atoms and the transfers the lowering sees; every other bit by the partition verifier
(tests/atoms/test_tma_partition.py::test_flags_word_bit_by_bit)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from nvatom.atoms import tma as T
from nvatom.ir import driver
from nvatom.ir.lower import lower

HERE = Path(__file__).parent
PTXAS = Path("/usr/local/cuda/bin/ptxas")

# bits 6-11 (the verifier's predicates) and 13 (a static GMEM layout: prefetch-eligible)
CHECKS = 0x0FC0
PREFETCH = 0x2000


def _tma_facts(text: str) -> tuple[dict[str, list[int]], str]:
    mod = driver.parse(text, "k.mlir")
    v = driver.verify(mod)
    flags: dict[str, list[int]] = {}
    for op, f in v.facts.items():
        if isinstance(f, T.TmaPartitionResult):
            flags.setdefault(op.name, []).append(int(f.flags))
        elif isinstance(f, T.ExecTmaAtom):
            flags.setdefault(op.name, []).append(int(f.flags))
            assert (f.sparse, f.s2t_descriptor) == (bool(f.flags & T.TmaFlags.SPARSE),
                                                    bool(f.flags & T.TmaFlags.S2T_DESCRIPTOR))
    return flags, lower(mod, v).ptx


def _assembles(ptx: str, tmp: Path) -> None:
    if not PTXAS.exists():
        pytest.skip("no ptxas")
    p = tmp / "k.ptx"
    p.write_text(ptx)
    r = subprocess.run([str(PTXAS), "-arch=sm_100a", str(p), "-o", str(tmp / "k.cubin")],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


# The scale factors of tests/ir/umma_bs_ts.mlir's SFA loaded by TMA (no swizzle: the tile is
# Sw<0,4,3> o ..., which the partition verifier's step 5 asks for) and copied to TMEM by
# tcgen05.cp: the load's tile is an s2t source.
def _bs_text() -> str:
    src = (HERE / "umma_bs_ts.mlir").read_text()
    body = src[src.index("builtin.module"):]
    body = body.replace(
        "    %gsfa = cute.make_view %psfa : !cute.memref<ue8m0, gmem, (32,16):(16,1)>\n",
        """    %lsf = cute.static : !cute.layout<(16,32):(1,16)>
    %c16 = arith.constant 16 : i32
    %c32 = arith.constant 32 : i32
    %dsfa = nv_tileas.make_tiled_tma_desc %psfa, %lsf shapes(%c16, %c32) strides(%c16) \
paddings() {mode = #cute_nvgpu.tma_load_mode<tiled>, elementBitWidth = 8} \
: !cute_nvgpu.tma_descriptor_tiled
    %tsf = cute.static : !cute.composed_layout<Sw<0,4,3> o 0 o (32,16):(16,1)>
    %vsf = cute.static : !cute.layout<(32,16):(1@1,1@0)>
    %asfa = cute_nvgpu.atom.non_exec_tiled_tma_load %dsfa, %tsf, %vsf {num_multicast = 1}
    %bar = cute_nvgpu.arch.mbarrier_init {count = 1}
    %esfa = cute_nvgpu.atom.make_exec_tma %asfa, %bar
""")
    body = body.replace(
        "%ssfa = cute.alloc_smem : !cute.memref<ue8m0, smem, (32,16):(16,1)>",
        "%ssfa = cute.alloc_smem : !cute.memref<ue8m0, smem, Sw<0,4,3> o 0 o (32,16):(16,1)>")
    body = body.replace("    cute_nvgpu.atom.copy %copy, %gsfa, %ssfa\n", """\
    %z = arith.constant 0 : i32
    %csf = cute.make_coord %z, %z
    cute_nvgpu.atom.tma_load %esfa, %ssfa, %csf
    cute_nvgpu.arch.mbarrier_wait %bar, %z
""")
    assert "%gsfa" not in body
    return body


# A sparse kind::f16 UMMA whose metadata arrives by TMA (128 rows of 16 bytes) and
# tcgen05.cp 128x128b into its TMEM buffer: the load's tile is sparse metadata and an s2t
# source.  A and B are shared tiles in the atom's canonical layouts.
SPARSE = """builtin.module attributes {{nvatom.target = "sm_100a"}} {{
func.func @sp(%pe: !cute.ptr<u8, gmem>) {{
  %atom = cute_nvgpu.make_atom : !cute_nvgpu.sm100.mma_sp<f16.cta1.m128n64k32.ss.f32.f16.f16>
  %sa = cute.alloc_smem : !cute.memref<f16, smem, {la}>
  %sb = cute.alloc_smem : !cute.memref<f16, smem, {lb}>
  %a = cute_nvgpu.make_smem_desc %sa : !cute_nvgpu.smem_desc_view<f16, K, {la}>
  %b = cute_nvgpu.make_smem_desc %sb : !cute_nvgpu.smem_desc_view<f16, K, {lb}>
  %d = cute.alloc_tmem : !cute.memref<f32, tmem, (128,64):(64,1)>
  %e = cute.alloc_tmem : !cute.memref<u8, tmem, (128,4):(4,1)>
  %le = cute.static : !cute.layout<(16,128):(1,16)>
  %c16 = arith.constant 16 : i32
  %c128 = arith.constant 128 : i32
  %de = nv_tileas.make_tiled_tma_desc %pe, %le shapes(%c16, %c128) strides(%c16) \
paddings() {{mode = #cute_nvgpu.tma_load_mode<tiled>, elementBitWidth = 8}} \
: !cute_nvgpu.tma_descriptor_tiled
  %te = cute.static : !cute.composed_layout<Sw<0,4,3> o 0 o (128,16):(16,1)>
  %ve = cute.static : !cute.layout<(128,16):(1@1,1@0)>
  %ae = cute_nvgpu.atom.non_exec_tiled_tma_load %de, %te, %ve {{num_multicast = 1}}
  %bar = cute_nvgpu.arch.mbarrier_init {{count = 1}}
  %ee = cute_nvgpu.atom.make_exec_tma %ae, %bar
  %se = cute.alloc_smem : !cute.memref<u8, smem, Sw<0,4,3> o 0 o (128,16):(16,1)>
  %z = arith.constant 0 : i32
  %ce = cute.make_coord %z, %z
  cute_nvgpu.atom.tma_load %ee, %se, %ce
  cute_nvgpu.arch.mbarrier_wait %bar, %z
  %cp = cute_nvgpu.make_atom : !cute_nvgpu.atom.s2t_copy<cta_group::1.128x128b>
  cute_nvgpu.atom.copy %cp, %se, %e
  cute_nvgpu.atom.mma %atom, %d, %a, %b, %d, %e {{accumulate = false}}
  func.return
}}
}}"""


def _sparse_text() -> str:
    from nvatom.atoms.smem import smem_layout, smem_swizzle
    from nvatom.ir.syntax import layout_text

    return SPARSE.format(la=layout_text(smem_layout(128, 32, 16, "K", smem_swizzle("SW64"))),
                         lb=layout_text(smem_layout(64, 64, 16, "K", smem_swizzle("SW128"))))


def test_a_tcgen05_cp_source_sets_the_s2t_descriptor_bit(tmp_path: Path) -> None:
    flags, ptx = _tma_facts(_bs_text())
    want = CHECKS | PREFETCH | T.TmaFlags.S2T_DESCRIPTOR  # a static 16 x 32 map, no sparsity
    assert want == 0x3FC0
    for name in ("cute_nvgpu.atom.non_exec_tiled_tma_load", "cute_nvgpu.atom.make_exec_tma",
                 "cute_nvgpu.atom.tma_load"):
        assert flags[name] == [want], name
    assert "tcgen05.cp.cta_group::1.32x128b.warpx4" in ptx
    _assembles(ptx, tmp_path)


def test_sparse_metadata_sets_the_sparse_bit(tmp_path: Path) -> None:
    flags, ptx = _tma_facts(_sparse_text())
    want = CHECKS | PREFETCH | T.TmaFlags.S2T_DESCRIPTOR | T.TmaFlags.SPARSE
    assert want == 0x3FE0
    for name in ("cute_nvgpu.atom.non_exec_tiled_tma_load", "cute_nvgpu.atom.make_exec_tma",
                 "cute_nvgpu.atom.tma_load"):
        assert flags[name] == [want], name
    assert "tcgen05.mma.sp.cta_group::1.kind::f16" in ptx
    _assembles(ptx, tmp_path)


def test_plain_operand_loads_set_neither() -> None:
    # the SM100 GEMM's A and B tiles feed UMMA descriptors, not tcgen05.cp: neither bit; their
    # maps have dynamic shapes (k, m): not prefetch-eligible
    flags, _ = _tma_facts((HERE / "gemm_sm100.mlir").read_text())
    for name in ("cute_nvgpu.atom.non_exec_tiled_tma_load", "cute_nvgpu.atom.make_exec_tma"):
        assert flags[name] == [CHECKS, CHECKS], name
