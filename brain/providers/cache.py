"""One small LRU map, for the process-wide caches (query vectors, conversations' turns, turn indexes,
summary positions, specialist rankings).

Each cache is a bounded dict that forgets the least recently used entry first, written once so that every
cache evicts, counts and expires entries the same way. :meth:`LRUCache.get` counts a hit or a miss and makes
the entry the most recent; :meth:`LRUCache.peek` does neither; :meth:`LRUCache.put` returns what it left out,
for callers that keep side tables keyed by the evicted entries. An optional ``ttl`` makes entries expire that
many seconds (of ``clock``) after they were put. A ``maxsize`` of 0 (or a ``ttl`` of 0) turns the cache off:
puts are dropped. Thread-safe; a caller that reads and then writes needs its own lock around both.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from typing import Generic, NotRequired, TypedDict, TypeVar


class CacheInfo(TypedDict):
    """A cache's counters: lookups that found an entry and that did not, entries held, the most it holds,
    and (only for an expiring cache) the seconds an entry lives."""

    hits: int
    misses: int
    size: int
    maxsize: int
    ttl: NotRequired[float]


K = TypeVar("K")
V = TypeVar("V")


class LRUCache(Generic[K, V]):
    """Up to ``maxsize`` entries, least recently used evicted first (see the module docstring)."""

    def __init__(self, maxsize: int, *, ttl: float | None = None, clock: Callable[[], float] = time.monotonic):
        if isinstance(maxsize, bool) or not isinstance(maxsize, int) or maxsize < 0:
            raise ValueError(f"maxsize must be an integer >= 0, got {maxsize!r}")
        if ttl is not None and not ttl >= 0:
            raise ValueError(f"ttl must be None or >= 0 seconds, got {ttl!r}")
        self.maxsize = maxsize
        self.ttl = ttl
        self._clock = clock
        self._data: OrderedDict[K, tuple[float | None, V]] = OrderedDict()  # key -> (expiry or None, value)
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def _live(self, key: K) -> tuple[float | None, V] | None:
        item = self._data.get(key)
        if item is not None and item[0] is not None and item[0] <= self._clock():
            del self._data[key]
            return None
        return item

    def get(self, key: K, default: V | None = None) -> V | None:
        """The value (now the most recently used), counting a hit; ``default`` and a miss when absent or expired."""
        with self._lock:
            item = self._live(key)
            if item is None:
                self.misses += 1
                return default
            self._data.move_to_end(key)
            self.hits += 1
            return item[1]

    def peek(self, key: K, default: V | None = None) -> V | None:
        """The value without touching its recency or the counts."""
        with self._lock:
            item = self._live(key)
            return default if item is None else item[1]

    def put(self, key: K, value: V) -> list[tuple[K, V]]:
        """Store ``value`` as the most recently used; returns the ``(key, value)`` pairs that this put left
        out of the cache (evicted to make room, or the new pair itself when the cache is off)."""
        if self.maxsize == 0 or self.ttl == 0:
            return [(key, value)]
        with self._lock:
            self._data[key] = (None if self.ttl is None else self._clock() + self.ttl, value)
            self._data.move_to_end(key)
            evicted = []
            while len(self._data) > self.maxsize:
                old_key, (_, old_value) = self._data.popitem(last=False)
                evicted.append((old_key, old_value))
            return evicted

    def pop(self, key: K, default: V | None = None) -> V | None:
        with self._lock:
            item = self._data.pop(key, None)
            return default if item is None else item[1]

    def clear(self) -> None:
        """Forget every entry and reset the counts."""
        with self._lock:
            self._data.clear()
            self.hits = self.misses = 0

    def __contains__(self, key: object) -> bool:
        with self._lock:
            return self._live(key) is not None  # type: ignore[arg-type]

    def __len__(self) -> int:
        return len(self._data)

    def __iter__(self) -> Iterator[K]:
        """The keys, least recently used first (a snapshot)."""
        with self._lock:
            return iter(list(self._data))

    def info(self) -> CacheInfo:
        with self._lock:
            info: CacheInfo = {
                "hits": self.hits,
                "misses": self.misses,
                "size": len(self._data),
                "maxsize": self.maxsize,
            }
        if self.ttl is not None:
            info["ttl"] = self.ttl
        return info


__all__ = ["CacheInfo", "LRUCache"]
