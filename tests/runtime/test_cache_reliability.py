"""The disk caches of ptxas results and kernel cubins survive concurrent processes, killed
writers and damaged files: the result is always the cubin ptxas makes (rebuilt when needed),
never a crash or a wrong cubin (docs/reliability.md)."""

from __future__ import annotations

import hashlib
import multiprocessing
import os
import time
from pathlib import Path

import pytest

from nvatom.runtime import launch, ptxas
from nvatom.runtime.launch import KernelSource, build_cubin

_CTX = multiprocessing.get_context("fork")


def _ptx(target: str, tag: str = "a") -> str:
    return (f".version 8.0\n.target {target}\n.address_size 64\n"
            f".visible .entry k_{tag}(.param .u64 p)\n{{\n  ret;\n}}\n")


def _source(tag: str = "a") -> KernelSource:
    return KernelSource(f"test-reliability-{tag}", f"k_{tag}", (("p", "u64"),),
                        lambda t: _ptx(t, tag))


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("NVATOM_CACHE_DIR", str(tmp_path))
    launch.clear_memory_cache()
    ptxas._memory_cache.clear()
    yield tmp_path
    launch.clear_memory_cache()
    ptxas._memory_cache.clear()


def _fresh_process() -> None:
    """What a new process starts with: only the disk caches."""
    launch.clear_memory_cache()
    ptxas._memory_cache.clear()


def _truth(target: str = "sm_80", tag: str = "a") -> bytes:
    """The cubin ptxas makes, uncached (ptxas's output for a PTX text is deterministic)."""
    return ptxas.assemble(_ptx(target, tag), target, use_cache=False).cubin


def _entries(root: Path, room: str) -> list[Path]:
    return sorted((root / room).rglob("*.entry"))


# --------------------------------------------------------------------------- the entry format


def test_entry_round_trip_and_every_damage_is_refused(tmp_path) -> None:
    path = tmp_path / "x.entry"
    blob = b"\x7fELF" + bytes(range(200))
    ptxas.write_entry(path, {"key": "k1", "n": 3}, blob)
    assert ptxas.read_entry(path, "k1", elf=True) == ({"key": "k1", "n": 3}, blob)
    good = path.read_bytes()
    assert ptxas.read_entry(path, "k2") is None  # another key's file (copied, renamed)
    assert not path.exists()  # refused entries are removed
    damaged = {
        "empty": b"",
        "truncated header": good[:20],
        "truncated blob": good[:-1],
        "one byte more": good + b"\0",
        "flipped blob byte": good[:-5] + bytes([good[-5] ^ 1]) + good[-4:],
        "flipped meta byte": good[:60] + bytes([good[60] ^ 0x20]) + good[61:],
        "garbage": os.urandom(len(good)),
        "other magic": b"nvatomE0" + good[8:],
    }
    for what, data in damaged.items():
        path.write_bytes(data)
        assert ptxas.read_entry(path, "k1") is None, what
        assert not path.exists(), what
    # well formed, but not a cubin where one is expected
    ptxas.write_entry(path, {"key": "k1"}, b"not an ELF file")
    assert ptxas.read_entry(path, "k1") is not None
    assert ptxas.read_entry(path, "k1", elf=True) is None


def test_oversized_or_special_entries_are_not_read(tmp_path, monkeypatch) -> None:
    """Fuzz finding (issue 28): an entry grown to 12 GB, or a link to /dev/zero, was read whole
    into memory.  Size and file type are checked first; such a file is removed, never read."""
    path = tmp_path / "x.entry"
    ptxas.write_entry(path, {"key": "k1"}, b"\x7fELF" + bytes(100))
    good = path.read_bytes()
    reads: list[int] = []
    real_open = open

    class Spy:
        def __init__(self, f):
            self.f = f

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.f.close()

        def fileno(self):
            return self.f.fileno()

        def read(self, n=-1):
            reads.append(n)
            return self.f.read(n)

    monkeypatch.setattr("builtins.open", lambda p, m="r", *a, **k: Spy(real_open(p, m, *a, **k)))
    monkeypatch.setattr(ptxas, "MAX_ENTRY_BYTES", len(good) + 10)
    # a file far over the limit: refused by its size, and no read() is made at all
    with real_open(path, "r+b") as f:
        f.truncate(1 << 20)  # (the limit is patched down: a regression must not eat RAM)
    assert ptxas.read_entry(path, "k1") is None and not path.exists() and reads == []
    # a symbolic link to /dev/zero: not a regular file; the link is removed, /dev/zero is not
    path.symlink_to("/dev/zero")
    assert ptxas.read_entry(path, "k1") is None and reads == []
    assert not path.is_symlink() and os.path.exists("/dev/zero")
    # within the limit: read with a bound
    path.write_bytes(good)
    assert ptxas.read_entry(path, "k1") is not None and reads == [len(good) + 11]


def test_failed_write_leaves_no_temporary_file(tmp_path, monkeypatch) -> None:
    def refuse(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", refuse)
    with pytest.raises(OSError, match="disk full"):
        ptxas.write_entry(tmp_path / "x.entry", {"key": "k"}, b"data")
    assert list(tmp_path.iterdir()) == []


# --------------------------------------------------------------------------- damaged files


@pytest.mark.parametrize("damage", ["truncate", "garbage", "empty", "flip", "swap"])
def test_kernel_cache_rebuilds_a_damaged_entry(cache, damage) -> None:
    truth = _truth()
    cubin, cached = build_cubin(_source(), "sm_80")
    assert cubin == truth and not cached
    (entry,) = _entries(cache, "kernels")
    data = entry.read_bytes()
    if damage == "truncate":
        entry.write_bytes(data[: len(data) // 2])
    elif damage == "garbage":
        entry.write_bytes(os.urandom(len(data)))
    elif damage == "empty":
        entry.write_bytes(b"")
    elif damage == "flip":  # one bit of the cubin: the digest no longer matches
        entry.write_bytes(data[:-9] + bytes([data[-9] ^ 0x10]) + data[-8:])
    else:  # another kernel's valid entry under this one's name
        _fresh_process()
        build_cubin(_source("b"), "sm_80")
        other = next(p for p in _entries(cache, "kernels") if p != entry)
        entry.write_bytes(other.read_bytes())
    for room in ("ptxas",):  # the ptxas cache damaged the same way: both are rebuilt
        for p in _entries(cache, room):
            p.write_bytes(p.read_bytes()[:30])
    _fresh_process()
    cubin, cached = build_cubin(_source(), "sm_80")
    assert cubin == truth  # rebuilt, never the damaged bytes
    assert ptxas.read_entry(entry, entry.stem, elf=True)[1] == truth  # and stored again
    _fresh_process()
    assert build_cubin(_source(), "sm_80") == (truth, True)


@pytest.mark.parametrize("damage", ["truncate", "garbage", "not-elf"])
def test_ptxas_cache_rebuilds_a_damaged_entry(cache, damage) -> None:
    truth = _truth()
    assert ptxas.assemble(_ptx("sm_80"), "sm_80").cubin == truth
    (entry,) = _entries(cache, "ptxas")
    data = entry.read_bytes()
    if damage == "truncate":
        entry.write_bytes(data[:-100])
    elif damage == "garbage":
        entry.write_bytes(os.urandom(300))
    else:  # a well-formed entry saying ok whose blob is no cubin
        ptxas.write_entry(entry, {"key": entry.stem, "ok": True, "log": ""}, b"junk")
    _fresh_process()
    res = ptxas.assemble(_ptx("sm_80"), "sm_80")
    assert not res.cached and res.cubin == truth
    _fresh_process()
    again = ptxas.assemble(_ptx("sm_80"), "sm_80")
    assert again.cached and again.cubin == truth


# --------------------------------------------------------------------------- killed writers


def _die_mid_write(path: str) -> None:
    """Start writing an entry, then die (SIGKILL-like: no cleanup) half-way through."""
    real_fdopen = os.fdopen

    class _Half:
        def __init__(self, f):
            self.f = f

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

        def write(self, data: bytes) -> None:
            self.f.write(data[: len(data) // 2])
            self.f.flush()
            os._exit(9)

    os.fdopen = lambda fd, mode="r": _Half(real_fdopen(fd, mode))  # type: ignore[assignment]
    ptxas.write_entry(Path(path), {"key": Path(path).stem}, b"\x7fELF" + b"x" * 100_000)


def test_writer_killed_mid_write_leaves_no_entry(cache) -> None:
    truth = _truth()
    _fresh_process()
    key = launch._disk_key(_source(), "sm_80", ptxas.find_ptxas("sm_80").build)
    entry = cache / "kernels" / key[:2] / f"{key}.entry"
    entry.parent.mkdir(parents=True)
    p = _CTX.Process(target=_die_mid_write, args=(str(entry),))
    p.start()
    p.join(30)
    assert p.exitcode == 9
    (partial,) = entry.parent.iterdir()  # the dead writer's temporary file, half written
    assert partial.name.startswith(".tmp-") and not entry.exists()
    assert build_cubin(_source(), "sm_80") == (truth, False)  # never read: rebuilt
    assert entry.exists() and partial.exists()  # a fresh partial file is left alone ...
    os.utime(partial, (time.time() - 2 * ptxas.STALE_TMP_SECONDS,) * 2)
    entry.unlink()
    _fresh_process()
    build_cubin(_source(), "sm_80")
    assert not partial.exists()  # ... and swept by the next writer once stale


# --------------------------------------------------------------------------- concurrency


def _build_in_child(root: str, barrier, tag: str, out) -> None:
    os.environ["NVATOM_CACHE_DIR"] = root
    _fresh_process()
    barrier.wait(30)
    digests = []
    for _ in range(3):
        cubin, _ = build_cubin(_source(tag), "sm_80")
        digests.append(hashlib.sha256(cubin).hexdigest())
        _fresh_process()
    out.put(digests)


def test_processes_building_the_same_kernel_at_once(cache) -> None:
    truth = hashlib.sha256(_truth(tag="c")).hexdigest()
    _fresh_process()
    n = 4
    barrier, out = _CTX.Barrier(n), _CTX.Queue()
    procs = [_CTX.Process(target=_build_in_child, args=(str(cache), barrier, "c", out))
             for _ in range(n)]
    for p in procs:
        p.start()
    results = [out.get(timeout=60) for _ in procs]
    for p in procs:
        p.join(30)
        assert p.exitcode == 0
    assert all(d == truth for r in results for d in r)
    for room in ("kernels", "ptxas"):
        (entry,) = _entries(cache, room)
        assert ptxas.read_entry(entry, entry.stem) is not None
        assert not [f for f in entry.parent.iterdir() if f.name.startswith(".tmp-")]


def _hammer_writer(path: str, stop) -> None:
    blobs = [b"\x7fELF" + bytes([i]) * (50_000 + 997 * i) for i in range(4)]
    i = 0
    while not stop.is_set():
        ptxas.write_entry(Path(path), {"key": "k", "i": i % 4}, blobs[i % 4])
        i += 1


def test_readers_never_see_a_partial_entry(tmp_path) -> None:
    """Two writers replace one entry with contents of different sizes while this process
    reads it: every read is a whole, matching entry (never a truncated or mixed one)."""
    path = tmp_path / "k.entry"
    ptxas.write_entry(path, {"key": "k", "i": 0}, b"\x7fELF" + bytes([0]) * 50_000)
    stop = _CTX.Event()
    writers = [_CTX.Process(target=_hammer_writer, args=(str(path), stop)) for _ in range(2)]
    for w in writers:
        w.start()
    seen, deadline = set(), time.monotonic() + 1.5
    try:
        while time.monotonic() < deadline:
            got = ptxas.read_entry(path, "k", elf=True)
            assert got is not None  # os.replace: the name always holds a whole entry
            meta, blob = got
            assert blob == b"\x7fELF" + bytes([meta["i"]]) * (50_000 + 997 * meta["i"])
            seen.add(meta["i"])
    finally:
        stop.set()
        for w in writers:
            w.join(30)
    assert len(seen) > 1  # the writers did replace it while we read
