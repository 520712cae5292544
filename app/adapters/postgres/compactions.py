"""Recorded compaction runs (``CompactionStore``): one row per run, never updated.

``insert`` stores ``CompactionOutcome.record()`` with the summary text and the columns the
service reads back (cut, hash, ok, breaker state); a repeated run with the same inputs has
the same deterministic ``compaction_id`` and inserts nothing (ON CONFLICT DO NOTHING).
``latest`` is the newest row of a session: its ``consecutive_failures`` feed the breaker of
the next run and its id the next run's lineage. Every statement runs in ``tenant_tx`` (RLS).
"""

from __future__ import annotations

from typing import Any

from app.adapters.postgres.codec import dumps
from app.adapters.postgres.db import Database, Sql
from app.ports import StoredCompaction

INSERT_SQL = Sql("""
INSERT INTO session_compactions
    (tenant_id, session_id, compaction_id, cut_seq, summary, summary_sha256, ok,
     consecutive_failures, breaker_open, record, view)
VALUES (:tenant_id, :session_id, :compaction_id, :cut_seq, :summary, :summary_sha256, :ok,
        :consecutive_failures, :breaker_open, CAST(:record AS jsonb), CAST(:view AS jsonb))
ON CONFLICT (tenant_id, session_id, compaction_id) DO NOTHING
""")
LATEST_SQL = Sql("""
SELECT compaction_id, created_at, cut_seq, summary_sha256, ok, consecutive_failures,
       breaker_open, record, view
FROM session_compactions WHERE tenant_id = :tenant_id AND session_id = :session_id
ORDER BY created_at DESC, compaction_id LIMIT 1
""")


class PgCompactionStore:
    def __init__(self, db: Database) -> None:
        self._db = db

    async def latest(self, *, tenant_id: str, session_id: str) -> StoredCompaction | None:
        async with self._db.read_tx(tenant_id) as conn:
            row = await conn.fetchrow(LATEST_SQL, {"tenant_id": tenant_id,
                                                   "session_id": session_id})
        if row is None:
            return None
        return StoredCompaction(
            compaction_id=row.compaction_id, created_at=row.created_at, cut_seq=row.cut_seq,
            summary_sha256=row.summary_sha256, ok=row.ok,
            consecutive_failures=row.consecutive_failures, breaker_open=row.breaker_open,
            record=row.record, view=row.view)

    async def insert(self, *, tenant_id: str, session_id: str, record: dict[str, Any],
                     summary: str, view: dict[str, Any] | None = None) -> None:
        validation = record.get("validation")
        params = {
            "tenant_id": tenant_id, "session_id": session_id,
            "compaction_id": record["compaction_id"], "cut_seq": record.get("cut_seq"),
            "summary": summary, "summary_sha256": record.get("summary_sha256"),
            "ok": bool(validation and validation.get("ok")) and not record.get("breaker_open"),
            "consecutive_failures": int(record.get("consecutive_failures", 0)),
            "breaker_open": bool(record.get("breaker_open")), "record": dumps(record),
            "view": None if view is None else dumps(view),
        }
        async with self._db.tenant_tx(tenant_id) as conn:
            await conn.execute(INSERT_SQL, params)
