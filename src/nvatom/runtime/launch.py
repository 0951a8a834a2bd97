"""Compile, cache, load and launch nvatom kernels on the GPU.

A :class:`KernelSource` names one kernel: a key that says everything its PTX depends on (the
kernel spec), the entry name, the parameter list and a function that emits the PTX for a
target.  :func:`get_kernel` turns (source, target) into a :class:`LoadedKernel`:

1. memory cache, keyed by (key, target, device);
2. disk cache of the cubin (``$NVATOM_CACHE_DIR`` or ``~/.cache/nvatom``, sub-folder
   ``kernels``; ``NVATOM_CACHE_DIR=""`` disables it, as for ptxas), keyed by a hash of the key,
   the target, the ptxas build and a fingerprint of nvatom's own source, so editing an emitter
   never serves a stale cubin; an entry is one self-checking file written atomically
   (:func:`nvatom.runtime.ptxas.write_entry`): a truncated, corrupted or foreign file is
   removed and the kernel rebuilt (docs/reliability.md);
3. otherwise the PTX is built and assembled (:func:`nvatom.runtime.ptxas.assemble`).

Launching goes through ``cuda.core`` (``ObjectCode.from_cubin``, ``LaunchConfig(grid, block,
shmem_size, cluster)``, ``launch``) on torch's current stream, or through the driver
(``cuLaunchKernelEx`` from ``cuda.bindings``) when an argument is an opaque by-value blob
(:class:`ByValue`: a 128-byte ``CUtensorMap``, declared ``.param .align 64 .b8 name[128]`` in
PTX, the ``__grid_constant__`` convention) that cuda.core cannot pass.  Either way dynamic
shared memory above 48 KB is enabled first with
``CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES`` (CUDA Driver API, "Execution Control"),
and a cluster shape is passed as the launch attribute ``CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION``.

Argument packing (:func:`pack_args`) is pure Python and checked without a GPU: each value must
fit its PTX parameter type, and a by-value blob must have the declared size.

The hot path (``nvatom.gemm``): :meth:`LoadedKernel.launcher` turns a launch shape into a
:class:`Launcher` once (dynamic-smem attribute set, ``CUlaunchConfig`` with its cluster
attribute built per stream), :class:`PackedParams` lays the arguments out once (the
``kernelParams`` pointer array), and :class:`LruCache` / :class:`TensorMapCache` keep what a
repeated call would otherwise recompute (encoded tensor maps keyed by the whole map: pointer,
shape, strides, type, box, swizzle).  A launch is then one ``cuLaunchKernelEx`` call.
"""

from __future__ import annotations

import ctypes
import dataclasses
import functools
import hashlib
import inspect
import os
import re
import struct
from collections import OrderedDict
from collections.abc import Callable, Hashable, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from nvatom.errors import NvatomError
from nvatom.ptx.builder import Kernel, Param
from nvatom.runtime import ptxas
from nvatom.runtime.torch_interop import TensorArgumentError, stream_handle

__all__ = [
    "ByValue",
    "KernelSource",
    "LaunchError",
    "Launcher",
    "LoadedKernel",
    "LruCache",
    "PackedArg",
    "PackedParams",
    "TensorMapCache",
    "build_cubin",
    "clear_memory_cache",
    "get_kernel",
    "kernel_cache_dir",
    "kernel_disk_key",
    "load_cached_kernel",
    "pack_args",
    "param_decl",
    "params_of",
]

#: The largest dynamic shared memory a block may use without opting in (CUDA: 48 KB).
DEFAULT_DYNAMIC_SMEM = 48 * 1024
#: Launch-shape limits of every GPU nvatom targets (CUDA C++ Programming Guide, "Compute
#: Capabilities", technical specifications: grid x 2^31 - 1, y and z 65535; block x and y
#: 1024, z 64, 1024 threads in all).
_DIM_LIMITS = {"grid": (2**31 - 1, 65535, 65535), "block": (1024, 1024, 64)}
MAX_BLOCK_THREADS = 1024
#: Bump when the disk-cache entry format changes.
_CACHE_FORMAT = 2

# PTX parameter type -> (struct format, integer range or None for floats)
_SCALARS: dict[str, tuple[str, tuple[int, int] | None]] = {
    "u8": ("B", (0, 2**8 - 1)), "s8": ("b", (-(2**7), 2**7 - 1)),
    "u16": ("H", (0, 2**16 - 1)), "s16": ("h", (-(2**15), 2**15 - 1)),
    "u32": ("I", (0, 2**32 - 1)), "s32": ("i", (-(2**31), 2**31 - 1)),
    "b32": ("I", (0, 2**32 - 1)),
    "u64": ("Q", (0, 2**64 - 1)), "s64": ("q", (-(2**63), 2**63 - 1)),
    "b64": ("Q", (0, 2**64 - 1)),
    "f32": ("f", None), "f64": ("d", None),
}
_BLOB_RE = re.compile(r"b8\[(\d+)\](?:@(\d+))?")
# PTX parameter type -> the numpy scalar type cuda.core's launch packs with its width
_NP_TYPES = {"u8": np.uint8, "s8": np.int8, "u16": np.uint16, "s16": np.int16,
             "u32": np.uint32, "s32": np.int32, "b32": np.uint32, "u64": np.uint64,
             "s64": np.int64, "b64": np.uint64, "f32": np.float32, "f64": np.float64}


class LaunchError(NvatomError):
    """A kernel could not be loaded or launched (bad arguments, driver error, no GPU)."""


@dataclasses.dataclass(frozen=True)
class ByValue:
    """Opaque bytes passed by value, e.g. a 128-byte ``CUtensorMap`` for TMA."""

    data: bytes

    def __post_init__(self) -> None:
        if not isinstance(self.data, (bytes, bytearray)):
            raise LaunchError(f"ByValue takes bytes, got {type(self.data).__name__}")


class PackedArg(NamedTuple):
    """One parameter as the driver sees it: its bytes, the PTX type they came from and the
    scalar value (None for a by-value blob)."""

    type: str
    data: bytes
    value: int | float | None


def _builder_param(name: str, type_: str) -> Param:
    m = _BLOB_RE.fullmatch(type_)
    if m:
        return Param(name, "b8", int(m.group(1)), int(m.group(2) or 8))
    if type_ not in _SCALARS:
        raise LaunchError(f"parameter '{name}': unknown PTX parameter type '{type_}' (one of "
                          f"{', '.join(_SCALARS)}, b8[N]@ALIGN)")
    return Param(name, type_)


def param_decl(name: str, type_: str) -> str:
    """The PTX declaration of a parameter (the builder's): ``.param .u64 A`` or, for a blob
    ``b8[128]@64``, ``.param .align 64 .b8 tmap[128]``."""
    return _builder_param(name, type_).declaration()


def params_of(kernel: Kernel) -> tuple[tuple[str, str], ...]:
    """A builder kernel's parameters as (name, type) for :class:`KernelSource`
    (byte arrays as ``b8[N]@ALIGN``)."""
    return tuple((p.name, p.type if p.nbytes is None else f"b8[{p.nbytes}]@{p.align}")
                 for p in kernel.params)


@functools.lru_cache(maxsize=256)
def _param_plan(params: tuple[tuple[str, str], ...]
                ) -> tuple[tuple[str, str, str | None, tuple[int, int] | None, int], ...]:
    """Per parameter: (name, type, struct format or None for a blob, int range, blob size)."""
    out = []
    for name, ty in params:
        m = _BLOB_RE.fullmatch(ty)
        if m:
            out.append((name, ty, None, None, int(m.group(1))))
            continue
        try:
            fmt, rng = _SCALARS[ty]
        except KeyError:
            raise LaunchError(f"parameter '{name}': unknown PTX parameter type '{ty}'") from None
        out.append((name, ty, "<" + fmt, rng, 0))
    return tuple(out)


def pack_args(params: Sequence[tuple[str, str]], values: Sequence[Any]) -> list[PackedArg]:
    """Check ``values`` against the kernel's ``(name, PTX type)`` parameters and pack them."""
    if len(values) != len(params):
        names = ", ".join(n for n, _ in params)
        raise LaunchError(f"kernel takes {len(params)} arguments ({names}), got {len(values)}")
    out = []
    for (name, ty, fmt, rng, size), v in zip(_param_plan(tuple(params)), values, strict=True):
        if fmt is None:
            data = v.data if isinstance(v, ByValue) else v
            if not isinstance(data, (bytes, bytearray)):
                raise LaunchError(f"argument '{name}' ({ty}) takes {size} bytes (ByValue), got "
                                  f"{type(v).__name__}")
            if len(data) != size:
                raise LaunchError(f"argument '{name}' ({ty}) takes {size} bytes, got "
                                  f"{len(data)}")
            out.append(PackedArg(ty, bytes(data), None))
            continue
        if type(v) is bool or not isinstance(v, int if rng is not None else (int, float)):
            want = "an int" if rng is not None else "a number"
            raise LaunchError(f"argument '{name}' (.{ty}) takes {want}, got {v!r}")
        if rng is not None and not rng[0] <= v <= rng[1]:
            raise LaunchError(f"argument '{name}' = {v} does not fit .{ty} "
                              f"[{rng[0]}, {rng[1]}]")
        out.append(PackedArg(ty, struct.pack(fmt, v), v))
    return out


class PackedParams:
    """Packed arguments laid out for ``cuLaunchKernelEx``: one buffer per parameter and the
    array of pointers to them (``kernelParams``); :attr:`address` is that array's address.
    Build once, launch many times (the buffers live as long as this object)."""

    __slots__ = ("_bufs", "_ptrs", "address", "nbytes")

    def __init__(self, packed: Sequence[PackedArg]) -> None:
        self._bufs = [ctypes.create_string_buffer(p.data, len(p.data)) for p in packed]
        self._ptrs = (ctypes.c_void_p * max(1, len(self._bufs)))(
            *[ctypes.addressof(b) for b in self._bufs])
        self.address = ctypes.addressof(self._ptrs)
        self.nbytes = sum(len(p.data) for p in packed)

    @classmethod
    def of(cls, params: Sequence[tuple[str, str]], values: Sequence[Any]) -> PackedParams:
        """:func:`pack_args` (checked) laid out for a launch."""
        return cls(pack_args(params, values))

    def data(self, i: int) -> bytes:
        """The bytes of parameter ``i`` (tests)."""
        return bytes(self._bufs[i].raw)


class LruCache:
    """A bounded mapping with least-recently-used eviction (``get_or_make``)."""

    def __init__(self, maxsize: int = 256) -> None:
        if isinstance(maxsize, bool) or not isinstance(maxsize, int) or maxsize < 1:
            raise LaunchError(f"LruCache maxsize must be a positive int, got {maxsize!r}")
        self.maxsize = maxsize
        self._d: OrderedDict[Hashable, Any] = OrderedDict()
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        return len(self._d)

    def __contains__(self, key: Hashable) -> bool:
        return key in self._d

    def get_or_make(self, key: Hashable, make: Callable[[], Any]) -> Any:
        d = self._d
        try:
            v = d[key]
        except KeyError:
            self.misses += 1
            v = make()
            d[key] = v
            if len(d) > self.maxsize:
                d.popitem(last=False)
            return v
        self.hits += 1
        d.move_to_end(key)
        return v

    def clear(self) -> None:
        self._d.clear()


class TensorMapCache(LruCache):
    """Encoded 128-byte tensor maps keyed by the whole :class:`~nvatom.descriptors.tma.TensorMap`
    (global address, dims, strides, data type, box, element strides, swizzle, L2 promotion,
    OOB fill): a map is encoded (``encoder``, default the driver's ``cuTensorMapEncode*``)
    once per distinct key, at most ``maxsize`` kept."""

    def __init__(self, maxsize: int = 512,
                 encoder: Callable[[Any], bytes] | None = None) -> None:
        super().__init__(maxsize)
        self.encoder = encoder or (lambda tm: tm.encode_with_driver())

    def get(self, tm: Any) -> bytes:
        return self.get_or_make(tm, lambda: bytes(self.encoder(tm)))


@dataclasses.dataclass(frozen=True)
class KernelSource:
    """One kernel to compile: ``key`` must determine the PTX (with the target)."""

    key: str
    name: str
    params: tuple[tuple[str, str], ...]
    build: Callable[[str], str] = dataclasses.field(compare=False, hash=False, repr=False)


# --------------------------------------------------------------------------- caching


def kernel_cache_dir() -> Path | None:
    """``<cache>/kernels``, next to ptxas's cache; None when caching is disabled."""
    d = ptxas.cache_dir()
    return None if d is None else d.parent / "kernels"


#: The parts of nvatom a kernel's PTX can depend on (the rooms below the runtime).
_PTX_ROOMS = ("layout", "atoms", "descriptors", "ptx", "kernels")
_PTX_FILES = ("arch.py", "dtypes.py", "errors.py", "diagnostics.py")


@functools.lru_cache(maxsize=1)
def _code_fingerprint() -> str:
    """Hash of the source of every room PTX is made from: a changed emitter changes every
    cache key, so a stale cubin is never served.  The hash of the contents is memoized on
    disk (``<cache>/fingerprints``) under a hash of every file's path, size, inode,
    modification and change times (``os.stat``), so a process whose sources are the ones
    hashed before reads one small file instead of all of them (a first call's cost)."""
    root = Path(__file__).resolve().parents[1]
    files = [f for room in _PTX_ROOMS for f in sorted((root / room).rglob("*.py"))
             if (root / room).is_dir()]
    files += [root / f for f in _PTX_FILES if (root / f).is_file()]
    sig = hashlib.sha256(str(root).encode())
    for f in files:
        st = f.stat()
        sig.update(f"{f.relative_to(root)}|{st.st_size}|{st.st_ino}|{st.st_mtime_ns}|"
                   f"{st.st_ctime_ns}\0".encode())
    key = sig.hexdigest()
    d = ptxas.cache_dir()
    memo = None if d is None else d.parent / "fingerprints" / f"{key}.entry"
    if memo is not None:
        got = ptxas.read_entry(memo, key)
        if got is not None and isinstance(got[0].get("fingerprint"), str):
            return str(got[0]["fingerprint"])
    h = hashlib.sha256()
    for f in files:
        h.update(str(f.relative_to(root)).encode())
        h.update(f.read_bytes())
    fingerprint = h.hexdigest()[:16]
    if memo is not None:
        try:
            memo.parent.mkdir(parents=True, exist_ok=True)
            ptxas.write_entry(memo, {"key": key, "fingerprint": fingerprint})
        except OSError:
            pass  # a read-only or full disk only costs speed
    return fingerprint


def _disk_key(source: KernelSource, target: str, ptxas_build: str) -> str:
    h = hashlib.sha256()
    for part in (str(_CACHE_FORMAT), _code_fingerprint(), ptxas_build, target, source.key):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()


_cubins: dict[tuple[str, str], bytes] = {}
_loaded: dict[tuple[str, str, int, str], LoadedKernel] = {}


def clear_memory_cache() -> None:
    _cubins.clear()
    _loaded.clear()


def kernel_disk_key(source: KernelSource, target: str) -> str:
    """The disk-cache key of ``source``'s cubin for ``target`` (code fingerprint, ptxas
    build, target and the source's key)."""
    return _disk_key(source, target, ptxas.find_ptxas(target).build)


def _entry_path(key: str) -> Path | None:
    d = kernel_cache_dir()
    return None if d is None else d / key[:2] / f"{key}.entry"


def build_cubin(source: KernelSource, target: str) -> tuple[bytes, bool]:
    """The cubin of ``source`` for ``target`` and whether it came from a cache."""
    mkey = (source.key, target)
    if mkey in _cubins:
        return _cubins[mkey], True
    tool = ptxas.find_ptxas(target)
    key = _disk_key(source, target, tool.build)
    path = _entry_path(key)
    if path is not None:
        got = ptxas.read_entry(path, key, elf=True)  # a bad file is removed and rebuilt
        if got is not None and got[0].get("name") == source.name:
            _cubins[mkey] = got[1]
            return got[1], True
    res = ptxas.assemble(source.build(target), target, ptxas=tool)
    if source.name not in res.kernels:
        raise LaunchError(f"the PTX of '{source.key}' has no entry '{source.name}' "
                          f"(entries: {', '.join(res.kernels)})")
    _cubins[mkey] = res.cubin
    if path is not None:
        meta = {"key": key, "source_key": source.key, "name": source.name, "target": target,
                "resources": dataclasses.asdict(res.kernels[source.name])}
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            ptxas.write_entry(path, meta, res.cubin)
        except OSError:
            pass  # a read-only or full disk only costs speed
    return res.cubin, False


def load_cached_kernel(source: KernelSource, target: str, disk_key: str,
                       device: int) -> LoadedKernel | None:
    """``source`` loaded on ``device`` through the driver (``cuModuleLoadData``) from the
    disk-cache entry ``disk_key`` (:func:`kernel_disk_key`, recorded earlier), without
    building, assembling or fingerprinting anything; None when that entry is missing or
    fails its checks (the caller then takes :func:`get_kernel`).  The kernel joins the memory
    caches as :func:`get_kernel` with ``backend="driver"`` would have made it."""
    key = (source.key, target, device, "driver")
    hit = _loaded.get(key)
    if hit is not None:
        return hit
    cubin = _cubins.get((source.key, target))
    if cubin is None:
        path = _entry_path(disk_key)
        got = None if path is None else ptxas.read_entry(path, disk_key, elf=True)
        if got is None or got[0].get("name") != source.name:
            return None
        cubin = got[1]
        _cubins[(source.key, target)] = cubin
    kernel = LoadedKernel(source, target, cubin, device, "driver")
    _loaded[key] = kernel
    return kernel


# --------------------------------------------------------------------------- driver helpers


def _driver() -> Any:
    try:
        from cuda.bindings import driver
    except ImportError as e:
        raise LaunchError(f"launching needs cuda.bindings (pip install cuda-python): {e}") from None
    return driver


def _check(result: Any, what: str) -> Any:
    """Unpack a cuda.bindings ``(CUresult, *values)`` tuple, raising on an error."""
    err, *rest = result if isinstance(result, tuple) else (result,)
    if int(err) != 0:
        cu = _driver()
        _, msg = cu.cuGetErrorString(err)
        text = msg.decode() if isinstance(msg, bytes) else str(msg)
        raise LaunchError(f"{what} failed: {err!r} ({text})")
    if not rest:
        return None
    return rest[0] if len(rest) == 1 else tuple(rest)


def _ensure_context(device: int) -> None:
    cu = _driver()
    _check(cu.cuInit(0), "cuInit")
    ctx = _check(cu.cuCtxGetCurrent(), "cuCtxGetCurrent")
    if ctx is None or int(ctx) == 0:
        dev = _check(cu.cuDeviceGet(device), "cuDeviceGet")
        primary = _check(cu.cuDevicePrimaryCtxRetain(dev), "cuDevicePrimaryCtxRetain")
        _check(cu.cuCtxSetCurrent(primary), "cuCtxSetCurrent")


def _dims(v: int | Sequence[int], what: str) -> tuple[int, int, int]:
    t = (v,) if isinstance(v, int) else tuple(v)
    if not 1 <= len(t) <= 3 or any(isinstance(x, bool) or not isinstance(x, int) or x < 1
                                   for x in t):
        raise LaunchError(f"{what} must be 1 to 3 positive ints, got {v!r}")
    dims: tuple[int, int, int] = (*t, 1, 1)[:3]  # type: ignore[assignment]
    limits = _DIM_LIMITS.get(what)
    if limits is not None:
        for axis, x, most in zip("xyz", dims, limits, strict=True):
            if x > most:
                raise LaunchError(f"{what} {dims}: {what}Dim.{axis} = {x} exceeds the CUDA "
                                  f"limit {most}")
        if what == "block" and dims[0] * dims[1] * dims[2] > MAX_BLOCK_THREADS:
            raise LaunchError(f"block {dims} has {dims[0] * dims[1] * dims[2]} threads, more "
                              f"than the CUDA limit {MAX_BLOCK_THREADS}")
    return dims


class LoadedKernel:
    """A kernel loaded on one device, launchable through cuda.core or the driver."""

    def __init__(self, source: KernelSource, target: str, cubin: bytes, device: int,
                 backend: str) -> None:
        self.source = source
        self.target = target
        self.cubin = cubin
        self.device = device
        self.backend = backend
        self._smem_limit = DEFAULT_DYNAMIC_SMEM
        self._launchers: dict[tuple[Any, ...], Launcher] = {}
        _ensure_context(device)
        if backend == "cuda.core":
            self._load_core()
        else:
            self._load_driver()

    # ----------------------------------------------------------------- loading
    def _load_core(self) -> None:
        cc = _cuda_core()
        self._cc = cc
        self._dev = cc.Device(self.device)
        self._dev.set_current()
        if hasattr(cc.ObjectCode, "from_cubin"):
            obj = cc.ObjectCode.from_cubin(self.cubin)
        else:  # cuda.core < 0.2
            obj = cc.ObjectCode(self.cubin, "cubin")
        self._obj = obj
        self._kernel = obj.get_kernel(self.source.name)
        cu = _driver()
        handle = getattr(self._kernel, "handle", None)
        if handle is None:
            handle = self._kernel._handle
        if not isinstance(handle, (cu.CUkernel, cu.CUfunction)):
            handle = cu.CUkernel(int(handle))
        self._library_kernel = handle if isinstance(handle, cu.CUkernel) else None
        if self._library_kernel is not None:
            # A library kernel: resolve it in the current context for the attribute and for
            # driver launches (cuKernelGetFunction).
            self._func = _check(cu.cuKernelGetFunction(handle), "cuKernelGetFunction")
        else:
            self._func = handle

    def _load_driver(self) -> None:
        cu = _driver()
        self._library_kernel = None
        self._module = _check(cu.cuModuleLoadData(self.cubin), "cuModuleLoadData")
        self._func = _check(cu.cuModuleGetFunction(self._module, self.source.name.encode()),
                            "cuModuleGetFunction")

    def _set_smem(self, nbytes: int) -> None:
        if nbytes <= self._smem_limit:
            return
        cu = _driver()
        attr = cu.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
        if self._library_kernel is not None:  # what cuda.core launches: set it per device
            _check(cu.cuKernelSetAttribute(attr, nbytes, self._library_kernel,
                                           cu.CUdevice(self.device)),
                   f"cuKernelSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES={nbytes})")
        _check(cu.cuFuncSetAttribute(self._func, attr, nbytes),
               f"cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES={nbytes}) for "
               f"{self.source.name}")
        self._smem_limit = nbytes

    # ----------------------------------------------------------------- launching
    def launcher(self, grid: int | Sequence[int], block: int | Sequence[int], *,
                 shmem: int = 0, cluster: int | Sequence[int] | None = None) -> Launcher:
        """The :class:`Launcher` of one launch shape (checked and built once, then cached on
        this kernel): ``launcher(params, stream)`` is a single ``cuLaunchKernelEx``."""
        key = (grid, block, shmem, cluster)
        try:
            hit = self._launchers.get(key)
        except TypeError:  # unhashable (lists): normalise first
            hit = None
            key = (_dims(grid, "grid"), _dims(block, "block"), shmem,
                   None if cluster is None else _dims(cluster, "cluster"))
        if hit is not None:
            return hit
        g, b = _dims(grid, "grid"), _dims(block, "block")
        c = None if cluster is None else _dims(cluster, "cluster")
        if c is not None and any(gi % ci for gi, ci in zip(g, c, strict=True)):
            raise LaunchError(f"grid {g} is not a whole number of clusters {c}")
        if isinstance(shmem, bool) or not isinstance(shmem, int) or shmem < 0:
            raise LaunchError(f"shmem must be a byte count >= 0, got {shmem!r}")
        self._set_smem(shmem)
        launcher = Launcher(self, g, b, shmem, c)
        self._launchers[key] = launcher
        return launcher

    def launch(self, grid: int | Sequence[int], block: int | Sequence[int], args: Sequence[Any],
               *, shmem: int = 0, cluster: int | Sequence[int] | None = None,
               stream: Any = None) -> None:
        """Launch on ``stream``: default the caller's stream, torch's current stream on this
        kernel's device (the legacy default stream 0 when torch is not installed); else a raw
        ``CUstream`` handle, a ``torch.cuda.Stream`` or an object with ``__cuda_stream__``
        (:func:`nvatom.runtime.torch_interop.stream_handle`)."""
        launcher = self.launcher(grid, block, shmem=shmem, cluster=cluster)
        packed = pack_args(self.source.params, args)
        stream = _stream(stream, self.device)
        if self.backend == "cuda.core" and not _has_blob(self.source.params):
            self._launch_core(launcher.grid, launcher.block, launcher.cluster, shmem, stream,
                              packed)
        else:
            launcher(PackedParams(packed), stream)

    def _launch_core(self, g: tuple[int, int, int], b: tuple[int, int, int],
                     c: tuple[int, int, int] | None, shmem: int, stream: int,
                     packed: list[PackedArg]) -> None:
        cc = self._cc
        kwargs: dict[str, Any] = {"grid": g, "block": b, "shmem_size": shmem}
        if c is not None:
            kwargs["cluster"] = c
        s = _core_stream(cc, self._dev, stream)
        values = [_NP_TYPES[p.type](p.value) for p in packed]
        if _stream_first(cc.launch):  # cuda.core >= 0.3: launch(stream, config, kernel)
            cc.launch(s, cc.LaunchConfig(**kwargs), self._kernel, *values)
        else:  # older: the stream travels in the config
            cc.launch(self._kernel, cc.LaunchConfig(stream=s, **kwargs), *values)


@functools.lru_cache(maxsize=8)
def _stream_first(fn: Any) -> bool:
    return next(iter(inspect.signature(fn).parameters)) == "stream"


@functools.lru_cache(maxsize=256)
def _has_blob(params: tuple[tuple[str, str], ...]) -> bool:
    return any(_BLOB_RE.fullmatch(t) for _, t in params)


class Launcher:
    """One launch shape of one loaded kernel, prepared: ``launcher(params, stream)`` launches
    with :class:`PackedParams` (or the raw address of a ``kernelParams`` array) on a raw
    ``CUstream`` handle through ``cuLaunchKernelEx``.  The ``CUlaunchConfig`` (grid, block,
    dynamic smem, cluster attribute) is built once per stream handle (at most 64 kept)."""

    __slots__ = ("_cfgs", "_cu", "_func", "_launch", "_ok", "block", "cluster", "grid",
                 "name", "shmem")

    def __init__(self, kernel: LoadedKernel, grid: tuple[int, int, int],
                 block: tuple[int, int, int], shmem: int,
                 cluster: tuple[int, int, int] | None) -> None:
        self._cu = _driver()
        self._func = kernel._func
        self._launch = self._cu.cuLaunchKernelEx
        self._ok = self._cu.CUresult.CUDA_SUCCESS
        self._cfgs: dict[int, Any] = {}
        self.grid, self.block, self.shmem, self.cluster = grid, block, shmem, cluster
        self.name = kernel.source.name

    def _config(self, stream: int) -> Any:
        cu = self._cu
        cfg = cu.CUlaunchConfig()
        cfg.gridDimX, cfg.gridDimY, cfg.gridDimZ = self.grid
        cfg.blockDimX, cfg.blockDimY, cfg.blockDimZ = self.block
        cfg.sharedMemBytes = self.shmem
        cfg.hStream = cu.CUstream(stream)
        attrs = []
        if self.cluster is not None:
            attr = cu.CUlaunchAttribute()
            attr.id = cu.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
            attr.value.clusterDim.x, attr.value.clusterDim.y, attr.value.clusterDim.z = \
                self.cluster
            attrs.append(attr)
        cfg.attrs = attrs
        cfg.numAttrs = len(attrs)
        if len(self._cfgs) >= 64:
            self._cfgs.clear()
        self._cfgs[stream] = cfg
        return cfg

    def __call__(self, params: PackedParams | int, stream: int) -> None:
        cfg = self._cfgs.get(stream)
        if cfg is None:
            cfg = self._config(stream)
        addr = params if isinstance(params, int) else params.address
        res = self._launch(cfg, self._func, addr, 0)
        if res[0] != self._ok:
            _check(res, f"cuLaunchKernelEx({self.name}, grid {self.grid}, block {self.block}, "
                        f"{self.shmem} B dynamic smem, cluster {self.cluster})")


def _stream(stream: Any, device: int) -> int:
    """The raw handle of ``stream`` (None: torch's current stream on ``device``)."""

    try:
        return stream_handle(stream, device)
    except TensorArgumentError as e:
        raise LaunchError(str(e)) from None


def _core_stream(cc: Any, dev: Any, handle: int) -> Any:
    """A cuda.core Stream object wrapping the raw handle (not owned)."""
    if hasattr(cc.Stream, "from_handle"):
        return cc.Stream.from_handle(handle)

    class _Handle:
        def __cuda_stream__(self) -> tuple[int, int]:
            return (0, handle)

    return dev.create_stream(_Handle())


def _cuda_core() -> Any:
    """cuda.core's API module: the package itself from 1.0 on, ``.experimental`` before."""
    import cuda.core as cc

    if hasattr(cc, "launch") and hasattr(cc, "LaunchConfig"):
        return cc
    from cuda.core import experimental

    return experimental


def _default_backend() -> str:
    env = os.environ.get("NVATOM_LAUNCH_BACKEND")
    if env:
        return env
    try:
        _cuda_core()
    except ImportError:
        return "driver"
    return "cuda.core"


def get_kernel(source: KernelSource, target: str, *, device: int = 0,
               backend: str | None = None) -> LoadedKernel:
    """The loaded kernel of ``source`` for ``target`` on ``device`` (cached in memory; the
    cubin also on disk).  ``backend``: "cuda.core" or "driver"; default
    ``$NVATOM_LAUNCH_BACKEND``, else cuda.core when importable."""
    be = backend or _default_backend()
    if be not in ("cuda.core", "driver"):
        raise LaunchError(f"backend '{be}' (one of cuda.core, driver)")
    key = (source.key, target, device, be)
    hit = _loaded.get(key)
    if hit is not None:
        return hit
    cubin, _ = build_cubin(source, target)
    kernel = LoadedKernel(source, target, cubin, device, be)
    _loaded[key] = kernel
    return kernel

