"""The whole sweep of issue 16's invariant: every generated atom use (nvatom.ir.generate: each
registry atom on each target) either fails ``verify`` with a known diagnostic or verifies,
lowers and ptxas assembles it (tests/ir/invariant.py).  Prints the counts per family, the
diagnostics of the rejections, and every failure; exits 1 on a failure.

    PYTHONPATH=src python scripts/ir_invariant_sweep.py [--family NAME] [--limit N]
        [--jobs N] [--target T[,T...]]

The lowered kernels of one target are assembled ``BATCH`` at a time as one PTX module (each
kernel renamed; a batch ptxas rejects is assembled kernel by kernel to name the failures):
the ``umma`` family alone is 29,804 atoms x 25 targets.
"""

from __future__ import annotations

import argparse
import collections
import multiprocessing
import re
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "ir"))

from invariant import check, verify_and_lower, xfail_reason

from nvatom.atoms.registry import family
from nvatom.ir.generate import NOT_GENERATED, atom_named, atom_use, cases
from nvatom.runtime.ptxas import PtxasError, assemble

BATCH = 48
_HEADER = re.compile(r"\A\.version (\d+)\.(\d+)\n\.target (\S+)\n\.address_size 64\n")


def _merge(ptxs: list[str]) -> str:
    """One module of the kernels of ``ptxs`` (one target), each renamed, the highest version."""
    versions, bodies, tgt = [], [], ""
    for i, text in enumerate(ptxs):
        m = _HEADER.match(text)
        assert m, text[:80]
        versions.append((int(m.group(1)), int(m.group(2))))
        tgt = m.group(3)
        bodies.append(re.sub(r"\.entry (\w+)\(", rf".entry \1_{i}(", text[m.end():]))
    v = max(versions)
    return f".version {v[0]}.{v[1]}\n.target {tgt}\n.address_size 64\n" + "\n".join(bodies)


def _run(chunk: list[tuple[str, str, str]]) -> tuple[Any, Any, list[str]]:
    counts: collections.Counter[tuple[str, str]] = collections.Counter()
    diags: collections.Counter[tuple[str, str]] = collections.Counter()
    fails: list[str] = []
    pending: dict[str, list[tuple[Any, Any]]] = collections.defaultdict(list)

    def verdict(use: Any, status: str, why: str) -> None:
        if status == "FAIL" and xfail_reason(use):
            status = "xfail"
        counts[(use.family, status)] += 1
        if status == "rejected":  # the diagnostic's shape: quoted names and bodies elided
            diags[(use.family, re.sub(r"'[^']*'|<[^>]*>|\bsm_\w+|SM\w+", "_", why)[:100])] += 1
        elif status in ("FAIL", "xfail"):
            fails.append(f"{status}: {use.atom} @ {use.target}: {why}")

    def flush(tgt: str) -> None:
        batch = pending.pop(tgt, [])
        if not batch:
            return
        try:
            assemble(_merge([out.ptx for _, out in batch]), tgt)
            for use, _ in batch:
                verdict(use, "assembled", "")
        except PtxasError:
            for use, _ in batch:
                verdict(use, *check(use))

    for fam_name, atom_name, t in chunk:
        fam = family(fam_name)
        use = atom_use(fam, atom_named(fam, atom_name), t)
        status, why, out = verify_and_lower(use)
        if out is None:
            verdict(use, status, why)
            continue
        pending[out.target].append((use, out))
        if len(pending[out.target]) >= BATCH:
            flush(out.target)
    for tgt in list(pending):
        flush(tgt)
    return counts, diags, fails


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--family", help="one family only")
    ap.add_argument("--target", help="these targets only (comma-separated)")
    ap.add_argument("--limit", type=int, default=0, help="stop after N uses")
    ap.add_argument("--jobs", type=int, default=1, help="worker processes")
    args = ap.parse_args(argv)
    targets = None if args.target is None else set(args.target.split(","))
    todo = [(f.name, a.name, t) for f, a, t in cases()
            if args.family in (None, f.name) and (targets is None or t in targets)]
    todo = todo[:args.limit or None]
    size = 2000
    chunks = [todo[i:i + size] for i in range(0, len(todo), size)]
    counts: collections.Counter[tuple[str, str]] = collections.Counter()
    diags: collections.Counter[tuple[str, str]] = collections.Counter()
    fails: list[str] = []
    with multiprocessing.Pool(args.jobs) as pool:
        for i, (c, d, f) in enumerate(pool.imap_unordered(_run, chunks)):
            counts.update(c)
            diags.update(d)
            fails += f
            for line in f:  # as they come: a long sweep shows its failures early
                print(line, file=sys.stderr)
            print(f"... {min((i + 1) * size, len(todo))} of {len(todo)}: "
                  + ", ".join(f"{k[1]} {n}" for k, n in sorted(counts.items())),
                  file=sys.stderr)
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
    for line in sorted(fails):
        print(line)
    return 1 if any(x.startswith("FAIL") for x in fails) else 0


if __name__ == "__main__":
    sys.exit(main())
