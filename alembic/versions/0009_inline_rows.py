"""Searched rows keep their embedding inline (issue "Performance").

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-04

A knowledge chunk or memory row is ~2–3.5 kB (text, its normalized copy, tsvector, a 1.5 kB
``vector(384)``). Past PostgreSQL's 2 kB default target the toaster moved the embedding, whose
storage is ``external``, out of line: every distance an exact scan computes, and the distance
column of an HNSW hit, then cost a TOAST index probe and a second heap page (~3.5 buffer
reads a row instead of one). ``toast_tuple_target = 8160`` (the largest allowed) keeps rows up
to a page inline; only a longer one is toasted.

It applies to rows written from now on. Rows written before stay toasted until rewritten:
a re-ingest does it, or ``VACUUM FULL knowledge_chunks, memories`` (an exclusive lock for the
time of the rewrite), which an operator may run in a quiet window.
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TABLES = ("knowledge_chunks", "memories")


def upgrade() -> None:
    for table in TABLES:
        op.get_bind().exec_driver_sql(f"ALTER TABLE {table} SET (toast_tuple_target = 8160)")


def downgrade() -> None:
    for table in TABLES:
        op.get_bind().exec_driver_sql(f"ALTER TABLE {table} RESET (toast_tuple_target)")
