"""A client turn's response kept with its manifest, so a retry can always get it back.

Revision ID: 0019
Revises: 0018
Create Date: 2026-12-04

``manifests.replay`` is the exact response body of a turn that had a client ``turn_id``
(prefixed by its request hash, as the Redis replay entry is), written in the manifest's own
INSERT. Redis stays the fast path; when its entry is gone (evicted, Redis down, or the process
killed between the manifest's commit and the Redis write) a retried ``turn_id`` is answered
from here for ``replay_ttl_s``, never 409. It holds envelope content, so erasure clears it
with the rest of the user's manifests, and it is cleared once older than the replay window.
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import context, op

revision: str = "0019"
down_revision: str | None = "0018"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # Validated as an identifier by env.py before any revision runs.
    role = str(context.config.attributes["app_role"])
    for statement in (
        "ALTER TABLE manifests ADD COLUMN replay bytea",
        # Clearing an expired or erased replay is the only change the app role may make.
        f'GRANT UPDATE (replay) ON manifests TO "{role}"',
        "CREATE INDEX manifests_replay_created ON manifests (created_at) "
        "WHERE replay IS NOT NULL",
    ):
        op.get_bind().exec_driver_sql(statement)


def downgrade() -> None:
    role = str(context.config.attributes["app_role"])
    op.get_bind().exec_driver_sql(f'REVOKE UPDATE (replay) ON manifests FROM "{role}"')
    op.get_bind().exec_driver_sql("ALTER TABLE manifests DROP COLUMN IF EXISTS replay")
