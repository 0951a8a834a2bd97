"""emit_layout_offset: the emitted integer arithmetic computes layout(i) for every index.

The PTX is run on a tiny interpreter of the handful of u32 instructions the emitter uses, and
assembled by ptxas, for several layouts (power-of-two and not, nested, with stride 0).
"""

from __future__ import annotations

import re

import pytest

from nvatom.layout import Layout, size
from nvatom.ptx.builder import Module
from nvatom.ptx.layout_eval import emit_layout_offset
from nvatom.runtime.ptxas import assemble

_OPS = {
    "mov.u32": lambda a: a,
    "shr.u32": lambda a, b: a >> b,
    "div.u32": lambda a, b: a // b,
    "and.b32": lambda a, b: a & b,
    "rem.u32": lambda a, b: a % b,
    "shl.b32": lambda a, b: (a << b) & 0xFFFFFFFF,
    "add.u32": lambda a, b: (a + b) & 0xFFFFFFFF,
    "mad.lo.u32": lambda a, b, c: (a * b + c) & 0xFFFFFFFF,
}


def _interpret(lines: list[str], env: dict[str, int]) -> dict[str, int]:
    for line in lines:
        m = re.fullmatch(r"\s*([\w.]+) (.*);", line)
        assert m, line
        op, args = m.group(1), [a.strip() for a in m.group(2).split(",")]
        vals = [env[a] if a.startswith("%") else int(a) for a in args[1:]]
        env[args[0]] = _OPS[op](*vals)
    return env


LAYOUTS = [
    Layout(((4, 8), (2, 2, 2)), ((32, 1), (16, 8, 128))),
    Layout((3, 5), (7, 1)),
    Layout(((2, 3), 4), ((0, 12), 3)),
    Layout((32,), (1,)),
    Layout((6, 1, 5), (1, 99, 6)),
]


@pytest.mark.parametrize("layout", LAYOUTS, ids=str)
@pytest.mark.parametrize("scale", [1, 2, 6])
def test_emitted_offset_matches_layout(layout: Layout, scale: int) -> None:
    mod = Module("sm_80")
    k = mod.kernel("k")
    idx = k.reg("u32")
    body_start = len(k._body)
    k.ins("mov.u32", idx, "%tid.x")
    out = emit_layout_offset(k, layout, idx, scale=scale)
    lines = k._body[body_start + 1:]
    for i in range(size(layout)):
        env = _interpret(lines, {idx.name: i})
        assert env[out.name] == layout(i) * scale, (i, layout)
    p = k.reg("u64")
    k.ins("cvt.u64.u32", p, out)
    k.ins("st.global.u32", f"[{p}]", out)
    assemble(mod.emit(), "sm_80")
