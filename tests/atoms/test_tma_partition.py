"""The TMA partition verifier (docs/spec-deviations.md#tma-partition-verifier): one negative test
per diagnostic, a positive case, and the rank-6 worked example."""

from __future__ import annotations

import pytest

from nvatom.atoms import tma as T
from nvatom.atoms.interfaces import AtomVerificationError
from nvatom.layout import ComposedLayout, Layout
from nvatom.layout.swizzle import Swizzle

L, S, R = T.TmaKind.LOAD, T.TmaKind.STORE, T.TmaKind.REDUCE
TILE = T.TmaLoadMode.TMA_LOAD_NO_MULTICAST
SMEM = ComposedLayout("Sw<3,4,3> o 0 o (8,64):(64,1)")  # 8 rows of 64 f16 = 128 B
GMEM = T.LayoutType(("m", "n"), (1, "ldm"))
VMAP = T.LayoutType((8, 64), (T.E(1), T.E(0)))


def check(msg, *args, **kw):
    with pytest.raises(AtomVerificationError) as ei:
        T.verify_tma_partition(*args, **kw)
    assert str(ei.value) == msg


def test_positive_load():
    r = T.verify_tma_partition(L, TILE, SMEM, GMEM, VMAP)
    assert r.tma_tensor_type.box == (64, 8)
    assert (r.tile_element_count, r.rank, r.swizzle_mode) == (512, 2, 2)
    assert r.flags == 0b0000_1111_1100_0000
    assert r.non_exec_atom_body.num_multicast == 1


def test_positive_multicast_two_cta_and_store_reduce():
    r = T.verify_tma_partition(L, T.TmaLoadMode.TMA_LOAD_TWO_CTA, SMEM, GMEM, VMAP,
                               num_multicast=4)
    assert r.tile_element_count == 2048
    assert r.flags & T.TmaFlags.MULTICAST and r.flags & T.TmaFlags.TWO_CTA
    g = Layout((128, 64), (1, 128))
    r = T.verify_tma_partition(S, T.TmaStoreMode.TMA_STORE_TILED, SMEM, g, VMAP)
    assert r.flags & T.TmaFlags.PREFETCH_ELIGIBLE
    r = T.verify_tma_partition(R, T.TmaReduceKind.TMA_REDUCE_XOR, SMEM, g, VMAP)
    assert r.tile_element_count == 512


def test_flag_bits_and_enum_contract():
    assert [f.value for f in T.TmaFlags] == [1 << i for i in range(14)]
    assert [m.value for m in T.TmaReduceKind] == list(range(8))
    assert T.ptx_qualifiers(T.TmaLoadMode.TMA_LOAD_W_MULTICAST) == (".im2col::w",)
    assert T.ptx_qualifiers(T.TmaLoadMode.TMA_LOAD_TWO_CTA) == (".tile", ".cta_group::2")
    assert T.ptx_qualifiers(T.TmaStoreMode.TMA_STORE_IM2COL) == (".im2col_no_offs",)
    assert T.ptx_qualifiers(T.TmaStoreMode.TMA_STORE_IM2COL_W) is None
    assert T.ptx_qualifiers(T.TmaReduceKind.TMA_REDUCE_INC) == (".inc",)
    with pytest.raises(TypeError):
        T.verify_tma_partition(S, TILE, SMEM, GMEM, VMAP)


def test_rank6_worked_example():
    r6 = T.LayoutType(("a", "b", "c", "d", "e", "f"))
    check("invalid operand types, got !cute.layout<(a,b,c,d,e,f),...>, "
          "!cute.layout<(a,b,c,d,e,f),...>, and !cute.layout<...>",
          L, TILE, r6, r6, T.LayoutType())


def test_step1_operand_types():
    check(T.TMA_INVALID_OPERAND_TYPES + "!cute.composed_layout<Sw<3,4,3> o 0 o (8,64):(64,1)>,"
          " !cute.layout<(m,n):(1,ldm)>, and 7", L, TILE, SMEM, GMEM, 7)


def test_step2_smem_kind():
    check(T.TMA_INVALID_SMEM_LAYOUT_TYPE + "!cute.swizzle<Sw<3,4,3>>",
          L, TILE, Swizzle(3, 4, 3), GMEM, VMAP)


def test_step3_gmem_kind():
    check(T.TMA_UNSUPPORTED_GMEM_LAYOUT
          + "!cute.composed_layout<Sw<3,4,3> o 0 o (8,64):(64,1)>", L, TILE, SMEM, SMEM, VMAP)


def test_step4_integer_strides():
    g = T.LayoutType(("m", "n"), (1, 2))  # a 4-byte row stride of f16
    check(T.TMA_INTEGER_STRIDES + "!cute.layout<(m,n):(1,2)>, and "
          "!cute.layout<(8,64):(64,1)>", L, TILE, Layout((8, 64), (64, 1)), g, VMAP)
    g = T.LayoutType(("m", "n"), (1, T.E(0)))
    with pytest.raises(AtomVerificationError, match="^expected the GMEM and SMEM"):
        T.verify_tma_partition(L, TILE, SMEM, g, VMAP)


def test_step5_swizzle():
    check(T.TMA_SMEM_SWIZZLE + "!cute.layout<(8,64):(64,1)>",
          L, TILE, Layout((8, 64), (64, 1)), GMEM, VMAP)


def test_step6_static():
    v = T.LayoutType((8, "k"), (T.E(1), T.E(0)))
    check(T.TMA_STATIC_SMEM_VMAP + "!cute.composed_layout<Sw<3,4,3> o 0 o (8,64):(64,1)>, "
          "and !cute.layout<(8,k):(1@1,1@0)>", L, TILE, SMEM, GMEM, v)


def test_step7_shape_equivalence():
    v = T.LayoutType((64, 8), (T.E(0), T.E(1)))
    check(T.TMA_SHAPE_EQUIVALENCE + "!cute.composed_layout<Sw<3,4,3> o 0 o (8,64):(64,1)>, "
          "and !cute.layout<(64,8):(1@0,1@1)>", L, TILE, SMEM, GMEM, v)


def test_step8_g_basis():
    v = T.LayoutType((8, 64), (T.E(2), T.E(0)))  # GMEM has no mode 2
    check(T.TMA_G_BASIS + "!cute.layout<(m,n):(1,ldm)>, and !cute.layout<(8,64):(1@2,1@0)>",
          L, TILE, SMEM, GMEM, v)


def test_step9_tma_layout():
    v = T.LayoutType((8, 64), (T.E(1), T.E(0, 2)))  # 127 f16 inner: over 128 B, not 16 B
    check(T.TMA_INVALID_TMA_LAYOUT + "!cute.layout<(127,8):(1@0,1@1)>",
          L, TILE, SMEM, GMEM, v)


def test_step10_tensor_type():
    check(T.TMA_TENSOR_TYPE, S, T.TmaStoreMode.TMA_STORE_IM2COL_W,
          ComposedLayout("Sw<3,4,3> o 0 o (8,64,1):(64,1,0)"),
          T.LayoutType(("c", "w", "n"), (1, 64, "s")),
          T.LayoutType((8, 64, 1), (T.E(1), T.E(0), T.E(2))))
    check(T.TMA_TENSOR_TYPE, L, TILE, SMEM, GMEM, VMAP, element_bits=12)


def test_step11_multicast():
    check(T.TMA_MISSING_NUM_MULTICAST, L, T.TmaLoadMode.TMA_LOAD_TWO_CTA, SMEM, GMEM, VMAP)
    check(T.TMA_MISSING_NUM_MULTICAST, L, T.TmaLoadMode.TMA_LOAD_TWO_CTA, SMEM, GMEM, VMAP,
          num_multicast=0)
    # mode 0 takes a real multicast fan-out (GPU-proven, docs/spec-deviations.md); a count
    # outside a cluster's 1..16 CTAs keeps the spec's companion diagnostic
    T.verify_tma_partition(L, TILE, SMEM, GMEM, VMAP, num_multicast=4)
    check(T.TMA_NUM_MULTICAST_OF + "17", L, TILE, SMEM, GMEM, VMAP, num_multicast=17)
    check(T.TMA_NUM_MULTICAST_OF + "0", L, T.TmaLoadMode.TMA_LOAD_W_MULTICAST,
          ComposedLayout("Sw<0,4,3> o 0 o (8,64,1):(64,1,0)"),
          T.LayoutType(("c", "w", "n"), (1, 64, "s")),
          T.LayoutType((8, 64, 1), (T.E(1), T.E(0), T.E(2))), num_multicast=0)
    # store and reduce skip step 11
    T.verify_tma_partition(S, T.TmaStoreMode.TMA_STORE_TILED, SMEM, GMEM, VMAP,
                           num_multicast=4)


def test_diagnostic_texts():
    assert T.TMA_INVALID_OPERAND_TYPES == "invalid operand types, got "
    assert T.TMA_TENSOR_TYPE == "Failed to construct the TMA tensor type"
    assert T.TMA_NUM_MULTICAST_OF == "got num_multicast of "
    assert T.TMA_INVALID_TMA_LAYOUT == "Computed TMA layout is invalid, got "


# ----------------------------------------------------------------------------- flags word
# The specification's "Flags Word" table, bit by bit (001, "Partition Result ABI")
SPEC_BITS = ["multicast", "im2col", "im2col_w", "im2col_w128", "two_cta", "sparse",
             "static_smem", "static_vmap", "gmem_int_stride", "smem_int_stride", "shape_equiv",
             "g_basis_ok", "s2t_descriptor", "prefetch_eligible"]
G3 = T.LayoutType(("c", "w", "n"), (1, 64, "s"))  # dynamic: not prefetch-eligible
S3 = ComposedLayout("Sw<0,4,3> o 0 o (8,64,1):(64,1,0)")
V3 = T.LayoutType((8, 64, 1), (T.E(1), T.E(0), T.E(2)))
W, W128, IM2COL = (T.TmaLoadMode.TMA_LOAD_W_MULTICAST, T.TmaLoadMode.TMA_LOAD_W128_MULTICAST,
                   T.TmaLoadMode.TMA_LOAD_IM2COL)


def test_flags_word_bit_by_bit():
    assert [f.name.lower() for f in T.TmaFlags] == SPEC_BITS
    assert [int(f) for f in T.TmaFlags] == [1 << i for i in range(14)]
    assert int(T.PARTITION_CHECKS) == 0x0FC0  # bits 6-11
    lo = Layout((128, 64), (1, 128))  # a static GMEM layout: bit 13
    cases = [  # (kind, mode, smem, gmem, vmap, kwargs) -> the whole 16-bit word
        ((L, TILE, SMEM, GMEM, VMAP, {}), 0x0FC0),
        ((L, TILE, SMEM, GMEM, VMAP, {"num_multicast": 4}), 0x0FC1),  # bit 0
        ((L, IM2COL, S3, G3, V3, {}), 0x0FC2),  # bit 1
        ((L, W, S3, G3, V3, {}), 0x0FC6),  # bits 1, 2
        ((L, W128, S3, G3, V3, {"num_multicast": 2}), 0x0FCB),  # bits 0, 1, 3
        ((L, T.TmaLoadMode.TMA_LOAD_TWO_CTA, SMEM, GMEM, VMAP, {"num_multicast": 2}),
         0x0FD1),  # bits 0, 4
        ((L, TILE, SMEM, GMEM, VMAP, {"sparse": True}), 0x0FE0),  # bit 5
        ((L, TILE, SMEM, GMEM, VMAP, {"s2t_descriptor": True}), 0x1FC0),  # bit 12
        ((L, TILE, SMEM, lo, VMAP, {}), 0x2FC0),  # bit 13
        ((S, T.TmaStoreMode.TMA_STORE_IM2COL, S3, G3, V3, {}), 0x0FC2),  # store im2col
        ((R, T.TmaReduceKind.TMA_REDUCE_ADD, SMEM, lo, VMAP, {}), 0x2FC0),
    ]
    for (kind, mode, smem, gmem, vmap, kw), want in cases:
        r = T.verify_tma_partition(kind, mode, smem, gmem, vmap, **kw)
        assert int(r.flags) == want, (mode, kw, hex(r.flags))
        assert 0 <= int(r.flags) < 1 << 14  # bits 14 and 15 are reserved


def test_make_exec_tma_reads_the_flags_word():
    import dataclasses

    a = T.non_exec_tiled_tma_load(TILE, SMEM, GMEM, VMAP, num_multicast=4)
    # the predicate bits stand for steps 4-8: a record without them is not bound
    for bit in (T.TmaFlags.STATIC_SMEM, T.TmaFlags.G_BASIS_OK):
        p = dataclasses.replace(a.partition, flags=T.TmaFlags(a.partition.flags & ~bit))
        with pytest.raises(AtomVerificationError, match=f"lacks {bit.name.lower()}$"):
            T.make_exec_tma(dataclasses.replace(a, partition=p), T.MBarrier(),
                            multicast_mask=0b1111)
    # bit 0 decides whether a CTA mask must be bound
    with pytest.raises(AtomVerificationError, match="no CTA mask was bound"):
        T.make_exec_tma(a, T.MBarrier())
    ex = T.make_exec_tma(a, T.MBarrier(), multicast_mask=0b1111)
    assert ex.flags == a.partition.flags and not ex.sparse and not ex.s2t_descriptor
    # bit 4 adds the .cta_group::2 feature (the sm_100a family's rule)
    two = T.non_exec_tiled_tma_load(T.TmaLoadMode.TMA_LOAD_TWO_CTA, SMEM, GMEM, VMAP,
                                    num_multicast=1)
    assert two.features == ("tma", T.CTA_GROUP_FEATURE)
    # bits 5 and 12 set by the caller are echoed by the executable atom
    sp = T.non_exec_tiled_tma_load(TILE, SMEM, GMEM, VMAP, sparse=True, s2t_descriptor=True)
    ex = T.make_exec_tma(sp, T.MBarrier())
    assert (ex.sparse, ex.s2t_descriptor) == (True, True)
    # a store never carries the load-only bits
    st = T.non_exec_tiled_tma_store(T.TmaStoreMode.TMA_STORE_TILED, SMEM, GMEM, VMAP)
    bad = dataclasses.replace(st, partition=st.partition.with_flags(T.TmaFlags.S2T_DESCRIPTOR))
    with pytest.raises(AtomVerificationError, match="cannot carry load flags: s2t_descriptor$"):
        T.make_exec_tma(bad)
