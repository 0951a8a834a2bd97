"""SM90 warpgroup MMA (``wgmma``) emitted as a checked protocol, an inline-asm template, and
a test kernel.

**Protocol** (PTX ISA "Asynchronous Warpgroup Level Matrix Multiply-Accumulate": wgmma.fence,
wgmma.commit_group, wgmma.wait_group; ptxas 13.0 assembles them on sm_90a at PTX 8.0)::

    wgmma.fence                      before the first mma_async, and again after any other
                                     instruction touched the accumulator (or A) registers
    wgmma.mma_async  (one or more)   asynchronous: its registers must not be touched until
    wgmma.commit_group               the group holding it is retired by
    wgmma.wait_group N               (at most N groups stay pending)

:class:`WgmmaSequence` records this sequence and raises :class:`WgmmaProtocolError` on a
wrong order: mma_async without a fence, a commit with nothing to commit, reading or writing
accumulators of an mma that is not committed and waited for, or finishing with work pending.
Bound to a :class:`~nvatom.ptx.builder.Kernel`, it also emits the instructions.  The scale-d
operand is a predicate: :func:`emit_scale_d` writes ``setp.ne.b32 p, scale_d, 0``.

**Inline asm** (:func:`inline_asm`) follows CUTLASS's cute/arch/mma_sm90_gmma.hpp: the
accumulators are read-write (``+f`` for f32, ``+r`` for f16x2 and s32), descriptors ``l``,
A registers of ``rs`` forms ``r``, scale-d ``r`` turned into a predicate by a ``setp`` inside
the asm, and the immediates ``n``.

**Test kernel** (:func:`build_wgmma_test_module`): ``wgmma_test(A, B, D)`` for ``ss`` and
``rs`` forms of every family (f16/bf16/tf32/FP8 with f32 or f16 D, s8/u8 incl. mixed and
.satfinite, b1 .and.popc laid out as bytes), K-major or, for f16/bf16, MN-major operands
(trans-a/trans-b = 1; the global tile is then stored transposed); ``rs`` A is loaded per
thread through :func:`nvatom.atoms.wgmma_fragments.a_layout` before the wgmma.fence (b1:
32 K bits per register from the packed rows); imm-scale-a/b may be -1 (negation);
``load_c`` starts from D's contents with scale-d true.  The 16-bit K-major case in detail:
A is 64 x K*k_steps and B is N x K*k_steps, both
row-major (K-major) in global memory; D is 64 x N f32 row-major.  128 threads copy A and B in
16-byte chunks into shared tiles laid out by :func:`nvatom.atoms.smem.smem_layout` with the
chosen swizzle, then fence.proxy.async + bar.sync; the descriptors come from
:func:`nvatom.descriptors.wgmma.make_wgmma_desc`, the k-th one starting at the byte offset of
the tile's element ``(0, k*K)``; the run-time shared base address is added into the
start-address field.  D is initialised to NaN, so the first mma_async runs with scale-d false
(D = A*B) and the others with scale-d true; D is stored through the accumulator layout of
:mod:`nvatom.atoms.wgmma_fragments`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from nvatom.arch import Target, target
from nvatom.atoms.sm90 import WgmmaForm, wgmma_form
from nvatom.atoms.smem import smem_layout, smem_swizzle
from nvatom.atoms.wgmma_fragments import WARPGROUP, a_layout, accumulator_layout
from nvatom.descriptors.wgmma import FIELDS, WgmmaDescriptor, make_wgmma_desc
from nvatom.errors import NvatomError
from nvatom.layout import Layout, composition, size
from nvatom.ptx.builder import Kernel, Module, Reg
from nvatom.ptx.layout_eval import emit_composed_offset, emit_layout_offset, flat_modes
from nvatom.ptx.mma_emit import InlineAsm

__all__ = [
    "COMMIT",
    "FENCE",
    "WgmmaEmitError",
    "WgmmaProtocolError",
    "WgmmaSequence",
    "WgmmaTestPlan",
    "a_fragment_offsets",
    "build_wgmma_test_module",
    "emit_scale_d",
    "emit_wgmma",
    "inline_asm",
    "k_step_descriptors",
    "wait_group",
    "wgmma_test_plan",
]

FENCE = "wgmma.fence.sync.aligned"
COMMIT = "wgmma.commit_group.sync.aligned"
_WAIT = "wgmma.wait_group.sync.aligned"
_REG_OK = {"f32": ("f32",), "b32": ("b32", "u32", "s32"), "b64": ("b64", "u64", "s64")}
_CONSTRAINT = {"f32": "f", "b32": "r", "b64": "l"}


class WgmmaEmitError(NvatomError):
    """A wgmma form or operand the emitter cannot use as given."""


class WgmmaProtocolError(WgmmaEmitError):
    """fence -> mma_async -> commit_group -> wait_group used out of order."""


def wait_group(n: int) -> str:
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise WgmmaEmitError(f"wgmma.wait_group takes a non-negative integer, got {n!r}")
    return f"{_WAIT} {n}"


# --------------------------------------------------------------------------- instruction


def _check_regs(form: WgmmaForm, op: str, regs: Sequence[Reg | str]) -> None:
    want_n, want_t = form.registers(op), form.register_type(op)
    if len(regs) != want_n:
        raise WgmmaEmitError(f"{form.name}: operand {op} takes {want_n} .{want_t} register(s), "
                             f"got {len(regs)}")
    for r in regs:
        if isinstance(r, Reg) and r.type not in _REG_OK[want_t]:
            raise WgmmaEmitError(f"{form.name}: operand {op} takes .{want_t} registers, got "
                                 f"{r.name} of type .{r.type}")


def _default_imm(form: WgmmaForm) -> tuple[int, ...]:
    """scale-a = scale-b = 1, no transposes (K-major A and B)."""
    return tuple(1 if w.startswith("scale") else 0 for w in form.immediates)


def emit_scale_d(k: Kernel, scale_d: Reg | int) -> Reg:
    """A predicate register ``p = scale_d != 0`` (``setp.ne.b32``); an int is moved into a
    register first."""
    src: Reg | int = scale_d
    if isinstance(scale_d, int):
        src = k.reg("b32")
        k.ins("mov.b32", src, int(scale_d))
    p = k.reg("pred")
    k.ins("setp.ne.b32", p, src, 0)
    return p


def emit_wgmma(
    k: Kernel,
    form: WgmmaForm,
    d: Sequence[Reg | str],
    a: Reg | str | Sequence[Reg | str],
    b_desc: Reg | str,
    scale_d: Reg | str,
    imm: Sequence[int] | None = None,
) -> None:
    """Append ``form``'s wgmma.mma_async (no protocol check: see :class:`WgmmaSequence`).

    ``a`` is a 64-bit descriptor register (``ss``) or 4 .b32 registers (``rs``); ``scale_d``
    a predicate register (:func:`emit_scale_d`).
    """
    _check_regs(form, "D", d)
    if form.a_source == "rs":
        if isinstance(a, (str, Reg)):
            raise WgmmaEmitError(f"{form.name}: A is {form.registers('A')} .b32 registers")
        _check_regs(form, "A", a)
        a_op: str | list[str] = [str(r) for r in a]
    else:
        if not isinstance(a, (str, Reg)):
            raise WgmmaEmitError(f"{form.name}: A is a 64-bit descriptor, not a vector")
        _check_regs(form, "A", [a])
        a_op = str(a)
    _check_regs(form, "B", [b_desc])
    if isinstance(scale_d, Reg) and scale_d.type != "pred":
        raise WgmmaEmitError(f"{form.name}: scale-d is a predicate, got {scale_d.name} of type "
                             f".{scale_d.type} (use emit_scale_d)")
    imm = _default_imm(form) if imm is None else tuple(imm)
    line = form.instruction([str(r) for r in d], a_op, str(b_desc), str(scale_d), *imm)
    k.need_atom(form, WgmmaEmitError)
    k.raw(line)


# --------------------------------------------------------------------------- protocol


@dataclasses.dataclass
class _Acc:
    name: str
    uncommitted: bool = False


class WgmmaSequence:
    """The fence -> mma_async -> commit_group -> wait_group protocol, checked (and emitted
    into ``kernel`` when one is given).

    Accumulator register sets are identified by their register names.  ``write(d)`` /
    ``read(d)`` declare accesses by ordinary instructions; both require every mma_async on
    ``d`` to be committed and retired by a wait_group, and ``write`` requires a new fence
    before the next mma_async.
    """

    def __init__(self, kernel: Kernel | None = None) -> None:
        self.kernel = kernel
        self.log: list[str] = []
        self._fenced = False
        self._uncommitted: set[tuple[str, ...]] = set()
        self._groups: list[set[tuple[str, ...]]] = []  # pending groups, oldest first

    @staticmethod
    def _key(d: Sequence[Reg | str]) -> tuple[str, ...]:
        return tuple(str(r) for r in d)

    def _busy(self, key: tuple[str, ...]) -> str | None:
        if key in self._uncommitted:
            return "an mma_async on them is not committed (commit_group, then wait_group)"
        for i, g in enumerate(self._groups):
            if key in g:
                return (f"they belong to a pending group ({len(self._groups) - i} from the "
                        f"newest; wait_group {len(self._groups) - i - 1} retires it)")
        return None

    @property
    def pending_groups(self) -> int:
        return len(self._groups)

    def fence(self) -> None:
        self.log.append("fence")
        self._fenced = True
        if self.kernel is not None:
            self.kernel.need_feature("wgmma", FENCE, WgmmaEmitError)
            self.kernel.ins(FENCE)

    def mma(self, form: WgmmaForm, d: Sequence[Reg | str], a: Reg | str | Sequence[Reg | str],
            b_desc: Reg | str, scale_d: Reg | str, imm: Sequence[int] | None = None) -> None:
        if not self._fenced:
            raise WgmmaProtocolError(
                f"{form.name}: wgmma.mma_async without a wgmma.fence before it (needed before "
                "the first mma_async and after any other access to its registers)")
        key = self._key(d)  # chaining onto in-flight mma_async with the same D is legal
        if self.kernel is not None:
            emit_wgmma(self.kernel, form, d, a, b_desc, scale_d, imm)
        self.log.append("mma_async")
        self._uncommitted.add(key)

    def commit(self) -> None:
        if not self._uncommitted:
            raise WgmmaProtocolError("wgmma.commit_group with no mma_async since the last commit")
        self.log.append("commit_group")
        self._groups.append(self._uncommitted)
        self._uncommitted = set()
        if self.kernel is not None:
            self.kernel.need_feature("wgmma", COMMIT, WgmmaEmitError)
            self.kernel.ins(COMMIT)

    def wait(self, n: int = 0) -> None:
        text = wait_group(n)
        if self._uncommitted:
            raise WgmmaProtocolError(
                f"wgmma.wait_group {n} with uncommitted mma_async: wait_group only waits for "
                "committed groups (commit_group first)")
        self.log.append(f"wait_group {n}")
        while len(self._groups) > n:
            self._groups.pop(0)
        if self.kernel is not None:
            self.kernel.ins(text)

    def read(self, d: Sequence[Reg | str]) -> None:
        """Declare that ordinary instructions read accumulators ``d``."""
        why = self._busy(self._key(d))
        if why:
            raise WgmmaProtocolError(f"reading accumulators before the wgmma is done: {why}")
        self.log.append("read")

    def write(self, regs: Sequence[Reg | str]) -> None:
        """Declare that ordinary instructions write ``regs`` (accumulators or A registers):
        a fence is needed before the next mma_async."""
        why = self._busy(self._key(regs))
        if why:
            raise WgmmaProtocolError(f"writing accumulators of an unfinished wgmma: {why}")
        self.log.append("write")
        self._fenced = False

    def finish(self) -> None:
        """Raise unless every mma_async is committed and retired."""
        if self._uncommitted or self._groups:
            raise WgmmaProtocolError(
                f"sequence ends with {len(self._groups)} pending group(s)"
                + (" and uncommitted mma_async" if self._uncommitted else "")
                + ": wait_group 0 before the registers die")


# --------------------------------------------------------------------------- inline asm


def inline_asm(form: WgmmaForm) -> InlineAsm:
    """CUTLASS-style template: ``{ .reg .pred p; setp.ne.b32 p, %S, 0; <opcode> {D...}, A,
    B, p, imm...; }`` with constraints ``+f``/``+r`` (D), ``l`` or ``r`` (A), ``l`` (B),
    ``r`` (scale-d), ``n`` (each immediate)."""
    nd = form.registers("D")
    d_letter = "+" + _CONSTRAINT[form.register_type("D")]
    letters = [d_letter] * nd
    i = nd
    if form.a_source == "rs":
        na = form.registers("A")
        a_op = "{" + ", ".join(f"%{i + j}" for j in range(na)) + "}"
        letters += ["r"] * na
        i += na
    else:
        a_op = f"%{i}"
        letters.append("l")
        i += 1
    b_op = f"%{i}"
    letters.append("l")
    s_op = f"%{i + 1}"
    letters.append("r")
    i += 2
    imms = [f"%{i + j}" for j in range(len(form.immediates))]
    letters += ["n"] * len(imms)
    d_op = "{" + ", ".join(f"%{j}" for j in range(nd)) + "}"
    ops = ", ".join([d_op, a_op, b_op, "p", *imms])
    template = ("{\n.reg .pred p;\n" f"setp.ne.b32 p, {s_op}, 0;\n"
                f"{form.opcode} {ops};\n" "}")
    total = i + len(imms)
    return InlineAsm(template=template, constraints=",".join(letters), outputs=nd,
                     inputs=total - nd)


# --------------------------------------------------------------------------- test kernel

_MAJORS = ("K", "MN")


def _layout_bits(form: WgmmaForm) -> int:
    """Element width of the shared tiles and global rows: the storage width, except b1,
    whose 256-bit K-block is laid out as 32 bytes of 8 bits (smem_layout and make_wgmma_desc
    take no 1-bit elements; a b1 K-major row is byte-for-byte an 8-bit one)."""
    return max(8, form.a.pack_bits)


def _k_step(form: WgmmaForm) -> int:
    """Layout elements of ``_layout_bits`` per mma_async: the form's K (b1: K bits counted as
    bytes)."""
    return form.k * form.a.pack_bits // _layout_bits(form)


def _check_test_form(form: WgmmaForm, a_major: str, b_major: str, load_c: bool) -> None:
    for what, m in (("a_major", a_major), ("b_major", b_major)):
        if m not in _MAJORS:
            raise WgmmaEmitError(f"{what} must be 'K' or 'MN', got {m!r}")
    if "MN" in (a_major, b_major) and form.family not in ("f16", "bf16"):
        raise WgmmaEmitError(f"{form.name}: only f16/bf16 forms take MN-major (transposed) "
                             "operands")
    if form.a_source == "rs" and a_major != "K":
        raise WgmmaEmitError(f"{form.name}: an rs form's A comes from registers (K-major); "
                             "it has no trans-a")
    if not isinstance(load_c, bool):
        raise WgmmaEmitError(f"load_c must be a bool, got {load_c!r}")


def _padded_k(k_total: int, swizzle: object, bits: int) -> int:
    """K of the shared tile: k_total rounded up to the swizzle atom's width."""
    w = smem_swizzle(swizzle).row_bytes * 8 // bits  # type: ignore[arg-type]
    return -(-k_total // w) * w


@dataclasses.dataclass(frozen=True)
class WgmmaTestPlan:
    """Everything the test kernel derives from the layout algebra (for tests and GPU runs).

    Widths (``k_total``, ``k_smem``) count layout elements of ``lbits`` bits (bytes for b1).
    ``rs`` forms have no A tile (``a_smem`` None, ``a_descs`` empty)."""

    form: WgmmaForm
    swizzle: str
    k_steps: int
    k_total: int  # K * k_steps: the global tiles' width
    k_smem: int  # the shared tiles' width (k_total rounded up to the swizzle atom)
    a_smem: object  # smem_layout(64, k_smem, ...), None for rs
    b_smem: object  # smem_layout(N, k_smem, ...)
    a_descs: tuple[WgmmaDescriptor, ...]  # per K step, start address relative to the tile
    b_descs: tuple[WgmmaDescriptor, ...]
    a_major: str = "K"
    b_major: str = "K"
    load_c: bool = False
    scale_a: int = 1  # imm-scale-a: -1 negates A
    scale_b: int = 1

    @property
    def lbits(self) -> int:
        return _layout_bits(self.form)

    @property
    def k_step(self) -> int:
        """Layout elements per mma_async (the form's K)."""
        return _k_step(self.form)

    @property
    def esize(self) -> int:
        return self.lbits // 8

    @property
    def imm(self) -> tuple[int, ...]:
        """scale-a/scale-b (1, or -1 to negate); trans-a/trans-b = 1 for MN-major A/B."""
        out = []
        for w in self.form.immediates:
            if w.startswith("scale"):
                out.append(self.scale_a if w == "scale_a" else self.scale_b)
            else:
                out.append(int((self.a_major if w == "trans_a" else self.b_major) == "MN"))
        return tuple(out)


def k_step_descriptors(layout: object, bits: int, k: int, k_steps: int,
                       desc: WgmmaDescriptor | None = None,
                       major: str = "K") -> tuple[WgmmaDescriptor, ...]:
    """Descriptor of each K step: ``make_wgmma_desc``'s (or ``desc``), with the start address
    advanced to the byte offset of element ``(0, s*k)`` of the layout."""
    base = make_wgmma_desc(layout, bits, major) if desc is None else desc
    out = []
    for s in range(k_steps):
        off = layout((0, s * k)) * bits // 8  # type: ignore[operator]
        out.append(dataclasses.replace(base, start_address=base.start_address + off))
    return tuple(out)


def _tile(rows: int, k_total: int, bits: int, major: str, sw: object) -> tuple[int, object]:
    k_smem = _padded_k(k_total, sw, bits)  # both majors: A and B share one K width
    try:
        return k_smem, smem_layout(rows, k_smem, bits, major, sw)  # type: ignore[arg-type]
    except NvatomError as e:
        raise WgmmaEmitError(f"no {major}-major tile of {rows} rows: {e}") from None


def wgmma_test_plan(form: WgmmaForm, swizzle: object, k_steps: int,
                    b_desc_swizzle: object | None = None, *, a_major: str = "K",
                    b_major: str = "K", load_c: bool = False, scale_a: int = 1,
                    scale_b: int = 1) -> WgmmaTestPlan:
    """The layouts and descriptors of :func:`build_wgmma_test_module`.  ``b_desc_swizzle``
    (for negative tests only) builds B's descriptors for another swizzle's layout than the
    one B is stored in."""
    _check_test_form(form, a_major, b_major, load_c)
    for what, v in (("scale_a", scale_a), ("scale_b", scale_b)):
        if v not in (1, -1) or isinstance(v, bool):
            raise WgmmaEmitError(f"{what} must be 1 or -1, got {v!r}")
        if v == -1 and what not in form.immediates:
            raise WgmmaEmitError(f"{form.name} has no {what} immediate: it cannot negate")
    if isinstance(k_steps, bool) or not isinstance(k_steps, int) or k_steps < 1:
        raise WgmmaEmitError(f"k_steps must be a positive int, got {k_steps!r}")
    sw = smem_swizzle(swizzle)  # type: ignore[arg-type]
    bits = _layout_bits(form)
    ks = _k_step(form)
    k_total = ks * k_steps
    b_ks, b_l = _tile(form.n, k_total, bits, b_major, sw)
    a_l: object = None
    a_descs: tuple[WgmmaDescriptor, ...] = ()
    k_smem = b_ks
    if form.a_source == "ss":
        k_smem, a_l = _tile(form.m, k_total, bits, a_major, sw)
        if k_smem != b_ks:  # pragma: no cover - both pad K the same way
            raise WgmmaEmitError("A and B tiles disagree on K")
        a_descs = k_step_descriptors(a_l, bits, ks, k_steps, major=a_major)
    if b_desc_swizzle is None:
        b_descs = k_step_descriptors(b_l, bits, ks, k_steps, major=b_major)
    else:
        other = smem_swizzle(b_desc_swizzle)  # type: ignore[arg-type]
        _, o_l = _tile(form.n, k_total, bits, b_major, other)
        b_descs = k_step_descriptors(o_l, bits, ks, k_steps, major=b_major)
    return WgmmaTestPlan(form, sw.name, k_steps, k_total, k_smem, a_l, b_l, a_descs, b_descs,
                         a_major, b_major, load_c, scale_a, scale_b)


_CHUNK = 16  # bytes per thread copy


def _add64(k: Kernel, base: Reg, off32: Reg) -> Reg:
    off, out = k.reg("u64"), k.reg("u64")
    k.ins("cvt.u64.u32", off, off32)
    k.ins("add.s64", out, base, off)
    return out


def _copy_in(k: Kernel, tid: Reg, gbase: Reg, sbase: Reg, rows: int, k_total: int,
             k_smem: int, tile: object, esize: int, major: str = "K") -> None:
    """Copy a global tile into ``tile`` (rows x k_smem, coordinates (mn, k)) in 16-byte
    chunks.  K-major: the global tile is rows x k_total row-major and chunk c = thread + 128 j
    is (row c % rows, K chunk c // rows).  MN-major: the global tile is k_total x rows
    row-major (the operand transposed) and chunk c is (MN chunk c % (rows/per), k c //
    (rows/per))."""
    per = _CHUNK // esize
    if major == "K":
        kc_smem, kc = k_smem // per, k_total // per
        chunks = rows * kc  # chunk indices below this are the real columns
        coord = Layout((rows, kc_smem), (1, rows * per))  # chunk -> column-major (mn, k)
        gmem = Layout((rows, kc_smem), (k_total, per))  # chunk -> row-major global element
    else:
        mc = rows // per
        chunks = mc * k_total
        coord = Layout((mc, k_smem), (per, rows))
        gmem = coord  # element (mn, k) of the transposed global tile is at k * rows + mn
    smem = composition(tile, coord)
    for j in range(-(-chunks // WARPGROUP)):
        idx = k.reg("u32")
        k.ins("add.u32", idx, tid, WARPGROUP * j)
        p = k.reg("pred")
        k.ins("setp.lt.u32", p, idx, chunks)
        src = _add64(k, gbase, emit_layout_offset(k, gmem, idx, scale=esize))
        dst = k.reg("u32")
        k.ins("add.u32", dst, sbase, emit_composed_offset(k, smem, idx, scale=esize))
        v = k.regs("b32", 4)
        k.ins("ld.global.v4.b32", v, f"[{src}]", pred=str(p))
        k.ins("st.shared.v4.b32", f"[{dst}]", v, pred=str(p))


def _desc_regs(k: Kernel, sbase: Reg, descs: Sequence[WgmmaDescriptor]) -> list[Reg]:
    """64-bit descriptor words: the constant fields, start address = (shared base + start)
    >> 4 in bits 0-13 at run time."""
    start = FIELDS[0]
    out = []
    for dsc in descs:
        const = dsc.encode() & ~start.mask
        t = k.reg("u32")
        k.ins("add.u32", t, sbase, dsc.start_address)
        k.ins("shr.u32", t, t, start.shift)
        k.ins("and.b32", t, t, (1 << start.width) - 1)
        w = k.reg("b64")
        k.ins("cvt.u64.u32", w, t)
        k.ins("or.b64", w, w, f"0x{const:016x}")
        out.append(w)
    return out


def a_fragment_offsets(bits: int, k_total: int) -> tuple[Layout, list[int]]:
    """For ``rs`` forms: (thread -> element offset of its A fragment in the 64 x k_total
    row-major global tile, element offset of each of the 4 registers relative to that).
    Register ``r`` is ``32/bits`` K-consecutive elements, so one aligned 32-bit load."""
    p = 32 // bits
    mem = composition(Layout((64, k_total), (k_total, 1)), a_layout(bits))
    vals = mem[1]
    offs = []
    for r in range(4):
        o = vals(r * p)
        if any(vals(r * p + j) != o + j for j in range(p)):  # pragma: no cover - ISA
            raise WgmmaEmitError(f"{bits}-bit A register {r} is not K-contiguous")
        offs.append(o)
    return mem[0], offs


def _d_access(k: Kernel, form: WgmmaForm, base: Reg, d: list[Reg], load: bool) -> None:
    """Load (``load``) or store the accumulators through the accumulator layout; ``base`` is
    the thread's address of its first element.  32-bit D: v2 pairs of adjacent columns;
    f16 D: one .b32 (f16x2, low half the lower column) per register."""
    mem = composition(Layout((form.m, form.n), (form.n, 1)), accumulator_layout(form.n))
    vals = mem[1]
    for i in range(0, size(vals), 2):
        if vals(i + 1) != vals(i) + 1:  # pragma: no cover - the ISA pairs columns
            raise WgmmaEmitError(f"{form.name}: accumulator values {i}, {i + 1} not adjacent")
    if form.d.name == "f16":
        for r, reg in enumerate(d):
            addr = f"[{base}+{vals(2 * r) * 2}]"
            if load:
                k.ins("ld.global.b32", reg, addr)
            else:
                k.ins("st.global.b32", addr, reg)
        return
    t = "f32" if form.d.name == "f32" else "b32"
    for i in range(0, size(vals), 2):
        addr = f"[{base}+{vals(i) * 4}]"
        if load:
            k.ins(f"ld.global.v2.{t}", [d[i], d[i + 1]], addr)
        else:
            k.ins(f"st.global.v2.{t}", addr, [d[i], d[i + 1]])


_POISON = {"f32": "0f7FC00000", "f16": "0x7E007E00", "s32": "0x5A5A5A5A"}


def build_wgmma_test_module(form: WgmmaForm | str, swizzle: object = "SW128", k_steps: int = 1,
                            target_: Target | str = "sm_90a", *,
                            b_desc_swizzle: object | None = None, a_major: str = "K",
                            b_major: str = "K", load_c: bool = False, scale_a: int = 1,
                            scale_b: int = 1) -> Module:
    """Kernel ``wgmma_test(A, B, D)``: D (64 x N row-major, the form's accumulator type) =
    A (64 x K*k_steps) @ B (N x K*k_steps)^T [+ D when ``load_c``]; launch with 128 threads.

    Global A and B hold the elements' codes in their storage width (b1: bits packed into
    bytes, element 0 in the least significant bit), row-major; an MN-major operand is stored
    transposed (K*k_steps x 64 or x N, row-major).  ``rs`` A is loaded by each thread from
    the 64 x K*k_steps row-major tile through the A fragment layout.  Without ``load_c`` the
    accumulators start poisoned and the first step runs with scale-d false; with it they are
    loaded from D and every step runs with scale-d true.  ``scale_a`` / ``scale_b`` = -1
    negate A / B through the imm-scale immediates (forms that have them)."""

    form = wgmma_form(form) if isinstance(form, str) else form
    plan = wgmma_test_plan(form, swizzle, k_steps, b_desc_swizzle, a_major=a_major,
                           b_major=b_major, load_c=load_c, scale_a=scale_a, scale_b=scale_b)
    t = target(target_)
    mod = Module(t, features=[form.feature], version=form.ptx_version_for(t))
    k = mod.kernel("wgmma_test")
    k.maxntid = (WARPGROUP, 1, 1)
    esize = plan.esize
    g = {}
    for name in ("A", "B", "D"):
        raw = k.ld_param(k.param(name))
        g[name] = k.reg("u64")
        k.ins("cvta.to.global.u64", g[name], raw)
    ss = form.a_source == "ss"
    tiles = [("A", form.m)] if ss else []
    tiles.append(("B", form.n))
    sbase = {}
    for name, rows in tiles:
        k.shared(f"smem_{name.lower()}", rows * plan.k_smem * esize, align=1024)
        sbase[name] = k.reg("u32")
        k.ins("mov.u32", sbase[name], f"smem_{name.lower()}")
    tid = k.reg("u32")
    k.ins("mov.u32", tid, "%tid.x")

    k.comment(f"gmem -> smem: 16-byte chunks into {plan.swizzle} tiles "
              f"(A {plan.a_major if ss else 'in registers'}, B {plan.b_major}-major)")
    if ss:
        _copy_in(k, tid, g["A"], sbase["A"], form.m, plan.k_total, plan.k_smem, plan.a_smem,
                 esize, plan.a_major)
    _copy_in(k, tid, g["B"], sbase["B"], form.n, plan.k_total, plan.k_smem, plan.b_smem, esize,
             plan.b_major)
    k.ins("fence.proxy.async.shared::cta")
    k.ins("bar.sync", 0)

    k.comment("descriptors: constant fields | (shared base + start) >> 4")
    a_ops: list = _desc_regs(k, sbase["A"], plan.a_descs) if ss else []
    b_desc = _desc_regs(k, sbase["B"], plan.b_descs)
    a_regs: list[Reg] = []
    if not ss:
        k.comment("A fragments: gmem -> registers through the wgmma A layout")
        # offsets in A elements (bits each; b1: 8 to a byte of the global tile) -> bytes
        abits = form.a.pack_bits
        thr, offs = a_fragment_offsets(abits, plan.k_total * plan.lbits // abits)
        thr_bytes = Layout(tuple(sh for sh, _ in flat_modes(thr)),
                           tuple(st * abits // 8 for _, st in flat_modes(thr)))
        abase = _add64(k, g["A"], emit_layout_offset(k, thr_bytes, tid))
        for s in range(k_steps):
            regs = k.regs("b32", 4)
            for r, o in zip(regs, offs, strict=True):
                k.ins("ld.global.b32", r, f"[{abase}+{o * abits // 8 + s * plan.k_step * esize}]")
            a_regs += regs
            a_ops.append(regs)
    p_first = emit_scale_d(k, 1 if load_c else 0)
    p_rest = emit_scale_d(k, 1) if k_steps > 1 and not load_c else p_first

    d = k.regs(form.register_type("D"), form.registers("D"))
    mem = composition(Layout((form.m, form.n), (form.n, 1)), accumulator_layout(form.n))
    dsize = 2 if form.d.name == "f16" else 4
    dbase = _add64(k, g["D"], emit_layout_offset(k, mem[0], tid, scale=dsize))
    seq = WgmmaSequence(k)
    if load_c:
        _d_access(k, form, dbase, d, load=True)
    else:  # poison: only scale-d = false on the first step gives the right result
        mov = "mov.f32" if form.d.name == "f32" else "mov.b32"
        for r in d:
            k.ins(mov, r, _POISON[form.d.name])
    seq.write(d)
    if a_regs:
        seq.write(a_regs)  # the fence below comes after the A registers are written
    seq.fence()
    for s in range(k_steps):
        seq.mma(form, d, a_ops[s], b_desc[s], p_first if s == 0 else p_rest, plan.imm)
    seq.commit()
    seq.wait(0)
    seq.read(d)
    seq.finish()

    k.comment("D -> gmem through the accumulator layout (row-major 64 x N)")
    _d_access(k, form, dbase, d, load=False)
    return mod
