"""TMA atoms (docs/spec-deviations.md#tma-partition-verifier and the sections after it): non-exec
atoms, make_exec_tma, the reduce-type table, the TMA instruction table, the mbarrier/fence table,
and the descriptor-mutation rule with its exact diagnostic."""

from __future__ import annotations

import pytest

from nvatom import diagnostics as D
from nvatom.atoms import mbarrier as M
from nvatom.atoms import tma as T
from nvatom.atoms.interfaces import AtomVerificationError
from nvatom.atoms.registry import atom_record
from nvatom.atoms.smem import smem_layout
from nvatom.layout import ComposedLayout, Layout

TILE = T.TmaLoadMode.TMA_LOAD_NO_MULTICAST
SMEM = smem_layout(16, 64, 16, "K", 128)  # Sw<3,3,3> o ...: 16 rows of 64 bf16
GMEM = Layout((256, 64), (1, 256))
VMAP = T.LayoutType((16, 64), (T.E(1), T.E(0)))


def test_non_exec_load_from_the_smem_layout_algebra() -> None:
    a = T.non_exec_tiled_tma_load(TILE, SMEM, GMEM, VMAP)
    assert a.mnemonic == "atom.non_exec_tiled_tma_load"
    assert (a.box, a.rank, a.tx_bytes, a.ptx_mode) == ((64, 16), 2, 2048, ".tile")
    assert a.partition.swizzle_mode == 2  # 128B
    for sw, field in ((64, 3), (32, 3)):
        w = sw // 2
        b = T.non_exec_tiled_tma_load(TILE, smem_layout(8, w, 16, "K", sw), GMEM,
                                      T.LayoutType((8, w), (T.E(1), T.E(0))))
        assert (b.box, b.partition.swizzle_mode) == ((w, 8), field)


def test_element_swizzle_must_match_the_element_width() -> None:
    # SW128 of 16-bit elements (Sw<3,3,3>) is not a TMA swizzle of 32-bit elements
    with pytest.raises(AtomVerificationError, match="^expected the SMEM layout to be a swizzle"):
        T.non_exec_tiled_tma_load(TILE, SMEM, GMEM, VMAP, element_bits=32)


def test_non_exec_store_and_reduce() -> None:
    s = T.non_exec_tiled_tma_store(T.TmaStoreMode.TMA_STORE_TILED, SMEM, GMEM, VMAP)
    assert s.mnemonic == "atom.non_exec_tiled_tma_store" and s.num_multicast == 1
    r = T.non_exec_tiled_tma_reduce("xor", SMEM, GMEM, VMAP, data_type="uint64")
    assert r.mnemonic == "atom.non_exec_tiled_tma_reduce"
    assert r.mode is T.TmaReduceKind.TMA_REDUCE_XOR and r.ptx_mode == ".tile"
    with pytest.raises(AtomVerificationError) as ei:
        T.non_exec_tiled_tma_reduce("inc", SMEM, GMEM, VMAP, data_type="float32")
    assert str(ei.value) == D.TMA_REDUCE_TYPE.format("inc", "float32", "uint32")
    with pytest.raises(AtomVerificationError, match="'nand' is not one of add, min"):
        T.non_exec_tiled_tma_reduce("nand", SMEM, GMEM, VMAP)


# PTX ISA "cp.reduce.async.bulk.tensor", table of .redOp and element type (restated here in
# the ISA's spellings; .b32/.b64 stand for both signednesses)
ISA_REDUCE_TABLE = {
    "add": ".u32 .s32 .u64 .f32 .f16 .bf16",
    "min": ".u32 .s32 .u64 .s64 .f16 .bf16",
    "max": ".u32 .s32 .u64 .s64 .f16 .bf16",
    "inc": ".u32",
    "dec": ".u32",
    "and": ".b32 .b64",
    "or": ".b32 .b64",
    "xor": ".b32 .b64",
}
_MAP = {".u32": ["uint32"], ".s32": ["int32"], ".u64": ["uint64"], ".s64": ["int64"],
        ".f32": ["float32"], ".f16": ["float16"], ".bf16": ["bfloat16"],
        ".b32": ["uint32", "int32"], ".b64": ["uint64", "int64"]}
ALL_TYPES = ("uint8", "uint16", "uint32", "int32", "uint64", "int64", "float16", "float32",
             "float64", "bfloat16", "float32_ftz", "tfloat32", "tfloat32_ftz")


# GPU evidence (H100, tests/gpu/test_tma_gpu.py): and/or/xor through an INT64 map raise
# cudaErrorIllegalInstruction, so .b64 means UINT64 only
GPU_EXCLUDED = {("and", "int64"), ("or", "int64"), ("xor", "int64")}


@pytest.mark.parametrize("op", sorted(ISA_REDUCE_TABLE))
def test_reduce_type_table_is_the_isa_table(op: str) -> None:
    legal = {t for s in ISA_REDUCE_TABLE[op].split() for t in _MAP[s]
             if (op, t) not in GPU_EXCLUDED}
    assert set(T.REDUCE_TYPES[T.reduce_op(op)]) == legal
    for t in ALL_TYPES:
        if t in legal:
            T.check_reduce_type(op, t)
        else:
            with pytest.raises(AtomVerificationError, match=f"not defined on {t} elements"):
                T.check_reduce_type(op, t)


def test_reduce_op_names() -> None:
    assert T.reduce_op("TMA_REDUCE_MAX") is T.TmaReduceKind.TMA_REDUCE_MAX
    assert T.reduce_op(".or") is T.TmaReduceKind.TMA_REDUCE_OR
    T.check_reduce_type("add", "bf16")  # PTX spellings are accepted too


# ----------------------------------------------------------------------------- exec atoms
def test_make_exec_tma_load() -> None:
    a = T.non_exec_tiled_tma_load(TILE, SMEM, GMEM, VMAP, num_multicast=4)
    assert a.partition.flags & T.TmaFlags.MULTICAST
    ex = T.make_exec_tma(a, T.MBarrier("full"), T.CacheMode.EVICT_LAST, 0b1111)
    assert (ex.mnemonic, ex.tx_bytes, ex.multicast_mask) == ("atom.tma_load", 2048, 15)
    with pytest.raises(AtomVerificationError, match="16-bit mask with 4 bits set"):
        T.make_exec_tma(a, T.MBarrier(), multicast_mask=0b111)
    with pytest.raises(AtomVerificationError, match="multicasts to 4 CTAs but no CTA mask"):
        T.make_exec_tma(a, T.MBarrier())
    with pytest.raises(AtomVerificationError, match="16-bit mask"):
        T.make_exec_tma(a, T.MBarrier(), multicast_mask=0xF0000)
    with pytest.raises(AtomVerificationError, match="mbarrier in shared memory, got gmem"):
        T.make_exec_tma(a, T.MBarrier(memory_space="gmem"), multicast_mask=15)
    with pytest.raises(AtomVerificationError, match="mbarrier in shared memory, got none"):
        T.make_exec_tma(T.non_exec_tiled_tma_load(TILE, SMEM, GMEM, VMAP))
    with pytest.raises(AtomVerificationError, match="cache mode 'cg' is not a CacheMode"):
        T.make_exec_tma(a, T.MBarrier(), "cg", 15)  # type: ignore[arg-type]
    with pytest.raises(AtomVerificationError, match="needs a verified non-exec TMA atom"):
        T.make_exec_tma(a.partition, T.MBarrier())  # type: ignore[arg-type]


def test_make_exec_tma_store_reduce_take_no_barrier_or_mask() -> None:
    s = T.non_exec_tiled_tma_store(T.TmaStoreMode.TMA_STORE_TILED, SMEM, GMEM, VMAP)
    assert T.make_exec_tma(s).mnemonic == "atom.tma_store"
    for bad in ({"barrier": T.MBarrier()}, {"multicast_mask": 1}):
        with pytest.raises(AtomVerificationError, match="never multicasts"):
            T.make_exec_tma(s, **bad)
    r = T.non_exec_tiled_tma_reduce("add", SMEM, GMEM, VMAP)
    assert T.make_exec_tma(r, cache_mode=T.CacheMode.EVICT_FIRST).mnemonic == "atom.tma_reduce"


def test_two_cta_and_im2col_w_modes_lower_to_their_qualifiers() -> None:
    a = T.non_exec_tiled_tma_load(T.TmaLoadMode.TMA_LOAD_TWO_CTA, SMEM, GMEM, VMAP,
                                  num_multicast=1)
    assert a.ptx_mode == ".tile" and a.partition.flags & T.TmaFlags.TWO_CTA
    g3 = Layout((64, 8, 4), (1, 64, 512))
    s3 = ComposedLayout("Sw<0,4,3> o 0 o (8,64,1):(64,1,0)")
    v3 = T.LayoutType((8, 64, 1), (T.E(1), T.E(0), T.E(2)))
    w = T.non_exec_tiled_tma_load(T.TmaLoadMode.TMA_LOAD_W_MULTICAST, s3, g3, v3)
    assert w.ptx_mode == ".im2col::w" and w.partition.flags & T.TmaFlags.IM2COL_W


# ----------------------------------------------------------------------------- step 11
def test_step11_tile_load_may_multicast_by_hardware_evidence() -> None:
    """docs/spec-deviations.md "TMA step 11": mode 0 accepts a real fan-out (GPU-proven with
    clusters of 2 and 4) but keeps the spec's diagnostic for a count outside 1..16."""
    for n in (1, 2, 4, 16):
        T.non_exec_tiled_tma_load(TILE, SMEM, GMEM, VMAP, num_multicast=n)
    for bad in (0, 17, -1):
        with pytest.raises(AtomVerificationError) as ei:
            T.non_exec_tiled_tma_load(TILE, SMEM, GMEM, VMAP, num_multicast=bad)
        assert str(ei.value) == D.TMA_NUM_MULTICAST_OF + str(bad)
    g3 = Layout((64, 8, 4), (1, 64, 512))
    s3 = ComposedLayout("Sw<0,4,3> o 0 o (8,64,1):(64,1,0)")
    v3 = T.LayoutType((8, 64, 1), (T.E(1), T.E(0), T.E(2)))
    with pytest.raises(AtomVerificationError) as ei:
        T.non_exec_tiled_tma_load(T.TmaLoadMode.TMA_LOAD_W128_MULTICAST, s3, g3, v3)
    assert str(ei.value) == D.TMA_MISSING_NUM_MULTICAST


# ----------------------------------------------------------------------------- mutation
def test_the_three_mutable_fields() -> None:
    u = T.tma_update("base", 0x7F00_0000_0100)
    assert (u.kind, u.ptx_field, u.ordinal) == (T.TmaUpdateKind.BASE_POINTER,
                                                "global_address", None)
    u = T.tma_update("dim", 4096, 2, rank=3)
    assert (u.ptx_field, u.ordinal) == ("global_dim", 2)
    u = T.tma_update(T.TmaUpdateKind.STRIDE, 8192, 1, rank=2)
    assert (u.ptx_field, u.ordinal) == ("global_stride", 0)  # the map stores rank - 1 strides
    assert T.tma_update("global_stride", "%rd4", 4).ordinal == 3  # registers pass unchecked


@pytest.mark.parametrize("field", [f for f in T.TENSORMAP_FIELDS
                                   if f not in ("global_address", "global_dim",
                                                "global_stride")]
                         + ["multicast", "mode", "num_multicast"])
def test_other_fields_are_not_device_mutable(field: str) -> None:
    with pytest.raises(AtomVerificationError) as ei:
        T.tma_update(field, 1)
    assert str(ei.value) == f"TMA descriptor field is not device-mutable: {field}"
    assert str(ei.value).startswith(D.TMA_FIELD_NOT_MUTABLE)


def test_leading_stride_is_not_device_mutable() -> None:
    with pytest.raises(AtomVerificationError) as ei:
        T.tma_update("stride", 256, 0)
    assert str(ei.value) == "TMA descriptor field is not device-mutable: leading stride"


@pytest.mark.parametrize(("args", "kw", "match"), [
    (("base", 0x1008), {}, "is not 16-byte aligned"),
    (("base", 0x1000, 1), {}, "takes no axis"),
    (("dim", 16, 5), {"rank": 5}, "axis 5 is not a dimension of a rank-5 map"),
    (("dim", 16), {}, "axis None is not a dimension"),
    (("dim", 0, 1), {}, r"global dim 0 is out of range \(1..2\^32\)"),
    (("stride", 24, 1), {}, "not a multiple of 16"),
    (("stride", 1 << 40, 1), {}, "not a multiple of 16 in 0..2"),
])
def test_update_values_are_checked(args, kw, match) -> None:
    with pytest.raises(AtomVerificationError, match=match):
        T.tma_update(*args, **kw)


def test_device_update_takes_a_zero_stride() -> None:
    # The driver encodes a 0 stride (a broadcast dimension) and the H100 reads it
    # (tests/gpu/test_tma_stride0_gpu.py); a device-side rebind writes the same field.
    assert T.tma_update("stride", 0, 1).value == 0


# ----------------------------------------------------------------------------- tables
def test_instruction_table() -> None:
    assert T.tma_instr("load", ".im2col").offsets(5) == 3
    assert T.tma_instr("load", ".im2col::w").offsets(4) == 2
    assert T.tma_instr("load", ".tile::gather4").coords(2) == 5
    assert T.tma_instr("store", ".im2col_no_offs").ranks == (3, 4, 5)
    assert not T.tma_instr("store", ".tile").multicast
    assert T.tma_instr("load", ".tile").available_on("sm_90")
    assert not T.tma_instr("load", ".im2col::w").available_on("sm_90a")
    assert T.tma_instr("load", ".im2col::w").available_on("sm_100a")
    with pytest.raises(AtomVerificationError, match="TMA store has no mode '.im2col::w'"):
        T.tma_instr("store", ".im2col::w")
    # every spec mode that is PTX names a table row of its direction
    for mode in T.TmaLoadMode:
        assert (("load", T.ptx_qualifiers(mode)[0]) in T.TMA_INSTRS)  # type: ignore[index]
    for mode in T.TmaStoreMode:
        q = T.ptx_qualifiers(mode)
        assert q is None or ("store", q[0]) in T.TMA_INSTRS


def test_sync_op_table() -> None:
    assert M.spell("mbarrier.try_wait.parity", scope="cluster") == \
        "mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64"
    assert M.spell("cp.async.bulk.wait_group") == "cp.async.bulk.wait_group"
    assert M.sync_op("mbarrier.arrive").feature_for(scope="cluster") == "mbarrier.tx"
    assert M.sync_op("mbarrier.arrive").available_on("sm_80", scope="cta")
    assert not M.sync_op("mbarrier.arrive").available_on("sm_80", scope="cluster")
    with pytest.raises(M.SyncOpError, match="no synchronisation instruction 'mbarrier.wait'"):
        M.spell("mbarrier.wait")
    with pytest.raises(M.SyncOpError, match="scope 'gpu' is not one of 'cta', 'cluster'"):
        M.spell("mbarrier.arrive", scope="gpu")
    with pytest.raises(M.SyncOpError, match="has no slot"):
        M.spell("mbarrier.init", scope="cta")
    with pytest.raises(M.SyncOpError, match="slots"):
        M.SyncOp("x", "a.{b}", (), "tma")


def test_registry_records() -> None:
    for name in ("atom.tma_load", "atom.tma_store", "atom.tma_reduce",
                 "atom.non_exec_tiled_tma_load", "atom.non_exec_tiled_tma_store",
                 "atom.non_exec_tiled_tma_reduce", "atom.make_exec_tma", "prefetch_tma_desc"):
        r = atom_record(name)
        assert r.allowed_on("sm_90a") and not r.allowed_on("sm_89")
    assert "PrefetchAtom" in atom_record("atom.tma_load").interfaces


# ----------------------------------------------------------------------------- enums
def test_mode_enum_values_are_the_specification_s() -> None:
    """The specification's "Partition Op and Mode Enums" (docs/spec-deviations.md#tma-mode-enums):
    TMA_LOAD_NO_MULTICAST = 0, TMA_LOAD_TWO_CTA = 1, TMA_LOAD_W_MULTICAST = 2,
    TMA_LOAD_W128_MULTICAST = 3; TMA_STORE_TILED = 0, TMA_STORE_IM2COL = 1,
    TMA_STORE_IM2COL_W = 2, TMA_STORE_IM2COL_W128 = 3; TMA_REDUCE_ADD = 0, MIN = 1, MAX = 2,
    INC = 3, DEC = 4, AND = 5, OR = 6, XOR = 7."""
    load = {"TMA_LOAD_NO_MULTICAST": 0, "TMA_LOAD_TWO_CTA": 1, "TMA_LOAD_W_MULTICAST": 2,
            "TMA_LOAD_W128_MULTICAST": 3}
    store = {"TMA_STORE_TILED": 0, "TMA_STORE_IM2COL": 1, "TMA_STORE_IM2COL_W": 2,
             "TMA_STORE_IM2COL_W128": 3}
    reduce = {f"TMA_REDUCE_{op}": i for i, op in enumerate(
        ("ADD", "MIN", "MAX", "INC", "DEC", "AND", "OR", "XOR"))}
    # nvatom's own values follow the specification's (docs/spec-deviations.md#tma-mode-enums)
    ours = {T.TmaLoadMode: {"TMA_LOAD_IM2COL": 4, "TMA_LOAD_GATHER4": 5},
            T.TmaStoreMode: {"TMA_STORE_SCATTER4": 4}, T.TmaReduceKind: {}}
    for enum_type, want in ((T.TmaLoadMode, load), (T.TmaStoreMode, store),
                            (T.TmaReduceKind, reduce)):
        want = {**want, **ours[enum_type]}
        assert {m.name: int(m.value) for m in enum_type} == want
        assert [m.name for m in enum_type] == list(want)  # declaration order too
    assert T.SPEC_LOAD_MODES == tuple(T.TmaLoadMode)[:4] and len(T.SPEC_STORE_MODES) == 4


# ----------------------------------------------------------------------------- interfaces
def _exec(kind: str, **kw):
    if kind == "load":
        a = T.non_exec_tiled_tma_load(TILE, SMEM, GMEM, VMAP, **kw)
        return T.make_exec_tma(a, T.MBarrier())
    if kind == "store":
        return T.make_exec_tma(T.non_exec_tiled_tma_store(T.TmaStoreMode.TMA_STORE_TILED, SMEM,
                                                          GMEM, VMAP))
    return T.make_exec_tma(T.non_exec_tiled_tma_reduce("add", SMEM, GMEM, VMAP))


def test_tma_atoms_implement_the_registry_interfaces() -> None:
    from nvatom.atoms.interfaces import interfaces_of

    for kind in ("load", "store", "reduce"):
        ex = _exec(kind)
        assert set(interfaces_of(ex)) == set(atom_record(ex.mnemonic).interfaces), kind
        assert set(interfaces_of(ex.atom)) == set(atom_record(ex.atom.mnemonic).interfaces)
    assert interfaces_of(_exec("load")) == ("CopyAtom", "PrefetchAtom", "TmaAtom",
                                            "AsyncCopyAtom")
    assert "PrefetchAtom" not in interfaces_of(_exec("store"))
    p = T.PrefetchTmaDesc()
    assert set(interfaces_of(p)) == set(atom_record(p.mnemonic).interfaces) == {"PrefetchAtom"}


def test_tma_contracts() -> None:
    """The specification's CopyAtomContract (#copy-atom-contracts): descriptor-driven, async; only
    loads prefetch."""
    c = _exec("load").contract()
    assert (c.source, c.destination, c.is_async, c.uses_tma_descriptor, c.supports_prefetch) == \
        (("gmem",), ("smem",), True, True, True)
    assert c.value_bits == 64 * 16 * 16  # the 64 x 16 bf16 box, moved by one thread
    s = _exec("store").contract()
    assert (s.source, s.destination, s.uses_tma_descriptor, s.supports_prefetch) == \
        (("smem",), ("gmem",), True, False)
    assert _exec("reduce").contract().supports_prefetch is False


def test_dispatcher_reaches_the_tma_atoms() -> None:
    from nvatom.atoms.interfaces import verify_atom_instance

    ld, st = _exec("load"), _exec("store")
    verify_atom_instance(ld, "sm_90", T.TmaCopyUse("gmem", "smem", 2))
    verify_atom_instance(st, "sm_120a", T.TmaCopyUse("smem", "gmem", 2))
    verify_atom_instance(T.PrefetchTmaDesc(), "sm_90", T.TmaPrefetchUse("const"))
    ld.verify_prefetch("sm_100a", T.TmaPrefetchUse("param"))
    cases = [
        (ld, "sm_89", T.TmaCopyUse("gmem", "smem"),
         "atom 'atom.tma_load<2d.tile>' needs tier SM90, but target sm_89 is tier SM89"),
        (ld, "sm_90", T.TmaCopyUse("gmem", "rmem"),
         "'atom.tma_load<2d.tile>' copies gmem -> smem, but got src: gmem, dst: rmem"),
        (st, "sm_90", T.TmaCopyUse("gmem", "smem"),
         "'atom.tma_store<2d.tile>' copies smem -> gmem, but got src: gmem, dst: smem"),
        (ld, "sm_90", T.TmaCopyUse("gmem", "smem", 3),
         "'atom.tma_load<2d.tile>' takes 2 tensor coordinates (descriptor rank 2), but got 3"),
        (T.PrefetchTmaDesc(), "sm_90", T.TmaPrefetchUse("shared"),
         "'prefetch_tma_desc' prefetches a tensor map in param, const, global space, but got "
         "shared"),
        (T.PrefetchTmaDesc(), "sm_80", T.TmaPrefetchUse(),
         "atom 'prefetch_tma_desc' needs tier SM90, but target sm_80 is tier SM80"),
    ]
    for atom, tgt, use, msg in cases:
        with pytest.raises(AtomVerificationError) as ei:
            verify_atom_instance(atom, tgt, use)
        assert str(ei.value) == msg
    # The non-exec atom is a TmaAtom only: no copy or prefetch interface to dispatch to.
    with pytest.raises(AtomVerificationError) as ei:
        verify_atom_instance(ld.atom, "sm_90", T.TmaCopyUse("gmem", "smem"))
    assert str(ei.value) == D.NO_KNOWN_INTERFACE


def test_two_cta_load_needs_the_cta_group_targets() -> None:
    a = T.non_exec_tiled_tma_load(T.TmaLoadMode.TMA_LOAD_TWO_CTA, SMEM, GMEM, VMAP,
                                  num_multicast=1)
    ex = T.make_exec_tma(a, T.MBarrier())
    assert a.features == ("tma", "tcgen05")
    assert ex.available_on("sm_100a") and not ex.available_on("sm_90a")
    ex.verify_instance("sm_100f", T.TmaCopyUse("gmem", "smem", 2))
    with pytest.raises(AtomVerificationError) as ei:
        ex.verify_instance("sm_90a", T.TmaCopyUse("gmem", "smem", 2))
    assert str(ei.value) == ("atom 'atom.tma_load<2d.tile>' is not available on sm_90a: it needs "
                             "tcgen05 (UMMA, tensor memory) (sm_10x/11x, 'a'/'f' targets)")


def test_tensor_map_is_a_descriptor_type() -> None:
    from nvatom.atoms.interfaces import DescriptorType, interfaces_of
    from nvatom.descriptors.tma import TensorMap

    m = TensorMap(kind="tiled", data_type="bf16", global_address=0x7F00_0000_0000,
                  global_dims=(4096, 4096), global_strides=(8192,), box_dims=(64, 64),
                  swizzle=128)
    assert isinstance(m, DescriptorType) and interfaces_of(m) == ("DescriptorType",)
