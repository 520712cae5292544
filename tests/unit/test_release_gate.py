"""The release gate, shadow cohorts and the shadow's stable prefix as pure functions."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from app.core.compile import compile_envelope, stable_prefix_with
from app.core.model import Candidate
from app.core.refs import bundle_ref
from app.core.registry import Channel, in_canary, shadow_revision
from app.core.release_gate import (
    Evaluation,
    GateRecord,
    ReleaseGate,
    Review,
    may_review,
    unmet,
)
from app.core.retrieval import instruction_candidate

BLOCKED = ({"type": "lint.remote_script", "path": "AGENTS.md", "blocking": True},
           {"type": "lint.non_enforceable_permission", "path": "AGENTS.md"})
APPROVED = Review(decision="approved", reviewer="key_b")


def ev(passed: bool, against: str | None, suite: str = "starter") -> Evaluation:
    return Evaluation(suite=suite, suite_version="1", passed=passed, against_revision=against,
                      report_sha256="0" * 64)


def checks(gate: ReleaseGate, record: GateRecord, *,
           lint: Sequence[Mapping[str, object]] = (), live: str | None = "3",
           revision: str = "4") -> list[tuple[str, str]]:
    return [(u.check, u.kind) for u in unmet(gate, revision=revision, lint=lint,
                                             record=record, live=live)]


def test_the_lint_gate_looks_at_blocking_findings_only() -> None:
    assert checks("lint", GateRecord()) == []
    assert checks("lint", GateRecord(), lint=BLOCKED[1:]) == []
    [found] = unmet("lint", revision="4", lint=BLOCKED, record=GateRecord(), live="3")
    assert found.detail == {"findings": [{"type": "lint.remote_script", "path": "AGENTS.md"}]}


def test_the_full_gate_wants_an_approval_and_a_passing_run_against_the_live_revision() -> None:
    assert checks("full", GateRecord(), lint=BLOCKED) == [
        ("lint", "blocked"), ("approval", "missing"), ("evaluation", "missing")]
    rejected = Review(decision="rejected", reviewer="key_b")
    assert checks("full", GateRecord(review=rejected, evaluations=(ev(True, "3"),))) == [
        ("approval", "rejected")]
    # Only runs against the live revision count, and the newest run of each suite decides.
    assert checks("full", GateRecord(review=APPROVED, evaluations=(ev(True, "2"),))) == [
        ("evaluation", "missing")]
    record = GateRecord(review=APPROVED, evaluations=(
        ev(False, "3"), ev(True, "3"), ev(True, "3", "isolation"), ev(False, "3", "isolation")))
    [failed] = unmet("full", revision="4", lint=(), record=record, live="3")
    assert (failed.kind, failed.detail) == ("failed", {"against_revision": "3",
                                                      "suites": ["isolation"]})
    assert checks("full", GateRecord(review=APPROVED, evaluations=record.evaluations[:3])) == []


def test_with_nothing_live_a_run_alone_counts_and_the_live_revision_needs_none() -> None:
    assert checks("full", GateRecord(review=APPROVED, evaluations=(ev(True, None),)),
                  live=None) == []
    assert checks("full", GateRecord(review=APPROVED), revision="3") == []


def test_four_eyes() -> None:
    assert not may_review(registered_by="key_a", reviewer="key_a")
    assert may_review(registered_by="key_a", reviewer="key_b")
    assert may_review(registered_by=None, reviewer="key_a")  # registered before 0026


def test_a_shadow_cohort_is_drawn_apart_from_the_canary() -> None:
    channel = Channel(stable="3", canary="4", canary_share=0.5, shadow="5", shadow_share=0.5,
                      shadow_agents=("eval-bot",))
    sessions = [f"s{i}" for i in range(400)]
    canary = {s for s in sessions if in_canary(channel, s, None)}
    shadow = {s for s in sessions if shadow_revision(channel, s, None) == "5"}
    assert 150 < len(canary) < 250 and 150 < len(shadow) < 250
    assert canary != shadow and 50 < len(canary & shadow) < 150  # independent halves
    assert shadow_revision(channel, "any", "eval-bot") == "5"
    assert shadow_revision(Channel(stable="3"), "s1", "eval-bot") is None


def test_the_shadow_prefix_is_the_prefix_the_turn_gets_once_served() -> None:
    def envelope(revision: str, text: str) -> list[Candidate]:
        return [instruction_candidate(tenant_id="t", ref=bundle_ref("b", revision),
                                      origin="repo://b", text=text, revision=revision,
                                      count_tokens=len)]

    live = compile_envelope(envelope("3", "Only change RetryConfig."), count_tokens=len)
    served = compile_envelope(envelope("4", "Never touch RetryConfig."), count_tokens=len)
    assert stable_prefix_with(live.segments, instead_of=bundle_ref("b", "3"),
                              ref=bundle_ref("b", "4"), content="Never touch RetryConfig."
                              ) == served.stable_prefix_sha256
    empty = compile_envelope([], count_tokens=len)
    assert stable_prefix_with(live.segments, instead_of=bundle_ref("b", "3"),
                              ref=bundle_ref("b", "4"), content="  ") == \
        empty.stable_prefix_sha256
