"""nvatom.runtime.load: a builder module's KernelSource (CPU; the load itself is GPU-only and
runs in tests/gpu/test_tutorial_gpu.py)."""

from __future__ import annotations

import pytest

from nvatom.errors import NvatomError
from nvatom.ptx.builder import Module
from nvatom.runtime import ptxas
from nvatom.runtime.launch import build_cubin
from nvatom.runtime.load import kernel_source


def _module(*names: str, body: str = "") -> Module:
    mod = Module("sm_80")
    for n in names:
        k = mod.kernel(n)
        k.param("P")
        k.param("n", "u32")
        if body:
            k.comment(body)
    return mod


def test_source_names_the_kernel_and_its_params_and_assembles() -> None:
    src = kernel_source(_module("one"))
    assert src.name == "one"
    assert src.params == (("P", "u64"), ("n", "u32"))
    ptx = src.build("sm_90a")
    assert ".entry one" in ptx and ".target sm_80" in ptx
    # ptxas takes the sm_80 PTX for sm_90a (PTX runs on newer GPUs); so does the runtime.
    assert "one" in ptxas.assemble(ptx, "sm_90a").kernels
    cubin, _ = build_cubin(src, "sm_90a")
    assert cubin[:4] == b"\x7fELF"


def test_key_follows_the_ptx_text() -> None:
    a, b = kernel_source(_module("one")), kernel_source(_module("one"))
    c = kernel_source(_module("one", body="edited"))
    assert a.key == b.key and a.key != c.key


def test_choosing_among_kernels() -> None:
    mod = _module("one", "two")
    assert kernel_source(mod, "two").name == "two"
    with pytest.raises(NvatomError, match=r"2 kernels \(one, two\); name one"):
        kernel_source(mod)
    with pytest.raises(NvatomError, match="no kernel 'three'"):
        kernel_source(mod, "three")


def test_ptx_text_with_name_and_params() -> None:
    mod = _module("one")
    src = kernel_source(mod.emit(), "one", params=[("P", "u64"), ("n", "u32")])
    assert src == kernel_source(mod)  # same key, name and params: the same cache entry
    with pytest.raises(NvatomError, match="needs the kernel's name and params"):
        kernel_source(mod.emit(), "one")
    with pytest.raises(NvatomError, match="only with PTX text"):
        kernel_source(mod, params=[("P", "u64")])
