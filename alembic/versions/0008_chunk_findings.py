"""Knowledge chunks keep what the detectors found in them at ingest (issue "Performance").

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-03

- ``knowledge_chunks.findings``: ``[fingerprint, [[type, action, start, end], ...]]``, the
  findings of the detector code whose fingerprint it names. A turn seeds its worker's findings
  cache from them instead of scanning every retrieved chunk again (a corpus is larger than any
  per-process cache). NULL for rows written before this revision: scanned when retrieved.
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.get_bind().exec_driver_sql("ALTER TABLE knowledge_chunks ADD COLUMN findings jsonb")


def downgrade() -> None:
    op.get_bind().exec_driver_sql("ALTER TABLE knowledge_chunks DROP COLUMN findings")
