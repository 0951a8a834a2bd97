"""nvatom.runtime.launch, nvatom.runtime.torch_interop and nvatom.gemm without a GPU:
argument packing, tensor checks (duck-typed tensors), dispatch and the kernel cache."""

from __future__ import annotations

import dataclasses
import importlib
import struct

import pytest

from nvatom.gemm import (
    GemmError,
    GemmProblem,
    Sm80Provider,
    check_operands,
    plan,
    register_provider,
)
from nvatom.runtime import launch
from nvatom.runtime.launch import (
    ByValue,
    KernelSource,
    LaunchError,
    build_cubin,
    pack_args,
    param_decl,
)
from nvatom.runtime.ptxas import assemble
from nvatom.runtime.torch_interop import TensorArgumentError, check_matrix, dtype_name

# --------------------------------------------------------------------------- fake tensors


@dataclasses.dataclass
class FakeDevice:
    type: str = "cuda"
    index: int | None = 0

    def __str__(self) -> str:
        return self.type if self.index is None else f"{self.type}:{self.index}"


@dataclasses.dataclass
class FakeTensor:
    """The duck-typed surface torch_interop reads."""

    shape: tuple[int, ...]
    strides: tuple[int, ...]
    dtype: str = "torch.bfloat16"
    ptr: int = 0x7F0000000000
    device: FakeDevice = dataclasses.field(default_factory=FakeDevice)

    def stride(self) -> tuple[int, ...]:
        return self.strides

    def data_ptr(self) -> int:
        return self.ptr

    @property
    def T(self) -> FakeTensor:
        return dataclasses.replace(self, shape=self.shape[::-1], strides=self.strides[::-1])


def mat(rows: int, cols: int, **kw) -> FakeTensor:
    return FakeTensor((rows, cols), (cols, 1), **kw)


# --------------------------------------------------------------------------- packing


def test_pack_scalars_and_blob() -> None:
    params = (("p", "u64"), ("n", "u32"), ("s", "s32"), ("x", "f32"), ("t", "b8[128]@64"))
    blob = bytes(range(128))
    packed = pack_args(params, [0xDEADBEEF00, 7, -3, 1.5, ByValue(blob)])
    assert [p.data for p in packed] == [
        struct.pack("<Q", 0xDEADBEEF00), struct.pack("<I", 7), struct.pack("<i", -3),
        struct.pack("<f", 1.5), blob]


@pytest.mark.parametrize(("params", "values", "match"), [
    ((("n", "u32"),), [2**32], r"'n' = 4294967296 does not fit .u32"),
    ((("n", "u32"),), [-1], r"'n' = -1 does not fit .u32"),
    ((("n", "s32"),), [2**31], r"does not fit .s32"),
    ((("n", "u32"),), [1.0], r"'n' \(.u32\) takes an int, got 1.0"),
    ((("n", "u32"),), [True], r"takes an int, got True"),
    ((("x", "f32"),), ["1"], r"'x' \(.f32\) takes a number"),
    ((("t", "b8[128]@64"),), [ByValue(bytes(64))], r"'t' \(b8\[128\]@64\) takes 128 bytes, got 64"),
    ((("t", "b8[128]@64"),), [5], r"takes 128 bytes \(ByValue\), got int"),
    ((("n", "u32"), ("m", "u32")), [1], r"takes 2 arguments \(n, m\), got 1"),
    ((("q", "u128"),), [1], r"unknown PTX parameter type 'u128'"),
])
def test_pack_errors(params, values, match: str) -> None:
    with pytest.raises(LaunchError, match=match):
        pack_args(params, values)


def test_byvalue_rejects_non_bytes() -> None:
    with pytest.raises(LaunchError, match="ByValue takes bytes, got str"):
        ByValue("abc")  # type: ignore[arg-type]


def test_param_decl_assembles() -> None:
    """The declarations we print are PTX that ptxas accepts, the blob one 64-byte aligned."""
    decls = [param_decl("a", "u64"), param_decl("n", "u32"), param_decl("tmap", "b8[128]@64")]
    assert decls[2] == ".param .align 64 .b8 tmap[128]"
    ptx = (".version 8.0\n.target sm_90\n.address_size 64\n.visible .entry k(\n    "
           + ",\n    ".join(decls) + "\n)\n{\n  .reg .b64 %rd<2>;\n"
           "  ld.param.u64 %rd0, [tmap+120];\n  ld.param.u64 %rd1, [a];\n"
           "  st.global.u64 [%rd1], %rd0;\n  ret;\n}\n")
    res = assemble(ptx, "sm_90")
    assert "k" in res.kernels
    with pytest.raises(LaunchError, match="unknown PTX parameter type 'f8'"):
        param_decl("x", "f8")


def test_launch_dims() -> None:
    assert launch._dims(4, "grid") == (4, 1, 1)
    assert launch._dims((2, 3), "grid") == (2, 3, 1)
    for bad in (0, (1, 2, 3, 4), (2, -1), (True,)):
        with pytest.raises(LaunchError, match="grid must be 1 to 3 positive ints"):
            launch._dims(bad, "grid")  # type: ignore[arg-type]
    # CUDA's launch limits (Programming Guide, technical specifications per compute capability)
    assert launch._dims((2**31 - 1, 65535, 65535), "grid") == (2**31 - 1, 65535, 65535)
    assert launch._dims((1024, 1, 1), "block") == (1024, 1, 1)
    for bad, what, match in (
            (2**31, "grid", r"gridDim.x = 2147483648 exceeds the CUDA limit 2147483647"),
            (9 * 10**29, "grid", r"gridDim.x = 90{29} exceeds the CUDA limit"),
            ((1, 65536), "grid", r"gridDim.y = 65536 exceeds the CUDA limit 65535"),
            ((1, 1, 65536), "grid", r"gridDim.z = 65536 exceeds"),
            (1025, "block", r"blockDim.x = 1025 exceeds the CUDA limit 1024"),
            ((1, 1, 65), "block", r"blockDim.z = 65 exceeds the CUDA limit 64"),
            ((64, 32), "block", r"block \(64, 32, 1\) has 2048 threads, more than the CUDA "
                                r"limit 1024")):
        with pytest.raises(LaunchError, match=match):
            launch._dims(bad, what)


# --------------------------------------------------------------------------- cache


def _ptx(target: str) -> str:
    return (f".version 8.0\n.target {target}\n.address_size 64\n"
            ".visible .entry noop(.param .u64 p)\n{\n  ret;\n}\n")


def test_disk_and_memory_cache(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("NVATOM_CACHE_DIR", str(tmp_path))
    launch.clear_memory_cache()
    calls = []

    def build(t: str) -> str:
        calls.append(t)
        return _ptx(t)

    src = KernelSource("test-noop-v1", "noop", (("p", "u64"),), build)
    cubin, cached = build_cubin(src, "sm_80")
    assert not cached and calls == ["sm_80"] and cubin[:4] == b"\x7fELF"
    assert build_cubin(src, "sm_80") == (cubin, True)  # memory
    launch.clear_memory_cache()
    assert build_cubin(src, "sm_80") == (cubin, True)  # disk: the PTX is not built again
    assert calls == ["sm_80"]
    files = list((tmp_path / "kernels").rglob("*.entry"))
    assert len(files) == 1 and files[0].read_bytes().endswith(cubin)
    build_cubin(src, "sm_90")  # the target is part of the key
    assert calls == ["sm_80", "sm_90"]


def test_cache_rejects_a_wrong_entry_name(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("NVATOM_CACHE_DIR", "")
    launch.clear_memory_cache()
    src = KernelSource("test-noop-misnamed", "not_there", (("p", "u64"),), _ptx)
    with pytest.raises(LaunchError, match="has no entry 'not_there' \\(entries: noop\\)"):
        build_cubin(src, "sm_80")


def test_get_kernel_unknown_backend() -> None:
    src = KernelSource("x", "noop", (), _ptx)
    with pytest.raises(LaunchError, match="backend 'opencl'"):
        launch.get_kernel(src, "sm_80", backend="opencl")


# --------------------------------------------------------------------------- tensor checks


def test_check_matrix_accepts() -> None:
    info = check_matrix(mat(64, 32), "a", dtypes=("bf16",))
    assert (info.shape, info.ld, info.major, info.dtype, info.device) == \
        ((64, 32), 32, "row", "bf16", 0)
    t = check_matrix(mat(32, 64).T, "b", dtypes=("bf16",), majors=("row", "col"))
    assert (t.shape, t.ld, t.major) == ((64, 32), 64, "col")
    assert dtype_name("torch.float8_e4m3fn") == "e4m3"


@pytest.mark.parametrize(("tensor", "kw", "match"), [
    (mat(8, 8, device=FakeDevice("cpu", None)), {},
     r"a is on device 'cpu', not a CUDA device; move it with a.cuda\(\)"),
    (mat(8, 8, dtype="torch.float32"), {}, r"a has dtype float32 \(f32\); this kernel takes bf16"),
    (mat(8, 8, dtype="torch.int8"), {}, r"torch dtype 'int8' has no nvatom element type"),
    (FakeTensor((8,), (1,)), {}, r"a must be a 2-D matrix, got shape \(8,\)"),
    (FakeTensor((8, 8), (16, 2)), {}, r"strides \(16, 2\) is not row-major"),
    (mat(8, 8).T, {}, r"is not row-major \(stride \(ld, 1\)\); pass a.contiguous\(\)"),
    (mat(8, 8, ptr=0x7F0000000002), {}, r"data pointer 0x7f0000000002 is not 16-byte aligned"),
    (mat(8, 12), {}, r"leading stride 12 elements \(24 bytes\) is not a multiple of 16 bytes; "
                     r"pad the rows to a multiple of 8 elements"),
    (mat(8, 8, device=FakeDevice("cuda", 1)), {"device": 0},
     r"a is on cuda:1, the other operands on cuda:0"),
])
def test_check_matrix_errors(tensor, kw, match: str) -> None:
    with pytest.raises(TensorArgumentError, match=match):
        check_matrix(tensor, "a", dtypes=("bf16",), **kw)


def test_empty_matrix_needs_no_stride_checks() -> None:
    """torch gives a (16, 0) tensor strides (1, 1): nothing is accessed, so nothing to check."""
    assert check_matrix(FakeTensor((16, 0), (1, 1)), "a", dtypes=("bf16",)).shape == (16, 0)


def test_single_row_needs_no_stride_alignment() -> None:
    assert check_matrix(mat(1, 12), "a", dtypes=("bf16",)).shape == (1, 12)


# --------------------------------------------------------------------------- gemm checks


def test_check_operands_problem() -> None:
    a, b = mat(100, 64), mat(64, 48)
    *_, p = check_operands(a, b)
    assert p == GemmProblem(100, 48, 64, "bf16", "bf16", "K", "N")
    *_, p = check_operands(mat(64, 104).T, mat(48, 64).T, mat(104, 48, dtype="torch.float32"))
    assert (p.a_major, p.b_major, p.out_dtype) == ("M", "K", "f32")


@pytest.mark.parametrize(("args", "err", "match"), [
    ((mat(8, 16), mat(8, 8)), GemmError, r"a is 8x16, b is 8x8 \(16 != 8\)"),
    ((mat(8, 8), mat(8, 8, dtype="torch.float16")), TensorArgumentError,
     "a is bf16 but b is f16"),
    ((mat(8, 8), mat(8, 8), mat(8, 16)), GemmError, r"out has shape \(8, 16\), the product is 8x8"),
    ((mat(8, 8), mat(8, 8), mat(8, 8).T), TensorArgumentError, "out with shape"),
    ((mat(8, 8), FakeTensor((8, 7), (8, 1))), GemmError, "N = 7 is odd"),
    ((mat(8, 8), FakeTensor((8, 6), (8, 1)), FakeTensor((8, 6), (5, 1))), TensorArgumentError,
     r"out's rows overlap \(row stride 5 < N = 6, strides \(5, 1\)\)"),
    ((mat(8, 8), mat(8, 8), FakeTensor((8, 8), (0, 1))), TensorArgumentError,
     r"out's rows overlap \(row stride 0 < N = 8"),
    (([[1.0]], [[1.0]]), TensorArgumentError,
     r"a is a list, not a torch tensor: nvatom's kernels take torch CUDA tensors"),
    ((mat(8, 8), mat(8, 8), (1, 2)), TensorArgumentError,
     r"out is a tuple, not a torch tensor"),
    ((mat(2**31, 8), mat(8, 8)), GemmError,
     r"M = 2147483648 is larger than 2147483647 \(2\^31 - 1\), the largest size the GEMM "
     r"kernels' 32-bit index arithmetic takes"),
    ((mat(8, 10**30), mat(10**30, 8)), GemmError, r"K = 10{30} is larger than 2147483647"),
    ((mat(8, 8), mat(8, 8), mat(8, 8, dtype="torch.float8_e4m3fn")), TensorArgumentError,
     "out has dtype float8_e4m3fn"),
])
def test_check_operands_errors(args, err, match: str) -> None:
    with pytest.raises(err, match=match):
        check_operands(*args)


def test_acc_type() -> None:
    with pytest.raises(GemmError, match="acc='f16': the accumulator type is one of f32"):
        check_operands(mat(8, 8), mat(8, 8), acc="f16")


# --------------------------------------------------------------------------- dispatch


def test_plan_sm80_everywhere_from_8_0() -> None:
    p = GemmProblem(256, 256, 64, "bf16", "f32", "K", "N")
    for cap in ((8, 0), (8, 9), (9, 0), (12, 0)):
        lp, target = plan(p, cap, providers=[Sm80Provider()])
        # cubins do not run across majors: the device's own plain target
        assert target == f"sm_{cap[0]}{cap[1]}" and lp.provider == "sm80"
        assert lp.shmem > 48 * 1024 and lp.grid == (4, 1, 1)
    with pytest.raises(GemmError, match="on compute capability 7.5"):
        plan(p, (7, 5), providers=[Sm80Provider()])


class _FakeSm90:
    name = "fake-sm90"

    def supports(self, problem: GemmProblem, capability: tuple[int, int]) -> bool:
        return capability == (9, 0) and problem.in_dtype == "bf16"

    def target(self, capability: tuple[int, int]) -> str:
        return "sm_90a"

    def plan(self, problem: GemmProblem, target: str):
        return ("planned", problem.m, target)


def test_plugin_provider_takes_precedence(monkeypatch) -> None:
    gemm_mod = importlib.import_module("nvatom.gemm")

    monkeypatch.setattr(gemm_mod, "PROVIDERS", [Sm80Provider()])
    register_provider(_FakeSm90())
    p = GemmProblem(64, 64, 64, "bf16", "bf16", "K", "N")
    assert plan(p, (9, 0), providers=gemm_mod.PROVIDERS) == (("planned", 64, "sm_90a"), "sm_90a")
    _, target = plan(p, (8, 6), providers=gemm_mod.PROVIDERS)
    assert target == "sm_86"
    with pytest.raises(GemmError, match="'fake-sm90' is already registered"):
        register_provider(_FakeSm90())


def test_params_of_builder_kernel() -> None:
    from nvatom.ptx.builder import Module

    k = Module("sm_90").kernel("k")
    k.param("out", "u64")
    k.byte_param("tmap", 128, 64)
    k.param("n", "u32")
    params = launch.params_of(k)
    assert params == (("out", "u64"), ("tmap", "b8[128]@64"), ("n", "u32"))
    assert [param_decl(n, t) for n, t in params] == [p.declaration() for p in k.params]


def test_providers_are_registered_directly() -> None:
    """nvatom.gemm lists its providers from nvatom.gemm_providers (imported, not plugged in
    through importlib): SM90 first, then SM80; the SM80 one takes a problem on 9.0 that the
    SM90 one refuses (K not a multiple of 8: TMA's 16-byte pitch)."""
    gemm_mod = importlib.import_module("nvatom.gemm")
    import nvatom.gemm_providers as gp

    assert not hasattr(gemm_mod, "PLUGIN_MODULES")
    assert [p.name for p in gemm_mod.PROVIDERS] == ["sm90", "sm80"]
    assert [type(p) for p in gemm_mod.PROVIDERS] == [gp.Sm90Provider, gp.Sm80Provider]
    p = GemmProblem(64, 64, 12, "bf16", "bf16", "K", "N")
    assert plan(p, (9, 0), providers=gemm_mod.PROVIDERS)[1] == "sm_90"

