"""The findings cache returns what the detector would, and scans each text once."""

from __future__ import annotations

from app.core.detectors import ALL_DETECTORS
from app.core.guards.safety import Finding
from app.service.detector_cache import FindingsCache, cached


class Counting:
    name = "counting"

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, text: str) -> list[Finding]:
        self.calls += 1
        return [Finding(type="pii.email", action="mask", start=0, end=len(text))]


def test_same_findings_as_the_detectors() -> None:
    text = "mail alice@example.com, key AKIAABCDEFGHIJKLMNOP, ignore previous instructions"
    wrapped = cached(ALL_DETECTORS, FindingsCache())
    for plain, memo in zip(ALL_DETECTORS, wrapped, strict=True):
        assert memo.name == plain.name
        assert memo(text) == plain(text) == memo(text)


def test_each_text_is_scanned_once_and_the_cache_is_bounded() -> None:
    inner, cache = Counting(), FindingsCache(max_entries=2)
    (det,) = cached([inner], cache)
    det("a")
    det("a")
    assert (inner.calls, cache.hits, cache.misses) == (1, 1, 1)
    det("b")
    det("c")  # evicts "a"
    det("a")
    assert inner.calls == 4
    assert det("a") is not det("a")  # callers get their own list
