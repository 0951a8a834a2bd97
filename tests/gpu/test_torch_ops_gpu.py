"""The torch custom operators ``torch.ops.nvatom.gemm`` / ``gemm_out`` on the GPU.

What each test proves, against eager calls of the same operator (the same kernel, so the
results must be bitwise equal):

* ``torch.compile(fullgraph=True)`` (Inductor) of a function calling the operator twice: no
  graph break (``fullgraph``), the fake's shapes and dtypes are right (the second call consumes
  the first's output), and the compiled result equals eager bit for bit; also for
  ``gemm_out`` (a mutated argument), FP8 with scale tensors, and ``mode="reduce-overhead"``
  (Inductor's CUDA graphs).
* CUDA graph capture (``torch.cuda.graph``, global capture mode): the launch goes to the
  capturing stream (the caller's current stream), needs no host synchronisation and no
  allocation outside the graph's pool; replays with new input values copied into the static
  inputs equal eager on those values.
* A non-default stream: the kernel is ordered after earlier work on that stream (a long
  ``torch.cuda._sleep`` then an input update on the stream; a launch on any other stream would
  read the old input).
* DLPack: CuPy arrays in, torch tensors out (skipped without CuPy).

Sanity against torch: the first product is within bf16 rounding of the float64 product, so
"equal to eager" is not two equal wrong answers.
"""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.gpu

torch = pytest.importorskip("torch")


def _require(cc: tuple[int, int] = (9, 0), exact: bool = False) -> None:
    if not torch.cuda.is_available():
        pytest.skip("no CUDA GPU")
    have = torch.cuda.get_device_capability()
    if (have != cc) if exact else (have < cc):
        pytest.skip(f"needs compute capability {'' if exact else '>= '}{cc[0]}.{cc[1]}, "
                    f"have {have[0]}.{have[1]}")


@pytest.fixture(scope="module")
def ops() -> None:
    """Skip without a GPU of compute capability >= 9.0; register the operators."""
    _require()
    import nvatom.torch_ops as T

    T.register()


def _rand(gen, *shape, dtype=torch.bfloat16):
    return torch.randn(*shape, device="cuda", generator=gen).to(dtype)


def _close_to_float64(got, a, b) -> None:
    ref = a.double() @ b.double()
    err = (got.double() - ref).abs().max().item()
    scale = ref.abs().max().item()
    assert err <= 2e-2 * scale, (err, scale)


def test_compile_fullgraph_two_calls_equals_eager(ops) -> None:
    gen = torch.Generator(device="cuda").manual_seed(0)
    a, b, c = _rand(gen, 256, 512), _rand(gen, 512, 384), _rand(gen, 384, 128)

    def f(a, b, c):
        return torch.ops.nvatom.gemm(torch.ops.nvatom.gemm(a, b), c)

    eager_ab = torch.ops.nvatom.gemm(a, b)
    _close_to_float64(eager_ab, a, b)
    eager = f(a, b, c)
    torch._dynamo.reset()
    compiled = torch.compile(f, fullgraph=True)
    got = compiled(a, b, c)
    torch.cuda.synchronize()
    assert got.shape == (256, 128) and got.dtype == torch.bfloat16
    assert torch.equal(got, eager)
    # again with new values (no recompilation needed; the same kernels)
    a2 = _rand(gen, 256, 512)
    assert torch.equal(compiled(a2, b, c), f(a2, b, c))


def test_compile_fullgraph_out_variant_and_out_dtype(ops) -> None:
    gen = torch.Generator(device="cuda").manual_seed(1)
    a, b = _rand(gen, 128, 256), _rand(gen, 256, 192)

    def h(a, b, out):
        torch.ops.nvatom.gemm_out(a, b, out)
        return out, torch.ops.nvatom.gemm(a, b, out_dtype=torch.float32)

    out_e = torch.empty(128, 192, device="cuda", dtype=torch.float16)
    e_out, e32 = h(a, b, out_e)
    torch._dynamo.reset()
    out_c = torch.full((128, 192), float("nan"), device="cuda", dtype=torch.float16)
    c_out, c32 = torch.compile(h, fullgraph=True)(a, b, out_c)
    torch.cuda.synchronize()
    assert e32.dtype == c32.dtype == torch.float32
    assert torch.equal(c32, e32)
    assert torch.equal(out_c, e_out)  # the caller's tensor was written
    assert torch.equal(c_out, e_out)
    _close_to_float64(e32, a, b)


def test_compile_fullgraph_fp8_with_scales(ops) -> None:
    _require((9, 0), exact=True)
    gen = torch.Generator(device="cuda").manual_seed(2)
    a = (torch.randn(128, 256, device="cuda", generator=gen) * 2).to(torch.float8_e4m3fn)
    b = (torch.randn(192, 256, device="cuda", generator=gen) * 2).to(torch.float8_e4m3fn).t()
    sa = torch.tensor([0.5], device="cuda")
    sb = torch.tensor([1.5], device="cuda")

    def f(a, b, sa, sb):
        return torch.ops.nvatom.gemm(a, b, sa, sb)

    eager = f(a, b, sa, sb)
    assert eager.dtype == torch.bfloat16
    torch._dynamo.reset()
    got = torch.compile(f, fullgraph=True)(a, b, sa, sb)
    torch.cuda.synchronize()
    assert torch.equal(got, eager)
    ref = (a.double() @ b.double()) * 0.75
    assert (eager.double() - ref).abs().max().item() <= 2e-2 * ref.abs().max().item()


def test_compile_reduce_overhead_cuda_graphs(ops) -> None:
    """Inductor's CUDA graphs (cudagraph trees): warm-up run, recording, replays."""
    gen = torch.Generator(device="cuda").manual_seed(3)
    a, b, c = _rand(gen, 256, 256), _rand(gen, 256, 256), _rand(gen, 256, 128)

    def f(a, b, c):
        return torch.ops.nvatom.gemm(torch.ops.nvatom.gemm(a, b), c)

    torch._dynamo.reset()
    compiled = torch.compile(f, fullgraph=True, mode="reduce-overhead")
    for i in range(4):
        ai = _rand(gen, 256, 256) if i else a
        got = compiled(ai, b, c).clone()
        assert torch.equal(got, f(ai, b, c)), i


def _warm(fn, n: int = 2) -> None:
    """Run ``fn`` on a side stream first (torch's recipe before capture): kernels built and
    loaded, launchers prepared, plans memoized."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(n):
            fn()
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()


def test_cuda_graph_capture_and_replay_equal_eager(ops) -> None:
    gen = torch.Generator(device="cuda").manual_seed(4)
    a, b, c = _rand(gen, 256, 512), _rand(gen, 512, 384), _rand(gen, 384, 256)
    out = torch.empty(256, 384, device="cuda", dtype=torch.float32)

    def step():
        d = torch.ops.nvatom.gemm(torch.ops.nvatom.gemm(a, b), c)  # outputs from the graph's pool
        torch.ops.nvatom.gemm_out(a, b, out)           # a fixed output (the call cache's path)
        return d

    _warm(step)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        d = step()
    for trial in range(3):
        na, nb, nc = _rand(gen, 256, 512), _rand(gen, 512, 384), _rand(gen, 384, 256)
        a.copy_(na)
        b.copy_(nb)
        c.copy_(nc)
        out.fill_(float("nan"))
        g.replay()
        torch.cuda.synchronize()
        assert torch.equal(d, torch.ops.nvatom.gemm(torch.ops.nvatom.gemm(na, nb), nc)), trial
        want = torch.empty_like(out)
        torch.ops.nvatom.gemm_out(na, nb, want)
        assert torch.equal(out, want), trial
        _close_to_float64(out, na, nb)


def test_runs_on_the_callers_non_default_stream(ops) -> None:
    gen = torch.Generator(device="cuda").manual_seed(5)
    b = _rand(gen, 512, 256)
    a_new = _rand(gen, 256, 512)
    a = torch.zeros(256, 512, device="cuda", dtype=torch.bfloat16)
    want = torch.ops.nvatom.gemm(a_new, b)  # warm: built, loaded, planned
    assert want.abs().max().item() > 0
    torch.cuda.synchronize()
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        torch.cuda._sleep(200_000_000)  # ~0.1 s of GPU time on s
        a.copy_(a_new)                  # queued on s after the sleep
        got = torch.ops.nvatom.gemm(a, b)            # must run on s, after the copy
        out = torch.full((256, 256), float("nan"), device="cuda", dtype=torch.bfloat16)
        torch.ops.nvatom.gemm_out(a, b, out)
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    assert torch.equal(got, want)
    assert torch.equal(out, want)


def test_dlpack_arrays_in_torch_tensors_out(ops) -> None:
    cp = pytest.importorskip("cupy")
    import nvatom
    import nvatom.torch_ops as T

    rs = cp.random.RandomState(6)
    a = rs.standard_normal((128, 256), dtype=cp.float32).astype(cp.float16)
    b = rs.standard_normal((256, 64), dtype=cp.float32).astype(cp.float16)
    want = torch.ops.nvatom.gemm(torch.from_dlpack(a), torch.from_dlpack(b))
    got = T.gemm(a, b)
    assert isinstance(got, torch.Tensor) and torch.equal(got, want)
    out = cp.full((128, 64), cp.nan, dtype=cp.float16)
    res = nvatom.gemm(a, b, out)  # nvatom.gemm itself takes DLPack arrays too
    assert isinstance(res, torch.Tensor)
    cp.cuda.get_current_stream().synchronize()
    torch.cuda.synchronize()
    assert torch.equal(torch.from_dlpack(out), want)  # written in the CuPy array's memory
    out2 = cp.full((128, 64), cp.nan, dtype=cp.float16)
    T.gemm_out(a, b, out2)
    torch.cuda.synchronize()
    assert torch.equal(torch.from_dlpack(out2), want)
