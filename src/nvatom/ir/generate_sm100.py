"""Generated IR uses of the SM100 tcgen05 atoms (issue 16's invariant; nvatom.ir.generate).

* ``umma`` (every ``sm100.mma*`` atom): A (``ss``) and B as descriptor views of the atom's
  canonical shared-memory tile per CTA (``UmmaAtom.smem_layout`` with the widest swizzle
  the operand takes whose tile fits :data:`TILE_BYTES`), A (``ts``), D, the scale factors
  and the sparse metadata as TMEM buffers of the columns the atom's layouts take
  (nvatom.ir.tcgen05.operand_extent), one ``cute_nvgpu.atom.mma`` (``accumulate =
  false``), ``umma_commit`` to an mbarrier and the wait; a ``cta_group::2`` atom's kernel
  declares a cluster of two CTAs.
* ``tmem`` (``atom.tmem_load``/``tmem_store``: a TMEM buffer of the atom's columns and a
  register fragment of its registers, 32-bit elements or 16-bit ones with ``.pack::16b``;
  ``atom.s2t_copy``: a K-major no-swizzle shared tile of the copy's rows and row bytes,
  ue8m0 -- the scale-factor copies -- and a TMEM buffer, then commit and wait).

Source: tests/ir/umma_sm100.mlir; nvatom.atoms.sm100 and nvatom.atoms.tmem for every layout.
"""

from __future__ import annotations

from typing import Any

from nvatom.arch import Target
from nvatom.atoms.smem import smem_layout, smem_swizzle
from nvatom.ir.syntax import layout_text
from nvatom.ir.tcgen05 import extents, operand_extent, s2t_extent
from nvatom.layout import cosize

__all__ = ["tmem_use", "umma_use"]

_COMMIT = ["  %bar = cute_nvgpu.arch.mbarrier_init {count = 1}",
           "  cute_nvgpu.arch.umma_commit %bar",
           "  %c0 = arith.constant 0 : i32",
           "  cute_nvgpu.arch.mbarrier_wait %bar, %c0"]


def _type_of(atom: Any) -> str:
    body = atom.name[len(atom.mnemonic):].lstrip(".").replace("<", "").replace(">", "")
    return f"!cute_nvgpu.{atom.mnemonic}<{body}>"


def _buffer(elem: str, columns: int) -> str:
    return f"!cute.memref<{elem}, tmem, (128,{columns}):({columns},1)>"


def _module(t: Target, body: list[str], cluster: bool = False, args: str = "") -> str:
    attrs = " attributes {cluster = [2, 1, 1]}" if cluster else ""
    text = "\n".join(body)
    return (f'builtin.module attributes {{nvatom.target = "{t.name}"}} {{\n'
            f"func.func @use({args}){attrs} {{\n{text}\n  func.return\n}}\n}}\n")


#: bytes of shared memory one generated operand tile may take: A and B together stay under the
#: 48 KB of static shared memory (the widest swizzle whose tile fits)
TILE_BYTES = 22 * 1024


def _smem_tile(atom: Any, op: str) -> Any:
    legal = atom.smem_swizzles(op)
    want = (atom.smem_rows(op), atom.stored_k(op))
    for sw in reversed(legal):  # the widest that fits and spans exactly the operand's tile
        lay = atom.smem_layout(op, sw)
        if cosize(lay) * atom.element_bits(op) // 8 <= TILE_BYTES and extents(lay) == want:
            return lay
    return atom.smem_layout(op, legal[0])


def umma_use(atom: Any, t: Target) -> str:
    lines = [f"  %atom = cute_nvgpu.make_atom : {_type_of(atom)}"]
    for op, elem in (("A", atom.a.name), ("B", atom.b.name)):
        v = op.lower()
        if op == "A" and atom.a_source == "ts":
            cols = operand_extent(atom, "A")[1]
            lines.append(f"  %{v} = cute.alloc_tmem : {_buffer(elem, cols)}")
            continue
        lay = layout_text(_smem_tile(atom, op))
        major = atom.a_major if op == "A" else atom.b_major
        lines.append(f"  %s{v} = cute.alloc_smem : !cute.memref<{elem}, smem, {lay}>")
        lines.append(f"  %{v} = cute_nvgpu.make_smem_desc %s{v} : "
                     f"!cute_nvgpu.smem_desc_view<{elem}, {major}, {lay}>")
    lines.append(f"  %d = cute.alloc_tmem : {_buffer(atom.d.name, operand_extent(atom, 'D')[1])}")
    extra = ""
    if atom.block_scaled:
        for op in ("SFA", "SFB"):
            cols = operand_extent(atom, op)[1]
            lines.append(f"  %{op.lower()} = cute.alloc_tmem : {_buffer(atom.sf.name, cols)}")
        extra += ", %sfa, %sfb"
    if atom.sparse:
        lines.append(f"  %e = cute.alloc_tmem : {_buffer('u8', operand_extent(atom, 'E')[1])}")
        extra += ", %e"
    lines.append(f"  cute_nvgpu.atom.mma %atom, %d, %a, %b, %d{extra} {{accumulate = false}}")
    return _module(t, lines + _COMMIT, cluster=atom.cta_group == 2)


def tmem_use(atom: Any, t: Target) -> str:
    lines = [f"  %atom = cute_nvgpu.make_atom : {_type_of(atom)}"]
    if atom.mnemonic == "atom.s2t_copy":
        rows = max(atom.rows, 8)  # the descriptor's 8-row core matrices
        lay = layout_text(smem_layout(rows, atom.columns * 4, 8, "K",
                                      smem_swizzle("INTERLEAVE")))  # ue8m0: a byte each
        lines += [f"  %s = cute.alloc_smem : !cute.memref<ue8m0, smem, {lay}>",
                  f"  %t = cute.alloc_tmem : {_buffer('ue8m0', s2t_extent(atom)[1])}",
                  "  cute_nvgpu.atom.copy %atom, %s, %t", *_COMMIT]
        return _module(t, lines, cluster=atom.cta_group == 2)
    elem = "f16" if atom.pack16 else "f32"
    values = atom.registers * (2 if atom.pack16 else 1)
    frag = f"!cute.memref<{elem}, rmem, (32,{values}):({values},1)>"
    lines += [f"  %t = cute.alloc_tmem : {_buffer(elem, atom.columns)}",
              f"  %r = cute.alloc_rmem : {frag}"]
    src, dst = ("%t", "%r") if atom.direction == "load" else ("%r", "%t")
    lines.append(f"  cute_nvgpu.atom.copy %atom, {src}, {dst}")
    return _module(t, lines)
