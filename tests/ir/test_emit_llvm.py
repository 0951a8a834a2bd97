"""``nvatom compile --emit llvm``: LLVM IR checked by LLVM's NVPTX backend and by ptxas.

* every IR example of tests/ir that lowers (kernel parameters, ``%tid``, loops, loads and
  stores, mma.sync, ldmatrix/stmatrix, WGMMA, TMA, mbarriers, tcgen05, SM120 block-scaled
  MMA) becomes LLVM IR that llvmlite parses, verifies and compiles to PTX for the module's
  target, and ptxas assembles that PTX; the tensor-core, TMA and matrix-copy instructions of
  our PTX are all in LLVM's (none dropped, none duplicated);
* NVVM intrinsics where LLVM has them (special registers, ``bar.sync``, m8n8 ldmatrix /
  stmatrix, mma.sync on the NVVM path), inline asm elsewhere;
* the MMA emission path per tier follows the specification's table (seed 003) and is
  selectable: the register MMAs of sample atoms on sm_70/sm_75 go through ``llvm.nvvm.mma.*``
  and LLVM prints exactly the instruction nvatom prints, on sm_80+ through inline asm unless
  ``SM80=nvvm-intrinsic`` is selected; a path with no intrinsic for an instruction is refused.

The LLVM-running tests need llvmlite (the ``test`` and ``llvm`` extras; ``make test``
installs it) and skip only where it is not installed.
"""

from __future__ import annotations

import random
import re
from pathlib import Path

import pytest

from nvatom.arch import Tier
from nvatom.atoms.registry import family
from nvatom.cli import main
from nvatom.ir import driver, generate
from nvatom.ir.lower import lower
from nvatom.ptx import llvm_emit as L
from nvatom.runtime import ptxas

HERE = Path(__file__).parent
DOCS = HERE.parent.parent / "docs" / "ir.md"
EXAMPLES = sorted(p for p in HERE.glob("*.mlir") if not p.name.startswith("invalid_"))
needs_llvm = pytest.mark.skipif(not L.llvm_available(),
                                reason="llvmlite not installed (nvatom[llvm])")
# instructions that must survive LLVM one for one (opcode prefixes of the PTX ISA)
KEPT = ("mma.sync", "wgmma.mma_async", "wgmma.fence", "cp.async.bulk.tensor",
        "cp.reduce.async.bulk.tensor", "tcgen05.mma", "tcgen05.ld", "ldmatrix", "stmatrix",
        "mbarrier.try_wait", "mbarrier.init", "cp.async.cg", "tensormap.replace")


def _ptx(path: Path) -> str:
    mod = driver.parse(path.read_text(), str(path))
    return lower(mod, driver.verify(mod)).ptx


def _ops(ptx: str, prefix: str) -> int:
    return sum(1 for ln in ptx.splitlines() if re.match(rf"\s*(@\S+\s+)?{re.escape(prefix)}",
                                                       ln))


@needs_llvm
def test_every_example_goes_through_llvm_and_ptxas() -> None:
    ours = {p.name: _ptx(p) for p in EXAMPLES}
    mods = {n: L.ptx_to_llvm(ptx) for n, ptx in ours.items()}
    outs = dict(zip(mods, L.compile_llvm(list(mods.values())), strict=True))
    for name, out in outs.items():
        res = ptxas.assemble(out, mods[name].target)
        kernels = re.findall(r"^\.visible \.entry (\w+)", ours[name], re.M)
        assert sorted(res.kernels) == sorted(kernels), name
        for k in KEPT:  # LLVM may rotate a spin loop, copying its try_wait
            got, want = _ops(out, k), _ops(ours[name], k)
            assert got >= want if k == "mbarrier.try_wait" else got == want, f"{name}: {k}"
        assert f".target {mods[name].target.name}" in out
    assert len(outs) >= 14


def test_intrinsics_where_llvm_has_them_and_inline_asm_elsewhere() -> None:
    text = {p.name: L.ptx_to_llvm(_ptx(p)).text for p in EXAMPLES}
    mma = text["mma_sm80.mlir"]
    assert "define ptx_kernel void @mma_m16n8k16_bf16(i64 %arg0, i64 %arg1" in mma
    assert "call i32 @llvm.nvvm.read.ptx.sreg.tid.x()" in mma
    assert 'asm sideeffect "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {$' in mma
    assert 'asm sideeffect "ld.global.b32 $0, [$1+0];", "=r,=l,0,1,~{memory}"' in mma
    pipe = text["copy_pipeline.mlir"]
    assert "@llvm.nvvm.ldmatrix.sync.aligned.m8n8.x4.b16(ptr addrspace(3)" in pipe
    assert "@llvm.nvvm.stmatrix.sync.aligned.m8n8.x2.b16(ptr addrspace(3)" in pipe
    assert "@llvm.nvvm.stmatrix.sync.aligned.m8n8.x4.b16(ptr addrspace(3)" in \
        text["copy_swizzled.mlir"]
    assert "call void @llvm.nvvm.barrier.cta.sync.aligned.all(i32 0)" in pipe
    wg = text["wgmma_tile_loop.mlir"]
    assert 'asm sideeffect "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3' in wg
    assert 'asm sideeffect "cp.async.bulk.tensor.2d.shared::cluster' in wg
    assert re.search(r'asm sideeffect "mbarrier\.try_wait\.parity[^"]*", "=b,', wg)
    assert re.search(r"br i1 %v\d+, label %b\d+, label %L\.", wg)  # the K loop, the waits
    tma = text["tma_copy.mlir"]
    assert 'ptr byval([128 x i8]) align 128 "nvvm.grid_constant" %tmap0' in tma
    assert "internal addrspace(3) global [8192 x i8] undef, align 1024" in tma
    assert '"target-cpu"="sm_90a" "target-features"="+ptx80"' in tma
    assert '"nvvm.cluster_dim"="2,1,1"' in text["tma_multicast.mlir"]
    assert "call i32 @llvm.nvvm.read.ptx.sreg.cluster.ctarank()" in text["tma_multicast.mlir"]
    assert 'asm sideeffect "tcgen05.mma.cta_group::1.kind::f8f6f4' in text["umma_sm100.mlir"]
    for name, t in text.items():  # no special register or branch is left in an asm string
        assert not re.search(r'asm sideeffect "[^"]*(%tid|%laneid|\bbra\b)', t), name


def _register_mma_uses(targets: tuple[str, ...], per_target: int) -> list[tuple[object, str]]:
    fam = family("register_mma")
    out = []
    for t in targets:
        atoms = [a for a in fam.atoms(t) if a.name not in LLVM_NEEDS_SM80 or t >= "sm_80"]
        rng = random.Random(f"16/{t}")
        out += [(a, t) for a in rng.sample(atoms, min(per_target, len(atoms)))]
    return out


# LLVM 22 selects m8n8k128 .xor.popc only from sm_80 (tests/ptx/test_nvvm.py pins it)
LLVM_NEEDS_SM80 = {"sm75.mma.m8n8k128.s32.b1.b1.s32.xor.popc"}


def _lowered(atom: object, t: str) -> str | None:
    use = generate.atom_use(family("register_mma"), atom, t)
    mod = driver.parse(use.text, f"{use.atom}@{t}.mlir")
    try:
        ctx = driver.verify(mod)
    except driver.IRError:
        return None  # rejected at verify: the invariant test's business
    return lower(mod, ctx).ptx


@needs_llvm
def test_register_mma_paths_per_tier() -> None:
    cases = []
    for atom, t in _register_mma_uses(("sm_70", "sm_75", "sm_80", "sm_89"), 4):
        ptx = _lowered(atom, t)
        if ptx is None:
            continue
        cases.append((atom, t, ptx, L.ptx_to_llvm(ptx)))
        if t == "sm_80" and not atom.is_sparse:  # type: ignore[attr-defined]
            # selected: the NVVM path on a tier whose default is inline asm
            cases.append((atom, t, ptx, L.ptx_to_llvm(ptx, {Tier.SM80: L.EmissionPath.NVVM})))
    assert {c[1] for c in cases} == {"sm_70", "sm_75", "sm_80", "sm_89"}
    outs = L.compile_llvm([c[3] for c in cases])
    through_llvm = 0
    for (atom, t, ptx, m), out in zip(cases, outs, strict=True):
        opcode = atom.opcode  # type: ignore[attr-defined]
        want = L.TIER_PATHS[m.target.tier] if m.path is L.TIER_PATHS[m.target.tier] else m.path
        if want is L.EmissionPath.NVVM:
            assert any(i.startswith("llvm.nvvm.mma.") for i in m.intrinsics), atom
            assert f'asm sideeffect "{opcode}' not in m.text
        else:
            assert f'asm sideeffect "{opcode}' in m.text
        # LLVM prints exactly our instruction, once (an intrinsic whose D is never stored,
        # as in the m8n8k4 uses, which store no fragment, is dead code to LLVM)
        stored = "st.global" in ptx or want is not L.EmissionPath.NVVM
        through_llvm += stored and want is L.EmissionPath.NVVM
        assert [ln.split()[0] for ln in out.splitlines() if ln.strip().startswith("mma.")] \
            == ([opcode] if stored else []), (atom, t)
        ptxas.assemble(out, t)
    assert through_llvm >= 4  # mma.sync printed by LLVM from an llvm.nvvm.mma.* call


def test_the_path_table_is_the_seeds_and_selectable() -> None:
    assert L.TIER_PATHS[Tier.SM70] is L.TIER_PATHS[Tier.SM75] is L.EmissionPath.NVVM
    assert {L.TIER_PATHS[t] for t in (Tier.SM80, Tier.SM89, Tier.SM90)} == \
        {L.EmissionPath.INLINE_ASM}
    assert {L.TIER_PATHS[t] for t in (Tier.SM100, Tier.SM120)} == \
        {L.EmissionPath.MACHINE_INSTR}
    assert L.parse_paths(["SM80=nvvm-intrinsic", "SM70/75=inline-asm"]) == {
        Tier.SM80: L.EmissionPath.NVVM, Tier.SM70: L.EmissionPath.INLINE_ASM}
    with pytest.raises(L.LlvmEmitError, match="bad emission path 'SM8=asm'"):
        L.parse_paths(["SM8=asm"])
    wg = _ptx(HERE / "wgmma_tile_loop.mlir")
    with pytest.raises(L.LlvmEmitError, match=r"wgmma\.mma_async\.sync\.aligned\.m64n128k32"
                                              r"\.f32\.e4m3\.e4m3 has no NVVM intrinsic"):
        L.ptx_to_llvm(wg, {Tier.SM90: L.EmissionPath.NVVM})


def test_the_docs_table_is_the_code_table() -> None:
    section = DOCS.read_text().split("## Emission paths", 1)[1].split("\n## ", 1)[0]
    rows = dict(re.findall(r"^\| (SM\d+) \| `([a-z-]+)` \|", section, re.M))
    assert rows == {t.name: p.value for t, p in L.TIER_PATHS.items()}


@needs_llvm
def test_the_python_built_gemms_go_through_llvm() -> None:
    """The SM80, SM90 (bf16 and FP8) and SM100 GEMM kernels: LLVM's PTX assembles without
    spills and keeps every tensor-core, TMA and matrix-copy instruction."""
    from nvatom.kernels.gemm_sm80 import GemmSm80Config, GemmSm80Spec, emit_ptx
    from nvatom.kernels.gemm_sm100 import build_gemm_sm100_module, gemm_sm100_plan
    from nvatom.kernels.sm90.config import GemmSm90Config
    from nvatom.kernels.sm90.gemm import build_gemm_sm90
    from nvatom.kernels.sm90.launch import default_config

    ours = [build_gemm_sm90(GemmSm90Config()).emit(),
            build_gemm_sm90(default_config("e4m3")).emit(),
            emit_ptx(GemmSm80Spec("bf16", "f32", "K", "N", GemmSm80Config()), "sm_80"),
            build_gemm_sm100_module(gemm_sm100_plan(128, "bf16"), 2).emit()]
    mods = [L.ptx_to_llvm(p) for p in ours]
    for ptx, m, out in zip(ours, mods, L.compile_llvm(mods), strict=True):
        res = ptxas.assemble(out, m.target)
        assert all(k.spill_stores == 0 for k in res.kernels.values())
        for k in (*KEPT, "setmaxnreg", "tcgen05.commit", "cp.async.bulk.tensor"):
            got, want = _ops(out, k), _ops(ptx, k)
            assert got >= want if k == "mbarrier.try_wait" else got == want, (m.target, k)


def test_bad_ptx_is_refused_with_our_error() -> None:
    with pytest.raises(L.LlvmEmitError, match="no .version/.target header"):
        L.ptx_to_llvm("hello")
    bad = ".version 8.0\n.target sm_90a\n.address_size 64\n\n.visible .entry k()\n{\n" \
          "    .reg .b32 %r<2>;\n    mov.u32 %r0, %r7;\n    ret;\n}\n"
    with pytest.raises(L.LlvmEmitError, match=r"register %r7 is not declared"):
        L.ptx_to_llvm(bad)
    with pytest.raises(L.LlvmEmitError, match=r"register class \.u8 is not one of pred, "):
        L.ptx_to_llvm(bad.replace(".reg .b32 %r<2>;", ".reg .u8 %r<2>;"))
    with pytest.raises(L.LlvmEmitError, match=r"directive '\.local .b8 x\[4\];' inside"):
        L.ptx_to_llvm(bad.replace("mov.u32 %r0, %r7;", ".local .b8 x[4];"))
    guarded = L.ptx_to_llvm(bad.replace("mov.u32 %r0, %r7;", "@%p1 ret;").replace(
        ".reg .b32 %r<2>;", ".reg .pred %p<2>;"))
    assert re.search(r"br i1 %v\d+, label %L\.ret0, label %b\d+\n", guarded.text)
    assert guarded.text.count("ret void") == 2 and "L.ret0:\n  ret void\n}" in guarded.text


@needs_llvm
def test_cli_emit_llvm(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "k.ll"
    assert main(["compile", str(HERE / "copy_pipeline.mlir"), "--emit", "llvm",
                 "-o", str(out)]) == 0
    err = capsys.readouterr().err
    assert "MMA instructions on the inline-asm path (SM90)" in err
    assert re.search(r"\w+: \d+ registers, .*\(sm_90a, ptxas", err)
    assert out.read_text().startswith("; nvatom: LLVM IR for sm_90a, PTX ISA 8.0")
    assert main(["compile", str(HERE / "mma_sm80.mlir"), "--emit", "llvm", "-o", "-",
                 "--no-ptxas", "--path", "SM90=nvvm-intrinsic"]) == 0
    assert "@llvm.nvvm.mma.m16n8k16.row.col.bf16(" in capsys.readouterr().out
    assert main(["compile", str(HERE / "mma_sm80.mlir"), "--emit", "llvm", "-o", "-",
                 "--path", "SM9=x"]) == 2
    assert "bad emission path 'SM9=x'" in capsys.readouterr().err
    assert main(["compile", str(HERE / "mma_sm80.mlir"), "--no-ptxas", "--path",
                 "SM90=inline-asm"]) == 2
    assert "--path selects emission paths for --emit llvm" in capsys.readouterr().err
