"""Versioned task checkpoints (``TaskStore``): every revision is kept, none is overwritten.

``put`` computes ``latest + 1`` and inserts in one statement; the statement inserts nothing
when ``expected_revision`` is given and differs from the latest (-> ``StaleRevision``). Two
concurrent writers that read the same latest collide on the primary key
(tenant_id, task_id, revision): the loser gets ``StaleRevision`` if it named a revision, and
is retried (last writer wins) if it did not. ``expected_revision=0`` means "must not exist".

The body is jsonb holding the checkpoint's content; identity, ownership and revision live in
columns. Whether the caller may see a checkpoint (``user_id``) is the service's decision.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime
from typing import Any

import asyncpg

from app.adapters.postgres.codec import dumps
from app.adapters.postgres.db import Database, Row, Sql
from app.core.errors import StaleRevision
from app.core.model import (
    Admission,
    Constraint,
    DataLevel,
    ScannedPart,
    TaskCheckpoint,
    ToolEffect,
    tagged_findings,
    untag_findings,
)

PUT_SQL = """
INSERT INTO task_checkpoints
    (tenant_id, task_id, revision, user_id, session_id, parent_task_id, body, findings)
SELECT :tenant_id, :task_id, latest.revision + 1, :user_id, :session_id, :parent_task_id,
       CAST(:body AS jsonb), CAST(:findings AS jsonb)
FROM (SELECT coalesce(max(revision), 0) AS revision FROM task_checkpoints
      WHERE tenant_id = :tenant_id AND task_id = :task_id) AS latest
WHERE CAST(:expected AS integer) IS NULL OR latest.revision = CAST(:expected AS integer)
RETURNING revision
"""
_COLS = "task_id, revision, user_id, session_id, parent_task_id, body, created_at, findings"
GET_LATEST_SQL = f"""
SELECT {_COLS} FROM task_checkpoints WHERE tenant_id = :tenant_id AND task_id = :task_id
ORDER BY revision DESC LIMIT 1
"""  # noqa: S608 - constant fragments, values are bound
GET_REVISION_SQL = f"""
SELECT {_COLS} FROM task_checkpoints
WHERE tenant_id = :tenant_id AND task_id = :task_id AND revision = :revision
"""  # noqa: S608 - constant fragments, values are bound
_PUT, _LATEST, _REVISION = Sql(PUT_SQL), Sql(GET_LATEST_SQL), Sql(GET_REVISION_SQL)
UNCONDITIONAL_RETRIES = 3


def constraint_json(c: Constraint) -> dict[str, Any]:
    return {"text": c.text, "kind": c.kind, "source_ref": c.source_ref, "id": c.id,
            "origin": c.origin, "due": c.due, "expires_at": c.expires_at,
            "flags": list(c.flags)}


def constraint_of(raw: dict[str, Any]) -> Constraint:
    """A stored constraint (a revision written before ids and dates has only the first
    three keys)."""
    return Constraint(**{**raw, "flags": tuple(raw.get("flags", ()))})


def body_of(cp: TaskCheckpoint) -> dict[str, Any]:
    return {
        "goal": cp.goal,
        "accepted_decisions": list(cp.accepted_decisions),
        "verified_evidence": list(cp.verified_evidence),
        "open_questions": list(cp.open_questions),
        "constraints": [constraint_json(c) for c in cp.constraints],
        "pending_approvals": list(cp.pending_approvals),
        "tool_effects": [
            {"effect_id": t.effect_id, "idempotency_key": t.idempotency_key,
             "status": t.status, "ref": t.ref}
            for t in cp.tool_effects
        ],
        "next_safe_action": cp.next_safe_action,
        "admission": None if cp.admission is None else {
            "max_level": int(cp.admission.max_level),
            "domains": None if cp.admission.domains is None else list(cp.admission.domains)},
    }


def _admission(raw: dict[str, Any] | None) -> Admission | None:
    if raw is None:
        return None
    domains = raw.get("domains")
    return Admission(max_level=DataLevel(raw["max_level"]),
                     domains=None if domains is None else tuple(domains))


def findings_param(cp: TaskCheckpoint, detectors: str) -> str | None:
    """``cp.scanned`` as the ``findings`` column stores it (part, text digest, findings tagged
    with ``detectors``); NULL when nothing was scanned."""
    if not cp.scanned:
        return None
    return dumps([[p.part, p.digest, tagged_findings(p.findings, detectors)]
                  for p in cp.scanned])


def _scanned(raw: Any, detectors: str) -> tuple[ScannedPart, ...]:
    """Stored findings made by the detector code ``detectors`` names (others: none)."""
    out = []
    for item in raw if isinstance(raw, list) else ():
        found = untag_findings(item[2], detectors) if isinstance(item, list) and \
            len(item) == 3 else None
        if found is not None:
            out.append(ScannedPart(str(item[0]), str(item[1]), found))
    return tuple(out)


def checkpoint_of(row: Row, detectors: str | None = None) -> TaskCheckpoint:
    """``detectors``: the fingerprint stored findings must carry to be read (None: none)."""
    cp = checkpoint_from(row.body, task_id=row.task_id, revision=row.revision,
                         user_id=row.user_id, session_id=row.session_id,
                         parent_task_id=row.parent_task_id, created_at=row.created_at)
    return cp if detectors is None else replace(cp, scanned=_scanned(row.findings, detectors))


def checkpoint_from(body: dict[str, Any], *, task_id: str, revision: int, user_id: str,
                    session_id: str | None, parent_task_id: str | None,
                    created_at: datetime | None) -> TaskCheckpoint:
    """A checkpoint from its stored ``body`` and the columns beside it."""
    return TaskCheckpoint(
        task_id=task_id,
        revision=revision,
        user_id=user_id,
        session_id=session_id,
        parent_task_id=parent_task_id,
        goal=body.get("goal", ""),
        accepted_decisions=tuple(body.get("accepted_decisions", ())),
        verified_evidence=tuple(body.get("verified_evidence", ())),
        open_questions=tuple(body.get("open_questions", ())),
        constraints=tuple(constraint_of(c) for c in body.get("constraints", ())),
        pending_approvals=tuple(body.get("pending_approvals", ())),
        tool_effects=tuple(ToolEffect(**t) for t in body.get("tool_effects", ())),
        next_safe_action=body.get("next_safe_action", ""),
        admission=_admission(body.get("admission")),
        created_at=created_at,
    )


class PgTaskStore:
    """``detectors``: the fingerprint of the detector code; findings stored under another
    are not read (the task state is scanned again)."""

    def __init__(self, db: Database, *, detectors: str = "") -> None:
        self._db = db
        self._detectors = detectors

    async def put(
        self, *, tenant_id: str, checkpoint: TaskCheckpoint, expected_revision: int | None
    ) -> int:
        params = {
            "tenant_id": tenant_id,
            "task_id": checkpoint.task_id,
            "user_id": checkpoint.user_id,
            "session_id": checkpoint.session_id,
            "parent_task_id": checkpoint.parent_task_id,
            "body": dumps(body_of(checkpoint)),
            "findings": findings_param(checkpoint, self._detectors),
            "expected": expected_revision,
        }
        attempts = 1 if expected_revision is not None else UNCONDITIONAL_RETRIES
        for _ in range(attempts):
            try:
                async with self._db.tenant_tx(tenant_id) as conn:
                    revision = await conn.fetchval(_PUT, params)
            except asyncpg.UniqueViolationError:
                continue  # a concurrent writer took latest+1 first
            if revision is None:
                break
            return int(revision)
        raise StaleRevision(
            f"task {checkpoint.task_id!r}: expected revision {expected_revision} is not the latest"
        )

    async def get(
        self, *, tenant_id: str, task_id: str, revision: int | None = None
    ) -> TaskCheckpoint | None:
        params: dict[str, Any] = {"tenant_id": tenant_id, "task_id": task_id}
        async with self._db.read_tx(tenant_id) as conn:
            if revision is None:
                row = await conn.fetchrow(_LATEST, params)
            else:
                row = await conn.fetchrow(_REVISION, {**params, "revision": revision})
        return checkpoint_of(row, self._detectors) if row is not None else None
