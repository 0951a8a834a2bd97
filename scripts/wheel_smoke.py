"""Smoke test of an installed nvatom wheel (``make wheel-check``; docs/packaging.md).

Run with the fresh virtual environment's Python from outside the working tree, with the
source package's folder as argument (``wheel_smoke.py SRC/nvatom``): it fails when nvatom is
imported from anywhere but that environment's site-packages (a source tree on ``sys.path``
would hide a file missing from the wheel), when a file of the source package (modules and
``py.typed``) is not installed, or when an installed module does not import (one that needs
an optional package not installed here -- xDSL, llvmlite, torch -- is named and skipped);
then it parses a layout, looks up an atom, emits its PTX and, where ptxas is installed,
assembles it.  Golden values: the layout
value is CuTe's definition (coordinate (3, 1) of shape (4, 2) with strides (2, 1) is
3 * 2 + 1 * 1 = 7); the instruction text is the PTX ISA's ``mma.sync.aligned.m16n8k16``
syntax for row/col bf16 operands and f32 accumulators.
"""

from __future__ import annotations

import importlib
import pkgutil
import sys
import sysconfig
from pathlib import Path

#: Optional packages an nvatom module may import at module level (pyproject's extras).
OPTIONAL = ("xdsl", "llvmlite", "torch", "cupy", "cuda")


def _files(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")
            if p.is_file() and (p.suffix == ".py" or p.name == "py.typed")
            and "__pycache__" not in p.parts}


def main(argv: list[str]) -> int:
    import nvatom

    where = Path(nvatom.__file__).resolve()
    site = Path(sysconfig.get_paths()["purelib"]).resolve()
    if site not in where.parents:
        print(f"wheel smoke: nvatom imported from {where}, not from {site}", file=sys.stderr)
        return 1
    if argv:
        missing = sorted(_files(Path(argv[0])) - _files(where.parent))
        if missing:
            print(f"wheel smoke: the installed package lacks {', '.join(missing)}",
                  file=sys.stderr)
            return 1
    skipped = []
    for mod in pkgutil.walk_packages(nvatom.__path__, "nvatom."):
        if mod.name.endswith(".__main__"):  # a program, not a module to import
            continue
        try:
            importlib.import_module(mod.name)
        except ImportError as e:
            if (e.name or "").split(".")[0] not in OPTIONAL:
                raise
            skipped.append(f"{mod.name} (needs {e.name})")

    from nvatom.layout import parse_layout

    layout = parse_layout("(4,2):(2,1)")
    assert layout((3, 1)) == 7, layout((3, 1))

    from nvatom.arch import target
    from nvatom.atoms.registry import mma_form
    from nvatom.ptx import mma_emit

    form = mma_form("sm80.mma.m16n8k16.f32.bf16.bf16.f32")
    ptx = mma_emit.build_mma_test_module(form, target("sm_80")).emit()
    want = "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32"
    assert want in ptx, ptx

    from nvatom.runtime import ptxas

    if ptxas.discover():
        res = ptxas.assemble(ptx, "sm_80")
        assert res.cubin[:4] == b"\x7fELF", res.cubin[:4]
        done = f"{len(res.cubin)}-byte cubin"
    else:
        done = "no ptxas, not assembled"
    print(f"wheel smoke: ok from {where.parent}: {form.name} ({len(ptx)} bytes of PTX, "
          f"{done}); modules not imported for want of an optional package: "
          f"{', '.join(skipped) or 'none'}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
