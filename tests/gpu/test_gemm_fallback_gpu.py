"""``nvatom.gemm`` on an sm_90 GPU with every storage the docs allow (docs/runtime.md): offset
views (``a[:, 1:]``, storage offsets), odd row pitches, broadcast (stride 0) and overlapping
operand rows, misaligned ``out``; bf16/f16 (any output type) and e4m3.

Each case is checked against torch's float64 product; operands are views into NaN-filled
buffers (a read outside an operand poisons the result) and ``out`` is a view into a NaN-filled
buffer (an element left unwritten stays NaN; a store outside it shows in the padding).  Each
case must run on the SM90 provider whenever SM90 supports the problem (else the documented
fallback, the SM80 kernel, with SM90's reason), and stage exactly the operands that break the
chosen kernel's memory rules, re-stated here from their sources: TMA (CUDA Driver API,
``cuTensorMapEncodeTiled``: 16-byte aligned global address, row pitch a multiple of 16 bytes)
plus rows that do not overlap; cp.async 16-byte source chunks and pair-aligned stores (SM80).
"""

from __future__ import annotations

import random

import pytest

pytestmark = pytest.mark.gpu

torch = pytest.importorskip("torch")

from nvatom.gemm import check_operands, explain, gemm  # noqa: E402
from nvatom.gemm_providers import Sm90Provider  # noqa: E402


def _require_sm90() -> None:
    if not torch.cuda.is_available() or torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("the SM90 GEMM needs an sm_90 (Hopper) GPU")


T = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32,
     "e4m3": torch.float8_e4m3fn}
EB = {"bf16": 2, "f16": 2, "f32": 4, "e4m3": 1}


def _poisoned(numel: int, dt: str) -> torch.Tensor:
    """A flat CUDA buffer of NaN (e4m3fn's NaN is the byte 0x7f)."""
    if dt == "e4m3":
        return torch.full((numel,), 0x7F, dtype=torch.uint8, device="cuda").view(T[dt])
    return torch.full((numel,), float("nan"), dtype=T[dt], device="cuda")


def _view(rows: int, cols: int, dt: str, major: str, ld: int, offset: int
          ) -> tuple[torch.Tensor, torch.Tensor]:
    """(view, its buffer): a rows x cols view with leading stride ``ld`` (row- or
    column-major) ``offset`` elements into a NaN-filled buffer with NaN slack at the end."""
    lines = rows if major == "row" else cols
    inner = cols if major == "row" else rows
    numel = offset + max(lines - 1, 0) * ld + inner + 64
    buf = _poisoned(numel, dt)
    strides = (ld, 1) if major == "row" else (1, ld)
    return buf.as_strided((rows, cols), strides, offset), buf


def _inside(t: torch.Tensor, offset: int, numel: int) -> torch.Tensor:
    """Boolean mask over a flat buffer of ``numel``: the elements the view ``t`` (starting
    ``offset`` elements in) covers."""
    rows = torch.arange(t.shape[0], device="cuda").unsqueeze(1) * t.stride(0)
    cols = torch.arange(t.shape[1], device="cuda").unsqueeze(0) * t.stride(1)
    mask = torch.zeros(numel, dtype=torch.bool, device="cuda")
    mask[(offset + rows + cols).flatten()] = True
    return mask


def _fill(v: torch.Tensor, buf: torch.Tensor, offset: int, dt: str,
          gen: torch.Generator) -> None:
    """Random, exactly representable values in the memory the view covers (through the
    buffer: a broadcast or overlapping view cannot be written through; the reference reads
    the same memory through the view)."""
    x = torch.randn(buf.numel(), generator=gen, device="cuda")
    vals = (x * 2).to(T[dt]) if dt == "e4m3" else x.to(T[dt])
    mask = _inside(v, offset, buf.numel())
    if dt == "e4m3":  # select bytes: torch.where has no float8 kernel everywhere
        bu, vu = buf.view(torch.uint8), vals.view(torch.uint8)
        bu.copy_(torch.where(mask, vu, bu))
    else:
        buf.copy_(torch.where(mask, vals, buf))


def _tma_ok(t: torch.Tensor, eb: int) -> bool:
    # storage order as docs/runtime.md defines it: unit stride along columns (row-major) or
    # along rows (column-major); one column counts as row-major unless its stride is 1
    s0, s1 = t.stride()
    major = "row" if s1 == 1 or (t.shape[1] == 1 and s0 != 1) else "col"
    lines = t.shape[0] if major == "row" else t.shape[1]
    inner = t.shape[1] if major == "row" else t.shape[0]
    ld = t.stride(0) if major == "row" else t.stride(1)
    if t.data_ptr() % 16:
        return False
    return lines <= 1 or (ld * eb % 16 == 0 and ld >= inner)


def _case(rng: random.Random):
    fp8 = rng.random() < 0.15
    ind = "e4m3" if fp8 else rng.choice(["bf16", "f16"])
    outd = "bf16" if fp8 else rng.choice(["bf16", "f16", "f32"])
    m = rng.choice([1, 5, 64, 128, 200, 333])
    if fp8:
        k, n = 16 * rng.randint(1, 24), 8 * rng.randint(1, 48)
    else:
        k = rng.choice([1, 7, 8, 24, 64, 72, 136, 264, 520])
        n = rng.choice([2, 6, 8, 10, 64, 96, 136, 256, 392])

    def pitch(inner: int) -> int:
        r = rng.random()
        if r < 0.05:
            return 0  # broadcast: every line is the same memory
        if r < 0.08 and inner > 1:
            return inner - 1  # overlapping lines
        return inner + rng.choice([0] * 16 + [1, 2, 3, 5, 8, 64])

    def offset() -> int:
        return rng.choice([0] * 16 + [1, 2, 3, 4, 8, 12])

    am = "row" if fp8 else rng.choice(["row", "col"])
    bm = "col" if fp8 else rng.choice(["row", "col"])
    return (ind, outd, m, n, k, (am, pitch(k if am == "row" else m), offset()),
            (bm, pitch(n if bm == "row" else k), offset()),
            (n + rng.choice([0] * 12 + [1, 2, 4, 6, 10, 64]), rng.choice([0] * 12 + [1, 2, 3, 6])))


def _run_case(case, gen: torch.Generator) -> tuple[str, tuple[str, ...]]:
    ind, outd, m, n, k, (am, lda, offa), (bm, ldb, offb), (ldd, offd) = case
    a, abuf = _view(m, k, ind, am, lda, offa)
    b, bbuf = _view(k, n, ind, bm, ldb, offb)
    _fill(a, abuf, offa, ind, gen)
    _fill(b, bbuf, offb, ind, gen)
    out, obuf = _view(m, n, outd, "row", ldd, offd)
    scales = {}
    if ind == "e4m3":
        scales = {"scale_a": torch.tensor(0.75, device="cuda"),
                  "scale_b": torch.tensor(1.5, device="cuda")}
    r = explain(a, b, out, **scales)
    problem = check_operands(a, b, out, **scales)[3]
    why_not_sm90 = Sm90Provider().reject(problem, (9, 0))
    if why_not_sm90 is None:
        assert r.provider == "sm90", (case, r)
        for name, t in (("a", a), ("b", b), ("out", out)):
            assert _tma_ok(t, EB[outd if name == "out" else ind]) == (name not in r.staged), \
                (case, name, r.staged, r.why)
    else:  # the documented fallback: SM80, for a problem SM90 does not take
        assert r.provider == "sm80" and ind != "e4m3", (case, why_not_sm90)
    assert gemm(a, b, out, **scales) is out
    torch.cuda.synchronize()
    ref = a.double() @ b.double()
    if ind == "e4m3":
        ref = ref * (0.75 * 1.5)
    assert not torch.isnan(out).any(), (case, r.staged, "elements left unwritten")
    inside = _inside(out, offd, obuf.numel())
    assert torch.isnan(obuf[~inside]).all(), (case, "a store outside out")
    denom = float(ref.norm()) or 1.0
    err = float((out.double() - ref).norm()) / denom
    assert err < (1e-5 if outd == "f32" else 8e-3), (case, r.provider, r.staged, err)
    return r.provider, r.staged


def test_random_legal_storage_runs_and_matches_float64() -> None:
    _require_sm90()
    rng = random.Random(2026)
    gen = torch.Generator(device="cuda")
    gen.manual_seed(7)
    seen = {"sm90": 0, "sm80": 0, "staged": 0, "in place": 0}
    for _ in range(160):
        provider, staged = _run_case(_case(rng), gen)
        seen[provider] += 1
        seen["staged" if staged else "in place"] += 1
    assert min(seen.values()) > 0, seen


@pytest.mark.parametrize("what", ["a[:, 1:]", "out[:, 2:]", "out odd pitch", "b col offset",
                                  "b broadcast", "f32 out offset", "e4m3 b offset",
                                  "e4m3 out offset", "all misaligned"])
def test_named_views(what: str) -> None:
    """The views the issue names, each on SM90 with the operand staged."""
    _require_sm90()
    gen = torch.Generator(device="cuda")
    gen.manual_seed(11)
    m, n, k = 257, 392, 528  # K a multiple of 16, N of 8: SM90 takes every type
    cases = {
        "a[:, 1:]": ("bf16", "bf16", ("row", k + 1, 1), ("row", n, 0), (n, 0), ("a",)),
        "out[:, 2:]": ("bf16", "bf16", ("row", k, 0), ("row", n, 0), (n + 2, 2), ("out",)),
        "out odd pitch": ("f16", "f16", ("row", k, 0), ("col", k, 0), (n + 1, 0), ("out",)),
        "b col offset": ("f16", "f32", ("row", k, 0), ("col", k + 5, 3), (n, 0), ("b",)),
        "b broadcast": ("bf16", "f32", ("row", k, 0), ("row", 0, 0), (n, 0), ("b",)),
        "f32 out offset": ("bf16", "f32", ("row", k, 0), ("row", n, 0), (n, 1), ("out",)),
        "e4m3 b offset": ("e4m3", "bf16", ("row", k, 0), ("col", k, 8), (n, 0), ("b",)),
        "e4m3 out offset": ("e4m3", "bf16", ("row", k + 16, 0), ("col", k, 0), (n + 8, 4),
                            ("out",)),
        "all misaligned": ("bf16", "bf16", ("row", k + 3, 1), ("row", n + 1, 1), (n + 2, 2),
                           ("a", "b", "out")),
    }
    ind, outd, sa, sb, so, staged = cases[what]
    provider, got = _run_case((ind, outd, m, n, k, sa, sb, so), gen)
    assert (provider, got) == ("sm90", staged)


def test_staged_call_twice_and_then_aligned() -> None:
    """A staged call is not call-cached (its buffers are per call): running it again, and
    then an aligned call on the same operands' shapes, gives the right product each time."""
    _require_sm90()
    gen = torch.Generator(device="cuda")
    gen.manual_seed(3)
    case = ("bf16", "bf16", 192, 256, 128, ("row", 129, 1), ("row", 256, 0), (258, 2))
    for _ in range(2):
        assert _run_case(case, gen) == ("sm90", ("a", "out"))
    aligned = ("bf16", "bf16", 192, 256, 128, ("row", 128, 0), ("row", 256, 0), (256, 0))
    assert _run_case(aligned, gen) == ("sm90", ())
