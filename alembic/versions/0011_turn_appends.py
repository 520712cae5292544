"""Events appended by a turn, once per client-chosen ``turn_id`` (issue 16, item 7).

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-04

``POST /v1/context`` may carry ``append_events``; they enter the session archive before the
turn is assembled. ``turn_appends`` records, per (tenant, client-chosen turn_id), which
session they went into, the contiguous sequence numbers they got and the hash of the request
that carried them, in the same transaction as the events. A retried turn finds the row and
appends nothing (the same request) or is refused with 409 (a different one); a concurrent
first attempt and retry meet on the primary key, and the loser's transaction (its events
included) rolls back. Server-made turn_ids cannot be retried and get no row.

The rows hold ids and numbers, no content; they go with their session (``ON DELETE CASCADE``,
so erasing a user's sessions removes them).
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import context, op

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TABLE = "turn_appends"
DDL = """
CREATE TABLE turn_appends (
    tenant_id      text NOT NULL,
    turn_id        text NOT NULL,
    session_id     text NOT NULL,
    request_sha256 text NOT NULL,
    first_seq      integer NOT NULL,
    n              integer NOT NULL CHECK (n > 0),
    created_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, turn_id),
    FOREIGN KEY (tenant_id, session_id) REFERENCES sessions ON DELETE CASCADE
)"""
# The cascade from a deleted session finds its rows through this index, not a scan.
INDEX = "CREATE INDEX turn_appends_session ON turn_appends (tenant_id, session_id)"
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
