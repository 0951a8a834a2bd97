"""Does compute-sanitizer's initcheck see bytes written by a TMA store as initialised?

    compute-sanitizer --tool initcheck python3 scripts/initcheck_tma_probe.py tma|direct

Runs the SM90 attention forward (d 128, B 2, H 4, S 333) with the given epilogue into a fresh
allocation (a size nothing before it used: torch's caching allocator gets new memory from the
driver), then reads the whole output with a torch kernel.  Every element of the output is
written by the kernel (the forward's GPU tests check it against float64 after NaN poisoning),
so an initcheck error on the read means the tool does not count that epilogue's writes."""

from __future__ import annotations

import dataclasses
import sys

import torch

from nvatom.attention import check_inputs, prepare
from nvatom.kernels.sm90.attention_config import default_config

epi = sys.argv[1]
# the output first: memory no kernel has written before
out = torch.empty((2, 4, 333, 128), device="cuda", dtype=torch.bfloat16)
lse = torch.empty((2, 4, 333), device="cuda", dtype=torch.float32)
torch.manual_seed(0)
q, k, v = (torch.randn(2, 4, 333, 128, device="cuda").to(torch.bfloat16) for _ in range(3))
p = check_inputs(q, k, v)
cfg = dataclasses.replace(default_config("bf16", 128), epilogue=epi)
prepare(q, k, v, out, lse, p, cfg)()
torch.cuda.synchronize()
print(epi, "sum", out.float().sum().item(), "nan", torch.isnan(out).any().item(), flush=True)
