"""English stemming beside the CJK bigrams in knowledge full-text search.

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-04

``knowledge_chunks.tsv`` is ``to_tsvector('simple', search_text)``: exact lexemes, which CJK
bigrams need, but "research" never matched "researching". ``tsv_en`` is the same normalized
text under the ``english`` configuration (Snowball stemming, English stop words dropped), with
its own GIN index over current chunks; a search matches either (``app.adapters.postgres.
knowledge``). Generated, so ingest writes nothing new and existing rows get it here.
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0015"
down_revision: str | None = "0014"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    bind = op.get_bind()
    for statement in (
        "ALTER TABLE knowledge_chunks ADD COLUMN tsv_en tsvector "
        "GENERATED ALWAYS AS (to_tsvector('english'::regconfig, search_text)) STORED",
        "CREATE INDEX knowledge_chunks_tsv_en ON knowledge_chunks USING gin (tsv_en) "
        "WHERE is_current",
    ):
        bind.exec_driver_sql(statement)


def downgrade() -> None:
    op.get_bind().exec_driver_sql("ALTER TABLE knowledge_chunks DROP COLUMN IF EXISTS tsv_en")
