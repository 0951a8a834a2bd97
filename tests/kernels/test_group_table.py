"""The grouped GEMM's device-side group table (nvatom.kernels.sm90.group_table) on the CPU:
every variant assembles for sm_90a, edits exactly the fields the PTX ISA's
``tensormap.replace`` names, and its semantics (clamping, tile counts) on hand-worked cases.
The GPU runs it in tests/gpu/test_grouped_device_gpu.py."""

from __future__ import annotations

import re

import pytest

from nvatom.gemm_providers import grouped_device_plan
from nvatom.kernels.sm90 import group_table as GT
from nvatom.runtime.ptxas import assemble

SPECS = [
    GT.GroupTableSpec(masked=False, block_m=128, a_m_axes=(1,), d_m_axes=(1,)),
    GT.GroupTableSpec(masked=True, block_m=128, a_m_axes=(1,), d_m_axes=(1,)),
    GT.GroupTableSpec(masked=False, block_m=64, a_m_axes=(1,), d_m_axes=(1,), row_ends=True),
    GT.GroupTableSpec(masked=False, block_m=128, a_m_axes=(2,), d_m_axes=(1, 3)),
    GT.GroupTableSpec(masked=True, block_m=128, a_m_axes=(1,), d_m_axes=(1,), row_ends=True),
]


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.name)
def test_assembles_and_edits_the_named_fields(spec: GT.GroupTableSpec) -> None:
    ptx = GT.build_group_table(spec).emit()
    k = assemble(ptx, "sm_90a").kernel(spec.name)
    assert k.spills == 0
    assert k.shared_bytes == 4 * GT.THREADS  # the scan array
    # one address edit per map (A, B, D); one extent edit per M dimension of A and D, each
    # naming its ordinal (PTX ISA "tensormap.replace": .global_dim takes ord, the dimension)
    addr = re.findall(r"tensormap\.replace\.tile\.global_address\.global\.b1024\.b64", ptx)
    dims = re.findall(r"tensormap\.replace\.tile\.global_dim\.global\.b1024\.b32 \[[^]]+\], "
                      r"(\d+),", ptx)
    assert len(addr) == 3
    assert sorted(int(d) for d in dims) == sorted(spec.a_m_axes + spec.d_m_axes)
    # the edits are published to the tensormap proxy before the kernel ends
    body = ptx[ptx.rindex("tensormap.replace"):]
    assert "fence.proxy.tensormap::generic.release.gpu" in body
    assert ("mad.wide.u32" in ptx) and (".reqntid 256, 1, 1" in ptx)
    assert ptx.count("atom.global.or.b32") == 1


def test_reference_contiguous_hand_worked() -> None:
    # rows 900, 128-row tiles, 2 column tiles.  Group 2's end 150 is below group 1's 200
    # (clamped up: empty); group 3's 1000 is past the 900 rows (clamped down)
    groups, ends, bad = GT.reference_table([0, 200, 150, 1000], 900, False, 128, 2)
    assert groups == [(0, 0), (0, 200), (200, 0), (200, 700)]
    assert ends == [0, 4, 4, 4 + 6 * 2]  # ceil(200/128)=2, ceil(700/128)=6 M tiles
    assert bad
    assert GT.reference_table([5, 5, 9], 9, False, 4, 1) == ([(0, 5), (5, 0), (5, 4)],
                                                             [2, 2, 3], False)


def test_reference_masked_hand_worked() -> None:
    groups, ends, bad = GT.reference_table([3, -1, 70, 64], 64, True, 64, 1)
    assert groups == [(0, 3), (64, 0), (128, 64), (192, 64)]  # first rows of (G, 64, K)
    assert ends == [1, 1, 2, 3]
    assert bad
    assert not GT.reference_table([0, 64], 64, True, 64, 3)[2]


@pytest.mark.parametrize(("kw", "msg"), [
    (dict(block_m=0), "block_m = 0"),
    (dict(a_m_axes=()), "A's map has M at dimensions ()"),
    (dict(d_m_axes=(5,)), "D's map has M at dimensions (5,)"),
])
def test_spec_refuses(kw: dict, msg: str) -> None:
    args = dict(masked=False, block_m=128, a_m_axes=(1,), d_m_axes=(1,)) | kw
    with pytest.raises(GT.GroupTableError, match=re.escape(msg)):
        GT.GroupTableSpec(**args)


@pytest.mark.parametrize(("masked", "dt", "b_major", "extra"), [
    (False, "bf16", "N", {}), (True, "bf16", "N", {}), (False, "f16", "K", {}),
    (True, "f16", "K", {}),
    (False, "e4m3", "K", dict(b_dtype="e4m3", scale_mode="row")),
    (False, "e4m3", "K", dict(b_dtype="e4m3", scale_mode="block")),
    (True, "e4m3", "K", dict(b_dtype="e4m3", scale_mode="row")),
])
def test_device_plan(masked: bool, dt: str, b_major: str, extra: dict) -> None:
    """The plan's templates are the three maps of the whole tensors (the driver's encoding
    of each, here a stand-in recording the arguments); M is the only dimension the device
    edits; the grid covers every tile the groups can have, capped at the SMs."""
    seen = []

    def enc(args: dict) -> bytes:
        seen.append(args)
        return bytes([len(seen)]) * 128

    g, rows, n, k = 8, 1000, 520, 272
    ldb = n if b_major == "N" else k
    p = grouped_device_plan(dt, "bf16", b_major, rows, g, n, k, 0x10000, k, 0x200000,
                            k * n * (1 if dt == "e4m3" else 2), ldb, 0x4000000, n, 132,
                            masked=masked, encode=enc, **extra)
    assert p.templates == bytes([1]) * 128 + bytes([2]) * 128 + bytes([3]) * 128
    assert [a["globalAddress"] for a in seen] == [0x10000, 0x200000, 0x4000000]
    a_dims, d_dims = seen[0]["globalDim"], seen[2]["globalDim"]
    assert [a_dims[i] for i in p.table.a_m_axes] == [rows] * len(p.table.a_m_axes)
    assert [d_dims[i] for i in p.table.d_m_axes] == [rows] * len(p.table.d_m_axes)
    assert p.table.masked is masked and p.table.row_ends is (dt == "e4m3")
    tiles_m = -(-rows // p.cfg.block_m)
    assert p.tiles_n == -(-n // p.cfg.block_n)
    assert p.grid == min(132, (g * tiles_m if masked else tiles_m + g) * p.tiles_n)
    assert p.buffer_bytes == g * (GT.ENTRY_BYTES + 4 * (2 if dt == "e4m3" else 1))
    assert p.cfg.grouped and p.cfg.group_sched != "nofence"  # the GEMM acquires the maps
