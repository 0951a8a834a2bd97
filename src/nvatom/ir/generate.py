"""Minimal IR uses of every registry atom, generated from the registry (issue 16's invariant).

For an atom of :data:`nvatom.atoms.registry.FAMILIES` and a target, :func:`atom_use` writes the
smallest ``.mlir`` module that makes the atom (``cute_nvgpu.make_atom``) and applies it
(``cute_nvgpu.atom.mma``) on that target, with each operand a register fragment whose layout is
the atom's own (thread, value) layout (the family's ``fragment`` view), and stores D, so the
lowering has an observable result.  The invariant test (tests/ir/test_ir_invariant.py) and the
whole sweep (scripts/ir_invariant_sweep.py) verify each module and, where it verifies, lower it
and assemble the PTX with ptxas: an atom use either fails ``verify`` with a known diagnostic or
compiles.  The SM100 families (``umma``, ``tmem``: descriptor views and TMEM buffers) are
written by :mod:`nvatom.ir.generate_sm100`.  A family this module does not generate uses for
is named in :data:`NOT_GENERATED` with the reason (docs/ir.md, "The invariant").

Source: the IR examples of tests/ir (mma_sm80.mlir, sm120_block_scaled.mlir) and the
specification's operand contract of ``cute_nvgpu.atom.mma`` (register fragments by tier).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

from nvatom.arch import TARGETS, Target, target
from nvatom.atoms import registry as R
from nvatom.ir import generate_sm100 as G
from nvatom.ir.generate_forms import TMA_FORMS, copy_use, tma_use
from nvatom.ir.syntax import layout_text
from nvatom.layout import size

__all__ = ["NOT_GENERATED", "AtomUse", "atom_named", "atom_use", "atom_uses", "cases"]

#: Families with no generated use yet, and why (each is a gap of the invariant, not a pass).
NOT_GENERATED: dict[str, str] = {
}


@dataclasses.dataclass(frozen=True)
class AtomUse:
    """One generated use: the family, the atom's name, the target and the module text."""

    family: str
    atom: str
    target: str
    text: str


def _type_of(fam: R.AtomFamily, atom: Any) -> str:
    body = atom.name[len(atom.mnemonic):].lstrip(".").replace("<", "").replace(">", "")
    return f"!cute_nvgpu.{atom.mnemonic}<{body}>"


def _mma_use(fam: R.AtomFamily, atom: Any, t: Target) -> str:
    def frag(op: str, elem: str) -> str:
        return f"!cute.memref<{elem}, rmem, {layout_text(fam.fragment(atom, op))}>"

    name = lambda op: atom.operand_type(op).name if hasattr(atom, "operand_type") \
        else atom.element_type.name  # noqa: E731
    lines = [f"  %atom = cute_nvgpu.make_atom : {_type_of(fam, atom)}"]
    for op in ("A", "B", "C", "D"):
        lines.append(f"  %{op.lower()} = cute.alloc_rmem : {frag(op, name(op))}")
    extra = ""
    if getattr(atom, "block_scaled", False) or R.ATOMS[atom.mnemonic].interfaces.count(
            "BlockScaleAtom"):
        sf = atom.sf_type.name if hasattr(atom, "sf_type") else atom.scale_type.name
        for op in ("SFA", "SFB"):
            lines.append(f"  %{op.lower()} = cute.alloc_rmem : {frag(op, sf)}")
        extra += ", %sfa, %sfb"
    if getattr(atom, "is_sparse", False):
        md = atom.metadata_layout(atom.selectors[0])
        lines.append(f"  %e = cute.alloc_rmem : !cute.memref<s32, rmem, {layout_text(md.layout)}>")
        extra += ", %e"
    m, n, _ = atom.shape_mnk if hasattr(atom, "shape_mnk") else atom.shape
    d_layout = f"({m},{n}):({n},1)"
    lines.append(f"  cute_nvgpu.atom.mma %atom, %d, %a, %b, %c{extra}")
    # D is stored with copy_fragment, which takes warp-wide atoms (not the one-thread
    # universal FMA, nor SM70's quad-pair m8n8k4, whose D spreads over 8 threads)
    if size(fam.fragment(atom, "D")[0]) == 32:
        lines.append(f"  %gd = cute.make_view %pd : !cute.memref<{name('D')}, gmem, {d_layout}>")
        lines.append('  cute_nvgpu.atom.copy_fragment %atom, %d, %gd {operand = "D"}')
    body = "\n".join(lines)
    head = f"func.func @use(%pd: !cute.ptr<{name('D')}, gmem>) {{"
    return (f'builtin.module attributes {{nvatom.target = "{t.name}"}} {{\n'
            f"{head}\n{body}\n  func.return\n}}\n}}\n")


def _k_major_tile(elem: str, bits: int, rows: int) -> str:
    """A K-major ``rows`` x (128 bytes) tile with the 128-byte swizzle, in element units
    (``Sw<3,4,3>`` for 8-bit elements, ``Sw<3,3,3>`` for 16-bit: docs/ir.md, "Known gaps";
    ``Sw<3,7,3>`` over 1024 bits for b1: "b1 WGMMA tiles")."""
    kt = 1024 // bits
    return f"Sw<3,{(128 // bits).bit_length() - 1},3> o 0 o ({rows},{kt}):({kt},1)"


def _wgmma_use(fam: R.AtomFamily, atom: Any, t: Target) -> str:
    """sm90 WGMMA: A (``ss``) and B as descriptor views of 128-byte-swizzled K-major shared
    tiles of one 128-byte K row (several K-blocks of the atom), or A (``rs``) a register
    fragment; the fence -> mma -> commit -> wait protocol; D stored with copy_fragment."""
    bits = atom.a.pack_bits
    lines = [f"  %wg = cute_nvgpu.make_atom : {_type_of(fam, atom)}"]
    ops = {}
    for op, rows, elem in (("a", atom.m, atom.a.name), ("b", atom.n, atom.b.name)):
        if op == "a" and atom.a_source != "ss":
            lines.append(f"  %da = cute.alloc_rmem : !cute.memref<{elem}, rmem, "
                         f"{layout_text(fam.fragment(atom, 'A'))}>")
            continue
        tile = _k_major_tile(elem, bits, rows)
        lines.append(f"  %s{op} = cute.alloc_smem : !cute.memref<{elem}, smem, {tile}>")
        lines.append(f"  %d{op} = cute_nvgpu.make_smem_desc %s{op} : "
                     f"!cute_nvgpu.smem_desc_view<{elem}, K, {tile}>")
        ops[op] = tile
    d = atom.d.name
    lines += [f"  %acc = cute.alloc_rmem : !cute.memref<{d}, rmem, "
              f"{layout_text(fam.fragment(atom, 'D'))}>",
              "  cute_nvgpu.warpgroup.fence",
              "  cute_nvgpu.atom.mma %wg, %acc, %da, %db, %acc",
              "  cute_nvgpu.warpgroup.commit_group",
              "  cute_nvgpu.warpgroup.wait {pending = 0}",
              f"  %gd = cute.make_view %pd : !cute.memref<{d}, gmem, "
              f"({atom.m},{atom.n}):({atom.n},1)>",
              '  cute_nvgpu.atom.copy_fragment %wg, %acc, %gd {operand = "D"}']
    body = "\n".join(lines)
    return (f'builtin.module attributes {{nvatom.target = "{t.name}"}} {{\n'
            f"func.func @use(%pd: !cute.ptr<{d}, gmem>) {{\n{body}\n  func.return\n}}\n}}\n")


def atom_use(fam: R.AtomFamily, atom: Any, target_: Target | str) -> AtomUse:
    """The minimal module that makes ``atom`` and applies it on ``target_``."""
    t = target(target_)
    if fam.name in NOT_GENERATED:
        raise NotImplementedError(f"{fam.name}: {NOT_GENERATED[fam.name]}")
    if fam.name in ("umma", "tmem"):  # SM100 tcgen05 (nvatom.ir.generate_sm100)

        make_sm100 = G.umma_use if fam.name == "umma" else G.tmem_use
        return AtomUse(fam.name, atom.name, t.name, make_sm100(atom, t))

    make = {"wgmma": _wgmma_use, "copy": copy_use, "tma": tma_use}.get(fam.name, _mma_use)
    return AtomUse(fam.name, atom.name, t.name, make(fam, atom, t))


def cases() -> list[tuple[R.AtomFamily, Any, str]]:
    """Every (family, atom, target) of the generated families, in a stable order."""
    out = []
    for fam in R.FAMILIES:
        if fam.name in NOT_GENERATED:
            continue

        # TMA atoms are made from a tensor map, not named: the family's uses are its forms
        for atom in TMA_FORMS if fam.name == "tma" else fam.atoms(None):
            for t in TARGETS:
                out.append((fam, atom, t))
    return out


def atom_named(fam: R.AtomFamily, name: str) -> Any:
    """The atom of ``fam`` called ``name`` (a TMA form of ``TMA_FORMS`` for the ``tma``
    family, whose atoms have no table): the inverse of ``cases()``'s names."""
    if fam.name == "tma":
        return next(f for f in TMA_FORMS if f.name == name)
    return fam.atom(name)


def atom_uses() -> Iterator[AtomUse]:
    for fam, atom, t in cases():
        yield atom_use(fam, atom, t)
