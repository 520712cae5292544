"""Build the Context Manifest of one turn from what the pipeline decided.

Contract: the manifest holds references and hashes, never content; ``render`` names the
model API the envelope was rendered for; permission drops appear
only as a count (their refs go to the audit log, never here); the shape is CONTRACT.md's.
Pure: ``created_at`` and ``timings_ms`` are passed in.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from app.core.conflicts import Conflict
from app.core.guards.relevance import noise
from app.core.guards.safety import QUARANTINE_META
from app.core.model import Assembly, Candidate, DropLayer, Scope, Segment


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


def _segment_scope(c: Candidate) -> dict[str, Any]:
    acl = c.acl
    return {
        "tenant": c.tenant_id,
        "user": c.owner_user_id,
        "domain": c.domain,
        "acl": "tenant" if acl is None or acl.whole_tenant else "restricted",
        "layer": c.layer.value,
    }


def _segment(seg: Segment) -> dict[str, Any]:
    c = seg.candidate
    return {
        "id": seg.id,
        "kind": c.kind.value,
        "section": c.section.value,
        "ref": c.ref,
        "origin": c.origin,
        "scope": _segment_scope(c),
        "trust": c.trust.value,
        "sensitivity": c.sensitivity.label if c.sensitivity is not None else None,
        "freshness": {
            "observed_at": _iso(c.freshness.observed_at),
            "expires_at": _iso(c.freshness.expires_at),
            "revision": c.freshness.revision,
        },
        "tokens": seg.tokens,
        "priority": c.priority,
        "reason": c.reason,
        "content_sha256": seg.content_sha256,
    }


def build_manifest(
    *,
    scope: Scope,
    turn_id: str,
    assembly: Assembly,
    max_tokens: int,
    reserve_output: int,
    redaction_profile: str | None,
    policy_revision: str,
    created_at: datetime,
    timings_ms: dict[str, float],
    bundle: dict[str, Any] | None = None,
    conflicts: tuple[Conflict, ...] = (),
    compaction: dict[str, Any] | None = None,
    read_back: Sequence[dict[str, str]] = (),
    retrieval: dict[str, Any] | None = None,
    degraded: Sequence[str] = (),
) -> dict[str, Any]:
    """``retrieval``: the turn's depths and floor; the manifest adds the envelope's noise
    (``app.core.guards.relevance.noise``). ``degraded``: the optional dependencies the turn
    went without (``redis``: its tail was read from the archive, no replay entry or pin
    snapshot was kept)."""
    dropped_counts = {layer.value: 0 for layer in DropLayer}
    dropped_counts[DropLayer.PERMISSION.value] = len(assembly.permission_drops)
    for d in assembly.dropped:
        dropped_counts[d.layer.value] += 1
    envelope = assembly.envelope
    return {
        "turn_id": turn_id,
        "tenant_id": scope.tenant_id,
        "session_id": scope.session_id,
        "task_id": scope.task_id,
        "user_id": scope.user_id,
        "created_at": created_at.isoformat(),
        "policy_revision": policy_revision,
        "bundle": bundle,
        "token_budget": max_tokens,
        "reserve_output": reserve_output,
        "total_tokens": envelope.total_tokens,
        "redaction_profile": redaction_profile,
        "segments": [_segment(s) for s in envelope.segments],
        "dropped": [
            {"ref": d.ref, "kind": d.kind.value, "layer": d.layer.value, "type": d.type,
             "reason": d.reason,
             **({"score": round(d.score, 4), "floor": d.floor} if d.score is not None else {})}
            for d in assembly.dropped
        ],
        "counts": {"candidates": assembly.candidates, "dropped": dropped_counts},
        "conflicts": [
            {"type": "instruction_conflict", "higher": c.higher_ref, "lower": c.lower_ref,
             "higher_authority": c.higher_authority, "lower_authority": c.lower_authority,
             "resolution": c.resolution, "shared_terms": c.shared_terms}
            for c in conflicts
        ],
        "validation": {
            "ok": assembly.validation.ok,
            "attempts": assembly.validation.attempts,
            "checks": [
                {"type": c.type, "ok": c.ok, **({"detail": c.detail} if c.detail else {})}
                for c in assembly.validation.checks
            ],
        },
        "compaction": compaction,
        "read_back": list(read_back),
        "retrieval": {**(retrieval or {}), **noise(envelope.segments)},
        "stable_prefix_sha256": envelope.stable_prefix_sha256,
        "render": envelope.render.value,
        "degraded": list(degraded),
        "timings_ms": {k: round(v, 3) for k, v in timings_ms.items()},
    }


def envelope_body(assembly: Assembly) -> dict[str, Any]:
    env = assembly.envelope
    return {
        "segments": [
            {
                "id": s.id,
                "section": s.candidate.section.value,
                "kind": s.candidate.kind.value,
                "role": s.candidate.role,
                "content": s.content,
                "tokens": s.tokens,
                "ref": s.candidate.ref,
                "trust": s.candidate.trust.value,
                "quarantined": bool(s.candidate.meta_value(QUARANTINE_META)),
            }
            for s in env.segments
        ],
        "render": env.render.value,
        "system": list(env.system) if env.system is not None else None,
        "messages": list(env.messages),
        "cache_breakpoint": ({"location": env.cache_breakpoint.location,
                              "index": env.cache_breakpoint.index}
                             if env.cache_breakpoint is not None else None),
        "total_tokens": env.total_tokens,
        "stable_prefix_sha256": env.stable_prefix_sha256,
    }
