"""What this machine gives nvatom, and what each missing piece costs (``nvatom check``).

nvatom's core (layouts, atoms, descriptors, PTX emission, the CPU models) needs only Python
and numpy.  Everything else is optional and adds one ability:

* ptxas (the CUDA toolkit, or ``pip install 'nvatom[ptxas]'``): assembling PTX into cubins,
  so checking what nvatom emits and building kernels to run;
* a GPU with its driver, ``cuda.bindings`` (and ``cuda.core``, the default launch backend):
  loading and launching kernels;
* torch: ``nvatom.gemm`` and the ``torch.ops.nvatom`` operators (they take torch tensors);
* xDSL (``nvatom[ir]``, pinned): the ``cute_nvgpu`` IR, ``nvatom verify`` / ``nvatom compile``.

:func:`inspect_environment` finds each piece without importing the heavy ones (package
metadata and ``importlib.util.find_spec``; ptxas is run once per binary to read its version
and targets, as :func:`nvatom.runtime.ptxas.discover` does; the GPU is asked of
``nvidia-smi``).  :class:`Environment` holds the answers; :meth:`Environment.text` is the
report ``nvatom check`` prints.  The table of pieces (:data:`PIECES`) is the one place that
says what each gives and what its absence costs.
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import importlib.util
import shutil
import subprocess
import sys
from collections.abc import Callable, Sequence

from nvatom.arch import TARGETS
from nvatom.runtime import ptxas

__all__ = ["PIECES", "Environment", "Piece", "PieceSpec", "inspect_environment",
           "missing_piece"]


@dataclasses.dataclass(frozen=True)
class PieceSpec:
    """One thing nvatom may use: ``gives`` when present, ``costs`` when absent (the ability
    lost, in a few words, then why), how to ``install`` it, and whether nvatom cannot work
    without it (``required``)."""

    name: str
    gives: str
    costs: str
    install: str
    required: bool = False
    #: the distribution name on PyPI (for the version), when it is a Python package
    dist: str | None = None
    #: the import name probed with find_spec
    module: str | None = None
    #: an exact version nvatom is tested with (a different one is reported)
    pinned: str | None = None


@dataclasses.dataclass(frozen=True)
class Piece:
    """One :class:`PieceSpec` as found on this machine."""

    spec: PieceSpec
    present: bool
    detail: str = ""  # version, path, or what was found

    @property
    def name(self) -> str:
        return self.spec.name


#: Every piece, in report order.
PIECES: tuple[PieceSpec, ...] = (
    PieceSpec("numpy", "the layout algebra's tables, the CPU models, the dtype codecs",
              "nothing works: numpy is a required dependency", "pip install numpy",
              required=True, dist="numpy", module="numpy"),
    PieceSpec("ptxas", "assembling PTX: emitted PTX checked by ptxas, kernels built into "
              "cubins",
              "no assembly: PTX is emitted but not checked by ptxas, and no kernel can be "
              "built, so none can run",
              "install the CUDA toolkit (ptxas in /usr/local/cuda/bin or on PATH) or "
              "pip install 'nvatom[ptxas]'"),
    PieceSpec("GPU", "running kernels (an NVIDIA GPU and its driver, seen by nvidia-smi)",
              "no running: kernels can be built and assembled but not launched; GPU tests "
              "skip", "a machine with an NVIDIA GPU and driver"),
    PieceSpec("cuda.bindings", "the CUDA driver API: loading cubins, launching, TMA tensor "
              "maps encoded by the driver",
              "no running: kernels cannot be loaded or launched", "pip install 'nvatom[gpu]'",
              dist="cuda-bindings", module="cuda.bindings"),
    PieceSpec("cuda.core", "the default launch backend",
              "launches go through the driver API backend (cuda.bindings) instead; without "
              "cuda.bindings too: no running", "pip install 'nvatom[gpu]'",
              dist="cuda-core", module="cuda.core"),
    PieceSpec("torch", "nvatom.gemm and the torch.ops.nvatom operators (torch.compile, "
              "CUDA graphs); torch tensors as kernel arguments",
              "no running of nvatom.gemm or the torch operators (they take torch tensors); "
              "kernels can still be built", "pip install 'nvatom[gpu]'",
              dist="torch", module="torch"),
    PieceSpec("xdsl", "the cute_nvgpu IR: nvatom verify, nvatom compile",
              "no IR: nvatom verify and nvatom compile are unavailable",
              "pip install 'nvatom[ir]'", dist="xdsl", module="xdsl", pinned="0.74.0"),
    PieceSpec("cupy", "DLPack arrays from CuPy; the GPU tests of the atoms",
              "GPU tests that use CuPy skip (nvatom itself does not need it)",
              "pip install cupy-cuda12x", dist=None, module="cupy"),
    PieceSpec("llvmlite", "LLVM's NVPTX backend: the NVVM-intrinsic cross-check of the "
              "SM70/SM75 atoms", "no LLVM cross-check (nvatom.ptx.nvvm.lower_with_llvm)",
              "pip install 'nvatom[llvm]'", dist="llvmlite", module="llvmlite"),
    PieceSpec("ml_dtypes", "the reference codecs the dtype tests compare against",
              "the dtype tests that compare with ml_dtypes skip", "pip install ml_dtypes",
              dist="ml_dtypes", module="ml_dtypes"),
)



def missing_piece(name: str, what: str) -> str:
    """The one line a command prints when ``what`` needs the absent piece ``name`` of
    :data:`PIECES`: what it is for and how to install it (``nvatom check``'s words), e.g.
    ``nvatom verify needs xdsl (the cute_nvgpu IR: ...), which is not installed: pip install
    'nvatom[ir]'``."""
    spec = next(p for p in PIECES if p.name == name)
    pin = f" (nvatom is tested with {spec.pinned})" if spec.pinned else ""
    return (f"{what} needs {spec.name} ({spec.gives}), which is not installed: "
            f"{spec.install}{pin}; 'nvatom check' lists what this machine has")


@dataclasses.dataclass(frozen=True)
class Environment:
    """What :func:`inspect_environment` found."""

    nvatom_version: str
    python: str
    pieces: tuple[Piece, ...]
    ptxas_tools: tuple[ptxas.PtxasTool, ...]
    assemblable: tuple[str, ...]  # targets some ptxas accepts
    missing_targets: tuple[str, ...]
    cache: str
    gpus: tuple[str, ...]

    def piece(self, name: str) -> Piece:
        for p in self.pieces:
            if p.name == name:
                return p
        raise KeyError(name)

    def has(self, name: str) -> bool:
        return self.piece(name).present

    @property
    def ok(self) -> bool:
        """Every required piece is present (``nvatom check`` should exit 1 otherwise)."""
        return all(p.present for p in self.pieces if p.spec.required)

    @property
    def can_assemble(self) -> bool:
        return self.has("ptxas")

    @property
    def can_run(self) -> bool:
        """Kernels can be built, loaded and launched."""
        return self.can_assemble and self.has("GPU") and self.has("cuda.bindings")

    @property
    def can_run_gemm(self) -> bool:
        return self.can_run and self.has("torch")

    @property
    def has_ir(self) -> bool:
        return self.has("xdsl")

    def summary(self) -> list[str]:
        """One line per ability: yes, or no and the first missing piece."""

        def line(what: str, need: Sequence[str]) -> str:
            gone = [n for n in need if not self.has(n)]
            return f"{what:<10} " + ("yes" if not gone else f"no (missing: {', '.join(gone)})")

        return [line("assemble", ["ptxas"]),
                line("run", ["ptxas", "GPU", "cuda.bindings"]),
                line("gemm", ["ptxas", "GPU", "cuda.bindings", "torch"]),
                line("IR", ["xdsl"])]

    def text(self) -> str:
        """The report ``nvatom check`` prints."""
        out = [f"nvatom {self.nvatom_version} on Python {self.python}"]
        if not self.ptxas_tools:
            out.append("ptxas: none found (install the CUDA toolkit or 'pip install "
                       "nvatom[ptxas]')")
        for tool in self.ptxas_tools:
            out.append(f"ptxas {tool.build:<10} {tool.source:<28} {tool.path}")
        out.append(f"targets assemblable: {len(self.assemblable)}/{len(TARGETS)}"
                   + (f" (missing: {', '.join(self.missing_targets)})"
                      if self.missing_targets else ""))
        out.append(f"ptxas cache: {self.cache}")
        out.append("GPU: " + ("; ".join(self.gpus) if self.gpus else "none"))
        out.append("")
        out.append("present:")
        for p in self.pieces:
            if p.present:
                out.append(f"  {p.name:<14} {p.detail:<12} {p.spec.gives}")
        missing = [p for p in self.pieces if not p.present]
        if missing:
            out.append("missing (what it costs -> how to get it):")
            for p in missing:
                req = " [required]" if p.spec.required else ""
                out.append(f"  {p.name:<14} {p.spec.costs}{req} -> {p.spec.install}")
        out.append("")
        out.append("can:")
        out += [f"  {line}" for line in self.summary()]
        return "\n".join(out) + "\n"


def _version(dist: str | None) -> str:
    if dist is None:
        return ""
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return ""


def _module_present(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a parent package missing or broken
        return False


def gpu_names(run: Callable[..., subprocess.CompletedProcess[str]] = subprocess.run
              ) -> tuple[str, ...]:
    """``name, driver, compute capability`` per GPU, from ``nvidia-smi`` (none: empty)."""
    smi = shutil.which("nvidia-smi")
    if not smi:
        return ()
    try:
        out = run([smi, "--query-gpu=name,driver_version,compute_cap",
                   "--format=csv,noheader"], capture_output=True, text=True, timeout=30,
                  check=False).stdout
    except (OSError, subprocess.SubprocessError):
        return ()
    return tuple(line.strip() for line in out.splitlines() if line.strip())


def inspect_environment(*, tools: Sequence[ptxas.PtxasTool] | None = None,
                        gpus: Sequence[str] | None = None,
                        module_present: Callable[[str], bool] = _module_present,
                        version: Callable[[str | None], str] = _version) -> Environment:
    """Look for every piece of :data:`PIECES`.  The keyword arguments replace the probes
    (tests): ``tools`` the ptxas binaries found, ``gpus`` the nvidia-smi lines,
    ``module_present`` / ``version`` the package lookups."""
    found = tuple(ptxas.discover() if tools is None else tools)
    gpu_lines = tuple(gpu_names() if gpus is None else gpus)
    covered = tuple(n for n in TARGETS if any(t.accepts(n) for t in found))
    pieces = []
    for spec in PIECES:
        if spec.name == "ptxas":
            detail = ", ".join(dict.fromkeys(t.build for t in found))
            pieces.append(Piece(spec, bool(found), detail))
            continue
        if spec.name == "GPU":
            pieces.append(Piece(spec, bool(gpu_lines), f"{len(gpu_lines)} found"
                                if gpu_lines else ""))
            continue
        present = module_present(spec.module) if spec.module else False
        ver = version(spec.dist) if present else ""
        detail = ver or ("installed" if present else "")
        if present and spec.pinned and ver and ver != spec.pinned:
            detail = f"{ver} (tested: {spec.pinned})"
        pieces.append(Piece(spec, present, detail))
    cache = ptxas.cache_dir()
    mod = sys.modules.get("nvatom")
    return Environment(
        nvatom_version=str(getattr(mod, "__version__", "") or version("nvatom") or "?"),
        python=sys.version.split()[0],
        pieces=tuple(pieces),
        ptxas_tools=found,
        assemblable=covered,
        missing_targets=tuple(n for n in TARGETS if n not in covered),
        cache=str(cache) if cache is not None else "disabled",
        gpus=gpu_lines,
    )
