"""The knowledge HNSW graph is built with ef_construction 96 (issue "Performance").

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-04

On the bench's clustered vectors (100k chunks, a tenant holding 22 % of them, 100 queries,
ef_search 150), builds at ef_construction 64 gave recall@10 0.936–0.986 from one build to
the next, a few queries finding none of their true ten: a poorly linked cluster the search
never enters. At 96, two builds gave 0.991 and 0.990 (worst query 0.8); the build took 32 s
instead of 26 s (128: 0.994–0.995 at 40 s, which would take bulk ingest to its 2,000
chunks/s floor).

The setting applies to the graph from now on: rows inserted later, and any rebuild. The
graph already built stays as it is until an operator rebuilds it, without blocking writes:
``REINDEX INDEX CONCURRENTLY knowledge_chunks_embedding``.
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.get_bind().exec_driver_sql(
        "ALTER INDEX knowledge_chunks_embedding SET (ef_construction = 96)")


def downgrade() -> None:
    op.get_bind().exec_driver_sql(
        "ALTER INDEX knowledge_chunks_embedding SET (ef_construction = 64)")
