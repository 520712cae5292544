"""A stored compaction view served again: what it shows, and when it cannot be served."""

from __future__ import annotations

import dataclasses

from app.core.model import Finding, Scanned, SessionEvent
from app.service.compaction import SessionView, view_candidates

VIEW = SessionView(compaction_id="c1", reference=False, block="Summary: goal X.",
                   kept_seqs=(3, 8, 9), through_seq=10)


def _events(seqs: range) -> list[SessionEvent]:
    return [SessionEvent(seq=s, type="message", role="user", content=f"event {s}") for s in seqs]


def _serve(events: list[SessionEvent], view: SessionView = VIEW) -> list[str] | None:
    got = view_candidates(view, events, tenant_id="t", session_id="s", owner_user_id="u",
                          count_tokens=len)
    return None if got is None else [c.ref for c in got]


def test_block_then_kept_then_every_later_event() -> None:
    assert _serve(_events(range(1, 13))) == [
        "session://s/compaction/c1", "session://s/events/3", "session://s/events/8",
        "session://s/events/9", "session://s/events/11", "session://s/events/12"]


def test_block_is_never_compressed_unless_it_is_the_breakers_handle_block() -> None:
    summary = view_candidates(VIEW, _events(range(1, 11)), tenant_id="t", session_id="s",
                              owner_user_id="u", count_tokens=len)
    assert summary is not None and summary[0].never_compress and summary[0].seq == 2
    handles = SessionView(compaction_id="c2", reference=True, block="handles", kept_seqs=(),
                          through_seq=10)
    got = view_candidates(handles, _events(range(1, 11)), tenant_id="t", session_id="s",
                          owner_user_id="u", count_tokens=len)
    assert got is not None and [c.never_compress for c in got] == [False]


def test_a_kept_event_the_tail_no_longer_holds_cannot_be_served() -> None:
    assert _serve(_events(range(4, 13))) is None


def test_a_gap_after_the_view_cannot_be_served() -> None:
    view = SessionView(compaction_id="c1", reference=False, block="b", kept_seqs=(),
                       through_seq=10)
    assert _serve(_events(range(12, 20)), view) is None
    assert _serve(_events(range(11, 20)), view) is not None


def test_json_round_trip_and_rows_without_a_view() -> None:
    assert SessionView.from_json(VIEW.to_json("fp1"), "fp1") == VIEW
    assert SessionView.from_json(None, "fp1") is None


def test_the_blocks_findings_come_back_only_for_the_same_detector_code() -> None:
    found = (Finding(type="pii.email", action="mask", start=9, end=16),)
    scanned = dataclasses.replace(VIEW, findings=found)
    assert SessionView.from_json(scanned.to_json("fp1"), "fp1") == scanned
    assert SessionView.from_json(scanned.to_json("fp1"), "fp2") == VIEW  # scanned again
    got = view_candidates(scanned, _events(range(1, 11)), tenant_id="t", session_id="s",
                          owner_user_id="u", count_tokens=len)
    assert got is not None and got[0].scanned == Scanned(scanned.block, found)
    assert got[0].scanned.text is got[0].content
