"""The torch custom operators (:mod:`nvatom.torch_ops`) and the stream / DLPack helpers of
:mod:`nvatom.runtime.torch_interop`, on the CPU.

Without torch (the CPU venv): the output rule the fake reports (``gemm_output_spec``, the
shape of a matrix product and the dtype rule of docs/runtime.md), the operator table (every
mutated argument is marked ``(a!)`` in its schema, and only those), registration refusing
clearly, stream handles and DLPack pass-through.  With torch installed (any build, CPU is
enough) the operators are registered for real and checked with ``torch.library.opcheck``
(schema, fake tensors, AOT dispatch with dynamic shapes) and compiled with
``torch.compile(fullgraph=True)``, the kernel launch replaced by a CPU product so the
operator plumbing runs without a GPU; tests/gpu/test_torch_ops_gpu.py runs the real kernels.
"""

from __future__ import annotations

import importlib.util
import re

import pytest

from nvatom.errors import NvatomError
from nvatom.gemm import GemmError
from nvatom.runtime.torch_interop import TensorArgumentError, from_dlpack, stream_handle

HAS_TORCH = importlib.util.find_spec("torch") is not None

import nvatom.torch_ops as T  # noqa: E402  (imports torch and registers only where it is)

# ---------------------------------------------------------------- output rule (no torch)


@pytest.mark.parametrize(("m", "k", "n"), [(64, 32, 48), (1, 1, 2), (0, 16, 8), (7, 0, 6)])
@pytest.mark.parametrize("dt", ["bfloat16", "float16"])
def test_output_is_m_by_n_of_a_dtype(m: int, k: int, n: int, dt: str) -> None:
    assert T.gemm_output_spec((m, k), dt, (k, n), dt) == ((m, n), dt)
    # torch dtypes print as "torch.<name>"
    assert T.gemm_output_spec((m, k), f"torch.{dt}", (k, n), f"torch.{dt}") == ((m, n), dt)


@pytest.mark.parametrize("out", ["bfloat16", "float16", "float32"])
def test_out_dtype_is_honoured(out: str) -> None:
    assert T.gemm_output_spec((4, 8), "float16", (8, 2), "float16", out) == ((4, 2), out)


def test_fp8_writes_bf16_and_needs_scales() -> None:
    e = "float8_e4m3fn"
    assert T.gemm_output_spec((4, 16), e, (16, 8), e, scaled=True) == ((4, 8), "bfloat16")
    assert T.gemm_output_spec((4, 16), e, (16, 8), e, "bfloat16", scaled=True)[1] == "bfloat16"
    with pytest.raises(GemmError, match="FP8 operands need scale_a and scale_b"):
        T.gemm_output_spec((4, 16), e, (16, 8), e)
    with pytest.raises(GemmError, match=r"out_dtype=float32: float8_e4m3fn x float8_e4m3fn "
                                        r"GEMMs write bfloat16"):
        T.gemm_output_spec((4, 16), e, (16, 8), e, "float32", scaled=True)


@pytest.mark.parametrize(("a", "adt", "b", "bdt", "out", "scaled", "msg"), [
    ((4, 8), "bfloat16", (9, 2), "bfloat16", None, False, r"a is 4x8, b is 9x2 \(8 != 9\)"),
    ((4, 8, 1), "bfloat16", (8, 2), "bfloat16", None, False, r"2-D matrices.*\(4, 8, 1\)"),
    ((4, 8), "bfloat16", (8, 2), "float16", None, False, "a is bfloat16 and b is float16"),
    ((4, 8), "float32", (8, 2), "float32", None, False, "a is float32 and b is float32"),
    ((4, 8), "float16", (8, 2), "float16", "float64", False, "out_dtype=float64"),
    ((4, 8), "float16", (8, 2), "float16", None, True, "scales apply to FP8 operands only"),
])
def test_output_rule_refuses_what_no_kernel_takes(a, adt, b, bdt, out, scaled, msg) -> None:
    with pytest.raises(GemmError, match=msg) as e:
        T.gemm_output_spec(a, adt, b, bdt, out, scaled=scaled)
    assert isinstance(e.value, NvatomError)


def test_output_rule_never_converts_symbolic_sizes() -> None:
    """Dynamic shapes: sizes are compared and passed through, not turned into ints."""

    class Sym:  # stands in for torch.SymInt: equality only, no __index__ / __int__
        def __init__(self, name: str) -> None:
            self.name = name

        def __eq__(self, other: object) -> bool:
            return isinstance(other, Sym) and other.name == self.name

        def __hash__(self) -> int:
            return hash(self.name)

    m, k, n = Sym("m"), Sym("k"), Sym("n")
    shape, _ = T.gemm_output_spec((m, k), "bfloat16", (k, n), "bfloat16")
    assert shape[0] is m and shape[1] is n


# ---------------------------------------------------------------- operator table (no torch)


def _schema_args(schema: str) -> list[tuple[str, str]]:
    """(type, name) of each argument of a schema ``(T a, T b, *, ...) -> R``."""
    inner = schema[schema.index("(") + 1:schema.index(") ->")]
    out = []
    for part in inner.split(","):
        part = part.strip()
        if part == "*":
            continue
        ty, name = part.split("=")[0].split()
        out.append((ty, name))
    return out


def test_every_op_declares_exactly_the_arguments_it_mutates() -> None:
    names = [s.name for s in T.OPS]
    assert len(names) == len(set(names)), names
    for spec in T.OPS:
        marked = tuple(n for ty, n in _schema_args(spec.schema) if re.search(r"\(\w+!\)", ty))
        assert marked == spec.mutates, (spec.name, marked, spec.mutates)
        assert spec.qualname == f"nvatom::{spec.name}"
        # a mutating op returns nothing (the result is the mutated tensor)
        assert spec.schema.endswith("-> ()") == bool(spec.mutates), spec.schema


def test_tensor_arguments_are_positional() -> None:
    """torch.library.custom_op refuses keyword-only Tensor arguments."""
    for spec in T.OPS:
        inner = spec.schema[spec.schema.index("(") + 1:spec.schema.index(") ->")]
        if "*" in inner:
            assert "Tensor" not in inner.split("*", 1)[1], spec.schema


@pytest.mark.skipif(HAS_TORCH, reason="torch is installed: registration runs (tests below)")
def test_register_without_torch_says_what_is_missing() -> None:
    assert T.registered() == ()
    with pytest.raises(T.TorchOpsError, match=r"need torch \(pip install 'nvatom\[gpu\]'\)"):
        T.register()
    with pytest.raises(T.TorchOpsError, match="need torch"):
        T.gemm(1, 2)


# ---------------------------------------------------------------- streams and DLPack


class _Proto:
    def __cuda_stream__(self) -> tuple[int, int]:
        return (0, 0x1234)


class _CupyLike:
    ptr = 0x5678


def test_stream_handle_takes_handles_and_stream_objects() -> None:
    assert stream_handle(0) == 0
    assert stream_handle(0xABC) == 0xABC
    assert stream_handle(_Proto()) == 0x1234
    assert stream_handle(_CupyLike()) == 0x5678
    for bad in (True, -1, "s", 1.5):
        with pytest.raises(TensorArgumentError, match="stream"):
            stream_handle(bad)


@pytest.mark.skipif(HAS_TORCH, reason="with torch the default is torch's current stream")
def test_default_stream_without_torch_is_the_legacy_stream() -> None:
    assert stream_handle(None) == 0


def test_launch_refuses_a_non_stream_with_its_own_error() -> None:
    from nvatom.runtime.launch import LaunchError, _stream

    with pytest.raises(LaunchError, match="stream is a str"):
        _stream("s", 0)
    assert _stream(7, 0) == 7


def test_from_dlpack_passes_tensors_and_non_arrays_through() -> None:
    class TensorLike:  # has data_ptr: a torch tensor (which also has __dlpack__)
        def data_ptr(self) -> int:
            return 0

        def __dlpack__(self) -> None:
            raise AssertionError("a tensor is not converted")

    t = TensorLike()
    assert from_dlpack(t) is t
    assert from_dlpack(None) is None
    assert from_dlpack([1, 2]) == [1, 2]


@pytest.mark.skipif(HAS_TORCH, reason="with torch a DLPack array is converted")
def test_from_dlpack_without_torch_leaves_arrays_for_the_checks() -> None:
    np = pytest.importorskip("numpy")
    x = np.zeros((2, 2), np.float16)
    assert from_dlpack(x) is x
    import nvatom

    with pytest.raises(TensorArgumentError, match=r"a is a numpy.ndarray, not a torch tensor"):
        nvatom.gemm(x, x)


# ---------------------------------------------------------------- with torch (any build)

needs_torch = pytest.mark.skipif(not HAS_TORCH, reason="torch is not installed")


@pytest.fixture
def cpu_kernel(monkeypatch: pytest.MonkeyPatch):
    """Replace the kernel launch by a float32 CPU product, so the operator plumbing (schema,
    fake, compile) runs without a GPU."""
    import torch

    def run(a, b, out, scale_a=None, scale_b=None):
        r = a.float() @ b.float()
        if scale_a is not None:
            r = r * scale_a * scale_b
        out.copy_(r.to(out.dtype))
        return out

    monkeypatch.setattr(T, "_run_gemm", run)
    return torch


@needs_torch
def test_ops_are_registered_on_import() -> None:
    import torch

    assert set(T.registered()) == {s.name for s in T.OPS}
    for spec in T.OPS:
        assert hasattr(torch.ops.nvatom, spec.name)
    T.register()  # idempotent


@needs_torch
def test_fake_reports_the_output_without_running(cpu_kernel) -> None:
    torch = cpu_kernel
    a = torch.empty(64, 32, device="meta", dtype=torch.bfloat16)
    b = torch.empty(32, 48, device="meta", dtype=torch.bfloat16)
    r = torch.ops.nvatom.gemm(a, b, out_dtype=torch.float32)
    assert (tuple(r.shape), r.dtype, r.device.type) == ((64, 48), torch.float32, "meta")
    with pytest.raises(GemmError, match=r"\(32 != 48\)"):
        torch.ops.nvatom.gemm(a, b.t())


@needs_torch
@pytest.mark.parametrize("case", ["gemm", "gemm-f32", "gemm_out"])
def test_opcheck(cpu_kernel, case: str) -> None:
    torch = cpu_kernel
    g = torch.Generator().manual_seed(0)
    a = torch.randn(64, 32, generator=g).bfloat16()
    b = torch.randn(32, 48, generator=g).bfloat16()
    if case == "gemm_out":
        op, args, kw = torch.ops.nvatom.gemm_out.default, (a, b, torch.empty(64, 48)), {}
    else:
        op, args = torch.ops.nvatom.gemm.default, (a, b)
        kw = {"out_dtype": torch.float32} if case == "gemm-f32" else {}
    res = torch.library.opcheck(op, args, kw)
    assert set(res.values()) == {"SUCCESS"}, res


@needs_torch
def test_compiled_fullgraph_equals_eager(cpu_kernel) -> None:
    torch = cpu_kernel
    g = torch.Generator().manual_seed(1)
    a, b, c = (torch.randn(s, generator=g).bfloat16() for s in ((32, 16), (16, 24), (24, 8)))

    def f(a, b, c):
        return torch.ops.nvatom.gemm(torch.ops.nvatom.gemm(a, b), c)

    torch._dynamo.reset()
    got = torch.compile(f, fullgraph=True, backend="aot_eager")(a, b, c)
    assert torch.equal(got, f(a, b, c))


def test_attention_output_spec() -> None:
    """nvatom::attention's fake shapes: out (B, H, Sq, D), lse (B, H, Sq); mismatched k and v
    or a wrong rank refused (no torch needed)."""
    from nvatom.attention import AttentionError

    assert T.attention_output_spec((2, 8, 77, 128), (2, 2, 300, 128), (2, 2, 300, 128)) == (
        (2, 8, 77, 128), (2, 8, 77))
    for q, k, v in (((2, 8, 77), (2, 2, 300, 128), (2, 2, 300, 128)),
                    ((2, 8, 77, 128), (2, 2, 300, 128), (2, 2, 301, 128))):
        with pytest.raises(AttentionError, match="q is \\(B, H, Sq, D\\)"):
            T.attention_output_spec(q, k, v)


def test_attention_op_rows() -> None:
    """The attention operator is differentiable (its backward row is registered with it) and
    its backward operator takes the forward's saved outputs."""
    rows = {s.name: s for s in T.OPS}
    assert rows["attention"].autograd is not None
    assert rows["attention_backward"].autograd is None
    assert "Tensor? dlse" in rows["attention_backward"].schema
    assert rows["attention"].schema.endswith("-> (Tensor, Tensor)")
