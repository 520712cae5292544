"""Explain: why one source did or did not reach a turn's envelope, from what the turn recorded.

Contract (pure, no I/O; the service gathers the inputs):

* ``from_manifest(body, ref)`` answers from the manifest's own records when it cites ``ref``
  (cheap and exact): ``included`` with the segment id it became, or ``dropped`` by the stage
  that wrote the drop record — safety (rule, detector type), relevance (rule, relevance score,
  floor, layer limit), dedupe (the kept copy's ref), budget (section, tokens needed, tokens
  left, shortfall). A document ref (``kb://doc``) matches its chunks' refs; the chunk that got
  furthest answers (included first, then the latest stage).
* ``permission(scope, labels, now)`` re-evaluates the permission predicate for a source the
  manifest does not cite, on its labels as stored now and the turn's recorded scope at the
  turn's time: ``permission.verdict`` (the guard's own rules) and the data-level half of
  ``safety.level_verdict`` (the stores push both down into their SQL, so a withheld source
  leaves no drop record). None when the scope may read it.
* ``out_of_reach(scope)``: a session of the turn's own user that its session visibility does
  not open (the sessions' SQL decides that, asked for the one session).
* ``not_a_candidate(ranks, depth)``: a readable source that was not retrieved, with the
  ranks the rankers give it now for the recorded query.
* ``permission_counts(scope, withheld, drops, now)``: the per-label counts a turn writes to
  the audit log (no refs, no content); ``audit_ref(drop)``: the ref a pipeline permission
  drop's own record may carry (never another tenant's).
* ``record_scope`` / ``recorded_scope``: what a turn keeps to be explained later (its scope
  beyond the manifest's columns, and its query) and the ``Scope`` rebuilt from it.

Reasons and details name rules, labels, ranks and refs of the caller's own tenant, never
content. A source of another tenant never gets here: the service's lookups are bounded to the
turn's tenant, so it is as missing as a source that does not exist.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from app.core.guards.permission import verdict
from app.core.guards.safety import level_verdict
from app.core.model import (
    Acl,
    Candidate,
    DataLevel,
    Drop,
    DropLayer,
    Kind,
    Layer,
    Scope,
    Section,
    Trust,
    TurnRequest,
    Visibility,
)
from app.core.replay import record_request

Outcome = Literal["included", "dropped", "not_a_candidate"]
STAGES: tuple[DropLayer, ...] = tuple(DropLayer)  # pipeline order: a later stage got further
RECORD_VERSION = 1

# The reasons the stages write (app.core.guards.safety, relevance, dedupe, budget); a unit
# test builds drops with the real stages and reads them back, so a changed wording fails it.
_DETECTOR = re.compile(r"detector found (?P<detector>\S+)")
_LAYER_LIMIT = re.compile(r"(?P<layer>\w+) limit (?P<limit>\d+) reached")
_KEPT = re.compile(r"same content as (?P<kept>\S+)")
_BUDGET = re.compile(r"(?:(?P<section>\w+) section: )?needs (?P<needed>\d+) tokens"
                     r"(?: \(with its pair, (?P<unit>\d+) tokens\))?; "
                     r"(?:only (?P<left>\d+) tokens left|exceeds the (?P<open>\d+) tokens left)")


@dataclass(frozen=True, slots=True, kw_only=True)
class Explanation:
    outcome: Outcome
    stage: DropLayer | None
    reason: str
    detail: Mapping[str, Any] = field(default_factory=dict)


def record_scope(scope: Scope, req: TurnRequest, session_seq: int | None = None
                 ) -> dict[str, Any]:
    """What the turn keeps beside its manifest so explain can rebuild its scope and re-run its
    query, and a replay its request (``app.core.replay.record_request``; ``session_seq``: the
    session's last event it read): the scope's fields the manifest's columns lack, and the
    query itself (content: stored apart from the manifest body, never returned by any
    endpoint)."""
    return {
        **record_request(req, session_seq),
        "v": RECORD_VERSION,
        "groups": list(scope.groups),
        "domain": scope.domain,
        "data_level": scope.data_level.label,
        "session_visibility": scope.session_visibility.label,
        "purpose": scope.purpose,
        "agent_id": req.agent_id,  # which sessions ``agent`` visibility opens
        "query": req.query,
        "query_vector": "client" if req.query_embedding is not None else "server",
    }


def recorded_scope(*, tenant_id: str, key_id: str, body: Mapping[str, Any],
                   recorded: Mapping[str, Any]) -> Scope:
    """The turn's ``Scope`` from its manifest ``body`` and ``record_scope``'s record."""
    return Scope(
        tenant_id=tenant_id, key_id=key_id, user_id=str(body["user_id"]),
        groups=tuple(recorded.get("groups") or ()), domain=recorded.get("domain"),
        data_level=DataLevel.parse(str(recorded["data_level"])),
        session_id=body.get("session_id"), task_id=body.get("task_id"),
        session_visibility=Visibility.parse(str(recorded.get("session_visibility", "tree"))),
        purpose=recorded.get("purpose"))


def cites(ref: str, cited: str) -> bool:
    """Whether a manifest entry for ``cited`` is about ``ref``: the same ref, or a chunk of
    the document ``ref`` names."""
    return cited == ref or (ref.startswith("kb://") and "#" not in ref
                            and cited.startswith(ref + "#"))


def from_manifest(body: Mapping[str, Any], ref: str) -> Explanation | None:
    segments = [s for s in body.get("segments") or () if cites(ref, str(s.get("ref")))]
    if segments:
        first = segments[0]
        return Explanation(
            outcome="included", stage=None,
            reason=f"included as segment {first['id']} ({first.get('section')} section)",
            detail={"segment_id": first["id"], "section": first.get("section"),
                    "tokens": first.get("tokens"),
                    "segments": [{"ref": s.get("ref"), "segment_id": s["id"]}
                                 for s in segments]})
    drops = [d for d in body.get("dropped") or () if cites(ref, str(d.get("ref")))]
    known = [d for d in drops if d.get("layer") in {s.value for s in STAGES}]
    if not known:
        return None
    furthest = max(known, key=lambda d: STAGES.index(DropLayer(d["layer"])))
    return _dropped(furthest)


def _dropped(d: Mapping[str, Any]) -> Explanation:
    stage = DropLayer(d["layer"])
    type_, why = str(d.get("type", "")), str(d.get("reason", ""))
    rule = type_.removeprefix(f"dropped.{stage.value}.")
    detail: dict[str, Any] = {"ref": d.get("ref"), "type": type_, "rule": rule}
    if stage is DropLayer.SAFETY:
        found = _DETECTOR.search(why)
        if found:
            detail["detector"] = found["detector"]
    elif stage is DropLayer.RELEVANCE:
        detail.update({k: d[k] for k in ("score", "floor") if k in d})
        limit = _LAYER_LIMIT.search(why)
        if limit:
            detail.update(layer=limit["layer"], limit=int(limit["limit"]))
    elif stage is DropLayer.DEDUPE:
        kept = _KEPT.search(why)
        if kept:
            detail["kept_ref"] = kept["kept"]
    elif stage is DropLayer.BUDGET:
        detail.update(_budget_detail(why))
    return Explanation(outcome="dropped", stage=stage,
                       reason=f"dropped by {stage.value}: {why}", detail=detail)


def _budget_detail(reason: str) -> dict[str, Any]:
    found = _BUDGET.search(reason)
    if found is None:
        return {}
    needed = int(found["unit"] or found["needed"])  # a tool pair needs its whole unit
    left = int(found["left"] if found["left"] is not None else found["open"])
    return {"section": found["section"], "needed": needed, "available": left,
            "shortfall": max(0, needed - left)}


def denial(scope: Scope, c: Candidate, now: datetime) -> tuple[str, str] | None:
    """``(label, reason)`` when ``scope`` may not read ``c`` at ``now``: the permission
    guard's rules, then the data level (what the stores' SQL filters on as well)."""
    denied = verdict(scope, c, now)
    if denied is not None:
        return denied
    level = level_verdict(scope, c)
    return level if level is not None and level[0] == "data_level" else None


def permission(scope: Scope, labels: Sequence[Candidate], now: datetime
               ) -> Explanation | None:
    """The permission answer for a source whose stored pieces are ``labels`` (a document's
    chunks carry its labels): None when any piece is readable."""
    denials = [denial(scope, c, now) for c in labels]
    if not denials or any(d is None for d in denials):
        return None
    label, why = next(d for d in denials if d is not None)
    return Explanation(outcome="dropped", stage=DropLayer.PERMISSION,
                       reason=f"withheld by permission ({label}): {why}",
                       detail={"label": label, "type": f"dropped.permission.{label}",
                               "evaluated_at_turn_time": True})


def owned_source(ref: str, tenant_id: str, owner_user_id: str) -> Candidate:
    """The labels of a session's or a task's content, as ``app.core.candidates`` gives them:
    internal, the whole tenant's ACL, owned by the session's or task's user."""
    return Candidate(ref=ref, kind=Kind.SESSION, layer=Layer.SESSION, section=Section.SESSION,
                     role="system", content="", tenant_id=tenant_id, origin=ref,
                     trust=Trust.SYSTEM, sensitivity=DataLevel.INTERNAL,
                     acl=Acl(whole_tenant=True), owner_user_id=owner_user_id)


def out_of_reach(scope: Scope) -> Explanation:
    """A session of the turn's user that the turn's session visibility does not open."""
    label = scope.session_visibility.label
    return Explanation(outcome="dropped", stage=DropLayer.PERMISSION,
                       reason=f"withheld by permission (visibility): outside the turn's "
                              f"session visibility {label!r}",
                       detail={"label": "visibility", "visibility": label,
                               "type": "dropped.permission.visibility",
                               "evaluated_at_turn_time": True})


def not_a_candidate(ranks: Mapping[str, int], depth: int | None, *,
                    vector_ranked: bool = True, why: str | None = None) -> Explanation:
    """A readable source the turn did not retrieve. ``ranks``: its best rank per ranker for
    the recorded query now (absent: the ranker does not find it at all); ``depth``: how many
    rows each ranker read for the turn; ``why``: the reason, for a source no ranker is run
    for."""
    best = min(ranks.values()) if ranks else None
    if why is None:
        why = _rank_reason(best, depth)
    detail: dict[str, Any] = {"best_rank": best, "ranks": dict(sorted(ranks.items())),
                              "depth": depth}
    if not vector_ranked:
        detail["note"] = "the turn brought its own query vector: ranked by words only"
    return Explanation(outcome="not_a_candidate", stage=None,
                       reason=f"not retrieved for this query: {why}", detail=detail)


def _rank_reason(best: int | None, depth: int | None) -> str:
    if best is None:
        return "no ranker finds it for the turn's query"
    if depth is not None and best > depth:
        return f"its best rank {best} is past the turn's depth {depth}"
    return (f"it ranks {best} now, within the turn's depth {depth}: it changed since the "
            "turn, or another layer's rows took its place")


def audit_ref(drop: Drop) -> str | None:
    """The ref a permission drop's audit record may hold: none for a candidate of another
    tenant or of no tenant (``dropped.permission.tenant``) — a tenant's audit log never
    names another tenant's source, even when a store returned one by mistake."""
    return None if drop.type == "dropped.permission.tenant" else drop.ref


def permission_counts(scope: Scope, withheld: Iterable[Candidate], drops: Iterable[Drop],
                      now: datetime) -> dict[str, int]:
    """Per label, the candidates permission kept from the turn: the pipeline's own drops and
    the ``withheld`` rows the stores' SQL filtered out (labelled by the same predicate;
    ``unexplained`` would mean the SQL and the predicate disagree)."""
    counts: dict[str, int] = {}
    for d in drops:
        label = d.type.removeprefix("dropped.permission.")
        counts[label] = counts.get(label, 0) + 1
    for c in withheld:
        denied = denial(scope, c, now)
        label = denied[0] if denied is not None else "unexplained"
        counts[label] = counts.get(label, 0) + 1
    return dict(sorted(counts.items()))
