"""A small CPU interpreter of the PTX the typed-tensor kernels emit (tests only).

It knows the instructions from the PTX ISA, not from our layouts; one CTA runs at a time, its
threads in lockstep, instruction by instruction:

* ``cp.async`` copies 16 bytes when its group is waited for (``cp.async.wait_group N``
  completes all but the newest N committed groups), so a missing wait reads the NaN that
  shared memory starts as; with a ``src-size`` operand it reads that many bytes and fills the
  rest of the 16 with zeros ("cp.async": "the remaining bytes ... are filled with zeros");
  both addresses are 16-byte aligned (the ISA: aligned to cp-size); its source must lie in
  a global array even when it reads nothing;
* ``ldmatrix .m8n8 .x{1,2,4} [.trans] .b16``: lanes ``8 j .. 8 j + 7`` give the row addresses
  of matrix ``j``; register ``j`` of lane ``t`` holds row ``t / 4``, columns ``2 (t % 4) + {0,
  1}`` of matrix ``j`` (with ``.trans``: column ``t / 4``, rows ``2 (t % 4) + {0, 1}``) -- the
  ISA's "Matrix fragment for ldmatrix" figure;
* ``mma.sync.m16n8k16`` is tests/ptx/test_tiled_mma_run.py's (the ISA's fragment formulas),
  per warp of the CTA;
* ``@p`` / ``@!p`` guards per thread, ``setp``, ``selp``, ``and/xor.pred``; ``bra`` must be
  uniform over the CTA (a divergent branch fails the test), labels are jump targets;
* ``setp.CmpOp.BoolOp`` ("setp": ``p = (a CmpOp b) BoolOp c``, here ``.and``);
* integers as the ISA's types ("Integer Arithmetic Instructions"): an ``.u32``/``.b32``
  result wraps modulo 2^32, an ``.s32`` one is two's complement, and a comparison reads its
  operands as its type (a negative ``.s32`` value compared ``.u32`` is huge);
  ``mad.wide.u32`` / ``mul.wide.u32`` ("mad", "mul": ``.wide``) take 32-bit factors and give
  64 bits, ``mad.wide``'s addend is 64-bit; ``min``/``max``/``sub`` of ``.u32``;
* dynamic shared memory ("Dynamic shared memory", ``.extern .shared .align A .b8 name[]``)
  of the size passed to :class:`Machine` (as at launch), after the static arrays;
* ``st.global.b16`` of a 32-bit register stores its low half ("Operand Size Exceeding
  Instruction-Type Size"); ``st.global.v2.b32`` stores two 32-bit registers ("st": ``.v2``),
  ``.v4`` four; every global store's address is a multiple of its size (the ISA: "the
  address must be naturally aligned to a multiple of the access size"; a misaligned one
  faults on the GPU);
* ``st.shared`` / ``ld.shared`` of ``.b32`` words (``.v2``/``.v4``: 2/4 consecutive words,
  aligned to the whole vector, "Vectors" in "ld"): kept per 4-byte word apart from the
  16-bit array ``cp.async`` and ``ldmatrix`` use; reading a word no store wrote fails.

Values are Python numbers (f32 registers hold floats, a packed 16-bit pair a tuple ``(low,
high)``); the tests use small integers so every product, sum and rounding is exact.  Global
arrays may hold NaN where the kernel must not read (padding) or has not written yet.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping

import numpy as np

from tests.ptx.test_tiled_mma_run import _mma

_STRIDE = 0x1000000  # global arrays live at k * _STRIDE, k = 1, 2, ...
_BITS = {"u32": 32, "b32": 32, "s32": 32, "u64": 64, "b64": 64, "s64": 64}
_ALU = {"shr.u32": lambda x, y: x >> y, "and.b32": lambda x, y: x & y,
        "shl.b32": lambda x, y: x << y, "add.u32": lambda x, y: x + y,
        "xor.b32": lambda x, y: x ^ y, "mul.lo.u32": lambda x, y: x * y,
        "add.s64": lambda x, y: x + y, "mad.lo.u32": lambda x, y, z: x * y + z,
        "mad.wide.u32": lambda x, y, z: x * y + z,
        "div.u32": lambda x, y: x // y, "rem.u32": lambda x, y: x % y,
        "sub.s32": lambda x, y: x - y, "max.s32": max, "min.s32": min,
        "mul.wide.u32": lambda x, y: x * y, "mul.lo.u64": lambda x, y: x * y,
        "shl.b64": lambda x, y: x << y, "selp.b32": lambda x, y, p: x if p else y,
        "setp.lt.u32": lambda x, y: x < y, "setp.ge.u32": lambda x, y: x >= y,
        "setp.gt.s32": lambda x, y: x > y, "setp.ne.u32": lambda x, y: x != y,
        "setp.gt.and.s32": lambda x, y, p: x > y and p, "sub.u32": lambda x, y: x - y,
        "min.u32": min, "max.u32": max,
        "selp.b64": lambda x, y, p: x if p else y, "and.pred": lambda x, y: x and y,
        "xor.pred": lambda x, y: x != y, "add.f32": lambda x, y: x + y,
        "max.f32": max, "and.b64": lambda x, y: x & y, "setp.eq.b32": lambda x, y: x == y,
        "setp.eq.b64": lambda x, y: x == y, "setp.ne.b64": lambda x, y: x != y,
        "setp.eq.and.b64": lambda x, y, p: x == y and p}
_COPY = ("cvta.to.global.u64", "cvt.u64.u32", "mov.b32", "mov.u64", "mov.b64", "mov.f32")


def _typed(x: object, ty: str | None) -> object:
    """An integer as the PTX type ``ty`` holds it (floats, pairs and predicates as they are)."""
    bits = _BITS.get(ty) if ty is not None else None
    if bits is None or type(x) is not int:
        return x
    x &= (1 << bits) - 1
    return x - (1 << bits) if ty[0] == "s" and x >> (bits - 1) else x  # type: ignore[index]


@functools.cache
def _alu_types(op: str) -> tuple[tuple[str | None, ...], str | None]:
    """The types ``op`` reads its operands (up to 3) as, and gives its result as (None: as
    computed): a ``.wide`` product takes 32-bit factors and a 64-bit addend and gives 64 bits,
    a comparison gives a predicate."""
    ty = op.rsplit(".", 1)[1]
    if ".wide." in op:
        return (ty, ty, "u64"), "u64"
    out = None if op.startswith(("setp", "and.pred", "xor.pred")) else ty
    return (ty, ty, ty), out


def _immediate(x: str) -> object:
    return 0.0 if x == "0f00000000" else int(x)


@functools.cache
def _address_parts(text: str) -> tuple[str, int]:
    m = re.fullmatch(r"\[?(%\w+)(?:\+(\d+))?\]?", text.strip())
    assert m is not None, text
    return m.group(1), int(m.group(2) or 0)


def address(regs: Mapping[str, int], text: str) -> int:
    """``[%r]`` or ``[%r+imm]`` (PTX ISA "Addresses as Operands")."""
    reg, imm = _address_parts(text)
    return regs[reg] + imm


def _operands(args: str) -> list[str]:
    return [x.strip() for x in re.sub(r"\{([^}]*)\}", lambda g: g.group(1).replace(",", ";"),
                                      args).split(",")] if args else []


class Machine:
    """Runs one kernel of ``ptx``; ``params`` maps each parameter to an int (a scalar) or to
    ``(array, element bytes)`` (a global array, passed by address; written in place)."""

    def __init__(self, ptx: str, params: Mapping[str, object], threads: int = 128,
                 dynamic_smem: int = 0) -> None:
        self.threads = threads
        self.param: dict[str, int] = {}
        self.glob: dict[int, tuple[np.ndarray, int]] = {}
        for i, (name, v) in enumerate(params.items(), 1):
            if isinstance(v, tuple):
                self.param[name] = i * _STRIDE
                self.glob[i * _STRIDE] = v
            else:
                self.param[name] = int(v)  # type: ignore[call-overload]
        self.shared_base, top = {}, 0
        for name, n in re.findall(r"\.shared \.align \d+ \.b8 (\w+)\[(\d+)\]", ptx):
            self.shared_base[name] = top
            top += int(n)
        for align, name in re.findall(r"\.extern \.shared \.align (\d+) \.b8 (\w+)\[\]",
                                      ptx):
            top = -(-top // int(align)) * int(align)
            self.shared_base[name] = top
            top += dynamic_smem
        self.smem_elems = top // 2
        body = ptx[ptx.index("{", ptx.index(".entry")):]
        self.code: list[tuple[str | None, str, list[str], str]] = []
        self.labels: dict[str, int] = {}
        for line in body.splitlines():
            s = line.strip()
            if re.fullmatch(r"\$?\w+:", s):
                self.labels[s[:-1]] = len(self.code)
                continue
            m = re.match(r"(@!?%\w+\s+)?([a-z][\w.:]*)(?:\s+(.*))?;$", s)
            if not m or m.group(2) in (".reg", ".shared", "ret"):
                continue
            pred = m.group(1).strip()[1:] if m.group(1) else None
            self.code.append((pred, m.group(2), _operands(m.group(3) or ""), s))

    def global_at(self, addr: int) -> tuple[np.ndarray, int]:
        arr, esize = self.glob[addr - addr % _STRIDE]
        off = addr % _STRIDE
        assert off % esize == 0 and off // esize < arr.size, f"{addr:#x} outside its array"
        return arr, off // esize

    def run(self, ctaid: tuple[int, int] = (0, 0)) -> None:
        self.ctaid = ctaid
        self.smem = np.full(self.smem_elems, np.nan)  # 16-bit elements
        self.words: dict[int, object] = {}  # st.shared / ld.shared: 4-byte words
        self.groups: list[list[tuple[int, int, int]]] = [[]]
        self.regs: list[dict] = [{} for _ in range(self.threads)]
        pc = 0
        while pc < len(self.code):
            pred, op, ops, line = self.code[pc]
            pc += 1
            on = [self._guard(r, pred) for r in self.regs]
            if op.startswith("bra"):
                assert len(set(on)) == 1, f"divergent branch '{line}'"
                if on[0]:
                    pc = self.labels[ops[0]]
                continue
            self.step(line, op, ops, on)
        self._wait(0)

    @staticmethod
    def _guard(r: dict, pred: str | None) -> bool:
        if pred is None:
            return True
        return not r[pred[1:]] if pred.startswith("!") else bool(r[pred])

    def _smem_row(self, addr: int) -> np.ndarray:
        assert addr % 16 == 0 and 0 <= addr < 2 * self.smem.size, addr
        row = self.smem[addr // 2: addr // 2 + 8]
        assert not np.isnan(row).any(), f"ldmatrix reads shared bytes {addr} not yet copied"
        return row

    def _ldmatrix(self, op: str, dst: list[str], addr: str) -> None:
        trans = ".trans" in op
        for w in range(self.threads // 32):
            lanes = self.regs[32 * w: 32 * w + 32]
            for j, reg in enumerate(dst):
                rows = [self._smem_row(address(lanes[8 * j + r], addr)) for r in range(8)]
                for t, r in enumerate(lanes):
                    c = 2 * (t % 4)
                    r[reg] = ((rows[c][t // 4], rows[c + 1][t // 4]) if trans
                              else (rows[t // 4][c], rows[t // 4][c + 1]))

    def _wait(self, n: int) -> None:
        done, self.groups = self.groups[:-1], self.groups[-1:]
        for group in done[:len(done) - n]:
            for dst, src, nbytes in group:
                assert dst % 16 == 0 and 0 <= dst // 2 + 8 <= self.smem.size, dst
                chunk = np.zeros(8)
                if nbytes:
                    arr, i = self.global_at(src)
                    chunk[:nbytes // 2] = arr[i:i + nbytes // 2]
                self.smem[dst // 2: dst // 2 + 8] = chunk
        self.groups = (done[len(done) - n:] if n else []) + self.groups

    def step(self, line: str, op: str, ops: list[str], on: list[bool]) -> None:
        if op.startswith(("mma.sync", "ldmatrix")):
            assert all(on), f"a predicated warp-collective '{line}'"
            groups = [g.split(";") for g in ops]
            if op.startswith("mma"):
                _mma(self.regs, *([x.strip() for x in g] for g in groups))
            else:
                self._ldmatrix(op, [x.strip() for x in groups[0]], ops[1])
            return
        if op == "cp.async.commit_group":
            self.groups.append([])
        elif op == "cp.async.wait_group":
            self._wait(int(ops[0]))
        elif op in _ALU:  # the common case, without the per-thread dispatch
            f, (types, out) = _ALU[op], _alu_types(op)
            srcs = [(x, None) if x.startswith("%") else ("", _immediate(x)) for x in ops[1:]]
            dst = ops[0]
            for tid, r in enumerate(self.regs):
                if on[tid]:
                    args = [_typed(r[x] if x else c, t) for (x, c), t in zip(srcs, types,
                                                                               strict=False)]
                    r[dst] = _typed(f(*args), out)
        elif op != "bar.sync":
            for tid, r in enumerate(self.regs):
                if on[tid]:
                    self._thread(line, op, ops, tid, r)

    def _thread(self, line: str, op: str, ops: list[str], tid: int, r: dict) -> None:
        def v(x: str) -> object:
            return r[x] if x.startswith("%") else _immediate(x)

        if op.startswith("ld.param"):
            r[ops[0]] = self.param[ops[1].strip("[]")]
        elif op == "mov.u32":
            src = ops[1]
            r[ops[0]] = (tid if src == "%tid.x" else self.ctaid[0] if src == "%ctaid.x"
                         else self.ctaid[1] if src == "%ctaid.y" else
                         self.shared_base[src] if src in self.shared_base else v(src))
        elif op in _COPY:
            r[ops[0]] = _typed(v(ops[1]), op.rsplit(".", 1)[1])
        elif op == "cp.async.cg.shared.global":
            assert ops[2] == "16", line
            nbytes = int(v(ops[3])) if len(ops) > 3 else 16  # type: ignore[call-overload]
            assert 0 <= nbytes <= 16 and nbytes % 2 == 0, line
            src, dst = address(r, ops[1]), address(r, ops[0])
            assert src % 16 == 0 and dst % 16 == 0, f"'{line}': not 16-byte aligned"
            self.global_at(src)  # even a zero-byte chunk must point into its array
            self.groups[-1].append((dst, src, nbytes))
        elif op in ("ld.global.v2.b32", "ld.global.b32"):
            arr, i = self.global_at(address(r, ops[1]))
            for j, reg in enumerate(ops[0].split(";")):
                r[reg.strip()] = arr[i + j]
        elif op in ("cvt.rn.bf16x2.f32", "cvt.rn.f16x2.f32"):
            r[ops[0]] = (r[ops[2]], r[ops[1]])  # the first source goes high
        elif op in ("st.global.b32", "st.global.b16"):
            _aligned(line, address(r, ops[0]), 4 if op.endswith("b32") else 2)
            arr, i = self.global_at(address(r, ops[0]))
            val = r[ops[1]]
            n = 2 if op.endswith("b32") and isinstance(val, tuple) else 1
            assert np.isnan(arr[i:i + n]).all(), f"element {i} written twice ('{line}')"
            arr[i:i + n] = val[:n] if isinstance(val, tuple) else val
        elif op in ("st.global.v2.b32", "st.global.v4.b32"):
            _aligned(line, address(r, ops[0]), 8 if ".v2." in op else 16)
            arr, i = self.global_at(address(r, ops[0]))
            vals = []
            for x in ops[1].split(";"):
                val = r[x.strip()]
                vals.extend(val if isinstance(val, tuple) else (val,))
            assert np.isnan(arr[i:i + len(vals)]).all(), f"element {i} written twice ('{line}')"
            arr[i:i + len(vals)] = vals
        elif op.startswith(("st.shared", "ld.shared")) and op.endswith(".b32"):
            store = op.startswith("st")
            regs = [x.strip() for x in ops[1 if store else 0].split(";")]
            addr = address(r, ops[0 if store else 1])
            assert addr % (4 * len(regs)) == 0 and 0 <= addr and \
                addr + 4 * len(regs) <= 2 * self.smem.size, f"'{line}': address {addr}"
            for j, reg in enumerate(regs):
                if store:
                    self.words[addr + 4 * j] = r[reg]
                else:
                    assert addr + 4 * j in self.words, \
                        f"'{line}' reads shared word {addr + 4 * j} no store wrote"
                    r[reg] = self.words[addr + 4 * j]
        else:
            raise AssertionError(f"the interpreter does not know '{line}'")


def _aligned(line: str, addr: int, nbytes: int) -> None:
    assert addr % nbytes == 0, f"'{line}': address {addr:#x} is not {nbytes}-byte aligned"


def planted_bugs(stages: int) -> dict[str, Callable[[str], str]]:
    """Edits of a correct multistage GEMM's PTX (``stages`` shared-memory stages) that each
    break it, for the tests that show their CPU check is not vacuous: src-size always 16 (the
    NaN padding past K, M or N is read), a wait for one stage fewer (a stage read before it
    lands), stores without their predicate (past M or N), the K loop's back edge removed."""
    return {
        "src-size always 16": lambda p: re.sub(
            r"(cp\.async\.cg\.shared\.global [^;]*, 16), %r\d+;", r"\1, 16;", p),
        "a wait for one stage fewer": lambda p: p.replace(
            f"cp.async.wait_group {stages - 2};", f"cp.async.wait_group {stages - 1};"),
        "unguarded stores": lambda p: re.sub(r"@%p\d+ (st\.global)", r"\1", p),
        "one K iteration": lambda p: p.replace("bra.uni", "// bra.uni"),
    }
