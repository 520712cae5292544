"""Session-level state: the constraints and decisions of a session that has no task
(issue 17, item 1).

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-04

A compaction commits the constraints it finds (from messages, tool results and the
retrieved evidence the session relied on) to the task checkpoint; a session without a task
has none, so they went only into that compaction's summary block and the next run, reading
the last events again, could lose one that had left them. ``session_states`` holds one
record per session: the committed state as a checkpoint body (``tasks.body_of``), with a
revision for optimistic writes and the last event committed (``through_seq``: the next
commit reads only the events after it). A turn renders it in task state like a checkpoint's
constraints; the next compaction builds on it (union, never shrinks).

The rows go with their session (``ON DELETE CASCADE``: erasing a user's sessions removes
them). Tenant RLS forced, as every tenant table.
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import context, op

revision: str = "0013"
down_revision: str | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TABLE = "session_states"
DDL = """
CREATE TABLE session_states (
    tenant_id   text NOT NULL,
    session_id  text NOT NULL,
    revision    integer NOT NULL CHECK (revision > 0),
    body        jsonb NOT NULL,
    through_seq integer NOT NULL DEFAULT 0,
    updated_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, session_id),
    FOREIGN KEY (tenant_id, session_id) REFERENCES sessions ON DELETE CASCADE
)"""
PREDICATE = "tenant_id = current_setting('app.tenant_id', true)"


def _role() -> str:
    # Validated as an identifier by env.py before any revision runs.
    return str(context.config.attributes["app_role"])


def upgrade() -> None:
    bind = op.get_bind()
    for statement in (
        DDL,
        f"ALTER TABLE {TABLE} ENABLE ROW LEVEL SECURITY",
        f"ALTER TABLE {TABLE} FORCE ROW LEVEL SECURITY",
        f"CREATE POLICY tenant_isolation ON {TABLE} USING ({PREDICATE}) WITH CHECK ({PREDICATE})",
        f'GRANT SELECT, INSERT, UPDATE, DELETE ON {TABLE} TO "{_role()}"',
    ):
        bind.exec_driver_sql(statement)


def downgrade() -> None:
    op.get_bind().exec_driver_sql(f"DROP TABLE IF EXISTS {TABLE}")
