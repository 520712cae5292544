"""Session compactions: the recorded outcome of each compaction run (issue "Compaction as a
transaction").

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-03

- ``session_compactions`` keeps one row per recorded run of the compaction lifecycle: the cut,
  the summary and its hash, whether validation passed, the breaker state (consecutive
  failures carry over to the next run) and the machine-first record (``CompactionOutcome
  .record()``: counts, hashes, refs, lineage). The committed checkpoint revision lives in
  ``task_checkpoints``; it is written before this row (see app/service/compaction.py).
- Erasure deletes the rows of the user's sessions with the session archive.
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import context, op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TABLE = "session_compactions"
DDL = """
CREATE TABLE session_compactions (
    tenant_id            text NOT NULL,
    session_id           text NOT NULL,
    compaction_id        text NOT NULL,
    created_at           timestamptz NOT NULL DEFAULT clock_timestamp(),
    cut_seq              integer,
    summary              text NOT NULL DEFAULT '',
    summary_sha256       text,
    ok                   boolean NOT NULL,
    consecutive_failures integer NOT NULL DEFAULT 0,
    breaker_open         boolean NOT NULL DEFAULT false,
    record               jsonb NOT NULL,
    PRIMARY KEY (tenant_id, session_id, compaction_id)
)"""
INDEX = ("CREATE INDEX session_compactions_latest ON session_compactions "
         "(tenant_id, session_id, created_at DESC)")
PREDICATE = "tenant_id = current_setting('app.tenant_id', true)"


def _role() -> str:
    # Validated as an identifier by env.py before any revision runs.
    return str(context.config.attributes["app_role"])


def upgrade() -> None:
    bind = op.get_bind()
    for statement in (
        DDL,
        INDEX,
        f"ALTER TABLE {TABLE} ENABLE ROW LEVEL SECURITY",
        f"ALTER TABLE {TABLE} FORCE ROW LEVEL SECURITY",
        f"CREATE POLICY tenant_isolation ON {TABLE} USING ({PREDICATE}) WITH CHECK ({PREDICATE})",
        f'GRANT SELECT, INSERT, DELETE ON {TABLE} TO "{_role()}"',
    ):
        bind.exec_driver_sql(statement)


def downgrade() -> None:
    op.get_bind().exec_driver_sql(f"DROP TABLE IF EXISTS {TABLE}")
