"""The pure-Python CUtensorMap encoder (nvatom.descriptors.tma_encode) against the driver's bytes.

Golden values: tests/data/tma_driver_corpus.json.gz, recorded by scripts/tma_corpus.py with
cuTensorMapEncodeTiled / cuTensorMapEncodeIm2col on the device (its ``meta`` names the device,
driver version and date): one base map per kind with a single argument varied per ``sweep:*``
group, and random maps.  Every accepted map must be reproduced byte for byte, and TensorMap's
checks must agree with the driver's verdicts (with the deviations listed here, each explained).
"""

from __future__ import annotations

import dataclasses
import functools
import gzip
import json
import re
import sys
import types
from pathlib import Path
from typing import Any

import pytest

from nvatom.descriptors import tma_encode as te
from nvatom.descriptors.tma import (
    INTERLEAVES,
    L2_PROMOTIONS,
    OOB_FILLS,
    TMA_DATA_TYPES,
    TensorMap,
    decode,
)
from nvatom.errors import DescriptorError

CORPUS = Path(__file__).parent.parent / "data" / "tma_driver_corpus.json.gz"
OK = "CUDA_SUCCESS"


@functools.lru_cache(maxsize=1)
def corpus() -> dict[str, Any]:
    with gzip.open(CORPUS, "rt") as f:
        return json.load(f)


def accepted() -> list[dict[str, Any]]:
    return [e for e in corpus()["entries"] if e["result"] == OK]


def modelled(e: dict[str, Any]) -> bool:
    """The entry uses only codes TensorMap models (no SM100 packed types or atom swizzles)."""
    return e["args"]["tensorDataType"] <= 12 and e["args"]["swizzle"] <= 3


def as_tensor_map(kind: str, a: dict[str, Any]) -> TensorMap:
    def name(table: dict[str, Any], code: int) -> str:
        return next(k for k, v in table.items() if (v[0] if isinstance(v, tuple) else v) == code)

    kw: dict[str, Any] = dict(
        kind=kind, data_type=next(t for t in TMA_DATA_TYPES if t.code == a["tensorDataType"]),
        global_address=a["globalAddress"], global_dims=a["globalDim"],
        global_strides=a["globalStrides"], element_strides=a["elementStrides"],
        interleave=name(INTERLEAVES, a["interleave"]), swizzle=(0, 32, 64, 128)[a["swizzle"]],
        l2_promotion=name(L2_PROMOTIONS, a["l2Promotion"]), oob_fill=name(OOB_FILLS, a["oobFill"]),
    )
    if kind == "tiled":
        kw["box_dims"] = a["boxDim"]
    else:
        kw.update(pixel_box_lower_corner=a["pixelBoxLowerCorner"],
                  pixel_box_upper_corner=a["pixelBoxUpperCorner"],
                  channels_per_pixel=a["channelsPerPixel"], pixels_per_column=a["pixelsPerColumn"])
    return TensorMap(**kw)


# --------------------------------------------------------------------------- the corpus
def test_corpus_records_its_origin_and_the_driver_experiments() -> None:
    meta = corpus()["meta"]
    assert meta["device"].startswith("NVIDIA") and meta["compute_capability"] == "9.0"
    assert meta["driver_version"] >= 12000 and meta["date"].startswith("20")
    # every byte is written by the driver (0xAA and 0x55 prefills gave the same map) ...
    assert meta["prefill"]["maps"] > 100
    assert meta["prefill"]["identical_after_0xAA_and_0x55"] == meta["prefill"]["maps"]
    # ... the same call gives the same bytes, and the encoder needs a current context
    ok, total = meta["deterministic_reencode"]
    assert ok == total > 100
    assert meta["no_context"] == "CUDA_ERROR_INVALID_CONTEXT"
    # rank 1: a NULL globalStrides is refused, any one-element array accepted and ignored
    r1 = meta["rank1"]
    assert r1["bindings_empty_list"] == r1["bindings_None"] == "CUDA_ERROR_INVALID_VALUE"
    assert r1["ctypes_NULL"] == 1  # CUDA_ERROR_INVALID_VALUE
    assert {v for k, v in r1.items() if k.split("_")[1] == "one"} == {OK, 0}
    assert meta["rank1_bytes_equal"] is True
    assert CORPUS.stat().st_size < 2 << 20


def test_corpus_covers_every_argument() -> None:
    groups = {e["group"] for e in accepted()}
    for g in ("sweep:addr", "sweep:dims4", "sweep:strides3", "sweep:box4", "sweep:es4",
              "sweep:dtype", "sweep:swizzle", "sweep:interleave", "sweep:l2", "sweep:oob",
              "sweep:rank", "sweep:im2col3_lower0", "sweep:im2col4_upper1",
              "sweep:im2col5_lower2", "sweep:im2col5_ppc", "sweep:im2col4_cpp", "ctypes:rank1",
              "random:tiled:strict", "random:im2col:strict"):
        assert g in groups, g
    acc = accepted()
    assert len(acc) > 6000
    assert {e["args"]["tensorDataType"] for e in acc} == set(range(13))
    assert {e["args"]["tensorRank"] for e in acc if e["kind"] == "tiled"} == {1, 2, 3, 4, 5}
    assert {(e["args"]["interleave"], e["args"]["swizzle"]) for e in acc} == {
        (i, s) for i in range(3) for s in range(4)}


def test_encoder_reproduces_every_accepted_map() -> None:
    bad = [e for e in accepted() if te.encode_args(e["kind"], e["args"]).hex() != e["bytes"]]
    assert not bad, (len(bad), bad[:3])


def test_fields_cover_every_bit_the_driver_sets() -> None:
    # the field table is exhaustive: no accepted map sets a bit outside the fields of its kind
    for kind in ("tiled", "im2col"):
        fields = [f for f in te.FIELDS if kind in f.kinds]
        covered = 0
        for f in fields:
            mask = ((1 << f.width) - 1) << f.bit
            assert not covered & mask, f"{f.name} overlaps another {kind} field"
            covered |= mask
        seen = 0
        for e in accepted():
            if e["kind"] == kind:
                seen |= int.from_bytes(bytes.fromhex(e["bytes"]), "little")
        assert seen & ~covered == 0, hex(seen & ~covered)
        assert max(f.bit + f.width for f in fields) <= 74 * 8  # bytes 74..127 always zero


def test_each_sweep_moves_only_its_field() -> None:
    """In a one-argument sweep the changed bytes lie in that argument's field (or in the
    derived smem_bytes / swizzle_word): the field table read off the sweeps."""
    byte_of = {f.name: set(range(f.byte, (f.bit + f.width - 1) // 8 + 1)) for f in te.FIELDS}
    derived = byte_of["smem_bytes"] | byte_of["swizzle_word"]
    expect = {f"sweep:dims{i}": byte_of[f"globalDim[{i}]"] for i in range(5)}
    expect.update({f"sweep:box{i}": byte_of[f"boxDim[{i}]"] for i in range(5)})
    expect.update({f"sweep:strides{i}": byte_of[f"globalStrides[{i + 1}]_lo"]
                   | byte_of[f"globalStrides[{i + 1}]_hi"] for i in range(4)})
    expect["sweep:addr"] = byte_of["globalAddress"]
    expect["sweep:l2"] = byte_of["l2_promotion"]
    expect["sweep:oob"] = byte_of["oob_nan"]
    base = bytes.fromhex(next(e["bytes"] for e in accepted() if e["group"] == "sweep:base"))
    for group, allowed in expect.items():
        b0 = base
        if group.startswith("sweep:box"):  # the box sweeps run without swizzle
            b0 = None
        for e in (x for x in accepted() if x["group"] == group):
            b = bytes.fromhex(e["bytes"])
            if b0 is None:
                b0 = b
                continue
            moved = {i for i in range(128) if b[i] != b0[i]}
            assert moved <= allowed | derived | byte_of["swizzle"], (group, sorted(moved))


def test_a_zero_stride_stores_zero_in_the_stride_field() -> None:
    """A broadcast dimension (global stride 0, which the driver accepts).  Golden:
    the driver's bytes for the same map with a 16-byte stride (corpus ``sweep:strides*``, whose
    stride field then holds 16 >> 4 = 1), with that field cleared; the driver's own bytes for
    the 0-stride map are compared on the GPU (tests/gpu/test_tma_stride0_gpu.py)."""
    for i in range(4):
        e = next(x for x in accepted() if x["group"] == f"sweep:strides{i}"
                 and x["args"]["globalStrides"][i] == 16)
        lo = next(f for f in te.FIELDS if f.name == f"globalStrides[{i + 1}]_lo")
        want = int.from_bytes(bytes.fromhex(e["bytes"]), "little") & ~(1 << lo.bit)
        args = dict(e["args"], globalStrides=[0 if j == i else s
                                              for j, s in enumerate(e["args"]["globalStrides"])])
        got = te.encode_args("tiled", args)
        assert int.from_bytes(got, "little") == want, i
        m = decode(got)
        assert m.global_strides[i] == 0 and m.encode() == got


def test_decode_inverts_encode_on_the_corpus() -> None:
    for e in accepted():
        if not modelled(e):
            continue
        data = bytes.fromhex(e["bytes"])
        try:
            m = as_tensor_map(e["kind"], e["args"])
        except DescriptorError:
            continue  # the deviations of test_model_agrees_with_the_driver
        assert m.encode() == data
        assert decode(data) == m
        assert decode(e["bytes"]) == m  # hex text too


def _deviation(e: dict[str, Any], msg: str) -> str | None:
    """Which known, explained disagreement between TensorMap and the driver this is (see
    docs/descriptors.md), or None."""
    a = e["args"]
    if e["result"] == OK:
        # documented: interleave 32B needs swizzle 32B; the driver accepts the others
        if msg.endswith("with interleave 32B: the swizzle must be SW32"):
            return "il32-swizzle" if a["interleave"] == 2 and a["swizzle"] != 1 else None
        # the driver's 32-bit pixel-box span wraps past 2^32; we refuse spans from 2^31
        if "must be 1..2^31 - 1" in msg and e["kind"] == "im2col":
            return "span-wrap"
        return None
    # im2col with interleave: refusals that no rule here explains
    return "im2col-interleave" if e["kind"] == "im2col" and a["interleave"] != 0 else None


def test_model_agrees_with_the_driver() -> None:
    """TensorMap accepts a map exactly when the driver did, up to the listed deviations."""
    disagree = []
    seen: dict[str, int] = {}
    for e in corpus()["entries"]:
        if not modelled(e):
            continue
        try:
            as_tensor_map(e["kind"], e["args"])
            ours, msg = True, ""
        except DescriptorError as err:
            ours, msg = False, str(err)
        if ours != (e["result"] == OK):
            why = _deviation(e, msg)
            if why is None:
                disagree.append((e["group"], e["result"], msg, e["args"]))
            else:
                seen[why] = seen.get(why, 0) + 1
    assert not disagree, (len(disagree), disagree[:3])
    assert seen["im2col-interleave"] <= 8, seen  # the unexplained refusals stay few


def test_sm100_arguments_are_refused_by_the_sm90_driver_and_by_the_encoder() -> None:
    sm100 = [e for e in corpus()["entries"] if not modelled(e)]
    assert sm100 and all(e["result"] != OK for e in sm100)
    e = next(x for x in sm100 if x["args"]["swizzle"] > 3)
    with pytest.raises(DescriptorError, match=r"^swizzle = [4-6] has no known encoding"):
        te.encode_args(e["kind"], e["args"])
    e = next(x for x in sm100 if x["args"]["tensorDataType"] > 12 and x["args"]["swizzle"] <= 3)
    with pytest.raises(DescriptorError, match=r"^tensorDataType = 1[3-5] has no known encoding"):
        te.encode_args(e["kind"], e["args"])


# --------------------------------------------------------------------------- values by hand
BF16 = TensorMap("tiled", "bfloat16", 0x7F00_0000_1000, (4096, 4096), (8192,), box_dims=(64, 64),
                 swizzle=128)


def test_known_fields_of_a_bf16_map() -> None:
    f = te.decode_fields(BF16.encode())
    assert f["globalAddress"] == 0x7F00_0000_1000 and f["im2col"] == 0
    assert f["rank_minus_1"] == 1 and f["format"] == 10 and f["swizzle"] == 3
    assert f["globalStrides[1]_lo"] == 8192 >> 4 and f["globalDim[0]"] == 4095
    assert f["boxDim[0]"] == 63 and f["smem_bytes"] == 64 * 64 * 2 and f["swizzle_word"] == 1024
    assert BF16.smem_bytes == 8192


def test_smem_bytes_rounds_down_and_counts_dimension_0() -> None:
    m = dataclasses.replace(BF16, box_dims=(64, 63), element_strides=(3, 2), swizzle=0)
    assert m.smem_bytes == 2 * (64 // 3) * (63 // 2)
    assert te.decode_fields(m.encode())["smem_bytes"] == m.smem_bytes
    assert m.box_bytes == 2 * 64 * 32  # the documented count: dim 0 unstrided, rounded up


def test_explain_names_fields_of_the_rank_only() -> None:
    text = te.explain(BF16.encode())
    assert "globalDim[1]" in text and "globalDim[2]" not in text
    assert re.search(r"boxDim\[0\]\s+byte 55 .*= 0x3f", text)
    assert "80..127: zero" in text
    im = TensorMap("im2col", "f16", 0x2000, (64, 32, 32, 4), (128, 4096, 131072),
                   pixel_box_lower_corner=(-1, -1), pixel_box_upper_corner=(1, 1),
                   channels_per_pixel=64, pixels_per_column=128)
    text = te.explain(im.encode())
    assert "pixelBoxLowerCorner" in text and "boxDim[0]" not in text
    assert decode(im.encode()) == im


DECODE_ERRORS = [
    ("a tensor map is 128 bytes, got 127", bytes(127)),
    ("a tensor map in hex must hold hex digits only", "zz" * 128),
    ("bits [88] are set outside every field of a tiled map", (1 << 88).to_bytes(128, "little")),
    ("format = 11 (tf32 = 0) is no known data type", (11 << 71).to_bytes(128, "little")),
    ("inconsistent tensor map: smem_bytes = 0 (expected 8192)",
     (int.from_bytes(BF16.encode(), "little") & ~(0xFFFFFFFF << 512)).to_bytes(128, "little")),
]


@pytest.mark.parametrize(("msg", "data"), DECODE_ERRORS, ids=[m[:30] for m, _ in DECODE_ERRORS])
def test_decode_errors(msg: str, data: Any) -> None:
    with pytest.raises(DescriptorError, match="^" + re.escape(msg) + "$"):
        decode(data)


ENCODE_ERRORS = [
    ("kind = 'gather' is not 'tiled' or 'im2col'", "gather", {}),
    ("globalAddress = 0x200000000000000 is not below 2^57", "tiled",
     {"globalAddress": 1 << 57}),
    ("globalStrides[1] = 8200 is not a multiple of 16 in 0..2^40 - 16", "tiled",
     {"globalStrides": (8200,)}),
    ("globalStrides has 0 entries, expected 1", "tiled", {"globalStrides": ()}),
    ("boxDim has 1 entries, expected 2", "tiled", {"boxDim": (64,)}),
    ("boxDim[0] = 256 does not fit its 8-bit field", "tiled", {"boxDim": (257, 64)}),
]


@pytest.mark.parametrize(("msg", "kind", "change"), ENCODE_ERRORS,
                         ids=[m[:30] for m, _, _ in ENCODE_ERRORS])
def test_encode_args_errors(msg: str, kind: str, change: dict[str, Any]) -> None:
    args = {**BF16.driver_args(), **change}
    with pytest.raises(DescriptorError, match="^" + re.escape(msg) + "$"):
        te.encode_args(kind, args)


# --------------------------------------------------------------------------- TensorMap rules
IM2COL = dict(kind="im2col", data_type="f16", global_address=0x2000,
              global_dims=(64, 32, 32, 4), global_strides=(128, 4096, 131072),
              pixel_box_lower_corner=(-1, -1), pixel_box_upper_corner=(1, 1),
              channels_per_pixel=64, pixels_per_column=128)

RULES = [  # the rules found on the driver (tests/data/tma_driver_corpus.json.gz)
    ("globalAddress = 0x200000000000000 is not below 2^57", BF16, dict(global_address=1 << 57)),
    ("interleave = 16B needs tensorRank >= 3, got 2", BF16, dict(interleave="16B")),
    ("boxDim[0] = 4 x 2 bytes = 8 bytes is not a multiple of 16", BF16,
     dict(global_dims=(64, 64, 2), global_strides=(128, 8192), box_dims=(4, 64, 1),
          element_strides=(), interleave="16B")),
    ("the box holds 262144 bytes (elementSize x prod(floor(boxDim[i] / elementStrides[i]))), "
     "more than the 233472 bytes (228 KiB) of shared memory the driver allows", BF16,
     dict(global_dims=(4096, 4096, 8), global_strides=(8192, 1 << 25), box_dims=(64, 256, 8),
          element_strides=())),
    ("the box holds 262144 bytes (elementSize x channelsPerPixel x pixelsPerColumn), more than "
     "the 233472 bytes (228 KiB) of shared memory the driver allows", IM2COL,
     dict(pixels_per_column=1024, swizzle=0, channels_per_pixel=128)),
    ("channelsPerPixel = 4 x 2 bytes = 8 bytes is not a multiple of 16", IM2COL,
     dict(channels_per_pixel=4)),
    ("pixelBoxLowerCorner[1] = 40 and pixelBoxUpperCorner[1] = 1 give a pixel box of -7 along "
     "globalDim[2] = 32 (globalDim - lower + upper must be 1..2^31 - 1)", IM2COL,
     dict(pixel_box_lower_corner=(-1, 40))),
    ("pixelBoxLowerCorner[0] = -1 and pixelBoxUpperCorner[0] = 1 give a pixel box of 2147483650 "
     "along globalDim[1] = 2147483648 (globalDim - lower + upper must be 1..2^31 - 1)", IM2COL,
     dict(global_dims=(64, 1 << 31, 32, 4))),
]


@pytest.mark.parametrize(("msg", "base", "change"), RULES, ids=[m[:40] for m, _, _ in RULES])
def test_rules_found_on_the_driver(msg: str, base: Any, change: dict[str, Any]) -> None:
    kw = ({f.name: getattr(base, f.name) for f in dataclasses.fields(base)}
          if isinstance(base, TensorMap) else dict(base))
    kw.update(change)
    with pytest.raises(DescriptorError, match="^" + re.escape(msg) + "$"):
        TensorMap(**kw)


# --------------------------------------------------------------------------- driver wrapper
class _FakeDriver(types.SimpleNamespace):
    """Just enough of cuda.bindings.driver to see what encode_with_driver passes."""


def _fake_cuda(result: int, calls: list[tuple[str, Any]]) -> types.ModuleType:
    class R(int):
        @property
        def name(self) -> str:
            return {0: "CUDA_SUCCESS", 1: "CUDA_ERROR_INVALID_VALUE"}.get(int(self), "OTHER")

    class Map:
        def __init__(self) -> None:
            import ctypes

            self.buf = ctypes.create_string_buffer(b"\x5a" * 128, 128)

        def getPtr(self) -> int:
            import ctypes

            return ctypes.addressof(self.buf)

    def encode(name: str) -> Any:
        def f(*args: Any, **kw: Any) -> Any:
            calls.append((name, kw))
            return R(result), Map()
        return f

    def ret(name: str, *vals: Any) -> Any:
        def f(*args: Any) -> Any:
            calls.append((name, args))
            return (R(0), *vals)
        return f

    ident = lambda x: x  # noqa: E731
    drv = _FakeDriver(
        cuInit=ret("cuInit"), cuCtxGetCurrent=ret("cuCtxGetCurrent", 0),
        cuDeviceGet=ret("cuDeviceGet", 0), cuDevicePrimaryCtxRetain=ret("retain", 7),
        cuCtxSetCurrent=ret("cuCtxSetCurrent"), cuDeviceGetCount=ret("count", 1),
        cuuint32_t=ident, cuuint64_t=ident, CUtensorMapDataType=ident,
        CUtensorMapInterleave=ident, CUtensorMapSwizzle=ident, CUtensorMapL2promotion=ident,
        CUtensorMapFloatOOBfill=ident,
        cuTensorMapEncodeTiled=encode("tiled"), cuTensorMapEncodeIm2col=encode("im2col"),
    )
    pkg = types.ModuleType("cuda")
    bindings = types.ModuleType("cuda.bindings")
    bindings.driver = drv  # type: ignore[attr-defined]
    pkg.bindings = bindings  # type: ignore[attr-defined]
    return pkg


@pytest.fixture
def fake_cuda(monkeypatch):
    def install(result: int) -> list[tuple[str, Any]]:
        calls: list[tuple[str, Any]] = []
        pkg = _fake_cuda(result, calls)
        monkeypatch.setitem(sys.modules, "cuda", pkg)
        monkeypatch.setitem(sys.modules, "cuda.bindings", pkg.bindings)
        monkeypatch.setitem(sys.modules, "cuda.bindings.driver", pkg.bindings.driver)
        return calls
    return install


def test_encode_with_driver_passes_a_stride_for_rank1_and_sets_a_context(fake_cuda) -> None:
    calls = fake_cuda(0)
    m = TensorMap("tiled", "uint8", 0x1000, (1 << 20,), (), box_dims=(256,))
    assert m.encode_with_driver() == b"\x5a" * 128
    names = [c[0] for c in calls]
    assert names[:2] == ["cuInit", "cuCtxGetCurrent"] and "retain" in names
    assert ("cuCtxSetCurrent", (7,)) in calls
    kw = dict(calls[-1][1])
    assert calls[-1][0] == "tiled" and kw["globalStrides"] == [0] and kw["boxDim"] == [256]
    assert m.to_bytes(driver=True) == b"\x5a" * 128
    assert m.to_bytes(driver=False) == m.encode()


def test_encode_with_driver_names_the_cuda_error(fake_cuda) -> None:
    fake_cuda(1)
    im = TensorMap(**IM2COL)  # type: ignore[arg-type]
    with pytest.raises(DescriptorError, match="^cuTensorMapEncodeIm2col refused the map: "
                       "CUDA_ERROR_INVALID_VALUE$"):
        im.encode_with_driver()


def test_encode_with_driver_without_cuda_bindings(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "cuda", None)
    monkeypatch.setitem(sys.modules, "cuda.bindings", None)
    with pytest.raises(DescriptorError, match="^the CUDA driver encoder needs cuda.bindings"):
        BF16.encode_with_driver()
    assert BF16.to_bytes() == BF16.encode()  # no driver: the pure-Python bytes
