"""Explain's pure core: manifest records read back, permission re-evaluated, counts."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest

from app.core import explain
from app.core.budget import allocate
from app.core.dedupe import dedupe
from app.core.guards.permission import permission_guard
from app.core.guards.relevance import relevance_guard
from app.core.guards.safety import safety_guard
from app.core.model import (
    Acl,
    Budget,
    DataLevel,
    Drop,
    DropLayer,
    Finding,
    Freshness,
    Layer,
    Section,
    Trust,
    TurnRequest,
    Visibility,
)
from tests.unit.builders import NOW, cand, scope


def recorded(d: Drop) -> dict[str, Any]:
    """A drop as ``app.core.manifest.build_manifest`` writes it."""
    extra = {"score": round(d.score, 4), "floor": d.floor} if d.score is not None else {}
    return {"ref": d.ref, "kind": d.kind.value, "layer": d.layer.value, "type": d.type,
            "reason": d.reason, **extra}


def answer(drop: Drop, ref: str | None = None) -> explain.Explanation:
    found = explain.from_manifest({"segments": [], "dropped": [recorded(drop)]},
                                  ref or drop.ref)
    assert found is not None
    return found


def test_budget_drop_reads_back_section_and_shortfall() -> None:
    cs = [cand("kb://a#v1:c0", "a " * 60, tokens=60), cand("kb://b#v1:c0", "b", tokens=50)]
    _, drops = allocate(cs, budget=Budget(max_tokens=100, reserve_output=0),
                        shares={Section.DYNAMIC: 1.0})
    e = answer(drops[0])
    assert (e.outcome, e.stage) == ("dropped", DropLayer.BUDGET)
    assert e.detail["section"] == "dynamic"
    assert (e.detail["needed"], e.detail["available"], e.detail["shortfall"]) == (50, 40, 10)


def test_dedupe_drop_names_the_kept_copy() -> None:
    _, drops = dedupe([cand("kb://a#v1:c0", "same text", trust=Trust.REVIEWED),
                       cand("kb://b#v1:c0", "same  TEXT", trust=Trust.EVIDENCE)])
    e = answer(drops[0])
    assert e.stage is DropLayer.DEDUPE
    assert e.detail["kept_ref"] == "kb://a#v1:c0"


def test_relevance_drops_read_back_floor_and_limit() -> None:
    low = cand("kb://low#v1:c0", "unrelated words", scores=(("fts", 1),))
    below = relevance_guard([low], limits={}, floor=0.5, query="refund timeout")[1][0]
    e = answer(below)
    assert (e.stage, e.detail["rule"], e.detail["floor"]) == (
        DropLayer.RELEVANCE, "below_floor", 0.5)
    assert e.detail["score"] == 0.0
    many = [cand(f"kb://d{i}#v1:c0", "refund timeout", scores=(("fts", i + 1),))
            for i in range(3)]
    over = relevance_guard(many, limits={Layer.KNOWLEDGE: 2}, floor=0.0,
                           query="refund timeout")[1][0]
    e = answer(over)
    assert (e.detail["rule"], e.detail["layer"], e.detail["limit"]) == (
        "layer_limit", "knowledge", 2)


def test_safety_drop_names_the_detector_not_the_content() -> None:
    class Token:
        name = "token"

        def __call__(self, text: str) -> list[Finding]:
            return [Finding(type="secret.token", action="drop", start=0, end=4)]

    c = cand("kb://mail#v1:c0", "mail me at x@example.com")
    _, drops = safety_guard(scope(), [c], detectors=[Token()])
    e = answer(drops[0])
    assert (e.stage, e.detail["detector"]) == (DropLayer.SAFETY, "secret.token")
    assert "example.com" not in e.reason


def test_a_document_ref_matches_its_chunks_and_inclusion_wins() -> None:
    body = {"segments": [{"id": "seg_3", "ref": "kb://doc#v2:c1", "section": "dynamic",
                          "tokens": 12}],
            "dropped": [{"ref": "kb://doc#v2:c0", "layer": "budget", "type":
                         "dropped.budget.section_full", "reason": "x"}]}
    e = explain.from_manifest(body, "kb://doc")
    assert e is not None
    assert (e.outcome, e.detail["segment_id"]) == ("included", "seg_3")
    drop = explain.from_manifest(body, "kb://doc#v2:c0")
    assert drop is not None and drop.stage is DropLayer.BUDGET
    assert explain.from_manifest(body, "kb://do") is None  # a prefix is not the document
    assert explain.from_manifest(body, "kb://doc#v2:c9") is None


def test_the_furthest_stage_answers_for_a_document() -> None:
    body = {"segments": [], "dropped": [
        {"ref": "kb://d#v1:c0", "layer": "relevance", "type": "dropped.relevance.below_floor",
         "reason": "r"},
        {"ref": "kb://d#v1:c1", "layer": "dedupe", "type": "dropped.dedupe.duplicate",
         "reason": "same content as kb://e#v1:c0"}]}
    e = explain.from_manifest(body, "kb://d")
    assert e is not None and e.detail["kept_ref"] == "kb://e#v1:c0"


@pytest.mark.parametrize(("labels", "label"), [
    ({"acl": Acl(whole_tenant=False, users=("bob",))}, "acl"),
    ({"domain": "hr"}, "domain"),
    ({"sensitivity": DataLevel.CONFIDENTIAL}, "data_level"),
    ({"freshness": Freshness(expires_at=NOW - timedelta(days=1))}, "expired"),
    ({"owner_user_id": "bob"}, "owner"),
])
def test_permission_names_the_label(labels: dict[str, Any], label: str) -> None:
    e = explain.permission(scope(), [cand(**labels)], NOW)
    assert e is not None
    assert (e.outcome, e.stage, e.detail["label"]) == ("dropped", DropLayer.PERMISSION, label)


def test_permission_passes_when_any_piece_is_readable() -> None:
    assert explain.permission(scope(), [cand()], NOW) is None
    assert explain.permission(scope(), [cand(domain="hr"), cand()], NOW) is None
    # secret content is the safety stage's, not permission's: readable, then dropped there
    assert explain.permission(scope(data_level=DataLevel.SECRET),
                              [cand(sensitivity=DataLevel.SECRET)], NOW) is None


def test_not_a_candidate_says_where_it_would_rank() -> None:
    far = explain.not_a_candidate({"vector": 40, "fts": 12}, 8)
    assert far.outcome == "not_a_candidate" and far.stage is None
    assert far.detail["best_rank"] == 12 and "past the turn's depth 8" in far.reason
    none = explain.not_a_candidate({}, 8, vector_ranked=False)
    assert none.detail["best_rank"] is None and "words only" in none.detail["note"]
    near = explain.not_a_candidate({"fts": 2}, 8)
    assert "changed since the turn" in near.reason


def test_permission_counts_per_label_without_refs() -> None:
    withheld = [cand("kb://a#v1:c0", acl=Acl(whole_tenant=False, users=("bob",))),
                cand("kb://b#v1:c0", acl=Acl(whole_tenant=False, groups=("hr",))),
                cand("kb://c#v1:c0", domain="hr"), cand("kb://ok#v1:c0")]
    drops = [Drop(ref="mem://m@v1", kind=cand().kind, layer=DropLayer.PERMISSION,
                  type="dropped.permission.owner", reason="owned by another user")]
    counts = explain.permission_counts(scope(), withheld, drops, NOW)
    # the readable row means the SQL and the predicate disagree: counted, never hidden
    assert counts == {"acl": 2, "domain": 1, "owner": 1, "unexplained": 1}


def test_audit_records_never_name_another_tenants_ref() -> None:
    _, drops = permission_guard(scope(), [cand("kb://theirs#v1:c0", tenant_id="t_other"),
                                          cand("kb://ours#v1:c0", domain="hr")], now=NOW)
    assert [explain.audit_ref(d) for d in drops] == [None, "kb://ours#v1:c0"]


def test_recorded_scope_round_trips() -> None:
    s = replace(scope(), session_visibility=Visibility.AGENT, purpose="support",
                data_level=DataLevel.CONFIDENTIAL)
    req = TurnRequest(turn_id="t1", session_id=s.session_id, task_id=s.task_id,
                      user_id=s.user_id, groups=s.groups, domain=s.domain,
                      data_level=s.data_level, query="why?", query_embedding=None,
                      budget=Budget(max_tokens=100, reserve_output=0), redaction_profile=None)
    rec = explain.record_scope(s, req)
    assert rec["query"] == "why?" and rec["query_vector"] == "server"
    body = {"user_id": s.user_id, "session_id": s.session_id, "task_id": s.task_id}
    assert explain.recorded_scope(tenant_id=s.tenant_id, key_id=s.key_id, body=body,
                                  recorded=rec) == s


def test_owned_sources_are_checked_for_their_owner() -> None:
    theirs = explain.owned_source("session://s9", scope().tenant_id, "bob")
    e = explain.permission(scope(), [theirs], NOW)
    assert e is not None and e.detail["label"] == "owner"
    mine = explain.owned_source("session://s1", scope().tenant_id, "alice")
    assert explain.permission(scope(), [mine], NOW) is None
