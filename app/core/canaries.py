"""Leakage canaries: find operator-planted strings in a turn's envelope and classify each hit.

Contract: ``CanaryMatcher.build(canaries)`` compiles every registered canary into one matcher
(a single regex alternation of escaped literals, longest first, so one pass over the text
finds them all). ``matcher.leaks(text, tenant_id=..., user_id=...)`` returns one ``CanaryLeak``
per distinct canary found in ``text`` whose owner differs from the turn's:

- owner tenant != turn tenant -> ``cross_tenant``;
- same tenant, the canary belongs to a user and that user != the turn's user -> ``cross_user``;
- otherwise (the owner reading their own data, or a tenant-wide canary inside its tenant) the
  hit is not a leak and is ignored.

Pure: no I/O, clock or globals. A leak carries ids only, never the canary text, so it can be
logged, audited and counted without carrying the planted secret further.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

CANARY_MIN_LENGTH = 8
CANARY_MAX_LENGTH = 256

LeakKind = Literal["cross_tenant", "cross_user"]
LEAK_KINDS: tuple[LeakKind, ...] = ("cross_tenant", "cross_user")


@dataclass(frozen=True, slots=True)
class Canary:
    canary_id: str
    tenant_id: str
    user_id: str | None
    text: str


@dataclass(frozen=True, slots=True)
class CanaryLeak:
    canary_id: str
    kind: LeakKind
    owner_tenant_id: str


def classify(canary: Canary, *, tenant_id: str, user_id: str | None) -> LeakKind | None:
    if canary.tenant_id != tenant_id:
        return "cross_tenant"
    if canary.user_id is not None and canary.user_id != user_id:
        return "cross_user"
    return None


class CanaryMatcher:
    """One compiled pattern for a registry revision; build once, match every turn."""

    __slots__ = ("_by_text", "_pattern")

    def __init__(self, by_text: dict[str, tuple[Canary, ...]], pattern: re.Pattern[str] | None):
        self._by_text = by_text
        self._pattern = pattern

    @classmethod
    def build(cls, canaries: tuple[Canary, ...] | list[Canary]) -> CanaryMatcher:
        by_text: dict[str, list[Canary]] = {}
        for canary in canaries:
            by_text.setdefault(canary.text, []).append(canary)
        if not by_text:
            return cls({}, None)
        # Longest first: when one canary contains another, the alternation reports the longer
        # one at that position; the shorter is still found wherever it stands alone.
        alternation = "|".join(re.escape(t) for t in sorted(by_text, key=lambda t: (-len(t), t)))
        return cls({t: tuple(cs) for t, cs in by_text.items()}, re.compile(alternation))

    def __len__(self) -> int:
        return sum(len(cs) for cs in self._by_text.values())

    def leaks(self, text: str, *, tenant_id: str, user_id: str | None) -> tuple[CanaryLeak, ...]:
        if self._pattern is None or not text:
            return ()
        found: dict[str, CanaryLeak] = {}
        for text_hit in {m.group(0) for m in self._pattern.finditer(text)}:
            for canary in self._by_text[text_hit]:
                kind = classify(canary, tenant_id=tenant_id, user_id=user_id)
                if kind is not None:
                    found[canary.canary_id] = CanaryLeak(canary.canary_id, kind, canary.tenant_id)
        return tuple(found[k] for k in sorted(found))
