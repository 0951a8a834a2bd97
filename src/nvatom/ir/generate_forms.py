"""Generated IR uses of the ``copy`` and ``tma`` families (issue 16's invariant).

``copy``: one kernel per copy atom of the table (``nvatom.atoms.copy.COPY_ATOMS``), with
memory operands per atom:

* ldmatrix/stmatrix: the atom's reference shared-memory layout and its register layout, in
  the format's element type (``b16`` f16, ``b8`` u8, ``b6x16_p32`` e3m2, ``b4x16_p64`` e2m1);
* cp.async: 32 lanes, each a vector of ``nbytes`` of f32 from global to shared memory, then
  commit and wait;
* universal copies: global -> shared memory, and, for 32- and 64-bit elements, shared memory
  -> registers -> global memory (one access per thread, the access's element type).

``tma``: TMA atoms are made from a tensor map (``nv_tileas.make_tiled_tma_desc``), not
named, so the family's uses are the forms of :data:`TMA_FORMS`: every load mode (the
specification's four and nvatom's ``im2col``/``gather4``), both load destinations
(``shared::cluster``, ``shared::cta``), a multicast load, every store mode and every
reduction, the bulk tensor prefetch of every load mode, ``prefetch_tma_desc``, and the
partition op (``atom.tma_partition``) for each direction.  Each form is a whole kernel:
descriptor, partition, ``make_exec_tma`` with its mbarrier, the transfer (and for loads the
wait on the barrier).

Source: tests/ir/test_ir_copy.py (the copy kernels) and the TMA examples of tests/ir
(tma_copy.mlir, tma_modes.mlir, tma_sm100.mlir).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from nvatom.arch import Target
from nvatom.atoms.copy import MatrixCopy, SimtAsyncCopy

__all__ = ["TMA_FORMS", "TmaForm", "copy_use", "tma_use"]

# the element type of a matrix copy's format
_FORMAT_ELEMENT = {"b16": "f16", "b8": "u8", "b8x16.b6x16_p32": "e3m2",
                   "b8x16.b4x16_p64": "e2m1"}
# the element type of a universal copy's access width
_ELEMENT = {8: "u8", 16: "f16", 32: "f32", 64: "f64"}


def _module(t: Target, args: str, body: list[str]) -> str:
    return (f'builtin.module attributes {{nvatom.target = "{t.name}"}} {{\n'
            f"func.func @use({args}) {{\n" + "\n".join(body) + "\n  func.return\n}\n}\n")


def _atom_type(atom: Any) -> str:
    body = atom.name.removeprefix(atom.mnemonic)
    body = body[1:-1] if body.endswith(">") else body[1:].replace(">", "", 1)
    return f"!cute_nvgpu.{atom.mnemonic}<{body}>"


def copy_use(fam: Any, atom: Any, t: Target) -> str:
    """The module applying copy atom ``atom`` on ``t`` (module docstring)."""

    body = [f"  %atom = cute_nvgpu.make_atom : {_atom_type(atom)}"]
    if isinstance(atom, MatrixCopy):
        e = _FORMAT_ELEMENT[atom.fmt.spelling]
        eb = atom.fmt.reg_bits
        src, dst = ("%s", "%r") if atom.op == "ldmatrix" else ("%r", "%s")
        body += [f"  %s = cute.alloc_smem : !cute.memref<{e}, smem, {atom.smem_layout(eb)}>",
                 f"  %r = cute.alloc_rmem : !cute.memref<{e}, rmem, "
                 f"{atom.register_layout(eb)}>",
                 f"  cute_nvgpu.atom.copy %atom, {src}, {dst}"]
        return _module(t, f"%p: !cute.ptr<{e}, gmem>", body)
    if isinstance(atom, SimtAsyncCopy):
        n = atom.nbytes // 4
        lay = f"(32,{n}):({n},1)" if n > 1 else "32:1"
        body += [f"  %g = cute.make_view %p : !cute.memref<f32, gmem, {lay}>",
                 f"  %s = cute.alloc_smem : !cute.memref<f32, smem, {lay}>",
                 "  cute_nvgpu.atom.copy %atom, %g, %s",
                 "  cute_nvgpu.arch.cp_async_commit_group",
                 "  cute_nvgpu.arch.cp_async_wait_group {pending = 0}"]
        return _module(t, "%p: !cute.ptr<f32, gmem>", body)
    eb = atom.vector_access.elem
    e = _ELEMENT[eb]
    n = atom.bits // eb
    lay = f"(32,{n}):({n},1)" if n > 1 else "32:1"
    body += [f"  %g = cute.make_view %p : !cute.memref<{e}, gmem, {lay}>",
             f"  %s = cute.alloc_smem : !cute.memref<{e}, smem, {lay}>",
             "  cute_nvgpu.atom.copy %atom, %g, %s"]
    if eb >= 32:  # through a register fragment, back to global memory
        body += [f"  %o = cute.make_view %q : !cute.memref<{e}, gmem, {lay}>",
                 f"  %r = cute.alloc_rmem : !cute.memref<{e}, rmem, {lay}>",
                 "  cute_nvgpu.atom.copy %atom, %s, %r",
                 "  cute_nvgpu.atom.copy %atom, %r, %o"]
    return _module(t, f"%p: !cute.ptr<{e}, gmem>, %q: !cute.ptr<{e}, gmem>", body)


# --------------------------------------------------------------------------- TMA
@dataclasses.dataclass(frozen=True)
class TmaForm:
    """One TMA use: ``op`` is load, store, reduce, prefetch (the bulk tensor prefetch) or
    prefetch_desc; ``mode`` the mode attribute's text; ``geometry`` "2d", "3d" (im2col) or
    "rows" (four rows: gather4/scatter4)."""

    name: str
    op: str
    mode: str
    geometry: str = "2d"
    element: str = "f16"
    dst_space: str | None = None
    multicast: int = 1
    partition_op: bool = False  # written with atom.tma_partition

    @property
    def mnemonic(self) -> str:
        return "atom.tma_" + self.op if self.op in ("load", "store", "reduce") else self.op


_LOAD_MODES = (("tiled", "2d"), ("two_cta", "2d"), ("w_multicast", "3d"),
               ("w128_multicast", "3d"), ("im2col", "3d"), ("gather4", "rows"))
_STORE_MODES = (("tiled", "2d"), ("im2col", "3d"), ("im2col_w", "3d"), ("im2col_w128", "3d"),
                ("scatter4", "rows"))
# each reduction on an element type it is defined on (nvatom.atoms.tma.REDUCE_TYPES)
# (the IR has no u32 element type: inc and dec, defined on uint32 only, are rejected)
_REDUCTIONS = (("add", "f16"), ("min", "f16"), ("max", "f16"), ("inc", "s32"),
               ("dec", "s32"), ("and", "s32"), ("or", "s32"), ("xor", "s32"))

#: every TMA form the invariant covers
TMA_FORMS: tuple[TmaForm, ...] = (
    *(TmaForm(f"tma.load.{m}", "load", m, g) for m, g in _LOAD_MODES),
    *(TmaForm(f"tma.load.{m}.shared::cta", "load", m, g, dst_space="shared::cta")
      for m, g in _LOAD_MODES),
    TmaForm("tma.load.tiled.multicast2", "load", "tiled", multicast=2),
    TmaForm("tma.load.tiled.multicast2.shared::cta", "load", "tiled", multicast=2,
            dst_space="shared::cta"),
    *(TmaForm(f"tma.store.{m}", "store", m, g) for m, g in _STORE_MODES),
    *(TmaForm(f"tma.reduce.{k}", "reduce", k, element=e) for k, e in _REDUCTIONS),
    *(TmaForm(f"tma.prefetch_tensor.{m}", "prefetch", m, g) for m, g in _LOAD_MODES),
    TmaForm("prefetch_tma_desc", "prefetch_desc", "tiled"),
    TmaForm("tma.partition.load.tiled", "load", "tiled", partition_op=True),
    TmaForm("tma.partition.load.im2col", "load", "im2col", "3d", partition_op=True),
    TmaForm("tma.partition.store.tiled", "store", "tiled", partition_op=True),
    TmaForm("tma.partition.reduce.add", "reduce", "add", partition_op=True),
)

# geometry -> (GMEM layout, shapes, strides, SMEM tile, CTA V-map, coordinates)
_GEOMETRY = {
    "2d": ("(n,m):(1,ld)", "%a, %b", "%sb", "Sw<3,4,3> o 0 o (8,64):(64,1)",
           "(8,64):(1@1,1@0)", 2),
    "3d": ("(a,b,c):(1,sb,sc)", "%a, %b, %c", "%sb, %sc", "Sw<3,4,3> o 0 o (64,8,1):(1,64,512)",
           "(64,8,1):(1@0,1@1,1@2)", 3),
    "rows": ("(n,m):(1,ld)", "%a, %b", "%sb", "Sw<3,4,3> o 0 o (4,64):(64,1)",
             "(4,64):(1@1,1@0)", 2),
}
_BITS = {"f16": 16, "s32": 32}


def tma_use(fam: Any, form: TmaForm, t: Target) -> str:
    """The module of one TMA form on ``t`` (module docstring)."""
    gl, shapes, strides, tile, vmap, rank = _GEOMETRY[form.geometry]
    if _BITS[form.element] == 32:  # one 128-byte swizzle row: 32 elements
        tile, vmap = tile.replace("64", "32"), vmap.replace("64", "32")
    gl = gl.replace("n,m", "a,b").replace("ld", "sb")
    e = form.element
    if form.op in ("load", "prefetch", "prefetch_desc"):
        mode_attr = f"#cute_nvgpu.tma_load_mode<{form.mode}>"
    elif form.op == "store":
        mode_attr = f"#cute_nvgpu.tma_store_mode<{form.mode}>"
    else:
        mode_attr = "#cute_nvgpu.tma_store_mode<tiled>"
    desc_kind = "im2col" if "im2col" in form.mode or form.mode.startswith("w") else "tiled"
    args = (f"%src: !cute.ptr<{e}, gmem>, %a: i32, %b: i32, %c: i32, %sb: i32, %sc: i32, "
            "%x: i32, %y: i32, %z: i32, %w: i32, %v: i32, %h: i32, %o: i32")
    body = [f"  %gl = cute.static : !cute.layout<{gl}>",
            f"  %d = nv_tileas.make_tiled_tma_desc %src, %gl shapes({shapes}) "
            f"strides({strides}) paddings() {{mode = {mode_attr}, "
            f"elementBitWidth = {_BITS[e]}}} : !cute_nvgpu.tma_descriptor_{desc_kind}"]
    if form.op == "prefetch_desc":
        return _module(t, args, [*body, "  cute_nvgpu.prefetch_tma_desc %d"])
    body += [f"  %tile = cute.static : !cute.composed_layout<{tile}>",
             f"  %vmap = cute.static : !cute.layout<{vmap}>"]
    direction = "load" if form.op == "prefetch" else form.op
    if form.partition_op:
        key = {"load": "tma_load_mode", "store": "tma_store_mode", "reduce": "kind"}[direction]
        attr = {"load": f"#cute_nvgpu.tma_load_mode<{form.mode}>",
                "store": f"#cute_nvgpu.tma_store_mode<{form.mode}>",
                "reduce": f"#cute_nvgpu.tma_reduce_kind<{form.mode}>"}[direction]
        mc = f", num_multicast = {form.multicast}" if direction == "load" else ""
        body.append(f"  %atom = cute_nvgpu.atom.tma_partition %d, %tile, %vmap "
                    f"{{{key} = {attr}{mc}}}")
    elif direction == "load":
        body.append(f"  %atom = cute_nvgpu.atom.non_exec_tiled_tma_load %d, %tile, %vmap "
                    f"{{num_multicast = {form.multicast}}}")
    elif direction == "store":
        body.append("  %atom = cute_nvgpu.atom.non_exec_tiled_tma_store %d, %tile, %vmap")
    else:
        body.append("  %atom = cute_nvgpu.atom.non_exec_tiled_tma_reduce %d, %tile, %vmap "
                    f"{{kind = #cute_nvgpu.tma_reduce_kind<{form.mode}>}}")
    n_coords = 5 if form.geometry == "rows" else rank
    coords = ", ".join(["%x", "%y", "%z", "%w", "%v"][:n_coords])
    body.append(f"  %coord = cute.make_coord {coords}")
    offsets = {"w_multicast": ", %h, %o", "w128_multicast": ", %h, %o", "im2col": ", %h"}
    off = offsets.get(form.mode, "") if direction == "load" else ""
    if form.op == "prefetch":
        body.append(f"  cute_nvgpu.prefetch_tma_tensor %atom, %coord{off}")
        return _module(t, args, body)
    smem = f"  %smem = cute.alloc_smem : !cute.memref<{e}, smem, {tile}>"
    if direction == "load":
        mask = ' {multicast_mask = 3}' if form.multicast > 1 else ""
        dst = f' {{dst_space = "{form.dst_space}"}}' if form.dst_space else ""
        body += ["  %bar = cute_nvgpu.arch.mbarrier_init {count = 1}",
                 f"  %exec = cute_nvgpu.atom.make_exec_tma %atom, %bar{mask}", smem,
                 f"  cute_nvgpu.atom.tma_load %exec, %smem, %coord{off}{dst}",
                 "  %c0 = arith.constant 0 : i32",
                 "  cute_nvgpu.arch.mbarrier_wait %bar, %c0"]
    else:
        body += ["  %exec = cute_nvgpu.atom.make_exec_tma %atom", smem,
                 f"  cute_nvgpu.atom.tma_{direction} %exec, %smem, %coord"]
    return _module(t, args, body)
