"""Stage 2 — compact: the narrative before a recent tail becomes a cited summary.

Contract: ``plan_cut(events, keep_recent=...)`` chooses the cut; ``compact(events,
keep_recent=..., summarizer=..., session_id=...)`` asks the summarizer for the older part and
returns a ``Compaction`` (summary, its sha256, the cut seq, the recent tail).

The cut never separates a tool_call from its tool_result: it starts ``keep_recent`` events
from the end and moves EARLIER while a call before it has its result after it. Then, as
Hermes and pi-mono do, orphans at the boundary are dropped from the tail: a result whose call
is not in the tail, and a call whose result is not in the tail unless it is the in-flight
call(s) at the very end. ``finish(cut, summary)`` is the pure second half, shared with the
async lifecycle.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

from app.core.compaction.summarize import Summarizer
from app.core.compaction.values import Compaction, SummaryRequest
from app.core.model import Constraint, SessionEvent


@dataclass(frozen=True, slots=True, kw_only=True)
class Cut:
    older: tuple[SessionEvent, ...]
    recent: tuple[SessionEvent, ...]
    dropped_orphans: tuple[int, ...]


def _cut_index(events: Sequence[SessionEvent], keep_recent: int) -> int:
    cut = max(0, len(events) - max(keep_recent, 0))
    call_at = {e.call_id: i for i, e in enumerate(events) if e.type == "tool_call" and e.call_id}
    moved = True
    while moved and cut > 0:
        moved = False
        for e in events[cut:]:
            start = call_at.get(e.call_id or "") if e.type == "tool_result" else None
            if start is not None and start < cut:
                cut, moved = start, True
    return cut


def _without_orphans(tail: Sequence[SessionEvent]) -> tuple[list[SessionEvent], list[int]]:
    calls = {e.call_id for e in tail if e.type == "tool_call"}
    results = {e.call_id for e in tail if e.type == "tool_result"}
    trailing = len(tail)
    while trailing > 0 and tail[trailing - 1].type == "tool_call":
        trailing -= 1
    kept: list[SessionEvent] = []
    dropped: list[int] = []
    for i, e in enumerate(tail):
        orphan = (e.type == "tool_result" and e.call_id not in calls) or (
            e.type == "tool_call" and e.call_id not in results and i < trailing)
        if orphan:
            dropped.append(e.seq)
        else:
            kept.append(e)
    return kept, dropped


def plan_cut(events: Sequence[SessionEvent], *, keep_recent: int) -> Cut:
    cut = _cut_index(events, keep_recent)
    kept, dropped = _without_orphans(events[cut:])
    return Cut(older=tuple(events[:cut]), recent=tuple(kept), dropped_orphans=tuple(dropped))


def finish(cut: Cut, summary: str) -> Compaction:
    return Compaction(
        summary=summary, summary_sha256=hashlib.sha256(summary.encode()).hexdigest(),
        cut_seq=cut.recent[0].seq if cut.recent else None,
        summarized_seqs=tuple(e.seq for e in cut.older), recent=cut.recent,
        dropped_orphans=cut.dropped_orphans)


def request_for(cut: Cut, *, session_id: str, constraints: Sequence[Constraint] = (),
                pinned: Sequence[str] = (), max_chars: int = 4000) -> SummaryRequest:
    return SummaryRequest(session_id=session_id, events=cut.older,
                          constraints=tuple(constraints), pinned=tuple(pinned),
                          max_chars=max_chars)


def compact(
    events: Sequence[SessionEvent],
    *,
    keep_recent: int,
    summarizer: Summarizer,
    session_id: str,
    constraints: Sequence[Constraint] = (),
    pinned: Sequence[str] = (),
    max_chars: int = 4000,
) -> Compaction:
    cut = plan_cut(events, keep_recent=keep_recent)
    if not cut.older:
        return finish(cut, "")
    request = request_for(cut, session_id=session_id, constraints=constraints, pinned=pinned,
                          max_chars=max_chars)
    return finish(cut, summarizer.summarize(request))
