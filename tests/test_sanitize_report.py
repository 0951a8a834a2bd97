"""scripts/sanitize.py's reading of compute-sanitizer's output (the GPU run is `make sanitize`):
records attributed to the configuration that was running, API errors apart from kernel errors.
The sample text follows the record format of compute-sanitizer's documentation (a record
line ``========= <what>``, detail lines indented under it, a closing summary)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
spec = importlib.util.spec_from_file_location("sanitize", ROOT / "scripts" / "sanitize.py")
S = importlib.util.module_from_spec(spec)
spec.loader.exec_module(S)  # type: ignore[union-attr]

API = ("========= Program hit CUDA_ERROR_NOT_FOUND (error 500) due to \"named symbol not found\" "
       "on CUDA API call to cuGetProcAddress.")
SAMPLE = f"""\
========= COMPUTE-SANITIZER
{API}
=========     Saved host backtrace up to driver entry point at error
=========         Host Frame: [0x2f0b5] in libcuda.so.1
@@config sm80_bf16_aK_bN
@@config sm90_fp8_row_promoted_e4m3xe4m3
========= Invalid __global__ read of size 8 bytes
=========     at 0x1a70 in gemm_sm90_e4m3_bf16
=========     by thread (130,0,0) in block (17,0,0)
=========     Address 0x7f0000100004 is misaligned
{API}
@@config attention_d64_gqa_ragged
@@config <done>
========= ERROR SUMMARY: 3 errors
"""


def test_records_are_attributed_and_classified() -> None:
    r = S.parse("memcheck", SAMPLE)
    assert r["completed"]
    assert r["api_errors"] == {"cuGetProcAddress": 2} and r["api_error_count"] == 2
    assert r["kernel_errors"] == {
        "sm90_fp8_row_promoted_e4m3xe4m3": ["Invalid __global__ read of size 8 bytes"]}
    assert r["kernel_error_count"] == 1 and r["summary_counts"] == [3]


def test_racecheck_hazards_and_an_unfinished_run() -> None:
    text = ("@@config grouped_bf16_empty_groups\n"
            "========= Error: Race reported between Write access at 0x540 in k\n"
            "=========     and Read access at 0x9a0 in k [128 hazards]\n"
            "========= RACECHECK SUMMARY: 1 hazard displayed (1 error, 0 warnings)\n")
    r = S.parse("racecheck", text)
    assert not r["completed"]  # the worker never printed its <done> mark
    assert list(r["kernel_errors"]) == ["grouped_bf16_empty_groups"]
    assert r["kernel_error_count"] == 1 and r["api_error_count"] == 0


def test_a_clean_run() -> None:
    r = S.parse("synccheck", "@@config a\n@@config <done>\n========= ERROR SUMMARY: 0 errors\n")
    assert r["completed"] and r["kernel_error_count"] == 0 and r["summary_counts"] == [0]


def test_the_planted_bugs_assemble_and_match_the_filter() -> None:
    """Each tool's canary kernel (run under the tool on the GPU, which must report it) is
    valid PTX and named so that the run's kernel filter instruments it."""
    from nvatom.runtime.ptxas import assemble

    res = assemble(S.CANARY_PTX, "sm_80")
    names = set(res.kernels)
    assert names == {f"nvatom_canary_{t}" for t in S.CANARIES}
    subs = [f.split("=", 1)[1] for f in S.KERNELS]
    assert all(any(s in n for s in subs) for n in names)
