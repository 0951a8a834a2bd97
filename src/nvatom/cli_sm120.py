"""``nvatom`` subcommand parts for the SM120/SM121 atoms (docs/sm120.md).

* ``nvatom atoms --sm120 [--target T] [--a A --b B --acc C --sf S] [--json]``: the
  ``SM120.mma_bs`` forms and the unscaled ``sm120.mma`` / ``sm120.sparse_mma`` forms;
* ``nvatom frag SM120.mma_bs... --operand A|B|C|D|SFA|SFB``: a fragment, or for SFA/SFB which
  lane's register byte holds each scale factor, for the name's selectors (suffix
  ``.sfa_b<byte-id>t<thread-id>.sfb_b<byte-id>t<thread-id>``);
* ``nvatom emit SM120.mma_bs... --target T [--asm-template | --kernel [--assemble]]``.

The unscaled ``sm120.mma...`` names go through the generic register-MMA paths of
:mod:`nvatom.cli` (nvatom.atoms.registry.mma_form resolves them).
"""

from __future__ import annotations

import argparse
import json

from nvatom.errors import NvatomError

__all__ = ["add_options", "cmd_atoms", "cmd_emit", "cmd_frag", "handles"]


def add_options(atoms: argparse.ArgumentParser) -> None:
    atoms.add_argument("--sm120", action="store_true",
                       help="list the SM120/SM121 atoms (SM120.mma_bs, kind::f8f6f4)")
    atoms.add_argument("--sf", help="with --sm120: scale-factor type (ue8m0, ue4m3)")


def handles(name: str) -> bool:
    """Names this module serves (block-scaled atoms; sm120.mma goes the generic way)."""
    return name.strip().startswith("SM120.")


def _ver(v: tuple[int, int]) -> str:
    return f"{v[0]}.{v[1]}"


def cmd_atoms(args: argparse.Namespace) -> int:
    from nvatom.arch import TARGETS, feature
    from nvatom.atoms import sm120
    from nvatom.dtypes import dtype

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
            entry = {"name": f.name, "ptx": f.opcode, "min_ptx": _ver(f.min_ptx),
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
        print(f"{f.name:<{width}}  {_ver(f.min_ptx):<5} {rule:<22} {regs:<12} {vec}")
    nbs = sum(isinstance(f, sm120.MmaBsForm) for f in rows)
    print(f"{len(rows)} atoms: {nbs} SM120.mma_bs (selectors 0; suffix "
          ".sfa_b<byte-id>t<thread-id>.sfb_b<byte-id>t<thread-id> for others), "
          f"{len(rows) - nbs} kind::f8f6f4")
    return 0


def _show(grid: list, args: argparse.Namespace, title: str) -> int:
    from nvatom.cli import _show_fragment  # one fragment printer for every family

    return _show_fragment(grid, args, title)


def cmd_frag(args: argparse.Namespace) -> int:
    from nvatom.atoms import sm120
    from nvatom.atoms.frag_view import fragment_grid

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
        return _show(grid, args, f"{form.name}  {op}  (T<lane>:V<byte>)")
    tv = form.tv_layout(op)
    dims = {"A": (form.m, form.k // 2 if form.is_sparse else form.k), "B": (form.k, form.n),
            "C": (form.m, form.n), "D": (form.m, form.n)}[op]
    print(f"{form.name} operand {op}: {form.operand_type(op).name}, {form.values(op)} values "
          f"in {form.registers(op)} {form.register_type(op)} registers per lane "
          f"({form.element_bits(op)}-bit fields)")
    print(f"(thread, value) -> element layout: {tv}")
    return _show(fragment_grid(tv, op, dims, 32), args,
                 f"{form.name}  operand {op}  (T<lane>:V<value>)")


def _print_kernel(text: str, args: argparse.Namespace, t: object) -> None:
    from nvatom.cli import _print_kernel as print_kernel  # one printer for every family

    print_kernel(text, args, t)


def cmd_emit(args: argparse.Namespace) -> int:
    from nvatom.arch import feature, target
    from nvatom.atoms import sm120
    from nvatom.ptx import sm120_emit
    from nvatom.ptx.builder import Kernel

    form = sm120.mma_bs_form(args.atom)
    t = target(args.target)
    if not form.available_on(t):
        f = feature(form.feature)
        raise NvatomError(f"{form.name} is not available on {t.name} (needs {f.description}: "
                          f"{f.rule})")
    if args.selector not in (None, *form.selectors):
        raise NvatomError(f"{form.name}: sparsity selector {args.selector} is not legal "
                          f"(ptxas accepts {list(form.selectors) or 'none: dense'})")
    if args.asm_template:
        asm = sm120_emit.inline_asm(form)
        bound = [f'"{c}"({n})' for c, n in zip(asm.constraint_list, asm.names, strict=True)]
        print(f"// {form.name}: {asm.outputs} outputs, {asm.inputs} inputs")
        print(f"// constraints: {asm.constraints}")
        print(f'asm volatile("{asm.template}"')
        print(f"    : {', '.join(bound[:asm.outputs])}")
        print(f"    : {', '.join(bound[asm.outputs:])});")
        return 0
    if args.kernel:
        _print_kernel(sm120_emit.build_mma_bs_test_module(form, t).emit(), args, t)
        return 0
    k = Kernel("snippet")
    regs = sm120_emit.alloc_mma_bs_registers(k, form)
    sm120_emit.emit_mma_bs(k, form, regs.d, regs.a, regs.b, regs.c, regs.sfa, regs.sfb,
                           e=regs.e)
    v = form.ptx_version_for(t)
    print(f"// {form.name} on {t.name}: PTX .version {v[0]}.{v[1]} or newer")
    print(k.emit().splitlines()[-3].strip())
    return 0
