"""Remember detector findings by content, so a turn does not rescan what the last one saw.

A session's tail and its long tool results come back unchanged turn after turn; scanning
them again was most of a turn's time (see docs/benchmarks.md). Detectors are pure functions
of the text, so their findings can be kept by a digest of it. The cache is bounded (LRU) and
owned by the composition root, which keeps the core free of state.

A process's cache is cold for every session it has not served yet, so session events are also
scanned once when they enter the hot tail (and knowledge chunks at ingest) and carry their
findings there, tagged with ``fingerprint()`` — a digest of the detector code; their
candidates carry them to the safety guard (``Candidate.scanned``) past this cache. A change to
any detector changes the fingerprint, and stored findings are then ignored.
"""

from __future__ import annotations

import functools
import hashlib
import re
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path

import app.core.detectors
from app.core.guards.safety import Detector, Finding

Key = tuple[int, bytes]


class FindingsCache:
    def __init__(self, max_entries: int = 50_000) -> None:
        self._max = max_entries
        self._entries: OrderedDict[Key, tuple[Finding, ...]] = OrderedDict()
        self.hits = 0
        self.misses = 0

    def findings(self, detector: Detector, text: str) -> list[Finding]:
        key = _key(detector, text)
        found = self._entries.get(key)
        if found is not None:
            self._entries.move_to_end(key)
            self.hits += 1
            return list(found)
        self.misses += 1
        result = tuple(detector(text))
        self._put(key, result)
        return list(result)

    def _put(self, key: Key, findings: tuple[Finding, ...]) -> None:
        self._entries[key] = findings
        self._entries.move_to_end(key)
        if len(self._entries) > self._max:
            self._entries.popitem(last=False)


def _key(detector: Detector, text: str) -> Key:
    # By identity, not name: several detectors of one family share a name. The wrappers hold
    # their detectors for the process's life, so an id is never reused meanwhile.
    return id(detector), hashlib.blake2b(text.encode(), digest_size=16).digest()


@functools.cache
def fingerprint() -> str:
    """A digest of the detector code: every module of ``app.core.detectors``, and the
    detectors' own description (their patterns), should the sources not be on disk."""
    described = re.sub(r" at 0x[0-9a-f]+", "", repr(app.core.detectors.ALL_DETECTORS))
    h = hashlib.sha256(described.encode())  # (function reprs hold addresses: not those)
    for path in sorted(Path(app.core.detectors.__file__).parent.glob("*.py")):
        h.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()[:16]


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
