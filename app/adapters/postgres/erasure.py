"""Durable "forget me" jobs (``ErasureStore``) and the Postgres layers they erase (``Eraser``).

Jobs: ``create`` inserts a ``pending`` row (or returns the user's open job); ``claim`` holds
the job's lease (``leases``: renewed while the job runs, lapsing if the worker dies; no
connection is held, so it works behind PgBouncer), then marks the job ``running`` with
``attempts + 1``; ``plan`` stores the user's session and turn
ids in the receipt (merged across attempts, so a resumed run still knows the ids of rows an
earlier attempt deleted); ``finish`` writes the receipt, replaces ``user_id`` with the
tombstone and appends the audit record in one transaction.

Layers (each in one ``tenant_tx`` that also adds its counts to the receipt, so a crash either
loses both or neither; re-running finds nothing left and adds zeros):
- ``session_archive``: session_compactions, session_bundles pins, session_events, sessions
  owned by the user;
- ``task_checkpoints``: every revision the user owns;
- ``memories``: user-level memories and their history; team memories keep the fact, their
  ``owner``/``user_id`` and history snapshots get the tombstone (history is rewritten by
  delete + insert: the role has no UPDATE on it);
- ``knowledge``: documents ACL'd to the user alone are deleted with their chunks; the user is
  removed from every other ``acl_users`` (documents and the denormalized chunks); the same for
  ingest jobs not yet written (``knowledge_jobs``: the job goes, or the user leaves the ACL
  of the document it holds), so no job writes the user back afterwards;
- ``identity``: every string equal to the user id in a manifest (column and body) or an audit
  record (principal and detail) becomes the tombstone; refs and hashes stay.
Embeddings and tsvectors live in the same rows as the content, so deleting a row erases them.
"""

# ruff: noqa: S608 - the SQL joins constant fragments only; every value is a bind parameter
from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import asynccontextmanager
from typing import Any

from app.adapters.postgres.audit import insert_records
from app.adapters.postgres.codec import dumps
from app.adapters.postgres.db import Database, Sql, Tx
from app.adapters.postgres.leases import PgLeases
from app.ports import AuditRecord, ErasureJob, ErasureTarget, LayerCount

MENTIONS = "jsonb_path_exists({}, 'strict $.** ? (@ == $u)', jsonb_build_object('u', :u))"
ONLY_USER = "(NOT acl_all AND acl_users <@ ARRAY[:u] AND cardinality(acl_groups) = 0)"
BATCH = 500
_COLS = ("tenant_id, erasure_id, user_id, status, requested_by, requested_at, started_at, "
         "finished_at, attempts, receipt")
SQL: dict[str, str] = {
    "create": f"""
INSERT INTO erasures (tenant_id, erasure_id, user_id, status, requested_by, receipt)
SELECT :t, :id, :u, 'pending', :by, '{{}}'::jsonb
WHERE NOT EXISTS (SELECT 1 FROM erasures WHERE tenant_id = :t AND user_id = :u
                  AND status IN ('pending', 'running'))
RETURNING {_COLS}""",
    "open_of_user": f"""SELECT {_COLS} FROM erasures WHERE tenant_id = :t AND user_id = :u
AND status IN ('pending', 'running') ORDER BY requested_at LIMIT 1""",
    "get": f"SELECT {_COLS} FROM erasures WHERE tenant_id = :t AND erasure_id = :id",
    "open": "SELECT tenant_id, erasure_id FROM ctxgate_open_erasures()",
    "start": f"""UPDATE erasures SET status = 'running', attempts = attempts + 1,
started_at = coalesce(started_at, now()) WHERE tenant_id = :t AND erasure_id = :id
AND status IN ('pending', 'running') RETURNING {_COLS}""",
    "receipt": "SELECT receipt FROM erasures WHERE tenant_id = :t AND erasure_id = :id FOR UPDATE",
    "save": "UPDATE erasures SET receipt = CAST(:r AS jsonb) WHERE tenant_id = :t "
            "AND erasure_id = :id",
    "finish": """UPDATE erasures SET status = :status, finished_at = now(), user_id = :tomb,
receipt = CAST(:r AS jsonb) WHERE tenant_id = :t AND erasure_id = :id""",
    "plan_sessions": "SELECT session_id FROM sessions WHERE tenant_id = :t AND user_id = :u",
    # What earlier jobs of the same user planned: their sessions' rows may be gone already
    # (a job that erased PostgreSQL and then failed on Redis), but not their cached keys.
    "plan_before": "SELECT receipt -> 'plan' FROM erasures WHERE tenant_id = :t "
                   "AND user_id IN (:u, :tomb) AND erasure_id <> :id AND receipt ? 'plan'",
    # Two requests for one user at once: one job (the second waits, then finds it open).
    "lock_user": "SELECT pg_advisory_xact_lock(hashtextextended("
                 "'erasure-user/' || :t || '/' || :u, 0))",
    "plan_turns": "SELECT turn_id FROM manifests WHERE tenant_id = :t "
                  "AND user_id IN (:u, :tomb)",
    # session_archive
    "del_compactions": "DELETE FROM session_compactions WHERE tenant_id = :t "
                       "AND session_id = ANY(CAST(:sids AS text[])) AND NOT EXISTS (SELECT 1 "
                       "FROM sessions s WHERE s.tenant_id = :t AND s.session_id = "
                       "session_compactions.session_id AND s.user_id <> :u)",
    "del_bundles": "DELETE FROM session_bundles WHERE tenant_id = :t "
                   "AND session_id = ANY(CAST(:sids AS text[]))",
    "del_events": "DELETE FROM session_events e WHERE e.tenant_id = :t "
                  "AND e.session_id = ANY(CAST(:sids AS text[])) AND NOT EXISTS (SELECT 1 "
                  "FROM sessions s WHERE s.tenant_id = :t AND s.session_id = e.session_id "
                  "AND s.user_id <> :u)",
    "del_sessions": "DELETE FROM sessions WHERE tenant_id = :t AND user_id = :u",
    # task_checkpoints
    "del_checkpoints": "DELETE FROM task_checkpoints WHERE tenant_id = :t AND user_id = :u",
    # memories
    "del_user_history": """DELETE FROM memory_history h WHERE h.tenant_id = :t AND (
h.memory_id IN (SELECT memory_id FROM memories WHERE tenant_id = :t AND scope_level = 'user'
                AND user_id = :u)
OR (NOT EXISTS (SELECT 1 FROM memories m WHERE m.tenant_id = :t AND m.memory_id = h.memory_id)
    AND (h.actor = :u OR """ + MENTIONS.format("h.snapshot") + ")))",
    "del_user_memories": "DELETE FROM memories WHERE tenant_id = :t AND scope_level = 'user' "
                         "AND user_id = :u",
    "tomb_team": """UPDATE memories SET owner = CASE WHEN owner = :u THEN :tomb ELSE owner END,
user_id = CASE WHEN user_id = :u THEN :tomb ELSE user_id END
WHERE tenant_id = :t AND (owner = :u OR user_id = :u)""",
    "take_history": "DELETE FROM memory_history h WHERE h.tenant_id = :t AND (h.actor = :u OR "
                    + MENTIONS.format("h.snapshot")
                    + ") RETURNING memory_id, version, at, action, actor, snapshot",
    "put_history": """INSERT INTO memory_history (tenant_id, memory_id, version, at, action,
actor, snapshot) SELECT :t, h.memory_id, h.version, h.at, h.action, h.actor,
CAST(h.snapshot AS jsonb) FROM unnest(CAST(:ids AS text[]), CAST(:versions AS integer[]),
CAST(:ats AS timestamptz[]), CAST(:actions AS text[]), CAST(:actors AS text[]),
CAST(:snapshots AS text[])) AS h(memory_id, version, at, action, actor, snapshot)""",
    # knowledge
    "del_chunks": f"DELETE FROM knowledge_chunks WHERE tenant_id = :t AND {ONLY_USER}",
    "del_docs": f"DELETE FROM knowledge_documents WHERE tenant_id = :t AND {ONLY_USER}",
    "acl_docs": "UPDATE knowledge_documents SET acl_users = array_remove(acl_users, :u) "
                "WHERE tenant_id = :t AND :u = ANY(acl_users)",
    "acl_chunks": "UPDATE knowledge_chunks SET acl_users = array_remove(acl_users, :u) "
                  "WHERE tenant_id = :t AND :u = ANY(acl_users)",
    "del_jobs": "DELETE FROM knowledge_jobs WHERE tenant_id = :t AND acl_users <@ ARRAY[:u] "
                "AND document IS NOT NULL AND NOT (document #>> '{acl,all}')::boolean "
                "AND jsonb_array_length(document #> '{acl,groups}') = 0",
    "acl_jobs": "UPDATE knowledge_jobs SET acl_users = array_remove(acl_users, :u), "
                "document = jsonb_set(document, '{acl,users}', "
                "(document #> '{acl,users}') - CAST(:u AS text)) "
                "WHERE tenant_id = :t AND :u = ANY(acl_users)",
    # identity
    "take_manifests": "SELECT turn_id, user_id, body FROM manifests WHERE tenant_id = :t AND "
                      "(user_id = :u OR " + MENTIONS.format("body") + ") LIMIT 500",  # = BATCH
    # The replay entry is the turn's response, content and all, and ``recorded`` holds its
    # query and groups: both go, the shape stays.
    "put_manifests": """UPDATE manifests m SET user_id = n.user_id, body = CAST(n.body AS jsonb),
replay = NULL, recorded = NULL
FROM unnest(CAST(:ids AS text[]), CAST(:users AS text[]), CAST(:bodies AS text[]))
AS n(turn_id, user_id, body) WHERE m.tenant_id = :t AND m.turn_id = n.turn_id""",
    "take_audit": "SELECT id, principal, detail FROM audit_log WHERE tenant_id = :t AND "
                  "(principal = :u OR " + MENTIONS.format("detail") + ") LIMIT 500",  # = BATCH
    "put_audit": """UPDATE audit_log a SET principal = n.principal,
detail = CAST(n.detail AS jsonb) FROM unnest(CAST(:ids AS bigint[]),
CAST(:principals AS text[]), CAST(:details AS text[])) AS n(id, principal, detail)
WHERE a.tenant_id = :t AND a.id = n.id""",
}
REMAINING: dict[str, str] = {
    "session_archive": """SELECT (SELECT count(*) FROM sessions WHERE tenant_id = :t
AND user_id = :u) + (SELECT count(*) FROM session_events e WHERE e.tenant_id = :t
AND e.session_id = ANY(CAST(:sids AS text[])) AND NOT EXISTS (SELECT 1 FROM sessions s
WHERE s.tenant_id = :t AND s.session_id = e.session_id AND s.user_id <> :u))
+ (SELECT count(*) FROM session_bundles WHERE tenant_id = :t
AND session_id = ANY(CAST(:sids AS text[])))
+ (SELECT count(*) FROM session_compactions c WHERE c.tenant_id = :t
AND c.session_id = ANY(CAST(:sids AS text[])) AND NOT EXISTS (SELECT 1 FROM sessions s
WHERE s.tenant_id = :t AND s.session_id = c.session_id AND s.user_id <> :u))""",
    "task_checkpoints": "SELECT count(*) FROM task_checkpoints WHERE tenant_id = :t "
                        "AND user_id = :u",
    "memories": """SELECT (SELECT count(*) FROM memories WHERE tenant_id = :t
AND (user_id = :u OR owner = :u)) + (SELECT count(*) FROM memory_history h
WHERE h.tenant_id = :t AND (h.actor = :u OR """ + MENTIONS.format("h.snapshot") + "))",
    "knowledge": """SELECT (SELECT count(*) FROM knowledge_documents WHERE tenant_id = :t
AND :u = ANY(acl_users)) + (SELECT count(*) FROM knowledge_chunks WHERE tenant_id = :t
AND :u = ANY(acl_users)) + (SELECT count(*) FROM knowledge_jobs WHERE tenant_id = :t
AND :u = ANY(acl_users))""",
    "identity": "SELECT (SELECT count(*) FROM manifests WHERE tenant_id = :t AND (user_id = :u OR "
                + MENTIONS.format("body") + ")) + (SELECT count(*) FROM audit_log WHERE "
                "tenant_id = :t AND (principal = :u OR " + MENTIONS.format("detail") + ")) "
                "+ (SELECT count(*) FROM manifests WHERE tenant_id = :t AND user_id = :tomb "
                "AND (replay IS NOT NULL OR recorded IS NOT NULL))",
}
_S = {name: Sql(sql) for name, sql in {**SQL, **REMAINING}.items()}
Step = Callable[[Tx, dict[str, Any]], Coroutine[Any, Any, dict[str, int]]]


def scrub(value: Any, user_id: str, tombstone: str) -> Any:
    """``value`` with every string equal to ``user_id`` replaced by ``tombstone``."""
    if isinstance(value, str):
        return tombstone if value == user_id else value
    if isinstance(value, list):
        return [scrub(v, user_id, tombstone) for v in value]
    if isinstance(value, dict):
        return {k: scrub(v, user_id, tombstone) for k, v in value.items()}
    return value


def _job(row: Any) -> ErasureJob:
    return ErasureJob(
        tenant_id=row.tenant_id, erasure_id=row.erasure_id, user_id=row.user_id,
        status=row.status, requested_by=row.requested_by, requested_at=row.requested_at,
        started_at=row.started_at, finished_at=row.finished_at, attempts=row.attempts,
        receipt=row.receipt or {})


async def _rowcount(conn: Tx, name: str, params: dict[str, Any]) -> int:
    return await conn.execute(_S[name], params)


async def add_counts(conn: Tx, target: ErasureTarget, layer: str,
                     count: LayerCount) -> None:
    """Add ``count`` to the layer's entry in the job's receipt, on ``conn``'s transaction."""
    key = {"t": target.tenant_id, "id": target.erasure_id}
    receipt: dict[str, Any] = await conn.fetchval(_S["receipt"], key) or {}
    layers = receipt.setdefault("layers", {})
    old = layers.get(layer, {"found": 0, "erased": 0, "tables": {}})
    tables = dict(old["tables"])
    for name, n in count.tables.items():
        tables[name] = tables.get(name, 0) + n
    # the rest of the entry (status, verified_remaining) is the last finished check's: a reader
    # polling mid-attempt sees that, never a layer without a status
    layers[layer] = {**old, "found": old["found"] + count.found,
                     "erased": old["erased"] + count.erased, "tables": tables}
    await conn.execute(_S["save"], {**key, "r": dumps(receipt)})


async def _session_archive(conn: Tx, p: dict[str, Any]) -> dict[str, int]:
    return {"session_compactions": await _rowcount(conn, "del_compactions", p),
            "session_bundles": await _rowcount(conn, "del_bundles", p),
            "session_events": await _rowcount(conn, "del_events", p),
            "sessions": await _rowcount(conn, "del_sessions", p)}


async def _task_checkpoints(conn: Tx, p: dict[str, Any]) -> dict[str, int]:
    return {"task_checkpoints": await _rowcount(conn, "del_checkpoints", p)}


async def _memories(conn: Tx, p: dict[str, Any]) -> dict[str, int]:
    out = {"memory_history": await _rowcount(conn, "del_user_history", p),
           "memories": await _rowcount(conn, "del_user_memories", p),
           "team_memories_tombstoned": await _rowcount(conn, "tomb_team", p)}
    rows = await conn.fetch(_S["take_history"], p)
    if rows:
        await conn.execute(_S["put_history"], {
            "t": p["t"], "ids": [r.memory_id for r in rows], "versions": [r.version for r in rows],
            "ats": [r.at for r in rows], "actions": [r.action for r in rows],
            "actors": [p["tomb"] if r.actor == p["u"] else r.actor for r in rows],
            "snapshots": [dumps(scrub(r.snapshot, p["u"], p["tomb"])) for r in rows]})
    out["team_history_tombstoned"] = len(rows)
    return out


async def _knowledge(conn: Tx, p: dict[str, Any]) -> dict[str, int]:
    return {"knowledge_jobs": await _rowcount(conn, "del_jobs", p),
            "knowledge_jobs_acl": await _rowcount(conn, "acl_jobs", p),
            "knowledge_chunks": await _rowcount(conn, "del_chunks", p),
            "knowledge_documents": await _rowcount(conn, "del_docs", p),
            "knowledge_documents_acl": await _rowcount(conn, "acl_docs", p),
            "knowledge_chunks_acl": await _rowcount(conn, "acl_chunks", p)}


async def _identity(conn: Tx, p: dict[str, Any]) -> dict[str, int]:
    u, tomb, out = p["u"], p["tomb"], {"manifests": 0, "audit_log": 0}
    while True:  # batches of 500; a scrubbed row no longer matches
        rows = await conn.fetch(_S["take_manifests"], p)
        if rows:
            await conn.execute(_S["put_manifests"], {
                "t": p["t"], "ids": [r.turn_id for r in rows],
                "users": [scrub(r.user_id, u, tomb) for r in rows],
                "bodies": [dumps(scrub(r.body, u, tomb)) for r in rows]})
        audit = await conn.fetch(_S["take_audit"], p)
        if audit:
            await conn.execute(_S["put_audit"], {
                "t": p["t"], "ids": [r.id for r in audit],
                "principals": [scrub(r.principal, u, tomb) for r in audit],
                "details": [dumps(scrub(r.detail, u, tomb)) for r in audit]})
        out["manifests"] += len(rows)
        out["audit_log"] += len(audit)
        if len(rows) < BATCH and len(audit) < BATCH:
            return out


STEPS: dict[str, Step] = {
    "session_archive": _session_archive, "task_checkpoints": _task_checkpoints,
    "memories": _memories, "knowledge": _knowledge, "identity": _identity,
}


def _params(target: ErasureTarget) -> dict[str, Any]:
    return {"t": target.tenant_id, "u": target.user_id, "tomb": target.tombstone,
            "sids": list(target.session_ids)}


class PgEraser:
    """One Postgres layer: erase and record counts in one transaction; count what remains."""

    def __init__(self, db: Database, layer: str) -> None:
        self._db = db
        self.layer = layer
        self._step = STEPS[layer]

    async def erase(self, target: ErasureTarget) -> LayerCount:
        async with self._db.tenant_tx(target.tenant_id) as conn:
            tables = await self._step(conn, _params(target))
            n = sum(tables.values())
            count = LayerCount(found=n, erased=n, tables=tables)
            await add_counts(conn, target, self.layer, count)
        return count

    async def remaining(self, target: ErasureTarget) -> int:
        async with self._db.tenant_tx(target.tenant_id) as conn:
            return int(await conn.fetchval(_S[self.layer], _params(target)))


def pg_erasers(db: Database) -> list[PgEraser]:
    return [PgEraser(db, layer) for layer in STEPS]


class PgErasureStore:
    def __init__(self, db: Database, leases: PgLeases | None = None) -> None:
        self._db = db
        self._leases = leases or PgLeases(db)

    async def create(self, *, tenant_id: str, user_id: str, requested_by: str) -> ErasureJob:
        p = {"t": tenant_id, "u": user_id, "by": requested_by, "id": f"er_{uuid.uuid4().hex}"}
        async with self._db.tenant_tx(tenant_id) as conn:
            await conn.execute(_S["lock_user"], p)
            row = await conn.fetchrow(_S["create"], p)
            if row is None:  # the user already has an open job: that one is the answer
                row = await conn.one(_S["open_of_user"], p)
        return _job(row)

    async def get(self, *, tenant_id: str, erasure_id: str) -> ErasureJob | None:
        async with self._db.tenant_tx(tenant_id) as conn:
            row = await conn.fetchrow(_S["get"], {"t": tenant_id, "id": erasure_id})
        return _job(row) if row is not None else None

    async def open_jobs(self) -> list[tuple[str, str]]:
        async with self._db.unscoped_tx() as conn:
            return [(r.tenant_id, r.erasure_id) for r in await conn.fetch(_S["open"])]

    @asynccontextmanager
    async def claim(self, *, tenant_id: str, erasure_id: str
                    ) -> AsyncIterator[ErasureJob | None]:
        key = {"t": tenant_id, "id": erasure_id}
        # Erasure ids are generated hex: the name is unambiguous whatever the tenant id holds.
        async with self._leases.hold(f"erasure/{erasure_id}/{tenant_id}") as mine:
            if not mine:  # another worker runs it now
                yield None
                return
            async with self._db.tenant_tx(tenant_id) as conn:
                row = await conn.fetchrow(_S["start"], key)
            yield _job(row) if row is not None else None

    async def plan(self, *, job: ErasureJob, tombstone: str) -> ErasureTarget:
        p = {"t": job.tenant_id, "id": job.erasure_id, "u": job.user_id, "tomb": tombstone}
        async with self._db.tenant_tx(job.tenant_id) as conn:
            receipt: dict[str, Any] = await conn.fetchval(_S["receipt"], p) or {}
            plans = [receipt.setdefault("plan", {"sessions": [], "turns": []}),
                     *await conn.fetchcol(_S["plan_before"], p)]
            sessions = {sid for plan in plans for sid in plan["sessions"]} | set(
                await conn.fetchcol(_S["plan_sessions"], p))
            turns = {tid for plan in plans for tid in plan["turns"]} | set(
                await conn.fetchcol(_S["plan_turns"], p))
            receipt["plan"] = {"sessions": sorted(sessions), "turns": sorted(turns)}
            await conn.execute(_S["save"], {**p, "r": dumps(receipt)})
        return ErasureTarget(tenant_id=job.tenant_id, erasure_id=job.erasure_id,
                             user_id=job.user_id, tombstone=tombstone,
                             session_ids=tuple(sorted(sessions)), turn_ids=tuple(sorted(turns)))

    async def postpone(self, *, job: ErasureJob, receipt: dict[str, Any]) -> None:
        async with self._db.tenant_tx(job.tenant_id) as conn:
            await conn.execute(_S["save"], {"t": job.tenant_id, "id": job.erasure_id,
                                            "r": dumps(receipt)})

    async def record(self, *, target: ErasureTarget, layer: str, count: LayerCount) -> None:
        async with self._db.tenant_tx(target.tenant_id) as conn:
            await add_counts(conn, target, layer, count)

    async def finish(self, *, job: ErasureJob, status: str, receipt: dict[str, Any],
                     tombstone: str, audit: AuditRecord) -> None:
        async with self._db.tenant_tx(job.tenant_id) as conn:
            await conn.execute(_S["finish"], {
                "t": job.tenant_id, "id": job.erasure_id, "status": status, "tomb": tombstone,
                "r": dumps(receipt)})
            await insert_records(conn, job.tenant_id, [audit])
