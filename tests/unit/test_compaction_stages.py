"""Stage contracts: prune, cut, commit, sticky, validate, lifecycle breaker and record."""

from __future__ import annotations

from typing import Any

from app.core.compaction import (
    ExtractiveSummarizer,
    Origin,
    RuleExtractor,
    SummaryRequest,
    commit,
    compact,
    contradictions,
    find_sticky,
    plan_cut,
    prune,
    run_compaction,
)
from app.core.model import Constraint, SessionEvent, TaskCheckpoint

SID = "s1"


def msg(seq: int, role: str, content: str) -> SessionEvent:
    return SessionEvent(seq=seq, type="message", role=role, content=content)


def call(seq: int, cid: str, name: str = "t", args: Any = None) -> SessionEvent:
    return SessionEvent(seq=seq, type="tool_call", call_id=cid, name=name, arguments=args)


def res(seq: int, cid: str, content: str, *, error: bool = False,
        name: str | None = None) -> SessionEvent:
    return SessionEvent(seq=seq, type="tool_result", call_id=cid, content=content,
                        is_error=error, name=name)


def test_prune_soft_trims_then_hard_clears_and_protects_recent_and_bootstrap() -> None:
    big = "x" * 9000
    events = [res(0, "boot", big), msg(1, "user", "go"), call(2, "a"), res(3, "a", big),
              call(4, "b"), res(5, "b", big), msg(6, "assistant", "1"), msg(7, "assistant", "2"),
              call(8, "c"), res(9, "c", big), msg(10, "assistant", "3")]
    out = prune(events, session_id=SID, hard_clear_after=6, keep_last_assistant_turns=3)
    actions = {p.seq: p.action for p in out.pruned}
    assert actions == {3: "prune.hard_clear", 5: "prune.soft_trim"}
    assert "session://s1/events/3" in out.events[3].content
    assert out.events[5].content.startswith("x" * 1500) and "of 9000 chars" in out.events[5].content
    assert out.events[0].content == big and out.events[9].content == big  # bootstrap, recent
    assert events[3].content == big  # input untouched
    capped = prune(events, session_id=SID, max_total_chars=30000)
    assert [p.action for p in capped.pruned] == ["prune.hard_clear", "prune.soft_trim"]


def test_cut_moves_earlier_to_keep_pairs_and_drops_orphans() -> None:
    events = [msg(0, "user", "u"), call(1, "a"), msg(2, "assistant", "x"), res(3, "a", "r"),
              msg(4, "assistant", "y"), res(5, "zz", "orphan"), call(6, "q")]
    cut = plan_cut(events, keep_recent=4)
    assert [e.seq for e in cut.older] == [0]
    assert [e.seq for e in cut.recent] == [1, 2, 3, 4, 6]  # in-flight call at the end kept
    assert cut.dropped_orphans == (5,)


def test_compact_hashes_summary_and_cites_refs() -> None:
    events = [msg(0, "user", "Budget is capped at no more than 5 servers."),
              msg(1, "assistant", "chat"), msg(2, "user", "more"), msg(3, "assistant", "ok")]
    c = compact(events, keep_recent=2, summarizer=ExtractiveSummarizer(), session_id=SID)
    assert c.cut_seq == 2 and c.summarized_seqs == (0, 1)
    assert "[session://s1/events/0]" in c.summary and len(c.summary_sha256) == 64


def test_commit_unions_never_drops_and_reads_both_languages() -> None:
    old = TaskCheckpoint(task_id="t", revision=4, user_id="u", session_id=SID,
                         parent_task_id=None, goal="Keep me",
                         constraints=(Constraint(text="Old rule only for A.", kind="only"),),
                         pending_approvals=("Old approval pending approval.",))
    events = [msg(0, "user", "退款仅限 30 天内订单。团购订单除外。最多 3 次。须先核验身份。"),
              msg(1, "user", "Ship before 2026-07-01. Old rule only for A."),
              msg(2, "assistant", "The release needs approval from Lee. 合同待审批。"),
              call(3, "c", "deploy", {"env": "prod"}), res(4, "c", "Deployed id=d-9 to prod.")]
    cp = commit(events, old, extractor=RuleExtractor(), session_id=SID)
    kinds = {c.text: c.kind for c in cp.constraints}
    assert cp.revision == 5 and cp.goal == "Keep me"
    assert kinds["退款仅限 30 天内订单。"] == "only" and kinds["团购订单除外。"] == "except"
    assert kinds["最多 3 次。"] == "limit" and kinds["须先核验身份。"] == "precondition"
    assert kinds["Ship before 2026-07-01."] == "deadline"
    assert list(kinds).count("Old rule only for A.") == 1
    assert cp.pending_approvals[0] == "Old approval pending approval."
    assert "合同待审批。" in cp.pending_approvals
    effect = cp.tool_effects[0]
    assert effect.effect_id == "deploy:d-9" and effect.idempotency_key.startswith("derived:")
    assert effect.ref == "session://s1/events/4"


def test_sticky_keeps_unresolved_errors_approvals_and_failures() -> None:
    events = [msg(0, "user", "go"), call(1, "a", "build"), res(2, "a", "boom", error=True),
              call(3, "b", "lint"), res(4, "b", "bad", error=True), call(5, "c", "lint"),
              res(6, "c", "clean"), msg(7, "assistant", "Deploy needs approval from Kim."),
              msg(8, "assistant", "RefundIT FAILED on retry."), msg(9, "user", "later")]
    assert [e.seq for e in find_sticky(events, before_seq=9)] == [1, 2, 7, 8]
    resolved = [*events, msg(10, "user", "Kim approved the deploy."),
                msg(11, "assistant", "RefundIT passed.")]
    assert [e.seq for e in find_sticky(resolved, before_seq=None)] == [1, 2]


def test_contradiction_heuristic() -> None:
    c = (Constraint(text="The discount applies only before 2026-06-30, channel customers "
                         "excepted.", kind="except"),)
    assert contradictions("Channel customers can use the discount [x].", c)
    assert not contradictions("Channel customers cannot use the discount.", c)
    assert not contradictions("Lunch was good.", c)


class Contradicting:
    def summarize(self, request: SummaryRequest) -> str:
        return "Channel customers can use the discount."


def _session() -> list[SessionEvent]:
    head = [msg(0, "user", "Answer pricing questions."),
            msg(1, "user", "The discount applies only before 2026-06-30, channel customers "
                           "excepted.")]
    return head + [msg(i, "assistant" if i % 2 else "user", f"filler {i} " * 20)
                   for i in range(2, 40)]


def test_breaker_counts_failures_of_earlier_runs() -> None:
    kw: dict[str, Any] = {"origin": Origin(session_id=SID, task_id="t"), "budget_tokens": 300,
                          "keep_recent": 4, "count_tokens": lambda s: len(s) // 4}
    out = run_compaction(_session(), None, summarizer=Contradicting(), failures_so_far=2, **kw)
    assert out.breaker_open and out.attempts == 1 and out.consecutive_failures == 3
    assert out.view.mode == "reference" and out.checkpoint is not None
    already = run_compaction(_session(), None, summarizer=Contradicting(), failures_so_far=3, **kw)
    assert already.breaker_open and already.attempts == 0
    ok = run_compaction(_session(), None, summarizer=ExtractiveSummarizer(), **kw)
    rec = ok.record()
    assert rec["type"] == "compaction.completed" and rec["consecutive_failures"] == 0
    assert rec["tokens_after"] < rec["tokens_before"] and rec["cut_seq"] == 36
    assert rec["checkpoint_revision_after"] == 1 and rec["validation"]["ok"]
    small = run_compaction(_session()[:3], None, summarizer=Contradicting(), **kw)
    assert small.action == "compaction.none" and small.view.mode == "full"
