"""Knowledge chunks name the tokenizer their ``tokens`` were counted with (issue
"Performance").

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-03

- ``knowledge_chunks.tokenizer``: a search returns a chunk's stored count only to a service
  counting with the same tokenizer, so a turn does not re-tokenize every retrieved chunk (at
  ~200 us per 1,000 characters, and a corpus larger than any per-process cache). NULL for rows
  written before this revision: those are counted when retrieved, as before.
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.get_bind().exec_driver_sql("ALTER TABLE knowledge_chunks ADD COLUMN tokenizer text")


def downgrade() -> None:
    op.get_bind().exec_driver_sql("ALTER TABLE knowledge_chunks DROP COLUMN tokenizer")
