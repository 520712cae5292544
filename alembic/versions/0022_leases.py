"""Leases: who runs a background job now, as rows, not session-level advisory locks.

Revision ID: 0022
Revises: 0021
Create Date: 2026-12-04

The erasure worker's job claim, the re-embedding runner and the retention run each held a
session-level advisory lock on a connection of their own across many transactions. Behind
PgBouncer in transaction pooling the server connection goes back to the pool after every
transaction, so such a lock belongs to whichever client the server serves next. A lease row
works through any pooler: ``name`` is what is held (``retention``, ``reembed``,
``erasure/<tenant>/<id>``), ``holder`` who holds it (host, pid and a token per claim),
``expires_at`` when it lapses unless renewed (the database's clock: one clock for every
worker). ``app.adapters.postgres.leases`` claims, renews and releases them.

Not tenant data (no user content; the erasure's name carries its tenant and job ids, as
the worker's logs do): no RLS, as ``embedding_state``. The app role reads and writes it.
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import context, op

revision: str = "0022"
down_revision: str | None = "0021"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

DDL = """
CREATE TABLE leases (
    name        text PRIMARY KEY,
    holder      text NOT NULL,
    acquired_at timestamptz NOT NULL DEFAULT now(),
    expires_at  timestamptz NOT NULL
)"""


def upgrade() -> None:
    bind = op.get_bind()
    # Validated as an identifier by env.py before any revision runs.
    role = str(context.config.attributes["app_role"])
    bind.exec_driver_sql(DDL)
    bind.exec_driver_sql(f'GRANT SELECT, INSERT, UPDATE, DELETE ON leases TO "{role}"')


def downgrade() -> None:
    op.get_bind().exec_driver_sql("DROP TABLE IF EXISTS leases")
