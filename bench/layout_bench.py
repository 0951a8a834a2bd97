"""Per-call timings of nvatom.layout, side by side with pycute when it is installed.

Run:  PYTHONPATH=src python3 bench/layout_bench.py [--quick]

For each operation on representative layouts (SM80 m16n8k16 TV layouts, 128-byte swizzled
shared-memory tiles) we time, with time.perf_counter over many repetitions:

* ours, warm: the normal call; the algebra memoises results of immutable layouts, so a
  repeated call is mostly a cache lookup plus argument checking;
* ours, cold: the same call right after ``cache_clear()`` (the cost of clearing is measured
  separately and subtracted), i.e. the full computation;
* pycute: the same operation with pycute (no caching), when it has one.

The ratio columns are pycute_time / ours_time (> 1: we are faster).  Writes a JSON report to
reports/bench/layout.json.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

import nvatom.layout as L  # noqa: E402

try:
    import pycute as P
except ImportError:  # pragma: no cover - optional
    P = None


def per_call(fn: Callable[[], Any], min_time: float) -> float:
    """Seconds per call: the best of 5 runs of a loop sized to take about min_time."""
    n = 1
    while True:
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        dt = time.perf_counter() - t0
        if dt >= min_time / 5:
            break
        n *= 2
    best = dt / n
    for _ in range(4):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        best = min(best, (time.perf_counter() - t0) / n)
    return best


def cold(fn: Callable[[], Any]) -> Callable[[], Any]:
    def run() -> Any:
        L.cache_clear()
        return fn()

    return run


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="shorter timing loops")
    ap.add_argument("--out", default=str(ROOT / "reports" / "bench" / "layout.json"))
    args = ap.parse_args()
    min_time = 0.05 if args.quick else 0.25

    # Representative layouts.
    tv_a = L.Layout(((4, 8), (2, 2, 2)), ((32, 1), (16, 8, 128)))  # SM80 16x8x16 A (T,V)->MK
    tv_c = L.Layout(((4, 8), (2, 2)), ((32, 1), (16, 8)))  # SM80 16x8 C
    tile_mk = L.Layout((16, 16), (1, 16))  # column-major M x K tile
    smem = L.Layout((8, 64), (64, 1))  # K-major 128B smem atom in 16-bit units
    sw_smem = L.ComposedLayout(L.Swizzle(3, 3, 3), 0, smem)
    gmem = L.Layout((128, 64), (64, 1))
    cta_tiler = (L.Layout(64, 1), L.Layout(32, 1))
    thr = L.Layout((4, 8), (8, 1))
    val = L.Layout((2, 4), (4, 1))
    shape_a, stride_a = tv_a.shape, tv_a.stride
    text_a = str(tv_a)
    text_sw = str(sw_smem)

    def p(lay: L.Layout) -> Any:
        return P.Layout(lay.shape, lay.stride) if P else None

    pa, pc, pt, ps, pg = p(tv_a), p(tv_c), p(tile_mk), p(smem), p(gmem)
    pthr, pval = p(thr), p(val)
    ptiler = (P.Layout(64, 1), P.Layout(32, 1)) if P else None
    coord = ((1, 2), (1, 0, 1))
    pcoord = coord

    ops: list[tuple[str, Callable[[], Any], Callable[[], Any] | None, bool]] = [
        # name, ours, pycute, cacheable (cold column meaningful)
        ("make_layout (shape, stride)", lambda: L.Layout(shape_a, stride_a),
         (lambda: P.Layout(shape_a, stride_a)) if P else None, False),
        ("call L(i)", lambda: tv_a(77), (lambda: pa(77)) if P else None, False),
        ("call L(coord) / crd2idx", lambda: tv_a(coord), (lambda: pa(pcoord)) if P else None,
         False),
        ("coalesce", lambda: L.coalesce(tv_a), (lambda: P.coalesce(pa)) if P else None, True),
        ("composition (TV o tile)", lambda: L.composition(tile_mk, tv_a),
         (lambda: P.composition(pt, pa)) if P else None, True),
        ("composition (smem o TV)", lambda: L.composition(smem, tv_c),
         (lambda: P.composition(ps, pc)) if P else None, True),
        ("complement", lambda: L.complement(tv_c, 1024),
         (lambda: P.complement(pc, 1024)) if P else None, True),
        ("right_inverse", lambda: L.right_inverse(tv_a),
         (lambda: P.right_inverse(pa)) if P else None, True),
        ("left_inverse", lambda: L.left_inverse(tv_a),
         (lambda: P.left_inverse(pa)) if P else None, True),
        ("logical_divide (tiler)", lambda: L.logical_divide(gmem, cta_tiler),
         (lambda: P.logical_divide(pg, ptiler)) if P else None, True),
        ("zipped_divide (tiler)", lambda: L.zipped_divide(gmem, cta_tiler),
         (lambda: P.zipped_divide(pg, ptiler)) if P else None, True),
        ("logical_product", lambda: L.logical_product(thr, val),
         (lambda: P.logical_product(pthr, pval)) if P else None, True),
        ("blocked_product", lambda: L.blocked_product(thr, val), None, True),
        ("raked_product", lambda: L.raked_product(thr, val), None, True),
        ("tile_to_shape (swizzled)", lambda: L.tile_to_shape(sw_smem, (64, 128)), None, True),
        ("slice swizzled row", lambda: L.slice_and_offset((3, L._), sw_smem), None, False),
        ("print str(L)", lambda: str(tv_a), (lambda: str(pa)) if P else None, False),
        ("print fresh layout", lambda: str(L.Layout(shape_a, stride_a)),
         (lambda: str(P.Layout(shape_a, stride_a))) if P else None, False),
        ("parse_layout", lambda: L.parse_layout(text_a), None, False),
        ("parse_layout (swizzled)", lambda: L.parse_layout(text_sw), None, False),
    ]

    # Parsing is memoised too; measure its cold path through the notation cache.
    from nvatom.layout import layout as layout_module

    clear_cost = per_call(L.cache_clear, min_time)
    rows = []
    for name, ours, theirs, cacheable in ops:
        t_ours = per_call(ours, min_time)
        t_cold = None
        if cacheable:
            t_cold = max(per_call(cold(ours), min_time) - clear_cost, 1e-9)
        elif name.startswith("parse_layout"):
            def parse_cold(ours: Callable[[], Any] = ours) -> Any:
                layout_module._parse_cached.cache_clear()
                return ours()

            t_cold = per_call(parse_cold, min_time)
        t_py = per_call(theirs, min_time) if theirs else None
        rows.append({
            "op": name,
            "ours_us": t_ours * 1e6,
            "ours_cold_us": None if t_cold is None else t_cold * 1e6,
            "pycute_us": None if t_py is None else t_py * 1e6,
            "ratio": None if t_py is None else t_py / t_ours,
            "ratio_cold": None if (t_py is None or t_cold is None) else t_py / t_cold,
        })

    def f(v: float | None, fmt: str) -> str:
        return "-" if v is None else format(v, fmt)

    head = f"{'operation':<30} {'ours µs':>9} {'cold µs':>9} {'pycute µs':>10} " \
           f"{'ratio':>7} {'ratio cold':>10}"
    print(head)
    print("-" * len(head))
    for r in rows:
        print(f"{r['op']:<30} {f(r['ours_us'], '9.2f')} {f(r['ours_cold_us'], '9.2f')} "
              f"{f(r['pycute_us'], '10.2f')} {f(r['ratio'], '7.1f')} "
              f"{f(r['ratio_cold'], '10.1f')}")
    print("ratio = pycute time / our time (> 1: faster); cold = after cache_clear()")

    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({
        "python": platform.python_version(),
        "machine": platform.machine(),
        "pycute": None if P is None else getattr(P, "__file__", "installed"),
        "cache_clear_us": clear_cost * 1e6,
        "rows": rows,
    }, indent=2) + "\n")
    print(f"wrote {out.relative_to(ROOT) if out.is_relative_to(ROOT) else out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
