"""The findings cache returns what the detector would, and scans each text once."""

from __future__ import annotations

import subprocess
import sys

from app.core.candidates import with_derived
from app.core.detectors import ALL_DETECTORS
from app.core.guards.safety import Finding
from app.core.model import SessionEvent
from app.service.detector_cache import FindingsCache, cached, fingerprint


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


def test_the_fingerprint_is_the_same_in_every_process() -> None:
    run = [sys.executable, "-c",
           "from app.service.detector_cache import fingerprint; print(fingerprint())"]
    first, second = (subprocess.run(run, capture_output=True, text=True, check=True).stdout
                     for _ in range(2))
    assert first == second == fingerprint() + "\n"


def test_derived_fields_are_made_once() -> None:
    inner = Counting()
    e = SessionEvent(seq=1, type="message", role="user", content="hello there")
    done = with_derived(e, len, inner)
    assert (done.tokens, inner.calls) == (11, 1)
    assert done.findings == (Finding(type="pii.email", action="mask", start=0, end=11),)
    assert with_derived(done, len, inner) is done and inner.calls == 1
