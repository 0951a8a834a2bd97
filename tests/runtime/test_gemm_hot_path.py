"""The nvatom.gemm hot path without a GPU: packed arguments and tensor maps are made once per
distinct key and evicted least-recently-used; a cached argument block holds the same bytes as
a fresh one; the cached path is much cheaper than encoding per call."""

from __future__ import annotations

import struct

import pytest

from nvatom import gemm_providers as gp
from nvatom.gemm import GemmProblem, check_operands, plan
from nvatom.kernels.sm90.launch import default_config, gemm_sm90_launch_spec
from nvatom.runtime.launch import LaunchError, LruCache, PackedParams, TensorMapCache, pack_args

from .test_launch import mat


@pytest.fixture
def counted_encoder():
    """Tensor maps encoded by nvatom's pure-Python encoder (the driver's stand-in), counted."""
    calls: list[object] = []
    old = gp.TENSOR_MAPS.encoder

    def enc(tm):
        calls.append(tm)
        return tm.encode()

    gp.TENSOR_MAPS.encoder = enc
    gp.TENSOR_MAPS.clear()
    yield calls
    gp.TENSOR_MAPS.encoder = old
    gp.TENSOR_MAPS.clear()


def _sm90_launch(m: int, n: int, k: int):
    lp, target = plan(GemmProblem(m, n, k, "bf16", "bf16", "K", "N"), (9, 0),
                      providers=[gp.Sm90Provider()])
    assert target == "sm_90a"
    return lp


def test_lru_cache_evicts_least_recently_used() -> None:
    c = LruCache(2)
    made: list[str] = []
    for key in ("a", "b", "a", "c", "b"):
        c.get_or_make(key, lambda key=key: made.append(key) or key.upper())
    # a, b made; a hit (now most recent); c evicts b; b made again (evicts a)
    assert made == ["a", "b", "c", "b"] and len(c) == 2 and "a" not in c
    assert (c.hits, c.misses) == (1, 4)
    with pytest.raises(LaunchError, match="maxsize must be a positive int, got 0"):
        LruCache(0)


def test_packed_params_hold_the_packed_bytes() -> None:
    params = (("p", "u64"), ("tm", "b8[128]@64"), ("n", "u32"))
    blob = bytes(range(128))
    pp = PackedParams.of(params, [0x1234, blob, 7])
    assert [pp.data(i) for i in range(3)] == [p.data for p in pack_args(params,
                                                                        [0x1234, blob, 7])]
    assert pp.nbytes == 8 + 128 + 4 and pp.address != 0


def test_args_and_tensor_maps_made_once_per_key(counted_encoder) -> None:
    a, b, d = mat(256, 512, ptr=1 << 30), mat(512, 384, ptr=2 << 30), mat(256, 384, ptr=3 << 30)
    ai, bi, oi, p = check_operands(a, b, d)
    lp = _sm90_launch(p.m, p.n, p.k)
    first = lp.packed(ai, bi, oi, p)
    assert len(counted_encoder) == 3  # A, B, D
    assert lp.packed(ai, bi, oi, p) is first and len(counted_encoder) == 3
    # the cached block holds what a fresh encode + pack gives
    fresh = [x.data for x in pack_args(lp.source.params, lp.args(ai, bi, oi, p))]
    assert [first.data(i) for i in range(6)] == fresh
    assert struct.unpack("<3I", b"".join(fresh[3:])) == (256, 384, 512)
    # a new D pointer: one new map (D), A's and B's come from the tensor-map cache
    d2 = mat(256, 384, ptr=4 << 30)
    ai, bi, oi2, p = check_operands(a, b, d2)
    second = lp.packed(ai, bi, oi2, p)
    assert second is not first and len(counted_encoder) == 4
    assert counted_encoder[-1].global_address == 4 << 30
    assert first.data(2) != second.data(2) and first.data(0) == second.data(0)


def test_tensor_map_cache_key_is_the_whole_map(counted_encoder) -> None:
    s = gemm_sm90_launch_spec(default_config(), 128, 256, 64, 1 << 30, 2 << 30, 3 << 30)
    t = gemm_sm90_launch_spec(default_config(), 128, 256, 64, 1 << 30, 2 << 30, 3 << 30,
                                lda=128)  # same pointer and shape, other stride
    u = gemm_sm90_launch_spec(default_config("f16"), 128, 256, 64, 1 << 30, 2 << 30,
                                3 << 30)  # other type
    for tm in (*s.tensor_maps, *t.tensor_maps, *u.tensor_maps):
        gp.TENSOR_MAPS.get(tm)
    # s: 3; t: only A differs; u: all three differ (data type)
    assert len(counted_encoder) == 3 + 1 + 3
    cache = TensorMapCache(2, encoder=lambda tm: b"x" * 128)
    for tm in s.tensor_maps:
        cache.get(tm)
    assert len(cache) == 2 and cache.misses == 3


def test_provider_error_names_the_provider() -> None:
    from nvatom.gemm import GemmError, _plan_with

    with pytest.raises(GemmError, match="no GEMM provider named 'sm70'"):
        _plan_with(GemmProblem(64, 64, 64, "bf16", "bf16", "K", "N"), (9, 0), "sm70")
