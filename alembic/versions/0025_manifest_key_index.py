"""A runtime key's manifest listing reads its own rows through an index.

Revision ID: 0025
Revises: 0024
Create Date: 2026-12-04

``GET /v1/manifests`` with a runtime key lists only the manifests that key made, and that
condition is now part of the query (it was a filter applied after the LIMIT, which left pages
short). Without this index the newest-first walk of ``manifests_recent`` reads every other
key's rows of the tenant on the way; with it, a page costs its own rows. Its order is the
listing's keyset order (``created_at DESC, turn_id DESC``).
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0025"
down_revision: str | None = "0024"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.get_bind().exec_driver_sql(
        "CREATE INDEX manifests_key ON manifests (tenant_id, key_id, created_at DESC, "
        "turn_id DESC)")


def downgrade() -> None:
    op.get_bind().exec_driver_sql("DROP INDEX IF EXISTS manifests_key")
