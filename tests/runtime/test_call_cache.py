"""The bounded host caches (nvatom.runtime.call_cache) and nvatom.gemm's set of them: every
section keeps at most its stated size, least recently used out first, and one call empties
them all.  CPU only: the values are plain objects."""

from __future__ import annotations

import ast
import importlib
import inspect
import sys
import types
from typing import Any, ClassVar

import pytest

from nvatom.runtime.call_cache import CacheSet, CacheSizeError, LruDict

gm = importlib.import_module("nvatom.gemm")


def test_lru_dict_keeps_its_limit_and_drops_the_least_recently_used() -> None:
    d: LruDict[int, str] = LruDict("t", 3)
    for i in range(3):
        d[i] = str(i)
    assert d.get(0) == "0"  # 0 is now the most recently used
    d[3] = "3"
    assert list(d) == [2, 0, 3] and 1 not in d and len(d) == 3
    d[2] = "two"  # a new value refreshes the entry too
    d[4] = "4"
    assert list(d) == [3, 2, 4]
    assert d.get(99) is None and d.get(99, "x") == "x"
    assert d == {3: "3", 2: "two", 4: "4"}  # compares as a dict
    assert repr(d) == "<LruDict t: 3/3>"


@pytest.mark.parametrize("limit", [0, -1, 1.5, True, "8"])
def test_lru_dict_refuses_a_size_that_is_not_a_positive_int(limit: Any) -> None:
    with pytest.raises(CacheSizeError, match="cache section 'x': the size must be a positive"):
        LruDict("x", limit)


def test_cache_set_states_sizes_once_and_clears_every_section() -> None:
    class Two(CacheSet):
        SIZES: ClassVar[dict[str, int]] = {"small": 2, "big": 5}
        small: LruDict[int, int]
        big: LruDict[int, int]

    a, b = Two(), Two()
    for i in range(10):
        a.small[i] = a.big[i] = i
    assert a.sizes() == {"small": (2, 2), "big": (5, 5)} and b.sizes()["big"] == (0, 5)
    assert list(a.small) == [8, 9] and list(a.big) == [5, 6, 7, 8, 9]
    a.clear()
    assert a.sizes() == {"small": (0, 2), "big": (0, 5)}
    assert repr(a) == "<Two: small 0/2, big 0/5>"

    class Unsized(CacheSet):
        SIZES: ClassVar[dict[str, int]] = {"small": 2}
        small: LruDict[int, int]
        stray: LruDict[int, int]

    with pytest.raises(CacheSizeError, match="Unsized: sections without a size: stray"):
        Unsized()


def test_gemm_caches_are_one_bounded_set() -> None:
    """Every section of nvatom.gemm's cache set is bounded and annotated, and the module keeps
    no other cache: no module-level dict, set or list but the providers' ids."""
    sizes = gm.GemmCaches.SIZES
    assert len(sizes) == 13 and all(isinstance(v, int) and v > 0 for v in sizes.values())
    assert set(sizes) == {n for n in gm.GemmCaches.__annotations__ if n != "SIZES"}
    tree = ast.parse(inspect.getsource(gm))
    mutable = []
    for node in tree.body:
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and isinstance(
                node.value, (ast.Dict, ast.Set, ast.List, ast.Call)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            value = node.value
            is_container = not isinstance(value, ast.Call) or (
                isinstance(value.func, ast.Name) and value.func.id in ("dict", "set", "list"))
            if is_container:
                mutable += [t.id for t in targets if isinstance(t, ast.Name)]
    assert sorted(mutable) == ["_BUILT_IN_IDS", "__all__"], mutable


def test_clear_caches_empties_every_section_and_the_tensor_maps(monkeypatch) -> None:
    caches = gm.GemmCaches()
    monkeypatch.setattr(gm, "CACHES", caches)
    for section in caches.sections():
        for i in range(section.limit + 3):
            section[("k", i)] = object()
        assert len(section) == section.limit  # bounded
    maps = types.SimpleNamespace(cleared=0)
    maps.clear = lambda: setattr(maps, "cleared", maps.cleared + 1)
    monkeypatch.setitem(sys.modules, "nvatom.gemm_providers",
                        types.SimpleNamespace(TENSOR_MAPS=maps))
    gm.clear_caches()
    assert all(used == 0 for used, _ in caches.sizes().values())
    assert maps.cleared == 1
    monkeypatch.delitem(sys.modules, "nvatom.gemm_providers")
    gm.clear_caches()  # without the providers imported: only the cache set
    assert maps.cleared == 1


def test_scale_tensors_are_made_once_per_value_and_bounded(monkeypatch) -> None:
    """Scales given as numbers: one device tensor per (value, device), reused while it is
    among the most recently used ``SIZES["scale_tensors"]``."""
    made: list[float] = []
    torch = types.SimpleNamespace(float32="float32",
                                  full=lambda shape, v, **kw: made.append(v) or ("t", v))
    monkeypatch.setitem(sys.modules, "torch", torch)
    monkeypatch.setattr(gm, "CACHES", gm.GemmCaches())
    limit = gm.GemmCaches.SIZES["scale_tensors"]
    assert gm._scale_tensor(0.5, 0) is gm._scale_tensor(0.5, 0)
    assert gm._scale_tensor(0.5, 1) == ("t", 0.5) and made == [0.5, 0.5]
    for i in range(limit):
        gm._scale_tensor(float(i + 1), 0)
    assert len(gm.CACHES.scale_tensors) == limit
    gm._scale_tensor(0.5, 0)  # dropped by then: made again
    assert made.count(0.5) == 3
    sentinel = object()
    assert gm._scale_tensor(sentinel, 0) is sentinel  # a tensor is used as given


def test_register_provider_drops_the_calls_it_may_reroute(monkeypatch) -> None:
    """A new provider may take a checked call elsewhere: the call caches and the recipes go,
    the plans (keyed by the providers' ids) and the launchers stay."""
    caches = gm.GemmCaches()
    monkeypatch.setattr(gm, "CACHES", caches)
    monkeypatch.setattr(gm, "PROVIDERS", [])
    for section in caches.sections():
        section[("k",)] = object()
    gm.register_provider(types.SimpleNamespace(name="fake"))
    emptied = {name for name, (used, _) in caches.sizes().items() if not used}
    assert emptied == {"calls", "fresh_calls", "recipes"}
