"""Stage 0 — prune old tool results (OpenClaw's soft-trim / hard-clear rules).

Contract: ``prune(events, session_id=..., ...)`` returns a ``PruneResult`` holding NEW event
views (``dataclasses.replace``; the input and the archive are untouched) and one
``PrunedItem`` per changed result. Only ``tool_result`` events are prunable, and only when
they are *old*: before the last ``keep_last_assistant_turns`` assistant messages and after
the first user message (the bootstrap before it stays whole, as in OpenClaw).

1. soft trim: a prunable result longer than ``soft_trim_chars`` keeps its first
   ``head_chars`` and last ``tail_chars`` with a marker naming the full result's handle.
2. hard clear: a prunable result more than ``hard_clear_after`` events older than
   ``now_index`` (default: the last event), and then, oldest first, results while the total
   tool-result size exceeds ``max_total_chars``, are replaced by a reference handle.

Error results are never cleared (they stay active until resolved; see ``rebuild``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from app.core.compaction.text import event_ref
from app.core.compaction.values import PrunedItem, PruneResult
from app.core.model import SessionEvent

HARD_CLEAR_MIN_CHARS = 200


def _protected_before(events: Sequence[SessionEvent]) -> int:
    """Index of the first user message (everything before it is the bootstrap)."""
    return next((i for i, e in enumerate(events) if e.type == "message" and e.role == "user"),
                len(events))


def _protected_after(events: Sequence[SessionEvent], keep: int) -> int:
    """Index of the ``keep``-th last assistant message (results from there on stay whole)."""
    if keep <= 0:
        return len(events)
    seen = 0
    for i in range(len(events) - 1, -1, -1):
        if events[i].type == "message" and events[i].role == "assistant":
            seen += 1
            if seen == keep:
                return i
    return 0


def soft_trimmed(text: str, ref: str, head: int, tail: int) -> str:
    return (f"{text[:head]}\n…\n{text[-tail:] if tail else ''}\n[tool result trimmed: kept "
            f"first {head} and last {tail} of {len(text)} chars; full result: {ref}]")


def hard_cleared(text: str, ref: str) -> str:
    return f"[tool result cleared ({len(text)} chars); full result: {ref}]"


def _clearable(e: SessionEvent) -> bool:
    # a marker is ~90 chars: clearing a shorter result would not save anything
    return not e.is_error and len(e.content) > HARD_CLEAR_MIN_CHARS


def _to_clear(events: Sequence[SessionEvent], prunable: list[int], older_than: int,
              max_total_chars: int | None) -> set[int]:
    """Indexes to hard-clear: the too-old ones, then oldest first while over the total."""
    clear = {i for i in prunable if i < older_than and _clearable(events[i])}
    total = sum(len(e.content) for i, e in enumerate(events)
                if e.type == "tool_result" and i not in clear)
    for i in prunable:
        if max_total_chars is None or total <= max_total_chars:
            break
        if i not in clear and _clearable(events[i]):
            clear.add(i)
            total -= len(events[i].content)
    return clear


def prune(
    events: Sequence[SessionEvent],
    *,
    session_id: str,
    now_index: int | None = None,
    soft_trim_chars: int = 4000,
    head_chars: int = 1500,
    tail_chars: int = 1500,
    hard_clear_after: int = 40,
    max_total_chars: int | None = None,
    keep_last_assistant_turns: int = 3,
) -> PruneResult:
    now = len(events) - 1 if now_index is None else now_index
    lo, hi = _protected_before(events), _protected_after(events, keep_last_assistant_turns)
    prunable = [i for i in range(lo, min(hi, now + 1)) if events[i].type == "tool_result"]
    clear = _to_clear(events, prunable, now - hard_clear_after, max_total_chars)
    out = list(events)
    items: list[PrunedItem] = []
    for i in prunable:
        e, ref = events[i], event_ref(session_id, events[i].seq)
        if i in clear:
            new = hard_cleared(e.content, ref)
            action = "prune.hard_clear"
        elif len(e.content) > soft_trim_chars:
            new = soft_trimmed(e.content, ref, head_chars, tail_chars)
            action = "prune.soft_trim"
        else:
            continue
        out[i] = dataclasses.replace(e, content=new)
        items.append(PrunedItem(seq=e.seq, ref=ref, action=action,
                                chars_before=len(e.content), chars_after=len(new)))
    return PruneResult(events=tuple(out), pruned=tuple(items))
