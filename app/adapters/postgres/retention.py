"""The retention job's deletes (``RetentionStore``), per tenant, in batches (migration 0021).

Every statement runs as the app role inside ``tenant_tx``/``read_tx``: RLS confines it to
the tenant, and each ``prune`` is one short transaction that deletes at most ``max_rows``
rows of the target's unit (manifests, audit records, sessions, document versions). The
batch is picked in a MATERIALIZED CTE: a ``LIMIT`` inside ``DELETE … WHERE x IN (SELECT …
LIMIT n)`` may be re-run by the planner and delete more than ``n`` rows (it did, in tests).
``FOR UPDATE SKIP LOCKED`` leaves rows another transaction holds (a turn appending to a
session, an erasure deleting it) to a later batch instead of waiting on them.

Ages are whole days before the database's ``now()``: one clock for every worker.
- ``manifests``: ``created_at`` older than the age.
- ``audit_log``: ``at`` older than the age, through ``ctxgate_prune_audit_log`` (the app role
  has no DELETE on the audit log; the function refuses ages under its floor).
- ``sessions``: last activity (``updated_at``, moved by every append) older than the age; the
  session goes whole: its events, appends and state cascade, its compactions and bundle
  bindings are deleted with it. A batch takes sessions, oldest first, until their events
  (``last_seq``) reach ``max_rows`` (at least one session), so a long session does not make a
  long transaction of many.
- ``knowledge``: a version that is not current and was superseded (a newer version of the
  document was created) longer ago than the age; its chunks cascade.
- ``replays``: the response kept with a manifest for a retried ``turn_id`` (migration 0019)
  is cleared past the replay window; the manifest itself stays for its own age.
"""

# ruff: noqa: S608 - the SQL joins constant fragments only; every value is a bind parameter
from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from app.adapters.postgres.db import Database, Sql
from app.adapters.postgres.leases import PgLeases
from app.ports import PruneBatch, RetentionTarget

_AGO = "now() - make_interval(days => :days)"
_STALE_SESSIONS = f"tenant_id = :t AND updated_at < {_AGO}"
_SUPERSEDED = f"""
d.tenant_id = :t AND NOT d.is_current AND d.created_at < {_AGO}
AND EXISTS (SELECT 1 FROM knowledge_documents n WHERE n.tenant_id = d.tenant_id
            AND n.doc_id = d.doc_id AND n.created_at > d.created_at AND n.created_at < {_AGO})"""

TENANTS = Sql("SELECT t FROM ctxgate_retention_tenants() AS t")
COUNT = {
    "manifests": Sql(f"""
SELECT count(*) AS manifests FROM manifests WHERE tenant_id = :t AND created_at < {_AGO}"""),
    "audit_log": Sql(f"""
SELECT count(*) AS audit_log FROM audit_log WHERE tenant_id = :t AND at < {_AGO}"""),
    "sessions": Sql(f"""
SELECT (SELECT count(*) FROM sessions WHERE {_STALE_SESSIONS}) AS sessions,
       (SELECT count(*) FROM session_events e WHERE e.tenant_id = :t AND e.session_id IN (
            SELECT session_id FROM sessions WHERE {_STALE_SESSIONS})) AS session_events"""),
    "replays": Sql(f"""
SELECT count(*) AS manifest_replays FROM manifests
WHERE tenant_id = :t AND replay IS NOT NULL AND created_at < {_AGO}"""),
    "knowledge": Sql(f"""
WITH d AS (SELECT d.doc_id, d.version FROM knowledge_documents d WHERE {_SUPERSEDED})
SELECT (SELECT count(*) FROM d) AS knowledge_documents,
       (SELECT count(*) FROM knowledge_chunks c JOIN d
            ON c.doc_id = d.doc_id AND c.version = d.version
        WHERE c.tenant_id = :t) AS knowledge_chunks"""),
}
PRUNE = {
    "manifests": Sql(f"""
WITH picked AS MATERIALIZED (
    SELECT turn_id FROM manifests WHERE tenant_id = :t AND created_at < {_AGO}
    ORDER BY created_at LIMIT :n FOR UPDATE SKIP LOCKED),
gone AS (
    DELETE FROM manifests m USING picked p WHERE m.tenant_id = :t AND m.turn_id = p.turn_id
    RETURNING 1)
SELECT count(*) AS manifests FROM gone"""),
    "audit_log": Sql("SELECT ctxgate_prune_audit_log(:days, :n) AS audit_log"),
    # The events are counted in the statement's snapshot, before the cascade removes them;
    # the compactions and bindings CTEs run though nothing reads them.
    "sessions": Sql(f"""
WITH picked AS MATERIALIZED (
    SELECT session_id, last_seq, updated_at FROM sessions WHERE {_STALE_SESSIONS}
    ORDER BY updated_at, session_id LIMIT :n FOR UPDATE SKIP LOCKED),
batch AS (
    SELECT session_id FROM (
        SELECT session_id, last_seq,
               sum(last_seq) OVER (ORDER BY updated_at, session_id) AS upto
        FROM picked) w
    WHERE upto - last_seq < :n),
compactions AS (
    DELETE FROM session_compactions c USING batch b
    WHERE c.tenant_id = :t AND c.session_id = b.session_id RETURNING 1),
bundles AS (
    DELETE FROM session_bundles s USING batch b
    WHERE s.tenant_id = :t AND s.session_id = b.session_id RETURNING 1),
gone AS (
    DELETE FROM sessions s USING batch b
    WHERE s.tenant_id = :t AND s.session_id = b.session_id RETURNING s.session_id)
SELECT (SELECT count(*) FROM gone) AS sessions,
       (SELECT count(*) FROM session_events e JOIN batch b ON e.session_id = b.session_id
        WHERE e.tenant_id = :t) AS session_events,
       (SELECT coalesce(array_agg(session_id ORDER BY session_id), '{{}}') FROM gone) AS ids"""),
    # The manifest stays (its own retention): only the stored response, content and all, goes.
    "replays": Sql(f"""
WITH picked AS MATERIALIZED (
    SELECT turn_id FROM manifests WHERE tenant_id = :t AND replay IS NOT NULL
      AND created_at < {_AGO} ORDER BY created_at LIMIT :n FOR UPDATE SKIP LOCKED),
cleared AS (
    UPDATE manifests m SET replay = NULL FROM picked p
    WHERE m.tenant_id = :t AND m.turn_id = p.turn_id RETURNING 1)
SELECT count(*) AS manifest_replays FROM cleared"""),
    "knowledge": Sql(f"""
WITH picked AS MATERIALIZED (
    SELECT d.doc_id, d.version FROM knowledge_documents d WHERE {_SUPERSEDED}
    ORDER BY d.created_at LIMIT :n FOR UPDATE SKIP LOCKED),
gone AS (
    DELETE FROM knowledge_documents d USING picked p
    WHERE d.tenant_id = :t AND d.doc_id = p.doc_id AND d.version = p.version RETURNING 1)
SELECT (SELECT count(*) FROM gone) AS knowledge_documents,
       (SELECT count(*) FROM knowledge_chunks c JOIN picked p
            ON c.doc_id = p.doc_id AND c.version = p.version
        WHERE c.tenant_id = :t) AS knowledge_chunks"""),
}


class PgRetentionStore:
    def __init__(self, db: Database, leases: PgLeases | None = None) -> None:
        self._db = db
        self._leases = leases or PgLeases(db)

    @asynccontextmanager
    async def exclusive(self) -> AsyncIterator[bool]:
        """One run at a time across every serving process: the ``retention`` lease, renewed
        while the run lasts (no connection held between its batches)."""
        async with self._leases.hold("retention") as mine:
            yield mine

    async def tenants(self) -> list[str]:
        async with self._db.unscoped_tx() as tx:
            return [str(t) for t in await tx.fetchcol(TENANTS)]

    async def count(self, *, tenant_id: str, target: RetentionTarget, older_than_days: int
                    ) -> dict[str, int]:
        async with self._db.read_tx(tenant_id) as tx:
            row = await tx.one(COUNT[target], {"t": tenant_id, "days": older_than_days})
        return {k: int(v) for k, v in row.items()}

    async def prune(self, *, tenant_id: str, target: RetentionTarget, older_than_days: int,
                    max_rows: int) -> PruneBatch:
        params = {"t": tenant_id, "days": older_than_days, "n": max_rows}
        async with self._db.tenant_tx(tenant_id) as tx:
            row = await tx.one(PRUNE[target], params)
        got = dict(row.items())
        ids = tuple(got.pop("ids", ()))
        return PruneBatch(rows={k: int(v) for k, v in got.items()}, session_ids=ids)
