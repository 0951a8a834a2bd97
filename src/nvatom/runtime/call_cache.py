"""Bounded host caches: named least-recently-used sections with one ``clear()``.

A module that keeps host-side state between calls (``nvatom.gemm``: plans, prepared launchers,
checked calls, scale tensors) keeps it in one :class:`CacheSet`: each section is an
:class:`LruDict` whose size is stated once, in the set's ``SIZES`` table, so no cache grows
without bound and one call empties them all.  (:class:`nvatom.runtime.launch.LruCache` is the
``get_or_make`` form used for tensor maps and packed arguments.)
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable, Iterator
from typing import Any, ClassVar, TypeVar

from nvatom.errors import NvatomError

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class CacheSizeError(NvatomError, ValueError):
    """A cache section declared with a size that is not a positive int."""


class LruDict(OrderedDict[K, V]):
    """A dict of at most ``limit`` entries: :meth:`get` and assignment make an entry the most
    recently used, and an assignment past the limit drops the least recently used one."""

    def __init__(self, name: str, limit: int) -> None:
        super().__init__()
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise CacheSizeError(f"cache section '{name}': the size must be a positive int, "
                                 f"got {limit!r}")
        self.name = name
        self.limit = limit

    def get(self, key: K, default: Any = None) -> Any:  # type: ignore[override]
        try:
            value = self[key]
        except KeyError:
            return default
        self.move_to_end(key)
        return value

    def __setitem__(self, key: K, value: V) -> None:
        super().__setitem__(key, value)
        self.move_to_end(key)
        if len(self) > self.limit:
            self.popitem(last=False)

    def __repr__(self) -> str:
        return f"<LruDict {self.name}: {len(self)}/{self.limit}>"


class CacheSet:
    """A set of named :class:`LruDict` sections.  A subclass states its sections once, in
    ``SIZES`` (name -> the most entries kept), and may annotate them for their types; each
    instance starts empty, and :meth:`clear` empties every section."""

    SIZES: ClassVar[dict[str, int]] = {}

    def __init__(self) -> None:
        declared = {n for n in getattr(type(self), "__annotations__", {}) if n != "SIZES"}
        if declared - set(self.SIZES):
            raise CacheSizeError(f"{type(self).__name__}: sections without a size: "
                                 f"{', '.join(sorted(declared - set(self.SIZES)))}")
        for name, limit in self.SIZES.items():
            setattr(self, name, LruDict(name, limit))

    def sections(self) -> Iterator[LruDict[Any, Any]]:
        """Every section, in ``SIZES`` order."""
        for name in self.SIZES:
            yield getattr(self, name)

    def clear(self) -> None:
        """Empty every section."""
        for section in self.sections():
            section.clear()

    def sizes(self) -> dict[str, tuple[int, int]]:
        """Each section's (entries, limit)."""
        return {s.name: (len(s), s.limit) for s in self.sections()}

    def __repr__(self) -> str:
        parts = ", ".join(f"{n} {used}/{limit}" for n, (used, limit) in self.sizes().items())
        return f"<{type(self).__name__}: {parts}>"
