"""SM120 block-scaled mma.sync on the device: what settles the scale-factor lane/byte rule
and the element containers (docs/sm120.md "Not proven").

Runs only on a compute-capability 12.x GPU (skips elsewhere, and without a GPU). For every
dense ``SM120.mma_bs`` form and a spread of selectors: random tiles, packed into the lanes'
registers by :mod:`nvatom.atoms.block_scale_ref` (decoy bytes where the selectors do not
read), written to memory where :func:`nvatom.ptx.sm120_emit.build_mma_bs_test_module`'s
kernel loads them, run, and D compared with the numpy product.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import pytest

from nvatom import dtypes
from nvatom.arch import device_target
from nvatom.atoms import block_scale_ref as ref
from nvatom.atoms import sm120
from nvatom.atoms.sm120 import MmaBsForm
from nvatom.ptx import mma_emit
from nvatom.ptx.builder import Module
from nvatom.ptx.sm120_emit import add_mma_bs_test_kernel
from nvatom.runtime.ptxas import assemble

pytestmark = pytest.mark.gpu

_VALUES = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, -0.5, -1.0, -2.0, -3.0])


def _cases() -> list[MmaBsForm]:
    out = []
    for f in sm120.mma_bs_forms():
        if f.is_sparse:
            continue
        choices = f.selector_choices()
        out += [choices[0], choices[-1], choices[len(choices) // 3]]
    return out


def _target() -> str:
    import cupy

    t = device_target(cupy.cuda.Device().compute_capability)
    if t.major != 12:
        pytest.skip(f"needs an SM120/SM121 GPU, this one is {t.name}")
    return t.name


def _to_memory(form: MmaBsForm, op: str, regs: np.ndarray) -> np.ndarray:
    acc = mma_emit.operand_access(form, op)  # type: ignore[arg-type]
    mem = np.zeros(acc.nbytes // 4, dtype=np.uint32)
    for lane in range(32):
        for r in range(form.registers(op)):
            mem[acc.address(lane, r) // 4] = regs[lane, r]
    return mem


def _from_memory(form: MmaBsForm, mem: np.ndarray) -> np.ndarray:
    acc = mma_emit.operand_access(form, "D")  # type: ignore[arg-type]
    out = np.zeros((32, form.registers("D")), dtype=np.uint32)
    for lane in range(32):
        for r in range(form.registers("D")):
            out[lane, r] = mem[acc.address(lane, r) // 4]
    return out


def test_block_scaled_mma_on_the_device() -> None:
    import cupy

    target = _target()
    forms = [f for f in _cases() if f.available_on(target)]
    module = Module(target, version=max(f.ptx_version_for(target) for f in forms))
    for i, f in enumerate(forms):
        add_mma_bs_test_kernel(module, f, f"bs{i}")
    cubin = assemble(module.emit(), target).cubin
    tmp = tempfile.mkdtemp(prefix="nvatom-sm120-gpu-")
    path = Path(tmp) / "sm120.cubin"
    path.write_bytes(cubin)
    mod = cupy.RawModule(path=str(path))
    rng = np.random.default_rng(120)
    wrong = []
    for i, f in enumerate(forms):
        scale_codes = np.arange(124, 131) if f.sf_type.name == "ue8m0" else np.arange(0x30, 0x48)
        # values every element type holds exactly, so any f32 summation order is exact
        a = dtypes.encode(f.a_type, rng.choice(_VALUES, size=(16, f.k)))
        b = dtypes.encode(f.b_type, rng.choice(_VALUES, size=(f.k, 8)))
        c = rng.integers(-8, 8, size=(16, 8)).astype(np.float32)
        sa = rng.choice(scale_codes, size=(16, f.scale_vec))
        sb = rng.choice(scale_codes, size=(f.scale_vec, 8))
        regs = [ref.pack_operand(f, op, t) for op, t in (("A", a), ("B", b), ("C", c))]
        bufs = [_to_memory(f, op, r) for op, r in zip("ABC", regs, strict=True)]
        bufs.insert(3, np.full(16 * 8, 0x7FC00000, dtype=np.uint32))  # D poisoned with NaN
        bufs += [ref.pack_scales(f, "SFA", sa, rng=rng), ref.pack_scales(f, "SFB", sb, rng=rng)]
        dev = [cupy.asarray(x) for x in bufs]
        mod.get_function(f"bs{i}")((1,), (32,), tuple(dev))
        cupy.cuda.runtime.deviceSynchronize()
        got = ref.unpack_accumulator(f, _from_memory(f, cupy.asnumpy(dev[3])))
        want = ref.block_scaled_mma(a, b, c, sa, sb, a_type=f.a_type, b_type=f.b_type,
                                    sf_type=f.sf_type, vec_size=f.vec_size)
        if not np.array_equal(got, want):
            wrong.append(f"{f.name}: {np.argwhere(got != want)[:3].tolist()}")
    assert not wrong, "\n".join(wrong)
