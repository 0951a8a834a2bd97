"""The register-MMA emitter: instructions, inline-asm templates and test kernels.

* the test kernel of every form assembles (one module per target holding every form legal
  there) without local memory;
* its address arithmetic, run by a small interpreter of the emitted PTX for all 32 lanes,
  loads each register from where the atom's (lane, value) layout and the PTX ISA fragment
  formulas put its elements, and the loads cover every operand tile exactly once;
* each inline-asm template numbers its operands 0..n-1, has one constraint per operand, and
  assembles with registers of the constrained types substituted.
"""

from __future__ import annotations

import itertools
import re
from collections import defaultdict

import numpy as np
import pytest

from nvatom.atoms import registry
from nvatom.atoms.fragments import FragmentError
from nvatom.atoms.mma import MmaForm
from nvatom.layout import size
from nvatom.ptx.builder import Kernel, Module
from nvatom.ptx.layout_eval import flat_modes
from nvatom.ptx.mma_emit import (
    InlineAsm,
    MmaEmitError,
    add_mma_test_kernel,
    alloc_mma_registers,
    build_mma_test_module,
    emit_mma,
    inline_asm,
    operand_access,
    operand_memory_layout,
    operand_tile,
    warp_products,
)
from nvatom.runtime.ptxas import assemble

FORMS = registry.mma_forms()


def _quad_pair(form: MmaForm) -> bool:
    return form.shape_str == "m8n8k4" and form.a.name == "f16"


def not_ready(form: MmaForm) -> str | None:
    """Why an SM70 m8n8k4 form cannot be emitted yet (its fragments are in progress);
    None when it can.  Every other form must always be emittable."""
    if not _quad_pair(form):
        return None
    try:
        for op in "ABCD":
            operand_access(form, op)
    except (FragmentError, MmaEmitError) as e:
        return f"SM70 m8n8k4 (quad-pair) form not emittable yet: {e}"
    return None


READY = [f for f in FORMS if not_ready(f) is None]
PENDING = [f for f in FORMS if not_ready(f) is not None]


def _first_target(form: MmaForm) -> str:
    from nvatom.arch import TARGETS

    return next(t for t in TARGETS if form.available_on(t))


def _param(form: MmaForm) -> object:
    reason = not_ready(form)
    marks = [pytest.mark.skip(reason=reason)] if reason else []
    return pytest.param(form, id=form.name, marks=marks)


# --------------------------------------------------------------------------- instruction


def test_emit_checks_operands() -> None:
    form = registry.mma_form("sm80.mma.m16n8k16.f32.f16.f16.f32")
    k = Kernel("k")
    r = alloc_mma_registers(k, form)
    emit_mma(k, form, r.d, r.a, r.b, r.c)
    assert k.emit().count("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%f4") == 1
    with pytest.raises(MmaEmitError, match="operand A takes 4 .b32 register"):
        emit_mma(k, form, r.d, r.a[:3], r.b, r.c)
    with pytest.raises(MmaEmitError, match="operand C takes .f32 registers, got %r"):
        emit_mma(k, form, r.d, r.a, r.b, r.a)
    with pytest.raises(MmaEmitError, match="dense"):
        emit_mma(k, form, r.d, r.a, r.b, r.c, e="%r0")


def test_emit_sparse_needs_metadata_and_a_legal_selector() -> None:
    form = registry.mma_form("sm80.sparse_mma.m16n8k32.s32.s8.s8.s32")
    k = Kernel("k")
    r = alloc_mma_registers(k, form)
    assert r.e is not None
    emit_mma(k, form, r.d, r.a, r.b, r.c, e=r.e, selector=1)
    assert k.emit().rstrip().splitlines()[-3].endswith(f", {r.e}, 0x1;")
    with pytest.raises(MmaEmitError, match="needs the metadata register"):
        emit_mma(k, form, r.d, r.a, r.b, r.c)
    with pytest.raises(MmaEmitError, match=r"selector 2 is not legal \(ptxas accepts 0, 1\)"):
        emit_mma(k, form, r.d, r.a, r.b, r.c, e=r.e, selector=2)


def test_unavailable_form_and_low_version_are_refused() -> None:
    fp8 = registry.mma_form("sm89.mma.m16n8k32.f32.e4m3.e4m3.f32")
    with pytest.raises(MmaEmitError, match="not available on sm_80"):
        build_mma_test_module(fp8, "sm_80")
    with pytest.raises(MmaEmitError, match=r"needs PTX .version 8.4 on sm_89; the module has 7.8"):
        add_mma_test_kernel(Module("sm_89", version=(7, 8)), fp8)
    # unpinned, the module's .version follows the form (tests/ptx/test_module_version.py)
    plain = Module("sm_89")
    add_mma_test_kernel(plain, fp8)
    assert plain.version == (8, 4)


# --------------------------------------------------------------------------- inline asm


def _check_template(form: MmaForm, asm: InlineAsm) -> None:
    letters = asm.constraint_list
    assert len(letters) == asm.outputs + asm.inputs
    numbers = [int(n) for n in re.findall(r"%(\d+)", asm.template)]
    assert numbers == list(range(len(letters))), asm.template
    assert asm.template.startswith(form.opcode + " ")
    groups = re.findall(r"\{([^}]*)\}", asm.template)
    assert [len(g.split(",")) for g in groups] == [form.registers(op) for op in "DABC"]
    assert all(c.startswith("=") for c in letters[: asm.outputs])
    assert not any(c.startswith("=") for c in letters[asm.outputs:])
    assert letters[-2:] == ("r", "n") if form.is_sparse else "n" not in letters


def test_inline_asm_example_from_cutlass() -> None:
    asm = inline_asm(registry.mma_form("sm80.mma.m16n8k16.f32.f16.f16.f32"))
    assert asm.template == ("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
                            "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%10,%11,%12,%13};")
    assert asm.constraints == "=f,=f,=f,=f,r,r,r,r,r,r,f,f,f,f"
    assert (asm.outputs, asm.inputs) == (4, 10)
    f64 = inline_asm(registry.mma_form("sm80.mma.m16n8k8.f64.f64.f64.f64"))
    assert f64.constraints == ",".join(["=d"] * 4 + ["d"] * 4 + ["d"] * 2 + ["d"] * 4)
    sp = inline_asm(registry.mma_form("sm80.sparse_mma.m16n8k16.ordered_metadata.f16.f16"
                                      ".f16.f16"))
    assert sp.template.endswith("{%0,%1}, {%2,%3}, {%4,%5}, {%6,%7}, %8, %9;")
    assert sp.constraints == "=r,=r,r,r,r,r,r,r,r,n"


_ASM_REG = {"r": "%r", "f": "%f", "d": "%fd"}


def _substituted(form: MmaForm, asm: InlineAsm) -> str:
    """The template with each %N replaced by a register of its constraint's type (the
    selector by the form's first legal value), as a compiler would."""
    ops = []
    for n, c in enumerate(asm.constraint_list):
        letter = c.lstrip("=")
        ops.append(str(form.selectors[0]) if letter == "n" else f"{_ASM_REG[letter]}{n}")
    return re.sub(r"%(\d+)", lambda m: ops[int(m.group(1))], asm.template)


@pytest.mark.parametrize("target", ["sm_90a", "sm_120a"])
def test_inline_asm_templates_assemble(target: str) -> None:
    forms = [f for f in READY if f.available_on(target)]
    version = max(f.ptx_version_for(target) for f in forms)
    body = []
    for f in forms:
        asm = inline_asm(f)
        _check_template(f, asm)
        body.append(_substituted(f, asm))
    ptx = (f".version {version[0]}.{version[1]}\n.target {target}\n.address_size 64\n"
           ".visible .entry k()\n{\n.reg .b32 %r<64>;\n.reg .f32 %f<64>;\n.reg .f64 %fd<64>;\n"
           + "\n".join(body) + "\nret;\n}\n")
    assemble(ptx, target)


# --------------------------------------------------------------------------- test kernels


def _modules_by_target() -> list:
    """One module per first target (every form first legal there), plus one on sm_90a."""
    groups: dict[str, list[MmaForm]] = defaultdict(list)
    for f in READY:
        groups[_first_target(f)].append(f)
    groups["sm_90a"] = [f for f in READY if f.available_on("sm_90a")]
    marks = {"sm_70": [pytest.mark.sm70]}
    return [pytest.param(t, fs, id=t, marks=marks.get(t, [])) for t, fs in sorted(groups.items())]


def _module(target: str, forms: list[MmaForm]) -> Module:
    version = max(f.ptx_version_for(target) for f in forms)
    module = Module(target, version=version)
    for i, f in enumerate(forms):
        add_mma_test_kernel(module, f, f"mma_test_{i}")
    return module


@pytest.mark.parametrize(("target", "forms"), _modules_by_target())
def test_test_kernels_assemble(target: str, forms: list[MmaForm]) -> None:
    res = assemble(_module(target, forms).emit(), target)
    assert len(res.kernels) == len(forms)
    for name, k in res.kernels.items():
        assert k.spills == 0 and k.stack_frame == 0, (name, k.summary())


@pytest.mark.parametrize("form", [_param(f) for f in FORMS])
def test_build_mma_test_module(form: MmaForm) -> None:
    module = build_mma_test_module(form, _first_target(form))
    assert module.version == form.ptx_version_for(_first_target(form))
    (k,) = module.kernels
    assert [p.name for p in k.params] == ["A", "B", "C", "D"] + (["E"] if form.is_sparse else [])
    assert k.emit().count(form.opcode + " ") == 1


def test_every_form_but_the_pending_builds() -> None:
    assert all(_quad_pair(f) for f in PENDING), [f.name for f in PENDING]
    assert len(READY) >= 170


def test_pending_forms_fail_clearly() -> None:
    for f in PENDING:
        with pytest.raises((FragmentError, MmaEmitError)):
            build_mma_test_module(f, "sm_90a")


def test_sparse_selector_is_baked_in() -> None:
    form = registry.mma_form("sm80.sparse_mma.m16n8k16.f32.bf16.bf16.f32")
    text = build_mma_test_module(form, "sm_80", selector=3).emit()
    assert ", 0x3;" in text
    with pytest.raises(MmaEmitError, match="selector 4"):
        build_mma_test_module(form, "sm_80", selector=4)


# --------------------------------------------------------------------------- interpreter

_BASES = {p: (i + 1) << 32 for i, p in enumerate("ABCDE")}
_INS = re.compile(r"^\s*([\w.:]+)\s*(.*);$")


def _operands(text: str) -> list[str | list[str]]:
    out: list[str | list[str]] = []
    for m in re.finditer(r"\{([^}]*)\}|\[([^\]]*)\]|([^,{}\[\]\s][^,{}\[\]]*)", text):
        if m.group(1) is not None:
            out.append([x.strip() for x in m.group(1).split(",")])
        elif m.group(2) is not None:
            out.append("[" + m.group(2).strip() + "]")
        else:
            out.append(m.group(3).strip())
    return out


def run_lane(kernel_text: str, lane: int) -> dict:
    """Interpret the kernel's integer and memory instructions for one lane.

    Returns ``loads``/``stores``: register -> (parameter, byte offset, type), and ``mma``:
    the instruction's operand register lists.
    """
    env: dict[str, int] = {}
    loads: dict[str, tuple[str, int, str]] = {}
    stores: dict[str, tuple[str, int, str]] = {}
    mma: list = []

    def val(x: str) -> int:
        return env[x] if x.startswith("%") else int(x, 0)

    def where(ref: str) -> tuple[str, int]:
        m = re.fullmatch(r"\[(%\w+)(?:\+(\d+))?\]", ref)
        assert m, ref
        addr = env[m.group(1)] + int(m.group(2) or 0)
        param = next(p for p, b in _BASES.items() if b <= addr < b + (1 << 32))
        return param, addr - _BASES[param]

    body = kernel_text[kernel_text.index("{", kernel_text.index(")")) + 1:]
    for raw in body.splitlines():
        line = raw.strip()
        if not line or line.startswith(("//", ".reg", "}", "ret;")):
            continue
        m = _INS.match(line)
        assert m, line
        op, ops = m.group(1), _operands(m.group(2))
        if op.startswith("mma"):
            mma = ops
        elif op == "ld.param.u64":
            env[ops[0]] = _BASES[ops[1].strip("[]")]
        elif op in ("cvta.to.global.u64", "cvt.u64.u32"):
            env[ops[0]] = env[ops[1]]
        elif op == "mov.u32":
            env[ops[0]] = lane if ops[1] == "%laneid" else val(ops[1])
        elif op == "shr.u32":
            env[ops[0]] = val(ops[1]) >> val(ops[2])
        elif op == "shl.b32":
            env[ops[0]] = (val(ops[1]) << val(ops[2])) & 0xFFFFFFFF
        elif op == "and.b32":
            env[ops[0]] = val(ops[1]) & val(ops[2])
        elif op in ("add.u32", "add.s64"):
            env[ops[0]] = val(ops[1]) + val(ops[2])
        elif op == "mad.lo.u32":
            env[ops[0]] = val(ops[1]) * val(ops[2]) + val(ops[3])
        elif op == "div.u32":
            env[ops[0]] = val(ops[1]) // val(ops[2])
        elif op == "rem.u32":
            env[ops[0]] = val(ops[1]) % val(ops[2])
        elif op.startswith("ld.global."):
            loads[ops[0]] = (*where(ops[1]), op.rsplit(".", 1)[1])
        elif op.startswith("st.global."):
            stores[ops[1]] = (*where(ops[0]), op.rsplit(".", 1)[1])
        else:
            raise AssertionError(f"the interpreter does not know '{op}'")
    return {"loads": loads, "stores": stores, "mma": mma}


def _layout_table(layout: object) -> np.ndarray:
    """Every value of a layout, index by index (colexicographic), from its flat modes."""
    idx = np.arange(size(layout))
    out = np.zeros_like(idx)
    prefix = 1
    for shape, stride in flat_modes(layout):
        out += (idx // prefix) % shape * stride
        prefix *= shape
    return out


def _element_offsets(form: MmaForm, op: str) -> np.ndarray:
    """[lane, value] -> element offset in the test kernel's memory, from the atom's (thread,
    value) layout and the PTX layout qualifiers alone (not through the emitter's
    compositions)."""
    tv = form.tv_layout(op)
    nthr = size(tv[0])
    table = _layout_table(tv).reshape(-1, nthr).T  # [thread, value]
    rows, cols = operand_tile(form, op)
    lanes = np.arange(32)
    if nthr == 32:
        product, thread = np.zeros(32, dtype=int), lanes
    else:  # m8n8k4: lanes 4q..4q+3 and 16+4q..16+4q+3 are quad-pair q's threads 0..7
        product, thread = (lanes // 4) % 4, lanes % 4 + 4 * (lanes // 16)
    idx = table[thread]
    r, c = idx % rows, idx // rows
    major = {"A": form.alayout, "B": "row" if form.blayout == "col" else "col"}.get(op, "row")
    within = r * cols + c if major == "row" else r + c * rows
    return product[:, None] * rows * cols + within


def _interpret(form: MmaForm) -> list[dict]:
    text = build_mma_test_module(form, _first_target(form)).emit()
    return [run_lane(text, lane) for lane in range(32)]


@pytest.mark.parametrize("form", [_param(f) for f in FORMS])
def test_addresses_follow_the_fragments_and_cover_each_tile_once(form: MmaForm) -> None:
    lanes = _interpret(form)
    for op, position in (("D", 0), ("A", 1), ("B", 2), ("C", 3)):
        bits = form.operand_type(op).pack_bits
        per_reg = 1 if bits == 64 else 32 // bits
        rows, cols = operand_tile(form, op)
        expected = _element_offsets(form, op)
        loaded = np.zeros(warp_products(form) * rows * cols * bits, dtype=int)
        for lane, state in enumerate(lanes):
            regs = state["mma"][position]
            assert len(regs) == form.registers(op)
            table = state["stores"] if op == "D" else state["loads"]
            for r, reg in enumerate(regs):
                param, byte, ptx_type = table[reg]
                assert param == op and ptx_type == form.register_type(op), (op, lane, r)
                values = expected[lane, r * per_reg:(r + 1) * per_reg]
                assert byte * 8 == values[0] * bits, (op, lane, r, byte, values[0])
                # the register's values sit side by side in memory
                assert list(values) == list(range(values[0], values[0] + per_reg)), (op, lane)
                width = 64 if ptx_type == "f64" else 32
                loaded[byte * 8:byte * 8 + width] += 1
        assert (loaded == 1).all(), (op, "bits loaded twice" if (loaded > 1).any()
                                     else "bits never loaded")
    if form.is_sparse:
        for lane, state in enumerate(lanes):
            e = state["mma"][4]
            assert state["loads"][e] == ("E", 4 * lane, "b32")
            assert state["mma"][5] == f"0x{form.selectors[0]:x}"


def test_lane_part_evaluates_the_composition() -> None:
    """emit_layout_offset of the lane part equals the composed layout at every lane."""
    form = registry.mma_form("sm80.mma.m16n8k64.s32.s4.u4.s32")
    lanes = _interpret(form)
    mem = operand_memory_layout(form, "A")
    for lane, state in enumerate(lanes):
        reg0 = state["mma"][1][0]
        assert state["loads"][reg0][1] * 2 == mem(lane, 0)  # 4-bit elements, 2 per byte


# PTX ISA "Matrix Fragments for mma.m16n8k16/k32/k64" (9.7.14.5.8 - 9.7.14.5.11):
# (lane, element i) -> (row, col) of A (M x K), of B (K x N) and of C (M x N).
def _g(lane: int) -> int:
    return lane >> 2


def _t(lane: int) -> int:
    return lane % 4


ISA = {
    # m16n8k16 .s8/.u8
    (16, 8, 16, 8): (
        lambda ln, i: (_g(ln) + 8 * (i >= 4), _t(ln) * 4 + (i & 3)),
        lambda ln, i: (_t(ln) * 4 + i, _g(ln)),
    ),
    # m16n8k32 .s4/.u4
    (16, 8, 32, 4): (
        lambda ln, i: (_g(ln) + 8 * (i >= 8), _t(ln) * 8 + (i & 7)),
        lambda ln, i: (_t(ln) * 8 + (i & 7), _g(ln)),
    ),
    # m16n8k32 .s8/.u8/.e4m3/.e5m2
    (16, 8, 32, 8): (
        lambda ln, i: (_g(ln) + 8 * (4 <= i < 8 or i >= 12), _t(ln) * 4 + (i & 3) + 16 * (i >= 8)),
        lambda ln, i: (_t(ln) * 4 + (i & 3) + 16 * (i >= 4), _g(ln)),
    ),
    # m16n8k64 .s4/.u4
    (16, 8, 64, 4): (
        lambda ln, i: (_g(ln) + 8 * (8 <= i < 16 or i >= 24),
                       _t(ln) * 8 + (i & 7) + 32 * (i >= 16)),
        lambda ln, i: (_t(ln) * 8 + (i & 7) + 32 * (i >= 8), _g(ln)),
    ),
}


def _isa_c(lane: int, i: int) -> tuple[int, int]:
    return _g(lane) + 8 * (i >= 2), _t(lane) * 2 + (i & 1)


ISA_FORMS = [f for f in FORMS if not f.is_sparse and (f.m, f.n, f.k, f.a.pack_bits) in ISA]


@pytest.mark.parametrize("form", ISA_FORMS, ids=[f.name for f in ISA_FORMS])
def test_addresses_match_the_isa_formulas(form: MmaForm) -> None:
    fa, fb = ISA[(form.m, form.n, form.k, form.a.pack_bits)]
    bits, k = form.a.pack_bits, form.k
    per_reg = 32 // bits
    for lane, state in enumerate(_interpret(form)):
        for op, position, fn, row_len in (("A", 1, fa, k), ("B", 2, fb, None)):
            for r, reg in enumerate(state["mma"][position]):
                byte = state["loads"][reg][1]
                for j in range(per_reg):
                    row, col = fn(lane, r * per_reg + j)
                    # A is M x K row-major; B (K x N) is stored as N x K row-major.
                    element = row * k + col if row_len else col * k + row
                    assert byte * 8 + j * bits == element * bits, (op, lane, r, j)
        d_bits = form.d.pack_bits
        for r, reg in enumerate(state["mma"][0]):
            for j in range(32 // d_bits):
                row, col = _isa_c(lane, r * (32 // d_bits) + j)
                element = row * form.n + col
                assert state["stores"][reg][1] * 8 + j * d_bits == element * d_bits, ("D", lane)


def test_isa_spot_checks_cover_each_family() -> None:
    assert {(f.k, f.a.name) for f in ISA_FORMS} >= {(16, "s8"), (32, "u4"), (32, "e4m3"),
                                                    (64, "s4"), (32, "e5m2")}


def test_interpreter_reads_every_instruction_it_is_given() -> None:
    """The interpreter knows each opcode the emitter writes (so nothing is skipped)."""
    text = "\n".join(build_mma_test_module(f, _first_target(f)).emit() for f in READY[:1])
    ops = set(re.findall(r"^\s+([a-z][\w.:]*)\s", text, flags=re.M))
    known = {"ld.param.u64", "cvta.to.global.u64", "cvt.u64.u32", "mov.u32", "shr.u32",
             "shl.b32", "and.b32", "add.u32", "add.s64", "mad.lo.u32", "div.u32", "rem.u32",
             "ld.global.b32", "ld.global.f32", "ld.global.f64", "st.global.b32",
             "st.global.f32", "st.global.f64", "ret"}
    assert {o for o in ops if not o.startswith("mma")} <= known
    run_lane(text, 0)


def test_operand_tiles_and_products() -> None:
    sp = registry.mma_form("sm80.sparse_mma.m16n8k64.s32.u4.s4.s32")
    assert operand_tile(sp, "A") == (16, 32) and operand_tile(sp, "B") == (8, 64)
    assert warp_products(sp) == 1
    acc = operand_access(sp, "A")
    assert acc.nbytes == 16 * 32 // 2 and acc.reg_bytes == (0, 128)
    assert list(itertools.islice((acc.address(lane, 0) for lane in range(32)), 5)) == \
        [0, 4, 8, 12, 16]
