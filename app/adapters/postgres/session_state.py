"""Session-level state (``SessionStateStore``): the committed constraints and decisions of a
session without a task, one row per session (migration 0013).

The state is a ``TaskCheckpoint`` value with an empty ``task_id`` (the same body as a task
checkpoint, ``tasks.body_of``), so compaction commits to it exactly as it commits to a task.
``put`` writes revision ``expected + 1`` only while the stored revision is ``expected`` (0:
none stored yet), else ``StaleRevision``: two compactions of one session cannot lose each
other's constraints silently. Every statement runs in the tenant's transaction (RLS).
"""

from __future__ import annotations

from app.adapters.postgres.codec import dumps
from app.adapters.postgres.db import Database, Sql
from app.adapters.postgres.tasks import body_of, checkpoint_of, findings_param
from app.core.errors import StaleRevision
from app.core.session_state import SessionState

GET_SQL = Sql("""
SELECT '' AS task_id, st.revision, s.user_id, st.session_id, NULL AS parent_task_id, st.body,
       st.updated_at AS created_at, st.through_seq, st.findings
FROM session_states st JOIN sessions s
  ON s.tenant_id = st.tenant_id AND s.session_id = st.session_id
WHERE st.tenant_id = :tenant_id AND st.session_id = :session_id
""")
PUT_SQL = Sql("""
INSERT INTO session_states AS st (tenant_id, session_id, revision, body, through_seq,
                                  findings)
SELECT :tenant_id, :session_id, 1, CAST(:body AS jsonb), :through_seq,
       CAST(:findings AS jsonb)
WHERE CAST(:expected AS integer) = 0
ON CONFLICT (tenant_id, session_id) DO UPDATE
SET revision = st.revision + 1, body = excluded.body, through_seq = excluded.through_seq,
    findings = excluded.findings, updated_at = now()
WHERE st.revision = CAST(:expected AS integer)
RETURNING revision
""")


class PgSessionStateStore:
    """``detectors``: the fingerprint of the detector code; findings stored under another
    are not read (the state is scanned again), as for task checkpoints."""

    def __init__(self, db: Database, *, detectors: str = "") -> None:
        self._db = db
        self._detectors = detectors

    async def get(self, *, tenant_id: str, session_id: str) -> SessionState | None:
        async with self._db.read_tx(tenant_id) as conn:
            row = await conn.fetchrow(GET_SQL, {"tenant_id": tenant_id,
                                                "session_id": session_id})
        return None if row is None else SessionState(
            state=checkpoint_of(row, self._detectors), through_seq=row.through_seq)

    async def put(self, *, tenant_id: str, session_id: str, state: SessionState,
                  expected_revision: int) -> int:
        """The new revision; ``StaleRevision`` when the stored one is not ``expected``."""
        params = {"tenant_id": tenant_id, "session_id": session_id,
                  "body": dumps(body_of(state.state)), "through_seq": state.through_seq,
                  "findings": findings_param(state.state, self._detectors),
                  "expected": expected_revision}
        async with self._db.tenant_tx(tenant_id) as conn:
            revision = await conn.fetchval(PUT_SQL, params)
        if revision is None:
            raise StaleRevision(f"session state of {session_id!r} changed since revision "
                                f"{expected_revision}")
        return int(revision)
