#!/usr/bin/env python3
"""SHA-256 of the PTX nvatom emits for every GEMM configuration the tests build (plain and
grouped), for the attention kernel's shipped configurations (both epilogues), the attention
backward's and its preprocess kernels, and for every IR example that lowers: the guard for
behaviour-preserving refactors.

    python scripts/ptx_fingerprint.py --write   # record reports/ptx_fingerprint.json
    python scripts/ptx_fingerprint.py           # compare with it; exit 1 and name what moved

The recorded file is committed; a commit that changes emitted PTX on purpose re-records it
and says why.  tests/test_ptx_fingerprint.py runs the comparison in CI.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import itertools
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RECORD = ROOT / "reports" / "ptx_fingerprint.json"


def _h(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _sm90() -> dict[str, str]:
    from nvatom.kernels.sm90.config import GemmSm90Config
    from nvatom.kernels.sm90.gemm import build_gemm_sm90
    from nvatom.kernels.sm90.launch import default_config

    sys.path.insert(0, str(ROOT))  # the configurations the tests build, read from the tests
    from tests.kernels.test_gemm_sm90 import CONFIGS

    cfgs = [
        *CONFIGS,
        GemmSm90Config(cluster_m=2, multicast=False),
        GemmSm90Config(block_n=128, raster_group=4),
        # FP8: the promoted default, row-wise scales, e5m2, fast accumulation
        default_config("e4m3"),
        default_config("e4m3", scale_mode="row"),
        default_config("e4m3", b_dtype="e5m2"),
        default_config("e5m2", fast_accum=True, scale_mode="row"),
        # the promoted 128 x 256 tile that default_config picks by wave count (4096^3)
        default_config("e4m3", m=4096, n=4096),
        default_config("e4m3", scale_mode="row", m=4096, n=4096),
    ]
    # the grouped (MoE) kernel: every group-finding schedule, both B layouts, f32 output
    grouped = [dataclasses.replace(default_config(i, o, bm, schedule="cooperative"),
                                   grouped=True, group_sched=g)
               for (i, o, bm), g in itertools.product(
                   (("bf16", "bf16", "MN"), ("f16", "f16", "K"), ("bf16", "f32", "K")),
                   ("resume", "scan"))]
    # the grouped FP8 kernels grouped_plan builds (every scaling mode, promoted and fast)
    from nvatom.gemm_providers import grouped_plan

    grouped += [grouped_plan("e4m3", "bf16", "K", [64, 128], 256, 256, 0, 256, 0, 65536, 256, 0,
                             256, 132, scale_mode=mode, fast_accum=fast,
                             encode=lambda args: bytes(128)).cfg
                for mode, fast in (("tensor", False), ("tensor", True), ("row", False),
                                   ("row", True), ("block", False))]
    out = {}
    for c in [*cfgs, *grouped]:
        out[f"sm90/{c.name}"] = _h(build_gemm_sm90(c).emit())
    return out


def _attention() -> dict[str, str]:
    from nvatom.kernels.sm90.attention import build_attention_sm90
    from nvatom.kernels.sm90.attention_config import default_config

    out = {}
    for dtype, d, causal in itertools.product(("bf16", "f16"), (64, 128, 256), (False, True)):
        base = default_config(dtype, d, causal)
        for epi in ("tma", "direct"):
            cfg = dataclasses.replace(base, epilogue=epi)
            tag = f"{dtype}/d{d}/{'causal' if causal else 'full'}/{epi}"
            out[f"attention/{tag}"] = _h(build_attention_sm90(cfg).emit())
    # the backward: its shipped configurations and the preprocess kernels
    from nvatom.kernels.sm90.attention_bwd import build_attention_bwd_sm90
    from nvatom.kernels.sm90.attention_bwd_config import default_bwd_config
    from nvatom.kernels.sm90.attention_bwd_pre import BwdPreConfig, build_attention_bwd_pre

    for dtype, d, causal, win in itertools.product(("bf16", "f16"), (64, 128), (False, True),
                                                   (False, True)):
        cfg = default_bwd_config(dtype, d, causal, win)
        tag = f"{dtype}/d{d}/{'causal' if causal else 'full'}{'/window' if win else ''}"
        out[f"attention_bwd/{tag}"] = _h(build_attention_bwd_sm90(cfg).emit())
        pre = BwdPreConfig(dtype, d, causal)  # (dlse with the causal half: both kinds)
        out[f"attention_bwd_pre/{pre.name}"] = _h(build_attention_bwd_pre(pre).emit())
    # the packed variable-length kernels (forward, preprocess, backward)
    for d, causal in itertools.product((64, 128), (False, True)):
        fwd = dataclasses.replace(default_config("bf16", d, causal), epilogue="direct",
                                  varlen=True)
        out[f"attention_varlen/{fwd.name}"] = _h(build_attention_sm90(fwd).emit())
        bwd = dataclasses.replace(default_bwd_config("bf16", d, causal), varlen=True)
        out[f"attention_bwd/{bwd.name}"] = _h(build_attention_bwd_sm90(bwd).emit())
        pre = BwdPreConfig("bf16", d, causal, varlen=True)
        out[f"attention_bwd_pre/{pre.name}"] = _h(build_attention_bwd_pre(pre).emit())
    return out


def _sm80() -> dict[str, str]:
    from nvatom.kernels.gemm_sm80 import GemmSm80Config, GemmSm80Spec, emit_ptx

    out = {}
    configs = [GemmSm80Config(), GemmSm80Config(bm=64, bn=128, bk=64, warps_m=1, warps_n=2,
                                                stages=3)]
    for cfg, (am, bm), (i, o) in itertools.product(
            configs, itertools.product(("K", "M"), ("N", "K")),
            (("bf16", "f32"), ("f16", "f16"), ("bf16", "bf16"))):
        spec = GemmSm80Spec(i, o, am, bm, cfg)
        for t in ("sm_80", "sm_90a"):
            out[f"sm80/{spec}/{t}"] = _h(emit_ptx(spec, t))
    return out


def _sm100() -> dict[str, str]:
    from nvatom.kernels.gemm_sm100 import build_gemm_sm100_module, gemm_sm100_plan

    out = {}
    for bn, dtype, k_tiles in ((128, "bf16", 2), (64, "f16", 1), (32, "bf16", 3), (16, "f16", 1)):
        text = build_gemm_sm100_module(gemm_sm100_plan(bn, dtype), k_tiles).emit()
        out[f"sm100/bn{bn}/{dtype}/k{k_tiles}"] = _h(text)
    return out


def _ir() -> dict[str, str]:
    try:
        from nvatom.ir import driver
        from nvatom.ir.lower import lower
    except ImportError:  # no xDSL: the IR part is skipped (and reported)
        return {}
    out = {}
    for p in sorted((ROOT / "tests" / "ir").glob("*.mlir")):
        if p.name.startswith("invalid"):
            continue
        mod = driver.parse(p.read_text(), p.name)
        out[f"ir/{p.name}"] = _h(lower(mod, driver.verify(mod)).ptx)
    return out


def fingerprint() -> dict[str, str]:
    fp: dict[str, str] = {}
    for part in (_sm90, _sm80, _sm100, _attention, _ir):
        fp.update(part())
    return fp


def compare(recorded: dict[str, str], now: dict[str, str]) -> list[str]:
    """What moved: keys whose hash changed, and keys on one side only."""
    moved = [f"changed: {k}" for k in sorted(recorded.keys() & now.keys())
             if recorded[k] != now[k]]
    moved += [f"missing now: {k}" for k in sorted(recorded.keys() - now.keys())]
    moved += [f"new: {k}" for k in sorted(now.keys() - recorded.keys())]
    return moved


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", action="store_true", help="record the current fingerprint")
    args = ap.parse_args(argv)
    now = fingerprint()
    if args.write:
        RECORD.write_text(json.dumps(now, indent=1, sort_keys=True) + "\n", encoding="utf-8")
        print(f"recorded {len(now)} PTX fingerprints in {RECORD.relative_to(ROOT)}")
        return 0
    recorded = json.loads(RECORD.read_text(encoding="utf-8"))
    moved = compare(recorded, now)
    for line in moved:
        print(line)
    print(f"{len(now)} PTX fingerprints, {len(moved)} differences")
    return 1 if moved else 0


if __name__ == "__main__":
    sys.exit(main())
