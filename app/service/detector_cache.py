"""Remember detector findings by content, so a turn does not rescan what the last one saw.

A session's tail and its long tool results come back unchanged turn after turn; scanning
them again was most of a turn's time (see docs/benchmarks.md). Detectors are pure functions
of the text, so their findings can be kept by a digest of it. The cache is bounded (LRU) and
owned by the composition root, which keeps the core free of state.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Sequence

from app.core.guards.safety import Detector, Finding

Key = tuple[int, bytes]


class FindingsCache:
    def __init__(self, max_entries: int = 50_000) -> None:
        self._max = max_entries
        self._entries: OrderedDict[Key, tuple[Finding, ...]] = OrderedDict()
        self.hits = 0
        self.misses = 0

    def findings(self, detector: Detector, text: str) -> list[Finding]:
        # By identity, not name: several detectors of one family share a name. The wrappers
        # hold their detectors for the process's life, so an id is never reused meanwhile.
        key = (id(detector), hashlib.blake2b(text.encode(), digest_size=16).digest())
        found = self._entries.get(key)
        if found is not None:
            self._entries.move_to_end(key)
            self.hits += 1
            return list(found)
        self.misses += 1
        result = tuple(detector(text))
        self._entries[key] = result
        if len(self._entries) > self._max:
            self._entries.popitem(last=False)
        return list(result)


class CachedDetector:
    """A ``Detector`` that asks the shared cache before scanning."""

    def __init__(self, inner: Detector, cache: FindingsCache) -> None:
        self._inner = inner
        self._cache = cache

    @property
    def name(self) -> str:
        return self._inner.name

    def __call__(self, text: str) -> list[Finding]:
        return self._cache.findings(self._inner, text)


def cached(detectors: Sequence[Detector], cache: FindingsCache) -> tuple[Detector, ...]:
    return tuple(CachedDetector(d, cache) for d in detectors)
