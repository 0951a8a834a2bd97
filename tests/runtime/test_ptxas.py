"""The ptxas runner: discovery, assembly, resource parsing, diagnostics, caching."""

from __future__ import annotations

import pytest

from nvatom.errors import PtxasError
from nvatom.runtime import ptxas

KERNEL = """.version 7.0
.target sm_80
.address_size 64
.visible .entry k(.param .u64 out)
{
    .reg .b32 %r<4>;
    .reg .b64 %rd<4>;
    .shared .align 16 .b8 buf[4096];
    .local .align 4 .b8 scratch[64];
    mov.u32 %r0, %tid.x;
    mov.u32 %r1, buf;
    st.shared.u32 [%r1], %r0;
    bar.sync 0;
    ld.shared.u32 %r2, [%r1+4];
    mov.u64 %rd0, scratch;
    and.b32 %r3, %r0, 15;
    mul.wide.u32 %rd3, %r3, 4;
    add.s64 %rd0, %rd0, %rd3;
    st.local.u32 [%rd0], %r2;
    ld.local.u32 %r3, [scratch+8];
    ld.param.u64 %rd1, [out];
    cvta.to.global.u64 %rd2, %rd1;
    st.global.u32 [%rd2], %r3;
    ret;
}
"""


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("NVATOM_CACHE_DIR", str(tmp_path / "cache"))
    ptxas._memory_cache.clear()
    yield
    ptxas._memory_cache.clear()


def test_discovers_a_cuda13_ptxas() -> None:
    tools = ptxas.discover()
    assert any(t.version >= (13, 0) and "sm_90a" in t.gpu_names for t in tools)
    assert ptxas.find_ptxas("sm_90a").accepts("sm_90a")


def test_assembles_and_parses_resources() -> None:
    res = ptxas.assemble(KERNEL, "sm_80")
    assert res.cubin[:4] == b"\x7fELF"
    k = res.kernel("k")
    assert k.shared_bytes == 4096  # the .shared buffer declared above
    assert k.stack_frame >= 64  # the .local scratch array lives in the stack frame
    assert k.barriers == 1
    assert 0 < k.registers < 32
    assert k.spills == 0
    assert any(bank == 0 for bank, _ in k.cmem)
    assert not res.cached


def test_rejection_carries_ptxas_messages() -> None:
    bad = KERNEL.replace("st.shared.u32", "st.shared.u33")
    with pytest.raises(PtxasError) as ei:
        ptxas.assemble(bad, "sm_80")
    err = ei.value
    assert err.target == "sm_80"
    assert "ptxas 13.0 rejected the PTX for sm_80" in str(err)
    errors = [d for d in err.diagnostics if d.severity == "error"]
    assert errors and errors[0].line == 12
    assert "u33" in errors[0].message
    assert "Ptx assembly aborted" in err.log


def test_feature_gating_message_is_ptxas_own() -> None:
    ok, diags = ptxas.check(KERNEL.replace("sm_80", "sm_75"), "sm_75")
    assert ok  # nothing sm_80-only in this kernel
    wg = KERNEL.replace("bar.sync 0;", "wgmma.fence.sync.aligned;")
    wg = wg.replace(".version 7.0", ".version 8.0")
    ok, diags = ptxas.check(wg.replace("sm_80", "sm_90"), "sm_90")
    assert not ok
    assert any("not supported on .target 'sm_90'" in d.message for d in diags)


def test_cache_hits_in_memory_and_on_disk(tmp_path) -> None:
    first = ptxas.assemble(KERNEL, "sm_80")
    again = ptxas.assemble(KERNEL, "sm_80")
    assert again.cached and again.cubin == first.cubin
    ptxas._memory_cache.clear()  # a new process: only the disk cache is left
    disk = ptxas.assemble(KERNEL, "sm_80")
    assert disk.cached and disk.cubin == first.cubin and disk.kernels == first.kernels
    assert list((tmp_path / "cache" / "ptxas").rglob("*.entry"))
    # Different target or options: a different entry.
    other = ptxas.assemble(KERNEL, "sm_86")
    assert not other.cached
    o0 = ptxas.assemble(KERNEL, "sm_80", args=["-O0"])
    assert not o0.cached


def test_failures_are_cached_too() -> None:
    bad = KERNEL.replace("bar.sync 0;", "bar.sink 0;")
    assert ptxas.check(bad, "sm_80")[0] is False
    ok, diags = ptxas.check(bad, "sm_80")
    assert not ok and any("bar.sink" in d.message or "bar" in d.message for d in diags)


def test_no_cache_option_runs_ptxas() -> None:
    ptxas.assemble(KERNEL, "sm_80")
    assert not ptxas.assemble(KERNEL, "sm_80", use_cache=False).cached


def test_bad_target_name_is_not_a_ptx_rejection() -> None:
    with pytest.raises(PtxasError, match="'hopper' is not a GPU target name"):
        ptxas.check(KERNEL, "hopper")


def test_target_no_ptxas_accepts(monkeypatch) -> None:
    only13 = [t for t in ptxas.discover() if t.version >= (13, 0)]
    monkeypatch.setattr(ptxas, "discover", lambda: only13)
    with pytest.raises(PtxasError, match="no ptxas accepts target 'sm_70'.*sm70 extra"):
        ptxas.find_ptxas("sm_70")


def test_env_override_comes_first(monkeypatch) -> None:
    tools = ptxas.discover()
    last = tools[-1]
    monkeypatch.setenv("NVATOM_PTXAS", str(last.path))
    first = ptxas.discover()[0]
    assert first.source == "NVATOM_PTXAS" and first.path == last.path


def test_env_override_to_nothing_is_skipped(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("NVATOM_PTXAS", str(tmp_path / "no-such-ptxas"))
    assert all(t.source != "NVATOM_PTXAS" for t in ptxas.discover())


@pytest.mark.sm70
def test_sm70_assembles_with_the_cuda12_ptxas() -> None:
    ptx = KERNEL.replace(".target sm_80", ".target sm_70").replace(".version 7.0", ".version 6.4")
    res = ptxas.assemble(ptx, "sm_70")
    assert res.ptxas_version.startswith("12.9")
    assert res.kernel().shared_bytes == 4096


def test_kernel_lookup_errors() -> None:
    res = ptxas.assemble(KERNEL, "sm_80")
    with pytest.raises(PtxasError, match="no kernel named 'nope'"):
        res.kernel("nope")
