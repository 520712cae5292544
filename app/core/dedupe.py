"""Stage 5 — dedupe: the same fact from several sources enters the envelope once.

Contract: ``dedupe(candidates)`` groups candidates by their normalized content (whitespace
collapsed, casefolded). In each group one candidate is kept, chosen by:

1. ``never_compress`` first — pinned content is never deduped away for unpinned content;
2. the best ``TRUST_RANK`` (most authoritative source);
3. the newest ``freshness.observed_at`` (unknown counts as oldest);
4. the highest ``priority``; 5. the smallest ``ref`` (determinism).

The others become ``dropped.dedupe.duplicate`` whose reason names the kept ref, so the
manifest keeps the provenance of every source.

Session-section candidates are exempt: the transcript is positional (a user saying "yes" twice
said it twice), and dropping one half of a tool_call/tool_result pair would corrupt it.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from app.core.model import TRUST_RANK, Candidate, Drop, DropLayer, Section


def content_key(content: str) -> str:
    # The normalized text itself: the groups live for one call, so a digest of it would only
    # add an encode and a sha256 per candidate (a quarter of the stage).
    return " ".join(content.split()).casefold()


def _observed(value: datetime | None) -> tuple[int, float]:
    return (1, 0.0) if value is None else (0, -value.timestamp())


def _rank(c: Candidate) -> tuple[bool, int, tuple[int, float], int, str]:
    return (not c.never_compress, TRUST_RANK[c.trust], _observed(c.freshness.observed_at),
            -c.priority, c.ref)


def dedupe(candidates: Iterable[Candidate]) -> tuple[list[Candidate], list[Drop]]:
    items = list(candidates)
    groups: dict[str, list[Candidate]] = {}
    for c in items:
        if c.section is not Section.SESSION:
            groups.setdefault(content_key(c.content), []).append(c)
    losers: dict[int, str] = {}  # id(candidate) -> kept ref
    for group in groups.values():
        if len(group) == 1:  # most: nothing to choose between
            continue
        keep = min(group, key=_rank)
        for c in group:
            if c is not keep:
                losers[id(c)] = keep.ref
    kept = [c for c in items if id(c) not in losers]
    dropped = [
        Drop(ref=c.ref, kind=c.kind, layer=DropLayer.DEDUPE, type="dropped.dedupe.duplicate",
             reason=f"same content as {losers[id(c)]}")
        for c in items if id(c) in losers
    ]
    return kept, dropped
