"""Context manifests (``ManifestStore``): written once per (tenant, turn), never updated.

``insert`` runs ``INSERT ... ON CONFLICT (tenant_id, turn_id) DO NOTHING RETURNING``: when it
inserted, the turn's audit records go in with it (the same statement) and it returns the
session's previous stable prefix; when the turn already had a manifest (a retry of the same
``turn_id``) it writes nothing and returns the stored one as ``existing``, so the caller can
compare ``request_sha256`` and answer idempotently.

The indexed columns (session, task, user, created_at) are copied out of the body; created_at
is the body's ``created_at`` when it has one, so the ``before`` filter of ``list`` matches
what clients see. ``list`` is newest first, paged by keyset (``app.core.paging``).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from app.adapters.postgres.audit import INSERT_SQL as AUDIT_INSERT_SQL
from app.adapters.postgres.audit import record_params
from app.adapters.postgres.codec import dumps
from app.adapters.postgres.db import Database, Row, Sql
from app.core.errors import InvalidRequest
from app.core.paging import Position
from app.ports import AuditRecord, ManifestFilter, ManifestPage, ManifestWrite, StoredManifest

INSERT_SQL = """
INSERT INTO manifests (tenant_id, turn_id, key_id, session_id, task_id, user_id,
                       request_sha256, body, created_at, replay, recorded)
VALUES (:tenant_id, :turn_id, :key_id, :session_id, :task_id, :user_id, :request_sha256,
        CAST(:body AS jsonb), coalesce(CAST(:created_at AS timestamptz), now()), :replay,
        CAST(:recorded AS jsonb))
ON CONFLICT (tenant_id, turn_id) DO NOTHING
RETURNING turn_id
"""
_COLS = "turn_id, key_id, request_sha256, body"
GET_SQL = f"SELECT {_COLS} FROM manifests WHERE tenant_id = :tenant_id AND turn_id = :turn_id"  # noqa: S608 - constant fragments, values are bound
# Keyset paging on (created_at, turn_id), unique per tenant: rows sharing a timestamp are
# neither skipped nor repeated. A runtime key's visibility (key_id) is a condition here, not a
# filter after the LIMIT, so a page is short only at the end. One row past the limit says
# whether there is a next page.
LIST_SQL = f"""
SELECT {_COLS}, created_at FROM manifests
WHERE tenant_id = :tenant_id
  AND (CAST(:session_id AS text) IS NULL OR session_id = :session_id)
  AND (CAST(:task_id AS text) IS NULL OR task_id = :task_id)
  AND (CAST(:key_id AS text) IS NULL OR key_id = :key_id)
  AND (CAST(:before AS timestamptz) IS NULL OR created_at < CAST(:before AS timestamptz))
  AND (CAST(:after_at AS timestamptz) IS NULL
       OR (created_at, turn_id) < (CAST(:after_at AS timestamptz), CAST(:after_id AS text)))
ORDER BY created_at DESC, turn_id DESC
LIMIT :limit + 1
"""  # noqa: S608 - constant fragments, values are bound
# The manifest and its audit records in one statement (one round trip per turn): the audit
# rows go in only if the manifest did, i.e. not for a retried turn_id. It also reads the
# stable prefix of the session's previous turn (the prefix-reuse metric): the statement's
# snapshot does not hold the row it inserts, so the newest one it finds is the one before.
INSERT_WITH_AUDIT_SQL = f"""
WITH m AS ({INSERT_SQL}),
     a AS ({AUDIT_INSERT_SQL} WHERE EXISTS (SELECT 1 FROM m))
SELECT turn_id, (
  SELECT p.body->>'stable_prefix_sha256' FROM manifests p
  WHERE p.tenant_id = :tenant_id AND p.session_id = :session_id
    AND p.created_at <= coalesce(CAST(:created_at AS timestamptz), now())
  ORDER BY p.created_at DESC, p.turn_id DESC
  LIMIT 1) AS previous_prefix
FROM m
"""  # noqa: S608 - constant fragments, values are bound
REPLAY_SQL = """
SELECT replay FROM manifests WHERE tenant_id = :tenant_id AND turn_id = :turn_id
  AND replay IS NOT NULL AND created_at > now() - make_interval(secs => :max_age_s)
"""
_INSERT, _GET, _LIST = Sql(INSERT_WITH_AUDIT_SQL), Sql(GET_SQL), Sql(LIST_SQL)
_REPLAY = Sql(REPLAY_SQL)


def _stored(row: Row) -> StoredManifest:
    return StoredManifest(
        turn_id=row.turn_id, key_id=row.key_id, request_sha256=row.request_sha256,
        body=row.body,
    )


def _created_at(body: dict[str, Any]) -> datetime | None:
    value = body.get("created_at")
    if isinstance(value, datetime):
        return value
    if isinstance(value, str):
        try:
            parsed = datetime.fromisoformat(value)
        except ValueError:
            return None
        return parsed if parsed.tzinfo is not None else None  # naive: let the server decide
    return None


def _before(value: str | None) -> datetime | None:
    if not value:
        return None
    try:
        parsed = datetime.fromisoformat(value)
        # asyncpg converts to UTC: an instant past year 9999 there cannot be represented.
        return parsed.astimezone(UTC) if parsed.tzinfo is not None else parsed
    except (ValueError, OverflowError):
        raise InvalidRequest("before must be an ISO 8601 timestamp up to year 9999") from None


class PgManifestStore:
    def __init__(self, db: Database) -> None:
        self._db = db

    async def insert(
        self, *, tenant_id: str, manifest: StoredManifest, audit: Sequence[AuditRecord],
        replay: bytes | None = None,
    ) -> ManifestWrite:
        body = manifest.body
        params = {
            "tenant_id": tenant_id,
            "turn_id": manifest.turn_id,
            "key_id": manifest.key_id,
            "session_id": body.get("session_id"),
            "task_id": body.get("task_id"),
            "user_id": body.get("user_id"),
            "request_sha256": manifest.request_sha256,
            "body": dumps(body),
            "created_at": _created_at(body),
            "replay": replay,
            "recorded": None if manifest.recorded is None else dumps(manifest.recorded),
            **record_params(audit),
        }
        async with self._db.tenant_tx(tenant_id) as conn:
            inserted = await conn.fetchrow(_INSERT, params)
            if inserted is None:
                row = await conn.one(
                    _GET, {"tenant_id": tenant_id, "turn_id": manifest.turn_id})
                return ManifestWrite(existing=_stored(row))
        return ManifestWrite(existing=None, previous_prefix_sha256=inserted.previous_prefix)

    async def replay(self, *, tenant_id: str, turn_id: str, max_age_s: int) -> bytes | None:
        async with self._db.read_tx(tenant_id) as conn:
            value = await conn.fetchval(_REPLAY, {"tenant_id": tenant_id, "turn_id": turn_id,
                                                  "max_age_s": float(max_age_s)})
        return bytes(value) if value is not None else None

    async def get(self, *, tenant_id: str, turn_id: str) -> StoredManifest | None:
        async with self._db.read_tx(tenant_id) as conn:
            row = await conn.fetchrow(_GET, {"tenant_id": tenant_id, "turn_id": turn_id})
        return _stored(row) if row is not None else None

    async def list(self, *, tenant_id: str, filt: ManifestFilter) -> ManifestPage:
        after = filt.after
        params = {
            "tenant_id": tenant_id,
            "session_id": filt.session_id,
            "task_id": filt.task_id,
            "key_id": filt.key_id,
            "before": _before(filt.before),
            "after_at": after.created_at if after is not None else None,
            "after_id": after.turn_id if after is not None else None,
            "limit": filt.limit,
        }
        async with self._db.read_tx(tenant_id) as conn:
            rows = await conn.fetch(_LIST, params)
        page, more = rows[:filt.limit], len(rows) > filt.limit
        return ManifestPage(
            manifests=[_stored(r) for r in page],
            next=Position(created_at=page[-1].created_at, turn_id=page[-1].turn_id)
            if more else None)
