#!/usr/bin/env python3
"""Bank conflicts predicted by nvatom.atoms.smem, measured by ncu on the GPU.

Run from the repository root, on a machine with an NVIDIA GPU, cupy and Nsight Compute::

    PYTHONPATH=src python3 bench/banks_ncu.py            # round trip + ncu, ~1 minute
    PYTHONPATH=src python3 bench/banks_ncu.py --no-ncu   # round trip only
    PYTHONPATH=src python3 bench/banks_ncu.py --only ldsm

Each case of :data:`CASES` is an access pattern of nvatom.atoms.smem (``ldsm.x4``,
``lds.128``, ...) over a shared-memory layout in CuTe notation.  For each case we

1. predict the wavefronts and conflicts with :func:`nvatom.atoms.smem.bank_conflicts`;
2. build a one-warp kernel with nvatom.ptx.builder that issues exactly those instructions at
   exactly the per-lane addresses :func:`~nvatom.atoms.smem.warp_addresses` gives (the byte
   offsets come from a table in global memory, so the kernel is the model's addresses, not a
   re-derivation), and checks that the data round-trips (ldmatrix/stmatrix: register ``j`` of
   lane ``l`` holds tile elements ``(8*(j%2) + l//4, 8*(j//2) + 2*(l%4) + {0,1})`` of the
   layout's ``(row, col)`` tile, with or without ``.trans``);
3. runs every kernel once under ``ncu --clock-control none`` and reads the shared-memory
   wavefront and bank-conflict counters of the op the case measures (ld: ``op_ld``, ldmatrix:
   ``op_ldsm`` where the GPU has it, else ``op_ld``; st / stmatrix likewise).

Kernel shape, so that the counters see only the instructions under test: loads of the
address table, the data and the smem fill come first; a ``bar.sync``; then the instructions
under test back to back; the results are stored to global memory only after all of them
completed (every store address depends, through ``xor``/``and`` with a run-time zero, on every
result).  Load kernels fill shared memory with ``st.shared`` (op_st), store kernels read it
back with ``ld.shared`` (op_ld): never the op being measured.

``probe`` cases are printed but not asserted by tests/gpu/test_banks_gpu.py: they are the
patterns where the hardware may beat the per-phase model (64/128-bit accesses whose lanes
repeat addresses across phases; see docs/shared-memory.md).

Writes reports/bench/banks.json.  Exits 0 when every round trip passed (mismatches with ncu
are reported, not fatal), 1 when a round trip failed, 2 when the GPU or ncu could not be used.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import io
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT / "src") not in sys.path:
    sys.path.insert(0, str(ROOT / "src"))

from nvatom.arch import Target, device_target  # noqa: E402
from nvatom.arch import target as get_target  # noqa: E402
from nvatom.atoms.smem import (  # noqa: E402
    BankReport,
    SmemAccess,
    WarpAccess,
    bank_conflicts,
    smem_access,
    smem_layout,
    warp_addresses,
)
from nvatom.layout import parse_layout  # noqa: E402
from nvatom.ptx.builder import Kernel, Module, Reg  # noqa: E402

WARP = 32


@dataclasses.dataclass(frozen=True)
class Case:
    """One access pattern over one layout; ``name`` becomes part of the kernel name."""

    name: str
    access: str
    layout: str  # CuTe notation
    element_bits: int | None = None
    probe: bool = False
    note: str = ""


CASES: tuple[Case, ...] = (
    # ldmatrix over 16-bit tiles: 128-byte rows plain, SW128, padded; 32-byte rows; .trans.
    Case("ldsm_x4_rowmajor_128B", "ldsm.x4", "(16,64):(64,1)", note="8-way"),
    Case("ldsm_x4_sw128", "ldsm.x4", str(smem_layout(16, 64, 16, "K", 128))),
    Case("ldsm_x4_padded_144B", "ldsm.x4", "(16,64):(72,1)", note="+16 B per row"),
    Case("ldsm_x4_rowmajor_32B", "ldsm.x4", "(16,16):(16,1)", note="2-way"),
    Case("ldsm_x4_interleave", "ldsm.x4", str(smem_layout(16, 16, 16, "K", 0))),
    Case("ldsm_x2_sw64", "ldsm.x2", str(smem_layout(16, 32, 16, "K", 64))),
    Case("ldsm_x1_rowmajor_128B", "ldsm.x1", "(8,64):(64,1)", note="8-way"),
    Case("ldsm_x4_trans_mn_sw128", "ldsm.x4.trans", str(smem_layout(64, 16, 16, "MN", 128))),
    Case("ldsm_x4_trans_mn_plain", "ldsm.x4.trans", "(64,16):(1,64)", note="8-way"),
    # stmatrix (sm_90+).
    Case("stsm_x4_rowmajor_128B", "stsm.x4", "(16,64):(64,1)", note="8-way"),
    Case("stsm_x4_sw128", "stsm.x4", str(smem_layout(16, 64, 16, "K", 128))),
    # ld.shared: lane l of instruction k at layout(l + 32 k), in units of the access width.
    Case("lds32_linear", "lds.32", "64:1"),
    Case("lds32_stride2", "lds.32", "32:2", note="2-way"),
    Case("lds32_stride32", "lds.32", "32:32", note="32-way"),
    Case("lds32_stride33", "lds.32", "32:33", note="padded column"),
    Case("lds32_broadcast", "lds.32", "32:0", note="one word, multicast"),
    Case("lds64_linear", "lds.64", "32:1"),
    Case("lds64_stride2", "lds.64", "32:2", note="2-way per half-warp"),
    Case("lds128_linear", "lds.128", "32:1"),
    Case("lds128_stride128B", "lds.128", "32:8", note="8-way per quarter-warp"),
    Case("lds128_column_plain", "lds.128", "(8,4):(8,1)", note="chunk c of rows 0-7"),
    Case("lds128_column_sw128", "lds.128", "Sw<3,0,3> o 0 o (8,4):(8,1)"),
    # st.shared.
    Case("sts32_stride2", "sts.32", "32:2", note="2-way"),
    Case("sts64_linear", "sts.64", "32:1"),
    Case("sts128_stride128B", "sts.128", "32:8", note="8-way per quarter-warp"),
    # Probes: lanes repeat addresses across phases; the hardware may merge phases.
    Case("probe_lds64_halves_same", "lds.64", "(16,2):(1,0)", probe=True,
         note="lanes l and l+16 read the same 8 B"),
    Case("probe_lds128_broadcast", "lds.128", "32:0", probe=True, note="all lanes, one 16 B"),
    Case("probe_lds128_pairs", "lds.128", "(2,16):(0,1)", probe=True,
         note="lanes 2i and 2i+1 share an address"),
)


# ============================================================================ metrics

#: ncu base metric names per op, hardware counter first, SASS-level model second; the first
#: that this ncu knows is used (".sum" is appended when requesting).
WAVEFRONT_METRICS = {
    op: [f"l1tex__data_pipe_lsu_wavefronts_mem_shared_op_{op}",
         f"smsp__sass_l1tex_data_pipe_lsu_wavefronts_mem_shared_op_{op}"]
    for op in ("ld", "st", "ldsm", "stsm")
}
CONFLICT_METRICS = {
    op: [f"l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_{op}",
         f"smsp__sass_l1tex_data_bank_conflicts_pipe_lsu_mem_shared_op_{op}"]
    for op in ("ld", "st", "ldsm", "stsm")
}
#: Instruction counts, recorded in the report when available.
EXTRA_METRICS = ["smsp__inst_executed_op_shared_ld", "smsp__inst_executed_op_shared_st",
                 "smsp__inst_executed_op_ldsm", "smsp__inst_executed_op_stsm"]


def measured_ops(access: SmemAccess) -> list[str]:
    """ncu ops to read for an access, most specific first (ldmatrix may count as op_ld)."""
    if access.is_matrix:
        return ["ldsm", "ld"] if access.op == "ld" else ["stsm", "st"]
    return [access.op]


# ============================================================================ cases -> kernels


@dataclasses.dataclass
class Prepared:
    """A case with its prediction, its kernel and the data it runs on."""

    case: Case
    access: SmemAccess
    report: BankReport
    kernel: str
    ptx: str
    target: str
    smem_bytes: int
    addresses: np.ndarray  # (instructions, 32) uint32 byte offsets into the smem buffer
    inp: np.ndarray  # uint32
    out_words: int
    check: Any  # callable(out: np.ndarray) -> list[str] of problems
    cubin: bytes = b""


def _layout(case: Case) -> Any:
    return parse_layout(case.layout)


def _lane_table(acc: SmemAccess, instrs: list[WarpAccess]) -> np.ndarray:
    """Byte offsets per (instruction, lane); a lane that supplies no address gets the one of
    the lane it mirrors (ldmatrix .x1: lane % 8, .x2: lane % 16), which the GPU ignores."""
    tab = np.zeros((len(instrs), WARP), dtype=np.uint32)
    for k, w in enumerate(instrs):
        for lane in range(WARP):
            la = w.lanes[lane]
            if la is None:
                if not acc.is_matrix:
                    raise ValueError(f"{acc.name}: lane {lane} of instruction {k} has no address "
                                     "(make the layout a multiple of 32)")
                la = w.lanes[lane % (8 * acc.matrices)]
            assert la is not None
            tab[k, lane] = la.address
    return tab


def _fragment_coords(acc: SmemAccess, origin: tuple[int, int], j: int, lane: int,
                     v: int) -> tuple[int, int]:
    """[PTX ISA ldmatrix; CuTe Copy_Traits<SM75_U32x4_LDSM_N>::DstLayout] register j of lane
    l holds row l // 4, elements 2*(l % 4) + {0, 1} of matrix j; matrix j is block
    (j % 2, j // 2) of the tile.  With .trans the same (row, col) of the *tile* (whose 16-byte
    rows then run down the tile's rows)."""
    r0, c0 = origin
    return r0 + 8 * (j % 2) + lane // 4, c0 + 8 * (j // 2) + 2 * (lane % 4) + v


def _smem_bytes(acc: SmemAccess, tab: np.ndarray, layout: Any, e: int) -> int:
    hi = int(tab.max()) + acc.lane_bytes
    if acc.is_matrix:
        hi = max(hi, (layout.cosize() * e + 7) // 8)
    return max(128, -(-hi // 128) * 128)


def prepare(case: Case, target: Target | str, seed: int = 0) -> Prepared:
    """Predict, build the kernel (PTX) and make the inputs and the checker of one case."""
    t = get_target(target)
    acc = smem_access(case.access)
    layout = _layout(case)
    e = case.element_bits or (16 if acc.is_matrix else 8 * acc.lane_bytes)
    report = bank_conflicts(layout, acc, element_bits=e)
    instrs = warp_addresses(layout, acc, element_bits=e)
    tab = _lane_table(acc, instrs)
    nbytes = _smem_bytes(acc, tab, layout, e)
    kname = f"banks_{case.name}"
    rng = np.random.default_rng(seed)
    nreg = acc.registers
    nk = len(instrs)

    if acc.is_matrix:
        if e != 16:
            raise ValueError(f"{case.name}: the bench's matrix cases use 16-bit elements")
        rows, cols = (int(np.prod(_flat(layout.shape[0]))), int(np.prod(_flat(layout.shape[1]))))
        tile = rng.integers(0, 1 << 16, size=(rows, cols), dtype=np.uint32)
        offset = np.array([[layout(r, c) for c in range(cols)] for r in range(rows)])
        origins = [w.lanes[0].coord for w in instrs]  # lane 0 supplies the tile's origin row
        frag = np.zeros((nk, nreg, WARP), dtype=np.uint32)
        for k, o in enumerate(origins):
            for j in range(nreg):
                for lane in range(WARP):
                    lo = tile[_fragment_coords(acc, o, j, lane, 0)]
                    hi = tile[_fragment_coords(acc, o, j, lane, 1)]
                    frag[k, j, lane] = lo | (hi << 16)
        if acc.op == "ld":
            image = rng.integers(0, 1 << 16, size=nbytes // 2, dtype=np.uint32)
            image[offset] = tile
            inp = (image[0::2] | (image[1::2] << 16)).astype(np.uint32)
            expected = frag.reshape(-1)

            def check(out: np.ndarray) -> list[str]:
                return _diff(out, expected, nk, nreg)

            out_words = nk * nreg * WARP
        else:
            inp = frag.reshape(-1).copy()

            def check(out: np.ndarray) -> list[str]:
                half = np.empty(out.size * 2, dtype=np.uint32)
                half[0::2], half[1::2] = out & 0xFFFF, out >> 16
                bad = np.argwhere(half[offset] != tile)
                return [f"tile ({r},{c}) at element {offset[r, c]}: smem has "
                        f"{half[offset[r, c]]:#06x}, stored {tile[r, c]:#06x}"
                        for r, c in bad[:8]]

            out_words = nbytes // 4
    else:
        if acc.op == "ld":
            inp = rng.integers(0, 1 << 32, size=nbytes // 4, dtype=np.uint32)
            expected = np.array([[[inp[tab[k, lane] // 4 + j] for lane in range(WARP)]
                                  for j in range(nreg)] for k in range(nk)],
                                dtype=np.uint32).reshape(-1)

            def check(out: np.ndarray) -> list[str]:
                return _diff(out, expected, nk, nreg)

            out_words = nk * nreg * WARP
        else:
            vals = rng.integers(0, 1 << 32, size=(nk, nreg, WARP), dtype=np.uint32)
            inp = vals.reshape(-1).copy()
            writers: dict[int, set[int]] = {}
            for k in range(nk):  # a later instruction overwrites; lanes of one race
                mine: dict[int, set[int]] = {}
                for lane in range(WARP):
                    for j in range(nreg):
                        word = int(tab[k, lane]) // 4 + j
                        mine.setdefault(word, set()).add(int(vals[k, j, lane]))
                writers.update(mine)

            def check(out: np.ndarray) -> list[str]:
                return [f"smem word {w}: {out[w]:#010x}, stored one of "
                        f"{sorted(hex(v) for v in vs)}"
                        for w, vs in sorted(writers.items()) if int(out[w]) not in vs][:8]

            out_words = nbytes // 4

    module = Module(t, features=[acc.feature] if acc.feature else [])
    k = module.kernel(kname)
    _build_kernel(k, acc, nk, nbytes)
    return Prepared(case, acc, report, kname, module.emit(), t.name, nbytes, tab,
                    np.ascontiguousarray(inp, dtype=np.uint32), out_words, check)


def _flat(x: Any) -> list[int]:
    if isinstance(x, tuple):
        return [v for y in x for v in _flat(y)]
    return [int(x)]


def _diff(out: np.ndarray, expected: np.ndarray, nk: int, nreg: int) -> list[str]:
    bad = np.flatnonzero(out != expected)
    msgs = []
    for i in bad[:8]:
        k, rest = divmod(int(i), nreg * WARP)
        j, lane = divmod(rest, WARP)
        msgs.append(f"instruction {k} register {j} lane {lane}: got {int(out[i]):#010x}, "
                    f"expected {int(expected[i]):#010x}")
    if len(bad) > 8:
        msgs.append(f"... {len(bad)} wrong words in all")
    return msgs


# ============================================================================ PTX


def _gptr(k: Kernel, name: str) -> Reg:
    raw = k.ld_param(k.param(name))
    g = k.reg("u64")
    k.ins("cvta.to.global.u64", g, raw)
    return g


def _add64(k: Kernel, base: Reg, off32: Reg) -> Reg:
    wide = k.reg("u64")
    k.ins("cvt.u64.u32", wide, off32)
    out = k.reg("u64")
    k.ins("add.s64", out, base, wide)
    return out


def _join_zero(k: Kernel, regs: list[Reg], zero: Reg) -> Reg:
    """A register that is 0 at run time but depends on every register of ``regs`` (ptxas
    cannot fold ``x & zero`` with ``zero`` a kernel parameter): adding it to an address makes
    the access wait for all of them."""
    acc = k.reg("b32")
    k.ins("mov.b32", acc, regs[0])
    for r in regs[1:]:
        k.ins("xor.b32", acc, acc, r)
    z = k.reg("u32")
    k.ins("and.b32", z, acc, zero)
    return z


def _copy_loop(k: Kernel, words: int, lane: Reg, tag: str, body: Any) -> None:
    """``for (w = lane; w < words; w += 32) body(w)``."""
    w = k.reg("u32")
    k.ins("mov.u32", w, lane)
    p = k.reg("pred")
    k.label(f"{tag}_loop")
    k.ins("setp.ge.u32", p, w, words)
    k.ins("bra.uni", f"{tag}_done", pred=str(p))
    body(w)
    k.ins("add.u32", w, w, WARP)
    k.ins("bra.uni", f"{tag}_loop")
    k.label(f"{tag}_done")


def _build_kernel(k: Kernel, acc: SmemAccess, nk: int, nbytes: int) -> None:
    """``kernel(inp, addr, out, zero)`` for one warp (see the module doc)."""
    k.maxntid = (WARP, 1, 1)
    inp, addr, out = _gptr(k, "inp"), _gptr(k, "addr"), _gptr(k, "out")
    zero = k.ld_param(k.param("zero", "u32"))
    k.comment(f"{acc.name}: {acc.ptx}, {nk} instruction(s) under test, {nbytes} B of smem")
    lane = k.reg("u32")
    k.ins("mov.u32", lane, "%laneid")
    buf = k.shared("smem", nbytes, align=1024)
    sbase = k.reg("u32")
    k.ins("mov.u32", sbase, buf)
    lane4 = k.reg("u32")
    k.ins("shl.b32", lane4, lane, 2)
    addr_l, inp_l, out_l = _add64(k, addr, lane4), _add64(k, inp, lane4), _add64(k, out, lane4)
    words = nbytes // 4
    nreg = acc.registers
    # Vector operands: ld.shared.b32 takes a scalar, .v2/.v4 and ldmatrix/stmatrix a list.
    scalar = not acc.is_matrix and nreg == 1

    offs = []
    for i in range(nk):
        o = k.reg("u32")
        k.ins("ld.global.u32", o, f"[{addr_l}+{4 * WARP * i}]")
        offs.append(o)

    if acc.op == "ld":
        def fill(w: Reg) -> None:
            w4 = k.reg("u32")
            k.ins("shl.b32", w4, w, 2)
            v = k.reg("b32")
            k.ins("ld.global.b32", v, f"[{_add64(k, inp, w4)}]")
            sa = k.reg("u32")
            k.ins("add.u32", sa, sbase, w4)
            k.ins("st.shared.b32", f"[{sa}]", v)

        _copy_loop(k, words, lane, "fill", fill)
        z = _join_zero(k, offs, zero)
        k.ins("bar.sync", 0)
        base = k.reg("u32")
        k.ins("add.u32", base, sbase, z)
        results: list[list[Reg]] = []
        k.comment("instructions under test")
        for i in range(nk):
            a = k.reg("u32")
            k.ins("add.u32", a, base, offs[i])
            regs = k.regs("b32", nreg)
            k.ins(acc.ptx, regs[0] if scalar else regs, f"[{a}]")
            results.append(regs)
        z2 = _join_zero(k, [r for rs in results for r in rs], zero)
        dst = _add64(k, out_l, z2)
        for i, regs in enumerate(results):
            for j, r in enumerate(regs):
                k.ins("st.global.b32", f"[{dst}+{4 * WARP * (i * nreg + j)}]", r)
    else:
        vals: list[list[Reg]] = []
        for i in range(nk):
            regs = k.regs("b32", nreg)
            for j, r in enumerate(regs):
                k.ins("ld.global.b32", r, f"[{inp_l}+{4 * WARP * (i * nreg + j)}]")
            vals.append(regs)
        z = _join_zero(k, offs + [r for rs in vals for r in rs], zero)
        base = k.reg("u32")
        k.ins("add.u32", base, sbase, z)
        k.comment("instructions under test")
        for i in range(nk):
            a = k.reg("u32")
            k.ins("add.u32", a, base, offs[i])
            k.ins(acc.ptx, f"[{a}]", vals[i][0] if scalar else vals[i])
        k.ins("bar.sync", 0)

        def readback(w: Reg) -> None:
            w4 = k.reg("u32")
            k.ins("shl.b32", w4, w, 2)
            sa = k.reg("u32")
            k.ins("add.u32", sa, sbase, w4)
            v = k.reg("b32")
            k.ins("ld.shared.b32", v, f"[{sa}]")
            k.ins("st.global.b32", f"[{_add64(k, out, w4)}]", v)

        _copy_loop(k, words, lane, "back", readback)


# ============================================================================ running


def assemble_all(prepared: list[Prepared]) -> None:
    from nvatom.runtime.ptxas import assemble

    for p in prepared:
        p.cubin = assemble(p.ptx, p.target).cubin


def _launch(p: Prepared, path: Path) -> np.ndarray:
    import cupy

    mod = cupy.RawModule(path=str(path))
    fn = mod.get_function(p.kernel)
    inp = cupy.asarray(p.inp)
    addr = cupy.asarray(np.ascontiguousarray(p.addresses.reshape(-1)))
    out = cupy.full(p.out_words, 0xDEADBEEF, dtype=cupy.uint32)
    fn((1,), (WARP,), (inp, addr, out, np.uint32(0)))
    cupy.cuda.runtime.deviceSynchronize()
    return cupy.asnumpy(out)


def run_prepared(p: Prepared, workdir: Path) -> list[str]:
    """Run the case's kernel once; the problems found in its output (empty: round trip ok)."""
    path = workdir / f"{p.kernel}.cubin"
    path.write_bytes(p.cubin)
    return p.check(_launch(p, path))


def gpu_target() -> Target:
    import cupy

    return device_target(cupy.cuda.Device().compute_capability)


def prepare_all(target: Target, only: str | None = None) -> tuple[list[Prepared], list[str]]:
    """Every case the target can run (stmatrix needs sm_90), and why the others were left."""
    out, skipped = [], []
    for c in CASES:
        if only and only not in c.name and only not in c.access:
            continue
        acc = smem_access(c.access)
        if acc.feature and not target.supports(acc.feature):
            skipped.append(f"{c.name}: {target.name} has no {acc.feature}")
            continue
        out.append(prepare(c, target))
    return out, skipped


# ============================================================================ ncu


class NcuError(RuntimeError):
    """ncu could not measure (missing, no permission, unknown metrics); the message says why."""


def find_ncu() -> str | None:
    for cand in (os.environ.get("NVATOM_NCU"), shutil.which("ncu"),
                 "/usr/local/cuda/bin/ncu"):
        if cand and Path(cand).exists():
            return cand
    return None


class NcuPermissionError(NcuError):
    """The GPU's performance counters are restricted to admin users."""


def available_metrics(ncu: str) -> set[str]:
    """Base names of the metrics ``ncu --query-metrics`` lists for this GPU."""
    r = subprocess.run([ncu, "--query-metrics"], capture_output=True, text=True, timeout=120,
                       check=False)
    text = r.stdout + r.stderr
    names = set(re.findall(r"\b([a-z0-9]+__[a-z0-9_]+)\b", text))
    if r.returncode or not names:
        raise NcuError(f"`{ncu} --query-metrics` failed (exit {r.returncode}): "
                       f"{text.strip()[-800:]}")
    return names


def _shared_listing(available: set[str]) -> str:
    shared = sorted(m for m in available if "shared" in m and ("wavefront" in m or "bank" in m
                                                               or "inst" in m))
    return "the shared-memory metrics this ncu offers:\n  " + "\n  ".join(shared)


def choose_metrics(available: set[str] | None) -> list[str]:
    """The first known metric of each (op, wavefronts|conflicts) pair, plus the extras.
    Without a list (the query failed) the hardware counters are requested as they are."""
    if available is None:  # only the ops every GPU since Volta has
        return [WAVEFRONT_METRICS[op][0] for op in ("ld", "st")] + \
               [CONFLICT_METRICS[op][0] for op in ("ld", "st")]
    chosen = []
    for ms in (*WAVEFRONT_METRICS.values(), *CONFLICT_METRICS.values()):
        m = next((m for m in ms if m in available), None)
        if m is not None:
            chosen.append(m)
    if not any(m in chosen for ms in WAVEFRONT_METRICS.values() for m in ms):
        want = [ms[0] for ms in WAVEFRONT_METRICS.values()]
        raise NcuError(f"none of the shared-memory wavefront metrics {want} (nor their "
                       f"smsp__sass_ forms) exists here; {_shared_listing(available)}")
    return chosen + [m for m in EXTRA_METRICS if m in available]


def run_ncu(prepared: list[Prepared], ncu: str, workdir: Path,
            timeout: float = 300) -> dict[str, dict[str, float]]:
    """Profile every prepared kernel once; kernel name -> {metric base name: value}."""
    try:
        available: set[str] | None = available_metrics(ncu)
    except (NcuError, subprocess.TimeoutExpired):
        available = None
    metrics = choose_metrics(available)
    manifest = []
    for p in prepared:
        cub = workdir / f"{p.kernel}.cubin"
        cub.write_bytes(p.cubin)
        np.save(workdir / f"{p.kernel}.inp.npy", p.inp)
        np.save(workdir / f"{p.kernel}.addr.npy", p.addresses)
        manifest.append({"kernel": p.kernel, "cubin": str(cub), "out_words": p.out_words})
    (workdir / "manifest.json").write_text(json.dumps(manifest))
    cmd = [ncu, "--clock-control", "none", "--print-units", "base", "--csv",
           "--metrics", ",".join(f"{m}.sum" for m in metrics),
           "--kernel-name", "regex:^banks_",
           sys.executable, str(Path(__file__).resolve()), "--child", str(workdir)]
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), env.get("PYTHONPATH", "")])
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env,
                       check=False)
    log = r.stdout + r.stderr
    if "ERR_NVGPUCTRPERM" in log:
        raise NcuPermissionError(
            "ncu may not read the GPU's performance counters here (ERR_NVGPUCTRPERM): run as "
            "root or allow profiling for all users (NVreg_RestrictProfilingToAdminUsers=0)")
    if re.search(r"(?i)failed to find metric|unknown metric|invalid metric", log):
        hint = (_shared_listing(available) if available is not None
                else f"list them with `{ncu} --query-metrics | grep shared`")
        raise NcuError(f"ncu does not know a requested metric ({', '.join(metrics)}):\n"
                       f"{log.strip()[-1200:]}\n{hint}")
    values = parse_ncu_csv(r.stdout)
    if r.returncode or not values:
        raise NcuError(f"ncu failed (exit {r.returncode}) running `{' '.join(cmd)}`:\n"
                       f"{log.strip()[-2000:]}")
    return values


def parse_ncu_csv(text: str) -> dict[str, dict[str, float]]:
    """ncu --csv output -> kernel name -> {metric base name: value} (".sum" dropped)."""
    rows = [ln for ln in text.splitlines() if ln.startswith('"')]
    out: dict[str, dict[str, float]] = {}
    if not rows:
        return out
    for rec in csv.DictReader(io.StringIO("\n".join(rows))):
        kname = rec.get("Kernel Name") or rec.get("Function Name") or rec.get("Name") or ""
        name = kname.split("(")[0].strip()
        metric = rec.get("Metric Name", "")
        raw = rec.get("Metric Value", "").replace(",", "").strip()
        try:
            val = float(raw)
        except ValueError:
            continue
        if metric.endswith(".sum"):
            metric = metric[:-4]
        out.setdefault(name, {})[metric] = val
    return out


def _child(workdir: Path) -> int:
    """Under ncu: launch every kernel of the manifest once; print nothing on stdout."""
    import cupy

    for m in json.loads((workdir / "manifest.json").read_text()):
        mod = cupy.RawModule(path=m["cubin"])
        fn = mod.get_function(m["kernel"])
        inp = cupy.asarray(np.load(workdir / f"{m['kernel']}.inp.npy"))
        addr = cupy.asarray(np.ascontiguousarray(
            np.load(workdir / f"{m['kernel']}.addr.npy").reshape(-1)))
        out = cupy.zeros(m["out_words"], dtype=cupy.uint32)
        fn((1,), (WARP,), (inp, addr, out, np.uint32(0)))
        cupy.cuda.runtime.deviceSynchronize()
    return 0


@dataclasses.dataclass
class Measured:
    """ncu's counts for one case, read from the most specific metric the GPU has."""

    wavefronts: float | None
    conflicts: float | None
    wavefront_metric: str | None
    conflict_metric: str | None
    raw: dict[str, float]

    def matches(self, report: BankReport) -> bool:
        return (self.wavefronts == report.wavefronts
                and (self.conflicts is None or self.conflicts == report.conflicts))


def measured(p: Prepared, values: dict[str, dict[str, float]]) -> Measured:
    raw = values.get(p.kernel, {})
    ops = measured_ops(p.access)
    for i, op in enumerate(ops):
        # A specific op (ldsm) that reads 0 means the GPU counts the instruction under the
        # generic one (ld); the last op is taken as it is.
        wm = next((m for m in WAVEFRONT_METRICS[op]
                   if m in raw and (raw[m] > 0 or i == len(ops) - 1)), None)
        if wm is not None:
            cm = next((m for m in CONFLICT_METRICS[op] if m in raw), None)
            return Measured(raw[wm], None if cm is None else raw[cm], wm, cm, raw)
    return Measured(None, None, None, None, raw)


# ============================================================================ main


def _fmt_row(cols: list[str], widths: list[int]) -> str:
    return "  ".join(c.ljust(w) for c, w in zip(cols, widths, strict=True))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--no-ncu", action="store_true", help="round trips only")
    ap.add_argument("--only", help="cases whose name or access contains this text")
    ap.add_argument("--out", default=str(ROOT / "reports/bench/banks.json"))
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        return _child(Path(args.child))

    t0 = time.time()
    try:
        import cupy

        target = gpu_target()
        device = cupy.cuda.runtime.getDeviceProperties(0)["name"].decode()
    except Exception as e:  # no cupy, no GPU
        print(f"banks_ncu: needs an NVIDIA GPU and cupy: {type(e).__name__}: {e}",
              file=sys.stderr)
        return 2
    prepared, skipped = prepare_all(target, args.only)
    assemble_all(prepared)
    print(f"{device} ({target.name}): {len(prepared)} cases"
          + (f", {len(skipped)} skipped" if skipped else ""))
    for s in skipped:
        print(f"  skipped {s}")

    rows: list[dict[str, Any]] = []
    failures = 0
    with tempfile.TemporaryDirectory(prefix="nvatom-banks-") as tmp:
        work = Path(tmp)
        for p in prepared:
            problems = run_prepared(p, work)
            failures += bool(problems)
            rows.append({"case": p.case.name, "access": p.access.name, "layout": p.case.layout,
                         "probe": p.case.probe, "note": p.case.note,
                         "instructions": len(p.report.instructions),
                         "predicted": {"wavefronts": p.report.wavefronts,
                                       "ideal": p.report.ideal,
                                       "conflicts": p.report.conflicts},
                         "round_trip": "ok" if not problems else problems})
        ncu_note = None
        values: dict[str, dict[str, float]] = {}
        ncu = None if args.no_ncu else find_ncu()
        if args.no_ncu:
            ncu_note = "not run (--no-ncu)"
        elif ncu is None:
            ncu_note = "ncu not found (PATH, /usr/local/cuda/bin, $NVATOM_NCU)"
        else:
            try:
                values = run_ncu(prepared, ncu, work)
            except (NcuError, subprocess.TimeoutExpired) as e:
                ncu_note = str(e)
        for p, row in zip(prepared, rows, strict=True):
            if values:
                m = measured(p, values)
                row["measured"] = {"wavefronts": m.wavefronts, "conflicts": m.conflicts,
                                   "wavefront_metric": m.wavefront_metric,
                                   "conflict_metric": m.conflict_metric, "raw": m.raw}
                row["match"] = m.matches(p.report)

    widths = [26, 14, 10, 10, 10, 10, 6]
    print(_fmt_row(["case", "access", "pred wf", "pred conf", "ncu wf", "ncu conf", "match"],
                   widths))
    for row in rows:
        pr, me = row["predicted"], row.get("measured", {})
        fmt = (lambda v: "-" if v is None else str(int(v)))  # noqa: E731
        match = row.get("match")
        mark = "-" if match is None else ("yes" if match else ("probe" if row["probe"]
                                                               else "NO"))
        print(_fmt_row([row["case"], row["access"], str(pr["wavefronts"]), str(pr["conflicts"]),
                        fmt(me.get("wavefronts")), fmt(me.get("conflicts")), mark], widths)
              + ("" if row["round_trip"] == "ok" else "  ROUND TRIP FAILED"))
        if row["round_trip"] != "ok":
            for msg in row["round_trip"]:
                print(f"      {msg}")
    if ncu_note:
        print(f"ncu: {ncu_note}")
    elif rows:
        used = sorted({r["measured"][k] for r in rows for k in ("wavefront_metric",
                                                               "conflict_metric")
                       if r.get("measured", {}).get(k)})
        print("ncu metrics used: " + ", ".join(used))
    mism = [r["case"] for r in rows if r.get("match") is False and not r["probe"]]
    if mism:
        print("MISMATCH (model vs ncu): " + ", ".join(mism))

    report = {
        "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "device": device,
        "target": target.name,
        "host": platform.node(),
        "ncu": ncu,
        "ncu_note": ncu_note,
        "wall_s": round(time.time() - t0, 2),
        "skipped": skipped,
        "cases": rows,
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {out} ({report['wall_s']} s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
