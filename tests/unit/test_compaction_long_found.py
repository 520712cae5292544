"""A long session without a task: a model summary is held to the constraints task state keeps
never-compressed, not to every one the finder read in the session (the bench's 422s)."""

from datetime import UTC, datetime, timedelta

from app.core.compaction.lifecycle import Options, Origin, run_compaction
from app.core.compaction.summarize import ExtractiveSummarizer
from app.core.constraint_state import HELD_FOUND
from app.core.model import SessionEvent
from app.service.compaction import session_view

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def _events(turns: int) -> list[SessionEvent]:
    out: list[SessionEvent] = []
    for t in range(turns):
        at = T0 + timedelta(seconds=30 * t)
        log = "\n".join(f"{at.isoformat()} rate limit {t}-{i} must not exceed refund quota {i}"
                        for i in range(5))
        for typ, role, text in (("message", "user", f"check the queue backlog {t}"),
                                ("tool_result", None, log),
                                ("message", "assistant", f"looked at backlog {t} and quotas")):
            out.append(SessionEvent(seq=len(out) + 1, type=typ, role=role, content=text,
                                    call_id="c" if typ == "tool_result" else None,
                                    created_at=at))
    out[0] = SessionEvent(seq=1, type="message", role="user", created_at=T0,
                          content="Never delete customer data without approval.")
    return out


def test_model_summary_bound_keeps_block_small_and_user_constraint_verbatim() -> None:
    outcome = run_compaction(
        _events(120), None, summarizer=ExtractiveSummarizer(),
        origin=Origin(session_id="s", user_id="u", now=T0), budget_tokens=4000,
        keep_recent=6, count_tokens=lambda s: len(s) // 4,
        options=Options(summary_carries_constraints=True))
    assert outcome.action == "compaction.completed"
    assert outcome.checkpoint is not None
    assert len(outcome.checkpoint.constraints) > 4 * HELD_FOUND  # many found: the bound matters
    block = session_view(outcome, session_id="s", with_checkpoint=True).block
    assert "Never delete customer data without approval." in block
    assert len(block) // 4 < 4000
