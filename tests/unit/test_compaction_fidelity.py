"""Compaction fidelity on the regression set, the seeds' incident 2, and bounded prompt size."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from app.core.compaction import (
    CompactionOutcome,
    ExtractiveSummarizer,
    Origin,
    SummaryRequest,
    run_compaction,
    validate_compaction,
)
from app.core.compaction.text import event_ref, render_event
from app.core.model import SessionEvent

DATA = Path(__file__).resolve().parents[1] / "data" / "compaction"
SESSIONS = sorted(DATA.glob("*.json"))


def count_tokens(text: str) -> int:
    """Deterministic stand-in: ~4 ASCII chars per token, one per CJK character."""
    cjk = sum(1 for ch in text if ord(ch) >= 0x2E80)
    return (len(text) - cjk) // 4 + cjk


def load(path: Path) -> tuple[dict[str, Any], list[SessionEvent]]:
    doc = json.loads(path.read_text(encoding="utf-8"))
    return doc, [SessionEvent(**e) for e in doc["events"]]


def compacted(doc: dict[str, Any], events: list[SessionEvent], summarizer: Any = None,
              failures: int = 0) -> CompactionOutcome:
    return run_compaction(
        events, None, origin=Origin(session_id=doc["session_id"], task_id=doc["task_id"],
                                    user_id="u1"),
        budget_tokens=doc["budget_tokens"], keep_recent=doc["keep_recent"],
        summarizer=summarizer or ExtractiveSummarizer(), count_tokens=count_tokens,
        failures_so_far=failures)


def fidelity(doc: dict[str, Any], out: CompactionOutcome) -> tuple[float, list[str]]:
    """Share of labelled facts present and correct after compaction, and the failures."""
    cp, text, lab, sid = out.checkpoint, out.view.text, doc["labels"], doc["session_id"]
    assert cp is not None
    kinds = {c.text: c.kind for c in cp.constraints}
    effects = {e.effect_id: e.idempotency_key for e in cp.tool_effects}
    summary = out.view.of_kind("summary")
    facts: list[tuple[str, bool]] = [("goal", cp.goal == lab["goal"] and lab["goal"] in text)]
    facts += [(f"constraint {c['text']}", kinds.get(c["text"]) == c["kind"] and c["text"] in text)
              for c in lab["constraints"]]
    facts += [(f"approval {a}", a in cp.pending_approvals and a in text) for a in lab["approvals"]]
    facts += [(f"effect {e['effect_id']}", effects.get(e["effect_id"]) == e["idempotency_key"])
              for e in lab["effects"]]
    facts += [(f"decision {d}", any(d in x for x in cp.accepted_decisions) and d in text)
              for d in lab["decisions"]]
    facts += [(f"superseded {d}", not any(d in x for x in cp.accepted_decisions))
              for d in lab["superseded"]]
    facts += [(f"forbidden {f}", f not in summary and not any(f in x for x in
                                                             cp.accepted_decisions))
              for f in lab["forbidden_claims"]]
    facts += [(f"evidence {s}", event_ref(sid, s) in text) for s in lab["evidence_seqs"]]
    facts += [(f"sticky {s}", render_event(events_by_seq(doc)[s], sid) in text)
              for s in lab["sticky_seqs"]]
    failed = [name for name, ok in facts if not ok]
    return 1 - len(failed) / len(facts), failed


def events_by_seq(doc: dict[str, Any]) -> dict[int, SessionEvent]:
    return {e["seq"]: SessionEvent(**e) for e in doc["events"]}


def test_regression_set_is_large_enough() -> None:
    assert len(SESSIONS) >= 8
    for path in SESSIONS:
        doc, events = load(path)
        assert 60 <= len(events) <= 200, path.name
        assert doc["labels"]["constraints"], path.name


@pytest.mark.parametrize("path", SESSIONS, ids=lambda p: p.stem)
def test_extractive_compaction_keeps_every_required_fact(path: Path) -> None:
    doc, events = load(path)
    out = compacted(doc, events)
    assert out.action == "compaction.completed", out.check
    assert out.tokens_after < out.tokens_before
    assert out.compaction is not None and out.compaction.summarized_seqs
    score, failed = fidelity(doc, out)
    assert score == 1.0, failed


QUALIFIER_ZH = "该折扣仅限 2026-06-30 前下单、渠道客户除外。"
QUALIFIER_EN = "The discount applies only before 2026-06-30, channel customers excepted."


def test_incident2_qualifier_survives_52_turns() -> None:
    doc, events = load(DATA / "incident2_contract_review.json")
    assert sum(1 for e in events if e.type == "message" and e.role == "user") >= 52
    out = compacted(doc, events)
    assert out.action == "compaction.completed" and out.checkpoint is not None
    assert out.compaction is not None and 1 in out.compaction.summarized_seqs  # clause is old
    for qualifier in (QUALIFIER_ZH, QUALIFIER_EN):
        assert qualifier in out.view.text, "the compacted view dropped the qualifier"
        assert any(qualifier in c.text and c.kind == "except"
                   for c in out.checkpoint.constraints)


class NaiveSummarizer:
    """What went wrong in the incident: a fluent summary that drops the qualifier."""

    def summarize(self, request: SummaryRequest) -> str:
        ref = event_ref(request.session_id, request.events[1].seq)
        return f"合同审阅进行中，付款条款均无问题。渠道客户可以使用该折扣 [{ref}]"


def test_incident2_naive_summary_is_caught_and_breaker_opens() -> None:
    doc, events = load(DATA / "incident2_contract_review.json")
    out = compacted(doc, events, summarizer=NaiveSummarizer())
    assert out.check is not None and not out.check.ok
    assert any(QUALIFIER_ZH in c.constraint for c in out.check.contradictions)
    assert any(QUALIFIER_ZH in m for m in out.check.missing)  # handed back to be pinned
    assert out.breaker_open and out.needs_human and out.attempts == 3
    assert out.view.mode == "reference" and QUALIFIER_ZH in out.view.text
    assert out.record()["type"] == "compaction.breaker_open"


def test_incident2_validate_catches_a_commit_that_lost_the_constraint() -> None:
    doc, events = load(DATA / "incident2_contract_review.json")
    good = compacted(doc, events)
    assert good.checkpoint is not None
    from dataclasses import replace
    lossy = replace(good.checkpoint, constraints=())  # an extractor that dropped qualifiers
    from app.core.compaction import rebuild
    assert good.compaction is not None
    view = rebuild(lossy, "审阅进行中。", good.compaction.recent, sticky=(),
                   session_id=doc["session_id"])
    check = validate_compaction(view, good.checkpoint)
    assert not check.ok
    assert any(QUALIFIER_ZH in m for m in check.missing)
    assert any(QUALIFIER_EN in m for m in check.missing)
