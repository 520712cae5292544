"""The bundle release gate: what a promotion still lacks, as pure values.

Contract: ``unmet(gate, revision=, lint=, record=, live=)`` lists the checks ``revision``
fails before it may be promoted while ``live`` is the stable revision, under the tenant's
``gate``:

* ``lint`` — a blocking lint finding (``app.core.bundles.hazards.BLOCKING``); checked under
  every gate.
* ``approval`` — under ``full``: the newest review is not an approval (none, or a rejection).
  Reviews are four-eyes: ``may_review`` refuses the key that registered the revision.
* ``evaluation`` — under ``full``: for every suite evaluated against ``live``, the newest
  result must pass, and there must be at least one (with nothing live, evaluations against
  nothing count). ``missing`` when none, ``failed`` when one suite's newest failed.
  Re-promoting the live revision itself (to end a canary) has nothing to compare against and
  skips this check.

The order of the list is the order above, so the first unmet check names the 409.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from app.core.bundles.hazards import BLOCKING

ReleaseGate = Literal["lint", "full"]
GATES: tuple[ReleaseGate, ...] = ("lint", "full")
Decision = Literal["approved", "rejected"]
Check = Literal["lint", "approval", "evaluation"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Review:
    decision: Decision
    reviewer: str  # key id
    note: str | None = None
    at: str | None = None  # set by the store


@dataclass(frozen=True, slots=True, kw_only=True)
class Evaluation:
    suite: str
    suite_version: str
    passed: bool
    metrics: Mapping[str, float | None] = field(default_factory=dict)
    against_revision: str | None = None
    report_sha256: str
    recorded_by: str = ""
    at: str | None = None  # set by the store


@dataclass(frozen=True, slots=True, kw_only=True)
class GateRecord:
    """What a revision has on record for the gate: its newest review and its evaluations,
    oldest first."""

    review: Review | None = None
    evaluations: tuple[Evaluation, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class Unmet:
    check: Check
    kind: str  # lint: "blocked"; approval: "missing" | "rejected"; evaluation: "missing" | "failed"
    detail: dict[str, Any]


def blocking(lint: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    return [f for f in lint if f.get("type") in BLOCKING]


def may_review(*, registered_by: str | None, reviewer: str) -> bool:
    """Four eyes: the key that registered a revision does not review it. A revision from
    before registrants were recorded has no known registrant."""
    return registered_by is None or registered_by != reviewer


def _evaluation(record: GateRecord, live: str | None) -> Unmet | None:
    newest: dict[str, Evaluation] = {}
    for e in record.evaluations:  # oldest first: a later result of a suite replaces it
        if e.against_revision == live:
            newest[e.suite] = e
    if not newest:
        return Unmet(check="evaluation", kind="missing", detail={"against_revision": live})
    failed = sorted(s for s, e in newest.items() if not e.passed)
    if failed:
        return Unmet(check="evaluation", kind="failed",
                     detail={"against_revision": live, "suites": failed})
    return None


def unmet(gate: ReleaseGate, *, revision: str, lint: Sequence[Mapping[str, Any]],
          record: GateRecord, live: str | None) -> list[Unmet]:
    out: list[Unmet] = []
    found = blocking(lint)
    if found:
        out.append(Unmet(check="lint", kind="blocked", detail={"findings": [
            {"type": f["type"], "path": f["path"]} for f in found]}))
    if gate != "full":
        return out
    review = record.review
    if review is None or review.decision != "approved":
        out.append(Unmet(check="approval", kind="missing" if review is None else "rejected",
                         detail={} if review is None else {"reviewer": review.reviewer}))
    evaluation = _evaluation(record, live) if revision != live else None
    if evaluation is not None:
        out.append(evaluation)
    return out
