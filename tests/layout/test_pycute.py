"""Where NVIDIA's Python model pycute (nvidia-cutlass 4.2.0.0) and CuTe C++ disagree.

Each case asserts the C++ answer (CUTLASS 4.2.0 headers compiled with g++, reproducible with
test_cute_oracle.py, and the source cited) and, when pycute is importable, that pycute
indeed answers differently.  docs/layout.md lists the same cases.  The second half
cross-checks random inputs where the two agree.
"""

from __future__ import annotations

import random

import pytest

from nvatom.errors import LayoutError
from nvatom.layout import (
    Layout,
    coalesce,
    complement,
    composition,
    filter,
    flatten_to_tuple,
    layouts_equivalent,
    left_inverse,
    logical_divide,
    logical_product,
    make_layout,
    parse_layout,
    right_inverse,
    size,
)

pycute = pytest.importorskip("pycute", reason="pycute not installed (pip install --no-deps "
                             "nvidia-cutlass==4.2.0.0)")

P = parse_layout


def py(lay: Layout) -> object:
    return pycute.Layout(lay.shape, lay.stride)


def py_text(x: object) -> str:
    return f"{x.shape}:{x.stride}".replace(" ", "").replace(",)", ")")  # type: ignore[attr-defined]


def py_result(fn: object) -> str:
    try:
        return py_text(fn())  # type: ignore[operator]
    except Exception as e:  # pycute asserts on inputs it cannot handle
        return f"error: {type(e).__name__}"


def test_composition_extends_trailing_size1_mode() -> None:
    # layout.hpp: composition coalesces A with coalesce_x, which keeps the stride of a
    # trailing size-1 mode for the extension past size(A).  pycute coalesces it away.
    assert composition(P("1:1"), P("4:1")) == P("4:1")
    assert py_result(lambda: pycute.composition(py(P("1:1")), py(P("4:1")))) == "4:0"
    # [ut:composition] "Capping a Layout with 1:0 forces divisibility and extends in stride-0"
    r = composition(P("(4,3,1):(3,1,0)"), P("24:1"))
    assert r == P("(4,3,2):(3,1,0)")
    assert py_result(lambda: pycute.composition(py(P("(4,3,1):(3,1,0)")), py(P("24:1")))) == \
        "(4,6):(3,1)"


def test_composition_non_divisible_shape() -> None:
    # C++: static_assert "Shape Divisibility Condition"; pycute returns size 6 for size(B) 8.
    with pytest.raises(LayoutError):
        composition(P("(6,2):(1,8)"), P("8:1"))
    assert py_result(lambda: pycute.composition(py(P("(6,2):(1,8)")), py(P("8:1")))) == "6:1"


def test_composition_pads_a_mode() -> None:
    # C++ 4.2 accepts a stride smaller than a mode that it does not divide (padding the
    # mode); pycute asserts the strong divisibility condition.
    assert composition(P("(6,4):(1,10)"), P("4:4")) == P("(2,2):(4,10)")
    assert py_result(lambda: pycute.composition(py(P("(6,4):(1,10)")), py(P("4:4")))).startswith(
        "error")


def test_composition_tiler_drops_extra_modes() -> None:
    # layout.hpp: "Drop any modes of lhs that aren't hit by rhs"; pycute keeps them.
    assert composition(P("(4,8,2):(1,4,32)"), (2, 4)) == P("(2,4):(1,4)")
    r = pycute.composition(py(P("(4,8,2):(1,4,32)")), (pycute.Layout(2), pycute.Layout(4)))
    assert py_text(r) == "(2,4,2):(1,4,32)"


def test_complement_non_injective() -> None:
    # C++: static_assert "Non-injective Layout detected in complement."; pycute returns a
    # layout with a size-0 mode.
    with pytest.raises(LayoutError):
        complement(P("(2,2):(1,1)"), 8)
    assert py_result(lambda: pycute.complement(py(P("(2,2):(1,1)")), 8)) == "(0,4):(2,2)"


def test_complement_shape_cotarget() -> None:
    # C++ accepts a shape as cotarget and divides it mode by mode: ceil_div((3,5), 2) =
    # (2,5), so 10:2; pycute only takes an int, and 15 gives 8:2.
    assert complement(P("2:1"), (3, 5)) == P("10:2")
    assert complement(P("2:1"), 15) == P("8:2")
    assert py_result(lambda: pycute.complement(py(P("2:1")), 15)) == "8:2"


def test_logical_divide_completes_against_the_shape() -> None:
    # layout.hpp (4.2): complement(tiler, shape(coalesce(layout))); each column of the 3x5
    # layout holds ceil(3/2) = 2 tiles.  pycute completes against size 15 and then fails.
    assert logical_divide(P("(3,5):(1,4)"), P("2:1")) == P("(2,(2,5)):(1,(2,4))")
    assert py_result(lambda: pycute.logical_divide(py(P("(3,5):(1,4)")), py(P("2:1")))) \
        .startswith("error")


def test_logical_product_with_an_int_tiler() -> None:
    # layout.hpp: logical_product(block, int n) = logical_product(block, make_layout(n));
    # pycute's int branch calls logical_divide.
    assert logical_product(P("4:1"), 3) == P("(4,3):(1,4)")
    assert py_result(lambda: pycute.logical_product(py(P("4:1")), 3)) == "(3,2):(1,3)"


def test_right_inverse_skips_stride0_modes() -> None:
    # layout.hpp (4.2) walks the modes sorted by stride and skips those off the chain;
    # pycute stops at the first stride that does not continue it (here the 0).
    assert right_inverse(P("(4,2):(1,0)")) == P("4:1")
    assert py_result(lambda: pycute.right_inverse(py(P("(4,2):(1,0)")))) == "1:0"


def test_left_inverse_construction() -> None:
    # layout.hpp (4.2) builds the left inverse from the sorted strides (size-0 stride for the
    # gaps); pycute uses right_inverse(make_layout(L, complement(L))).  Both invert 4:4.
    assert left_inverse(P("4:4")) == P("(4,4):(0,1)")
    assert py_result(lambda: pycute.left_inverse(py(P("4:4")))) == "(4,4):(4,1)"


def test_left_inverse_non_injective() -> None:
    # C++ 4.2 returns a quasi-inverse (2:2) for a non-injective layout, pycute 2:1; we raise.
    with pytest.raises(LayoutError):
        left_inverse(P("(2,2):(1,1)"))
    assert py_result(lambda: pycute.left_inverse(py(P("(2,2):(1,1)")))) == "2:1"


def test_default_strides_of_size1_modes() -> None:
    # stride.hpp compact_major: a static size-1 mode gets stride 0; pycute's prefix_product
    # gives it the running product.
    assert make_layout((4, 1)) == P("(4,1):(1,0)")
    assert py_text(pycute.Layout((4, 1))) == "(4,1):(1,4)"


def test_printing_differs() -> None:
    assert str(P("(8):(1)")) == "(8):(1)"
    assert str(pycute.Layout((8,), (1,))) == "(8,):(1,)"
    assert str(pycute.Swizzle(3, 4, 3)) == "SW_3_4_3"


# ----------------------------------------------------------------------------- cross-check


def _rand_layout(rng: random.Random, max_size: int = 256) -> Layout:
    def shape(d: int, budget: int) -> object:
        if d == 0 or rng.random() < 0.4:
            return rng.choice([s for s in (1, 2, 3, 4, 6, 8) if s <= budget] or [1])
        out = []
        for _i in range(rng.randint(1, 3)):
            v = shape(d - 1, budget)
            out.append(v)
            budget = max(1, budget // size(v))  # type: ignore[arg-type]
        return tuple(out)

    s = shape(2, max_size)
    leaves = flatten_to_tuple(s)  # type: ignore[arg-type]
    if rng.random() < 0.5:
        order = list(range(len(leaves)))
        rng.shuffle(order)
        strides = [0] * len(leaves)
        cur = 1
        for i in order:
            strides[i] = cur if leaves[i] != 1 else 0
            cur *= leaves[i]
    else:
        strides = [rng.choice((0, 1, 2, 3, 4, 8, 16)) for _ in leaves]
    it = iter(strides)

    def build(t: object) -> object:
        return tuple(build(v) for v in t) if isinstance(t, tuple) else next(it)

    return Layout(s, build(s))


CASES = 300


def test_crosscheck_coalesce_filter() -> None:
    rng = random.Random(1)
    for _i in range(CASES):
        lay = _rand_layout(rng)
        assert str(coalesce(lay)) == py_text(pycute.coalesce(py(lay)))
        assert str(filter(lay)) == py_text(pycute.filter(py(lay)))


def test_crosscheck_complement() -> None:
    rng = random.Random(2)
    agreed = 0
    for _i in range(CASES):
        lay = _rand_layout(rng, 64)
        m = rng.choice([1, 16, 64, 100, 256])
        try:
            ours = complement(lay, m)
        except LayoutError:
            continue
        assert str(ours) == py_text(pycute.complement(py(lay), m))
        agreed += 1
    assert agreed > CASES // 2


def test_crosscheck_exact_composition() -> None:
    rng = random.Random(3)
    agreed = 0
    for _i in range(CASES):
        a, b = _rand_layout(rng), _rand_layout(rng, 64)
        if flatten_to_tuple(a.shape)[-1] == 1:
            continue  # pycute drops A's trailing size-1 mode (see above)
        try:
            ours = composition(a, b, exact=True)
            theirs = pycute.composition(py(a), py(b))
        except (LayoutError, AssertionError):
            continue
        assert layouts_equivalent(ours, Layout(theirs.shape, theirs.stride))
        agreed += 1
    assert agreed > CASES // 3


def test_crosscheck_right_inverse() -> None:
    rng = random.Random(4)
    for _i in range(CASES):
        lay = _rand_layout(rng)
        ours = right_inverse(lay)
        theirs = pycute.right_inverse(py(lay))
        # Both are right inverses; C++ finds at least as long a chain as pycute.
        assert size(ours) >= pycute.size(theirs)
        if size(ours) == pycute.size(theirs):
            assert layouts_equivalent(ours, Layout(theirs.shape, theirs.stride))
