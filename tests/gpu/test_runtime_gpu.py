"""nvatom.runtime.launch on the GPU: both backends (cuda.core, driver), scalar and 128-byte
by-value parameters, dynamic shared memory above 48 KB, cluster launches, torch streams.

The probe kernel writes what it sees: the 128 parameter bytes (as 32 words), a scalar, its
CTA and cluster coordinates (``%clusterid.x``, ``%cluster_ctarank``, ``%cluster_nctarank``)
and a word read back from the far end of the dynamic shared memory."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.gpu

torch = pytest.importorskip("torch")

from nvatom.runtime.launch import (  # noqa: E402
    ByValue,
    KernelSource,
    LaunchError,
    get_kernel,
    param_decl,
)

PARAMS_BLOB = (("out", "u64"), ("blob", "b8[128]@64"), ("val", "u32"), ("smem", "u32"))
PARAMS_PLAIN = (("out", "u64"), ("val", "u32"), ("smem", "u32"))
REC = 40  # u32 words written per CTA


def _probe_ptx(name: str, params: tuple[tuple[str, str], ...], target: str) -> str:
    """One CTA of 32 threads: thread 0 writes REC words at out + 4 * REC * ctaid.x."""
    decl = ",\n    ".join(param_decl(n, t) for n, t in params)
    blob = any(n == "blob" for n, _ in params)
    lines = [
        ".version 8.0", f".target {target}", ".address_size 64",
        ".extern .shared .align 16 .b8 dsm[];",
        f".visible .entry {name}(\n    {decl}\n)", "{",
        "  .reg .b32 %r<64>;", "  .reg .b64 %rd<8>;", "  .reg .pred %p<2>;",
        "  ld.param.u64 %rd0, [out];", "  cvta.to.global.u64 %rd0, %rd0;",
        "  ld.param.u32 %r40, [val];", "  ld.param.u32 %r41, [smem];",
        "  mov.u32 %r42, %ctaid.x;", "  mov.u32 %r43, %tid.x;",
        # far end of dynamic smem: every thread writes its own word, then thread 0 reads back
        "  mov.u32 %r44, dsm;", "  add.u32 %r45, %r44, %r41;",
        "  shl.b32 %r46, %r43, 2;", "  sub.u32 %r45, %r45, 128;", "  add.u32 %r45, %r45, %r46;",
        "  add.u32 %r47, %r43, 1000;", "  st.shared.u32 [%r45], %r47;", "  bar.sync 0;",
        "  setp.ne.u32 %p0, %r43, 0;", "  @%p0 bra DONE;",
        "  sub.u32 %r45, %r45, %r46;", "  add.u32 %r45, %r45, 124;",
        "  ld.shared.u32 %r48, [%r45];",  # thread 31's word: 1031
        "  mul.lo.u32 %r49, %r42, 160;", "  cvt.u64.u32 %rd1, %r49;",
        "  add.s64 %rd0, %rd0, %rd1;",
    ]
    if blob:
        for i in range(32):
            lines += [f"  ld.param.u32 %r{i}, [blob+{4 * i}];",
                      f"  st.global.u32 [%rd0+{4 * i}], %r{i};"]
    lines += ["  st.global.u32 [%rd0+128], %r40;", "  st.global.u32 [%rd0+132], %r42;",
              "  st.global.u32 [%rd0+136], %r48;"]
    if target.startswith("sm_9"):
        lines += ["  mov.u32 %r50, %clusterid.x;", "  mov.u32 %r51, %cluster_ctarank;",
                  "  mov.u32 %r52, %cluster_nctarank;",
                  "  st.global.u32 [%rd0+140], %r50;", "  st.global.u32 [%rd0+144], %r51;",
                  "  st.global.u32 [%rd0+148], %r52;"]
    lines += ["DONE:", "  ret;", "}"]
    return "\n".join(lines) + "\n"


def _source(name: str, params: tuple[tuple[str, str], ...]) -> KernelSource:
    return KernelSource(f"test-probe-{name}-v1", name, params,
                        lambda t: _probe_ptx(name, params, t))


def _target() -> str:
    major, minor = torch.cuda.get_device_capability()
    return f"sm_{major}{minor}"


@pytest.mark.parametrize("backend", ["cuda.core", "driver"])
@pytest.mark.parametrize("blob", [False, True])
def test_probe(backend: str, blob: bool) -> None:
    name = f"probe_{'blob' if blob else 'plain'}"
    src = _source(name, PARAMS_BLOB if blob else PARAMS_PLAIN)
    kern = get_kernel(src, _target(), backend=backend)
    smem = 100 * 1024  # above the 48 KB default: needs the attribute
    grid = 4
    cluster = 2 if torch.cuda.get_device_capability() >= (9, 0) else None
    out = torch.full((grid, REC), -1, dtype=torch.int32, device="cuda")
    payload = bytes(range(7, 7 + 128))
    args = [out.data_ptr(), ByValue(payload), 0xC0FFEE, smem] if blob else \
        [out.data_ptr(), 0xC0FFEE, smem]
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        kern.launch(grid, 32, args, shmem=smem, cluster=cluster)
    s.synchronize()
    got = out.cpu()
    for cta in range(grid):
        rec = got[cta].tolist()
        if blob:
            words = [int.from_bytes(payload[4 * i:4 * i + 4], "little") for i in range(32)]
            assert [w & 0xFFFFFFFF for w in rec[:32]] == words
        assert rec[32] == 0xC0FFEE
        assert rec[33] == cta
        assert rec[34] == 1031
        if cluster:
            assert rec[35:38] == [cta // 2, cta % 2, 2]


def test_errors() -> None:
    src = _source("probe_plain", PARAMS_PLAIN)
    kern = get_kernel(src, _target(), backend="driver")
    out = torch.zeros(4, REC, dtype=torch.int32, device="cuda")
    with pytest.raises(LaunchError, match="takes 3 arguments"):
        kern.launch(1, 32, [out.data_ptr(), 1])
    with pytest.raises(LaunchError, match="does not fit .u32"):
        kern.launch(1, 32, [out.data_ptr(), -1, 0])
    with pytest.raises(LaunchError, match="MAX_DYNAMIC_SHARED_SIZE_BYTES"):
        kern.launch(1, 32, [out.data_ptr(), 1, 4], shmem=400 * 1024)  # above any GPU's limit
    with pytest.raises(LaunchError, match="whole number of clusters"):
        kern.launch(3, 32, [out.data_ptr(), 1, 4], cluster=2)

