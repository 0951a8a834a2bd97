"""Record what the CUDA driver writes into a 128-byte ``CUtensorMap`` (device script).

Runs on a machine with a GPU and ``cuda.bindings``; needs nothing of nvatom.  It encodes a corpus
of tensor-map configurations with ``cuTensorMapEncodeTiled`` / ``cuTensorMapEncodeIm2col`` and
writes each configuration with the driver's result (the CUresult name and, on success, the 128
bytes as hex) to ``OUT/tma_corpus.json``.  The corpus has two parts:

* ``sweep:*`` groups: one base map per kind with a single field varied (every address bit,
  dimension bits, stride bits, every box size, element stride, corner, channel and pixel count,
  every enum value), so that the byte layout can be read off field by field;
* ``random:*`` groups: random maps of every rank, data type, interleave, swizzle (the SM100
  ``128B_ATOM_*`` modes included), L2 promotion and OOB fill, mostly inside the documented rules.

It also records, in ``OUT/tma_experiments.json``: which bytes the driver writes at all (the map
prefilled with 0xAA and with 0x55 through ctypes), whether the bytes depend on a current context,
how rank-1 maps can be encoded (``globalStrides`` empty / None / one element / through ctypes), and
``cuTensorMapReplaceAddress``.

Usage: ``python3 scripts/tma_corpus.py OUTDIR [--seed N] [--random N]``.
"""

from __future__ import annotations

import argparse
import ctypes
import datetime
import json
import random
import sys
import time
from pathlib import Path
from typing import Any

try:
    from cuda.bindings import driver as cu
except ImportError:  # ``--pack`` only: no driver needed
    cu = None

ESIZE = {0: 1, 1: 2, 2: 4, 3: 4, 4: 8, 5: 8, 6: 2, 7: 4, 8: 8, 9: 2, 10: 4, 11: 4, 12: 4}
FLOATS = {6, 7, 8, 9, 10, 11, 12}
SWIZZLE_SPAN = {0: 0, 1: 32, 2: 64, 3: 128, 4: 128, 5: 128, 6: 128}
CORNER = {3: (-32768, 32767), 4: (-128, 127), 5: (-16, 15)}


def _enum_codes(name: str, default: int) -> list[int]:
    if cu is None:
        return list(range(default))
    return [int(m.value) for m in getattr(cu, name)]


DTYPES = _enum_codes("CUtensorMapDataType", 16)
SWIZZLES = _enum_codes("CUtensorMapSwizzle", 7)
INTERLEAVES = _enum_codes("CUtensorMapInterleave", 3)
L2S = _enum_codes("CUtensorMapL2promotion", 4)
OOBS = _enum_codes("CUtensorMapFloatOOBfill", 2)


def _err_name(err: Any) -> str:
    return getattr(err, "name", str(err))


def _map_bytes(tm: Any) -> bytes:
    raw = ctypes.string_at(tm.getPtr(), 128)
    via_opaque = b"".join(int(w).to_bytes(8, "little") for w in tm.opaque)
    assert raw == via_opaque, "CUtensorMap.getPtr() and .opaque disagree"
    return raw


def encode_bindings(c: dict[str, Any], strides_override: Any = "keep") -> tuple[str, str | None]:
    """Encode config ``c`` through cuda.bindings: (CUresult name, hex of the 128 bytes)."""
    u64 = cu.cuuint64_t
    u32 = cu.cuuint32_t
    if strides_override == "keep":
        # cuda.bindings passes NULL for an empty list, which the driver refuses even for rank 1:
        # give rank 1 a one-element dummy array (its value is not read, tma_experiments rank1).
        strides = [u64(s) for s in c["strides"]] or [u64(0)]
    else:
        strides = strides_override
    common = dict(
        tensorDataType=cu.CUtensorMapDataType(c["dtype"]),
        tensorRank=u32(c["rank"]),
        globalAddress=c["addr"],
        globalDim=[u64(d) for d in c["dims"]],
        globalStrides=strides,
    )
    tail = dict(
        elementStrides=[u32(e) for e in c["es"]],
        interleave=cu.CUtensorMapInterleave(c["interleave"]),
        swizzle=cu.CUtensorMapSwizzle(c["swizzle"]),
        l2Promotion=cu.CUtensorMapL2promotion(c["l2"]),
        oobFill=cu.CUtensorMapFloatOOBfill(c["oob"]),
    )
    try:
        if c["kind"] == "tiled":
            err, tm = cu.cuTensorMapEncodeTiled(
                **common, boxDim=[u32(b) for b in c["box"]], **tail)
        else:
            err, tm = cu.cuTensorMapEncodeIm2col(
                **common, pixelBoxLowerCorner=list(c["lower"]),
                pixelBoxUpperCorner=list(c["upper"]), channelsPerPixel=u32(c["cpp"]),
                pixelsPerColumn=u32(c["ppc"]), **tail)
    except Exception as e:  # a binding-level refusal (bad enum, overflow)
        return f"EXC {type(e).__name__}: {e}", None
    name = _err_name(err)
    if int(err) != 0:
        return name, None
    return name, _map_bytes(tm).hex()


# --- ctypes, straight to libcuda -----------------------------------------------------------
_LIB: Any = None
_U64P = ctypes.POINTER(ctypes.c_uint64)
_U32P = ctypes.POINTER(ctypes.c_uint32)
_I32P = ctypes.POINTER(ctypes.c_int32)


def _load_libcuda() -> None:
    global _LIB
    _LIB = ctypes.CDLL("libcuda.so.1")
    _LIB.cuTensorMapEncodeTiled.argtypes = [
        ctypes.c_void_p, ctypes.c_int, ctypes.c_uint32, ctypes.c_void_p, _U64P, _U64P, _U32P,
        _U32P, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int]
    _LIB.cuTensorMapEncodeIm2col.argtypes = [
        ctypes.c_void_p, ctypes.c_int, ctypes.c_uint32, ctypes.c_void_p, _U64P, _U64P, _I32P,
        _I32P, ctypes.c_uint32, ctypes.c_uint32, _U32P, ctypes.c_int, ctypes.c_int,
        ctypes.c_int, ctypes.c_int]
    _LIB.cuTensorMapReplaceAddress.argtypes = [ctypes.c_void_p, ctypes.c_void_p]


def _arr(ctype: Any, values: Any) -> Any:
    if values is None:
        return None
    return (ctype * max(1, len(values)))(*values)


def encode_ctypes(c: dict[str, Any], fill: int = 0, strides: Any = "keep") -> tuple[int, str]:
    """Encode through libcuda directly into a 64-byte aligned buffer prefilled with ``fill``."""
    raw = ctypes.create_string_buffer(128 + 64)
    base = (ctypes.addressof(raw) + 63) & ~63
    ctypes.memset(base, fill, 128)
    s = c["strides"] if strides == "keep" else strides
    s_arr = _arr(ctypes.c_uint64, s)
    common = (base, c["dtype"], c["rank"], c["addr"], _arr(ctypes.c_uint64, c["dims"]), s_arr)
    tail = (c["interleave"], c["swizzle"], c["l2"], c["oob"])
    if c["kind"] == "tiled":
        err = _LIB.cuTensorMapEncodeTiled(
            *common, _arr(ctypes.c_uint32, c["box"]), _arr(ctypes.c_uint32, c["es"]), *tail)
    else:
        err = _LIB.cuTensorMapEncodeIm2col(
            *common, _arr(ctypes.c_int32, c["lower"]), _arr(ctypes.c_int32, c["upper"]),
            c["cpp"], c["ppc"], _arr(ctypes.c_uint32, c["es"]), *tail)
    return int(err), ctypes.string_at(base, 128).hex()


# --- configurations ------------------------------------------------------------------------
def base_tiled(rank: int = 5) -> dict[str, Any]:
    dims = [1000, 300, 70, 9, 5][:rank]
    strides = []
    acc = 2 * 1024  # fp16, dims[0] padded to 1024 elements
    for d in dims[1:]:
        strides.append(acc)
        acc *= d
    return dict(kind="tiled", dtype=6, rank=rank, addr=0x7F1234560000, dims=dims,
                strides=strides, box=[64, 16, 8, 4, 2][:rank], es=[1] * rank, interleave=0,
                swizzle=3, l2=0, oob=0)


def base_im2col(rank: int = 5) -> dict[str, Any]:
    c = base_tiled(rank)
    del c["box"]
    c["kind"] = "im2col"
    n = rank - 2
    c.update(lower=[-1] * n, upper=[1] * n, cpp=64, ppc=32)
    if rank == 3:
        c.update(lower=[-3], upper=[5])
    return c


def vary(base: dict[str, Any], key: str, idx: int | None, value: Any) -> dict[str, Any]:
    c = json.loads(json.dumps(base))
    if idx is None:
        c[key] = value
    else:
        c[key][idx] = value
    return c


def sweeps() -> list[tuple[str, dict[str, Any]]]:
    out: list[tuple[str, dict[str, Any]]] = []
    b = base_tiled()
    b0 = dict(b, swizzle=0)
    out.append(("sweep:base", b))
    for k in range(4, 64):
        out.append(("sweep:addr", vary(b, "addr", None, 1 << k)))
    out.append(("sweep:addr", vary(b, "addr", None, 0)))
    for i in range(5):
        vals = sorted({1, 2, 3, 5, 7, 1000} | {1 << k for k in range(33)}
                      | {(1 << k) - 1 for k in range(1, 33)} | {(1 << k) + 1 for k in range(32)})
        for v in vals:
            out.append((f"sweep:dims{i}", vary(b, "dims", i, v)))
    for i in range(4):
        for k in range(4, 41):
            out.append((f"sweep:strides{i}", vary(b, "strides", i, 1 << k)))
        for v in (16 * 3, 16 * 5, 16 * 1000 + 16, (1 << 40) - 16):
            out.append((f"sweep:strides{i}", vary(b, "strides", i, v)))
    for i in range(5):
        for v in range(1, 257):
            out.append((f"sweep:box{i}", vary(b0, "box", i, v)))
    for i in range(5):
        for v in range(0, 10):
            out.append((f"sweep:es{i}", vary(b, "es", i, v)))
    for v in DTYPES:
        out.append(("sweep:dtype", vary(b0, "dtype", None, v)))
        out.append(("sweep:dtype", vary(dict(b0, box=[128, 16, 8, 4, 2]), "dtype", None, v)))
    for v in SWIZZLES:
        out.append(("sweep:swizzle", vary(b, "swizzle", None, v)))
        out.append(("sweep:swizzle", vary(dict(b, box=[16, 16, 8, 4, 2]), "swizzle", None, v)))
    for v in INTERLEAVES:
        for sw in SWIZZLES:
            out.append(("sweep:interleave", dict(b, interleave=v, swizzle=sw,
                                                 box=[16, 16, 8, 4, 2])))
    for v in L2S:
        out.append(("sweep:l2", vary(b, "l2", None, v)))
    for v in OOBS:
        out.append(("sweep:oob", vary(b, "oob", None, v)))
    for r in range(1, 6):
        out.append(("sweep:rank", base_tiled(r)))
    u8 = dict(base_tiled(3), dtype=0, swizzle=0, dims=[4096, 4096, 4096],
              strides=[4096, 4096 * 4096])
    for k in range(192, 257):  # the box byte limit, in steps of 1 KiB
        out.append(("sweep:smem_limit", dict(u8, box=[256, 4, k])))
    for j in range(1, 17):  # ... and in steps of 16 B around 227 KiB
        out.append(("sweep:smem_limit", dict(u8, box=[16 * j, 227, 64])))
        out.append(("sweep:smem_limit", dict(u8, box=[16 * j, 228, 64])))
    for es in ([1, 2, 1], [1, 1, 2], [2, 1, 1], [1, 2, 2]):  # raw or strided box bytes?
        out.append(("sweep:smem_limit", dict(u8, box=[256, 256, 4], es=es)))
        out.append(("sweep:smem_limit", dict(u8, box=[256, 256, 8], es=es)))
    for r in (1, 2, 3):  # interleave needs rank >= 3 (documented)
        out.append(("sweep:il_rank", dict(base_tiled(r), interleave=1, swizzle=0,
                                          box=[16, 4, 4][:r])))
    for il in (1, 2):
        for dt in (0, 6, 7):
            for sw in (0, 1, 3):
                for b0 in range(1, 257):
                    out.append((f"sweep:il{il}_box0", dict(
                        base_tiled(3), interleave=il, dtype=dt, swizzle=sw,
                        box=[b0, 8, 4], strides=[4096, 4096 * 512], dims=[512, 512, 64])))
    # im2col
    for r in (3, 4, 5):
        m = base_im2col(r)
        out.append(("sweep:im2col_base", m))
        lo, hi = CORNER[r]
        for j in range(r - 2):
            if r == 3:
                vals = sorted({lo, hi, 0, 1, -1} | {1 << k for k in range(15)}
                              | {-(1 << k) for k in range(16)} | {(1 << k) - 1 for k in range(15)})
            else:
                vals = list(range(lo, hi + 1))
            for v in vals:
                out.append((f"sweep:im2col{r}_lower{j}", vary(m, "lower", j, v)))
                out.append((f"sweep:im2col{r}_upper{j}", vary(m, "upper", j, v)))
        for v in range(0, 258):
            out.append((f"sweep:im2col{r}_cpp", vary(dict(m, swizzle=0), "cpp", None, v)))
        for v in list(range(0, 1026)) if r == 5 else [1, 2, 3, 512, 1023, 1024, 1025]:
            out.append((f"sweep:im2col{r}_ppc", vary(m, "ppc", None, v)))
        for i in range(r):
            for v in range(0, 10):
                out.append((f"sweep:im2col{r}_es{i}", vary(m, "es", i, v)))
        for i in range(r):
            for k in (0, 1, 5, 16, 31, 32):
                out.append((f"sweep:im2col{r}_dims{i}", vary(m, "dims", i, 1 << k)))
        for v in INTERLEAVES:
            for sw in SWIZZLES:
                out.append((f"sweep:im2col{r}_interleave",
                            dict(m, interleave=v, swizzle=sw, cpp=16)))
        for v in DTYPES:
            out.append((f"sweep:im2col{r}_dtype", vary(dict(m, swizzle=0), "dtype", None, v)))
        for key, vals in (("l2", L2S), ("oob", OOBS), ("swizzle", SWIZZLES)):
            for v in vals:
                out.append((f"sweep:im2col{r}_{key}", vary(dict(m, cpp=16), key, None, v)))
    return out


def _prod(xs: list[int]) -> int:
    n = 1
    for x in xs:
        n *= x
    return n


def _loguniform(rng: random.Random, lo: int, hi: int) -> int:
    return min(hi, max(lo, int(2 ** rng.uniform(lo.bit_length() - 1, hi.bit_length()))))


def random_config(rng: random.Random, kind: str, strict: bool) -> dict[str, Any]:
    """A random map; ``strict`` keeps it inside the documented rules (as far as known)."""
    dtype = rng.choice(DTYPES) if not strict or rng.random() < 0.1 else rng.choice(list(ESIZE))
    es_b = ESIZE.get(dtype, 1)
    lo_rank = 3 if kind == "im2col" else 1
    rank = rng.randint(lo_rank, 5)
    interleave = 0
    if rank >= 3 and rng.random() < 0.3:
        interleave = rng.choice(INTERLEAVES[1:])
    swizzle = rng.choice(SWIZZLES) if not strict else rng.choice([0, 1, 2, 3, 3, 4, 5, 6])
    if interleave == 2 and strict:
        swizzle = 1
    align = 32 if interleave == 2 or dtype in (14, 15) else 16
    r = rng.random()
    if r < 0.4:
        addr = rng.randrange(0, 1 << 48, align)
    elif r < 0.8:
        addr = rng.randrange(0, 1 << (57 if strict else 64), align)
    else:
        addr = 0x7F0000000000 + rng.randrange(0, 1 << 30, align)
    dims = [_loguniform(rng, 1, 1 << 32) for _ in range(rank)]
    if dtype in (14, 15):
        dims[0] = max(128, dims[0] // 128 * 128)
    if dtype == 13:
        dims[0] = max(2, dims[0] // 2 * 2)
    strides = [_loguniform(rng, 1, (1 << 40) - 1) // align * align or align
               for _ in range(rank - 1)]
    es = [rng.randint(1, 8) for _ in range(rank)]
    l2 = rng.choice(L2S)
    oob = rng.choice(OOBS) if dtype in FLOATS or not strict else 0
    c: dict[str, Any] = dict(kind=kind, dtype=dtype, rank=rank, addr=addr, dims=dims,
                             strides=strides, es=es, interleave=interleave, swizzle=swizzle,
                             l2=l2, oob=oob)
    span = SWIZZLE_SPAN[swizzle]
    if kind == "tiled":
        box = [rng.randint(1, 256) for _ in range(rank)]
        if interleave == 0 and strict:
            step = max(1, 16 // es_b)
            top = 256 if not span else min(256, span // es_b)
            box[0] = rng.randrange(step, top + 1, step)
        if dtype in (14, 15):
            box[0] = 128
        i = 1
        while strict and es_b * _prod(box) > 200 * 1024 and i < 50:
            j = rng.randrange(1, rank) if rank > 1 else 0
            box[j] = max(1, box[j] // 2)
            i += 1
        c["box"] = box
    else:
        lo, hi = CORNER[rank]
        if rng.random() < 0.5:
            lower = [rng.randint(lo, hi) for _ in range(rank - 2)]
            upper = [rng.randint(lo, hi) for _ in range(rank - 2)]
        else:
            lower = [rng.randint(lo, min(hi, 4)) for _ in range(rank - 2)]
            upper = [rng.randint(max(lo, -4), hi) for _ in range(rank - 2)]
        cpp = rng.randint(1, 256)
        if strict and interleave == 0:
            step = max(1, 16 // es_b)
            top = 256 if not span else min(256, span // es_b)
            cpp = rng.randrange(step, top + 1, step)
        if dtype in (14, 15):
            cpp = 128
        c.update(lower=lower, upper=upper, cpp=cpp, ppc=rng.randint(1, 1024))
    return c


def rank1_experiments(addr: int) -> dict[str, Any]:
    c = dict(base_tiled(1), addr=addr, swizzle=0)
    u64 = cu.cuuint64_t
    res: dict[str, Any] = {"config": c}
    for label, strides in (("bindings_empty_list", []), ("bindings_None", None),
                           ("bindings_one_0", [u64(0)]), ("bindings_one_16", [u64(16)]),
                           ("bindings_one_2000", [u64(2000)]), ("bindings_one_17", [u64(17)]),
                           ("bindings_one_2^50", [u64(1 << 50)])):
        res[label] = encode_bindings(c, strides_override=strides)
    for label, strides in (("ctypes_NULL", None), ("ctypes_one_0", [0]), ("ctypes_one_16", [16]),
                           ("ctypes_one_17", [17]), ("ctypes_one_2^50", [1 << 50])):
        res[label] = encode_ctypes(c, strides=strides)
    # rank 1 with other shapes, via a one-element dummy stride (bindings)
    more = []
    for box0, dim0, sw in ((8, 1, 0), (256, 1 << 32, 0), (64, 4096, 3), (16, 77, 1)):
        c2 = dict(c, box=[box0], dims=[dim0], swizzle=sw)
        more.append((c2, encode_bindings(c2, strides_override=[u64(0)]),
                     encode_ctypes(c2, strides=None), encode_ctypes(c2, strides=[0])))
    res["more"] = more
    return res


def _driver_args(c: dict[str, Any]) -> dict[str, Any]:
    """A corpus configuration in the driver's argument names (as TensorMap.driver_args())."""
    a = dict(tensorDataType=c["dtype"], tensorRank=c["rank"], globalAddress=c["addr"],
             globalDim=c["dims"], globalStrides=c["strides"])
    if c["kind"] == "tiled":
        a["boxDim"] = c["box"]
    else:
        a.update(pixelBoxLowerCorner=c["lower"], pixelBoxUpperCorner=c["upper"],
                 channelsPerPixel=c["cpp"], pixelsPerColumn=c["ppc"])
    a.update(elementStrides=c["es"], interleave=c["interleave"], swizzle=c["swizzle"],
             l2Promotion=c["l2"], oobFill=c["oob"])
    return a


def pack(raw: Path, out: Path) -> int:
    """The committed corpus: every configuration in the driver's argument names, the result,
    and the bytes of accepted maps, plus the experiments' conclusions, gzipped."""
    import gzip

    corpus = json.loads((raw / "tma_corpus.json").read_text())
    exp = json.loads((raw / "tma_experiments.json").read_text())
    entries = [dict(group=e["group"], kind=e["config"]["kind"],
                    args=_driver_args(e["config"]), result=e["result"], bytes=e["bytes"])
               for e in corpus["entries"]]
    # rank-1 maps encoded through libcuda with a one-element stride array (prefill experiment)
    for p in exp["prefill"]:
        if p["err"] == 0 and p["aa"] == p["x55"] and p["config"]["rank"] == 1:
            entries.append(dict(group="ctypes:rank1", kind=p["config"]["kind"],
                                args=_driver_args(p["config"]), result="CUDA_SUCCESS",
                                bytes=p["aa"]))
    written = [p for p in exp["prefill"] if p["err"] == 0]
    r1 = exp["rank1"]
    meta = dict(corpus["meta"])
    meta.update(
        recorded_by="scripts/tma_corpus.py",
        prefill=dict(maps=len(written),
                     identical_after_0xAA_and_0x55=sum(p["aa"] == p["x55"] for p in written)),
        no_context=exp["no_context"][0],
        deterministic_reencode=exp["deterministic_reencode"],
        rank1={k: v[0] for k, v in r1.items() if k not in ("config", "more")},
        rank1_bytes_equal=len({v[1] for k, v in r1.items()
                               if k not in ("config", "more") and v[0] in (0, "CUDA_SUCCESS")})
        == 1,
    )
    with gzip.open(out, "wt", compresslevel=9) as f:
        json.dump(dict(meta=meta, entries=entries), f, separators=(",", ":"))
    print(f"{out}: {len(entries)} entries, {out.stat().st_size} bytes")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--seed", type=int, default=6)
    ap.add_argument("--random", type=int, default=4000)
    ap.add_argument("--pack", metavar="RAW_DIR",
                    help="no device: pack RAW_DIR/tma_*.json into OUT (a .json.gz for tests)")
    a = ap.parse_args()
    if a.pack:
        return pack(Path(a.pack), Path(a.out))
    out = Path(a.out)
    t0 = time.time()
    _load_libcuda()
    (err,) = cu.cuInit(0)
    assert int(err) == 0, err
    exp: dict[str, Any] = {}
    # 1. bytes before any context exists
    b = base_tiled()
    exp["no_context"] = encode_bindings(b)
    err, dev = cu.cuDeviceGet(0)
    err, ver = cu.cuDriverGetVersion()
    err, name = cu.cuDeviceGetName(128, dev)
    major = cu.cuDeviceGetAttribute(
        cu.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev)[1]
    minor = cu.cuDeviceGetAttribute(
        cu.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev)[1]
    err, ctx = cu.cuDevicePrimaryCtxRetain(dev)
    (err,) = cu.cuCtxSetCurrent(ctx)
    err, dptr = cu.cuMemAlloc(1 << 20)
    dptr = int(dptr)
    import cuda.bindings

    meta = dict(
        device=name.split(b"\0")[0].decode(), compute_capability=f"{major}.{minor}",
        driver_version=ver, cuda_bindings=cuda.bindings.__version__,
        date=datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        python=sys.version.split()[0], seed=a.seed,
        enums=dict(dtype=DTYPES, swizzle=SWIZZLES, interleave=INTERLEAVES, l2=L2S, oob=OOBS),
    )
    exp["with_context"] = encode_bindings(b)
    exp["device_pointer"] = dptr
    # 2. which bytes the driver writes at all, and ctypes == bindings
    rng = random.Random(a.seed + 1)
    written = []
    for _ in range(300):
        c = random_config(rng, rng.choice(["tiled", "im2col"]), strict=True)
        e1, h1 = encode_ctypes(c, 0xAA)
        e2, h2 = encode_ctypes(c, 0x55)
        assert e2 == e1
        e3, h3 = encode_bindings(c)
        written.append(dict(config=c, err=e1, aa=h1, x55=h2, bindings=h3, err_b=e3))
    exp["prefill"] = written
    # 3. rank 1
    exp["rank1"] = rank1_experiments(dptr)
    # 4. cuTensorMapReplaceAddress
    rep = []
    for k in range(4, 64, 3):
        raw = ctypes.create_string_buffer(128 + 64)
        base = (ctypes.addressof(raw) + 63) & ~63
        _, h0 = encode_ctypes(b)
        ctypes.memmove(base, bytes.fromhex(h0), 128)
        err = _LIB.cuTensorMapReplaceAddress(base, 1 << k)
        rep.append((1 << k, int(err), h0, ctypes.string_at(base, 128).hex()))
    exp["replace_address"] = rep
    # 5. the corpus
    entries = []
    for group, c in sweeps():
        entries.append(dict(group=group, config=c))
    rng = random.Random(a.seed)
    for i in range(a.random):
        kind = "tiled" if i % 3 else "im2col"
        strict = i % 5 != 0
        entries.append(dict(group=f"random:{kind}:{'strict' if strict else 'loose'}",
                            config=random_config(rng, kind, strict)))
    # determinism: re-encode a few
    for e in entries:
        res, hx = encode_bindings(e["config"])
        e["result"] = res
        e["bytes"] = hx
    again = [encode_bindings(e["config"]) == (e["result"], e["bytes"]) for e in entries[::37]]
    exp["deterministic_reencode"] = [sum(again), len(again)]
    meta["seconds"] = round(time.time() - t0, 1)
    meta["entries"] = len(entries)
    meta["ok"] = sum(e["result"] == "CUDA_SUCCESS" for e in entries)
    (out / "tma_corpus.json").write_text(json.dumps(dict(meta=meta, entries=entries)))
    (out / "tma_experiments.json").write_text(json.dumps(dict(meta=meta, **exp), default=str))
    print(json.dumps(meta))
    print("rank1:", {k: v for k, v in exp["rank1"].items() if k not in ("config", "more")})
    for m in exp["rank1"]["more"]:
        print("rank1 more:", m[0]["box"], m[0]["dims"], m[1][0], m[2][0], m[3][0])
    print("no_context == with_context:", exp["no_context"] == exp["with_context"])
    print("deterministic:", exp["deterministic_reencode"])
    by: dict[str, dict[str, int]] = {}
    for e in entries:
        g = by.setdefault(e["group"].split("_")[0] if "im2col" in e["group"] else e["group"], {})
        g[e["result"]] = g.get(e["result"], 0) + 1
    for g, d in by.items():
        print(f"{g:<28} {d}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
