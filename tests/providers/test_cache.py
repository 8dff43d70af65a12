"""brain.providers.cache.LRUCache: the one bounded map behind the query, turn, summary-position and ranking caches."""

from __future__ import annotations

import threading

import pytest

from brain.providers.cache import LRUCache


def test_least_recently_used_goes_first_and_put_reports_it():
    cache: LRUCache[str, int] = LRUCache(2)
    assert cache.put("a", 1) == [] and cache.put("b", 2) == []
    assert cache.get("a") == 1  # "a" is now the most recent
    assert cache.put("c", 3) == [("b", 2)]
    assert list(cache) == ["a", "c"] and "b" not in cache and len(cache) == 2
    assert cache.peek("a") == 1 and cache.put("d", 4) == [("a", 1)]  # peek did not make "a" recent
    assert cache.get("zzz", "default") == "default"
    assert cache.info() == {"hits": 1, "misses": 1, "size": 2, "maxsize": 2}
    assert cache.pop("c") == 3 and cache.pop("c") is None
    cache.clear()
    assert len(cache) == 0 and cache.info()["hits"] == 0


def test_a_smaller_maxsize_applies_at_the_next_put():
    cache: LRUCache[int, int] = LRUCache(10)
    for i in range(5):
        cache.put(i, i)
    cache.maxsize = 2
    assert cache.put(5, 5) == [(0, 0), (1, 1), (2, 2), (3, 3)] and list(cache) == [4, 5]


def test_size_zero_or_ttl_zero_turns_the_cache_off():
    for cache in (LRUCache(0), LRUCache(5, ttl=0)):
        assert cache.put("a", 1) == [("a", 1)] and cache.get("a") is None and len(cache) == 0
    for bad in (-1, 1.5, True, "3"):
        with pytest.raises(ValueError, match="maxsize"):
            LRUCache(bad)
    with pytest.raises(ValueError, match="ttl"):
        LRUCache(3, ttl=float("nan"))


def test_entries_expire_ttl_seconds_after_they_were_put():
    now = [100.0]
    cache: LRUCache[str, str] = LRUCache(4, ttl=10, clock=lambda: now[0])
    cache.put("q", "answer")
    now[0] = 109.9
    assert cache.get("q") == "answer"
    now[0] = 110.0
    assert cache.get("q") is None and "q" not in cache and len(cache) == 0
    assert cache.info() == {"hits": 1, "misses": 1, "size": 0, "maxsize": 4, "ttl": 10}


def test_concurrent_use_keeps_the_bound():
    cache: LRUCache[int, int] = LRUCache(50)
    evicted: list[int] = []

    def work(base: int) -> None:
        for i in range(2000):
            key = base * 10_000 + i
            evicted.extend(k for k, _ in cache.put(key, key))
            cache.get(key - 3)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(cache) == 50 and len(evicted) == 4 * 2000 - 50 and len(set(evicted)) == len(evicted)
