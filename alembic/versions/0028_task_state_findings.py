"""Task checkpoints and session states carry the detectors' findings in their texts.

Revision ID: 0028
Revises: 0027
Create Date: 2026-12-05

``task_checkpoints.findings``: per task state text (``core``, ``detail``) the digest of the
text as rendered when the revision was written and what the pipeline's detectors found in it,
tagged with the detector code's fingerprint (``app.core.candidates.scan_task_state``). Types
and positions only, no content. NULL for rows written before (their task state is scanned by
the first turn of each worker, as before). ``session_states.findings`` is the same for a
session without a task (``app.core.session_state.scan_session_state``). The tables' grants
cover the new columns.
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0028"
down_revision: str | None = "0027"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


TABLES = ("task_checkpoints", "session_states")


def upgrade() -> None:
    for table in TABLES:
        op.execute(f"ALTER TABLE {table} ADD COLUMN findings jsonb")


def downgrade() -> None:
    for table in TABLES:
        op.execute(f"ALTER TABLE {table} DROP COLUMN IF EXISTS findings")
