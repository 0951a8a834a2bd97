"""CuTe C++ itself as the oracle: compile the real headers and compare, case by case.

The CuTe headers ship in the nvidia-cutlass wheel (``cutlass_library/source/include``; set
NVATOM_CUTE_INCLUDE to use another copy).  They include ``cuda_runtime_api.h`` and CCCL's
``cuda/std``, found under CUDA_HOME or /usr/local/cuda*.  Every integer is a static ``Int<N>``,
matching our all-static semantics.  Skipped when g++ or any of these is missing.
"""

from __future__ import annotations

import glob
import importlib.util
import os
import random
import re
import shutil
import subprocess
from pathlib import Path

import pytest

import nvatom.layout as L
from nvatom.errors import LayoutError


def _cute_include() -> Path | None:
    env = os.environ.get("NVATOM_CUTE_INCLUDE")
    if env:
        return Path(env)
    spec = importlib.util.find_spec("cutlass_library")
    if spec is None or spec.origin is None:
        return None
    p = Path(spec.origin).parent / "source" / "include"
    return p if (p / "cute" / "layout.hpp").exists() else None


def _cuda_include() -> list[str] | None:
    roots = [os.environ.get("CUDA_HOME", ""), os.environ.get("CUDA_PATH", "")]
    roots += sorted(glob.glob("/usr/local/cuda*"), reverse=True)
    for r in roots:
        inc = Path(r) / "include"
        if (inc / "cuda_runtime_api.h").exists() and (inc / "cccl" / "cuda" / "std").exists():
            return [f"-I{inc}", f"-I{inc / 'cccl'}"]
        if (inc / "cuda_runtime_api.h").exists() and (inc / "cuda" / "std").exists():
            return [f"-I{inc}"]
    return None


def _flags() -> list[str] | None:
    cute, cuda = _cute_include(), _cuda_include()
    if shutil.which("g++") is None or cute is None or cuda is None:
        return None
    return ["-std=c++17", "-w", f"-I{cute}", *cuda]


FLAGS = _flags()
pytestmark = pytest.mark.skipif(FLAGS is None, reason="needs g++, the CuTe headers of the "
                                "nvidia-cutlass wheel and CUDA's cuda_runtime_api.h + CCCL")


def ct(t: object) -> str:
    if isinstance(t, int):
        return f"Int<{t}>"
    return "cute::tuple<" + ",".join(ct(x) for x in t) + ">"  # type: ignore[attr-defined]


def cl(x: L.Layout) -> str:
    return f"Layout<{ct(x.shape)},{ct(x.stride)}>{{}}"


def csw(x: L.ComposedLayout) -> str:
    sw = x.inner
    return (f"composition(Swizzle<{sw.bits},{sw.base},{sw.shift}>{{}}, Int<{x.offset}>{{}}, "
            f"{cl(x.outer)})")


def ctiler(t: object) -> str:
    if isinstance(t, L.Layout):
        return cl(t)
    if isinstance(t, int):
        return f"Int<{t}>{{}}"
    return "make_tile(" + ",".join(ctiler(v) for v in t) + ")"  # type: ignore[attr-defined]


def ccoord(c: object) -> str:
    if c is L._:
        return "_"
    if isinstance(c, int):
        return f"Int<{c}>{{}}"
    return "make_coord(" + ",".join(ccoord(v) for v in c) + ")"  # type: ignore[attr-defined]


def rand_layout(rng: random.Random, max_size: int) -> L.Layout:
    def shape(d: int, budget: int) -> object:
        if d == 0 or rng.random() < 0.4:
            return rng.choice([s for s in (1, 2, 3, 4, 6, 8) if s <= budget] or [1])
        out = []
        for _i in range(rng.randint(1, 3)):
            v = shape(d - 1, budget)
            out.append(v)
            budget = max(1, budget // L.size(v))  # type: ignore[arg-type]
        return tuple(out)

    s = shape(2, max_size)
    leaves = L.flatten_to_tuple(s)  # type: ignore[arg-type]
    if rng.random() < 0.6:
        order = list(range(len(leaves)))
        rng.shuffle(order)
        strides = [0] * len(leaves)
        cur = 1
        for i in order:
            strides[i] = cur if leaves[i] != 1 else 0
            cur *= leaves[i] * rng.choice((1, 1, 1, 2))
    else:
        strides = [rng.choice((0, 1, 2, 3, 4, 8, 16)) for _ in leaves]
    return L.Layout(s, L.unflatten(tuple(strides), s) if isinstance(s, tuple) else strides[0])


def pow2_layout(rng: random.Random) -> L.Layout:
    s = tuple(rng.choice((2, 4, 8)) for _i in range(rng.randint(2, 3)))
    order = list(range(len(s)))
    rng.shuffle(order)
    strides = [0] * len(s)
    cur = 1
    for i in order:
        strides[i] = cur
        cur *= s[i]
    return L.Layout(s, tuple(strides))


def make_cases(seed: int, n: int) -> list[tuple[str, str, bool]]:
    """(C++ expression, our printed answer, answer is a (layout, offset) pair)."""
    rng = random.Random(seed)
    cases: list[tuple[str, str, bool]] = []
    seen: set[str] = set()
    ops = ["coalesce", "filter", "composition", "complement", "complement_shape",
           "right_inverse", "left_inverse", "logical_divide", "zipped_divide", "tiled_divide",
           "logical_product", "blocked_product", "raked_product", "upcast", "downcast",
           "layout_like", "tile_to_shape", "slice", "swizzle_slice", "max_common_vector"]
    while len(cases) < n:
        op = rng.choice(ops)
        a, b = rand_layout(rng, 128), rand_layout(rng, 16)
        pair = False
        try:
            if op in ("coalesce", "filter", "right_inverse", "left_inverse"):
                ours, expr = str(getattr(L, op)(a)), f"{op}({cl(a)})"
            elif op == "composition":
                ours, expr = str(L.composition(a, b)), f"composition({cl(a)}, {cl(b)})"
            elif op == "complement":
                m = rng.choice((1, 24, 64, 100))
                ours, expr = str(L.complement(b, m)), f"complement({cl(b)}, Int<{m}>{{}})"
            elif op == "complement_shape":
                ours = str(L.complement(b, a.shape))
                expr = f"complement({cl(b)}, {ct(a.shape)}{{}})"
            elif op in ("logical_divide", "zipped_divide", "tiled_divide", "logical_product"):
                k = rng.randint(1, a.rank)
                t = tuple(rng.choice((2, 4, rand_layout(rng, 8))) for _i in range(k))
                tiler = t if rng.random() < 0.5 else b
                ours = str(getattr(L, op)(a, tiler))
                expr = f"{op}({cl(a)}, {ctiler(tiler)})"
            elif op in ("blocked_product", "raked_product"):
                a2 = L.Layout(a.shape[:2], a.stride[:2]) if a.rank >= 2 else a  # type: ignore[index]
                b2 = L.Layout((rng.choice((2, 3)), rng.choice((1, 2, 4))),
                              (1, rng.choice((2, 3))))
                if a2.rank != 2:
                    continue
                ours, expr = str(getattr(L, op)(a2, b2)), f"{op}({cl(a2)}, {cl(b2)})"
            elif op == "upcast":
                ours, expr = str(L.upcast(a, 2)), f"upcast<2>({cl(a)})"
            elif op == "downcast":
                ours, expr = str(L.downcast(a, 4)), f"downcast<4>({cl(a)})"
            elif op == "layout_like":
                ours, expr = str(L.make_layout_like(a)), f"make_layout_like({cl(a)})"
            elif op == "max_common_vector":
                ours = str(L.max_common_vector(a, b))
                expr = f"max_common_vector({cl(a)}, {cl(b)})"
            elif op == "tile_to_shape":
                blk = L.Layout((rng.choice((2, 4)), rng.choice((1, 2))), (1, rng.choice((2, 4))))
                trg = (blk.shape[0] * rng.choice((1, 2, 3)), blk.shape[1] * 4)  # type: ignore[index]
                order = rng.choice((None, (1, 0)))
                ours = str(L.tile_to_shape(blk, trg, order))
                expr = (f"tile_to_shape({cl(blk)}, {ct(trg)}{{}}"
                        + (f", {ct(order)}{{}})" if order else ")"))
            elif op == "slice":
                c = tuple(L._ if rng.random() < 0.5 else 0 for _i in range(a.rank))
                if not any(x is L._ for x in c) or a.rank < 2:
                    continue
                sub, off = L.slice_and_offset(c, a)
                ours, expr, pair = f"{sub} {off}", f"slice_and_offset({ccoord(c)}, {cl(a)})", True
            else:  # swizzle_slice
                outer = pow2_layout(rng)
                sw = L.Swizzle(rng.randint(1, 3), rng.randint(0, 3), rng.choice((-1, 1)) * 3)
                x = L.ComposedLayout(sw, 0, outer)
                c = tuple(L._ if i == rng.randrange(outer.rank) else rng.randrange(s)
                          for i, s in enumerate(outer.shape))  # type: ignore[arg-type]
                if not any(v is L._ for v in c):
                    continue
                sub, off = L.slice_and_offset(c, x)
                ours, expr, pair = f"{sub} {off}", f"slice_and_offset({ccoord(c)}, {csw(x)})", True
        except LayoutError:
            continue
        if expr not in seen:
            seen.add(expr)
            cases.append((expr, ours, pair))
    return cases


HEADER = ["#include <cute/layout.hpp>", "#include <cute/swizzle_layout.hpp>",
          "#include <cute/layout_composed.hpp>", "#include <iostream>", "using namespace cute;",
          "int main() {"]


def compile_and_run(tmp: Path, body: list[str]) -> subprocess.CompletedProcess[str]:
    src = tmp / "oracle.cpp"
    src.write_text("\n".join([*HEADER, *body, "}"]))
    exe = tmp / "oracle"
    build = subprocess.run(["g++", *FLAGS, str(src), "-o", str(exe)],  # type: ignore[misc]
                           capture_output=True, text=True)
    if build.returncode:
        lines = sorted({int(m.group(1)) - len(HEADER) - 1
                        for m in re.finditer(r"oracle\.cpp:(\d+):\d+:", build.stderr)})
        pytest.fail(f"C++ rejected case(s) {lines[:5]}: {build.stderr[-1500:]}")
    return subprocess.run([str(exe)], capture_output=True, text=True, check=True)


def test_against_compiled_cute(tmp_path: Path) -> None:
    cases = make_cases(seed=20241122, n=160)
    fixed = [  # the brief's and the docs' headline cases
        ("composition(Layout<Shape<_4,_8>,Stride<_8,_1>>{}, Layout<Shape<_2,_4>,Stride<_1,_2>>{})",
         "(2,(2,2)):(8,(16,1))", False),
        ("composition(Layout<Shape<_6,_4>,Stride<_1,_10>>{}, Layout<_4,_4>{})",
         "(2,2):(4,10)", False),
        ("logical_divide(Layout<Shape<_3,_5>,Stride<_1,_4>>{}, Layout<_2,_1>{})",
         "(2,(2,5)):(1,(2,4))", False),
        ("left_inverse(Layout<_4,_4>{})", "(4,4):(0,1)", False),
        ("complement(Layout<_2,_1>{}, Shape<_3,_5>{})", "10:2", False),
    ]
    allc = fixed + cases
    body = []
    for expr, _ours, pair in allc:
        if pair:
            body.append(f'  {{ auto r = {expr}; print(get<0>(r)); print(" "); '
                        f'print(get<1>(r)); print("\\n"); }}')
        else:
            body.append(f'  {{ auto r = {expr}; print(r); print("\\n"); }}')
    out = compile_and_run(tmp_path, body).stdout.splitlines()
    assert len(out) == len(allc)
    bad = [(e, o, c.replace("_", "")) for (e, o, _p), c in zip(allc, out, strict=True)
           if c.replace("_", "") != o]
    assert not bad, bad[:5]


@pytest.mark.parametrize(
    "expr",
    [
        "composition(Layout<Shape<_4,_8>,Stride<_8,_1>>{}, Layout<_3,_5>{})",
        "complement(Layout<Shape<_2,_2>,Stride<_1,_1>>{}, Int<8>{})",
        "upcast<2>(Layout<_2,_3>{})",
    ],
)
def test_cute_rejects_what_we_reject(tmp_path: Path, expr: str) -> None:
    src = tmp_path / "err.cpp"
    src.write_text("\n".join([*HEADER, f"  auto r = {expr}; print(r);", "}"]))
    build = subprocess.run(["g++", *FLAGS, "-fsyntax-only", str(src)],  # type: ignore[misc]
                           capture_output=True, text=True)
    assert build.returncode != 0
    assert "static assertion failed" in build.stderr
