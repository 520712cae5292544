"""The tenant's audit log (``AuditLog``): append-only records of decisions and key events.

``write`` inserts a batch in one statement; ``insert_records`` does the same on a caller's
connection, and ``INSERT_SQL`` with ``record_params`` lets the manifest store write a turn's
audit in the manifest's own statement.
``list`` returns the newest records first (optionally of one turn) as JSON-ready dicts:
``id, turn_id, at (ISO 8601), kind, principal, ref, rule, detail``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from app.adapters.postgres.codec import dumps
from app.adapters.postgres.db import Database, Sql, Tx
from app.ports import AuditRecord

INSERT_SQL = """
INSERT INTO audit_log (tenant_id, turn_id, kind, principal, ref, rule, detail)
SELECT :tenant_id, r.turn_id, r.kind, r.principal, r.ref, r.rule, CAST(r.detail AS jsonb)
FROM unnest(CAST(:turn_ids AS text[]), CAST(:kinds AS text[]), CAST(:principals AS text[]),
            CAST(:refs AS text[]), CAST(:rules AS text[]), CAST(:details AS text[]))
     AS r(turn_id, kind, principal, ref, rule, detail)
"""
_COLS = "id, turn_id, at, kind, principal, ref, rule, detail"
LIST_SQL = f"""
SELECT {_COLS} FROM audit_log WHERE tenant_id = :tenant_id ORDER BY id DESC LIMIT :limit
"""  # noqa: S608 - constant fragments, values are bound
LIST_TURN_SQL = f"""
SELECT {_COLS} FROM audit_log WHERE tenant_id = :tenant_id AND turn_id = :turn_id
ORDER BY id DESC LIMIT :limit
"""  # noqa: S608 - constant fragments, values are bound
_INSERT, _LIST, _LIST_TURN = Sql(INSERT_SQL), Sql(LIST_SQL), Sql(LIST_TURN_SQL)


def record_params(records: Sequence[AuditRecord]) -> dict[str, list[Any]]:
    """The array parameters of ``INSERT_SQL`` (besides ``tenant_id``) for ``records``."""
    return {
        "turn_ids": [r.turn_id for r in records],
        "kinds": [r.kind for r in records],
        "principals": [r.principal for r in records],
        "refs": [r.ref for r in records],
        "rules": [r.rule for r in records],
        "details": [dumps(r.detail) for r in records],
    }


async def insert_records(
    conn: Tx, tenant_id: str, records: Sequence[AuditRecord]
) -> None:
    """Insert ``records`` on ``conn`` (which must be a ``tenant_tx`` of ``tenant_id``)."""
    if records:
        await conn.execute(_INSERT, {"tenant_id": tenant_id, **record_params(records)})


class PgAuditLog:
    def __init__(self, db: Database) -> None:
        self._db = db

    async def write(self, *, tenant_id: str, records: Sequence[AuditRecord]) -> None:
        if not records:
            return
        async with self._db.tenant_tx(tenant_id) as conn:
            await insert_records(conn, tenant_id, records)

    async def list(
        self, *, tenant_id: str, turn_id: str | None, limit: int
    ) -> list[dict[str, Any]]:
        params: dict[str, Any] = {"tenant_id": tenant_id, "limit": limit}
        async with self._db.tenant_tx(tenant_id) as conn:
            if turn_id is None:
                rows = await conn.fetch(_LIST, params)
            else:
                rows = await conn.fetch(_LIST_TURN, {**params, "turn_id": turn_id})
            return [
                {"id": r.id, "turn_id": r.turn_id, "at": r.at.isoformat(), "kind": r.kind,
                 "principal": r.principal, "ref": r.ref, "rule": r.rule,
                 "detail": r.detail}
                for r in rows
            ]
