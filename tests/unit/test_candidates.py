from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

from app.core.candidates import (
    event_content,
    query_candidate,
    scan_task_state,
    session_candidates,
    task_state_candidates,
)
from app.core.model import (
    Acl,
    Constraint,
    DataLevel,
    Finding,
    Kind,
    KnowledgeHit,
    Layer,
    Section,
    SessionEvent,
    ToolEffect,
    Trust,
)
from app.core.retrieval import knowledge_candidates
from tests.unit.builders import DISCOUNT, TENANT, checkpoint, count, scope
from tests.unit.test_safety import FakeDetector


def test_checkpoint_becomes_pinned_core_and_compressible_detail() -> None:
    cp = checkpoint(accepted_decisions=("refund, not credit",), open_questions=("which card?",),
                    tool_effects=(ToolEffect(effect_id="e1", idempotency_key="idem-1",
                                             status="done", ref="pay://r/1"),))
    core, detail = task_state_candidates(cp, TENANT, count)
    assert core.ref == "task://task_1/checkpoint/3#core"
    assert (core.kind, core.layer, core.section, core.trust) == (
        Kind.TASK_STATE, Layer.TASK, Section.DYNAMIC, Trust.SYSTEM)
    assert (core.never_compress, core.priority, core.owner_user_id) == (True, 100, "alice")
    assert core.sensitivity is DataLevel.INTERNAL
    assert core.acl is not None
    assert core.acl.whole_tenant
    assert core.tenant_id == TENANT
    for text in (cp.goal, f"[only] {DISCOUNT}", cp.pending_approvals[0], cp.next_safe_action):
        assert text in core.content
    assert core.tokens == count(core.content)
    assert detail.ref.endswith("#detail")
    assert (detail.never_compress, detail.priority) == (False, 80)
    for text in ("refund, not credit", cp.verified_evidence[0], "which card?",
                 "idempotency_key=idem-1", "ref=pay://r/1"):
        assert text in detail.content


def test_checkpoint_without_details_gives_only_the_core() -> None:
    cp = checkpoint(verified_evidence=(), next_safe_action="", pending_approvals=())
    (core,) = task_state_candidates(cp, TENANT, count)
    assert "Next safe action" not in core.content
    assert "Pending approvals" not in core.content


def test_query_is_the_users_curated_turn() -> None:
    q = query_candidate(scope(data_level=DataLevel.SECRET), "why?", TENANT, count)
    assert (q.kind, q.layer, q.section, q.role, q.trust, q.origin) == (
        Kind.QUERY, Layer.TURN, Section.DYNAMIC, "user", Trust.CURATED, "user")
    assert q.never_compress
    assert q.sensitivity is DataLevel.CONFIDENTIAL  # never dropped as secret
    assert query_candidate(scope(data_level=DataLevel.PUBLIC), "x", TENANT,
                           count).sensitivity is DataLevel.PUBLIC


def test_session_events_become_labelled_candidates() -> None:
    events = [SessionEvent(seq=4, type="message", role="user", content="refund 991"),
              SessionEvent(seq=5, type="tool_call", call_id="c1", name="refund",
                           arguments={"order": 991}),
              SessionEvent(seq=6, type="tool_result", call_id="c1", content="ok",
                           is_error=True),
              SessionEvent(seq=7, type="tool_call", call_id="c2", name="noop"),
              SessionEvent(seq=8, type="tool_call", call_id="c3", name="raw", arguments="x"),
              SessionEvent(seq=9, type="message", content="no role")]
    cs = session_candidates(events, tenant_id=TENANT, session_id="s1", owner_user_id="alice",
                            count_tokens=count)
    msg, call, res, empty_call, raw_call, no_role = cs
    assert msg.ref == "session://s1/events/4"
    assert (msg.kind, msg.section, msg.trust, msg.seq, msg.role) == (
        Kind.SESSION, Section.SESSION, Trust.CURATED, 4, "user")
    assert (call.role, call.content) == ("assistant", '{"order": 991}')
    assert call.meta == (("call_id", "c1"), ("name", "refund"))
    assert (res.kind, res.role, res.trust) == (Kind.TOOL_RESULT, "tool", Trust.UNTRUSTED)
    assert res.meta_value("is_error") == "true"
    assert empty_call.content == "{}"
    assert raw_call.content == "x"
    assert no_role.role == "user"
    assert [c.priority for c in cs] == [55, 56, 57, 58, 59, 60]
    assert all(c.owner_user_id == "alice" and c.layer is Layer.SESSION for c in cs)


def test_priority_has_a_floor() -> None:
    events = [SessionEvent(seq=i, type="message", role="user", content="x") for i in range(80)]
    cs = session_candidates(events, tenant_id=TENANT, session_id="s", owner_user_id=None,
                            count_tokens=count)
    assert cs[0].priority == 10
    assert cs[-1].priority == 60


def test_counts_made_once_upstream_are_used_and_missing_ones_are_made() -> None:
    hit = KnowledgeHit(chunk_ref="kb://d#v1:c0", doc_id="d", version="1", chunk_no=0,
                       text="four words of text", tenant_id="t", domain=None,
                       sensitivity=DataLevel.INTERNAL, trust=Trust.REVIEWED,
                       acl=Acl(whole_tenant=True), observed_at=None, expires_at=None, rank=1,
                       ranker="fts")
    assert [c.tokens for c in knowledge_candidates([hit], count_tokens=count)] == [4]
    stored = replace(hit, tokens=99)
    assert [c.tokens for c in knowledge_candidates([stored], count_tokens=count)] == [99]
    events = [SessionEvent(seq=1, type="message", role="user", content="two words"),
              SessionEvent(seq=2, type="tool_call", name="x", arguments={"a": 1}, tokens=7)]
    got = session_candidates(events, tenant_id="t", session_id="s", owner_user_id="u",
                             count_tokens=count)
    assert [c.tokens for c in got] == [2, 7]
    assert event_content(events[1]) == got[1].content


def test_task_state_takes_stored_findings_only_for_the_text_they_were_made_of() -> None:
    written = datetime(2026, 6, 1, tzinfo=UTC)
    cp = checkpoint(constraints=(Constraint(text="only before 2026-06-30", kind="deadline",
                                            expires_at="2026-06-30T00:00:00+00:00"),))
    detector = FakeDetector(needle="Task", type="pii.email")
    found = (Finding(type="pii.email", action="mask", start=0, end=4),)
    parts = scan_task_state(cp, written, detector)
    assert [p.part for p in parts] == ["core", "detail"]
    stored = replace(cp, scanned=parts)
    core, _ = task_state_candidates(stored, TENANT, count, written)
    assert core.scanned is not None and core.scanned.findings == found
    assert core.scanned.text is core.content  # what the safety guard requires to take them
    # Past the deadline the constraint renders "EXPIRED ...": another text, scanned again.
    later, _ = task_state_candidates(stored, TENANT, count, datetime(2026, 7, 1, tzinfo=UTC))
    assert later.scanned is None
    # A revision number other than the one the findings were made for: scanned again.
    other, _ = task_state_candidates(replace(stored, revision=cp.revision + 1), TENANT,
                                     count, written)
    assert other.scanned is None
