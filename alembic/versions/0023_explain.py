"""What a turn records to be explained later (``GET /v1/manifests/{turn_id}/explain``).

Revision ID: 0023
Revises: 0022
Create Date: 2026-12-04

``manifests.recorded`` is the turn's scope beyond the manifest's columns (groups, domain,
data level, session visibility, purpose) and its query (``app.core.explain.record_scope``),
written in the manifest's own INSERT. Explain re-evaluates a source against it: the
permission predicate against the scope, the rankers against the query. The query is content,
so it lives beside the body, not in it (no endpoint returns it), and erasure clears it with
the replay entry; older manifests have none and explain answers them from their records only.
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import context, op

revision: str = "0023"
down_revision: str | None = "0022"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # Validated as an identifier by env.py before any revision runs.
    role = str(context.config.attributes["app_role"])
    for statement in (
        "ALTER TABLE manifests ADD COLUMN recorded jsonb",
        # Clearing it (erasure) is the only change the app role may make to it.
        f'GRANT UPDATE (recorded) ON manifests TO "{role}"',
    ):
        op.get_bind().exec_driver_sql(statement)


def downgrade() -> None:
    role = str(context.config.attributes["app_role"])
    op.get_bind().exec_driver_sql(f'REVOKE UPDATE (recorded) ON manifests FROM "{role}"')
    op.get_bind().exec_driver_sql("ALTER TABLE manifests DROP COLUMN IF EXISTS recorded")
