"""``nvatom desc tma``: build a TMA tensor map from the shell, check it, and show its 128 bytes.

The map is checked by :class:`nvatom.descriptors.tma.TensorMap` (the rules of the CUDA Driver
API's ``cuTensorMapEncodeTiled`` / ``cuTensorMapEncodeIm2col``), encoded by the pure-Python
encoder (:mod:`nvatom.descriptors.tma_encode`) and, where cuda.bindings finds a driver, encoded
again by the driver and compared byte for byte.  ``nvatom desc tma decode <256 hex digits>``
explains a map's bytes.  Dimensions are innermost first, as the driver takes them.
"""

from __future__ import annotations

import argparse
import re
from typing import Any

from nvatom.atoms.smem import SMEM_SWIZZLES
from nvatom.cli.common import clip, parse_int
from nvatom.descriptors import tma as desc_tma
from nvatom.descriptors import tma_encode
from nvatom.descriptors.tma import TensorMap, decode, tma_data_type
from nvatom.errors import NvatomError

__all__ = ["add_arguments", "cmd_tma"]


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The ``desc tma`` options, added to the ``desc`` sub-command's parser."""
    g = p.add_argument_group("tma (a CUtensorMap; dimensions innermost first, as the driver)")
    g.add_argument("--shape", metavar="D0,D1,..", help="globalDim, e.g. 4096,4096 (1..5 dims)")
    g.add_argument("--box", metavar="B0,B1,..", help="boxDim of a tiled map, e.g. 64,64")
    g.add_argument("--dtype", default="bf16",
                   help="element type: an nvatom name (bf16, f16, f32, tf32, u8 ...) or a "
                        "driver name (bfloat16, uint16, float32_ftz ...); default bf16")
    g.add_argument("--strides", metavar="S1,..",
                   help="byte strides of dims 1..rank-1, 0 for a broadcast dimension "
                        "(default: packed, dim i after dim i-1)")
    g.add_argument("--elem-strides", metavar="E0,E1,..", help="elementStrides (default all 1)")
    g.add_argument("--interleave", default="none", help="none, 16B or 32B")
    g.add_argument("--swizzle", default="none", help="none, 32B, 64B or 128B (default none)")
    g.add_argument("--l2", default="none", help="L2 promotion: none, 64B, 128B or 256B")
    g.add_argument("--oob", default="none", help="OOB fill: none or nan (NAN_REQUEST_ZERO_FMA)")
    g.add_argument("--address", default="0", help="globalAddress (default 0)")
    g.add_argument("--im2col", metavar="C,P",
                   help="an im2col map: channelsPerPixel,pixelsPerColumn (instead of --box)")
    g.add_argument("--lower", metavar="L0,..",
                   help="im2col pixelBoxLowerCorner (default 0s); negative values need '=': "
                        "--lower=-1,-1")
    g.add_argument("--upper", metavar="U0,..", help="im2col pixelBoxUpperCorner (default 0s)")
    drv = g.add_mutually_exclusive_group()
    drv.add_argument("--driver", dest="driver", action="store_true", default=None,
                     help="also encode with the CUDA driver and compare (error if unavailable)")
    drv.add_argument("--no-driver", dest="driver", action="store_false",
                     help="pure-Python encoder only")


#: The widest integer any option here takes (a 64-bit address or stride).
_U64 = 2**64 - 1
#: im2col corners are signed (the codec checks their real range); this only bounds the text.
_S16 = -(2**15)


def _int_list(option: str, text: str | None, lo: int = 0) -> tuple[int, ...] | None:
    if text is None:
        return None
    # 'x' separates too (64x64), except in a 0x prefix (0x40)
    parts = [t for c in text.split(",") for t in re.findall(r"0[xX][^xX]*|[^xX]+", c)
             if t.strip()]
    try:
        return tuple(parse_int(option, t, lo, _U64) for t in parts)
    except NvatomError:
        low = "0" if lo == 0 else f"{lo}"
        raise NvatomError(f"{option} takes comma-separated integers from {low} to 2^64-1, "
                          f"got {clip(text)}") from None


def _named(option: str, text: str, table: dict[str, str]) -> str:
    key = text.strip().lower()
    if key not in table:
        raise NvatomError(f"{option} = '{text}' is not one of {', '.join(sorted(set(table)))}")
    return table[key]


#: --swizzle spellings -> bytes, for every mode of the one swizzle table.
_SWIZZLE = {"none": "0", "0": "0"} | {
    alias: str(s.nbytes) for s in SMEM_SWIZZLES if s.nbytes
    for alias in (f"{s.nbytes}b", f"{s.nbytes}", f"sw{s.nbytes}")}
_INTERLEAVE = {"none": "none", "16b": "16B", "32b": "32B"}
_L2 = {"none": "none", "64b": "64B", "128b": "128B", "256b": "256B"}
_OOB = {"none": "none", "zero": "none", "nan": "nan_request_zero_fma",
        "nan_request_zero_fma": "nan_request_zero_fma"}


def build_map(args: argparse.Namespace) -> Any:
    """The checked TensorMap described by the options."""

    dims = _int_list("--shape", args.shape)
    if not dims:
        raise NvatomError("desc tma needs --shape D0,D1,.. (globalDim, innermost first)")
    dt = tma_data_type(args.dtype)
    strides = _int_list("--strides", args.strides)
    if strides is None:  # packed: each dimension right after the previous one
        strides, acc = [], dt.nbytes
        for d in dims[:-1]:
            acc *= d
            strides.append(acc)
        strides = tuple(strides)
    address = parse_int("--address", args.address, 0, _U64, "0x7f0000000000")
    kw: dict[str, Any] = dict(
        data_type=dt,
        global_address=address,
        global_dims=dims,
        global_strides=strides,
        element_strides=_int_list("--elem-strides", args.elem_strides) or (),
        interleave=_named("--interleave", args.interleave, _INTERLEAVE),
        swizzle=int(_named("--swizzle", args.swizzle, _SWIZZLE)),
        l2_promotion=_named("--l2", args.l2, _L2),
        oob_fill=_named("--oob", args.oob, _OOB),
    )
    if args.im2col is not None:
        if args.box is not None:
            raise NvatomError("--box is for tiled maps; an im2col map takes --im2col C,P")
        cp = _int_list("--im2col", args.im2col)
        if cp is None or len(cp) != 2:
            raise NvatomError(f"--im2col takes channelsPerPixel,pixelsPerColumn, got "
                              f"'{args.im2col}'")
        n = max(0, len(dims) - 2)
        kw.update(
            kind="im2col", channels_per_pixel=cp[0], pixels_per_column=cp[1],
            pixel_box_lower_corner=_int_list("--lower", args.lower, _S16) or (0,) * n,
            pixel_box_upper_corner=_int_list("--upper", args.upper, _S16) or (0,) * n,
        )
    else:
        if args.box is None:
            raise NvatomError("desc tma needs --box B0,B1,.. (or --im2col C,P)")
        if args.lower is not None or args.upper is not None:
            raise NvatomError("--lower/--upper are for im2col maps (--im2col C,P)")
        kw.update(kind="tiled", box_dims=_int_list("--box", args.box))
    return TensorMap(**kw)


def describe(m: Any) -> str:
    """The map's arguments, one per line, with the quantities derived from them."""
    dt, sw = m.data_type, m.swizzle
    lines = [f"TMA tensor map: {m.kind}, rank {m.rank} (dimensions innermost first)"]

    def row(name: str, value: str) -> None:
        lines.append(f"  {name:<22} {value}")

    row("tensorDataType", f"{dt.enum_name} (code {dt.code}, {dt.nbytes} bytes)")
    row("globalAddress", f"{m.global_address:#x}")
    row("globalDim", ", ".join(map(str, m.global_dims)))
    row("globalStrides", ", ".join(f"{s} B" for s in m.global_strides) or "(none: rank 1)")
    if m.kind == "tiled":
        row("boxDim", ", ".join(map(str, m.box_dims)))
    else:
        row("pixelBoxLowerCorner", ", ".join(map(str, m.pixel_box_lower_corner)))
        row("pixelBoxUpperCorner", ", ".join(map(str, m.pixel_box_upper_corner)))
        row("channelsPerPixel", str(m.channels_per_pixel))
        row("pixelsPerColumn", str(m.pixels_per_column))
    row("elementStrides", ", ".join(map(str, m.element_strides)))
    row("interleave", m.interleave)
    row("swizzle", f"{sw.name} ({sw.nbytes}-byte span)" if sw.nbytes else "none")
    row("l2Promotion", m.l2_promotion)
    row("oobFill", m.oob_fill)
    if m.kind == "tiled":
        inner = m.box_dims[0] * dt.nbytes
        row("box bytes", f"{m.box_bytes} (inner box row {inner} B)")
    else:
        inner = m.channels_per_pixel * dt.nbytes
        row("bytes per column", f"{inner * m.pixels_per_column} (one pixel {inner} B)")
    return "\n".join(lines)


def _driver_bytes(m: Any, want: bool | None) -> tuple[bytes | None, str]:
    """(driver bytes or None, a note); ``want`` None means: when a driver is there."""

    if want is False:
        return None, "driver: not asked (--no-driver)"
    if not desc_tma.driver_available():  # through the module: tests patch it
        if want:
            raise NvatomError("--driver: no CUDA driver through cuda.bindings on this machine")
        return None, "driver: not available here (cuda.bindings or a GPU missing)"
    return m.encode_with_driver(), ""


def cmd_tma(args: argparse.Namespace) -> int:
    if args.action == "decode":
        if not args.value:
            raise NvatomError("desc tma decode needs the map's 128 bytes as 256 hex digits")
        print(tma_encode.explain(args.value))
        print(describe(decode(args.value)))
        return 0
    if args.value is not None:
        raise NvatomError(f"desc tma encode takes options, not '{args.value}'")
    m = build_map(args)
    ours = m.encode()
    print(describe(m))
    print()
    print("128 bytes (pure-Python encoder):")
    print(tma_encode.explain(ours))
    theirs, note = _driver_bytes(m, args.driver)
    print()
    if theirs is None:
        print(note)
        return 0
    if theirs == ours:
        print("driver: cuTensorMapEncode* wrote the same 128 bytes")
        return 0
    diff = [i for i in range(len(ours)) if ours[i] != theirs[i]]
    print(f"driver: DIFFERENT bytes at {diff}")
    print(theirs.hex(" "))
    return 1
