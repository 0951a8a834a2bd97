"""A bounded fuzzing campaign in CI (issue 17): scripts/fuzz.py's seven targets (layout strings,
swizzles, atom names, descriptor words, CLI argv, IR modules, Python API calls), in-process,
once with a fixed seed and once with a random seed that is printed (replay:
``NVATOM_FUZZ_SEED=<seed>``, or ``python scripts/fuzz.py --seed <seed> --replay TARGET:INDEX``
for one input).  Every input
must end in success or a clean error: no traceback, hang, internal error or MemoryError.

``NVATOM_FUZZ_SCALE`` multiplies the budget (default 1: about 5,400 inputs per seed, a few
seconds each on an idle core).  The tests after it check that the tool's classification can
fail: planted bugs of each kind are counted as failures, with their reproducer.
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Callable

import pytest

from tests.fuzz_support import fuzz, grammars

SCALE = float(os.environ.get("NVATOM_FUZZ_SCALE", "1"))
RANDOM_SEED = int(os.environ.get("NVATOM_FUZZ_SEED", str(random.randrange(1 << 32))))
#: Inputs per target and seed: the cheap targets get many, atom names (each resolved through
#: seven registries, ~20 ms) and CLI runs (~8 ms) fewer.
BUDGET = {"layout": 1500, "swizzle": 1500, "descriptor": 1500, "atom_name": 60, "cli": 150,
          "ir": 300, "api": 400}


#: Bugs a campaign found and that are still open (docs/reliability.md, "Fuzzing"), each a
#: predicate on a failure record: the random-seed run prints a failure that matches one but
#: does not fail on it.  None is open: the bugs the campaigns found are fixed, their
#: reproducers the test_fixed_* regression tests below (the last two, the kernel layer's huge
#: layouts, fixed in src/nvatom/kernels/tensor.py after the 1M run on c6f21ec).
KNOWN_OPEN: dict[str, Callable[[dict], bool]] = {}


def _known(f: dict) -> str | None:
    return next((k for k, match in KNOWN_OPEN.items() if match(f)), None)


@pytest.mark.parametrize("which", ["fixed", "random"])
def test_campaign_has_no_failures(which: str, capsys: pytest.CaptureFixture[str]) -> None:
    seed = 20261125 if which == "fixed" else RANDOM_SEED
    per_target = {t: max(1, int(n * SCALE)) for t, n in BUDGET.items()}
    with capsys.disabled():
        print(f"\n[fuzz campaign] {which} seed {seed} (replay: NVATOM_FUZZ_SEED={seed}), "
              f"{sum(per_target.values())} inputs")
    t0 = time.perf_counter()
    report = fuzz.campaign(seed, per_target, workers=0, time_limit=10.0)
    with capsys.disabled():
        print(fuzz.table(report) + f"\n({time.perf_counter() - t0:.1f} s)")
    new = []
    for f in report["failures"]:
        known = _known(f)
        with capsys.disabled():
            print(f"FAILURE{f' (known open: {known})' if known else ''} {f['class']} "
                  f"{f['target']}:{f['index']} input {f['input']!r}\n{f['detail']}")
        if not known or which == "fixed":
            new.append(f)
    assert report["total"]["inputs"] == sum(per_target.values())
    assert not new, f"{len(new)} failures; first: {new[0]}"
    for target, counts in report["targets"].items():
        # the grammars reach both outcomes of every target (a grammar that only ever makes
        # garbage, or never any, tests little)
        assert counts["clean"] > 0, target
        if target != "atom_name" or SCALE >= 1:
            assert counts["ok"] > 0, target


def test_inputs_are_a_function_of_seed_target_and_index() -> None:
    for target in fuzz.TARGETS:
        assert fuzz.make_input(7, target, 3) == fuzz.make_input(7, target, 3)
        assert len({repr(fuzz.make_input(7, target, i)) for i in range(20)}) > 10


def test_real_atom_names_cover_every_family() -> None:
    names = grammars.real_atom_names()
    for prefix in ("sm70.", "sm80.", "sm90.", "sm100.mma.", "sm100.mma_bs.", "SM120.",
                   "atom.", "tcgen05.mma"):
        assert any(n.startswith(prefix) for n in names), prefix
    resolved = sum(fuzz.classify("atom_name", n)[0] == "ok" for n in names[::101])
    assert resolved == len(names[::101])  # every listed name resolves through some registry


def test_planted_bugs_are_failures(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each failure class is detected: a traceback, a hang, a MemoryError, an internal error
    of the CLI (exit 70), an internal IR diagnostic, malformed error output."""
    import sys

    import nvatom.layout as L

    def boom(*a: object) -> None:
        raise ZeroDivisionError("planted")

    def spin(*a: object) -> None:
        while True:
            pass

    def oom(*a: object) -> None:
        raise MemoryError

    case = {"text": "(4,8):(8,1)", "ops": []}
    for fn, want in ((boom, "traceback"), (spin, "hang"), (oom, "memory")):
        monkeypatch.setattr(L, "parse_layout", fn)
        kind, detail = fuzz.classify("layout", case, time_limit=0.3)
        assert kind == want, (kind, detail)
    # the CLI catches the bug itself and exits 70 with one line
    monkeypatch.setattr(L, "parse_layout", boom)
    assert fuzz.classify("cli", ["layout", "8:1"])[0] == "internal"
    monkeypatch.undo()

    def two_lines(*a: object) -> int:
        print("nvatom: error: one\nnvatom: error: two", file=sys.stderr)
        return 2

    monkeypatch.setattr("nvatom.cli.main", two_lines)
    assert fuzz.classify("cli", ["layout", "8:1"])[0] == "wrong"
    monkeypatch.undo()

    from nvatom.ir import lower as LW

    def lower_boom(self: object, op: object) -> None:
        raise KeyError("planted")

    monkeypatch.setattr(LW._KernelLowering, "_cute_nvgpu_atom_mma", lower_boom)
    text = next(s for s in grammars.ir_seeds() if "cute_nvgpu.atom.mma " in s
                and "expected-error" not in s)
    kind, detail = fuzz.classify("ir", {"text": text, "target": None})
    assert kind == "internal" and "KeyError" in detail, (kind, detail)


def test_a_campaign_reports_a_planted_failure_with_its_reproducer(
        monkeypatch: pytest.MonkeyPatch) -> None:
    orig = fuzz.RUNNERS["swizzle"]

    def planted(case: dict) -> str:
        if case["b"] == 3 and case["m"] == 3:
            raise IndexError("planted")
        return orig(case)

    monkeypatch.setitem(fuzz.RUNNERS, "swizzle", planted)
    report = fuzz.campaign(11, {"swizzle": 300}, workers=0)
    bad = report["failures"]
    assert bad and report["total"]["traceback"] == len(bad)
    first = bad[0]
    assert fuzz.make_input(11, "swizzle", first["index"]) == first["input"]
    assert (first["input"]["b"], first["input"]["m"]) == (3, 3)
    assert "IndexError: planted" in first["detail"]


# --------------------------------------------------------------------------- open bugs
# Found by the campaign of 2026-11-25 (seed 20261125); the reproducers are minimal.  Each test
# states the contract (success or a clean error) and fails strictly once it holds.

TMA_IM2COL_RANK2 = (0x11 << 64).to_bytes(128, "little").hex()  # byte 8: im2col, rank 2


def test_fixed_tma_im2col_map_of_rank_2() -> None:
    assert fuzz.classify("descriptor", {"kind": "tma", "hex": TMA_IM2COL_RANK2})[0] == "clean"
    assert fuzz.classify("cli", ["desc", "tma", "decode", TMA_IM2COL_RANK2])[0] == "clean"


def test_fixed_frag_of_sm70_col_major_a() -> None:
    argv = ["frag", "sm70.mma.m8n8k4.col.col.f32.f16.f16.f16", "--no-table", "--operand", "A"]
    assert fuzz.classify("cli", argv)[0] == "ok"


def test_fixed_nul_in_a_file_name() -> None:
    for argv in (["compile", "\x00"], ["verify", "a\x00b"], ["ptxas", "\x00", "-t", "sm_80"],
                 ["demo", "--out", "\x00"]):
        assert fuzz.classify("cli", argv)[0] == "clean", argv


def test_fixed_int_type_width_followed_by_a_dash() -> None:
    """xdsl_adapter's pre-scan reads ``i16777216-1`` as one name (it takes '-' and non-ASCII
    letters into names), so the width check misses it while xDSL builds the 16777216-bit
    type; these cheap cases must be the located "too wide" diagnostic, like ``i16777216``."""
    from nvatom.ir import driver

    for ty in ("i16777216-1", "i16777216\u00e9"):  # xDSL ends the type at '-' and at 'é'
        text = f"func.func @f() {{\n  %c = arith.constant 1 : {ty}\n  func.return\n}}\n"
        with pytest.raises(driver.IRError) as e:
            driver.verify(driver.parse(text, "t.mlir"))
        assert "is too wide (the limit is 16777215 bits" in str(e.value.diagnostics[0]), ty


# --------------------------------------------------------------------------- the api target


def _api(fn: str, args: list, kw: dict | None = None, **extra: object) -> tuple[str, str]:
    return fuzz.classify("api", {"fn": fn, "args": args, "kw": kw or {},
                                 "capability": [9, 0], **extra})


def _t(shape: list, dtype: str = "bfloat16", strides: list | None = None) -> dict:
    return grammars.tensor_spec(random.Random(0), shape, dtype) if strides is None else \
        {"tensor": {"shape": shape, "strides": strides, "dtype": f"torch.{dtype}",
                    "ptr": 0x7F0000000000, "device": ["cuda", 0]}}


def test_api_calls_reach_the_device_seam_and_leave_no_fakes() -> None:
    """A call that passes every check stops where it would launch (counted a success): the
    GEMM, the fused GEMM, the grouped GEMM and attention; the fakes are gone afterwards."""
    import sys

    before = sys.modules.get("torch")
    a, b = _t([256, 512]), _t([512, 384])
    assert _api("gemm", [a, b]) == ("ok", "")
    assert _api("gemm", [a, b], {"bias": _t([384], "float32"), "activation": "gelu"}) == \
        ("ok", "")
    grouped = [_t([256, 512]), _t([2, 512, 384]), [100, 256]]
    assert _api("grouped_gemm", grouped) == ("ok", "")
    q = _t([1, 8, 128, 128])
    assert _api("attention", [q, q, q], {"causal": True}) == ("ok", "")
    assert _api("gemm", [a, _t([384, 512])])[0] == "clean"  # shapes do not chain
    assert _api("kernels.tensor.fragment", [{"mma_form": "sm80.mma.m16n8k16.f32.bf16.bf16.f32"},
                                            "A"], target="sm_80") == ("ok", "")
    assert sys.modules.get("torch") is before
    import nvatom.gemm as gm

    assert gm.get_kernel.__module__ == "nvatom.runtime.launch"  # the real one again


def test_api_planted_bugs_are_failures(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any exception but an NvatomError is a traceback; an NvatomError of two lines is wrong
    output."""
    import nvatom.gemm as gm
    from nvatom.errors import NvatomError

    a, b = _t([64, 64]), _t([64, 64])

    def boom(*args: object, **kw: object) -> None:
        raise KeyError("planted")

    monkeypatch.setattr(gm, "check_operands", boom)
    kind, detail = _api("gemm", [a, b])
    assert kind == "traceback" and "KeyError: 'planted'" in detail

    def two_lines(*args: object, **kw: object) -> None:
        raise gm.GemmError("one\ntwo")

    monkeypatch.setattr(gm, "check_operands", two_lines)
    assert _api("gemm", [a, b])[0] == "wrong"
    monkeypatch.setattr(gm, "check_operands", lambda *a, **k: (_ for _ in ()).throw(
        NvatomError("one line")))
    assert _api("gemm", [a, b])[0] == "clean"


def test_api_regressions_stay_clean() -> None:
    """The api target's findings (fixed): each input ends in a clean error now."""
    a, b = _t([64, 64]), _t([64, 64])
    for kw in ({"alpha": 10**400}, {"alpha": None, "activation": "relu"},
               {"c": _t([64, 64]), "beta": -(10**400)}, {"provider": ["sm90"]}):
        assert _api("gemm", [a, b], kw)[0] == "clean", kw
    assert _api("explain", [a, b], {"capability": {"np": {"type": "float32", "v": 9.0}}})[0] \
        == "clean"
    assert _api("explain", [a, b], {"capability": [9, 0]})[0] == "ok"
    grouped = [_t([64, 128]), _t([2, 128, 64]), [32, 64]]
    assert _api("grouped_gemm", grouped, {"out": _t([64, 64]), "fast_accum": [1]})[0] == "clean"
    # the lead's: a numpy-scalar scale, 10**400 scales, an attention scale past float32
    e4, e4b = _t([64, 128], "float8_e4m3fn"), {"tensor": {
        "shape": [2, 128, 64], "strides": [8192, 1, 128], "dtype": "torch.float8_e4m3fn",
        "ptr": 0x7F0000000000, "device": ["cuda", 0]}}
    assert _api("grouped_gemm", [e4, e4b, [32, 64]],
                {"scale_a": {"np": {"type": "float32", "v": 2.0}}, "scale_b": 1.0})[0] == "clean"
    assert _api("grouped_gemm", [e4, e4b, [32, 64]],  # np.float64 is a float
                {"scale_a": {"np": {"type": "float64", "v": 2.0}}, "scale_b": 1.0})[0] == "ok"
    assert _api("grouped_gemm", [e4, e4b, [32, 64]],
                {"scale_a": 10**400, "scale_b": 1.0})[0] == "clean"
    q = _t([1, 8, 128, 128])
    assert _api("attention", [q, q, q], {"scale": 3e38})[0] == "clean"  # x log2(e) > f32
    for operand in ("", "AB"):
        assert _api("kernels.tensor.fragment", [{"mma_form": FORM_NAME}, operand],
                    target="sm_80")[0] == "clean"


def test_fixed_grouped_call_cache_keys_fast_accum_by_type() -> None:
    """Found by the campaign of 2026-11-28 (seed 20261128, api:131748, shortened): after a
    grouped FP8 call with ``fast_accum=True`` and ``out``, the same call with
    ``fast_accum=1.0`` hit the unchecked call cache (``1.0 == True``) and launched; alone it
    is refused."""
    def e(shape: list, strides: list, dtype: str, ptr: int) -> dict:
        return {"tensor": {"shape": shape, "strides": strides, "dtype": f"torch.{dtype}",
                           "ptr": ptr, "device": ["cuda", 0]}}

    a = e([128, 256], [256, 1], "float8_e4m3fn", 0x7F0000000000)
    b = e([2, 256, 128], [32768, 1, 256], "float8_e5m2", 0x7F0001000000)
    kw = {"out": e([128, 128], [128, 1], "bfloat16", 0x7F0002000000),
          "scale_a": 1.0, "scale_b": 1.0, "fast_accum": True}
    case = {"fn": "grouped_gemm", "args": [a, b, [40, 128]], "kw": kw, "capability": [9, 0],
            "then": {"args": [a, b, [40, 128]], "kw": {**kw, "fast_accum": 1.0}}}
    assert fuzz.classify("api", case)[0] == "clean"
    b2 = e([256, 128], [1, 256], "float8_e5m2", 0x7F0001000000)  # gemm's own call caches
    for extra in ({}, {"activation": "relu"}):
        kw2 = {**kw, **extra}
        case = {"fn": "gemm", "args": [a, b2], "kw": kw2, "capability": [9, 0],
                "then": {"args": [a, b2], "kw": {**kw2, "fast_accum": 1.0}}}
        assert fuzz.classify("api", case)[0] == "clean", extra


FORM_NAME = "sm80.mma.m16n8k16.f32.bf16.bf16.f32"
HUGE = "(2147483648,2):(2,1)"


def test_fixed_smem_tensor_of_a_huge_layout() -> None:
    """The 1M campaign's hangs: smem_tensor evaluated every element of a 2^32-element layout
    before its 48 KB check; the element count is checked first now."""
    kind, _ = fuzz.classify("api", {"fn": "kernels.tensor.smem_tensor",
                                    "args": ["sA", "bf16", {"layout": HUGE}], "kw": {},
                                    "capability": [9, 0], "target": "sm_80"}, time_limit=1.0)
    assert kind == "clean"


def test_fixed_fragment_of_a_huge_layout() -> None:
    """The 1M campaign's hangs: fragment allocated one register per value of a huge layout;
    more than 255 registers a thread is refused now."""
    kind, _ = fuzz.classify("api", {"fn": "kernels.tensor.fragment",
                                    "args": [{"mma_form": FORM_NAME}, "A"],
                                    "kw": {"layout": {"layout": HUGE}},
                                    "capability": [9, 0], "target": "sm_80"}, time_limit=1.0)
    assert kind == "clean"


def test_api_second_call_must_not_be_served_by_a_sloppy_call_cache(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A ``then`` case calls twice in one world: a call cache that answers for a call whose
    key differs (planted: every lookup returns the last entry) lets a call the checks refuse
    through, which is wrong output."""
    import nvatom.gemm as gm

    a, b, out = _t([64, 64]), _t([64, 64]), _t([64, 64])
    bad_a = {"tensor": {**a["tensor"], "dtype": "torch.float32"}}
    case = {"fn": "gemm", "args": [a, b, out], "kw": {}, "capability": [9, 0],
            "then": {"args": [bad_a, b, out], "kw": {}}}
    assert fuzz.classify("api", case)[0] == "clean"  # the real caches key the dtype

    class AnyKey(dict):
        def get(self, key: object, default: object = None) -> object:
            return next(iter(self.values()), default)

    real = gm.GemmCaches

    def sloppy() -> object:
        c = real()
        c.calls = AnyKey()
        return c

    monkeypatch.setattr(gm, "GemmCaches", sloppy)
    kind, detail = fuzz.classify("api", case)
    assert kind == "wrong" and "a call cache answered for a different call" in detail


def _offs_tensor(values: list, dtype: str = "int32", device: list | None = None) -> dict:
    t = _t([len(values)], dtype)
    t["tensor"]["values"] = values
    t["tensor"]["device"] = device or ["cuda", 0]
    return t


def test_api_device_offsets_and_masked_layout() -> None:
    """Offsets and counts on the GPU reach the launch without a host read (the table kernel
    and the GEMM are planned); a tensor on "cuda" without an index (the current device) is
    taken, not an internal error (campaign seed 7001, input 15840: int(None)); wrong dtypes,
    shapes, devices and status words are clean refusals."""
    grouped = [_t([256, 512]), _t([2, 512, 384])]
    assert _api("grouped_gemm", [*grouped, _offs_tensor([100, 256])]) == ("ok", "")
    assert _api("grouped_gemm", [*grouped, _offs_tensor([100, 256], device=["cuda", None])]
                ) == ("ok", "")
    for offs in (_offs_tensor([100, 256], "int64"), _offs_tensor([100, 200, 256]),
                 _offs_tensor([100, 256], device=["cuda", 1])):
        assert _api("grouped_gemm", [*grouped, offs])[0] == "clean", offs
    for status in (_t([1], "int64"), [0], _t([0], "int32")):
        assert _api("grouped_gemm", [*grouped, _offs_tensor([100, 256])],
                    {"status": status})[0] == "clean", status
    assert _api("grouped_gemm", [*grouped, _offs_tensor([100, 256])],
                {"status": _t([1], "int32")}) == ("ok", "")
    masked = [_t([2, 192, 512]), _t([2, 512, 384])]
    assert _api("grouped_gemm_masked", [*masked, _offs_tensor([3, 192])],
                {"out": _t([2, 192, 384])}) == ("ok", "")
    assert _api("grouped_gemm_masked", [*masked, [3, 193]])[0] == "clean"  # > M_max
    assert _api("grouped_gemm_masked", [_t([2, 192]), masked[1], [3, 4]])[0] == "clean"


def test_api_user_epilogue_programs() -> None:
    """A user epilogue built from a program: a legal one is made (its tag and parameters),
    an illegal one (a load, a guard, a raise) is a clean EpilogueError."""
    ok = {"name": "h", "program": [["mov.f32", "f1"], ["max.f32", "xxf"]], "end": "none",
          "kw": {}}
    assert _api("UserEpilogue", [ok]) == ("ok", "")
    for bad in ({**ok, "program": [["ld.global.f32", "fu"]]},
                {**ok, "program": [["max.f32", "xxf", "p"]]}, {**ok, "end": "raise"},
                {**ok, "name": "1h"}):
        assert _api("UserEpilogue", [bad])[0] == "clean", bad


def test_api_status_is_part_of_the_grouped_call_cache_key() -> None:
    """Campaign seed 20261128, input api:37266: a grouped call with a good status word, then
    the same call with status=0.5, was served by the call cache (whose key had no status)
    instead of refused as it is alone."""
    grouped = [_t([256, 512]), _t([2, 512, 384]), [100, 256]]
    first = {"out": _t([256, 384]), "status": _t([1], "int32")}
    second = {"out": first["out"], "status": 0.5}
    assert _api("grouped_gemm", grouped, second)[0] == "clean"
    assert _api("grouped_gemm", grouped, first,
                then={"args": grouped, "kw": second})[0] == "clean"


def test_api_masked_group_strides_are_part_of_the_device_call_key() -> None:
    """Campaign seed 20261210, input api:123044: a masked call, then the same call with
    another group stride of a (2^63 elements: refused alone), was served the first call's
    plan: the device path's call key had a's and out's group strides in neither the key nor
    the plan's identity.  A stride that is legal (padding between the groups) would have
    computed from the wrong rows on the GPU."""
    counts = {"tensor": {"shape": [4], "strides": [1], "dtype": "torch.int32",
                         "ptr": 0x7F0000400000, "device": ["cuda", 0],
                         "values": [20, 7, 21, 3]}}
    b = _t([4, 16, 96], "float16", [1536, 96, 1])
    out = {"out": _t([4, 40, 96], "float16", [3840, 96, 1])}
    first = [_t([4, 40, 16], "float16", [960, 24, 1]), b, counts]
    huge = [_t([4, 40, 16], "float16", [2**63, 24, 1]), b, counts]
    assert _api("grouped_gemm_masked", huge, out)[0] == "clean"
    assert _api("grouped_gemm_masked", first, out,
                then={"args": huge, "kw": out})[0] == "clean"
    # a legal other stride (padding between the groups) gets a plan of its own
    import nvatom.gemm as gm

    gm.clear_caches()
    with fuzz.api_fakes((9, 0)):
        for a in (first[0], _t([4, 40, 16], "float16", [1024, 24, 1])):
            gm.grouped_gemm_masked(*[grammars.materialize(x) for x in (a, b, counts)],
                                   out=grammars.materialize(out["out"]))
        assert len([key for key in gm.CACHES.grouped_calls if key[0] == "device"]) == 2
    gm.clear_caches()


@pytest.mark.parametrize("name", [
    "sm100.mma_bs.mxf8f6f4.cta2.m128n16k32.ss.f32.e4m3.e2m1.ue8m0.vs32" + "9" * 5000,
    "sm100.mma.f16.cta1.m128n" + "2" * 5000 + "k16.ss.f32.f16.f16",
    "SM120.mma_bs.m16n8k64.row.col.f32.e2m1.e2m1.f32.ue8m0.sfa_b1" + "9" * 5000 + "t0.sfb_b0t0",
    "atom.tmem_load<32x32b.x" + "4" * 5000 + ">",
    "atom.tmem_store<16x32bx2.x2@" + "8" * 5000 + ">",
])
def test_atom_names_with_huge_numbers_are_clean(name: str) -> None:
    """Campaign seed 20261201, input atom_name:17885: a UMMA name with a 5,002-digit vector
    size raised Python's int-digit-limit ValueError; numbers in atom names now have at most
    9 digits (longer is no atom), for the SM100, SM120-selector and TMEM parsers alike."""
    assert fuzz.classify("atom_name", name)[0] == "clean"


def _direct(fn: str, args: list, kw: dict | None = None) -> str:
    """The message a call raises inside the api target's world (fake torch, no GPU)."""
    import nvatom.gemm as gm

    with fuzz.api_fakes((9, 0)):
        with pytest.raises(gm.NvatomError) as e:
            getattr(gm, fn)(*[grammars.materialize(x) for x in args],
                            **{k: grammars.materialize(v) for k, v in (kw or {}).items()})
    return str(e.value)


def test_device_path_and_masked_layout_messages() -> None:
    """Each refusal of the device-offset and masked paths names what is wrong."""
    offs = _offs_tensor([100, 256])
    assert "K = 0 with offsets on the GPU" in _direct(
        "grouped_gemm", [_t([256, 0]), _t([2, 0, 384]), offs], {"out": _t([256, 384])})
    assert "offsets has dtype int64" in _direct(
        "grouped_gemm", [_t([256, 512]), _t([2, 512, 384]), _offs_tensor([1, 2], "int64")])
    assert "status is a list" in _direct(
        "grouped_gemm", [_t([256, 512]), _t([2, 512, 384]), offs], {"status": [0]})
    a, b = _t([2, 192, 512]), _t([2, 512, 384])
    assert "grouped_gemm_masked takes a (G, M_max, K)" in _direct(
        "grouped_gemm_masked", [_t([192, 512]), b, [3, 4]])
    assert "a (G, M_max, K) and b (G, K, N)" in _direct(
        "grouped_gemm_masked", [a, _t([3, 512, 384]), [3, 4]])
    assert "counts = [3, 193]: one count per group (2), each in 0..M_max = 192" in _direct(
        "grouped_gemm_masked", [a, b, [3, 193]])
    assert "out has shape (2, 192, 385), the product is (2, 192, 384)" in _direct(
        "grouped_gemm_masked", [a, b, [3, 4]], {"out": _t([2, 192, 385])})
    assert "scale_a/scale_b apply to FP8 operands" in _direct(
        "grouped_gemm_masked", [a, b, [3, 4]], {"scale_a": _t([1], "float32")})
    assert "fast_accum = True: True or False, and True only with FP8" in _direct(
        "grouped_gemm_masked", [a, b, [3, 4]], {"fast_accum": True})
