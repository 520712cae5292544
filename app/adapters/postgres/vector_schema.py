"""The embedding dimension, checked once at startup against the schema's vector columns.

``settings.embedding_dim`` is the one place the dimension comes from: the embedder is built
with it (``app.adapters.embedders.factory``) and client-supplied vectors are checked against
it. The vector columns were created by the migrations with a fixed dimension; a server whose
embedder produces another one would fail on every write and search. ``check_embedding_dim``
reads every ``vector(n)`` column the app role can see (``pg_attribute.atttypmod`` is ``n``)
and raises ``EmbeddingDimMismatch`` naming each column that differs, so the service refuses
to start. Re-embedding stored rows into a new dimension is not done here.
"""

from __future__ import annotations

from app.adapters.postgres.db import Database, Sql

VECTOR_COLUMNS = Sql("""
SELECT c.relname AS table_name, a.attname AS column_name, a.atttypmod AS dim
FROM pg_attribute a
JOIN pg_class c ON c.oid = a.attrelid
JOIN pg_type t ON t.oid = a.atttypid
WHERE t.typname = 'vector' AND c.relkind IN ('r', 'p') AND a.attnum > 0
    AND NOT a.attisdropped AND pg_table_is_visible(c.oid)
ORDER BY c.relname, a.attname""")


class EmbeddingDimMismatch(RuntimeError):
    """The embedder's dimension is not the one the schema's vector columns hold."""


async def check_embedding_dim(db: Database, dim: int) -> None:
    """Raise ``EmbeddingDimMismatch`` unless every dimensioned vector column holds ``dim``."""
    async with db.unscoped_tx() as conn:
        rows = await conn.fetch(VECTOR_COLUMNS)
    wrong = [f"{r.table_name}.{r.column_name} is vector({r.dim})" for r in rows
             if r.dim > 0 and r.dim != dim]
    if wrong:
        raise EmbeddingDimMismatch(
            f"the embedder produces {dim}-dimensional vectors (settings.embedding_dim) but "
            f"{', '.join(wrong)}: set CTXGATE_EMBEDDING_DIM and the embedder to the schema's "
            f"dimension, or migrate the columns and re-embed")
