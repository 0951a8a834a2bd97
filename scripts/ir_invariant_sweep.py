"""The whole sweep of issue 16's invariant: every generated atom use (nvatom.ir.generate: each
registry atom on each target) either fails ``verify`` with a known diagnostic or verifies,
lowers and ptxas assembles it (tests/ir/invariant.py).  Prints the counts per family and
target, the diagnostics of the rejections, and every failure; exits 1 on a failure.

    PYTHONPATH=src python scripts/ir_invariant_sweep.py [--family NAME] [--limit N]
"""

from __future__ import annotations

import argparse
import collections
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "ir"))

from invariant import check, xfail_reason

from nvatom.ir.generate import NOT_GENERATED, atom_use, cases


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--family", help="one family only")
    ap.add_argument("--limit", type=int, default=0, help="stop after N uses")
    args = ap.parse_args(argv)
    counts: collections.Counter[tuple[str, str]] = collections.Counter()
    diags: collections.Counter[tuple[str, str]] = collections.Counter()
    fails: list[str] = []
    todo = [c for c in cases() if args.family in (None, c[0].name)]
    for i, (fam, atom, t) in enumerate(todo[:args.limit or None]):
        use = atom_use(fam, atom, t)
        status, why = check(use)
        if status == "FAIL" and xfail_reason(use):
            status = "xfail"
        counts[(fam.name, status)] += 1
        if status == "rejected":
            # the diagnostic's shape: quoted names and type bodies elided
            diags[(fam.name, re.sub(r"'[^']*'|<[^>]*>|\bsm_\w+|SM\w+", "_", why)[:100])] += 1
        elif status in ("FAIL", "xfail"):
            fails.append(f"{status}: {use.atom} @ {use.target}: {why}")
        if (i + 1) % 2000 == 0:
            print(f"... {i + 1} of {len(todo)}", file=sys.stderr)
    fams = sorted({f for f, _ in counts})
    print(f"{'family':16} {'assembled':>10} {'rejected':>10} {'xfail':>6} {'FAIL':>6}")
    for f in fams:
        print(f"{f:16} " + " ".join(f"{counts[(f, s)]:>{w}}" for s, w in
                                    (("assembled", 10), ("rejected", 10), ("xfail", 6),
                                     ("FAIL", 6))))
    print("\nrejections by diagnostic:")
    for (f, d), n in sorted(diags.items()):
        print(f"  {n:6} {f}: {d}")
    print("\nnot generated:")
    for f, why in NOT_GENERATED.items():
        print(f"  {f}: {why}")
    for line in fails:
        print(line)
    return 1 if any(x.startswith("FAIL") for x in fails) else 0


if __name__ == "__main__":
    sys.exit(main())
