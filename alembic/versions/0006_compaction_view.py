"""Session compactions keep the view they served, so later turns reuse it (issue
"Performance").

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-02

- ``session_compactions.view``: the session layer a compaction built (its summary block, the
  sticky and recent event seqs it kept, the last seq it read). A later turn whose history
  still fits the threshold serves that view plus the events appended since, instead of
  compacting the whole session again every turn. NULL for rows written before this revision
  (they are simply compacted again once).
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.get_bind().exec_driver_sql("ALTER TABLE session_compactions ADD COLUMN view jsonb")


def downgrade() -> None:
    op.get_bind().exec_driver_sql("ALTER TABLE session_compactions DROP COLUMN view")
