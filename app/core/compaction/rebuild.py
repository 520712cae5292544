"""Stage 3 — rebuild the view: checkpoint + pins + summary + sticky items + recent tail.

Contract: ``rebuild(checkpoint, summary, recent_tail, sticky=..., session_id=...)`` returns a
``View`` whose items come in this order: the checkpoint (core, never compressed, then
detail), pinned texts (verbatim), the summary, sticky events (verbatim), the recent tail.

``find_sticky(events, before_seq=...)`` selects what is "recent by state, not time" among
the events before the cut — included verbatim however old, until resolved:

* an error result (``is_error``) with no later successful result of the same tool, with its
  call, so the pair stays whole;
* a message with a pending-approval marker and no later grant (approved, 已批准…) on the
  same subject (≥ 2 shared terms);
* failed acceptance evidence (FAILED, test failed, 失败) with no later passed/通过 on the same
  subject (≥ 1 shared specific term).

``reference_view`` is the breaker's fallback: the uncompressed history in reference mode —
the last ``inline_recent_turns`` turns inline, older turns as one handle each.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from app.core.candidates import checkpoint_core_text, checkpoint_detail_text
from app.core.compaction import text as tx
from app.core.compaction.values import View, ViewItem
from app.core.model import SessionEvent, TaskCheckpoint
from app.core.refs import checkpoint_ref, summary_ref

_GENERIC = frozenset(("test", "tests", "failed", "passed", "fail", "pass", "run", "测试", "失败",
                      "通过"))


def _tool(e: SessionEvent, calls: dict[str, SessionEvent]) -> str:
    call = calls.get(e.call_id or "")
    return e.name or (call.name if call else None) or ""


def _error_open(i: int, events: Sequence[SessionEvent], calls: dict[str, SessionEvent]) -> bool:
    name = _tool(events[i], calls)
    return not any(e.type == "tool_result" and not e.is_error and _tool(e, calls) == name
                   for e in events[i + 1:])


def _open_until(i: int, events: Sequence[SessionEvent],
                closes: Callable[[SessionEvent], bool], min_shared: int) -> bool:
    """True while no later event that ``closes`` shares ``min_shared`` specific terms."""
    terms = tx.content_terms(events[i].content) - _GENERIC
    return not any(closes(e) and len((tx.content_terms(e.content) - _GENERIC) & terms)
                   >= min_shared for e in events[i + 1:])


def _sticky_index(i: int, events: Sequence[SessionEvent],
                  calls: dict[str, SessionEvent]) -> bool:
    e = events[i]
    if e.type == "tool_result" and e.is_error:
        return _error_open(i, events, calls)
    if e.type == "message" and tx.APPROVAL.search(e.content):
        return _open_until(i, events, lambda x: bool(tx.GRANT.search(x.content)), 2)
    if e.type != "tool_call" and tx.FAILURE.search(e.content):
        return _open_until(i, events, lambda x: bool(
            tx.EVIDENCE.search(x.content) and not tx.FAILURE.search(x.content)), 1)
    return False


def find_sticky(events: Sequence[SessionEvent], *, before_seq: int | None) -> tuple[
        SessionEvent, ...]:
    calls = {e.call_id: e for e in events if e.type == "tool_call" and e.call_id}
    limit = len(events) if before_seq is None else next(
        (i for i, e in enumerate(events) if e.seq >= before_seq), len(events))
    picked: dict[int, SessionEvent] = {}
    for i in range(limit):
        if _sticky_index(i, events, calls):
            e = events[i]
            call = calls.get(e.call_id or "") if e.type == "tool_result" else None
            if call is not None:
                picked[call.seq] = call
            picked[e.seq] = e
    return tuple(picked[s] for s in sorted(picked))


def _checkpoint_items(cp: TaskCheckpoint | None) -> list[ViewItem]:
    if cp is None:
        return []
    items = [ViewItem(kind="checkpoint", ref=checkpoint_ref(cp.task_id, cp.revision, "core"),
                      content=checkpoint_core_text(cp))]
    detail = checkpoint_detail_text(cp, with_older=False)
    if detail:
        items.append(ViewItem(kind="checkpoint",
                              ref=checkpoint_ref(cp.task_id, cp.revision, "detail"),
                              content=detail))
    return items


def _events(kind: str, events: Sequence[SessionEvent], sid: str) -> list[ViewItem]:
    return [ViewItem(kind=kind, ref=tx.event_ref(sid, e.seq), content=tx.render_event(e, sid))
            for e in events]


def rebuild(checkpoint: TaskCheckpoint | None, summary: str,
            recent_tail: Sequence[SessionEvent], *, sticky: Sequence[SessionEvent],
            session_id: str, pinned: Sequence[str] = ()) -> View:
    tail = {e.seq for e in recent_tail}
    items = _checkpoint_items(checkpoint)
    items += [ViewItem(kind="pinned", ref="pinned", content=p) for p in pinned]
    if summary:
        items.append(ViewItem(kind="summary", ref=summary_ref(session_id),
                              content=summary))
    items += _events("sticky", [e for e in sticky if e.seq not in tail], session_id)
    items += _events("event", recent_tail, session_id)
    return View(items=tuple(items), mode="compacted")


def _turns(events: Sequence[SessionEvent]) -> list[list[SessionEvent]]:
    turns: list[list[SessionEvent]] = []
    for e in events:
        if not turns or (e.type == "message" and e.role == "user"):
            turns.append([])
        turns[-1].append(e)
    return turns


def reference_view(events: Sequence[SessionEvent], checkpoint: TaskCheckpoint | None, *,
                   session_id: str, inline_recent_turns: int = 6) -> View:
    turns = _turns(events)
    split = max(0, len(turns) - inline_recent_turns)
    items = _checkpoint_items(checkpoint)
    for turn in turns[:split]:
        first, last = turn[0], turn[-1]
        ref = tx.event_ref(session_id, first.seq)
        items.append(ViewItem(kind="reference", ref=ref, content=(
            f"[turn {ref}..{last.seq}, {len(turn)} events, in the archive] "
            f"{first.role or first.type}: {first.content[:120]}")))
    items += _events("sticky", find_sticky(events[:sum(map(len, turns[:split]))],
                                           before_seq=None), session_id)
    items += _events("event", [e for t in turns[split:] for e in t], session_id)
    return View(items=tuple(items), mode="reference")


def full_view(events: Sequence[SessionEvent], checkpoint: TaskCheckpoint | None, *,
              session_id: str) -> View:
    items = [*_checkpoint_items(checkpoint), *_events("event", events, session_id)]
    return View(items=tuple(items), mode="full")
