"""docs/tutorial.md runs: its ```python blocks, in order, in one namespace (CPU blocks; the
```python gpu blocks run in tests/gpu/test_tutorial_gpu.py).

The key outputs are checked against facts written here from the PTX ISA (the m16n8k16
fragment formulas: groupID g = lane >> 2, threadID_in_group t = lane % 4; C c0,c1 at
(g, 2t + i), c2,c3 at (g + 8, ...); A a0,a1 at (g, 2t + i), a2,a3 at (g + 8, 2t + i)) and
from ptxas, so a tutorial that drifts from the library fails here.
"""

from __future__ import annotations

import re

import pytest

from tests.gpu.tutorial_blocks import TUTORIAL, blocks, run

pytest.importorskip("xdsl", reason="the tutorial's IR section needs xdsl==0.74.0")


@pytest.fixture(scope="module")
def ran() -> tuple[dict, list[str]]:
    return run([b for b in blocks() if not b.gpu])


def _out(ran: tuple[dict, list[str]], needle: str) -> str:
    for out in ran[1]:
        if needle in out:
            return out
    raise AssertionError(f"no block printed {needle!r}; outputs:\n" + "\n---\n".join(ran[1]))


def test_every_fence_is_a_known_kind() -> None:
    text = TUTORIAL.read_text()
    fences = re.findall(r"^```(\S*(?: \S+)?)\s*$", text, re.M)
    openings = [f for f in fences if f]
    assert set(openings) <= {"python", "python gpu", "sh"}, openings
    bs = blocks()
    assert sum(not b.gpu for b in bs) >= 10 and sum(b.gpu for b in bs) >= 3


def test_atom_and_fragment_steps(ran) -> None:  # type: ignore[no-untyped-def]
    assert "sm80.mma.m16n8k16.f32.bf16.bf16.f32" in _out(ran, "sm80.mma.m16n8k8")
    assert "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32" in _out(ran, "'A': '4 x .b32'")
    table = _out(ran, "T0:V0").splitlines()
    # C: lane l holds (l/4, 2(l%4) + {0,1}) as values 0, 1 and row l/4 + 8 as values 2, 3.
    row0, row8 = table[1].split(), table[9].split()
    assert row0 == ["0"] + [f"T{t}:V{v}" for t in range(4) for v in (0, 1)]
    assert row8 == ["8"] + [f"T{t}:V{v}" for t in range(4) for v in (2, 3)]


def test_tiled_and_partition_steps(ran) -> None:  # type: ignore[no-untyped-def]
    ns = ran[0]
    assert ns["tiled"].threads == 128 and "128 threads" in _out(ran, "128 threads")
    # lane 5: g = 1, t = 1: a0, a1 at (1, 2), (1, 3); a2, a3 at (9, 2), (9, 3)
    assert "[(1, 2), (1, 3), (9, 2), (9, 3)]" in _out(ran, "+ 66")


def test_kernel_ptx_and_ptxas_steps(ran) -> None:  # type: ignore[no-untyped-def]
    # 2 x 4 repetitions of the atom over 64 x 64, four K steps of 16
    assert _out(ran, " x mma.sync").startswith(".version 7.0 | .target sm_80\n32 x ")
    # A: 4 registers x 2 M repetitions; B: 2 x 4 N repetitions; C: 4 x 8
    assert "8 A + 8 B registers; 32 accumulators" in _out(ran, "accumulators")
    report = _out(ran, "sm_90a ")
    assert re.search(r"^sm_80 \d+ registers, 0 B smem, 0 B stack, 0/0 B spill", report, re.M)
    assert re.search(r"^sm_90a \d+ registers, 0 B smem", report, re.M)


def test_ir_steps(ran) -> None:  # type: ignore[no-untyped-def]
    ns = ran[0]
    assert ns["info"].threads == 128
    # the same 2 x 4 x 4 atoms as the builder's kernel, and the same fragment loads
    assert "gemm_tile 128 threads, 32 mma.sync;" in _out(ran, "gemm_tile 128 threads")
    ir_ptx, ptx = ns["lowered"].ptx, ns["ptx"]
    for ins in ("ld.global.b32", "st.global.f32"):
        assert ir_ptx.count(ins) == ptx.count(ins), ins
    diag = _out(ran, "error:")
    assert re.search(r"tile\.mlir:\d+:3: error: 'cute_nvgpu\.atom\.copy_fragment' op expects "
                     r"Mma atom layout of \(\(\(4,8\),\(2,2,1\)\),", diag)
    assert "for operand B, but got ((4,8),(2,2)):((16,1),(8,64))" in diag


def test_typed_tensor_steps(ran) -> None:  # type: ignore[no-untyped-def]
    """Section 9: two 64 x 32 bf16 tiles (4096 B each) in shared memory, the tiled MMA's
    fragments (A: 4 regs x 2 M reps, B: 2 x 4 N reps, C: 4 x 8), both mistakes refused, and
    the tile's PTX computes relu(A @ B + bias) in the CPU interpreter of
    tests/kernels/ptx_interp.py (ldmatrix, cp.async and mma.sync from the PTX ISA)."""
    import numpy as np

    from tests.kernels.test_sm80_tile import _run

    assert "tiles: (32, 32) (64, 16)" in _out(ran, "tiles:")
    assert "8 A + 8 B registers, 32 accumulators" in _out(ran, "B registers, 32")
    assert re.search(r"^\d+ registers, 8192 B smem, 0 B stack, 0/0 B spill", _out(ran, "8192 B"),
                     re.M)
    errors = _out(ran, "swizzle must be")
    assert "from smem tensor 'sA_sw32' into fragment 'rA': reads through Sw<1,3,3>" in errors
    assert "fragment 'rA16'" in errors
    assert "expects operand a with element type bf16, but get f16." in errors
    assert re.search(r"^\d+ registers, 16384 B smem, 0 B stack, 0/0 B spill",
                     _out(ran, "16384 B"), re.M)
    ptx = ran[0]["ptx9"]
    rng = np.random.default_rng(9)
    a = rng.integers(-2, 3, (64, 32)).astype(np.float64)
    b = rng.integers(-1, 2, (32, 64)).astype(np.float64)
    bias = rng.integers(-8, 9, 64).astype(np.float64)
    d = _run(ptx, a, b, bias)
    np.testing.assert_array_equal(d, np.maximum(a @ b + bias, 0))


def test_user_epilogue_steps(ran) -> None:  # type: ignore[no-untyped-def]
    """Section 10: the hooks are recorded (the masked one reads its column tensor and
    compares col with row), the leaky one's slope is the kernel's last parameter, its tag
    ends the kernel's name, the kernel assembles for sm_90a without spills, and both
    mistakes are EpilogueErrors naming the hook and the instruction."""
    ns = ran[0]
    leaky, masked, cfg = ns["leaky"], ns["masked"], ns["cfg10"]
    assert f"{leaky.tag} (('u_slope', 'f32'),)" in _out(ran, "u_slope")
    text = _out(ran, "load scale")
    assert "setp.gt.u32 %t0, %col, %row;" in text and "mul.rn.f32 %x, %x, %t1;" in text
    assert masked.uses_row and masked.uses_col and not leaky.uses_col
    assert cfg.name.endswith("_ep_bcolbf16_" + leaky.tag)
    assert "'bias', 'u_slope']" in _out(ran, "'u_slope']")
    assert re.search(r"^\d+ registers, 0 B smem, 0 B stack, 0/0 B spill",
                     _out(ran, cfg.name), re.M)
    errors = _out(ran, "user epilogue 'sloppy'")
    assert ("user epilogue 'sloppy': writes .f32 into %t0, a .u32 register (in `add.f32 %t0, "
            "%x, 1.0`)") in errors
    assert "user epilogue 'branchy': branches and calls are refused" in errors


def test_gpu_blocks_compile_and_find_their_names(ran) -> None:  # type: ignore[no-untyped-def]
    """Every name a GPU block reads is a builtin, defined by the CPU blocks or by an earlier
    GPU block (they run unseen here: a typo must not wait for a GPU to show up)."""
    import builtins

    known = set(ran[0]) | set(dir(builtins))
    for b in (b for b in blocks() if b.gpu):
        compile(b.code, f"{TUTORIAL}:{b.line}", "exec")
        stored, loaded = _names(b.code)
        known |= stored
        missing = loaded - known
        assert not missing, f"block at line {b.line} reads undefined {sorted(missing)}"


def _names(code: str) -> tuple[set[str], set[str]]:
    """(names a block binds, names it reads)."""
    import ast

    stored, loaded = set(), set()
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.Name):
            (stored if isinstance(node.ctx, ast.Store) else loaded).add(node.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            stored |= {(a.asname or a.name).split(".")[0] for a in node.names}
    return stored, loaded
