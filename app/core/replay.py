"""Replay: a recorded turn's request rebuilt, run again under variants, and compared.

Contract (pure): ``replay_request`` rebuilds the ``TurnRequest`` a turn made from its manifest
body and the record it kept beside it (``app.core.explain.record_scope``), with a
``Variant``'s overrides; ``shape`` reduces a manifest (recorded or replayed) to what a
comparison reads -- refs, sections, tokens, content hashes, drops per stage -- and ``diff``
compares two shapes. None of them returns content: a replay's answer is ids, counts and
hashes, so running a change over a tenant's real turns shows its effect without the turns'
text leaving the tenant's stores.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from statistics import median
from typing import Any

from app.core.model import (
    Budget,
    Rendering,
    RetrievalLimits,
    Scope,
    TurnRequest,
    Workspace,
)


@dataclass(frozen=True, slots=True, kw_only=True)
class Variant:
    """One configuration a replay runs every selected turn under; None keeps the turn's own.

    ``bundle_revision``: any registered revision of the turn's bundle (a dry run serves
    nothing, so it need not be promoted). ``compaction``: False serves the raw history window
    instead of the session's stored compaction view."""

    name: str
    budget: Budget | None = None
    retrieval: RetrievalLimits | None = None
    redaction_profile: str | None = None
    bundle_revision: str | None = None
    compaction: bool = True


@dataclass(frozen=True, slots=True, kw_only=True)
class AsOf:
    """Where a replayed turn's session stood: its last event then (``seq``, recorded since
    this field exists) and the turn's time (events after it are left out either way)."""

    seq: int | None
    at: datetime


@dataclass(frozen=True, slots=True, kw_only=True)
class Shape:
    """What a comparison reads of one manifest."""

    total_tokens: int
    segments: tuple[tuple[str, str, int, str], ...]  # (ref, section, tokens, content sha256)
    dropped: Mapping[str, int] = field(default_factory=dict)  # per stage
    stable_prefix_sha256: str | None = None

    @property
    def refs(self) -> set[str]:
        return {s[0] for s in self.segments}

    def to_json(self) -> dict[str, Any]:
        return {"total_tokens": self.total_tokens,
                "segments": [{"ref": r, "section": s, "tokens": t, "content_sha256": h}
                             for r, s, t, h in self.segments],
                "dropped": dict(self.dropped),
                "stable_prefix_sha256": self.stable_prefix_sha256}


def record_request(req: TurnRequest, session_seq: int | None) -> dict[str, Any]:
    """The parts of a turn's request its manifest lacks and a replay needs (kept in the
    turn's ``recorded`` record, never returned)."""
    ws = req.workspace
    return {
        "session_seq": session_seq,
        "render": req.render.value,
        "retrieval": None if req.retrieval is None else {
            "knowledge": req.retrieval.knowledge, "memory": req.retrieval.memory,
            "session": req.retrieval.session, "min_score": req.retrieval.min_score},
        "workspace": None if ws is None else {
            "bundle_id": ws.bundle_id, "cwd": ws.cwd, "session_type": ws.session_type,
            "files": list(ws.files), "revision": ws.revision},
    }


def _workspace(body: Mapping[str, Any], recorded: Mapping[str, Any],
               revision: str | None) -> Workspace | None:
    ws = recorded.get("workspace")
    bundle = body.get("bundle")
    if isinstance(ws, Mapping):
        base = Workspace(bundle_id=str(ws["bundle_id"]), cwd=str(ws.get("cwd") or ""),
                         session_type=str(ws.get("session_type") or "main"),
                         files=tuple(str(f) for f in ws.get("files") or ()))
    elif isinstance(bundle, Mapping):  # recorded before the workspace was: the repo's root
        base = Workspace(bundle_id=str(bundle["bundle_id"]))
    else:
        return None
    served = bundle.get("revision") if isinstance(bundle, Mapping) else None
    return replace(base, revision=revision or (str(served) if served else None))


def replay_request(*, turn_id: str, scope: Scope, body: Mapping[str, Any],
                   recorded: Mapping[str, Any], variant: Variant) -> TurnRequest:
    """The request turn ``turn_id`` made, under ``variant``; its identity and bounds are the
    turn's recorded ``scope`` (``app.core.explain.recorded_scope``). The query vector is always
    the server's: a client's vector is not kept (``recorded['query_vector']`` says which it
    was)."""
    limits = recorded.get("retrieval")
    retrieval = variant.retrieval or (RetrievalLimits(
        knowledge=limits.get("knowledge"), memory=limits.get("memory"),
        session=limits.get("session"), min_score=limits.get("min_score"))
        if isinstance(limits, Mapping) else None)
    return TurnRequest(
        turn_id=turn_id, client_turn_id=False, session_id=scope.session_id,
        task_id=scope.task_id, user_id=scope.user_id, groups=scope.groups,
        domain=scope.domain, data_level=scope.data_level,
        query=str(recorded.get("query") or ""), query_embedding=None,
        budget=variant.budget or Budget(max_tokens=int(body["token_budget"]),
                                        reserve_output=int(body.get("reserve_output") or 0)),
        redaction_profile=variant.redaction_profile or body.get("redaction_profile"),
        session_visibility=scope.session_visibility,
        workspace=_workspace(body, recorded, variant.bundle_revision),
        agent_id=recorded.get("agent_id"),
        render=Rendering(str(recorded.get("render") or body.get("render") or "openai")),
        purpose=scope.purpose, retrieval=retrieval)


def as_of(body: Mapping[str, Any], recorded: Mapping[str, Any]) -> AsOf:
    seq = recorded.get("session_seq")
    return AsOf(seq=int(seq) if isinstance(seq, int) else None,
                at=datetime.fromisoformat(str(body["created_at"])))


def shape(manifest: Mapping[str, Any]) -> Shape:
    dropped = (manifest.get("counts") or {}).get("dropped") or {}
    return Shape(
        total_tokens=int(manifest.get("total_tokens") or 0),
        segments=tuple((str(s["ref"]), str(s["section"]), int(s["tokens"]),
                        str(s.get("content_sha256") or ""))
                       for s in manifest.get("segments") or ()),
        dropped={str(k): int(v) for k, v in dropped.items() if v},
        stable_prefix_sha256=manifest.get("stable_prefix_sha256"))


def diff(before: Shape, after: Shape) -> dict[str, Any]:
    """``after`` against ``before``: refs only in one, refs in both whose content changed,
    the token delta, and the refs' Jaccard overlap (1.0: the same sources)."""
    a, b = before.refs, after.refs
    hashes = {r: h for r, _, _, h in before.segments}
    changed = sorted(r for r, _, _, h in after.segments if r in hashes and hashes[r] != h)
    union = a | b
    return {"added": sorted(b - a), "removed": sorted(a - b), "changed": changed,
            "tokens_delta": after.total_tokens - before.total_tokens,
            "overlap": round(len(a & b) / len(union), 4) if union else 1.0,
            "same_stable_prefix": before.stable_prefix_sha256 == after.stable_prefix_sha256}


def summarize(rows: Sequence[Mapping[str, Any]], variant: str) -> dict[str, Any]:
    """One variant's totals over the replayed turns: how many assembled, the errors by type,
    median tokens and median overlap with what each turn recorded."""
    done = [r["variants"][variant] for r in rows if variant in r.get("variants", {})]
    ok = [v for v in done if v["status"] == "ok"]
    errors = Counter(str(v.get("error")) for v in done if v["status"] != "ok")
    return {
        "turns": len(done), "ok": len(ok), "errors": dict(errors),
        "median_tokens": median([v["shape"]["total_tokens"] for v in ok]) if ok else None,
        "median_overlap_with_recorded": median([v["vs_recorded"]["overlap"] for v in ok])
        if ok else None,
        "turns_changed": sum(1 for v in ok if v["vs_recorded"]["added"]
                             or v["vs_recorded"]["removed"] or v["vs_recorded"]["changed"]),
    }
