"""The copy-atom pipeline of one warp: gmem -> smem -> registers -> mma.sync -> smem -> gmem.

``cp.async`` (16 bytes a lane) moves A (M x K) and Bt (N x K), both K-major, into
32-byte-swizzled shared memory; ``ldmatrix`` x4 / x2 loads the A and B fragments of a register
MMA; the MMA runs; ``stmatrix`` x2 writes the 16 x 8 16-bit result to shared memory, and
16-byte loads/stores copy it to global memory.  Every address is the layout algebra's:

* global: the row-major tile composed with the lane -> (row, 16-byte chunk) layout;
* shared: the swizzled tile of ``nvatom.atoms.smem.smem_layout`` composed with the same, and
  for ldmatrix/stmatrix with the lane -> row-address layout of
  ``nvatom.atoms.copy.row_addresses`` (which exists only when the copy atom produces the MMA's
  fragment: ``ldsm_matches_mma``).

Element types: f16 (f16 accumulation), bf16 (f32 accumulation, rounded to bf16 with
``cvt.rn.bf16x2.f32`` before stmatrix) and e4m3 (m16n8k32, f16 accumulation, sm_89+).
"""

from __future__ import annotations

import dataclasses

from nvatom.arch import Target, target
from nvatom.atoms.copy import copy_atom, ldsm_matches_mma, row_addresses
from nvatom.atoms.mma import MmaForm
from nvatom.atoms.registry import mma_form
from nvatom.atoms.smem import smem_layout
from nvatom.layout import Layout, composition, right_inverse
from nvatom.ptx import copy_emit, mma_emit, sync_emit
from nvatom.ptx.builder import Kernel, Module, Reg
from nvatom.ptx.layout_eval import emit_composed_offset

__all__ = ["PIPELINES", "Pipeline", "build_pipeline_module"]


@dataclasses.dataclass(frozen=True)
class Pipeline:
    dtype: str
    mma: str  # register MMA atom name
    out_form: str  # a form with a 16-bit D of the same geometry (for the stmatrix addresses)

    @property
    def form(self) -> MmaForm:
        return mma_form(self.mma)


PIPELINES = {
    p.dtype: p
    for p in (
        Pipeline("f16", "sm80.mma.m16n8k16.f16.f16.f16.f16", "sm80.mma.m16n8k16.f16.f16.f16.f16"),
        Pipeline("bf16", "sm80.mma.m16n8k16.f32.bf16.bf16.f32",
                 "sm80.mma.m16n8k16.f16.f16.f16.f16"),
        Pipeline("e4m3", "sm89.mma.m16n8k32.f16.e4m3.e4m3.f16",
                 "sm89.mma.m16n8k32.f16.e4m3.e4m3.f16"),
    )
}

_CHUNK = 16  # bytes per cp.async and per ldmatrix/stmatrix row
_SWIZZLE = 32  # the tiles have 32-byte rows


def _shared_base(k: Kernel, name: str, nbytes: int) -> Reg:
    k.shared(name, nbytes, align=128)
    base = k.reg("u32")
    k.ins("mov.u32", base, name)
    return base


def _add64(k: Kernel, base: Reg, off32: Reg) -> Reg:
    off, out = k.reg("u64"), k.reg("u64")
    k.ins("cvt.u64.u32", off, off32)
    k.ins("add.s64", out, base, off)
    return out


def _add32(k: Kernel, base: Reg, off: Reg) -> Reg:
    out = k.reg("u32")
    k.ins("add.u32", out, base, off)
    return out


def _copy_tile_in(k: Kernel, lane: Reg, gbase: Reg, sbase: Reg, rows: int, cols: int,
                  esize: int) -> None:
    """cp.async a rows x cols K-major tile: lane -> (row, 16-byte chunk), wrapping over lanes."""
    per_chunk = _CHUNK // esize
    chunks = rows * cols // per_chunk
    # lane -> column-major (row, col) index: lane % 2 picks the chunk, lane // 2 the row;
    # lanes beyond the tile's chunks repeat it (stride 0), storing identical bytes.
    half = cols // per_chunk
    reps = 32 // chunks
    lane_to_coord = Layout((half, rows, reps), (rows * per_chunk, 1, 0))
    gmem = composition(Layout((rows, cols), (cols, 1)), lane_to_coord)
    smem = composition(smem_layout(rows, cols, esize * 8, "K", _SWIZZLE), lane_to_coord)
    src = _add64(k, gbase, emit_composed_offset(k, gmem, lane, scale=esize))
    dst = _add32(k, sbase, emit_composed_offset(k, smem, lane, scale=esize))
    copy_emit.emit_cp_async(k, copy_atom("atom.simt_async_copy<16>"), dst, src)


def _row_address(k: Kernel, lane: Reg, sbase: Reg, atom_name: str, form: MmaForm | str,
                 operand: str, tile: Layout | object, rows: int, cols: int, esize: int) -> Reg:
    atom = copy_atom(atom_name)
    rowmajor = Layout((rows, cols), (cols, 1))
    # lane -> row-major offset in the dense tile -> (row, col) index -> shared-memory offset
    major = "N" if operand == "D" else "K"  # row-major tiles: A and B K-major, D N-major
    lane_coord = composition(right_inverse(rowmajor), row_addresses(atom, form, operand, major))
    addr = emit_composed_offset(k, composition(tile, lane_coord), lane, scale=esize)
    return _add32(k, sbase, addr)


def build_pipeline_module(dtype: str, target_: Target | str) -> Module:
    """Kernel ``copy_pipeline(A, Bt, D)``: D (16 x 8, 16-bit, row-major) = A @ Bt^T."""
    p = PIPELINES[dtype]
    form = p.form
    t = target(target_)
    ld_a, ld_b, st_d = (copy_atom(n) for n in
                        ("atom.ldsm<m8n8.x4>", "atom.ldsm<m8n8.x2>", "atom.stsm<m8n8.x2>"))
    if not (ldsm_matches_mma(ld_a, form, "A", major="K")
            and ldsm_matches_mma(ld_b, form, "B", major="K")):
        raise ValueError(f"ldmatrix does not produce the fragments of {form.name}")
    features = [form.feature, "cp.async", "ldmatrix", "stmatrix"]
    version = max(form.ptx_version_for(t), *(a.ptx_version_for(t) for a in (ld_a, ld_b, st_d)))
    mod = Module(t, features=features, version=version)
    k = mod.kernel("copy_pipeline")
    k.maxntid = (32, 1, 1)
    esize = form.a.storage_bits // 8
    m, n, kk = form.m, form.n, form.k
    g = {}
    for name in ("A", "Bt", "D"):
        raw = k.ld_param(k.param(name))
        g[name] = k.reg("u64")
        k.ins("cvta.to.global.u64", g[name], raw)
    s_a = _shared_base(k, "smem_a", m * kk * esize)
    s_b = _shared_base(k, "smem_b", n * kk * esize)
    s_d = _shared_base(k, "smem_d", m * n * 2)
    lane = k.reg("u32")
    k.ins("mov.u32", lane, "%laneid")

    k.comment("gmem -> smem: cp.async 16 B per lane into 32-byte-swizzled tiles")
    _copy_tile_in(k, lane, g["A"], s_a, m, kk, esize)
    _copy_tile_in(k, lane, g["Bt"], s_b, n, kk, esize)
    copy_emit.emit_commit_group(k)
    copy_emit.emit_wait_group(k, 0)
    k.ins("bar.sync", 0)

    k.comment("smem -> registers: ldmatrix x4 (A) and x2 (B)")
    regs = mma_emit.alloc_mma_registers(k, form)
    tile_a = smem_layout(m, kk, esize * 8, "K", _SWIZZLE)
    tile_b = smem_layout(n, kk, esize * 8, "K", _SWIZZLE)
    a_addr = _row_address(k, lane, s_a, ld_a.name, form, "A", tile_a, m, kk, esize)
    b_addr = _row_address(k, lane, s_b, ld_b.name, form, "B", tile_b, n, kk, esize)
    copy_emit.emit_matrix_copy(k, ld_a, regs.a, a_addr)
    copy_emit.emit_matrix_copy(k, ld_b, regs.b, b_addr)
    zero = "0f00000000" if form.register_type("C") == "f32" else 0
    for r in regs.c:
        k.ins(f"mov.{'f32' if form.register_type('C') == 'f32' else 'b32'}", r, zero)
    mma_emit.emit_mma(k, form, regs.d, regs.a, regs.b, regs.c)

    k.comment("registers -> smem: stmatrix x2 of the 16-bit result")
    if form.d.name == "f16":
        out = regs.d
    else:  # f32 accumulators: round pairs to bf16 (cvt packs its first source high)
        out = [sync_emit.cvt_pack_f32(k, "bf16", regs.d[2 * j + 1], regs.d[2 * j],
                                      target=target_) for j in range(2)]
    d_addr = _row_address(k, lane, s_d, st_d.name, p.out_form, "D", Layout((m, n), (n, 1)),
                          m, n, 2)
    copy_emit.emit_matrix_copy(k, st_d, out, d_addr)
    k.ins("bar.sync", 0)

    k.comment("smem -> gmem: 16 B per lane (lanes 16-31 repeat 0-15)")
    chunk = k.reg("u32")
    k.ins("and.b32", chunk, lane, 15)
    k.ins("shl.b32", chunk, chunk, 4)
    v = k.regs("b32", 4)
    k.ins("ld.shared.v4.b32", v, f"[{_add32(k, s_d, chunk)}]")
    k.ins("st.global.v4.b32", f"[{_add64(k, g['D'], chunk)}]", v)
    return mod
