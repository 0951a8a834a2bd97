"""``nvatom`` subcommand parts for the SM120/SM121 atoms (docs/sm120.md).

* ``nvatom atoms --sm120 [--target T] [--a A --b B --acc C --sf S] [--json]``: the
  ``SM120.mma_bs`` forms and the unscaled ``sm120.mma`` / ``sm120.sparse_mma`` forms;
* ``nvatom frag SM120.mma_bs... --operand A|B|C|D|SFA|SFB``: a fragment, or for SFA/SFB which
  lane's register byte holds each scale factor, for the name's selectors (suffix
  ``.sfa_b<byte-id>t<thread-id>.sfb_b<byte-id>t<thread-id>``);
* ``nvatom emit SM120.mma_bs... --target T [--asm-template | --kernel [--assemble]]``.

The unscaled ``sm120.mma...`` names go through the generic register-MMA paths of
:mod:`nvatom.cli.atoms` (nvatom.atoms.registry.mma_form resolves them).
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from nvatom.arch import TARGETS, feature
from nvatom.atoms import sm120
from nvatom.cli.common import (
    atom_on_target,
    emit_warp_mma,
    show_fragment,
    show_warp_fragment,
    ver,
)
from nvatom.dtypes import dtype
from nvatom.errors import NvatomError
from nvatom.ptx import sm120_emit

__all__ = ["add_options", "cmd_atoms", "cmd_emit", "cmd_frag", "handles"]


def add_options(atoms: argparse.ArgumentParser) -> None:
    atoms.add_argument("--sm120", action="store_true",
                       help="list the SM120/SM121 atoms (SM120.mma_bs, kind::f8f6f4)")
    atoms.add_argument("--sf", help="with --sm120: scale-factor type (ue8m0, ue4m3)")


def handles(name: str) -> bool:
    """Names this module serves (block-scaled atoms; sm120.mma goes the generic way)."""
    return name.strip().startswith("SM120.")


def cmd_atoms(args: argparse.Namespace) -> int:
    want = {k: dtype(v) for k, v in (("a", args.a), ("b", args.b), ("acc", args.acc),
                                      ("sf", args.sf)) if v}
    rows = []
    for f in sm120.forms(args.target):
        bs = isinstance(f, sm120.MmaBsForm)
        types = {"a": f.a, "b": f.b, "acc": f.c, "sf": f.sf_type if bs else None}
        if any(types[k] != v for k, v in want.items()):
            continue
        rows.append(f)
    if not rows:
        raise NvatomError("no SM120 atom matches the filters")
    if args.json:
        out = []
        for f in rows:
            entry = {"name": f.name, "ptx": f.opcode, "min_ptx": ver(f.min_ptx),
                     "targets": [t for t in TARGETS if f.available_on(t)],
                     "registers": {op: f.registers(op) for op in "ABCD"}}
            if isinstance(f, sm120.MmaBsForm):
                entry["attributes"] = f.attributes()
            out.append(entry)
        print(json.dumps(out, indent=2))
        return 0
    width = max(len(f.name) for f in rows)
    print(f"{'atom':<{width}}  {'PTX':<5} {'targets':<22} regs A/B/C/D  vec")
    for f in rows:
        regs = "/".join(str(f.registers(op)) for op in "ABCD")
        vec = str(f.vec_size) if isinstance(f, sm120.MmaBsForm) else "-"
        rule = feature(f.feature).rule
        print(f"{f.name:<{width}}  {ver(f.min_ptx):<5} {rule:<22} {regs:<12} {vec}")
    nbs = sum(isinstance(f, sm120.MmaBsForm) for f in rows)
    print(f"{len(rows)} atoms: {nbs} SM120.mma_bs (selectors 0; suffix "
          ".sfa_b<byte-id>t<thread-id>.sfb_b<byte-id>t<thread-id> for others), "
          f"{len(rows) - nbs} kind::f8f6f4")
    return 0


def cmd_frag(args: argparse.Namespace) -> int:
    form = sm120.mma_bs_form(args.atom)
    op = args.operand.upper()
    if op in ("SFA", "SFB"):
        x = form.scale_vec
        bid, tid = ((form.byte_id_a, form.thread_id_a) if op == "SFA"
                    else (form.byte_id_b, form.thread_id_b))
        rows, cols = (form.m, x) if op == "SFA" else (x, form.n)
        print(f"{form.name} operand {op}: {form.sf_type.name} scale_{op[-1]} ({rows} x {cols}),"
              f" one .b32 register per lane; byte-id {bid}, thread-id {tid}")
        print(f"(lane, block) -> scale layout (all lanes, CuTe-style): {form.tv_layout(op)}")
        grid: list = [[[] for _ in range(cols)] for _ in range(rows)]
        for s in form.scale_sources(op):
            r, c = (s.mn, s.block) if op == "SFA" else (s.block, s.mn)
            grid[r][c].append((s.lane, s.byte))
        lanes = sorted({s.lane for s in form.scale_sources(op)})
        print(f"lanes read: {lanes} (T<lane>:V<byte of the register>)")
        return show_fragment(grid, args, f"{form.name}  {op}  (T<lane>:V<byte>)")
    return show_warp_fragment(form, op, form.tv_layout(op), args,
                              f" ({form.element_bits(op)}-bit fields)")


def cmd_emit(args: argparse.Namespace) -> int:
    form, t = atom_on_target(args, sm120.mma_bs_form)
    if args.selector not in (None, *form.selectors):
        raise NvatomError(f"{form.name}: sparsity selector {args.selector} is not legal "
                          f"(ptxas accepts {list(form.selectors) or 'none: dense'})")

    def asm() -> tuple[Any, list[str]]:
        a = sm120_emit.inline_asm(form)
        return a, list(a.names)

    def emit(k: Any) -> None:
        regs = sm120_emit.alloc_mma_bs_registers(k, form)
        sm120_emit.emit_mma_bs(k, form, regs.d, regs.a, regs.b, regs.c, regs.sfa, regs.sfb,
                               e=regs.e)

    return emit_warp_mma(args, form, t, asm=asm, emit=emit,
                         module=lambda: sm120_emit.build_mma_bs_test_module(form, t))
