"""``nvatom desc tma``: the checked map, its 128 bytes (checked against the driver's bytes in
tests/data/tma_driver_corpus.json.gz), decode, and one-line errors with status 2."""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import pytest

from nvatom.cli import main

CORPUS = Path(__file__).parent / "data" / "tma_driver_corpus.json.gz"


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(["desc", "tma", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def driver_bytes(group: str) -> bytes:
    with gzip.open(CORPUS, "rt") as f:
        entries = json.load(f)["entries"]
    return bytes.fromhex(next(e["bytes"] for e in entries if e["group"] == group))


def dumped(out: str) -> bytes:
    """The 128 bytes back from the hex dump lines ('  8: 40 63 ...', '  80..127: zero')."""
    data = bytearray(128)
    for line in out.splitlines():
        if m := re.fullmatch(r"\s+(\d+): ((?:[0-9a-f]{2} ?){8})", line):
            off = int(m[1])
            data[off:off + 8] = bytes.fromhex(m[2])
    return bytes(data)


BASE = ["--shape", "1000,300,70,9,5", "--strides", "2048,614400,43008000,387072000",
        "--box", "64,16,8,4,2", "--dtype", "f16", "--swizzle", "128B",
        "--address", "0x7F1234560000", "--no-driver"]


def test_tiled_map_bytes_are_the_drivers(capsys) -> None:
    code, out, err = run(capsys, *BASE)
    assert code == 0 and not err
    assert "TMA tensor map: tiled, rank 5" in out
    assert re.search(r"boxDim\s+64, 16, 8, 4, 2", out)
    assert re.search(r"box bytes\s+131072 \(inner box row 128 B\)", out)
    assert re.search(r"swizzle\s+SW128 \(128-byte span\)", out)
    assert re.search(r"globalDim\[4\]\s+bytes 48..51\s+bits 0\+32\s+= 0x4 ", out)
    assert dumped(out) == driver_bytes("sweep:base")
    assert "driver: not asked (--no-driver)" in out


def test_im2col_map_bytes_are_the_drivers(capsys) -> None:
    code, out, _ = run(capsys, "--shape", "1000,300,70,9,5", "--strides",
                       "2048,614400,43008000,387072000", "--im2col", "64,32", "--lower=-1,-1,-1",
                       "--upper", "1,1,1", "--dtype", "float16", "--swizzle", "SW128",
                       "--address", "0x7F1234560000", "--no-driver")
    assert code == 0
    assert "TMA tensor map: im2col, rank 5" in out and "bytes per column" in out
    with gzip.open(CORPUS, "rt") as f:
        base5 = next(e["bytes"] for e in json.load(f)["entries"]
                     if e["group"] == "sweep:im2col_base" and e["args"]["tensorRank"] == 5)
    assert dumped(out) == bytes.fromhex(base5)


def test_packed_default_strides_and_rank1(capsys) -> None:
    code, out, _ = run(capsys, "--shape", "4096x4096", "--box", "64x64", "--no-driver")
    assert code == 0 and re.search(r"globalStrides\s+8192 B", out)
    assert re.search(r"tensorDataType\s+CU_TENSOR_MAP_DATA_TYPE_BFLOAT16", out)
    code, out, _ = run(capsys, "--shape", "1000", "--box", "64", "--dtype", "f16",
                       "--address", "0x7f0000001000", "--no-driver")
    assert code == 0 and "globalStrides          (none: rank 1)" in out


def test_decode_explains_driver_bytes(capsys) -> None:
    hexmap = driver_bytes("sweep:base").hex()
    code, out, _ = run(capsys, "decode", hexmap)
    assert code == 0
    assert re.search(r"globalAddress\s+bytes 0..7\s+bits 0\+64\s+= 0x7f1234560000", out)
    assert re.search(r"globalDim\s+1000, 300, 70, 9, 5", out)
    assert re.search(r"tensorDataType\s+CU_TENSOR_MAP_DATA_TYPE_FLOAT16", out)


def test_without_a_driver(capsys, monkeypatch) -> None:
    import nvatom.descriptors.tma as tma

    monkeypatch.setattr(tma, "driver_available", lambda: False)
    code, out, _ = run(capsys, "--shape", "64,64", "--box", "64,64")
    assert code == 0 and "driver: not available here" in out
    code, _, err = run(capsys, "--shape", "64,64", "--box", "64,64", "--driver")
    assert code == 2
    assert err == "nvatom: error: --driver: no CUDA driver through cuda.bindings on this machine\n"


BAD = [
    (["--shape", "4096,4096", "--box", "128,64", "--swizzle", "128B"],
     "boxDim[0] = 128 x 2 bytes = 256 bytes exceeds the 128-byte span of swizzle SW128"),
    (["--box", "64,64"], "desc tma needs --shape D0,D1,.. (globalDim, innermost first)"),
    (["--shape", "64,64"], "desc tma needs --box B0,B1,.. (or --im2col C,P)"),
    (["--shape", "64,6a", "--box", "64,64"],
     "--shape takes comma-separated integers from 0 to 2^64-1, got '64,6a'"),
    (["--shape", "64,64", "--box", "64,64", "--dtype", "e4m3"],
     "tensorDataType = 'e4m3' has no TMA data type (known: uint8, uint16, uint32, int32, "
     "uint64, int64, float16, float32, float64, bfloat16, float32_ftz, tfloat32, tfloat32_ftz)"),
    (["--shape", "64,64", "--box", "64,64", "--swizzle", "256B"],
     "--swizzle = '256B' is not one of 0, 128, 128b, 32, 32b, 64, 64b, none, sw128, sw32, sw64"),
    (["--shape", "64,64", "--box", "64,64", "--strides", "1000"],
     "globalStrides[1] = 1000 bytes is not a multiple of 16"),
    (["--shape", "64,64", "--box", "64,64", "--interleave", "16B"],
     "interleave = 16B needs tensorRank >= 3, got 2"),
    (["--shape", "64,64", "--box", "64,64", "--address", "0x1008"],
     "globalAddress = 0x1008 is not 16-byte aligned"),
    (["--shape", "64,64", "--box", "64,64", "--address", "1<<57"],
     "--address takes an integer from 0 to 18446744073709551615 (e.g. 0x7f0000000000), got "
     "'1<<57'"),
    (["--shape", "64,64", "--box", "64,64", "--l2", "512B"],
     "--l2 = '512B' is not one of 128b, 256b, 64b, none"),
    (["--shape", "64,32,32,4", "--im2col", "64"],
     "--im2col takes channelsPerPixel,pixelsPerColumn, got '64'"),
    (["--shape", "64,32,32,4", "--im2col", "64,2000"],
     "pixelsPerColumn = 2000 is out of range (1..1024)"),
    (["--shape", "64,32,32,4", "--im2col", "64,32", "--box", "8,8,8,8"],
     "--box is for tiled maps; an im2col map takes --im2col C,P"),
    (["--shape", "64,64", "--box", "64,64", "--lower", "1"],
     "--lower/--upper are for im2col maps (--im2col C,P)"),
    (["decode", "00ff"], "a tensor map is 128 bytes, got 2"),
    # fuzz finding (issue 28): 5000 hex digits reached Python's int-to-text limit (exit 70);
    # every number option is bounded before it is converted
    *[(["--shape", "64,64", "--box", "64,64", opt, val],
       f"{opt} takes {what}, got '{val[:40]}...' ({len(val)} characters)")
      for opt, what, val in (
          ("--address", "an integer from 0 to 18446744073709551615 (e.g. 0x7f0000000000)",
           "0x" + "f" * 5000),
          ("--strides", "comma-separated integers from 0 to 2^64-1", "0x" + "f" * 5000),
          ("--elem-strides", "comma-separated integers from 0 to 2^64-1", "1,0X" + "9" * 5000),
          ("--box", "comma-separated integers from 0 to 2^64-1", "64," + "9" * 5000))],
    *[([*pre, opt, val], f"{opt} takes comma-separated integers from 0 to 2^64-1, got "
       f"'{val[:40]}...' ({len(val)} characters)")
      for pre, opt, val in ((["--box", "64,64"], "--shape", "64,0x" + "f" * 5000),
                            (["--shape", "64,32,32,4"], "--im2col", "64,0x" + "f" * 5000))],
    (["decode"], "desc tma decode needs the map's 128 bytes as 256 hex digits"),
]


@pytest.mark.parametrize(("argv", "msg"), BAD, ids=[m[:36] for _, m in BAD])
def test_bad_input_is_one_line_status_2(capsys, argv: list[str], msg: str) -> None:
    code, out, err = run(capsys, *argv)
    assert code == 2 and not out
    assert err == f"nvatom: error: {msg}\n"


def test_help_lists_the_tma_options(capsys) -> None:
    with pytest.raises(SystemExit) as e:
        main(["desc", "--help"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    for opt in ("--shape", "--box", "--swizzle", "--elem-strides", "--interleave", "--l2",
                "--oob", "--im2col", "--no-driver"):
        assert opt in out
