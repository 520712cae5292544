"""Embedding provenance: which embedder made each stored vector, so a switch is re-embedded.

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-04

- ``knowledge_chunks.embedder``/``memories.embedder`` (``session_events`` has had one since
  0017): the server model that made the row's vector, or ``client:<model>`` for a vector the
  client supplied while the server's embedder was ``<model>`` (``app.core.embedding_space``).
  Existing rows stay NULL: "made by the embedder configured before provenance was recorded";
  the first worker to start claims them for its embedder in ``embedding_state``.
- ``embedding_state``: one row, not tenant data (no RLS): ``legacy_embedder``, what a NULL
  means (set once, by the first claim); ``embedder``, the embedder the newest started worker
  is configured with, so a switch is detected and an older worker still running stops its
  re-embedding (the two would otherwise undo each other).
- ``ctxgate_embedding_census(table)``: rows per (tenant, embedder) of one embedded table,
  across tenants, for the re-embedder (which tenants have stale rows) and the admin report.
  The tables are under FORCE ROW LEVEL SECURITY, which binds this function's owner too: a
  second policy, ``embedding_census``, lets the owner *read* every row only while the
  option ``ctxgate.embedding_census`` is on, which the function turns on around its one
  query and off again (a function-level ``SET`` of an unregistered option needs a superuser
  to create). The policy applies to the owner alone, so the app role setting that option
  gains nothing, and the function only counts (no text, no vector leaves it). A table is
  embedded when it carries that policy: a later table joins by adding the column, the
  policy, and an entry in ``app.adapters.postgres.embeddings.TABLES``. The re-embedding
  itself runs in each tenant's own RLS-scoped transaction.
- ``(tenant_id, embedder)`` indexes on knowledge chunks and memories keep the census an
  index-only scan and the per-tenant stale lookup cheap. ``session_events`` has none: an
  index there would cost every append, and its census is a scan run at startup and on the
  admin report only.
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import context, op

revision: str = "0018"
down_revision: str | None = "0017"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

NEW_COLUMNS = ("knowledge_chunks", "memories")
EMBEDDED = (*NEW_COLUMNS, "session_events")
CENSUS = "ctxgate_embedding_census(text)"
GUC = "ctxgate.embedding_census"


def _context() -> tuple[str, str, str]:
    bind = op.get_bind()
    schema = str(bind.exec_driver_sql("SELECT current_schema()").scalar_one())
    owner = str(bind.exec_driver_sql("SELECT current_user").scalar_one())
    # Validated as an identifier by env.py before any revision runs.
    return schema, owner, str(context.config.attributes["app_role"])


def _census(schema: str) -> str:
    pin = f'SET search_path = pg_catalog, "{schema}", pg_temp'
    return f"""
CREATE FUNCTION ctxgate_embedding_census(p_table text)
RETURNS TABLE (tenant_id text, embedder text, n bigint)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER {pin} AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_policies p WHERE p.schemaname = '{schema}'
                   AND p.tablename = p_table AND p.policyname = 'embedding_census') THEN
        RAISE EXCEPTION 'not an embedded table: %', p_table;
    END IF;
    PERFORM set_config('{GUC}', 'on', true);
    RETURN QUERY EXECUTE format(
        'SELECT t.tenant_id, t.embedder, count(*) FROM %I.%I t GROUP BY 1, 2 ORDER BY 1, 2',
        '{schema}', p_table);
    PERFORM set_config('{GUC}', 'off', true);
END
$$"""


def upgrade() -> None:
    schema, owner, role = _context()
    statements = [
        *(f"ALTER TABLE {t} ADD COLUMN embedder text" for t in NEW_COLUMNS),
        *(f"CREATE INDEX {t}_embedder ON {t} (tenant_id, embedder)" for t in NEW_COLUMNS),
        *(f'CREATE POLICY embedding_census ON {t} FOR SELECT TO "{owner}" '
          f"USING (current_setting('{GUC}', true) = 'on')" for t in EMBEDDED),
        """CREATE TABLE embedding_state (
    id              boolean PRIMARY KEY DEFAULT true CHECK (id),
    legacy_embedder text NOT NULL,
    embedder        text NOT NULL,
    changed_at      timestamptz NOT NULL DEFAULT now()
)""",
        f'GRANT SELECT, INSERT, UPDATE ON embedding_state TO "{role}"',
        _census(schema),
        f"REVOKE ALL ON FUNCTION {CENSUS} FROM PUBLIC",
        f'GRANT EXECUTE ON FUNCTION {CENSUS} TO "{role}"',
    ]
    for statement in statements:
        op.get_bind().exec_driver_sql(statement)


def downgrade() -> None:
    statements = [
        f"DROP FUNCTION IF EXISTS {CENSUS}",
        "DROP TABLE IF EXISTS embedding_state",
        *(f"DROP POLICY IF EXISTS embedding_census ON {t}" for t in EMBEDDED),
        *(f"DROP INDEX IF EXISTS {t}_embedder" for t in NEW_COLUMNS),
        *(f"ALTER TABLE {t} DROP COLUMN IF EXISTS embedder" for t in NEW_COLUMNS),
    ]
    for statement in statements:
        op.get_bind().exec_driver_sql(statement)
