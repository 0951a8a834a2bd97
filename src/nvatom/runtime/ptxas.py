"""Find ptxas, assemble PTX text for a target, and read back what ptxas says.

ptxas is our second-strongest source of truth (after the GPU itself): every PTX form nvatom
can emit is assembled by it in the test suite.  This module

* discovers every ptxas on the machine, in this order: ``$NVATOM_PTXAS``, ``PATH``,
  ``/usr/local/cuda/bin``, then the PyPI wheels (``nvidia-cuda-nvcc`` for CUDA 13,
  ``nvidia-cuda-nvcc-cu12`` 12.9 for the targets CUDA 13 dropped: sm_70 and sm_72);
* picks, for a target, the first discovered ptxas whose ``--gpu-name`` list contains it;
* assembles with ``-v`` and parses the per-kernel resource report (registers, barriers,
  shared memory, stack frame, spills, constant banks) and the diagnostics;
* caches results (cubins and failures alike) by a content hash of the ptxas identity, the
  target, the options and the PTX text, in memory and on disk, so the test suite, which
  assembles thousands of forms, stays fast.  A disk entry is one self-checking file (length
  and SHA-256 header, its key inside, ELF magic for cubins) written atomically (temporary
  file + ``os.replace``): concurrent writers, killed writers and truncated or corrupted files
  give a rebuilt cubin, never a crash or a wrong one (:func:`write_entry`, :func:`read_entry`;
  also used by the kernel cache of :mod:`nvatom.runtime.launch`; docs/reliability.md).

Rejections raise :class:`nvatom.errors.PtxasError` carrying ptxas's own messages.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import os
import re
import shutil
import stat
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Sequence
from pathlib import Path

from nvatom.errors import PtxasError

__all__ = [
    "Assembled",
    "Diagnostic",
    "KernelResources",
    "PtxasTool",
    "assemble",
    "cache_dir",
    "check",
    "discover",
    "find_ptxas",
    "read_entry",
    "write_entry",
]

_VERSION_RE = re.compile(r"release (\d+)\.(\d+), V([\d.]+)")
_DIAG_RE = re.compile(
    r"^ptxas\s+(?:(?P<file>[^,]+), line (?P<line>\d+); )?"
    r"(?P<sev>error|warning|info|fatal)\s*:\s*(?P<msg>.*)$"
)
_ENTRY_RE = re.compile(r"Compiling entry function '([^']+)' for '([^']+)'")
_FUNC_PROPS_RE = re.compile(r"Function properties for (\S+)")
_FRAME_RE = re.compile(
    r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads"
)
_USED_RE = re.compile(r"Used (\d+) registers")
_BARRIERS_RE = re.compile(r"used (\d+) barriers")
_SMEM_RE = re.compile(r"(\d+) bytes smem")
_CMEM_RE = re.compile(r"(\d+) bytes cmem\[(\d+)\]")

#: Bump when the cache entry format or the parser changes.
_CACHE_FORMAT = 3


@dataclasses.dataclass(frozen=True)
class PtxasTool:
    """One ptxas binary: where it is, its CUDA release and the GPU names it accepts."""

    path: Path
    source: str  # how it was found: "NVATOM_PTXAS", "PATH", "/usr/local/cuda", "pypi:<pkg>"
    version: tuple[int, int]  # CUDA release, e.g. (13, 0)
    build: str  # full version, e.g. "13.0.88"
    gpu_names: frozenset[str]  # sm_XY names ptxas --gpu-name accepts

    @property
    def version_str(self) -> str:
        return f"{self.version[0]}.{self.version[1]}"

    def accepts(self, target: str) -> bool:
        return target in self.gpu_names


@dataclasses.dataclass(frozen=True)
class Diagnostic:
    """One line of ptxas output: severity, PTX line (if any) and message."""

    severity: str  # "error" | "warning" | "info" | "fatal"
    message: str
    line: int | None = None

    def __str__(self) -> str:
        where = f"line {self.line}: " if self.line is not None else ""
        return f"{where}{self.severity}: {self.message}"


@dataclasses.dataclass(frozen=True)
class KernelResources:
    """ptxas's resource report for one entry function."""

    name: str
    registers: int = 0
    barriers: int = 0
    shared_bytes: int = 0  # static shared memory
    stack_frame: int = 0
    spill_stores: int = 0
    spill_loads: int = 0
    cmem: tuple[tuple[int, int], ...] = ()  # (bank, bytes)

    @property
    def spills(self) -> int:
        return self.spill_stores + self.spill_loads

    def summary(self) -> str:
        return (
            f"{self.registers} registers, {self.shared_bytes} B smem, "
            f"{self.stack_frame} B stack, {self.spill_stores}/{self.spill_loads} B spill st/ld, "
            f"{self.barriers} barriers"
        )


@dataclasses.dataclass(frozen=True)
class Assembled:
    """A successful assembly: the cubin, per-kernel resources, and ptxas's messages."""

    target: str
    cubin: bytes
    kernels: dict[str, KernelResources]
    diagnostics: tuple[Diagnostic, ...]
    ptxas_version: str
    cached: bool = False

    @property
    def warnings(self) -> tuple[Diagnostic, ...]:
        return tuple(d for d in self.diagnostics if d.severity == "warning")

    def kernel(self, name: str | None = None) -> KernelResources:
        if name is None:
            if len(self.kernels) != 1:
                raise PtxasError(
                    f"module has {len(self.kernels)} kernels ({', '.join(self.kernels)}); "
                    "name one"
                )
            return next(iter(self.kernels.values()))
        try:
            return self.kernels[name]
        except KeyError:
            raise PtxasError(
                f"no kernel named '{name}' in the module (kernels: {', '.join(self.kernels)})"
            ) from None


# --------------------------------------------------------------------------- discovery


def _site_dirs() -> list[Path]:
    dirs: list[Path] = []
    for entry in sys.path:
        p = Path(entry)
        if p.name in ("site-packages", "dist-packages") and p.is_dir():
            dirs.append(p)
    return dirs


def _candidates() -> list[tuple[Path, str]]:
    out: list[tuple[Path, str]] = []
    env = os.environ.get("NVATOM_PTXAS")
    if env:
        out.append((Path(env), "NVATOM_PTXAS"))
    on_path = shutil.which("ptxas")
    if on_path:
        out.append((Path(on_path), "PATH"))
    out.append((Path("/usr/local/cuda/bin/ptxas"), "/usr/local/cuda"))
    for site in _site_dirs():
        # CUDA 13 wheels install under nvidia/cu13/bin; CUDA 12 ones under nvidia/cuda_nvcc/bin.
        for rel, pkg in (
            ("nvidia/cu13/bin/ptxas", "pypi:nvidia-cuda-nvcc"),
            ("nvidia/cuda_nvcc/bin/ptxas", "pypi:nvidia-cuda-nvcc"),
        ):
            out.append((site / rel, pkg))
    return out


#: Bump when what a tool probe records changes.
_PROBE_FORMAT = 1


def _probe_key(path_str: str) -> str | None:
    """The identity of a ptxas binary for the probe memo: its path, resolved path, size,
    modification time and inode (a changed or replaced binary is probed again); None when
    it cannot be read."""
    try:
        real = os.path.realpath(path_str)
        st = os.stat(real)
    except OSError:
        return None
    return f"{_PROBE_FORMAT}|{path_str}|{real}|{st.st_size}|{st.st_mtime_ns}|{st.st_ino}"


@functools.lru_cache(maxsize=64)
def _probe_tool(path_str: str, source: str) -> PtxasTool | None:
    """The :class:`PtxasTool` of one binary: from the disk memo (``<cache>/tools``, keyed by
    :func:`_probe_key`) when this very binary was probed before, else by running it
    (``--version``, ``--help``: two processes, tens of milliseconds), then memoized."""
    ident = _probe_key(path_str)
    d = cache_dir()
    memo = None
    if ident is not None and d is not None:
        key = hashlib.sha256(ident.encode()).hexdigest()
        memo = d / "tools" / f"{key}.entry"
        got = read_entry(memo, key)
        if got is not None:
            m = got[0]
            try:
                version = (int(m["version"][0]), int(m["version"][1]))
                if source.startswith("pypi:") and version[0] == 12:
                    source = "pypi:nvidia-cuda-nvcc-cu12"
                return PtxasTool(path=Path(path_str), source=source, version=version,
                                 build=str(m["build"]), gpu_names=frozenset(m["gpu_names"]))
            except (KeyError, TypeError, ValueError, IndexError):
                pass  # a foreign memo: probe again (and overwrite it)
    tool = _run_probe(path_str, source)
    if tool is not None and memo is not None:
        try:
            memo.parent.mkdir(parents=True, exist_ok=True)
            write_entry(memo, {"key": memo.stem, "version": list(tool.version),
                               "build": tool.build, "gpu_names": sorted(tool.gpu_names)})
        except OSError:
            pass  # a read-only or full disk only costs speed
    return tool


def _run_probe(path_str: str, source: str) -> PtxasTool | None:
    path = Path(path_str)
    try:
        ver = subprocess.run(
            [path_str, "--version"], capture_output=True, text=True, timeout=30, check=False
        )
        helptext = subprocess.run(
            [path_str, "--help"], capture_output=True, text=True, timeout=30, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None
    m = _VERSION_RE.search(ver.stdout)
    if not m:
        return None
    names = frozenset(re.findall(r"'(sm_\d+[af]?)'", helptext.stdout))
    version = (int(m.group(1)), int(m.group(2)))
    if source.startswith("pypi:") and version[0] == 12:
        source = "pypi:nvidia-cuda-nvcc-cu12"
    return PtxasTool(path=path, source=source, version=version, build=m.group(3), gpu_names=names)


def discover() -> list[PtxasTool]:
    """Every working ptxas on this machine, in search order, without duplicates."""
    tools: list[PtxasTool] = []
    seen: set[Path] = set()
    for path, source in _candidates():
        if not path.is_file() or not os.access(path, os.X_OK):
            continue
        real = path.resolve()
        if real in seen:
            continue
        seen.add(real)
        tool = _probe_tool(str(path), source)
        if tool is not None:
            tools.append(tool)
    return tools


def find_ptxas(target: str | None = None) -> PtxasTool:
    """The ptxas to use for ``target`` (the first found that accepts it).

    Raises PtxasError with install advice when none does.
    """
    tools = discover()
    if not tools:
        raise PtxasError(
            "no ptxas found (looked at $NVATOM_PTXAS, PATH, /usr/local/cuda/bin and the "
            "nvidia-cuda-nvcc wheels); install the CUDA toolkit or "
            "'pip install nvatom[ptxas]'"
        )
    if target is None:
        return tools[0]
    for tool in tools:
        if tool.accepts(target):
            return tool
    found = ", ".join(f"{t.version_str} ({t.path})" for t in tools)
    hint = ""
    if target in ("sm_70", "sm_72"):
        hint = (
            "; CUDA 13 dropped it: install the sm70 extra "
            "('pip install nvatom[sm70]', nvidia-cuda-nvcc-cu12 12.9)"
        )
    raise PtxasError(f"no ptxas accepts target '{target}' (found: {found}){hint}", target=target)


# --------------------------------------------------------------------------- parsing


def _parse_output(text: str) -> tuple[dict[str, KernelResources], tuple[Diagnostic, ...]]:
    kernels: dict[str, dict] = {}
    diags: list[Diagnostic] = []
    current: str | None = None
    for raw in text.splitlines():
        line = raw.strip()
        if not line:
            continue
        m = _ENTRY_RE.search(line)
        if m:
            current = m.group(1)
            kernels.setdefault(current, {"name": current})
            continue
        m = _FUNC_PROPS_RE.search(line)
        if m:
            current = m.group(1)
            if current in kernels or not kernels:
                kernels.setdefault(current, {"name": current})
            continue
        m = _FRAME_RE.search(line)
        if m and current in kernels:
            k = kernels[current]
            k["stack_frame"], k["spill_stores"], k["spill_loads"] = map(int, m.groups())
            continue
        m = _USED_RE.search(line)
        if m and current in kernels:
            k = kernels[current]
            k["registers"] = int(m.group(1))
            if b := _BARRIERS_RE.search(line):
                k["barriers"] = int(b.group(1))
            if s := _SMEM_RE.search(line):
                k["shared_bytes"] = int(s.group(1))
            k["cmem"] = tuple((int(bank), int(n)) for n, bank in _CMEM_RE.findall(line))
            continue
        m = _DIAG_RE.match(line)
        if m:
            sev, msg = m.group("sev"), m.group("msg").strip()
            if sev == "info" and not msg.startswith("Advisory") and not msg.startswith("("):
                continue  # the -v chatter ("0 bytes gmem", "Compile time = ...")
            ln = int(m.group("line")) if m.group("line") else None
            diags.append(Diagnostic(sev, msg, ln))
    return {n: KernelResources(**v) for n, v in kernels.items()}, tuple(diags)


# --------------------------------------------------------------------------- cache


def cache_dir() -> Path | None:
    """Disk cache location: $NVATOM_CACHE_DIR, else ~/.cache/nvatom; None if disabled."""
    env = os.environ.get("NVATOM_CACHE_DIR")
    if env == "":
        return None
    base = Path(env) if env else Path.home() / ".cache" / "nvatom"
    return base / "ptxas"


_memory_cache: dict[str, tuple[bool, bytes, str]] = {}

# A disk-cache entry is one file, written whole or not at all and checked when read:
#
#     magic (8 bytes) | meta length (u64) | blob length (u64) | sha256(meta + blob) (32 bytes)
#     | meta (UTF-8 JSON object, holding the entry's "key") | blob (the cubin)
#
# Writers write a temporary file in the same directory and ``os.replace`` it onto the entry's
# name (atomic on POSIX and Windows), so a reader sees the old file, the new one or none,
# never half of one, and two processes writing the same entry at once both succeed (the last
# rename wins; their contents are equal).  A reader rejects, and removes, a file that is short,
# long, of another format, whose digest does not match, whose key is not the one asked for, or
# whose blob is not an ELF file where a cubin is expected: the caller then rebuilds it.
# Temporary files a killed writer left behind are never read, and are removed once stale.
_ENTRY_MAGIC = b"nvatomE1"
_ENTRY_HEADER = struct.Struct("<8sQQ32s")
_ELF_MAGIC = b"\x7fELF"
_TMP_PREFIX = ".tmp-"
#: The largest cache entry read back (a cubin of our largest kernel is under 1 MiB); a larger
#: file, or one that is not a regular file, is a bad entry: removed, never read.
MAX_ENTRY_BYTES = 64 << 20
#: A temporary file older than this (seconds) is a dead writer's: removed by the next writer.
STALE_TMP_SECONDS = 3600.0


def write_entry(path: Path, meta: dict, blob: bytes = b"") -> None:
    """Write a checked cache entry atomically (temporary file + ``os.replace``).  Raises
    OSError when the disk refuses (callers treat that as a cache miss)."""
    meta_bytes = json.dumps(meta, sort_keys=True).encode()
    digest = hashlib.sha256(meta_bytes + blob).digest()
    header = _ENTRY_HEADER.pack(_ENTRY_MAGIC, len(meta_bytes), len(blob), digest)
    _atomic_write(path, header + meta_bytes + blob)


def read_entry(path: Path, key: str, *, elf: bool = False) -> tuple[dict, bytes] | None:
    """The (meta, blob) of a cache entry written by :func:`write_entry` for ``key``, or None
    when it is absent or fails a check (the bad file is removed).  ``elf``: the blob must be a
    non-empty ELF file (a cubin)."""
    try:
        with open(path, "rb") as f:
            st = os.fstat(f.fileno())
            ino = st.st_ino
            # size and file type first: an entry grown to gigabytes, or a link to /dev/zero,
            # must not be read whole into memory (fuzz finding, issue 28)
            big = not stat.S_ISREG(st.st_mode) or st.st_size > MAX_ENTRY_BYTES
            data = b"" if big else f.read(MAX_ENTRY_BYTES + 1)
    except OSError:
        return None
    entry = None if len(data) > MAX_ENTRY_BYTES else _decode_entry(data, key, elf)
    if entry is None:
        try:  # remove the bad file, unless a writer has just replaced it with a new one
            if os.stat(path).st_ino == ino:
                path.unlink()
        except OSError:
            pass
    return entry


def _decode_entry(data: bytes, key: str, elf: bool) -> tuple[dict, bytes] | None:
    n = _ENTRY_HEADER.size
    if len(data) < n:
        return None
    magic, meta_len, blob_len, digest = _ENTRY_HEADER.unpack_from(data)
    if magic != _ENTRY_MAGIC or len(data) != n + meta_len + blob_len:
        return None
    body = data[n:]
    if hashlib.sha256(body).digest() != digest:
        return None
    try:
        meta = json.loads(body[:meta_len].decode())
    except (UnicodeDecodeError, ValueError):
        return None
    blob = body[meta_len:]
    if not isinstance(meta, dict) or meta.get("key") != key:
        return None
    if elf and not blob.startswith(_ELF_MAGIC):
        return None
    return meta, blob


def _discard(path: Path) -> None:
    try:
        path.unlink()
    except OSError:
        pass  # gone already (another reader), or read-only: the caller rebuilds anyway


def _cache_key(tool: PtxasTool, target: str, args: Sequence[str], ptx: str) -> str:
    h = hashlib.sha256()
    for part in (str(_CACHE_FORMAT), tool.build, str(tool.path.resolve()), target, *args):
        h.update(part.encode())
        h.update(b"\0")
    h.update(ptx.encode())
    return h.hexdigest()


def _entry_path(d: Path, key: str) -> Path:
    return d / key[:2] / f"{key}.entry"


def _cache_get(key: str) -> tuple[bool, bytes, str] | None:
    hit = _memory_cache.get(key)
    if hit is not None:
        return hit
    d = cache_dir()
    if d is None:
        return None
    got = read_entry(_entry_path(d, key), key)
    if got is None:
        return None
    meta, cubin = got
    ok, log = meta.get("ok"), meta.get("log")
    if not isinstance(ok, bool) or not isinstance(log, str) or \
            (ok and not cubin.startswith(_ELF_MAGIC)):
        _discard(_entry_path(d, key))
        return None
    entry = (ok, cubin, log)
    _memory_cache[key] = entry
    return entry


def _cache_put(key: str, ok: bool, cubin: bytes, log: str) -> None:
    _memory_cache[key] = (ok, cubin, log)
    d = cache_dir()
    if d is None:
        return
    try:
        (d / key[:2]).mkdir(parents=True, exist_ok=True)
        write_entry(_entry_path(d, key), {"key": key, "ok": ok, "log": log},
                    cubin if ok else b"")
    except OSError:
        pass  # a read-only or full disk only costs speed


def _atomic_write(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` through a temporary file in the same directory and
    ``os.replace``: readers never see a partial file.  The temporary file is removed when
    the write fails; stale ones of killed writers are swept (:data:`STALE_TMP_SECONDS`)."""
    _sweep_stale(path.parent)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=_TMP_PREFIX)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        _discard(Path(tmp))
        raise


def _sweep_stale(d: Path) -> None:
    now = time.time()
    try:
        names = [e for e in os.scandir(d) if e.name.startswith(_TMP_PREFIX)]
    except OSError:
        return
    for e in names:
        try:
            if now - e.stat().st_mtime > STALE_TMP_SECONDS:
                os.unlink(e.path)
        except OSError:
            pass  # another writer swept it first


# --------------------------------------------------------------------------- assembly


def _run_ptxas(
    tool: PtxasTool, target: str, args: Sequence[str], ptx: str
) -> tuple[bool, bytes, str]:
    with tempfile.TemporaryDirectory(prefix="nvatom-ptxas-") as tmp:
        src = Path(tmp) / "kernel.ptx"
        out = Path(tmp) / "kernel.cubin"
        src.write_text(ptx)
        cmd = [str(tool.path), "-arch", target, "-v", *args, str(src), "-o", str(out)]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=False)
        except subprocess.TimeoutExpired:
            return False, b"", "ptxas fatal   : timed out after 300 s"
        log = (proc.stdout + proc.stderr).replace(str(src), "<ptx>")
        if proc.returncode != 0 or not out.exists():
            return False, b"", log
        return True, out.read_bytes(), log


def _normalise_target(target: object) -> str:
    name = getattr(target, "name", target)
    if not isinstance(name, str) or not re.fullmatch(r"sm_\d+[af]?", name):
        raise PtxasError(f"'{target}' is not a GPU target name like 'sm_90a'")
    return name


def check(
    ptx: str,
    target: object,
    *,
    args: Iterable[str] = (),
    ptxas: PtxasTool | None = None,
    use_cache: bool = True,
) -> tuple[bool, tuple[Diagnostic, ...]]:
    """Assemble without raising: (accepted, diagnostics).  For legality probes."""
    try:
        result = assemble(ptx, target, args=args, ptxas=ptxas, use_cache=use_cache)
    except PtxasError as err:
        if err.target is None:  # not a rejection of the PTX (no ptxas, bad target name)
            raise
        return False, err.diagnostics
    return True, result.diagnostics


def assemble(
    ptx: str,
    target: object,
    *,
    args: Iterable[str] = (),
    ptxas: PtxasTool | None = None,
    use_cache: bool = True,
) -> Assembled:
    """Assemble ``ptx`` for ``target`` (a name like "sm_90a" or an arch.Target).

    Returns the cubin with each kernel's resources; raises PtxasError carrying ptxas's
    messages (``err.diagnostics``, ``err.log``) when ptxas rejects the PTX.
    """
    name = _normalise_target(target)
    tool = ptxas or find_ptxas(name)
    if not tool.accepts(name):
        raise PtxasError(f"ptxas {tool.version_str} ({tool.path}) does not accept target '{name}'")
    argv = tuple(args)
    key = _cache_key(tool, name, argv, ptx)
    hit = _cache_get(key) if use_cache else None
    if hit is not None:
        ok, cubin, log = hit
        cached = True
    else:
        ok, cubin, log = _run_ptxas(tool, name, argv, ptx)
        cached = False
        if use_cache:
            _cache_put(key, ok, cubin, log)
    kernels, diags = _parse_output(log)
    if not ok:
        errors = [d for d in diags if d.severity in ("error", "fatal")]
        first = errors[0] if errors else Diagnostic("error", log.strip() or "ptxas failed")
        raise PtxasError(
            f"ptxas {tool.version_str} rejected the PTX for {name}: {first}",
            log=log,
            target=name,
            diagnostics=diags,
        )
    return Assembled(
        target=name,
        cubin=cubin,
        kernels=kernels,
        diagnostics=diags,
        ptxas_version=tool.build,
        cached=cached,
    )
