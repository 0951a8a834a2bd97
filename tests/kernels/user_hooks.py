"""Example user epilogues (nvatom.kernels.sm90.user_epilogue) for the CPU and GPU tests,
each with a float64 reference of what it computes on the epilogue's value ``y`` at output
(``rows``, ``cols``), written here from its definition (not from its PTX).

* ``relu2``: squared ReLU, ``max(y, 0)^2``;
* ``leaky``: leaky ReLU with an f32 parameter ``slope`` in [0, 1]: ``max(y, slope y)``;
* ``causal``: a per-column scale (bf16 tensor ``scale``, one per column) and a per-row one
  (f32 ``rs``), then zero above the diagonal (``col > row``): ``y scale[col] rs[row]``;
* ``ramp``: row and column arithmetic: ``y + col / 2`` where ``row >= col`` (their signed
  difference chooses, ``slct``), else ``y``;
* ``colidx``: a column tensor named ``col`` beside the ``col`` register: ``y + col
  t[col]``.

The references take ``xp``, numpy or torch (``where`` and broadcasting are all they use).
"""

from __future__ import annotations

from typing import Any

from nvatom.kernels.sm90.fusion import UserEpilogue


def _relu2(k: Any, x: Any, row: Any, col: Any) -> None:
    k.ins("max.f32", x, x, 0.0)
    k.ins("mul.rn.f32", x, x, x)


def _leaky(k: Any, x: Any, row: Any, col: Any) -> None:
    t = k.reg("f32")
    k.ins("mul.rn.f32", t, x, k.arg("slope"))
    k.ins("max.f32", x, x, t)


def _causal(k: Any, x: Any, row: Any, col: Any) -> None:
    above = k.reg("pred")
    k.ins("setp.gt.u32", above, col, row)
    k.ins("mul.rn.f32", x, x, k.load("scale"))
    k.ins("mul.rn.f32", x, x, k.load("rs"))
    k.ins("selp.f32", x, 0.0, x, above)


def _ramp(k: Any, x: Any, row: Any, col: Any) -> None:
    c, d, y = k.reg("f32"), k.reg("s32"), k.reg("f32")
    k.ins("cvt.rn.f32.u32", c, col)
    k.ins("fma.rn.f32", y, c, 0.5, x)
    k.ins("sub.s32", d, row, col)
    k.ins("slct.f32.s32", x, y, x, d)


def _colidx(k: Any, x: Any, row: Any, col: Any) -> None:
    c = k.reg("f32")
    k.ins("cvt.rn.f32.u32", c, col)
    k.ins("fma.rn.f32", x, c, k.load("col"), x)


RELU2 = UserEpilogue("relu2", _relu2)
LEAKY = UserEpilogue("leaky", _leaky, scalars=("slope",))
CAUSAL = UserEpilogue("causal", _causal, tensors={"scale": ("col", "bf16"), "rs": ("row", "f32")})
RAMP = UserEpilogue("ramp", _ramp)
COLIDX = UserEpilogue("colidx", _colidx, tensors={"col": ("col", "f32")})
HOOKS = {h.name: h for h in (RELU2, LEAKY, CAUSAL, RAMP, COLIDX)}


def reference(name: str, y: Any, rows: Any, cols: Any, args: dict[str, Any], xp: Any) -> Any:
    """What hook ``name`` makes of ``y`` at (``rows``, ``cols``) (broadcast), ``args`` its
    parameters (arrays of ``xp``: ``scale`` indexed by column, ``rs`` by row)."""
    if name == "relu2":
        return xp.where(y > 0, y, 0 * y) ** 2
    if name == "leaky":
        return xp.where(y > args["slope"] * y, y, args["slope"] * y)
    if name == "causal":
        z = y * args["scale"][cols] * args["rs"][rows]
        return xp.where(cols > rows, 0 * z, z)
    if name == "colidx":
        return y + cols * args["col"][cols]
    assert name == "ramp", name
    return xp.where(rows >= cols, y + cols / 2, y)
