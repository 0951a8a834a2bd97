"""On an sm_90 GPU: ldmatrix and stmatrix .m8n8 .b16 (.x1/.x2/.x4, with and without .trans)
and cp.async put each lane's data where the PTX ISA says and where the atom's declared
(thread, value) layout says, lane by lane and element by element.

The kernels are nvatom.ptx.copy_emit's one-warp test kernels (one module, assembled once):

* ldmatrix: IN is the matrices' rows (row ``L`` of the input is the row lane ``L`` addresses:
  matrix ``L / 8``, row ``L % 8``), each 16-bit element holding a code of its (matrix, row,
  column); lane ``l`` writes its register ``r`` to word ``l * registers + r`` of OUT.  The
  code each register half carries is then compared with the ISA's rule ("a group of four
  threads loads an entire row": lane ``l`` holds elements ``2 (l % 4)`` and ``2 (l % 4) + 1``
  of row ``l / 4`` of matrix ``r``; ``.trans`` swaps row and column) and with
  ``atom.register_layout(16)``.
* stmatrix: IN holds each lane's registers, each 16-bit half a code of (lane, register,
  half); OUT receives the rows.  Each stored element's code is compared with the lane the ISA
  names for it and with the atom's layout.
* cp.async: lane ``l`` copies N bytes at ``IN + l N`` to shared memory (with the atom's zero
  fill) and back out; ISA "cp.async": the first src-size bytes are the source's, contiguous,
  the rest zero; the atom declares one thread moving N contiguous bytes.

The rules are written here, not read from nvatom.atoms.copy.  Without a GPU,
tests/atoms/test_copy_ptxas.py::test_layout_gpu_kernels_assemble assembles the same module for
sm_90a with ptxas (every test under tests/gpu/ is skipped there).
"""

from __future__ import annotations

import atexit
import functools
import shutil
import tempfile
from pathlib import Path

import numpy as np
import pytest

from nvatom.arch import device_target
from nvatom.atoms import copy as C
from nvatom.ptx.copy_emit import build_copy_test_module, cp_async_zero_fill
from nvatom.runtime.ptxas import assemble

MATRIX = [f"atom.{op}<m8n8.x{n}{t}>" for op in ("ldsm", "stsm") for n in (1, 2, 4)
          for t in ("", ".trans")]
ASYNC = ["atom.simt_async_copy<4>", "atom.simt_async_copy<8>", "atom.simt_async_copy<16>",
         "atom.simt_async_copy<16>.ca", "atom.simt_async_copy<16>.src_size",
         "atom.simt_async_copy<8>.ignore_src"]
ATOMS = [*MATRIX, *ASYNC]


def layout_test_atoms() -> list[C._CopyBase]:
    """The atoms whose test kernels this file runs, in kernel order."""
    return [C.copy_atom(n) for n in ATOMS]


# --------------------------------------------------------------------------- on the GPU


class _Gpu:
    def __init__(self) -> None:
        import cupy

        cc = cupy.cuda.Device().compute_capability  # e.g. "90"
        if int(cc) < 90:
            pytest.skip(f"stmatrix needs sm_90; this GPU is sm_{cc}")
        self.target = device_target(cc).name
        module, names = build_copy_test_module(layout_test_atoms(), self.target)
        self.names = dict(zip(ATOMS, names, strict=True))
        tmp = tempfile.mkdtemp(prefix="nvatom-copy-layouts-gpu-")
        atexit.register(shutil.rmtree, tmp, True)
        path = Path(tmp) / "copy_layouts.cubin"
        path.write_bytes(assemble(module.emit(), self.target).cubin)
        self.module = cupy.RawModule(path=str(path))

    def run(self, name: str, data: np.ndarray, out_bytes: int) -> np.ndarray:
        import cupy

        src = cupy.asarray(np.ascontiguousarray(data).view(np.uint8))
        dst = cupy.full(out_bytes, 0xAB, dtype=cupy.uint8)
        self.module.get_function(self.names[name])((1,), (32,), (src, dst))
        cupy.cuda.runtime.deviceSynchronize()
        return cupy.asnumpy(dst)


@functools.cache
def _gpu() -> _Gpu:
    return _Gpu()


def _isa_m8n8(lane: int, half: int, trans: bool) -> tuple[int, int]:
    """(smem row, column) within its matrix of half ``half`` of a lane's register (ISA
    "ldmatrix"/"stmatrix", .m8n8 fragment figures)."""
    row, col = lane // 4, 2 * (lane % 4) + half
    return (col, row) if trans else (row, col)


def _elem_code(matrix: int, row: int, col: int) -> int:
    return 0x8000 | matrix << 6 | row << 3 | col


def _lane_code(lane: int, reg: int, half: int) -> int:
    return 0x4000 | lane << 3 | reg << 1 | half


@pytest.mark.gpu
@pytest.mark.parametrize("name", [n for n in MATRIX if n.startswith("atom.ldsm")])
def test_ldmatrix_lanes(name: str) -> None:
    atom = C.copy_atom(name)
    assert isinstance(atom, C.MatrixCopy)
    num, trans = atom.num, atom.trans
    rows = [[_elem_code(L // 8, L % 8, c) for c in range(8)] for L in range(8 * num)]
    smem = np.array(rows, dtype=np.uint16).reshape(-1)
    got = _gpu().run(name, smem, 32 * num * 4).view(np.uint16).reshape(32, num, 2)
    declared = atom.register_layout(16)
    for lane in range(32):
        for r in range(num):
            for h in range(2):
                row, col = _isa_m8n8(lane, h, trans)
                assert got[lane, r, h] == _elem_code(r, row, col), \
                    f"{name}: lane {lane} register {r} half {h} (ISA)"
                assert got[lane, r, h] == smem[declared(lane, 2 * r + h)], \
                    f"{name}: lane {lane} register {r} half {h} (declared layout)"


@pytest.mark.gpu
@pytest.mark.parametrize("name", [n for n in MATRIX if n.startswith("atom.stsm")])
def test_stmatrix_lanes(name: str) -> None:
    atom = C.copy_atom(name)
    assert isinstance(atom, C.MatrixCopy)
    num, trans = atom.num, atom.trans
    regs = np.array([[[_lane_code(t, r, h) for h in range(2)] for r in range(num)]
                     for t in range(32)], dtype=np.uint16).reshape(-1)
    got = _gpu().run(name, regs, 8 * num * 16).view(np.uint16).reshape(num, 8, 8)
    for lane in range(32):
        for r in range(num):
            for h in range(2):
                row, col = _isa_m8n8(lane, h, trans)
                assert got[r, row, col] == _lane_code(lane, r, h), \
                    f"{name}: matrix {r} row {row} column {col} (ISA)"
    declared = atom.register_layout(16)
    flat = got.reshape(-1)
    for lane in range(32):
        for v in range(2 * num):
            assert flat[declared(lane, v)] == _lane_code(lane, v // 2, v % 2), \
                f"{name}: lane {lane} value {v} (declared layout)"


@pytest.mark.gpu
@pytest.mark.parametrize("name", ASYNC)
def test_cp_async_lanes(name: str) -> None:
    atom = C.copy_atom(name)
    assert isinstance(atom, C.SimtAsyncCopy)
    n = atom.nbytes
    data = np.random.default_rng(7).integers(1, 256, 32 * n, dtype=np.uint8)
    got = _gpu().run(name, data, 32 * n).reshape(32, n)
    declared = atom.src_layout(8)
    for lane in range(32):
        kept = cp_async_zero_fill(atom, lane)  # bytes the kernel asks to read
        want = np.concatenate([data[lane * n: lane * n + kept], np.zeros(n - kept, np.uint8)])
        np.testing.assert_array_equal(got[lane], want, err_msg=f"{name}: lane {lane} (ISA)")
        assert [int(got[lane, declared(0, v)]) for v in range(kept)] == \
            [int(x) for x in data[lane * n: lane * n + kept]], f"{name}: lane {lane} (declared)"
