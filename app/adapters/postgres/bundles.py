"""The bundle registry (``BundleStore``): immutable revisions, channels, denylist, pins.

- ``register`` is idempotent for the same files (same sha256) and a ``Conflict`` for a
  revision name reused with other files, or for content whose hash was revoked.
- ``revoke`` marks the revision, denylists its hash and, in the same transaction, moves the
  channels off it: a revoked stable falls back to the newest good revision, a revoked canary
  is cleared. New sessions can therefore never be admitted to a revoked revision.
- ``session_state`` is the one hot-path read: the session's pin (with its revocation state)
  and the channel (its shadow cohort too), in one round trip.
- ``review`` and ``evaluate`` append to a revision's gate record (migration 0026);
  ``gate_record`` reads its newest review and every evaluation in one round trip.
Every statement filters on ``tenant_id`` and runs in ``tenant_tx`` (RLS), twice bounded.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from app.adapters.postgres.codec import dumps
from app.adapters.postgres.db import Database, Row, Sql
from app.core.errors import Conflict
from app.core.registry import Binding, BundleFile, BundleRevision, Channel
from app.core.release_gate import Evaluation, GateRecord, Review

_COLS = "bundle_id, revision, runtime, sha256, body, revoked_at, created_at, registered_by"
INSERT_SQL = """
INSERT INTO bundle_revisions (tenant_id, bundle_id, revision, runtime, sha256, body,
                              registered_by)
SELECT :tenant_id, :bundle_id, :revision, :runtime, :sha256, CAST(:body AS jsonb),
       :registered_by
WHERE NOT EXISTS (SELECT 1 FROM bundle_denylist WHERE tenant_id = :tenant_id
                  AND sha256 = :sha256)
ON CONFLICT (tenant_id, bundle_id, revision) DO NOTHING
RETURNING revision
"""
GET_SQL = f"""
SELECT {_COLS} FROM bundle_revisions
WHERE tenant_id = :tenant_id AND bundle_id = :bundle_id AND revision = :revision
"""  # noqa: S608 - constant fragments, values are bound
LIST_SQL = f"""
SELECT {_COLS} FROM bundle_revisions WHERE tenant_id = :tenant_id AND bundle_id = :bundle_id
ORDER BY created_at, revision
"""  # noqa: S608 - constant fragments, values are bound
DENIED_SQL = "SELECT 1 FROM bundle_denylist WHERE tenant_id = :tenant_id AND sha256 = :sha256"
_CHANNEL_COLS = ("stable_revision, canary_revision, canary_share, canary_agents, "
                 "shadow_revision, shadow_share, shadow_agents")
CHANNEL_SQL = f"""
SELECT {_CHANNEL_COLS} FROM bundle_channels
WHERE tenant_id = :tenant_id AND bundle_id = :bundle_id
"""  # noqa: S608 - constant fragments, values are bound
SET_CHANNEL_SQL = """
INSERT INTO bundle_channels AS c (tenant_id, bundle_id, stable_revision, canary_revision,
                                  canary_share, canary_agents, shadow_revision,
                                  shadow_share, shadow_agents)
VALUES (:tenant_id, :bundle_id, :stable, :canary, :share, CAST(:agents AS text[]), :shadow,
        :shadow_share, CAST(:shadow_agents AS text[]))
ON CONFLICT (tenant_id, bundle_id) DO UPDATE SET stable_revision = EXCLUDED.stable_revision,
    canary_revision = EXCLUDED.canary_revision, canary_share = EXCLUDED.canary_share,
    canary_agents = EXCLUDED.canary_agents, shadow_revision = EXCLUDED.shadow_revision,
    shadow_share = EXCLUDED.shadow_share, shadow_agents = EXCLUDED.shadow_agents,
    updated_at = now()
"""
REVOKE_SQL = """
UPDATE bundle_revisions SET revoked_at = coalesce(revoked_at, now()), revoke_reason = :reason
WHERE tenant_id = :tenant_id AND bundle_id = :bundle_id AND revision = :revision
RETURNING sha256
"""
DENY_SQL = """
INSERT INTO bundle_denylist (tenant_id, sha256, reason) VALUES (:tenant_id, :sha256, :reason)
ON CONFLICT DO NOTHING
"""
# After a revocation: stable falls back to the newest good revision; a revoked canary or
# shadow ends.
REPAIR_CHANNEL_SQL = """
UPDATE bundle_channels c SET
    stable_revision = CASE WHEN c.stable_revision = :revision THEN (
        SELECT r.revision FROM bundle_revisions r
        WHERE r.tenant_id = :tenant_id AND r.bundle_id = :bundle_id AND r.revoked_at IS NULL
        ORDER BY r.created_at DESC, r.revision DESC LIMIT 1) ELSE c.stable_revision END,
    canary_revision = CASE WHEN c.canary_revision = :revision THEN NULL
                           ELSE c.canary_revision END,
    shadow_revision = CASE WHEN c.shadow_revision = :revision THEN NULL
                           ELSE c.shadow_revision END,
    updated_at = now()
WHERE c.tenant_id = :tenant_id AND c.bundle_id = :bundle_id
"""
STATE_SQL = """
SELECT b.revision, b.sha256, (r.revoked_at IS NOT NULL) AS revoked,
       c.stable_revision, c.canary_revision, c.canary_share, c.canary_agents,
       c.shadow_revision, c.shadow_share, c.shadow_agents
FROM (SELECT 1) AS one
LEFT JOIN session_bundles b ON b.tenant_id = :tenant_id AND b.session_id = :session_id
     AND b.bundle_id = :bundle_id
LEFT JOIN bundle_revisions r ON r.tenant_id = :tenant_id AND r.bundle_id = :bundle_id
     AND r.revision = b.revision
LEFT JOIN bundle_channels c ON c.tenant_id = :tenant_id AND c.bundle_id = :bundle_id
"""
BIND_SQL = """
INSERT INTO session_bundles AS s (tenant_id, session_id, bundle_id, revision, sha256)
VALUES (:tenant_id, :session_id, :bundle_id, :revision, :sha256)
ON CONFLICT (tenant_id, session_id, bundle_id) DO UPDATE
    SET revision = EXCLUDED.revision, sha256 = EXCLUDED.sha256, bound_at = now()
    WHERE CAST(:replace AS boolean)
RETURNING s.revision, s.sha256
"""
CURRENT_BIND_SQL = """
SELECT revision, sha256 FROM session_bundles
WHERE tenant_id = :tenant_id AND session_id = :session_id AND bundle_id = :bundle_id
"""
REVIEW_SQL = """
INSERT INTO bundle_reviews (tenant_id, bundle_id, revision, decision, reviewer, note)
VALUES (:tenant_id, :bundle_id, :revision, :decision, :reviewer, :note)
RETURNING at
"""
EVALUATE_SQL = """
INSERT INTO bundle_evaluations (tenant_id, bundle_id, revision, suite, suite_version, passed,
                                metrics, against_revision, report_sha256, recorded_by)
VALUES (:tenant_id, :bundle_id, :revision, :suite, :suite_version, :passed,
        CAST(:metrics AS jsonb), :against, :report_sha256, :recorded_by)
RETURNING at
"""
# One row per evaluation (oldest first), each carrying the newest review; a revision with
# neither still answers one row of NULLs.
GATE_SQL = """
SELECT r.decision, r.reviewer, r.note, r.at AS reviewed_at, e.suite, e.suite_version,
       e.passed, e.metrics, e.against_revision, e.report_sha256, e.recorded_by, e.at
FROM (SELECT 1) AS one
LEFT JOIN LATERAL (
    SELECT decision, reviewer, note, at FROM bundle_reviews
    WHERE tenant_id = :tenant_id AND bundle_id = :bundle_id AND revision = :revision
    ORDER BY id DESC LIMIT 1) r ON true
LEFT JOIN bundle_evaluations e ON e.tenant_id = :tenant_id AND e.bundle_id = :bundle_id
     AND e.revision = :revision
ORDER BY e.id
"""
_S = {name: Sql(sql) for name, sql in {
    "insert": INSERT_SQL, "get": GET_SQL, "list": LIST_SQL, "denied": DENIED_SQL,
    "channel": CHANNEL_SQL, "set_channel": SET_CHANNEL_SQL, "revoke": REVOKE_SQL,
    "deny": DENY_SQL, "repair": REPAIR_CHANNEL_SQL, "state": STATE_SQL, "bind": BIND_SQL,
    "current_bind": CURRENT_BIND_SQL, "review": REVIEW_SQL, "evaluate": EVALUATE_SQL,
    "gate": GATE_SQL}.items()}


def _body(rev: BundleRevision) -> dict[str, Any]:
    return {"files": [{"path": f.path, "content": f.content, "sha256": f.sha256}
                      for f in rev.files],
            "source": dict(rev.source), "declared_scope": list(rev.declared_scope),
            "approval": dict(rev.approval), "compatibility": dict(rev.compatibility),
            "lint": [dict(x) for x in rev.lint]}


def _revision(row: Row) -> BundleRevision:
    body: dict[str, Any] = row.body
    return BundleRevision(
        bundle_id=row.bundle_id, revision=row.revision, runtime=row.runtime, sha256=row.sha256,
        files=tuple(BundleFile(**f) for f in body["files"]), source=body.get("source", {}),
        declared_scope=tuple(body.get("declared_scope", ())),
        approval=body.get("approval", {}), compatibility=body.get("compatibility", {}),
        lint=tuple(body.get("lint", ())), revoked=row.revoked_at is not None,
        created_at=row.created_at.isoformat(), registered_by=row.registered_by)


def _channel(row: Row) -> Channel:
    return Channel(stable=row.stable_revision, canary=row.canary_revision,
                   canary_share=float(row.canary_share or 0.0),
                   canary_agents=tuple(row.canary_agents or ()),
                   shadow=row.shadow_revision, shadow_share=float(row.shadow_share or 0.0),
                   shadow_agents=tuple(row.shadow_agents or ()))


class PgBundleStore:
    def __init__(self, db: Database) -> None:
        self._db = db

    async def register(self, *, tenant_id: str, revision: BundleRevision) -> BundleRevision:
        key = {"tenant_id": tenant_id, "bundle_id": revision.bundle_id,
               "revision": revision.revision}
        async with self._db.tenant_tx(tenant_id) as conn:
            inserted = await conn.fetchrow(_S["insert"], {
                **key, "runtime": revision.runtime, "sha256": revision.sha256,
                "body": dumps(_body(revision)), "registered_by": revision.registered_by})
            if inserted is not None:
                row = await conn.one(_S["get"], key)
                return _revision(row)
            if await conn.fetchrow(_S["denied"], {"tenant_id": tenant_id,
                                                  "sha256": revision.sha256}):
                raise Conflict("this content was revoked: its hash is on the denylist")
            existing = _revision(await conn.one(_S["get"], key))
        # The same files under another runtime resolve to other text: that is another revision.
        if (existing.sha256, existing.runtime) != (revision.sha256, revision.runtime):
            raise Conflict(f"revision {revision.revision!r} exists with other files or another "
                           "runtime; revisions are immutable")
        return existing

    async def get(self, *, tenant_id: str, bundle_id: str, revision: str
                  ) -> BundleRevision | None:
        params = {"tenant_id": tenant_id, "bundle_id": bundle_id, "revision": revision}
        async with self._db.read_tx(tenant_id) as conn:
            row = await conn.fetchrow(_S["get"], params)
        return _revision(row) if row is not None else None

    async def revisions(self, *, tenant_id: str, bundle_id: str) -> list[BundleRevision]:
        params = {"tenant_id": tenant_id, "bundle_id": bundle_id}
        async with self._db.read_tx(tenant_id) as conn:
            return [_revision(r) for r in await conn.fetch(_S["list"], params)]

    async def channel(self, *, tenant_id: str, bundle_id: str) -> Channel | None:
        params = {"tenant_id": tenant_id, "bundle_id": bundle_id}
        async with self._db.read_tx(tenant_id) as conn:
            row = await conn.fetchrow(_S["channel"], params)
        return _channel(row) if row is not None else None

    async def set_channel(self, *, tenant_id: str, bundle_id: str, channel: Channel) -> None:
        async with self._db.tenant_tx(tenant_id) as conn:
            await conn.execute(_S["set_channel"], {
                "tenant_id": tenant_id, "bundle_id": bundle_id, "stable": channel.stable,
                "canary": channel.canary, "share": channel.canary_share,
                "agents": list(channel.canary_agents), "shadow": channel.shadow,
                "shadow_share": channel.shadow_share,
                "shadow_agents": list(channel.shadow_agents)})

    async def revoke(self, *, tenant_id: str, bundle_id: str, revision: str,
                     reason: str) -> bool:
        key = {"tenant_id": tenant_id, "bundle_id": bundle_id, "revision": revision}
        async with self._db.tenant_tx(tenant_id) as conn:
            row = await conn.fetchrow(_S["revoke"], {**key, "reason": reason})
            if row is None:
                return False
            await conn.execute(_S["deny"], {"tenant_id": tenant_id, "sha256": row.sha256,
                                            "reason": reason})
            await conn.execute(_S["repair"], key)
        return True

    async def session_state(self, *, tenant_id: str, session_id: str, bundle_id: str
                            ) -> tuple[Binding | None, bool, Channel | None]:
        """(the session's pin or None, whether that pin is revoked, the channel or None)."""
        params = {"tenant_id": tenant_id, "session_id": session_id, "bundle_id": bundle_id}
        async with self._db.read_tx(tenant_id) as conn:
            row = await conn.one(_S["state"], params)
        pin = (Binding(bundle_id=bundle_id, revision=row.revision, sha256=row.sha256)
               if row.revision is not None else None)
        channel = (_channel(row) if row.stable_revision or row.canary_revision
                   or row.shadow_revision else None)
        return pin, bool(row.revoked), channel

    async def bind(self, *, tenant_id: str, session_id: str, binding: Binding,
                   replace: bool) -> Binding:
        """Pin a session; without ``replace`` an existing pin wins (concurrent first turns)."""
        params = {"tenant_id": tenant_id, "session_id": session_id,
                  "bundle_id": binding.bundle_id, "revision": binding.revision,
                  "sha256": binding.sha256, "replace": replace}
        async with self._db.tenant_tx(tenant_id) as conn:
            row = await conn.fetchrow(_S["bind"], params)
            if row is None:
                row = await conn.one(_S["current_bind"], params)
        return Binding(bundle_id=binding.bundle_id, revision=row.revision, sha256=row.sha256)

    async def review(self, *, tenant_id: str, bundle_id: str, revision: str,
                     review: Review) -> Review:
        async with self._db.tenant_tx(tenant_id) as conn:
            at = await conn.fetchval(_S["review"], {
                "tenant_id": tenant_id, "bundle_id": bundle_id, "revision": revision,
                "decision": review.decision, "reviewer": review.reviewer, "note": review.note})
        return replace(review, at=at.isoformat())

    async def evaluate(self, *, tenant_id: str, bundle_id: str, revision: str,
                       evaluation: Evaluation) -> Evaluation:
        e = evaluation
        async with self._db.tenant_tx(tenant_id) as conn:
            at = await conn.fetchval(_S["evaluate"], {
                "tenant_id": tenant_id, "bundle_id": bundle_id, "revision": revision,
                "suite": e.suite, "suite_version": e.suite_version, "passed": e.passed,
                "metrics": dumps(dict(e.metrics)), "against": e.against_revision,
                "report_sha256": e.report_sha256, "recorded_by": e.recorded_by})
        return replace(e, at=at.isoformat())

    async def gate_record(self, *, tenant_id: str, bundle_id: str, revision: str
                          ) -> GateRecord:
        params = {"tenant_id": tenant_id, "bundle_id": bundle_id, "revision": revision}
        async with self._db.read_tx(tenant_id) as conn:
            rows = await conn.fetch(_S["gate"], params)
        first = rows[0]
        review = None if first.decision is None else Review(
            decision=first.decision, reviewer=first.reviewer, note=first.note,
            at=first.reviewed_at.isoformat())
        return GateRecord(review=review, evaluations=tuple(
            Evaluation(suite=r.suite, suite_version=r.suite_version, passed=r.passed,
                       metrics=r.metrics, against_revision=r.against_revision,
                       report_sha256=r.report_sha256, recorded_by=r.recorded_by,
                       at=r.at.isoformat()) for r in rows if r.suite is not None))
