"""The pure part of a replay (``app.core.replay``): a recorded turn's request rebuilt under a
variant, and two manifests' shapes compared."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from app.core.explain import record_scope
from app.core.model import (
    Budget,
    DataLevel,
    Rendering,
    RetrievalLimits,
    Scope,
    TurnRequest,
    Visibility,
    Workspace,
)
from app.core.replay import Variant, as_of, diff, replay_request, shape

AT = datetime(2026, 12, 5, 12, 0, tzinfo=UTC)
REQ = TurnRequest(
    turn_id="t-9", session_id="s-1", task_id="task-1", user_id="alice", groups=("oncall",),
    domain="payments", data_level=DataLevel.CONFIDENTIAL, query="why the timeout?",
    query_embedding=(0.1, 0.2), budget=Budget(max_tokens=4000, reserve_output=500),
    redaction_profile="strict", session_visibility=Visibility.AGENT,
    workspace=Workspace(bundle_id="rules", cwd="services/refund", files=("a.py",)),
    agent_id="codex", render=Rendering.ANTHROPIC, purpose="support",
    retrieval=RetrievalLimits(knowledge=12, min_score=0.3))
SCOPE = Scope(tenant_id="acme", key_id="k1", user_id="alice", groups=("oncall",),
              domain="payments", data_level=DataLevel.CONFIDENTIAL, session_id="s-1",
              task_id="task-1", session_visibility=Visibility.AGENT, purpose="support")
BODY: dict[str, Any] = {
    "turn_id": "t-9", "user_id": "alice", "session_id": "s-1", "task_id": "task-1",
    "created_at": AT.isoformat(), "token_budget": 4000, "reserve_output": 500,
    "redaction_profile": "strict", "render": "anthropic", "total_tokens": 900,
    "bundle": {"bundle_id": "rules", "revision": "v3"},
    "stable_prefix_sha256": "p1", "counts": {"dropped": {"relevance": 2, "budget": 0}},
    "segments": [{"ref": "bundle://rules@v3", "section": "stable", "tokens": 100,
                  "content_sha256": "b"},
                 {"ref": "kb://d#v1:c0", "section": "dynamic", "tokens": 800,
                  "content_sha256": "k"}]}


def test_the_recorded_request_comes_back_but_for_the_client_vector() -> None:
    recorded = record_scope(SCOPE, REQ, session_seq=41)
    got = replay_request(turn_id="t-9", scope=SCOPE, body=BODY, recorded=recorded,
                         variant=Variant(name="recorded"))
    assert got.query_embedding is None and not got.client_turn_id  # the server embeds
    assert got.workspace == Workspace(bundle_id="rules", cwd="services/refund",
                                      files=("a.py",), revision="v3")
    assert (got.query, got.budget, got.redaction_profile, got.render, got.retrieval,
            got.agent_id, got.purpose, got.data_level, got.groups, got.session_visibility) == (
        REQ.query, REQ.budget, "strict", Rendering.ANTHROPIC, REQ.retrieval, "codex",
        "support", DataLevel.CONFIDENTIAL, ("oncall",), Visibility.AGENT)
    point = as_of(BODY, recorded)
    assert (point.seq, point.at) == (41, AT)


def test_a_variant_replaces_only_what_it_names() -> None:
    recorded = record_scope(SCOPE, REQ, session_seq=None)
    got = replay_request(turn_id="t-9", scope=SCOPE, body=BODY, recorded=recorded, variant=Variant(
        name="b", budget=Budget(max_tokens=2000, reserve_output=0), bundle_revision="v4",
        retrieval=RetrievalLimits(memory=0)))
    assert got.budget == Budget(max_tokens=2000, reserve_output=0)
    assert got.workspace is not None and got.workspace.revision == "v4"
    assert got.retrieval == RetrievalLimits(memory=0)
    assert got.redaction_profile == "strict" and as_of(BODY, recorded).seq is None


def test_a_turn_recorded_before_its_workspace_replays_at_the_root() -> None:
    old = {k: v for k, v in record_scope(SCOPE, REQ).items()
           if k not in {"workspace", "render", "retrieval", "session_seq"}}
    got = replay_request(turn_id="t-9", scope=SCOPE, body=BODY, recorded=old,
                         variant=Variant(name="recorded"))
    assert got.workspace == Workspace(bundle_id="rules", revision="v3")
    assert got.render is Rendering.ANTHROPIC and got.retrieval is None


def test_shapes_compare_by_refs_hashes_and_tokens() -> None:
    before = shape(BODY)
    assert before.dropped == {"relevance": 2}
    after = shape({**BODY, "total_tokens": 700, "stable_prefix_sha256": "p2", "segments": [
        {"ref": "bundle://rules@v4", "section": "stable", "tokens": 90, "content_sha256": "c"},
        {"ref": "kb://d#v1:c0", "section": "dynamic", "tokens": 610, "content_sha256": "k2"}]})
    assert diff(before, after) == {
        "added": ["bundle://rules@v4"], "removed": ["bundle://rules@v3"],
        "changed": ["kb://d#v1:c0"], "tokens_delta": -200, "overlap": round(1 / 3, 4),
        "same_stable_prefix": False}
    assert diff(before, before)["overlap"] == 1.0
